"""Running a compiled loop (``kernels/loops.py`` matched and rendered it).

``LoopDriver`` stands where the host code called the loop: it interprets the first
steps in Python, exactly the statements of the body (the same kernel calls, indexing
and tuples), until a step repeats the kernel plans of the one before with carries of
the same layouts; then it fills the tables the rendered C function reads (kernel
functions and plans, invariant operands, ``xs`` pointers and strides, view offsets,
result buffers one more than the carries, the stacked ``ys``) and runs the remaining
steps in one call, without the GIL.  Anything it cannot take goes on in Python.
"""
from __future__ import annotations

import ctypes
import os
import sys
import threading
import weakref

import numpy as np

from astjax import runtime as rt
from astjax.core import SliceAtom, Var
from astjax.kernels import compile as cc, ir
from astjax.kernels.governor import Governor
from astjax.kernels.loops import (MAX_WARMUP, MIN_STEPS, STATS, Program, _cvar, _is_ptr,
                                  render_c)
from astjax.kernels.runtime import DATA_OFFSET, KernelCall, numpy_raises
from astjax.runtime_fusion import num_threads


class _Loop(ctypes.Structure):
    """``astjax_loop`` of ``C_HEADER``."""
    _fields_ = [("inv", ctypes.c_void_p), ("xs", ctypes.c_void_p),
                ("xs_stride", ctypes.c_void_p), ("offset", ctypes.c_void_p),
                ("carry", ctypes.c_void_p), ("pool", ctypes.c_void_p),
                ("pool_size", ctypes.c_int64), ("fn", ctypes.c_void_p),
                ("lead", ctypes.c_void_p), ("nthreads", ctypes.c_void_p),
                ("ys", ctypes.c_void_p), ("ys_layout", ctypes.c_void_p),
                ("ys_row0", ctypes.c_int64), ("ys_dir", ctypes.c_int64),
                ("saved", ctypes.c_void_p), ("saved_bytes", ctypes.c_void_p),
                ("saved_from", ctypes.c_int64)]


_DECLINE = (False, None, None)
_SPARE_LOCK = threading.Lock()


def _spare_refs():
    """References a spare buffer nothing else holds has inside ``_stacked``'s loop."""
    spare = [np.empty(1)]
    for buf in spare:
        return sys.getrefcount(buf)


_SPARE_REFS = _spare_refs()


def plan_entry(kc, plan, keep, prefetch=((), ())):
    """A kernel plan as a compiled driver's tables take it: (its function's address,
    its leading arguments' address, its thread count, its results' (shape, dtype));
    ``keep`` holds what the addresses point into.  ``prefetch``: (input indices,
    result indices) whose rows stream from a sweep's tape: an indexed kernel's build
    that fetches them a row ahead (``c._prefetch_rows``)."""
    fn = plan[7]
    if kc.indexed:
        lead = plan[1][0]
        if prefetch != ((), ()) and len(plan) > 8:
            got = plan[8](prefetch)
            if got is not None:
                fn = got[0]
    else:
        array = np.array(plan[1], dtype=np.int64)
        keep.append(array)
        lead = _ptr(array)
    return (ctypes.cast(fn, ctypes.c_void_p).value, lead,
            num_threads() if plan[4] else 1, plan[3])


# bytes of spare buffers all compiled loops together keep between calls (a tape
# larger than what is left of this is made fresh each call, and freed after it)
def _keep_bytes(default=1 << 30):
    raw = os.environ.get("ASTJAX_KEEP_BYTES", "")
    try:
        return max(0, int(raw)) if raw.strip() else default
    except ValueError:
        from astjax.errors import ArgumentError
        raise ArgumentError(f"ASTJAX_KEEP_BYTES={raw!r}: not a number of bytes (e.g. "
                            f"{default}; 0 keeps nothing between calls)") from None


KEEP_BYTES = _keep_bytes()
_KEPT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # owner -> bytes kept


