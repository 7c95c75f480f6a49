"""Algebraic simplification: cheaper spellings of the same values, never other values.

Rewrites, each checked against NumPy across dtypes, arrays and scalars
(``tests/test_passes.py::TestAlgebraic::test_identity_table``):

* ``rt.acc(a, None)`` -> ``a`` and ``rt.acc(None, b)`` -> ``b`` (acc returns that very
  object), ``rt.stop_gradient(x)`` -> ``x`` (the identity at run time);
* ``x * x`` -> ``np.square(x)`` and ``x ** 2`` -> ``np.square(x)``;
* ``x ** 1`` -> ``+x`` (np.positive: the same values, dtype and type, 0-d included).

The arithmetic rewrites need to know that ``x`` is a NumPy array or NumPy scalar of a
non-boolean numeric dtype: for a Python float ``x * x`` is a float but
``np.square(x)`` an ``np.float64``; for a Python int it overflows; for booleans the
dtypes differ; for ``np.matrix`` ``x * x`` is a matrix product.  Nothing in the
source says so, so those facts come from where they are certain (``dtype_facts``):
the argument dtypes jit specializes on (``arg_dtypes``: parameter -> dtype of an exact
``np.ndarray`` or NumPy scalar), array constructors with a known dtype, and ufuncs
and products of such values (their result dtype computed by NumPy itself).  Without
facts, no arithmetic rewrite happens.

Deliberately not done: ``x * 1``, ``x + 0``, ``x / 1`` -> ``x`` (``-0.0 + 0`` is
``0.0``; complex ``inf * 1`` has a NaN imaginary part; ``0 * x`` folded to ``0``
changed a shape in Tangent), ``x ** 0.5`` -> ``np.sqrt(x)`` (NumPy scalars use
``pow``: ``(-0.0) ** 0.5`` is ``0.0``, ``sqrt(-0.0)`` is ``-0.0``; ints promote
differently), ``np.exp(np.log(x))`` -> ``x`` (not exact), ``x ** 3`` -> ``x * x * x``
(rounds differently from ``pow``).
"""
from __future__ import annotations

import warnings

import numpy as np

from astjax import core
from astjax.core import Const, Copy, Prim, Var
from astjax.passes import analysis as A

_DTYPE_KINDS = "iufcb"
_CREATORS = {"zeros": 1, "ones": 1, "empty": 1, "identity": 1, "eye": 3, "full": 2}
# the ``*_like`` constructors: the position of their dtype argument
_LIKE = {"np_zeros_like": 1, "np_ones_like": 1, "empty_like": 1, "full_like": 2}


def _dtype(v):
    try:
        d = np.dtype(v)
    except TypeError:
        return None
    return d if d.kind in _DTYPE_KINDS else None


def _sample(d):
    return np.ones(1, dtype=d)


def _ufunc_result(ufunc, operands):
    """Result dtype of ``ufunc`` on operands given as dtypes or Python constants."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            r = ufunc(*[_sample(o) if isinstance(o, np.dtype) else o for o in operands])
    except Exception:
        return None
    return _dtype(r.dtype) if isinstance(r, np.ndarray) else None


def result_dtype(s: Prim, dtype_of):
    """The dtype of ``s``'s result when it is surely an exact NumPy array or scalar."""
    entry = A.prim_entry(s.prim)
    if entry is None or A.out_operand(s) is not None:
        return None
    if s.prim in ("getitem", "positive", "copy", "stop_gradient"):
        return dtype_of(s.args[0]) if s.prim != "getitem" or not s.kwargs else None
    if s.prim == "pad":         # np.pad: its operand's dtype, whatever the mode
        return dtype_of(s.args[0])
    if s.prim in _LIKE and not s.kwargs and len(s.args) > _LIKE[s.prim]:
        # np.zeros_like(a, dtype=None, ...): a's dtype, or the one given as a constant
        given = s.args[_LIKE[s.prim]]
        if not isinstance(given, Const):
            return None
        return dtype_of(s.args[0]) if given.value is None else \
            (_dtype(given.value) if dtype_of(s.args[0]) is not None else None)
    if isinstance(entry.impl, np.ufunc):
        nin = entry.impl.nin
        ops = s.args[:nin]
        if len(ops) != nin or s.kwargs:
            return None
        known = []
        for a in ops:
            d = dtype_of(a)
            if d is not None:
                known.append(d)
            elif isinstance(a, Const) and type(a.value) in (int, float, complex, bool):
                known.append(a.value)
            else:
                return None
        if not any(isinstance(k, np.dtype) for k in known):
            return None          # all Python numbers: Python arithmetic, not NumPy
        return _ufunc_result(entry.impl, known)
    if s.prim in ("dot", "matmul") and len(s.args) >= 2 and not s.kwargs:
        da, db = dtype_of(s.args[0]), dtype_of(s.args[1])
        if da is not None and db is not None:
            return _dtype(np.result_type(da, db))
        return None
    if s.prim in _CREATORS and not s.kwargs:
        k = _CREATORS[s.prim]
        if s.prim == "full":
            if len(s.args) > k and isinstance(s.args[k], Const) and s.args[k].value is not None:
                return _dtype(s.args[k].value)
            return None
        if len(s.args) > k and isinstance(s.args[k], Const):
            v = s.args[k].value
            return _dtype(np.float64 if v is None else v)
        return None
    if s.prim == "astype" and len(s.args) >= 2 and isinstance(s.args[1], Const) and \
            dtype_of(s.args[0]) is not None and not s.kwargs:
        return _dtype(s.args[1].value)
    return None


