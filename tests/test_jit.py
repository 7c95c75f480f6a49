"""jit: optimized generated code equals eager NumPy; JAX's static-argument rules."""
import functools

import numpy as np
import pytest
from programs import control, inplace, mlp

import astjax


def poly(x):
    return x + x * x + x * x * x


def scaled(x, n, mode="mul"):
    if mode == "mul":
        return x * n
    return x + n


@astjax.jit
def decorated(x):
    return np.tanh(x) * 2.0


@functools.partial(astjax.jit, static_argnums=1)
def repeated(x, n):
    for _ in range(n):
        x = x * 0.5 + 1.0
    return x


X = np.random.default_rng(0).standard_normal((4, 3))


@pytest.mark.parametrize("fn, args", [
    (poly, (X,)), (control.nested_loops, (X,)), (control.branch_in_loop, (X[0],)),
    (control.loop_break, (X[0],)), (inplace.set_item, (X[0].copy(),))])
def test_jit_equals_eager(fn, args):
    np.testing.assert_allclose(astjax.jit(fn)(*args), fn(*args), rtol=1e-12)


def test_decorator_and_partial_forms():
    np.testing.assert_allclose(decorated(X), np.tanh(X) * 2.0)
    np.testing.assert_allclose(repeated(X, 3), ((X * 0.5 + 1) * 0.5 + 1) * 0.5 + 1)


def test_static_arguments_key_the_cache_and_must_be_hashable():
    f = astjax.jit(scaled, static_argnums=(1,), static_argnames=("mode",))
    np.testing.assert_allclose(f(X, 2.0), X * 2.0)
    np.testing.assert_allclose(f(X, 3.0, mode="add"), X + 3.0)
    with pytest.raises(astjax.AstjaxError, match="hashable"):
        f(X, [1.0])


def test_compositions():
    rng = np.random.default_rng(1)
    params = [(rng.standard_normal((3, 4)), rng.standard_normal(4)),
              (rng.standard_normal((4, 2)), rng.standard_normal(2))]
    batch = (rng.standard_normal((5, 3)), rng.standard_normal((5, 2)))
    eager = astjax.grad(mlp.loss)(params, batch)
    for got in (astjax.jit(astjax.grad(mlp.loss))(params, batch),
                astjax.grad(astjax.jit(mlp.loss))(params, batch)):
        for (a, b), (c, d) in zip(got, eager):
            np.testing.assert_allclose(a, c, rtol=1e-12)
            np.testing.assert_allclose(b, d, rtol=1e-12)
    vf = astjax.vmap(poly)
    np.testing.assert_allclose(astjax.jit(vf)(X), poly(X), rtol=1e-12)


def test_make_source_shows_the_optimized_code():
    text = astjax.make_source(astjax.jit(poly))(X)
    assert "def jit_poly" in text
    code = [line for line in text.splitlines() if not line.strip().startswith("#")]
    squares = sum(line.count("x * x") + line.count("np.square(x)") for line in code)
    assert squares == 1  # the repeated product is computed once


def test_unknown_backend_is_refused():
    with pytest.raises(astjax.AstjaxError, match="backend"):
        astjax.jit(poly, backend="tpu")
