"""The collectives through every transformation, against NumPy (issue 14's sweep).

Each case is a per-shard function ``spmd(x)`` on a (2, 3) block of a 4-device mesh
using one collective (with nonlinear maps around it, so derivatives meet both the
collective and its operand), and ``ref(blocks)``: the same program in NumPy on the
list of the 4 blocks.  ``F(X)``, the concatenated reference outputs, is the global
function every composition must reproduce:

- grad / jvp of the shard_map'ed function from outside, and jit of both;
- grad / jvp taken *inside* the per-shard function (check_vma=False): on device d the
  gradient of the sum of every device's local loss with respect to d's block (JAX's
  check_vma=False transposes), i.e. F's gradient again;
- vmap outside the shard_map, vmap inside it (no axis name: each example's collective
  spans the devices), and ``vmap(spmd, axis_name="i")`` (the batch is the device
  axis), with grad and jvp of the named vmap;
- pmap of ``spmd``;
- the collective in lax control-flow bodies inside the shard (fori_loop, scan, cond,
  while_loop), with grad and jvp from outside.

Derivatives are checked against central finite differences of the NumPy reference in
float64, values against the reference itself.
"""
from __future__ import annotations

import numpy as np
import pytest

import astjax
from astjax import lax
from astjax.sharding import P

N = 4
RNG = np.random.default_rng(14)
X = RNG.standard_normal((N * 2, 3))
T = RNG.standard_normal(X.shape)
WEIGHT = RNG.standard_normal(X.shape)
C4 = np.array([1.0, -2.0, 0.5, 3.0])
M28 = RNG.standard_normal((2, 8))
RING = [(k, (k + 1) % N) for k in range(N)]
PARTIAL = [(0, 2), (3, 1)]


@pytest.fixture(autouse=True)
def _devices(monkeypatch):
    monkeypatch.setenv("ASTJAX_NUM_CPU_DEVICES", str(N))


def mesh():
    return astjax.make_mesh((N,), ("i",))


# ------------------------------------------------- the cases: (spmd, NumPy reference)

def _stack_ref(parts, axis):
    return np.stack(parts, axis=axis)


CASES = {}


def case(name):
    def deco(pair):
        CASES[name] = pair()
        return pair
    return deco


@case("psum")
def _psum():
    def spmd(x):
        return lax.psum(np.sin(x), "i") * x

    def ref(bs):
        s = sum(np.sin(b) for b in bs)
        return [s * b for b in bs]
    return spmd, ref


@case("pmean")
def _pmean():
    def spmd(x):
        return lax.pmean(np.sin(x) * x, "i") + np.cos(x)

    def ref(bs):
        m = sum(np.sin(b) * b for b in bs) / N
        return [m + np.cos(b) for b in bs]
    return spmd, ref


@case("pmax")
def _pmax():
    def spmd(x):
        return lax.pmax(np.sin(x) + 0.3 * x, "i") * x

    def ref(bs):
        m = np.max([np.sin(b) + 0.3 * b for b in bs], axis=0)
        return [m * b for b in bs]
    return spmd, ref


@case("pmin")
def _pmin():
    def spmd(x):
        return lax.pmin(x ** 3 - x, "i") * np.cos(x)

    def ref(bs):
        m = np.min([b ** 3 - b for b in bs], axis=0)
        return [m * np.cos(b) for b in bs]
    return spmd, ref


@case("all_gather")
def _all_gather():
    def spmd(x):
        g = lax.all_gather(np.sin(x), "i", axis=1)          # (2, 4, 3)
        return x * np.sum(g * C4[None, :, None], axis=1)

    def ref(bs):
        g = np.stack([np.sin(b) for b in bs], axis=1)
        s = np.sum(g * C4[None, :, None], axis=1)
        return [b * s for b in bs]
    return spmd, ref


@case("all_gather_tiled")
def _all_gather_tiled():
    def spmd(x):
        g = lax.all_gather(x ** 2, "i", tiled=True)         # (8, 3)
        return np.cos(x) * (M28 @ g)

    def ref(bs):
        g = np.concatenate([b ** 2 for b in bs])
        return [np.cos(b) * (M28 @ g) for b in bs]
    return spmd, ref


