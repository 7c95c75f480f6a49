"""shard_map(...) and pmap(...) written inside a transformed function.

The frontend builds them when the code is generated (their arguments -- functions,
globals, literals, P(...), make_mesh(...) -- are known then) and inlines the sharded
function like one built outside: grad, jit, vmap, value_and_grad, jvp and eval_shape
of such functions equal those of the function built outside (bit for bit: the same
generated per-shard code), gradients match central differences, and an argument
known only at run time is an error at its line.
"""
import numpy as np
import pytest

import astjax
from astjax import lax
from astjax import make_mesh, pmap, shard_map
from astjax.errors import TransformError
from astjax.sharding import P

from conftest import numerical_grad


@pytest.fixture(autouse=True)
def four_devices(monkeypatch):
    monkeypatch.setenv("ASTJAX_NUM_CPU_DEVICES", "4")


MESH = None


def mesh():
    global MESH
    if MESH is None:
        MESH = astjax.make_mesh((4,), ("i",))
    return MESH


def body(w, x):
    return lax.psum(np.sum(np.tanh(x @ w) ** 2), "i")


def device(w, k, x):
    return lax.psum(np.sum(np.sin(x @ w)) * k, "d")


def built_outside_loss(w, xs):
    return OUTSIDE[0](w, xs) + np.sum(OUTSIDE[1](w, 2, xs.reshape(4, 2, 3)))


OUTSIDE = []


def built_inside_loss(w, xs):
    sm = astjax.shard_map(body, mesh=mesh_for_inside, in_specs=(P(), P("i")),
                          out_specs=P())
    pm = astjax.pmap(device, axis_name="d", in_axes=(None, None, 0),
                     static_broadcasted_argnums=1)
    return sm(w, xs) + np.sum(pm(w, 2, xs.reshape(4, 2, 3)))


def bare_names_loss(w, xs):         # from astjax import shard_map, make_mesh; P by name
    sm = shard_map(body, mesh=make_mesh((2,), ("i",)), in_specs=(P(), P("i")),
                   out_specs=P())
    pm = pmap(lambda v, x: lax.pmean(np.sum(x * v), "d"), axis_name="d",
              in_axes=(None, 0))
    return sm(w, xs) * pm(w[:, 0], xs.reshape(4, 2, 3))[0]


mesh_for_inside = None


@pytest.fixture(autouse=True)
def meshes(four_devices):
    global mesh_for_inside
    mesh_for_inside = mesh()
    OUTSIDE[:] = [astjax.shard_map(body, mesh=mesh(), in_specs=(P(), P("i")),
                                   out_specs=P()),
                  astjax.pmap(device, axis_name="d", in_axes=(None, None, 0),
                              static_broadcasted_argnums=1)]


RNG = np.random.default_rng(9)
W, XS = RNG.standard_normal((3, 2)), RNG.standard_normal((8, 3))


@pytest.mark.parametrize("transform", ["call", "grad", "jit", "jit_grad", "value_and_grad",
                                       "jvp", "vmap", "eval_shape"])
def test_built_inside_equals_built_outside(transform):
    def apply(f):
        if transform == "call":
            return f(W, XS)
        if transform == "grad":
            return astjax.grad(f)(W, XS)
        if transform == "jit":
            return astjax.jit(f)(W, XS)
        if transform == "jit_grad":
            return astjax.jit(astjax.grad(f, argnums=(0, 1)))(W, XS)
        if transform == "value_and_grad":
            return astjax.value_and_grad(f)(W, XS)
        if transform == "jvp":
            return astjax.jvp(f, (W, XS), (np.ones_like(W), XS))
        if transform == "vmap":
            return astjax.vmap(f, in_axes=(None, 0))(W, np.stack([XS, XS[::-1]]))
        out = astjax.eval_shape(f, W, XS)
        return [np.zeros(out.shape, out.dtype)]
    got, ref = apply(built_inside_loss), apply(built_outside_loss)
    for g, r in zip(astjax.tree_util.tree_leaves(got), astjax.tree_util.tree_leaves(ref)):
        assert np.shape(g) == np.shape(r)
        np.testing.assert_array_equal(g, r)


def test_built_inside_gradients_match_finite_differences():
    for f in (built_inside_loss, bare_names_loss):
        g = astjax.grad(f)(W, XS)
        np.testing.assert_allclose(g, numerical_grad(f, (W, XS)), rtol=1e-6,
                                   atol=1e-8)
        gx = astjax.jit(astjax.grad(f, argnums=1))(W, XS)
        np.testing.assert_allclose(gx, numerical_grad(f, (W, XS), 1), rtol=1e-6,
                                   atol=1e-8)


def test_a_run_time_argument_is_an_error_at_its_line():
    def scaled_mesh(w, xs):
        n = xs.shape[0] // 2                               # a run-time value
        return shard_map(body, mesh=make_mesh((n,), ("i",)), in_specs=(P(), P("i")),
                         out_specs=P())(w, xs)

    def captures(w, xs):
        c = np.sum(w)
        sm = shard_map(lambda v, x: lax.psum(np.sum(x * c), "i"), mesh=mesh(),
                       in_specs=(P(), P("i")), out_specs=P())
        return sm(w, xs)
    for f, where in ((scaled_mesh, "make_mesh((n,)"), (captures, "lambda v, x")):
        with pytest.raises(TransformError, match="inside a transformed function") as e:
            astjax.grad(f)(W, XS)
        assert __file__ in str(e.value) and where in str(e.value)
        assert "build the sharded function outside" in str(e.value)
