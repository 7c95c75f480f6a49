"""User functions with defaults, keyword and keyword-only parameters (tests/test_binding.py)."""
import numpy as np


def scaled(x, y=2.0, *, scale=3.0):
    return np.sum(np.sin(x) * y) * scale


def affine(x, w, *, b=None, act=np.tanh):
    h = x @ w
    if b is not None:
        h = h + b
    return act(h)


def needs_keyword(x, *, k):
    return np.sum(np.cos(x) * k)


def vector_out(x, y=0.5, *, power=2.0):
    return np.sin(x) ** power + y * x


def with_params(params, x, *, l2=0.0):
    w, b = params
    pred = np.tanh(x @ w + b)
    return np.sum(pred ** 2) + l2 * np.sum(w * w)
