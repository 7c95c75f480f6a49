"""End-to-end tests of reverse mode (grad, value_and_grad, vjp) on user programs.

Every gradient is checked against float64 central finite differences
(``conftest.check_grad``), every value against plain NumPy. The programs live in
``tests/programs/`` because astjax reads the source of the functions it transforms.
"""
from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
import traceback
import zlib
from pathlib import Path

import numpy as np
import pytest

import astjax
from astjax import tree_util
from conftest import assert_tree_close, check_grad, numerical_grad
from programs import (broadcast, control, extras, idioms, inplace, mlp, models, prims,
                      semantics)

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent


def normal(rng, *shape):
    return rng.standard_normal(shape)


def away_from_zero(rng, *shape, low=0.3, high=1.5):
    return rng.choice([-1.0, 1.0], size=shape) * rng.uniform(low, high, size=shape)


def line_of(module, text, after=None):
    """Line number of the only line of ``module``'s file containing ``text``.

    With ``after``, the first such line following the line containing ``after``.
    """
    lines = Path(module.__file__).read_text(encoding="utf-8").splitlines()
    hits = [i for i, line in enumerate(lines, 1) if text in line]
    if after is not None:
        start = line_of(module, after)
        hits = [i for i in hits if i > start][:1]
    assert len(hits) == 1, (text, hits)
    return hits[0]


def tree_vdot(a, b):
    """Sum of elementwise products over matching leaves of two pytrees."""
    return sum(float(np.sum(np.asarray(x) * np.asarray(y)))
               for x, y in zip(tree_util.tree_leaves(a), tree_util.tree_leaves(b)))


def mlp_params(rng):
    return [(normal(rng, 3, 4), normal(rng, 4)), (normal(rng, 4, 2), normal(rng, 2))]


# =============================================================================== API semantics


class TestGradSemantics:
    def test_argnums_default_int(self, rng):
        args = (normal(rng, 3), normal(rng, 3), normal(rng, 3))
        g = check_grad(semantics.three_args, args)
        assert isinstance(g, np.ndarray) and g.shape == (3,)

    @pytest.mark.parametrize("argnums", [1, 2, -1, -3, (0, 2), (2, 0), (0, 1, 2), (-1,),
                                         (1,)])
    def test_argnums(self, rng, argnums):
        args = (normal(rng, 3), normal(rng, 3), normal(rng, 3))
        check_grad(semantics.three_args, args, argnums=argnums)

    def test_argnums_tuple_of_one_returns_tuple(self, rng):
        args = (normal(rng, 3), normal(rng, 3), normal(rng, 3))
        g = astjax.grad(semantics.three_args, argnums=(1,))(*args)
        assert isinstance(g, tuple) and len(g) == 1

    def test_argnums_out_of_range(self, rng):
        args = (normal(rng, 3), normal(rng, 3), normal(rng, 3))
        with pytest.raises((TypeError, ValueError)):
            astjax.grad(semantics.three_args, argnums=3)(*args)
        with pytest.raises((TypeError, ValueError)):
            astjax.grad(semantics.three_args, argnums=-4)(*args)

    def test_value_and_grad(self, rng):
        args = (normal(rng, 3), normal(rng, 3), normal(rng, 3))
        v, g = astjax.value_and_grad(semantics.three_args)(*args)
        np.testing.assert_allclose(v, semantics.three_args(*args), rtol=1e-12)
        assert_tree_close(g, numerical_grad(semantics.three_args, args))

    def test_value_and_grad_argnums_tuple(self, rng):
        args = (normal(rng, 3), normal(rng, 3), normal(rng, 3))
        v, g = astjax.value_and_grad(semantics.three_args, argnums=(0, 2))(*args)
        np.testing.assert_allclose(v, semantics.three_args(*args), rtol=1e-12)
        assert isinstance(g, tuple) and len(g) == 2
        assert_tree_close(g, numerical_grad(semantics.three_args, args, (0, 2)))

    def test_grad_has_aux(self, rng):
        x = normal(rng, 4)
        g, aux = astjax.grad(semantics.with_aux, has_aux=True)(x)
        np.testing.assert_allclose(g, 2 * np.sin(x) * np.cos(x), rtol=1e-12)
        assert set(aux) == {"y", "count"}
        np.testing.assert_allclose(aux["y"], np.sin(x))
        assert aux["count"] == 3

    def test_value_and_grad_has_aux(self, rng):
        x = normal(rng, 4)
        (v, aux), g = astjax.value_and_grad(semantics.with_aux, has_aux=True)(x)
        np.testing.assert_allclose(v, np.sum(np.sin(x) ** 2), rtol=1e-12)
        np.testing.assert_allclose(aux["y"], np.sin(x))
        assert aux["count"] == 3
        np.testing.assert_allclose(g, 2 * np.sin(x) * np.cos(x), rtol=1e-12)

    def test_grad_has_aux_argnums_tuple(self, rng):
        x = normal(rng, 4)
        g, aux = astjax.grad(semantics.with_aux, argnums=(0,), has_aux=True)(x)
        assert isinstance(g, tuple) and len(g) == 1
        np.testing.assert_allclose(g[0], 2 * np.sin(x) * np.cos(x), rtol=1e-12)

    def test_non_scalar_output_is_type_error(self, rng):
        with pytest.raises(TypeError, match="scalar"):
            astjax.grad(semantics.elementwise)(normal(rng, 3))
        with pytest.raises(TypeError, match="scalar"):
            astjax.value_and_grad(semantics.elementwise)(normal(rng, 3))

    @pytest.mark.parametrize("bad", [np.arange(3), np.array([True, False, True]), 3, True,
                                     np.arange(3, dtype=np.int32)],
                             ids=["int64", "bool", "pyint", "pybool", "int32"])
    def test_integer_and_bool_inputs_are_type_errors(self, bad):
        with pytest.raises(TypeError):
            astjax.grad(prims.sin)(bad)

    def test_integer_input_in_pytree_is_type_error(self):
        params = {"w": np.ones(3), "n": np.arange(3)}
        with pytest.raises(TypeError):
            astjax.grad(semantics.ignores_tree)(params, np.ones(2))

    def test_integer_argument_not_differentiated_is_fine(self, rng):
        check_grad(semantics.with_int_arg, (normal(rng, 3), 2))
        check_grad(semantics.with_int_arg, (normal(rng, 3), 3))

    def test_float32_inputs_give_float32_gradients(self, rng):
        x = normal(rng, 3, 4).astype(np.float32)
        w = normal(rng, 4).astype(np.float32)
        gx, gw = astjax.grad(semantics.float32_fn, argnums=(0, 1))(x, w)
        assert gx.dtype == np.float32 and gx.shape == (3, 4)
        assert gw.dtype == np.float32 and gw.shape == (4,)
        ex, ew = numerical_grad(semantics.float32_fn, (x.astype(np.float64),
                                                       w.astype(np.float64)), (0, 1))
        np.testing.assert_allclose(gx, ex, rtol=1e-3, atol=1e-4)
        np.testing.assert_allclose(gw, ew, rtol=1e-3, atol=1e-4)

    def test_float32_mlp(self, rng):
        params = [(W.astype(np.float32), b.astype(np.float32)) for W, b in mlp_params(rng)]
        x = normal(rng, 5, 3).astype(np.float32)
        y = normal(rng, 5, 2).astype(np.float32)
        g = astjax.grad(mlp.loss)(params, (x, y))
        for leaf in tree_util.tree_leaves(g):
            assert leaf.dtype == np.float32

    def test_python_float_input(self):
        g = astjax.grad(semantics.scalar_fn)(1.3)
        assert np.ndim(g) == 0
        assert np.issubdtype(np.asarray(g).dtype, np.floating)
        expected = np.cos(1.3) * 1.3 + np.sin(1.3) + 2 * 1.3
        assert float(g) == pytest.approx(expected, rel=1e-12)
        check_grad(semantics.scalar_fn, (0.4,))

    def test_python_floats_several_args(self):
        check_grad(semantics.scalar_pair, (0.7, -1.2), argnums=(0, 1))

    def test_python_float_mixed_with_array(self, rng):
        check_grad(semantics.scaled_loss, (0.7, normal(rng, 3, 4)), argnums=(0, 1))

    def test_keyword_arguments_pass_through(self, rng):
        x = normal(rng, 3)
        g1 = astjax.grad(semantics.looped)(x, n=3)
        g2 = astjax.grad(semantics.looped)(x, 3)
        np.testing.assert_allclose(g1, g2)
        check_grad(semantics.looped, (x, 3))

    def test_gradient_of_ignored_input_is_zeros(self, rng):
        x = normal(rng, 3, 4)
        g = astjax.grad(semantics.ignores_x)(x, normal(rng, 2))
        assert isinstance(g, np.ndarray)
        assert g.shape == (3, 4) and g.dtype == np.float64
        assert not np.any(g)

    def test_gradient_of_ignored_pytree_is_zeros(self, rng):
        params = {"w": normal(rng, 2, 2), "b": [normal(rng, 3), 0.5]}
        g = astjax.grad(semantics.ignores_tree)(params, normal(rng, 2))
        assert tree_util.tree_structure(g) == tree_util.tree_structure(params)
        for gl, pl in zip(tree_util.tree_leaves(g), tree_util.tree_leaves(params)):
            assert np.shape(gl) == np.shape(pl)
            assert not np.any(gl)

    def test_gradient_of_constant_function_is_zeros(self, rng):
        g = astjax.grad(semantics.constant_output)(normal(rng, 3))
        assert np.shape(g) == (3,) and not np.any(g)

    def test_float32_zero_gradient_keeps_dtype(self):
        g = astjax.grad(semantics.ignores_x)(np.ones(3, np.float32), np.ones(2))
        assert g.dtype == np.float32 and g.shape == (3,)

    def test_grad_returns_callable_with_name(self):
        g = astjax.grad(semantics.three_args)
        assert callable(g)
        assert "three_args" in getattr(g, "__name__", "") + repr(g)


