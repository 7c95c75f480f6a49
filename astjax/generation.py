"""Generated functions: the record, the cache, loading, and wrapping.

Every transformation ends the same way: core functions are printed into one module,
loaded, cached per user function and key, and the transformed function is given the
user's name.  That machinery lives here, below the API modules, so that the frontend,
the backends, ``make_source`` and the command line can use it without importing the
public API (which imports them).
"""
from __future__ import annotations

import builtins
import functools
import sys
import threading
import weakref
from dataclasses import dataclass, field

import numpy as np

from astjax import codegen, core, read_guards
from astjax import primitives as P
from astjax import runtime as rt
from astjax import runtime_array as ra
from astjax.binding import fun_name
from astjax.core import Const, Copy, Prim, Return, Var
from astjax.errors import ArgumentError, DifferentiationError, Location, SourceError
from astjax.frontend.names import NameGen
from astjax.frontend.normalize import Normalizer
from astjax.frontend.scopes import ORIGINS
from astjax.transforms.aliasing import private_arguments


@dataclass
class Generated:
    """Generated source and the loaded function(s) for one transformation."""

    source: str
    functions: dict
    namespace: dict
    env: object
    # the core functions printed into ``source``, with their docstrings (make_source
    # simplifies copies of them for display: astjax/source_view.py)
    core: list = field(default_factory=list)
    # (placeholder text in ``source``, object whose ``text`` holds the C rendered on
    # the first run): a backward sweep's driver renders the trip it traces
    late: list = field(default_factory=list)
    # what the code assumed of values read while it was generated (cached() sets it;
    # jit's fast path checks it on every call): astjax/read_guards.py
    guard: object = None

    def refresh(self):
        """Re-read globals the code refers to (so rebinding a global is seen)."""
        live = self.env.live()
        if not live:
            return                    # (constants only: every call of small code)
        namespace = self.namespace
        for name, entry in live:
            if entry[0] == "cell":
                namespace[name] = entry[1].cell_contents
            else:
                gdict, key = entry[1], entry[2]
                namespace[name] = gdict[key] if key in gdict else getattr(builtins, key)

    def source_after_run(self) -> str:
        """``source`` with each late text as its code rendered it (make_source runs the
        code first); a placeholder stays where nothing was rendered."""
        source = self.source
        for placeholder, holder in self.late:
            text = getattr(holder, "text", None)
            if text and text != placeholder:
                source = source.replace(placeholder.rstrip(), text.rstrip(), 1)
        return source


# ------------------------------------------------------------------------- caching

_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_CACHE_BY_ID: dict = {}
_LOCK = threading.RLock()


def cache_for(fun) -> dict:
    """The dict of generated code kept for ``fun`` (by weak reference where it can)."""
    try:
        return _CACHE.setdefault(fun, {})
    except TypeError:
        return _CACHE_BY_ID.setdefault(id(fun), {})


def clear_cache():
    """Forget all generated code (tests use this).  Each function's dict is emptied
    in place: a transformed function holds its own (``jit``'s fast path)."""
    for per_function in list(_CACHE.values()) + list(_CACHE_BY_ID.values()):
        per_function.clear()
    _CACHE_BY_ID.clear()


_GUARD = object()   # (_GUARD, key): where the guard of the entry under key is kept


def cached(fun, key, build):
    """The generated code of ``fun`` under ``key``, built once (thread-safe), and built
    again when a value it folded from outside the function has been rebound."""
    cache = cache_for(fun)
    guard_key = (_GUARD, key)
    entry, guard = cache.get(key), cache.get(guard_key)
    if entry is None or guard is not None and not guard.holds():
        with _LOCK:
            entry, guard = cache.get(key), cache.get(guard_key)
            if entry is None or guard is not None and not guard.holds():
                with read_guards.collecting() as reads:
                    entry = build()
                guard = reads.guard()
                cache[key] = entry
                if isinstance(entry, Generated):
                    entry.guard = guard
                if guard is None:
                    cache.pop(guard_key, None)
                else:
                    cache[guard_key] = guard
    read_guards.reused(guard)   # an enclosing generation relies on it too
    return entry


