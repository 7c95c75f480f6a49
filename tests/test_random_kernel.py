"""The compiled threefry kernel (astjax/kernels/threefry.py) against astjax.random's
NumPy path: the same bits for every sampler it fuses, dtype, shape and batch of keys,
eager and jitted."""
from __future__ import annotations

import numpy as np
import pytest

import astjax
from astjax import random as jr
from astjax.kernels import threefry

pytestmark = pytest.mark.skipif(not threefry.available(), reason="no C compiler here")


def _both(fn):
    """``fn()`` with the kernel and on the NumPy path."""
    old = jr.USE_KERNEL
    try:
        jr.USE_KERNEL = True
        fast = fn()
        jr.USE_KERNEL = False
        slow = fn()
    finally:
        jr.USE_KERNEL = old
    return fast, slow


KEYS = [jr.PRNGKey(0), jr.PRNGKey(2**31 - 1), jr.fold_in(jr.PRNGKey(7), 3),
        np.array([0xDEADBEEF, 0x12345678], np.uint32)]
DRAWS = [
    ("bits", lambda k: jr.bits(k, (5000,))),
    ("bits8", lambda k: jr.bits(k, (70, 90), np.uint8)),
    ("bits64", lambda k: jr.bits(k, (4100,), np.uint64)),
    ("split", lambda k: jr.split(k, 5000)),
    ("uniform", lambda k: jr.uniform(k, (64, 100))),
    ("uniform64", lambda k: jr.uniform(k, (6000,), np.float64, -3.0, 2.5)),
    ("uniform_bounds", lambda k: jr.uniform(k, (5000,), minval=-1e-3, maxval=7.0)),
    ("normal", lambda k: jr.normal(k, (100, 50))),
    ("normal64", lambda k: jr.normal(k, (5000,), np.float64)),
    ("normal16", lambda k: jr.normal(k, (5000,), np.float16)),
    ("exponential", lambda k: jr.exponential(k, (5000,))),
    ("exponential64", lambda k: jr.exponential(k, (5000,), np.float64)),
    ("randint", lambda k: jr.randint(k, (5000,), -7, 1000)),
    ("bernoulli", lambda k: jr.bernoulli(k, 0.3, (5000,))),
    ("truncated_normal", lambda k: jr.truncated_normal(k, -1.0, 2.0, (5000,))),
]


@pytest.mark.parametrize("name, draw", DRAWS, ids=[d[0] for d in DRAWS])
@pytest.mark.parametrize("key", range(len(KEYS)))
def test_kernel_equals_numpy(name, draw, key):
    fast, slow = _both(lambda: draw(KEYS[key]))
    assert fast.dtype == slow.dtype and fast.shape == slow.shape
    np.testing.assert_array_equal(fast, slow)


def test_batched_keys():
    keys = jr.split(jr.PRNGKey(1), 3)

    def f(k):
        return jr.normal(k, (2000, 3)), jr.uniform(k, (4096,), np.float64), jr.bits(k, (5000,))

    fast, slow = _both(lambda: astjax.vmap(f)(keys))
    for a, b in zip(fast, slow):
        np.testing.assert_array_equal(a, b)
    for i, k in enumerate(keys):
        np.testing.assert_array_equal(fast[0][i], jr.normal(k, (2000, 3)))


def test_jit_uses_the_same_bits():
    def f(k):
        return jr.normal(k, (300, 40)) * 2.0 + jr.exponential(k, (300, 40))

    key = jr.PRNGKey(5)
    fast, slow = _both(lambda: astjax.jit(f)(key))
    np.testing.assert_array_equal(fast, slow)
    np.testing.assert_array_equal(fast, f(key))


def test_small_draws_stay_in_numpy():
    assert not threefry.wanted((10,), np.zeros((2,), np.uint32))
    assert threefry.wanted((threefry.MIN_SIZE,), np.zeros((2,), np.uint32))
