"""Functions with ``*args``/``**kwargs`` handed to a transformation (issue 11).

Each call is specialised on its arity by a generated fixed-arity wrapper
(astjax/binding.py); argnums and in_axes index the positional arguments as passed,
as in JAX.  Checked against finite differences, Python loops and eager NumPy.
"""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import astjax
from astjax import (grad, hessian, jacfwd, jacrev, jit, jvp, linearize, make_source,
                    value_and_grad, vjp, vmap)
from astjax.binding import fixed_arity
from astjax.errors import ArgumentError

RNG = np.random.default_rng(0)
X = RNG.normal(size=3)
Y = RNG.normal(size=3)
Z = RNG.normal(size=3)


def star_product(*args):
    return np.sum(args[0] * np.sin(args[1]))


def star_sum(x, *rest):
    total = x * x
    for r in rest:
        total = total + np.tanh(r) * x
    return np.sum(total)


def with_kwargs(x, **kw):
    return np.sum(x * kw.get("s", 1.0) + np.cos(x) * kw.get("t", 0.0))


def both(*args, **kwargs):
    return np.sum(args[0] ** 2 * kwargs["scale"]) + np.sum(np.exp(args[-1]))


star_lambda = lambda *a: np.sum(a[0] * a[1])  # noqa: E731


CASES = [  # (function, positional arguments, keyword arguments)
    (star_product, (X, Y), {}),
    (star_sum, (X,), {}),
    (star_sum, (X, Y), {}),
    (star_sum, (X, Y, Z), {}),
    (with_kwargs, (X,), {}),
    (with_kwargs, (X,), {"s": 2.0}),
    (with_kwargs, (X,), {"s": 2.0, "t": 0.5}),
    (both, (X, Y), {"scale": 3.0}),
    (star_lambda, (X, Y), {}),
]
IDS = [f"{f.__name__}-{len(a)}-{'-'.join(k)}" for f, a, k in CASES]


def numeric_grad(f, args, kwargs, k, eps=1e-6):
    args = [np.array(a, dtype=float) for a in args]
    g = np.zeros_like(args[k])
    for i in np.ndindex(args[k].shape):
        up = [a.copy() for a in args]
        dn = [a.copy() for a in args]
        up[k][i] += eps
        dn[k][i] -= eps
        g[i] = (f(*up, **kwargs) - f(*dn, **kwargs)) / (2 * eps)
    return g


@pytest.mark.parametrize("f,args,kwargs", CASES, ids=IDS)
def test_grad_every_argnum(f, args, kwargs):
    for k in range(len(args)):
        got = grad(f, argnums=k)(*args, **kwargs)
        np.testing.assert_allclose(got, numeric_grad(f, args, kwargs, k), rtol=1e-6,
                                   atol=1e-8)
    got = grad(f, argnums=tuple(range(len(args))))(*args, **kwargs)
    assert len(got) == len(args)


@pytest.mark.parametrize("f,args,kwargs", CASES, ids=IDS)
def test_value_and_grad_and_jit(f, args, kwargs):
    value, g = value_and_grad(f, argnums=len(args) - 1)(*args, **kwargs)
    np.testing.assert_allclose(value, f(*args, **kwargs))
    np.testing.assert_allclose(g, numeric_grad(f, args, kwargs, len(args) - 1), rtol=1e-6,
                               atol=1e-8)
    np.testing.assert_allclose(jit(f)(*args, **kwargs), f(*args, **kwargs))


@pytest.mark.parametrize("f,args,kwargs", CASES, ids=IDS)
def test_vmap_against_a_loop(f, args, kwargs):
    batch = [np.stack([a * (1 + 0.1 * b) for b in range(4)]) for a in args]
    expected = [f(*[a[b] for a in batch], **kwargs) for b in range(4)]
    np.testing.assert_allclose(vmap(f)(*batch, **kwargs) if not kwargs else
                               vmap(f)(*batch, **{k: np.full(4, v) for k, v in kwargs.items()}),
                               expected)
    # in_axes: one entry per positional argument passed; None broadcasts
    in_axes = (0,) + (None,) * (len(args) - 1)
    expected = [f(batch[0][b], *args[1:], **kwargs) for b in range(4)]
    got = vmap(f, in_axes=in_axes)(batch[0], *args[1:],
                                   **{k: np.full(4, v) for k, v in kwargs.items()})
    np.testing.assert_allclose(got, expected)


