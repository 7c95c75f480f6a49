"""``np.add.at(x, indices, v)`` and ``np.subtract.at`` (what JAX's ``x.at[i].add(v)``
becomes in NumPy): an in-place update adding at every position the indices name,
repeated ones included.  The frontend writes ``x[...] = scatter_add(x, indices, v)``
(``-v`` for subtract), so aliases of ``x`` see the update as in NumPy and every
transformation follows it; they were refused as calls made for their effect.

Each program is checked under jit (both backends) against NumPy, under grad, jvp,
vjp, hessian and vmap(grad) against central finite differences, and vmap against a
loop."""
import numpy as np
import pytest

import astjax
from astjax.errors import AstjaxError
from conftest import check_derivatives, fd_vector_grad

X = np.array([0.3, -0.7, 1.1, 0.5, -0.2, 0.9])


def segment_sum(x):
    out = np.zeros(3)
    np.add.at(out, np.array([0, 2, 0, 1, 0, 2]), x * x)
    return np.sum(out ** 2)


def rows_repeated(x):
    table = np.outer(x[:3], x[3:]) * 1.0
    np.add.at(table, [0, 0, 2], x[3:] * 2.0)
    return np.sum(np.tanh(table))


def subtract_repeated(x):
    y = x * 1.0
    np.subtract.at(y, [1, 1, -1], np.sin(x[:3]))
    return np.sum(y * y * x)


def index_pairs(x):
    m = x.reshape(2, 3) * 1.0
    np.add.at(m, ([0, 1, 0], [2, 2, 2]), x[:3] ** 2)
    return np.sum(m * m)


def one_value_thrice(x):
    y = x * 1.0
    np.add.at(y, [0, 0, 0], x[5] * 2.0)
    return np.sum(y ** 3)


def in_a_loop(x):
    acc = np.zeros(4)
    for i in range(3):
        np.add.at(acc, [i, i + 1, i], x[i:i + 3] * (i + 1.0))
    return np.sum(np.sin(acc))


def alias_sees_it(x):
    y = x * 1.0
    z = y
    np.add.at(y, [0, 0], x[1:3])
    return np.sum(z * x)


def mask_and_slice(x):
    m = x.reshape(3, 2) * 1.0
    np.add.at(m, (slice(None), 1), x[:3] * x[3:])
    return np.sum(np.exp(m * 0.5))


PROGRAMS = [segment_sum, rows_repeated, subtract_repeated, index_pairs, one_value_thrice,
            in_a_loop, alias_sees_it, mask_and_slice]
ids = [f.__name__ for f in PROGRAMS]


@pytest.mark.parametrize("f", PROGRAMS, ids=ids)
@pytest.mark.parametrize("backend", ["numpy", "c"])
def test_values_under_jit(f, backend):
    assert astjax.jit(f, backend=backend)(X.copy()) == pytest.approx(f(X.copy()), rel=1e-13)


@pytest.mark.parametrize("f", PROGRAMS, ids=ids)
def test_derivatives(f):
    check_derivatives(f, X, batch=[X, X * 0.5 - 0.1, X[::-1]])
    np.testing.assert_allclose(astjax.vjp(f, X)[1](1.0)[0], fd_vector_grad(f, X), rtol=1e-6,
                               atol=1e-8)


def update_a_view(x):
    y = x * 1.0
    np.add.at(y.reshape(2, 3), [0, 0], 1.0)
    return np.sum(y)


def test_the_updated_array_must_be_a_local_name():
    with pytest.raises(AstjaxError, match="local variables") as info:
        astjax.grad(update_a_view)(X)
    assert "^" in str(info.value) and "hint:" in str(info.value)


def multiply_at(x):
    y = x * 1.0
    np.multiply.at(y, [0, 0], 2.0)
    return np.sum(y)


def test_other_ufunc_at_methods_stay_refused():
    """np.multiply.at and the others update in place with no rule here: refused at the
    user's line, never a derivative of the old values."""
    with pytest.raises(AstjaxError, match="called for its effect"):
        astjax.grad(multiply_at)(X)


def add_at_indices(x, idx):
    y = x * 1.0
    np.add.at(y, idx, 1.5 * x[0])
    return np.sum(y * y)


def test_vmap_with_indices_per_example_is_refused_and_shared_indices_run():
    xs = np.stack([X, X * 2.0])
    with pytest.raises(AstjaxError, match=r"np\.add\.at\(x, indices, v\) with a per-example"):
        astjax.vmap(add_at_indices)(xs, np.array([[0, 0], [1, 2]]))
    got = astjax.vmap(astjax.grad(add_at_indices), in_axes=(0, None))(xs, np.array([0, 0]))
    np.testing.assert_allclose(got, [fd_vector_grad(lambda v: add_at_indices(v, [0, 0]), x)
                                     for x in xs], rtol=1e-6, atol=1e-8)
