"""Scope facts about a function's AST, from beniget's def-use chains.

beniget tells which names a function defines locally (parameters, assignments,
loop targets, nested ``def``s) in definition order, and which names it reads
without defining them: those are resolved against the function's closure cells,
its globals and the builtins by the normalizer.
"""
from __future__ import annotations

from dataclasses import dataclass

import beniget
import gast


@dataclass(frozen=True)
class ScopeInfo:
    locals: tuple[str, ...]      # local names, in definition order
    free: frozenset[str]         # names read but never defined in the function


class _Chains(beniget.DefUseChains):
    """Def-use chains that collect unbound names instead of printing warnings."""

    def __init__(self):
        super().__init__()
        self.free_names: list[str] = []

    def unbound_identifier(self, name, node):
        self.free_names.append(name)

    def warn(self, msg, node):  # beniget's other diagnostics concern the user's linting
        pass


_CACHE: dict[int, tuple[object, ScopeInfo]] = {}


def scope_info(fn_node) -> ScopeInfo:
    """Locals and free names of a gast FunctionDef or Lambda (cached per node)."""
    hit = _CACHE.get(id(fn_node))
    if hit is not None and hit[0] is fn_node:
        return hit[1]
    module = gast.Module(body=[fn_node if isinstance(fn_node, gast.FunctionDef)
                               else gast.Expr(value=fn_node)], type_ignores=[])
    chains = _Chains()
    chains.visit(module)
    names = []
    for d in chains.locals[fn_node]:
        name = d.name()
        if name not in names:
            names.append(name)
    info = ScopeInfo(tuple(names), frozenset(chains.free_names))
    _CACHE[id(fn_node)] = (fn_node, info)
    return info
