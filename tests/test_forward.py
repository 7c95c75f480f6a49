"""Forward mode and Jacobians: jvp against central differences, jacfwd against jacrev,
the seeds' hessian examples, and nesting with reverse mode."""
import numpy as np
import pytest
from conftest import numerical_grad
from programs import control, idioms, inplace, mlp

import astjax
from astjax import lax

X = np.array([0.3, -0.5, 0.8])
V = np.array([1.0, -2.0, 0.5])


def directional_fd(f, args, tangents, eps=1e-6):
    plus = f(*[a + eps * t for a, t in zip(args, tangents)])
    minus = f(*[a - eps * t for a, t in zip(args, tangents)])
    return (np.asarray(plus) - np.asarray(minus)) / (2 * eps)


# ------------------------------------------------------------------ user programs

def elementwise(x):
    return np.tanh(x) * np.sin(x) + x ** 3 / (1.0 + x * x)


def with_loop(x):
    y = x
    for i in range(3):
        y = np.sin(y) * x + i
    return y


def with_branch(x):
    if np.sum(x) > 0:
        return np.exp(x) * 2.0
    return np.log1p(x * x)


def self_update(x):
    t = x
    for _ in range(3):
        t = t * x
    return np.sum(t)


def reductions(x):
    m = x.reshape(3, 1) * x
    return np.sum(m, axis=0) + np.max(m, axis=1) + np.mean(m)


def scan_rnn(w, xs):
    def step(h, x):
        h = np.tanh(h * w + x)
        return h, h * h
    h, ys = lax.scan(step, 0.0, xs)
    return np.sum(ys) + h


def seed_poly(x):
    return x[0] ** 2 + x[0] * x[1] + x[1] ** 3


def sum_squares(x):
    return np.sum(x ** 2)


def logistic_loss(w, X, y):
    z = X @ w
    return np.mean(np.log1p(np.exp(-y * z)))


def in_place(x):
    y = x * 1.0
    y[0] = x[1] * x[2]
    y[1:] += x[:-1] * 2.0
    return np.sum(y * y)


# ----------------------------------------------------------------------------- jvp

@pytest.mark.parametrize("fn", [elementwise, with_loop, with_branch, reductions, in_place])
def test_jvp_matches_directional_differences(fn):
    out, tangent = astjax.jvp(fn, (X,), (V,))
    np.testing.assert_allclose(out, fn(X), rtol=1e-12)
    np.testing.assert_allclose(tangent, directional_fd(fn, (X,), (V,)), rtol=1e-6, atol=1e-8)


def test_jvp_branch_taken_both_ways():
    for x in (X, -np.abs(X)):
        _, t = astjax.jvp(with_branch, (x,), (V,))
        np.testing.assert_allclose(t, directional_fd(with_branch, (x,), (V,)), rtol=1e-6)


def test_jvp_through_scan_two_arguments():
    xs = np.array([0.5, -1.0, 0.25, 2.0])
    args, tangents = (0.7, xs), (1.0, np.array([0.1, 0.2, -0.3, 0.4]))
    _, t = astjax.jvp(scan_rnn, args, tangents)
    np.testing.assert_allclose(t, directional_fd(scan_rnn, args, tangents), rtol=1e-6)


def test_jvp_of_the_mlp_with_pytree_tangents():
    rng = np.random.default_rng(0)
    params = [(rng.standard_normal((3, 4)), rng.standard_normal(4)),
              (rng.standard_normal((4, 2)), rng.standard_normal(2))]
    batch = (rng.standard_normal((5, 3)), rng.standard_normal((5, 2)))
    t_params = [(rng.standard_normal((3, 4)), rng.standard_normal(4)),
                (rng.standard_normal((4, 2)), rng.standard_normal(2))]
    t_batch = (np.zeros((5, 3)), np.zeros((5, 2)))
    _, t = astjax.jvp(mlp.loss, (params, batch), (t_params, t_batch))
    g = astjax.grad(mlp.loss)(params, batch)
    expected = sum(np.sum(a * b) for ga, ta in zip(g, t_params) for a, b in zip(ga, ta))
    np.testing.assert_allclose(t, expected, rtol=1e-10)


