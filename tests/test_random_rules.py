"""The registry entries of astjax.random: batching samples for tests/test_rules_batch.py
(keys are perturbed per lane, so every lane draws from its own key), and the
derivative templates of the reparameterized samplers checked against central finite
differences in float64."""
from __future__ import annotations

import numpy as np
import pytest

from astjax import primitives as P
from astjax import random as jr
from astjax.templates import jvp as J
from astjax.templates import vjp as V


def _key(r):
    return r.integers(0, 2**32, 2, dtype=np.uint64).astype(np.uint32)


def _u(r, shape):
    return r.standard_normal(shape)


def _spd(r, n=3):
    m = r.standard_normal((n, n))
    return m @ m.T + n * np.eye(n)


# name -> (rng -> (args, kwargs), batched parameter names), merged into EXTRA there
RANDOM_BATCH_SAMPLES = {
    "random_key": (lambda r: ((np.array(5),), {}), ("seed",)),
    "random_key_data": (lambda r: ((_key(r),), {}), ("keys",)),
    "random_wrap_key_data": (lambda r: ((_key(r),), {}), ("key_bits_array",)),
    "random_split": (lambda r: ((_key(r),), {"num": (2, 3)}), ("key",)),
    "random_fold_in": (lambda r: ((_key(r), np.array(7)), {}), ("key", "data")),
    "random_bits": (lambda r: ((_key(r), (2, 3)), {"dtype": "uint16"}), ("key",)),
    "random_uniform": (lambda r: ((_key(r), (3, 4), "float64", _u(r, (4,)),
                                   _u(r, (3, 1)) + 4.0), {}), ("key", "minval", "maxval")),
    "random_normal": (lambda r: ((_key(r), (2, 5)), {}), ("key",)),
    "random_exponential": (lambda r: ((_key(r), (4,)), {"dtype": "float64"}), ("key",)),
    "random_bernoulli": (lambda r: ((_key(r), np.full((3,), 0.4)), {}), ("key", "p")),
    "random_categorical": (lambda r: ((_key(r), _u(r, (3, 5))), {"axis": 0}),
                           ("key", "logits")),
    "random_randint": (lambda r: ((_key(r), (4,), -3, 10), {}), ("key",)),
    "random_permutation": (lambda r: ((_key(r), _u(r, (4, 3))), {"axis": 1}),
                           ("key", "x")),
    "random_choice": (lambda r: ((_key(r), _u(r, (5,))), {"shape": (3,)}), ("key", "a")),
    "random_truncated_normal": (lambda r: ((_key(r), np.array([-1.0, 0.5, -2.0]), 2.0),
                                           {"dtype": "float64"}), ("key", "lower")),
    "random_unit_like": (lambda r: ((_key(r), _u(r, (2, 3))), {}), ("key", "like")),
    "random_unit_like_batched": (lambda r: ((np.stack([_key(r), _key(r)], -1), _u(r, (2, 3, 2))),
                                            {}), ("key_b", "like")),
    "random_gamma": (lambda r: ((_key(r), r.uniform(0.3, 3.0, (3,))), {}), ("key", "a")),
    "random_multivariate_normal": (lambda r: ((_key(r), _u(r, (3,)), _spd(r)), {}),
                                   ("key", "mean", "cov")),
    "random_permutation_vjp": (lambda r: ((_u(r, (4, 3)), _key(r), _u(r, (4, 3))),
                                          {"axis": 1}), ("t", "key", "x")),
    "random_gamma_grad": (lambda r: ((r.uniform(0.3, 3.0, (3,)), r.uniform(0.1, 4.0, (3,))),
                                     {}), ("a", "sample")),
    "random_multivariate_normal_vjp": (
        lambda r: ((_u(r, (2, 3)), _key(r), _u(r, (3,)), _spd(r)), {"shape": (2,)}),
        ("g", "key", "mean", "cov")),
    "random_multivariate_normal_jvp": (
        lambda r: ((_key(r), _u(r, (3,)), _spd(r), _u(r, (3,)), _u(r, (3, 3))), {}),
        ("key", "mean", "cov", "dmean", "dcov")),
}


