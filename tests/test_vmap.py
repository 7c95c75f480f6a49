"""astjax.vmap against a Python loop over the examples, with JAX's semantics.

Every batched result is compared with ``reference``: the function called once per
example (the arguments sliced as ``in_axes`` says) and the results stacked as
``out_axes`` says.  The user programs live in ``tests/programs/batched.py``.
"""
from __future__ import annotations

import numpy as np
import pytest

import astjax
from astjax import tree_util
from astjax.demo import init_params
from astjax.errors import AstjaxError, TransformError
from programs import batched as pb

B = 4


# ---------------------------------------------------------------------- reference

def _is_leaf_axes(axes):
    return axes is None or isinstance(axes, int)


def _slice(arg, axes, i):
    """Example ``i`` of an argument batched as ``axes`` (an int, None or a prefix tree)."""
    if axes is None:
        return arg
    if isinstance(axes, int):
        return tree_util.tree_map(lambda leaf: np.take(np.asarray(leaf), i, axis=axes), arg)
    if isinstance(axes, dict):
        return type(arg)({k: _slice(arg[k], axes[k], i) for k in arg})
    parts = [_slice(a, ax, i) for a, ax in zip(arg, axes)]
    return type(arg)(*parts) if hasattr(arg, "_fields") else type(arg)(parts)


def _size(args, in_axes):
    for arg, axes in zip(args, in_axes):
        if axes is None:
            continue
        if isinstance(axes, int):
            return np.shape(tree_util.tree_leaves(arg)[0])[axes]
        keys = axes.keys() if isinstance(axes, dict) else range(len(axes))
        n = _size([arg[k] for k in keys], [axes[k] for k in keys])
        if n is not None:
            return n
    return None


def _stack(outs, axes):
    first = outs[0]
    if axes is None:
        for o in outs[1:]:
            assert_tree_close(o, first, what="an out_axes=None output")
        return first
    if isinstance(axes, int):
        return tree_util.tree_map(
            lambda *leaves: np.stack([np.asarray(v) for v in leaves], axis=axes), *outs)
    if isinstance(axes, dict):
        return {k: _stack([o[k] for o in outs], axes[k]) for k in first}
    parts = [_stack([o[j] for o in outs], ax) for j, ax in enumerate(axes)]
    return type(first)(parts)


def reference(f, args, in_axes=0, out_axes=0, axis_size=None):
    """``[f(*example i) for i]`` stacked: what vmap must return."""
    in_axes = tuple(in_axes) if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(args)
    n = _size(args, in_axes) or axis_size
    outs = [f(*[_slice(a, ax, i) for a, ax in zip(args, in_axes)]) for i in range(n)]
    return _stack(outs, out_axes)


def assert_tree_close(actual, expected, rtol=1e-10, atol=1e-12, what="vmap"):
    a_leaves, a_def = tree_util.tree_flatten(actual)
    e_leaves, e_def = tree_util.tree_flatten(expected)
    assert a_def == e_def, f"{what}: structure {a_def}, expected {e_def}"
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        a, e = np.asarray(a), np.asarray(e)
        assert a.shape == e.shape, f"{what}: leaf {i} has shape {a.shape}, expected {e.shape}"
        assert a.dtype == e.dtype, f"{what}: leaf {i} has dtype {a.dtype}, expected {e.dtype}"
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, err_msg=f"{what}: leaf {i}")


def check(f, *args, in_axes=0, out_axes=0, axis_size=None, rtol=1e-10, atol=1e-12):
    got = astjax.vmap(f, in_axes=in_axes, out_axes=out_axes, axis_size=axis_size)(*args)
    want = reference(f, args, in_axes, out_axes, axis_size)
    assert_tree_close(got, want, rtol=rtol, atol=atol)
    return got


@pytest.fixture
def r():
    return np.random.default_rng(0)


# ------------------------------------------------------------------------ in_axes

def test_in_axes_ints_negative_and_none(r):
    x, w, b = r.standard_normal((B, 3)), r.standard_normal((3, 2)), r.standard_normal(2)
    check(pb.affine, x, w, b, in_axes=(0, None, None))
    check(pb.affine, x.T, w, b, in_axes=(1, None, None))
    check(pb.affine, x.T, w, b, in_axes=(-1, None, None))
    ws = r.standard_normal((3, B, 2))
    check(pb.affine, x, ws, b, in_axes=(0, 1, None))
    check(pb.affine, x[0], ws, r.standard_normal((2, B)), in_axes=(None, -2, -1))


