"""Fusion: a chain of elementwise statements becomes one group, run as one call.

``poly = x + x*x + x*x*x`` is four ufunc calls over the whole array.  The pass
gathers such chains (statements connected through the values they make, or reading
the same operand) into a *group*: a block function holding the chain's statements,
whose results are written through ``out=`` parameters, and one call

    poly = run_fused(poly_group, ((0,),), 4, x)

``astjax/runtime_fusion.py`` runs the group on the whole arrays, or, when the arrays
are large, as cache-sized row blocks spread over all cores.  The same groups are the
fusion plan a compiled backend renders as one kernel each.

What the pass checks statically:
* members are plain elementwise ufunc calls (``is_plain_ufunc``) on names and numbers;
* statements between members move above the group only when that cannot change a
  value: pure (or tape pushes), reading nothing the group wrote so far, writing
  nothing it read or wrote;
* results are the group's names live after it (``analysis.liveness``); the others
  are block-local temporaries;
* an operator result is written with ``out=`` only when an operand is surely a NumPy
  value (so ``a + b`` cannot be list concatenation) and the operator is not ``**``
  (whose scalar fast paths ``np.power`` lacks): otherwise the block computes it as
  written and copies it into the output (``store``);
* a donated parameter (jit's ``donate_argnums``) read by one top-level group only may
  lend its memory to a result written after its last read (``reuse=``).

Groups of one cheap statement are left alone (the call would cost more than it can
save), except, for compiled kernels, a reduction in a loop body: as a kernel it lets
the loop run as one compiled loop (``kernels/loops.py``).  The buffer-reuse pass then
runs on each block function as on the main code.
"""
from __future__ import annotations

from collections import Counter

from astjax import core
from astjax.core import Const, External, Index, Prim, Var
from astjax.passes import analysis as A

RUNTIME_ONLY = True   # run-time dispatch: not for code transformations read
FINAL = True   # runs once, after the fixpoint of the other passes, before ``buffers``

# Work per element of one statement, relative to a float32 addition (measured with
# NumPy 2.4: divide 1.3x, tanh 2.5x, sqrt 4x, exp 5x); the run time multiplies the
# group's total by the array size to decide whether blocking on threads pays.
_WEIGHTS = {
    "divide": 2, "floor_divide": 4, "remainder": 4, "fmod": 4, "power": 8,
    "float_power": 8, "arctan2": 8, "hypot": 3, "logaddexp": 8, "logaddexp2": 8,
    "sqrt": 4, "cbrt": 6, "reciprocal": 2,
}
_TRANSCENDENTAL = 5
_TRANSCENDENTAL_NAMES = frozenset({
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
    "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh"})
# A lone statement is fused when it costs at least this much (tanh, exp, ...).
_LONE_MIN_WEIGHT = 3
# How far past a member the pass looks for the next one.
_LOOKAHEAD = 8

_NUMBERS = (int, float, complex, bool)


def weight(prim_name: str) -> int:
    if prim_name in _TRANSCENDENTAL_NAMES:
        return _TRANSCENDENTAL
    return _WEIGHTS.get(prim_name, 1)


def _member(s) -> bool:
    """A statement a group may hold: a plain ufunc call on names and numbers."""
    if not (A.is_plain_ufunc(s) and s.target):
        return False
    n = A.prim_entry(s.prim).impl.nin
    return all(isinstance(a, Var) or (isinstance(a, Const) and type(a.value) in _NUMBERS)
               for a in s.args[:n])


def _operands(s) -> list:
    """The elementwise operands of member ``s`` (a ufunc's inputs; ``where``'s
    condition and branches; ``clip``'s array and bounds)."""
    if s.prim == "where":
        return list(s.args[:3])
    if s.prim == "clip":
        a, a_min, a_max, _, lo, hi = s.args
        return [a, a_min if _given(a_min) else lo, a_max if _given(a_max) else hi]
    if s.prim == "place_at":           # the block, the array shaped like the result,
        return [s.args[0], s.args[1]] + [   # then names its index reads
            Var(n) for n in core.atom_vars([s.args[2]])]
    if s.prim == "unreduce":           # the scalar, the array shaped like the result
        return list(s.args[:2])
    if s.prim in _INDEXED_PRIMS:       # the array, then names a basic index reads
        extra = [a for a in s.args[1].atoms() if isinstance(a, Var)] \
            if s.prim == "getitem" else []
        return [s.args[0]] + extra
    return list(s.args[:A.prim_entry(s.prim).impl.nin])


