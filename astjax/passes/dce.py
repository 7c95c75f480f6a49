"""Dead-code elimination: drop pure statements whose result nobody reads.

Copy propagation, CSE and folding leave copies and computations behind, and reverse
mode emits some (``outputs_dot_shape = rt.meta(outputs_dot)`` saved for a rule that
ended up not needing it).  A statement goes when it is pure (a Copy, or a Prim that
``analysis.is_pure`` accepts) and its target is not live after it.

Liveness is flow-correct (``analysis.liveness``): a value read in a later loop
iteration is live through the loop, loop exit flags and the loop's own tests are
reads, the Return value is live.  Tape pushes/pops, ``External`` calls, in-place
updates, asserts and raises always stay; a kept effectful call whose result is dead
just loses its assignment (``push_3 = rt.push(tape, x)`` -> ``rt.push(tape, x)``).
An ``if`` whose branches became empty goes too when its test is a plain name or a
pure primitive.

Removing a dead computation also removes an error it could have raised (a shape
mismatch in a value nobody uses), as every optimizing compiler does.
"""
from __future__ import annotations

from astjax import core
from astjax.core import Const, Copy, External, For, If, Prim, Var, While
from astjax.passes import analysis as A


def _prune(stmts, live_after, state):
    out = []
    for s in stmts:
        after = live_after.get(id(s), frozenset())
        if isinstance(s, If):
            _prune_into(s.body, live_after, state)
            _prune_into(s.orelse, live_after, state)
            if not s.body and not s.orelse and (
                    isinstance(s.test, (Var, Const)) or A.is_pure(s.test)):
                state["changed"] = True
                continue
            out.append(s)
            continue
        if isinstance(s, For):
            _prune_into(s.body, live_after, state)
        elif isinstance(s, While):
            _prune_into(s.test_body, live_after, state)
            _prune_into(s.body, live_after, state)
        elif isinstance(s, Copy):
            if s.target not in after or (isinstance(s.value, Var)
                                         and s.value.name == s.target):
                state["changed"] = True
                continue
        elif isinstance(s, Prim) and s.target is not None and s.target not in after:
            if A.is_pure(s):
                state["changed"] = True
                continue
            s.target = None
            state["changed"] = True
        elif isinstance(s, External) and s.target is not None and s.target not in after:
            s.target = None
            state["changed"] = True
        out.append(s)
    return out


def _prune_into(block, live_after, state):
    block[:] = _prune(block, live_after, state)


def run(fn: core.Function) -> bool:
    """Prune until nothing more dies (a removed read can make its operand dead)."""
    changed = False
    for _ in range(A.count_statements(fn.body) + 1):
        state = {"changed": False}
        _prune_into(fn.body, A.liveness(fn), state)
        if not state["changed"]:
            break
        changed = True
    return changed
