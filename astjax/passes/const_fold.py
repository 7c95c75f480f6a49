"""Constant folding: compute what the source already fixes (``2 - 1``, ``len((a, b))``).

Transformations and lax rewrites leave arithmetic on constants and tests on known
flags behind; folding them here lets copy propagation and dead-code elimination
remove whole branches.  Only results that print back as the same Python value are
made constants: Python scalars, bool, None, str and tuples of those.  NumPy results
(``np.sqrt(4.0)`` is an ``np.float64``) and arrays are never folded, so a fold never
changes a type, a dtype or a shape.

Rewrites:
* ``t = prim(consts...)`` -> ``t = value``, evaluated exactly as the generated code
  would: operators with Python's operator (``2 - 1`` is the int 1), other primitives
  with their implementation;
* ``n = len(t)`` where ``t = (a, b)`` was built by a tuple display and not rebound since;
* ``if <const>:`` -> the branch taken; ``for i in range(<consts>)`` with no trips -> gone.
"""
from __future__ import annotations

import warnings

from astjax import core
from astjax.core import Const, Copy, For, If, Prim, Var
from astjax import primitives as P
from astjax.passes import analysis as A

# kinds whose primitives may be evaluated on constants at optimization time
_FOLDABLE_KINDS = frozenset({"elementwise", "compare", "static", "structural", "reduction"})
_NEVER = frozenset({"meta", "make_list", "make_dict", "to_list", "keys_list", "append",
                    "range", "format_string"})


def evaluate(s: Prim):
    """``(True, value)`` when ``s`` has constant operands and folds to a simple value."""
    entry = A.prim_entry(s.prim)
    if entry is None or not A.is_pure(s) or s.prim in _NEVER:
        return False, None
    if entry.kind not in _FOLDABLE_KINDS and s.prim != "getitem":
        return False, None
    values = []
    for a in s.args:
        ok, v = A.operand_value(a)
        if not ok:
            return False, None
        values.append(v)
    kwargs = {}
    for k, a in s.kwargs.items():
        ok, v = A.operand_value(a)
        if not ok:
            return False, None
        kwargs[k] = v
    if not all(A.is_simple_value(v) or isinstance(v, slice) or v is Ellipsis
               for v in list(values) + list(kwargs.values())):
        return False, None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            if entry.operator:
                if kwargs or any(v is not None for v in values[(1 if entry.unary else 2):]):
                    return False, None
                if entry.unary:
                    result = A.UNARY_OPERATORS[entry.operator](values[0])
                else:
                    if not P.small_operands(entry.operator, values[0], values[1]):
                        return False, None
                    result = A.BINARY_OPERATORS[entry.operator](values[0], values[1])
            else:
                args = []
                for name, v in zip(entry.params, values):
                    if name.startswith("*"):
                        args.extend(v)
                    else:
                        args.append(v)
                result = entry.impl(*args, **kwargs)
    except Exception:
        return False, None   # the error stays where the user will see it
    if not A.is_simple_value(result):
        return False, None
    return True, result


class _Folder(A.ForwardWalker):
    """Facts: ``("len", t) -> n`` for tuples built by a display."""

    def simple(self, s, facts):
        repl = None
        if isinstance(s, Prim) and s.target is not None:
            ok, value = evaluate(s)
            if ok:
                repl = Copy(s.target, Const(value), loc=s.loc)
            elif s.prim == "len" and len(s.args) == 1 and isinstance(s.args[0], Var):
                n = facts.get(("len", s.args[0].name))
                if n is not None:
                    repl = Copy(s.target, Const(n), loc=s.loc)
        facts.kill(A.effects(s))
        if isinstance(s, Prim) and s.prim == "make_tuple" and s.target and \
                s.target not in core.atom_vars(s.args):
            facts.add(("len", s.target), len(s.args[0]), {s.target})
        return None if repl is None else [repl]

    def control(self, s, facts):
        if isinstance(s, If):
            if isinstance(s.test, Prim):
                ok, value = evaluate(s.test)
                if not ok:
                    return None
            elif isinstance(s.test, Const) and A.is_simple_value(s.test.value):
                value = s.test.value
            else:
                return None
            return list(s.body if value else s.orelse)
        if isinstance(s, For) and isinstance(s.iter, Prim) and s.iter.prim == "range":
            ok, values = A.operand_value(tuple(s.iter.args))
            if ok and all(type(v) in (int, type(None)) for v in values):
                try:   # the printer drops None arguments: range(5, None, None) is range(5)
                    trips = len(range(*[v for v in values if v is not None]))
                except (TypeError, ValueError):
                    return None
                if trips == 0:
                    return []
        return None


def run(fn: core.Function) -> bool:
    walker = _Folder()
    fn.body[:] = walker.run_block(fn.body, A.Facts())
    return walker.changed
