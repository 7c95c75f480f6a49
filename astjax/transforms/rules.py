"""Find a primitive's rule template (vjp, jvp or batching), parsed once per process.

Rules live in ``templates/<kind>.py`` and, for the core form's own primitives,
``templates/<kind>_core.py``; a rule is the function named after the primitive.
"""
from __future__ import annotations

import functools
import importlib
import types

_MODULES = {"vjp": ("vjp", "vjp_core"), "vjp_fast": ("vjp_fast",), "jvp": ("jvp_core", "jvp"),
            "batch": ("batch",)}


@functools.lru_cache(maxsize=None)
def rule_template(kind: str, prim_name: str):
    """The FunctionSource of the ``kind`` rule of ``prim_name``, or None if it has none."""
    for module in _MODULES[kind]:
        mod = importlib.import_module(f"astjax.templates.{module}")
        fn = mod.__dict__.get(prim_name)
        if isinstance(fn, types.FunctionType):
            return _parse_rule(fn)
    return None


def _parse_rule(fn):
    """Templates are plain module-level functions of astjax's own: parse only their
    lines (the user frontend's whole-file parse and edit check are not needed)."""
    from astjax.frontend.source import plain_function_source
    return plain_function_source(fn)
