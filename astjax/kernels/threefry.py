"""The threefry2x32 cipher and the samplers built on it, as one compiled C kernel.

``astjax.random`` hashes one counter per element; in NumPy that is ~80 passes over
the arrays (uint32 adds, rotations, xors) and the samplers' transcendental functions
(``astjax.xlamath``) as many more.  Here each element runs the 20 rounds, the
uniform's bit trick and ``erf_inv``/``log1p`` in registers: one pass, no temporaries.
The arithmetic is the NumPy path's, operation for operation (``fmaf``/``fma`` where
XLA fuses, the C library's ``log`` where XLA calls it, constants written as the exact
hexadecimal of the NumPy ``float32`` values), so results are bit-identical to it; the
tests check that.

Compiled through ``kernels/compile.py``'s cache (its flags forbid contraction; the
fused operations here are explicit calls).  Without a C compiler ``available()`` is
false and ``astjax.random`` stays on NumPy.
"""
from __future__ import annotations

import ctypes
import functools

import numpy as np

from astjax import xlamath

# below this many elements the ctypes call costs more than NumPy's passes
MIN_SIZE = 4096


def _f(v):
    """A float32 constant as an exact C literal."""
    return float(np.float32(v)).hex() + "f"


def _d(v):
    return float(v).hex()


