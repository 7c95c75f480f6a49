"""NVRTC through ctypes: compile CUDA text to PTX without a GPU (CI's check).

NVRTC is a plain host library (the ``nvidia-cuda-nvrtc`` wheel ships it under
``site-packages/nvidia/*/lib``); it needs no driver and no device, so every kernel
the test corpora generate can be compiled on a machine without a GPU, and a kernel
that does not compile fails CI instead of failing on a user's GPU.  The runtime on a
GPU compiles through CuPy (which uses NVRTC the same way, with its on-disk cache).
"""
from __future__ import annotations

import ctypes
import functools
import glob
import os
import sys

# options the runtime compiles with too: no fused multiply-add (NumPy rounds a * b + c
# twice), IEEE division and square root (NVRTC's defaults, said explicitly)
OPTIONS = ("--fmad=false", "--prec-div=true", "--prec-sqrt=true", "-default-device")
# jit(f, fastmath=True): fused multiply-add and the approximate division (within 2 ulp);
# square roots stay IEEE and subnormals are kept (no --ftz, no --use_fast_math, whose
# approximate sin/exp would lose far more than the last bits)
FASTMATH_OPTIONS = ("--fmad=true", "--prec-div=false", "--prec-sqrt=true",
                    "-default-device")
# the first line of a kernel module's text compiled with FASTMATH_OPTIONS
FASTMATH_MARK = ("/* astjax kernel flags: jit(..., fastmath=True) -- --fmad=true "
                 "--prec-div=false (not bit-identical to NumPy) */\n")


def options_for(text: str) -> tuple:
    """The options ``text`` compiles with: the fast-math ones when it begins with the
    mark."""
    return FASTMATH_OPTIONS if text.startswith(FASTMATH_MARK) else OPTIONS


class NvrtcUnavailable(Exception):
    """No libnvrtc here (``pip install nvidia-cuda-nvrtc``)."""


class NvrtcError(Exception):
    """A kernel did not compile; the message is NVRTC's log."""


def _candidates():
    env = os.environ.get("ASTJAX_NVRTC")
    if env:
        yield env
    for base in sys.path:
        for pat in ("nvidia/*/lib/libnvrtc.so*", "nvidia/cuda_nvrtc/lib/libnvrtc.so*"):
            for path in sorted(glob.glob(os.path.join(base, pat)), reverse=True):
                if "builtins" not in os.path.basename(path):
                    yield path
    yield "libnvrtc.so"


@functools.lru_cache(maxsize=None)
def library():
    """The loaded libnvrtc (the newest found), or NvrtcUnavailable."""
    why = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            why.append(str(e))
            continue
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        return lib
    raise NvrtcUnavailable("libnvrtc not found (pip install nvidia-cuda-nvrtc): "
                           + "; ".join(why[-2:]))


def version() -> tuple:
    lib = library()
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return major.value, minor.value


def available():
    try:
        library()
    except NvrtcUnavailable as e:
        return False, str(e)
    return True, ""


def _check(lib, status, what):
    if status != 0:
        raise NvrtcError(f"{what}: {lib.nvrtcGetErrorString(status).decode()}")


def compile_ptx(text: str, name: str = "kernel.cu", arch: str = "compute_80",
                options=None) -> str:
    """PTX of ``text`` (``options``: by default those the runtime uses for it,
    ``options_for``); NvrtcError with NVRTC's log when it does not compile."""
    options = options_for(text) if options is None else options
    lib = library()
    prog = ctypes.c_void_p()
    _check(lib, lib.nvrtcCreateProgram(ctypes.byref(prog), text.encode(), name.encode(),
                                       0, None, None), "nvrtcCreateProgram")
    try:
        opts = [f"--gpu-architecture={arch}".encode(), *(o.encode() for o in options)]
        argv = (ctypes.c_char_p * len(opts))(*opts)
        status = lib.nvrtcCompileProgram(prog, len(opts), argv)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, log)
        if status != 0:
            raise NvrtcError(log.value.decode(errors="replace").strip() or
                             lib.nvrtcGetErrorString(status).decode())
        _check(lib, lib.nvrtcGetPTXSize(prog, ctypes.byref(size)), "nvrtcGetPTXSize")
        ptx = ctypes.create_string_buffer(size.value)
        _check(lib, lib.nvrtcGetPTX(prog, ptx), "nvrtcGetPTX")
        return ptx.value.decode()
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