@case("psum_scatter")
def _psum_scatter():
    def spmd(x):
        parts = np.stack([np.sin(x), x, x ** 2, np.cos(x)], axis=1)   # (2, 4, 3)
        return lax.psum_scatter(parts, "i", scatter_dimension=1) * x

    def ref(bs):
        s = sum(np.stack([np.sin(b), b, b ** 2, np.cos(b)], axis=1) for b in bs)
        return [s[:, k] * b for k, b in enumerate(bs)]
    return spmd, ref


@case("psum_scatter_tiled")
def _psum_scatter_tiled():
    def spmd(x):
        s = lax.psum_scatter(np.concatenate([np.sin(x), x ** 2]), "i", tiled=True)
        return x * s                                         # (1, 3) broadcast

    def ref(bs):
        s = sum(np.concatenate([np.sin(b), b ** 2]) for b in bs)
        return [b * s[k:k + 1] for k, b in enumerate(bs)]
    return spmd, ref


@case("ppermute")
def _ppermute():
    def spmd(x):
        return lax.ppermute(np.sin(x), "i", RING) * x

    def ref(bs):
        return [np.sin(bs[(k - 1) % N]) * bs[k] for k in range(N)]
    return spmd, ref


@case("ppermute_partial")
def _ppermute_partial():
    def spmd(x):
        return lax.ppermute(x ** 2, "i", PARTIAL) + np.sin(x)

    def ref(bs):
        got = [np.zeros_like(b) for b in bs]
        for s, d in PARTIAL:
            got[d] = bs[s] ** 2
        return [g + np.sin(b) for g, b in zip(got, bs)]
    return spmd, ref


@case("all_to_all")
def _all_to_all():
    def spmd(x):
        y = np.stack([np.sin(x), x ** 2, np.cos(x), x], axis=0)     # (4, 2, 3)
        z = lax.all_to_all(y, "i", 0, 1)                            # (2, 4, 3)
        return x * np.sum(z * C4[None, :, None], axis=1)

    def ref(bs):
        ys = [np.stack([np.sin(b), b ** 2, np.cos(b), b]) for b in bs]
        out = []
        for d, b in enumerate(bs):
            z = np.stack([ys[s][d] for s in range(N)], axis=1)      # from device s
            out.append(b * np.sum(z * C4[None, :, None], axis=1))
        return out
    return spmd, ref


@case("all_to_all_tiled")
def _all_to_all_tiled():
    def spmd(x):
        y = np.concatenate([np.sin(x), x ** 2])                     # (4, 3)
        z = lax.all_to_all(y, "i", 0, 0, tiled=True)                # (4, 3)
        return x * (z[:2] + z[2:] ** 2)

    def ref(bs):
        ys = [np.concatenate([np.sin(b), b ** 2]) for b in bs]
        out = []
        for d, b in enumerate(bs):
            z = np.concatenate([ys[s][d:d + 1] for s in range(N)])
            out.append(b * (z[:2] + z[2:] ** 2))
        return out
    return spmd, ref


@case("axis_index")
def _axis_index():
    def spmd(x):
        k = lax.axis_index("i")
        return x * (k + 1.0) + np.sin(x) * lax.axis_size("i") + lax.psum(1, "i")

    def ref(bs):
        return [b * (k + 1.0) + np.sin(b) * N + N for k, b in enumerate(bs)]
    return spmd, ref


NAMES = sorted(CASES)


def F(name, x):
    """The global function: the reference on x's blocks, concatenated."""
    return np.concatenate(CASES[name][1](np.split(x, N)))


def fd_grad(fun, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (fun(xp) - fun(xm)) / (2 * eps)
    return g


def fd_tangent(fun, x, t, eps=1e-6):
    return (fun(x + eps * t) - fun(x - eps * t)) / (2 * eps)


def close(a, b, tight=False):
    if tight:
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    else:
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-8)


