"""Fast backward trips: a loop body's adjoint without the shape bookkeeping.

In a loop body whose values keep their shapes (the stencil step of a ``lax.scan``),
the general rules spend the backward trip on calls that find nothing to do:
``ra.unbroadcast`` of a cotangent already shaped like its operand, ``ra.pad_vjp``
that is a slice, ``rt.acc_at`` of a slice that is a zero-padded add.  Each such call
also splits the elementwise chain that fusion would make one kernel.

So reverse mode builds a second adjoint of the body (``ReverseAD.loop_adjoint``) from
same-shape rules: ``templates/vjp_fast.py`` for arithmetic, a ``getitem`` for the
adjoint of a constant ``np.pad``, a ``pad`` (and an add) for the adjoint of a slice.
Each rule records the fact it assumes, a comparison of the shapes and dtypes of
values of the forward trip (``x`` and ``ans`` of ``ans = x * y``).  A cotangent always
has its primal's shape and dtype (the general rules end with ``unbroadcast``, the fast
ones keep the result's), so a fact about the primals is the fact the general rule
would find about the cotangent, and both adjoints compute the same numbers (to the
bit: a cotangent that may be None starts as -0.0, ``rt.cot_or_zero``).

When the facts are checked (``ReverseAD._fast_forward``): the values they name are
made by statements whose shapes follow from their operands' (``_shape_deps``), from
values made before the loop and from the loop's carried inputs.  A forward trip
whose carried inputs have a new signature (``rt.trip_signature``) runs the body as
it is, checks the facts on its values (``rt.trip_fits``) and pushes False; a trip
with the signature of one that met them runs the body without the shape stand-ins
and saved values only the general adjoint reads -- reading values of other shapes
kept them out of the step's kernels -- and pushes True.  The backward trip pops the
flag and takes the fast adjoint or the general one.
"""
from __future__ import annotations

from astjax import core
from astjax.core import Comment, Const, Copy, External, For, Index, Prim, SliceAtom, Var
from astjax.transforms.rules import rule_template

# off: every loop gets the general adjoint only (tests compare the two)
ENABLED = True

# facts (rt.trip_fits): "same": x and ans are arrays of one shape and floating dtype;
# "pad": outer is inner padded by constant widths (same floating dtype)
_TEMPLATE_PRIMS = frozenset({"add", "subtract", "multiply", "divide"})


def eligible(loop) -> bool:
    """A ``for`` body of plain statements (no branch, inner loop or in-place update),
    calling no user-defined rule (a custom_vjp's backward may return a cotangent of
    another dtype than its primal's, which the general rules' unbroadcast would cast)."""
    from astjax.transforms.custom import CUSTOM_PRIMS
    return ENABLED and isinstance(loop, For) and not loop.exit_flags and all(
        isinstance(st, (Prim, Copy, External, Comment)) and not (
            isinstance(st, Prim) and st.prim in CUSTOM_PRIMS) for st in loop.body)


