"""Batching rules: one per primitive that is not elementwise.

``def <primitive>(<params as in Primitive.params>)``: every array operand arrives with
the batch as its last axis (an unbatched one lifted to a trailing axis of size 1), the
other parameters (axis, shape, index...) are written for one example.  The rule returns
the batched result, batch axis last.  Elementwise and comparison primitives need no rule:
broadcasting does it.  Bodies are inlined like the other templates: straight-line code;
the logic lives in ``astjax/runtime_batch.py`` (``rb``).

Rules of static facts (shapes, axes, plans) return the fact for ONE example: vmap
treats their results as unbatched (``transforms/batch.py``).  A rule whose primitive
cannot be batched (its output's size would differ per example) raises a clear error
through ``rb.refuse``.
"""
import numpy as np

from astjax import runtime as rt
from astjax import runtime_array as ra
from astjax import runtime_batch as rb


# ------------------------------------------------------------------ static facts

def shape(a):
    return rb.shape(a)


def np_shape(a):
    return rb.shape(a)


def ndim(a):
    return rb.ndim(a)


def size(a, axis=None):
    return rb.size(a, axis)


def len(obj):
    return rb.length(obj)


def contains(container, item):
    return rb.contains(container, item)


def dtype(x):
    return ra.dtype_of(x)


def reduced_size(x, axis=None):
    return ra.reduced_size(rb.example(x), axis)


def tensordot_plan(a, b, axes=2, which=0):
    return ra.tensordot_plan(rb.example(a), rb.example(b), axes, which)


def dot_axes(a, b):
    return ra.dot_axes(rb.example(a), rb.example(b))


def inner_axes(a, b):
    return ra.inner_axes(rb.example(a), rb.example(b))


def matmul_shape(x, y, which=0):
    return ra.matmul_shape(rb.example(x), rb.example(y), which)


def kron_plan(a, b, which=0):
    return ra.kron_plan(rb.example(a), rb.example(b), which)


def col_shape(x, b):
    return ra.col_shape(rb.example(x), rb.example(b))


def item_index(a, args):
    return ra.item_index(rb.example(a), args)


def eye_last(x):
    return ra.eye_last(rb.example(x))


def scan_length(xs, length):
    return rt.scan_length(rb.example(xs), length)


def clamp_index(index, n):
    return rb.clamp_index(index, n)


def range(start, stop=None, step=None):
    return rb.refuse("range() with a per-example bound", "its length differs per example")


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


def nanmax(a, axis=None, out=None, keepdims=False):
    return np.nanmax(a, axis=rb.axis(axis, a), keepdims=keepdims)


def nanmin(a, axis=None, out=None, keepdims=False):
    return np.nanmin(a, axis=rb.axis(axis, a), keepdims=keepdims)


def nansum(a, axis=None, dtype=None, out=None, keepdims=False):
    return np.nansum(a, axis=rb.axis(axis, a), dtype=dtype, keepdims=keepdims)


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False):
    return np.nanmean(a, axis=rb.axis(axis, a), dtype=dtype, keepdims=keepdims)


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    return np.var(a, axis=rb.axis(axis, a), dtype=dtype, ddof=ddof, keepdims=keepdims)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    return np.std(a, axis=rb.axis(axis, a), dtype=dtype, ddof=ddof, keepdims=keepdims)


def any(a, axis=None, out=None, keepdims=False):
    return np.any(a, axis=rb.axis(axis, a), keepdims=keepdims)


def all(a, axis=None, out=None, keepdims=False):
    return np.all(a, axis=rb.axis(axis, a), keepdims=keepdims)


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return rb.allclose(a, b, rtol, atol, equal_nan)


def array_equal(a1, a2, equal_nan=False):
    return rb.array_equal(a1, a2, equal_nan)


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


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    return np.trace(a, offset, rb.axis(axis1, a), rb.axis(axis2, a), dtype=dtype)


def py_sum(iterable, start=0):
    return ra.py_sum(iterable, start)


def py_max(*args, key=None):
    return rb.py_extreme(args, key, "max")


def py_min(*args, key=None):
    return rb.py_extreme(args, key, "min")


# ------------------------------------------------------------------------ products

def dot(a, b, out=None):
    return rb.dot(a, b)


def matmul(x, y, out=None):
    return rb.matmul(x, y)


def vecdot(x, y, out=None, axis=-1):
    return rb.vecdot(x, y, axis)


def outer(a, b, out=None):
    return rb.outer(a, b)


def vdot(a, b):
    return np.sum(rb.flat(np.conj(a)) * rb.flat(b), axis=0)


def inner(a, b):
    return rb.inner(a, b)


def tensordot(a, b, axes=2):
    return rb.tensordot(a, b, axes)


def einsum(*operands, out=None, optimize=False):
    return rb.einsum(None, operands, optimize)


def kron(a, b):
    return rb.kron(a, b)


# ------------------------------------------------------------------ linear algebra

def inv(a):
    return rb.linalg(np.linalg.inv, a)


def det(a):
    return rb.linalg(np.linalg.det, a)


def slogdet(a):
    return rb.linalg(np.linalg.slogdet, a)


def solve(a, b):
    return rb.solve(a, b)


def cholesky(a, upper=False):
    return rb.linalg(np.linalg.cholesky, a, upper=upper)


def eigh(a, UPLO="L"):
    return rb.linalg(np.linalg.eigh, a, UPLO=UPLO)


def eigvalsh(a, UPLO="L"):
    return rb.linalg(np.linalg.eigvalsh, a, UPLO=UPLO)


def chol_lower(x, upper=False):
    return rb.chol_lower(x, upper)


# --------------------------------------------------------------------------- shapes

def reshape(a, shape, order="C"):
    return rb.reshape(a, shape, order)


def ravel(a, order="C"):
    return rb.reshape(a, -1, order)


def flatten(a, order="C"):
    return np.copy(rb.reshape(a, -1, order))


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


def broadcast_to(array, shape, subok=False):
    return np.broadcast_to(array, rb.shape_with_batch(shape, array))


