"""Python control flow on array values."""
import numpy as np


def if_elif_else(x):
    s = np.sum(x)
    if s > 0:
        y = np.sin(x)
    elif s > -1:
        y = x * x
    else:
        y = np.exp(x)
    return np.sum(y)


def if_without_else(x):
    y = x * 2.0
    if np.max(x) > 0.5:
        y = np.tanh(y) * x
    return np.sum(y)


def for_range(x, n):
    y = x
    for i in range(n):
        y = np.sin(y) * 1.5 + x
    return np.sum(y * y)


def for_range_start_step(x):
    total = 0.0
    for i in range(1, 7, 2):
        total = total + np.sum(np.tanh(x * i))
    return total


def for_rows(x):
    total = 0.0
    for row in x:
        total = total + np.sum(np.tanh(row) * row)
    return total


def for_list(ws, x):
    h = x
    for w in ws:
        h = np.tanh(h * w)
    return np.sum(h)


def for_zip(xs, ys):
    total = 0.0
    for a, b in zip(xs, ys):
        total = total + np.sum(a * np.sin(b))
    return total


def for_enumerate(x):
    total = 0.0
    for i, row in enumerate(x):
        total = total + (i + 1) * np.sum(row * row)
    for k, row in enumerate(x, 2):
        total = total + k * np.sum(np.sin(row))
    return total


def for_reversed(x):
    h = np.zeros(x.shape[1])
    for row in reversed(x):
        h = np.tanh(h * 0.5 + row)
    return np.sum(h * np.arange(x.shape[1]))


def while_data(x):
    y = x
    while np.sum(y * y) > 1.0:
        y = y * 0.5
    return np.sum(np.sin(y))


def while_counter(x, n):
    i = 0
    y = x
    while i < n:
        y = np.tanh(y) + x
        i = i + 1
    return np.sum(y)


def loop_break(x):
    y = x
    for i in range(10):
        y = np.tanh(y) + 0.3 * x
        if np.max(y) > 1.0:
            break
    return np.sum(y * y)


def while_break(x):
    y = x
    while True:
        y = y * 1.5
        if np.sum(np.abs(y)) > 10.0:
            break
    return np.sum(np.sin(y))


def loop_continue(x):
    total = 0.0
    for row in x:
        if np.sum(row) < 0:
            continue
        total = total + np.sum(np.sin(row))
    return total


def early_return_loop(x):
    y = x
    for i in range(5):
        y = y * 1.1 + np.sin(y)
        if np.sum(y) > 3.0:
            return np.sum(y * y)
    return np.sum(y)


def early_return_branch(x):
    if np.sum(x) > 0:
        return np.sum(np.exp(x))
    y = np.sin(x)
    return np.sum(y * y)


def nested_loops(x):
    total = 0.0
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            total = total + np.sin(x[i, j]) * (i + 1) * x[i, j]
    return total


def nested_loop_matrix(A, v):
    out = v
    for k in range(2):
        acc = np.zeros_like(v)
        for i in range(A.shape[0]):
            acc = acc + A[i] * np.tanh(out[i])
        out = acc
    return np.sum(out * out)


def zero_trip_loops(x, xs):
    y = x * 1.0
    for i in range(0):
        y = y * 100.0
    for item in xs:
        y = y + item
    while np.sum(y) > 1e9:
        y = y * 0.0
    return np.sum(np.sin(y))


def loop_collect(x):
    outs = []
    for i in range(3):
        x = np.tanh(x) * 2.0
        outs.append(x)
    return np.sum(np.stack(outs) ** 2)


def loop_in_branch(x):
    y = x
    if np.sum(x) > 0:
        for i in range(3):
            y = np.sin(y) + x
    else:
        while np.max(np.abs(y)) < 2.0:
            y = y * 1.7
    return np.sum(y)


def branch_in_loop(x):
    y = x
    for i in range(4):
        if np.sum(y) > 0:
            y = y - np.tanh(y) * 0.8
        else:
            y = y + np.exp(np.sin(y))
    return np.sum(y * y)
