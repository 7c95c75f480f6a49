"""Early returns: one ``return`` at the end of the function, and flags.

A ``return`` anywhere but as the last statement becomes an assignment of the result
and of a ``returned`` flag; inside a loop it also leaves the loop (``break``, and
``if returned: break`` after each enclosing inner loop), and the statements after
anything that may have returned run under ``if not returned``.  The function then
ends in ``return result``.  Loops and branches stay as they are, so every
transformation sees ordinary control flow.

>>> from astjax.frontend.passes import show, returns
>>> print(show(returns, '''
... def first_negative(xs):
...     for x in xs:
...         if x < 0:
...             return x
...     return None'''))
def first_negative(xs):
    returned = False
    result = None
    for x in xs:
        if x < 0:
            result = x
            returned = True
            break
    if not returned:
        result = None
    return result

A function whose only ``return`` is its last statement is left alone.
"""
from __future__ import annotations

import gast

from astjax.frontend.passes import located

NAME = "returns"
TRIGGERS = (gast.Return,)    # node types without which the pass has nothing to do


def run(fn, ctx) -> bool:
    changed = False
    for f in ctx.functions:
        body = f.body
        start = 1 if body and isinstance(body[0], gast.Expr) and isinstance(
            body[0].value, gast.Constant) and isinstance(body[0].value.value, str) else 0
        if not has_inner_return(body[start:]):
            continue
        flag, result = ctx.fresh("returned"), ctx.fresh("result")
        lowered, _ = _block(body[start:], 0, flag, result, top=True)
        first = body[start] if start < len(body) else f
        head = [located(_assign(flag, gast.Constant(False, None)), first),
                located(_assign(result, gast.Constant(None, None)), first)]
        tail = [located(gast.Return(_name(result)), body[-1])]
        f.body = body[:start] + head + lowered + tail
        changed = True
    return changed


def has_inner_return(stmts, top=True) -> bool:
    """A ``return`` anywhere but as the last top-level statement (own scope only)."""
    for i, st in enumerate(stmts):
        if isinstance(st, gast.Return):
            if not (top and i == len(stmts) - 1):
                return True
        if isinstance(st, (gast.FunctionDef, gast.ClassDef)):
            continue
        for attr in ("body", "orelse", "finalbody"):
            block = getattr(st, attr, None)
            if isinstance(block, list) and block and isinstance(block[0], gast.stmt):
                if has_inner_return(block, top=False):
                    return True
    return False


def _name(n, store=False):
    return gast.Name(n, gast.Store() if store else gast.Load(), None, None)


def _assign(n, value):
    return gast.Assign([_name(n, store=True)], value, None)


def _may_return(st) -> bool:
    return has_inner_return([st, gast.Pass()], top=False)


def _block(stmts, depth, flag, result, top=False):
    """(statements, may return) for a block ``depth`` loops deep (``top``: the
    function's body, whose last return needs no flag)."""
    out = []
    for i, st in enumerate(stmts):
        if isinstance(st, gast.Return):
            value = st.value if st.value is not None else gast.Constant(None, None)
            out.append(located(_assign(result, value), st))
            if top and i == len(stmts) - 1:
                return out, True
            out.append(located(_assign(flag, gast.Constant(True, None)), st))
            if depth:
                out.append(located(gast.Break(), st))
            return out, True        # what follows a return never runs
        if not _may_return(st):
            out.append(st)
            continue
        if isinstance(st, gast.If):
            st.body = _block(st.body, depth, flag, result)[0] or [located(gast.Pass(), st)]
            st.orelse = _block(st.orelse, depth, flag, result)[0]
            out.append(st)
        elif isinstance(st, (gast.For, gast.While)):
            st.body = _block(st.body, depth + 1, flag, result)[0]
            out.append(st)
            if depth:               # leave the enclosing loop too: the rest is skipped
                out.append(located(gast.If(_name(flag), [located(gast.Break(), st)], []), st))
                return out + _block(stmts[i + 1:], depth, flag, result)[0], True
        else:
            out.append(st)          # try/with: the Normalizer refuses them where they are
            continue
        rest = _block(stmts[i + 1:], depth, flag, result, top)[0]
        if rest:
            guard = gast.UnaryOp(gast.Not(), _name(flag))
            out.append(located(gast.If(guard, rest, []), stmts[i + 1]))
        return out, True
    return out, False
