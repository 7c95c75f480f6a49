"""vmap classes the fuzzer and the composition matrix found (issue 10), swept.

Each program below does one thing per example that batching has to get right: an
``if`` or a lax call whose path differs per example, fancy indexing with a list, a
creation primitive whose size is computed per example, a vmapped function called
inside lax control flow.  Every program runs under ``vmap``, ``vmap(grad)``,
``grad`` of a loss of ``vmap`` and ``jit(vmap)``, against a Python loop over the
examples and float64 central finite differences.  Programs whose examples would end
with arrays of different shapes are refused with an error naming the user's line.
"""
from __future__ import annotations

import numpy as np
import pytest

import astjax
from astjax.transforms.aliasing import AliasError
from astjax import lax
from astjax.errors import TransformError
from conftest import numerical_grad

# ------------------------------------------------------------------------ programs
# each takes one example x of shape (3,); the batches below put the examples on
# both sides of every branch threshold, away from it (finite differences stay exact)


def branch_fancy(x):
    if np.sum(x) > 0.0:
        return x[[0, 1, 0]] * 2.0
    return x[[1, 1, 0]]


def branch_list_index(x):
    if np.sum(x) > 0.0:
        idx = [0, 1, 0]
    else:
        idx = [2, 2, 1]
    return x[idx] * x[0]


def argmax_in_list(x):
    i = np.argmax(x)
    return x[[i, 0, i]] * np.tanh(x)


def setitem_list_in_branch(x):
    if np.sum(x) > 0.0:
        idx = [0, 2]
    else:
        idx = [1, 2]
    y = x * 1.5
    y[idx] = np.sin(x[:2])
    return y


def switch_fancy(x):
    index = np.where(np.sum(x) > 0.0, 1, 0)
    return lax.switch(index, [lambda a: a[[0, 1, 0]], lambda a: a[[2, 2, 1]] * 3.0], x)


def cond_fancy(x):
    return lax.cond(np.sum(x) > 0.0, lambda a: np.sin(a[[2, 0, 1]]), lambda a: a * a, x)


def while_fancy(x):
    def body(c):
        return c[0] + 1, c[1][[1, 2, 0]] * 1.1 + 0.1

    def keep_going(c):
        return (c[0] < 4) & (np.sum(c[1]) < 1.0)

    return lax.while_loop(keep_going, body, (0, x))[1]


def cond_around_scan(x):
    def step(c, t):
        return np.tanh(c + x * t), c

    def scanned(a):
        return lax.scan(step, np.zeros(3), np.array([1.0, 0.5]))[0]

    return lax.cond(np.sum(x) > 0.0, scanned, lambda a: a * 0.5, x)


def shapes_in_branch(x):
    if np.sum(x) > 0.0:
        m = np.reshape(np.concatenate([x, x * 2.0]), (2, 3))
        out = np.sum(m * np.ones((2, 3)), axis=0)
    else:
        out = x * np.full((3,), 2.0)
    return out


def creation_in_branch(x):
    # n is the same for every example, but assigned in a per-example branch
    if np.sum(x) > 0.0:
        n = 3
    else:
        n = 3
    z = np.zeros(n) + np.ones((n,)) * 2.0 + np.eye(n)[0] + np.arange(n) + np.tri(n)[1]
    return z * x + np.full(n, 0.5) * np.identity(n)[2]


def creation_in_while(x):
    h = x * 1.0
    k = 0
    while np.sum(h) < 2.0 and k < 3:
        h = h + np.ones(3) * 0.35 + np.zeros_like(h)
        k = k + 1
    return h * x


def temporary_shapes_differ(x):
    # t has another shape in each branch, but nothing reads it after the if
    if np.sum(x) > 0.0:
        t = x[:2]
        out = np.sum(t) * x
    else:
        t = np.outer(x, x)
        out = np.sum(t, axis=0)
    return out


def _kernel(a, b):
    return np.sin(a) * b


_rows = astjax.vmap(_kernel, in_axes=(0, None))


def vmapped_in_map(x):
    return lax.map(lambda r: _rows(np.outer(r, x), x), x[:2])[:, 0, :].ravel()[:3]


