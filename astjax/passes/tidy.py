"""Tidying for display: the generated code as short as a careful person would write it.

``make_source`` (``astjax/source_view.py``) prints a simplified copy of the code a
transformation generated; the code that runs is left as it is.  The simplifications
never change a value, a dtype or a type (``tests/test_tidy.py`` runs the simplified
code against the generated code over the program corpora, bit for bit):

* ``functional``: the in-place accumulation helpers (``rt.acc_inplace``...) are
  spelled as the plain ``rt.acc`` / ``rt.acc_at`` they stand for (same values; the
  in-place spelling is a memory optimization whose ownership proof does not survive
  the rewrites below);
* ``coalesce``: ``t = f(...) ... y = t`` becomes ``y = f(...) ...`` (the result keeps
  the name that says what it is: ``d_x``, not ``d_f_matmul_reshape``);
* ``Observed`` facts (shape, dtype and type of every variable, seen while the code
  ran on the caller's arguments) turn identities for *these* arguments into copies:
  ``x ** 1``, ``x * 1``, ``x / 1``, ``x - 0`` and ``a * (x ** 0)`` for real dtypes,
  ``ra.unbroadcast(t, x)`` when ``t`` already has ``x``'s shape and dtype (the
  helper returns ``t`` itself then), ``np.reshape(x, s)`` to ``x``'s own shape;
* then the jit passes that keep code general: copy propagation, common
  subexpressions (a value computed once), dead code, constant folding; a tape
  nothing uses goes too.

``x + 0`` is left alone: ``-0.0 + 0`` is ``0.0``.  Complex values are left alone:
``(inf + 0j) * 1`` has a NaN imaginary part.
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from astjax import core
from astjax.core import Const, Copy, External, Prim, Var
from astjax.passes import analysis as A

# in-place spellings of the accumulation primitives (astjax/transforms/inplace.py)
_FUNCTIONAL = {"acc_inplace": "acc", "acc_copy": "acc", "acc_reuse": "acc",
               "acc_at_inplace": "acc_at", "acc_step_inplace": "acc_step"}


def functional(stmts) -> bool:
    """Spell in-place accumulations as the functional primitive they compute."""
    changed = False
    for block in [stmts] + [b for s in core.walk(stmts) for b in core.child_blocks(s)]:
        for k, s in enumerate(block):
            if isinstance(s, External) and getattr(s, "method", None) in _FUNCTIONAL and \
                    isinstance(s.func, Var) and s.func.name == "rt" and not s.kwargs:
                block[k] = Prim(s.target, _FUNCTIONAL[s.method], list(s.args), loc=s.loc)
                changed = True
    return changed


def _counts(fn: core.Function):
    reads, writes = Counter(), Counter(fn.params)
    for s in core.walk(fn.body):
        reads.update(core.reads(s))
        writes.update(core.writes(s))
    return reads, writes


def _reads_in(stmts) -> Counter:
    out = Counter()
    for s in core.walk(stmts):
        out.update(core.reads(s))
    return out


def coalesce(fn: core.Function) -> bool:
    """``t = f(...) ... y = t`` -> ``y = f(...) ...`` when ``y`` is the plainer name: the
    value keeps the name that says what it is (``d_x``, not ``d_f_matmul_reshape``).

    Safe when ``t`` is assigned once, in the same block as the copy, read nowhere but
    between the two, and nothing reads or writes ``y`` between them: every read of
    ``t`` then sees the same object under the name ``y``, and every read of ``y`` the
    value it saw before.
    """
    changed = False
    while _coalesce_one(fn):
        changed = True
    return changed


def _coalesce_one(fn: core.Function) -> bool:
    reads, writes = _counts(fn)
    params = set(fn.params)
    for block in [fn.body] + [b for s in core.walk(fn.body) for b in core.child_blocks(s)]:
        defined = {}
        for k, s in enumerate(block):
            if isinstance(s, (Prim, Copy, External)) and s.target:
                defined.setdefault(s.target, k)
            if not (isinstance(s, Copy) and isinstance(s.value, Var)):
                continue
            t, y = s.value.name, s.target
            i = defined.get(t)
            if i is None or i >= k or t == y or not _plainer(y, t) or writes[t] != 1 or \
                    {t, y} & params:
                continue
            if isinstance(block[i], Prim) and A.out_operand(block[i]) is not None:
                continue
            between = block[i + 1:k]
            inner = _reads_in(between)
            if inner[y] or inner[t] + 1 != reads[t] or y in core.all_writes(between):
                continue
            _rename(fn.body, t, y)
            del block[k]
            return True
    return False


def _plainer(y, t) -> bool:
    """``y`` reads as a primary name next to ``t``: ``d_x`` next to ``d_f_matmul_reshape``
    (no more ``_``-separated parts), but not ``d_f_matmul_x2`` next to ``x``."""
    py, pt = len(y.strip("_").split("_")), len(t.strip("_").split("_"))
    # a tie only between names of one kind: a cotangent (d_...) is not named after a
    # forward value, nor the other way round
    return py < pt or (py == pt and y.startswith("d_") == t.startswith("d_"))


def _rename(stmts, old, new):
    def fn(v):
        return Var(new) if v.name == old else v
    for s in core.walk(stmts):
        A.rewrite_reads(s, fn)
        if isinstance(s, (Prim, Copy, External)) and s.target == old:
            s.target = new
        if isinstance(s, (core.For, core.While)):
            s.exit_flags = [new if f == old else f for f in s.exit_flags]


_SETUP = ("new_tape", "to_list")


def drop_unused_setup(fn: core.Function, facts=None) -> bool:
    """``[]`` (a tape nothing uses) and ``list(tape)`` of a list, left without a target."""
    changed = False
    for block in [fn.body] + [b for s in core.walk(fn.body) for b in core.child_blocks(s)]:
        keep = []
        for s in block:
            if isinstance(s, Prim) and s.target is None and s.prim in _SETUP and (
                    s.prim == "new_tape" or (facts is not None and
                                             facts.operand(s, 0) in (("list",), ("tuple",)))):
                changed = True
                continue
            keep.append(s)
        block[:] = keep
    return changed


# ------------------------------------------------------------------ observed facts

def fact_of(v):
    """What the rewrites need to know of a value: its type, dtype and shape."""
    t = type(v)
    if t is np.ndarray:
        return ("ndarray", v.dtype.str, v.shape)
    if isinstance(v, np.generic):
        return (t.__name__, v.dtype.str, ())
    if t is tuple and len(v) <= 32 and all(type(x) is int for x in v):
        return ("tuple", v)
    return (t.__name__,)


class Observed:
    """Facts seen while the code ran, per statement: the facts of its result and of each
    operand, over every time it ran (``None``: more than ``LIMIT`` different ones).

    Keyed by the statement object (``id``) and the operand's position, so they stay
    true while the passes rename variables: a renamed operand is the same object."""

    LIMIT = 4

    def __init__(self):
        self.results: dict = {}          # id(stmt) -> tuple of facts
        self.operands: dict = {}         # (id(stmt), position) -> tuple of facts
        self.lines: set = set()          # line numbers seen running
        # names the code calls that are PURE_BATCH_HELPERS (checked in its namespace)
        self.pure_calls: frozenset = frozenset()

    @classmethod
    def _add(cls, table, key, value):
        got = table.get(key, ())
        if got is None:
            return
        f = fact_of(value)
        if f not in got:
            table[key] = got + (f,) if len(got) < cls.LIMIT else None

    def record_result(self, s, value):
        self._add(self.results, id(s), value)

    def record_operand(self, s, k, value):
        self._add(self.operands, (id(s), k), value)

    @staticmethod
    def _one(got):
        return got[0] if got and len(got) == 1 else None

    def result(self, s):
        """The single fact of ``s``'s result, or None (not seen running, or several)."""
        return self._one(self.results.get(id(s)))

    def operand(self, s, k):
        """The single fact of operand ``k`` of ``s`` (a position, or a keyword's name;
        a constant: its own fact)."""
        a = s.args[k] if isinstance(k, int) else s.kwargs[k]
        if isinstance(a, Const):
            return fact_of(a.value)
        if isinstance(a, Var):
            return self._one(self.operands.get((id(s), k)))
        return None


