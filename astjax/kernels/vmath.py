"""Vectorizable transcendental functions for the C kernels (``vm_exp``, ``vm_tanhf``...).

libm's ``exp``, ``tanh``, ... are scalar calls gcc cannot vectorize, so a kernel
calling them ran 4-40x slower than NumPy's SIMD loops.  These are branch-free C99
(selects instead of ``if``, integer bit operations instead of ``frexp``/``ldexp``,
no table lookups but sin/cos/tan's digits of 2/pi), so they inline into a
kernel's ``#pragma omp simd`` loop and gcc vectorizes them with the loop.  Every one
uses only operations AVX2 has for 64-bit lanes: no double <-> int64 conversions
(integers travel through the ``1.5 * 2^52`` "shift" constant, and back through
``2^52 + i``), no arithmetic 64-bit shifts.

Numerics (checked by ``tests/test_kernel_vmath.py`` against NumPy on 10^5-10^6
points per function and dtype, within 2 ulp): Cody-Waite range reduction with
split constants (``LN2HI`` has trailing zero bits, so ``n * LN2HI`` is exact),
polynomials fitted on the reduced interval (Chebyshev fits, ``mpmath.chebyfit``,
of the part beyond the leading terms, so the leading term is exact and the
polynomial's error is scaled down by the argument), and the special values NumPy
gives: NaN propagates, ``+-inf``, ``-0.0`` kept where the function is odd,
overflow to ``inf`` and gradual underflow at the same thresholds.  exp, expm1, log,
log1p and tanh have float32 versions computed in float32 (16 lanes); sin, cos and
tan a float32 reduction (24-bit mantissas need five digits of 2/pi); the other
float32 functions evaluate the float64 ones on the widened argument and round once
(within 1 ulp of the correctly rounded value).  The float32 exp and tanh evaluate
their polynomials with fused multiply-adds where the CPU has them (``VM_FMAF``: the
dependency chain, not the operation count, bounds these loops; tanh at 65,536
float32 took 86 us, 71 with them; both within 1 ulp of the float64 value rounded, on
every float32 in exp's range and in tanh's |x| in [2^-40, 12)).  sin, cos and tan
reduce exactly for every argument (Payne-Hanek: the digits of 2/pi that matter at
the argument's exponent, read from a table, every product exact, summed in
triple-double).

``needed(names)`` gives the C text of the named functions and what they call, in
dependency order; ``C_NAMES`` maps a NumPy ufunc to its function name.
"""
from __future__ import annotations

# NumPy ufunc -> the float64 function's name (the float32 one adds ``f``)
C_NAMES = {
    "exp": "vm_exp", "exp2": "vm_exp2", "expm1": "vm_expm1", "log": "vm_log",
    "log2": "vm_log2", "log10": "vm_log10", "log1p": "vm_log1p", "tanh": "vm_tanh",
    "sinh": "vm_sinh", "cosh": "vm_cosh", "arctan": "vm_atan", "arctan2": "vm_atan2",
    "arcsin": "vm_asin", "arccos": "vm_acos", "arcsinh": "vm_asinh",
    "arccosh": "vm_acosh", "arctanh": "vm_atanh", "sin": "vm_sin", "cos": "vm_cos",
    "tan": "vm_tan",
}

_EXP = ['0x1.0000000000000p-1', '0x1.5555555555557p-3', '0x1.5555555555556p-5',
        '0x1.111111111007ep-7', '0x1.6c16c16c1629fp-10', '0x1.a01a01ac1adebp-13',
        '0x1.a01a01a6f59a9p-16', '0x1.71de0190b33a1p-19', '0x1.27e4db08819d2p-22',
        '0x1.af4f375ba602bp-26', '0x1.1f73c205d8d57p-29']
_LOG = ['0x1.5555555555558p-1', '0x1.9999999995168p-2', '0x1.2492492e1b13bp-2',
        '0x1.c71c62b04aca1p-3', '0x1.7462c3c948798p-3', '0x1.39fc6abdbe06bp-3',
        '0x1.2b7078d7a1e97p-3']
_ATAN = ['-0x1.5555555555555p-2', '0x1.99999999998c4p-3', '-0x1.2492492485417p-3',
         '0x1.c71c71bd21787p-4', '-0x1.745d154ac3da3p-4', '0x1.3b1375a0eb258p-4',
         '-0x1.110c9a0c8644ap-4', '0x1.e1704532a7e28p-5', '-0x1.ab582fd05ec97p-5',
         '0x1.6ffb4e901f5dbp-5', '-0x1.0f54730d6c30ep-5', '0x1.e3ddb8d3850abp-7']
_TANH = ['-0x1.5555555555555p-2', '0x1.1111111111032p-3', '-0x1.ba1ba1b9feb3cp-5',
         '0x1.664f48770be76p-6', '-0x1.226e32eebbb26p-7', '0x1.d6d338edc6017p-9',
         '-0x1.7d97cb7a94b76p-10', '0x1.34c57de48a611p-11', '-0x1.ec0e9550d42c9p-13',
         '0x1.64f707d11ba4fp-14', '-0x1.59962093e21d1p-16']
_SINH = ['0x1.5555555555555p-3', '0x1.11111111110fdp-7', '0x1.a01a01a01ee7ap-13',
         '0x1.71de3a4e14331p-19', '0x1.ae6460fbb232dp-26', '0x1.611cb2cbad2e9p-33',
         '0x1.b412579180c3cp-41']
_ASIN = ['0x1.5555555555556p-3', '0x1.3333333332ec4p-4', '0x1.6db6db6e3292ep-5',
         '0x1.f1c71c1d4aa0dp-6', '0x1.6e8bb1d89492bp-6', '0x1.1c4d343fa57f6p-6',
         '0x1.c9cf3759fd8ffp-7', '0x1.78246f32d075cp-7', '0x1.524ea8b3aad31p-7',
         '0x1.653a8f8cfd43dp-8', '0x1.1d661531b222ep-6', '-0x1.e7a24f548c99dp-7',
         '0x1.d78189767524ep-6']


def _horner(var: str, coeffs) -> str:
    """``c0 + var * (c1 + var * (...))`` with the hex-float coefficients."""
    text = coeffs[-1]
    for c in reversed(coeffs[:-1]):
        text = f"{c} + {var} * ({text})"
    return text.replace("+ -", "- ")


def _fma_horner(var: str, coeffs) -> str:
    """``_horner`` with each step one ``VM_FMAF`` (a fused multiply-add where the CPU
    has one: half the latency of the chain, which bounds these loops)."""
    text = coeffs[-1]
    for c in reversed(coeffs[:-1]):
        text = f"VM_FMAF({var}, {text}, {c})"
    return text


