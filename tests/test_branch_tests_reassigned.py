"""Reverse mode of an ``if`` whose test variable its own branch assigns.

``if a and b:`` lowers to ``c = a; if c: c = b`` and then ``if c:``; a user's ``if
done: done = ...`` is the same shape.  The backward sweep chose the branch again
from ``c`` after the branch had changed it: where ``a`` held and ``b`` did not, the
tape lost its alignment and later pops restored the wrong values, so gradients were
wrong without an error (a NumPy definition with ``if k.shape[0] == 1 and m > 1``
found it).  The core form now reads such a test into a name of its own
(``frontend/core_fixups.snapshot_branch_tests``).  Swept: ``and``/``or`` chains,
chained comparisons and ``not``, each truth pattern, inside and outside loops, under
grad, jit(grad), vjp, jacrev, hessian and vmap(grad), against central differences.
"""
import numpy as np
import pytest

import astjax


def and_static(x, k, m=1):
    # (the NumPy definition of np.polyint had this shape)
    if k.shape[0] == 1 and m > 1:
        k = k * 2.0
    return np.sum(x * k[0]) + np.sum(x ** 2 * k)


def and_data(x, k):
    y = x * 1.0
    if np.sum(x) > 0.0 and np.max(x) > 5.0:
        y = np.sin(y)
    return np.sum(y * k)


def or_data(x, k):
    y = x * k
    if np.min(x) > 10.0 or np.sum(k) < -10.0:
        y = y * 3.0
    else:
        y = np.tanh(y)
    return np.sum(y ** 2)


def chained(x, k):
    y = x * 1.0
    if 0.0 < np.sum(x) < 100.0 < np.sum(k) + 200.0:
        y = np.exp(y * 0.1)
    return np.sum(y * k)


def flag_rebound(x, k):
    done = np.sum(x) > 0.0
    y = x * k
    if done:
        done = np.max(y) > 100.0
        y = y * 2.0
    if not done:
        y = np.cos(y)
    return np.sum(y)


def in_loop(x, k):
    y = x * 1.0
    for i in range(3):
        if i > 0 and np.sum(y) > 1e9:
            y = y * 0.0
        y = np.sin(y) * k + y
    return np.sum(y ** 2)


def nested_and_or(x, k):
    y = x * k
    if (np.sum(x) > 0.0 and np.sum(k) > 100.0) or (np.max(x) > 0.5 and np.min(k) < -5.0):
        y = y ** 3
    return np.sum(np.sin(y))


PROGRAMS = [and_static, and_data, or_data, chained, flag_rebound, in_loop, nested_and_or]
POINTS = [np.array([0.3, 0.7, 1.1]), np.array([-0.5, 0.2, 0.1]), np.array([6.0, 0.5, 0.2])]
K = np.array([0.4, -1.3, 0.8])


def _fd(f, x):
    return np.array([(f(x + 1e-6 * e) - f(x - 1e-6 * e)) / 2e-6 for e in np.eye(x.size)])


@pytest.mark.parametrize("point", range(len(POINTS)))
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_reverse_mode_takes_the_forward_branch(program, point):
    x = POINTS[point]
    k = K[:1] if program is and_static else K
    f = lambda x: program(x, k)    # noqa: E731
    fd = _fd(f, x)
    np.testing.assert_allclose(astjax.grad(program)(x, k), fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(astjax.jit(astjax.grad(program))(x, k), fd, rtol=1e-6,
                               atol=1e-8)
    np.testing.assert_allclose(astjax.vjp(program, x, k)[1](1.0)[0], fd, rtol=1e-6,
                               atol=1e-8)
    np.testing.assert_allclose(astjax.jacrev(program)(x, k), fd, rtol=1e-6, atol=1e-8)
    hess = astjax.hessian(program)(x, k)
    np.testing.assert_allclose(hess, astjax.jacfwd(astjax.grad(program))(x, k), rtol=1e-8,
                               atol=1e-10)
    xs = np.stack([POINTS[point], POINTS[(point + 1) % len(POINTS)]])
    batched = astjax.vmap(astjax.grad(program), in_axes=(0, None))(xs, k)
    np.testing.assert_allclose(batched, np.stack([_fd(lambda x: program(x, k), xi)
                                                  for xi in xs]), rtol=1e-6, atol=1e-8)
