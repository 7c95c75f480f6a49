"""Third derivatives through every rule of the registry, three ways.

For every differentiable NumPy-facing primitive with a ``sample`` (the table
``tests/test_rules_vjp.py`` sweeps), a small program calls it with one float operand
``x`` (the first differentiable argument holding a float array or scalar; the other
arguments are module constants) and reduces the result to a scalar with fixed random
weights ``W``.  Along a fixed random direction ``V``, with ``phi(t) = h(x + t V)``:

- reverse mode: ``r1 = <grad h, V>``, ``r2 = <grad r1, V>``, ``r3 = <grad r2, V>``
  (``grad`` called inside the functions it differentiates);
- forward mode: ``j1 = jvp(h)(V)``, ``j2 = jvp(j1)(V)``, ``j3 = jvp(j2)(V)``;
- central finite differences of the second derivative ``r2`` along ``V``;

all three give ``phi'''(0)``, and ``r2 == j2`` is ``phi''(0)``.  The programs are
written to files (astjax reads source) and imported.  One small sample per
primitive; the sweep runs in seconds.

Third derivatives astjax refuses (loudly, with a ``DifferentiationError``) are listed
in ``REFUSED_THIRD`` with the reason; the test then asserts the refusal in both
modes, so a silent wrong number can never hide behind an expected failure.
"""
from __future__ import annotations

import builtins

import numpy as np
import pytest
from conftest import load_source_module
from test_rules_vjp import DIFF, TABLE, _is_float_leaf

from astjax.errors import DifferentiationError

# name -> why its third derivative is refused (loud, never a silent zero)
REFUSED_THIRD = {
    "norm": "third derivatives of np.linalg.norm are not implemented",
    "matrix_norm": "third derivatives of np.linalg.norm are not implemented",
    # as in JAX, random_gamma_grad has no derivative of its own
    "random_gamma": "second derivatives of gamma's implicit reparameterization",
    "random_gamma_batched": "second derivatives of gamma's implicit reparameterization",
    "random_multivariate_normal": "second derivatives of multivariate_normal's mean/cov",
    "random_multivariate_normal_batched": "second derivatives of multivariate_normal's "
                                          "mean/cov",
}
# name -> reason the sweep does not apply (no float operand to move, ...)
NOT_APPLICABLE = {}

EPS = 1e-4
RTOL = 2e-4


def _float_path(value):
    """Where ``x`` goes in an argument: () for the value itself, (i, j, ...) for an
    entry of nested lists/tuples; None when it holds no float operand."""
    if _is_float_leaf(value):
        return ()
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            sub = _float_path(v)
            if sub is not None:
                return (i,) + sub
    return None


def _choose(prim, args, kwargs):
    """(kind, position/name, path) of the operand to differentiate, or None."""
    pos = list(args)
    for d in prim.diff:
        if d.startswith("*"):
            start = prim.params.index(d)
            for i in range(start, len(pos)):
                path = _float_path(pos[i])
                if path is not None:
                    return ("arg", i, path)
            continue
        if d in kwargs:
            path = _float_path(kwargs[d])
            if path is not None:
                return ("kw", d, path)
            continue
        i = prim.params.index(d)
        if i < len(pos):
            path = _float_path(pos[i])
            if path is not None:
                return ("arg", i, path)
    return None


def _leaves(out, prefix="out"):
    """(source expression, value) of every float leaf of a result (one level deep)."""
    if isinstance(out, (list, tuple)):
        items = []
        for i, o in enumerate(out):
            if isinstance(o, (list, tuple)):
                items += _leaves(o, f"{prefix}[{i}]")
            elif _is_float_leaf(o):
                items.append((f"{prefix}[{i}]", o))
        return items
    return [(prefix, out)] if _is_float_leaf(out) else []


