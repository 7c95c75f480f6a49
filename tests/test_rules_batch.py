"""Table-driven checks of the batching rules (``templates/batch.py``).

For every primitive in ``astjax.primitives.REGISTRY`` (parametrized by sorted name)
that has a sample (its own ``sample``, or one from ``EXTRA`` below), a small wrapper
program calling that primitive is written to a file and imported (astjax reads
source), then ``vmap`` of it over a batch of ``B`` perturbed examples is compared with
a Python loop over the examples:

- each batched-argument position alone (the others unbatched, ``in_axes=None``),
- all of them together,
- all of them together with the batch on axis 1 (``in_axes=1``) where every batched
  leaf has an axis 1.

The batched argument positions are the primitive's ``diff`` parameters and the ``meta``
ones read for their shape (or those ``EXTRA`` names).  Arguments that are not plain
literals (index tuples with slices or arrays, arrays of indices) reach the wrapper as
unbatched arguments.  ``VARIANTS`` adds more shapes and arguments for the rules with
many cases (vectors and matrices, ``...`` and masks, ``axis=None``, ``order="F"``...).

Nothing is skipped silently: a primitive without a sample fails unless ``SKIP`` lists
it with the reason, and primitives whose batched use is refused must raise the clear
error ``REFUSED`` names.
"""
from __future__ import annotations

import ast

import numpy as np
import pytest

import astjax
from astjax import primitives as P
from astjax import tree_util
from astjax.errors import AstjaxError

from conftest import load_source_module

import astjax.core_prims  # noqa: F401  (registers the core-form primitives)

B = 3
RTOL = 1e-9
ATOL = 1e-11


def _u(rng, shape=(3, 4)):
    return rng.standard_normal(shape)


