"""eval_shape of unnamed vmaps of shard_map'ed and pmap'ed functions.

Every case's ShapeDtypeStructs must equal the shapes and dtypes of the call itself:
vmap outside (in_axes/out_axes, pytrees, a 2-d mesh, axis_names subsets, pmap with
and without static arguments, vmap of vmap, of jit, of grad), vmap written inside a
function (the loop form grad and jvp read: its steps are one example each), and
jit/grad/jvp of those; with concrete arguments and with ShapeDtypeStructs.
"""
import functools

import numpy as np
import pytest

import astjax
from astjax import lax
from astjax.sharding import P
from astjax.tree_util import tree_leaves, tree_map

V, J = astjax.vmap, astjax.jit


@pytest.fixture(autouse=True)
def four_devices(monkeypatch):
    monkeypatch.setenv("ASTJAX_NUM_CPU_DEVICES", "4")


def mesh1():
    return astjax.make_mesh((2,), ("i",))


def mesh2():
    return astjax.make_mesh((2, 2), ("x", "y"))


def two_outputs(w, x):
    return lax.psum(np.sum(np.tanh(x @ w), axis=0), "i"), lax.all_gather(x, "i",
                                                                          tiled=True)


def scalar_loss(w, x):
    return lax.psum(np.sum(np.tanh(x @ w) ** 2), "i")


def rows_in_shard(w, x):             # an unnamed vmap inside the shard: batched collectives
    return V(lambda r: lax.psum(r * w, "i")
             + lax.all_gather(r, "i", tiled=True)[:r.shape[0]])(x)


def grid(b):
    return (lax.psum(b, "y"), lax.psum_scatter(b, "x", tiled=True),
            lax.all_to_all(b, "y", 0, 1, tiled=True))


def half(a, m):
    return lax.psum(np.tanh(a @ m), "x").astype(np.float32), a * lax.axis_index("x")


def tree_fun(d):
    return {"s": lax.psum(d["a"], "i"), "n": lax.psum(1, "i"),
            "c": d["b"] * lax.axis_index("i")}


def per_device(w, x):
    return lax.psum(np.sum(np.tanh(x @ w)), "d") * x[0, 0]


def per_device_static(w, k, x):
    return lax.psum(np.sum(np.tanh(x @ w)) * k, "d").astype(np.float32)


def functions():
    sm = astjax.shard_map
    f = sm(two_outputs, mesh=mesh1(), in_specs=(P(), P("i")), out_specs=(P(), P()))
    sl = sm(scalar_loss, mesh=mesh1(), in_specs=(P(), P("i")), out_specs=P())
    sv = sm(rows_in_shard, mesh=mesh1(), in_specs=(P(), P(None, "i")),
            out_specs=P(None, "i"))
    sg = sm(grid, mesh=mesh2(), in_specs=P("x", "y"), out_specs=(P("x", "y"),) * 3)
    shalf = sm(half, mesh=mesh2(), in_specs=(P("x"), P()), out_specs=(P(), P("x")),
               axis_names={"x"})
    st = sm(tree_fun, mesh=mesh1(), in_specs=({"a": P("i"), "b": P("i")},),
            out_specs={"s": P(), "n": P(), "c": P("i")})
    pm = astjax.pmap(per_device, axis_name="d", in_axes=(None, 0))
    spm = astjax.pmap(per_device_static, axis_name="d", in_axes=(None, None, 0),
                      static_broadcasted_argnums=1)
    return f, sl, sv, sg, shalf, st, pm, spm


RNG = np.random.default_rng(5)
W = RNG.standard_normal((3, 2))
XS = RNG.standard_normal((5, 8, 3))
PXS = RNG.standard_normal((5, 2, 4, 3))


