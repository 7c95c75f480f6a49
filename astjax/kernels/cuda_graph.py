"""CUDA-graph replay of a loop body's step: one capture, one graph launch per step.

A short scan or fori step on the GPU is a handful of small kernel launches whose cost
is mostly the launches themselves.  When every step launches the same kernels on
buffers of the same shapes, the step can be captured once as a CUDA graph (CuPy's
stream capture) and replayed: the step's inputs are copied into fixed input buffers,
the graph runs, and the results, written into the same output buffers on every
replay, are copied out (the caller keeps each step's values: ``scan`` stacks them).

``StepGraph`` wraps a step function; it is behind a flag (``ASTJAX_CUDA_GRAPHS=1`` or
``enable()``), off by default, and falls back to calling the step as it is whenever
replay would not be the same computation:

* the first call runs eagerly (kernels are compiled and loaded then: not capturable);
* a call whose structure, shapes, dtypes or non-array values differ from the captured
  call's runs eagerly (a fori index is passed as a device scalar, so it is data);
* a capture that fails (a host synchronization inside the step: ``.item()``, a
  Python branch on a device value, an allocation the pool cannot make in capture)
  disables replay for that step for good, and the step runs eagerly.

The capture itself is the device's (``dev.capture(fn)`` and ``dev.private_memory()``:
``CupyDevice`` through ``cupy.cuda.Stream.begin_capture``/``end_capture`` and a pool
of the step's own; test devices emulate both), so the buffer and fallback logic here
runs in CI without a GPU.  Where it applies: ``lax.scan``/``lax.fori_loop`` called
with device arrays (a jitted step in an eager loop: ``lax.scan(jit(step), ...)``), and
a ``jit(f, backend="cuda")`` function called again and again on device arrays (a step
in a Python loop).  A step inside another step's capture is part of that capture.
Each replay copies the inputs in and the results out (device to device): it pays for
short steps, whose time is launches, not for steps moving much memory.
"""
from __future__ import annotations

import collections
import os
import threading

import numpy as _np

_ENABLED: list = []
_CAPTURING: list = []        # a capture in progress (steps nested in it are captured by it)
_STATS = collections.Counter()
_REFUSED: list = []          # why the last refused capture was refused


def stats() -> dict:
    """How graph replay went in this process: ``captures``, ``replays``, ``refused``
    captures (and ``last_refusal``, why the last one was refused), ``eager`` calls
    (another shape or value than the captured call's, another thread, host arrays)."""
    out = {k: _STATS[k] for k in ("captures", "replays", "refused", "eager")}
    out["last_refusal"] = _REFUSED[-1] if _REFUSED else None
    return out


def enable(on: bool = True):
    """Replay scan/fori steps as CUDA graphs (``ASTJAX_CUDA_GRAPHS=1`` does the same)."""
    _ENABLED[:] = [bool(on)]


def enabled() -> bool:
    if _ENABLED:
        return _ENABLED[0]
    return os.environ.get("ASTJAX_CUDA_GRAPHS", "") not in ("", "0")


def reads_host_state(values) -> bool:
    """Whether code reading these values (a generated function's globals) draws from
    a stateful random generator (``np.random.normal``, a ``Generator``, Python's
    ``random``): a graph would replay the numbers drawn while capturing, where each
    eager call draws new ones, so such code is never replayed."""
    import random as _random
    import numpy as _np
    states = (_np.random.RandomState, _np.random.Generator, _random.Random)
    for v in values:
        if isinstance(v, states) or isinstance(getattr(v, "__self__", None), states):
            return True
        module = getattr(v, "__module__", None) or ""
        name = getattr(v, "__name__", None) or ""
        if module.startswith("numpy.random") or module == "random" or \
                name.startswith("numpy.random") or name == "random":
            return True
    return False


def _refusal(e) -> str:
    """Why a capture was refused, and where: the innermost frame of the traceback, and
    the innermost frames of astjax and of the generated code that led there (the
    innermost frame alone is often inside CuPy, which says what, not why)."""
    import traceback
    frames = traceback.extract_tb(e.__traceback__)

    def at(f):
        return f"{f.filename}:{f.lineno} in {f.name}"
    where = []
    if frames:
        where.append(f"at {at(frames[-1])}")
        ours = [f for f in frames[:-1] if "astjax" in f.filename]
        generated = [f for f in ours if f.filename.startswith("<")]
        library = [f for f in ours if not f.filename.startswith("<")]
        for f in (library[-1:] + generated[-1:]):
            where.append(f"from {at(f)}")
    return f"{type(e).__name__}: {e}"[:240] + (f" ({'; '.join(where)})" if where else "")


