"""More everyday code: static arguments, asserts, prints, helpers returning tuples."""
import numpy as np

import astjax
from programs import helpers


def activation(x, act):
    if act == "tanh":
        y = np.tanh(x)
    elif act == "sin":
        y = np.sin(x)
    else:
        y = x
    return np.sum(y * x)


def optional_weight(x, w=None):
    if w is None:
        w = 1.0
    return np.sum(np.tanh(x * w))


def with_assert(x):
    assert x.ndim == 2, "need a matrix"
    if x.shape[0] > 100:
        raise ValueError(f"too many rows: {x.shape[0]}")
    return np.sum(np.sin(x) * x)


def with_print(x):
    y = np.tanh(x)
    print("debug", y.shape)
    print(y)
    return np.sum(y * y)


def stats(x):
    return np.mean(x), np.std(x)


def uses_tuple_helper(x):
    m, s = stats(x)
    return np.sum(((x - m) / s) ** 2) + m * s


def first_positive(x):
    for row in x:
        if np.sum(row) > 0:
            return np.sum(np.sin(row))
    return np.sum(x)


def early_return_nested(x):
    total = 0.0
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            total = total + x[i, j] * x[i, j]
            if total > 2.0:
                return total * np.sin(x[i, j])
    return total


def inner_break(x):
    total = 0.0
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            if x[i, j] < 0:
                break
            total = total + np.sin(x[i, j]) * (j + 1)
    return total


def return_in_while(x):
    y = x
    k = 0
    while k < 10:
        y = np.tanh(y) * 1.5 + x * 0.1
        if np.sum(y) < -1.0:
            return np.sum(y * y)
        k += 1
    return np.sum(y)


def helper_with_early_return(x):
    def clipped(v):
        if np.sum(v) > 1.0:
            return v * 0.5
        return v * 2.0
    return np.sum(clipped(x) * x) + np.sum(clipped(x * 3.0))


def accumulate_augmented(x):
    total = 0.0
    for row in x:
        total += np.sum(row * row)
        total *= 0.9
    return total


def array_of_scalars(x):
    v = np.array([np.sum(x), np.max(x), np.sum(x * x)])
    return np.sum(v * np.array([1.0, 2.0, 3.0]))


def method_chains(x):
    return (x * 2).sum() + np.tanh(x).mean(axis=0).sum() + (x.T @ x).sum() + x.sum(0).max()


def newaxis_indexing(x):
    a = x[:, np.newaxis] * x[np.newaxis, :]
    b = x[None, :, None] * 2.0
    return np.sum(a * a) + np.sum(b * x[-1])


def list_of_arrays_by_index(xs):
    total = 0.0
    for i in range(len(xs)):
        total = total + np.sum(xs[i] * xs[len(xs) - 1 - i])
    return total


def comprehension_zip_enumerate(xs, ys):
    a = [np.sum(x * y) for x, y in zip(xs, ys)]
    b = [i * np.sum(np.sin(x)) for i, x in enumerate(xs)]
    return sum(a) + sum(b)


def integer_arithmetic_indices(x):
    total = 0.0
    for i in range(len(x)):
        total = total + x[i // 2] * x[i % 3] * x[-1 - i]
    return total


def closure_in_loop(x):
    total = 0.0
    for k in range(1, 4):
        def term(v):
            return np.sin(v * k)
        total = total + np.sum(term(x))
    return total


def cross_module_in_loop(x):
    y = x
    for _ in range(3):
        y = helpers.scaled(y, scale=0.9) + x
    return np.sum(helpers.softplus(y))


def reuse_name(x):
    x = np.tanh(x)
    x = x * x + 1.0
    x = np.log(x)
    return np.sum(x)


def value_used_after_overwrite(x):
    y = x
    saved = []
    for i in range(3):
        saved.append(y)
        y = np.sin(y) * 2.0
    return np.sum(y * saved[0] + saved[1] * saved[2])


def apply(f, x):
    return f(x)


def passes_numpy_function(x):
    return np.sum(apply(np.tanh, x))


def passes_user_function(x):
    return np.sum(apply(helpers.softplus, x))


def passes_lambda(x):
    return np.sum(apply(lambda v: v * np.sin(v), x))


def activation_argument(x, act):
    return np.sum(act(x) * x)


def _inner(x):
    return np.sum(np.sin(x) * x)


d_inner = astjax.grad(_inner)


def uses_grad_inside(x):
    g = d_inner(x)
    return np.sum(g * g)


def dict_setitem(x):
    d = {"a": x * 2.0, "b": np.sin(x)}
    d["c"] = d["a"] * d["b"]
    return np.sum(d["c"])


def list_concat(x):
    parts = [x]
    parts = parts + [x * 2.0]
    parts += [np.sin(x)]
    return np.sum(np.stack(parts) ** 2)


def dict_items_loop(params, x):
    total = 0.0
    for k, v in params.items():
        total = total + np.sum(v * x)
    for v in params.values():
        total = total + np.sum(np.sin(v))
    return total


def walrus(x):
    if (s := np.sum(x)) > 0:
        return s * np.sum(x * x)
    return s


class Model:
    def __init__(self, w):
        self.w = w

    def loss(self, x):
        return np.sum(np.tanh(x @ self.w))

    def __call__(self, x):
        return np.sum(np.sin(x) * self.w[0])

    @staticmethod
    def static_loss(x):
        return np.sum(x * x)
