"""Desugaring: small gast -> gast passes run on a function's source before the Normalizer.

Each pass has one job and lowers one piece of Python sugar into simpler Python, so the
Normalizer (``astjax/frontend/normalize.py``, Python -> core form) has less to know:

1. ``augassign``  ``y += v`` -> ``y = y + v``; ``a[i] += v`` -> ``a[i] = a[i] + v``,
   refusing (at the user's line) a rebinding NumPy would have done in place on
   memory another name shares;
2. ``boolops``    ``x = a and b`` -> ``x = a`` then ``if x: x = b`` (Python's value);
3. ``ternary``    ``x = a if c else b`` -> an ``if`` statement;
4. ``loop_else``  ``for``/``while`` ... ``else`` -> a ``no_break`` flag cleared by
   the loop's own ``break``s, the ``else`` block guarded by it;
5. ``returns``    a ``return`` anywhere but at the end -> a result variable, a
   ``returned`` flag, ``break`` out of loops and the rest guarded by ``if not
   returned``.

Comprehensions are not desugared here: the Normalizer's lowering is better (it
unrolls them over lists of functions and over sequences of known length, and keeps
their variables in a scope of their own), and boolean operators and ternaries
written inside other expressions (a call's argument, a ``while`` test, a lambda)
are left to it too, since lifting them out of their expression would change the
order in which Python evaluates it.

The pipeline runs once per function source (``astjax/frontend/source.py`` caches
the result): it copies the node, runs the passes in order and records the passes
that changed it (``applied(node)``).  New nodes take the location of the statement
they replace, so errors and the ``# file:line`` comments of generated code still
point at the user's line.  A pass that must refuse something marks the statement
(``Context.refuse``); the Normalizer raises that error when it reaches it, so a
function that is never transformed never fails here.
"""
from __future__ import annotations

import ast
import builtins
import copy as _copy

import gast

__all__ = ["PIPELINE", "Context", "run", "applied", "refusal", "show", "located",
           "rewrite_statements"]


class Context:
    """What a pass knows about the function it rewrites: where it is, and the names
    it already uses (new names must not collide with them)."""

    def __init__(self, node, filename="<unknown>", function=None):
        self.filename = filename
        self.function = function or getattr(node, "name", "<lambda>")
        self.node = node
        self._taken = None
        self._functions = None

    @property
    def functions(self) -> list:
        """The function and those defined inside it (passes add none)."""
        if self._functions is None:
            self._functions = functions(self.node)
        return self._functions

    @property
    def taken(self) -> set:
        """Every name the function (and what it defines inside) uses, and the builtins."""
        if self._taken is None:
            self._taken = {n.id for n in gast.walk(self.node) if isinstance(n, gast.Name)}
            self._taken |= set(dir(builtins))
        return self._taken

    def fresh(self, base) -> str:
        """A name not used anywhere in the function (``returned``, ``returned_2``...)."""
        name, k = base, 1
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name

    @staticmethod
    def refuse(node, message, hint=None):
        """Mark ``node`` (a statement) as refused: the Normalizer raises the error there."""
        node.astjax_refusal = (message, hint)
        return node


def refusal(st):
    """``(message, hint)`` a pass left on statement ``st``, or None."""
    return getattr(st, "astjax_refusal", None)


def located(new, old):
    """``new`` and its children without a location take ``old``'s (whole statement)."""
    for n in gast.walk(new):
        for attr in ("lineno", "col_offset", "end_lineno", "end_col_offset"):
            if attr in getattr(n, "_attributes", ()) and getattr(n, attr, None) is None:
                setattr(n, attr, getattr(old, attr, None))
    return new




def run(node, filename="<unknown>", function=None, pipeline=None, copy=True):
    """Function ``node`` desugared: a copy (``node`` left as it is) unless ``copy`` is
    false (a freshly parsed node the caller owns)."""
    if not isinstance(node, gast.FunctionDef):
        return node        # a lambda is one expression: nothing to desugar
    new = _copy.deepcopy(node) if copy else node
    ctx = Context(new, filename, function)
    present = set()
    found = []
    for n in gast.walk(new):           # one walk: most passes have nothing to do
        present.add(type(n))
        if isinstance(n, gast.FunctionDef):
            found.append(n)
    ctx._functions = found
    ran = []
    for p in pipeline if pipeline is not None else PIPELINE:
        if present.intersection(p.TRIGGERS) and p.run(new, ctx):
            ran.append(p.NAME)      # (no pass makes a node another pass is triggered by)
    new.astjax_passes = tuple(ran)
    return new


def applied(node) -> tuple:
    """The names of the passes that changed ``node`` (an output of ``run``)."""
    return getattr(node, "astjax_passes", ())


def functions(node):
    """``node`` and every function defined inside it, each its own scope."""
    return [n for n in gast.walk(node) if isinstance(n, gast.FunctionDef)]


def statement_lists(node):
    """Every list of statements in ``node`` (bodies, else branches), own scope only."""
    out = []

    def visit(stmts):
        out.append(stmts)
        for st in stmts:
            if isinstance(st, gast.FunctionDef):
                continue
            for attr in ("body", "orelse", "finalbody"):
                block = getattr(st, attr, None)
                if isinstance(block, list) and block and isinstance(block[0], gast.stmt):
                    visit(block)
            for h in getattr(st, "handlers", ()) or ():
                visit(h.body)
    visit(node.body)
    return out


def rewrite_statements(ctx, lower) -> bool:
    """In every statement list of the function and those defined in it, replace each
    statement for which ``lower(statement, function)`` returns a list by that list (a
    None leaves it); the new statements are not visited again.  True if any changed."""
    changed = False
    for f in ctx.functions:
        for block in statement_lists(f):
            k = 0
            while k < len(block):
                new = lower(block[k], f)
                if new is None:
                    k += 1
                    continue
                block[k:k + 1] = new
                k += len(new)
                changed = True
    return changed


def show(module, source) -> str:
    """Python ``source`` (one function) after the pass ``module``, as source (doctests)."""
    import textwrap
    tree = gast.parse(textwrap.dedent(source))
    fn = tree.body[0]
    module.run(fn, Context(fn))   # (``run`` skips a pass with none of its TRIGGERS)
    for st in [s for f in functions(fn) for b in statement_lists(f) for s in b]:
        if refusal(st):
            return f"refused: {refusal(st)[0]}"
    return ast.unparse(gast.gast_to_ast(tree)).strip()


# the pipeline, in order (imported here, after what the pass modules import from us)
from astjax.frontend.passes import augassign, boolops, loop_else, returns, ternary  # noqa: E402

PIPELINE: list = [augassign, boolops, ternary, loop_else, returns]
