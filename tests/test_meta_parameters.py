"""Parameters a primitive declares ``meta`` are read only for shape, dtype and structure.

Reverse mode saves ``rt.meta(x)`` (a zero-size stand-in) for them instead of the
value, to keep less memory alive.  A rule that reads the values of such a parameter
computes with the stand-in's zeros: ``np.quantile``'s pullback sorted the stand-in and
gave vjp and jacrev cotangents in sorted order, silently.  The sweep calls every
registry entry with ``meta`` parameters on its sample, once with the values and once
with the stand-ins, and requires the same result.
"""
import numpy as np
import pytest

import astjax
import astjax.core_prims  # noqa: F401  (registers the core-form primitives)
from astjax import primitives as P
from astjax import runtime as rt
from astjax import tree_util

DECLARED = sorted(n for n, p in P.REGISTRY.items() if p.meta)
SAMPLED = [n for n in DECLARED if P.REGISTRY[n].sample is not None]


def _same(a, b):
    la, da = tree_util.tree_flatten(a)
    lb, db = tree_util.tree_flatten(b)
    assert da == db
    for x, y in zip(la, lb):
        if isinstance(x, (np.ndarray, np.generic, float, int, complex)):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
        else:
            assert x == y


def test_most_declarations_are_swept():
    assert len(SAMPLED) >= 15, SAMPLED


@pytest.mark.parametrize("name", SAMPLED)
def test_rule_reads_no_value_of_a_meta_parameter(name):
    prim = P.REGISTRY[name]
    args, kwargs = prim.sample(np.random.default_rng(sorted(P.REGISTRY).index(name)))
    expected = prim.impl(*args, **kwargs)
    stand_ins = [rt.meta(a) if p in prim.meta else a for p, a in zip(prim.params, args)]
    kw = {k: rt.meta(v) if k in prim.meta else v for k, v in kwargs.items()}
    _same(prim.impl(*stand_ins, **kw), expected)


def quantile_at(x):
    return np.quantile(x, 0.3)


def percentiles(x):
    return np.percentile(x, [30, 70])


def row_percentile(x):
    return np.percentile(x, 40, axis=1)


@pytest.mark.parametrize("f, x", [
    (quantile_at, np.array([0.5, -1.2, 2.0, 0.1, 0.9])),
    (percentiles, np.array([0.5, -1.2, 2.0, 0.1, 0.9])),
    (row_percentile, np.array([[0.5, -1.2, 2.0], [0.1, 0.9, -0.4]]))])
def test_quantile_pullbacks_in_the_inputs_order(f, x):
    jac_fwd = astjax.jacfwd(f)(x)
    np.testing.assert_allclose(astjax.jacrev(f)(x), jac_fwd, rtol=1e-12)
    out = f(x)
    t = np.arange(1.0, np.size(out) + 1).reshape(np.shape(out))
    (cot,) = astjax.vjp(f, x)[1](t)
    np.testing.assert_allclose(cot, np.tensordot(t, jac_fwd, axes=np.ndim(out)), rtol=1e-12)
