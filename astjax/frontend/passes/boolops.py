"""Boolean operators assigned to a name: Python's value, as ``if`` statements.

``a and b`` is ``a`` when ``a`` is falsy and ``b`` otherwise (``b`` evaluated only
then); ``a or b`` the other way round.  Written as the whole value of an assignment,
that is exactly a sequence of ``if`` statements:

>>> from astjax.frontend.passes import show, boolops
>>> print(show(boolops, '''
... def f(x, y, z):
...     w = x and (y or z)
...     return w'''))
def f(x, y, z):
    w = x
    if w:
        w = y
        if not w:
            w = z
    return w

Inside another expression (a call's argument, an ``if`` or ``while`` test, a
lambda) the operator stays for the Normalizer, which lowers it the same way where
it stands: lifting it out would change the order Python evaluates the rest in.
"""
from __future__ import annotations

import gast

from astjax.frontend.passes import located, rewrite_statements

NAME = "boolops"
TRIGGERS = (gast.BoolOp,)    # node types without which the pass has nothing to do


def run(fn, ctx) -> bool:
    def lowered(st, _function):
        name = _assigned_name(st)
        if name is not None and isinstance(st.value, gast.BoolOp):
            return [located(s, st) for s in lower(name, st.value)]
        return None
    return rewrite_statements(ctx, lowered)


def _assigned_name(st):
    """``x`` of ``x = value`` (one plain name target), or None."""
    if isinstance(st, gast.Assign) and len(st.targets) == 1 and \
            isinstance(st.targets[0], gast.Name):
        return st.targets[0].id
    return None


def assign(name, value):
    return gast.Assign([gast.Name(name, gast.Store(), None, None)], value, None)


def lower(name, value) -> list:
    """Statements giving ``name`` the value of ``value``: boolean operators and
    conditional expressions lowered, recursively (``ternary`` shares this)."""
    if isinstance(value, gast.IfExp):
        return [gast.If(value.test, lower(name, value.body), lower(name, value.orelse))]
    if not isinstance(value, gast.BoolOp):
        return [assign(name, value)]
    out = lower(name, value.values[0])
    rest = value.values[1:]
    if not rest:
        return out
    inner = lower(name, rest[0] if len(rest) == 1 else gast.BoolOp(value.op, rest))
    test = gast.Name(name, gast.Load(), None, None)
    if isinstance(value.op, gast.Or):
        test = gast.UnaryOp(gast.Not(), test)
    out.append(gast.If(test, inner, []))
    return out
