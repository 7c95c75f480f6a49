r"""Values known when code is generated: functions, and containers holding them.

The binding-time split of the frontend.  A lambda, a nested def, a NumPy function,
a partial, a list/tuple/dict of functions (and ``*args``/``**kwargs`` packs, whose
length and keys are known) is bound *now*, at generation time, in
``Scope.local_funcs``; it flows through assignments, calls, returns and containers
without appearing in the generated code.  Loops over such containers are unrolled,
calls inline the function, and a choice made by a run-time value (``fs[i]``,
``f if c else g``) becomes a switch.  Array values stay in the generated code.

>>> import numpy as np
>>> from astjax.frontend.normalize import Normalizer
>>> from astjax.codegen import print_function
>>> def f(x):
...     fs = [np.sin, lambda t: t * t]
...     total = 0.0
...     for g in fs:
...         total = total + g(x)
...     return total
>>> src = print_function(Normalizer().function(f))
>>> print("\n".join(line for line in src.splitlines() if "#" not in line))
def f(x):
    total = 0.0
    total_sin = np.sin(x)
    total = total + total_sin
    total_out = x * x
    total = total + total_out
    f = total
    return f
"""
from __future__ import annotations

import functools
import types
from dataclasses import dataclass

import gast

import numpy as np

from astjax import primitives as P, read_guards
from astjax import transform_table
from astjax.core import Const, Copy, External, If, Prim, Raise, SliceAtom, Var
from astjax.errors import TransformError
from astjax.frontend.scopes import LoopCtx, _is_library, _short


@dataclass
class LocalFunc:
    node: object          # gast.FunctionDef | gast.Lambda
    scope: object         # Scope: the scope it was defined in (its free names resolve there)
    # parameter -> operand of its default, evaluated where the def or lambda ran (as
    # Python evaluates defaults once, there); None: evaluated at each call (a lambda
    # made and called in one expression, where the two are the same)
    defaults: dict | None = None


@dataclass
class ObjFunc:
    """A local name bound to a known callable (``apply(np.tanh, x)`` binds f = np.tanh)."""

    obj: object
    operand: object


def _is_function_value(value) -> bool:
    """A callable that calls inline (a function), not an array or a class."""
    return callable(value) and not isinstance(value, (np.ndarray, np.generic, type))


@dataclass
class FuncArg:
    """A call argument that is a function: inlined callees receive the function itself."""

    func: object  # LocalFunc | ObjFunc


@dataclass
class StaticSeq:
    """A list, tuple or dict holding functions: known when code is generated.

    ``fs = [np.sin, lambda t: t * t]`` binds ``fs`` to one of these; loops over it are
    unrolled and ``fs[0](x)`` inlines the function, so no call of a function value is
    left for run time (where its derivative would be lost).  Items are LocalFunc,
    ObjFunc, StaticSeq or plain operands.
    """

    items: list
    keys: tuple | None = None   # a dict's keys (its items are then the values)
    operand: object = None      # the run-time value, for a container found in globals


@dataclass
class FuncChoice:
    """A function chosen by a run-time value (``fs[i]``, ``f if c else g``).

    ``cases``: (test operand, function); ``otherwise``: the function when no test
    holds, or None for an IndexError.  A call becomes an ``if`` chain (a switch).
    """

    cases: list
    otherwise: object = None


@dataclass
class _Lazy:
    """Element ``k`` of a run-time walk zipped with a static container (read when bound)."""

    walk: object
    k: int


@dataclass
class Bound:
    """``functools.partial(f, a, k=b)`` made in the function: f with operands bound."""

    func: object
    args: list
    kwargs: dict


@dataclass
class _Mixed:
    """A name that holds a function on some paths and something else on others."""

    name: str


@dataclass
class Applied:
    """A transformation of a lifted function: ``vmap(lambda a: ... xs ...)``.

    ``func`` is the transformed Python function; a call binds the user's arguments to
    ``params`` (filling ``defaults``, operands) and passes ``captured`` after them.
    """

    func: object
    params: list
    defaults: dict
    captured: list


