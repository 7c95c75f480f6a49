"""Record XLA's rsqrt and jax.random.gamma draws (float32, float64) on this CPU for
tests/test_xlamath.py and tests/test_random.py (needs JAX; the tests do not).

XLA computes float32 rsqrt with the CPU's approximate instruction (its bits differ
between vendors) and float64 rsqrt with AVX-512's ``vrsqrt14pd`` where the CPU has it
(a division elsewhere), so the file records the CPU's vendor, model and whether it has
AVX-512F: the tests ask for bit equality of float32 only on a CPU of the same vendor,
of float64 only on one with the same AVX-512 answer.

    python tests/gen_rsqrt_fixtures.py [NAME]    # -> tests/fixtures/NAME.npz

rsqrt_xla.npz: an AMD EPYC with AVX-512; rsqrt_xla_avx2.npz: an AMD EPYC without
(AVX2 + FMA).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

jax.config.update("jax_enable_x64", True)

RNG = np.random.default_rng(20261125)


def cpu_field(name):
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith(name):
                return line.split(":", 1)[1].strip()
    return ""


def rsqrt_inputs():
    """Every 512th mantissa of [1, 4) (both exponent parities: the estimate's table
    depends on the mantissa and the exponent's parity), gamma's d range, edges."""
    lo = np.float32(1.0).view(np.uint32)
    grid = np.arange(lo, lo + (2 << 23), 512, dtype=np.uint32).view(np.float32)
    d = np.exp(RNG.uniform(np.log(2 / 3), np.log(1e6), 20_000)).astype(np.float32)
    edges = np.array([2 / 3, 1.0, 0.0, np.inf, 3e38, 1e-30, -1.0], np.float32)
    return np.concatenate([grid, d, edges])


def rsqrt_inputs64():
    """A spread over float64's range, gamma's d range, edges (a denormal: XLA reads
    it as zero)."""
    wide = np.exp(RNG.uniform(-700, 700, 4000))
    d = np.exp(RNG.uniform(np.log(2 / 3), np.log(1e6), 4000))
    return np.concatenate([wide, d, [2 / 3, 1.0, 0.0, np.inf, 1e-310, -1.0]])


def main():
    out = {"vendor": np.array(cpu_field("vendor_id")),
           "model": np.array(cpu_field("model name")), "jax": np.array(jax.__version__),
           "avx512f": np.array("avx512f" in cpu_field("flags").split())}
    x = rsqrt_inputs()
    out["rsqrt:x"] = x
    out["rsqrt:y"] = np.asarray(jax.jit(jax.lax.rsqrt)(x))
    x64 = rsqrt_inputs64()
    out["rsqrt64:x"] = x64
    out["rsqrt64:y"] = np.asarray(jax.jit(jax.lax.rsqrt)(x64))
    # gamma: many keys, scalar and array shapes, alphas below and above 1
    alphas = np.concatenate([RNG.uniform(0.01, 1, 40), RNG.uniform(1, 20, 60),
                             np.exp(RNG.uniform(3, 12, 28))]).astype(np.float32)
    out["gamma:alpha"] = alphas
    out["gamma:keys"] = np.asarray(jax.random.split(jax.random.PRNGKey(7), 12))
    for i, k in enumerate(out["gamma:keys"]):
        out[f"gamma:{i}:vector"] = np.asarray(
            jax.random.gamma(k, alphas, (3, 128), jnp.float32))
        out[f"gamma:{i}:scalar"] = np.asarray(
            jax.random.gamma(k, jnp.float32(alphas[i * 10]), (257,), jnp.float32))
        out[f"gamma64:{i}:vector"] = np.asarray(
            jax.random.gamma(k, alphas.astype(np.float64), (2, 128), jnp.float64))
    # small alphas: draws below float32's normal range, which XLA flushes to zero
    out["gamma:tiny:alpha"] = np.float32([0.01, 0.02, 0.03])
    out["gamma:tiny"] = np.asarray(jax.random.gamma(
        jax.random.PRNGKey(11), out["gamma:tiny:alpha"], (4000, 3), jnp.float32))
    # and float64's (alphas ~0.001: below 2.2e-308, flushed too)
    out["gamma64:tiny:alpha"] = np.array([0.001, 0.002, 0.003])
    out["gamma64:tiny"] = np.asarray(jax.random.gamma(
        jax.random.PRNGKey(11), out["gamma64:tiny:alpha"], (2000, 3), jnp.float64))
    name = sys.argv[1] if len(sys.argv) > 1 else "rsqrt_xla"
    path = Path(__file__).parent / "fixtures" / f"{name}.npz"
    np.savez_compressed(path, **out)
    print(f"{len(out)} arrays -> {path}")


if __name__ == "__main__":
    main()
