r"""Transformations written inside a transformed function: ``jvp(f, ...)``,
``vmap(f)(x)``, ``grad(lambda ...)(x)``, ``jit(g)``.

The transformation is applied at generation time to a Python function and the code
it runs is inlined.  A lambda, nested def or partial that closes over run-time values
of the enclosing function is first *lifted*: written out as a real function whose
captured run-time values are trailing parameters (unbatched by ``vmap``, not
differentiated by ``grad``), while the functions, modules and constants it captures
are bound by name in its namespace.  Nothing of this is left in the generated code:
the transformed lifted function is inlined like any other.

>>> import numpy as np
>>> from astjax import vmap
>>> from astjax.frontend.normalize import Normalizer
>>> from astjax.codegen import print_function
>>> def gram(xs):
...     return vmap(lambda a: np.sum(a * xs))(xs)
>>> norm = Normalizer()
>>> fn = norm.function(gram)
>>> lifted = [f for f in norm.lifted]
>>> print(lifted[0]._astjax_lifted_source, end="")
def anonymous(a, xs):
    return np.sum(a * xs)
>>> src = print_function(fn)
>>> print("\n".join(line for line in src.splitlines() if "#" not in line))
def gram(xs):
    n_tuple = (xs,)
    n = rb.leaf_axis_size(n_tuple, 0)
    outs = []
    for i in range(0, n):
        outs_tree_index = rt.tree_index(xs, i)
        outs_out_mul = outs_tree_index * xs
        outs_out = np.sum(outs_out_mul)
        outs = rt.append_owned(outs, outs_out)
    stacked = rt.tree_stack(outs, False)
    gram = stacked
    return gram
"""
from __future__ import annotations

import ast
import inspect
import types

import gast

from astjax import codegen, transform_table
from astjax.binding import signature_of
from astjax.core import Const, Copy, Index, Prim, Var
from astjax.errors import TransformError
from astjax.frontend.numpy_functions import as_python_function
from astjax.frontend.scopes import ORIGINS, Scope, _assigned_names, origin
from astjax.frontend.static_values import (_STATIC_FUNCS, Applied, Bound, LocalFunc,
                                           ObjFunc, StaticSeq)


