"""Reverse mode's backward sweep as a compiled loop (``kernels/sweeps.py`` rewrites it).

The backward sweep of a scan walks the tape from its end, one trip per step.  A trip
the forward sweep took on its fast path (``transforms/fast_trips.py``), once its
incoming cotangents are complete, pops the step's saved values, takes the step's
``ys`` cotangent from the end of its list, calls one kernel and rebuilds the carried
cotangents: tuples built and taken apart by ``rt.acc_at`` / ``rt.cot_at``, names
set to None, ``rt.cot_or_zero`` of an accumulator that already holds an array.  Once
one such trip ran, the next ones do exactly the same on values of the same layouts.

``BackSweepDriver`` stands in front of that body.  It interprets the trip (the same
runtime helpers and kernel calls the body makes), following each value as a symbol:
None, a carried array, a per-trip array (popped, or a ``ys`` cotangent), a kernel
result, an invariant, a value the same every trip, tuples of those.  When the trip
leaves its carried cotangents as it found them (the same structure, None where None,
arrays of the same layouts) and the tape holds more fast trips whose saved values
have the layouts of this one's, those trips run as one C call: per trip the kernel
call on pointers (the per-trip ones from tables), the carried arrays ping-ponged
among result buffers.  The tape and the list lose what those trips pop, and the loop
skips them (``skip``).  Whatever does not fit leaves the trip to Python.
"""
from __future__ import annotations

import ctypes
import operator

import numpy as np

from astjax import core
from astjax import runtime as rt, runtime_array as ra
from astjax.core import Const, External, Index, Prim, Var
from astjax.kernels import compile as cc
from astjax.kernels.governor import Governor
from astjax.kernels.loop_driver import _pointers, _ptr, plan_entry, spare_buffer
from astjax.kernels.loops import (C_HEADER, MIN_STEPS, STATS, _cvar, emit_kernel_call,
                                  emit_step_end)
from astjax.kernels.runtime import DATA_OFFSET, numpy_raises

# runtime helpers of the fast trip: (their function, how a symbol goes through them)
_HELPERS = {"acc": rt.acc, "acc_at": rt.acc_at, "cot_at": rt.cot_at,
            "cot_or_zero": rt.cot_or_zero, "last_cotangent": rt.last_cotangent,
            "drop_last_cotangent": rt.drop_last_cotangent,
            "acc_inplace": rt.acc_inplace, "acc_copy": rt.acc_copy,
            "acc_reuse": rt.acc_reuse, "acc_at_inplace": rt.acc_at_inplace,
            "seq_cotangents": rt.seq_cotangents, "reduced_size": ra.reduced_size}


