"""Conditional expressions assigned to a name, as ``if`` statements.

>>> from astjax.frontend.passes import show, ternary
>>> print(show(ternary, '''
... def f(x, n):
...     y = x if n > 0 else (-x if n < 0 else 0 * x)
...     return y'''))
def f(x, n):
    if n > 0:
        y = x
    elif n < 0:
        y = -x
    else:
        y = 0 * x
    return y

A branch that is itself a boolean operator is lowered as ``boolops`` would.  A
conditional expression inside another expression stays for the Normalizer, which
lowers it the same way where it stands (see ``boolops`` for why).
"""
from __future__ import annotations

import gast

from astjax.frontend.passes import located, statement_lists
from astjax.frontend.passes.boolops import _assigned_name, lower

NAME = "ternary"
TRIGGERS = (gast.IfExp,)    # node types without which the pass has nothing to do


def run(fn, ctx) -> bool:
    changed = False
    for f in ctx.functions:
        for block in statement_lists(f):
            for k, st in enumerate(block):
                name = _assigned_name(st)
                if name is not None and isinstance(st.value, gast.IfExp):
                    block[k] = located(lower(name, st.value)[0], st)
                    changed = True
    return changed