def _given(a) -> bool:
    return not (isinstance(a, Const) and a.value is None)


def _kernel_member(s) -> bool:
    """What a compiled backend's kernels also compute elementwise: ``np.where`` with
    both branches, ``np.clip`` with both bounds (``run(..., kernels=True)``)."""
    if _member(s):
        return True
    if not (isinstance(s, Prim) and s.target and not s.kwargs):
        return False
    if s.prim == "where":
        ok = len(s.args) == 3
    elif s.prim == "clip":
        ok = len(s.args) == 6 and not _given(s.args[3]) and \
            not (_given(s.args[1]) and _given(s.args[4])) and \
            not (_given(s.args[2]) and _given(s.args[5]))
    else:
        return False
    return ok and all(isinstance(a, Var) or (isinstance(a, Const) and type(a.value) in
                                             _NUMBERS) for a in _operands(s))


# what a compiled kernel also fuses, beyond elementwise (kernels/ir.py): basic
# indexing, transposes, np.pad, astype, reductions that end a group, and the
# cotangents of reductions (a placed block; a full reduction's scalar spread)
_VIEWS = frozenset({"getitem", "transpose"})          # their results share memory
_INDEXED_PRIMS = frozenset({"getitem", "transpose", "pad", "astype", "sum", "mean",
                            "max", "min", "place_at", "unreduce"})
_REDUCTIONS = frozenset({"sum", "mean", "max", "min"})
# Work, in operation weights, a group may redo per element to read a value it made
# at shifted indices (``p[1:] - p[:-1]`` of a computed ``p``): beyond it, the value
# is left to be materialized by the group before (XLA: recompute when cheap).
RECOMPUTE_LIMIT = 48


def _const_int(a) -> bool:
    return isinstance(a, Const) and type(a.value) is int


def _index_item(it):
    """A basic index item as ``ir.Slice`` wants it, or None (fancy, bool, ...)."""
    def bound(b):
        if b is None:
            return None
        if isinstance(b, Var):
            return b.name
        if _const_int(b):
            return b.value
        if isinstance(b, Const) and b.value is None:
            return None
        raise ValueError
    try:
        if isinstance(it, core.SliceAtom):
            return ("slice", bound(it.lower), bound(it.upper), bound(it.step))
        if it is None or (isinstance(it, Const) and it.value is None):
            return ("newaxis",)
        if it is Ellipsis or (isinstance(it, Const) and it.value is Ellipsis):
            return ("ellipsis",)
        if isinstance(it, Var) or _const_int(it):
            return ("index", bound(it))
    except ValueError:
        return None
    return None


def _dtype_of(a, env):
    """The dtype a constant ``astype`` argument names, or None."""
    if isinstance(a, Const):
        value = a.value
    elif isinstance(a, Var) and getattr(env, "entries", {}).get(a.name, ("",))[0] == "value":
        value = env.entries[a.name][1]
    else:
        return None
    try:
        import numpy as np
        return np.dtype(value)
    except TypeError:
        return None


def _constant(a, consts):
    """``a``, or the constant a name holds (``consts``: name -> Const of names assigned
    once, from a constant: LICM hoists ``((0, 1), (0, 0))`` out of loops)."""
    if isinstance(a, Var) and consts and a.name in consts:
        return consts[a.name]
    return a


def constant_names(fn) -> dict:
    """Names assigned exactly once in ``fn``, from a constant (a tuple of constants)."""
    writers: dict = {}
    for s in core.walk(fn.body):
        for n in core.writes(s):
            writers.setdefault(n, []).append(s)
    out = {}
    for name, ws in writers.items():
        if len(ws) != 1 or name in fn.params:
            continue
        s = ws[0]
        if isinstance(s, core.Copy) and isinstance(s.value, Const):
            out[name] = s.value
        elif isinstance(s, Prim) and s.prim == "make_tuple" and not s.kwargs and \
                len(s.args) == 1 and isinstance(s.args[0], (tuple, list)):
            items = [_constant(a, out) for a in s.args[0]]
            if all(isinstance(a, Const) for a in items):
                out[name] = Const(tuple(a.value for a in items))
    return out


