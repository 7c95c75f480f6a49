"""The ``"cuda"`` jit backend: fused groups as CUDA kernels, the rest on CuPy.

Same passes and host code as the C backend (``kernels/backend.py``); ``load`` swaps
each ``run_fused(group, ...)`` call for a ``CudaKernelCall`` of the group's kernel
and loads the host code with ``np`` bound to the device's array module
(``device.rebind``: CuPy, so matrix products run on cuBLAS, FFTs on cuFFT...).
Arguments are moved to the device on entry (NumPy arrays become CuPy arrays);
results stay there, as JAX returns device arrays.

A ``CudaKernelCall`` specializes its kernel per combination of argument kinds
(``ir.specialize``), renders it (``cuda.render``) and gets its entry points from the
device once; per call it only computes the broadcast shape, allocates the results on
the device and launches: grid-stride loops, ``cuda.BLOCK`` threads per block, at most
``device.max_blocks`` blocks, 32-bit index math when every index fits.  Whatever the
kernel cannot take as NumPy would runs the group's block function, on the device
array module.

Devices: ``CupyDevice`` (a GPU through ``cupy.RawModule``, whose kernels go through
CuPy's on-disk cache) or, for tests without a GPU, ``cuda_emulate.EmulatedDevice``
(``use_device``).  Without CuPy, calling a ``backend="cuda"`` function raises an error
saying how to install it; generating and showing its code needs no GPU.
"""
from __future__ import annotations

import contextlib
import functools
import math

import numpy as np

from astjax import core
from astjax.generation import Generated
from astjax.core import External, Var
from astjax.errors import ArgumentError
from astjax.kernels import cuda as cuda_render, ir
from astjax.kernels.ir import Unsupported

# between the host Python and the kernels' CUDA in the shown source (astjax show
# prints the kernels with --kernels: kernels/backend.py without_kernels)
KERNELS_HEADER = "\n\n# ---- compiled kernels (CUDA C, astjax/kernels/cuda.py) ----\n\n"
INSTALL = ('the CUDA backend needs CuPy and a GPU: pip install "astjax[cuda]" '
           "(the cupy-cuda13x wheel, CUDA 13)")
_INT32_LIMIT = (1 << 31) - 1
_NARROW_LIMIT = _INT32_LIMIT    # indexed kernels' 32-bit flat index (tests lower it)


# ------------------------------------------------------------------- devices

