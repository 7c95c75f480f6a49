"""Reductions inside compiled loops: a scan whose step reduces (an energy per step, a
norm that scales the next state) runs as one compiled loop, with the values of the
same kernels called step by step from Python, and full reductions give the same bits
on any number of threads (kernels/c.py: ``REDUCE_PARTS``; governor.py changes a
loop's thread cap as it runs).
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import astjax
from astjax import lax
from astjax.kernels import backsweep, compile as cc, loop_driver, loops, runtime
from conftest import numerical_grad

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from scan_host import energy, energy_loss  # noqa: E402

pytestmark = pytest.mark.skipif(not cc.available()[0],   # (CI: test_ci_compiler.py)
                                reason=f"no C compiler: {cc.available()[1]}")


# (functions NumPy never runs faster than a kernel: kernels/backend.py NUMPY_FASTER;
# ``energy`` is bench/scan_host.py's)
def normalized(u, xs):
    def step(c, x):
        s = np.sum(c * c)                    # a scalar a later kernel reads
        nxt = np.exp(c * x) / (1.0 + s) + c * 0.5
        return nxt, np.max(nxt)
    return lax.scan(step, u, xs)


def row_sums(u, xs):
    def step(c, x):
        nxt = np.exp(-(c + x) ** 2) * 0.7
        return nxt, np.mean(nxt, axis=1)
    return lax.scan(step, u, xs)


def loss(u, xs):
    c, ys = normalized(u, xs)
    return np.sum(ys * ys) + np.sum(c)


def _python_loop(monkeypatch):
    """The same generated code and kernels, the loops left to Python."""
    for module in (loop_driver, backsweep):
        monkeypatch.setattr(module, "MIN_STEPS", 1 << 40)


CASES = [(energy, (1000,)), (normalized, (600,)), (row_sums, (30, 40)),
         (energy, (7, 9)), (normalized, (3,))]


@pytest.mark.parametrize("fn, shape", CASES,
                         ids=[f"{f.__name__}-{'x'.join(map(str, s))}" for f, s in CASES])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_reducing_steps_run_as_one_compiled_loop(fn, shape, dtype, monkeypatch):
    rng = np.random.default_rng(len(shape))
    u = rng.uniform(-1, 1, shape).astype(dtype)
    xs = rng.uniform(-0.3, 0.3, 50).astype(dtype)
    before = loops.STATS["steps"]
    got = astjax.jit(fn, backend="c")(u, xs)
    assert loops.STATS["steps"] - before >= 45, "the steps ran in the compiled loop"
    with monkeypatch.context() as m:
        _python_loop(m)
        before = loops.STATS["steps"]
        stepped = astjax.jit(fn, backend="c")(u, xs)
        assert loops.STATS["steps"] == before, "the loop ran in Python"
    eager = fn(u, xs)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for a, b, e in zip(got, stepped, eager):
        assert a.dtype == e.dtype and a.shape == e.shape
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, e, rtol=tol, atol=tol)


def test_gradient_through_reducing_steps():
    rng = np.random.default_rng(5)
    u, xs = rng.uniform(-1, 1, (40,)), rng.uniform(-0.3, 0.3, 60)
    g = astjax.jit(astjax.grad(loss), backend="c")(u, xs)
    np.testing.assert_allclose(g, astjax.grad(loss)(u, xs), rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(g, numerical_grad(loss, (u, xs)), rtol=1e-6, atol=1e-8)


def test_a_reduction_beside_its_operand_is_a_kernel_of_its_own():
    """``np.sum(nxt * nxt)`` beside ``nxt``: the square and its sum make one kernel
    (no temporary), the step's other kernel makes ``nxt``."""
    u, xs = np.linspace(-1, 1, 500), np.linspace(0, 0.1, 20)
    text = astjax.make_source(astjax.jit(energy, backend="c"))(u, xs)
    main = text.split("\n\n\ndef ")[0]
    assert "nxt = nxt_kernel(carry, x)" in main
    assert "step_out_sum = step_out_sum_kernel(nxt)" in main
    group = text.split("def step_out_sum_group(")[1].split("\n\n\n")[0]
    assert "nxt * nxt" in group and "np.sum(" in group


@pytest.mark.parametrize("threads", ["1", "3", "64", "100"])
def test_full_reductions_give_the_same_bits_on_any_number_of_threads(threads,
                                                                     monkeypatch):
    def reduce_all(x):
        return np.sum(x * x), np.max(x * 2.0), np.mean(x + 1.0), np.min(np.abs(x))
    x = np.random.default_rng(1).standard_normal((701, 301)).astype(np.float32)
    monkeypatch.setenv("ASTJAX_NUM_THREADS", "2")
    want = astjax.jit(reduce_all, backend="c")(x)
    monkeypatch.setenv("ASTJAX_NUM_THREADS", threads)
    got = astjax.jit(reduce_all, backend="c")(x)
    monkeypatch.setattr(runtime, "MIN_PARALLEL_WORK", 1 << 60)    # the one-thread build
    alone = astjax.jit(reduce_all, backend="c")(x)
    for a, b, c, e in zip(want, got, alone, reduce_all(x)):
        assert type(a) is type(e)
        assert a == b == c
        np.testing.assert_allclose(a, e, rtol=1e-5)


def test_gradient_steps_reduce_in_kernels():
    """In ``grad``'s forward sweep the reduced array is a name the backward sweep also
    pops (unknown to the flow-insensitive analysis): the group that made it just
    before says it is an array, so the reduction is a kernel there too, and the sweep
    compiles (what it pushes of the step's scalar, ``rt.meta``, is a zero of its
    type, the same every step)."""
    rng = np.random.default_rng(7)
    u, xs = rng.uniform(-1, 1, (300,)), rng.uniform(-0.3, 0.3, 40)
    jg = astjax.jit(astjax.grad(energy_loss), backend="c")
    text = astjax.make_source(jg)(u, xs)
    main = text.split("\n\n\ndef ")[0]
    assert "step_out_sum = step_out_sum_kernel(" in main
    assert "= np.sum(step_out_mul)" not in main
    before = loops.STATS["sweep_steps"]
    g = jg(u, xs)
    assert loops.STATS["sweep_steps"] - before >= 35, "the forward sweep was compiled"
    np.testing.assert_allclose(g, astjax.grad(energy_loss)(u, xs), rtol=1e-11, atol=1e-13)
    for k in (0, 4, 150, 299):     # (a sum over 12000 values: steps of 1e-4)
        e = np.zeros_like(u)
        e[k] = 1e-4
        fd = (energy_loss(u + e, xs) - energy_loss(u - e, xs)) / 2e-4
        np.testing.assert_allclose(g[k], fd, rtol=1e-7)
