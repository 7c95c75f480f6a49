"""Loops whose bodies make temporaries: what reverse mode saves at the end of a trip.

Each function takes float64 arrays and returns a scalar.  They sweep the cases the
"loop temporaries" rule of ``astjax/transforms/reverse.py`` must tell apart: a
temporary read after the loop, read before the loop's body makes it (a stale value
of the previous trip of an outer loop), changing shape from trip to trip, updated in
place, made in a branch, the function's own output, and loops that exit early.
"""
from __future__ import annotations

import numpy as np

from astjax import lax


def chain(x):
    s = x * 0.0
    for i in range(3):
        a = x * (i + 1.0)
        b = np.sin(a) - a * a
        c = b / (1.0 + x * x)
        s = s + c
    return np.sum(s)


def scalar_loop(x):
    acc = 0.0
    for i in range(3):
        acc = acc + np.sin(x * (i + 1.0)) * acc + x
    return acc


def read_after_loop(x):
    s = x * 0.0
    for i in range(3):
        t = np.sin(x * (i + 1.0))
        s = s + t * t
    return np.sum(s) + np.sum(t * x)


def stale_in_outer(x):
    acc = x * 1.0
    for j in range(3):
        if j > 0:
            acc = acc + np.cos(t)  # noqa: F821 (the previous trip's t)
        for i in range(2):
            t = np.sin(acc * (i + 1.0)) * x  # noqa: F841 (read by the next trip)
        acc = acc * 0.5
    return np.sum(acc)


def growing_slices(x):
    s = 0.0
    for i in range(1, 5):
        t = x[:i] * 2.0
        u = t * t - x[:i]
        s = s + np.sum(u * np.cos(t))
    return s


def broadcasting(x, y):
    s = 0.0
    for i in range(3):
        outer = x[:, None] * y[None, :]
        row = np.sum(outer, axis=0) + y * i
        s = s + np.sum(row * row)
    return s


def int_carry(x):
    k = 0
    s = x * 1.0
    for i in range(4):
        k = k + 2
        t = s * x + k
        s = np.tanh(t)
    return np.sum(s)


def updated_in_place(x):
    s = x * 0.0
    for i in range(3):
        t = x * (i + 2.0)
        t[0] = t[1] * t[0]
        s = s + t * t
    return np.sum(s)


def branch_inside(x):
    s = x * 0.0
    for i in range(4):
        t = np.exp(x * 0.3 * i)
        if i % 2 == 0:
            u = t * x
        else:
            u = t - x
        s = s + u
    return np.sum(s)


def output_in_loop(x):
    for i in range(3):
        out = np.sum(np.sin(x) * (i + 1.0))
    return out


def early_exit(x):
    s = x * 0.0
    for i in range(5):
        t = np.cos(x * i)
        if i == 3:
            break
        s = s + t * x
    return np.sum(s)


def skipped(x):
    s = x * 0.0
    for i in range(5):
        t = np.cos(x * i)
        if i % 2 == 1:
            continue
        s = s + t * x
    return np.sum(s)


def skipped_late(x):
    s = x * 0.0
    for i in range(5):
        if i % 2 == 1:
            continue
        t = np.cos(x * i)
        s = s + t * x
    return np.sum(s)


def dict_entries_in_loop(x):
    d = {}
    for i in range(3):
        d[i] = np.sin(x * (i + 1.0))
    return np.sum(d[0] * d[1])


def list_entries_in_loop(x):
    items = [x, x, x]
    for i in range(3):
        items[i] = np.cos(x * i) * x
    return np.sum(items[1])


def unused_scan_output(x):
    def step(carry, w):
        a, b = carry
        na = np.sin(a) * w + b
        nb = b * 1.5
        return (na, nb), na * na
    (last, _), ys = lax.scan(step, (x, x * 2.0), np.arange(1.0, 4.0))
    return np.sum(last)


def unused_carry(x):
    def step(carry, w):
        a, n = carry
        na = np.cos(a * w)
        return (na, n + 1), na + x
    (_, _), ys = lax.scan(step, (x, 0), np.arange(1.0, 4.0))
    return np.sum(ys * ys)


def scan_stencil(x):
    def step(carry, w):
        past, present = carry
        dx = np.pad(present[1:] - present[:-1], (0, 1))
        lap = np.pad(dx[1:] - dx[:-1], (1, 0))
        future = 2.0 * present - past + 0.1 * lap + w * x
        return (present, future), future[2]
    (_, last), trace = lax.scan(step, (x * 0.0, x), np.linspace(0.5, 1.0, 6))
    return np.sum(trace * trace) + np.sum(last * x)


