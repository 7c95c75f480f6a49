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