def test_in_axes_list_is_a_tuple_and_an_int_applies_to_all(r):
    x, s = r.standard_normal((B, 3, 2)), r.standard_normal((B, 1))
    check(pb.scaled_sum, x, s, in_axes=[0, 0])
    check(pb.scaled_sum, x, s)


def test_in_axes_pytree_prefixes(r):
    params = {"w": r.standard_normal((B, 3, 2)), "b": r.standard_normal(2)}
    x = r.standard_normal(3)
    check(pb.dict_layer, params, x, in_axes=({"w": 0, "b": None}, None))
    params = {"w": r.standard_normal((3, 2)), "b": r.standard_normal((2, B))}
    check(pb.dict_layer, params, r.standard_normal((B, 3)), in_axes=({"w": None, "b": 1}, 0))
    pair = (r.standard_normal((B, 3)), r.standard_normal(3))
    check(pb.tuple_args, pair, r.standard_normal(3), in_axes=((0, None), None))
    check(pb.tuple_args, pair, r.standard_normal((3, B)), in_axes=((0, None), 1))


def test_in_axes_prefix_of_a_single_argument(r):
    def only(params):
        return pb.dict_layer(params, np.ones(3))
    mod = _module_with(only)
    params = {"w": r.standard_normal((B, 3, 2)), "b": r.standard_normal(2)}
    check(mod.only, params, in_axes=({"w": 0, "b": None},))


def _module_with(fn):
    """``fn`` is defined in this file, which astjax can read: no module needed."""
    class Mod:
        pass
    m = Mod()
    setattr(m, fn.__name__, fn)
    return m


def test_namedtuple_argument(r):
    layer = pb.Layer(r.standard_normal((B, 3, 2)), r.standard_normal(2))
    check(pb.namedtuple_layer, layer, r.standard_normal((B, 3)),
          in_axes=(pb.Layer(0, None), 0))


# ----------------------------------------------------------------------- out_axes

def test_out_axes_int_and_negative(r):
    x = r.standard_normal((B, 3))
    check(pb.matrix_out, x, out_axes=1)
    check(pb.matrix_out, x, out_axes=-1)
    check(pb.matrix_out, x, out_axes=2)


def test_out_axes_none_for_an_unbatched_output(r):
    x = r.standard_normal((B, 3))
    got = check(pb.with_constant, x, out_axes=(0, None))
    np.testing.assert_array_equal(got[1], np.arange(3.0))
    got = check(pb.with_constant, x, out_axes=(1, 0))
    assert got[1].shape == (B, 3)


def test_out_axes_none_for_a_batched_output_is_an_error(r):
    with pytest.raises(AstjaxError, match="out_axes=None"):
        astjax.vmap(pb.with_constant, out_axes=(None, None))(r.standard_normal((B, 3)))


def test_out_axes_pytree_and_pytree_outputs(r):
    x = r.standard_normal((B, 5))
    check(pb.stats, x)
    check(pb.stats, x, out_axes={"mean": 0, "centered": 1, "shape": 0})


# ---------------------------------------------------------------------- axis_size

def test_axis_size_when_nothing_is_batched():
    got = check(pb.constant_only, 2.5, in_axes=None, axis_size=3)
    assert got.shape == (3, 2)
    got = check(pb.constant_only, 2.5, in_axes=None, out_axes=1, axis_size=3)
    assert got.shape == (2, 3)


def test_axis_size_must_agree_and_be_given(r):
    with pytest.raises(AstjaxError, match="inconsistent batch sizes"):
        astjax.vmap(pb.constant_only, axis_size=5)(r.standard_normal(3))
    with pytest.raises(AstjaxError, match="axis_size"):
        astjax.vmap(pb.constant_only, in_axes=None)(2.0)


def test_inconsistent_batch_sizes_name_both_arguments(r):
    with pytest.raises(AstjaxError) as info:
        astjax.vmap(pb.affine, in_axes=(0, None, 0))(
            r.standard_normal((3, 3)), r.standard_normal((3, 2)), r.standard_normal((4, 2)))
    msg = str(info.value)
    assert "inconsistent" in msg and "argument 0" in msg and "argument 2" in msg, msg
    assert "3" in msg and "4" in msg


