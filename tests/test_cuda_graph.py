"""CUDA-graph replay of scan/fori steps (astjax/kernels/cuda_graph.py), without a GPU.

The device here is test_cuda's array-module device (device arrays that refuse
conversion to NumPy, kernels compiled from the CUDA text and run through the shim)
with an emulated capture: ``capture(fn)`` runs ``fn`` once (as a real capture, its
results are then poisoned with NaN: a capture computes nothing), and each replay runs
it again (as the captured sequence: steps nested in it do not capture again) and
writes into the captured output buffers, as a graph launch does.  A
host synchronization during capture raises, as CUDA refuses it.  Replayed loops must
give exactly the eager loop's values; refused captures and changed shapes must fall
back to the eager step.
"""
from __future__ import annotations

import contextlib
import random

import numpy as np
import pytest

import astjax
import fakecupy
from astjax import lax
from astjax.kernels import cuda_graph, cuda_runtime as cr
from astjax.tree_util import tree_leaves

pytestmark = pytest.mark.skipif(not __import__(
    "astjax.kernels.cuda_emulate", fromlist=["x"]).available()[0], reason="no C++ compiler")


def _device():
    from test_cuda import ArrayModuleDevice

    class GraphDevice(ArrayModuleDevice):
        def __init__(self):
            super().__init__()
            self.captures = self.replays = self.gemms = 0

        def private_memory(self):
            return contextlib.nullcontext()

        def gemm(self, a, b):           # (CupyDevice.gemm: cuBLAS called directly)
            self.gemms += 1
            return fakecupy.DeviceArray(np.matmul(a._a, b._a))

        def capture(self, fn):
            self.captures += 1
            fakecupy.CAPTURING.append(True)
            try:
                outputs = fn()
            finally:
                fakecupy.CAPTURING.pop()
            bufs = [v for v in tree_leaves(outputs) if type(v) is self.ndarray]
            for b in bufs:                       # a capture computes nothing
                if b.dtype.kind == "f":
                    b._a[...] = np.nan

            def replay():
                self.replays += 1
                cuda_graph._CAPTURING.append(self)     # the captured sequence, not Python
                try:
                    got = [v for v in tree_leaves(fn()) if type(v) is self.ndarray]
                finally:
                    cuda_graph._CAPTURING.pop()
                for b, g in zip(bufs, got):
                    b._a[...] = g._a
            return replay, outputs
    return GraphDevice()


@contextlib.contextmanager
def graphs(on=True):
    cuda_graph.enable(on)
    try:
        yield
    finally:
        cuda_graph._ENABLED.clear()


def step(carry, x):
    h, total = carry
    h = np.tanh(h * 0.9 + x)
    return (h, total + np.sum(h)), h * 2.0


def body(i, c):
    return np.cos(c) * 0.5 + i


def syncing(i, c):
    if float(np.sum(c)) > 1e9:          # a host read: not capturable
        return c
    return c * 0.5 + i


def _xs():
    r = np.random.default_rng(0)
    return r.standard_normal((7, 5)), r.standard_normal(5)


def _eager(f, *args):
    with graphs(False):
        return f(*args)