def indexed_node(s, env=None, consts=None):
    """The ``kernels/ir.py`` statement for an indexing, padding, transposing, casting
    or reducing statement ``s``, or None when a kernel cannot compute it."""
    from astjax.kernels import ir
    if not (isinstance(s, Prim) and s.target and not s.kwargs and s.prim in _INDEXED_PRIMS
            and s.args and isinstance(s.args[0], Var)):
        return None
    src, args, loc = s.args[0].name, s.args, s.loc
    if s.prim == "getitem":
        if len(args) != 2 or not isinstance(args[1], core.Index):
            return None
        items = [_index_item(it) for it in args[1].items]
        if any(it is None for it in items):
            return None
        return ir.Slice(s.target, src, tuple(items), loc)
    if s.prim == "place_at":
        # (``rt.place_at`` of a fast backward trip: the cotangent of a row or block)
        if len(args) != 4 or not isinstance(args[1], Var) or not isinstance(args[3], Const):
            return None
        if isinstance(args[2], core.Index):
            items = [_index_item(it) for it in args[2].items]
        elif isinstance(args[2], Var) or _const_int(args[2]):
            items = [_index_item(args[2])]      # (one integer: a row)
        else:
            return None
        if any(it is None or it[0] == "newaxis" for it in items) or \
                type(args[3].value) is not float:
            return None
        return ir.Place(s.target, src, tuple(items), args[1].name, args[3].value, loc)
    if s.prim == "unreduce":
        # (the cotangent of a reduction over every axis: its 0-d ``t`` at every index
        # of an array shaped like ``x``; the other forms reshape)
        if not (2 <= len(args) <= 4 and isinstance(args[1], Var) and
                all(isinstance(a, Const) for a in args[2:]) and
                [a.value for a in args[2:]] == [None, False][:len(args) - 2]):
            return None
        return ir.Broadcast(s.target, src, args[1].name, loc)
    if s.prim == "transpose":
        args = [args[0]] + [_constant(a, consts) for a in args[1:]]
        if len(args) != 2 or not isinstance(args[1], Const):
            return None
        axes = args[1].value
        if axes is not None and not (isinstance(axes, tuple) and
                                     all(type(a) is int for a in axes)):
            return None
        return ir.Transpose(s.target, src, axes, loc)
    if s.prim == "pad":
        args = [args[0]] + [_constant(a, consts) for a in args[1:]]
        if len(args) != 4 or not all(isinstance(a, Const) for a in args[1:]):
            return None
        widths, mode, value = args[1].value, args[2].value, args[3].value
        if type(widths) is int:
            widths = ((widths, widths),)
        elif isinstance(widths, tuple) and widths and all(type(w) is int for w in widths):
            widths = (tuple(widths),) if len(widths) == 2 else None
        elif not (isinstance(widths, tuple) and all(
                isinstance(w, tuple) and len(w) == 2 and all(type(x) is int for x in w)
                for w in widths)):
            widths = None
        if widths is None or mode not in ("constant", "edge") or \
                type(value) not in (int, float, bool):
            return None
        return ir.Pad(s.target, src, tuple(widths), mode, value, loc)
    if s.prim == "astype":
        if len(args) != 6 or [a.value if isinstance(a, Const) else a for a in args[2:]] \
                != ["K", "unsafe", True, True]:
            return None
        dt = _dtype_of(args[1], env)
        if dt is None:
            return None
        return ir.Cast(s.target, src, dt.str, loc)
    # reductions: (a, axis, dtype, out, keepdims) or (a, axis, out, keepdims)
    axis, keepdims = args[1], args[-1]
    rest = args[2:-1]
    if not (isinstance(axis, Const) and isinstance(keepdims, Const) and
            type(keepdims.value) is bool and
            all(isinstance(a, Const) and a.value is None for a in rest)):
        return None
    ax = axis.value
    if not (ax is None or type(ax) is int or
            (isinstance(ax, tuple) and all(type(a) is int for a in ax))):
        return None
    return ir.Reduce(s.target, src, s.prim, ax, keepdims.value, loc)


def _movable(s, written, read) -> bool:
    """May ``s`` run before the group's members so far (it sits between two of them)?"""
    if not isinstance(s, (Prim, core.Copy)):
        return False
    if isinstance(s, Prim) and not (A.is_pure(s) or s.prim == "push"):
        return False
    if set(core.reads(s)) & written:
        return False
    return not (A.effects(s) & (written | read))


# Statements whose result is a NumPy array (or NumPy scalar) whatever they are given
# (a list or a Python number is converted with np.asarray first; an array-like type
# answering NumPy's protocols gives its own array, which indexes as NumPy's do), and
# those whose result is one when their first operand is (astjax's ``zeros_like``
# gives 0.0 for a Python float).
_ALWAYS_NUMPY = frozenset({"pad", "transpose", "reshape", "astype", "zeros", "ones",
                           "empty", "full", "array", "asarray", "concatenate", "stack",
                           "np_zeros_like", "np_ones_like", "empty_like", "full_like",
                           "copy", "clip"})
