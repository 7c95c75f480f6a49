"""Array helpers that rule templates call (unbroadcast, undoing reductions...).

Generated code imports this module as ``ra``.  Each helper is itself a primitive in
the registry (``astjax/primitives.py``), so code that calls it can be transformed
again (higher derivatives).  Helpers that are linear in their first argument have a
vjp template of their own; helpers that only compute masks or static facts (shapes,
permutations, axes) are registered as non-differentiable.

Conventions shared by every helper:
- a cotangent ``None`` means zero, and comes back out as ``None``;
- a cotangent returned for a primal ``x`` has ``x``'s shape and, when ``x`` is a
  floating array, ``x``'s dtype (float32 stays float32);
- containers (lists, tuples, dicts) get containers of cotangents of the same kind.

NumPy only; no state.
"""
from __future__ import annotations

import builtins
import operator
import itertools
import math

import numpy as np

from astjax.errors import UnsupportedDerivativeError
# np.fft's rule helpers, spelled ra.<name> in generated code like the others
from astjax.runtime_fft import (  # noqa: F401
    fft_axes, fft_fit, fft_lengths, irfft_scale, swap_norm)

# ---------------------------------------------------------------------------
# Small internals (not primitives: never called from templates)
# ---------------------------------------------------------------------------


def _float_dtype(x, fallback=None):
    """The floating dtype a cotangent for ``x`` must have (None: leave as is)."""
    dtype = getattr(x, "dtype", None)
    if isinstance(dtype, np.dtype) and dtype.kind in "fc":   # np.inexact, quickly
        return dtype
    if dtype is not None and not isinstance(dtype, np.dtype) and \
            np.issubdtype(dtype, np.inexact):
        return dtype
    return fallback


def _fit_dtype(out, x):
    dtype = _float_dtype(x)
    if dtype is not None and getattr(out, "dtype", dtype) is not dtype and \
            getattr(out, "dtype", dtype) != dtype:
        out = _as_dtype(out, dtype)
    return out


def _as_dtype(out, dtype):
    """``out`` cast to ``dtype``; a complex derivative for a real value is its real part
    (JAX's convention: the transpose of putting a real into a complex)."""
    out = np.asarray(out)
    if out.dtype.kind == "c" and np.dtype(dtype).kind != "c":
        out = out.real
    return out.astype(dtype, copy=False)


def _axes(axis, ndim):
    """Normalize ``axis`` (None, int, negative, tuple) to a sorted tuple of axes."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        return tuple(sorted(operator.index(a) % ndim if ndim else 0 for a in axis))
    return (operator.index(axis) % ndim if ndim else 0,)


def _zeros(x):
    return np.zeros(np.shape(x), dtype=_float_dtype(x, np.float64))


def _is_float(x):
    return isinstance(x, float) or _float_dtype(x) is not None


def _rebuild(x, items):
    """A container of ``x``'s kind (list, tuple, namedtuple) holding ``items``."""
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*items)
    if isinstance(x, tuple):
        return tuple(items)
    return list(items)


# ---------------------------------------------------------------------------
# Broadcasting and reductions
# ---------------------------------------------------------------------------


def unbroadcast(t, x):
    """Sum a cotangent ``t`` down to the shape of ``x`` (undoing NumPy broadcasting).

    Also casts to ``x``'s floating dtype, so every rule can end with it to give a
    cotangent that fits its primal exactly.  ``x`` None (an absent optional
    argument) gets ``None``.
    """
    if t is None or x is None:
        return None
    if type(t) is np.ndarray and type(x) is np.ndarray and t.dtype == x.dtype:
        if t.shape == x.shape:
            return t      # the common case, without the general path's overhead
        if x.ndim and t.ndim == x.ndim + 1 and t.shape[1:] == x.shape:
            return t.sum(axis=0)    # a bias's cotangent: what the general path sums
    if isinstance(x, (list, tuple)) and isinstance(t, (list, tuple)) and len(t) != len(x):
        # a list/tuple cotangent longer than its primal: ``seq * n`` repeated the items
        # (Python's repetition, not NumPy's product); summing would scale it by n
        raise UnsupportedDerivativeError(
            "the derivative of repeating a list or tuple (seq * n) whose items or count "
            "are known only at run time: write the list and a constant count where it is "
            "used ([x] * 2), or use np.tile / np.repeat on an array")
    shape = np.shape(x)
    tshape = np.shape(t)
    out = t
    if tshape != shape:
        lead = len(tshape) - len(shape)
        axes = tuple(range(lead)) + tuple(
            i + lead for i, n in enumerate(shape) if n == 1 and tshape[i + lead] != 1)
        # the methods when ``t`` is an array: np.sum/np.reshape add Python dispatch
        if axes:
            out = t.sum(axis=axes) if type(t) is np.ndarray else np.sum(t, axis=axes)
        out = out.reshape(shape) if type(out) is np.ndarray else np.reshape(out, shape)
    return _fit_dtype(out, x)


def broadcast_like(t, x):
    """Broadcast ``t`` to the shape (and floating dtype) of ``x``; a fresh array."""
    if t is None:
        return None
    dtype = _float_dtype(x)
    if dtype is None:       # (t's own dtype, without moving a Python number to a device)
        dtype = getattr(t, "dtype", None) or np.result_type(t)
    out = np.empty(np.shape(x), dtype=dtype)
    out[...] = t
    return out


def unreduce(t, x, axis=None, keepdims=False):
    """Broadcast the cotangent of a reduction of ``x`` over ``axis`` back to ``x``'s shape."""
    if t is None:
        return None
    if axis is None and not keepdims and type(x) is np.ndarray and np.ndim(t) == 0:
        return broadcast_like(t, x)     # a full reduction's (a loss's): no reshape
    shape = np.shape(x)
    if not keepdims:
        t = np.reshape(t, tuple(1 if i in _axes(axis, len(shape)) else n
                                for i, n in enumerate(shape)))
    return broadcast_like(t, x)


def reduced_size(x, axis=None):
    """How many elements a reduction of ``x`` over ``axis`` combines (a Python int)."""
    shape = np.shape(x)
    n = 1
    for i in _axes(axis, len(shape)):
        n *= shape[i]
    return n


def extremum_weights(a, ans, axis=None, keepdims=False):
    """1/count where ``a`` equals its reduced max/min ``ans``, else 0 (ties share, as in JAX)."""
    shape = np.shape(a)
    if not keepdims:
        ans = np.reshape(ans, tuple(1 if i in _axes(axis, len(shape)) else n
                                    for i, n in enumerate(shape)))
    mask = (a == ans) | (np.isnan(a) & np.isnan(ans))
    count = np.sum(mask, axis=_axes(axis, len(shape)), keepdims=True)
    dtype = _float_dtype(a, np.float64)
    return mask.astype(dtype) / np.maximum(count, 1).astype(dtype)


def max_weight(x, y, like=None):
    """JAX's balanced weight of ``x`` in ``maximum(x, y)``: 1 where x > y, 0.5 on ties.

    The weight has ``like``'s floating dtype so that ``g * weight`` keeps g's dtype.
    """
    dtype = _float_dtype(like, None)
    if dtype is None:
        dtype = np.result_type(_float_dtype(x, np.float64), _float_dtype(y, np.float64))
    x = np.asarray(x)
    y = np.asarray(y)
    return np.greater(x, y).astype(dtype) + np.equal(x, y).astype(dtype) * 0.5


def fmax_weight(x, y, like=None):
    """The weight of ``x`` in ``np.fmax(x, y)``: ``max_weight``'s, and all of it where
    ``y`` is NaN (fmax skips a NaN operand, as JAX's ``where(isnan(y), x, ...)``), none
    where ``x`` is."""
    return _nan_skipped(max_weight(x, y, like), x, y)


def fmin_weight(x, y, like=None):
    """The weight of ``x`` in ``np.fmin(x, y)`` (NaN skipped as in ``fmax_weight``)."""
    return _nan_skipped(max_weight(y, x, like), x, y)


def _nan_skipped(weight, x, y):
    return np.where(np.isnan(y), 1.0, np.where(np.isnan(x), 0.0, weight)).astype(
        weight.dtype, copy=False)


def clip_part(t, a, a_min=None, a_max=None, min=None, max=None, which=0):
    """The part of the cotangent ``t`` of ``clip`` that goes to ``a`` (which=0), to the
    lower bound (1) or to the upper bound (2), before unbroadcasting.

    ``clip`` is ``minimum(maximum(a, lo), hi)`` in JAX, so ties share like there.
    Linear in ``t``; its own vjp is itself.
    """
    if t is None:
        return None
    lo = a_min if a_min is not None else min
    hi = a_max if a_max is not None else max
    if which == 1 and lo is None or which == 2 and hi is None:
        return None
    one = np.ones_like(t)
    w_lo = one if lo is None else max_weight(a, lo, t)    # share of a in maximum(a, lo)
    mid = a if lo is None else np.maximum(a, lo)
    w_mid = one if hi is None else max_weight(hi, mid, t)  # share of mid in minimum(mid, hi)
    if which == 0:
        return t * (w_lo * w_mid)
    if which == 1:
        return t * ((1 - w_lo) * w_mid)
    return t * (1 - w_mid)


def where(condition, x=None, y=None):
    """``np.where`` with keyword-friendly ``x``/``y`` (NumPy's are positional-only)."""
    if x is None and y is None:
        return np.where(condition)
    if not hasattr(condition, "astype"):        # CuPy's where wants an array condition
        condition = np.asarray(condition)
    return np.where(condition, x, y)


def user_line():
    """The user's line behind the generated line that called the runtime (None outside
    generated code, or in a standalone module): where a run-time refusal points."""
    import sys
    codegen = sys.modules.get("astjax.codegen")
    frame = sys._getframe(1)
    while frame is not None and codegen is not None:
        where = codegen.origin(frame.f_code.co_filename, frame.f_lineno)
        if where is not None:
            return where
        frame = frame.f_back
    return None


def _refuse_derivative(message, hint=None):
    raise UnsupportedDerivativeError(message, user_line(), hint)


def real_only(value, x, what):
    """``value`` (a derivative of ``what``), once ``x`` is known to be real: the rule of
    ``what`` is written for real arrays, so a complex ``x`` is refused at the user's
    line instead of differentiated wrongly (tests/test_complex_rules.py sweeps the
    registry).  Rules wrap what they return in it, so the check is never pruned."""
    if value is not None:
        _refuse_complex(x, what)
    return value


def _refuse_complex(x, what):
    if np.iscomplexobj(x):
        _refuse_derivative(f"the derivative of {what} for complex input",
                           "astjax differentiates it for real arrays; pass the real and "
                           "imaginary parts as real arrays, or stop_gradient the value")


def unsupported(what):
    """Raise for a derivative astjax does not implement (used by rule templates)."""
    _refuse_derivative(f"astjax does not implement {what}")


def clip(a, a_min=None, a_max=None, out=None, min=None, max=None):
    """``np.clip`` accepting both NumPy spellings of the bounds (a_min/min, a_max/max)."""
    lo = a_min if a_min is not None else min
    hi = a_max if a_max is not None else max
    return np.clip(a, lo, hi, out=out)


# ---------------------------------------------------------------------------
# Products along axes (prod, cumprod)
# ---------------------------------------------------------------------------


def _fold_plan(shape, axis):
    axes = _axes(axis, len(shape))
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    n = 1
    for i in axes:
        n *= shape[i]
    return kept + axes, tuple(shape[i] for i in kept) + (n,)


def fold_axes(x, axis=None):
    """Move the axes in ``axis`` to the end and flatten them into one (linear)."""
    shape = np.shape(x)
    perm, folded = _fold_plan(shape, axis)
    return np.reshape(np.transpose(x, perm), folded)


def unfold_axes(t, x, axis=None):
    """Inverse of ``fold_axes(x, axis)``: ``t`` of the folded shape back to ``x``'s shape."""
    if t is None:
        return None
    shape = np.shape(x)
    perm, _ = _fold_plan(shape, axis)
    inv = np.argsort(perm)
    out = np.transpose(np.reshape(t, tuple(shape[i] for i in perm)), tuple(int(i) for i in inv))
    return _fit_dtype(out, x)


def prod_others_last(a):
    """For each element along the last axis, the product of all the others.

    Exclusive prefix times exclusive suffix products: exact with zeros, no division.
    """
    a = np.asarray(a)
    ones = np.ones(a.shape[:-1] + (1,), dtype=a.dtype)
    left = np.cumprod(np.concatenate([ones, a[..., :-1]], axis=-1), axis=-1)
    right = np.flip(np.cumprod(np.flip(np.concatenate([a[..., 1:], ones], axis=-1), -1),
                               axis=-1), -1)
    return left * right


def eye_last(x):
    """Identity matrix of size ``x.shape[-1]`` in ``x``'s floating dtype (a constant)."""
    return np.eye(np.shape(x)[-1], dtype=_float_dtype(x, np.float64))


def cum_axis(axis):
    """The axis a cumulative op runs along once ``axis=None`` has flattened its input."""
    return 0 if axis is None else axis


# ---------------------------------------------------------------------------
# Static facts used by linear-algebra rules
# ---------------------------------------------------------------------------


def _norm_axes(axes, ndim):
    if isinstance(axes, (tuple, list)):
        return [operator.index(a) % ndim for a in axes]
    return [operator.index(axes) % ndim]


