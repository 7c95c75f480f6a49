"""shard_map, pmap and the collectives on local devices (threads), against NumPy.

Every collective is checked against a NumPy reference on a 4-device mesh and a 2x2
mesh (tuples of axes); every transpose by a gradient of a shard_map'ed function
against central finite differences in float64; jvp, vmap, jit and lax control flow
through shard_map against their eager meanings; bad input gives located errors.
"""
import numpy as np
import pytest

import astjax
from astjax import lax
from astjax.sharding import P
from astjax.sharding.errors import ShardingError


@pytest.fixture(autouse=True)
def four_devices(monkeypatch):
    monkeypatch.setenv("ASTJAX_NUM_CPU_DEVICES", "4")


def mesh1():
    return astjax.make_mesh((4,), ("i",))


def mesh2():
    return astjax.make_mesh((2, 2), ("x", "y"))


RNG = np.random.default_rng(0)
X = RNG.standard_normal((8, 3))          # 4 blocks of (2, 3)
BLOCKS = np.split(X, 4)


# ----------------------------------------------------------- forward vs NumPy (1-d mesh)

def f_psum(x):
    return lax.psum(x, "i")


def f_pmean(x):
    return lax.pmean(x, "i")


def f_pmax(x):
    return lax.pmax(x, "i")


def f_pmin(x):
    return lax.pmin(x, "i")


def f_gather(x):
    return lax.all_gather(x, "i", axis=1)


def f_gather_tiled(x):
    return lax.all_gather(x, "i", tiled=True)


def f_scatter(x):
    return lax.psum_scatter(np.concatenate([x, x]), "i", scatter_dimension=0, tiled=True)


def f_ppermute(x):
    return lax.ppermute(x, "i", perm=[(0, 1), (1, 2), (2, 3), (3, 0)])


def f_ppermute_partial(x):
    return lax.ppermute(x, "i", perm=[(0, 2), (3, 1)])


def f_all_to_all(x):
    y = np.concatenate([x, x * 2.0])            # (4, 3): split over 4 devices
    return lax.all_to_all(y, "i", 0, 0, tiled=True)


def f_index(x):
    return x * lax.axis_index("i") + lax.psum(1, "i") + lax.axis_size("i")


S = sum(BLOCKS)
REFS = {
    f_psum: np.concatenate([S] * 4),
    f_pmean: np.concatenate([S / 4] * 4),
    f_pmax: np.concatenate([np.max(BLOCKS, axis=0)] * 4),
    f_pmin: np.concatenate([np.min(BLOCKS, axis=0)] * 4),
    f_gather: np.concatenate([np.stack(BLOCKS, axis=1)] * 4),
    f_gather_tiled: np.concatenate([X] * 4),
    f_scatter: np.concatenate([np.concatenate([S, S])[2 * k:2 * k + 2] for k in range(4)]),
    f_ppermute: np.concatenate([BLOCKS[3], BLOCKS[0], BLOCKS[1], BLOCKS[2]]),
    f_ppermute_partial: np.concatenate([np.zeros((2, 3)), BLOCKS[3], BLOCKS[0],
                                        np.zeros((2, 3))]),
    f_index: np.concatenate([BLOCKS[k] * k + 8 for k in range(4)]),
}


def _a2a_ref():
    ys = [np.concatenate([b, b * 2.0]) for b in BLOCKS]      # each (4, 3)
    return np.concatenate([np.concatenate([ys[s][d:d + 1] for s in range(4)])
                           for d in range(4)])


REFS[f_all_to_all] = _a2a_ref()
CASES = list(REFS)


@pytest.mark.parametrize("f", CASES, ids=lambda f: f.__name__)
def test_collective_matches_numpy(f):
    out = astjax.shard_map(f, mesh=mesh1(), in_specs=P("i"), out_specs=P("i"))(X)
    np.testing.assert_allclose(out, REFS[f], rtol=1e-13, atol=1e-13)


