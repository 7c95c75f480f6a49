"""Constants printed into generated code read back as the same expression.

The generated source prints primitives with operators and attributes (``a ** b``,
``-x``, ``z.real``).  A constant with a sign on the left of ``**`` printed bare read
as ``-(1 ** k)``: ``(-1) ** k`` and ``np.power(-2.0, k)`` lost their sign under jit,
grad, vmap and every other transformation, silently.  The sweep prints every
operator and attribute primitive of the registry with constants of every kind in
every operand position, evaluates the text, and compares it with the primitive's
NumPy implementation; the programs check the user-level forms end to end.
"""
import math

import numpy as np
import pytest

import astjax
from astjax import codegen
from astjax import primitives as P
from astjax.core import Const, Prim, Var

CONSTANTS = [-1, -2.5, -0.0, 0.5, 3, True, False, -math.inf, math.nan, 2 + 1j, -1j, -7]
OPERAND = np.array([0.5, 1.5, 2.0])
INTEGERS = np.array([1, 6, 3])

# (``@`` takes no scalar operand: no constant reaches it)
OPERATOR_PRIMS = sorted(n for n, p in P.REGISTRY.items() if p.operator and p.operator != "@")
ATTRIBUTE_PRIMS = sorted(n for n, p in P.REGISTRY.items() if p.attribute)


def _operand(prim):
    if prim.operator in ("&", "|", "^", "<<", ">>", "~"):
        return INTEGERS
    return OPERAND


def _evaluate(prim, args):
    text = codegen.format_expr(Prim("out", prim.name, list(args)))
    from astjax import runtime_array as ra
    namespace = {"np": np, "ra": ra, "x": _operand(prim), "inf": math.inf, "nan": math.nan}
    return text, eval(text, namespace)   # noqa: S307  (our own printed expression)


def _same(got, expected):
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
    if expected.dtype.kind == "f":     # the sign of a zero too
        np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


def _numpy(prim, values):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            if prim.unary:
                return prim.impl(values[0])
            return prim.impl(*values)


@pytest.mark.parametrize("name", OPERATOR_PRIMS)
def test_operators_with_constants_in_each_position(name):
    prim = P.REGISTRY[name]
    checked = 0
    for c in CONSTANTS:
        if prim.unary and isinstance(c, bool) and prim.operator == "~":
            continue   # ``~True`` is Python's -2: the user's own spelling says which
        cases = [[Const(c)]] if prim.unary else [[Const(c), Var("x")], [Var("x"), Const(c)]]
        for args in cases:
            values = [_operand(prim) if isinstance(a, Var) else a.value for a in args]
            try:
                expected = _numpy(prim, values)
            except (TypeError, ValueError, ZeroDivisionError, OverflowError):
                continue      # NumPy refuses these operands: nothing to compare
            with np.errstate(all="ignore"):
                text, got = _evaluate(prim, args)
            _same(got, expected)
            checked += 1
    assert checked >= (3 if prim.unary else 5), name


@pytest.mark.parametrize("name", ATTRIBUTE_PRIMS)
def test_attributes_of_constants(name):
    prim = P.REGISTRY[name]
    assert all(p in prim.defaults for p in prim.params[1:]), "an attribute takes one operand"
    for c in CONSTANTS:
        try:
            expected = prim.impl(c)
        except (TypeError, ValueError):
            continue
        text, got = _evaluate(prim, [Const(c)])
        _same(got, expected)


def alternating(x):
    return np.sum([(-1) ** i * x[i] for i in range(3)])


def negative_base(x):
    return np.sum(np.power(-2.0, np.array([1.0, 2.0, 3.0])) * x)


def alternating_loop(x):
    s = 0.0
    for k in range(3):
        s = s + (-0.5) ** k * x[k]
    return s


def folded_base(x):
    return np.sum((1 - 3) ** np.array([2, 3, 4]) * x)


@pytest.mark.parametrize("f", [alternating, negative_base, alternating_loop, folded_base])
def test_negative_bases_under_every_transformation(f):
    x = np.array([0.3, 0.7, 1.3])
    expected = f(x)
    np.testing.assert_allclose(astjax.jit(f)(x), expected, rtol=1e-14)
    value, g = astjax.value_and_grad(f)(x)
    np.testing.assert_allclose(value, expected, rtol=1e-14)
    fd = [(f(x + 1e-6 * e) - f(x - 1e-6 * e)) / 2e-6 for e in np.eye(3)]
    np.testing.assert_allclose(g, fd, rtol=1e-6)
    np.testing.assert_allclose(astjax.jvp(f, (x,), (np.ones(3),))[1], np.sum(fd), rtol=1e-6)
    np.testing.assert_allclose(astjax.vmap(f)(np.stack([x, 2 * x])), [f(x), f(2 * x)],
                               rtol=1e-14)


@pytest.mark.parametrize("value", [
    -0.0, math.inf, -math.inf, 1e-310, -1j, complex(1.0, -0.0), complex(-0.0, 0.0),
    complex(math.inf, -1.0), complex(math.nan, 0.0), np.float64(math.nan),
    np.float32(-math.inf), np.float32(-0.0), np.int8(-3), np.complex64(-1j), True, -7])
def test_constants_read_back_exactly(value):
    from astjax.core import format_const
    back = eval(format_const(value), {"np": np})   # noqa: S307
    assert type(back) is type(value)
    got, want = np.asarray(back), np.asarray(value)
    np.testing.assert_array_equal(got, want)
    if want.dtype.kind in "fc":
        for part in (np.real, np.imag):
            np.testing.assert_array_equal(np.signbit(part(got)), np.signbit(part(want)))
