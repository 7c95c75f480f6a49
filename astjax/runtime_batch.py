"""Helpers for vmapped code (imported by generated code as ``rb``).

Convention: inside vmapped code a batched array carries the batch dimension as its
LAST axis.  NumPy aligns shapes from the right, so an elementwise operation between a
batched array and an unbatched one that was given a trailing axis of size 1
(``lift``) broadcasts per example with no shape bookkeeping, and selecting per lane
(``np.where(pred, a, b)`` with ``pred`` of shape ``(B,)``) needs none either.  Axis
arguments written for one example keep their meaning when non-negative; the helpers
here translate the rest.
"""
from __future__ import annotations

import numpy as np

from astjax.errors import ArgumentError


# ------------------------------------------------------------------ entering and leaving

def batch_size(sizes_by_name: dict) -> int:
    """The one batch size of all batched inputs; a clear error naming them otherwise."""
    sizes = {name: n for name, n in sizes_by_name.items() if n is not None}
    distinct = sorted(set(sizes.values()))
    if len(distinct) > 1:
        parts = ", ".join(f"{name} has {n}" for name, n in sizes.items())
        raise ArgumentError(f"vmap got inconsistent batch sizes: {parts}")
    if not distinct:
        raise ArgumentError("vmap needs at least one batched argument, or axis_size")
    return distinct[0]


def leaf_axis_size(x, axis):
    """Size of ``axis`` of every array leaf of ``x`` (they must agree)."""
    from astjax.tree_util import tree_leaves
    sizes = {np.shape(leaf)[axis] for leaf in tree_leaves(x)}
    if len(sizes) != 1:
        raise ArgumentError(f"vmap: leaves of one argument disagree on the batch size: "
                            f"{sorted(sizes)}")
    return sizes.pop()


def to_last(x, axis):
    """Move each array leaf's batch axis ``axis`` to the end."""
    from astjax.tree_util import tree_map
    return tree_map(lambda leaf: np.moveaxis(np.asarray(leaf), axis, -1), x)


def from_last(x, axis, size, batched):
    """Leave vmapped code: batch axis to ``axis`` (an unbatched result is broadcast)."""
    from astjax.tree_util import tree_map
    if axis is None:
        if batched:
            raise ArgumentError("vmap: out_axes=None for an output that depends on the "
                                "batched inputs")
        return x

    def move(leaf):
        leaf = np.asarray(leaf)
        if not batched:
            leaf = np.broadcast_to(leaf[..., None], leaf.shape + (size,))
        return np.moveaxis(leaf, -1, axis)
    return tree_map(move, x)


# -------------------------------------------------------------------------- operands

def lift(x):
    """An unbatched operand of a batched operation: arrays get a trailing axis of 1."""
    if isinstance(x, np.ndarray):
        return x[..., None]
    if isinstance(x, (list, tuple)) and x and all(isinstance(v, np.ndarray) for v in x):
        return type(x)(v[..., None] for v in x)
    return x


def broadcast_batch(x, size):
    """An unbatched value assigned to a batched variable: one copy per lane."""
    if isinstance(x, (list, tuple)):
        return type(x)(broadcast_batch(v, size) for v in x)
    if isinstance(x, dict):
        return {k: broadcast_batch(v, size) for k, v in x.items()}
    if x is None or isinstance(x, (str, bytes)):
        return x
    arr = np.asarray(x)
    return np.array(np.broadcast_to(arr[..., None], arr.shape + (size,)))


def select(pred, on_true, on_false):
    """Per lane: ``on_true`` where ``pred`` (shape (B,)) holds, else ``on_false``."""
    if isinstance(on_true, (list, tuple)):
        return type(on_true)(select(pred, a, b) for a, b in zip(on_true, on_false))
    if isinstance(on_true, dict):
        return {k: select(pred, on_true[k], on_false[k]) for k in on_true}
    if on_true is on_false or on_false is None:
        return on_true
    if on_true is None:
        return on_false
    return np.where(pred, on_true, on_false)


def continue_lanes(active, test, *exit_flags):
    """Lanes still looping: active before, the test holds, and no exit flag is set."""
    out = np.logical_and(active, test)
    for f in exit_flags:
        out = np.logical_and(out, np.logical_not(f))
    return out


def all_lanes_flags(flags):
    """True once every lane has set one of its exit flags."""
    left = np.zeros((), bool)
    for f in flags:
        left = np.logical_or(left, f)
    return bool(np.all(left))


