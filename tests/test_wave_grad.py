"""What the gradient of the wave example (a lax.scan of np.pad stencils) relies on.

* ``ra.pad`` / ``ra.pad_vjp`` skip np.pad's Python overhead for zero padding: the
  same values, dtype and memory order as np.pad;
* ``len`` of a rule's ``*items`` is a constant, so the cotangent of a tuple does not
  read (and reverse mode does not keep) the items: a scan's gradient tapes shape
  stand-ins of its carry, not every step's arrays;
* the vjp of ``tree_stack`` reads the step count off the stack, not a stand-in of the
  list of steps rebuilt at every append (quadratic).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

import astjax
from astjax import runtime as rt
from astjax import runtime_array as ra

from conftest import check_grad

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


PADS = [((3, 4), ((0, 1), (0, 0))), ((3, 4), 1), ((3, 4), (1, 2)), ((3, 4), [[2, 0], [0, 1]]),
        ((2, 3, 4), ((1, 0), (0, 2), (3, 1))), ((5,), (2, 3)), ((3, 4), ((0, 0), (0, 0))),
        ((3, 4), np.int64(2))]


@pytest.mark.parametrize("shape,pad_width", PADS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.complex128, bool])
@pytest.mark.parametrize("order", ["C", "F"])
def test_zero_pad_matches_np_pad(shape, pad_width, dtype, order):
    a = np.asarray(np.random.default_rng(0).standard_normal(shape) * 3, dtype=dtype,
                   order=order)
    expected = np.pad(a, pad_width)
    out = ra.pad(a, pad_width)
    assert out.dtype == expected.dtype and out.shape == expected.shape
    assert out.flags.c_contiguous == expected.flags.c_contiguous
    assert out.flags.f_contiguous == expected.flags.f_contiguous
    np.testing.assert_array_equal(out, expected)
    if np.issubdtype(dtype, np.inexact):
        t = np.random.default_rng(1).standard_normal(expected.shape).astype(dtype)
        g = ra.pad_vjp(t, a, pad_width)
        inner = t[np.pad(np.ones(shape, bool), pad_width)].reshape(shape)
        np.testing.assert_array_equal(g, inner)
        assert g.dtype == a.dtype


def test_other_pads_still_go_to_np_pad():
    a = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(ra.pad(a, 1, constant_values=7), np.pad(a, 1, constant_values=7))
    np.testing.assert_array_equal(ra.pad(a, ((1, 0), (0, 1)), mode="edge"),
                                  np.pad(a, ((1, 0), (0, 1)), mode="edge"))
    np.testing.assert_array_equal(ra.pad(a, ((1, 0),)), np.pad(a, ((1, 0),)))
    with pytest.raises(ValueError):
        ra.pad(a, -1)
    np.testing.assert_array_equal(ra.pad(np.float64(2.0), 1), np.pad(np.float64(2.0), 1))


def padded_sum(x, w):
    y = np.pad(x, ((1, 0), (0, 2))) * w
    return np.sum(np.pad(y[1:, :] - y[:-1, :], 1) ** 2)


def test_pad_gradient():
    rng = np.random.default_rng(2)
    check_grad(padded_sum, (rng.standard_normal((4, 3)), rng.standard_normal((5, 5))),
               argnums=(0, 1))


def pair_len(a, b):
    return len((a, b)) * np.sum(a * b)


def test_len_of_a_tuple_display_is_static():
    a, b = np.arange(3.0), np.ones(3)
    assert pair_len(a, b) == astjax.value_and_grad(pair_len)(a, b)[0]
    check_grad(pair_len, (a, b), argnums=(0, 1))


def stepping(u, w):
    def step(carry, a):
        past, now = carry
        new = 2.0 * now - past + a * np.pad(now[1:] - now[:-1], (0, 1)) * w
        return (now, new), new[1]
    (_, last), ys = astjax.lax.scan(step, (np.zeros_like(u), u), np.linspace(0.1, 0.4, 5))
    return np.sum(ys ** 2) + np.sum(last * w)


def test_scan_gradient_tapes_no_carry_arrays():
    rng = np.random.default_rng(3)
    u, w = rng.standard_normal(6), rng.standard_normal(6)
    check_grad(stepping, (u, w), argnums=(0, 1))
    src = astjax.make_source(astjax.grad(stepping))(u, w)
    assert "ra.py_len(" not in src
    pushed = set(re.findall(r"rt\.push\(tape, (\w+)\)", src))
    # the carry and the fields it holds go on the tape as shape stand-ins only
    assert not {"carry", "now", "new", "past"} & pushed, pushed
    # and no stand-in of the growing list of steps
    assert "ys_steps_shape" not in src


def test_unstack_cotangent_reads_the_step_count_off_the_stack():
    g = np.arange(6.0).reshape(3, 2)
    parts = rt.unstack_cotangent(g, rt.meta(g), True)
    assert [p.tolist() for p in parts] == [[4.0, 5.0], [2.0, 3.0], [0.0, 1.0]]
    assert rt.unstack_cotangent(None, g, False) == [None] * 3
    assert rt.unstack_cotangent(g, (), False) is None        # no leaves: no derivative
    back = rt.restack_cotangent([None, parts[1], parts[2]], g, True)
    np.testing.assert_array_equal(back, [[0.0, 1.0], [2.0, 3.0], [0.0, 0.0]])
    tree = {"a": g, "b": g[:, 0]}
    parts = rt.unstack_cotangent(tree, rt.meta(tree), False)
    assert len(parts) == 3 and parts[2]["b"] == 4.0


def test_wave_example_gradient_matches_finite_differences():
    sys.path.insert(0, str(EXAMPLES))
    try:
        import wave as wave_example
    finally:
        sys.path.remove(str(EXAMPLES))
    _, velocity, problem, observed = wave_example.setup(12, 12, 30, np.float64)
    velocity = velocity + np.random.default_rng(4).uniform(-50, 50, velocity.shape)

    observed = observed * 1.1

    def loss(v):
        return wave_example.misfit(v, observed=observed, **problem)

    value, g = astjax.value_and_grad(wave_example.misfit)(velocity, observed=observed,
                                                          **problem)
    assert np.isclose(value, loss(velocity))
    rng = np.random.default_rng(5)
    for _ in range(3):
        direction = rng.standard_normal(velocity.shape)
        eps = 1e-3
        fd = (loss(velocity + eps * direction) - loss(velocity - eps * direction)) / (2 * eps)
        assert np.isclose(np.sum(g * direction), fd, rtol=1e-5, atol=1e-12 * abs(value))


@pytest.mark.parametrize("index", [(slice(1, None),), (slice(None), slice(None, -1)),
                                   (slice(2, 4), slice(1, 5), slice(0, 3)), slice(None),
                                   (slice(3, 1),), (slice(None, None, 1), slice(-2, None)),
                                   (slice(0, 5, 2),), (1, slice(None)), (Ellipsis, 1), 2])
def test_getitem_vjp_of_a_block_zeros_only_the_rest(index):
    x = np.zeros((5, 6, 3), np.float32)
    t = np.random.default_rng(6).standard_normal(np.shape(x[index])).astype(np.float32)
    expected = np.zeros(x.shape, np.float32)
    expected[index] = t
    out = ra.getitem_vjp(t, x, index)
    assert out.dtype == expected.dtype
    np.testing.assert_array_equal(out, expected)


def test_unbroadcast_fast_path_is_the_general_one():
    t = np.arange(6.0).reshape(2, 3)
    assert ra.unbroadcast(t, np.zeros((2, 3))) is t
    assert ra.unbroadcast(t, rt.meta(np.zeros((2, 3)))) is t
    out = ra.unbroadcast(t, np.zeros((2, 3), np.float32))
    assert out.dtype == np.float32 and out is not t
    np.testing.assert_array_equal(ra.unbroadcast(t, np.zeros((1, 3))), [[3.0, 5.0, 7.0]])
    assert ra.unbroadcast(t, np.zeros((2, 3), int)) is t       # no float dtype to fit
    assert ra.unbroadcast(np.float64(2.0), 1.0) == 2.0
