"""Optimization passes on the core form, for ``jit`` (issue #6).

Each pass is a small module with ``run(fn: core.Function) -> bool``: it rewrites
``fn.body`` in place and says whether it changed anything.  Every pass keeps values,
dtypes, shapes and in-place update semantics exactly (a wrong rewrite would be a
silently wrong result); the shared reasoning about reassigned variables, loops,
aliasing and liveness is in ``analysis``.

* ``const_fold``  constants, known tuple lengths, constant ``if`` tests, empty ranges
* ``copy_prop``   reads of ``y`` after ``y = x`` read ``x``; tuple items forwarded
* ``algebraic``   ``rt.acc(a, None)`` -> ``a``; ``x * x``, ``x ** 2`` -> ``np.square``
* ``cse``         a pure primitive computed twice is computed once
* ``licm``        loop-invariant statements hoisted out of ``for`` loops
* ``reciprocal``  ``jit(f, fastmath=True)`` only (``with_fastmath``): a loop's division
                  by an invariant float array becomes a product with its reciprocal
                  (not the same values: within a few ulp)
* ``dce``         dead pure statements removed
* ``fusion``      elementwise chains grouped into block functions that large arrays
                  run in row blocks on all cores; runs once, after the fixpoint
* ``buffers``     elementwise results written into dead temporaries (``out=``);
                  runs once, last

``optimize(fn)`` runs them on a copy of ``fn`` until nothing changes (at most
``max_rounds`` rounds) and returns the copy.
"""
from __future__ import annotations

import dataclasses
import inspect

from astjax import core
from astjax.passes import (algebraic, buffers, const_fold, copy_prop, cse, dce, fusion,
                           licm, reciprocal)

DEFAULT = (const_fold, copy_prop, algebraic, cse, licm, dce, fusion, buffers)
# for code that transformations read again (grad(jit(f))): without the passes that
# shape code for running (``RUNTIME_ONLY``: fused groups, buffer-reuse helpers)
TRANSFORMABLE = tuple(p for p in DEFAULT if not getattr(p, "RUNTIME_ONLY", False))

__all__ = ["optimize", "copy_function", "DEFAULT", "TRANSFORMABLE", "algebraic", "buffers",
           "const_fold", "copy_prop", "cse", "dce", "fusion", "licm", "reciprocal",
           "with_fastmath"]


def with_fastmath(chosen) -> tuple:
    """``chosen`` with the rewrites ``jit(f, fastmath=True)`` allows (before ``licm``,
    which hoists what they leave loop-invariant)."""
    chosen = tuple(chosen)
    at = chosen.index(licm) if licm in chosen else len(chosen)
    return chosen[:at] + (reciprocal,) + chosen[at:]


def copy_stmt(s):
    """A copy of a statement and its nested blocks (operands are immutable and shared)."""
    s = dataclasses.replace(s)
    if isinstance(s, core.Prim):
        s.args = list(s.args)
        s.kwargs = dict(s.kwargs)
    elif isinstance(s, core.External):
        s.args = list(s.args)
        s.kwargs = dict(s.kwargs)
        s.func = s.func
    elif isinstance(s, core.If):
        s.test = copy_stmt(s.test) if isinstance(s.test, core.Prim) else s.test
        s.body = [copy_stmt(x) for x in s.body]
        s.orelse = [copy_stmt(x) for x in s.orelse]
    elif isinstance(s, core.For):
        s.iter = copy_stmt(s.iter) if isinstance(s.iter, core.Prim) else s.iter
        s.body = [copy_stmt(x) for x in s.body]
        s.exit_flags = list(s.exit_flags)
    elif isinstance(s, core.While):
        s.test_body = [copy_stmt(x) for x in s.test_body]
        s.body = [copy_stmt(x) for x in s.body]
        s.exit_flags = list(s.exit_flags)
    return s


def copy_function(fn: core.Function) -> core.Function:
    """A copy whose statements can be rewritten without touching ``fn`` (env shared)."""
    return dataclasses.replace(fn, body=[copy_stmt(s) for s in fn.body],
                               params=list(fn.params), defaults=dict(fn.defaults),
                               kwonly=list(fn.kwonly), helpers=list(fn.helpers))


def _run(p, fn, options):
    run = getattr(p, "run", p)
    params = inspect.signature(run).parameters
    kwargs = {k: v for k, v in options.items() if k in params and v is not None}
    return bool(run(fn, **kwargs))


def optimize(fn: core.Function, passes=DEFAULT, *, max_rounds: int = 8,
             arg_dtypes: dict | None = None, donated=None,
             weak_args: dict | None = None) -> core.Function:
    """``fn`` optimized by ``passes`` (modules or functions with ``run(fn) -> bool``).

    Passes marked ``FINAL`` (fusion, buffer reuse) run once at the end, in order; the
    others run in order, round after round, until a round changes nothing or
    ``max_rounds`` is reached.  ``arg_dtypes`` (parameter -> dtype of an exact
    ``np.ndarray`` argument, what jit specializes on) enables the dtype-dependent
    rewrites and tells fusion which operands are surely NumPy values; ``donated``
    (parameters, jit's ``donate_argnums``) may have their memory reused for results;
    ``weak_args`` (parameter -> ``int``, ``float`` or ``bool``: a Python number jit
    specializes on the type of) lets dtype reasoning treat it as NumPy's weak scalar.
    """
    out = copy_function(fn)
    options = {"arg_dtypes": arg_dtypes, "donated": frozenset(donated or ()),
               "weak_args": weak_args}
    loop = [p for p in passes if not getattr(p, "FINAL", False)]
    final = [p for p in passes if getattr(p, "FINAL", False)]
    for _ in range(max_rounds):
        changed = False
        for p in loop:
            changed |= _run(p, out, options)
        if not changed:
            break
    for p in final:
        _run(p, out, options)
    return out
