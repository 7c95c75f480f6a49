"""An Elman RNN over a sequence with lax.scan, trained with astjax.value_and_grad.

The model reads a noisy sine wave one step at a time and predicts the next value.
The whole sequence loop is a ``lax.scan``; its gradient comes from astjax's reverse
mode through the scan.

Run: python examples/rnn.py
"""
from __future__ import annotations

import numpy as np

import astjax
from astjax import lax


def rnn_loss(params, inputs, targets):
    """Mean squared one-step-ahead prediction error over the sequence."""
    W_xh, W_hh, b_h, W_hy, b_y = params

    def step(h, x_t):
        h = np.tanh(x_t @ W_xh + h @ W_hh + b_h)
        y = h @ W_hy + b_y
        return h, y

    h0 = np.zeros((inputs.shape[1], W_hh.shape[0]), dtype=inputs.dtype)
    _, predictions = lax.scan(step, h0, inputs)
    return np.mean((predictions - targets) ** 2)


def init(rng, n_in=1, n_hidden=16, n_out=1, dtype=np.float64):
    scale = 1.0 / np.sqrt(n_hidden)
    return [(rng.standard_normal((n_in, n_hidden)) * 0.5).astype(dtype),
            (rng.standard_normal((n_hidden, n_hidden)) * scale).astype(dtype),
            np.zeros(n_hidden, dtype),
            (rng.standard_normal((n_hidden, n_out)) * scale).astype(dtype),
            np.zeros(n_out, dtype)]


def make_data(rng, steps=40, batch=8, dtype=np.float64):
    """Sine waves with random phases: inputs[t] predicts targets[t] = inputs[t + 1]."""
    phase = rng.uniform(0, 2 * np.pi, size=batch)
    t = np.arange(steps + 1)[:, None] * 0.3 + phase[None, :]
    wave = np.sin(t) + 0.05 * rng.standard_normal(t.shape)
    return wave[:-1, :, None].astype(dtype), wave[1:, :, None].astype(dtype)


def train(steps=60, lr=0.2, seed=0, log=print):
    rng = np.random.default_rng(seed)
    params = init(rng)
    inputs, targets = make_data(rng)
    value_and_grad = astjax.value_and_grad(rnn_loss)
    history = []
    for it in range(steps):
        value, grads = value_and_grad(params, inputs, targets)
        params = [p - lr * g for p, g in zip(params, grads)]
        history.append(float(value))
        if it % 10 == 0 or it == steps - 1:
            log(f"step {it}: loss {float(value):.5f}")
    return params, history


if __name__ == "__main__":
    train()