def _same(got, want):
    for g, w in zip(tree_leaves(fakecupy.host(got)), tree_leaves(want)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_disabled_by_default_and_the_step_itself():
    assert not cuda_graph.enabled()
    assert cuda_graph.replayed(step) is step
    with graphs():
        assert isinstance(cuda_graph.replayed(step), cuda_graph.StepGraph)


@pytest.mark.parametrize("jitted", [False, True], ids=["eager-step", "jit-cuda-step"])
def test_scan_steps_replay_one_graph(jitted):
    xs, h0 = _xs()
    f = astjax.jit(step, backend="cuda") if jitted else step
    dev = _device()
    with cr.use_device(dev):
        args = ((fakecupy.dev(h0), fakecupy.dev(np.zeros(()))),
                fakecupy.dev(xs))
        want = _eager(lambda c, x: lax.scan(f, c, x), *args)
        with graphs():
            got = lax.scan(f, *args)
    assert dev.captures == 1 and dev.replays == len(xs) - 1
    _same(got, fakecupy.host(want))
    ref = lax.scan(step, (h0, np.zeros(())), xs)            # NumPy, no device
    for g, w in zip(tree_leaves(fakecupy.host(got)), tree_leaves(ref)):
        np.testing.assert_allclose(g, w, rtol=1e-13)


def test_fori_index_is_data_in_the_graph():
    _, c0 = _xs()
    dev = _device()
    with cr.use_device(dev):
        want = _eager(lambda c: lax.fori_loop(0, 6, body, c), fakecupy.dev(c0))
        with graphs():
            got = lax.fori_loop(0, 6, body, fakecupy.dev(c0))
    assert dev.captures == 1 and dev.replays == 5
    _same(got, fakecupy.host(want))
    np.testing.assert_allclose(fakecupy.host(got), lax.fori_loop(0, 6, body, c0), rtol=1e-14)


def test_a_step_that_reads_the_host_falls_back():
    _, c0 = _xs()
    dev = _device()
    refused = cuda_graph.stats()["refused"]
    with cr.use_device(dev), graphs():
        g = cuda_graph.StepGraph(syncing, index_first=True)
        c = fakecupy.dev(c0)
        for i in range(4):
            c = g(i, c)
    assert g.failed and dev.replays == 0 and g.replays == 0
    assert cuda_graph.stats()["refused"] == refused + 1
    assert "during graph capture" in cuda_graph.stats()["last_refusal"]
    np.testing.assert_array_equal(fakecupy.host(c), lax.fori_loop(0, 4, syncing, c0))


def test_each_signature_gets_its_own_graph():
    """Another shape or Python value is another graph, captured when that signature
    is seen a second time (the GPU run's 2000x2000 wave after the 300x300 one had
    kept replaying nothing); host arrays run as they are; at most LIMIT graphs."""
    dev = _device()
    with cr.use_device(dev), graphs():
        g = cuda_graph.StepGraph(lambda a, k: np.sin(a) * k)
        a = fakecupy.dev(np.arange(4.0))
        for _ in range(3):
            g(a, 2.0)
        assert g.replays == 2 and dev.captures == 1
        b = fakecupy.dev(np.arange(6.0))
        for _ in range(3):                                    # another shape
            got = g(b, 2.0)
            np.testing.assert_array_equal(fakecupy.host(got), np.sin(np.arange(6.0)) * 2.0)
        for _ in range(3):                                    # another Python value
            got = g(a, 3.0)
            np.testing.assert_array_equal(fakecupy.host(got), np.sin(np.arange(4.0)) * 3.0)
        got = g(a, 2.0)                                       # the first graph again
        np.testing.assert_array_equal(fakecupy.host(got), np.sin(np.arange(4.0)) * 2.0)
        assert g.replays == 7 and dev.captures == 3 and g.fallbacks == 0
        got = g(np.arange(4.0), 2.0)                          # host arrays: as they are
        assert type(got) is np.ndarray and g.fallbacks == 1
        for k in range(2 * g.LIMIT):                          # bounded
            g(a, float(k + 10))
            g(a, float(k + 10))
        assert len(g.graphs) <= g.LIMIT and len(g.pools) <= g.LIMIT


def test_each_replay_returns_its_own_values():
    """The caller keeps every step's results (scan stacks them): replays must not
    overwrite what an earlier replay returned."""
    dev = _device()
    with cr.use_device(dev), graphs():
        g = cuda_graph.StepGraph(lambda a: a + 1.0)
        a = fakecupy.dev(np.zeros(3))
        seen = []
        for _ in range(5):
            a = g(a)
            seen.append(a)
    assert [float(fakecupy.host(s)[0]) for s in seen] == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_a_jitted_step_in_a_python_loop_replays():
    xs, h0 = _xs()
    jstep = astjax.jit(step, backend="cuda")
    dev = _device()
    with cr.use_device(dev):
        carry = (fakecupy.dev(h0), fakecupy.dev(np.zeros(())))
        with graphs(False):
            want = carry
            for x in xs:
                want, _ = jstep(want, fakecupy.dev(x))
        with graphs():
            for x in xs:
                carry, y = jstep(carry, fakecupy.dev(x))
            # nested: scan's step graph captures the jitted step's launches once
            got = lax.scan(jstep, (fakecupy.dev(h0), fakecupy.dev(np.zeros(()))),
                           fakecupy.dev(xs))
    # the loop: a warm-up, then n - 1 replays; the scan: its warm-up step replays the
    # jitted step's graph (+1), then its own graph n - 1 times
    assert dev.captures == 2 and dev.replays == 2 * (len(xs) - 1) + 1
    _same(carry, fakecupy.host(want))
    _same(got[0], fakecupy.host(want))


# ---- a whole jitted call replayed (a scan inside: many steps, stacked outputs)

STEPS = 20


def _wave_problem(dtype=np.float64):
    import sys
    import os
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
    import wave
    _, velocity, problem, observed = wave.setup(12, 10, STEPS, dtype)
    return wave, velocity, problem, observed


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("what", ["forward", "value_and_grad"])
def test_a_jitted_scan_replays_as_one_graph(what, dtype):
    """A whole call (a 20-step scan, its outputs stacked, and for the gradient the
    tape and the backward sweep) captures once and replays: what a capture refuses
    (a join of more than 8 arrays through a pointer table sent from the host, a
    Python number moved to the device) is not done while capturing."""
    wave, velocity, problem, observed = _wave_problem(dtype)
    fun = wave.simulate if what == "forward" else astjax.value_and_grad(wave.misfit)
    kwargs = {k: fakecupy.dev(v) for k, v in problem.items()}
    if what == "value_and_grad":
        kwargs["observed"] = fakecupy.dev(observed)
    v = fakecupy.dev(velocity)
    dev = _device()
    with cr.use_device(dev):
        want = _eager(lambda: astjax.jit(fun, backend="cuda")(v, **kwargs))
        with graphs():
            f = astjax.jit(fun, backend="cuda")
            got = [f(v, **kwargs) for _ in range(4)]       # warm-up, capture, replays
    assert dev.captures == 1 and dev.replays == 3
    for g in got:
        _same(g, fakecupy.host(want))
    ref = fun(velocity, **problem, **({"observed": observed} if what != "forward" else {}))
    for g, w in zip(tree_leaves(fakecupy.host(got[-1])), tree_leaves(ref)):
        np.testing.assert_allclose(g, w, rtol=1e-12 if dtype == np.float64 else 1e-5,
                                   atol=1e-300 if dtype == np.float64 else 1e-30)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("count", [3, 9, 30, 65])
def test_joins_while_capturing_equal_numpys(axis, count):
    from astjax import device
    xp = device.ArrayModule(fakecupy.FAKE)
    r = np.random.default_rng(count)
    parts = [r.standard_normal((2, 3)) for _ in range(count)]
    cuda_graph._CAPTURING.append(True)
    fakecupy.CAPTURING.append(True)        # (the fake refuses a join of 9 or more then)
    try:
        stacked = xp.stack([fakecupy.dev(p) for p in parts], axis)
        joined = xp.concatenate([fakecupy.dev(p) for p in parts], axis)
    finally:
        fakecupy.CAPTURING.pop()
        cuda_graph._CAPTURING.pop()
    np.testing.assert_array_equal(fakecupy.host(stacked), np.stack(parts, axis))
    np.testing.assert_array_equal(fakecupy.host(joined), np.concatenate(parts, axis))


SCALE = None


def scaled(x):
    return np.sin(x) * SCALE


def test_a_rebound_global_is_read_again():
    """The graph read the global's old array: rebinding it makes the next call
    capture again (jit sees rebound globals, with or without graphs)."""
    global SCALE
    x = fakecupy.dev(np.arange(5.0))
    dev = _device()
    with cr.use_device(dev), graphs():
        SCALE = fakecupy.dev(np.full(5, 2.0))
        f = astjax.jit(scaled, backend="cuda")
        for _ in range(3):
            got = f(x)
        assert dev.replays == 2
        np.testing.assert_array_equal(fakecupy.host(got), np.sin(np.arange(5.0)) * 2.0)
        SCALE = fakecupy.dev(np.full(5, 3.0))
        got = f(x)
        np.testing.assert_array_equal(fakecupy.host(got), np.sin(np.arange(5.0)) * 3.0)
        got = f(x)
        np.testing.assert_array_equal(fakecupy.host(got), np.sin(np.arange(5.0)) * 3.0)
    assert dev.captures == 2


def test_another_thread_runs_the_call_eagerly():
    """Input and output buffers belong to the capturing thread's stream: a call from
    another thread runs as it is (never a replay racing with this thread's)."""
    import threading
    x = fakecupy.dev(np.arange(4.0))
    dev = _device()
    with cr.use_device(dev), graphs():
        g = cuda_graph.StepGraph(lambda a: np.cos(a) + 1.0)
        for _ in range(3):
            g(x)
        got = []
        t = threading.Thread(target=lambda: got.append(g(fakecupy.dev(np.arange(4.0) * 2))))
        t.start()
        t.join()
    assert g.replays == 2 and g.fallbacks == 1
    np.testing.assert_array_equal(fakecupy.host(got[0]), np.cos(np.arange(4.0) * 2) + 1.0)


def noisy(x):
    return np.sin(x) * random.random()


def test_code_drawing_from_a_stateful_generator_is_never_replayed():
    """A replay would repeat the numbers drawn while capturing; each eager call draws
    new ones: such code runs eagerly, with or without graphs."""
    x = fakecupy.dev(np.arange(3.0))
    dev = _device()
    with cr.use_device(dev), graphs():
        f = astjax.jit(noisy, backend="cuda")
        got = [fakecupy.host(f(x))[1] for _ in range(4)]
    assert dev.captures == 0 and len(set(got)) == 4
    assert cuda_graph.reads_host_state([np.random.normal, np.random.default_rng(0)])
    assert not cuda_graph.reads_host_state([np.sin, np.float32, 2.0, astjax.random.normal])


def test_a_jitted_mlp_gradient_replays_its_matrix_products():
    """CuPy refuses cuBLAS while capturing: matrix products in a capture go through
    the device's own GEMM (cuBLAS called directly), so an MLP's jit(grad) replays."""
    import sys
    import os
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
    import mlp
    rng = np.random.default_rng(0)
    sizes = (7, 6, 5, 3)
    params = mlp.init_params(sizes, rng)
    batch = mlp.make_batch(rng, 4, sizes, mlp.init_params(sizes, np.random.default_rng(1)))
    dp, db = fakecupy.dev(params), fakecupy.dev(batch)
    dev = _device()
    with cr.use_device(dev):
        want = _eager(lambda: astjax.jit(astjax.grad(mlp.loss), backend="cuda")(dp, db))
        with graphs():
            g = astjax.jit(astjax.grad(mlp.loss), backend="cuda")
            got = [g(dp, db) for _ in range(3)]
    assert dev.captures == 1 and dev.replays == 2 and dev.gemms >= 8
    for gi in got:
        _same(gi, fakecupy.host(want))
    ref = astjax.grad(mlp.loss)(params, batch)
    for a, b in zip(tree_leaves(fakecupy.host(got[-1])), tree_leaves(ref)):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)        # (float32)


