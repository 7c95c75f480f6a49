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
from astjax.core import Const, Copy, External, For, If, Prim, SetItem, Var, While
from astjax.errors import DifferentiationError
from astjax.transforms.activity import Restore

# kinds whose result is always new memory (ufuncs, reductions, products, creations)
_FRESH_KINDS = frozenset({"elementwise", "reduction", "linalg", "creation", "compare",
                          "static"})
# ... except these, which may return their operand itself or a view of it
_MAY_VIEW = frozenset({"asarray", "asanyarray", "ascontiguousarray", "asfortranarray",
                       "real", "imag", "real_if_close",
                       "conj_method"})   # (x.conj() of a real array is x itself)
# ... and these when their ``copy`` argument allows it (``copy=False``/``None``: the
# operand itself when no conversion is needed)
_VIEW_UNLESS_COPIED = frozenset({"astype", "array", "nan_to_num"})


def _may_view(s) -> bool:
    """Whether a primitive of a kind that makes new arrays may return its operand or a
    view of it here (``_MAY_VIEW``; a ``copy=False``; ``np.einsum`` of one operand,
    ``'ii->i'`` or ``'ij->ji'``, is a writeable view)."""
    if s.prim in _MAY_VIEW:
        return True
    prim = P.REGISTRY[s.prim]
    bound = dict(zip(prim.params, s.args), **s.kwargs)
    if s.prim in _VIEW_UNLESS_COPIED:
        copy = bound.get("copy")
        return copy is not None and not (isinstance(copy, Const) and copy.value is True)
    if s.prim == "einsum":        # (the subscripts are among the operands: constants)
        operands = bound.get("*operands", ())
        return not isinstance(operands, tuple) or sum(
            not isinstance(o, Const) for o in operands) <= 1
    return False
# tapes made by reverse mode (and any list used with push/pop): a reference pushed
# there is read back only after the backward sweep restored the memory it points to
_TAPES = frozenset({"new_tape"})


class AliasError(DifferentiationError):
    """An in-place update of memory that another live name also reads."""


