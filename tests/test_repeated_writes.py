"""Writes through an index that repeats a position (``y[[0, 0, 1]] = v``,
``y[idx] += v`` with duplicates in ``idx``): NumPy keeps the last write to each
position, so the derivative of every earlier write to it is zero.  Reverse mode used
to give each write the position's cotangent (a silently wrong gradient: 4x the right
one on a simple loss); ``rt.cot_written`` now zeroes the overwritten writes, with
the choice NumPy's own assignment makes (``rt.last_writes``).

Each program is checked under every transformation order against central finite
differences in float64 (vmap against a Python loop)."""
import numpy as np
import pytest

import astjax
from astjax import runtime as rt
from conftest import fd_vector_grad as fd_grad

X = np.array([0.3, -0.7, 1.1, 0.5, -0.2, 0.9])


def dup_iadd(x):
    y = x * 1.0
    y[np.array([0, 0, 1])] += x[:3] * 2.0
    return np.sum(y * y)


def dup_set_list(x):
    y = x * 1.0
    y[[2, 4, 2]] = np.sin(x[:3])
    return np.sum(y * y * x)


def dup_negative(x):
    y = x * 1.0
    y[[0, -6, 3]] = x[3:] ** 2          # 0 and -6 name one position
    return np.sum(np.cos(y) * x)


def dup_scalar_value(x):
    y = x * 1.0
    y[[1, 1, 1]] = x[0] * x[5]           # one value written three times: counted once
    return np.sum(y * y)


def dup_rows(x):
    y = x.reshape(2, 3) * 1.0
    y[[0, 0]] = np.tanh(y[::-1] * 2.0)
    return np.sum(y * y * x.reshape(2, 3))


def dup_pairs(x):
    y = x.reshape(2, 3) * 1.0
    y[[0, 1, 0], [2, 0, 2]] = x[:3] * x[3:]
    return np.sum(np.sin(y))


def dup_mixed_slice(x):
    y = x.reshape(2, 3) * 1.0
    y[:, [1, 1]] = y[:, [0, 2]] * 3.0
    return np.sum(y ** 3)


def dup_imul(x):
    y = x * 1.0
    y[[3, 3, 5]] *= x[:3] + 2.0
    return np.sum(y * y)


def dup_in_loop(x):
    y = x * 1.0
    for i in range(3):
        y[[i, i + 1, i]] = y[[i + 1, i + 2, i + 3]] * 0.5 + x[i]
    return np.sum(y * y)


PROGRAMS = [dup_iadd, dup_set_list, dup_negative, dup_scalar_value, dup_rows, dup_pairs,
            dup_mixed_slice, dup_imul, dup_in_loop]


def fd_hessian(f, x, h=1e-4):
    return np.stack([(fd_grad(f, x + e) - fd_grad(f, x - e)) / (2 * h)
                     for e in np.eye(x.size) * h])


@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("how", ["grad", "jit(grad)", "vjp", "jacrev", "jacfwd", "jvp",
                                 "linearize", "grad(backend=c)"])
def test_first_derivatives(f, how):
    want = fd_grad(f, X)
    x = X.copy()
    if how == "grad":
        got = astjax.grad(f)(x)
    elif how == "jit(grad)":
        got = astjax.jit(astjax.grad(f))(x)
    elif how == "grad(backend=c)":
        got = astjax.jit(astjax.grad(f), backend="c")(x)
    elif how == "vjp":
        got = astjax.vjp(f, x)[1](1.0)[0]
    elif how == "jacrev":
        got = astjax.jacrev(f)(x)
    elif how == "jacfwd":
        got = astjax.jacfwd(f)(x)
    elif how == "jvp":
        got = np.array([astjax.jvp(f, (x,), (e,))[1] for e in np.eye(x.size)])
    else:
        lin = astjax.linearize(f, x)[1]
        got = np.array([lin(e) for e in np.eye(x.size)])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(x, X)            # (the argument is not written)