_REAL = "fiu"


def _real(f) -> bool:
    if f is None:
        return False
    if f[0] in ("float", "int"):
        return True
    return len(f) == 3 and np.dtype(f[1]).kind in _REAL


def _is_num(a, value) -> bool:
    return isinstance(a, Const) and type(a.value) in (int, float) and a.value == value


class _Specializer:
    def __init__(self, fn, facts: Observed):
        self.facts = facts
        _, writes = _counts(fn)
        # ``y = x ** 0`` assigned once: y is 1 (IEEE pow, NumPy: even for nan and inf)
        self.ones = {s.target for s in core.walk(fn.body)
                     if isinstance(s, Prim) and s.prim == "power" and s.target and
                     writes[s.target] == 1 and len(s.args) >= 2 and _is_num(s.args[1], 0)
                     and A.out_operand(s) is None and not s.kwargs}
        self.changed = False

    def rewrite(self, s):
        if isinstance(s, Prim) and s.target and s.prim == "where":
            return self.where_of_constant(s)
        if not isinstance(s, Prim) or not s.target or s.kwargs or A.out_operand(s) is not None:
            return None
        res = self.facts.result(s)
        if res is None:
            return None          # never seen running, or with different results
        a = s.args
        op = self.facts.operand

        def copy_of(k):
            return Copy(s.target, a[k], loc=s.loc)
        if s.prim in ("power", "multiply", "divide", "subtract") and len(a) >= 2:
            def one(k):
                return _is_num(a[k], 1) or (isinstance(a[k], Var) and a[k].name in self.ones)
            keep = None
            if s.prim in ("power", "divide") and _is_num(a[1], 1):
                keep = 0
            elif s.prim == "subtract" and _is_num(a[1], 0):
                keep = 0
            elif s.prim == "multiply" and one(1):
                keep = 0
            elif s.prim == "multiply" and one(0):
                keep = 1
            # the same type, dtype and shape as the result, and real: x * 1 is x
            if keep is not None and isinstance(a[keep], Var) and _real(op(s, keep)) and \
                    op(s, keep) == res:
                return copy_of(keep)
        if s.prim in ("unbroadcast", "tangent_like") and len(a) == 2 and \
                isinstance(a[0], Var):
            # the helpers return t itself when it is an ndarray of x's shape and dtype
            ft = op(s, 0)
            if ft is not None and ft[0] == "ndarray" and ft == op(s, 1) == res and \
                    (s.prim == "unbroadcast" or np.dtype(ft[1]).kind in "fc"):
                return copy_of(0)
        if s.prim == "reshape" and len(a) >= 2 and isinstance(a[0], Var) and \
                (len(a) < 3 or _is_const(a[2], "C")):
            fx, fs = op(s, 0), op(s, 1)
            if fx is not None and fx[0] == "ndarray" and fs is not None and \
                    fs[0] == "tuple" and tuple(fs[1]) == fx[2] and fx == res:
                return copy_of(0)
        return None

    def where_of_constant(self, s):
        """``where(False, a, b)`` (a rule's ``np.where(y == 0, 1.0, x)`` with y known) is
        ``b`` when ``b`` was seen with the result's type, dtype and shape."""
        res = self.facts.result(s)
        params = ("condition", "x", "y")
        bound = dict(zip(params, s.args))
        bound.update(s.kwargs)
        cond = bound.get("condition")
        if res is None or not isinstance(cond, Const) or type(cond.value) is not bool or \
                set(bound) != set(params):
            return None
        chosen = bound["x" if cond.value else "y"]
        if not isinstance(chosen, Var):
            return None
        name = "x" if cond.value else "y"
        k = params.index(name) if params.index(name) < len(s.args) else name
        fact = self.facts.operand(s, k)
        if fact is not None and _real(fact) and fact == res:
            return Copy(s.target, chosen, loc=s.loc)
        return None

    def block(self, stmts):
        for k, s in enumerate(stmts):
            for b in core.child_blocks(s):
                self.block(b)
            new = self.rewrite(s)
            if new is not None:
                stmts[k] = new
                self.changed = True


