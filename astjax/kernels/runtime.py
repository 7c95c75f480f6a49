"""Calling a compiled kernel from the host code: ``poly = poly_kernel(x)``.

A ``KernelCall`` stands where the NumPy backend calls ``run_fused(block, ...)``.  Per
combination of argument kinds (dtype, one element or many, Python number or not) it
specializes the kernel (``ir.specialize``), renders and builds its C once, and then
per call only computes the broadcast shape, allocates the results (``np.empty`` of the
dtypes NumPy would give) and calls the library, which runs without the GIL.

Whatever the kernel cannot take exactly as NumPy would (subclasses, lists, float16,
0-d results, which NumPy returns as scalars, Python ints that do not fit the loop
type, a NumPy error state that raises or calls a handler) runs the group's block
function instead: the same code the NumPy backend runs.  Kernels give the values
NumPy gives (inf, NaN, 0 for an integer divided by 0) but not its RuntimeWarnings.
"""
from __future__ import annotations

import ctypes
import math

import numpy as np

from astjax.kernels import c as c_render, compile as cc, ir, layout
from astjax.kernels.ir import Unsupported
from astjax.runtime_fusion import num_threads

# elements times weight (passes/fusion.py) below which one thread does the work
MIN_PARALLEL_WORK = 1 << 16

_ndarray = np.ndarray
_ARGTYPES = (ctypes.c_int64, ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p,
             ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p)


_INDEXED_ARGTYPES = (ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p)


class _Spec:
    __slots__ = ("func", "typed", "out_dtypes", "text", "checks", "shapes", "ptrs")

    def __init__(self, func, typed, text):
        self.func = func
        self.typed = typed
        self.out_dtypes = typed.out_dtypes
        self.text = text
        self.checks = [(i, np.iinfo(dt)) for i, dt in typed.int_checks]
        self.shapes: dict = {}       # output shape -> its int64 array, for the call
        self.ptrs = ctypes.c_void_p * (len(typed.inputs) + len(typed.outputs))


def _origin(typed, text):
    """c line -> the user's line that statement came from (for compile errors)."""
    lines = text.splitlines()

    def origin(n):
        for line in reversed(lines[:n]):
            s = line.strip()
            if s.startswith("/* ") and ":" in s and "astjax kernel" not in s:
                return s[3:-3].strip()
        return None
    return origin


def c_text(typed, openmp=True) -> str:
    return c_render.render(typed, _cname(typed.kernel), openmp)


def _cname(kernel):
    return "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in kernel.name)