def spare_buffer(owner, shape, dtype, limit=64):
    """A buffer of ``shape`` and ``dtype`` that an earlier call of ``owner``'s loop
    made and nothing refers to any more (no view of it on a tape, in a carry, in the
    user's hands), else a new one (kept for later calls, up to ``limit`` a shape and
    ``KEEP_BYTES`` for all loops together, ``ASTJAX_KEEP_BYTES``).  Returned as a
    view, which holds it while the caller uses it.  (A sweep's buffers, hundreds of
    megabytes for a tape, cost their page faults when fresh each call; the Python
    loop's per-step arrays come back from malloc's heap.)"""
    key = (tuple(shape), np.dtype(dtype))
    with _SPARE_LOCK:
        spare = owner.__dict__.setdefault("_spare", {}).setdefault(key, [])
        for buf in spare:
            if sys.getrefcount(buf) <= _SPARE_REFS:
                return buf[...]
        buf = np.empty(shape, dtype)
        if len(spare) < limit and sum(_KEPT.values()) + buf.nbytes <= KEEP_BYTES:
            spare.append(buf)
            _KEPT[owner] = _KEPT.get(owner, 0) + buf.nbytes
        return buf[...]


_ndarray = np.ndarray


def _ptr(a) -> int:
    return a.__array_interface__["data"][0]


def _row_at(p, stacked, rows):
    """The row whose data starts at address ``p`` among the stacked arrays' ``rows``
    (their row views), found by arithmetic: a sweep stacks thousands of rows."""
    for a, r in zip(stacked, rows):
        if not len(a):
            continue
        base, step = _ptr(a), a.strides[0]
        k, rem = divmod(p - base, step) if step else (0, p - base)
        if rem == 0 and 0 <= k < len(a):
            return r[k]
    raise KeyError(p)


def _pointers(values, dtype=np.uint64):
    """(array of ``values``, its address) for the driver's tables."""
    arr = np.array(values, dtype=dtype) if len(values) else np.zeros(1, dtype)
    return arr, _ptr(arr)


def _index(index, env):
    """The Python index a core ``Index`` stands for."""
    def atom(a):
        if a is None:
            return None
        return env[a.name] if isinstance(a, Var) else a.value

    items = []
    for it in index.items:
        if it is None or it is Ellipsis:
            items.append(it)
        elif isinstance(it, SliceAtom):
            items.append(slice(atom(it.lower), atom(it.upper), atom(it.step)))
        else:
            items.append(atom(it))
    return items[0] if len(items) == 1 and not index.tuple_form else tuple(items)


def _basic(ix) -> bool:
    """Is ``ix`` basic indexing (a view, never a copy)?"""
    items = ix if type(ix) is tuple else (ix,)
    for it in items:
        if it is None or it is Ellipsis:
            continue
        if type(it) is slice:
            if not all(p is None or (isinstance(p, (int, np.integer)) and type(p) is not bool)
                       for p in (it.start, it.stop, it.step)):
                return False
        elif not isinstance(it, (int, np.integer)) or type(it) is bool:
            return False
    return True


def _view_of(base, ix):
    """``base[ix]`` as an array view (a 0-d view where NumPy gives a scalar)."""
    items = ix if type(ix) is tuple else (ix,)
    if Ellipsis not in items:
        items = items + (Ellipsis,)
    return base[items]


