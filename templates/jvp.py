"""Jacobian-vector product templates, one per differentiable primitive.

Convention: ``def <primitive>(ans, <params...>, d<param>=None...)``: ``ans`` is the
primal result, then the primitive's own parameters (``Primitive.params``, with its
defaults; a variadic one keeps its star), then one tangent per entry of
``Primitive.diff`` named ``"d" + name``.  The body returns the tangent of the result:
same shape and floating dtype as ``ans`` (float32 stays float32: constants are Python
floats), a list/tuple of tangents when ``ans`` is a list/tuple.

Forward mode parses a body and inlines it with names substituted, so bodies are
straight-line code over registered primitives (``np.*``, operators, ``ra.*``
helpers) ending in one ``return``.  A tangent may be None (known to be zero) for the
kinds "elementwise", "linalg", "reduction", "structural", "other" and every
primitive spelled ``ra.*``; forward mode then drops the work on it: a term whose
tangents are all zero disappears, ``a + None`` is ``a``, ``None - b`` is ``-b``, a
primitive spelled ``ra.*`` gets None (``np.where`` too: it is ``ra.where``) and any
other operation the scalar 0.0.  So every tangent is written as a sum of terms that
are each linear in one tangent (product rule), and helpers that take several
tangents accept None for any of them.  A rule that returns None says the tangent is
zero (rounding).  When a term was dropped the result is fitted to ``ans``
(``ra.tangent_like``).  Other kinds get concrete zeros for tangents they do not
have.

Semantics follow JAX and templates/vjp.py: ties of max/min share, rounding has a
zero derivative, matrix functions of symmetric input (cholesky, eigh) see the
symmetric part of the tangent.
"""
import numpy as np

from astjax import runtime_array as ra

# ------------------------------------------------------------------ arithmetic


def add(ans, x, y, out=None, dx=None, dy=None):
    # also list/tuple concatenation (a + b): the tangent lists are concatenated
    return dx + dy


def subtract(ans, x, y, out=None, dx=None, dy=None):
    return dx - dy


def multiply(ans, x, y, out=None, dx=None, dy=None):
    return dx * y + x * dy


def divide(ans, x, y, out=None, dx=None, dy=None):
    return dx / y - dy * ans / y


def floor_divide(ans, x, y, out=None, dx=None, dy=None):
    return None


def remainder(ans, x, y, out=None, dx=None, dy=None):
    return dx - dy * np.floor_divide(x, y)


def fmod(ans, x, y, out=None, dx=None, dy=None):
    return dx - dy * np.trunc(x / y)


def power(ans, x, y, out=None, dx=None, dy=None):
    # d/dy is x ** y * log(x) where x > 0 and 0 elsewhere, as in the vjp; d/dx is 0
    # where y == 0 (the base there is replaced by 1: no 0 ** -1, at any order)
    slope = y * np.power(np.where(y == 0, 1.0, x), y - 1)
    return dx * slope + dy * ans * np.log(np.where(x > 0, x, 1.0))


def float_power(ans, x, y, out=None, dx=None, dy=None):
    slope = y * np.float_power(np.where(y == 0, 1.0, x), y - 1)
    return dx * slope + dy * ans * np.log(np.where(x > 0, x, 1.0))


def matmul(ans, x, y, out=None, dx=None, dy=None):
    return np.matmul(dx, y) + np.matmul(x, dy)


def vecdot(ans, x, y, out=None, axis=-1, dx=None, dy=None):
    return np.vecdot(dx, y, axis=axis) + np.vecdot(x, dy, axis=axis)


def maximum(ans, x, y, out=None, dx=None, dy=None):
    return dx * ra.max_weight(x, y, ans) + dy * ra.max_weight(y, x, ans)


def minimum(ans, x, y, out=None, dx=None, dy=None):
    return dx * ra.max_weight(y, x, ans) + dy * ra.max_weight(x, y, ans)


def fmax(ans, x, y, out=None, dx=None, dy=None):
    # (an operand fmax skips is NaN, and so may its tangent be: selected out, not
    # multiplied by a zero weight)
    wx = ra.fmax_weight(x, y, ans)
    wy = ra.fmax_weight(y, x, ans)
    return np.where(wx == 0, 0.0, dx * wx) + np.where(wy == 0, 0.0, dy * wy)


def fmin(ans, x, y, out=None, dx=None, dy=None):
    wx = ra.fmin_weight(x, y, ans)
    wy = ra.fmin_weight(y, x, ans)
    return np.where(wx == 0, 0.0, dx * wx) + np.where(wy == 0, 0.0, dy * wy)


def arctan2(ans, x, y, out=None, dx=None, dy=None):
    return (dx * y - dy * x) / (x * x + y * y)


def hypot(ans, x, y, out=None, dx=None, dy=None):
    return (dx * x + dy * y) / ans


def logaddexp(ans, x, y, out=None, dx=None, dy=None):
    return dx * np.exp(x - ans) + dy * np.exp(y - ans)


def logaddexp2(ans, x, y, out=None, dx=None, dy=None):
    return dx * np.exp2(x - ans) + dy * np.exp2(y - ans)


def math_log(ans, x, base=None, dx=None, dbase=None):
    lb = ra.log_or_one(base)
    return dx / (x * lb) - dbase * ans / (ra.or_one(base) * lb)


# ------------------------------------------------------------------ elementwise


def negative(ans, x, out=None, dx=None):
    return -dx


def positive(ans, x, out=None, dx=None):
    return dx


def exp(ans, x, out=None, dx=None):
    return dx * ans


def exp2(ans, x, out=None, dx=None):
    return dx * ans * 0.6931471805599453


def expm1(ans, x, out=None, dx=None):
    return dx * (ans + 1.0)


def log(ans, x, out=None, dx=None):
    return dx / x


def log2(ans, x, out=None, dx=None):
    return dx / (x * 0.6931471805599453)


def log10(ans, x, out=None, dx=None):
    return dx / (x * 2.302585092994046)


def log1p(ans, x, out=None, dx=None):
    return dx / (x + 1.0)


def sqrt(ans, x, out=None, dx=None):
    return dx * 0.5 / ans


def cbrt(ans, x, out=None, dx=None):
    return dx / (3.0 * ans * ans)


def square(ans, x, out=None, dx=None):
    return dx * 2.0 * x


def reciprocal(ans, x, out=None, dx=None):
    return -dx * ans * ans


def sin(ans, x, out=None, dx=None):
    return dx * np.cos(x)


def cos(ans, x, out=None, dx=None):
    return -dx * np.sin(x)


def tan(ans, x, out=None, dx=None):
    return dx * (1.0 + ans * ans)


def arcsin(ans, x, out=None, dx=None):
    return dx / np.sqrt(1.0 - x * x)


def arccos(ans, x, out=None, dx=None):
    return -dx / np.sqrt(1.0 - x * x)


def arctan(ans, x, out=None, dx=None):
    return dx / (1.0 + x * x)


def sinh(ans, x, out=None, dx=None):
    return dx * np.cosh(x)


def cosh(ans, x, out=None, dx=None):
    return dx * np.sinh(x)


def tanh(ans, x, out=None, dx=None):
    return dx * (1.0 - ans * ans)


def arcsinh(ans, x, out=None, dx=None):
    return dx / np.sqrt(x * x + 1.0)


def arccosh(ans, x, out=None, dx=None):
    return dx / np.sqrt(x * x - 1.0)


def arctanh(ans, x, out=None, dx=None):
    return dx / (1.0 - x * x)


def absolute(ans, x, out=None, dx=None):
    # x / |x| (JAX: +1 at 0); complex x: Re(conj(x) dx) / |x|
    at_zero = ans == 0
    unit = np.where(at_zero, 1.0, np.conj(x) / np.where(at_zero, 1.0, ans))
    return ra.tangent_like(np.real(unit * dx), ans)


def fabs(ans, x, out=None, dx=None):
    return np.where(x >= 0, dx, -dx)


def deg2rad(ans, x, out=None, dx=None):
    return dx * 0.017453292519943295


def rad2deg(ans, x, out=None, dx=None):
    return dx * 57.29577951308232