# name -> (functions it calls, C text); the text uses only earlier names
_PARTS = {}


def _part(name, deps, text):
    _PARTS[name] = (tuple(deps), text)


_part("vm_bits", (), """\
/* ---- astjax vmath: branch-free float64 functions (float32 through float64) ---- */
#define VM_SHIFT 0x1.8p52
#define VM_LN2HI 0x1.62e42fee00000p-1
#define VM_LN2LO 0x1.a39ef35793c76p-33
#define VM_INVLN2 0x1.71547652b82fep+0
#define VM_PIO2HI 0x1.921fb54442d18p+0
#define VM_PIO2LO 0x1.1a62633145c07p-54
#if defined(__GNUC__)
#define VM_INLINE static inline __attribute__((always_inline))
#else
#define VM_INLINE static inline
#endif
typedef union { double d; uint64_t u; } vm_du;
VM_INLINE uint64_t vm_bits(double x) { vm_du v; v.d = x; return v.u; }
VM_INLINE double vm_double(uint64_t u) { vm_du v; v.u = u; return v.d; }
/* 2^n for an integer n in [-1022, 1023] */
VM_INLINE double vm_pow2(int64_t n) { return vm_double((uint64_t)(n + 1023) << 52); }
/* p * 2^n for |n| < 2000, in two exact steps so the result rounds once */
VM_INLINE double vm_scale(double p, int64_t n) {
    const int64_t h = (int64_t)((uint64_t)(n + 4096) >> 1) - 2048;
    return p * vm_pow2(h) * vm_pow2(n - h);
}
/* the integer-valued double d (|d| < 2^51) as an int64, through the shift constant */
VM_INLINE int64_t vm_toint(double d) {
    return (int64_t)(vm_bits(d + VM_SHIFT) - vm_bits(VM_SHIFT));
}
/* c ? a : b as bit operations: a ternary that feeds a long computation is a branch
   gcc may thread, specializing the computation for a constant (which it then cannot
   if-convert when the constant path overflows); this select is never a branch */
VM_INLINE double vm_sel(int c, double a, double b) {
    const uint64_t m = (uint64_t)0 - (uint64_t)(c != 0);
    return vm_double((vm_bits(a) & m) | (vm_bits(b) & ~m));
}
""")

_part("vm_expm1_poly", ("vm_bits",), f"""\
/* x = n ln2 + hi + lo, |hi + lo| <= ln2/2, for |x| < 2^11: returns hi (x - n LN2HI,
   exact), lo in *lo and n as a double in *nd */
VM_INLINE double vm_exp_reduce(double x, double *nd, double *lo) {{
    const double n = (x * VM_INVLN2 + VM_SHIFT) - VM_SHIFT;
    *nd = n;
    *lo = -(n * VM_LN2LO);
    return x - n * VM_LN2HI;
}}
/* e^r - 1 - r for |r| <= ln2/2: r^2 times a fitted polynomial */
VM_INLINE double vm_expm1_tail(double r) {{
    return r * r * ({_horner("r", _EXP)});
}}
/* a + b = s + *err exactly (Knuth's two-sum) */
VM_INLINE double vm_two_sum(double a, double b, double *err) {{
    const double s = a + b;
    const double bb = s - a;
    *err = (a - (s - bb)) + (b - bb);
    return s;
}}
""")

_part("vm_exp", ("vm_expm1_poly",), """\
/* e^x * 2^extra (sinh and cosh ask for e^x / 2, which overflows later than e^x);
   arguments beyond the clamps are computed as 0 and their result selected after, so
   no branch of the computation is a constant that overflows (gcc would not
   if-convert it) */
VM_INLINE double vm_exp_scaled(double x, int64_t extra) {
    const int high = isgreater(x, 711.0), low = isless(x, -746.0);
    const double v = vm_sel(high | low, 0.0, x);
    double n, lo;
    const double hi = vm_exp_reduce(v, &n, &lo);
    const double r = hi + lo;
    const double res = vm_scale(1.0 + (hi + (lo + vm_expm1_tail(r))), vm_toint(n) + extra);
    return vm_sel(high, (double)INFINITY, vm_sel(low, 0.0, res));
}
VM_INLINE double vm_exp(double x) { return vm_exp_scaled(x, 0); }
""")

_part("vm_exp2", ("vm_expm1_poly",), """\
VM_INLINE double vm_exp2(double x) {
    const int high = isgreater(x, 1025.0), low = isless(x, -1080.0);
    const double v = vm_sel(high | low, 0.0, x);
    const double n = (v + VM_SHIFT) - VM_SHIFT;
    const double r = (v - n) * 0x1.62e42fefa39efp-1;
    const double res = vm_scale(1.0 + (r + vm_expm1_tail(r)), vm_toint(n));
    return vm_sel(high, (double)INFINITY, vm_sel(low, 0.0, res));
}
""")

_part("vm_expm1", ("vm_expm1_poly",), """\
/* e^x - 1 = 2^n (em + 1) - 1, em = e^r - 1 = hi + lo + tail, the big terms added
   with two-sum so nothing cancels */
VM_INLINE double vm_expm1(double x) {
    const int high = isgreater(x, 711.0), low = isless(x, -40.0);
    const double v = vm_sel(high | low, 0.0, x);
    double nd, lo;
    const double hi = vm_exp_reduce(v, &nd, &lo);
    const double rest = lo + vm_expm1_tail(hi + lo);
    const int64_t n = vm_toint(nd);
    const int64_t nc = n > 100 ? 100 : (n < -100 ? -100 : n);
    double e1, e2;
    const double s1 = vm_two_sum(1.0 - vm_pow2(-nc), hi, &e1);        /* n > 0 */
    const double up = vm_scale(s1 + (e1 + rest), n);
    const double p2 = vm_pow2(nc);
    const double s2 = vm_two_sum(p2 - 1.0, p2 * hi, &e2);              /* n < 0 */
    const double down = s2 + (e2 + p2 * rest);
    const double res = vm_sel(n == 0, hi + rest, vm_sel(n > 0, up, down));
    return vm_sel(high, (double)INFINITY, vm_sel(low, -1.0, vm_sel(x == 0.0, x, res)));
}
""")

