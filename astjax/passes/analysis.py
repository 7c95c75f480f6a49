"""Facts the optimization passes share: purity, aliasing, liveness, forward facts.

Every pass must be right for code whose variables are reassigned (loops, branches)
and whose arrays are updated in place, so the reasoning lives here once:

* ``is_pure``: a Prim that only computes its result (no tape push/pop, no ``out=``
  argument, no deliberate check that raises); only those may be removed, reused or
  moved.
* ``Aliases``: which variables may refer to the same (or a contained) object, and
  which of those objects are ever mutated.  Flow-insensitive and conservative:
  every statement ties its target to its operands unless the primitive is known to
  return a fresh object, values pushed on a tape are tied to everything popped, and
  parameters and names from outside the function all share one class.  A class is
  "mutated" when an in-place update (``x[i] = v``, ``rt.restore_at``, ``out=``), a
  tape push/pop, an iteration over an iterator, or an opaque ``External`` call may
  change an object in it.
* ``liveness``: backward liveness with fixpoints on loops (a value read in a later
  iteration is live), the Return value live.
* ``Facts`` + ``ForwardWalker``: forward facts about variables over straight-line
  code; entering a branch copies them, leaving it forgets facts about anything the
  branch writes, and a loop forgets, before and inside its body, facts about
  anything written anywhere in the loop.
"""
from __future__ import annotations

import numpy as np

from astjax import core, primitives as P
from astjax.core import (Assert, Const, Copy, External, For, If, Index, Prim, Raise, Return,
                         SetItem, SliceAtom, Var, While)

# --------------------------------------------------------------------------- purity

# Registered primitives that do more than compute their result: tape traffic,
# in-place restores, and checks whose point is to raise.
EFFECTFUL = frozenset({
    "push", "pop", "new_tape", "replay_start", "replay", "restore_at", "save_at",
    "pop_tangent", "check_scalar_output", "unsupported", "unsupported_jvp", "add_cot_vjp",
    "norm_hvp", "einsum_jvp2", "einsum_vjp_jvp", "scan_length", "batch_size",
    "leaf_axis_size", "from_last",
    # these walk their argument, which may be an iterator (consumed on the way)
    "as_sequence", "to_list", "keys_list", "py_sum", "py_max", "py_min",
    # writes its second argument into its first (vmap: memory other names share)
    "write_back", "refuse_shared_update",
})

# Primitives that mutate the container passed as their first argument.
TAPE_MUTATORS = frozenset({"push", "pop", "replay", "pop_tangent"})


_REGISTRY = None


def registry():
    """The primitive registry (core helpers included); looked up once, asked often."""
    global _REGISTRY
    if _REGISTRY is None:
        from astjax import core_prims  # noqa: F401  (registers the core helpers)
        from astjax.primitives import REGISTRY
        _REGISTRY = REGISTRY
    return _REGISTRY


def prim_entry(name):
    return registry().get(name)


def out_operand(s: Prim):
    """The operand bound to an ``out`` parameter, when it is not None."""
    entry = prim_entry(s.prim)
    if entry is not None and "out" in entry.params:
        k = entry.params.index("out")
        if k < len(s.args) and not (isinstance(s.args[k], Const) and s.args[k].value is None):
            return s.args[k]
    v = s.kwargs.get("out")
    if v is not None and not (isinstance(v, Const) and v.value is None):
        return v
    return None


def is_pure(s) -> bool:
    """True for a Prim that may be removed when dead, reused or moved."""
    if not isinstance(s, Prim):
        return False
    entry = prim_entry(s.prim)
    if entry is None or s.prim in EFFECTFUL or entry.kind in ("tape", "effect"):
        return False
    if "not implemented" in entry.reason or "raises" in entry.reason:
        return False
    return out_operand(s) is None


def is_ufunc_prim(name) -> bool:
    entry = prim_entry(name)
    return entry is not None and isinstance(entry.impl, np.ufunc) and entry.impl.nout == 1


def is_plain_ufunc(s) -> bool:
    """``s`` calls an elementwise ufunc (one or two operands) with nothing but operands:
    no ``out=``, no keywords, no generalized signature like ``@``'s."""
    if not isinstance(s, Prim) or not is_ufunc_prim(s.prim) or s.kwargs:
        return False
    ufunc = prim_entry(s.prim).impl
    if ufunc.signature is not None or ufunc.nin > 2 or out_operand(s) is not None:
        return False
    return all(isinstance(a, Const) and a.value is None for a in s.args[ufunc.nin:])