_NUMPY_IF_FIRST = frozenset({"zeros_like", "ones_like"})
_TOP = "top"            # the fixpoint's start: no writer has said otherwise yet
_NP = "numpy"           # surely a NumPy array or scalar
_TUPLE_DEPTH = 4


def _meet(a, b):
    """What a name holds when two writers give ``a`` and ``b``."""
    if a == _TOP:
        return b
    if b == _TOP or a == b:
        return a
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return tuple(_meet(x, y) for x, y in zip(a, b))
    return None


def _depth(state) -> int:
    return 1 + max(map(_depth, state), default=0) if isinstance(state, tuple) else 0


class _NumpyValues:
    """Names whose every assignment surely makes a NumPy array or scalar.

    Each name gets a state: ``"numpy"``, a tuple of item states (``carry = (zero,
    zero)``, so ``carry[1]`` is known), or None (unknown: a list, a Python number,
    anything).  The states are a greatest fixpoint: every name written in ``fn``
    starts optimistic and is lowered until each writer's result, computed from the
    states of what it reads, agrees.  That is sound by induction over the run: a
    value is made by a writer from values made before it, so if every writer makes a
    NumPy value from NumPy values, every value is one.  Parameters start as what the
    caller passes: NumPy only for jit's exact-ndarray arguments (``arg_dtypes``).
    It is what lets ``pressure_present = carry[1]`` in a ``lax.scan`` body fuse
    into kernels, while ``ys[:-1]`` of a list stays Python's slice.
    """

    def __init__(self, fn, arg_dtypes):
        self.writers: dict = {}
        for s in core.walk(fn.body):
            for n in core.writes(s):
                self.writers.setdefault(n, []).append(s)
        self.params = set(fn.params)
        given = set(arg_dtypes or ())
        self.state = {p: (_NP if p in given else None) for p in self.params}
        for n, ws in self.writers.items():
            if n not in self.params:     # a global updated in place only: unknown
                self.state[n] = None if all(
                    isinstance(s, core.SetItem) for s in ws) else _TOP
        changed = True
        rounds = 0
        while changed and rounds < 200:
            changed = False
            rounds += 1
            for n, ws in self.writers.items():
                old = self.state.get(n)
                if old is None:
                    continue
                new = old
                for s in ws:
                    new = _meet(new, self.made(s, n))
                    if new is None:
                        break
                if new is not None and _depth(new) > _TUPLE_DEPTH:
                    new = None
                if new != old:
                    self.state[n] = new
                    changed = True
        if changed:                        # no fixpoint in time: trust nothing
            self.state = {n: None for n in self.state}
        self.known = {n for n, st in self.state.items() if st in (_NP, _TOP)}

    def __contains__(self, name) -> bool:
        return name in self.known

    def _of(self, a):
        return self.state.get(a.name) if isinstance(a, Var) else None

    def made(self, s, name):
        """The state of what ``s`` writes into ``name``, from the current states."""
        if isinstance(s, core.SetItem):
            return _TOP                    # in place: the value keeps its type
        if isinstance(s, core.Copy):
            return self._of(s.value)
        if not isinstance(s, Prim) or s.kwargs:
            return None
        if s.prim == "make_tuple":
            if len(s.args) == 1 and isinstance(s.args[0], (tuple, list)):
                return tuple(self._of(a) for a in s.args[0])
            return None
        if s.prim == "getitem":
            return self._item(s)
        entry = A.prim_entry(s.prim)
        if entry is None or A.out_operand(s) is not None:
            return None
        first = s.args[0] if s.args else None
        if A.is_ufunc_prim(s.prim):
            if not entry.operator:
                return _NP
            ok = any(self._of(a) in (_NP, _TOP) for a in s.args[:entry.impl.nin])
            return _NP if ok else None
        if s.prim in _ALWAYS_NUMPY:
            return _NP
        if s.prim in _NUMPY_IF_FIRST:
            return _NP if self._of(first) in (_NP, _TOP) else None
        if s.prim == "where" and len(s.args) == 3:
            return _NP
        mod = getattr(entry.impl, "__module__", "") or ""
        if entry.kind in ("reduction", "linalg") and mod.startswith("numpy") and \
                not entry.operator and s.prim != "einsum":
            return _NP
        return None

    def _item(self, s):
        """``t[k]`` of a tuple state, or a basic slice of a NumPy value (an array:
        an integer-only index of an object array could give anything)."""
        if len(s.args) != 2 or not isinstance(s.args[1], Index):
            return None
        src = self._of(s.args[0])
        items = s.args[1].items
        if isinstance(src, tuple):
            if len(items) == 1 and _const_int(items[0]) and \
                    -len(src) <= items[0].value < len(src):
                return src[items[0].value]
            return None
        if src in (_NP, _TOP):
            kinds = [_index_item(it) for it in items]
            if kinds and all(k is not None for k in kinds) and \
                    any(k[0] != "index" for k in kinds):
                return _NP
        return None