def _tensordot_axes(a, b, axes):
    na, nb = np.ndim(a), np.ndim(b)
    if isinstance(axes, (tuple, list)):
        ia = _norm_axes(axes[0], na) if na else []
        ib = _norm_axes(axes[1], nb) if nb else []
    else:
        n = operator.index(axes)
        ia = list(range(na - n, na))
        ib = list(range(n))
    return ia, ib


def tensordot_plan(a, b, axes=2, which=0):
    """Static pieces of tensordot's vjp.

    which=0: contraction axes of ``tensordot(g, b, .)`` giving a's cotangent;
    which=1: the permutation that puts that result into a's axis order;
    which=2: contraction axes of ``tensordot(a, g, .)`` giving b's cotangent;
    which=3: the permutation for b.
    """
    ia, ib = _tensordot_axes(a, b, axes)
    na, nb = np.ndim(a), np.ndim(b)
    free_a = [i for i in range(na) if i not in ia]
    free_b = [j for j in range(nb) if j not in ib]
    fa = len(free_a)
    if which == 0:
        return [fa + k for k in range(len(free_b))], free_b
    if which == 1:
        sib = sorted(ib)
        return tuple(free_a.index(i) if i in free_a else fa + sib.index(ib[ia.index(i)])
                     for i in range(na))
    if which == 2:
        return free_a, list(range(fa))
    sia = sorted(ia)
    return tuple(len(ia) + free_b.index(j) if j in free_b else sia.index(ia[ib.index(j)])
                 for j in range(nb))


def dot_axes(a, b):
    """``np.dot(a, b)`` as ``np.tensordot(a, b, axes)``: this returns the axes."""
    na, nb = np.ndim(a), np.ndim(b)
    if na == 0 or nb == 0:
        return [], []
    return [na - 1], [builtins.max(nb - 2, 0)]


def inner_axes(a, b):
    """``np.inner(a, b)`` as ``np.tensordot(a, b, axes)``: this returns the axes."""
    na, nb = np.ndim(a), np.ndim(b)
    if na == 0 or nb == 0:
        return [], []
    return [na - 1], [nb - 1]


def matmul_shape(x, y, which=0):
    """Shapes that turn matmul's 1-D operands into matrices (which: 0 x, 1 y, 2 result)."""
    sx, sy = np.shape(x), np.shape(y)
    x2 = (1,) + sx if len(sx) == 1 else sx
    y2 = sy + (1,) if len(sy) == 1 else sy
    if which == 0:
        return x2
    if which == 1:
        return y2
    batch = np.broadcast_shapes(x2[:-2], y2[:-2])
    return tuple(batch) + (x2[-2], y2[-1])


def kron_plan(a, b, which=0):
    """Static pieces of kron's vjp (0: interleaved shape of g, 1: padded shape of b,
    2: tensordot axes for a's cotangent, 3: padded shape of a, 4: axes for b's)."""
    sa, sb = np.shape(a), np.shape(b)
    nd = builtins.max(len(sa), len(sb))
    sa = (1,) * (nd - len(sa)) + tuple(sa)
    sb = (1,) * (nd - len(sb)) + tuple(sb)
    if which == 0:
        return tuple(n for pair in zip(sa, sb) for n in pair)
    if which == 1:
        return sb
    if which == 2:
        return [2 * i + 1 for i in range(nd)], list(range(nd))
    if which == 3:
        return sa
    return list(range(nd)), [2 * i for i in range(nd)]


def inverse_perm(axes, ndim):
    """The permutation undoing ``np.transpose(x, axes)`` (None: reversal, its own inverse)."""
    if axes is None:
        return None
    if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
        axes = axes[0]
    return tuple(int(i) for i in np.argsort([operator.index(a) % ndim for a in axes]))


def neg_shift(shift):
    """``-shift`` for ``np.roll`` (an int or a tuple of ints)."""
    if isinstance(shift, (tuple, list)):
        return tuple(-s for s in shift)
    return -shift


def col_shape(x, b):
    """``x``'s shape, with a trailing 1 when ``b`` is a vector (np.linalg.solve treats a
    1-D ``b`` as one column)."""
    s = tuple(np.shape(x))
    return s + (1,) if np.ndim(b) == 1 else s


def lstsq_weight(t, res, b):
    """The cotangent ``t`` of np.linalg.lstsq's residuals (one per column of ``b``, or
    none: an empty array when ``a`` is not of full column rank or has no more rows
    than columns) as weights of the columns: shape ``b.shape[1:]``, zeros when there
    are no residuals or ``t`` is None (zero)."""
    shape = tuple(np.shape(b))[1:]
    if t is None or np.size(res) == 0:
        return np.zeros(shape, dtype=_float_dtype(b, np.float64))
    return np.reshape(t, shape)


def lstsq_weight_t(w, res, b):
    """The transpose of ``lstsq_weight``: weights back to the residuals' shape."""
    if w is None or np.size(res) == 0:
        return np.zeros(np.shape(res), dtype=_float_dtype(res, np.float64))
    return np.reshape(w, np.shape(res))


def chol_lower(x, upper=False):
    """The lower-triangular factor from np.linalg.cholesky's result (``upper``: swap)."""
    return np.swapaxes(x, -1, -2) if upper else x


# ---------------------------------------------------------------------------
# Diagonals, tiling, repeating, padding, gathering
# ---------------------------------------------------------------------------


def diagonal_vjp(t, x, offset=0, axis1=0, axis2=1):
    """Zeros shaped like ``x`` with ``t`` (broadcast) written on the given diagonal."""
    if t is None:
        return None
    z = _zeros(x)
    ndim = z.ndim
    zv = np.moveaxis(z, (axis1 % ndim, axis2 % ndim), (-2, -1))
    n = builtins.max(0, builtins.min(zv.shape[-2] + builtins.min(offset, 0),
                                     zv.shape[-1] - builtins.max(offset, 0)))
    i = np.arange(n)
    zv[..., i + builtins.max(-offset, 0), i + builtins.max(offset, 0)] = t
    return z


def diag_vjp(t, v, k=0):
    """Cotangent of ``np.diag(v, k)``: the diagonal of ``t`` (1-D v) or ``t`` placed on
    the diagonal of zeros (2-D v).  Linear in ``t``; its vjp is ``np.diag(g, k)``."""
    if t is None:
        return None
    if np.ndim(v) == 1:
        return _fit_dtype(np.diagonal(t, k), v)
    return diagonal_vjp(t, v, k, 0, 1)


def tile_vjp(t, A, reps):
    """Cotangent of ``np.tile(A, reps)``: sum the tiles back onto ``A``."""
    if t is None:
        return None
    reps = tuple(reps) if isinstance(reps, (tuple, list)) else (reps,)
    shape = np.shape(A)
    nd = builtins.max(len(shape), len(reps))
    s = (1,) * (nd - len(shape)) + tuple(shape)
    r = (1,) * (nd - len(reps)) + reps
    inter = tuple(n for pair in zip(r, s) for n in pair)
    out = np.sum(np.reshape(t, inter), axis=tuple(range(0, 2 * nd, 2)))
    return _fit_dtype(np.reshape(out, shape), A)


def repeat_vjp(t, a, repeats, axis=None):
    """Cotangent of ``np.repeat(a, repeats, axis)``: sum each run of copies."""
    if t is None:
        return None
    shape = np.shape(a)
    flat = axis is None
    ax = 0 if flat else operator.index(axis) % builtins.max(len(shape), 1)
    n = int(np.prod(shape)) if flat else shape[ax]
    t = np.asarray(t)
    if np.ndim(repeats) == 0:
        r = operator.index(repeats)
        out = np.sum(np.reshape(t, t.shape[:ax] + (n, r) + t.shape[ax + 1:]), axis=ax + 1)
    else:
        zshape = (n,) if flat else shape
        out = np.zeros(zshape, dtype=_float_dtype(a, t.dtype))
        idx = np.repeat(np.arange(n), repeats)
        np.add.at(out, (slice(None),) * ax + (idx,), t)
    return _fit_dtype(np.reshape(out, shape), a)


_INDEX_MODES = ("constant", "edge", "reflect", "symmetric", "wrap")


def _pad_pairs(pad_width, ndim):
    """``pad_width`` as one (before, after) pair of ints >= 0 per axis, or None when it
    is spelled some other way (np.pad then reads it)."""
    if type(pad_width) is tuple and len(pad_width) == ndim and all(
            type(p) is tuple and len(p) == 2 and type(p[0]) is int and type(p[1]) is int
            and p[0] >= 0 and p[1] >= 0 for p in pad_width):
        return pad_width       # already ((before, after), ...) per axis
    def count(v):
        return int(v) if isinstance(v, (int, np.integer)) and not isinstance(v, bool) \
            and v >= 0 else None
    n = count(pad_width)
    if n is not None:
        return ((n, n),) * ndim
    if not isinstance(pad_width, (tuple, list)):
        return None
    if len(pad_width) == 2 and count(pad_width[0]) is not None and \
            count(pad_width[1]) is not None:
        return ((count(pad_width[0]), count(pad_width[1])),) * ndim
    if len(pad_width) != ndim:
        return None
    pairs = []
    for pw in pad_width:
        if not isinstance(pw, (tuple, list)) or len(pw) != 2:
            return None
        a, b = count(pw[0]), count(pw[1])
        if a is None or b is None:
            return None
        pairs.append((a, b))
    return tuple(pairs)


def pad_widths(pad_width, ndim):
    """``pad_width`` in any of np.pad's spellings (``3``, ``(3,)``, ``(1, 2)``,
    ``((1, 2),)``, one pair per axis) as an (ndim, 2) integer array, as np.pad reads it."""
    return np.broadcast_to(np.asarray(pad_width, dtype=np.intp), (ndim, 2))


def _pad_zeros(array, pairs):
    """``np.pad(array, pairs)`` (zeros around) without np.pad's Python overhead: the
    same values, dtype and memory order."""
    shape = tuple(n + a + b for n, (a, b) in zip(array.shape, pairs))
    fortran = array.flags.f_contiguous and not array.flags.c_contiguous
    out = np.empty(shape, dtype=array.dtype, order="F" if fortran else "C")
    out[tuple(slice(a, a + n) for n, (a, _) in zip(array.shape, pairs))] = array
    for k, (a, b) in enumerate(pairs):
        lead = (slice(None),) * k
        if a:
            out[lead + (slice(0, a),)] = 0
        if b:
            out[lead + (slice(shape[k] - b, None),)] = 0
    return out


def pad(array, pad_width, mode="constant", constant_values=0):
    """``np.pad`` restricted to what is differentiated: ``constant_values`` only when
    ``mode`` is "constant" (np.pad rejects it otherwise).  Zero padding of an array
    skips np.pad's Python overhead (several times the copy on 10^5 elements)."""
    if mode == "constant":
        if type(array) is np.ndarray and array.ndim and array.size and \
                type(constant_values) in (int, float) and constant_values == 0 and \
                math.copysign(1.0, constant_values) > 0:       # -0.0 fills -0.0
            pairs = _pad_pairs(pad_width, array.ndim)
            if pairs is not None:
                return _pad_zeros(array, pairs)
        return np.pad(array, pad_width, mode=mode, constant_values=constant_values)
    return np.pad(array, pad_width, mode=mode)


def pad_vjp(t, array, pad_width, mode="constant"):
    """Cotangent of ``np.pad``: pad an index array the same way, then add ``t`` at the
    indices (covers constant, edge, reflect, symmetric and wrap)."""
    if t is None:
        return None
    if mode not in _INDEX_MODES:
        raise UnsupportedDerivativeError(f"the derivative of np.pad with mode={mode!r}")
    shape = np.shape(array)
    if mode == "constant" and type(t) is np.ndarray:
        pairs = _pad_pairs(pad_width, len(shape))
        if pairs is not None and t.shape == tuple(n + a + b for n, (a, b) in
                                                  zip(shape, pairs)):
            # the interior of t: a view (what reads it next makes a new array; the
            # in-place accumulations never write into a view), cast to fit array
            inner = t[tuple(slice(a, a + n) for n, (a, _) in zip(shape, pairs))]
            dtype = _float_dtype(array, inner.dtype)
            return inner if inner.dtype == dtype else _as_dtype(inner, dtype)
    if mode == "constant":
        # the padding is constant: the cotangent is the interior of t (a view, copied)
        widths = pad_widths(pad_width, len(shape))
        t = np.broadcast_to(t, tuple(n + int(a) + int(b) for n, (a, b) in zip(shape, widths)))
        inner = t[tuple(slice(int(a), int(a) + n) for n, (a, _) in zip(shape, widths))]
        return np.array(inner, dtype=_float_dtype(array, inner.dtype))
    size = int(np.prod(shape))
    idx = np.arange(size).reshape(shape)
    if mode == "constant":
        pidx = np.pad(idx, pad_width, mode="constant", constant_values=-1)
    else:
        pidx = np.pad(idx, pad_width, mode=mode)
    keep = pidx >= 0
    t = np.broadcast_to(t, pidx.shape)
    weights = t[keep]
    out = np.bincount(pidx[keep], weights=weights.real, minlength=size)
    if np.iscomplexobj(weights):      # (bincount adds real weights only)
        out = out + 1j * np.bincount(pidx[keep], weights=weights.imag, minlength=size)
    return _as_dtype(np.reshape(out, shape), _float_dtype(array, t.dtype))


