"""User programs that the vmap tests batch (written for ONE example each)."""
from collections import namedtuple

import numpy as np

import astjax
from astjax import lax
from astjax.demo import loss as mlp_loss


# ----------------------------------------------------------------- plain functions

def affine(x, w, b):
    return np.tanh(x @ w + b)


def scaled_sum(x, s):
    return np.sum(x * s, axis=0)


def outer_pair(a, b):
    return np.outer(a, b)


def dict_layer(params, x):
    return np.tanh(x @ params["w"] + params["b"])


def tuple_args(pair, x):
    a, b = pair
    return a * x + b


def stats(x):
    """Several outputs of several kinds."""
    return {"mean": np.mean(x), "centered": x - np.mean(x), "shape": (x.shape[0], 2.0)}


def with_constant(x):
    """A batched output and one that does not depend on the input."""
    return x * 2.0, np.arange(3.0)


def constant_only(c):
    return np.ones(2) * c


def matrix_out(x):
    return np.stack([x, 2.0 * x, x * x])


def inplace_updates(x):
    y = np.zeros(4)
    y[0] = x[1]
    y[1:3] += x[:2] * 2.0
    y[-1] = np.sum(x)
    return y


def gather_rows(x, idx):
    return x[idx] * 2.0


def mask_select(x, mask):
    return np.sum(x[mask])


def per_example_index(x, i):
    return x[i]


Layer = namedtuple("Layer", ["w", "b"])


def namedtuple_layer(layer, x):
    return np.tanh(np.dot(x, layer.w) + layer.b)


# --------------------------------------------------------------------- control flow

def branches(x):
    s = np.sum(x)
    if s > 1.0:
        y = x * 2.0
        label = 2
    elif s > -1.0:
        y = np.sin(x)
        label = 1
    else:
        y = -x
        label = 0
    return y, label


def branch_no_else(x):
    y = x + 1.0
    if x[0] > 0:
        y = y * x
    return y


def branch_returns(x):
    if x > 0:
        return x * 3.0
    if x > -1:
        return x - 10.0
    return np.exp(x)


def halve_until_small(x):
    n = 0
    while x > 1.0:
        x = x / 2.0
        n = n + 1
    return x, n


def collatz_steps(n):
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


def newton_sqrt(a):
    x = a
    while np.abs(x * x - a) > 1e-10 * a:
        x = 0.5 * (x + a / x)
    return x


def loop_break(x):
    total = 0.0
    for i in range(10):
        if total > x:
            break
        total = total + i
    return total


def loop_continue(x):
    total = 0.0
    for i in range(6):
        if x[i % 2] > i:
            continue
        total = total + x[0] * i
    return total


def loop_early_return(x):
    for i in range(5):
        if x < i:
            return x * i
        x = x + 0.5
    return -x


def while_break(x):
    i = 0
    while i < 20:
        x = x * 1.5
        if x > 10.0:
            break
        i = i + 1
    return x, i


def search_first_negative(v):
    found = -1
    for i in range(v.shape[0]):
        if v[i] < 0:
            found = i
            break
    return found


def loop_per_example_length(x, n):
    total = 0.0
    for i in range(n):
        total = total + x
    return total


# ---------------------------------------------------------------------------- lax

def lax_cond(x):
    return lax.cond(np.sum(x) > 0, lambda v: v * 2.0, lambda v: v - 1.0, x)


def lax_switch(i, x):
    return lax.switch(i, [lambda v: v + 1.0, lambda v: v * v, lambda v: -v], x)


def lax_while(x):
    return lax.while_loop(lambda c: c[0] < 50.0, lambda c: (c[0] * 1.7, c[1] + 1), (x, 0))


def lax_fori(x):
    return lax.fori_loop(0, 4, lambda i, acc: acc * x + i, 1.0)


def lax_scan(x):
    def step(carry, xi):
        carry = carry * 0.5 + xi
        return carry, carry * 2.0
    return lax.scan(step, 0.0, x)


