"""Loops over containers, functions in containers, dicts built at run time (issue 10).

A table of programs (``tests/programs/containers.py``) is checked under every
transformation against an oracle that does not use astjax:

* ``grad``  against float64 central finite differences (all float arguments);
* ``jvp``   against a central difference along a random tangent;
* ``vmap``  against a Python loop over the examples;
* ``jit``   against the eager function.

Dict arguments are built with their keys in sorted order, so the finite differences
(which rebuild pytrees in key order, as JAX does) see the same iteration order.
"""
from __future__ import annotations

import numpy as np
import pytest

import astjax
from astjax import tree_util
from conftest import check_grad
from programs import containers as C


def _n(rng, *shape):
    return rng.standard_normal(shape)


def _dict(rng, shape=(3,), keys="abc"):
    return {k: _n(rng, *shape) * 0.7 for k in sorted(keys)}


def _list(rng, n=3, shape=(3,)):
    return [_n(rng, *shape) * 0.7 for _ in range(n)]


def _params(rng):
    return [(_n(rng, 3, 4) * 0.5, _n(rng, 4) * 0.5), (_n(rng, 4, 4) * 0.5, _n(rng, 4) * 0.5)]


# name -> (args builder, argnums differentiated)
CASES = {
    # class 6: dict views, sorted, enumerate/zip/reversed, nested, break/continue
    "items_loop": (lambda r: (_dict(r),), (0,)),
    "keys_loop": (lambda r: (_dict(r),), (0,)),
    "values_loop": (lambda r: (_dict(r),), (0,)),
    "dict_iter": (lambda r: (_dict(r),), (0,)),
    "sorted_items_enumerate": (lambda r: (_dict(r),), (0,)),
    "sorted_items": (lambda r: (_dict(r),), (0,)),
    "sorted_keys": (lambda r: (_dict(r),), (0,)),
    "sorted_dict": (lambda r: (_dict(r),), (0,)),
    "sorted_items_reverse": (lambda r: (_dict(r),), (0,)),
    "sorted_items_key": (lambda r: (_dict(r),), (0,)),
    "sorted_by_value": (lambda r: (_list(r, 4),), (0,)),
    "sorted_scalars": (lambda r: (_n(r, 3),), (0,)),
    "sorted_values_comprehension": (lambda r: (_dict(r),), (0,)),
    "zip_items_with_list": (lambda r: (_dict(r), _list(r, 2)), (0, 1)),
    "reversed_sorted_items": (lambda r: (_dict(r),), (0,)),
    "enumerate_zip": (lambda r: (_list(r), _list(r)), (0, 1)),
    "zip_enumerate": (lambda r: (_list(r), _list(r)), (0, 1)),
    "enumerate_reversed": (lambda r: (_list(r),), (0,)),
    "nested_items_rows": (lambda r: (_dict(r, (2, 3)),), (0,)),
    "enumerate_params": (lambda r: (_params(r), _n(r, 2, 3)), (0, 1)),
    "dict_of_lists": (lambda r: ({"a": _list(r, 2), "b": _list(r, 1)},), (0,)),
    "break_in_sorted": (lambda r: (_dict(r, keys="abcd"),), (0,)),
    "continue_in_enumerate": (lambda r: (_dict(r),), (0,)),
    "list_of_items": (lambda r: (_dict(r),), (0,)),
    "tuple_of_zip": (lambda r: (_list(r), _list(r, 2)), (0, 1)),
    "generator_over_values": (lambda r: (_dict(r),), (0,)),
    "comprehension_zip_sorted": (lambda r: (_dict(r), _list(r, 3)), (0, 1)),
    "enumerate_start_sorted": (lambda r: (_dict(r),), (0,)),
    "zip_three_reversed": (lambda r: (_list(r), _list(r)), (0, 1)),
    "items_of_nested_dict": (lambda r: ({"l1": {"b": _n(r, 3), "w": _n(r, 3)},
                                        "l2": {"b": _n(r, 3), "w": _n(r, 3)}},), (0,)),
    # class 10: functions held in containers
    "funcs_generator_sum": (lambda r: (_n(r, 3),), (0,)),
    "funcs_list_comprehension": (lambda r: (_n(r, 3),), (0,)),
    "funcs_loop": (lambda r: (_n(r, 3),), (0,)),
    "funcs_constant_index": (lambda r: (_n(r, 3),), (0,)),
    "funcs_zip_params": (lambda r: (_n(r, 3), [0.5, 1.5, -0.7]), (0, 1)),
    "funcs_enumerate": (lambda r: (_n(r, 3),), (0,)),
    "funcs_global": (lambda r: (_n(r, 3),), (0,)),
    "funcs_global_pairs": (lambda r: (_n(r, 3),), (0,)),
    "funcs_closures": (lambda r: (_n(r, 3), 0.8), (0, 1)),
    "funcs_range_index": (lambda r: (_n(r, 3),), (0,)),
    "funcs_reversed": (lambda r: (_n(r, 3),), (0,)),
    "funcs_passed_to_helper": (lambda r: (_n(r, 3),), (0,)),
    "funcs_break": (lambda r: (_n(r, 3),), (0,)),
    "funcs_composed": (lambda r: (_n(r, 3),), (0,)),
    "funcs_zip_two_static": (lambda r: (_n(r, 3),), (0,)),
    "funcs_nested_comprehension": (lambda r: (_n(r, 3),), (0,)),
    "funcs_dict": (lambda r: (_n(r, 3),), (0,)),
    # names bound to functions on different paths: a switch, never the last binding
    "bound_in_branches": (lambda r: (_n(r, 3),), (0,)),
    "lambdas_in_branches": (lambda r: (_n(r, 3),), (0,)),
    "defs_in_branches": (lambda r: (_n(r, 3),), (0,)),
    "bound_in_one_branch": (lambda r: (_n(r, 3),), (0,)),
    "chosen_in_loop": (lambda r: (_n(r, 3),), (0,)),
    "alias_and_unpack": (lambda r: (_n(r, 3),), (0,)),
    "conditional_function_call": (lambda r: (_n(r, 3),), (0,)),
    # map, filter, functools.partial made inside, getattr(np, name)
    "map_over_rows": (lambda r: (_n(r, 3, 2),), (0,)),
    "map_two_sequences": (lambda r: (_list(r), _list(r)), (0, 1)),
    "filter_positive": (lambda r: (_list(r, 4),), (0,)),
    "for_over_map": (lambda r: (_list(r),), (0,)),
    "partial_made_inside": (lambda r: (_n(r, 3), _n(r, 3)), (0, 1)),
    "partial_of_lambda": (lambda r: (_n(r, 3), 0.7), (0, 1)),
    "getattr_of_module": (lambda r: (_n(r, 3),), (0,)),
    # lax control flow given function values
    "lax_switch_on_list": (lambda r: (_n(r, 3), 2), (0,)),
    "lax_cond_on_elements": (lambda r: (_n(r, 3),), (0,)),
    "lax_fori_with_partial": (lambda r: (_n(r, 3) * 0.5, 0.6), (0, 1)),
    # dict and list methods
    "dict_get": (lambda r: (_dict(r, keys="ab"),), (0,)),
    "dict_update": (lambda r: (_dict(r, keys="ab"), _n(r, 3)), (0, 1)),
    "list_extend": (lambda r: (_list(r), _list(r, 2)), (0, 1)),
    "items_as_value": (lambda r: (_dict(r),), (0,)),
    "membership_in_dict": (lambda r: (_dict(r, keys="ab"),), (0,)),
    "membership_in_array": (lambda r: (_n(r, 3), 0.5), (0,)),
    "global_function_list_as_value": (lambda r: (_n(r, 3),), (0,)),
    "list_pop_insert": (lambda r: (_list(r),), (0,)),
    "dict_pop_setdefault": (lambda r: (_dict(r, keys="ab"), _n(r, 3)), (0, 1)),
    # sorting and reversing in place: assigned back, never left to a run-time effect
    "list_sort_in_place": (lambda r: (_n(r, 3),), (0,)),
    "list_sort_key_in_place": (lambda r: (_list(r),), (0,)),
    "array_sort_in_place": (lambda r: (_n(r, 3),), (0,)),
    "list_reverse_in_place": (lambda r: (_list(r), _n(r, 3)), (0, 1)),
    "funcs_return_continue": (lambda r: (_n(r, 3) + 0.8,), (0,)),
    # dict(...) construction
    "dict_keywords": (lambda r: (_n(r, 3), _n(r, 3)), (0, 1)),
    "dict_zip_literal": (lambda r: (_n(r, 3), _n(r, 3)), (0, 1)),
    "dict_zip_global": (lambda r: (_n(r, 3), _n(r, 3)), (0, 1)),
    "dict_comprehension": (lambda r: (_dict(r, keys="ab"),), (0,)),
    "dict_comprehension_zip": (lambda r: (_n(r, 3), _n(r, 3)), (0, 1)),
    "dict_comprehension_if": (lambda r: (_dict(r),), (0,)),
    "dict_copy_update": (lambda r: (_dict(r, keys="ab"), _n(r, 3)), (0, 1)),
    "dict_of_pairs": (lambda r: (_n(r, 3), _n(r, 3)), (0, 1)),
    "dict_setitem_loop": (lambda r: (_list(r),), (0,)),
    # generators and lists given to builtins and NumPy
    "gen_sum_start": (lambda r: (_list(r),), (0,)),
    "gen_max_min": (lambda r: (_list(r),), (0,)),
    "gen_any_all": (lambda r: (_list(r),), (0,)),
    "stack_of_list": (lambda r: (_list(r),), (0,)),
    "array_of_scalars": (lambda r: (_n(r, 3),), (0,)),
    "array_of_rows": (lambda r: (_n(r, 3),), (0,)),
    "tuple_of_generator": (lambda r: (_list(r),), (0,)),
    "list_of_generator": (lambda r: (_list(r),), (0,)),
    "sorted_generator": (lambda r: (_list(r),), (0,)),
}