_part("vm_log_core", ("vm_bits",), f"""\
/* x > 0 finite = 2^k (1 + f), sqrt(1/2) <= 1 + f < sqrt(2): returns f (exact), k in *k */
VM_INLINE double vm_log_split(double x, double *k) {{
    const int sub = isless(x, 0x1p-1022);
    const double xs = vm_sel(sub, x * 0x1p54, x);
    const uint64_t ix = vm_bits(xs) + (0x3ff0000000000000ULL - 0x3fe6a09e667f3bcdULL);
    const uint64_t e = ix >> 52;
    *k = (vm_double(0x4330000000000000ULL | e) - (0x1p52 + 1023.0)) - vm_sel(sub, 54.0, 0.0);
    return vm_double((ix & 0x000fffffffffffffULL) + 0x3fe6a09e667f3bcdULL) - 1.0;
}}
/* log(1 + f) = f - hfsq + corr, hfsq = f^2 / 2 (s = f / (2 + f), log(1 + f) = 2 atanh s) */
VM_INLINE double vm_log_corr(double f, double *hfsq) {{
    const double s = f / (2.0 + f);
    const double z = s * s;
    const double t = z * ({_horner("z", _LOG)});
    const double h = 0.5 * f * f;
    *hfsq = h;
    return s * (h + t);
}}
/* the special values of a logarithm at x (r: the value computed for 0 < x < inf) */
VM_INLINE double vm_log_special(double x, double r) {{
    return vm_sel(isgreater(x, 0.0) & isless(x, (double)INFINITY), r,
                  vm_sel(x == 0.0, -(double)INFINITY, vm_sel(isless(x, 0.0), (double)NAN, x)));
}}
""")

_part("vm_log", ("vm_log_core",), """\
VM_INLINE double vm_log(double x) {
    double k, hfsq;
    const double f = vm_log_split(x, &k);
    const double corr = vm_log_corr(f, &hfsq);
    return vm_log_special(x, k * VM_LN2HI - ((hfsq - (corr + k * VM_LN2LO)) - f));
}
""")

_part("vm_log2", ("vm_log_core",), """\
/* log(1 + f) split hi + lo, hi with 21 significant bits so hi * (1/ln2)_hi is exact */
VM_INLINE double vm_log2(double x) {
    double k, hfsq;
    const double f = vm_log_split(x, &k);
    const double corr = vm_log_corr(f, &hfsq);
    const double hi = vm_double(vm_bits(f - hfsq) & 0xffffffff00000000ULL);
    const double lo = ((f - hi) - hfsq) + corr;
    const double vhi = hi * 0x1.7154765200000p+0;
    double vlo = (lo + hi) * 0x1.705fc2eefa200p-33 + lo * 0x1.7154765200000p+0;
    const double w = k + vhi;
    vlo += (k - w) + vhi;
    return vm_log_special(x, vlo + w);
}
""")

_part("vm_log10", ("vm_log_core",), """\
VM_INLINE double vm_log10(double x) {
    double k, hfsq;
    const double f = vm_log_split(x, &k);
    const double corr = vm_log_corr(f, &hfsq);
    const double hi = vm_double(vm_bits(f - hfsq) & 0xffffffff00000000ULL);
    const double lo = ((f - hi) - hfsq) + corr;
    const double y = k * 0x1.34413509f6000p-2;
    const double vhi = hi * 0x1.bcb7b15200000p-2;
    double vlo = k * 0x1.9fef311f12b36p-42 + (lo + hi) * 0x1.b9438ca9aadd5p-36 +
                 lo * 0x1.bcb7b15200000p-2;
    const double w = y + vhi;
    vlo += (y - w) + vhi;
    return vm_log_special(x, vlo + w);
}
""")

_part("vm_log1p", ("vm_log_core",), """\
/* log(u) + c / u, u = 1 + x rounded and c = (1 + x) - u exactly */
VM_INLINE double vm_log1p(double x) {
    const double u = 1.0 + x;
    const double c = vm_sel(isless(x, 0x1p53), x - (u - 1.0), 0.0);
    const double cu = vm_sel(c == 0.0, 0.0, c / u);
    double k, hfsq;
    const double f = vm_log_split(u, &k);
    const double corr = vm_log_corr(f, &hfsq);
    const double r = k * VM_LN2HI - ((hfsq - (corr + (k * VM_LN2LO + cu))) - f);
    return vm_sel(x == 0.0, x, vm_log_special(u, r));
}
""")

_part("vm_tanh", ("vm_exp",), f"""\
/* |x| < 0.55: x + x^3 p(x^2); else 1 - 2 / (e^2|x| + 1) (1 beyond 22) */
VM_INLINE double vm_tanh(double x) {{
    const double a = fabs(x);
    const double as = vm_sel(isless(a, 0.55), a, 0.0);
    const double z = as * as;
    const double small = as + as * z * ({_horner("z", _TANH)});
    const double ab = vm_sel(isless(a, 0.55), 0.55, vm_sel(isgreater(a, 22.0), 22.0, a));
    const double big = 1.0 - 2.0 / (vm_exp(2.0 * ab) + 1.0);
    return copysign(vm_sel(isless(a, 0.55), small, big), x);
}}
""")

_part("vm_sinh", ("vm_exp",), f"""\
/* |x| < 1: x + x^3 p(x^2); < 22: (e - 1/e) / 2; else e^|x| / 2 */
VM_INLINE double vm_sinh(double x) {{
    const double a = fabs(x);
    const double as = vm_sel(isless(a, 1.0), a, 0.0);
    const double z = as * as;
    const double small = as + as * z * ({_horner("z", _SINH)});
    const double e = vm_exp(vm_sel(isless(a, 1.0), 1.0, vm_sel(isgreater(a, 22.0), 22.0, a)));
    const double mid = 0.5 * e - 0.5 / e;
    const double big = vm_exp_scaled(a, -1);
    return copysign(vm_sel(isless(a, 1.0), small, vm_sel(isless(a, 22.0), mid, big)), x);
}}
""")

_part("vm_cosh", ("vm_exp",), """\
VM_INLINE double vm_cosh(double x) {
    const double a = fabs(x);
    const double e = vm_exp(vm_sel(isgreater(a, 22.0), 22.0, a));
    const double small = 0.5 * e + 0.5 / e;
    return vm_sel(isless(a, 22.0), small, vm_exp_scaled(a, -1));
}
""")

_part("vm_atan", ("vm_bits",), f"""\
/* atan|x| = atan(c) + atan(y), y = (|x| - c) / (1 + c|x|), c in 0, 1/2, 1, 3/2, inf;
   |y| <= 7/16 and atan(y) = y + y^3 p(y^2) */
VM_INLINE double vm_atan(double x) {{
    const double a = fabs(x);
    const int r0 = isless(a, 0.4375), r1 = isless(a, 0.6875);
    const int r2 = isless(a, 1.1875), r3 = isless(a, 2.4375);
    const double num = vm_sel(r0, a, vm_sel(r1, 2.0 * a - 1.0, vm_sel(r2, a - 1.0,
                       vm_sel(r3, a - 1.5, -1.0))));
    const double den = vm_sel(r0, 1.0, vm_sel(r1, 2.0 + a, vm_sel(r2, a + 1.0,
                       vm_sel(r3, 1.0 + 1.5 * a, a))));
    const double hi = vm_sel(r0, 0.0, vm_sel(r1, 0x1.dac670561bb4fp-2,
                      vm_sel(r2, 0x1.921fb54442d18p-1, vm_sel(r3, 0x1.f730bd281f69bp-1,
                      VM_PIO2HI))));
    const double lo = vm_sel(r0, 0.0, vm_sel(r1, 0x1.a2b7f222f65e2p-56,
                      vm_sel(r2, 0x1.1a62633145c07p-55, vm_sel(r3, 0x1.007887af0cbbdp-56,
                      VM_PIO2LO))));
    const double y = num / den;
    const double z = y * y;
    const double tail = y * z * ({_horner("z", _ATAN)});
    const double res = hi + (y + (tail + lo));
    return copysign(vm_sel(a != a, x, res), x);
}}
""")