# ---------------------------------------------------------------------- generation

def base_namespace() -> dict:
    """The names every generated module can read besides the user's globals."""
    from astjax import runtime_batch as rb
    from astjax import debug as dbg
    from astjax import random as jr
    from astjax.sharding import collectives as sh
    return {"np": np, "ra": ra, "rt": rt, "rb": rb, "jr": jr, "dbg": dbg, "sh": sh}


def normalizer_factory(names, env):
    """A Normalizer sharing ``names``: transformations inline rule templates with it."""
    n = Normalizer(names)
    n.env = env
    return n


def prune_item_update_checks(fn) -> None:
    """Keep a ``c[k] op= v`` check (``rt.refuse_item_update``) only for the names that
    are read after the update before being assigned again (liveness): a name holding
    the item but rebound first (``w = params["w"]`` at the top of each step) cannot
    tell the in-place update from the new value."""
    from astjax.passes.analysis import liveness
    live = liveness(fn)

    def prune(block):
        for s in block:
            for child in core.child_blocks(s):
                prune(child)
        kept = []
        for i, s in enumerate(block):
            if isinstance(s, Prim) and s.prim == "refuse_item_update":
                update = next((t for t in block[i + 1:] if isinstance(t, core.SetItem) and
                               t.target == s.args[0].name), None)
                after = live.get(id(update)) if update is not None else None
                info, others = s.args[3], s.args[2]
                if after is not None and isinstance(info, Const) and isinstance(others, tuple):
                    # (generated code read again spells them as tuples it builds: its
                    # checks were pruned when it was made)
                    text, sym, names = info.value
                    keep = [k for k, v in enumerate(others)
                            if isinstance(v, Var) and v.name in after]
                    if not keep:
                        continue
                    s.args[2] = tuple(others[k] for k in keep)
                    s.args[3] = Const((text, sym, tuple(names[k] for k in keep)))
            kept.append(s)
        block[:] = kept

    prune(fn.body)


def prune_rebinding_checks(fn) -> None:
    """Keep a ``y op= v`` check (``rt.refuse_rebinding_update``) only with the names
    that may share ``y``'s memory there (``transforms/aliasing.py``, after inlining:
    a helper's parameter and its caller's name are one array) and are read after the
    update before being assigned again; drop it where there are none."""
    checks = [s for s in core.walk(fn.body)
              if isinstance(s, Prim) and s.prim == "refuse_rebinding_update"]
    if not checks:
        return
    from astjax.passes.analysis import liveness
    from astjax.transforms.aliasing import Aliasing
    aliasing = Aliasing(fn)
    live = liveness(fn)

    def prune(block):
        for s in block:
            for child in core.child_blocks(s):
                prune(child)
        kept = []
        for i, s in enumerate(block):
            if isinstance(s, Prim) and s.prim == "refuse_rebinding_update" and \
                    s.args[1] == () and isinstance(s.args[0], Var):
                # (generated code read again spells its checks with tuples it builds:
                # they were pruned when it was made)
                name = s.args[0].name
                update = next((t for t in block[i + 1:]
                               if getattr(t, "target", None) == name), s)
                after = live.get(id(update), frozenset())
                others = sorted(n for n in aliasing.sharing.get(id(s), ())
                                if n in after and n != name)
                if not others:
                    continue
                text, sym, _ = s.args[2].value
                # (the line where the two came to share: the other name's, else the
                # updated name's, e.g. the call binding a helper's parameter)
                lines = tuple((n, _line_of(aliasing.defs.get(n) or aliasing.defs.get(name)))
                              for n in others)
                s.args[1] = tuple(Var(n) for n in others)
                s.args[2] = Const((text, sym, lines))
            kept.append(s)
        block[:] = kept

    prune(fn.body)


# primitives that make containers: a name every assignment of which is one of them
# holds a list or tuple
_CONTAINER_MAKERS = frozenset({"make_list", "make_tuple", "append", "to_list"})
# parameters that take a sequence of arrays (each item is converted by NumPy itself)
_SEQUENCE_PARAMS = frozenset({"arrays", "tup", "condlist", "choicelist", "xs", "funclist"})
# ... and those that take a list as it is (np.array_split counts a list's items, not its
# axis: NumPy's answer differs from that of the array)
_AS_GIVEN = frozenset({"asarray", "array", "asanyarray", "array_split", "split", "hsplit",
                       "vsplit", "dsplit"})