def test_jvp_checks_tangent_shapes():
    with pytest.raises(astjax.AstjaxError, match="shape"):
        astjax.jvp(elementwise, (X,), (np.ones(4),))
    with pytest.raises(astjax.AstjaxError, match="tuples"):
        astjax.jvp(elementwise, X, V)


def test_jvp_float32_stays_float32():
    x = X.astype(np.float32)
    out, t = astjax.jvp(elementwise, (x,), (V.astype(np.float32),))
    assert out.dtype == np.float32 and t.dtype == np.float32


def test_linearize_matches_jvp():
    out, f_jvp = astjax.linearize(with_loop, X)
    np.testing.assert_allclose(out, with_loop(X))
    for v in (V, np.ones(3)):
        np.testing.assert_allclose(f_jvp(v), astjax.jvp(with_loop, (X,), (v,))[1],
                                   rtol=1e-12)


# ------------------------------------------------------------------------ jacobians

@pytest.mark.parametrize("fn", [elementwise, with_loop, reductions, in_place])
def test_jacfwd_equals_jacrev_and_finite_differences(fn):
    jf = astjax.jacfwd(fn)(X)
    jr = astjax.jacrev(fn)(X)
    out = np.asarray(fn(X))
    assert jf.shape == out.shape + X.shape
    np.testing.assert_allclose(jf, jr, rtol=1e-10, atol=1e-12)
    cols = np.stack([directional_fd(fn, (X,), (e,)) for e in np.eye(3)], axis=-1)
    np.testing.assert_allclose(jf, cols, rtol=1e-6, atol=1e-8)


def test_jacobian_of_pytree_input_and_output_like_jax():
    def f(p):
        return {"a": p["w"] * 2.0, "b": np.sum(p["w"] * p["v"])}
    p = {"w": np.array([1.0, 2.0]), "v": np.array([3.0, 4.0, 5.0])[:2]}
    jf = astjax.jacfwd(f)(p)
    jr = astjax.jacrev(f)(p)
    assert set(jf) == {"a", "b"} and set(jf["a"]) == {"w", "v"}
    assert jf["a"]["w"].shape == (2, 2) and jf["b"]["v"].shape == (2,)
    for k in ("a", "b"):
        for m in ("w", "v"):
            np.testing.assert_allclose(jf[k][m], jr[k][m], atol=1e-12)
    np.testing.assert_allclose(jf["a"]["w"], 2 * np.eye(2))


def test_argnums_tuple_gives_tuples():
    jf = astjax.jacfwd(logistic_loss, argnums=(0, 1))(X, np.eye(3), np.ones(3))
    assert isinstance(jf, tuple) and jf[0].shape == (3,) and jf[1].shape == (3, 3)
    jr = astjax.jacrev(logistic_loss, argnums=(0, 1))(X, np.eye(3), np.ones(3))
    for a, b in zip(jf, jr):
        np.testing.assert_allclose(a, b, atol=1e-12)


def test_jacobian_picks_a_mode_and_agrees():
    np.testing.assert_allclose(astjax.jacobian(elementwise)(X), astjax.jacfwd(elementwise)(X))


# -------------------------------------------------------------------------- hessians

def test_seed_hessian_polynomial():
    x = np.array([1.5, -0.5])
    h = astjax.hessian(seed_poly)(x)
    np.testing.assert_allclose(h, [[2.0, 1.0], [1.0, 6 * x[1]]], rtol=1e-12)


def test_seed_hessian_of_sum_of_squares_is_2I():
    np.testing.assert_allclose(astjax.hessian(sum_squares)(X), 2 * np.eye(3), atol=1e-12)