def conj_method(ans, x, dx=None):
    return np.conj(dx)


def conj(ans, x, out=None, dx=None):
    return np.conj(dx)


def real(ans, val, dval=None):
    return np.real(dval)


def imag(ans, val, dval=None):
    return np.imag(dval)


def sinc(ans, x, dx=None):
    # (cos(pi x) - sinc(x)) / x, and 0 at x == 0
    safe = np.where(x == 0, 1.0, x)
    return dx * np.where(x == 0, 0.0, (np.cos(3.141592653589793 * x) - ans) / safe)


def sign(ans, x, out=None, dx=None):
    # real x: 0.  complex x: (dx - sign(x)^2 conj(dx)) / 2|x|
    r = np.abs(x)
    at_zero = r == 0
    turn = (dx - ans ** 2 * np.conj(dx)) / (2.0 * np.where(at_zero, 1.0, r))
    return ra.tangent_like(np.where(at_zero, 0.0, turn), ans)


def floor(ans, x, out=None, dx=None):
    return None


def ceil(ans, x, out=None, dx=None):
    return None


def trunc(ans, x, out=None, dx=None):
    return None


def rint(ans, x, out=None, dx=None):
    return None


def fix(ans, x, out=None, dx=None):
    return None


def round(ans, a, decimals=0, out=None, da=None):
    return None


def py_round(ans, number, ndigits=None, dnumber=None):
    return None


def clip(ans, a, a_min=None, a_max=None, out=None, min=None, max=None, da=None, da_min=None,
         da_max=None, dmin=None, dmax=None):
    # weights of a, the lower and the upper bound (ties share, as in the vjp); a
    # bound that is absent has no tangent, so its None weight is never read
    one = np.ones_like(ans)
    w_a = ra.clip_part(one, a, a_min, a_max, min, max, 0)
    w_lo = ra.clip_part(one, a, a_min, a_max, min, max, 1)
    w_hi = ra.clip_part(one, a, a_min, a_max, min, max, 2)
    return da * w_a + da_min * w_lo + da_max * w_hi + dmin * w_lo + dmax * w_hi


def where(ans, condition, x=None, y=None, dx=None, dy=None):
    # one term per tangent: np.where is spelled ra.where, which must not see None
    return np.where(condition, dx, 0.0) + np.where(condition, 0.0, dy)


# ------------------------------------------------------------------ reductions


def sum(ans, a, axis=None, dtype=None, out=None, keepdims=False, da=None):
    return np.sum(da, axis=axis, dtype=dtype, keepdims=keepdims)


def mean(ans, a, axis=None, dtype=None, out=None, keepdims=False, da=None):
    return np.mean(da, axis=axis, dtype=dtype, keepdims=keepdims)


def prod(ans, a, axis=None, dtype=None, out=None, keepdims=False, da=None):
    # product of the other elements: exact with zeros, no division
    others = ra.unfold_axes(ra.prod_others_last(ra.fold_axes(a, axis)), a, axis)
    return np.sum(da * others, axis=axis, dtype=dtype, keepdims=keepdims)


def max(ans, a, axis=None, out=None, keepdims=False, da=None):
    return np.sum(da * ra.extremum_weights(a, ans, axis, keepdims), axis=axis, keepdims=keepdims)


def min(ans, a, axis=None, out=None, keepdims=False, da=None):
    return np.sum(da * ra.extremum_weights(a, ans, axis, keepdims), axis=axis, keepdims=keepdims)


def nanmax(ans, a, axis=None, out=None, keepdims=False, da=None):
    # (the entries nanmax skips are NaN, and so may their tangents be: selected out)
    da = np.where(np.isnan(a), 0.0, da)
    return np.sum(da * ra.extremum_weights(a, ans, axis, keepdims), axis=axis, keepdims=keepdims)


def nanmin(ans, a, axis=None, out=None, keepdims=False, da=None):
    da = np.where(np.isnan(a), 0.0, da)
    return np.sum(da * ra.extremum_weights(a, ans, axis, keepdims), axis=axis, keepdims=keepdims)


def nansum(ans, a, axis=None, dtype=None, out=None, keepdims=False, da=None):
    # NaN where a is NaN, so nansum skips exactly the elements it skipped
    return np.nansum(np.where(np.isnan(a), a, da), axis=axis, dtype=dtype, keepdims=keepdims)


def nanmean(ans, a, axis=None, dtype=None, out=None, keepdims=False, da=None):
    return np.nanmean(np.where(np.isnan(a), a, da), axis=axis, dtype=dtype, keepdims=keepdims)


def var(ans, a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, da=None):
    d = np.conj(a - np.mean(a, axis=axis, keepdims=True))   # (complex a: Re(conj(d) da))
    return ra.tangent_like(np.real(np.sum(d * da, axis=axis, keepdims=keepdims)) * (
        2.0 / (ra.reduced_size(a, axis) - ddof)), ans)


def std(ans, a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, da=None):
    d = np.conj(a - np.mean(a, axis=axis, keepdims=True))   # (complex a: Re(conj(d) da))
    return ra.tangent_like(np.real(np.sum(d * da, axis=axis, keepdims=keepdims)) / (
        ans * (ra.reduced_size(a, axis) - ddof)), ans)


def cumsum(ans, a, axis=None, dtype=None, out=None, da=None):
    return np.cumsum(da, axis=axis, dtype=dtype)


def cumprod(ans, a, axis=None, dtype=None, out=None, da=None):
    # row j of m is the input with element j replaced by 1; its running products are
    # the partial derivatives of the outputs at and after j (exact with zeros)
    ax = ra.cum_axis(axis)
    x = np.moveaxis(np.reshape(a, np.shape(ans)), ax, -1)
    e = ra.eye_last(x)
    c = np.cumprod(np.expand_dims(x, -2) * (1.0 - e) + e, axis=-1)
    dx = np.expand_dims(np.moveaxis(np.reshape(da, np.shape(ans)), ax, -1), -1)
    return np.moveaxis(np.sum(c * np.triu(np.ones_like(e)) * dx, axis=-2), -1, ax)


def norm(ans, x, ord=None, axis=None, keepdims=False, dx=None):
    return ra.norm_jvp(dx, x, ord, axis, keepdims)


def trace(ans, a, offset=0, axis1=0, axis2=1, dtype=None, out=None, da=None):
    return np.trace(da, offset=offset, axis1=axis1, axis2=axis2, dtype=dtype)


def diagonal(ans, a, offset=0, axis1=0, axis2=1, da=None):
    return np.diagonal(da, offset, axis1, axis2)


def diag(ans, v, k=0, dv=None):
    return np.diag(dv, k)


# ------------------------------------------------------------------ linear algebra


def dot(ans, a, b, out=None, da=None, db=None):
    return np.dot(da, b) + np.dot(a, db)


def dot_grad_a(ans, t, a, b, dt=None, db=None):
    return ra.dot_grad_a(dt, a, b) + ra.dot_grad_a(t, a, db)


def dot_grad_b(ans, t, a, b, dt=None, da=None):
    return ra.dot_grad_b(dt, a, b) + ra.dot_grad_b(t, da, b)


def inner(ans, a, b, da=None, db=None):
    return np.inner(da, b) + np.inner(a, db)


def tensordot(ans, a, b, axes=2, da=None, db=None):
    return np.tensordot(da, b, axes) + np.tensordot(a, db, axes)


def vdot(ans, a, b, da=None, db=None):
    return np.vdot(da, b) + np.vdot(a, db)


def outer(ans, a, b, out=None, da=None, db=None):
    return np.outer(da, b) + np.outer(a, db)


def kron(ans, a, b, da=None, db=None):
    return np.kron(da, b) + np.kron(a, db)


def einsum(ans, *operands, out=None, optimize=False, doperands=None):
    # both calling forms: the subscripts string or the sublists are operands too
    # (never differentiated); one einsum per operand with a tangent (ra.einsum_multi)
    plan = ra.einsum_plan(operands)
    return ra.einsum_multi(ra.einsum_plans_j(plan, operands), ra.group2(operands, doperands))