def vmapped_in_cond(x):
    grid = np.outer(x, x)
    return lax.cond(np.sum(x) > 0.0, lambda g: np.sum(_rows(g, x), axis=0),
                    lambda g: g[0] * 2.0, grid)


def vmapped_in_fori(x):
    grid = np.outer(x, x)
    return lax.fori_loop(0, 2, lambda i, c: c + np.sum(_rows(grid, c), axis=1) * 0.3, x)


def map_in_branch(x):
    g = np.outer(x, x)
    if np.sum(x) > 0.0:
        r = np.sum(lax.map(lambda row: np.sin(row) * x, g), axis=0)
    else:
        r = g[0] * 2.0
    return r


def scan_in_branch(x):
    def step(c, t):
        return c * 0.5 + np.sin(x * t), c * t

    if np.sum(x) > 0.0:
        c, ys = lax.scan(step, x, np.array([0.5, 1.0, 1.5]))
        r = c + np.sum(ys, axis=0)
    else:
        r = np.cos(x)
    return r


def map_in_while(x):
    h = x * 1.0
    k = 0
    while np.sum(h) < 1.2 and k < 3:
        h = h + 0.3 * np.sum(lax.map(lambda row: np.tanh(row + h), np.stack([x, h])), axis=0)
        k = k + 1
    return h


PROGRAMS = [branch_fancy, branch_list_index, argmax_in_list, setitem_list_in_branch,
            switch_fancy, cond_fancy, while_fancy, cond_around_scan, shapes_in_branch,
            creation_in_branch, creation_in_while, temporary_shapes_differ,
            vmapped_in_map, vmapped_in_cond, vmapped_in_fori, map_in_branch, scan_in_branch,
            map_in_while]

# examples on both sides of the thresholds above, away from them and from ties
XB = np.array([[0.3, -0.5, 0.7], [-0.35, 0.45, -0.75], [0.15, 0.25, 0.4],
               [-0.6, -0.2, 0.1]])


def _loop(f, xb):
    return np.stack([f(x) for x in xb])


def _loss(f):
    def loss(x):
        return np.sum(np.sin(f(x) * 0.7 + 0.1))
    return loss


def _vmap_loss(f):
    batched = astjax.vmap(f)

    def loss(xb):
        return np.sum(np.sin(batched(xb) * 0.7 + 0.1))
    return loss


def _ids(fs):
    return [f.__name__ for f in fs]


@pytest.mark.parametrize("f", PROGRAMS, ids=_ids(PROGRAMS))
def test_vmap_matches_loop(f):
    out = astjax.vmap(f)(XB)
    expected = _loop(f, XB)
    assert np.shape(out) == expected.shape
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("f", PROGRAMS, ids=_ids(PROGRAMS))
def test_jit_vmap_matches_loop(f):
    out = astjax.jit(astjax.vmap(f))(XB)
    np.testing.assert_allclose(out, _loop(f, XB), rtol=1e-12, atol=1e-12)


# reverse mode keeps a shape stand-in of the branch temporary for the backward sweep:
# its shape differs per lane, so vmap(grad) of it is refused (located, not silent)
GRAD_REFUSED = {temporary_shapes_differ}
VMAP_OF_GRAD = [f for f in PROGRAMS if f not in GRAD_REFUSED]


@pytest.mark.parametrize("f", VMAP_OF_GRAD, ids=_ids([f for f in PROGRAMS
                                                     if f not in GRAD_REFUSED]))
def test_vmap_of_grad_matches_finite_differences(f):
    loss = _loss(f)
    got = astjax.vmap(astjax.grad(loss))(XB)
    expected = np.stack([numerical_grad(loss, (x,)) for x in XB])
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-8)


# grad of vmap's loop form around an update of an array made in the loop body: the
# alias analysis names memory by the statement that made it, so this iteration's y and
# the earlier ones kept in the list of results look alike (a located refusal, not a
# wrong number; the analysis needs the newest-made object told apart)
_ALIAS_REFUSED = {"setitem_list_in_branch"}


@pytest.mark.parametrize("f", [pytest.param(
    f, marks=pytest.mark.xfail(strict=True, raises=AliasError,
                               reason="allocation sites of a loop body look alike"))
    if f.__name__ in _ALIAS_REFUSED else f for f in PROGRAMS], ids=_ids(PROGRAMS))
