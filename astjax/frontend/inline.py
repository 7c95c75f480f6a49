r"""Inlining: a call of a function known at generation time becomes its body.

Arguments are evaluated in the caller (a function-valued argument stays a static
value, ``FuncArg``); the callee's parameters are bound to them (substituted where the
callee never reassigns them), its locals renamed apart, and its body lowered into the
caller's code with its return value in the caller's target.  Free names of a lambda
or nested def resolve in the scope that defined it: closures keep their captured
environment.  ``*args``/``**kwargs`` parameters bind static packs of the operands.

>>> from astjax.frontend.normalize import Normalizer
>>> from astjax.codegen import print_function
>>> def f(x):
...     def scale(v, *rest, by=2.0):
...         return v * by + rest[0]
...     return scale(x, 1.0, by=3.0)
>>> src = print_function(Normalizer().function(f))
>>> print("\n".join(line for line in src.splitlines() if "#" not in line))
def f(x):
    f_mul = x * 3.0
    f = f_mul + 1.0
    return f
"""
from __future__ import annotations

import functools
import types

import gast

from astjax import numpy_definitions, primitives as P, read_guards
from astjax.core import Const, Copy, Index, Prim, Var
from astjax.errors import TransformError, UnsupportedSyntaxError
from astjax.frontend.scopes import Scope, _assigned_names, _is_library, _params_of, \
    _rebound_names
from astjax.frontend.source import get_function_source, unwrap_callable
from astjax.frontend.static_values import (_STATIC_FUNCS, FuncArg, LocalFunc, ObjFunc,
                                           StaticSeq, _Mixed, FuncChoice, Bound)

# transformations whose generated code is reverse mode (checked inside shard_map)
REVERSE_MODE = ("grad", "value_and_grad")


