"""grad of the seeds' MLP (784-512-512-10, batch 128, float32).

Prints, measured in the same run:
  grad(loss) / loss                 (goal <= 2.5)
  grad(loss) / hand-written backprop (goal <= 1.2)
  jit(grad(loss)) / hand-written backprop, compiled kernels (issue 12: goal <= 1.0)
  first call of grad(loss), transformation included, in a fresh process (goal < 50 ms)
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import compare, first_call, ms, report  # noqa: E402

import astjax  # noqa: E402
from astjax.demo import init_params, loss  # noqa: E402

SIZES = (784, 512, 512, 10)
BATCH = 128


def hand_backprop(params, batch):
    """The backward pass a NumPy programmer writes by hand for this MLP."""
    inputs, targets = batch
    acts = [inputs]
    x = inputs
    outputs = None
    for W, b in params:
        outputs = x @ W + b
        x = np.tanh(outputs)
        acts.append(x)
    d = 2 * (outputs - targets)
    grads = [None] * len(params)
    for layer in range(len(params) - 1, -1, -1):
        W, _ = params[layer]
        grads[layer] = (acts[layer].T @ d, d.sum(axis=0))
        if layer > 0:
            d = (d @ W.T) * (1 - acts[layer] ** 2)
    return grads


FIRST_CALL = """
import time, numpy as np
from astjax.demo import init_params, loss
import astjax
rng = np.random.default_rng(0)
params = init_params((784, 512, 512, 10), rng)
batch = (rng.standard_normal((128, 784)).astype(np.float32),
         rng.standard_normal((128, 10)).astype(np.float32))
g = astjax.grad(loss)
t0 = time.perf_counter(); g(params, batch); t1 = time.perf_counter()
g(params, batch); t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""


def first_call_seconds():
    first, steady = first_call(FIRST_CALL)
    return first, first - steady


def main():
    rng = np.random.default_rng(0)
    params = init_params(SIZES, rng)
    batch = (rng.standard_normal((BATCH, SIZES[0])).astype(np.float32),
             rng.standard_normal((BATCH, SIZES[-1])).astype(np.float32))
    grad_loss = astjax.grad(loss)
    ours = grad_loss(params, batch)
    hand = hand_backprop(params, batch)
    for (a, b), (c, d) in zip(ours, hand):
        np.testing.assert_allclose(a, c, rtol=2e-3, atol=1e-3)
        np.testing.assert_allclose(b, d, rtol=2e-3, atol=1e-3)
        assert a.dtype == np.float32
    # ratios from interleaved rounds (bench/common.py compare): the machine's load
    # drifts, and both sides of a ratio should see the same drift
    t_grad, t_loss, over_loss = compare(grad_loss, loss, params, batch)
    _, t_hand, over_hand = compare(grad_loss, hand_backprop, params, batch)
    jit_grad = astjax.jit(grad_loss)
    for (a, b), (c, d) in zip(jit_grad(params, batch), ours):
        np.testing.assert_allclose(a, c, rtol=1e-4, atol=1e-5 * np.abs(c).max())
        np.testing.assert_allclose(b, d, rtol=1e-4, atol=1e-5 * np.abs(d).max())
    t_jit, t_hand_j, over_jit = compare(jit_grad, hand_backprop, params, batch)
    first, overhead = first_call_seconds()
    report("MLP 784-512-512-10, batch 128, float32", [
        ("loss (plain NumPy)", ms(t_loss), ""),
        ("hand-written backprop", ms(t_hand), ""),
        ("astjax.grad(loss)", ms(t_grad), ""),
        ("grad / loss", f"{over_loss:.2f}x", "goal <= 2.5"),
        ("grad / hand backprop", f"{over_hand:.2f}x", "goal <= 1.2"),
        ("astjax.jit(grad(loss)), C kernels", ms(t_jit), ""),
        ("jit(grad) / hand backprop", f"{over_jit:.2f}x",
         f"goal <= 1.0 (hand {ms(t_hand_j)} in these rounds)"),
        ("first call (fresh process)", ms(first), "goal < 50 ms"),
        ("  of which transformation", ms(overhead), ""),
    ])
    return {"grad_over_loss": over_loss, "grad_over_hand": over_hand,
            "jit_grad_over_hand": over_jit, "first_call_ms": first * 1e3}


if __name__ == "__main__":
    main()
