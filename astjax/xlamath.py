"""XLA's CPU elementary functions, reproduced in NumPy to the last bit.

``jax.random``'s samplers end in ``log``, ``log1p`` and ``erf_inv``; XLA's CPU backend
computes those with its own polynomial approximations (float32) or with the C
library plus a Cephes rational (float64), and it contracts ``a * b + c`` into one
fused multiply-add.  NumPy's ``log``/``log1p`` round differently in the last bit for a
fifth of the inputs, so ``astjax.random`` uses these instead: the same operations in
the same order, every contracted ``a * b + c`` a correctly rounded fma.  XLA's CPU
code runs with denormals read as zero and denormal results flushed to zero (float32,
float64), and so do these.  Half precision goes through float32 as XLA's does, rounded
back (every half-precision input checked).  Checked against XLA (jaxlib 0.10) over
millions of inputs: identical for every float32 and float64 input, but float32
``log`` of a denormal, which XLA itself gives as ``-inf`` or ``-150 ln 2`` depending
on where the element falls in its vector loop (``-inf`` here).
"""
from __future__ import annotations

import functools
import math

import numpy as np

__all__ = ["fma", "log", "log1p", "erf_inv", "erf", "power", "rsqrt",
           "rsqrt_exact_available", "cpu_vendor", "cpu_has_avx512"]

_F32, _F64 = np.float32, np.float64


def _daz(x):
    """A denormal operand read as a zero of its sign, as XLA's CPU code runs (the MXCSR's
    denormals-are-zero bit; half precision is not affected: its denormals are float32
    normals where XLA computes)."""
    x = np.asarray(x)
    tiny = np.finfo(x.dtype).tiny
    return np.where(np.abs(x) < tiny, np.copysign(x.dtype.type(0), x), x)


def _ftz(y):
    """A denormal result flushed to a zero of its sign (the MXCSR's flush-to-zero bit)."""
    return _daz(y)


# ------------------------------------------------------------------ fused multiply-add

