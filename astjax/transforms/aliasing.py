"""Which names may share memory, and the in-place updates that aliasing makes unsound.

In NumPy ``z = y`` (or ``z = y[1:]``, ``y.T``, ``y.reshape(...)``, ``[y, x]``) makes
``z`` share memory with ``y``: ``y[i] = v`` then changes what ``z`` reads.  A
derivative that treats ``z`` and ``y`` as separate values would be silently wrong.
This module computes, flow-sensitively over the core form, the *memory* each name
may refer to (allocation sites: the statement that made the array, a parameter, an
outside value), propagated through copies, views, containers and calls astjax does
not look into, joined over branches and iterated around loops.  Two uses:

* ``check_updates`` (every differentiating transformation): an update ``y[i] = v``
  while another name that may share ``y``'s memory is still read afterwards is a
  located ``AliasError`` with the hint to copy -- never a wrong derivative;
* ``holders`` (reverse mode): the names that may see an update's memory, so that
  the backward sweep restores what an update overwrote whenever it reads any of
  them, not only the updated name itself.

Primal values need no help (generated code runs the same NumPy operations on the
same memory), so ``vmap`` and ``jit`` keep NumPy's semantics as they are.
"""
from __future__ import annotations

from astjax import core
from astjax import primitives as P
from astjax.core import Copy, External, For, If, Prim, SetItem, Var, While
from astjax.errors import DifferentiationError
from astjax.transforms.activity import Restore

# kinds whose result is always new memory (ufuncs, reductions, products, creations)
_FRESH_KINDS = frozenset({"elementwise", "reduction", "linalg", "creation", "compare",
                          "static"})
# ... except these, which may return their operand itself or a view of it
_MAY_VIEW = frozenset({"asarray", "asanyarray", "ascontiguousarray", "asfortranarray",
                       "real", "imag"})
# tapes made by reverse mode (and any list used with push/pop): a reference pushed
# there is read back only after the backward sweep restored the memory it points to
_TAPES = frozenset({"new_tape"})


class AliasError(DifferentiationError):
    """An in-place update of memory that another live name also reads."""


class Aliasing:
    """Memory facts of one core function (see the module docstring)."""

    def __init__(self, fn: core.Function):
        self.fn = fn
        self.tapes: set = set()
        # per update statement (by id): names sharing the target's memory there
        self.sharing: dict = {}
        self.defs: dict = {}   # name -> a statement that last made it share memory
        self._containers: set = set()
        self.ids_at: dict = {}   # update statement (by id) -> memory it may write
        state = {p: frozenset({("param", p)}) for p in fn.params}
        self._block(fn.body, state)

    # ---------------------------------------------------------------- dataflow

    def _ids(self, state, names):
        out = set()
        for n in names:
            out |= state.get(n, frozenset({("outside", n)}))
        return out

    def _block(self, stmts, state):
        for s in stmts:
            state = self._stmt(s, state)
        return state

    def _stmt(self, s, state):
        if isinstance(s, If):
            a = self._block(s.body, dict(state))
            b = self._block(s.orelse, dict(state))
            return _join(a, b)
        if isinstance(s, (For, While)):
            blocks = core.child_blocks(s)
            start = dict(state)
            if isinstance(s, For):
                start[s.target] = frozenset({("site", id(s))})
            for _ in range(50):
                end = dict(start)
                for b in blocks:
                    end = self._block(b, end)
                new = _join(start, end)
                if new == start:
                    break
                start = new
            return _join(state, start)
        state = dict(state)
        if isinstance(s, SetItem):
            target = state.get(s.target, frozenset({("outside", s.target)}))
            self.ids_at[id(s)] = self.ids_at.get(id(s), frozenset()) | target
            self.sharing.setdefault(id(s), set()).update(
                n for n, ids in state.items() if n != s.target and ids & target)
            if any(i in self._containers for i in target):
                # a list or dict element: the container now holds the value itself
                state[s.target] = target | self._ids(state, core.atom_vars([s.value]))
            return state
        if isinstance(s, Copy):
            state[s.target] = frozenset(self._ids(state, core.atom_vars([s.value])))
            self.defs[s.target] = s
            return state
        if isinstance(s, Prim):
            prim = P.REGISTRY[s.prim]
            if s.prim in _TAPES and s.target:
                self.tapes.add(s.target)
            if s.prim in ("push", "pop", "pop_tangent") and s.args and isinstance(
                    s.args[0], Var):
                self.tapes.add(s.args[0].name)
            if s.prim in ("push", "restore_at") and s.args and isinstance(s.args[0], Var):
                holder = s.args[0].name
                state[holder] = state.get(holder, frozenset()) | self._ids(
                    state, core.atom_vars(s.args[1:]))
            if not s.target:
                return state
            fresh = frozenset({("site", id(s))})
            if prim.kind in _FRESH_KINDS and s.prim not in _MAY_VIEW:
                state[s.target] = fresh
            else:
                if prim.kind == "structural" and s.prim.startswith(("make_", "append",
                                                                    "to_list")):
                    self._containers.add(("site", id(s)))
                state[s.target] = fresh | self._ids(state, _sources(prim, s))
                self.defs[s.target] = s
            return state
        if isinstance(s, External):
            ids = self._ids(state, core.reads(s))
            if s.target:
                state[s.target] = frozenset({("site", id(s))}) | ids
                self.defs[s.target] = s
            return state
        return state

    # ---------------------------------------------------------------- queries

    def updates(self):
        return [s for s in core.walk(self.fn.body) if isinstance(s, SetItem)]

    def holders(self, s: SetItem) -> set:
        """Names that may share the memory ``s`` updates (tapes included)."""
        return set(self.sharing.get(id(s), ()))


