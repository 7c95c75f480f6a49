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

from astjax import codegen, read_guards
from astjax import runtime as rt
from astjax import runtime_array as ra
from astjax.binding import fun_name
from astjax.core import Copy, Return, Var
from astjax.errors import ArgumentError, DifferentiationError, Location, SourceError
from astjax.frontend import core_fixups
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


def normalized(fun, static_functions=None):
    """(names, core function, result variable): ``fun`` in core form, ending in
    ``return <variable>`` so transformations can name its result."""
    names = NameGen()
    fn = Normalizer(names).function(fun, static_functions=static_functions)
    private_arguments(fn)   # the mutation policy: never change the caller's arrays
    core_fixups.run(fn, names)
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