def test_every_random_primitive_has_a_batching_sample():
    names = {n for n, p in P.REGISTRY.items() if n.startswith("random_") and p.kind != "batch"}
    assert names == set(RANDOM_BATCH_SAMPLES)


def _fd(f, x, v, eps=1e-6):
    return (f(x + eps * v) - f(x - eps * v)) / (2 * eps)


@pytest.mark.parametrize("minval, maxval", [(-1.0, 2.0), (np.array([0.5, -0.5, 0.0]), 3.0),
                                            (np.zeros((2, 3)), np.ones(3) * 4)])
def test_uniform_rules_match_finite_differences(minval, maxval):
    rng = np.random.default_rng(0)
    key = jr.PRNGKey(3)
    shape = (2, 3)
    f = lambda lo, hi: jr.uniform(key, shape, np.float64, lo, hi)  # noqa: E731
    g = rng.standard_normal(shape)
    ans = f(minval, maxval)
    d_lo, d_hi = V.random_uniform(g, ans, key, shape, np.float64, minval, maxval)
    assert np.shape(d_lo) == np.shape(minval) and np.shape(d_hi) == np.shape(maxval)
    v_lo = rng.standard_normal(np.shape(minval))
    v_hi = rng.standard_normal(np.shape(maxval))
    fd = _fd(lambda t: f(minval + t * v_lo, maxval + t * v_hi), 0.0, 1.0)
    np.testing.assert_allclose(np.sum(g * fd), np.sum(d_lo * v_lo) + np.sum(d_hi * v_hi),
                               rtol=1e-7)
    tangent = J.random_uniform(ans, key, shape, np.float64, minval, maxval, v_lo, v_hi)
    np.testing.assert_allclose(tangent, fd, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("shape, axis, independent", [((6,), 0, False), ((4, 3), 0, False),
                                                      ((4, 3), 1, False), ((4, 3), 1, True),
                                                      ((2, 3, 4), -1, True)])
def test_permutation_rules_are_adjoint(shape, axis, independent):
    rng = np.random.default_rng(1)
    key = jr.PRNGKey(11)
    x = rng.standard_normal(shape)
    y = jr.permutation(key, x, axis, independent)
    g = rng.standard_normal(y.shape)
    gx = V.random_permutation(g, y, key, x, axis, independent)
    np.testing.assert_allclose(np.sum(g * y), np.sum(gx * x), rtol=1e-12)
    dx = rng.standard_normal(shape)
    np.testing.assert_array_equal(J.random_permutation(y, key, x, axis, independent, dx),
                                  jr.permutation(key, dx, axis, independent))
    # the adjoint's own rules: its vjp is the permutation again, its jvp itself
    h = rng.standard_normal(shape)
    np.testing.assert_allclose(np.sum(h * gx), np.sum(
        V.random_permutation_vjp(h, gx, g, key, x, axis, independent) * g), rtol=1e-12)


def test_batched_forms_match_a_loop_over_keys():
    keys = jr.split(jr.PRNGKey(0), 3)
    kb = np.ascontiguousarray(keys.T)
    cases = [("normal", ((4,),)), ("bits", ((2, 2),)), ("exponential", ((3,),)),
             ("randint", ((5,), 0, 7)), ("split", (3,))]
    for name, args in cases:
        out = getattr(jr, f"{name}_batched")(kb, *args)
        ref = np.stack([getattr(jr, name)(k, *args) for k in keys], -1)
        np.testing.assert_array_equal(out, ref, err_msg=name)
    lo = np.array([0.0, 1.0, 2.0])[:, None]            # lifted: the same for every key
    out = jr.uniform_batched(kb, (3,), np.float64, lo, 5.0)
    ref = np.stack([jr.uniform(k, (3,), np.float64, lo[:, 0], 5.0) for k in keys], -1)
    np.testing.assert_array_equal(out, ref)