def atleast_1d(*arys):
    return rb.atleast(1, arys)


def atleast_2d(*arys):
    return rb.atleast(2, arys)


def atleast_3d(*arys):
    return rb.atleast(3, arys)


def concatenate(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    return rb.concatenate(arrays, axis)


def stack(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    return rb.stack(arrays, axis)


def vstack(tup, dtype=None, casting="same_kind"):
    return rb.concatenate(rb.atleast_all(2, tup), 0)


def hstack(tup, dtype=None, casting="same_kind"):
    return rb.hstack(tup)


def dstack(tup):
    return rb.concatenate(rb.atleast_all(3, tup), 2)


def column_stack(tup):
    return rb.column_stack(tup)


def split(ary, indices_or_sections, axis=0):
    return np.split(ary, indices_or_sections, axis=rb.split_axis(ary, "split", axis))


def array_split(ary, indices_or_sections, axis=0):
    return np.array_split(ary, indices_or_sections, axis=rb.split_axis(ary, "split", axis))


def hsplit(ary, indices_or_sections):
    return np.split(ary, indices_or_sections, axis=rb.split_axis(ary, "hsplit", 0))


def vsplit(ary, indices_or_sections):
    return np.split(ary, indices_or_sections, axis=rb.split_axis(ary, "vsplit", 0))


def dsplit(ary, indices_or_sections):
    return np.split(ary, indices_or_sections, axis=rb.split_axis(ary, "dsplit", 0))


def tile(A, reps):
    return rb.tile(A, reps)


def repeat(a, repeats, axis=None):
    return rb.repeat(a, repeats, axis)


def flip(m, axis=None):
    return np.flip(m, axis=rb.axis(axis, m))


def fliplr(m):
    return np.flip(m, axis=1)


def flipud(m):
    return np.flip(m, axis=0)


def rot90(m, k=1, axes=(0, 1)):
    return np.rot90(m, k, axes=rb.axis(axes, m))


def roll(a, shift, axis=None):
    return rb.roll(a, shift, axis)


def roll_per_example_shift(a, shift, axis=None):
    # (transforms/batch.py: _PER_EXAMPLE_OPTIONS) each example rolled by its own shift
    return rb.per_lane(np.roll, (0, 1), a, shift, axis)


def pad(array, pad_width, mode="constant", constant_values=0):
    return ra.pad(array, rb.pad_width(pad_width, array), mode, constant_values)


def diagonal(a, offset=0, axis1=0, axis2=1):
    return np.moveaxis(np.diagonal(a, offset, rb.axis(axis1, a), rb.axis(axis2, a)), -1, -2)


def diag(v, k=0):
    return rb.diag(v, k)


def tril(m, k=0):
    return rb.tri_mask(m, k, True)


def triu(m, k=0):
    return rb.tri_mask(m, k, False)


def diff(a, n=1, axis=-1, prepend=None, append=None):
    return rb.diff(a, n, axis, prepend, append)


# -------------------------------------------------------------- sorting, gathering

def sort(a, axis=-1, kind=None, order=None, stable=None):
    return rb.sorted_along(np.sort, a, axis, kind, stable)


def argsort(a, axis=-1, kind=None, order=None, stable=None):
    return rb.sorted_along(np.argsort, a, axis, kind, stable)


def searchsorted(a, v, side="left", sorter=None):
    return rb.searchsorted(a, v, side, sorter)


def nonzero(a):
    return rb.refuse("np.nonzero")


def argwhere(a):
    return rb.refuse("np.argwhere")


def flatnonzero(a):
    return rb.refuse("np.flatnonzero")


def take(a, indices, axis=None, out=None, mode="raise"):
    return rb.take(a, indices, axis, mode)


def take_along_axis(arr, indices, axis=-1):
    return rb.take_along_axis(arr, indices, axis)


def getitem_per_example_index(x, index):
    return rb.gather(x, index)


def getitem_vjp_per_example_index(t, x, index):
    return rb.getitem_vjp_per_example(t, x, index)


def getitem_jvp_per_example_index(t, x, index):
    return rb.getitem_jvp_per_example(t, x, index)


def acc_at_per_example_index(d, x, index, g):
    return rb.acc_at_per_example(d, x, index, g)


def cot_at_per_example_index(g, index):
    return rb.cot_at_per_example(g, index)


def cot_written_per_example_index(g, index):
    return rb.cot_written_per_example(g, index)


def setitem_per_example_index(x, index, v):
    return rb.setitem_per_example(x, index, v)


def setitem_zero_per_example_index(t, index):
    return rb.setitem_per_example(t, index, 0.0)


def cot_zero_at_per_example_index(g, index):
    return rb.setitem_per_example(g, index, 0.0)


def save_at_per_example_index(x, index):
    return rb.save_at_per_example(x, index)


def restore_at_per_example_index(x, index, old):
    return rb.restore_at_per_example(x, index, old)


def setitem_jvp_per_example_index(t, index, tv, x):
    return rb.setitem_jvp_per_example(t, index, tv, x)


def tangent_set_per_example_index(t, index, v_dot, like):
    return rb.setitem_jvp_per_example(t, index, v_dot, like)


def setitem(x, index, v):
    return rb.setitem(x, index, v)


def item(a, *args):
    return rb.item(a, args)


# ------------------------------------------------------------------------ creation

def np_zeros_like(a, dtype=None, order="K", subok=True, shape=None):
    return rb.like(np.zeros_like, a, dtype, shape)


def np_ones_like(a, dtype=None, order="K", subok=True, shape=None):
    return rb.like(np.ones_like, a, dtype, shape)


def empty_like(prototype, dtype=None, order="K", subok=True, shape=None):
    return rb.like(np.empty_like, prototype, dtype, shape)


def full(shape, fill_value, dtype=None, order="C"):
    return rb.full(shape, fill_value, dtype)


def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None):
    return rb.full_like(a, fill_value, dtype)


def arange(start, stop=None, step=None, dtype=None):
    return rb.created(np.arange, "np.arange", start, stop, step, dtype)


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    return rb.linspace(start, stop, num, endpoint, retstep, dtype, axis)


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    return rb.logspace(start, stop, num, endpoint, base, dtype, axis)


def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    return rb.meshgrid(xi, copy, sparse, indexing)


def astype(x, dtype, order="K", casting="unsafe", subok=True, copy=True):
    return ra.astype(x, dtype)


def copy(a, order="K", subok=False):
    return np.copy(a)


def asarray(a, dtype=None, order=None, copy=None):
    return rb.asarray(a, dtype)


def array(object, dtype=None, copy=True, order="K", subok=False, ndmin=0):
    return rb.array(object, dtype, ndmin)


def py_float(x):
    return rb.py_float(x)


def py_int(x, base=10):
    return rb.py_int(x, base)


def py_round(number, ndigits=None):
    return rb.py_round(number, ndigits)


# ------------------------------------------- tapes that are popped into fresh names

def tag_unbatched(value):
    return rb.Unbatched(value)


def popped(value, size):
    return rb.popped(value, size)


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


def meta(x):
    return rt.meta(x)


def cot_at(g, index):
    return rt.cot_at(g, rb.index(index))


def cot_written(g, index):
    return rt.cot_written(g, rb.index(index))


def cot_zero_at(g, index):
    return rt.cot_zero_at(g, rb.index(index))


def cot_at_vjp(ct, g, index):
    return rb.cot_at_vjp(ct, g, index)


def cot_written_vjp(ct, g, index):
    return rb.cot_written_vjp(ct, g, index)


def save_at(x, index):
    return rt.save_at(x, rb.index(index))


def restore_at(x, index, old):
    return rt.restore_at(x, rb.index(index), old)


def acc_at(d, x, index, g):
    return rb.acc_at(d, x, index, g)


def place_at(g, x, index, fill):
    return rb.place_at(g, x, index, fill)


def acc_step(d, xs, i, g):
    return rb.acc_step(d, xs, i, g)


def check_scalar_output(value, fname):
    return rb.check_scalar_output(value, fname)


def tree_index_vjp(g, xs, i):
    return rb.tree_index_vjp(g, xs, i)


def tree_restack(cts, ys, reverse):
    return rb.tree_restack(cts, ys, reverse)


def restack_cotangent(cts, stacked, reverse):
    return rb.restack_cotangent(cts, stacked, reverse)


def list_cotangent(g, x):
    return rb.list_cotangent(g, x)


def tangent_set(t, index, v_dot, like):
    return rb.tangent_set(t, index, v_dot, like)


# ------------------------------------------------- helpers of generated gradient code

def unbroadcast(t, x):
    return rb.unbroadcast(t, x)


def broadcast_like(t, x):
    return rb.broadcast_like(t, x)


def unreduce(t, x, axis=None, keepdims=False):
    return rb.unreduce(t, x, axis, keepdims)


def real_only(value, x, what):
    return ra.real_only(value, x, what)


def cast_like(t, x):
    return ra.cast_like(t, x)


def refuse_item_update(container, item, others, update):
    # (one example's item: a number of every example is a batched vector)
    return rt.refuse_item_update(container, rb.example(item), rb.example(others), update)


def refuse_rebinding_update(value, others, update):
    # (one example's value: a number of every example is a batched vector)
    return rt.refuse_rebinding_update(rb.example(value), rb.example(others), update)


def zero_if_integer(t, x):
    return ra.zero_if_integer(t, x)


def none_if_integer(t, x):
    return ra.none_if_integer(t, x)


def cot_or_zeros(t, like):
    return ra.cot_or_zeros(t, like)


def add_cot(t, x, y, which=0):
    return rb.add_cot(t, x, y, which)


def dot_grad_a(t, a, b):
    return rb.dot_grad(t, a, b, 0)


def dot_grad_b(t, a, b):
    return rb.dot_grad(t, a, b, 1)


def extremum_weights(a, ans, axis=None, keepdims=False):
    return rb.extremum_weights(a, ans, axis, keepdims)


def clip_part(t, a, a_min=None, a_max=None, min=None, max=None, which=0):
    return ra.clip_part(t, a, a_min, a_max, min, max, which)


def fold_axes(x, axis=None):
    return rb.fold_axes(x, axis)


def unfold_axes(t, x, axis=None):
    return rb.unfold_axes(t, x, axis)


def prod_others_last(a):
    return rb.prod_others_last(a)


def getitem_vjp(t, x, index):
    return rb.getitem_vjp(t, x, index)


def setitem_zero(t, index):
    return rb.setitem_zero(t, index)


def diagonal_vjp(t, x, offset=0, axis1=0, axis2=1):
    return rb.diagonal_vjp(t, x, offset, axis1, axis2)


def diag_vjp(t, v, k=0):
    return rb.diag_vjp(t, v, k)


def tile_vjp(t, A, reps):
    return rb.tile_vjp(t, A, reps)


def repeat_vjp(t, a, repeats, axis=None):
    return rb.repeat_vjp(t, a, repeats, axis)


def pad_vjp(t, array, pad_width, mode="constant"):
    return rb.pad_vjp(t, array, pad_width, mode)


def take_vjp(t, a, indices, axis=None, mode="raise"):
    return rb.take_vjp(t, a, indices, axis, mode)


def take_along_axis_vjp(t, arr, indices, axis=-1):
    return rb.take_along_axis_vjp(t, arr, indices, axis)


def diff_vjp(t, a, n=1, axis=-1, prepend=None, append=None):
    return rb.diff_vjp(t, a, n, axis, prepend, append)


def diff_vjp_adj(s, a, n=1, axis=-1, prepend=None, append=None):
    return rb.diff_vjp_adj(s, a, n, axis, prepend, append)


def concat_vjp(t, arrays, axis=0, how="concatenate"):
    return rb.concat_vjp(t, arrays, axis, how)


def concat_cots(ts, arrays, axis=0, how="concatenate"):
    return rb.concat_cots(ts, arrays, axis, how)


def scatter_add(x, indices, v):
    return rb.per_lane(ra.scatter_add, (0, 2), x, indices, v)


def scatter_tangent(t, indices, tv, like):
    return rb.per_lane(ra.scatter_tangent, (0, 2, 3), t, indices, tv, like)


def meshgrid_cots(t, xi, sparse=False, indexing="xy"):
    return rb.per_lane(ra.meshgrid_cots, (0, 1), t, xi, sparse, indexing)


def meshgrid_of(ts, xi, sparse=False, indexing="xy"):
    return rb.per_lane(ra.meshgrid_of, (0, 1), ts, xi, sparse, indexing)


def unpack_variadic(t, xs):
    return rb.unpack_variadic(t, xs)


def pack_variadic(ts, t):
    return rb.pack_variadic(ts, t)


def asarray_vjp(t, a):
    return rb.asarray_vjp(t, a)


def pack_cots(ts, x):
    return rb.pack_cots(ts, x)


def py_sum_vjp(t, iterable):
    return rb.py_sum_vjp(t, iterable)


def sum_cots(ts, x):
    return rb.sum_cots(ts, x)


def py_max_vjp(t, chosen, args):
    return rb.per_lane(ra.py_max_vjp, (0, 1, 2), t, chosen, args)


def py_max_pick(ts, chosen, args):
    return rb.per_lane(ra.py_max_pick, (0, 1, 2), ts, chosen, args)


def norm_vjp(t, x, ord=None, axis=None, keepdims=False):
    return rb.norm_vjp(t, x, ord, axis, keepdims)


def norm_vjp_t(s, x, ord=None, axis=None, keepdims=False):
    return rb.norm_vjp_t(s, x, ord, axis, keepdims)


def norm_vjp_x(s, t, x, ord=None, axis=None, keepdims=False):
    return rb.per_lane(ra.norm_vjp_x, (0, 1, 2), s, t, x, ord, axis, keepdims)


def add_cot_vjp(s, t, x, y, which=0):
    return rb.add_cot_vjp(s, t, x, y, which)


def log_or_one(base):
    return ra.log_or_one(base)


def or_one(base):
    return ra.or_one(base)


# --------------------------------------------------- helpers of generated jvp code

def tangent_like(t, like):
    return rb.tangent_like(t, like)


def tangent_like_vjp(s, t, like):
    return rb.per_lane(ra.tangent_like_vjp, (0, 1, 2), s, t, like)


def getitem_jvp(t, x, index):
    return rb.getitem_jvp(t, x, index)


def setitem_jvp(t, index, tv, x):
    return rb.setitem_jvp(t, index, tv, x)


def sum_tangents(ts):
    return ra.sum_tangents(ts)


def pad_jvp(t, pad_width, mode="constant"):
    return ra.pad_jvp(t, rb.pad_width(pad_width, t), mode)


def norm_jvp(t, x, ord=None, axis=None, keepdims=False):
    return rb.norm_jvp(t, x, ord, axis, keepdims)


def norm_hvp(s, t, x, ord=None, axis=None, keepdims=False):
    return rb.per_lane(ra.norm_hvp, (0, 1, 2), s, t, x, ord, axis, keepdims)


def unsupported_jvp(what, *tangents):
    return ra.unsupported_jvp(what, *tangents)


def tree_moveaxis(x, source, destination):
    return rb.tree_moveaxis(x, source, destination)


def leaf_axis_size(x, axis):
    return rb.leaf_axis_size_batched(x, axis)


# ------------------------------------------------------------------ the NumPy surface

def index_concat(which, *items):
    return rb.per_lane(ra.index_concat_list, (1,), which, items)


def index_concat_vjp(t, which, items):
    return rb.per_lane(ra.index_concat_vjp, (0, 2), t, which, items)


def index_concat_jvp(ts, which, items):
    return rb.per_lane(ra.index_concat_jvp, (0, 2), ts, which, items)


def linspace_weights(ans, num, endpoint=True, retstep=False, axis=0):
    # a constant: the same for every example (a batch axis of one)
    return np.expand_dims(ra.linspace_weights(rb.example(ans), num, endpoint, retstep, axis), -1)


def uplo_t(x, UPLO="L"):
    return rb.linalg(ra.uplo_t, x, UPLO=UPLO)


# ------------------------------------------------------------------ decompositions

def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    return rb.linalg(np.linalg.svd, a, full_matrices=full_matrices, compute_uv=compute_uv,
                     hermitian=hermitian)


def svdvals(x):
    return rb.linalg(np.linalg.svdvals, x)


def qr(a, mode="reduced"):
    return rb.linalg(np.linalg.qr, a, mode=mode)


def eig(a):
    return rb.linalg(np.linalg.eig, a)


def eigvals(a):
    return rb.linalg(np.linalg.eigvals, a)


def pinv(a, rcond=None, hermitian=False, rtol=None):
    return rb.linalg(np.linalg.pinv, a, rcond=rcond, hermitian=hermitian, rtol=rtol)


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    return rb.per_lane(np.cross, (0, 1), a, b, axisa, axisb, axisc, axis)


def svd_parts(t, compute_uv=True):
    return ra.svd_parts(t, compute_uv)


def svd_pack(ts, compute_uv=True):
    return ra.svd_pack(ts, compute_uv)


def svd_index(s, which):
    return ra.svd_index(rb.example(s), which)


def qr_parts(t, a, mode="reduced"):
    return ra.qr_parts(t, rb.example(a), mode)


def qr_pack(ts, a, mode="reduced"):
    return ra.qr_pack(ts, rb.example(a), mode)


def eig_real(wv, w=None):
    return ra.eig_real(wv, w)


def real_parts(t):
    return ra.real_parts(t)


def cross_axes(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None, which=0):
    return ra.cross_axes(rb.example(a), rb.example(b), axisa, axisb, axisc, axis, which)


# ------------------------------------------------------------------ more of the NumPy surface

def rollaxis(a, axis, start=0):
    return np.transpose(a, rb.permutation(ra.rollaxis_perm(rb.example(a), axis, start), a))


def partition(a, kth, axis=-1, kind="introselect", order=None):
    return rb.per_lane(np.partition, (0,), a, kth, axis, kind, order)


def argpartition(a, kth, axis=-1, kind="introselect", order=None):
    return rb.per_lane(np.argpartition, (0,), a, kth, axis, kind, order)


def np_append(arr, values, axis=None):
    return rb.concatenate((arr, values), axis)


def fftshift(x, axes=None):
    return np.fft.fftshift(x, rb.axis(axes, x))


def ifftshift(x, axes=None):
    return np.fft.ifftshift(x, rb.axis(axes, x))


# np.fft: the per-example axes, non-negative, keep the batch axis out


def fft(a, n=None, axis=-1, norm=None, out=None):
    return np.fft.fft(a, n, rb.axis(axis, a), norm)


def ifft(a, n=None, axis=-1, norm=None, out=None):
    return np.fft.ifft(a, n, rb.axis(axis, a), norm)


def fft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    return np.fft.fft2(a, s, ra.fft_axes(rb.example(a), s, axes), norm)


def ifft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    return np.fft.ifft2(a, s, ra.fft_axes(rb.example(a), s, axes), norm)


def fftn(a, s=None, axes=None, norm=None, out=None):
    return np.fft.fftn(a, s, ra.fft_axes(rb.example(a), s, axes), norm)


def ifftn(a, s=None, axes=None, norm=None, out=None):
    return np.fft.ifftn(a, s, ra.fft_axes(rb.example(a), s, axes), norm)


def rfft(a, n=None, axis=-1, norm=None, out=None):
    return np.fft.rfft(a, n, rb.axis(axis, a), norm)


def rfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    return np.fft.rfft2(a, s, ra.fft_axes(rb.example(a), s, axes), norm)


def rfftn(a, s=None, axes=None, norm=None, out=None):
    return np.fft.rfftn(a, s, ra.fft_axes(rb.example(a), s, axes), norm)


def irfft(a, n=None, axis=-1, norm=None, out=None):
    return np.fft.irfft(a, n, rb.axis(axis, a), norm)


def irfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    return np.fft.irfft2(a, s, ra.fft_axes(rb.example(a), s, axes), norm)


def irfftn(a, s=None, axes=None, norm=None, out=None):
    return np.fft.irfftn(a, s, ra.fft_axes(rb.example(a), s, axes), norm)


def hfft(a, n=None, axis=-1, norm=None, out=None):
    return np.fft.hfft(a, n, rb.axis(axis, a), norm)


def ihfft(a, n=None, axis=-1, norm=None, out=None):
    return np.fft.ihfft(a, n, rb.axis(axis, a), norm)


def fft_axes(a, s=None, axes=None):
    return ra.fft_axes(rb.example(a), s, axes)


def fft_lengths(a, s, axes, inverse_real=False):
    return ra.fft_lengths(rb.example(a), s, axes, inverse_real)


def fft_fit(t, x, axes):
    return ra.fft_fit(t, x, axes)


def irfft_scale(h, axes, lengths, norm=None):
    return ra.irfft_scale(h, axes, lengths, norm)


def np_select(condlist, choicelist, default=0):
    return np.select(condlist, choicelist, default)


def gradient(f, *varargs, axis=None, edge_order=1):
    return rb.per_lane(ra.gradient_list, (0, 1, 2), f, f, varargs, axis, edge_order)


def select_tangent(ts, td, condlist, choicelist, default):
    return rb.per_lane(ra.select_tangent, (0, 1, 2, 3, 4), ts, td, condlist, choicelist,
                       default)


def select_cot(t, condlist, choicelist, default, which=0):
    return rb.per_lane(ra.select_cot, (0, 1, 2, 3), t, condlist, choicelist, default, which)


def select_cot_t(h, condlist, choicelist, default, which=0):
    return rb.per_lane(ra.select_cot_t, (0, 1, 2, 3), h, condlist, choicelist, default, which)


def gradient_vjp(t, f, varargs, axis=None, edge_order=1):
    return rb.per_lane(ra.gradient_vjp, (0, 1, 2), t, f, varargs, axis, edge_order)


def gradient_list(t, f, varargs, axis=None, edge_order=1):
    return rb.per_lane(ra.gradient_list, (0, 1, 2), t, f, varargs, axis, edge_order)


def refuse_cotangent(what, xs):
    return ra.refuse_cotangent(what, xs)


def rollaxis_perm(a, axis, start=0):
    return ra.rollaxis_perm(rb.example(a), axis, start)


def refuse_tangents(t, ts):
    return ra.refuse_tangents(t, ts)


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    return rb.per_lane(np.nan_to_num, (0, 2, 3, 4), x, copy, nan, posinf, neginf)


def qr_input(a, mode="reduced"):
    return rb.linalg(ra.qr_input, a, mode=mode)


def ptp(a, axis=None, out=None, keepdims=False):
    return np.ptp(a, axis=rb.axis(axis, a), keepdims=keepdims)


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    return np.median(a, axis=rb.axis(axis, a), keepdims=keepdims)


def convolve(a, v, mode="full"):
    return rb.per_lane(np.convolve, (0, 1), a, v, mode)


def correlate(a, v, mode="valid"):
    return rb.per_lane(np.correlate, (0, 1), a, v, mode)


def polyval(p, x):
    return rb.per_lane(np.polyval, (0, 1), p, x)


def conv_full_cot(t, a, v, mode="full"):
    return rb.per_lane(ra.conv_full_cot, (0, 1, 2), t, a, v, mode)


def conv_full_cut(t, a, v, mode="full"):
    return rb.per_lane(ra.conv_full_cut, (0, 1, 2), t, a, v, mode)


def median_weights(a, axis=None, keepdims=False):
    return rb.per_lane(ra.median_weights, (0,), a, axis, keepdims)


def poly_powers(p):
    return np.expand_dims(ra.poly_powers(rb.example(p)), -1)


def matrix_power(a, n):
    return rb.linalg(np.linalg.matrix_power, a, n=n)


def power_block(x, t, n):
    return rb.per_lane(ra.power_block, (0, 1), x, t, n)


def power_block_index(x, which=2):
    return ra.power_block_index(rb.example(x), which)


def einsum_multi(plan, groups):
    return rb.einsum_multi(plan, groups)


def einsum_plan(operands):
    return ra.einsum_plan(rb.example(operands))


def einsum_plans_t(plan, groups=None):
    return ra.einsum_plans_t(plan, groups)


def einsum_plans_j(plan, groups=None):
    return ra.einsum_plans_j(plan, groups)


def group2(a, b):
    return ra.group2(a, b)


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    return np.nanvar(a, axis=rb.axis(axis, a), dtype=dtype, ddof=ddof, keepdims=keepdims)


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    return np.nanstd(a, axis=rb.axis(axis, a), dtype=dtype, ddof=ddof, keepdims=keepdims)


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False):
    return np.nanprod(a, axis=rb.axis(axis, a), dtype=dtype, keepdims=keepdims)


