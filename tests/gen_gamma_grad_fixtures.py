"""Record JAX's derivatives of gamma samples in their shape ``a`` (implicit
reparameterization, ``random_gamma_grad``) for tests/test_random_grads.py (needs JAX;
the tests do not).

    python tests/gen_gamma_grad_fixtures.py     # -> tests/fixtures/gamma_grad.npz
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
RNG = np.random.default_rng(7)


def main():
    out = {}
    alphas = np.array([0.05, 0.3, 0.9, 1.0, 1.7, 4.0, 25.0, 300.0])
    weights = RNG.standard_normal(alphas.shape)
    for seed in range(6):
        key = jax.random.PRNGKey(seed)

        def loss(a, key=key):
            return (weights * jax.random.gamma(key, a, dtype=np.float64)).sum()

        out[f"{seed}:sample"] = np.asarray(jax.random.gamma(key, alphas, dtype=np.float64))
        out[f"{seed}:grad"] = np.asarray(jax.grad(loss)(alphas))
    a = np.exp(RNG.uniform(-3, 5, 400))
    x = np.asarray(jax.random.gamma(jax.random.PRNGKey(99), a, dtype=np.float64))
    out["random_gamma_grad:a"] = a
    out["random_gamma_grad:x"] = x
    out["random_gamma_grad:y"] = np.asarray(jax.lax.random_gamma_grad(a, x))
    path = Path(__file__).parent / "fixtures" / "gamma_grad.npz"
    np.savez_compressed(path, alphas=alphas, weights=weights, **out)
    print(f"{len(out)} arrays -> {path}")


if __name__ == "__main__":
    main()
