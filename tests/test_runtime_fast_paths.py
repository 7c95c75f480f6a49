"""Fast paths of the backward sweep's helpers (the MLP's per-call overhead) give what
the general paths give: values, dtypes, shapes and types (0-d array vs scalar)."""
from __future__ import annotations

import numpy as np
import pytest

from astjax import runtime as rt, runtime_array as ra


def _general_unbroadcast(t, x):
    """What ``unbroadcast`` computes without its fast paths (its general path)."""
    lead = t.ndim - x.ndim
    axes = tuple(range(lead)) + tuple(i + lead for i, n in enumerate(x.shape)
                                      if n == 1 and t.shape[i + lead] != 1)
    out = t.sum(axis=axes) if axes else t
    out = out.reshape(x.shape) if type(out) is np.ndarray else np.reshape(out, x.shape)
    if x.dtype.kind in "fc" and out.dtype != x.dtype:
        out = np.asarray(out).astype(x.dtype)
    return out


@pytest.mark.parametrize("tdt,xdt", [(np.float32, np.float32), (np.float64, np.float64),
                                     (np.float64, np.float32), (np.complex128, np.complex128),
                                     (np.int32, np.int32)])
@pytest.mark.parametrize("tshape,xshape", [((5, 3), (3,)), ((7, 2, 4), (2, 4)),
                                           ((0, 3), (3,)), ((4,), ()), ((6, 1), (1,))])
def test_unbroadcast_leading_axis(tdt, xdt, tshape, xshape):
    rng = np.random.default_rng(0)
    t = (rng.standard_normal(tshape) * 100).astype(tdt)
    x = np.zeros(xshape, xdt)
    got, want = ra.unbroadcast(t, x), _general_unbroadcast(t, x)
    assert type(got) is type(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got, want)
    # the meta stand-in of x (a zero-stride view) is read the same way
    got_meta = ra.unbroadcast(t, rt.meta(x))
    assert type(got_meta) is type(want) and np.array_equal(got_meta, want)
    assert got_meta.dtype == want.dtype


@pytest.mark.parametrize("seed", [np.float32(1.0), np.float64(2.5), 1.0, np.array(3.0)])
@pytest.mark.parametrize("xdt", [np.float32, np.float64, np.int64])
def test_unreduce_of_a_full_reduction(seed, xdt):
    x = np.arange(6, dtype=xdt).reshape(2, 3)
    got = ra.unreduce(seed, x)
    want = ra.broadcast_like(np.reshape(seed, (1, 1)), x)    # the general path
    assert type(got) is np.ndarray and got.dtype == want.dtype and got.shape == (2, 3)
    assert np.array_equal(got, want)
    assert ra.unreduce(seed, np.float32(2.0)).shape == ()


def test_instantiate_arrays_and_symbolic_zeros():
    a, b = np.ones(3, np.float32), np.ones((2, 2))
    g = [(a * 2, None), None]
    out = rt.instantiate(g, [(a, b), (a, b)])
    assert out[0][0] is g[0][0]
    assert out[0][1].dtype == b.dtype and not out[0][1].any()
    assert isinstance(out[1], tuple) and out[1][0].shape == (3,)
    assert rt.instantiate(a, a) is a


@pytest.mark.parametrize("dt", [np.float16, np.float32, np.float64, np.longdouble])
def test_scalar_loss_seed_and_check(dt):
    loss = dt(2.5)
    assert rt.check_scalar_output(loss, "f") is loss
    one = rt.ones_like(loss)
    general = np.asarray(loss).dtype.type(1)
    assert type(one) is type(general) and one == general
    with pytest.raises(Exception, match="scalar output"):
        rt.check_scalar_output(np.ones(2, dt), "f")
    with pytest.raises(Exception, match="floating-point"):
        rt.check_scalar_output(np.int64(2), "f")