class FastTrip:
    """The fast adjoint of one loop body being built: the facts its rules assume."""

    def __init__(self, loop, consts, snapshots_allowed=True):
        self.loop = loop
        # facts may read operands through snapshots, and targets assigned more than
        # once (off: only names assigned once, for a loop whose extra facts need more
        # than the trip's signature)
        self.snapshots_allowed = snapshots_allowed
        self.consts = consts
        self.facts: list = []
        self.resets: list = []        # cotangents of the trip's temporaries, set None last
        self.position = {id(st): k for k, st in enumerate(loop.body)}
        # ``for i in range(...)``: the index is a Python int on every trip, so what a
        # fact's shapes and dtypes read of it is the same on every trip (its value,
        # an index or a pad width, still is not: ``_value_known``)
        self.int_target = isinstance(loop.iter, Prim) and loop.iter.prim == "range"
        # the trip whose incoming cotangents ``rt.cots_complete`` found complete:
        # cotangent -> "array" (not None), or a tuple of those and "none" (entries of a
        # tuple cotangent); lists whose last entry is not None
        self.complete_mode = False
        self.status: dict = {}
        self.last_nonnull: set = set()
        self.writes: dict = {}
        # facts' names for operands that do not hold their value to the trip's end:
        # snapshot -> (operand, the statement reading it) (``fact_name``)
        self.snapshots: dict = {}
        for k, st in enumerate(loop.body):
            for w in core.writes(st):
                self.writes.setdefault(w, []).append(k)

    def stable(self, name, s, wrote=False) -> bool:
        """At the end of the forward trip, ``name`` still holds what ``s`` read
        (``wrote``: what ``s`` wrote to it).  A name written once, by ``s`` itself, is
        the carry ``s`` updates: a trip with the signature of one that met the fact
        starts from a value shaped like that trip's result, so the fact read on the
        result holds for what ``s`` read too."""
        at = self.writes.get(name)
        if at is None:
            return name != self.loop.target       # made before the loop
        here = self.position.get(id(s))
        if here is None:
            return False
        if len(at) == 1 and name == s.target:
            return True
        if not self.snapshots_allowed:
            return len(at) == 1 and at[0] < here
        return all(k < here or wrote and k == here for k in at)

    def readable(self, name, s) -> bool:
        """A fact can read what ``s`` read of ``name`` (``fact_name``)."""
        return self.stable(name, s) or (self.snapshots_allowed and
                                        name != self.loop.target and
                                        id(s) in self.position)

    def fact_name(self, rev, name, s) -> str:
        """The name a fact about ``s``'s operand ``name`` reads at the end of the
        forward trip: ``name`` where it still holds what ``s`` read, else a snapshot
        the checking trip takes just before ``s`` (``c = c * w`` after ``c = carry``,
        ``t * y`` before ``t`` is assigned again)."""
        if self.stable(name, s):
            return name
        assert self.readable(name, s)
        for snap, (n, st) in self.snapshots.items():
            if n == name and st is s:
                return snap
        snap = rev.names.fresh(f"{name}_read")
        self.snapshots[snap] = (name, s)
        return snap

    def carried(self, name) -> bool:
        """``name`` is read by the body before its one write: a loop carry, whose
        value (and cotangent) one trip hands to the next."""
        at = self.writes.get(name)
        if not at:
            return False
        return any(name in core.reads(st) for st in self.loop.body[:at[0] + 1])

    def carried_inputs(self):
        """The variables a trip's facts depend on that change from trip to trip (read
        before the body assigns them: ``carry``), or None when a fact depends on
        something whose shape a trip's input shapes do not decide.

        Every value the facts read comes from statements whose result's type, shape
        and dtype are decided by those of their operands (``_shape_deps``), from values
        made before the loop (the same on every trip) and from these variables: a trip
        whose carried inputs have the signature (``rt.trip_signature``) of a trip whose
        facts held meets them too, without reading the values the facts name.
        """
        body = self.loop.body
        todo = []                       # positions of statements the facts depend on
        seen, carried = set(), set()
        for _, names, _ in self.facts:
            for n in names:
                if n in self.snapshots:                   # what ``st`` read of ``name``
                    name, st = self.snapshots[n]
                    before = [k for k in self.writes.get(name, ())
                              if k < self.position[id(st)]]
                    if before:
                        todo.append(before[-1])
                    elif name in self.writes:
                        carried.add(name)                 # the trip's incoming value
                    continue
                if n == self.loop.target:
                    if self.int_target:
                        continue
                    return None
                todo.extend(self.writes.get(n, ())[-1:])  # what the trip ends with
        while todo:
            k = todo.pop()
            if k in seen:
                continue
            seen.add(k)
            deps = _shape_deps(body[k])
            if deps is None:
                return None
            shape_deps, value_deps = deps
            for r in shape_deps:
                if r == self.loop.target:
                    if self.int_target:
                        continue          # (a Python int on every trip)
                    return None
                before = [j for j in self.writes.get(r, ()) if j < k]
                if before:
                    todo.append(before[-1])   # the assignment this statement reads
                elif r in self.writes:
                    carried.add(r)            # this trip reads the last trip's value
            for r in value_deps:              # an index, pad widths: their values count
                if not self._value_known(r, k, carried):
                    return None
        return sorted(carried)

    def _value_known(self, name, k, carried, depth=0) -> bool:
        """The value ``body[k]`` reads from ``name`` is the same on every trip with one
        signature: made before the loop, carried (an int's signature is its value), or
        built from such values by tuples and copies."""
        if name == self.loop.target or depth > 16:
            return False
        before = [j for j in self.writes.get(name, ()) if j < k]
        if not before:
            if name in self.writes:
                carried.add(name)
            return True
        st = self.loop.body[before[-1]]
        if not (isinstance(st, Copy) or isinstance(st, Prim) and (
                st.prim == "make_tuple" or st.prim == "getitem" and isinstance(
                    st.args[1], Index) and all(isinstance(i, Const)
                                               for i in st.args[1].items))):
            return False           # (``carry[1]``: an entry of a carried tuple)
        return all(self._value_known(r, before[-1], carried, depth + 1)
                   for r in core.reads(st))

    def array_valued(self, name, depth=0) -> bool:
        """Every value the body assigns to ``name`` is an array (a ufunc's result, a
        pad, a slice of one): ``x[0]`` is a row, not a tuple's entry."""
        from astjax import primitives as P
        import numpy as np
        at = self.writes.get(name)
        if not at or depth > 8:
            return False
        for k in at:
            st = self.loop.body[k]
            if isinstance(st, Copy) and isinstance(st.value, Var):
                ok = self.array_valued(st.value.name, depth + 1)
            elif isinstance(st, Prim) and st.prim in ("pad", "place_at"):
                ok = True
            elif isinstance(st, Prim) and st.prim == "getitem" and isinstance(
                    st.args[0], Var) and isinstance(self.structure(st.args[0].name,
                                                                   depth + 1), tuple):
                ok = self.structure(name, depth + 1) == "array"   # (``carry[1]``)
            elif isinstance(st, Prim) and st.prim == "getitem":
                ok = isinstance(st.args[1], Index) and any(
                    isinstance(it, SliceAtom) for it in st.args[1].items) and \
                    isinstance(st.args[0], Var) and self.array_valued(st.args[0].name,
                                                                      depth + 1)
            else:
                entry = P.REGISTRY.get(st.prim) if isinstance(st, Prim) else None
                ok = entry is not None and entry.kind == "elementwise" and \
                    isinstance(entry.impl, np.ufunc)
            if not ok:
                return False
        return True

    def structure(self, name, depth=0, before=None):
        """What every trip assigns to ``name`` (the last assignment before statement
        ``before``, else its only one): "array" (an array: the runtime check makes
        sure), a tuple of structures (``make_tuple``), or None (unknown)."""
        at = [k for k in self.writes.get(name, ()) if before is None or k < before]
        if not at or (before is None and len(at) != 1) or depth > 8:
            return None
        st = self.loop.body[at[-1]]
        if isinstance(st, Copy):
            return self.structure(st.value.name, depth + 1) if isinstance(
                st.value, Var) else None
        if not isinstance(st, Prim):
            return None
        if st.prim == "make_tuple" and len(st.args) == 1:
            return tuple(self.structure(a.name, depth + 1) if isinstance(a, Var) else None
                         for a in st.args[0])
        if st.prim == "compact" and isinstance(st.args[0], Var):
            return self.structure(st.args[0].name, depth + 1, at[-1])
        if st.prim == "getitem" and isinstance(st.args[0], Var) and isinstance(
                st.args[1], Index):
            items = st.args[1].items
            inner = self.structure(st.args[0].name, depth + 1)
            if isinstance(inner, tuple):
                if len(items) == 1 and isinstance(items[0], Const) and \
                        type(items[0].value) is int and -len(inner) <= items[0].value < len(inner):
                    return inner[items[0].value]
                return None
            return "array" if inner == "array" and _placeable(st.args[1]) else None
        return "array" if self.array_valued(name) else None

    def assume_complete(self, rev) -> list:
        """(cotangent, what ``rt.cots_complete`` checks) for the trip's incoming
        cotangents it takes as complete: a carried tuple of arrays, the last entry of
        a list the body appends an array to.  They are not None from the start, so
        the trip's head (the scan's tuple plumbing, the receiver row) needs no guard
        and fuses with the kernels after it."""
        out = []
        for name, at in self.writes.items():
            if len(at) != 1:
                continue
            st = self.loop.body[at[0]]
            d = rev.adj_names.get(name)      # (no new name: resets would follow it)
            if d is None or d in rev.null or name not in rev.activity.active:
                continue                       # inactive, or a trip's own temporary
            if isinstance(st, Prim) and st.prim == "append" and st.target == name and \
                    isinstance(st.args[1], Var) and \
                    self.structure(st.args[1].name, before=at[0]) == "array":
                self.last_nonnull.add(d)
                out.append((d, "last"))
            else:
                struct = self.structure(name)
                if struct == "array" and not self.carried(name):
                    continue                   # a trip's own value, not an incoming one
                if struct != "array" and (
                        not isinstance(struct, tuple) or not _all_arrays(struct)):
                    continue
                if isinstance(struct, tuple):
                    self.status[d] = struct
                out.append((d, struct))        # a carried array is checked too: the
            rev.nonnull.add(d)                 # first backward trip's may be None
        return out

    def add_fact(self, fact):
        if fact not in self.facts:
            self.facts.append(fact)

    def spec(self):
        """(constant spec, variable names) of ``rt.trip_fits``."""
        spec, names = [], []
        for kind, vars_, widths in self.facts:
            spec.append((kind, widths) if widths is not None else (kind,))
            names.extend(vars_)
        return tuple(spec), names


