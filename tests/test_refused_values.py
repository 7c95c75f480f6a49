"""Primitives whose output carries an operand's value without a derivative rule
(``Primitive.refuse``: arange's start and step) refuse a differentiated
operand there in every mode — they were silent zeros as "creation" primitives."""
import numpy as np
import pytest

import astjax
from astjax import primitives as P
from astjax.errors import DifferentiationError

from conftest import load_source_module

PROGRAMS = '''
import numpy as np


def arange_start(x):
    return np.sum(np.arange(x[0], x[0] + 3.0) * x[1])


def arange_step(x):
    return np.sum(np.arange(0.0, 2.0, x[0]))


def arange_length(x):
    n = x.shape[0]
    return np.sum(np.arange(n) * x)


def fftfreq_spacing(x):     # the frequencies of a grid of spacing d: k / (n d)
    return np.sum(np.fft.fftfreq(4, d=x[0]) * x[1])


def rfftfreq_spacing(x):
    return np.sum(np.fft.rfftfreq(5, x[0]) * x[1])


import astjax  # noqa: E402
from astjax import lax  # noqa: E402
SCALED = astjax.pmap(lambda v, k: lax.psum(v * k, "d"), axis_name="d",
                     static_broadcasted_argnums=1)


def pmap_static(x):         # a pmap's static argument: its plan (shard_map_call's)
    return np.sum(SCALED(np.ones(1), x[0]))
'''

REFUSED = {"arange": ["arange_start", "arange_step"], "shard_map_call": ["pmap_static"],
           "fftfreq": ["fftfreq_spacing"], "rfftfreq": ["rfftfreq_spacing"]}
X = np.array([0.5, 1.3])
TRANSFORMS = {
    "grad": lambda f: astjax.grad(f)(X),
    "jvp": lambda f: astjax.jvp(f, (X,), (np.ones(2),)),
    "linearize": lambda f: astjax.linearize(f, X),
    "vmap_grad": lambda f: astjax.vmap(astjax.grad(f))(np.stack([X, X])),
}


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    return load_source_module(PROGRAMS, tmp_path_factory.mktemp("refused"), "refused_values")


def test_every_primitive_with_refused_values_is_swept():
    assert {n for n, p in P.REGISTRY.items() if p.refuse} == set(REFUSED)


@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
@pytest.mark.parametrize("name", sorted(n for names in REFUSED.values() for n in names))
def test_differentiated_values_are_refused(programs, name, transform):
    with pytest.raises(DifferentiationError, match="no derivative rule"):
        TRANSFORMS[transform](getattr(programs, name))


def test_a_length_from_the_shape_is_not_refused(programs):
    np.testing.assert_allclose(astjax.grad(programs.arange_length)(X), [0.0, 1.0])
