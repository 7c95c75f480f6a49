"""How each transformation expands a custom call (``y = rt.custom_call(rules, *xs)``).

The statement stays one primitive until a transformation that must look inside meets
it (``astjax/custom_rules.py`` explains the rules objects):

* reverse mode, before its analyses (``expand_for_reverse``): ``custom_vjp`` calls
  become the user's ``fwd`` inlined, then ``y = rt.custom_apply(rules, res, y_p, *xs)``
  whose backward (``backward``) inlines ``bwd(*xs, res, g)``; ``custom_jvp`` and
  ``checkpoint`` calls keep their opaque primal (the forward sweep saves nothing inside
  it) and get the derived backward rule (transpose of the jvp; recompute);
* forward mode (``tangent``): the jvp rule inlined; ``custom_vjp`` refused; with
  ``symbolic_zeros=True`` the rule variant that takes only the active tangents and
  makes ``SymbolicZero`` for the others (``Rules.tangent_rule_for``);
* vmap (``batched``): the same statement on the batched rules.
"""
from __future__ import annotations

from astjax import core
from astjax.core import Const, Index, Prim, Var
from astjax.errors import DifferentiationError

CUSTOM_PRIMS = ("custom_call", "custom_apply")


def rules_of(env, op):
    """The Rules object a custom statement's first operand names."""
    if not isinstance(op, Var) or op.name not in env.entries:
        raise TypeError(f"not a custom rules operand: {op!r}")
    entry = env.entries[op.name]
    if entry[0] == "global":
        return entry[1][entry[2]]
    if entry[0] == "cell":
        return entry[1].cell_contents
    return entry[1]


def inline(norm, fn, operands, hint, loc):
    """(statements, result operand) of ``fn(*operands)`` inlined by normalizer ``norm``."""
    out: list = []
    saved = norm.loc
    norm.loc = loc
    try:
        with norm.emitting(out):
            result = norm.call_function_ref(("object", fn), list(operands), {}, None, hint,
                                            None)
    finally:
        norm.loc = saved
    for st in core.walk(out):
        if st.loc is None:
            st.loc = loc
    return out, result


# ------------------------------------------------------------------------- reverse mode

def expand_for_reverse(fn, make_normalizer):
    """Rewrite the custom calls of ``fn`` (in place) for reverse mode."""
    if not any(isinstance(s, Prim) and s.prim == "custom_call" for s in core.walk(fn.body)):
        return
    norm = make_normalizer(fn.env.names, fn.env)

    def block(stmts):
        out = []
        for s in stmts:
            for b in core.child_blocks(s):
                b[:] = block(b)
            if isinstance(s, Prim) and s.prim == "custom_call" and not getattr(
                    s, "expanded", False):
                out.extend(_expand_call(fn, norm, s))
            else:
                out.append(s)
        return out
    fn.body[:] = block(fn.body)


def _expand_call(fn, norm, s):
    rules = rules_of(fn.env, s.args[0])
    xs = tuple(s.args[1])
    names = fn.env.names
    y = s.target or names.fresh("custom_out")
    y_p = names.fresh(f"{y}_primal")
    if rules.fwd is not None:
        stmts, pair = inline(norm, rules.fwd, xs, f"{y}_fwd", s.loc)
        res = names.fresh(f"{y}_res")
        stmts += [Prim(y_p, "getitem", [pair, Index((Const(0),))], loc=s.loc),
                  Prim(res, "getitem", [pair, Index((Const(1),))], loc=s.loc)]
        res = Var(res)
    else:
        stmts = [Prim(y_p, "custom_call", [s.args[0], xs], loc=s.loc)]
        stmts[0].expanded = True   # the primal run: its derivative is custom_apply's
        res = Const(None)
    return stmts + [Prim(y, "custom_apply", [s.args[0], res, Var(y_p), xs], loc=s.loc)]