@pytest.mark.parametrize("order", ["CC", "CF", "FC", "FF", "strided"])
def test_capture_matmul_takes_either_memory_order(order):
    dev = _device()
    r = np.random.default_rng(1)
    a, b = r.standard_normal((5, 4)), r.standard_normal((4, 3))
    la = np.asfortranarray(a) if order[0] == "F" else a
    lb = np.asfortranarray(b) if order[1:2] == "F" else b
    if order == "strided":
        la = np.repeat(a, 2, axis=1)[:, ::2]
    with cr.use_device(dev):
        got = cuda_graph.capture_matmul(fakecupy.DeviceArray(la), fakecupy.DeviceArray(lb))
        assert cuda_graph.capture_matmul(fakecupy.DeviceArray(a.astype(np.int64)),
                                         fakecupy.DeviceArray(b.astype(np.int64))) is None
        assert cuda_graph.capture_matmul(fakecupy.DeviceArray(a[0]),
                                         fakecupy.DeviceArray(b)) is None
    np.testing.assert_array_equal(fakecupy.host(got), a @ b)


# ---- CupyDevice.gemm's cuBLAS call, against cuBLAS's column-major definition

class _ColumnMajorBlas:
    """``cuda_runtime.CublasLibrary`` written from cuBLAS's definition of ``gemm``
    (column-major operands at addresses, ``op`` N or T, leading dimensions), reading
    and writing memory by address: the argument mapping is checked without a GPU.
    Its ``setStream`` is CuPy's (``cupy_backends.cuda.libs.cublas``), which refuses
    a capturing stream (CuPy's own ``sgemm`` calls it before each product: on an
    H200 that refused every MLP capture)."""

    def __init__(self):
        self.bound = {}
        self.calls = []

    def setStream(self, handle, stream):
        if cuda_graph.capturing():
            raise NotImplementedError("calling cuBLAS API during stream capture is "
                                      "currently unsupported")
        self.bound[handle] = stream

    def stream(self, handle):
        return self.bound.get(handle, 0)

    @staticmethod
    def _matrix(ptr, dtype, rows, cols, ld):
        import ctypes
        count = ld * (cols - 1) + rows
        flat = np.ctypeslib.as_array((ctypes.c_char * (count * dtype.itemsize)).from_address(
            ptr)).view(dtype)
        return np.lib.stride_tricks.as_strided(
            flat, (rows, cols), (dtype.itemsize, ld * dtype.itemsize))

    def gemm(self, dtype, handle, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc):
        import ctypes
        dtype = np.dtype(dtype)
        assert ta in "NT" and tb in "NT"
        self.calls.append((handle, ta, tb, m, n, k, lda, ldb, ldc))
        al = np.ctypeslib.as_array((ctypes.c_char * dtype.itemsize).from_address(alpha)
                                   ).view(dtype)[0]
        be = np.ctypeslib.as_array((ctypes.c_char * dtype.itemsize).from_address(beta)
                                   ).view(dtype)[0]
        a = self._matrix(A, dtype, *((m, k) if ta == "N" else (k, m)), lda)
        b = self._matrix(B, dtype, *((k, n) if tb == "N" else (n, k)), ldb)
        c = self._matrix(C, dtype, m, n, ldc)
        product = al * ((a if ta == "N" else a.T) @ (b if tb == "N" else b.T))
        c[...] = product if be == 0 else product + be * c   # (beta 0: C is not read)