class LoopDriver:
    """Runs a matched loop (``match``): a few steps interpreted, the rest in C."""

    def __init__(self, prog: Program, reverse: bool):
        self.prog = prog
        self.reverse = reverse
        self.__name__ = "loop_driver"
        self.text = None
        self.func = None
        self.governor = Governor()     # its kernels' threads on a busy machine

    def set_name(self, name):
        self.__name__ = name
        self.text = render_c(self.prog, _cvar(name))

    def __repr__(self):
        return f"<astjax compiled loop {self.__name__}>"

    # -- the Python side: exactly the statements of the loop ------------------------

    def _step(self, env, i, ys_vals, calls, made, tape=None):
        """Step ``i`` as the loop runs it; ``calls`` gets each kernel's operands,
        ``made`` each statement's value; a sweep's pushes go onto ``tape``."""
        prog = self.prog
        env[prog.loop_var] = i
        for op in prog.ops:
            kind = op[0]
            if kind == "kernel":
                args = [env[a.name] if isinstance(a, Var) else a.value for a in op[3]]
                env[op[1]] = op[2](*args)
                calls.append(args)
            elif kind == "xs":
                env[op[1]] = rt.tree_index(env[op[2]], env[op[3]])
            elif kind == "reverse":
                env[op[1]] = env[op[2]] - i
            elif kind == "item":
                env[op[1]] = env[op[2]][op[3]]
            elif kind == "view":
                env[op[1]] = env[op[2]][_index(op[3], env)]
            elif kind == "tuple":
                env[op[1]] = tuple([env[x] for x in op[2]])
            elif kind == "copy":
                env[op[1]] = env[op[2]]
            elif kind == "compact":
                env[op[1]] = rt.compact(env[op[2]])
            elif kind == "meta":
                env[op[1]] = rt.meta(env[op[2]])
            elif kind == "opaque":
                env[op[1]] = tuple([env[x.name] if isinstance(x, Var) else x.value
                                    for x in op[2]])
            elif kind == "push":
                x = op[2]
                rt.push(tape, env[x.name] if isinstance(x, Var) else x.value)
            else:                                      # append
                ys_vals.append(env[op[2].name] if isinstance(op[2], Var) else None)
            made.append(env.get(op[1]))

    def _carry_leaves(self, env):
        """The carries' leaves as arrays, in ``carry_leaves`` order, or None."""
        out = []
        for name, path in self.prog.carry_leaves:
            v = env[name]
            for k in path:
                if type(v) is not tuple or k >= len(v):
                    return None
                v = v[k]
            if type(v) is not _ndarray:
                return None
            out.append(v)
        for name in self.prog.carried:      # tuples exactly as the body builds them
            if not _same_shape(env[name], self.prog.carry_start[name]):
                return None
        return out

    def __call__(self, *args):
        prog = self.prog
        nc = len(prog.carried)
        start, stop = _int(args[nc + 1]), _int(args[nc + 2])
        if DATA_OFFSET is None or start is None or stop is None or stop - start < MIN_STEPS:
            return _DECLINE
        ys_steps = args[nc]
        if prog.ys_list is not None and not (type(ys_steps) is list and not ys_steps):
            return _DECLINE
        env = dict(zip(prog.invariants, args[nc + 3:]))
        env.update(zip(prog.carried, args[:nc]))
        xs_info = self._xs_info(env, start, stop)
        if xs_info is None:
            return _DECLINE      # xs that are not plain arrays, or indexed out of range
        ys_vals: list = []
        i = start
        while i < stop:
            before = self._carry_leaves(env)
            calls: list = []
            made: list = []
            self._step(env, i, ys_vals, calls, made)
            i += 1
            if i - start > MAX_WARMUP or i >= stop or before is None:
                continue
            after = self._carry_leaves(env)
            if after is None or [_sig(a) for a in after] != [_sig(b) for b in before]:
                continue
            done = self._run_c(env, i, start, stop, before, after, calls, made, xs_info,
                               ys_vals)
            if done is not None:
                return done
        carry = [env[n] for n in prog.carried]
        ys = rt.tree_stack(ys_vals, self.reverse) if prog.ys_list is not None else None
        return (True, *carry, ys)

    def _xs_info(self, env, start, stop):
        """Per xs op: (array, index of step 0, index step), or None."""
        info = []
        for op in self.prog.ops:
            if op[0] != "xs":
                continue
            xs = env[op[2]]
            if xs is None:                 # ``scan(f, init, None, length=n)``
                info.append((None, 0, 0))
                continue
            if type(xs) is not _ndarray or xs.ndim == 0:
                return None
            if op[4] is None:
                first, step = 0, 1
            else:
                last = env[op[4]]
                if type(last) is not int:
                    return None
                first, step = last, -1
            lo, hi = sorted((first + step * start, first + step * (stop - 1)))
            if lo < 0 or hi >= xs.shape[0]:
                return None
            info.append((xs, first, step))
        return info

    # -- the C side ------------------------------------------------------------------

    def _stacked(self, shape, dtype):
        """A buffer for the stacked pushed results (``spare_buffer``)."""
        return spare_buffer(self, shape, dtype, 2)

    def _run_c(self, env, i, start, stop, before, after, calls, made, xs_info, ys_vals,
               raw=False):
        """Steps [i, stop) in one C call when the step just interpreted (``calls``:
        its kernels' operands) can be repeated as compiled calls; the result of the
        loop, or None (then the caller goes on interpreting).  ``raw``: (carry
        leaves, stacked ys leaves, stacked pushed results) instead (a sweep's)."""
        prog = self.prog
        if numpy_raises():
            return None
        keep = []
        # values of the step just run, by symbol (for views, ys and operand kinds)
        values = {("carry", j): before[j] for j in range(len(before))}
        for op, at, res in zip(prog.ops, prog.at, made):
            if op[0] in ("xs", "view"):
                values[at[0]] = res
            elif op[0] == "kernel":
                outs = at[1]
                got = [res] if len(outs) == 1 else (list(res) if type(res) is tuple else [])
                if len(got) != len(outs):
                    return None
                values.update(zip(outs, got))
        # views: their byte offsets in the arrays they index
        offsets = []
        for op, at in zip(prog.ops, prog.at):
            if op[0] != "view":
                continue
            base = values.get(at[1])
            ix = _index(op[3], env)
            if type(base) is not _ndarray or not _basic(ix):
                return None
            view = _view_of(base, ix)
            offsets.append(_ptr(view) - _ptr(base))
            values[at[0]] = view
        fns, leads, threads, inv, pools_of = [], [], [], [], []
        plan_ids = []                # the kernels' plans: what sets a step's cost
        python_floats = set()        # results the loop has as Python floats
        kernel_at = [at for op, at in zip(prog.ops, prog.at) if op[0] == "kernel"]
        for k, (op, at, args) in enumerate(zip(prog.kernel_ops, kernel_at, calls)):
            kc: KernelCall = op[2]
            plan = kc.plan_of(args)
            if plan is None or plan[7] is None:
                return None          # ran with NumPy
            # (a full reduction writes a 0-d pool buffer; the loop's value is its
            # scalar, which a later kernel reads through the buffer's pointer)
            keep.append(plan)        # (its layout holds the P array the C call reads)
            plan_ids.append(id(plan))
            if type(plan[5]) is tuple:     # (results of numbers only: ``_as_numbers``)
                python_floats.update(("out", k, r) for r, w in plan[5] if w is float)
            conv = dict(plan[2])
            for j, (x, value) in enumerate(zip(at[0], args)):
                ptr_operand = _is_ptr(x)
                if x == "index":     # (the C loop passes its counter: ``render_c``)
                    if conv.get(j) != np.int64 or \
                            not kc.takes_any_int(args, j, min(i, stop - 1), stop - 1):
                        return None
                    continue
                if type(value) is _ndarray:
                    if j in conv:
                        return None
                    if not ptr_operand:
                        inv.append(_ptr(value))
                        keep.append(value)
                elif j not in conv:
                    return None
                elif ptr_operand:    # an xs step or a view that NumPy gives as a scalar,
                    # or a kernel's number (a float's plan holds for any value; an
                    # integer's is its value's)
                    if type(value) is float and x in python_floats:
                        if conv[j] != np.float64:
                            return None
                    elif not isinstance(value, np.generic) or value.dtype != conv[j] or \
                            value.dtype.kind not in "fc":
                        return None
                else:
                    box = np.array(value, dtype=conv[j])
                    keep.append(box)
                    inv.append(_ptr(box))
            # a sweep's saved results go straight to their rows of the tape
            taped = tuple(r for r in range(len(plan[3])) if ("out", k, r) in prog.saved)
            entry = plan_entry(kc, plan, keep, ((), taped) if raw else ((), ()))
            for got, into in zip(entry, (fns, leads, threads, pools_of)):
                into.append(got)
        # ys: the stacked outputs, with the rows of the steps already run
        n = stop - start
        ys_arrays, layouts = [], []
        if prog.ys_list is not None and prog.y_leaves:
            for k, leaf in enumerate(prog.y_leaves):
                src = values.get(leaf)
                if isinstance(src, np.generic):
                    src = np.asarray(src)
                if type(src) is not _ndarray:
                    return None
                ys_arrays.append(np.empty((n,) + src.shape, src.dtype))
                lay = np.array([src.ndim, src.itemsize, src.nbytes, *src.shape,
                                *src.strides], dtype=np.int64)
                keep.append(lay)
                layouts.append(_ptr(lay))
            for p, y in enumerate(ys_vals):
                ls = _leaves_as(y, prog.y_symbol)
                if ls is None:
                    return None
                for arr, leaf in zip(ys_arrays, ls):
                    leaf = np.asarray(leaf)
                    if leaf.shape != arr.shape[1:] or leaf.dtype != arr.dtype:
                        return None
                    arr[n - 1 - p if self.reverse else p] = leaf
        elif prog.ys_list is not None and not prog.ys_dead and ys_vals and \
                any(y is not None for y in ys_vals):
            return None
        if self.func is None:
            func = cc.build(self.text, _cvar(self.__name__))
            func.argtypes = (ctypes.c_int64, ctypes.c_int64, ctypes.POINTER(_Loop))
            func.restype = ctypes.c_int
            self.func = func
        # result buffers: one more per result than there are carries
        # (one for a result no carry takes: its last value is dead when it is made)
        pool_size = len(prog.carry_leaves) + 1
        carried = {x for x in prog.new_carry if x[0] == "out"}
        pool, saved = [], []
        # (a sweep's buffers come back from its earlier calls: ``spare_buffer``)
        new = (lambda shape, dt: spare_buffer(self, shape, dt)) if raw else np.empty
        for k, results in enumerate(pools_of):
            for r, (shape, dt) in enumerate(results):
                if ("out", k, r) in prog.saved:
                    pool += [np.empty(0, np.uint8)] * pool_size     # (never read)
                    saved.append((prog.saved.index(("out", k, r)),
                                  self._stacked((stop - i,) + tuple(shape), dt)))
                elif ("out", k, r) in carried:
                    pool += [new(shape, dt) for _ in range(pool_size)]
                else:
                    pool += [new(shape, dt)] * pool_size
        carries = list(after)
        tables = {
            "inv": _pointers(inv),
            "xs": _pointers([0 if xs is None else _ptr(xs) + first * xs.strides[0]
                             for xs, first, _ in xs_info]),
            "xs_stride": _pointers([0 if xs is None else step * xs.strides[0]
                                    for xs, _, step in xs_info], np.int64),
            "offset": _pointers(offsets, np.int64),
            "carry": _pointers([_ptr(c) for c in carries]),
            "pool": _pointers([_ptr(b) for b in pool]),
            "fn": _pointers(fns), "lead": _pointers(leads),
            "ys": _pointers([_ptr(a) for a in ys_arrays]),
            "ys_layout": _pointers(layouts)}
        saved = [a for _, a in sorted(saved, key=lambda x: x[0])]
        if len(saved) != len(prog.saved):
            return None
        tables["saved"] = _pointers([_ptr(a) for a in saved])
        tables["saved_bytes"] = _pointers([a[0].nbytes if len(a) else 0 for a in saved],
                                          np.int64)
        nthreads = np.array(threads or [1], dtype=np.int32)
        loop = _Loop(inv=tables["inv"][1], xs=tables["xs"][1],
                     xs_stride=tables["xs_stride"][1], offset=tables["offset"][1],
                     carry=tables["carry"][1], pool=tables["pool"][1], pool_size=pool_size,
                     fn=tables["fn"][1], lead=tables["lead"][1], nthreads=_ptr(nthreads),
                     ys=tables["ys"][1], ys_layout=tables["ys_layout"][1],
                     ys_row0=(n - 1 + start) if self.reverse else -start,
                     ys_dir=-1 if self.reverse else 1, saved=tables["saved"][1],
                     saved_bytes=tables["saved_bytes"][1], saved_from=i)
        if self.governor.run(self.func, i, stop, ctypes.byref(loop), nthreads,
                             tuple(plan_ids)):
            raise RuntimeError(f"astjax: the compiled loop {self.__name__} failed")
        STATS["loops"] += 1
        STATS["steps"] += stop - i
        # the carries after the last step, as arrays
        by_ptr = {_ptr(b): b for b in pool}     # (duplicates: the same array)
        by_ptr.update({_ptr(c): c for c in carries})
        # (the steps' pushed results, as views; numbers as NumPy's or Python's)
        floats = {prog.saved.index(o) for o in python_floats if o in prog.saved}
        rows = [a.tolist() if j in floats else list(a) for j, a in enumerate(saved)]
        out_ptrs = tables["carry"][0]
        final = [by_ptr.get(int(p)) for p in out_ptrs[:len(carries)]]
        for j, p in enumerate(out_ptrs[:len(carries)]):
            if final[j] is None:                 # a row of a stacked result
                final[j] = _row_at(int(p), saved, rows)
        if raw:
            return final, ys_arrays, rows
        leaves = iter(final)
        carry = [_as_value(prog.carry_start[n], leaves) for n in prog.carried]
        if prog.ys_list is None:
            ys = None
        elif not prog.y_leaves:
            ys = rt.tree_stack([None] * n, self.reverse)
        else:
            ys = _as_value(prog.y_symbol, iter(ys_arrays))
        return (True, *carry, ys)