class NestedTransforms:
    """Normalizer mixin: transformations applied inside the function being lowered."""

    def inline_jvp(self, node, hint, target):
        """``jvp(f, (x, ...), (t, ...))`` inside transformed code: inline f's jvp code."""
        if len(node.args) != 3 or node.keywords:
            self.error(node, "jvp inside a transformed function needs the form "
                             "jvp(f, primals, tangents)", cls=TransformError)
        fun, applied = self.transform_argument(node.args[0])
        if fun is None:
            self.error(node.args[0], "jvp needs a function here",
                       "pass a function, a lambda or a nested def", cls=TransformError)
        packs = [self.static_items_of(a, hint) for a in node.args[1:]]
        if any(p is None for p in packs):
            self.error(node, "jvp: the primals and tangents must be tuples whose length is "
                             "known when the code is generated",
                       "write them as tuples, (x,) and (t,), or assign tuples to a name",
                       cls=TransformError)
        primals = [self.plain(p, node) for p in packs[0]]
        tangents = [self.plain(t, node) for t in packs[1]]
        if applied is not None:
            # a lifted function: its defaults and captured values follow the primals,
            # with zero tangents
            if len(primals) > len(applied.params):
                self.error(node, "jvp: more primals than the function takes",
                           cls=TransformError)
            if len(primals) != len(tangents):
                self.error(node, "jvp: as many tangents as primals are needed",
                           cls=TransformError)
            for p in applied.params[len(primals):]:
                if p not in applied.defaults:
                    self.error(node, f"jvp: missing argument {p!r}", cls=TransformError)
            rest = [self.plain(applied.defaults[p], node)
                    for p in applied.params[len(primals):]] + list(applied.captured)
            generated = transform_table.get("jvp").main(fun, tuple(range(len(primals))), ())
            return self.call_function_ref(("object", generated), primals + rest + tangents,
                                          {}, node, hint, target)
        if len(primals) != len(tangents):
            self.error(node, "jvp: as many tangents as primals are needed", cls=TransformError)
        generated = transform_table.get("jvp").main(fun, tuple(range(len(primals))), ())
        # the generated code takes every parameter, then the tangents: fill in defaults
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
        if getattr(callee, "_astjax_static_constructor", False):
            return self.static_construct(callee, node)
        if not transform_table.inlinable(callee):
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
            if v is None:   # grad(f) of a function f passed in; checkpoint(nested def)
                v = self._function_argument(a, callee)
            return missing if v is None else v   # (vmap(grad(f)): nested transformations)

        if not node.args:
            return None
        fun, applied = self.transform_argument(node.args[0])
        if fun is None:
            return None
        values = [fun]
        for a in list(node.args[1:]) + [k.value for k in node.keywords]:
            v = literal(a)
            if v is missing:
                return None
            values.append(v)
        n = len(node.args)
        kwargs = {k.arg: v for k, v in zip(node.keywords, values[n:])}
        args = values[:n]
        if applied is not None and transform_table.is_transformation(callee, "vmap"):
            # the captured values come after the parameters: never batched
            in_axes = kwargs.pop("in_axes", args[1] if len(args) > 1 else 0)
            args = args[:1]
            if isinstance(in_axes, (tuple, list)):
                in_axes = tuple(in_axes) + (None,) * (len(applied.params) - len(in_axes))
            else:
                in_axes = (in_axes,) * len(applied.params)
            kwargs["in_axes"] = in_axes + (None,) * len(applied.captured)
        result = callee(*args, **kwargs)
        if applied is None:
            return result
        return Applied(result, applied.params, applied.defaults, applied.captured)

    def static_construct(self, callee, node):
        """``shard_map(f, mesh=..., in_specs=P(...), ...)``, ``pmap(f, ...)`` (and the
        ``P(...)`` and ``make_mesh(...)`` they take) written inside transformed code:
        built now, as the code is generated, when every argument is known then (a
        function, a global value, a literal, another such call); the sharded function
        is then inlined like one built outside."""
        name = getattr(callee, "__name__", "this call")

        def refuse(a, why):
            self.error(a, f"{name}(...) inside a transformed function: {why}",
                       "build the sharded function outside the transformed one (e.g. at "
                       "module level) and call it here", cls=TransformError)

        def value(a):
            if isinstance(a, gast.Constant):
                return a.value
            if isinstance(a, gast.UnaryOp) and isinstance(a.op, gast.USub) and \
                    isinstance(a.operand, gast.Constant):
                return -a.operand.value
            if isinstance(a, (gast.Tuple, gast.List, gast.Set)):
                parts = [value(e) for e in a.elts]
                return {gast.Tuple: tuple, gast.List: list, gast.Set: set}[type(a)](parts)
            if isinstance(a, gast.Dict):
                return {value(k): value(v) for k, v in zip(a.keys, a.values)}
            if isinstance(a, gast.Starred):
                refuse(a, "*arguments are not supported here")
            made = self.static_transform(a) if isinstance(a, gast.Call) else None
            if made is not None and not isinstance(made, Applied):
                return made                    # P(...), make_mesh(...), jit(f), vmap(f)
            v = self.static_value(a)
            if v is not None:
                return v
            fun, applied = self.transform_argument(a)
            if fun is not None and (applied is None or not applied.captured):
                return fun
            refuse(a, "this argument must be known when the code is generated (a "
                      "function, a global value or a literal)"
                   + ("; this function uses values of the enclosing function"
                      if applied is not None else ""))

        args = [value(a) for a in node.args]
        kwargs = {k.arg: value(k.value) for k in node.keywords if k.arg is not None}
        if any(k.arg is None for k in node.keywords):
            refuse(node, "**keywords are not supported here")
        return callee(*args, **kwargs)

    def _function_argument(self, node, callee):
        """A function named in ``callee(f)`` inside transformed code: one passed in (its
        object), or a nested def or lambda the transformation lifts (``checkpoint``:
        its table entry's ``lift``); else None."""
        bound = None
        if isinstance(node, gast.Lambda):
            bound = LocalFunc(node, self.scope)
        elif isinstance(node, gast.Name):
            kind, *rest = self.lookup(node.id, node)
            bound = rest[0] if kind == "func" else None
        if isinstance(bound, ObjFunc):
            return bound.obj
        entry = transform_table.entry_of(callee)
        if isinstance(bound, LocalFunc) and entry is not None and entry.lift is not None:
            return entry.lift(self, bound)
        return None

    # ------------------------------------------------------------------ lifting

    def transform_argument(self, node):
        """(function, Applied template or None) for a transformation's first argument
        (a NumPy function becomes a generated function calling it)."""
        fun, applied = self._transform_argument(node)
        return as_python_function(fun) if fun is not None else None, applied

    def _transform_argument(self, node):
        """The function a transformation written here receives as its first argument.

        Returns (Python function, Applied template or None).  A lambda, nested def or
        partial is lifted (see the module docstring); a function reached by name is
        passed as it is.
        """
        if isinstance(node, gast.Call):
            inner = self.static_transform(node)
            if isinstance(inner, Applied):
                return inner.func, inner
            if inner is not None:
                return inner, None
        el = None
        if isinstance(node, gast.Lambda):
            el = LocalFunc(node, self.scope)
        elif isinstance(node, gast.Name):
            kind, *rest = self.lookup(node.id, node)
            if kind == "func":
                el = rest[0]
            elif kind == "object":
                return rest[0], None
        elif self._denotes_function(node):
            el = self._static_element(node, "f")
        if el is None:
            obj = self.static_value(node)
            return (obj, None) if obj is not None and callable(obj) else (None, None)
        if isinstance(el, ObjFunc):
            return el.obj, None
        if not isinstance(el, _STATIC_FUNCS):
            return None, None
        fn, params, defaults, captured = self.lift(el, node)
        return fn, Applied(None, params, defaults, [op for _, op in captured])

    def call_applied(self, el, args, kwargs, node, hint, target):
        """Call a transformed lifted function: the user's arguments by parameter, the
        defaults filled in, the captured values after them."""
        if len(args) > len(el.params):
            self.error(node, f"this function takes {len(el.params)} positional arguments "
                             f"but {len(args)} were given", cls=TransformError)
        bound = dict(zip(el.params, args))
        for k, v in kwargs.items():
            if k not in el.params or k in bound:
                self.error(node, f"unexpected keyword argument {k!r}", cls=TransformError)
            bound[k] = v
        full = []
        for p in el.params:
            if p in bound:
                full.append(bound[p])
            elif p in el.defaults:
                full.append(el.defaults[p])
            else:
                self.error(node, f"missing argument {p!r}", cls=TransformError)
        full = [self.plain(a, node) for a in full]
        return self.call_function_ref(("object", el.func), full + list(el.captured), {},
                                      node, hint, target)

    def lift(self, el, node):
        """(function, parameters, default operands, captured (name, operand) pairs)
        for a static function value, as a real Python function taking its captured
        run-time values after its parameters."""
        if isinstance(el, ObjFunc):
            sig = _signature(el.obj)
            if sig is None:
                self.error(node, "cannot read the parameters of this function",
                           "wrap it in a lambda", cls=TransformError)
            defaults = {p.name: self.object_operand(p.default, f"{p.name}_default")
                        for p in sig.parameters.values()
                        if p.default is not inspect.Parameter.empty}
            return el.obj, [p for p in sig.parameters], defaults, []
        if isinstance(el, Bound):
            return self._lift_partial(el, node)
        if isinstance(el, LocalFunc):
            return self._lift_local(el, node)
        self.error(node, "this function is chosen at run time: a transformation needs the "
                         "function itself", "apply the transformation to each function "
                         "and choose among the results", cls=TransformError)

    def _lift_partial(self, el, node):
        func, params, defaults, captured = self.lift(el.func, node)
        if len(el.args) > len(params):
            self.error(node, "partial binds more arguments than the function takes",
                       cls=TransformError)
        fixed = dict(zip(params, el.args))
        for k, v in el.kwargs.items():
            if k not in params:
                self.error(node, f"partial binds unknown parameter {k!r}",
                           cls=TransformError)
            fixed[k] = v
        rest = [p for p in params if p not in fixed]
        namespace = {"_partial_of": func}
        caps, passed = [], []
        for p in params:
            if p not in fixed:
                passed.append(f"{p}={p}")
                continue
            v = self.plain(fixed[p], node)
            if isinstance(v, Const) and _is_literal(v.value):
                passed.append(f"{p}={v.value!r}")     # constants stay constants
            elif isinstance(v, Const):
                namespace[f"{p}_fixed"] = v.value
                passed.append(f"{p}={p}_fixed")
            else:
                caps.append((p, v))
                passed.append(f"{p}={p}")
        caps = _merge_captured(caps, captured, set(rest))
        inner = [n for n, _ in caps if n not in fixed]
        sig = ", ".join(rest + [n for n, _ in caps])
        call = ", ".join(passed + inner)
        name = _fresh_name(getattr(func, "__name__", "f").strip("<>"), namespace)
        src = f"def {name}({sig}):\n    return _partial_of({call})\n"
        fn = self._load_lifted(src, namespace, name, node)
        return fn, rest, {p: d for p, d in defaults.items() if p in rest}, caps

    def _lift_local(self, el, node):
        fnode = el.node
        a = fnode.args
        if a.vararg or a.kwarg:
            self.error(node, "a function with *args/**kwargs cannot be transformed here",
                       "give it explicit parameters", cls=TransformError)
        params = [x.id for x in a.posonlyargs + a.args + a.kwonlyargs]
        local = _assigned_names(fnode) | set(params)
        namespace, caps, wrappers, constants = {}, [], [], {}
        saved = self.scope
        self.scope = el.scope
        try:
            defaults = el.defaults if el.defaults is not None else self._defaults_of(
                Scope(el.scope.fsrc, "lifted", parent=el.scope), fnode)
            for name in _free_names(fnode):
                if name in local:
                    continue
                try:
                    kind, *rest = self.lookup(name, fnode)
                except TransformError:
                    continue   # (a name local to a nested lambda)
                if kind == "object" and rest[1] is not None and rest[1][0] == "global" \
                        and not callable(rest[0]) and not isinstance(rest[0], types.ModuleType):
                    # a global the code re-reads on each call: captured as a run-time
                    # value, so the lifted function, when it runs as it is (a
                    # checkpoint's forward), never keeps an old one
                    caps = _merge_captured(caps, [(name, self.load_name(name, fnode))], local)
                elif kind == "object":
                    namespace[name] = rest[0]
                    if origin(rest[1]):
                        namespace.setdefault(ORIGINS, {})[name] = rest[1]
                elif kind == "local":
                    op = rest[0]
                    if isinstance(op, Const):
                        namespace[name] = op.value
                        if _is_literal(op.value):
                            constants[name] = op.value
                    elif isinstance(op, Var):
                        caps = _merge_captured(caps, [(name, op)], local)
                    else:
                        self.error(node, f"cannot capture {name!r} here", cls=TransformError)
                elif isinstance(rest[0], ObjFunc):
                    namespace[name] = rest[0].obj
                else:
                    fn, sub_params, sub_defaults, sub_caps = self.lift(rest[0], node)
                    if not sub_caps and not sub_defaults:
                        namespace[name] = fn
                        continue
                    # a local function closing over run-time values: a def in the lifted
                    # body forwards to its own lifted form with those values
                    inner = _fresh_name(f"{name}_", namespace)
                    namespace[inner] = fn
                    caps = _merge_captured(caps, sub_caps, local)
                    extra = [_find_captured(caps, op) for _, op in sub_caps]
                    if set(extra) & set(sub_params):
                        self.error(node, f"{name}: a captured variable has the name of one "
                                         "of its parameters", "rename one of them",
                                   cls=TransformError)
                    for p, d in sub_defaults.items():
                        if not isinstance(d, Const):
                            self.error(node, f"{name}: a default computed at run time "
                                             "cannot be captured here", cls=TransformError)
                        namespace[f"{name}_default_{p}"] = d.value
                    sig = ", ".join(p + (f"={name}_default_{p}" if p in sub_defaults else "")
                                    for p in sub_params)
                    wrappers.append(f"def {name}({sig}):\n    return {inner}("
                                    + ", ".join(sub_params + extra) + ")")
        finally:
            self.scope = saved
        tree = _Substitute(constants).visit(gast.gast_to_ast(_copy(fnode)))
        name = _fresh_name(getattr(fnode, "name", "anonymous"), namespace)
        if isinstance(tree, ast.Lambda):
            body = [ast.Return(tree.body)]
        else:
            body = tree.body
        fd = ast.FunctionDef(
            name=name, args=ast.arguments(posonlyargs=[], args=[ast.arg(p) for p in params + [
                n for n, _ in caps]],
                                          kwonlyargs=[], kw_defaults=[], defaults=[]),
            body=[ast.parse(w).body[0] for w in wrappers] + body, decorator_list=[],
            returns=None, type_params=[])
        src = ast.unparse(ast.fix_missing_locations(ast.Module([fd], []))) + "\n"
        fn = self._load_lifted(src, namespace, name, fnode)
        return fn, params, defaults, caps

    def _load_lifted(self, src, namespace, name, node):
        """Compile a lifted function; errors in it point at the user's ``node``."""
        loc = self.location(node)
        codegen.load_source(src, namespace, f"lifted {name}", [loc] * (src.count("\n") + 1))
        fn = namespace[name]
        if name.startswith("anonymous"):
            fn.__name__ = fn.__qualname__ = "<lambda>"   # named like the user's lambda
        fn._astjax_lifted_source = src
        self.__dict__.setdefault("lifted", []).append(fn)
        return fn

    # ------------------------------------------------- vjp / linearize written here

    def _primal_values(self, node, what):
        """(function, primal operands with defaults and captured values, count given)."""
        if len(node.args) < 2 or node.keywords:
            self.error(node, f"{what} inside a transformed function needs the form "
                             f"{what}(f, x, ...) (has_aux is not supported here)",
                       cls=TransformError)
        fun, applied = self.transform_argument(node.args[0])
        if fun is None:
            self.error(node.args[0], f"{what} needs a function here",
                       "pass a function, a lambda or a nested def", cls=TransformError)
        args = []
        for a in node.args[1:]:
            if isinstance(a, gast.Starred):
                args.extend(self.spread(a.value, "primal"))
            else:
                args.append(self.arg_operand(a, "primal"))
        primals = [self._pinned_copy(self.plain(a, node)) for a in args]
        if applied is not None:
            rest = [self.plain(applied.defaults[p], node) if p in applied.defaults else None
                    for p in applied.params[len(primals):]]
            if any(r is None for r in rest) or len(primals) > len(applied.params):
                self.error(node, f"{what}: the primals do not match the function's "
                                 "parameters", cls=TransformError)
            return fun, primals + rest + list(applied.captured), len(primals)
        sig = signature_of(fun)
        for name in sig.names[len(primals):]:
            default = sig.signature.parameters[name].default
            if default is inspect.Parameter.empty:
                self.error(node, f"{what}: {sig.fname}() missing argument {name!r}",
                           cls=TransformError)
            primals.append(self.object_operand(default, f"{name}_default"))
        return fun, primals, len(args)

    def _pinned_copy(self, op):
        """A user's variable copied, so a function built on it keeps today's value."""
        if isinstance(op, Var) and self._is_user_variable(op.name):
            pin = self.fresh(op.name)
            self.emit(Copy(pin, op))
            return Var(pin)
        return op

    def reverse_mode_guard(self, what, node):
        """Reverse mode's code read here (inlined, or transformed again: ``jit(grad(f))``,
        ``vmap(grad(f))``, ``jacfwd(grad(f))``) skips the check ``grad`` makes when it is
        called; the generated code makes it instead: inside a ``check_vma=True``
        shard_map JAX's gradients differ from astjax's, so it refuses at run time."""
        self.emit(Prim(None, "reverse_mode_guard", [Const(what)], loc=self.location(node)))

    def inline_vjp(self, node, hint, target):
        """``out, pull = vjp(f, x, ...)`` here: the forward sweep runs now, ``pull`` is a
        function value (the backward sweep bound to the residuals), inlined where it
        is called or transformed (``vmap(pull)(cts)``)."""
        fun, values, n = self._primal_values(node, "vjp")
        self.reverse_mode_guard("vjp", node)
        gen = transform_table.get("vjp").code(fun, (), False, tuple(range(n)))
        gen.refresh()
        both = self.call_function_ref(("object", gen.functions["fwd"]), values, {}, node,
                                      f"{hint or 'vjp'}_fwd", None)
        out = self.tmp(hint, "out")
        residuals = self.tmp(hint, "residuals")
        self.emit(Prim(out, "getitem", [both, Index((Const(0),))]))
        self.emit(Prim(residuals, "getitem", [both, Index((Const(1),))]))
        bwd = gen.functions["bwd"]
        pull = Bound(ObjFunc(bwd, self.object_operand(bwd, "pullback")), [Var(residuals)], {})
        return StaticSeq([Var(out), pull])

    def inline_linearize(self, node, hint, target):
        """``out, f_jvp = linearize(f, x, ...)`` here: ``out`` computed now, ``f_jvp`` a
        function value (the jvp at the primals, keeping its tangent output)."""
        fun, values, n = self._primal_values(node, "linearize")
        jvp_f = transform_table.get("jvp").main(fun, tuple(range(n)), ())
        tangents = [f"t{k}" for k in range(n)]
        primals = [f"p{k}" for k in range(len(values))]
        src = (f"def linearized({', '.join(primals + tangents)}):\n"
               f"    return jvp_at({', '.join(primals + tangents)})[1]\n")
        fn = self._load_lifted(src, {"jvp_at": jvp_f}, "linearized", node)
        out = self.call_function_ref(("object", fun), list(values), {}, node,
                                     hint or "out", None)
        return StaticSeq([out, Bound(ObjFunc(fn, self.object_operand(fn, "f_jvp")),
                                     list(values), {})])


