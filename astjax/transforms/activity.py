"""Activity analysis: which values carry derivatives, and the one rule that keeps
every transformation from returning a silent zero.

Every statement of the core form is read as a set of *dependence edges*
``source -> destination``, each of one of three kinds:

* ``DIFF``: the destination's derivative flows from the source through a rule
  astjax has (an operand bound to a parameter in the registry entry's ``diff``, a
  copy, a stored value, a value carried through a tape);
* ``ZERO``: the destination does not change when the source changes infinitesimally,
  by construction (a parameter outside ``diff`` of a primitive that has a rule, a
  primitive with a constant output, ``stop_gradient``, an index);
* ``REFUSE``: anything else -- a call astjax does not look into (a library function,
  a method, an attribute of an unknown object), a primitive without a rule, a value
  an unknown call may have written into (``np.copyto(a, x)``, ``obj.update(x)``).

The invariant, written once here and checked by reverse mode, forward mode and
linearize alike: **no path from a differentiated input to an output may cross a
REFUSE edge.**  Such a path is a value computed from a differentiated value through
something without a rule -- an array, a tuple from ``np.linalg.svd``, a dict, its
length-preserving unpacking, indexing or iteration alike -- and ignoring it would be
a silent zero; it is a ``DifferentiationError`` naming the user's line.  Nothing
below can bypass it: whether an edge carries a derivative is decided from the
registry's ``diff`` tuples only, and an edge this module does not know is a refusal.
"""
from __future__ import annotations

import types

import numpy as np

from astjax import core
from astjax import primitives as P
from astjax.core import Const, Copy, External, For, Prim, SetItem, Var
from astjax.errors import DifferentiationError

DIFF, ZERO, REFUSE = "diff", "zero", "refuse"

# primitives whose output is constant although they take any value: the derivative
# is zero by design, not by omission
_ZERO_BY_DESIGN = frozenset({"stop_gradient"})
# piecewise-constant functions: their rules give a zero derivative (None); known here,
# what they feed is not differentiated at all, as JAX's symbolic zeros do (the 2-norm
# of rint(x) at 0 gets a zero tangent, not 0 / 0)
_PIECEWISE_CONSTANT = frozenset({"floor", "ceil", "trunc", "rint", "fix", "round",
                                 "py_round", "floor_divide"})
# primitives that store their other operands into the first one; reverse mode mirrors
# both (a tape of cotangents for push/pop, an in-place update for restore_at).  Other
# tape primitives (save_at, pop) have rules; those without (replay...) refuse.
_UPDATES_FIRST = frozenset({"push", "restore_at"})
# methods that update their receiver (Python containers and ndarrays)
_MUTATING_METHODS = frozenset({
    "sort", "fill", "put", "resize", "itemset", "partition", "setfield", "byteswap",
    "append", "extend", "insert", "pop", "remove", "update", "setdefault", "clear", "add",
    "discard", "popitem", "reverse", "__setitem__", "__iadd__", "__imul__"})
# callables that never keep or change their arguments
_PURE_CALLEES = frozenset({id(print), id(repr), id(str), id(isinstance), id(type), id(id),
                           id(hasattr), id(callable)})


def constant_output(prim) -> bool:
    """The primitive's output does not depend on its operands' values infinitesimally."""
    return not prim.diff and (prim.kind in P.CONSTANT_KINDS or prim.name in _ZERO_BY_DESIGN)


def _names(operand) -> list:
    return core.atom_vars([operand])


def _callee_object(s: External, env):
    """The Python object an External calls, when the environment knows it."""
    if env is None or not isinstance(s.func, Var):
        return None
    entry = getattr(env, "entries", {}).get(s.func.name)
    if entry is None:
        return None
    if entry[0] == "value":
        return entry[1]
    if entry[0] == "global":
        return entry[1].get(entry[2])
    if entry[0] == "cell":
        try:
            return entry[1].cell_contents
        except ValueError:
            return None
    return None


def describe_callee(s: External, env=None) -> str:
    """``np.linalg.svd`` / ``x.tolist`` / ``fn``: how the user would name the call."""
    obj = _callee_object(s, env) if s.method is None else None
    if obj is not None:
        module = getattr(obj, "__module__", "") or ""
        name = getattr(obj, "__name__", None)
        if name and module.startswith("numpy"):
            sub = module.split(".")[1:]
            sub = [p for p in sub if not p.startswith("_")]
            return ".".join(["np"] + sub + [name])
        if name:
            return name
    callee = core.format_operand(s.func)
    return callee + (f".{s.method}" if s.method else "")


