"""``jit(f, fastmath=True)``: numba's option, the compiled kernels' value-changing
rewrites (fused multiply-add, division by a hoisted reciprocal).

What is asserted: results stay within a few ulp of NumPy (the vmath functions on
their full sweep, a stencil time loop over many steps, a gradient against central
differences); NaN and infinities where NumPy has them; dtypes exactly NumPy's; the
reciprocal rewrite only where it cannot change a dtype or raise (a table over
divisor kinds); the default ``jit`` untouched (bit-identical, no marker, its own cache
entry); the flag set never includes what would break the kernels' range reductions
or NaN tests (``-fassociative-math``, ``-ffinite-math-only``, ``-ffast-math``).
"""
from __future__ import annotations

import os
import re

import numpy as np
import pytest

import astjax
from astjax import lax
from astjax.errors import ArgumentError
from astjax.kernels import backend as kbackend, compile as cc, cuda_nvrtc as nv
from conftest import numerical_grad

import test_kernel_vmath as V

needs_cc = pytest.mark.skipif(not cc.available()[0], reason="no C compiler")


def stencil(p0, density, dx, steps):
    """A 1-D wave loop dividing by a scalar and by a material array each step."""
    half = np.pad(0.5 * (density[1:] + density[:-1]), (0, 1), mode="edge")

    def step(carry, _):
        past, now = carry
        flux = np.pad((now[1:] - now[:-1]) / dx, (0, 1)) / half
        lap = np.pad((flux[1:] - flux[:-1]) / dx, (1, 0))
        new = 2.0 * now - past + 0.1 * lap
        return (now, new), new[3]

    (_, last), trace = lax.scan(step, (p0 * 0.0, p0), np.zeros(steps))
    return trace, last


def _stencil_args(dtype, n=200):
    rng = np.random.default_rng(3)
    x = np.linspace(-1, 1, n)
    p0 = np.exp(-40 * x ** 2).astype(dtype)
    density = (1.0 + 0.5 * rng.random(n)).astype(dtype)
    return p0, density, 0.7


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_stencil_loop_stays_close_and_the_default_stays_exact(dtype):
    p0, density, dx = _stencil_args(dtype)
    want = stencil(p0, density, dx, 300)
    exact = astjax.jit(stencil, static_argnums=3)
    fast = astjax.jit(stencil, static_argnums=3, fastmath=True)
    got_exact = exact(p0, density, dx, 300)
    got_fast = fast(p0, density, dx, 300)
    for e, f, w in zip(got_exact, got_fast, want):
        np.testing.assert_array_equal(e, w)           # the default: NumPy's bits
        assert f.dtype == w.dtype
        scale = np.max(np.abs(w))
        tol = (2e-5 if dtype == np.float32 else 1e-12) * scale
        assert np.max(np.abs(f - w)) <= tol
    # what made it fast: the material array's reciprocal, once before the loop, and
    # the kernels' scalar divisions as products; the default has neither
    shown_fast = astjax.make_source(fast)(p0, density, dx, 300)
    shown_exact = astjax.make_source(exact)(p0, density, dx, 300)
    head = shown_fast.split("for ")[0]
    assert "half_reciprocal = 1 / half" in head
    assert cc.FASTMATH_MARK.strip() in shown_fast
    scalar_reciprocal = re.compile(r" \* \(\((float|double)\)1 / s\d+\)")
    assert scalar_reciprocal.search(shown_fast)
    assert "_reciprocal" not in shown_exact and cc.FASTMATH_MARK.strip() not in shown_exact
    assert not scalar_reciprocal.search(shown_exact)


@needs_cc
def test_one_function_keeps_both_builds_apart():
    """jit(f) and jit(f, fastmath=True) of one function share its cache: the key
    tells them apart, whichever runs first."""
    p0, density, dx = _stencil_args(np.float64)
    want = stencil(p0, density, dx, 50)
    fast = astjax.jit(stencil, static_argnums=3, fastmath=True)(p0, density, dx, 50)
    exact = astjax.jit(stencil, static_argnums=3)(p0, density, dx, 50)
    np.testing.assert_array_equal(exact[1], want[1])
    assert not np.array_equal(fast[1], want[1])       # (the rewrites did round otherwise)


