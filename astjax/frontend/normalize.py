"""Normalize a user function's gast AST into the core form (see ``astjax.core``).

What happens here, in one pass over the AST:

* names are resolved: locals stay locals, free names are looked up in the
  function's closure cells, globals and builtins, and classified (NumPy primitive,
  user function to inline, module, captured value);
* expressions are flattened to one primitive per statement, temporaries named after
  the user's variables (``outputs = jnp.dot(inputs, W) + b`` becomes
  ``outputs_dot = np.dot(inputs, W)`` and ``outputs = outputs_dot + b``);
* everyday Python is desugared: ``a if c else b``, ``and``/``or``, chained
  comparisons, comprehensions, augmented and tuple assignment, ``for`` over
  sequences/zip/enumerate/reversed, ``break``/``continue``/early ``return`` (flags and
  guards), ``lst.append``;
* calls to user functions, nested ``def``s and lambdas are inlined, with their
  locals renamed apart;
* anything unsupported raises ``TransformError`` at the user's line.
"""
from __future__ import annotations

import builtins
import functools
import inspect
import operator
import types
from contextlib import contextmanager
from dataclasses import dataclass, field

import gast

import numpy as np

from astjax import codegen, core
from astjax import primitives as P
from astjax.core import (Assert, Const, Copy, External, For, If, Index, Prim, Raise, Return,
                         SetItem, SliceAtom, Var, While)
from astjax.errors import Location, TransformError, UnsupportedSyntaxError
from astjax.frontend.names import NameGen
from astjax.frontend.resolve import scope_info
from astjax.frontend.source import get_function_source, unwrap_callable

import astjax.core_prims  # noqa: F401  (registers the core primitives)

# id(callable) -> handler(normalizer, call_node, hint, target): calls that are
# rewritten rather than called (the astjax.lax constructs).
from astjax.frontend.lax_rewrite import HANDLERS as SPECIAL_CALLS  # noqa: E402
import astjax.frontend.tree_calls  # noqa: E402,F401  (tree_util calls join SPECIAL_CALLS)

_SCALAR_TYPES = (bool, int, float, complex, str, bytes, type(None))
_OP_NAMES = {
    "Add": "add", "Sub": "sub", "Mult": "mul", "Div": "div", "FloorDiv": "floordiv",
    "Mod": "mod", "Pow": "pow", "MatMult": "matmul", "USub": "neg", "UAdd": "pos",
    "Invert": "inv", "Lt": "lt", "LtE": "le", "Gt": "gt", "GtE": "ge", "Eq": "eq",
    "NotEq": "ne", "BitAnd": "and", "BitOr": "or", "BitXor": "xor",
}


# --------------------------------------------------------------------------- environment

class Env:
    """Values generated code reads from outside the function (globals, cells, constants).

    Each gets a name in the generated module's namespace; ``current()`` re-reads
    globals and cells, so rebinding a module global after transformation is seen on
    the next call, as with plain Python.
    """

    def __init__(self, names: NameGen):
        self.names = names
        self.entries: dict[str, tuple] = {}
        self._keys: dict[tuple, str] = {}

    def _add(self, key, hint, entry):
        name = self._keys.get(key)
        if name is None:
            name = self.names.fresh(hint)
            self._keys[key] = name
            self.entries[name] = entry
        return name

    def global_ref(self, gdict, key):
        return self._add(("g", id(gdict), key), key, ("global", gdict, key))

    def cell_ref(self, cell, hint):
        return self._add(("c", id(cell)), hint, ("cell", cell))

    def value_ref(self, obj, hint):
        return self._add(("v", id(obj)), hint, ("value", obj))

    def current(self) -> dict:
        out = {}
        for name, entry in self.entries.items():
            kind = entry[0]
            if kind == "global":
                out[name] = entry[1][entry[2]] if entry[2] in entry[1] else getattr(
                    builtins, entry[2])
            elif kind == "cell":
                out[name] = entry[1].cell_contents
            else:
                out[name] = entry[1]
        return out


# ------------------------------------------------------------------------------ scopes

@dataclass
class LocalFunc:
    node: object          # gast.FunctionDef | gast.Lambda
    scope: "Scope"        # the scope it was defined in (its free names resolve there)


@dataclass
class ObjFunc:
    """A local name bound to a known callable (``apply(np.tanh, x)`` binds f = np.tanh)."""

    obj: object
    operand: object


@dataclass
class FuncArg:
    """A call argument that is a function: inlined callees receive the function itself."""

    func: object  # LocalFunc | ObjFunc


@dataclass
class Scope:
    """One function being normalized (the outer one, or one being inlined)."""

    fsrc: object                    # FunctionSource (for free names, file, defaults)
    name: str
    parent: "Scope | None" = None
    rename: dict = field(default_factory=dict)       # user local name -> operand
    local_names: set = field(default_factory=set)
    local_funcs: dict = field(default_factory=dict)
    ret_target: str | None = None
    ret_flag: str | None = None
    simple_return: bool = True


@dataclass
class LoopCtx:
    brk: str | None = None
    cont: str | None = None


def _assigned_names(fn_node) -> set:
    """Names local to a function (beniget: parameters, assignments, nested defs)."""
    return set(scope_info(fn_node).locals)


def _rebound_names(fn_node) -> set:
    """Names the function body itself assigns (a parameter here is reassigned)."""
    out = set()
    body = fn_node.body if isinstance(fn_node.body, list) else [fn_node.body]
    stack = list(body)
    while stack:
        n = stack.pop()
        if isinstance(n, (gast.FunctionDef, gast.Lambda)):
            if isinstance(n, gast.FunctionDef):
                out.add(n.name)
            continue
        if isinstance(n, gast.Name) and isinstance(n.ctx, (gast.Store, gast.Del)):
            out.add(n.id)
        if isinstance(n, gast.Subscript) and isinstance(n.ctx, gast.Store) and isinstance(
                n.value, gast.Name):
            out.add(n.value.id)  # y[i] = v updates y in place: never substitute it
        if isinstance(n, (gast.ListComp, gast.GeneratorExp, gast.SetComp, gast.DictComp)):
            for g in n.generators:
                stack.append(g.iter)
            continue
        stack.extend(gast.iter_child_nodes(n))
    return out


def _ordered_names(fn_node):
    return list(scope_info(fn_node).locals)


def _params_of(args: gast.arguments):
    names = [a.id for a in args.posonlyargs + args.args + args.kwonlyargs]
    return names


def _has_inner_return(stmts, top=True) -> bool:
    """True when a return appears anywhere but as the last top-level statement."""
    for i, st in enumerate(stmts):
        if isinstance(st, gast.Return):
            if not (top and i == len(stmts) - 1):
                return True
        for name in ("body", "orelse"):
            block = getattr(st, name, None)
            if isinstance(block, list) and not isinstance(st, gast.FunctionDef):
                if _has_inner_return(block, top=False):
                    return True
    return False


# -------------------------------------------------------------------------- normalizer