class Aliasing:
    """Memory facts of one core function (see the module docstring).

    A piece of memory is a path: a base (a parameter, the statement that made an
    array or container, an outside value) and the keys taken into it (``p["w"]``
    is ``(p, ("w",))``; a slice or a computed index is the key ``"*"``).  Two paths
    overlap when one continues the other; the items of lists, tuples and dicts built
    here are tracked by key, so ``w = p["w"]`` and ``b = p["b"]`` do not alias."""

    def __init__(self, fn: core.Function):
        self.fn = fn
        self.tapes: set = set()
        self.defs: dict = {}       # name -> a statement that last made it share memory
        self.contents: dict = {}   # container base -> {key: paths of its items}
        self.containers: set = set()  # bases that are lists, tuples or dicts built here
        self.dicts: set = set()       # ... of them, the dicts (iterating one gives keys)
        for _ in range(4):         # item facts only grow: rerun until they settle
            before = {b: dict(c) for b, c in self.contents.items()}
            self.sharing: dict = {}    # update (by id) -> names sharing its memory there
            self.ids_at: dict = {}     # update (by id) -> paths it may write
            self.state_at: dict = {}   # update (by id) -> name -> paths, there
            state = {p: frozenset({(("param", p), ())}) for p in fn.params}
            self._block(fn.body, state)
            if before == self.contents:
                break

    # ---------------------------------------------------------------- paths

    def _ids(self, state, names):
        out = set()
        for n in names:
            out |= state.get(n, frozenset({(("outside", n), ())}))
        return out

    def _items(self, base, key):
        items = self.contents.get(base, {})
        if key == "*":
            return set().union(*items.values()) if items else set()
        return set(items.get(key, ())) | set(items.get("*", ()))

    def _element(self, ids, key):
        out = set()
        for base, keys in ids:
            # a path longer than _DEPTH keys stands for everything under its prefix (a
            # prefix overlaps all it continues): x = x[0] in a loop converges
            out.add((base, keys + (key,) if len(keys) < _DEPTH else keys))
            if not keys:
                out |= self._items(base, key)
        return out

    def _store(self, ids, key, value_ids):
        for base, keys in ids:
            if not keys and base in self.contents:
                slot = self.contents[base]
                slot[key] = frozenset(slot.get(key, frozenset()) | value_ids)

    def reach(self, ids) -> set:
        """The paths and everything held in the containers among them."""
        out, todo = set(ids), list(ids)
        while todo:
            base, keys = todo.pop()
            if keys or base not in self.contents:
                continue
            for item in set().union(*self.contents[base].values()) if self.contents[
                    base] else ():
                if item not in out:
                    out.add(item)
                    todo.append(item)
        return out

    # ---------------------------------------------------------------- dataflow

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
                start[s.target] = frozenset({(("site", id(s)), ())})
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
            target = state.get(s.target, frozenset({(("outside", s.target), ())}))
            self.ids_at[id(s)] = self.ids_at.get(id(s), frozenset()) | target
            self.state_at[id(s)] = _join(self.state_at.get(id(s), {}), state)
            if _container_slot(self, target, s.index):
                # storing into a list or dict changes the container, never the item it
                # held: only other names of the container itself see the change
                shares = (n for n, ids in state.items()
                          if n != s.target and self.reach(ids) & target)
            else:
                shares = (n for n, ids in state.items()
                          if n != s.target and _overlap(self.reach(ids), target))
            self.sharing.setdefault(id(s), set()).update(shares)
            self._store(target, _key(s.index), frozenset(
                self._ids(state, core.atom_vars([s.value]))))
            return state
        if isinstance(s, Copy):
            state[s.target] = frozenset(self._ids(state, core.atom_vars([s.value])))
            self.defs[s.target] = s
            return state
        if isinstance(s, Prim):
            return self._prim(s, state)
        if isinstance(s, External):
            if s.target:
                state[s.target] = frozenset({(("site", id(s)), ())}) | frozenset(
                    self._ids(state, core.reads(s)))
                self.defs[s.target] = s
            return state
        return state

    def _prim(self, s, state):
        prim = P.REGISTRY[s.prim]
        site = ("site", id(s))
        if s.prim == "refuse_rebinding_update" and isinstance(s.args[0], Var):
            # the names that may hold the array ``y op= v`` would update in place
            name = s.args[0].name
            value = state.get(name, frozenset({(("outside", name), ())}))
            self.sharing.setdefault(id(s), set()).update(
                n for n, ids in state.items() if n != name and _overlap(self.reach(ids), value))
            return state
        if s.prim in _TAPES and s.target:
            self.tapes.add(s.target)
        if s.prim in ("push", "pop", "pop_tangent") and s.args and isinstance(s.args[0], Var):
            self.tapes.add(s.args[0].name)
        if s.prim in ("push", "restore_at", "append") and s.args and isinstance(
                s.args[0], Var):
            # the first operand now holds the others
            holder = state.get(s.args[0].name, frozenset())
            for base, keys in holder:
                if not keys:
                    self.contents.setdefault(base, {})
            self._store(holder, "*", frozenset(self._ids(state, core.atom_vars(s.args[1:]))))
            if s.prim != "append":
                return state
        if not s.target:
            return state
        if s.prim in ("make_list", "make_tuple", "make_dict"):
            keys = (list(s.args[0].value) if s.prim == "make_dict" else
                    list(range(len(s.args[0]))))
            items = s.args[1] if s.prim == "make_dict" else s.args[0]
            slot = self.contents.setdefault(site, {})
            self.containers.add(site)
            if s.prim == "make_dict":
                self.dicts.add(site)
            for k, item in zip(keys, items):
                slot[k] = frozenset(slot.get(k, frozenset()) | self._ids(
                    state, core.atom_vars([item])))
            state[s.target] = frozenset({(site, ())})
            return state
        if s.prim in ("getitem", "pop", "tree_index", "save_at"):
            key = _key(s.args[1]) if s.prim in ("getitem", "save_at") else "*"
            state[s.target] = frozenset(self._element(self._ids(
                state, core.atom_vars([s.args[0]])), key))
            self.defs[s.target] = s
            return state
        if s.prim == "append":
            return state
        if s.prim == "as_sequence":
            source = self._ids(state, core.atom_vars(s.args[:1]))
            if source and all(not keys and base in self.dicts for base, keys in source):
                state[s.target] = frozenset({(site, ())})   # a dict's keys: new strings
                return state
        if s.prim == "detach":
            # a deep copy: shares nothing; a list or dict copied is a list or dict
            source = self._ids(state, core.atom_vars(s.args[:1]))
            if source and all(not keys and base in self.containers for base, keys in source):
                self.containers.add(site)
                self.contents.setdefault(site, {})
                if all(base in self.dicts for base, _ in source):
                    self.dicts.add(site)
            state[s.target] = frozenset({(site, ())})
            self.defs[s.target] = s
            return state
        if prim.kind in _FRESH_KINDS and not _may_view(s):
            state[s.target] = frozenset({(site, ())})
            return state
        state[s.target] = frozenset({(site, ())}) | frozenset(
            self._ids(state, _sources(prim, s)))
        self.defs[s.target] = s
        return state

    # ---------------------------------------------------------------- queries

    def updates(self):
        return [s for s in core.walk(self.fn.body) if isinstance(s, SetItem)]

    def holders(self, s: SetItem) -> set:
        """Names that may share the memory ``s`` updates (tapes included)."""
        return set(self.sharing.get(id(s), ()))


_DEPTH = 4   # keys kept in a path; deeper ones are merged into their prefix


def _key(index):
    """The constant key of ``x[k]`` (an int or a string), else ``"*"``."""
    if isinstance(index, core.Index):
        if index.tuple_form or len(index.items) != 1:
            return "*"
        index = index.items[0]
    if isinstance(index, core.Const) and isinstance(index.value, (int, str)) and not \
            isinstance(index.value, bool):
        return index.value
    return "*"


