"""The compiled-kernel table of issue 12, every column measured in the same run.

Rows: poly 1000x1000 float32; the seeds' wave simulation 300x300, 1000 steps,
float32 (forward); FWI ``value_and_grad`` of its misfit; the MLP's ``jit(grad)``
against hand-written backprop; the first call of ``jit(poly)`` with a warm and a
cold disk cache.  Columns: plain NumPy (or the hand-written code), astjax ``jit``
with the NumPy backend, astjax ``jit`` with compiled C kernels (the default, bit for
bit NumPy's values), the same with ``fastmath=True`` (poly, wave, FWI: within a few
ulp), and, when they import, ``jax.jit`` (CPU) and ``numba.njit`` of the same NumPy
function.
Each row's columns are timed in interleaved rounds (the best round of each counts),
so a drift of the shared machine's load hits every column alike.

Run: python bench/kernels_table.py [--quick]   (--quick: 100x100, 100 steps)
"""
from __future__ import annotations

import gc
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ckernels  # noqa: E402
from common import load_example  # noqa: E402
from mlp_grad import BATCH, SIZES, hand_backprop  # noqa: E402

import astjax  # noqa: E402
from astjax.demo import init_params, loss as mlp_loss  # noqa: E402


wave_example = load_example("wave")


def interleaved(fns, rounds=5, min_round=0.05):
    """Best seconds per call of each of ``fns`` (name -> thunk), in rounds that run
    every function in turn (order rotated each round)."""
    names = list(fns)
    for n in names:
        fns[n]()                                   # warm up: compile, fill caches
    number = {}
    for n in names:
        t0 = time.perf_counter()
        fns[n]()
        dt = time.perf_counter() - t0
        number[n] = max(1, int(min_round / max(dt, 1e-9)))
    best = {n: float("inf") for n in names}
    enabled = gc.isenabled()
    gc.disable()
    try:
        for r in range(rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for n in order:
                t0 = time.perf_counter()
                for _ in range(number[n]):
                    fns[n]()
                best[n] = min(best[n], (time.perf_counter() - t0) / number[n])
    finally:
        if enabled:
            gc.enable()
    return best


def _jax():
    try:
        import jax
    except ImportError:
        return None
    jax.config.update("jax_platforms", "cpu")
    return jax


def _numba():
    try:
        import numba
    except ImportError:
        return None
    return numba


def _try_numba(numba, f, *args):
    """``numba.njit(f)`` when it compiles for ``args``, else the reason it does not."""
    try:
        g = numba.njit(f)
        g(*args)
        return g, ""
    except Exception as e:            # noqa: BLE001  (numba's typing errors vary)
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return None, first[:70]


def jax_wave(jax):
    """The seeds' simulation written for JAX (the same statements, jnp and lax.scan)."""
    jnp = jax.numpy

    def simulate(velocity, density, wavelet, source_field, receiver_row, dx, dy, dt):
        kappa = density * velocity ** 2
        dhx = jnp.pad(0.5 * (density[1:, :] + density[:-1, :]), ((0, 1), (0, 0)),
                      mode="edge")
        dhy = jnp.pad(0.5 * (density[:, 1:] + density[:, :-1]), ((0, 0), (0, 1)),
                      mode="edge")
        injection = (dt * dt * 4.0 * jnp.pi) * velocity ** 2 * source_field
        zero = jnp.zeros_like(velocity)

        def step(carry, amplitude):
            past, present = carry
            pdx = jnp.pad((present[1:, :] - present[:-1, :]) / dx, ((0, 1), (0, 0)))
            pdy = jnp.pad((present[:, 1:] - present[:, :-1]) / dy, ((0, 0), (0, 1)))
            pxx, pyy = pdx / dhx, pdy / dhy
            dxx = jnp.pad((pxx[1:, :] - pxx[:-1, :]) / dx, ((1, 0), (0, 0)))
            dyy = jnp.pad((pyy[:, 1:] - pyy[:, :-1]) / dy, ((0, 0), (1, 0)))
            future = (2.0 * present - past + (dt * dt) * (dxx + dyy) * kappa
                      + amplitude * injection)
            return (present, future), future[receiver_row]

        (_, last), traces = jax.lax.scan(step, (zero, zero), wavelet)
        return traces, last

    def misfit(velocity, density, wavelet, source_field, receiver_row, dx, dy, dt,
               observed):
        traces, _ = simulate(velocity, density, wavelet, source_field, receiver_row, dx,
                             dy, dt)
        return 0.5 * jnp.sum((traces - observed) ** 2)
    return simulate, misfit


def fmt(seconds):
    return "-" if seconds is None else f"{seconds * 1e3:.2f} ms"


def row(title, times, notes=""):
    return (title, times, notes)


def bench_poly(jax, numba):
    x = np.random.default_rng(0).standard_normal((1000, 1000)).astype(np.float32)
    poly = ckernels.poly
    jn, jc = astjax.jit(poly, backend="numpy"), astjax.jit(poly, backend="c")
    jf = astjax.jit(poly, backend="c", fastmath=True)
    assert np.array_equal(jc(x), poly(x))
    np.testing.assert_allclose(jf(x), poly(x), rtol=1e-5, atol=1e-5)
    fns = {"numpy": lambda: poly(x), "jit numpy": lambda: jn(x), "jit c": lambda: jc(x),
           "jit c fastmath": lambda: jf(x)}
    note = ""
    if jax:
        jp, xj = jax.jit(poly), jax.numpy.asarray(x)
        fns["jax.jit"] = lambda: jp(xj).block_until_ready()
    if numba:
        nb, why = _try_numba(numba, poly, x)
        if nb is not None:
            fns["numba"] = lambda: nb(x)
        else:
            note = f"numba: {why}"
    return row("poly 1000x1000 f32", interleaved(fns, rounds=15), note)


def bench_wave(jax, numba, n, steps):
    true_v, velocity, problem, observed = wave_example.setup(n, n, steps, np.float32)
    sim_n = astjax.jit(wave_example.simulate, backend="numpy")
    sim_c = astjax.jit(wave_example.simulate, backend="c")
    sim_f = astjax.jit(wave_example.simulate, backend="c", fastmath=True)
    ref = wave_example.simulate_loop(velocity, **problem)
    from astjax.kernels import loops
    before = loops.STATS["steps"]
    np.testing.assert_array_equal(sim_c(velocity, **problem)[0], ref[0])
    driven = loops.STATS["steps"] - before     # steps the compiled loop driver ran
    # (fastmath: rounded differently step after step; 1000 float32 steps of it stay as
    # close to the float64 simulation as NumPy's float32 is: ~1e-6 of the peak)
    fast_err = np.max(np.abs(sim_f(velocity, **problem)[0] - ref[0]))
    assert fast_err <= 1e-5 * np.max(np.abs(ref[0])), fast_err
    fns = {"numpy": lambda: wave_example.simulate_loop(velocity, **problem),
           "jit numpy": lambda: sim_n(velocity, **problem),
           "jit c": lambda: sim_c(velocity, **problem),
           "jit c fastmath": lambda: sim_f(velocity, **problem)}
    notes = [f"jit c: {driven} of {steps} steps in one compiled loop (kernels/loops.py)"]
    if jax:
        jsim, _ = jax_wave(jax)
        jj = jax.jit(jsim, static_argnames=("receiver_row",))
        jargs = {k: (jax.numpy.asarray(v) if isinstance(v, np.ndarray) else v)
                 for k, v in problem.items()}
        jv = jax.numpy.asarray(velocity)
        fns["jax.jit"] = lambda: jax.block_until_ready(jj(jv, **jargs))
    if numba:
        args = [velocity] + [problem[k] for k in ("density", "wavelet", "source_field",
                                                  "receiver_row", "dx", "dy", "dt")]
        nb, why = _try_numba(numba, wave_example.simulate_loop, *args)
        if nb is not None:
            fns["numba"] = lambda: nb(*args)
        else:
            notes.append(f"numba: {why}")
    fwd = interleaved(fns, rounds=3, min_round=0.0)
    # FWI: value_and_grad of the misfit
    vg = astjax.value_and_grad(wave_example.misfit)
    vg_n, vg_c = astjax.jit(vg, backend="numpy"), astjax.jit(vg, backend="c")
    vg_f = astjax.jit(vg, backend="c", fastmath=True)
    mis_c = astjax.jit(wave_example.misfit, backend="c")
    gfns = {"numpy": lambda: vg(velocity, observed=observed, **problem),
            "jit numpy": lambda: vg_n(velocity, observed=observed, **problem),
            "jit c": lambda: vg_c(velocity, observed=observed, **problem),
            "jit c fastmath": lambda: vg_f(velocity, observed=observed, **problem),
            "jit c forward": lambda: mis_c(velocity, observed=observed, **problem)}
    if jax:
        _, jmis = jax_wave(jax)
        jvg = jax.jit(jax.value_and_grad(jmis), static_argnames=("receiver_row",))
        jobs = jax.numpy.asarray(observed)
        gfns["jax.jit"] = lambda: jax.block_until_ready(jvg(jv, observed=jobs, **jargs))
    grad = interleaved(gfns, rounds=3, min_round=0.0)
    fwd_c = grad.pop("jit c forward")
    notes_g = [f"jit c value_and_grad / its forward = {grad['jit c'] / fwd_c:.2f}x"]
    return (row(f"wave {n}x{n}x{steps} forward f32", fwd, "; ".join(notes)),
            row("FWI value_and_grad", grad, "; ".join(notes_g + ["numba: no autodiff"])))


def bench_mlp(jax):
    rng = np.random.default_rng(0)
    params = init_params(SIZES, rng)
    batch = (rng.standard_normal((BATCH, SIZES[0])).astype(np.float32),
             rng.standard_normal((BATCH, SIZES[-1])).astype(np.float32))
    g = astjax.grad(mlp_loss)
    gn, gc_ = astjax.jit(g, backend="numpy"), astjax.jit(g, backend="c")
    fns = {"numpy": lambda: hand_backprop(params, batch),
           "jit numpy": lambda: gn(params, batch), "jit c": lambda: gc_(params, batch)}
    if jax:
        jnp = jax.numpy

        def jloss(params, batch):
            inputs, targets = batch
            x = inputs
            for W, b in params:
                out = x @ W + b
                x = jnp.tanh(out)
            return jnp.sum((out - targets) ** 2)
        jg = jax.jit(jax.grad(jloss))
        jparams = jax.tree_util.tree_map(jnp.asarray, params)
        jbatch = tuple(jnp.asarray(b) for b in batch)
        fns["jax.jit"] = lambda: jax.block_until_ready(jg(jparams, jbatch))
    # 31 short rounds: a 3 ms call with BLAS threads is thrown far off (10-30 ms) by
    # any other load on the cores, and the best round is the one the load spared
    return row("MLP jit(grad), batch 128 f32", interleaved(fns, rounds=31, min_round=0.03),
               "numpy column: hand-written backprop; numba: no autodiff")


COLUMNS = ["numpy", "jit numpy", "jit c", "jit c fastmath", "jax.jit", "numba"]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    quick = "--quick" in argv
    jax, numba = _jax(), _numba()
    rows = [bench_poly(jax, numba)]
    rows += list(bench_wave(jax, numba, 100 if quick else 300, 100 if quick else 1000))
    rows.append(bench_mlp(jax))
    warm, _ = ckernels._first_call(cold=False)
    cold, _ = ckernels._first_call(cold=True)
    print("\n| workload | " + " | ".join(COLUMNS) + " | jit c vs NumPy | jit c vs jax.jit "
          "| fastmath vs jax.jit |")
    print("|---" * (len(COLUMNS) + 4) + "|")
    out = {}
    for title, times, note in rows:
        cells = [fmt(times.get(c)) for c in COLUMNS]
        c = times["jit c"]
        vs_np = f"{times['numpy'] / c:.1f}x faster"
        jx = times.get("jax.jit")
        vs_jax = f"{c / jx:.2f}x" if jx else "-"
        fast = times.get("jit c fastmath")
        fast_jax = f"{fast / jx:.2f}x" if jx and fast else "-"
        print(f"| {title} | " + " | ".join(cells) + f" | {vs_np} | {vs_jax} | {fast_jax} |")
        if note:
            print(f"|   ({note}) |" + " |" * (len(COLUMNS) + 3))
        out[title] = times
    print(f"| first call jit(poly), fresh process | warm disk cache {warm * 1e3:.1f} ms | "
          f"cold cache {cold * 1e3:.1f} ms |" + " |" * (len(COLUMNS) + 1))
    out["first_call"] = (warm, cold)
    return out


if __name__ == "__main__":
    main()
