"""Forward-mode derivatives of functions that skip NaN entries, with NaNs in the data.

``np.nanmax(D * x)`` skips the entries where the data ``D`` is NaN; their tangents
``D * t`` are NaN too.  Forward rules that multiplied those tangents by a zero weight
(``0 * nan``) instead of selecting them out gave NaN jvps and jacfwd rows where the
function is smooth (nanmax, nanmin, nanvar, nanstd, fmax, fmin).  Every NaN-skipping
function is swept here over its axis forms under jvp, jacfwd, jit(jvp) and
vmap(jvp), against central differences (finite: the function skips the same entries
at x - h and x + h) and the reverse-mode gradient.
"""
import numpy as np
import pytest

import astjax

DATA = np.array([[1.0, np.nan, 2.0, 0.7], [0.5, 0.3, -1.0, np.nan], [1.5, -0.2, 0.4, 0.9]])
X = np.array([[0.2, 0.4, 0.65, 1.1], [0.1, 0.7, 0.9, 0.3], [0.8, 0.5, 1.3, 0.6]])

CASES = {
    "nanmax": lambda x: np.nanmax(DATA * x),
    "nanmax_axis": lambda x: np.nanmax(DATA * x, axis=1),
    "nanmin_axis0": lambda x: np.nanmin(DATA * x, axis=0, keepdims=True),
    "nanstd": lambda x: np.nanstd(DATA * x),
    "nanstd_axis": lambda x: np.nanstd(DATA * x, axis=1, ddof=1),
    "nanvar_axis0": lambda x: np.nanvar(DATA * x, axis=0),
    "nanmean": lambda x: np.nanmean(DATA * x, axis=1),
    "nansum": lambda x: np.nansum(DATA * x ** 2),
    "nanprod": lambda x: np.nanprod(DATA * x, axis=0),
    "nancumsum": lambda x: np.nancumsum(DATA * x, axis=1),
    "nancumprod": lambda x: np.nancumprod(DATA * x, axis=1),
    "fmax": lambda x: np.fmax(DATA * x, 0.5),
    "fmin": lambda x: np.fmin(0.3, DATA * x),
    "fmax_both": lambda x: np.fmax(DATA * x, DATA[:, ::-1] * x),
    "nan_to_num": lambda x: np.nan_to_num(DATA * x, nan=2.0) * x,
}


def _fd(f, x, t, eps=1e-6):
    return (np.asarray(f(x + eps * t)) - np.asarray(f(x - eps * t))) / (2 * eps)


@pytest.mark.parametrize("name", list(CASES))
def test_forward_derivatives_skip_nan_entries(name):
    f = CASES[name]
    t = np.random.default_rng(3).normal(size=X.shape)
    expected = _fd(f, X, t)
    assert np.all(np.isfinite(expected))
    _, tangent = astjax.jvp(f, (X,), (t,))
    np.testing.assert_allclose(tangent, expected, rtol=1e-6, atol=1e-8)
    _, tangent_jit = astjax.jit(lambda x, t: astjax.jvp(f, (x,), (t,)))(X, t)
    np.testing.assert_allclose(tangent_jit, tangent, rtol=1e-12)
    jac = np.asarray(astjax.jacfwd(f)(X))
    out_shape = np.shape(f(X))
    np.testing.assert_allclose(np.tensordot(jac, t, axes=2).reshape(out_shape), expected,
                               rtol=1e-6, atol=1e-8)
    ts = np.stack([t, -2.0 * t])
    batched = astjax.vmap(lambda t: astjax.jvp(f, (X,), (t,))[1])(ts)
    np.testing.assert_allclose(batched, np.stack([tangent, -2.0 * np.asarray(tangent)]),
                               rtol=1e-12, atol=1e-14)
    # reverse mode agrees (the loss: the outputs weighted 1, 2, ...) where the data is a
    # number: at a NaN entry the chain rule multiplies by it, as in JAX
    w = np.arange(1.0, np.size(expected) + 1).reshape(out_shape)
    g = astjax.grad(lambda x: np.sum(np.asarray(f(x)) * w))(X)
    known = ~np.isnan(DATA)
    if name in ("nan_to_num", "fmax_both"):
        return   # (x also reaches the output past a NaN factor: NaN there, as in JAX)
    np.testing.assert_allclose(np.sum(g[known] * t[known]), np.sum(expected * w), rtol=1e-6)


@pytest.mark.parametrize("fn", [np.fmax, np.fmin])
def test_fmax_fmin_pass_the_whole_derivative_to_the_number(fn):
    """``np.fmax(1.0, nan)`` is 1.0: its derivative is all the number's (the weight
    of a comparison with NaN was 0 on both sides, in reverse and forward mode)."""
    def f(x, y):
        return np.sum(fn(x, y) * np.array([1.0, 2.0, 3.0]))

    x = np.array([1.0, np.nan, 0.5])
    y = np.array([np.nan, 2.0, 0.7])
    gx, gy = astjax.grad(f, argnums=(0, 1))(x, y)
    smaller = fn is np.fmin
    np.testing.assert_array_equal(gx, [1.0, 0.0, 3.0 if smaller else 0.0])
    np.testing.assert_array_equal(gy, [0.0, 2.0, 0.0 if smaller else 3.0])
    _, tangent = astjax.jvp(lambda x: fn(x, y), (x,), (np.ones(3),))
    np.testing.assert_array_equal(tangent, [1.0, 0.0, 1.0 if smaller else 0.0])