def test_hessian_of_logistic_loss_against_differences_of_gradients():
    rng = np.random.default_rng(1)
    Xd, y = rng.standard_normal((20, 3)), np.sign(rng.standard_normal(20))
    h = astjax.hessian(logistic_loss)(X, Xd, y)
    g = astjax.grad(logistic_loss)
    cols = [(g(X + 1e-6 * e, Xd, y) - g(X - 1e-6 * e, Xd, y)) / 2e-6 for e in np.eye(3)]
    np.testing.assert_allclose(h, np.stack(cols, axis=-1), rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(h, h.T, atol=1e-12)


def test_hessian_through_control_flow():
    h = astjax.hessian(self_update)(X)
    g = astjax.grad(self_update)
    cols = [(g(X + 1e-6 * e) - g(X - 1e-6 * e)) / 2e-6 for e in np.eye(3)]
    np.testing.assert_allclose(h, np.stack(cols, axis=-1), rtol=1e-5, atol=1e-8)


# --------------------------------------------------------------------------- nesting

def test_jvp_of_grad_is_a_hessian_vector_product():
    _, hv = astjax.jvp(astjax.grad(sum_squares), (X,), (V,))
    np.testing.assert_allclose(hv, 2 * V)


def test_grad_of_a_jvp_based_function():
    def directional(x):
        return astjax.jvp(elementwise, (x,), (V,))[1].sum()
    got = astjax.grad(directional)(X)
    np.testing.assert_allclose(got, numerical_grad(directional, (X,)), rtol=1e-6)


def test_jacfwd_of_jacrev_built_from_grad():
    h = astjax.jacfwd(astjax.grad(seed_poly))(np.array([0.5, 2.0]))
    np.testing.assert_allclose(h, [[2.0, 1.0], [1.0, 12.0]], rtol=1e-12)


def test_programs_from_the_reverse_suite_under_jvp():
    for fn in (control.while_data, control.loop_break, control.branch_in_loop,
               idioms.list_comp_nested, idioms.generator_sum, inplace.set_item):
        x = np.array([0.4, 0.1, -0.3])
        _, t = astjax.jvp(fn, (x,), (V,))
        np.testing.assert_allclose(t, directional_fd(fn, (x,), (V,)), rtol=1e-5, atol=1e-8)


def vector_valued(x):
    return np.tanh(x) * x[0]


@pytest.mark.parametrize("outer, inner", [(astjax.jacfwd, astjax.jacrev),
                                          (astjax.jacrev, astjax.jacrev),
                                          (astjax.jacfwd, astjax.jacfwd)])
def test_jacobian_of_jacobian(outer, inner):
    x = np.array([0.3, -0.2, 0.6])
    got = outer(inner(vector_valued))(x)
    assert got.shape == (3, 3, 3)
    first = astjax.jacfwd(vector_valued)
    cols = [(first(x + 1e-6 * e) - first(x - 1e-6 * e)) / 2e-6 for e in np.eye(3)]
    np.testing.assert_allclose(got, np.stack(cols, axis=-1), rtol=1e-6, atol=1e-8)
    for i in range(3):
        np.testing.assert_allclose(got[i], got[i].T, atol=1e-12)


def test_jacobians_use_vmap_and_agree_with_loops():
    """jacfwd/jacrev batch their jvps/vjps with vmap; compare with explicit loops."""
    from astjax import forward_api
    x = np.array([0.3, -0.5, 0.8])
    f = forward_api.jvp_function(with_loop, (0,), (x,))
    basis = list(forward_api._basis((x,)))
    _, columns = forward_api._columns_by_vmap(f, (x,), basis, 1, False)
    assert columns is not None
    for (k, j), col in columns:
        np.testing.assert_allclose(col, f(x, np.eye(3)[j])[1], rtol=1e-13)
    rows = forward_api._rows_by_vmap(with_loop, (x,), list(forward_api._basis(with_loop(x))),
                                     (0,), False)
    assert rows is not None
    _, vjp_fn = astjax.vjp(with_loop, x)
    for (o, j), (row,) in rows:
        np.testing.assert_allclose(row, vjp_fn(np.eye(3)[j])[0], rtol=1e-13)


def test_vmap_over_tangents_of_gradient_code_keeps_lanes_apart():
    """Regression: tangents popped off a tape were broadcast a second time under vmap."""
    from astjax import forward_api
    g = astjax.grad(self_update)
    f = forward_api.jvp_function(g, (0,), (X,))
    _, dots = astjax.vmap(f, in_axes=(None, 0))(X, np.eye(3))
    np.testing.assert_allclose(dots, np.stack([f(X, e)[1] for e in np.eye(3)]), rtol=1e-13)
