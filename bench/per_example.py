"""Per-example gradients with vmap(grad(loss)).

Prints, measured in the same run:
  seeds' MLP (784-512-512-10, 128 examples, float32; the result is 340 MB):
      vmap(grad) / hand-vectorised NumPy per-example backprop      (goal <= 1.2)
  logistic regression (10,000 examples x 16 features):
      Python loop of grad / vmap(grad)                              (goal >= 20)
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import best_time, ms, report  # noqa: E402

import astjax  # noqa: E402
from astjax.demo import init_params, predict  # noqa: E402


def example_loss(params, x, t):
    """The seeds' loss for one example (a batch of one)."""
    preds = predict(params, x[None, :])
    return np.sum((preds - t[None, :]) ** 2)


def hand_per_example(params, xs, ts):
    """Per-example backprop, vectorised over the batch by hand."""
    acts = [xs]
    x = xs
    outputs = None
    for W, b in params:
        outputs = x @ W + b
        x = np.tanh(outputs)
        acts.append(x)
    d = 2 * (outputs - ts)
    grads = [None] * len(params)
    for layer in range(len(params) - 1, -1, -1):
        W, _ = params[layer]
        grads[layer] = (np.einsum("bi,bj->bij", acts[layer], d), d)
        if layer > 0:
            d = (d @ W.T) * (1 - acts[layer] ** 2)
    return grads


def logistic(w, x, y):
    return np.log1p(np.exp(-y * np.dot(x, w)))


def main():
    rng = np.random.default_rng(0)
    params = init_params((784, 512, 512, 10), rng)
    xs = rng.standard_normal((128, 784)).astype(np.float32)
    ts = rng.standard_normal((128, 10)).astype(np.float32)
    per_example = astjax.vmap(astjax.grad(example_loss), in_axes=(None, 0, 0))
    ours = per_example(params, xs, ts)
    hand = hand_per_example(params, xs, ts)
    for (a, b), (c, d) in zip(ours, hand):
        np.testing.assert_allclose(a, c, rtol=1e-3, atol=1e-4)
        np.testing.assert_allclose(b, d, rtol=1e-3, atol=1e-4)
    t_ours = best_time(per_example, params, xs, ts, repeat=3)
    t_hand = best_time(hand_per_example, params, xs, ts, repeat=3)

    n, f = 10_000, 16
    X = rng.standard_normal((n, f))
    y = np.sign(rng.standard_normal(n))
    w = rng.standard_normal(f) * 0.1
    g = astjax.grad(logistic)
    batched = astjax.vmap(g, in_axes=(None, 0, 0))
    np.testing.assert_allclose(batched(w, X, y)[:5], np.stack([g(w, X[i], y[i])
                                                               for i in range(5)]))

    def loop():
        return np.stack([g(w, X[i], y[i]) for i in range(n)])
    t_loop = best_time(loop, repeat=3, number=1)
    t_vmap = best_time(batched, w, X, y, repeat=5)
    report("per-example gradients", [
        ("MLP: vmap(grad(loss))", ms(t_ours), "128 examples, f32"),
        ("MLP: hand-vectorised backprop", ms(t_hand), ""),
        ("MLP: vmap / hand", f"{t_ours / t_hand:.2f}x", "goal <= 1.2"),
        ("logistic: loop of grad", ms(t_loop), "10,000 examples"),
        ("logistic: vmap(grad)", ms(t_vmap), ""),
        ("logistic: loop / vmap", f"{t_loop / t_vmap:.0f}x", "goal >= 20"),
    ])
    return {"mlp_vmap_over_hand": t_ours / t_hand, "logistic_loop_over_vmap": t_loop / t_vmap}


if __name__ == "__main__":
    main()
