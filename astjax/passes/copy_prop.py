"""Copy propagation: after ``y = x``, read ``x`` where the code reads ``y``.

Normalization and the transforms name every intermediate (``d_outputs = d_preds``,
``preds = outputs``, ``d_W = None``); reading the original instead leaves the copy
dead for ``dce`` and exposes constants to ``const_fold`` (``d_x = None`` followed by
``if d_x is not None`` folds away).

Safety: a fact ``y -> x`` holds from the copy until ``y`` or ``x`` is rebound
(forward facts, see ``analysis``: branches and loops forget facts about what they
write).  In-place updates do not matter: ``y`` and ``x`` name the same object, so
``y[i] = v`` and ``x[i] = v`` are the same update.  Constants are propagated only when
immutable (a list display would build a new list at each use).  A name is never
replaced where Python needs one (``x[i]``, ``x.shape``, a for-loop's iterable).

Also forwards items of tuple displays: ``t = (a, b); u = t[0]`` -> ``u = a`` (a
tuple cannot change, and ``t[0]`` is the very object ``a``).
"""
from __future__ import annotations

from astjax import core
from astjax.core import Const, Copy, Index, Prim, Var
from astjax.passes import analysis as A


class _Propagator(A.ForwardWalker):
    def _lookup(self, facts):
        def fn(v):
            new = facts.get(("copy", v.name))
            if new is not None and new != v:
                self.changed = True
                return new
            return v
        return fn

    def control(self, s, facts):
        A.rewrite_reads(s, self._lookup(facts))
        return None

    def simple(self, s, facts):
        A.rewrite_reads(s, self._lookup(facts))
        repl = None
        if isinstance(s, Prim) and s.prim == "getitem" and s.target and \
                isinstance(s.args[0], Var) and isinstance(s.args[1], Index):
            items = facts.get(("tuple", s.args[0].name))
            idx = s.args[1]
            if items is not None and len(idx.items) == 1 and not idx.tuple_form and \
                    isinstance(idx.items[0], Const) and type(idx.items[0].value) is int:
                k = idx.items[0].value
                if -len(items) <= k < len(items):
                    item = items[k]
                    if isinstance(item, Var) or (isinstance(item, Const)
                                                 and A.is_immutable_const(item)):
                        repl = Copy(s.target, item, loc=s.loc)
                        s = repl
        facts.kill(A.effects(s))
        if isinstance(s, Copy):
            v = s.value
            if isinstance(v, Var) and v.name != s.target:
                facts.add(("copy", s.target), v, {s.target, v.name})
            elif isinstance(v, Const) and A.is_immutable_const(v):
                facts.add(("copy", s.target), v, {s.target})
        elif isinstance(s, Prim) and s.prim == "make_tuple" and s.target and \
                s.target not in core.atom_vars(s.args) and isinstance(s.args[0], tuple):
            items = s.args[0]
            facts.add(("tuple", s.target), items, {s.target, *core.atom_vars(items)})
        return None if repl is None else [repl]


def run(fn: core.Function) -> bool:
    walker = _Propagator()
    fn.body[:] = walker.run_block(fn.body, A.Facts())
    return walker.changed