def _shown(f, *args):
    return astjax.make_source(astjax.jit(f, backend="numpy", fastmath=True))(*args)


def _loop_dividing_by(d_of):
    def f(x, d):
        dd = d_of(d)

        def body(i, c):
            return c / dd + x
        return lax.fori_loop(0, 4, body, x)
    return f


# divisor kind -> (the argument d's dtype, the loop's divisor made from it, rewritten?)
DIVISORS = {
    "float64 array": (np.float64, lambda d: d * 1.0, True),
    "float32 array": (np.float32, lambda d: d * 1.0, True),
    "padded array": (np.float64, lambda d: np.pad(d, (0, 0), mode="edge"), True),
    "the argument itself": (np.float32, lambda d: d, True),
    "float16 array": (np.float16, lambda d: d * 1.0, False),   # its reciprocal too coarse
    "int64 array": (np.int64, lambda d: d * 3, False),
    "python float": (np.float64, lambda d: 2.5, False),        # 1 / 0.0 would raise
    "numpy float64 scalar": (np.float64, lambda d: np.float64(2.5), False),  # no fact
}


@pytest.mark.parametrize("xdt", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("kind", list(DIVISORS))
def test_reciprocal_rewrite_keeps_dtypes_and_only_where_safe(kind, xdt):
    ddt, d_of, rewritten = DIVISORS[kind]
    f = _loop_dividing_by(d_of)
    x = (np.arange(1, 7) * 1.5).astype(xdt)
    d = np.linspace(1.0, 3.0, 6).astype(ddt)
    with np.errstate(all="ignore"):
        want = f(x, d)
        got = astjax.jit(f, backend="numpy", fastmath=True)(x, d)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5 if want.dtype == np.float32 else 1e-12)
    # only where the quotient surely has the divisor's dtype: a float32 carry divided
    # by float64 becomes float64 (its dtype is not the same every trip), and a float32
    # reciprocal would round a float64 quotient far more than a few ulp
    assert ("_reciprocal" in _shown(f, x, d)) == (rewritten and np.dtype(xdt) == ddt)


def test_reciprocal_rewrite_leaves_what_the_loop_changes_and_code_outside_loops():
    def changes(x, d):
        def body(i, c):
            dd = d + i                       # a new divisor every trip
            return c / dd
        return lax.fori_loop(0, 3, body, x)

    def outside(x, d):
        return x / (d * 2.0)

    x, d = np.linspace(1, 2, 5), np.linspace(2, 3, 5)
    for f in (changes, outside):
        assert "_reciprocal" not in _shown(f, x, d)
        np.testing.assert_array_equal(astjax.jit(f, backend="numpy", fastmath=True)(x, d),
                                      f(x, d))