def _all_arrays(struct) -> bool:
    if isinstance(struct, tuple):
        return bool(struct) and all(_all_arrays(x) for x in struct)
    return struct == "array"


def _merge(a, b):
    """The status of a sum of cotangents of these statuses ("none": known None)."""
    if a == "none":
        return b
    if b == "none":
        return a
    return "array" if a == b == "array" else None


def _tuple_entry(rev, s, g):
    """``y = t[k]`` of a tuple ``t`` in a complete trip: the general rule's ``acc_at``
    (a tuple with ``g`` at ``k``), with the entries' statuses recorded."""
    ctx, loc = rev.fast, s.loc
    t = s.args[0].name
    struct = ctx.structure(t)
    k = s.args[1].items[0].value
    dt = rev.d(t)
    if not isinstance(struct, tuple) or not -len(struct) <= k < len(struct) or (
            dt not in rev.null and dt not in ctx.status):
        return None
    k = k + len(struct) if k < 0 else k
    old = ["none"] * len(struct) if dt in rev.null else list(ctx.status[dt])
    new = ctx.status.get(g) if g in ctx.status else (
        "array" if g in rev.nonnull and struct[k] == "array" else None)
    old[k] = _merge(old[k], new) if new is not None else None
    stmt = Prim(dt, "acc_at", [Var(dt), Var(t), s.args[1], Var(g)], loc=loc)
    out = rev.meta_operands([stmt])
    rev.backward_reads.update(core.atom_vars([s.args[1]]))
    rev.null.discard(dt)
    rev.nonnull.add(dt)
    ctx.status[dt] = tuple(old)
    return out


