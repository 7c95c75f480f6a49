"""custom_jvp / custom_vjp: JAX's documented examples under every transformation.

Each case is a custom function with an oracle: the derivative its rule defines, in
plain NumPy.  Every transformation (grad, value_and_grad, vjp, jvp, linearize, jacfwd,
jacrev, hessian, vmap, jit and their compositions) is checked against it, against
finite differences where the rule is the true derivative, and against Python loops
for vmap.  custom_vjp under forward mode and malformed rules are located errors.
"""
from __future__ import annotations

from functools import partial

import numpy as np
import pytest

import astjax
from astjax import lax
from astjax.errors import AstjaxError, DifferentiationError, TransformError

from conftest import numerical_grad

# ------------------------------------------------------------------ JAX's doc examples


@astjax.custom_jvp
def log1pexp(x):
    return np.log(1.0 + np.exp(x))


@log1pexp.defjvp
def log1pexp_jvp(primals, tangents):
    x, = primals
    x_dot, = tangents
    ans = log1pexp(x)
    ans_dot = (1 - 1 / (1 + np.exp(x))) * x_dot
    return ans, ans_dot


@astjax.custom_vjp
def clip_gradient(lo, hi, x):
    return x


def clip_gradient_fwd(lo, hi, x):
    return x, (lo, hi)


def clip_gradient_bwd(res, g):
    lo, hi = res
    return (None, None, np.clip(g, lo, hi))


clip_gradient.defvjp(clip_gradient_fwd, clip_gradient_bwd)


@astjax.custom_jvp
def round_ste(x):
    """Straight-through estimator: rounds going forward, identity going backward."""
    return np.round(x)


@round_ste.defjvp
def round_ste_jvp(primals, tangents):
    return round_ste(primals[0]), tangents[0]


@astjax.custom_vjp
def sin_times(x, y):
    return np.sin(x) * y


def sin_times_fwd(x, y):
    # residuals as a pytree: a dict holding a tuple
    return sin_times(x, y), {"trig": (np.cos(x), np.sin(x)), "y": y}


def sin_times_bwd(res, g):
    cos_x, sin_x = res["trig"]
    return (cos_x * g * res["y"], sin_x * g)


sin_times.defvjp(sin_times_fwd, sin_times_bwd)


@partial(astjax.custom_jvp, nondiff_argnums=(0,))
def app(f, x):
    return f(x)


@app.defjvp
def app_jvp(f, primals, tangents):
    x, = primals
    x_dot, = tangents
    return f(x), 2.0 * x_dot


def double(x):
    return 2.0 * x


@astjax.custom_jvp
def scaled_norm(params, x):
    """Pytree argument (a dict); the rule is the true derivative of the primal."""
    return params["a"] * np.sqrt(np.sum(x * x)) + params["b"]


@scaled_norm.defjvp
def scaled_norm_jvp(primals, tangents):
    params, x = primals
    params_dot, x_dot = tangents
    r = np.sqrt(np.sum(x * x))
    out = params["a"] * r + params["b"]
    out_dot = params_dot["a"] * r + params["a"] * np.sum(x * x_dot) / r + params_dot["b"]
    return out, out_dot


# fixed point with implicit differentiation (JAX's doc, its vjps written with grad)
@partial(astjax.custom_vjp, nondiff_argnums=(0,))
def fixed_point(f, a, x_guess):
    def cond_fun(carry):
        x_prev, x = carry
        return np.abs(x_prev - x) > 1e-13

    def body_fun(carry):
        _, x = carry
        return x, f(a, x)

    _, x_star = lax.while_loop(cond_fun, body_fun, (x_guess, f(a, x_guess)))
    return x_star


def fixed_point_fwd(f, a, x_init):
    x_star = fixed_point(f, a, x_init)
    return x_star, (a, x_star)


def fixed_point_rev(f, res, x_star_bar):
    a, x_star = res
    f_a = astjax.grad(f, argnums=0)(a, x_star)
    f_x = astjax.grad(f, argnums=1)(a, x_star)
    return x_star_bar * f_a / (1.0 - f_x), np.zeros_like(x_star)


fixed_point.defvjp(fixed_point_fwd, fixed_point_rev)


def newton_update(a, x):
    return 0.5 * (x + a / x)


def newton_sqrt(a):
    return fixed_point(newton_update, a, a)


# ------------------------------------------------------------------------------ cases

def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


X = np.array([0.3, -1.2, 2.5, 0.8])
POS = np.array([2.0, 3.0, 0.5, 9.0])