class TestVjp:
    def test_single_primal(self, rng):
        x = normal(rng, 3, 2)
        out, vjp_fn = astjax.vjp(semantics.elementwise, x)
        np.testing.assert_allclose(out, np.sin(x) * 2.0)
        ct = normal(rng, 3, 2)
        cts = vjp_fn(ct)
        assert isinstance(cts, tuple) and len(cts) == 1
        np.testing.assert_allclose(cts[0], ct * 2.0 * np.cos(x), rtol=1e-12)

    def test_two_primals_pytree_output(self, rng):
        x, y = normal(rng, 3), normal(rng, 3)
        out, vjp_fn = astjax.vjp(semantics.two_in_two_out, x, y)
        ref = semantics.two_in_two_out(x, y)
        assert isinstance(out, tuple) and len(out) == 2
        np.testing.assert_allclose(out[0], ref[0])
        np.testing.assert_allclose(out[1], ref[1])
        ct = (normal(rng, 3), 0.7)
        gx, gy = vjp_fn(ct)
        expected = numerical_grad(lambda a, b: tree_vdot(ct, semantics.two_in_two_out(a, b)),
                                  (x, y), (0, 1))
        assert_tree_close((gx, gy), expected)

    def test_has_aux(self, rng):
        x = normal(rng, 4)
        out, vjp_fn, aux = astjax.vjp(semantics.vjp_with_aux, x, has_aux=True)
        np.testing.assert_allclose(out, np.tanh(x) * 3.0)
        np.testing.assert_allclose(aux, np.sum(np.tanh(x)))
        ct = normal(rng, 4)
        (gx,) = vjp_fn(ct)
        np.testing.assert_allclose(gx, ct * 3.0 * (1 - np.tanh(x) ** 2), rtol=1e-12)

    def test_vjp_fn_can_be_called_twice(self, rng):
        x = normal(rng, 3)
        out, vjp_fn = astjax.vjp(semantics.loop_fixed, x)
        np.testing.assert_allclose(out, semantics.loop_fixed(x))
        for _ in range(2):
            ct = normal(rng, 3)
            (gx,) = vjp_fn(ct)
            expected = numerical_grad(lambda a: tree_vdot(ct, semantics.loop_fixed(a)), (x,))
            assert_tree_close(gx, expected)

    def test_dict_and_nested_output(self, rng):
        x = normal(rng, 3)
        out, vjp_fn = astjax.vjp(mlp.pytree_output, x)
        ref = mlp.pytree_output(x)
        assert tree_util.tree_structure(out) == tree_util.tree_structure(ref)
        assert_tree_close(out, ref, rtol=1e-12, atol=0, what="output")
        ct = tree_util.tree_map(lambda leaf: normal(rng, *np.shape(leaf)), ref)
        (gx,) = vjp_fn(ct)
        expected = numerical_grad(lambda a: tree_vdot(ct, mlp.pytree_output(a)), (x,))
        assert_tree_close(gx, expected)

    def test_list_input_and_output(self, rng):
        xs = [normal(rng, 2), normal(rng, 3)]
        out, vjp_fn = astjax.vjp(mlp.list_output, xs)
        assert isinstance(out, list) and len(out) == 2
        ct = [normal(rng, 2), normal(rng, 3)]
        (gxs,) = vjp_fn(ct)
        assert isinstance(gxs, list)
        expected = numerical_grad(lambda a: tree_vdot(ct, mlp.list_output(a)), (xs,))
        assert_tree_close(gxs, expected)

    def test_scalar_output_vjp_matches_grad(self, rng):
        args = (normal(rng, 3), normal(rng, 3), normal(rng, 3))
        out, vjp_fn = astjax.vjp(semantics.three_args, *args)
        cts = vjp_fn(np.float64(1.0))
        assert len(cts) == 3
        g = astjax.grad(semantics.three_args, argnums=(0, 1, 2))(*args)
        for a, b in zip(cts, g):
            np.testing.assert_allclose(a, b, rtol=1e-12)

    def test_cotangent_shape_mismatch(self, rng):
        out, vjp_fn = astjax.vjp(semantics.elementwise, normal(rng, 3))
        with pytest.raises((TypeError, ValueError)):
            vjp_fn(np.ones(4))