def matrix_transpose(ans, x, dx=None):
    return np.matrix_transpose(dx)


def inv(ans, a, da=None):
    return -np.matmul(ans, np.matmul(da, ans))


def det(ans, a, da=None):
    return ans * np.trace(np.linalg.solve(a, da), axis1=-2, axis2=-1)


def slogdet(ans, a, da=None):
    # the sign is piecewise constant
    dsign = np.zeros_like(ra.getitem(ans, 0))
    return ra.real_only(
        ra.tangent_like((dsign, np.trace(np.linalg.solve(a, da), axis1=-2, axis2=-1)), ans),
        a, "np.linalg.slogdet")


def solve(ans, a, b, da=None, db=None):
    # d(a^-1 b) = a^-1 (db - da x); a 1-D b is one column
    x = np.reshape(ans, ra.col_shape(ans, b))
    dx = np.linalg.solve(a, np.reshape(db, ra.col_shape(b, b)) - np.matmul(da, x))
    return np.reshape(dx, np.shape(ans))


def cholesky(ans, a, upper=False, da=None):
    # dL = L phi(L^-1 sym(da) L^-T), phi = lower triangle with half diagonal
    # S: the tangent of the symmetric matrix NumPy factors (the triangle it reads)
    l = ra.chol_lower(ans, upper)
    dl = ra.uplo_t(da, upper)
    s = np.tril(dl) + np.swapaxes(np.tril(dl, -1), -1, -2)
    m = np.linalg.solve(l, np.swapaxes(np.linalg.solve(l, s), -1, -2))
    p = np.tril(m) - 0.5 * m * ra.eye_last(m)
    return ra.real_only(ra.chol_lower(np.matmul(l, p), upper), a, "np.linalg.cholesky")


def eigh(ans, a, UPLO="L", da=None):
    # dw = diag(V^T S V), dV = V (F * (V^T S V)), F = 1/(w_j - w_i) off the diagonal,
    # S the tangent of the symmetric matrix NumPy decomposes: the triangle it reads
    # (UPLO), mirrored
    w = ra.getitem(ans, 0)
    v = ra.getitem(ans, 1)
    e = ra.eye_last(w)
    f = 1.0 / (e + np.expand_dims(w, -2) - np.expand_dims(w, -1)) - e
    dl = ra.uplo_t(da, UPLO)
    s = np.tril(dl) + np.swapaxes(np.tril(dl, -1), -1, -2)
    m = np.matmul(np.swapaxes(v, -1, -2), np.matmul(s, v))
    return ra.real_only(
        ra.tangent_like((np.diagonal(m, 0, -2, -1), np.matmul(v, f * m)), ans),
        a, "np.linalg.eigh")


def eigvalsh(ans, a, UPLO="L", da=None):
    v = ra.getitem(np.linalg.eigh(a, UPLO), 1)
    dl = ra.uplo_t(da, UPLO)
    s = np.tril(dl) + np.swapaxes(np.tril(dl, -1), -1, -2)
    return ra.real_only(np.sum(v * np.matmul(s, v), axis=-2), a, "np.linalg.eigvalsh")


# ------------------------------------------------------------------ shapes


def reshape(ans, a, shape, order="C", da=None):
    return np.reshape(da, shape, order=order)


def ravel(ans, a, order="C", da=None):
    return np.ravel(da, order)


def flatten(ans, a, order="C", da=None):
    return ra.flatten(da, order)


def transpose(ans, a, axes=None, da=None):
    return np.transpose(da, axes)


def swapaxes(ans, a, axis1, axis2, da=None):
    return np.swapaxes(da, axis1, axis2)


def moveaxis(ans, a, source, destination, da=None):
    return np.moveaxis(da, source, destination)


def expand_dims(ans, a, axis, da=None):
    return np.expand_dims(da, axis)


def squeeze(ans, a, axis=None, da=None):
    return np.squeeze(da, axis)


def broadcast_to(ans, array, shape, subok=False, darray=None):
    return np.broadcast_to(darray, shape)


def atleast_1d(ans, *arys, darys=None):
    return ra.pack_variadic(darys, ans)


def atleast_2d(ans, *arys, darys=None):
    return ra.pack_variadic(darys, ans)


def atleast_3d(ans, *arys, darys=None):
    return ra.pack_variadic(darys, ans)


def scatter_add(ans, x, indices, v, dx=None, dv=None):
    return ra.scatter_tangent(dx, indices, dv, ans)


def scatter_tangent(ans, t, indices, tv, like, dt=None, dtv=None):
    return ra.scatter_tangent(dt, indices, dtv, like)


def meshgrid(ans, *xi, copy=True, sparse=False, indexing="xy", dxi=None):
    return ra.meshgrid_of(dxi, xi, sparse, indexing)


def meshgrid_cots(ans, t, xi, sparse=False, indexing="xy", dt=None):
    return ra.meshgrid_cots(dt, xi, sparse, indexing)


def meshgrid_of(ans, ts, xi, sparse=False, indexing="xy", dts=None):
    return ra.meshgrid_of(dts, xi, sparse, indexing)


def concatenate(ans, arrays, axis=0, out=None, dtype=None, casting="same_kind", darrays=None):
    return ra.concat_cots(darrays, arrays, axis, "concatenate")


def stack(ans, arrays, axis=0, out=None, dtype=None, casting="same_kind", darrays=None):
    return ra.concat_cots(darrays, arrays, axis, "stack")


def vstack(ans, tup, dtype=None, casting="same_kind", dtup=None):
    return ra.concat_cots(dtup, tup, 0, "vstack")


def hstack(ans, tup, dtype=None, casting="same_kind", dtup=None):
    return ra.concat_cots(dtup, tup, 0, "hstack")


def dstack(ans, tup, dtup=None):
    return ra.concat_cots(dtup, tup, 0, "dstack")


def column_stack(ans, tup, dtup=None):
    return ra.concat_cots(dtup, tup, 0, "column_stack")


def split(ans, ary, indices_or_sections, axis=0, dary=None):
    return np.split(dary, indices_or_sections, axis)


def array_split(ans, ary, indices_or_sections, axis=0, dary=None):
    return np.array_split(dary, indices_or_sections, axis)


def hsplit(ans, ary, indices_or_sections, dary=None):
    return np.hsplit(dary, indices_or_sections)


def vsplit(ans, ary, indices_or_sections, dary=None):
    return np.vsplit(dary, indices_or_sections)


def dsplit(ans, ary, indices_or_sections, dary=None):
    return np.dsplit(dary, indices_or_sections)


def tile(ans, A, reps, dA=None):
    return np.tile(dA, reps)


def repeat(ans, a, repeats, axis=None, da=None):
    return np.repeat(da, repeats, axis)


def flip(ans, m, axis=None, dm=None):
    return np.flip(dm, axis)


def fliplr(ans, m, dm=None):
    return np.fliplr(dm)


def flipud(ans, m, dm=None):
    return np.flipud(dm)


def rot90(ans, m, k=1, axes=(0, 1), dm=None):
    return np.rot90(dm, k, axes)


def roll(ans, a, shift, axis=None, da=None):
    return np.roll(da, shift, axis)


def pad(ans, array, pad_width, mode="constant", constant_values=0, darray=None,
        dconstant_values=None):
    return (ra.pad_jvp(darray, pad_width, mode)
            + ra.refuse_tangent(dconstant_values, "the derivative of np.pad in constant_values"))


def take(ans, a, indices, axis=None, out=None, mode="raise", da=None):
    return np.take(da, indices, axis=axis, mode=mode)


def take_along_axis(ans, arr, indices, axis=-1, darr=None):
    return np.take_along_axis(darr, indices, axis=axis)


def tril(ans, m, k=0, dm=None):
    return np.tril(dm, k)


def triu(ans, m, k=0, dm=None):
    return np.triu(dm, k)


def sort(ans, a, axis=-1, kind=None, order=None, stable=None, da=None):
    return np.take_along_axis(da, np.argsort(a, axis=axis, kind="stable"), axis=axis)