@functools.lru_cache(maxsize=None)
def cases():
    """name -> (function, arguments); built once the devices are set."""
    f, sl, sv, sg, shalf, st, pm, spm = functions()
    total = lambda g, *axes: (                                 # noqa: E731
        lambda *a: np.sum(V(g, in_axes=axes)(*a)))
    inside = total(sl, None, 0)
    inside_pm = total(pm, None, 0)
    inside_spm = lambda w, xs: np.sum(V(spm, in_axes=(None, None, 0))(w, 3, xs))  # noqa
    return {name: (fun, args) for name, fun, args in [
        # vmap outside
        ("vmap", V(f, in_axes=(None, 0)), (W, XS)),
        ("vmap_axes_1", V(f, in_axes=(None, 1), out_axes=1), (W, XS.transpose(1, 0, 2))),
        ("vmap_float32", V(sl, in_axes=(None, 0)), (W.astype(np.float32),
                                                    XS.astype(np.float32))),
        ("vmap_inner_vmap", V(sv, in_axes=(None, 0)), (W[0], RNG.standard_normal((2, 5, 4)))),
        ("vmap_2d_mesh", V(sg), (RNG.standard_normal((3, 4, 6)).astype(np.float32),)),
        ("vmap_axis_names", V(shalf, in_axes=(0, None)),
         (RNG.standard_normal((3, 4, 3)), RNG.standard_normal((3, 5)))),
        ("vmap_pytree", V(st), ({"a": RNG.standard_normal((3, 4, 2)),
                                 "b": np.arange(12, dtype=np.int32).reshape(3, 4)},)),
        ("vmap_pytree_axes", V(st, in_axes=({"a": 1, "b": None},)),
         ({"a": RNG.standard_normal((4, 3, 2)), "b": np.arange(4, dtype=np.int32)},)),
        ("vmap_pmap", V(pm, in_axes=(None, 0)), (W, PXS)),
        ("vmap_static_pmap", V(spm, in_axes=(None, None, 0)), (W, 3, PXS)),
        ("vmap_vmap", V(V(f, in_axes=(None, 0)), in_axes=(None, 0)),
         (W, RNG.standard_normal((2, 5, 8, 3)))),
        ("vmap_vmap_static_pmap", V(V(spm, in_axes=(None, None, 0)), in_axes=(None, None, 0)),
         (W, 2, RNG.standard_normal((2, 3, 2, 4, 3)))),
        ("vmap_jit", V(J(f), in_axes=(None, 0)), (W, XS)),
        ("vmap_grad", V(astjax.grad(sl), in_axes=(None, 0)), (W, XS)),
        ("vmap_jit_grad", V(J(astjax.grad(sl)), in_axes=(None, 0)), (W, XS)),
        ("jit_vmap", J(V(f, in_axes=(None, 0))), (W, XS)),
        ("jit_vmap_static_pmap", J(V(spm, in_axes=(None, None, 0))), (W, 3, PXS)),
        # vmap inside a function: the loop form, one example per step
        ("inside", inside, (W, XS)),
        ("inside_pmap", inside_pm, (W, PXS)),
        ("inside_static_pmap", inside_spm, (W, PXS)),
        ("inside_2d_mesh", lambda b: [np.sum(o, axis=0) for o in V(sg)(b)],
         (RNG.standard_normal((3, 4, 6)).astype(np.float32),)),
        ("inside_pytree", lambda a, b: V(st)({"a": a, "b": b}),
         (RNG.standard_normal((3, 4, 2)), np.ones((3, 4), np.int32))),
        ("inside_vmap_vmap", lambda w, xs: V(V(sl, in_axes=(None, 0)), in_axes=(None, 0))(
            w, xs), (W, RNG.standard_normal((2, 5, 8, 3)))),
        ("inside_jit_vmap", lambda w, xs: np.sum(J(V(sl, in_axes=(None, 0)))(w, xs)),
         (W, XS)),
        ("inside_named_vmap", V(lambda w, xs: V(sl, in_axes=(None, 0), axis_name="b")(w, xs),
                                in_axes=(None, 0)), (W, RNG.standard_normal((2, 5, 8, 3)))),
        # derivatives of those
        ("grad_inside", astjax.grad(inside), (W, XS)),
        ("grad_inside_both", astjax.grad(inside, argnums=(0, 1)), (W, XS)),
        ("jit_grad_inside", J(astjax.grad(inside)), (W, XS)),
        ("value_and_grad_inside", astjax.value_and_grad(inside), (W, XS)),
        ("grad_inside_pmap", astjax.grad(inside_pm), (W, PXS)),
        ("grad_inside_static_pmap", astjax.grad(inside_spm), (W, PXS)),
        ("grad_inside_jit_vmap", astjax.grad(
            lambda w, xs: np.sum(J(V(sl, in_axes=(None, 0)))(w, xs))), (W, XS)),
        ("jvp_vmap", lambda w, xs: astjax.jvp(V(sl, in_axes=(None, 0)), (w, xs), (w, xs)),
         (W, XS)),
    ]}


