"""In-place accumulation into cotangent buffers the backward sweep owns.

``astjax/transforms/inplace.py`` rewrites ``d = rt.acc(d, g)`` / ``rt.acc_at`` of the
generated backward sweep into the ``rt.acc_*`` helpers when ``d`` (or ``g``) provably
holds an array nothing else refers to.  Checked here: the helpers compute exactly
what the functional ones compute and mutate only what they may; the pass leaves
aliased values alone (a temporary read twice, a cotangent copied elsewhere, a value
re-read by a loop, the caller's cotangent); gradients stay exact end to end.
"""
from __future__ import annotations

import numpy as np
import pytest

import astjax
from astjax import api, codegen, core
from astjax import runtime as rt
from astjax.core import Const, Copy, External, For, Prim, Return, Var
from astjax.transforms.inplace import own_accumulations

from conftest import check_grad


# ---------------------------------------------------------------- runtime helpers

def test_acc_inplace_adds_into_an_owned_array():
    d = np.ones(4)
    out = rt.acc_inplace(d, np.arange(4.0))
    assert out is d
    np.testing.assert_array_equal(d, 1.0 + np.arange(4.0))
    assert rt.acc_inplace(d, 2.0) is d and d[0] == 3.0
    assert rt.acc_inplace(None, d) is d and rt.acc_inplace(d, None) is d


@pytest.mark.parametrize("case", ["promotes", "broadcasts", "view", "readonly", "0-d",
                                  "subclass", "container"])
def test_acc_inplace_leaves_d_alone_when_the_sum_would_differ(case):
    d = np.ones(3, np.float32)
    g = np.full(3, 0.5, np.float32)
    if case == "promotes":
        g = g.astype(np.float64)
    elif case == "broadcasts":
        d = np.ones(1, np.float32)
    elif case == "view":
        d = np.ones(4, np.float32)[1:]
    elif case == "readonly":
        d.setflags(write=False)
    elif case == "0-d":
        d = np.array(1.0, np.float32)
        g = np.float32(0.5)
    elif case == "subclass":
        g = np.ma.masked_array(g)
    elif case == "container":
        d, g = (np.ones(3), None), (np.ones(3), np.ones(3))
    before = [np.array(x) if x is not None else None for x in (d if case == "container"
                                                              else (d,))]
    expected = rt.acc(d, g)
    out = rt.acc_inplace(d, g)
    for x, b in zip(d if case == "container" else (d,), before):
        if b is not None:
            np.testing.assert_array_equal(x, b)   # d itself is unchanged
    if case == "container":
        assert out[1] is g[1]
        np.testing.assert_array_equal(out[0], expected[0])
        return
    assert out is not d
    assert type(out) is type(expected) and np.shape(out) == np.shape(expected)
    assert np.asarray(out).dtype == np.asarray(expected).dtype
    np.testing.assert_array_equal(out, expected)


def test_acc_copy_owns_a_copy_of_the_first_contribution():
    g = np.arange(3.0)
    d = rt.acc_copy(None, g)
    assert d is not g and d.base is None
    d = rt.acc_copy(d, np.ones(3))
    np.testing.assert_array_equal(g, np.arange(3.0))   # the contribution is untouched
    np.testing.assert_array_equal(d, np.arange(3.0) + 1)


def test_acc_reuse_adds_into_the_temporary():
    d, g = np.arange(3.0), np.ones(3)
    out = rt.acc_reuse(d, g)
    assert out is g
    np.testing.assert_array_equal(d, np.arange(3.0))
    np.testing.assert_array_equal(g, np.arange(3.0) + 1)
    # d broadcasts up: a new array, g untouched
    g = np.ones(1)
    out = rt.acc_reuse(np.arange(3.0), g)
    assert out is not g and g[0] == 1.0
    np.testing.assert_array_equal(out, np.arange(3.0) + 1)
    assert rt.acc_reuse(None, g) is g


