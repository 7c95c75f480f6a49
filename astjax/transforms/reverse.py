"""Reverse mode: core form -> core form computing vector-Jacobian products.

The generated code is a forward sweep (the user's statements) followed by a
backward sweep (each statement's adjoint, in reverse order).  Control flow is
mirrored: an ``if`` reruns on its saved test, a loop runs backwards as many times
as it ran forwards.

Saving values: the backward sweep reads primal values where they are.  That is
exact for a variable assigned once; a variable assigned several times (in a loop,
or rebound) is pushed on a tape before each assignment and popped right after that
assignment's adjoint, so at every point of the backward sweep variables hold the
values they had at the matching point of the forward sweep.  Only variables that
the backward sweep actually reads are saved (its def-use facts decide), and the
tape holds references, not copies; in-place updates save the overwritten part.

Cotangents use ``None`` for zero; the rules come from ``templates/vjp*.py``,
inlined with the operands' names.
"""
from __future__ import annotations

from collections import Counter

from astjax import core
from astjax import primitives as P
from astjax.core import (Comment, Const, Copy, External, For, If, Index, Prim, Return, SetItem,
                         Var, While)
from astjax.errors import DifferentiationError
from astjax.transforms import activity, aliasing, custom, fast_trips
from astjax.transforms.rules import rule_template

import astjax.core_prims  # noqa: F401


def template_for(prim_name: str):
    """The vjp rule template of a primitive (parsed once), or None."""
    return rule_template("vjp", prim_name)


# ----------------------------------------------------------------- activity analysis

def _diff_operands(s: Prim):
    """Operands of a Prim at its differentiable parameters: [(param, operand)]."""
    prim = P.REGISTRY[s.prim]
    out = []
    for pname, arg in zip(prim.params, s.args):
        if pname in prim.diff:
            if pname.startswith("*"):
                for a in arg:
                    out.append((pname, a))
            else:
                out.append((pname, arg))
    return out


def _vars(ops):
    return {o.name for o in ops if isinstance(o, Var)}


def varied_variables(stmts, wrt, env=None) -> set:
    """Variables whose value may depend on the inputs ``wrt`` (both modes' activity)."""
    return activity.varied_variables(stmts, wrt, env)


class Activity:
    """Which variables carry derivatives (depend on inputs and reach the output).

    Construction checks the invariant of ``astjax/transforms/activity.py``: a
    differentiated input that reaches the output through anything without a rule is
    an error, never a silent zero.
    """

    def __init__(self, fn: core.Function, wrt: list[str], output: str):
        stmts = list(core.walk(fn.body))
        graph = activity.Graph(stmts, fn.env)
        self.varied = activity.check_no_silent_zero(stmts, wrt, [output], fn.env, graph)
        self.useful = graph.backward({output}, {activity.DIFF})
        self.active = self.varied & self.useful


# a pop of a tangent tape (forward code with loops) is a pop: its cotangent goes back
# on the mirror tape
_TAPE_OPS = frozenset({"push", "pop", "pop_tangent"})
# rules of these kinds may produce None (a zero entry of a container cotangent)
_MAY_GIVE_NONE = frozenset({"structural", "index", "other", "tape"})


def insert_activity_flags(fn: core.Function, activity: Activity, names) -> dict:
    """Track at run time whether a variable currently holds a differentiated value.

    A variable that is assigned both values that depend on the inputs and values
    that do not (``inputs = batch[0]`` then ``inputs = np.tanh(outputs)`` in a loop)
    gets a boolean companion ``<name>_varies`` set at each assignment.  The backward
    sweep skips cotangent work for it while the flag is false, so the first layer of
    an MLP does not compute a cotangent for the data.  Returns {variable: flag}.
    """
    varied = activity.varied
    active = activity.active

    def status(s, flags):
        """True / False / set of flags of mixed operands the result depends on."""
        if isinstance(s, Prim):
            ops = _vars(op for _, op in _diff_operands(s)) & varied if s.target else set()
        elif isinstance(s, Copy):
            ops = _vars([s.value]) & varied
        elif isinstance(s, SetItem):
            ops = (_vars([s.value]) & varied) | {s.target}
        else:
            return False
        if not ops:
            return False
        if any(o not in flags for o in ops):
            return True
        return {flags[o] for o in ops}

    stmts = [s for s in core.walk(fn.body) if isinstance(s, (Prim, Copy, SetItem))]
    defs = {}
    for s in stmts:
        for w in core.writes(s):
            defs.setdefault(w, []).append(s)
    # mixed: assigned a non-differentiated value somewhere, a differentiated one elsewhere
    everything = {v: "?" for v in active}
    mixed = set()
    for v in sorted(active - set(fn.params)):
        sts = [status(s, everything) for s in defs.get(v, [])]
        if any(st is False for st in sts) and any(st is not False for st in sts):
            mixed.add(v)
    # worth a flag: operands of expensive rules (matrix products...), and what they follow
    needed = set()
    for s in stmts:
        if isinstance(s, Prim) and P.REGISTRY[s.prim].kind == "linalg":
            needed |= _vars(op for _, op in _diff_operands(s)) & mixed
    todo = list(needed)
    while todo:
        v = todo.pop()
        for s in defs.get(v, []):
            st = status(s, {u: u for u in mixed})
            for u in (st if isinstance(st, set) else ()):
                if u in mixed and u not in needed:
                    needed.add(u)
                    todo.append(u)
    flags: dict[str, str] = {v: names.fresh(f"{v}_varies") for v in sorted(needed)}
    if not flags:
        return flags

    def rewrite(stmts):
        out = []
        for s in stmts:
            out.append(s)
            for b in core.child_blocks(s):
                b[:] = rewrite(b)
            if isinstance(s, (Prim, Copy, SetItem)):
                for w in core.writes(s):
                    if w in flags:
                        st = status(s, flags)
                        if isinstance(st, set):
                            st = sorted(st)
                            out.append(Prim(flags[w], "any_flag", [tuple(Var(f) for f in st)],
                                            loc=s.loc) if len(st) > 1 or st[0] != flags[w]
                                       else Copy(flags[w], Var(st[0]), loc=s.loc))
                        else:
                            out.append(Copy(flags[w], Const(bool(st)), loc=s.loc))
        return out

    fn.body[:] = rewrite(fn.body)
    return flags