# name -> (f(x) elementwise through the custom function, x, the derivative the rule
#          defines as vjp(x, g) = g * df/dx for the rules that are linear in g, kind,
#          whether the rule is the true derivative so finite differences apply)
CASES = {
    "log1pexp": (lambda x: log1pexp(x), X, lambda x, g: _sigmoid(x) * g, "jvp", True),
    "clip_gradient": (lambda x: clip_gradient(-0.75, 0.75, x * 3.0), X,
                      lambda x, g: 3.0 * np.clip(g, -0.75, 0.75), "vjp", False),
    "round_ste": (lambda x: round_ste(x * 2.0), X, lambda x, g: 2.0 * g, "jvp", False),
    "sin_times": (lambda x: sin_times(x, x * x), X,
                  lambda x, g: (np.cos(x) * x * x + np.sin(x) * 2 * x) * g, "vjp", True),
    "app": (lambda x: app(double, x), X, lambda x, g: 2.0 * g, "jvp", True),
    # newton_sqrt's while loop is scalar: vmap makes it elementwise (a masked loop)
    "newton_sqrt": (lambda x: astjax.vmap(newton_sqrt)(x), POS,
                    lambda x, g: 0.5 / np.sqrt(x) * g, "vjp", True),
}
JVP_CASES = [n for n, c in CASES.items() if c[3] == "jvp"]
VJP_CASES = [n for n, c in CASES.items() if c[3] == "vjp"]


def _loss(name):
    f = CASES[name][0]
    return lambda x: np.sum(f(x) * np.linspace(0.5, 1.5, x.shape[0]))


def _loss_grad(name, x):
    return CASES[name][2](x, np.linspace(0.5, 1.5, x.shape[0]))


def _scalar(name):
    """f on a scalar (newton_sqrt's loop needs one; the others are elementwise)."""
    return newton_sqrt if name == "newton_sqrt" else CASES[name][0]


def _jac(name, x):
    return np.stack([CASES[name][2](x, e) for e in np.eye(x.shape[0])], axis=0)


# ------------------------------------------------------------------- reverse mode


@pytest.mark.parametrize("name", sorted(CASES))
def test_grad_is_the_rule(name):
    _, x, _, _, fd_ok = CASES[name]
    g = astjax.grad(_loss(name))(x)
    np.testing.assert_allclose(g, _loss_grad(name, x), rtol=1e-9, atol=1e-12)
    if fd_ok:
        np.testing.assert_allclose(g, numerical_grad(_loss(name), (x,), 0), rtol=1e-6)


