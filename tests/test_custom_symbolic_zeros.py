"""custom_jvp(symbolic_zeros=True): the rule receives a SymbolicZero for the tangent of
every argument that is not being differentiated (JAX's documented behaviour), in
forward mode, reverse mode (the transposed rule), vmap, jit and higher orders; and may
return one as its output tangent."""
from __future__ import annotations

import functools

import numpy as np
import pytest

import astjax
from astjax.custom_rules import SymbolicZero

from conftest import numerical_grad


@astjax.custom_jvp
def scaled(x, y):
    return np.sin(x) * y


@functools.partial(scaled.defjvp, symbolic_zeros=True)
def scaled_jvp(primals, tangents):
    """A rule that reports what it saw: the x term is scaled by 10 when y's tangent is a
    SymbolicZero, the y term by 100 when x's is (so the numbers show which branch ran)."""
    x, y = primals
    x_dot, y_dot = tangents
    out = np.sin(x) * y
    if isinstance(y_dot, SymbolicZero):
        t = 10.0 * np.cos(x) * x_dot * y
    elif isinstance(x_dot, SymbolicZero):
        t = 100.0 * np.sin(x) * y_dot
    else:
        t = np.cos(x) * x_dot * y + np.sin(x) * y_dot
    return out, t


X, Y = 0.7, 1.3
DX, DY = np.cos(X) * Y, np.sin(X)      # the true partial derivatives


def test_forward_mode_passes_symbolic_zeros_for_unperturbed_arguments():
    _, t = astjax.jvp(lambda x: scaled(x, Y), (X,), (1.0,))
    assert t == pytest.approx(10 * DX)
    _, t = astjax.jvp(lambda y: scaled(X, y), (Y,), (1.0,))
    assert t == pytest.approx(100 * DY)
    _, t = astjax.jvp(scaled, (X, Y), (1.0, 2.0))
    assert t == pytest.approx(DX + 2 * DY)


def test_reverse_mode_transposes_the_rule_with_symbolic_zeros():
    assert astjax.grad(scaled)(X, Y) == pytest.approx(10 * DX)
    assert astjax.grad(scaled, argnums=1)(X, Y) == pytest.approx(100 * DY)
    # both differentiated: nothing is a symbolic zero, the rule's true branch runs
    np.testing.assert_allclose(astjax.grad(scaled, argnums=(0, 1))(X, Y), (DX, DY))


def test_vmap_jit_and_second_order():
    xs = np.linspace(-1.0, 1.0, 5)
    np.testing.assert_allclose(astjax.vmap(astjax.grad(scaled), in_axes=(0, None))(xs, Y),
                               10 * np.cos(xs) * Y)
    np.testing.assert_allclose(
        astjax.vmap(lambda x: astjax.jvp(lambda y: scaled(x, y), (Y,), (1.0,))[1])(xs),
        100 * np.sin(xs))
    assert astjax.jit(astjax.grad(scaled))(X, Y) == pytest.approx(10 * DX)
    # d/dx of 10 cos(x) y: the rule is differentiated as source, one order up
    assert astjax.grad(astjax.grad(scaled))(X, Y) == pytest.approx(-10 * np.sin(X) * Y)


@astjax.custom_jvp
def clip_gradient(x):
    return x


@functools.partial(clip_gradient.defjvp, symbolic_zeros=True)
def clip_gradient_jvp(primals, tangents):
    (x,), (x_dot,) = primals, tangents
    return x, np.clip(x_dot, -1.0, 1.0)


@astjax.custom_jvp
def frozen(x, y):
    return x * y


@functools.partial(frozen.defjvp, symbolic_zeros=True)
def frozen_jvp(primals, tangents):
    """A rule that declares its output constant: it returns a SymbolicZero."""
    x, y = primals
    out = x * y
    return out, SymbolicZero.from_primal_value(out)


def test_a_rule_may_return_a_symbolic_zero():
    assert astjax.grad(lambda x: frozen(x, 2.0) + x ** 2)(3.0) == pytest.approx(6.0)
    _, t = astjax.jvp(lambda x: frozen(x, 2.0), (3.0,), (1.0,))
    assert t == 0


def test_perturbed_arguments_get_their_concrete_tangents():
    x = np.array([0.1, 2.0, -1.0])
    _, t = astjax.jvp(clip_gradient, (x,), (np.array([0.5, 4.0, -3.0]),))
    np.testing.assert_allclose(t, [0.5, 1.0, -1.0])
    # a tangent map that is linear where the rule is used: reverse mode agrees with
    # finite differences of the primal
    g = astjax.grad(lambda x: np.sum(clip_gradient(x * 0.1) ** 2))(x)
    np.testing.assert_allclose(g, numerical_grad(lambda x: np.sum((x * 0.1) ** 2), (x,), 0),
                               rtol=1e-6)


def test_symbolic_zero_describes_the_primal_and_computes_as_zeros():
    z = SymbolicZero.from_primal_value(np.ones((2, 3), np.float32))
    assert z.shape == (2, 3) and z.dtype == np.float32 and z.aval.shape == (2, 3)
    assert z.ndim == 2 and np.all(z.instantiate() == 0)
    assert type(z * 2.0) is np.ndarray and np.all(z + 1.0 == 1.0)
    assert type(np.sin(z)) is np.ndarray and np.asarray(z).shape == (2, 3)
    assert SymbolicZero.from_primal_value(3).dtype == np.float64
    assert "SymbolicZero" in repr(z)


def test_decorator_form_and_default_off():
    f = astjax.custom_jvp(lambda x: x, symbolic_zeros=True)
    assert f.symbolic_zeros
    g = astjax.custom_jvp(lambda x: x)
    assert not g.symbolic_zeros


def _float_branch(x):
    if isinstance(x, float):
        return x * 2.0
    return x * 3.0


def test_other_isinstance_tests_are_still_refused_under_vmap():
    # per example x is a float, batched it is an array: answering once for all lanes
    # would take the wrong branch, so vmap keeps refusing it
    with pytest.raises(astjax.TransformError, match="isinstance"):
        astjax.vmap(_float_branch)(np.arange(3.0))
