"""checkpoint / remat: the same gradients, computed by recomputing the forward.

Gradients of checkpointed programs (loops, scans, nested calls, pytrees, static
arguments) equal the un-checkpointed ones in float64; the generated code really runs
the checkpointed function opaquely going forward and again in the backward sweep; and
a long chain keeps less memory alive.
"""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import astjax
from astjax import lax

from conftest import numerical_grad


def step(x, w):
    return np.tanh(x * w + 0.1) + 0.05 * np.sin(x)


step_ckpt = astjax.checkpoint(step)


@astjax.remat
def layer(params, x):
    w, b = params["w"], params["b"]
    return np.tanh(x @ w + b)


def repeat_step(x, w, n):
    for _ in range(n):
        x = step(x, w)
    return x


def chain(x, w):
    for i in range(6):
        x = step_ckpt(x, w)
    return np.sum(x ** 2)


def chain_plain(x, w):
    for i in range(6):
        x = step(x, w)
    return np.sum(x ** 2)


def inline_ckpt(x, w):
    for i in range(3):
        x = astjax.checkpoint(step)(x, w)
    return np.sum(x)


def inline_plain(x, w):
    for i in range(3):
        x = step(x, w)
    return np.sum(x)


def scan_ckpt(x, ws):
    def body(carry, w):
        y = step_ckpt(carry, w)
        return y, np.sum(y)
    carry, ys = lax.scan(body, x, ws)
    return np.sum(carry) + np.sum(ys ** 2)


def scan_plain(x, ws):
    def body(carry, w):
        y = step(carry, w)
        return y, np.sum(y)
    carry, ys = lax.scan(body, x, ws)
    return np.sum(carry) + np.sum(ys ** 2)


def mlp_ckpt(params, x):
    for p in params:
        x = layer(p, x)
    return np.sum(x)


def mlp_plain(params, x):
    for p in params:
        x = np.tanh(x @ p["w"] + p["b"])
    return np.sum(x)


repeat_ckpt = astjax.checkpoint(repeat_step, static_argnums=(2,))


def static_ckpt(x, w):
    return np.sum(repeat_ckpt(x, w, 3))


def static_plain(x, w):
    return np.sum(repeat_step(x, w, 3))


def while_ckpt(x, w):
    y = x
    k = 0
    while k < 4:
        y = step_ckpt(y, w)
        k = k + 1
    return np.sum(y)


def while_plain(x, w):
    y = x
    k = 0
    while k < 4:
        y = step(y, w)
        k = k + 1
    return np.sum(y)


RNG = np.random.default_rng(0)
X = RNG.standard_normal(5)
PARAMS = [{"w": RNG.standard_normal((5, 4)), "b": RNG.standard_normal(4)},
          {"w": RNG.standard_normal((4, 3)), "b": RNG.standard_normal(3)}]

PROGRAMS = {
    "chain": (chain, chain_plain, (X, 0.7)),
    "inline": (inline_ckpt, inline_plain, (X, 0.7)),
    "scan": (scan_ckpt, scan_plain, (X, np.array([0.5, 0.9, -0.4, 1.2]))),
    "pytree_mlp": (mlp_ckpt, mlp_plain, (PARAMS, X)),
    "static_argnums": (static_ckpt, static_plain, (X, 0.7)),
    "while": (while_ckpt, while_plain, (X, 0.7)),
}


