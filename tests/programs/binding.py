"""User functions with defaults, keyword and keyword-only parameters (tests/test_binding.py)."""
import numpy as np

import astjax


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


def jvp_inside(x):
    """jvp of a function with a default, called inside transformed code."""
    _, t = astjax.jvp(scaled, (x,), (np.ones_like(x),))
    return t * t


def grad_inside(x):
    return np.sum(astjax.grad(scaled)(x, scale=0.5) ** 2)


def vmap_inside(xs):
    return np.sum(astjax.vmap(scaled)(xs) ** 2)


def vmap_inside_with_axes(xs, y):
    return np.sum(astjax.vmap(scaled, in_axes=(1, None))(xs, y) ** 2)
