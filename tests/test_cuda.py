"""The CUDA backend without a GPU (astjax/kernels/cuda*.py).

Every kernel these tests make is (a) compiled by NVRTC for a real architecture
(compute_80), so a kernel that does not compile fails here, and (b) compiled as C++
through ``cuda_shim.h`` and launched on the CPU by the same host runtime that drives
a GPU (argument packing, strides, grid-stride loops over few blocks, 32/64-bit index
variants), its results compared with NumPy: the ufunc tables of every dtype, views,
broadcasting, Python numbers, then whole programs through ``jit(f, backend="cuda")``
(the fusion corpus, gradients, loops, the wave simulation), and the block-level tree
reductions, whose ``__syncthreads`` the shim runs as a real barrier.
"""
from __future__ import annotations

import functools

import os

import numpy as np
import pytest

import astjax
import test_ckernels as TC
import test_fusion as TF
from astjax.errors import ArgumentError
from astjax.kernels import cuda, cuda_nvrtc as nv, cuda_runtime as cr, ir
from astjax.kernels.cuda_emulate import EmulatedDevice, available as emulator_available
from astjax.kernels.runtime import KernelCall
from programs import fusable as F
from test_passes import identical, outcome

pytestmark = pytest.mark.skipif(not emulator_available()[0],
                                reason=f"no C++ compiler: {emulator_available()[1]}")

# CI installs nvidia-cuda-nvrtc (the test extra): there a missing NVRTC is a failure
NVRTC = nv.available()[0]
if not NVRTC and os.environ.get("CI"):
    raise RuntimeError(f"CI needs NVRTC to compile the CUDA kernels: {nv.available()[1]}")


