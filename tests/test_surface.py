"""The NumPy surface end to end: programs written the way users write them.

Each program is checked under ``grad`` (against central finite differences in
float64), ``jvp`` (against the gradient along a random direction) and ``vmap``
(against a Python loop), so every form below has a rule in every mode.  The
classes come from issue 10: index-expression builders (``np.r_``/``np.c_``),
``np.linspace`` in its endpoints, ``np.einsum`` in every calling form, the stacking
functions applied to one array, ``eigh``/``eigvalsh``/``cholesky`` of non-symmetric
input (NumPy reads one triangle), tuple-returning functions (svd, qr, eig, divmod,
modf, np.gradient on n-D input) and the internal errors of the issue (``np.kron``
with a Python float, ``x ** 0`` at a zero base, short ``np.pad`` widths).
"""
import numpy as np
import pytest
from conftest import assert_tree_close, numerical_grad

import astjax
from astjax.errors import AstjaxError

RNG = np.random.default_rng(10)
W33 = RNG.standard_normal((3, 3))
W53 = RNG.standard_normal((5, 3))
W55 = RNG.standard_normal((5, 5))
W9 = RNG.standard_normal(9)


def _x33():
    return np.random.default_rng(1).standard_normal((3, 3))


def _x53():
    return np.random.default_rng(2).standard_normal((5, 3))


def _v3():
    return np.random.default_rng(3).standard_normal(3)


# ---------------------------------------------------------------- programs


def r_builder(v):
    return np.sum(np.r_[v, 2.0 * v, 1.5, 0:3] * W9[:10 - 1] if False else
                  np.r_[v, 2.0 * v, 1.5, 0:2] ** 2)


def r_directive(x):
    return np.sum(np.r_["0,2", x, x * x] * W33[0])


def c_builder(v):
    return np.sum(np.c_[v, v * v, np.ones(3)] * W33)


def linspace_ends(a):
    return np.sum(np.linspace(a[0], a[1], 7) ** 2) + np.sum(np.linspace(a, 2 * a, 4, axis=-1)
                                                           * a[2])


def linspace_open(a):
    return np.sum(np.sin(np.linspace(a[0], a[1] * a[2], 5, endpoint=False)))


def logspace_ends(a):
    return np.sum(np.logspace(a[0], a[1], 5, base=2.0))


def einsum_string(x):
    return np.sum(np.einsum("ij,jk->ik", x, x) * W33) + np.einsum("ii", x) + np.sum(
        np.einsum("ij,jk", x, W33) ** 2)


def einsum_ellipsis(x):
    return np.sum(np.einsum("...ij,...jk->...ik", x[None], x) ** 2)


def einsum_sublist_one(x):
    return np.sum(np.einsum(x, [0, 1], [1]) ** 2)


def einsum_sublist_many(x):
    return np.sum(np.einsum(x, [0, 1], x, [1, 2], W33, [2, 0], [0]) ** 2) + np.sum(
        np.einsum(x, [Ellipsis, 0], x, [Ellipsis, 0]))


def vstack_one(x):
    return np.sum(np.vstack(x) * W33)


def hstack_one(x):
    return np.sum(np.hstack(x) ** 2 * W9)


def column_stack_one(x):
    return np.sum(np.column_stack(x) * W33)


def stacks_of_lists(x):
    return np.sum(np.vstack([x, x * 2]) ** 2) + np.sum(np.hstack([x[0], x[1]]) * W33[0, :1]) \
        + np.sum(np.dstack([x, x]) ** 2)


def eigh_lower(x):
    w, v = np.linalg.eigh(x)
    return np.sum(w * np.arange(3.0)) + np.sum(np.abs(v[:, 0]))


def eigh_upper(x):
    w, v = np.linalg.eigh(x + 3 * np.eye(3), UPLO="U")
    return np.sum(w ** 2) + np.sum(v[0] ** 2 * w)


def eigvalsh_any(x):
    return np.sum(np.linalg.eigvalsh(x) * np.arange(1.0, 4.0)) + np.sum(
        np.linalg.eigvalsh(x, UPLO="U") ** 2)


def cholesky_triangle(x):
    a = x + 4 * np.eye(3)
    return np.sum(np.linalg.cholesky(a) * W33) + np.sum(np.linalg.cholesky(a, upper=True) ** 2)


def svd_default(x):
    u, s, vt = np.linalg.svd(x)
    return np.sum(s * np.arange(1.0, 4.0)) + np.sum(np.abs(u[:, :3]) * W53) + np.sum(
        np.abs(vt) * W33)


