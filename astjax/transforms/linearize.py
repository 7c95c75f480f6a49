"""Split jvp code into a primal part that runs once and a tangent part that replays.

``linearize`` must not redo primal work on every call of ``f_jvp``.  The jvp code of
``astjax/transforms/forward.py`` interleaves primal and tangent statements; here the
primal statements go to one function, which records every value the tangent
statements (and the control flow around them) will read, and the tangent statements go
to another, which walks the same branches and loops, taking those values back from the
record in the order they were made instead of computing them.
"""
from __future__ import annotations

from astjax import core
from astjax.core import For, If, Prim, SetItem, Var, While


class NotSplittable(Exception):
    """The code keeps values on tapes (it is reverse-mode code: linearize of grad):
    which pushes and pops belong to the primal part and which to the tangent part
    cannot be told statement by statement, so the caller recomputes the primal
    part on every call instead (``forward_api.linearize``) -- slower, never wrong."""


_TAPE_PRIMS = frozenset({"push", "pop", "pop_tangent", "new_tape", "replay", "replay_start"})


def _control_reads(s) -> set[str]:
    if isinstance(s, If):
        return set(core.reads(s))
    if isinstance(s, For):
        return set(core.reads(s))
    if isinstance(s, While):
        return set(core.atom_vars([s.test])) | set(s.exit_flags)
    return set()


def _loop_counts(stmts, in_loop=False, counts=None):
    counts = {} if counts is None else counts
    for s in stmts:
        for w in core.writes(s):
            counts[w] = counts.get(w, 0) + (2 if in_loop else 1)
        for b in core.child_blocks(s):
            _loop_counts(b, in_loop or isinstance(s, (For, While)), counts)
    return counts


# helpers that change their first argument in place: a tape pushed to, popped from or
# written into is written by the statement, so its pushes and pops stay on one side
_MUTATES_FIRST = frozenset({"push", "pop", "pop_tangent", "restore_at"})


def _effects(s) -> set[str]:
    out = set(core.writes(s))
    if isinstance(s, Prim) and s.prim in _MUTATES_FIRST and s.args and isinstance(
            s.args[0], Var):
        out.add(s.args[0].name)
    return out


def split(body, tangent_ids, params, names, final_reads, tangent_params=()):
    """(primal statements, tangent statements, record name, residual variable names).

    ``final_reads``: primal names the tangent function reads after the body (the output).
    Statements of the rules that read no tangent (``cos(x)`` in the rule of ``sin``) are
    primal work too: they run once, in the primal part.  Code with tapes raises
    ``NotSplittable``.
    """
    if any(isinstance(s, Prim) and s.prim in _TAPE_PRIMS for s in core.walk(body)):
        raise NotSplittable()
    # a fixpoint, not one pass: in a loop, a tangent that starts as zeros (a carry
    # initialised from a constant) is read before the statement that makes it carry
    # x_dot is reached, on the next iteration
    carrying = set(tangent_params)
    while True:
        before = len(carrying)
        for s in core.walk(body):
            if id(s) in tangent_ids and (set(core.reads(s)) & carrying or not _effects(s)):
                carrying |= _effects(s)
        if len(carrying) == before:
            break
    tangent_ids = {id(s) for s in core.walk(body) if id(s) in tangent_ids and (
        _effects(s) & carrying or not _effects(s))}
    needed: set[str] = set(final_reads)
    for s in core.walk(body):
        if id(s) in tangent_ids:
            needed |= set(core.reads(s))
        needed |= _control_reads(s)
    counts = _loop_counts(body)
    for p in params:
        counts[p] = counts.get(p, 0) + 1
    primal_writes = {w for s in core.walk(body) if id(s) not in tangent_ids
                     for w in core.writes(s)}
    recorded = {v for v in needed & primal_writes if counts.get(v, 0) > 1}
    residual = sorted((needed & (primal_writes | set(params))) - recorded)
    record = names.fresh("record")
    cursor = names.fresh("replay")

    def primal(stmts):
        out = []
        for s in stmts:
            if id(s) in tangent_ids:
                continue
            if isinstance(s, If):
                out.append(If(s.test, primal(s.body), primal(s.orelse), loc=s.loc))
                continue
            if isinstance(s, For):
                out.append(For(s.target, s.iter, primal(s.body), s.exit_flags, loc=s.loc))
                continue
            if isinstance(s, While):
                out.append(While(primal(s.test_body), s.test, primal(s.body), s.exit_flags,
                                 loc=s.loc))
                continue
            out.append(s)
            for w in core.writes(s):
                if w in recorded:
                    value = Var(w)
                    if isinstance(s, SetItem):
                        snap = names.fresh(f"{w}_now")
                        out.append(Prim(snap, "copy", [Var(w)], loc=s.loc))
                        value = Var(snap)
                    out.append(Prim(None, "push", [Var(record), value], loc=s.loc))
        return out

    def tangent(stmts):
        out = []
        for s in stmts:
            if id(s) in tangent_ids:
                out.append(s)
                continue
            if isinstance(s, If):
                out.append(If(s.test, tangent(s.body), tangent(s.orelse), loc=s.loc))
                continue
            if isinstance(s, For):
                out.append(For(s.target, s.iter, tangent(s.body), s.exit_flags, loc=s.loc))
                continue
            if isinstance(s, While):
                out.append(While(tangent(s.test_body), s.test, tangent(s.body), s.exit_flags,
                                 loc=s.loc))
                continue
            for w in core.writes(s):
                if w in recorded:
                    out.append(Prim(w, "replay", [Var(cursor)], loc=s.loc))
        return out

    primal_body = [Prim(record, "new_tape", [])] + primal(body)
    tangent_body = [Prim(cursor, "replay_start", [Var(record)])] + tangent(body)
    return primal_body, tangent_body, record, residual