# Samples for primitives whose registry entry has none (non-differentiable, or internal
# helpers of generated code), and the parameters that get batched:
# name -> (rng -> (args, kwargs), batched parameter names).
EXTRA = {
    "argmax": (lambda r: ((_u(r),), {"axis": 1}), ("a",)),
    "argmin": (lambda r: ((_u(r, (2, 3, 4)),), {"keepdims": True}), ("a",)),
    "argsort": (lambda r: ((_u(r),), {"axis": 0}), ("a",)),
    "any": (lambda r: ((_u(r) > 0.5,), {"axis": 0}), ("a",)),
    "all": (lambda r: ((_u(r) > -0.5,), {}), ("a",)),
    "count_nonzero": (lambda r: ((_u(r) > 0,), {"axis": -1}), ("a",)),
    "searchsorted": (lambda r: ((np.sort(_u(r, (6,))), _u(r, (2, 3))), {"side": "right"}),
                     ("a", "v")),
    "isclose": (lambda r: ((_u(r), _u(r, (4,))), {"atol": 0.5}), ("a", "b")),
    "shape": (lambda r: ((_u(r),), {}), ("a",)),
    "np_shape": (lambda r: ((_u(r, (2, 3)),), {}), ("a",)),
    "ndim": (lambda r: ((_u(r, (2, 3, 4)),), {}), ("a",)),
    "size": (lambda r: ((_u(r, (2, 3, 4)),), {}), ("a",)),
    "len": (lambda r: ((_u(r, (5, 2)),), {}), ("obj",)),
    "np_zeros_like": (lambda r: ((_u(r),), {"dtype": "float32"}), ("a",)),
    "np_ones_like": (lambda r: ((_u(r, (2, 3)),), {}), ("a",)),
    "empty_like": (lambda r: ((_u(r, (2, 3)),), {}), ("prototype",)),
    "zeros_like": (lambda r: ((_u(r),), {}), ("x",)),
    "ones_like": (lambda r: ((_u(r, ()),), {}), ("x",)),
    "linspace": (lambda r: ((_u(r, (2,)), 3.0), {"num": 5, "axis": -1}), ("start", "stop")),
    "logspace": (lambda r: ((_u(r, ()), _u(r, (3,))), {"num": 4}), ("start", "stop")),
    "meshgrid": (lambda r: ((_u(r, (3,)), _u(r, (2,))), {"indexing": "ij"}), ("*xi",)),
    "py_int": (lambda r: ((2.0 + abs(_u(r, ())),), {}), ("x",)),
    "extremum_weights": (lambda r: ((_u(r), _u(r, (4,))), {"axis": 0}), ("a", "ans")),
    "max_weight": (lambda r: ((_u(r), _u(r, (4,))), {}), ("x", "y")),
    "eye_last": (lambda r: ((_u(r, (2, 3)),), {}), ("x",)),
    "reduced_size": (lambda r: ((_u(r, (2, 3, 4)), (0, 2)), {}), ("x",)),
    "tensordot_plan": (lambda r: ((_u(r, (3, 4, 5)), _u(r, (4, 5, 2)), 2, 1), {}),
                       ("a", "b")),
    "dot_axes": (lambda r: ((_u(r, (3, 4)), _u(r, (2, 4, 5))), {}), ("a", "b")),
    "inner_axes": (lambda r: ((_u(r, (3, 4)), _u(r, (2, 4))), {}), ("a", "b")),
    "matmul_shape": (lambda r: ((_u(r, (2, 3, 4)), _u(r, (4, 5)), 1), {}), ("x", "y")),
    "kron_plan": (lambda r: ((_u(r, (2, 3)), _u(r, (3, 2)), 1), {}), ("a", "b")),
    "col_shape": (lambda r: ((_u(r, (3, 3)), _u(r, (3,))), {}), ("x", "b")),
    "item_index": (lambda r: ((_u(r), (7,)), {}), ("a",)),
    "instantiate": (lambda r: ((None, _u(r)), {}), ("x",)),
    "acc": (lambda r: ((_u(r), _u(r, (4,))), {}), ("a", "b")),
    "acc_at": (lambda r: ((_u(r, (5, 4)), _u(r, (5, 4)), (slice(1, 3), 2), _u(r, (2,))), {}),
               ("d", "x", "g")),
    "acc_step": (lambda r: ((_u(r, (5, 4)), _u(r, (5, 4)), 3, _u(r, (4,))), {}),
                 ("d", "xs", "g")),
    "cot_at": (lambda r: ((_u(r, (5, 4)), (Ellipsis, 1)), {}), ("g",)),
    "place_at": (lambda r: ((_u(r, (4,)), _u(r, (5, 4)), -2, -0.0), {}), ("g", "x")),
    "cot_zero_at": (lambda r: ((_u(r, (5, 4)), (Ellipsis, 1)), {}), ("g",)),
    "cot_at_vjp": (lambda r: ((_u(r, (4,)), _u(r, (5, 4)), 2), {}), ("ct", "g")),
    # an index repeating rows and positions: each lane keeps the last writes
    "cot_written": (lambda r: ((_u(r, (5, 4)), ([1, 3, 1], [0, 2, 0])), {}), ("g",)),
    "cot_written_vjp": (lambda r: ((_u(r, (3, 4)), _u(r, (5, 4)), [2, 0, 2]), {}),
                        ("ct", "g")),
    "save_at": (lambda r: ((_u(r, (5, 4)), (Ellipsis, 1)), {}), ("x",)),
    "check_scalar_output": (lambda r: ((_u(r, ()), "f"), {}), ("value",)),
    "meta": (lambda r: ((_u(r),), {}), ("x",)),
    "tree_index": (lambda r: (([_u(r, (3, 2)), _u(r, (3,))], 1), {}), ("xs",)),
    "tree_index_vjp": (lambda r: (([_u(r, (2,)), _u(r, ())], [_u(r, (3, 2)), _u(r, (3,))],
                                   1), {}), ("g", "xs")),
    "tree_stack": (lambda r: (([_u(r, (2,)), _u(r, (2,)), _u(r, (2,))], True), {}), ("ys",)),
    "tree_unstack_cotangent": (lambda r: ((_u(r, (3, 2)), [_u(r, (2,))] * 3, False), {}),
                               ("g", "ys")),
    "tree_restack": (lambda r: (([_u(r, (2,)), None, _u(r, (2,))], [_u(r, (2,))] * 3, True),
                                {}), ("cts", "ys")),
    "unstack_cotangent": (lambda r: ((_u(r, (3, 2)), _u(r, (3, 2)), True), {}),
                          ("g", "stacked")),
    "restack_cotangent": (lambda r: (([_u(r, (2,)), None, _u(r, (2,))], _u(r, (3, 2)), True),
                                     {}), ("cts", "stacked")),
    "tangent_set": (lambda r: ((_u(r, (5, 4)), (slice(1, 3), 2), _u(r, (2,)), _u(r, (5, 4))),
                               {}), ("t", "v_dot", "like")),
    "list_cotangent": (lambda r: (([_u(r, (4,)), None, _u(r, (4,))], _u(r, (3, 4))), {}),
                       ("g", "x")),
    "compact": (lambda r: ((_u(r, (3, 4)),), {}), ("y",)),
    "detach": (lambda r: ((_u(r, (3, 4)),), {}), ("x",)),
    "make_tuple": (lambda r: ((_u(r), 2.0, _u(r, (2,))), {}), ("*items",)),
    "make_list": (lambda r: ((_u(r), _u(r, (2,))), {}), ("*items",)),
    "append": (lambda r: (([_u(r, (2,))], _u(r, (3,))), {}), ("lst", "item")),
    "to_list": (lambda r: ((_u(r, (3, 2)),), {}), ("x",)),
    "stop_gradient": (lambda r: ((_u(r),), {}), ("x",)),
    "as_sequence": (lambda r: ((_u(r, (3, 2)),), {}), ("x",)),
    "seq_cotangents": (lambda r: (([_u(r), _u(r, (2,))], 2), {}), ("g",)),
    "pack_tuple": (lambda r: (([_u(r), _u(r, (2,))],), {}), ("items",)),
    "pack_list": (lambda r: (([_u(r), _u(r, (2,))],), {}), ("items",)),
    # second-order helpers of forward-over-reverse and forward-over-forward code
    "norm_hvp": (lambda r: ((_u(r), _u(r), _u(r)), {"axis": 1}), ("s", "t", "x")),
    "cross_axes": (lambda r: ((_u(r, (2, 3)), _u(r, (3, 4))), {"axisb": 0, "which": 4}),
                   ("a", "b")),
    "svd_index": (lambda r: ((_u(r, (3,)), 3), {}), ("s",)),
    "argpartition": (lambda r: ((_u(r),), {"kth": 1, "axis": 0}), ("a",)),
    "rollaxis_perm": (lambda r: ((_u(r, (2, 3, 4)), -1), {"start": 1}), ("a",)),
    "fft_axes": (lambda r: ((_u(r, (2, 3, 4)), None, (-1, 0)), {}), ("a",)),
    "fft_lengths": (lambda r: ((_u(r, (2, 3, 4)), None, (0, 2), True), {}), ("a",)),
    "median_weights": (lambda r: ((_u(r, (3, 4)),), {"axis": 1}), ("a",)),
    "poly_powers": (lambda r: ((_u(r, (4,)),), {}), ("p",)),
    "power_block_index": (lambda r: ((_u(r, (2, 3, 3)), 1), {}), ("x",)),
    "quantile": (lambda r: ((_u(r, (3, 5)), np.array([0.2, 0.9])), {"axis": 1}), ("a",)),
    "percentile": (lambda r: ((_u(r, (3, 5)), 35.0), {}), ("a",)),
    "cumulative_index": (lambda r: ((_u(r, (3, 4)), 1, True), {}), ("x",)),
    "ediff1d_index": (lambda r: ((_u(r, (2, 3)), _u(r, (2,)), 1.5, 2), {}), ("ary",)),
    "ediff1d_lin": (lambda r: ((_u(r, (4,)), _u(r, (1,)), _u(r, (2,)), _u(r, (4,)), _u(r, (1,)),
                               _u(r, (2,))), {}), ("t", "t_end", "t_begin")),
    "cov_scale": (lambda r: ((_u(r, (3, 5)),), {"ddof": 2}), ("x",)),
    "reduced_shape_of": (lambda r: ((_u(r, (3, 5)),), {}), ("xc",)),
    "interp_slopes": (lambda r: ((np.array([0.2, 0.7, 3.9]), np.array([0.0, 1.0, 3.0, 4.0])),
                                 {}), ("x",)),
    "interp_outside": (lambda r: ((np.array([-0.2, 0.7, 4.9]), np.array([0.0, 1.0, 4.0])),
                                  {"which": 1}), ("x",)),
    "diff": (lambda r: ((_u(r, (3, 5)),), {"n": 2, "prepend": 0.5}), ("a",)),
    "linspace_weights": (lambda r: ((_u(r, (2, 5, 3)), 5), {"axis": 1}), ("ans",)),
    "add_cot_vjp": (lambda r: ((_u(r), _u(r), _u(r), _u(r, (4,))), {"which": 1}),
                    ("s", "t", "x", "y")),
}