def _container_slot(facts, target, index) -> bool:
    """``target[index] = v`` surely stores into a list or dict built here, not into an
    array's memory."""
    return bool(target) and all(not keys and base in facts.containers
                                for base, keys in target)


def _overlap(a, b) -> bool:
    """Some path of ``a`` and some path of ``b`` reach common memory."""
    for base, keys in a:
        for base2, keys2 in b:
            if base == base2 and all(k == k2 or "*" in (k, k2) for k, k2 in zip(keys, keys2)):
                return True
    return False


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

def _reads(s) -> set:
    """(name, key) pairs a statement reads: ``p["b"]`` reads ``(p, "b")``, anything
    else reads the whole name, ``(name, None)``."""
    if isinstance(s, Prim) and s.prim == "getitem" and isinstance(s.args[0], Var) and \
            _key(s.args[1]) != "*":
        rest = core.atom_vars(s.args[1:]) + core.atom_vars(s.kwargs.values())
        return {(s.args[0].name, _key(s.args[1]))} | {(n, None) for n in rest}
    return {(n, None) for n in core.reads(s)}


def _kill(live, names):
    return {(n, k) for n, k in live if n not in names}


def live_after(fn: core.Function) -> dict:
    """{id(update statement): (name, key) reads after it, before the name is rebound}."""
    result: dict = {}

    def block(stmts, live_out):
        live = set(live_out)
        for s in reversed(stmts):
            live = stmt(s, live)
        return live

    def stmt(s, live_out):
        if isinstance(s, If):
            test = _reads(s)
            return test | block(s.body, live_out) | block(s.orelse, live_out)
        if isinstance(s, (For, While)):
            header = _reads(s)
            live_in = set(live_out) | header
            for _ in range(50):
                inner = set(live_in)
                for b in reversed(core.child_blocks(s)):
                    inner = block(b, inner)
                if isinstance(s, For):
                    inner = _kill(inner, {s.target})
                new = live_in | inner
                if new == live_in:
                    break
                live_in = new
            return live_in
        if isinstance(s, SetItem):
            result.setdefault(id(s), set()).update(live_out)
            return set(live_out) | _reads(s)
        return _kill(live_out, set(core.writes(s))) | _reads(s)

    block(fn.body, set())
    return result


def check_updates(fn: core.Function, aliasing: Aliasing | None = None) -> Aliasing:
    """Refuse an in-place update whose memory another name still reads afterwards --
    or honour NumPy's semantics where that name is the very same array (``z = y``,
    a helper's parameter): ``z = y`` is repeated after the update, so every
    transformation sees that ``z`` changed with ``y``."""
    aliasing = aliasing or Aliasing(fn)
    live = live_after(fn)
    # generated reverse code: an update the backward sweep undoes (``rt.restore_at``)
    # was checked in the user's program; the sweep's later reads see restored memory
    undone = {s.target for s in core.walk(fn.body) if isinstance(s, Restore)}
    resync: dict = {}
    for s in aliasing.updates():
        if isinstance(s, Restore) or s.target in undone:
            continue
        state = aliasing.state_at.get(id(s), {})
        target = aliasing.ids_at.get(id(s), frozenset())
        bad = []
        forms: dict = {}
        for n, k in live.get(id(s), set()):
            forms.setdefault(n, set()).add(k)
        for n in sorted((aliasing.holders(s) - aliasing.tapes) & set(forms)):
            if n.startswith("rt") or n in getattr(fn.env, "entries", {}):
                continue
            paths = state.get(n, frozenset())
            if None not in forms[n] and not any(
                    _overlap(aliasing.reach(aliasing._element(paths, k)), target)
                    for k in forms[n]):
                continue   # read only at other keys: p["b"] after w = p["w"]; w[i] = v
            if _same_object(paths, target):
                resync.setdefault(id(s), []).append(n)
                continue
            bad.append(n)
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
    if resync:
        _insert_resync(fn.body, resync)
    return aliasing


def _same_object(a, b) -> bool:
    """Both certainly name one object: the same single path with no computed key."""
    return len(a) == 1 and a == b and all(k != "*" for _, keys in a for k in keys)


def _insert_resync(stmts, resync):
    out = []
    for s in stmts:
        for b in core.child_blocks(s):
            _insert_resync(b, resync)
        out.append(s)
        for n in resync.get(id(s), ()):
            out.append(Copy(n, Var(s.target), loc=s.loc))
    stmts[:] = out


def _view_definition(s, name) -> bool:
    """``name = y`` or ``name = <view of y>`` (a slice, ``.T``, ``reshape``...)."""
    if isinstance(s, Copy):
        return core.writes(s) == [name] and isinstance(s.value, Var)
    if isinstance(s, Prim) and s.target == name:
        prim = P.REGISTRY[s.prim]
        return prim.kind in ("shape", "index") or _may_view(s)
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
        updated |= {base[1] for base, _ in target if base[0] == "param"}
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