def nancumsum(a, axis=None, dtype=None, out=None):
    return rb.cumulative(np.nancumsum, a, axis, dtype)


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, weights=None):
    return rb.per_lane(np.quantile, (0, 1), a, q, axis, None, False, method, keepdims)


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, weights=None):
    return rb.per_lane(np.percentile, (0, 1), a, q, axis, None, False, method, keepdims)


def quantile_vjp(t, a, q, axis=None, keepdims=False, method="linear"):
    return rb.per_lane(ra.quantile_vjp, (0, 1, 2), t, a, q, axis, keepdims, method)


def quantile_jvp(t, a, q, axis=None, keepdims=False, method="linear"):
    return rb.per_lane(ra.quantile_jvp, (0, 1, 2), t, a, q, axis, keepdims, method)


def refuse_value(what, x):
    return ra.refuse_value(what, x)


def refuse_tangent(t, what):
    return ra.refuse_tangent(t, what)


def average(a, axis=None, weights=None, returned=False, keepdims=False):
    return rb.per_lane(ra.average_lane, (0, 2), a, axis, weights, returned, keepdims)


def average_weights(weights, a, axis=None, returned=False):
    return rb.per_lane(ra.average_weights, (0, 1), weights, a, axis, returned)


def average_weights_lin(t, weights, a, axis=None):
    return rb.per_lane(ra.average_weights_lin, (0, 1, 2), t, weights, a, axis)


