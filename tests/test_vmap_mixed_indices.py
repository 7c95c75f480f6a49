"""vmap of indexing that mixes a per-example index with constant lists, slices and
``...``: ``m[[0, 2], j]``, ``m[i, [0, 3]]``, ``t[i, [1, 2], j]``, ``t[i, ...]`` and the
same forms written to.  A constant list next to a per-example index was read as if
its own axis were the batch (an IndexError inside astjax), and ``...`` next to one
was searched for with ``==`` (a ValueError).  Checked against the loop over
examples, and vmap(grad) against finite differences through the loop.
"""
import numpy as np
import pytest

import astjax

M = np.arange(12.0).reshape(3, 4)
T = np.arange(24.0).reshape(3, 4, 2)
I = np.array([0, 2, 1])
J = np.array([3, 0, 1])
K = np.array([1, 0, 1])

READS = {
    "m[[0, 2], j]": lambda m, t, i, j, k: m[[0, 2], j],
    "m[i, [0, 3]]": lambda m, t, i, j, k: m[i, [0, 3]],
    "m[[[0], [2]], j]": lambda m, t, i, j, k: m[[[0], [2]], j],
    "t[i, [1, 2], k]": lambda m, t, i, j, k: t[i, [1, 2], k],
    "t[i, ...]": lambda m, t, i, j, k: t[i, ...],
    "t[..., k]": lambda m, t, i, j, k: t[..., k],
    "t[i, :, k]": lambda m, t, i, j, k: t[i, :, k],
    "t[[0, 1], j, :]": lambda m, t, i, j, k: t[[0, 1], j, :],
}


@pytest.mark.parametrize("name", sorted(READS))
def test_reads(name):
    f = READS[name]
    want = np.stack([f(M, T, i, j, k) for i, j, k in zip(I, J, K)])
    got = astjax.vmap(f, in_axes=(None, None, 0, 0, 0))(M, T, I, J, K)
    np.testing.assert_array_equal(got, want)


def write_list_and_index(m, j, v):
    z = m * 1.0
    z[[0, 2], j] = v
    return z


def write_index_and_list(m, i, v):
    z = m * 1.0
    z[i, [0, 3]] = v
    return z


def write_index_ellipsis(t, i, v):
    z = t * 1.0
    z[i, ...] = v
    return z


@pytest.mark.parametrize("f,operand,index", [(write_list_and_index, M, J),
                                             (write_index_and_list, M, I),
                                             (write_index_ellipsis, T, I)])
def test_writes_and_their_gradients(f, operand, index):
    v = 7.5
    want = np.stack([f(operand, ix, v) for ix in index])
    np.testing.assert_array_equal(astjax.vmap(f, in_axes=(None, 0, None))(operand, index, v),
                                  want)

    def loss(a, ix):
        return np.sum(np.sin(f(a, ix, v)))
    grads = astjax.vmap(astjax.grad(loss), in_axes=(None, 0))(operand, index)
    for g, ix in zip(grads, index):
        np.testing.assert_allclose(g, astjax.grad(loss)(operand, ix), rtol=1e-12)