@pytest.mark.parametrize("index", [(slice(1, None), slice(None)), 2, (Ellipsis, 0),
                                   (np.array([0, 2, 0]),)])
def test_acc_at_inplace_matches_acc_at(index):
    x = np.zeros((3, 4))
    rng = np.random.default_rng(0)
    d = rng.standard_normal((3, 4))
    g = rng.standard_normal(np.shape(x[index]))
    expected = rt.acc_at(d.copy(), x, index, g)
    out = rt.acc_at_inplace(d, x, index, g)
    assert out is d
    np.testing.assert_array_equal(out, expected)   # repeated indices add up too


def test_acc_at_inplace_falls_back():
    x = np.zeros(4)
    d = np.zeros(4, np.float32)
    out = rt.acc_at_inplace(d, x, 1, np.float64(2.0))   # would promote to float64
    assert out is not d and out.dtype == np.float64 and d[1] == 0.0
    assert rt.acc_at_inplace(None, x, 1, 2.0)[1] == 2.0
    base = np.zeros(5)
    view = base[1:]
    assert rt.acc_at_inplace(view, x, 0, 1.0) is not view and base[1] == 0.0


def test_acc_at_result_is_always_a_new_array():
    """The pass counts on it: acc_at's array result is owned even when g is None."""
    d = np.ones(3)
    out = rt.acc_at(d, d, 0, None)
    assert out is not d
    np.testing.assert_array_equal(out, d)


# ------------------------------------------------------------------ the pass on IR

def _mul(t, a, b):
    return Prim(t, "multiply", [Var(a), Var(b), Const(None)])


def _acc(d, g):
    return Prim(d, "acc", [Var(d), Var(g)])


def _none(d):
    return Copy(d, Const(None))


def _rewrite(params, body):
    """Run the pass over ``body`` (ending in a Return) and load it as ``f(*params)``."""
    n = own_accumulations(body)
    fn = core.Function("f", list(params), body)
    ns = codegen.load_source(codegen.print_function(fn), {"np": np, "rt": rt}, "inplace test")
    return n, ns["f"]


def _helper(s):
    return s.method if isinstance(s, External) else s.prim


def test_a_temporary_read_twice_is_not_moved():
    body = [_none("d"), _none("e"), _mul("t", "a", "b"), _acc("d", "t"), _acc("e", "t"),
            _acc("d", "c"), Return(Var("r"))]
    body.insert(6, Prim("r", "make_tuple", [(Var("d"), Var("e"), Var("t"))]))
    _, f = _rewrite(["a", "b", "c"], body)
    # d took a copy of t (acc_copy), so adding c into d leaves t and e alone
    assert _helper(body[3]) == "acc_copy" and _helper(body[5]) == "acc_copy"
    a, b, c = np.arange(3.0), np.full(3, 2.0), np.ones(3)
    d, e, t = f(a, b, c)
    np.testing.assert_array_equal(t, a * b)
    np.testing.assert_array_equal(e, a * b)
    np.testing.assert_array_equal(d, a * b + c)


def test_a_cotangent_copied_elsewhere_is_not_added_into():
    body = [_none("d"), _mul("t", "a", "b"), _acc("d", "t"), Copy("e", Var("d")),
            _acc("d", "c"), Prim("r", "make_tuple", [(Var("d"), Var("e"))]),
            Return(Var("r"))]
    _, f = _rewrite(["a", "b", "c"], body)
    assert _helper(body[2]) == "acc_inplace"   # t is moved into d...
    assert _helper(body[4]) == "acc"           # ...but e = d shares it afterwards
    a, b, c = np.arange(3.0), np.full(3, 2.0), np.ones(3)
    d, e = f(a, b, c)
    np.testing.assert_array_equal(e, a * b)
    np.testing.assert_array_equal(d, a * b + c)


