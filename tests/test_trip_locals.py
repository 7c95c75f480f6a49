"""Reverse mode through loops whose bodies make temporaries (issue 12).

A loop body's own temporaries are saved at the end of their trip (values and shape
stand-ins together, so the pushes do not split the body's elementwise chains), their
cotangents are known None when a backward trip starts, and a guard on a cotangent
that is not None exactly when the previous guard's test held joins that guard's
block.  Each program of ``tests/programs/trip_locals.py`` sweeps one way this could
go wrong; every gradient is checked against float64 central finite differences,
eager and under ``jit`` (both backends), and the second derivative of a few.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

import astjax
from conftest import assert_tree_close, check_grad, numerical_grad
from programs import trip_locals as T

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _arg(rng, n=5):
    return rng.uniform(0.2, 0.9, n) * rng.choice([-1.0, 1.0], n)


@pytest.mark.parametrize("f", T.PROGRAMS, ids=lambda f: f.__name__)
def test_grad_matches_finite_differences(f):
    x = _arg(np.random.default_rng(1))
    check_grad(f, (x,), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("backend", ["numpy", None])
@pytest.mark.parametrize("f", T.PROGRAMS, ids=lambda f: f.__name__)
def test_jit_value_and_grad(f, backend):
    x = _arg(np.random.default_rng(2))
    value, g = astjax.jit(astjax.value_and_grad(f), backend=backend)(x.copy())
    np.testing.assert_allclose(value, f(x.copy()), rtol=1e-12)
    assert_tree_close(g, numerical_grad(f, (x.copy(),)), rtol=1e-5, atol=1e-7)


def test_two_arguments_broadcasting():
    rng = np.random.default_rng(3)
    x, y = _arg(rng, 4), _arg(rng, 3)
    check_grad(T.broadcasting, (x, y), argnums=(0, 1))
    g = astjax.jit(astjax.grad(T.broadcasting, argnums=(0, 1)))(x, y)
    assert_tree_close(g, numerical_grad(T.broadcasting, (x, y), (0, 1)))


@pytest.mark.parametrize("f", [T.chain, T.read_after_loop, T.stale_in_outer, T.scan_stencil,
                               T.int_carry, T.nested_scan], ids=lambda f: f.__name__)
def test_second_derivative(f):
    """Reverse over reverse: the first gradient's tape pushes at trip ends too."""
    x = _arg(np.random.default_rng(4))
    v = _arg(np.random.default_rng(5))
    grad = astjax.grad(f)

    def directional(x):
        return np.sum(grad(x) * v)
    hv = astjax.grad(directional)(x)
    assert_tree_close(hv, numerical_grad(lambda x: np.sum(grad(x) * v), (x,), eps=1e-5),
                      rtol=1e-4, atol=1e-6)


def test_third_derivative_through_a_loop():
    """Grad of code that pops cotangents off a tape: a popped cotangent may be None
    (what the mirror pushed), so it is not taken as surely not None."""
    g2 = astjax.grad(astjax.grad(T.scalar_loop))
    g3 = astjax.grad(g2)
    for x in (0.6, -0.3):
        h = 1e-5
        np.testing.assert_allclose(g3(x), (g2(x + h) - g2(x - h)) / (2 * h), rtol=1e-6)


def test_repeated_calls_keep_the_tape_aligned():
    """The same compiled gradient called with different trip counts and shapes."""
    g = astjax.jit(astjax.grad(T.fori_body))
    for n in (3, 5, 1):
        x = _arg(np.random.default_rng(n), n)
        assert_tree_close(g(x), numerical_grad(T.fori_body, (x,)))


# --------------------------------------------------------- the code it generates

def _wave_source():
    sys.path.insert(0, str(EXAMPLES))
    try:
        import wave as w
    finally:
        sys.path.remove(str(EXAMPLES))
    n, steps = 12, 4
    rng = np.random.default_rng(0)
    vel = (1500 + rng.random((n, n)) * 100).astype(np.float32)
    args = (vel, np.ones((n, n), np.float32), np.ones(steps, np.float32),
            np.eye(n, dtype=np.float32), 3, np.float32(5.0), np.float32(5.0),
            np.float32(0.001), np.zeros((steps, n), np.float32))
    return astjax.make_source(astjax.jit(astjax.value_and_grad(w.misfit),
                                         backend="numpy"))(*args)


def _loops(src):
    """The bodies of the top-level ``for`` loops of the main function, as line lists."""
    main = src.split("\n\n\ndef ")[0].splitlines()
    loops, cur = [], None
    for line in main:
        if re.match(r"    for \w+ in ", line):
            cur = []
            loops.append(cur)
        elif cur is not None and line.startswith("        "):
            cur.append(line[8:].rstrip())
        elif cur is not None and line.strip() and not line.startswith("        "):
            cur = None
    return [[x for x in body if not x.strip().startswith("#")] for body in loops]


