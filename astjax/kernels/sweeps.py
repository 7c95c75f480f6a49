"""Reverse mode's sweeps of a scan as compiled loops (``kernels/loops.py`` for them).

The forward sweep of a loop with a fast backward trip (``transforms/fast_trips.py``)
runs each step on one of two paths: the first step (and any whose carry's signature
differs) on the general path, which records everything the backward needs; the
others on the fast path, which calls the step's kernels, builds the carry, appends
the step's ``ys`` and pushes onto the tape a few saved results, ``xs`` at the step
and values that are the same every fast step (metadata, invariants, the ``True``
that marks a fast trip).  When the fast body is only that (``loops.match_body`` with
the tape), ``rewrite`` puts a ``SweepDriver`` (``kernels/loop_driver.py``) in front
of it, keeping the body as its ``else`` branch:

    sweep_memo = []
    sweep_done = False
    for i in range(0, n_steps):
        if sweep_done:
            break
        trips = trips + 1
        trip_sig = rt.trip_signature(carry)
        cond_same_signature = rt.same_signature(trip_sig, fast_sig)
        if cond_same_signature:
            pressure_future_mul_2 = dt * dt        (invariant elementwise work, hoisted)
            sweep_result = sweep_driver(sweep_memo, i, n_steps, trips, tape, ys_steps,
                                        carry, carry_shape, ..., dt, kappa, ...)
            sweep_ok = sweep_result[0]
            if sweep_ok:
                sweep_done = sweep_result[1]
                trips = sweep_result[2]
                ys_steps = sweep_result[3]
                carry = sweep_result[5]        ([4]: the step index, where it is pushed)
                ...
            else:
                <the fast body, unchanged>
        else:
            <the general body, unchanged>

The driver interprets the step; once a step kept the carries' layouts, the remaining
steps run as one C call and the loop ends (``sweep_done``), with the tape, the ``ys``
list, the carries and ``trips`` as the Python loop leaves them.

The backward sweep's loop (``rewrite_backward``) gets a ``BackSweepDriver``
(``kernels/backsweep.py``) in front of its fast, complete trips' body the same way;
since the trips of the general path (the first step's, at least) follow, the loop is
not ended but told to skip the trips the driver ran:

    back_memo = []
    for step in range(0, trips):
        back_skip_trip = back_sweep_driver_skip(back_memo)
        if back_skip_trip:
            pass
        else:
            fast_trip = rt.pop(tape)
            if fast_trip:
                complete_trip = rt.cots_complete(..., d_carry, d_ys_steps)
                if complete_trip:
                    back_result = back_sweep_driver(back_memo, step, trips, tape,
                                                    d_ys_steps, <carried>, <invariants>)
                    if back_result[0]:
                        d_ys_steps = back_result[1]
                        <carried, and what the trip leaves for others> = ...
                    else:
                        <the fast trip, unchanged>
                ...
"""
from __future__ import annotations

import copy

from astjax import core
from astjax.core import Const, External, Index, Prim, Var
from astjax.kernels import loops


def rewrite(fn, kernel_refs: dict, name_of) -> list:
    """Put a sweep driver in front of each forward sweep's fast body that
    ``loops.match_body`` takes; returns the drivers."""
    readers = loops.readers_of(fn)
    drivers: list = []
    _rewrite_block(fn.body, kernel_refs, name_of, readers, drivers, True)
    return drivers


def _rewrite_block(block, kernel_refs, name_of, readers, drivers, top=False):
    k = 0
    while k < len(block):
        s = block[k]
        for b in core.child_blocks(s):
            _rewrite_block(b, kernel_refs, name_of, readers, drivers)
        if isinstance(s, core.For) and \
                _rewrite_sweep(block, k, kernel_refs, name_of, readers, drivers, top):
            k += 3                   # (the memo, the flag, the loop)
            continue
        if isinstance(s, core.For) and \
                rewrite_backward(block, k, kernel_refs, name_of, readers, drivers, top):
            k += 2                   # (the memo, the loop)
            continue
        k += 1