# ==================================================================================== pytrees


class TestPytrees:
    def test_mlp_list_of_tuples(self, rng):
        params = mlp_params(rng)
        batch = (normal(rng, 5, 3), normal(rng, 5, 2))
        g = check_grad(mlp.loss, (params, batch))
        assert isinstance(g, list) and len(g) == 2
        assert all(isinstance(layer, tuple) and len(layer) == 2 for layer in g)

    def test_mlp_all_arguments(self, rng):
        args = (mlp_params(rng), normal(rng, 5, 3), normal(rng, 5, 2))
        check_grad(mlp.loss_xy, args, argnums=(0, 1, 2))

    def test_mlp_batch_tuple_gradient(self, rng):
        check_grad(mlp.loss, (mlp_params(rng), (normal(rng, 5, 3), normal(rng, 5, 2))),
                   argnums=1)

    def test_mlp_value_and_grad(self, rng):
        params = mlp_params(rng)
        batch = (normal(rng, 5, 3), normal(rng, 5, 2))
        v, g = astjax.value_and_grad(mlp.loss)(params, batch)
        np.testing.assert_allclose(v, mlp.loss(params, batch), rtol=1e-12)
        assert_tree_close(g, numerical_grad(mlp.loss, (params, batch)))

    def test_mlp_three_layers(self, rng):
        params = mlp_params(rng) + [(normal(rng, 2, 3), normal(rng, 3))]
        check_grad(mlp.loss, (params, (normal(rng, 4, 3), normal(rng, 4, 3))))

    def test_mlp_training_step_reduces_loss(self, rng):
        params = mlp_params(rng)
        batch = (normal(rng, 8, 3), normal(rng, 8, 2))
        dloss = astjax.grad(mlp.loss)
        before = mlp.loss(params, batch)
        for _ in range(5):
            g = dloss(params, batch)
            params = [(W - 0.01 * dW, b - 0.01 * db) for (W, b), (dW, db) in zip(params, g)]
        assert mlp.loss(params, batch) < before

    def test_dict(self, rng):
        params = {"w1": normal(rng, 3, 4), "b1": normal(rng, 4), "w2": normal(rng, 4, 2)}
        g = check_grad(mlp.dict_loss, (params, normal(rng, 5, 3)))
        assert isinstance(g, dict) and set(g) == set(params)

    def test_dict_iteration(self, rng):
        params = {"a": normal(rng, 3), "b": normal(rng, 3)}
        check_grad(mlp.dict_loop_loss, (params, normal(rng, 3)))

    def test_nested_tuples_with_python_float(self, rng):
        tree = ((normal(rng, 3), (normal(rng, 2), normal(rng, 2))), 0.8)
        g = check_grad(mlp.nested_loss, (tree, normal(rng, 3)))
        assert isinstance(g[1], (float, np.floating, np.ndarray)) and np.ndim(g[1]) == 0

    def test_none_leaf(self, rng):
        params = (normal(rng, 3), None, normal(rng, 3))
        g = check_grad(mlp.none_leaf_loss, (params, normal(rng, 3)))
        assert g[1] is None

    def test_namedtuple(self, rng):
        layer = mlp.Linear(normal(rng, 3, 2), normal(rng, 2))
        g = check_grad(mlp.namedtuple_loss, (layer, normal(rng, 4, 3)))
        assert isinstance(g, mlp.Linear)

    def test_namedtuple_unpacked(self, rng):
        layer = mlp.Linear(normal(rng, 3, 2), normal(rng, 2))
        g = check_grad(mlp.namedtuple_unpack_loss, (layer, normal(rng, 4, 3)))
        assert isinstance(g, mlp.Linear)

    def test_registered_dataclass(self, rng):
        params = mlp.Params(w=normal(rng, 3, 2), b=normal(rng, 2))
        g = check_grad(mlp.dataclass_loss, (params, normal(rng, 4, 3)))
        assert isinstance(g, mlp.Params)


# =============================================================================== control flow


