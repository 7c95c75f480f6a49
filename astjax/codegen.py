"""Print core-form functions as Python source people can read, and load them.

Statements that come from the same user line are grouped under a comment quoting
that line (``# mlp.py:5  outputs = jnp.dot(inputs, W) + b``).  The text is
registered with ``linecache`` under a descriptive file name, so a traceback from
inside generated code shows the generated line.
"""
from __future__ import annotations

import linecache
import os
from itertools import count

from astjax import core
from astjax.core import (Assert, Comment, Const, Copy, External, For, If, Prim, Raise,
                         Return, SetItem, Var, While, format_operand)

_PRECEDENCE_SAFE = (Var, Const)


def _spell(prim_name: str):
    from astjax.primitives import REGISTRY
    return REGISTRY[prim_name]


def _call_args(prim, args, kwargs):
    """Positional required parameters, keywords for optional ones that differ from default."""
    params = prim.params
    out = []
    for name, a in zip(params, args):
        if name.startswith("*"):
            out.extend(format_operand(x) for x in a)
            continue
        if name in prim.defaults:
            d = prim.defaults[name]
            if isinstance(a, Const) and _same_const(a.value, d):
                continue
            out.append(f"{name}={format_operand(a)}")
        else:
            out.append(format_operand(a))
    for k, v in kwargs.items():
        out.append(f"{k}={format_operand(v)}")
    return ", ".join(out)


def _same_const(a, b):
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:
        return a is b


def _bound_tightly(a) -> str:
    """An operand where only an atom binds (the base of ``**``, before ``.attr``): a
    constant spelled with a sign or a number literal gets parentheses (``-1 ** k`` is
    ``-(1 ** k)``, ``1.real`` does not parse)."""
    text = format_operand(a)
    if isinstance(a, Const) and not (text.isidentifier() or text.startswith("(")):
        return f"({text})"
    return text


def format_expr(s: Prim) -> str:
    """The right-hand side of a Prim statement."""
    prim = _spell(s.prim)
    a = s.args
    if s.prim == "getitem":
        return f"{_bound_tightly(a[0])}[{format_operand(a[1], in_subscript=True)}]"
    if prim.operator and s.written_as_call:
        # ``np.power(m, 2)`` is not ``m ** 2`` (a bool array squares to int8 there),
        # nor ``np.add(a, b)`` ``a + b`` (two Python numbers give a Python number)
        return f"{prim.code}({_call_args(prim, a, s.kwargs)})"
    if prim.operator and prim.unary:
        return f"{prim.operator}{format_operand(a[0])}"
    if prim.operator:
        left = _bound_tightly(a[0]) if prim.operator == "**" else format_operand(a[0])
        return f"{left} {prim.operator} {format_operand(a[1])}"
    if prim.attribute and len(a) == 1 and isinstance(a[0], Var) and not s.written_as_call:
        # (``np.ndim(b)`` stays a call: a Python number has no ``.ndim``)
        return f"{a[0].name}.{prim.attribute}"
    from astjax.core_prims import PRINTERS
    special = PRINTERS.get(s.prim)
    if special is not None:
        return special(s)
    return f"{prim.code}({_call_args(prim, a, s.kwargs)})"


