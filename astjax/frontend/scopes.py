r"""Scopes of the functions being normalized, and the facts about names they need.

A ``Scope`` is one function body being lowered (the transformed function, or a
callee being inlined into it): how its user names map to operands, which of them
hold functions known at generation time, where its return value goes.

>>> import gast
>>> node = gast.parse("def f(x, k=2):\n    y = x * k\n    return y").body[0]
>>> sorted(_assigned_names(node)), sorted(_rebound_names(node)), _params_of(node.args)
(['k', 'x', 'y'], ['y'], ['x', 'k'])
"""
from __future__ import annotations

from dataclasses import dataclass, field

import gast

from astjax.frontend.resolve import scope_info


@dataclass
class Scope:
    """One function being normalized (the outer one, or one being inlined)."""

    fsrc: object                    # FunctionSource (for free names, file, defaults)
    name: str
    parent: "Scope | None" = None
    rename: dict = field(default_factory=dict)       # user local name -> operand
    local_names: set = field(default_factory=set)
    local_funcs: dict = field(default_factory=dict)
    ret_target: str | None = None
    node: object = None                              # its gast FunctionDef/Lambda
    static_result: object = None   # a function (or pack) it returns: bound, not emitted
    substituted: set = field(default_factory=set)    # parameters replaced by operands


@dataclass
class LoopCtx:
    brk: str | None = None
    cont: str | None = None


def _assigned_names(fn_node) -> set:
    """Names local to a function (beniget: parameters, assignments, nested defs)."""
    return set(scope_info(fn_node).locals)


def _rebound_names(fn_node) -> set:
    """Names the function body itself assigns (a parameter here is reassigned)."""
    out = set()
    body = fn_node.body if isinstance(fn_node.body, list) else [fn_node.body]
    stack = list(body)
    while stack:
        n = stack.pop()
        if isinstance(n, (gast.FunctionDef, gast.Lambda)):
            if isinstance(n, gast.FunctionDef):
                out.add(n.name)
            continue
        if isinstance(n, gast.Name) and isinstance(n.ctx, (gast.Store, gast.Del)):
            out.add(n.id)
        if isinstance(n, gast.Subscript) and isinstance(n.ctx, gast.Store) and isinstance(
                n.value, gast.Name):
            out.add(n.value.id)  # y[i] = v updates y in place: never substitute it
        if isinstance(n, (gast.ListComp, gast.GeneratorExp, gast.SetComp, gast.DictComp)):
            for g in n.generators:
                stack.append(g.iter)
            continue
        stack.extend(gast.iter_child_nodes(n))
    return out


def _ordered_names(fn_node):
    return list(scope_info(fn_node).locals)


def _params_of(args: gast.arguments):
    names = [a.id for a in args.posonlyargs + args.args + args.kwonlyargs]
    return names


def _short(name):
    """A primitive's name as the suffix of the temporary holding its result."""
    return {"matmul": "matmul", "getitem": "item", "multiply": "mul", "subtract": "sub",
            "divide": "div", "true_divide": "div", "power": "pow"}.get(name, name)


def _is_library(fn) -> bool:
    """Functions of NumPy and the standard library are called, not inlined."""
    mod = getattr(fn, "__module__", "") or ""
    return mod.split(".")[0] in ("numpy", "math", "builtins", "functools", "operator",
                                 "scipy") or mod in _ASTJAX_LIBRARY


_ASTJAX_LIBRARY = {"astjax.runtime", "astjax.runtime_array", "astjax.runtime_batch",
                   "astjax.tree_util", "astjax.api", "astjax.forward_api", "astjax.batch_api"}


# In a namespace astjax builds (generated modules, lifted functions): name -> where its
# value came from, ("global", dict, key) or ("cell", cell, name).  Transforming that
# code again reads the origin, not the namespace's copy (``Normalizer._from_origin``).
ORIGINS = "__astjax_origins__"


def origin(ref):
    """The origin to record for a lookup's ``ref``, or None (constants, builtins)."""
    return ref if ref is not None and ref[0] in ("global", "cell") and ref[1] is not None \
        else None