def svd_reduced(x):
    u, s, vt = np.linalg.svd(x, full_matrices=False)
    return np.sum(np.abs(u) * W53) + np.sum(s ** 2) + np.sum(np.abs(vt) * W33)


def svd_values(x):
    return np.sum(np.linalg.svd(x, compute_uv=False) ** 3) + np.sum(np.linalg.svdvals(x))


def qr_forms(x):
    q, r = np.linalg.qr(x)
    return np.sum(q * W53) + np.sum(r ** 2) + np.sum(np.linalg.qr(x, mode="r") * W33)


def eig_real(x):
    # np.real: NumPy 2.5 returns eig's and eigvals' results complex even when real
    w, v = np.linalg.eig(x @ x.T + 3 * np.eye(3))
    return np.sum(np.real(w) * np.arange(3.0)) + np.sum(np.abs(v[0])) + np.sum(np.real(
        np.linalg.eigvals(x @ x.T + 3 * np.eye(3))) ** 2)


def pinv_cross(x):
    return np.sum(np.linalg.pinv(x) * W53.T) + np.sum(np.cross(x[:3], x[2:]) ** 2)


def divmod_modf(x):
    q, r = divmod(x * 3.0, 0.7)
    frac, whole = np.modf(x * 2.5)
    q2, r2 = np.divmod(x, 1.3)
    return np.sum(r ** 2 + q * x) + np.sum(frac * whole + frac ** 2) + np.sum(r2 * W33)


def gradient_nd(x):
    gx, gy = np.gradient(x)
    g1 = np.gradient(x[0], 0.5)
    ga = np.gradient(x, np.array([0.0, 0.3, 1.0]), axis=0, edge_order=2)
    return np.sum(gx * W33) + np.sum(gy ** 2) + np.sum(g1 ** 2) + np.sum(ga * W33)


def shifts_and_friends(x):
    y = np.fft.fftshift(x, axes=0) + np.fft.ifftshift(x)
    z = np.rollaxis(x[None], 2) + np.partition(x, 1, axis=0)[None]
    s = np.select([x > 0.5, x < -0.5], [x * 2.0, x ** 2], default=x)
    return np.sum(y * W33) + np.sum(z ** 2) + np.sum(s * W33) + np.sum(
        np.append(x, x[0] * 2.0) ** 2) + np.sum(np.vstack([x, x]) * 0.5)


def nan_to_num_angle(x):
    y = np.where(x > 1.0, np.inf, x)
    return np.sum(np.nan_to_num(y, posinf=3.0) ** 2) + np.sum(np.angle(x) * x) + np.sum(
        np.real_if_close(x) ** 2)


def kron_python_float(x):
    return np.sum(np.kron(2.0, x) * W33) + np.sum(np.kron(x, 1.5) ** 2) + np.sum(
        np.kron(x[0], x[1]) ** 2)


def power_zero(x):
    return np.sum(x ** 0) + np.sum(x ** 0.0 * x) + np.sum(np.abs(x) ** 1 * 2.0)


def pad_short(x):
    return np.sum(np.pad(x, (3,), "constant") ** 2) + np.sum(np.pad(x, ((1, 2),), "edge") * 2.0) \
        + np.sum(np.pad(x, (1, 2), "reflect") ** 2) + np.sum(np.pad(x, 2) ** 3)


def quantiles(x):
    return np.sum(np.quantile(x, [0.1, 0.5, 0.85], axis=1) * W33) + np.percentile(x, 37.5) \
        + np.sum(np.quantile(x, 0.3, axis=0, keepdims=True) ** 2) \
        + np.sum(np.percentile(x, [10, 90], axis=0) * W33[:2])   # (levels in a list)


def nan_reductions(x):
    y = np.where(x > 1.2, np.nan, x)
    return np.sum(np.nanvar(y, axis=0) + np.nanstd(y, axis=1, ddof=1)) + np.nanprod(y * 0.5) \
        + np.sum(np.nancumsum(y, axis=1) * W33)


def matrix_powers(x):
    return np.sum(np.linalg.matrix_power(x * 0.5, 4) * W33) + np.sum(
        np.linalg.matrix_power(x, 1) ** 2) + np.sum(np.linalg.matrix_power(x, 0))


def averages(x):
    w = np.abs(x[0]) + 0.5
    return np.sum(np.average(x, axis=1, weights=w) ** 2) + np.average(x) + np.sum(
        np.average(x, axis=0, weights=x * x + 1.0) * W33[0])


