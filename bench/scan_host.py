"""Host time per step of small-state scans under ``jit``: forward and ``grad``.

A ``lax.scan`` whose step fused into kernels runs in one compiled C loop under ``jit``
(``kernels/loops.py``), and so do reverse mode's forward and backward sweeps where
their steps are kernel calls and tape plumbing (``kernels/sweeps.py``); what is left
per step is the tape's bookkeeping in Python.  With a small state that host code is
all the time; this prints it per step, beside ``jax.jit`` when JAX imports (the
README's Known limits quote these figures), an RNN's ``jit(grad)`` beside
hand-written NumPy backprop measured in the same run, and two loops each with its
loops compiled and, in the same run, left to Python (the drivers' ``MIN_STEPS`` out of
reach): a scan that reduces its state to a scalar each step (an energy), and a
``fori_loop`` forced by its step index; and a Python loop (a matrix product in its
body) passing its index to a kernel, with one call plan for every index value and,
in the same run, a plan per value.

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
from astjax.tree_util import tree_leaves  # noqa: E402


def shifted_scan(u, xs):
    """A 2-D state, a padded difference and a scale per step (the wave's pattern)."""
    def step(carry, x):
        past, present = carry
        new = np.pad((present[1:, :] - present[:-1, :]) / 3.0, ((0, 1), (0, 0))) * x + past
        return (present, new), new[0]
    return lax.scan(step, (u, u), xs)


def loss(u, xs):
    return np.sum(shifted_scan(u, xs)[1])


def rnn_loss(w, xs):
    """An RNN over a sequence, as JAX users write it: the carry read, then its name
    assigned again."""
    def step(h, x):
        h = np.tanh(h * w + x)
        return h, h * h
    h, ys = lax.scan(step, np.zeros_like(w), xs)
    return np.sum(ys) + np.sum(h)


def rnn_by_hand(w, xs):
    """The same gradient, hand-written: the forward loop keeps each h, the backward
    loop runs in reverse (what a NumPy user writes without autodiff)."""
    hs = [np.zeros_like(w)]
    for x in xs:
        hs.append(np.tanh(hs[-1] * w + x))
    dh = np.ones_like(w)            # d(sum(h_last))
    dw = np.zeros_like(w)
    for t in range(len(xs), 0, -1):
        h = hs[t]
        dh = dh + 2.0 * h           # d(sum(h * h)) of this step's output
        da = dh * (1.0 - h * h)
        dw += da * hs[t - 1]
        dh = da * w
    return dw


def rnn_figures(n):
    """(astjax jit(grad), hand-written NumPy, jax.jit(grad) or None) per step."""
    w = np.linspace(0.1, 0.9, 64)
    xs = np.random.default_rng(0).standard_normal((n, 64)) * 0.1
    grad = astjax.jit(astjax.grad(rnn_loss))
    np.testing.assert_allclose(grad(w, xs), rnn_by_hand(w, xs), rtol=1e-10, atol=1e-12)
    t_grad = best_seconds(lambda: grad(w, xs)) / n
    t_hand = best_seconds(lambda: rnn_by_hand(w, xs), repeats=5) / n
    t_jax = None
    try:
        import jax
    except ImportError:
        return t_grad, t_hand, t_jax
    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def jloss(w, xs):
        def step(h, x):
            h = jnp.tanh(h * w + x)
            return h, h * h
        h, ys = jax.lax.scan(step, jnp.zeros_like(w), xs)
        return jnp.sum(ys) + jnp.sum(h)
    jgrad = jax.jit(jax.grad(jloss))
    jw, jxs = jnp.asarray(w), jnp.asarray(xs)
    t_jax = best_seconds(lambda: jax.block_until_ready(jgrad(jw, jxs))) / n
    return t_grad, t_hand, t_jax


def energy(u, xs):
    """A state and its energy per step: a reduction beside the array it reduces."""
    def step(c, x):
        nxt = 1.0 / (1.0 + np.exp(-(c * 0.9 + x)))
        return nxt, np.sum(nxt * nxt)
    return lax.scan(step, u, xs)


def energy_loss(u, xs):
    c, ys = energy(u, xs)
    return np.sum(ys) + np.sum(c)


def forced(u, y, n):
    """A state driven by a forcing of the step index (``fori_loop``'s ``j``): the
    kernels read the index per step, and reverse mode keeps ``np.cos(j * 0.01)``."""
    def body(j, v):
        return v * 0.95 + y * np.cos(j * 0.01)
    return lax.fori_loop(0, n, body, u)


def forced_loss(u, y, n):
    return np.sum(forced(u, y, n) ** 2)


def indexed_matmul(v, m, y, n):
    """A loop that stays Python (a matrix product in its body) whose kernel reads the
    step index ``j`` as a Python int: a new value every call."""
    for j in range(n):
        v = (v @ m) * 0.5 + y * (j * 0.001) + v * v * 0.01
    return v


def index_operand_figures(n, size=64):
    """Per step: (jit, jit with one call plan per index value, plain NumPy) for
    ``indexed_matmul`` over ``size`` float64 (``KernelCall.int_plans`` off: its range
    checks say the int shapes every plan, as a slice bound does)."""
    from astjax.kernels import runtime
    v = np.linspace(-1, 1, size)
    m = np.eye(size) * 0.5
    y = np.linspace(0, 1, size)
    want = indexed_matmul(v, m, y, n)
    fn = astjax.jit(indexed_matmul)
    np.testing.assert_allclose(fn(v, m, y, n), want, rtol=1e-12)
    t_jit = best_seconds(lambda: fn(v, m, y, n), repeats=7) / n
    checks = runtime.KernelCall._int_checks
    runtime.KernelCall._int_checks = lambda self, args, j: None
    try:
        astjax.clear_cache()
        per_value = astjax.jit(indexed_matmul)
        np.testing.assert_allclose(per_value(v, m, y, n), want, rtol=1e-12)
        t_per_value = best_seconds(lambda: per_value(v, m, y, n), repeats=3) / n
    finally:
        runtime.KernelCall._int_checks = checks
        astjax.clear_cache()
    t_numpy = best_seconds(lambda: indexed_matmul(v, m, y, n), repeats=7) / n
    return t_jit, t_per_value, t_numpy


def compiled_and_python(pairs, args, n):
    """Per step: {what: (compiled loops, Python loops)} of each (what, function) under
    jit, the Python loops by the drivers' ``MIN_STEPS`` out of reach (same run)."""
    from astjax.kernels import backsweep, loop_driver
    out = {}
    for what, fn in pairs:
        compiled = astjax.jit(fn)
        t_c = best_seconds(lambda: compiled(*args), repeats=7) / n
        steps = loop_driver.MIN_STEPS
        loop_driver.MIN_STEPS = backsweep.MIN_STEPS = 1 << 40
        try:
            python = astjax.jit(fn)
            t_p = best_seconds(lambda: python(*args), repeats=7) / n
            want = python(*args)
        finally:
            loop_driver.MIN_STEPS = backsweep.MIN_STEPS = steps
        for a, b in zip(tree_leaves(compiled(*args)), tree_leaves(want)):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)   # (the same values)
        out[what] = (t_c, t_p)
    return out


