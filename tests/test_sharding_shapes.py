"""eval_shape of shard_map'ed / pmap'ed functions, and shard_map's ``axis_names``.

eval_shape: every case's global ShapeDtypeStructs equal the shapes and dtypes of the
run (the reference is the run itself, on a 4-device mesh and a 2x2 mesh).
axis_names subsets: the function is manual over the named axes only; it sees the
whole extent along the others, collectives over them are refused; values and
gradients against NumPy references and central finite differences.
"""
import numpy as np
import pytest

import astjax
from astjax import lax
from astjax.errors import TransformError
from astjax.sharding import P
from astjax.sharding.errors import ShardingError


@pytest.fixture(autouse=True)
def four_devices(monkeypatch):
    monkeypatch.setenv("ASTJAX_NUM_CPU_DEVICES", "4")


RNG = np.random.default_rng(3)
X = RNG.standard_normal((8, 6))
W = RNG.standard_normal(6)


def structs(tree):
    return [(np.shape(v), np.asarray(v).dtype) for v in astjax.tree_util.tree_leaves(tree)]


def abstract(tree):
    return [(v.shape, v.dtype) for v in astjax.tree_util.tree_leaves(tree)]


def sm1(f, in_specs, out_specs):
    mesh = astjax.make_mesh((4,), ("i",))
    return astjax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs)


def sm2(f, in_specs, out_specs, **kw):
    mesh = astjax.make_mesh((2, 2), ("x", "y"))
    return astjax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, **kw)


def c_psum(x, w):
    return lax.psum(np.sin(x) * w, "i")


def c_gather(x, w):
    return lax.all_gather(x * w, "i", axis=1), lax.all_gather(x, "i", tiled=True)


def c_scatter(x, w):
    return lax.psum_scatter(np.concatenate([x] * 4), "i", tiled=True).astype(np.float32)


def c_untiled(x, w):
    return lax.psum_scatter(x[:1].repeat(4, 0), "i"), lax.all_to_all(x[:1].repeat(4, 0),
                                                                       "i", 0, 1)


def c_index(x, w):
    return x * lax.axis_index("i"), np.reshape(lax.axis_index("i"), (1,))


def c_size(x, w):
    n = lax.psum(1, "i")                 # a concrete axis size: may shape arrays
    return np.zeros((n, 2)) + lax.pmean(np.sum(x), "i"), np.ones(lax.axis_size("i"))


def c_pytree(x, w):
    return {"a": lax.pmax(x, "i"), "b": (lax.ppermute(x, "i", [(0, 1), (1, 0)]),
                                         np.int32(3) + lax.pmin(np.int32(1), "i"))}


ONE_D = [
    (c_psum, (P("i"), P()), P()),
    (c_psum, (P("i"), P()), P("i")),
    (c_gather, (P("i"), P()), (P("i"), P())),
    (c_scatter, (P("i"), P()), P("i")),
    (c_untiled, (P("i"), P()), (P("i"), P(None, "i"))),
    (c_index, (P("i"), P()), (P("i"), P("i"))),
    (c_size, (P("i"), P()), (P(), P())),
    (c_pytree, (P("i"), P()), {"a": P(), "b": (P("i"), P())}),
]


@pytest.mark.parametrize("case", ONE_D, ids=lambda c: c[0].__name__ + repr(c[2]))
def test_eval_shape_of_shard_map_matches_the_run(case):
    f, ins, outs = case
    g = sm1(f, ins, outs)
    got = astjax.eval_shape(g, X, W)
    assert abstract(got) == structs(g(X, W))
    # abstract arguments give the same answer
    spec = astjax.ShapeDtypeStruct
    assert abstract(astjax.eval_shape(g, spec(X.shape, X.dtype), spec(W.shape, W.dtype))) \
        == abstract(got)


def test_eval_shape_of_pytrees_mixing_abstract_and_concrete_leaves():
    def f(x, w):
        return lax.all_gather((x, np.ones(2)), "i", axis=0), lax.psum({"a": x, "b": 1.0},
                                                                       "i")
    g = sm1(f, (P("i"), P()), P())
    assert abstract(astjax.eval_shape(g, X, W)) == structs(g(X, W))


def test_eval_shape_on_a_2d_mesh_and_tuple_axes():
    def f(b):
        return (lax.psum(b, ("x", "y")), lax.all_gather(b, ("y", "x"), axis=1),
                lax.psum_scatter(b, "x", tiled=True), lax.all_to_all(b, "y", 0, 1,
                                                                     tiled=True))
    g = sm2(f, P("x", "y"), (P("x", "y"),) * 4)
    assert abstract(astjax.eval_shape(g, X)) == structs(g(X))


def test_eval_shape_of_pmap_matches_the_run():
    a = RNG.standard_normal((3, 4, 2))
    cases = [
        (astjax.pmap(lambda v: lax.psum(v, "d") * 2, axis_name="d"), (X[:4],)),
        (astjax.pmap(lambda v, w: (v * w, lax.pmean(v, "d")), axis_name="d",
                     in_axes=(1, None), out_axes=1), (a, W[:2])),
        (astjax.pmap(lambda v, k: v * k, axis_name="d", static_broadcasted_argnums=1),
         (X[:4], 3)),
        (astjax.pmap(lambda v: lax.psum(np.sum(v), "d"), axis_name="d", out_axes=None),
         (X[:4],)),
        (astjax.vmap(lambda v: v - lax.pmean(v, "b"), axis_name="b"), (X,)),
    ]
    for pm, args in cases:
        assert abstract(astjax.eval_shape(pm, *args)) == structs(pm(*args))


