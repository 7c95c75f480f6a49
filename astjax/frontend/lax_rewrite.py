"""Rewrite ``astjax.lax`` calls into core-form control flow, bodies inlined.

``lax.cond`` becomes an ``if``, ``lax.switch`` a chain of ``if``s on the clamped
index, ``lax.fori_loop``/``lax.scan``/``lax.map`` a ``for`` over a range and
``lax.while_loop`` a ``while``.  The body functions (lambdas, nested defs, module
functions, closures) are inlined at the call, so every transformation sees plain
loops and branches.  Each handler takes the normalizer, the call node, a name hint
and an optional target, and returns the operand holding the result.
"""
from __future__ import annotations

import functools

import gast

from astjax import lax
from astjax.core import Const, Copy, For, If, Index, Prim, Var, While
from astjax.errors import TransformError


def _bind(norm, node, names, defaults, what):
    """Match a lax call's arguments (gast nodes) to parameter names."""
    if any(isinstance(a, gast.Starred) for a in node.args) or any(
            k.arg is None for k in node.keywords):
        norm.error(node, f"lax.{what}: *args/**kwargs are not supported here",
                   "pass the arguments explicitly", cls=TransformError)
    bound = dict(zip(names, node.args))
    if len(node.args) > len(names) and not names[-1].startswith("*"):
        norm.error(node, f"lax.{what} takes at most {len(names)} arguments",
                   cls=TransformError)
    for kw in node.keywords:
        if kw.arg not in names or kw.arg in bound:
            norm.error(node, f"lax.{what} got an unexpected keyword argument {kw.arg!r}",
                       cls=TransformError)
        bound[kw.arg] = kw.value
    for n in names:
        if n not in bound and n not in defaults:
            norm.error(node, f"lax.{what} is missing its argument {n!r}", cls=TransformError)
    return bound


def _out(norm, target, hint, suffix):
    return target if target is not None else norm.tmp(hint, suffix)


def _static_bool(norm, node, what):
    op = norm.expr(node, what)
    if not isinstance(op, Const):
        norm.error(node, f"{what} must be a constant True/False here",
                   "write reverse=True or reverse=False", cls=TransformError)
    return bool(op.value)


def handle_cond(norm, node, hint, target):
    if len(node.args) < 3:
        norm.error(node, "lax.cond(pred, true_fun, false_fun, *operands) needs 3 arguments",
                   cls=TransformError)
    pred = norm.expr(node.args[0], "pred")
    true_ref = norm.function_ref(node.args[1])
    false_ref = norm.function_ref(node.args[2])
    operands = [norm.expr(a, hint) for a in node.args[3:]]
    out = _out(norm, target, hint, "cond")
    body: list = []
    orelse: list = []
    with norm.emitting(body):
        norm.call_function_ref(true_ref, operands, {}, node, out, out)
    with norm.emitting(orelse):
        norm.call_function_ref(false_ref, operands, {}, node, out, out)
    pred = norm._protect_test(pred, body + orelse)
    norm.emit(If(pred, body, orelse))
    return Var(out)


def _branch_refs(norm, node):
    if isinstance(node, (gast.List, gast.Tuple)):
        return [norm.function_ref(e) for e in node.elts]
    seq = norm._peek(node) if isinstance(node, (gast.Name, gast.Attribute)) else None
    if seq is not None and type(seq).__name__ == "StaticSeq" and seq.keys is None:
        return [("element", e) for e in seq.items]  # branches = [f, g]; lax.switch(i, branches)
    value = norm.static_value(node)
    if isinstance(value, (list, tuple)) and value and all(callable(v) for v in value):
        return [("object", v) for v in value]
    norm.error(node, "lax.switch: branches must be a list or tuple of functions",
               "write the branches inline: [f0, f1, lambda x: ...]", cls=TransformError)


def handle_switch(norm, node, hint, target):
    if len(node.args) < 2:
        norm.error(node, "lax.switch(index, branches, *operands) needs 2 arguments",
                   cls=TransformError)
    index = norm.expr(node.args[0], "index")
    refs = _branch_refs(norm, node.args[1])
    operands = [norm.expr(a, hint) for a in node.args[2:]]
    out = _out(norm, target, hint, "switch")
    idx = norm.tmp(hint, "branch")
    norm.emit(Prim(idx, "clamp_index", [index, Const(len(refs))]))

    def chain(k):
        if k == len(refs) - 1:
            norm.call_function_ref(refs[k], operands, {}, node, out, out)
            return
        is_k = norm.fresh(f"is_branch_{k}")
        eq = norm.operator_prim(gast.Eq(), node)
        norm.emit(Prim(is_k, eq.name, norm.bind(eq, [Var(idx), Const(k)], {}, node)))
        body: list = []
        orelse: list = []
        with norm.emitting(body):
            norm.call_function_ref(refs[k], operands, {}, node, out, out)
        with norm.emitting(orelse):
            chain(k + 1)
        norm.emit(If(Var(is_k), body, orelse))

    chain(0)
    return Var(out)


