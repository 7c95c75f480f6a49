"""examples/data_parallel.py and examples/wave_sharded.py do what they claim."""
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("n", ["2", "4"])
def test_data_parallel_losses_equal_single_device(n, monkeypatch):
    monkeypatch.setenv("ASTJAX_NUM_CPU_DEVICES", n)
    history = load("data_parallel").train(steps=4, log=lambda *a: None)
    for single, sharded, pmapped in history:
        np.testing.assert_allclose(sharded, single, rtol=1e-12)
        np.testing.assert_allclose(pmapped, single, rtol=1e-12)
    assert history[-1][0] < history[0][0]


@pytest.mark.parametrize("n", ["2", "4"])
def test_data_parallel_with_dropout_keys_equals_single_device(n, monkeypatch):
    monkeypatch.setenv("ASTJAX_NUM_CPU_DEVICES", n)
    history = load("data_parallel").train_dropout(steps=4, log=lambda *a: None)
    for single, sharded in history:
        np.testing.assert_allclose(sharded, single, rtol=1e-12)
    assert len({single for single, _ in history}) == len(history)   # new keys each step


@pytest.mark.parametrize("n", ["2", "4"])
def test_wave_sharded_equals_single_device(n, monkeypatch):
    monkeypatch.setenv("ASTJAX_NUM_CPU_DEVICES", n)
    single, split = load("wave_sharded").run(ny=32, nx=16, steps=30)
    np.testing.assert_allclose(split, single, rtol=1e-13, atol=1e-13)
    assert np.abs(single).max() > 0.01
