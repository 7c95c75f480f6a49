"""astjax.lax: eager behaviour against plain Python twins, gradients against finite
differences, and the rewritten loops visible in make_source."""
import re

import numpy as np
import pytest
from conftest import check_grad

import astjax
from astjax import lax
from astjax.errors import ArgumentError


X = np.array([0.3, -0.2, 0.5, 0.7])


# ------------------------------------------------------------------ user programs

def scan_tanh(x):
    def step(c, xi):
        c = np.tanh(c * xi + 0.1)
        return c, c * 2.0
    c, ys = lax.scan(step, x[0], x)
    return np.sum(ys) + np.sum(c)


def scan_tanh_twin(x):
    c = x[0]
    ys = []
    for xi in x:
        c = np.tanh(c * xi + 0.1)
        ys.append(c * 2.0)
    return np.sum(np.stack(ys)) + np.sum(c)


def scan_reverse(x):
    c, ys = lax.scan(lambda c, xi: (c + xi * c, c * xi), 1.0, x, reverse=True)
    return np.sum(ys * ys) + c


def scan_reverse_twin(x):
    c = 1.0
    ys = [None] * len(x)
    for i in range(len(x) - 1, -1, -1):
        ys[i] = c * x[i]
        c = c + x[i] * c
    return np.sum(np.stack(ys) ** 2) + c


def scan_pytree(x):
    def step(carry, inp):
        a, b = carry
        u, v = inp
        return (a * u, b + v * a), {"prod": a * b, "u": u}
    (a, b), ys = lax.scan(step, (x[0], x[1]), (x, x * 2.0))
    return np.sum(a) + np.sum(b) + np.sum(ys["prod"]) + np.sum(ys["u"] ** 2)


def scan_no_xs(x):
    c, ys = lax.scan(lambda c, _: (c * 0.9 + x, np.sum(c)), x, None, length=5)
    return np.sum(c) + np.sum(ys)


def scan_matrix_rows(w, xs):
    def rnn_step(h, x):
        h = np.tanh(np.dot(h, w) + x)
        return h, np.sum(h * h)
    h, losses = lax.scan(rnn_step, np.zeros(w.shape[0]), xs)
    return np.sum(losses) + np.sum(h)


def fori(x):
    return np.sum(lax.fori_loop(0, 4, lambda i, v: v * x + i, x))


def fori_twin(x):
    v = x
    for i in range(0, 4):
        v = v * x + i
    return np.sum(v)


def fori_zero_trips(x):
    return np.sum(lax.fori_loop(3, 3, lambda i, v: v * v, x * 2.0))


def while_grow(x):
    v = lax.while_loop(lambda v: np.sum(v) < 10.0, lambda v: v * 1.7, x)
    return np.sum(v * v)


def while_grow_twin(x):
    v = x
    while np.sum(v) < 10.0:
        v = v * 1.7
    return np.sum(v * v)


def while_pytree(x):
    def body(state):
        i, v = state
        return i + 1, v * np.cos(v)
    n, v = lax.while_loop(lambda s: s[0] < 3, body, (0, x))
    return np.sum(v) * n


def cond_branch(x):
    return lax.cond(np.sum(x) > 0, lambda a: np.sum(a * a), lambda a: np.sum(a), x)


def cond_two_operands(x, y):
    def yes(a, b):
        return np.sum(a * b)

    def no(a, b):
        return np.sum(a - b)
    return lax.cond(x[0] > y[0], yes, no, x, y)


def switch_branch(x, k):
    return np.sum(lax.switch(k, [lambda a: a, lambda a: a * a, lambda a: np.tanh(a)], x))


def map_rows(x):
    return np.sum(lax.map(lambda r: np.sin(r) * r, x))


def select_where(x):
    return np.sum(lax.select(x > 0, x * x, -x))


# ------------------------------------------------------------------------ eager