def handle_select(norm, node, hint, target):
    b = _bind(norm, node, ["pred", "on_true", "on_false"], {}, "select")
    ops = [norm.expr(b[k], hint) for k in ("pred", "on_true", "on_false")]
    from astjax import primitives as P
    import numpy as np
    prim = P.lookup_callable(np.where)
    out = _out(norm, target, hint, "select")
    norm.emit(Prim(out, prim.name, norm.bind(prim, ops, {}, node)))
    return Var(out)


def handle_fori_loop(norm, node, hint, target):
    b = _bind(norm, node, ["lower", "upper", "body_fun", "init_val", "unroll"],
              {"unroll": None}, "fori_loop")
    if "unroll" in b:
        norm.expr(b["unroll"], "unroll")
    lower = norm.expr(b["lower"], "lower")
    upper = norm.expr(b["upper"], "upper")
    body_ref = norm.function_ref(b["body_fun"])
    carry = norm.fresh("carry")
    norm.expr(b["init_val"], carry, target=carry)
    i = norm.fresh("i")
    body: list = []
    with norm.emitting(body):
        norm.call_function_ref(body_ref, [Var(i), Var(carry)], {}, node, carry, carry)
    norm.emit(For(i, Prim(None, "range", [lower, upper, Const(None)]), body))
    return _result(norm, carry, target)


def _result(norm, var, target):
    if target is not None and target != var:
        norm.emit(Copy(target, Var(var)))
        return Var(target)
    return Var(var)


def handle_while_loop(norm, node, hint, target):
    b = _bind(norm, node, ["cond_fun", "body_fun", "init_val"], {}, "while_loop")
    cond_ref = norm.function_ref(b["cond_fun"])
    body_ref = norm.function_ref(b["body_fun"])
    carry = norm.fresh("carry")
    norm.expr(b["init_val"], carry, target=carry)
    test = norm.fresh("keep_going")
    test_body: list = []
    with norm.emitting(test_body):
        norm.call_function_ref(cond_ref, [Var(carry)], {}, node, test, test)
    body: list = []
    with norm.emitting(body):
        norm.call_function_ref(body_ref, [Var(carry)], {}, node, carry, carry)
    norm.emit(While(test_body, Var(test), body))
    return _result(norm, carry, target)


def _loop_over_steps(norm, node, xs, n, reverse, step_fn):
    """``for step in range(n)`` with ``x = xs[step]`` (or from the end), calling step_fn(x)."""
    step = norm.fresh("i")
    body: list = []
    with norm.emitting(body):
        idx = Var(step)
        if reverse:
            sub = norm.operator_prim(gast.Sub(), node)
            last = norm.fresh("last")
            norm.emit(Prim(last, sub.name, norm.bind(sub, [n, Const(1)], {}, node)))
            back = norm.fresh("index")
            norm.emit(Prim(back, sub.name, norm.bind(sub, [Var(last), Var(step)], {}, node)))
            idx = Var(back)
        x = Const(None)
        if not (isinstance(xs, Const) and xs.value is None):
            xv = norm.fresh("x")
            norm.emit(Prim(xv, "tree_index", [xs, idx]))
            x = Var(xv)
        step_fn(x)
    norm.emit(For(step, Prim(None, "range", [Const(0), n, Const(None)]), body))


