"""Loops that run zero steps: their stacked outputs are refused on use, never made up.

A ``lax.scan``/``lax.map`` over an empty axis (or a vmap written as a loop over an
empty batch) has no step to take the outputs' structure and shapes from; JAX traces
one.  astjax used to return ``np.zeros((0,))``, so ``ys.sum(0)`` gave a scalar where
JAX gives zeros of the step's shape: a silently wrong value.  Now the outputs are a
stand-in that raises ``ZeroStepsError`` on any use, under every transformation, while
the carry (which needs no step) stays right.
"""
from __future__ import annotations

import numpy as np
import pytest

import astjax
from astjax import lax
from astjax.errors import ZeroStepsError
from astjax.runtime import ZeroStepOutputs


def step(c, x):
    return c + x, np.stack([x, x * 2.0])


def uses_ys(xs):
    _, ys = lax.scan(step, np.zeros(3), xs)
    return np.sum(ys.sum(axis=0))


def carry_only(xs):
    c, _ = lax.scan(step, np.ones(3), xs)
    return np.sum(c * c)


def mapped(xs):
    return np.sum(lax.map(lambda r: r * 2.0, xs))


EMPTY = np.zeros((0, 3))
FULL = np.arange(6.0).reshape(2, 3)
TRANSFORMS = {
    "eager": lambda f: f,
    "jit": astjax.jit,
    "jit-c": lambda f: astjax.jit(f, backend="c"),
    "grad": astjax.grad,
    "jit(grad)": lambda f: astjax.jit(astjax.grad(f)),
    "vmap": lambda f: (lambda xs: astjax.vmap(f)(xs[None])[0]),
}


@pytest.mark.parametrize("t", list(TRANSFORMS))
@pytest.mark.parametrize("f", [uses_ys, mapped], ids=["scan-ys", "map"])
def test_using_the_outputs_of_zero_steps_raises(f, t):
    g = TRANSFORMS[t](f)
    with pytest.raises(ZeroStepsError, match="zero steps") as err:
        g(EMPTY)
    use = {uses_ys: "np.sum(ys.sum(axis=0))", mapped: "np.sum(lax.map("}[f]
    assert __file__ in str(err.value) and use in str(err.value)      # the user's line
    assert "^" in str(err.value) and "hint:" in str(err.value)
    got = g(FULL)                                  # (one step or more: as before)
    want = TRANSFORMS["eager"](f)(FULL) if t in ("eager", "jit", "jit-c", "vmap") else \
        astjax.grad(f)(FULL)
    np.testing.assert_allclose(got, want, rtol=1e-13)


@pytest.mark.parametrize("t", list(TRANSFORMS))
def test_the_carry_of_zero_steps_is_the_initial_one(t):
    got = TRANSFORMS[t](carry_only)(EMPTY)
    if t in ("grad", "jit(grad)"):
        assert np.shape(got) == (0, 3)
    else:
        assert got == 3.0


def test_unused_outputs_cost_nothing():
    c, ys = lax.scan(lambda c, x: (c * 2.0, None), np.ones(2), None, length=0)
    np.testing.assert_array_equal(c, np.ones(2))
    assert isinstance(ys, ZeroStepOutputs)
    assert "zero steps" in repr(ys)


@pytest.mark.parametrize("use", [
    lambda y: np.sum(y), lambda y: y + 1, lambda y: 1 - y, lambda y: y.shape,
    lambda y: np.asarray(y), lambda y: len(y), lambda y: y[0], lambda y: y * np.ones(2),
    lambda y: np.shape(y), lambda y: bool(y), lambda y: float(y), lambda y: y == 0,
    lambda y: np.concatenate([y, np.ones(1)]), lambda y: -y],
    ids=["sum", "add", "rsub", "shape", "asarray", "len", "index", "mul-array",
         "np.shape", "bool", "float", "eq", "concatenate", "neg"])
def test_every_use_of_the_stand_in_raises(use):
    with pytest.raises(ZeroStepsError):
        use(ZeroStepOutputs())