def any_lane(pred):
    return bool(np.any(pred))


def all_lanes(pred):
    return bool(np.all(pred))


# ------------------------------------------------------------------- static facts

def shape(x):
    """Per-example shape of a batched array."""
    return np.shape(x)[:-1]


def ndim(x):
    return np.ndim(x) - 1


def size(x):
    return int(np.prod(np.shape(x)[:-1]))


def length(x):
    if isinstance(x, np.ndarray):
        if x.ndim < 2:
            raise TypeError("len() of a 0-d array (inside vmap)")
        return x.shape[0]
    return len(x)


# ------------------------------------------------------------------------- axes

def axis(axis, x):
    """A per-example axis argument as an axis of the batched array (None: all but batch)."""
    nd = np.ndim(x) - 1
    if axis is None:
        return tuple(range(nd))
    if isinstance(axis, (tuple, list)):
        return tuple(a % nd if nd else a for a in axis)
    return axis % nd if nd else axis


def index(ix):
    """A per-example index for a batched array: ``...`` must not reach the batch axis."""
    items = ix if isinstance(ix, tuple) else (ix,)
    if any(i is Ellipsis for i in items):
        return items + (slice(None),)
    return ix


# --------------------------------------------------------------------- products

def matmul(x, y):
    """Per-example ``x @ y`` on batch-last operands (either may be lifted, size 1)."""
    x = np.asarray(x)
    y = np.asarray(y)
    xm = np.moveaxis(x, -1, 0)
    ym = np.moveaxis(y, -1, 0)
    if xm.ndim == 2:       # per-example vector
        xm = xm[:, None, :]
        squeeze_x = True
    else:
        squeeze_x = False
    if ym.ndim == 2:
        ym = ym[:, :, None]
        squeeze_y = True
    else:
        squeeze_y = False
    out = np.matmul(xm, ym)
    if squeeze_y:
        out = out[..., 0]
    if squeeze_x:
        out = out[..., 0, :] if not squeeze_y else out[..., 0]
    return np.moveaxis(out, 0, -1)


def dot(a, b):
    """Per-example ``np.dot`` (the same as matmul for the 1-D and 2-D cases users write)."""
    na, nb = np.ndim(a) - 1, np.ndim(b) - 1
    if na == 0 or nb == 0:
        return a * b
    if na <= 2 and nb <= 2:
        return matmul(a, b)
    return np.moveaxis(np.stack([np.dot(a[..., i], b[..., min(i, b.shape[-1] - 1)])
                                 for i in range(max(a.shape[-1], b.shape[-1]))]), 0, -1)


# ------------------------------------------------------------- batching rule helpers

def _nd(x):
    return np.ndim(x) - 1


