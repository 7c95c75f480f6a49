"""Keys under sharding: ``fold_in(key, lax.axis_index(name))`` inside shard_map and
pmap gives every shard its own stream, equal to drawing with the fold_in'ed keys
outside; a key passed replicated is the same on every shard; gradients of
reparameterized draws per shard."""
from __future__ import annotations

import numpy as np
import pytest

import astjax
from astjax import lax
from astjax import random as jr
from astjax.sharding import P

N = 4


@pytest.fixture(autouse=True)
def _devices(monkeypatch):
    monkeypatch.setenv("ASTJAX_NUM_CPU_DEVICES", str(N))


def per_shard_noise(key, x):
    k = jr.fold_in(key, lax.axis_index("i"))
    return x + jr.normal(k, x.shape, np.float64)


def shared_noise(key, x):
    return x + jr.normal(key, x.shape, np.float64)


def test_shard_map_fold_in_axis_index_gives_each_shard_its_stream():
    key = jr.PRNGKey(42)
    x = np.arange(N * 3.0).reshape(N * 3)
    mesh = astjax.make_mesh((N,), ("i",))
    out = astjax.shard_map(per_shard_noise, mesh=mesh, in_specs=(P(), P("i")),
                           out_specs=P("i"))(key, x)
    ref = np.concatenate([x[3 * i:3 * i + 3] + jr.normal(jr.fold_in(key, i), (3,), np.float64)
                          for i in range(N)])
    np.testing.assert_array_equal(out, ref)
    # the streams differ between shards; a replicated key without fold_in does not
    noise = (out - x).reshape(N, 3)
    assert len({tuple(r) for r in noise}) == N
    same = astjax.shard_map(shared_noise, mesh=mesh, in_specs=(P(), P("i")),
                            out_specs=P("i"))(key, x)
    assert np.allclose((same - x).reshape(N, 3), (same - x)[:3])


def test_pmap_fold_in_axis_index():
    key = jr.PRNGKey(7)
    x = np.zeros((N, 5))
    out = astjax.pmap(per_shard_noise, axis_name="i", in_axes=(None, 0))(key, x)
    ref = np.stack([jr.normal(jr.fold_in(key, i), (5,), np.float64) for i in range(N)])
    np.testing.assert_array_equal(out, ref)
    # a key per device (split outside) is the other common pattern
    keys = jr.split(key, N)
    out = astjax.pmap(shared_noise, axis_name="i")(keys, x)
    np.testing.assert_array_equal(out, np.stack([jr.normal(k, (5,), np.float64)
                                                 for k in keys]))


def noisy_loss(w, key, x):
    k = jr.fold_in(key, lax.axis_index("i"))
    z = x * w + 0.1 * jr.normal(k, x.shape, np.float64)
    return lax.psum(np.sum(z ** 2), "i")


def test_gradient_of_per_shard_draws():
    key = jr.PRNGKey(3)
    x = np.linspace(-1.0, 1.0, N * 2)
    mesh = astjax.make_mesh((N,), ("i",))
    # the key is closed over: a uint32 operand of a differentiated shard_map is refused
    # by its rule today (astjax/sharding differentiates every operand)
    sharded = astjax.shard_map(lambda w, x: noisy_loss(w, key, x), mesh=mesh,
                               in_specs=(P(), P("i")), out_specs=P())
    g = astjax.grad(lambda w: np.sum(sharded(w, x)))(0.5)

    def reference(w):
        total = 0.0
        for i in range(N):
            xi = x[2 * i:2 * i + 2]
            z = xi * w + 0.1 * jr.normal(jr.fold_in(key, i), (2,), np.float64)
            total += np.sum(z ** 2)
        return total

    fd = (reference(0.5 + 1e-6) - reference(0.5 - 1e-6)) / 2e-6
    assert g == pytest.approx(fd, rel=1e-6)
