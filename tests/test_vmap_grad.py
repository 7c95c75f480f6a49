"""Derivatives through vmap, and vmap of derivatives, for every kind of axes (issue 10,
classes 8 and 9).

The matrix: one-example kernels (``tests/programs/batched.py``) under ``vmap`` with
in_axes/out_axes that are ints, negative ints, None and pytrees, composed with grad,
value_and_grad, vjp, jvp, linearize, jacfwd, jacrev and jit, in both orders
(a derivative of the vmapped function, and vmap of the derivative).  Oracles: float64
central finite differences of a Python loop over the examples (``reference``), and a
Python loop of the derivative for vmap-of-derivative.
"""
from __future__ import annotations

import numpy as np
import pytest

import astjax
from astjax import tree_util
from programs import batched as pb
from test_vmap import assert_tree_close, reference

B = 3
EPS = 1e-6


# ------------------------------------------------------------------------ the cases

def _arrays(rng, *shapes):
    return [rng.standard_normal(s) for s in shapes]


def _case_layer(in_axes, out_axes, x_shape):
    def make(rng):
        x, w = _arrays(rng, x_shape, (3, 2))
        if in_axes[1] is not None:
            w = rng.standard_normal((B, 3, 2))
            w = np.moveaxis(w, 0, in_axes[1])
        return (x, w)
    return ("layer", pb.layer, in_axes, out_axes, make, "array")


def _case_pair(in_axes, out_axes):
    def make(rng):
        return tuple(_arrays(rng, (B, 3), (3, 2)))
    return ("pair", pb.layer_pair, in_axes, out_axes, make, "pair")


def _case_dict(in_axes, out_axes):
    def make(rng):
        p = {"w": rng.standard_normal((3, 2)), "b": rng.standard_normal((B, 2))}
        return (p, rng.standard_normal((B, 3)))
    return ("dict", pb.layer_dict, in_axes, out_axes, make, "dict")


def _case_constant(out_axes):
    def make(rng):
        return tuple(_arrays(rng, (B, 3), (3, 2)))
    return ("constant", pb.layer_and_constant, (0, None), out_axes, make, "pair")


CASES = [
    _case_layer((0, None), 0, (B, 3)),
    _case_layer((0, None), 1, (B, 3)),
    _case_layer((0, None), -1, (B, 3)),
    _case_layer((0, None), -2, (B, 3)),
    _case_layer((1, None), 0, (3, B)),
    _case_layer((-1, None), 1, (3, B)),
    _case_layer((-2, None), -1, (B, 3)),
    _case_layer((None, 0), 0, (3,)),
    _case_layer((None, 2), 1, (3,)),
    _case_layer((0, -1), 0, (B, 3)),
    _case_pair((0, None), 0),
    _case_pair((0, None), (1, 0)),
    _case_pair((0, None), (-1, 1)),
    _case_pair((0, None), 1),
    _case_dict(({"w": None, "b": 0}, 0), {"y": 1, "z": 0}),
    _case_dict(({"w": None, "b": 0}, 0), {"y": -1, "z": 1}),
    _case_dict(({"w": None, "b": 0}, 0), 0),
    _case_constant((0, None)),
    _case_constant((1, None)),
]
IDS = [f"{c[0]}-in{c[2]}-out{c[3]}".replace(" ", "") for c in CASES]


def _weights(rng, out):
    return tree_util.tree_map(lambda leaf: rng.standard_normal(np.shape(leaf)), out)


def _setup(case, seed=0):
    name, fun, in_axes, out_axes, make, kind = case
    rng = np.random.default_rng(seed)
    args = make(rng)
    want = reference(fun, args, in_axes, out_axes)
    ws = _weights(rng, want)
    vf, loss_outside, loss_inside = pb.make_losses(fun, in_axes, out_axes, ws, kind)
    return args, want, ws, vf, loss_outside, loss_inside, kind


