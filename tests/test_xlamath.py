"""astjax.xlamath against XLA's CPU results recorded through JAX 0.10
(tests/gen_xlamath_fixtures.py): every value identical, float32 and float64."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from astjax import xlamath

FIXTURE = Path(__file__).parent / "fixtures" / "xlamath.npz"
with np.load(FIXTURE) as _data:
    DATA = dict(_data)

CASES = [(name, dt) for name in ("log", "log1p", "erf_inv", "erf", "power", "fma")
         for dt in ("float32", "float64")]


def _same(out, ref):
    """Bitwise equality, NaN equal to NaN."""
    return (out == ref) | (np.isnan(out) & np.isnan(ref))


@pytest.mark.parametrize("name, dt", CASES)
def test_identical_to_xla(name, dt):
    x = DATA[f"{name}:{dt}:x"]
    ref = DATA[f"{name}:{dt}:y"]
    fn = getattr(xlamath, name)
    out = fn(*x) if name in ("power", "fma") else fn(x)
    out = np.asarray(out)
    assert out.dtype == ref.dtype and out.shape == ref.shape
    same = _same(out, ref)
    args = x[:, ~same] if x.ndim == 2 else x[~same]
    assert same.all(), f"{name} {dt}: {np.sum(~same)} differ, e.g. at {args[..., :3]}"


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_fma_rounds_once(dt):
    # 1 + 2**-p and 1 - 2**-p: their product is 1 - 2**-2p, which rounds to 1 unless
    # the product is kept exact; with c = -1 the fused result is -2**-2p exactly
    p = 13 if dt == np.float32 else 27
    a = dt(1 + 2.0 ** -p)
    b = dt(1 - 2.0 ** -p)
    assert xlamath.fma(a, b, dt(-1)) == dt(-(2.0 ** (-2 * p)))
    assert a * b + dt(-1) == 0


def test_half_precision_goes_through_float32():
    x = np.linspace(-0.9, 0.9, 50).astype(np.float16)
    out = xlamath.erf_inv(x)
    assert out.dtype == np.float16
    np.testing.assert_allclose(out, xlamath.erf_inv(x.astype(np.float32)), rtol=2e-3)
    assert xlamath.log1p(x).dtype == np.float16


# ------------------------------------------------------------------ rsqrt
# XLA's rsqrt is the CPU's approximate instruction plus Newton steps (float32: one;
# float64: two, with AVX-512's vrsqrt14pd; a division without AVX-512), recorded by
# tests/gen_rsqrt_fixtures.py on two CPUs (tests/fixtures/rsqrt_xla*.npz): bit for bit
# where the kernel compiles on a CPU like the recording's (float32: its vendor;
# float64: its AVX-512 answer), else within 2 ulps.

FIXTURES = Path(__file__).parent / "fixtures"


def _load_npz(path):
    with np.load(path) as data:
        return dict(data)


RSQRT = {p.stem: _load_npz(p) for p in sorted(FIXTURES.glob("rsqrt_xla*.npz"))}
RSQRT_KEYS = {"float32": "rsqrt", "float64": "rsqrt64"}
RSQRT_CASES = [(name, dt) for name in RSQRT for dt in RSQRT_KEYS]


def _exact(rec, dt):
    """Whether this CPU computes ``dt``'s rsqrt as the recording's did."""
    if not xlamath.rsqrt_exact_available(dt):
        return False
    if dt == "float32":
        return xlamath.cpu_vendor() == str(rec["vendor"])
    # (rsqrt_xla.npz predates the field: an AMD EPYC with AVX-512)
    return xlamath.cpu_has_avx512() == bool(rec.get("avx512f", True))


def _recorded_vendor(dt):
    """Whether this CPU's vendor made one of the float32 recordings (float64's
    answer does not depend on the vendor)."""
    if dt != "float32" or not xlamath.rsqrt_exact_available(dt):
        return True
    return any(xlamath.cpu_vendor() == str(r["vendor"]) for r in RSQRT.values())


def _ulps(out, ref):
    """Distance in ulps (finite, same-sign values)."""
    i = np.int32 if out.dtype == np.float32 else np.int64
    return np.abs(out.view(i).astype(np.int64) - ref.view(i).astype(np.int64))


def test_rsqrt_fixtures_cover_both_float64_forms():
    assert len(RSQRT) >= 2
    assert {bool(r.get("avx512f", True)) for r in RSQRT.values()} == {True, False}


@pytest.mark.parametrize("fixture, dt", RSQRT_CASES)
def test_rsqrt_identical_to_xla(fixture, dt):
    rec = RSQRT[fixture]
    x, ref = rec[RSQRT_KEYS[dt] + ":x"], rec[RSQRT_KEYS[dt] + ":y"]
    with np.errstate(invalid="ignore"):
        out = np.asarray(xlamath.rsqrt(x))
    assert out.dtype == dt and out.shape == ref.shape
    same = _same(out, ref)
    if _exact(rec, dt):
        assert same.all(), f"{np.sum(~same)} differ from XLA, e.g. at {x[~same][:3]}"
    fin = np.isfinite(ref) & (ref > 0)
    # XLA's own error: up to 2 ulps; another vendor's estimate (no recording of it
    # here) may land one more away from this recording's
    assert _ulps(out[fin], ref[fin]).max() <= (2 if _recorded_vendor(dt) else 3)
    norm = fin & (x >= np.finfo(x.dtype).tiny)    # (a denormal reads as 0: inf)
    assert same[~fin | ~norm].all()   # zeros, infinities, negatives: the estimate's value


@pytest.mark.parametrize("fixture, dt", RSQRT_CASES)
def test_rsqrt_fallback_is_correctly_rounded(monkeypatch, fixture, dt):
    # no compiler: 1/sqrt, an ulp or two from XLA where the Newton step rounds the other
    # way (and XLA's own value where it divides: float64 without AVX-512)
    rec = RSQRT[fixture]
    monkeypatch.setitem(xlamath._rsqrt_fns, dt, "no compiler (test)")
    assert not xlamath.rsqrt_exact_available(dt)
    x, ref = rec[RSQRT_KEYS[dt] + ":x"], rec[RSQRT_KEYS[dt] + ":y"]
    with np.errstate(invalid="ignore"):
        everything = np.asarray(xlamath.rsqrt(x))
    assert _same(everything, ref)[(x < np.finfo(x.dtype).tiny) | ~np.isfinite(x)].all()
    fin = np.isfinite(ref) & (ref > 0) & (x >= np.finfo(x.dtype).tiny)
    out = np.asarray(xlamath.rsqrt(x[fin]))
    np.testing.assert_array_equal(out, x.dtype.type(1) / np.sqrt(x[fin]))
    diff = _ulps(out, ref[fin])
    assert diff.max() <= 2
    if dt == "float64" and not rec.get("avx512f", True):
        assert not diff.any()                  # XLA divides: the same numbers
    else:
        assert 0.05 < np.mean(diff != 0) < 0.5    # the fixture tells the two apart


def test_rsqrt_half_precision_is_xlas_on_every_cpu():
    # XLA widens to float32; within 2 float32 ulps of 1/sqrt, which is never closer than
    # 3 of them to a half-precision rounding boundary: the correctly rounded value
    x = np.arange(0x7C01, dtype=np.uint16).view(np.float16)          # 0 .. inf
    exact = 1 / np.sqrt(x[1:-1].astype(np.float64))
    lo = exact.astype(np.float16)
    hi = np.nextafter(lo, np.float16(np.inf))
    below = np.where(lo.astype(np.float64) > exact, np.nextafter(lo, np.float16(0)), lo)
    above = np.where(lo.astype(np.float64) > exact, lo, hi)
    mid = (below.astype(np.float64) + above.astype(np.float64)) / 2
    margin = np.abs(exact - mid) / np.spacing(exact.astype(np.float32))
    assert margin.min() > 2.5
    with np.errstate(divide="ignore"):
        out = np.asarray(xlamath.rsqrt(x))
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out[1:-1], exact.astype(np.float16))
    assert out[0] == np.inf and out[-1] == 0
    # and what the float32 kernel (or its fallback) gives, rounded, is the same
    via32 = np.asarray(xlamath.rsqrt(x[1:-1].astype(np.float32))).astype(np.float16)
    np.testing.assert_array_equal(via32, out[1:-1])


def test_rsqrt_shapes_dtypes_and_edges():
    x = np.float32([[0.0, 1.0, 4.0], [np.inf, -1.0, np.nan]])[:, ::-1]   # not contiguous
    with np.errstate(invalid="ignore"):
        out = np.asarray(xlamath.rsqrt(x))
    assert out.shape == (2, 3) and out.dtype == np.float32
    if _recorded_vendor("float32"):      # (AMD's estimate and Newton step: exact here)
        np.testing.assert_array_equal(out[0], [0.5, 1.0, np.inf])
    else:
        np.testing.assert_allclose(out[0], [0.5, 1.0, np.inf], rtol=4 * 2.0 ** -23)
    assert out[1, 2] == 0 and np.isnan(out[1, :2]).all()
    assert np.asarray(xlamath.rsqrt(np.float32(4.0))).shape == ()
    y = np.exp(np.random.default_rng(0).uniform(-80, 80, 1000))
    np.testing.assert_allclose(xlamath.rsqrt(y), 1 / np.sqrt(y), rtol=3 * 2.0 ** -53)
    assert xlamath.rsqrt(np.float16([4.0])).dtype == np.float16
    np.testing.assert_array_equal(xlamath.rsqrt(np.array([4, 16])), [0.5, 0.25])
    got = np.asarray(xlamath.rsqrt(y.astype(np.float32))).astype(np.float64)
    np.testing.assert_allclose(got, 1 / np.sqrt(y.astype(np.float32).astype(np.float64)),
                               rtol=1.5 * 2.0 ** -23)


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_rsqrt_kernel_available_here_or_says_why(dt):
    ok = xlamath.rsqrt_exact_available(dt)
    assert ok or "Error" in xlamath._rsqrt_fns[dt] or "Unavailable" in xlamath._rsqrt_fns[dt]


# ------------------------------------------------------------------ half precision, denormals
# tests/fixtures/half_xla.npz (tests/gen_half_fixtures.py): XLA's float16 functions on
# every third float16 (in float32, rounded back), and float32/float64 denormals, which
# XLA's CPU code reads as zero and flushes to zero.

HALF = _load_npz(FIXTURES / "half_xla.npz")
EVERY_THIRD_HALF = np.arange(0, 1 << 16, 3, dtype=np.uint32).astype(np.uint16).view(np.float16)


def _same_signed(out, ref):
    """Bitwise equality, the sign of a zero included, NaN equal to NaN."""
    return ((out == ref) & (np.signbit(out) == np.signbit(ref))) | (np.isnan(out) & np.isnan(ref))


@pytest.mark.parametrize("name", ["log", "log1p", "erf_inv", "erf", "rsqrt"])
def test_half_precision_identical_to_xla(name):
    ref = HALF[f"{name}:float16"]
    with np.errstate(all="ignore"):
        out = np.asarray(getattr(xlamath, name)(EVERY_THIRD_HALF))
    assert out.dtype == np.float16 and out.shape == ref.shape
    same = _same_signed(out, ref)
    assert same.all(), f"{np.sum(~same)} differ, e.g. at {EVERY_THIRD_HALF[~same][:3]}"


def test_half_precision_power_identical_to_xla():
    x, ref = HALF["power:float16:x"], HALF["power:float16:y"]
    with np.errstate(all="ignore"):
        out = np.asarray(xlamath.power(*x))
    assert out.dtype == np.float16
    assert _same_signed(out, ref).all()


@pytest.mark.parametrize("name", ["log", "log1p", "erf_inv", "erf"])
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_denormals_read_as_zero_like_xla(name, dt):
    # (not pow's: the C library, under XLA's denormals-are-zero, makes them garbage)
    x, ref = HALF[f"denormal:{dt}:x"], HALF[f"denormal:{name}:{dt}"]
    with np.errstate(all="ignore"):
        out = np.asarray(getattr(xlamath, name)(x))
    assert out.dtype == dt
    same = _same_signed(out, ref)
    assert same.all(), f"{np.sum(~same)} differ, e.g. at {x[~same][:3]}: {out[~same][:3]}"


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_power_flushes_denormal_results_like_xla(dt):
    x, ref = HALF[f"flush:power:{dt}:x"], HALF[f"flush:power:{dt}"]
    out = np.asarray(xlamath.power(x, np.dtype(dt).type(2)))
    assert (ref == 0).any() and _same_signed(out, ref).all()
