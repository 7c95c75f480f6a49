"""Batching rules: one per primitive that is not elementwise.

``def <primitive>(<params as in Primitive.params>)``: every array operand arrives with
the batch as its last axis (an unbatched one lifted to a trailing axis of size 1), the
other parameters (axis, shape, index...) are written for one example.  The rule returns
the batched result, batch axis last.  Elementwise and comparison primitives need no rule:
broadcasting does it.  Bodies are inlined like the other templates: straight-line code.
"""
import numpy as np

from astjax import runtime as rt
from astjax import runtime_array as ra
from astjax import runtime_batch as rb


# ------------------------------------------------------------------ static facts

def shape(a):
    return rb.shape(a)


def ndim(a):
    return rb.ndim(a)


def size(a, axis=None):
    return rb.size(a)


def len(obj):
    return rb.length(obj)


# -------------------------------------------------------------------- reductions

def sum(a, axis=None, dtype=None, out=None, keepdims=False):
    return np.sum(a, axis=rb.axis(axis, a), dtype=dtype, keepdims=keepdims)


def mean(a, axis=None, dtype=None, out=None, keepdims=False):
    return np.mean(a, axis=rb.axis(axis, a), dtype=dtype, keepdims=keepdims)


def prod(a, axis=None, dtype=None, out=None, keepdims=False):
    return np.prod(a, axis=rb.axis(axis, a), dtype=dtype, keepdims=keepdims)


def max(a, axis=None, out=None, keepdims=False):
    return np.max(a, axis=rb.axis(axis, a), keepdims=keepdims)


def min(a, axis=None, out=None, keepdims=False):
    return np.min(a, axis=rb.axis(axis, a), keepdims=keepdims)


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    return np.var(a, axis=rb.axis(axis, a), dtype=dtype, ddof=ddof, keepdims=keepdims)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    return np.std(a, axis=rb.axis(axis, a), dtype=dtype, ddof=ddof, keepdims=keepdims)


def any(a, axis=None, out=None, keepdims=False):
    return np.any(a, axis=rb.axis(axis, a), keepdims=keepdims)


def all(a, axis=None, out=None, keepdims=False):
    return np.all(a, axis=rb.axis(axis, a), keepdims=keepdims)


def argmax(a, axis=None, out=None, keepdims=False):
    return rb.argreduce(np.argmax, a, axis, keepdims)


def argmin(a, axis=None, out=None, keepdims=False):
    return rb.argreduce(np.argmin, a, axis, keepdims)


def cumsum(a, axis=None, dtype=None, out=None):
    return rb.cumulative(np.cumsum, a, axis, dtype)


def cumprod(a, axis=None, dtype=None, out=None):
    return rb.cumulative(np.cumprod, a, axis, dtype)


def norm(x, ord=None, axis=None, keepdims=False):
    return rb.norm(x, ord, axis, keepdims)


def count_nonzero(a, axis=None, keepdims=False):
    return np.count_nonzero(a, axis=rb.axis(axis, a), keepdims=keepdims)


# ------------------------------------------------------------------------ products

def dot(a, b, out=None):
    return rb.dot(a, b)


def matmul(x, y, out=None):
    return rb.matmul(x, y)


def outer(a, b, out=None):
    return rb.outer(a, b)


def vdot(a, b):
    return np.sum(rb.flat(a) * rb.flat(b), axis=0)


def inner(a, b):
    return rb.inner(a, b)


def einsum(subscripts, *operands, out=None, optimize=False):
    return rb.einsum(subscripts, operands)


# --------------------------------------------------------------------------- shapes

def reshape(a, shape, order="C"):
    return np.reshape(a, rb.shape_with_batch(shape, a))


def ravel(a, order="C"):
    return np.reshape(a, rb.shape_with_batch(-1, a))


def flatten(a, order="C"):
    return np.reshape(a, rb.shape_with_batch(-1, a))


def transpose(a, axes=None):
    return np.transpose(a, rb.permutation(axes, a))


def matrix_transpose(x):
    return np.swapaxes(x, -2, -3)


def swapaxes(a, axis1, axis2):
    return np.swapaxes(a, rb.axis(axis1, a), rb.axis(axis2, a))


def moveaxis(a, source, destination):
    return np.moveaxis(a, rb.axis(source, a), rb.axis(destination, a))