def statement_edges(s, env=None):
    """[(source, destination, kind)] for one statement (nested blocks not included)."""
    out = []
    if isinstance(s, Prim):
        prim = P.REGISTRY[s.prim]
        bound = list(zip(prim.params, s.args)) + list(s.kwargs.items())
        if s.prim in _UPDATES_FIRST:   # push(tape, v), restore_at(x, index, old)
            for pname, arg in bound[1:]:
                kind = ZERO if pname == "index" else DIFF
                for n in core.atom_vars(list(arg) if isinstance(arg, tuple) else [arg]):
                    out.extend((n, d, kind) for d in _names(s.args[0]) if n != d)
            return out
        if not s.target:
            return out
        integer = _static_dtype_kind(dict(bound).get("dtype"), env) in ("b", "i", "u") \
            or s.prim in _PIECEWISE_CONSTANT
        for pname, arg in bound:
            kind = DIFF if pname in prim.diff else REFUSE if pname in prim.refuse else (
                ZERO if prim.diff or constant_output(prim) else REFUSE)
            if integer and kind == DIFF:
                # x.astype(int), np.sum(x, dtype=int), np.floor(x): piecewise constant,
                # a zero derivative known here (no rule runs: no 0 * inf downstream)
                kind = ZERO
            for n in core.atom_vars(list(arg) if isinstance(arg, tuple) else [arg]):
                out.append((n, s.target, kind))
        return out
    if isinstance(s, Copy):
        return [(n, s.target, DIFF) for n in _names(s.value)]
    if isinstance(s, SetItem):
        out = [(n, s.target, DIFF) for n in _names(s.value)]
        out += [(n, s.target, ZERO) for n in core.atom_vars([s.index])]
        return out
    if isinstance(s, External):
        reads = [n for n in core.reads(s)]
        dests = [s.target] if s.target else []
        receiver = _names(s.func)
        if s.method is not None:
            if s.method in _MUTATING_METHODS or s.target is None:
                dests += receiver          # obj.update(x): obj now holds x
            if s.method == "at":           # np.add.at(a, index, v): a changes
                dests += _names(s.args[0]) if s.args else []
        elif s.target is None:
            obj = _callee_object(s, env)
            if obj is None or (id(obj) not in _PURE_CALLEES and _may_mutate(obj)):
                dests += [n for a in s.args for n in _names(a)]  # np.copyto(a, x)
        for d in dests:
            out.extend((n, d, REFUSE) for n in reads if n != d or s.method is not None)
        return out
    if isinstance(s, For) and not isinstance(s.iter, Prim):
        return [(n, s.target, REFUSE) for n in _names(s.iter)]
    return out


def _static_dtype_kind(arg, env=None):
    """The kind (``np.dtype.kind``) of a dtype argument known while the code is made:
    a constant, or a name folded to a fixed object (``int``, ``np.int32``); None when
    absent or known only at run time."""
    if isinstance(arg, Var) and env is not None:
        entry = getattr(env, "entries", {}).get(arg.name)
        arg = Const(entry[1]) if entry is not None and entry[0] == "value" else arg
    if not isinstance(arg, Const) or arg.value is None:
        return None
    try:
        return np.dtype(arg.value).kind
    except TypeError:
        return None


# primitives that write into an array of their operand's dtype, whatever the written
# value's (an integer array keeps integers)
_WRITES_INTO = frozenset({"setitem", "scatter_add"})


def may_give_integers(s, env=None) -> bool:
    """Whether a statement with floating operands may give an integer or boolean value
    whose dtype is known only at run time: a cast to a dtype held in a variable
    (``x.astype(dt)``), a write into an array whose dtype decides (``y[i] = v`` into
    an integer ``y`` truncates ``v``).  An integer value is piecewise constant in what
    it was computed from (JAX gives it a float0 tangent): the transformations stop its
    derivative at run time there (``ra.none_if_integer``, ``ra.zero_if_integer``); a
    constant integer dtype is stopped here already (ZERO edges)."""
    if isinstance(s, SetItem) or s.prim in _WRITES_INTO:
        return True
    prim = P.REGISTRY[s.prim]
    if "dtype" not in prim.params:
        return False
    arg = dict(zip(prim.params, s.args), **s.kwargs).get("dtype")
    if isinstance(arg, Const):
        return False
    return _static_dtype_kind(arg, env) is None


def _may_mutate(obj) -> bool:
    """A call whose result is discarded may have been made to update an argument:
    NumPy's in-place functions (copyto, put, place, fill_diagonal...) and anything
    astjax cannot see into.  Builtins that only look (print...) are exempt."""
    if isinstance(obj, types.BuiltinFunctionType) and getattr(obj, "__module__", "") in (
            "builtins", None):
        return False
    return True


