"""Record jax.random's float16 draws and XLA's float16 / denormal elementary functions
for tests/test_random_half.py and tests/test_xlamath.py (needs JAX; the tests do not).

    python tests/gen_half_fixtures.py       # -> tests/fixtures/half_xla.npz

XLA's CPU code computes half precision one operation at a time (each widened to
float32 and rounded back; no fused multiply-adds), its transcendental functions in
float32, and its float32/float64 code with denormals read and flushed as zero.  None
of the recorded values depends on the CPU's approximate rsqrt (gamma's ``1/3 *
rsqrt(d)`` rounded to half precision is the same on every CPU: tests/test_xlamath.py),
so the tests ask for bit equality everywhere.

Each sampler case is a JSON spec (function, key index, keyword arguments, where
``"@name"`` names an array stored in the .npz) and JAX's output under ``out:<id>``.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jax.random as jr  # noqa: E402

RNG = np.random.default_rng(20261127)
F16 = np.float16
CASES: list = []
ARRAYS: dict = {}


def keys():
    out = [np.asarray(jr.PRNGKey(s)) for s in (0, 1, 42, 2**31 - 1)]
    out += [np.asarray(k) for k in jr.split(jr.PRNGKey(2027), 8)]
    out += [RNG.integers(0, 2**32, 2, dtype=np.uint64).astype(np.uint32) for _ in range(8)]
    return out


def case(fn, key_index, **kw):
    cid = f"{len(CASES):03d}_{fn}"
    spec = {"id": cid, "fn": fn, "key": key_index, "kwargs": {}}
    for name, v in kw.items():
        if isinstance(v, np.generic):
            v = np.asarray(v)
        if isinstance(v, np.ndarray):
            ARRAYS[f"arg:{cid}:{name}"] = v
            v = f"@{name}"
        elif isinstance(v, tuple):
            v = {"tuple": list(v)}
        spec["kwargs"][name] = v
    CASES.append(spec)


def plan(nkeys):
    alphas = np.concatenate([[0.001, 0.01, 0.05, 0.1], RNG.uniform(0.1, 1, 20), [1.0, 1.0],
                             RNG.uniform(1, 20, 24), np.exp(RNG.uniform(3, 10, 14))]).astype(F16)
    for k in range(nkeys):
        case("gamma", k, a=alphas, shape=(4, alphas.size), dtype="float16")
        case("gamma", k, a=alphas[k * 3 % alphas.size], shape=(257,), dtype="float16")
        case("gamma", k, a=alphas[:6].reshape(2, 3), dtype="float16")
        case("uniform", k, shape=(200,), dtype="float16")
        case("uniform", k, shape=(200,), dtype="float16", minval=-2.0, maxval=5.0)
        case("uniform", k, shape=(5, 8), dtype="float16",
             minval=np.linspace(-3, 1, 8).astype(F16), maxval=F16(3.7))
        case("normal", k, shape=(200,), dtype="float16")
        case("exponential", k, shape=(200,), dtype="float16")
        case("truncated_normal", k, lower=-1.0, upper=2.0, shape=(200,), dtype="float16")
        case("truncated_normal", k, lower=np.array([-3, -0.5, 0, 1, 2.5], F16),
             upper=F16(3.0), shape=(8, 5), dtype="float16")
        p = RNG.uniform(0.05, 0.95, (5, 7)).astype(F16)
        case("bernoulli", k, p=p)
        case("bernoulli", k, p=p, shape=(3, 5, 7), mode="high")
        logits = RNG.standard_normal((4, 6)).astype(F16)
        case("categorical", k, logits=logits)
        case("categorical", k, logits=logits, axis=0, shape=(3, 6))
        case("categorical", k, logits=logits, shape=(3, 4), replace=False)
        pv = RNG.uniform(0.1, 1, 7).astype(F16)
        case("choice", k, a=7, shape=(20,), p=pv / pv.sum())
        case("choice", k, a=7, shape=(4,), replace=False, p=pv / pv.sum())


def kwargs_of(spec, arrays):
    out = {}
    for name, v in spec["kwargs"].items():
        if isinstance(v, str) and v.startswith("@"):
            v = arrays[f"arg:{spec['id']}:{v[1:]}"]
        elif isinstance(v, dict) and "tuple" in v:
            v = tuple(v["tuple"])
        out[name] = v
    return out


def elementary():
    """XLA's log, log1p, erf_inv, erf, rsqrt of every third float16 (every one was
    checked once); pow of float16 pairs; float32/float64 denormal operands (a multiple
    of 16 of them: XLA's float32 log of a denormal differs in its loop's scalar
    remainder) and pow's results below the normal range."""
    out = {}
    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(F16)
    third = every[::3]
    funcs = {"log": jnp.log, "log1p": jnp.log1p, "erf_inv": jax.lax.erf_inv,
             "erf": jax.lax.erf, "rsqrt": jax.lax.rsqrt}
    for name, f in funcs.items():
        out[f"{name}:float16"] = np.asarray(jax.jit(f)(third))
    finite = every[np.isfinite(every)]
    base = RNG.choice(finite[(finite > 0) & (finite <= 1)], 5000)
    expo = (F16(1) / RNG.choice(finite[(finite > 2e-5) & (finite < 1)], 5000)).astype(F16)
    anyx, anyy = RNG.choice(finite, 5000), RNG.choice(finite, 5000)
    pairs = np.stack([np.concatenate([base, anyx]), np.concatenate([expo, anyy])])
    out["power:float16:x"] = pairs
    out["power:float16:y"] = np.asarray(jax.jit(jnp.power)(*pairs))
    for dt, ut in ((np.float32, np.uint32), (np.float64, np.uint64)):
        tag = np.dtype(dt).name
        nmant = np.finfo(dt).nmant
        d = RNG.integers(1, 1 << nmant, 1000, dtype=np.uint64).astype(ut).view(dt)
        tiny = np.finfo(dt).tiny
        x = np.concatenate([d, -d, np.array([0.0, -0.0, tiny, -tiny, tiny * 1.5, 1e-30,
                                             1.0, 0.5], dt)])
        x = x[:len(x) // 16 * 16]
        out[f"denormal:{tag}:x"] = x
        for name, f in funcs.items():
            if name != "rsqrt":
                out[f"denormal:{name}:{tag}"] = np.asarray(jax.jit(f)(x))
        # results below the normal range from normal operands: flushed
        small = np.sqrt(tiny) * RNG.uniform(0.01, 2, 1000).astype(dt)
        out[f"flush:power:{tag}:x"] = small
        out[f"flush:power:{tag}"] = np.asarray(jax.jit(jnp.power)(small, dt(2)))
    return out


def main():
    ks = keys()
    plan(len(ks))
    arrays = dict(ARRAYS)
    arrays["keys"] = np.stack(ks)
    for spec in CASES:
        fn = getattr(jr, spec["fn"])
        arrays[f"out:{spec['id']}"] = np.asarray(fn(ks[spec["key"]], **kwargs_of(spec, arrays)))
    jax.config.update("jax_enable_x64", True)     # (after the draws: 32-bit mode's)
    arrays.update(elementary())
    arrays["cases"] = np.array(json.dumps(CASES))
    arrays["jax"] = np.array(jax.__version__)
    path = Path(__file__).parent / "fixtures" / "half_xla.npz"
    np.savez_compressed(path, **arrays)
    print(f"{len(CASES)} cases, {len(arrays)} arrays -> {path}")


if __name__ == "__main__":
    main()
