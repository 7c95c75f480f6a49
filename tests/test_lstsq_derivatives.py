"""np.linalg.lstsq differentiates in a and b, every output (jnp.linalg.lstsq's
solution does; it had no rule): the solution is pinv(a) @ b, the residuals
sum((b - a x)^2) where NumPy gives them, the singular values those of a.  Programs
against central finite differences."""
import numpy as np
import pytest

from conftest import check_derivatives

X = np.array([0.3, -0.7, 1.1, 0.5, -0.2, 0.9, 0.35, -0.45, 0.1, 0.8, -0.6, 0.25])
A0 = np.array([[1.0, 0.2, 0.0], [0.1, 1.5, 0.3], [0.0, 0.4, 2.0], [0.5, 0.0, 0.1]])


def fit_vector(x):
    sol = np.linalg.lstsq(A0 + 0.1 * x.reshape(4, 3), x[:4], rcond=None)[0]
    return np.sum(sol ** 2)


def fit_columns(x):
    sol, res, rank, sv = np.linalg.lstsq(A0 * x[0], x[:8].reshape(4, 2), rcond=None)
    return np.sum(np.sin(sol)) + np.sum(res) * 0.5 + np.sum(sv)


def residual_only(x):
    res = np.linalg.lstsq(A0 + 0.05 * x.reshape(4, 3), x[4:8] ** 2, rcond=None)[1]
    return res[0]


def underdetermined(x):
    a = A0.T + 0.1 * x[:12].reshape(3, 4)           # 3 equations, 4 unknowns
    sol, res, rank, sv = np.linalg.lstsq(a, x[:3], rcond=None)
    return np.sum(sol * np.arange(4.0)) + res.size


def rank_deficient(x):
    a = np.stack([x[:4], x[4:8], x[:4] + x[4:8]], axis=1)  # rank 2 everywhere
    return np.sum(np.linalg.lstsq(a, x[8:12], rcond=None)[0] ** 2)


PROGRAMS = [fit_vector, fit_columns, residual_only, underdetermined, rank_deficient]


@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_lstsq_derivatives(f):
    check_derivatives(f, X, batch=[X, X * 0.9 + 0.05], rtol=1e-5, atol=1e-7,
                      hessian=f in (fit_vector, residual_only))
