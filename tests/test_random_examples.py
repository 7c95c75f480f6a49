"""examples/vi.py: variational inference with reparameterized samples and explicit keys
reaches the exact posterior of Bayesian linear regression, and its gradient estimate is
the derivative of the estimate (finite differences with the key held fixed)."""
import importlib.util
import sys
from pathlib import Path

import numpy as np

from astjax import random

from conftest import check_grad

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_vi_gradient_matches_finite_differences():
    vi = load("vi")
    X, y, _ = vi.make_data(1, n=20, d=3)
    params = (np.array([0.3, -0.2, 0.1]), np.array([-1.0, -0.5, -2.0]))
    check_grad(vi.neg_elbo, (params, random.PRNGKey(3), X, y), rtol=1e-6)


def test_vi_reaches_the_exact_posterior():
    vi = load("vi")
    (mu, log_sigma), history = vi.train(steps=200, log=lambda *a: None)
    assert np.mean(history[-20:]) < np.mean(history[:5])
    X, y, _ = vi.make_data(0)
    mean, precision = vi.exact_posterior(X, y)
    np.testing.assert_allclose(mu, mean, atol=0.03)
    np.testing.assert_allclose(np.exp(log_sigma), 1 / np.sqrt(np.diag(precision)), rtol=0.2)
