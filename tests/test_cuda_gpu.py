"""The CUDA backend on a real GPU (``gpu`` marker: skipped without CuPy and a device).

Run on a GPU machine with ``python -m pytest -q -m gpu tests/test_cuda_gpu.py``.
The same checks as test_cuda.py's emulated ones, with CuPy's RawModule compiling and
launching the kernels: ufunc tables against NumPy (CUDA's transcendental functions
within a few ulp of NumPy's), the fusion corpus and gradients through
``jit(f, backend="cuda")`` with NumPy and CuPy arguments, generated grad/vmap code on
CuPy arrays, reductions, device_put/device_get.
"""
from __future__ import annotations

import numpy as np
import pytest

import astjax
import test_ckernels as TC
import test_fusion as TF
from astjax.kernels import cuda_runtime as cr
from programs import fusable as F
from test_passes import identical, outcome

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not cr.gpu_visible(), reason="no CuPy or no GPU")]

# CUDA's libdevice: up to 4 ulp for some float32 functions (powf, tanf...)
GPU_ULPS = 8


def _host(x):
    if isinstance(x, tuple):
        return tuple(_host(v) for v in x)
    return x.get() if hasattr(x, "get") and not isinstance(x, np.ndarray) else x


def _check_table(ops, args):
    import cupy
    kinds = tuple(cr.ir.input_kind(a) for a in args)
    ops = [u for u in ops if TC._supported(u, kinds)]
    kc = TC._group(f"gpu_table_{len(args)}_{np.result_type(*args).char}", ops, len(args))
    call = cr.CudaKernelCall(kc.kernel, kc.block, cr.current_device())
    dargs = [cupy.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
    got = call(*dargs)
    got = got if len(ops) > 1 else (got,)
    for uf, g in zip(ops, got):
        assert type(g) is cupy.ndarray
        want = TC.numpy_of(uf, *args)
        g = g.get()
        assert g.dtype == want.dtype and g.shape == want.shape, uf
        tol = GPU_ULPS if uf in TC.TRANSCENDENTAL and g.dtype.kind == "f" else 0
        assert TC.ulps(g, want) <= tol, (uf, g.dtype, TC.ulps(g, want))


@pytest.mark.parametrize("dtype", TC.DTYPES, ids=lambda d: np.dtype(d).name)
def test_ufunc_tables_on_the_gpu(dtype):
    x, y = TC.values(dtype, (70, 90)), TC.values(dtype, (70, 90), seed=1)
    _check_table(TC.UNARY, (x,))
    _check_table(TC.BINARY, (x, y))
    _check_table(TC.BINARY, (x[::-1], y[:1]))


@pytest.mark.parametrize("index", range(len(TF.CASES)),
                         ids=[f"{f.__name__}-{i}" for i, (f, _) in enumerate(TF.CASES)])
def test_fusable_programs_on_the_gpu(index):
    f, args = TF.CASES[index]
    a = args()
    expected = outcome(astjax.jit(f, backend="numpy"), a)
    value, error = outcome(astjax.jit(f, backend="cuda"), a)
    assert identical(error, expected[1])
    if expected[1] is None:
        got = _host(value)
        tol = GPU_ULPS * 4 if TC._transcendental(f) else 0
        assert TC.near(got, expected[0], tol) if tol else identical(got, expected[0])


def test_numpy_and_cupy_arguments_give_cupy_results():
    import cupy
    x = TF._r(400, 300, dtype=np.float32)
    jf = astjax.jit(F.poly, backend="cuda")
    for arg in (x, cupy.asarray(x)):
        got = jf(arg)
        assert type(got) is cupy.ndarray and identical(got.get(), F.poly(x))


def test_grad_vmap_and_scan_run_on_cupy_arrays():
    import cupy

    def loss(w, x, y):
        h = np.tanh(x @ w[:3] + w[3])
        return np.mean((h - y) ** 2)

    r = np.random.default_rng(0)
    w, x, y = r.standard_normal(4), r.standard_normal((50, 3)), r.standard_normal(50)
    g = astjax.grad(loss)(cupy.asarray(w), cupy.asarray(x), cupy.asarray(y))
    assert type(g) is cupy.ndarray
    np.testing.assert_allclose(g.get(), astjax.grad(loss)(w, x, y), rtol=1e-10)
    v = astjax.vmap(loss, in_axes=(None, 0, 0))(cupy.asarray(w), cupy.asarray(x[None]),
                                                 cupy.asarray(y[None]))
    np.testing.assert_allclose(_host(v), [loss(w, x, y)], rtol=1e-10)
    g = astjax.jit(astjax.grad(loss), backend="cuda")(w, x, y)
    np.testing.assert_allclose(_host(g), astjax.grad(loss)(w, x, y), rtol=1e-10)


def test_reductions_and_moving_pytrees():
    import cupy
    x = TC.values(np.float64, (100_003,))
    x = x[np.isfinite(x)]
    got = cr.reduce(cupy.asarray(x), "add")
    np.testing.assert_allclose(got.get(), x.sum(), rtol=1e-12)
    assert cr.reduce(cupy.asarray(x), "maximum").get() == x.max()
    tree = {"a": np.arange(3.0), "b": [np.ones(2, np.float32), 3]}
    on = astjax.device_put(tree)
    assert type(on["a"]) is cupy.ndarray and on["b"][1] == 3
    back = astjax.device_get(on)
    assert type(back["b"][0]) is np.ndarray and identical(back["a"], tree["a"])


def test_wave_simulation_on_the_gpu():
    from test_cuda import _wave
    wave = _wave()
    _, v, problem, _ = wave.setup(40, 40, 50, np.float64)
    traces, last = astjax.jit(wave.simulate, backend="cuda")(v, **problem)
    want_traces, want_last = wave.simulate(v, **problem)
    np.testing.assert_allclose(_host(traces), want_traces, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_host(last), want_last, rtol=1e-10, atol=1e-12)
