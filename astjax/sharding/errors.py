"""Sharding errors located at the user's own line (the caller outside astjax)."""
from __future__ import annotations

import itertools
import os
import sys

from astjax.errors import Location, TransformError

# astjax's directory (None in a module ``astjax gen`` wrote: its copies are "<...>")
_PACKAGE = (os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
            if "__file__" in globals() else None)


class ShardingError(TransformError, ValueError):
    """A mesh, spec or collective used wrongly: names the user's file and line."""


def _user_file(name) -> bool:
    return not (name.startswith("<") or _PACKAGE and os.path.abspath(name).startswith(
        _PACKAGE + os.sep) or "threading.py" in name or "concurrent" in name)


def _position(frame):
    """(line, column, end column) of the call a frame is making: the caret spans it."""
    try:
        line, end_line, col, end_col = next(itertools.islice(
            frame.f_code.co_positions(), frame.f_lasti // 2, None))
    except (AttributeError, StopIteration, ValueError):
        return frame.f_lineno, 0, None
    if line is None:
        return frame.f_lineno, 0, None
    return line, col or 0, end_col if end_line == line else None


def user_location() -> Location | None:
    """The innermost stack frame that is user code (not astjax), or generated code's
    line whose origin is (the user's line it was generated from: a collective in a
    function under jit, grad or pmap names its own line, not the call of the whole)."""
    # (looked up, not imported: a module astjax gen wrote has no astjax)
    origin = getattr(sys.modules.get("astjax.codegen"), "origin", None)
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        line, col, end = _position(frame)
        if name.startswith("<") and origin is not None:
            loc = origin(name, line)
            if loc is not None and _user_file(loc.filename):
                return loc
        if _user_file(name):
            return Location(name, line, col, end, frame.f_code.co_name)
        frame = frame.f_back
    # a shard's thread runs no user frame above it: the line that started the run
    from astjax.sharding.collectives import current
    ctx = current()
    return ctx.extra.get("where") if ctx is not None else None


def fail(message: str, hint: str | None = None):
    raise ShardingError(message, user_location(), hint)