def diff(ans, a, n=1, axis=-1, prepend=None, append=None, da=None, dprepend=None,
         dappend=None):
    # the differences of da with zeros where prepend/append sat (a float64 prepend
    # makes a float64 result); differentiated prepend/append are refused
    return ra.tangent_like(ra.diff_vjp_adj(da, a, n, axis, prepend, append)
                           + ra.refuse_tangent(dprepend, "the derivative of np.diff in prepend")
                           + ra.refuse_tangent(dappend, "the derivative of np.diff in append"),
                           ans)


# ------------------------------------------------------------------ indexing


def index_concat(ans, which, *items, ditems=None):
    return ra.index_concat_jvp(ditems, which, items)


def getitem(ans, x, index, dx=None):
    return ra.getitem_jvp(dx, x, index)


def setitem(ans, x, index, v, dx=None, dv=None):
    return ra.setitem_jvp(dx, index, dv, x)


def item(ans, a, *args, da=None):
    return ra.getitem(da, ra.item_index(a, args))


# ------------------------------------------------------------------ creation, conversion


def full(ans, shape, fill_value, dtype=None, order="C", dfill_value=None):
    return ra.tangent_like(dfill_value, ans)


def full_like(ans, a, fill_value, dtype=None, order="K", subok=True, shape=None,
              dfill_value=None):
    return ra.tangent_like(dfill_value, ans)


def array(ans, object, dtype=None, copy=True, order="K", subok=False, ndmin=0, dobject=None):
    return ra.pack_cots(dobject, ans)


def asarray(ans, a, dtype=None, order=None, copy=None, da=None):
    return ra.pack_cots(da, ans)


def copy(ans, a, order="K", subok=False, da=None):
    return ra.pack_cots(da, ans)


def astype(ans, x, dtype, order="K", casting="unsafe", subok=True, copy=True, dx=None):
    # an integer or boolean result has a zero tangent
    return ra.tangent_like(dx, ans)


def py_float(ans, x, dx=None):
    return ra.py_float(dx)


# ------------------------------------------------------------------ Python builtins


def py_sum(ans, iterable, start=0, diterable=None, dstart=None):
    return ra.sum_tangents(diterable) + dstart


def py_max(ans, *args, key=None, dargs=None):
    return ra.cot_or_zeros(ra.py_max_pick(dargs, ans, args), ans)


def py_min(ans, *args, key=None, dargs=None):
    return ra.cot_or_zeros(ra.py_max_pick(dargs, ans, args), ans)


# ------------------------------------------------------------------ runtime helpers
# Their rules make generated gradient code differentiable in forward mode (hessians
# are forward over reverse).  A helper linear in its cotangent ``t`` has the helper
# itself, applied to ``dt``, as its jvp.


def unbroadcast(ans, t, x, dt=None):
    return ra.unbroadcast(dt, x)


def broadcast_like(ans, t, x, dt=None):
    return ra.broadcast_like(dt, x)


def unreduce(ans, t, x, axis=None, keepdims=False, dt=None):
    return ra.unreduce(dt, x, axis, keepdims)


def clip_part(ans, t, a, a_min=None, a_max=None, min=None, max=None, which=0, dt=None):
    return ra.clip_part(dt, a, a_min, a_max, min, max, which)


def fold_axes(ans, x, axis=None, dx=None):
    return ra.fold_axes(dx, axis)


def unfold_axes(ans, t, x, axis=None, dt=None):
    return ra.unfold_axes(dt, x, axis)


def prod_others_last(ans, a, da=None):
    # d out_i = sum over j != i of da_j * (product of a over k != i, j); row i of m
    # is a with a_i = 1
    e = ra.eye_last(a)
    m = np.expand_dims(a, -2) * (1.0 - e) + e
    return np.sum(ra.prod_others_last(m) * (1.0 - e) * np.expand_dims(da, -2), axis=-1)


def diagonal_vjp(ans, t, x, offset=0, axis1=0, axis2=1, dt=None):
    return ra.diagonal_vjp(dt, x, offset, axis1, axis2)


def diag_vjp(ans, t, v, k=0, dt=None):
    return ra.diag_vjp(dt, v, k)


def tile_vjp(ans, t, A, reps, dt=None):
    return ra.tile_vjp(dt, A, reps)


def repeat_vjp(ans, t, a, repeats, axis=None, dt=None):
    return ra.repeat_vjp(dt, a, repeats, axis)


def pad_vjp(ans, t, array, pad_width, mode="constant", dt=None):
    return ra.pad_vjp(dt, array, pad_width, mode)


def take_vjp(ans, t, a, indices, axis=None, mode="raise", dt=None):
    return ra.take_vjp(dt, a, indices, axis, mode)


def take_along_axis_vjp(ans, t, arr, indices, axis=-1, dt=None):
    return ra.take_along_axis_vjp(dt, arr, indices, axis)


def diff_vjp(ans, t, a, n=1, axis=-1, prepend=None, append=None, dt=None):
    return ra.diff_vjp(dt, a, n, axis, prepend, append)


def diff_vjp_adj(ans, s, a, n=1, axis=-1, prepend=None, append=None, ds=None):
    return ra.diff_vjp_adj(ds, a, n, axis, prepend, append)


def concat_vjp(ans, t, arrays, axis=0, how="concatenate", dt=None):
    return ra.concat_vjp(dt, arrays, axis, how)


def concat_cots(ans, ts, arrays, axis=0, how="concatenate", dts=None):
    return ra.concat_cots(dts, arrays, axis, how)


def unpack_variadic(ans, t, xs, dt=None):
    return ra.unpack_variadic(dt, xs)


def pack_variadic(ans, ts, t, dts=None):
    return ra.pack_variadic(dts, t)


def asarray_vjp(ans, t, a, dt=None):
    return ra.asarray_vjp(dt, a)


def pack_cots(ans, ts, x, dts=None):
    return ra.pack_cots(dts, x)


def real_only(ans, value, x, what, dvalue=None):
    return ra.real_only(dvalue, x, what)


def cast_like(ans, t, x, dt=None):
    return ra.cast_like(dt, x)


def zero_if_integer(ans, t, x, dt=None):
    return ra.zero_if_integer(dt, x)


def none_if_integer(ans, t, x, dt=None):
    return ra.none_if_integer(dt, x)


def chol_lower(ans, x, upper=False, dx=None):
    return ra.chol_lower(dx, upper)


def getitem_vjp(ans, t, x, index, dt=None):
    return ra.getitem_vjp(dt, x, index)


def setitem_zero(ans, t, index, dt=None):
    return ra.setitem_zero(dt, index)


def cot_or_zeros(ans, t, like, dt=None):
    return ra.cot_or_zeros(dt, like)


def py_sum_vjp(ans, t, iterable, dt=None):
    return ra.py_sum_vjp(dt, iterable)


def sum_cots(ans, ts, x, dts=None):
    return ra.sum_cots(dts, x)


def py_max_vjp(ans, t, chosen, args, dt=None):
    return ra.py_max_vjp(dt, chosen, args)


def py_max_pick(ans, ts, chosen, args, dts=None):
    return ra.py_max_pick(dts, chosen, args)


def norm_vjp(ans, t, x, ord=None, axis=None, keepdims=False, dt=None, dx=None):
    # linear in t; in x, the norm's Hessian applied to dx (scaled by t)
    return ra.norm_vjp(dt, x, ord, axis, keepdims) + ra.norm_vjp_x(dx, t, x, ord, axis, keepdims)


def norm_vjp_t(ans, s, x, ord=None, axis=None, keepdims=False, ds=None, dx=None):
    return ra.norm_vjp_t(ds, x, ord, axis, keepdims) + ra.norm_hvp(s, dx, x, ord, axis, keepdims)


def norm_vjp_x(ans, s, t, x, ord=None, axis=None, keepdims=False, ds=None, dt=None, dx=None):
    return (ra.norm_vjp_x(ds, t, x, ord, axis, keepdims)
            + ra.norm_vjp_x(s, dt, x, ord, axis, keepdims)
            + ra.unsupported_jvp("third derivatives of np.linalg.norm", dx))


def log_or_one(ans, base, dbase=None):
    return dbase / ra.or_one(base)


def or_one(ans, base, dbase=None):
    return dbase