def average_weights_t(t, weights, a, axis=None):
    return rb.per_lane(ra.average_weights_t, (0, 1, 2), t, weights, a, axis)


def linalg_trace(x, offset=0, dtype=None):
    return np.trace(x, offset, rb.axis(-2, x), rb.axis(-1, x), dtype=dtype)


def linalg_diagonal(x, offset=0):
    return np.moveaxis(np.diagonal(x, offset, rb.axis(-2, x), rb.axis(-1, x)), -1, -2)


def linalg_cross(x1, x2, axis=-1):
    return rb.per_lane(np.cross, (0, 1), x1, x2, axis, axis, axis)


def matrix_norm(x, keepdims=False, ord="fro"):
    return rb.norm(x, ord, (-2, -1), keepdims)


def cumulative_sum(x, axis=None, dtype=None, out=None, include_initial=False):
    return rb.per_lane(ra.cumulative_sum_lane, (0,), x, axis, dtype, None, include_initial)


def cumulative_index(x, axis=None, include_initial=False):
    return ra.cumulative_index(rb.example(x), axis, include_initial)


def multi_dot(arrays, out=None):
    return rb.einsum_multi(ra.multi_dot_plan(rb.example(arrays)), arrays)


def multi_dot_plan(arrays):
    return ra.multi_dot_plan(rb.example(arrays))


