"""``jit(f, fastmath=True)``: a loop's division by an array the loop never changes
becomes a product with that array's reciprocal, which ``licm`` then computes once
before the loop.

A time step dividing by a material array (``flux / density`` in a wave or heat
solver) pays a division per element per step, and divisions are what such steps
wait on: a vector division costs several multiplications.  ``x * (1 / d)`` rounds
twice, so this runs only when the user allows values within a few ulp
(``fastmath``; divisions by scalars are left to the kernel renderer,
``kernels/cexpr.op_expr``).

The rewrite keeps every result's dtype and precision: it is made only where ``d`` is
surely a NumPy float32 or float64 array or scalar and ``x / d`` surely has ``d``'s
dtype (``infer_dtypes``: from jit's argument dtypes through ``algebraic``'s rules,
loop carries included), so ``1 / d`` in ``d``'s dtype loses nothing the quotient
keeps and ``x * (1 / d)`` promotes exactly as ``x / d`` does.  A Python number or an
integer divisor is left alone (``1 / 0`` raises in Python; an integer's reciprocal
would need a float64 array), and so is a float32 divisor of float64 values.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from astjax import core
from astjax.core import Const, For, Prim, Var
from astjax.passes import algebraic, analysis as A

_DIVIDES = ("divide", "true_divide")


_TOP = object()      # no assignment of the name seen yet (the lattice's top)


def _meet(a, b):
    """The value both ``a`` and ``b`` surely are: a dtype, a tuple of such values, or
    None (unknown)."""
    if a is _TOP:
        return b
    if b is _TOP:
        return a
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return tuple(_meet(x, y) for x, y in zip(a, b))
    if isinstance(a, np.dtype) and isinstance(b, np.dtype) and a == b:
        return a
    if a in _WEAK and a is b:       # (a Python number's type)
        return a
    return None


_WEAK = {bool: Const(True), int: Const(1), float: Const(1.0)}


def _value(a, env):
    if isinstance(a, Var):
        return env.get(a.name, _TOP)
    return None


def _assigned(s, env):
    """(name, value) for what ``s`` assigns, or None while an operand is still _TOP."""
    if isinstance(s, Prim) and s.target:
        if s.prim == "make_tuple" and len(s.args) == 1 and isinstance(s.args[0], tuple):
            return [(s.target, tuple(_value(a, env) for a in s.args[0]))]
        if s.prim == "getitem" and len(s.args) == 2 and isinstance(s.args[0], Var) and \
                isinstance(s.args[1], core.Index) and not s.args[1].tuple_form and \
                len(s.args[1].items) == 1 and isinstance(s.args[1].items[0], Const) and \
                type(s.args[1].items[0].value) is int:
            whole = _value(s.args[0], env)
            if whole is _TOP:
                return None
            if isinstance(whole, tuple):
                k = s.args[1].items[0].value
                return [(s.target, whole[k] if -len(whole) <= k < len(whole) else None)]
        reads = [env.get(n, _TOP) for n in core.atom_vars(s.args) +
                 core.atom_vars(list(s.kwargs.values()))]
        if any(r is _TOP for r in reads):
            return None
        if s.prim == "tree_index" and len(s.args) == 2 and isinstance(s.args[0], Var):
            # a scan's step of an array xs: a row of it, or a NumPy scalar of its dtype
            xs = env.get(s.args[0].name)
            return [(s.target, xs if isinstance(xs, np.dtype) else None)]
        weak = _python_arithmetic(s, env)
        if weak is not None:
            return [(s.target, weak)]
        # a Python number's name reads as a constant of its type (NumPy's weak scalar)
        s = dataclasses.replace(s, args=[_WEAK[env[a.name]] if isinstance(a, Var) and
                                         env.get(a.name) in _WEAK else a for a in s.args])
        d = algebraic.result_dtype(
            s, lambda a: env.get(a.name) if isinstance(a, Var) and
            isinstance(env.get(a.name), np.dtype) else None)
        return [(s.target, d)]
    if isinstance(s, core.Copy):
        v = _value(s.value, env)
        return None if v is _TOP else [(s.target, v)]
    return [(n, None) for n in core.writes(s)]


# (not ``**``: ``(-8.0) ** (1 / 3)`` is a complex number in Python)
_PY_ARITH = ("add", "subtract", "multiply", "divide", "true_divide", "negative")


def _python_arithmetic(s, env):
    """``float`` or ``int`` when ``s`` is arithmetic on Python numbers only (``dt *
    dt``: a Python number again, NumPy's weak scalar where it meets an array)."""
    if s.prim not in _PY_ARITH or s.kwargs:
        return None
    ops = s.args[:1] if s.prim == "negative" else s.args[:2]
    types = []
    for a in ops:
        if isinstance(a, Var) and env.get(a.name) in _WEAK:
            types.append(env[a.name])
        elif isinstance(a, Const) and type(a.value) in _WEAK:
            types.append(type(a.value))
        else:
            return None
    if any(a is not None and not (isinstance(a, Const) and a.value is None)
           for a in s.args[len(ops):]):
        return None                 # (an out= operand)
    return float if float in types or s.prim in ("divide", "true_divide") else int


def infer_dtypes(fn, arg_dtypes=None, weak_args=None) -> dict:
    """name -> the dtype it surely has wherever it is read (an exact NumPy array or
    scalar of it): one value for every assignment of the name, found optimistically
    (a loop's carry keeps its dtype if every trip gives it back) and so flow-
    insensitively; tuples of such values through ``make_tuple`` and constant
    indexing; ``weak_args``' Python numbers as weak scalars."""
    given = dict(weak_args or {})
    given.update({p: algebraic._dtype(d) for p, d in (arg_dtypes or {}).items()})
    env = {p: given.get(p) for p in fn.params}
    stmts = list(core.walk(fn.body))
    changed = True
    while changed:
        changed = False
        for s in stmts:
            for name, value in _assigned(s, env) or ():
                if name in fn.params and name not in given:
                    continue
                old = env.get(name, _TOP)
                new = _meet(old, value)
                if new is not old and (old is _TOP or new != old):
                    env[name] = new
                    changed = True
    return {n: v for n, v in env.items() if isinstance(v, np.dtype)}


def _precise_divisor(x, d_dtype, dtypes) -> bool:
    """``x / d`` has ``d``'s dtype (float32 or float64), so ``1 / d`` computed in it
    loses nothing the quotient keeps."""
    if d_dtype is None or d_dtype.kind != "f" or d_dtype.itemsize not in (4, 8):
        return False
    if isinstance(x, Var):
        xd = dtypes.get(x.name)
        if xd is None:
            return False
    elif isinstance(x, Const) and type(x.value) in (int, float):
        xd = x.value
    else:
        return False
    return algebraic._ufunc_result(np.divide, [xd, d_dtype]) == d_dtype


def run(fn: core.Function, arg_dtypes: dict | None = None,
        weak_args: dict | None = None) -> bool:
    dtypes = None
    changed = False
    loops = [s for s in core.walk(fn.body) if isinstance(s, For) and
             isinstance(s.iter, Prim) and s.iter.prim == "range"]
    for loop in loops:
        candidates = {id(s) for s in loop.body if isinstance(s, Prim) and
                      s.prim in _DIVIDES and not s.kwargs and len(s.args) >= 2 and
                      isinstance(s.args[1], Var) and A.out_operand(s) is None}
        if not candidates:
            continue
        if dtypes is None:
            dtypes = infer_dtypes(fn, arg_dtypes, weak_args)
        written = A.all_effects(loop.body) | {loop.target}
        body = []
        for s in loop.body:
            if id(s) in candidates and s.args[1].name not in written and \
                    _precise_divisor(s.args[0], dtypes.get(s.args[1].name), dtypes):
                d = s.args[1]
                r = A.fresh_name(fn, f"{d.name}_reciprocal")
                body.append(Prim(r, "divide", [Const(1), d] + list(s.args[2:]), loc=s.loc))
                s.prim = "multiply"
                s.args = [s.args[0], Var(r)] + list(s.args[2:])
                changed = True
            body.append(s)
        loop.body[:] = body
    return changed