_INTS = {"bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift", "invert"}
_BOOLS = {"logical_and", "logical_or", "logical_xor", "logical_not"}


def _compare_sample(name):
    """A sample for a comparison/logic primitive without one: (3, 4) with (4,) operands."""
    prim = P.REGISTRY[name]
    if name in _INTS:
        make = lambda r, s=(3, 4): r.integers(0, 8, s)  # noqa: E731
    elif name in _BOOLS:
        make = lambda r, s=(3, 4): _u(r, s) > 0  # noqa: E731
    else:
        make = _u
    if prim.params[:2] == ("x", "y"):
        return (lambda r: ((make(r), make(r, (4,))), {})), ("x", "y")
    if prim.params[:1] == ("x",):
        return (lambda r: ((make(r),), {})), ("x",)
    return None, ()


EXTRA.update({
    "allclose": (lambda r: ((_u(r), _u(r, (4,)) * 0.01), {"atol": 2.0}), ("a", "b")),
    "array_equal": (lambda r: ((np.round(_u(r)), np.round(_u(r))), {}), ("a1", "a2")),
    "not_": (lambda r: ((True,), {}), ("x",)),
    "no_flags": (lambda r: ((False, True), {}), ("*flags",)),
    "any_flag": (lambda r: ((False, True), {}), ("*flags",)),
    # per-example bounds, the same length in every lane (differing lengths are refused:
    # tests/test_vmap_found.py)
    "arange": (lambda r: ((0.3, 4.0), {}), ("start",)),
})

# Primitives whose batched use must raise a clear error (their output's size or
# structure would differ per example): name -> (sample, batched params, message part).
REFUSED = {
    "nonzero": (lambda r: ((_u(r) > 0,), {}), ("a",), "differs per example"),
    "argwhere": (lambda r: ((_u(r) > 0,), {}), ("a",), "differs per example"),
    "flatnonzero": (lambda r: ((_u(r) > 0,), {}), ("a",), "differs per example"),
}