def ediff1d(ary, to_end=None, to_begin=None):
    return rb.per_lane(np.ediff1d, (0, 1, 2), ary, to_end, to_begin)


def ediff1d_index(ary, to_end=None, to_begin=None, which=0):
    return ra.ediff1d_index(rb.example(ary), rb.example(to_end), rb.example(to_begin), which)


def tangent_where(t, x):
    return ra.tangent_where(t, x)


def ediff1d_lin(t, t_end, t_begin, ary, to_end=None, to_begin=None):
    return rb.per_lane(ra.ediff1d_lin, (0, 1, 2, 3, 4, 5), t, t_end, t_begin, ary, to_end,
                       to_begin)


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None,
        dtype=None):
    return rb.per_lane(np.cov, (0, 1, 5, 6), m, y, rowvar, bias, ddof, fweights, aweights)


def lstsq(a, b, rcond=None):
    return rb.per_lane(np.linalg.lstsq, (0, 1), a, b, rcond)


def lstsq_weight(t, res, b):
    return rb.per_lane(ra.lstsq_weight, (0, 1, 2), t, res, b)


def lstsq_weight_t(w, res, b):
    return rb.per_lane(ra.lstsq_weight_t, (0, 1, 2), w, res, b)


def corrcoef(x, y=None, rowvar=True, dtype=None):
    return rb.per_lane(np.corrcoef, (0, 1), x, y, rowvar)


