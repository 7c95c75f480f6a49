"""Loops left by ``continue`` and ``break`` at every depth, with bodies that are
constant, partly constant or push nothing on the tape (issue 10: grad of a loop with
``continue`` whose body was constant popped an empty tape).  Each takes x of shape (3,)
and returns a scalar; the data-dependent tests sit far from their thresholds."""
import numpy as np


def const_continue(x):
    v = np.zeros(3)
    for i in range(3):
        if i == 1:
            continue
        v = v + np.cos(0.5 * i)
    return np.sum(v * x)


def const_break(x):
    v = np.zeros(3)
    for i in range(5):
        if i == 3:
            break
        v = v * 0.5 + i
    return np.sum(v * np.sin(x))


def partly_const_continue(x):
    v = x * 1.0
    c = np.zeros(3)
    for i in range(4):
        c = c + 0.25 * i
        if i == 2:
            continue
        v = v * np.cos(c) + x
    return np.sum(v)


def nothing_pushed(x):
    t = 0.0
    for i in range(4):
        if i % 2 == 0:
            continue
        t = i * 2.0
    return np.sum(x * x) * t


def active_continue(x):
    v = x * 1.0
    for i in range(4):
        if np.sum(v) > 100.0 or i == 1:
            continue
        v = np.sin(v) * 1.5 + x
    return np.sum(v * v)


def active_break(x):
    v = x * 1.0
    for i in range(6):
        v = v * 1.3 + 0.2
        if np.sum(v) > 4.0:
            break
    return np.sum(np.tanh(v))


def nested_continue_break(x):
    v = x * 1.0
    w = np.zeros(3)
    for i in range(3):
        for j in range(3):
            if j == i:
                continue
            w = w + np.cos(0.1 * j)
        if i == 2:
            break
        v = v * w * 0.2 + x
    return np.sum(v)


def deep_continue(x):
    v = x * 1.0
    for i in range(4):
        if i > 0:
            if i % 2 == 1:
                if i == 3:
                    continue
                v = v * 0.5
        v = np.sin(v) + 0.1 * i
    return np.sum(v)


def inner_break_outer_continue(x):
    v = x * 1.0
    k = 0.0
    for i in range(3):
        for j in range(4):
            if j == 2:
                break
            k = k + 1.0
        if i == 1:
            continue
        v = v * np.cos(x) + k
    return np.sum(v)


def while_break_const(x):
    v = np.zeros(3)
    n = 0
    while True:
        n = n + 1
        if n > 3:
            break
        if n == 2:
            continue
        v = v + n * 0.5
    return np.sum(np.exp(0.1 * x) * v)


def enumerate_continue(x):
    s = 0.0
    rows = np.stack([x, x * x, np.sin(x)])
    for i, row in enumerate(rows):
        if i == 1:
            continue
        s = s + np.sum(row) * (i + 1.0)
    return s


def reused_index(x):
    """``i`` of a loop with continue, then of a loop left by break, then of enumerate."""
    v = x * 0.0
    for i in range(3):
        if i == 0:
            continue
        v = v + np.sin(x * (i + 1.0))
    for i in range(5):
        if np.sum(v) > 50.0:
            break
        v = v * 0.9 + 0.1
    for i, e in enumerate(v):
        v = v + e * (i + 1.0)
    return np.sum(v * v)


ALL = [const_continue, const_break, partly_const_continue, nothing_pushed, active_continue,
       active_break, nested_continue_break, deep_continue, inner_break_outer_continue,
       while_break_const, enumerate_continue, reused_index]