@pytest.mark.parametrize("f,args,kwargs", [c for c in CASES if not c[2]],
                         ids=[i for i, c in zip(IDS, CASES) if not c[2]])
def test_forward_and_reverse_primitives(f, args, kwargs):
    tangents = tuple(RNG.normal(size=3) for _ in args)
    out, out_dot = jvp(f, args, tangents)
    np.testing.assert_allclose(out, f(*args))
    expected = sum(numeric_grad(f, args, {}, k) @ t for k, t in enumerate(tangents))
    np.testing.assert_allclose(out_dot, expected, rtol=1e-6, atol=1e-8)
    out, vjp_fn = vjp(f, *args)
    cts = vjp_fn(1.0)
    for k, ct in enumerate(cts):
        np.testing.assert_allclose(ct, numeric_grad(f, args, {}, k), rtol=1e-6, atol=1e-8)
    out, f_jvp = linearize(f, *args)
    np.testing.assert_allclose(f_jvp(*tangents), expected, rtol=1e-6, atol=1e-8)


def test_jacobians_and_hessian():
    def elementwise(*a):
        return a[0] * np.sin(a[1])

    jf = jacfwd(elementwise, argnums=1)(X, Y)
    jr = jacrev(elementwise, argnums=1)(X, Y)
    np.testing.assert_allclose(jf, np.diag(X * np.cos(Y)), atol=1e-12)
    np.testing.assert_allclose(jr, jf, atol=1e-12)
    h = hessian(star_product, argnums=1)(X, Y)
    np.testing.assert_allclose(h, np.diag(-X * np.sin(Y)), atol=1e-12)


def test_compositions():
    g = jit(grad(star_product, argnums=1))
    np.testing.assert_allclose(g(X, Y), X * np.cos(Y))
    g = grad(jit(star_product), argnums=1)
    np.testing.assert_allclose(g(X, Y), X * np.cos(Y))
    per_example = vmap(grad(star_product), in_axes=(0, None))
    xs = RNG.normal(size=(5, 3))
    np.testing.assert_allclose(per_example(xs, Y), np.stack([np.sin(Y)] * 5))


def test_kwargs_grad_of_the_issue():
    def f(x, **kw):
        return np.sum(x * kw.get("s", 1.0))
    np.testing.assert_allclose(grad(f)(X, s=2.0), np.full(3, 2.0))
    np.testing.assert_allclose(grad(f)(X), np.ones(3))


def test_jit_static_argnums_index_the_arguments_passed():
    def power(x, *a):
        return x ** a[0]
    j = jit(power, static_argnums=1)
    np.testing.assert_allclose(j(X, 3), X ** 3)
    np.testing.assert_allclose(j(X, 2), X ** 2)


def test_one_wrapper_per_arity_and_keywords():
    assert fixed_arity(star_sum, 2) is fixed_arity(star_sum, 2)
    assert fixed_arity(star_sum, 2) is not fixed_arity(star_sum, 3)
    assert fixed_arity(with_kwargs, 1, ("s",)) is not fixed_arity(with_kwargs, 1, ("t",))
    plain = lambda x: x  # noqa: E731
    assert fixed_arity(plain, 1) is plain
    src = inspect.getsource(fixed_arity(star_sum, 3))
    assert "def star_sum(x, rest_0, rest_1):" in src
    src = inspect.getsource(fixed_arity(both, 2, ("scale",)))
    assert "def both(args_0, args_1, *, scale):" in src