def match(body, tape: str, dys: str, written: set, kernel_refs: dict):
    """The ops of a backward fast trip's body, or None: ("pop", t), ("kernel", t,
    KernelCall, operands), ("item", t, name, k), ("copy", t, atom), ("helper", t,
    name, operands); and (carried names, invariant names)."""
    carried, invariants, flags = [], [], set()

    def use(atom, defined):
        if isinstance(atom, Const):
            return True
        if not isinstance(atom, Var):
            return False
        n = atom.name
        if n in defined:
            return True
        if n in written or n == dys:
            if n not in carried:
                carried.append(n)
        elif n not in invariants:
            invariants.append(n)
        return True

    def block(stmts, ops, defined):
        """Append the ops of ``stmts``; False where one is not of the fast trip.  A
        name a branch writes counts as written only inside it (read after it, the
        value may be the one of the trip before: carried)."""
        for s in stmts:
            if isinstance(s, core.Comment):
                continue
            if isinstance(s, core.If):
                if not (isinstance(s.test, Var) and s.test.name in flags):
                    return False
                then, orelse = [], []
                if not (block(s.body, then, set(defined)) and
                        block(s.orelse, orelse, set(defined))):
                    return False
                ops.append(("if", s.test.name, then, orelse))
                continue
            if not statement(s, ops, defined):
                return False
            if s.target is not None:
                if s.target == tape:
                    return False
                defined.add(s.target)
        return True

    def statement(s, ops, defined):
        def uses(atoms):
            return all(use(a, defined) for a in atoms)
        if isinstance(s, Prim) and s.prim == "not_none" and len(s.args) == 1 and \
                isinstance(s.args[0], Var) and s.target:
            uses(s.args)
            flags.add(s.target)
            ops.append(("not_none", s.target, s.args[0].name))
        elif isinstance(s, Prim) and s.prim == "pop" and s.args == [Var(tape)] and \
                not s.kwargs:
            ops.append(("pop", s.target))
        elif isinstance(s, External) and isinstance(s.func, Var) and \
                s.func.name in kernel_refs and s.method is None and not s.kwargs:
            if not uses(s.args):
                return False
            ops.append(("kernel", s.target, kernel_refs[s.func.name], list(s.args)))
        elif isinstance(s, External) and s.func == Var("rt") and s.method in _HELPERS \
                and not s.kwargs:
            if not uses(s.args):
                return False
            ops.append(("helper", s.target, s.method, list(s.args)))
        elif isinstance(s, Prim) and s.prim in _HELPERS and not s.kwargs:
            if not uses(s.args):
                return False
            if s.prim in ("last_cotangent", "drop_last_cotangent") and \
                    (dys is None or s.args != [Var(dys)]):
                return False
            ops.append(("helper", s.target, s.prim, list(s.args)))
        elif isinstance(s, Prim) and s.prim == "getitem" and len(s.args) == 2 and \
                isinstance(s.args[0], Var) and isinstance(s.args[1], Index) and \
                len(s.args[1].items) == 1 and not s.args[1].tuple_form and \
                isinstance(s.args[1].items[0], Const) and \
                type(s.args[1].items[0].value) is int:
            uses(s.args[:1])
            ops.append(("item", s.target, s.args[0].name, s.args[1].items[0].value))
        elif isinstance(s, core.Copy) and (s.value == Const(None) or
                                           isinstance(s.value, Var)):
            uses([s.value])
            ops.append(("copy", s.target, s.value))
        else:
            return False
        return True

    ops: list = []
    if not block(body, ops, set()):
        return None
    if not _calls_a_kernel(ops) or tape in carried:
        return None
    return ops, carried, invariants


def _op_reads(op) -> set:
    """The names ``op`` reads (a branch: its flag and both arms)."""
    kind = op[0]
    if kind == "if":
        return {op[1]} | {n for o in op[2] + op[3] for n in _op_reads(o)}
    if kind in ("kernel", "helper"):
        return {a.name for a in op[3] if isinstance(a, Var)}
    if kind in ("item", "not_none"):
        return {op[2]}
    if kind == "copy":
        return {op[2].name} if isinstance(op[2], Var) else set()
    return set()


def _only_restored(ops, name) -> bool:
    """``name`` is popped at the top level of the trip and read nowhere after (the
    loop index restored for the trip after this one)."""
    at = [k for k, op in enumerate(ops) if op[0] == "pop" and op[1] == name]
    return len(at) == 1 and not any(name in _op_reads(op) for op in ops[at[0]:])


def _calls_a_kernel(ops) -> bool:
    """A kernel call among ``ops``, in a branch or not."""
    return any(o[0] == "kernel" or o[0] == "if" and (_calls_a_kernel(o[2]) or
                                                    _calls_a_kernel(o[3])) for o in ops)


# ------------------------------------------------------------------ symbols of a trip

_NOSYM = ("no symbol",)          # (a value the trace did not follow)
# an accumulator that was None, as ``rt.cot_or_zero`` made it (-0.0 everywhere): a
# kernel's operand only (kernels read it, nothing writes it), so every trip can read
# the one the traced trip made
_ZEROS = ("zeros",)


class _Untraceable(Exception):
    """The trip did something the C loop cannot repeat."""


def _sym_of_entering(v, leaves, name=None):
    """The symbol of a carried value entering the trip (its array leaves numbered);
    a Python int carried as ``name`` itself: the loop index, which each trip reads
    and then restores from the tape for the trip after it (``("int", name)``)."""
    if v is None:
        return None
    if type(v) is int and name is not None:
        return ("int", name)
    if type(v) is np.ndarray:
        leaves.append(v)
        return ("carry", len(leaves) - 1)
    if type(v) is tuple:
        return ("tuple", [_sym_of_entering(x, leaves) for x in v])
    raise _Untraceable


def _is_ptr(s):
    return isinstance(s, tuple) and s[0] in ("carry", "seq", "out")