_part("vm_atan2", ("vm_atan",), """\
/* atan(|y| / |x|) placed in its quadrant, with IEEE's values at zeros and infinities */
VM_INLINE double vm_atan2(double y, double x) {
    const double ay = fabs(y), ax = fabs(x);
    const int infs = (ay == (double)INFINITY) & (ax == (double)INFINITY);
    const int zeros = (ay == 0.0) & (ax == 0.0);
    const double q = vm_sel(infs, 1.0, vm_sel(zeros, 0.0, ay / ax));
    const double t = vm_atan(q);
    const double res = vm_sel((int)(vm_bits(x) >> 63),
                              (0x1.921fb54442d18p+1 - t) + 0x1.1a62633145c07p-53, t);
    return copysign(vm_sel((x != x) | (y != y), x + y, res), y);
}
""")

_part("vm_asin", ("vm_bits",), f"""\
/* asin(s) - s for 0 <= s <= 1/2: s^3 p(s^2) */
VM_INLINE double vm_asin_tail(double s) {{
    const double z = s * s;
    return s * z * ({_horner("z", _ASIN)});
}}
/* s = sqrt(w) (w = (1 - |x|) / 2 for |x| > 1/2) as hi + *lo, hi with 21 bits */
VM_INLINE double vm_sqrt_split(double w, double *lo) {{
    const double s = sqrt(w);
    const double hi = vm_double(vm_bits(s) & 0xffffffff00000000ULL);
    *lo = vm_sel(isgreater(s, 0.0), (w - hi * hi) / (s + hi), 0.0);
    return hi;
}}
/* |x| <= 1/2: x + tail; else pi/2 - 2 asin(s), s = sqrt((1 - |x|) / 2) */
VM_INLINE double vm_asin(double x) {{
    const double a = fabs(x);
    const double w = 0.5 * (1.0 - vm_sel(isgreater(a, 0.5), a, 1.0));
    double slo;
    const double shi = vm_sqrt_split(w, &slo);
    const double s = shi + slo;
    const double aa = vm_sel(isgreater(a, 0.5), 0.0, a);
    const double small = aa + vm_asin_tail(aa);
    const double q = 0x1.921fb54442d18p-1 - 2.0 * shi;
    const double p = 2.0 * (vm_asin_tail(s) + slo) - 0x1.1a62633145c07p-54;
    const double big = 0x1.921fb54442d18p-1 - (p - q);
    const double res = vm_sel(isgreater(a, 1.0), (double)NAN,
                              vm_sel(isgreater(a, 0.5), big, small));
    return copysign(vm_sel(a != a, x, res), x);
}}
/* x > 1/2: 2 asin(s), s = sqrt((1 - x) / 2); x < -1/2: pi - 2 asin(sqrt((1 + x) / 2)) */
VM_INLINE double vm_acos(double x) {{
    const double a = fabs(x);
    const double w = 0.5 * (1.0 - vm_sel(isgreater(a, 0.5), a, 1.0));
    double slo;
    const double shi = vm_sqrt_split(w, &slo);
    const double s = shi + slo;
    const double rest = 2.0 * (vm_asin_tail(s) + slo);
    const double pos = 2.0 * shi + rest;
    const double neg = (0x1.921fb54442d18p+1 - 2.0 * shi) - (rest - 0x1.1a62633145c07p-53);
    const double aa = vm_sel(isgreater(a, 0.5), 0.0, x);
    const double mid = VM_PIO2HI - ((aa + vm_asin_tail(aa)) - VM_PIO2LO);
    const double res = vm_sel(isgreater(a, 1.0), (double)NAN,
                              vm_sel(islessequal(a, 0.5), mid,
                                     vm_sel(isgreater(x, 0.0), pos, neg)));
    return vm_sel(a != a, x, res);
}}
""")

_part("vm_acos", ("vm_asin",), "")

_part("vm_asinh", ("vm_log", "vm_log1p"), """\
/* |x| < 2: log1p(a + a^2 / (1 + sqrt(1 + a^2))); < 2^28: log(2a + 1 / (sqrt(a^2 + 1) + a));
   else log(a) + ln 2 */
VM_INLINE double vm_asinh(double x) {
    const double a = fabs(x);
    const double am = vm_sel(isgreater(a, 0x1p28), 1.0, a);
    const double a2 = am * am;
    const double r = sqrt(1.0 + a2);
    const double small = vm_log1p(am + a2 / (1.0 + r));
    const double mid = vm_log(2.0 * am + 1.0 / (r + am));
    const double big = vm_log(a) + 0x1.62e42fefa39efp-1;
    const double res = vm_sel(isless(a, 2.0), small, vm_sel(islessequal(a, 0x1p28), mid, big));
    return copysign(vm_sel(a == 0.0, x, res), x);
}
""")

_part("vm_acosh", ("vm_log", "vm_log1p"), """\
/* x < 2: log1p(t + sqrt(2t + t^2)), t = x - 1; < 2^28: log(2x - 1 / (x + sqrt(x^2 - 1)));
   else log(x) + ln 2 */
VM_INLINE double vm_acosh(double x) {
    const double xm = vm_sel(isgreater(x, 0x1p28), 2.0, vm_sel(isless(x, 1.0), 1.0, x));
    const double t = xm - 1.0;
    const double small = vm_log1p(t + sqrt(2.0 * t + t * t));
    const double mid = vm_log(2.0 * xm - 1.0 / (xm + sqrt(xm * xm - 1.0)));
    const double big = vm_log(x) + 0x1.62e42fefa39efp-1;
    const double res = vm_sel(isless(x, 2.0), small, vm_sel(islessequal(x, 0x1p28), mid, big));
    return vm_sel(isless(x, 1.0), (double)NAN, vm_sel(x != x, x, res));
}
""")

