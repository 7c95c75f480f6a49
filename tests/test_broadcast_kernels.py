"""The kernel IR's ``Broadcast``: a full reduction's scalar cotangent spread over an
array, inside the kernel that reads it.

``ra.unreduce(g, x)`` of a reduction over every axis (a loss's ``np.sum``/``np.mean``,
an energy per step) fills an array shaped like ``x`` with ``g`` in ``x``'s floating
dtype.  Fused, the kernel after it reads ``g`` once instead (``passes/fusion.py``
makes the node, ``kernels/ir.py`` types it); a backward sweep then passes the
per-trip scalar by pointer (``kernels/backsweep.py``).  The oracle is ``ra.unreduce``
itself: the C kernels and the CUDA kernels (NVRTC, run through the CPU shim) give its
values bit for bit for scalars of every kind (Python float and int, NumPy float32
and float64 scalars, 0-d arrays, signed zeros, inf and nan) and float32/float64
arrays; what the node does not take (an array ``g``, an integer ``x``) runs NumPy.
The programs at the end check that jit fuses it and that gradients are unchanged.
"""
from __future__ import annotations

import numpy as np
import pytest

import astjax
import test_ckernels_indexed as TI
from astjax import runtime_array as ra
from astjax.kernels import compile as cc, ir, loops
from astjax.kernels.runtime import KernelCall

pytestmark = [pytest.mark.skipif(not cc.available()[0],
                                 reason=f"no C compiler: {cc.available()[1]}"),
              pytest.mark.filterwarnings("ignore::RuntimeWarning")]   # (inf * 0: nan)

FLOATS = [np.float32, np.float64]


def _kernel():
    # out = d + unreduce(g, x) * y
    return TI.kernel("spread", ["d", "g", "x", "y"],
                     [ir.Broadcast("b", "g", "x"),
                      ir.Op("p", "multiply", ("b", "y")),
                      ir.Op("out", "add", ("d", "p"))], ["out"])


def _numpy(d, g, x, y):
    return d + ra.unreduce(g, x) * y


def _scalars(dtype):
    return [1.5, -0.0, 3, True, np.float64(1.0 / 3.0), np.float32(-2.5),
            np.array(7.25), np.array(-0.0, np.float32), np.float64(np.inf),
            np.float64(np.nan), np.float64(1e300)]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_a_spread_scalar_matches_unreduce(dtype):
    d = TI.rand(dtype, (6, 7), 1)
    d[1, 2] = -0.0
    y = TI.rand(dtype, (6, 7), 2)
    x = np.broadcast_to(np.zeros((), dtype), (6, 7))       # a shape stand-in (rt.meta)
    kc = KernelCall(_kernel(), TI.no_fallback)
    for g in _scalars(dtype):
        for name, dd in TI.layouts(d):
            got, want = kc(dd, g, x, y), _numpy(dd, g, x, y)
            assert got.dtype == want.dtype == dtype
            TI.same(got, want)
    assert TI.compiled(kc)


def test_a_spread_alone_and_rank_three():
    k = TI.kernel("spread_only", ["g", "x"], [ir.Broadcast("b", "g", "x")], ["b"])
    kc = KernelCall(k, TI.no_fallback)
    for dtype in FLOATS:
        x = np.broadcast_to(np.zeros((), dtype), (3, 4, 5))
        for g in (np.float64(0.1), -0.0, 2):
            TI.same(kc(g, x), ra.unreduce(g, x))
    assert TI.compiled(kc)