def test_inconsistent_leaves_of_one_argument(r):
    pair = (r.standard_normal((3, 2)), r.standard_normal((4, 2)))
    with pytest.raises(AstjaxError, match="inconsistent"):
        astjax.vmap(pb.tuple_args)(pair, r.standard_normal((3, 2)))


def test_in_axes_out_of_range_and_wrong_length(r):
    with pytest.raises(AstjaxError, match="out of range"):
        astjax.vmap(pb.scaled_sum, in_axes=(2, None))(r.standard_normal((3, 2)), 1.0)
    with pytest.raises(AstjaxError, match="in_axes"):
        astjax.vmap(pb.scaled_sum, in_axes=(0,))(r.standard_normal((3, 2)), 1.0)


# -------------------------------------------------------------------- nested vmap

def test_nested_vmap_pairwise(r):
    a, b = r.standard_normal((3, 2)), r.standard_normal((5, 4))
    inner = astjax.vmap(pb.outer_pair, in_axes=(None, 0))
    got = astjax.vmap(inner, in_axes=(0, None))(a, b)
    want = np.array([[np.outer(ai, bj) for bj in b] for ai in a])
    assert_tree_close(got, want)


def test_nested_vmap_axes_and_out_axes(r):
    x = r.standard_normal((3, 4, 2, 5))           # outer batch 3 (axis 0), inner 5 (axis -1)
    s = r.standard_normal((5, 1))
    inner = astjax.vmap(pb.scaled_sum, in_axes=(-1, 0), out_axes=1)
    got = astjax.vmap(inner, in_axes=(0, None), out_axes=0)(x, s)
    want = np.stack([np.stack([pb.scaled_sum(x[i, ..., j], s[j]) for j in range(5)], axis=1)
                     for i in range(3)])
    assert_tree_close(got, want)
    twice = astjax.vmap(astjax.vmap(pb.branches))
    xs = r.standard_normal((2, 3, 4))
    got = twice(xs)
    want = reference(lambda row: reference(pb.branches, (row,)), (xs,))
    assert_tree_close(got, want)


def test_nested_vmap_with_unbatched_inner_output(r):
    inner = astjax.vmap(pb.with_constant, out_axes=(0, None))
    got = astjax.vmap(inner, out_axes=(0, None))(r.standard_normal((2, 3, 4)))
    assert got[0].shape == (2, 3, 4)
    np.testing.assert_array_equal(got[1], np.arange(3.0))


# -------------------------------------------------------------------- control flow

def test_if_elif_else_per_lane(r):
    x = np.array([[1.0, 1.0], [0.2, 0.1], [-2.0, -1.0], [0.6, 0.6]])
    got = check(pb.branches, x)
    np.testing.assert_array_equal(got[1], [2, 1, 0, 2])
    check(pb.branch_no_else, r.standard_normal((B, 3)))
    check(pb.branch_returns, np.array([2.0, -0.5, -3.0, 0.0]))


def test_while_with_per_lane_trip_counts():
    got = check(pb.halve_until_small, np.array([0.5, 3.0, 17.0, 1000.0]))
    np.testing.assert_array_equal(got[1], [0, 2, 5, 10])
    got = check(pb.collatz_steps, np.array([1, 6, 7, 27]))
    np.testing.assert_array_equal(got, [0, 8, 16, 111])
    check(pb.newton_sqrt, np.array([2.0, 9.0, 1e-3, 1e6]), rtol=1e-12)


def test_break_continue_and_early_return_under_batched_conditions(r):
    check(pb.loop_break, np.array([-1.0, 2.5, 10.0, 100.0]))
    check(pb.loop_continue, r.uniform(0, 5, (B, 2)))
    check(pb.loop_early_return, np.array([-1.0, 0.2, 1.7, 10.0]))
    check(pb.while_break, np.array([0.1, 1.0, 5.0, 20.0]))
    got = check(pb.search_first_negative, np.array([[1.0, -1.0, 2.0], [-3.0, 1.0, 1.0],
                                                    [1.0, 1.0, 1.0], [1.0, 2.0, -2.0]]))
    np.testing.assert_array_equal(got, [1, 0, -1, 2])


