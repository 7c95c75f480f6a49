"""``jit`` with JAX's signature: optimized generated NumPy code, no tracing.

``jit(f)`` normalizes ``f`` (or the code a transformation generated, for
``jit(grad(f))``), runs the optimization passes of ``astjax/passes`` and hands the
result to a backend (``astjax/backends.py``: the NumPy backend loads it as Python).
Code is cached per static-argument values and per argument signature (tree
structure, dtypes and ranks), like JAX; the NumPy backend needs nothing more since the
generated code does not depend on shapes.

Dispatch is a hot path (a training step calls jit'd code thousands of times): a call
builds its key in one walk over lists, tuples, dicts and arrays, and leaves other
pytrees to ``tree_flatten``.  The source is read, and checked against the running code,
when code is built; a call only re-reads the globals the code uses.
"""
from __future__ import annotations

import functools
import inspect

import numpy as np

from astjax import backends, passes, transform_table
from astjax.binding import fun_name as _fun_name
from astjax.binding import check_plain_arrays, function_arguments, has_varargs, per_arity
from astjax.generation import ASSEMBLED, cache_for, cached, load_functions, normalized
from astjax.generation import check_callable as _check_callable
from astjax.generation import wrap as _wrap
from astjax.errors import ArgumentError
from astjax.tree_util import default_registry, tree_flatten
from astjax.device import _MODULES as device_types   # array type -> array module

def _signature(args):
    """Structure, dtypes and ranks of the dynamic arguments: the cache key part."""
    leaves, tree = tree_flatten(tuple(args))
    sig = []
    for leaf in leaves:
        if isinstance(leaf, np.ndarray):
            sig.append((leaf.dtype.str, leaf.ndim))
        elif type(leaf) in device_types:     # a CuPy array: keyed like NumPy's
            sig.append((type(leaf), leaf.dtype.str, leaf.ndim))
        else:
            sig.append(type(leaf).__name__)
    return tree, tuple(sig)


class _Mark:
    """A token of the fast signature: unique, so it never equals a type or a dtype."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


_FAST = _Mark("jit-fast")
_LIST, _TUPLE, _DICT, _ABSENT = _Mark("list"), _Mark("tuple"), _Mark("dict"), _Mark("absent")
_ARRAY = tuple(_Mark(f"array{n}") for n in range(65))  # by rank: NumPy allows 64
_LEAF_TYPES = frozenset({float, int, bool, complex, str, type(None)})


def _walk(items, out):
    """Append tokens for ``items`` to ``out``; False for anything not handled here.

    Only exact list/tuple/dict, exact ndarray, Python scalars and NumPy scalars: their
    flattening cannot be customized (subclasses, namedtuples, registered nodes and
    functions are left to ``_signature``).  The tokens determine the tree structure,
    so equal token sequences mean equal ``_signature`` keys.
    """
    append = out.append
    for x in items:
        t = type(x)
        if t is np.ndarray:
            append(_ARRAY[x.ndim])
            append(x.dtype)
        elif t is list or t is tuple:
            append(_LIST if t is list else _TUPLE)
            append(len(x))
            if not _walk(x, out):
                return False
        elif t in _LEAF_TYPES or isinstance(x, np.generic):
            append(t)
        elif t in device_types:      # a registered device array (CuPy's)
            append(t)
            append(x.ndim)
            append(x.dtype)
        elif t is dict:
            try:
                keys = tuple(sorted(x))  # tree_flatten's order
            except TypeError:
                return False
            append(_DICT)
            append(keys)
            if not _walk([x[k] for k in keys], out):
                return False
        else:
            return False
    return True


def _fast_signature(args):
    """The dynamic arguments' part of the fast cache key, or None (general path)."""
    registered = default_registry.registered_types()
    if registered and any(t is np.ndarray or t in _LEAF_TYPES or issubclass(t, np.generic)
                          for t in registered):
        return None  # a leaf type made a node: only tree_flatten knows its structure
    out = []
    return tuple(out) if _walk(args, out) else None


def _is_function(value) -> bool:
    return callable(value) and not isinstance(value, (np.ndarray, np.generic, type))


def _positional_names(fun):
    from astjax.frontend.source import get_function_source, unwrap_callable
    func, pargs, _ = unwrap_callable(fun)
    generated = getattr(func, "_astjax_generated", None)
    if generated is not None:
        func = generated()
    node = get_function_source(func).node
    names = [a.id for a in node.args.posonlyargs + node.args.args]
    return names[len(pargs):]