class _Tentative:
    """A member statement met between two members of a group, unconnected to it yet."""
    __slots__ = ("stmt", "at", "late")

    def __init__(self, stmt, at):
        self.stmt = stmt
        self.at = at              # its index in the block
        self.late = False         # a member not reading it joined the group after it


def _writes_within(s) -> set:
    """Every name ``s`` or a statement nested in it writes."""
    return {n for t in core.walk([s]) for n in core.writes(t)}


def _feeding(members, outputs) -> set:
    """Ids of the last of ``members`` (a reduction) and of the members only it reads,
    through others only it reads, that are not ``outputs``: the chain that can end a
    group of its own (``x * x`` of ``np.sum(x * x)`` beside ``x``)."""
    chain = {id(members[-1])}
    readers: dict = {}
    for m in members:
        for n in set(core.reads(m)):
            readers.setdefault(n, set()).add(id(m))
    for m in reversed(members[:-1]):
        got = readers.get(m.target)
        if m.target not in outputs and got and got <= chain:
            chain.add(id(m))
    return chain


_INT_ARITHMETIC = frozenset({"add", "subtract", "multiply"})


def python_ints(fn) -> set:
    """Names that surely hold a Python int: ``for i in range(...)`` targets,
    ``rt.scan_length``'s result, copies and ``+ - *`` of them and integer constants
    (a greatest fixpoint over every writer).  ``n_steps - 1 - i`` of a reversed scan
    is Python's arithmetic: no kernel computes it (a kernel of numbers falls back to
    NumPy on every call, and a loop whose step calls it cannot compile)."""
    writers: dict = {}
    for s in core.walk(fn.body):
        for n in core.writes(s):
            writers.setdefault(n, []).append(s)
    ints = set(writers) - set(fn.params)

    def int_atom(a):
        return (isinstance(a, Const) and type(a.value) is int) or \
            (isinstance(a, Var) and a.name in ints)

    def makes_int(s, name):
        if isinstance(s, core.For):
            return s.target == name and isinstance(s.iter, Prim) and s.iter.prim == "range"
        if isinstance(s, core.Copy):
            return int_atom(s.value)
        return isinstance(s, Prim) and not s.kwargs and s.target == name and (
            s.prim == "scan_length" or s.prim in _INT_ARITHMETIC and
            len(s.args) in (2, 3) and s.args[2:] in ([], [Const(None)]) and
            all(int_atom(a) for a in s.args[:2]))
    changed = True
    while changed:
        changed = False
        for n in list(ints):
            if not all(makes_int(s, n) for s in writers[n]):
                ints.discard(n)
                changed = True
    return ints