class KernelCall:
    """The compiled form of one fused group (``block``: its NumPy fallback)."""

    def __init__(self, kernel: ir.Kernel, block=None):
        self.kernel = kernel
        self.block = block
        self.specs: dict = {}
        self.__name__ = kernel.name
        self.indexed = not ir.is_elementwise(kernel)
        self.typed_indexed: dict = {}    # kinds -> TypedIndexed or None
        self.layouts: dict = {}          # (kinds, shapes, strides, ints) -> Layout
        everything = tuple(range(len(kernel.inputs)))
        # results depending on some inputs only: their shape may be smaller than the loop
        self.partial = [] if self.indexed else [
            d for d in ir.output_deps(kernel) if d != everything]

    def __repr__(self):
        return f"<astjax C kernel {self.kernel.name}>"

    def spec(self, kinds):
        got = self.specs.get(kinds, False)
        if got is False:
            try:
                typed = ir.specialize(self.kernel, kinds)
                _, _, omp = cc.compiler()
                text = c_text(typed, bool(omp))
                func = cc.build(text, _cname(self.kernel), _origin(typed, text))
            except Unsupported:
                got = None
            else:
                func.argtypes = _ARGTYPES
                func.restype = ctypes.c_int
                got = _Spec(func, typed, text)
            self.specs[kinds] = got
        return got

    def __call__(self, *args):
        if self.indexed:
            return self._call_indexed(args)
        kinds = []
        shapes = []
        for a in args:
            t = type(a)
            if t is _ndarray:
                dt = a.dtype
                if dt.char not in ir.SUPPORTED or not dt.isnative:
                    return self.block(*args)
                kinds.append((dt, a.size == 1, None))
                shapes.append(a.shape)
            else:
                try:
                    kinds.append(ir.input_kind(a))
                except Unsupported:
                    return self.block(*args)
        spec = self.spec(tuple(kinds))
        if spec is None or not shapes:
            return self.block(*args)
        modes = np.geterr().values()
        if "raise" in modes or "call" in modes:
            return self.block(*args)     # np.errstate(divide="raise"): NumPy raises
        shape = shapes[0]
        if len(shapes) > 1 and any(sh != shape for sh in shapes):
            try:
                shape = np.broadcast_shapes(*shapes)
            except ValueError:
                return self.block(*args)     # NumPy raises its error from the user's line
        if not shape:
            return self.block(*args)     # NumPy gives scalars here, not 0-d arrays
        for deps in self.partial:        # a result smaller than the loop: NumPy runs it
            if np.broadcast_shapes(*(np.shape(args[i]) for i in deps)) != shape:
                return self.block(*args)
        for i, info in spec.checks:
            if not info.min <= args[i] <= info.max:
                return self.block(*args)  # NumPy raises OverflowError
        n = math.prod(shape)
        outs = [np.empty(shape, dt) for dt in spec.out_dtypes]
        if n:
            try:
                self._run(spec, args, kinds, shape, n, outs)
            except Unsupported:
                return self.block(*args)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _run(self, spec, args, kinds, shape, n, outs):
        keep = []
        ptrs = []
        contiguous = True
        for a, (dt, scalar, weak) in zip(args, kinds):
            if type(a) is not _ndarray:
                a = np.array(a, dtype=dt)
                keep.append(a)
            elif not scalar and (a.shape != shape or not a.flags.c_contiguous):
                contiguous = False
            ptrs.append(a.__array_interface__["data"][0])
        ptrs += [o.__array_interface__["data"][0] for o in outs]
        ndim = len(shape)
        shape_arr = spec.shapes.get(shape)
        if shape_arr is None:
            if len(spec.shapes) > 64:
                spec.shapes.clear()
            shape_arr = spec.shapes[shape] = np.array(shape, dtype=np.int64)
        if contiguous:
            strides = shape_arr
        else:
            strides = np.zeros((len(args), ndim), dtype=np.int64)
            for k, (a, (dt, scalar, _)) in enumerate(zip(args, kinds)):
                if scalar:
                    continue
                pad = ndim - a.ndim
                for d in range(a.ndim):
                    if a.shape[d] != 1:
                        s, r = divmod(a.strides[d], a.itemsize)
                        if r:
                            raise Unsupported("strides not a multiple of the item size")
                        strides[k, pad + d] = s
        threads = num_threads() if n * self.kernel.cost >= MIN_PARALLEL_WORK else 1
        spec.func(n, ndim, shape_arr.__array_interface__["data"][0],
                  strides.__array_interface__["data"][0], contiguous, threads,
                  spec.ptrs(*ptrs))

    # -- indexed kernels (slices, pads, transposes, casts, reductions) ------------

    def _typed(self, kinds):
        got = self.typed_indexed.get(kinds, False)
        if got is False:
            try:
                got = ir.specialize_indexed(self.kernel, kinds)
            except Unsupported:
                got = None
            self.typed_indexed[kinds] = got
        return got

    def _compiled(self, kinds, typed, baked):
        key = (kinds, baked)
        got = self.specs.get(key, False)
        if got is False:
            try:
                _, _, omp = cc.compiler()
                text = c_render.render_indexed(typed, _cname(self.kernel), bool(omp), baked)
                func = cc.build(text, _cname(self.kernel), _origin(typed, text))
            except Unsupported:
                got = None
            else:
                func.argtypes = _INDEXED_ARGTYPES
                func.restype = ctypes.c_int
                got = (func, text)
            self.specs[key] = got
        return got

    def _call_indexed(self, args):
        kinds, key = [], []
        for a in args:
            t = type(a)
            if t is _ndarray:
                dt = a.dtype
                if dt.char not in ir.SUPPORTED or not dt.isnative:
                    return self.block(*args)
                kinds.append((dt, a.ndim, None))
                key.append((a.shape, a.strides))
            else:
                try:
                    kinds.append(ir.indexed_kind(a))
                except Unsupported:
                    return self.block(*args)
                key.append(a if isinstance(a, (int, np.integer)) else None)
        kinds = tuple(kinds)
        typed = self._typed(kinds)
        if typed is None:
            return self.block(*args)
        modes = np.geterr().values()
        if "raise" in modes or "call" in modes:
            return self.block(*args)     # np.errstate(divide="raise"): NumPy raises
        for i, dt in typed.int_checks:
            info = np.iinfo(dt)
            if not info.min <= args[i] <= info.max:
                return self.block(*args)  # NumPy raises OverflowError
        lkey = (kinds, tuple(key))
        lay = self.layouts.get(lkey, False)
        if lay is False:
            try:
                lay = layout.layout(typed, args)
            except Unsupported:
                lay = None
            if len(self.layouts) > 256:
                self.layouts.clear()
            self.layouts[lkey] = lay
        if lay is None:
            return self.block(*args)
        outs = [np.empty(sh, dt) for sh, dt in zip(lay.out_shapes, typed.out_dtypes)]
        n = math.prod(lay.domain)
        if n:
            got = self._compiled(kinds, typed, lay.baked)
            if got is None:
                return self.block(*args)
            keep, ptrs = [], []
            for a, inp in zip(args, typed.inputs):
                if type(a) is not _ndarray:
                    a = np.array(a, dtype=inp.dtype)
                    keep.append(a)
                ptrs.append(a.__array_interface__["data"][0])
            ptrs += [o.__array_interface__["data"][0] for o in outs]
            threads = num_threads() if n * self.kernel.cost >= MIN_PARALLEL_WORK else 1
            arr = (ctypes.c_void_p * len(ptrs))(*ptrs)
            got[0](lay.params.__array_interface__["data"][0], threads, arr)
        if typed.reduce is not None and not lay.out_shapes[0]:
            return outs[0][()]          # NumPy gives a scalar for a full reduction
        return outs[0] if len(outs) == 1 else tuple(outs)
