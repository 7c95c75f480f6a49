"""np.corrcoef differentiates in x (as jnp.corrcoef does; it had no rule): R = C /
(d d^T) with d the standard deviations, so its rules are np.cov's behind the
normalization.  Programs against central finite differences; y is refused, as it is
for np.cov."""
import numpy as np
import pytest

import astjax
from astjax.errors import AstjaxError
from conftest import check_derivatives

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


@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_corrcoef_derivatives(f):
    check_derivatives(f, X, batch=[X, X[::-1] * 0.7])


def test_y_is_refused_at_the_users_line():
    with pytest.raises(AstjaxError, match="np.corrcoef with y") as info:
        astjax.grad(with_y)(X)
    err = info.value
    assert err.location is not None and err.location.function == "with_y"
    assert "^" in str(err) and "hint:" in str(err)


def one_observation(x):
    return np.sum(np.cov(x[:3].reshape(3, 1)))


def test_no_degree_of_freedom_gives_numpys_non_finite_values_not_an_exception():
    """np.cov of one observation is NaN (NumPy warns); its derivative is not finite
    either, where it raised ZeroDivisionError."""
    with np.errstate(all="ignore"):
        value = one_observation(X)
        g = astjax.grad(one_observation)(X)
    assert not np.isfinite(value)
    assert not np.all(np.isfinite(g[:3]))
