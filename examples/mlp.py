"""A multilayer perceptron in plain NumPy (JAX README's ``predict``/``loss``: tanh layers
of 784-512-512-10 units, squared-error loss), trained with astjax.grad.

Run: python examples/mlp.py
"""
import numpy as np

import astjax


def predict(params, inputs):
    for W, b in params:
        outputs = np.dot(inputs, W) + b
        inputs = np.tanh(outputs)
    return outputs


def loss(params, batch):
    inputs, targets = batch
    preds = predict(params, inputs)
    return np.sum((preds - targets) ** 2)


def init_params(sizes, rng, dtype=np.float32):
    """Scaled Gaussian weights, zero biases: a (W, b) pair per layer."""
    return [((rng.standard_normal((m, n)) / np.sqrt(m)).astype(dtype), np.zeros(n, dtype))
            for m, n in zip(sizes[:-1], sizes[1:])]


def make_batch(rng, n, sizes, teacher, dtype=np.float32):
    """Inputs and the targets a fixed random 'teacher' network produces for them."""
    x = rng.standard_normal((n, sizes[0])).astype(dtype)
    return x, predict(teacher, x).astype(dtype)


def train(steps=5, sizes=(784, 512, 512, 10), batch_size=128, lr=1e-4, seed=0, log=print):
    rng = np.random.default_rng(seed)
    params = init_params(sizes, rng)
    teacher = init_params(sizes, rng)
    batch = make_batch(rng, batch_size, sizes, teacher)
    value_and_grad = astjax.value_and_grad(loss)
    history = []
    for step in range(steps):
        value, grads = value_and_grad(params, batch)
        params = [(W - lr * dW, b - lr * db) for (W, b), (dW, db) in zip(params, grads)]
        history.append(float(value))
        log(f"step {step}: loss {float(value):.4f}")
    return params, history


if __name__ == "__main__":
    train()
