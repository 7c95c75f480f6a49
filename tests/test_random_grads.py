"""Derivatives of random samples in their parameters: gamma's shape ``a`` (implicit
reparameterization, against JAX's recorded values and the distribution's moments) and
multivariate_normal's mean and cov (through the Cholesky factor, against finite
differences of the sampler with a fixed key); forward mode, vmap and jit agree."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import astjax
from astjax import random as jr

from conftest import numerical_grad

with np.load(Path(__file__).parent / "fixtures" / "gamma_grad.npz") as _data:
    GAMMA = dict(_data)


def weighted_gamma(a, key, w):
    return np.sum(w * jr.gamma(key, a, None, np.float64))


@pytest.mark.parametrize("seed", range(6))
def test_gamma_gradient_matches_jax(seed):
    a, w = GAMMA["alphas"], GAMMA["weights"]
    key = jr.PRNGKey(seed)
    np.testing.assert_array_equal(jr.gamma(key, a, dtype=np.float64), GAMMA[f"{seed}:sample"])
    g = astjax.grad(weighted_gamma)(a, key, w)
    np.testing.assert_allclose(g, GAMMA[f"{seed}:grad"], rtol=1e-10, atol=1e-300)
    # forward mode: the same derivative, one direction at a time
    for i in (0, 3, 7):
        e = np.zeros_like(a)
        e[i] = 1.0
        _, t = astjax.jvp(lambda a: weighted_gamma(a, key, w), (a,), (e,))
        assert t == pytest.approx(g[i], rel=1e-12)


def test_gamma_grad_matches_jax_random_gamma_grad():
    a, x = GAMMA["random_gamma_grad:a"], GAMMA["random_gamma_grad:x"]
    np.testing.assert_allclose(jr.gamma_grad(a, x), GAMMA["random_gamma_grad:y"],
                               rtol=1e-9)


@pytest.mark.parametrize("a", [0.3, 1.0, 2.5, 12.0])
def test_gamma_gradient_is_unbiased(a):
    """d E[X]/da = 1 and d E[X^2]/da = 2a + 1 for X ~ Gamma(a): the mean of the
    per-sample derivatives over many keys must give them."""
    def first(a, key):
        return np.mean(jr.gamma(key, a, (40_000,), np.float64))

    def second(a, key):
        return np.mean(jr.gamma(key, a, (40_000,), np.float64) ** 2)

    key = jr.PRNGKey(11)
    assert astjax.grad(first)(a, key) == pytest.approx(1.0, rel=0.02)
    assert astjax.grad(second)(a, key) == pytest.approx(2 * a + 1, rel=0.03)


def test_gamma_gradient_under_vmap_and_jit():
    a = np.array([0.4, 1.3, 3.5])
    w = np.arange(3.0)
    keys = jr.split(jr.PRNGKey(2), 4)
    gv = astjax.vmap(astjax.grad(weighted_gamma), in_axes=(None, 0, None))(a, keys, w)
    for i, k in enumerate(keys):
        np.testing.assert_allclose(gv[i], astjax.grad(weighted_gamma)(a, k, w), rtol=1e-13)
    ga = astjax.vmap(astjax.grad(weighted_gamma), in_axes=(0, None, None))(
        np.stack([a, 2 * a]), keys[0], w)
    np.testing.assert_allclose(ga[1], astjax.grad(weighted_gamma)(2 * a, keys[0], w),
                               rtol=1e-13)
    np.testing.assert_allclose(astjax.jit(astjax.grad(weighted_gamma))(a, keys[1], w),
                               astjax.grad(weighted_gamma)(a, keys[1], w), rtol=1e-13)


def test_gamma_grad_float32():
    a = np.array([0.5, 2.0, 9.0], np.float32)
    x = jr.gamma(jr.PRNGKey(0), a)
    g = jr.gamma_grad(a, x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, jr.gamma_grad(a.astype(np.float64), x.astype(np.float64)),
                               rtol=1e-5)


RNG = np.random.default_rng(5)
_M = RNG.standard_normal((3, 3))
COV = _M @ _M.T + 2 * np.eye(3)
MEAN = RNG.standard_normal(3)
W = RNG.standard_normal((5, 3))


def mvn_loss(mean, cov, key):
    x = jr.multivariate_normal(key, mean, cov, (5,), np.float64)
    return np.sum(np.sin(x) * W)


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_multivariate_normal_gradient_in_mean_and_cov(seed):
    key = jr.PRNGKey(seed)
    g_mean, g_cov = astjax.grad(mvn_loss, argnums=(0, 1))(MEAN, COV, key)
    fd_mean, fd_cov = numerical_grad(mvn_loss, (MEAN, COV, key), (0, 1))
    np.testing.assert_allclose(g_mean, fd_mean, rtol=1e-7, atol=1e-9)
    # the sampler symmetrizes cov (as JAX's cholesky does): its gradient is symmetric
    np.testing.assert_allclose(g_cov, fd_cov, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(g_cov, g_cov.T, atol=1e-15)
    d_mean, d_cov = RNG.standard_normal(3), RNG.standard_normal((3, 3))
    _, t = astjax.jvp(lambda m, c: mvn_loss(m, c, key), (MEAN, COV), (d_mean, d_cov))
    assert t == pytest.approx(np.sum(fd_mean * d_mean) + np.sum(fd_cov * d_cov), rel=1e-6)


def test_multivariate_normal_gradient_batched_cov_and_vmap():
    covs = np.stack([COV, 2 * COV + np.eye(3)])
    key = jr.PRNGKey(4)

    def batched_loss(mean, covs):
        x = jr.multivariate_normal(key, mean, covs, (4, 2), np.float64)
        return np.sum(x ** 3)

    g = astjax.grad(batched_loss, argnums=(0, 1))(MEAN, covs)
    fd = numerical_grad(batched_loss, (MEAN, covs), (0, 1))
    np.testing.assert_allclose(g[0], fd[0], rtol=1e-6)
    np.testing.assert_allclose(g[1], fd[1], rtol=1e-6, atol=1e-7)
    keys = jr.split(key, 3)
    gv = astjax.vmap(astjax.grad(mvn_loss, argnums=(0, 1)), in_axes=(None, None, 0))(
        MEAN, COV, keys)
    for i, k in enumerate(keys):
        ref = astjax.grad(mvn_loss, argnums=(0, 1))(MEAN, COV, k)
        np.testing.assert_allclose(gv[0][i], ref[0], rtol=1e-13)
        np.testing.assert_allclose(gv[1][i], ref[1], rtol=1e-13)


def test_multivariate_normal_derivative_needs_cholesky():
    def loss(cov, key):
        return np.sum(jr.multivariate_normal(key, MEAN, cov, (2,), np.float64, "svd"))
    with pytest.raises(Exception, match="cholesky"):
        astjax.grad(loss)(COV, jr.PRNGKey(0))