def _numpy_function(prim) -> bool:
    impl = prim.impl
    return isinstance(impl, np.ufunc) or (
        getattr(impl, "__module__", None) or "").split(".")[0] == "numpy"


def convert_list_operands(fn, names) -> None:
    """A list or tuple given to a NumPy function as array data, as an array first.

    Only calls (``np.add(a, b)``), never operators: ``a + b`` of lists concatenates.

    NumPy converts an array-like operand with ``np.asarray`` on entry; doing so in the
    code makes every rule see the array NumPy sees (a batching rule read a list of
    per-example items as one unbatched array; ``np.negative(lst)`` printed as ``-lst``
    failed).  Names holding a list at run time that the code cannot see (a pytree
    argument) are converted by the batching rules (``runtime_batch._as_batched``)."""
    made: dict = {}
    for s in core.walk(fn.body):
        target = getattr(s, "target", None)
        if target:
            made[target] = made.get(target, True) and isinstance(s, Prim) and \
                s.prim in _CONTAINER_MAKERS
    lists = {n for n, always in made.items() if always}
    if not lists:
        return
    from astjax.transforms.batch import _NOT_DATA   # (shapes, axes, options: not data)

    def converted(arg, pre, loc):
        if not (isinstance(arg, Var) and arg.name in lists):
            return arg
        out = names.fresh(f"{arg.name}_array")
        pre.append(Prim(out, "asarray", [arg, Const(None), Const(None), Const(None)], loc=loc))
        return Var(out)

    def rewrite(block):
        new = []
        for s in block:
            for child in core.child_blocks(s):
                rewrite(child)
            if isinstance(s, Prim) and getattr(s, "written_as_call", False) and \
                    s.prim not in _AS_GIVEN:
                prim = P.REGISTRY[s.prim]
                if _numpy_function(prim) and prim.kind != "structural":
                    pre: list = []
                    for i, (pname, arg) in enumerate(zip(prim.params, s.args)):
                        if pname.lstrip("*") in _SEQUENCE_PARAMS | _NOT_DATA or (
                                pname not in prim.diff and i > 0):
                            continue
                        if pname.startswith("*") and isinstance(arg, tuple):
                            s.args[i] = tuple(converted(a, pre, s.loc) for a in arg)
                        else:
                            s.args[i] = converted(arg, pre, s.loc)
                    new.extend(pre)
            new.append(s)
        block[:] = new

    rewrite(fn.body)


def _line_of(s):
    loc = getattr(s, "loc", None)
    return loc.lineno if loc is not None else None


def normalized(fun, static_functions=None):
    """(names, core function, result variable): ``fun`` in core form, ending in
    ``return <variable>`` so transformations can name its result."""
    names = NameGen()
    fn = Normalizer(names).function(fun, static_functions=static_functions)
    private_arguments(fn)   # the mutation policy: never change the caller's arrays
    prune_item_update_checks(fn)
    prune_rebinding_checks(fn)
    convert_list_operands(fn, names)
    ret = fn.body[-1]
    assert isinstance(ret, Return)
    if not isinstance(ret.value, Var):
        out = names.fresh("out")
        fn.body.insert(len(fn.body) - 1, Copy(out, ret.value, loc=fn.loc))
        ret.value = Var(out)
    return names, fn, ret.value.name


def load_functions(functions, env, label, keys) -> Generated:
    """Print core functions (with docstrings) into one module, load it, register the
    per-line origins; ``keys`` names each loaded function in ``Generated.functions``."""
    origins: list = []
    texts = []
    for fn, doc in functions:
        if texts:
            origins += [None, None]
        texts.append(codegen.print_with_helpers(fn, doc, origins))
    source = "\n\n".join(texts)
    namespace = base_namespace()
    namespace.update(env.current())
    namespace[ORIGINS] = {name: entry for name, entry in env.entries.items()
                          if entry[0] in ("global", "cell")}
    codegen.load_source(source, namespace, label, origins)
    loaded = {key: namespace[fn.name] for key, (fn, _) in zip(keys, functions)}
    # the same text runs on CuPy (or another array module) when the arguments do
    from astjax.device import dispatching
    loaded = dispatching(loaded, source, namespace, label, origins)
    return Generated(source, loaded, namespace, env, list(functions))