class TestControlFlow:
    @pytest.mark.parametrize("x", [[0.3, -0.2, 0.5], [-0.3, 0.1, -0.2], [-1.0, -0.5, 0.2]],
                             ids=["if", "elif", "else"])
    def test_if_elif_else(self, x):
        x = np.array(x)
        v, _ = astjax.value_and_grad(control.if_elif_else)(x)
        assert v == pytest.approx(control.if_elif_else(x))
        check_grad(control.if_elif_else, (x,))

    @pytest.mark.parametrize("x", [[0.9, -0.1], [0.1, -0.4]], ids=["taken", "not-taken"])
    def test_if_without_else(self, x):
        check_grad(control.if_without_else, (np.array(x),))

    @pytest.mark.parametrize("n", [0, 1, 3])
    def test_for_range(self, rng, n):
        check_grad(control.for_range, (normal(rng, 3), n))

    def test_for_range_start_step(self, rng):
        check_grad(control.for_range_start_step, (normal(rng, 3),))

    def test_for_over_array_rows(self, rng):
        check_grad(control.for_rows, (normal(rng, 3, 4),))

    def test_for_over_list(self, rng):
        ws = [normal(rng, 3), normal(rng, 3), normal(rng, 3)]
        check_grad(control.for_list, (ws, normal(rng, 3)), argnums=(0, 1))

    def test_for_zip(self, rng):
        xs = [normal(rng, 2), normal(rng, 3)]
        ys = (normal(rng, 2), normal(rng, 3), normal(rng, 1))
        check_grad(control.for_zip, (xs, ys), argnums=(0, 1))

    def test_for_enumerate(self, rng):
        check_grad(control.for_enumerate, (normal(rng, 3, 4),))

    def test_for_reversed(self, rng):
        check_grad(control.for_reversed, (normal(rng, 3, 4),))

    @pytest.mark.parametrize("scale", [0.1, 3.0], ids=["zero-trips", "several-trips"])
    def test_while_data_dependent(self, rng, scale):
        check_grad(control.while_data, (normal(rng, 4) * scale,))

    @pytest.mark.parametrize("n", [0, 3])
    def test_while_counter(self, rng, n):
        check_grad(control.while_counter, (normal(rng, 3), n))

    def test_break(self, rng):
        check_grad(control.loop_break, (normal(rng, 4),))
        check_grad(control.loop_break, (np.array([-2.0, -1.0, -3.0]),))

    def test_while_true_break(self, rng):
        check_grad(control.while_break, (normal(rng, 4),))

    def test_continue(self, rng):
        x = np.array([[0.5, 0.2, -0.1], [-1.0, 0.3, 0.1], [0.4, 0.4, 0.4], [-0.2, -0.2, 0.1]])
        check_grad(control.loop_continue, (x,))

    @pytest.mark.parametrize("x", [[0.5, 0.5, 0.5], [-0.5, -0.6, -0.2]],
                             ids=["returns-early", "runs-through"])
    def test_early_return_in_loop(self, x):
        x = np.array(x)
        v, _ = astjax.value_and_grad(control.early_return_loop)(x)
        assert v == pytest.approx(control.early_return_loop(x))
        check_grad(control.early_return_loop, (x,))

    @pytest.mark.parametrize("x", [[0.5, 0.1], [-0.5, 0.1]], ids=["early", "late"])
    def test_early_return_in_branch(self, x):
        check_grad(control.early_return_branch, (np.array(x),))

    def test_nested_loops(self, rng):
        check_grad(control.nested_loops, (normal(rng, 2, 3),))

    def test_nested_loops_matrix(self, rng):
        check_grad(control.nested_loop_matrix, (normal(rng, 3, 3), normal(rng, 3)),
                   argnums=(0, 1))

    def test_zero_iteration_loops(self, rng):
        check_grad(control.zero_trip_loops, (normal(rng, 3), []))
        check_grad(control.zero_trip_loops, (normal(rng, 3), [np.ones(3), np.ones(3)]))

    def test_loop_collecting_into_list(self, rng):
        check_grad(control.loop_collect, (normal(rng, 3),))

    @pytest.mark.parametrize("x", [[0.5, 0.2], [-0.5, 0.2]], ids=["for", "while"])
    def test_loop_in_branch(self, x):
        check_grad(control.loop_in_branch, (np.array(x),))

    def test_branch_in_loop(self, rng):
        check_grad(control.branch_in_loop, (normal(rng, 3),))


# ============================================================================ everyday Python


class TestIdioms:
    @pytest.mark.parametrize("sign", [1.0, -1.0])
    def test_conditional_expression(self, sign):
        check_grad(idioms.ternary, (sign * np.array([0.5, 0.3, -0.1]),))

    def test_list_comprehension(self, rng):
        check_grad(idioms.list_comp, (normal(rng, 3),))

    def test_list_comprehension_with_if(self, rng):
        check_grad(idioms.list_comp_if, (normal(rng, 4, 2),))

    def test_nested_list_comprehension(self, rng):
        check_grad(idioms.list_comp_nested, (normal(rng, 3, 2),))

    def test_generator_expression(self, rng):
        check_grad(idioms.generator_sum, (normal(rng, 3, 4),))

    def test_augmented_assignment(self, rng):
        check_grad(idioms.augmented, (normal(rng, 3),))

    def test_tuple_swap(self, rng):
        check_grad(idioms.tuple_swap, (normal(rng, 3), normal(rng, 3)), argnums=(0, 1))

    def test_starred_unpacking(self, rng):
        xs = [normal(rng, 2), normal(rng, 2), normal(rng, 2)]
        check_grad(idioms.starred, (xs,))

    @pytest.mark.parametrize("scale", [1.0, 30.0])
    def test_chained_comparison(self, scale):
        check_grad(idioms.chained, (scale * np.array([0.5, 0.3, 0.1]),))

    @pytest.mark.parametrize("x", [[0.5, 0.2], [-0.5, 0.2], [-6.0, 1.0]])
    def test_and_or(self, x):
        check_grad(idioms.and_or, (np.array(x), 1.5), argnums=(0, 1))

    def test_or_falls_back(self):
        check_grad(idioms.and_or, (np.array([0.5, 0.2]), 0.0))

    def test_nested_def_closure(self, rng):
        check_grad(idioms.nested_def, (normal(rng, 3), normal(rng, 2)), argnums=(0, 1))

    def test_nested_def_default_argument(self, rng):
        check_grad(idioms.nested_def_default, (normal(rng, 3),))

    def test_lambdas_and_closures(self, rng):
        check_grad(idioms.lambdas, (normal(rng, 3), normal(rng, 3)), argnums=(0, 1))

    def test_lambdas_in_a_tuple(self, rng):
        check_grad(idioms.lambda_tuple, (normal(rng, 3),))

    def test_lambda_called_inline(self, rng):
        check_grad(idioms.lambda_called_inline, (normal(rng, 3),))

    def test_several_module_lambdas_on_one_line(self, rng):
        x = normal(rng, 4)
        np.testing.assert_allclose(astjax.grad(idioms.sq_sum)(x), 2 * x)
        np.testing.assert_allclose(astjax.grad(idioms.sin_sum)(x), np.cos(x))
        np.testing.assert_allclose(astjax.grad(idioms.two_lambdas[0])(x), 3 * x * x)
        np.testing.assert_allclose(astjax.grad(idioms.two_lambdas[1])(x), -np.sin(x))

    def test_shape_ndim_len_are_static(self, rng):
        check_grad(idioms.static_facts, (normal(rng, 3, 4),))
        check_grad(idioms.static_facts, (normal(rng, 2, 5),))

    def test_math_functions_on_python_floats(self):
        g = check_grad(idioms.math_scalars, (1.3,))
        assert np.ndim(g) == 0

    def test_builtins(self, rng):
        check_grad(idioms.builtins_mix, (normal(rng, 3, 4), 0.8), argnums=(0, 1))

    @pytest.mark.parametrize("a,b", [(0.7, 1.9), (1.8, 0.4)])
    def test_builtin_max_min_abs(self, a, b):
        check_grad(idioms.builtin_max_values, (a, b), argnums=(0, 1))

    def test_module_constants_and_global_arrays(self, rng):
        check_grad(idioms.uses_globals, (normal(rng, 3),))

    def test_rebinding_a_global_is_seen(self, rng, monkeypatch):
        x = normal(rng, 3)
        dfun = astjax.grad(idioms.uses_globals)
        g1 = dfun(x)
        monkeypatch.setattr(idioms, "SCALE", 5.0)
        monkeypatch.setattr(idioms, "W_GLOBAL", np.ones((4, 3)))
        g2 = dfun(x)
        np.testing.assert_allclose(g2, 10.0 * x + 4.0)
        assert not np.allclose(g1, g2)
        np.testing.assert_allclose(astjax.grad(idioms.uses_globals)(x), g2)

    def test_calls_function_in_same_module(self, rng):
        check_grad(idioms.calls_same_module, (normal(rng, 6),))

    def test_calls_function_in_other_module(self, rng):
        check_grad(idioms.calls_other_module, (normal(rng, 3),))

    def test_default_and_keyword_arguments(self, rng):
        x = normal(rng, 3)
        check_grad(idioms.with_keyword, (x,))
        check_grad(idioms.with_keyword, (x, 1.5), argnums=(0, 1))
        check_grad(idioms.with_keyword, (x, 1.5, -0.3), argnums=(0, 1, 2))

    def test_functools_partial(self, rng):
        x = normal(rng, 3)
        f = functools.partial(idioms.with_keyword, scale=3.0)
        g = astjax.grad(f)(x)
        np.testing.assert_allclose(g, 3.0 * (1 - np.tanh(3.0 * x) ** 2), rtol=1e-12)
        f2 = functools.partial(idioms.with_keyword, shift=0.5)
        check_grad(f2, (x, 0.8), argnums=(0, 1))

    def test_functools_partial_positional(self, rng):
        x = normal(rng, 3)
        f = functools.partial(semantics.three_args, x)
        check_grad(f, (normal(rng, 3), normal(rng, 3)), argnums=(0, 1))

    def test_partial_called_inside(self, rng):
        check_grad(idioms.calls_partial, (normal(rng, 3),))

    def test_decorated_function(self, rng):
        check_grad(idioms.decorated, (normal(rng, 3),))

    def test_calls_decorated_function(self, rng):
        check_grad(idioms.calls_decorated, (normal(rng, 3),))

    def test_stop_gradient(self, rng):
        x = normal(rng, 4)
        g = astjax.grad(idioms.stop_grad)(x)
        np.testing.assert_allclose(g, x + x * np.cos(x), rtol=1e-12)

    def test_stop_gradient_is_identity_in_value(self, rng):
        x = normal(rng, 4)
        v, _ = astjax.value_and_grad(idioms.stop_grad)(x)
        assert v == pytest.approx(idioms.stop_grad(x))

    def test_python_scalars_with_arrays(self, rng):
        check_grad(idioms.mixed_scalars, (normal(rng, 3, 2),))