def _stream_of(dev):
    stream_id = getattr(dev, "stream_id", None)
    return stream_id() if stream_id is not None else None


def capturing() -> bool:
    """Whether a step is being captured now (device code avoids what capture refuses)."""
    return bool(_CAPTURING)


def capture_matmul(a, b):
    """``a @ b`` for two matrices of one floating dtype, by the current device's
    ``gemm`` (None: not such operands, or a device without one: the caller uses
    the array module's product)."""
    from astjax.kernels import cuda_runtime as cr
    try:
        dev = cr.current_device()
    except Exception:       # noqa: BLE001
        return None
    gemm = getattr(dev, "gemm", None)
    if gemm is None or type(a) is not dev.ndarray or type(b) is not dev.ndarray:
        return None
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0] or a.dtype != b.dtype \
            or a.dtype.char not in "fd" or not (a.size and b.size):
        return None
    if not (a.flags.c_contiguous or a.flags.f_contiguous):
        a = dev.xp.ascontiguousarray(a)
    if not (b.flags.c_contiguous or b.flags.f_contiguous):
        b = dev.xp.ascontiguousarray(b)
    return gemm(a, b)


def _device_for(leaves):
    """The CUDA device whose arrays the leaves are (None: not all on one GPU)."""
    from astjax.kernels import cuda_runtime as cr
    try:
        dev = cr.current_device()
    except Exception:       # noqa: BLE001  (no GPU, no CuPy: nothing to replay on)
        return None
    if not hasattr(dev, "capture"):
        return None
    arrays = [a for a in leaves if isinstance(a, dev.ndarray)]
    return dev if arrays else None


class _Captured:
    """One captured call: its graph, the buffers its inputs are copied into, the
    results each replay writes."""
    __slots__ = ("replay", "inputs", "outputs")

    def __init__(self, replay, inputs, outputs):
        self.replay, self.inputs, self.outputs = replay, inputs, outputs


class StepGraph:
    """``f`` with its calls replayed from captured CUDA graphs where that is safe: one
    graph per call signature (shapes, dtypes, Python values), captured the second
    time the signature is seen (the first call warms up: kernels compile and load),
    at most ``LIMIT`` kept (each keeps its call's intermediate buffers).

    ``index_first``: the first argument is a loop index (fori): replayed calls get it
    as a device ``int64`` scalar (data, like the carry) rather than a Python int."""

    LIMIT = 4

    def __init__(self, f, index_first=False):
        self.f = f
        self.index_first = index_first
        self.graphs: dict = {}          # signature -> _Captured
        self.pools: dict = {}           # signature -> private memory (warm-up, capture)
        self.failed = False
        self.calls = 0
        self.replays = 0
        self.fallbacks = 0              # eager calls other than a signature's warm-up
        self.owner = None

    def reset(self):
        """Forget the captured graphs (the next call captures again): what they read
        has changed in a way the inputs do not show (a global rebound to another
        array)."""
        self.graphs.clear()
        self.owner = None

    def _eager(self, args):
        self.fallbacks += 1
        _STATS["eager"] += 1
        return self.f(*args)

    def __call__(self, *args):
        if self.failed or _CAPTURING:
            return self.f(*args)            # (inside another step's capture: part of it)
        from astjax.tree_util import tree_flatten
        leaves, tdef = tree_flatten(args)
        dev = _device_for(leaves)
        if dev is None:
            return self._eager(args)
        if self.index_first:
            leaves = list(leaves)
            leaves[0] = dev.xp.asarray(leaves[0], dtype="int64")
        key = self._key(tdef, leaves, dev)
        if key is None:
            return self._eager(args)
        owner = (threading.get_ident(), _stream_of(dev))
        if self.owner is not None and owner != self.owner:
            # another thread or stream: the input and output buffers are this one's
            return self._eager(args)
        self.calls += 1
        got = self.graphs.get(key)
        if got is None:
            pool = self.pools.get(key)
            if pool is None:                    # warm-up: compile and load the kernels
                if len(self.pools) >= self.LIMIT:
                    oldest = next(iter(self.pools))
                    del self.pools[oldest]
                    self.graphs.pop(oldest, None)
                pool = self.pools[key] = dev.private_memory()
                with pool:
                    return self.f(*args)
            try:
                with pool:
                    got = self._capture(dev, tdef, leaves)
            except Exception as e:  # noqa: BLE001  (refused: run as it is, for good)
                self.failed = True
                _STATS["refused"] += 1
                _REFUSED[:] = [_refusal(e)]
                return self._eager(args)
            _STATS["captures"] += 1
            self.graphs[key] = got
            self.owner = owner
        for buf, a in zip(got.inputs, leaves):
            if buf is not None:
                dev.xp.copyto(buf, a)
        got.replay()
        self.replays += 1
        _STATS["replays"] += 1
        return self._copied(dev, got.outputs)

    @staticmethod
    def _key(tdef, leaves, dev):
        key = [tdef]
        for a in leaves:
            if isinstance(a, dev.ndarray):
                key.append((a.shape, a.dtype.str))
            elif type(a) in (int, float, bool, complex, type(None), str):
                key.append((type(a), a))
            elif isinstance(a, _np.generic):      # a NumPy scalar: by value, like a number
                key.append((type(a), a.item()))
            else:
                return None                       # a host array: not replayable
        return tuple(key)

    def _capture(self, dev, tdef, leaves):
        from astjax.tree_util import tree_unflatten
        inputs = [dev.xp.empty_like(a) if isinstance(a, dev.ndarray) else None
                  for a in leaves]
        for buf, a in zip(inputs, leaves):
            if buf is not None:
                dev.xp.copyto(buf, a)
        args = tree_unflatten(tdef, [b if b is not None else a
                                     for b, a in zip(inputs, leaves)])
        _CAPTURING.append(self)
        try:
            replay, outputs = dev.capture(lambda: self.f(*args))
        finally:
            _CAPTURING.pop()
        return _Captured(replay, inputs, outputs)

    @staticmethod
    def _copied(dev, outputs):
        from astjax.tree_util import tree_map
        return tree_map(lambda v: v.copy() if isinstance(v, dev.ndarray) else v, outputs)


