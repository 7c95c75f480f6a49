"""The compiled kernels' transcendental functions (``kernels/vmath.py``) against NumPy.

Table-driven: every function x {float32, float64}, through ``jit(f, backend="c")``
end to end, on about 10^6 points each (log-uniform magnitudes of both signs from the
smallest subnormal to the largest float, uniform samples where the functions bend,
every special value and its neighbours).  Asserted:

* float64: within 2 ulp of NumPy, and within 2 ulp of an 80-bit long double
  evaluation where the platform has one;
* float32: within 1 ulp of the correctly rounded result (NumPy's float64 value
  rounded to float32) and within 3 ulp of NumPy's float32 loops, which are themselves
  up to 3 ulp from the correctly rounded value (NumPy's own SIMD approximations);
* NaN exactly where NumPy gives NaN, and infinities and signed zeros exactly as
  NumPy gives them (where NumPy's are the exact ones); float32 stays float32.

A second table compiles each function's loop alone and asks gcc whether it
vectorized it (``-fopt-info-vec``), so a change that makes one a scalar loop fails.
"""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import astjax
from astjax.kernels import backend as kbackend, vmath


def exp(x):
    return np.exp(x) * 1.0


def exp2(x):
    return np.exp2(x) * 1.0


def expm1(x):
    return np.expm1(x) * 1.0


def log(x):
    return np.log(x) * 1.0


def log2(x):
    return np.log2(x) * 1.0


def log10(x):
    return np.log10(x) * 1.0


def log1p(x):
    return np.log1p(x) * 1.0


def tanh(x):
    return np.tanh(x) * 1.0


def sinh(x):
    return np.sinh(x) * 1.0


def cosh(x):
    return np.cosh(x) * 1.0


def arctan(x):
    return np.arctan(x) * 1.0


def arcsin(x):
    return np.arcsin(x) * 1.0


def arccos(x):
    return np.arccos(x) * 1.0


def arcsinh(x):
    return np.arcsinh(x) * 1.0


def arccosh(x):
    return np.arccosh(x) * 1.0


def arctanh(x):
    return np.arctanh(x) * 1.0


def sin(x):
    return np.sin(x) * 1.0


def cos(x):
    return np.cos(x) * 1.0


def tan(x):
    return np.tan(x) * 1.0


def arctan2(y, x):
    return np.arctan2(y, x) * 1.0


NUMPY_FASTER = kbackend.NUMPY_FASTER      # as shipped (the fixture below empties it)
UNARY = [exp, exp2, expm1, log, log2, log10, log1p, tanh, sinh, cosh, arctan, arcsin,
         arccos, arcsinh, arccosh, arctanh, sin, cos, tan]
DTYPES = [np.float32, np.float64]


def test_every_vmath_function_is_tested_and_compiled():
    assert {f.__name__ for f in UNARY} | {"arctan2"} == set(vmath.C_NAMES)
    # the ones faster than NumPy's loops compile in every group; the others stay on
    # NumPy's loops (backend.py says why) and are tested here with NUMPY_FASTER emptied
    assert not {"exp", "log", "log1p"} & NUMPY_FASTER
    assert set(vmath.C_NAMES) - {"exp", "log", "log1p"} <= kbackend.NUMPY_FASTER_AVX512
    # without NumPy's AVX-512 loops tanh (the MLP's layers) and others compile too
    assert {"tanh", "expm1", "arctanh"}.isdisjoint(kbackend.NUMPY_FASTER_AVX2)
    assert kbackend.NUMPY_FASTER_AVX2 < kbackend.NUMPY_FASTER_AVX512
    assert NUMPY_FASTER in (kbackend.NUMPY_FASTER_AVX2, kbackend.NUMPY_FASTER_AVX512)


@pytest.fixture(autouse=True)
def every_function_as_a_kernel(monkeypatch):
    monkeypatch.setattr(kbackend, "NUMPY_FASTER", frozenset())


def _ordered(x):
    """Floats mapped to integers in the same order, adjacent floats 1 apart."""
    it = np.int64 if x.dtype == np.float64 else np.int32
    i = x.view(it).astype(np.int64)
    lo = -(1 << 63) if it is np.int64 else -(1 << 31)
    return np.where(i < 0, lo - i, i)