def generated(fun, *args, **kwargs) -> Generated:
    """The Generated record (source, loaded functions, namespace, env) behind a
    transformed function, for ``args`` like those it will be called with."""
    maker = getattr(fun, "_astjax_source", None)
    if maker is None:
        raise ArgumentError(f"{fun_name(fun)} is not an astjax-transformed function")
    return maker(*args, **kwargs)


# ------------------------------------------------------------------------ wrapping

def wrap(fun, transformed, label, generated, source):
    """Give the transformed function the user's name and docstring.

    ``__wrapped__`` is removed on purpose: a transformed function called inside
    another transformed function must be inlined as its generated code, not as the
    original.  ``_astjax_generated()`` returns that generated Python function.
    """
    try:
        functools.update_wrapper(transformed, fun)
    except (AttributeError, TypeError):
        pass
    transformed.__dict__.pop("__wrapped__", None)
    transformed._astjax = label
    transformed._astjax_generated = generated
    transformed._astjax_source = source
    return transformed


def wrap_plain(fun, transformed, label, jacobian_of):
    """Like ``wrap`` for a result assembled at run time (a Jacobian): it has no one
    generated function, so other transformations must not inline it."""
    try:
        functools.update_wrapper(transformed, fun)
    except (AttributeError, TypeError):
        pass
    transformed.__dict__.pop("__wrapped__", None)
    transformed.__dict__.pop("_astjax_generated", None)
    transformed.__dict__.pop("_astjax_source", None)
    transformed.__dict__.pop("_astjax_jacobian", None)
    transformed._astjax = label
    transformed._astjax_jacobian = jacobian_of  # (fun, argnums, has_aux) of a jacobian
    return transformed


# transformations whose result is assembled at run time (a Jacobian's columns from
# generated jvp or vjp code): no single generated function stands for them
ASSEMBLED = ("jacfwd", "jacrev", "jacobian", "hessian")


def check_callable(fun, what):
    """Refuse, at the user's line, a callable astjax cannot read (np.sin, len, exec'd code)."""
    if not callable(fun):
        raise TypeError(f"{what} expects a callable, got {type(fun).__name__}")
    from astjax.frontend.source import get_function_source, unwrap_callable
    try:
        func, _, _ = unwrap_callable(fun)
        if getattr(func, "_astjax_generated", None) is not None:
            return
        label = getattr(func, "_astjax", None)
        if label in ASSEMBLED and not (
                what == "jit" or (what in ("jacfwd", "jacrev", "jacobian")
                                  and getattr(func, "_astjax_jacobian", None) is not None)):
            raise DifferentiationError(
                f"{what}() of {label}(...): astjax assembles a {label} at run time from "
                "the generated code of its columns, so there is no one function to "
                f"transform", caller_location(),
                "for higher derivatives nest grad and jvp (jvp of grad of grad), or take "
                "jacfwd/jacrev of grad(f); jit(hessian(f)) runs as it is")
        get_function_source(func)
    except SourceError as err:
        where = caller_location()
        if err.location is not None and err.location.source_line():
            where = err.location
        raise SourceError(f"{what}(): {err.message}", where, err.hint) from None


def caller_location(depth=3):
    """The user's line that called the transformation (``depth`` frames up from here:
    by default two frames up from the check calling this)."""
    frame = sys._getframe(depth)
    where = Location(frame.f_code.co_filename, frame.f_lineno, 0, None,
                     frame.f_code.co_name)
    text = where.source_line()
    if text:
        start = len(text) - len(text.lstrip())
        where = Location(where.filename, where.lineno, start, len(text.rstrip()),
                         where.function)
    return where
