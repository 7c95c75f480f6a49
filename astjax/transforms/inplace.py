"""Reverse mode's last step: add cotangents into buffers the backward sweep owns.

The backward sweep accumulates with ``d = rt.acc(d, g)`` (``d + g``, a new array)
and ``d = rt.acc_at(d, x, index, g)`` (a copy of ``d`` with ``g`` added at
``index``).  When ``d`` holds an array that the sweep itself created and that nothing
else refers to, the sum can go into that array instead: no new array, no copy.  This
pass finds those places and calls the in-place helpers of ``astjax/runtime.py``:

* ``rt.acc_inplace(d, g)``: ``d += g``;
* ``rt.acc_copy(d, g)``: the same, but a copy of ``g`` when ``d`` is None, so that
  ``d`` owns its array for the accumulations that follow;
* ``rt.acc_reuse(d, g)``: ``g += d``, when ``g`` is a dead temporary the sweep made;
* ``rt.acc_at_inplace(d, x, index, g)``: ``d[index] += g``.

Ownership is proved statically, the rest is checked at run time.  A variable is
*owned* at a point when, on every path to it, its value (if an array) was made by
the sweep (a ufunc, one of the accumulation helpers, ``getitem_vjp``...)
or moved from such a temporary, and no statement has read it since in a way that can
keep a reference (anything but a ufunc operand or an ``is not None`` test).  A
temporary moves (``d = acc(None, t)`` binds ``t``'s array) only when it is written
once and read once in the whole function, in the same loop as its write, so nothing
reads it again.  Function parameters, values from the forward sweep, the seed
cotangent, container entries and constants are never owned.  The helpers mutate
only an exact ``np.ndarray`` (not 0-d) that owns its memory and is writeable, and
only when ``d += g`` gives exactly ``d + g`` (same dtype, ``g`` broadcasts to ``d``'s
shape); otherwise they compute what ``rt.acc`` / ``rt.acc_at`` compute.

The helpers are registered as other spellings of the ``acc`` / ``acc_at`` primitives
(``astjax/core_prims.py``): a transformation that reads the generated code again
(``grad`` of ``grad``, ``jit``, ``vmap`` of ``grad``) sees plain functional
accumulations, and only the code that actually runs adds in place.
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from astjax import core
from astjax.core import Const, Copy, External, For, If, Prim, Var, While
from astjax import primitives as P

# non-ufunc primitives whose array result is always a new array nobody else holds
_FRESH = {"getitem_vjp", "broadcast_like", "acc_at", "acc_step", "ones_like", "zeros_like"}
# primitives that return their first operand itself, a view of it, or a new array
_MOVES = {"unbroadcast", "pad_vjp"}
_NEVER_FRESH_UFUNCS = {"conj"}


def _is_fresh_ufunc(s: Prim) -> bool:
    """A plain ufunc call: its array result is new (no ``out=``, no method form)."""
    if s.kwargs or s.prim in _NEVER_FRESH_UFUNCS:
        return False
    prim = P.REGISTRY.get(s.prim)
    impl = getattr(prim, "impl", None)
    if not isinstance(impl, np.ufunc) or len(s.args) < impl.nin:
        return False
    # the parameters after the inputs (``out``) must be left at None
    return all(a == Const(None) for a in s.args[impl.nin:])


def _test_reads(s: If) -> list:
    """Reads of an ``if`` test (a bool comes out of it: never an alias)."""
    return core.reads(s) if isinstance(s.test, Prim) else core.atom_vars([s.test])


class _Counts:
    """Static facts about the whole function: reads, writes, loops of the writes,
    accumulation sites."""

    def __init__(self, whole):
        self.reads: Counter = Counter()
        self.writes: Counter = Counter()
        self.write_loop: dict = {}
        self.sites: Counter = Counter()
        self.carried: set = set()
        self._plain_writes: dict = {}
        self._visit(whole, None, [])

    def _visit(self, stmts, loop, loops):
        for s in stmts:
            if isinstance(s, If):
                self.reads.update(_test_reads(s))
                self._visit(s.body, loop, loops)
                self._visit(s.orelse, loop, loops)
                continue
            self.reads.update(core.reads(s))
            for w in core.writes(s):
                self.writes[w] += 1
                self.write_loop[w] = loop
            if isinstance(s, (For, While)):
                # what the loop writes other than by accumulating into it
                self._plain_writes[id(s)] = {
                    w for t in core.walk(core.child_blocks(s)[-1]) for w in core.writes(t)
                    if _acc_target(t) != w}
                inner = loops + [s]
                for b in core.child_blocks(s):
                    self._visit(b, id(s), inner)
                continue
            acc = _acc_target(s)
            if acc is not None:
                self.sites[acc] += 1
                if any(acc not in self._plain_writes[id(lp)] for lp in loops):
                    self.carried.add(acc)   # accumulated across the loop's iterations


def _acc_target(s):
    """``d`` for ``d = rt.acc(d, g)`` / ``d = rt.acc_at(d, x, index, g)``, else None."""
    if isinstance(s, Prim) and s.prim in ("acc", "acc_at", "acc_step") and s.target and \
            s.args and \
            s.args[0] == Var(s.target):
        return s.target
    return None


class _Owner:
    def __init__(self, whole):
        self.c = _Counts(whole)
        self.rewritten = 0

    def movable(self, name, owned, loop) -> bool:
        """``name`` holds an owned array that nothing reads after this read."""
        c = self.c
        return (name in owned and c.reads[name] == 1 and c.writes[name] == 1
                and c.write_loop.get(name) == loop)

    def block(self, stmts, owned: set, loop, rewrite: bool) -> set:
        for i, s in enumerate(stmts):
            if isinstance(s, If):
                body = self.block(s.body, set(owned), loop, rewrite)
                orelse = self.block(s.orelse, set(owned), loop, rewrite)
                owned = body & orelse
            elif isinstance(s, For):
                # ``for v in d`` walks d's own rows: d is shared from here on
                owned = owned - set(core.reads(s)) - {s.target}
                owned = self.loop(s, [s.body], owned, rewrite)
            elif isinstance(s, While):
                # not made by the backward sweep: only drop what it touches
                touched = core.all_reads([s]) | core.all_writes([s])
                owned = owned - touched
            else:
                owned, new = self.simple(s, owned, loop)
                if new is not None and rewrite:
                    stmts[i] = new
                    self.rewritten += 1
        return owned

    def loop(self, s, blocks, owned, rewrite) -> set:
        start = set(owned)
        while True:
            end = set(start)
            for b in blocks:
                end = self.block(b, end, id(s), False)
            new = start & end
            if new == start:
                break
            start = new
        if rewrite:
            end = set(start)
            for b in blocks:
                end = self.block(b, end, id(s), True)
        return start

    def simple(self, s, owned: set, loop):
        """(owned after ``s``, the statement to put in its place or None)."""
        owned = set(owned)
        target = _acc_target(s)
        if target is not None:
            return self.accumulation(s, owned, loop)
        if isinstance(s, Copy):
            v = s.value
            fresh = (isinstance(v, Var) and self.movable(v.name, owned, loop)) or (
                isinstance(v, Const) and v.value is None)
            owned -= set(core.atom_vars([v]))
            owned.discard(s.target)
            if fresh:
                owned.add(s.target)
            return owned, None
        if isinstance(s, Prim) and _is_fresh_ufunc(s):
            # ufunc operands are read, not kept: they stay owned
            if s.target:
                owned.add(s.target)
            return owned, None
        fresh = False
        if isinstance(s, Prim) and s.prim in _FRESH:
            fresh = True
        elif isinstance(s, Prim) and s.prim in _MOVES and isinstance(s.args[0], Var):
            fresh = self.movable(s.args[0].name, owned, loop)
        owned -= set(core.reads(s))
        for w in core.writes(s):
            owned.discard(w)
        if fresh and s.target:
            owned.add(s.target)
        return owned, None

    def accumulation(self, s: Prim, owned: set, loop):
        d = s.target
        g = s.args[1] if s.prim == "acc" else s.args[3]
        gname = g.name if isinstance(g, Var) else None
        if gname == d:
            owned.discard(d)
            return owned, None
        d_owned = d in owned
        g_moves = gname is not None and gname != d and self.movable(gname, owned, loop)
        others = [a for a in core.atom_vars(s.args[1:]) if a != d]
        owned -= set(others)
        owned.discard(d)
        helper = None
        if s.prim in ("acc_at", "acc_step"):
            # their array result is always new; in place when d is owned
            helper = f"{s.prim}_inplace" if d_owned else None
            owned.add(d)
        elif d_owned and g_moves:
            helper = "acc_inplace"
            owned.add(d)
        elif d_owned and (self.c.sites[d] > 1 or d in self.c.carried):
            helper = "acc_copy"      # more accumulations follow: own a buffer now
            owned.add(d)
        elif d_owned:
            helper = "acc_inplace"   # one contribution: d None keeps g itself
        elif g_moves:
            helper = "acc_reuse"
            owned.add(d)
        if helper is None:
            return owned, None
        new = External(d, Var("rt"), list(s.args), dict(s.kwargs), method=helper, loc=s.loc)
        return owned, new


def own_accumulations(body: list, start: int = 0) -> int:
    """Rewrite the accumulations in ``body[start:]`` (the backward sweep and what
    follows it; ``body`` is the whole function body, changed in place) to add into
    owned buffers.  Returns the number of statements rewritten."""
    owner = _Owner(body)
    region = body[start:]
    owner.block(region, set(), None, True)
    body[start:] = region
    return owner.rewritten


__all__ = ["own_accumulations"]