def _sweep_parts(loop):
    """(trips, signature operands, trip_sig, cond, the If, index copy) of a forward
    sweep's body: ``trips = trips + 1; trip_sig = rt.trip_signature(...); cond =
    rt.same_signature(trip_sig, fast_sig); if cond: <fast> else: <general>``, after
    ``rt.push(tape, i); i = i_next`` where the backward needs the step's index (a
    cotangent of ``xs``): then the index copy is (tape, i)."""
    body = [s for s in loop.body if not isinstance(s, core.Comment)]
    index = None
    if len(body) == 6:
        push, copy_index = body[:2]
        if not (isinstance(push, Prim) and push.prim == "push" and len(push.args) == 2 and
                all(isinstance(a, Var) for a in push.args) and
                isinstance(copy_index, core.Copy) and
                copy_index.target == push.args[1].name and
                copy_index.value == Var(loop.target)):
            return None
        index = (push.args[0].name, copy_index.target)
        body = body[2:]
    if len(body) != 4:
        return None
    count, sig, same, branch = body
    if not (isinstance(count, Prim) and count.prim == "add" and count.target and
            count.args[:2] == [Var(count.target), Const(1)] and
            all(a == Const(None) for a in count.args[2:]) and not count.kwargs):
        return None
    if not (isinstance(sig, Prim) and sig.prim == "trip_signature" and sig.target and
            len(sig.args) == 1 and isinstance(sig.args[0], tuple) and
            all(isinstance(a, Var) for a in sig.args[0])):
        return None
    if not (isinstance(same, Prim) and same.prim == "same_signature" and same.target and
            len(same.args) == 2 and same.args[0] == Var(sig.target) and
            isinstance(same.args[1], Var)):
        return None
    if not (isinstance(branch, core.If) and branch.test == Var(same.target)):
        return None
    return (count.target, [a.name for a in sig.args[0]], sig.target, same.target, branch,
            index)


def _tape_of(body):
    for s in core.walk(body):
        if isinstance(s, Prim) and s.prim == "push" and s.args and isinstance(s.args[0], Var):
            return s.args[0].name
    return None