def cov_rows(m, rowvar=True):
    return rb.per_lane(ra.cov_rows, (0,), m, rowvar)


def cov_rows_t(t, m, rowvar=True):
    return rb.per_lane(ra.cov_rows_t, (0, 1), t, m, rowvar)


def cov_scale(x, y=None, bias=False, ddof=None, fweights=None, aweights=None):
    return ra.cov_scale(rb.example(x), y, bias, ddof, fweights, aweights)


def reduced_shape_of(xc):
    return ra.reduced_shape_of(rb.example(xc))


def interp(x, xp, fp, left=None, right=None, period=None):
    return rb.per_lane(np.interp, (0, 1, 2, 3, 4), x, xp, fp, left, right, period)


def interp_basis(x, xp, left=None, right=None, period=None):
    return rb.per_lane(ra.interp_basis, (0, 1, 2, 3), x, xp, left, right, period)


def interp_slopes(x, xp, left=None, right=None, period=None):
    return rb.per_lane(ra.interp_slopes, (0, 1, 2, 3), x, xp, left, right, period)


def interp_outside(x, xp, which=0):
    return rb.per_lane(ra.interp_outside, (0, 1), x, xp, which)


# --------------------------- creation with per-example shapes, sizes or bounds (issue 10)
# (values that are the same in every lane, e.g. computed inside a per-example branch,
# are made once; shapes that really differ per example are refused)