def take_vjp(t, a, indices, axis=None, mode="raise"):
    """Cotangent of ``np.take``: add ``t`` at the taken positions (repeats add up)."""
    if t is None:
        return None
    shape = np.shape(a)
    flat = axis is None
    ax = 0 if flat else operator.index(axis) % builtins.max(len(shape), 1)
    n = int(np.prod(shape)) if flat else shape[ax]
    idx = np.asarray(indices)
    if mode == "wrap":
        idx = idx % n
    elif mode == "clip":
        idx = np.clip(idx, 0, n - 1)
    z = np.zeros((n,) if flat else shape, dtype=_float_dtype(a, np.float64))
    np.add.at(z, (slice(None),) * ax + (idx,), t)
    return np.reshape(z, shape)


def take_along_axis_vjp(t, arr, indices, axis=-1):
    """Cotangent of ``np.take_along_axis``: add ``t`` at the gathered positions."""
    if t is None:
        return None
    shape = np.shape(arr)
    if axis is None:
        z = np.zeros(int(np.prod(shape)), dtype=_float_dtype(arr, np.float64))
        np.add.at(z, np.asarray(indices), t)
        return np.reshape(z, shape)
    t = np.asarray(t)
    ax = operator.index(axis) % len(shape)
    index = []
    for d in range(len(shape)):
        if d == ax:
            index.append(np.asarray(indices))
            continue
        view = [1] * len(shape)
        view[d] = t.shape[d]
        rng = np.arange(t.shape[d]) if shape[d] != 1 else np.zeros(t.shape[d], dtype=int)
        index.append(rng.reshape(view))
    z = _zeros(arr)
    np.add.at(z, tuple(index), t)
    return z


def diff(a, n=1, axis=-1, prepend=None, append=None):
    """``np.diff`` taking None for "no prepend/append" (np.diff treats None as a value)."""
    kw = {}
    if prepend is not None:
        kw["prepend"] = prepend
    if append is not None:
        kw["append"] = append
    return np.diff(a, n, axis, **kw)


def diff_vjp(t, a, n=1, axis=-1, prepend=None, append=None):
    """Cotangent of ``np.diff`` for ``a``: apply the adjoint of a first difference
    ``n`` times, then drop the rows that came from ``prepend``/``append``."""
    if t is None:
        return None
    ax = operator.index(axis) % np.ndim(a)
    t = np.asarray(t)
    for _ in range(n):
        width = [(0, 0)] * t.ndim
        width[ax] = (1, 1)
        t = -np.diff(np.pad(t, width), axis=ax)
    before = 0 if prepend is None else 1 if np.ndim(prepend) == 0 else np.shape(prepend)[ax]
    sl = [slice(None)] * t.ndim
    sl[ax] = slice(before, before + np.shape(a)[ax])
    return _fit_dtype(t[tuple(sl)], a)


# ---------------------------------------------------------------------------
# Joining and splitting
# ---------------------------------------------------------------------------


def diff_vjp_adj(s, a, n=1, axis=-1, prepend=None, append=None):
    """Adjoint of ``diff_vjp``: embed ``s`` (shaped like ``a``) in zeros where
    prepend/append sat, then take ``n`` differences."""
    if s is None:
        return None
    ax = operator.index(axis) % np.ndim(a)
    s = np.asarray(s)
    before = 0 if prepend is None else 1 if np.ndim(prepend) == 0 else np.shape(prepend)[ax]
    after = 0 if append is None else 1 if np.ndim(append) == 0 else np.shape(append)[ax]
    width = [(0, 0)] * s.ndim
    width[ax] = (before, after)
    return np.diff(np.pad(s, width), n, axis=ax)


def _promoted_shape(x, how):
    s = np.shape(x)
    if how == "vstack":
        return np.shape(np.atleast_2d(np.empty(s, dtype=np.int8)))
    if how == "hstack":
        return s if s else (1,)
    if how == "dstack":
        return np.shape(np.atleast_3d(np.empty(s, dtype=np.int8)))
    if how == "column_stack":
        return (s[0], 1) if len(s) == 1 else np.shape(np.atleast_2d(np.empty(s, np.int8)))
    return s


def _join_axis(shapes, axis, how):
    if how in ("vstack",):
        return 0
    if how == "hstack":
        return 0 if len(shapes[0]) == 1 else 1
    if how == "dstack":
        return 2
    if how == "column_stack":
        return 1
    return axis


def concat_vjp(t, arrays, axis=0, how="concatenate"):
    """Cotangents of the pieces joined by concatenate/stack/vstack/hstack/dstack/
    column_stack: cut ``t`` back into pieces shaped (and typed) like ``arrays``."""
    whole = arrays if isinstance(arrays, np.ndarray) else None
    arrays = list(arrays)
    if t is None:
        return None if whole is not None else [None] * len(arrays)
    t = np.asarray(t)
    shapes = [_promoted_shape(x, how) for x in arrays]
    if how == "stack":
        pieces = [np.take(t, i, axis=axis) for i in range(len(arrays))]
    else:
        ax = _join_axis(shapes, axis, how)
        if ax is None:
            sizes = [int(np.prod(s)) for s in shapes]
            ax = 0
        else:
            ax = ax % t.ndim
            sizes = [s[ax] for s in shapes]
        cuts = list(itertools.accumulate(sizes))[:-1]
        pieces = np.split(t, cuts, axis=ax)
    # a piece given as a (nested) list gets a list cotangent
    cots = [asarray_vjp(p, x) if isinstance(x, (list, tuple)) else
            _fit_dtype(np.reshape(p, np.shape(x)), x) for p, x in zip(pieces, arrays)]
    if whole is not None:
        # one array joined along its first axis (np.vstack(x)): an array cotangent
        return _fit_dtype(np.reshape(np.stack(cots), whole.shape), whole)
    return cots


def concat_cots(ts, arrays, axis=0, how="concatenate"):
    """Join per-piece cotangents ``ts`` (None: zeros) the way ``how`` joined ``arrays``.

    The adjoint of ``concat_vjp``; also the vjp of split/hsplit/vsplit/dsplit, with
    the split's output pieces as ``arrays``."""
    if isinstance(arrays, np.ndarray):
        # one array joined along its first axis: ``ts`` is its whole (co)tangent
        ts = [None] * len(arrays) if ts is None else list(np.broadcast_to(ts, arrays.shape))
    arrays = list(arrays)
    ts = list(ts) if isinstance(ts, (list, tuple)) else [ts]
    pieces = []
    for ti, x in zip(ts, arrays):
        s = _promoted_shape(x, how)
        pieces.append(np.zeros(s, dtype=_float_dtype(x, np.float64)) if ti is None
                      else np.reshape(ti, s))
    if how == "stack":
        return np.stack(pieces, axis=axis)
    ax = _join_axis([np.shape(p) for p in pieces], axis, how)
    if ax is None:
        return np.concatenate([np.ravel(p) for p in pieces])
    return np.concatenate(pieces, axis=ax)


def unpack_variadic(t, xs):
    """Cotangents for a variadic ``*arys`` whose function returns one array for one
    argument and a tuple for several (np.atleast_1d/2d/3d): always a list."""
    xs = list(xs)
    ts = [t] if len(xs) == 1 else list(t) if t is not None else [None] * len(xs)
    return [asarray_vjp(ti, x) for ti, x in zip(ts, xs)]


def pack_variadic(ts, t):
    """Adjoint of ``unpack_variadic``: list ``ts`` back to ``t``'s form (array or tuple)."""
    if isinstance(t, (list, tuple)):
        return _rebuild(t, [pack_cots(ti, x) for ti, x in zip(ts, t)])
    return pack_cots(ts[0], t)


def _meshgrid_axis(k, n, indexing):
    """The axis of ``np.meshgrid``'s outputs along which input ``k`` of ``n`` varies
    ("xy" indexing swaps the first two)."""
    if indexing == "xy" and n >= 2 and k < 2:
        return 1 - k
    return k


def meshgrid_cots(t, xi, sparse=False, indexing="xy"):
    """Cotangents of ``np.meshgrid``'s inputs ``xi`` from those of its outputs ``t``
    (None: zero): output k's summed over every axis but the one input k varies along,
    shaped and typed like input k (which meshgrid flattens)."""
    xi = list(xi)
    gs = [None] * len(xi) if t is None else list(t)
    out = []
    for k, (gk, x) in enumerate(zip(gs, xi)):
        if gk is None:
            out.append(None)
            continue
        axis = _meshgrid_axis(k, len(xi), indexing)
        others = tuple(a for a in range(np.ndim(gk)) if a != axis)
        out.append(asarray_vjp(np.sum(gk, axis=others), x))
    return out


def meshgrid_of(ts, xi, sparse=False, indexing="xy"):
    """``np.meshgrid`` of per-input values ``ts`` (None: zeros like that input) on the
    grid of ``xi``: the tangent of meshgrid's outputs, and ``meshgrid_cots``'s
    transpose."""
    xi = list(xi)
    ts = [None] * len(xi) if ts is None else list(ts)
    values = [np.zeros(np.shape(x), dtype=_float_dtype(x, np.float64)) if t is None else t
              for t, x in zip(ts, xi)]
    return tuple(np.meshgrid(*values, sparse=sparse, indexing=indexing))


# ---------------------------------------------------------------------------
# Containers, conversions, indexing
# ---------------------------------------------------------------------------


def asarray_vjp(t, a):
    """Cotangent of ``np.asarray(a)``/``np.array(a)``/``np.copy(a)`` for the input ``a``:
    ``t`` reshaped and cast to ``a``; for a (nested) list of arrays and scalars, a list
    of such cotangents."""
    if t is None or a is None:
        return None
    if isinstance(a, (list, tuple)):
        t = np.asarray(t)
        while t.ndim > 1 and t.shape[0] == 1 and len(a) != 1:
            t = t[0]  # leading axes that ndmin added
        return _rebuild(a, [asarray_vjp(t[i], ai) for i, ai in enumerate(a)])
    dtype = _float_dtype(a, np.float64 if isinstance(a, float) else None)
    out = np.reshape(t, np.shape(a))
    if dtype is not None and getattr(out, "dtype", None) != dtype:
        out = _as_dtype(out, dtype)
    return out


def pack_cots(ts, x):
    """Adjoint of ``asarray_vjp``: (nested) cotangents ``ts`` (None: zeros) packed into
    one array shaped and typed like ``x``."""
    if isinstance(ts, (list, tuple)):
        out = _zeros(x)
        view = out
        while len(ts) != 1 and view.ndim > 1 and view.shape[0] == 1:
            view = view[0]  # leading axes that ndmin added
        for i, ti in enumerate(ts):
            if ti is not None:
                view[i] = pack_cots(ti, view[i])
        return out
    if ts is None:
        return _zeros(x)
    return _fit_dtype(np.reshape(ts, np.shape(x)), x)


def cast_like(t, x):
    """Cast a cotangent to ``x``'s floating dtype (``x.astype``'s vjp); a cotangent
    for a non-floating value is None."""
    if t is None:
        return None
    if not np.issubdtype(np.result_type(t), np.inexact):
        return None
    dtype = _float_dtype(x, None)
    if dtype is None:
        if not isinstance(x, float):
            return None
        return np.real(t) if np.iscomplexobj(t) else t   # (a Python float)
    return _as_dtype(t, dtype)


def _integer_valued(x) -> bool:
    """An integer or boolean array or NumPy scalar (not a container, not a float)."""
    dtype = getattr(x, "dtype", None)
    return dtype is not None and np.dtype(dtype).kind in "biu"


def conj_method(x):
    """``x.conj()``: for a real array NumPy's method returns ``x`` itself."""
    return x.conj() if hasattr(x, "conj") else np.conjugate(x)


def zero_if_integer(t, x):
    """A tangent of the value ``x``: zeros shaped like ``x`` where ``x`` is an integer or
    boolean array (piecewise constant in what it was computed from), else ``t``.
    Forward code applies it where a dtype is known only at run time
    (``transforms/activity.py``: ``may_give_integers``)."""
    return np.zeros(np.shape(x)) if _integer_valued(x) else t


def none_if_integer(t, x):
    """A cotangent of the value ``x``: None (zero) where ``x`` is an integer or boolean
    array, else ``t`` (reverse code's ``zero_if_integer``)."""
    return None if _integer_valued(x) else t


def astype(x, dtype, order="K", casting="unsafe", subok=True, copy=True):
    """``x.astype(dtype, ...)`` as a function (also ``np.astype``)."""
    return np.asarray(x).astype(dtype, order=order, casting=casting, subok=subok, copy=copy)


def flatten(a, order="C"):
    """``a.flatten(order)`` as a function: always a copy."""
    return np.asarray(a).flatten(order=order)


def item(a, *args):
    """``a.item(*args)`` as a function."""
    return np.asarray(a).item(*args)


def item_index(a, args):
    """The index ``a.item(*args)`` reads, as a tuple usable with ``a[...]``."""
    shape = np.shape(a)
    if not args:
        return (0,) * len(shape)
    if len(args) == 1 and isinstance(args[0], tuple):
        return args[0]
    if len(args) == 1:
        return tuple(int(i) for i in np.unravel_index(args[0], shape))
    return tuple(args)


def dtype_of(x):
    """``x.dtype`` as a function (works on Python scalars too)."""
    dtype = getattr(x, "dtype", None)
    return np.result_type(x) if dtype is None else dtype


def math_log(x, base=None):
    """``math.log(x[, base])`` on arrays and scalars."""
    if base is None:
        return np.log(x)
    return np.log(x) / np.log(base)


def log_or_one(base):
    """``log(base)``, or 1 when there is no base (math.log's vjp divides by it)."""
    return 1.0 if base is None else np.log(base)


def or_one(base):
    """``base``, or 1 when there is none (math.log's vjp for its base)."""
    return 1.0 if base is None else base


getitem = operator.getitem