_part("vm_atanh", ("vm_log1p",), """\
/* atanh|x| = log1p(2a / (1 - a)) / 2, the small argument as 2a + 2a^2 / (1 - a) */
VM_INLINE double vm_atanh(double x) {
    const double a = fabs(x);
    const double d = 1.0 - a;
    const double arg = vm_sel(isless(a, 0.5), 2.0 * a + 2.0 * a * a / d, (2.0 * a) / d);
    const double res = vm_sel(isgreater(a, 1.0), (double)NAN, 0.5 * vm_log1p(arg));
    return copysign(vm_sel(a != a, x, res), x);
}
""")

_EXPF = ['0x1.000000p-1', '0x1.5554dcp-3', '0x1.555518p-5', '0x1.120cdep-7', '0x1.6d1278p-10']
_LOGF = ['0x1.55555cp-1', '0x1.997bdcp-2', '0x1.2ef516p-2']
_TANHF = ['-0x1.555556p-2', '0x1.1110eap-3', '-0x1.ba08c2p-5', '0x1.64a94p-6',
          '-0x1.1168b4p-7', '0x1.2c7d78p-9']


def _f(coeffs):
    return [c + "f" for c in coeffs]


# float32 functions computed in float32 (16 lanes where float64 has 8): the ones a
# network's loss and layers use most; the others go through float64 (``_float32``)
_part("vm_bitsf", ("vm_bits",), """\
#define VM_SHIFTF 0x1.8p23f
#define VM_LN2HIF 0x1.62e4p-1f
#define VM_LN2LOF 0x1.7f7d1cp-20f
/* an explicit fused multiply-add in the float32 functions below (their accuracy is
   checked with it: tests/test_kernel_vmath.py); the kernels' own + - * / are never
   contracted (-ffp-contract=off) */
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
#define VM_FMAF(a, b, c) fmaf(a, b, c)
#else
#define VM_FMAF(a, b, c) ((a) * (b) + (c))
#endif
typedef union { float f; uint32_t u; } vm_fu;
VM_INLINE uint32_t vm_bitsf(float x) { vm_fu v; v.f = x; return v.u; }
VM_INLINE float vm_floatu(uint32_t u) { vm_fu v; v.u = u; return v.f; }
VM_INLINE float vm_self(int c, float a, float b) {
    const uint32_t m = (uint32_t)0 - (uint32_t)(c != 0);
    return vm_floatu((vm_bitsf(a) & m) | (vm_bitsf(b) & ~m));
}
/* 2^n for an integer n in [-126, 127] */
VM_INLINE float vm_pow2f(int32_t n) { return vm_floatu((uint32_t)(n + 127) << 23); }
/* p * 2^n for |n| < 250, rounding once */
VM_INLINE float vm_scalef(float p, int32_t n) {
    const int32_t h = (int32_t)((uint32_t)(n + 512) >> 1) - 256;
    return p * vm_pow2f(h) * vm_pow2f(n - h);
}
""")

_part("vm_expf_core", ("vm_bitsf",), f"""\
/* e^x = 2^n p for |x| < 110: p in [sqrt(1/2), sqrt(2)], n in *n */
VM_INLINE float vm_expf_core(float x, int32_t *n) {{
    const float nf = VM_FMAF(x, 0x1.715476p+0f, VM_SHIFTF) - VM_SHIFTF;
    *n = (int32_t)(vm_bitsf(nf + VM_SHIFTF) - vm_bitsf(VM_SHIFTF));
    const float hi = VM_FMAF(-nf, VM_LN2HIF, x);     /* nf * VM_LN2HIF is exact */
    const float lo = -(nf * VM_LN2LOF);
    const float r = hi + lo;
    const float tail = r * r * ({_fma_horner("r", _f(_EXPF))});
    return 1.0f + (hi + (lo + tail));
}}
""")

_part("vm_expf", ("vm_expf_core",), """\
VM_INLINE float vm_expf(float x) {
    const int high = isgreater(x, 89.0f), low = isless(x, -104.0f);
    int32_t n;
    const float p = vm_expf_core(vm_self(high | low, 0.0f, x), &n);
    const float res = vm_scalef(p, n);
    return vm_self(high, (float)INFINITY, vm_self(low, 0.0f, res));
}
""")

_part("vm_logf", ("vm_bitsf",), f"""\
VM_INLINE float vm_logf(float x) {{
    const int sub = isless(x, 0x1p-126f);
    const float xs = vm_self(sub, x * 0x1p23f, x);
    const uint32_t ix = vm_bitsf(xs) + (0x3f800000u - 0x3f3504f3u);
    const int32_t ki = (int32_t)(ix >> 23) - 127 - (int32_t)(23u & (0u - (uint32_t)sub));
    const float k = (float)ki;
    const float f = vm_floatu((ix & 0x007fffffu) + 0x3f3504f3u) - 1.0f;
    const float s = f / (2.0f + f);
    const float z = s * s;
    const float t = z * ({_horner("z", _f(_LOGF))});
    const float hfsq = 0.5f * f * f;
    const float corr = s * (hfsq + t);
    const float r = k * VM_LN2HIF - ((hfsq - (corr + k * VM_LN2LOF)) - f);
    return vm_self(isgreater(x, 0.0f) & isless(x, (float)INFINITY), r,
                   vm_self(x == 0.0f, -(float)INFINITY, vm_self(isless(x, 0.0f), (float)NAN, x)));
}}
""")

_part("vm_tanhf", ("vm_expf_core",), f"""\
/* |x| < 0.625: x + x^3 p(x^2); else 1 - 2 / (e^2|x| + 1) (1 beyond 9.5) */
VM_INLINE float vm_tanhf(float x) {{
    const float a = fabsf(x);
    const int small = isless(a, 0.625f);
    const float as = vm_self(small, a, 0.0f);
    const float z = as * as;
    const float ps = VM_FMAF(as * z, {_fma_horner("z", _f(_TANHF))}, as);
    const float ab = vm_self(small, 0.625f, vm_self(isgreater(a, 9.5f), 9.5f, a));
    int32_t n;
    const float e = vm_expf_core(2.0f * ab, &n) * vm_pow2f(n);
    const float big = 1.0f - 2.0f / (e + 1.0f);
    return copysignf(vm_self(small, ps, big), x);
}}
""")

