"""``astjax.random``: JAX's explicit-key random numbers, bit for bit, in NumPy.

A key is what ``jax.random.PRNGKey`` returns: a ``uint32`` array of shape ``(2,)``
(``key(seed)`` returns the same raw array: astjax has no typed key arrays).  Every
sampler hashes a counter with the threefry2x32 block cipher under the key, exactly as
JAX 0.10 does with its defaults (``jax_threefry_partitionable=True``), so the same
key gives the same bits as ``jax.random`` for every function and shape.  The samplers
that go through a transcendental function use ``astjax.xlamath``, XLA's CPU ``log``,
``log1p``, ``erf_inv``, ``erf`` and ``pow`` reproduced operation for operation, so
``normal``, ``exponential``, ``truncated_normal`` and ``multivariate_normal`` (its
Cholesky factor from SciPy's LAPACK, which jaxlib calls, when SciPy is installed) are
identical too, and so is ``gamma``: XLA computes its ``1/3 * rsqrt(d)`` with the CPU's
approximate rsqrt instruction and a Newton step, which ``xlamath.rsqrt`` runs as
compiled C; without a C compiler (or off x86) it falls back to ``1 / sqrt(d)``, and a
few percent of float32 samples then differ from JAX's by an ulp.  float16 is identical
whatever the CPU's rsqrt estimate: XLA computes half precision one operation at a time,
each rounded (no fused multiply-add; x86 without AVX-512 FP16, where it is widened to
float32), its transcendental functions in float32, and its rsqrt rounded to float16
is the correctly rounded one.

Large draws (``bits``, ``split``, ``uniform``, ``normal``, ``exponential``) run as one
compiled C kernel (``astjax/kernels/threefry.py``) with the same bits; ``USE_KERNEL =
False`` keeps everything in NumPy.

Default dtypes are JAX's (``float32``, ``int32``, ``uint32``); ``float64``/``int64``
give what JAX gives with ``jax_enable_x64``.

Inside transformed code each sampler is a primitive (``astjax/primitives.py``): no
derivative flows into a key, reparameterized samples (``mu + sigma * normal(k, s)``)
differentiate in their parameters (``uniform``'s bounds, ``truncated_normal``'s,
``gamma``'s shape by implicit reparameterization as JAX's ``random_gamma_grad``,
``multivariate_normal``'s mean and cov through the Cholesky factor), and ``vmap`` over
a batch of keys runs the cipher once on all of them (the ``_b`` entry points take keys
of shape ``(2, *batch)`` and put the batch axes last).
"""
from __future__ import annotations

import importlib
import math
from collections.abc import Sequence

import numpy as np

from astjax.xlamath import erf, erf_inv, fma, log, log1p, power, rsqrt
from astjax.errors import ArgumentError

__all__ = ["key", "PRNGKey", "key_data", "wrap_key_data", "split", "fold_in", "bits",
           "uniform", "normal", "bernoulli", "categorical", "randint", "permutation",
           "choice", "truncated_normal", "exponential", "gamma", "multivariate_normal",
           "gamma_grad"]

_U32 = np.uint32
_UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
_ROT = ((13, 15, 26, 6), (17, 29, 16, 24))


# ------------------------------------------------------------------ the cipher

def threefry2x32(k0, k1, x0, x1):
    """The Threefry-2x32 hash (20 rounds) of counters ``(x0, x1)`` under key ``(k0, k1)``.

    All four operands are ``uint32`` arrays that broadcast together; the rounds run in
    place on two buffers (uint32 arithmetic wraps, as the cipher wants)."""
    with np.errstate(over="ignore"):
        k0, k1 = np.asarray(k0, _U32), np.asarray(k1, _U32)
        ks = (k0, k1, k0 ^ k1 ^ _U32(0x1BD11BDA))
        a = np.asarray(x0, _U32) + ks[0]
        b = np.asarray(x1, _U32) + ks[1]
        a, b = np.broadcast_arrays(a, b)
        a, b = a.copy(), b.copy()
        tmp = np.empty_like(b)
        for i in range(5):
            for r in _ROT[i % 2]:
                a += b
                np.left_shift(b, _U32(r), out=tmp)
                b >>= _U32(32 - r)
                b |= tmp
                b ^= a
            a += ks[(i + 1) % 3]
            b += ks[(i + 2) % 3] + _U32(i + 1)
        return a, b


def _iota_2x32(shape, nb):
    """The row-major index of every element of ``shape`` as (high, low) ``uint32`` words,
    with ``nb`` trailing axes of length 1 for the batch of keys."""
    n = math.prod(shape)
    idx = np.arange(n, dtype=np.uint64).reshape(tuple(shape) + (1,) * nb)
    return (idx >> np.uint64(32)).astype(_U32), idx.astype(_U32)


# ------------------------------------------------------------------ keys

def _seed_key(seed, name):
    if hasattr(seed, "shape") and np.shape(seed) != ():
        raise TypeError(f"{name} accepts a scalar seed, but was given an array of shape "
                        f"{np.shape(seed)} != (). Use astjax.vmap for batching")
    if isinstance(seed, (bool, np.bool_)) or not (
            isinstance(seed, (int, np.integer)) or
            (isinstance(seed, np.ndarray) and seed.dtype.kind in "iu")):
        raise TypeError(f"{name}: the seed must be an integer, got {seed!r}")
    # JAX (32-bit mode) keeps the low 32 bits of the seed: key = [0, seed mod 2**32]
    low = int(np.int64(int(seed))) & 0xFFFFFFFF
    return np.array([0, low], dtype=_U32)


def PRNGKey(seed):  # noqa: N802  (JAX's name)
    """A key from an integer seed: ``uint32[2]``, as ``jax.random.PRNGKey``."""
    return _seed_key(seed, "PRNGKey")


def key(seed):
    """A key from an integer seed (the same raw ``uint32[2]`` as ``PRNGKey``)."""
    return _seed_key(seed, "key")


def key_data(keys):
    """The ``uint32`` data of a key or an array of keys (keys are raw data here)."""
    return _check_keys(keys, "key_data", batched=True)


def wrap_key_data(key_bits_array):
    """A key array from its ``uint32`` data (trailing axis of length 2)."""
    return _check_keys(key_bits_array, "wrap_key_data", batched=True)


def _check_keys(k, name, batched=False):
    arr = np.asarray(k)
    if arr.dtype != _U32 or arr.ndim == 0 or arr.shape[-1] != 2 or (
            not batched and arr.shape != (2,)):
        what = "a key array (uint32, trailing axis 2)" if batched else "a single key"
        hint = "" if batched else (" (to sample with a batch of keys, use "
                                   "astjax.vmap over them)" if arr.ndim > 1 else "")
        raise ArgumentError(f"{name}: expected {what} as made by astjax.random.key or "
                            f"split, got an array of shape {arr.shape} and dtype "
                            f"{arr.dtype}{hint}")
    return arr


def _key(k, name):
    """A single key as ``(2,)`` data for the ``_b`` implementations."""
    return _check_keys(k, name)


def _nb(k):
    return k.ndim - 1