class Printer:
    """Turns core statements into indented source lines with location comments."""

    def __init__(self, indent="    ", stmt_lines: dict | None = None):
        self.lines: list[str] = []
        self.origins: list = []      # per line: the user Location it came from, or None
        # id(statement) -> its line number (1-based), when the caller asks for it
        self.stmt_lines = stmt_lines
        self.indent = indent
        self._last_loc = None
        self._current = None

    def emit(self, depth, text):
        self.lines.append(self.indent * depth + text)
        self.origins.append(self._current)

    def location_comment(self, depth, loc):
        if loc is None:
            return
        key = (loc.filename, loc.lineno)
        if key == self._last_loc:
            return
        self._last_loc = key
        src = loc.source_line().strip()
        name = os.path.basename(loc.filename)
        self.emit(depth, f"# {name}:{loc.lineno}  {src}" if src else f"# {name}:{loc.lineno}")

    def block(self, stmts, depth):
        if not stmts:
            self.emit(depth, "pass")
            return
        for s in stmts:
            self.stmt(s, depth)

    def stmt(self, s, depth):
        self.location_comment(depth, s.loc)
        self._current = s.loc
        if self.stmt_lines is not None:
            self.stmt_lines[id(s)] = len(self.lines) + 1
        if isinstance(s, Prim):
            rhs = format_expr(s)
            self.emit(depth, f"{s.target} = {rhs}" if s.target else rhs)
        elif isinstance(s, Copy):
            self.emit(depth, f"{s.target} = {format_operand(s.value)}")
        elif isinstance(s, External):
            args = [format_operand(x) for x in s.args]
            args += [f"{k}={format_operand(v)}" for k, v in s.kwargs.items()]
            callee = format_operand(s.func) + (f".{s.method}" if s.method else "")
            call = f"{callee}({', '.join(args)})"
            self.emit(depth, f"{s.target} = {call}" if s.target else call)
        elif isinstance(s, SetItem):
            self.emit(depth, f"{s.target}[{format_operand(s.index, in_subscript=True)}] = "
                             f"{format_operand(s.value)}")
        elif isinstance(s, If):
            test = format_expr(s.test) if isinstance(s.test, Prim) else format_operand(s.test)
            self.emit(depth, f"if {test}:")
            self.block(s.body, depth + 1)
            if s.orelse:
                self.emit(depth, "else:")
                self._last_loc = None
                self.block(s.orelse, depth + 1)
            self._last_loc = None
        elif isinstance(s, For):
            it = format_expr(s.iter) if isinstance(s.iter, Prim) else format_operand(s.iter)
            self.emit(depth, f"for {s.target} in {it}:")
            self._last_loc = None
            if s.exit_flags:
                self.emit(depth + 1, f"if {' or '.join(s.exit_flags)}:")
                self.emit(depth + 2, "break")
            self.block(s.body, depth + 1)
            self._last_loc = None
        elif isinstance(s, While):
            self.emit(depth, "while True:")
            self._last_loc = None
            for t in s.test_body:
                self.stmt(t, depth + 1)
            self.emit(depth + 1, f"if not {format_operand(s.test)}:")
            self.emit(depth + 2, "break")
            if s.exit_flags:
                self.emit(depth + 1, f"if {' or '.join(s.exit_flags)}:")
                self.emit(depth + 2, "break")
            self.block(s.body, depth + 1)
            self._last_loc = None
        elif isinstance(s, Assert):
            msg = f", {format_operand(s.msg)}" if s.msg is not None else ""
            self.emit(depth, f"assert {format_operand(s.test)}{msg}")
        elif isinstance(s, Raise):
            self.emit(depth, "raise" if s.exc is None else f"raise {format_operand(s.exc)}")
        elif isinstance(s, Return):
            self.emit(depth, f"return {format_operand(s.value)}")
        elif isinstance(s, Comment):
            self.emit(depth, f"# {s.text}")
            self._last_loc = None
        else:
            raise TypeError(f"unknown core statement {s!r}")


def print_function(fn: core.Function, docstring: str | None = None,
                   origins: list | None = None, stmt_lines: dict | None = None) -> str:
    """Source text of one core function.

    ``origins``, when given, is extended with the user Location of each line, so code
    generated from this text (grad of grad) can point at the user's lines again;
    ``stmt_lines`` gets ``id(statement) -> line number`` (1-based, in this text).
    """
    p = Printer(stmt_lines=stmt_lines)
    p._current = fn.loc
    parts = []
    for name in fn.params:
        if fn.kwonly and name == fn.kwonly[0]:
            parts.append("*")
        d = fn.defaults.get(name)
        parts.append(f"{name}={format_operand(d)}" if d is not None else name)
    params = ", ".join(parts)
    p.emit(0, f"def {fn.name}({params}):")
    if docstring:
        p.emit(1, '"""' + docstring.replace('"""', "'''") + '"""')
    p.block(fn.body, 1)
    if origins is not None:
        origins.extend(p.origins)
    return "\n".join(p.lines) + "\n"


HELPER_DOC = "Fused elementwise group: run_fused runs it whole, or in row blocks on all cores."


def print_with_helpers(fn: core.Function, docstring: str | None = None,
                       origins: list | None = None) -> str:
    """``fn`` followed by the functions it calls by name (``fn.helpers``: fused groups)."""
    texts = [print_function(fn, docstring, origins)]
    for h in fn.helpers:
        if origins is not None:
            origins += [None, None]
        texts.append(print_function(h, HELPER_DOC, origins))
    return "\n\n".join(texts)


def print_with_helpers_lines(fn: core.Function, docstring: str | None, stmt_lines: dict) -> str:
    """``print_with_helpers``, recording ``id(statement) -> line`` of ``fn``'s statements."""
    texts = [print_function(fn, docstring, None, stmt_lines)]
    for h in fn.helpers:
        texts.append(print_function(h, HELPER_DOC))
    return "\n\n".join(texts)


_serial = count(1)


# generated file name -> per-line user Location (see print_function's ``origins``)
ORIGINS: dict[str, list] = {}


def origin(filename: str, lineno: int):
    """The user's Location behind line ``lineno`` of generated file ``filename``."""
    lines = ORIGINS.get(filename)
    if lines and 0 < lineno <= len(lines):
        return lines[lineno - 1]
    return None


def load_source(source: str, namespace: dict, label: str, origins: list | None = None):
    """Compile and run generated module text in ``namespace``; register it in linecache.

    Returns the namespace.  ``label`` becomes part of the pseudo file name shown in
    tracebacks, e.g. ``<astjax grad(loss) #3>``.
    """
    filename = f"<astjax {label} #{next(_serial)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    if origins is not None:
        ORIGINS[filename] = origins
    code = compile(source, filename, "exec")
    exec(code, namespace)
    return namespace
