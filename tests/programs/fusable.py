"""Elementwise chains for the fusion tests (tests/test_fusion.py)."""
import numpy as np


def poly(x):
    return x + x * x + x * x * x


def two_results(a, b):
    c = a * 2.0
    d = np.tanh(c) + b
    return c, d * d


def broadcast_rows(x, b):
    y = x * b + 1.0          # b: one row, broadcast along x's first axis
    return np.exp(-y) * y


def smaller_result(x, b):
    s = b * 3.0              # b's shape, not the group's: used below
    y = x + s
    return y * y, s


def reassigned(x):
    x = x * 0.5
    x = x + 1.0
    x = np.sin(x) * x
    return x


def lone_tanh(x):
    return np.tanh(x)


def lone_add(x, y):
    return x + y


def mixed_dtypes(i, f):
    return (i * 3 + f) / 2


def comparisons(x, y):
    m = (x > y) & (x > 0.0)
    return m, np.where(m, x, y) * 2.0


def python_values(a, b):
    c = a + b                # lists: concatenation, not addition
    return c * 2


def chain_in_loop(x, n):
    for _ in range(n):
        x = np.tanh(x) * 0.9 + 0.1
    return x


def chain_around_reduction(x):
    y = x * x + 1.0
    s = np.sum(y)
    z = y / s - x * 0.5
    return np.sqrt(z * z + 1.0)


def divide_by(x, y):
    return 1.0 / x * y + 2.0


def mse_grad_body(p, t):
    r = p - t
    return np.sum(r * r)


def powers(x):
    y = x * 1.5
    return y ** 0.5, y ** 2, y ** -1