def _rewrite_sweep(block, k, kernel_refs, name_of, readers, drivers, top):
    loop = block[k]
    bounds = loops._range_bounds(loop.iter)
    parts = _sweep_parts(loop) if bounds is not None and not loop.exit_flags else None
    if parts is None:
        return False
    trips, sig_args, sig_name, cond_name, branch, index = parts
    fast = branch.body
    tape = _tape_of(fast)
    if tape is None or (index is not None and index[0] != tape):
        return False
    written = core.all_writes(loop.body) | {loop.target}
    hoisted: list = []
    prog = loops.match_body(fast, loop.target, written, kernel_refs, tape=tape,
                            hoisted=hoisted, loc=loop.loc)
    if prog is None or trips in prog.carried or trips in prog.invariants:
        return False
    if index is not None and (index[1] in prog.carried or index[1] in prog.invariants or
                              index[1] in core.all_writes(fast)):
        return False
    fast_ids = {id(s) for s in core.walk(fast)}
    loop_ids = {id(s) for s in core.walk(loop.body)} | {id(loop)}
    fast_writes = core.all_writes(fast)
    hoisted_names = {s.target for s in hoisted}
    slow_ids = {id(s) for s in core.walk(branch.orelse)}
    exposed = _exposed(branch.orelse)
    after = _exposed(block[k + 1:]) if top else set()
    # what the fast body writes and anything else reads: the driver returns it
    for n in fast_writes:
        if n in prog.carried or n in hoisted_names or n == trips:
            continue
        if n == prog.ys_list:
            # (the list only grows here and is stacked after the loop)
            if not readers.get(n, set()) <= loop_ids | _stack_readers(block, k, n):
                return False
            continue
        inside = (readers.get(n, set()) & loop_ids) - fast_ids
        # (the general body may read it only after writing it itself, and what
        # follows the loop only after writing it: the name is reused)
        if inside - slow_ids or (inside and n in exposed):
            return False
        if readers.get(n, set()) - loop_ids and (not top or n in after):
            return False
    if loop.target in fast_writes or readers.get(loop.target, set()) - loop_ids:
        return False
    for n in (sig_name, cond_name):
        if readers.get(n, set()) - loop_ids:
            return False
    # the signature the C steps keep: the carries' layouts, or values they never write
    for n in sig_args:
        if n in prog.carried:
            if prog.carry_start[n] == "static":
                return False
        elif n in fast_writes:
            return False
    if tape in fast_writes:
        return False
    from astjax.kernels.loop_driver import SweepDriver
    driver = SweepDriver(prog, False, index is not None)
    ref = name_of(driver, "sweep_driver")
    driver.set_name(ref)
    drivers.append(driver)
    res, ok, memo, done = f"{ref}_result", f"{ref}_ok", f"{ref}_memo", f"{ref}_done"
    loc = loop.loc
    ys_arg = Var(prog.ys_list) if prog.ys_list is not None else Const(None)
    call = [copy.copy(s) for s in hoisted]
    call += [External(res, Var(ref), [Var(memo), Var(loop.target), bounds[1], Var(trips),
                                      Var(tape), ys_arg, *(Var(n) for n in prog.carried),
                                      *(Var(n) for n in prog.invariants)], loc=loc),
             Prim(ok, "getitem", [Var(res), Index((Const(0),))], loc=loc)]

    def item(target, j):
        return Prim(target, "getitem", [Var(res), Index((Const(j),))], loc=loc)
    then = [item(done, 1), item(trips, 2)]
    if prog.ys_list is not None:
        then.append(item(prog.ys_list, 3))
    if index is not None:
        then.append(item(index[1], 4))
    then += [item(n, 5 + j) for j, n in enumerate(prog.carried)]
    branch.body = call + [core.If(Var(ok), then, fast, loc=loc)]
    loop.exit_flags = [done]
    block[k:k + 1] = [Prim(memo, "make_list", [()], loc=loc),
                      core.Copy(done, Const(False), loc=loc), loop]
    return True


def _stack_readers(block, k, name):
    """The statements after the loop that stack the ``ys`` list (its one reader)."""
    return {id(s) for s in block[k + 1:] if isinstance(s, Prim) and s.prim == "tree_stack"
            and s.args and s.args[0] == Var(name)}


def _exposed(block, defined=None) -> set:
    """The names ``block`` may read before it writes them (writes inside a nested
    block count only there: a branch or loop may not run)."""
    defined = set() if defined is None else defined
    out: set = set()
    for s in block:
        if isinstance(s, core.Comment):
            continue
        names = list(core.reads(s))
        if isinstance(s, core.For) and isinstance(s.iter, Prim):
            names += core.atom_vars(s.iter.args)
        out |= {n for n in names if n not in defined}
        for b in core.child_blocks(s):
            out |= _exposed(b, set(defined))
        if not core.child_blocks(s):
            defined |= core.all_writes([s])
    return out


# ------------------------------------------------------------------- backward sweeps

def _back_parts(loop):
    """(tape, fast_trip name, checks' cotangent names, the inner If) of a backward
    sweep's body: ``fast_trip = rt.pop(tape); if fast_trip: complete =
    rt.cots_complete(checks, d_carry, d_ys); if complete: <fast> else: ... else:
    ...``."""
    body = [s for s in loop.body if not isinstance(s, core.Comment)]
    if len(body) != 2:
        return None
    pop, outer = body
    if not (isinstance(pop, Prim) and pop.prim == "pop" and pop.target and
            len(pop.args) == 1 and isinstance(pop.args[0], Var) and
            isinstance(outer, core.If) and outer.test == Var(pop.target)):
        return None
    inner = [s for s in outer.body if not isinstance(s, core.Comment)]
    if len(inner) != 2:
        return None
    check, branch = inner
    if not (isinstance(check, Prim) and check.prim == "cots_complete" and check.target and
            len(check.args) == 2 and isinstance(check.args[1], (tuple, list)) and
            all(isinstance(a, Var) for a in check.args[1]) and
            isinstance(branch, core.If) and branch.test == Var(check.target)):
        return None
    return pop.args[0].name, [a.name for a in check.args[1]], check.args[0], branch, outer