def sharded(name):
    return astjax.shard_map(CASES[name][0], mesh=mesh(), in_specs=P("i"), out_specs=P("i"))


def weighted(fun):
    return lambda x: np.sum(np.sin(fun(x)) * WEIGHT)


def ref_loss(name):
    return weighted(lambda x: F(name, x))


# ---------------------------------------------------------- from outside the shard_map

@pytest.mark.parametrize("name", NAMES)
def test_forward_and_jit(name):
    sm = sharded(name)
    close(sm(X), F(name, X), tight=True)
    close(astjax.jit(sm)(X), F(name, X), tight=True)
    jitted_inside = astjax.shard_map(astjax.jit(CASES[name][0]), mesh=mesh(),
                                     in_specs=P("i"), out_specs=P("i"))
    close(jitted_inside(X), F(name, X), tight=True)
    # (the shard_map of a transformed function differentiates like the plain one)
    close(astjax.grad(weighted(jitted_inside))(X), fd_grad(ref_loss(name), X))
    vmapped_inside = astjax.shard_map(astjax.vmap(CASES[name][0]), mesh=mesh(),
                                      in_specs=P(None, "i"), out_specs=P(None, "i"))
    close(astjax.jvp(vmapped_inside, (X[None],), (T[None],))[1][0],
          fd_tangent(lambda x: F(name, x), X, T))


@pytest.mark.parametrize("name", NAMES)
def test_grad_from_outside(name):
    loss = weighted(sharded(name))
    g_ref = fd_grad(ref_loss(name), X)
    close(astjax.grad(loss)(X), g_ref)
    close(astjax.jit(astjax.grad(loss))(X), g_ref)
    v, g = astjax.value_and_grad(loss)(X)
    close(v, ref_loss(name)(X), tight=True)
    close(g, g_ref)


@pytest.mark.parametrize("name", NAMES)
def test_jvp_from_outside(name):
    sm = sharded(name)
    out, tan = astjax.jvp(sm, (X,), (T,))
    close(out, F(name, X), tight=True)
    t_ref = fd_tangent(lambda x: F(name, x), X, T)
    close(tan, t_ref)
    close(astjax.jit(lambda x, t: astjax.jvp(sm, (x,), (t,))[1])(X, T), t_ref)


# ------------------------------------------------------------ inside the per-shard code

@pytest.mark.parametrize("name", NAMES)
def test_grad_inside(name):
    spmd = CASES[name][0]

    def shard(x, w):
        return astjax.grad(lambda x: np.sum(np.sin(spmd(x)) * w))(x)
    sm = astjax.shard_map(shard, mesh=mesh(), in_specs=P("i"), out_specs=P("i"),
                          check_vma=False)
    g_ref = fd_grad(ref_loss(name), X)
    close(sm(X, WEIGHT), g_ref)
    jitted = astjax.shard_map(astjax.jit(shard), mesh=mesh(), in_specs=P("i"),
                              out_specs=P("i"), check_vma=False)
    close(jitted(X, WEIGHT), g_ref)


@pytest.mark.parametrize("name", NAMES)
def test_jvp_inside(name):
    spmd = CASES[name][0]

    def shard(x, t):
        return astjax.jvp(spmd, (x,), (t,))[1]
    sm = astjax.shard_map(shard, mesh=mesh(), in_specs=P("i"), out_specs=P("i"))
    close(sm(X, T), fd_tangent(lambda x: F(name, x), X, T))


# ------------------------------------------------------------------------------ vmap

XS = RNG.standard_normal((3, N * 2, 3))          # a batch of 3 global arrays
TS = RNG.standard_normal(XS.shape)


@pytest.mark.parametrize("name", NAMES)
def test_vmap_outside(name):
    sm = sharded(name)
    ref = np.stack([F(name, x) for x in XS])
    close(astjax.vmap(sm)(XS), ref, tight=True)
    # over a trailing axis, and its gradient
    close(astjax.vmap(sm, in_axes=2, out_axes=2)(np.moveaxis(XS, 0, 2)),
          np.moveaxis(ref, 0, 2), tight=True)
    loss = lambda xs: np.sum(np.sin(astjax.vmap(sm)(xs)) * TS)          # noqa: E731
    ref_l = lambda xs: np.sum(np.sin(np.stack([F(name, x) for x in xs])) * TS)  # noqa: E731
    close(astjax.grad(loss)(XS), fd_grad(ref_l, XS))