def _float_args(args):
    """Positions of arguments with float leaves (all of them here)."""
    return [k for k, a in enumerate(args) if tree_util.tree_leaves(a)]


def _fd_grad(f, args, k):
    """Central differences of the scalar ``f(*args)`` in every leaf element of args[k]."""
    leaves, tdef = tree_util.tree_flatten(args[k])
    grads = []
    for j, leaf in enumerate(leaves):
        leaf = np.asarray(leaf, dtype=np.float64)
        g = np.zeros_like(leaf)
        for idx in np.ndindex(leaf.shape):
            vals = []
            for sign in (1, -1):
                bumped = leaf.copy()
                bumped[idx] += sign * EPS
                new = list(leaves)
                new[j] = bumped
                moved = list(args)
                moved[k] = tree_util.tree_unflatten(tdef, new)
                vals.append(f(*moved))
            g[idx] = (vals[0] - vals[1]) / (2 * EPS)
        grads.append(g)
    return tree_util.tree_unflatten(tdef, grads)


def _ref_loss(case, ws, kind):
    fun, in_axes, out_axes = case[1], case[2], case[3]
    return lambda *a: pb.weigh(reference(fun, a, in_axes, out_axes), ws, kind)


def _close(got, want, what):
    assert_tree_close(got, want, rtol=1e-6, atol=1e-7, what=what)


# --------------------------------------------------------- vmap alone, and under jit