class TestMoreEverydayCode:
    @pytest.mark.parametrize("act", ["tanh", "sin", "identity"])
    def test_static_string_argument(self, rng, act):
        check_grad(extras.activation, (normal(rng, 3), act))

    def test_none_default(self, rng):
        x = normal(rng, 3)
        check_grad(extras.optional_weight, (x,))
        check_grad(extras.optional_weight, (x, 0.5), argnums=(0, 1))

    def test_assert_and_untaken_raise(self, rng):
        check_grad(extras.with_assert, (normal(rng, 3, 4),))

    def test_assert_fails_like_python(self, rng):
        with pytest.raises(AssertionError, match="need a matrix"):
            astjax.grad(extras.with_assert)(normal(rng, 3))

    def test_print_inside(self, rng, capsys):
        check_grad(extras.with_print, (normal(rng, 3),))
        assert "debug" in capsys.readouterr().out

    def test_helper_returning_tuple(self, rng):
        check_grad(extras.uses_tuple_helper, (normal(rng, 3, 4),))

    @pytest.mark.parametrize("shift", [0.0, -3.0], ids=["found", "not-found"])
    def test_return_from_loop_over_rows(self, rng, shift):
        x = normal(rng, 3, 2) + shift
        check_grad(extras.first_positive, (x,))

    @pytest.mark.parametrize("scale", [1.0, 0.1], ids=["early", "never"])
    def test_return_from_nested_loop(self, rng, scale):
        check_grad(extras.early_return_nested, (normal(rng, 3, 3) * scale,))

    def test_break_inner_loop_only(self, rng):
        check_grad(extras.inner_break, (normal(rng, 3, 4),))

    @pytest.mark.parametrize("sign", [1.0, -1.0])
    def test_return_in_while(self, sign):
        check_grad(extras.return_in_while, (sign * np.array([0.3, 0.5, 0.2]),))

    def test_local_helper_with_early_return(self):
        check_grad(extras.helper_with_early_return, (np.array([0.2, 0.1, 0.1]),))

    def test_augmented_python_float_accumulator(self, rng):
        check_grad(extras.accumulate_augmented, (normal(rng, 3, 4),))

    def test_np_array_of_scalars(self, rng):
        check_grad(extras.array_of_scalars, (normal(rng, 3, 4),))

    def test_method_chains(self, rng):
        check_grad(extras.method_chains, (normal(rng, 3, 4),))

    def test_newaxis(self, rng):
        check_grad(extras.newaxis_indexing, (normal(rng, 3),))

    def test_list_indexed_in_loop(self, rng):
        xs = [normal(rng, 2), normal(rng, 2), normal(rng, 2)]
        check_grad(extras.list_of_arrays_by_index, (xs,))

    def test_comprehensions_over_zip_and_enumerate(self, rng):
        xs = [normal(rng, 2), normal(rng, 3)]
        ys = [normal(rng, 2), normal(rng, 3)]
        check_grad(extras.comprehension_zip_enumerate, (xs, ys), argnums=(0, 1))

    def test_integer_index_arithmetic(self, rng):
        check_grad(extras.integer_arithmetic_indices, (normal(rng, 4),))

    def test_nested_def_in_loop_closes_over_loop_variable(self, rng):
        check_grad(extras.closure_in_loop, (normal(rng, 3),))

    def test_other_module_in_loop(self, rng):
        check_grad(extras.cross_module_in_loop, (normal(rng, 3),))

    def test_rebinding_parameter(self, rng):
        check_grad(extras.reuse_name, (normal(rng, 3),))

    def test_values_kept_in_list_across_iterations(self, rng):
        check_grad(extras.value_used_after_overwrite, (normal(rng, 3),))

    def test_dict_item_assignment(self, rng):
        check_grad(extras.dict_setitem, (normal(rng, 3),))

    def test_list_concatenation(self, rng):
        check_grad(extras.list_concat, (normal(rng, 3),))

    def test_dict_items_and_values(self, rng):
        params = {"a": normal(rng, 3), "b": normal(rng, 3)}
        check_grad(extras.dict_items_loop, (params, normal(rng, 3)), argnums=(0, 1))

    @pytest.mark.parametrize("sign", [1.0, -1.0])
    def test_walrus(self, sign):
        check_grad(extras.walrus, (sign * np.array([0.5, 0.2]),))

    def test_bound_method_and_callable_object(self, rng):
        model = extras.Model(normal(rng, 3, 2))
        check_grad(model.loss, (normal(rng, 4, 3),))
        check_grad(model, (normal(rng, 2),))
        check_grad(extras.Model.static_loss, (normal(rng, 2),))

    @pytest.mark.parametrize("name", ["passes_numpy_function", "passes_user_function",
                                      "passes_lambda"])
    def test_function_passed_to_user_function(self, rng, name):
        check_grad(getattr(extras, name), (normal(rng, 3),))

    @pytest.mark.parametrize("act", [np.tanh, np.sin], ids=["tanh", "sin"])
    def test_function_as_argument(self, rng, act):
        check_grad(extras.activation_argument, (normal(rng, 3), act))

    def test_grad_called_inside_differentiated_function(self):
        # run in a subprocess: a hang (e.g. a lock taken twice) must fail, not stall the suite
        script = (
            "import sys\n"
            f"sys.path.insert(0, {str(TESTS)!r})\n"
            "import numpy as np\n"
            "from conftest import check_grad\n"
            "from programs import extras\n"
            "check_grad(extras.uses_grad_inside, (np.array([0.3, -1.2, 0.8]),))\n"
            "print('ok')\n")
        try:
            res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                 cwd=str(REPO), timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("grad(f) where f calls a grad-transformed function hangs")
        assert res.returncode == 0 and "ok" in res.stdout, res.stderr[-3000:]

    def test_grad_of_grad(self):
        d2 = astjax.grad(astjax.grad(semantics.scalar_fn))(1.3)
        a = 1.3
        assert float(d2) == pytest.approx(-np.sin(a) * a + 2 * np.cos(a) + 2, rel=1e-10)