def chains_and_differences(x):
    return np.sum(np.linalg.multi_dot([x, x * 0.5, W33, x[0]]) ** 2) + np.sum(
        np.ediff1d(x, to_begin=x[0, 0], to_end=[1.0, x[1, 1]]) ** 2)


def covariance(x):
    return np.sum(np.cov(x) * W33) + np.sum(np.cov(x, rowvar=False, ddof=0) ** 2) + np.cov(x[0])


XP = np.array([-1.0, -0.2, 0.4, 1.5])


def interpolation(x):
    return np.sum(np.interp(x * 0.9 + 0.05, XP, x[0, :3].repeat(2)[:4] ** 2) * W33) + np.sum(
        np.interp(x[1], XP, np.cos(XP), left=x[2, 0], right=-1.0) ** 2)


PROGRAMS = [
    (r_builder, _v3), (r_directive, _v3), (c_builder, _v3), (linspace_ends, _v3),
    (linspace_open, _v3), (logspace_ends, _v3), (einsum_string, _x33),
    (einsum_ellipsis, _x33), (einsum_sublist_one, _x33), (einsum_sublist_many, _x33),
    (vstack_one, _x33), (hstack_one, _x33), (column_stack_one, _x33),
    (stacks_of_lists, _x33), (eigh_lower, _x33), (eigh_upper, _x33), (eigvalsh_any, _x33),
    (cholesky_triangle, _x33), (svd_default, _x53), (svd_reduced, _x53), (svd_values, _x53),
    (qr_forms, _x53), (eig_real, _x33), (pinv_cross, _x53), (divmod_modf, _x33),
    (gradient_nd, _x33), (shifts_and_friends, _x33), (nan_to_num_angle, _x33),
    (kron_python_float, _x33), (power_zero, _x33), (pad_short, _x33), (quantiles, _x33),
    (nan_reductions, _x33), (matrix_powers, _x33), (averages, _x33),
    (chains_and_differences, _x33), (covariance, _x33), (interpolation, _x33),
]
IDS = [f.__name__ for f, _ in PROGRAMS]