def add_cot(ans, t, x, y, which=0, dt=None):
    return ra.add_cot(dt, x, y, which)


def add_cot_vjp(ans, s, t, x, y, which=0, ds=None):
    return ra.add_cot_vjp(ds, t, x, y, which)


# ------------------------------------------------------------------ forward-mode helpers


def tangent_like(ans, t, like, dt=None):
    return ra.tangent_like(dt, like)


def tangent_like_vjp(ans, s, t, like, ds=None):
    return ra.tangent_like_vjp(ds, t, like)


def getitem_jvp(ans, t, x, index, dt=None):
    return ra.getitem_jvp(dt, x, index)


def setitem_jvp(ans, t, index, tv, x, dt=None, dtv=None):
    return ra.setitem_jvp(dt, index, dtv, x)


def sum_tangents(ans, ts, dts=None):
    return ra.sum_tangents(dts)


def pad_jvp(ans, t, pad_width, mode="constant", dt=None):
    return ra.pad_jvp(dt, pad_width, mode)


def norm_jvp(ans, t, x, ord=None, axis=None, keepdims=False, dt=None, dx=None):
    return ra.norm_jvp(dt, x, ord, axis, keepdims) + ra.norm_hvp(t, dx, x, ord, axis, keepdims)


# ------------------------------------------------------------------ the NumPy surface


def linspace(ans, start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0,
             dstart=None, dstop=None):
    # linear in the endpoints together (the step of retstep=True too)
    return ra.tangent_like(np.linspace(dstart, dstop, num, endpoint, retstep, None, axis), ans)


def logspace(ans, start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0,
             dstart=None, dstop=None, dbase=None):
    be = np.expand_dims(base, axis)
    dl = np.linspace(dstart, dstop, num, endpoint, False, None, axis)
    lin = np.linspace(start, stop, num, endpoint, False, None, axis)
    return ra.tangent_like(ans * (np.log(be) * dl + lin * np.expand_dims(dbase, axis) / be), ans)


def index_concat_vjp(ans, t, which, items, dt=None):
    return ra.index_concat_vjp(dt, which, items)


def index_concat_jvp(ans, ts, which, items, dts=None):
    return ra.index_concat_jvp(dts, which, items)


def uplo_t(ans, x, UPLO="L", dx=None):
    return ra.uplo_t(dx, UPLO)


# ------------------------------------------------------------------ decompositions


def svd(ans, a, full_matrices=True, compute_uv=True, hermitian=False, da=None):
    # JAX's rule (real): dS = U^T dA V, ds = diag(dS), F_ij = 1/(s_j^2 - s_i^2),
    #   dU = U (F o (dS s + s dS^T)) + (I - U U^T) dA V / s
    #   dV = V (F o (s dS + dS^T s)) + (I - V V^T) dA^T U / s
    # full_matrices=True, non-square: the extra columns Q of U (rows P of Vh) move by
    # the smallest rotation keeping [U Q] orthogonal: dQ = -U dU^T Q, dP = -P dV Vh
    usv = np.linalg.svd(a, full_matrices, True, hermitian)
    s = ra.getitem(usv, 1)
    uf = ra.getitem(usv, 0)
    vhf = ra.getitem(usv, 2)
    u = ra.getitem(uf, ra.svd_index(s, 0))
    q = ra.getitem(uf, ra.svd_index(s, 1))
    vh = ra.getitem(vhf, ra.svd_index(s, 2))
    p = ra.getitem(vhf, ra.svd_index(s, 3))
    v = np.swapaxes(vh, -1, -2)
    e = ra.eye_last(s)
    s2 = s * s
    f = 1.0 / (e + np.expand_dims(s2, -2) - np.expand_dims(s2, -1)) - e
    sinv = np.where(s == 0, 0.0, 1.0 / np.where(s == 0, 1.0, s))
    dav = np.matmul(da, v)
    dm = np.matmul(np.swapaxes(u, -1, -2), dav)
    dss = dm * np.expand_dims(s, -2)
    sds = np.expand_dims(s, -1) * dm
    du = (np.matmul(u, f * (dss + np.swapaxes(dss, -1, -2)))
          + (dav - np.matmul(u, dm)) * np.expand_dims(sinv, -2))
    datu = np.matmul(np.swapaxes(da, -1, -2), u)
    dv = (np.matmul(v, f * (sds + np.swapaxes(sds, -1, -2)))
          + (datu - np.matmul(v, np.matmul(vh, datu))) * np.expand_dims(sinv, -2))
    dq = -np.matmul(u, np.matmul(np.swapaxes(du, -1, -2), q))
    dp = -np.matmul(np.matmul(p, dv), vh)
    duf = ra.getitem_vjp(du, uf, ra.svd_index(s, 0)) + ra.getitem_vjp(dq, uf, ra.svd_index(s, 1))
    dvhf = (ra.getitem_vjp(np.swapaxes(dv, -1, -2), vhf, ra.svd_index(s, 2))
            + ra.getitem_vjp(dp, vhf, ra.svd_index(s, 3)))
    packed = ra.svd_pack((duf, np.diagonal(dm, 0, -2, -1), dvhf), compute_uv)
    return ra.real_only(ra.tangent_like(packed, ans), a, "np.linalg.svd")


def svdvals(ans, x, dx=None):
    usv = np.linalg.svd(x, False)
    u = ra.getitem(usv, 0)
    v = np.swapaxes(ra.getitem(usv, 2), -1, -2)
    return ra.real_only(np.sum(u * np.matmul(dx, v), axis=-2), x, "np.linalg.svdvals")


def qr(ans, a, mode="reduced", da=None):
    # JAX's rule (rows >= columns): X = dA R^-1, do = tril(Q^T X, -1) - its transpose,
    # dQ = Q (do - Q^T X) + X, dR = (Q^T X - do) R
    qrr = np.linalg.qr(ra.qr_input(a, mode))
    q = ra.getitem(qrr, 0)
    r = ra.getitem(qrr, 1)
    x = np.swapaxes(np.linalg.solve(np.swapaxes(r, -1, -2), np.swapaxes(da, -1, -2)), -1, -2)
    qtx = np.matmul(np.swapaxes(q, -1, -2), x)
    low = np.tril(qtx, -1)
    do = low - np.swapaxes(low, -1, -2)
    dq = np.matmul(q, do - qtx) + x
    dr = np.matmul(qtx - do, r)
    return ra.real_only(ra.tangent_like(ra.qr_pack((dq, dr), a, mode), ans), a, "np.linalg.qr")


def eig(ans, a, da=None):
    # real eigenvalues: M = V^-1 dA V, dw = diag(M), dV = V (F o M) without the
    # components along each (unit) eigenvector, F = 1/(w_j - w_i)
    wv = ra.eig_real(ans)
    w = ra.getitem(wv, 0)
    v = ra.getitem(wv, 1)
    e = ra.eye_last(w)
    f = 1.0 / (e + np.expand_dims(w, -2) - np.expand_dims(w, -1)) - e
    m = np.linalg.solve(v, np.matmul(da, v))
    dv = np.matmul(v, f * m)
    dv = dv - v * np.sum(v * dv, axis=-2, keepdims=True)
    return ra.tangent_like((np.diagonal(m, 0, -2, -1), dv), ans)


def eigvals(ans, a, da=None):
    v = ra.getitem(ra.eig_real(np.linalg.eig(a), ans), 1)
    return ra.tangent_like(np.diagonal(np.linalg.solve(v, np.matmul(da, v)), 0, -2, -1), ans)