@pytest.mark.parametrize("name", sorted(CASES))
def test_value_and_grad_vjp_jacrev(name):
    f, x, d, _, _ = CASES[name]
    value, g = astjax.value_and_grad(_loss(name))(x)
    np.testing.assert_allclose(value, _loss(name)(x), rtol=1e-12)
    np.testing.assert_allclose(g, _loss_grad(name, x), rtol=1e-9)
    out, vjp_fn = astjax.vjp(f, x)
    np.testing.assert_allclose(out, f(x), rtol=1e-12)
    ct = np.linspace(-1.0, 2.0, x.shape[0])
    np.testing.assert_allclose(vjp_fn(ct)[0], d(x, ct), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(astjax.jacrev(f)(x), _jac(name, x), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", sorted(CASES))
def test_jit_of_grad_and_of_the_function(name):
    f, x, _, _, _ = CASES[name]
    np.testing.assert_allclose(astjax.jit(astjax.grad(_loss(name)))(x), _loss_grad(name, x),
                               rtol=1e-9)
    np.testing.assert_allclose(astjax.jit(f)(x), f(x), rtol=1e-12)


@pytest.mark.parametrize("name", sorted(CASES))
def test_call_outside_transformations_runs_the_primal(name):
    f, x, _, _, _ = CASES[name]
    expected = {"log1pexp": np.log1p(np.exp(x)), "clip_gradient": x * 3.0,
                "round_ste": np.round(x * 2.0), "sin_times": np.sin(x) * x * x,
                "app": 2.0 * x, "newton_sqrt": np.sqrt(np.abs(x))}[name]
    np.testing.assert_allclose(f(x), expected, rtol=1e-12)


# ------------------------------------------------------------------- forward mode

@pytest.mark.parametrize("name", JVP_CASES)
def test_jvp_linearize_jacfwd_use_the_rule(name):
    f, x, d, _, _ = CASES[name]
    t = np.linspace(-1.0, 1.0, x.shape[0])
    out, out_dot = astjax.jvp(f, (x,), (t,))
    np.testing.assert_allclose(out, f(x), rtol=1e-12)
    np.testing.assert_allclose(out_dot, d(x, t), rtol=1e-9, atol=1e-12)
    out, f_jvp = astjax.linearize(f, x)
    np.testing.assert_allclose(f_jvp(t), d(x, t), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(astjax.jacfwd(f)(x), _jac(name, x), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", VJP_CASES)
@pytest.mark.parametrize("how", ["jvp", "jacfwd", "hessian", "linearize"])
def test_custom_vjp_under_forward_mode_is_a_located_error(name, how):
    f, x, _, _, _ = CASES[name]
    loss = _loss(name)
    with pytest.raises(DifferentiationError) as info:
        if how == "jvp":
            astjax.jvp(f, (x,), (np.ones_like(x),))
        elif how == "jacfwd":
            astjax.jacfwd(f)(x)
        elif how == "hessian":
            astjax.hessian(loss)(x)
        else:
            astjax.linearize(f, x)
    msg = str(info.value)
    assert "custom_vjp" in msg and "forward-mode" in msg
    assert "test_custom_rules.py" in msg   # the user's line


# ------------------------------------------------------------------- higher orders

def test_second_order_differentiates_the_rule():
    # log1pexp's rule is the sigmoid: its derivative s(1 - s), at any order and mode
    x = X
    s = _sigmoid(x)
    h = astjax.hessian(lambda x: np.sum(log1pexp(x)))(x)
    np.testing.assert_allclose(h, np.diag(s * (1 - s)), rtol=1e-9, atol=1e-14)
    for x0 in x:
        gg = astjax.grad(astjax.grad(log1pexp))(x0)
        np.testing.assert_allclose(gg, _sigmoid(x0) * (1 - _sigmoid(x0)), rtol=1e-9)
        fd = numerical_grad(astjax.grad(log1pexp), (x0,), 0)
        np.testing.assert_allclose(gg, fd, rtol=1e-6)
    ggg = astjax.grad(astjax.grad(astjax.grad(log1pexp)))(0.4)
    s0 = _sigmoid(0.4)
    np.testing.assert_allclose(ggg, s0 * (1 - s0) * (1 - 2 * s0), rtol=1e-8)
    jj = astjax.jvp(astjax.grad(log1pexp), (0.4,), (1.0,))[1]
    np.testing.assert_allclose(jj, s0 * (1 - s0), rtol=1e-9)


def test_second_order_through_custom_vjp_differentiates_bwd():
    # the bwd of sin_times is differentiable code: grad of grad differentiates it
    g2 = astjax.grad(astjax.grad(lambda x: sin_times(x, 2.0)))(0.3)
    np.testing.assert_allclose(g2, -2.0 * np.sin(0.3), rtol=1e-9)
    g2 = astjax.grad(astjax.grad(newton_sqrt))(2.0)
    np.testing.assert_allclose(g2, -0.25 * 2.0 ** -1.5, rtol=1e-7)


def test_the_stable_rule_where_the_primal_overflows():
    with np.errstate(over="ignore"):
        assert astjax.grad(log1pexp)(1000.0) == 1.0
        np.testing.assert_allclose(astjax.vmap(astjax.grad(log1pexp))(
            np.array([1000.0, 0.0])), [1.0, 0.5])


# --------------------------------------------------------------------------- vmap

@pytest.mark.parametrize("name", sorted(CASES))
def test_vmap_runs_the_batched_primal(name):
    f, x, _, _, _ = CASES[name]
    xs = np.stack([x, x * 0.5 + 0.1, x + 1.0])
    if name == "newton_sqrt":
        xs = np.abs(xs) + 0.5
    expected = np.stack([f(row) for row in xs])
    np.testing.assert_allclose(astjax.vmap(f)(xs), expected, rtol=1e-10)


@pytest.mark.parametrize("name", sorted(CASES))
def test_vmap_of_grad_and_grad_of_vmap_use_the_rule(name):
    f, x, d, _, _ = CASES[name]
    one = _scalar(name)
    ones = np.ones_like(x)
    per = astjax.vmap(astjax.grad(one))(x)
    np.testing.assert_allclose(per, d(x, ones), rtol=1e-9, atol=1e-12)
    w = np.linspace(0.5, 1.5, x.shape[0])
    g = astjax.grad(lambda x: np.sum(astjax.vmap(one)(x) * w))(x)
    np.testing.assert_allclose(g, d(x, w), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(astjax.jit(astjax.vmap(astjax.grad(one)))(x), d(x, ones),
                               rtol=1e-9, atol=1e-12)


def test_vmap_with_an_unbatched_argument_sums_its_cotangent():
    # sin_times(x, y) batched over x only: y's cotangent is the sum over the batch
    xs = np.array([0.3, -0.7, 1.1])

    def total(y):
        return np.sum(astjax.vmap(sin_times, in_axes=(0, None))(xs, y))
    np.testing.assert_allclose(astjax.grad(total)(1.7), np.sum(np.sin(xs)), rtol=1e-12)
    np.testing.assert_allclose(astjax.grad(total)(1.7), numerical_grad(total, (1.7,), 0),
                               rtol=1e-7)

    def total_jvp(y):
        return np.sum(astjax.vmap(scaled_norm, in_axes=(None, 0))({"a": y, "b": 0.5},
                                                                 np.ones((3, 2)) * xs[:, None]))
    np.testing.assert_allclose(astjax.grad(total_jvp)(1.7),
                               numerical_grad(total_jvp, (1.7,), 0), rtol=1e-7)


def test_jvp_of_vmap_uses_the_batched_rule():
    xs = np.array([[0.3, 1.0], [2.0, -1.0]])
    t = np.ones_like(xs)
    out, out_dot = astjax.jvp(astjax.vmap(log1pexp), (xs,), (t,))
    np.testing.assert_allclose(out_dot, _sigmoid(xs), rtol=1e-12)
    out, out_dot = astjax.jvp(astjax.vmap(round_ste), (xs,), (t,))
    np.testing.assert_allclose(out_dot, t)
    np.testing.assert_allclose(out, np.round(xs))


# -------------------------------------------------------------- pytrees, positions

def test_pytree_arguments_and_keyword_calls():
    params = {"a": 1.5, "b": -0.25}
    x = np.array([0.3, -1.2, 2.0])

    def f(params, x):
        return scaled_norm(params, x=x) ** 2

    g = astjax.grad(f, argnums=(0, 1))(params, x)
    expected = numerical_grad(f, (params, x), (0, 1))
    for got, want in zip(g, expected):
        for a, b in zip(astjax.tree_util.tree_leaves(got), astjax.tree_util.tree_leaves(want)):
            np.testing.assert_allclose(a, b, rtol=1e-6)
    t = ({"a": 1.0, "b": 0.5}, np.ones(3))
    _, out_dot = astjax.jvp(f, (params, x), t)
    fd = sum(np.sum(np.asarray(a) * np.asarray(b)) for a, b in zip(
        astjax.tree_util.tree_leaves(expected), astjax.tree_util.tree_leaves(t)))
    np.testing.assert_allclose(out_dot, fd, rtol=1e-6)


def _through_helpers(x):
    def inner(v):
        return log1pexp(v) + clip_gradient(-0.1, 0.1, v)
    total = 0.0
    for k in range(3):
        total = total + np.sum(inner(x * (k + 1)))
    return total


def _in_scan(x):
    def body(carry, xi):
        y = round_ste(carry * xi)
        return carry + y, y
    carry, ys = lax.scan(body, x, np.array([0.5, 1.5, 2.0]))
    return np.sum(carry) + np.sum(ys)


def test_custom_functions_inside_loops_helpers_and_scan():
    x = X
    s = sum(_sigmoid(x * k) * k for k in (1, 2, 3)) + 0.1 * (1 + 2 + 3)
    np.testing.assert_allclose(astjax.grad(_through_helpers)(x), s, rtol=1e-9)
    # round_ste is the identity going backward: the same as the gradient of the program
    # with the rounding taken out
    def smooth(x):
        def body(carry, xi):
            y = carry * xi
            return carry + y, y
        carry, ys = lax.scan(body, x, np.array([0.5, 1.5, 2.0]))
        return np.sum(carry) + np.sum(ys)
    np.testing.assert_allclose(astjax.grad(_in_scan)(x), numerical_grad(smooth, (x,), 0),
                               rtol=1e-7)


def test_the_function_passed_as_a_value():
    def apply(fn, x):
        return np.sum(fn(x))
    np.testing.assert_allclose(astjax.grad(lambda x: apply(log1pexp, x))(X), _sigmoid(X),
                               rtol=1e-12)


def test_make_source_shows_the_rule():
    src = astjax.make_source(astjax.grad(_loss("clip_gradient")))(X)
    assert "np.clip" in src


# ------------------------------------------------------------------------------ errors

@astjax.custom_vjp
def bad_bwd_arity(x, y):
    return x * y


bad_bwd_arity.defvjp(lambda x, y: (x * y, (x, y)), lambda res, g: (g * res[1],))


@astjax.custom_jvp
def bad_jvp(x):
    return np.sin(x)


@bad_jvp.defjvp
def bad_jvp_rule(primals, tangents):
    return np.cos(primals[0]) * tangents[0]


@astjax.custom_jvp
def no_rule(x):
    return x


def test_a_backward_rule_of_the_wrong_structure_is_refused():
    with pytest.raises(TypeError) as info:
        astjax.grad(lambda x: bad_bwd_arity(x, 2.0))(1.0)
    msg = str(info.value)
    assert "bad_bwd_arity" in msg and "tuple of 2" in msg and "test_custom_rules.py" in msg


def test_a_jvp_rule_that_returns_no_pair_is_refused():
    with pytest.raises(TypeError) as info:
        astjax.jvp(bad_jvp, (np.ones(2),), (np.ones(2),))
    assert "bad_jvp_rule" in str(info.value) and "(primal_out, tangent_out)" in str(info.value)
    with pytest.raises(TypeError):
        astjax.grad(lambda x: np.sum(bad_jvp(x)))(np.ones(2))


def test_a_function_without_rule_is_an_error_when_transformed():
    assert no_rule(3.0) == 3.0
    with pytest.raises(AstjaxError, match="defjvp"):
        astjax.grad(no_rule)(1.0)


def test_a_lambda_as_nondiff_argument_is_a_located_error():
    def f(x):
        return app(lambda v: v * 3.0, x)
    with pytest.raises(TransformError) as info:
        astjax.grad(f)(1.0)
    assert "module-level function" in str(info.value)
    assert "test_custom_rules.py" in str(info.value)


def test_a_function_for_a_differentiable_parameter_is_an_error():
    @astjax.custom_jvp
    def g(f, x):
        return f(x)
    g.defjvp(lambda primals, tangents: (primals[0](primals[1]), tangents[1]))
    with pytest.raises(TransformError, match="nondiff_argnums"):
        astjax.grad(lambda x: g(double, x))(1.0)


def test_defjvps_needs_one_rule_per_argument():
    with pytest.raises(TypeError, match="one rule"):
        astjax.custom_jvp(lambda x, y: x * y).defjvps(None)


@astjax.custom_vjp
def round_ste_vjp(x):
    return np.round(x)


def _round_fwd(x):
    return np.round(x), None


def _round_bwd(res, g):
    return (g,)


round_ste_vjp.defvjp(_round_fwd, _round_bwd)


def test_straight_through_as_custom_vjp_with_a_non_differentiable_fwd():
    # np.round in fwd carries no derivative: the rule alone gives it
    x = np.array([0.3, 1.6, -2.4])
    expected = np.round(x) + x
    np.testing.assert_allclose(astjax.grad(lambda x: np.sum(round_ste_vjp(x) * x))(x), expected)
    np.testing.assert_allclose(astjax.vmap(astjax.grad(lambda x: round_ste_vjp(x) * x))(x),
                               expected)
    np.testing.assert_allclose(
        astjax.grad(lambda x: np.sum(astjax.vmap(round_ste_vjp)(x) * x))(x), expected)


@astjax.custom_jvp
def sin_mul(x, y):
    return np.sin(x) * y


sin_mul.defjvps(lambda x_dot, ans, x, y: np.cos(x) * x_dot * y,
                lambda y_dot, ans, x, y: np.sin(x) * y_dot)


def test_defjvps_one_rule_per_argument():
    x, y = np.array([0.3, -1.0]), np.array([2.0, 0.5])

    def f(x, y):
        return np.sum(sin_mul(x, y) ** 2)

    g = astjax.grad(f, argnums=(0, 1))(x, y)
    for got, want in zip(g, numerical_grad(f, (x, y), (0, 1))):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    _, t = astjax.jvp(lambda x: sin_mul(x, y), (x,), (np.ones(2),))
    np.testing.assert_allclose(t, np.cos(x) * y)


def test_eval_shape_of_custom_calls_reads_the_primal():
    out = astjax.eval_shape(lambda x: np.sum(sin_times(x, x), axis=1) + log1pexp(x)[:, 0],
                            astjax.ShapeDtypeStruct((2, 3), np.float32))
    expected = np.sum(sin_times(np.ones((2, 3), np.float32), 1.0), axis=1) + \
        log1pexp(np.ones((2, 3), np.float32))[:, 0]
    assert out.shape == expected.shape == (2,) and out.dtype == expected.dtype


def test_custom_vjp_symbolic_zeros_is_a_located_error():
    @astjax.custom_vjp
    def f(x):
        return np.sin(x)
    with pytest.raises(astjax.TransformError, match="symbolic_zeros") as e:
        f.defvjp(lambda x: (f(x), x), lambda r, g: (g * np.cos(r),), symbolic_zeros=True)
    assert "test_custom_rules.py" in str(e.value) and "hint:" in str(e.value)
