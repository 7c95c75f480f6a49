"""Derivatives through complex values, in JAX's convention.

A real loss of complex intermediates (``np.abs(z) ** 2``, ``np.vdot(z, z)``, ``np.imag``
of a product) used to get silently wrong gradients: ``np.imag`` had no cotangent,
``np.conj``'s was not conjugated, ``np.abs``/``np.sign``/``np.angle`` used their real
rules, ``np.vdot``/``np.vecdot``/``np.correlate`` forgot the argument they conjugate,
``np.var``/``np.std`` and the 2-norm took ``d * d`` for ``|d|^2``.

The convention is JAX's: a cotangent is the transpose of the tangent map under the
pairing ``Re(sum(a * b))`` (no conjugate); for a real loss ``L`` of ``z = a + ib`` the
cotangent is ``dL/da - i dL/db``.  Every differentiable primitive of the registry that
NumPy evaluates on complex arrays is checked against central finite differences in
that pairing, in reverse and forward mode, or must refuse complex input with an
``UnsupportedDerivativeError`` (the Hermitian linear algebra, whose rules are written
for real matrices).  Programs check the transformations end to end.
"""
import builtins
import warnings

import numpy as np
import pytest

import astjax
from astjax.errors import UnsupportedDerivativeError
from conftest import fd_vector_grad
import test_rules_jvp as J
import test_rules_vjp as T

EPS = 1e-6

# The rules that refuse complex input (what they return is wrapped in ra.real_only).
REFUSED = {"cholesky", "eigh", "eigvalsh", "qr", "svd", "svdvals", "pinv", "lstsq",
           "slogdet", "cov", "corrcoef", "nan_to_num",
           "eig", "eigvals",                  # complex eigenvalues (ra.eig_real)
           "norm_vjp", "norm_jvp"}            # the norm to second order


def _complexify(x, rng):
    if isinstance(x, np.ndarray) and x.dtype == np.float64:
        return x + 0.5j * rng.standard_normal(x.shape)
    if isinstance(x, list):
        return [_complexify(v, rng) for v in x]
    if isinstance(x, tuple) and not hasattr(x, "_fields"):
        return tuple(_complexify(v, rng) for v in x)
    return x


def _pair(a, b):
    """JAX's pairing of a cotangent with a tangent: ``Re(sum(a * b))``."""
    if a is None or b is None:
        return 0.0
    if isinstance(b, (list, tuple)):
        if isinstance(a, np.ndarray):
            a = list(a)
        return builtins.sum(_pair(x, y) for x, y in zip(a, b))
    if isinstance(b, dict):
        return builtins.sum(_pair(a.get(k), b[k]) for k in b)
    return float(np.real(np.sum(T._wide(a) * T._wide(b))))


def complex_point(name):
    """(prim, bound values, result) at a complex version of the registry sample, or
    None where NumPy does not evaluate the primitive on complex arrays (or no
    differentiated operand is complex)."""
    prim = T.TABLE[name]
    rng = np.random.default_rng(0)
    args, kwargs = prim.sample(rng)
    args = _complexify(list(args), rng)
    kwargs = {k: _complexify(v, rng) for k, v in kwargs.items()}
    values = T.bind(prim, args, kwargs)
    if not any(np.iscomplexobj(values[d]) for d in prim.diff
               if isinstance(values[d], np.ndarray)):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with np.errstate(all="raise"):
                ans = T.call_impl(prim, values)
    except Exception:  # noqa: BLE001  (NumPy refuses complex here: nothing to check)
        return None
    return prim, values, ans


NAMES = [n for n in T.DIFF if n not in T.RAISES | T.IMPLICIT]
POINTS = {n: complex_point(n) for n in NAMES}
CHECKED = sorted(n for n, p in POINTS.items() if p is not None)


def test_the_sweep_reaches_most_of_the_registry():
    assert len(CHECKED) >= 200, len(CHECKED)
    assert REFUSED - {"eig", "eigvals", "norm_vjp", "norm_jvp"} <= set(CHECKED)


@pytest.mark.parametrize("name", CHECKED)
def test_vjp_of_complex_input_is_the_transpose(name):
    prim, values, ans = POINTS[name]
    rng = np.random.default_rng(1)
    g = T.direction(np.asarray(ans) if isinstance(ans, complex) else ans, rng)
    if name in REFUSED:
        with pytest.raises(UnsupportedDerivativeError, match="complex"):
            T.call_template(prim, g, ans, values)
        return
    cots = T.call_template(prim, g, ans, values)
    for d, cot in zip(prim.diff, cots):
        primal = values[d]
        v = T.direction(primal, rng)
        fp = T.call_impl(prim, {**values, d: T.axpy(primal, v, EPS)})
        fm = T.call_impl(prim, {**values, d: T.axpy(primal, v, -EPS)})
        lhs = _pair(g, T.diff_quotient(fp, fm, EPS))
        rhs = _pair(cot, v)
        scale = builtins.max(abs(lhs), abs(rhs), 1e-3)
        assert abs(lhs - rhs) <= 1e-5 * scale + 1e-8, \
            f"{name}: vjp for {d}: finite differences {lhs!r}, rule {rhs!r}"