def prints_as_operator(name) -> bool:
    entry = prim_entry(name)
    return entry is not None and bool(entry.operator)


def _fresh_result(s: Prim) -> bool:
    """The result shares no mutable object with the operands."""
    entry = prim_entry(s.prim)
    if entry is None or out_operand(s) is not None:
        return False
    if entry.kind in ("compare", "static") and s.prim != "meta" and \
            entry.operator in (None, "<", "<=", ">", ">=", "==", "!="):
        return True      # booleans, shapes, counts (``d1 | d2`` would share d1's values)
    if isinstance(entry.impl, np.ufunc):
        if not entry.operator:
            return True   # np.tanh(x): always a new NumPy array or scalar
        # ``x * 1.0``: a number, a NumPy value, or an error (never a list repeat)
        return any(isinstance(a, Const) and type(a.value) in (float, complex)
                   for a in s.args[:2])
    mod = getattr(entry.impl, "__module__", "") or ""
    if entry.kind in ("reduction", "linalg") and mod.startswith("numpy") and \
            s.prim != "einsum":
        return True
    return False


# ------------------------------------------------------------------------- aliasing

_OUTSIDE = "\0outside"   # parameters and names read from outside the function
_TAPE = "\0tape"         # everything ever pushed on (so maybe popped from) a tape


class Aliases:
    """May-alias classes of variables and the classes whose objects may be mutated."""

    def __init__(self, fn: core.Function):
        self.parent: dict[str, str] = {}
        self.mutated: set[str] = set()      # representatives of mutated classes
        self.tape_vars: set[str] = set()
        self._marks: list[str] = []
        written = core.all_writes(fn.body)
        for p in fn.params:
            self.union(p, _OUTSIDE)
        for name in core.all_reads(fn.body) | _names_in_operands(fn.body):
            if name not in written:
                self.union(name, _OUTSIDE)
        for s in core.walk(fn.body):
            self._statement(s)
        self.mutated = {self.find(m) for m in self._marks}

    # union-find
    def find(self, x):
        p = self.parent.setdefault(x, x)
        while p != x:
            self.parent[x] = self.parent.setdefault(p, p)
            x, p = p, self.parent[p]
        return x

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            # deterministic representative
            if ra < rb:
                ra, rb = rb, ra
            self.parent[ra] = rb

    def mark(self, name):
        self._marks.append(name)

    def _statement(self, s):
        if isinstance(s, Prim):
            self._prim(s)
        elif isinstance(s, Copy):
            for v in core.atom_vars([s.value]):
                self.union(s.target, v)
        elif isinstance(s, External):
            self._opaque(core.reads(s) + ([s.target] if s.target else []))
        elif isinstance(s, SetItem):
            self.mark(s.target)
            for v in core.atom_vars([s.value]):
                self.union(s.target, v)
        elif isinstance(s, For):
            if isinstance(s.iter, Prim):
                for v in core.atom_vars(s.iter.args):
                    self.union(s.target, v)
            else:
                for v in core.atom_vars([s.iter]):
                    self.union(s.target, v)
                    self.mark(v)   # iterating may consume an iterator
        elif isinstance(s, If) and isinstance(s.test, Prim):
            self._prim(s.test)

    def _prim(self, s):
        vars_ = core.atom_vars(s.args) + core.atom_vars(s.kwargs.values())
        if prim_entry(s.prim) is None:       # unknown: as opaque as an External
            self._opaque(vars_ + ([s.target] if s.target else []))
            return
        if s.prim in TAPE_MUTATORS and s.args and isinstance(s.args[0], Var):
            tape = s.args[0].name
            self.mark(tape)
            self.tape_vars.add(tape)
            for v in vars_[1:]:
                self.union(v, _TAPE)        # pushed values
            if s.target:
                self.union(s.target, _TAPE)  # popped values
                if s.prim == "replay":
                    self.union(s.target, tape)
            return
        if s.prim == "restore_at" and vars_:
            self.mark(vars_[0])
            for v in vars_[1:]:
                self.union(vars_[0], v)
        out = out_operand(s)
        if out is not None:
            for v in core.atom_vars([out]):
                self.mark(v)
        if s.target and not _fresh_result(s):
            for v in vars_:
                self.union(s.target, v)

    def _opaque(self, names):
        self.mark(_OUTSIDE)
        for v in names:
            self.union(v, _OUTSIDE)
            self.mark(v)

    def is_mutated(self, name) -> bool:
        return self.find(name) in self.mutated

    def stable(self, names) -> bool:
        """None of these variables' objects is ever mutated, nor used as a tape."""
        return not any(self.is_mutated(n) or n in self.tape_vars for n in names)