@pytest.mark.parametrize("fun, make", PROGRAMS, ids=IDS)
def test_grad_matches_finite_differences(fun, make):
    x = make()
    assert_tree_close(astjax.grad(fun)(x), numerical_grad(fun, (x,)), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("fun, make", PROGRAMS, ids=IDS)
def test_jvp_matches_the_gradient(fun, make):
    x = make()
    t = np.random.default_rng(4).standard_normal(np.shape(x))
    out, tangent = astjax.jvp(fun, (x,), (t,))
    assert out == pytest.approx(fun(x), rel=1e-12)
    expected = float(np.sum(numerical_grad(fun, (x,)) * t))
    assert tangent == pytest.approx(expected, rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("fun, make", PROGRAMS, ids=IDS)
def test_vmap_of_grad_matches_a_loop(fun, make):
    x = make()
    xs = np.stack([x, x * 1.05, x * 0.9 + 0.01])
    got = astjax.vmap(astjax.grad(fun))(xs)
    expected = np.stack([astjax.grad(fun)(xi) for xi in xs])
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-11)


# ---------------------------------------------------------------- structure


def test_stacking_one_array_gives_an_array_cotangent():
    x = _x33()
    g = astjax.grad(vstack_one)(x)
    assert isinstance(g, np.ndarray) and g.shape == x.shape
    np.testing.assert_allclose(g, W33)
    lst = [x[0], x[1]]
    g2 = astjax.grad(lambda xs: np.sum(np.vstack(xs) ** 2))(lst)
    assert isinstance(g2, list) and len(g2) == 2
    np.testing.assert_allclose(g2[1], 2 * x[1])


def test_eigh_reads_one_triangle():
    """The gradient of what NumPy computes: the triangle NumPy does not read gets 0."""
    x = _x33()
    g = astjax.grad(lambda a: np.sum(np.linalg.eigvalsh(a) ** 2))(x)
    assert np.all(np.triu(g, 1) == 0)
    g = astjax.grad(lambda a: np.sum(np.linalg.eigvalsh(a, UPLO="U") ** 2))(x)
    assert np.all(np.tril(g, -1) == 0)


def kron_of_a_scalar(s):
    return np.sum(np.kron(s, W33[:2, :2]) ** 2) + np.sum(np.kron(W33[0], s * 2.0))


def test_kron_differentiated_in_a_python_float():
    s = 1.5
    expected = (kron_of_a_scalar(s + 1e-6) - kron_of_a_scalar(s - 1e-6)) / 2e-6
    assert astjax.grad(kron_of_a_scalar)(s) == pytest.approx(expected, rel=1e-6)
    assert astjax.jvp(kron_of_a_scalar, (s,), (1.0,))[1] == pytest.approx(expected, rel=1e-6)
    got = astjax.vmap(astjax.grad(kron_of_a_scalar))(np.array([s, 2.0]))
    assert got[0] == pytest.approx(expected, rel=1e-6)


def test_power_with_a_zero_python_float_base():
    assert astjax.grad(lambda x: x ** 0)(0.0) == 0.0
    assert astjax.grad(lambda y: 0.0 ** y)(2.0) == 0.0
    assert astjax.grad(astjax.grad(lambda x: x ** 2))(0.0) == 2.0
    assert astjax.jvp(lambda x: x ** 0, (0.0,), (1.0,))[1] == 0.0


# ---------------------------------------------------------------- refusals


def qr_wide(x):
    q, r = np.linalg.qr(x.T)
    return np.sum(q) + np.sum(r)


def eig_complex(x):
    w, v = np.linalg.eig(x - x.T)
    return np.sum(np.abs(w))


def gradient_spacing(h):
    return np.sum(np.gradient(np.arange(4.0) ** 2, h))


def r_computed_slice(x):
    n = int(x[0] > 0) + 2
    return np.sum(np.r_[x, 0:n])


def quantile_level(q):
    return np.quantile(np.arange(5.0), q)


def matrix_power_negative(x):
    return np.sum(np.linalg.matrix_power(x + 3 * np.eye(3), -2))


def pad_value(c):
    return np.sum(np.pad(np.ones(3), 1, constant_values=c))


def diff_prepend(p):
    return np.sum(np.diff(np.arange(4.0) ** 2, prepend=p) ** 2)


def interp_knots(x):
    return np.sum(np.interp(0.5, x, np.array([0.0, 1.0, 4.0])))


@pytest.mark.parametrize("fun, arg", [(qr_wide, _x53), (eig_complex, _x33),
                                      (gradient_spacing, lambda: 0.5),
                                      (quantile_level, lambda: 0.3),
                                      (matrix_power_negative, _x33),
                                      (pad_value, lambda: 2.0), (diff_prepend, lambda: 1.5),
                                      (interp_knots, lambda: np.array([0.0, 0.4, 1.0]))],
                         ids=["qr-wide", "eig-complex", "gradient-spacing", "quantile-level",
                              "matrix-power-negative", "pad-value", "diff-prepend",
                              "interp-knots"])
def test_derivatives_without_a_unique_value_are_refused_in_every_mode(fun, arg):
    x = arg()
    with pytest.raises(AstjaxError, match="derivative"):
        astjax.grad(fun)(x)
    with pytest.raises(AstjaxError, match="derivative"):
        astjax.jvp(fun, (x,), (np.ones_like(x),))


def test_r_with_a_computed_slice_is_a_located_error():
    with pytest.raises(AstjaxError) as info:
        astjax.grad(r_computed_slice)(_v3())
    assert "test_surface.py" in str(info.value) and "slice" in str(info.value)


# ---------------------------------------------------------------- kinks: JAX's choices


def test_kinks_follow_jax():
    """Values JAX gives at points where NumPy's function has no derivative (checked
    against JAX 0.10 when these rules were written; JAX is not a test dependency)."""
    g = astjax.grad(lambda x: np.sum(np.copysign(x, -1.0)))(np.array([0.0, 2.0]))
    np.testing.assert_array_equal(g, [-1.0, -1.0])          # |x|'s slope at 0 is +1
    g = astjax.grad(lambda x: np.sum(np.angle(x)))(np.array([-1.0, 0.0, 2.0]))
    assert g[0] == 0 and np.isnan(g[1]) and g[2] == 0       # the jump of angle: nan
    g = astjax.grad(lambda x: np.sum(np.linalg.svd(x, compute_uv=False)))(np.eye(3))
    np.testing.assert_allclose(g, np.eye(3))                # equal singular values
    g = astjax.grad(lambda x: np.sum(np.linalg.eigh(x)[0] ** 2))(np.eye(3))
    np.testing.assert_allclose(g, 2 * np.eye(3))            # repeated eigenvalues
    g = astjax.grad(lambda x: np.median(x))(np.array([1.0, 2.0, 3.0, 4.0]))
    np.testing.assert_allclose(g, [0, 0.5, 0.5, 0])         # the two middle ones
    g = astjax.grad(lambda x: np.ptp(x))(np.array([2.0, 2.0, 1.0]))
    np.testing.assert_allclose(g, [0.5, 0.5, -1.0])         # ties share