def _tuple_parts(rev, s, wanted, g):
    """``t = (a, b, ...)`` in a complete trip, ``d_t`` a tuple of known entries: each
    operand takes its entry (``rt.cot_at``, a plain add where both are arrays, which
    fuses), none where the entry is known None."""
    ctx, loc = rev.fast, s.loc
    status = ctx.status.get(g)
    if not isinstance(status, tuple) or len(status) != len(s.args[0]):
        return None
    out = []
    for i, op in wanted:
        st = status[i]
        if st == "none":
            continue
        part = rev.names.fresh(f"{g}_{i}")
        out.append(Prim(part, "cot_at", [Var(g), Const(i)], loc=loc))
        dx = rev.d(op.name)
        was_null = dx in rev.null
        if st == "array" and ctx.array_valued(op.name) and not was_null:
            out.extend(rev.accumulate(dx, Var(part), loc, fast_add=op.name))
            continue
        out.extend(rev.accumulate(dx, Var(part), loc, surely=st is not None and (
            st == "array" or isinstance(st, tuple))))
        if was_null:
            if isinstance(st, tuple):
                ctx.status[dx] = st
        else:
            ctx.status.pop(dx, None)
    return out


def _shape_deps(st):
    """(operands whose type, shape and dtype decide those of what ``st`` makes,
    operands whose values do: an index, pad widths), or None when something else
    may (a call, a primitive not listed here)."""
    from astjax import primitives as P
    import numpy as np
    if isinstance(st, Copy):
        return ([st.value.name] if isinstance(st.value, Var) else []), []
    if not isinstance(st, Prim) or st.target is None:
        return None
    if st.prim == "tree_index":               # one step of the scanned inputs
        return core.atom_vars([st.args[0]]), []
    if st.prim in ("getitem", "pad"):         # the array, then index / widths / mode
        return core.atom_vars(st.args[:1]), [r for r in core.reads(st)
                                             if r not in core.atom_vars(st.args[:1])]
    entry = P.REGISTRY.get(st.prim)
    if st.prim == "make_tuple" or (
            entry is not None and entry.kind == "elementwise" and not st.kwargs and
            isinstance(entry.impl, np.ufunc)):
        return list(core.reads(st)), []
    return None


