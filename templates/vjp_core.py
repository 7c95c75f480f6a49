"""Vector-Jacobian products of the core-form primitives (see ``astjax/core_prims.py``).

Same convention as ``templates/vjp.py``: ``def <primitive>(g, ans, <params>)``
returning one cotangent per differentiable parameter.
"""
import numpy as np

from astjax import runtime as rt
from astjax import runtime_array as ra
from astjax import runtime_batch as rb


def make_tuple(g, ans, *items):
    return rt.seq_cotangents(g, len(items))


def make_list(g, ans, *items):
    return rt.seq_cotangents(g, len(items))


def make_dict(g, ans, keys, *values):
    return rt.dict_cotangents(g, keys)


def append(g, ans, lst, item):
    # lst is not passed: reading it would save a stand-in of the list at every append
    # (``x = append(x, item)`` takes ReverseAD.append_adjoint instead)
    parts = rt.append_cotangents(g, None)
    return parts[0], parts[1]


def last_cotangent(ct, ans, g):
    return rt.append_cotangents_vjp((None, ct), g)


def drop_last_cotangent(ct, ans, g):
    return rt.append_cotangents_vjp((ct, None), g)


def to_list(g, ans, x):
    return rt.list_cotangent(g, x)


def acc(g, ans, a, b):
    return g, g


def getattr(g, ans, x, name):
    return rt.attr_cotangent(g, x, name)


def tree_index(g, ans, xs, i):
    return rt.tree_index_vjp(g, xs, i)


def tree_stack(g, ans, ys, reverse):
    # the step count is read off the stack (ans), not the list of steps (see the helper)
    return rt.unstack_cotangent(g, ans, reverse)


def as_sequence(g, ans, x):
    return rt.as_sequence_cotangent(g, x)


def instantiate(ct, ans, g, x):
    return ct


def cot_or_zero(ct, ans, g, x):
    return ct


def check_scalar_output(ct, ans, value, fname):
    return ct


def cot_at(ct, ans, g, index):
    return rt.cot_at_vjp(ct, g, index)


def cot_written(ct, ans, g, index):
    return rt.cot_written_vjp(ct, g, index)


def cot_zero_at(ct, ans, g, index):
    return rt.cot_zero_at(ct, index)


def seq_cotangents(ct, ans, g, n):
    return rt.list_cotangent(ct, g)


def dict_cotangents(ct, ans, g, keys):
    return rt.dict_from_values(ct, keys)


def list_cotangent(ct, ans, g, x):
    return rt.list_cotangent(ct, g)


def append_cotangents(ct, ans, g, lst):
    return rt.append_cotangents_vjp(ct, g)


def as_sequence_cotangent(ct, ans, g, x):
    return rt.as_sequence_cotangent(ct, x)


def tree_index_vjp(ct, ans, g, xs, i):
    return rt.tree_index(ct, i)


def tree_unstack_cotangent(ct, ans, g, ys, reverse):
    return rt.tree_restack(ct, ys, reverse)


def unstack_cotangent(ct, ans, g, stacked, reverse):
    return rt.restack_cotangent(ct, stacked, reverse)


def restack_cotangent(ct, ans, cts, stacked, reverse):
    return rt.unstack_cotangent(ct, stacked, reverse)


def attr_cotangent(ct, ans, g, x, name):
    return rt.attr_of(ct, name)


def acc_at(ct, ans, d, x, index, g):
    return ct, rt.cot_at(ct, index)


def place_at(ct, ans, g, x, index, fill):
    return rt.cot_at(ct, index)


def acc_step(ct, ans, d, xs, i, g):
    return ct, rt.tree_index(ct, i)


def compact(g, ans, y):
    return g


def tangent_set(g, ans, t, index, v_dot, like):
    return rt.cot_zero_at(g, index), ra.unbroadcast(rt.cot_written(g, index), v_dot)


def pack_tuple(g, ans, items):
    return rt.pack_tuple(g)


def pack_list(g, ans, items):
    return rt.pack_list(g)


def make_dict_from(g, ans, keys, values):
    return rt.dict_cotangents(g, keys)


def append_tangent(g, ans, lst_dot, item_dot, lst):
    parts = rt.append_cotangents(g, lst)
    return parts[0], parts[1]


def list_tangent(g, ans, x_dot, x):
    return rt.list_cotangent(g, x_dot)


def to_last(g, ans, x, axis):
    return rb.from_last(g, axis, None, True)


def from_last(g, ans, x, axis, size, batched):
    return rb.from_last_vjp(g, axis, batched)


def tree_moveaxis(g, ans, x, source, destination):
    return rt.tree_moveaxis(g, destination, source)


# Third and higher derivatives: the second-order container pieces are linear in their
# cotangent; each rule is the transpose of the piece.


def cot_at_vjp(h, ans, ct, g, index):
    return rt.cot_at(h, index)


def cot_written_vjp(h, ans, ct, g, index):
    return rt.cot_written(h, index)


def dict_from_values(h, ans, values, keys):
    return rt.dict_cotangents(h, keys)


def append_cotangents_vjp(h, ans, ct, like):
    return rt.append_cotangents(h, None)


def save_at(g, ans, x, index):
    # the saved part of an in-place update is x[index] (grad of code that updates in place)
    return rt.cot_at_vjp(g, x, index)


def detach(g, ans, x):
    return g


# transposes of the linear cotangent helpers (third and higher orders reach them)
def tree_restack(g, ans, cts, ys, reverse):
    return rt.tree_unstack_cotangent(g, ys, reverse)


def attr_of(g, ans, x, name):
    return rt.attr_cotangent(g, x, name)


# pytrees in transformed code (astjax/frontend/tree_calls.py): each is linear in its
# data, and these four are each other's transposes
def tree_leaves_of(g, ans, x):
    return rb.tree_from_leaves(g, x)


def tree_unflatten_of(g, ans, treedef, leaves):
    return rb.tree_leaves_like(g, treedef)


def tree_from_leaves(g, ans, leaves, like):
    return rb.tree_leaves_like(g, like)


def tree_leaves_like(g, ans, t, like):
    return rb.tree_from_leaves(g, like)


# custom rules: the check of a user rule's result is the identity
def custom_cotangents(g, ans, cts, n, what):
    return g


# ------------------------------------------- matrix products saved by checkpoint


def saved_dot(g, ans, value, a, b):
    return ra.dot_grad_a(g, a, b), ra.dot_grad_b(g, a, b)


def saved_matmul(g, ans, value, x, y):
    x2 = np.reshape(x, ra.matmul_shape(x, y, 0))
    y2 = np.reshape(y, ra.matmul_shape(x, y, 1))
    g2 = np.reshape(g, ra.matmul_shape(x, y, 2))
    gx = ra.unbroadcast(np.matmul(g2, np.swapaxes(y2, -1, -2)), x2)
    gy = ra.unbroadcast(np.matmul(np.swapaxes(x2, -1, -2), g2), y2)
    return np.reshape(gx, np.shape(x)), np.reshape(gy, np.shape(y))
