"""vmap of in-place updates through names that share memory.

A per-example value written into an array the examples share (``np.zeros(3)``, an
argument with ``in_axes=None``) makes that array per-example.  vmap made a batched
copy bound to the updated name only, so every other name for the same memory (an
alias ``w = z``, a view ``r = z[0]``, a helper's parameter, the argument itself) kept
the old contents, and the result was wrong with no error.  Now the names that may
share the memory are batched together where they are made, and an update that
vmap computes as a new array (a per-example index, a per-example branch) is written
back into that memory.  An argument the examples share that the code gives
per-example values (``c = c + x``) is copied per lane on entry.  Each program is
checked against the loop over examples, under vmap and jit(vmap).
"""
import numpy as np
import pytest

import astjax

X = np.arange(1.0, 7.0).reshape(2, 3)
IDX = np.array([0, 2])


def fill(a, v):
    a[0] = v


def helper_updates_its_parameter(x, i):
    z = np.zeros(3)
    fill(z, x[0])
    return z


def alias_then_update(x, i):
    z = np.ones(3)
    w = z
    w[2] = x[1]
    return z + w


def view_then_update(x, i):
    z = np.zeros((2, 3))
    r = z[0]
    r[:] = x
    return z


def reshaped_view(x, i):
    z = np.zeros((3, 1))
    w = z.reshape(3)
    w[1] = x[0]
    return z


def transposed_view(x, i):
    z = np.zeros((3, 2))
    w = z.T
    w[1] = x
    return z


def per_example_index_through_alias(x, i):
    z = np.zeros(3)
    w = z
    w[i] = x[i] * 2.0
    return z


def in_a_loop(x, i):
    z = np.zeros(3)
    w = z
    for k in range(3):
        w[k] = x[k] * (k + 1.0)
    return z * 2.0


def in_a_branch(x, i):
    z = np.zeros(3)
    w = z
    if x[0] > 2.0:
        w[1] = x[1]
    return z


PROGRAMS = [helper_updates_its_parameter, alias_then_update, view_then_update, reshaped_view,
            transposed_view, per_example_index_through_alias, in_a_loop]


@pytest.mark.parametrize("f", PROGRAMS, ids=[f.__name__ for f in PROGRAMS])
def test_shared_memory_follows_the_write(f):
    want = np.stack([f(x, i) for x, i in zip(X, IDX)])
    np.testing.assert_array_equal(astjax.vmap(f)(X, IDX), want)
    np.testing.assert_array_equal(astjax.jit(astjax.vmap(f))(X, IDX), want)


def write_into_argument(buf, x):
    buf[0] = x[0]
    return buf


def write_through_argument_alias(buf, x):
    b = buf
    b[1] = x[1]
    return buf + b


def argument_rebound(c, x):
    c = c + x
    return c * 2.0


def test_update_in_a_per_example_branch_is_refused():
    with pytest.raises(astjax.TransformError, match="inside a branch taken per example"):
        astjax.vmap(in_a_branch)(X, IDX)


@pytest.mark.parametrize("f", [write_into_argument, write_through_argument_alias,
                               argument_rebound])
def test_shared_argument_given_per_example_values(f):
    buf = np.array([0.5, -1.0, 2.0])
    want = np.stack([f(buf.copy(), x) for x in X])
    np.testing.assert_array_equal(astjax.vmap(f, in_axes=(None, 0))(buf, X), want)
    np.testing.assert_array_equal(astjax.jit(astjax.vmap(f, in_axes=(None, 0)))(buf, X), want)
    np.testing.assert_array_equal(buf, [0.5, -1.0, 2.0])       # the caller's array