def constant_value(a, consts):
    """The Python value of a constant operand (a name assigned once a constant tuple)."""
    if isinstance(a, Const):
        return a.value
    if isinstance(a, Var) and a.name in consts:
        return consts[a.name].value
    return None


def _pairs(widths):
    """((before, after), ...) of non-negative ints, one per axis, or None."""
    if not (isinstance(widths, tuple) and widths):
        return None
    if not all(isinstance(w, tuple) and len(w) == 2 and all(
            type(v) is int and v >= 0 for v in w) for w in widths):
        return None
    return widths


def _slice_widths(index):
    """Pad widths that undo ``x[index]`` (zeros around the slice), or None: each item a
    unit-step slice whose start is >= 0 and whose stop is negative or absent, so the
    widths do not depend on ``x``'s shape."""
    if not isinstance(index, Index):
        return None
    out = []
    for it in index.items:
        if not isinstance(it, SliceAtom):
            return None
        lo, hi, step = (None if b is None or (isinstance(b, Const) and b.value is None)
                        else b for b in (it.lower, it.upper, it.step))
        if step is not None and not (isinstance(step, Const) and step.value == 1 and
                                     type(step.value) is int):
            return None
        if lo is not None and not (isinstance(lo, Const) and type(lo.value) is int and
                                   lo.value >= 0):
            return None
        if hi is not None and not (isinstance(hi, Const) and type(hi.value) is int and
                                   hi.value < 0):
            return None
        out.append((lo.value if lo is not None else 0, -hi.value if hi is not None else 0))
    return tuple(out) or None