def test_make_source_is_readable():
    text = make_source(grad(star_sum, argnums=2))(X, Y, Z)
    assert "def grad_star_sum(x, rest_0, rest_1):" in text
    assert "star_sum_varargs" not in text and "*rest" not in text
    text = make_source(jit(with_kwargs))(X, s=2.0)
    assert "s" in text
    text = make_source(astjax.jvp)(star_product, (X, Y), (X, Y))
    assert "args_0" in text and "args_1" in text


def test_eval_shape():
    out = astjax.eval_shape(star_product, X, Y)
    assert out.shape == ()


@pytest.mark.parametrize("call", [
    lambda: grad(star_product, argnums=2)(X, Y),
    lambda: grad(star_product, argnums=-3)(X, Y),
    lambda: vmap(star_product, in_axes=(0, 0, 0))(X, Y),
    lambda: jit(star_product, static_argnums=4)(X, Y),
])
def test_bad_argnums_and_in_axes_are_refused(call):
    with pytest.raises(ArgumentError, match="star_product|argument"):
        call()


def test_user_errors_inside_the_function_are_located():
    def bad(*a):
        return np.sum(a[0] * a[1])
    with pytest.raises(astjax.TransformError) as err:
        grad(bad)(X)           # a[1]: out of range of the pack
    assert "test_varargs_entry.py" in str(err.value) and "a[1]" in str(err.value)

    def needs_s(x, **kw):
        return np.sum(x * kw["s"])
    with pytest.raises(astjax.TransformError) as err:
        grad(needs_s)(X)       # kw["s"]: not passed
    assert "test_varargs_entry.py" in str(err.value) and 'kw["s"]' in str(err.value)


def mul_kw(*a, **k):
    return a[0] * a[1] * k.get("s", 1.0)


def calls_grad_of_varargs(x):
    return np.sum(grad(star_product, argnums=1)(x, x))


def calls_vmap_of_varargs(x):
    return np.sum(vmap(mul_kw)(x, x))


def calls_jit_of_varargs(x):
    return np.sum(jit(mul_kw)(x, x, s=2.0))


def calls_varargs(x):
    return star_sum(x, x, np.cos(x))


@pytest.mark.parametrize("f", [calls_grad_of_varargs, calls_vmap_of_varargs,
                               calls_jit_of_varargs, calls_varargs])
def test_transformed_varargs_functions_inside_transformed_code(f):
    """grad(f)/vmap(f)/jit(f) of a *args function, called in code another transformation
    reads, is inlined as the transformation of this call's fixed-arity wrapper."""
    np.testing.assert_allclose(jit(f)(X), f(X))
    np.testing.assert_allclose(grad(f)(X), numeric_grad(f, (X,), {}, 0), rtol=1e-6,
                               atol=1e-8)
    xs = RNG.normal(size=(4, 3))
    np.testing.assert_allclose(vmap(f)(xs), [f(r) for r in xs])


def test_local_varargs_lambda_under_a_transformation_is_refused_located():
    def f(x):
        return np.sum(grad(lambda *a: np.sum(a[0] * a[1]))(x, x))
    with pytest.raises(astjax.TransformError) as err:
        jit(f)(X)
    assert "test_varargs_entry.py" in str(err.value)


def test_jacobian_of_jacobian_and_assembled_views():
    h = jacfwd(jacrev(star_product, argnums=1), argnums=1)(X, Y)
    np.testing.assert_allclose(h, np.diag(-X * np.sin(Y)), atol=1e-12)

    def elementwise(*a):
        return a[0] * np.sin(a[1])
    for t in (jacfwd, jacrev, astjax.jacobian):
        assert "elementwise" in make_source(t(elementwise))(X, Y)
    assert "grad(star_product)" in make_source(hessian(star_product))(X, Y)
    assert "def star_product_fwd(args_0, args_1):" in make_source(astjax.vjp)(
        star_product, X, Y)
    assert "args_1" in make_source(astjax.linearize)(star_product, X, Y)