def _is_literal(value):
    return type(value) in (bool, int, float, str, type(None))


class _Substitute(ast.NodeTransformer):
    """Captured constants (ints used as shapes, flags) written into the lifted code."""

    def __init__(self, constants):
        self.constants = constants

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Load) and node.id in self.constants:
            return ast.copy_location(ast.Constant(self.constants[node.id]), node)
        return node

    def _scoped(self, node):
        # a nested function or comprehension binding the name shadows the constant
        bound = {n.arg for n in ast.walk(node) if isinstance(n, ast.arg)} | {
            n.id for n in ast.walk(node) if isinstance(n, ast.Name) and
            isinstance(n.ctx, ast.Store)}
        saved = self.constants
        self.constants = {k: v for k, v in saved.items() if k not in bound}
        try:
            return self.generic_visit(node)
        finally:
            self.constants = saved

    visit_Lambda = visit_FunctionDef = visit_ListComp = visit_SetComp = _scoped
    visit_DictComp = visit_GeneratorExp = _scoped


def _fresh_name(base, taken):
    name, k = base, 1
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    return name


def _merge_captured(caps, more, reserved):
    """Captured (name, operand) pairs plus ``more``: one parameter per operand, named
    after the user's variable (renamed apart only on a clash)."""
    caps = list(caps)
    for name, op in more:
        if any(o == op for _, o in caps):
            continue
        taken = {n for n, _ in caps} | set(reserved)
        caps.append((_fresh_name(name, taken), op))
    return caps


def _find_captured(caps, op):
    return next(n for n, o in caps if o == op)


def _signature(obj):
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        return None


def _free_names(fnode):
    """Names read in a function (nested lambdas included), in order of appearance."""
    seen = []
    for n in gast.walk(fnode):
        if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Load) and n.id not in seen:
            seen.append(n.id)
    return seen


def _copy(node):
    import copy
    return copy.deepcopy(node)
