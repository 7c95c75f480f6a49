"""Hessian-vector product of a 1000-parameter logistic loss (forward over reverse).

Prints, measured in the same run:
  jvp(grad(loss)) / grad(loss)     (goal <= 3)
and checks the product against an explicit Hessian built by hand in NumPy.
"""
from __future__ import annotations

import functools
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import best_time, ms, report  # noqa: E402

import astjax  # noqa: E402

N, D = 2000, 1000


def loss(w, X, y):
    z = X @ w
    return np.mean(np.log1p(np.exp(-y * z))) + 1e-3 * np.sum(w * w)


def hand_hvp(w, X, y, v):
    """What a NumPy programmer writes: X^T diag(s(1-s)) X v / n + 2e-3 v."""
    z = X @ w
    s = 1.0 / (1.0 + np.exp(-y * z))
    weights = s * (1.0 - s)
    return X.T @ (weights * (X @ v)) / len(y) + 2e-3 * v


def main():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N, D)) / np.sqrt(D)
    y = np.sign(rng.standard_normal(N))
    w = rng.standard_normal(D) * 0.1
    v = rng.standard_normal(D)
    grad = astjax.grad(loss)
    grad_w = functools.partial(grad, X=X, y=y)

    def hvp(w, v):
        return astjax.jvp(grad_w, (w,), (v,))[1]

    np.testing.assert_allclose(hvp(w, v), hand_hvp(w, X, y, v), rtol=1e-8, atol=1e-10)
    t_grad = best_time(grad, w, X, y)
    t_hvp = best_time(hvp, w, v)
    t_hand = best_time(hand_hvp, w, X, y, v)
    report(f"logistic loss, {D} parameters, {N} examples, float64", [
        ("grad(loss)", ms(t_grad), ""),
        ("jvp(grad(loss)) (Hessian-vector product)", ms(t_hvp), ""),
        ("hand-written NumPy Hessian-vector product", ms(t_hand), ""),
        ("hvp / grad", f"{t_hvp / t_grad:.2f}x", "goal <= 3"),
        ("hvp / hand-written hvp", f"{t_hvp / t_hand:.2f}x", ""),
    ])
    return {"hvp_over_grad": t_hvp / t_grad}


if __name__ == "__main__":
    main()