def _int(v):
    """A loop bound as the C loop takes it (an int64), or None: not an integer, or
    one past int64 (the counter would wrap, and the loop run no step)."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) and \
            ir.fits_int64(v):
        return int(v)
    return None


def _sig(a):
    return (a.dtype, a.shape, a.strides)


def _same_shape(value, s):
    if _is_ptr(s) or s == "static":
        return True
    return type(value) is tuple and len(value) == len(s) and all(
        _same_shape(v, x) for v, x in zip(value, s))


def _shape_only(v):
    """``rt.meta`` kept only shapes: zero-stride views, NumPy float zeros (a float
    scalar's), containers of them, None."""
    if v is None or (type(v) is _ndarray and not any(v.strides)):
        return True
    if isinstance(v, np.inexact):
        return v == 0
    if type(v) in (tuple, list):
        return all(_shape_only(x) for x in v)
    return False


def _leaves_as(value, s):
    """The leaves of ``value`` laid out as symbol tree ``s``, or None."""
    if _is_ptr(s):
        return [value]
    if type(value) is not tuple or len(value) != len(s):
        return None
    out = []
    for v, x in zip(value, s):
        got = _leaves_as(v, x)
        if got is None:
            return None
        out += got
    return out


def _as_value(s, leaves):
    """The Python value of symbol tree ``s`` with its leaves from ``leaves``."""
    if _is_ptr(s):
        return next(leaves)
    return tuple(_as_value(x, leaves) for x in s)



class SweepDriver(LoopDriver):
    """The fast steps of reverse mode's forward sweep (``kernels/sweeps.py``).

    Called at a step whose fast trip holds (its carry's signature is the one the first
    step fixed), with (i, stop, trips, tape, ys list, carried..., invariants...): it
    interprets step ``i`` (the statements of the fast body, pushes onto the tape
    included); when that step kept the carries' layouts, steps (i, stop) run in one C
    call, each pushed kernel result written straight into its row of one stacked
    buffer, and the tape gets per step what the loop pushes: those rows, ``xs`` at
    the step, and the values that are the same every step (metadata, invariants,
    constants).  Returns (ok, done, trips, ys list, carried...): ok False -- nothing
    ran, the loop's own fast body runs the step; done -- the loop is over.
    ``memo`` (a list the loop starts empty) remembers giving up, so a loop the C
    side cannot take runs its own body from then on."""

    def __init__(self, prog: Program, reverse: bool, index: bool = False):
        super().__init__(prog, reverse)
        self.index = index          # each step first pushes the index of the one before

    def __call__(self, memo, i, stop, trips, tape, ys_steps, *args):
        prog = self.prog
        nc = len(prog.carried)
        decline = (False, False, trips, ys_steps, i, *args[:nc])
        i, stop = _int(i), _int(stop)
        if (memo and memo[-1] == "python") or DATA_OFFSET is None or i is None or stop is None or \
                type(tape) is not list or type(trips) is not int or \
                (prog.ys_list is not None and type(ys_steps) is not list):
            return decline
        env = dict(zip(prog.invariants, args[nc:]))
        env.update(zip(prog.carried, args[:nc]))
        before = self._carry_leaves(env)
        xs_info = self._xs_info(env, i, stop)
        if before is None or xs_info is None or stop - i - 1 < MIN_STEPS:
            memo.append("python")
            return decline
        calls: list = []
        made: list = []
        ys_vals: list = []
        self._step(env, i, ys_vals, calls, made, tape)
        if prog.ys_list is not None:
            ys_steps = [*ys_steps, *ys_vals]
        stepped = (True, False, trips, ys_steps, i, *[env[n] for n in prog.carried])
        after = self._carry_leaves(env)
        if after is None or [_sig(a) for a in after] != [_sig(b) for b in before]:
            memo.append("warm-up")
            if len(memo) >= MAX_WARMUP:
                memo.append("python")
            return stepped
        # what the step pushes as the same every step: metadata (``rt.meta`` of a
        # number is the number itself, which differs per step)
        for op, value in zip(prog.ops, made):
            if op[0] == "meta" and not _shape_only(value):
                memo.append("python")
                return stepped
        got = self._run_c(env, i + 1, i, stop, before, after, calls, made, xs_info,
                          ys_vals, raw=True)
        if got is None:
            memo.append("python")
            return stepped
        final, ys_arrays, rows = got
        STATS["sweeps"] += 1
        STATS["sweep_steps"] += stop - i - 1
        self._push_steps(env, tape, i + 1, stop, rows, after)
        leaves = iter(final)
        carry = [env[n] if prog.carry_start[n] == "static" else
                 _as_value(prog.carry_start[n], leaves) for n in prog.carried]
        if prog.ys_list is not None:
            if _is_ptr(prog.y_symbol):       # (one array a step: its rows)
                ys_steps += list(ys_arrays[0][1:])
            elif prog.y_leaves:
                ys_steps += [_as_value(prog.y_symbol, iter([a[r] for a in ys_arrays]))
                             for r in range(1, stop - i)]
            else:
                ys_steps += [None] * (stop - i - 1)
        return (True, True, trips + stop - i - 1, ys_steps, stop - 1, *carry)

    def _carry_values(self, j, carries, rows, n):
        """Carry ``j`` entering each of ``n`` compiled steps: the step before made it
        (a row of a pushed result), or passed it along from another carry."""
        new_carry = self.prog.new_carry
        # the carries step r reads, walking back: k_0 = j, k_1 = the carry k_0 was
        # passed from, ... up to the first made by a kernel (a saved row) or a cycle
        hops, k = [j], j
        while len(hops) < n and new_carry[k][0] == "carry":
            k = new_carry[k][1]
            hops.append(k)
        if new_carry[hops[-1]][0] == "carry" or len(hops) == n:
            return [carries[hops[r]] for r in range(min(n, len(hops)))]
        # steps 0..h read carries; step r > h reads row r - h - 1 of what k_h saves
        h = len(hops) - 1
        made = rows[self.prog.saved.index(new_carry[hops[h]])]
        return [carries[k] for k in hops] + made[:n - h - 1]

    def _push_steps(self, env, tape, first, stop, rows, carries):
        """What the loop pushes onto the tape at steps [first, stop): as the step
        interpreted last pushed, with its kernel results from ``rows``, ``xs`` at
        each step, and a carry as the step before made it (``carries``: those
        entering step ``first``)."""
        prog = self.prog
        xs_ops = {at[0]: op for op, at in zip(prog.ops, prog.at) if op[0] == "xs"}
        plan = []
        for op, at in zip(prog.ops, prog.at):
            if op[0] != "push":
                continue
            x = op[2]
            if _is_ptr(at) and at[0] == "out":
                plan.append((1, rows[prog.saved.index(at)]))
            elif _is_ptr(at) and at[0] == "carry":
                plan.append((3, self._carry_values(at[1], carries, rows, stop - first)))
            elif at == "index":
                plan.append((3, range(first, stop)))
            elif _is_ptr(at):                       # xs at the step
                xop = xs_ops[at]
                last = None if xop[4] is None else env[xop[4]]
                plan.append((2, (env[xop[2]], last)))
            else:
                plan.append((0, env[x.name] if isinstance(x, Var) else x.value))
        # (one column per push, interleaved into the tape by slice assignment)
        n = stop - first
        width = len(plan) + (1 if self.index else 0)
        flat = [None] * (n * width)
        col = 0
        if self.index:
            flat[0::width] = range(first - 1, stop - 1)
            col = 1
        for kind, v in plan:
            if kind == 0:
                flat[col::width] = [v] * n
            elif kind == 1 or kind == 3:
                flat[col::width] = v[:n]
            else:
                xs, last = v
                if last is None and type(xs) is _ndarray:    # (xs[j], for each j)
                    flat[col::width] = list(xs[first:stop])
                else:
                    steps = range(first, stop) if last is None else \
                        range(last - first, last - stop, -1)
                    flat[col::width] = [rt.tree_index(xs, j) for j in steps]
            col += 1
        tape.extend(flat)