def _source() -> str:
    p = xlamath._LOG_P
    s32, l32 = xlamath._ERFINV32_SMALL, xlamath._ERFINV32_LARGE
    erfinv32_steps = "\n".join(
        f"    p = fmaf(p, t, small ? {_f(a)} : {_f(b)});" for a, b in zip(s32[1:], l32[1:]))
    num32 = "\n".join(f"    num = fmaf(num, x, {_f(c)});" for c in xlamath._LOG1P_NUM)
    den32 = "\n".join(f"    den = fmaf(den, x, {_f(c)});" for c in xlamath._LOG1P_DEN)
    num64 = "\n".join(f"    num = fma(num, x, {_d(c)});" for c in xlamath._LOG1P_NUM)
    den64 = "\n".join(f"    den = fma(den, x, {_d(c)});" for c in xlamath._LOG1P_DEN)
    regions = []
    for bound, shift, root, coeffs in xlamath._ERFINV64:
        cond = "1" if bound == np.inf else f"w < {_d(bound)}"
        steps = "\n".join(f"        p = fma(p, t, {_d(c)});" for c in coeffs[1:])
        arg = "sqrt(w)" if root else "w"
        regions.append(f"""    {"if" if not regions else "else if"} ({cond} && w == w) {{
        double t = {arg} - {_d(shift)};
        double p = {_d(coeffs[0])};
{steps}
        out = p;
    }}""")
    regions64 = "\n".join(regions)
    return f"""
#include <math.h>
#include <stdint.h>
#include <string.h>

/* Let the vectorizer evaluate both sides of a selection (sqrt of a negative lane that
   is then discarded): it changes no value, only which floating-point flags get set. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize ("no-trapping-math")
#endif

static inline uint32_t rotl(uint32_t v, int r) {{ return (v << r) | (v >> (32 - r)); }}

static inline void threefry(uint32_t k0, uint32_t k1, uint32_t x0, uint32_t x1,
                            uint32_t *o0, uint32_t *o1) {{
    static const int rot[2][4] = {{{{13, 15, 26, 6}}, {{17, 29, 16, 24}}}};
    uint32_t ks[3] = {{k0, k1, k0 ^ k1 ^ 0x1BD11BDAu}};
    uint32_t a = x0 + ks[0], b = x1 + ks[1];
    for (int i = 0; i < 5; i++) {{
        for (int j = 0; j < 4; j++) {{
            a += b;
            b = rotl(b, rot[i % 2][j]);
            b ^= a;
        }}
        a += ks[(i + 1) % 3];
        b += ks[(i + 2) % 3] + (uint32_t)(i + 1);
    }}
    *o0 = a;
    *o1 = b;
}}

/* bit casts through pointers: kernels/compile.py builds with -fno-strict-aliasing */
static inline float as_float(uint32_t u) {{ return *(float *)&u; }}
static inline double as_double(uint64_t u) {{ return *(double *)&u; }}
static inline uint32_t float_bits(float f) {{ return *(uint32_t *)&f; }}

static inline float log32(float x0) {{
    float x = x0 >= 0x1p-126f ? x0 : 0x1p-126f;
    uint32_t bits = float_bits(x);
    int32_t exponent = (int32_t)(bits >> 23) - 0x7F;
    float mant = as_float((bits & ~0x7F800000u) | 0x3F000000u);
    float e = 1.0f + (float)exponent;
    int below = mant < {_f(0.707106781186547524)};
    float m = mant - 1.0f;
    e = e - (below ? 1.0f : 0.0f);
    m = m + (below ? mant : 0.0f);
    float m2 = m * m, m3 = m2 * m;
    float y0 = fmaf(m, {_f(p[0])}, {_f(p[1])});
    float y1 = fmaf(m, {_f(p[3])}, {_f(p[4])});
    float y2 = fmaf(m, {_f(p[6])}, {_f(p[7])});
    y0 = fmaf(y0, m, {_f(p[2])});
    y1 = fmaf(y1, m, {_f(p[5])});
    y2 = fmaf(y2, m, {_f(p[8])});
    y0 = fmaf(y0, m3, y1);
    float poly = fmaf(y0, m3, y2);
    float tail = fmaf(poly, m3, {_f(-2.12194440e-4)} * e);
    float head = fmaf(-0.5f, m2, m);
    float out = fmaf({_f(0.693359375)}, e, head + tail);
    out = x0 < 0x1p-126f ? -INFINITY : out;       /* zero, and denormals (flushed) */
    out = x0 == INFINITY ? INFINITY : out;
    return (x0 < 0.0f || x0 != x0) ? NAN : out;
}}

static inline float log1p32(float x) {{
    float large = log32(x + 1.0f);
    float x2 = x * x;
    float num = 0.0f, den = 0.0f;
{num32}
{den32}
    float small = (x * x2) * (num / den);
    small = x + fmaf(-0.5f, x2, small);
    return fabsf(x) < {_f(0.41421356237309504880)} ? small : large;
}}

static inline float erfinv32(float x) {{
    float w = -log1p32(x * -x);
    int small = w < 5.0f;
    float root = sqrtf(w);
    float t = small ? w - 2.5f : root - 3.0f;
    float p = small ? {_f(s32[0])} : {_f(l32[0])};
{erfinv32_steps}
    return fabsf(x) == 1.0f ? x * INFINITY : p * x;
}}

static double log1p64(double x) {{
    double large = log(x + 1.0);
    double x2 = x * x;
    double num = 0.0, den = 0.0;
{num64}
{den64}
    double small = (x * x2) * (num / den);
    small = x + fma(-0.5, x2, small);
    return fabs(x) < {_d(0.41421356237309504880)} ? small : large;
}}

static double erfinv64(double x) {{
    double w = -log1p64(x * -x);
    double out = 0.0;
{regions64}
    return fabs(x) == 1.0 ? x * INFINITY : out * x;
}}

/* out[i * nk + j]: the sample for counter i under key j (keys k0[j], k1[j]).
   kind: 0 bits32, 1 both words (a, b), 2 uniform32, 3 normal32, 4 exponential32,
   5 uniform64, 6 normal64, 7 exponential64.  lo, hi: the uniform's bounds.
   One loop per kind, so that each is straight-line code the compiler vectorizes. */
#define LOOP(BODY) \
    if (nk == 1) {{ \
        const uint32_t key0 = k0[0], key1 = k1[0]; \
        _Pragma("omp parallel for schedule(static) if (n > 262144)") \
        for (int64_t i = 0; i < n; i++) {{ \
            uint32_t a, b; \
            int64_t at = i; \
            threefry(key0, key1, (uint32_t)((uint64_t)i >> 32), (uint32_t)i, &a, &b); \
            BODY \
        }} \
    }} else \
    _Pragma("omp parallel for schedule(static) if (n * nk > 262144)") \
    for (int64_t i = 0; i < n; i++) {{ \
        uint32_t x0 = (uint32_t)((uint64_t)i >> 32), x1 = (uint32_t)i; \
        for (int64_t j = 0; j < nk; j++) {{ \
            uint32_t a, b; \
            int64_t at = i * nk + j; \
            threefry(k0[j], k1[j], x0, x1, &a, &b); \
            BODY \
        }} \
    }}

static inline float unit32(uint32_t a, uint32_t b, float lo, float span) {{
    float f = as_float(((a ^ b) >> 9) | 0x3F800000u) - 1.0f;
    float x = fmaf(f, span, lo);
    return lo > x ? lo : x;           /* np.maximum(lo, x): never NaN here */
}}

static inline double unit64(uint32_t a, uint32_t b, double lo, double span) {{
    uint64_t w = ((uint64_t)a << 32) | b;
    double f = as_double((w >> 12) | 0x3FF0000000000000ull) - 1.0;
    double x = fma(f, span, lo);
    return lo > x ? lo : x;
}}

void astjax_threefry(const uint32_t *k0, const uint32_t *k1, int64_t nk, int64_t n,
                     int kind, double lo, double hi, void *out, void *out2) {{
    float lo32 = (float)lo, span32 = (float)hi - (float)lo;
    double span64 = hi - lo;
    uint32_t *u = (uint32_t *)out, *u2 = (uint32_t *)out2;
    float *f = (float *)out;
    double *d = (double *)out;
    switch (kind) {{
    case 0: LOOP(u[at] = a ^ b;) break;
    case 1: LOOP(u[at] = a; u2[at] = b;) break;
    case 2: LOOP(f[at] = unit32(a, b, lo32, span32);) break;
    case 3: LOOP(f[at] = {_f(np.sqrt(2))} * erfinv32(unit32(a, b, lo32, span32));) break;
    case 4: LOOP(f[at] = -log1p32(-unit32(a, b, lo32, span32));) break;
    case 5: LOOP(d[at] = unit64(a, b, lo, span64);) break;
    case 6: LOOP(d[at] = {_d(np.sqrt(2))} * erfinv64(unit64(a, b, lo, span64));) break;
    case 7: LOOP(d[at] = -log1p64(-unit64(a, b, lo, span64));) break;
    }}
}}
"""