def _is_basic_index(index):
    items = index if isinstance(index, tuple) else (index,)
    for it in items:
        if it is None or it is Ellipsis or isinstance(it, slice):
            continue
        if isinstance(it, (int, np.integer)) and not isinstance(it, (bool, np.bool_)):
            continue
        return False
    return True


def _unit_ranges(index, shape):
    """(start, stop) per leading axis when ``index`` is slices of step 1 only, else None."""
    items = index if type(index) is tuple else (index,)
    if not items or len(items) > len(shape):
        return None
    out = []
    for it, n in zip(items, shape):
        if type(it) is not slice:
            return None
        a, b, step = it.indices(n)
        if step != 1:
            return None
        out.append((a, max(a, b)))
    return out


def _is_mask_index(index):
    return isinstance(index, np.ndarray) and index.dtype == np.bool_


def getitem_vjp(t, x, index):
    """Cotangent of ``x[index]`` for ``x``.

    Arrays: zeros shaped like ``x`` with ``t`` added at ``index`` (``np.add.at`` for
    integer-array indices, so repeated indices add up).  Lists and tuples: a
    container of the same kind and length, None except at the indexed entries (a
    slice gives several); dicts: the same keys, None except ``index``.
    """
    if isinstance(x, dict):
        out = dict.fromkeys(x)
        out[index] = t
        return out
    if isinstance(x, (list, tuple)):
        items = [None] * len(x)
        if isinstance(index, slice):
            for i, ti in zip(range(len(x))[index], t if t is not None else ()):
                items[i] = ti
        else:
            items[index] = t
        return _rebuild(x, items)
    if t is None:
        return None
    ranges = _unit_ranges(index, np.shape(x))
    if ranges is not None:
        # a block of x: write t there and zero only the rest (not the whole array first)
        z = np.empty(np.shape(x), dtype=_float_dtype(x, np.float64))
        z[index] = t
        for k, (a, b) in enumerate(ranges):
            lead = tuple(slice(a_, b_) for a_, b_ in ranges[:k])
            if a:
                z[lead + (slice(0, a),)] = 0
            if b < z.shape[k]:
                z[lead + (slice(b, None),)] = 0
        return z
    z = _zeros(x)
    if _is_basic_index(index) or _is_mask_index(index):
        z[index] = t
    else:
        np.add.at(z, index, t)
    return z


def setitem(x, index, v):
    """``x[index] = v`` without mutating ``x``: a new array (or container) is returned."""
    if isinstance(x, dict):
        out = dict(x)
    elif isinstance(x, list):
        out = list(x)
    else:
        out = np.array(x, copy=True)
    out[index] = v
    return out


def setitem_zero(t, index):
    """``t`` with the entries at ``index`` zeroed (None for containers): the cotangent
    of ``setitem``'s target.  Linear and idempotent, so its own vjp."""
    if t is None:
        return None
    if isinstance(t, dict):
        out = dict(t)
        out[index] = None
        return out
    if isinstance(t, (list, tuple)):
        items = list(t)
        if isinstance(index, slice):
            for i in range(len(items))[index]:
                items[i] = None
        else:
            items[index] = None
        return _rebuild(t, items)
    out = np.array(t, copy=True)
    out[index] = 0
    return out


def scatter_add(x, indices, v):
    """``np.add.at(x, indices, v)`` as a new array: ``v`` added at ``indices`` of a
    copy of ``x``, a position named several times receiving every addition (the
    frontend writes the result back, ``x[...] = scatter_add(x, i, v)``, and
    ``np.subtract.at`` as the addition of ``-v``)."""
    out = np.array(x, copy=True)      # (x's dtype, as the in-place call keeps it)
    np.add.at(out, indices, v)
    return out


def scatter_tangent(t, indices, tv, like):
    """Tangent of ``scatter_add``: ``scatter_add(t, indices, tv)`` with None for a
    zero tangent (zeros shaped like ``like``, the result)."""
    out = _zeros(like) if t is None else np.array(t, copy=True)
    if tv is not None:
        np.add.at(out, indices, tv)
    return out


def cot_or_zeros(t, like):
    """``t``, or zeros shaped like ``like`` when ``t`` is None (one output of a tuple)."""
    if t is None:
        return _zeros(like)
    return t


# ---------------------------------------------------------------------------
# Python builtins on sequences
# ---------------------------------------------------------------------------

py_sum = builtins.sum
py_max = builtins.max
py_min = builtins.min
py_len = builtins.len
py_float = builtins.float
py_int = builtins.int
py_round = builtins.round


def py_sum_vjp(t, iterable):
    """Cotangent of ``sum(iterable)`` for the iterable: ``t`` for every element (an
    array iterable gets ``t`` broadcast along its first axis)."""
    if isinstance(iterable, np.ndarray):
        return broadcast_like(t, iterable)
    return [unbroadcast(t, e) for e in iterable]


def sum_cots(ts, x):
    """Adjoint of ``py_sum_vjp``: the sum of cotangents ``ts`` (None skipped), fitted to ``x``."""
    if isinstance(ts, np.ndarray):
        return unbroadcast(np.sum(ts, axis=0), x)
    total = None
    for ti in ts:
        if ti is not None:
            total = ti if total is None else total + ti
    if total is None:
        return None
    # one term may be smaller than the sum it was part of: broadcast it up first
    return unbroadcast(np.broadcast_to(total, np.broadcast_shapes(np.shape(total),
                                                                  np.shape(x))), x)


def _chosen(ans, args):
    items = list(args[0]) if len(args) == 1 else list(args)
    for i, e in enumerate(items):
        if e is ans:
            return items, i
    for i, e in enumerate(items):
        if np.all(e == ans):
            return items, i
    raise ValueError("max/min: the result is none of the arguments")


def py_max_vjp(t, chosen, args):
    """Cotangents of Python's ``max``/``min`` for its positional arguments: ``t`` to the
    chosen element (``chosen`` is max's result), zeros elsewhere.  One iterable argument
    gets a list inside."""
    items, i = _chosen(chosen, args)
    if len(args) == 1 and isinstance(args[0], np.ndarray):
        z = _zeros(args[0])
        z[i] = t
        return [z]
    # zeros (not None) for the others: callers pick entries out of this list
    cots = [_zeros(e) if _is_float(e) else None for e in items]
    cots[i] = unbroadcast(t, items[i])
    if len(args) == 1:
        return [_rebuild(args[0], cots) if isinstance(args[0], (list, tuple)) else cots]
    return cots


def py_max_pick(ts, chosen, args):
    """Adjoint of ``py_max_vjp``: the cotangent at the chosen element."""
    items, i = _chosen(chosen, args)
    ts = ts[0] if len(args) == 1 else ts
    return None if ts is None else ts[i]


# ---------------------------------------------------------------------------
# Norms
# ---------------------------------------------------------------------------


def _norm_kind(x, ord, axis):
    """(vector or matrix, normalized axes) for np.linalg.norm's arguments."""
    nd = np.ndim(x)
    if axis is None:
        if ord is None:
            return "all", tuple(range(nd))
        return ("vector", (0,)) if nd == 1 else ("matrix", (0, 1))
    axes = _norm_axes(axis, nd)
    return ("vector" if len(axes) == 1 else "matrix"), tuple(axes)


def _two_norm(kind, ord):
    return kind == "all" or kind == "vector" and ord in (None, 2) or \
        kind == "matrix" and ord in (None, "fro")


def _norm_grad(x, ord, axis):
    """d norm / d x, shaped like ``x`` (the gradient of each norm w.r.t. its inputs)."""
    x = np.asarray(x)
    kind, axes = _norm_kind(x, ord, axis)
    if np.iscomplexobj(x):
        # the 2-norm and Frobenius norm of complex entries: d|x| = Re(conj(x) dx) / |x|,
        # whose transpose (JAX's convention) is conj(x) / |x|
        if not _two_norm(kind, ord):
            _refuse_derivative(f"the derivative of np.linalg.norm with ord={ord!r} for "
                               "complex input", "use the 2-norm or the Frobenius norm")
        nrm = np.linalg.norm(x, ord, axis, keepdims=True) if kind != "all" else \
            np.sqrt(np.sum(np.abs(x) ** 2, keepdims=True))
        return np.conj(x) / nrm
    nrm = np.linalg.norm(x, ord, axis, keepdims=True) if kind != "all" else \
        np.sqrt(np.sum(x * x, keepdims=True))
    if _two_norm(kind, ord):
        return x / nrm
    if kind == "vector":
        if ord == 1:
            return np.sign(x)
        if ord == 0:
            return np.zeros_like(x)
        if ord in (np.inf, -np.inf):
            ax = axes[0]
            a = np.abs(x)
            ext = np.max(a, axis=ax, keepdims=True) if ord > 0 else np.min(a, axis=ax,
                                                                            keepdims=True)
            return np.sign(x) * extremum_weights(a, ext, ax, True)
        p = float(ord)
        return np.sign(x) * np.abs(x) ** (p - 1) / nrm ** (p - 1)
    r, c = axes
    xm = np.moveaxis(x, (r, c), (-2, -1))
    if ord in ("nuc", 2, -2):
        u, s, vh = np.linalg.svd(xm, full_matrices=False)
        if ord == "nuc":
            gm = u @ vh
        elif ord == 2:
            gm = u[..., :, :1] @ vh[..., :1, :]
        else:
            gm = u[..., :, -1:] @ vh[..., -1:, :]
    elif ord in (1, -1):
        colsum = np.sum(np.abs(xm), axis=-2, keepdims=True)
        ext = np.max(colsum, -1, keepdims=True) if ord > 0 else np.min(colsum, -1, keepdims=True)
        gm = np.sign(xm) * extremum_weights(colsum, ext, -1, True)
    elif ord in (np.inf, -np.inf):
        rowsum = np.sum(np.abs(xm), axis=-1, keepdims=True)
        ext = np.max(rowsum, -2, keepdims=True) if ord > 0 else np.min(rowsum, -2, keepdims=True)
        gm = np.sign(xm) * extremum_weights(rowsum, ext, -2, True)
    else:
        raise UnsupportedDerivativeError(f"the derivative of np.linalg.norm with ord={ord!r}")
    return np.moveaxis(gm, (-2, -1), (r, c))


def norm_vjp(t, x, ord=None, axis=None, keepdims=False):
    """Cotangent of ``np.linalg.norm(x, ord, axis, keepdims)`` for ``x``.

    Covers every ``ord`` NumPy accepts for vectors (p-norms, 0, +-inf) and matrices
    ('fro', 'nuc', +-1, +-2, +-inf).  Ties share like JAX's max.  Linear in ``t``.
    """
    if t is None:
        return None
    _, axes = _norm_kind(x, ord, axis)
    return _fit_dtype(unreduce(t, x, axes, keepdims) * _norm_grad(x, ord, axis), x)


def norm_vjp_t(s, x, ord=None, axis=None, keepdims=False):
    """Second order: the vjp of ``norm_vjp`` w.r.t. its cotangent argument."""
    if s is None:
        return None
    _refuse_complex(x, "np.linalg.norm to second order")
    _, axes = _norm_kind(x, ord, axis)
    return np.sum(s * _norm_grad(x, ord, axis), axis=axes, keepdims=keepdims)


def norm_vjp_x(s, t, x, ord=None, axis=None, keepdims=False):
    """Second order: the vjp of ``norm_vjp`` w.r.t. ``x`` (a Hessian-vector product of
    the norm).  Implemented for 2-norms/Frobenius and piecewise-linear vector norms."""
    if s is None or t is None:
        return None
    _refuse_complex(x, "np.linalg.norm to second order")
    x = np.asarray(x)
    kind, axes = _norm_kind(x, ord, axis)
    if _two_norm(kind, ord):
        n = np.sqrt(np.sum(x * x, axis=axes, keepdims=True))
        tt = unreduce(t, x, axes, keepdims)
        return _fit_dtype(tt * s / n - x * tt * np.sum(s * x, axis=axes, keepdims=True) / n ** 3,
                          x)
    if kind == "vector" and ord in (0, 1, np.inf, -np.inf):
        return _zeros(x)
    raise UnsupportedDerivativeError(f"second derivatives of np.linalg.norm with ord={ord!r}")


# ---------------------------------------------------------------------------
# einsum
# ---------------------------------------------------------------------------


_EINSUM_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _sublist(sub):
    """An einsum sublist ([0, 1], [Ellipsis, 0]) as subscript letters ("ab", "...a")."""
    if isinstance(sub, np.ndarray):   # a sublist vmap lifted to an array
        sub = np.ravel(sub).tolist()
    # (entries vmap lifted to arrays of one element are read back)
    sub = [np.ravel(s)[0] if isinstance(s, np.ndarray) else s for s in sub]
    return "".join("..." if s is Ellipsis else _EINSUM_LETTERS[int(s)] for s in sub)


def einsum_canon(operands):
    """The string form of a whole ``np.einsum`` argument sequence: (subscripts, the
    array operands, their positions in ``operands``).  Both calling forms,
    ``einsum("ij,jk", a, b)`` and ``einsum(a, [0, 1], b, [1, 2], [0, 2])``, give the
    same plan, so every rule has one code path."""
    operands = list(operands)
    if isinstance(operands[0], str):
        return operands[0], operands[1:], list(range(1, len(operands)))
    n = len(operands) // 2
    spec = ",".join(_sublist(operands[2 * k + 1]) for k in range(n))
    if len(operands) % 2:
        spec += "->" + _sublist(operands[-1])
    return spec, operands[0:2 * n:2], list(range(0, 2 * n, 2))


