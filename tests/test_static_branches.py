"""An ``if`` on a value known when the code is generated takes its branch then.

``if DEBUG:``, ``if config.USE_BIAS:``, ``y = fast(x) if FAST else slow(x)``, ``if k is
None:`` of a default: JAX traces only the branch Python takes, so the other may call
anything.  astjax generated both branches and refused a program whose dead branch
called what no transformation supports.  The test is folded now, its read guarded:
rebinding the flag makes the code again, so the next call follows the new branch
(never the old code's answer).  (An early ``return`` in the branch is lowered to a
flag the code tests at run time: the code after the ``if`` is still generated.)
"""
import numpy as np
import pytest

import astjax

from conftest import load_source_module

SOURCE = '''
import numpy as np

USE_SPECIAL = False
SCALE = 0


class Config:
    exact = True


def statement(x):
    if USE_SPECIAL:
        y = np.sum(np.i0(x))        # no derivative rule: refused where it runs
    else:
        y = np.sum(x ** 2)
    return y


def expression(x):
    return np.sum(np.i0(x)) if USE_SPECIAL else np.sum(np.sin(x))


def attribute(x):
    if Config.exact:
        y = np.sum(np.exp(x))
    else:
        y = np.sum(np.i0(x))
    return y


def number(x):
    return np.sum(x) * SCALE if SCALE else np.sum(x * x * x)


def default(x, k=None):
    if k is None:
        k = 2.0
    return np.sum(x ** k)
'''


@pytest.fixture
def mod(tmp_path):
    return load_source_module(SOURCE, tmp_path, "static_branches_program")


X = np.array([0.3, 0.7, 1.2])
DERIVATIVES = {"statement": 2 * X, "expression": np.cos(X), "attribute": np.exp(X),
               "number": 3 * X ** 2, "default": 2 * X}


@pytest.mark.parametrize("name", list(DERIVATIVES))
def test_dead_branch_is_not_generated(mod, name):
    f = getattr(mod, name)
    np.testing.assert_allclose(astjax.grad(f)(X), DERIVATIVES[name], rtol=1e-12)
    np.testing.assert_allclose(astjax.jit(f)(X), f(X), rtol=1e-12)
    np.testing.assert_allclose(astjax.vmap(f)(np.stack([X, 2 * X])), [f(X), f(2 * X)],
                               rtol=1e-12)
    np.testing.assert_allclose(astjax.jvp(f, (X,), (np.ones(3),))[1],
                               np.sum(DERIVATIVES[name]), rtol=1e-12)


def test_rebinding_the_flag_makes_the_code_again(mod):
    g = astjax.grad(mod.statement)
    j = astjax.jit(mod.expression)
    np.testing.assert_allclose(g(X), 2 * X)
    np.testing.assert_allclose(j(X), np.sum(np.sin(X)))
    mod.USE_SPECIAL = True
    with pytest.raises(astjax.DifferentiationError, match="i0"):
        g(X)
    np.testing.assert_allclose(j(X), np.sum(np.i0(X)))     # the new branch's value
    mod.USE_SPECIAL = False
    np.testing.assert_allclose(g(X), 2 * X)
    np.testing.assert_allclose(j(X), np.sum(np.sin(X)))


def test_rebinding_an_attribute_or_number_flag(mod):
    g = astjax.grad(mod.number)
    np.testing.assert_allclose(g(X), 3 * X ** 2)
    mod.SCALE = 4
    np.testing.assert_allclose(g(X), np.full(3, 4.0))
    j = astjax.jit(mod.attribute)
    np.testing.assert_allclose(j(X), np.sum(np.exp(X)))
    mod.Config.exact = False
    np.testing.assert_allclose(j(X), np.sum(np.i0(X)))


def test_a_run_time_test_still_branches_at_run_time(mod):
    def f(x):
        if np.sum(x) > 2.0:
            return np.sum(np.sin(x))
        return np.sum(np.cos(x))

    for x in (X, X * 0.1):
        np.testing.assert_allclose(astjax.jit(f)(x), f(x), rtol=1e-12)
