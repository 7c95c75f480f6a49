"""Python's repetition of lists and tuples (``[x] * 2``) under every transformation.

NumPy code builds stacks with ``[x] * n``; the derivative of a repetition is the sum
of the item's cotangents, never the cotangent of a product.  A repetition the
frontend cannot see (a list held in a variable) is refused, never scaled.
"""
import numpy as np
import pytest

import astjax
from astjax import grad, jit, jvp, vmap

X = np.array([0.3, -0.7, 1.1])
EPS = 1e-6


def stack_list(x):
    return np.sum(np.stack([x] * 2) * np.arange(1.0, 3.0)[:, None] * x)


def stack_list_left(x):
    return np.sum(np.stack(3 * [np.sin(x)]) ** 2)


def concat_tuple(x):
    return np.sum(np.concatenate((x, x * x) * 2) ** 2)


def builtin_sum(x):
    return np.sum(sum([np.tanh(x)] * 3) * x)


def array_of_list(x):
    return np.sum(np.array([x, 2 * x] * 2) ** 3)


def zero_count(x):
    return np.sum(x) + len([x] * 0)


PROGRAMS = [stack_list, stack_list_left, concat_tuple, builtin_sum, array_of_list,
            zero_count]


def numerical_grad(f, x):
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = EPS
        g[i] = (f(x + e) - f(x - e)) / (2 * EPS)
    return g


@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_grad_matches_finite_differences(f):
    np.testing.assert_allclose(grad(f)(X), numerical_grad(f, X), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_jvp_and_jit_and_vmap(f):
    t = np.array([0.5, -1.0, 2.0])
    _, tangent = jvp(f, (X,), (t,))
    np.testing.assert_allclose(tangent, numerical_grad(f, X) @ t, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(jit(f)(X), f(X), rtol=1e-12)
    batch = np.stack([X, 2 * X, -X])
    np.testing.assert_allclose(vmap(f)(batch), [f(b) for b in batch], rtol=1e-12)
    np.testing.assert_allclose(vmap(grad(f))(batch), [numerical_grad(f, b) for b in batch],
                               rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(jit(grad(f))(X), grad(f)(X), rtol=1e-12)


@pytest.mark.parametrize("f", [stack_list, builtin_sum], ids=lambda f: f.__name__)
def test_second_order(f):
    h = astjax.hessian(f)(X)
    col = np.array([numerical_grad(lambda x: grad(f)(x)[i], X) for i in range(X.size)])
    np.testing.assert_allclose(h, col, rtol=1e-5, atol=1e-6)


def held_in_a_variable(x):
    items = [x]
    return np.sum(np.stack(items * 2))


def count_from_shape(x):
    return np.sum(np.stack([x] * x.shape[0]) * x)


@pytest.mark.parametrize("f", [held_in_a_variable, count_from_shape],
                         ids=lambda f: f.__name__)
def test_repetition_the_frontend_cannot_see_is_refused(f):
    with pytest.raises(astjax.DifferentiationError, match="repeating a list"):
        grad(f)(X)
