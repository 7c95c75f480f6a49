"""``python -m astjax demo``: a small neural network in plain NumPy, its generated
gradient, a few training steps.

The network is the multilayer perceptron of JAX's README (``predict``/``loss``: tanh
layers, a squared-error loss) at MNIST's sizes, 784 inputs, two hidden layers of 512
and 10 outputs.  It lives here (rather than in examples/) so that the demo runs from
an installed package.
"""
from __future__ import annotations

import numpy as np


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
    """Scaled Gaussian weights and zero biases: a (W, b) pair per layer."""
    return [((rng.standard_normal((m, n)) / np.sqrt(m)).astype(dtype), np.zeros(n, dtype))
            for m, n in zip(sizes[:-1], sizes[1:])]


def main(argv=None) -> int:
    import astjax
    rng = np.random.default_rng(0)
    sizes = (784, 512, 512, 10)
    params = init_params(sizes, rng)
    teacher = init_params(sizes, rng)
    inputs = rng.standard_normal((128, sizes[0])).astype(np.float32)
    batch = (inputs, np.tanh(predict(teacher, inputs)).astype(np.float32))
    bar = "=" * 76
    print(f"{bar}\nA multilayer perceptron in plain NumPy: tanh layers of 784-512-512-10 "
          "units\n(MNIST-sized, as in JAX's README), squared-error loss.  From "
          "astjax/demo.py:\n")
    print("    def predict(params, inputs):\n        for W, b in params:\n"
          "            outputs = np.dot(inputs, W) + b\n            inputs = np.tanh(outputs)\n"
          "        return outputs\n\n    def loss(params, batch):\n"
          "        inputs, targets = batch\n        preds = predict(params, inputs)\n"
          "        return np.sum((preds - targets) ** 2)\n")
    print(f"{bar}\nastjax.grad(loss) is this Python, generated from the source above "
          "(printed with\nastjax.make_source(astjax.grad(loss))(params, batch)):\n"
          f"{bar}")
    print(astjax.make_source(astjax.grad(loss))(params, batch))
    import textwrap
    print(textwrap.fill(
        "Reading it: first your code, one operation per line (rt.push saves on a tape "
        "the values the loop overwrites); after '# backward sweep', d_NAME is the "
        "gradient of the loss with respect to NAME, computed in reverse order.  Comments "
        "like '# demo.py:16' point at the line of your code each statement comes from.  "
        "The code is shown simplified for reading (the same numbers, bit for bit); "
        "make_source(..., simplify=False) shows it exactly as it runs.", 76) + "\n")
    print(f"{bar}\nFive gradient-descent steps with astjax.value_and_grad(loss), on a batch "
          "of 128\nrandom float32 inputs whose targets come from another random network:\n"
          f"{bar}")
    value_and_grad = astjax.value_and_grad(loss)
    history = []
    lr = 1e-3
    for step in range(5):
        value, grads = value_and_grad(params, batch)
        params = [(W - lr * dW, b - lr * db) for (W, b), (dW, db) in zip(params, grads)]
        history.append(float(value))
        print(f"step {step}: loss {float(value):10.4f}")
    ok = history[-1] < history[0]
    print(f"loss went from {history[0]:.4f} to {history[-1]:.4f}: "
          + ("going down." if ok else "NOT going down!"))
    return 0 if ok else 1
