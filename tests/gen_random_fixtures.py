"""Record jax.random's outputs as fixtures for tests/test_random.py (needs JAX; the tests
do not).

    python tests/gen_random_fixtures.py            # 32-bit cases  -> random_x32.*
    JAX_ENABLE_X64=1 python tests/gen_random_fixtures.py   # float64 -> random_x64.*

Each case is a JSON spec (function, keyword arguments, where ``"@name"`` names an array
stored in the .npz) and the reference output stored in the .npz under ``out:<id>``.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

import jax
import jax.random as jr

X64 = bool(jax.config.jax_enable_x64)
HERE = Path(__file__).parent / "fixtures"
RNG = np.random.default_rng(20261125)

SEEDS = [0, 1, 42, 7, 123456789, 2**31 - 1, -1, 2**32 + 5]


def keys():
    """Key data: seeds, split and fold_in children, and arbitrary uint32 pairs."""
    out = [np.asarray(jr.PRNGKey(s)) for s in SEEDS]
    base = jr.PRNGKey(2026)
    out += [np.asarray(k) for k in jr.split(base, 3)]
    out += [np.asarray(jr.fold_in(base, d)) for d in (0, 5, 2**31 + 3)]
    out += [RNG.integers(0, 2**32, 2, dtype=np.uint64).astype(np.uint32) for _ in range(4)]
    return out


CASES: list = []
ARRAYS: dict = {}


def case(fn, key_index, **kw):
    cid = f"{len(CASES):04d}_{fn}"
    spec = {"id": cid, "fn": fn, "key": key_index, "kwargs": {}}
    for name, v in kw.items():
        if isinstance(v, np.ndarray) and not X64:   # what JAX's 32-bit mode computes with
            v = v.astype({"f": np.float32, "i": np.int32}.get(v.dtype.kind, v.dtype))
        if X64 and isinstance(v, float) and name in ("p", "a", "lower", "upper"):
            v = np.array(v)                          # a float64 parameter, not a weak float
        if isinstance(v, np.ndarray):
            ARRAYS[f"arg:{cid}:{name}"] = v
            v = f"@{name}"
        elif isinstance(v, tuple):
            v = {"tuple": list(v)}
        spec["kwargs"][name] = v
    CASES.append(spec)


def plan(nkeys):
    shapes = [(), (1,), (5,), (3, 4), (2, 3, 5), (1000,), (7, 1, 3)]
    fdt = ["float64"] if X64 else ["float32", "float16"]
    idt = ["int64", "uint32"] if X64 else ["int32", "int8", "uint8", "int16", "uint16"]
    udt = ["uint64"] if X64 else ["uint32", "uint8", "uint16"]
    for k in range(nkeys):
        for num in (2, 3, (2, 3)):
            case("split", k, num=num)
        for data in (0, 1, 17, 2**32 - 1):
            case("fold_in", k, data=data)
        for s in shapes[k % 3: k % 3 + 4]:
            for dt in udt:
                case("bits", k, shape=s, dtype=dt)
            for dt in fdt:
                case("uniform", k, shape=s, dtype=dt)
                case("normal", k, shape=s, dtype=dt)
                case("exponential", k, shape=s, dtype=dt)
            for dt in idt:
                case("randint", k, shape=s, minval=-3 if dt[0] == "i" else 0, maxval=10,
                     dtype=dt)
        case("uniform", k, shape=(4, 3), dtype=fdt[0], minval=-2.0, maxval=5.0)
        case("uniform", k, shape=(4, 3), dtype=fdt[0],
             minval=np.linspace(-1, 0, 3).astype(fdt[0]), maxval=3.0)
        case("randint", k, shape=(6,), minval=0, maxval=2**31 - 1, dtype=idt[0])
        case("randint", k, shape=(2, 3), minval=np.array([0, 5, -4]),
             maxval=np.array([3, 9, 100]), dtype=idt[0])
        if not X64:
            case("randint", k, shape=(8,), minval=0, maxval=256, dtype="uint8")
            case("randint", k, shape=(8,), minval=5, maxval=5, dtype="int32")
        p = RNG.uniform(0.05, 0.95, (3, 4)).astype(fdt[0])
        case("bernoulli", k, p=0.3)
        case("bernoulli", k, p=0.7, shape=(50,))
        case("bernoulli", k, p=p)
        case("bernoulli", k, p=p, shape=(2, 3, 4), mode="high")
        for n in () if X64 else (5, 37, 1000):
            case("permutation", k, x=n)
        case("permutation", k, x=np.arange(12.0).reshape(4, 3), axis=0)
        case("permutation", k, x=np.arange(12.0).reshape(4, 3), axis=1)
        case("permutation", k, x=np.arange(12).reshape(3, 4), axis=1, independent=True)
        if not X64:   # these draw default-dtype integers: int64 in JAX's 64-bit mode
            case("choice", k, a=10, shape=(4,))
            case("choice", k, a=10, shape=(2, 3), replace=False)
            case("choice", k, a=np.arange(20.0).reshape(5, 4), shape=(3,), axis=1)
            pv = RNG.uniform(0.1, 1, 6).astype(fdt[0])
            pv /= pv.sum()
            case("choice", k, a=6, shape=(7,), p=pv)
            case("choice", k, a=6, shape=(4,), replace=False, p=pv)
            logits = RNG.standard_normal((3, 5)).astype(fdt[0])
            case("categorical", k, logits=logits)
            case("categorical", k, logits=logits, axis=0)
            case("categorical", k, logits=logits, shape=(4, 3))
            case("categorical", k, logits=logits, shape=(2, 3), replace=False)
        case("truncated_normal", k, lower=-1.0, upper=2.0, shape=(10,), dtype=fdt[0])
        case("truncated_normal", k, lower=np.array([-3.0, 0.0, 1.0]), upper=2.5,
             dtype=fdt[0])
        case("gamma", k, a=np.array([0.3, 1.0, 2.5, 7.0]), dtype=fdt[0])
        case("gamma", k, a=1.5, shape=(3, 2), dtype=fdt[0])
        m = RNG.standard_normal((3, 3))
        cov = (m @ m.T + 3 * np.eye(3)).astype(fdt[0])
        mean = RNG.standard_normal(3).astype(fdt[0])
        case("multivariate_normal", k, mean=mean, cov=cov)
        case("multivariate_normal", k, mean=mean, cov=cov, shape=(4,))
    case("normal", 0, shape=(20_000,), dtype=fdt[0])
    case("uniform", 1, shape=(100, 100), dtype=fdt[0])


def kwargs_of(spec, arrays):
    out = {}
    for name, v in spec["kwargs"].items():
        if isinstance(v, str) and v.startswith("@"):
            v = arrays[f"arg:{spec['id']}:{v[1:]}"]
        elif isinstance(v, dict) and "tuple" in v:
            v = tuple(v["tuple"])
        out[name] = v
    return out


def main():
    ks = keys()
    plan(len(ks))
    tag = "x64" if X64 else "x32"
    arrays = dict(ARRAYS)
    arrays["keys"] = np.stack(ks)
    for spec in CASES:
        fn = getattr(jr, spec["fn"])
        out = fn(ks[spec["key"]], **kwargs_of(spec, arrays))
        arrays[f"out:{spec['id']}"] = np.asarray(out)
    HERE.mkdir(exist_ok=True)
    np.savez_compressed(HERE / f"random_{tag}.npz", **arrays)
    (HERE / f"random_{tag}.json").write_text(json.dumps(
        {"jax": jax.__version__, "x64": X64,
         "threefry_partitionable": bool(jax.config.jax_threefry_partitionable),
         "cases": CASES}, indent=0))
    print(f"{len(CASES)} cases -> {HERE}/random_{tag}.*", file=sys.stderr)


if __name__ == "__main__":
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    main()
