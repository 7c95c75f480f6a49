"""Reverse over reverse: grad(grad(f)), and grad of functions that call grad.

Second derivatives are checked against finite differences of astjax's own first
derivatives (which the rest of the suite checks against finite differences of f).
"""
import numpy as np
import pytest
from conftest import numerical_grad

import astjax


def cubic(a):
    return np.sin(a) * a + a * a * a


def squares_loop(x):
    y = x
    for _ in range(2):
        y = y * y
    return y


def tanh_chain(x):
    y = x
    for _ in range(2):
        y = np.tanh(y)
    return np.sum(y)


def scaled_sum(x):
    acc = 0.0
    for i in range(3):
        acc = acc + np.sum(np.tanh(x * (i + 1.0)) ** 2)
    return acc


WEIGHTS = np.array([1.0, 2.0, 3.0])


def weighted_gradient(x):
    return np.sum(astjax.grad(scaled_sum)(x) * WEIGHTS)


def weighted_tanh_gradient(x):
    return np.sum(astjax.grad(tanh_chain)(x) * WEIGHTS)


def mlp_loss(params, x):
    for W, b in params:
        x = np.tanh(x @ W + b)
    return np.sum(x ** 2)


def gradient_norm(params, x):
    g = astjax.grad(mlp_loss)(params, x)
    return sum([np.sum(dW ** 2) + np.sum(db ** 2) for dW, db in g])


def test_grad_of_grad_scalar():
    a = 1.3
    d2 = astjax.grad(astjax.grad(cubic))(a)
    assert d2 == pytest.approx(-np.sin(a) * a + 2 * np.cos(a) + 6 * a, rel=1e-10)


def test_third_derivative():
    a = 0.7
    d3 = astjax.grad(astjax.grad(astjax.grad(cubic)))(a)
    assert d3 == pytest.approx(-np.cos(a) * a - 3 * np.sin(a) + 6, rel=1e-10)


def test_grad_of_grad_through_a_loop():
    x = 0.7
    assert astjax.grad(astjax.grad(squares_loop))(x) == pytest.approx(12 * x ** 2, rel=1e-12)


@pytest.mark.parametrize("fn", [weighted_gradient, weighted_tanh_gradient])
def test_grad_of_function_calling_grad(fn):
    x = np.array([0.3, -0.5, 0.8])
    np.testing.assert_allclose(astjax.grad(fn)(x), numerical_grad(fn, (x,)), rtol=1e-6,
                               atol=1e-8)


def test_gradient_norm_of_an_mlp():
    rng = np.random.default_rng(0)
    params = [(rng.standard_normal((3, 4)) * 0.5, rng.standard_normal(4) * 0.1),
              (rng.standard_normal((4, 2)) * 0.5, np.zeros(2))]
    xs = rng.standard_normal((5, 3))
    got = astjax.grad(gradient_norm)(params, xs)
    expected = numerical_grad(gradient_norm, (params, xs))
    for (gw, gb), (ew, eb) in zip(got, expected):
        np.testing.assert_allclose(gw, ew, rtol=1e-5, atol=1e-8)
        np.testing.assert_allclose(gb, eb, rtol=1e-5, atol=1e-8)


def test_second_derivative_source_is_readable():
    text = astjax.make_source(astjax.grad(astjax.grad(cubic)))(1.0)
    compile(text, "<second>", "exec")
    assert "d_d_" in text and "# test_higher_order.py:" in text
