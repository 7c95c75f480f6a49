"""The examples run and do what they claim: losses go down, gradients are right."""
import importlib.util
import sys
from pathlib import Path

import numpy as np

import astjax

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_wave_scan_matches_the_numpy_loop_and_inversion_reduces_the_misfit():
    wave = load("wave")
    true_v, start_v, problem, observed = wave.setup(24, 24, 60, np.float64)
    scan_traces, scan_last = wave.simulate(true_v, **problem)
    loop_traces, loop_last = wave.simulate_loop(true_v, **problem)
    np.testing.assert_allclose(scan_traces, loop_traces, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(scan_last, loop_last, rtol=1e-12, atol=1e-12)
    _, history = wave.invert(start_v, problem, observed, iters=3, log=lambda *a: None)
    assert history[-1] < history[0]


def test_wave_gradient_matches_finite_differences():
    wave = load("wave")
    _, v, problem, observed = wave.setup(16, 16, 40, np.float64)
    g = astjax.grad(wave.misfit)(v, observed=observed, **problem)
    for i, j in [(2, 8), (8, 8), (12, 3)]:
        eps = 1e-2
        vp, vm = v.copy(), v.copy()
        vp[i, j] += eps
        vm[i, j] -= eps
        fd = (wave.misfit(vp, observed=observed, **problem)
              - wave.misfit(vm, observed=observed, **problem)) / (2 * eps)
        np.testing.assert_allclose(g[i, j], fd, rtol=1e-4, atol=1e-6 * np.abs(g).max())


def test_rnn_training_reduces_the_loss():
    rnn = load("rnn")
    _, history = rnn.train(steps=15, log=lambda *a: None)
    assert history[-1] < 0.5 * history[0]


def test_mlp_example_trains():
    mlp = load("mlp")
    _, history = mlp.train(steps=4, sizes=(20, 16, 4), batch_size=8, lr=1e-2,
                           log=lambda *a: None)
    assert history[-1] < history[0]