def _assignment_counts(fn: core.Function):
    """How many places assign each variable, counting a place inside a loop as many."""
    counts: dict[str, int] = {p: 1 for p in fn.params}

    def visit(stmts, in_loop):
        for s in stmts:
            for w in core.writes(s):
                counts[w] = counts.get(w, 0) + (2 if in_loop or isinstance(s, For) else 1)
            if isinstance(s, If):
                visit(s.body, in_loop)
                visit(s.orelse, in_loop)
            elif isinstance(s, (For, While)):
                if isinstance(s, While):
                    visit(s.test_body, True)
                visit(s.body, True)

    visit(fn.body, False)
    return counts


# ------------------------------------------------------------------ the transformation

class ReverseAD:
    """Builds forward and backward sweeps for one core function.

    ``build()`` runs the backward generation twice: the first pass learns which
    primal variables the backward sweep reads (so which must be saved); the second
    emits the final code with saves and restores.
    """

    def __init__(self, fn: core.Function, wrt: list[str], output: str, normalizer_factory,
                 residuals: bool = False):
        self.fn = fn
        self.wrt = wrt
        # True when the backward sweep runs later from saved residuals (vjp): then
        # every shape-only read is saved as a stand-in, not the array itself
        self.residuals = residuals
        self.output = output
        custom.expand_for_reverse(fn, normalizer_factory)   # custom_vjp/jvp, checkpoint
        activity.updates_as_setitems(fn.body)
        if not fn.checked_updates:
            aliasing.detach(fn, aliasing.check_updates(fn))
        self.aliasing = aliasing.Aliasing(fn)   # what still shares memory
        self.activity = Activity(fn, wrt, output)
        self.flags = insert_activity_flags(fn, self.activity, fn.env.names)
        self.counts = _assignment_counts(fn)
        self.make_normalizer = normalizer_factory
        self.names = fn.env.names
        self.tape = self.names.fresh("tape")
        self.adj_names: dict[str, str] = {}
        self.trip_vars: set[str] = set()
        self.restore: set[str] = set()
        # arrays the backward sweep restores in place (``restore_at``)
        self.updated = {st.target for st in core.walk(fn.body) if isinstance(st, SetItem)}
        self.backward_reads: set[str] = set()
        self.meta_reads: set[str] = set()
        self.meta_of: dict[str, str] = {}
        self.tape_cotangents: set[str] = set()
        # cotangent variables known to be None / known not None at the point of emission
        self.null: set[str] = set()
        self.nonnull: set[str] = set()
        self.loop_depth = 0
        # cotangent -> the guard (an If) whose test held exactly when it is not None
        self.implied: dict = {}
        self.seeded: set = set()
        # cotangents None because a backward trip starts (see ``loop_adjoint``)
        self.trip_null: set = set()
        # loop temporaries saved at the end of their trip (``_late_values``)
        self.late_values: set = set()
        # target -> copy of its shape stand-in, while its adjoint is emitted (see
        # ``standin_pair_adjoint``)
        self.ans_standin: dict[str, str] = {}
        # shape stand-ins recorded at the end of a loop body: saved after they are
        # assigned (their trip's value), restored when the body's adjoint starts
        self.deferred_standins: set[str] = set()
        # the fast adjoint of a loop body being built (``fast_trips.FastTrip``), or None
        self.fast = None
        self.consts = None
        # the statements of the block being built (``backward``)
        self._tail: list = []
        # trip-count variable of a loop -> what backward code outside the loop's
        # adjoint reads (learnt by the dry runs of ``build``; see ``_locals``)
        self.read_outside_adjoint: dict[str, set] = {}

    # ---------------------------------------------------------------- naming

    def d(self, name: str) -> str:
        if name not in self.adj_names:
            dn = self.names.fresh(f"d_{name}")
            self.adj_names[name] = dn
            if self.loop_depth == 0:
                self.null.add(dn)  # a cotangent nothing has reached yet is zero
        return self.adj_names[name]

    def is_active(self, op) -> bool:
        return isinstance(op, Var) and op.name in self.activity.active

    def reassigned(self, name) -> bool:
        return self.counts.get(name, 0) > 1

    # ------------------------------------------------------- cotangent updates

    def accumulate(self, dx: str, contrib, loc, surely=True, fast_add=None) -> list:
        """``dx += contrib`` where None is zero; plain assignment when dx is known None.

        ``surely``: the contribution is never None at run time (array rules); the
        cotangents of containers may hold None entries, so theirs may be None.
        ``fast_add``: the primal (a name) when ``contrib`` is an array of its shape and
        dtype (a fast trip's rule): ``dx`` takes a plain add, which fuses, after
        ``rt.cot_or_zero`` when it may be None (-0.0 everywhere: adding it changes no
        bit of ``contrib``).
        """
        was_nonnull = dx in self.nonnull
        if dx in self.null:
            stmt = Copy(dx, contrib, loc=loc)
        elif fast_add:
            pre = [] if was_nonnull else self.meta_operands(
                [Prim(dx, "cot_or_zero", [Var(dx), Var(fast_add)], loc=loc)])
            self.null.discard(dx)
            self.nonnull.add(dx)
            return pre + [Prim(dx, "add", [Var(dx), contrib], loc=loc)]
        else:
            stmt = Prim(dx, "acc", [Var(dx), contrib], loc=loc)
        self.null.discard(dx)
        if surely or was_nonnull or isinstance(contrib, Var) and contrib.name in self.nonnull:
            self.nonnull.add(dx)
        else:
            self.nonnull.discard(dx)
        return [stmt]

    def reset(self, dx: str, loc) -> list:
        if dx in self.tape_cotangents:
            # a tape made anew (grad of code with a tape, inside a loop): its cotangent
            # tape starts empty again, it is not None (the pushes before it need it)
            return [Prim(dx, "new_tape", [], loc=loc)]
        if dx in self.null:
            return []
        self.null.add(dx)
        self.nonnull.discard(dx)
        if self.fast is not None and dx in self.trip_null:
            # a fast trip's own temporary: nothing in the trip reads its cotangent
            # again, so it is set None at the end of the trip, not between the
            # statements of the elementwise chain it would split
            self.fast.resets.append(dx)
            return []
        return [Copy(dx, Const(None), loc=loc)]

    def guarded(self, d_y: str, body_fn, loc) -> list:
        """Run ``body_fn`` (emitting the adjoint) only when cotangent ``d_y`` is not None."""
        if d_y in self.null:
            return []
        if d_y in self.nonnull:
            return body_fn()
        before_null, before_nonnull = set(self.null), set(self.nonnull)
        start_null = before_null
        prev = self._tail[-1] if self._tail else None
        if isinstance(prev, If) and getattr(prev, "_state", None) is not None and \
                self.implied.get(d_y) is prev:
            # d_y is not None exactly when the guard just emitted ran (``_append``
            # merges the two): what that guard's body knew at its end holds here too
            # (between the two come only restores of primal values)
            start_null, end_null, end_nonnull = prev._state
            self.null, self.nonnull = set(end_null), set(end_nonnull)
            self.null.discard(d_y)
        self.nonnull.add(d_y)
        body = body_fn()
        written = _written(body)
        # None before the test, surely not None when the body ran: not None exactly
        # when the test held (``_append`` reads it)
        implied = start_null & self.nonnull
        state = (start_null, set(self.null), set(self.nonnull))
        self.null = before_null - written
        self.nonnull = before_nonnull - written
        if not body:
            return []
        guard = If(Prim(None, "not_none", [Var(d_y)]), body, [], loc=loc)
        guard._state = state
        for v in implied:
            self.implied[v] = guard
        return [guard]

    def _append(self, out: list, stmts: list):
        """``out += stmts``, merging a guard on a cotangent into the guard just before
        it when the cotangent is not None exactly when that guard's test held.

        ``if d_a is not None: ...; d_b = f(d_a)`` then ``if d_b is not None: g(d_b)``
        becomes one block: when the first test fails, d_b is still None and the second
        body would not run either; when it holds, d_b is surely not None.  The adjoint
        of a chain is then one straight-line block, which fusion can see whole.
        """
        while stmts and out and isinstance(out[-1], If) and _guard_of(stmts[0]) and \
                self.implied.get(_guard_of(stmts[0])) is out[-1]:
            outer, inner = out[-1], stmts[0]
            outer.body.extend(inner.body)
            inner_state = getattr(inner, "_state", None)
            outer_state = getattr(outer, "_state", None)
            outer._state = None if inner_state is None or outer_state is None or \
                inner_state[0] is not outer_state[0] else inner_state
            for v in _written(inner.body):
                if self.implied.get(v) is outer:
                    del self.implied[v]
            for v, g in list(self.implied.items()):
                if g is inner:
                    self.implied[v] = outer
            stmts = stmts[1:]
        out.extend(stmts)

    # ------------------------------------------------------------ backward

    def backward(self, stmts) -> list:
        out: list = []
        rev = list(reversed(stmts))
        k = 0
        outer_tail = self._tail
        try:
            while k < len(rev):
                self._tail = out              # what ``guarded`` may continue
                s, before = rev[k], rev[k + 1] if k + 1 < len(rev) else None
                if self._own_standin(s, before):
                    self._append(out, self.standin_pair_adjoint(s, before))
                    k += 2
                    continue
                self._append(out, self.adjoint(s))
                k += 1
        finally:
            self._tail = outer_tail
        return out

    def _own_standin(self, s, prev) -> bool:
        """Whether ``s`` is the restored shape stand-in ``w_shape = rt.meta(w)`` of the
        value ``prev`` (the statement before it) assigns."""
        return (isinstance(s, Prim) and s.prim == "meta" and s.target in self.restore
                and isinstance(prev, Prim) and isinstance(s.args[0], Var)
                and self.meta_of.get(s.args[0].name) == s.target
                and s.args[0].name == prev.target and prev.target in self.activity.active)

    def standin_pair_adjoint(self, standin, s) -> list:
        """``w = f(...)`` followed by ``w_shape = rt.meta(w)``: restoring the stand-in
        (a pop) comes before f's adjoint, whose rule may read the shape of its own
        result (``ans``): that read takes a copy of the stand-in made before the pop."""
        held = self.names.fresh(f"{standin.target}_ans")
        restore = self.adjoint(standin)
        self.ans_standin = {s.target: held}
        try:
            adj = self.adjoint(s)
        finally:
            self.ans_standin = {}
        if held in core.all_reads(adj):
            # read before the pop: a residual of vjp's backward function too
            self.backward_reads.add(standin.target)
            return [Copy(held, Var(standin.target), loc=s.loc)] + restore + adj
        return restore + adj

    def adjoint(self, s) -> list:
        """The adjoint of one statement, followed by restoring what it overwrote."""
        loc = s.loc
        if isinstance(s, If):
            return self.if_adjoint(s)
        if isinstance(s, (For, While)):
            return self.loop_adjoint(s)
        out: list = []
        if isinstance(s, Prim) and s.prim in _TAPE_OPS and self.is_active(s.args[0]):
            out.extend(self.tape_adjoint(s))
        elif isinstance(s, Prim) and s.target in self.restore and s.target in core.atom_vars(
                s.args):
            # y = f(y, ...): the rule needs the old y, which the tape gives back first
            new = self.names.fresh(f"{s.target}_new")
            out.append(Copy(new, Var(s.target), loc=loc))
            out.extend(self.popped(s.target, loc))
            if s.target in self.activity.active:
                out.extend(self.prim_adjoint(s, ans=new))
            elif s.target in self.adj_names and self.reassigned(s.target):
                out.extend(self.reset(self.d(s.target), loc))
            return out
        elif isinstance(s, Prim):
            if s.target and s.target in self.activity.active:
                out.extend(self.prim_adjoint(s))
            elif s.target and s.target in self.adj_names and self.reassigned(s.target):
                out.extend(self.reset(self.d(s.target), loc))
        elif isinstance(s, Copy):
            if s.target in self.activity.active:
                d_t = self.d(s.target)
                if self.is_active(s.value) and s.value.name != s.target:
                    d_src = self.d(s.value.name)

                    def body():
                        o = self.accumulate(d_src, Var(d_t), loc)
                        return o + (self.reset(d_t, loc) if self.reassigned(s.target) else [])
                    out.extend(self.guarded(d_t, body, loc))
                elif self.reassigned(s.target):
                    out.extend(self.reset(d_t, loc))
        elif isinstance(s, External):
            if s.target and s.target in self.adj_names and self.reassigned(s.target):
                out.extend(self.reset(self.d(s.target), loc))
        elif isinstance(s, SetItem):
            if s.target in self.activity.active:
                out.extend(self.setitem_adjoint(s))
        # restore what the statement overwrote
        if isinstance(s, SetItem):
            if s.target in self.restore:
                self.backward_reads.add(s.target)   # a vjp keeps it as a residual
                old = self.names.fresh(f"{s.target}_old")
                out.append(Prim(old, "pop", [Var(self.tape)], loc=loc))
                out.append(Prim(None, "restore_at", [Var(s.target), s.index, Var(old)],
                                loc=loc))
        else:
            for w in core.writes(s):
                if w in self.restore and w not in self.late_values:
                    out.extend(self.popped(w, loc))
        return out

    def popped(self, name: str, loc) -> list:
        """``name = pop(tape)``: the value ``name`` had before it was rebound.  A vjp's
        backward sweep copies an array it will restore in place: the tape holds the
        residuals' own array, and the sweep may run again (``vjp_fn`` called twice,
        or vmapped after one call)."""
        out = [Prim(name, "pop", [Var(self.tape)], loc=loc)]
        if self.residuals and name in self.updated:
            out.append(Prim(name, "copy", [Var(name)], loc=loc))
        return out

    def tape_adjoint(self, s: Prim) -> list:
        """Differentiating code that itself uses a tape (grad of grad).

        Values pushed on a tape come back by ``pop`` later, so cotangents travel the
        other way on a cotangent tape: the adjoint of ``x = tape.pop()`` pushes
        ``d_x``, the adjoint of ``tape.append(v)`` pops it into ``d_v``.  Every push and
        pop gets its mirror, so the two tapes stay aligned.
        """
        loc = s.loc
        tape = s.args[0].name
        d_tape = self.d(tape)
        self.null.discard(d_tape)
        self.nonnull.add(d_tape)
        self.tape_cotangents.add(d_tape)
        if s.prim == "push":
            value = s.args[1]
            if not self.is_active(value):
                return [Prim(None, "pop", [Var(d_tape)], loc=loc)]
            got = self.names.fresh(f"d_{value.name}_back")
            # what the mirror pushed may be None (a cotangent nothing reached)
            return [Prim(got, "pop", [Var(d_tape)], loc=loc)] + self.accumulate(
                self.d(value.name), Var(got), loc, surely=False)
        if s.target in self.activity.active:
            d_x = self.d(s.target)
            return [Prim(None, "push", [Var(d_tape), Var(d_x)], loc=loc)] + self.reset(d_x, loc)
        return [Prim(None, "push", [Var(d_tape), Const(None)], loc=loc)]

    def setitem_adjoint(self, s: SetItem) -> list:
        loc = s.loc
        d_t = self.d(s.target)
        self.backward_reads.update(core.atom_vars([s.index]))

        def body():
            out = []
            contrib = None
            if self.is_active(s.value):
                part = self.names.fresh(f"{d_t}_part")
                # (the cotangent of the entries this write kept: ``rt.cot_written``)
                out.append(Prim(part, "cot_written", [Var(d_t), s.index], loc=loc))
                contrib = self.names.fresh(f"d_{s.value.name}_part")
                shape_of = self.meta_operands([Prim(contrib, "unbroadcast", [Var(part), s.value],
                                                    loc=loc)])
                out.extend(shape_of)
            out.append(Prim(d_t, "cot_zero_at", [Var(d_t), s.index], loc=loc))
            if contrib is not None:
                # after the overwritten entries' cotangent is cleared: the value may be
                # the array itself (``y[::-1] = y``, ``y[:] = y``), whose cotangent this
                # adds to; an entry of a container's cotangent may be None
                out.extend(self.accumulate(self.d(s.value.name), Var(contrib), loc,
                                           surely=False))
            return out
        return self.integer_results_stop(s, d_t, s.target) + self.guarded(d_t, body, loc)

    def if_adjoint(self, s: If) -> list:
        null, nonnull = set(self.null), set(self.nonnull)
        body = self.backward(s.body)
        null_a, nonnull_a = self.null, self.nonnull
        self.null, self.nonnull = set(null), set(nonnull)
        orelse = self.backward(s.orelse)
        self.null &= null_a
        self.nonnull &= nonnull_a
        if not (_has_code(body) or _has_code(orelse)):
            return []
        self.backward_reads.update(core.reads(s))
        return [If(s.test, body or [], orelse, loc=s.loc)]

    def loop_adjoint(self, s) -> list:
        loc = s.loc
        outer_null, outer_nonnull = set(self.null), set(self.nonnull)
        # at the start of a backward trip, little is known about cotangents: those of
        # the trip's own temporaries are None (reset by the previous trip's adjoints,
        # and nothing after the loop reaches them); others may be anything
        self.null = {self.d(v) for v in self._locals(s) if v in self.activity.active}
        outer_trip_null, self.trip_null = self.trip_null, set(self.null)
        self.nonnull = set()
        self.loop_depth += 1
        late = self._late_values(s)
        start_null = set(self.null)

        def trip():
            inner = [st for v in reversed(late) for st in self.popped(v, loc)]
            inner = inner + self.backward(s.body)
            if isinstance(s, For) and s.target in self.restore:
                inner.extend(self.popped(s.target, loc))
            return inner

        inner = trip()
        s._fast = None
        if fast_trips.eligible(s) and self.fast is None:
            # the same trip from same-shape rules (``fast_trips``), behind the check the
            # forward trip made of the facts they assume
            def fast_trip(snapshots):
                self.null, self.trip_null, self.nonnull = \
                    set(start_null), set(start_null), set()
                self.fast = fast_trips.FastTrip(s, self._constants(), snapshots)
                try:
                    fast = trip()
                    ctx = self.fast
                    fast += [Copy(d, Const(None), loc=loc)
                             for d in dict.fromkeys(ctx.resets)]
                finally:
                    self.fast = None
                return fast, ctx, (ctx.carried_inputs() if ctx.facts else None)

            fast, ctx, carried = fast_trip(True)
            if carried is None:     # a snapshot's facts need more than signatures
                fast, ctx, carried = fast_trip(False)
            complete = None
            if carried is not None:
                facts, snaps = list(ctx.facts), dict(ctx.snapshots)
                complete = self._complete_trip(s, start_null, trip, ctx)
                if complete:
                    carried = ctx.carried_inputs()
                    if carried is None:      # its facts need more than signatures
                        ctx.facts, ctx.snapshots = facts, snaps
                        carried, complete = ctx.carried_inputs(), None
            if carried is not None:
                # the fast forward trip pushes only the shape stand-ins this reads
                # and only the trip's values this reads (pad widths the general
                # rules read are left out)
                reads = core.all_reads(fast + (complete[0] if complete else []))
                trip_values = self.deferred_standins | set(late)

                def popped(stmts):
                    return [st for st in stmts if not (
                        isinstance(st, Prim) and st.prim == "pop" and
                        st.target in trip_values and st.target not in reads)]
                fast = popped(fast)
                if complete:
                    # incoming cotangents complete: the trip without their guards
                    cond = self.names.fresh("complete_trip")
                    fast = [Prim(cond, "cots_complete", [Const(complete[1]), [
                        Var(d) for d in complete[2]]], loc=loc),
                        If(Var(cond), popped(complete[0]), fast, loc=loc)]
                ctx.standins = {w for w in trip_values if w in reads}
                ctx.carried = carried
                flag = self._fast_flag(s)
                s._fast = ctx
                inner = [Prim(flag, "pop", [Var(self.tape)], loc=loc),
                         If(Var(flag), fast, inner, loc=loc)]
        test_once = test_each = []
        if isinstance(s, While):
            test_each = self.backward(s.test_body)
            self.null, self.nonnull = set(), set()
            test_once = self.backward(s.test_body)
        self.loop_depth -= 1
        self.trip_null = outer_trip_null
        written = _written(inner + test_each + test_once)
        self.null = outer_null - written
        self.nonnull = outer_nonnull - written
        if not _has_code(inner + test_each):
            return []
        trips = self._trip_var(s)
        out = [Prim(trips, "pop", [Var(self.tape)], loc=loc)]
        if s._fast is not None:
            # (assigned besides its pops: vmap sees a flag that is the same in every
            # lane, not a value of the tape's lanes)
            out.append(Copy(s._fast_flag, Const(False), loc=loc))
        out.extend(test_once)
        out.append(For(self.names.fresh("step"), Prim(None, "range", [
            Const(0), Var(trips), Const(None)]), inner + test_each, loc=loc))
        return out

    def _complete_trip(self, loop, start_null, trip, fast):
        """(statements, checks, cotangents) of the fast trip built on the trip's
        incoming cotangents being complete (``fast_trips.FastTrip.assume_complete``),
        or None when there is nothing to assume.  The facts its rules assume join
        those of ``fast`` (the trip built without the assumption): the forward trip
        checks them all."""
        self.null, self.trip_null, self.nonnull = set(start_null), set(start_null), set()
        ctx = fast_trips.FastTrip(loop, self._constants(), bool(fast.snapshots_allowed))
        ctx.complete_mode = True
        assumed = ctx.assume_complete(self)
        if not assumed:
            return None
        self.fast = ctx
        try:
            body = trip()
            body += [Copy(d, Const(None), loc=loop.loc) for d in dict.fromkeys(ctx.resets)]
        finally:
            self.fast = None
        for fact in ctx.facts:
            fast.add_fact(fact)
        fast.snapshots.update(ctx.snapshots)
        return body, tuple(c for _, c in assumed), [d for d, _ in assumed]

    def _locals(self, loop) -> list:
        """The loop body's own temporaries (``loop_locals``), in body order; not the
        output nor a seeded cotangent's variable (their cotangent comes from outside),
        nor a value the backward sweep reads outside the loop's adjoint (a shape
        stand-in or activity flag read by the adjoint of a statement after the loop:
        the backward trips pop each trip's value, so after them it holds the first
        trip's, not the last)."""
        got = loop_locals(loop, self.fn.body, self.fn.params)
        outside = self.read_outside_adjoint.get(getattr(loop, "_trips", None), ())
        return [v for v in sorted(got, key=got.get) if v != self.output and
                self.adj_names.get(v) not in self.seeded and v not in outside]

    def _late_values(self, loop) -> list:
        """Saved temporaries of the loop body: pushed at the end of each trip (after
        the value is made, so the pushes do not split the body's elementwise chains)
        and popped when the backward trip starts."""
        got = [v for v in self._locals(loop)
               if v in self.restore and v not in self.deferred_standins]
        self.late_values.update(got)
        return got

    def _fast_flag(self, loop):
        name = getattr(loop, "_fast_flag", None)
        if name is None:
            name = self.names.fresh("fast_trip")
            loop._fast_flag = name
            loop._fast_sig = self.names.fresh("fast_sig")
        return name

    def _constants(self):
        """Names assigned once from a constant (pad widths hoisted into a tuple)."""
        if self.consts is None:
            from astjax.passes.fusion import constant_names
            self.consts = constant_names(self.fn)
        return self.consts

    def _trip_var(self, loop):
        name = getattr(loop, "_trips", None)
        if name is None:
            name = self.names.fresh("trips")
            loop._trips = name
            self.trip_vars.add(name)
        return name

    def prim_adjoint(self, s: Prim, ans: str | None = None) -> list:
        """Inline the primitive's vjp template for its active operands."""
        prim = P.REGISTRY[s.prim]
        d_y = self.d(s.target)
        wanted = [(i, op) for i, (pname, op) in enumerate(_diff_operands(s))
                  if self.is_active(op)]
        ans = ans or self.ans_standin.get(s.target, s.target)
        loc = s.loc
        if not wanted:
            return self.reset(d_y, loc) if self.reassigned(s.target) else []
        # (a custom call's backward rule is the user's: transforms/custom.py inlines it)
        src = template_for(s.prim) if s.prim != "custom_apply" else "custom"
        if src is None:
            raise DifferentiationError(
                f"primitive {s.prim!r} has no vjp rule", loc,
                "add a template to templates/vjp.py")

        def body():
            out: list = []
            g = d_y
            self_update = s.target in {op.name for _, op in wanted}
            if self_update and s.prim == "append" and not any(
                    op.name in self.flags for _, op in wanted):
                return out + self.append_adjoint(s, wanted, d_y)
            if self_update:
                # y = f(y, ...): take the cotangent out before accumulating into y
                g = self.names.fresh(f"{d_y}_in")
                out.append(Copy(g, Var(d_y), loc=loc))
                if d_y in self.nonnull:
                    self.nonnull.add(g)
                out.extend(self.reset(d_y, loc))
            if self.fast is not None and not self_update and not any(
                    op.name in self.flags for _, op in wanted):
                fast = fast_trips.adjoint(self, s, wanted, g, ans)
                if fast is not None:
                    out.extend(fast)
                    if self.reassigned(s.target):
                        out.extend(self.reset(d_y, loc))
                    return out
            if s.prim in ("getitem", "tree_index") and len(wanted) == 1 and not self.flags.get(
                    wanted[0][1].name) and (self.d(wanted[0][1].name) not in self.null or
                                            self.d(wanted[0][1].name) in self.trip_null):
                # d_x += (g placed at index): one copy instead of zeros, scatter and add
                # (also for a cotangent None because a backward trip starts: acc_at
                # takes None, and containers, as the rule's getitem_vjp does)
                # (a scan input's step, ``tree_index``: acc_step, the same for every
                # leaf of the inputs' pytree -- one step's work, not all of ``xs``)
                dx = self.d(wanted[0][1].name)
                acc_prim = "acc_at" if s.prim == "getitem" else "acc_step"
                stmt = Prim(dx, acc_prim, [Var(dx), s.args[0], s.args[1], Var(g)], loc=loc)
                out.extend(self.meta_operands([stmt]))
                self.backward_reads.update(core.atom_vars([s.args[1]]))
                self.null.discard(dx)
                self.nonnull.add(dx)
                if not self_update and self.reassigned(s.target):
                    out.extend(self.reset(d_y, loc))
                return out
            always = [(i, op) for i, op in wanted if op.name not in self.flags]
            sometimes = [(i, op) for i, op in wanted if op.name in self.flags]
            if always:
                stmts, contribs = self.inline_template(src, prim, s, g, [i for i, _ in always],
                                                       ans)
                out.extend(stmts)
                for (i, op), c in zip(always, contribs):
                    if c is not None:
                        out.extend(self.accumulate(self.d(op.name), c, loc,
                                                   surely=prim.kind not in _MAY_GIVE_NONE))
            for i, op in sometimes:
                # only while the operand holds a differentiated value
                flag = self.flags[op.name]
                self.backward_reads.add(flag)
                null, nonnull = set(self.null), set(self.nonnull)
                stmts, contribs = self.inline_template(src, prim, s, g, [i], ans)
                inner = list(stmts)
                if contribs[0] is not None:
                    inner.extend(self.accumulate(self.d(op.name), contribs[0], loc,
                                                 surely=prim.kind not in _MAY_GIVE_NONE))
                written = _written(inner)
                self.null, self.nonnull = null - written, nonnull - written
                if inner:
                    out.append(If(Var(flag), inner, [], loc=loc))
            if not self_update and self.reassigned(s.target):
                out.extend(self.reset(d_y, loc))
            return out
        return self.integer_results_stop(s, d_y, ans) + self.guarded(d_y, body, loc)

    def integer_results_stop(self, s, d_y: str, ans: str) -> list:
        """``d_y = none_if_integer(d_y, y)``: None where ``y`` is an integer array.

        An integer or boolean value is piecewise constant in whatever it was computed
        from (JAX gives it a float0 tangent).  A cast written with a constant integer
        dtype is constant already (``activity``); what is left for the run time is a
        dtype only known then (``x.astype(dt)``) and a write into an array whose dtype
        decides (``y[i] = v`` with ``y`` an integer array truncates ``v``)."""
        if d_y in self.null or not activity.may_give_integers(s, self.fn.env):
            return []
        target = s.target if isinstance(s, SetItem) else ans
        self.nonnull.discard(d_y)
        return self.meta_operands([Prim(d_y, "none_if_integer", [Var(d_y), Var(target)],
                                        loc=s.loc)])

    def append_adjoint(self, s: Prim, wanted, d_y: str) -> list:
        """``x = append(x, item)``: the item's cotangent is the last entry of ``d_x``,
        and ``d_x = drop_last(d_x)`` -- the same variable on both sides, so the
        generated code shrinks a list nothing else holds in place (``rt.drop_last_owned``)
        instead of copying every earlier step's cotangent at each step."""
        loc = s.loc
        out = []
        item = [op for i, op in wanted if i == 1]
        if item:
            last = self.names.fresh(f"{d_y}_last")
            out.append(Prim(last, "last_cotangent", [Var(d_y)], loc=loc))
        out.append(Prim(d_y, "drop_last_cotangent", [Var(d_y)], loc=loc))
        if item:
            # (a fast trip that checked the list's last entry: not None)
            surely = self.fast is not None and d_y in self.fast.last_nonnull
            out.extend(self.accumulate(self.d(item[0].name), Var(last), loc, surely=surely))
        return out

    def inline_template(self, src, prim, s: Prim, g: str, positions, ans: str):
        """(statements, one operand or None per position) for the template's cotangents.

        ``positions`` index the flattened differentiable operands (a variadic
        parameter contributes one position per operand).
        """
        if s.prim == "custom_apply":
            return custom.backward(self, s, g, positions, ans)
        fnode = src.node
        params = [a.id for a in fnode.args.args]
        bindings = {params[0]: Var(g), params[1]: Var(ans)}
        for pname, arg in zip(prim.params, s.args):
            bindings[pname.lstrip("*")] = arg
        norm = self.make_normalizer(self.names, self.fn.env)
        stmts, results = norm.template(src, fnode, bindings, s.loc, hint=self.d(s.target))
        flat = []
        for k, pname in enumerate(prim.diff):
            res = results[k] if k < len(results) else None
            arg = s.args[prim.params.index(pname)]
            if pname.startswith("*"):
                flat.extend(("seq", res, j) for j in range(len(arg)))
            else:
                flat.append(("one", res, None))
        outs = []
        extra: list = []
        for pos in positions:
            kind, res, j = flat[pos]
            if res is None or (isinstance(res, Const) and res.value is None):
                outs.append(None)
                continue
            if kind == "seq":
                t = self.names.fresh(f"{g}_{j}")
                extra.append(Prim(t, "getitem", [res, Index((Const(j),))], loc=s.loc))
                res = Var(t)
            outs.append(res)
        needed = _vars(o for o in outs if o is not None)
        for st in extra:
            needed |= set(core.reads(st))
        body = self.meta_operands(_dce(stmts, needed) + extra)
        for st in core.walk(body):
            st.loc = s.loc
        self.backward_reads.update(_vars(o for o in outs if o is not None))
        return body, outs

    def meta_operands(self, stmts) -> list:
        """Record what backward statements read; operands they read only for their shape
        are switched to the variable's shape stand-in (``x_shape = rt.meta(x)``)."""
        for st in core.walk(stmts):
            if not isinstance(st, Prim):
                self.backward_reads.update(core.reads(st))
                continue
            prim = P.REGISTRY[st.prim]
            for k, (pname, arg) in enumerate(zip(prim.params, st.args)):
                names = core.atom_vars(arg if pname.startswith("*") else [arg])
                if pname not in prim.meta:
                    self.backward_reads.update(names)
                    continue
                self.meta_reads.update(names)
                if isinstance(arg, Var) and arg.name in self.meta_of:
                    st.args[k] = Var(self.meta_of[arg.name])
                    self.backward_reads.add(self.meta_of[arg.name])
            self.backward_reads.update(core.atom_vars(st.kwargs.values()))
        return stmts

    # ------------------------------------------------------------- forward

    def forward(self, stmts) -> list:
        out: list = []
        for s in stmts:
            out.extend(self.forward_stmt(s))
        return out

    def forward_stmt(self, s) -> list:
        loc = s.loc
        pre: list = []
        if isinstance(s, SetItem):
            if s.target in self.restore:
                saved = self.names.fresh(f"{s.target}_saved")
                pre.append(Prim(saved, "save_at", [Var(s.target), s.index], loc=loc))
                pre.append(Prim(None, "push", [Var(self.tape), Var(saved)], loc=loc))
            return pre + [activity.emitted(s)]
        if isinstance(s, Prim) and s.target in self.deferred_standins:
            # saved after the assignment: the backward trip pops this trip's shape first
            if s.target in self.restore:
                return [s, Prim(None, "push", [Var(self.tape), Var(s.target)], loc=loc)]
            return [s]
        if not isinstance(s, For):
            for w in core.writes(s):
                if w in self.restore and w not in self.late_values:
                    pre.append(Prim(None, "push", [Var(self.tape), Var(w)], loc=loc))
        if isinstance(s, If):
            return pre + [If(s.test, self.forward(s.body), self.forward(s.orelse), loc=loc)]
        if isinstance(s, (For, While)):
            late = self._late_values(s) if isinstance(s, For) else []
            body = self.forward(s.body) + [
                Prim(None, "push", [Var(self.tape), Var(v)], loc=loc) for v in late]
            fast = getattr(s, "_fast", None)
            if fast is not None:
                body = self._fast_forward(s, fast, body)
            trips = getattr(s, "_trips", None)
            if trips is not None:
                body = [Prim(trips, "add", [Var(trips), Const(1)], loc=loc)] + body
            if isinstance(s, For):
                target = s.target
                if target in self.restore:
                    hidden = self.names.fresh(f"{target}_next")
                    body = [Prim(None, "push", [Var(self.tape), Var(target)], loc=loc),
                            Copy(target, Var(hidden), loc=loc)] + body
                    target = hidden
                loop = For(target, s.iter, body, s.exit_flags, loc=loc)
            else:
                loop = While(self.forward(s.test_body), s.test, body, s.exit_flags, loc=loc)
            if fast is not None:
                pre = pre + [Copy(s._fast_sig, Const(None), loc=loc)]
            if trips is None:
                return pre + [loop]
            return pre + [Copy(trips, Const(0), loc=loc), loop,
                          Prim(None, "push", [Var(self.tape), Var(trips)], loc=loc)]
        return pre + [s]

    def _fast_forward(self, loop, fast, body) -> list:
        """The forward trip of a loop with a fast backward trip (``fast_trips``).

        A trip whose carried inputs have the signature of a trip that met the facts
        runs ``body`` without the shape stand-ins only the general backward trip
        reads (they would keep values of other shapes alive, out of the trip's
        kernels) and pushes True.  Any other trip runs ``body`` as it is, checks the
        facts on its values (``rt.trip_fits``: the signature when they hold, else
        None) and pushes False.
        """
        from astjax.passes import copy_stmt
        loc = loop.loc
        sig = self.names.fresh("trip_sig")
        fast_sig = loop._fast_sig
        dropped = (self.deferred_standins | set(self._late_values(loop))) - fast.standins
        quick = [copy_stmt(st) for st in body if not (
            isinstance(st, Prim) and (st.prim == "meta" and st.target in dropped or
                                      st.prim == "push" and isinstance(st.args[1], Var) and
                                      st.args[1].name in dropped))]
        spec, names = fast.spec()
        checked = _with_snapshots(body, fast.snapshots, loc) + [
            Prim(fast_sig, "trip_fits", [Const(spec), Var(sig), [Var(n) for n in names]],
                 loc=loc),
            Prim(None, "push", [Var(self.tape), Const(False)], loc=loc)]
        quick.append(Prim(None, "push", [Var(self.tape), Const(True)], loc=loc))
        return [Prim(sig, "trip_signature", [[Var(n) for n in fast.carried]], loc=loc),
                If(Prim(None, "same_signature", [Var(sig), Var(fast_sig)]), quick, checked,
                   loc=loc)]

    # -------------------------------------------------------------- driver

    def build(self, seeded: set[str] = frozenset()):
        """(forward statements, backward statements, initial cotangent names).

        ``seeded``: cotangent names set before the backward sweep starts (the seed).
        """
        body = [s for s in self.fn.body if not isinstance(s, Return)]
        used = set(self.names.used)
        seed_names = {}

        def dry_run():
            """Generate the backward sweep only to learn what it reads."""
            nonlocal seed_names
            self._start(seeded)
            self.read_outside_adjoint = _reads_outside_loop_adjoints(self.backward(body))
            keep = {x._trips for x in core.walk(body) if hasattr(x, "_trips")} | {
                x._fast_flag for x in core.walk(body) if hasattr(x, "_fast_flag")} | {
                x._fast_sig for x in core.walk(body) if hasattr(x, "_fast_sig")}
            self.names.used = used | keep | set(self.meta_of.values())
            seed_names = seed_names or {k: v for k, v in self.adj_names.items() if v in seeded}
            self.adj_names = dict(seed_names)

        # pass 1: which primal values does the backward sweep read, and which of those
        # only for their shape?  Reassigned ones of the latter get a shape stand-in.
        dry_run()
        primal_vars = core.all_writes(body) | set(self.fn.params)
        shape_only = {v for v in self.meta_reads - self.backward_reads
                      if v in primal_vars and (self.reassigned(v) or self.residuals)}
        if shape_only:
            self.meta_of = {v: self.names.fresh(f"{v}_shape") for v in sorted(shape_only)}
            body = _insert_shape_standins(body, self.meta_of, self.fn.params,
                                          self.deferred_standins)
            body = [Prim(self.meta_of[p], "meta", [Var(p)], loc=self.fn.loc)
                    for p in self.fn.params if p in self.meta_of] + body
            self.fn.body[:] = body + [s for s in self.fn.body if isinstance(s, Return)]
            self.counts = _assignment_counts(self.fn)
            dry_run()
        primal_vars = core.all_writes(body) | set(self.fn.params)

        def needs_restore(reads):
            got = {v for v in reads & primal_vars
                   if self.reassigned(v) and v not in self.trip_vars}
            # an update whose memory another name shares: restore it when the backward
            # sweep reads any of them (``z = y`` read by a rule, then ``y[i] = v``)
            return got | {s.target for s in self.aliasing.updates()
                          if self.aliasing.holders(s) & reads}

        # restoring a value gives its block a pop, so a branch or loop that had no
        # backward code now has some and reads its test (``go_on`` of a continue) or
        # trip count: grow the restored set until it covers what that code reads
        self.restore = needs_restore(self.backward_reads)
        while True:
            dry_run()
            more = needs_restore(self.backward_reads) - self.restore
            if not more:
                break
            self.restore |= more
        # pass 2: the real thing (same names as the dry runs chose)
        self._start(seeded)
        backward = self.backward(body)
        forward = self.forward(body)
        return forward, backward

    def _start(self, seeded):
        self.backward_reads = set()
        self.meta_reads = set()
        self.null = set()
        self.nonnull = set(seeded)
        self.seeded = set(seeded)
        self.trip_null = set()
        self.late_values = set()
        self.implied = {}
        self.loop_depth = 0

    def initial_cotangents(self, backward, epilogue_reads, seeded) -> list:
        """``d_x = None`` for cotangents that may be read before anything writes them."""
        first: dict[str, str] = {}

        def visit(stmts, top):
            for st in stmts:
                for r in core.reads(st):
                    first.setdefault(r, "read")
                for b in core.child_blocks(st):
                    visit(b, False)
                for w in core.writes(st):
                    first.setdefault(w, "write" if top else "read")
        visit(backward, True)
        for r in epilogue_reads:
            first.setdefault(r, "read")
        names = [d for d in self.adj_names.values() if d not in seeded]
        tapes = [Prim(d, "new_tape", []) for d in names if d in self.tape_cotangents]
        return tapes + [Copy(d, Const(None)) for d in names
                        if first.get(d) == "read" and d not in self.tape_cotangents]