def test_for_over_a_per_example_length_is_refused(r):
    with pytest.raises(TransformError, match="for loop"):
        astjax.vmap(pb.loop_per_example_length)(r.standard_normal(3), np.array([1, 2, 3]))
    check(pb.loop_per_example_length, r.standard_normal(3), 4, in_axes=(0, None))


def test_indexing_with_unbatched_indices(r):
    x = r.standard_normal((B, 5, 2))
    check(pb.gather_rows, x, np.array([4, 0, 0, 2]), in_axes=(0, None))
    check(pb.gather_rows, x, (slice(1, 3), 1), in_axes=(0, None))
    check(pb.mask_select, x, r.standard_normal((5, 2)) > 0, in_axes=(0, None))
    check(pb.inplace_updates, r.standard_normal((B, 3)))


def test_per_example_integer_indices(r):
    check(pb.per_example_index, r.standard_normal((B, 5)), np.array([0, 4, -1, 2]))
    check(pb.per_example_index, r.standard_normal((B, 5, 2)), np.array([[0, 1], [4, 4],
                                                                        [3, 0], [2, 2]]))
    check(pb.pick_max, r.standard_normal((B, 6)))
    check(pb.rows_and_cols, r.standard_normal((B, 4, 4)), np.array([1, 0, 3, 2]))
    check(pb.update_at, r.standard_normal((B, 4, 4)), np.array([1, 0, 3, 2]))
    check(pb.update_at, r.standard_normal((B, 4, 4)), 2, in_axes=(0, None))
    for f, args in ((pb.pick_max, (r.standard_normal((B, 6)),)),
                    (pb.index_loss, (r.standard_normal((B, 4, 4)), np.array([1, 0, 3, 2])))):
        gfun = astjax.grad(f)
        assert_tree_close(astjax.vmap(gfun)(*args), reference(gfun, args))


def test_in_place_updates_in_branches_and_loops(r):
    check(pb.update_in_branch, np.array([[1.0, 2.0, 3.0], [-1.0, 5.0, 6.0], [0.5, 0.1, 0.2],
                                         [-0.5, -1.0, -2.0]]))
    check(pb.update_in_while, np.array([0.5, 3.0, 6.0, 9.5]))


def test_per_example_masks(r):
    check(pb.masked_update, r.standard_normal((B, 5)))        # y[y < 0] = 0.0
    check(pb.masked_update, r.standard_normal((B, 2, 3)))
    gfun = astjax.grad(pb.masked_update_loss)
    xs = r.standard_normal((B, 5))
    assert_tree_close(astjax.vmap(gfun)(xs), reference(gfun, (xs,)))


def test_per_example_masks_and_slices_are_refused(r):
    with pytest.raises(AstjaxError, match="boolean mask that differs per example"):
        astjax.vmap(pb.masked_gather)(r.standard_normal((B, 5)))
    with pytest.raises(TransformError, match="slice whose bounds differ per example"):
        astjax.vmap(pb.per_example_slice)(r.standard_normal((B, 5)), np.arange(B))
    check(pb.per_example_slice, r.standard_normal((B, 5)), 3, in_axes=(0, None))


# ----------------------------------------------------------------------------- lax

def test_lax_under_vmap(r):
    x = r.standard_normal((B, 3))
    check(pb.lax_cond, x)
    check(pb.lax_switch, np.array([0, 1, 2, 7]), x)
    check(pb.lax_switch, 1, x, in_axes=(None, 0))
    check(pb.lax_while, np.array([0.5, 3.0, 60.0, 10.0]))
    check(pb.lax_fori, r.standard_normal(B))
    check(pb.lax_scan, r.standard_normal((B, 6)))
    check(pb.lax_scan, r.standard_normal((6, B)), in_axes=1, out_axes=(0, 1))
    gfun = astjax.grad(pb.lax_loss)   # lax loops with per-example trip counts, reversed
    xs = r.uniform(-1.0, 1.0, (6, 4))
    assert_tree_close(astjax.vmap(gfun)(xs), reference(gfun, (xs,)))


# -------------------------------------------------------- gradients and jvp inside

