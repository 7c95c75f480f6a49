"""Record XLA's CPU elementary functions (through JAX) for tests/test_xlamath.py (needs
JAX; the tests do not).

    python tests/gen_xlamath_fixtures.py     # -> tests/fixtures/xlamath.npz
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

jax.config.update("jax_enable_x64", True)
RNG = np.random.default_rng(20261125)
N = 1000


def inputs(dt):
    """Arguments for each function: a spread over its domain plus edge values."""
    u = RNG.uniform(0, 1, N).astype(dt)
    wide = np.exp(RNG.uniform(-80, 80, N)).astype(dt)
    edges = np.array([0.0, 1.0, 0.5, 1e-30, np.inf], dt)
    return {
        "log": np.concatenate([u, wide, edges]),
        "log1p": np.concatenate([-u, u * 0.8 - 0.4, wide, edges]),
        "erf_inv": np.concatenate([u * 2 - 1, 1 - u * 1e-6, np.array([-1.0, 1.0, 0.0], dt)]),
        "erf": np.concatenate([RNG.standard_normal(N).astype(dt) * 2,
                               np.array([0.0, 4.0, -5.0], dt)]),
    }


def main():
    funcs = {"log": jnp.log, "log1p": jnp.log1p, "erf_inv": jax.lax.erf_inv,
             "erf": jax.lax.erf}
    out = {}
    for dt in (np.float32, np.float64):
        tag = np.dtype(dt).name
        for name, x in inputs(dt).items():
            out[f"{name}:{tag}:x"] = x
            out[f"{name}:{tag}:y"] = np.asarray(jax.jit(funcs[name])(x))
        a = RNG.uniform(0, 1, N).astype(dt)
        b = (1 / RNG.uniform(0.01, 1, N)).astype(dt)
        out[f"power:{tag}:x"] = np.stack([a, b])
        out[f"power:{tag}:y"] = np.asarray(jax.jit(jnp.power)(a, b))
        c = RNG.standard_normal((3, N)).astype(dt)
        out[f"fma:{tag}:x"] = c
        out[f"fma:{tag}:y"] = np.asarray(jax.jit(lambda p, q, r: p * q + r)(*c))
    path = Path(__file__).parent / "fixtures" / "xlamath.npz"
    np.savez_compressed(path, jax=np.array(jax.__version__), **out)
    print(f"{len(out)} arrays -> {path}")


if __name__ == "__main__":
    main()
