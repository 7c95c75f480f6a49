"""Normalize a user function's gast AST into the core form (see ``astjax.core``).

What happens here, in one pass over the AST:

* names are resolved: locals stay locals, free names are looked up in the
  function's closure cells, globals and builtins, and classified (NumPy primitive,
  user function to inline, module, captured value);
* expressions are flattened to one primitive per statement, temporaries named after
  the user's variables (``outputs = jnp.dot(inputs, W) + b`` becomes
  ``outputs_dot = np.dot(inputs, W)`` and ``outputs = outputs_dot + b``);
* everyday Python is desugared: ``a if c else b``, ``and``/``or``, chained
  comparisons, comprehensions (list, generator, dict), augmented and tuple
  assignment, ``break``/``continue``/early ``return`` (flags and guards),
  ``lst.append``/``extend``, ``d.get``/``update``, ``dict(...)``;
* iteration helpers compose without building lists (``_walk``): ``zip``,
  ``enumerate``, ``reversed``, ``sorted`` (a permutation from ``rt.sort_order``, the
  elements gathered with ``getitem``), ``map``, ``filter``, dict views.  Every element
  is read from its container with ``getitem``, so no dependence is dropped;
* functions are values bound when code is generated (``static_values.py``, the
  binding-time split): ``f = np.sin``, lists, tuples and dicts of functions (loops
  over them are unrolled), ``fs[0]``, partials, modules, ``*args``/``**kwargs``
  packs, closures returned by factories; a choice made at run time (``fs[i]``,
  ``f if c else g``, a name bound differently in the branches of an ``if``) becomes
  a switch.  A call of a value computed at run time is refused where it is written;
* calls to user functions, nested ``def``s and lambdas are inlined, with their
  locals renamed apart (``inline.py``); transformations written inside the function
  (``vmap(lambda a: ...)(xs)``, ``grad``, ``jit``, ``jvp``, ``vjp``, ``linearize``)
  are applied now, lambdas closing over run-time values lifted first (``nested.py``);
* anything unsupported raises ``TransformError`` at the user's line.
"""
from __future__ import annotations

import builtins
import functools
import operator
import types
from contextlib import contextmanager
from dataclasses import dataclass

import gast

import numpy as np

from astjax import codegen, core, read_guards
from astjax import primitives as P
from astjax import masked_reductions, numpy_definitions, transform_table
from astjax.core import (Assert, Const, Copy, External, For, If, Index, Prim, Raise, Return,
                         SetItem, SliceAtom, Var, While)
from astjax.errors import Location, TransformError, UnsupportedSyntaxError
from astjax.frontend.names import NameGen
from astjax.frontend.inline import Inliner
from astjax.frontend.nested import NestedTransforms
from astjax.frontend.passes import refusal
from astjax.frontend.scopes import (ORIGINS, LoopCtx, Scope, _assigned_names,  # noqa: F401
                                    _is_library, _ordered_names, _params_of, _rebound_names,
                                    _short)
from astjax.frontend.source import get_function_source, unwrap_callable
from astjax.frontend.static_values import (_STATIC_FUNCS, Bound, FuncArg,  # noqa: F401
                                           FuncChoice, LocalFunc, ObjFunc, StaticSeq, Applied,
                                           StaticValues, _is_function_value, _Lazy, _Mixed)

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

# ``ufunc.at`` methods the frontend writes as functional updates (``_ufunc_at``)
_UFUNC_AT = {id(np.add): "add", id(np.subtract): "subtract"}


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
        self._live: list = []
        self._live_count = 0

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

    def live(self) -> list:
        """(name, entry) of the globals and cells: what ``current()`` re-reads (the
        constants never change); kept until an entry is added."""
        if self._live_count != len(self.entries):
            self._live = [(n, e) for n, e in self.entries.items() if e[0] != "value"]
            self._live_count = len(self.entries)
        return self._live

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




# -------------------------------------------------------------------------- normalizer

def _static_truth(test):
    """True or False for an ``if`` test known when the code is generated (a constant
    Python number, bool, string, None or container of them), else None."""
    if not isinstance(test, Const):
        return None
    value = test.value
    if value is None or isinstance(value, (bool, int, float, complex, str, tuple)):
        try:
            return bool(value)
        except Exception:  # noqa: BLE001  (a value with no truth: decided at run time)
            return None
    return None