# Never tested here, with the reason.
SKIP = {
    # vmap's own entry and exit (they move the batch axis in and out of vmapped code;
    # test_vmap.py checks them through jit(vmap(f)) and every vmap call)
    **{n: "vmap's entry/exit plumbing, never itself batched again"
       for n in ("to_last", "from_last", "from_last_vjp", "leaf_axis_size")},
    # shape-only creation: every argument is a shape, size or dtype (a per-example size
    # would mean a per-example output shape), so no operand is ever batched
    **{n: "creation from shapes and sizes only: no array operand to batch"
       for n in ("zeros", "ones", "empty", "eye", "identity", "tri", "indices", "range",
                 "fftfreq", "rfftfreq")},
    "swap_norm": "maps a norm's name (a string): no array operand to batch",
    # results that are not arrays
    "dtype": "returns a dtype (not an array); batched operands keep their dtype",
    "keys_list": "dict keys: static structure, never batched",
    "sort_order": "sorted()'s permutation: keys that differ per example are refused at run "
                  "time (tests/test_frontend_containers.py)",
    "format_string": "builds a Python string (assert/raise messages)",
    "unsupported": "raises NotImplementedError by design",
    "refuse_cotangent": "raises for float arguments by design; None otherwise (no data)",
    "refuse_value": "raises for a float argument by design; None otherwise (no data)",
    "refuse_tangent": "raises for a non-zero tangent by design; None otherwise (no data)",
    "refuse_item_update": "raises for a shared array item by design (no result): "
                          "tests/test_item_updates.py checks it under vmap",
    "refuse_rebinding_update": "raises for a shared array by design (no result): "
                               "tests/test_rebinding_updates.py checks it under vmap",
    **{n: "einsum plans are static objects, not arguments vmap takes; vmap of np.einsum's "
          "rules is checked in test_surface and test_registry_orders"
       for n in ("einsum_multi", "einsum_plan", "einsum_plans_t", "einsum_plans_j",
                 "multi_dot_plan")},
    "unsupported_jvp": "raises NotImplementedError unless every tangent is None: no data",
    "not_none": "an `is not None` test on structure, never batched",
    **{n: "custom rules: batched by vmapping the user's rules, checked in "
          "tests/test_custom_rules.py and tests/test_checkpoint.py"
       for n in ("custom_call", "custom_apply", "custom_cotangents", "saved_dot",
                 "saved_matmul")},
    "contains": "`k in d`: membership in keys or a list (tests/test_frontend_containers.py)",
    "clamp_index": "lax.switch index: checked in test_vmap (batched index -> select)",
    "scan_length": "number of scan steps: a static fact of the per-example leading axis",
    "cum_axis": "an axis (int) computed from an axis: never batched",
    "inverse_perm": "a permutation computed from axes: never batched",
    "neg_shift": "a shift computed from a shift: never batched",
    # core-form structure and tapes: only in generated code; vmap of programs that use
    # them (containers, loops under grad, lax.scan) is checked in test_vmap.py
    "make_dict": "core form of a dict display (keys are static); test_vmap covers it",
    "make_dict_from": "forward-mode dict tangent (keys static); test_vmap covers jvp",
    "dict_cotangents": "dict cotangent unpacking (keys static); test_vmap covers grads",
    "dict_from_values": "dict cotangent packing (keys static); test_vmap covers grads",
    "getattr": "attribute access on pytree nodes; test_vmap covers namedtuples",
    "attr_cotangent": "cotangent of an attribute (static name); test_vmap covers grads",
    "attr_of": "attribute of a cotangent (static name); test_vmap covers grads",
    "append_cotangents": "list cotangent unpacking; test_vmap covers grads of appends",
    "append_cotangents_vjp": "second-order list cotangent packing",
    # fast backward trips (transforms/fast_trips.py): facts and a -0.0 start; vmap of
    # grad through them is checked in test_fast_trips.py
    "trip_fits": "facts about one trip's shapes (a static fact, never batched)",
    "trip_signature": "signature of a trip's shapes (a static fact, never batched)",
    "same_signature": "compares two static signatures",
    "cots_complete": "whether a trip's incoming cotangents are arrays (a run-time "
                     "check of the tape's structure, never batched)",
    "cot_or_zero": "a cotangent or -0.0 like its primal; test_fast_trips covers vmap",
    "last_cotangent": "list cotangent unpacking; test_append_cotangents covers vmap",
    "drop_last_cotangent": "list cotangent unpacking; test_append_cotangents covers vmap",
    "append_tangent": "forward-mode list tangent; test_vmap covers jvp",
    "list_tangent": "forward-mode list tangent; test_vmap covers jvp",
    "as_sequence_cotangent": "identity on cotangents of sequences",
    "restore_at": "tape: undoes an in-place update (no result)",
    **{n: "tape or replay bookkeeping of generated code (no array result)"
       for n in ("push", "pop", "new_tape", "pop_tangent", "replay", "replay_start")},
    # the helpers of vmapped code itself (batch-last arrays by definition); vmap of
    # vmap merges the two batch axes instead of batching these
    **{n: "a helper of vmapped code (vmap of vmap merges batch axes)"
       for n, p in P.REGISTRY.items() if p.kind == "batch"},
}


# ------------------------------------------------------------------------ the cases

def _sample(name):
    prim = P.REGISTRY[name]
    if name in REFUSED:
        sample, data, _ = REFUSED[name]
        return sample, data
    if name in EXTRA:
        return EXTRA[name]
    if prim.sample is not None:
        return prim.sample, tuple(prim.diff) + tuple(prim.meta)
    if prim.kind == "compare":
        return _compare_sample(name)
    return None, ()


def _param_of(prim, position):
    """The parameter a positional argument binds to (a variadic one keeps its star)."""
    for i, p in enumerate(prim.params):
        if p.startswith("*") or i == position:
            return p
    raise AssertionError(f"{prim.name}: too many positional arguments")


def _literal(v):
    """``v`` as Python source, or None when it has no literal spelling."""
    if isinstance(v, (np.ndarray, np.generic, slice)) or v is Ellipsis:
        return None
    if isinstance(v, (list, tuple)):
        parts = [_literal(x) for x in v]
        if any(p is None for p in parts):
            return None
    try:
        text = repr(v)
        if ast.literal_eval(text) == v and type(ast.literal_eval(text)) is type(v):
            return text
    except (ValueError, SyntaxError, TypeError):
        pass
    return None