def _sources(prim, s):
    """Operands whose memory the result may share: those the value flows from (a
    differentiable parameter, or any operand of a primitive without a rule), never
    one read only for its shape."""
    out = []
    for pname, arg in list(zip(prim.params, s.args)) + list(s.kwargs.items()):
        if pname in prim.meta or (prim.diff and pname not in prim.diff):
            continue
        out.extend(core.atom_vars(list(arg) if isinstance(arg, tuple) else [arg]))
    return out


def _join(a, b):
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, frozenset()) | v
    return out


# ---------------------------------------------------------------------- liveness

def live_after(fn: core.Function) -> dict:
    """{id(update statement): names read after it (before being rebound)}."""
    result: dict = {}

    def block(stmts, live_out):
        live = set(live_out)
        for s in reversed(stmts):
            live = stmt(s, live)
        return live

    def stmt(s, live_out):
        if isinstance(s, If):
            test = set(core.reads(s))
            return test | block(s.body, live_out) | block(s.orelse, live_out)
        if isinstance(s, (For, While)):
            header = set(core.reads(s))
            live_in = set(live_out) | header
            for _ in range(50):
                inner = set(live_in)
                for b in reversed(core.child_blocks(s)):
                    inner = block(b, inner)
                if isinstance(s, For):
                    inner.discard(s.target)
                new = live_in | inner
                if new == live_in:
                    break
                live_in = new
            return live_in
        if isinstance(s, SetItem):
            result.setdefault(id(s), set()).update(live_out)
            return set(live_out) | set(core.reads(s))
        live = set(live_out) - set(core.writes(s))
        return live | set(core.reads(s))

    block(fn.body, set())
    return result


def check_updates(fn: core.Function, aliasing: Aliasing | None = None) -> Aliasing:
    """Refuse an in-place update whose memory another name still reads afterwards."""
    aliasing = aliasing or Aliasing(fn)
    live = live_after(fn)
    # generated reverse code: an update the backward sweep undoes (``rt.restore_at``)
    # was checked in the user's program; the sweep's later reads see restored memory
    undone = {s.target for s in core.walk(fn.body) if isinstance(s, Restore)}
    for s in aliasing.updates():
        if isinstance(s, Restore) or s.target in undone:
            continue
        bad = sorted((aliasing.holders(s) - aliasing.tapes) & live.get(id(s), set()))
        bad = [n for n in bad if not n.startswith("rt") and n not in fn.env.entries] \
            if hasattr(fn.env, "entries") else bad
        if bad:
            other = bad[0]
            made = aliasing.defs.get(other)
            where = ""
            if made is not None and made.loc is not None:
                where = f" (line {made.loc.lineno})"
            raise AliasError(
                f"{s.target} is updated in place here, but {other}{where} shares its memory "
                f"and is read afterwards: NumPy changes both, and astjax's derivative would "
                "treat them as separate values", s.loc,
                f"make the copy explicit where {other} is made ({other} = "
                f"{_base(made, s.target)}.copy()), or update a copy")
    return aliasing