def test_what_the_node_does_not_take_runs_numpy():
    ran = []

    def block(*args):
        ran.append(True)
        return _numpy(*args)
    kc = KernelCall(_kernel(), block)
    d = TI.rand(np.float64, (4, 3), 1)
    y = TI.rand(np.float64, (4, 3), 2)
    x = np.broadcast_to(np.zeros((), np.float64), (4, 3))
    # an array g (a reduction over some axes reshapes it first), an integer x
    for args in ((d, np.ones(1), x, y),
                 (d, 2.0, np.zeros((4, 3), np.int64), y)):
        ran.clear()
        TI.same(kc(*args), _numpy(*args))
        assert ran
    with pytest.raises(ir.Unsupported):
        ir.specialize_indexed(TI.kernel("bad", ["g", "x"], [
            ir.Broadcast("b", "g", "x")], ["b"]),
            [ir.indexed_kind(np.ones(1)), ir.indexed_kind(x)])


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_cuda_renders_the_spread(dtype):
    """The CUDA renderer (through c._Emitter): NVRTC compiles it and the CPU shim
    runs it, with NumPy's values."""
    from astjax.kernels import cuda_emulate
    if not cuda_emulate.available()[0]:
        pytest.skip("no C++ compiler for the CUDA shim")
    from astjax.kernels import cuda_runtime as cr
    from test_cuda import DEVICE
    d = TI.rand(dtype, (5, 9), 1)
    y = TI.rand(dtype, (5, 9), 2)
    x = np.broadcast_to(np.zeros((), dtype), (5, 9))
    with cr.use_device(DEVICE):
        kc = cr.CudaKernelCall(_kernel(), TI.no_fallback, DEVICE)
        for g in (np.float64(0.3), -0.0, np.float32(4.5), 2):
            TI.same(kc(d, g, x, y), _numpy(d, g, x, y))
        assert any(v is not None for v in kc.specs.values())


def loss_grad_kernels(pred, y):
    return np.mean((pred - y) ** 2) + np.sum(pred * y)


def _kernel_source(fn, *args):
    return astjax.make_source(astjax.jit(fn, backend="c"))(*args)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_a_losss_gradient_reads_the_scalar_in_its_kernel(dtype):
    """``grad`` of a loss: the cotangents of the mean and the sum are read by the
    kernel of the elementwise chain, not filled into arrays first; the values are
    the NumPy backend's, bit for bit."""
    rng = np.random.default_rng(0)
    pred = rng.standard_normal((30, 20)).astype(dtype)
    y = rng.standard_normal((30, 20)).astype(dtype)
    g = astjax.grad(loss_grad_kernels)
    got = astjax.jit(g, backend="c")(pred, y)
    want = astjax.jit(g, backend="numpy")(pred, y)
    TI.same(got, want)
    text = _kernel_source(g, pred, y)
    main = text[:text.index("\n\n\ndef ")]          # (the host function, not its groups)
    assert "ra.unreduce(" not in main and main.count("_kernel(") >= 3, main
    assert "runs with NumPy" not in text


def energy(u, xs):
    def step(c, x):
        n = 1.0 / (1.0 + np.exp(-(c * 0.9 + x)))
        return n, np.sum(n * n)
    c, ys = astjax.lax.scan(step, u, xs)
    return np.sum(ys * xs) + np.sum(c)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_an_energy_per_step_compiles_both_sweeps(dtype, monkeypatch):
    """A scalar per step (``np.sum(n * n)``): the backward trip's ys cotangent is a
    NumPy scalar, spread inside the kernel; both sweeps run compiled and give the
    bits of the Python loops, and the gradient matches central differences."""
    from astjax.kernels import backsweep, loop_driver
    u = np.linspace(-1, 1, 300).astype(dtype)
    xs = np.linspace(0.0, 0.1, 40).astype(dtype)
    g = astjax.jit(astjax.grad(energy), backend="c")
    before = dict(loops.STATS)
    got = g(u, xs)
    assert loops.STATS["sweep_steps"] > before["sweep_steps"]
    assert loops.STATS["back_steps"] - before["back_steps"] >= 35
    with monkeypatch.context() as m:
        m.setattr(loop_driver, "MIN_STEPS", 10 ** 9)
        m.setattr(backsweep, "MIN_STEPS", 10 ** 9)
        slow = astjax.jit(astjax.grad(energy), backend="c")(u, xs)
    TI.same(got, slow)
    if dtype == np.float64:
        rng = np.random.default_rng(3)
        d = rng.standard_normal(u.shape)
        eps = 1e-4       # (the loss is ~300, its derivative along d ~3e-3)
        fd = (energy(u + eps * d, xs) - energy(u - eps * d, xs)) / (2 * eps)
        assert np.isclose(np.sum(got * d), fd, rtol=1e-6, atol=0)
