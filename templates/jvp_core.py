"""Jacobian-vector products of the core-form primitives (``astjax/core_prims.py``).

Same convention as ``templates/jvp.py``: ``def <primitive>(ans, <params>, d<param>...)``
returning the tangent of the result.  A tangent argument may be None (zero): these
rules only pass tangents to runtime helpers that accept None.
"""
import numpy as np

from astjax import runtime as rt
from astjax import runtime_batch as rb


def make_tuple(ans, *items, ditems=None):
    return rt.pack_tuple(ditems)


def make_list(ans, *items, ditems=None):
    return rt.pack_list(ditems)


def make_dict(ans, keys, *values, dvalues=None):
    return rt.make_dict_from(keys, dvalues)


def append(ans, lst, item, dlst=None, ditem=None):
    return rt.append_tangent(dlst, ditem, lst)


def to_list(ans, x, dx=None):
    return rt.list_tangent(dx, x)


def acc(ans, a, b, da=None, db=None):
    return rt.acc(da, db)


def getattr(ans, x, name, dx=None):
    return rt.attr_of(dx, name)


def as_sequence(ans, x, dx=None):
    return rt.as_sequence_cotangent(dx, x)


def tree_index(ans, xs, i, dxs=None):
    return rt.tree_index(dxs, i)


def tree_stack(ans, ys, reverse, dys=None):
    return rt.tree_restack(dys, ys, reverse)


def compact(ans, y, dy=None):
    return rt.compact(dy)


def instantiate(ans, g, x, dg=None):
    return rt.instantiate(dg, x)


def cot_or_zero(ans, g, x, dg=None):
    return rt.instantiate(dg, ans)


def check_scalar_output(ans, value, fname, dvalue=None):
    return rt.compact(dvalue)


def cot_at(ans, g, index, dg=None):
    # an entry of a container tangent may be None (zero): a value gets real zeros
    return rt.instantiate(rt.cot_at(dg, index), ans)


def cot_written(ans, g, index, dg=None):
    return rt.instantiate(rt.cot_written(dg, index), ans)


def cot_zero_at(ans, g, index, dg=None):
    return rt.cot_zero_at(dg, index)


def seq_cotangents(ans, g, n, dg=None):
    return rt.seq_cotangents(dg, n)


def dict_cotangents(ans, g, keys, dg=None):
    return rt.dict_cotangents(dg, keys)


def list_cotangent(ans, g, x, dg=None):
    return rt.list_cotangent(dg, x)


def last_cotangent(ans, g, dg=None):
    # an entry of a list's tangent may be None where the entry itself is not
    return rt.instantiate(rt.last_cotangent(dg), ans)


def drop_last_cotangent(ans, g, dg=None):
    return rt.drop_last_cotangent(dg)


def append_cotangents(ans, g, lst, dg=None):
    return rt.append_cotangents(dg, lst)


def acc_at(ans, d, x, index, g, dd=None, dg=None):
    return rt.acc_at(dd, x, index, dg)


def place_at(ans, g, x, index, fill, dg=None):
    return rt.acc_at(None, x, index, dg)


def acc_step(ans, d, xs, i, g, dd=None, dg=None):
    return rt.acc_step(dd, xs, i, dg)


def as_sequence_cotangent(ans, g, x, dg=None):
    return rt.as_sequence_cotangent(dg, x)


def tree_index_vjp(ans, g, xs, i, dg=None):
    return rt.tree_index_vjp(dg, xs, i)


def tree_unstack_cotangent(ans, g, ys, reverse, dg=None):
    return rt.tree_unstack_cotangent(dg, ys, reverse)


def unstack_cotangent(ans, g, stacked, reverse, dg=None):
    return rt.unstack_cotangent(dg, stacked, reverse)


def restack_cotangent(ans, cts, stacked, reverse, dcts=None):
    return rt.restack_cotangent(dcts, stacked, reverse)


def attr_cotangent(ans, g, x, name, dg=None):
    return rt.attr_cotangent(dg, x, name)


def tangent_set(ans, t, index, v_dot, like, dt=None, dv_dot=None):
    return rt.tangent_set(dt, index, dv_dot, like)


def pack_tuple(ans, items, ditems=None):
    return rt.pack_tuple(ditems)


def pack_list(ans, items, ditems=None):
    return rt.pack_list(ditems)


def make_dict_from(ans, keys, values, dvalues=None):
    return rt.make_dict_from(keys, dvalues)


def append_tangent(ans, lst_dot, item_dot, lst, dlst_dot=None, ditem_dot=None):
    return rt.append_tangent(dlst_dot, ditem_dot, lst)


def list_tangent(ans, x_dot, x, dx_dot=None):
    return rt.list_tangent(dx_dot, x)


def to_last(ans, x, axis, dx=None):
    return rb.to_last(dx, axis)


def from_last(ans, x, axis, size, batched, dx=None):
    return rb.from_last(dx, axis, size, batched)


def tree_moveaxis(ans, x, source, destination, dx=None):
    return rt.tree_moveaxis(dx, source, destination)


def cot_at_vjp(ans, ct, g, index, dct=None):
    return rt.cot_at_vjp(dct, g, index)


def cot_written_vjp(ans, ct, g, index, dct=None):
    return rt.cot_written_vjp(dct, g, index)


def dict_from_values(ans, values, keys, dvalues=None):
    return rt.dict_from_values(dvalues, keys)


def append_cotangents_vjp(ans, ct, like, dct=None):
    return rt.append_cotangents_vjp(dct, like)


def save_at(ans, x, index, dx=None):
    return rt.save_at(dx, index)


def detach(ans, x, dx=None):
    return rt.detach(dx)


# linear helpers of the cotangent code: their tangent is the helper of the tangent
def tree_restack(ans, cts, ys, reverse, dcts=None):
    return rt.tree_restack(dcts, ys, reverse)


def attr_of(ans, x, name, dx=None):
    return rt.attr_of(dx, name)


# pytrees in transformed code (astjax/frontend/tree_calls.py): linear in their data
def tree_leaves_of(ans, x, dx=None):
    return rb.tree_leaves_like(dx, x)


def tree_unflatten_of(ans, treedef, leaves, dleaves=None):
    return rb.tree_unflatten_of(treedef, dleaves)


def tree_from_leaves(ans, leaves, like, dleaves=None):
    return rb.tree_from_leaves(dleaves, like)


def tree_leaves_like(ans, t, like, dt=None):
    return rb.tree_leaves_like(dt, like)


# custom rules: the check of a user rule's result is the identity
def custom_cotangents(ans, cts, n, what, dcts=None):
    return rt.detach(dcts)


# ------------------------------------------- matrix products saved by checkpoint


def saved_dot(ans, value, a, b, da=None, db=None):
    return np.dot(da, b) + np.dot(a, db)


def saved_matmul(ans, value, x, y, dx=None, dy=None):
    return np.matmul(dx, y) + np.matmul(x, dy)