class CheckedDevice(EmulatedDevice):
    """The CPU device, compiling every module with NVRTC before running it."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.ptx = 0

    def _build(self, module, key):
        if NVRTC:
            ptx = nv.compile_ptx(module.text, arch="compute_80")
            assert ".entry" in ptx
            self.ptx += 1
        return super()._build(module, key)


DEVICE = CheckedDevice(max_blocks=3, block=64)


@pytest.fixture
def device():
    with cr.use_device(DEVICE):
        yield DEVICE


def _cuda_group(name, ops, nin):
    kc = TC._group(name, ops, nin)
    return cr.CudaKernelCall(kc.kernel, kc.block, DEVICE)


def _check_table(ops, args):
    kinds = tuple(ir.input_kind(a) for a in args)
    ops = [u for u in ops if TC._supported(u, kinds)]
    assert ops
    kc = _cuda_group(f"table_{len(args)}_{np.result_type(*args).char}", ops, len(args))
    before = len(DEVICE.launched)
    with np.errstate(all="ignore"):
        got = kc(*args)
    assert len(DEVICE.launched) == before + 1, "the kernel ran (no NumPy fallback)"
    got = got if len(ops) > 1 else (got,)
    for uf, g in zip(ops, got):
        want = TC.numpy_of(uf, *args)
        assert type(g) is type(want) and g.dtype == want.dtype and g.shape == want.shape, uf
        tol = 2 if uf in TC.TRANSCENDENTAL and g.dtype.kind == "f" else 0
        d = TC.ulps(g, want)
        assert d <= tol, (uf, np.dtype(g.dtype), d)
        if tol == 0 and g.dtype.kind == "f":
            assert np.array_equal(np.signbit(g), np.signbit(want)), uf
    return ops


# ============================================================ the ufunc tables

@pytest.mark.parametrize("dtype", TC.DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_unary_ufunc_matches_numpy(dtype):
    _check_table(TC.UNARY, (TC.values(dtype, (7, 9)),))


@pytest.mark.parametrize("dtype", TC.DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_binary_ufunc_matches_numpy(dtype):
    x, y = TC.values(dtype, (7, 9)), TC.values(dtype, (7, 9), seed=1)
    _check_table(TC.BINARY, (x, y))
    _check_table(TC.BINARY, (x, y[:1]))             # a broadcast row: strided kernel
    _check_table(TC.BINARY, (x[::-1], y.T.copy().T))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32], ids=str)
def test_where_and_clip_match_numpy(dtype):
    c = TC.values(np.bool_, (6, 5))
    x, y = TC.values(dtype, (6, 5)), TC.values(dtype, (5,), seed=1)
    _check_table(["where"], (c, x, y))
    lo, hi = TC.values(dtype, (6, 1), seed=2), TC.values(dtype, (5,), seed=3)
    _check_table(["clip"], (x, lo, hi))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.uint16], ids=str)
def test_python_numbers_numpy_scalars_and_one_element_arrays(dtype):
    x = TC.values(dtype, (5, 7))
    one = TC.values(dtype, (1, 1), seed=4)
    for other in (2, 3.5, True, np.dtype(dtype).type(3), one, one.reshape(())):
        _check_table(["add", "multiply", "maximum"], (x, other))
        _check_table(["subtract", "floor_divide"] if np.dtype(dtype).kind != "u"
                     else ["floor_divide"], (other, x))


def test_views_broadcasting_and_the_strides_the_kernel_is_given():
    r = np.random.default_rng(0)
    a = r.standard_normal((4, 6, 5))
    cases = [(a, a[0]), (a[:, ::2], a[0, ::2, :1]), (a[::-1, :, ::-2], a[:1, :1, ::-2]),
             (a.transpose(2, 0, 1), a[:, 0].T[:, :, None]), (np.asfortranarray(a), 1.5)]
    for x, y in cases:
        _check_table(["add", "arctan2", "hypot"], (x, y))
    kinds = [name for name, _, _ in DEVICE.launched[-len(cases):]]
    assert all("strided" in k for k in kinds[:-1]), kinds


def test_grid_stride_loops_and_64_bit_index_variants(monkeypatch):
    x = TC.values(np.float64, (37, 41))
    y = TC.values(np.float64, (41,), seed=1)
    kc = _cuda_group("stride_loop", ["add", "sin"], 2)
    small = CheckedDevice(max_blocks=2, block=32)    # 1517 elements on 64 threads
    kc.device = small
    with np.errstate(all="ignore"):
        want = (x + y, np.sin(x))
    for got in (kc(x, y), kc(x, y[None, :].repeat(37, 0))):
        assert TC.ulps(got[0], want[0]) == 0 and TC.ulps(got[1], want[1]) <= 2
    assert [(g, b) for _, g, b in small.launched] == [(2, 32), (2, 32)]
    assert [n.rsplit("_", 1)[1] for n, _, _ in small.launched] == ["strided32", "contig32"]
    monkeypatch.setattr(cr, "_INT32_LIMIT", 100)      # as if the sizes needed 64 bits
    got = kc(x, y)
    got2 = kc(x[::-1], y)
    assert TC.ulps(got[0], want[0]) == 0
    assert TC.ulps(got2[0], x[::-1] + y) == 0
    assert [n.rsplit("_", 1)[1] for n, _, _ in small.launched[2:]] == ["strided64"] * 2
    got = kc(x.copy(), np.broadcast_to(y, x.shape).copy())
    assert small.launched[-1][0].endswith("contig64")
    assert TC.ulps(got[0], want[0]) == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.uint16], ids=str)
def test_vectorized_variant_only_where_aligned(dtype):
    kc = _cuda_group(f"vec_{np.dtype(dtype).name}", ["add", "maximum"], 2)
    base = TC.values(dtype, (4 * 37 + 1,))
    other = TC.values(dtype, (4 * 37 + 1,), seed=1)
    variants = []
    for x, y in [(base[:-1], other[:-1]),          # aligned, n % 4 == 0: vec4
                 (base[1:], other[1:]),            # one element off: not aligned
                 (base[:-2], other[:-2]),          # n % 4 != 0
                 (base[:-1], np.dtype(dtype).type(3))]:   # a scalar operand: vec4
        with np.errstate(all="ignore"):
            got = kc(x, y)
            want = (np.add(x, y), np.maximum(x, y))
        assert identical(got, want)
        variants.append(DEVICE.launched[-1][0].rsplit("_", 1)[1])
    aligned = base.ctypes.data % cuda.vec_alignment(dtype) == 0 and \
        other.ctypes.data % cuda.vec_alignment(dtype) == 0
    assert variants[2] == "contig32"
    if aligned:
        assert variants[0] == variants[3] == "vec4"
        if np.dtype(dtype).itemsize > 1:
            assert variants[1] == "contig32"


def test_empty_zero_d_and_unsupported_operands_run_the_block_function():
    kc = _cuda_group("edge", ["add"], 2)
    before = len(DEVICE.launched)
    e = kc(np.zeros((0, 3)), np.ones(3))
    assert e.shape == (0, 3) and e.dtype == np.float64
    assert identical(kc(np.float64(1), 2.0), np.float64(3.0))      # NumPy's scalar
    half = np.ones(3, np.float16)
    assert identical(kc(half, half), half + half)                   # float16: NumPy
    assert len(DEVICE.launched) == before


def test_nvrtc_reports_a_kernel_that_does_not_compile():
    if not NVRTC:
        pytest.skip(nv.available()[1])
    with pytest.raises(nv.NvrtcError, match="undefined"):
        nv.compile_ptx('extern "C" __global__ void k(float *x) { x[0] = nope; }')
    ptx = nv.compile_ptx('extern "C" __global__ void k(double *x) { x[0] += 1.0; }')
    assert ".visible .entry k(" in ptx


def test_no_fused_multiply_add_in_the_kernels():
    """NumPy rounds a * b + c twice: the kernels are compiled with --fmad=false."""
    if not NVRTC:
        pytest.skip(nv.available()[1])
    k = ir.from_group("muladd", ["a", "b", "c"], [("m", "multiply", ("a", "b"), "", None),
                                                  ("r", "add", ("m", "c"), "", None)], ["r"])
    f8 = (np.dtype(np.float64), False, None)
    text = cuda.render(ir.specialize(k, (f8, f8, f8)), "muladd").text
    ptx = nv.compile_ptx(text)
    assert "mul.rn.f64" in ptx and "fma.rn" not in ptx
    ptx = nv.compile_ptx(text.replace("double", "float"))
    assert "mul.rn.f32" in ptx and "fma.rn" not in ptx and "mad.f32" not in ptx


# ====================================================== reductions (barriers)

@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32, np.uint16, np.int64],
                         ids=str)
@pytest.mark.parametrize("ufunc", ["add", "maximum", "minimum"])
def test_block_tree_reductions_match_numpy(dtype, ufunc):
    r = np.random.default_rng(1)
    for n, blocks, block in [(1, 3, 64), (1000, 3, 64), (4099, 5, 32), (64, 1, 256)]:
        x = TC.values(dtype, (n,), seed=n) if np.dtype(dtype).kind == "f" else \
            r.integers(0, 100, n).astype(dtype)
        dev = CheckedDevice(max_blocks=blocks, block=block)
        got = cr.reduce(x, ufunc, device=dev)
        want = getattr(np, ufunc).reduce(x, dtype=x.dtype)
        assert got.shape == () and got.dtype == x.dtype
        if ufunc == "add" and x.dtype.kind == "f":
            finite = x[np.isfinite(x)]
            if finite.size == x.size:
                np.testing.assert_allclose(got, want, rtol=1e-5 if x.itemsize == 4 else 1e-12)
            else:
                assert np.isnan(got) == np.isnan(want)
        else:
            assert identical(got[()], want), (n, got, want)
        assert [(g, b) for _, g, b in dev.launched] == [(min(-(-n // block), blocks), block),
                                                        (1, block)]


def test_the_shim_runs_barriers_as_barriers():
    """A kernel that is only right if __syncthreads waits for the whole block: each
    thread writes its slot, then reads its mirror's."""
    text = cuda.PRELUDE + """
extern "C" __global__ void mirror(int64_t n, const double *__restrict__ x,
                                  double *__restrict__ y) {
    __shared__ double buf[256];
    const unsigned t = threadIdx.x;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + t;
    buf[t] = i < n ? x[i] : 0.0;
    __syncthreads();
    if (i < n) y[i] = buf[blockDim.x - 1 - t];
}
"""
    params = (("int64_t", "n"), ("const double *__restrict__", "x"),
              ("double *__restrict__", "y"))
    module = cuda.Module(text, {"k": cuda.Entry("mirror", params)})
    dev = CheckedDevice()
    x = np.arange(256.0)
    y = np.empty_like(x)
    dev.function(module, "k")((4,), (64,), (np.int64(256), x, y))
    assert identical(y, x.reshape(4, 64)[:, ::-1].ravel())