def _names_in_operands(stmts):
    out = set()
    for s in core.walk(stmts):
        if isinstance(s, External):
            out.update(core.atom_vars([s.func]))
    return out


# ------------------------------------------------------------------------- liveness

def _stmt_reads(s):
    return set(core.reads(s))


def _block_live_in(stmts, live_out, record):
    live = set(live_out)
    for s in reversed(stmts):
        if record is not None:
            record[id(s)] = frozenset(live)
        live = _stmt_live_in(s, live, record)
    return live


def _stmt_live_in(s, after, record):
    if isinstance(s, If):
        return (_stmt_reads(s) | _block_live_in(s.body, after, record)
                | _block_live_in(s.orelse, after, record))
    if isinstance(s, For):
        head = set(after) | set(s.exit_flags)
        while True:
            body_in = _block_live_in(s.body, head, None)
            new = head | (body_in - {s.target})
            if new == head:
                break
            head = new
        if record is not None:
            _block_live_in(s.body, head, record)
        return head | _stmt_reads(s)
    if isinstance(s, While):
        head: set = set()
        while True:
            body_in = _block_live_in(s.body, head, None)
            test_after = set(after) | set(s.exit_flags) | body_in | set(
                core.atom_vars([s.test]))
            new = head | _block_live_in(s.test_body, test_after, None)
            if new == head:
                break
            head = new
        if record is not None:
            body_in = _block_live_in(s.body, head, record)
            test_after = set(after) | set(s.exit_flags) | body_in | set(
                core.atom_vars([s.test]))
            _block_live_in(s.test_body, test_after, record)
        return head
    writes = set(core.writes(s)) if not isinstance(s, SetItem) else set()
    return (set(after) - writes) | _stmt_reads(s)


def liveness(fn: core.Function) -> dict:
    """``id(statement) -> frozenset`` of variables live just after it."""
    record: dict = {}
    _block_live_in(fn.body, set(), record)
    return record


def live_in_of(s, live_after) -> set:
    return _stmt_live_in(s, live_after, None)


# ----------------------------------------------------------------- operand rewriting

def _atom_map(a, fn):
    """Rewrite the Var atoms inside operand ``a`` with ``fn(var) -> atom``."""
    if isinstance(a, Var):
        return fn(a)
    if isinstance(a, Index):
        return Index(tuple(_index_item_map(i, fn) for i in a.items), a.tuple_form)
    if isinstance(a, SliceAtom):
        return SliceAtom(*(None if p is None else _atom_map(p, fn)
                           for p in (a.lower, a.upper, a.step)))
    if isinstance(a, tuple):
        return tuple(_atom_map(x, fn) for x in a)
    if isinstance(a, list):
        return [_atom_map(x, fn) for x in a]
    return a


def _index_item_map(it, fn):
    if isinstance(it, (Var, SliceAtom)):
        return _atom_map(it, fn)
    return it


def _no_const(fn):
    """Wrap an atom rewriter so that it never puts a Const where a name is needed."""
    def inner(v):
        new = fn(v)
        return new if isinstance(new, Var) else v
    return inner


def _no_neg_const(fn):
    """No negative number as the left operand of ``**`` (``-2 ** 2`` is -4)."""
    def inner(v):
        new = fn(v)
        if isinstance(new, Const) and core.format_const(new.value).startswith("-"):
            return v
        return new
    return inner


def _no_none(fn):
    def inner(v):
        new = fn(v)
        return v if isinstance(new, Const) and new.value is None else new
    return inner


def rewrite_prim_operands(s: Prim, fn):
    entry = prim_entry(s.prim)
    new_args = []
    for k, a in enumerate(s.args):
        f = fn
        if k == 0 and entry is not None and (
                s.prim in ("getitem", "getattr")
                or (entry.attribute and len(s.args) == 1)):
            f = _no_const(fn)      # ``x[i]``, ``x.shape``: x must stay a name
        elif k == 0 and entry is not None and entry.operator == "**":
            f = _no_neg_const(fn)
        if s.prim == "range":
            f = _no_none(f)        # the printer drops None arguments of range
        new_args.append(_atom_map(a, f))
    s.args = new_args
    s.kwargs = {k: _atom_map(v, fn) for k, v in s.kwargs.items()}