class _Fuser:
    def __init__(self, fn, arg_dtypes, donated=frozenset(), kernels=False):
        from astjax import runtime_fusion
        self.fn = fn
        self.kernels = kernels
        self.member = self._kernel_member if kernels else _member
        self.exclude: set = set()        # statements a group must not hold (ids)
        self.apart: set = set()          # ... until the group being gathered is made
        # names the groups above in the block being fused made (arrays: a kernel's
        # results, not a full reduction's scalar), not written since
        self.made: set = set()
        self.consts = constant_names(fn) if kernels else {}
        self.donated = frozenset(donated) & set(fn.params)
        self.readers = Counter(n for s in core.walk(fn.body) for n in set(core.reads(s)))
        self.live_after = A.liveness(fn)
        self.numpy = _NumpyValues(fn, arg_dtypes)
        self.ints = python_ints(fn) if kernels else set()
        self.run_ref = fn.env.value_ref(runtime_fusion.run_fused, "run_fused")
        self.store_ref = None
        self.blocks: list = []
        self._fresh = None

    def fresh(self, hint):
        """A new name (``fresh_name`` reserves every used name once, then this is cheap)."""
        if self._fresh is None:
            first = A.fresh_name(self.fn, hint)
            gen = getattr(self.fn.env, "names", None)
            self._fresh = gen.fresh if gen is not None else (
                lambda h: A.fresh_name(self.fn, h))
            return first
        return self._fresh(hint)

    def _kernel_member(self, s) -> bool:
        if id(s) in self.exclude:
            return False
        if _kernel_member(s):
            return True
        if isinstance(s, Prim) and s.prim == "place_at" and isinstance(s.args[2], Var) and \
                not all(isinstance(w, core.For) for w in self.numpy.writers.get(
                    s.args[2].name, ())):
            # an index made in the function may be a slice or a tuple of them (how a
            # basic index reaches a call): only a parameter or a loop index is surely
            # the integer the kernel takes, else the group would fall back every call
            return False
        return indexed_node(s, self.fn.env, self.consts) is not None

    def _array_source(self, s, written) -> bool:
        """An indexed member reads a NumPy array: made in the group, or surely NumPy
        (a tuple's ``carry[0]`` must not make the kernel fall back on every call)."""
        if s.prim not in _INDEXED_PRIMS or s.prim in ("place_at", "unreduce"):
            return True      # (a fast trip's facts made place_at's operands arrays;
            # unreduce reads a scalar: the kernel's types check it is one)
        name = s.args[0].name
        # an unknown value may be a list or a tuple (``carry[1]``, ``ys[:-1]``): its
        # indexing is Python's, never a kernel's; a group above made an array
        return name in written or name in self.made or self._numpy_like(name)

    def _numpy_like(self, name, depth=0) -> bool:
        if name in self.numpy:
            return True
        writers = self.numpy.writers.get(name)
        if not writers or depth > 8:
            return False
        return all(isinstance(w, Prim) and w.prim in _INDEXED_PRIMS and w.args and
                   isinstance(w.args[0], Var) and
                   self._numpy_like(w.args[0].name, depth + 1) for w in writers)

    def block(self, stmts, top=True):
        out = []
        i = 0
        outer, self.made = self.made, set()
        while i < len(stmts):
            s = stmts[i]
            for b in core.child_blocks(s):
                b[:] = self.block(b, top=False)
            if not self.member(s) or (self.kernels and not self._array_source(s, set())):
                out.append(s)
                self.made -= _writes_within(s)
                i += 1
                continue
            members, moved, last = self._gather(stmts, i)
            if self.kernels and all(m.target in self.ints for m in members):
                out.append(s)            # (Python's integer arithmetic: ``python_ints``)
                i += 1
                continue
            if self.kernels:
                views, reductions = self._refused(members, stmts[last])
                if views or reductions:
                    self.exclude |= views | reductions
                    self.apart |= reductions
                    continue
            cost = sum(weight(m.prim) for m in members)
            # (a lone reduction in a loop body is a kernel: the loop compiles whole)
            if len(members) == 1 and cost < _LONE_MIN_WEIGHT and not (
                    self.kernels and not top and members[0].prim in _REDUCTIONS):
                out.append(s)
                i += 1
                continue
            out.extend(moved)
            out.extend(self._group(members, stmts[last], top))
            for m in moved:
                self.made -= _writes_within(m)
            live = self.live_after.get(id(stmts[last]), frozenset())
            self.made |= {m.target for m in members
                          if m.target in live and m.prim not in _REDUCTIONS}
            i = last + 1
            self.exclude -= self.apart       # (a reduction refused beside other
            self.apart.clear()               # results may end a group of its own)
        self.made = outer
        return out

    def _refused(self, members, last_stmt):
        """Members a kernel group cannot hold as gathered (ids): views that are
        results (a kernel makes new arrays: the user's view would become a copy), and
        reductions beside other results."""
        live = self.live_after.get(id(last_stmt), frozenset())
        outputs = {m.target for m in members if m.target in live}
        views = {id(m) for m in members if m.prim in _VIEWS and m.target in outputs}
        reductions = set()
        if len(outputs) > 1:
            for k, m in enumerate(members):
                if m.prim in _REDUCTIONS:
                    reductions |= _feeding(members[:k + 1], outputs)
        return views, reductions

    def _recompute_cost(self, t, costs) -> int:
        """Work per element ``t`` costs when it reads values of the group at other
        indices than its own (each such read recomputes them)."""
        own = weight(t.prim)
        return min(1 << 20, own + sum(costs.get(a.name, 0) for a in _operands(t)
                                      if isinstance(a, Var)))

    def _gather(self, stmts, start):
        """Members from ``stmts[start]`` on, the statements moved above them, and the
        index of the last member."""
        first = stmts[start]
        members, moved, pending, late = [first], [], [], []
        written, read = set(core.writes(first)), set(core.reads(first))
        last = start
        j = start + 1
        costs = {first.target: self._recompute_cost(first, {})}
        while j < len(stmts) and j - last <= _LOOKAHEAD:
            t = stmts[j]
            if self.kernels and members[-1].prim in _REDUCTIONS:
                break                      # a reduction ends its group
            if self.kernels and isinstance(t, Prim) and t.prim == "place_at" and \
                    isinstance(t.args[0], Var) and t.args[0].name in written:
                break                      # (a placement reads an input: kernels/ir.py)
            if self.kernels and self.member(t) and set(core.reads(t)) & (written | read) \
                    and t.prim in _INDEXED_PRIMS and (
                        not self._array_source(t, written) or
                        self._recompute_cost(t, costs) > RECOMPUTE_LIMIT):
                break
            if self.member(t) and set(core.reads(t)) & (written | read):
                if self.kernels:
                    costs[t.target] = self._recompute_cost(t, costs)
                    # an unconnected member this one reads joins the group before it
                    wanted = set(core.reads(t))
                    for p in pending:
                        if isinstance(p, _Tentative) and p.stmt.target in wanted:
                            members.append(p.stmt)
                            if p.late:
                                late.append(p.stmt)
                    pending = [p for p in pending if not isinstance(p, _Tentative) or
                               p.stmt.target not in wanted]
                members.append(t)
                # (an unconnected member waits for a later one that reads it: ``c * 0.9``
                # in ``t = x * dt; c = c * 0.9 + np.sin(t) * y`` joins at the ``+``)
                moved.extend(p for p in pending if not isinstance(p, _Tentative))
                pending = [p for p in pending if isinstance(p, _Tentative)]
                for p in pending:
                    p.late = True
                written |= set(core.writes(t))
                read |= set(core.reads(t))
                last = j
            elif self.kernels and self.member(t) and _movable(t, written, read) and \
                    self._array_source(t, written):
                # a member reading nothing of the group (``amplitude * injection`` in
                # ``... + amplitude * injection``): it joins when a later member reads
                # it, else it moves above the group like any movable statement (so
                # both orders are safe: it counts as written and read from here on)
                costs[t.target] = self._recompute_cost(t, costs)
                pending.append(_Tentative(t, j))
                written |= set(core.writes(t))
                read |= set(core.reads(t))
            elif not self.member(t) and _movable(t, written, read):
                pending.append(t)
            else:
                break
            j += 1
        # unconnected members no later member read: above the group (those after its
        # last member stay where they are); so are those that joined late but are
        # read after the group too (``dt * dt`` a sweep pushes: a result of the group
        # would make the scalar an array)
        moved.extend(p.stmt for p in pending if isinstance(p, _Tentative) and p.at < last)
        if late:
            live = self.live_after.get(id(stmts[last]), frozenset())
            for m in late:
                if m.target in live:
                    members = [x for x in members if x is not m]
                    moved.append(m)
        return members, moved, last

    def _group(self, members, last_stmt, top):
        """The block function for ``members`` and the statements that call it."""
        fn = self.fn
        for m in members:         # constant widths and axes named by a hoisted tuple:
            if m.prim in ("pad", "transpose"):          # the block function says them
                m.args = [m.args[0]] + [_constant(a, self.consts) for a in m.args[1:]]
        live = self.live_after.get(id(last_stmt), frozenset())
        inputs: list = []
        defined: set = set()
        deps: dict = {}
        numpy_now: set = set()
        for m in members:
            d: set = set()
            for a in _operands(m):
                if not isinstance(a, Var):
                    continue
                if a.name in defined:
                    d |= deps[a.name]
                else:
                    if a.name not in inputs:
                        inputs.append(a.name)
                    d.add(inputs.index(a.name))
            deps[m.target] = d
            defined.add(m.target)
        final_write = {m.target: k for k, m in enumerate(members)}
        outputs = [t for t in final_write if t in live]
        outputs.sort(key=lambda t: final_write[t])
        if not outputs:       # nothing of it is used: leave it to dead-code removal
            return list(members)

        out_param = {t: self.fresh(f"{t}_out") for t in outputs}
        body = []
        for k, m in enumerate(members):
            entry = A.prim_entry(m.prim)
            operands = _operands(m)
            known = [a for a in operands if isinstance(a, Var) and (
                a.name in numpy_now or (a.name not in defined and a.name in self.numpy))]
            surely_numpy = not entry.operator or bool(known)
            if surely_numpy:
                numpy_now.add(m.target)
            else:
                numpy_now.discard(m.target)
            if final_write.get(m.target) != k or m.target not in out_param:
                body.append(m)
            elif surely_numpy and entry.operator != "**" and A.is_ufunc_prim(m.prim):
                # (``x ** 0.5`` takes NumPy's sqrt fast path, np.power(x, 0.5) does not)
                body.append(External(m.target, Var(entry.code), operands,
                                     {"out": Var(out_param[m.target])}, loc=m.loc))
            else:
                tmp = self.fresh(f"{m.target}_value")
                body.append(Prim(tmp, m.prim, list(m.args), dict(m.kwargs), loc=m.loc))
                body.append(External(m.target, Var(self._store()),
                                     [Var(out_param[m.target]), Var(tmp)], loc=m.loc))
        ret = outputs[0] if len(outputs) == 1 else self.fresh("results")
        if len(outputs) > 1:
            body.append(Prim(ret, "make_tuple", [[Var(t) for t in outputs]],
                             loc=members[-1].loc))
        body.append(core.Return(Var(ret), loc=members[-1].loc))
        name = self.fresh(f"{outputs[0]}_group")
        block = core.Function(name, inputs + [out_param[t] for t in outputs], body,
                              loc=members[0].loc, source_name=fn.source_name, env=fn.env,
                              defaults={out_param[t]: Const(None) for t in outputs})
        self.blocks.append(block)
        # for kernels/
        block.kernel_plan = _kernel_plan(members, inputs, outputs, fn.env, self.consts)

        dep_const = tuple(tuple(sorted(deps[t])) for t in outputs)
        cost = sum(weight(m.prim) for m in members)
        call_args = [Var(name), Const(dep_const), Const(cost)] + [Var(v) for v in inputs]
        reuse = self._donations(members, inputs, outputs, final_write) if top else ()
        kwargs = {"reuse": Const(reuse)} if reuse else {}
        loc = members[0].loc
        if len(outputs) == 1:
            return [External(outputs[0], Var(self.run_ref), call_args, kwargs, loc=loc)]
        packed = self.fresh(f"{outputs[0]}_results")
        calls = [External(packed, Var(self.run_ref), call_args, kwargs, loc=loc)]
        calls += [Prim(t, "getitem", [Var(packed), Index((Const(k),))], loc=loc)
                  for k, t in enumerate(outputs)]
        return calls

    def _donations(self, members, inputs, outputs, final_write):
        """(result, input) pairs: a donated input whose memory may take the result.

        The input is a donated parameter, never assigned, read by this group only
        (which runs once: it is not in a loop), and the result is written by the last
        member reading it or a later one, so no member reads it after it is overwritten.
        """
        pairs, taken = [], set()
        for i, name in enumerate(inputs):
            if name not in self.donated or name in self.numpy.writers:
                continue
            readers = [k for k, m in enumerate(members) if name in core.reads(m)]
            if self.readers[name] != len(readers):
                continue
            for j, t in enumerate(outputs):
                if j not in taken and final_write[t] >= readers[-1]:
                    pairs.append((j, i))
                    taken.add(j)
                    break
        return tuple(pairs)

    def _store(self):
        if self.store_ref is None:
            from astjax import runtime_fusion
            self.store_ref = self.fn.env.value_ref(runtime_fusion.store, "store")
        return self.store_ref


def _kernel_plan(members, inputs, outputs, env=None, consts=None):
    """The group said without NumPy (``astjax/kernels/ir.py`` builds a kernel from it):
    (inputs, members as (target, ufunc name, operands, operator, location), outputs)."""
    recs = []
    for m in members:
        node = indexed_node(m, env, consts)
        if node is not None:
            recs.append(node)
            continue
        entry = A.prim_entry(m.prim)
        operands = tuple(a.name if isinstance(a, Var) else a.value for a in _operands(m))
        name = entry.impl.__name__ if A.is_ufunc_prim(m.prim) else m.prim
        recs.append((m.target, name, operands, entry.operator or "", m.loc))
    return (tuple(inputs), tuple(recs), tuple(outputs))


def run(fn: core.Function, arg_dtypes: dict | None = None, donated=frozenset(),
        kernels=False) -> bool:
    if not hasattr(fn.env, "value_ref"):
        return False     # a hand-built function without an environment
    f = _Fuser(fn, arg_dtypes, donated, kernels)
    fn.body[:] = f.block(fn.body)
    if not f.blocks:
        return False
    from astjax.passes import buffers
    for b in f.blocks:
        buffers.run(b, straight_line=True)
    fn.helpers.extend(f.blocks)
    return True
