"""np.meshgrid differentiates in its coordinate vectors (as jnp.meshgrid does): output
k is input k along one axis ("xy" swaps the first two), so input k's cotangent is
output k's summed over the others.  Programs against central finite differences."""
import numpy as np
import pytest

from conftest import check_derivatives

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


@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_meshgrid_derivatives(f):
    check_derivatives(f, X, batch=[X, X * 0.5 - 0.1])