def backward(rad, s, g, positions, ans):
    """``ReverseAD.inline_template`` for ``custom_apply``: the backward rule inlined."""
    rules = rules_of(rad.fn.env, s.args[0])
    res, xs = s.args[1], s.args[3]
    names = rad.names
    norm = rad.make_normalizer(names, rad.fn.env)
    full = names.fresh(f"{g}_full")
    stmts = [Prim(full, "instantiate", [Var(g), Var(ans)], loc=s.loc)]
    wanted = tuple(p for p in positions if rules.diff[p])
    if not wanted:
        return [], [None] * len(positions)
    bwd, diffpos = rules.bwd_for(wanted)
    body, cts = inline(norm, bwd, list(xs) + [res, Var(full)], rad.d(s.target), s.loc)
    stmts += body
    diffpos = list(diffpos)
    outs = []
    for pos in positions:
        if not rules.diff[pos]:
            outs.append(None)
            continue
        t = names.fresh(f"{g}_{pos}")
        stmts.append(Prim(t, "getitem", [cts, Index((Const(diffpos.index(pos)),))],
                          loc=s.loc))
        outs.append(Var(t))
    rad.meta_operands(stmts)
    return stmts, outs


# ------------------------------------------------------------------------- forward mode

def tangent(fad, s):
    """``ForwardAD.prim_tangent`` for custom statements: the jvp rule inlined."""
    rules = rules_of(fad.fn.env, s.args[0])
    xs = tuple(s.args[-1])
    if rules.kind == "vjp":
        raise DifferentiationError(
            f"can't apply forward-mode differentiation (jvp, jacfwd, hessian) to the "
            f"custom_vjp function {rules.name}", s.loc,
            "use reverse mode (grad, vjp, jacrev), or define the function with "
            "custom_jvp, whose rule serves both modes")
    pre, ts = [], []
    zeros = [not fad.active(x) for x, d in zip(xs, rules.diff) if d]
    rule = rules.tangent_rule_for(zeros) if rules.kind == "jvp" else None
    for x, d in zip(xs, rules.diff):
        if not d:
            continue
        if rule is not None and not fad.active(x):
            continue            # a SymbolicZero inside the rule (symbolic_zeros=True)
        if fad.active(x):
            ts.append(Var(fad.dot(x.name)))
        else:
            z = fad.names.fresh(f"{getattr(x, 'name', 'x')}_zero")
            pre.append(Prim(z, "zeros_like", [x], loc=s.loc))
            ts.append(Var(z))
    norm = fad.make_normalizer(fad.names, fad.fn.env)
    dot = fad.dot(s.target)
    stmts, pair = inline(norm, rule or rules.tangent_rule, list(xs) + ts, dot, s.loc)
    return pre + stmts + [Prim(dot, "getitem", [pair, Index((Const(1),))], loc=s.loc)]


# ---------------------------------------------------------------------------------- vmap

def batched(bt, s):
    """``Batch.prim`` for custom statements with a batched operand: batched rules."""
    env = bt.fn.env
    rules = rules_of(env, s.args[0])
    xs = tuple(s.args[-1])
    axes = tuple(-1 if bt.is_batched(x) else None for x in xs)
    loc = s.loc
    pre: list = []
    if not any(a is not None for a in axes):
        # only the residuals or the value differ per lane: batch the operands
        xs = tuple(bt.batch_operand(x, pre, loc) if isinstance(x, Var) else x for x in xs)
        axes = tuple(-1 if isinstance(x, Var) else None for x in xs)
        if not any(a is not None for a in axes):
            bt.error(s, f"vmap of the custom function {rules.name} with no batched argument")
    rb = rules.batched(axes)
    ref = Var(env.value_ref(rb, rb.name))
    if s.prim == "custom_call":
        return pre + [Prim(s.target, "custom_call", [ref, xs], loc=loc)]
    res, value = s.args[1], s.args[2]
    if isinstance(res, Var):
        res = bt.batch_operand(res, pre, loc)
    if isinstance(value, Var):
        value = bt.batch_operand(value, pre, loc)
    return pre + [Prim(s.target, "custom_apply", [ref, res, value, xs], loc=loc)]


# -------------------------------------------------------------------------- eval_shape

def abstract_value(prim, args):
    """eval_shape of a custom statement: the primal's shapes (or the value it stands for)."""
    if prim == "custom_call":
        from astjax.shapes import eval_shape
        return eval_shape(args[0].primal, *args[1])
    return args[2] if prim == "custom_apply" else args[0]