def test_a_temporary_a_loop_reads_again_is_copied_not_moved():
    """Moving t into d would make the second iteration add t into itself."""
    body = [_none("d"), _mul("t", "a", "b"),
            For("i", Prim(None, "range", [Const(0), Const(3), Const(None)]),
                [_acc("d", "t")]),
            Prim("r", "make_tuple", [(Var("d"), Var("t"))]), Return(Var("r"))]
    _, f = _rewrite(["a", "b"], body)
    assert _helper(body[2].body[0]) == "acc_copy"
    a, b = np.arange(3.0), np.full(3, 2.0)
    d, t = f(a, b)
    np.testing.assert_array_equal(t, a * b)
    np.testing.assert_array_equal(d, 3 * a * b)


def test_a_parameter_is_never_added_into():
    body = [_none("d"), _acc("d", "s"), _mul("t", "a", "b"), _acc("d", "t"),
            Return(Var("d"))]
    _, f = _rewrite(["s", "a", "b"], body)
    s = np.ones(3)
    d = f(s, np.arange(3.0), np.full(3, 2.0))
    np.testing.assert_array_equal(s, np.ones(3))
    np.testing.assert_array_equal(d, 1 + 2 * np.arange(3.0))
    # and with the contributions the other way round, the temporary takes the sum
    body = [_mul("t", "a", "b"), Copy("d", Var("s")), _acc("d", "t"), Return(Var("d"))]
    _, f = _rewrite(["s", "a", "b"], body)
    assert _helper(body[2]) == "acc_reuse"
    d = f(s, np.arange(3.0), np.full(3, 2.0))
    np.testing.assert_array_equal(s, np.ones(3))
    np.testing.assert_array_equal(d, 1 + 2 * np.arange(3.0))


def test_a_loop_over_a_cotangent_shares_it():
    """``for v in d`` reads rows of d while the body runs: d must not change under it."""
    body = [_none("d"), _mul("t", "a", "b"), _acc("d", "t"), _none("e"),
            For("v", Var("d"), [_acc("e", "v"), _acc("d", "c")]),
            Prim("r", "make_tuple", [(Var("d"), Var("e"))]), Return(Var("r"))]
    _, f = _rewrite(["a", "b", "c"], body)
    assert _helper(body[4].body[1]) == "acc"
    a, b, c = np.arange(6.0).reshape(3, 2), np.full((3, 2), 2.0), np.ones((3, 2))
    d, e = f(a, b, c)
    np.testing.assert_array_equal(e, np.sum(a * b, axis=0))
    np.testing.assert_array_equal(d, a * b + 3 * c)


def test_a_branch_that_may_share_the_buffer_stops_in_place_adds():
    body = [_none("d"), _mul("t", "a", "b"), _acc("d", "t"),
            core.If(Var("flag"), [Copy("e", Var("d"))], [_none("e")]),
            _acc("d", "c"), Prim("r", "make_tuple", [(Var("d"), Var("e"))]),
            Return(Var("r"))]
    _, f = _rewrite(["a", "b", "c", "flag"], body)
    assert _helper(body[4]) == "acc"
    a, b, c = np.arange(3.0), np.full(3, 2.0), np.ones(3)
    d, e = f(a, b, c, True)
    np.testing.assert_array_equal(e, a * b)
    np.testing.assert_array_equal(d, a * b + c)


# ------------------------------------------------------------------- end to end

def stencil(u, w):
    """Slices of one array, padded back, as in the wave example's finite differences."""
    dx = np.pad(u[1:, :] - u[:-1, :], ((0, 1), (0, 0)))
    dy = np.pad(u[:, 1:] - u[:, :-1], ((0, 0), (0, 1)))
    lap = np.pad(dx[1:, :] - dx[:-1, :], ((1, 0), (0, 0))) + \
        np.pad(dy[:, 1:] - dy[:, :-1], ((0, 0), (1, 0)))
    return np.sum(np.tanh(lap * w + u) ** 2) + np.sum(u[2, :] * w[2, :])