def _two_sum(a, b):
    """``a + b`` as ``s + err`` exactly (Knuth)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _two_product(a, b):
    """``a * b`` as ``p + err`` exactly (Dekker's product, Veltkamp's split)."""
    def halves(x):
        t = x * 134217729.0
        hi = t - (t - x)
        return hi, x - hi
    p = a * b
    ah, al = halves(a)
    bh, bl = halves(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _fma32(a, b, c):
    """float32 ``a * b + c`` rounded once.  The product is exact in float64 and the sum
    is rounded there first; that double rounding can only go wrong where the float64
    sum lies exactly halfway between two float32s, so those (rare) elements are redone
    with the sum rounded to odd, which makes the final rounding correct."""
    a, b, c = (np.asarray(v, _F64) for v in (a, b, c))
    with np.errstate(over="ignore", invalid="ignore"):
        p = a * b
        s = p + c
        halfway = (s.view(np.int64) & 0x1FFFFFFF) == 0x10000000
        if halfway.any():
            err = np.where(halfway, (p - (s - (s - p))) + (c - (s - p)), 0.0)
            odd = np.nextafter(s, np.where(err > 0, np.inf, -np.inf))
            s = np.where(halfway & (err != 0), odd, s)
        return s.astype(_F32)


def _fma64(a, b, c):
    """float64 ``a * b + c`` rounded once (error-free product and sums; the one inexact
    rounding is corrected where it was a tie broken the wrong way)."""
    a, b, c = (np.asarray(v, _F64) for v in (a, b, c))
    with np.errstate(over="ignore", invalid="ignore"):
        p, e = _two_product(a, b)
        s, t = _two_sum(p, c)
        y, y_err = _two_sum(t, e)
        r, r_err = _two_sum(s, y)
        half = np.spacing(np.abs(r)) / 2
        # just below a power of two the spacing is half as large
        downward = (r_err != 0) & (np.sign(r_err) != np.sign(r))
        half = np.where(downward & (np.frexp(r)[0] == np.copysign(0.5, r)), half / 2, half)
        past_tie = (np.abs(r_err) == half) & (y_err != 0) & (np.sign(y_err) == np.sign(r_err))
        r = np.where(past_tie, np.nextafter(r, np.where(r_err > 0, np.inf, -np.inf)), r)
        # an exact zero takes its sign from IEEE's rules (the error-free sums lose it)
        return np.where(np.isfinite(r) & (r != 0), r, a * b + c)


def fma(a, b, c):
    """``a * b + c`` with one rounding, in the dtype of the operands (float32/float64)."""
    dt = np.result_type(a, b, c)
    if dt.itemsize < 4:    # half precision: exact in float64, one rounding to dt
        wide = (np.asarray(a, _F64) * np.asarray(b, _F64)) + np.asarray(c, _F64)
        return wide.astype(dt)
    return _fma32(a, b, c) if dt.itemsize == 4 else _fma64(a, b, c)


# ------------------------------------------------------------------ log

_LOG_P = tuple(_F32(v) for v in (
    7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
    1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1,
    3.3333331174e-1))
_MIN_NORMAL32 = np.finfo(_F32).tiny


def _log32(x):
    """XLA's float32 log: Cephes' polynomial on the mantissa in [sqrt(1/2), sqrt(2)),
    ``e * ln 2`` added back in two parts, products fused into the sums."""
    x = _daz(np.asarray(x, _F32))
    one, zero = _F32(1), _F32(0)
    bits = np.maximum(x, _MIN_NORMAL32).view(np.int32)
    exponent = (bits >> 23) - 0x7F
    mant = ((bits & ~0x7F800000) | _F32(0.5).view(np.int32)).view(_F32)
    e = one + exponent.astype(_F32)
    below = mant < _F32(0.707106781186547524)
    shifted = np.where(below, mant, zero)
    m = mant - one
    e = e - np.where(below, one, zero)
    m = m + shifted
    m2 = m * m
    m3 = m2 * m
    p = _LOG_P
    y0 = _fma32(m, p[0], p[1])
    y1 = _fma32(m, p[3], p[4])
    y2 = _fma32(m, p[6], p[7])
    y0 = _fma32(y0, m, p[2])
    y1 = _fma32(y1, m, p[5])
    y2 = _fma32(y2, m, p[8])
    y0 = _fma32(y0, m3, y1)
    poly = _fma32(y0, m3, y2)
    tail = _fma32(poly, m3, _F32(-2.12194440e-4) * e)
    head = _fma32(_F32(-0.5), m2, m)
    out = _fma32(_F32(0.693359375), e, head + tail)
    out = np.where(x < _MIN_NORMAL32, _F32(-np.inf), out)   # zero, and denormals (flushed)
    out = np.where(x == np.inf, _F32(np.inf), out)
    return np.where((x < zero) | np.isnan(x), _F32(np.nan), out)


_LIBM_LOG = np.frompyfunc(math.log, 1, 1)


def _log64(x):
    """XLA's float64 log is the C library's (``math.log`` calls the same one), a
    denormal read as zero."""
    x = _daz(np.asarray(x, _F64))
    ok = (x > 0) & np.isfinite(x)
    out = np.asarray(_LIBM_LOG(np.where(ok, x, 1.0)), dtype=_F64)
    out = np.where(x == 0, -np.inf, out)
    out = np.where(x == np.inf, np.inf, out)
    return np.where((x < 0) | np.isnan(x), np.nan, out)


def log(x):
    """``log(x)`` as XLA's CPU backend computes it (float32 or float64)."""
    x = np.asarray(x)
    return _log64(x) if x.dtype == _F64 else _log32(x).astype(x.dtype, copy=False)


# ------------------------------------------------------------------ log1p

# Cephes' rational approximation of log1p for |x| < sqrt(2) - 1, as XLA's log1p uses it.
_LOG1P_NUM = (4.5270000862445199635215e-5, 4.9854102823193375972212e-1,
              6.5787325942061044846969e0, 2.9911919328553073277375e1,
              6.0949667980987787057556e1, 5.7112963590585538103336e1,
              2.0039553499201281259648e1)
_LOG1P_DEN = (1.0, 1.5062909083469192043167e1, 8.3047565967967209469434e1,
              2.2176239823732856465394e2, 3.0909872225312059774938e2,
              2.1642788614495947685003e2, 6.0118660497603843919306e1)


