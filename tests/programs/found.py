"""Minimal reproducers of the failure classes the composition matrix and the fuzzer
found (issue 10).  Each is written as a user would; the tests that use them
(tests/test_compositions.py, tests/test_fuzz.py) are strict xfails until fixed."""
import numpy as np

import astjax
from astjax import lax


# -- in-place updates whose read is a view the update overwrites ---------------------

def imul_slice(x, y):
    z = x * 1.0
    z[1:] *= y[0]
    return np.sum(z)


def imul_index(x, y):
    z = np.zeros(2)
    z[1] = x[0]
    z[1] *= y[0]
    return np.sum(z)


# -- derivatives of functions that call vjp / linearize ------------------------------

def _inner(x, y):
    return np.sin(x) * y


def calls_vjp(x, y):
    out, pull = astjax.vjp(_inner, x, y)
    gx, gy = pull(np.cos(out))
    return np.sum(gx * gx) + np.sum(gy)


def calls_linearize(x, y):
    out, f_jvp = astjax.linearize(_inner, x, y)
    pair = (out, f_jvp(np.cos(x), np.sin(y)))
    return np.sum(pair[1] * pair[0])


# -- vjp / linearize of a function whose if did not run -----------------------------

def if_not_taken(x, y):
    out = x * y
    if np.max(y) > 5.0:
        out = out * 0.0
    return out


def if_else_not_taken(x, y):
    if np.sum(x) > 0:
        out = np.sin(x) * y
    else:
        out = x * x * y
    if np.max(y) > 5.0:
        out = out * 0.0
    return out


# -- linearize of lax loops and of a gradient with a loop -----------------------------

def fori(x):
    def body(i, c):
        return c * 0.8 + np.sin(x * (i + 1.0))
    return lax.fori_loop(0, 3, body, np.zeros_like(x))


def loop_loss(x):
    h = x
    for i in range(3):
        h = np.tanh(h) + x
    return np.sum(h)


# -- stacked outputs of lax.map / lax.scan inside an outer loop -----------------------

def map_in_loop(x):
    acc = 0.0
    for i in range(2):
        acc = acc + np.sum(lax.map(np.sin, x))
    return acc


def scan_ys_in_loop(x):
    def step(c, t):
        return c, np.sin(x * t)

    acc = 0.0
    for i in range(2):
        acc = acc + np.sum(lax.scan(step, 0.0, np.array([0.5, 1.0]))[1])
    return acc


def scan_ys(x):
    def step(c, t):
        return c, np.sin(x * t)
    return lax.scan(step, 0.0, np.array([0.5, 1.0]))[1]


def jvp_of_scan(u):
    return astjax.jvp(scan_ys, (u,), (u,))[1]


# -- vmap of an if whose branches differ in shape, or index with a list ------------------

def branch_shapes(x, y):
    if np.sum(y) > 0.0:
        v = np.sin(y)
    else:
        v = y * x
    return x + np.sum(v)


def branch_fancy(x):
    if np.sum(x) > 0.0:
        return x[[0, 1, 0]] * 2.0
    return x[[1, 1, 0]]


# -- transformations of vmap(vmap(f)), vmap of vjp's and linearize's functions -----------

def plain(x):
    return np.sin(x) * x


def vjp_rows(x):
    out, pull = astjax.vjp(plain, x)
    return astjax.vmap(pull)(np.stack([np.cos(out), np.sin(out)]))


def linearize_rows(x):
    out, f_jvp = astjax.linearize(plain, x)
    return astjax.vmap(f_jvp)(np.stack([np.cos(x), np.sin(x)]))


def calls_vjp_unary(x):
    out, pull = astjax.vjp(plain, x)
    return pull(np.cos(out))[0]


def sum_vmap_vmap(x):
    return np.sum(astjax.vmap(astjax.vmap(plain))(x))


# -- second order (jvp of grad) through a loop left by break ---------------------------

def loop_break(x):
    v = x * 1.0
    for i in range(4):
        if np.sum(v) > 1.5:
            break
        v = v * 1.2 + 0.3
    return np.sum(np.sin(v))


def hvp_loops(x, y):
    """The fuzzer's reproducer (seed 20261185783508), as small as its shrinker got it."""
    v0 = x * 0.0
    for i in range(3):
        v0 = v0 + np.sin(x * (i + 1.0))
    v2 = x * 1.0
    v4 = v0 * 1.0
    for i in range(4):
        if np.sum(v4) > -0.452 + 2.0:
            break
        v4 = v4 * 1.2 + 0.3
    v5 = v2[0] * 0.0
    for i, row in enumerate(v2):
        v5 = v5 + row * (i + 1.0)
    return v5 + np.sum(v4) * 0.5


def hvp_loops_loss(x, y):
    out = hvp_loops(x, y)
    return np.sum(np.sin(out * 0.7 + 0.2))


# -- vmap of grad through a loop with continue whose body is constant -------------------

def loop_continue(x):
    v = np.zeros(3)
    for i in range(3):
        if i == 1:
            continue
        v = v + np.cos(0.5 * i)
    return np.sum(v * x)


# -- einsum whose operand broadcasts a size-1 axis ---------------------------------------

def einsum_broadcast(x):
    return np.einsum("ij,kj->ik", np.full((2, 3), 0.5), x)


# -- lax.map inside a lax.cond branch; jit of vmap of shape manipulation ----------------

def map_in_cond(x):
    out = lax.cond(np.sum(x) > -10.0, lambda a: lax.map(np.sin, a), lambda a: a * 0.5, x)
    return np.sum(out)


def reshape_concat(x):
    m = np.reshape(x, (2, 3))
    c = np.concatenate([m, m[:1]], axis=0)
    return np.sum(np.transpose(c) ** 2)


def sum_jit_vmap(x):
    return np.sum(astjax.jit(astjax.vmap(reshape_concat))(x))