def test_grad_of_vmap_matches_finite_differences(f):
    loss = _vmap_loss(f)
    got = astjax.grad(loss)(XB)
    expected = numerical_grad(lambda xb: np.sum(np.sin(_loop(f, xb) * 0.7 + 0.1)), (XB,))
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("f", PROGRAMS, ids=_ids(PROGRAMS))
def test_vmap_in_axes_last(f):
    """The batch on the last axis in and out: the same per-example results."""
    out = astjax.vmap(f, in_axes=-1, out_axes=-1)(XB.T)
    np.testing.assert_allclose(out, _loop(f, XB).T, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------ refused, with a location

def branch_shapes(x):
    if np.sum(x) > 0.0:
        v = np.sin(x)
    else:
        v = np.outer(x, x)
    return x + np.sum(v)


def scalar_or_vector(x):
    out = 0.0
    if np.sum(x) > 0.0:
        out = x * 2.0
    return np.sum(out) + x


def size_per_example(x):
    if np.sum(x) > 0.0:
        n = 3
    else:
        n = 2
    return x * np.sum(np.ones(n))


def growing_carry(x):
    h = x * 1.0
    while np.sum(h) < 1.5:
        h = np.concatenate([h, np.abs(x) + 0.3])
    return np.sum(h) * x


def list_length_differs(x):
    if np.sum(x) > 0.0:
        parts = [x, x * 2.0]
    else:
        parts = [x]
    total = x * 0.0
    for p in parts:
        total = total + p
    return total


def arange_length_per_example(x):
    return x * np.sum(np.arange(x[0] + 1.0, 3.0))


REFUSED = [branch_shapes, scalar_or_vector, size_per_example, growing_carry,
           arange_length_per_example]


@pytest.mark.parametrize("f", REFUSED, ids=_ids(REFUSED))
def test_lanes_with_different_shapes_are_refused_at_the_users_line(f):
    with pytest.raises(TransformError) as info:
        astjax.vmap(f)(XB)
    err = info.value
    assert err.location is not None and err.location.filename == __file__
    assert err.location.function == f.__name__
    assert "shape" in str(err) and "^" in str(err) and "hint:" in str(err)


@pytest.mark.parametrize("f", REFUSED, ids=_ids(REFUSED))
def test_same_path_for_every_example_is_not_refused(f):
    """Only examples that really take different paths are a problem: a batch whose
    examples all take the same one runs (and agrees with the loop)."""
    xb = XB[[0, 2]]          # both with a positive sum
    out = astjax.vmap(f)(xb)
    np.testing.assert_allclose(out, _loop(f, xb), rtol=1e-12, atol=1e-12)


def test_list_length_differing_per_example_is_not_silent():
    """A container whose length differs per example cannot be batched: refused (or
    right), never a list cut to the shorter length."""
    try:
        out = astjax.vmap(list_length_differs)(XB)
    except (TransformError, TypeError, ValueError):
        return
    np.testing.assert_allclose(out, _loop(list_length_differs, XB), rtol=1e-12, atol=1e-12)


def test_fancy_index_in_branch_keeps_per_example_shape():
    """The fuzzer's reproducer: the list index is the same for every example, so it
    stays an ordinary index (it is not batched into a (3, B) index array)."""
    xb = np.stack([XB[0], -XB[0]])
    out = astjax.vmap(branch_fancy)(xb)
    assert out.shape == (2, 3)
    np.testing.assert_allclose(out, _loop(branch_fancy, xb))


def test_vmap_of_grad_with_branch_temporaries_of_different_shapes_is_refused():
    with pytest.raises(TransformError) as info:
        astjax.vmap(astjax.grad(_loss(temporary_shapes_differ)))(XB)
    assert info.value.location.function == "temporary_shapes_differ"


# ------------------------------------------------- tree_util calls in transformed code

from astjax import tree_util  # noqa: E402


def tree_sum(a):
    return sum(np.sum(np.sin(p)) for p in tree_util.tree_leaves(a))


def tree_square_map(a):
    sq = tree_util.tree_map(lambda p: p * p, a)
    return np.sum(sq["w"]) + np.sum(np.sin(sq["b"][0])) * np.sum(sq["b"][1])


def tree_pair_map(a):
    b = tree_util.tree_map(np.cos, a)
    prod = tree_util.tree_map(lambda p, q: p * q + 0.5, a, b)
    return np.sum(prod["w"] * prod["b"][1]) + np.sum(prod["b"][0])


def tree_flatten_roundtrip(a):
    leaves, treedef = tree_util.tree_flatten(a)
    new = tree_util.tree_unflatten(treedef, [np.sin(leaf) * (k + 1.0)
                                             for k, leaf in enumerate(leaves)])
    return np.sum(new["w"] * new["b"][1]) + np.sum(np.tanh(new["b"][0]))


def tree_reduce_sq(a):
    total = tree_util.tree_reduce(lambda u, v: u + np.sum(v * v * v), a, 0.0)
    first = tree_util.tree_reduce(lambda u, v: u * np.mean(v), a)
    return total + np.sum(first)


def _sgd(params, grads):
    return tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)


