"""The per-shard functions of tests/test_sharding_vma.py, written once.

The tests run them through astjax; tests/gen_vma_fixtures.py loads this file a second
time with ``np`` and ``lax`` bound to ``jax.numpy`` and ``jax.lax`` to record JAX's
check_vma=True numbers for the same code.
"""
import numpy
import numpy as np

from astjax import lax

RING = [(0, 1), (1, 2), (2, 3), (3, 0)]


def data():
    """w, x, cotangents, a 3-d batch and split parameters (RandomState(0), in order)."""
    rng = numpy.random.RandomState(0)
    w, x = rng.randn(3, 2), rng.randn(8, 3)
    ct, ct2 = rng.randn(8, 2), rng.randn(2, 2)
    x4, w2 = rng.randn(8, 4, 3), rng.randn(2, 3, 2)
    return w, x, ct, ct2, x4, w2


def local(w, x):
    return np.sum(np.tanh(x @ w) ** 2)


def every_collective(w, x, w0=None, x0=None):
    h = np.tanh(x @ w)
    # pmax/pmin of a constant (JAX differentiates neither): finite differences hold
    # it at the base point (w0, x0)
    hs = lax.stop_gradient(h) if w0 is None else np.tanh(x0 @ w0)
    a = lax.pmax(hs, "i") * lax.pmin(hs, "i") * h
    g = lax.all_gather(h, "i")
    s = lax.psum_scatter(g * w[0, 0], "i", scatter_dimension=0)
    pp = lax.ppermute(h, "i", RING)
    aa = lax.all_to_all(np.concatenate([h, h * 2.0], 0), "i", 0, 0, tiled=True)
    idx = lax.axis_index("i").astype(np.float64)
    v = lax.pcast(w, "i", to="varying")
    return (np.sum(a) + np.sum(s * pp) + np.sum(aa ** 2) * 0.1 + idx * np.sum(v)
            + np.sum(lax.pmean(h, "i") * w[1]))


def loops(w, x):
    def body(k, c):
        return np.tanh(c @ w[:2] + lax.ppermute(c, "i", RING)) * 0.9
    c = lax.fori_loop(0, 3, body, x[:, :2])

    def step(c, xi):
        c2 = c * np.cos(xi[0]) + lax.pmean(np.sum(xi) * w[2], "i")
        return c2, lax.psum(np.sum(c2), "i")
    c, ys = lax.scan(step, c[0], x)
    return np.sum(c ** 2) + np.sum(ys) * 0.01


def varying_out(w, x):
    return np.tanh(x @ w) * lax.psum(np.sum(x), "i")


def invariant_out(w, x):
    return lax.psum(np.tanh(x @ w), "i")


def psum_i(w, x):
    return lax.psum(np.sum(np.tanh(x @ w) ** 2), "i")


def psum_j(w, x):
    return lax.psum(np.sum(np.tanh(x @ w) ** 2), "j")


def cond_varying(w, x):
    y = lax.psum(np.sum(np.tanh(x @ w)), "i")
    return lax.cond(np.sum(x) > 0, lambda y: y * 2.0, lambda y: y * 3.0, y)


def scan_invariant(w, x):
    def step(c, xi):
        c = c * 0.5 + lax.psum(np.sum(np.tanh(xi @ w)), "i")
        return c, c * c
    c, ys = lax.scan(step, np.zeros(()), x)
    return np.sum(ys) + c
