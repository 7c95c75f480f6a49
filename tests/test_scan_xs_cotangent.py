"""A scan input's cotangent gets one step added per backward step (``rt.acc_step``).

It was a full-size zeros array and a full-size add per step (the whole of ``xs`` for
each step: quadratic in the number of steps).  Values are checked against central
differences through every route that reads reverse mode's code again.
"""
import numpy as np
import pytest

import astjax
from astjax import lax


def _array_xs(w, xs):
    def step(c, x):
        c = np.tanh(c * w + x)
        return c, c * x
    c, ys = lax.scan(step, np.zeros(xs.shape[1]), xs)
    return np.sum(ys ** 2) + np.sum(c)


def _pytree_xs(w, xs):
    def step(c, x):
        a, b = x
        c = np.sin(c * w + a) + b[0]
        return c, c
    c, ys = lax.scan(step, 0.1, xs)
    return np.sum(ys) + c


def _fd(f, x, eps=1e-6):
    x = np.asarray(x, float)
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        out[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return out


RNG = np.random.default_rng(3)
XS = RNG.standard_normal((6, 3))
TREE = (RNG.standard_normal(5), RNG.standard_normal((5, 2)))


@pytest.mark.parametrize("route", ["grad", "jit_grad", "grad_jit"])
def test_scan_input_gradient_matches_finite_differences(route):
    f = {"grad": lambda: astjax.grad(_array_xs, argnums=1),
         "jit_grad": lambda: astjax.jit(astjax.grad(_array_xs, argnums=1)),
         "grad_jit": lambda: astjax.grad(astjax.jit(_array_xs), argnums=1)}[route]()
    np.testing.assert_allclose(f(0.7, XS), _fd(lambda x: _array_xs(0.7, x), XS),
                               rtol=1e-6, atol=1e-9)


def test_pytree_scan_input_gradient():
    g = astjax.jit(astjax.grad(_pytree_xs, argnums=1))(0.4, TREE)
    fa = _fd(lambda a: _pytree_xs(0.4, (a, TREE[1])), TREE[0])
    fb = _fd(lambda b: _pytree_xs(0.4, (TREE[0], b)), TREE[1])
    np.testing.assert_allclose(g[0], fa, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(g[1], fb, rtol=1e-6, atol=1e-9)


def test_vmap_of_the_scan_input_gradient_matches_a_loop():
    batch = RNG.standard_normal((4, 6, 3))
    g = astjax.grad(_array_xs, argnums=1)
    out = astjax.vmap(g, in_axes=(None, 0))(0.7, batch)
    np.testing.assert_allclose(out, np.stack([g(0.7, b) for b in batch]), rtol=1e-12)


def test_second_derivative_through_the_scan_input():
    def f(w):
        return np.sum(astjax.grad(_array_xs, argnums=1)(w, XS) ** 2)
    np.testing.assert_allclose(astjax.grad(f)(0.7), _fd(f, np.array(0.7)), rtol=1e-5)
    jv = astjax.jvp(astjax.grad(_array_xs, argnums=1), (0.7, XS), (0.0, np.ones_like(XS)))[1]
    fdj = (astjax.grad(_array_xs, argnums=1)(0.7, XS + 1e-6)
           - astjax.grad(_array_xs, argnums=1)(0.7, XS - 1e-6)) / 2e-6
    np.testing.assert_allclose(jv, fdj, rtol=1e-5, atol=1e-8)


def test_generated_gradient_adds_one_step_in_place():
    src = astjax.make_source(astjax.jit(astjax.grad(_array_xs, argnums=1)))(0.7, XS)
    assert "tree_index_vjp" not in src
    assert "rt.acc_step" in src