class TestModels:
    def test_data_dependent_trip_count_via_int(self, rng):
        check_grad(models.data_trip_count, (normal(rng, 5),))

    def test_accumulate_into_same_slot(self, rng):
        check_grad(models.accumulate_same_slot, (normal(rng, 5),))

    def test_tuple_swap_in_while(self, rng):
        check_grad(models.swap_in_while, (normal(rng, 3), normal(rng, 3)), argnums=(0, 1))

    def test_rnn(self, rng):
        xs = [normal(rng, 3) for _ in range(4)]
        check_grad(models.rnn, (normal(rng, 3, 3) * 0.5, xs, normal(rng, 3)),
                   argnums=(0, 1, 2))

    def test_softmax_cross_entropy(self, rng):
        labels = np.eye(3)[[0, 2, 1, 1]]
        check_grad(models.softmax_xent, (normal(rng, 4, 3), labels))

    def test_layer_norm(self, rng):
        check_grad(models.layer_norm, (normal(rng, 4, 5), normal(rng, 5), normal(rng, 5)),
                   argnums=(0, 1, 2))

    def test_wave_simulation(self, rng):
        check_grad(models.wave, (rng.uniform(0.5, 1.0, 8), normal(rng, 8), 5), argnums=(0, 1))


# ============================================================================ in-place updates


class TestInPlace:
    def test_set_item(self, rng):
        check_grad(inplace.set_item, (normal(rng, 4),))

    def test_set_row_and_column(self, rng):
        check_grad(inplace.set_row, (normal(rng, 3, 4), normal(rng, 4)), argnums=(0, 1))

    def test_slice_augmented(self, rng):
        check_grad(inplace.slice_add, (normal(rng, 4),))

    def test_integer_array_index(self, rng):
        check_grad(inplace.int_array_set, (normal(rng, 4), normal(rng, 2)), argnums=(0, 1))

    def test_boolean_mask(self, rng):
        check_grad(inplace.mask_set, (away_from_zero(rng, 3, 4),))

    def test_boolean_mask_values(self, rng):
        check_grad(inplace.mask_set_values, (away_from_zero(rng, 3, 4), normal(rng, 3, 4)),
                   argnums=(0, 1))

    def test_fill_in_loop(self, rng):
        check_grad(inplace.fill_in_loop, (normal(rng, 5),))

    def test_update_in_nested_loop(self, rng):
        check_grad(inplace.update_in_loop_2d, (normal(rng, 3, 4),))

    def test_overwrite_after_use(self, rng):
        check_grad(inplace.overwrite_used_value, (normal(rng, 3),))

    def test_inputs_are_not_mutated(self, rng):
        x = normal(rng, 4)
        before = x.copy()
        astjax.grad(inplace.set_item)(x)
        astjax.grad(inplace.slice_add)(x)
        np.testing.assert_array_equal(x, before)


# ============================================================================== broadcasting