def _helper_sym(name, syms, vals):
    """How a runtime helper of the fast trip moves symbols; raises where it computes."""
    if name in ("acc", "acc_inplace", "acc_reuse", "acc_copy"):
        a, b = syms
        if name == "acc_copy" and a is None and type(vals[1]) is np.ndarray:
            raise _Untraceable               # (a copy: a new buffer)
        if a is None:
            return b
        if b is None:
            return a
        raise _Untraceable
    if name in ("acc_at", "acc_at_inplace"):
        d, x, index, g = syms
        xv, iv = vals[1], vals[2]
        if g is None:
            if d is None or (isinstance(d, tuple) and d[0] == "tuple"):
                return d
            raise _Untraceable
        if type(xv) is tuple and type(iv) is int and (d is None or d[0] == "tuple"):
            items = [None] * len(xv) if d is None else list(d[1])
            if len(items) != len(xv) or items[iv] is not None:
                raise _Untraceable
            items[iv] = g
            return ("tuple", items)
        raise _Untraceable
    if name == "cot_at":
        g, index = syms
        if g is None:
            return None
        if isinstance(g, tuple) and g[0] == "tuple" and type(vals[1]) is int:
            return g[1][vals[1]]
        raise _Untraceable
    if name == "cot_or_zero":
        if syms[0] is None:
            raise _Untraceable
        return syms[0]
    if name == "seq_cotangents":          # (a tuple's cotangent taken apart: a list)
        g, n = syms[0], vals[1]
        if type(n) is not int:
            raise _Untraceable
        if g is None:
            return ("tuple", [None] * n)
        if isinstance(g, tuple) and g[0] == "tuple" and len(g[1]) == n:
            return g
        raise _Untraceable
    if name == "reduced_size":            # (of an array whose layout every trip has)
        if _is_ptr(syms[0]) and type(vals[0]) is np.ndarray and \
                (len(vals) < 2 or vals[1] is None):
            return ("static", None)
        raise _Untraceable
    raise _Untraceable


def _same_structure(a, b):
    if a is None or b is None:
        return a is b
    if _is_ptr(a):
        return _is_ptr(b)
    if a[0] == "tuple" and b[0] == "tuple" and len(a[1]) == len(b[1]):
        return all(_same_structure(x, y) for x, y in zip(a[1], b[1]))
    return a == b


def _leaf_syms(s):
    if s is None:
        return []
    if _is_ptr(s):
        return [s]
    if s[0] == "tuple":
        return [x for y in s[1] for x in _leaf_syms(y)]
    return []


def _leaf_values(v):
    if v is None:
        return []
    if type(v) is tuple:
        return [x for y in v for x in _leaf_values(y)]
    return [v]


def _layout(a):
    if type(a) is np.ndarray:
        return (a.dtype, a.shape, a.strides)
    return (type(a), getattr(a, "dtype", None))


def _layouts_match(values, want):
    """Per value: has it the layout ``want`` (``_layout``)?  (One comprehension: a
    sweep checks thousands.)"""
    if len(want) == 3:
        if set(map(type, values)) <= {np.ndarray}:      # (the usual case, at C speed)
            dt, shape, strides = want
            key = (strides, shape, dt)
            return [got == key for got in map(_STRIDES_SHAPE_DTYPE, values)]
        nd, (dt, shape, strides) = np.ndarray, want
        return [type(v) is nd and v.strides == strides and v.shape == shape and
                v.dtype == dt for v in values]
    return [_layout(v) == want for v in values]


_STRIDES_SHAPE_DTYPE = operator.attrgetter("strides", "shape", "dtype")


