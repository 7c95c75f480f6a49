"""The core form: the small language every transformation reads and writes.

A core function is still Python (``print_function`` turns it into source a person
can read), but reduced so that transformations have few cases to handle:

* every statement does one thing: ``x = prim(a, b, axis=1)``, ``x = y``,
  ``y[index] = v``, ``if c: ...``, ``for i in range(n): ...``, ``while`` with an
  explicit test block, ``assert``/``raise``, and one ``return`` at the end;
* operands are atoms: a variable name or a Python constant (an ``Index`` stands for
  what may appear between square brackets);
* ``break``/``continue``/early ``return`` are gone (flags and guards); loops that
  need to stop early name their exit flags.

Every statement carries the ``Location`` of the user line it came from, so generated
code can point back at it.
"""
from __future__ import annotations

import math

import numpy as np

from dataclasses import dataclass, field
from typing import Any, Iterator, Union

from astjax.errors import Location


# ----------------------------------------------------------------------------- atoms

@dataclass(frozen=True)
class Var:
    name: str

    def __str__(self):
        return self.name


@dataclass(frozen=True)
class Const:
    value: Any

    def __str__(self):
        return format_const(self.value)


@dataclass(frozen=True)
class SliceAtom:
    """``lo:hi:step`` inside an index, each part an atom or None."""

    lower: "Atom | None"
    upper: "Atom | None"
    step: "Atom | None"

    def atoms(self):
        return [a for a in (self.lower, self.upper, self.step) if a is not None]


@dataclass(frozen=True)
class Index:
    """What stands between square brackets: atoms, slices, ``...`` and ``None``.

    ``tuple_form`` is True when the user wrote a tuple (``x[i, j]`` or ``x[i,]``).
    """

    items: tuple
    tuple_form: bool = False

    def atoms(self):
        out = []
        for it in self.items:
            if isinstance(it, SliceAtom):
                out.extend(it.atoms())
            elif isinstance(it, (Var, Const)):
                out.append(it)
        return out


Atom = Union[Var, Const]
Operand = Union[Var, Const, Index]


def atom_vars(atoms) -> list[str]:
    """Names read by a list of operands (including inside an Index)."""
    names = []
    for a in atoms:
        if isinstance(a, Var):
            names.append(a.name)
        elif isinstance(a, (Index, SliceAtom)):
            names.extend(v.name for v in a.atoms() if isinstance(v, Var))
        elif isinstance(a, (tuple, list)):     # (a list: the operands of ``*values``)
            names.extend(atom_vars(a))
    return names


# ------------------------------------------------------------------------ statements

@dataclass
class Stmt:
    loc: Location | None = field(default=None, kw_only=True)


@dataclass
class Prim(Stmt):
    """``target = prim(*args, **kwargs)``; ``prim`` is a registry name or a core helper.

    A variadic parameter's operands are given as a tuple inside ``args``.
    """

    target: str | None
    prim: str
    args: list
    kwargs: dict = field(default_factory=dict)
    # written as a call (``np.ndim(b)``, ``np.add(a, b)``), not an operator or attribute:
    # printed as one, and its list operands are NumPy's to convert
    written_as_call: bool = field(default=False, kw_only=True, compare=False, repr=False)


@dataclass
class Copy(Stmt):
    target: str
    value: Any  # Atom


@dataclass
class External(Stmt):
    """A call the transformations do not look into (print, a non-NumPy library...).

    Allowed only on values that carry no derivative; ``func`` is an atom naming
    the callee in the generated module's namespace.
    """

    target: str | None
    func: Atom
    args: list
    kwargs: dict = field(default_factory=dict)
    method: str | None = None  # call ``func.method(...)`` instead of ``func(...)``


@dataclass
class SetItem(Stmt):
    """``target[index] = value`` (in place)."""

    target: str
    index: Index
    value: Any


@dataclass
class If(Stmt):
    test: Atom
    body: list
    orelse: list


@dataclass
class For(Stmt):
    """``for target in iter:`` where ``iter`` is an atom or a ``range`` Prim.

    ``exit_flags``: the loop stops (before the body) once any of them is true.
    """

    target: str
    iter: Any  # Atom or Prim("range", ...) with target None
    body: list
    exit_flags: list = field(default_factory=list)


@dataclass
class While(Stmt):
    """``while True: <test_body>; if not test: break; <flags: break>; <body>``."""

    test_body: list
    test: Atom
    body: list
    exit_flags: list = field(default_factory=list)


@dataclass
class Assert(Stmt):
    test: Atom
    msg: Any = None


@dataclass
class Raise(Stmt):
    exc: Any  # Atom or None


@dataclass
class Return(Stmt):
    value: Any  # Atom


@dataclass
class Comment(Stmt):
    text: str


@dataclass
class Function:
    """A core function: parameters, body, and where it came from."""

    name: str
    params: list[str]
    body: list
    loc: Location | None = None
    source_name: str = ""
    # name in the generated namespace -> (kind, payload) for values the body reads
    # from outside (globals, closure cells, constants); see frontend.normalize.Env.
    env: dict = field(default_factory=dict)
    defaults: dict = field(default_factory=dict)   # parameter -> operand
    kwonly: list = field(default_factory=list)      # keyword-only parameters
    # functions printed into the same module after this one (jit's fused groups)
    helpers: list = field(default_factory=list)
    # astjax's reverse-mode code read again (grad of grad, jvp of grad): its in-place
    # updates were checked for aliasing on the user's program when it was generated
    checked_updates: bool = False