def shape_with_batch(shape, x):
    """A per-example target shape, with the batch axis appended."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    return shape + (np.shape(x)[-1],)


def permutation(axes, x):
    nd = _nd(x)
    axes = tuple(reversed(range(nd))) if axes is None else tuple(a % nd for a in axes)
    return axes + (nd,)


def new_axis(axis, x):
    """expand_dims axes for the batched array (negative ones count from the result)."""
    nd = _nd(x)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    out_nd = nd + len(axes)
    fixed = tuple(a % out_nd for a in axes)
    return fixed if isinstance(axis, (tuple, list)) else fixed[0]


def squeeze_axes(axis, x):
    nd = _nd(x)
    if axis is None:
        return tuple(i for i in range(nd) if np.shape(x)[i] == 1)
    return axis_all(axis, nd)


def axis_all(axis, nd):
    if isinstance(axis, (tuple, list)):
        return tuple(a % nd for a in axis)
    return axis % nd


def argreduce(fn, a, axis, keepdims):
    if axis is None:
        flat = np.reshape(a, (-1, np.shape(a)[-1]))
        out = fn(flat, axis=0)
        return out.reshape((1,) * _nd(a) + out.shape) if keepdims else out
    return fn(a, axis=axis_all(axis, _nd(a)), keepdims=keepdims)


def cumulative(fn, a, axis, dtype):
    if axis is None:
        return fn(np.reshape(a, (-1, np.shape(a)[-1])), axis=0, dtype=dtype)
    return fn(a, axis=axis_all(axis, _nd(a)), dtype=dtype)


def norm(x, ord, axis, keepdims):
    xm = np.moveaxis(np.asarray(x), -1, 0)
    if axis is None:
        if ord is None or ord == "fro":
            out = np.sqrt(np.sum(np.abs(xm) ** 2, axis=tuple(range(1, xm.ndim))))
            return out.reshape((1,) * _nd(x) + out.shape) if keepdims else out
        return np.array([np.linalg.norm(v, ord) for v in xm])
    ax = axis_all(axis, _nd(x))
    shifted = tuple(a + 1 for a in ax) if isinstance(ax, tuple) else ax + 1
    out = np.linalg.norm(xm, ord=ord, axis=shifted, keepdims=keepdims)
    return np.moveaxis(out, 0, -1)


def outer(a, b):
    a = np.reshape(a, (-1, np.shape(a)[-1]))
    b = np.reshape(b, (-1, np.shape(b)[-1]))
    return a[:, None, :] * b[None, :, :]


def flat(x):
    return np.reshape(x, (-1, np.shape(x)[-1]))


def inner(a, b):
    if _nd(a) == 0 or _nd(b) == 0:
        return a * b
    return np.moveaxis(np.stack([np.inner(a[..., i], b[..., min(i, b.shape[-1] - 1)])
                                 for i in range(max(a.shape[-1], b.shape[-1]))]), 0, -1)


def einsum(subscripts, operands):
    """Per-example einsum: a fresh letter for the batch axis on every operand."""
    if "->" in subscripts:
        ins, out = subscripts.split("->")
    else:
        ins = subscripts
        letters = [c for c in ins.replace(",", "") if c.isalpha()]
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    free = next(c for c in "zyxwvutsrqponmlkjihgfedcbaZYXWVUTSRQPONMLKJIHGFEDCBA"
                if c not in subscripts)
    terms = ins.split(",")
    size = max(np.shape(o)[-1] for o in operands)
    ops = [np.broadcast_to(o, np.shape(o)[:-1] + (size,)) for o in operands]
    spec = ",".join(t + free for t in terms) + "->" + out + free
    return np.einsum(spec, *ops)


def concatenate(arrays, axis):
    arrays = _common_batch(arrays)
    if axis is None:
        return np.concatenate([flat(a) for a in arrays], axis=0)
    return np.concatenate(arrays, axis=axis_all(axis, _nd(arrays[0])))


def stack(arrays, axis):
    arrays = _common_batch(arrays)
    nd = _nd(arrays[0]) + 1
    return np.stack(arrays, axis=axis % nd)


def atleast_2d_all(arrays):
    out = []
    for a in _common_batch(arrays):
        while _nd(a) < 2:
            a = a[None]
        out.append(a)
    return out


def hstack(arrays):
    arrays = _common_batch(arrays)
    if _nd(arrays[0]) == 1:
        return np.concatenate(arrays, axis=0)
    return np.concatenate(arrays, axis=1)


def _common_batch(arrays):
    arrays = [np.asarray(a) for a in arrays]
    size = max(a.shape[-1] for a in arrays)
    return [np.broadcast_to(a, a.shape[:-1] + (size,)) if a.shape[-1] != size else a
            for a in arrays]


def pad_width(width, x):
    nd = _nd(x)
    w = np.broadcast_to(np.asarray(width, dtype=np.intp).reshape(-1, 2)
                        if np.ndim(width) else np.full((1, 2), width), (nd, 2))
    return [tuple(int(v) for v in row) for row in w] + [(0, 0)]


def take(a, indices, axis, mode):
    if axis is None:
        return np.take(flat(a), indices, axis=0, mode=mode)
    return np.take(a, indices, axis=axis_all(axis, _nd(a)), mode=mode)


def repeat(a, repeats, axis):
    if axis is None:
        return np.repeat(flat(a), repeats, axis=0)
    return np.repeat(a, repeats, axis=axis_all(axis, _nd(a)))


def roll(a, shift, axis):
    if axis is None:
        shape = np.shape(a)
        return np.reshape(np.roll(flat(a), shift, axis=0), shape)
    return np.roll(a, shift, axis=axis_all(axis, _nd(a)))


def full_like(a, fill_value, dtype):
    fill = np.asarray(fill_value)
    out = np.empty(np.broadcast_shapes(np.shape(a), fill.shape),
                   dtype=dtype or np.result_type(a, fill))
    out[...] = fill
    return out


def asarray(a, dtype):
    if isinstance(a, (list, tuple)):
        return np.stack(_common_batch(a)).astype(dtype) if dtype else np.stack(
            _common_batch(a))
    return np.asarray(a, dtype=dtype)


def no_flags(flags):
    out = np.zeros((), bool)
    for f in flags:
        out = np.logical_or(out, f)
    return np.logical_not(out)


def any_flags(flags):
    out = np.zeros((), bool)
    for f in flags:
        out = np.logical_or(out, f)
    return out


# ---------------------------------------------- batched versions of gradient helpers

def unbroadcast(t, x):
    """Sum a batched cotangent down to the per-example shape of ``x`` (lifted)."""
    if t is None:
        return None
    target = np.shape(x)[:-1]
    ts = np.shape(t)
    per = ts[:-1]
    lead = len(per) - len(target)
    axes = tuple(range(lead)) + tuple(i + lead for i, n in enumerate(target)
                                      if n == 1 and per[i + lead] != 1)
    out = np.sum(t, axis=axes) if axes else t
    out = np.reshape(out, target + (ts[-1],))
    dtype = getattr(x, "dtype", None)
    if dtype is not None and np.issubdtype(dtype, np.inexact) and out.dtype != dtype:
        out = out.astype(dtype)
    return out


def broadcast_like(t, x):
    if t is None:
        return None
    size = max(np.shape(t)[-1], np.shape(x)[-1])
    return np.array(np.broadcast_to(t, np.shape(x)[:-1] + (size,)))


def unreduce(t, x, axis, keepdims):
    if t is None:
        return None
    nd = _nd(x)
    if axis is not None and not keepdims:
        ax = axis_all(axis, nd)
        t = np.expand_dims(t, ax)
    elif axis is None and not keepdims:
        t = np.reshape(t, (1,) * nd + (np.shape(t)[-1],))
    return broadcast_like(t, x)


def getitem_vjp(t, x, index):
    """Cotangent of ``x[index]`` for batched arrays (containers fall back to ra)."""
    from astjax import runtime_array as ra
    if t is None:
        return None
    if not isinstance(x, np.ndarray):
        return ra.getitem_vjp(t, x, index)
    size = max(np.shape(t)[-1], x.shape[-1])
    out = np.zeros(x.shape[:-1] + (size,), dtype=np.result_type(x.dtype, t))
    ix = index_full(index)
    np.add.at(out, ix, t)
    return out


def index_full(ix):
    """A per-example index plus a full slice for the batch axis."""
    items = ix if isinstance(ix, tuple) else (ix,)
    if any(i is Ellipsis for i in items):
        return items + (slice(None),)
    return items + (Ellipsis, slice(None))


def acc_at(d, x, index, g):
    from astjax import runtime as rt
    if g is None:
        return d
    contribution = getitem_vjp(g, x, index)
    return rt.acc(d, contribution)


def dot_grad(t, a, b, which):
    """Batched cotangents of ``np.dot(a, b)`` (which=0: of a, 1: of b)."""
    na, nb = _nd(a), _nd(b)
    if which == 0:
        if na == 0:
            out = np.sum(flat(t * b) if nb else t * b, axis=0) if nb else t * b
        elif nb == 1 and na == 1:
            out = t[None, :] * b if np.ndim(t) == 1 else t * b
        elif nb == 1:
            out = np.moveaxis(np.moveaxis(t, -1, 0)[..., :, None] *
                              np.moveaxis(b, -1, 0)[..., None, :], 0, -1)
        elif na == 1:
            out = matmul(b, t)
        else:
            out = matmul(t, np.swapaxes(b, -2, -3))
        return unbroadcast(out, a)
    if nb == 0:
        out = np.sum(flat(t * a), axis=0) if na else t * a
    elif na == 1 and nb == 1:
        out = t * a
    elif na == 1:
        out = np.moveaxis(np.moveaxis(a, -1, 0)[..., :, None] *
                          np.moveaxis(t, -1, 0)[..., None, :], 0, -1)
    elif nb == 1:
        out = matmul(t, a)
    else:
        out = matmul(np.swapaxes(a, -2, -3), t)
    return unbroadcast(out, b)


def pick(x, y, which):
    return x if which == 0 else y


def check_scalar_output(value, fname):
    """grad's scalar-output check, per example."""
    from astjax.runtime import check_scalar_output as check
    check(np.asarray(value)[..., 0] if np.ndim(value) else value, fname)
    return value
