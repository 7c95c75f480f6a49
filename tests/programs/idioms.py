"""Everyday Python inside differentiated functions."""
import functools
import math

import numpy as np

import astjax
from astjax import stop_gradient
from programs import helpers
from programs.helpers import square_sum

SCALE = 2.0
W_GLOBAL = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])


def ternary(x):
    y = np.sin(x) if np.sum(x) > 0 else np.cos(x)
    return np.sum(y * x)


def list_comp(x):
    parts = [np.sin(x * k) for k in range(1, 4)]
    return np.sum(np.stack(parts) * x)


def list_comp_if(x):
    parts = [x[i] * x[i] for i in range(x.shape[0]) if i % 2 == 0]
    return np.sum(np.concatenate(parts))


def list_comp_nested(x):
    prods = [x[i] * x[j] for i in range(3) for j in range(3) if i != j]
    return sum([np.sum(p) for p in prods])


def generator_sum(x):
    return sum(np.sum(np.tanh(row) * row) for row in x)


def augmented(x):
    y = x * 1.0
    y += x
    y *= x
    y -= 1.0
    y /= 2.0
    y **= 2
    return np.sum(y)


def tuple_swap(x, y):
    a, b = x, y
    for i in range(3):
        a, b = b, a * 0.5 + np.sin(b)
    return np.sum(a * b)


def starred(xs):
    first, *rest = xs
    *init, last = xs
    return np.sum(first * sum(rest)) + np.sum(np.tanh(last)) * len(init)


def chained(x):
    s = np.sum(x)
    if -10.0 < s < 10.0:
        return np.sum(np.sin(x))
    return np.sum(x)


def and_or(x, scale):
    s = np.sum(x)
    if s > 0 and np.max(x) < 5.0:
        y = np.sin(x)
    else:
        y = x
    k = scale or 1.0
    use = (s > 100.0) or (np.min(x) > -5.0)
    if use:
        y = y * k
    return np.sum(y * x)


def nested_def(x, y):
    k = np.sum(y)

    def inner(z):
        return np.sin(z) * k

    return np.sum(inner(x) + inner(x * 2.0))


def nested_def_default(x):
    def inner(z, power=2):
        return z ** power

    return np.sum(inner(x) + inner(x, 3))


def lambdas(x, y):
    sq = lambda v: v * v  # noqa: E731
    shift = lambda v: v + y
    f1 = lambda v: np.sin(v); f2 = lambda v: np.cos(v) * y  # noqa: E702
    return np.sum(sq(x) + shift(x) * f1(x) + f2(x))


def lambda_tuple(x):
    sq, cube = (lambda v: v * v), (lambda v: v * v * v)
    return np.sum(sq(x) + cube(x))


def lambda_called_inline(x):
    return np.sum((lambda v: v * np.tanh(v))(x))


sq_sum = lambda x: np.sum(x * x); sin_sum = lambda x: np.sum(np.sin(x))  # noqa: E702,E731
two_lambdas = [lambda x: np.sum(x * x * x), lambda x: np.sum(np.cos(x))]


def static_facts(x):
    n, m = x.shape
    total = 0.0
    for i in range(len(x)):
        total = total + np.sum(x[i]) * (i + 1)
    return total / (n * m) + np.sum(x) * x.ndim + np.sum(x * x) / x.size


def math_scalars(a):
    return math.exp(a) * math.sin(a) + math.log(a) + math.sqrt(a) + math.cos(a) * math.tanh(a)


def builtins_mix(x, a):
    parts = [np.sum(x[i]) for i in range(len(x))]
    total = sum(parts)
    big = max(total, 0.5 * a)
    small = min(a, 10.0)
    return float(abs(total) + big * small) + a


def builtin_max_values(a, b):
    return max(a * a, b) + min(a, b * b) + abs(a - b * 3.0)


def uses_globals(x):
    return np.sum(SCALE * x * x) + np.sum(W_GLOBAL @ x)


def calls_same_module(x):
    return ternary(x) + static_facts(x.reshape(3, 2))


def calls_other_module(x):
    return np.sum(helpers.softplus(x)) + square_sum(x) + np.sum(helpers.scaled(x, scale=3.0))


def with_keyword(x, scale=2.0, shift=0.0):
    return np.sum(np.tanh(x * scale + shift))


scaled_partial = functools.partial(helpers.scaled, scale=4.0)


def calls_partial(x):
    return np.sum(scaled_partial(x) * x)


def logged(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper


@logged
def decorated(x):
    return np.sum(np.sin(x) * x)


def calls_decorated(x):
    return decorated(x * 2.0) + 1.0


def stop_grad(x):
    return np.sum(x * astjax.stop_gradient(x)) + np.sum(stop_gradient(x) * np.sin(x))


def mixed_scalars(x):
    return np.sum(2.0 * x + 1 - x / 3.0 + 2.0 ** x - 1.0 / (2.0 + x * x) + 3 * x ** 2)