def test_eval_shape_of_compositions():
    g = sm1(c_psum, (P("i"), P()), P())
    loss = lambda x, w: np.sum(g(x, w))                         # noqa: E731
    grads = astjax.grad(loss, argnums=(0, 1))
    assert abstract(astjax.eval_shape(grads, X, W)) == structs(grads(X, W))
    tangent = lambda x, w: astjax.jvp(g, (x, w), (x, w))[1]     # noqa: E731
    assert abstract(astjax.eval_shape(tangent, X, W)) == structs(tangent(X, W))
    jg = astjax.jit(g)
    assert abstract(astjax.eval_shape(jg, X, W)) == structs(jg(X, W))


def test_eval_shape_errors_are_those_of_a_run():
    g = sm1(c_psum, (P("i"), P()), P())
    with pytest.raises(ShardingError, match="not divisible by 4"):
        astjax.eval_shape(g, np.ones((6, 6)), W)
    bad = sm1(lambda x, w: lax.psum(x, "j"), (P("i"), P()), P())
    with pytest.raises(ShardingError, match="unknown axis name 'j'"):
        astjax.eval_shape(bad, X, W)

    def branch(x, w):                    # a Python branch on the device's index
        if lax.axis_index("i") == 0:
            return x
        return -x
    with pytest.raises(TransformError, match="depends on array values"):
        astjax.eval_shape(sm1(branch, (P("i"), P()), P("i")), X, W)


def test_eval_shape_computes_nothing():
    # 40 GB per global array if anything were computed or allocated
    def f(x, w):
        y = lax.all_gather(lax.psum(x, "i") * w, "i", axis=1)
        return lax.psum_scatter(y, "i", scatter_dimension=1), lax.pmean(x, "i")
    g = sm1(f, (P("i"), P()), (P("i"), P()))
    big = astjax.ShapeDtypeStruct((100_000, 50_000), np.float64)
    got = astjax.eval_shape(g, big, astjax.ShapeDtypeStruct((50_000,), np.float32))
    assert abstract(got) == [((100_000, 50_000), np.float64), ((25_000, 50_000),
                                                                np.float64)]


# ----------------------------------------------------------------- axis_names subsets

A = RNG.standard_normal((4, 3))
M = RNG.standard_normal((3, 5))


def sub_body(a, m):
    return lax.psum(np.tanh(a @ m), "x"), a * lax.axis_index("x")


def sub_ref(a, m):
    return np.tanh(a[:2] @ m) + np.tanh(a[2:] @ m), np.concatenate([0 * a[:2], a[2:]])


def test_axis_names_subset_values_match_numpy():
    g = sm2(sub_body, (P("x"), P()), (P(), P("x")), axis_names={"x"})
    for got, ref in zip(g(A, M), sub_ref(A, M)):
        np.testing.assert_allclose(got, ref, rtol=1e-14, atol=1e-14)
    assert abstract(astjax.eval_shape(g, A, M)) == structs(g(A, M))


def test_axis_names_subset_sees_the_whole_extent_along_automatic_axes():
    def f(b):                            # the block is (rows/2, all columns)
        return lax.all_gather(b, "y", tiled=True, axis=1)
    seen = sm2(lambda b: np.asarray(b.shape)[None], P("y"), P("y"), axis_names=("y",))
    np.testing.assert_array_equal(seen(X), [[4, 6], [4, 6]])
    g = sm2(f, P("y"), P("y"), axis_names=("y",))
    halves = np.split(X, 2)
    np.testing.assert_allclose(g(X), np.concatenate([np.concatenate(halves, 1)] * 2))


def test_axis_names_subset_gradients_match_finite_differences():
    g = sm2(sub_body, (P("x"), P()), (P(), P("x")), axis_names={"x"})

    def loss(a, m):
        s, t = g(a, m)
        return np.sum(s ** 2) + np.sum(np.sin(t))

    def ref(a, m):
        s, t = sub_ref(a, m)
        return np.sum(s ** 2) + np.sum(np.sin(t))
    ga, gm = astjax.grad(loss, argnums=(0, 1))(A, M)
    eps = 1e-6
    for got, x, which in ((ga, A, 0), (gm, M, 1)):
        fd = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            xp, xm = x.copy(), x.copy()
            xp[i] += eps
            xm[i] -= eps
            args_p = (xp, M) if which == 0 else (A, xp)
            args_m = (xm, M) if which == 0 else (A, xm)
            fd[i] = (ref(*args_p) - ref(*args_m)) / (2 * eps)
        np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-8)
    # jvp and vmap through it, against the eager meaning
    t = RNG.standard_normal(A.shape)
    _, dot = astjax.jvp(lambda a: g(a, M)[0], (A,), (t,))
    fd = (g(A + 1e-6 * t, M)[0] - g(A - 1e-6 * t, M)[0]) / 2e-6
    np.testing.assert_allclose(dot, fd, rtol=1e-6, atol=1e-8)


def test_axis_names_errors():
    with pytest.raises(ShardingError, match="automatic axis"):
        sm2(lambda a: a, P("x", "y"), P("x"), axis_names={"x"})
    with pytest.raises(ShardingError, match="automatic axis"):
        sm2(lambda a: a, P("x"), P("y"), axis_names={"x"})
    with pytest.raises(ShardingError, match="not a mesh axis"):
        sm2(lambda a: a, P("x"), P("x"), axis_names={"x", "z"})
    g = sm2(lambda a: lax.psum(a, "y"), P("x"), P(), axis_names={"x"})
    with pytest.raises(ShardingError, match="'y' is an automatic axis") as e:
        g(A)
    assert e.value.location.filename == __file__
    # naming every axis is the default: same values
    full = sm2(sub_body, (P("x"), P()), (P(), P("x")), axis_names={"x", "y"})
    for got, ref in zip(full(A, M), sub_ref(A, M)):
        np.testing.assert_allclose(got, ref, rtol=1e-14, atol=1e-14)
