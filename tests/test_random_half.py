"""astjax.random in float16 against jax.random's draws (tests/fixtures/half_xla.npz,
written by tests/gen_half_fixtures.py with JAX 0.10 on CPU): identical, on every x86
CPU without AVX-512 FP16 (one with it computes half precision natively, where LLVM
may fuse multiply-adds: not seen yet).

XLA computes half precision one operation at a time, each widened to float32 and
rounded back, with no fused multiply-add: uniform's ``u * (maxval - minval) + minval``
and gamma's ``1 + x * c`` round twice (one fma gave 20 % of bounded uniforms, half of
the truncated normals and 6 % of the gamma draws an ulp away).  Its transcendental
functions run in float32 (astjax.xlamath's), and gamma's ``rsqrt`` rounded to half
precision does not depend on the CPU's approximate instruction.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from astjax import random as jr
from astjax import xlamath
from astjax.errors import ArgumentError

with np.load(Path(__file__).parent / "fixtures" / "half_xla.npz") as _data:
    DATA = dict(_data)
CASES = json.loads(str(DATA["cases"]))
FUNCTIONS = sorted({c["fn"] for c in CASES})


def _kwargs(case):
    out = {}
    for name, v in case["kwargs"].items():
        if isinstance(v, str) and v.startswith("@"):
            v = DATA[f"arg:{case['id']}:{v[1:]}"]
        elif isinstance(v, dict) and "tuple" in v:
            v = tuple(v["tuple"])
        out[name] = v
    return out


def _check(case):
    key = DATA["keys"][case["key"]]
    ref = DATA[f"out:{case['id']}"]
    out = np.asarray(getattr(jr, case["fn"])(key, **_kwargs(case)))
    where = f"{case['id']} {case['fn']}({case['kwargs']}) with key {key}"
    assert out.shape == ref.shape and out.dtype == ref.dtype, (
        f"{where}: {out.shape} {out.dtype}, JAX gives {ref.shape} {ref.dtype}")
    differ = ~((out == ref) | (np.isnan(out) & np.isnan(ref)))
    assert not differ.any(), (f"{where}: {differ.sum()} of {out.size} differ, e.g. "
                              f"{out[differ][:3]} where JAX gives {ref[differ][:3]}")


def test_fixture_covers_every_float_sampler():
    assert set(FUNCTIONS) >= {"gamma", "uniform", "normal", "exponential",
                              "truncated_normal", "bernoulli", "categorical", "choice"}
    assert DATA["keys"].shape == (20, 2)
    gammas = [c for c in CASES if c["fn"] == "gamma"]
    assert len(gammas) == 60 and all(c["kwargs"]["dtype"] == "float16" for c in gammas)
    alphas = DATA[f"arg:{gammas[0]['id']}:a"]
    assert alphas.min() <= 0.001 and alphas.max() > 10_000 and (alphas == 1).any()


@pytest.mark.parametrize("fn", FUNCTIONS)
def test_same_numbers_as_jax(fn):
    for case in CASES:
        if case["fn"] == fn:
            _check(case)


def test_gamma_does_not_need_the_rsqrt_kernel(monkeypatch):
    # the NumPy-only path (no compiler, another CPU) gives the same float16 draws
    monkeypatch.setitem(xlamath._rsqrt_fns, "float32", "no compiler (test)")
    for case in [c for c in CASES if c["fn"] == "gamma"][:12]:
        _check(case)


def test_gamma_keeps_half_precision_denormals():
    # float16's denormals are float32 normals where XLA computes: not flushed
    case = next(c for c in CASES if c["fn"] == "gamma")      # the vector of alphas
    ref = DATA[f"out:{case['id']}"]
    assert ((ref > 0) & (ref < np.finfo(np.float16).tiny)).any()
    _check(case)


def test_half_precision_uniform_rounds_twice():
    # u * (maxval - minval) + minval: a rounded product, then a rounded sum
    k = np.array([0, 3], np.uint32)
    out = jr.uniform(k, (4000,), np.float16, -2.0, 5.0)
    u = jr.uniform(k, (4000,), np.float16)
    np.testing.assert_array_equal(out, np.maximum(np.float16(-2),
                                                  u * np.float16(7) + np.float16(-2)))
    once = (u.astype(np.float64) * 7 - 2).astype(np.float16)
    assert (once != out).mean() > 0.05      # (what a fused multiply-add would give)


@pytest.mark.parametrize("method", ["cholesky", "svd", "eigh"])
def test_multivariate_normal_refuses_half_precision_as_jax(method):
    # JAX has no float16 factorization on CPU (NotImplementedError): a clear error here
    cov, mean = np.eye(3, dtype=np.float16) * 2, np.zeros(3, np.float16)
    with pytest.raises(ArgumentError, match="float16 is not supported"):
        jr.multivariate_normal(np.array([0, 1], np.uint32), mean, cov, (2,), method=method)
    with pytest.raises(ArgumentError, match="float16"):
        jr.multivariate_normal(np.array([0, 1], np.uint32), mean.astype(np.float32),
                               cov.astype(np.float32), dtype=np.float16)


@pytest.mark.parametrize("fn", ["gamma", "uniform", "truncated_normal"])
def test_jit_and_vmap_give_jaxs_numbers(fn):
    # the same draws through a transformation: jit of one key, vmap over several
    import astjax
    cases = [c for c in CASES if c["fn"] == fn][:3]
    for case in cases:
        kw = _kwargs(case)
        same_kw = [c for c in CASES if c["fn"] == fn and c["kwargs"] == case["kwargs"]
                   and all(np.array_equal(_kwargs(c)[n], v) for n, v in kw.items()
                           if isinstance(v, np.ndarray))][:4]
        keys = np.stack([DATA["keys"][c["key"]] for c in same_kw])
        refs = np.stack([DATA[f"out:{c['id']}"] for c in same_kw])

        draw = {"gamma": lambda k: jr.gamma(k, **kw),
                "uniform": lambda k: jr.uniform(k, **kw),
                "truncated_normal": lambda k: jr.truncated_normal(k, **kw)}[fn]
        np.testing.assert_array_equal(astjax.jit(draw)(keys[0]), refs[0])
        if len(same_kw) > 1:
            np.testing.assert_array_equal(astjax.vmap(draw)(keys), refs)