NAMES = sorted(CASES)

# vmap cannot batch these: the order of a sort, or any()/all(), differs per example.
# Each is refused (never a wrong number): a located TransformError when the batch
# transform sees the call, a TypeError from rt.sort_order when only the run time shows
# that the keys differ per example.
VMAP_REFUSED = {
    "sorted_by_value": (TypeError, "sort keys must be scalars"),
    "sorted_scalars": (TypeError, "sort keys must be scalars"),
    "sorted_values_comprehension": (TypeError, "sort keys must be scalars"),
    "sorted_generator": (TypeError, "sort keys must be scalars"),
    "list_sort_key_in_place": (TypeError, "sort keys must be scalars"),
    "gen_any_all": (astjax.TransformError, "vmap cannot batch the call to any"),
    # `v in x` may differ per example (rb.contains refuses arrays)
    "membership_in_array": (astjax.AstjaxError, "cannot batch `x in container` on arrays"),
    # which elements are kept differs per example (rb.select refuses lists whose
    # lengths differ per lane, at the user's line; it used to zip them silently)
    "filter_positive": (astjax.TransformError, "different shapes .a list of 1"),
}


def _case(name, seed=0, sign=1.0):
    """The program, its arguments (float leaves times ``sign``: both branches of the
    programs that branch on the sign of their input get checked), its argnums."""
    build, argnums = CASES[name]
    args = build(np.random.default_rng(seed))
    if sign != 1.0:
        args = tree_util.tree_map(lambda x: sign * x if _float_leaf(x) else x, args)
    return getattr(C, name), args, argnums