def _view_definition(s, name) -> bool:
    """``name = y`` or ``name = <view of y>`` (a slice, ``.T``, ``reshape``...)."""
    if isinstance(s, Copy):
        return core.writes(s) == [name] and isinstance(s.value, Var)
    if isinstance(s, Prim) and s.target == name:
        prim = P.REGISTRY[s.prim]
        return prim.kind in ("shape", "index") or s.prim in _MAY_VIEW
    return False


def detach(fn: core.Function, aliasing: Aliasing) -> set:
    """Make every name that shares memory with an updated array its own copy, where it
    is made: ``z = y`` becomes ``z = y`` then ``z = rt.detach(z)``.

    Only run after ``check_updates`` passed: then no name is read after an update of
    memory it shares, so NumPy's results do not change; but the values that a
    backward sweep, a vjp's residuals or linearize's record keep for later are no
    longer changed under them by the update.  Returns the names detached."""
    undone = {s.target for s in core.walk(fn.body) if isinstance(s, Restore)}
    names = set()
    for s in aliasing.updates():
        if isinstance(s, Restore) or s.target in undone:
            continue
        group = (aliasing.holders(s) - aliasing.tapes) | {s.target}
        if len(group) > 1:
            names |= group

    def rewrite(stmts):
        out = []
        for s in stmts:
            for b in core.child_blocks(s):
                b[:] = rewrite(b)
            out.append(s)
            for w in core.writes(s):
                if w in names and _view_definition(s, w):
                    out.append(Prim(w, "detach", [Var(w)], loc=s.loc))
        return out

    names -= _value_free(fn)
    if names:
        fn.body[:] = rewrite(fn.body)
    return names


def private_arguments(fn: core.Function) -> list:
    """The mutation policy, one rule for every transformation: **no transformation
    ever modifies the caller's arrays.**  A function that updates an argument in place
    (``x[i] = v``, ``x *= 2``, ``params[0][...] = ...``) works on a private copy,
    made on entry (``x = rt.detach(x)``), as JAX users expect of functions of arrays;
    only ``jit(..., donate_argnums=...)`` lets a function consume an argument (jit
    drops the copy of a donated one).  Plain calls keep Python's semantics: a user
    function called from a transformed one still updates what it is given.

    Returns the parameters that got a copy (statements marked ``_private``)."""
    analysis = Aliasing(fn)
    updated = set()
    for s in analysis.updates():
        if isinstance(s, Restore):
            continue
        target = analysis.ids_at.get(id(s), frozenset())
        updated |= {i[1] for i in target if i[0] == "param"}
    copies = []
    for p in fn.params:
        if p in updated:
            st = Prim(p, "detach", [Var(p)], loc=fn.loc)
            st._private = True
            copies.append(st)
    fn.body[:0] = copies
    return [s.target for s in copies]


# linear primitives whose rules never read their operands' values
_LINEAR = frozenset({"add", "subtract", "negative", "positive", "acc"})


def _value_free(fn) -> set:
    """Names every read of which ignores the value (an operand of a sum, a shape-only
    parameter): no rule keeps them, so sharing memory costs nothing there -- the
    ``y_part`` of ``y[1:] += v`` needs no copy."""
    used = set()
    free = set()
    for s in core.walk(fn.body):
        names = set(core.reads(s))
        if isinstance(s, Prim):
            prim = P.REGISTRY[s.prim]
            quiet = set()
            for pname, arg in zip(prim.params, s.args):
                if pname in prim.meta or s.prim in _LINEAR:
                    quiet |= set(core.atom_vars(list(arg) if isinstance(arg, tuple) else [arg]))
            free |= quiet
            used |= names - quiet
        else:
            used |= names
    return free - used


def _base(made, default):
    if isinstance(made, Copy):
        return core.format_operand(made.value)
    return default


__all__ = ["Aliasing", "AliasError", "check_updates", "detach", "live_after",
           "private_arguments"]