def energy_figures(n):
    """Per step: {what: (compiled loops, Python loops)} for jit forward and jit(grad)."""
    return compiled_and_python((("forward", energy), ("grad", astjax.grad(energy_loss))),
                               (np.linspace(-1, 1, 1000), np.linspace(0.0, 0.1, n)), n)


def forced_figures(n):
    """The same for ``forced`` over 1000 float64."""
    return compiled_and_python((("forward", forced), ("grad", astjax.grad(forced_loss))),
                               (np.linspace(-1, 1, 1000), np.linspace(0.5, 1.5, 1000), n),
                               n)


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
    for what, (t_c, t_p) in energy_figures(n).items():
        print(f"energy per step (1000 float64, np.sum(nxt * nxt)), jit {what}: compiled "
              f"loops {t_c * 1e6:.2f} us a step, Python loops {t_p * 1e6:.2f} us "
              f"({t_p / t_c:.1f}x)")
    for what, (t_c, t_p) in forced_figures(n).items():
        print(f"forcing by the step index (1000 float64, y * np.cos(j * 0.01)), jit "
              f"{what}: compiled loops {t_c * 1e6:.2f} us a step, Python loops "
              f"{t_p * 1e6:.2f} us ({t_p / t_c:.1f}x)")
    t_jit, t_per_value, t_numpy = index_operand_figures(n)
    print(f"Python loop (a matrix product in its body) passing the step index to a "
          f"kernel, 64 float64: jit {t_jit * 1e6:.2f} us a step (one call plan for every "
          f"index value), {t_per_value * 1e6:.2f} us with a plan per value; plain NumPy "
          f"{t_numpy * 1e6:.2f} us")
    t_grad, t_hand, t_jax = rnn_figures(n)
    line = (f"RNN h = tanh(h * w + x), 64 float64 units, {n} steps, jit(grad) per step: "
            f"{t_grad * 1e6:.2f} us; hand-written NumPy backprop {t_hand * 1e6:.2f} us "
            f"({t_hand / t_grad:.1f}x slower)")
    if t_jax is not None:
        line += f"; jax.jit(grad) {t_jax * 1e6:.3f} us"
    print(line)


if __name__ == "__main__":
    main()