def lstsq(ans, a, b, rcond=None, da=None, db=None):
    # x = P b: dx = dP b + P db (dP: pinv's rule); the residuals 2 r^T (db - da x) per
    # column where they exist; the singular values diag(U^T da V); the rank none
    p = np.linalg.pinv(a, rcond)
    pt = np.swapaxes(p, -1, -2)
    dat = np.swapaxes(da, -1, -2)
    u1 = np.matmul(dat, np.matmul(pt, p))
    u2 = np.matmul(np.matmul(p, pt), dat)
    dp = (-np.matmul(p, np.matmul(da, p)) + u1 - np.matmul(p, np.matmul(a, u1))
          + u2 - np.matmul(np.matmul(u2, a), p))
    x = ra.getitem(ans, 0)
    bc = np.reshape(b, ra.col_shape(b, b))
    xc = np.reshape(x, ra.col_shape(x, b))
    dbc = np.reshape(db, ra.col_shape(b, b))
    dx = np.matmul(dp, bc) + np.matmul(p, dbc)
    r = bc - np.matmul(a, xc)
    dres_w = np.sum(2.0 * r * (dbc - np.matmul(da, xc)), axis=0)
    res = ra.getitem(ans, 1)
    dres = ra.lstsq_weight_t(np.reshape(dres_w, np.shape(ra.lstsq_weight(None, res, b))),
                             res, b)
    usv = np.linalg.svd(a, full_matrices=False)
    ds = np.sum(ra.getitem(usv, 0) * np.matmul(da, np.swapaxes(ra.getitem(usv, 2), -1, -2)),
                axis=0)
    tangent = ra.tangent_like((np.reshape(dx, np.shape(x)), dres, 0.0, ds), ans)
    return ra.real_only(ra.real_only(tangent, a, "np.linalg.lstsq"), b, "np.linalg.lstsq")


def lstsq_weight(ans, t, res, b, dt=None):
    return ra.lstsq_weight(dt, res, b)


def lstsq_weight_t(ans, w, res, b, dw=None):
    return ra.lstsq_weight_t(dw, res, b)


def pinv(ans, a, rcond=None, hermitian=False, rtol=None, da=None):
    # dP = -P dA P + (I - P A) dA^T P^T P + P P^T dA^T (I - A P) (constant rank)
    pt = np.swapaxes(ans, -1, -2)
    dat = np.swapaxes(da, -1, -2)
    x = np.matmul(dat, np.matmul(pt, ans))
    y = np.matmul(np.matmul(ans, pt), dat)
    dp = (-np.matmul(ans, np.matmul(da, ans)) + x - np.matmul(ans, np.matmul(a, x))
          + y - np.matmul(np.matmul(y, a), ans))
    return ra.real_only(dp, a, "np.linalg.pinv")


def cross(ans, a, b, axisa=-1, axisb=-1, axisc=-1, axis=None, da=None, db=None):
    return np.cross(da, b, axisa, axisb, axisc, axis) + np.cross(a, db, axisa, axisb, axisc, axis)


def svd_parts(ans, t, compute_uv=True, dt=None):
    return ra.svd_parts(dt, compute_uv)


def svd_pack(ans, ts, compute_uv=True, dts=None):
    return ra.svd_pack(dts, compute_uv)


def qr_parts(ans, t, a, mode="reduced", dt=None):
    return ra.qr_parts(dt, a, mode)


def qr_pack(ans, ts, a, mode="reduced", dts=None):
    return ra.qr_pack(dts, a, mode)


def eig_real(ans, wv, w=None, dwv=None):
    # (the real parts of NumPy 2.5's complex results: of their tangents too)
    return ra.tangent_like(ra.real_parts(dwv), ans)


def real_parts(ans, t, dt=None):
    return ra.real_parts(dt)


# ------------------------------------------------------------------ more of the NumPy surface


def rollaxis(ans, a, axis, start=0, da=None):
    return np.rollaxis(da, axis, start)


def partition(ans, a, kth, axis=-1, kind="introselect", order=None, da=None):
    return np.take_along_axis(da, np.argpartition(a, kth, axis=axis), axis=axis)


def np_append(ans, arr, values, axis=None, darr=None, dvalues=None):
    return np.append(darr, dvalues, axis)


def fftshift(ans, x, axes=None, dx=None):
    return np.fft.fftshift(dx, axes)


def ifftshift(ans, x, axes=None, dx=None):
    return np.fft.ifftshift(dx, axes)


# np.fft: linear, the tangent is transformed by the same call


def fft(ans, a, n=None, axis=-1, norm=None, out=None, da=None):
    return np.fft.fft(da, n, axis, norm)


def ifft(ans, a, n=None, axis=-1, norm=None, out=None, da=None):
    return np.fft.ifft(da, n, axis, norm)


def fft2(ans, a, s=None, axes=(-2, -1), norm=None, out=None, da=None):
    return np.fft.fft2(da, s, axes, norm)


def ifft2(ans, a, s=None, axes=(-2, -1), norm=None, out=None, da=None):
    return np.fft.ifft2(da, s, axes, norm)


def fftn(ans, a, s=None, axes=None, norm=None, out=None, da=None):
    return np.fft.fftn(da, s, axes, norm)


def ifftn(ans, a, s=None, axes=None, norm=None, out=None, da=None):
    return np.fft.ifftn(da, s, axes, norm)


def rfft(ans, a, n=None, axis=-1, norm=None, out=None, da=None):
    return np.fft.rfft(da, n, axis, norm)


def rfft2(ans, a, s=None, axes=(-2, -1), norm=None, out=None, da=None):
    return np.fft.rfft2(da, s, axes, norm)


def rfftn(ans, a, s=None, axes=None, norm=None, out=None, da=None):
    return np.fft.rfftn(da, s, axes, norm)


def irfft(ans, a, n=None, axis=-1, norm=None, out=None, da=None):
    return np.fft.irfft(da, n, axis, norm)


def irfft2(ans, a, s=None, axes=(-2, -1), norm=None, out=None, da=None):
    return np.fft.irfft2(da, s, axes, norm)


def irfftn(ans, a, s=None, axes=None, norm=None, out=None, da=None):
    return np.fft.irfftn(da, s, axes, norm)


def hfft(ans, a, n=None, axis=-1, norm=None, out=None, da=None):
    return np.fft.hfft(da, n, axis, norm)


def ihfft(ans, a, n=None, axis=-1, norm=None, out=None, da=None):
    return np.fft.ihfft(da, n, axis, norm)


def fft_fit(ans, t, x, axes, dt=None):
    return ra.fft_fit(dt, x, axes)


def irfft_scale(ans, h, axes, lengths, norm=None, dh=None):
    return ra.irfft_scale(dh, axes, lengths, norm)


def angle(ans, z, deg=False, dz=None):
    # Im(dz / z) (real z: 0; at 0 nan, as jnp.angle)
    at_zero = z == 0
    turn = np.where(at_zero, np.nan, np.imag(dz / np.where(at_zero, 1.0, z)))
    return ra.tangent_like(turn * np.where(deg, 57.29577951308232, 1.0), ans)


def real_if_close(ans, a, tol=100, da=None):
    return da


def nan_to_num(ans, x, copy=True, nan=0.0, posinf=None, neginf=None, dx=None, dnan=None,
               dposinf=None, dneginf=None):
    xr = ra.real_only(x, x, "np.nan_to_num")   # (complex x: refused, before comparing)
    return (np.where(np.isfinite(xr), dx, 0.0) + np.where(np.isnan(xr), dnan, 0.0)
            + np.where(np.logical_and(np.isinf(xr), xr > 0), dposinf, 0.0)
            + np.where(np.logical_and(np.isinf(xr), xr < 0), dneginf, 0.0))


def divmod(ans, x, y, dx=None, dy=None):
    q = ra.getitem(ans, 0)
    return ra.tangent_like((np.zeros_like(q), dx - dy * q), ans)


def modf(ans, x, dx=None):
    return ra.tangent_like((dx, np.zeros_like(ra.getitem(ans, 1))), ans)


def np_select(ans, condlist, choicelist, default=0, dchoicelist=None, ddefault=None):
    return ra.select_tangent(dchoicelist, ddefault, condlist, choicelist, default)


def gradient(ans, f, *varargs, axis=None, edge_order=1, df=None, dvarargs=None):
    # a differentiated spacing is refused (ra.refuse_tangents raises then)
    return ra.gradient_list(ra.refuse_tangents(df, dvarargs), f, varargs, axis, edge_order)


def select_tangent(ans, ts, td, condlist, choicelist, default, dts=None, dtd=None):
    return ra.select_tangent(dts, dtd, condlist, choicelist, default)


