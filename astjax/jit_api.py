"""``jit`` with JAX's signature: optimized generated NumPy code, no tracing.

``jit(f)`` normalizes ``f`` (or the code a transformation generated, for
``jit(grad(f))``), runs the optimization passes of ``astjax/passes`` and loads the
result.  Code is cached per static-argument values and per argument signature (tree
structure, dtypes and ranks), like JAX; the NumPy backend needs nothing more since the
generated code does not depend on shapes.
"""
from __future__ import annotations

import functools

import numpy as np

from astjax.api import (cached, _check_callable, _fun_name, _wrap,
                        function_arguments, load_functions, normalized)
from astjax import passes
from astjax.errors import ArgumentError
from astjax.tree_util import tree_flatten

BACKENDS = ("numpy", "cpu")


def _signature(args):
    """Structure, dtypes and ranks of the dynamic arguments: the cache key part."""
    leaves, tree = tree_flatten(tuple(args))
    sig = []
    for leaf in leaves:
        if isinstance(leaf, np.ndarray):
            sig.append((leaf.dtype.str, leaf.ndim))
        else:
            sig.append(type(leaf).__name__)
    return tree, tuple(sig)


def _positional_names(fun):
    from astjax.frontend.source import get_function_source, unwrap_callable
    func, pargs, _ = unwrap_callable(fun)
    generated = getattr(func, "_astjax_generated", None)
    if generated is not None:
        func = generated()
    node = get_function_source(func).node
    names = [a.id for a in node.args.posonlyargs + node.args.args]
    return names[len(pargs):]


def _build(fun, static, static_functions, dynamic=(), fuse=True):
    fname = _fun_name(fun)
    batched = getattr(fun, "_astjax_batched", None)  # jit(vmap(f)): the batched code
    base = batched() if batched is not None else fun
    target = functools.partial(base, **static) if static else base
    names, fn, _ = normalized(target, static_functions)
    # jit specializes on dtypes anyway (they key its cache): tell the passes
    arg_dtypes = {p: a.dtype for p, a in zip(fn.params, dynamic) if type(a) is np.ndarray}
    chosen = passes.DEFAULT if fuse else tuple(p for p in passes.DEFAULT if p is not passes.fusion)
    fn = passes.optimize(fn, chosen, arg_dtypes=arg_dtypes)
    fn.name = names.fresh(f"jit_{fname}")
    return load_functions([(fn, f"jit of {fname}: optimized by astjax.")], fn.env,
                          f"jit({fname})", ["main"])


def jit(fun=None, *, static_argnums=(), static_argnames=(), donate_argnums=(), backend=None):
    """Compile ``fun`` into optimized NumPy code (decorator or function, like jax.jit)."""
    if fun is None:
        return functools.partial(jit, static_argnums=static_argnums,
                                 static_argnames=static_argnames,
                                 donate_argnums=donate_argnums, backend=backend)
    _check_callable(fun, "jit")
    if backend not in (None,) + BACKENDS:
        raise ArgumentError(f"jit: backend {backend!r} is not available here; the NumPy "
                            f"backend ({', '.join(BACKENDS)}) is")
    static_nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(
        static_argnums)
    static_names = (static_argnames,) if isinstance(static_argnames, str) else tuple(
        static_argnames)
    del donate_argnums  # accepted for compatibility: NumPy arrays are not donated

    def jitted(*args, **kwargs):
        params = _positional_names(fun)
        static = {}
        dynamic = list(args)
        for i in sorted(static_nums, reverse=True):
            k = i if i >= 0 else i + len(args)
            if not 0 <= k < len(args):
                raise ArgumentError(f"jit: static_argnums {i} is out of range for "
                                    f"{len(args)} arguments")
            static[params[k]] = args[k]
            del dynamic[k]
        for name in static_names:
            if name in kwargs:
                static[name] = kwargs.pop(name)
        for name, value in static.items():
            try:
                hash(value)
            except TypeError:
                raise ArgumentError(
                    f"jit: static argument {name!r} must be hashable, got "
                    f"{type(value).__name__}; pass arrays as ordinary arguments, or "
                    "convert lists to tuples") from None
        fn_args = function_arguments(dynamic)
        key = ("jit", tuple(sorted(static.items(), key=lambda kv: kv[0])), fn_args,
               _signature(dynamic))
        gen = cached(fun, key, lambda: _build(fun, static, dict(fn_args), dynamic))
        gen.refresh()
        return gen.functions["main"](*dynamic, **kwargs)

    def source(*args, **kwargs):
        params = _positional_names(fun)
        positions = {j if j >= 0 else j + len(args) for j in static_nums}
        static = {params[i]: args[i] for i in positions}
        static.update({k: v for k, v in kwargs.items() if k in static_names})
        dynamic = [a for i, a in enumerate(args) if i not in positions]
        return _build(fun, static, dict(function_arguments(dynamic)), dynamic)

    def generated():
        # what grad(jit(f)) or vmap(jit(f)) transform: optimized, but not fused (the
        # fused groups' run-time dispatch is not code the transformations read)
        return _build(fun, {}, {}, (), fuse=False).functions["main"]

    return _wrap(fun, jitted, "jit", generated, source)


__all__ = ["jit"]
