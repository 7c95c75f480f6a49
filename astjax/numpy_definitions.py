"""NumPy functions astjax inlines from definitions in NumPy, instead of primitives.

A function that NumPy itself composes from other array operations needs no rules of
its own: the Normalizer inlines the definition here in place of a call of the NumPy
function (``DEFINITIONS``, keyed by the NumPy callable), the way ``jax.numpy`` defines
them over ``lax``, and every transformation then differentiates, batches and compiles
the operations it is made of.  Each follows NumPy's documented result (dtype, axis
conventions, casts); ``tests/test_numpy_definitions.py`` checks each against NumPy
under jit, its gradient against central differences and vmap against a loop.
"""
from __future__ import annotations

import numpy as np


def trapezoid(y, x=None, dx=1.0, axis=-1):
    y = np.moveaxis(np.asarray(y), axis, -1)
    if x is None:
        width = dx
    else:
        x = np.asarray(x)
        if x.ndim == 1:
            width = np.diff(x)
        else:
            width = np.moveaxis(np.diff(x, axis=axis), axis, -1)
    return np.sum(width * (y[..., 1:] + y[..., :-1]) / 2.0, axis=-1)


def cumulative_prod(x, axis=None, dtype=None, out=None, include_initial=False):
    x = np.asarray(x)
    if axis is None:
        if x.ndim > 1:
            raise ValueError("axis must be specified for multi-dimensional arrays")
        axis = 0
    product = np.cumprod(x, axis=axis, dtype=dtype)
    if include_initial:
        first = np.ones_like(np.take(product, np.arange(1), axis=axis))
        product = np.concatenate([first, product], axis=axis)
    return product


def nancumprod(a, axis=None, dtype=None, out=None):
    return np.cumprod(np.where(np.isnan(a), 1, a), axis=axis, dtype=dtype)


def matvec(x1, x2):
    return np.einsum("...ij,...j->...i", x1, x2)


def vecmat(x1, x2):
    # (the vector is conjugated, as in np.vecdot)
    return np.einsum("...j,...jk->...k", np.conj(x1), x2)


def unstack(x, axis=0):
    return tuple(np.moveaxis(x, axis, 0))


def vander(x, N=None, increasing=False):
    x = np.asarray(x)
    if N is None:
        N = x.shape[0]
    powers = np.arange(N)
    if not increasing:
        powers = powers[::-1]
    return x[:, None] ** powers


def polyder(p, m=1):
    p = np.asarray(p)
    for _ in range(m):
        order = p.shape[0] - 1
        p = p[:-1] * np.arange(order, 0, -1)
    return p


def polyint(p, m=1, k=None):
    p = np.asarray(p)
    if k is None:
        k = np.zeros(m)
    k = np.atleast_1d(k)
    if k.shape[0] == 1 and m > 1:
        k = k[0] * np.ones(m)
    for i in range(m):
        p = np.concatenate([p / np.arange(p.shape[0], 0, -1), k[i:i + 1]])
    return p


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    if full or cov:
        raise ValueError("astjax differentiates polyfit's coefficients only: "
                         "call it without full= and cov=")
    x = np.asarray(x) + 0.0
    y = np.asarray(y) + 0.0
    lhs = vander(x, deg + 1)
    rhs = y
    if w is not None:
        lhs = lhs * np.asarray(w)[:, None]
        if y.ndim == 2:
            rhs = rhs * np.asarray(w)[:, None]
        else:
            rhs = rhs * np.asarray(w)
    scale = np.sqrt(np.sum(lhs * lhs, axis=0))
    coefficients = np.linalg.lstsq(lhs / scale, rhs, rcond=rcond)[0]
    return (coefficients.T / scale).T


def unwrap(p, discont=None, axis=-1, period=2 * np.pi):
    p = np.moveaxis(np.asarray(p), axis, -1)
    step = np.diff(p, axis=-1)
    if discont is None:
        discont = period / 2
    high = period / 2
    wrapped = np.mod(step + high, period) - high
    # (a step of exactly +half a period stays positive, as NumPy keeps it)
    wrapped = np.where((wrapped == -high) & (step > 0), high, wrapped)
    correction = np.where(np.abs(step) < discont, 0.0, wrapped - step)
    unwrapped = np.concatenate([p[..., :1] * 1.0,     # (NumPy's result is a float)
                                p[..., 1:] + np.cumsum(correction, axis=-1)], axis=-1)
    return np.moveaxis(unwrapped, -1, axis)


def digitize(x, bins, right=False):
    bins = np.asarray(bins)
    side = "left" if right else "right"
    if np.all(bins[1:] >= bins[:-1]):
        return np.searchsorted(bins, x, side=side)
    if not np.all(bins[1:] <= bins[:-1]):
        raise ValueError("bins must be monotonically increasing or decreasing")
    return bins.shape[0] - np.searchsorted(bins[::-1], x, side=side)


def vector_norm(x, axis=None, keepdims=False, ord=2):
    x = np.asarray(x)
    if axis is None:
        result = np.linalg.norm(np.ravel(x), ord=ord)
        if keepdims:
            result = np.reshape(result, (1,) * x.ndim)
        return result
    if isinstance(axis, tuple):
        last = tuple(range(-len(axis), 0))
        moved = np.moveaxis(x, axis, last)
        result = np.linalg.norm(np.reshape(moved, moved.shape[:-len(axis)] + (-1,)),
                                ord=ord, axis=-1)
        if keepdims:
            result = np.expand_dims(result, axis)
        return result
    return np.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)


def cond(x, p=None):
    if p is None or p == 2 or p == -2:
        s = np.linalg.svd(x, compute_uv=False)
        if p == -2:
            return s[..., -1] / s[..., 0]
        return s[..., 0] / s[..., -1]
    return np.linalg.norm(x, ord=p, axis=(-2, -1)) * np.linalg.norm(
        np.linalg.inv(x), ord=p, axis=(-2, -1))


# the NumPy callable -> its definition (those of the installed NumPy only)
DEFINITIONS = {id(getattr(module, name)): (getattr(module, name), definition)
               for module, name, definition in [
                   (np, "trapezoid", trapezoid), (np, "cumulative_prod", cumulative_prod),
                   (np, "nancumprod", nancumprod), (np, "matvec", matvec),
                   (np, "vecmat", vecmat), (np, "unstack", unstack), (np, "vander", vander),
                   (np, "polyder", polyder), (np, "polyint", polyint),
                   (np, "polyfit", polyfit), (np, "unwrap", unwrap),
                   (np, "digitize", digitize), (np.linalg, "vector_norm", vector_norm),
                   (np.linalg, "cond", cond)]
               if hasattr(module, name)}


def definition(obj):
    """The definition to inline for the NumPy callable ``obj``, or None."""
    found = DEFINITIONS.get(id(obj))
    return found[1] if found is not None and found[0] is obj else None