@pytest.mark.parametrize("name", [n for n in CHECKED if n in J.JVP])
def test_jvp_of_complex_input_matches_finite_differences(name):
    prim, values, ans = POINTS[name]
    rng = np.random.default_rng(2)
    tangents = {d: T.direction(values[d], rng) for d in prim.diff}
    if name in REFUSED or name == "clip":
        # (np.clip orders complex numbers lexicographically: refused or a zero tangent)
        try:
            J.call_jvp(prim, ans, values, tangents)
        except (UnsupportedDerivativeError, TypeError):
            return
        if name in REFUSED:
            pytest.fail(f"{name}: complex input should be refused")
        return
    jv = J.call_jvp(prim, ans, values, tangents)
    J.assert_close(jv, J.finite_difference(prim, values, tangents), name)


# ------------------------------------------------------------------- programs

X = np.array([0.4, -0.9, 1.3, 0.7])
W = np.array([1.0 + 2.0j, -0.5 + 0.25j, 0.3 - 1.1j, 2.0 + 0.0j])


def abs_squared(x):
    z = x * W + 0.3j
    return np.sum(np.abs(z) ** 2)


def conj_product(x):
    z = x + 1j * x ** 2
    return np.real(np.sum(z * np.conj(z) * W))


def imag_of_square(x):
    return np.sum(np.imag((x * W) ** 2))


def phase(x):
    return np.sum(np.angle(x * W + 0.5) * x)


def vdot_energy(x):
    z = np.exp(1j * x) * W
    return np.real(np.vdot(z, W * x))


def unit_phasor(x):
    return np.real(np.sum(np.sign(x * W + 0.2j) * np.conj(W)))


def complex_log(x):
    return np.sum(np.imag(np.log(x + 2.0j)) + np.abs(np.sqrt(x * W + 1.0)))


def spread(x):
    z = x * W
    return np.var(z) + np.std(z * 1j + x)


def normalized(x):
    z = x * W
    return np.real(np.sum(z / np.linalg.norm(z) * W))


def correlation(x):
    z = x * W
    return np.real(np.sum(np.correlate(z, np.conj(W[:2]) + x[:2], "full") * W[0]))


def conj_method(x):
    z = (x * W).conj()
    return np.real(np.sum(z * (3 + 1j))) + np.sum(z.imag * x)


def wave_packet(x):
    psi = np.exp(1j * 3.0 * x) * np.exp(-x ** 2)
    psi = psi / np.sqrt(np.sum(np.abs(psi) ** 2))
    return np.real(np.sum(np.conj(psi) * x * psi))


PROGRAMS = [abs_squared, conj_product, imag_of_square, phase, vdot_energy, unit_phasor,
            complex_log, spread, normalized, correlation, conj_method, wave_packet]

TRANSFORMS = {
    "grad": lambda f: astjax.grad(f)(X),
    "jit_grad": lambda f: astjax.jit(astjax.grad(f))(X),
    "vjp": lambda f: astjax.vjp(f, X)[1](1.0)[0],
    "jacrev": lambda f: astjax.jacrev(f)(X),
    "jacfwd": lambda f: astjax.jacfwd(f)(X),
}


@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_real_losses_of_complex_values(f, transform):
    want = fd_vector_grad(f, X)
    got = TRANSFORMS[transform](f)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_forward_mode_and_vmap_of_grad(f):
    v = np.cos(X * 1.7)
    want = fd_vector_grad(f, X)
    np.testing.assert_allclose(astjax.jvp(f, (X,), (v,))[1], want @ v, rtol=1e-6, atol=1e-8)
    rows = np.stack([X, X[::-1] * 0.5])
    np.testing.assert_allclose(astjax.vmap(astjax.grad(f))(rows),
                               np.stack([fd_vector_grad(f, r) for r in rows]),
                               rtol=1e-6, atol=1e-8)


def test_second_order_through_abs_squared():
    h = astjax.hessian(abs_squared)(X)
    want = np.array([(fd_vector_grad(abs_squared, X + e) - fd_vector_grad(abs_squared, X - e))
                     / 2e-4 for e in np.eye(4) * 1e-4])
    np.testing.assert_allclose(h, want, rtol=1e-4, atol=2e-5)