def rewrite_reads(s, fn):
    """Rewrite the operands a statement reads itself (not nested blocks) in place.

    ``fn(Var) -> atom`` returns the replacement (or the Var itself).
    """
    if isinstance(s, Prim):
        rewrite_prim_operands(s, fn)
    elif isinstance(s, Copy):
        s.value = _atom_map(s.value, fn)
    elif isinstance(s, External):
        s.func = _atom_map(s.func, _no_const(fn))
        s.args = [_atom_map(a, fn) for a in s.args]
        s.kwargs = {k: _atom_map(v, fn) for k, v in s.kwargs.items()}
    elif isinstance(s, SetItem):
        s.index = _atom_map(s.index, fn)
        s.value = _atom_map(s.value, fn)
    elif isinstance(s, If):
        if isinstance(s.test, Prim):
            rewrite_prim_operands(s.test, fn)
        else:
            s.test = _atom_map(s.test, fn)
    elif isinstance(s, For):
        if isinstance(s.iter, Prim):
            rewrite_prim_operands(s.iter, fn)
        else:
            s.iter = _atom_map(s.iter, _no_const(fn))
    elif isinstance(s, While):
        s.test = _atom_map(s.test, fn)
    elif isinstance(s, Assert):
        s.test = _atom_map(s.test, fn)
        if s.msg is not None:
            s.msg = _atom_map(s.msg, fn)
    elif isinstance(s, Raise):
        if s.exc is not None:
            s.exc = _atom_map(s.exc, _no_const(fn))
    elif isinstance(s, Return):
        s.value = _atom_map(s.value, fn)


# ----------------------------------------------------------------------- const values

_SIMPLE = (int, float, bool, str, complex, type(None))


def is_simple_value(v, depth=0) -> bool:
    """Python scalars, None, str and (small) tuples of them: safe to print as constants."""
    if type(v) in _SIMPLE:
        if type(v) is int and abs(v) > 2 ** 63:
            return False
        if type(v) is str and len(v) > 200:
            return False
        return True
    if type(v) is tuple and depth < 3 and len(v) <= 32:
        return all(is_simple_value(x, depth + 1) for x in v)
    return False


def is_immutable_const(c) -> bool:
    """A Const whose printed form evaluates to an equal immutable object every time."""
    v = c.value
    if is_simple_value(v) or v is Ellipsis:
        return True
    if isinstance(v, np.generic) and v.dtype.kind in "biufc":
        return True
    if isinstance(v, type) and v.__module__ in ("numpy", "builtins"):
        return True
    return False


def operand_value(a):
    """``(True, value)`` when operand ``a`` is made of constants only."""
    if isinstance(a, Const):
        return True, a.value
    if isinstance(a, Var):
        return False, None
    if isinstance(a, SliceAtom):
        parts = []
        for p in (a.lower, a.upper, a.step):
            if p is None:
                parts.append(None)
                continue
            ok, v = operand_value(p)
            if not ok:
                return False, None
            parts.append(v)
        return True, slice(*parts)
    if isinstance(a, Index):
        items = []
        for it in a.items:
            if it is None or it is Ellipsis:
                items.append(it)
                continue
            ok, v = operand_value(it)
            if not ok:
                return False, None
            items.append(v)
        if len(items) == 1 and not a.tuple_form:
            return True, items[0]
        return True, tuple(items)
    if isinstance(a, tuple):
        vals = []
        for x in a:
            ok, v = operand_value(x)
            if not ok:
                return False, None
            vals.append(v)
        return True, tuple(vals)
    return False, None


def const_key(v):
    """A hashable key that tells apart 1, 1.0, True, 0.0 and -0.0."""
    if type(v) is tuple:
        return ("tuple",) + tuple(const_key(x) for x in v)
    if type(v) in _SIMPLE or isinstance(v, np.generic) or v is Ellipsis:
        return (type(v).__qualname__, repr(v))
    if isinstance(v, slice):
        return ("slice", const_key(v.start), const_key(v.stop), const_key(v.step))
    return ("id", id(v))


def operand_key(a):
    if isinstance(a, Var):
        return ("v", a.name)
    if isinstance(a, Const):
        return ("c", const_key(a.value))
    if isinstance(a, SliceAtom):
        return ("s",) + tuple(None if p is None else operand_key(p)
                              for p in (a.lower, a.upper, a.step))
    if isinstance(a, Index):
        return ("i", a.tuple_form) + tuple(
            ("none",) if it is None else ("...",) if it is Ellipsis else operand_key(it)
            for it in a.items)
    if isinstance(a, tuple):
        return ("t",) + tuple(operand_key(x) for x in a)
    if isinstance(a, list):
        return ("l",) + tuple(operand_key(x) for x in a)
    if a is None:
        return ("none",)
    return ("id", id(a))