def _to_bkey(k):
    """A key inside a batching rule: the batch is its trailing axis (a key shared by
    every example arrives without one)."""
    k = np.asarray(k, _U32)
    return k[:, None] if k.ndim == 1 else k


# Large draws run the cipher (and the float samplers built on it) as one compiled C
# kernel, bit-identical to the NumPy code below (astjax/kernels/threefry.py); False
# keeps everything in NumPy (the tests compare the two).
USE_KERNEL = True


def _kernel_for(shape, k):
    """The kernel module when it should draw ``shape`` (only in astjax itself: a copy of
    this module in a standalone ``astjax gen`` output stays NumPy-only)."""
    if not USE_KERNEL or __name__ != "astjax.random":
        return None
    threefry = importlib.import_module("astjax.kernels.threefry")
    return threefry if threefry.wanted(shape, k) else None


def _hash_b(k, shape):
    """Both cipher words for every counter of ``shape`` under keys ``(2, *kb)``."""
    kern = _kernel_for(shape, k)
    if kern is not None:
        return kern.hash_words(k, shape)
    hi, lo = _iota_2x32(shape, _nb(k))
    return threefry2x32(k[0], k[1], hi, lo)


def _split_b(k, shape):
    """``split`` for keys ``(2, *kb)``: ``(*shape, 2, *kb)``."""
    a, b = _hash_b(k, shape)
    return np.stack([a, b], axis=len(shape))


def _num_shape(num):
    shape = tuple(num) if isinstance(num, Sequence) else (num,)
    return tuple(int(n) for n in shape)


def split(key, num=2):
    """``num`` (an int or a shape) new keys: ``uint32[*shape, 2]``."""
    return _split_b(_key(key, "split"), _num_shape(num))


def _fold_in_b(k, data):
    data = _as_u32(data)
    a, b = threefry2x32(k[0], k[1], np.zeros_like(data), data)
    return np.stack([a, b], axis=0)


def _as_u32(data):
    if isinstance(data, (int, np.integer)) or (isinstance(data, np.ndarray) and data.ndim == 0
                                               and data.dtype.kind in "iu"):
        return np.asarray(int(data), dtype=_U32) if isinstance(data, int) else \
            np.asarray(data).astype(_U32)
    data = np.asarray(data)
    if data.dtype.kind not in "iub":
        raise TypeError(f"fold_in: data must be an integer, got dtype {data.dtype}")
    return data.astype(_U32)


def fold_in(key, data):
    """A new key from ``key`` and a 32-bit integer ``data``."""
    if np.ndim(data):
        raise TypeError("fold_in accepts a scalar, but was given an array of shape "
                        f"{np.shape(data)} != (). Use astjax.vmap for batching.")
    return _fold_in_b(_key(key, "fold_in"), data)


# ------------------------------------------------------------------ bits

def _shape(shape, name):
    if shape is None:
        return None
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    try:
        return tuple(int(d) for d in shape)
    except TypeError:
        raise TypeError(f"{name}: shape must be a tuple of integers, got {shape!r}") \
            from None


def _bits_b(k, width, shape):
    """Random unsigned integers of ``width`` bits: ``(*shape, *kb)``."""
    if width <= 32:
        kern = _kernel_for(shape, k)
        if kern is not None:
            out = kern.bits32(k, shape)
            return out if width == 32 else out.astype(_UINT[width])
    a, b = _hash_b(k, shape)
    if width == 64:
        return (a.astype(np.uint64) << np.uint64(32)) | b.astype(np.uint64)
    out = a ^ b
    return out if width == 32 else out.astype(_UINT[width])


def _dtype(dtype, default, kinds, name):
    dt = np.dtype(default if dtype is None else dtype)
    if dt.kind not in kinds:
        want = {"u": "an unsigned int", "f": "a float", "iu": "an int"}[kinds]
        raise ValueError(f"dtype argument to `{name}` must be {want} dtype, got {dt}")
    return dt


def bits(key, shape=(), dtype=None):
    """Uniform random bits: unsigned integers of ``dtype`` (default ``uint32``)."""
    dt = _dtype(dtype, np.uint32, "u", "bits")
    return _bits_b(_key(key, "bits"), dt.itemsize * 8, _shape(shape, "bits"))


# ------------------------------------------------------------------ floats

def _float_param(v, dt):
    return np.asarray(v).astype(dt, copy=False)


def _unit_b(k, shape, dt):
    """Floats in [0, 1) from the top mantissa bits, as JAX builds them."""
    info = np.finfo(dt)
    nbits, nmant = info.bits, info.nmant
    if nbits not in (16, 32, 64):
        raise TypeError(f"uniform only accepts 16-, 32- or 64-bit floats, got {dt}")
    udt = _UINT[nbits]
    raw = _bits_b(k, nbits, shape)
    one = np.array(1.0, dt).view(udt)
    mant = (raw >> udt(nbits - nmant)) | one
    return mant.view(dt) - dt.type(1.0)


def _fused(name, k, shape, dt, minval=0.0, maxval=1.0):
    """The compiled kernel's draw for scalar bounds and float32/float64, else None."""
    if dt not in (np.float32, np.float64) or np.ndim(minval) or np.ndim(maxval):
        return None
    kern = _kernel_for(shape, k)
    if kern is None:
        return None
    return kern.sample(name, k, shape, dt, float(_float_param(minval, dt)),
                       float(_float_param(maxval, dt)))


def _uniform_b(k, shape, dt, minval, maxval):
    out = _fused("uniform", k, shape, dt, minval, maxval)
    if out is not None:
        return out
    minval = _float_param(minval, dt)
    maxval = _float_param(maxval, dt)
    floats = _unit_b(k, shape, dt)
    return np.maximum(minval, _fma(floats, maxval - minval, minval))


def _fma(a, b, c):
    """``a * b + c`` as XLA's CPU code computes it: contracted into one fused
    multiply-add (rounded once) in float32 and float64; in half precision, which x86
    without AVX-512 FP16 computes one operation at a time (each widened to float32 and
    rounded back), a rounded product then a rounded sum."""
    dt = np.result_type(a, b, c)
    if dt.itemsize < 4:
        return np.asarray(a, dt) * np.asarray(b, dt) + np.asarray(c, dt)
    return fma(a, b, c)


def uniform(key, shape=(), dtype=None, minval=0.0, maxval=1.0):
    """Uniform floats in ``[minval, maxval)`` (default ``float32``)."""
    dt = _dtype(dtype, np.float32, "f", "uniform")
    return _uniform_b(_key(key, "uniform"), _shape(shape, "uniform"), dt, minval, maxval)


def _erf_inv(x):
    return erf_inv(x)


def _normal_b(k, shape, dt):
    lo = np.nextafter(np.array(-1.0, dt), np.array(0.0, dt))
    out = _fused("normal", k, shape, dt, lo, 1.0)
    if out is not None:
        return out
    u = _uniform_b(k, shape, dt, lo, np.array(1.0, dt))
    return dt.type(math.sqrt(2)) * _erf_inv(u)


def normal(key, shape=(), dtype=None):
    """Standard normal floats (default ``float32``)."""
    dt = _dtype(dtype, np.float32, "f", "normal")
    return _normal_b(_key(key, "normal"), _shape(shape, "normal"), dt)


