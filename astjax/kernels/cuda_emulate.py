"""Running CUDA kernel text on the CPU: the CUDA backend's test device.

CI has no GPU, so the CUDA text astjax generates is compiled as C++ with the host
compiler after ``cuda_shim.h`` (``__global__``, ``blockIdx``/``threadIdx``, a launch
as a loop over the grid, ``__syncthreads`` as a real barrier between a block's
threads, atomics) and launched with the grid and block sizes the runtime picks.
``EmulatedDevice`` has the interface of ``cuda_runtime.CupyDevice`` with NumPy
arrays as device memory, so the host runtime (argument packing, strides, grid-stride
loops, 32/64-bit variants, fallbacks) runs exactly as on a GPU, and its results are
compared with the NumPy backend.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading

import numpy as np

from astjax.kernels.compile import CompilerUnavailable, KernelCompileError

SHIM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cuda_shim.h")
FLAGS = ("-std=c++17", "-O1", "-shared", "-fPIC", "-pthread", "-ffp-contract=off",
         "-fno-math-errno", "-fno-strict-aliasing", "-w")
_CTYPES = {"npy_bool": ctypes.c_uint8, "int8_t": ctypes.c_int8, "int16_t": ctypes.c_int16,
           "int32_t": ctypes.c_int32, "int64_t": ctypes.c_int64, "uint8_t": ctypes.c_uint8,
           "uint16_t": ctypes.c_uint16, "uint32_t": ctypes.c_uint32,
           "uint64_t": ctypes.c_uint64, "float": ctypes.c_float, "double": ctypes.c_double}


def compiler():
    """The C++ compiler (``$CXX``, else g++ or clang++), or CompilerUnavailable."""
    for name in ([os.environ["CXX"]] if os.environ.get("CXX") else ["g++", "clang++"]):
        path = shutil.which(name)
        if path:
            return path
    raise CompilerUnavailable("no C++ compiler (g++ or clang++) to emulate CUDA kernels")


def available():
    try:
        compiler()
    except CompilerUnavailable as e:
        return False, str(e)
    return True, ""


def _launcher(entry, barriers: bool) -> str:
    """``astjax_launch_<kernel>(grid, block, args)``: CUDA's kernelParams convention
    (``args[k]`` points at parameter k's value)."""
    unpack = []
    for k, (ctype_, _) in enumerate(entry.params):
        t = ctype_.replace("__restrict__", "").strip()
        unpack.append(f"*({t} *)args[{k}]")
    return (f'extern "C" int astjax_launch_{entry.name}(unsigned grid, unsigned block, '
            "void **args) {\n"
            f"    return astjax_shim_launch(grid, block, {'true' if barriers else 'false'}, "
            f"[&] {{ {entry.name}({', '.join(unpack)}); }});\n}}\n")


_PCH: dict = {}
_pch_lock = threading.Lock()


def _shim() -> str:
    """The shim header to include: a copy beside its precompiled form (parsing the
    C++ headers it includes is most of a kernel's compile time), else the original."""
    with _pch_lock:
        got = _PCH.get(compiler())
        if got is None:
            got = SHIM
            d = tempfile.mkdtemp(prefix="astjax-cuda-pch-")
            copy = os.path.join(d, "cuda_shim.h")
            shutil.copyfile(SHIM, copy)
            flags = [f for f in FLAGS if f != "-shared"]
            try:
                r = subprocess.run([compiler(), *flags, "-x", "c++-header", copy, "-o",
                                    copy + ".gch"], capture_output=True, timeout=300)
                if r.returncode == 0:
                    got = copy
            except (OSError, subprocess.SubprocessError):
                pass
            _PCH[compiler()] = got
        return got


class _Function:
    """One entry point: called as a CuPy RawKernel is, ``f(grid, block, args)``."""

    def __init__(self, lib, entry, record):
        self.entry = entry
        self.record = record
        self.func = getattr(lib, f"astjax_launch_{entry.name}")
        self.func.argtypes = (ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p)
        self.func.restype = ctypes.c_int
        self.launches = 0

    def __call__(self, grid, block, args):
        grid = grid[0] if isinstance(grid, tuple) else grid
        block = block[0] if isinstance(block, tuple) else block
        keep = []
        for (ctype_, name), a in zip(self.entry.params, args):
            if "*" in ctype_:
                if isinstance(a, np.ndarray):
                    keep.append(ctypes.c_void_p(a.ctypes.data))
                elif hasattr(getattr(a, "data", None), "ptr"):   # a CuPy-like array
                    keep.append(ctypes.c_void_p(a.data.ptr))
                else:
                    raise TypeError(f"{self.entry.name}: {name} must be an array")
            else:
                base = ctype_.replace("const", "").strip()
                keep.append(_CTYPES[base](a.item() if hasattr(a, "item") else a))
        argv = (ctypes.c_void_p * len(keep))(*[ctypes.addressof(v) for v in keep])
        self.launches += 1
        self.record.append((self.entry.name, int(grid), int(block)))
        if self.func(int(grid), int(block), argv) != 0:
            raise RuntimeError(f"{self.entry.name}: invalid launch ({grid}, {block})")


class EmulatedDevice:
    """A CPU stand-in for a GPU: NumPy arrays are its memory, g++ its compiler."""

    name = "emulated"
    xp = np
    ndarray = np.ndarray

    def __init__(self, max_blocks=4, block=64):
        self.max_blocks = max_blocks      # few blocks: every grid-stride loop loops
        self.block = block
        self._lock = threading.Lock()
        self._libs: dict = {}
        self._dir = tempfile.mkdtemp(prefix="astjax-cuda-emu-")
        self.compiled = 0
        self.launched: list = []          # (entry point, grid, block) of every launch
        self.modules: list = []           # every Module built (tests compile them again)

    def function(self, module, variant):
        entry = module.kernels[variant]
        lib = self._library(module)
        return _Function(lib, entry, self.launched)

    def _library(self, module):
        key = hashlib.sha256(module.text.encode()).hexdigest()[:24]
        with self._lock:
            lib = self._libs.get(key)
            if lib is None:
                lib = self._libs[key] = self._build(module, key)
                self.modules.append(module)
            return lib

    def _build(self, module, key):
        barriers = "__syncthreads" in module.text
        text = (f'#include "{_shim()}"\n' + module.text + "\n" +
                "".join(_launcher(e, barriers) for e in module.kernels.values()))
        src = os.path.join(self._dir, key + ".cu")
        lib = os.path.join(self._dir, key + ".so")
        with open(src, "w") as f:
            f.write(text)
        r = subprocess.run([compiler(), *FLAGS, "-x", "c++", src, "-o", lib],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise KernelCompileError("a CUDA kernel failed to compile as C++ (emulated):\n"
                                     + r.stderr.strip()[:3000])
        self.compiled += 1
        return ctypes.CDLL(lib)

    # memory
    def asarray(self, a):
        return np.asarray(a)

    def empty(self, shape, dtype):
        return np.empty(shape, dtype)

    def to_host(self, a):
        return np.asarray(a)

    def index_array(self, values: tuple):
        return np.array(values, dtype=np.int64)

    def data_ptr(self, a):
        return a.ctypes.data