def prim_key(s: Prim):
    return (s.prim, tuple(operand_key(a) for a in s.args),
            tuple(sorted((k, operand_key(v)) for k, v in s.kwargs.items())))


# Python spelling of operator primitives, for evaluating them on constants.
BINARY_OPERATORS = P.PYTHON_BINARY
UNARY_OPERATORS = P.PYTHON_UNARY


# ---------------------------------------------------------------------- forward facts

class Facts:
    """Facts keyed by anything, each depending on a set of variable names."""

    def __init__(self, items=None):
        self.items: dict = dict(items or {})    # key -> (value, deps)

    def copy(self):
        return Facts(self.items)

    def get(self, key, default=None):
        hit = self.items.get(key)
        return default if hit is None else hit[0]

    def add(self, key, value, deps):
        self.items[key] = (value, frozenset(deps))

    def kill(self, names):
        names = set(names)
        if names:
            self.items = {k: v for k, v in self.items.items() if not (v[1] & names)}

    def replace(self, other):
        self.items = other.items


def effects(s) -> set:
    """Variables a statement may rebind or mutate itself (not nested blocks)."""
    out = set(core.writes(s))
    if isinstance(s, Prim):
        if s.prim in TAPE_MUTATORS or s.prim == "restore_at":
            out.update(core.atom_vars(s.args[:1]))
        o = out_operand(s)
        if o is not None:
            out.update(core.atom_vars([o]))
    elif isinstance(s, External):
        out.update(core.reads(s))
    elif isinstance(s, If) and isinstance(s.test, Prim):
        out.update(effects(s.test))
    return out


def all_effects(stmts) -> set:
    out = set()
    for s in core.walk(stmts):
        out |= effects(s)
    return out


class ForwardWalker:
    """Walk statements forward with Facts; subclasses handle plain statements.

    ``simple(s, facts)`` returns None (keep ``s``) or a list of statements replacing
    it; ``control(s, facts)`` sees If/For/While headers (their own operands).
    """

    def __init__(self):
        self.changed = False

    def run_block(self, stmts, facts):
        out = []
        for s in stmts:
            if isinstance(s, If):
                repl = self.control(s, facts)
                if repl is not None:
                    self.changed = True
                    # the replacement (a branch's statements) is walked in place
                    out.extend(self.run_block(repl, facts))
                    continue
                self.enter_branch(s, facts)
                s.body[:] = self.run_block(s.body, facts.copy())
                s.orelse[:] = self.run_block(s.orelse, facts.copy())
                facts.kill(all_effects(s.body) | all_effects(s.orelse) | effects(s))
                out.append(s)
            elif isinstance(s, For):
                repl = self.control(s, facts)
                if repl is not None:
                    self.changed = True
                    out.extend(self.run_block(repl, facts))
                    continue
                facts.kill(all_effects(s.body) | effects(s))
                s.body[:] = self.run_block(s.body, facts.copy())
                out.append(s)
            elif isinstance(s, While):
                facts.kill(all_effects(s.test_body) | all_effects(s.body))
                inner = facts.copy()
                s.test_body[:] = self.run_block(s.test_body, inner)
                self.control(s, inner)
                s.body[:] = self.run_block(s.body, inner.copy())
                facts.replace(inner)
                out.append(s)
            else:
                repl = self.simple(s, facts)
                if repl is None:
                    out.append(s)
                else:
                    self.changed = True
                    out.extend(repl)
        return out

    def enter_branch(self, s, facts):
        pass

    def control(self, s, facts):
        return None

    def simple(self, s, facts):
        return None


# ----------------------------------------------------------------------------- names

def used_names(fn: core.Function) -> set:
    names = set(fn.params)
    names |= core.all_writes(fn.body) | core.all_reads(fn.body) | _names_in_operands(fn.body)
    env = fn.env
    if hasattr(env, "entries"):
        names |= set(env.entries)
    elif isinstance(env, dict):
        names |= set(env)
    gen = getattr(env, "names", None)
    if gen is not None:
        names |= set(gen.used)
    return names


def fresh_name(fn: core.Function, hint: str) -> str:
    """A name used nowhere in ``fn`` (nor its environment); reserved from now on."""
    from astjax.frontend.names import NameGen
    gen = getattr(fn.env, "names", None)
    if gen is None:
        gen = NameGen(used_names(fn))
    else:
        for n in used_names(fn):
            gen.reserve(n)
    return gen.fresh(hint)


def count_statements(stmts) -> int:
    """Statements that do work (comments excluded), nested ones included."""
    return sum(1 for s in core.walk(stmts) if not isinstance(s, core.Comment))
