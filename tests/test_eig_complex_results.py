"""``np.linalg.eig``/``eigvals`` under NumPy 2.5, which returns their results complex
always (real eigenvalues included: numpy/numpy#30411), where earlier NumPy returns
real arrays when every imaginary part is zero.  astjax's rules read such complex
results as real (a real matrix's simple real eigenvalues stay real under a real
perturbation: the imaginary parts have zero derivative) and still refuse genuinely
complex eigenvalues.  Where NumPy is older, its functions are swapped for ones
returning complex results the way 2.5 does, after each transformation's code was
made (astjax resolves ``np.linalg.eig`` by identity when it generates code; the
generated code looks it up when it runs)."""
from __future__ import annotations

import tempfile

import numpy as np
import pytest

import astjax
from astjax.errors import UnsupportedDerivativeError
from conftest import load_source_module, numerical_grad

SOURCE = '''
import numpy as np


def eig_loss(a):
    w, v = np.linalg.eig(a)
    return np.sum(np.real(w) ** 2) + np.sum(np.real(v) ** 3)


def eigvals_loss(a):
    return np.sum(np.real(np.linalg.eigvals(a)) * np.arange(3.0))


def eig_values(a):
    w, v = np.linalg.eig(a)
    return w


def eigvals_values(a):
    return np.linalg.eigvals(a)
'''
M = load_source_module(SOURCE, tempfile.mkdtemp(), "eig_complex_user")
A = np.array([[2.0, 1.0, 0.3], [0.5, 3.0, 0.2], [0.1, 0.4, 1.0]])
ROTATION = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 2.0]])   # +-i, 2


@pytest.fixture
def always_complex(monkeypatch):
    """A function that swaps in NumPy 2.5's always-complex eig and eigvals."""
    eig, eigvals = np.linalg.eig, np.linalg.eigvals
    result = type(eig(np.eye(1)))

    def complex_eig(a):
        w, v = eig(a)
        return result(w.astype(np.result_type(w, np.complex64)),
                      v.astype(np.result_type(v, np.complex64)))

    def complex_eigvals(a):
        w = eigvals(a)
        return w.astype(np.result_type(w, np.complex64))

    def swap():
        monkeypatch.setattr(np.linalg, "eig", complex_eig)
        monkeypatch.setattr(np.linalg, "eigvals", complex_eigvals)
    return swap


@pytest.mark.parametrize("name", ["eig_loss", "eigvals_loss"])
def test_gradients_of_complex_results_with_real_eigenvalues(name, always_complex):
    f = getattr(M, name)
    g, jg = astjax.grad(f), astjax.jit(astjax.grad(f))
    want = g(A)                                  # (real results: NumPy before 2.5)
    np.testing.assert_allclose(jg(A), want, rtol=1e-9, atol=1e-12)
    always_complex()
    assert np.iscomplexobj(np.linalg.eig(A)[0])
    for got in (g(A), jg(A)):
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(got, numerical_grad(f, (A,)), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["eig_values", "eigvals_values"])
def test_tangents_of_complex_results_are_complex(name, always_complex):
    f = getattr(M, name)
    t = np.cos(np.arange(9.0)).reshape(3, 3)

    def jvp(a):
        return astjax.jvp(f, (a,), (t,))
    _, want = jvp(A)
    always_complex()
    out, got = jvp(A)
    assert np.iscomplexobj(out) and got.dtype == out.dtype
    np.testing.assert_allclose(got.real, want, rtol=1e-9, atol=1e-12)
    assert not np.any(got.imag)
    fd = (f(A + 1e-6 * t) - f(A - 1e-6 * t)) / 2e-6
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-6)


def test_second_order_through_complex_results(always_complex):
    g = astjax.grad(M.eigvals_loss)
    hvp = astjax.jvp(g, (A,), (np.ones_like(A),))[1]
    always_complex()
    got = astjax.jvp(g, (A,), (np.ones_like(A),))[1]
    np.testing.assert_allclose(got, hvp, rtol=1e-8, atol=1e-10)
    fd = (g(A + 1e-5) - g(A - 1e-5)) / 2e-5
    np.testing.assert_allclose(got, fd, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["eig_loss", "eigvals_loss"])
def test_complex_eigenvalues_are_still_refused(name, always_complex):
    f = getattr(M, name)
    g = astjax.grad(f)
    g(A)
    always_complex()
    with pytest.raises(UnsupportedDerivativeError, match="complex eigenvalues"):
        g(ROTATION)


@pytest.mark.parametrize("name", ["eig", "eigvals"])
def test_rule_tables_with_complex_results(name, always_complex, monkeypatch):
    """The registry's finite-difference checks (vjp, jvp, and their agreement) of the two
    rules, with the primitives returning complex results as NumPy 2.5's do."""
    import dataclasses

    from test_rules_jvp import check_against_vjp, check_jvp
    from test_rules_vjp import check_vjp

    from astjax import primitives as P
    always_complex()
    swapped = {}
    for n in ("eig", "eigvals"):      # (the jvp rule of eigvals calls eig)
        swapped[getattr(np.linalg, n)] = dataclasses.replace(P.REGISTRY[n],
                                                             impl=getattr(np.linalg, n))
        monkeypatch.setitem(P.REGISTRY, n, swapped[getattr(np.linalg, n)])
    lookup = P.lookup_callable
    monkeypatch.setattr(P, "lookup_callable", lambda f: swapped.get(f) or lookup(f))
    prim = P.REGISTRY[name]
    args, kwargs = prim.sample(np.random.default_rng(0))
    assert np.iscomplexobj(np.linalg.eigvals(args[0]))
    for seed in (0, 1):
        args, kwargs = prim.sample(np.random.default_rng(seed))
        check_vjp(name, args, kwargs, seed)
        check_jvp(name, args, kwargs, seed)
        check_against_vjp(name, args, kwargs, seed)