def _reads_outside_loop_adjoints(backward) -> dict:
    """{trip-count variable of a loop: names read by backward code outside the
    adjoint of that loop}, from a backward sweep ``loop_adjoint`` wrote."""
    total = Counter(r for st in core.walk(backward) for r in core.reads(st))
    out = {}
    for st in core.walk(backward):
        if isinstance(st, For) and isinstance(st.iter, Prim) and st.iter.prim == "range" \
                and len(st.iter.args) > 1 and isinstance(st.iter.args[1], Var):
            inside = Counter(r for x in core.walk(st.body) for r in core.reads(x))
            out[st.iter.args[1].name] = {v for v, n in total.items() if n > inside[v]}
    return out


def _written(stmts) -> set:
    return core.all_writes(stmts)


def _insert_shape_standins(stmts, meta_of, params, deferred=None, root=None) -> list:
    """After every assignment of a variable in ``meta_of``, record its shape stand-in.

    In a ``for`` body, the stand-ins of the body's own temporaries (``loop_locals``)
    are recorded together at the end of the body instead, and their names added to
    ``deferred``: a stand-in between two elementwise statements would split the chain
    that fusion makes one kernel.
    """
    root = stmts if root is None else root
    deferred = set() if deferred is None else deferred
    out = []
    for s in stmts:
        if isinstance(s, For):
            late = {v: k for v, k in loop_locals(s, root, params).items() if v in meta_of}
            body = _insert_shape_standins(s.body, {v: m for v, m in meta_of.items()
                                                   if v not in late},
                                          params, deferred, root)
            for v in sorted(late, key=lambda v: late[v]):
                body.append(Prim(meta_of[v], "meta", [Var(v)], loc=s.body[late[v]].loc))
                deferred.add(meta_of[v])
            if s.target in meta_of:
                body = [Prim(meta_of[s.target], "meta", [Var(s.target)], loc=s.loc)] + body
            s.body[:] = body
            out.append(s)
            continue
        for b in core.child_blocks(s):
            b[:] = _insert_shape_standins(b, meta_of, params, deferred, root)
        out.append(s)
        if isinstance(s, (Prim, Copy, External, SetItem)):
            for w in core.writes(s):
                if w in meta_of:
                    out.append(Prim(meta_of[w], "meta", [Var(w)], loc=s.loc))
    return out