def select_cot(ans, t, condlist, choicelist, default, which=0, dt=None):
    return ra.select_cot(dt, condlist, choicelist, default, which)


def select_cot_t(ans, h, condlist, choicelist, default, which=0, dh=None):
    return ra.select_cot_t(dh, condlist, choicelist, default, which)


def gradient_vjp(ans, t, f, varargs, axis=None, edge_order=1, dt=None):
    return ra.gradient_vjp(dt, f, varargs, axis, edge_order)


def gradient_list(ans, t, f, varargs, axis=None, edge_order=1, dt=None):
    return ra.gradient_list(dt, f, varargs, axis, edge_order)


def refuse_tangents(ans, t, ts, dt=None):
    return ra.refuse_tangents(dt, ts)


def qr_input(ans, a, mode="reduced", da=None):
    return da


def ptp(ans, a, axis=None, out=None, keepdims=False, da=None):
    hi = np.max(a, axis=axis, keepdims=keepdims)
    lo = np.min(a, axis=axis, keepdims=keepdims)
    w = ra.extremum_weights(a, hi, axis, keepdims) - ra.extremum_weights(a, lo, axis, keepdims)
    return np.sum(da * w, axis=axis, keepdims=keepdims)


def median(ans, a, axis=None, out=None, overwrite_input=False, keepdims=False, da=None):
    return np.sum(da * ra.median_weights(a, axis, keepdims), axis=axis, keepdims=keepdims)


def copysign(ans, x, y, out=None, dx=None, dy=None):
    return np.where(x >= 0, dx, -dx) * np.copysign(1.0, y)


def heaviside(ans, x, y, out=None, dx=None, dy=None):
    return np.where(x == 0, dy, 0.0)


def convolve(ans, a, v, mode="full", da=None, dv=None):
    return np.convolve(da, v, mode) + np.convolve(a, dv, mode)


def correlate(ans, a, v, mode="valid", da=None, dv=None):
    return np.correlate(da, v, mode) + np.correlate(a, dv, mode)


def polyval(ans, p, x, dp=None, dx=None):
    k = ra.poly_powers(p)
    xe = np.expand_dims(x, -1)
    slope = np.sum(p * k * np.power(np.where(k == 0, 1.0, xe), k - 1), axis=-1)
    return np.polyval(dp, x) + dx * slope


def conv_full_cot(ans, t, a, v, mode="full", dt=None):
    return ra.conv_full_cot(dt, a, v, mode)


def conv_full_cut(ans, t, a, v, mode="full", dt=None):
    return ra.conv_full_cut(dt, a, v, mode)


def matrix_power(ans, a, n, da=None):
    # sum_k a^k da a^(n-1-k): the upper right block of [[a, da], [0, a]]^n
    p = np.linalg.matrix_power(ra.power_block(a, da, n), n)
    return ra.getitem(p, ra.power_block_index(a))


def power_block(ans, x, t, n, dx=None, dt=None):
    return ra.power_block(dx, dt, n)


def einsum_multi(ans, plan, groups, dgroups=None):
    return ra.einsum_multi(ra.einsum_plans_j(plan, groups), ra.group2(groups, dgroups))


def group2(ans, a, b, da=None, db=None):
    return ra.group2(da, db)


def nanvar(ans, a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, da=None):
    d = np.conj(np.where(np.isnan(a), 0.0, a - np.nanmean(a, axis=axis, keepdims=True)))
    n = np.sum(np.logical_not(np.isnan(a)), axis=axis, keepdims=keepdims)
    da = np.where(np.isnan(a), 0.0, da)   # (skipped entries' tangents may be NaN)
    return ra.tangent_like(np.real(np.sum(d * da, axis=axis, keepdims=keepdims)) * 2.0 / (
        n - ddof), ans)


def nanstd(ans, a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, da=None):
    d = np.conj(np.where(np.isnan(a), 0.0, a - np.nanmean(a, axis=axis, keepdims=True)))
    n = np.sum(np.logical_not(np.isnan(a)), axis=axis, keepdims=keepdims)
    da = np.where(np.isnan(a), 0.0, da)   # (skipped entries' tangents may be NaN)
    return ra.tangent_like(np.real(np.sum(d * da, axis=axis, keepdims=keepdims)) / (
        ans * (n - ddof)), ans)


def nanprod(ans, a, axis=None, dtype=None, out=None, keepdims=False, da=None):
    a1 = np.where(np.isnan(a), 1.0, a)
    others = ra.unfold_axes(ra.prod_others_last(ra.fold_axes(a1, axis)), a1, axis)
    return np.sum(np.where(np.isnan(a), 0.0, da) * others, axis=axis, keepdims=keepdims)


def nancumsum(ans, a, axis=None, dtype=None, out=None, da=None):
    return np.cumsum(np.where(np.isnan(a), 0.0, da), axis=axis)


def quantile(ans, a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, weights=None, da=None, dq=None):
    # a differentiated q is refused (ra.refuse_tangent raises then)
    return (ra.quantile_jvp(da, a, q, axis, keepdims, method)
            + ra.refuse_tangent(dq, "the derivative of np.quantile in q"))


def percentile(ans, a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, weights=None, da=None, dq=None):
    return (ra.quantile_jvp(da, a, np.asarray(q) / 100.0, axis, keepdims, method)
            + ra.refuse_tangent(dq, "the derivative of np.percentile in q"))


def quantile_vjp(ans, t, a, q, axis=None, keepdims=False, method="linear", dt=None):
    return ra.quantile_vjp(dt, a, q, axis, keepdims, method)


def quantile_jvp(ans, t, a, q, axis=None, keepdims=False, method="linear", dt=None):
    return ra.quantile_jvp(dt, a, q, axis, keepdims, method)


def average(ans, a, axis=None, weights=None, returned=False, keepdims=False, da=None,
            dweights=None):
    w = ra.average_weights(weights, a, axis, returned)
    sw = np.sum(w, axis=axis, keepdims=True)
    avg = np.sum(a * w, axis=axis, keepdims=True) / sw
    dw = ra.average_weights_lin(dweights, weights, a, axis)
    return np.sum((da * w + (a - avg) * dw) / sw, axis=axis, keepdims=keepdims)


def average_weights(ans, weights, a, axis=None, returned=False, dweights=None):
    return ra.average_weights_lin(dweights, weights, a, axis)


def average_weights_lin(ans, t, weights, a, axis=None, dt=None):
    return ra.average_weights_lin(dt, weights, a, axis)


def average_weights_t(ans, t, weights, a, axis=None, dt=None):
    return ra.average_weights_t(dt, weights, a, axis)


def linalg_trace(ans, x, offset=0, dtype=None, dx=None):
    return np.trace(dx, offset, -2, -1)


def linalg_diagonal(ans, x, offset=0, dx=None):
    return np.diagonal(dx, offset, -2, -1)


def linalg_cross(ans, x1, x2, axis=-1, dx1=None, dx2=None):
    return np.cross(dx1, x2, axis, axis, axis) + np.cross(x1, dx2, axis, axis, axis)


def matrix_norm(ans, x, keepdims=False, ord="fro", dx=None):
    return ra.norm_jvp(dx, x, ord, (-2, -1), keepdims)


def cumulative_sum(ans, x, axis=None, dtype=None, out=None, include_initial=False, dx=None):
    return ra.tangent_like(np.cumulative_sum(dx, axis=axis, include_initial=include_initial), ans)


def multi_dot(ans, arrays, out=None, darrays=None):
    plan = ra.multi_dot_plan(arrays)
    return ra.einsum_multi(ra.einsum_plans_j(plan, arrays), ra.group2(arrays, darrays))


def ediff1d(ans, ary, to_end=None, to_begin=None, dary=None, dto_end=None, dto_begin=None):
    # linear in all three (an absent to_end/to_begin stays absent in the tangent)
    return ra.ediff1d_lin(dary, dto_end, dto_begin, ary, to_end, to_begin)


def tangent_where(ans, t, x, dt=None):
    return ra.tangent_where(dt, x)