def log1p(x):
    """``log1p(x)`` as XLA computes it: ``log(x + 1)``, or the Cephes rational where
    ``|x| < sqrt(2) - 1`` (float32 or float64)."""
    x = np.asarray(x)
    if x.dtype not in (_F32, _F64):     # half precision: computed in float32, rounded back
        return log1p(x.astype(_F32)).astype(x.dtype)
    t = x.dtype.type
    x = _daz(x)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        large = log(x + t(1))
        x2 = x * x
        num = np.zeros_like(x)
        for c in _LOG1P_NUM:
            num = fma(num, x, t(c))
        den = np.zeros_like(x)
        for c in _LOG1P_DEN:
            den = fma(den, x, t(c))
        small = (x * x2) * (num / den)
        small = x + fma(t(-0.5), x2, small)
    return _ftz(np.where(np.abs(x) < t(0.41421356237309504880), small, large))


# ------------------------------------------------------------------ erf_inv

# Giles' single-precision approximation: two polynomials in w = -log(1 - x^2).
_ERFINV32_SMALL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                   0.00021858087, -0.00125372503, -0.00417768164, 0.246640727,
                   1.50140941)
_ERFINV32_LARGE = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
                   0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)

# Giles' double-precision approximation: (bound on w, shift, on sqrt(w)?, coefficients).
_ERFINV64 = (
    (6.25, 3.125, False, (
        -3.6444120640178196996e-21, -1.685059138182016589e-19, 1.2858480715256400167e-18,
        1.115787767802518096e-17, -1.333171662854620906e-16, 2.0972767875968561637e-17,
        6.6376381343583238325e-15, -4.0545662729752068639e-14, -8.1519341976054721522e-14,
        2.6335093153082322977e-12, -1.2975133253453532498e-11, -5.4154120542946279317e-11,
        1.051212273321532285e-09, -4.1126339803469836976e-09, -2.9070369957882005086e-08,
        4.2347877827932403518e-07, -1.3654692000834678645e-06, -1.3882523362786468719e-05,
        0.0001867342080340571352, -0.00074070253416626697512, -0.0060336708714301490533,
        0.24015818242558961693, 1.6536545626831027356)),
    (16.0, 3.25, True, (
        2.2137376921775787049e-09, 9.0756561938885390979e-08, -2.7517406297064545428e-07,
        1.8239629214389227755e-08, 1.5027403968909827627e-06, -4.013867526981545969e-06,
        2.9234449089955446044e-06, 1.2475304481671778723e-05, -4.7318229009055733981e-05,
        6.8284851459573175448e-05, 2.4031110387097893999e-05, -0.0003550375203628474796,
        0.00095328937973738049703, -0.0016882755560235047313, 0.0024914420961078508066,
        -0.0037512085075692412107, 0.005370914553590063617, 1.0052589676941592334,
        3.0838856104922207635)),
    (np.inf, 5.0, True, (
        -2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
        -3.7894654401267369937e-09, 7.6157012080783393804e-09, -1.4960026627149240478e-08,
        2.9147953450901080826e-08, -6.7711997758452339498e-08, 2.2900482228026654717e-07,
        -9.9298272942317002539e-07, 4.5260625972231537039e-06, -1.9681778105531670567e-05,
        7.5995277030017761139e-05, -0.00021503011930044477347, -0.00013871931833623122026,
        1.0103004648645343977, 4.8499064014085844221)),
)


def _erf_inv32(x):
    x = _daz(np.asarray(x, _F32))
    with np.errstate(divide="ignore", invalid="ignore"):
        w = -log1p(x * -x)
        small = w < _F32(5.0)
        t = np.where(small, w - _F32(2.5), np.sqrt(w) - _F32(3.0))
        p = np.where(small, _F32(_ERFINV32_SMALL[0]), _F32(_ERFINV32_LARGE[0]))
        for cs, cl in zip(_ERFINV32_SMALL[1:], _ERFINV32_LARGE[1:]):
            p = _fma32(p, t, np.where(small, _F32(cs), _F32(cl)))
        return _ftz(np.where(np.abs(x) == _F32(1.0), x * _F32(np.inf), p * x))


