"""np.meshgrid differentiates in its coordinate vectors (as jnp.meshgrid does): output
k is input k along one axis ("xy" swaps the first two), so input k's cotangent is
output k's summed over the others.  Programs against central finite differences."""
import numpy as np
import pytest

import astjax

X = np.array([0.3, -0.7, 1.1, 0.5, -0.2, 0.9])


def grid_xy(x):
    a, b = np.meshgrid(x[:2], x[2:5])
    return np.sum(a * b ** 2)


def grid_ij_three(x):
    a, b, c = np.meshgrid(x[:2], x[2:4], x[4:], indexing="ij")
    return np.sum(np.sin(a) * b + c * a)


def grid_sparse(x):
    a, b = np.meshgrid(x[:3], x[3:], sparse=True)
    return np.sum((a - b) ** 2)


def grid_of_matrix(x):
    a, b = np.meshgrid(x.reshape(2, 3), x[:2] * 2.0)      # (meshgrid flattens)
    return np.sum(np.exp(a * 0.3) * b)


PROGRAMS = [grid_xy, grid_ij_three, grid_sparse, grid_of_matrix]


def fd_grad(f, x, h=1e-6):
    return np.array([(f(x + e) - f(x - e)) / (2 * h) for e in np.eye(x.size) * h])


@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_meshgrid_gradients(f):
    want = fd_grad(f, X)
    np.testing.assert_allclose(astjax.grad(f)(X), want, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(astjax.jit(astjax.grad(f))(X), want, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose([astjax.jvp(f, (X,), (e,))[1] for e in np.eye(X.size)], want,
                               rtol=1e-6, atol=1e-8)
    xs = np.stack([X, X * 0.5 - 0.1])
    np.testing.assert_allclose(astjax.vmap(astjax.grad(f))(xs),
                               [fd_grad(f, x) for x in xs], rtol=1e-6, atol=1e-8)
    hess = np.array([(fd_grad(f, X + e) - fd_grad(f, X - e)) / 2e-4
                     for e in np.eye(X.size) * 1e-4])
    np.testing.assert_allclose(astjax.hessian(f)(X), hess, rtol=1e-4, atol=1e-4)
