"""Functions that may return their operand itself, or a view of it.

``y.astype(np.float64, copy=False)``, ``np.array(y, copy=None)``,
``np.nan_to_num(y, copy=False)``, ``y.conj()`` of a real array, ``np.real_if_close``
and one-operand ``np.einsum`` (``'ii->i'``, ``'ij->ji'``) hand back ``y``'s memory, so
a later in-place write through either name shows through the other.  The aliasing
analysis (``transforms/aliasing.py``) took them for new arrays: the derivative of
``a = y.astype(float, copy=False); y[0] = 5.0; sum(a * a)`` kept ``a``'s old entry
(``[10, 4, 6]`` where the gradient is ``[0, 4, 6]``), and jit computed ``y.conj()`` as
``np.conj(y)``, a copy.  Each form, written to in either direction, must now match
NumPy under jit and be right or refused (``AliasError``) under grad and jvp; the same
calls that copy (the defaults) keep working.
"""
import numpy as np
import pytest

import astjax
from astjax.transforms.aliasing import AliasError
from conftest import fd_vector_grad, load_source_module

X = np.array([1.0, 2.0, 3.0])
M = np.array([[1.0, 2.0], [3.0, 4.0]])

# (expression of y that may share y's memory, operand)
SHARING = [
    ("y.astype(np.float64, copy=False)", X), ("np.astype(y, np.float64, copy=False)", X),
    ("y.astype(y.dtype, copy=False)", X), ("np.array(y, copy=False)", X),
    ("np.array(y, copy=None)", X), ("np.array(y, copy=False, ndmin=2)", X),
    ("np.nan_to_num(y, copy=False)", X), ("y.conj()", X), ("y.conjugate()", X),
    ("np.real_if_close(y)", X), ("np.asarray(y)", X), ("np.einsum('i->i', y)", X),
    ("np.einsum('ij->ji', y)", M), ("np.einsum('ii->i', y)", M),
]
# the same calls where they copy
COPYING = [
    ("y.astype(np.float64)", X), ("np.array(y)", X), ("np.array(y, copy=True)", X),
    ("np.nan_to_num(y)", X), ("np.conj(y)", X), ("np.einsum('ij,jk->ik', y, y)", M),
    ("y.copy()", X),
]

WRITES = {
    "through y": ("    a = {expr}\n    y[0] = 5.0\n    return np.sum(a * a)\n"),
    "through a": ("    a = {expr}\n    a[0] = 5.0\n    return np.sum(y * y) + np.sum(a)\n"),
}


def _program(expr, write, tmp_path):
    source = ("import numpy as np\n"
              "def f(x):\n"
              "    y = x * 1.0\n" + WRITES[write].format(expr=expr))
    return load_source_module(source, tmp_path).f


def _check(f, x, refusal_ok):
    np.testing.assert_allclose(astjax.jit(f)(x), f(x.copy()), rtol=1e-12)
    want = fd_vector_grad(lambda v: f(v.reshape(x.shape)), x.reshape(-1)).reshape(x.shape)
    try:
        grad = astjax.grad(f)(x)
    except AliasError:
        assert refusal_ok
        return
    np.testing.assert_allclose(grad, want, rtol=1e-6, atol=1e-8)
    _, tangent = astjax.jvp(f, (x,), (np.ones_like(x),))
    np.testing.assert_allclose(tangent, np.sum(want), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("write", sorted(WRITES))
@pytest.mark.parametrize("expr,x", SHARING, ids=[e for e, _ in SHARING])
def test_shared_memory_is_followed_or_refused(expr, x, write, tmp_path):
    _check(_program(expr, write, tmp_path), x, refusal_ok=True)


@pytest.mark.parametrize("write", sorted(WRITES))
@pytest.mark.parametrize("expr,x", COPYING, ids=[e for e, _ in COPYING])
def test_copies_stay_separate(expr, x, write, tmp_path):
    _check(_program(expr, write, tmp_path), x, refusal_ok=False)