@functools.lru_cache(maxsize=1)
def _kernel():
    """The compiled entry point, or None where no C compiler works."""
    from astjax.kernels import compile as cc
    ok, _ = cc.available()
    if not ok:
        return None
    try:
        fn = cc.build(_source(), "astjax_threefry")
    except Exception:   # a broken toolchain: stay on NumPy
        return None
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                   ctypes.c_int, ctypes.c_double, ctypes.c_double, ctypes.c_void_p,
                   ctypes.c_void_p]
    return fn


def available() -> bool:
    return _kernel() is not None


_KINDS = {("uniform", 4): 2, ("normal", 4): 3, ("exponential", 4): 4,
          ("uniform", 8): 5, ("normal", 8): 6, ("exponential", 8): 7}


def _keys(k):
    k = np.asarray(k, np.uint32)
    flat = k.reshape(2, -1)
    return np.ascontiguousarray(flat[0]), np.ascontiguousarray(flat[1]), k.shape[1:]


def _run(k, shape, kind, lo=0.0, hi=1.0, dtype=np.uint32, both=False):
    fn = _kernel()
    k0, k1, kb = _keys(k)
    n = int(np.prod(shape, dtype=np.int64))
    out = np.empty(tuple(shape) + tuple(kb), dtype)
    out2 = np.empty(tuple(shape) + tuple(kb), np.uint32) if both else None
    fn(k0.ctypes.data, k1.ctypes.data, k0.size, n, kind, float(lo), float(hi),
       out.ctypes.data, None if out2 is None else out2.ctypes.data)
    return (out, out2) if both else out


def wanted(shape, k) -> bool:
    """Whether the kernel should draw ``shape`` under keys ``k`` (``(2, *kb)``)."""
    size = int(np.prod(shape, dtype=np.int64)) * int(np.prod(np.shape(k)[1:], dtype=np.int64))
    return size >= MIN_SIZE and available()


def hash_words(k, shape):
    """Both cipher words ``(a, b)`` for every counter of ``shape``: ``(*shape, *kb)``."""
    return _run(k, shape, 1, both=True)


def bits32(k, shape):
    return _run(k, shape, 0)


def sample(name, k, shape, dt, lo=0.0, hi=1.0):
    """``uniform``/``normal``/``exponential`` floats (float32 or float64) fused with the
    cipher; None for a dtype the kernel does not draw."""
    kind = _KINDS.get((name, np.dtype(dt).itemsize)) if np.dtype(dt).kind == "f" else None
    if kind is None:
        return None
    return _run(k, shape, kind, lo, hi, np.dtype(dt))