def _program(name, prim, args, kwargs, tmp_path):
    choice = _choose(prim, args, kwargs)
    if choice is None:
        return None
    kind, where, path = choice
    consts = {}

    def const(v):
        key = f"C{len(consts)}"
        consts[key] = v
        return key

    def render(value, sub):
        """Source for ``value`` with ``x`` at path ``sub`` (None: no x inside)."""
        if sub is None:
            return const(value)
        if sub == ():
            return "x"
        parts = [render(v, sub[1:] if i == sub[0] else None) for i, v in enumerate(value)]
        if isinstance(value, tuple):
            return "(" + ", ".join(parts) + ",)"
        return "[" + ", ".join(parts) + "]"

    parts = [render(v, path if kind == "arg" and i == where else None)
             for i, v in enumerate(args)]
    parts += [f"{k}={render(v, path if kind == 'kw' and k == where else None)}"
              for k, v in kwargs.items()]
    x0 = args[where] if kind == "arg" else kwargs[where]
    for p in path:
        x0 = x0[p]
    out = prim.impl(*args, **kwargs)
    leaves = _leaves(out)
    if not leaves:
        return None
    rng = np.random.default_rng(7)
    terms = []
    for i, (expr, val) in enumerate(leaves):
        consts[f"W{i}"] = rng.standard_normal(np.shape(val))
        if np.iscomplexobj(val):     # (NumPy 2.5's eig, eigvals): both parts, as reals
            consts[f"WI{i}"] = rng.standard_normal(np.shape(val))
            terms += [f"np.sum(np.real({expr}) * W{i})", f"np.sum(np.imag({expr}) * WI{i})"]
        else:
            terms.append(f"np.sum({expr} * W{i})")
    v = rng.standard_normal(np.shape(x0))
    consts["V"] = float(v) if isinstance(x0, float) else v
    source = (
        "import numpy as np\n\nimport astjax\n\nCALLEE = None\n\n\n"
        "def h(x):\n"
        f"    out = CALLEE({', '.join(parts)})\n"
        f"    return {' + '.join(terms)}\n\n\n"
        "def r1(x):\n    return np.sum(astjax.grad(h)(x) * V)\n\n\n"
        "def r2(x):\n    return np.sum(astjax.grad(r1)(x) * V)\n\n\n"
        "def r3(x):\n    return np.sum(astjax.grad(r2)(x) * V)\n\n\n"
        "def j1(x):\n    return astjax.jvp(h, (x,), (V,))[1]\n\n\n"
        "def j2(x):\n    return astjax.jvp(j1, (x,), (V,))[1]\n\n\n"
        "def j3(x):\n    return astjax.jvp(j2, (x,), (V,))[1]\n")
    mod = load_source_module(source, tmp_path, f"orders_{name}")
    mod.CALLEE = prim.impl
    for k, val in consts.items():
        setattr(mod, k, val)
    x = x0 if isinstance(x0, float) else np.array(x0, dtype=np.float64)
    return mod, x, consts["V"]


def _attempt(f, x):
    """f(x) as a float, or None when astjax refuses it loudly."""
    try:
        with np.errstate(all="ignore"):
            return float(f(x))
    except DifferentiationError as err:
        assert "not implement" in str(err) or "no derivative" in str(err), str(err)
        return None


def _check_refused(name, mod, x, v):
    """A primitive whose third derivative is refused in at least one mode: every
    number a mode does compute agrees with finite differences of a second derivative."""
    values = {k: _attempt(getattr(mod, k), x) for k in ("r2", "j2", "r3", "j3")}
    assert values["r3"] is None or values["j3"] is None, \
        f"{name}: no longer refused: remove it from REFUSED_THIRD"
    second = "r2" if values["r2"] is not None else "j2"
    if values[second] is None:
        return
    f2 = getattr(mod, second)
    with np.errstate(all="ignore"):
        fd = (float(f2(x + EPS * v)) - float(f2(x - EPS * v))) / (2 * EPS)
    for k in ("r3", "j3"):
        if values[k] is not None:
            scale = builtins.max(abs(values[k]), abs(fd), 1.0)
            assert _close(values[k], fd, scale * 10), \
                f"{name}: third derivative ({k}) {values[k]!r}, finite differences {fd!r}"


SWEPT = [n for n in DIFF if TABLE[n].sample is not None and n not in NOT_APPLICABLE]


def _close(a, b, scale):
    return abs(a - b) <= RTOL * scale + 1e-7


@pytest.mark.parametrize("name", SWEPT)
def test_third_order_agrees_three_ways(name, tmp_path):
    prim = TABLE[name]
    args, kwargs = prim.sample(np.random.default_rng(0))
    built = _program(name, prim, args, kwargs, tmp_path)
    assert built is not None, f"{name}: no float operand or result: list it in NOT_APPLICABLE"
    mod, x, v = built
    if name in REFUSED_THIRD:
        _check_refused(name, mod, x, v)
        return
    with np.errstate(all="ignore"):
        second_r = float(mod.r2(x))
        second_j = float(mod.j2(x))
        scale2 = builtins.max(abs(second_r), abs(second_j), 1.0)
        assert _close(second_r, second_j, scale2), \
            f"{name}: second derivative: reverse {second_r!r}, forward {second_j!r}"
        third_r = float(mod.r3(x))
        third_j = float(mod.j3(x))
        fd = (float(mod.r2(x + EPS * v)) - float(mod.r2(x - EPS * v))) / (2 * EPS)
    scale3 = builtins.max(abs(third_r), abs(third_j), abs(fd), 1.0)
    assert _close(third_j, fd, scale3 * 10), \
        f"{name}: third derivative: forward {third_j!r}, finite differences {fd!r}"
    assert _close(third_r, third_j, scale3), \
        f"{name}: third derivative: reverse {third_r!r}, forward {third_j!r}"