def _run_on_copies(gen, dynamic, kw_dynamic):
    """Call ``gen``'s code once on copies of the arrays (what make_source shows of code
    rendered while it runs); an error leaves the placeholders (``astjax show`` without
    ``--args`` passes placeholders)."""
    from astjax.tree_util import tree_map

    def copy(v):
        return v.copy() if isinstance(v, np.ndarray) else v
    try:
        gen.refresh()
        gen.functions["main"](*tree_map(copy, list(dynamic)), **tree_map(copy, kw_dynamic))
    except Exception:
        pass


def _unshare(dynamic, donated):
    """The arguments, with a donated array that shares memory with another argument
    replaced by a copy: writing into it must not change what the others hold."""
    dynamic = list(dynamic)
    arrays = [leaf for leaf in tree_flatten(dynamic)[0] if isinstance(leaf, np.ndarray)]
    for j in donated:
        a = dynamic[j]
        if type(a) is not np.ndarray:
            continue
        if sum(b is a for b in arrays) > 1 or any(
                b is not a and np.may_share_memory(a, b) for b in arrays):
            dynamic[j] = a.copy()
    return dynamic


def _kw_signature(kwargs):
    """The keyword arguments' part of the cache key: names, structure, dtypes and
    ranks (``f(x, s=np.float32(2))`` and ``f(x, s=2.0)`` are built apart, each for its
    dtypes, as positional arguments are)."""
    if not kwargs:
        return ()
    names = tuple(sorted(kwargs))
    return names, _signature([kwargs[n] for n in names])


def _build(fun, static, static_functions, dynamic=(), to_run=True, donated=(),
           backend=None, kw_dynamic=None, fastmath=False):
    fname = _fun_name(fun)
    # jit(vmap(f)) runs the batched code; transformations of it read vmap's loop form
    batched = getattr(fun, "_astjax_batched", None) if to_run else None
    base = batched() if batched is not None else fun
    target = functools.partial(base, **static) if static else base
    names, fn, _ = normalized(target, static_functions)
    # jit specializes on dtypes anyway (they key its cache): tell the passes
    arg_dtypes = {p: a.dtype for p, a in zip(fn.params, dynamic) if type(a) is np.ndarray}
    kw_dynamic = {k: v for k, v in (kw_dynamic or {}).items() if k in fn.params}
    arg_dtypes.update({k: v.dtype for k, v in kw_dynamic.items() if type(v) is np.ndarray})
    backend = backend or backends.get(None)
    chosen = backend.passes() if to_run else passes.TRANSFORMABLE
    if fastmath and to_run:     # divisions by a loop's invariant arrays: reciprocals
        chosen = passes.with_fastmath(chosen)
    # donated array arguments: their memory may hold results (buffers, fusion)
    donated_names = {fn.params[j] for j in donated
                     if j < len(fn.params) and type(dynamic[j]) is np.ndarray}
    # the mutation policy (transforms/aliasing.py): a function updating an argument in
    # place works on a copy, except of an argument donated to it, which it may consume
    fn.body[:] = [s for s in fn.body
                  if not (getattr(s, "_private", False) and s.target in donated_names)]
    weak_args = {p: type(a) for p, a in list(zip(fn.params, dynamic)) + list(kw_dynamic.items())
                 if type(a) in (bool, int, float)}
    fn = passes.optimize(fn, chosen, arg_dtypes=arg_dtypes, donated=donated_names,
                         weak_args=weak_args)
    fn.name = names.fresh(f"jit_{fname}")
    fn.arg_kinds = backends.arg_kinds(fn.params, dynamic)   # shown kernels' types
    fn.arg_kinds.update(backends.arg_kinds(list(kw_dynamic), list(kw_dynamic.values())))
    if not to_run:
        return load_functions([(fn, f"jit of {fname}: optimized by astjax.")], fn.env,
                              f"jit({fname})", ["main"])
    doc, label = f"jit of {fname}: optimized by astjax.", f"jit({fname})"
    if not fastmath:       # (a backend plugged in without the option still loads)
        return backend.load(fn, doc, label)
    if "fastmath" not in inspect.signature(backend.load).parameters:
        raise ArgumentError(f"jit: backend {backend.name!r} has no fastmath option")
    return backend.load(fn, doc, label, fastmath=True)


