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