def _einsum_parse(subscripts, operands):
    spec = subscripts.replace(" ", "")
    if "->" in spec:
        ins, out = spec.split("->")
    else:
        ins = spec
        letters = ins.replace("...", "").replace(",", "")
        out = ("..." if "..." in ins else "") + "".join(
            sorted(c for c in set(letters) if letters.count(c) == 1))
    ins = ins.split(",")
    if len(ins) != len(operands):
        raise ValueError("einsum: subscripts do not match the number of operands")
    return ins, out


def _letters(spec):
    return spec.replace("...", "")


# ------------------------------------------------------------------ dot, fast path
# ga = dot_grad_a(g, a, b) is defined by <g, dot(da, b)> = <ga, da> for every da, and
# gb = dot_grad_b(g, a, b) by <g, dot(a, db)> = <gb, db>.  The two are bilinear and
# their own vjps are dot / dot_grad_a / dot_grad_b again (templates/vjp.py), so any
# order of differentiation stays inside these three functions.


def dot_grad_a(t, a, b):
    """Cotangent of ``a`` in ``np.dot(a, b)``: ``g @ b.T`` for matrices."""
    if type(a) is np.ndarray and type(b) is np.ndarray and a.ndim == 2 == b.ndim:
        return unbroadcast(np.matmul(t, b.T), a)      # (the matrices' branch below)
    na, nb = np.ndim(a), np.ndim(b)
    if na == 2 and nb == 2:
        # matmul, not dot: np.dot copies a transposed operand first (4 % on the MLP)
        out = np.matmul(t, b.T)
    elif na == 2 and nb == 1:
        out = np.outer(t, b)
    elif na == 1 and nb == 2:
        out = np.dot(b, t)
    elif na == 1 and nb == 1:
        out = t * b
    else:
        axes = dot_axes(a, b)
        out = np.transpose(np.tensordot(t, b, tensordot_plan(a, b, axes, 0)),
                           tensordot_plan(a, b, axes, 1))
    return unbroadcast(out, a)


def dot_grad_b(t, a, b):
    """Cotangent of ``b`` in ``np.dot(a, b)``: ``a.T @ g`` for matrices."""
    if type(a) is np.ndarray and type(b) is np.ndarray and a.ndim == 2 == b.ndim:
        return unbroadcast(np.matmul(a.T, t), b)      # (the matrices' branch below)
    na, nb = np.ndim(a), np.ndim(b)
    if na == 2 and nb == 2:
        out = np.matmul(a.T, t)      # (see dot_grad_a)
    elif na == 2 and nb == 1:
        out = np.dot(t, a)
    elif na == 1 and nb == 2:
        out = np.outer(a, t)
    elif na == 1 and nb == 1:
        out = t * a
    else:
        axes = dot_axes(a, b)
        out = np.transpose(np.tensordot(a, t, tensordot_plan(a, b, axes, 2)),
                           tensordot_plan(a, b, axes, 3))
    return unbroadcast(out, b)


def add_cot(t, x, y, which=0):
    """Cotangent of operand ``which`` of ``x + y``: unbroadcast for arrays, the matching
    slice of the cotangent for a list or tuple concatenation."""
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        if t is None:
            return None
        n = len(x)
        part = list(t[:n]) if which == 0 else list(t[n:])
        proto = x if which == 0 else y
        return part if isinstance(proto, list) else tuple(part)
    return unbroadcast(t, x if which == 0 else y)


def add_cot_vjp(s, t, x, y, which=0):
    """add_cot is linear in its cotangent: its vjp puts s back where it came from."""
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        if s is None:
            return None
        n = len(x)
        pad = [None] * (len(y) if which == 0 else n)
        return list(s) + pad if which == 0 else pad + list(s)
    return broadcast_like(s, t)


# ---------------------------------------------------------------------------
# Forward mode (templates/jvp.py)
# ---------------------------------------------------------------------------
# A tangent None is a zero (forward mode passes None to ``ra.*`` helpers for a
# tangent it knows to be zero); helpers that take several tangents accept None, and
# the scalar 0 too, for any of them.  A tangent has its primal's shape and floating
# dtype; the tangent of a container is the same container of tangents (entries may
# be None).


def _zero_tangent(t):
    """A tangent that is zero by construction: None, or a plain scalar 0."""
    return t is None or (isinstance(t, (int, float)) and not isinstance(t, bool) and t == 0)