def _assign_directly(stmts, acc, contribs):
    """``acc``, or nothing when it is ``d_x = t`` of a temporary ``t`` that one of
    ``stmts`` made for this contribution only: that statement then assigns ``d_x``
    itself.  (A copy of a value a fused group makes stops the group there:
    ``d_pressure_past = -d_pressure_future`` had split FWI's backward step in two
    kernels.)"""
    if not (len(acc) == 1 and isinstance(acc[0], Copy) and isinstance(acc[0].value, Var)):
        return acc
    t = acc[0].value.name
    makers = [st for st in stmts if t in core.writes(st)]
    if len(makers) != 1 or not isinstance(makers[0], Prim) or makers[0].target != t or \
            sum(isinstance(c, Var) and c.name == t for c in contribs) != 1 or \
            any(t in core.reads(st) for st in stmts):
        return acc
    makers[0].target = acc[0].target
    return []


def _full_reduction(s) -> bool:
    """``np.sum(x)`` / ``np.mean(x)`` of a name over every axis, no dtype, out or
    keepdims (arguments left at their defaults)."""
    if not (s.prim in ("sum", "mean") and not s.kwargs and s.args and
            isinstance(s.args[0], Var) and len(s.args) <= 5):
        return False
    # (axis, dtype, out: None; keepdims: False -- ``is``: 0 == False)
    want = (None, None, None, False)
    return all(isinstance(a, Const) and a.value is w and type(a.value) is type(w)
               for a, w in zip(s.args[1:], want))


def _placeable(index):
    """A basic index ``rt.place_at`` and the kernels' ``Place`` take: integers (a row
    at a run-time index) and unit-step slices."""
    if not index.items:
        return False
    for it in index.items:
        if isinstance(it, SliceAtom):
            step = it.step
            if not (step is None or isinstance(step, Const) and (
                    step.value is None or step.value == 1 and type(step.value) is int)):
                return False
            for b in (it.lower, it.upper):
                if not (b is None or isinstance(b, Var) or isinstance(b, Const) and (
                        b.value is None or type(b.value) is int)):
                    return False
        elif not (isinstance(it, Var) or isinstance(it, Const) and type(it.value) is int):
            return False
    return True


def _place_rule(rev, s, g):
    """``y = x[index]`` (a row, or a slice of fewer axes than ``x`` has): the cotangent
    placed at ``index`` -- ``d_x = place_at(g, x, index)`` where ``d_x`` is None, else
    ``d_x + place_at(g, x, index, -0.0)`` (``acc_at``'s values: -0.0 leaves ``d_x`` as
    it is around the block) -- which fuses into the trip's kernels."""
    ctx, loc = rev.fast, s.loc
    x = s.args[0].name
    dx = rev.d(x)
    if dx not in rev.null and dx not in rev.nonnull:
        return None       # (may be None: the general rule's acc_at tells them apart)
    ctx.add_fact(("part", (s.target, ctx.fact_name(rev, x, s)), None))
    rev.backward_reads.update(core.atom_vars([s.args[1]]))
    if dx in rev.null:
        rev.null.discard(dx)
        rev.nonnull.add(dx)
        return rev.meta_operands([Prim(dx, "place_at", [Var(g), Var(x), s.args[1],
                                                        Const(0.0)], loc=loc)])
    placed = rev.names.fresh(f"{dx}_placed")
    return rev.meta_operands([Prim(placed, "place_at", [Var(g), Var(x), s.args[1],
                                                        Const(-0.0)], loc=loc)]) + [
        Prim(dx, "add", [Var(dx), Var(placed)], loc=loc)]