class CupyDevice:
    """The current CuPy device: kernels through ``cupy.RawModule``."""

    name = "cuda"

    def __init__(self):
        import cupy
        from astjax import device
        self.xp = cupy
        self.ndarray = cupy.ndarray
        device.register_array_module(cupy.ndarray, cupy)
        dev = cupy.cuda.Device()
        sms = cupy.cuda.runtime.getDeviceProperties(dev.id)["multiProcessorCount"]
        self.max_blocks = sms * 32
        self.block = cuda_render.BLOCK
        self._modules: dict = {}
        self._index: dict = {}

    def function(self, module, variant):
        from astjax.kernels.cuda_nvrtc import options_for
        mod = self._modules.get(module.text)
        if mod is None:
            options = tuple(o for o in options_for(module.text) if o != "-default-device")
            mod = self._modules[module.text] = self.xp.RawModule(code=module.text,
                                                                  options=options)
        return mod.get_function(module.kernels[variant].name)

    def asarray(self, a):
        return self.xp.asarray(a)

    def empty(self, shape, dtype):
        return self.xp.empty(shape, dtype)

    def to_host(self, a):
        return self.xp.asnumpy(a)

    def data_ptr(self, a):
        return a.data.ptr

    def gemm(self, a, b):
        """``a @ b`` for C- or F-ordered float32/float64 matrices, by cuBLAS on the
        current stream, called through its C entry points (``cublas_library``): CuPy's
        own cuBLAS wrappers re-bind the handle to the current stream before every call,
        which CuPy refuses while a stream captures (``cuda_graph.capture_matmul``)."""
        from astjax.kernels import cuda_graph
        xp = self.xp
        blas = cublas_library()
        stream = xp.cuda.get_current_stream().ptr
        if cuda_graph.capturing():
            # the handle cupy_capture bound to the capturing stream before the capture
            # began (binding it now is what CuPy refuses)
            handle = self.capture_blas
            if handle is None or blas.stream(handle) != stream:
                raise RuntimeError("no cuBLAS handle bound to the capturing stream")
        else:
            from cupy_backends.cuda.libs import cublas
            handle = xp.cuda.device.get_cublas_handle()
            cublas.setStream(handle, stream)
        m, n = a.shape[0], b.shape[1]
        out = xp.empty((m, n), a.dtype)
        op_1, op_2, rows, cols, inner, ld_1, ld_2, ld_out = gemm_arguments(a, b)
        one, zero = np.ones((), a.dtype), np.zeros((), a.dtype)
        blas.gemm(a.dtype, handle, op_1, op_2, rows, cols, inner, one.ctypes.data,
                  b.data.ptr, ld_1, a.data.ptr, ld_2, zero.ctypes.data, out.data.ptr,
                  ld_out)
        return out

    capture_blas = None         # (cuda_graph.cupy_capture sets it for a capture)

    def stream_id(self):
        """The current stream (a graph replays on the stream its buffers were filled on)."""
        return self.xp.cuda.get_current_stream().ptr

    def capture(self, fn):
        """``fn``'s launches captured as a CUDA graph (``cuda_graph.cupy_capture``)."""
        from astjax.kernels import cuda_graph
        return cuda_graph.cupy_capture(self, fn)

    def private_memory(self):
        from astjax.kernels import cuda_graph
        return cuda_graph.PrivateMemory(self.xp)

    def index_array(self, values: tuple):
        got = self._index.get(values)
        if got is None:
            got = self.xp.asarray(np.array(values, np.int64))
            if len(self._index) < 4096:     # kept: a captured graph may read them
                self._index[values] = got
        return got


@functools.lru_cache(maxsize=None)
def gpu_visible() -> bool:
    """CuPy is installed and sees at least one GPU (probed once)."""
    import importlib.util
    if importlib.util.find_spec("cupy") is None:
        return False
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:       # noqa: BLE001  (no driver, no device: CuPy raises its own)
        return False


_override: list = []
_default: list = []


def current_device():
    """The device kernels run on: ``use_device``'s, else the GPU; else the error
    saying how to get one."""
    if _override:
        return _override[-1]
    if not _default:
        if not gpu_visible():
            raise ArgumentError(INSTALL)
        _default.append(CupyDevice())
    return _default[0]


@contextlib.contextmanager
def use_device(dev):
    """Run ``backend="cuda"`` code on ``dev`` (an ``EmulatedDevice`` in tests)."""
    _override.append(dev)
    try:
        yield dev
    finally:
        _override.pop()


def available():
    """Always usable for showing code; running it needs a GPU (``current_device``)."""
    return True, ""


# --------------------------------------------------------------- kernel calls

ROWS_MIN = 32       # reduced elements per result below which a thread per result wins


def row_blocks(dev, nout, reduced, last_axis_reduced) -> bool:
    """Reduce a kept-axes reduction with one block per result (``cuda.render_indexed``'s
    ``rows``) rather than one thread per result.  A block per result when each result
    folds many elements (``ROWS_MIN``) and either the reduced axes include the last
    (a thread per result would stride through memory: neighbouring threads, distant
    addresses) or there are too few results to occupy the device with one thread each.
    ``dev.reduce_rows`` (True/False) forces a choice (tests, benchmarks)."""
    forced = getattr(dev, "reduce_rows", None)
    if forced is not None:
        return forced
    if reduced < ROWS_MIN:
        return False
    return last_axis_reduced or nout * 4 < dev.max_blocks * dev.block

class _Spec:
    __slots__ = ("module", "typed", "out_dtypes", "checks", "functions")

    def __init__(self, module, typed):
        self.module = module
        self.typed = typed
        self.out_dtypes = typed.out_dtypes
        self.checks = [(i, np.iinfo(dt)) for i, dt in typed.int_checks]
        self.functions: dict = {}


