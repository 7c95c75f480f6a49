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

Per-call cost.  A call whose arguments have the dtypes, shapes and strides of an
earlier call reuses that call's *plan* (the compiled function, the layout's ``P``
array, the result shapes), and passes the argument tuple and the result list to a
small C entry point (``<kernel>_objs``) as Python objects: it reads the array
objects from their item arrays and each array's data pointer itself
(``ITEM_OFFSETS``, ``DATA_OFFSET``, probed once at import), which saves NumPy's
``__array_interface__`` round trip, a few microseconds per array, and an array of
addresses built per call.

Result buffers of kernels called in a loop body (``lax.scan``, ``fori_loop``,
``while_loop``, Python loops) are taken from a small pool per result (and those of
the other kernels from a pool of one, reused by the next call): a pooled array
is handed out again only when the pool holds its only reference
(``sys.getrefcount``), that is when no value of the program, no view of it and no
container can read it any more: a carry still live from the step before keeps its
buffer, and the next one is used (double buffering falls out of the count).

A call below the parallel threshold (``MIN_PARALLEL_WORK``) runs a build of its kernel
without OpenMP's parallel loops (``c.render(..., threads=False)``): entering a parallel
region costs ~0.8 us even on one thread, which was most of a small compiled loop's
step (a scan over a 4x4 state: 0.58 -> 0.18 us per step).
"""
from __future__ import annotations

import ctypes
import math
import sys
import weakref

import numpy as np

from astjax.kernels import flush, c as c_render, compile as cc, ir, layout
from astjax.kernels.ir import Unsupported
from astjax.runtime_fusion import num_threads

# elements times weight (passes/fusion.py) below which one thread does the work
MIN_PARALLEL_WORK = 1 << 16

_ndarray = np.ndarray
_ARGTYPES = (ctypes.c_int64, ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p,
             ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p)


_INDEXED_ARGTYPES = (ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p)

# results kept per kernel result for reuse in loops (past, present, and one free)
POOL_DEPTH = 4
# pooled buffers are at most this many bytes (larger ones are allocated per call)
POOL_MAX_BYTES = 1 << 28
# a kernel called once a call keeps one buffer a result for the next call, this large
# at most: a fresh buffer costs its page faults each call (~10% of a 300x300 FWI
# gradient: 2,300 faults), a kept one is memory held between calls
CALL_POOL_MAX_BYTES = 1 << 26
_getrefcount = getattr(sys, "getrefcount", None)
_getweakrefcount = weakref.getweakrefcount


def _probe_data_offset():
    """Byte offset of an ndarray object's data pointer (``PyArrayObject.data``), when
    the running CPython and NumPy agree on it for every probe; None otherwise (then
    pointers come from ``__array_interface__``)."""
    if sys.implementation.name != "cpython" or _getrefcount is None or \
            not getattr(sys, "_is_gil_enabled", lambda: True)():
        return None
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    probes = [base, base[1:, 2:], base.T, np.empty(0, np.int8), np.zeros((), bool)]
    off = ctypes.sizeof(ctypes.c_ssize_t) + ctypes.sizeof(ctypes.c_void_p)
    for a in probes:
        if ctypes.c_void_p.from_address(id(a) + off).value != \
                a.__array_interface__["data"][0]:
            return None
    return off


def _probe_item_offsets():
    """(byte offset of a tuple's item array, of a list's item-array pointer): where a
    C entry point finds the array objects of the call's argument tuple (or list) and
    result list, when the running CPython agrees for every probe; None otherwise."""
    word = ctypes.sizeof(ctypes.c_void_p)
    items = (object(), object(), object())
    t, lst = tuple(items), list(items)
    tuple_at = 2 * word + ctypes.sizeof(ctypes.c_ssize_t)        # after the var header
    list_at = tuple_at
    for k, x in enumerate(items):
        if ctypes.c_void_p.from_address(id(t) + tuple_at + k * word).value != id(x):
            return None
        array_at = ctypes.c_void_p.from_address(id(lst) + list_at).value
        if not array_at or ctypes.c_void_p.from_address(array_at + k * word).value != id(x):
            return None
    return tuple_at, list_at


DATA_OFFSET = _probe_data_offset()
ITEM_OFFSETS = _probe_item_offsets() if DATA_OFFSET is not None else None
if ITEM_OFFSETS is None:
    DATA_OFFSET = None          # (plans call kernels through argument sequences)


def _objs_wrapper(cname, lead, lead_args, nin, nout):
    """C: ``cname_objs(<lead>, args, args_is_list, outs)`` -> ``cname(<lead>, ptrs)``:
    the argument tuple (or list) and the result list as Python objects, their array
    objects read from the sequences' item arrays (``ITEM_OFFSETS``) and each data
    pointer at ``DATA_OFFSET`` -- no array of addresses is built per call."""
    tuple_at, list_at = ITEM_OFFSETS
    reads = [f"*(void **)((char *)a[{j}] + {DATA_OFFSET})" for j in range(nin)]
    reads += [f"*(void **)((char *)o[{j}] + {DATA_OFFSET})" for j in range(nout)]
    return (f"\n/* the same kernel called with the argument tuple (or list) and the "
            f"result list: array objects from their items, data pointers at byte "
            f"{DATA_OFFSET} */\n"
            f"int {cname}_objs({lead}, const char *args, int32_t args_list, "
            f"const char *outs) {{\n"
            f"    void *const *a = args_list ? *(void *const **)(args + {list_at}) "
            f": (void *const *)(args + {tuple_at});\n"
            f"    void *const *o = *(void *const **)(outs + {list_at});\n"
            f"    void *ptrs[{max(nin + nout, 1)}] = {{{', '.join(reads)}}};\n"
            f"    (void)a; (void)o;\n"
            f"    return {cname}({lead_args}, ptrs);\n}}\n")


_LEAD = "int64_t n, int32_t ndim, const int64_t *shape, const int64_t *st, " \
        "int32_t contiguous, int32_t nthreads"
_LEAD_ARGS = "n, ndim, shape, st, contiguous, nthreads"
_LEAD_INDEXED = "const int64_t *P, int32_t nthreads"
_LEAD_INDEXED_ARGS = "P, nthreads"


try:        # NumPy's error state (np.errstate): an immutable object per setting
    from numpy._core._ufunc_config import _extobj_contextvar as _EXTOBJ
except ImportError:                  # pragma: no cover (other NumPy versions)
    _EXTOBJ = None
_ERRSTATE_SEEN = (None, True)        # (the last error state asked about, NumPy raises?)


def numpy_raises() -> bool:
    """Does NumPy's error state raise or call a handler (``np.errstate(divide=
    "raise")``)?  Then NumPy runs the group: kernels do not signal.  The answer for
    the current state object is kept (``np.geterr`` builds a dict, ~1 us)."""
    global _ERRSTATE_SEEN
    obj = _EXTOBJ.get() if _EXTOBJ is not None else None
    seen = _ERRSTATE_SEEN
    if obj is not None and seen[0] is obj:
        return seen[1]
    modes = np.geterr().values()
    raises = "raise" in modes or "call" in modes
    if obj is not None:
        _ERRSTATE_SEEN = (obj, raises)
    return raises


def _scalar_key(a):
    """What of a non-array argument its plan depends on: the type of a float (its
    value goes to the kernel per call), the value of an integer or bool (a slice
    bound, a range check); TypeError for anything unhashable."""
    t = type(a)
    if t is float:
        return float
    if isinstance(a, np.generic) and a.dtype.kind in "fc":
        return a.dtype
    hash(a)
    return (t, a)


def _any_int_key(args, key):
    """``key`` with the value of each Python int left out (``KernelCall.int_plans``)."""
    return tuple([int if type(a) is int else k for a, k in zip(args, key)])


class _Spec:
    __slots__ = ("func", "typed", "out_dtypes", "text", "checks", "shapes", "ptrs", "objs")

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


def c_text(typed, openmp=True, threads=True) -> str:
    return c_render.render(typed, _cname(typed.kernel), openmp, threads)


def _cname(kernel):
    return "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in kernel.name)


def slow_on_arrays(typed, slow) -> bool:
    """Does a statement of ``typed`` call a function of ``slow`` on an array?  (On
    numbers only, ``np.cos(j * dt)`` of a step, it runs once whatever the size.)"""
    if isinstance(typed, ir.TypedIndexed):
        return any(isinstance(op, ir.TypedOp) and op.ufunc in slow and any(
            a[0] != "const" and typed.values[a[0]][1] > 0 for a in op.args)
            for op in typed.ops)
    arrays = {f"in{j}" for j, inp in enumerate(typed.inputs) if not inp.scalar}
    for op in typed.ops:
        if any(a[0] in arrays for a in op.args):
            if op.ufunc in slow:
                return True
            arrays.add(op.target)
    return False


def _as_numbers(outs, numbers):
    """Results of numbers only (``numbers``: (result index, float or None)) as the
    block gives them: a Python float from Python's arithmetic, else a NumPy scalar."""
    for r, weak in numbers:
        outs[r] = float(outs[r]) if weak is float else outs[r][()]


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
        # argument key (dtypes, shapes, strides, ints) -> plan (see _run_plan)
        self.plans: dict | None = {} if DATA_OFFSET is not None else None
        # the same key with each Python int that only enters the arithmetic as
        # ``int`` (a step index: ``x * i``) -> (plan, that int's range checks): one
        # plan for every value (``_keep_plan``)
        self.int_plans: dict = {}
        self.pools: list | None = None   # per result: buffers reused (``use_pool``)
        # (argument index, dtype) -> (the last non-array argument there, its 0-d array)
        self.boxed: dict = {}
        everything = tuple(range(len(kernel.inputs)))
        # results depending on some inputs only: their shape may be smaller than the loop
        self.partial = [] if self.indexed else [
            (r, d) for r, d in enumerate(ir.output_deps(kernel)) if d != everything]
        # past this many elements NumPy's loops run the group (it calls a function
        # they run faster, one of ``numpy_faster``, on an array:
        # ``backend.LOOP_NUMPY_ABOVE``); None: the kernel always
        self.numpy_above: int | None = None
        self.numpy_faster: frozenset = frozenset()
        self.slow: dict = {}             # kinds -> slow_on_arrays of their typing

    def __repr__(self):
        return f"<astjax C kernel {self.kernel.name}>"

    pool_depth = POOL_DEPTH
    pool_max_bytes = POOL_MAX_BYTES

    def use_pool(self, depth=POOL_DEPTH, max_bytes=POOL_MAX_BYTES):
        """Reuse result buffers across calls: ``depth`` a result, each at most
        ``max_bytes`` (a loop body's kernel: the defaults; a kernel called once a
        call: one, kept for the next call)."""
        if DATA_OFFSET is None:          # (CPython with a GIL only: reference counts)
            return
        if self.pools is None:
            self.pools = [[] for _ in self.kernel.outputs]
            self.pool_depth, self.pool_max_bytes = depth, max_bytes
        else:                            # (called in a loop and outside it too)
            self.pool_depth = max(self.pool_depth, depth)
            self.pool_max_bytes = max(self.pool_max_bytes, max_bytes)

    def _flagged(self, text):
        """``text`` as it is built: marked for the fast-math flags when chosen, and then
        flushing subnormals to zero while it runs (``flush.py``)."""
        if not self.kernel.fastmath:
            return text
        return cc.FASTMATH_MARK + flush.with_flushing(text)

    def _build(self, text, typed, lead, lead_args, argtypes):
        """(function, function taking array objects or None) of ``text``."""
        name = _cname(self.kernel)
        if DATA_OFFSET is not None:
            text = text + _objs_wrapper(name, lead, lead_args, len(typed.inputs),
                                        len(typed.outputs))
        origin = _origin(typed, text)
        func = cc.build(text, name, origin)
        func.argtypes = argtypes
        func.restype = ctypes.c_int
        objs = None
        if DATA_OFFSET is not None:
            objs = cc.build(text, name + "_objs", origin)
            objs.argtypes = argtypes[:-1] + (ctypes.c_void_p, ctypes.c_int32,
                                             ctypes.c_void_p)
            objs.restype = ctypes.c_int
        return func, objs

    def spec(self, kinds, threads=True):
        """The build for ``kinds``; ``threads`` False: the one for calls on one thread
        (no OpenMP team started per call: ``c.render``)."""
        key = kinds if threads else (kinds, "one thread")
        got = self.specs.get(key, False)
        if got is False:
            try:
                typed = ir.specialize(self.kernel, kinds)
                _, _, omp = cc.compiler()
                text = self._flagged(c_text(typed, bool(omp), threads))
                func, objs = self._build(text, typed, _LEAD, _LEAD_ARGS, _ARGTYPES)
            except Unsupported:
                got = None
            else:
                got = _Spec(func, typed, text)
                got.objs = objs
            self.specs[key] = got
        return got

    def _key(self, args):
        """The plan key of ``args``, or None (an argument no plan is made for)."""
        try:
            return tuple([(a.dtype, a.shape, a.strides) if type(a) is _ndarray
                          else float if type(a) is float else _scalar_key(a)
                          for a in args])
        except TypeError:
            return None

    def plan_of(self, args):
        """The plan a call with ``args`` runs (made by an earlier call), or None."""
        if self.plans is None:
            return None
        key = self._key(args)
        if key is None:
            return None
        plan = self.plans.get(key)
        if plan is None and self.int_plans:
            plan = self._int_plan(args, key)
        return plan

    def _int_checks(self, args, j):
        """The range checks of Python int input ``j`` when its value does not shape
        the plan made for ``args`` (it is not a slice bound or index: those shape it,
        ``layout.py``): (input, dtype) pairs from ``int_checks``, the dtypes NumPy
        casts it to (a value outside raises in NumPy); None when it shapes it."""
        try:
            if self.indexed:
                typed = self._typed(tuple(
                    (a.dtype, a.ndim, None) if type(a) is _ndarray else ir.indexed_kind(a)
                    for a in args))
                if typed is None or any(("arg", j) in it[1:]
                                        for items in typed.slices.values()
                                        for it in items):
                    return None
                checks = typed.int_checks
            else:
                checks = ir.specialize(self.kernel, tuple(
                    (a.dtype, a.size == 1, None) if type(a) is _ndarray
                    else ir.input_kind(a) for a in args)).int_checks
        except Unsupported:
            return None
        return [(i, np.iinfo(dt)) for i, dt in checks if i == j]

    def takes_any_int(self, args, j, lo, hi) -> bool:
        """Whether the plan made for ``args`` serves every Python int in [lo, hi] as
        input ``j`` (a compiled loop's step index, passed per step)."""
        if type(args[j]) is not int or not (lo <= hi and ir.fits_int64(lo, hi)):
            return False              # (the C counter is an int64)
        checks = self._int_checks(args, j)
        return checks is not None and all(info.min <= lo <= hi <= info.max
                                          for _, info in checks)

    def __call__(self, *args):
        if self.numpy_above == 0:
            return self.block(*args)
        plans = self.plans
        key = None
        if plans is not None:
            try:            # (``_key``, inline: every call of a loop body comes here)
                key = tuple([(a.dtype, a.shape, a.strides) if type(a) is _ndarray
                             else float if type(a) is float else _scalar_key(a)
                             for a in args])
            except TypeError:
                pass
            else:
                plan = plans.get(key)
                if plan is None and self.int_plans:
                    plan = self._int_plan(args, key)
                if plan is not None and not numpy_raises():
                    return self._run_plan(plan, args)
        if self.indexed:
            return self._call_indexed(args, key)
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
        if not shapes or numpy_raises():
            return self.block(*args)     # np.errstate(divide="raise"): NumPy raises
        shape = shapes[0]
        if len(shapes) > 1 and any(sh != shape for sh in shapes):
            try:
                shape = np.broadcast_shapes(*shapes)
            except ValueError:
                return self.block(*args)     # NumPy raises its error from the user's line
        if not shape:
            return self.block(*args)     # NumPy gives scalars here, not 0-d arrays
        once = []
        for r, deps in self.partial:     # a result smaller than the loop: NumPy runs it,
            if np.broadcast_shapes(*(np.shape(args[i]) for i in deps)) != shape:
                if any(np.shape(args[i]) for i in deps):
                    return self.block(*args)
                once.append(r)           # or of numbers only: the kernel, once (c.render)
        n = math.prod(shape)
        if once and not n:
            return self.block(*args)
        parallel = n * self.kernel.cost >= MIN_PARALLEL_WORK
        spec = self.spec(tuple(kinds), parallel)
        if spec is None or self._numpy_runs_faster(tuple(kinds), spec.typed, n):
            return self.block(*args)
        for i, info in spec.checks:
            if not info.min <= args[i] <= info.max:
                return self.block(*args)  # NumPy raises OverflowError
        numbers = False
        if once:
            numbers = tuple((r, spec.typed.out_weak[r]) for r in once)
            if any(spec.typed.outputs[r][0].startswith("in") or w not in (None, float)
                   for r, w in numbers):
                return self.block(*args)  # (a number passed through: the block's type)
        shapes = [() if r in once else shape for r in range(len(spec.out_dtypes))]
        outs = [np.empty(sh, dt) for sh, dt in zip(shapes, spec.out_dtypes)]
        lead = keep = None
        if n:
            try:
                lead, keep = self._run(spec, args, kinds, shape, n, outs)
            except Unsupported:
                return self.block(*args)
        if key is not None and (lead is not None or not n):
            conv = tuple((i, kd[0]) for i, (a, kd) in enumerate(zip(args, kinds))
                         if type(a) is not _ndarray)
            self._keep_plan(key, (spec.objs if n else None, lead, conv,
                                  tuple(zip(shapes, spec.out_dtypes)),
                                  parallel, numbers, keep, spec.func if n else None), args)
        if numbers:
            _as_numbers(outs, numbers)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _numpy_runs_faster(self, kinds, typed, n) -> bool:
        """``numpy_above``: does NumPy run this call faster?"""
        if self.numpy_above is None or n <= self.numpy_above:
            return False
        got = self.slow.get(kinds)
        if got is None:
            got = self.slow[kinds] = slow_on_arrays(typed, self.numpy_faster)
        return got

    def _keep_plan(self, key, plan, args):
        if len(self.plans) > 256:
            self.plans.clear()
        self.plans[key] = plan
        ints = [j for j, a in enumerate(args) if type(a) is int]
        if not ints:
            return
        checks = []
        for j in ints:
            got = self._int_checks(args, j)
            if got is None:
                return           # a slice bound: each value its own plan
            checks += got
        if len(self.int_plans) > 64:
            self.int_plans.clear()
        self.int_plans[_any_int_key(args, key)] = (plan, checks)

    def _int_plan(self, args, key):
        """The plan of a call that differs from an earlier one in the value of Python
        ints that only enter the arithmetic (``_keep_plan``); None if there is none,
        or a value does not fit its dtype (NumPy raises: the block runs)."""
        got = self.int_plans.get(_any_int_key(args, key))
        if got is None:
            return None
        plan, checks = got
        for i, info in checks:
            if not info.min <= args[i] <= info.max:
                return None
        for a in args:
            if type(a) is int and not ir.fits_int64(a):
                return None           # (passed as an int64: ``ir.input_kind``)
        return plan

    def _run_plan(self, plan, args):
        """A call like an earlier one: ``plan`` is (function taking array objects,
        its leading arguments, (argument index, dtype) of the non-arrays, (shape,
        dtype) of each result, parallel?, full reduction? (or which results are
        numbers: ``_as_numbers``), what the leading arguments point into, kept alive
        here, the function taking data pointers: what a compiled loop driver calls,
        ``kernels/loops.py``; an indexed kernel's plan adds how to build that function
        prefetching streamed rows)."""
        func, lead, conv, results, parallel, full_reduce = plan[:6]
        if conv:
            args = list(args)
            boxed = self.boxed
            for c in conv:
                a = args[c[0]]
                got = boxed.get(c)
                if got is None or got[0] is not a:
                    # the same object as last time (``dx`` of every step): its 0-d
                    # array again (identity, not equality: -0.0 == 0.0); the entry
                    # holds the object, so its id cannot be reused meanwhile
                    got = boxed[c] = (a, np.array(a, dtype=c[1]))
                args[c[0]] = got[1]
        pools = self.pools
        if pools is None:
            outs = [np.empty(sh, dt) for sh, dt in results]
        else:
            buffer = self._buffer
            outs = [buffer(pool, sh, dt) for pool, (sh, dt) in zip(pools, results)]
        if func is not None:
            # (``args`` and ``outs`` are alive here: the C code reads their items)
            func(*lead, num_threads() if parallel else 1, id(args), type(args) is list,
                 id(outs))
        if full_reduce:
            if full_reduce is True:
                return outs[0][()]      # NumPy gives a scalar for a full reduction
            _as_numbers(outs, full_reduce)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _buffer(self, pool, shape, dtype):
        """A result buffer: a pooled one nothing else refers to, else a new one."""
        for b in pool:
            # three references: the pool, ``b`` and getrefcount's argument (and no
            # weak reference someone could call back to read the old values)
            if _getrefcount(b) == 3 and b.shape == shape and b.dtype == dtype and \
                    not _getweakrefcount(b):
                return b
        b = np.empty(shape, dtype)
        if b.nbytes <= self.pool_max_bytes:
            if len(pool) >= self.pool_depth:
                del pool[0]
            pool.append(b)
        return b

    def _run(self, spec, args, kinds, shape, n, outs):
        """Runs the kernel; gives the leading arguments a plan passes again."""
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
        shape_ptr = shape_arr.__array_interface__["data"][0]
        strides_ptr = strides.__array_interface__["data"][0]
        spec.func(n, ndim, shape_ptr, strides_ptr, contiguous, threads, spec.ptrs(*ptrs))
        return (n, ndim, shape_ptr, strides_ptr, contiguous), (shape_arr, strides)

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

    def _compiled(self, kinds, typed, baked, threads=True, prefetch=((), ())):
        key = (kinds, baked, threads) if prefetch == ((), ()) else \
            (kinds, baked, threads, prefetch)
        got = self.specs.get(key, False)
        if got is False:
            try:
                _, _, omp = cc.compiler()
                text = self._flagged(c_render.render_indexed(
                    typed, _cname(self.kernel), bool(omp), baked, threads, prefetch))
                func, objs = self._build(text, typed, _LEAD_INDEXED, _LEAD_INDEXED_ARGS,
                                         _INDEXED_ARGTYPES)
            except Unsupported:
                got = None
            else:
                got = (func, text, objs)
            self.specs[key] = got
        return got

    def _call_indexed(self, args, plan_key=None):
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
        if numpy_raises():
            return self.block(*args)     # np.errstate(divide="raise"): NumPy raises
        for i, dt in typed.int_checks:
            info = np.iinfo(dt)
            if not info.min <= args[i] <= info.max:
                return self.block(*args)  # NumPy raises OverflowError
        lay = layout.cached(self.layouts, (kinds, tuple(key)), typed, args)
        if lay is None:
            return self.block(*args)
        if self._numpy_runs_faster(kinds, typed, math.prod(lay.domain)):
            return self.block(*args)
        outs = [np.empty(sh, dt) for sh, dt in zip(lay.out_shapes, typed.out_dtypes)]
        n = math.prod(lay.domain)
        got = None
        parallel = n * self.kernel.cost >= MIN_PARALLEL_WORK
        params_ptr = lay.params.__array_interface__["data"][0]
        if n:
            got = self._compiled(kinds, typed, lay.baked, parallel)
            if got is None:
                return self.block(*args)
            keep, ptrs = [], []
            for a, inp in zip(args, typed.inputs):
                if type(a) is not _ndarray:
                    a = np.array(a, dtype=inp.dtype)
                    keep.append(a)
                ptrs.append(a.__array_interface__["data"][0])
            ptrs += [o.__array_interface__["data"][0] for o in outs]
            threads = num_threads() if parallel else 1
            arr = (ctypes.c_void_p * len(ptrs))(*ptrs)
            got[0](params_ptr, threads, arr)
        full_reduce = typed.reduce is not None and not lay.out_shapes[0]
        if plan_key is not None:        # (the plan keeps ``lay``, so its P, alive)
            conv = tuple((i, inp.dtype) for i, (a, inp) in enumerate(zip(args, typed.inputs))
                         if type(a) is not _ndarray)

            def streamed(prefetch, kinds=kinds, typed=typed, baked=lay.baked,
                         parallel=parallel):
                """This plan's function with ``prefetch`` rows (``_compiled``)."""
                return self._compiled(kinds, typed, baked, parallel, prefetch)
            self._keep_plan(plan_key, (got[2] if got else None, (params_ptr,), conv,
                                       tuple(zip(lay.out_shapes, typed.out_dtypes)),
                                       parallel, full_reduce, lay, got[0] if got else None,
                                       streamed), args)
        if full_reduce:
            return outs[0][()]          # NumPy gives a scalar for a full reduction
        return outs[0] if len(outs) == 1 else tuple(outs)