class Normalizer(StaticValues, NestedTransforms, Inliner):
    """Builds one core Function; inlined callees share its names and emission."""

    MAX_INLINE_DEPTH = 64

    def __init__(self, names: NameGen | None = None):
        self.names = names or NameGen()
        self.env = Env(self.names)
        self.out: list = []
        self.loc: Location | None = None
        self.scope: Scope | None = None
        self.top_scope: Scope | None = None
        self.loops: list[LoopCtx] = []
        self.inline_stack: list = []
        self.func_uses: list = []   # (scope, name, binding, node): reads of bound functions

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
        checked = generated is not None and getattr(func, "_astjax", None) in (
            "grad", "value_and_grad") and not getattr(func, "_astjax_driver", False)
        reverse_label = getattr(func, "_astjax", None)
        if generated is not None:
            func = generated()  # grad(grad(f)): transform the code grad(f) runs
            # (vjp's vjp_fn runs generated code bound to its residuals: a partial)
            func, more, more_kw = unwrap_callable(func)
            pargs, pkwargs = tuple(more) + tuple(pargs), {**more_kw, **pkwargs}
        fsrc = get_function_source(func)
        node = fsrc.node
        args = node.args
        scope = Scope(fsrc, fsrc.name, node=node)
        self.scope = self.top_scope = scope
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
        for p, v in fsrc.defaults.items():
            # def f(x, act=np.tanh): a function default left unbound is inlined like a
            # function passed in (callers that pass another one key the code on it)
            if p not in scope.local_funcs and p not in pkwargs and \
                    p not in params[:len(pargs)] and (_is_function_value(v) or
                                                      isinstance(v, types.ModuleType)):
                scope.local_funcs[p] = ObjFunc(v, self.object_operand(v, p))
        self._rename_locals(scope, node)
        self.scope = scope
        self.loc = self.location(node)
        body: list = []
        bound = dict(zip(params, pargs))
        bound.update(pkwargs)
        with self.emitting(body):
            if checked:     # grad's code read by another transformation (vmap, jvp, ...)
                self.reverse_mode_guard(reverse_label, node)
            for pname, value in bound.items():
                if pname not in scope.rename:
                    self.error(node, f"partial binds unknown parameter {pname!r}")
                if _is_function_value(value):
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
                             kwonly=kwonly, checked_updates=checked)

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
            if not self.return_static(node.body):
                self.expr(node.body, result, target=result)
            return
        stmts = node.body
        if stmts and isinstance(stmts[0], gast.Expr) and isinstance(
                stmts[0].value, gast.Constant) and isinstance(stmts[0].value.value, str):
            stmts = stmts[1:]  # docstring
        # (early returns were lowered by astjax/frontend/passes/returns.py)
        if not stmts or not isinstance(stmts[-1], gast.Return):
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
        if refusal(st):   # a desugaring pass refused it (astjax/frontend/passes)
            self.error(st, *refusal(st))
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
        hazard = getattr(st, "item_update_hazard", None)
        if hazard is not None:
            # ``c[k] op= v`` lowered by the augassign pass, other names that may hold an
            # item of ``c``: NumPy updates an array item in place, which the lowering's
            # new value would not; refused at run time when one of them holds it
            text, sym, others = hazard
            bound = [(n, line) for n, line in others
                     if isinstance(self.scope.rename.get(n), Var)]
            if bound:
                base = self.subscript_base(targets[0])
                item = self.expr(st.value.left, base + "_item")
                held = tuple(self.load_name(n, st) for n, _ in bound)
                self.emit(Prim(None, "refuse_item_update",
                               [Var(base), item, held, Const((text, sym, tuple(bound)))]))
        rebinding = getattr(st, "rebinding_update", None)
        if rebinding is not None and isinstance(self.scope.rename.get(rebinding[0]), Var):
            # ``y op= v`` lowered to ``y = y op v``: which names may still hold the old
            # array is known only after inlining (``core_fixups.prune_rebinding_checks``)
            self.emit(Prim(None, "refuse_rebinding_update",
                           [self.scope.rename[rebinding[0]], (), Const(rebinding + ((),))]))
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

    def stmt_Return(self, st):
        # the last statement: astjax/frontend/passes/returns.py lowered the others
        scope = self.scope
        if st.value is not None and self.return_static(st.value):
            return set()   # a closure returned: bound by the caller (inline.py)
        if st.value is None:
            self.emit(Copy(scope.ret_target, Const(None)))
        else:
            self.expr(st.value, scope.ret_target, target=scope.ret_target)
        return set()

    def stmt_If(self, st):
        taken = self._static_flag(st.test)
        test = self.condition(st.test) if taken is None else Const(taken)
        taken = _static_truth(test)
        if taken is not None:
            # a test known now (a configuration flag, ``x is None`` of a default): only
            # the branch Python takes is code, as when JAX traces it (the other may
            # call what no transformation supports); the flag's read is guarded
            return self.stmt_list(st.body if taken else st.orelse)
        body: list = []
        orelse: list = []
        funcs = self.scope.local_funcs
        before = dict(funcs)
        with self.emitting(body):
            j1 = self.stmt_list(st.body)
        after_body = dict(funcs)
        funcs.clear()
        funcs.update(before)
        with self.emitting(orelse):
            j2 = self.stmt_list(st.orelse)
        self.loc = self.location(st)
        test = self._protect_test(test, body + orelse)
        self._merge_functions(test, after_body, dict(funcs))
        if body or orelse:  # branches that only bound functions leave nothing to run
            self.emit(If(test, body, orelse))
        return j1 | j2

    def _merge_functions(self, test, if_true, if_false):
        """Names bound to functions after an ``if``: a switch where the branches differ.

        A name bound to a function on one path only holds something else on the
        other (a value, or nothing): calling it afterwards is an error (``_Mixed``).
        """
        funcs = self.scope.local_funcs
        pinned = None
        for name in list(dict.fromkeys([*if_true, *if_false])):
            a, b = if_true.get(name), if_false.get(name)
            if a is b:
                if a is not None:
                    funcs[name] = a
                continue
            if a is None or b is None:
                funcs[name] = _Mixed(name)
                continue
            if pinned is None:
                pinned = self._pinned(test, name)
            funcs[name] = FuncChoice([(pinned, a)], b)

    def _protect_test(self, test, blocks):
        """An ``if`` test must still hold its value after the branches run."""
        if isinstance(test, Var) and test.name in core.all_writes(blocks):
            saved = self.tmp(test.name, "was")
            self.emit(Copy(saved, test))
            return Var(saved)
        return test

    def condition(self, node):
        return self.expr(node, "cond")

    def _static_flag(self, node):
        """The truth of a test that names a global or module attribute holding a Python
        bool or number (``if DEBUG:``, ``if config.USE_BIAS:``), else None; its read is
        guarded (``read_guards``): rebinding it makes the code again."""
        if not isinstance(node, (gast.Name, gast.Attribute)) or (
                isinstance(node, gast.Name) and self._is_local(node.id)):
            return None
        value = self.static_value(node)
        if isinstance(value, (bool, np.bool_, int, float)):
            read_guards.capture(value)   # folded: the same value, or the code again
            return bool(value)
        return None

    def _is_local(self, name):
        scope = self.scope
        while scope is not None:
            if name in scope.local_names or name in scope.local_funcs:
                return True
            scope = scope.parent
        return False

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
        self.scope.local_funcs[st.name] = LocalFunc(st, self.scope,
                                                    self.definition_defaults(st))
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

    def _loop(self, st, head, mark=None, before=None):
        """Normalize a loop body; returns (body, exit_flags, jumps leaving the loop)."""
        ctx = LoopCtx()
        self.loops.append(ctx)
        body: list = []
        mark = len(self.func_uses) if mark is None else mark
        before = dict(self.scope.local_funcs) if before is None else before
        with self.emitting(body):
            head()
            jumps = self.stmt_list(st.body)
        self.loops.pop()
        self._check_loop_functions(st, before, mark)
        if ctx.cont:
            body.insert(0, Copy(ctx.cont, Const(False), loc=self.location(st)))
        outer = jumps - {ctx.brk, ctx.cont}
        exit_flags = sorted(f for f in jumps - {ctx.cont} if f)
        self.loc = self.location(st)
        if ctx.brk:
            self.emit(Copy(ctx.brk, Const(False)))
        return body, exit_flags, outer

    def _check_loop_functions(self, st, before, mark):
        """A loop body must not rebind a function name it calls with the old binding.

        Functions are bound when code is generated, once per loop body: a call that
        saw the binding from before the loop would call the wrong function from the
        second iteration on.  After the loop the name may hold either binding.
        """
        funcs = self.scope.local_funcs
        changed = {n for n in set(before) | set(funcs) if before.get(n) is not funcs.get(n)}
        for scope, name, binding, node in self.func_uses[mark:]:
            if scope is self.scope and name in changed and binding is before.get(name):
                self.error(node, f"{name!r} is bound to another function later in the loop "
                                 f"around this line (line {st.lineno}): from the second "
                                 "iteration on, this call would need that binding",
                           "choose the function at the top of the loop body (e.g. "
                           "f = g if i == 0 else h), or hold the functions in a list "
                           "and index it", cls=TransformError)
        for name in changed:
            if before.get(name) is not None:
                funcs[name] = _Mixed(name)  # zero or more trips: either binding

    def stmt_While(self, st):
        test_body: list = []
        mark = len(self.func_uses)
        before = dict(self.scope.local_funcs)
        with self.emitting(test_body):
            test = self.condition(st.test)
        body, flags, outer = self._loop(st, lambda: None, mark, before)
        self.emit(While(test_body, test, body, flags))
        return outer

    def stmt_For(self, st):
        it = st.iter
        target = st.target
        if self._static_iterable(it):
            return self._for_unrolled(st)
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
        walk = self._walk(it)

        def bind(idx):
            self._bind_item(target, walk.item(idx))

        return walk.names, bind, walk.count

    def _walk(self, it):
        """How to walk an iterable by index: ``_Walk(names, count(), item(idx))``.

        ``item`` returns one operand, or a (nested) list of operands for the tuples of
        ``zip``, ``enumerate`` and ``d.items()`` (a tuple target unpacks them without
        building a tuple).  Every element is read from a container with ``getitem``,
        so each carries its derivative.  The helpers compose without building lists:
        ``enumerate(sorted(d.items()))`` walks the dict's keys through a permutation.
        """
        fn = self.static_value(it.func) if isinstance(it, gast.Call) else None
        if fn is zip:
            if it.keywords:
                self.error(it, "zip() keyword arguments are not supported",
                           "zip the sequences without strict=")
            if not it.args:
                self.error(it, "zip() needs at least one sequence",
                           "zip(xs, ys) walks xs and ys together")
            walks = [self._walk(a) for a in it.args]

            def count(_=None):
                lens = [w.count() for w in walks]
                if len(lens) == 1:
                    return lens[0]
                n = self.fresh("n_steps")
                self.emit(External(n, Var(self.env.value_ref(min, "min")), lens))
                return Var(n)

            return _Walk([n for w in walks for n in w.names], count,
                         lambda idx: [w.item(idx) for w in walks])
        if fn is enumerate:
            if not it.args or len(it.args) > 2 or it.keywords and (
                    len(it.keywords) > 1 or it.keywords[0].arg != "start" or len(it.args) > 1):
                self.error(it, "enumerate() takes a sequence and an optional start",
                           "enumerate(xs) or enumerate(xs, 1)")
            base = self._walk(it.args[0])
            start_node = it.args[1] if len(it.args) > 1 else (
                it.keywords[0].value if it.keywords else None)
            start = self.expr(start_node, "start") if start_node is not None else Const(0)

            def item(idx):
                if isinstance(start, Const) and start.value == 0:
                    i = _name_op(idx)
                else:
                    k = self.fresh("k")
                    add = P.BY_OPERATOR["Add"]
                    self.emit(Prim(k, add.name, self.bind(add, [_name_op(idx), start], {}, it)))
                    i = Var(k)
                return [i, base.item(idx)]

            return _Walk(base.names, base.count, item)
        if fn is reversed:
            if len(it.args) != 1 or it.keywords:
                self.error(it, "reversed() takes exactly one sequence",
                           "reversed(xs)")
            base = self._walk(it.args[0])
            counted: list = []

            def count(_=None):
                counted.append(base.count())
                return counted[-1]

            def item(idx):
                k = self.fresh("k_rev")
                last = self.fresh("last")
                sub = P.BY_OPERATOR["Sub"]
                self.emit(Prim(last, sub.name, self.bind(sub, [counted[-1], Const(1)], {}, it)))
                self.emit(Prim(k, sub.name, self.bind(sub, [Var(last), _name_op(idx)], {}, it)))
                return base.item(k)

            return _Walk(base.names, count, item)
        if fn is sorted:
            return self._sorted_walk(it)
        if fn is map:
            if len(it.args) < 2 or it.keywords or not self._denotes_function(it.args[0]):
                self.error(it, "map() needs a function astjax can inline and sequences",
                           "use a list comprehension", cls=TransformError)
            f = self._static_element(it.args[0], "mapped")
            inner = self._walk(gast.Call(func=gast.Name("zip", gast.Load(), None, None),
                                         args=it.args[1:], keywords=[])) \
                if len(it.args) > 2 else self._walk(it.args[1])

            def item(idx):
                x = inner.item(idx)
                parts = [self._pack(p) for p in x] if len(it.args) > 2 else [self._pack(x)]
                return self.call_element(f, parts, {}, it, "mapped", None)

            return _Walk(inner.names, inner.count, item)
        if fn is filter:
            seq = self._materialize(it, "kept")
            return self._sequence_walk(seq, seq.name)
        view = self._dict_view(it)
        if view is not None:
            # d.items(): walk the keys and read d[k] (the key stays a plain key)
            d = self.expr(it.func.value, "d")
            keys = self.tmp(_hint_of(d, "d"), "keys")
            self.emit(Prim(keys, "keys_list", [d]))

            def count(_=None):
                n = self.tmp(keys, "len")
                self.emit(Prim(n, "len", [Var(keys)]))
                return Var(n)

            def item(idx):
                k = self.fresh("key")
                self.emit(Prim(k, "getitem", [Var(keys), Index((_name_op(idx),))]))
                if view == "keys":
                    return Var(k)
                v = self.tmp(_hint_of(d, "d"), "value")
                self.emit(Prim(v, "getitem", [d, Index((Var(k),))]))
                return Var(v) if view == "values" else [Var(k), Var(v)]

            return _Walk([keys], count, item,
                         sort_keys=Var(keys) if view in ("items", "keys") else None)
        seq = self._as_sequence(it, "seq", indexable=True)
        # names read as the user's: params_len, params_i, params_item
        name = it.id if isinstance(it, gast.Name) else _hint_of(seq, "seq")
        return self._sequence_walk(seq, name)

    def _sequence_walk(self, seq, name):
        """Walk an indexable sequence by position: ``len(seq)`` trips, ``seq[i]`` each."""
        def count(_=None):
            n = self.tmp(name, "len")
            self.emit(Prim(n, "len", [seq]))
            return Var(n)

        def item(idx):
            x = self.tmp(name, "item")
            self.emit(Prim(x, "getitem", [seq, Index((_name_op(idx),))]))
            return Var(x)

        return _Walk([name], count, item, seq=seq)

    def _pack(self, item):
        """A walked element as one operand (nested lists become tuples)."""
        if not isinstance(item, list):
            return item
        pair = self.fresh("pair")
        self.emit(Prim(pair, "make_tuple", [tuple(self._pack(x) for x in item)]))
        return Var(pair)

    def _bind_item(self, target, item):
        """Assign a walked element (an operand or a nested list of them) to a target."""
        if isinstance(item, list):
            if isinstance(target, (gast.Tuple, gast.List)) and not any(
                    isinstance(e, gast.Starred) for e in target.elts):
                if len(target.elts) != len(item):
                    self.error(target, f"cannot unpack {len(item)} values into "
                                       f"{len(target.elts)} names",
                               "use as many names as the items have values",
                               cls=TransformError)
                for t, x in zip(target.elts, item):
                    self._bind_item(t, x)
                return
            item = self._pack(item)
        self.assign_operand(target, item)

    def _iter_helper(self, node):
        """zip/enumerate/reversed/sorted when ``node`` calls one of them, else None."""
        if isinstance(node, gast.Call):
            fn = self.static_value(node.func)
            if fn in (zip, enumerate, reversed, sorted, map, filter):
                return fn
        return None

    def _dict_view(self, node):
        """``d.items()``/``d.keys()``/``d.values()`` on a run-time dict: its method name."""
        if isinstance(node, gast.Call) and isinstance(node.func, gast.Attribute) and \
                node.func.attr in ("items", "keys", "values") and not node.args and \
                not node.keywords and self.static_value(node.func.value) is None:
            return node.func.attr
        return None

    def _as_sequence(self, node, hint, indexable=False):
        """An operand that can be indexed: dict views and iterators become lists.

        Every element of a built list is read from its container with ``getitem``, so
        no dependence on a differentiated value is dropped.  ``indexable``: also turn
        a dict into its keys and an iterator into a list (``rt.as_sequence``).
        """
        if self._dict_view(node) is not None:
            return self._materialize(node, hint)
        if self._iter_helper(node) is not None:
            return self._materialize(node, hint)
        if isinstance(node, gast.Call) and self.static_value(node.func) in (list, tuple) and \
                len(node.args) == 1 and not node.keywords:
            return self._as_sequence(node.args[0], hint, indexable=True)
        if isinstance(node, gast.Call) and self.static_value(node.func) in (map, filter):
            self.error(node, "map()/filter() are not supported here",
                       "use a list comprehension")
        seq = self.expr(node, hint)
        if indexable and not isinstance(node, (gast.ListComp, gast.GeneratorExp, gast.List,
                                                gast.Tuple)):
            # dicts iterate over keys, iterators become lists; sequences stay as they are
            items = self.tmp(_hint_of(seq, hint), "seq")
            self.emit(Prim(items, "as_sequence", [seq]))
            seq = Var(items)
        return seq

    def _materialize(self, node, hint):
        """``zip``/``enumerate``/``reversed``/``sorted``/``d.items()`` as a run-time list."""
        if self._iter_helper(node) is filter:
            return self._filtered(node, hint)
        walk = self._walk(node)
        what = self._dict_view(node) or self.static_value(node.func).__name__
        out = self.tmp(_hint_of(walk.names[0], hint) if walk.names else hint, what)
        self.emit(Prim(out, "make_list", [()]))
        n = walk.count()
        idx = self.fresh("i")
        body: list = []
        with self.emitting(body):
            item = self._pack(walk.item(idx))
            self.emit(Prim(out, "append", [Var(out), item]))
        self.emit(For(idx, Prim(None, "range", [Const(0), n, Const(None)]), body))
        return Var(out)

    def _filtered(self, node, hint):
        """``filter(pred, xs)``: the kept elements, appended under an ``if``."""
        if len(node.args) != 2 or node.keywords:
            self.error(node, "filter() takes a function (or None) and a sequence",
                       "filter(f, xs), or a list comprehension with an if",
                       cls=TransformError)
        pred = node.args[0]
        f = None
        if not (isinstance(pred, gast.Constant) and pred.value is None):
            if not self._denotes_function(pred):
                self.error(pred, "filter() needs a function astjax can inline",
                           "use a list comprehension with an if", cls=TransformError)
            f = self._static_element(pred, "keep")
        walk = self._walk(node.args[1])
        out = self.tmp(walk.names[0] if walk.names else hint, "kept")
        self.emit(Prim(out, "make_list", [()]))
        n = walk.count()
        idx = self.fresh("i")
        body: list = []
        with self.emitting(body):
            x = self._pack(walk.item(idx))
            keep = x if f is None else self.call_element(f, [x], {}, node, "keep", None)
            self.emit(If(keep, [Prim(out, "append", [Var(out), x], loc=self.loc)], []))
        self.emit(For(idx, Prim(None, "range", [Const(0), n, Const(None)]), body))
        return Var(out)

    def _sorted_walk(self, node):
        """``sorted(xs, key=..., reverse=...)`` walked through a permutation.

        The order comes from ``rt.sort_order`` on the sort keys: piecewise constant,
        like ``np.argsort``, so it carries no derivative; the elements are then read
        through it with ``getitem``, so their derivatives flow.  ``sorted(d.items())``
        orders by the dict's keys, which are unique, so the values (arrays) are never
        compared.
        """
        if len(node.args) != 1:
            self.error(node, "sorted() takes exactly one positional argument",
                       "sorted(xs, key=f, reverse=True)", cls=TransformError)
        key = reverse = None
        for kw in node.keywords:
            if kw.arg == "key":
                key = kw.value
            elif kw.arg == "reverse":
                reverse = kw.value
            else:
                self.error(node, f"sorted() got an unexpected keyword {kw.arg!r}",
                           "sorted() takes key= and reverse=", cls=TransformError)
        if key is not None and isinstance(key, gast.Constant) and key.value is None:
            key = None
        base = self._walk(node.args[0])
        name = base.names[0] if base.names else "seq"
        n = base.count()
        if key is None and base.sort_keys is not None:
            keys = base.sort_keys
        elif key is None and base.seq is not None:
            keys = base.seq
        else:
            # the keys (or the elements themselves) gathered into a list
            fref = self.arg_operand(key, "key") if key is not None else None
            keys_name = self.tmp(name, "keys")
            self.emit(Prim(keys_name, "make_list", [()]))
            idx = self.fresh("i")
            body: list = []
            with self.emitting(body):
                x = self._pack(base.item(idx))
                if fref is not None:
                    x = self.call_function_ref(self._callable_ref(fref, key), [x], {}, key,
                                               keys_name, None)
                self.emit(Prim(keys_name, "append", [Var(keys_name), x]))
            self.emit(For(idx, Prim(None, "range", [Const(0), n, Const(None)]), body))
            keys = Var(keys_name)
        rev = self.expr(reverse, "reverse") if reverse is not None else Const(False)
        order = self.tmp(name, "order")
        self.emit(Prim(order, "sort_order", [keys, rev]))

        def item(idx):
            j = self.tmp(name, "pos")
            self.emit(Prim(j, "getitem", [Var(order), Index((_name_op(idx),))]))
            return base.item(j)

        return _Walk(base.names, lambda _=None: n, item)

    def _callable_ref(self, op, node):
        """A function reference (for ``call_function_ref``) from a call argument."""
        if isinstance(op, FuncArg):
            if isinstance(op.func, ObjFunc):
                return ("object", op.func.obj)
            return ("local", op.func)
        self.error(node, "expected a function that astjax can inline here (a lambda, a "
                         "nested def, or a function defined in a file)",
                   "pass the function itself, not a value computed at run time",
                   cls=TransformError)

    # ---------------------------------------------------------------- assignment

    def assign(self, target, value_node):
        if isinstance(target, gast.Name) and isinstance(value_node, (gast.Name, gast.Attribute)):
            module = self.static_value(value_node)
            if isinstance(module, types.ModuleType):   # xp = np: a module, bound now
                self.store_name(target.id, target)
                self.scope.local_funcs[target.id] = ObjFunc(
                    module, self.object_operand(module, target.id))
                return
        if isinstance(target, gast.Name) and isinstance(value_node, gast.Lambda):
            self.store_name(target.id, target)
            self.scope.local_funcs[target.id] = LocalFunc(value_node, self.scope,
                                                          self.definition_defaults(value_node))
            return
        if isinstance(target, (gast.Name, gast.Tuple, gast.List)) and \
                self._denotes_function(value_node):
            # f = np.sin, fs = [np.sin, g], f = fs[0], f, g = g, f: bound now, not at run time
            hint = target.id if isinstance(target, gast.Name) else "f"
            if isinstance(target, gast.Name):
                el = self._static_element(value_node, hint)
                self._bind_static(target, el)
                return
            if isinstance(value_node, (gast.Tuple, gast.List)) and len(
                    value_node.elts) == len(target.elts):
                els = [self._static_element(e, hint) if self._denotes_function(e) else
                       self.expr(e, "item") for e in value_node.elts]
                safe = []
                for e in els:  # a, b = b, a: read everything before binding
                    if isinstance(e, Var):
                        t = self.tmp(e.name, "old")
                        self.emit(Copy(t, e))
                        e = Var(t)
                    safe.append(e)
                for t, e in zip(target.elts, safe):
                    self._bind_static(t, e)
                return
            self._bind_static(target, self._static_element(value_node, hint))
            return
        if isinstance(target, gast.Name):
            var = self.store_name(target.id, target)
            el = self.expr(value_node, var, target=var, static_ok=True)
            if isinstance(el, _STATIC_FUNCS):   # step = make_step(c): a closure, bound now
                self.scope.local_funcs[target.id] = el
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
                src = self.expr(value_node, hint, static_ok=True)
                if isinstance(src, _STATIC_FUNCS):   # init_fun, apply_fun = layer(...)
                    self._bind_static(target, src)
                    return
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
        if isinstance(self._peek(target.value), StaticSeq):
            self.error(target, "a *args/**kwargs pack or a list of functions cannot be "
                               "updated in place", "build a new tuple or dict instead",
                       cls=TransformError)
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
                self.func_uses.append((scope, name, scope.local_funcs[name], node))
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
                    value = fsrc.closure[name]
                    read_guards.note_cell(fsrc.cells.get(name), value)
                    return ("object", value, ("cell", fsrc.cells.get(name), name))
                origins = fsrc.globals.get(ORIGINS)
                if origins is not None and name in origins:
                    return self._from_origin(origins[name], node)
                if name in fsrc.globals:
                    value = fsrc.globals[name]
                    if origins is None:   # (astjax's own namespaces hold constants)
                        read_guards.note_global(fsrc.globals, name, value)
                    return ("object", value, ("global", fsrc.globals, name))
                if hasattr(builtins, name):
                    return ("object", getattr(builtins, name), ("builtin", name))
                break
            scope = scope.parent
        self.error(node, f"name {name!r} is not defined", cls=TransformError)

    def _from_origin(self, ref, node):
        """A name of code astjax generated or lifted, looked up where its value came
        from: the user's global or cell, read now (so a rebinding is seen)."""
        if ref[0] == "cell":
            try:
                value = ref[1].cell_contents
            except ValueError:
                self.error(node, f"free variable {ref[2]!r} is not bound any more",
                           cls=TransformError)
            read_guards.note_cell(ref[1], value)
            return ("object", value, ref)
        gdict, key = ref[1], ref[2]
        if key in gdict:
            value = gdict[key]
            read_guards.note_global(gdict, key, value)
            return ("object", value, ref)
        if hasattr(builtins, key):
            return ("object", getattr(builtins, key), ("builtin", key))
        self.error(node, f"name {key!r} is not defined any more", cls=TransformError)

    def load_name(self, name, node):
        kind, *rest = self.lookup(name, node)
        if kind == "local":
            return rest[0]
        if kind == "func":
            if isinstance(rest[0], ObjFunc):
                return rest[0].operand
            if isinstance(rest[0], StaticSeq) and rest[0].operand is not None:
                return rest[0].operand  # a global list of functions, used as a value
            if isinstance(rest[0], StaticSeq):
                packed = self.static_as_value(rest[0], name)
                if packed is not None:
                    return packed  # *args, **kwargs used as a value: a tuple, a dict
                self.error(node, f"{name!r} is a list of functions: it can only be looped "
                                 "over, indexed, or passed to a Python function here",
                           "astjax inlines functions where they are called",
                           cls=TransformError)
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

    # -------------------------------------------------------------- expressions

    def expr(self, node, hint, target=None, discard=False, static_ok=False):
        """Evaluate an expression; returns an operand (Var or Const).

        With ``target``, the final operation assigns that name directly.  With
        ``static_ok``, a call returning a function gives that static value instead.
        """
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            self.error(node, f"{type(node).__name__} expressions are not supported",
                       _HINTS.get(type(node).__name__))
        if isinstance(node, gast.Call):
            result = method(node, hint, target, discard=discard)
        else:
            result = method(node, hint, target)
        if isinstance(result, _STATIC_FUNCS):
            if static_ok or discard:
                return result
            value = self.static_as_value(result, hint)
            if value is None:
                self.error(node, "this call returns a function: it can only be called, "
                                 "assigned to a name or passed to a function here",
                           "astjax inlines functions where they are called",
                           cls=TransformError)
            result = value
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
        repeated = self._repeated_display(node, hint, target)
        if repeated is not None:
            return repeated
        prim = self.operator_prim(node.op, node)
        left = self.expr(node.left, hint)
        right = self.expr(node.right, hint)
        folded = _fold(prim, left, right)
        if folded is not None:
            return folded
        out = self._out(target, hint, _OP_NAMES.get(type(node.op).__name__, prim.name))
        self.emit(Prim(out, prim.name, self.bind(prim, [left, right], {}, node)))
        return Var(out)

    def _repeated_display(self, node, hint, target):
        """``[x] * 2``, ``3 * (a, b)``: Python's repetition of a list or tuple written
        here, by a count known now, is the longer literal (each item evaluated once), so
        derivatives see each item used n times instead of a NumPy product."""
        if not isinstance(node.op, gast.Mult):
            return None
        for seq, count in ((node.left, node.right), (node.right, node.left)):
            if not isinstance(seq, (gast.List, gast.Tuple)) or any(
                    isinstance(e, gast.Starred) for e in seq.elts):
                continue
            n = count.value if isinstance(count, gast.Constant) else self.static_value(count)
            if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
                continue
            items = tuple(self.expr(e, hint) for e in seq.elts)
            prim, suffix = (("make_list", "list") if isinstance(seq, gast.List)
                            else ("make_tuple", "tuple"))
            out = self._out(target, hint, suffix)
            self.emit(Prim(out, prim, [items * max(int(n), 0)]))
            return Var(out)
        return None

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
        if type(op).__name__ in ("Is", "IsNot") and isinstance(left, Const) and \
                isinstance(right, Const) and right.value is None and target is None:
            # ``initial is not None`` of a constant: known now (a branch on it folds)
            return Const((left.value is None) == (type(op).__name__ == "Is"))
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
        if name in ("In", "NotIn"):
            # membership: a fact about a container (its keys), never differentiated
            result = self.tmp(out, "in") if name == "NotIn" else out
            self.emit(Prim(result, "contains", [right, left]))
            if name == "NotIn":
                self.emit(Prim(out, "not_", [Var(result)]))
            return
        if name in ("Is", "IsNot"):
            # identity tests: plain Python, never differentiated
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
        taken = self._static_flag(node.test)
        test = self.condition(node.test) if taken is None else Const(taken)
        taken = _static_truth(test)
        if taken is not None:      # (as in stmt_If)
            return self.expr(node.body if taken else node.orelse, hint, target=target)
        out = self._out(target, hint, "choice")
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
        if any(self.static_value(node.value) is b for b in (np.r_, np.c_)):
            return self.index_concat(node, hint, target)
        base_el = self._peek(node.value) if isinstance(node.value, (gast.Name, gast.Attribute)) \
            else None
        held = isinstance(base_el, StaticSeq) and base_el.operand is not None and not \
            isinstance(node.slice, gast.Constant)   # a global list indexed at run time
        if not held and self._denotes_function(node):
            # args[0], kw["scale"], fs[0]: an item of a static pack, picked now
            el = self._static_element(node, hint)
            value = self.static_as_value(el, hint)
            if value is None:
                self.error(node, "this item is a function: it can only be called or passed "
                                 "to a function here",
                           "astjax inlines functions where they are called", cls=TransformError)
            return value
        base = self.expr(node.value, hint)
        index = self.index(node.slice, base.name if isinstance(base, Var) else hint)
        out = self._out(target, base.name if isinstance(base, Var) else hint, "at")
        self.emit(Prim(out, "getitem", [base, index]))
        return Var(out)

    def index_concat(self, node, hint, target):
        """``np.r_[a, b]`` / ``np.c_[a, b]``: the primitive ``index_concat`` (its items are
        operands, so they are differentiated); a slice item must have constant bounds."""
        elts = node.slice.elts if isinstance(node.slice, gast.Tuple) else [node.slice]
        args = [Const("c" if self.static_value(node.value) is np.c_ else "r")]
        for e in elts:
            if isinstance(e, gast.Slice):
                parts = [None if p is None else self.expr(p, hint)
                         for p in (e.lower, e.upper, e.step)]
                if not all(p is None or isinstance(p, Const) for p in parts):
                    self.error(e, "np.r_/np.c_ with a slice whose bounds are computed",
                               "build the range with np.arange and join with np.concatenate")
                args.append(self.object_operand(slice(*(p and p.value for p in parts)), hint))
            else:
                args.append(self.expr(e, hint))
        prim = P.REGISTRY["index_concat"]
        out = self._out(target, hint, "concat")
        self.emit(Prim(out, prim.name, self.bind(prim, args, {}, node)))
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
        """``{k: v for ...}``: an empty dict filled with ``out[k] = v`` in the loop."""
        out = self._out(target, hint, "dict")
        self.emit(Prim(out, "make_dict", [Const(()), ()]))

        def leaf():
            k = self.expr(node.key, out)
            v = self.expr(node.value, out)
            self.emit(SetItem(out, Index((k,)), v))

        self._comprehension(node.generators, leaf)
        return Var(out)

    def _dict_call(self, node, hint, target):
        """``dict(...)``: keyword entries, ``zip(keys, values)``, pairs or a mapping.

        Constant keys with literal values give one ``make_dict``; otherwise the dict is
        filled entry by entry with ``out[k] = v``, each value read with ``getitem``
        so its derivative flows.  An argument that may be a mapping or a sequence of
        pairs is told apart at run time, as ``dict`` does.
        """
        if len(node.args) > 1:
            self.error(node, "dict() takes at most one positional argument",
                       "dict(mapping_or_pairs, key=value, ...)", cls=TransformError)
        if any(k.arg is None for k in node.keywords):
            self.error(node, "dict(**mapping) is not supported here",
                       "copy it with dict(mapping), then set further entries")
        out = self._out(target, hint, "dict")
        keys: list = []
        values: list = []
        rest = None
        if node.args:
            pairs = self._static_pairs(node.args[0])
            if pairs is None:
                rest = node.args[0]
            else:
                for k, v in pairs:
                    keys.append(k)
                    values.append(self.expr(v, out))
        for kw in node.keywords:
            keys.append(kw.arg)
            values.append(self.expr(kw.value, out))
        if rest is None:
            self.emit(Prim(out, "make_dict", [Const(tuple(keys)), tuple(values)]))
            return Var(out)
        fresh = self.tmp(out, "new") if out in {v.name for v in values
                                                if isinstance(v, Var)} else out
        self.emit(Prim(fresh, "make_dict", [Const(()), ()]))
        self._fill_dict(fresh, rest, out)
        for k, v in zip(keys, values):
            self.emit(SetItem(fresh, Index((Const(k),)), v))
        if fresh != out:
            self.emit(Copy(out, Var(fresh)))
        return Var(out)

    def _static_pairs(self, node):
        """[(key, value node)] for ``zip(KEYS, [v, ...])`` and ``[(KEY, v), ...]``."""
        if isinstance(node, (gast.List, gast.Tuple)):
            pairs = []
            for e in node.elts:
                if not (isinstance(e, gast.Tuple) and len(e.elts) == 2 and isinstance(
                        e.elts[0], gast.Constant)):
                    return None
                pairs.append((e.elts[0].value, e.elts[1]))
            return pairs
        if isinstance(node, gast.Dict) and all(isinstance(k, gast.Constant) for k in node.keys):
            return [(k.value, v) for k, v in zip(node.keys, node.values)]
        if self._iter_helper(node) is zip and len(node.args) == 2 and not node.keywords:
            kn, vn = node.args
            if isinstance(kn, (gast.List, gast.Tuple)) and all(
                    isinstance(e, gast.Constant) for e in kn.elts):
                keys = [e.value for e in kn.elts]
            else:
                keys = self.static_value(kn)
                if not (isinstance(keys, (list, tuple)) and all(
                        isinstance(k, (str, int, bytes)) for k in keys)):
                    return None
            if isinstance(vn, (gast.List, gast.Tuple)) and not any(
                    isinstance(e, gast.Starred) for e in vn.elts):
                return list(zip(keys, vn.elts))
        return None

    def _fill_dict(self, out, node, hint):
        """Emit ``out[k] = v`` for every entry of a mapping or a sequence of pairs."""
        pairs_known = isinstance(node, (gast.List, gast.Tuple, gast.ListComp,
                                        gast.GeneratorExp)) or self._iter_helper(node) or \
            self._dict_view(node) == "items"
        src = self._as_sequence(node, hint) if pairs_known else self.expr(node, hint)

        def from_mapping():
            keys = self.tmp(_hint_of(src, hint), "keys")
            self.emit(Prim(keys, "keys_list", [src]))
            n = self.tmp(keys, "len")
            self.emit(Prim(n, "len", [Var(keys)]))
            idx = self.fresh("i")
            body: list = []
            with self.emitting(body):
                k = self.fresh("key")
                self.emit(Prim(k, "getitem", [Var(keys), Index((Var(idx),))]))
                v = self.fresh("value")
                self.emit(Prim(v, "getitem", [src, Index((Var(k),))]))
                self.emit(SetItem(out, Index((Var(k),)), Var(v)))
            self.emit(For(idx, Prim(None, "range", [Const(0), Var(n), Const(None)]), body))

        def from_pairs():
            seq = src
            if not pairs_known:
                seq_name = self.tmp(_hint_of(src, hint), "seq")
                self.emit(Prim(seq_name, "as_sequence", [src]))
                seq = Var(seq_name)
            n = self.tmp(_hint_of(seq, hint), "len")
            self.emit(Prim(n, "len", [seq]))
            idx = self.fresh("i")
            body: list = []
            with self.emitting(body):
                pair = self.fresh("pair")
                self.emit(Prim(pair, "getitem", [seq, Index((Var(idx),))]))
                k = self.fresh("key")
                self.emit(Prim(k, "getitem", [Var(pair), Index((Const(0),))]))
                v = self.fresh("value")
                self.emit(Prim(v, "getitem", [Var(pair), Index((Const(1),))]))
                self.emit(SetItem(out, Index((Var(k),)), Var(v)))
            self.emit(For(idx, Prim(None, "range", [Const(0), Var(n), Const(None)]), body))

        if pairs_known:
            from_pairs()
        else:
            # a mapping (a list of pairs given as a variable fails loudly at d[k])
            from_mapping()

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
        saved_funcs = {n: scope.local_funcs.get(n) for n in names}
        it = gen.iter
        if self._static_iterable(it):
            elements, limits = self._static_items(it)

            def run_one(k, el):
                self._bind_static(gen.target, el)
                self._comprehension_body(generators, leaf)

            for block in self._unrolled(elements, limits, run_one):
                self.out.extend(block)
        else:
            _, binder, count = self._iteration(it, gen.target)
            idx = self.fresh("i")
            n = count(idx)
            body: list = []
            with self.emitting(body):
                binder(idx)
                self._comprehension_body(generators, leaf)
            self.emit(For(idx, Prim(None, "range", [Const(0), n, Const(None)]), body))
        for name, f in saved_funcs.items():
            if f is None:
                scope.local_funcs.pop(name, None)
            else:
                scope.local_funcs[name] = f
        for name, (was_local, op) in saved.items():
            if not was_local:
                scope.local_names.discard(name)
            if op is None:
                scope.rename.pop(name, None)
            else:
                scope.rename[name] = op

    def _comprehension_body(self, generators, leaf):
        """The filters, then the inner generators or the element, of one iteration."""
        gen = generators[0]
        cur = self.out
        for cond in gen.ifs:
            c = self.condition(cond)
            inner: list = []
            self.emit(If(c, inner, []))
            cur = inner
            self.out = inner  # restored by the caller's emitting()
        with self.emitting(cur):
            if len(generators) > 1:
                self._comprehension(generators[1:], leaf)
            else:
                leaf()

    # --------------------------------------------------------------------- calls

    def expr_Call(self, node, hint, target, discard=False):
        func = node.func
        if isinstance(func, gast.Attribute) and func.attr == "at":   # np.add.at(x, i, v)
            scatter = _UFUNC_AT.get(id(self.static_value(func.value)))
            if scatter is not None:
                return self._ufunc_at(node, scatter, target)
        # method call on a value: x.sum(), lst.append(v)
        if isinstance(func, gast.Attribute) and self.static_value(func) is None and not \
                isinstance(self.static_value(func.value), (types.ModuleType, type)):
            return self.method_call(node, func, hint, target, discard)
        if isinstance(func, gast.Name):
            kind, *rest = self.lookup(func.id, func)
            if kind == "func":
                if isinstance(rest[0], ObjFunc):
                    return self.call_object(rest[0].obj, node, hint, target, discard)
                if isinstance(rest[0], (StaticSeq, FuncChoice, Bound, _Mixed)):
                    args, kwargs = self.call_args(node, hint)
                    return self.call_element(rest[0], args, kwargs, node, hint, target)
                return self.inline_local(rest[0], node, hint, target)
            if kind == "local":
                self._refuse_run_time_callee(func, func.id)
            obj = rest[0]
        elif isinstance(func, gast.Lambda):
            return self.inline_local(LocalFunc(func, self.scope), node, hint, target)
        elif isinstance(func, (gast.Subscript, gast.IfExp)) and self._denotes_function(func) or \
                isinstance(func, gast.Call) and self._is_partial(func):
            el = self._static_element(func, hint)  # fs[0](x), fs[i](x), (f if c else g)(x)
            if isinstance(el, _STATIC_FUNCS):
                args, kwargs = self.call_args(node, hint)
                return self.call_element(el, args, kwargs, node, hint, target)
            self._refuse_run_time_callee(func, None)
        else:
            obj = self.static_value(func)
            if obj is None and isinstance(func, gast.Call):
                obj = self.static_transform(func)
                if isinstance(obj, Applied):   # vmap(lambda a: ... xs ...)(xs)
                    args, kwargs = self.call_args(node, hint)
                    return self.call_element(obj, args, kwargs, node, hint, target)
            if obj is None and isinstance(func, gast.Call):
                el = self.expr(func, hint, static_ok=True)   # make_adder(2)(x)
                if isinstance(el, _STATIC_FUNCS):
                    args, kwargs = self.call_args(node, hint)
                    return self.call_element(el, args, kwargs, node, hint, target)
            if obj is None:
                self._refuse_run_time_callee(func, None)
        return self.call_object(obj, node, hint, target, discard)

    def _refuse_run_time_callee(self, func, name):
        """A call of a function value computed at run time: refused where it is written.

        Functions are bound when code is generated (inlined, or a primitive with its
        rules); a callee known only at run time would be called with no derivative,
        no batching rule and no shape rule, so its result would silently carry none.
        """
        what = f"{name}()" if name else "this call"
        held = f"{name!r} holds" if name else "the callee is"
        self.error(func, f"cannot differentiate through {what} or transform it: {held} a "
                         "value computed at run time, not a function astjax can inline",
                   "call the function directly, or hold functions in a list/dict literal "
                   "(fs = [f, g]) and index or loop over it", cls=TransformError)

    def call_object(self, obj, node, hint, target, discard=False):
        special = SPECIAL_CALLS.get(id(obj))
        if special is not None:
            return special(self, node, hint, target)
        if numpy_definitions.definition(obj) is not None:   # np.trapezoid, np.unwrap...
            return self.inline_callable(obj, node, hint, target)
        scatter = _UFUNC_AT.get(id(getattr(obj, "__self__", None))) \
            if getattr(obj, "__name__", None) == "at" else None
        if scatter is not None:            # (f = np.add.at; f(x, i, v))
            return self._ufunc_at(node, scatter, target)
        custom = getattr(type(obj), "_astjax_custom_call", None)   # custom_jvp/vjp, remat
        if custom is not None:
            return custom(obj, self, *self.call_args(node, hint), node, hint, target)
        if transform_table.is_transformation(obj, "jvp"):
            return self.inline_jvp(node, hint, target)
        if transform_table.is_transformation(obj, "vjp"):   # out, pull = vjp(f, x)
            return self.inline_vjp(node, hint, target)
        if transform_table.is_transformation(obj, "linearize"):
            return self.inline_linearize(node, hint, target)
        if obj is range:
            args, _ = self.call_args(node, hint)
            args = [self.plain(a, node) for a in args]
            out = self._out(target, hint, "range")
            self.emit(Prim(out, "range", self._range_args(args, node)))
            return Var(out)
        if obj is sorted:
            return self._materialize(node, hint)
        if obj is dict:
            return self._dict_call(node, hint, target)
        if obj in (list, tuple) and len(node.args) == 1 and not node.keywords and (
                self._iter_helper(node.args[0]) or self._dict_view(node.args[0])):
            return self._as_sequence(node.args[0], hint)
        if obj in (zip, enumerate, reversed, map, filter):
            self.error(node, f"{obj.__name__}() is supported in a for loop header, a "
                             "comprehension, or given to list/tuple/dict/sorted only",
                       "loop over it with 'for ... in', or use a list comprehension")
        prim = P.lookup_callable(obj)
        if prim is not None:
            args, kwargs = self.call_args(node, hint)
            if prim.name == "len" and len(args) == 1 and not kwargs and isinstance(
                    args[0], FuncArg) and isinstance(args[0].func, StaticSeq):
                return Const(len(args[0].func.items))  # a list of functions: static length
            if prim.name == "len" and len(args) == 1 and not kwargs and \
                    isinstance(args[0], tuple):
                # a tuple of operands (a rule's ``*items``) has a static length: reading
                # the items would make reverse mode keep every one of them
                return Const(len(args[0]))
            return self.prim_call(prim, args, kwargs, node, hint, target)
        if isinstance(obj, functools.partial) or (isinstance(obj, types.MethodType) and not
                                                  _is_library(obj.__func__)) or (
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
            self._refuse_effect(node, callee, label)
            self.emit(External(None, callee, args, kwargs))
            return Const(None)
        out = self._out(target, hint, _short(label))
        self.emit(External(out, callee, args, kwargs))
        return Var(out)

    def _ufunc_at(self, node, prim, target):
        """``np.add.at(x, indices, v)`` updates ``x`` in place, adding at every position
        ``indices`` names, repeated ones included: the core form writes the sum back,
        ``x[...] = scatter_add(x, indices, v)``, an in-place update every
        transformation honours (aliases of ``x`` see it, as in NumPy);
        ``np.subtract.at`` adds ``-v``."""
        what = f"np.{prim}.at"
        if len(node.args) != 3 or node.keywords or any(
                isinstance(a, gast.Starred) for a in node.args):
            self.error(node, f"{what}(x, indices, v) takes three positional arguments here",
                       "pass the array, the indices and the values")
        first = node.args[0]
        whole = gast.Subscript(value=first, slice=gast.Constant(value=Ellipsis, kind=None),
                               ctx=gast.Store())
        gast.copy_location(whole, first)
        base = self.subscript_base(whole)
        indices = self.plain(self.expr(node.args[1], f"{base}_indices"), node)
        values = self.plain(self.expr(node.args[2], f"{base}_values"), node)
        if prim == "subtract":             # (x - v is x + (-v), bit for bit)
            negated = self.fresh(f"{base}_negated")
            self.emit(Prim(negated, "negative", [values]))
            values = Var(negated)
        new = self.fresh(f"{base}_scattered")
        self.emit(Prim(new, "scatter_add", [Var(base), indices, values]))
        self.emit(SetItem(base, self.index(whole.slice, base), Var(new)))
        if target is not None:
            self.emit(Copy(target, Const(None)))
            return Var(target)
        return Const(None)

    def _refuse_effect(self, node, callee, label, method=None):
        """A call made for its effect on an array (its result unused) is refused.

        NumPy functions and methods called without using their result change an
        argument in place (``np.random.shuffle(x)``, ``np.copyto(a, b)``, ``x.sort()``,
        ``x.fill(0)``); the core form would not know, and the derivative would follow
        the old values.  Calls of other libraries (print, logging) stay.
        """
        obj = None
        if isinstance(callee, Var):
            entry = self.env.entries.get(callee.name)
            if entry is None:
                obj = _RUN_TIME
            elif entry[0] == "value":
                obj = entry[1]
            elif entry[0] == "global":
                obj = entry[1].get(entry[2])
        if method is not None and obj is _RUN_TIME:
            self.error(node, f"{label}.{method}() is called for its effect on {label} (its "
                             "result is not used): astjax cannot follow an in-place change",
                       f"build the new value and assign it ({label} = ...)",
                       cls=TransformError)
        if obj is _RUN_TIME:
            return
        owner = obj if method is None else type(obj)
        if (getattr(owner, "__module__", "") or "").split(".")[0] == "numpy":
            what = f"{label}.{method}()" if method else f"{label}()"
            self.error(node, f"{what} is called for its effect on its arguments (its result "
                             "is not used): astjax cannot follow an in-place change",
                       "compute a new array and assign it instead", cls=TransformError)

    def method_call(self, node, func, hint, target, discard):
        name = func.attr
        packed = self.pack_method(node, func, hint, target)   # kwargs.get/pop
        if packed is not None:
            return packed
        handled = self._container_method(node, func, hint, target)
        if handled is not None:
            return handled
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
                self._refuse_effect(node, receiver, rhint, method=name)
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
        return self.prim_call(prim, [receiver, *args], kwargs, node, rhint, target)

    def _container_method(self, node, func, hint, target):
        """Dict and list methods whose values must keep their derivatives.

        ``d.items()``/``keys()``/``values()`` as values, ``d.get(k, default)``,
        ``d.update(...)`` and ``lst.extend(xs)`` become reads with ``getitem`` and
        writes with ``d[k] = v``/``append``; a call left for run time would hand back
        values with no derivative.  Returns None for any other method.
        """
        name = func.attr
        if name in ("items", "keys", "values") and self._dict_view(node):
            return self._materialize(node, hint)
        if name == "get" and 1 <= len(node.args) <= 2 and not node.keywords:
            d = self.expr(func.value, hint)
            dh = _hint_of(d, hint)
            key = self.expr(node.args[0], "key")
            default = self.expr(node.args[1], dh) if len(node.args) > 1 else Const(None)
            has = self.tmp(dh, "has")
            self.emit(Prim(has, "contains", [d, key]))
            out = self._out(target, dh, "get")
            self.emit(If(Var(has), [Prim(out, "getitem", [d, Index((key,))], loc=self.loc)],
                         [Copy(out, default, loc=self.loc)]))
            return Var(out)
        local = isinstance(func.value, gast.Name) and func.value.id in self.scope.local_names
        if name == "update" and local and len(node.args) <= 1 and all(
                k.arg is not None for k in node.keywords):
            d = self.load_name(func.value.id, func.value)
            if not isinstance(d, Var):
                return None
            if node.args:
                self._fill_dict(d.name, node.args[0], d.name)
            for kw in node.keywords:
                self.emit(SetItem(d.name, Index((Const(kw.arg),)), self.expr(kw.value, d.name)))
            return Const(None)
        if name in ("sort", "reverse") and local and not node.args:
            seq = self.load_name(func.value.id, func.value)
            if not isinstance(seq, Var):
                return None
            kws = {k.arg for k in node.keywords}
            if name == "reverse" and not kws:
                self.emit(Prim(seq.name, "getitem",
                               [seq, Index((SliceAtom(None, None, Const(-1)),))]))
                return Const(None)
            if name == "sort" and kws <= {"key", "reverse"} and kws:
                # a list sorted in place: sorted() of it, assigned back
                call = gast.Call(func=gast.Name("sorted", gast.Load(), None, None),
                                 args=[func.value], keywords=node.keywords)
                gast.copy_location(call, node)
                self.emit(Copy(seq.name, self._materialize(call, seq.name)))
                return Const(None)
            if name == "sort" and kws <= {"axis", "kind"}:
                # an array (or a list of numbers) sorted in place: np.sort, assigned back
                as_array = P.lookup_callable(np.asarray)
                self.emit(Prim(seq.name, as_array.name, self.bind(as_array, [seq], {}, node)))
                prim = P.lookup_callable(np.sort)
                kwargs = {k.arg: self.expr(k.value, seq.name) for k in node.keywords}
                self.emit(Prim(seq.name, prim.name, self.bind(prim, [seq], kwargs, node)))
                return Const(None)
            return None
        if name == "pop" and local and not node.keywords and len(node.args) in (0, 2):
            # lst.pop() (a list), d.pop(k, default) (a dict); d.pop(k) stays ambiguous
            seq = self.load_name(func.value.id, func.value)
            if not isinstance(seq, Var):
                return None
            out = self._out(target, seq.name, "popped")
            if not node.args:
                self.emit(Prim(out, "getitem", [seq, Index((Const(-1),))]))
                self.emit(Prim(seq.name, "getitem",
                               [seq, Index((SliceAtom(None, Const(-1), None),))]))
                return Var(out)
            key = self.expr(node.args[0], "key")
            default = self.expr(node.args[1], seq.name)
            has = self.tmp(seq.name, "has")
            self.emit(Prim(has, "contains", [seq, key]))
            self.emit(If(Var(has), [Prim(out, "getitem", [seq, Index((key,))], loc=self.loc)],
                         [Copy(out, default, loc=self.loc)]))
            rest = self.tmp(seq.name, "rest")
            self.emit(Prim(rest, "make_dict", [Const(()), ()]))
            keys = self.tmp(seq.name, "keys")
            self.emit(Prim(keys, "keys_list", [seq]))
            n = self.tmp(keys, "len")
            self.emit(Prim(n, "len", [Var(keys)]))
            idx = self.fresh("i")
            body: list = []
            with self.emitting(body):
                k = self.fresh("key")
                self.emit(Prim(k, "getitem", [Var(keys), Index((Var(idx),))]))
                other = self.tmp(k, "other")
                ne = P.BY_OPERATOR["NotEq"]
                self.emit(Prim(other, ne.name, self.bind(ne, [Var(k), key], {}, node)))
                v = self.fresh("value")
                self.emit(If(Var(other), [Prim(v, "getitem", [seq, Index((Var(k),))],
                                               loc=self.loc),
                                          SetItem(rest, Index((Var(k),)), Var(v),
                                                  loc=self.loc)], []))
            self.emit(For(idx, Prim(None, "range", [Const(0), Var(n), Const(None)]), body))
            self.emit(Copy(seq.name, Var(rest)))
            return Var(out)
        if name == "setdefault" and local and len(node.args) == 2 and not node.keywords:
            d = self.load_name(func.value.id, func.value)
            if not isinstance(d, Var):
                return None
            key = self.expr(node.args[0], "key")
            default = self.expr(node.args[1], d.name)
            has = self.tmp(d.name, "has")
            self.emit(Prim(has, "contains", [d, key]))
            self.emit(If(Var(has), [], [SetItem(d.name, Index((key,)), default, loc=self.loc)]))
            out = self._out(target, d.name, "value")
            self.emit(Prim(out, "getitem", [d, Index((key,))]))
            return Var(out)
        if name == "insert" and local and len(node.args) == 2 and not node.keywords:
            lst = self.load_name(func.value.id, func.value)
            if not isinstance(lst, Var):
                return None
            at = self.expr(node.args[0], "at")
            item = self.expr(node.args[1], lst.name)
            head = self.tmp(lst.name, "head")
            self.emit(Prim(head, "getitem", [lst, Index((SliceAtom(None, at, None),))]))
            tail = self.tmp(lst.name, "tail")
            self.emit(Prim(tail, "getitem", [lst, Index((SliceAtom(at, None, None),))]))
            mid = self.tmp(lst.name, "new")
            self.emit(Prim(mid, "make_list", [(item,)]))
            add = P.BY_OPERATOR["Add"]
            self.emit(Prim(head, add.name, self.bind(add, [Var(head), Var(mid)], {}, node)))
            self.emit(Prim(lst.name, add.name, self.bind(add, [Var(head), Var(tail)], {}, node)))
            return Const(None)
        if name == "extend" and local and len(node.args) == 1 and not node.keywords:
            lst = self.load_name(func.value.id, func.value)
            if not isinstance(lst, Var):
                return None
            walk = self._walk(node.args[0])
            n = walk.count()
            idx = self.fresh("i")
            body: list = []
            with self.emitting(body):
                item = self._pack(walk.item(idx))
                self.emit(Prim(lst.name, "append", [lst, item]))
            self.emit(For(idx, Prim(None, "range", [Const(0), n, Const(None)]), body))
            return Const(None)
        return None

    def prim_call(self, prim, args, kwargs, node, hint, target):
        """``prim(*args, **kwargs)`` on evaluated operands: one primitive, or for a
        reduction with ``where=``/``initial=`` its NumPy definition inlined
        (``astjax/masked_reductions.py``)."""
        masked = masked_reductions.replacement(prim, kwargs)
        if masked is not None:
            if prim.name in masked_reductions.NEEDS_INITIAL and "where" in kwargs and \
                    "initial" not in kwargs:
                self.error(node, f"{prim.code}() with where= needs initial=: the reduction "
                                 "has no identity to give the entries the mask leaves out "
                                 "(NumPy's rule)", "pass initial=-np.inf (max) or "
                                 "initial=np.inf (min), or a value of your data's range",
                           cls=TransformError)
            return self.call_function_ref(("object", masked), args, kwargs, node, hint,
                                          target)
        name = prim.name if prim.name not in ("getitem",) else "item"
        out = self._out(target, hint, _short(name))
        # (not an operator: ``+`` of lists concatenates)
        self.emit(Prim(out, prim.name, self.bind(prim, args, kwargs, node),
                       written_as_call=True))
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
                                 f"arguments ({len(pos)} given)",
                           f"its parameters: {', '.join(p.lstrip('*') for p in params)}",
                           cls=TransformError)
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