class Normalizer:
    """Builds one core Function; inlined callees share its names and emission."""

    MAX_INLINE_DEPTH = 64

    def __init__(self, names: NameGen | None = None):
        self.names = names or NameGen()
        self.env = Env(self.names)
        self.out: list = []
        self.loc: Location | None = None
        self.scope: Scope | None = None
        self.loops: list[LoopCtx] = []
        self.inline_stack: list = []

    # ------------------------------------------------------------------ utilities

    def error(self, node, message, hint=None, cls=UnsupportedSyntaxError):
        raise cls(message, self.location(node), hint)

    def location(self, node) -> Location | None:
        if self.scope is None or node is None or not hasattr(node, "lineno"):
            return self.loc
        behind = codegen.origin(self.scope.fsrc.filename, node.lineno)
        if behind is not None:
            return behind  # generated code read again: point at the user's line
        return Location(self.scope.fsrc.filename, node.lineno, node.col_offset,
                        getattr(node, "end_col_offset", None)
                        if getattr(node, "end_lineno", node.lineno) == node.lineno else None,
                        self.scope.name)

    def emit(self, stmt):
        stmt.loc = self.loc
        self.out.append(stmt)
        return stmt

    @contextmanager
    def emitting(self, block):
        saved = self.out
        self.out = block
        try:
            yield block
        finally:
            self.out = saved

    def fresh(self, base):
        return self.names.fresh(base)

    def tmp(self, hint, suffix):
        return self.fresh(f"{hint}_{suffix}" if hint else suffix)

    # --------------------------------------------------------------- entry point

    def function(self, fn, name=None, static_functions=None) -> core.Function:
        """Normalize a Python callable into a core Function with the same parameters.

        ``static_functions``: {positional index: function} for arguments that are
        functions; calls of those parameters inline the given function.
        """
        func, pargs, pkwargs = unwrap_callable(fn)
        generated = getattr(func, "_astjax_generated", None)
        if generated is not None:
            func = generated()  # grad(grad(f)): transform the code grad(f) runs
            # (vjp's vjp_fn runs generated code bound to its residuals: a partial)
            func, more, more_kw = unwrap_callable(func)
            pargs, pkwargs = tuple(more) + tuple(pargs), {**more_kw, **pkwargs}
        fsrc = get_function_source(func)
        node = fsrc.node
        args = node.args
        scope = Scope(fsrc, fsrc.name)
        self.scope = scope
        if args.vararg or args.kwarg:
            self.error(args.vararg or args.kwarg,
                       f"{fsrc.name}: *args/**kwargs parameters are not supported",
                       "give the function explicit parameters")
        params = _params_of(args)
        self._enter_locals(scope, node)
        for p in params:
            scope.rename[p] = Var(self.fresh(p))
        # (keyword-only parameters count after the positional ones: transformations
        # bind a call to one value per parameter, in this order)
        remaining_pos = [p for p in params
                         if p not in set(params[:len(pargs)]) and p not in pkwargs]
        for i, f in (static_functions or {}).items():
            if i < len(remaining_pos):
                p = remaining_pos[i]
                scope.local_funcs[p] = ObjFunc(f, self.object_operand(f, p))
        self._rename_locals(scope, node)
        self.scope = scope
        self.loc = self.location(node)
        body: list = []
        bound = dict(zip(params, pargs))
        bound.update(pkwargs)
        with self.emitting(body):
            for pname, value in bound.items():
                if pname not in scope.rename:
                    self.error(node, f"partial binds unknown parameter {pname!r}")
                if callable(value) and not isinstance(value, (np.ndarray, np.generic, type)):
                    # partial(f, act=np.sin): calls of act inline np.sin
                    scope.local_funcs[pname] = ObjFunc(value, self.object_operand(value, pname))
                    continue
                ref = self.env.value_ref(value, pname)
                self.emit(Copy(scope.rename[pname].name, Var(ref)))
            result = self.fresh(fsrc.name if fsrc.name != "<lambda>" else "out")
            self._body(scope, node, result)
            self.emit(Return(Var(result)))
        remaining = [scope.rename[p].name for p in params if p not in bound]
        defaults = {scope.rename[p].name: Var(self.env.value_ref(v, f"{p}_default"))
                    for p, v in fsrc.defaults.items() if p not in bound}
        kwonly = [scope.rename[a.id].name for a in args.kwonlyargs if a.id not in bound]
        return core.Function(name or fsrc.name, remaining, body, loc=self.location(node),
                             source_name=fsrc.name, env=self.env, defaults=defaults,
                             kwonly=kwonly)

    def template(self, src, fnode, bindings, loc, hint):
        """Inline a rule template: (statements, operand per returned entry).

        ``bindings`` maps the template's parameters to operands; locals get names
        prefixed with ``hint`` so the generated backward code reads naturally.
        """
        scope = Scope(src, fnode.name)
        params = [a.id for a in fnode.args.args + fnode.args.kwonlyargs]
        if fnode.args.vararg is not None:
            params.append(fnode.args.vararg.id)
        scope.local_names = _assigned_names(fnode) | set(params)
        for p in params:
            scope.rename[p] = bindings.get(p, Const(None))
        for name in _ordered_names(fnode):
            if name not in scope.rename:
                scope.rename[name] = Var(self.fresh(f"{hint}_{name}"))
        body = fnode.body
        if body and isinstance(body[0], gast.Expr) and isinstance(body[0].value, gast.Constant):
            body = body[1:]
        if not body or not isinstance(body[-1], gast.Return) or body[-1].value is None:
            raise TransformError(f"rule template {fnode.name} must end with a return",
                                 self.location(fnode))
        out: list = []
        saved = self.scope, self.loops, self.loc
        self.scope, self.loops = scope, []
        try:
            with self.emitting(out):
                self.stmt_list(body[:-1])
                self.loc = loc
                ret = body[-1].value
                elts = ret.elts if isinstance(ret, gast.Tuple) else [ret]
                results = [self.expr(e, hint) for e in elts]
        finally:
            self.scope, self.loops, self.loc = saved
        return out, results

    def _enter_locals(self, scope, node):
        scope.local_names = _assigned_names(node) | set(_params_of(node.args))

    def _rename_locals(self, scope, node):
        """Give every local a generated name up front (first appearance order)."""
        for name in _ordered_names(node):
            if name in scope.local_names and name not in scope.rename:
                scope.rename[name] = Var(self.fresh(name))

    def _body(self, scope, node, result):
        """Normalize a function body whose return value goes into ``result``."""
        scope.ret_target = result
        if isinstance(node, gast.Lambda):
            self.expr(node.body, result, target=result)
            return
        stmts = node.body
        if stmts and isinstance(stmts[0], gast.Expr) and isinstance(
                stmts[0].value, gast.Constant) and isinstance(stmts[0].value.value, str):
            stmts = stmts[1:]  # docstring
        scope.simple_return = not _has_inner_return(stmts)
        if not scope.simple_return:
            scope.ret_flag = self.fresh("returned")
            self.emit(Copy(scope.ret_flag, Const(False)))
            self.emit(Copy(result, Const(None)))
        elif not stmts or not isinstance(stmts[-1], gast.Return):
            self.emit(Copy(result, Const(None)))
        self.stmt_list(stmts)

    # ---------------------------------------------------------------- statements

    def stmt_list(self, stmts) -> set:
        """Normalize statements into self.out; returns the jump flags they may set."""
        jumps: set = set()
        for i, st in enumerate(stmts):
            j = self.stmt(st)
            jumps |= j
            if j and i < len(stmts) - 1:
                self.loc = self.location(stmts[i + 1])
                go = self.fresh("go_on")
                self.emit(Prim(go, "no_flags", [tuple(Var(f) for f in sorted(j))]))
                guarded: list = []
                with self.emitting(guarded):
                    jumps |= self.stmt_list(stmts[i + 1:])
                self.emit(If(Var(go), guarded, []))
                break
        return jumps

    def stmt(self, st) -> set:
        self.loc = self.location(st)
        method = getattr(self, "stmt_" + type(st).__name__, None)
        if method is None:
            what = {"Try": "try/except", "With": "with", "AsyncWith": "async with",
                    "ClassDef": "a class definition", "Global": "global",
                    "Nonlocal": "nonlocal", "Delete": "del", "Import": "import",
                    "ImportFrom": "import", "AsyncFor": "async for",
                    "AsyncFunctionDef": "async def", "Match": "match"}.get(
                type(st).__name__, type(st).__name__)
            self.error(st, f"{what} is not supported inside a transformed function",
                       _HINTS.get(type(st).__name__))
        return method(st) or set()

    def stmt_Pass(self, st):
        return set()

    def stmt_Expr(self, st):
        v = st.value
        if isinstance(v, gast.Constant):
            return set()
        if isinstance(v, (gast.Yield, gast.YieldFrom, gast.Await)):
            self.error(st, "generators and coroutines are not supported",
                       "return a list or an array instead of yielding")
        self.expr(v, "", target=None, discard=True)
        return set()

    def stmt_Assign(self, st):
        targets = st.targets
        if len(targets) == 1:
            self.assign(targets[0], st.value)
            return set()
        first = targets[0]
        if isinstance(first, gast.Name):
            self.assign(first, st.value)
            src = self.load_name(first.id, first)
        else:
            src = self.expr(st.value, "value")
            self.assign_operand(first, src)
        for t in targets[1:]:
            self.assign_operand(t, src)
        return set()

    def stmt_AnnAssign(self, st):
        if st.value is not None:
            self.assign(st.target, st.value)
        return set()

    def stmt_AugAssign(self, st):
        prim = self.operator_prim(st.op, st)
        t = st.target
        if isinstance(t, gast.Name):
            var = self.store_name(t.id, t)
            cur = self.load_name(t.id, t)
            rhs = self.expr(st.value, var)
            self.emit(Prim(var, prim.name, self.bind(prim, [cur, rhs], {}, st)))
        elif isinstance(t, gast.Subscript):
            base = self.subscript_base(t)
            index = self.index(t.slice, base)
            cur = self.tmp(base, "part")
            self.emit(Prim(cur, "getitem", [Var(base), index]))
            rhs = self.expr(st.value, base)
            new = self.tmp(base, "new")
            self.emit(Prim(new, prim.name, self.bind(prim, [Var(cur), rhs], {}, st)))
            self.emit(SetItem(base, index, Var(new)))
        else:
            self.error(t, "only names and subscripts can be updated in place",
                       "assign to a local variable")
        return set()

    def stmt_Return(self, st):
        scope = self.scope
        if scope.simple_return:
            if st.value is None:
                self.emit(Copy(scope.ret_target, Const(None)))
            else:
                self.expr(st.value, scope.ret_target, target=scope.ret_target)
            return set()
        if st.value is None:
            self.emit(Copy(scope.ret_target, Const(None)))
        else:
            self.expr(st.value, scope.ret_target, target=scope.ret_target)
        self.emit(Copy(scope.ret_flag, Const(True)))
        return {scope.ret_flag}

    def stmt_If(self, st):
        test = self.condition(st.test)
        body: list = []
        orelse: list = []
        with self.emitting(body):
            j1 = self.stmt_list(st.body)
        with self.emitting(orelse):
            j2 = self.stmt_list(st.orelse)
        self.loc = self.location(st)
        test = self._protect_test(test, body + orelse)
        self.emit(If(test, body, orelse))
        return j1 | j2

    def _protect_test(self, test, blocks):
        """An ``if`` test must still hold its value after the branches run."""
        if isinstance(test, Var) and test.name in core.all_writes(blocks):
            saved = self.tmp(test.name, "was")
            self.emit(Copy(saved, test))
            return Var(saved)
        return test

    def condition(self, node):
        return self.expr(node, "cond")

    def stmt_Assert(self, st):
        test = self.expr(st.test, "check")
        msg = self.expr(st.msg, "msg") if st.msg is not None else None
        self.emit(Assert(test, msg))
        return set()

    def stmt_Raise(self, st):
        exc = self.expr(st.exc, "error") if st.exc is not None else None
        self.emit(Raise(exc))
        return set()

    def stmt_FunctionDef(self, st):
        if st.decorator_list:
            self.error(st, "decorated nested functions are not supported",
                       "define the decorated function at module level")
        self.scope.local_funcs[st.name] = LocalFunc(st, self.scope)
        return set()

    def stmt_Break(self, st):
        if not self.loops:
            self.error(st, "'break' outside a loop")
        ctx = self.loops[-1]
        if ctx.brk is None:
            ctx.brk = self.fresh("stop")
        self.emit(Copy(ctx.brk, Const(True)))
        return {ctx.brk}

    def stmt_Continue(self, st):
        if not self.loops:
            self.error(st, "'continue' outside a loop")
        ctx = self.loops[-1]
        if ctx.cont is None:
            ctx.cont = self.fresh("skip")
        self.emit(Copy(ctx.cont, Const(True)))
        return {ctx.cont}

    def _loop(self, st, head):
        """Normalize a loop body; returns (body, exit_flags, jumps leaving the loop)."""
        if st.orelse:
            self.error(st, "'else' on a loop is not supported",
                       "use a flag variable set before 'break'")
        ctx = LoopCtx()
        self.loops.append(ctx)
        body: list = []
        with self.emitting(body):
            head()
            jumps = self.stmt_list(st.body)
        self.loops.pop()
        if ctx.cont:
            body.insert(0, Copy(ctx.cont, Const(False), loc=self.location(st)))
        outer = jumps - {ctx.brk, ctx.cont}
        exit_flags = sorted(f for f in jumps - {ctx.cont} if f)
        self.loc = self.location(st)
        if ctx.brk:
            self.emit(Copy(ctx.brk, Const(False)))
        return body, exit_flags, outer

    def stmt_While(self, st):
        test_body: list = []
        with self.emitting(test_body):
            test = self.condition(st.test)
        body, flags, outer = self._loop(st, lambda: None)
        self.emit(While(test_body, test, body, flags))
        return outer

    def stmt_For(self, st):
        it = st.iter
        target = st.target
        if isinstance(it, gast.Call) and self._is_builtin(it.func, range) and isinstance(
                target, gast.Name) and not it.keywords:
            args = [self.expr(a, "start") for a in it.args]
            var = self.store_name(target.id, target)
            rng = Prim(None, "range", self._range_args(args, st))
            body, flags, outer = self._loop(st, lambda: None)
            self.emit(For(var, rng, body, flags))
            return outer
        seqs, binder, count = self._iteration(it, target)
        idx = self.fresh((seqs[0] if seqs and isinstance(seqs[0], str) else "i") + "_i")
        if idx.endswith("_i_i"):
            idx = self.fresh("i")
        n = count(idx)
        rng = Prim(None, "range", self._range_args([n], st))
        body, flags, outer = self._loop(st, lambda: binder(idx))
        self.emit(For(idx, rng, body, flags))
        return outer

    def _range_args(self, args, node):
        if not 1 <= len(args) <= 3:
            self.error(node, "range() takes 1 to 3 arguments")
        if len(args) == 1:
            return [Const(0), args[0], Const(None)]
        return list(args) + [Const(None)] * (3 - len(args))

    def _is_builtin(self, node, obj):
        return self.static_value(node) is obj

    def _iteration(self, it, target):
        """Desugar ``for target in it`` into an index loop.

        Returns (names of sequences, binder(index) emitting the target assignment,
        count() emitting and returning the trip count operand).
        """
        fn = self.static_value(it.func) if isinstance(it, gast.Call) else None
        if fn is zip:
            seqs = [self._as_sequence(a, "seq") for a in it.args]

            def count(_):
                lens = []
                for s in seqs:
                    n = self.tmp(s.name if isinstance(s, Var) else "seq", "len")
                    self.emit(Prim(n, "len", [s]))
                    lens.append(Var(n))
                if len(lens) == 1:
                    return lens[0]
                n = self.fresh("n_steps")
                self.emit(External(n, Var(self.env.value_ref(min, "min")), lens))
                return Var(n)

            def bind(idx):
                items = []
                for s in seqs:
                    t = self.tmp(s.name if isinstance(s, Var) else "seq", "item")
                    self.emit(Prim(t, "getitem", [s, Index((Var(idx),))]))
                    items.append(Var(t))
                self.assign_operand(target, Const(None), items=items)

            return [s.name for s in seqs if isinstance(s, Var)], bind, count
        if fn is enumerate:
            seq = self._as_sequence(it.args[0], "seq")
            start = self.expr(it.args[1], "start") if len(it.args) > 1 else Const(0)
            if not (isinstance(target, (gast.Tuple, gast.List)) and len(target.elts) == 2):
                self.error(target, "unpack enumerate() into two names: for i, x in enumerate(xs)")

            def count(_):
                n = self.tmp(seq.name if isinstance(seq, Var) else "seq", "len")
                self.emit(Prim(n, "len", [seq]))
                return Var(n)

            def bind(idx):
                i_target, x_target = target.elts
                if isinstance(start, Const) and start.value == 0:
                    self.assign_operand(i_target, Var(idx))
                else:
                    k = self.fresh("k")
                    self.emit(Prim(k, "add", [Var(idx), start]))
                    self.assign_operand(i_target, Var(k))
                item = self.tmp(seq.name if isinstance(seq, Var) else "seq", "item")
                self.emit(Prim(item, "getitem", [seq, Index((Var(idx),))]))
                self.assign_operand(x_target, Var(item))

            return [seq.name] if isinstance(seq, Var) else [], bind, count
        if fn is reversed:
            seq = self._as_sequence(it.args[0], "seq")
            name = seq.name if isinstance(seq, Var) else "seq"
            n_var = self.tmp(name, "len")

            def count(_):
                self.emit(Prim(n_var, "len", [seq]))
                return Var(n_var)

            def bind(idx):
                k = self.fresh("k_rev")
                last = self.fresh("last")
                sub = P.BY_OPERATOR["Sub"]
                self.emit(Prim(last, sub.name, self.bind(sub, [Var(n_var), Const(1)], {}, it)))
                self.emit(Prim(k, sub.name, self.bind(sub, [Var(last), Var(idx)], {}, it)))
                item = self.tmp(name, "item")
                self.emit(Prim(item, "getitem", [seq, Index((Var(k),))]))
                self.assign_operand(target, Var(item))

            return [name], bind, count
        seq = self._as_sequence(it, "seq")
        name = seq.name if isinstance(seq, Var) else "seq"
        if not (isinstance(it, gast.Call) and isinstance(it.func, gast.Attribute)
                and it.func.attr in ("items", "values")):
            # dicts iterate over keys, iterators become lists; sequences stay as they are
            items = self.tmp(name, "seq")
            self.emit(Prim(items, "as_sequence", [seq]))
            seq = Var(items)

        def count(_):
            n = self.tmp(name, "len")
            self.emit(Prim(n, "len", [seq]))
            return Var(n)

        def bind(idx):
            item = self.tmp(name, "item")
            self.emit(Prim(item, "getitem", [seq, Index((Var(idx),))]))
            self.assign_operand(target, Var(item))

        return [name], bind, count

    def _as_sequence(self, node, hint):
        """An operand that can be indexed: dict views and iterators become lists."""
        if isinstance(node, gast.Call) and isinstance(node.func, gast.Attribute) and \
                node.func.attr in ("items", "keys", "values") and not node.args and \
                self.static_value(node.func.value) is None:
            d = self.expr(node.func.value, hint)
            keys = self.tmp(d.name if isinstance(d, Var) else hint, "keys")
            self.emit(Prim(keys, "keys_list", [d]))
            if node.func.attr == "keys":
                return Var(keys)
            # values/items: build a list of d[k] (differentiable through getitem)
            out = self.tmp(d.name if isinstance(d, Var) else hint, node.func.attr)
            self.emit(Prim(out, "make_list", [()]))
            k = self.fresh("key")
            idx = self.fresh("i")
            n = self.fresh("n_keys")
            self.emit(Prim(n, "len", [Var(keys)]))
            body: list = []
            with self.emitting(body):
                self.emit(Prim(k, "getitem", [Var(keys), Index((Var(idx),))]))
                v = self.fresh("value")
                self.emit(Prim(v, "getitem", [d, Index((Var(k),))]))
                item = Var(v)
                if node.func.attr == "items":
                    pair = self.fresh("pair")
                    self.emit(Prim(pair, "make_tuple", [(Var(k), Var(v))]))
                    item = Var(pair)
                self.emit(Prim(out, "append", [Var(out), item]))
            self.emit(For(idx, Prim(None, "range", [Const(0), Var(n), Const(None)]), body))
            return Var(out)
        if isinstance(node, gast.Call) and self.static_value(node.func) in (map, filter):
            self.error(node, "map()/filter() are not supported in a for loop",
                       "use a list comprehension")
        return self.expr(node, hint)

    # ---------------------------------------------------------------- assignment

    def assign(self, target, value_node):
        if isinstance(target, gast.Name) and isinstance(value_node, gast.Lambda):
            self.store_name(target.id, target)
            self.scope.local_funcs[target.id] = LocalFunc(value_node, self.scope)
            return
        if isinstance(target, gast.Name):
            var = self.store_name(target.id, target)
            self.expr(value_node, var, target=var)
        elif isinstance(target, (gast.Tuple, gast.List)):
            if isinstance(value_node, (gast.Tuple, gast.List)) and len(value_node.elts) == len(
                    target.elts) and any(isinstance(e, gast.Lambda) for e in value_node.elts):
                for t, e in zip(target.elts, value_node.elts):
                    self.assign(t, e)  # f, g = lambda..., lambda...: bind each
                return
            if isinstance(value_node, (gast.Tuple, gast.List)) and len(value_node.elts) == len(
                    target.elts) and not any(isinstance(e, gast.Starred) for e in value_node.elts):
                # a, b = b, a: evaluate everything first
                hints = [t.id if isinstance(t, gast.Name) else "item" for t in target.elts]
                items = [self.expr(e, h) for e, h in zip(value_node.elts, hints)]
                written = {t.id for t in target.elts if isinstance(t, gast.Name)}
                safe = []
                for item in items:
                    if isinstance(item, Var) and item.name in {
                            self.scope.rename.get(w, Var(w)).name
                            if isinstance(self.scope.rename.get(w), Var) else w for w in written}:
                        t = self.tmp(item.name, "old")
                        self.emit(Copy(t, item))
                        item = Var(t)
                    safe.append(item)
                for t, item in zip(target.elts, safe):
                    self.assign_operand(t, item)
            else:
                hint = "_".join(t.id for t in target.elts if isinstance(t, gast.Name)) or "value"
                src = self.expr(value_node, hint)
                self.assign_operand(target, src)
        elif isinstance(target, gast.Subscript):
            base = self.subscript_base(target)
            index = self.index(target.slice, base)
            value = self.expr(value_node, base + "_value")
            self.emit(SetItem(base, index, value))
        elif isinstance(target, gast.Attribute):
            self.error(target, "assigning to an attribute is not supported",
                       "build a new value instead (dataclasses.replace, a new dict...)")
        else:
            self.error(target, f"cannot assign to {type(target).__name__}")

    def assign_operand(self, target, src, items=None):
        """Assign an already evaluated operand to a target pattern (unpacking tuples)."""
        if isinstance(target, gast.Name):
            var = self.store_name(target.id, target)
            self.emit(Copy(var, src))
            return
        if isinstance(target, (gast.Tuple, gast.List)):
            elts = target.elts
            star = [i for i, e in enumerate(elts) if isinstance(e, gast.Starred)]
            if items is not None:
                for t, item in zip(elts, items):
                    self.assign_operand(t, item)
                return
            for i, t in enumerate(elts):
                if isinstance(t, gast.Starred):
                    after = len(elts) - i - 1
                    sl = SliceAtom(Const(i), Const(-after) if after else None, None)
                    part = self.tmp(t.value.id if isinstance(t.value, gast.Name) else "rest",
                                    "part")
                    self.emit(Prim(part, "getitem", [src, Index((sl,))]))
                    self.emit(Prim(part, "to_list", [Var(part)]))
                    self.assign_operand(t.value, Var(part))
                    continue
                pos = i if not star or i < star[0] else i - len(elts)
                hint = t.id if isinstance(t, gast.Name) else "item"
                if isinstance(t, gast.Name):
                    var = self.store_name(t.id, t)
                    self.emit(Prim(var, "getitem", [src, Index((Const(pos),))]))
                else:
                    tmp = self.fresh(hint)
                    self.emit(Prim(tmp, "getitem", [src, Index((Const(pos),))]))
                    self.assign_operand(t, Var(tmp))
            return
        if isinstance(target, gast.Subscript):
            base = self.subscript_base(target)
            index = self.index(target.slice, base)
            self.emit(SetItem(base, index, src))
            return
        self.error(target, f"cannot assign to {type(target).__name__}")

    def subscript_base(self, target):
        if not isinstance(target.value, gast.Name) or target.value.id not in \
                self.scope.local_names:
            self.error(target, "in-place updates are supported on local variables only",
                       "copy the value into a local first (y = x.copy(); y[i] = v)")
        op = self.load_name(target.value.id, target.value)
        if not isinstance(op, Var):
            self.error(target, "cannot update a constant in place")
        return op.name

    # --------------------------------------------------------------------- names

    def store_name(self, name, node) -> str:
        scope = self.scope
        if name in scope.local_funcs:
            del scope.local_funcs[name]
        op = scope.rename.get(name)
        if isinstance(op, Var):
            return op.name
        var = self.fresh(name)
        scope.rename[name] = Var(var)
        return var

    def lookup(self, name, node):
        """('local', operand) | ('func', LocalFunc) | ('object', python object, ref)."""
        scope = self.scope
        while scope is not None:
            if name in scope.local_funcs:
                return ("func", scope.local_funcs[name])
            if name in scope.local_names:
                op = scope.rename.get(name)
                if op is None:
                    self.error(node, f"local variable {name!r} is used before it is assigned",
                               cls=TransformError)
                return ("local", op)
            if scope.parent is None:
                fsrc = scope.fsrc
                if name in fsrc.closure:
                    return ("object", fsrc.closure[name], ("cell", fsrc, name))
                if name in fsrc.globals:
                    return ("object", fsrc.globals[name], ("global", fsrc.globals, name))
                if hasattr(builtins, name):
                    return ("object", getattr(builtins, name), ("builtin", name))
                break
            scope = scope.parent
        self.error(node, f"name {name!r} is not defined", cls=TransformError)

    def load_name(self, name, node):
        kind, *rest = self.lookup(name, node)
        if kind == "local":
            return rest[0]
        if kind == "func":
            if isinstance(rest[0], ObjFunc):
                return rest[0].operand
            self.error(node, f"function {name!r} can only be called here",
                       "astjax inlines local functions at their call sites")
        return self.object_operand(rest[0], name, rest[1])

    def object_operand(self, obj, hint, ref=None):
        if isinstance(obj, _SCALAR_TYPES) and not isinstance(obj, (str, bytes)) or obj is None:
            if ref is None or ref[0] == "builtin":
                return Const(obj)
        if isinstance(obj, types.ModuleType):
            canonical = _CANONICAL_MODULES.get(obj.__name__)
            if canonical:
                self.env.entries[canonical] = ("value", obj)
                return Var(canonical)
            return Var(self.env.value_ref(obj, hint))
        if ref is not None and ref[0] == "global":
            return Var(self.env.global_ref(ref[1], ref[2]))
        if isinstance(obj, (str, bytes, bool, int, float, type(None))):
            return Const(obj)
        return Var(self.env.value_ref(obj, hint))

    def static_value(self, node):
        """The Python object an expression denotes when it is a global/module path."""
        if isinstance(node, gast.Name):
            try:
                kind, *rest = self.lookup(node.id, node)
            except TransformError:
                return None
            if kind == "object":
                return rest[0]
            return None
        if isinstance(node, gast.Attribute):
            base = self.static_value(node.value)
            if isinstance(base, (types.ModuleType, type)) or (
                    base is not None and type(base).__name__ in ("_ArrayFunctionDispatcher",)):
                if not hasattr(base, node.attr):
                    self.error(node, f"{getattr(base, '__name__', base)!s} has no attribute "
                                     f"{node.attr!r}", cls=TransformError)
                return getattr(base, node.attr)
            return None
        return None

    # -------------------------------------------------------------- expressions

    def expr(self, node, hint, target=None, discard=False):
        """Evaluate an expression; returns an operand (Var or Const).

        With ``target``, the final operation assigns that name directly.
        """
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            self.error(node, f"{type(node).__name__} expressions are not supported",
                       _HINTS.get(type(node).__name__))
        if isinstance(node, gast.Call):
            result = method(node, hint, target, discard=discard)
        else:
            result = method(node, hint, target)
        if discard:
            return result
        if target is not None and not (isinstance(result, Var) and result.name == target):
            self.emit(Copy(target, result))
            return Var(target)
        return result

    def _out(self, target, hint, suffix):
        return target if target is not None else self.tmp(hint, suffix)

    def expr_Constant(self, node, hint, target):
        return Const(node.value)

    def expr_Name(self, node, hint, target):
        return self.load_name(node.id, node)

    def expr_NamedExpr(self, node, hint, target):
        var = self.store_name(node.target.id, node.target)
        self.expr(node.value, var, target=var)
        return Var(var)

    def operator_prim(self, op, node):
        prim = P.BY_OPERATOR.get(type(op).__name__)
        if prim is None:
            self.error(node, f"operator {type(op).__name__} is not supported")
        return prim

    def expr_BinOp(self, node, hint, target):
        prim = self.operator_prim(node.op, node)
        left = self.expr(node.left, hint)
        right = self.expr(node.right, hint)
        folded = _fold(prim, left, right)
        if folded is not None:
            return folded
        out = self._out(target, hint, _OP_NAMES.get(type(node.op).__name__, prim.name))
        self.emit(Prim(out, prim.name, self.bind(prim, [left, right], {}, node)))
        return Var(out)

    def expr_UnaryOp(self, node, hint, target):
        operand = self.expr(node.operand, hint)
        if isinstance(node.op, gast.Not):
            out = self._out(target, hint, "not")
            self.emit(Prim(out, "not_", [operand]))
            return Var(out)
        prim = self.operator_prim(node.op, node)
        if isinstance(operand, Const) and isinstance(operand.value, (int, float)) and \
                isinstance(node.op, gast.USub):
            return Const(-operand.value)
        out = self._out(target, hint, _OP_NAMES.get(type(node.op).__name__, prim.name))
        self.emit(Prim(out, prim.name, self.bind(prim, [operand], {}, node)))
        return Var(out)

    def expr_BoolOp(self, node, hint, target):
        """``a and b`` -> first falsy operand (evaluated lazily), as Python does."""
        out = self._out(target, hint, "and" if isinstance(node.op, gast.And) else "or")
        self._boolop(node.op, node.values, out)
        return Var(out)

    def _boolop(self, op, values, out):
        first = self.expr(values[0], out)
        self.emit(Copy(out, first))
        if len(values) == 1:
            return
        rest: list = []
        with self.emitting(rest):
            self._boolop(op, values[1:], out)
        if isinstance(op, gast.And):
            self.emit(If(Var(out), rest, []))
        else:
            neg = self.tmp(out, "not")
            self.emit(Prim(neg, "not_", [Var(out)]))
            self.emit(If(Var(neg), rest, []))

    def expr_Compare(self, node, hint, target):
        left = self.expr(node.left, hint)
        if len(node.ops) == 1:
            return self._compare(node.ops[0], left, node.comparators[0], hint, target, node)
        out = self._out(target, hint, "cmp")
        self._chain(node, left, list(zip(node.ops, node.comparators)), out, hint)
        return Var(out)

    def _chain(self, node, left, pairs, out, hint):
        op, comp = pairs[0]
        right = self.expr(comp, hint)
        self._compare_values(op, left, right, out, node)
        if len(pairs) > 1:
            rest: list = []
            with self.emitting(rest):
                self._chain(node, right, pairs[1:], out, hint)
            self.emit(If(Var(out), rest, []))

    def _compare(self, op, left, comp_node, hint, target, node):
        right = self.expr(comp_node, hint)
        out = self._out(target, hint, _OP_NAMES.get(type(op).__name__, "cmp"))
        self._compare_values(op, left, right, out, node)
        return Var(out)

    def _compare_values(self, op, left, right, out, node):
        name = type(op).__name__
        if name in ("Is", "IsNot") and isinstance(right, Const) and right.value is None:
            # ``x is not None``: an identity test, never an array operation
            if name == "IsNot":
                self.emit(Prim(out, "not_none", [left]))
            else:
                tmp = self.tmp(out, "given")
                self.emit(Prim(tmp, "not_none", [left]))
                self.emit(Prim(out, "not_", [Var(tmp)]))
            return
        if name in ("Is", "IsNot", "In", "NotIn"):
            # identity and membership tests: plain Python, never differentiated
            func = {"Is": operator.is_, "IsNot": operator.is_not,
                    "In": operator.contains, "NotIn": operator.contains}[name]
            args = [right, left] if name in ("In", "NotIn") else [left, right]
            result = self.tmp(out, "in") if name == "NotIn" else out
            self.emit(External(result, Var(self.env.value_ref(func, func.__name__)), args))
            if name == "NotIn":
                self.emit(Prim(out, "not_", [Var(result)]))
            return
        prim = self.operator_prim(op, node)
        self.emit(Prim(out, prim.name, self.bind(prim, [left, right], {}, node)))

    def expr_IfExp(self, node, hint, target):
        out = self._out(target, hint, "choice")
        test = self.condition(node.test)
        body: list = []
        orelse: list = []
        with self.emitting(body):
            self.expr(node.body, out, target=out)
        with self.emitting(orelse):
            self.expr(node.orelse, out, target=out)
        test = self._protect_test(test, body + orelse)
        self.emit(If(test, body, orelse))
        return Var(out)

    def expr_Tuple(self, node, hint, target):
        return self._collection(node, hint, target, "make_tuple", "tuple")

    def expr_List(self, node, hint, target):
        return self._collection(node, hint, target, "make_list", "list")

    def _collection(self, node, hint, target, prim, suffix):
        if any(isinstance(e, gast.Starred) for e in node.elts):
            self.error(node, "starred items in a literal are not supported",
                       "concatenate with + or list(...) instead")
        items = tuple(self.expr(e, hint) for e in node.elts)
        out = self._out(target, hint, suffix)
        self.emit(Prim(out, prim, [items]))
        return Var(out)

    def expr_Dict(self, node, hint, target):
        keys = []
        for k in node.keys:
            if not isinstance(k, gast.Constant):
                self.error(k or node, "dictionary keys must be constants here",
                           "build the dict with constant keys, e.g. {'w': w, 'b': b}")
            keys.append(k.value)
        values = tuple(self.expr(v, hint) for v in node.values)
        out = self._out(target, hint, "dict")
        self.emit(Prim(out, "make_dict", [Const(tuple(keys)), values]))
        return Var(out)

    def expr_JoinedStr(self, node, hint, target):
        parts = []
        values = []
        for v in node.values:
            if isinstance(v, gast.Constant):
                parts.append(str(v.value).replace("{", "{{").replace("}", "}}"))
            else:
                conv = {-1: "", 115: "!s", 114: "!r", 97: "!a"}[v.conversion]
                spec = ""
                if v.format_spec is not None:
                    spec = ":" + "".join(str(c.value) for c in v.format_spec.values
                                         if isinstance(c, gast.Constant))
                parts.append("{" + conv + spec + "}")
                values.append(self.expr(v.value, "fmt"))
        out = self._out(target, hint, "text")
        self.emit(Prim(out, "format_string", [Const("".join(parts)), tuple(values)]))
        return Var(out)

    def expr_Attribute(self, node, hint, target):
        obj = self.static_value(node)
        if obj is not None or (isinstance(node.value, (gast.Name, gast.Attribute)) and
                               isinstance(self.static_value(node.value), types.ModuleType)):
            if obj is np.newaxis:
                return Const(None)
            return self.object_operand(obj, node.attr)
        base = self.expr(node.value, hint)
        prim = P.BY_ATTRIBUTE.get(node.attr)
        base_hint = base.name if isinstance(base, Var) else hint
        out = self._out(target, base_hint, node.attr)
        if prim is not None:
            self.emit(Prim(out, prim.name, self.bind(prim, [base], {}, node)))
        else:
            self.emit(Prim(out, "getattr", [base, Const(node.attr)]))
        return Var(out)

    def expr_Subscript(self, node, hint, target):
        base = self.expr(node.value, hint)
        index = self.index(node.slice, base.name if isinstance(base, Var) else hint)
        out = self._out(target, base.name if isinstance(base, Var) else hint, "at")
        self.emit(Prim(out, "getitem", [base, index]))
        return Var(out)

    def index(self, node, hint) -> Index:
        if isinstance(node, gast.Tuple):
            return Index(tuple(self._index_item(e, hint) for e in node.elts), tuple_form=True)
        return Index((self._index_item(node, hint),))

    def _index_item(self, node, hint):
        if isinstance(node, gast.Slice):
            parts = [self.expr(p, hint) if p is not None else None
                     for p in (node.lower, node.upper, node.step)]
            parts = [None if isinstance(p, Const) and p.value is None else p for p in parts]
            return SliceAtom(*parts)
        if isinstance(node, gast.Constant) and node.value is Ellipsis:
            return Ellipsis
        if isinstance(node, gast.Constant) and node.value is None:
            return None
        op = self.expr(node, hint)
        if isinstance(op, Const) and op.value is None:
            return None
        return op

    def expr_Lambda(self, node, hint, target):
        self.error(node, "a lambda can only be called or assigned to a name here",
                   "astjax inlines lambdas where they are called")

    # ------------------------------------------------------------ comprehensions

    def expr_ListComp(self, node, hint, target):
        out = self._out(target, hint, "list")
        self.emit(Prim(out, "make_list", [()]))

        def leaf():
            v = self.expr(node.elt, out)
            self.emit(Prim(out, "append", [Var(out), v]))

        self._comprehension(node.generators, leaf)
        return Var(out)

    expr_GeneratorExp = expr_ListComp

    def expr_DictComp(self, node, hint, target):
        self.error(node, "dict comprehensions are not supported yet",
                   "build a list of values and a dict literal, or loop with d[k] = v")

    def expr_SetComp(self, node, hint, target):
        self.error(node, "set comprehensions are not supported")

    def _comprehension(self, generators, leaf):
        """Comprehension variables live in their own scope: rename them apart."""
        gen = generators[0]
        if gen.is_async:
            self.error(gen.iter, "async comprehensions are not supported")
        saved = {}
        names = set()
        for n in gast.walk(gen.target):
            if isinstance(n, gast.Name):
                names.add(n.id)
        scope = self.scope
        for n in names:
            saved[n] = (n in scope.local_names, scope.rename.get(n))
            scope.local_names.add(n)
            scope.rename[n] = Var(self.fresh(n))
        it = gen.iter
        seqs, binder, count = self._iteration(it, gen.target)
        idx = self.fresh("i")
        n = count(idx)

        def head():
            binder(idx)

        body: list = []
        with self.emitting(body):
            head()
            cur = body
            for cond in gen.ifs:
                c = self.condition(cond)
                inner: list = []
                self.emit(If(c, inner, []))
                self.out = inner
                cur = inner
            with self.emitting(cur):
                if len(generators) > 1:
                    self._comprehension(generators[1:], leaf)
                else:
                    leaf()
        self.emit(For(idx, Prim(None, "range", [Const(0), n, Const(None)]), body))
        for name, (was_local, op) in saved.items():
            if not was_local:
                scope.local_names.discard(name)
            if op is None:
                scope.rename.pop(name, None)
            else:
                scope.rename[name] = op

    # --------------------------------------------------------------------- calls

    def expr_Call(self, node, hint, target, discard=False):
        func = node.func
        # method call on a value: x.sum(), lst.append(v)
        if isinstance(func, gast.Attribute) and self.static_value(func) is None and not \
                isinstance(self.static_value(func.value), (types.ModuleType, type)):
            return self.method_call(node, func, hint, target, discard)
        if isinstance(func, gast.Name):
            kind, *rest = self.lookup(func.id, func)
            if kind == "func":
                if isinstance(rest[0], ObjFunc):
                    return self.call_object(rest[0].obj, node, hint, target, discard)
                return self.inline_local(rest[0], node, hint, target)
            if kind == "local":
                return self.external_call(node, rest[0], hint, target, func.id, discard)
            obj = rest[0]
        elif isinstance(func, gast.Lambda):
            return self.inline_local(LocalFunc(func, self.scope), node, hint, target)
        else:
            obj = self.static_value(func)
            if obj is None and isinstance(func, gast.Call):
                obj = self.static_transform(func)
            if obj is None:
                callee = self.expr(func, hint)
                return self.external_call(node, callee, hint, target, "call", discard)
        return self.call_object(obj, node, hint, target, discard)

    def inline_jvp(self, node, hint, target):
        """``jvp(f, (x, ...), (t, ...))`` inside transformed code: inline f's jvp code."""
        from astjax import forward_api
        if len(node.args) != 3 or node.keywords or not all(
                isinstance(a, (gast.Tuple, gast.List)) for a in node.args[1:]):
            self.error(node, "jvp inside a transformed function needs the form "
                             "jvp(f, (x, ...), (t, ...))", cls=TransformError)
        fun = self.static_value(node.args[0])
        if fun is None or not callable(fun):
            self.error(node.args[0], "jvp needs a function defined in a file here",
                       "pass a module-level function, not a lambda", cls=TransformError)
        primals = [self.plain(self.arg_operand(e, hint), node) for e in node.args[1].elts]
        tangents = [self.plain(self.arg_operand(e, hint), node) for e in node.args[2].elts]
        if len(primals) != len(tangents):
            self.error(node, "jvp: as many tangents as primals are needed", cls=TransformError)
        generated = forward_api.jvp_function(fun, range(len(primals)), ())
        # the generated code takes every parameter, then the tangents: fill in defaults
        from astjax.api import signature_of
        sig = signature_of(fun)
        for name in sig.names[len(primals):]:
            default = sig.signature.parameters[name].default
            if default is inspect.Parameter.empty:
                self.error(node, f"jvp: {sig.fname}() missing argument {name!r}",
                           cls=TransformError)
            primals.append(self.object_operand(default, f"{name}_default"))
        return self.call_function_ref(("object", generated), primals + tangents, {}, node,
                                      hint, target)

    def static_transform(self, node):
        """``grad(f)`` written inside a function: build the transformed function now.

        Only astjax transformations applied to functions and constants qualify; the
        result is then inlined like any transformed function.
        """
        callee = self.static_value(node.func)
        from astjax import api, batch_api, jit_api
        if callee not in api.STATIC_TRANSFORMS + (batch_api.vmap, jit_api.jit):
            return None
        missing = object()

        def literal(a):
            # constants, -1, and tuples/lists/dicts of them (vmap's axes pytrees)
            if isinstance(a, gast.Constant):
                return a.value
            if isinstance(a, gast.UnaryOp) and isinstance(a.op, gast.USub) and \
                    isinstance(a.operand, gast.Constant):
                return -a.operand.value
            if isinstance(a, (gast.Tuple, gast.List, gast.Dict)):
                parts = [literal(e) for e in (a.elts if not isinstance(a, gast.Dict)
                                              else a.keys + a.values)]
                if any(p is missing for p in parts):
                    return missing
                if isinstance(a, gast.Dict):
                    return dict(zip(parts[:len(a.keys)], parts[len(a.keys):]))
                return tuple(parts) if isinstance(a, gast.Tuple) else list(parts)
            v = self.static_transform(a) if isinstance(a, gast.Call) else self.static_value(a)
            return missing if v is None else v   # (vmap(grad(f)): nested transformations)

        values = []
        for a in list(node.args) + [k.value for k in node.keywords]:
            v = literal(a)
            if v is missing:
                return None
            values.append(v)
        n = len(node.args)
        kwargs = {k.arg: v for k, v in zip(node.keywords, values[n:])}
        return callee(*values[:n], **kwargs)

    def call_args(self, node, hint):
        args = []
        for a in node.args:
            if isinstance(a, gast.Starred):
                self.error(a, "*args in a call is not supported here",
                           "pass the arguments one by one")
            args.append(self.arg_operand(a, hint))
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                self.error(node, "**kwargs in a call is not supported here",
                           "pass keyword arguments explicitly")
            kwargs[kw.arg] = self.arg_operand(kw.value, hint)
        return args, kwargs

    def arg_operand(self, node, hint):
        """A call argument: an operand, or a FuncArg when it denotes a function."""
        if isinstance(node, gast.Lambda):
            return FuncArg(LocalFunc(node, self.scope))
        if isinstance(node, gast.Name):
            kind, *rest = self.lookup(node.id, node)
            if kind == "func":
                return FuncArg(rest[0])
        if isinstance(node, (gast.Name, gast.Attribute)):
            obj = self.static_value(node)
            if callable(obj) and not isinstance(obj, type) and not isinstance(
                    obj, types.ModuleType):
                name = getattr(obj, "__name__", "f")
                return FuncArg(ObjFunc(obj, self.object_operand(obj, name)))
        return self.expr(node, hint)

    def plain(self, op, node):
        """An operand for a primitive or an external call (a function becomes a value)."""
        if isinstance(op, FuncArg):
            if isinstance(op.func, ObjFunc):
                return op.func.operand
            self.error(node, "a lambda or nested function can only be called or passed to "
                             "another Python function here",
                       "astjax inlines functions where they are called", cls=TransformError)
        return op

    def call_object(self, obj, node, hint, target, discard=False):
        special = SPECIAL_CALLS.get(id(obj))
        if special is not None:
            return special(self, node, hint, target)
        from astjax import forward_api
        if obj is forward_api.jvp:
            return self.inline_jvp(node, hint, target)
        if obj is range:
            args, _ = self.call_args(node, hint)
            args = [self.plain(a, node) for a in args]
            out = self._out(target, hint, "range")
            self.emit(Prim(out, "range", self._range_args(args, node)))
            return Var(out)
        if obj in (zip, enumerate, reversed, map, filter):
            self.error(node, f"{obj.__name__}() is supported in a for loop header only",
                       "loop over it with 'for ... in', or use a list comprehension")
        prim = P.lookup_callable(obj)
        if prim is not None:
            args, kwargs = self.call_args(node, hint)
            if prim.name == "len" and len(args) == 1 and not kwargs and \
                    isinstance(args[0], tuple):
                # a tuple of operands (a rule's ``*items``) has a static length: reading
                # the items would make reverse mode keep every one of them
                return Const(len(args[0]))
            name = prim.name if prim.name not in ("getitem",) else "item"
            out = self._out(target, hint, _short(name))
            self.emit(Prim(out, prim.name, self.bind(prim, args, kwargs, node)))
            return Var(out)
        if isinstance(obj, functools.partial) or isinstance(obj, types.MethodType) or (
                isinstance(obj, types.FunctionType) and not _is_library(obj)) or getattr(
                obj, "_astjax_generated", None) is not None:
            return self.inline_callable(obj, node, hint, target)
        name = getattr(obj, "__name__", "call")
        callee = self.object_operand(obj, name)
        return self.external_call(node, callee, hint, target, name, discard)

    def external_call(self, node, callee, hint, target, label, discard=False):
        args, kwargs = self.call_args(node, hint)
        args = [self.plain(a, node) for a in args]
        kwargs = {k: self.plain(v, node) for k, v in kwargs.items()}
        if discard and target is None:
            self.emit(External(None, callee, args, kwargs))
            return Const(None)
        out = self._out(target, hint, _short(label))
        self.emit(External(out, callee, args, kwargs))
        return Var(out)

    def method_call(self, node, func, hint, target, discard):
        name = func.attr
        if name == "append" and isinstance(func.value, gast.Name):
            lst = self.load_name(func.value.id, func.value)
            if not isinstance(lst, Var) or func.value.id not in self.scope.local_names:
                self.error(node, "append() is supported on local lists only")
            args, kwargs = self.call_args(node, lst.name)
            args = [self.plain(a, node) for a in args]
            if len(args) != 1 or kwargs:
                self.error(node, "append() takes exactly one argument")
            self.emit(Prim(lst.name, "append", [lst, args[0]]))
            return Const(None)
        receiver = self.expr(func.value, hint)
        rhint = receiver.name if isinstance(receiver, Var) else hint
        prim = P.BY_METHOD.get(name)
        if prim is None:
            args, kwargs = self.call_args(node, rhint)
            args = [self.plain(a, node) for a in args]
            kwargs = {k: self.plain(v, node) for k, v in kwargs.items()}
            if discard and target is None:
                self.emit(External(None, receiver, args, kwargs, method=name))
                return Const(None)
            out = self._out(target, rhint, _short(name))
            self.emit(External(out, receiver, args, kwargs, method=name))
            return Var(out)
        args, kwargs = self.call_args(node, rhint)
        args = [self.plain(a, node) for a in args]
        if prim.method_pack and len(args) > 1:
            tup = self.tmp(rhint, prim.method_pack)
            self.emit(Prim(tup, "make_tuple", [tuple(args)]))
            args = [Var(tup)]
        out = self._out(target, rhint, _short(prim.name))
        self.emit(Prim(out, prim.name, self.bind(prim, [receiver, *args], kwargs, node)))
        return Var(out)

    def bind(self, prim, args, kwargs, node) -> list:
        """Match call operands to a primitive's parameters (NumPy's order and names)."""
        params = prim.params
        bound: dict = {}
        pos = [self.plain(a, node) for a in args]
        kwargs = {k: self.plain(v, node) for k, v in kwargs.items()}
        for i, p in enumerate(params):
            if p.startswith("*"):
                bound[p] = tuple(pos[i:])
                pos = []
                break
            if i < len(pos):
                bound[p] = pos[i]
        else:
            if len(pos) > len(params):
                self.error(node, f"{prim.code}() takes at most {len(params)} positional "
                                 f"arguments ({len(pos)} given)", cls=TransformError)
        for k, v in kwargs.items():
            if k not in params:
                self.error(node, f"{prim.code}() got an unsupported keyword argument {k!r}",
                           "astjax supports the NumPy parameters: " + ", ".join(
                               p.lstrip("*") for p in params), cls=TransformError)
            if k in bound:
                self.error(node, f"{prim.code}() got multiple values for {k!r}",
                           cls=TransformError)
            bound[k] = v
        out = []
        for p in params:
            if p in bound:
                v = bound[p]
            elif p.startswith("*"):
                v = ()
            elif p in prim.defaults:
                v = Const(prim.defaults[p])
            else:
                self.error(node, f"{prim.code}() is missing its argument {p!r}",
                           cls=TransformError)
            if p == "out" and not (isinstance(v, Const) and v.value is None):
                self.error(node, "out= is not supported in transformed code",
                           "assign the result instead")
            out.append(v)
        return out

    # ------------------------------------------------------------------ inlining

    def inline_callable(self, obj, node, hint, target):
        args, kwargs = self.call_args(node, hint)
        return self.call_function_ref(("object", obj), args, kwargs, node, hint, target)

    def function_ref(self, node):
        """What a function-valued expression denotes, for inlining with given operands.

        Returns ("local", LocalFunc) for lambdas and nested defs, ("object", callable)
        for functions reached through globals, closures or attributes.
        """
        if isinstance(node, gast.Lambda):
            return ("local", LocalFunc(node, self.scope))
        if isinstance(node, gast.Name):
            kind, *rest = self.lookup(node.id, node)
            if kind == "func":
                if isinstance(rest[0], ObjFunc):
                    return ("object", rest[0].obj)
                return ("local", rest[0])
            if kind == "object" and callable(rest[0]):
                return ("object", rest[0])
        else:
            obj = self.static_value(node)
            if obj is not None and callable(obj):
                return ("object", obj)
        self.error(node, "expected a function that astjax can inline here (a lambda, a "
                         "nested def, or a function defined in a file)",
                   "pass the function itself, not a value computed at run time",
                   cls=TransformError)

    def call_function_ref(self, ref, args, kwargs, node, hint, target):
        """Inline (or, for a primitive, emit) a call of ``ref`` on evaluated operands."""
        kind, value = ref
        generated = getattr(value, "_astjax_generated", None)
        if kind == "object" and generated is not None:
            value = generated()  # a transformed function: inline the code it runs
        if kind == "local":
            name = getattr(value.node, "name", "lambda")
            scope = Scope(value.scope.fsrc, name, parent=value.scope)
            if id(value.node) in self.inline_stack:
                self.error(node, f"recursive call to {name} cannot be inlined",
                           "rewrite the recursion as a loop", cls=TransformError)
            return self._inline(scope, value.node, args, kwargs, node, hint, target,
                                code=id(value.node))
        prim = P.lookup_callable(value)
        if prim is not None:
            out = self._out(target, hint, _short(prim.name))
            self.emit(Prim(out, prim.name, self.bind(prim, args, kwargs, node)))
            return Var(out)
        func, pargs, pkwargs = unwrap_callable(value)
        if _is_library(func):
            self.error(node, f"{getattr(func, '__qualname__', func)} cannot be inlined here",
                       "wrap it in a lambda or a def of your own", cls=TransformError)
        if len(self.inline_stack) > self.MAX_INLINE_DEPTH or func.__code__ in self.inline_stack:
            self.error(node, f"recursive call to {func.__name__} cannot be inlined",
                       "rewrite the recursion as a loop", cls=TransformError)
        fsrc = get_function_source(func)
        pre = [self.object_operand(v, "arg") for v in pargs]
        pkw = {k: self.object_operand(v, k) for k, v in pkwargs.items()}
        pkw.update(kwargs)
        scope = Scope(fsrc, fsrc.name, parent=None)
        return self._inline(scope, fsrc.node, pre + list(args), pkw, node, hint, target,
                            code=func.__code__)

    def inline_local(self, lf: LocalFunc, node, hint, target):
        args, kwargs = self.call_args(node, hint)
        name = getattr(lf.node, "name", "lambda")
        scope = Scope(lf.scope.fsrc, name, parent=lf.scope)
        if id(lf.node) in self.inline_stack:
            self.error(node, f"recursive call to {name} cannot be inlined",
                       "rewrite the recursion as a loop", cls=TransformError)
        return self._inline(scope, lf.node, args, kwargs, node, hint, target, code=id(lf.node))

    def _inline(self, scope, fnode, args, kwargs, call_node, hint, target, code):
        a = fnode.args
        if a.vararg or a.kwarg:
            self.error(call_node, f"cannot inline {scope.name}: *args/**kwargs parameters",
                       "give the function explicit parameters", cls=TransformError)
        params = _params_of(a)
        positional = [x.id for x in a.posonlyargs + a.args]
        if len(args) > len(positional):
            self.error(call_node, f"{scope.name}() takes {len(positional)} positional "
                                  f"arguments but {len(args)} were given", cls=TransformError)
        bound = dict(zip(positional, args))
        for k, v in kwargs.items():
            if k not in params or k in bound:
                self.error(call_node, f"{scope.name}() got an unexpected keyword {k!r}",
                           cls=TransformError)
            bound[k] = v
        defaults = self._defaults_of(scope, fnode)
        caller_scope, caller_loops, caller_loc = self.scope, self.loops, self.loc
        scope.local_names = _assigned_names(fnode) | set(params)
        assigned = _rebound_names(fnode)
        passed = {a.name for a in list(args) + list(kwargs.values()) if isinstance(a, Var)}
        if target is not None and target not in passed:
            result = target
        else:
            result = self.tmp(hint or scope.name, "out")
        # bind parameters: substitute operands for parameters the callee never reassigns
        for p in params:
            if p in bound:
                v = bound[p]
            elif p in defaults:
                v = defaults[p]
            else:
                self.error(call_node, f"{scope.name}() missing argument {p!r}",
                           cls=TransformError)
            if isinstance(v, FuncArg):
                scope.local_funcs[p] = v.func  # calls of p inline the function passed
            elif p in assigned:
                var = self.fresh(p)
                self.emit(Copy(var, v))
                scope.rename[p] = Var(var)
            else:
                scope.rename[p] = v
        self._rename_locals(scope, fnode)
        self.scope, self.loops = scope, []
        self.inline_stack.append(code)
        try:
            self._body(scope, fnode, result)
        finally:
            self.inline_stack.pop()
            self.scope, self.loops, self.loc = caller_scope, caller_loops, caller_loc
        if target is not None and result != target:
            self.emit(Copy(target, Var(result)))
            return Var(target)
        return Var(result)

    def _defaults_of(self, scope, fnode):
        out = {}
        a = fnode.args
        pos = a.posonlyargs + a.args
        if scope.parent is None and hasattr(scope.fsrc, "defaults"):
            for k, v in scope.fsrc.defaults.items():
                out[k] = self.object_operand(v, k)
            return out
        saved = self.scope
        self.scope = scope.parent or saved
        try:
            for p, d in zip(pos[len(pos) - len(a.defaults):], a.defaults):
                out[p.id] = self.expr(d, p.id)
            for p, d in zip(a.kwonlyargs, a.kw_defaults):
                if d is not None:
                    out[p.id] = self.expr(d, p.id)
        finally:
            self.scope = saved
        return out


