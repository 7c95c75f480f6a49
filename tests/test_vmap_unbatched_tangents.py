"""vmap of code that differentiates with a tangent or cotangent the same for every example.

``vmap(lambda x: jvp(h, (x,), (T,))[1])`` with ``T`` from a closure: the primal is
batched, the tangent is not.  Where ``h`` loops over its argument (``for row in x``,
``enumerate``, ``zip``, ``list(x)``, ``x.T``, a reshape), the tangent was split into
rows that lacked the batch axis while the code took them for batched: with a batch
the size of a row the result was silently wrong, with a batch of one it had the wrong
shape, otherwise it crashed (an unbatched operand handed back by a runtime sequence
helper is now lifted: ``transforms/batch._LIFTED_RT``).  A pullback called with a
constant cotangent crashed too.  Swept: six iteration forms × jvp, linearize and
jvp of grad × batch sizes 1, 2 (the row length) and 3, against a loop.
"""
import numpy as np
import pytest

import astjax

T = np.array([[1.0, -2.0], [0.5, 3.0]])
X = np.array([[[0.7, -0.4], [1.3, 0.25]], [[-0.9, 0.55], [0.2, -0.35]],
              [[0.1, 0.2], [0.3, -0.4]]])


def rows(x):
    s = 0.0
    for row in x:
        s = s + np.sum(np.exp(row))
    return s


def enumerated(x):
    s = 0.0
    for i, row in enumerate(x):
        s = s + np.sum(np.exp(row)) * (i + 1)
    return s


def zipped(x):
    return sum(np.sum(a * np.sin(b)) for a, b in zip(x, x[::-1]))


def listed(x):
    parts = list(x)
    return np.sum(parts[0] * parts[1] ** 2)


def columns(x):
    s = 0.0
    for col in x.T:
        s = s + np.prod(np.cos(col))
    return s


def flattened(x):
    s = 0.0
    for v in np.reshape(x, (4,)):
        s = s + v ** 3
    return s


FUNCTIONS = [rows, enumerated, zipped, listed, columns, flattened]


def _jvp(h):
    return lambda r: astjax.jvp(h, (r,), (T,))[1]


def _linearized(h):
    def f(r):
        _, tangent_map = astjax.linearize(h, r)
        return tangent_map(T)
    return f


def _hvp(h):
    return lambda r: astjax.jvp(astjax.grad(h), (r,), (T,))[1]


FORMS = {"jvp": _jvp, "linearize": _linearized, "hvp": _hvp}


@pytest.mark.parametrize("batch", [1, 2, 3])
@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("h", FUNCTIONS, ids=lambda h: h.__name__)
def test_unbatched_tangent_of_a_batched_primal(h, form, batch):
    f = FORMS[form](h)
    xs = X[:batch]
    expected = np.stack([np.asarray(f(x)) for x in xs])
    got = astjax.vmap(f)(xs)
    assert np.shape(got) == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-14)
    shared = astjax.vmap(lambda x, t: astjax.jvp(h, (x,), (t,))[1], in_axes=(0, None))
    np.testing.assert_allclose(shared(xs, T), np.stack([_jvp(h)(x) for x in xs]),
                               rtol=1e-12, atol=1e-14)


def _summed(x):
    return np.sum(np.exp(x))


@pytest.mark.parametrize("batch", [1, 2, 3])
def test_pullback_with_a_constant_cotangent(batch):
    def f(r):
        _, pullback = astjax.vjp(_summed, r)
        return np.sum(pullback(1.0)[0] * T)

    xs = X[:batch]
    np.testing.assert_allclose(astjax.vmap(f)(xs), [f(x) for x in xs], rtol=1e-12)
