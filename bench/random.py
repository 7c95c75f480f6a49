"""1M float32 normals: astjax.random (eager and jitted; the compiled threefry kernel
against the NumPy path) and, when JAX is installed, jax.jit(jax.random.normal); then
gamma draws in float16 and float32 against jax.jit(jax.random.gamma).

Prints best-of-repeats times measured in the same run and checks that every path
gives the same bits (gamma: how many of its draws differ from JAX's, 0 expected;
float32 needs the compiled rsqrt and a CPU of the vendor JAX ran on, which it is here).
"""
from __future__ import annotations

import importlib.util
import os
import sys

# this file's name shadows the standard library's ``random`` for anything imported
# from its folder: take the folder off the path, load common.py by its location
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
sys.path.insert(0, os.path.dirname(_HERE))     # this checkout's astjax
_spec = importlib.util.spec_from_file_location("bench_common",
                                               os.path.join(_HERE, "common.py"))
_common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_common)
best_time, ms = _common.best_time, _common.ms

import numpy as np  # noqa: E402

import astjax  # noqa: E402
from astjax import random as jr  # noqa: E402

N = 1_000_000


def draw(key):
    return jr.normal(key, (N,))


def main():
    key = jr.PRNGKey(0)
    jitted = astjax.jit(draw)
    rows = []
    jr.USE_KERNEL = False
    ref = draw(key)
    rows.append(("astjax NumPy path", best_time(draw, key, repeat=3)))
    jr.USE_KERNEL = True
    assert np.array_equal(draw(key), ref) and np.array_equal(jitted(key), ref)
    rows.append(("astjax eager (threefry kernel)", best_time(draw, key)))
    rows.append(("astjax.jit (threefry kernel)", best_time(jitted, key)))
    try:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        import jax
        jf = jax.jit(lambda k: jax.random.normal(k, (N,)))
        jk = jax.random.PRNGKey(0)
        got = np.asarray(jf(jk))
        assert np.array_equal(got, ref), f"JAX differs at {np.sum(got != ref)} places"
        rows.append(("jax.jit(jax.random.normal)",
                     best_time(lambda k: jf(k).block_until_ready(), jk)))
    except ImportError:
        pass
    print(f"{N:,} float32 normals (same bits on every path)")
    for name, t in rows:
        print(f"  {name:32s} {ms(t)}")
    gamma_rows()


G_SHAPE = (100, 200)


def gamma_rows():
    """gamma: Marsaglia-Tsang's rejection loop, masked over all draws at once."""
    alphas = np.geomspace(0.01, 1000, G_SHAPE[1])
    key = jr.PRNGKey(3)
    try:
        import jax
        jk = jax.random.PRNGKey(3)
    except ImportError:
        jax = None
    print(f"{np.prod(G_SHAPE):,} gamma draws, alphas 0.01 .. 1000")
    for dt in (np.float16, np.float32):
        a = alphas.astype(dt)
        ours = jr.gamma(key, a, G_SHAPE, dt)
        t = best_time(jr.gamma, key, a, G_SHAPE, dt, repeat=3)
        line = f"  {np.dtype(dt).name:8s} astjax {ms(t)}"
        if jax is not None:
            jf = jax.jit(lambda k, a, dt=dt: jax.random.gamma(k, a, G_SHAPE, dt))
            theirs = np.asarray(jf(jk, a))
            t = best_time(lambda k, a: jf(k, a).block_until_ready(), jk, a, repeat=3)
            line += f"   jax.jit {ms(t)}   differing draws: {np.sum(ours != theirs)}"
        print(line)


if __name__ == "__main__":
    main()