def test_untiled_all_to_all_and_scatter_match_jax_shapes():
    def f(x):                                    # x: (4, 2) per device
        a = lax.all_to_all(x, "i", 0, 1)         # split axis 0 (size 4) -> new axis 1
        b = lax.psum_scatter(x, "i")             # dimension 0 has the axis size: drops
        return a, b
    xs = RNG.standard_normal((16, 2))
    a, b = astjax.shard_map(f, mesh=mesh1(), in_specs=P("i"), out_specs=P("i"))(xs)
    blocks = np.split(xs, 4)
    ref_a = np.concatenate([np.stack([blocks[s][d] for s in range(4)], axis=1)
                            for d in range(4)])
    np.testing.assert_allclose(a, ref_a)
    np.testing.assert_allclose(b, np.concatenate([sum(blocks)[d] for d in range(4)]))


def test_tuple_axes_on_a_2d_mesh():
    x = RNG.standard_normal((4, 6))             # rows over x, columns over y

    def f(b):
        return (lax.psum(b, ("x", "y")), lax.psum(b, "y"), lax.all_gather(b, ("y", "x")),
                lax.axis_index(("x", "y")) + 0 * b)
    s_all, s_y, g, idx = astjax.shard_map(
        f, mesh=mesh2(), in_specs=P("x", "y"), out_specs=(P("x", "y"),) * 4)(x)
    blocks = [[x[2 * i:2 * i + 2, 3 * j:3 * j + 3] for j in range(2)] for i in range(2)]
    total = sum(b for row in blocks for b in row)
    np.testing.assert_allclose(s_all, np.block([[total] * 2] * 2))
    np.testing.assert_allclose(s_y, np.block([[sum(row)] * 2 for row in blocks]))
    order = [blocks[i][j] for j in range(2) for i in range(2)]      # ("y", "x") order
    assert g.shape == (2 * 4, 2 * 2, 3)                 # (4, 2, 3) per device
    np.testing.assert_allclose(g[:4, :2], np.stack(order))
    np.testing.assert_allclose(idx, np.block([[np.full((2, 3), 2 * i + j) for j in range(2)]
                                               for i in range(2)]))


def test_replicated_inputs_and_outputs_and_pytrees():
    def f(p, x):
        return {"s": lax.psum(np.sum(x * p["w"]), "i"), "y": x + p["b"]}
    p = {"w": np.arange(3.0), "b": np.ones(3)}
    out = astjax.shard_map(f, mesh=mesh1(), in_specs=({"w": P(), "b": P()}, P("i")),
                           out_specs={"s": P(), "y": P("i")})(p, X)
    np.testing.assert_allclose(out["s"], np.sum(X * p["w"]))
    np.testing.assert_allclose(out["y"], X + 1)


# ------------------------------------------------------------- transposes: grad vs FD

