"""NumPy functions astjax inlines from definitions in NumPy (``astjax/numpy_definitions.py``).

Each definition against NumPy itself: values, shapes and dtypes under jit (float64,
float32 and integer data where NumPy takes it), gradients against central
differences, jvp against the gradient, vmap against a loop over examples.
"""
import numpy as np
import pytest

import astjax
from astjax import numpy_definitions

RNG = np.random.default_rng(11)
GRID = np.sort(RNG.uniform(0.0, 3.0, 6))
Y = RNG.normal(size=(2, 6))

# name -> a function of the data y (shape (2, 6))
CASES = {
    "trapezoid_x": lambda y: np.trapezoid(y ** 2, GRID),
    "trapezoid_dx_axis0": lambda y: np.trapezoid(np.sin(y), dx=0.3, axis=0),
    "trapezoid_2d_x": lambda y: np.trapezoid(y, np.stack([GRID, GRID * 2.0]), axis=1),
    "cumulative_prod": lambda y: np.cumulative_prod(y[0], include_initial=True),
    "cumulative_prod_axis": lambda y: np.cumulative_prod(y, axis=1),
    "nancumprod": lambda y: np.nancumprod(np.where(y > 1.2, np.nan, y), axis=1),
    "matvec": lambda y: np.matvec(np.outer(y[0], y[1]), y[1]),
    "vecmat": lambda y: np.vecmat(y[0], np.outer(y[0], y[1])),
    "unstack": lambda y: np.unstack(y)[1] * 2.0,
    "unstack_axis": lambda y: np.unstack(y, axis=1)[3],
    "vander": lambda y: np.vander(y[0], 3),
    "vander_increasing": lambda y: np.vander(y[1], increasing=True),
    "polyder": lambda y: np.polyder(y[0], 2),
    "polyint": lambda y: np.polyint(y[0], 2, k=[1.0, 0.5]),
    "polyint_scalar_k": lambda y: np.polyint(y[1], k=y[0, 0]),
    "polyfit": lambda y: np.polyfit(GRID, y[0], 2),
    "polyfit_2d_weights": lambda y: np.polyfit(GRID, y.T, 1, w=GRID + 1.0),
    "unwrap": lambda y: np.unwrap(y * 4.0),
    "unwrap_axis_period": lambda y: np.unwrap(y * 3.0, axis=0, period=4.0),
    "digitize": lambda y: np.digitize(y[0], [-1.0, 0.0, 1.0]) * y[0],
    "digitize_right_decreasing": lambda y: np.digitize(y[1], [1.0, 0.0, -1.0], right=True),
    "vector_norm_axes": lambda y: np.linalg.vector_norm(y, axis=(0, 1), ord=3),
    "vector_norm_keepdims": lambda y: np.linalg.vector_norm(y, keepdims=True),
    "vector_norm_axis": lambda y: np.linalg.vector_norm(y, axis=1, ord=1),
    "cond": lambda y: np.linalg.cond(np.outer(y[0], y[0])[:2, :2] + np.eye(2)),
    "cond_1": lambda y: np.linalg.cond(np.outer(y[0], y[1])[:3, :3] + 2.0 * np.eye(3), 1),
    "cond_fro": lambda y: np.linalg.cond(np.outer(y[0], y[1])[:3, :3] + 2.0 * np.eye(3),
                                         "fro"),
}
IDS = list(CASES)


def _loss(f):
    def loss(y):
        out = np.asarray(f(y), dtype=float)
        return np.sum(out * np.arange(1.0, out.size + 1).reshape(out.shape))
    return loss


def test_every_definition_is_used():
    names = {defn.__name__ for _, defn in numpy_definitions.DEFINITIONS.values()}
    tested = {name.split("_")[0] for name in CASES} | {"vector_norm", "cumulative_prod"}
    assert names <= tested | {n for n in names if any(c.startswith(n) for c in CASES)}


@pytest.mark.parametrize("name", IDS)
def test_jit_matches_numpy(name):
    f = CASES[name]
    for y in (Y, Y.astype(np.float32)):
        expected = f(y)
        got = astjax.jit(f)(y)
        assert np.shape(got) == np.shape(expected)
        assert np.result_type(got) == np.result_type(expected), name
        np.testing.assert_allclose(got, expected,
                                   rtol=2e-5 if y.dtype == np.float32 else 1e-10)


@pytest.mark.parametrize("name", IDS)
def test_gradient_and_jvp(name):
    loss = _loss(CASES[name])
    g = astjax.grad(loss)(Y)
    fd = np.zeros_like(Y)
    for i in np.ndindex(Y.shape):
        e = np.zeros_like(Y)
        e[i] = 1e-6
        fd[i] = (loss(Y + e) - loss(Y - e)) / 2e-6
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-7)
    t = RNG.normal(size=Y.shape)
    np.testing.assert_allclose(astjax.jvp(loss, (Y,), (t,))[1], np.sum(g * t), rtol=1e-8,
                               atol=1e-10)


@pytest.mark.parametrize("name", IDS)
def test_vmap_matches_a_loop(name):
    f = CASES[name]
    ys = np.stack([Y, Y * 0.7 + 0.1, Y[:, ::-1]])
    expected = np.stack([np.asarray(f(y)) for y in ys])
    np.testing.assert_allclose(astjax.vmap(f)(ys), expected, rtol=1e-9, atol=1e-12)


def test_integer_data():
    k = np.arange(12).reshape(2, 6) % 5
    for f in (lambda y: np.trapezoid(y), lambda y: np.cumulative_prod(y[0]),
              lambda y: np.unwrap(y), lambda y: np.vander(y[0], 3),
              lambda y: np.polyder(y[1])):
        expected = f(k)
        got = astjax.jit(f)(k)
        np.testing.assert_array_equal(got, expected)
        assert np.result_type(got) == np.result_type(expected)


def test_digitize_refuses_unsorted_bins_as_numpy_does():
    def f(y):
        return np.digitize(y, [0.0, 1.0, 0.5])

    with pytest.raises(ValueError):
        f(Y[0])
    with pytest.raises(Exception, match="monotonically"):
        astjax.jit(f)(Y[0])
