"""astjax.random against recorded jax.random outputs, and keys under every transformation.

The fixtures (tests/fixtures/random_x32.*, random_x64.*; written by
tests/gen_random_fixtures.py with JAX 0.10, threefry2x32, partitionable) hold JAX's
outputs for 18 keys (seeds, split and fold_in children, arbitrary key data) and every
function with several shapes and dtypes.  Integer, boolean and bit-built results must
be identical, and so must the samplers that go through XLA's transcendental functions
(astjax.xlamath reproduces them): normal, exponential, truncated_normal and
multivariate_normal (its Cholesky factor is SciPy's LAPACK, which jaxlib calls: exact
where SciPy is installed).  gamma too where astjax.xlamath.rsqrt compiles on a CPU like
the recording's: XLA computes its ``1/3 / sqrt(d)`` with the CPU's approximate rsqrt
instruction (float32: the vendor's bits; float64: AVX-512's, or a division without
it); elsewhere it must agree to an ulp or two and be mostly identical.
tests/fixtures/rsqrt_xla*.npz (tests/gen_rsqrt_fixtures.py, an AMD EPYC with AVX-512
and one without) add gamma draws for 12 more keys (float32 and float64), scalar and
array alphas from 0.01 to 1.6e5.  Half precision: tests/test_random_half.py.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pytest

import astjax
from astjax import lax, xlamath
from astjax import random as jr
from astjax.errors import ArgumentError, DifferentiationError

from conftest import check_grad, numerical_grad

FIXTURES = Path(__file__).parent / "fixtures"
try:
    import scipy.linalg  # noqa: F401
    HAVE_SCIPY = True
except ImportError:
    HAVE_SCIPY = False


def _load_npz(path):
    with np.load(path) as data:
        return dict(data)


GAMMA = {p.stem: _load_npz(p) for p in sorted(FIXTURES.glob("rsqrt_xla*.npz"))}
GAMMA32 = GAMMA["rsqrt_xla"]       # (the fixture test_same_numbers_as_jax's gating reads)


def _exact_gamma(rec, dt):
    """gamma is bit for bit where XLA's rsqrt is ours: the recording's vendor (float32),
    its AVX-512 answer (float64; rsqrt_xla.npz predates the field: with AVX-512)."""
    if not xlamath.rsqrt_exact_available(dt):
        return False
    if np.dtype(dt) == np.float32:
        return xlamath.cpu_vendor() == str(rec["vendor"])
    return xlamath.cpu_has_avx512() == bool(rec.get("avx512f", True))


EXACT_GAMMA, EXACT_GAMMA64 = (_exact_gamma(GAMMA32, dt) for dt in (np.float32, np.float64))
# samplers that cannot be bit-identical everywhere: (rtol float32, rtol float64), None
# where they are here
APPROXIMATE = {"gamma": (None if EXACT_GAMMA else 2e-6, None if EXACT_GAMMA64 else 1e-13)}
if not HAVE_SCIPY:
    APPROXIMATE["multivariate_normal"] = (1e-5, 1e-12)


def _load(tag):
    spec = json.loads((FIXTURES / f"random_{tag}.json").read_text())
    with np.load(FIXTURES / f"random_{tag}.npz") as data:
        arrays = dict(data)
    return spec, arrays


_DATA = {tag: _load(tag) for tag in ("x32", "x64")}


def _kwargs(case, arrays):
    out = {}
    for name, v in case["kwargs"].items():
        if isinstance(v, str) and v.startswith("@"):
            v = arrays[f"arg:{case['id']}:{v[1:]}"]
        elif isinstance(v, dict) and "tuple" in v:
            v = tuple(v["tuple"])
        out[name] = v
    return out


def _groups():
    out = []
    for tag, (spec, _) in _DATA.items():
        for fn in sorted({c["fn"] for c in spec["cases"]}):
            out.append((tag, fn))
    return out


def test_fixtures_are_jax_defaults():
    for tag, (spec, arrays) in _DATA.items():
        assert spec["threefry_partitionable"] is True
        assert spec["x64"] is (tag == "x64")
        assert len(spec["cases"]) > 800
        assert arrays["keys"].shape == (18, 2) and arrays["keys"].dtype == np.uint32


@pytest.mark.parametrize("tag, fn", _groups())
def test_same_numbers_as_jax(tag, fn):
    spec, arrays = _DATA[tag]
    cases = [c for c in spec["cases"] if c["fn"] == fn]
    exact = total = 0
    for case in cases:
        key = arrays["keys"][case["key"]]
        ref = arrays[f"out:{case['id']}"]
        out = getattr(jr, fn)(key, **_kwargs(case, arrays))
        where = f"{case['id']} {fn}({case['kwargs']}) with key {key}"
        assert isinstance(out, (np.ndarray, np.generic)), where
        out = np.asarray(out)
        assert out.shape == ref.shape and out.dtype == ref.dtype, (
            f"{where}: {out.shape} {out.dtype}, JAX gives {ref.shape} {ref.dtype}")
        rtol = APPROXIMATE.get(fn, (None, None))[ref.dtype == np.float64]
        if rtol is not None:
            # a Cholesky factor a last bit off moves each draw by about an ulp of its
            # largest term (L @ z cancels): an absolute tolerance on the draws' scale
            scale = float(np.max(np.abs(ref))) if fn == "multivariate_normal" else 1e-3
            np.testing.assert_allclose(out, ref, rtol=rtol, atol=rtol * scale, err_msg=where)
            exact += int(np.sum(out == ref))
            total += out.size
        else:
            np.testing.assert_array_equal(out, ref, err_msg=where)
    if total:   # the same algorithm, not merely the same distribution (another
        # algorithm gives no identical floats; NumPy's Cholesky, without SciPy's
        # LAPACK, rounds some factors differently: 234 of 270 identical here)
        need = 0.5 if fn == "multivariate_normal" and not HAVE_SCIPY else 0.9
        assert exact / total > need, f"{fn}: only {exact}/{total} values identical to JAX"


GAMMA_CASES = [(name, i) for name in GAMMA for i in range(12)]


@pytest.mark.parametrize("fixture, i", GAMMA_CASES)
def test_gamma_float32_same_numbers_as_jax(fixture, i):
    rec = GAMMA[fixture]
    k, alphas = rec["gamma:keys"][i], rec["gamma:alpha"]
    draws = [(jr.gamma(k, alphas, (3, 128)), rec[f"gamma:{i}:vector"]),
             (jr.gamma(k, alphas[i * 10], (257,)), rec[f"gamma:{i}:scalar"])]
    for out, ref in draws:
        assert out.dtype == np.float32 and out.shape == ref.shape
        if _exact_gamma(rec, np.float32):
            np.testing.assert_array_equal(out, ref)
        else:
            np.testing.assert_allclose(out, ref, rtol=2e-6, atol=1e-30)
            assert np.mean(out == ref) > 0.9


@pytest.mark.parametrize("fixture, i", GAMMA_CASES)
def test_gamma_float64_same_numbers_as_jax(fixture, i):
    rec = GAMMA[fixture]
    k, alphas = rec["gamma:keys"][i], rec["gamma:alpha"].astype(np.float64)
    out, ref = jr.gamma(k, alphas, (2, 128), np.float64), rec[f"gamma64:{i}:vector"]
    assert out.dtype == np.float64 and out.shape == ref.shape
    if _exact_gamma(rec, np.float64):
        np.testing.assert_array_equal(out, ref)
    else:
        np.testing.assert_allclose(out, ref, rtol=1e-13, atol=1e-300)
        assert np.mean(out == ref) > 0.9


@pytest.mark.parametrize("fixture", sorted(GAMMA))
def test_gamma_float32_flushes_denormals_as_xla(fixture):
    # alphas ~0.01 draw values below float32's normal range: XLA's CPU gives 0
    rec = GAMMA[fixture]
    a, ref = rec["gamma:tiny:alpha"], rec["gamma:tiny"]
    out = jr.gamma(np.array([0, 11], np.uint32), a, (4000, 3))
    assert not ((out > 0) & (out < np.finfo(np.float32).tiny)).any()
    assert (ref == 0).sum() > 1000
    if _exact_gamma(rec, np.float32):
        np.testing.assert_array_equal(out, ref)
    else:
        np.testing.assert_allclose(out, ref, rtol=2e-6, atol=np.finfo(np.float32).tiny)


@pytest.mark.parametrize("fixture", [n for n in sorted(GAMMA) if "gamma64:tiny" in GAMMA[n]])
def test_gamma_float64_flushes_denormals_as_xla(fixture):
    # alphas ~0.001 draw values below float64's normal range: 0 as XLA's CPU gives them
    rec = GAMMA[fixture]
    a, ref = rec["gamma64:tiny:alpha"], rec["gamma64:tiny"]
    out = jr.gamma(np.array([0, 11], np.uint32), a, (2000, 3), np.float64)
    assert not ((out > 0) & (out < np.finfo(np.float64).tiny)).any()
    assert (ref == 0).sum() > 1000
    if _exact_gamma(rec, np.float64):
        np.testing.assert_array_equal(out, ref)
    else:
        np.testing.assert_allclose(out, ref, rtol=1e-13, atol=np.finfo(np.float64).tiny)


def test_gamma_rsqrt_fallback_is_an_ulp_away(monkeypatch):
    # without the compiled rsqrt, gamma stays within an ulp or two of JAX's draws
    monkeypatch.setitem(xlamath._rsqrt_fns, "float32", "no compiler (test)")
    k, alphas = GAMMA32["gamma:keys"][0], GAMMA32["gamma:alpha"]
    out, ref = jr.gamma(k, alphas, (3, 128)), GAMMA32["gamma:0:vector"]
    np.testing.assert_allclose(out, ref, rtol=2e-6, atol=1e-30)
    assert 0.5 < np.mean(out == ref) < 1           # (pure NumPy: the same everywhere)


def test_half_precision_normal_is_identical():
    spec, arrays = _DATA["x32"]
    cases = [c for c in spec["cases"] if c["fn"] == "normal" and
             c["kwargs"].get("dtype") == "float16"]
    assert cases
    for case in cases:
        out = jr.normal(arrays["keys"][case["key"]], **_kwargs(case, arrays))
        np.testing.assert_array_equal(out, arrays[f"out:{case['id']}"])


# ------------------------------------------------------------------------- the API

def test_keys_and_default_dtypes():
    k = jr.PRNGKey(42)
    assert k.dtype == np.uint32 and k.shape == (2,) and list(k) == [0, 42]
    np.testing.assert_array_equal(jr.key(42), k)
    np.testing.assert_array_equal(jr.key_data(k), k)
    np.testing.assert_array_equal(jr.wrap_key_data(jr.split(k, 3)), jr.split(k, 3))
    assert jr.uniform(k).dtype == np.float32 and jr.normal(k, (2,)).dtype == np.float32
    assert jr.randint(k, (2,), 0, 5).dtype == np.int32 and jr.bits(k).dtype == np.uint32
    assert jr.bernoulli(k, 0.5, (3,)).dtype == np.bool_
    assert jr.split(k, (2, 3)).shape == (2, 3, 2)
    assert not np.array_equal(jr.fold_in(k, 1), jr.fold_in(k, 2))


@pytest.mark.parametrize("call, error", [
    (lambda: jr.normal(jr.split(jr.PRNGKey(0), 3), (2,)), ArgumentError),
    (lambda: jr.normal(np.zeros(2), (2,)), ArgumentError),
    (lambda: jr.PRNGKey(1.5), TypeError),
    (lambda: jr.PRNGKey(np.arange(3)), TypeError),
    (lambda: jr.fold_in(jr.PRNGKey(0), np.arange(3)), TypeError),
    (lambda: jr.uniform(jr.PRNGKey(0), (2,), np.int32), ValueError),
    (lambda: jr.bits(jr.PRNGKey(0), (2,), np.float32), ValueError),
    (lambda: jr.bernoulli(jr.PRNGKey(0), 0.5, mode="middle"), ValueError),
    (lambda: jr.choice(jr.PRNGKey(0), 3, (5,), replace=False), ValueError),
    (lambda: jr.uniform(jr.PRNGKey(0), (3,), minval=np.zeros(4)), ValueError),
    (lambda: jr.truncated_normal(jr.PRNGKey(0), np.zeros(3), 1.0, (2,)), ValueError),
])
def test_bad_input_is_refused(call, error):
    with pytest.raises(error):
        call()


def test_statistics_are_sane():
    k = jr.PRNGKey(7)
    x = jr.normal(k, (200_000,), np.float64)
    assert abs(x.mean()) < 0.01 and abs(x.std() - 1) < 0.01
    u = jr.uniform(k, (100_000,), minval=-2.0, maxval=3.0)
    assert u.min() >= -2 and u.max() < 3 and abs(u.mean() - 0.5) < 0.02
    g = jr.gamma(k, np.full(50_000, 2.5))
    assert abs(g.mean() - 2.5) < 0.05
    t = jr.truncated_normal(k, -0.5, 1.0, (10_000,))
    assert t.min() > -0.5 and t.max() < 1.0
    assert sorted(jr.permutation(k, 100).tolist()) == list(range(100))


# ----------------------------------------------------- programs transformed with keys

def reparam_loss(mu, sigma, key):
    z = jr.normal(key, (6,), np.float64)
    x = mu + sigma * z
    return np.sum(np.sin(x) * x)


def draw(key, scale):
    k1, k2 = jr.split(key)
    a = jr.normal(k1, (3,))
    b = jr.uniform(k2, (3,), minval=-1.0, maxval=scale)
    return a * b + jr.fold_in(key, 3)[0] % 7


def many(key, x):
    ka, kb, kc, kd = jr.split(key, 4)
    return (jr.bits(ka, (2,)), jr.randint(kb, (3,), 0, 9), jr.exponential(kc, (2,)),
            jr.bernoulli(kd, 0.3, (4,)), jr.categorical(ka, x), jr.permutation(kb, 5),
            jr.gamma(kc, 2.0, (2,)), jr.truncated_normal(kd, -1.0, 1.0, (2,)),
            jr.choice(ka, 6, (3,)), jr.permutation(kc, x, axis=0))


def scan_step(carry, x):
    key, acc = carry
    key, sub = jr.split(key)
    acc = acc + x * jr.normal(sub, (), np.float64)
    return (key, acc), acc


def scanned(key, xs):
    (key, acc), ys = lax.scan(scan_step, (key, 0.0), xs)
    return acc, ys


def fori_body(i, carry):
    key, total = carry
    return key, total + jr.uniform(jr.fold_in(key, i), (), np.float64)


def fori(key, n):
    return lax.fori_loop(0, n, fori_body, (key, 0.0))[1]


def scan_loss(w, key, xs):
    (key, acc), ys = lax.scan(scan_step, (key, w), xs * w)
    return acc + np.sum(ys ** 2)


def uniform_loss(lo, hi, key):
    u = jr.uniform(key, (5,), np.float64, minval=lo, maxval=hi)
    return np.sum(u ** 2)


def perm_loss(x, key):
    return np.sum(jr.permutation(key, x, axis=1) * np.arange(12.0).reshape(3, 4))


def gamma_loss(a, key):
    return np.sum(jr.gamma(key, a, (3,), np.float64))


def tn_loss(lo, key):
    return np.sum(jr.truncated_normal(key, lo, 2.0, (3,), np.float64))


def seeded(seed, x):
    return x * jr.normal(jr.PRNGKey(seed), (2,))


def dropout(params, x, key):
    w = params[0]
    keep = jr.bernoulli(key, 0.8, x.shape)
    h = np.where(keep, x / 0.8, 0.0)
    return np.sum(np.tanh(h @ w))


def test_grad_of_reparameterized_sample_matches_finite_differences():
    key = jr.PRNGKey(0)
    g = check_grad(reparam_loss, (0.3, 1.7, key), argnums=(0, 1))
    z = jr.normal(key, (6,), np.float64)
    x = 0.3 + 1.7 * z
    slope = np.cos(x) * x + np.sin(x)
    np.testing.assert_allclose(g, (np.sum(slope), np.sum(slope * z)), rtol=1e-12)


@pytest.mark.parametrize("lo, hi", [(0.5, 2.0), (np.array([0.0, 1.0, -1.0, 0.5, 0.2]), 3.0)])
def test_grad_through_uniform_bounds(lo, hi):
    check_grad(uniform_loss, (lo, hi, jr.PRNGKey(4)), argnums=(0, 1))
    # forward mode agrees
    v = np.ones_like(np.asarray(lo, float)) if np.ndim(lo) else 1.0
    f = functools.partial(uniform_loss, key=jr.PRNGKey(4))
    _, t = astjax.jvp(f, (lo, hi), (v, 0.0))
    fd = numerical_grad(uniform_loss, (lo, hi, jr.PRNGKey(4)), 0)
    np.testing.assert_allclose(t, np.sum(fd * v), rtol=1e-6)


def test_grad_through_permutation_and_its_second_order():
    x = np.random.default_rng(0).standard_normal((3, 4))
    key = jr.PRNGKey(5)
    g = check_grad(perm_loss, (x, key))
    # the gradient is the weights permuted back: perm_loss is linear in x
    ref = jr.permutation_vjp(np.arange(12.0).reshape(3, 4), key, x, 1)
    np.testing.assert_allclose(g, ref)
    h = astjax.jacfwd(astjax.grad(perm_loss))(x, key)
    assert np.allclose(h, 0.0)


def choice_loss(p, key):
    return np.sum(jr.choice(key, 3, (4,), p=p))


@pytest.mark.parametrize("fn, arg", [(choice_loss, np.array([0.2, 0.3, 0.5]))])
def test_samplers_without_a_parameter_rule_are_refused(fn, arg):
    with pytest.raises(DifferentiationError) as info:
        astjax.grad(fn)(arg, jr.PRNGKey(0))
    text = str(info.value)
    assert "test_random.py" in text and "random sample" in text


@pytest.mark.parametrize("lo", [-1.0, np.array([-2.0, -0.5, 0.3])])
def test_grad_through_truncated_normal_bounds(lo):
    check_grad(tn_loss, (lo, jr.PRNGKey(2)), rtol=1e-6)
    check_grad(tn_upper_loss, (1.5, jr.PRNGKey(2)), rtol=1e-6)
    keys = jr.split(jr.PRNGKey(2), 3)
    gv = astjax.vmap(astjax.grad(tn_loss), in_axes=(None, 0))(lo, keys)
    for i, k in enumerate(keys):
        np.testing.assert_allclose(gv[i], astjax.grad(tn_loss)(lo, k), rtol=1e-12)


def tn_upper_loss(hi, key):
    return np.sum(jr.truncated_normal(key, -0.5, hi, (4,), np.float64) ** 2)


def test_no_derivative_with_respect_to_a_key():
    with pytest.raises(TypeError):
        astjax.grad(reparam_loss, argnums=2)(0.3, 1.7, jr.PRNGKey(0))


def test_vmap_over_keys_matches_a_loop():
    keys = jr.split(jr.PRNGKey(1), 5)
    out = astjax.vmap(draw, in_axes=(0, None))(keys, 2.0)
    ref = np.stack([draw(k, 2.0) for k in keys])
    np.testing.assert_array_equal(out, ref)
    scales = np.linspace(1.0, 2.0, 5)
    out = astjax.vmap(draw, in_axes=(None, 0))(keys[0], scales)
    np.testing.assert_array_equal(out, np.stack([draw(keys[0], s) for s in scales]))
    out = astjax.vmap(draw)(keys, scales)
    np.testing.assert_array_equal(out, np.stack([draw(k, s) for k, s in zip(keys, scales)]))


def test_vmap_of_every_sampler_matches_a_loop():
    keys = jr.split(jr.PRNGKey(2), 3)
    x = np.random.default_rng(1).standard_normal((4, 5))
    out = astjax.vmap(many, in_axes=(0, None))(keys, x)
    ref = [many(k, x) for k in keys]
    for i, leaf in enumerate(out):
        np.testing.assert_array_equal(leaf, np.stack([r[i] for r in ref]), err_msg=str(i))
    xs = np.stack([x, x + 1, x * 2])
    out = astjax.vmap(many)(keys, xs)
    for i, leaf in enumerate(out):
        ref_i = np.stack([many(k, xx)[i] for k, xx in zip(keys, xs)])
        np.testing.assert_array_equal(leaf, ref_i, err_msg=str(i))


def test_vmap_is_vectorized_not_a_loop():
    src = astjax.make_source(astjax.vmap(draw, in_axes=(0, None)))(jr.split(jr.PRNGKey(0), 3),
                                                                   1.0)
    assert "jr.normal_batched(" in src and "for " not in src


def test_vmap_over_seeds():
    out = astjax.vmap(seeded, in_axes=(0, None))(np.arange(4), 2.0)
    np.testing.assert_array_equal(out, np.stack([seeded(s, 2.0) for s in range(4)]))


def test_keys_through_scan_and_fori_loop_carries():
    key = jr.PRNGKey(3)
    xs = np.linspace(0.0, 1.0, 6)
    acc, ys = scanned(key, xs)
    for f in (astjax.jit(scanned),):
        a2, y2 = f(key, xs)
        np.testing.assert_array_equal(a2, acc)
        np.testing.assert_array_equal(y2, ys)
    keys = jr.split(key, 3)
    acc_b, ys_b = astjax.vmap(scanned, in_axes=(0, None))(keys, xs)
    for i, k in enumerate(keys):
        a, y = scanned(k, xs)
        np.testing.assert_allclose(acc_b[i], a, rtol=1e-15)
        np.testing.assert_allclose(ys_b[i], y, rtol=1e-15)
    total = fori(key, 5)
    assert total == pytest.approx(sum(float(jr.uniform(jr.fold_in(key, i), (), np.float64))
                                      for i in range(5)), rel=1e-15)
    assert astjax.jit(fori)(key, 5) == total
    check_grad(scan_loss, (0.7, key, xs))


def test_jit_equals_eager():
    key = jr.PRNGKey(9)
    x = np.random.default_rng(2).standard_normal((4, 5))
    for a, b in zip(astjax.jit(many)(key, x), many(key, x)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(astjax.jit(draw)(key, 2.0), draw(key, 2.0))
    # the same key gives the same numbers: a jitted draw is a pure function of the key
    np.testing.assert_array_equal(astjax.jit(draw)(key, 2.0), astjax.jit(draw)(key, 2.0))


def test_per_example_gradients_with_per_example_keys():
    keys = jr.split(jr.PRNGKey(6), 4)
    gv = astjax.vmap(astjax.grad(reparam_loss, argnums=(0, 1)), in_axes=(None, None, 0))(
        0.3, 1.7, keys)
    for i, k in enumerate(keys):
        g = astjax.grad(reparam_loss, argnums=(0, 1))(0.3, 1.7, k)
        np.testing.assert_allclose([gv[0][i], gv[1][i]], g, rtol=1e-12)


def batch_loss(mu, keys):
    return np.sum(astjax.vmap(reparam_loss, in_axes=(None, None, 0))(mu, 1.2, keys))


def test_grad_of_vmapped_sampling():
    keys = jr.split(jr.PRNGKey(8), 3)
    check_grad(batch_loss, (0.4, keys))


def test_dropout_gradient():
    rng = np.random.default_rng(3)
    params = [rng.standard_normal((5, 2))]
    x = rng.standard_normal((4, 5))
    check_grad(dropout, (params, x, jr.PRNGKey(1)))
    gs = astjax.vmap(astjax.grad(dropout), in_axes=(None, None, 0))(
        params, x, jr.split(jr.PRNGKey(1), 3))
    for i, k in enumerate(jr.split(jr.PRNGKey(1), 3)):
        np.testing.assert_allclose(gs[0][i], astjax.grad(dropout)(params, x, k)[0],
                                   rtol=1e-12)