class _HostArray:
    """A NumPy array dressed as a CuPy one (``data.ptr``) for ``CupyDevice.gemm``."""
    def __init__(self, a):
        self.a = a
        self.flags, self.shape, self.dtype = a.flags, a.shape, a.dtype
        self.data = type("Mem", (), {"ptr": a.ctypes.data})()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("order", ["CC", "CF", "FC", "FF"])
@pytest.mark.parametrize("shape", [(5, 4, 3), (1, 7, 2), (6, 1, 4), (3, 5, 1)])
def test_cupy_device_gemm_calls_cublas_column_major(order, shape, dtype, monkeypatch):
    import sys
    import types
    blas = _ColumnMajorBlas()
    libs = types.ModuleType("cupy_backends.cuda.libs")
    libs.cublas = blas
    for name, mod in [("cupy_backends", types.ModuleType("cupy_backends")),
                      ("cupy_backends.cuda", types.ModuleType("cupy_backends.cuda")),
                      ("cupy_backends.cuda.libs", libs),
                      ("cupy_backends.cuda.libs.cublas", blas)]:
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setattr(cr, "cublas_library", lambda: blas)
    m, k, n = shape
    r = np.random.default_rng(m * 100 + k * 10 + n)
    a = r.standard_normal((m, k)).astype(dtype)
    b = r.standard_normal((k, n)).astype(dtype)
    la = np.asfortranarray(a) if order[0] == "F" else np.ascontiguousarray(a)
    lb = np.asfortranarray(b) if order[1] == "F" else np.ascontiguousarray(b)
    kept = []

    def empty(sh, dt):
        kept.append(_HostArray(np.full(sh, np.nan, dt)))
        return kept[-1]
    xp = types.SimpleNamespace(empty=empty, cuda=types.SimpleNamespace(
        get_current_stream=lambda: types.SimpleNamespace(ptr=7),
        device=types.SimpleNamespace(get_cublas_handle=lambda: 1)))
    dev = types.SimpleNamespace(xp=xp, capture_blas=None)
    got = cr.CupyDevice.gemm(dev, _HostArray(la), _HostArray(lb))
    np.testing.assert_allclose(got.a, a @ b, rtol=1e-5 if dtype == np.float32 else 1e-13)
    assert blas.bound[1] == 7 and [c[0] for c in blas.calls] == [1]
    # inside a capture: the handle bound before it began, never setStream
    blas.bound.clear()
    blas.bound[2] = 7
    dev.capture_blas = 2
    cuda_graph._CAPTURING.append(True)
    try:
        got = cr.CupyDevice.gemm(dev, _HostArray(la), _HostArray(lb))
        dev.capture_blas = None
        with pytest.raises(RuntimeError, match="capturing stream"):
            cr.CupyDevice.gemm(dev, _HostArray(la), _HostArray(lb))
    finally:
        cuda_graph._CAPTURING.pop()
    np.testing.assert_allclose(got.a, a @ b, rtol=1e-5 if dtype == np.float32 else 1e-13)
    assert 1 not in blas.bound and [c[0] for c in blas.calls] == [1, 2]


