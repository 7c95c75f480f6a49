"""Numbers written in the code, inside containers that vmap batches.

``lax.scan`` collects a step's outputs in a list; a step returning a number written in
the code (``return carry, 0.0``) or a value the examples share (a step counter)
appended an unbatched entry to a batched list, and the stacked steps were read as
batched along the steps' axis: shape ``(4,)`` instead of ``(batch, 4)`` when the batch
had as many examples as the scan had steps, silently, and a crash otherwise under jit.
``return x, 1.0`` crashed under ``jit(vmap)`` the same way.  Every entry of a batched
container now carries the batch.  Checked against the loop over examples.
"""
import numpy as np
import pytest

import astjax
from astjax import lax

XS = np.arange(12.0).reshape(4, 3)      # four scan steps


def scan_constant_output(c):
    return lax.scan(lambda carry, r: (carry + r, 0.0), c, XS)


def scan_counter_output(c):
    def step(carry, r):
        c, k = carry
        return (c + r, k + 1), k * 10.0
    return lax.scan(step, (c, 0), XS)


def scan_without_xs(c):
    return lax.scan(lambda carry, _: (carry * 0.5, 1), c, None, length=4)


def tuple_with_constant(c):
    return c * 2.0, 1.0, True


def fori_with_constant_carry(c):
    return lax.fori_loop(0, 3, lambda i, carry: (carry[0] + i, carry[1] + 0.5), (c, 0.0))


PROGRAMS = [scan_constant_output, scan_counter_output, scan_without_xs, tuple_with_constant,
            fori_with_constant_carry]


def _loop(f, cs):
    outs = [f(c) for c in cs]
    return astjax.tree_util.tree_map(lambda *leaves: np.stack([np.asarray(v) for v in leaves]),
                                     *outs)


@pytest.mark.parametrize("batch", [3, 4])
@pytest.mark.parametrize("f", PROGRAMS, ids=[f.__name__ for f in PROGRAMS])
def test_constant_entries_carry_the_batch(f, batch):
    cs = np.arange(batch * 3.0).reshape(batch, 3)
    want = _loop(f, cs)
    for transformed in (astjax.vmap(f), astjax.jit(astjax.vmap(f))):
        got = transformed(cs)
        flat_got = astjax.tree_util.tree_leaves(got)
        flat_want = astjax.tree_util.tree_leaves(want)
        assert len(flat_got) == len(flat_want)
        for g, w in zip(flat_got, flat_want):
            assert np.shape(g) == np.shape(w), (np.shape(g), np.shape(w))
            np.testing.assert_allclose(g, w, rtol=1e-12)
