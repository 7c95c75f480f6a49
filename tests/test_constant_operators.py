"""Operators on Python number constants keep Python's meaning through every
transformation.

The class of a silent wrong result: the frontend folded ``2 ** 63 + 3`` with the
operator primitive's NumPy implementation, in int64: it wrapped, so
``range(2 ** 63 - 3, 2 ** 63 + 3)`` became an empty range and the loop lost every
step (jit, grad and jvp gave the loop's input back), found by the fuzzer's
``for_index_int64_edge`` construct.  Every transformation-time evaluation of an
operator on constants now takes Python's own function (``primitives.PYTHON_BINARY``).

Swept here: every binary operator on Python numbers, over operands at int64's edges
and past them, zero divisors, negative and float exponents, under jit (NumPy and C
backends), grad and jvp, against plain Python.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import astjax
from astjax import primitives as P
from conftest import load_source_module

OPERANDS = ["2 ** 63", "2 ** 63 - 1", "-2 ** 63", "2 ** 64 + 5", "3", "-7", "0", "2",
            "0.5", "-2.5", "1e308", "63"]
NUMERIC = ["+", "-", "*", "/", "//", "%", "**", "<", "<=", ">", ">=", "==", "!=", "&",
           "|", "^", "<<", ">>"]


def _cases():
    for op in NUMERIC:
        for a, b in itertools.product(OPERANDS, repeat=2):
            if op in ("**", "<<") and not P.small_operands(op, eval(a), eval(b)):
                continue                       # (huge results: Python takes long too)
            yield f"({a}) {op} ({b})"


CASES = list(_cases())


def test_the_table_covers_every_python_number_operator():
    assert set(NUMERIC) == set(P.PYTHON_BINARY) - {"@"}
    assert len(CASES) > 2000, len(CASES)


def _outcome(expr):
    try:
        return True, eval(expr)
    except Exception as e:                     # noqa: BLE001 (the error is the outcome)
        return False, type(e)


OUTCOMES = [_outcome(expr) for expr in CASES]
VALUED = [e for e, (ok, _) in zip(CASES, OUTCOMES) if ok]
RAISING = [(e, err) for e, (ok, err) in zip(CASES, OUTCOMES) if not ok]


@pytest.fixture(scope="module")
def constants_module(tmp_path_factory):
    """A function per chunk of the cases Python evaluates, returning their values as
    a tuple; a function per case Python raises on."""
    lines = ["import numpy as np", ""]
    chunks = [VALUED[i:i + 60] for i in range(0, len(VALUED), 60)]
    for k, chunk in enumerate(chunks):
        lines.append(f"def values_{k}(x):")
        lines.append("    return (" + ", ".join(chunk) + ",), np.sum(x * x)")
        lines.append("")
    for k, (expr, _) in enumerate(RAISING):
        lines += [f"def raises_{k}(x):", f"    return {expr}, np.sum(x * x)", ""]
    return load_source_module("\n".join(lines), tmp_path_factory.mktemp("constops")), \
        chunks


def _same(got, want):
    if isinstance(want, float) and math.isnan(want):
        return isinstance(got, float) and math.isnan(got)
    return type(got) is type(want) and got == want


@pytest.mark.parametrize("backend", ["numpy", "c"])
def test_jit_gives_pythons_values(constants_module, backend):
    mod, chunks = constants_module
    x = np.arange(3.0)
    for k, chunk in enumerate(chunks):
        f = getattr(mod, f"values_{k}")
        want, _ = f(x)
        got, _ = astjax.jit(f, backend=backend)(x)
        bad = [(e, g, w) for e, g, w in zip(chunk, got, want) if not _same(g, w)]
        assert not bad, bad[:5]


def test_jit_raises_where_python_raises(constants_module):
    """(``1 / 0`` was folded to inf, ``7 // 0`` to 0: NumPy's values, not Python's
    ZeroDivisionError.)"""
    mod, _ = constants_module
    x = np.arange(3.0)
    assert len(RAISING) > 100
    for k, (expr, err) in enumerate(RAISING):
        f = getattr(mod, f"raises_{k}")
        with pytest.raises(err):
            f(x)
        with pytest.raises(err):
            astjax.jit(f)(x)


def _range_loop_source(lo, hi):
    return f"""
import numpy as np


def counting(x):
    v = x * 0.0
    for i in range({lo}, {hi}):
        v = v + np.tanh(x * i * 1e-19) + 1.0
    return v


def loss(x):
    return np.sum(counting(x) ** 2)
"""


@pytest.mark.parametrize("lo, hi", [("2 ** 63 - 3", "2 ** 63 + 3"),
                                    ("-2 ** 63 - 2", "-2 ** 63 + 4"),
                                    ("2 ** 64 - 1", "2 ** 64 + 5"),
                                    ("2 ** 62 * 2 - 3", "2 ** 62 * 2 + 3")])
def test_a_loop_over_a_range_past_int64_runs_every_step(lo, hi, tmp_path):
    mod = load_source_module(_range_loop_source(lo, hi), tmp_path)
    x = np.array([0.5, -1.0, 2.0])
    want = mod.counting(x)                     # (Python's range: 6 steps)
    for backend in ("numpy", "c"):
        np.testing.assert_array_equal(astjax.jit(mod.counting, backend=backend)(x), want)
    g = astjax.grad(mod.loss)(x)
    eps = 1e-6
    fd = np.array([(mod.loss(x + eps * e) - mod.loss(x - eps * e)) / (2 * eps)
                   for e in np.eye(3)])
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(astjax.jit(astjax.grad(mod.loss))(x), g, rtol=1e-12)
    primal, tangent = astjax.jvp(mod.counting, (x,), (np.ones(3),))
    np.testing.assert_array_equal(primal, want)