def _erf_inv64(x):
    x = _daz(np.asarray(x, _F64))
    with np.errstate(divide="ignore", invalid="ignore"):
        w = -log1p(x * -x)
        out = np.zeros_like(w)
        done = np.zeros(w.shape, bool)
        for bound, shift, root, coeffs in _ERFINV64:
            here = ~done & (w < bound)
            t = (np.sqrt(w) if root else w) - shift
            p = np.full_like(w, coeffs[0])
            for c in coeffs[1:]:
                p = _fma64(p, t, c)
            out = np.where(here, p, out)
            done |= here
        return _ftz(np.where(np.abs(x) == 1.0, x * np.inf, out * x))


def erf_inv(x):
    """``erf_inv(x)`` as XLA computes it: float64 in float64, anything else in float32
    (then cast back, as XLA upcasts half precision: the same fused polynomial)."""
    x = np.asarray(x)
    if x.dtype == _F64:
        return _erf_inv64(x)
    return _erf_inv32(x).astype(x.dtype, copy=False)


# ------------------------------------------------------------------ erf

_ERF32_NUM = (0.00022905065861350646, 0.0034082910107109506, 0.050955695062380861,
              0.18520832239976145, 1.128379143519084)
_ERF32_DEN = (-1.1791602954361697e-7, 0.000023547966471313185, 0.0010179625278914885,
              0.014070470171167667, 0.11098505178285362, 0.49746925110067538, 1.0)
_LIBM_ERF = np.frompyfunc(math.erf, 1, 1)


def _erf32(x):
    """XLA's float32 erf: Eigen's odd/even rational in x^2 (fused), clamped to +-1
    beyond erfinv(1 - ulp/2)."""
    x = _daz(np.asarray(x, _F32))
    x2 = x * x
    p = _fma32(x2, _F32(_ERF32_NUM[0]), _F32(_ERF32_NUM[1]))
    for c in _ERF32_NUM[2:]:
        p = _fma32(x2, p, _F32(c))
    p = x * p
    q = _fma32(x2, _F32(_ERF32_DEN[0]), _F32(_ERF32_DEN[1]))
    for c in _ERF32_DEN[2:]:
        q = _fma32(x2, q, _F32(c))
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = p / q
    return np.where(np.abs(x) >= _F32(3.832506856900711), np.copysign(_F32(1), x), ratio)


def erf(x):
    """``erf(x)`` as XLA computes it: the C library's in float64, Eigen's rational in
    float32 (half precision goes through float32)."""
    x = np.asarray(x)
    if x.dtype == _F64:
        return _ftz(np.asarray(_LIBM_ERF(_daz(x)), dtype=_F64))
    return _erf32(x).astype(x.dtype, copy=False)


# ------------------------------------------------------------------ pow

def _libm_pow32():
    """The C library's ``powf`` (what XLA calls for float32 pow), or None."""
    import ctypes
    import ctypes.util
    name = ctypes.util.find_library("m")
    try:
        lib = ctypes.CDLL(name) if name else None
        fn = lib.powf if lib is not None else None
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_float
    fn.argtypes = [ctypes.c_float, ctypes.c_float]
    return np.frompyfunc(lambda a, b: fn(a, b), 2, 1)


def _pow64_scalar(a, b):
    try:
        return math.pow(a, b)
    except (ValueError, OverflowError):     # (C's pow gives inf or nan here)
        with np.errstate(all="ignore"):
            return float(np.power(np.float64(a), np.float64(b)))


_POW32 = _libm_pow32()
_POW64 = np.frompyfunc(_pow64_scalar, 2, 1)


def _flush32(x):
    """XLA flushes float32 denormal results to zero."""
    return np.where(np.abs(x) < _MIN_NORMAL32, _F32(0) * x, x)