_part("vm_expm1f", ("vm_expf_core",), f"""\
/* e^x - 1 = 2^n (em + 1) - 1, em = e^r - 1 = hi + lo + tail, summed with two-sum */
VM_INLINE float vm_two_sumf(float a, float b, float *err) {{
    const float s = a + b;
    const float bb = s - a;
    *err = (a - (s - bb)) + (b - bb);
    return s;
}}
VM_INLINE float vm_expm1f(float x) {{
    const int high = isgreater(x, 89.0f), low = isless(x, -18.0f);
    const float v = vm_self(high | low, 0.0f, x);
    const float nf = (v * 0x1.715476p+0f + VM_SHIFTF) - VM_SHIFTF;
    const int32_t n = (int32_t)(vm_bitsf(nf + VM_SHIFTF) - vm_bitsf(VM_SHIFTF));
    const float hi = v - nf * VM_LN2HIF;
    const float lo = -(nf * VM_LN2LOF);
    const float r = hi + lo;
    const float rest = lo + r * r * ({_horner("r", _f(_EXPF))});
    const int32_t nc = n > 60 ? 60 : (n < -60 ? -60 : n);
    float e1, e2;
    const float s1 = vm_two_sumf(1.0f - vm_pow2f(-nc), hi, &e1);        /* n > 0 */
    const float up = vm_scalef(s1 + (e1 + rest), n);
    const float p2 = vm_pow2f(nc);
    const float s2 = vm_two_sumf(p2 - 1.0f, p2 * hi, &e2);              /* n < 0 */
    const float down = s2 + (e2 + p2 * rest);
    const float res = vm_self(n == 0, hi + rest, vm_self(n > 0, up, down));
    return vm_self(high, (float)INFINITY, vm_self(low, -1.0f, vm_self(x == 0.0f, x, res)));
}}
""")

_part("vm_log1pf", ("vm_bitsf",), f"""\
/* log(u) + c / u, u = 1 + x rounded and c = (1 + x) - u exactly */
VM_INLINE float vm_log1pf(float x) {{
    const float u = 1.0f + x;
    const float c = vm_self(isless(x, 0x1p24f), x - (u - 1.0f), 0.0f);
    const float cu = vm_self(c == 0.0f, 0.0f, c / u);
    const uint32_t iu = vm_bitsf(u) + (0x3f800000u - 0x3f3504f3u);
    const float k = (float)((int32_t)(iu >> 23) - 127);
    const float f = vm_floatu((iu & 0x007fffffu) + 0x3f3504f3u) - 1.0f;
    const float s = f / (2.0f + f);
    const float z = s * s;
    const float t = z * ({_horner("z", _f(_LOGF))});
    const float hfsq = 0.5f * f * f;
    const float corr = s * (hfsq + t);
    const float r = k * VM_LN2HIF - ((hfsq - (corr + (k * VM_LN2LOF + cu))) - f);
    const float res = vm_self(isgreater(u, 0.0f) & isless(u, (float)INFINITY), r,
                              vm_self(u == 0.0f, -(float)INFINITY,
                                      vm_self(isless(u, 0.0f), (float)NAN, u)));
    return vm_self(x == 0.0f, x, res);
}}
""")


_SIN = ['-0x1.5555555555555p-3', '0x1.1111111111110p-7', '-0x1.a01a01a019927p-13',
        '0x1.71de3a545e95cp-19', '-0x1.ae64540f4d1dbp-26', '0x1.61217c4c31493p-33',
        '-0x1.ab1635d19009bp-41']
_COS = ['0x1.5555555555555p-5', '-0x1.6c16c16c16c16p-10', '0x1.a01a01a019d03p-16',
        '-0x1.27e4fb7711f2ap-22', '0x1.1eed8dea0c945p-29', '-0x1.9394b79b331aap-37',
        '0x1.ab76ea8ab6767p-45']

