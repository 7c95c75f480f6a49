"""Differentiated shard_map and pmap with PRNG key operands (issue 14).

A key is a uint32 array: as in JAX it carries no derivative, and the gradient flows to
the float parameters.  Dropout inside a data-parallel loss, with the key replicated
(``P()``, each shard folding in its ``axis_index``) or split per shard (``P("i")``),
through grad, value_and_grad, jit(grad), jvp, second order, a vmap inside the shard
and pmap, each against a single-device loop over the shards with the same keys and
against central finite differences.
"""
from __future__ import annotations

import numpy as np
import pytest

import astjax
from astjax import lax
from astjax import random as jr
from astjax.sharding import P

N = 4
RATE = 0.75
RNG = np.random.default_rng(5)
W = RNG.standard_normal((3, 2))
X = RNG.standard_normal((N * 2, 3))
Y = RNG.standard_normal((N * 2, 2))
KEY = jr.PRNGKey(11)
KEYS = jr.split(KEY, N)


@pytest.fixture(autouse=True)
def _devices(monkeypatch):
    monkeypatch.setenv("ASTJAX_NUM_CPU_DEVICES", str(N))


def mesh():
    return astjax.make_mesh((N,), ("i",))


def dropout(key, h):
    keep = jr.bernoulli(key, RATE, h.shape)
    return np.where(keep, h / RATE, 0.0)


def local_loss(w, key, x, y):
    """One shard's loss: dropout on the hidden layer with the shard's key."""
    h = np.tanh(x @ w)
    return np.sum((dropout(key, h) - y) ** 2)


def folded_loss(w, key, x, y):
    """Replicated key: each shard folds in its index (the usual pattern)."""
    k = jr.fold_in(key, lax.axis_index("i"))
    return lax.psum(local_loss(w, k, x, y), "i")


def split_loss(w, keys, x, y):
    """A key per shard, split outside: this shard's is row 0 of its (1, 2) block."""
    return lax.pmean(local_loss(w, keys[0], x, y), "i")


def ref_folded(w, key=KEY):
    return sum(local_loss(w, jr.fold_in(key, i), X[2 * i:2 * i + 2], Y[2 * i:2 * i + 2])
               for i in range(N))


def ref_split(w, keys=KEYS):
    return sum(local_loss(w, keys[i], X[2 * i:2 * i + 2], Y[2 * i:2 * i + 2])
               for i in range(N)) / N


def fd(fun, w, eps=1e-6):
    g = np.zeros_like(w)
    for i in np.ndindex(w.shape):
        wp, wm = w.copy(), w.copy()
        wp[i] += eps
        wm[i] -= eps
        g[i] = (fun(wp) - fun(wm)) / (2 * eps)
    return g


def sharded_folded():
    return astjax.shard_map(folded_loss, mesh=mesh(), in_specs=(P(), P(), P("i"), P("i")),
                            out_specs=P())


def sharded_split():
    return astjax.shard_map(split_loss, mesh=mesh(),
                            in_specs=(P(), P("i"), P("i"), P("i")), out_specs=P())


CASES = {"folded": (sharded_folded, KEY, ref_folded),
         "split": (sharded_split, KEYS, ref_split)}


@pytest.mark.parametrize("case", CASES)
def test_values_match_the_single_device_loop(case):
    make, key, ref = CASES[case]
    np.testing.assert_allclose(make()(W, key, X, Y), ref(W), rtol=1e-13)


