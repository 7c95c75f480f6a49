"""Variational inference with reparameterized samples, trained with explicit keys.

Bayesian linear regression (Gaussian prior on the weights, Gaussian noise) with a
mean-field Gaussian posterior ``q(w) = N(mu, diag(sigma**2))``.  The negative ELBO is
estimated with ``samples`` draws ``w = mu + sigma * eps``, ``eps = normal(key)``: the
draws are vmapped over a batch of keys, the estimate is differentiated in ``mu`` and
``log_sigma`` (no derivative reaches a key) and the step is jitted.  The model has an
exact posterior, so the fit can be checked: ``mu`` reaches the posterior mean and
``sigma`` the mean-field optimum ``1 / sqrt(diag(precision))``.

Run: python examples/vi.py
"""
import numpy as np

import astjax
from astjax import random


def log_joint(w, X, y, noise_std, prior_std):
    resid = y - X @ w
    return -0.5 * np.sum(resid ** 2) / noise_std ** 2 - 0.5 * np.sum(w ** 2) / prior_std ** 2


def sample_term(params, key, X, y, noise_std, prior_std):
    mu, log_sigma = params
    eps = random.normal(key, mu.shape, np.float64)
    w = mu + np.exp(log_sigma) * eps          # reparameterized: differentiable in params
    return log_joint(w, X, y, noise_std, prior_std)


def neg_elbo(params, key, X, y, noise_std=0.5, prior_std=1.0, samples=16):
    keys = random.split(key, samples)
    terms = astjax.vmap(sample_term, in_axes=(None, 0, None, None, None, None))(
        params, keys, X, y, noise_std, prior_std)
    entropy = np.sum(params[1])               # of q, up to a constant
    return -(np.mean(terms) + entropy)


def make_data(seed=0, n=60, d=4, noise_std=0.5):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    w_true = rng.standard_normal(d)
    y = X @ w_true + noise_std * rng.standard_normal(n)
    return X, y, w_true


def exact_posterior(X, y, noise_std=0.5, prior_std=1.0):
    """Mean and precision of p(w | X, y): the answer VI should approach."""
    precision = X.T @ X / noise_std ** 2 + np.eye(X.shape[1]) / prior_std ** 2
    mean = np.linalg.solve(precision, X.T @ y / noise_std ** 2)
    return mean, precision


def train(steps=300, lr=0.05, seed=0, log=print):
    X, y, _ = make_data(seed)
    d = X.shape[1]
    params = (np.zeros(d), np.full(d, -1.0))
    step_fn = astjax.jit(astjax.value_and_grad(neg_elbo))
    m = [np.zeros(d), np.zeros(d)]
    v = [np.zeros(d), np.zeros(d)]
    key = random.PRNGKey(seed)
    history = []
    for t in range(1, steps + 1):
        key, sub = random.split(key)
        value, grads = step_fn(params, sub, X, y)
        new = []
        for i, (p, g) in enumerate(zip(params, grads)):      # Adam
            m[i] = 0.9 * m[i] + 0.1 * g
            v[i] = 0.999 * v[i] + 0.001 * g * g
            step = lr * (m[i] / (1 - 0.9 ** t)) / (np.sqrt(v[i] / (1 - 0.999 ** t)) + 1e-8)
            new.append(p - step)
        params = tuple(new)
        history.append(float(value))
        if t % 50 == 0:
            log(f"step {t}: negative ELBO {float(value):.3f}")
    return params, history


if __name__ == "__main__":
    (mu, log_sigma), _ = train()
    X, y, _ = make_data()
    mean, precision = exact_posterior(X, y)
    print("posterior mean  ", np.round(mean, 3))
    print("VI mean         ", np.round(mu, 3))
    print("mean-field std  ", np.round(1 / np.sqrt(np.diag(precision)), 3))
    print("VI std          ", np.round(np.exp(log_sigma), 3))
