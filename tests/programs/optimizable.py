"""Programs for the optimization passes (tests/test_passes.py).

Each offers something to optimize, or a trap where an optimization would be wrong:
reassigned names, loop-carried values, branches, in-place updates through aliases
and views, loops that run zero times.
"""
import numpy as np


# ---------------------------------------------------------------- straight line

def straight_line(x, y):
    n = 2 - 1
    a = x * y
    b = x * y                      # cse
    c = a + b
    d = c                          # copy
    e = d * (n + 1.0)
    pair = (e, c)
    k = len(pair)                  # folds to 2
    first = pair[0]                # forwarded
    unused = np.exp(x)             # noqa: F841  (dead)
    return np.sum(first) + k * np.sum(pair[1])


def folding(x):
    flag = 3 > 2
    scale = 2 ** 3 - 5.0
    if flag:
        y = x * scale
    else:
        y = np.log(x)
    for i in range(0):
        y = y * 1000.0
    return np.sum(y)


def repeated_math(x):
    s1 = np.sum(np.sin(x) * np.sin(x))
    s2 = np.sum(np.sin(x) * np.sin(x))
    return s1 + s2 + np.sum(x * x) + np.sum(x ** 2)


# ---------------------------------------------------------------- branches

def branch_reassign(x, c):
    y = x
    if c > 0:
        y = x * 2.0
    z = y + 1.0                    # y is not x here
    w = x * 2.0                    # not the same value as y on every path
    return np.sum(z * w)


def branch_same_expr(x, c):
    a = np.tanh(x)
    if c > 0:
        b = np.tanh(x)             # cse inside the branch
        r = a + b
    else:
        r = a - np.tanh(x)
    return np.sum(r)


# ---------------------------------------------------------------- loops

def loop_carried(x, n):
    s = x
    t = x * 0.5
    for i in range(n):
        u = s * 2.0                # reads s from the previous trip
        s = u + t
        t = np.sin(s)
    return np.sum(s) + np.sum(t)


def loop_invariant(x, w, n):
    y = x
    for i in range(n):
        c = np.tanh(w) * 0.5       # invariant: hoisted (guarded)
        d = c + 1.0                # invariant once c is
        y = y * d + np.cos(w)
    return np.sum(y)


def loop_invariant_const_range(x, w):
    y = x
    for i in range(3):
        c = np.exp(w)
        y = y + c * i
    return np.sum(y)


def zero_trip_invariant(x, m, n):
    # with n == 0 the loop body never runs: hoisting x @ m unguarded would raise
    y = np.sum(x)
    for i in range(n):
        p = x @ m
        y = y + np.sum(p)
    return y


def zero_trip_live_after(x, w, n):
    c = x * 1.0
    for i in range(n):
        c = np.sin(w)              # c is read after the loop: not hoisted
    return np.sum(c)


def invariant_then_mutated(x, n):
    acc = np.zeros_like(x)
    for i in range(n):
        t = x * 2.0                # a new array each trip ...
        t[0] = i                   # ... that is updated: must not be hoisted
        acc = acc + t
    return np.sum(acc * acc)


def loop_with_break(x, w):
    y = x
    for i in range(10):
        c = np.tanh(w)
        y = y * 0.9 + c
        if np.sum(y) > 3.0:
            break
    return np.sum(y)


def while_loop(x, w):
    y = x
    k = 0
    while k < 4:
        c = np.cos(w)
        y = y + c * k
        k = k + 1
    return np.sum(y)


def nested_loops(x, w):
    total = 0.0
    for i in range(2):
        for j in range(3):
            s = np.sum(np.tanh(w) * x)
            total = total + s * (i + j)
    return total


# ---------------------------------------------------------------- aliasing

def cse_then_mutate(x):
    a = x * 2.0
    b = x * 2.0                    # same expression, but b is updated below
    b[0] = 100.0
    return np.sum(a) + np.sum(b)


def zeros_not_shared(x):
    a = np.zeros(3)
    b = np.zeros(3)
    a[0] = x[0]
    return np.sum(b) + np.sum(a)


def view_mutation(x):
    y = x * 1.0
    v = y[0:2]
    s1 = np.sum(y)
    v[0] = 10.0                    # changes y through the view
    s2 = np.sum(y)                 # not s1
    return s1 * 1000.0 + s2


def alias_copy_mutation(x):
    y = x * 1.0
    z = y                          # z and y are one array
    z[1] = -3.0
    return np.sum(y * y)


def tuple_forward_reassigned(x):
    a = x * 2.0
    t = (a, x)
    a = a + 1.0
    first = t[0]                   # the old a
    return np.sum(first) + np.sum(a) * 10.0


def slice_update_loop(x):
    y = x * 1.0
    for i in range(1, len(x)):
        y[i] = y[i - 1] * 0.5 + x[i]
        s = np.sum(y)              # changes every trip
        y[0] = s * 0.01
    return np.sum(y)


# ---------------------------------------------------------------- elementwise chains

def chain(x, y):
    a = x * y
    b = 1.0 - a
    c = b * y
    d = np.tanh(c)
    return np.sum(d * 2.0)


def chain_broadcast(x, y):
    a = x * 2.0                    # shape of x: (3,)
    b = a + y                      # y (2, 3): the result is bigger than a
    return np.sum(b)


def chain_dtype(i, f):
    a = i * 2                      # an integer array ...
    b = a * f                      # ... times floats is a float array
    return np.sum(b)


def squares(x):
    a = np.tanh(x)
    b = a * a
    c = a ** 2
    d = c ** 1
    return np.sum(b + d)