def fd_grad(fun, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (fun(xp) - fun(xm)) / (2 * eps)
    return g


W = RNG.standard_normal((8, 3))


@pytest.mark.parametrize("f", CASES, ids=lambda f: f.__name__)
def test_collective_transpose_matches_finite_differences(f):
    if f is f_pmax or f is f_pmin:
        pass                                     # distinct values: no ties
    sm = astjax.shard_map(f, mesh=mesh1(), in_specs=P("i"), out_specs=P("i"))
    weight = RNG.standard_normal(REFS[f].shape)

    def loss(x):
        return np.sum(np.sin(sm(x)) * weight)
    g = astjax.grad(loss)(X)
    np.testing.assert_allclose(g, fd_grad(loss, X), rtol=1e-6, atol=1e-8)


def test_grad_replicated_parameter_sums_over_devices():
    def f(w, x):
        return lax.psum(np.sum(np.tanh(x @ w)), "i")
    sm = astjax.shard_map(f, mesh=mesh1(), in_specs=(P(), P("i")), out_specs=P())
    w = RNG.standard_normal((3, 2))
    gw, gx = astjax.grad(sm, argnums=(0, 1))(w, X)
    np.testing.assert_allclose(gw, fd_grad(lambda w: sm(w, X), w), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(gx, fd_grad(lambda x: sm(w, x), X), rtol=1e-6, atol=1e-9)
    # an output computed the same way on every device: no overcounting
    twice = astjax.shard_map(lambda w, x: np.sum(w) * 2.0, mesh=mesh1(),
                             in_specs=(P(), P("i")), out_specs=P())
    np.testing.assert_allclose(astjax.grad(twice)(w, X), np.full_like(w, 2.0))


def test_grad_inside_with_check_vma_false_is_local_like_jax():
    # JAX (check_vma=False): the local gradient; psum of a psum'd loss is N times it
    def f(w, x):
        return lax.psum(astjax.grad(lambda w: np.sum(w * x))(w), "i")
    sm = astjax.shard_map(f, mesh=mesh1(), in_specs=(P(), P("i")), out_specs=P(),
                          check_vma=False)
    np.testing.assert_allclose(sm(np.ones(3), X), X.sum(axis=0))

    def g(x):
        return astjax.grad(lambda x: lax.psum(np.sum(x ** 2), "i"))(x)
    out = astjax.shard_map(g, mesh=mesh1(), in_specs=P("i"), out_specs=P("i"),
                           check_vma=False)(X)
    np.testing.assert_allclose(out, 4 * 2 * X)


def test_grad_inside_with_check_vma_true_is_jaxs():
    # JAX (check_vma=True): psum's cotangent is not summed again (2x, not 4 * 2x), and a
    # replicated input's gradient is summed over the devices (tests/test_sharding_vma.py)
    def g(x):
        return astjax.grad(lambda x: lax.psum(np.sum(x ** 2), "i"))(x)
    out = astjax.shard_map(g, mesh=mesh1(), in_specs=P("i"), out_specs=P("i"))(X)
    np.testing.assert_allclose(out, 2 * X)

    def h(w, x):                 # the data-parallel pattern: the gradient comes summed
        return lax.pmean(astjax.value_and_grad(lambda w: np.sum(w * x))(w)[1], "i")
    out = astjax.shard_map(h, mesh=mesh1(), in_specs=(P(), P("i")), out_specs=P())(
        np.ones(3), X)
    np.testing.assert_allclose(out, X.sum(axis=0))
    # through jit, reverse mode's code is not typed: refused at the user's line
    with pytest.raises(ShardingError, match="check_vma") as e:
        astjax.shard_map(lambda x: astjax.jit(astjax.grad(
            lambda x: lax.psum(np.sum(x ** 2), "i")))(x), mesh=mesh1(), in_specs=P("i"),
            out_specs=P("i"))(X)
    assert "test_sharding.py" in str(e.value)


# Every route by which reverse-mode code reaches a check_vma=True shard body other than
# grad/value_and_grad/vjp/jacrev called there (which give JAX's check_vma=True numbers):
# jit of grad, grad inside a jitted body, vjp inlined in jit, vmap/jvp/hessian reading
# grad's code.  Each would give check_vma=False's local gradient where JAX sums over
# devices: each must refuse, none may return a number.
def _local_loss(w, x):
    return np.sum(np.sin(w) * x)


def _rev_jit_grad(w, x):
    return astjax.jit(astjax.grad(lambda w: _local_loss(w, x)))(w)


def _rev_grad_in_jit(w, x):
    return astjax.jit(lambda w: astjax.grad(lambda w: _local_loss(w, x))(w))(w)


def _rev_vjp_in_jit(w, x):
    @astjax.jit
    def body(w):
        _, pull = astjax.vjp(lambda w: _local_loss(w, x), w)
        return pull(1.0)[0]
    return body(w)


def _rev_value_and_grad_jit(w, x):
    return astjax.jit(astjax.value_and_grad(lambda w: _local_loss(w, x)))(w)[1]


def _rev_vmap_grad(w, x):
    return astjax.vmap(astjax.grad(_local_loss), in_axes=(None, 0))(w, x)[0]


def _rev_jvp_grad(w, x):
    return astjax.jvp(astjax.grad(lambda w: _local_loss(w, x)), (w,), (np.ones_like(w),))[1]


def _rev_hessian(w, x):
    return astjax.hessian(lambda w: _local_loss(w, x))(w)[0]


def _rev_jacrev(w, x):
    return astjax.jacrev(lambda w: np.sin(w) * x[0])(w)[0]


@pytest.mark.parametrize("body", [_rev_jit_grad, _rev_grad_in_jit, _rev_vjp_in_jit,
                                  _rev_value_and_grad_jit, _rev_vmap_grad, _rev_jvp_grad,
                                  _rev_hessian], ids=lambda f: f.__name__)
def test_every_reverse_route_inside_check_vma_true_refuses(body):
    def f(w, x):
        return lax.pmean(body(w, x), "i")
    w = RNG.standard_normal(3)
    with pytest.raises(ShardingError, match="check_vma"):
        astjax.shard_map(f, mesh=mesh1(), in_specs=(P(), P("i")), out_specs=P())(w, X)
    # the same body with check_vma=False runs and gives the local derivatives averaged
    sm = astjax.shard_map(f, mesh=mesh1(), in_specs=(P(), P("i")), out_specs=P(),
                          check_vma=False)
    shards = np.split(X, 4)
    expected = np.mean([body(w, xs) for xs in shards], axis=0)
    np.testing.assert_allclose(sm(w, X), expected, rtol=1e-10, atol=1e-12)


def test_jacrev_inside_check_vma_true_sums_replicated_inputs():
    w = RNG.standard_normal(3)
    typed = astjax.shard_map(lambda w, x: _rev_jacrev(w, x), mesh=mesh1(),
                             in_specs=(P(), P("i")), out_specs=P())(w, X)
    shards = np.split(X, 4)
    np.testing.assert_allclose(typed, np.sum([_rev_jacrev(w, xs) for xs in shards],
                                             axis=0), rtol=1e-12)


# ------------------------------------------------------------- jvp, vmap, jit, control

def test_jvp_of_shard_map_matches_finite_differences():
    sm = astjax.shard_map(lambda x: lax.psum(np.sin(x), "i") * x, mesh=mesh1(),
                          in_specs=P("i"), out_specs=P("i"))
    t = RNG.standard_normal(X.shape)
    out, tan = astjax.jvp(sm, (X,), (t,))
    eps = 1e-6
    np.testing.assert_allclose(out, sm(X))
    np.testing.assert_allclose(tan, (sm(X + eps * t) - sm(X - eps * t)) / (2 * eps),
                               rtol=1e-6, atol=1e-8)


def test_vmap_of_shard_map_matches_a_loop():
    sm = astjax.shard_map(lambda x: np.sum(lax.all_gather(x, "i", tiled=True)) * lax.psum(x, "i"),
                          mesh=mesh1(), in_specs=P("i"), out_specs=P("i"))
    xs = RNG.standard_normal((5, 8))
    np.testing.assert_allclose(astjax.vmap(sm)(xs), np.stack([sm(x) for x in xs]))


def test_vmap_inside_the_per_shard_function():
    def f(x):                                    # x: (2, 3) per device
        return astjax.vmap(lambda r: lax.psum(r, "i") * r)(x)
    out = astjax.shard_map(f, mesh=mesh1(), in_specs=P("i"), out_specs=P("i"))(X)
    np.testing.assert_allclose(out, np.concatenate([S * b for b in BLOCKS]))


def test_jit_of_shard_map_matches_eager():
    sm = astjax.shard_map(lambda w, x: lax.pmean(np.tanh(x * w), "i"), mesh=mesh1(),
                          in_specs=(P(), P("i")), out_specs=P())
    w = RNG.standard_normal(3)
    np.testing.assert_allclose(astjax.jit(sm)(w, X), sm(w, X))
    np.testing.assert_allclose(astjax.jit(astjax.grad(lambda w: np.sum(sm(w, X))))(w),
                               fd_grad(lambda w: np.sum(sm(w, X)), w), rtol=1e-6)


def test_lax_control_flow_with_collectives_in_the_body():
    def f(x):
        def body(i, v):
            return lax.ppermute(v, "i", [(k, (k + 1) % 4) for k in range(4)]) + \
                lax.pmean(v, "i")
        return lax.fori_loop(0, 3, body, x)

    sm = astjax.shard_map(f, mesh=mesh1(), in_specs=P("i"), out_specs=P("i"))
    v = list(BLOCKS)
    for _ in range(3):
        m = sum(v) / 4
        v = [v[(k - 1) % 4] + m for k in range(4)]
    np.testing.assert_allclose(sm(X), np.concatenate(v))
    loss = lambda x: np.sum(sm(x) ** 2)          # noqa: E731
    np.testing.assert_allclose(astjax.grad(loss)(X), fd_grad(loss, X), rtol=1e-6)


# -------------------------------------------------------------------------- pmap

def test_pmap_matches_a_loop_and_differentiates():
    def f(w, x):
        return lax.psum(np.sum(x * w), "d") + x
    pm = astjax.pmap(f, axis_name="d", in_axes=(None, 0))
    w = RNG.standard_normal(3)
    xs = RNG.standard_normal((4, 3))
    ref = np.stack([np.sum(xs * w) + x for x in xs])
    np.testing.assert_allclose(pm(w, xs), ref)
    loss = lambda w: np.sum(pm(w, xs) ** 2)      # noqa: E731
    np.testing.assert_allclose(astjax.grad(loss)(w), fd_grad(loss, w), rtol=1e-6)


def test_pmap_static_broadcasted_argnums_and_out_axes():
    def f(x, n):
        return x * n + lax.axis_index("d")
    pm = astjax.pmap(f, axis_name="d", static_broadcasted_argnums=1)
    np.testing.assert_allclose(pm(np.ones((2, 3)), 3), [[3.0] * 3, [4.0] * 3])


# -------------------------------------------------------------------------- errors

def test_shape_not_divisible_names_the_line():
    sm = astjax.shard_map(f_psum, mesh=mesh1(), in_specs=P("i"), out_specs=P("i"))
    with pytest.raises(ShardingError, match="not divisible by 4") as e:
        sm(np.ones((6, 3)))
    assert "test_sharding.py" in str(e.value)


def test_unknown_axis_name_in_specs_and_in_collectives():
    with pytest.raises(ShardingError, match="unknown axis name 'j'") as e:
        astjax.shard_map(f_psum, mesh=mesh1(), in_specs=P("j"), out_specs=P("i"))
    assert "test_sharding.py" in str(e.value)
    bad = astjax.shard_map(lambda x: lax.psum(x, "k"), mesh=mesh1(), in_specs=P("i"),
                           out_specs=P("i"))
    with pytest.raises(ShardingError, match="unknown axis name 'k'") as e:
        bad(X)
    assert "test_sharding.py" in str(e.value) and "lax.psum(x, \"k\")" in str(e.value)


def test_specs_not_matching_the_pytree():
    sm = astjax.shard_map(lambda a, b: a + b, mesh=mesh1(), in_specs=((P("i"), P()), P()),
                          out_specs=P("i"))
    with pytest.raises(ShardingError, match="do not match the pytree"):
        sm(X, X)


def test_collective_outside_any_mapped_axis():
    with pytest.raises(ShardingError, match="outside any mapped axis") as e:
        lax.psum(X, "i")
    assert "test_sharding.py" in str(e.value)


def test_replication_check_of_out_specs():
    sm = astjax.shard_map(lambda x: x, mesh=mesh1(), in_specs=P("i"), out_specs=P())
    with pytest.raises(ShardingError, match="replicated"):
        sm(X)
    off = astjax.shard_map(lambda x: x, mesh=mesh1(), in_specs=P("i"), out_specs=P(),
                           check_vma=False)
    np.testing.assert_allclose(off(X), BLOCKS[0])


def test_make_source_shows_the_sharded_call():
    sm = astjax.shard_map(f_psum, mesh=mesh1(), in_specs=P("i"), out_specs=P("i"))
    src = astjax.make_source(astjax.grad(lambda x: np.sum(sm(x))))(X)
    assert "sh.shard_map_call(f_psum_shard_map_plan" in src and "sh.vjp_plan(" in src
    shown = astjax.make_source(sm)(X)            # the call, and the per-shard function
    assert "sh.shard_map_call(f_psum_shard_map_plan, (x,))" in shown
    assert "sh.psum(x, 'i')" in shown and "per-shard function" in shown


# ------------------------------------------------------------ vmap with an axis_name

def test_vmap_with_axis_name_makes_collectives_act_over_the_batch():
    xs = RNG.standard_normal((5, 3))

    def f(x):
        return x - lax.pmean(x, "b") + lax.axis_index("b") + lax.psum(1, "b")
    out = astjax.vmap(f, axis_name="b")(xs)
    ref = xs - xs.mean(axis=0) + np.arange(5)[:, None] + 5
    np.testing.assert_allclose(out, ref)
    g = astjax.vmap(lambda x: lax.all_gather(x, "b"), axis_name="b", in_axes=1)(xs)
    np.testing.assert_allclose(g, np.stack([xs.T] * 3))
    loss = lambda x: np.sum(np.sin(astjax.vmap(f, axis_name="b")(x)) ** 2)  # noqa: E731
    np.testing.assert_allclose(astjax.grad(loss)(xs), fd_grad(loss, xs), rtol=1e-6,
                               atol=1e-9)


def test_pmap_in_axes_and_out_axes():
    xs = RNG.standard_normal((3, 4))
    pm = astjax.pmap(lambda x: lax.psum(x, "d") * x, axis_name="d", in_axes=1, out_axes=1)
    np.testing.assert_allclose(pm(xs), xs * xs.sum(axis=1, keepdims=True))


# ---------------------------------------------- tuple axes on a 2x2 mesh: transposes

XY = ("x", "y")
TUPLE_CASES = {
    "psum_xy": lambda b: lax.psum(b, XY),
    "psum_y": lambda b: lax.psum(b, "y") * b,
    "pmean_yx": lambda b: lax.pmean(b, ("y", "x")) * b,
    "pmax_xy": lambda b: lax.pmax(b, XY) * b,
    "gather_yx": lambda b: lax.all_gather(b, ("y", "x"), axis=1),
    "gather_x_tiled": lambda b: lax.all_gather(b, "x", tiled=True, axis=1),
    "scatter_xy": lambda b: lax.psum_scatter(np.concatenate([b, b]), XY, tiled=True),
    "ppermute_xy": lambda b: lax.ppermute(b, XY, [(0, 3), (3, 0), (1, 2), (2, 1)]),
    "all_to_all_x": lambda b: lax.all_to_all(b, "x", 0, 1, tiled=True),
    "index_y": lambda b: b * (1.0 + lax.axis_index("y")) + lax.axis_index(XY),
}


@pytest.mark.parametrize("name", sorted(TUPLE_CASES))
def test_tuple_axes_transposes_match_finite_differences(name):
    f = TUPLE_CASES[name]
    sm = astjax.shard_map(f, mesh=mesh2(), in_specs=P("x", "y"), out_specs=P("x", "y"))
    x = RNG.standard_normal((4, 6))
    weight = RNG.standard_normal(np.shape(sm(x)))

    def loss(x):
        return np.sum(np.sin(sm(x)) * weight)
    np.testing.assert_allclose(astjax.grad(loss)(x), fd_grad(loss, x), rtol=1e-6,
                               atol=1e-8)
    t = RNG.standard_normal(x.shape)
    _, tan = astjax.jvp(sm, (x,), (t,))
    eps = 1e-6
    np.testing.assert_allclose(tan, (sm(x + eps * t) - sm(x - eps * t)) / (2 * eps),
                               rtol=1e-6, atol=1e-8)


def test_jvp_inside_the_per_shard_function():
    def f(x):
        return astjax.jvp(lambda v: lax.psum(np.sin(v), "i"), (x,), (np.ones_like(x),))[1]
    out = astjax.shard_map(f, mesh=mesh1(), in_specs=P("i"), out_specs=P())(X)
    np.testing.assert_allclose(out, sum(np.cos(b) for b in BLOCKS))


def test_pmap_of_per_device_gradients_then_pmean():
    def loss(w, x):
        return np.sum(np.tanh(x @ w) ** 2)

    def step(w, x):
        return lax.pmean(astjax.grad(loss)(w, x), "d")
    w = RNG.standard_normal((3, 2))
    xs = RNG.standard_normal((4, 5, 3))
    out = astjax.pmap(step, axis_name="d", in_axes=(None, 0))(w, xs)
    ref = np.mean([astjax.grad(loss)(w, x) for x in xs], axis=0)
    for k in range(4):
        np.testing.assert_allclose(out[k], ref, rtol=1e-12)


def test_named_vmap_inside_shard_map_reaches_the_outer_axis():
    # as in JAX: each example's collective over the mesh axis sums that example's rows
    # over the devices; over ("i", "b") every row of every device
    def f(x):
        return astjax.vmap(lambda r: lax.psum(r, "i") + lax.psum(r, ("i", "b")),
                           axis_name="b")(x)
    sm = astjax.shard_map(f, mesh=mesh1(), in_specs=P("i"), out_specs=P("i"))
    rows = sum(BLOCKS)                              # (2, 3): row r summed over devices
    np.testing.assert_allclose(sm(X), np.tile(rows + rows.sum(0), (4, 1)), rtol=1e-13)
    inner = astjax.shard_map(lambda x: astjax.vmap(lambda r: lax.psum(r, "b"),
                                                   axis_name="b")(x),
                             mesh=mesh1(), in_specs=P("i"), out_specs=P("i"))
    np.testing.assert_allclose(inner(X), np.concatenate([np.repeat(b.sum(0, keepdims=True),
                                                                   2, 0) for b in BLOCKS]))


def test_jit_inside_never_folds_the_mesh_size_or_device_index():
    def f(x):
        return x * lax.axis_size("i") + lax.psum(1, "i") + lax.axis_index("i")
    jf = astjax.jit(f)
    for n in (4, 2):
        mesh = astjax.make_mesh((n,), ("i",))
        out = astjax.shard_map(jf, mesh=mesh, in_specs=P("i"), out_specs=P("i"))(np.ones(4))
        np.testing.assert_allclose(out, 2 * n + np.repeat(np.arange(n), 4 // n))


def test_devices_that_diverge_in_their_collectives_get_an_error(monkeypatch):
    def mixed(x):                # device 0 gathers while the others sum
        if lax.axis_index("i") == 0:
            return lax.all_gather(x, "i", tiled=True)[:2]
        return lax.psum(x, "i")
    sm = astjax.shard_map(mixed, mesh=mesh1(), in_specs=P("i"), out_specs=P("i"))
    with pytest.raises(ShardingError, match="different collectives"):
        sm(X)
    monkeypatch.setenv("ASTJAX_COLLECTIVE_TIMEOUT", "0.5")

    def skips(x):                # device 0 never reaches the psum
        if lax.axis_index("i") == 0:
            return x
        return lax.psum(x, "i")
    sm = astjax.shard_map(skips, mesh=mesh1(), in_specs=P("i"), out_specs=P("i"))
    with pytest.raises(ShardingError, match="never reached"):
        sm(X)


def test_scan_and_cond_with_collectives_differentiate():
    def f(x):
        def body(c, row):
            c = lax.cond(lax.psum(np.sum(row), "i") > 0, lambda c: c + lax.psum(row, "i"),
                         lambda c: c * 0.5 + lax.pmax(row, "i"), c)
            return c, lax.all_gather(c, "i", tiled=True)
        final, ys = lax.scan(body, np.zeros(3), x)
        return np.reshape(np.sum(ys ** 2) + np.sum(final), (1,))

    sm = astjax.shard_map(f, mesh=mesh1(), in_specs=P(None, "i"), out_specs=P("i"))
    x = RNG.standard_normal((5, 12))

    def loss(x):
        return np.sum(np.sin(sm(x)))
    ref = 0.0
    blocks = np.split(x, 4, axis=1)
    c = [np.zeros(3) for _ in range(4)]
    outs = []
    for t in range(5):
        rows = [b[t] for b in blocks]
        for k in range(4):
            if np.sum(rows) > 0:       # the same branch on every device
                c[k] = c[k] + sum(rows)
            else:
                c[k] = c[k] * 0.5 + np.max(rows, axis=0)
        outs.append(np.concatenate(c))
    ref = [np.sum(np.stack(outs) ** 2) + np.sum(c[k]) for k in range(4)]
    np.testing.assert_allclose(sm(x), ref)
    np.testing.assert_allclose(astjax.grad(loss)(x), fd_grad(loss, x), rtol=1e-5, atol=1e-7)


def test_higher_orders_through_shard_map_from_outside():
    def f(w, x):
        return lax.psum(np.sum(np.sin(x * w) ** 2), "i") + np.sum(w ** 3)
    sm = astjax.shard_map(f, mesh=mesh1(), in_specs=(P(), P("i")), out_specs=P())
    w = RNG.standard_normal(3)
    g = astjax.grad(sm)
    hv_rev = astjax.grad(lambda w: np.sum(g(w, X) * np.arange(3.0)))(w)
    hv_fwd = astjax.jvp(lambda w: g(w, X), (w,), (np.arange(3.0),))[1]
    eps = 1e-5
    fd = (g(w + eps * np.arange(3.0), X) - g(w - eps * np.arange(3.0), X)) / (2 * eps)
    np.testing.assert_allclose(hv_rev, fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(hv_fwd, fd, rtol=1e-6, atol=1e-8)
    def hvp(w):                  # forward over reverse, then differentiated once more
        return np.sum(astjax.jvp(g, (w, X), (np.ones(3), np.zeros((8, 3))))[1])
    third = astjax.grad(hvp)(w)
    np.testing.assert_allclose(third, fd_grad(hvp, w), rtol=1e-5, atol=1e-7)
    pm = astjax.pmap(lambda x: lax.psum(np.sin(x), "d"), axis_name="d")
    xs = RNG.standard_normal((4, 2))
    gp = astjax.grad(lambda y: np.sum(pm(y)))
    hp = astjax.jvp(gp, (xs,), (np.ones_like(xs),))[1]
    np.testing.assert_allclose(hp, -4 * np.sin(xs), rtol=1e-10)


def test_devices_meshes_and_initialize_without_mpi(monkeypatch):
    assert astjax.device_count() == 4 and len(astjax.devices()) == 4
    assert astjax.distributed.initialize() == 1          # not under mpiexec: local
    mesh = astjax.make_mesh((2, 2), ("a", "b"))
    assert mesh.shape == {"a": 2, "b": 2} and mesh.size == 4
    with pytest.raises(ShardingError, match="needs 8 devices"):
        astjax.make_mesh((8,), ("i",))
    with pytest.raises(ShardingError, match="pmap: the mapped axis has size 5"):
        astjax.pmap(lambda v: v, axis_name="d")(np.ones((5, 2)))
    monkeypatch.setenv("ASTJAX_NUM_CPU_DEVICES", "zero")
    with pytest.raises(ShardingError, match="positive integer"):
        astjax.devices()
    assert P("x", None, ("y", "z")).mesh_axes() == ("x", "y", "z")
    with pytest.raises(ShardingError, match="PartitionSpec entries"):
        P(3)