@pytest.mark.parametrize("fn, twin", [
    (scan_tanh, scan_tanh_twin), (scan_reverse, scan_reverse_twin), (fori, fori_twin),
    (while_grow, while_grow_twin)])
def test_eager_matches_python_twin(fn, twin):
    np.testing.assert_allclose(fn(X.copy()), twin(X.copy()), rtol=1e-12)


def test_eager_scan_returns_stacked_pytree():
    carry, ys = lax.scan(lambda c, x: (c + x, {"c": c, "x2": x * 2}), 0.0, np.arange(4.0))
    assert carry == 6.0
    np.testing.assert_array_equal(ys["c"], [0, 0, 1, 3])
    np.testing.assert_array_equal(ys["x2"], [0, 2, 4, 6])


def test_eager_switch_clamps_index_like_jax():
    branches = [lambda: "a", lambda: "b", lambda: "c"]
    assert lax.switch(-4, branches) == "a"
    assert lax.switch(1, branches) == "b"
    assert lax.switch(99, branches) == "c"


def test_eager_cond_needs_scalar_predicate():
    with pytest.raises(ArgumentError, match="scalar"):
        lax.cond(np.array([True, False]), lambda: 1, lambda: 2)


def test_eager_map_and_select():
    np.testing.assert_allclose(lax.map(lambda r: r * 2, np.eye(2)), 2 * np.eye(2))
    np.testing.assert_allclose(lax.select(np.array([True, False]), np.ones(2), np.zeros(2)),
                               [1.0, 0.0])


def test_scan_length_mismatch_is_an_error():
    with pytest.raises(ValueError, match="disagree"):
        lax.scan(lambda c, x: (c, x), 0.0, np.arange(3.0), length=4)


# ---------------------------------------------------------------- transformed

@pytest.mark.parametrize("fn", [scan_tanh, scan_reverse, scan_pytree, scan_no_xs, fori,
                                fori_zero_trips, while_grow, while_pytree, cond_branch,
                                map_rows, select_where])
def test_grad_matches_finite_differences(fn):
    check_grad(fn, (X.copy(),))


@pytest.mark.parametrize("fn", [scan_tanh, scan_reverse, scan_pytree, fori, while_grow,
                                cond_branch, map_rows])
def test_transformed_value_matches_eager(fn):
    value, _ = astjax.value_and_grad(fn)(X.copy())
    np.testing.assert_allclose(value, fn(X.copy()), rtol=1e-12)


def test_grad_cond_both_branches():
    check_grad(cond_branch, (-X,))
    check_grad(cond_two_operands, (X, X[::-1].copy()), argnums=(0, 1))
    check_grad(cond_two_operands, (X[::-1].copy(), X), argnums=(0, 1))


@pytest.mark.parametrize("k", [-3, 0, 1, 2, 7])
def test_grad_switch_every_branch_and_out_of_range(k):
    check_grad(switch_branch, (X.copy(), k))


def test_grad_rnn_scan_over_matrix_rows():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 3)) * 0.5
    xs = rng.standard_normal((6, 3))
    check_grad(scan_matrix_rows, (w, xs), argnums=(0, 1))


def test_make_source_shows_the_loop_scan_became():
    src = astjax.make_source(scan_tanh)(X)
    assert re.search(r"for \w+ in range\(0, n_steps\):", src)
    assert "rt.tree_index(" in src and "rt.tree_stack(" in src
    grad_src = astjax.make_source(astjax.grad(scan_tanh))(X)
    assert "rt.pop(tape)" in grad_src


def uninlinable_body(x):
    return np.sum(lax.fori_loop(0, 3, BODIES[0], x))


BODIES = [len]


def test_body_that_cannot_be_inlined_names_the_line():
    with pytest.raises(astjax.TransformError) as info:
        astjax.grad(uninlinable_body)(X)
    msg = str(info.value)
    assert "test_lax.py" in msg and "BODIES[0]" in msg and "^" in msg and "hint:" in msg
