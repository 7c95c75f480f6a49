"""The seeds' 2-D acoustic wave simulation (300x300, 1000 steps, float32).

Prints, measured in the same run:
  plain NumPy loop / lax.scan version        (goal >= 1.0: the scan costs nothing)
  value_and_grad(misfit) / forward misfit    (goal <= 3)
and the peak memory of the gradient run.
"""
from __future__ import annotations

import os
import resource
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
from common import best_time, ms, report  # noqa: E402

import astjax  # noqa: E402
import wave as wave_example  # noqa: E402


def main(n=300, steps=1000):
    true_v, velocity, problem, observed = wave_example.setup(n, n, steps, np.float32)
    scan_traces, _ = wave_example.simulate(velocity, **problem)
    loop_traces, _ = wave_example.simulate_loop(velocity, **problem)
    np.testing.assert_allclose(scan_traces, loop_traces, rtol=1e-5, atol=1e-6)

    def forward():
        return wave_example.misfit(velocity, observed=observed, **problem)

    value_and_grad = astjax.value_and_grad(wave_example.misfit)

    def gradient():
        return value_and_grad(velocity, observed=observed, **problem)

    value, g = gradient()
    assert g.dtype == np.float32 and np.isfinite(g).all()
    t_loop = best_time(lambda: wave_example.simulate_loop(velocity, **problem), repeat=3,
                       number=1)
    t_scan = best_time(lambda: wave_example.simulate(velocity, **problem), repeat=3, number=1)
    t_fwd = best_time(forward, repeat=3, number=1)
    t_grad = best_time(gradient, repeat=3, number=1)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    report(f"wave simulation {n}x{n}, {steps} steps, float32", [
        ("plain NumPy loop", ms(t_loop), ""),
        ("lax.scan version", ms(t_scan), ""),
        ("misfit (forward)", ms(t_fwd), ""),
        ("value_and_grad(misfit)", ms(t_grad), ""),
        ("loop / scan", f"{t_loop / t_scan:.2f}x", "goal >= 1.0"),
        ("gradient / forward", f"{t_grad / t_fwd:.2f}x", "goal <= 3"),
        ("peak memory", f"{peak:.0f} MB", "process high-water mark"),
    ])
    return {"loop_over_scan": t_loop / t_scan, "grad_over_forward": t_grad / t_fwd}


if __name__ == "__main__":
    main()