def expand_dims(a, axis):
    return np.expand_dims(a, rb.new_axis(axis, a))


def squeeze(a, axis=None):
    return np.squeeze(a, axis=rb.squeeze_axes(axis, a))


def concatenate(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    return rb.concatenate(arrays, axis)


def stack(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    return rb.stack(arrays, axis)


def vstack(tup, dtype=None, casting="same_kind"):
    return rb.concatenate(rb.atleast_2d_all(tup), 0)


def hstack(tup, dtype=None, casting="same_kind"):
    return rb.hstack(tup)


def split(ary, indices_or_sections, axis=0):
    return np.split(ary, indices_or_sections, axis=rb.axis(axis, ary))


def pad(array, pad_width, mode="constant", constant_values=0):
    return ra.pad(array, rb.pad_width(pad_width, array), mode, constant_values)


def take(a, indices, axis=None, out=None, mode="raise"):
    return rb.take(a, indices, axis, mode)


def repeat(a, repeats, axis=None):
    return rb.repeat(a, repeats, axis)


def flip(m, axis=None):
    return np.flip(m, axis=rb.axis(axis, m))


def roll(a, shift, axis=None):
    return rb.roll(a, shift, axis)


def broadcast_to(array, shape, subok=False):
    return np.broadcast_to(array, rb.shape_with_batch(shape, array))


def diagonal(a, offset=0, axis1=0, axis2=1):
    return np.moveaxis(np.diagonal(a, offset, rb.axis(axis1, a), rb.axis(axis2, a)), -1, -2)


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    return np.trace(a, offset, rb.axis(axis1, a), rb.axis(axis2, a), dtype=dtype)


def sort(a, axis=-1, kind=None, order=None, stable=None):
    return np.sort(a, axis=rb.axis(axis, a))


def argsort(a, axis=-1, kind=None, order=None, stable=None):
    return np.argsort(a, axis=rb.axis(axis, a))


# ------------------------------------------------------------------------ creation

def np_zeros_like(a, dtype=None, order="K", subok=True, shape=None):
    return np.zeros_like(a, dtype=dtype)


def np_ones_like(a, dtype=None, order="K", subok=True, shape=None):
    return np.ones_like(a, dtype=dtype)


def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None):
    return rb.full_like(a, fill_value, dtype)


def astype(x, dtype, order="K", casting="unsafe", subok=True, copy=True):
    return ra.astype(x, dtype)


def copy(a, order="K", subok=False):
    return np.copy(a)


def asarray(a, dtype=None, order=None, copy=None):
    return rb.asarray(a, dtype)


def array(object, dtype=None, copy=True, order="K", subok=False, ndmin=0):
    return rb.asarray(object, dtype)


# --------------------------------------------------------------- core form helpers

def not_(x):
    return np.logical_not(x)


def no_flags(*flags):
    return rb.no_flags(flags)


def any_flag(*flags):
    return rb.any_flags(flags)


def zeros_like(x):
    return rt.zeros_like(x)


def ones_like(x):
    return rt.ones_like(x)


def instantiate(g, x):
    return rt.instantiate(g, x)


def unbroadcast(t, x):
    return rb.unbroadcast(t, x)


def unreduce(t, x, axis=None, keepdims=False):
    return rb.unreduce(t, x, axis, keepdims)


def getitem_vjp(t, x, index):
    return rb.getitem_vjp(t, x, index)


def acc_at(d, x, index, g):
    return rb.acc_at(d, x, index, g)


def dot_grad_a(t, a, b):
    return rb.dot_grad(t, a, b, 0)


def dot_grad_b(t, a, b):
    return rb.dot_grad(t, a, b, 1)


def add_cot(t, x, y, which=0):
    return rb.unbroadcast(t, rb.pick(x, y, which))


def cast_like(t, x):
    return ra.cast_like(t, x)


def broadcast_like(t, x):
    return rb.broadcast_like(t, x)


def meta(x):
    return rt.meta(x)


def cot_at(g, index):
    return rt.cot_at(g, rb.index(index))


def cot_zero_at(g, index):
    return rt.cot_zero_at(g, rb.index(index))


def save_at(x, index):
    return rt.save_at(x, rb.index(index))


def check_scalar_output(value, fname):
    return rb.check_scalar_output(value, fname)