class Graph:
    """The dependence edges of a whole core function, and closures over them."""

    def __init__(self, stmts, env=None):
        self.edges = []
        for s in stmts:
            for src, dst, kind in statement_edges(s, env):
                self.edges.append((src, dst, kind, s))

    def forward(self, start, kinds) -> set:
        reached = set(start)
        changed = True
        while changed:
            changed = False
            for src, dst, kind, _ in self.edges:
                if kind in kinds and src in reached and dst not in reached:
                    reached.add(dst)
                    changed = True
        return reached

    def backward(self, start, kinds) -> set:
        reached = set(start)
        changed = True
        while changed:
            changed = False
            for src, dst, kind, _ in self.edges:
                if kind in kinds and dst in reached and src not in reached:
                    reached.add(src)
                    changed = True
        return reached


def varied_variables(stmts, wrt, env=None) -> set:
    """Variables whose value may carry a derivative of the inputs ``wrt``."""
    return Graph(list(stmts), env).forward(wrt, {DIFF})


def check_no_silent_zero(stmts, wrt, outputs, env=None, graph=None):
    """Raise a located ``DifferentiationError`` if a differentiated input reaches an
    output through a REFUSE edge (see the module docstring).  Returns the varied set."""
    graph = graph or Graph(list(stmts), env)
    varied = graph.forward(wrt, {DIFF})
    reaches = graph.backward(outputs, {DIFF, REFUSE})
    for src, dst, kind, s in graph.edges:
        if kind == REFUSE and src in varied and dst in reaches:
            bad = sorted({a for a, b, k, t in graph.edges
                          if t is s and k == REFUSE and a in varied and b in reaches})
            raise refusal(s, bad, env)
    return varied


def refusal(s, bad, env=None) -> DifferentiationError:
    who = ", ".join(bad)
    dep = "depends" if len(bad) == 1 else "depend"
    if isinstance(s, Prim):
        prim = P.REGISTRY[s.prim]
        return DifferentiationError(
            f"{prim.code}() has no derivative rule in astjax (it receives {who}, which "
            f"{dep} on the differentiated input, and its result reaches the output)",
            s.loc, prim.reason or "wrap the value in astjax.stop_gradient if no derivative "
            "should flow through it")
    if isinstance(s, External):
        callee = describe_callee(s, env)
        if s.target is None or (s.method in _MUTATING_METHODS and s.target is not None and
                                bad and set(bad) - {s.target}):
            what = (f"cannot differentiate through {callee}(): astjax has no rule for it, "
                    f"and it may store {who} (which {dep} on the differentiated input) "
                    "where the output reads it")
        else:
            what = (f"cannot differentiate through {callee}(): astjax has no rule for it "
                    f"(it receives {who}, which {dep} on the differentiated input, and its "
                    "result reaches the output)")
        return DifferentiationError(
            what, s.loc, "use NumPy functions astjax knows (see astjax.primitives.REGISTRY), "
            "or wrap the value in astjax.stop_gradient if no derivative should flow through it")
    return DifferentiationError(
        f"cannot differentiate through this loop over {who}: astjax iterates over it "
        "without a rule", s.loc, "loop over range(len(...)) and index instead")


__all__ = ["DIFF", "ZERO", "REFUSE", "Graph", "statement_edges", "varied_variables",
           "check_no_silent_zero", "constant_output", "describe_callee"]


# ----------------------------------------------------- in-place updates of generated code

class Restore(SetItem):
    """``rt.restore_at(x, index, old)`` (a backward sweep undoing ``x[index] = v``),
    read by a transformation of generated code as the in-place update it is.

    Treating it as a call would hide that it overwrites ``x``: the outer reverse pass
    would not save what it overwrites (its tape holds a reference to ``x``, which the
    restoration then changes under it) and forward mode would leave ``x``'s tangent
    unrestored -- wrong second derivatives of any function with ``y[i] = v``.  As a
    ``SetItem`` every transformation handles it; ``emitted`` prints it back as the
    call (which also deletes a dict key the update had added).
    """


def updates_as_setitems(stmts) -> list:
    """Replace every ``rt.restore_at`` call in ``stmts`` (nested blocks too) by a
    ``Restore`` statement; returns ``stmts`` (changed in place)."""
    for i, s in enumerate(stmts):
        for b in core.child_blocks(s):
            updates_as_setitems(b)
        if isinstance(s, Prim) and s.prim == "restore_at" and isinstance(s.args[0], Var):
            index = s.args[1]
            if not isinstance(index, core.Index):
                index = core.Index((index,))
            stmts[i] = Restore(s.args[0].name, index, s.args[2], loc=s.loc)
    return stmts


def emitted(s):
    """The statement to print for ``s`` (a ``Restore`` goes back to the call)."""
    if isinstance(s, Restore):
        return Prim(None, "restore_at", [Var(s.target), s.index, s.value], loc=s.loc)
    return s