def _float_leaf(x):
    return isinstance(x, float) or (isinstance(x, np.ndarray) and x.dtype.kind == "f")


def _axpy(a, t, x):
    """x + a * t over pytrees (non-float leaves stay)."""
    return tree_util.tree_map(lambda xi, ti: xi + a * ti if _float_leaf(xi) else xi, x, t)


def test_every_program_is_in_the_table():
    import inspect
    defined = {n for n, f in vars(C).items() if inspect.isfunction(f)
               and f.__module__ == C.__name__ and n not in ("square", "cube", "apply_all")}
    assert defined == set(CASES)


@pytest.mark.parametrize("sign", [1.0, -1.0])
@pytest.mark.parametrize("name", NAMES)
def test_grad(name, sign):
    f, args, argnums = _case(name, sign=sign)
    value, _ = astjax.value_and_grad(f, argnums=argnums)(*args)
    np.testing.assert_allclose(value, f(*args), rtol=1e-12)
    check_grad(f, args, argnums=argnums, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("sign", [1.0, -1.0])
@pytest.mark.parametrize("name", NAMES)
def test_jvp(name, sign):
    f, args, argnums = _case(name, sign=sign)
    rng = np.random.default_rng(1)
    tangents = tree_util.tree_map(
        lambda x: (rng.standard_normal(np.shape(x)) if isinstance(x, np.ndarray)
                   else float(rng.standard_normal())) if _float_leaf(x) else None, args)
    tangents = tuple(t if i in argnums else tree_util.tree_map(
        lambda x: np.zeros_like(x) if isinstance(x, np.ndarray) else 0.0, a)
        for i, (a, t) in enumerate(zip(args, tangents)))
    out, out_dot = astjax.jvp(f, args, tangents)
    np.testing.assert_allclose(out, f(*args), rtol=1e-12)
    eps = 1e-6
    expected = (f(*_axpy(eps, tangents, args)) - f(*_axpy(-eps, tangents, args))) / (2 * eps)
    np.testing.assert_allclose(out_dot, expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", NAMES)
def test_vmap(name):
    f, _, argnums = _case(name)
    examples = [_case(name, seed)[1] for seed in (3, 4, 5)]
    batched = tree_util.tree_map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *examples)
    if name in VMAP_REFUSED:
        exc, match = VMAP_REFUSED[name]
        with pytest.raises(exc, match=match):
            astjax.vmap(f)(*batched)
        return
    out = astjax.vmap(f)(*batched)
    expected = np.stack([f(*ex) for ex in examples])
    np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_jit(name):
    f, args, _ = _case(name)
    np.testing.assert_allclose(astjax.jit(f)(*args), f(*args), rtol=1e-12)


# ------------------------------------------------------------------ compositions


def _tangents(args, argnums, seed=7):
    rng = np.random.default_rng(seed)
    return tuple(tree_util.tree_map(
        lambda x: (rng.standard_normal(np.shape(x)) if isinstance(x, np.ndarray)
                   else float(rng.standard_normal())) if _float_leaf(x) else None, a)
        if i in argnums else tree_util.tree_map(
            lambda x: np.zeros_like(x) if isinstance(x, np.ndarray) else 0.0, a)
        for i, a in enumerate(args))


def _tree_allclose(a, b, rtol, atol):
    for x, y in zip(tree_util.tree_leaves(a), tree_util.tree_leaves(b)):
        np.testing.assert_allclose(x, y, rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", NAMES)
def test_hessian_vector_product(name):
    """jvp of grad (second order) against a central difference of the gradient."""
    f, args, argnums = _case(name)
    g = astjax.grad(f, argnums=argnums)
    tangents = _tangents(args, argnums)
    _, hvp = astjax.jvp(g, args, tangents)
    eps = 1e-5
    plus, minus = g(*_axpy(eps, tangents, args)), g(*_axpy(-eps, tangents, args))
    expected = tree_util.tree_map(lambda p, m: (p - m) / (2 * eps), plus, minus)
    _tree_allclose(hvp, expected, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_vmap_of_grad(name):
    """Per-example gradients against a loop of grad."""
    if name in VMAP_REFUSED:
        pytest.skip("vmap refuses this program (test_vmap checks the error)")
    f, _, argnums = _case(name)
    examples = [_case(name, seed)[1] for seed in (3, 4)]
    batched = tree_util.tree_map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *examples)
    out = astjax.vmap(astjax.grad(f, argnums=argnums))(*batched)
    loop = [astjax.grad(f, argnums=argnums)(*ex) for ex in examples]
    expected = tree_util.tree_map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *loop)
    _tree_allclose(out, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_jit_of_grad(name):
    f, args, argnums = _case(name)
    _tree_allclose(astjax.jit(astjax.grad(f, argnums=argnums))(*args),
                   astjax.grad(f, argnums=argnums)(*args), rtol=1e-12, atol=1e-14)


# ------------------------------------------------------------------ located errors

from pathlib import Path  # noqa: E402
import re  # noqa: E402

from programs import containers_bad as B  # noqa: E402


def _marker(mark):
    lines = Path(B.__file__).read_text(encoding="utf-8").splitlines()
    hits = [i for i, t in enumerate(lines, 1) if t.rstrip().endswith(f"# @{mark}")]
    assert len(hits) == 1, mark
    return hits[0], lines[hits[0] - 1][:lines[hits[0] - 1].rindex("#")].strip()


def _d(r):
    return {"a": _n(r, 3), "b": _n(r, 3)}


# program, args, marker, words the message must contain
ERRORS = [
    ("loop_rebinds_called_function", lambda r: (_n(r, 3),), "rebound",
     "bound to another function later in the loop"),
    ("function_or_value", lambda r: (_n(r, 3), 1.0), "mixed", "holds a function on some"),
    ("list_of_functions_as_value", lambda r: (_n(r, 3),), "as_value", "list of functions"),
    ("list_of_functions_called", lambda r: (_n(r, 3),), "called", "not callable"),
    ("index_out_of_range", lambda r: (_n(r, 3),), "out_of_range", "out of range"),
    ("missing_key", lambda r: (_n(r, 3),), "missing_key", "'cos' is not in the dict"),
    ("run_time_index_of_mixed", lambda r: (_n(r, 3), 1), "mixed_index",
     "choose among functions only"),
    ("sorted_bad_keyword", lambda r: (_list(r),), "sorted_keyword", "unexpected keyword"),
    ("dict_double_star", lambda r: (_d(r),), "double_star", "dict(**mapping)"),
    ("zip_as_value", lambda r: (_list(r), _list(r)), "zip_value", "zip()"),
    ("map_of_run_time_value", lambda r: (_list(r),), "map_value", "map()"),
    ("unpack_mismatch", lambda r: (_list(r), _list(r)), "unpack", "cannot unpack 2 values"),
    # a callee known only at run time: refused where it is called (it was a zero gradient)
    ("functions_appended_at_run_time", lambda r: (_n(r, 3),), "appended",
     "'f' holds a value computed at run time"),
    ("function_from_data", lambda r: (_n(r, 3), [1.0]), "from_data",
     "'g' holds a value computed at run time"),
    # calls made for their effect on an array: the derivative would follow old values
    ("list_clear", lambda r: (_list(r),), "clear", "ys.clear() is called for its effect"),
    ("array_fill", lambda r: (_n(r, 3),), "fill", "y.fill() is called for its effect"),
    ("numpy_shuffle", lambda r: (_n(r, 3),), "shuffle", "is called for its effect"),
    ("numpy_copyto", lambda r: (_n(r, 3),), "copyto", "is called for its effect"),
]


@pytest.mark.parametrize("transform", ["grad", "jvp", "vmap", "jit"])
@pytest.mark.parametrize("name, build, mark, words", ERRORS, ids=[e[0] for e in ERRORS])
def test_refused_with_a_located_error(name, build, mark, words, transform):
    f = getattr(B, name)
    args = build(np.random.default_rng(0))
    run = {
        "grad": lambda: astjax.grad(f)(*args),
        "jvp": lambda: astjax.jvp(f, args, _tangents(args, (0,))),
        "vmap": lambda: astjax.vmap(f, in_axes=(0,) + (None,) * (len(args) - 1))(
            tree_util.tree_map(lambda x: np.stack([x, x]), args[0]), *args[1:]),
        "jit": lambda: astjax.jit(f)(*args),
    }[transform]
    with pytest.raises(astjax.AstjaxError) as info:
        run()
    message = str(info.value)
    lineno, code = _marker(mark)
    assert words in message, message
    assert Path(B.__file__).name in message and re.search(rf"\bline {lineno}\b", message), \
        message
    lines = message.splitlines()
    at = [i for i, ln in enumerate(lines) if ln.lstrip().startswith("File ")][0]
    quoted = [i for i, ln in enumerate(lines) if i > at and code in ln]
    assert quoted and re.fullmatch(r"\s*\^+\s*", lines[quoted[0] + 1]), message
    assert "hint:" in message, message
