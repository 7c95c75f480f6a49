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
# XLA's rsqrt is the CPU's approximate instruction plus Newton steps (one for float32,
# two for float64; tests/fixtures/rsqrt_xla.npz, recorded with
# tests/gen_rsqrt_fixtures.py): bit for bit where the kernel compiles on a CPU of the
# recording's vendor, else within 2 ulps.

with np.load(Path(__file__).parent / "fixtures" / "rsqrt_xla.npz") as _data:
    RSQRT = dict(_data)
RSQRT_KEYS = {"float32": "rsqrt", "float64": "rsqrt64"}


def _exact(dt):
    return (xlamath.rsqrt_exact_available(dt)
            and xlamath.cpu_vendor() == str(RSQRT["vendor"]))


def _ulps(out, ref):
    """Distance in ulps (finite, same-sign values)."""
    i = np.int32 if out.dtype == np.float32 else np.int64
    return np.abs(out.view(i).astype(np.int64) - ref.view(i).astype(np.int64))


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_rsqrt_identical_to_xla(dt):
    x, ref = RSQRT[RSQRT_KEYS[dt] + ":x"], RSQRT[RSQRT_KEYS[dt] + ":y"]
    with np.errstate(invalid="ignore"):
        out = np.asarray(xlamath.rsqrt(x))
    assert out.dtype == dt and out.shape == ref.shape
    same = _same(out, ref)
    if _exact(dt):
        assert same.all(), f"{np.sum(~same)} differ from XLA, e.g. at {x[~same][:3]}"
    fin = np.isfinite(ref) & (ref > 0)
    assert _ulps(out[fin], ref[fin]).max() <= 2    # XLA's own error: up to 2 ulps
    norm = fin & (x >= np.finfo(x.dtype).tiny)    # (a denormal reads as 0: inf)
    assert same[~fin | ~norm].all()   # zeros, infinities, negatives: the estimate's value


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_rsqrt_fallback_is_correctly_rounded(monkeypatch, dt):
    # no compiler: 1/sqrt, an ulp or two from XLA where the Newton step rounds the other way
    monkeypatch.setitem(xlamath._rsqrt_fns, dt, "no compiler (test)")
    assert not xlamath.rsqrt_exact_available(dt)
    x, ref = RSQRT[RSQRT_KEYS[dt] + ":x"], RSQRT[RSQRT_KEYS[dt] + ":y"]
    fin = np.isfinite(ref) & (ref > 0) & (x >= np.finfo(x.dtype).tiny)
    out = np.asarray(xlamath.rsqrt(x[fin]))
    np.testing.assert_array_equal(out, x.dtype.type(1) / np.sqrt(x[fin]))
    diff = _ulps(out, ref[fin])
    assert diff.max() <= 2
    assert 0.05 < np.mean(diff != 0) < 0.5    # the fixture tells the two apart


def test_rsqrt_shapes_dtypes_and_edges():
    x = np.float32([[0.0, 1.0, 4.0], [np.inf, -1.0, np.nan]])[:, ::-1]   # not contiguous
    with np.errstate(invalid="ignore"):
        out = np.asarray(xlamath.rsqrt(x))
    assert out.shape == (2, 3) and out.dtype == np.float32
    np.testing.assert_array_equal(out[0], [0.5, 1.0, np.inf])
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