CASES = ["vmap", "vmap_axes_1", "vmap_float32", "vmap_inner_vmap", "vmap_2d_mesh",
         "vmap_axis_names", "vmap_pytree", "vmap_pytree_axes", "vmap_pmap",
         "vmap_static_pmap", "vmap_vmap", "vmap_vmap_static_pmap", "vmap_jit", "vmap_grad",
         "vmap_jit_grad", "jit_vmap", "jit_vmap_static_pmap", "inside", "inside_pmap",
         "inside_static_pmap", "inside_2d_mesh", "inside_pytree", "inside_vmap_vmap",
         "inside_jit_vmap", "inside_named_vmap", "grad_inside", "grad_inside_both",
         "jit_grad_inside", "value_and_grad_inside", "grad_inside_pmap",
         "grad_inside_static_pmap", "grad_inside_jit_vmap", "jvp_vmap"]


def structs(tree):
    return [(np.shape(v), np.asarray(v).dtype) for v in tree_leaves(tree)]


def abstract(tree):
    return [(v.shape, v.dtype) for v in tree_leaves(tree)]


def as_structs(args):
    return tree_map(lambda v: astjax.ShapeDtypeStruct(v.shape, v.dtype)
                    if isinstance(v, np.ndarray) else v, args)


def test_the_cases_are_all_listed():
    assert sorted(cases()) == sorted(CASES)


@pytest.mark.parametrize("name", CASES)
def test_eval_shape_of_vmapped_sharded_functions_matches_the_call(name):
    fun, args = cases()[name]
    ref = structs(fun(*args))
    assert abstract(astjax.eval_shape(fun, *args)) == ref
    assert abstract(astjax.eval_shape(fun, *as_structs(args))) == ref


def test_eval_shape_of_vmap_inside_computes_nothing():
    # 40 GB per example if a step were computed or allocated (steps are zero-stride
    # stand-ins, their stack a shape rule)
    sl = functions()[1]
    inside = lambda w, xs: V(sl, in_axes=(None, 0))(w, xs) * 2.0        # noqa: E731
    big = astjax.ShapeDtypeStruct((3, 100_000, 50_000), np.float64)
    got = astjax.eval_shape(inside, astjax.ShapeDtypeStruct((50_000, 2), np.float64), big)
    assert abstract(got) == [((3,), np.float64)]
    grads = astjax.eval_shape(astjax.grad(lambda w, xs: np.sum(inside(w, xs))),
                              astjax.ShapeDtypeStruct((50_000, 2), np.float64), big)
    assert abstract(grads) == [((50_000, 2), np.float64)]


def test_eval_shape_of_vmap_keeps_the_errors_of_a_call():
    from astjax.sharding.errors import ShardingError
    _, sl, *_ = functions()
    inside = lambda w, xs: np.sum(V(sl, in_axes=(None, 0))(w, xs))      # noqa: E731
    bad = np.ones((5, 7, 3))               # 7 rows over 2 devices
    for fun in (V(sl, in_axes=(None, 0)), inside, astjax.grad(inside)):
        with pytest.raises(ShardingError, match="not divisible by 2"):
            fun(W, bad)
        with pytest.raises(ShardingError, match="not divisible by 2"):
            astjax.eval_shape(fun, W, bad)