def _tangent_zeros(x):
    """Concrete zero tangents for the primal ``x`` (containers recursively; None for
    values without a derivative: booleans, strings, None)."""
    if isinstance(x, dict):
        return {k: _tangent_zeros(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return _rebuild(x, [_tangent_zeros(v) for v in x])
    if x is None or isinstance(x, (bool, np.bool_, str)):
        return None
    if isinstance(x, (int, float)) and not isinstance(x, np.generic):
        return 0.0
    if isinstance(x, (np.ndarray, np.generic)):
        return np.zeros(np.shape(x), dtype=_float_dtype(x, np.float64))
    return None


def _fill_tangent(t, x):
    """``t`` with its None entries replaced by zeros shaped like the matching part of ``x``."""
    if t is None:
        return _tangent_zeros(x)
    if isinstance(x, dict) and isinstance(t, dict):
        return {k: _fill_tangent(t.get(k), v) for k, v in x.items()}
    if isinstance(x, (list, tuple)) and isinstance(t, (list, tuple)):
        return _rebuild(t, [_fill_tangent(ti, xi) for ti, xi in zip(t, x)])
    return t


def tangent_like(t, like):
    """The tangent ``t`` fitted to the primal ``like``: broadcast to its shape and cast to
    its floating dtype (``t`` itself when it already fits).

    None stays None; containers are fitted entry by entry; a primal without a
    derivative (integers, booleans) gets zeros, like JAX's float0 tangents.  Forward
    mode applies it to a rule's result when a zero term was dropped from it.
    """
    if t is None or like is None:
        return None
    if isinstance(like, dict):
        return {k: tangent_like(t.get(k) if isinstance(t, dict) else t, v)
                for k, v in like.items()}
    if isinstance(like, (list, tuple)):
        items = list(t) if isinstance(t, (list, tuple, np.ndarray)) else [t] * len(like)
        return _rebuild(like, [tangent_like(ti, li) for ti, li in zip(items, like)])
    if isinstance(like, str):
        return None
    if not isinstance(like, np.generic) and isinstance(like, (bool, int, float)):
        if isinstance(like, float) and not isinstance(like, bool):
            return float(np.reshape(t, ()))
        return 0.0
    dtype = getattr(like, "dtype", None)
    if dtype is None:
        dtype = np.asarray(like).dtype
    shape = np.shape(like)
    if not np.issubdtype(dtype, np.inexact):
        return np.zeros(shape, dtype=np.float64) if shape else np.float64(0.0)
    if isinstance(t, np.ndarray) and t.shape == shape and t.dtype == dtype:
        out = t
    else:
        out = np.empty(shape, dtype=dtype)
        out[...] = np.real(t) if dtype.kind != "c" and np.iscomplexobj(t) else t
    return out[()] if isinstance(like, np.generic) else out


def tangent_like_vjp(s, t, like):
    """Adjoint of ``tangent_like(t, like)`` in ``t``: ``s`` (shaped like ``like``) summed
    back to the shape and dtype of ``t``."""
    if s is None or t is None or like is None:
        return None
    if isinstance(like, dict):
        if isinstance(t, dict):
            return {k: tangent_like_vjp(s.get(k), t.get(k), like.get(k)) for k in t}
        return sum_tangents([tangent_like_vjp(s.get(k), t, v) for k, v in like.items()])
    if isinstance(like, (list, tuple)):
        if isinstance(t, (list, tuple)):
            return _rebuild(t, [tangent_like_vjp(si, ti, li) for si, ti, li in zip(s, t, like)])
        if isinstance(t, np.ndarray) and t.ndim:
            parts = [tangent_like_vjp(si, t[i], li) for i, (si, li) in enumerate(zip(s, like))]
            return np.stack([_zeros(t[i]) if p is None else p for i, p in enumerate(parts)])
        return sum_tangents([tangent_like_vjp(si, t, li) for si, li in zip(s, like)])
    if isinstance(like, (str, bool, np.bool_)):
        return None
    if not isinstance(like, (float, np.generic, np.ndarray)) and isinstance(like, int):
        return None
    if not np.issubdtype(np.result_type(like), np.inexact):
        return None
    return unbroadcast(s, t)


def getitem_jvp(t, x, index):
    """Tangent of ``x[index]``: ``t[index]``.  For containers, an entry that carries no
    tangent (None) comes out as zeros shaped like the entry, so the result is a real
    tangent."""
    if t is None:
        return None
    if isinstance(x, dict):
        return _fill_tangent(t.get(index) if isinstance(t, dict) else None, x[index])
    if isinstance(x, (list, tuple)):
        return _fill_tangent(t[index], x[index])
    return t[index]


def setitem_jvp(t, index, tv, x):
    """Tangent of ``setitem(x, index, v)`` (a copy of ``x`` with ``v`` at ``index``) from
    the tangent ``t`` of ``x`` and ``tv`` of ``v``; either may be None (zero)."""
    if t is None and tv is None:
        return None
    if isinstance(x, dict):
        out = dict(t) if t is not None else dict.fromkeys(x)
        out[index] = tv
        return out
    if isinstance(x, list):
        out = list(t) if t is not None else [None] * len(x)
        out[index] = tv
        return out
    out = np.array(t, copy=True) if t is not None else _zeros(x)
    out[index] = 0 if tv is None else tv
    return out


def sum_tangents(ts):
    """Tangent of Python's ``sum`` over a sequence: the sum of the tangents ``ts`` (None
    entries are zeros; 0.0 when all are); an array sums over its first axis."""
    if ts is None:
        return None
    if isinstance(ts, np.ndarray):
        return np.sum(ts, axis=0)
    total = None
    for ti in ts:
        if ti is not None:
            total = ti if total is None else total + ti
    return 0.0 if total is None else total


def pad_jvp(t, pad_width, mode="constant"):
    """Tangent of ``np.pad(array, pad_width, mode, constant_values)``: the tangent padded
    the same way, with zeros for the constants (the modes whose padding copies
    elements of the array; others raise, as their vjp does)."""
    if t is None:
        return None
    if mode not in _INDEX_MODES:
        raise UnsupportedDerivativeError(f"the derivative of np.pad with mode={mode!r}")
    return np.pad(t, pad_width, mode=mode)


def norm_jvp(t, x, ord=None, axis=None, keepdims=False):
    """Tangent of ``np.linalg.norm(x, ord, axis, keepdims)`` along ``t``: the gradient of
    each norm contracted with ``t`` (every ord that ``norm_vjp`` covers)."""
    if t is None:
        return None
    _, axes = _norm_kind(x, ord, axis)
    out = np.sum(np.asarray(t) * _norm_grad(x, ord, axis), axis=axes, keepdims=keepdims)
    return _fit_dtype(np.real(out), np.real(x))   # a norm is real, as its tangent


def norm_hvp(s, t, x, ord=None, axis=None, keepdims=False):
    """Second derivative of each norm of ``x`` along ``s`` and ``t`` (both shaped like
    ``x``): ``<s, H t>`` per norm.  For the ords ``norm_vjp_x`` covers."""
    if _zero_tangent(s) or _zero_tangent(t):
        return None
    x = np.asarray(x)
    _, axes = _norm_kind(x, ord, axis)
    ones = np.ones(tuple(1 if i in axes else n for i, n in enumerate(x.shape)),
                   dtype=_float_dtype(x, np.float64))
    ht = norm_vjp_x(t, ones, x, ord, axis, True)
    return _fit_dtype(np.sum(np.asarray(s) * ht, axis=axes, keepdims=keepdims), x)


def unsupported_jvp(what, *tangents):
    """Forward-mode stand-in for a derivative astjax does not implement: None while
    every tangent is zero (None), NotImplementedError otherwise."""
    for t in tangents:
        items = t if isinstance(t, (list, tuple)) else (t,)
        if any(not _zero_tangent(ti) for ti in items):
            raise UnsupportedDerivativeError(f"astjax does not implement {what}")
    return None


# ---------------------------------------------------------------------------
# np.r_ / np.c_ (the frontend turns ``np.r_[a, b]`` into ``index_concat("r", a, b)``)
# ---------------------------------------------------------------------------


def index_concat(which, *items):
    """``np.r_[items]`` (which "r") or ``np.c_[items]`` ("c")."""
    return (np.c_ if which == "c" else np.r_)[tuple(items)]


def index_concat_list(which, items):
    return index_concat(which, *items)


def _index_concat_plan(which, items):
    """Where each element of the result comes from: the same concatenation of index
    arrays (a float item's elements numbered from its offset, anything else -1), and
    per item its (offset, shape), None for items that carry no derivative.  Every
    directive, slice and shape rule of np.r_/np.c_ then applies unchanged."""
    stand, places, off = [], [], 0
    for it in items:
        if isinstance(it, str):
            stand.append(it)
            places.append(None)
        elif _is_float(it) and not isinstance(it, slice):
            shape = np.shape(it)
            size = int(np.prod(shape))
            if isinstance(it, np.ndarray):
                stand.append(np.arange(off, off + size, dtype=np.intp).reshape(shape))
            else:
                stand.append(np.intp(off))
            places.append((off, shape))
            off += size
        else:
            stand.append(np.full(np.shape(index_concat("r", it)) if isinstance(it, slice)
                                 else np.shape(it), -1, dtype=np.intp))
            places.append(None)
    return index_concat(which, *stand), places, off


def index_concat_vjp(t, which, items):
    """Cotangents of the items of ``np.r_``/``np.c_`` (a list; None for strings, slices
    and integer items): the elements of ``t`` gathered back to where they came from."""
    items = list(items)
    if t is None:
        return [None] * len(items)
    idx, places, total = _index_concat_plan(which, items)
    flat_i = idx.ravel()
    flat_t = np.broadcast_to(t, idx.shape).ravel()
    keep = flat_i >= 0
    acc = np.zeros(total, dtype=_float_dtype(t, np.float64))
    np.add.at(acc, flat_i[keep], flat_t[keep])
    cots = []
    for it, place in zip(items, places):
        if place is None:
            cots.append(None)
            continue
        off, shape = place
        c = np.reshape(acc[off:off + int(np.prod(shape))], shape)
        cots.append(_fit_dtype(c, it) if isinstance(it, np.ndarray) else c.astype(np.float64))
    return cots


def index_concat_jvp(ts, which, items):
    """Tangent of ``np.r_``/``np.c_``: the items' tangents (None: zeros) placed where the
    items' elements went; zeros where constants (slices, integers) went."""
    items = list(items)
    ts = [None] * len(items) if ts is None else list(ts)
    if all(_zero_tangent(t) for t in ts):
        return None
    idx, places, total = _index_concat_plan(which, items)
    dtype = np.result_type(index_concat(which, *items))   # the result's own dtype
    flat = np.zeros(total + 1, dtype=dtype)   # the last slot: zero, for the -1s
    for t, place in zip(ts, places):
        if place is not None and not _zero_tangent(t):
            off, shape = place
            flat[off:off + int(np.prod(shape))] = np.ravel(np.broadcast_to(t, shape))
    return flat[np.where(idx >= 0, idx, total)]


# ---------------------------------------------------------------------------
# np.linspace / np.logspace in their endpoints
# ---------------------------------------------------------------------------


def linspace_weights(ans, num, endpoint=True, retstep=False, axis=0):
    """How far along each sample of ``np.linspace(start, stop, num, endpoint, axis=axis)``
    lies, as a constant shaped to broadcast against the samples: sample k is
    ``start * (1 - w_k) + stop * w_k``."""
    if retstep:
        raise UnsupportedDerivativeError("the derivative of np.linspace with retstep=True "
                                         "(compute the step as (stop - start) / (num - 1))")
    num = operator.index(num)
    div = (num - 1) if endpoint else num
    w = np.arange(num, dtype=np.float64) / div if div > 0 else np.zeros(num)
    nd = np.ndim(ans)
    shape = [1] * nd
    if nd:
        shape[operator.index(axis) % nd] = num
    dtype = _float_dtype(ans, np.float64)
    return np.reshape(w, shape).astype(dtype)


def uplo_t(x, UPLO="L"):
    """``x`` for UPLO="L", its matrix transpose for "U" (or True: cholesky's ``upper``):
    ``eigh(a, "U")`` is ``eigh(uplo_t(a, "U"), "L")`` (the upper triangle read as the
    lower one)."""
    if x is None:
        return None
    if UPLO is True or UPLO is np.True_ or (isinstance(UPLO, str) and UPLO.upper() == "U"):
        return np.swapaxes(x, -1, -2)
    return x


# ---------------------------------------------------------------------------
# Decompositions: svd, qr, eig (rules in templates/*.py; these pick parts and slices)
# ---------------------------------------------------------------------------


def svd_parts(t, compute_uv=True):
    """A (co)tangent of ``np.linalg.svd``'s result as three parts (U, S, Vh), None
    for absent ones: with ``compute_uv=False`` the result is S alone."""
    if t is None:
        return (None, None, None)
    if not compute_uv:
        return (None, t, None)
    return tuple(t)


def svd_pack(ts, compute_uv=True):
    """The adjoint of ``svd_parts``: three parts back to the form of svd's result."""
    if ts is None:
        return None
    if not compute_uv:
        return ts[1]
    return tuple(ts)


def svd_index(s, which):
    """Index of the leading k = len(s) columns of U (which 0), the columns after them
    (1), the leading k rows of Vh (2), the rows after them (3).  The rows and columns
    after k exist only with full_matrices=True for a non-square matrix."""
    k = np.shape(s)[-1]
    head, tail = slice(0, k), slice(k, None)
    return ((Ellipsis, slice(None), head), (Ellipsis, slice(None), tail),
            (Ellipsis, head, slice(None)), (Ellipsis, tail, slice(None)))[which]


def _qr_check(a, mode):
    m, n = np.shape(a)[-2:]
    if mode not in ("reduced", "complete", "r") or m < n or (mode == "complete" and m != n):
        raise UnsupportedDerivativeError(
            f"the derivative of np.linalg.qr(mode={mode!r}) of a {m}x{n} matrix (it exists "
            "for mode 'reduced' or 'r' with rows >= columns, as in JAX; for a wide "
            "matrix, differentiate the QR of its transpose)")


def qr_input(a, mode="reduced"):
    """``a``, once the derivative of ``np.linalg.qr(a, mode)`` is known to exist."""
    _qr_check(a, mode)
    return a


def qr_parts(t, a, mode="reduced"):
    """A (co)tangent of ``np.linalg.qr``'s result as (Q, R) parts (mode "r": R alone).
    The derivative exists for the modes that return a unique result: "reduced" and
    "r" with at least as many rows as columns, "complete" for square matrices (as JAX)."""
    _qr_check(a, mode)
    if t is None:
        return (None, None)
    if mode == "r":
        return (None, t)
    return tuple(t)


def qr_pack(ts, a, mode="reduced"):
    """The adjoint of ``qr_parts``."""
    _qr_check(a, mode)
    if ts is None:
        return None
    if mode == "r":
        return ts[1]
    return tuple(ts)


def _real_if_exact(x):
    """``x``'s real part when ``x`` is complex with every imaginary part exactly zero
    (NumPy 2.5 returns eig's and eigvals' results complex for real eigenvalues too),
    else ``x``."""
    if x is not None and np.iscomplexobj(x) and not np.any(np.imag(x)):
        return np.real(x)
    return x


def real_parts(t):
    """The real parts of a tangent's entries, None kept (eig's rules read NumPy 2.5's
    complex results of real eigenvalues as real arrays: their tangents too)."""
    if isinstance(t, (tuple, list)):
        return tuple(real_parts(x) for x in t)
    return None if t is None else np.real(t)


def eig_real(wv, w=None):
    """``np.linalg.eig``'s result when every eigenvalue is real, as real arrays (NumPy
    before 2.5 returned them so; 2.5 returns them complex, imaginary parts zero);
    complex eigenvalues have no real derivative: refused.  ``w``: the eigenvalues
    np.linalg.eigvals gave, which must come in the same order."""
    wv = (_real_if_exact(wv[0]), _real_if_exact(wv[1]))
    w = _real_if_exact(w)
    if np.iscomplexobj(wv[0]) or np.iscomplexobj(wv[1]) or np.iscomplexobj(w):
        raise UnsupportedDerivativeError(
            "the derivative of np.linalg.eig/eigvals with complex eigenvalues (astjax "
            "differentiates real-valued functions; for a symmetric matrix use np.linalg.eigh)")
    if w is not None and not np.allclose(w, wv[0], rtol=1e-8, atol=0.0):
        raise UnsupportedDerivativeError("the derivative of np.linalg.eigvals: LAPACK ordered "
                                         "the eigenvalues differently; use np.linalg.eig")
    return wv


def cross_axes(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None, which=0):
    """One axis for the cross products in np.cross's vjp: the cotangent of ``a`` is
    cross(b, g) laid along a's axis (axisa, axisb, axisc: which 0, 1, 2), of ``b``
    cross(g, a) (which 3, 4, 5).  3-vectors only (NumPy 2 deprecates 2-vectors)."""
    if axis is not None:
        axisa = axisb = axisc = axis
    if np.shape(a)[axisa] != 3 or np.shape(b)[axisb] != 3:
        raise UnsupportedDerivativeError("the derivative of np.cross of 2-vectors (deprecated "
                                         "in NumPy 2: pad them with a zero third component)")
    return (axisb, axisc, axisa, axisc, axisa, axisb)[which]


# ---------------------------------------------------------------------------
# np.select
# ---------------------------------------------------------------------------


def _select_taken(condlist):
    """Per choice, where np.select takes it (the first true condition), and where
    it takes the default (no condition true)."""
    taken, seen = [], None
    for c in condlist:
        c = np.asarray(c, dtype=bool)
        taken.append(c if seen is None else c & ~seen)
        seen = c if seen is None else seen | c
    return taken, (~seen if seen is not None else np.True_)


def select_tangent(ts, td, condlist, choicelist, default):
    """Tangent of ``np.select(condlist, choicelist, default)``: the choices' tangents
    ``ts`` (None entries: zero) and the default's ``td`` selected the same way."""
    ts = [None] * len(choicelist) if ts is None else list(ts)
    if all(_zero_tangent(t) for t in ts) and _zero_tangent(td):
        return None
    ans = np.select(condlist, choicelist, default)
    zero = np.zeros((), dtype=_float_dtype(ans, np.float64))
    out = np.select(condlist, [zero if _zero_tangent(t) else t for t in ts],
                    zero if _zero_tangent(td) else td)
    return np.broadcast_to(out, np.shape(ans)).astype(zero.dtype)


def select_cot(t, condlist, choicelist, default, which=0):
    """Cotangents of np.select's choices (which 0: a list) or default (which 1) for the
    result's cotangent ``t``."""
    g = t
    if g is None:
        return [None] * len(choicelist) if which == 0 else None
    taken, rest = _select_taken(condlist)
    if which == 1:
        return unbroadcast(np.where(rest, g, 0.0), default) if _is_float(default) else None
    return [unbroadcast(np.where(m, g, 0.0), c) if _is_float(c) else None
            for m, c in zip(taken, choicelist)]


def select_cot_t(h, condlist, choicelist, default, which=0):
    """The adjoint of ``select_cot``: choices' (which 0) or default's (1) cotangents
    selected back into the result's shape."""
    if which == 1:
        return select_tangent(None, h, condlist, choicelist, default)
    return select_tangent(h, None, condlist, choicelist, default)


# ---------------------------------------------------------------------------
# np.gradient
# ---------------------------------------------------------------------------


def _gradient_axes(f, varargs, axis):
    nd = np.ndim(f)
    axes = list(range(nd)) if axis is None else [
        operator.index(a) % nd for a in (axis if isinstance(axis, (tuple, list)) else (axis,))]
    if len(varargs) == 0:
        spacing = [()] * len(axes)
    elif len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        spacing = [(varargs[0],)] * len(axes)
    else:
        spacing = [(v,) for v in varargs]
    return axes, spacing


def _gradient_transpose(h, n, spacing, edge_order, dtype):
    """D^T h along the last axis, D the (banded) operator np.gradient applies along an
    axis of length n: its bands are read off np.gradient of five combs (each row of D
    has its non-zeros within two places of the diagonal), so every spacing and edge
    order NumPy supports is covered exactly."""
    idx = np.arange(n)
    outs = [np.gradient((idx % 5 == r).astype(dtype), *spacing, edge_order=edge_order)
            for r in range(5)]
    res = np.zeros(np.shape(h), dtype=dtype)
    for d in range(-2, 3):
        i0, i1 = builtins.max(0, -d), builtins.min(n, n - d)
        if i1 <= i0:
            continue
        rows = np.arange(i0, i1)
        coef = np.array([outs[(i + d) % 5][i] for i in rows], dtype=dtype)
        res[..., i0 + d:i1 + d] += coef * h[..., i0:i1]
    return res


def gradient_vjp(t, f, varargs=(), axis=None, edge_order=1):
    """Cotangent of ``np.gradient(f, *varargs, axis=axis, edge_order=edge_order)`` for
    ``f``: the sum over the differentiated axes of D_k^T t_k (``t``: an array for one
    axis, a tuple or list for several; None entries are zeros)."""
    axes, spacing = _gradient_axes(f, varargs, axis)
    ts = [t] if len(axes) == 1 else ([None] * len(axes) if t is None else list(t))
    dtype = _float_dtype(f, np.float64)
    total = None
    for ax, sp, tk in zip(axes, spacing, ts):
        if tk is None:
            continue
        h = np.moveaxis(np.broadcast_to(tk, np.shape(f)), ax, -1)
        part = np.moveaxis(_gradient_transpose(h, np.shape(f)[ax], sp, edge_order, dtype),
                           -1, ax)
        total = part if total is None else total + part
    return total


def gradient_list(t, f, varargs=(), axis=None, edge_order=1):
    """``np.gradient(t, *varargs, ...)`` (linear in ``t``; None: zero): the tangent of
    np.gradient, and the adjoint of ``gradient_vjp``."""
    if t is None:
        return None
    return np.gradient(np.broadcast_to(t, np.shape(f)).astype(_float_dtype(f, np.float64)),
                       *varargs, axis=axis, edge_order=edge_order)


def refuse_cotangent(what, xs):
    """The cotangent of arguments astjax does not differentiate (np.gradient's spacing):
    reverse mode only computes it when one of them is differentiated, and then this
    raises; integer arguments get None."""
    if any(_is_float(x) for x in xs):
        raise UnsupportedDerivativeError(what)
    return [None] * len(xs)


def rollaxis_perm(a, axis, start=0):
    """The permutation np.rollaxis(a, axis, start) applies (np.transpose's axes)."""
    n = np.ndim(a)
    axis = operator.index(axis) % n
    start = operator.index(start)
    start = start + n if start < 0 else start
    perm = list(range(n))
    if axis < start:
        start -= 1
    if axis != start:
        perm.remove(axis)
        perm.insert(start, axis)
    return tuple(perm)


def refuse_tangents(t, ts):
    """``t``, when every tangent in ``ts`` is zero (np.gradient's spacing arguments,
    which astjax does not differentiate; forward mode may pass concrete zeros for
    constants); raises otherwise."""
    if ts is not None and not _all_zero(ts):
        raise UnsupportedDerivativeError("the derivative of np.gradient in its spacing "
                                         "arguments")
    return t


# ---------------------------------------------------------------------------
# np.convolve / np.correlate, np.median, np.polyval
# ---------------------------------------------------------------------------


def _conv_window(a, v, mode):
    """(offset, length) of np.convolve(a, v, mode) inside the full convolution."""
    n, m = np.size(a), np.size(v)
    lo, hi = builtins.min(n, m), builtins.max(n, m)
    if mode == "full":
        return 0, n + m - 1
    if mode == "same":
        return (lo - 1) // 2, hi
    if mode == "valid":
        return lo - 1, hi - lo + 1
    raise ValueError(f"np.convolve: unknown mode {mode!r}")


def conv_full_cot(t, a, v, mode="full"):
    """A (co)tangent of np.convolve(a, v, mode) placed inside the full convolution's
    length (zeros outside the window the mode keeps)."""
    if t is None:
        return None
    off, length = _conv_window(a, v, mode)
    out = np.zeros(np.size(a) + np.size(v) - 1, dtype=_float_dtype(t, np.float64))
    out[off:off + length] = t
    return out


def conv_full_cut(t, a, v, mode="full"):
    """The adjoint of ``conv_full_cot``: the window of the full length the mode keeps."""
    if t is None:
        return None
    off, length = _conv_window(a, v, mode)
    return np.asarray(t)[off:off + length]


def median_weights(a, axis=None, keepdims=False):
    """Where np.median takes its value from: 1 at the middle element of each sorted
    slice (1/2 at each of the two middle ones for an even count), 0 elsewhere (a
    piecewise-constant mask, like jnp.median's gather)."""
    a = np.asarray(a)
    if axis is None:
        flat = a.reshape(-1)
        return median_weights(flat, 0).reshape(a.shape)
    axes = _axes(axis, a.ndim)
    moved = np.moveaxis(a, axes, tuple(range(a.ndim - len(axes), a.ndim)))
    lead = moved.shape[:a.ndim - len(axes)]
    flat = moved.reshape(lead + (-1,))
    n = flat.shape[-1]
    order = np.argsort(flat, axis=-1, kind="stable")
    w = np.zeros(flat.shape, dtype=_float_dtype(a, np.float64))
    lo, hi = (n - 1) // 2, n // 2
    share = w.dtype.type(1.0 if lo == hi else 0.5)
    for k in {lo, hi}:
        np.put_along_axis(w, order[..., k:k + 1], share, axis=-1)
    w = w.reshape(moved.shape)
    return np.moveaxis(w, tuple(range(a.ndim - len(axes), a.ndim)), axes)


def poly_powers(p):
    """The exponents of np.polyval's terms, highest first: n-1, ..., 1, 0 (a constant)."""
    n = np.shape(p)[-1]
    return np.arange(n - 1, -1, -1).astype(_float_dtype(p, np.float64))


# ---------------------------------------------------------------------------
# np.linalg.matrix_power, np.cov
# ---------------------------------------------------------------------------


def power_block(x, t, n):
    """[[x, t], [0, x]]: its n-th power holds sum_k x^k t x^(n-1-k) (the derivative of
    x^n along t) in its upper right block, so matrix_power's rules are matrix_power
    again, to any order.  Linear in ``t``; x enters twice on the diagonal."""
    if operator.index(n) < 0:
        raise UnsupportedDerivativeError("the derivative of np.linalg.matrix_power with a "
                                         "negative power (write matrix_power(inv(a), -n))")
    if _zero_tangent(x) and _zero_tangent(t):
        return None                   # (as a tangent: both parts zero)
    x = np.zeros_like(np.asarray(t)) if _zero_tangent(x) else np.asarray(x)
    t = np.zeros_like(x) if _zero_tangent(t) else np.broadcast_to(t, x.shape)
    top = np.concatenate((x, t), axis=-1)
    bottom = np.concatenate((np.zeros_like(x), x), axis=-1)
    return np.concatenate((top, bottom), axis=-2)


def power_block_index(x, which=2):
    """Index of a block of ``power_block(x, ...)``: the upper left (which 0), lower
    right (1) or upper right (2) one."""
    m = np.shape(x)[-1]
    head, tail = slice(0, m), slice(m, None)
    return (Ellipsis,) + ((head, head), (tail, tail), (head, tail))[which]


# ---------------------------------------------------------------------------
# einsum to every order: sums of einsums over a flat list of operands
# ---------------------------------------------------------------------------
# ``einsum_multi(plan, groups)`` evaluates a tree of sums of einsums over the arrays
# of ``groups`` (nested lists/tuples, flattened in order as ``plan.skeleton`` says).
# Every term is an einsum with explicit letters (no ellipsis, no broadcasting) of some
# of those arrays and constant factors (identities for diagonals, ones for letters
# summed inside one operand).  Its tangent and its cotangents are again such trees
# (``einsum_plans_j``, ``einsum_plans_t``), over the layouts (groups, tangents) and
# (cotangents, groups): so np.einsum's rules, and theirs, stay in this one primitive.

_LEAF = "leaf"


class EinsumTerm(tuple):
    """(spec, idx, consts, sizes): einsum(spec, *flat[idx], *consts); sizes: letter ->
    dimension size of every letter in spec."""
    __slots__ = ()


class EinsumPlan:
    """(tree, skeleton): tree of tuples of EinsumTerms (None: a zero result; lists:
    several results); skeleton: how ``groups`` flattens (_LEAF: one entry).  Not a
    tuple: generated code passes it around as one static value (vmap leaves it be)."""
    __slots__ = ("tree", "skeleton")

    def __init__(self, parts):
        self.tree, self.skeleton = parts

    def __iter__(self):
        return iter((self.tree, self.skeleton))

    def __repr__(self):
        return f"EinsumPlan({self.tree!r})"


def _flatten_like(x, skel, out):
    if skel == _LEAF:
        out.append(x)
        return
    for i, s in enumerate(skel):
        _flatten_like(None if x is None else x[i], s, out)


def _skeleton_of(x):
    if isinstance(x, (list, tuple)) and not (isinstance(x, tuple) and hasattr(x, "_fields")):
        return tuple(_skeleton_of(v) for v in x)
    return _LEAF


def _tree_skeleton(tree):
    """The skeleton of the result a plan tree gives."""
    if isinstance(tree, list):
        return tuple(_tree_skeleton(t) for t in tree)
    return _LEAF


def _explicit_spec(spec, arrays):
    """``spec`` with every ellipsis spelled out in letters; a dimension of 1 broadcast
    against a longer one gets a letter of its own (summed: it has size 1)."""
    ins, out = _einsum_parse(spec, arrays)
    used = set(_letters(spec.replace(",", "").replace("->", "")))
    fresh = (c for c in _EINSUM_LETTERS if c not in used)
    ells = [np.ndim(a) - len(_letters(s)) if "..." in s else 0 for s, a in zip(ins, arrays)]
    rank = builtins.max(ells + [0])
    ell = [next(fresh) for _ in range(rank)]
    bsize = [1] * rank
    for s, a, e in zip(ins, arrays, ells):
        if "..." in s:
            p = len(s.split("...")[0])
            for j, d in enumerate(np.shape(a)[p:p + e]):
                bsize[rank - e + j] = builtins.max(bsize[rank - e + j], d)
    new_ins = []
    for s, a, e in zip(ins, arrays, ells):
        if "..." not in s:
            new_ins.append(s)
            continue
        pre, post = s.split("...")
        dims = np.shape(a)[len(pre):len(pre) + e]
        mid = "".join(ell[rank - e + j] if d == bsize[rank - e + j] else next(fresh)
                      for j, d in enumerate(dims))
        new_ins.append(pre + mid + post)
    new_out = out.replace("...", "".join(ell))
    # NumPy broadcasts a named axis of size 1 too ("ij,kj" with a (k, 1) operand): such
    # an axis gets a letter of its own, so that every letter has one size and the
    # cotangent of that operand is summed back to size 1
    big = {}
    for s, a in zip(new_ins, arrays):
        for c, d in zip(s, np.shape(a)):
            if d != 1:
                big[c] = d
    new_ins = ["".join(next(fresh) if d == 1 and c in big else c
                       for c, d in zip(s, np.shape(a))) + s[np.ndim(a):]
               for s, a in zip(new_ins, arrays)]
    sizes = {}
    for s, a in zip(new_ins, arrays):
        for c, d in zip(s, np.shape(a)):
            sizes[c] = d
    return ",".join(new_ins) + "->" + new_out, sizes


def einsum_plan(operands):
    """The plan of ``np.einsum(*operands)`` (either calling form) over groups
    ``operands``: one term."""
    spec, arrays, pos = einsum_canon(operands)
    explicit, sizes = _explicit_spec(spec, arrays)
    dtype = np.result_type(*[np.asarray(a).dtype for a in arrays])
    term = EinsumTerm((explicit, tuple(pos), (), (sizes, dtype)))
    return EinsumPlan(((term,), tuple(_LEAF for _ in operands)))


def group2(a, b):
    """``(a, b)``: the groups of einsum_multi's rules (their layouts pair two trees)."""
    return (a, b)


def _split_spec(spec):
    ins, out = spec.split("->")
    return ins.split(","), out


def _cot_term(term, p, g_index, shift):
    """The term giving the cotangent of input ``p`` of ``term`` from the cotangent of
    its result (flat index ``g_index``); the other inputs' indices moved by ``shift``."""
    spec, idx, consts, (sizes, dtype) = term
    ins, out = _split_spec(spec)
    target = ins[p]
    used = set(spec) - set(",->")
    fresh = (c for c in _EINSUM_LETTERS if c not in used)
    sizes = dict(sizes)
    new_out, seen, extra_specs, extra = "", set(), [], []
    for c in target:
        if c in seen:
            d = next(fresh)
            sizes[d] = sizes[c]
            new_out += d
            extra_specs.append(c + d)
            extra.append(np.eye(sizes[c], dtype=dtype))
        else:
            seen.add(c)
            new_out += c
    others = [ins[j] for j in range(len(ins)) if j != p]
    present = set(out) | set("".join(others)) | set("".join(extra_specs))
    for c in sorted(seen - present):
        extra_specs.append(c)
        extra.append(np.ones(sizes[c], dtype=dtype))
    n_arr = len(idx)
    arr_specs = [ins[j] for j in range(n_arr) if j != p]
    const_specs = ins[n_arr:]
    new_spec = ",".join([out] + arr_specs + const_specs + extra_specs) + "->" + new_out
    new_idx = (g_index,) + tuple(idx[j] + shift for j in range(n_arr) if j != p)
    return EinsumTerm((new_spec, new_idx, tuple(consts) + tuple(extra), (sizes, dtype)))


def einsum_plans_t(plan, groups=None):
    """The plan of the cotangents of ``einsum_multi(plan, groups)`` for every entry of
    ``groups``, over the layout (cotangent of the result, groups)."""
    tree, skel = plan
    out_skel = _tree_skeleton(tree)
    leaves = []
    _flatten_like(tree, out_skel, leaves)
    n_g = len(leaves)
    count = []
    _flatten_like(None, skel, count)
    per_op = [[] for _ in count]
    for o, terms in enumerate(leaves):
        for term in terms or ():
            for p, i in enumerate(term[1]):
                per_op[i].append(_cot_term(term, p, o, n_g))

    def build(s, it):
        if s == _LEAF:
            terms = next(it)
            return tuple(terms) if terms else None
        return [build(c, it) for c in s]

    return EinsumPlan((build(skel, iter(per_op)), (out_skel, skel)))


def einsum_plans_j(plan, groups=None):
    """The plan of the tangent of ``einsum_multi(plan, groups)``, over the layout
    (groups, their tangents): each term once per array it reads, that array moved."""
    tree, skel = plan
    count = []
    _flatten_like(None, skel, count)
    n = len(count)

    def build(t):
        if isinstance(t, list):
            return [build(c) for c in t]
        if t is None:
            return None
        terms = []
        for term in t:
            spec, idx, consts, meta = term
            for p in range(len(idx)):
                moved = idx[:p] + (idx[p] + n,) + idx[p + 1:]
                terms.append(EinsumTerm((spec, moved, consts, meta)))
        return tuple(terms) if terms else None

    return EinsumPlan((build(tree), (skel, skel)))


def einsum_multi(plan, groups):
    """Evaluate a plan: for each result, the sum of its terms (a term reading a zero,
    None, entry drops out; None when every term drops)."""
    tree, skel = plan
    flat = []
    _flatten_like(groups, skel, flat)

    def run(t):
        if isinstance(t, list):
            return [run(c) for c in t]
        if t is None:
            return None
        total = None
        for spec, idx, consts, _ in t:
            ops = [flat[i] for i in idx]
            if any(_zero_tangent(o) for o in ops):
                continue
            n = len(ops) + len(consts)
            dt = np.result_type(*ops)
            if consts and dt.kind == "f":   # identity/ones factors follow the operands
                consts = [c.astype(dt, copy=False) for c in consts]
            val = np.einsum(spec, *ops, *consts, optimize="greedy" if n > 2 else False)
            total = val if total is None else total + val
        if total is None:
            # every term read a zero: a zero of the result's shape (callers use it)
            spec, _, _, (sizes, dtype) = t[0]
            total = np.zeros(tuple(sizes[c] for c in spec.split("->")[1]), dtype=dtype)
        return total

    return run(tree)


# ---------------------------------------------------------------------------
# np.quantile / np.percentile (method "linear")
# ---------------------------------------------------------------------------


def quantile_weights(a, q, axis=None, keepdims=False, method="linear"):
    """Where np.quantile(a, q, axis, method="linear") takes its value from: per q, the
    weights (1 - f, f) of the two sorted elements it interpolates between (ties: the
    stable sort's order).  Shape q.shape + a.shape, axes of a not reduced kept."""
    if method != "linear":
        raise UnsupportedDerivativeError(f"the derivative of np.quantile with method={method!r} "
                                         "(method='linear' is differentiated)")
    a = np.asarray(a)
    qs = np.asarray(q, dtype=np.float64)
    axes = tuple(range(a.ndim)) if axis is None else _axes(axis, a.ndim)
    rest = tuple(i for i in range(a.ndim) if i not in axes)
    moved = np.transpose(a, rest + axes)
    lead = moved.shape[:len(rest)]
    flat = moved.reshape(lead + (-1,))
    n = flat.shape[-1]
    order = np.argsort(flat, axis=-1, kind="stable")
    dtype = _float_dtype(a, np.float64)
    w = np.zeros(qs.shape + flat.shape, dtype=dtype)
    for k in np.ndindex(qs.shape):
        h = (n - 1) * qs[k]
        lo = int(np.floor(h))
        hi = builtins.min(lo + 1, n - 1)
        f = h - lo
        wk = np.zeros(flat.shape, dtype=dtype)
        np.put_along_axis(wk, order[..., lo:lo + 1], dtype.type(1.0 - f), axis=-1)
        if hi != lo:
            np.put_along_axis(wk, order[..., hi:hi + 1], dtype.type(f), axis=-1)
        w[k] = wk
    w = w.reshape(qs.shape + moved.shape)
    perm = np.argsort(rest + axes)
    return np.transpose(w, tuple(range(qs.ndim)) + tuple(int(p) + qs.ndim for p in perm))


def quantile_vjp(t, a, q, axis=None, keepdims=False, method="linear"):
    """Cotangent of np.quantile(a, q, ...) for ``a`` (linear in ``t``; the weights are
    piecewise constant in ``a``; ``q`` is not differentiated)."""
    if t is None:
        return None
    w = quantile_weights(a, q, axis, keepdims, method)
    nq = np.ndim(q)
    axes = tuple(range(np.ndim(a))) if axis is None else _axes(axis, np.ndim(a))
    t = np.asarray(t)
    if not keepdims:
        t = np.expand_dims(t, tuple(nq + ax for ax in axes))
    t = np.reshape(t, np.shape(t)[:nq] + tuple(1 if i in axes else d
                                             for i, d in enumerate(np.shape(a))))
    return _fit_dtype(np.sum(t * w, axis=tuple(range(nq))), a)


def quantile_jvp(t, a, q, axis=None, keepdims=False, method="linear"):
    """Tangent of np.quantile(a, q, ...) along ``t`` (the adjoint of quantile_vjp)."""
    if t is None:
        return None
    w = quantile_weights(a, q, axis, keepdims, method)
    nq = np.ndim(q)
    axes = tuple(range(np.ndim(a))) if axis is None else _axes(axis, np.ndim(a))
    out = np.sum(np.broadcast_to(t, np.shape(a)) * w, axis=tuple(nq + ax for ax in axes),
                 keepdims=keepdims)
    return _fit_dtype(out, a)


def refuse_value(what, x):
    """The cotangent of an argument astjax does not differentiate (np.quantile's q):
    reverse mode only computes it when the argument is differentiated: raises then."""
    if _is_float(x):
        _refuse_derivative(what)
    return None


def _all_zero(t):
    if _zero_tangent(t):
        return True
    if isinstance(t, (list, tuple)):
        return all(_all_zero(v) for v in t)
    return not np.any(np.asarray(t) != 0)


def refuse_tangent(t, what):
    """0.0 (a term to add) for a zero tangent; raises for a non-zero one (np.quantile's
    q, np.interp's xp)."""
    if not _all_zero(t):
        raise UnsupportedDerivativeError(what)
    return 0.0


# ---------------------------------------------------------------------------
# np.average
# ---------------------------------------------------------------------------


def _average_spread(weights, a, axis):
    """``weights`` as np.average reads them: shaped like ``a``, or 1-D along ``axis``."""
    w = np.asarray(weights)
    if w.shape != np.shape(a) and w.ndim == 1 and axis is not None and \
            not isinstance(axis, (tuple, list)):
        shape = [1] * np.ndim(a)
        shape[operator.index(axis) % np.ndim(a)] = w.shape[0]
        w = w.reshape(shape)
    return np.broadcast_to(w, np.shape(a))


def average_weights(weights, a, axis=None, returned=False):
    """The weights of np.average spread over ``a`` (ones without weights)."""
    if returned:
        raise UnsupportedDerivativeError("the derivative of np.average with returned=True "
                                         "(compute the sum of the weights separately)")
    if weights is None:
        return np.ones(np.shape(a), dtype=_float_dtype(a, np.float64))
    return _average_spread(weights, a, axis)


def average_weights_lin(t, weights, a, axis=None):
    """``average_weights`` as a linear map of the weights: a tangent of the weights
    spread over ``a`` (None: zero)."""
    if _zero_tangent(t) or weights is None:
        return None
    return _average_spread(t, a, axis)


def average_weights_t(t, weights, a, axis=None):
    """The adjoint of ``average_weights_lin``: a cotangent shaped like ``a`` summed
    back to the weights' shape."""
    if t is None or weights is None:
        return None
    w = np.asarray(weights)
    if w.shape != np.shape(a) and w.ndim == 1 and axis is not None and \
            not isinstance(axis, (tuple, list)):
        ax = operator.index(axis) % np.ndim(a)
        t = np.sum(t, axis=tuple(i for i in range(np.ndim(a)) if i != ax))
    return unbroadcast(t, weights)


def average_lane(a, axis=None, weights=None, returned=False, keepdims=False):
    """np.average with every argument positional (keepdims is keyword-only in NumPy)."""
    return np.average(a, axis, weights, returned, keepdims=keepdims)


def cumulative_index(x, axis=None, include_initial=False):
    """Index of a reversed running sum giving np.cumulative_sum's cotangent: everything,
    or (include_initial) all but the first entry along the axis."""
    ax = 0 if axis is None else operator.index(axis) % builtins.max(np.ndim(x), 1)
    return (slice(None),) * ax + (slice(1 if include_initial else 0, None),)


def cumulative_sum_lane(x, axis=None, dtype=None, out=None, include_initial=False):
    """np.cumulative_sum with every argument positional (its options are keyword-only)."""
    return np.cumulative_sum(x, axis=axis, dtype=dtype, include_initial=include_initial)


# ---------------------------------------------------------------------------
# np.linalg.multi_dot (an einsum chain), np.ediff1d
# ---------------------------------------------------------------------------


def multi_dot_plan(arrays):
    """np.linalg.multi_dot(arrays) as one einsum chain "ab,bc,cd->ad" (a 1-D first or
    last array drops its outer letter), so its rules are einsum_multi's."""
    arrays = list(arrays)
    n = len(arrays)
    letters = _EINSUM_LETTERS[:n + 1]
    specs = [letters[i:i + 2] for i in range(n)]
    first_vec, last_vec = np.ndim(arrays[0]) == 1, np.ndim(arrays[-1]) == 1
    if first_vec:
        specs[0] = specs[0][1:]
    if last_vec:
        specs[-1] = specs[-1][:-1]
    out = ("" if first_vec else letters[0]) + ("" if last_vec else letters[n])
    sizes = {}
    for s, a in zip(specs, arrays):
        for c, d in zip(s, np.shape(a)):
            sizes[c] = d
    dtype = np.result_type(*[np.asarray(a).dtype for a in arrays])
    term = EinsumTerm((",".join(specs) + "->" + out, tuple(range(n)), (), (sizes, dtype)))
    return EinsumPlan(((term,), tuple(_LEAF for _ in arrays)))


def ediff1d_index(ary, to_end=None, to_begin=None, which=0):
    """Index of np.ediff1d's result taken by to_begin (which 0), the differences (1),
    or to_end (2)."""
    nb = 0 if to_begin is None else int(np.size(to_begin))
    nd = builtins.max(int(np.size(ary)) - 1, 0)
    return (slice(0, nb), slice(nb, nb + nd), slice(nb + nd, None))[which]


def tangent_where(t, x):
    """A tangent for an optional argument ``x``: None when ``x`` is absent (None), zeros
    shaped like ``x`` for a zero tangent, else ``t``."""
    if x is None:
        return None
    if _zero_tangent(t):
        return _zeros(x)
    if isinstance(t, (list, tuple)):   # a list argument's tangents (None: zero)
        return pack_cots(t, np.zeros(np.shape(x)))
    return t


def ediff1d_lin(t, t_end, t_begin, ary, to_end=None, to_begin=None):
    """np.ediff1d of tangents (None: zero; an absent to_end/to_begin stays absent):
    np.ediff1d is linear in all three."""
    if _zero_tangent(t) and _zero_tangent(t_end) and _zero_tangent(t_begin):
        return None
    return np.ediff1d(_zeros(ary) if _zero_tangent(t) else t, tangent_where(t_end, to_end),
                      tangent_where(t_begin, to_begin))


# ---------------------------------------------------------------------------
# np.cov (no y, no weights)
# ---------------------------------------------------------------------------


def cov_rows(m, rowvar=True):
    """The observations np.cov works on: one variable per row (None: zero)."""
    if m is None:
        return None
    x = np.atleast_2d(m)
    if not rowvar and x.shape[0] != 1:
        x = x.T
    return x


def cov_rows_t(t, m, rowvar=True):
    """The adjoint of ``cov_rows``: rows back to ``m``'s layout."""
    if t is None:
        return None
    t = np.asarray(t)
    if not rowvar and np.atleast_2d(m).shape[0] != 1:
        t = t.T
    return _fit_dtype(np.reshape(t, np.shape(m)), m)


def cov_scale(x, y=None, bias=False, ddof=None, fweights=None, aweights=None):
    """1 / (N - ddof) of np.cov; its derivative is implemented without y and weights."""
    if y is not None or fweights is not None or aweights is not None:
        _refuse_derivative("the derivative of np.cov or np.corrcoef with y, fweights or "
                           "aweights", "stack the variables into the first argument")
    n = np.shape(x)[-1]
    d = (0 if bias else 1) if ddof is None else ddof
    with np.errstate(divide="ignore"):   # (no degree of freedom: inf, as NumPy's cov)
        return float(np.divide(1.0, max(n - d, 0)))


def reduced_shape_of(xc):
    """The (k, k) shape of np.cov's result for k variables (np.cov squeezes it)."""
    k = np.shape(xc)[0]
    return (k, k)


# ---------------------------------------------------------------------------
# np.interp: linear in fp (hat functions of x), piecewise linear in x
# ---------------------------------------------------------------------------


def _interp_check(period):
    if period is not None:
        raise UnsupportedDerivativeError("the derivative of np.interp with period")


def interp_basis(x, xp, left=None, right=None, period=None):
    """The hat functions of np.interp: B[..., k] = np.interp(x, xp, e_k) (zero outside
    [xp[0], xp[-1]] where left/right give the value), so np.interp(x, xp, fp) is
    sum_k B[..., k] fp[k] (+ left/right where they apply)."""
    _interp_check(period)
    xp = np.asarray(xp)
    n = xp.shape[0]
    eye = np.eye(n)
    lo = None if left is None else 0.0
    hi = None if right is None else 0.0
    out = np.stack([np.interp(x, xp, eye[k], lo, hi) for k in range(n)], axis=-1)
    return out.astype(_float_dtype(x, np.float64), copy=False)


def interp_slopes(x, xp, left=None, right=None, period=None):
    """d B / d x: piecewise constant (at a knot, the interval to its right, as
    jnp.interp; zero outside [xp[0], xp[-1]])."""
    _interp_check(period)
    x0 = x
    xp = np.asarray(xp, dtype=np.float64)
    n = xp.shape[0]
    x = np.asarray(x, dtype=np.float64)
    i = np.clip(np.searchsorted(xp, x, side="right"), 1, n - 1)
    width = xp[i] - xp[i - 1]
    inside = (x >= xp[0]) & (x <= xp[-1])
    s = np.zeros(x.shape + (n,))
    slope = np.where(inside, 1.0 / width, 0.0)
    np.put_along_axis(s, (i - 1)[..., None], -slope[..., None], axis=-1)
    np.put_along_axis(s, i[..., None], slope[..., None], axis=-1)
    return s.astype(_float_dtype(x0, np.float64), copy=False)


def interp_outside(x, xp, which=0):
    """Where np.interp's ``left`` (which 0: x < xp[0]) or ``right`` (1: x > xp[-1])
    gives the value (a constant mask)."""
    xp = np.asarray(xp)
    x = np.asarray(x)
    return (x < xp[0]) if which == 0 else (x > xp[-1])