_RUN_TIME = object()  # a callee or receiver known only at run time

_CANONICAL_MODULES = {"numpy": "np", "astjax.runtime_array": "ra", "astjax.runtime": "rt",
                      "astjax.runtime_batch": "rb", "math": "math", "astjax.random": "jr",
                      "astjax.debug": "dbg"}


def _fold(prim, left, right):
    """Evaluate an operator on two Python number constants (``y - 1`` with y = 2)
    with Python's own operator: ``2 ** 63 + 3`` is an exact int (the primitive's
    NumPy implementation wrapped it in int64, and a ``range`` over it lost every
    step), ``1 / 0`` is left to raise at run time."""
    fn = P.PYTHON_BINARY.get(prim.operator)
    if fn is not None and isinstance(left, Const) and isinstance(right, Const) and all(
            type(c.value) in (int, float) for c in (left, right)) and \
            P.small_operands(prim.operator, left.value, right.value):
        try:
            value = fn(left.value, right.value)
        except Exception:
            return None
        if type(value) in (int, float, bool):
            return Const(value)
    return None


@dataclass
class _Walk:
    """An iterable walked by index: the sequences' names, trip count, element."""

    names: list
    count: object   # () -> trip count operand (emits what it needs)
    item: object    # (index name) -> operand, or a list of operands (zip, enumerate)
    seq: object = None        # the list walked, when item(i) is seq[i]
    sort_keys: object = None  # keys ordering the items like sorted() (a dict's keys)


def _name_op(idx):
    """An index given as a variable name or as an operand."""
    return Var(idx) if isinstance(idx, str) else idx


def _hint_of(op, default):
    return op.name if isinstance(op, Var) else default



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