def _is_float_leaf(v):
    return (isinstance(v, float) or (isinstance(v, (np.ndarray, np.generic))
                                    and np.issubdtype(np.result_type(v), np.floating)))


def _perturbed(v, lane, rng):
    """Example ``lane`` of a batched argument: ``v`` plus a small lane-dependent change
    (zeros stay zero, symmetric matrices stay symmetric, non-floats stay as they are)."""
    if isinstance(v, list):
        return [_perturbed(x, lane, rng) for x in v]
    if isinstance(v, tuple):
        return tuple(_perturbed(x, lane, rng) for x in v)
    if isinstance(v, (bool, np.bool_)):
        return bool(v) != bool(lane % 2)
    if isinstance(v, np.ndarray) and v.dtype == bool:
        return v ^ (rng.random(v.shape) < 0.3 * lane)
    if isinstance(v, np.ndarray) and v.dtype.kind in "iu":
        return v + lane
    if not _is_float_leaf(v):
        return v
    noise = np.clip(rng.standard_normal(np.shape(v)), -2, 2)
    arr = np.asarray(v)
    if arr.ndim >= 2 and arr.shape[-1] == arr.shape[-2] and np.allclose(
            arr, np.swapaxes(arr, -1, -2)):
        noise = (noise + np.swapaxes(noise, -1, -2)) / 2
    out = arr + 0.02 * lane * noise * (arr != 0)
    if isinstance(v, float):
        return float(out)
    return out.astype(arr.dtype)


def _stack(lanes, axis):
    """Leafwise stack of per-example pytrees (Python scalars become arrays)."""
    return tree_util.tree_map(lambda *leaves: np.stack([np.asarray(x) for x in leaves],
                                                       axis=axis), lanes[0], *lanes[1:])


def _has_axis_1(tree):
    return all(np.ndim(leaf) >= 1 for leaf in tree_util.tree_leaves(tree))


def _program(name, prim, args, kwargs, data, tmp_path):
    """Source of ``f(...)`` calling the primitive; returns (module, params, values).

    ``params``: the wrapper's parameters, ``values``: their sample values, and
    ``batchable``: the indices of the parameters that are batched arguments.
    """
    params, values, batchable, parts = [], [], [], []

    def operand(v, is_data):
        text = None if is_data else _literal(v)
        if text is not None:
            return text
        pname = f"{'d' if is_data else 's'}{len(params)}"
        if is_data:
            batchable.append(len(params))
        params.append(pname)
        values.append(v)
        return pname

    for i, v in enumerate(args):
        p = _param_of(prim, i)
        # a variadic parameter may mix arrays with static entries (np.einsum's
        # subscripts string or sublists): those stay literals
        static = isinstance(v, str) or (isinstance(v, list) and v and all(
            isinstance(e, int) or e is Ellipsis for e in v))
        parts.append(operand(v, p in data and not static))
    for k, v in kwargs.items():
        parts.append(f"{k}={operand(v, k in data)}")
    source = ("import numpy as np\n\nCALLEE = None\n\n\n"
              f"def f({', '.join(params)}):\n"
              f"    return CALLEE({', '.join(parts)})\n")
    mod = load_source_module(source, tmp_path, f"batch_rule_{name}")
    mod.CALLEE = prim.impl
    return mod, params, values, batchable


def _cases(values, batchable):
    """(label, batched parameter indices, axis) for each check."""
    out = [(f"argument {i} batched", (i,), 0) for i in batchable]
    if len(batchable) > 1:
        out.append(("all arguments batched", tuple(batchable), 0))
    if batchable and all(_has_axis_1(values[i]) for i in batchable):
        out.append(("all arguments batched on axis 1", tuple(batchable), 1))
    return out


# Primitives whose results hold no defined values (only shape and dtype are compared).
VALUES_UNDEFINED = {"empty_like"}


def _assert_same(actual, expected, where, values=True):
    a_leaves, a_def = tree_util.tree_flatten(actual)
    e_leaves, e_def = tree_util.tree_flatten(expected)
    assert a_def == e_def, f"{where}: structure {a_def}, expected {e_def}"
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        a, e = np.asarray(a), np.asarray(e)
        assert a.shape == e.shape, f"{where}: leaf {i} has shape {a.shape}, expected {e.shape}"
        assert a.dtype == e.dtype, f"{where}: leaf {i} has dtype {a.dtype}, expected {e.dtype}"
        if not values:
            continue
        if e.dtype.kind in "fc":
            np.testing.assert_allclose(a, e, rtol=RTOL, atol=ATOL, equal_nan=True,
                                       err_msg=f"{where}: leaf {i}")
        else:
            np.testing.assert_array_equal(a, e, err_msg=f"{where}: leaf {i}")