def _branches(body, first="if "):
    """The two versions of a trip (fast, general: ``transforms/fast_trips.py``), each
    a line list (stripped), after the lines that choose between them: the ``if`` that
    starts with ``first`` and its ``else`` at the same depth."""
    start = next(k for k, line in enumerate(body) if line.strip().startswith(first))
    indent = body[start][:len(body[start]) - len(body[start].lstrip())]
    split = next(k for k in range(start + 1, len(body)) if body[k] == indent + "else:")
    end = next((k for k in range(split + 1, len(body))
                if body[k].strip() and not body[k].startswith(indent + " ")), len(body))
    return ([x.strip() for x in body[start + 1:split]],
            [x.strip() for x in body[split + 1:end]])


def test_wave_forward_sweep_saves_at_the_end_of_the_trip():
    forward, backward = _loops(_wave_source())
    for branch, least in zip(_branches(forward), (6, 10)):   # (fast: no pad widths)
        pushes = [k for k, line in enumerate(branch) if line.startswith("rt.push(")]
        work = [k for k, line in enumerate(branch)
                if not line.startswith(("rt.push(", "trips =")) and "rt.meta(" not in line
                and not line.startswith("fast_sig")]
        # the carry's own stand-in is saved where the carry is reassigned; every other
        # save comes after the step's arithmetic
        early = [k for k in pushes if k < work[-1]]
        assert len(early) <= 1, [branch[k] for k in early]
        assert len(pushes) >= least


def test_wave_fast_forward_trip_saves_no_shape_of_other_values():
    forward, backward = _loops(_wave_source())
    fast, general = _branches(forward)
    # the shapes of the slices and pads only the general backward trip reads
    assert "dpressure_dx_sub_shape = rt.meta(dpressure_dx_sub)" in general
    assert not any("dpressure_dx_sub" in line for line in fast)
    assert sum("rt.meta(" in line for line in fast) <= 4
    assert "rt.push(tape, True)" in fast and "rt.push(tape, False)" in general


def test_wave_backward_sweep_is_a_few_blocks():
    forward, backward = _loops(_wave_source())
    fast, general = _branches(backward)
    # before: one guard per statement of the step (about 40)
    assert len([line for line in general if line.startswith("if ")]) <= 16
    # the fast trip: a complete trip (its incoming cotangents all arrays) and the one
    # that guards the scan's tuple and list cotangents
    inner = [line for line in backward if line.strip()]
    complete, guarded = _branches(inner, "if complete_trip")
    guards = [line for line in guarded if line.startswith("if ")]
    assert len(guards) <= 10, guards
    assert len([line for line in complete if line.startswith("if ")]) <= 2
    for branch in (complete, guarded):
        assert not any(line.startswith(("rt.acc_at(", "ra.unbroadcast(", "ra.pad_vjp("))
                       for line in branch)
    assert not any(line.startswith("d_") and "rt.acc(d_pressure_future_sub" in line
                   for line in backward)


# ------------------------------- inner-loop temporaries read after the inner loop

_COMPOSITIONS = {
    "grad": lambda f: astjax.grad(f),
    "jit(grad)": lambda f: astjax.jit(astjax.grad(f)),
    "jit(grad) numpy": lambda f: astjax.jit(astjax.grad(f), backend="numpy"),
    "grad(jit)": lambda f: astjax.grad(astjax.jit(f)),
    "value_and_grad": lambda f: (lambda x: astjax.value_and_grad(f)(x)[1]),
    "vjp": lambda f: (lambda x: astjax.vjp(f, x)[1](1.0)[0]),
    "jacrev": lambda f: astjax.jacrev(f),
}


@pytest.mark.parametrize("how", list(_COMPOSITIONS))
@pytest.mark.parametrize("f", T.NESTED_SHAPES, ids=lambda f: f.__name__)
def test_inner_loop_temporaries_in_every_reverse_route(f, how):
    x = _arg(np.random.default_rng(6))
    g = _COMPOSITIONS[how](f)(x.copy())
    assert_tree_close(g, numerical_grad(f, (x.copy(),)), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("f", T.NESTED_SHAPES, ids=lambda f: f.__name__)
def test_inner_loop_temporaries_batched_and_second_order(f):
    rng = np.random.default_rng(7)
    xs = np.stack([_arg(rng) for _ in range(3)])
    per_example = astjax.vmap(astjax.grad(f))(xs)
    assert_tree_close(per_example, np.stack([numerical_grad(f, (x,)) for x in xs]),
                      rtol=1e-5, atol=1e-7)
    x, v = xs[0], xs[1]
    _, hv = astjax.jvp(astjax.grad(f), (x,), (v,))
    grad = astjax.grad(f)
    h = 1e-5
    assert_tree_close(hv, (grad(x + h * v) - grad(x - h * v)) / (2 * h), rtol=1e-4, atol=1e-6)