def replayed(f, index_first=False):
    """``f`` as a ``StepGraph`` when graph replay is enabled, else ``f`` itself."""
    if not enabled():
        return f
    return StepGraph(f, index_first)


class PrivateMemory:
    """A CuPy memory pool of one step's own, made current around its warm-up call and
    its capture: blocks freed inside the step return to this pool only, so the
    addresses a graph replays on are never handed to other arrays, and the capture
    reuses the warm-up's cached blocks (no ``cudaMalloc`` while capturing)."""

    def __init__(self, xp):
        self.xp = xp
        self.pool = xp.cuda.MemoryPool()
        self._using = []

    def __enter__(self):
        ctx = self.xp.cuda.using_allocator(self.pool.malloc)
        ctx.__enter__()
        self._using.append(ctx)
        return self

    def __exit__(self, *exc):
        self._using.pop().__exit__(*exc)


def _bind_blas(dev, stream):
    """Bind the device's cuBLAS handle to ``stream`` before its capture begins, and
    keep it for the capture's products (``CupyDevice.gemm``): CuPy's ``setStream``
    (which ``get_cublas_handle`` calls) refuses a capturing stream.  CuPy re-binds the
    handle to its current stream before each of its own cuBLAS calls afterwards."""
    try:
        from cupy_backends.cuda.libs import cublas
        handle = dev.xp.cuda.device.get_cublas_handle()
        cublas.setStream(handle, stream.ptr)
        dev.capture_blas = handle
    except Exception:       # noqa: BLE001  (no cuBLAS: a product in the capture fails it)
        dev.capture_blas = None


def cupy_capture(dev, fn):
    """``(replay, outputs)``: ``fn`` captured on a fresh stream of ``dev`` (CuPy), its
    results the arrays it returned during capture (written again by each replay,
    launched on the current stream: ordered after the copies in, before the copies
    out, with no host synchronization)."""
    xp = dev.xp
    stream = xp.cuda.Stream(non_blocking=True)
    _bind_blas(dev, stream)
    with stream:
        stream.begin_capture()
        try:
            outputs = fn()
        finally:
            graph = stream.end_capture()

    def replay():
        graph.launch()
    replay.held = (graph, stream, outputs)
    return replay, outputs