def test_per_example_gradients_of_logistic_regression(r):
    w = r.standard_normal(3)
    x = r.standard_normal((8, 3))
    y = (r.uniform(size=8) > 0.5).astype(float)
    g = astjax.vmap(astjax.grad(pb.logistic_loss), in_axes=(None, 0, 0))(w, x, y)
    want = np.stack([astjax.grad(pb.logistic_loss)(w, xi, yi) for xi, yi in zip(x, y)])
    assert_tree_close(g, want)
    p = 1 / (1 + np.exp(-x @ w))
    assert_tree_close(g, (p - y)[:, None] * x, rtol=1e-9, atol=1e-12)
    vg = astjax.vmap(astjax.value_and_grad(pb.logistic_loss), in_axes=(None, 0, 0))(w, x, y)
    assert_tree_close(vg[1], want)
    np.testing.assert_allclose(vg[0], [pb.logistic_loss(w, xi, yi) for xi, yi in zip(x, y)])


def test_per_example_gradients_of_the_seeds_mlp(r):
    params = init_params((5, 4, 3), r, dtype=np.float64)
    x, y = r.standard_normal((6, 5)), r.standard_normal((6, 3))
    g = astjax.vmap(astjax.grad(pb.mlp_example_loss), in_axes=(None, 0, 0))(params, x, y)
    want = reference(astjax.grad(pb.mlp_example_loss), (params, x, y), (None, 0, 0))
    assert_tree_close(g, want)
    # the mean of per-example gradients is the gradient of the mean loss
    total = astjax.grad(astjax.demo.loss)(params, (x, y))
    mean = tree_util.tree_map(lambda leaf: np.sum(leaf, axis=0), g)
    assert_tree_close(mean, total, rtol=1e-9, atol=1e-11)


def test_per_example_gradients_keep_float32(r):
    params = init_params((5, 4, 3), r)
    x = r.standard_normal((6, 5)).astype(np.float32)
    y = r.standard_normal((6, 3)).astype(np.float32)
    g = astjax.vmap(astjax.grad(pb.mlp_example_loss), in_axes=(None, 0, 0))(params, x, y)
    want = reference(astjax.grad(pb.mlp_example_loss), (params, x, y), (None, 0, 0))
    assert_tree_close(g, want, rtol=1e-5, atol=1e-6)


def test_per_example_gradients_of_more_programs(r):
    params = {"w1": r.standard_normal((3, 4)), "b1": r.standard_normal(4),
              "w2": r.standard_normal((4, 2))}
    x, y = r.standard_normal((B, 3)), r.standard_normal((B, 2))
    gfun = astjax.grad(pb.relu_net_loss)
    assert_tree_close(astjax.vmap(gfun, in_axes=(None, 0, 0))(params, x, y),
                      reference(gfun, (params, x, y), (None, 0, 0)))
    w = r.standard_normal((B, 2))
    xs = r.standard_normal((B, 5))
    gfun = astjax.grad(pb.pieces_loss, argnums=(0, 1))
    assert_tree_close(astjax.vmap(gfun)(w, xs), reference(gfun, (w, xs)), rtol=1e-9)
    xs = np.array([0.5, 3.0, 17.0, 1.5])
    for f in (pb.halve_value, pb.break_value, pb.loop_early_return, pb.branch_returns,
              pb.newton_sqrt):
        assert_tree_close(astjax.vmap(astjax.grad(f))(xs), reference(astjax.grad(f), (xs,)),
                          rtol=1e-9)
    xs = r.uniform(-1.5, 1.5, (6, 3, 2))
    for f in (pb.branch_in_loop_loss, pb.rows_until_positive):
        assert_tree_close(astjax.vmap(astjax.grad(f))(xs), reference(astjax.grad(f), (xs,)),
                          rtol=1e-9)


def test_vmap_of_jvp_and_grad_inside(r):
    x, v = r.standard_normal((B, 3)), r.standard_normal((B, 3))
    check(pb.directional, x, v)
    check(pb.directional, x, v[0], in_axes=(0, None))
    check(pb.grad_inside, x)


def test_vmap_of_second_order_code(r):
    x, v = r.standard_normal((B, 5)), r.standard_normal((B, 5))
    check(pb.hvp, x, v, rtol=1e-9, atol=1e-11)           # jvp over grad
    check(pb.hvp, x, v[0], in_axes=(0, None), rtol=1e-9, atol=1e-11)
    xs = np.array([0.5, 3.0, 17.0, 1.5])
    for f in (pb.halve_value, pb.branch_returns):        # grad over grad, per example
        gg = astjax.grad(astjax.grad(f))
        assert_tree_close(astjax.vmap(gg)(xs), reference(gg, (xs,)), rtol=1e-9)