def _is_const(a, value):
    return isinstance(a, Const) and type(a.value) is type(value) and a.value == value


def _arith(s, dtype_of):
    """Rewrites of ``x * x``, ``x ** 2``, ``x ** 1`` for non-boolean NumPy values."""
    if s.kwargs or len(s.args) < 2 or A.out_operand(s) is not None:
        return None
    x, y = s.args[0], s.args[1]
    if not isinstance(x, Var):
        return None
    d = dtype_of(x)
    if d is None or d.kind == "b":
        return None
    if s.prim == "multiply" and y == x:
        return Prim(s.target, "square", [x, Const(None)], loc=s.loc)
    if s.prim == "power" and _is_const(y, 2):
        return Prim(s.target, "square", [x, Const(None)], loc=s.loc)
    if s.prim == "power" and _is_const(y, 1):
        return Prim(s.target, "positive", [x, Const(None)], loc=s.loc)
    return None


def _identity(s):
    """Runtime helpers that return one of their operands unchanged."""
    if s.prim == "acc" and len(s.args) == 2 and not s.kwargs:
        a, b = s.args
        if isinstance(b, Const) and b.value is None:
            return Copy(s.target, a, loc=s.loc)
        if isinstance(a, Const) and a.value is None:
            return Copy(s.target, b, loc=s.loc)
    if s.prim == "stop_gradient" and len(s.args) == 1 and not s.kwargs:
        return Copy(s.target, s.args[0], loc=s.loc)
    return None


class _Simplifier(A.ForwardWalker):
    """Facts: ``("dtype", v) -> np.dtype`` (v is an exact NumPy array or scalar)."""

    def dtype_of(self, facts):
        def get(a):
            if isinstance(a, Var):
                return facts.get(("dtype", a.name))
            return None
        return get

    def simple(self, s, facts):
        repl = None
        dtype_of = self.dtype_of(facts)
        if isinstance(s, Prim) and s.target is not None:
            repl = _identity(s) or _arith(s, dtype_of)
        new = repl or s
        d = None
        if isinstance(new, Prim) and new.target:
            d = result_dtype(new, dtype_of)
        elif isinstance(new, Copy):
            d = dtype_of(new.value)
        facts.kill(A.effects(new))
        if d is not None and new.target not in core.atom_vars(getattr(new, "args", [])):
            facts.add(("dtype", new.target), d, {new.target})
        return None if repl is None else [repl]


def run(fn: core.Function, arg_dtypes: dict | None = None) -> bool:
    """Simplify ``fn`` in place; ``arg_dtypes``: parameter -> dtype of an exact ndarray."""
    facts = A.Facts()
    for name, dt in (arg_dtypes or {}).items():
        d = _dtype(dt)
        if d is not None and name in fn.params:
            facts.add(("dtype", name), d, {name})
    walker = _Simplifier()
    fn.body[:] = walker.run_block(fn.body, facts)
    return walker.changed
