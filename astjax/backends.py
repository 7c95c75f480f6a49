"""jit backends: what turns optimized core form into code to call.

``jit`` normalizes, specializes and optimizes the same way for every backend; the
backend says which passes it runs and how the result is loaded.  The NumPy backend
prints Python (fused groups as block functions, ``astjax/runtime_fusion.py``) and
loads it.  A compiled backend plugs in by registering a ``Backend`` whose ``load``
renders ``fn.helpers`` — the fusion plan, one elementwise group each — as kernels
and the rest as host code; ``available`` tells ``jit`` whether it can run here.
"""
from __future__ import annotations

import os
import sys
import types
from dataclasses import dataclass
from typing import Callable

from astjax.errors import ArgumentError


@dataclass(frozen=True)
class Backend:
    name: str
    aliases: tuple          # other names jit(..., backend=...) accepts
    passes: Callable        # () -> the passes to run, in order (astjax.passes.DEFAULT)
    load: Callable          # (fn, docstring, label, fastmath=False) -> Generated
    available: Callable     # () -> (bool, why not): jit may build code for it here
    runs_here: Callable | None = None   # () -> (bool, why not) where running needs more


_REGISTRY: dict = {}


def register(backend: Backend) -> None:
    for name in (backend.name,) + backend.aliases:
        _REGISTRY[name] = backend


# what jit runs with when nothing chooses: the first of these that works here
DEFAULT_ORDER = ("c", "numpy")
_noticed: set = set()


def get(name: str | None) -> Backend:
    """The backend called ``name``, or a clear error.  None: ``$ASTJAX_BACKEND``, else
    "cuda" when CuPy sees a GPU, else the best available (compiled C when a compiler
    works, else NumPy, saying why once on stderr).  ``"cpu"`` is the best available
    CPU backend, the same choice."""
    name = name or os.environ.get("ASTJAX_BACKEND") or None
    if name is None and _gpu_visible():
        name = "cuda"
    if name is None or name == "cpu":
        return _best()
    backend = _REGISTRY.get(name)
    if backend is None:
        usable = sorted(n for n, b in _REGISTRY.items() if b.available()[0])
        raise ArgumentError(f"jit: backend {name!r} is not available here; these are: "
                            f"{', '.join(usable)}, cpu")
    ok, why = backend.available()
    if not ok:
        raise ArgumentError(f"jit: backend {name!r} cannot run here: {why}")
    return backend


def _best() -> Backend:
    skipped = []
    for name in DEFAULT_ORDER:
        backend = _REGISTRY[name]
        ok, why = backend.available()
        if ok:
            if skipped and skipped[0] not in _noticed:
                _noticed.add(skipped[0])
                sys.stderr.write(f"astjax: jit runs with {name}, not {skipped[0][0]}: "
                                 f"{skipped[0][1]}\n")
            return backend
        skipped.append((name, why))
    raise ArgumentError("jit: no backend can run here")  # NumPy always can


def _numpy_passes():
    from astjax import passes
    return passes.DEFAULT


def _numpy_load(fn, doc, label, fastmath=False):
    # (fastmath: NumPy's own loops run the code; nothing to relax)
    from astjax.generation import load_functions
    return load_functions([(fn, doc)], fn.env, label, ["main"])


register(Backend("numpy", (), _numpy_passes, _numpy_load, lambda: (True, "")))


def _c_passes():
    from astjax.kernels import backend
    return backend.passes()


def _c_load(fn, doc, label, fastmath=False):
    from astjax.kernels import backend
    return backend.load(fn, doc, label, fastmath=fastmath)


def _c_available():
    from astjax.kernels import compile as cc
    return cc.available()


# compiled C kernels for the fused groups (astjax/kernels): the default where a C
# compiler works
register(Backend("c", (), _c_passes, _c_load, _c_available))


def _cuda_passes():
    from astjax.kernels import cuda_runtime
    return cuda_runtime.passes()


def _cuda_load(fn, doc, label, fastmath=False):
    from astjax.kernels import cuda_runtime
    return cuda_runtime.load(fn, doc, label, fastmath=fastmath)


def _cuda_available():
    from astjax.kernels import cuda_runtime
    return cuda_runtime.available()


# CUDA kernels for the fused groups, CuPy between them (astjax/kernels/cuda*.py); its
# code can be generated and shown anywhere, running it needs CuPy and a GPU
def _cuda_runs_here():
    from astjax.kernels import cuda_runtime
    if cuda_runtime.gpu_visible():
        return True, ""
    return False, (cuda_runtime.INSTALL + "; without one, jit(backend=\"cuda\") still "
                   "builds and shows its code (astjax.make_source)")


register(Backend("cuda", ("gpu",), _cuda_passes, _cuda_load, _cuda_available,
                 _cuda_runs_here))


def _gpu_visible() -> bool:
    """CuPy is installed and sees a GPU: jit's default is then "cuda"."""
    from astjax.kernels import cuda_runtime
    return cuda_runtime.gpu_visible()


def arg_kinds(params, args) -> dict:
    """Parameter -> (dtype, ndim, weak type) of the arguments code is built for (a
    compiled backend shows its kernels typed for them; no array is kept)."""
    import numpy as np
    out = {}
    for p, a in zip(params, args):
        if type(a) is np.ndarray or isinstance(a, np.generic):
            out[p] = (a.dtype, a.ndim, None)
        elif type(a) in (bool, int, float):
            t = type(a)
            out[p] = (np.dtype({bool: np.bool_, int: np.int64, float: np.float64}[t]), 0,
                      None if t is bool else t)
    return out


def backends() -> dict:
    """Each backend's name -> (runs here, why not); ``astjax.backends()``.  A backend
    whose code can be built and shown anywhere but needs a device to run (cuda) says
    so when the device is missing."""
    out = {}
    for b in {id(b): b for b in _REGISTRY.values()}.values():
        out[b.name] = (b.runs_here or b.available)()
    return out


class _Listing(types.ModuleType):
    """This module, callable: ``astjax.backends()`` lists the backends."""

    def __call__(self):
        return backends()


sys.modules[__name__].__class__ = _Listing