def tree_sgd_step(a):
    g = astjax.grad(tree_square_map)(a)
    new = _sgd(a, g)
    return tree_sum(new) + np.sum(tree_util.tree_leaves(new)[0] ** 2)


TREE_PROGRAMS = [tree_sum, tree_square_map, tree_pair_map, tree_flatten_roundtrip,
                 tree_reduce_sq, tree_sgd_step]


def _tree(rng, lead=()):
    return {"w": rng.uniform(0.2, 0.9, lead + (2,)),
            "b": (rng.uniform(-0.8, 0.8, lead + (3,)), rng.uniform(0.3, 1.1, lead + (2,)))}


def _tree_close(got, want, rtol=1e-6, atol=1e-8):
    gl, gd = tree_util.tree_flatten(got)
    wl, wd = tree_util.tree_flatten(want)
    assert gd == wd, (gd, wd)
    for g, w in zip(gl, wl):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


@pytest.mark.parametrize("f", TREE_PROGRAMS, ids=_ids(TREE_PROGRAMS))
def test_tree_util_grad_matches_finite_differences(f):
    a = _tree(np.random.default_rng(1))
    _tree_close(astjax.grad(f)(a), numerical_grad(f, (a,)))


@pytest.mark.parametrize("f", TREE_PROGRAMS, ids=_ids(TREE_PROGRAMS))
def test_tree_util_jvp_and_second_order(f):
    rng = np.random.default_rng(2)
    a, t = _tree(rng), _tree(rng)
    eps = 1e-6

    def moved(s):
        return tree_util.tree_map(lambda p, q: p + s * q, a, t)
    value, slope = astjax.jvp(f, (a,), (t,))
    np.testing.assert_allclose(value, f(a), rtol=1e-12)
    np.testing.assert_allclose(slope, (f(moved(eps)) - f(moved(-eps))) / (2 * eps),
                               rtol=1e-6, atol=1e-8)
    if f is tree_sgd_step:
        return   # (its Hessian-vector product is a third derivative: append's rules stop
        #          at second order, a located DifferentiationError)
    # Hessian-vector product: forward over reverse, against differences of the gradient
    hvp = astjax.jvp(astjax.grad(f), (a,), (t,))[1]
    g_plus, g_minus = (numerical_grad(f, (moved(s),), eps=1e-5) for s in (1e-4, -1e-4))
    _tree_close(hvp, tree_util.tree_map(lambda p, m: (p - m) / 2e-4, g_plus, g_minus),
                rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("f", TREE_PROGRAMS, ids=_ids(TREE_PROGRAMS))
def test_tree_util_under_vmap_jit_and_vmap_of_grad(f):
    rng = np.random.default_rng(3)
    batch = _tree(rng, (3,))
    examples = [tree_util.tree_map(lambda leaf, i=i: leaf[i], batch) for i in range(3)]
    np.testing.assert_allclose(astjax.vmap(f)(batch), [f(e) for e in examples], rtol=1e-12)
    np.testing.assert_allclose(astjax.jit(astjax.vmap(f))(batch), [f(e) for e in examples],
                               rtol=1e-12)
    per_example = astjax.vmap(astjax.grad(f))(batch)
    want = [numerical_grad(f, (e,)) for e in examples]
    _tree_close(per_example, tree_util.tree_map(lambda *g: np.stack(g), *want))


def test_tree_util_is_leaf_is_refused_at_the_users_line():
    def f(a):
        return sum(np.sum(p) for p in tree_util.tree_leaves(a, is_leaf=lambda v: False))
    with pytest.raises(TransformError) as info:
        astjax.grad(f)({"w": np.ones(2)})
    assert info.value.location.filename == __file__ and "is_leaf" in str(info.value)


# ------------------------------------- unbatched steps inside per-example control flow

def _step_kernel(a, b):
    return np.tanh(a) * b + np.sin(a * b)


def map_of_unbatched_in_while(x, y):
    """lax.map over x (not batched) inside a while whose carry is: each step of x must
    be made per-example before it meets the batched y (it was left unbatched, and
    broadcast against the batch axis: wrong numbers or a crash)."""
    def body(c):
        o = lax.map(lambda xi: _step_kernel(xi, y), x)
        return c[0] + 1, c[1] * 0.5 + o

    return lax.while_loop(lambda c: c[0] < 2, body, (0, np.zeros((3, 3))))[1]


def map_of_unbatched_in_branch(x, y):
    if np.sum(y) > 0.0:
        return np.sum(lax.map(lambda xi: _step_kernel(xi, y), x), axis=0)
    return y * 2.0


@pytest.mark.parametrize("f", [map_of_unbatched_in_while, map_of_unbatched_in_branch],
                         ids=["while", "branch"])
@pytest.mark.parametrize("out_axes", [0, 1, -1])
def test_unbatched_steps_inside_batched_control_flow(f, out_axes):
    rng = np.random.default_rng(4)
    x = rng.uniform(-0.6, 0.6, (3, 3))
    yb = rng.uniform(-0.6, 0.6, (4, 3))
    got = astjax.vmap(f, in_axes=(None, 0), out_axes=out_axes)(x, yb)
    np.testing.assert_allclose(got, np.stack([f(x, y) for y in yb], axis=out_axes),
                               rtol=1e-12, atol=1e-12)

    def loss(a, b):
        return np.sum(np.sin(f(a, b)))
    g = astjax.vmap(astjax.grad(loss, argnums=(0, 1)), in_axes=(None, 0))(x, yb)
    want = [numerical_grad(loss, (x, y), argnums=(0, 1)) for y in yb]
    np.testing.assert_allclose(g[0], np.stack([w[0] for w in want]), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(g[1], np.stack([w[1] for w in want]), rtol=1e-6, atol=1e-8)


def positions_summed(x):
    return np.sum(np.where(x > 0.0)[0]) * 1.0


def positions_gathered(x):
    idx = np.where(x > 0.0)[0]
    return np.sum(x[idx] ** 2)


def positions_2d(x):
    r, c = np.where(x.reshape(-1, 1) * np.ones(3) > 0.0)
    return np.sum(r * 10 + c) * 1.0


POSITIONS = [positions_summed, positions_gathered, positions_2d]


@pytest.mark.parametrize("f", POSITIONS, ids=_ids(POSITIONS))
def test_where_of_a_condition_alone_is_refused_at_the_users_line(f):
    """``np.where(c)`` gives the positions where ``c`` holds, as many as there are
    per example: refused like ``np.nonzero`` (it used to reach NumPy's broadcast
    error, or ``len()`` of a 0-d array)."""
    with pytest.raises(TransformError) as info:
        astjax.vmap(f)(XB)
    err = info.value
    assert err.location is not None and err.location.function == f.__name__
    assert "np.where(condition)" in str(err) and "^" in str(err) and "hint:" in str(err)


def test_where_of_an_unbatched_condition_alone_runs():
    def f(x, c):
        return np.sum(x[np.where(c > 0.0)[0]] ** 2)
    c = np.array([1.0, -1.0, 2.0])
    out = astjax.vmap(f, in_axes=(0, None))(XB, c)
    np.testing.assert_allclose(out, [f(x, c) for x in XB], rtol=1e-12)