def _same_static(a, b):
    """A value the same every trip: the object itself, a tuple of the same objects,
    or an equal Python number."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if type(a) is tuple:
        return len(a) == len(b) and all(_same_static(x, y) for x, y in zip(a, b))
    if type(a) in (int, float, bool, str):
        return a == b
    return False


class _Trace:
    """What interpreting one trip found: values, symbols, pops, kernel calls."""

    def __init__(self, env):
        self.env = env
        self.sym: dict = {}
        self.leaves: list = []
        self.entering: dict = {}
        self.traced = True
        self.popped: list = []
        self.seq_src: list = []
        self.kernels: list = []
        self.last_row = None


class _Loop(ctypes.Structure):
    _fields_ = [("inv", ctypes.c_void_p), ("seq", ctypes.c_void_p),
                ("carry", ctypes.c_void_p), ("pool", ctypes.c_void_p),
                ("pool_size", ctypes.c_int64), ("fn", ctypes.c_void_p),
                ("lead", ctypes.c_void_p), ("nthreads", ctypes.c_void_p)]


_BACK_HEADER = r"""
typedef struct {
    void **inv;               /* loop-invariant kernel operands */
    char **seq;               /* per-trip operand k of trip s: seq[k * trips + s] */
    char **carry;             /* carried arrays: in before trip 0, out after the last */
    char **pool;              /* kernel result r's buffers: pool[r * pool_size + j] */
    int64_t pool_size;
    void **fn;
    const int64_t **lead;
    const int32_t *nthreads;
} astjax_back;
"""


_GATHER = r"""
#include <stdint.h>
/* the data pointers of n arrays: the word at each object's address + offset */
void astjax_data_pointers(int64_t n, const uint64_t *objects, int64_t offset,
                          uint64_t *out) {
    for (int64_t k = 0; k < n; k++) out[k] = *(const uint64_t *)(objects[k] + offset);
}
"""
_gather = []


def _data_pointers(arrays, out):
    """``out[k]`` = the data pointer of ``arrays[k]`` (exact ndarrays), in one C call
    (``__array_interface__`` costs microseconds an array, a thousand per sweep)."""
    if not _gather:
        f = cc.build(_GATHER, "astjax_data_pointers")
        f.argtypes = (ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p)
        f.restype = None
        _gather.append(f)
    ids = np.array([id(a) for a in arrays], dtype=np.uint64)
    _gather[0](len(arrays), _ptr(ids), DATA_OFFSET, _ptr(out))


class BackSweepDriver:
    """Runs the fast trips of a backward sweep: one interpreted, the rest in C
    (module doc).  Called with (memo, step, stop, tape, ys cotangents, carried...,
    invariants...); returns (ok, ys cotangents, carried...): ok False -- nothing
    ran, the loop's own body runs the trip."""

    def __init__(self, ops, carried, invariants, dys, extra=(), loc=None):
        self.ops = ops
        self.carried = carried
        self.extra = list(extra)     # written, read by other trips: None after a trip
        self.invariants = invariants
        self.dys = dys
        self.loc = loc
        self.__name__ = "back_sweep_driver"
        self.funcs: dict = {}         # C text (per trip structure) -> its function
        self.text = ""
        self.governor = Governor()    # its kernels' threads on a busy machine

    # its C exists once a call has traced a trip (make_source runs the code to show it)
    renders_on_run = True

    def set_name(self, name):
        self.__name__ = name
        self.text = (f"/* {name}: rendered from the first fast trip it traces; no "
                     "call has run one in C yet (a trip's values may leave it to "
                     "Python) */\n")

    def __repr__(self):
        return f"<astjax compiled backward sweep {self.__name__}>"

    @staticmethod
    def skip(memo):
        """Whether the loop skips this trip (the C call ran it)."""
        if memo and type(memo[-1]) is int:
            memo[-1] -= 1
            if memo[-1] == 0:
                memo.pop()
            return True
        return False

    def __call__(self, memo, step, stop, tape, dys, *args):
        nc = len(self.carried)
        names = self.carried + self.extra
        decline = (False, dys, *args[:nc], *[None] * len(self.extra))
        if (memo and memo[-1] == "python") or DATA_OFFSET is None or \
                type(tape) is not list or type(step) is not int or type(stop) is not int \
                or (self.dys is not None and dys is not None and type(dys) is not list):
            return decline
        env = dict(zip(self.invariants, args[nc:]))
        env.update(zip(self.carried, args[:nc]))
        if self.dys is not None:
            env[self.dys] = dys
        tr = _Trace(env)
        try:
            tr.entering = {n: _sym_of_entering(env[n], tr.leaves, n) for n in self.carried
                           if n != self.dys}
        except _Untraceable:
            tr.traced = False
        if tr.traced:
            tr.sym.update(tr.entering)
        for n in self.invariants:
            tr.sym[n] = "inv"
        if self.dys is not None:
            tr.sym[self.dys] = None if dys is None else "dys"
        self._run_ops(self.ops, tr, tape)
        out = (True, env.get(self.dys, dys), *[env.get(n) for n in names])
        if not tr.traced:     # (a trip that starts an accumulator from None makes
            self._warm(memo)  # zeros: the trips after it may trace)
            return out
        m = self._compile_and_run(memo, env, tr.sym, tr.entering, tr.leaves, tr.popped,
                                  tr.seq_src, tr.kernels, tape, stop - step - 1,
                                  tr.last_row)
        if m is None:
            return out
        return (True, env.get(self.dys, dys), *[env.get(n) for n in names])

    def _run_ops(self, ops, tr, tape):
        """The trip's statements as the body runs them, each value followed by its
        symbol (``tr``); a branch on None-ness follows the branch the values take."""
        env, sym = tr.env, tr.sym
        for op in ops:
            kind, t = op[0], op[1]
            s = None
            if kind == "if":
                self._run_ops(op[2] if env[op[1]] else op[3], tr, tape)
                continue
            if kind == "pop":
                v = rt.pop(tape)
                tr.popped.append(v)
                if type(v) is np.ndarray or isinstance(v, np.generic) or type(v) is float:
                    tr.seq_src.append(("pop", len(tr.popped) - 1))
                    s = ("seq", len(tr.seq_src) - 1)
                else:
                    s = ("static", len(tr.popped) - 1)
            elif kind == "not_none":
                v = env[op[2]] is not None
                s = ("static", None)
            elif kind == "kernel":
                vals = [env[a.name] if isinstance(a, Var) else a.value for a in op[3]]
                v = op[2](*vals)
                if tr.traced:
                    ops_syms = [None if isinstance(a, Const) else sym.get(a.name, _NOSYM)
                                for a in op[3]]
                    tr.kernels.append((op, ops_syms, vals))
                    nout = len(op[2].kernel.outputs)
                    k = len(tr.kernels) - 1
                    # (one result: the array itself; several: a tuple taken apart)
                    s = ("out", k, 0) if nout == 1 else \
                        ("results", ("tuple", [("out", k, r) for r in range(nout)]))
            elif kind == "item":
                v = env[op[2]][op[3]]
                if tr.traced:
                    src = sym.get(op[2])
                    if isinstance(src, tuple) and src[0] == "results":
                        src = src[1]
                    if isinstance(src, tuple) and src[0] == "tuple" and \
                            0 <= op[3] < len(src[1]):
                        s = src[1][op[3]]
                    else:
                        tr.traced = False
            elif kind == "copy":
                a = op[2]
                v = env[a.name] if isinstance(a, Var) else a.value
                s = sym.get(a.name, _NOSYM) if isinstance(a, Var) else None
                if s is _NOSYM:
                    tr.traced = False
            else:                                            # helper
                name, operands = op[2], op[3]
                vals = [env[a.name] if isinstance(a, Var) else a.value for a in operands]
                if name == "drop_last_cotangent":
                    v = rt.drop_last_cotangent(vals[0])
                    s = "dys"
                elif name == "last_cotangent":
                    v = rt.last_cotangent(vals[0])
                    if tr.traced and tr.last_row is None and (
                            type(v) is np.ndarray or isinstance(v, np.floating)):
                        tr.last_row = v
                        tr.seq_src.append(("dys", 0))
                        s = ("seq", len(tr.seq_src) - 1)
                    else:
                        tr.traced = False
                else:
                    v = _HELPERS[name](*vals)
                    if tr.traced:
                        syms = [None if isinstance(a, Const) else sym.get(a.name, _NOSYM)
                                for a in operands]
                        if _NOSYM in syms:
                            tr.traced = False
                        elif name == "cot_or_zero" and syms[0] is None and \
                                type(v) is np.ndarray:
                            s = _ZEROS     # -0.0 made this trip: read-only from here
                        else:
                            try:
                                s = _helper_sym(name, syms, vals)
                            except _Untraceable:
                                tr.traced = False
            if t is not None:
                env[t] = v
                sym[t] = s


    # ---------------------------------------------------------------------- C side

    def _compile_and_run(self, memo, env, sym, entering, leaves, popped, seq_src,
                         kernels, tape, remaining, last_row):
        """Runs the fast trips that follow in C; their number, or None."""
        carried = [n for n in self.carried if n != self.dys]
        # the loop index: read as it entered, restored by a pop of an int (its pop k)
        ints = {}
        for n in carried:
            x = sym.get(n)
            if entering[n] == ("int", n):
                # (its pop differs per trip: nothing but the next trip may read it)
                if not (isinstance(x, tuple) and x[0] == "static" and x[1] is not None
                        and type(popped[x[1]]) is int and
                        _only_restored(self.ops, n)):
                    self._warm(memo)
                    return None
                ints[n] = x[1]
        carried = [n for n in carried if n not in ints]
        # the trip left its carries as it found them
        exit_syms = {n: sym.get(n) for n in carried}
        for n in carried:
            if not _same_structure(entering[n], exit_syms[n]):
                self._warm(memo)
                return None
        for n in self.extra:        # (the value the interpreted trip left is the last's)
            s = sym.get(n)
            if not (s is None or s == "inv" or (isinstance(s, tuple) and s[0] == "static")):
                memo.append("python")
                return None
        new_leaves = [x for n in carried for x in _leaf_syms(exit_syms[n])]
        exit_vals = [x for n in carried for x in _leaf_values(env[n])]
        if len(new_leaves) != len(leaves) or len(exit_vals) != len(leaves) or \
                [_layout(a) for a in exit_vals] != [_layout(a) for a in leaves] or \
                not all(type(a) is np.ndarray for a in exit_vals):
            self._warm(memo)
            return None
        if numpy_raises() or remaining < MIN_STEPS:
            memo.append("python")
            return None
        # the fast trips that follow, checked against this one's values
        dys = env.get(self.dys) if self.dys is not None else None
        ntrip = 1 + len(popped)
        top, m = len(tape), 0
        lay = [_layout(v) if type(v) is np.ndarray or isinstance(v, np.generic) or
               type(v) is float else None for v in popped]
        want_row = last_row is not None
        row_layout = _layout(last_row) if want_row else None
        # (columns: the value a pop gives in each trip that follows, nearest first)
        m = min(remaining, top // ntrip)
        seg = tape[top - ntrip * m:top]
        cols = []

        def upto(flags, m):
            return flags.index(False) if False in flags[:m] else m
        markers = seg[ntrip - 1::ntrip][::-1]
        m = upto([v is True for v in markers], m)
        for k, v0 in enumerate(popped):
            col = seg[ntrip - 2 - k::ntrip][::-1][:m]
            if lay[k] is not None:
                m = upto(_layouts_match(col, lay[k]), m)
            elif k in ints.values():
                m = upto([type(v) is int for v in col], m)
            else:
                m = upto([_same_static(v, v0) for v in col], m)
            cols.append(col)
        rows = []
        if want_row:
            rows = dys[max(len(dys) - m, 0):][::-1]
            m = upto(_layouts_match(rows, row_layout), min(m, len(rows)))
        if m < MIN_STEPS:
            memo.append("python")
            return None
        # the index each trip reads: the traced trip's pop, then each trip's
        index_vals = {("int", n): [popped[k]] + cols[k][:m - 1] for n, k in ints.items()}
        got = self._run_c(kernels, leaves, new_leaves, exit_vals, seq_src, cols, rows, m,
                          index_vals)
        if got is None:
            memo.append("python")
            return None
        finals = got
        del tape[top - ntrip * m:]
        if want_row:
            env[self.dys] = dys[:len(dys) - m]
        it = iter(finals)
        for n in carried:
            env[n] = _rebuild(exit_syms[n], it)
        for n, k in ints.items():
            env[n] = cols[k][m - 1]
        memo.append(m)
        STATS["back_sweeps"] += 1
        STATS["back_steps"] += m
        return m

    def _warm(self, memo):
        memo.append("warm-up")
        if sum(1 for x in memo if x == "warm-up") >= 4:
            memo.append("python")

    def _run_c(self, kernels, leaves, new_leaves, exit_vals, seq_src, cols, rows, m,
               index_vals=None):
        """``index_vals``: the loop index's value in each trip, by its symbol."""
        keep, plan_ids = [], []           # (the plans: what sets a trip's cost)
        fns, leads, threads, inv, pools_of, calls = [], [], [], [], [], []
        seq_kind = {}                     # seq index -> dtype it is passed as (scalars)
        seq_src = list(seq_src)           # (and the index's: ("index", its symbol))
        for op, syms, vals in kernels:
            kc = op[2]
            plan = kc.plan_of(vals)
            if plan is None or plan[7] is None or plan[5]:
                return None
            keep.append(plan)
            plan_ids.append(id(plan))
            conv = dict(plan[2])
            operands = []
            for j, (s, value) in enumerate(zip(syms, vals)):
                if index_vals and s in index_vals:    # a per-trip int64, by pointer
                    ivals = index_vals[s]
                    if conv.get(j) != np.int64 or \
                            not kc.takes_any_int(vals, j, min(ivals), max(ivals)):
                        return None
                    if ("index", s) not in seq_src:
                        seq_src.append(("index", s))
                    k = seq_src.index(("index", s))
                    seq_kind[k] = conv[j]
                    operands.append(("seq", k))
                    continue
                if _is_ptr(s):
                    if type(value) is np.ndarray:
                        if j in conv:
                            return None
                    elif isinstance(value, np.generic) and j in conv and \
                            value.dtype == conv[j] and value.dtype.kind in "fc" and \
                            s[0] == "seq":          # (an integer's plan is its value's)
                        seq_kind[s[1]] = conv[j]
                    elif type(value) is float and conv.get(j) == np.float64 and \
                            s[0] == "seq":          # (a Python float's, any float's)
                        seq_kind[s[1]] = conv[j]
                    else:
                        return None
                    operands.append(s)
                elif not (s == "inv" or s == _ZEROS or
                          (isinstance(s, tuple) and s[0] == "static")):
                    return None
                else:                          # invariant, the same every trip
                    if type(value) is np.ndarray:
                        if j in conv:
                            return None
                        inv.append(_ptr(value))
                        keep.append(value)
                    elif j in conv:
                        box = np.array(value, dtype=conv[j])
                        keep.append(box)
                        inv.append(_ptr(box))
                    else:
                        return None
                    operands.append(("inv", len(inv) - 1))
            calls.append(operands)
            # arrays popped from the tape: cold rows, fetched a row ahead
            taped = tuple(j for j, (s, value) in enumerate(zip(syms, vals))
                          if _is_ptr(s) and s[0] == "seq" and seq_src[s[1]][0] == "pop"
                          and type(value) is np.ndarray)
            entry = plan_entry(kc, plan, keep, (taped, ()))
            for got, into in zip(entry, (fns, leads, threads, pools_of)):
                into.append(got)
        for s in new_leaves:
            if s[0] not in ("out", "carry", "seq"):
                return None
        # the per-trip operands of the m trips that follow
        seq_ptrs = np.zeros((max(len(seq_src), 1), m), dtype=np.uint64)
        for k, (kind, idx) in enumerate(seq_src):
            vals = cols[idx][:m] if kind == "pop" else \
                index_vals[idx] if kind == "index" else rows[:m]
            if k in seq_kind:
                box = np.array(vals, dtype=seq_kind[k])
                keep.append(box)
                seq_ptrs[k] = _ptr(box) + np.arange(m, dtype=np.uint64) * box.itemsize
            else:
                if set(map(type, vals)) != {np.ndarray}:
                    return None
                row = np.empty(m, np.uint64)
                _data_pointers(vals, row)
                seq_ptrs[k] = row
        text = self._render([k[0] for k in kernels], calls, new_leaves, len(leaves))
        func = self.funcs.get(text)
        if func is None:
            func = cc.build(C_HEADER + _BACK_HEADER + text, _cvar(self.__name__))
            func.argtypes = (ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                             ctypes.POINTER(_Loop))
            func.restype = ctypes.c_int
            self.funcs[text] = func
            self.text = C_HEADER + _BACK_HEADER + text
        pool_size = len(leaves) + 1
        carried_outs = {s for s in new_leaves if s[0] == "out"}
        pool = []
        for k, results in enumerate(pools_of):
            for r, (shape, dt) in enumerate(results):
                if ("out", k, r) in carried_outs:
                    pool += [spare_buffer(self, shape, dt) for _ in range(pool_size)]
                else:
                    pool += [spare_buffer(self, shape, dt)] * pool_size
        carries = list(exit_vals)
        t_inv, t_carry, t_pool = _pointers(inv), _pointers([_ptr(c) for c in carries]), \
            _pointers([_ptr(b) for b in pool])
        t_fn, t_lead = _pointers(fns), _pointers(leads)
        nthreads = np.array(threads or [1], dtype=np.int32)
        loop = _Loop(inv=t_inv[1], seq=_ptr(seq_ptrs), carry=t_carry[1], pool=t_pool[1],
                     pool_size=pool_size, fn=t_fn[1], lead=t_lead[1],
                     nthreads=_ptr(nthreads))
        if self.governor.run(lambda first, last, lp: func(m, first, last, lp), 0, m,
                             ctypes.byref(loop), nthreads, (text, tuple(plan_ids))):
            raise RuntimeError(f"astjax: the compiled backward sweep {self.__name__} failed")
        finals = []
        known = {}                    # address -> arrays there (pool, carries)
        for a in list(pool) + carries:
            known.setdefault(_ptr(a), []).append(a)
        for j, p in enumerate(t_carry[0][:len(carries)]):
            want = _layout(leaves[j])
            got = next((a for a in known.get(int(p), ()) if _layout(a) == want), None)
            if got is None and any(s[0] == "seq" for s in new_leaves):
                # (a trip's own operand passed along: found by its address in the table)
                for k, (kind, idx) in enumerate(seq_src):
                    if kind == "index":
                        continue
                    at = np.flatnonzero(seq_ptrs[k] == p)
                    vals = cols[idx][:m] if kind == "pop" else rows[:m]
                    got = next((vals[t] for t in at if type(vals[t]) is np.ndarray and
                                _layout(vals[t]) == want), None)
                    if got is not None:
                        break
            if got is None:
                raise RuntimeError("astjax: a carried cotangent of the compiled backward "
                                   "sweep was lost")
            finals.append(got)
        del keep
        return finals

    def _render(self, kernel_ops, calls, new_leaves, ncarry):
        """The C loop of the trips: the kernel calls on pointers."""
        name = _cvar(self.__name__)
        where = f"{self.loc.filename.rsplit('/', 1)[-1]}:{self.loc.lineno}" \
            if self.loc else "a loop"
        out = [f"/* the backward sweep of {where}: its fast trips' kernel calls */",
               f"int {name}(int64_t trips, int64_t first, int64_t last, "
               "astjax_back *L) {"]
        emit = out.append
        for j in range(ncarry):
            emit(f"    char *carry_{j} = L->carry[{j}];")
        emit("    for (int64_t s = first; s < last; s++) {")
        emit(f"        char *const live[{max(ncarry, 1)}] = "
             f"{{{', '.join(f'carry_{j}' for j in range(ncarry)) or '0'}}};")
        names = {("carry", j): f"carry_{j}" for j in range(ncarry)}
        pool_base = 0
        for k, (op, operands) in enumerate(zip(kernel_ops, calls)):
            kc = op[2]
            nout = len(kc.kernel.outputs)
            emit(f"        /* {kc.kernel.name} */")
            outs = []
            for r in range(nout):
                c = f"out_{k}_{r}"
                names[("out", k, r)] = c
                outs.append(c)
                emit(f"        char *{c} = astjax_free(L->pool + {pool_base + r} * "
                     f"L->pool_size, L->pool_size, live, {ncarry});")
            pool_base += nout
            args = []
            for s in operands:
                if s[0] == "inv":
                    args.append(f"L->inv[{s[1]}]")
                elif s[0] == "seq":
                    args.append(f"L->seq[{s[1]} * trips + s]")
                else:
                    args.append(names[s])
            args += outs
            emit(f"        {{   void *ptrs[{len(args)}] = {{{', '.join(args)}}};")
            emit_kernel_call(emit, k, kc.indexed)
        nxt = []
        for s in new_leaves:
            nxt.append(f"L->seq[{s[1]} * trips + s]" if s[0] == "seq" else names[s])
        emit_step_end(emit, nxt, ncarry)
        return "\n".join(out) + "\n"


def _rebuild(s, it):
    if s is None:
        return None
    if _is_ptr(s):
        return next(it)
    return tuple(_rebuild(x, it) for x in s[1])
