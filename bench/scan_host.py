"""Host time per step of small-state scans under ``jit``: forward and ``grad``.

A ``lax.scan`` whose step fused into kernels runs in one compiled C loop under ``jit``
(``kernels/loops.py``), but reverse mode's forward and backward sweeps still run as
Python loops, one kernel call and the tape's bookkeeping per step.  With a small
state that host code is all the time; this prints it per step, beside ``jax.jit``
when JAX imports (the README's Known limits quote these figures).

Run: python bench/scan_host.py [--steps 2000]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import astjax  # noqa: E402
from astjax import lax  # noqa: E402


def shifted_scan(u, xs):
    """A 2-D state, a padded difference and a scale per step (the wave's pattern)."""
    def step(carry, x):
        past, present = carry
        new = np.pad((present[1:, :] - present[:-1, :]) / 3.0, ((0, 1), (0, 0))) * x + past
        return (present, new), new[0]
    return lax.scan(step, (u, u), xs)


def loss(u, xs):
    return np.sum(shifted_scan(u, xs)[1])


def best_seconds(fn, repeats=15):
    fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def jax_figures(u, xs):
    try:
        import jax
    except ImportError:
        return None
    jax.config.update("jax_platforms", "cpu")
    jnp = jax.numpy

    def jscan(u, xs):
        def step(carry, x):
            past, present = carry
            new = jnp.pad((present[1:, :] - present[:-1, :]) / 3.0, ((0, 1), (0, 0))) * x \
                + past
            return (present, new), new[0]
        return jax.lax.scan(step, (u, u), xs)

    fwd = jax.jit(jscan)
    grad = jax.jit(jax.grad(lambda u, xs: jnp.sum(jscan(u, xs)[1])))
    ju, jxs = jnp.asarray(u), jnp.asarray(xs)
    return (best_seconds(lambda: jax.block_until_ready(fwd(ju, jxs))),
            best_seconds(lambda: jax.block_until_ready(grad(ju, jxs))))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2000)
    args = ap.parse_args(argv)
    n = args.steps
    warnings.simplefilter("ignore", RuntimeWarning)
    print(f"scan of {n} steps, a carry of two float32 arrays, time per step:")
    for shape in [(4, 4), (32, 32)]:
        u = np.full(shape, 0.5, np.float32)
        xs = np.full(n, 0.1, np.float32)
        fwd = astjax.jit(shifted_scan)
        grad = astjax.jit(astjax.grad(loss))
        t_fwd = best_seconds(lambda: fwd(u, xs)) / n
        t_grad = best_seconds(lambda: grad(u, xs)) / n
        line = f"  state {shape}: jit forward {t_fwd * 1e6:.2f} us, jit(grad) {t_grad * 1e6:.2f} us"
        got = jax_figures(u, xs)
        if got is not None:
            line += (f"; jax.jit forward {got[0] / n * 1e6:.3f} us, "
                     f"jax.jit(grad) {got[1] / n * 1e6:.3f} us")
        print(line)


if __name__ == "__main__":
    main()