def test_generated_source_is_batch_last(r):
    src = astjax.make_source(astjax.vmap(pb.branches))(r.standard_normal((B, 3)))
    assert "batch_size" in src and "rb.select" in src


def _tanh_affine(w, x):
    return np.tanh(x @ w) * 2.0


def test_jit_of_vmap_and_vmap_inside_transformed_code():
    rng = np.random.default_rng(3)
    w, xs = rng.standard_normal((3, 2)), rng.standard_normal((5, 3))
    vf = astjax.vmap(_tanh_affine, in_axes=(None, 0))
    expected = np.stack([_tanh_affine(w, x) for x in xs])
    np.testing.assert_allclose(astjax.jit(vf)(w, xs), expected, rtol=1e-12)


def _loss_through_vmap(w, xs):
    return np.sum(astjax.vmap(_tanh_affine, in_axes=(None, 0))(w, xs))


def _loss_through_loop(w, xs):
    return np.sum(np.stack([_tanh_affine(w, x) for x in xs]))


def test_grad_and_jvp_of_vmap():
    rng = np.random.default_rng(4)
    w, xs = rng.standard_normal((3, 2)), rng.standard_normal((5, 3))
    expected = astjax.grad(_loss_through_loop)(w, xs)
    np.testing.assert_allclose(astjax.grad(_loss_through_vmap)(w, xs), expected, rtol=1e-12)
    vf = astjax.vmap(_tanh_affine, in_axes=(None, 0))
    v = rng.standard_normal((3, 2))
    _, t = astjax.jvp(vf, (w, xs), (v, np.zeros_like(xs)))
    np.testing.assert_allclose(t, np.stack([astjax.jvp(_tanh_affine, (w, x), (v, 0 * x))[1]
                                            for x in xs]), rtol=1e-12)
    g = astjax.grad(lambda w: np.sum(vf(w, xs) ** 2))
    np.testing.assert_allclose(g(w), astjax.grad(
        lambda w: np.sum(np.stack([_tanh_affine(w, x) for x in xs]) ** 2))(w), rtol=1e-12)


# ----------------------------------------------------------------- asserts per lane

def test_asserts_on_batched_values_check_every_lane(r):
    x = r.standard_normal((5, 3))
    check(pb.checked_scale, x)
    check(pb.checked_log, np.abs(x) + 0.1)
    with pytest.raises(AssertionError, match="log of a non-positive number"):
        astjax.vmap(pb.checked_log)(x)
    # one bad lane is enough
    good = np.abs(x) + 0.1
    good[3, 1] = -1.0
    with pytest.raises(AssertionError, match="non-positive"):
        astjax.vmap(pb.checked_log)(good)
    with pytest.raises(AssertionError):
        astjax.jit(astjax.vmap(pb.checked_log))(good)


def test_asserts_inside_batched_branches_check_only_the_lanes_there(r):
    x = r.standard_normal((6, 3))
    x[0] = np.abs(x[0])
    x[1] = -np.abs(x[1])
    check(pb.checked_in_branch, x)
    check(pb.checked_in_branch_only_some, x)
    bad = x.copy()
    bad[0, 0] = -50.0
    bad[0, 1:] = 40.0
    with pytest.raises(AssertionError, match="huge negative"):
        astjax.vmap(pb.checked_in_branch)(bad)


def test_asserts_under_vmap_of_grad_and_grad_of_vmap(r):
    x = np.abs(r.standard_normal((4, 3))) + 0.5
    got = astjax.vmap(astjax.grad(pb.checked_log))(x)
    np.testing.assert_allclose(got, 1.0 / x, rtol=1e-12)
    got = astjax.vmap(astjax.grad(pb.checked_scale))(x)
    np.testing.assert_allclose(got, 8.0 * x, rtol=1e-12)
    g = astjax.grad(lambda v: np.sum(astjax.vmap(pb.checked_log)(v)))(x)
    np.testing.assert_allclose(g, 1.0 / x, rtol=1e-12)
    bad = x.copy()
    bad[2, 2] = -1.0
    with pytest.raises(AssertionError):
        astjax.vmap(astjax.grad(pb.checked_log))(bad)