@pytest.mark.parametrize("name", NAMES)
def test_vmap_inside(name):
    spmd = CASES[name][0]
    # the block (3, 2, 3): each of the 3 examples' collectives span the devices
    sm = astjax.shard_map(astjax.vmap(spmd), mesh=mesh(), in_specs=P(None, "i"),
                          out_specs=P(None, "i"))
    ref = np.stack([F(name, x) for x in XS])
    close(sm(XS), ref, tight=True)
    loss = lambda xs: np.sum(np.sin(sm(xs)) * TS)                       # noqa: E731
    ref_l = lambda xs: np.sum(np.sin(np.stack([F(name, x) for x in xs])) * TS)  # noqa: E731
    close(astjax.grad(loss)(XS), fd_grad(ref_l, XS))
    _, tan = astjax.jvp(sm, (XS,), (TS,))
    close(tan, fd_tangent(lambda xs: np.stack([F(name, x) for x in xs]), XS, TS))


@pytest.mark.parametrize("name", NAMES)
def test_vmap_with_axis_name(name):
    spmd = CASES[name][0]
    blocks = X.reshape(N, 2, 3)                  # the batch axis is the device axis
    named = astjax.vmap(spmd, axis_name="i")
    ref = F(name, X).reshape(N, 2, 3)
    close(named(blocks), ref, tight=True)
    w = WEIGHT.reshape(N, 2, 3)
    loss = lambda b: np.sum(np.sin(named(b)) * w)                       # noqa: E731
    ref_l = lambda b: ref_loss(name)(b.reshape(N * 2, 3))               # noqa: E731
    close(astjax.grad(loss)(blocks), fd_grad(ref_l, blocks))
    _, tan = astjax.jvp(named, (blocks,), (T.reshape(N, 2, 3),))
    close(tan, fd_tangent(lambda x: F(name, x), X, T).reshape(N, 2, 3))
    # jit of the named vmap
    close(astjax.jit(named)(blocks), ref, tight=True)


@pytest.mark.parametrize("name", NAMES)
def test_pmap(name):
    spmd = CASES[name][0]
    pm = astjax.pmap(spmd, axis_name="i")
    blocks = X.reshape(N, 2, 3)
    close(pm(blocks), F(name, X).reshape(N, 2, 3), tight=True)
    w = WEIGHT.reshape(N, 2, 3)
    loss = lambda b: np.sum(np.sin(pm(b)) * w)                          # noqa: E731
    ref_l = lambda b: ref_loss(name)(b.reshape(N * 2, 3))               # noqa: E731
    close(astjax.grad(loss)(blocks), fd_grad(ref_l, blocks))
    _, tan = astjax.jvp(pm, (blocks,), (T.reshape(N, 2, 3),))
    close(tan, fd_tangent(lambda x: F(name, x), X, T).reshape(N, 2, 3))


# ------------------------------------------------------------------ lax control flow

def _twice(name, x):
    """The reference of two steps ``v -> tanh(spmd(v) / 2)`` (bounded, so finite
    differences stay accurate)."""
    for _ in range(2):
        x = np.tanh(F(name, x) * 0.5)
    return x


def _flow(kind, spmd):
    def step(v):
        return np.tanh(spmd(v) * 0.5)

    if kind == "fori_loop":
        return lambda x: lax.fori_loop(0, 2, lambda i, v: step(v), x)
    if kind == "scan":
        def scan(x):
            def body(v, _):
                v = step(v)
                return v, np.sum(v)
            final, _ = lax.scan(body, x, None, length=2)
            return final
        return scan
    if kind == "cond":
        # a replicated predicate (every device takes the same branch)
        def cond(x):
            up = lax.psum(np.sum(x), "i") > -1e9
            return lax.cond(up, lambda v: step(step(v)), lambda v: v * 3.0, x)
        return cond
    if kind == "while_loop":
        def loop(x):
            def body(c):
                i, v = c
                return i + 1, step(v)
            return lax.while_loop(lambda c: c[0] < 2, body, (0, x))[1]
        return loop
    raise AssertionError(kind)