def _close(a, b, rtol=1e-12):
    for u, v in zip(astjax.tree_util.tree_leaves(a), astjax.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(u, v, rtol=rtol, atol=1e-14)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_gradient_equals_the_plain_one(name):
    f, plain, args = PROGRAMS[name]
    np.testing.assert_allclose(f(*args), plain(*args), rtol=1e-15)
    g = astjax.grad(f, argnums=(0, 1))(*args)
    _close(g, astjax.grad(plain, argnums=(0, 1))(*args))
    _close(g, numerical_grad(plain, args, (0, 1)), rtol=1e-6)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_other_transformations_see_the_plain_function(name):
    f, plain, args = PROGRAMS[name]
    _close(astjax.value_and_grad(f)(*args), astjax.value_and_grad(plain)(*args))
    _close(astjax.jit(astjax.grad(f))(*args), astjax.grad(plain)(*args))
    if name != "pytree_mlp":
        t = np.linspace(-1, 1, X.shape[0])
        _close(astjax.jvp(lambda x: f(x, args[1]), (args[0],), (t,)),
               astjax.jvp(lambda x: plain(x, args[1]), (args[0],), (t,)))
        _close(astjax.hessian(f)(*args), astjax.hessian(plain)(*args), rtol=1e-10)
        _close(astjax.grad(lambda x: astjax.grad(f)(x, args[1])[0])(args[0]),
               astjax.grad(lambda x: astjax.grad(plain)(x, args[1])[0])(args[0]), rtol=1e-10)


@pytest.mark.parametrize("name", ["chain", "inline", "static_argnums", "while"])
def test_vmap_of_grad_and_grad_of_vmap(name):
    f, plain, (x, w) = PROGRAMS[name]
    xs = np.stack([x, 0.5 * x, x + 1.0])
    _close(astjax.vmap(astjax.grad(f), in_axes=(0, None))(xs, w),
           np.stack([astjax.grad(plain)(row, w) for row in xs]))
    _close(astjax.grad(lambda xs: np.sum(astjax.vmap(f, in_axes=(0, None))(xs, w)))(xs),
           np.stack([astjax.grad(plain)(row, w) for row in xs]))
    _close(astjax.vmap(f, in_axes=(0, None))(xs, w), np.stack([plain(r, w) for r in xs]))


def test_the_backward_sweep_recomputes():
    src = astjax.make_source(astjax.grad(chain), simplify=False)(X, 0.7)
    forward, backward = src.split("backward sweep", 1)
    # going forward the checkpointed function runs as one call, nothing of it taped
    assert "rt.custom_call(" in forward and "np.tanh" not in forward
    # going backward its forward runs again (with a tape of its own) before its adjoint
    assert "np.tanh" in backward and "d_" in backward
    plain = astjax.make_source(astjax.grad(chain_plain), simplify=False)(X, 0.7)
    assert "rt.custom_call(" not in plain


def test_policies():
    everything = astjax.checkpoint(step, policy=astjax.checkpoint_policies.everything_saveable)

    def f(x):
        return np.sum(everything(x, 0.3))
    assert "custom_call" not in astjax.make_source(astjax.grad(f), simplify=False)(X)
    for policy in (astjax.checkpoint_policies.nothing_saveable,
                   astjax.checkpoint_policies.dots_saveable,
                   astjax.checkpoint_policies.dots_with_no_batch_dims_saveable):
        ck = astjax.checkpoint(step, policy=policy, prevent_cse=False)

        def g(x):
            return np.sum(ck(x, 0.3))
        _close(astjax.grad(g)(X), astjax.grad(lambda x: np.sum(step(x, 0.3)))(X))


def _mlp_step(w, x):
    h = np.tanh(x @ w)
    for k in range(2):
        h = np.tanh(np.dot(h, w.T) @ w) + 0.1 * h
    return h


@pytest.mark.parametrize("policy", ["dots_saveable", "dots_with_no_batch_dims_saveable"])
def test_dots_policies_save_the_products(policy):
    ck = astjax.checkpoint(_mlp_step, policy=getattr(astjax.checkpoint_policies, policy))
    rng = np.random.default_rng(1)
    w, x = rng.standard_normal((4, 4)) * 0.5, rng.standard_normal((3, 4))

    def f(w, x):
        def body(carry, scale):
            return ck(w, carry) * scale, np.sum(carry)
        carry, ys = lax.scan(body, x, np.array([1.0, 0.5, 2.0]))
        return np.sum(carry ** 2) + np.sum(ys)

    def plain(w, x):
        def body(carry, scale):
            return _mlp_step(w, carry) * scale, np.sum(carry)
        carry, ys = lax.scan(body, x, np.array([1.0, 0.5, 2.0]))
        return np.sum(carry ** 2) + np.sum(ys)

    _close(astjax.grad(f, argnums=(0, 1))(w, x), astjax.grad(plain, argnums=(0, 1))(w, x))
    _close(astjax.grad(f, argnums=(0, 1))(w, x), numerical_grad(plain, (w, x), (0, 1)),
           rtol=1e-6)
    src = astjax.make_source(astjax.grad(f), simplify=False)(w, x)
    backward = src.split("backward sweep", 1)[1]
    # the products come back from the forward, their derivatives from the saved values
    assert "rt.replay(" in backward and "rt.saved_matmul(" in backward and \
        "rt.saved_dot(" in backward
    _close(astjax.hessian(lambda x: f(w, x))(x), astjax.hessian(lambda x: plain(w, x))(x),
           rtol=1e-10)
    xs = np.stack([x, 2 * x])
    _close(astjax.vmap(astjax.grad(f), in_axes=(None, 0))(w, xs),
           np.stack([astjax.grad(plain)(w, r) for r in xs]))
    _close(astjax.jit(astjax.grad(f))(w, x), astjax.grad(plain)(w, x))


def test_decorator_forms_and_eager_calls():
    assert astjax.remat is astjax.checkpoint
    f = astjax.checkpoint(policy=astjax.checkpoint_policies.nothing_saveable)(step)
    np.testing.assert_allclose(f(X, 0.7), step(X, 0.7))
    np.testing.assert_allclose(layer(PARAMS[0], X), np.tanh(X @ PARAMS[0]["w"] +
                                                            PARAMS[0]["b"]))
    np.testing.assert_allclose(astjax.grad(lambda x: np.sum(f(x, 0.7)))(X),
                               astjax.grad(lambda x: np.sum(step(x, 0.7)))(X))


def _long_chain(x):
    for i in range(40):
        x = np.sin(x) * 0.9 + 0.1
    return x


_long_chain_ckpt = astjax.checkpoint(_long_chain)


def deep(x):
    for k in range(8):
        x = _long_chain(x)
    return np.sum(x)


def deep_ckpt(x):
    for k in range(8):
        x = _long_chain_ckpt(x)
    return np.sum(x)


def _peak(fn, *args):
    fn(*args)
    tracemalloc.start()
    out = fn(*args)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return out, peak


def test_memory_is_lower_on_a_long_chain():
    x = np.linspace(0.0, 1.0, 20000)
    g_plain, m_plain = _peak(astjax.grad(deep), x)
    g_ckpt, m_ckpt = _peak(astjax.grad(deep_ckpt), x)
    np.testing.assert_allclose(g_ckpt, g_plain, rtol=1e-12)
    # 320 saved steps against 8 saved inputs + one 40-step segment recomputed
    assert m_ckpt < 0.5 * m_plain, (m_ckpt, m_plain)


# -------------------------------------------- nested functions (lifted), lax bodies

def nested_ckpt(x, w):
    c = 0.1

    def inner(v):
        return np.tanh(v * w + c)
    for i in range(3):
        x = astjax.checkpoint(inner)(x)
    return np.sum(x)


def nested_plain(x, w):
    c = 0.1

    def inner(v):
        return np.tanh(v * w + c)
    for i in range(3):
        x = inner(x)
    return np.sum(x)


def scan_body_ckpt(x, ws):
    scale = 2.0

    def body(carry, w):
        y = np.sin(carry * w) * scale
        return y, np.sum(y)
    carry, ys = lax.scan(astjax.checkpoint(body), x, ws)
    return np.sum(carry) + np.sum(ys)


def scan_body_plain(x, ws):
    scale = 2.0

    def body(carry, w):
        y = np.sin(carry * w) * scale
        return y, np.sum(y)
    carry, ys = lax.scan(body, x, ws)
    return np.sum(carry) + np.sum(ys)


def lambda_ckpt(x, w):
    return np.sum(astjax.checkpoint(lambda v: np.cos(v) * x * w)(x))


def lambda_plain(x, w):
    return np.sum(np.cos(x) * x * w)


def module_in_scan(x, ws):
    carry, ys = lax.scan(astjax.checkpoint(_scan_step), x, ws)
    return np.sum(ys)


def module_in_scan_plain(x, ws):
    carry, ys = lax.scan(_scan_step, x, ws)
    return np.sum(ys)


def _scan_step(carry, w):
    y = step(carry, w)
    return y, y * y


NESTED = {
    "nested_def": (nested_ckpt, nested_plain, (X, 0.7)),
    "scan_body": (scan_body_ckpt, scan_body_plain, (X, np.array([0.3, 0.5, 0.9]))),
    "lambda": (lambda_ckpt, lambda_plain, (X, 0.7)),
    "module_fn_in_scan": (module_in_scan, module_in_scan_plain, (X, np.array([0.3, -0.5]))),
}


@pytest.mark.parametrize("name", sorted(NESTED))
def test_nested_functions_and_lax_bodies(name):
    f, plain, args = NESTED[name]
    g = astjax.grad(f, argnums=(0, 1))(*args)
    _close(g, astjax.grad(plain, argnums=(0, 1))(*args))
    _close(g, numerical_grad(plain, args, (0, 1)), rtol=1e-6)
    src = astjax.make_source(astjax.grad(f), simplify=False)(*args)
    assert "rt.custom_call(" in src
    _close(astjax.jit(astjax.grad(f))(*args), astjax.grad(plain)(*args))
    _close(astjax.vmap(astjax.grad(f), in_axes=(0, None))(np.stack([args[0]] * 2), args[1]),
           np.stack([astjax.grad(plain)(*args)] * 2))


def test_nested_function_calling_a_nested_function():
    """Both nested defs are lifted (the captured ``x`` becomes a parameter)."""
    def f(x):
        def helper(v):
            return np.sin(v) * 2.0

        def inner(v):
            return helper(v) * x + 1.0
        return np.sum(astjax.checkpoint(inner)(x))
    _close(astjax.grad(f)(X), 2 * np.cos(X) * X + 2 * np.sin(X))
    assert "rt.custom_call(" in astjax.make_source(astjax.grad(f), simplify=False)(X)