def _exponential_b(k, shape, dt):
    out = _fused("exponential", k, shape, dt)
    if out is not None:
        return out
    u = _uniform_b(k, shape, dt, 0.0, 1.0)
    return -log1p(-u)


def exponential(key, shape=(), dtype=None):
    """Exponential(1) floats (default ``float32``)."""
    dt = _dtype(dtype, np.float32, "f", "exponential")
    return _exponential_b(_key(key, "exponential"), _shape(shape, "exponential"), dt)


def _broadcast_shapes(name, shape, *param_shapes):
    try:
        out = np.broadcast_shapes(tuple(shape), *param_shapes)
    except ValueError:
        out = None
    if out != tuple(shape):
        raise ValueError(f"{name} parameter shapes must be broadcast-compatible with shape "
                         f"argument, and the result of broadcasting the shapes must equal "
                         f"the shape argument, but got result {out} for shape argument "
                         f"{tuple(shape)}.")


def _erf(x):
    x = np.asarray(x)
    return erf(x).astype(x.dtype if x.dtype.kind == "f" else np.float64)


def _truncated_normal_b(k, lower, upper, shape, dt):
    sqrt2 = dt.type(math.sqrt(2))
    lower = _float_param(lower, dt)
    upper = _float_param(upper, dt)
    a = _erf(lower / sqrt2)
    b = _erf(upper / sqrt2)
    u = _uniform_b(k, shape, dt, a, b)
    out = sqrt2 * _erf_inv(u)
    return np.clip(out, np.nextafter(lower, dt.type(np.inf)),
                   np.nextafter(upper, dt.type(-np.inf))).astype(dt, copy=False)


def truncated_normal(key, lower, upper, shape=None, dtype=None):
    """Standard normal floats truncated to ``(lower, upper)``."""
    dt = _dtype(dtype, np.float32, "f", "truncated_normal")
    shape = _shape(shape, "truncated_normal")
    if shape is None:
        shape = np.broadcast_shapes(np.shape(lower), np.shape(upper))
    else:
        _broadcast_shapes("truncated_normal", shape, np.shape(lower), np.shape(upper))
    return _truncated_normal_b(_key(key, "truncated_normal"), lower, upper, shape, dt)


# ------------------------------------------------------------------ discrete

def _p_dtype(p):
    """JAX's dtype for a probability: float32 for Python floats, the array's own else."""
    if isinstance(p, np.ndarray) or isinstance(p, np.floating):
        dt = np.asarray(p).dtype
        if dt.kind != "f":
            raise TypeError(f"bernoulli probability `p` must have a floating dtype, "
                            f"got {dt}.")
        return dt
    arr = np.asarray(p)
    if arr.dtype.kind not in "f":
        raise TypeError(f"bernoulli probability `p` must have a floating dtype, got "
                        f"{arr.dtype}.")
    return np.dtype(np.float32)


def _bernoulli_b(k, p, shape, mode, dt):
    p = _float_param(p, dt)
    if mode == "high":
        u = _uniform_b(k, (2,) + tuple(shape), dt, 0.0, 1.0)
        u1, u2 = u[0], u[1] * dt.type(2.0 ** -np.finfo(dt).nmant)
        return u2 < p - u1
    return _uniform_b(k, shape, dt, 0.0, 1.0) < p


def bernoulli(key, p=0.5, shape=None, mode="low"):
    """Booleans that are True with probability ``p``."""
    if mode not in ("high", "low"):
        raise ValueError(f"got mode={mode!r}, expected 'high' or 'low'")
    dt = _p_dtype(p)
    shape = _shape(shape, "bernoulli")
    if shape is None:
        shape = np.shape(p)
    else:
        _broadcast_shapes("bernoulli", shape, np.shape(p))
    return _bernoulli_b(_key(key, "bernoulli"), p, shape, mode, dt)


def _int_dtype(dtype, name):
    dt = np.dtype(np.int32 if dtype is None else dtype)
    if dt.kind not in "iu":
        raise TypeError(f"{name} only accepts integer dtypes, got {dt}")
    return dt


def _clip_int(val, dt):
    """``val`` (integers) converted to ``dt``, clipped to its range instead of wrapping."""
    info = np.iinfo(dt)
    val = np.asarray(val)
    if val.dtype.kind not in "iu":
        val = val.astype(np.int64)
    lo = max(int(info.min), int(np.iinfo(val.dtype).min))
    hi = min(int(info.max), int(np.iinfo(val.dtype).max))
    return np.clip(val, val.dtype.type(lo), val.dtype.type(hi)).astype(dt)


