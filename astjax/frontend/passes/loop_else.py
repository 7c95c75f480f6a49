"""``else`` on ``for`` and ``while``: a flag that each ``break`` of the loop clears.

>>> from astjax.frontend.passes import show, loop_else
>>> print(show(loop_else, '''
... def f(x, n):
...     for i in range(n):
...         if x[i] > 1:
...             break
...         x = x * 2
...     else:
...         x = -x
...     return x'''))
def f(x, n):
    no_break = True
    for i in range(n):
        if x[i] > 1:
            no_break = False
            break
        x = x * 2
    if no_break:
        x = -x
    return x

A loop without a ``break`` of its own runs its ``else`` always: the block simply
follows the loop.  The ``break`` of a nested loop belongs to that loop, and an early
``return`` (the ``returns`` pass, after this one) guards what follows the loop.
"""
from __future__ import annotations

import gast

from astjax.frontend.passes import located, rewrite_statements

NAME = "loop_else"
TRIGGERS = (gast.For, gast.While)    # node types without which the pass has nothing to do


def run(fn, ctx) -> bool:
    return rewrite_statements(ctx, lambda st, _function: _lower(st, ctx) if isinstance(
        st, (gast.For, gast.While)) and st.orelse else None)


def _lower(loop, ctx):
    """[flag = True, the loop clearing it before each of its breaks, if flag: else]."""
    orelse, loop.orelse = loop.orelse, []
    breaks = _own_break_blocks(loop.body)
    if not breaks:
        return [loop] + orelse
    flag = ctx.fresh("no_break")
    for block, k in reversed(breaks):
        block.insert(k, located(_assign(flag, False), block[k]))
    start = located(_assign(flag, True), loop)
    test = located(gast.If(test=gast.Name(id=flag, ctx=gast.Load(), annotation=None,
                                          type_comment=None), body=orelse, orelse=[]), loop)
    return [start, loop, test]


def _assign(name, value):
    return gast.Assign(targets=[gast.Name(id=name, ctx=gast.Store(), annotation=None,
                                          type_comment=None)],
                       value=gast.Constant(value=value, kind=None), type_comment=None)


def _own_break_blocks(body):
    """(statement list, index) of each ``break`` that exits this loop (not a nested one)."""
    out = []

    def visit(stmts):
        for k, st in enumerate(stmts):
            if isinstance(st, gast.Break):
                out.append((stmts, k))
            elif isinstance(st, (gast.For, gast.While)):
                visit(st.orelse)          # (an inner loop's else: breaks go to us)
            elif not isinstance(st, (gast.FunctionDef, gast.ClassDef)):
                for attr in ("body", "orelse", "finalbody"):
                    sub = getattr(st, attr, None)
                    if isinstance(sub, list) and sub and isinstance(sub[0], gast.stmt):
                        visit(sub)
                for h in getattr(st, "handlers", ()) or ():
                    visit(h.body)
    visit(body)
    # inserting shifts later indices of the same list: process each list from its end
    return sorted(out, key=lambda bk: (id(bk[0]), bk[1]))