def power(x, y):
    """``x ** y`` as XLA computes it: the C library's ``pow``/``powf``, denormal results
    flushed to zero (float32, float64; half precision goes through ``powf``).  Not
    reproduced: a denormal ``x`` (the C library, run by XLA with denormals read as
    zero, normalizes it into a wrong value or zero; here the right value)."""
    x, y = np.broadcast_arrays(np.asarray(x), np.asarray(y))
    dt = np.result_type(x, y)
    if dt == _F64:
        with np.errstate(all="ignore"):
            return _ftz(np.asarray(_POW64(x.astype(_F64), y.astype(_F64)), dtype=_F64))
    if _POW32 is None:
        return np.power(x, y)
    out = np.asarray(_POW32(x.astype(_F32), y.astype(_F32)), dtype=_F32)
    return _flush32(out).astype(dt, copy=False)


# ------------------------------------------------------------------ device values

def _on_host(f):
    """The bit-level tricks above (int views of floats, the C library's log per
    element) are the host's: a device value (a CuPy key's samples) is computed on the
    host and moved back to its array module, so the numbers stay XLA's."""
    @functools.wraps(f)
    def run(*args):
        from astjax import device
        xp = device.tree_module(args)
        if xp is np:
            return f(*args)
        return xp.asarray(f(*device.device_get(args)))
    return run


fma, log, log1p, erf_inv, erf, power = (_on_host(_f) for _f in (
    fma, log, log1p, erf_inv, erf, power))


# ------------------------------------------------------------------ rsqrt

# XLA's CPU rsqrt (what it makes of ``1 / sqrt(d)``), read from jaxlib 0.10's dumped
# LLVM IR and assembly: an x86 approximate reciprocal square root refined by Newton
# steps that LLVM contracts into fmas, ``y = fma(-y/2, fma(x*y, y, -1), y)``.
# float32: ``vrsqrtss``/``vrsqrtps`` (12 bits; its table differs between Intel and
# AMD) and one step; float64 with AVX-512: ``vrsqrt14pd`` (14 bits, specified
# exactly) and two steps.  Zeros, infinities, negatives and denormals keep the raw
# estimate.  Only the instruction gives its bits, so this is C compiled on this CPU.
# float64 without AVX-512 (AVX2 machines, checked on an AMD EPYC): ``1 / sqrt(x)``,
# correctly rounded, denormals read as zero.
_STEP = """
        h = MUL(y, SET(-0.5)); e = FMA(MUL(v, y), y, SET(-1.0)); y = FMA(h, e, y);"""
_RSQRT_C = {
    "float32": r"""
#include <immintrin.h>
#include <string.h>
#if !defined(__SSE__) || !defined(__FMA__)
#error "no SSE rsqrt or no FMA: XLA's refinement cannot be reproduced here"
#endif
#define MUL _mm_mul_ss
#define FMA _mm_fmadd_ss
#define SET _mm_set_ss
void astjax_xla_rsqrt(const float *x, float *out, long n) {
    unsigned int csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040);    /* XLA runs with denormals as zero, flushed to zero */
    for (long i = 0; i < n; i++) {
        __m128 v = _mm_set_ss(x[i]), y0 = _mm_rsqrt_ss(v), y = y0, h, e;""" + _STEP + r"""
        unsigned int b;
        memcpy(&b, &x[i], sizeof b);
        /* refined: positive normals and NaN (mask 732 of XLA's is_fpclass) */
        int refine = (b >= 0x00800000u && b < 0x7f800000u) || (b & 0x7fffffffu) > 0x7f800000u;
        out[i] = _mm_cvtss_f32(refine ? y : y0);
    }
    _mm_setcsr(csr);
}
""",
    "float64": r"""
#include <immintrin.h>
#include <string.h>
#if !defined(__SSE2__) || (defined(__AVX512F__) && !defined(__FMA__))
#error "no SSE2, or AVX-512 without FMA: XLA's float64 rsqrt cannot be reproduced here"
#endif
#define MUL _mm_mul_sd
#define FMA _mm_fmadd_sd
#define SET _mm_set_sd
void astjax_xla_rsqrt(const double *x, double *out, long n) {
    unsigned int csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040);    /* XLA runs with denormals as zero, flushed to zero */
    for (long i = 0; i < n; i++) {
#if defined(__AVX512F__)
        __m128d v = _mm_set_sd(x[i]), y0 = _mm_rsqrt14_sd(v, v), y = y0, h, e;"""
    + _STEP + _STEP + r"""
        unsigned long long b;
        memcpy(&b, &x[i], sizeof b);
        /* refined: positive normals and NaN (mask 764) */
        int refine = (b >= 0x0010000000000000ull && b < 0x7ff0000000000000ull)
                     || (b & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
        out[i] = _mm_cvtsd_f64(refine ? y : y0);
#else
        /* no AVX-512: XLA divides by the square root */
        __m128d v = _mm_set_sd(x[i]);
        out[i] = _mm_cvtsd_f64(_mm_div_sd(_mm_set_sd(1.0), _mm_sqrt_sd(v, v)));
#endif
    }
    _mm_setcsr(csr);
}
""",
}
_rsqrt_fns: dict = {}        # dtype name -> ctypes function, or the reason there is none


