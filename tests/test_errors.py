"""Errors point at the user's own line: file, line number, source line, caret and a hint.

The offending programs live in ``tests/programs/bad.py``; each offending line ends with
a ``# @name`` marker that the tests look up, so the expected line numbers never drift.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

import astjax
from astjax import numpy_definitions, primitives
from programs import bad

BAD_FILE = Path(bad.__file__)
THIS_FILE = Path(__file__)


def marker(mark: str, path: Path = BAD_FILE) -> tuple[int, str]:
    """(line number, code without the marker comment) of the line ending in ``# @mark``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    hits = [i for i, text in enumerate(lines, 1) if text.rstrip().endswith(f"# @{mark}")]
    assert len(hits) == 1, mark
    line = lines[hits[0] - 1]
    return hits[0], line[: line.rindex("#")].strip()


def assert_located(message: str, path: Path, lineno: int, code: str):
    """The message names the file and line, quotes the line and puts a caret under it."""
    assert path.name in message, message
    assert re.search(rf"\bline {lineno}\b", message), message
    lines = message.splitlines()
    quoted = [i for i, ln in enumerate(lines) if code in ln and not ln.lstrip().startswith(
        ("File", "hint:"))]
    assert quoted, f"source line {code!r} not quoted in:\n{message}"
    i = quoted[0]
    assert i + 1 < len(lines), message
    caret = lines[i + 1]
    assert re.fullmatch(r"\s*\^+\s*", caret), f"no caret line under the source in:\n{message}"
    start = lines[i].index(code.split()[0])
    first = caret.index("^")
    assert start <= first < start + len(code) + 1, (
        f"caret at column {first} is outside the quoted code:\n{message}")
    assert "hint:" in message, message


# ------------------------------------------------------------------------- unsupported syntax

SYNTAX_CASES = [
    ("uses_try", "try"),
    ("uses_with", "with"),
    ("uses_yield", "yield"),
    ("uses_global", "global"),
    ("uses_nonlocal", "nonlocal"),
    ("uses_class", "class"),
    # star_args (def f(*xs)) is no longer refused: tests/test_varargs_entry.py
    ("kwargs_call", "kwargs"),
    ("assign_attribute", "attr"),
    ("uses_import", "import"),
    ("uses_del", "del"),
    # loop_else (for/while ... else) is no longer refused: tests/test_passes_frontend.py
]


@pytest.mark.parametrize("fname,mark", SYNTAX_CASES, ids=[c[1] for c in SYNTAX_CASES])
def test_unsupported_syntax_is_located(fname, mark):
    lineno, code = marker(mark)
    with pytest.raises(astjax.TransformError) as info:
        astjax.grad(getattr(bad, fname))(np.ones(3))
    assert isinstance(info.value, astjax.UnsupportedSyntaxError), type(info.value)
    assert_located(str(info.value), BAD_FILE, lineno, code)


@pytest.mark.parametrize("fname,mark", SYNTAX_CASES, ids=[c[1] for c in SYNTAX_CASES])
def test_error_names_the_function(fname, mark):
    with pytest.raises(astjax.TransformError) as info:
        astjax.grad(getattr(bad, fname))(np.ones(3))
    outer = "bump" if fname == "uses_nonlocal" else fname
    assert outer in str(info.value) or fname in str(info.value)


def test_recursion_is_located():
    lineno, code = marker("recursive")
    with pytest.raises(astjax.TransformError) as info:
        astjax.grad(bad.recursive)(np.ones(3))
    assert_located(str(info.value), BAD_FILE, lineno, code)


@pytest.mark.parametrize("transform", ["value_and_grad", "vjp", "make_source"])
def test_other_transforms_report_the_same_error(transform):
    lineno, code = marker("try")
    with pytest.raises(astjax.UnsupportedSyntaxError) as info:
        if transform == "value_and_grad":
            astjax.value_and_grad(bad.uses_try)(np.ones(3))
        elif transform == "vjp":
            astjax.vjp(bad.uses_try, np.ones(3))
        else:
            astjax.make_source(astjax.grad(bad.uses_try))(np.ones(3))
    assert_located(str(info.value), BAD_FILE, lineno, code)