def test_cublas_library_binds_cublas_c_entry_points(tmp_path):
    """``CublasLibrary`` calls the C functions by their cuBLAS names with cuBLAS's
    argument order (checked against a small C library with those names that records
    its arguments: no GPU, no cuBLAS)."""
    import ctypes
    import subprocess
    from astjax.kernels import compile as kc
    src = tmp_path / "fakeblas.c"
    src.write_text(r"""
#include <stdint.h>
static void *bound_stream = (void *)0x77;
static int mode = 1;
long long seen[16];
int cublasGetStream_v2(void *h, void **s) { *s = bound_stream; return 0; }
int cublasGetPointerMode_v2(void *h, int *m) { *m = mode; return 0; }
int cublasSetPointerMode_v2(void *h, int m) { mode = m; return 0; }
static int record(void *h, int ta, int tb, int m, int n, int k, const void *al,
                  const void *A, int lda, const void *B, int ldb, const void *be,
                  void *C, int ldc, int which) {
    long long v[16] = {(long long)(intptr_t)h, ta, tb, m, n, k, (long long)(intptr_t)A,
        lda, (long long)(intptr_t)B, ldb, (long long)(intptr_t)C, ldc, mode, which, 0, 0};
    for (int i = 0; i < 16; i++) seen[i] = v[i];
    return which == 2 ? 13 : 0;
}
int cublasSgemm_v2(void *h, int ta, int tb, int m, int n, int k, const float *al,
                   const float *A, int lda, const float *B, int ldb, const float *be,
                   float *C, int ldc) {
    return record(h, ta, tb, m, n, k, al, A, lda, B, ldb, be, C, ldc, *al == 1.0f);
}
int cublasDgemm_v2(void *h, int ta, int tb, int m, int n, int k, const double *al,
                   const double *A, int lda, const double *B, int ldb, const double *be,
                   double *C, int ldc) {
    return record(h, ta, tb, m, n, k, al, A, lda, B, ldb, be, C, ldc,
                  *al == 1.0 ? 1 : 2);
}
""")
    ok, why = kc.available()
    if not ok:
        pytest.skip(why)
    lib_path = tmp_path / "libfakeblas.so"
    subprocess.run([kc.compiler()[0], "-shared", "-fPIC", "-o", str(lib_path), str(src)],
                   check=True)
    lib = ctypes.CDLL(str(lib_path))
    blas = cr.CublasLibrary(lib)
    assert blas.stream(5) == 0x77
    one, zero = np.ones((), np.float32), np.zeros((), np.float32)
    blas.gemm(np.float32, 5, "T", "N", 3, 4, 2, one.ctypes.data, 1000, 6, 2000, 7,
              zero.ctypes.data, 3000, 8)
    seen = list((ctypes.c_longlong * 16).in_dll(lib, "seen"))
    assert seen[:14] == [5, 1, 0, 3, 4, 2, 1000, 6, 2000, 7, 3000, 8, 0, 1]
    mode = ctypes.c_int()
    lib.cublasGetPointerMode_v2(None, ctypes.byref(mode))
    assert mode.value == 1                  # the handle's pointer mode restored
    two = np.full((), 2.0)
    with pytest.raises(RuntimeError, match="cublasStatus_t 13"):
        blas.gemm(np.float64, 5, "N", "N", 1, 1, 1, two.ctypes.data, 1, 1, 1, 1,
                  two.ctypes.data, 1, 1)