def ulps(got, want):
    """Distance in ulp; inf where one is NaN and the other not, or signs differ
    (zeros included)."""
    assert got.dtype == want.dtype
    nan_g, nan_w = np.isnan(got), np.isnan(want)
    d = np.abs(_ordered(got) - _ordered(want)).astype(np.float64)
    d[np.signbit(got) != np.signbit(want)] = np.inf
    d[nan_g | nan_w] = np.inf
    d[nan_g & nan_w] = 0
    return d


SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 0.55,
           -0.55, 22.0, -22.0, 0.4375, 0.6875, 1.1875, 2.4375, 709.78, 709.79, 710.0,
           710.5, 711.0, -745.1, -745.2, -746.0, 88.72, 88.73, 89.5, -87.3, -103.9,
           -104.0, 1024.0, 1025.0, -1074.0, -1075.0, -1080.0, 128.0, -149.0, -150.0,
           -40.0, -38.0, 2.0 ** 28, 2.0 ** 53, 1e-300, 1e-30]


def points(dt, n=150_000, seed=0):
    rng = np.random.default_rng(seed)
    fi = np.finfo(dt)
    lo, hi = np.log10(float(fi.smallest_subnormal)), np.log10(float(fi.max))
    mag = 10.0 ** rng.uniform(lo, hi, 2 * n) * rng.choice([-1.0, 1.0], 2 * n)
    parts = [mag, rng.uniform(-10, 10, n), rng.uniform(-1, 1, n), rng.uniform(0, 2, n),
             rng.uniform(-800, 800, n // 4), rng.uniform(-30, 30, n // 4)]
    spec = np.array(SPECIAL + [float(fi.max), float(fi.tiny), float(fi.smallest_subnormal)])
    spec = np.concatenate([spec, -spec])
    with np.errstate(over="ignore"):
        x = np.concatenate(parts + [spec]).astype(dt)
        spec = spec.astype(dt)
        near = np.concatenate([np.nextafter(spec, np.inf), np.nextafter(spec, -np.inf)])
    return np.concatenate([x, near.astype(dt)])


def _check(name, got, want, ref, dt):
    assert got.dtype == dt, f"{name}: {got.dtype}"
    # NaN, infinities and signed zeros exactly as NumPy (where NumPy's are exact: its
    # float32 exp2 flushes some results of 2^-149.5 and below to 0)
    assert np.array_equal(np.isnan(got), np.isnan(want)), name
    special = (np.isinf(want) | (want == 0)) & (want == ref)
    assert np.array_equal(got[special], want[special]), name
    assert np.array_equal(np.signbit(got[special]), np.signbit(want[special])), name
    d_np, d_ref = ulps(got, want), ulps(got, ref)
    worst = int(np.argmax(d_np))
    where = f"{name} {np.dtype(dt).name}: worst at {got.size} points: ulp {d_np[worst]}"
    if dt == np.float64:
        assert d_np.max() <= 2, where
        assert d_ref.max() <= 2, f"{where}; vs the long double reference {d_ref.max()}"
    else:
        assert d_ref.max() <= 1, f"{where}; vs the rounded float64 value {d_ref.max()}"
        assert d_np.max() <= 3, where


def _reference(ufunc, dt, *args):
    wide = np.float64 if dt == np.float32 else np.longdouble
    with np.errstate(all="ignore"):
        return ufunc(*[a.astype(wide) for a in args]).astype(dt)


@pytest.mark.parametrize("dt", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("f", UNARY, ids=[f.__name__ for f in UNARY])
def test_unary_kernel_within_2_ulp_of_numpy(f, dt):
    x = points(dt)
    jf = astjax.jit(f, backend="c")
    with np.errstate(all="ignore"):
        got = jf(x)
        want = f(x)
    text = astjax.make_source(jf)(x[:8])
    assert vmath.function(f.__name__, np.dtype(dt).itemsize) + "(" in text   # a kernel
    _check(f.__name__, got, want, _reference(getattr(np, f.__name__), dt, x), dt)


@pytest.mark.parametrize("dt", DTYPES, ids=["f32", "f64"])
def test_arctan2_kernel_within_2_ulp_of_numpy(dt):
    x = points(dt, 60_000)
    y = np.random.default_rng(1).permutation(x)
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0], dtype=dt)
    ey, ex = (a.ravel() for a in np.meshgrid(edges, edges))
    x, y = np.concatenate([x, ex]), np.concatenate([y, ey])
    jf = astjax.jit(arctan2, backend="c")
    with np.errstate(all="ignore"):
        got = jf(y, x)
        want = arctan2(y, x)
    assert vmath.function("arctan2", np.dtype(dt).itemsize) + "(" in \
        astjax.make_source(jf)(y[:8], x[:8])
    _check("arctan2", got, want, _reference(np.arctan2, dt, y, x), dt)


def _hard_trig_arguments():
    """Doubles close to multiples of pi/2, where the reduction cancels: the closest
    of all (6381956970095103 * 2^797, |x mod pi/2| ~ 2^-61), 10^22, 2^1023, and
    k * fl(pi/2) and their neighbours."""
    xs = [6381956970095103 * 2.0 ** 797, 5.0 ** 22, 1e22, 2.0 ** 1023 * 1.9999, 355.0,
          103993.0, 1.5707963267948966e10, 1e15 * np.pi / 2]
    xs += [float(np.float64(np.pi / 2) * k) for k in range(1, 3000)]
    x = np.array(xs)
    x = np.concatenate([x, np.nextafter(x, 0), np.nextafter(x, np.inf)])
    return np.concatenate([x, -x])


@pytest.mark.skipif(np.finfo(np.longdouble).nmant < 60, reason="needs an 80-bit long double")
@pytest.mark.parametrize("f", [sin, cos, tan], ids=["sin", "cos", "tan"])
def test_trig_reduction_is_exact_near_multiples_of_half_pi(f):
    """Checked against the long double result: on some of these NumPy's own float64
    loops are several ulp off (cos(6381956970095103 * 2^797): 8 ulp)."""
    x = _hard_trig_arguments()
    got = astjax.jit(f, backend="c")(x)
    ref = _reference(getattr(np, f.__name__), np.float64, x)
    assert ulps(got, ref).max() <= 1


def test_strided_and_broadcast_operands_use_the_same_functions():
    x = points(np.float32, 2000)[:4000].reshape(40, 100)[::-1, ::3]
    b = np.linspace(-3, 3, 34, dtype=np.float32)

    def f(x, b):
        return np.tanh(x * b), np.exp(b * x)
    with np.errstate(all="ignore"):
        got_t, got_e = astjax.jit(f, backend="c")(x, b)
        want_t = _reference(np.tanh, np.float32, x * b)
        want_e = _reference(np.exp, np.float32, b * x)
    assert got_t.dtype == got_e.dtype == np.float32
    assert ulps(got_t, want_t).max() <= 1 and ulps(got_e, want_e).max() <= 1


def _vectorized(ctext):
    cc = shutil.which("gcc")
    r = subprocess.run([cc, "-O3", "-std=c99", "-fno-math-errno", "-ffp-contract=off",
                        "-fno-strict-aliasing", "-march=native", "-fopenmp", "-c", "-x", "c",
                        "-", "-o", "/dev/null", "-fopt-info-vec-optimized"],
                       input=ctext, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[:2000]
    return "loop vectorized" in r.stderr


VECTORIZED = sorted(vmath.C_NAMES)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc's -fopt-info-vec")
@pytest.mark.parametrize("size", [4, 8], ids=["f32", "f64"])
@pytest.mark.parametrize("ufunc", VECTORIZED)
def test_gcc_vectorizes_each_function_in_a_simd_loop(ufunc, size):
    name = vmath.function(ufunc, size)
    T = "float" if size == 4 else "double"
    args = "a[i], b[i]" if ufunc == "arctan2" else "a[i]"
    text = ("#include <stdint.h>\n#include <math.h>\n" + vmath.needed([name]) +
            f"void k(int64_t n, const {T} *restrict a, const {T} *restrict b, "
            f"{T} *restrict o) {{\n#pragma omp simd\n"
            f"for (int64_t i = 0; i < n; i++) o[i] = {name}({args});\n}}\n")
    assert _vectorized(text), f"{name} is not vectorized"
