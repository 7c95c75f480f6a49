"""Common-subexpression elimination: compute a pure primitive once, copy it after.

Reverse mode recomputes what the forward sweep had (``d_inputs_2_mul = inputs_2 *
inputs_2`` in every tanh adjoint), inlining repeats shape queries and casts, and users
write ``np.sum(x * x)`` twice.  ``t2 = prim(args)`` identical to an earlier
``t1 = prim(args)`` (same primitive, operands and keywords; constants compared with
their type, so ``x * 1`` and ``x * 1.0`` differ) becomes ``t2 = t1``.

Safety:
* only pure primitives (``analysis.is_pure``: no tape, no ``out=``, no checks);
* the fact ``prim(args) in t1`` dies when ``t1`` or an operand is rebound (forward
  facts: branches and loops forget what they write);
* sharing one object where there were two is only invisible if nobody mutates it:
  every variable involved (operands, ``t1``, ``t2``) must be in an alias class that
  is never updated in place nor used as a tape (``analysis.Aliases``).  A function
  that updates an array in place keeps its separate computations for that array.
"""
from __future__ import annotations

from astjax import core
from astjax.core import Copy, Prim, Var
from astjax.passes import analysis as A


class _CSE(A.ForwardWalker):
    def __init__(self, aliases):
        super().__init__()
        self.aliases = aliases

    def _candidate(self, s):
        if not (isinstance(s, Prim) and s.target and A.is_pure(s)):
            return False
        names = core.atom_vars(s.args) + core.atom_vars(s.kwargs.values()) + [s.target]
        return self.aliases.stable(names)

    def simple(self, s, facts):
        repl = None
        key = A.prim_key(s) if self._candidate(s) else None
        if key is not None:
            t1 = facts.get(("expr", key))
            if t1 is not None and t1 != s.target:
                repl = Copy(s.target, Var(t1), loc=s.loc)
        facts.kill(A.effects(s))
        if key is not None and s.target not in core.atom_vars(s.args) + core.atom_vars(
                s.kwargs.values()):
            if repl is None:
                deps = set(core.atom_vars(s.args) + core.atom_vars(s.kwargs.values()))
                facts.add(("expr", key), s.target, deps | {s.target})
        return None if repl is None else [repl]


def run(fn: core.Function) -> bool:
    walker = _CSE(A.Aliases(fn))
    fn.body[:] = walker.run_block(fn.body, A.Facts())
    return walker.changed