def zeros(shape, dtype=float, order="C"):
    return rb.created(np.zeros, "np.zeros", shape, dtype)


def ones(shape, dtype=None, order="C"):
    return rb.created(np.ones, "np.ones", shape, dtype)


def empty(shape, dtype=float, order="C"):
    return rb.created(np.zeros, "np.empty", shape, dtype)


def eye(N, M=None, k=0, dtype=float, order="C"):
    return rb.created(np.eye, "np.eye", N, M, k, dtype)


def identity(n, dtype=None):
    return rb.created(np.identity, "np.identity", n, dtype)


def tri(N, M=None, k=0, dtype=float):
    return rb.created(np.tri, "np.tri", N, M, k, dtype)


def indices(dimensions, dtype=int, sparse=False):
    return rb.created(np.indices, "np.indices", dimensions, dtype, sparse)


def tree_index_per_example_index(xs, i):
    return rb.tree_index(xs, i)


# pytrees in transformed code: leaves are batch-last arrays, structures are the same
# for every example
def tree_leaves_of(x):
    return rb.tree_leaves_of(x)


def tree_structure_of(x):
    return rb.tree_structure_of(x)


def tree_unflatten_of(treedef, leaves):
    return rb.tree_unflatten_of(treedef, leaves)


def tree_from_leaves(leaves, like):
    return rb.tree_from_leaves(leaves, like)


def tree_leaves_like(t, like):
    return rb.tree_leaves_like(t, like)


# ------------------------------------------------------------------ astjax.random
# A batch of keys arrives as (2, B) (batch last), a shared key as (2,); each rule calls
# the sampler's batched form, which draws for every example at once.
from astjax import random as jr  # noqa: E402


def random_key(seed):
    return jr.key_batched(seed)


def random_key_batched(seed):
    return jr.key_batched(seed)


def random_key_data(keys):
    return keys


def random_wrap_key_data(key_bits_array):
    return key_bits_array


def random_split(key, num=2):
    return jr.split_batched(key, num)


def random_split_batched(key_b, num=2):
    return jr.split_batched(key_b, num)


def random_fold_in(key, data):
    return jr.fold_in_batched(key, data)


def random_fold_in_batched(key_b, data):
    return jr.fold_in_batched(key_b, data)


def random_bits(key, shape=(), dtype=None):
    return jr.bits_batched(key, shape, dtype)


def random_bits_batched(key_b, shape=(), dtype=None):
    return jr.bits_batched(key_b, shape, dtype)


def random_uniform(key, shape=(), dtype=None, minval=0.0, maxval=1.0):
    return jr.uniform_batched(key, shape, dtype, minval, maxval)


def random_uniform_batched(key_b, shape=(), dtype=None, minval=0.0, maxval=1.0):
    return jr.uniform_batched(key_b, shape, dtype, minval, maxval)


def random_normal(key, shape=(), dtype=None):
    return jr.normal_batched(key, shape, dtype)


def random_normal_batched(key_b, shape=(), dtype=None):
    return jr.normal_batched(key_b, shape, dtype)


def random_exponential(key, shape=(), dtype=None):
    return jr.exponential_batched(key, shape, dtype)


def random_exponential_batched(key_b, shape=(), dtype=None):
    return jr.exponential_batched(key_b, shape, dtype)


def random_bernoulli(key, p=0.5, shape=None, mode='low'):
    return jr.bernoulli_batched(key, p, shape, mode)


def random_bernoulli_batched(key_b, p=0.5, shape=None, mode='low'):
    return jr.bernoulli_batched(key_b, p, shape, mode)


def random_categorical(key, logits, axis=-1, shape=None, replace=True, mode=None):
    return jr.categorical_batched(key, logits, axis, shape, replace, mode)


def random_categorical_batched(key_b, logits, axis=-1, shape=None, replace=True, mode=None):
    return jr.categorical_batched(key_b, logits, axis, shape, replace, mode)


def random_randint(key, shape, minval, maxval, dtype=None):
    return jr.randint_batched(key, shape, minval, maxval, dtype)


def random_randint_batched(key_b, shape, minval, maxval, dtype=None):
    return jr.randint_batched(key_b, shape, minval, maxval, dtype)


def random_permutation(key, x, axis=0, independent=False):
    return jr.permutation_batched(key, x, axis, independent)


def random_permutation_batched(key_b, x, axis=0, independent=False):
    return jr.permutation_batched(key_b, x, axis, independent)


def random_choice(key, a, shape=(), replace=True, p=None, axis=0, mode=None):
    return jr.choice_batched(key, a, shape, replace, p, axis, mode)


def random_choice_batched(key_b, a, shape=(), replace=True, p=None, axis=0, mode=None):
    return jr.choice_batched(key_b, a, shape, replace, p, axis, mode)


def random_truncated_normal(key, lower, upper, shape=None, dtype=None):
    return jr.truncated_normal_batched(key, lower, upper, shape, dtype)


def random_truncated_normal_batched(key_b, lower, upper, shape=None, dtype=None):
    return jr.truncated_normal_batched(key_b, lower, upper, shape, dtype)