def run_cases(name, tmp_path, sample=None, data=None, tag=""):
    prim = P.REGISTRY[name]
    if sample is None:
        sample, data = _sample(name)
    rng = np.random.default_rng(sorted(P.REGISTRY).index(name))
    args, kwargs = sample(rng)
    mod, params, values, batchable = _program(name + tag, prim, args, kwargs, data, tmp_path)
    assert batchable, f"{name}: the sample has no batched argument among {data}"
    cases = _cases(values, batchable)
    for label, batched, axis in cases:
        lanes = [[_perturbed(v, k, rng) if i in batched else v for i, v in enumerate(values)]
                 for k in range(B)]
        inputs = [_stack([lane[i] for lane in lanes], axis) if i in batched else v
                  for i, v in enumerate(values)]
        in_axes = tuple(axis if i in batched else None for i in range(len(values)))
        yield label, mod.f, lanes, inputs, in_axes


# ------------------------------------------------------------------------- the tests

def _tested(name):
    return name not in SKIP


def check(name, cases):
    for label, f, lanes, inputs, in_axes in cases:
        where = f"{name}, {label}"
        if name in REFUSED:
            with pytest.raises((AstjaxError, ValueError, TypeError)) as info:
                astjax.vmap(f, in_axes=in_axes)(*inputs)
            assert REFUSED[name][2] in str(info.value), f"{where}: unclear error {info.value}"
            continue
        expected = _stack([f(*lane) for lane in lanes], 0)
        try:
            actual = astjax.vmap(f, in_axes=in_axes)(*inputs)
        except Exception as err:
            raise AssertionError(f"{where}: vmap raised {type(err).__name__}: {err}") from err
        _assert_same(actual, expected, where, values=name not in VALUES_UNDEFINED)


@pytest.mark.parametrize("name", sorted(P.REGISTRY))
def test_batching_rule(name, tmp_path):
    if name in SKIP:
        pytest.skip(SKIP[name])
    sample, _ = _sample(name)
    assert sample is not None, (
        f"{name}: no sample to check its batching rule with: add one to EXTRA in "
        "tests/test_rules_batch.py (or list it in SKIP with the reason)")
    check(name, run_cases(name, tmp_path))


def _idx(*items):
    """An index sample argument (passed to the wrapper as an unbatched argument)."""
    return items if len(items) != 1 else items[0]


