"""np.corrcoef differentiates in x (as jnp.corrcoef does; it had no rule): R = C /
(d d^T) with d the standard deviations, so its rules are np.cov's behind the
normalization.  Programs against central finite differences; y is refused, as it is
for np.cov."""
import numpy as np
import pytest

import astjax
from astjax.errors import AstjaxError

X = np.array([0.3, -0.7, 1.1, 0.5, -0.2, 0.9, 0.35, -0.45, 0.1])


def rows(x):
    r = np.corrcoef(x.reshape(3, 3) + np.eye(3))
    return np.sum(r * np.arange(9.0).reshape(3, 3))


def columns(x):
    r = np.corrcoef(x.reshape(3, 3) * np.array([1.0, 2.0, -1.0]), rowvar=False)
    return np.sum(np.sin(r))


def two_variables(x):
    r = np.corrcoef(np.stack([x[:4], x[4:8] ** 2]))
    return (1.0 - r[0, 1]) ** 2


def one_variable(x):
    return np.corrcoef(x) * np.sum(x)          # 1.0 whatever x: only sum(x) counts


def with_y(x):
    return np.sum(np.corrcoef(x[:4], x[4:8]))


PROGRAMS = [rows, columns, two_variables, one_variable]


def fd_grad(f, x, h=1e-6):
    return np.array([(f(x + e) - f(x - e)) / (2 * h) for e in np.eye(x.size) * h])


@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_corrcoef_derivatives(f):
    want = fd_grad(f, X)
    np.testing.assert_allclose(astjax.grad(f)(X), want, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(astjax.jit(astjax.grad(f))(X), want, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose([astjax.jvp(f, (X,), (e,))[1] for e in np.eye(X.size)], want,
                               rtol=1e-6, atol=1e-8)
    xs = np.stack([X, X[::-1] * 0.7])
    np.testing.assert_allclose(astjax.vmap(f)(xs), [f(x) for x in xs], rtol=1e-12)
    np.testing.assert_allclose(astjax.vmap(astjax.grad(f))(xs), [fd_grad(f, x) for x in xs],
                               rtol=1e-6, atol=1e-8)
    hess = np.array([(fd_grad(f, X + e) - fd_grad(f, X - e)) / 2e-4
                     for e in np.eye(X.size) * 1e-4])
    np.testing.assert_allclose(astjax.hessian(f)(X), hess, rtol=1e-4, atol=1e-4)


def test_y_is_refused():
    with pytest.raises(AstjaxError, match="np.corrcoef with y"):
        astjax.grad(with_y)(X)