class CublasLibrary:
    """cuBLAS's C entry points that ``CupyDevice.gemm`` calls, through ``ctypes`` on the
    library CuPy loaded: the handle's stream is read, never set (CuPy's wrappers set
    it before each call, and refuse to while a stream captures)."""

    OPS = {"N": 0, "T": 1}              # cublasOperation_t
    POINTER_MODE_HOST = 0               # cublasPointerMode_t

    def __init__(self, lib):
        import ctypes
        p, i = ctypes.c_void_p, ctypes.c_int
        self._gemm = {}
        for char, symbol in (("f", "cublasSgemm_v2"), ("d", "cublasDgemm_v2")):
            fn = getattr(lib, symbol)
            fn.argtypes = [p, i, i, i, i, i, p, p, i, p, i, p, p, i]
            fn.restype = i
            self._gemm[char] = fn
        self._get_stream = lib.cublasGetStream_v2
        self._get_stream.argtypes = [p, ctypes.POINTER(p)]
        self._get_mode = lib.cublasGetPointerMode_v2
        self._get_mode.argtypes = [p, ctypes.POINTER(i)]
        self._set_mode = lib.cublasSetPointerMode_v2
        self._set_mode.argtypes = [p, i]
        for fn in (self._get_stream, self._get_mode, self._set_mode):
            fn.restype = i

    @staticmethod
    def _check(status, what):
        if status != 0:
            raise RuntimeError(f"cuBLAS {what} failed (cublasStatus_t {status})")

    def stream(self, handle) -> int:
        """The stream ``handle`` is bound to (its address; 0: the legacy stream)."""
        import ctypes
        got = ctypes.c_void_p()
        self._check(self._get_stream(handle, ctypes.byref(got)), "cublasGetStream")
        return got.value or 0

    def gemm(self, dtype, handle, op_1, op_2, rows, cols, inner, alpha, b, ld_1, a,
             ld_2, beta, out, ld_out):
        """cuBLAS's column-major ``gemm`` with ``alpha``/``beta`` at host addresses."""
        import ctypes
        mode = ctypes.c_int()
        self._check(self._get_mode(handle, ctypes.byref(mode)), "cublasGetPointerMode")
        self._check(self._set_mode(handle, self.POINTER_MODE_HOST), "cublasSetPointerMode")
        try:
            self._check(self._gemm[np.dtype(dtype).char](
                handle, self.OPS[op_1], self.OPS[op_2], rows, cols, inner, alpha, b,
                ld_1, a, ld_2, beta, out, ld_out), "gemm")
        finally:
            self._set_mode(handle, mode.value)


@functools.lru_cache(maxsize=None)
def cublas_library() -> CublasLibrary:
    """The cuBLAS library CuPy loaded (found among the process's mapped files, else by
    name), as ``CublasLibrary``."""
    import ctypes
    import ctypes.util
    import os
    from cupy_backends.cuda.libs import cublas  # noqa: F401  (loads libcublas)
    path = None
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                name = line.rsplit(None, 1)[-1]
                if os.path.basename(name).startswith("libcublas.so"):
                    path = name
                    break
    except OSError:
        pass
    path = path or ctypes.util.find_library("cublas")
    if path is None:
        raise RuntimeError("cuBLAS: the library CuPy uses was not found")
    return CublasLibrary(ctypes.CDLL(path))


def gemm_arguments(a, b):
    """cuBLAS's ``gemm`` arguments for the row-major product ``a @ b`` (``a`` m x k,
    ``b`` k x n, each C- or F-ordered; the result C-ordered): ``(op_1, op_2, rows,
    cols, inner, ld_1, ld_2, ld_out)`` for ``gemm(op_1, op_2, rows, cols, inner, 1, b,
    ld_1, a, ld_2, 0, out, ld_out)``.  cuBLAS is column-major, where a C-ordered
    matrix reads as its transpose: the product C = A B is C^T = B^T A^T there, so
    ``b`` comes first; an F-ordered operand reads as itself and is transposed
    ("T")."""
    m, k = a.shape
    n = b.shape[1]
    op_1, ld_1 = ("N", n) if b.flags.c_contiguous else ("T", k)
    op_2, ld_2 = ("N", k) if a.flags.c_contiguous else ("T", m)
    return op_1, op_2, n, m, k, ld_1, ld_2, n


