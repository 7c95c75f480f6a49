"""A corpus of two-argument programs ``f(x, y)`` for the composition matrix.

Each program is written the way users write NumPy (loops, branches, in-place updates,
pytrees, lax calls); ``CORPUS`` pairs it with an argument builder.  Arguments are
small (the oracles of third-order compositions take finite differences of finite
differences) and chosen away from kinks and branch thresholds, so float64 finite
differences are exact to the tolerances the matrix uses.  ``x`` is what ``grad``
differentiates; ``y`` is a second array argument (batched or not by ``vmap``).
"""
import numpy as np

from astjax import lax


def elementwise(x, y):
    return np.tanh(x) * y + np.sin(x * y) - np.exp(-x * x)


def reductions(x, y):
    s = np.sum(x * x, axis=0)
    m = np.mean(np.cos(x) * y, axis=-1)
    return s * np.prod(y) + np.max(x + 3.0) * m[:, None].sum() + np.var(x)


def matmul(x, y):
    h = np.tanh(x @ y)
    return h.T @ x + np.dot(x[0], y)


def for_loop(x, y):
    h = x
    for i in range(3):
        h = np.tanh(h * y + 0.3 * i) + x
    return h


def branches(x, y):
    s = np.sum(x)
    if s > 0:
        out = np.sin(x) * y
    else:
        out = x * x * y
    if np.max(y) > 5.0:
        out = out * 0.0
    return out


def while_loop(x, y):
    h = x
    n = 0
    while np.sum(h * h) < 6.0 and n < 6:
        h = h * 1.5 + 0.1 * y
        n = n + 1
    return h * y


def inplace(x, y):
    z = np.zeros(4)
    z[0] = x[0] * y[1]
    z[1:3] = np.sin(x[1:3]) + y[:2]
    z[1:] += x[:3] * 0.5
    z[3] *= y[2]
    return z


def pytree_in(x, y):
    h = np.tanh(x["w"] * y + x["b"])
    return h * x["b"][0] + np.sum(x["w"])


def pytree_out(x, y):
    a = np.sin(x) * y
    b = np.sum(np.cos(x * y))
    return a, {"s": b, "v": x * b}


def lax_calls(x, y):
    def body(i, c):
        return c * 0.8 + np.sin(x * (i + 1.0)) * y

    c = lax.fori_loop(0, 3, body, np.zeros_like(x))
    return lax.cond(np.sum(c) > -50.0, lambda a: a * y, lambda a: -a, c)


def scan_prog(x, y):
    def step(carry, t):
        carry = np.tanh(carry * t + x)
        return carry, carry * y

    final, ys = lax.scan(step, y, np.array([0.5, 1.0, 1.5]))
    return final + np.sum(ys, axis=0)


def closures(x, y):
    scale = np.sum(y * y)

    def f(u):
        return np.tanh(u * scale)

    def apply(g, u):
        return g(u) * 0.5

    return apply(np.sin, x) + apply(f, x) + f(y) + sum(np.cos(x * k) for k in (1.0, 2.0))


def piecewise(x, y):
    a = np.where(x > 0.0, x * y, np.sin(x))
    b = np.clip(x * 2.0, -1.5, 1.5)
    return np.maximum(a, b) + np.abs(y - 3.0)


def linalg(x, y):
    a = np.eye(2) * 3.0 + np.outer(x, x)
    s = np.linalg.solve(a, y)
    return s * np.linalg.det(a) + np.linalg.inv(a) @ x


def shapes(x, y):
    m = np.reshape(x, (2, 3))
    c = np.concatenate([m, y[None, :3]], axis=0)
    t = np.transpose(c) * np.arange(3.0)[:, None]
    return np.stack([t[:, 0], t[:, 2]], axis=1).ravel() + np.sum(m ** 2, axis=1)[[0, 1, 0, 1, 0, 1]]


def tuple_in(x, y):
    a, b = x
    h = a * b + np.sin(y)
    for i in range(2):
        h = np.cos(h) * a + b
    return h


# name -> (function, rng -> (x, y)); values kept well inside smooth regions.
def _pos(rng, shape, lo=0.4, hi=1.2):
    return rng.uniform(lo, hi, shape)


def _u(rng, shape, s=0.6):
    return rng.uniform(-s, s, shape)


CORPUS = {
    "elementwise": (elementwise, lambda r: (_u(r, (3,)), _u(r, (3,)))),
    "reductions": (reductions, lambda r: (_u(r, (2, 2)), _pos(r, (2,)))),
    "matmul": (matmul, lambda r: (_u(r, (2, 2)), _u(r, (2, 2)))),
    "for_loop": (for_loop, lambda r: (_u(r, (3,)), _u(r, (3,)))),
    "branches": (branches, lambda r: (_pos(r, (3,)), _u(r, (3,)))),
    "while_loop": (while_loop, lambda r: (np.array([0.7, 0.9]), _pos(r, (2,)))),
    "inplace": (inplace, lambda r: (_u(r, (4,)), _u(r, (3,)))),
    "pytree_in": (pytree_in, lambda r: ({"w": _u(r, (2,)), "b": _pos(r, (2,))}, _u(r, (2,)))),
    "pytree_out": (pytree_out, lambda r: (_u(r, (2,)), _u(r, (2,)))),
    "lax_calls": (lax_calls, lambda r: (_u(r, (3,)), _u(r, (3,)))),
    "scan": (scan_prog, lambda r: (_u(r, (2,)), _u(r, (2,)))),
    "closures": (closures, lambda r: (_u(r, (3,)), _u(r, (3,)))),
    "piecewise": (piecewise, lambda r: (np.array([0.3, -0.6, 0.9]), _u(r, (3,)))),
    "linalg": (linalg, lambda r: (_u(r, (2,)), _u(r, (2,)))),
    "shapes": (shapes, lambda r: (_u(r, (6,)), _u(r, (3,)))),
    "tuple_in": (tuple_in, lambda r: ((_u(r, (2,)), _pos(r, (2,))), _u(r, (2,)))),
}