# ================================================================ through jit

@pytest.mark.parametrize("index", range(len(TF.CASES)),
                         ids=[f"{f.__name__}-{i}" for i, (f, _) in enumerate(TF.CASES)])
def test_fusable_programs_through_the_cuda_backend(index, device):
    f, args = TF.CASES[index]
    a = args()
    expected = outcome(astjax.jit(f), a)
    actual = outcome(astjax.jit(f, backend="cuda"), a)
    same = TC.near if TC._transcendental(f) else identical
    assert same(actual[0], expected[0]), (actual[0], expected[0])
    assert identical(actual[1], expected[1])


def test_groups_really_run_as_cuda_kernels(device):
    x = TF._r(300, 50, dtype=np.float32)
    jf = astjax.jit(F.poly, backend="cuda")
    before = len(device.launched)
    assert identical(jf(x), F.poly(x))
    assert identical(jf(x[::-1, ::3]), F.poly(x[::-1, ::3]))
    names = [n for n, _, _ in device.launched[before:]]
    assert names == ["poly_kernel_vec4", "poly_kernel_strided32"]
    gen = jf._astjax_source(x)
    assert not any(isinstance(v, KernelCall) for v in gen.namespace.values())


def test_gradients_and_loops_through_the_cuda_backend(device):
    def loss(w, x, y):
        h = np.tanh(x * w[0] + w[1])
        r = h * w[2] - y
        return np.mean(r * r)

    w = np.array([0.3, -0.2, 1.5])
    x, y = TF._r(50, 4), TF._r(50, 4, seed=1)
    before = len(device.launched)
    g = astjax.jit(astjax.grad(loss), backend="cuda")(w, x, y)
    np.testing.assert_allclose(g, astjax.grad(loss)(w, x, y), rtol=1e-13)
    assert len(device.launched) > before
    x = TF._r(9, 2)
    assert TC.near(astjax.jit(F.chain_in_loop, backend="cuda")(x, 4), F.chain_in_loop(x, 4))


