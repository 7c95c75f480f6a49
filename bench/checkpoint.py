"""Checkpointing the wave simulation's gradient: memory saved, time paid.

The seeds' 2-D acoustic wave (examples/wave.py) stepped as a ``lax.scan`` over chunks
of ``k`` steps, each chunk ``astjax.checkpoint``-ed: the gradient's forward sweep keeps
only each chunk's input wavefields, and the backward sweep recomputes the chunk's
steps before going back through them.  Prints, for the plain scan and for several k,
the peak memory the gradient allocates (tracemalloc: NumPy's arrays included) and its
time, in the same run.

Run: python bench/checkpoint.py [n steps]   (default 300x300, 1000 steps, float32)
"""
from __future__ import annotations

import os
import sys
import time
import tracemalloc

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
from common import ms, report  # noqa: E402

import astjax  # noqa: E402
from astjax import lax  # noqa: E402
import wave as wave_example  # noqa: E402


def misfit_checkpointed(velocity, density, wavelet, source_field, receiver_row, dx, dy, dt,
                        observed, k):
    """examples/wave.py's misfit, its time loop a scan over checkpointed k-step chunks."""
    kappa = density * velocity ** 2
    density_half_x = np.pad(0.5 * (density[1:, :] + density[:-1, :]), ((0, 1), (0, 0)),
                            mode="edge")
    density_half_y = np.pad(0.5 * (density[:, 1:] + density[:, :-1]), ((0, 0), (0, 1)),
                            mode="edge")
    injection = (dt * dt * 4.0 * np.pi) * velocity ** 2 * source_field
    zero = np.zeros_like(velocity)

    def chunk(carry, amplitudes):
        """``len(amplitudes)`` steps of examples/wave.py's simulation."""
        def single_step(carry, amplitude):
            pressure_past, pressure_present = carry
            dpressure_dx = np.pad((pressure_present[1:, :] - pressure_present[:-1, :]) / dx,
                                  ((0, 1), (0, 0)))
            dpressure_dy = np.pad((pressure_present[:, 1:] - pressure_present[:, :-1]) / dy,
                                  ((0, 0), (0, 1)))
            pressure_xx = dpressure_dx / density_half_x
            pressure_yy = dpressure_dy / density_half_y
            dpressurexx_dx = np.pad((pressure_xx[1:, :] - pressure_xx[:-1, :]) / dx,
                                    ((1, 0), (0, 0)))
            dpressureyy_dy = np.pad((pressure_yy[:, 1:] - pressure_yy[:, :-1]) / dy,
                                    ((0, 0), (1, 0)))
            pressure_future = (2.0 * pressure_present - pressure_past
                               + (dt * dt) * (dpressurexx_dx + dpressureyy_dy) * kappa
                               + amplitude * injection)
            return (pressure_present, pressure_future), pressure_future[receiver_row]

        return lax.scan(single_step, carry, amplitudes)

    # the whole change: a scan over checkpointed chunks of k steps
    chunks = np.reshape(wavelet, (-1, k))
    _, traces = lax.scan(astjax.checkpoint(chunk), (zero, zero), chunks)
    traces = np.reshape(traces, (-1, velocity.shape[1]))
    return 0.5 * np.sum((traces - observed) ** 2)


def measure(fn, repeat=2):
    """(best seconds, peak bytes allocated during one call, result)."""
    result = fn()                       # warm: code generated, caches filled
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return best, peak, result


def main(n=300, steps=1000, ks=(10, 25, 50, 100)):
    _, velocity, problem, observed = wave_example.setup(n, n, steps, np.float32)
    plain = astjax.value_and_grad(wave_example.misfit)
    t0, m0, (v0, g0) = measure(lambda: plain(velocity, observed=observed, **problem))
    rows = [("value_and_grad, plain scan", ms(t0), f"{m0 / 2**20:.0f} MB")]
    figures = {"plain": (t0, m0)}
    ckpt = astjax.value_and_grad(misfit_checkpointed)
    for k in ks:
        if steps % k:
            continue
        t, m, (v, g) = measure(lambda: ckpt(velocity, observed=observed, k=k, **problem))
        np.testing.assert_allclose(v, v0, rtol=1e-5)
        np.testing.assert_allclose(g, g0, rtol=2e-3, atol=1e-6 * np.abs(g0).max())
        rows.append((f"checkpoint every {k} steps", ms(t),
                     f"{m / 2**20:.0f} MB ({m0 / m:.1f}x less), time {t / t0:.2f}x"))
        figures[k] = (t, m)
    report(f"wave gradient {n}x{n}, {steps} steps, float32: time, peak memory", rows)
    return figures


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]]
    main(*args)