# ------------------------------------------------------------- transforms inside

def logistic_loss(w, x, y):
    p = 1.0 / (1.0 + np.exp(-np.dot(x, w)))
    return -(y * np.log(p) + (1.0 - y) * np.log(1.0 - p))


def mlp_example_loss(params, x, y):
    """The seeds' MLP loss on one example, written as a batch of one."""
    return mlp_loss(params, (x[None, :], y[None, :]))


def relu_net_loss(params, x, y):
    h = np.maximum(x @ params["w1"] + params["b1"], 0.0)
    out = h @ params["w2"]
    return np.mean((out - y) ** 2) + 0.01 * np.sum(params["w1"] ** 2)


def pieces_loss(w, x):
    """Gradients through slicing, concatenation, max, norm, einsum and where."""
    z = np.concatenate([x[:2] * w[0], x[2:] * w[1]])
    m = np.max(z)
    n = np.linalg.norm(z - m)
    e = np.einsum("i,i->", z, z)
    return np.where(n > 1.0, n, e) + np.sum(np.clip(z, -0.5, 0.5))


def sinsum(x):
    return np.sum(np.sin(x) * x)


def directional(x, v):
    return astjax.jvp(sinsum, (x,), (v,))[1]


def grad_inside(x):
    return astjax.grad(sinsum)(x) * 2.0


def halve_value(x):
    return halve_until_small(x)[0] * x


def break_value(x):
    return loop_break(x) * x + np.sin(x)


# ------------------------------------------------------------ per-example indices

def pick_max(x):
    return x[np.argmax(x)] * 2.0 + x[0]


def rows_and_cols(m, i):
    return m[i] + m[:, i] * 2.0 + m[i, i - 1]


def update_at(x, i):
    y = x * 1.0
    y[i] = 0.0
    y[:, i - 1] += x[i] * 3.0
    return y


def update_in_branch(x):
    y = np.zeros(3)
    if x[0] > 0:
        y[1] = x[1]
    else:
        y[2] = x[2]
    return y


def update_in_while(x):
    y = np.zeros(4)
    i = 0
    while np.sum(y) < x:
        y[i % 4] += 1.0
        i = i + 1
    return y


def masked_update(x):
    y = x * 1.0
    y[y < 0] = 0.0
    return y


def masked_gather(x):
    return np.sum(x[x > 0])


def per_example_slice(x, n):
    return np.sum(x[:n])


def branch_in_loop_loss(x):
    y = x
    for i in range(4):
        if np.sum(y) > 0:
            y = y - np.tanh(y) * 0.8
        else:
            y = y + np.exp(np.sin(y))
    return np.sum(y * y)


def rows_until_positive(x):
    for row in x:
        if np.sum(row) > 0:
            return np.sum(np.sin(row) * row)
    return np.sum(x)


def index_loss(m, i):
    return np.sum(rows_and_cols(m, i) ** 2) + np.sum(update_at(m, i) ** 2)


def lax_loss(x):
    c, ys = lax_scan(x)
    w, n = lax_while(x[0] + 2.0)
    return np.sum(ys * x) + c + w + lax_fori(x[1]) + np.sum(lax_cond(x) ** 2)


def pieces_grad(x):
    return astjax.grad(pieces_loss, argnums=1)(np.array([0.7, -1.2]), x)


def hvp(x, v):
    """A Hessian-vector product: forward mode over the generated gradient."""
    return astjax.jvp(pieces_grad, (x,), (v,))[1]


def masked_update_loss(x):
    y = masked_update(x)
    y[y > 0.5] = 2.0
    return np.sum(y * y * x)


# ------------------------------------------- vmap composed with derivatives (issue 10)
# One-example kernels, the losses that call them through vmap, and the Gaussian-process
# pattern (a vmap whose body calls vmap); tests/test_vmap_grad.py runs the matrix.

