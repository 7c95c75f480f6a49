"""Reductions with ``where=`` and ``initial=`` (``astjax/masked_reductions.py``).

Every supported reduction, with a mask, a starting value or both, over each axis form,
as a function and as a method: values and dtypes equal NumPy's under jit and
eval_shape, gradients equal central differences (a masked entry's is zero), jvp equals
the directional difference, vmap equals a loop over examples with the mask batched or
shared.
"""
import numpy as np
import pytest

import astjax

RNG = np.random.default_rng(20261129)
X = RNG.normal(size=(3, 4)) + 1.5
MASK = np.array([[True, False, True, True], [False, True, True, False],
                 [True, True, False, True]])

# (name, a reduction of x and a mask m with the options under test)
CASES = [
    ("sum_where", lambda x, m: np.sum(x * x, where=m)),
    ("sum_where_axis", lambda x, m: np.sum(np.sin(x), axis=1, where=m)),
    ("sum_initial", lambda x, m: np.sum(x, axis=0, initial=2.5)),
    ("sum_both_keepdims", lambda x, m: np.sum(x ** 3, axis=0, keepdims=True, initial=1.0,
                                              where=m)),
    ("sum_row_mask", lambda x, m: np.sum(x, axis=1, where=m[0])),
    ("prod_where", lambda x, m: np.prod(x, axis=1, where=m)),
    ("prod_initial", lambda x, m: np.prod(x * 0.5, initial=3.0, where=m)),
    ("max_where", lambda x, m: np.max(x, axis=0, initial=-np.inf, where=m)),
    ("max_initial", lambda x, m: np.max(x, axis=1, initial=2.0)),
    ("min_where", lambda x, m: np.min(np.cos(x), initial=10.0, where=m)),
    ("amax_where", lambda x, m: np.amax(x, axis=(0, 1), initial=-5.0, where=m)),
    ("mean_where", lambda x, m: np.mean(x, where=m)),
    ("mean_where_axis", lambda x, m: np.mean(x ** 2, axis=0, where=m)),
    ("mean_where_keepdims", lambda x, m: np.mean(x, axis=-1, keepdims=True, where=m)),
    ("var_where", lambda x, m: np.var(x, where=m)),
    ("var_where_ddof", lambda x, m: np.var(x, axis=1, ddof=1, where=m)),
    ("std_where", lambda x, m: np.std(x, axis=0, where=m)),
    ("method_sum", lambda x, m: x.sum(axis=0, where=m)),
    ("method_mean", lambda x, m: (x * 2.0).mean(where=m)),
    ("method_max", lambda x, m: x.max(initial=0.0, where=m)),
    ("method_std", lambda x, m: x.std(ddof=1, where=m)),
    ("masked_loss", lambda x, m: np.mean((x - 1.0) ** 2, where=m) + np.sum(
        np.abs(x), where=~m) * 0.1),
]
IDS = [c[0] for c in CASES]


def _scalar(fn):
    return lambda x, m: np.sum(fn(x, m) * np.arange(1.0, np.size(fn(x, m)) + 1).reshape(
        np.shape(fn(x, m))))


def _fd(f, x, m, eps=1e-6):
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        out[i] = (f(x + e, m) - f(x - e, m)) / (2 * eps)
    return out


@pytest.mark.parametrize("name, fn", CASES, ids=IDS)
def test_values_and_dtypes_match_numpy(name, fn):
    for x in (X, X.astype(np.float32)):
        expected = fn(x, MASK)
        got = astjax.jit(fn)(x, MASK)
        np.testing.assert_allclose(got, expected, rtol=1e-6 if x.dtype == np.float32 else 1e-12)
        assert np.result_type(got) == np.result_type(expected), name
        shape = astjax.eval_shape(fn, x, MASK)
        assert shape.shape == np.shape(expected) and shape.dtype == np.result_type(expected)


@pytest.mark.parametrize("name, fn", CASES, ids=IDS)
def test_gradient_matches_differences(name, fn):
    f = _scalar(fn)
    g = astjax.grad(f)(X, MASK)
    np.testing.assert_allclose(g, _fd(f, X, MASK), rtol=1e-6, atol=1e-7)
    if "where" in name and "max" not in name and "min" not in name:
        # entries the mask leaves out get no gradient from the masked reduction
        assert np.all(g[~MASK] == 0.0) or name in ("masked_loss", "sum_row_mask")
    np.testing.assert_allclose(astjax.jit(astjax.grad(f))(X, MASK), g, rtol=1e-12)
    t = RNG.normal(size=X.shape)
    _, tangent = astjax.jvp(lambda x: f(x, MASK), (X,), (t,))
    np.testing.assert_allclose(tangent, np.sum(g * t), rtol=1e-9)


@pytest.mark.parametrize("name, fn", CASES, ids=IDS)
def test_vmap_matches_a_loop(name, fn):
    xs = np.stack([X, X[::-1] * 0.5, X + 1.0])
    ms = np.stack([MASK, ~MASK | MASK[::-1], MASK[:, ::-1]])
    np.testing.assert_allclose(astjax.vmap(fn)(xs, ms),
                               np.stack([fn(a, b) for a, b in zip(xs, ms)]), rtol=1e-12)
    shared = astjax.vmap(fn, in_axes=(0, None))(xs, MASK)
    np.testing.assert_allclose(shared, np.stack([fn(a, MASK) for a in xs]), rtol=1e-12)
    f = _scalar(fn)
    np.testing.assert_allclose(astjax.vmap(astjax.grad(f))(xs, ms),
                               np.stack([_fd(f, a, b) for a, b in zip(xs, ms)]),
                               rtol=1e-6, atol=1e-7)


def test_integer_data_follows_numpys_casts():
    k = np.arange(12).reshape(3, 4)
    for fn in (lambda a, m: np.sum(a, initial=0.5, where=m),        # 0.5 cast to int: 0
               lambda a, m: np.max(a, axis=0, initial=2.5, where=m),
               lambda a, m: np.mean(a, axis=1, where=m),              # float64 mean
               lambda a, m: np.var(a, where=m),
               lambda a, m: np.any(a > 5, axis=0, where=m),
               lambda a, m: np.all(a > 0, where=m)):
        expected = fn(k, MASK)
        got = astjax.jit(fn)(k, MASK)
        np.testing.assert_array_equal(got, expected)
        assert np.result_type(got) == np.result_type(expected)


def test_max_with_a_mask_needs_initial():
    def f(x, m):
        return np.max(x, where=m)

    with pytest.raises(ValueError):       # NumPy's rule ...
        f(X, MASK)
    with pytest.raises(astjax.TransformError) as info:   # ... at the user's line
        astjax.grad(f)(X, MASK)
    assert "initial=" in info.value.message and "return np.max(x, where=m)" in str(info.value)


def test_derivative_of_initial_and_through_mask_as_argument():
    def f(x, c):
        return np.sum(x, initial=c) * np.max(x, initial=c)

    c = 10.0
    g = astjax.grad(f, argnums=(0, 1))(X, c)
    eps = 1e-6
    np.testing.assert_allclose(g[0], _fd(lambda x, m: f(x, c), X, None), rtol=1e-6)
    np.testing.assert_allclose(g[1], (f(X, c + eps) - f(X, c - eps)) / (2 * eps), rtol=1e-6)