def _rsqrt_kernel(dt):
    """The compiled estimate and refinement for ``dt``, or None (no compiler, not x86,
    no FMA): the reason is kept in ``_rsqrt_fns``."""
    name = np.dtype(dt).name
    if __name__ != "astjax.xlamath":     # a copy in an ``astjax gen`` module: NumPy only
        return None
    if name not in _rsqrt_fns:
        import ctypes
        import importlib
        cc = importlib.import_module("astjax.kernels.compile")
        try:
            fn = cc.build(_RSQRT_C[name], "astjax_xla_rsqrt")
        except (cc.AstjaxError, OSError) as e:   # CompilerUnavailable, KernelCompileError
            _rsqrt_fns[name] = f"{type(e).__name__}: {e}"
            return None
        fn.restype = None
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]
        _rsqrt_fns[name] = fn
    fn = _rsqrt_fns[name]
    return None if isinstance(fn, str) else fn


def _cpuinfo(field: str) -> str:
    """A field of ``/proc/cpuinfo`` ('' if unknown)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(field):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def cpu_vendor() -> str:
    """The CPU's vendor (``vendor_id``, '' if unknown): the approximate float32 rsqrt's
    bits are the vendor's, so recorded XLA results are too."""
    return _cpuinfo("vendor_id")


def cpu_has_avx512() -> bool:
    """Whether the CPU has AVX-512F: XLA's float64 rsqrt is ``vrsqrt14pd`` and Newton
    steps there, a division elsewhere, so recorded results are the feature's."""
    return "avx512f" in _cpuinfo("flags").split()


def rsqrt_exact_available(dtype=np.float32):
    """True when ``rsqrt`` of ``dtype`` runs XLA's own instruction sequence here."""
    return _rsqrt_kernel(dtype) is not None


def rsqrt(x):
    """``1 / sqrt(x)`` as XLA's CPU backend computes it: float32 and float64 as the
    hardware estimate plus XLA's Newton steps (float64 without AVX-512: a division),
    compiled here (bit for bit on the CPU jax runs on).  Without a compiler, off x86,
    or in the NumPy-only copy an ``astjax gen`` module carries: the correctly rounded
    ``1 / sqrt(x)`` (denormals read as zero), which differs from XLA's by an ulp or two
    for a few percent (float32) or a third (float64, AVX-512) of inputs.

    Half precision is exact everywhere without the kernel: XLA widens it to float32 and
    rounds the float32 result (within 2 ulps of ``1 / sqrt``) back, and for every one
    of the 2**16 half-precision inputs ``1 / sqrt(x)`` lies at least 3 float32 ulps
    from a half-precision rounding boundary, so the correctly rounded value is XLA's
    whatever the CPU's estimate."""
    x = np.asarray(x)
    if x.dtype.kind != "f":
        x = x.astype(_F64)
    elif x.dtype not in (_F32, _F64):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(1.0 / np.sqrt(x.astype(_F64))).astype(x.dtype)
    fn = _rsqrt_kernel(x.dtype)
    if fn is None:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(x.dtype.type(1) / np.sqrt(_daz(x)))
    src = np.require(x, requirements="C")     # (ascontiguousarray makes 0-d 1-d)
    out = np.empty(src.shape, src.dtype)
    fn(src.ctypes.data, out.ctypes.data, src.size)
    return out


rsqrt = _on_host(rsqrt)