def layer(x, w):
    """x: (3,), w: (3, 2) -> (2,)"""
    return np.tanh(x @ w) * 1.5 + x[0] * w[0]


def layer_pair(x, w):
    """A tuple output: (2,) and (3,)."""
    return np.sin(x @ w), x * np.sum(w ** 2)


def layer_dict(p, x):
    """A dict argument and a dict output."""
    h = np.tanh(x @ p["w"] + p["b"])
    return {"y": h * h, "z": np.sum(h) * x}


def layer_and_constant(x, w):
    """A second output that does not depend on x (out_axes=None for it)."""
    return np.cos(x @ w), w * 2.0


def weigh(out, ws, kind):
    """A scalar from an output of the given structure (fixed weights)."""
    if kind == "array":
        return np.sum(out * ws)
    if kind == "pair":
        return np.sum(out[0] * ws[0]) + np.sum(out[1] * ws[1])
    return np.sum(out["y"] * ws["y"]) + np.sum(out["z"] * ws["z"])


def make_losses(fun, in_axes, out_axes, ws, kind):
    """Two scalar losses of the same vmap: one calling a vmapped function made outside,
    one calling ``vmap`` in its own body."""
    vf = astjax.vmap(fun, in_axes=in_axes, out_axes=out_axes)

    def loss_outside(a, b):
        return weigh(vf(a, b), ws, kind)

    def loss_inside(a, b):
        out = astjax.vmap(fun, in_axes=in_axes, out_axes=out_axes)(a, b)
        return weigh(out, ws, kind)

    return vf, loss_outside, loss_inside


def rbf(x, y, ell):
    return np.exp(-np.sum((x - y) ** 2) / ell)


def kernel_row(x, ys, ell):
    return astjax.vmap(rbf, (None, 0, None))(x, ys, ell)


def gp_objective(ell, xs):
    K = astjax.vmap(kernel_row, (0, None, None))(xs, xs, ell)
    K = K + 0.5 * np.eye(xs.shape[0])
    alpha = np.linalg.solve(K, np.ones(xs.shape[0]))
    return np.sum(alpha) + np.sum(np.log(np.diag(K)))


def kernel_col(x, ys, ell):
    """The row as a column (out_axes=1 inside the nested vmap)."""
    return astjax.vmap(rbf, (None, 0, None), out_axes=0)(x, ys, ell)


def gp_objective_t(ell, xs):
    K = astjax.vmap(kernel_col, (0, None, None), out_axes=1)(xs, xs, ell)
    return np.sum(K * np.arange(K.size).reshape(K.shape)) / ell


def gp_objective_neg(ell, xs):
    """Features on axis 0 of xs: in_axes=-1 / 1 at both levels."""
    K = astjax.vmap(kernel_row_t, (1, None, None))(xs, xs, ell)
    return np.sum(K * np.arange(K.size).reshape(K.shape))


def kernel_row_t(x, ys, ell):
    return astjax.vmap(rbf, (None, -1, None))(x, ys, ell)


def gp_objective_loop(ell, xs):
    n = xs.shape[0]
    K = np.stack([np.stack([rbf(xs[i], xs[j], ell) for j in range(n)]) for i in range(n)])
    K = K + 0.5 * np.eye(n)
    alpha = np.linalg.solve(K, np.ones(n))
    return np.sum(alpha) + np.sum(np.log(np.diag(K)))


def kernel_sum(ell, x, xs):
    return np.sum(kernel_row(x, xs, ell))


def grad_of_kernel_sum(ell, xs):
    """grad inside vmap inside grad: d/d ell of a kernel sum, per row of xs."""
    return np.sum(astjax.vmap(astjax.grad(kernel_sum), (None, 0, None))(ell, xs, xs) ** 2)


def grad_of_kernel_sum_loop(ell, xs):
    return np.sum(np.stack([astjax.grad(kernel_sum)(ell, x, xs) for x in xs]) ** 2)