def _guard_of(st):
    """The cotangent an ``if d_x is not None:`` block (no else) tests, or None."""
    if isinstance(st, If) and not st.orelse and isinstance(st.test, Prim) and \
            st.test.prim == "not_none" and isinstance(st.test.args[0], Var):
        return st.test.args[0].name
    return None


def loop_locals(loop, root, params=()) -> dict:
    """{variable: position in the body} of a ``for`` body's own temporaries.

    A temporary is assigned by one statement of the whole function (``root``), at the
    top of this body (so on every trip, the loop having no early exit), and read
    nowhere before that statement in the body nor anywhere outside the loop: each
    trip makes its own value and nothing sees another trip's.  So a backward trip may
    take the trip's value (or shape) from the tape when it starts, and its
    cotangent is None then (the previous trip's adjoint reset it).
    """
    if not isinstance(loop, For) or loop.exit_flags:
        return {}
    writers: dict = {}
    reads_all: dict = {}
    for st in core.walk(root):
        for w in core.writes(st):
            writers[w] = writers.get(w, 0) + 1
        for r in core.reads(st):
            reads_all[r] = reads_all.get(r, 0) + 1
    reads_in: dict = {}
    for st in core.walk(loop.body):
        for r in core.reads(st):
            reads_in[r] = reads_in.get(r, 0) + 1
    out = {}
    seen = set()
    for k, s in enumerate(loop.body):
        seen |= set(core.reads(s))
        for b in core.child_blocks(s):
            seen |= core.all_reads(b)
        if not isinstance(s, (Prim, Copy, External)):
            continue
        for w in core.writes(s):
            if w != loop.target and w not in params and writers.get(w) == 1 and \
                    w not in seen and reads_all.get(w, 0) == reads_in.get(w, 0):
                out[w] = k
    return out