_part("vm_rem_pio2", ("vm_expm1_poly",), """\
/* 2/pi in 24-bit digits: 2/pi = sum_k vm_2opi[k] 2^(-24 (k + 1)) */
static const double vm_2opi[52] = {
    10680707.0, 7228996.0, 1387004.0, 2578385.0, 16069853.0, 12639074.0, 9804092.0,
    4427841.0, 16666979.0, 11263675.0, 12935607.0, 2387514.0, 4345298.0, 14681673.0,
    3074569.0, 13734428.0, 16653803.0, 1880361.0, 10960616.0, 8533493.0, 3062596.0,
    8710556.0, 7349940.0, 6258241.0, 3772886.0, 3769171.0, 3798172.0, 8675211.0,
    12450088.0, 3874808.0, 9961438.0, 366607.0, 15675153.0, 9132554.0, 7151469.0,
    3571407.0, 2607881.0, 12013382.0, 4155038.0, 6285869.0, 7677882.0, 13102053.0,
    15825725.0, 473591.0, 9065106.0, 15363067.0, 6271263.0, 9264392.0, 5636912.0,
    4652155.0, 7056368.0, 13614112.0};
/* t mod 4 for a double t >= 0 (exact; floor through 2^52, as libm's floor does not
   vectorize without -fno-trapping-math) */
VM_INLINE double vm_mod4(double t) {
    const double y = t * 0.25;
    const double r = (y + 0x1p52) - 0x1p52;               /* nearest, y < 2^52 */
    const double fl = vm_sel(isless(y, 0x1p52), r - vm_sel(isgreater(r, y), 1.0, 0.0), y);
    return t - 4.0 * fl;
}
/* (h, m, l) += t, a triple-double sum whose errors stay below 2^-150 of h */
VM_INLINE void vm_acc3(double *h, double *m, double *l, double t) {
    double e1, e2;
    *h = vm_two_sum(*h, t, &e1);
    *m = vm_two_sum(*m, e1, &e2);
    *l += e2;
}
/* a = |x| (2^-30 <= a < inf) = (n + F) pi/2, |F| <= 1/2 + 2^-20, exactly for every
   double (Payne-Hanek: x 2/pi mod 4 from the digits of 2/pi that matter at x's
   exponent, each product exact): returns n mod 4, r = F pi/2 as *rh + *rl */
VM_INLINE int64_t vm_rem_pio2(double a, double *rh, double *rl) {
    const uint64_t ia = vm_bits(a);
    const int64_t e = (int64_t)(ia >> 52) - 1075;          /* a = mant 2^e */
    const uint64_t mant = (ia & 0x000fffffffffffffULL) | 0x0010000000000000ULL;
    const double mh = vm_double(0x4330000000000000ULL | (mant >> 26)) - 0x1p52;
    const double ml = vm_double(0x4330000000000000ULL | (mant & 0x3ffffffULL)) - 0x1p52;
    /* the first digit whose product with mant has bits below 4 */
    const double ed = vm_double(0x4330000000000000ULL | (uint64_t)(e + 2048)) -
                      (0x1p52 + 2048.0);
    const double y = (ed - 2.0) / 24.0;              /* |y| < 2^7: floor exactly */
    const double yr = (y + VM_SHIFT) - VM_SHIFT;
    const double kd = yr - vm_sel(isgreater(yr, y), 1.0, 0.0);
    const int64_t k = vm_toint(vm_sel(isless(kd, 0.0), 0.0, kd));
    double h = 0.0, m = 0.0, l = 0.0;
    const double d0 = vm_2opi[k + 0] * vm_pow2(e - 24 * (k + 1));
    vm_acc3(&h, &m, &l, vm_mod4(mh * (d0 * 0x1p26)));
    vm_acc3(&h, &m, &l, vm_mod4(ml * d0));
    const double d1 = vm_2opi[k + 1] * vm_pow2(e - 24 * (k + 2));
    vm_acc3(&h, &m, &l, vm_mod4(mh * (d1 * 0x1p26)));
    vm_acc3(&h, &m, &l, vm_mod4(ml * d1));
    h = vm_mod4(h);               /* the integer part is known: keep h small */
    const double d2 = vm_2opi[k + 2] * vm_pow2(e - 24 * (k + 3));
    vm_acc3(&h, &m, &l, vm_mod4(mh * (d2 * 0x1p26)));
    vm_acc3(&h, &m, &l, vm_mod4(ml * d2));
    const double d3 = vm_2opi[k + 3] * vm_pow2(e - 24 * (k + 4));
    vm_acc3(&h, &m, &l, vm_mod4(mh * (d3 * 0x1p26)));
    vm_acc3(&h, &m, &l, vm_mod4(ml * d3));
    const double d4 = vm_2opi[k + 4] * vm_pow2(e - 24 * (k + 5));
    vm_acc3(&h, &m, &l, vm_mod4(mh * (d4 * 0x1p26)));
    vm_acc3(&h, &m, &l, vm_mod4(ml * d4));
    const double d5 = vm_2opi[k + 5] * vm_pow2(e - 24 * (k + 6));
    vm_acc3(&h, &m, &l, vm_mod4(mh * (d5 * 0x1p26)));
    vm_acc3(&h, &m, &l, vm_mod4(ml * d5));
    const double d6 = vm_2opi[k + 6] * vm_pow2(e - 24 * (k + 7));
    vm_acc3(&h, &m, &l, vm_mod4(mh * (d6 * 0x1p26)));
    vm_acc3(&h, &m, &l, vm_mod4(ml * d6));
    const double d7 = vm_2opi[k + 7] * vm_pow2(e - 24 * (k + 8));
    vm_acc3(&h, &m, &l, vm_mod4(mh * (d7 * 0x1p26)));
    vm_acc3(&h, &m, &l, vm_mod4(ml * d7));
    const double d8 = vm_2opi[k + 8] * vm_pow2(e - 24 * (k + 9));
    vm_acc3(&h, &m, &l, vm_mod4(mh * (d8 * 0x1p26)));
    vm_acc3(&h, &m, &l, vm_mod4(ml * d8));
    const double n = (h + VM_SHIFT) - VM_SHIFT;           /* h's nearest integer */
    double t, fh, fl;
    h = h - n;
    fh = vm_two_sum(h, m, &t);
    fl = t + l;
    /* (fh + fl) pi/2, fh * PIO2HI exactly by Dekker's product */
    const double p = fh * VM_PIO2HI;
    const double c = fh * 134217729.0;
    const double f1 = c - (c - fh), f2 = fh - f1;
    const double err = ((f1 * 0x1.921fb5p+0 - p) + f1 * 0x1.110b46p-26 + f2 * 0x1.921fb5p+0) +
                       f2 * 0x1.110b46p-26;
    *rh = p + (err + (fh * VM_PIO2LO + fl * VM_PIO2HI));
    *rl = (p - *rh) + (err + (fh * VM_PIO2LO + fl * VM_PIO2HI));
    return vm_toint(n) & 3;
}
""")

_part("vm_sincos", ("vm_rem_pio2",), f"""\
/* v with its sign flipped where x is negative (sin and tan are odd) */
VM_INLINE double vm_flipsign(double v, double x) {{
    return vm_double(vm_bits(v) ^ (vm_bits(x) & 0x8000000000000000ULL));
}}
/* sin and cos of rh + rl, |rh| <= pi/4 (1 + 2^-20) */
VM_INLINE double vm_sin_kernel(double rh, double rl) {{
    const double z = rh * rh;
    const double tail = rh * z * ({_horner("z", _SIN)});
    return rh + (tail + rl * (1.0 - 0.5 * z));
}}
VM_INLINE double vm_cos_kernel(double rh, double rl) {{
    const double z = rh * rh;
    const double hz = 0.5 * z;
    const double w = 1.0 - hz;
    const double tail = z * z * ({_horner("z", _COS)});
    return w + (((1.0 - w) - hz) + (tail - rh * rl));
}}
/* |x| < 2^-30: sin x = x, cos x = 1; NaN and inf: NaN */
VM_INLINE double vm_sin(double x) {{
    const double a = fabs(x);
    const int tiny = isless(a, 0x1p-30), bad = !isless(a, (double)INFINITY);
    double rh, rl;
    const int64_t q = vm_rem_pio2(vm_sel(tiny | bad, 1.0, a), &rh, &rl);
    const double s = vm_sin_kernel(rh, rl), c = vm_cos_kernel(rh, rl);
    const double v = vm_sel(q & 1, c, s);
    const double res = vm_flipsign(vm_sel(q & 2, -v, v), x);
    return vm_sel(tiny, x, vm_sel(bad, x - x, res));
}}
VM_INLINE double vm_cos(double x) {{
    const double a = fabs(x);
    const int tiny = isless(a, 0x1p-30), bad = !isless(a, (double)INFINITY);
    double rh, rl;
    const int64_t q = vm_rem_pio2(vm_sel(tiny | bad, 1.0, a), &rh, &rl);
    const double s = vm_sin_kernel(rh, rl), c = vm_cos_kernel(rh, rl);
    const double v = vm_sel(q & 1, -s, c);
    const double res = vm_sel(q & 2, -v, v);
    return vm_sel(tiny, 1.0, vm_sel(bad, x - x, res));
}}
/* tan = sin / cos of the reduced argument (-cos / sin in odd quadrants) */
VM_INLINE double vm_tan(double x) {{
    const double a = fabs(x);
    const int tiny = isless(a, 0x1p-30), bad = !isless(a, (double)INFINITY);
    double rh, rl;
    const int64_t q = vm_rem_pio2(vm_sel(tiny | bad, 1.0, a), &rh, &rl);
    const double s = vm_sin_kernel(rh, rl), c = vm_cos_kernel(rh, rl);
    const double res = vm_flipsign(vm_sel(q & 1, -c / s, s / c), x);
    return vm_sel(tiny, x, vm_sel(bad, x - x, res));
}}
""")

_part("vm_cos", ("vm_sincos",), "")
_part("vm_tan", ("vm_sincos",), "")
_part("vm_sin", ("vm_sincos",), "")


