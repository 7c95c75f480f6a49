"""Errors that point at the user's own source line, with a caret and a hint.

Every problem astjax finds in user code is reported as a ``TransformError`` (or a
subclass) carrying file, line and column, so the message reads like a Python
traceback frame rather than an internal stack dump.
"""
from __future__ import annotations

import linecache
from dataclasses import dataclass


@dataclass(frozen=True)
class Location:
    """A place in user source: absolute file line (1-based) and column (0-based)."""

    filename: str
    lineno: int
    col: int = 0
    end_col: int | None = None
    function: str | None = None

    def source_line(self) -> str:
        return linecache.getline(self.filename, self.lineno).rstrip("\n")


class AstjaxError(Exception):
    """Base class of every error astjax raises on purpose."""


class TransformError(AstjaxError):
    """User code that astjax cannot transform: names the file, line, caret and a hint."""

    def __init__(self, message: str, location: Location | None = None, hint: str | None = None):
        self.message = message
        self.location = location
        self.hint = hint
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [self.message]
        loc = self.location
        if loc is not None:
            where = f'  File "{loc.filename}", line {loc.lineno}'
            if loc.function:
                where += f", in {loc.function}"
            parts.append(where)
            line = loc.source_line()
            if line:
                stripped = line.lstrip()
                indent = len(line) - len(stripped)
                col = max(loc.col - indent, 0)
                width = 1
                if loc.end_col is not None and loc.end_col > loc.col:
                    width = loc.end_col - loc.col
                width = max(1, min(width, len(stripped) - col))
                parts.append("    " + stripped)
                parts.append("    " + " " * col + "^" * width)
        if self.hint:
            parts.append(f"hint: {self.hint}")
        return "\n".join(parts)


class SourceError(TransformError):
    """The function's source cannot be found, or no longer matches the running code."""


class UnsupportedSyntaxError(TransformError):
    """A Python construct astjax does not transform (try, with, yield, ...)."""


class DifferentiationError(TransformError):
    """A differentiation request that cannot be honoured (integer input, unknown call...)."""


class UnsupportedDerivativeError(DifferentiationError, NotImplementedError):
    """A derivative astjax does not implement (a rare np.pad mode, norm order, third
    derivatives through einsum...), raised when generated code reaches it."""


class ArgumentError(AstjaxError, TypeError):
    """A transformation was called with arguments that do not fit its signature."""


class ZeroStepsError(TransformError, ValueError):
    """The stacked outputs of a loop that ran no step were used: their shapes are
    unknown (JAX traces the step to know them; astjax would have to run it).  Names
    the user's line that used them."""