def _call_signature(dev, darray, args):
    """What an indexed kernel's launch depends on, per argument: a device array's
    shape, strides and dtype, an integer's value (slice bounds, range checks), a
    number's type (its dtype when passed by value); None when an argument is anything
    else (the full path decides)."""
    sig = [dev]
    for a in args:
        t = type(a)
        if t is darray:
            sig.append((a.shape, a.strides, a.dtype))
        elif t is int or isinstance(a, np.integer):
            sig.append((t, int(a)))
        elif t is float or t is bool or isinstance(a, (np.floating, np.bool_)):
            sig.append(t)
        else:
            return None
    return tuple(sig)


class _Plan:
    """An indexed kernel's launch for one call signature: the compiled function, the
    grid, the ``n``/``P`` head, the results' shapes and dtypes, and how each scalar
    argument is passed (by value, in its kernel dtype), so that a repeated call (a
    scan step) only allocates its results and launches."""

    __slots__ = ("fn", "grid", "block", "head", "outs", "by_value", "darray")

    def __init__(self, launch, typed, lay, darray):
        self.fn, self.grid, self.block, self.head = launch
        self.outs = tuple(zip(lay.out_shapes, typed.out_dtypes))
        self.by_value = tuple(inp.dtype.type for inp in typed.inputs)
        self.darray = darray

    def run(self, dev, args):
        darray = self.darray
        outs = [dev.empty(sh, dt) for sh, dt in self.outs]
        operands = [a if type(a) is darray else to(a) for a, to in zip(args, self.by_value)]
        self.fn(self.grid, self.block, self.head + (*operands, *outs))
        return outs[0] if len(outs) == 1 else tuple(outs)


