"""An array written into itself: ``y[::-1] = y``, ``y[[2, 1, 0]] = y``, ``y[:] = y``.

NumPy reads the whole right-hand side before it writes (it buffers an overlapping
operand), so these permute or keep the entries.  Reverse mode cleared the written
entries' cotangent after adding the value's share into it, which for the array
itself is the same variable: the gradient came out zero.  Every form is checked
against central differences under grad, jit(grad), jvp, vmap(grad) and hessian.
"""
import numpy as np
import pytest

from conftest import check_derivatives

W = np.array([1.0, 2.0, 3.0, -0.5])


def reversed_into_itself(x):
    y = np.sin(x)
    y[::-1] = y
    return np.sum(y * W) * np.sum(y)


def permuted_into_itself(x):
    y = x * x
    y[[3, 2, 0, 1]] = y
    return np.sum(y * W)


def whole_into_itself(x):
    y = np.tanh(x)
    y[:] = y
    return np.sum(y * W * y)


def half_into_itself(x):
    y = x * 2.0
    y[:2] = y[2:]
    y[2:] = y[::-1][:2]
    return np.sum(np.exp(y) * W)


def in_a_loop(x):
    y = x * 1.0
    for _ in range(3):
        y[1:] = y[:-1] * 0.5
        y[::-1] = y
    return np.sum(y * y * W)


PROGRAMS = [reversed_into_itself, permuted_into_itself, whole_into_itself,
            half_into_itself, in_a_loop]


@pytest.mark.parametrize("f", PROGRAMS, ids=[f.__name__ for f in PROGRAMS])
def test_self_writes(f):
    x = np.array([0.3, -0.7, 1.1, 0.4])
    check_derivatives(f, x, batch=np.stack([x, x * 0.5 + 0.1]))
