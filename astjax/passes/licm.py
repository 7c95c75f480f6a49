"""Loop-invariant code motion: compute before a ``for`` loop what every trip recomputes.

User loops recompute constants of the loop (``c2 = (c * dt / dx) ** 2`` inside a time
step, ``np.tanh(w)`` in an RNN cell); reverse mode copies them into the backward loop
too.  A statement at the top level of a ``for ... in range(...)`` body is hoisted when:

* it is a pure primitive (``analysis.is_pure``);
* none of its operands is written anywhere in the loop, and neither they nor its
  target are ever updated in place or used as a tape (``analysis.Aliases``: one
  shared object instead of one per trip must not be observable);
* its target is assigned only there in the loop and is not live on entry to the loop
  (no read of the value from before the loop, in the first trip or after the loop).

Hoisting must not run a computation the loop would not have run (it could raise, or
just cost): unless the range is constant and non-empty, the hoisted statements are
guarded by the loop's own trip test, ``if range(...)`` and, for a loop with exit
flags, ``if not (flag or ...)`` (flags are checked before the first trip).  A loop
that runs has run the statement in its first trip, with the same operands, so the
value is the same; only which of two errors surfaces first can differ.
``while`` loops and loops over other iterables are left alone.
"""
from __future__ import annotations

from collections import Counter

from astjax import core
from astjax.core import For, If, Prim, Var, While
from astjax.passes import analysis as A


def _trips_known(loop: For) -> bool:
    ok, values = A.operand_value(tuple(loop.iter.args))
    if not ok or not all(type(v) in (int, type(None)) for v in values):
        return False
    return len(range(*[v for v in values if v is not None])) > 0


class _Hoister:
    def __init__(self, fn):
        self.fn = fn
        self.aliases = A.Aliases(fn)
        self.live_after = A.liveness(fn)
        self.changed = False

    def block(self, stmts):
        out = []
        for s in stmts:
            if isinstance(s, If):
                self.block_into(s.body)
                self.block_into(s.orelse)
            elif isinstance(s, While):
                self.block_into(s.test_body)
                self.block_into(s.body)
            elif isinstance(s, For):
                self.block_into(s.body)
                if isinstance(s.iter, Prim) and s.iter.prim == "range":
                    out.extend(self.hoist(s))
            out.append(s)
        return out

    def block_into(self, stmts):
        stmts[:] = self.block(stmts)

    def hoist(self, loop: For) -> list:
        loop_writes = A.all_effects(loop.body) | {loop.target}
        counts = Counter(n for st in core.walk(loop.body) for n in core.writes(st))
        live_entry = A.live_in_of(loop, self.live_after.get(id(loop), frozenset()))
        hoisted, kept = [], []
        for b in loop.body:
            if self._invariant(b, loop, loop_writes, counts, live_entry):
                hoisted.append(b)
                loop_writes.discard(b.target)
            else:
                kept.append(b)
        if not hoisted:
            return []
        self.changed = True
        loop.body[:] = kept
        if not loop.exit_flags and _trips_known(loop):
            return hoisted
        trips = A.fresh_name(self.fn, "trips")
        guard = [Prim(trips, "range", list(loop.iter.args), loc=loop.loc)]
        inner = hoisted
        if loop.exit_flags:
            go = A.fresh_name(self.fn, "enters")
            inner = [Prim(go, "no_flags", [tuple(Var(f) for f in loop.exit_flags)],
                          loc=loop.loc), If(Var(go), hoisted, [], loc=loop.loc)]
        guard.append(If(Var(trips), inner, [], loc=loop.loc))
        return guard

    def _invariant(self, b, loop, loop_writes, counts, live_entry) -> bool:
        if not (isinstance(b, Prim) and b.target and A.is_pure(b)):
            return False
        operands = core.atom_vars(b.args) + core.atom_vars(b.kwargs.values())
        if set(operands) & loop_writes or b.target in operands:
            return False
        if counts[b.target] != 1 or b.target in live_entry or b.target == loop.target:
            return False
        return self.aliases.stable(operands + [b.target])


def run(fn: core.Function) -> bool:
    h = _Hoister(fn)
    h.block_into(fn.body)
    return h.changed