def test_error_attributes():
    lineno, _ = marker("with")
    with pytest.raises(astjax.TransformError) as info:
        astjax.grad(bad.uses_with)(np.ones(3))
    err = info.value
    assert err.location is not None
    assert err.location.lineno == lineno
    assert Path(err.location.filename).name == BAD_FILE.name
    assert err.hint


def test_errors_are_not_cached_as_success():
    for _ in range(2):
        with pytest.raises(astjax.UnsupportedSyntaxError):
            astjax.grad(bad.uses_try)(np.ones(3))


# ------------------------------------------------------------------ no rule for a function

UNKNOWN_CASES = [("unknown_c_function", "erf"), ("unknown_method", "method"),
                 ("unknown_numpy_function", "i0")]


@pytest.mark.parametrize("fname,mark", UNKNOWN_CASES, ids=[c[1] for c in UNKNOWN_CASES])
def test_unknown_function_on_differentiated_value(fname, mark):
    if mark == "i0":   # the case needs a NumPy function without a rule
        assert primitives.lookup_callable(np.i0) is None and \
            numpy_definitions.definition(np.i0) is None, \
            "np.i0 has a rule now: make unknown_numpy_function use one without"
    lineno, code = marker(mark)
    with pytest.raises(astjax.DifferentiationError) as info:
        astjax.grad(getattr(bad, fname))(np.linspace(0.1, 0.9, 4))
    assert_located(str(info.value), BAD_FILE, lineno, code)


def test_unknown_function_names_the_callee():
    with pytest.raises(astjax.DifferentiationError) as info:
        astjax.grad(bad.unknown_c_function)(np.ones(3))
    assert "erf" in str(info.value)
    with pytest.raises(astjax.DifferentiationError) as info:
        astjax.grad(bad.unknown_method)(np.ones(3))
    assert "apply" in str(info.value)


def test_unknown_function_on_constants_is_fine():
    x = np.linspace(0.1, 0.9, 3)
    g = astjax.grad(bad.unknown_on_constant)(x)
    np.testing.assert_allclose(g, [math.erf(1.0)] * 3)


def test_unknown_function_behind_stop_gradient_is_fine():
    x = np.linspace(-0.9, 0.9, 4)
    g = astjax.grad(bad.erf_stopped)(x)
    np.testing.assert_allclose(g, [math.erf(v) for v in np.tanh(x)])


# ----------------------------------------------------------------------- no source to read


def _exec_lambda():
    namespace: dict = {}
    exec("f = lambda x: x * 2.0", namespace)
    return namespace["f"]


NO_SOURCE_CASES = [
    # (np.sin has a rule: grad(np.sin) works; a ufunc with none has no source either)
    ("np.spacing", lambda: astjax.grad(np.spacing)(1.0)),  # @np.spacing
    ("len", lambda: astjax.grad(len)([1.0, 2.0])),  # @len
    ("math.sin", lambda: astjax.grad(math.sin)(1.0)),  # @math.sin
    ("exec-lambda", lambda: astjax.grad(_exec_lambda())(1.0)),  # @exec-lambda
]


@pytest.mark.parametrize("label,call", NO_SOURCE_CASES, ids=[c[0] for c in NO_SOURCE_CASES])
def test_no_source_raises_source_error_with_hint(label, call):
    with pytest.raises(astjax.TransformError) as info:
        call()
    assert isinstance(info.value, astjax.SourceError), type(info.value)
    message = str(info.value)
    assert "hint:" in message, message
    name = {"np.spacing": "spacing", "len": "len", "math.sin": "sin",
            "exec-lambda": "lambda"}[label]
    assert name in message, message


@pytest.mark.parametrize("label,call", NO_SOURCE_CASES, ids=[c[0] for c in NO_SOURCE_CASES])
def test_no_source_error_points_at_the_calling_line(label, call):
    """With no source of its own, the error points at the user's line that asked for it."""
    lineno, code = marker(label, THIS_FILE)
    with pytest.raises(astjax.TransformError) as info:
        call()
    assert_located(str(info.value), THIS_FILE, lineno, code)