_part("vm_sincosf", ("vm_sincos",), f"""\
/* float32 arguments: a = |x| = m 2^e with m of 24 bits, so m times a 24-bit digit of
   2/pi is exact and five digits past the integer part give F to 2^-100 */
VM_INLINE int64_t vm_rem_pio2f(double a, double *r) {{
    const uint64_t ia = vm_bits(a);
    const int64_t e = (int64_t)(ia >> 52) - 1075 + 29;
    const uint64_t mant = ((ia & 0x000fffffffffffffULL) | 0x0010000000000000ULL) >> 29;
    const double m = vm_double(0x4330000000000000ULL | mant) - 0x1p52;
    const double ed = vm_double(0x4330000000000000ULL | (uint64_t)(e + 2048)) -
                      (0x1p52 + 2048.0);
    const double y = (ed - 2.0) / 24.0;
    const double yr = (y + VM_SHIFT) - VM_SHIFT;
    const double kd = yr - vm_sel(isgreater(yr, y), 1.0, 0.0);
    const int64_t k = vm_toint(vm_sel(isless(kd, 0.0), 0.0, kd));
    /* (mod 4, t0 + t1 has under 50 bits: exact; t2 < 2) */
    const double t0 = m * (vm_2opi[k] * vm_pow2(e - 24 * (k + 1)));
    const double t1 = m * (vm_2opi[k + 1] * vm_pow2(e - 24 * (k + 2)));
    const double t2 = m * (vm_2opi[k + 2] * vm_pow2(e - 24 * (k + 3)));
    const double t3 = m * (vm_2opi[k + 3] * vm_pow2(e - 24 * (k + 4)));
    const double t4 = m * (vm_2opi[k + 4] * vm_pow2(e - 24 * (k + 5)));
    double e2, lo;
    const double h = vm_two_sum(vm_mod4(vm_mod4(t0) + vm_mod4(t1)), t2, &e2);
    const double n = (h + VM_SHIFT) - VM_SHIFT;
    const double f = vm_two_sum(h - n, e2, &lo);
    lo += t3 + t4;
    *r = f * VM_PIO2HI + (lo * VM_PIO2HI + f * VM_PIO2LO);
    return vm_toint(n) & 3;
}}
/* sin and cos of |r| <= pi/4 (1 + 2^-20) to float32's precision */
VM_INLINE double vm_sinf_kernel(double r) {{
    const double z = r * r;
    return r + r * z * ({_horner("z", _SIN[:5])});
}}
VM_INLINE double vm_cosf_kernel(double r) {{
    const double z = r * r;
    return (1.0 - 0.5 * z) + z * z * ({_horner("z", _COS[:4])});
}}
VM_INLINE float vm_sinf(float xf) {{
    const double x = (double)xf, a = fabs(x);
    const int tiny = isless(a, 0x1p-30), bad = !isless(a, (double)INFINITY);
    double r;
    const int64_t q = vm_rem_pio2f(vm_sel(tiny | bad, 1.0, a), &r);
    const double v = vm_sel(q & 1, vm_cosf_kernel(r), vm_sinf_kernel(r));
    const double res = vm_flipsign(vm_sel(q & 2, -v, v), x);
    return (float)vm_sel(tiny, x, vm_sel(bad, x - x, res));
}}
VM_INLINE float vm_cosf(float xf) {{
    const double x = (double)xf, a = fabs(x);
    const int tiny = isless(a, 0x1p-30), bad = !isless(a, (double)INFINITY);
    double r;
    const int64_t q = vm_rem_pio2f(vm_sel(tiny | bad, 1.0, a), &r);
    const double v = vm_sel(q & 1, -vm_sinf_kernel(r), vm_cosf_kernel(r));
    return (float)vm_sel(tiny, 1.0, vm_sel(bad, x - x, vm_sel(q & 2, -v, v)));
}}
VM_INLINE float vm_tanf(float xf) {{
    const double x = (double)xf, a = fabs(x);
    const int tiny = isless(a, 0x1p-30), bad = !isless(a, (double)INFINITY);
    double r;
    const int64_t q = vm_rem_pio2f(vm_sel(tiny | bad, 1.0, a), &r);
    const double s = vm_sinf_kernel(r), c = vm_cosf_kernel(r);
    const double res = vm_flipsign(vm_sel(q & 1, -c / s, s / c), x);
    return (float)vm_sel(tiny, x, vm_sel(bad, x - x, res));
}}
""")
_part("vm_sinf", ("vm_sincosf",), "")
_part("vm_cosf", ("vm_sincosf",), "")
_part("vm_tanf", ("vm_sincosf",), "")


_BINARY = frozenset({"vm_atan2"})


def _float32(name: str) -> str:
    if name in _BINARY:
        return (f"VM_INLINE float {name}f(float y, float x) "
                f"{{ return (float){name}((double)y, (double)x); }}\n")
    return f"VM_INLINE float {name}f(float x) {{ return (float){name}((double)x); }}\n"


def needed(names) -> str:
    """C text defining the functions ``names`` (``vm_exp``, ``vm_tanhf``, ...) and
    everything they call, each once, callees first."""
    order: list = []

    def visit(n):
        if n in order:
            return
        for d in _PARTS[n][0]:
            visit(d)
        order.append(n)

    f32 = []
    for name in sorted(names):
        native = name in _PARTS
        base = name[:-1] if not native and name.endswith("f") else name
        visit(base)
        if base != name:
            f32.append(base)
    return "".join(_PARTS[n][1] for n in order) + "".join(_float32(b) for b in f32)


def function(ufunc: str, itemsize: int):
    """The vmath C function computing NumPy's ``ufunc`` for floats of ``itemsize``
    bytes, or None when there is none."""
    name = C_NAMES.get(ufunc)
    if name is None:
        return None
    return name + ("f" if itemsize == 4 else "")


_LIBM = {"vm_" + n: n for n in ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
                                 "tanh", "sinh", "cosh", "atan", "atan2", "asin", "acos",
                                 "asinh", "acosh", "atanh", "sin", "cos", "tan")}


def forwarders(names, qualifier: str) -> str:
    """``names`` defined as calls of the platform's own math functions (CUDA's
    ``expf``, ...; the CUDA renderer shares ``cexpr.op_expr`` with the C one)."""
    out = []
    for name in sorted(names):
        f32 = name.endswith("f") and name[:-1] in _LIBM
        base = name[:-1] if f32 else name
        T, libm = ("float", _LIBM[base] + "f") if f32 else ("double", _LIBM[base])
        if base in _BINARY:
            out.append(f"{qualifier} {T} {name}({T} y, {T} x) {{ return {libm}(y, x); }}\n")
        else:
            out.append(f"{qualifier} {T} {name}({T} x) {{ return {libm}(x); }}\n")
    return "".join(out)