# More shapes and arguments for the rules with many cases: (primitive, sample, batched).
VARIANTS = [
    ("matmul", lambda r: ((_u(r, (4,)), _u(r, (4, 5))), {}), ("x", "y")),
    ("matmul", lambda r: ((_u(r, (3, 4)), _u(r, (4,))), {}), ("x", "y")),
    ("matmul", lambda r: ((_u(r, (4,)), _u(r, (4,))), {}), ("x", "y")),
    ("matmul", lambda r: ((_u(r, (4,)), _u(r, (2, 4, 3))), {}), ("x", "y")),
    ("matmul", lambda r: ((_u(r, (2, 1, 3, 4)), _u(r, (5, 4, 2))), {}), ("x", "y")),
    ("dot", lambda r: ((_u(r, (4,)), _u(r, (4,))), {}), ("a", "b")),
    ("dot", lambda r: ((_u(r, (3, 4)), _u(r, (4,))), {}), ("a", "b")),
    ("dot", lambda r: ((_u(r, ()), _u(r, (4,))), {}), ("a", "b")),
    ("dot", lambda r: ((_u(r, (2, 3, 4)), _u(r, (5, 4, 2))), {}), ("a", "b")),
    ("dot_grad_a", lambda r: ((_u(r, (3,)), _u(r, (3, 4)), _u(r, (4,))), {}), ("t", "a", "b")),
    ("dot_grad_b", lambda r: ((_u(r, ()), _u(r, (4,)), _u(r, (4,))), {}), ("t", "a", "b")),
    ("dot_grad_b", lambda r: ((_u(r, (2,)), _u(r, (4,)), _u(r, (4, 2))), {}), ("t", "a", "b")),
    ("inner", lambda r: ((_u(r, (4,)), _u(r, (4,))), {}), ("a", "b")),
    ("tensordot", lambda r: ((_u(r, (3, 4)), _u(r, (4, 3))), {"axes": ([0, 1], [1, 0])}),
     ("a", "b")),
    ("tensordot", lambda r: ((_u(r, (3, 4)), _u(r, (2,))), {"axes": 0}), ("a", "b")),
    ("einsum", lambda r: (("...ij,...j->...i", _u(r, (2, 3, 4)), _u(r, (4,))), {}),
     ("*operands",)),
    ("einsum", lambda r: (("ij,jk", _u(r, (3, 4)), _u(r, (4, 2))), {}), ("*operands",)),
    ("einsum", lambda r: (("ii->i", _u(r, (3, 3))), {}), ("*operands",)),
    ("solve", lambda r: ((_u(r, (3, 3)) + 3 * np.eye(3), _u(r, (3, 2))), {}), ("a", "b")),
    ("solve", lambda r: ((_u(r, (2, 3, 3)) + 3 * np.eye(3), _u(r, (3,))), {}), ("a", "b")),
    ("inv", lambda r: ((_u(r, (2, 3, 3)) + 3 * np.eye(3),), {}), ("a",)),
    ("norm", lambda r: ((_u(r, (2, 3, 4)),), {}), ("x",)),
    ("norm", lambda r: ((_u(r),), {"ord": 1}), ("x",)),
    ("norm", lambda r: ((_u(r),), {"ord": "nuc", "keepdims": True}), ("x",)),
    ("norm", lambda r: ((_u(r, (5,)),), {"ord": np.inf}), ("x",)),
    ("norm", lambda r: ((_u(r),), {"ord": -1, "axis": 0}), ("x",)),
    ("norm_vjp", lambda r: ((_u(r, ()), _u(r)), {}), ("t", "x")),
    ("norm_vjp", lambda r: ((_u(r, (1, 1)), _u(r)), {"ord": 2, "keepdims": True}), ("t", "x")),
    ("norm_jvp", lambda r: ((_u(r), _u(r)), {"ord": 1, "axis": 0}), ("t", "x")),
    ("getitem", lambda r: ((_u(r, (5, 4)), _idx(Ellipsis, 1)), {}), ("x",)),
    ("getitem", lambda r: ((_u(r, (5, 4)), _idx(np.array([True, False, True, True, False]))),
                           {}), ("x",)),
    ("getitem", lambda r: ((_u(r, (5, 4)), _u(r, (5, 4)) > 0), {}), ("x",)),
    ("getitem", lambda r: ((_u(r, (5, 4)), _idx(None, slice(None, None, -1), 2)), {}), ("x",)),
    ("getitem", lambda r: ((_u(r, (5, 4, 2)), _idx([0, 3], slice(None), [1, 0])), {}), ("x",)),
    ("getitem", lambda r: ((_u(r, (5, 4)), _idx(np.array([[0, 1], [4, 4]]))), {}), ("x",)),
    ("getitem_vjp", lambda r: ((_u(r, (2,)), _u(r, (5, 4)), _idx(Ellipsis, 1, slice(0, 2))),
                               {}), ("t", "x")),
    ("getitem_vjp", lambda r: ((_u(r, (3,)), _u(r, (5,)), _idx(np.array([0, 2, 0]))), {}),
     ("t", "x")),
    ("acc_at", lambda r: ((_u(r, (5,)), _u(r, (5,)), _idx(np.array([0, 2, 0])), _u(r, (3,))),
                          {}), ("d", "x", "g")),
    ("setitem", lambda r: ((_u(r, (5, 4)), _u(r, (5, 4)) > 0, 0.0), {}), ("x",)),
    ("setitem", lambda r: ((_u(r, (5, 4)), _idx(Ellipsis, 0), _u(r, (5,))), {}), ("x", "v")),
    ("take", lambda r: ((_u(r), [0, 11, 5]), {}), ("a",)),
    ("take", lambda r: ((_u(r), [[0, 4], [5, 1]]), {"axis": 0, "mode": "wrap"}), ("a",)),
    ("take_vjp", lambda r: ((_u(r, (2, 2)), _u(r), [[0, 11], [5, 0]]), {}), ("t", "a")),
    ("take_vjp", lambda r: ((_u(r, (3, 2)), _u(r), [0, 3]), {"axis": -1}), ("t", "a")),
    ("take_along_axis", lambda r: ((_u(r), np.array([0, 11, 3])), {"axis": None}), ("arr",)),
    ("take_along_axis_vjp", lambda r: ((_u(r, (3,)), _u(r), np.array([0, 11, 3]), None), {}),
     ("t", "arr")),
    ("sort", lambda r: ((_u(r),), {"axis": None}), ("a",)),
    ("argsort", lambda r: ((_u(r, (5,)),), {}), ("a",)),
    ("cumsum", lambda r: ((_u(r),), {}), ("a",)),
    ("argmax", lambda r: ((_u(r),), {"keepdims": True}), ("a",)),
    ("reshape", lambda r: ((_u(r), (-1, 2)), {}), ("a",)),
    ("reshape", lambda r: ((_u(r, (2, 3, 4)), (4, -1)), {"order": "F"}), ("a",)),
    ("ravel", lambda r: ((_u(r),), {"order": "F"}), ("a",)),
    ("transpose", lambda r: ((_u(r, (2, 3, 4)),), {}), ("a",)),
    ("squeeze", lambda r: ((_u(r, (1, 3, 1)),), {}), ("a",)),
    ("expand_dims", lambda r: ((_u(r), -1), {}), ("a",)),
    ("concatenate", lambda r: (([_u(r, (3, 2)), _u(r, (2,))],), {"axis": None}), ("arrays",)),
    ("stack", lambda r: (([_u(r, (3,)), _u(r, (3,))],), {"axis": -1}), ("arrays",)),
    ("hstack", lambda r: (([_u(r, (3,)), _u(r, (2,))],), {}), ("tup",)),
    ("vstack", lambda r: (([_u(r, (3,)), _u(r, (3,))],), {}), ("tup",)),
    ("split", lambda r: ((_u(r, (3, 6)), 3), {"axis": -1}), ("ary",)),
    ("diag", lambda r: ((_u(r, (3, 4)),), {"k": 1}), ("v",)),
    ("diag", lambda r: ((_u(r, (3,)),), {}), ("v",)),
    ("diag_vjp", lambda r: ((_u(r, (3,)), _u(r, (3, 4)), 1), {}), ("t", "v")),
    ("tril", lambda r: ((_u(r, (4,)),), {}), ("m",)),
    ("triu", lambda r: ((_u(r, (3, 5)),), {"k": 2}), ("m",)),
    ("pad", lambda r: ((_u(r), 1), {}), ("array",)),
    ("pad_vjp", lambda r: ((_u(r, (5, 6)), _u(r), 1), {}), ("t", "array")),
    ("repeat", lambda r: ((_u(r, (2, 3)), 2), {}), ("a",)),
    ("repeat_vjp", lambda r: ((_u(r, (2, 6)), _u(r, (2, 3)), [1, 2, 3]), {"axis": -1}),
     ("t", "a")),
    ("roll", lambda r: ((_u(r), 5), {}), ("a",)),
    ("unbroadcast", lambda r: ((_u(r, (2, 3, 4)), 1.5), {}), ("t", "x")),
    ("unreduce", lambda r: ((_u(r, ()), _u(r, (3, 4))), {}), ("t", "x")),
    ("unreduce", lambda r: ((_u(r, (3, 1)), _u(r, (3, 4)), -1, True), {}), ("t", "x")),
    ("asarray", lambda r: (([_u(r, (2,)), _u(r, (2,))],), {"dtype": "float32"}), ("a",)),
    ("array", lambda r: ((_u(r, (2, 3)),), {"ndmin": 3}), ("object",)),
    ("full", lambda r: (((2, 3), _u(r, (3,))), {}), ("fill_value",)),
    ("full_like", lambda r: ((_u(r).astype(np.float32), 2.5), {}), ("a",)),
    ("py_sum", lambda r: ((_u(r, (3, 2)),), {}), ("iterable",)),
    ("py_max", lambda r: (([0.5, 1.5, -1.0],), {}), ("*args",)),
    ("py_round", lambda r: ((2.567,), {}), ("number",)),
    ("item", lambda r: ((_u(r), 1, 2), {}), ("a",)),
    ("linspace", lambda r: ((0.5, _u(r, (2, 3))), {"num": 4, "retstep": True}),
     ("start", "stop")),
    ("clip", lambda r: ((_u(r), None, _u(r, (4,))), {}), ("a", "a_max")),
    ("where", lambda r: ((_u(r) > 0, 1.0, _u(r, (4,))), {}), ("condition", "y")),
]