def _has_code(stmts) -> bool:
    return any(not isinstance(s, Comment) for s in stmts)


def _dce(stmts, needed: set) -> list:
    """Drop straight-line statements whose results nothing needs (rule templates)."""
    keep = []
    needed = set(needed)
    for s in reversed(stmts):
        ws = core.writes(s)
        if isinstance(s, (Prim, Copy)) and ws and not (set(ws) & needed):
            continue
        keep.append(s)
        needed |= set(core.reads(s))
        for b in core.child_blocks(s):
            needed |= core.all_reads(b)
    return list(reversed(keep))


__all__ = ["ReverseAD", "Activity", "template_for"]


def _with_snapshots(body, snapshots, loc) -> list:
    """``body`` with each fact's snapshot (``fast_trips.FastTrip.fact_name``) taken
    just before the statement that reads it; a snapshot whose statement is not in the
    trip's body is None, and its fact fails (the trip keeps the general adjoint)."""
    before: dict = {}
    for snap, (name, st) in snapshots.items():
        before.setdefault(id(st), []).append(Copy(snap, Var(name), loc=loc))
    out = [Copy(snap, Const(None), loc=loc) for snap, (_, st) in snapshots.items()
           if not any(b is st for b in body)]
    for b in body:
        out.extend(before.get(id(b), ()))
        out.append(b)
    return out
