"""``astjax.lax``: JAX's structured control flow, eager and transformable.

Called outside any transformation these run as plain Python with NumPy arrays.
Inside a transformed function the normalizer never calls them: it rewrites each
call into core-form ``if``/``for``/``while`` with the body functions inlined
(``astjax/frontend/lax_rewrite.py``), which every transformation already handles.
"""
from __future__ import annotations

import numpy as np

from astjax import runtime as rt
from astjax.errors import ArgumentError
from astjax.kernels import cuda_graph as _graphs

__all__ = ["cond", "switch", "select", "fori_loop", "while_loop", "scan", "map",
           "stop_gradient"]

stop_gradient = rt.stop_gradient


def _check_pred(pred):
    shape = np.shape(pred)
    if shape != ():
        raise ArgumentError(f"cond: pred must be a scalar, got an array of shape {shape}")
    return bool(pred)


def cond(pred, true_fun, false_fun, *operands):
    """``true_fun(*operands) if pred else false_fun(*operands)``."""
    if not callable(true_fun) or not callable(false_fun):
        raise ArgumentError("cond: true_fun and false_fun must be callable")
    return true_fun(*operands) if _check_pred(pred) else false_fun(*operands)


def switch(index, branches, *operands):
    """``branches[clamp(index, 0, len(branches) - 1)](*operands)``, as JAX clamps."""
    branches = list(branches)
    if not branches:
        raise ArgumentError("switch: branches must be a non-empty sequence")
    i = rt.clamp_index(index, len(branches))
    return branches[i](*operands)


def select(pred, on_true, on_false):
    """Elementwise choice (``np.where``) with shapes that must match, as in JAX."""
    if np.shape(on_true) != np.shape(on_false):
        raise ArgumentError(f"select: on_true {np.shape(on_true)} and on_false "
                            f"{np.shape(on_false)} must have the same shape")
    return np.where(pred, on_true, on_false)


def fori_loop(lower, upper, body_fun, init_val, *, unroll=None):
    """``val = body_fun(i, val)`` for ``i`` in ``range(lower, upper)``.

    ``unroll`` is accepted for compatibility and has no effect."""
    val = init_val
    body_fun = _graphs.replayed(body_fun, index_first=True)   # CUDA graphs (off: itself)
    for i in range(int(lower), int(upper)):
        val = body_fun(i, val)
    return val


def while_loop(cond_fun, body_fun, init_val):
    """``while cond_fun(val): val = body_fun(val)``."""
    val = init_val
    while cond_fun(val):
        val = body_fun(val)
    return val


def scan(f, init, xs=None, length=None, reverse=False, unroll=1):
    """Loop ``carry, y = f(carry, x)`` over the leading axis of ``xs``; stack the ``y``s.

    Returns ``(final_carry, stacked_ys)``; pytree carries, ``xs`` and ``ys`` work.
    ``unroll`` is accepted for compatibility and has no effect.
    """
    n = rt.scan_length(xs, length)
    carry = init
    ys = []
    f = _graphs.replayed(f)             # one CUDA graph per step where enabled (else f)
    for step in range(n):
        i = n - 1 - step if reverse else step
        carry, y = f(carry, rt.tree_index(xs, i))
        ys.append(rt.compact(y))
    return carry, rt.tree_stack(ys, reverse)


def map(f, xs, *, batch_size=None):  # noqa: A001  (JAX's name)
    """``np.stack([f(x) for x in xs])`` over the leading axis, pytrees included.

    ``batch_size`` (JAX maps that many at a time) is accepted and has no effect on
    the result."""
    n = rt.scan_length(xs, None)
    return rt.tree_stack([rt.compact(f(rt.tree_index(xs, i))) for i in range(n)], False)


# ------------------------------------------------------------------ collectives
# Over the mesh axes of astjax.shard_map / astjax.pmap (astjax/sharding/collectives.py).
from astjax.sharding.collectives import (all_gather, all_to_all, axis_index,  # noqa: E402
                                         axis_size, pcast, pmax, pmean, pmin,
                                         ppermute, psum, psum_scatter, pvary)

__all__ += ["psum", "pmean", "pmax", "pmin", "all_gather", "psum_scatter", "ppermute",
            "all_to_all", "axis_index", "axis_size", "pvary", "pcast"]

# device arrays (CuPy) passed to these directly run this module's code on their array
# module: the stacking of scan's ys, select's where (astjax/device.py)
from astjax import device as _device  # noqa: E402
_device.dispatch_public(globals(), ("cond", "switch", "select", "fori_loop", "while_loop",
                                    "scan", "map"), __name__)