def rewrite_backward(block, k, kernel_refs, name_of, readers, drivers, top):
    """A backward sweep (``kernels/backsweep.py``): its fast trips' body gets a
    ``BackSweepDriver`` in front, and the loop skips the trips the driver ran."""
    from astjax.kernels import backsweep
    loop = block[k]
    bounds = loops._range_bounds(loop.iter)
    parts = _back_parts(loop) if bounds is not None and not loop.exit_flags else None
    if parts is None:
        return False
    tape, cots, checks, branch, outer = parts
    if not (isinstance(checks, Const) and isinstance(checks.value, tuple) and
            len(checks.value) == len(cots)):
        return False
    dys = cots[-1] if checks.value[-1] == "last" else None
    fast = branch.body
    if dys is None:          # (no ys cotangent checked: the list the body reads, if any)
        dys = next((s.args[0].name for s in core.walk(fast) if isinstance(s, Prim) and
                    s.prim == "last_cotangent" and isinstance(s.args[0], Var)), None)
    written = core.all_writes(loop.body) | {loop.target}
    got = backsweep.match(fast, tape, dys, written, kernel_refs)
    if got is None:
        return False
    ops, carried, invariants = got
    fast_ids = {id(s) for s in core.walk(fast)}
    loop_ids = {id(s) for s in core.walk(loop.body)} | {id(loop)}
    fast_writes = core.all_writes(fast)
    others = [s for s in loop.body if s is not outer] + \
        [s for s in outer.body if s is not branch]
    exposed = _exposed(branch.orelse) | _exposed(outer.orelse) | _exposed(others)
    after = _exposed(block[k + 1:]) if top else set()
    extra = []              # what the trip leaves for other trips or what follows
    for n in sorted(fast_writes):
        if n in carried or n == dys:
            continue
        inside = (readers.get(n, set()) & loop_ids) - fast_ids
        outside = readers.get(n, set()) - loop_ids
        if outside and not top:
            return False
        if (inside and n in exposed) or (outside and n in after):
            extra.append(n)
    if loop.target in fast_writes or tape in fast_writes or \
            any(c not in carried and c in fast_writes for c in cots):
        return False
    driver = backsweep.BackSweepDriver(ops, carried, invariants, dys, extra, loc=loop.loc)
    ref = name_of(driver, "back_sweep_driver")
    driver.set_name(ref)
    drivers.append(driver)
    skip_ref = name_of(driver.skip, f"{ref}_skip")
    res, ok, memo, skip = f"{ref}_result", f"{ref}_ok", f"{ref}_memo", f"{ref}_skip_trip"
    loc = loop.loc

    def item(target, j):
        return Prim(target, "getitem", [Var(res), Index((Const(j),))], loc=loc)
    call = [External(res, Var(ref), [Var(memo), Var(loop.target), bounds[1], Var(tape),
                                     Var(dys) if dys else Const(None),
                                     *(Var(n) for n in carried),
                                     *(Var(n) for n in invariants)], loc=loc),
            item(ok, 0)]
    then = ([item(dys, 1)] if dys else []) + \
        [item(n, 2 + j) for j, n in enumerate(carried + extra) if n != dys]
    branch.body = call + [core.If(Var(ok), then, fast, loc=loc)]
    loop.body = [External(skip, Var(skip_ref), [Var(memo)], loc=loc),
                 core.If(Var(skip), [], loop.body, loc=loc)]
    block[k:k + 1] = [Prim(memo, "make_list", [()], loc=loc), loop]
    return True