class TestBroadcasting:
    def test_row_vector(self, rng):
        check_grad(broadcast.add_row, (normal(rng, 3, 4), normal(rng, 4)), argnums=(0, 1))

    def test_column_vector(self, rng):
        check_grad(broadcast.mul_col, (normal(rng, 3, 4), normal(rng, 3, 1)), argnums=(0, 1))

    def test_outer_broadcast(self, rng):
        check_grad(broadcast.outer_like, (normal(rng, 3, 1), normal(rng, 1, 4)),
                   argnums=(0, 1))

    def test_division_unbroadcasts(self, rng):
        check_grad(broadcast.divide, (normal(rng, 3, 4), away_from_zero(rng, 4)),
                   argnums=(0, 1))
        check_grad(broadcast.divide_col, (away_from_zero(rng, 3, 4), normal(rng, 3, 1)),
                   argnums=(0, 1))

    def test_power_broadcast(self, rng):
        check_grad(broadcast.power_broadcast,
                   (rng.uniform(0.5, 1.5, (3, 4)), rng.uniform(0.5, 2.0, 4)), argnums=(0, 1))

    def test_python_float_scalar(self, rng):
        g = check_grad(broadcast.scalar_array, (normal(rng, 3, 4), 1.7), argnums=(0, 1))
        assert np.ndim(g[1]) == 0

    def test_numpy_scalar_and_0d_array(self, rng):
        g = check_grad(broadcast.scalar_0d, (normal(rng, 3, 4), np.float64(0.6)),
                       argnums=(0, 1))
        assert np.shape(g[1]) == ()
        g = check_grad(broadcast.scalar_0d, (normal(rng, 3, 4), np.array(0.6)), argnums=(0, 1))
        assert np.shape(g[1]) == ()

    def test_maximum_broadcast(self, rng):
        check_grad(broadcast.maximum_broadcast, (normal(rng, 3, 4), normal(rng, 4)),
                   argnums=(0, 1))

    def test_where_broadcast(self, rng):
        check_grad(broadcast.where_broadcast, (away_from_zero(rng, 3, 4), normal(rng, 4)),
                   argnums=(0, 1))

    def test_arctan2_broadcast(self, rng):
        check_grad(broadcast.arctan2_broadcast, (normal(rng, 3, 4), away_from_zero(rng, 4)),
                   argnums=(0, 1))

    def test_python_scalars_on_both_sides(self, rng):
        check_grad(broadcast.python_scalars, (rng.uniform(0.5, 1.5, (3, 4)),))

    def test_three_way(self, rng):
        check_grad(broadcast.three_way, (normal(rng, 3, 1), normal(rng, 1, 4), np.array(0.3)),
                   argnums=(0, 1, 2))

    def test_subtract_mean(self, rng):
        check_grad(broadcast.subtract_mean, (normal(rng, 3, 4),))


# ================================================================================= primitives


def _pos(r, *shape):
    return r.uniform(0.5, 2.0, shape)


def _pair_apart(r, *shape):
    x = r.standard_normal(shape)
    return x, x + r.choice([-1.0, 1.0], size=shape) * r.uniform(0.2, 1.0, shape)


CLIP_X = np.array([[-1.2, -0.3, 0.1, 0.9], [0.5, -0.8, 1.5, 0.2], [-0.1, 0.65, -0.45, 0.75]])

PRIMITIVE_CASES = [
    ("exp", lambda r: (normal(r, 3, 4),)),
    ("log", lambda r: (_pos(r, 3, 4),)),
    ("log1p", lambda r: (r.uniform(-0.5, 2.0, (3, 4)),)),
    ("expm1", lambda r: (normal(r, 3, 4),)),
    ("sqrt", lambda r: (_pos(r, 3, 4),)),
    ("sin", lambda r: (normal(r, 3, 4),)),
    ("cos", lambda r: (normal(r, 3, 4),)),
    ("tan", lambda r: (r.uniform(-1.0, 1.0, (3, 4)),)),
    ("arcsin", lambda r: (r.uniform(-0.8, 0.8, (3, 4)),)),
    ("tanh", lambda r: (normal(r, 3, 4),)),
    ("sinh", lambda r: (normal(r, 3, 4),)),
    ("cosh", lambda r: (normal(r, 3, 4),)),
    ("abs_", lambda r: (away_from_zero(r, 3, 4),)),
    ("sign", lambda r: (away_from_zero(r, 3, 4),)),
    ("maximum", lambda r: _pair_apart(r, 3, 4)),
    ("minimum", lambda r: _pair_apart(r, 3, 4)),
    ("clip", lambda r: (CLIP_X.copy(),)),
    ("clip_arrays", lambda r: (CLIP_X.copy(), np.array([-0.5, -0.4, 0.0, 0.3]),
                               np.array([[0.6], [0.8], [0.7]]))),
    ("where", lambda r: (away_from_zero(r, 3, 4), normal(r, 3, 4))),
    ("power", lambda r: (_pos(r, 3, 4), r.uniform(0.5, 2.0, (3, 4)))),
    ("power_int", lambda r: (normal(r, 3, 4),)),
    ("pow_operator", lambda r: (_pos(r, 3, 4), r.uniform(0.5, 2.0, (3, 4)))),
    ("arctan2", lambda r: (normal(r, 3, 4), away_from_zero(r, 3, 4))),
    ("square", lambda r: (normal(r, 3, 4),)),
    ("reciprocal", lambda r: (away_from_zero(r, 3, 4, low=0.5),)),
    ("divide", lambda r: (normal(r, 3, 4), away_from_zero(r, 3, 4, low=0.5))),
    ("negative_subtract", lambda r: (normal(r, 3, 4), normal(r, 3, 4))),
    ("sum_axis0", lambda r: (normal(r, 3, 4),)),
    ("sum_axis_neg_keepdims", lambda r: (normal(r, 3, 4),)),
    ("sum_axis_tuple", lambda r: (normal(r, 2, 3, 4),)),
    ("mean", lambda r: (normal(r, 3, 4),)),
    ("mean_keepdims", lambda r: (normal(r, 3, 4),)),
    ("prod", lambda r: (r.uniform(0.5, 1.5, (3, 4)),)),
    ("max_", lambda r: (normal(r, 3, 4),)),
    ("min_", lambda r: (normal(r, 3, 4),)),
    ("var", lambda r: (normal(r, 3, 4),)),
    ("std", lambda r: (normal(r, 3, 4),)),
    ("cumsum", lambda r: (normal(r, 3, 4),)),
    ("logsumexp", lambda r: (normal(r, 3, 4),)),
    ("dot_mm", lambda r: (normal(r, 3, 4), normal(r, 4, 2))),
    ("dot_mv", lambda r: (normal(r, 3, 4), normal(r, 4))),
    ("dot_vv", lambda r: (normal(r, 4), normal(r, 4))),
    ("matmul", lambda r: (normal(r, 3, 4), normal(r, 4, 2))),
    ("matmul_batched", lambda r: (normal(r, 2, 3, 4), normal(r, 4, 5))),
    ("matmul_vec", lambda r: (normal(r, 3, 4), normal(r, 4))),
    ("einsum_mm", lambda r: (normal(r, 3, 4), normal(r, 4, 2))),
    ("einsum_trace", lambda r: (normal(r, 3, 3),)),
    ("einsum_batched", lambda r: (normal(r, 2, 3, 4), normal(r, 2, 4, 2))),
    ("outer", lambda r: (normal(r, 3), normal(r, 4))),
    ("norm", lambda r: (normal(r, 3, 4),)),
    ("norm_vector", lambda r: (normal(r, 4),)),
    ("reshape", lambda r: (normal(r, 3, 4),)),
    ("transpose", lambda r: (normal(r, 3, 4),)),
    ("transpose_axes", lambda r: (normal(r, 2, 3, 4),)),
    ("dot_T", lambda r: (normal(r, 3, 4),)),
    ("swapaxes", lambda r: (normal(r, 2, 3, 4),)),
    ("expand_dims", lambda r: (normal(r, 3, 4),)),
    ("squeeze", lambda r: (normal(r, 3, 1, 4),)),
    ("concatenate", lambda r: (normal(r, 3, 4), normal(r, 1, 4))),
    ("stack", lambda r: (normal(r, 3, 4), normal(r, 3, 4))),
    ("split", lambda r: (normal(r, 3, 6),)),
    ("pad", lambda r: (normal(r, 3, 4),)),
    ("take", lambda r: (normal(r, 3, 4),)),
    ("basic_indexing", lambda r: (normal(r, 3, 4),)),
    ("int_array_indexing", lambda r: (normal(r, 3, 4),)),
    ("list_indexing", lambda r: (normal(r, 3, 4),)),
    ("bool_mask_indexing", lambda r: (away_from_zero(r, 3, 4),)),
    ("creation", lambda r: (normal(r, 3, 4),)),
    ("astype", lambda r: (normal(r, 3, 4),)),
    ("methods", lambda r: (normal(r, 3, 4), normal(r, 4, 2))),
    ("methods_reductions", lambda r: (r.uniform(0.5, 1.5, (3, 4)),)),
    ("methods_shapes", lambda r: (normal(r, 3, 4) * 0.3 + np.array([0.0, 0.0, 1.0, -1.0]),)),
]