# ---------------------------------------------------------------------------- walking

def walk(stmts) -> Iterator[Stmt]:
    """Every statement, nested ones included, in textual order."""
    for s in stmts:
        yield s
        for block in child_blocks(s):
            yield from walk(block)


def child_blocks(s):
    if isinstance(s, If):
        return [s.body, s.orelse]
    if isinstance(s, For):
        return [s.body]
    if isinstance(s, While):
        return [s.test_body, s.body]
    return []


def reads(s: Stmt) -> list[str]:
    """Variables a statement reads itself (not counting nested blocks)."""
    if isinstance(s, Prim):
        return atom_vars(s.args) + atom_vars(s.kwargs.values())
    if isinstance(s, Copy):
        return atom_vars([s.value])
    if isinstance(s, External):
        return atom_vars([s.func]) + atom_vars(s.args) + atom_vars(s.kwargs.values())
    if isinstance(s, SetItem):
        return [s.target] + atom_vars([s.index, s.value])
    if isinstance(s, If):
        return reads(s.test) if isinstance(s.test, Prim) else atom_vars([s.test])
    if isinstance(s, For):
        base = s.iter.args if isinstance(s.iter, Prim) else [s.iter]
        return atom_vars(base) + list(s.exit_flags)
    if isinstance(s, While):
        return atom_vars([s.test]) + list(s.exit_flags)
    if isinstance(s, Assert):
        return atom_vars([s.test] + ([s.msg] if s.msg is not None else []))
    if isinstance(s, (Raise, Return)):
        v = s.exc if isinstance(s, Raise) else s.value
        return atom_vars([v]) if v is not None else []
    return []


def writes(s: Stmt) -> list[str]:
    """Variables a statement assigns itself (not counting nested blocks)."""
    if isinstance(s, (Prim, External)):
        return [s.target] if s.target else []
    if isinstance(s, Copy):
        return [s.target]
    if isinstance(s, SetItem):
        return [s.target]
    if isinstance(s, For):
        return [s.target]
    return []


def all_writes(stmts) -> set[str]:
    out = set()
    for s in walk(stmts):
        out.update(writes(s))
    return out


def all_reads(stmts) -> set[str]:
    out = set()
    for s in walk(stmts):
        out.update(reads(s))
    return out


# --------------------------------------------------------------------------- printing

def _reads_back(z: complex) -> bool:
    """Whether ``repr(z)`` evaluates to ``z`` itself, the signs of its zeros included."""
    parts = (z.real, z.imag)
    return all(math.isfinite(p) and (p != 0.0 or math.copysign(1.0, p) > 0) for p in parts)


def format_const(v) -> str:
    if v is Ellipsis:
        return "..."
    if isinstance(v, float) and not isinstance(v, np.generic):
        r = repr(v)
        return r if r not in ("inf", "-inf", "nan") else f"float({r!r})"
    if isinstance(v, complex) and not isinstance(v, np.generic) and not _reads_back(v):
        # (``-1j`` is complex(-0.0, -1.0), and its repr ``(-0-1j)`` reads back as +0.0)
        return f"complex({format_const(v.real)}, {format_const(v.imag)})"
    if isinstance(v, slice):
        return f"slice({format_const(v.start)}, {format_const(v.stop)}, {format_const(v.step)})"
    if isinstance(v, tuple):
        inner = ", ".join(format_const(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, list):
        return "[" + ", ".join(format_const(x) for x in v) + "]"
    if hasattr(v, "dtype") and hasattr(v, "item") and getattr(v, "ndim", 1) == 0:
        return f"np.{v.dtype.name}({format_const(v.item())})"
    if isinstance(v, type) and v.__module__ == "numpy":
        return f"np.{v.__name__}"
    if isinstance(v, type) and v.__module__ == "builtins":
        return v.__name__
    return repr(v)


def format_operand(a, in_subscript=False) -> str:
    if isinstance(a, Var):
        return a.name
    if isinstance(a, Const):
        return format_const(a.value)
    if isinstance(a, SliceAtom):
        parts = [format_operand(p) if p is not None else "" for p in (a.lower, a.upper, a.step)]
        if in_subscript:
            text = f"{parts[0]}:{parts[1]}"
            return text + (f":{parts[2]}" if a.step is not None else "")
        return "slice({}, {}, {})".format(*(p or "None" for p in parts))
    if isinstance(a, Index):
        items = [format_index_item(i, in_subscript) for i in a.items]
        if in_subscript:
            if len(items) == 1 and not a.tuple_form:
                return items[0]
            return ", ".join(items) + ("," if len(items) == 1 else "")
        if len(items) == 1 and not a.tuple_form:
            return items[0]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(a, tuple):
        inner = ", ".join(format_operand(x) for x in a)
        return f"({inner},)" if len(a) == 1 else f"({inner})"
    if isinstance(a, list):
        return "[" + ", ".join(format_operand(x) for x in a) + "]"
    if a is None:
        return "None"
    raise TypeError(f"not an operand: {a!r}")


def format_index_item(it, in_subscript):
    if it is None:
        return "None"
    if it is Ellipsis:
        return "..."
    if isinstance(it, SliceAtom):
        return format_operand(it, in_subscript)
    return format_operand(it)