@needs_cc
@pytest.mark.parametrize("dt", V.DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("f", V.UNARY + [V.arctan2], ids=lambda f: f.__name__)
def test_vmath_functions_keep_their_accuracy(f, dt, monkeypatch):
    """The flags let the compiler contract and use reciprocals inside the inlined
    range reductions too: still within 3 ulp, NaN and inf where the exact kernels
    have them, for normal arguments and results.  Subnormals flush to zero (as
    ``jax.jit`` on a CPU: ``flush.py``): a subnormal argument reads as 0 and a
    result below the normal range is 0 or the nearest normal."""
    monkeypatch.setattr(kbackend, "NUMPY_FASTER", frozenset())
    x = V.points(dt, 20_000)
    args = (x,) if f is not V.arctan2 else (np.random.default_rng(1).permutation(x), x)
    with np.errstate(all="ignore"):
        got = astjax.jit(f, backend="c", fastmath=True)(*args)
        exact = astjax.jit(f, backend="c")(*args)
        ref = V._reference(getattr(np, f.__name__), dt, *args)
    assert got.dtype == exact.dtype == np.dtype(dt)
    tiny = np.finfo(dt).tiny
    normal = np.ones(x.shape, bool)
    for a in args:
        normal &= ~((a != 0) & (np.abs(a) < tiny))
    assert np.count_nonzero(normal) > 0.9 * x.size
    got, exact, ref = got[normal], exact[normal], ref[normal]
    assert np.array_equal(np.isnan(got), np.isnan(exact))
    assert np.array_equal(np.isinf(got), np.isinf(exact))
    inf = np.isinf(exact)
    assert np.array_equal(got[inf], exact[inf])
    below = np.isfinite(ref) & (ref != 0) & (np.abs(ref) < tiny)
    assert np.all(np.abs(got[below]) <= tiny)
    finite = np.isfinite(ref) & (np.abs(ref) >= tiny)
    assert V.ulps(got, ref)[finite].max() <= 3


@needs_cc
def test_hard_trig_arguments_still_reduce_exactly():
    x = V._hard_trig_arguments()
    got = astjax.jit(np.sin, backend="c", fastmath=True)(x)
    exact = astjax.jit(np.sin, backend="c")(x)
    assert V.ulps(got, exact).max() <= 2


def nan_guard(x, d):
    q = x / d
    return np.where(np.isnan(q), -1.0, q) + np.isinf(q)


@needs_cc
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_nan_and_inf_keep_their_meaning(dt):
    x = np.array([0.0, 1.0, -1.0, np.nan, np.inf, 2.0, 0.0], dt)
    d = np.array([0.0, 0.0, 0.0, 1.0, 1.0, np.inf, 3.0], dt)
    with np.errstate(all="ignore"):
        want = nan_guard(x, d)
        got = astjax.jit(nan_guard, backend="c", fastmath=True)(x, d)
        scalar = astjax.jit(nan_guard, backend="c", fastmath=True)(x, 0.0)
        scalar_want = nan_guard(x, 0.0)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(scalar, scalar_want)


def loss(w, x, y):
    h = np.tanh(x @ w)
    return np.sum((h / (1.0 + y * y) - y) ** 2) / x.shape[0]


@needs_cc
def test_gradients_under_fastmath_match_finite_differences():
    rng = np.random.default_rng(0)
    w, x, y = rng.standard_normal((4, 3)), rng.standard_normal((6, 4)), rng.standard_normal((6, 3))
    g = astjax.jit(astjax.grad(loss), fastmath=True)(w, x, y)
    np.testing.assert_allclose(g, numerical_grad(loss, (w, x, y)), rtol=1e-6, atol=1e-8)


def test_the_flag_set_keeps_what_the_kernels_rely_on():
    for banned in ("-ffast-math", "-Ofast", "-ffinite-math-only", "-fassociative-math",
                   "-funsafe-math-optimizations"):
        assert banned not in cc.FASTMATH_FLAGS
    marked = cc.FASTMATH_MARK + "int f(void) { return 1; }\n"
    plain = "int f(void) { return 1; }\n"
    assert "-ffp-contract=off" in cc.text_flags(plain, "")
    fast = cc.text_flags(marked, "")
    assert "-ffp-contract=off" not in fast and set(cc.FASTMATH_FLAGS) <= set(fast)
    assert "--fmad=false" in nv.options_for(plain)
    assert "--prec-div=false" in nv.options_for(nv.FASTMATH_MARK + plain)
    assert "--use_fast_math" not in nv.FASTMATH_OPTIONS
    if cc.available()[0]:
        assert cc.key(marked) != cc.key(cc.FASTMATH_MARK + plain[:-1])
        assert cc.key(marked) != cc.key(plain)


def test_fastmath_must_be_a_bool():
    with pytest.raises(ArgumentError, match="fastmath must be True or False"):
        astjax.jit(np.sin, fastmath="yes")


def test_cuda_kernels_are_marked_and_compile_with_the_fast_options(monkeypatch):
    from astjax.kernels import cuda_runtime as cr
    monkeypatch.setattr(cr, "_default", [])
    monkeypatch.setattr(cr, "gpu_visible", lambda: False)
    p0, density, dx = _stencil_args(np.float32, 64)
    text = astjax.make_source(astjax.jit(stencil, static_argnums=3, backend="cuda",
                                         fastmath=True))(p0, density, dx, 5)
    assert text.count(nv.FASTMATH_MARK) == 2                     # both kernels
    assert re.search(r" \* \(\((float|double)\)1 / (s|in)\d+\)", text)
    exact = astjax.make_source(astjax.jit(stencil, static_argnums=3, backend="cuda"))(
        p0, density, dx, 5)
    assert nv.FASTMATH_MARK not in exact
    if not nv.available()[0]:
        if os.environ.get("CI"):     # (CI installs nvidia-cuda-nvrtc: the test extra)
            raise AssertionError(f"CI needs NVRTC: {nv.available()[1]}")
        pytest.skip(nv.available()[1])
    modules = text.split(nv.FASTMATH_MARK)[1:]
    assert nv.options_for(nv.FASTMATH_MARK + modules[0]) == nv.FASTMATH_OPTIONS
    for module in modules:
        assert ".entry" in nv.compile_ptx(nv.FASTMATH_MARK + module)


def test_astjax_show_takes_fastmath(capsys, monkeypatch):
    from astjax import cli
    from astjax.kernels import backend as kbackend
    # (tanh as a kernel: on a machine where NumPy's AVX-512 tanh is faster the group
    # is no kernel, and shows no kernel flags)
    monkeypatch.setattr(kbackend, "NUMPY_FASTER", frozenset())
    target = os.path.join(os.path.dirname(__file__), "programs", "fusable.py")
    assert cli.main(["show", f"{target}:two_results", "-t", "jit(backend='c', fastmath=True)",
                     "-a", "f32[30,30], f32[30]", "--color", "never", "--kernels"]) == 0
    shown = capsys.readouterr().out
    if cc.available()[0]:
        assert cc.FASTMATH_MARK.strip() in shown
    assert cli.main(["show", f"{target}:two_results", "-t", "jit(backend='c')",
                     "-a", "f32[30,30], f32[30]", "--color", "never", "--kernels"]) == 0
    assert cc.FASTMATH_MARK.strip() not in capsys.readouterr().out


def test_the_wave_step_divides_by_the_density_reciprocals():
    """The seeds' simulation: its carry starts as ``np.zeros_like``, its amplitude is
    a step of ``xs``, ``dt * dt`` is a Python float; through all of them the step's
    values are float32, so both density divisions use reciprocals made before the
    loop, and the result stays within 1e-5 of the peak after 60 steps."""
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
    import wave
    _, velocity, problem, _ = wave.setup(40, 30, 60, np.float32)
    fast = astjax.jit(wave.simulate, backend="numpy", fastmath=True)
    shown = astjax.make_source(fast)(velocity, **problem)
    head = shown.split("for ")[0]
    assert "density_half_x_reciprocal = 1 / density_half_x" in head
    assert "density_half_y_reciprocal = 1 / density_half_y" in head
    got, want = fast(velocity, **problem), wave.simulate_loop(velocity, **problem)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype == np.float32
        assert np.max(np.abs(g - w)) <= 1e-5 * np.max(np.abs(w))


def test_dtype_inference_follows_python_numbers_and_steps_of_xs():
    from astjax.passes import reciprocal

    def f(x, xs, dt):
        def step(c, a):
            k = dt * dt * 0.5                  # Python float arithmetic
            return c * k + a, c[0]
        return lax.scan(step, np.zeros_like(x), xs)

    seen = {}
    run = reciprocal.run

    def spy(fn, arg_dtypes=None, weak_args=None):
        seen.update(reciprocal.infer_dtypes(fn, arg_dtypes, weak_args))
        return run(fn, arg_dtypes, weak_args)
    try:
        reciprocal.run = spy
        astjax.jit(f, backend="numpy", fastmath=True)(np.ones(3, np.float32),
                                                      np.ones(4, np.float32), 0.1)
    finally:
        reciprocal.run = run
    floats = {n for n, d in seen.items() if d == np.float32}
    assert {"x", "xs"} <= floats
    assert any(n.startswith("c") for n in floats)      # the carry, through the loop