class Inliner:
    """Normalizer mixin: call arguments, and calls of functions inlined in place."""

    def call_args(self, node, hint):
        """Evaluate a call's arguments; ``*seq`` and ``**d`` spread packs of known size."""
        args = []
        for a in node.args:
            if isinstance(a, gast.Starred):
                args.extend(self.spread(a.value, hint))
                continue
            args.append(self.arg_operand(a, hint))
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                for k, v in self.spread_keywords(kw.value, hint).items():
                    if k in kwargs:
                        self.error(kw.value, f"got multiple values for keyword argument {k!r}",
                                   cls=TransformError)
                    kwargs[k] = v
                continue
            kwargs[kw.arg] = self.arg_operand(kw.value, hint)
        return args, kwargs

    def spread(self, node, hint):
        """The operands ``*node`` passes: its length must be known at generation time."""
        items = self.static_items_of(node, hint)
        if items is not None:
            return items
        self.error(node, "*args in a call needs a sequence whose length is known when the "
                         "code is generated",
                   "spread a tuple written in the function (ps = (a, b); f(*ps)), a "
                   "*args parameter, or a list/tuple held in a global",
                   cls=UnsupportedSyntaxError)

    def static_items_of(self, node, hint):
        """The items of a sequence whose length is known now (operands or FuncArgs), or
        None: a literal, a static pack, a local always bound to literals of one length,
        a global tuple/list."""
        if isinstance(node, (gast.Tuple, gast.List)) and not any(
                isinstance(e, gast.Starred) for e in node.elts):
            return [self.arg_operand(e, hint) for e in node.elts]
        el = self._peek(node) if isinstance(node, (gast.Name, gast.Attribute)) else None
        if el is None and isinstance(node, gast.Subscript) and self._denotes_function(node):
            el = self._static_element(node, hint)
        if isinstance(el, StaticSeq) and el.keys is None:
            return [FuncArg(i) if isinstance(i, _STATIC_FUNCS) else i for i in el.items]
        if isinstance(node, gast.Name):
            n = self.known_length(node.id)
            if n is not None:
                seq = self.load_name(node.id, node)
                out = []
                for k in range(n):
                    item = self.tmp(node.id, "item")
                    self.emit(Prim(item, "getitem", [seq, Index((Const(k),))]))
                    out.append(Var(item))
                return out
        value = self.static_value(node)
        if isinstance(value, (tuple, list)) and len(value) <= 256:
            read_guards.capture(value)   # its items are bound now
            return [self.arg_operand_of(v, hint) for v in value]
        return None

    def spread_keywords(self, node, hint):
        """The keyword operands ``**node`` passes (its keys known at generation time)."""
        if isinstance(node, gast.Dict) and all(isinstance(k, gast.Constant) and isinstance(
                k.value, str) for k in node.keys):
            return {k.value: self.arg_operand(v, k.value) for k, v in zip(node.keys, node.values)}
        el = self._peek(node) if isinstance(node, (gast.Name, gast.Attribute)) else None
        if isinstance(el, StaticSeq) and el.keys is not None:
            return {k: FuncArg(i) if isinstance(i, _STATIC_FUNCS) else i
                    for k, i in zip(el.keys, el.items)}
        if isinstance(node, gast.Name):
            keys = self.known_keys(node.id)
            if keys is not None:
                d = self.load_name(node.id, node)
                out = {}
                for k in keys:
                    item = self.tmp(k, "kw")
                    self.emit(Prim(item, "getitem", [d, Index((Const(k),))]))
                    out[k] = Var(item)
                return out
        value = self.static_value(node)
        if isinstance(value, dict) and all(isinstance(k, str) for k in value):
            read_guards.capture(value)   # its items are bound now
            return {k: self.arg_operand_of(v, k) for k, v in value.items()}
        self.error(node, "**kwargs in a call needs a dict whose keys are known when the "
                         "code is generated",
                   "spread a **kwargs parameter or a dict literal with string keys",
                   cls=UnsupportedSyntaxError)

    def arg_operand_of(self, value, hint):
        """A Python object known now, as a call argument (functions stay static)."""
        el = self._from_object(value, hint)
        return FuncArg(el) if isinstance(el, _STATIC_FUNCS) else el

    def known_length(self, name):
        """The length of local ``name`` when every binding of it is a tuple or list
        literal of one length (see ``known_literal``)."""
        found = self.known_literal(name, (gast.Tuple, gast.List))
        return None if found is None else len(found.elts)

    def known_keys(self, name):
        """The keys of local ``name`` when every binding of it is a dict literal with the
        same constant string keys."""
        found = self.known_literal(name, (gast.Dict,))
        return None if found is None else [k.value for k in found.keys]

    def known_literal(self, name, kinds):
        """One literal binding of ``name`` when all its bindings have the same shape.

        A tuple is immutable; a list or dict qualifies only when it is never a
        method's receiver, never passed whole to a call and (a dict) never gets an
        item assigned: nothing can change its length or keys.
        """
        scope = self.scope
        if scope.node is None or name not in scope.local_names or \
                name in _params_of(scope.node.args):
            return None
        body = scope.node.body if isinstance(scope.node.body, list) else [scope.node.body]
        shapes, stack, first, mutated = set(), list(body), None, False
        while stack:
            n = stack.pop()
            if isinstance(n, (gast.FunctionDef, gast.Lambda)):
                continue
            if isinstance(n, gast.Assign) and any(
                    isinstance(t, gast.Name) and t.id == name for t in n.targets):
                v = n.value
                if len(n.targets) != 1 or not isinstance(v, kinds):
                    return None
                if isinstance(v, gast.Dict):
                    if not all(isinstance(k, gast.Constant) and isinstance(k.value, str)
                               for k in v.keys):
                        return None
                    shapes.add(tuple(k.value for k in v.keys))
                else:
                    if any(isinstance(e, gast.Starred) for e in v.elts):
                        return None
                    shapes.add(len(v.elts))
                first = v
            elif isinstance(n, gast.Name) and n.id == name and isinstance(
                    n.ctx, (gast.Store, gast.Del)) and not _assign_target(n, body):
                return None
            elif isinstance(n, gast.Attribute) and isinstance(n.value, gast.Name) and \
                    n.value.id == name:
                mutated = True   # (a method of a list or dict may change it)
            elif isinstance(n, gast.Subscript) and isinstance(n.ctx, gast.Store) and \
                    isinstance(n.value, gast.Name) and n.value.id == name and \
                    kinds == (gast.Dict,):
                mutated = True
            elif isinstance(n, gast.Call) and any(
                    isinstance(a, gast.Name) and a.id == name for a in n.args):
                mutated = True
            stack.extend(gast.iter_child_nodes(n))
        if len(shapes) != 1 or mutated and not isinstance(first, gast.Tuple):
            return None
        return first

    def arg_operand(self, node, hint):
        """A call argument: an operand, or a FuncArg when it denotes a function."""
        if isinstance(node, gast.Lambda):
            return FuncArg(LocalFunc(node, self.scope))
        if isinstance(node, gast.Name):
            kind, *rest = self.lookup(node.id, node)
            if kind == "func":
                return FuncArg(rest[0])
        if isinstance(node, (gast.List, gast.Tuple, gast.Dict, gast.Subscript, gast.IfExp)) \
                and self._denotes_function(node) or isinstance(node, gast.Call) and \
                self._is_partial(node) or isinstance(
                    node, (gast.Name, gast.Attribute)) and isinstance(self._peek(node),
                                                                      StaticSeq):
            el = self._static_element(node, hint)  # a list of functions, fs[0]...
            return FuncArg(el) if isinstance(el, _STATIC_FUNCS) else el
        if isinstance(node, (gast.Name, gast.Attribute)):
            obj = self.static_value(node)
            if isinstance(obj, types.ModuleType):   # make_step(np, ...): bound now
                return FuncArg(ObjFunc(obj, self.object_operand(obj, getattr(node, "id", "m"))))
            if callable(obj) and not isinstance(obj, type) and not isinstance(
                    obj, types.ModuleType):
                name = getattr(obj, "__name__", "f")
                return FuncArg(ObjFunc(obj, self.object_operand(obj, name)))
        op = self.expr(node, hint, static_ok=True)
        return FuncArg(op) if isinstance(op, _STATIC_FUNCS) else op

    def plain(self, op, node):
        """An operand for a primitive or an external call (a function becomes a value)."""
        if isinstance(op, FuncArg):
            if isinstance(op.func, ObjFunc):
                return op.func.operand
            if isinstance(op.func, StaticSeq):
                packed = self.static_as_value(op.func, "args")
                if packed is not None:
                    return packed
            if isinstance(op.func, _Mixed):
                self.call_element(op.func, [], {}, node, "", None)  # the error
            if isinstance(op.func, (StaticSeq, FuncChoice, Bound)):
                self.error(node, "a list of functions, a function chosen at run time or a "
                                 "partial can only be called, looped over, indexed, or "
                                 "passed to a Python function here",
                           "astjax inlines functions where they are called",
                           cls=TransformError)
            self.error(node, "a lambda or nested function can only be called or passed to "
                             "another Python function here",
                       "astjax inlines functions where they are called", cls=TransformError)
        return op

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
                if isinstance(rest[0], LocalFunc):
                    return ("local", rest[0])
                return ("element", rest[0])  # a switch, a partial, a list (an error)
            if kind == "object" and callable(rest[0]):
                return ("object", rest[0])
        elif isinstance(node, (gast.Subscript, gast.IfExp, gast.Call)) and \
                self._denotes_function(node):
            el = self._static_element(node, "f")
            if isinstance(el, _STATIC_FUNCS):
                return ("element", el)
        else:
            obj = self.static_value(node)
            if obj is None and isinstance(node, gast.Call):
                obj = self.static_transform(node)   # lax.scan(checkpoint(f), ...)
            if obj is not None and callable(obj):
                return ("object", obj)
        if isinstance(node, gast.Call):
            el = self.expr(node, "f", static_ok=True)   # lax.scan(make_step(c), ...)
            if isinstance(el, _STATIC_FUNCS):
                return ("element", el)
        self.error(node, "expected a function that astjax can inline here (a lambda, a "
                         "nested def, or a function defined in a file)",
                   "pass the function itself, not a value computed at run time",
                   cls=TransformError)

    def call_function_ref(self, ref, args, kwargs, node, hint, target):
        """Inline (or, for a primitive, emit) a call of ``ref`` on evaluated operands."""
        kind, value = ref
        if kind == "element":
            return self.call_element(value, args, kwargs, node, hint, target)
        custom = getattr(type(value), "_astjax_custom_call", None)   # custom_jvp/vjp, remat
        if custom is not None:
            return custom(value, self, args, kwargs, node, hint, target)
        per_arity = getattr(value, "_astjax_per_arity", None)
        if kind == "object" and per_arity is not None:   # grad(f) of f(*args): grad(f_2)
            value = per_arity(len(args), tuple(kwargs))
        generated = getattr(value, "_astjax_generated", None)
        if kind == "object" and generated is not None:
            if getattr(value, "_astjax", None) in REVERSE_MODE and \
                    not getattr(value, "_astjax_driver", False):
                self.reverse_mode_guard(value._astjax, node)
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
            return self.prim_call(prim, args, kwargs, node, hint, target)
        value = numpy_definitions.definition(value) or value   # (np.trapezoid: in NumPy)
        func, pargs, pkwargs = unwrap_callable(value)
        if _is_library(func):
            self.error(node, f"{getattr(func, '__qualname__', func)} cannot be inlined here",
                       "wrap it in a lambda or a def of your own", cls=TransformError)
        # keyed on the function object, by identity: code objects compare equal by
        # contents (wrappers with the same text in two modules), and closures of one
        # def or partials of one function (a decorator's wrapper around another) share
        # code while being different functions; real recursion still repeats an object
        key = value if isinstance(value, functools.partial) else func
        if len(self.inline_stack) > self.MAX_INLINE_DEPTH or any(
                c is key for c in self.inline_stack):
            self.error(node, f"recursive call to {func.__name__} cannot be inlined",
                       "rewrite the recursion as a loop", cls=TransformError)
        fsrc = get_function_source(func)
        pre = [self.object_operand(v, "arg") for v in pargs]
        pkw = {k: self.object_operand(v, k) for k, v in pkwargs.items()}
        pkw.update(kwargs)
        scope = Scope(fsrc, fsrc.name, parent=None)
        return self._inline(scope, fsrc.node, pre + list(args), pkw, node, hint, target,
                            code=key)

    def inline_local(self, lf: LocalFunc, node, hint, target):
        args, kwargs = self.call_args(node, hint)
        name = getattr(lf.node, "name", "lambda")
        scope = Scope(lf.scope.fsrc, name, parent=lf.scope)
        if id(lf.node) in self.inline_stack:
            self.error(node, f"recursive call to {name} cannot be inlined",
                       "rewrite the recursion as a loop", cls=TransformError)
        return self._inline(scope, lf.node, args, kwargs, node, hint, target, code=id(lf.node),
                            defaults=lf.defaults)

    def _inline(self, scope, fnode, args, kwargs, call_node, hint, target, code,
                defaults=None):
        a = fnode.args
        params = _params_of(a)
        positional = [x.id for x in a.posonlyargs + a.args]
        if len(args) > len(positional) and not a.vararg:
            self.error(call_node, f"{scope.name}() takes {len(positional)} positional "
                                  f"arguments but {len(args)} were given", cls=TransformError)
        bound = dict(zip(positional, args))
        extra_kw = {}
        for k, v in kwargs.items():
            if k in bound or k not in params and not a.kwarg:
                self.error(call_node, f"{scope.name}() got an unexpected keyword {k!r}",
                           cls=TransformError)
            if k in params:
                bound[k] = v
            else:
                extra_kw[k] = v
        # *args / **kwargs: packs of known length and keys (static values)
        if a.vararg:
            scope.local_funcs[a.vararg.id] = StaticSeq(
                [_static_item(v) for v in args[len(positional):]])
        if a.kwarg:
            scope.local_funcs[a.kwarg.id] = StaticSeq(
                [_static_item(v) for v in extra_kw.values()], keys=tuple(extra_kw))
        if defaults is None:
            defaults = self._defaults_of(scope, fnode)
        caller_scope, caller_loops, caller_loc = self.scope, self.loops, self.loc
        scope.local_names = _assigned_names(fnode) | set(params)
        scope.node = fnode
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
                scope.substituted.add(p)
        self._rename_locals(scope, fnode)
        self.scope, self.loops = scope, []
        self.inline_stack.append(code)
        try:
            self._body(scope, fnode, result)
        finally:
            self.inline_stack.pop()
            self.scope, self.loops, self.loc = caller_scope, caller_loops, caller_loc
        if scope.static_result is not None:
            return scope.static_result   # a closure or a pack of them: bound by the caller
        if target is not None and result != target:
            self.emit(Copy(target, Var(result)))
            return Var(target)
        return Var(result)

    def return_static(self, value):
        """``return step`` / ``return init_fun, apply_fun`` in an inlined function.

        A function (or a pack holding one) returned is a static value: it becomes the
        call's result at generation time, closing over the callee's scope.  Parameters
        that were substituted by the caller's variables are copied first, so the
        closure keeps the values of the call even if the caller rebinds them.
        Returns whether ``value`` was such a value.
        """
        scope = self.scope
        if scope is self.top_scope:
            return False
        if isinstance(value, gast.Name):
            try:
                kind, el = self.lookup(value.id, value)[:2]
            except TransformError:
                return False
            if kind != "func":
                return False
        elif isinstance(value, gast.Lambda) or self._denotes_function(value):
            el = self._static_element(value, scope.name)
        else:
            return False
        if not isinstance(el, _STATIC_FUNCS):
            return False
        for p in sorted(scope.substituted):
            v = scope.rename.get(p)
            if isinstance(v, Var):
                pinned = self.fresh(p)
                self.emit(Copy(pinned, v))
                scope.rename[p] = Var(pinned)
        scope.substituted.clear()
        scope.static_result = el
        return True

    def definition_defaults(self, fnode):
        """The defaults of a def or lambda evaluated now, where it is defined (Python
        evaluates them once, there: ``lambda y, a=a: ...`` keeps the ``a`` of this
        moment however ``a`` is rebound later); a variable is pinned to a fresh name."""
        a = fnode.args
        if not a.defaults and not any(d is not None for d in a.kw_defaults):
            return None
        out = {}
        pos = a.posonlyargs + a.args
        pairs = list(zip(pos[len(pos) - len(a.defaults):], a.defaults)) + [
            (p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
        for p, d in pairs:
            op = self.arg_operand(d, p.id)
            out[p.id] = op if isinstance(op, FuncArg) else self._pinned(op, p.id)
        return out

    def _defaults_of(self, scope, fnode):
        out = {}
        a = fnode.args
        pos = a.posonlyargs + a.args
        if scope.parent is None and hasattr(scope.fsrc, "defaults"):
            for k, v in scope.fsrc.defaults.items():
                out[k] = self.arg_operand_of(v, k)  # def f(x, act=np.tanh, xp=np): static
            return out
        saved = self.scope
        self.scope = scope.parent or saved
        try:
            for p, d in zip(pos[len(pos) - len(a.defaults):], a.defaults):
                out[p.id] = self.arg_operand(d, p.id)
            for p, d in zip(a.kwonlyargs, a.kw_defaults):
                if d is not None:
                    out[p.id] = self.arg_operand(d, p.id)
        finally:
            self.scope = saved
        return out


def _static_item(v):
    """A call operand as an item of a static pack (a function stays a static value)."""
    return v.func if isinstance(v, FuncArg) else v


def _assign_target(name_node, body):
    """Whether ``name_node`` is the whole target of a plain ``name = ...`` in ``body``."""
    for n in gast.walk(gast.Module(body=body, type_ignores=[])):
        if isinstance(n, gast.Assign) and len(n.targets) == 1 and n.targets[0] is name_node:
            return True
    return False
