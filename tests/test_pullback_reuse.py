"""A vjp's pullback is a pure function: it can be called any number of times.

The backward sweep restores arrays the forward sweep updated in place.  An array
whose name was rebound afterwards comes back from the tape, and that is the
residuals' own array: restoring it in place changed what the next call of the same
pullback read (``w = zeros(...); w[...] = v; ...; w = zeros(...)``: the second call
saw ``w`` as it was before the write, and its cotangents were wrong).  Every program
here is pulled back with several cotangents, then vmapped over them, and compared with
a fresh vjp for each.
"""
import numpy as np
import pytest

import astjax


def rebound_after_update(x):
    w = np.zeros(x.shape)
    w[...] = np.sin(x) * 4.0
    out = w * x
    w = np.zeros(x.shape)
    w[1:] = x[:-1]
    return out + w


def updated_in_a_loop(x):
    acc = x * 1.0
    for k in range(3):
        buf = acc * 1.0
        buf[0] = buf[0] * (k + 2.0)
        acc = buf * x
    return acc


def integer_buffer(x):
    w = np.zeros(x.shape, dtype=np.int64)
    w[...] = x * 4.0
    out = w * x + np.tanh(x)
    w = np.zeros(x.shape, dtype=np.int64)
    w[...] = x * 2.0
    return out * 1.0


PROGRAMS = [rebound_after_update, updated_in_a_loop, integer_buffer]


@pytest.mark.parametrize("f", PROGRAMS, ids=[f.__name__ for f in PROGRAMS])
def test_pullback_called_again_and_vmapped(f):
    x = np.array([0.3, -1.2, 0.8, 0.5])
    cts = [np.cos(np.arange(4.0) * (k + 1.0)) for k in range(3)]
    fresh = [astjax.vjp(f, x)[1](c)[0] for c in cts]
    _, pull = astjax.vjp(f, x)
    for _ in range(2):
        for c, want in zip(cts, fresh):
            np.testing.assert_allclose(pull(c)[0], want, rtol=1e-12)
    np.testing.assert_allclose(astjax.vmap(pull)(np.stack(cts))[0], np.stack(fresh),
                               rtol=1e-12)
    for c, want in zip(cts, fresh):
        np.testing.assert_allclose(pull(c)[0], want, rtol=1e-12)