_CANONICAL_MODULES = {"numpy": "np", "astjax.runtime_array": "ra", "astjax.runtime": "rt",
                      "astjax.runtime_batch": "rb", "math": "math"}


def _fold(prim, left, right):
    """Evaluate an operator on two Python number constants (``y - 1`` with y = 2)."""
    if isinstance(left, Const) and isinstance(right, Const) and all(
            type(c.value) in (int, float) for c in (left, right)):
        try:
            value = prim.impl(left.value, right.value)
        except Exception:
            return None
        if isinstance(value, np.generic):
            value = value.item()
        if type(value) in (int, float, bool):
            return Const(value)
    return None


def _short(name):
    return {"matmul": "matmul", "getitem": "item", "multiply": "mul", "subtract": "sub",
            "divide": "div", "true_divide": "div", "power": "pow"}.get(name, name)


def _is_library(fn) -> bool:
    """Functions of NumPy and the standard library are called, not inlined."""
    mod = getattr(fn, "__module__", "") or ""
    return mod.split(".")[0] in ("numpy", "math", "builtins", "functools", "operator",
                                 "scipy") or mod in _ASTJAX_LIBRARY


_ASTJAX_LIBRARY = {"astjax.runtime", "astjax.runtime_array", "astjax.runtime_batch",
                   "astjax.tree_util", "astjax.api", "astjax.forward_api", "astjax.batch_api"}


_HINTS = {
    "Try": "move error handling outside the transformed function",
    "With": "move the context manager outside the transformed function",
    "Global": "pass the value as an argument, or return it",
    "Nonlocal": "return the new value instead of rebinding an outer variable",
    "ClassDef": "define classes at module level",
    "Yield": "return a list or an array instead of yielding",
    "Await": "transformed functions cannot be coroutines",
    "Import": "import at module level",
    "ImportFrom": "import at module level",
    "Delete": "simply stop using the variable",
}