def _assembled(fun):
    """jit of jacfwd/jacrev/hessian: the code they call is generated already; jit keeps
    them composable (``jacfwd(jit(hessian(f)))``) and runs them as they are."""
    from astjax.generation import wrap_plain as _wrap_plain

    def jitted(*args, **kwargs):
        return fun(*args, **kwargs)
    # keeps the label: to other transformations it still is that Jacobian
    return _wrap_plain(fun, jitted, fun._astjax, getattr(fun, "_astjax_jacobian", None))


def _typed(value):
    """A static argument as a cache key: its value and its type, in containers too.
    ``2``, ``2.0``, ``True`` and ``np.int32(2)`` compare equal, but NumPy's results
    differ with them (``x // n`` of integers, ``np.full(2, n)``'s dtype)."""
    if type(value) in (tuple, list):
        return (type(value), tuple(_typed(v) for v in value))
    return (type(value), value)


def jit(fun=None, *, static_argnums=(), static_argnames=(), donate_argnums=(), backend=None,
        fastmath=False):
    """Compile ``fun`` into optimized NumPy code (decorator or function, like jax.jit).

    ``fastmath=True`` (numba's option) builds the compiled kernels with value-changing
    rewrites (fused multiply-add, division by a reciprocal:
    ``astjax.kernels.compile.FASTMATH_FLAGS``; CUDA: ``cuda_nvrtc.FASTMATH_OPTIONS``):
    faster where kernels divide, within a few ulp of NumPy instead of bit-identical;
    on the CPU the kernels also flush subnormal floats to zero while they run, as
    ``jax.jit`` does (``astjax.kernels.flush``).
    """
    if fun is None:
        return functools.partial(jit, static_argnums=static_argnums,
                                 static_argnames=static_argnames,
                                 donate_argnums=donate_argnums, backend=backend,
                                 fastmath=fastmath)
    if not isinstance(fastmath, bool):
        raise ArgumentError(f"jit: fastmath must be True or False, got {fastmath!r}")
    from astjax.frontend.numpy_functions import as_python_function
    fun = as_python_function(fun)  # jit(np.tanh): a generated function calling it
    _check_callable(fun, "jit")
    chosen_backend = backends.get(backend)
    if getattr(fun, "_astjax", None) in ASSEMBLED and \
            getattr(fun, "_astjax_generated", None) is None:
        return _assembled(fun)
    if has_varargs(fun):       # *args/**kwargs: one jit per call arity
        return per_arity(fun, functools.partial(
            jit, static_argnums=static_argnums, static_argnames=static_argnames,
            donate_argnums=donate_argnums, backend=backend, fastmath=fastmath), "jit")
    static_nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(
        static_argnums)
    static_names = (static_argnames,) if isinstance(static_argnames, str) else tuple(
        static_argnames)
    donate_nums = (donate_argnums,) if isinstance(donate_argnums, int) else tuple(
        donate_argnums)

    fun_cache = cache_for(fun)  # (emptied in place by clear_cache)
    names = []  # positional parameter names: a source lookup, so done once
    splits = {}  # number of positional arguments -> (static positions, dynamic positions)

    def param_names():
        if not names:
            names.append(_positional_names(fun))
        return names[0]

    def split(nargs):
        got = splits.get(nargs)
        if got is None:
            positions = set()
            for i in static_nums:
                k = i if i >= 0 else i + nargs
                if not 0 <= k < nargs:
                    raise ArgumentError(f"jit: static_argnums {i} is out of range for "
                                        f"{nargs} arguments")
                positions.add(k)
            dynamic_pos = tuple(i for i in range(nargs) if i not in positions)
            donated = set()
            for i in donate_nums:
                k = i if i >= 0 else i + nargs
                if not 0 <= k < nargs:
                    raise ArgumentError(f"jit: donate_argnums {i} is out of range for "
                                        f"{nargs} arguments")
                if k in positions:
                    raise ArgumentError(f"jit: argument {i} is both static and donated; "
                                        "only arrays passed as ordinary arguments can be "
                                        "donated")
                donated.add(k)
            got = (tuple(sorted(positions)), dynamic_pos,
                   tuple(j for j, i in enumerate(dynamic_pos) if i in donated))
            splits[nargs] = got
        return got

    def general(args, kwargs):
        """(code, dynamic arguments) keyed by tree_flatten: any pytree, any leaf.

        Pops the static keyword arguments from ``kwargs``.
        """
        static_pos, dynamic_pos, donated = split(len(args))
        params = param_names() if static_pos else ()
        static = {params[k]: args[k] for k in static_pos}
        dynamic = [args[i] for i in dynamic_pos]
        check_plain_arrays(dynamic, "jit", _fun_name(fun))
        for name in static_names:
            if name in kwargs:
                static[name] = kwargs.pop(name)
        for name in [k for k, v in kwargs.items() if _is_function(v)]:
            static[name] = kwargs.pop(name)  # f(x, act=np.sin): inlined, keys the code
        for name, value in static.items():
            try:
                hash(value)
            except TypeError:
                raise ArgumentError(
                    f"jit: static argument {name!r} must be hashable, got "
                    f"{type(value).__name__}; pass arrays as ordinary arguments, or "
                    "convert lists to tuples") from None
        fn_args = function_arguments(dynamic)
        key = ("jit", tuple(sorted(((k, _typed(v)) for k, v in static.items()),
                                   key=lambda kv: kv[0])), fn_args,
               _signature(dynamic), _kw_signature(kwargs), donated, chosen_backend.name,
               fastmath)
        kw_dynamic = dict(kwargs)
        gen = cached(fun, key, lambda: _build(fun, static, dict(fn_args), dynamic,
                                              donated=donated, backend=chosen_backend,
                                              kw_dynamic=kw_dynamic, fastmath=fastmath))
        return gen, dynamic

    def jitted(*args, **kwargs):
        # Fast path: a key from one walk over plain containers and arrays.  It is at
        # least as fine as general()'s key, so a hit is the code general() would give;
        # a miss asks general(), which shares code between equal signatures.
        donated = ()
        if static_nums or donate_nums:
            static_pos, dynamic_pos, donated = split(len(args))
            static_values = tuple([args[k] for k in static_pos])
            dynamic = [args[i] for i in dynamic_pos]
        else:
            static_values, dynamic = (), args
        static_kw, call_kwargs = (), kwargs
        if static_names and kwargs:
            static_kw = tuple([kwargs.get(n, _ABSENT) for n in static_names])
            call_kwargs = {k: v for k, v in kwargs.items() if k not in static_names}
        sig = _fast_signature(dynamic)
        if sig is not None and call_kwargs:
            if any(_is_function(v) for v in call_kwargs.values()):
                sig = None  # functions passed by keyword are inlined: general() keys on them
            else:       # keyword arguments key the code as positional ones do
                kw_names = tuple(sorted(call_kwargs))
                kw_sig = _fast_signature([call_kwargs[n] for n in kw_names])
                sig = None if kw_sig is None else (sig, kw_names, kw_sig)
        if sig is not None and (static_values or static_kw):
            try:
                hash((static_values, static_kw))
            except TypeError:  # general() explains
                sig = None
        if sig is not None:
            key = (_FAST, len(args), _typed(static_values), _typed(static_kw), sig, donated,
                   chosen_backend.name, fastmath)
            gen = fun_cache.get(key)
            if gen is None or gen.guard is not None and not gen.guard.holds():
                gen = cached(fun, key, lambda: general(args, dict(kwargs))[0])
        else:
            call_kwargs = dict(kwargs)
            gen, dynamic = general(args, call_kwargs)
        gen.refresh()  # globals rebound since the last call are seen
        if donated:
            dynamic = _unshare(dynamic, donated)
        return gen.functions["main"](*dynamic, **call_kwargs)

    def source(*args, **kwargs):
        static_pos, dynamic_pos, donated = split(len(args))
        params = param_names() if static_pos else ()
        static = {params[i]: args[i] for i in static_pos}
        static.update({k: v for k, v in kwargs.items() if k in static_names})
        dynamic = [args[i] for i in dynamic_pos]
        kw_dynamic = {k: v for k, v in kwargs.items() if k not in static_names}
        gen = _build(fun, static, dict(function_arguments(dynamic)), dynamic,
                     donated=donated, backend=chosen_backend, kw_dynamic=kw_dynamic,
                     fastmath=fastmath)
        if gen.late:        # C rendered on the first run: run this code once, on copies
            _run_on_copies(gen, dynamic, kw_dynamic)
        return gen

    def generated():
        # what grad(jit(f)) or vmap(jit(f)) transform: optimized, without the passes
        # that shape code for running (fused groups, buffer-reuse helpers), whose
        # run-time dispatch is not code the transformations read
        return _build(fun, {}, {}, (), to_run=False).functions["main"]

    return _wrap(fun, jitted, "jit", generated, source)


transform_table.register("jit", jit, inline=True)

__all__ = ["jit"]