@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_vmap_and_jit_of_vmap_match_the_loop(case):
    args, want, _, vf, _, _, _ = _setup(case)
    assert_tree_close(vf(*args), want, rtol=1e-12, atol=1e-12)
    assert_tree_close(astjax.jit(vf)(*args), want, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------- derivatives of vmap

@pytest.mark.parametrize("where", ["outside", "inside"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_grad_and_value_and_grad_through_vmap(case, where):
    args, _, ws, _, loss_outside, loss_inside, kind = _setup(case)
    loss = loss_outside if where == "outside" else loss_inside
    ref = _ref_loss(case, ws, kind)
    for k in _float_args(args):
        want = _fd_grad(ref, args, k)
        _close(astjax.grad(loss, argnums=k)(*args), want, f"grad wrt {k}")
        value, g = astjax.value_and_grad(loss, argnums=k)(*args)
        np.testing.assert_allclose(value, ref(*args), rtol=1e-12)
        _close(g, want, f"value_and_grad wrt {k}")
    both = astjax.grad(loss, argnums=(0, 1))(*args)
    _close(both, tuple(_fd_grad(ref, args, k) for k in (0, 1)), "grad wrt (0, 1)")
    # jit of the gradient
    _close(astjax.jit(astjax.grad(loss))(*args), _fd_grad(ref, args, 0), "jit(grad)")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_vjp_jvp_and_linearize_of_vmap(case):
    args, want, ws, vf, _, _, kind = _setup(case)
    rng = np.random.default_rng(1)
    # vjp: the cotangent ws, against finite differences of <ws, loop>
    ref = _ref_loss(case, ws, kind)
    out, vjp_fn = astjax.vjp(vf, *args)
    assert_tree_close(out, want, rtol=1e-12)
    cts = vjp_fn(ws)
    assert len(cts) == len(args)
    for k in _float_args(args):
        _close(cts[k], _fd_grad(ref, args, k), f"vjp cotangent {k}")
    # jvp and linearize: a random direction, against a central difference of the loop
    tangents = tuple(tree_util.tree_map(lambda v: rng.standard_normal(np.shape(v)), a)
                     for a in args)
    plus = [tree_util.tree_map(lambda a, t: a + EPS * t, a, t) for a, t in zip(args, tangents)]
    minus = [tree_util.tree_map(lambda a, t: a - EPS * t, a, t) for a, t in zip(args, tangents)]
    fun, in_axes, out_axes = case[1], case[2], case[3]
    fd = tree_util.tree_map(lambda p, m: (p - m) / (2 * EPS),
                            reference(fun, plus, in_axes, out_axes),
                            reference(fun, minus, in_axes, out_axes))
    value, tangent = astjax.jvp(vf, args, tangents)
    assert_tree_close(value, want, rtol=1e-12)
    _close(tangent, fd, "jvp")
    value, f_jvp = astjax.linearize(vf, *args)
    assert_tree_close(value, want, rtol=1e-12)
    _close(f_jvp(*tangents), fd, "linearize")


ARRAY_CASES = [c for c in CASES if c[5] == "array"]
ARRAY_IDS = [i for i, c in zip(IDS, CASES) if c[5] == "array"]


@pytest.mark.parametrize("jac", ["jacfwd", "jacrev"])
@pytest.mark.parametrize("case", ARRAY_CASES, ids=ARRAY_IDS)
def test_jacobians_of_vmap(case, jac):
    args, want, _, vf, _, _, _ = _setup(case)
    fun, in_axes, out_axes = case[1], case[2], case[3]
    for k in (0, 1):
        got = getattr(astjax, jac)(vf, argnums=k)(*args)
        x = args[k]
        expected = np.zeros(np.shape(want) + np.shape(x))
        for idx in np.ndindex(np.shape(x)):
            plus, minus = list(args), list(args)
            plus[k], minus[k] = x.copy(), x.copy()
            plus[k][idx] += EPS
            minus[k][idx] -= EPS
            expected[(Ellipsis,) + idx] = (reference(fun, plus, in_axes, out_axes) -
                                           reference(fun, minus, in_axes, out_axes)) / (2 * EPS)
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)


# ------------------------------------------------------------- vmap of derivatives

@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_vmap_of_grad_matches_a_loop_of_grad(case):
    """vmap(grad(loss of ONE example)) with the case's in_axes, and int out_axes on the
    gradient, against a loop of grad."""
    name, _, in_axes, _, make, _ = case
    args = make(np.random.default_rng(2))
    for k in _float_args(args):
        g = astjax.grad(pb.EXAMPLE_LOSSES[name], argnums=k)
        for out_axes in (0, 1, -1):
            vg = astjax.vmap(g, in_axes=in_axes, out_axes=out_axes)
            want = reference(g, args, in_axes, out_axes)
            assert_tree_close(vg(*args), want, rtol=1e-10, atol=1e-12,
                              what=f"vmap(grad) wrt {k}, out_axes={out_axes}")


# ------------------------------------------------------ the Gaussian-process pattern

@pytest.fixture
def gp_data():
    rng = np.random.default_rng(5)
    return 1.3, rng.standard_normal((4, 2))


def _fd_scalar(f, x):
    return (f(x + EPS) - f(x - EPS)) / (2 * EPS)


@pytest.mark.parametrize("objective", ["gp_objective", "gp_objective_t", "gp_objective_neg",
                                       "grad_of_kernel_sum"])
def test_grad_through_nested_vmap(objective, gp_data):
    """vmap whose body calls vmap (kernel rows -> kernel matrix), under grad, jvp and
    jit(grad), against finite differences; also with out_axes=1 and negative in_axes."""
    ell, xs = gp_data
    if objective == "gp_objective_neg":
        xs = np.ascontiguousarray(xs.T)
    f = getattr(pb, objective)
    want_ell = _fd_scalar(lambda e: f(e, xs), ell)
    want_xs = _fd_grad(f, (ell, xs), 1)
    np.testing.assert_allclose(astjax.grad(f)(ell, xs), want_ell, rtol=1e-6)
    np.testing.assert_allclose(astjax.grad(f, argnums=1)(ell, xs), want_xs, rtol=1e-6,
                               atol=1e-8)
    np.testing.assert_allclose(astjax.jit(astjax.grad(f))(ell, xs), want_ell, rtol=1e-6)
    _, t = astjax.jvp(f, (ell, xs), (1.0, np.zeros_like(xs)))
    np.testing.assert_allclose(t, want_ell, rtol=1e-6)


def test_nested_vmap_objective_matches_the_loop(gp_data):
    ell, xs = gp_data
    np.testing.assert_allclose(pb.gp_objective(ell, xs), pb.gp_objective_loop(ell, xs),
                               rtol=1e-12)
    np.testing.assert_allclose(astjax.grad(pb.gp_objective)(ell, xs),
                               astjax.grad(pb.gp_objective_loop)(ell, xs), rtol=1e-10)
    np.testing.assert_allclose(astjax.grad(pb.grad_of_kernel_sum)(ell, xs),
                               astjax.grad(pb.grad_of_kernel_sum_loop)(ell, xs), rtol=1e-10)


def test_vmap_of_grad_of_nested_vmap(gp_data):
    """Per-length-scale gradients: vmap over ell of grad of the nested-vmap objective."""
    _, xs = gp_data
    ells = np.array([0.7, 1.3, 2.1])
    got = astjax.vmap(astjax.grad(pb.gp_objective), (0, None))(ells, xs)
    want = np.array([_fd_scalar(lambda e: pb.gp_objective_loop(e, xs), e) for e in ells])
    np.testing.assert_allclose(got, want, rtol=1e-6)
    hess = astjax.grad(astjax.grad(pb.gp_objective))(1.3, xs)
    want2 = _fd_scalar(lambda e: astjax.grad(pb.gp_objective_loop)(e, xs), 1.3)
    np.testing.assert_allclose(hess, want2, rtol=1e-5)


# ------------------------------------------------------------ shape stand-in of ans

def test_a_rule_reading_its_own_result_shape_after_reassignment():
    """The root cause of classes 8 and 9: ``out = stack(...); out = moveaxis(out)``
    restored the shape stand-in of ``out`` before the stack's rule read it."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((3, 4))
    f = pb.restacked
    want = _fd_grad(f, (x,), 0)
    np.testing.assert_allclose(astjax.grad(f)(x), want, rtol=1e-6, atol=1e-8)


# ------------------------------------- vmap of what vjp, linearize and jacobians return

def test_vmap_of_vjp_and_linearize_functions():
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal((B, 3)), rng.standard_normal((3, 2))
    out, vjp_fn = astjax.vjp(pb.layer, x[0], w)
    cts = rng.standard_normal((5, 2))
    got = astjax.vmap(vjp_fn)(cts)
    want = [vjp_fn(ct) for ct in cts]
    for k in range(2):
        np.testing.assert_allclose(got[k], np.stack([c[k] for c in want]), rtol=1e-12)
    _, f_jvp = astjax.linearize(pb.layer, x[0], w)
    tx, tw = rng.standard_normal((5, 3)), rng.standard_normal((5, 3, 2))
    np.testing.assert_allclose(astjax.vmap(f_jvp)(tx, tw),
                               np.stack([f_jvp(a, b) for a, b in zip(tx, tw)]), rtol=1e-12)
    np.testing.assert_allclose(astjax.vmap(f_jvp, in_axes=(0, None))(tx, tw[0]),
                               np.stack([f_jvp(a, tw[0]) for a in tx]), rtol=1e-12)
    # and other transformations of them
    g = astjax.grad(lambda c: np.sum(vjp_fn(c)[0] ** 2))(cts[0])
    h = np.zeros(2)
    for j in range(2):
        e = np.zeros(2)
        e[j] = EPS
        h[j] = (np.sum(vjp_fn(cts[0] + e)[0] ** 2) - np.sum(vjp_fn(cts[0] - e)[0] ** 2)) / (2 * EPS)
    np.testing.assert_allclose(g, h, rtol=1e-6)


@pytest.mark.parametrize("jac", ["jacfwd", "jacrev", "jacobian", "hessian"])
def test_vmap_of_jacobians_is_a_loop_with_jax_axes(jac):
    rng = np.random.default_rng(8)
    xs, w = rng.standard_normal((B, 3)), rng.standard_normal((3, 2))
    fun = pb.loss_layer if jac == "hessian" else pb.layer
    j = getattr(astjax, jac)(fun)
    got = astjax.vmap(j, in_axes=(0, None))(xs, w)
    want = np.stack([j(x, w) for x in xs])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    got = astjax.vmap(j, in_axes=(1, None), out_axes=-1)(xs.T, w)
    np.testing.assert_allclose(got, np.moveaxis(want, 0, -1), rtol=1e-12)
    # transforming it again is refused (it is assembled at run time), never wrong
    with pytest.raises(astjax.errors.TransformError):
        astjax.grad(lambda w: np.sum(astjax.vmap(j, in_axes=(0, None))(xs, w)))(w)
    with pytest.raises(astjax.errors.TransformError):
        astjax.jacfwd(astjax.vmap(j, in_axes=(0, None)), argnums=1)(xs, w)


def test_vjp_and_linearize_functions_called_inside_transformed_code():
    """They stand for generated code on their residuals: inlined, so derivatives flow
    (this was a silent zero gradient through vjp_fn)."""
    rng = np.random.default_rng(9)
    x, w = rng.standard_normal(3), rng.standard_normal((3, 2))
    _, vjp_fn = astjax.vjp(pb.layer, x, w)
    _, f_jvp = astjax.linearize(pb.layer, x, w)
    c = rng.standard_normal(2)

    def through_vjp(c):
        return np.sum(vjp_fn(c)[1] ** 2)

    def through_lin(t):
        return np.sum(np.sin(f_jvp(t, w)))

    for f, at in ((through_vjp, c), (through_lin, x)):
        want = _fd_grad(f, (at,), 0)
        np.testing.assert_allclose(astjax.grad(f)(at), want, rtol=1e-6, atol=1e-9)
        _, t = astjax.jvp(f, (at,), (np.ones_like(at),))
        np.testing.assert_allclose(t, np.sum(want), rtol=1e-6)
    np.testing.assert_allclose(astjax.jit(vjp_fn)(c)[0], vjp_fn(c)[0], rtol=1e-13)
    np.testing.assert_allclose(astjax.jit(f_jvp)(x, w), f_jvp(x, w), rtol=1e-13)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_jit_and_vmap_in_every_order_with_derivatives(case):
    """grad(jit(vmap)), vmap(jit(grad)), jit(vmap(grad)): jit between the two."""
    name, fun, in_axes, out_axes, make, kind = case
    args, _, ws, vf, loss_outside, _, _ = _setup(case)
    ref = _ref_loss(case, ws, kind)
    jvf = astjax.jit(vf)
    loss = pb.make_losses_of(jvf, ws, kind)
    _close(astjax.grad(loss, argnums=0)(*args), _fd_grad(ref, args, 0), "grad(jit(vmap))")
    g = astjax.grad(pb.EXAMPLE_LOSSES[name], argnums=0)
    want = reference(g, args, in_axes, 0)
    for composed in (astjax.vmap(astjax.jit(g), in_axes=in_axes),
                     astjax.jit(astjax.vmap(g, in_axes=in_axes))):
        assert_tree_close(composed(*args), want, rtol=1e-10, atol=1e-12)


def test_lax_control_flow_through_vmap_with_axes():
    rng = np.random.default_rng(10)
    xs = rng.standard_normal((4, 3))
    got = astjax.vmap(pb.lax_scan_pair, in_axes=1, out_axes=(1, -1))(xs)
    want = reference(pb.lax_scan_pair, (xs,), 1, (1, -1))
    assert_tree_close(got, want, rtol=1e-12)
    want_g = _fd_grad(pb.lax_through_vmap, (xs,), 0)
    np.testing.assert_allclose(astjax.grad(pb.lax_through_vmap)(xs), want_g, rtol=1e-6)
    np.testing.assert_allclose(astjax.jit(astjax.grad(pb.lax_through_vmap))(xs), want_g,
                               rtol=1e-6)
    per = astjax.vmap(astjax.grad(pb.lax_through_vmap))(np.stack([xs, 2 * xs]))
    np.testing.assert_allclose(per[0], want_g, rtol=1e-6)
    # third order: jvp of grad of grad along a direction, against differences of grad(grad)
    v = rng.standard_normal(xs.shape)

    def second(a):
        return np.sum(astjax.grad(pb.lax_through_vmap)(a) * v)
    g2 = astjax.grad(second)(xs)
    np.testing.assert_allclose(g2, _fd_grad(second, (xs,), 0), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_second_and_third_order_through_vmap(case):
    """grad of (a directional second derivative) through vmap, against differences of
    the second derivative; value_and_grad under vmap with a pytree out_axes."""
    name, fun, in_axes, out_axes, make, kind = case
    args, _, ws, _, _, loss_inside, _ = _setup(case)
    rng = np.random.default_rng(11)
    a0 = args[0]
    v = tree_util.tree_map(lambda leaf: rng.standard_normal(np.shape(leaf)), a0)

    def directional(a, b):
        g = astjax.grad(loss_inside)(a, b)
        return pb.inner(g, v)

    want = _fd_grad(directional, args, 0)
    _close(astjax.grad(directional)(*args), want, "grad(grad)")
    # vmap of value_and_grad, the (value, gradient) pair placed by a pytree out_axes
    vg = astjax.value_and_grad(pb.EXAMPLE_LOSSES[name])
    got = astjax.vmap(vg, in_axes=in_axes, out_axes=(0, 1))(*args)
    assert_tree_close(got, reference(vg, args, in_axes, (0, 1)), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("objective", ["gp_objective_nested_defs", "gp_objective_lambdas"])
def test_nested_vmap_of_local_functions_is_right_or_refused(objective, gp_data):
    """Functions made inside a transformed function and handed to vmap (issue 11 makes
    them work): today either the right gradient or a located TransformError, never a
    wrong number."""
    ell, xs = gp_data
    f = getattr(pb, objective)
    checks = [(lambda: f(ell, xs), pb.gp_objective_loop(ell, xs)),
              (lambda: astjax.grad(f)(ell, xs),
               _fd_scalar(lambda e: pb.gp_objective_loop(e, xs), ell))]
    for run, want in checks:
        try:
            got = run()
        except astjax.errors.TransformError as err:
            assert err.location is not None and "batched.py" in err.location.filename
            continue
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_axis_size_inside_transformed_code():
    rng = np.random.default_rng(12)
    x, w = rng.standard_normal((B, 3)), rng.standard_normal((3, 2))
    vf = astjax.vmap(pb.layer, in_axes=(0, None), axis_size=B)
    g = astjax.grad(lambda w: np.sum(vf(x, w)))(w)
    want = _fd_grad(lambda w: np.sum(reference(pb.layer, (x, w), (0, None))), (w,), 0)
    np.testing.assert_allclose(g, want, rtol=1e-6)
    wrong = astjax.vmap(pb.layer, in_axes=(0, None), axis_size=B + 1)
    with pytest.raises(Exception, match="axis_size"):
        astjax.grad(lambda w: np.sum(wrong(x, w)))(w)
    # nothing batched: axis_size copies
    vc = astjax.vmap(pb.layer, in_axes=(None, None), axis_size=2)
    out = astjax.jvp(lambda w: vc(x[0], w), (w,), (np.ones_like(w),))[1]
    one = astjax.jvp(lambda w: pb.layer(x[0], w), (w,), (np.ones_like(w),))[1]
    np.testing.assert_allclose(out, np.stack([one, one]), rtol=1e-12)
