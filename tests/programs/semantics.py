"""Small functions for grad / value_and_grad / vjp semantics."""
import numpy as np


def three_args(x, y, z):
    return np.sum(np.sin(x) * y) + np.sum(z * z * x)


def scalar_fn(a):
    return np.sin(a) * a + a * a


def scalar_pair(a, b):
    return a * b + np.tanh(a) * 2.0 - b * b


def scaled_loss(s, x):
    return np.sum(np.tanh(s * x))


def with_aux(x):
    y = np.sin(x)
    return np.sum(y * y), {"y": y, "count": 3}


def elementwise(x):
    return np.sin(x) * 2.0


def two_in_two_out(x, y):
    return np.sin(x) * y, np.sum(x * y)


def vjp_with_aux(x):
    y = np.tanh(x)
    return y * 3.0, np.sum(y)


def looped(x, n):
    y = x
    for i in range(n):
        y = np.sin(y) * 1.5 + x
    return np.sum(y * y)


def ignores_x(x, y):
    return np.sum(y * y)


def ignores_tree(params, y):
    return np.sum(y * y)


def constant_output(x):
    return 3.0


def float32_fn(x, w):
    return np.sum(np.tanh(x * w) * x)


def mismatched(W, x):
    return np.sum(np.tanh(np.dot(W, x)))


def with_int_arg(x, k):
    return np.sum(x ** k) + k


def loop_fixed(x):
    y = x
    for i in range(3):
        y = np.sin(y) * 1.5 + x
    return y * 2.0