def random_multivariate_normal_vjp(g, key, mean, cov, shape=None, dtype=None,
                                   method="cholesky"):
    return jr.multivariate_normal_vjp_batched(g, key, mean, cov, shape, dtype, method)


def random_multivariate_normal_vjp_batched(g, key_b, mean, cov, shape=None, dtype=None,
                                           method="cholesky"):
    return jr.multivariate_normal_vjp_batched(g, key_b, mean, cov, shape, dtype, method)


def random_multivariate_normal_jvp(key, mean, cov, dmean, dcov, shape=None, dtype=None,
                                   method="cholesky"):
    return jr.multivariate_normal_jvp_batched(key, mean, cov, dmean, dcov, shape, dtype,
                                              method)


def random_multivariate_normal_jvp_batched(key_b, mean, cov, dmean, dcov, shape=None,
                                           dtype=None, method="cholesky"):
    return jr.multivariate_normal_jvp_batched(key_b, mean, cov, dmean, dcov, shape, dtype,
                                              method)


def random_gamma(key, a, shape=None, dtype=None):
    return jr.gamma_batched(key, a, shape, dtype)


def random_gamma_batched(key_b, a, shape=None, dtype=None):
    return jr.gamma_batched(key_b, a, shape, dtype)


def random_multivariate_normal(key, mean, cov, shape=None, dtype=None, method='cholesky'):
    return jr.multivariate_normal_batched(key, mean, cov, shape, dtype, method)


def random_multivariate_normal_batched(key_b, mean, cov, shape=None, dtype=None, method='cholesky'):
    return jr.multivariate_normal_batched(key_b, mean, cov, shape, dtype, method)


def random_unit_like(key, like):
    return jr.unit_like_batched(key, like)


def random_unit_like_batched(key_b, like):
    return jr.unit_like_batched(key_b, like)


def random_permutation_vjp(t, key, x, axis=0, independent=False):
    return jr.permutation_vjp_batched(t, key, x, axis, independent)


def random_permutation_vjp_batched(t, key_b, x, axis=0, independent=False):
    return jr.permutation_vjp_batched(t, key_b, x, axis, independent)


# ------------------------------------------------------------------ astjax.debug
# once per example, as JAX does: the batched forms walk the lanes
from astjax import debug as dbg  # noqa: E402


def debug_print(fmt, names, *values):
    return dbg.print_values_batched(fmt, names, values)


def debug_print_batched(fmt, names, values):
    return dbg.print_values_batched(fmt, names, values)


def debug_callback(callback, names, *values):
    return dbg.callback_values_batched(callback, names, values)


def debug_callback_batched(callback, names, values):
    return dbg.callback_values_batched(callback, names, values)


def reverse_mode_guard(what):
    return sh.reverse_mode_guard(what)


def debug_breakpoint(num_frames=None):
    return dbg.breakpoint_here()


def pure_callback(callback, result_shape_dtypes, vmap_method, names, *values):
    return dbg.pure_callback_values_batched(callback, result_shape_dtypes, vmap_method, names,
                                            values)


def pure_callback_batched(callback, result_shape_dtypes, vmap_method, names, values):
    return dbg.pure_callback_values_batched(callback, result_shape_dtypes, vmap_method, names,
                                            values)

# ------------------------------------------------------------------ collectives
# The batch axis (last) rides along: collectives act per element over the devices;
# axes given per example are moved to the batched array's (rb.axis).
from astjax.sharding import collectives as sh  # noqa: E402


def psum(x, axis_name):
    return sh.psum(x, axis_name)


def pmean(x, axis_name):
    return sh.pmean(x, axis_name)


def pmax(x, axis_name):
    return sh.pmax(x, axis_name)


def pmin(x, axis_name):
    return sh.pmin(x, axis_name)


def pvary(x, axis_name):
    return sh.pvary(x, axis_name)


def pcast(x, axis_name, to):
    return sh.pcast(x, axis_name, to)


def all_gather(x, axis_name, axis=0, tiled=False, axis_index_groups=None):
    return sh.all_gather(x, axis_name, axis=rb.axis(axis, x), tiled=tiled)


def psum_scatter(x, axis_name, scatter_dimension=0, tiled=False, axis_index_groups=None):
    return sh.psum_scatter(x, axis_name, scatter_dimension=rb.axis(scatter_dimension, x),
                           tiled=tiled)


def ppermute(x, axis_name, perm):
    return sh.ppermute(x, axis_name, perm)


def all_to_all(x, axis_name, split_axis, concat_axis, tiled=False, axis_index_groups=None):
    return sh.all_to_all(x, axis_name, rb.axis(split_axis, x), rb.axis(concat_axis, x),
                         tiled=tiled)


def axis_index(axis_name):
    return sh.axis_index(axis_name)


def axis_size(axis_name):
    return sh.axis_size(axis_name)


def ppermute_inverse(perm):
    return sh.ppermute_inverse(perm)


def psum_t(t, axis_name):
    return sh.psum_t(t, axis_name)


def pmean_t(t, axis_name):
    return sh.pmean_t(t, axis_name)


def all_gather_t(t, axis_name, axis=0, tiled=False):
    return sh.all_gather_t(t, axis_name, rb.axis(axis, t), tiled)


def pextreme_t(t, x, top, axis_name):
    return sh.pextreme_t(t, x, top, axis_name)


def pextreme_jvp(t, x, top, axis_name):
    return sh.pextreme_jvp(t, x, top, axis_name)


def shard_map_call(plan, args):
    return sh.shard_map_call(sh.batch_plan(plan), (args,))


def vjp_plan(plan):
    return sh.vjp_plan(plan)


def jvp_plan(plan):
    return sh.jvp_plan(plan)


def batch_plan(plan):
    return sh.batch_plan(plan)


def static_plan(plan, statics):
    return sh.static_plan_batched(plan, statics)

# ------------------------------------------- matrix products saved by checkpoint
# (the saved value was computed from the same, batched, operands)


def saved_dot(value, a, b):
    return value


def saved_matmul(value, x, y):
    return value
