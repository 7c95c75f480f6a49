"""Sharding errors located at the user's own line (the caller outside astjax)."""
from __future__ import annotations

import os
import traceback

from astjax.errors import Location, TransformError

# astjax's directory (None in a module ``astjax gen`` wrote: its copies are "<...>")
_PACKAGE = (os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
            if "__file__" in globals() else None)


class ShardingError(TransformError, ValueError):
    """A mesh, spec or collective used wrongly: names the user's file and line."""


def user_location() -> Location | None:
    """The innermost stack frame that is user code (not astjax, not generated code)."""
    for fs in reversed(traceback.extract_stack()[:-1]):
        name = fs.filename
        if name.startswith("<") or _PACKAGE and os.path.abspath(name).startswith(
                _PACKAGE + os.sep):
            continue
        if "threading.py" in name or "concurrent" in name:
            continue
        return Location(name, fs.lineno, fs.colno or 0, fs.end_colno, fs.name)
    # a shard's thread runs no user frame above it: the line that started the run
    from astjax.sharding.collectives import current
    ctx = current()
    return ctx.extra.get("where") if ctx is not None else None


def fail(message: str, hint: str | None = None):
    raise ShardingError(message, user_location(), hint)