def _is_const(a, value):
    return isinstance(a, Const) and a.value == value and type(a.value) is type(value)


# vmap's helpers that generated code calls by name (templates/batch.py) and that never
# change their arguments: to the aliasing analysis they are plain computations, not
# opaque calls that might update anything they are given
PURE_BATCH_HELPERS = frozenset({"unreduce", "unbroadcast", "dot_grad", "add_cot",
                                "check_scalar_output", "acc_at", "broadcast_like"})


class _Aliases(A.Aliases):
    def __init__(self, fn, pure):
        self.pure = pure
        super().__init__(fn)

    def _statement(self, s):
        if isinstance(s, External) and s.method is None and isinstance(s.func, Var) and \
                s.func.name in self.pure:
            if s.target:
                for v in core.atom_vars(s.args) + core.atom_vars(list(s.kwargs.values())):
                    self.union(s.target, v)
            return
        super()._statement(s)


def specialize(fn: core.Function, facts: Observed) -> bool:
    """Rewrite identities for the observed arguments into copies (see the module doc).

    A copy makes two names share one object where the original made a new one, so a
    rewrite is skipped when anything may update either in place.
    """
    aliases = _Aliases(fn, facts.pure_calls)
    sp = _Specializer(fn, facts)
    original = sp.rewrite

    def guarded(s):
        new = original(s)
        if new is not None and not aliases.stable([new.target, new.value.name]):
            return None
        return new
    sp.rewrite = guarded
    sp.block(fn.body)
    return sp.changed


def tidy(fn: core.Function, facts: Observed | None = None, max_rounds: int = 8,
         copy: bool = True):
    """A simplified copy of ``fn`` (see the module doc); ``fn`` itself is not changed
    (unless ``copy`` is False: then ``fn`` is simplified in place).

    Returns ``(function, specialized)``: whether observed facts were used.
    """
    from astjax.passes import const_fold, copy_function, copy_prop, cse, dce
    out = copy_function(fn) if copy else fn
    functional(out.body)
    used = False
    for _ in range(max_rounds):
        changed = coalesce(out)
        if facts is not None and specialize(out, facts):
            changed = used = True
        changed |= coalesce(out)
        changed |= bool(const_fold.run(out))
        changed |= bool(copy_prop.run(out))
        changed |= bool(cse.run(out))
        changed |= bool(dce.run(out))
        changed |= drop_unused_setup(out, facts)
        if not changed:
            break
    coalesce(out)
    return out, used


__all__ = ["tidy", "Observed", "fact_of", "functional", "coalesce", "specialize"]