def cholesky_of_complex(x):
    a = np.outer(x * W, np.conj(x * W)) + np.eye(4)
    return np.real(np.sum(np.linalg.cholesky(a)))


def test_a_rule_written_for_real_matrices_refuses_complex_at_the_users_line():
    with pytest.raises(UnsupportedDerivativeError) as err:
        astjax.grad(cholesky_of_complex)(X)
    text = str(err.value)
    assert "np.linalg.cholesky for complex input" in text
    assert "test_complex_rules.py" in text and "np.linalg.cholesky(a)" in text


def test_real_inputs_keep_their_rules_and_dtypes():
    # abs at 0 is +1 as in JAX; float32 stays float32; sign and angle have zero
    # derivatives on the reals
    x = np.array([0.0, -1.5, 2.0], dtype=np.float32)
    g = astjax.grad(lambda v: np.sum(np.abs(v)))(x)
    assert g.dtype == np.float32 and np.array_equal(g, [1.0, -1.0, 1.0])
    assert np.array_equal(astjax.grad(lambda v: np.sum(np.sign(v) * v))(x), np.sign(x))
    with warnings.catch_warnings():
        warnings.simplefilter("error")    # no ComplexWarning on the way
        g = astjax.grad(lambda v: np.sum(np.real(v * (1 + 2j)) ** 2))(x.astype(np.float64))
    np.testing.assert_allclose(g, 2 * x)


# ------------------------------------------------- complex inputs and holomorphic=True

Z = np.array([0.4 + 0.3j, -0.9 + 1.1j, 1.3 - 0.2j])


def real_loss_of_complex_input(z):
    return np.sum(np.abs(z) ** 2 * np.real(z) + np.angle(z) * np.imag(z))


def holomorphic_sum(z):
    return np.sum(np.sin(z) * z)


def holomorphic_map(z):
    return np.exp(z) * z ** 2


def test_grad_of_complex_input_is_dL_da_minus_i_dL_db():
    f = real_loss_of_complex_input
    h = 1e-6
    want = np.array([(f(Z + h * e) - f(Z - h * e)) / (2 * h)
                     - 1j * (f(Z + 1j * h * e) - f(Z - 1j * h * e)) / (2 * h)
                     for e in np.eye(3)])
    np.testing.assert_allclose(astjax.grad(f)(Z), want, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(astjax.jit(astjax.grad(f))(Z), want, rtol=1e-6, atol=1e-8)


def test_holomorphic_derivatives_are_f_prime():
    d = np.cos(Z) * Z + np.sin(Z)
    np.testing.assert_allclose(astjax.grad(holomorphic_sum, holomorphic=True)(Z), d)
    value, g = astjax.value_and_grad(holomorphic_sum, holomorphic=True)(Z)
    np.testing.assert_allclose(value, holomorphic_sum(Z))
    np.testing.assert_allclose(g, d)
    dm = np.diag(np.exp(Z) * (Z ** 2 + 2 * Z))
    np.testing.assert_allclose(astjax.jacfwd(holomorphic_map, holomorphic=True)(Z), dm)
    np.testing.assert_allclose(astjax.jacrev(holomorphic_map, holomorphic=True)(Z), dm)
    hess = astjax.hessian(lambda z: np.sum(z ** 3), holomorphic=True)(Z)
    np.testing.assert_allclose(hess, np.diag(6 * Z))


def test_ambiguous_complex_derivatives_are_refused_as_in_jax():
    from astjax.errors import ArgumentError
    with pytest.raises(ArgumentError, match="requires real-valued inputs"):
        astjax.jacfwd(holomorphic_map)(Z)
    with pytest.raises(ArgumentError, match="requires real-valued outputs"):
        astjax.jacrev(holomorphic_map)(Z)
    with pytest.raises(ArgumentError, match="requires real-valued outputs"):
        astjax.jacrev(lambda x: x * (1 + 2j))(X)   # the imaginary part would be lost
    with pytest.raises(ArgumentError, match="requires inputs with complex dtype"):
        astjax.grad(holomorphic_sum, holomorphic=True)(X)
    with pytest.raises(ArgumentError, match="requires outputs with complex dtype"):
        astjax.grad(lambda z: np.sum(np.abs(z)), holomorphic=True)(Z)
    with pytest.raises(TypeError, match="real floating-point output"):
        astjax.grad(holomorphic_sum)(Z)
    # real inputs with complex outputs: forward mode is unambiguous
    np.testing.assert_allclose(astjax.jacfwd(lambda x: x * (1 + 2j))(X),
                               np.eye(4) * (1 + 2j))