FLOWS = ["fori_loop", "scan", "cond", "while_loop"]


@pytest.mark.parametrize("kind", FLOWS)
@pytest.mark.parametrize("name", NAMES)
def test_control_flow_bodies(name, kind):
    sm = astjax.shard_map(_flow(kind, CASES[name][0]), mesh=mesh(), in_specs=P("i"),
                          out_specs=P("i"))
    ref = lambda x: _twice(name, x)                                     # noqa: E731
    close(sm(X), ref(X), tight=True)
    _, tan = astjax.jvp(sm, (X,), (T,))
    close(tan, fd_tangent(ref, X, T))
    if kind == "while_loop":
        return                   # reverse mode of while_loop: refused, as in JAX
    loss = lambda x: np.sum(np.sin(sm(x)) * WEIGHT)                     # noqa: E731
    ref_l = lambda x: np.sum(np.sin(ref(x)) * WEIGHT)                   # noqa: E731
    close(astjax.grad(loss)(X), fd_grad(ref_l, X))


# ------------------------------------------------------------------- second order

@pytest.mark.parametrize("name", NAMES)
def test_second_order_from_outside(name):
    """Hessian-vector products, forward-over-reverse and reverse-over-reverse, against
    differences of the (checked) first-order gradient: the transposes' own rules."""
    loss = weighted(sharded(name))
    g = astjax.grad(loss)
    hv_ref = fd_tangent(g, X, T, eps=1e-5)
    tol = dict(rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(astjax.jvp(g, (X,), (T,))[1], hv_ref, **tol)
    np.testing.assert_allclose(astjax.grad(lambda x: np.sum(g(x) * T))(X), hv_ref, **tol)


# ------------------------------------------------ vmap inside around control flow

@pytest.mark.parametrize("kind", ["fori_loop", "scan", "cond"])
@pytest.mark.parametrize("name", ["psum", "all_gather_tiled", "ppermute", "all_to_all",
                                  "psum_scatter", "pmax"])
def test_vmap_inside_of_control_flow(name, kind):
    sm = astjax.shard_map(astjax.vmap(_flow(kind, CASES[name][0])), mesh=mesh(),
                          in_specs=P(None, "i"), out_specs=P(None, "i"))
    ref = lambda xs: np.stack([_twice(name, x) for x in xs])            # noqa: E731
    close(sm(XS), ref(XS), tight=True)
    loss = lambda xs: np.sum(np.sin(sm(xs)) * TS)                       # noqa: E731
    close(astjax.grad(loss)(XS), fd_grad(lambda xs: np.sum(np.sin(ref(xs)) * TS), XS))


# ------------------------------------------------ a 2x2 mesh: tuple axes, both orders

YX = ("y", "x")          # linearized y-major: rank = 2 * y + x (not the mesh's order)
CASES2 = {
    "psum_yx": (lambda b: lax.psum(np.sin(b), YX) * b,
                lambda bs: [sum(np.sin(c) for c in bs) * c for c in bs]),
    "gather_yx": (lambda b: b * np.sum(lax.all_gather(np.sin(b), YX, axis=0) *
                                       C4[:, None, None], axis=0),
                  lambda bs: None),
    "scatter_y": (lambda b: lax.psum_scatter(np.concatenate([b, b ** 2]), "y", tiled=True)
                  * np.cos(b[:1]), lambda bs: None),
    "ppermute_yx": (lambda b: lax.ppermute(np.sin(b), YX, [(0, 1), (1, 2), (2, 3), (3, 0)])
                    * b, lambda bs: None),
    "all_to_all_yx": (lambda b: b * np.sum(lax.all_to_all(
        np.stack([np.sin(b), b, b ** 2, np.cos(b)]), YX, 0, 0) * C4[:, None, None], axis=0),
        lambda bs: None),
    "index_yx": (lambda b: b * (1.0 + lax.axis_index(YX)) + np.sin(b) * lax.axis_index("y"),
                 lambda bs: None),
}
X2 = RNG.standard_normal((4, 6))       # blocks (2, 3) on the 2x2 mesh


def _rank_yx(px, py):
    return 2 * py + px


def _ref2(name, x):
    """NumPy reference of CASES2 on the 2x2 mesh: block (px, py) = rows px, cols py."""
    blocks = {(px, py): x[2 * px:2 * px + 2, 3 * py:3 * py + 3]
              for px in range(2) for py in range(2)}
    by_rank = [None] * 4
    for (px, py), b in blocks.items():
        by_rank[_rank_yx(px, py)] = b
    out = {}
    for (px, py), b in blocks.items():
        r = _rank_yx(px, py)
        if name == "psum_yx":
            o = sum(np.sin(c) for c in by_rank) * b
        elif name == "gather_yx":
            o = b * sum(C4[k] * np.sin(by_rank[k]) for k in range(4))
        elif name == "scatter_y":
            col = [blocks[(px, q)] for q in range(2)]
            s = sum(np.concatenate([c, c ** 2]) for c in col)
            o = s[2 * py:2 * py + 2] * np.cos(b[:1])
        elif name == "ppermute_yx":
            o = np.sin(by_rank[(r - 1) % 4]) * b
        elif name == "all_to_all_yx":
            got = [[np.sin(c), c, c ** 2, np.cos(c)][r] for c in by_rank]
            o = b * sum(C4[k] * got[k] for k in range(4))
        else:
            o = b * (1.0 + r) + np.sin(b) * py
        out[(px, py)] = o
    return np.block([[out[(0, 0)], out[(0, 1)]], [out[(1, 0)], out[(1, 1)]]])


def sharded2(f):
    return astjax.shard_map(f, mesh=astjax.make_mesh((2, 2), ("x", "y")),
                            in_specs=P("x", "y"), out_specs=P("x", "y"))


@pytest.mark.parametrize("name", sorted(CASES2))
def test_tuple_axes_through_the_transformations(name):
    f = CASES2[name][0]
    ref = lambda x: _ref2(name, x)                                      # noqa: E731
    w = RNG.standard_normal(X2.shape)
    t = RNG.standard_normal(X2.shape)
    ref_l = lambda x: np.sum(np.sin(ref(x)) * w)                        # noqa: E731
    g_ref = fd_grad(ref_l, X2)
    sm = sharded2(f)
    close(sm(X2), ref(X2), tight=True)
    close(astjax.jit(sm)(X2), ref(X2), tight=True)
    close(astjax.grad(lambda x: np.sum(np.sin(sm(x)) * w))(X2), g_ref)
    close(astjax.jvp(sm, (X2,), (t,))[1], fd_tangent(ref, X2, t))
    # inside: grad (check_vma=False), jvp, jit
    inside = astjax.shard_map(lambda x, w: astjax.grad(lambda x: np.sum(np.sin(f(x)) * w))(x),
                              mesh=astjax.make_mesh((2, 2), ("x", "y")),
                              in_specs=P("x", "y"), out_specs=P("x", "y"), check_vma=False)
    close(inside(X2, w), g_ref)
    close(sharded2(lambda x, t: astjax.jvp(f, (x,), (t,))[1])(X2, t),
          fd_tangent(ref, X2, t))
    close(sharded2(astjax.jit(f))(X2), ref(X2), tight=True)
    # vmap outside and inside
    xs = RNG.standard_normal((2,) + X2.shape)
    close(astjax.vmap(sm)(xs), np.stack([ref(x) for x in xs]), tight=True)
    vin = astjax.shard_map(astjax.vmap(f), mesh=astjax.make_mesh((2, 2), ("x", "y")),
                           in_specs=P(None, "x", "y"), out_specs=P(None, "x", "y"))
    close(vin(xs), np.stack([ref(x) for x in xs]), tight=True)
    # a fori_loop body
    loop = sharded2(lambda x: lax.fori_loop(0, 2, lambda i, v: np.tanh(f(v)), x))
    ref_loop = lambda x: np.tanh(ref(np.tanh(ref(x))))                  # noqa: E731
    close(loop(X2), ref_loop(X2), tight=True)
    close(astjax.grad(lambda x: np.sum(loop(x) * w))(X2),
          fd_grad(lambda x: np.sum(ref_loop(x) * w), X2))


def test_transformed_named_vmap_inside_a_mesh_axis_of_the_same_name():
    # the innermost name wins (the batch); jit and vmap of a named vmap or a pmap run
    # its shard_map rules, never the plain batched code with collectives over the mesh
    def per_row(r):
        return r - lax.pmean(r, "i") + lax.axis_index("i")

    def shard(x):                                    # x: (1, 4) on each device
        return astjax.jit(astjax.vmap(per_row, axis_name="i"))(x[0])[None]
    x = RNG.standard_normal((N, 4))
    out = astjax.shard_map(shard, mesh=mesh(), in_specs=P("i"), out_specs=P("i"))(x)
    np.testing.assert_allclose(out, x - x.mean(axis=1, keepdims=True) + np.arange(4.0))
    xs = RNG.standard_normal((3, 4))
    ref = xs - xs.mean(axis=1, keepdims=True) + np.arange(4.0)
    named = astjax.vmap(per_row, axis_name="i")
    np.testing.assert_allclose(astjax.vmap(named)(xs), ref)
    np.testing.assert_allclose(astjax.vmap(astjax.pmap(per_row, axis_name="i"))(xs), ref)
    np.testing.assert_allclose(astjax.jit(astjax.pmap(per_row, axis_name="i"))(xs[0]), ref[0])


@pytest.mark.parametrize("name", NAMES)
def test_named_vmap_inside_a_shard_map(name):
    """vmap(spmd, axis_name="i") inside a shard_map over another mesh axis: each
    device's 4 examples are the 4 participants of the collectives."""
    spmd = CASES[name][0]
    xs = RNG.standard_normal((8, 2, 3))          # 2 devices x 4 examples of (2, 3)
    ts = RNG.standard_normal(xs.shape)
    w = RNG.standard_normal(xs.shape)
    sm = astjax.shard_map(astjax.vmap(spmd, axis_name="i"),
                          mesh=astjax.make_mesh((2,), ("j",)), in_specs=P("j"),
                          out_specs=P("j"))

    def ref(x):
        return np.concatenate([F(name, x[4 * d:4 * d + 4].reshape(8, 3)).reshape(4, 2, 3)
                               for d in range(2)])
    close(sm(xs), ref(xs), tight=True)
    close(astjax.grad(lambda x: np.sum(np.sin(sm(x)) * w))(xs),
          fd_grad(lambda x: np.sum(np.sin(ref(x)) * w), xs))
    close(astjax.jvp(sm, (xs,), (ts,))[1], fd_tangent(ref, xs, ts))


def test_transforming_a_pmap_with_static_arguments():
    # one plan per static value (tests/test_sharding_static.py sweeps the rest)
    pm = astjax.pmap(lambda v, k: lax.psum(v ** 2, "d") * k, axis_name="d",
                     static_broadcasted_argnums=1)
    v = np.arange(4.0)
    np.testing.assert_allclose(pm(v, 3.0), np.full(4, 42.0))
    np.testing.assert_allclose(astjax.grad(lambda v: np.sum(pm(v, 3.0)))(v), 24.0 * v)
    np.testing.assert_allclose(astjax.jit(lambda v: pm(v, 2.0))(v), np.full(4, 28.0))
    np.testing.assert_allclose(astjax.vmap(lambda v: pm(v, 3.0))(np.stack([v, 2 * v])),
                               [np.full(4, 42.0), np.full(4, 168.0)])
