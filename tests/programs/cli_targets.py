"""User programs for the command-line tests (tests/test_cli.py).

The CLI imports this file by path, transforms functions in it and writes standalone
modules from them, so it must stay importable on its own (NumPy only).
"""
import numpy as np

# module constants, written into standalone modules as literals
SCALE = 0.5
OFFSET = (1.0, -2.0)
NAME = "cli"
WEIGHTS = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], dtype=np.float32)
BIG = np.ones((200, 200))


def predict(params, inputs):
    for W, b in params:
        outputs = np.dot(inputs, W) + b
        inputs = np.tanh(outputs)
    return outputs


def loss(params, batch):
    inputs, targets = batch
    preds = predict(params, inputs)
    return np.sum((preds - targets) ** 2)


def loss_xy(params, x, y):
    preds = predict(params, x)
    return np.sum((preds - y) ** 2)


def loop_if(x, n):
    y = x
    for i in range(n):
        if np.sum(y) > 0:
            y = np.sin(y) * 1.5 + x
        else:
            y = np.tanh(y) - x
    return np.sum(y * y)


def constants(x):
    y = SCALE * np.tanh(x @ WEIGHTS) + OFFSET[0]
    return np.sum(y * y) + OFFSET[1]


def make_captured(w):
    def captured(x):
        return np.sum(np.sin(x * w) * SCALE)
    return captured


captured = make_captured(np.array([0.5, 1.0, -1.5]))


def per_example(w, x):
    h = np.tanh(x * w)
    if np.sum(h) > 0:
        h = h * h
    return np.sum(h)


def apply(fn, x):
    return np.sum(fn(x) * x)


def relu(x):
    return np.maximum(x, 0.0)


def uses_big(x):
    return np.sum(x * BIG)


def not_scalar(x):
    return np.sin(x)


def poly(x):
    return x + x * x + x * x * x