def adjoint(rev, s, wanted, g, ans):
    """The fast adjoint of ``s`` (statements), or None when no fast rule applies."""
    ctx = rev.fast
    loc = s.loc
    # (the tuple plumbing of a complete trip: the general rules' statements, no fact)
    if ctx.complete_mode and s.prim == "getitem" and len(s.args) == 2 and isinstance(
            s.args[1], Index) and len(s.args[1].items) == 1 and isinstance(
                s.args[1].items[0], Const) and type(s.args[1].items[0].value) is int and \
            isinstance(ctx.structure(s.args[0].name), tuple):
        return _tuple_entry(rev, s, g)
    if ctx.complete_mode and s.prim == "make_tuple" and len(s.args) == 1:
        return _tuple_parts(rev, s, wanted, g)
    if not all(ctx.readable(op.name, s) for _, op in wanted) or \
            not ctx.stable(s.target, s, wrote=True):
        return None
    if s.prim in _TEMPLATE_PRIMS and not s.kwargs and len(s.args) >= 2 and (
            len(s.args) == 2 or isinstance(s.args[2], Const) and s.args[2].value is None):
        from astjax import primitives as P
        src = rule_template("vjp_fast", s.prim)
        if src is None:
            return None
        prim = P.REGISTRY[s.prim]
        stmts, contribs = rev.inline_template(src, prim, s, g, [i for i, _ in wanted], ans)
        out = list(stmts)
        for (_, op), c in zip(wanted, contribs):
            ctx.add_fact(("same", (ctx.fact_name(rev, op.name, s), s.target), None))
            acc = rev.accumulate(rev.d(op.name), c, loc, fast_add=op.name)
            out.extend(_assign_directly(out, acc, contribs))
        return out
    if _full_reduction(s) and [i for i, _ in wanted] == [0] and \
            ctx.array_valued(s.args[0].name):
        # (its cotangent is shaped like the array it reduces, whatever the shapes:
        # a plain add, which fuses with the kernels after it; no fact to check)
        from astjax import primitives as P
        x = s.args[0].name
        stmts, contribs = rev.inline_template(rule_template("vjp", s.prim),
                                              P.REGISTRY[s.prim], s, g, [0], ans)
        out = list(stmts)
        acc = rev.accumulate(rev.d(x), contribs[0], loc, fast_add=x)
        out.extend(_assign_directly(out, acc, contribs))
        return out
    if s.prim == "pad" and not s.kwargs and [i for i, _ in wanted] == [0]:
        widths = _pairs(constant_value(s.args[1], ctx.consts))
        mode = constant_value(s.args[2], ctx.consts) if len(s.args) > 2 else "constant"
        if widths is None or mode != "constant":
            return None
        x = s.args[0].name
        ctx.add_fact(("pad", (ctx.fact_name(rev, x, s), s.target), widths))
        inner = rev.names.fresh(f"d_{x}_inner")
        items = tuple(SliceAtom(Const(a) if a else None, Const(-b) if b else None, None)
                      for a, b in widths)
        out = [Prim(inner, "getitem", [Var(g), Index(items, True)], loc=loc)]
        out.extend(rev.accumulate(rev.d(x), Var(inner), loc, fast_add=x))
        return out
    if s.prim == "getitem" and len(s.args) == 2 and isinstance(s.args[1], Index) and \
            len(s.args[1].items) < 2 and _placeable(s.args[1]) and ctx.array_valued(
                s.args[0].name):
        return _place_rule(rev, s, g)
    if s.prim == "getitem" and len(s.args) == 2:
        widths = _slice_widths(s.args[1])
        x = s.args[0].name
        dx = rev.d(x)
        if widths is None or (dx not in rev.null and dx not in rev.nonnull):
            # (a cotangent that may be None takes the general rule: around the slice it
            # must become +0.0 if it was None and stay as it is if not)
            return None
        ctx.add_fact(("pad", (s.target, ctx.fact_name(rev, x, s)), widths))
        if dx in rev.null:
            # zeros around the slice, as getitem_vjp makes them
            stmt = Prim(dx, "pad", [Var(g), Const(widths), Const("constant"), Const(0.0)],
                        loc=loc)
            rev.null.discard(dx)
            rev.nonnull.add(dx)
            return [stmt]
        # d + (g placed at the slice): -0.0 around it leaves every entry of d as it is
        placed = rev.names.fresh(f"{dx}_placed")
        return [Prim(placed, "pad", [Var(g), Const(widths), Const("constant"), Const(-0.0)],
                     loc=loc),
                Prim(dx, "add", [Var(dx), Var(placed)], loc=loc)]
    return None