def fori_body(x):
    def body(i, carry):
        t = carry * x
        return np.sin(t) + 0.1 * i
    return np.sum(lax.fori_loop(0, 4, body, x))


def nested_scan(x):
    def inner(c, w):
        t = c * w
        return np.tanh(t), t[0]

    def outer(c, w):
        c2, ys = lax.scan(inner, c * w, np.arange(1.0, 3.0))
        return c2 + np.sum(ys), np.sum(c2)
    c, zs = lax.scan(outer, x, np.linspace(0.5, 1.0, 3))
    return np.sum(c) + np.sum(zs * zs)


def while_body(x):
    def cond(carry):
        return carry[0] < 3

    def body(carry):
        i, v = carry
        t = np.sin(v) * x
        return i + 1, t + v
    _, v = lax.while_loop(cond, body, (0, x))
    return np.sum(v)


# An inner loop's temporaries read after it by the outer loop's code.  The reading
# statement's adjoint runs in the outer backward trip, after the inner loop's
# backward trips have popped their own values: it must see the last inner trip's
# value or shape stand-in, not the first's (was: a reshape error in ``unbroadcast``
# for the MLP's layers of different widths).

_LAYERS = (np.full((5, 3), 0.3), np.full((3, 2), 0.2))
_BROADCAST_LAYERS = (np.full((5, 1), 0.3), np.full((1, 5), 0.2))


def layers_shape_read_after_inner(x):
    """The MLP over minibatches: ``out - target`` reads only ``out``'s shape."""
    total = 0.0
    for i in range(2):
        h = x * (i + 1.0)
        for w in _LAYERS:
            out = np.dot(h, w) + 0.1
            h = np.tanh(out)
        total = total + np.sum(np.sin(out - x[:2]))
    return total


def layers_broadcast_read_after_inner(x):
    """The first trip's shape (1,) broadcasts against the last's (5,)."""
    total = 0.0
    for i in range(2):
        h = x * (i + 1.0)
        for w in _BROADCAST_LAYERS:
            out = np.dot(h, w) + 0.1
            h = np.tanh(out)
        total = total + np.sum(np.sin(out - x))
    return total


def _minibatch_loss(layers, inputs, targets):
    for w in layers:
        outputs = np.dot(inputs, w) + 0.1
        inputs = np.tanh(outputs)
    return np.mean((outputs - targets) ** 2)


def layers_in_helper(x):
    """The same through a helper function called per minibatch (inlined)."""
    xs = np.stack([x, x[::-1], x * x])
    total = 0.0
    for i in range(3):
        total = total + _minibatch_loss(_LAYERS, xs[i], x[i:i + 2])
    return total


def three_levels(x):
    """Shapes change at the innermost level, read two levels up."""
    total = 0.0
    for i in range(2):
        acc = 0.0
        for j in range(2):
            h = x * (i + j + 1.0)
            for w in _BROADCAST_LAYERS:
                out = np.dot(h, w)
                h = np.sin(out)
            acc = acc + np.sum(np.cos(out - x))
        total = total + acc * acc
    return total


def while_inside_for(x):
    """The inner loop is a while loop."""
    total = 0.0
    for i in range(2):
        h = x * (i + 1.0)
        k = 0
        while k < 2:
            out = np.dot(h, _BROADCAST_LAYERS[k]) + 0.1
            h = np.tanh(out)
            k = k + 1
        total = total + np.sum(np.sin(out - x))
    return total


def inner_in_fori(x):
    """The outer loop is a ``lax.fori_loop``."""
    def body(i, total):
        h = x * (i + 1.0)
        for w in _BROADCAST_LAYERS:
            out = np.dot(h, w) + 0.1
            h = np.tanh(out)
        return total + np.sum(np.sin(out - x))
    return lax.fori_loop(0, 2, body, 0.0)


NESTED_SHAPES = [layers_shape_read_after_inner, layers_broadcast_read_after_inner,
                 layers_in_helper, three_levels, while_inside_for, inner_in_fori]

PROGRAMS = [chain, read_after_loop, stale_in_outer, growing_slices, int_carry,
            updated_in_place, branch_inside, output_in_loop, early_exit, skipped,
            skipped_late, dict_entries_in_loop, list_entries_in_loop,
            unused_scan_output, unused_carry, scan_stencil, fori_body, nested_scan,
            while_body] + NESTED_SHAPES
