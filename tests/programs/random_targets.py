"""Functions that draw random numbers, for ``astjax gen`` (tests/test_random_gen.py)."""
import numpy as np

from astjax import random as jr


def noisy(key, x):
    k1, k2 = jr.split(key)
    return x * jr.normal(k1, x.shape) + jr.uniform(k2, x.shape, minval=-1.0, maxval=1.0)


def reparam_loss(mu, log_sigma, key):
    k1, k2, k3 = jr.split(key, 3)
    z = mu + np.exp(log_sigma) * jr.normal(k1, mu.shape, np.float64)
    g = jr.gamma(k2, np.exp(log_sigma), None, np.float64)
    t = jr.truncated_normal(k3, -1.0, mu, None, np.float64)
    return np.sum(np.sin(z) * g + t ** 2)


def dropout(w, x, key):
    keep = jr.bernoulli(jr.fold_in(key, 1), 0.8, x.shape)
    h = np.where(keep, x / 0.8, 0.0)
    return np.sum(np.tanh(h @ w))


def many(key):
    ka, kb, kc = jr.split(key, 3)
    return (jr.bits(ka, (3,)), jr.randint(kb, (4,), 0, 10), jr.exponential(kc, (2,)),
            jr.permutation(ka, 6), jr.categorical(kb, np.log(np.arange(1.0, 4.0))))