class CudaKernelCall:
    """One fused group as a CUDA kernel (``block``: its fallback, on the device)."""

    def __init__(self, kernel: ir.Kernel, block=None, device=None):
        self.kernel = kernel
        self.block = block
        self.device = device
        self.specs: dict = {}
        self.__name__ = kernel.name
        self.indexed = not ir.is_elementwise(kernel)
        self.typed_indexed: dict = {}    # kinds -> TypedIndexed or None
        self.layouts: dict = {}          # (kinds, shapes, strides, ints) -> Layout
        self.plans: dict = {}            # _call_signature -> _Plan (indexed kernels)
        everything = tuple(range(len(kernel.inputs)))
        self.partial = [] if self.indexed else [
            d for d in ir.output_deps(kernel) if d != everything]

    def __repr__(self):
        return f"<astjax CUDA kernel {self.kernel.name}>"

    def _flagged(self, module):
        """``module`` as it is compiled: marked for the fast-math options when chosen."""
        if not self.kernel.fastmath:
            return module
        from astjax.kernels.cuda_nvrtc import FASTMATH_MARK
        return cuda_render.Module(FASTMATH_MARK + module.text, module.kernels)

    def spec(self, kinds, pointers):
        key = (kinds, pointers)
        got = self.specs.get(key, False)
        if got is False:
            try:
                typed = ir.specialize(self.kernel, kinds)
                module = self._flagged(cuda_render.render(
                    typed, cuda_render.cuda_name(self.kernel), pointer_scalars=pointers))
            except Unsupported:
                got = None
            else:
                got = _Spec(module, typed)
            self.specs[key] = got
        return got

    def __call__(self, *args):
        dev = self.device or current_device()
        darray = dev.ndarray
        if darray is not np.ndarray and any(type(a) is np.ndarray for a in args):
            # a host array reaching device code (a constant): moved, for the kernel and
            # for the fallback alike
            args = tuple(dev.asarray(a) if type(a) is np.ndarray else a for a in args)
        if self.indexed:
            return self._call_indexed(dev, args)
        kinds, shapes, pointers, moved = [], [], [], []
        for k, a in enumerate(args):
            t = type(a)
            if t is darray:
                dt = a.dtype
                if dt.char not in ir.SUPPORTED or not dt.isnative:
                    return self.block(*args)
                scalar = a.size == 1
                kinds.append((dt, scalar, None))
                if scalar:
                    pointers.append(k)
                shapes.append(a.shape)
            else:
                try:
                    kinds.append(ir.input_kind(a))
                except Unsupported:
                    return self.block(*args)
            moved.append(a)
        kinds, pointers = tuple(kinds), tuple(pointers)
        spec = self.spec(kinds, pointers)
        if spec is None or not shapes:
            return self.block(*args)
        shape = shapes[0]
        if len(shapes) > 1 and any(sh != shape for sh in shapes):
            try:
                shape = np.broadcast_shapes(*shapes)
            except ValueError:
                return self.block(*args)
        if not shape:
            return self.block(*args)
        for deps in self.partial:
            if np.broadcast_shapes(*(np.shape(args[i]) for i in deps)) != shape:
                return self.block(*args)
        for i, info in spec.checks:
            if not info.min <= args[i] <= info.max:
                return self.block(*args)
        n = math.prod(shape)
        outs = [dev.empty(shape, dt) for dt in spec.out_dtypes]
        if n:
            self._launch(dev, spec, moved, kinds, shape, n, outs)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _launch(self, dev, spec, args, kinds, shape, n, outs):
        block = dev.block
        blocks = min(-(-n // block), dev.max_blocks)
        fits = n + blocks * block <= _INT32_LIMIT
        operands, contiguous, reach = [], True, 0
        strides = []
        for a, (dt, scalar, weak), inp in zip(args, kinds, spec.typed.inputs):
            if scalar and not isinstance(a, dev.ndarray):
                operands.append(inp.dtype.type(a))      # by value
                strides.append(None)
                continue
            operands.append(a)
            if scalar:
                strides.append(None)
                continue
            if a.shape != shape or not a.flags.c_contiguous:
                contiguous = False
            st = [0] * len(shape)
            pad = len(shape) - a.ndim
            for d in range(a.ndim):
                if a.shape[d] != 1:
                    s, r = divmod(a.strides[d], a.itemsize)
                    if r:
                        return self._fallback(outs, args)
                    st[pad + d] = s
                    reach += abs(s) * (a.shape[d] - 1)
            strides.append(st)
        operands += outs
        if contiguous:
            variant = "contig32" if fits else "contig64"
            if fits and n % cuda_render.VEC == 0 and all(
                    dev.data_ptr(a) % cuda_render.vec_alignment(a.dtype) == 0
                    for a in operands if isinstance(a, dev.ndarray) and a.size != 1):
                variant = "vec4"
                blocks = min(-(-(n // cuda_render.VEC) // block), dev.max_blocks)
            head = (np.int64(n),)
        else:
            variant = "strided32" if fits and reach <= _INT32_LIMIT else "strided64"
            table = []
            for st in strides:          # one row per input, as the kernel indexes them
                table += st if st is not None else [0] * len(shape)
            head = (np.int64(n), np.int32(len(shape)), dev.index_array(tuple(shape)),
                    dev.index_array(tuple(table)))
        fn = spec.functions.get(variant)
        if fn is None:
            fn = spec.functions[variant] = dev.function(spec.module, variant)
        fn((blocks,), (block,), head + tuple(operands))

    # -- indexed kernels (slices, pads, transposes, casts, reductions) ------------

    def _call_indexed(self, dev, args):
        darray = dev.ndarray
        sig = _call_signature(dev, darray, args)
        plan = self.plans.get(sig) if sig is not None else None
        if plan is not None:
            return plan.run(dev, args)
        kinds, key, pointers = [], [], []
        for k, a in enumerate(args):
            if type(a) is darray:
                dt = a.dtype
                if dt.char not in ir.SUPPORTED or not dt.isnative:
                    return self.block(*args)
                kinds.append((dt, a.ndim, None))
                key.append((a.shape, a.strides))
                if a.ndim == 0:
                    pointers.append(k)       # read on the device, not synchronized
            else:
                try:
                    kinds.append(ir.indexed_kind(a))
                except Unsupported:
                    return self.block(*args)
                key.append(a if isinstance(a, (int, np.integer)) else None)
        kinds, pointers = tuple(kinds), tuple(pointers)
        typed = self.typed_indexed.get(kinds, False)
        if typed is False:
            try:
                typed = ir.specialize_indexed(self.kernel, kinds)
            except Unsupported:
                typed = None
            self.typed_indexed[kinds] = typed
        if typed is None:
            return self.block(*args)
        for i, dt in typed.int_checks:
            info = np.iinfo(dt)
            if not info.min <= args[i] <= info.max:
                return self.block(*args)
        from astjax.kernels import layout
        lay = layout.cached(self.layouts, (kinds, tuple(key)), typed, args)
        if lay is None:
            return self.block(*args)
        outs = [dev.empty(sh, dt) for sh, dt in zip(lay.out_shapes, typed.out_dtypes)]
        n = math.prod(lay.domain)
        if n:
            skey = ("indexed", kinds, pointers, lay.baked)
            spec = self.specs.get(skey, False)
            if spec is False:
                try:
                    module = self._flagged(cuda_render.render_indexed(
                        typed, cuda_render.cuda_name(self.kernel), lay.baked, pointers))
                except Unsupported:
                    spec = None
                else:
                    spec = _Spec(module, typed)
                self.specs[skey] = spec
            if spec is None:
                return self.block(*args)
            operands = [a if isinstance(a, darray) else inp.dtype.type(a)
                        for a, inp in zip(args, typed.inputs)]
            P = dev.index_array(tuple(lay.params.tolist()) or (0,))
            launch = self._launch_indexed(dev, spec, typed, lay, n, P, operands, outs)
            if launch is not None and sig is not None:
                if len(self.plans) > 256:
                    self.plans.clear()
                self.plans[sig] = _Plan(launch, typed, lay, darray)
        if typed.reduce is not None and not lay.out_shapes[0] and darray is np.ndarray:
            return outs[0][()]          # NumPy gives a scalar for a full reduction
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _launch_indexed(self, dev, spec, typed, lay, n, P, operands, outs):
        block = dev.block

        def fn(variant):
            got = spec.functions.get(variant)
            if got is None:
                got = spec.functions[variant] = dev.function(spec.module, variant)
            return got
        if "rows" in spec.module.kernels:
            nout = math.prod(lay.out_shapes[0])
            last = len(lay.domain) - 1 in {a % len(lay.domain) for a in typed.reduce.axes}
            if row_blocks(dev, nout, n // nout, last):
                blocks = max(1, min(nout, dev.max_blocks))
                fn("rows")((blocks,), (block,), (np.int64(nout), P, *operands, *outs))
                return
        if "indexed" in spec.module.kernels:
            work = math.prod(lay.out_shapes[0]) if typed.reduce is not None else n
            blocks = max(1, min(-(-work // block), dev.max_blocks))
            variant = "indexed32" if "indexed32" in spec.module.kernels and \
                work + blocks * block <= _NARROW_LIMIT else "indexed"
            head = (np.int64(work), P)
            fn(variant)((blocks,), (block,), head + (*operands, *outs))
            return fn(variant), (blocks,), (block,), head
        blocks = max(1, min(-(-n // block), dev.max_blocks))
        part = dev.empty((blocks,), typed.reduce.acc)
        fn("partial")((blocks,), (block,), (np.int64(n), P, *operands, part))
        fn("final")((1,), (block,), (np.int64(blocks), P, part, outs[0]))

    def _fallback(self, outs, args):
        got = self.block(*args)
        got = got if isinstance(got, tuple) else (got,)
        for o, g in zip(outs, got):
            o[...] = g


# ------------------------------------------------------------------- backend

def load(fn, doc, label, fastmath=False):
    """Host code on the device's array module; each fused group a CUDA kernel
    (``fastmath``: compiled with ``cuda_nvrtc.FASTMATH_OPTIONS``)."""
    from astjax import device, runtime_fusion
    from astjax.generation import base_namespace as _base_namespace
    from astjax import codegen
    run_ref = fn.env.value_ref(runtime_fusion.run_fused, "run_fused")
    calls = {}
    for helper in fn.helpers:
        plan = getattr(helper, "kernel_plan", None)
        if plan is None:
            continue
        inputs, members, outputs = plan
        name = helper.name[:-6] if helper.name.endswith("_group") else helper.name
        kernel = ir.from_group(f"{name}_kernel", inputs, members, outputs, 1)
        kernel.fastmath = fastmath
        calls[helper.name] = CudaKernelCall(kernel)
    shown = []
    for s in core.walk(fn.body):
        if isinstance(s, External) and s.func == Var(run_ref) and s.args and \
                isinstance(s.args[0], Var) and s.args[0].name in calls and \
                "reuse" not in s.kwargs:
            # (a group computing into a donated argument stays with run_fused)
            kc = calls[s.args[0].name]
            ref = fn.env.value_ref(kc, kc.kernel.name)
            s.func = Var(ref)
            s.args = list(s.args[3:])
            s.kwargs = {}
            shown.append(kc)
    origins: list = []
    source = codegen.print_with_helpers(fn, doc, origins)
    host = {"source": source, "origins": origins}
    namespace = _base_namespace()
    namespace.update(fn.env.current())
    texts = _display(fn, shown)
    shown_source = source + (KERNELS_HEADER + "\n\n".join(texts) if texts else "")
    state = {}

    def bound():
        """The host code loaded on the device's array module (on the first call)."""
        dev = current_device()
        got = state.get(id(dev))
        if got is None:
            ns = device.rebind(namespace, dev.xp)
            codegen.load_source(host["source"], ns, f"{label} on {dev.name}",
                                host["origins"])
            for block_name, kc in calls.items():
                kc.block = ns[block_name]
            got = state[id(dev)] = (dev, ns)
        return got

    main_name = fn.name

    def run(*args, **kwargs):
        dev, ns = bound()
        for kc in calls.values():
            kc.device = dev
        args = [_to_device(dev, a) for a in args]
        kwargs = {k: _to_device(dev, v) for k, v in kwargs.items()}
        return ns[main_name](*args, **kwargs)
    replayed = []

    @functools.wraps(lambda *a, **k: None)
    def main(*args, **kwargs):
        from astjax.kernels import cuda_graph
        if not cuda_graph.enabled() or gen.stateful:
            return run(*args, **kwargs)
        # called again and again on device arrays of the same shapes (a step in a
        # Python loop, a whole scan): one CUDA graph, replayed (cuda_graph.py; off by
        # default: the graph keeps the call's intermediate buffers)
        if not replayed:
            replayed.append(cuda_graph.StepGraph(lambda a, k: run(*a, **k)))
        return replayed[0](args, kwargs)
    main.__name__ = main.__qualname__ = main_name
    gen = _DeviceGenerated(shown_source, {"main": main}, namespace, fn.env, [(fn, doc)])
    gen.graphs = replayed
    gen.stateful = _stateful(namespace)
    gen.bound = bound
    gen.kernel_text = "\n\n".join(texts)
    return gen


def _stateful(namespace) -> bool:
    from astjax.kernels import cuda_graph
    return cuda_graph.reads_host_state(namespace.values())


def _to_device(dev, a):
    from astjax.tree_util import tree_map
    if dev.ndarray is np.ndarray or type(a) is dev.ndarray:
        return a

    def put(x):
        return dev.asarray(x) if type(x) is np.ndarray else x
    return put(a) if type(a) is np.ndarray else tree_map(put, a)


class _DeviceGenerated(Generated):
    """``generation.Generated`` for device code: ``refresh`` re-binds rebound globals to the
    device's array module; ``kernel_text``: the kernels' CUDA text (``astjax gen``)."""

    bound = None
    kernel_text = ""
    graphs = ()                 # the whole call's CUDA graphs, once captured (load sets it)
    stateful = False            # draws from a stateful generator: never replayed

    def refresh(self):
        from astjax import device
        current = self.env.current()
        last = getattr(self, "_last", None)
        if last is not None and len(last) == len(current) and all(
                last.get(k, self) is v for k, v in current.items()):
            return                      # nothing rebound since the last call
        if last is not None:
            for graph in self.graphs:     # a rebound global: the graph read the old one
                graph.reset()
        self._last = dict(current)
        self.namespace.update(current)
        self.stateful = _stateful(self.namespace)
        if self.bound is not None and (_override or _default):
            dev, ns = self.bound()
            ns.update(device.rebind(current, dev.xp))


def _display(fn, kcs):
    """Each kernel's CUDA text for the argument types jit built the code for (values
    made on the host between kernels: float64 of the arguments' largest rank)."""
    known = dict(getattr(fn, "arg_kinds", {}) or {})
    for name, dt in getattr(fn, "kernel_arg_dtypes", {}).items():
        known.setdefault(name, (np.dtype(dt), None, None))
    top = max([k[1] for k in known.values() if k[1] is not None], default=1)
    from astjax.kernels.backend import shown_kinds
    out = []
    for kc in kcs:
        kinds, note = shown_kinds(kc.kernel, known, top)
        try:
            if kc.indexed:
                typed = ir.specialize_indexed(kc.kernel, tuple(kinds))
                text = kc._flagged(cuda_render.render_indexed(
                    typed, cuda_render.cuda_name(kc.kernel))).text
                ranks = [typed.values[v][1] for v, _ in typed.outputs]
            else:
                typed = ir.specialize(kc.kernel, tuple(
                    (dt, nd == 0, weak) for dt, nd, weak in kinds))
                text = kc._flagged(cuda_render.render(
                    typed, cuda_render.cuda_name(kc.kernel))).text
                ranks = [max([k[1] for k in kinds], default=0)] * len(typed.outputs)
        except Unsupported as e:
            out.append(f"/* {kc.kernel.name}: runs on the device array module for these "
                       f"types ({e}) */")
            continue
        for name, (_, dt), nd in zip(kc.kernel.outputs, typed.outputs, ranks):
            known[name] = (dt, nd, None)
        out.append(note + text)
    return out


def passes():
    from astjax.kernels import backend
    return backend.passes()


def reduce(x, ufunc="add", device=None):
    """``ufunc.reduce`` of all of ``x`` (a device array) by ``cuda.reduction``: a
    block-level tree reduction per block, then one block over the partial values; a
    0-d device array, as CuPy's reductions give."""
    dev = device or current_device()
    module = cuda_render.reduction(x.dtype, ufunc)
    fn = dev.function(module, "partial")
    x = x if x.flags.c_contiguous else dev.xp.ascontiguousarray(x)
    n = x.size
    block = dev.block
    blocks = max(1, min(-(-n // block), dev.max_blocks))
    partial = dev.empty((blocks,), x.dtype)
    fn((blocks,), (block,), (np.int64(n), x, partial))
    out = dev.empty((1,), x.dtype)
    fn((1,), (block,), (np.int64(blocks), partial, out))
    return out.reshape(())


def kernels_appendix(kernels: str, out) -> str:
    """What ``astjax gen`` adds to the NumPy module of a ``backend="cuda"`` jit: the
    kernels' CUDA text as ``CUDA_SOURCE`` (and, writing ``OUT.py``, as ``OUT.cu``)."""
    import os
    if out not in (None, "-"):
        path = os.path.splitext(out)[0] + ".cu"
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(kernels + "\n")
    from astjax.kernels.cuda_nvrtc import FASTMATH_MARK
    options = '"--fmad=false",' if FASTMATH_MARK not in kernels else \
        '"--fmad=true", "--prec-div=false"'
    return ("\n\n# The fused groups above as the CUDA kernels jit(backend=\"cuda\") runs "
            f"(compile with\n# cupy.RawModule(code=CUDA_SOURCE, options=({options})))."
            "\nCUDA_SOURCE = r\"\"\"\n" + kernels + "\n\"\"\"\n")