def handle_scan(norm, node, hint, target):
    b = _bind(norm, node, ["f", "init", "xs", "length", "reverse", "unroll"],
              {"xs": None, "length": None, "reverse": False, "unroll": 1}, "scan")
    f_ref = norm.function_ref(b["f"])
    carry = norm.fresh("carry")
    norm.expr(b["init"], carry, target=carry)
    xs = norm.expr(b["xs"], "xs") if "xs" in b else Const(None)
    length = norm.expr(b["length"], "length") if "length" in b else Const(None)
    reverse = _static_bool(norm, b["reverse"], "reverse") if "reverse" in b else False
    if "unroll" in b:
        norm.expr(b["unroll"], "unroll")
    n = norm.fresh("n_steps")
    norm.emit(Prim(n, "scan_length", [xs, length]))
    ys_list = norm.fresh("ys_steps")
    norm.emit(Prim(ys_list, "make_list", [()]))

    def step(x):
        out = norm.fresh("step_out")
        norm.call_function_ref(f_ref, [Var(carry), x], {}, node, out, out)
        norm.emit(Prim(carry, "getitem", [Var(out), Index((Const(0),))]))
        y = norm.fresh("y")
        norm.emit(Prim(y, "getitem", [Var(out), Index((Const(1),))]))
        norm.emit(Prim(y, "compact", [Var(y)]))
        norm.emit(Prim(ys_list, "append", [Var(ys_list), Var(y)]))

    _loop_over_steps(norm, node, xs, Var(n), reverse, step)
    ys = norm.fresh("ys")
    norm.emit(Prim(ys, "tree_stack", [Var(ys_list), Const(reverse)]))
    out = _out(norm, target, hint, "scan")
    norm.emit(Prim(out, "make_tuple", [(Var(carry), Var(ys))]))
    return Var(out)


def handle_map(norm, node, hint, target):
    b = _bind(norm, node, ["f", "xs", "batch_size"], {"batch_size": None}, "map")
    if "batch_size" in b:
        norm.expr(b["batch_size"], "batch_size")
    f_ref = norm.function_ref(b["f"])
    xs = norm.expr(b["xs"], "xs")
    n = norm.fresh("n_steps")
    norm.emit(Prim(n, "scan_length", [xs, Const(None)]))
    ys_list = norm.fresh("ys_steps")
    norm.emit(Prim(ys_list, "make_list", [()]))

    def step(x):
        y = norm.fresh("y")
        norm.call_function_ref(f_ref, [x], {}, node, y, y)
        norm.emit(Prim(y, "compact", [Var(y)]))
        norm.emit(Prim(ys_list, "append", [Var(ys_list), Var(y)]))

    _loop_over_steps(norm, node, xs, Var(n), False, step)
    out = _out(norm, target, hint, "map")
    norm.emit(Prim(out, "tree_stack", [Var(ys_list), Const(False)]))
    return Var(out)


def handle_functools_reduce(norm, node, hint, target):
    """``functools.reduce(f, seq[, initial])``: unrolled over a sequence of known length
    (a literal, ``*args``), else a loop over the items of the run-time sequence."""
    b = _bind(norm, node, ["function", "iterable", "initial"], {"initial": None}, "reduce")
    ref = norm.function_ref(b["function"])
    acc = _out(norm, target, hint, "reduced")
    items = norm.static_items_of(b["iterable"], hint)
    if items is not None:
        items = [norm.plain(i, node) for i in items]
        if "initial" in b:
            norm.expr(b["initial"], acc, target=acc)
        elif not items:
            norm.error(node, "reduce() of an empty sequence with no initial value",
                       cls=TransformError)
        else:
            norm.emit(Copy(acc, items.pop(0)))
        for item in items:
            norm.call_function_ref(ref, [Var(acc), item], {}, node, acc, acc)
        return Var(acc)
    seq = norm.expr(b["iterable"], hint)
    n = norm.tmp(hint, "count")
    norm.emit(Prim(n, "len", [seq]))
    if "initial" in b:
        norm.expr(b["initial"], acc, target=acc)
        start = Const(0)
    else:
        norm.emit(Prim(acc, "getitem", [seq, Index((Const(0),))]))
        start = Const(1)
    i = norm.fresh("i")
    item = norm.tmp(hint, "item")
    body: list = []
    with norm.emitting(body):
        norm.emit(Prim(item, "getitem", [seq, Index((Var(i),))]))
        norm.call_function_ref(ref, [Var(acc), Var(item)], {}, node, acc, acc)
    norm.emit(For(i, Prim(None, "range", [start, Var(n), Const(None)]), body))
    return Var(acc)


HANDLERS = {
    id(functools.reduce): handle_functools_reduce,
    id(lax.cond): handle_cond,
    id(lax.switch): handle_switch,
    id(lax.select): handle_select,
    id(lax.fori_loop): handle_fori_loop,
    id(lax.while_loop): handle_while_loop,
    id(lax.scan): handle_scan,
    id(lax.map): handle_map,
}
