"""eval_shape: shapes and dtypes from the shape rules, without computing arrays."""
import numpy as np
import pytest
from programs import mlp

import astjax
from astjax import ShapeDtypeStruct as S


def layer(x, w, b):
    return np.tanh(x @ w + b)


def reductions(x):
    return (np.sum(x, axis=0), np.mean(x, axis=(0, 1), keepdims=True), np.max(x),
            np.cumsum(x, axis=1), x.reshape(-1, 2).T, x[1:, ::2, None], x.shape[0] * 2)


def branch_on_shape(x):
    if x.ndim == 2:
        return x.sum(axis=1)
    return x


def branch_on_values(x):
    if np.sum(x) > 0:
        return x
    return -x


def loop_over_rows(x):
    acc = np.zeros(x.shape[1:], x.dtype)
    for row in x:
        acc = acc + row * 2.0
    return acc


def test_mlp_loss_and_gradient_shapes_without_data():
    params = [(S((784, 512), np.float32), S((512,), np.float32)),
              (S((512, 10), np.float32), S((10,), np.float32))]
    batch = (S((128, 784), np.float32), S((128, 10), np.float32))
    out = astjax.eval_shape(mlp.loss, params, batch)
    assert out == S((), np.float32)
    g = astjax.eval_shape(astjax.grad(mlp.loss), params, batch)
    assert [(w.shape, b.shape) for w, b in g] == [((784, 512), (512,)), ((512, 10), (10,))]
    assert all(w.dtype == np.float32 for w, _ in g)


@pytest.mark.parametrize("fn, args", [
    (layer, (np.ones((5, 3)), np.ones((3, 4), np.float32), np.ones(4, np.float32))),
    (reductions, (np.ones((4, 6, 2)),)),
    (branch_on_shape, (np.ones((3, 2), np.int64),)),
    (loop_over_rows, (np.ones((4, 3), np.float32),)),
])
def test_matches_the_real_result(fn, args):
    real = fn(*args)
    abstract = astjax.eval_shape(fn, *[S(np.shape(a), np.asarray(a).dtype) for a in args])
    real_leaves = astjax.tree_util.tree_leaves(real)
    abstract_leaves = astjax.tree_util.tree_leaves(abstract)
    assert len(real_leaves) == len(abstract_leaves)
    for r, a in zip(real_leaves, abstract_leaves):
        assert a == S(np.shape(r), np.asarray(r).dtype)


def test_branch_on_array_values_is_an_error_naming_the_line():
    with pytest.raises(astjax.TransformError) as info:
        astjax.eval_shape(branch_on_values, S((3,), np.float64))
    assert "test_eval_shape.py" in str(info.value) and "depends on array values" in str(
        info.value)


# ------------------------------------------------------------ eval_shape of vmap
def _layer(params, x, scale=1.0):
    w, b = params["w"], params["b"]
    h = np.tanh(x @ w + b) * scale
    return {"h": h, "norm": np.sum(h ** 2)}


def _pair(x, y):
    return x.T @ y, np.sum(x, axis=0)


_PARAMS = {"w": np.ones((3, 4), np.float32), "b": np.zeros(4, np.float32)}
_VMAP_CASES = [
    ("batched data, shared params", lambda: astjax.vmap(_layer, in_axes=(None, 0)),
     (_PARAMS, np.ones((6, 2, 3), np.float32))),
    ("batch axis 1, out_axes pytree", lambda: astjax.vmap(
        _layer, in_axes=(None, 1), out_axes={"h": 1, "norm": 0}),
     (_PARAMS, np.ones((2, 6, 3), np.float32))),
    ("params batched by a dict prefix", lambda: astjax.vmap(
        _layer, in_axes=({"w": 0, "b": None}, None)),
     ({"w": np.ones((5, 3, 4)), "b": np.zeros(4)}, np.ones((2, 3)))),
    ("out_axes pytree", lambda: astjax.vmap(_pair, in_axes=(0, 0), out_axes=(2, 0)),
     (np.ones((7, 3, 2)), np.ones((7, 3, 5), np.float32))),
    ("vmap of vmap", lambda: astjax.vmap(astjax.vmap(_pair, in_axes=(0, None)),
                                         in_axes=(None, 1)),
     (np.ones((4, 3, 2)), np.ones((3, 8, 5)))),
    ("vmap of grad", lambda: astjax.vmap(astjax.grad(lambda w, x: np.sum(np.sin(x @ w))),
                                         in_axes=(None, 0)),
     (np.ones((3, 2)), np.ones((9, 4, 3)))),
]


@pytest.mark.parametrize("make,args", [c[1:] for c in _VMAP_CASES],
                         ids=[c[0] for c in _VMAP_CASES])
def test_eval_shape_of_vmap_matches_the_real_result(make, args):
    f = make()
    real = f(*args)
    abstract_args = astjax.tree_util.tree_map(
        lambda a: S(np.shape(a), np.asarray(a).dtype), args)
    for given in (args, abstract_args):
        shapes = astjax.eval_shape(f, *given)
        assert astjax.tree_util.tree_structure(shapes) == \
            astjax.tree_util.tree_structure(real)
        for s, r in zip(astjax.tree_util.tree_leaves(shapes),
                        astjax.tree_util.tree_leaves(real)):
            assert (s.shape, s.dtype) == (np.shape(r), np.asarray(r).dtype)


def test_eval_shape_of_vmap_checks_batch_sizes():
    f = astjax.vmap(_pair)
    with pytest.raises(Exception, match="batch size|inconsistent|sizes"):
        astjax.eval_shape(f, S((4, 3, 2), np.float64), S((5, 3, 2), np.float64))


@pytest.mark.parametrize("scalar", [2.0, 3, True, np.float64(2.0), np.int64(3)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_eval_shape_keeps_python_numbers_weakly_typed(scalar, dtype):
    # float32 array * 2.0 is float32 in NumPy (and JAX): a Python number passed as an
    # argument must not become a float64 ShapeDtypeStruct (a wrong dtype, silently)
    def scaled(x, s):
        return x * s
    x = np.ones((2, 3), dtype)
    real = scaled(x, scalar)
    for given in (x, S(x.shape, x.dtype)):
        out = astjax.eval_shape(scaled, given, scalar)
        assert (out.shape, out.dtype) == (real.shape, real.dtype)