def _randint_b(k, shape, minval, maxval, dt):
    minval = np.asarray(minval)
    maxval = np.asarray(maxval)
    if minval.dtype.kind not in "iu":
        minval = minval.astype(np.int64)
    if maxval.dtype.kind not in "iu":
        maxval = maxval.astype(np.int64)
    top = np.asarray(_clip_int(np.array(np.iinfo(dt).max, dt), maxval.dtype))
    out_of_range = maxval > top
    lo = _clip_int(minval, dt)
    hi = _clip_int(maxval, dt)
    nbits = np.iinfo(dt).bits
    keys = _split_b(k, (2,))
    higher = _bits_b(keys[0], nbits, shape)
    lower = _bits_b(keys[1], nbits, shape)
    udt = _UINT[nbits]
    with np.errstate(over="ignore"):
        span = (hi - lo).astype(udt)
        span = np.where(hi <= lo, udt(1), span)
        span = np.where(out_of_range & (hi > lo), span + udt(1), span)
        safe = np.where(span == 0, udt(1), span)   # a zero span wraps: no remainder
        mult = np.where(span == 0, udt(0), udt(2 ** (nbits // 2)) % safe)
        mult = np.where(span == 0, udt(0), (mult * mult) % safe)
        rem_hi = np.where(span == 0, higher, higher % safe)
        rem_lo = np.where(span == 0, lower, lower % safe)
        offset = rem_hi * mult + rem_lo
        offset = np.where(span == 0, offset, offset % safe)
        return (lo + offset.astype(dt)).astype(dt)


def randint(key, shape, minval, maxval, dtype=None):
    """Uniform integers in ``[minval, maxval)`` (default ``int32``)."""
    dt = _int_dtype(dtype, "randint")
    shape = _shape(shape, "randint")
    _broadcast_shapes("randint", shape, np.shape(minval), np.shape(maxval))
    k = _key(key, "randint")
    return _randint_any(k, shape, minval, maxval, dt)


def _randint_any(k, shape, minval, maxval, dt):
    info = np.iinfo(dt)
    if info.bits < 32:   # sampled in 32 bits, as JAX does, then cast
        lo = np.clip(np.asarray(minval).astype(np.int32), int(info.min), int(info.max))
        hi = np.clip(np.asarray(maxval).astype(np.int32), int(info.min),
                     int(info.max) + 1)
        return _randint_b(k, shape, lo, hi, np.dtype(np.int32)).astype(dt)
    return _randint_b(k, shape, minval, maxval, dt)


def _shuffle_b(k, x, axis):
    """JAX's shuffle: ``ceil(3 log n / log(2**32 - 1))`` stable sorts by random keys."""
    nb = _nb(k)
    size = math.prod(x.shape[:x.ndim - nb]) if nb else x.size
    rounds = int(np.ceil(3 * np.log(max(1, size)) / np.log(np.iinfo(np.uint32).max)))
    example_shape = x.shape[:x.ndim - nb]
    for _ in range(rounds):
        pair = _split_b(k, (2,))
        k, sub = pair[0], pair[1]
        sort_keys = _bits_b(sub, 32, example_shape)
        sort_keys = np.broadcast_to(sort_keys, np.broadcast_shapes(sort_keys.shape,
                                                                   x.shape))
        x = np.broadcast_to(x, sort_keys.shape)
        order = np.argsort(sort_keys, axis=axis, kind="stable")
        x = np.take_along_axis(x, order, axis=axis)
    return x


def _permutation_b(k, x, axis, independent, nb):
    x = np.asarray(x)
    if x.ndim - nb == 0:
        return _shuffle_b(k, np.arange(int(x), dtype=np.int32), 0) if nb == 0 else None
    if independent or x.ndim - nb == 1:
        return _shuffle_b(k, x, axis)
    ind = _shuffle_b(k, np.arange(x.shape[axis], dtype=np.int32).reshape((-1,) + (1,) * nb), 0)
    return _take_b(x, ind, axis, nb)


def _take_b(x, ind, axis, nb):
    """``np.take(x, ind, axis)`` per example: ``ind`` is ``(m, *kb)``, the batch last."""
    if nb == 0:
        return np.take(x, ind, axis=axis)
    # move the taken axis first, index it per batch lane with take_along_axis
    moved = np.moveaxis(x, axis, 0)
    idx = ind.reshape(ind.shape[:1] + (1,) * (moved.ndim - 1 - nb) + ind.shape[1:])
    out = np.take_along_axis(moved, idx, axis=0)
    return np.moveaxis(out, 0, axis)


def _axis(axis, ndim, name):
    if not -ndim <= axis < ndim:
        raise ValueError(f"{name}: axis {axis} is out of bounds for an array of "
                         f"dimension {ndim}")
    return axis % ndim


def permutation(key, x, axis=0, independent=False):
    """A random permutation of ``range(x)`` (an int) or of ``x`` along ``axis``."""
    k = _key(key, "permutation")
    if not np.ndim(x):
        if np.asarray(x).dtype.kind not in "iu":
            raise TypeError("x must be an integer or at least 1-dimensional")
        return _shuffle_b(k, np.arange(int(x), dtype=np.int32), 0)
    x = np.asarray(x)
    axis = _axis(axis, x.ndim, "permutation")
    if independent or x.ndim == 1:
        return _shuffle_b(k, x, axis)
    ind = _shuffle_b(k, np.arange(x.shape[axis], dtype=np.int32), 0)
    return np.take(x, ind, axis=axis)


def _gumbel_b(k, shape, dt):
    tiny = np.finfo(dt).tiny
    u = _uniform_b(k, shape, dt, tiny, 1.0)
    return -log(-log(u))


def _top_k_indices(x, kk):
    """Indices of the ``kk`` largest entries along the last axis, ties to the lower index
    (``lax.top_k``)."""
    order = np.argsort(-x, axis=-1, kind="stable")
    return order[..., :kk]


def choice(key, a, shape=(), replace=True, p=None, axis=0, mode=None):
    """A random sample of ``a`` (an array, or ``arange(a)`` for an int)."""
    k = _key(key, "choice")
    if not isinstance(shape, Sequence):
        raise TypeError("shape argument of astjax.random.choice must be a sequence, "
                        f"got {shape}")
    shape = tuple(int(d) for d in shape)
    arr = np.asarray(a)
    if arr.ndim == 0:
        n_inputs = int(a)
    else:
        axis = _axis(axis, arr.ndim, "choice")
        n_inputs = arr.shape[axis]
    n_draws = math.prod(shape)
    if n_draws == 0:
        return np.zeros(shape, dtype=arr.dtype if arr.ndim else np.int32)
    if n_inputs <= 0:
        raise ValueError("a must be greater than 0 unless no samples are taken")
    if not replace and n_draws > n_inputs:
        raise ValueError(f"Cannot take a larger sample (size {n_draws}) than population "
                         f"(size {n_inputs}) when 'replace=False'")
    if p is None:
        if replace:
            ind = _randint_any(k, shape, 0, n_inputs, np.dtype(np.int32))
            result = ind if arr.ndim == 0 else np.take(arr, ind, axis=axis)
        else:
            slices = (slice(None),) * axis + (slice(n_draws),)
            result = permutation(k, n_inputs if arr.ndim == 0 else arr, axis)[slices]
    else:
        pdt = _p_dtype(p)
        p_arr = np.asarray(p).astype(pdt)
        if p_arr.shape != (n_inputs,):
            raise ValueError("p must be None or a 1D vector with the same size as "
                             f"a.shape[axis]. p has shape {p_arr.shape} and a.shape[axis] "
                             f"is {n_inputs}.")
        if replace:
            p_cuml = np.cumsum(p_arr, dtype=pdt)
            r = p_cuml[-1] * (pdt.type(1) - _uniform_b(k, shape, pdt, 0.0, 1.0))
            ind = np.searchsorted(p_cuml, r).astype(np.int32)
        else:
            with np.errstate(divide="ignore"):
                g = _gumbel_b(k, (n_inputs,), pdt) + log(p_arr)
            ind = _top_k_indices(g, n_draws).astype(np.int32)
        result = ind if arr.ndim == 0 else np.take(arr, ind, axis=axis)
    return result.reshape(shape if arr.ndim == 0 else
                          arr.shape[:axis] + shape + arr.shape[axis + 1:])


def _categorical_b(k, logits, axis, shape, batch_shape, replace, nb):
    """Gumbel-max sampling; ``logits`` carries ``nb`` trailing batch axes."""
    logits = np.asarray(logits)
    ndim = logits.ndim - nb
    ax = _axis(axis, ndim, "categorical")
    prefix = shape[:len(shape) - len(batch_shape)]
    dt = logits.dtype
    if replace:
        lshape = list(shape[len(shape) - len(batch_shape):])
        lshape.insert(ax, logits.shape[ax])
        g = _gumbel_b(k, (*prefix, *lshape), dt)
        expanded = logits.reshape((1,) * len(prefix) + logits.shape)
        return np.argmax(g + expanded, axis=len(prefix) + ax).astype(np.int32)
    g = logits + _gumbel_b(k, logits.shape[:ndim], dt)
    kk = math.prod(prefix)
    if kk > logits.shape[ax]:
        raise ValueError(f"Number of samples without replacement ({kk}) cannot exceed "
                         f"number of categories ({logits.shape[ax]}).")
    moved = np.moveaxis(g, ax, ndim - 1)
    if nb:
        moved = np.moveaxis(moved, tuple(range(ndim, ndim + nb)), tuple(range(nb)))
    ind = _top_k_indices(moved, kk)                  # (*kb, *batch_shape, kk)
    ind = np.moveaxis(ind, -1, nb)                   # (*kb, kk, *batch_shape)
    ind = ind.reshape(ind.shape[:nb] + tuple(shape))
    if nb:
        ind = np.moveaxis(ind, tuple(range(nb)), tuple(range(ind.ndim - nb, ind.ndim)))
    return ind.astype(np.int32)


def categorical(key, logits, axis=-1, shape=None, replace=True, mode=None):
    """Samples of categories from unnormalized log-probabilities ``logits``."""
    k = _key(key, "categorical")
    logits = np.asarray(logits)
    if logits.dtype.kind != "f":
        logits = logits.astype(np.float32)
    ax = _axis(axis, logits.ndim, "categorical")
    batch_shape = logits.shape[:ax] + logits.shape[ax + 1:]
    if shape is None:
        shape = batch_shape
    else:
        shape = _shape(shape, "categorical")
        _broadcast_shapes("categorical", shape, batch_shape)
    return _categorical_b(k, logits, ax, shape, batch_shape, replace, 0)


# ------------------------------------------------------------------ gamma

def _gamma_one_b(keys, alpha):
    """Marsaglia-Tsang, vectorized: one key per element (``keys`` ``(2, *alpha.shape)``),
    every element's rejection loop run with masks until all are accepted."""
    dt = alpha.dtype
    one, zero = dt.type(1), dt.type(0)
    third = dt.type(1.0 / 3.0)
    boost_mask = alpha >= one
    alpha_orig = alpha
    alpha = np.where(boost_mask, alpha, alpha + one)
    d = alpha - third
    # XLA rewrites third / sqrt(d) as third * rsqrt(d), with the CPU's approximate
    # rsqrt instruction refined by a Newton step: xlamath.rsqrt runs the same
    c = third * rsqrt(d)
    pair = _split_b(keys, (2,))
    key, subkey = pair[0], pair[1]
    X = np.zeros_like(alpha)
    V = np.ones_like(alpha)
    U = np.full_like(alpha, 2)

    def not_done(X, V, U):
        with np.errstate(divide="ignore", invalid="ignore"):
            return (U >= one - dt.type(0.0331) * (X * X)) & (
                log(U) >= X * dt.type(0.5) + d * ((one - V) + log(V)))

    active = not_done(X, V, U)
    while active.any():
        three = _split_b(key, (3,))
        key = np.where(active, three[0], key)
        x_key = three[1]
        x = np.zeros_like(alpha)
        v = np.full_like(alpha, -1)
        inner = active.copy()
        while inner.any():
            pair = _split_b(x_key, (2,))
            x_key = np.where(inner, pair[0], x_key)
            xn = _normal_b(pair[1], (), dt)
            x = np.where(inner, xn, x)
            v = np.where(inner, _fma(x, c, one), v)
            inner = inner & (v <= zero)
        u = _uniform_b(three[2], (), dt, 0.0, 1.0)
        X = np.where(active, x * x, X)
        V = np.where(active, v * v * v, V)
        U = np.where(active, u, U)
        active = active & not_done(X, V, U)
    samples = one - _uniform_b(subkey, (), dt, 0.0, 1.0)
    with np.errstate(divide="ignore", over="ignore"):
        boost = np.where(boost_mask, one, power(samples, one / alpha_orig))
    out = d * V * boost
    if dt.itemsize >= 4:     # XLA's CPU flushes float32/float64 denormal results to zero
        out = np.where(np.abs(out) < np.finfo(dt).tiny, zero * out, out)   # (not half's)
    return out.astype(dt, copy=False)


def _gamma_b(k, a, shape, dt, nb):
    a = np.asarray(a).astype(dt)
    a_batch = a.shape[a.ndim - nb:] if nb and a.ndim >= nb else ()
    a_ex = a.shape[:a.ndim - len(a_batch)]
    full = tuple(shape) + np.broadcast_shapes(a_batch, k.shape[1:])
    a = np.broadcast_to(a.reshape((1,) * (len(shape) - len(a_ex)) + a.shape), full)
    n = math.prod(shape)
    keys = _split_b(k, (n,))                         # (n, 2, *kb)
    keys = np.moveaxis(keys, 1, 0).reshape((2,) + tuple(shape) + k.shape[1:])
    keys = np.broadcast_to(keys, (2,) + full)
    return _gamma_one_b(np.ascontiguousarray(keys), np.ascontiguousarray(a))


def gamma(key, a, shape=None, dtype=None):
    """Gamma(a, 1) floats (Marsaglia and Tsang's method, as JAX)."""
    dt = _dtype(dtype, np.float32, "f", "gamma")
    shape = _shape(shape, "gamma")
    if shape is None:
        shape = np.shape(a)
    else:
        _broadcast_shapes("gamma", shape, np.shape(a))
    return _gamma_b(_key(key, "gamma"), a, shape, dt, 0)


# ------------------------------------------------------------------ gamma's derivative

def _digamma(a):
    """The digamma function for a > 0 (float64): the recurrence up to 6, then the
    asymptotic series (error below 1e-15)."""
    a = np.asarray(a, np.float64)
    shift = np.zeros_like(a)
    x = a.copy()
    for _ in range(6):
        small = x < 6.0
        shift = np.where(small, shift + 1.0 / np.where(small, x, 1.0), shift)
        x = np.where(small, x + 1.0, x)
    inv = 1.0 / (x * x)
    series = inv * (1 / 12 - inv * (1 / 120 - inv * (1 / 252 - inv * (
        1 / 240 - inv * (1 / 132 - inv * (691 / 32760 - inv / 12))))))
    return np.log(x) - 0.5 / x - series - shift


def gamma_grad(a, sample):
    """d sample / d a of a Gamma(a, 1) sample held at its quantile (implicit
    reparameterization: ``-dP(a, x)/da / (dP(a, x)/dx)`` with P the regularized lower
    incomplete gamma function), as JAX's ``random_gamma_grad``: P's series where
    ``x <= 1`` or ``x < a``, the continued fraction of ``1 - P`` elsewhere, each summed
    with its derivative in ``a`` until that has converged."""
    a, x = np.broadcast_arrays(np.asarray(a), np.asarray(sample))
    dt = np.result_type(a.dtype, x.dtype, np.float32)
    a64, x64 = a.astype(np.float64), x.astype(np.float64)
    with np.errstate(all="ignore"):
        out = np.where(
            (x64 > 1.0) & (x64 > a64), _gamma_grad_fraction(a64, x64),
            _gamma_grad_series(a64, x64))
        out = np.where(x64 == 0, 0.0, out)
        out = np.where((x64 < 0) | (a64 <= 0) | np.isnan(a64) | np.isnan(x64), np.nan, out)
    return out.astype(dt)


_EPS = np.finfo(np.float64).eps


def _gamma_grad_series(a, x):
    """P = x^a e^-x / Gamma(a + 1) * sum_n c_n, c_n = c_(n-1) x / (a + n)."""
    r = a.copy()
    c = np.ones_like(a)
    total = np.ones_like(a)
    dc = np.zeros_like(a)
    dtotal = np.zeros_like(a)
    going = np.ones(a.shape, bool)
    for _ in range(2000):
        if not going.any():
            break
        r = np.where(going, r + 1.0, r)
        dc_new = dc * (x / r) - (c * x) / (r * r)
        c_new = c * (x / r)
        dc = np.where(going, dc_new, dc)
        dtotal = np.where(going, dtotal + dc_new, dtotal)
        c = np.where(going, c_new, c)
        total = np.where(going, total + c_new, total)
        going &= np.abs(dc_new / dtotal) > _EPS
    dlog = np.log(x) - _digamma(a + 1.0)
    return -(dtotal + total * dlog) * x / a


def _gamma_grad_fraction(a, x):
    """1 - P = x^a e^-x / Gamma(a) * (Legendre's continued fraction), evaluated by its
    convergents p_k / q_k together with their derivatives in a."""
    y = 1.0 - a
    z = x + y + 1.0
    c = np.zeros_like(a)
    pkm2, qkm2 = np.ones_like(a), x.copy()
    pkm1, qkm1 = x + 1.0, z * x
    ans = pkm1 / qkm1
    dpkm2, dqkm2, dpkm1, dqkm1 = (np.zeros_like(a), np.zeros_like(a), np.zeros_like(a),
                                  -x)
    dans = (dpkm1 - ans * dqkm1) / qkm1
    going = np.ones(a.shape, bool)
    big = 1.0 / _EPS
    for _ in range(2000):
        if not going.any():
            break
        c = c + 1.0
        y = y + 1.0
        z = z + 2.0
        yc = y * c
        pk = pkm1 * z - pkm2 * yc
        qk = qkm1 * z - qkm2 * yc
        ok = qk != 0
        safe_qk = np.where(ok, qk, 1.0)
        r = pk / safe_qk
        ans_new = np.where(ok, r, ans)
        dpk = dpkm1 * z - pkm1 - dpkm2 * yc + pkm2 * c
        dqk = dqkm1 * z - qkm1 - dqkm2 * yc + qkm2 * c
        dans_new = np.where(ok, (dpk - ans_new * dqk) / safe_qk, dans)
        change = np.where(ok, np.abs(dans_new - dans), 1.0)
        ans = np.where(going, ans_new, ans)
        dans = np.where(going, dans_new, dans)
        pkm2, pkm1 = np.where(going, pkm1, pkm2), np.where(going, pk, pkm1)
        qkm2, qkm1 = np.where(going, qkm1, qkm2), np.where(going, qk, qkm1)
        dpkm2, dpkm1 = np.where(going, dpkm1, dpkm2), np.where(going, dpk, dpkm1)
        dqkm2, dqkm1 = np.where(going, dqkm1, dqkm2), np.where(going, dqk, dqkm1)
        rescale = going & (np.abs(pkm1) > big)
        for v in (pkm2, pkm1, qkm2, qkm1, dpkm2, dpkm1, dqkm2, dqkm1):
            v *= np.where(rescale, _EPS, 1.0)
        going &= change > _EPS
    dlog = np.log(x) - _digamma(a)
    return (dans + ans * dlog) * x


# ------------------------------------------------------------------ multivariate

def multivariate_normal(key, mean, cov, shape=None, dtype=None, method="cholesky"):
    """Samples of N(mean, cov): ``mean + factor @ normal`` with ``factor`` from
    ``method`` ('cholesky', 'svd' or 'eigh')."""
    k = _key(key, "multivariate_normal")
    dt, mean, cov, shape = _mvn_operands(mean, cov, shape, dtype, method)
    factor = _mvn_factor(cov, method)
    z = _normal_b(k, tuple(shape) + mean.shape[-1:], dt)
    return (mean + _matvec(factor, z)).astype(dt, copy=False)


def _mvn_operands(mean, cov, shape, dtype, method):
    """(dtype, mean, cov, shape) checked and converted as JAX does; ``cov`` is
    symmetrized ((cov + cov^T) / 2, exact for a symmetric one) as JAX's cholesky does."""
    if method not in ("svd", "eigh", "cholesky"):
        raise ValueError("method must be one of {'svd', 'eigh', 'cholesky'}")
    mean, cov = np.asarray(mean), np.asarray(cov)
    dt = np.dtype(dtype) if dtype is not None else np.result_type(
        mean.dtype if mean.dtype.kind == "f" else np.float32,
        cov.dtype if cov.dtype.kind == "f" else np.float32)
    if dt.kind != "f":
        raise ValueError(f"dtype argument to `multivariate_normal` must be a float dtype, "
                         f"got {dt}")
    if dt.itemsize < 4:
        raise ArgumentError(f"multivariate_normal: {dt} is not supported (JAX's CPU "
                            f"factorizations have no half precision): sample in float32 "
                            f"and cast the result")
    mean, cov = mean.astype(dt), cov.astype(dt)
    if mean.ndim < 1:
        raise ValueError(f"multivariate_normal requires mean.ndim >= 1, got mean.ndim == "
                         f"{mean.ndim}")
    if cov.ndim < 2:
        raise ValueError(f"multivariate_normal requires cov.ndim >= 2, got cov.ndim == "
                         f"{cov.ndim}")
    n = mean.shape[-1]
    if cov.shape[-2:] != (n, n):
        raise ValueError(f"multivariate_normal requires cov.shape == (..., n, n) for n={n}, "
                         f"but got cov.shape == {cov.shape}.")
    if shape is None:
        shape = np.broadcast_shapes(mean.shape[:-1], cov.shape[:-2])
    else:
        shape = _shape(shape, "multivariate_normal")
        _broadcast_shapes("normal", shape, mean.shape[:-1], cov.shape[:-2])
    if method == "cholesky":
        cov = (cov + np.swapaxes(cov, -1, -2)) / dt.type(2)
    return dt, mean, cov, tuple(shape)


def _sum_to(x, shape):
    """``x`` summed over the axes that broadcasting added to ``shape``."""
    x = np.asarray(x)
    lead = x.ndim - len(shape)
    x = x.sum(axis=tuple(range(lead))) if lead > 0 else x
    keep = tuple(i for i, d in enumerate(shape) if d == 1 and x.shape[i] != 1)
    return (x.sum(axis=keep, keepdims=True) if keep else x).reshape(shape)


def _mvn_derivative_parts(key, mean, cov, shape, dtype, method, what):
    if method != "cholesky":
        raise ArgumentError(f"{what}: the derivative of multivariate_normal in cov is "
                            f"implemented for method='cholesky' (got {method!r})")
    dt, m, c, shape = _mvn_operands(mean, cov, shape, dtype, method)
    lower = _mvn_factor(c, method)
    z = _normal_b(_key(key, what), shape + m.shape[-1:], dt)
    return dt, lower, z


def _phi(x):
    """The lower triangle of ``x`` with its diagonal halved."""
    return np.tril(x) - 0.5 * x * np.eye(x.shape[-1], dtype=x.dtype)


def multivariate_normal_vjp(g, key, mean, cov, shape=None, dtype=None, method="cholesky"):
    """Cotangents (mean, cov) of ``multivariate_normal(key, mean, cov, ...)`` for the
    output cotangent ``g``: ``g`` summed to mean's shape, and the Cholesky factor's
    cotangent ``sum g z^T`` taken back through the factorization (symmetric, as the
    sampler symmetrizes cov)."""
    dt, lower, z = _mvn_derivative_parts(key, mean, cov, shape, dtype, method,
                                         "multivariate_normal_vjp")
    g = np.asarray(g, dt)
    g_mean = _sum_to(g, np.shape(mean))
    g_lower = _sum_to(g[..., :, None] * z[..., None, :], lower.shape)
    lt = np.swapaxes(lower, -1, -2)
    p = _phi(lt @ g_lower)
    s = np.linalg.solve(lt, np.swapaxes(np.linalg.solve(lt, np.swapaxes(p, -1, -2)), -1, -2))
    s = (s + np.swapaxes(s, -1, -2)) * 0.5
    return (_like_operand(g_mean, mean), _like_operand(_sum_to(s, np.shape(cov)), cov))


def _like_operand(ct, x):
    """A cotangent in its operand's floating dtype."""
    dt = np.asarray(x).dtype
    return np.asarray(ct).astype(dt if dt.kind == "f" else np.float64)


def multivariate_normal_jvp(key, mean, cov, dmean, dcov, shape=None, dtype=None,
                            method="cholesky"):
    """The tangent of ``multivariate_normal(key, mean, cov, ...)``: ``dmean + dL z`` with
    ``dL = L phi(L^-1 dcov L^-T)`` (cov symmetrized)."""
    dt, lower, z = _mvn_derivative_parts(key, mean, cov, shape, dtype, method,
                                         "multivariate_normal_jvp")
    out = np.zeros(np.broadcast_shapes(z.shape, np.shape(mean)), dt)
    if dmean is not None:
        out = out + np.asarray(dmean, dt)
    if dcov is not None:
        dc = np.broadcast_to(np.asarray(dcov, dt), np.shape(cov))
        dc = (dc + np.swapaxes(dc, -1, -2)) * 0.5
        inner = np.linalg.solve(lower, np.swapaxes(np.linalg.solve(lower, dc), -1, -2))
        d_lower = lower @ _phi(inner)
        out = out + np.einsum("...ij,...j->...i", d_lower, z)
    return out


def _cholesky(cov):
    """The lower Cholesky factor from the LAPACK that jaxlib calls on CPU (SciPy's
    ``potrf``) when SciPy is installed, so that the factor is JAX's to the bit; NumPy's
    (a different LAPACK build, last-bit differences in float32) otherwise."""
    try:
        from scipy.linalg import lapack
    except ImportError:
        return np.linalg.cholesky(cov)
    cov = np.asarray(cov)
    if type(cov).__module__.split(".")[0] != "numpy":   # a device array: its own LAPACK
        return np.linalg.cholesky(cov)
    flat = cov.reshape((-1,) + cov.shape[-2:])
    potrf = lapack.spotrf if cov.dtype == np.float32 else lapack.dpotrf
    out = np.empty_like(flat)
    for i, a in enumerate(flat):
        c, info = potrf(a, lower=1, clean=1)
        out[i] = c if info == 0 else np.nan
    return out.reshape(cov.shape)


def _mvn_factor(cov, method):
    if method == "svd":
        u, s, _ = np.linalg.svd(cov)
        return u * np.sqrt(s[..., None, :])
    if method == "eigh":
        w, v = np.linalg.eigh(cov)
        return v * np.sqrt(w[..., None, :])
    return _cholesky(cov)


def _matvec(factor, z):
    """``factor @ z`` over the trailing axes as XLA's CPU dot computes a small one: each
    row accumulated left to right with fused multiply-adds."""
    n = factor.shape[-1]
    acc = None
    for j in range(n):
        term = factor[..., :, j] * z[..., j:j + 1] if acc is None else None
        acc = term if acc is None else _fma(factor[..., :, j], z[..., j:j + 1], acc)
    return acc


# ------------------------------------------------------------------ transformed code
# The primitives' implementations in generated code.  The ``*_batched`` forms are what
# vmap's rules call: the key (``key_b``) carries the batch on its trailing axes (one
# shared by every example arrives as ``(2,)``) and so does every array operand; the
# result has the example's shape followed by the batch axes.  ``*_vjp`` are the
# adjoints that reverse mode calls.

def _lane_key(key_b):
    return _to_bkey(key_b)


def _example_shape(x, nb):
    shape = np.shape(x)
    return shape[:len(shape) - nb] if isinstance(x, np.ndarray) else shape


def key_batched(seed):
    """A batch of keys from seeds ``(B,)``: ``(2, B)``."""
    seed = np.asarray(seed)
    if seed.dtype.kind not in "iu":
        raise TypeError(f"PRNGKey: the seed must be an integer, got dtype {seed.dtype}")
    low = (seed.astype(np.int64) & 0xFFFFFFFF).astype(_U32)
    return np.stack([np.zeros_like(low), low], axis=0)


def split_batched(key_b, num=2):
    return _split_b(_lane_key(key_b), _num_shape(num))


def fold_in_batched(key_b, data):
    k = _lane_key(key_b)
    data = _as_u32(data)
    if data.ndim > k.ndim - 1:
        raise TypeError("fold_in accepts a scalar per example, got an array")
    return _fold_in_b(k, data)


def bits_batched(key_b, shape=(), dtype=None):
    dt = _dtype(dtype, np.uint32, "u", "bits")
    return _bits_b(_lane_key(key_b), dt.itemsize * 8, _shape(shape, "bits"))


def uniform_batched(key_b, shape=(), dtype=None, minval=0.0, maxval=1.0):
    dt = _dtype(dtype, np.float32, "f", "uniform")
    return _uniform_b(_lane_key(key_b), _shape(shape, "uniform"), dt, minval, maxval)


def normal_batched(key_b, shape=(), dtype=None):
    dt = _dtype(dtype, np.float32, "f", "normal")
    return _normal_b(_lane_key(key_b), _shape(shape, "normal"), dt)


def exponential_batched(key_b, shape=(), dtype=None):
    dt = _dtype(dtype, np.float32, "f", "exponential")
    return _exponential_b(_lane_key(key_b), _shape(shape, "exponential"), dt)


def bernoulli_batched(key_b, p=0.5, shape=None, mode="low"):
    k = _lane_key(key_b)
    dt = _p_dtype(p)
    shape = _example_shape(p, _nb(k)) if shape is None else _shape(shape, "bernoulli")
    return _bernoulli_b(k, p, shape, mode, dt)


def randint_batched(key_b, shape, minval, maxval, dtype=None):
    return _randint_any(_lane_key(key_b), _shape(shape, "randint"), minval, maxval,
                        _int_dtype(dtype, "randint"))


def truncated_normal_batched(key_b, lower, upper, shape=None, dtype=None):
    k = _lane_key(key_b)
    dt = _dtype(dtype, np.float32, "f", "truncated_normal")
    nb = _nb(k)
    if shape is None:
        shape = np.broadcast_shapes(_example_shape(lower, nb), _example_shape(upper, nb))
    return _truncated_normal_b(k, lower, upper, _shape(shape, "truncated_normal"), dt)


def gamma_batched(key_b, a, shape=None, dtype=None):
    k = _lane_key(key_b)
    dt = _dtype(dtype, np.float32, "f", "gamma")
    shape = _example_shape(a, _nb(k)) if shape is None else _shape(shape, "gamma")
    return _gamma_b(k, a, shape, dt, _nb(k))


def _permutation_any(k, x, axis, independent):
    """``permutation`` for keys ``(2, *kb)`` and ``x`` with the batch axes trailing."""
    nb = _nb(k)
    if isinstance(x, (int, np.integer)) or (np.ndim(x) <= nb and
                                            np.asarray(x).dtype.kind in "iu"):
        sizes = np.unique(np.asarray(x))
        if sizes.size != 1:
            raise ArgumentError("vmap: permutation(key, n) with an n that differs per "
                                "example: its output's size would differ per example")
        x = np.arange(int(sizes[0]), dtype=np.int32).reshape((-1,) + (1,) * nb)
        return _shuffle_b(k, x, 0) if nb else _shuffle_b(k, x.ravel(), 0)
    x = np.asarray(x)
    ndim = x.ndim - nb
    axis = _axis(axis, ndim, "permutation")
    if independent or ndim == 1:
        return _shuffle_b(k, x, axis)
    ind = _shuffle_b(k, np.arange(x.shape[axis], dtype=np.int32).reshape(
        (-1,) + (1,) * nb), 0)
    return _take_b(x, ind, axis, nb)


def unit_like(key, like):
    """The unit floats in [0, 1) a sampler drew for a result like ``like`` (its shape and
    dtype): what reparameterized derivatives read (truncated_normal's)."""
    like = np.asarray(like)
    return _unit_b(_key(key, "unit_like"), like.shape, like.dtype)


def unit_like_batched(key_b, like):
    k = _lane_key(key_b)
    like = np.asarray(like)
    u = _unit_b(k, like.shape[:like.ndim - _nb(k)], like.dtype)
    return np.broadcast_to(u, np.broadcast_shapes(u.shape, like.shape))


def permutation_batched(key_b, x, axis=0, independent=False):
    return _permutation_any(_lane_key(key_b), x, axis, independent)


def _permutation_adjoint(k, g, axis, independent, nb):
    """Scatter ``g`` back to where ``permutation(k, x)`` took each element from."""
    g = np.asarray(g)
    ndim = g.ndim - nb
    axis = _axis(axis, ndim, "permutation")
    n = g.shape[axis]
    if independent or ndim == 1:
        pos = np.arange(n, dtype=np.int64).reshape((-1,) + (1,) * (g.ndim - axis - 1))
        idx = _shuffle_b(k, np.broadcast_to(pos, g.shape), axis)
    else:
        ind = _shuffle_b(k, np.arange(n, dtype=np.int64).reshape((-1,) + (1,) * nb), 0)
        idx = ind.reshape((1,) * axis + (n,) + (1,) * (ndim - axis - 1) + ind.shape[1:])
    idx = np.broadcast_to(idx, g.shape)
    out = np.zeros_like(g)
    np.put_along_axis(out, idx, g, axis=axis)
    return out


def permutation_vjp(t, key, x, axis=0, independent=False):
    """The adjoint of ``permutation(key, x)`` (a fixed gather) applied to ``t``."""
    return _permutation_adjoint(np.asarray(key, _U32), t, axis, independent, 0)


def permutation_vjp_batched(t, key_b, x, axis=0, independent=False):
    g = t
    k = _lane_key(key_b)
    nb = _nb(k)
    full = np.broadcast_shapes(np.shape(g), np.shape(x))
    ex = full[:len(full) - nb]
    full = ex + np.broadcast_shapes(full[len(ex):], k.shape[1:])
    return _permutation_adjoint(k, np.broadcast_to(g, full), axis, independent, nb)


def categorical_batched(key_b, logits, axis=-1, shape=None, replace=True, mode=None):
    k = _lane_key(key_b)
    nb = _nb(k)
    logits = np.asarray(logits)
    if logits.dtype.kind != "f":
        logits = logits.astype(np.float32)
    ex = logits.shape[:logits.ndim - nb]
    ax = _axis(axis, len(ex), "categorical")
    batch_shape = ex[:ax] + ex[ax + 1:]
    shape = batch_shape if shape is None else _shape(shape, "categorical")
    logits = np.broadcast_to(logits, ex + np.broadcast_shapes(logits.shape[len(ex):],
                                                              k.shape[1:]))
    return _categorical_b(k, logits, ax, shape, batch_shape, replace, nb)


def _lanes(fn, key_b, *args, **kwargs):
    """``fn`` example by example (for the samplers whose batching is rare: ``choice``,
    ``multivariate_normal``), results stacked on a trailing batch axis."""
    k = _lane_key(key_b)
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    size = max([k.shape[-1]] + [a.shape[-1] for a in arrays])
    outs = []
    for b in range(size):
        lane = [a[..., min(b, a.shape[-1] - 1)] if isinstance(a, np.ndarray) else a
                for a in args]
        outs.append(fn(np.ascontiguousarray(k[:, min(b, k.shape[-1] - 1)]), *lane, **kwargs))
    return np.stack(outs, axis=-1)


def choice_batched(key_b, a, shape=(), replace=True, p=None, axis=0, mode=None):
    return _lanes(lambda k, a, p: choice(k, a, shape, replace, p, axis, mode), key_b, a, p)


def multivariate_normal_batched(key_b, mean, cov, shape=None, dtype=None,
                                method="cholesky"):
    return _lanes(lambda k, m, c: multivariate_normal(k, m, c, shape, dtype, method),
                  key_b, mean, cov)


def _lanes_pair(fn, key_b, *args):
    """``_lanes`` for a function returning a pair: each stacked on a trailing axis."""
    k = _lane_key(key_b)
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    size = max([k.shape[-1]] + [a.shape[-1] for a in arrays])
    firsts, seconds = [], []
    for b in range(size):
        lane = [a[..., min(b, a.shape[-1] - 1)] if isinstance(a, np.ndarray) else a
                for a in args]
        one, two = fn(np.ascontiguousarray(k[:, min(b, k.shape[-1] - 1)]), *lane)
        firsts.append(one)
        seconds.append(two)
    return np.stack(firsts, axis=-1), np.stack(seconds, axis=-1)


def multivariate_normal_vjp_batched(g, key_b, mean, cov, shape=None, dtype=None,
                                    method="cholesky"):
    """Per-lane cotangents, stacked on a trailing batch axis."""
    return _lanes_pair(
        lambda k, gg, m, c: multivariate_normal_vjp(gg, k, m, c, shape, dtype, method),
        key_b, np.asarray(g), np.asarray(mean), np.asarray(cov))


def multivariate_normal_jvp_batched(key_b, mean, cov, dmean, dcov, shape=None, dtype=None,
                                    method="cholesky"):
    return _lanes(lambda k, m, c, dm, dc: multivariate_normal_jvp(k, m, c, dm, dc, shape,
                                                                  dtype, method),
                  key_b, mean, cov, dmean, dcov)


# a key on the GPU (a CuPy array) samples there: each public function runs this module's
# code on the key's array module (astjax/device.py)
from astjax import device as _device  # noqa: E402
_device.dispatch_public(globals(), __all__, __name__)