# ---- the class: a replayed call equals the eager call, over the program corpora

def _corpus():
    import test_ckernels_loops as TL
    import test_fusion as TF
    cases = [(f"{f.__name__}-{i}", f, make) for i, (f, make) in enumerate(TF.CASES)]
    cases += [(name, getattr(TL.M, name), make) for name, make in TL.CASES]
    return cases


CORPUS = _corpus()


def _seen(call):
    """What a caller sees: the results on the host, or the type of the error."""
    import warnings
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fakecupy.host(call())
        except Exception as e:    # noqa: BLE001  (the same error is expected)
            return ("raised", type(e))


# the programs of the corpus that cannot replay, and why
NOT_REPLAYED = {
    "poly-5": "no device array among the arguments (a NumPy scalar)",
    "python_values-20": "no device array (lists of numbers)",
    "python_values-21": "no device array (Python ints)",
    "lone_add-15": "NumPy's broadcasting error, every call",
    "while_halves": "a host read: the while loop's test",
}


@pytest.mark.parametrize("name,f,make", CORPUS, ids=[c[0] for c in CORPUS])
def test_replays_equal_eager_calls_over_the_corpus(name, f, make):
    """Every fusable program and every loop program of the C backend's corpus, on
    device arrays: with graphs on, the warm-up, the capturing call and the replays
    each give the eager call's results (or its error), bit for bit; a capture that is
    refused (a host read in a while loop's test) runs eagerly."""
    from test_passes import identical
    first = make()
    other = tuple(_other_values(a) for a in first)    # the same signature, other values
    calls = [fakecupy.dev(tuple(a)) for a in (first, first, other, first)]
    dev = _device()
    before = cuda_graph.stats()
    with cr.use_device(dev):
        wants = [_seen(lambda: _eager(lambda: astjax.jit(f, backend="cuda")(*args)))
                 for args in calls]
        with graphs():
            g = astjax.jit(f, backend="cuda")
            got = [_seen(lambda: g(*args)) for args in calls]
    want = wants[0]
    for k, (gk, wk) in enumerate(zip(got, wants)):
        assert identical(gk, wk), (name, k, gk, wk)
    raised = isinstance(want, tuple) and len(want) == 2 and isinstance(want[0], str)
    after = cuda_graph.stats()
    if not raised:      # a warm-up, then the capture and two more calls replay
        # (refused: a host read; eager: no device array among the arguments)
        plain = after["refused"] > before["refused"] or after["eager"] > before["eager"]
        assert dev.replays == (0 if plain else 3), (name, dev.replays, plain)
    # the programs that cannot replay are exactly these, each for its reason
    assert (dev.replays == 0) == (name in NOT_REPLAYED), (name, dev.replays)


def _other_values(a):
    """``a`` with other values and the same shape and dtype (a replay must read them)."""
    if isinstance(a, np.ndarray):
        return np.roll(a, 1) if a.ndim and a.size > 1 else np.asarray(a + 1, a.dtype)
    return a