@pytest.mark.parametrize("case", CASES)
def test_grad_flows_to_the_parameters_not_the_key(case):
    make, key, ref = CASES[case]
    sm = make()
    g = astjax.grad(sm)(W, key, X, Y)
    # the single-device gradient with the same keys, by astjax and by differences
    g_ref = astjax.grad(ref)(W)
    np.testing.assert_allclose(g, g_ref, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(g, fd(ref, W), rtol=1e-6, atol=1e-9)
    # every float argument at once; the key stays out of argnums, as in JAX
    gw, gx, gy = astjax.grad(sm, argnums=(0, 2, 3))(W, key, X, Y)
    np.testing.assert_allclose(gx, fd(lambda x: sm(W, key, x, Y), X), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(gy, fd(lambda y: sm(W, key, X, y), Y), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("case", CASES)
def test_value_and_grad_and_jit_of_grad(case):
    make, key, ref = CASES[case]
    sm = make()
    v, g = astjax.value_and_grad(sm)(W, key, X, Y)
    np.testing.assert_allclose(v, ref(W), rtol=1e-13)
    np.testing.assert_allclose(g, astjax.grad(ref)(W), rtol=1e-12, atol=1e-14)
    gj = astjax.jit(astjax.grad(sm))(W, key, X, Y)
    np.testing.assert_allclose(gj, g, rtol=1e-13, atol=1e-15)
    vj, gj = astjax.jit(astjax.value_and_grad(sm))(W, key, X, Y)
    np.testing.assert_allclose(vj, v, rtol=1e-13)
    np.testing.assert_allclose(gj, g, rtol=1e-13, atol=1e-15)
    # a new key gives new masks (the key is an operand, not a constant of the trace)
    key2 = jr.PRNGKey(12) if case == "folded" else jr.split(jr.PRNGKey(12), N)
    g2 = astjax.jit(astjax.grad(sm))(W, key2, X, Y)
    np.testing.assert_allclose(g2, astjax.grad(lambda w: ref(w, key2))(W), rtol=1e-12,
                               atol=1e-14)
    assert not np.allclose(g2, g)


def test_grad_of_a_loss_closing_over_the_sharded_call():
    sm = sharded_folded()

    def loss(w, key):
        return sm(w, key, X, Y) * 0.5 + np.sum(w ** 2)
    g = astjax.grad(loss)(W, KEY)
    np.testing.assert_allclose(g, fd(lambda w: loss(w, KEY), W), rtol=1e-6, atol=1e-9)
    # a key made inside the differentiated function
    g = astjax.grad(lambda w: sm(w, jr.PRNGKey(11), X, Y))(W)
    np.testing.assert_allclose(g, astjax.grad(ref_folded)(W), rtol=1e-12, atol=1e-14)


def test_jvp_and_second_order_with_a_key():
    sm = sharded_folded()
    t = RNG.standard_normal(W.shape)
    out, tan = astjax.jvp(lambda w: sm(w, KEY, X, Y), (W,), (t,))
    np.testing.assert_allclose(out, ref_folded(W), rtol=1e-13)
    np.testing.assert_allclose(tan, np.sum(astjax.grad(ref_folded)(W) * t), rtol=1e-10)
    # jvp of grad and grad of grad (a Hessian-vector product two ways)
    hv = astjax.jvp(lambda w: astjax.grad(sm)(w, KEY, X, Y), (W,), (t,))[1]
    hv_ref = fd(lambda w: np.sum(astjax.grad(ref_folded)(w) * t), W)
    np.testing.assert_allclose(hv, hv_ref, rtol=1e-5, atol=1e-8)
    hv2 = astjax.grad(lambda w: np.sum(astjax.grad(sm)(w, KEY, X, Y) * t))(W)
    np.testing.assert_allclose(hv2, hv, rtol=1e-10, atol=1e-12)


def test_vjp_gives_zero_cotangents_for_keys():
    sm = sharded_folded()
    out, pull = astjax.vjp(sm, W, KEY, X, Y)
    gw, gk, gx, gy = pull(1.0)
    np.testing.assert_allclose(gw, astjax.grad(ref_folded)(W), rtol=1e-12, atol=1e-14)
    assert np.shape(gk) == KEY.shape and not np.any(gk)


def test_vmap_inside_the_shard_with_keys():
    def per_example(w, key, x, y):
        return np.sum((dropout(key, np.tanh(x @ w)) - y) ** 2)

    def shard(w, key, x, y):             # x: (2, 3): one key per example of the shard
        ks = jr.split(jr.fold_in(key, lax.axis_index("i")), x.shape[0])
        losses = astjax.vmap(per_example, in_axes=(None, 0, 0, 0))(w, ks, x, y)
        return lax.psum(np.sum(losses), "i")
    sm = astjax.shard_map(shard, mesh=mesh(), in_specs=(P(), P(), P("i"), P("i")),
                          out_specs=P())

    def ref(w):
        total = 0.0
        for i in range(N):
            ks = jr.split(jr.fold_in(KEY, i), 2)
            for j in range(2):
                r = 2 * i + j
                total += per_example(w, ks[j], X[r], Y[r])
        return total
    np.testing.assert_allclose(sm(W, KEY, X, Y), ref(W), rtol=1e-13)
    np.testing.assert_allclose(astjax.grad(sm)(W, KEY, X, Y), fd(ref, W), rtol=1e-6,
                               atol=1e-9)
    np.testing.assert_allclose(astjax.jit(astjax.grad(sm))(W, KEY, X, Y), fd(ref, W),
                               rtol=1e-6, atol=1e-9)


def test_vmap_of_the_gradient_over_keys():
    sm = sharded_folded()
    keys = jr.split(jr.PRNGKey(3), 3)
    gs = astjax.vmap(astjax.grad(sm), in_axes=(None, 0, None, None))(W, keys, X, Y)
    for k, g in zip(keys, gs):
        np.testing.assert_allclose(g, astjax.grad(lambda w: ref_folded(w, k))(W),
                                   rtol=1e-12, atol=1e-14)


def test_pmap_with_keys_differentiates():
    xs, ys = X.reshape(N, 2, 3), Y.reshape(N, 2, 2)

    def per_device(w, key, x, y):
        return lax.psum(local_loss(w, jr.fold_in(key, lax.axis_index("d")), x, y), "d")
    pm = astjax.pmap(per_device, axis_name="d", in_axes=(None, None, 0, 0))
    out = pm(W, KEY, xs, ys)
    np.testing.assert_allclose(out, np.full(N, ref_folded(W)), rtol=1e-13)
    g = astjax.grad(lambda w: pm(w, KEY, xs, ys)[0])(W)
    np.testing.assert_allclose(g, fd(ref_folded, W), rtol=1e-6, atol=1e-9)
    # keys split per device, mapped like the data
    pk = astjax.pmap(lambda w, k, x, y: lax.pmean(local_loss(w, k, x, y), "d"),
                     axis_name="d", in_axes=(None, 0, 0, 0))
    v, g = astjax.value_and_grad(lambda w: pk(w, KEYS, xs, ys)[0])(W)
    np.testing.assert_allclose(v, ref_split(W), rtol=1e-13)
    np.testing.assert_allclose(g, astjax.grad(ref_split)(W), rtol=1e-12, atol=1e-14)
    gj = astjax.jit(astjax.grad(lambda w: pk(w, KEYS, xs, ys)[0]))(W)
    np.testing.assert_allclose(gj, g, rtol=1e-13, atol=1e-15)


def test_per_shard_gradient_with_a_key_inside_check_vma_false():
    # the data-parallel step: grad inside the shard, pmean'd by hand
    def step(w, key, x, y):
        k = jr.fold_in(key, lax.axis_index("i"))
        return lax.pmean(astjax.grad(local_loss)(w, k, x, y), "i")
    sm = astjax.shard_map(step, mesh=mesh(), in_specs=(P(), P(), P("i"), P("i")),
                          out_specs=P(), check_vma=False)
    np.testing.assert_allclose(sm(W, KEY, X, Y), astjax.grad(ref_folded)(W) / N,
                               rtol=1e-12, atol=1e-14)


def test_integer_labels_and_integer_outputs():
    labels = np.array([0, 1, 1, 0, 1, 0, 0, 1])

    def xent(w, key, x, lab):          # int labels split like the data
        logits = dropout(jr.fold_in(key, lax.axis_index("i")), x @ w)
        logp = logits - np.log(np.sum(np.exp(logits), axis=1, keepdims=True))
        loss = -lax.psum(np.sum(logp[np.arange(x.shape[0]), lab]), "i")
        return loss, lax.psum(np.sum(np.argmax(logits, axis=1) == lab), "i")
    sm = astjax.shard_map(xent, mesh=mesh(), in_specs=(P(), P(), P("i"), P("i")),
                          out_specs=(P(), P()))

    def ref(w):
        total, hits = 0.0, 0
        for i in range(N):
            logits = dropout(jr.fold_in(KEY, i), X[2 * i:2 * i + 2] @ w)
            logp = logits - np.log(np.sum(np.exp(logits), axis=1, keepdims=True))
            lab = labels[2 * i:2 * i + 2]
            total -= np.sum(logp[np.arange(2), lab])
            hits += np.sum(np.argmax(logits, axis=1) == lab)
        return total, hits
    (loss, hits), g = astjax.value_and_grad(sm, has_aux=True)(W, KEY, X, labels)
    np.testing.assert_allclose(loss, ref(W)[0], rtol=1e-13)
    assert hits == ref(W)[1]
    np.testing.assert_allclose(g, fd(lambda w: ref(w)[0], W), rtol=1e-6, atol=1e-9)


def test_grad_allow_int():
    # what the per-shard pullback uses: JAX's allow_int, zero for integer inputs
    def f(w, k):
        return np.sum(w * jr.normal(k, (3,)))
    gw, gk = astjax.grad(f, argnums=(0, 1), allow_int=True)(np.ones(3), KEY)
    np.testing.assert_allclose(gw, jr.normal(KEY, (3,)))
    assert np.shape(gk) == (2,) and not np.any(gk)
    with pytest.raises(TypeError, match="uint32"):
        astjax.grad(f, argnums=(0, 1))(np.ones(3), KEY)
    v, (gw2, _) = astjax.value_and_grad(f, argnums=(0, 1), allow_int=True)(np.ones(3), KEY)
    np.testing.assert_allclose(gw2, gw)