@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_second_derivatives(f):
    want = fd_hessian(f, X)
    np.testing.assert_allclose(astjax.hessian(f)(X), want, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(astjax.jacrev(astjax.grad(f))(X), want, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(astjax.jacfwd(astjax.grad(f))(X), want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("f", PROGRAMS, ids=lambda f: f.__name__)
def test_vmap_of_grad(f):
    xs = np.stack([X, X[::-1] * 0.5, X + 0.25])
    want = np.stack([fd_grad(f, x) for x in xs])
    np.testing.assert_allclose(astjax.vmap(astjax.grad(f))(xs), want, rtol=1e-6, atol=1e-7)


def per_example_positions(x, idx):
    y = x * 1.0
    y[idx] = np.sin(x[:3])
    return np.sum(y * y * x)


def test_vmap_of_grad_per_example_index():
    """Each example repeats a different position: each example's last writes."""
    xs = np.stack([X, X * 0.5, X - 0.3])
    idx = np.array([[0, 0, 1], [2, 5, 5], [4, 3, 4]])
    got = astjax.vmap(astjax.grad(per_example_positions))(xs, idx)
    want = np.stack([fd_grad(lambda v: per_example_positions(v, i), x)
                     for x, i in zip(xs, idx)])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


_ROW_INDICES = [[0, 0, 1], [2, -4, 2], np.array([3, 3, 3]), [1, -3, 0]]
_TUPLE_INDICES = [(np.array([0, 1, 0]), np.array([2, 0, 2])), (slice(None), [1, 1]),
                  ([[0, 0], [1, 0]],)]


@pytest.mark.parametrize("shape, index", [((4,), i) for i in _ROW_INDICES] +
                         [((4, 3), i) for i in _ROW_INDICES + _TUPLE_INDICES])
def test_last_writes_match_numpy(shape, index):
    """The kept writes are the ones whose values NumPy's assignment leaves (rows of
    the first axis kept whole)."""
    rng = np.random.default_rng(0)
    x = np.zeros(shape)
    chosen_shape = x[index].shape
    v = rng.permutation(np.prod(chosen_shape) + 10)[:np.prod(chosen_shape)]
    v = v.reshape(chosen_shape).astype(float) + 1.0
    x[index] = v
    kept = rt.last_writes(shape, index)
    assert kept is not None
    np.testing.assert_array_equal(x[index] == v, np.broadcast_to(kept, v.shape))


@pytest.mark.parametrize("index", [1, slice(1, 3), (Ellipsis, 0), np.array([True, False,
                                                                            True, True]),
                                   [0, 2, 3], (None, slice(None, None, -1))])
def test_last_writes_none_without_repeats(index):
    assert rt.last_writes((4,), index) is None


class _DeviceArray:
    """Stands for a CuPy array: not a NumPy array, indexable, index arrays with get()."""

    def __init__(self, data):
        self.data = np.asarray(data)
        self.shape, self.dtype = self.data.shape, self.data.dtype

    def __getitem__(self, index):
        return self.data[index.get() if isinstance(index, _DeviceIndex) else index]


class _DeviceIndex:
    def __init__(self, data):
        self.data, self.shape = np.asarray(data), np.shape(data)

    def get(self):
        return self.data


def test_device_arrays_refuse_repeated_positions_and_allow_distinct_ones():
    """On a device array which repeated write stays is unspecified: refused, never a
    cotangent for every write; distinct positions and basic indices go through."""
    g = _DeviceArray(np.arange(6.0))
    with pytest.raises(astjax.AstjaxError, match="repeats a position"):
        rt.cot_written(g, _DeviceIndex([0, 0, 1]))
    with pytest.raises(astjax.AstjaxError, match="repeats a position"):
        rt.cot_written_vjp(np.ones(2), g, [3, -3])
    np.testing.assert_array_equal(rt.cot_written(g, _DeviceIndex([2, 0])), [2.0, 0.0])
    np.testing.assert_array_equal(rt.cot_written(g, slice(1, 3)), [1.0, 2.0])