def shared_cotangent(x):
    """y's cotangent is passed on as it is to both operands of the sum."""
    y = x + 2.0 * x
    return y


def stepped(u, w):
    def step(carry, a):
        v = carry + a * np.pad(carry[1:] - carry[:-1], (0, 1)) * w
        return v, v[2]
    last, ys = astjax.lax.scan(step, u, np.linspace(0.1, 0.5, 6))
    return np.sum(ys ** 2) + np.sum(last * w)


def _functional(monkeypatch, fun, *args):
    monkeypatch.setattr(api, "own_accumulations", lambda *a: 0)
    astjax.clear_cache()
    try:
        return astjax.value_and_grad(fun, argnums=(0, 1))(*args)
    finally:
        monkeypatch.undo()
        astjax.clear_cache()


def test_stencil_gradient_adds_in_place_and_is_exact(monkeypatch):
    rng = np.random.default_rng(1)
    u, w = rng.standard_normal((6, 5)), rng.standard_normal((6, 5))
    src = astjax.make_source(astjax.grad(stencil), simplify=False)(u, w)
    assert "rt.acc_at_inplace(" in src
    check_grad(stencil, (u, w), argnums=(0, 1))
    value, grads = astjax.value_and_grad(stencil, argnums=(0, 1))(u, w)
    value0, grads0 = _functional(monkeypatch, stencil, u, w)
    assert value == value0
    for g, g0 in zip(grads, grads0):
        np.testing.assert_array_equal(g, g0)   # the same sums, bit for bit


def test_scan_gradient_adds_in_place_and_is_exact(monkeypatch):
    rng = np.random.default_rng(2)
    u, w = rng.standard_normal(7), rng.standard_normal(7)
    check_grad(stepped, (u, w), argnums=(0, 1))
    _, grads = astjax.value_and_grad(stepped, argnums=(0, 1))(u, w)
    _, grads0 = _functional(monkeypatch, stepped, u, w)
    for g, g0 in zip(grads, grads0):
        np.testing.assert_array_equal(g, g0)


def test_vjp_leaves_the_callers_cotangent_alone():
    x = np.arange(4.0)
    _, vjp_fn = astjax.vjp(shared_cotangent, x)
    ct = np.ones(4)
    (g,) = vjp_fn(ct)
    np.testing.assert_array_equal(ct, np.ones(4))
    np.testing.assert_array_equal(g, 3.0 * np.ones(4))
    (g2,) = vjp_fn(ct)     # the residuals are untouched too: same answer again
    np.testing.assert_array_equal(g2, g)
    assert g is not ct and g2 is not g


def test_grad_of_grad_reads_the_plain_accumulations():
    """Generated code that a second transformation reads back is functional."""
    rng = np.random.default_rng(3)
    u, w = rng.standard_normal((5, 4)), rng.standard_normal((5, 4))

    def inner(u):
        return np.sum(astjax.grad(stencil)(u, w) ** 2)

    check_grad(inner, (u,), rtol=1e-4, atol=1e-6)
    src = astjax.make_source(astjax.grad(inner), simplify=False)(u)
    # the outer sweep adds in place; the inner gradient, re-read, is plain acc again
    assert "rt.acc_at_inplace(" in src


def double_pad(x):
    return np.pad(x, 1) + np.pad(x * 2.0, 1)


def test_pad_cotangent_views_are_never_added_into():
    """pad_vjp hands back a view of the cotangent: here, of the caller's array."""
    x = np.arange(4.0)
    _, vjp_fn = astjax.vjp(double_pad, x)
    ct = np.arange(6.0) + 1.0
    (g,) = vjp_fn(ct)
    np.testing.assert_array_equal(ct, np.arange(6.0) + 1.0)
    np.testing.assert_array_equal(g, 3.0 * ct[1:-1])
    np.testing.assert_array_equal(vjp_fn(ct)[0], g)
