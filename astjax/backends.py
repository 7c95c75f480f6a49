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
    load: Callable          # (fn, docstring, label) -> astjax.api.Generated
    available: Callable     # () -> (bool, why not)


_REGISTRY: dict = {}


def register(backend: Backend) -> None:
    for name in (backend.name,) + backend.aliases:
        _REGISTRY[name] = backend


def get(name: str | None) -> Backend:
    """The backend called ``name`` (None: ``$ASTJAX_BACKEND``, else NumPy), or a clear
    error."""
    name = name or os.environ.get("ASTJAX_BACKEND") or _automatic()
    backend = _REGISTRY.get(name)
    if backend is None:
        usable = sorted(n for n, b in _REGISTRY.items() if b.available()[0])
        raise ArgumentError(f"jit: backend {name!r} is not available here; these are: "
                            f"{', '.join(usable)}")
    ok, why = backend.available()
    if not ok:
        raise ArgumentError(f"jit: backend {name!r} cannot run here: {why}")
    return backend


def _numpy_passes():
    from astjax import passes
    return passes.DEFAULT


def _numpy_load(fn, doc, label):
    from astjax.api import load_functions
    return load_functions([(fn, doc)], fn.env, label, ["main"])


register(Backend("numpy", ("cpu",), _numpy_passes, _numpy_load, lambda: (True, "")))


def _c_passes():
    from astjax.kernels import backend
    return backend.passes()


def _c_load(fn, doc, label):
    from astjax.kernels import backend
    return backend.load(fn, doc, label)


def _c_available():
    from astjax.kernels import compile as cc
    return cc.available()


# compiled C kernels for the fused groups (astjax/kernels); opt-in until it covers the
# whole fusion plan
register(Backend("c", (), _c_passes, _c_load, _c_available))


def _cuda_passes():
    from astjax.kernels import cuda_runtime
    return cuda_runtime.passes()


def _cuda_load(fn, doc, label):
    from astjax.kernels import cuda_runtime
    return cuda_runtime.load(fn, doc, label)


def _cuda_available():
    from astjax.kernels import cuda_runtime
    return cuda_runtime.available()


# CUDA kernels for the fused groups, CuPy between them (astjax/kernels/cuda*.py); its
# code can be generated and shown anywhere, running it needs CuPy and a GPU
register(Backend("cuda", ("gpu",), _cuda_passes, _cuda_load, _cuda_available))


def _automatic() -> str:
    """The default: "cuda" when CuPy sees a GPU, else "numpy"."""
    from astjax.kernels import cuda_runtime
    return "cuda" if cuda_runtime.gpu_visible() else "numpy"


def backends() -> dict:
    """Each backend's name -> (available here, why not); ``astjax.backends()``."""
    return {b.name: b.available() for b in {id(b): b for b in _REGISTRY.values()}.values()}


class _Listing(types.ModuleType):
    """This module, callable: ``astjax.backends()`` lists the backends."""

    def __call__(self):
        return backends()


sys.modules[__name__].__class__ = _Listing
