"""Buffer reuse: write an elementwise result into a temporary that just died.

``t = a * b; u = 1.0 - t`` allocates two arrays; ``t`` is read once, so ``u`` can be
computed in place, into ``t``'s memory: ``u = subtract_into(1.0, t)``, where the
helper calls ``np.subtract(1.0, t, out=t)``.  Fewer allocations and a smaller working
set for elementwise chains (tanh and loss adjoints, user arithmetic).

What the pass can prove statically:
* ``t`` is produced in the same block by an elementwise NumPy ufunc (so it is a new
  object nobody else refers to) or by an earlier rewrite of this pass;
* ``t`` is assigned once and read by exactly one statement in the whole function (so
  it is dead afterwards and has no alias); or ``t`` is a donated parameter (jit's
  ``donate_argnums``: the caller gives its memory away) never assigned and read by
  exactly one statement, at the top level of the function (not in a loop);
* the consumer is a plain elementwise ufunc (no ``out=``, not ``**`` whose operator
  form takes NumPy's fast paths, no generalized ufunc like ``@``).

What only the run time knows (shapes and dtypes are not in the source) is checked by
the helper before it reuses the buffer, else it computes exactly what the original
expression computed: the buffer is an exact, writeable ``np.ndarray`` that owns its memory and
has at least ``MIN_SIZE`` elements (smaller arrays are as cheap to allocate, and a
0-d result would be a NumPy scalar), every operand is an exact ndarray, NumPy
scalar or Python number (no ``__array_ufunc__`` overrides, no subclasses), the
ufunc's result dtype for these operands is the buffer's dtype (``resolve_dtypes``,
cached) and the operands broadcast to the buffer's shape.

Measured (NumPy 2.4, one core): ``a = x * y; b = 1.0 - a; c = b * y; d = np.tanh(c)``
on 10^5 float64 elements goes from 1.6 ms to 0.16 ms (fresh pages for every new
array cost more than the arithmetic), on 4*10^6 from 23 ms to 9 ms; below
``MIN_SIZE`` the helper costs about 0.1 us per call.

The helpers are plain functions stored in the function's environment
(``fn.env.value_ref``) and called as ``External`` statements; this pass runs last, on
code no transformation reads again.
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from astjax import core
from astjax.core import Const, External, Prim, Var
from astjax.passes import analysis as A

RUNTIME_ONLY = True   # run-time dispatch: not for code transformations read
FINAL = True   # runs once, after the fixpoint of the other passes

_SCALARS = (int, float, complex, bool)
_ndarray = np.ndarray
_BOOL = np.dtype(bool)
_generic = np.generic

# Below this many elements a new array is as cheap as reusing one (NumPy caches
# small allocations), so the helper computes exactly the original expression.
MIN_SIZE = 16384

_HELPERS: dict = {}


def _kind(o):
    """The dtype of a NumPy operand, the type of a Python number, else None."""
    t = type(o)
    if t is _ndarray or isinstance(o, _generic):
        return o.dtype
    if t is bool:
        return _BOOL         # NEP 50: a Python bool is a NumPy bool, not a weak scalar
    if t in _SCALARS:
        return t             # Python int, float, complex: weak scalars
    return None


def _resolver(ufunc):
    cache: dict = {}

    def out_dtype(kinds):
        hit = cache.get(kinds, cache)
        if hit is cache:
            try:
                hit = ufunc.resolve_dtypes(kinds + (None,))[-1]
            except Exception:
                hit = None
            cache[kinds] = hit
        return hit
    return out_dtype


def fits(ufunc, buf, operands, out_dtype=None) -> bool:
    """May ``ufunc(*operands, out=buf)`` stand for ``ufunc(*operands)``?

    ``buf`` must be an exact ndarray owning its memory, with at least ``MIN_SIZE``
    elements; every operand an exact ndarray, NumPy scalar or Python number; the
    result dtype ``buf``'s dtype and the broadcast shape ``buf``'s shape.
    """
    if type(buf) is not _ndarray or buf.size < MIN_SIZE or buf.base is not None or \
            not buf.ndim or not buf.flags.writeable:
        return False
    kinds = []
    other_shapes = []
    for o in operands:
        k = _kind(o)
        if k is None:
            return False
        kinds.append(k)
        if type(o) is _ndarray and o is not buf and o.shape != buf.shape:
            other_shapes.append(o.shape)
    resolve = out_dtype or _resolver(ufunc)
    out = resolve(tuple(kinds))
    if out is None or out != buf.dtype:     # (np.dtype(None) is float64: test None first)
        return False
    if other_shapes:
        try:
            return np.broadcast_shapes(buf.shape, *other_shapes) == buf.shape
        except ValueError:
            return False
    return True


def helper(prim_name: str, position: int):
    """The runtime helper computing ``prim`` into operand ``position`` when it fits."""
    key = (prim_name, position)
    fn = _HELPERS.get(key)
    if fn is not None:
        return fn
    entry = A.prim_entry(prim_name)
    ufunc = entry.impl
    if entry.operator:
        table = A.UNARY_OPERATORS if entry.unary else A.BINARY_OPERATORS
        plain = table[entry.operator]
    else:
        plain = ufunc
    out_dtype = _resolver(ufunc)
    if ufunc.nin == 1:
        def into(x):
            if type(x) is _ndarray and x.size >= MIN_SIZE and fits(ufunc, x, (x,), out_dtype):
                return ufunc(x, out=x)
            return plain(x)
    elif position == 0:
        def into(x, y):
            if type(x) is _ndarray and x.size >= MIN_SIZE and \
                    fits(ufunc, x, (x, y), out_dtype):
                return ufunc(x, y, out=x)
            return plain(x, y)
    else:
        def into(x, y):
            if type(y) is _ndarray and y.size >= MIN_SIZE and \
                    fits(ufunc, y, (x, y), out_dtype):
                return ufunc(x, y, out=y)
            return plain(x, y)
    into.__name__ = into.__qualname__ = f"{prim_name}_into"
    into.__doc__ = (f"``{prim_name}`` of the operands, written into operand {position} "
                    "when that array is the result's shape and dtype (astjax buffer reuse).")
    _HELPERS[key] = into
    return into


def _scalar_result(s: Prim, scalars) -> bool:
    """A reduction over all axes, a static fact, or arithmetic on such scalars.

    Only a matter of speed: reusing a scalar's buffer never happens at run time, so
    calling the helper for one would be wasted.
    """
    entry = A.prim_entry(s.prim)
    if entry.kind == "static":
        return True
    if entry.kind == "reduction" and "axis" in entry.params:
        k = entry.params.index("axis")
        axis = s.args[k] if k < len(s.args) else Const(None)
        keep = s.args[entry.params.index("keepdims")] if "keepdims" in entry.params and \
            entry.params.index("keepdims") < len(s.args) else Const(False)
        return (isinstance(axis, Const) and axis.value is None and isinstance(keep, Const)
                and not keep.value and "axis" not in s.kwargs and "keepdims" not in s.kwargs)
    if entry.kind == "elementwise" and isinstance(entry.impl, np.ufunc):
        ops = s.args[:entry.impl.nin]
        return all(isinstance(a, Const) or (isinstance(a, Var) and a.name in scalars)
                   for a in ops)
    return False


class _Reuser:
    def __init__(self, fn, straight_line=False, donated=frozenset()):
        self.fn = fn
        # donated parameters (jit's donate_argnums): never assigned, read once, at the
        # top level, so their memory can take the result of that read
        self.donated = frozenset(donated)
        # straight-line code (a fused group's block function): a temporary is dead
        # after the last statement that reads it, however many read it before
        self.last_read = None
        if straight_line:
            self.last_read = {n: i for i, s in enumerate(fn.body) for n in core.reads(s)}
        self.reads = Counter()
        for s in core.walk(fn.body):
            for n in set(core.reads(s)):
                self.reads[n] += 1
        self.writes = Counter(n for s in core.walk(fn.body) for n in core.writes(s))
        self.outside = set(fn.params) | (A.used_names(fn) - core.all_writes(fn.body))
        self.changed = False

    def block(self, stmts, fresh=None):
        # temporaries made in this block by a ufunc (or a rewrite), or donated
        fresh = set() if fresh is None else fresh
        scalars = set()    # values that are surely scalars: no buffer worth reusing
        for i, s in enumerate(stmts):
            for b in core.child_blocks(s):
                self.block(b)
            if not (isinstance(s, Prim) and s.target):
                continue
            elementwise = A.is_plain_ufunc(s)
            new = self._rewrite(s, fresh, i) if elementwise else None
            if new is not None:
                stmts[i] = new
                self.changed = True
            if _scalar_result(s, scalars):
                scalars.add(s.target)
            elif new is not None or elementwise:
                fresh.add(s.target)

    def _rewrite(self, s, fresh, index):
        entry = A.prim_entry(s.prim)
        if entry.operator == "**":
            return None
        nin = entry.impl.nin
        operands = s.args[:nin]
        for pos, a in enumerate(operands):
            if isinstance(a, Var) and a.name in fresh and self._dead_temp(a.name, index):
                hint = f"{s.prim}_into_{entry.params[pos]}"
                func = self.fn.env.value_ref(helper(s.prim, pos), hint)
                return External(s.target, Var(func), list(operands), loc=s.loc)
        return None

    def _dead_temp(self, name, index) -> bool:
        if name in self.donated:
            return self.writes[name] == 0 and self.reads[name] == 1
        if self.writes[name] != 1 or name in self.outside:
            return False
        if self.last_read is not None:
            return self.last_read.get(name) == index
        return self.reads[name] == 1


def run(fn: core.Function, straight_line: bool = False, donated=frozenset()) -> bool:
    """Rewrite ``fn``; ``straight_line`` (no nested blocks, nothing but elementwise
    statements holding references) lets a temporary die at its last read; ``donated``
    parameters may give their memory to a result."""
    if not hasattr(fn.env, "value_ref"):
        return False     # a hand-built function without an environment
    if straight_line:
        assert not any(core.child_blocks(s) for s in fn.body)
    donated = frozenset(d for d in donated if d in fn.params)
    changed = False
    if not straight_line:
        # the gradient's accumulations into buffers it owns (transforms/inplace.py):
        # jit reads reverse-mode code in its functional spelling, so the in-place
        # one is found again on the optimized code
        from astjax.transforms.inplace import own_accumulations
        changed = own_accumulations(fn.body) > 0
    r = _Reuser(fn, straight_line, donated)
    r.block(fn.body, set(donated))
    return r.changed or changed
