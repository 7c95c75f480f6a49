"""Keep BLAS from oversubscribing the cores while shards run on threads.

Each local shard is a thread; a BLAS call in each would start BLAS's own thread pool
per shard (N shards x cores threads), and OpenBLAS's spinning threads then slow a
step down by an order of magnitude.  While shards run, BLAS gets cores // N threads.
Works with the OpenBLAS NumPy loads (found through /proc/self/maps); elsewhere a no-op.
"""
from __future__ import annotations

import contextlib
import ctypes
import os

_FOUND: dict = {}


def _openblas():
    if "lib" in _FOUND:
        return _FOUND["lib"]
    lib = None
    try:
        with open("/proc/self/maps") as fh:
            paths = {line.split()[-1] for line in fh if "openblas" in line.lower()
                     and line.split()[-1].startswith("/")}
        for path in sorted(paths):
            cdll = ctypes.CDLL(path)
            for prefix in ("scipy_openblas", "openblas"):
                for suffix in ("64_", ""):
                    get = getattr(cdll, f"{prefix}_get_num_threads{suffix}", None)
                    put = getattr(cdll, f"{prefix}_set_num_threads{suffix}", None)
                    if get is not None and put is not None:
                        get.restype = ctypes.c_int
                        put.argtypes = [ctypes.c_int]
                        lib = (get, put)
                        break
                if lib:
                    break
            if lib:
                break
    except (OSError, AttributeError):
        lib = None
    _FOUND["lib"] = lib
    return lib


@contextlib.contextmanager
def limited_for(shards: int):
    """BLAS threads limited to cores // shards for the duration."""
    lib = _openblas() if shards > 1 else None
    if lib is None:
        yield
        return
    get, put = lib
    before = get()
    put(max(1, (os.cpu_count() or 1) // shards))
    try:
        yield
    finally:
        put(before)


def limit(threads: int):
    """Set BLAS's thread count for good (MPI: each process on its share of the cores)."""
    lib = _openblas()
    if lib is not None:
        lib[1](max(1, int(threads)))