def test_the_wave_simulation_through_the_cuda_backend(device):
    wave = _wave()
    _, v, problem, _ = wave.setup(20, 20, 30, np.float64)
    before = len(device.launched)
    traces, last = astjax.jit(wave.simulate, backend="cuda")(v, **problem)
    want_traces, want_last = wave.simulate(v, **problem)
    np.testing.assert_allclose(traces, want_traces, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(last, want_last, rtol=1e-12, atol=1e-12)
    assert len(device.launched) - before >= 30           # kernels inside every step


def _wave():
    import importlib.util
    path = os.path.join(os.path.dirname(__file__), "..", "examples", "wave.py")
    spec = importlib.util.spec_from_file_location("astjax_example_wave", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_make_source_shows_host_code_and_cuda_text_without_a_gpu(monkeypatch):
    monkeypatch.setattr(cr, "_default", [])
    monkeypatch.setattr(cr, "gpu_visible", lambda: False)
    x, y = TF._r(4, 3, dtype=np.float32), TF._r(3, dtype=np.float32)
    text = astjax.make_source(astjax.jit(F.two_results, backend="cuda"))(x, y)
    assert "def jit_two_results(" in text and "_kernel(" in text
    assert 'extern "C" __global__ void' in text and "blockIdx.x" in text
    assert "/* fusable.py:" in text and "tanhf(" in text    # float32 stays float32
    with pytest.raises(ArgumentError, match=r'pip install "astjax\[cuda\]"'):
        astjax.jit(F.two_results, backend="cuda")(x, y)


def test_the_cuda_backend_is_listed_and_chosen_only_with_a_gpu(monkeypatch):
    from astjax import backends
    assert "cuda" in astjax.backends()
    monkeypatch.delenv("ASTJAX_BACKEND", raising=False)
    monkeypatch.setattr(cr, "gpu_visible", lambda: False)
    runs, why = astjax.backends()["cuda"]        # listed as not running here, and why
    assert runs is False and 'pip install "astjax[cuda]"' in why and "make_source" in why
    cpu = backends.get("cpu").name                 # the best CPU backend (c or numpy)
    assert backends.get(None).name == cpu != "cuda"
    monkeypatch.setattr(cr, "gpu_visible", lambda: True)
    assert backends.get(None).name == "cuda"
    assert astjax.backends()["cuda"] == (True, "")
    assert backends.get("cpu").name == cpu          # "cpu" never means the GPU
    monkeypatch.setenv("ASTJAX_BACKEND", "numpy")
    assert backends.get(None).name == "numpy"


def test_every_kernel_built_here_went_through_nvrtc():
    if not NVRTC:
        pytest.skip(nv.available()[1])
    assert DEVICE.modules and DEVICE.ptx == len(DEVICE.modules)


def test_astjax_show_and_gen_with_the_cuda_backend(tmp_path, capsys):
    from astjax import cli
    target = os.path.join(os.path.dirname(__file__), "programs", "fusable.py")
    assert cli.main(["show", f"{target}:two_results", "-t", "jit(backend='cuda')",
                     "-a", "f32[30,30], f32[30]", "--color", "never"]) == 0
    host_only = capsys.readouterr().out
    assert "c_kernel(a, b)" in host_only and "__global__" not in host_only
    assert cli.main(["show", f"{target}:two_results", "-t", "jit(backend='cuda')",
                     "-a", "f32[30,30], f32[30]", "--color", "never", "--kernels"]) == 0
    shown = capsys.readouterr().out
    assert "def jit_two_results(a, b):" in shown and "c_kernel(a, b)" in shown
    assert 'extern "C" __global__ void c_kernel_contig32(' in shown and "tanhf(" in shown
    out = tmp_path / "two.py"
    assert cli.main(["gen", f"{target}:two_results", "-t", "jit(backend='cuda')",
                     "-a", "f32[30,30], f32[30]", "-o", str(out)]) == 0
    cu = (tmp_path / "two.cu").read_text()
    assert 'extern "C" __global__' in cu and "/* fusable.py:" in cu
    mod = load_module(out)
    assert mod.CUDA_SOURCE.strip() == cu.strip()
    a, b = TF._r(30, 30, dtype=np.float32), TF._r(30, dtype=np.float32)
    assert identical(mod.jit_two_results(a, b), F.two_results(a, b))   # NumPy-only host
    if NVRTC:
        assert ".entry c_kernel_strided64" in nv.compile_ptx(cu)


def load_module(path):
    import importlib.util
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ================================= host code on a device array module (as CuPy)

SCALE = 2.0


def scaled(x):
    return x * SCALE + 1.0


class ArrayModuleDevice(CheckedDevice):
    """The CPU device with its own array type (tests/fakecupy.py: device arrays that
    refuse implicit conversion to NumPy, as CuPy's): host code must run on the module,
    NumPy arguments must be moved, results must stay device arrays."""

    def __init__(self):
        import fakecupy as TD
        super().__init__(max_blocks=3, block=64)
        self.xp, self.ndarray, self.TD = TD.FAKE, TD.DeviceArray, TD
        self._libs = DEVICE._libs           # the kernels are the same texts

    def asarray(self, a):
        if type(a) is self.ndarray:
            return a
        self.TD._no_transfer_in("asarray()")    # (CupyDevice.asarray: an H2D copy)
        return self.ndarray(np.array(a))

    def empty(self, shape, dtype):
        return self.ndarray(np.empty(shape, dtype))

    def to_host(self, a):
        return a.get()

    def data_ptr(self, a):
        return a.data.ptr

    def index_array(self, values):
        got = self._index.get(values)
        if got is None:     # (CupyDevice.index_array: copied to the device once)
            self.TD._no_transfer_in("index_array()")
            got = self._index[values] = self.ndarray(np.array(values, np.int64))
        return got

    @functools.cached_property
    def _index(self):
        return {}


def test_device_runtimes_share_no_mutable_state_with_the_host_runtime():
    """A device's runtime modules (``device.runtime_for``) are the host's executed with
    ``numpy`` meaning the device module; a mutable module-level object left shared
    with the host's (a cache of arrays) hands host arrays to device code, which then
    copies them to the device at every kernel call, and a CUDA-graph capture refuses
    the copy.  ``rt.meta``'s shared views did exactly that (FWI on an H200: 293 ms
    eager against 111-160, and no replay)."""
    import importlib
    import types
    import fakecupy
    from astjax import device
    clones = device.runtime_for(fakecupy.FAKE)
    # shared on purpose: os.environ's own mapping (read for ASTJAX_NUM_THREADS)
    allowed = {("astjax.runtime_fusion", "_ENV_DATA")}
    immutable = (type, types.ModuleType, int, float, complex, str, bytes, bool, tuple,
                 frozenset, type(None), type(annotations))
    shared = []
    for name, clone in clones.items():
        original = importlib.import_module(name)
        for key, value in vars(clone).items():
            if key.startswith("__") or callable(value) or isinstance(value, immutable):
                continue
            if getattr(original, key, None) is value and (name, key) not in allowed:
                shared.append(f"{name}.{key}")
    assert not shared, f"device runtimes share the host's mutable objects: {shared}"
    rt = clones["astjax.runtime"]
    x = fakecupy.dev(np.zeros((3, 4), np.float32))
    stand_in = rt.meta(x)
    assert type(stand_in) is fakecupy.DeviceArray and stand_in.shape == (3, 4)
    assert type(rt.meta((x, [x]))[1][0]) is fakecupy.DeviceArray


@pytest.mark.parametrize("index", [0, 2, 4, 6, 8, 10, 16, 19, 23, 24, 26])
def test_host_code_runs_on_the_device_array_module(index):
    dev = ArrayModuleDevice()
    f, args = TF.CASES[index]
    a = args()
    expected = outcome(astjax.jit(f), a)
    dev.xp.calls.clear()
    with cr.use_device(dev):
        value, error = outcome(astjax.jit(f, backend="cuda"), a)
    assert identical(error, expected[1])
    if error is None:
        leaves = astjax.tree_util.tree_leaves(value)
        assert not [v for v in leaves if isinstance(v, (np.ndarray, np.generic))], value
        host = dev.TD.host(value)
        same = TC.near if TC._transcendental(f) else identical
        assert same(host, expected[0]), (host, expected[0])


def test_rebinding_a_global_is_seen_by_device_code():
    global SCALE
    dev = ArrayModuleDevice()
    x = TF._r(5, 4)
    jf = astjax.jit(scaled, backend="cuda")
    with cr.use_device(dev):
        assert np.array_equal(jf(x), x * 2.0 + 1.0)
        SCALE = 3.0
        try:
            assert np.array_equal(jf(x), x * 3.0 + 1.0)
        finally:
            SCALE = 2.0
    assert len(dev.launched) == 2
    if not cr.gpu_visible():
        with pytest.raises(ArgumentError, match="pip install"):     # no device here
            jf(x)