@pytest.mark.parametrize("name,make", PRIMITIVE_CASES, ids=[c[0] for c in PRIMITIVE_CASES])
def test_primitive_gradients(name, make):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    args = make(rng)
    f = getattr(prims, name)
    argnums = 0 if len(args) == 1 else tuple(range(len(args)))
    v, _ = astjax.value_and_grad(f, argnums=argnums)(*args)
    np.testing.assert_allclose(v, f(*args), rtol=1e-12)
    check_grad(f, args, argnums=argnums)


# ================================================================================ make_source


def _mlp_args():
    rng = np.random.default_rng(0)
    return mlp_params(rng), (normal(rng, 5, 3), normal(rng, 5, 2))


_SUBPROCESS_SCRIPT = r"""
import sys
sys.path.insert(0, {tests!r})
import numpy as np
import astjax
from programs import mlp
rng = np.random.default_rng(0)
n = lambda *s: rng.standard_normal(s)
params = [(n(3, 4), n(4)), (n(4, 2), n(2))]
batch = (n(5, 3), n(5, 2))
sys.stdout.write(astjax.make_source(astjax.grad(mlp.loss))(params, batch))
"""


class TestMakeSource:
    def test_contains_user_names_and_locations(self):
        params, batch = _mlp_args()
        text = astjax.make_source(astjax.grad(mlp.loss), simplify=False)(params, batch)
        assert isinstance(text, str)
        for name in ("d_W", "d_b", "d_outputs", "d_inputs", "d_preds"):
            assert re.search(rf"\b{name}\w*\b", text), (name, text)
        line = line_of(mlp, "outputs = np.dot(inputs, W) + b")
        assert re.search(rf"#\s*mlp\.py:{line}\b", text), text
        assert "outputs = np.dot(inputs, W) + b" in text
        loss_line = line_of(mlp, "return np.sum((preds - targets) ** 2)", after="def loss(")
        assert re.search(rf"#\s*mlp\.py:{loss_line}\b", text), text

    def test_is_valid_python(self):
        params, batch = _mlp_args()
        text = astjax.make_source(astjax.grad(mlp.loss))(params, batch)
        compile(text, "<make_source>", "exec")

    def test_deterministic_in_process(self):
        params, batch = _mlp_args()
        t1 = astjax.make_source(astjax.grad(mlp.loss))(params, batch)
        t2 = astjax.make_source(astjax.grad(mlp.loss))(params, batch)
        astjax.clear_cache()
        t3 = astjax.make_source(astjax.grad(mlp.loss))(params, batch)
        assert t1 == t2 == t3

    def test_deterministic_across_processes(self):
        params, batch = _mlp_args()
        here = astjax.make_source(astjax.grad(mlp.loss))(params, batch)
        script = _SUBPROCESS_SCRIPT.format(tests=str(TESTS))
        for seed in ("0", "12345"):
            env = dict(os.environ, PYTHONHASHSEED=seed)
            res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                 cwd=str(REPO), env=env, timeout=120)
            assert res.returncode == 0, res.stderr
            assert res.stdout == here

    def test_value_and_grad_source(self):
        params, batch = _mlp_args()
        text = astjax.make_source(astjax.value_and_grad(mlp.loss))(params, batch)
        assert "d_W" in text
        compile(text, "<make_source>", "exec")

    def test_plain_function_core_form(self, rng):
        text = astjax.make_source(control.for_rows)(normal(rng, 3, 4))
        assert "def " in text and "np.tanh" in text

    def test_cache_reuses_generated_code(self, monkeypatch):
        from astjax import api
        builds = []
        original = api._build_reverse

        def counting(*args, **kwargs):
            builds.append(args[:2])
            return original(*args, **kwargs)

        monkeypatch.setattr(api, "_build_reverse", counting)
        params, batch = _mlp_args()
        g1 = astjax.grad(mlp.loss)
        g1(params, batch)
        g2 = astjax.grad(mlp.loss)
        g2(params, batch)
        # a new shape does not need new code either
        g2(params, (batch[0][:2], batch[1][:2]))
        assert len(builds) == 1
        assert g1._astjax_source() is g2._astjax_source()
        assert g1._astjax_source().functions["main"] is g2._astjax_source().functions["main"]

    def test_different_argnums_get_different_code(self):
        args = (np.ones(3), np.ones(3), np.ones(3))
        t0 = astjax.make_source(astjax.grad(semantics.three_args, argnums=0))(*args)
        t2 = astjax.make_source(astjax.grad(semantics.three_args, argnums=2))(*args)
        assert t0 != t2


# ================================================================================ tracebacks


def test_traceback_shows_generated_line():
    W, x = np.ones((3, 4)), np.ones(5)
    text = astjax.make_source(astjax.grad(semantics.mismatched))(W, x)
    dot_lines = [ln.strip() for ln in text.splitlines()
                 if "np.dot(" in ln and not ln.strip().startswith("#")]
    assert dot_lines, text
    try:
        astjax.grad(semantics.mismatched)(W, x)
    except ValueError:
        tb = traceback.format_exc()
    else:
        pytest.fail("np.dot of mismatched shapes did not raise")
    assert any(line in tb for line in dot_lines), tb
    assert "astjax" in tb

