"""Broadcasting and Python scalars mixed with arrays (adjoints must unbroadcast)."""
import numpy as np


def add_row(x, v):
    return np.sum(np.sin(x + v))


def mul_col(x, c):
    return np.sum(np.tanh(x * c))


def outer_like(c, r):
    return np.sum(np.sin(c - r) * (c + r))


def divide(x, v):
    return np.sum(x / v)


def divide_col(x, c):
    return np.sum(np.sin(c / x))


def power_broadcast(x, p):
    return np.sum(x ** p)


def scalar_array(x, s):
    return np.sum(s * x + x / s)


def scalar_0d(x, s):
    return np.sum(np.tanh(x * s) + s)


def maximum_broadcast(x, v):
    return np.sum(np.maximum(x, v) * x)


def where_broadcast(x, v):
    return np.sum(np.where(x > 0, x * v, v * 2.0))


def arctan2_broadcast(y, x):
    return np.sum(np.arctan2(y, x))


def python_scalars(x):
    return np.sum(2.0 - x) + np.sum(1.0 / x) + np.sum(x ** 2.0) + np.sum(2.0 ** x) + 3 * np.sum(x)


def three_way(a, b, c):
    return np.sum(a * b + c)


def subtract_mean(x):
    return np.sum((x - np.mean(x, axis=0)) ** 2)
