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


# ------------------------------------------------- every kernel kind on the device

def _launched(dev, before):
    return {n.rsplit("_", 1)[1] for n in dev.launched_names[before:]}


class _Recording:
    """The GPU device with each launched entry point's name recorded."""

    def __init__(self):
        self.dev = cr.current_device()
        self.dev.launched_names = getattr(self.dev, "launched_names", [])
        self._function = type(self.dev).function

    def __enter__(self):
        dev, function = self.dev, self._function

        def recording(module, variant):
            fn = function(dev, module, variant)

            def launch(grid, block, args):
                dev.launched_names.append(module.kernels[variant].name)
                return fn(grid, block, args)
            return launch
        dev.function = recording
        return dev

    def __exit__(self, *exc):
        del self.dev.function


def test_elementwise_variants_on_the_gpu():
    import cupy
    kc = TC._group("gpu_variants", ["sin", "multiply"], 2)
    x = TC.values(np.float32, (64, 96))
    y = TC.values(np.float32, (64, 96), seed=1)
    with _Recording() as dev:
        call = cr.CudaKernelCall(kc.kernel, kc.block, dev)
        cases = {"vec4": (x, y), "contig32": (x[:63, :95].copy(), y[:63, :95].copy()),
                 "strided32": (x[::2], y[:1])}
        for variant, args in cases.items():
            before = len(dev.launched_names)
            got = call(*[cupy.asarray(a) for a in args])
            got = got if isinstance(got, tuple) else (got,)
            want = [np.sin(args[0]), np.multiply(*args)]
            for g, w in zip(got, want):
                assert TC.ulps(g.get(), w) <= GPU_ULPS
            assert _launched(dev, before) == {variant}, variant


@pytest.mark.parametrize("rows", [True, False], ids=["block-per-result", "thread-per-result"])
@pytest.mark.parametrize("op,dtype,shape,axis", [
    ("sum", np.float64, (37, 5000), -1), ("max", np.float32, (3000, 17), 0),
    ("mean", np.float64, (9, 300, 4), 1), ("min", np.int32, (5, 7, 1100), (0, 2))])
def test_reductions_every_strategy_on_the_gpu(rows, op, dtype, shape, axis):
    import cupy
    from astjax.kernels import ir
    import test_ckernels_indexed as TI
    x = TI.rand(dtype, shape, 3)
    if np.dtype(dtype).kind == "f":
        x[~np.isfinite(x)] = 0.5
    kernel = TI.kernel(f"gpu_red_{op}", ["x"], [ir.Reduce("r", "x", op, axis, True)], ["r"])
    with _Recording() as dev:
        dev.reduce_rows = rows
        try:
            call = cr.CudaKernelCall(kernel, TI.no_fallback, dev)
            before = len(dev.launched_names)
            got = call(cupy.asarray(x))
        finally:
            del dev.reduce_rows
        assert _launched(dev, before) == {"rows" if rows else "indexed"}
    TI.same(got.get(), getattr(np, op)(x, axis=axis, keepdims=True),
            reduction=op in ("sum", "mean"))


def test_full_reductions_and_indexed_kernels_on_the_gpu():
    import cupy
    from astjax.kernels import ir
    import test_ckernels_indexed as TI
    x = TI.rand(np.float64, (301, 257), 1)
    x[~np.isfinite(x)] = 0.5
    full = TI.kernel("gpu_full", ["x"], [ir.Reduce("r", "x", "sum", None)], ["r"])
    moved = TI.kernel("gpu_moved", ["x"], [ir.Transpose("a", "x", (1, 0)),
                                           ir.Op("r", "multiply", ("a", 2.0))], ["r"])
    with _Recording() as dev:
        before = len(dev.launched_names)
        got = cr.CudaKernelCall(full, TI.no_fallback, dev)(cupy.asarray(x))
        TI.same(got.get(), x.sum(), reduction=True)
        assert _launched(dev, before) == {"partial", "final"}
        before = len(dev.launched_names)
        got = cr.CudaKernelCall(moved, TI.no_fallback, dev)(cupy.asarray(x))
        assert np.array_equal(got.get(), x.T * 2.0)
        assert _launched(dev, before) == {"indexed32"}      # (sizes below 2^31)


# ------------------------------------ every transformation on real CuPy arrays

def _to_cupy(tree):
    import cupy
    return astjax.tree_util.tree_map(
        lambda v: cupy.asarray(v) if isinstance(v, np.ndarray) else v, tree)


def _dispatch_table():
    import test_cuda_dispatch as TD
    return TD


@pytest.mark.parametrize("name", list(_dispatch_table().TABLE))
def test_every_transformation_on_cupy_arrays(name):
    import cupy
    TD = _dispatch_table()
    f, args = TD.TABLE[name]

    def host(tree):
        return astjax.tree_util.tree_map(
            lambda v: v.get() if isinstance(v, cupy.ndarray) else v, tree)
    want = host(f(*args))            # (jit picks the GPU for NumPy arguments too)
    got = f(*_to_cupy(args))
    leaves = astjax.tree_util.tree_leaves(got)
    assert not [v for v in leaves if isinstance(v, (np.ndarray, np.generic))], got
    got = host(got)
    for g, w in zip(astjax.tree_util.tree_leaves(got), astjax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-9, atol=1e-12)


# ------------------------------------------------------------ CUDA graph replay

def test_scan_steps_replayed_as_cuda_graphs():
    import cupy
    from astjax import lax
    from astjax.kernels import cuda_graph

    def step(carry, x):
        h = np.tanh(carry * 0.9 + x)
        return h, h * 2.0

    r = np.random.default_rng(0)
    xs, h0 = r.standard_normal((20, 4096)), r.standard_normal(4096)
    jstep = astjax.jit(step, backend="cuda")
    want = lax.scan(step, h0, xs)
    g = cuda_graph.StepGraph(jstep)
    cuda_graph.enable(True)
    try:
        carry, ys = cupy.asarray(h0), []
        for x in cupy.asarray(xs):
            carry, y = g(carry, x)
            ys.append(y)
        got = lax.scan(jstep, cupy.asarray(h0), cupy.asarray(xs))
    finally:
        cuda_graph._ENABLED.clear()
    assert not g.failed and g.replays == len(xs) - 1, (g.failed, g.replays, g.fallbacks)
    np.testing.assert_allclose(carry.get(), want[0], rtol=1e-12)
    np.testing.assert_allclose(cupy.stack(ys).get(), want[1], rtol=1e-12)
    np.testing.assert_allclose(got[0].get(), want[0], rtol=1e-12)
    np.testing.assert_allclose(got[1].get(), want[1], rtol=1e-12)


def test_fastmath_kernels_run_close_on_the_gpu():
    """jit(f, backend="cuda", fastmath=True): compiled by CuPy with --fmad=true
    --prec-div=false, the stencil loop stays within a few ulp of NumPy per step (1e-5
    of the peak after 200 float32 steps), dtypes NumPy's; the exact build still
    matches NumPy bit for bit."""
    import test_fastmath as FM
    p0, density, dx = FM._stencil_args(np.float32, 256)
    want = FM.stencil(p0, density, dx, 200)
    fast = _host(astjax.jit(FM.stencil, static_argnums=3, backend="cuda",
                            fastmath=True)(p0, density, dx, 200))
    exact = _host(astjax.jit(FM.stencil, static_argnums=3, backend="cuda")(
        p0, density, dx, 200))
    for f, e, w in zip(fast, exact, want):
        assert f.dtype == w.dtype
        assert np.max(np.abs(f - w)) <= 1e-5 * np.max(np.abs(w))
        assert identical(e, w)