@pytest.mark.parametrize("k", range(len(VARIANTS)),
                         ids=[f"{v[0]}-{i}" for i, v in enumerate(VARIANTS)])
def test_batching_rule_variant(k, tmp_path):
    name, sample, data = VARIANTS[k]
    check(name, run_cases(name, tmp_path, sample, data, tag=f"_v{k}"))


def test_tables_name_registered_primitives():
    """Stale entries would hide a renamed primitive."""
    for table in (EXTRA, REFUSED, SKIP):
        missing = sorted(set(table) - set(P.REGISTRY))
        assert not missing, f"not in the registry: {missing}"
    both = sorted((set(EXTRA) | set(REFUSED)) & set(SKIP))
    assert not both, f"both tested and skipped: {both}"


def test_every_nonelementwise_primitive_is_checked():
    """A primitive a user can call that is neither elementwise nor skipped has a sample."""
    unchecked = sorted(n for n, p in P.REGISTRY.items()
                       if _tested(n) and _sample(n)[0] is None)
    assert not unchecked, f"no batching check for: {unchecked}"



# Templates that are not a primitive's rule: rules for a per-example index, and the
# tagging of unbatched values on tapes that are popped into fresh names.
_HELPER_TEMPLATES = {"tag_unbatched", "popped"}


def _template_params(fn):
    import inspect
    return tuple(("*" if p.kind is p.VAR_POSITIONAL else "") + p.name
                 for p in inspect.signature(fn).parameters.values())


def test_templates_mirror_their_primitives():
    """Each rule has its primitive's parameters, in order (a renamed parameter would
    otherwise bind None silently)."""
    import inspect
    from astjax.templates import batch as TB
    for name, fn in vars(TB).items():
        if not inspect.isfunction(fn) or fn.__module__ != TB.__name__ or \
                name in _HELPER_TEMPLATES:
            continue
        from astjax.transforms.batch import _PER_EXAMPLE_OPTIONS
        options = {rule: prim for (prim, _), rule in _PER_EXAMPLE_OPTIONS.items()}
        base = name[:-len("_per_example_index")] if name.endswith("_per_example_index") \
            else options.get(name, name)
        assert base in P.REGISTRY, f"templates/batch.py: {name} is no primitive's rule"
        assert _template_params(fn) == P.REGISTRY[base].params, (
            f"templates/batch.py: {name}{_template_params(fn)} does not mirror "
            f"{base}{P.REGISTRY[base].params}")



# astjax.random's samplers: samples live with the module's other tests
from test_random_rules import RANDOM_BATCH_SAMPLES  # noqa: E402

EXTRA.update(RANDOM_BATCH_SAMPLES)
# astjax.debug's effects: vmap of them (once per example) is checked in test_debug.py
SKIP.update({n: "a debugging effect or callback: tests/test_debug.py checks its vmap"
             for n in ("debug_print", "debug_callback", "debug_breakpoint", "pure_callback",
                       "reverse_mode_guard",
                       "debug_print_batched", "debug_callback_batched",
                       "pure_callback_batched")})
# Sharding (astjax/sharding): facts of the mesh and static shard_map plans take no array
# operand; tests/test_sharding.py checks them under vmap on real meshes.
SKIP.update({n: "a mesh fact or a static shard_map plan: no array operand to batch"
             for n in ("axis_index", "axis_size", "ppermute_inverse", "vjp_plan", "jvp_plan",
                       "batch_plan", "static_plan")})