def loss_layer(x, w):
    return np.sum(np.sin(layer(x, w)))


def loss_pair(x, w):
    a, b = layer_pair(x, w)
    return np.sum(a * a) + np.sum(np.cos(b))


def loss_dict(p, x):
    out = layer_dict(p, x)
    return np.sum(out["y"] * out["z"][0]) + np.sum(out["z"] ** 2)


def loss_constant(x, w):
    a, b = layer_and_constant(x, w)
    return np.sum(a * b[0])


EXAMPLE_LOSSES = {"layer": loss_layer, "pair": loss_pair, "dict": loss_dict,
                  "constant": loss_constant}


def restacked(x):
    rows = []
    for i in range(x.shape[0]):
        rows.append(np.sin(x[i]) * x[i])
    out = lax.map(np.tanh, np.stack(rows))
    out = np.moveaxis(out, 0, 1)
    return np.sum(out * np.arange(out.size).reshape(out.shape))


# ----------------------------------------------------------------- asserts per lane

def checked_scale(x):
    y = x * 2.0
    assert np.allclose(y / 2.0, x), "halving failed"
    assert np.all(np.isfinite(y))
    return np.sum(y * y)


def checked_log(x):
    assert np.all(x > 0), "log of a non-positive number"
    return np.sum(np.log(x))


def checked_in_branch(x):
    s = np.sum(x)
    if s > 0:
        assert np.all(x > -10.0), "positive sum with a huge negative entry"
        out = s * 2.0
    else:
        assert s <= 0
        out = -s
    return out


def checked_in_branch_only_some(x):
    """The assert fails for the lanes with sum <= 0, but those never run it."""
    s = np.sum(x)
    if s > 0:
        assert s > 0, "only lanes with a positive sum get here"
        out = s * 3.0
    else:
        out = s
    return out


def make_losses_of(vf, ws, kind):
    """A scalar loss of an already transformed (e.g. jitted) vmapped function."""
    def loss(a, b):
        return weigh(vf(a, b), ws, kind)
    return loss


def lax_scan_pair(x):
    """A tuple output from lax control flow (for out_axes pytrees)."""
    c, ys = lax_scan(x)
    return ys * np.tanh(c), lax.fori_loop(0, 3, lambda i, acc: acc * 0.5 + x, x)


def lax_through_vmap(xs):
    ys, zs = astjax.vmap(lax_scan_pair, in_axes=1, out_axes=(1, -1))(xs)
    return np.sum(ys * np.arange(ys.size).reshape(ys.shape)) + np.sum(np.sin(zs))


def inner(g, v):
    """<g, v> for an array or a dict of arrays (written out: no tree_util calls)."""
    if isinstance(v, dict):
        return np.sum(g["w"] * v["w"]) + np.sum(g["b"] * v["b"])
    return np.sum(g * v)


def gp_objective_nested_defs(ell, xs):
    """The Gaussian-process pattern written with nested defs handed to vmap."""
    def kernel_row_local(x, ys):
        def k(y):
            return rbf(x, y, ell)
        return astjax.vmap(k)(ys)

    def row(x):
        return kernel_row_local(x, xs)
    K = astjax.vmap(row)(xs)
    K = K + 0.5 * np.eye(xs.shape[0])
    alpha = np.linalg.solve(K, np.ones(xs.shape[0]))
    return np.sum(alpha) + np.sum(np.log(np.diag(K)))


gp_lambda_row = lambda x, ys, ell: astjax.vmap(lambda y: rbf(x, y, ell))(ys)  # noqa: E731


def gp_objective_lambdas(ell, xs):
    K = astjax.vmap(gp_lambda_row, (0, None, None))(xs, xs, ell)
    K = K + 0.5 * np.eye(xs.shape[0])
    alpha = np.linalg.solve(K, np.ones(xs.shape[0]))
    return np.sum(alpha) + np.sum(np.log(np.diag(K)))