_STATIC_FUNCS = (LocalFunc, ObjFunc, StaticSeq, FuncChoice, Bound, _Mixed, Applied)


_MUTATING = {"append", "extend", "insert", "remove", "clear", "update", "setdefault",
             "popitem", "pop", "sort", "reverse"}


class StaticValues:
    """Normalizer mixin: build, bind, index, iterate and call static values."""

    def static_value(self, node):
        """The Python object an expression denotes when it is a global/module path."""
        if isinstance(node, gast.Name):
            try:
                kind, *rest = self.lookup(node.id, node)
            except TransformError:
                return None
            if kind == "object":
                return rest[0]
            if kind == "func" and isinstance(rest[0], ObjFunc) and isinstance(
                    rest[0].obj, types.ModuleType):
                return rest[0].obj   # a module passed in or assigned: xp.sin is np.sin
            return None
        if isinstance(node, gast.Attribute):
            base = self.static_value(node.value)
            if isinstance(base, (types.ModuleType, type)) or (
                    base is not None and type(base).__name__ in ("_ArrayFunctionDispatcher",)):
                if not hasattr(base, node.attr):
                    self.error(node, f"{getattr(base, '__name__', base)!s} has no attribute "
                                     f"{node.attr!r}", cls=TransformError)
                value = getattr(base, node.attr)
                read_guards.note_attribute(base, node.attr, value)
                return value
            return None
        if isinstance(node, gast.Call) and len(node.args) == 2 and not node.keywords and \
                isinstance(node.args[1], gast.Constant) and isinstance(node.args[1].value, str) \
                and self.static_value(node.func) is getattr:
            # getattr(np, "sin"): a module path spelled as a call
            base = self.static_value(node.args[0])
            if isinstance(base, (types.ModuleType, type)) and hasattr(base, node.args[1].value):
                value = getattr(base, node.args[1].value)
                read_guards.note_attribute(base, node.args[1].value, value)
                return value
        return None

    def static_as_value(self, el, hint):
        """A static pack of operands (``*args``, ``**kwargs``) as one run-time value.

        Returns None when the pack holds a function (it has no run-time value).
        """
        if isinstance(el, ObjFunc):
            return el.operand
        if not isinstance(el, StaticSeq):
            return el if not isinstance(el, _STATIC_FUNCS) else None
        if el.operand is not None:
            return el.operand
        items = []
        for item in el.items:
            v = self.static_as_value(item, hint)
            if v is None or isinstance(item, ObjFunc):
                return None
            items.append(v)
        if el.keys is not None:
            out = self.tmp(hint, "dict")
            self.emit(Prim(out, "make_dict", [Const(tuple(el.keys)), tuple(items)]))
        else:
            out = self.tmp(hint, "tuple")
            self.emit(Prim(out, "make_tuple", [tuple(items)]))
        return Var(out)

    # ------------------------------------------------------- functions as values
    #
    # A function, or a container holding functions, is known when code is generated:
    # it is bound at generation time (scope.local_funcs), loops over it are unrolled,
    # calls inline it.  A choice made by a run-time value (``fs[i]``, ``f if c else
    # g``, a name bound to different functions in the two branches of an ``if``)
    # becomes a switch.  What cannot be resolved so is a located error: a call of a
    # function value left for run time would lose its derivative.

    @staticmethod
    def _is_function_object(obj):
        return callable(obj) and not isinstance(obj, (type, types.ModuleType))

    def _holds_functions(self, obj, depth=0):
        """A list/tuple/dict (nested, small) with a function among its entries."""
        if depth > 4 or type(obj) not in (list, tuple, dict) or len(obj) > 256:
            return False  # a big container is data: looking through it would cost
        values = obj.values() if isinstance(obj, dict) else obj
        if isinstance(obj, dict) and not all(isinstance(k, (str, int)) for k in obj):
            return False
        return any(self._is_function_object(v) or self._holds_functions(v, depth + 1)
                   for v in values)

    def _from_object(self, obj, hint, ref=None):
        """A Python object as a static element: functions and containers of them."""
        if self._is_function_object(obj) or isinstance(obj, types.ModuleType):
            return ObjFunc(obj, self.object_operand(obj, getattr(obj, "__name__", hint), ref))
        if self._holds_functions(obj):
            read_guards.capture(obj)   # its items are bound now
            if isinstance(obj, dict):
                return StaticSeq([self._from_object(v, hint) for v in obj.values()],
                                 keys=tuple(obj), operand=self.object_operand(obj, hint, ref))
            return StaticSeq([self._from_object(v, hint) for v in obj],
                             operand=self.object_operand(obj, hint, ref))
        return self.object_operand(obj, hint)

    def _peek(self, node):
        """The static element a name or attribute denotes, without emitting code."""
        if isinstance(node, gast.Name):
            try:
                kind, *rest = self.lookup(node.id, node)
            except TransformError:
                return None
            if kind == "func":
                return rest[0]
            if kind == "object" and (self._is_function_object(rest[0]) or
                                     self._holds_functions(rest[0])):
                return self._from_object(rest[0], node.id, rest[1])
            return None
        if isinstance(node, (gast.Attribute, gast.Call)):
            try:
                obj = self.static_value(node)
            except TransformError:
                return None
            if obj is not None and (self._is_function_object(obj) or self._holds_functions(obj)):
                return self._from_object(obj, getattr(node, "attr", "f"))
        return None

    def _denotes_function(self, node):
        """Whether an expression denotes a function or a container holding functions."""
        if isinstance(node, gast.Lambda):
            return True
        if isinstance(node, (gast.Name, gast.Attribute)):
            return self._peek(node) is not None
        if isinstance(node, (gast.List, gast.Tuple)):
            return any(self._denotes_function(e) for e in node.elts
                       if not isinstance(e, gast.Starred))
        if isinstance(node, gast.Dict):
            return all(isinstance(k, gast.Constant) for k in node.keys) and any(
                self._denotes_function(v) for v in node.values)
        if isinstance(node, gast.Subscript):
            return isinstance(self._peek(node.value), StaticSeq) or (
                isinstance(node.value, gast.Subscript) and self._denotes_function(node.value))
        if isinstance(node, gast.IfExp):
            return self._denotes_function(node.body) and self._denotes_function(node.orelse)
        if isinstance(node, gast.Call):
            if self._is_partial(node) or self._is_transform(node):
                return True
            return self._peek(node) is not None
        return False

    def pack_method(self, node, func, hint, target):
        """A method of a ``*args``/``**kwargs`` pack, or None when ``func`` is not one.

        ``kwargs.get(k, d)`` and ``kwargs.pop(k, d)`` with a constant key are resolved
        now (``pop`` rebinds the name to the pack without ``k``); any other method
        that would change the pack is refused: it would change a copy, silently.
        """
        if not isinstance(func.value, gast.Name):
            return None
        try:
            kind, *rest = self.lookup(func.value.id, func.value)
        except TransformError:
            return None
        pack = rest[0] if kind == "func" else None
        if not isinstance(pack, StaticSeq) or pack.operand is not None:
            return None
        name = func.attr
        if name in ("get", "pop") and pack.keys is not None:
            if not node.args or not isinstance(node.args[0], gast.Constant) or \
                    len(node.args) > 2 or node.keywords:
                self.error(node, f"{func.value.id}.{name}() needs a constant key here",
                           "write the key as a string", cls=TransformError)
            key = node.args[0].value
            if key in pack.keys:
                found = pack.items[pack.keys.index(key)]
            elif len(node.args) == 2:
                found = self.arg_operand(node.args[1], hint)
                found = found.func if isinstance(found, FuncArg) else found
            elif name == "pop":
                self.error(node, f"{func.value.id} has no key {key!r}", cls=TransformError)
            else:
                found = Const(None)
            if name == "pop" and key in pack.keys:
                if func.value.id not in self.scope.local_funcs:
                    self.error(node, f"{func.value.id}.pop() changes a pack of an enclosing "
                                     "function", "copy it first: kw = dict(kwargs)",
                               cls=TransformError)
                k = pack.keys.index(key)
                self.scope.local_funcs[func.value.id] = StaticSeq(
                    pack.items[:k] + pack.items[k + 1:], keys=pack.keys[:k] + pack.keys[k + 1:])
            return found
        if name in _MUTATING:
            self.error(node, f"{func.value.id}.{name}() would change the *args/**kwargs pack "
                             "in place, which is not supported",
                       "build a new tuple or dict instead", cls=TransformError)
        return None

    def _is_transform(self, node):
        """``vmap(f, ...)``, ``grad(f)``, ``jit(f)``, ``shard_map(f, ...)`` written here:
        a function value (built when the code is generated: nested.static_transform)."""
        if not isinstance(node, gast.Call):
            return False
        callee = self.static_value(node.func)
        return transform_table.inlinable(callee) or \
            getattr(callee, "_astjax_static_constructor", None) == "function"

    def _is_partial(self, node):
        """``functools.partial(f, ...)`` of a function astjax can inline."""
        return isinstance(node, gast.Call) and node.args and not any(
            isinstance(a, gast.Starred) for a in node.args) and all(
            k.arg is not None for k in node.keywords) and \
            self.static_value(node.func) is functools.partial and \
            self._denotes_function(node.args[0])

    def _static_element(self, node, hint="f"):
        """Build the static element ``node`` denotes (see ``_denotes_function``)."""
        if isinstance(node, gast.Lambda):
            return LocalFunc(node, self.scope)
        if isinstance(node, (gast.Name, gast.Attribute)):
            el = self._peek(node)
            if el is not None:
                return el
            return self.expr(node, hint)
        if isinstance(node, (gast.List, gast.Tuple)):
            if any(isinstance(e, gast.Starred) for e in node.elts):
                self.error(node, "starred items in a list of functions are not supported",
                           "list the functions one by one")
            return StaticSeq([self._static_element(e, hint) if self._denotes_function(e)
                              else self.expr(e, hint) for e in node.elts])
        if isinstance(node, gast.Dict):
            return StaticSeq([self._static_element(v, hint) if self._denotes_function(v)
                              else self.expr(v, hint) for v in node.values],
                             keys=tuple(k.value for k in node.keys))
        if isinstance(node, gast.IfExp):
            test = self._pinned(self.condition(node.test), hint)
            a = self._static_element(node.body, hint)
            b = self._static_element(node.orelse, hint)
            return FuncChoice([(test, a)], b)
        if isinstance(node, gast.Call) and self._is_partial(node):
            func = self._static_element(node.args[0], hint)
            args = [self.arg_operand(a, hint) for a in node.args[1:]]
            kwargs = {k.arg: self.arg_operand(k.value, k.arg) for k in node.keywords}
            return Bound(func, args, kwargs)
        if isinstance(node, gast.Call) and self._is_transform(node):
            made = self.static_transform(node)
            if made is not None:
                return made if isinstance(made, Applied) else ObjFunc(
                    made, self.object_operand(made, hint))
        if isinstance(node, gast.Call):
            el = self._peek(node)
            if el is not None:
                return el
        if isinstance(node, gast.Subscript):
            seq = self._static_element(node.value, hint)
            if not isinstance(seq, StaticSeq):
                self.error(node, "only a list, tuple or dict of functions can be indexed here",
                           "hold the functions in a list/dict literal", cls=TransformError)
            return self._static_index(seq, node, hint)
        return self.expr(node, hint)

    def _pinned(self, test, hint):
        """A test operand copied to a fresh name, so later assignments cannot change it.

        Temporaries the normalizer made are assigned once per execution of their
        statement already; only a user's variable needs the copy.
        """
        if not isinstance(test, Var) or not self._is_user_variable(test.name):
            return test
        pin = self.tmp(hint, "pick")
        self.emit(Copy(pin, test))
        return Var(pin)

    def _static_index(self, seq, node, hint):
        """``fs[k]`` (constant k: the element) or ``fs[i]`` (a switch on i)."""
        sl = node.slice
        index = self._index_item(sl, hint) if not isinstance(sl, gast.Tuple) else None
        n = len(seq.items)
        if isinstance(index, SliceAtom):
            bounds = [b.value if isinstance(b, Const) else b for b in
                      (index.lower, index.upper, index.step)]
            if seq.keys is None and all(b is None or isinstance(b, int) for b in bounds):
                return StaticSeq(seq.items[slice(*bounds)])
            self.error(node, "a list of functions can be sliced with constant bounds only",
                       "slice with numbers (fs[1:]), or index it", cls=TransformError)
        if isinstance(index, Const):
            k = index.value
            if seq.keys is not None:
                if k not in seq.keys:
                    self.error(node, f"key {k!r} is not in the dict of functions",
                               f"its keys: {', '.join(map(repr, seq.keys))}",
                               cls=TransformError)
                return seq.items[seq.keys.index(k)]
            if not isinstance(k, int) or not -n <= k < n:
                self.error(node, f"index {k!r} is out of range for a list of {n} functions",
                           f"use an index from {-n} to {n - 1}", cls=TransformError)
            return seq.items[k]
        if not isinstance(index, Var):
            self.error(node, "unsupported index into a list of functions",
                       "index with a number or an integer variable", cls=TransformError)
        if not all(isinstance(e, (LocalFunc, ObjFunc, FuncChoice)) for e in seq.items):
            self.error(node, "a run-time index can choose among functions only",
                       "index the list with a constant, or hold only functions in it",
                       cls=TransformError)
        cases = []
        eq = P.BY_OPERATOR["Eq"]
        labels = seq.keys if seq.keys is not None else range(n)
        for k, (label, el) in enumerate(zip(labels, seq.items)):
            hit = self.tmp(hint, "is")
            self.emit(Prim(hit, eq.name, self.bind(eq, [index, Const(label)], {}, node)))
            if seq.keys is None:
                hit_neg = self.tmp(hint, "is")
                self.emit(Prim(hit_neg, eq.name, self.bind(eq, [index, Const(k - n)], {},
                                                             node)))
                either = self.tmp(hint, "is")
                self.emit(Prim(either, "any_flag", [(Var(hit), Var(hit_neg))]))
                hit = either
            cases.append((Var(hit), el))
        return FuncChoice(cases, None)

    def _is_user_variable(self, name):
        scope = self.scope
        while scope is not None:
            if any(isinstance(v, Var) and v.name == name for v in scope.rename.values()):
                return True
            scope = scope.parent
        return False

    def call_element(self, el, args, kwargs, node, hint, target):
        """Call a static element on evaluated operands (inline it, or switch)."""
        if isinstance(el, LocalFunc):
            return self.call_function_ref(("local", el), args, kwargs, node, hint, target)
        if isinstance(el, ObjFunc):
            obj = el.obj
            custom = getattr(type(obj), "_astjax_custom_call", None)   # custom_jvp/vjp, remat
            if custom is not None:
                return custom(obj, self, args, kwargs, node, hint, target)
            if P.lookup_callable(obj) is None and not (
                    isinstance(obj, functools.partial) or isinstance(
                        obj, types.MethodType) and not _is_library(obj.__func__) or (
                        isinstance(obj, types.FunctionType) and not _is_library(obj)) or
                    getattr(obj, "_astjax_generated", None) is not None):
                args = [self.plain(a, node) for a in args]
                kwargs = {k: self.plain(v, node) for k, v in kwargs.items()}
                out = self._out(target, hint, _short(getattr(obj, "__name__", "call")))
                self.emit(External(out, el.operand, args, kwargs))
                return Var(out)
            return self.call_function_ref(("object", obj), args, kwargs, node, hint, target)
        if isinstance(el, FuncChoice):
            out = self._out(target, hint, "out")
            if el.otherwise is None:
                err = self.tmp(hint, "error")
                tail = [External(err, Var(self.env.value_ref(IndexError, "IndexError")),
                                 [Const("index out of range for the list of functions")],
                                 loc=self.loc), Raise(Var(err), loc=self.loc)]
            else:
                tail = []
                with self.emitting(tail):
                    self.call_element(el.otherwise, args, kwargs, node, hint, out)
            for test, option in reversed(el.cases):
                body: list = []
                with self.emitting(body):
                    self.call_element(option, args, kwargs, node, hint, out)
                tail = [If(test, body, tail, loc=self.loc)]
            for st in tail:
                self.out.append(st)
            return Var(out)
        if isinstance(el, Bound):
            return self.call_element(el.func, list(el.args) + list(args),
                                     {**el.kwargs, **kwargs}, node, hint, target)
        if isinstance(el, Applied):
            return self.call_applied(el, args, kwargs, node, hint, target)
        if isinstance(el, _Mixed):
            self.error(node, f"{el.name!r} holds a function on some paths through the code "
                             "before this call and not on others",
                       "bind it to a function on every path (or, after a loop, again "
                       "before the call)", cls=TransformError)
        if isinstance(el, StaticSeq):
            self.error(node, "a list of functions is not callable",
                       "index it, or loop over it", cls=TransformError)
        self.error(node, "this value is computed at run time and cannot be called in a "
                         "transformed function",
                   "call functions directly, or hold them in a list or dict",
                   cls=TransformError)

    # ----- loops over static containers: unrolled

    def _static_iterable(self, node):
        """Whether iterating ``node`` walks a container of functions (pure check)."""
        if isinstance(node, gast.Call):
            fn = self.static_value(node.func)
            if fn in (zip, enumerate, reversed):
                return any(self._static_iterable(a) for a in node.args)
            if isinstance(node.func, gast.Attribute) and node.func.attr in (
                    "items", "keys", "values") and not node.args:
                return isinstance(self._peek(node.func.value), StaticSeq) or isinstance(
                    node.func.value, (gast.Dict,)) and self._denotes_function(node.func.value)
            return False
        if isinstance(node, (gast.List, gast.Tuple, gast.Dict)):
            return self._denotes_function(node)
        if isinstance(node, (gast.Name, gast.Attribute)):
            return isinstance(self._peek(node), StaticSeq)
        if isinstance(node, gast.Subscript):
            return self._denotes_function(node)
        return False

    def _static_items(self, node):
        """(elements, trip-count limits) of an unrolled iteration over ``node``.

        Elements are static elements, operands, ``_Lazy`` reads of a run-time
        sequence zipped in, or lists of those (zip, enumerate, items).  The limits are
        lengths of zipped run-time sequences: iteration k runs while k < each.
        """
        if isinstance(node, gast.Call):
            fn = self.static_value(node.func)
            if fn is zip:
                parts, limits = [], []
                for a in node.args:
                    if self._static_iterable(a):
                        els, lim = self._static_items(a)
                        parts.append(els)
                        limits += lim
                    else:
                        walk = self._walk(a)
                        limits.append(walk.count())
                        parts.append(walk)
                n = min(len(p) for p in parts if isinstance(p, list))
                return [[p[k] if isinstance(p, list) else _Lazy(p, k) for p in parts]
                        for k in range(n)], limits
            if fn is enumerate:
                start = 0
                if len(node.args) > 1 or node.keywords:
                    s = node.args[1] if len(node.args) > 1 else node.keywords[0].value
                    if not isinstance(s, gast.Constant) or not isinstance(s.value, int):
                        self.error(s, "enumerate() over functions needs a constant start",
                                   "write the start as a number", cls=TransformError)
                    start = s.value
                els, limits = self._static_items(node.args[0])
                return [[Const(start + k), e] for k, e in enumerate(els)], limits
            if fn is reversed:
                els, limits = self._static_items(node.args[0])
                if limits:
                    self.error(node, "reversed() of a zip holding functions is not supported",
                               "reverse the list of functions itself: zip(fs[::-1], ...)",
                               cls=TransformError)
                return list(reversed(els)), limits
            seq = self._static_element(node.func.value)
            if not isinstance(seq, StaticSeq) or seq.keys is None:
                self.error(node, f"{node.func.attr}() needs a dict",
                           "call it on a dict of functions", cls=TransformError)
            keys = [Const(k) for k in seq.keys]
            view = node.func.attr
            return ([list(p) for p in zip(keys, seq.items)] if view == "items" else
                    keys if view == "keys" else list(seq.items)), []
        seq = self._static_element(node)
        if not isinstance(seq, StaticSeq):
            self.error(node, "expected a list, tuple or dict of functions",
                       "loop over a list of functions, or over a sequence of values",
                       cls=TransformError)
        return ([Const(k) for k in seq.keys] if seq.keys is not None else list(seq.items)), []

    def _bind_static(self, target, el):
        """Bind an unrolled loop's target to one element."""
        if isinstance(el, _Lazy):
            el = el.walk.item(Const(el.k))
        if isinstance(el, list):
            if isinstance(target, (gast.Tuple, gast.List)):
                if len(target.elts) != len(el) or any(
                        isinstance(e, gast.Starred) for e in target.elts):
                    self.error(target, f"cannot unpack {len(el)} values into "
                                       f"{len(target.elts)} names",
                               "use as many names as the items have values",
                               cls=TransformError)
                for t, e in zip(target.elts, el):
                    self._bind_static(t, e)
                return
            el = [e.walk.item(Const(e.k)) if isinstance(e, _Lazy) else e for e in el]
            if any(isinstance(e, _STATIC_FUNCS) for e in el):
                el = StaticSeq(el)
            else:
                el = self._pack(el)
        if isinstance(el, _STATIC_FUNCS):
            if isinstance(target, gast.Name):
                self.store_name(target.id, target)
                self.scope.local_funcs[target.id] = el
                return
            if isinstance(target, (gast.Tuple, gast.List)) and isinstance(el, StaticSeq) and \
                    el.keys is None:
                self._bind_static(target, list(el.items))
                return
            self.error(target, "cannot unpack this function value",
                       "assign it to one name", cls=TransformError)
        self.assign_operand(target, el)

    def _unrolled(self, elements, limits, run_one):
        """Emit ``run_one(k, element)`` for each element; returns the blocks.

        Iteration k (after the first) runs under ``if`` guards built by the caller from
        the exit flags; the limits of zipped run-time sequences guard every
        iteration: ``k < len(seq)``.
        """
        blocks = []
        for k, el in enumerate(elements):
            block: list = []
            with self.emitting(block):
                run_one(k, el)
            lt = P.BY_OPERATOR["Lt"]
            for lim in reversed(limits):
                t = self.fresh("in_range")
                block = [Prim(t, lt.name, self.bind(lt, [Const(k), lim], {}, None), loc=self.loc),
                         If(Var(t), block, [], loc=self.loc)]
            blocks.append(block)
        return blocks

    def _for_unrolled(self, st):
        """``for target in <container of functions>``: one copy of the body per element."""
        elements, limits = self._static_items(st.iter)
        ctx = LoopCtx()
        self.loops.append(ctx)
        jumps: set = set()

        def run_one(k, el):
            self._bind_static(st.target, el)
            jumps.update(self.stmt_list(st.body))

        try:
            blocks = self._unrolled(elements, limits, run_one)
        finally:
            self.loops.pop()
        self.loc = self.location(st)
        if ctx.cont:
            for b in blocks:
                b.insert(0, Copy(ctx.cont, Const(False), loc=self.loc))
        exit_flags = sorted(f for f in jumps - {ctx.cont} if f)
        if ctx.brk:
            self.emit(Copy(ctx.brk, Const(False)))
        self._chain_blocks(blocks, exit_flags)
        return jumps - {ctx.brk, ctx.cont}

    def _chain_blocks(self, blocks, exit_flags):
        """Emit unrolled iterations; each later one runs only while no exit flag is set."""
        rest: list = []
        for block in reversed(blocks):
            if rest and exit_flags:
                go = self.fresh("go_on")
                rest = [Prim(go, "no_flags", [tuple(Var(f) for f in exit_flags)], loc=self.loc),
                        If(Var(go), rest, [], loc=self.loc)]
            rest = list(block) + rest
        for st in rest:
            self.out.append(st)