def ediff1d_lin(ans, t, t_end, t_begin, ary, to_end=None, to_begin=None, dt=None, dt_end=None,
                dt_begin=None):
    return ra.ediff1d_lin(dt, dt_end, dt_begin, ary, to_end, to_begin)


def cov(ans, m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None,
        dtype=None, dm=None):
    x = ra.cov_rows(m, rowvar)
    xc = x - np.mean(x, axis=1, keepdims=True)
    s = ra.cov_scale(x, y, bias, ddof, fweights, aweights)
    dx = ra.cov_rows(dm, rowvar)
    dxc = dx - np.mean(dx, axis=1, keepdims=True)
    dc = np.matmul(dxc, np.swapaxes(xc, -1, -2)) + np.matmul(xc, np.swapaxes(dxc, -1, -2))
    return ra.real_only(
        ra.tangent_like(np.reshape(dc * s, np.shape(ans)), ans),
        m, "np.cov")   # (NumPy: float64)


def corrcoef(ans, x, y=None, rowvar=True, dtype=None, dx=None):
    # dR = dC / (d d^T) - R (u_i + u_j), u = diag(dC) / (2 d^2)
    xr = ra.cov_rows(x, rowvar)
    xc = xr - np.mean(xr, axis=1, keepdims=True)
    s = ra.cov_scale(xr, y)
    c = np.matmul(xc, np.swapaxes(xc, -1, -2)) * s
    d = np.sqrt(np.diagonal(c))
    dd = np.outer(d, d)
    dxr = ra.cov_rows(dx, rowvar)
    dxc = dxr - np.mean(dxr, axis=1, keepdims=True)
    dc = (np.matmul(dxc, np.swapaxes(xc, -1, -2)) + np.matmul(xc, np.swapaxes(dxc, -1, -2))) * s
    u = np.diagonal(dc) / (2.0 * d * d)
    dr = dc / dd - (c / dd) * (np.expand_dims(u, -1) + np.expand_dims(u, 0))
    return ra.real_only(ra.tangent_like(np.reshape(dr, np.shape(ans)), ans), x, "np.corrcoef")


def cov_rows(ans, m, rowvar=True, dm=None):
    return ra.cov_rows(dm, rowvar)


def cov_rows_t(ans, t, m, rowvar=True, dt=None):
    return ra.cov_rows_t(dt, m, rowvar)


def interp(ans, x, xp, fp, left=None, right=None, period=None, dx=None, dxp=None, dfp=None,
           dleft=None, dright=None):
    b = ra.interp_basis(x, xp, left, right, period)
    slope = np.sum(ra.interp_slopes(x, xp, left, right, period) * fp, axis=-1)
    return (dx * slope + np.sum(b * dfp, axis=-1) + ra.interp_outside(x, xp, 0) * dleft
            + ra.interp_outside(x, xp, 1) * dright
            + ra.refuse_tangent(dxp, "the derivative of np.interp in xp"))


def interp_basis(ans, x, xp, left=None, right=None, period=None, dx=None):
    return np.expand_dims(dx, -1) * ra.interp_slopes(x, xp, left, right, period)


# ------------------------------------------------------------------ astjax.random
from astjax import random as jr  # noqa: E402


def random_uniform(ans, key, shape=(), dtype=None, minval=0.0, maxval=1.0, dminval=None,
                   dmaxval=None):
    u = jr.uniform(key, shape, dtype)
    return dminval - dminval * u + dmaxval * u


def random_uniform_batched(ans, key_b, shape=(), dtype=None, minval=0.0, maxval=1.0,
                           dminval=None, dmaxval=None):
    u = jr.uniform_batched(key_b, shape, dtype)
    return dminval - dminval * u + dmaxval * u


def random_permutation(ans, key, x, axis=0, independent=False, dx=None):
    return jr.permutation(key, dx, axis, independent)


def random_permutation_batched(ans, key_b, x, axis=0, independent=False, dx=None):
    return jr.permutation_batched(key_b, dx, axis, independent)


def random_permutation_vjp(ans, t, key, x, axis=0, independent=False, dt=None):
    return jr.permutation_vjp(dt, key, x, axis, independent)


def random_permutation_vjp_batched(ans, t, key_b, x, axis=0, independent=False, dt=None):
    return jr.permutation_vjp_batched(dt, key_b, x, axis, independent)


def random_truncated_normal(ans, key, lower, upper, shape=None, dtype=None, dlower=None,
                            dupper=None):
    u = jr.unit_like(key, ans)
    return dlower * ((1.0 - u) * np.exp((ans * ans - lower * lower) * 0.5)) + \
        dupper * (u * np.exp((ans * ans - upper * upper) * 0.5))


def random_truncated_normal_batched(ans, key_b, lower, upper, shape=None, dtype=None,
                                    dlower=None, dupper=None):
    u = jr.unit_like_batched(key_b, ans)
    return dlower * ((1.0 - u) * np.exp((ans * ans - lower * lower) * 0.5)) + \
        dupper * (u * np.exp((ans * ans - upper * upper) * 0.5))

def random_multivariate_normal(ans, key, mean, cov, shape=None, dtype=None,
                               method="cholesky", dmean=None, dcov=None):
    return jr.multivariate_normal_jvp(key, mean, cov, dmean, dcov, shape, dtype, method)


def random_multivariate_normal_batched(ans, key_b, mean, cov, shape=None, dtype=None,
                                       method="cholesky", dmean=None, dcov=None):
    return jr.multivariate_normal_jvp_batched(key_b, mean, cov, dmean, dcov, shape, dtype,
                                              method)


def random_gamma(ans, key, a, shape=None, dtype=None, da=None):
    return da * jr.gamma_grad(a, ans)


def random_gamma_batched(ans, key_b, a, shape=None, dtype=None, da=None):
    return da * jr.gamma_grad(a, ans)

# ------------------------------------------------------------------ collectives
# Collectives are linear: the tangent goes through the same collective (pmax/pmin:
# the mean tangent of the devices holding the extreme).
from astjax.sharding import collectives as sh  # noqa: E402


def psum(ans, x, axis_name, dx=None):
    return sh.psum(dx, axis_name)


def pmean(ans, x, axis_name, dx=None):
    return sh.pmean(dx, axis_name)


def pmax(ans, x, axis_name, dx=None):
    return sh.pextreme_jvp(dx, x, ans, axis_name)


def pmin(ans, x, axis_name, dx=None):
    return sh.pextreme_jvp(dx, x, ans, axis_name)


def pvary(ans, x, axis_name, dx=None):
    return sh.pvary(dx, ())


def pcast(ans, x, axis_name, to, dx=None):
    return sh.pvary(dx, ())


def all_gather(ans, x, axis_name, axis=0, tiled=False, axis_index_groups=None, dx=None):
    return sh.all_gather(dx, axis_name, axis=axis, tiled=tiled)


def psum_scatter(ans, x, axis_name, scatter_dimension=0, tiled=False,
                 axis_index_groups=None, dx=None):
    return sh.psum_scatter(dx, axis_name, scatter_dimension=scatter_dimension, tiled=tiled)


def ppermute(ans, x, axis_name, perm, dx=None):
    return sh.ppermute(dx, axis_name, perm)


def all_to_all(ans, x, axis_name, split_axis, concat_axis, tiled=False,
               axis_index_groups=None, dx=None):
    return sh.all_to_all(dx, axis_name, split_axis, concat_axis, tiled=tiled)


def psum_t(ans, t, axis_name, dt=None):
    return sh.psum_t(dt, axis_name)


def pmean_t(ans, t, axis_name, dt=None):
    return sh.pmean_t(dt, axis_name)


def all_gather_t(ans, t, axis_name, axis=0, tiled=False, dt=None):
    return sh.all_gather_t(dt, axis_name, axis, tiled)


def pextreme_t(ans, t, x, top, axis_name, dt=None):
    return sh.pextreme_t(dt, x, top, axis_name)


def pextreme_jvp(ans, t, x, top, axis_name, dt=None):
    return sh.pextreme_jvp(dt, x, top, axis_name)


def shard_map_call(ans, plan, args, dargs=None):
    return sh.shard_map_call(sh.jvp_plan(plan), (args, dargs))
