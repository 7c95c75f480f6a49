"""Vector-Jacobian product templates, one per differentiable primitive.

Convention: ``def <primitive>(g, ans, <params...>)`` where ``g`` is the cotangent of
the result, ``ans`` the primal result and the remaining parameters are the
primitive's own (see ``Primitive.params``).  The function returns one cotangent per
entry of ``Primitive.diff``, in order (a bare expression when there is one); ``None``
means zero.  Bodies are plain NumPy so a template can be called directly in tests;
the reverse-mode transformation parses the body and inlines it with names
substituted, so keep each body to a few straight-line statements ending in a
``return``.

Every call here is itself a registered primitive (``np.*`` or a ``ra.*`` helper) and
every cotangent ends with the shape and dtype of its primal (``ra.unbroadcast`` does
both), so the code these rules generate can be differentiated again.  Semantics
follow JAX: ties of max/min share the cotangent, rounding has a zero derivative.
Numeric constants are Python floats so float32 stays float32.
"""
import numpy as np

from astjax import runtime as rt, runtime_array as ra

# ------------------------------------------------------------------ arithmetic


def add(g, ans, x, y, out=None):
    # ra.add_cot also splits the cotangent of a list/tuple concatenation (a + b)
    return ra.add_cot(g, x, y, 0), ra.add_cot(g, x, y, 1)


def subtract(g, ans, x, y, out=None):
    return ra.unbroadcast(g, x), ra.unbroadcast(-g, y)


def multiply(g, ans, x, y, out=None):
    return ra.unbroadcast(g * y, x), ra.unbroadcast(g * x, y)


def divide(g, ans, x, y, out=None):
    return ra.unbroadcast(g / y, x), ra.unbroadcast(-g * ans / y, y)


def floor_divide(g, ans, x, y, out=None):
    return None, None


def remainder(g, ans, x, y, out=None):
    return ra.unbroadcast(g, x), ra.unbroadcast(-g * np.floor_divide(x, y), y)


def fmod(g, ans, x, y, out=None):
    return ra.unbroadcast(g, x), ra.unbroadcast(-g * np.trunc(x / y), y)


def power(g, ans, x, y, out=None):
    # d/dy is x ** y * log(x) where x > 0 and 0 elsewhere (no nan from 0 ** y; for
    # x < 0, where x ** y is real only at integer y, JAX would give nan).  d/dx is 0
    # where y == 0, like JAX's integer_pow: the base is replaced by 1 there, so no
    # 0.0 ** -1 (Python raises ZeroDivisionError, NumPy gives inf) at any order
    gx = ra.unbroadcast(g * y * np.power(np.where(y == 0, 1.0, x), y - 1), x)
    gy = ra.unbroadcast(g * ans * np.log(np.where(x > 0, x, 1.0)), y)
    return gx, gy


def float_power(g, ans, x, y, out=None):
    gx = ra.unbroadcast(g * y * np.float_power(np.where(y == 0, 1.0, x), y - 1), x)
    gy = ra.unbroadcast(g * ans * np.log(np.where(x > 0, x, 1.0)), y)
    return gx, gy


def matmul(g, ans, x, y, out=None):
    # 1-D operands become (1, n) / (n, 1) matrices; batch dimensions unbroadcast
    x2 = np.reshape(x, ra.matmul_shape(x, y, 0))
    y2 = np.reshape(y, ra.matmul_shape(x, y, 1))
    g2 = np.reshape(g, ra.matmul_shape(x, y, 2))
    gx = ra.unbroadcast(np.matmul(g2, np.swapaxes(y2, -1, -2)), x2)
    gy = ra.unbroadcast(np.matmul(np.swapaxes(x2, -1, -2), g2), y2)
    return np.reshape(gx, np.shape(x)), np.reshape(gy, np.shape(y))


def vecdot(g, ans, x, y, out=None, axis=-1):
    # sum(conj(x) y) along axis: conjugate-linear in x
    ge = np.expand_dims(g, axis)
    return ra.unbroadcast(np.conj(ge * y), x), ra.unbroadcast(ge * np.conj(x), y)


def maximum(g, ans, x, y, out=None):
    return (ra.unbroadcast(g * ra.max_weight(x, y, g), x),
            ra.unbroadcast(g * ra.max_weight(y, x, g), y))


def minimum(g, ans, x, y, out=None):
    return (ra.unbroadcast(g * ra.max_weight(y, x, g), x),
            ra.unbroadcast(g * ra.max_weight(x, y, g), y))


def fmax(g, ans, x, y, out=None):
    return (ra.unbroadcast(g * ra.fmax_weight(x, y, g), x),
            ra.unbroadcast(g * ra.fmax_weight(y, x, g), y))


def fmin(g, ans, x, y, out=None):
    return (ra.unbroadcast(g * ra.fmin_weight(x, y, g), x),
            ra.unbroadcast(g * ra.fmin_weight(y, x, g), y))


def arctan2(g, ans, x, y, out=None):
    d = g / (x * x + y * y)
    return ra.unbroadcast(d * y, x), ra.unbroadcast(-d * x, y)


def hypot(g, ans, x, y, out=None):
    return ra.unbroadcast(g * x / ans, x), ra.unbroadcast(g * y / ans, y)


def logaddexp(g, ans, x, y, out=None):
    return ra.unbroadcast(g * np.exp(x - ans), x), ra.unbroadcast(g * np.exp(y - ans), y)


def logaddexp2(g, ans, x, y, out=None):
    return ra.unbroadcast(g * np.exp2(x - ans), x), ra.unbroadcast(g * np.exp2(y - ans), y)


def math_log(g, ans, x, base=None):
    lb = ra.log_or_one(base)
    gx = ra.unbroadcast(g / (x * lb), x)
    return gx, ra.unbroadcast(-g * ans / (ra.or_one(base) * lb), base)


# ------------------------------------------------------------------ elementwise


def negative(g, ans, x, out=None):
    return -g


def positive(g, ans, x, out=None):
    return g


def exp(g, ans, x, out=None):
    return g * ans


def exp2(g, ans, x, out=None):
    return g * ans * 0.6931471805599453


def expm1(g, ans, x, out=None):
    return g * (ans + 1.0)


def log(g, ans, x, out=None):
    return g / x


def log2(g, ans, x, out=None):
    return g / (x * 0.6931471805599453)


def log10(g, ans, x, out=None):
    return g / (x * 2.302585092994046)


def log1p(g, ans, x, out=None):
    return g / (x + 1.0)


def sqrt(g, ans, x, out=None):
    return g * 0.5 / ans


def cbrt(g, ans, x, out=None):
    return g / (3.0 * ans * ans)


def square(g, ans, x, out=None):
    return g * 2.0 * x


def reciprocal(g, ans, x, out=None):
    return -g * ans * ans


def sin(g, ans, x, out=None):
    return g * np.cos(x)


def cos(g, ans, x, out=None):
    return -g * np.sin(x)


def tan(g, ans, x, out=None):
    return g * (1.0 + ans * ans)


def arcsin(g, ans, x, out=None):
    return g / np.sqrt(1.0 - x * x)


def arccos(g, ans, x, out=None):
    return -g / np.sqrt(1.0 - x * x)


def arctan(g, ans, x, out=None):
    return g / (1.0 + x * x)


def sinh(g, ans, x, out=None):
    return g * np.cosh(x)


def cosh(g, ans, x, out=None):
    return g * np.sinh(x)


def tanh(g, ans, x, out=None):
    return g * (1.0 - ans * ans)


def arcsinh(g, ans, x, out=None):
    return g / np.sqrt(x * x + 1.0)


def arccosh(g, ans, x, out=None):
    return g / np.sqrt(x * x - 1.0)


def arctanh(g, ans, x, out=None):
    return g / (1.0 - x * x)


def absolute(g, ans, x, out=None):
    # x / |x| (JAX: +1 at 0); for complex x the transpose of d|x| = Re(conj(x) dx) / |x|
    # is conj(x) / |x|
    at_zero = ans == 0
    unit = np.where(at_zero, 1.0, np.conj(x) / np.where(at_zero, 1.0, ans))
    return ra.cast_like(g * unit, x)


def fabs(g, ans, x, out=None):
    return np.where(x >= 0, g, -g)


def deg2rad(g, ans, x, out=None):
    return g * 0.017453292519943295


def rad2deg(g, ans, x, out=None):
    return g * 57.29577951308232


def conj(g, ans, x, out=None):
    return np.conj(g)   # the transpose of conjugation (JAX's convention)


def conj_method(g, ans, x):
    return np.conj(g)


def real(g, ans, val):
    return g


def imag(g, ans, val):
    # Im(v) = Re(-1j v): transposed, -1j g (a real val: 0)
    return ra.cast_like(g * -1j, val)


def sinc(g, ans, x):
    # (cos(pi x) - sinc(x)) / x, and 0 at x == 0
    safe = np.where(x == 0, 1.0, x)
    return g * np.where(x == 0, 0.0, (np.cos(3.141592653589793 * x) - ans) / safe)


def sign(g, ans, x, out=None):
    # real x: 0.  complex x: sign(x) = x / |x|, d sign = (dx - sign(x)^2 conj(dx)) / 2|x|,
    # transposed: (g - conj(g) conj(sign(x))^2) / 2|x| (exactly 0 for real x)
    r = np.abs(x)
    at_zero = r == 0
    turn = (g - np.conj(g) * np.conj(ans) ** 2) / (2.0 * np.where(at_zero, 1.0, r))
    return ra.cast_like(np.where(at_zero, 0.0, turn), x)


def floor(g, ans, x, out=None):
    return None


def ceil(g, ans, x, out=None):
    return None


def trunc(g, ans, x, out=None):
    return None


def rint(g, ans, x, out=None):
    return None


def fix(g, ans, x, out=None):
    return None


def round(g, ans, a, decimals=0, out=None):
    return None


def py_round(g, ans, number, ndigits=None):
    return None


def clip(g, ans, a, a_min=None, a_max=None, out=None, min=None, max=None):
    ga = ra.unbroadcast(ra.clip_part(g, a, a_min, a_max, min, max, 0), a)
    glo = ra.clip_part(g, a, a_min, a_max, min, max, 1)
    ghi = ra.clip_part(g, a, a_min, a_max, min, max, 2)
    return (ga, ra.unbroadcast(glo, a_min), ra.unbroadcast(ghi, a_max),
            ra.unbroadcast(glo, min), ra.unbroadcast(ghi, max))


def where(g, ans, condition, x=None, y=None):
    return (ra.unbroadcast(np.where(condition, g, 0.0), x),
            ra.unbroadcast(np.where(condition, 0.0, g), y))


# ------------------------------------------------------------------ reductions


def sum(g, ans, a, axis=None, dtype=None, out=None, keepdims=False):
    return ra.unreduce(g, a, axis, keepdims)


def mean(g, ans, a, axis=None, dtype=None, out=None, keepdims=False):
    return ra.unreduce(g, a, axis, keepdims) / ra.reduced_size(a, axis)


def prod(g, ans, a, axis=None, dtype=None, out=None, keepdims=False):
    # product of the other elements: exact with zeros, no division
    others = ra.unfold_axes(ra.prod_others_last(ra.fold_axes(a, axis)), a, axis)
    return ra.unreduce(g, a, axis, keepdims) * others


def max(g, ans, a, axis=None, out=None, keepdims=False):
    return ra.unreduce(g, a, axis, keepdims) * ra.extremum_weights(a, ans, axis, keepdims)


def min(g, ans, a, axis=None, out=None, keepdims=False):
    return ra.unreduce(g, a, axis, keepdims) * ra.extremum_weights(a, ans, axis, keepdims)


def nanmax(g, ans, a, axis=None, out=None, keepdims=False):
    return ra.unreduce(g, a, axis, keepdims) * ra.extremum_weights(a, ans, axis, keepdims)


def nanmin(g, ans, a, axis=None, out=None, keepdims=False):
    return ra.unreduce(g, a, axis, keepdims) * ra.extremum_weights(a, ans, axis, keepdims)


def nansum(g, ans, a, axis=None, dtype=None, out=None, keepdims=False):
    return np.where(np.isnan(a), 0.0, ra.unreduce(g, a, axis, keepdims))


def nanmean(g, ans, a, axis=None, dtype=None, out=None, keepdims=False):
    n = np.sum(np.logical_not(np.isnan(a)), axis=axis, keepdims=keepdims)
    return np.where(np.isnan(a), 0.0, ra.unreduce(g / n, a, axis, keepdims))


def var(g, ans, a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    d = np.conj(a - np.mean(a, axis=axis, keepdims=True))   # (complex a: |d|^2)
    return ra.unreduce(g, a, axis, keepdims) * d * (2.0 / (ra.reduced_size(a, axis) - ddof))


def std(g, ans, a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    d = np.conj(a - np.mean(a, axis=axis, keepdims=True))   # (complex a: |d|^2)
    return ra.unreduce(g / ans, a, axis, keepdims) * d / (ra.reduced_size(a, axis) - ddof)


def cumsum(g, ans, a, axis=None, dtype=None, out=None):
    ax = ra.cum_axis(axis)
    rev = np.flip(np.cumsum(np.flip(g, ax), ax), ax)
    return ra.unbroadcast(np.reshape(rev, np.shape(a)), a)


def cumprod(g, ans, a, axis=None, dtype=None, out=None):
    # row j of m is the input with element j replaced by 1; its running products
    # are the partial derivatives of the outputs at and after j (exact with zeros)
    ax = ra.cum_axis(axis)
    x = np.moveaxis(np.reshape(a, np.shape(ans)), ax, -1)
    e = ra.eye_last(x)
    c = np.cumprod(np.expand_dims(x, -2) * (1.0 - e) + e, axis=-1)
    gx = np.sum(c * np.triu(np.ones_like(e)) * np.expand_dims(np.moveaxis(g, ax, -1), -2),
                axis=-1)
    return ra.unbroadcast(np.reshape(np.moveaxis(gx, -1, ax), np.shape(a)), a)


def norm(g, ans, x, ord=None, axis=None, keepdims=False):
    return ra.norm_vjp(g, x, ord, axis, keepdims)


def trace(g, ans, a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    return ra.diagonal_vjp(np.expand_dims(g, -1), a, offset, axis1, axis2)


def diagonal(g, ans, a, offset=0, axis1=0, axis2=1):
    return ra.diagonal_vjp(g, a, offset, axis1, axis2)


def diag(g, ans, v, k=0):
    return ra.diag_vjp(g, v, k)


# ------------------------------------------------------------------ linear algebra


def dot(g, ans, a, b, out=None):
    return ra.dot_grad_a(g, a, b), ra.dot_grad_b(g, a, b)


def dot_grad_a(g, ans, t, a, b):
    # <g, dot_grad_a(t, a, b)> = <t, dot(g, b)>: bilinear in (t, b)
    return np.dot(g, b), ra.dot_grad_b(t, g, b)


def dot_grad_b(g, ans, t, a, b):
    # <g, dot_grad_b(t, a, b)> = <t, dot(a, g)>: bilinear in (t, a)
    return np.dot(a, g), ra.dot_grad_a(t, a, g)


def inner(g, ans, a, b):
    axes = ra.inner_axes(a, b)
    ga = np.transpose(np.tensordot(g, b, ra.tensordot_plan(a, b, axes, 0)),
                      ra.tensordot_plan(a, b, axes, 1))
    gb = np.transpose(np.tensordot(a, g, ra.tensordot_plan(a, b, axes, 2)),
                      ra.tensordot_plan(a, b, axes, 3))
    return ra.unbroadcast(ga, a), ra.unbroadcast(gb, b)


def tensordot(g, ans, a, b, axes=2):
    ga = np.transpose(np.tensordot(g, b, ra.tensordot_plan(a, b, axes, 0)),
                      ra.tensordot_plan(a, b, axes, 1))
    gb = np.transpose(np.tensordot(a, g, ra.tensordot_plan(a, b, axes, 2)),
                      ra.tensordot_plan(a, b, axes, 3))
    return ra.unbroadcast(ga, a), ra.unbroadcast(gb, b)


def vdot(g, ans, a, b):
    # vdot(a, b) = sum(conj(a) b): conjugate-linear in a
    return (ra.unbroadcast(np.reshape(np.conj(g * np.ravel(b)), np.shape(a)), a),
            ra.unbroadcast(np.reshape(g * np.conj(np.ravel(a)), np.shape(b)), b))


def outer(g, ans, a, b, out=None):
    return (ra.unbroadcast(np.reshape(np.dot(g, np.ravel(b)), np.shape(a)), a),
            ra.unbroadcast(np.reshape(np.dot(np.ravel(a), g), np.shape(b)), b))


def kron(g, ans, a, b):
    g4 = np.reshape(g, ra.kron_plan(a, b, 0))
    ga = np.tensordot(g4, np.reshape(b, ra.kron_plan(a, b, 1)), ra.kron_plan(a, b, 2))
    gb = np.tensordot(np.reshape(a, ra.kron_plan(a, b, 3)), g4, ra.kron_plan(a, b, 4))
    return (ra.unbroadcast(np.reshape(ga, np.shape(a)), a),
            ra.unbroadcast(np.reshape(gb, np.shape(b)), b))


def einsum(g, ans, *operands, out=None, optimize=False):
    # both calling forms ("ij,jk", a, b) and (a, [0, 1], b, [1, 2]): the subscripts
    # string or the sublists get None cotangents.  The cotangents are sums of einsums
    # (ra.einsum_multi), whose own rules are einsum_multi again: every order
    plan = ra.einsum_plan(operands)
    return ra.einsum_multi(ra.einsum_plans_t(plan, operands), ra.group2(g, operands))


def matrix_transpose(g, ans, x):
    return np.swapaxes(g, -1, -2)


def inv(g, ans, a):
    at = np.swapaxes(ans, -1, -2)
    return -np.matmul(at, np.matmul(g, at))


def det(g, ans, a):
    return np.expand_dims(g * ans, (-2, -1)) * np.swapaxes(np.linalg.inv(a), -1, -2)


def slogdet(g, ans, a):
    glog = ra.cot_or_zeros(ra.getitem(g, 1), ra.getitem(ans, 1))
    return ra.real_only(
        np.expand_dims(glog, (-2, -1)) * np.swapaxes(np.linalg.inv(a), -1, -2),
        a, "np.linalg.slogdet")


def solve(g, ans, a, b):
    # a 1-D b is one column
    gb = np.linalg.solve(np.swapaxes(a, -1, -2), np.reshape(g, ra.col_shape(ans, b)))
    ga = -np.matmul(gb, np.swapaxes(np.reshape(ans, ra.col_shape(ans, b)), -1, -2))
    gb_fit = ra.unbroadcast(gb, np.reshape(b, ra.col_shape(b, b)))
    return ra.unbroadcast(ga, a), np.reshape(gb_fit, np.shape(b))


def cholesky(g, ans, a, upper=False):
    # JAX's rule: sym(L^-T phi(L^T gL) L^-1), phi = lower triangle with half diagonal
    l = ra.chol_lower(ans, upper)
    lt = np.swapaxes(l, -1, -2)
    p = np.matmul(lt, np.tril(ra.chol_lower(g, upper)))
    p = np.tril(p) - 0.5 * p * ra.eye_last(p)
    s = np.swapaxes(np.linalg.solve(lt, np.swapaxes(np.linalg.solve(lt, p), -1, -2)), -1, -2)
    s = (s + np.swapaxes(s, -1, -2)) * 0.5
    # NumPy reads one triangle (the lower one; the upper with upper=True): it gets the
    # whole cotangent, the other none -- the derivative of what NumPy computes
    return ra.real_only(
        ra.uplo_t(np.tril(s) + np.tril(np.swapaxes(s, -1, -2), -1), upper),
        a, "np.linalg.cholesky")


def eigh(g, ans, a, UPLO="L"):
    # JAX's rule for the symmetric matrix NumPy decomposes, V (diag(gw) + F * (V^T gV))
    # V^T with F = 1/(w_j - w_i), then back to ``a``: NumPy reads one triangle only
    # (UPLO="L": the lower one, mirrored), so the strict lower part gets both halves
    # and the upper part none -- the derivative of what NumPy computes, on any input
    w = ra.getitem(ans, 0)
    v = ra.getitem(ans, 1)
    e = ra.eye_last(w)
    f = 1.0 / (e + np.expand_dims(w, -2) - np.expand_dims(w, -1)) - e
    vt = np.swapaxes(v, -1, -2)
    gw = ra.cot_or_zeros(ra.getitem(g, 0), w)
    gv = ra.cot_or_zeros(ra.getitem(g, 1), v)
    vtgv = np.matmul(vt, gv)
    # (F is infinite for repeated eigenvalues: 0 where V gets no cotangent, not nan)
    mid = np.expand_dims(gw, -2) * e + np.where(vtgv == 0, 0.0, f * vtgv)
    s = np.matmul(v, np.matmul(mid, vt))
    return ra.real_only(
        ra.uplo_t(np.tril(s) + np.tril(np.swapaxes(s, -1, -2), -1), UPLO),
        a, "np.linalg.eigh")


def eigvalsh(g, ans, a, UPLO="L"):
    # as eigh: the triangle NumPy reads gets the whole cotangent
    v = ra.getitem(np.linalg.eigh(a, UPLO), 1)
    s = np.matmul(v * np.expand_dims(g, -2), np.swapaxes(v, -1, -2))
    return ra.real_only(
        ra.uplo_t(np.tril(s) + np.tril(np.swapaxes(s, -1, -2), -1), UPLO),
        a, "np.linalg.eigvalsh")


# ------------------------------------------------------------------ shapes


def reshape(g, ans, a, shape, order="C"):
    return np.reshape(g, np.shape(a), order=order)


def ravel(g, ans, a, order="C"):
    return np.reshape(g, np.shape(a), order=order)


def flatten(g, ans, a, order="C"):
    return np.reshape(g, np.shape(a), order=order)


def transpose(g, ans, a, axes=None):
    return np.transpose(g, ra.inverse_perm(axes, np.ndim(a)))


def swapaxes(g, ans, a, axis1, axis2):
    return np.swapaxes(g, axis1, axis2)


def moveaxis(g, ans, a, source, destination):
    return np.moveaxis(g, destination, source)


def expand_dims(g, ans, a, axis):
    return np.reshape(g, np.shape(a))


def squeeze(g, ans, a, axis=None):
    return np.reshape(g, np.shape(a))


def broadcast_to(g, ans, array, shape, subok=False):
    return ra.unbroadcast(g, array)


def atleast_1d(g, ans, *arys):
    return ra.unpack_variadic(g, arys)


def atleast_2d(g, ans, *arys):
    return ra.unpack_variadic(g, arys)


def atleast_3d(g, ans, *arys):
    return ra.unpack_variadic(g, arys)


def scatter_add(g, ans, x, indices, v):
    # every addition at a position (repeated ones too) receives its cotangent
    return g, ra.unbroadcast(ra.getitem(g, indices), v)


def scatter_tangent(g, ans, t, indices, tv, like):
    return g, ra.unbroadcast(ra.getitem(g, indices), tv)


def meshgrid(g, ans, *xi, copy=True, sparse=False, indexing="xy"):
    return ra.meshgrid_cots(g, xi, sparse, indexing)


def meshgrid_cots(g, ans, t, xi, sparse=False, indexing="xy"):
    return ra.meshgrid_of(g, xi, sparse, indexing)


def meshgrid_of(g, ans, ts, xi, sparse=False, indexing="xy"):
    return ra.meshgrid_cots(g, xi, sparse, indexing)


def concatenate(g, ans, arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    return ra.concat_vjp(g, arrays, axis, "concatenate")


def stack(g, ans, arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    return ra.concat_vjp(g, arrays, axis, "stack")


def vstack(g, ans, tup, dtype=None, casting="same_kind"):
    return ra.concat_vjp(g, tup, 0, "vstack")


def hstack(g, ans, tup, dtype=None, casting="same_kind"):
    return ra.concat_vjp(g, tup, 0, "hstack")


def dstack(g, ans, tup):
    return ra.concat_vjp(g, tup, 0, "dstack")


def column_stack(g, ans, tup):
    return ra.concat_vjp(g, tup, 0, "column_stack")


def split(g, ans, ary, indices_or_sections, axis=0):
    return ra.concat_cots(g, ans, axis, "concatenate")


def array_split(g, ans, ary, indices_or_sections, axis=0):
    return ra.concat_cots(g, ans, axis, "concatenate")


def hsplit(g, ans, ary, indices_or_sections):
    return ra.concat_cots(g, ans, 0, "hstack")


def vsplit(g, ans, ary, indices_or_sections):
    return ra.concat_cots(g, ans, 0, "vstack")


def dsplit(g, ans, ary, indices_or_sections):
    return ra.concat_cots(g, ans, 0, "dstack")


def tile(g, ans, A, reps):
    return ra.tile_vjp(g, A, reps)


def repeat(g, ans, a, repeats, axis=None):
    return ra.repeat_vjp(g, a, repeats, axis)


def flip(g, ans, m, axis=None):
    return np.flip(g, axis)


def fliplr(g, ans, m):
    return np.fliplr(g)


def flipud(g, ans, m):
    return np.flipud(g)


def rot90(g, ans, m, k=1, axes=(0, 1)):
    return np.rot90(g, -k, axes)


def roll(g, ans, a, shift, axis=None):
    return np.roll(g, ra.neg_shift(shift), axis)


def pad(g, ans, array, pad_width, mode="constant", constant_values=0):
    return (ra.pad_vjp(g, array, pad_width, mode),
            ra.refuse_value("the derivative of np.pad in constant_values", constant_values))


def take(g, ans, a, indices, axis=None, out=None, mode="raise"):
    return ra.take_vjp(g, a, indices, axis, mode)


def take_along_axis(g, ans, arr, indices, axis=-1):
    return ra.take_along_axis_vjp(g, arr, indices, axis)


def tril(g, ans, m, k=0):
    return np.tril(g, k)


def triu(g, ans, m, k=0):
    return np.triu(g, k)


def sort(g, ans, a, axis=-1, kind=None, order=None, stable=None):
    return ra.take_along_axis_vjp(g, a, np.argsort(a, axis=axis, kind="stable"), axis)


def diff(g, ans, a, n=1, axis=-1, prepend=None, append=None):
    return (ra.diff_vjp(g, a, n, axis, prepend, append),
            ra.refuse_value("the derivative of np.diff in prepend", prepend),
            ra.refuse_value("the derivative of np.diff in append", append))


# ------------------------------------------------------------------ indexing


def index_concat(g, ans, which, *items):
    return ra.index_concat_vjp(g, which, items)


def getitem(g, ans, x, index):
    return ra.getitem_vjp(g, x, index)


def setitem(g, ans, x, index, v):
    return ra.setitem_zero(g, index), ra.unbroadcast(rt.cot_written(g, index), v)


def item(g, ans, a, *args):
    return ra.getitem_vjp(g, a, ra.item_index(a, args))


# ------------------------------------------------------------------ creation, conversion


def linspace(g, ans, start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    # sample k is start * (1 - w_k) + stop * w_k
    w = ra.linspace_weights(ans, num, endpoint, retstep, axis)
    return (ra.unbroadcast(np.sum(g * (1.0 - w), axis=axis), start),
            ra.unbroadcast(np.sum(g * w, axis=axis), stop))


def logspace(g, ans, start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    # ans = be ** lin, lin the linspace of the endpoints, be the base expanded at axis
    w = ra.linspace_weights(ans, num, endpoint, False, axis)
    gl = g * ans * np.expand_dims(np.log(base), axis)
    lin = np.linspace(start, stop, num, endpoint, False, None, axis)
    return (ra.unbroadcast(np.sum(gl * (1.0 - w), axis=axis), start),
            ra.unbroadcast(np.sum(gl * w, axis=axis), stop),
            ra.unbroadcast(np.sum(g * ans * lin, axis=axis) / base, base))


def full(g, ans, shape, fill_value, dtype=None, order="C"):
    return ra.unbroadcast(g, fill_value)


def full_like(g, ans, a, fill_value, dtype=None, order="K", subok=True, shape=None):
    return ra.unbroadcast(g, fill_value)


def array(g, ans, object, dtype=None, copy=True, order="K", subok=False, ndmin=0):
    return ra.asarray_vjp(g, object)


def asarray(g, ans, a, dtype=None, order=None, copy=None):
    return ra.asarray_vjp(g, a)


def copy(g, ans, a, order="K", subok=False):
    return ra.asarray_vjp(g, a)


def astype(g, ans, x, dtype, order="K", casting="unsafe", subok=True, copy=True):
    return ra.cast_like(g, x)


def py_float(g, ans, x):
    return ra.broadcast_like(g, x)


# ------------------------------------------------------------------ Python builtins


def py_sum(g, ans, iterable, start=0):
    return ra.py_sum_vjp(g, iterable), ra.unbroadcast(g, start)


def py_max(g, ans, *args, key=None):
    return ra.py_max_vjp(g, ans, args)


def py_min(g, ans, *args, key=None):
    return ra.py_max_vjp(g, ans, args)


# ------------------------------------------------------------------ runtime helpers
# (their rules make the code generated from the rules above differentiable again)


def unbroadcast(g, ans, t, x):
    return ra.broadcast_like(g, t)


def broadcast_like(g, ans, t, x):
    return ra.unbroadcast(g, t)


def unreduce(g, ans, t, x, axis=None, keepdims=False):
    return ra.unbroadcast(np.sum(g, axis=axis, keepdims=keepdims), t)


def clip_part(g, ans, t, a, a_min=None, a_max=None, min=None, max=None, which=0):
    return ra.clip_part(g, a, a_min, a_max, min, max, which)


def fold_axes(g, ans, x, axis=None):
    return ra.unfold_axes(g, x, axis)


def unfold_axes(g, ans, t, x, axis=None):
    return ra.unbroadcast(ra.fold_axes(g, axis), t)


def prod_others_last(g, ans, a):
    # d out_i / d a_j = prod of a over k != i, j (i != j): row i of m is a with a_i = 1
    e = ra.eye_last(a)
    m = np.expand_dims(a, -2) * (1.0 - e) + e
    return np.sum(ra.prod_others_last(m) * (1.0 - e) * np.expand_dims(g, -1), axis=-2)


def diagonal_vjp(g, ans, t, x, offset=0, axis1=0, axis2=1):
    return ra.unbroadcast(np.diagonal(g, offset, axis1, axis2), t)


def diag_vjp(g, ans, t, v, k=0):
    return ra.unbroadcast(np.diag(g, k), t)


def tile_vjp(g, ans, t, A, reps):
    return ra.unbroadcast(np.tile(g, reps), t)


def repeat_vjp(g, ans, t, a, repeats, axis=None):
    return ra.unbroadcast(np.repeat(g, repeats, axis), t)


def pad_vjp(g, ans, t, array, pad_width, mode="constant"):
    return ra.unbroadcast(ra.pad(g, pad_width, mode), t)


def take_vjp(g, ans, t, a, indices, axis=None, mode="raise"):
    return ra.unbroadcast(np.take(g, indices, axis=axis, mode=mode), t)


def take_along_axis_vjp(g, ans, t, arr, indices, axis=-1):
    return ra.unbroadcast(np.take_along_axis(g, indices, axis=axis), t)


def diff_vjp(g, ans, t, a, n=1, axis=-1, prepend=None, append=None):
    return ra.unbroadcast(ra.diff_vjp_adj(g, a, n, axis, prepend, append), t)


def diff_vjp_adj(g, ans, s, a, n=1, axis=-1, prepend=None, append=None):
    return ra.unbroadcast(ra.diff_vjp(g, a, n, axis, prepend, append), s)


def concat_vjp(g, ans, t, arrays, axis=0, how="concatenate"):
    return ra.unbroadcast(ra.concat_cots(g, arrays, axis, how), t)


def concat_cots(g, ans, ts, arrays, axis=0, how="concatenate"):
    return ra.concat_vjp(g, arrays, axis, how)


def unpack_variadic(g, ans, t, xs):
    return ra.pack_variadic(g, t)


def pack_variadic(g, ans, ts, t):
    return ra.unpack_variadic(g, ts)


def asarray_vjp(g, ans, t, a):
    return ra.pack_cots(g, t)


def pack_cots(g, ans, ts, x):
    return ra.asarray_vjp(g, ts)


def real_only(g, ans, value, x, what):
    return ra.real_only(g, x, what)


def cast_like(g, ans, t, x):
    return ra.cast_like(g, t)


def zero_if_integer(g, ans, t, x):
    return ra.zero_if_integer(g, x)


def none_if_integer(g, ans, t, x):
    return ra.none_if_integer(g, x)


def chol_lower(g, ans, x, upper=False):
    return ra.chol_lower(g, upper)


def getitem_vjp(g, ans, t, x, index):
    return ra.getitem(g, index)


def setitem_zero(g, ans, t, index):
    return ra.setitem_zero(g, index)


def cot_or_zeros(g, ans, t, like):
    return g


def py_sum_vjp(g, ans, t, iterable):
    return ra.sum_cots(g, t)


def sum_cots(g, ans, ts, x):
    return ra.py_sum_vjp(g, ts)


def py_max_vjp(g, ans, t, chosen, args):
    return ra.unbroadcast(ra.py_max_pick(g, chosen, args), t)


def py_max_pick(g, ans, ts, chosen, args):
    return ra.py_max_vjp(g, chosen, args)


def norm_vjp(g, ans, t, x, ord=None, axis=None, keepdims=False):
    return ra.norm_vjp_t(g, x, ord, axis, keepdims), ra.norm_vjp_x(g, t, x, ord, axis, keepdims)


def norm_vjp_t(g, ans, s, x, ord=None, axis=None, keepdims=False):
    return ra.norm_vjp(g, x, ord, axis, keepdims), ra.unsupported("third derivatives of norm")


def norm_vjp_x(g, ans, s, t, x, ord=None, axis=None, keepdims=False):
    return (ra.norm_vjp_x(g, t, x, ord, axis, keepdims),
            ra.unsupported("third derivatives of norm"),
            ra.unsupported("third derivatives of norm"))


def log_or_one(g, ans, base):
    # only differentiated when there is a base: d log(base) = 1 / base
    return ra.unbroadcast(g / ra.or_one(base), base)


def or_one(g, ans, base):
    return ra.unbroadcast(g, base)


def add_cot(g, ans, t, x, y, which=0):
    return ra.add_cot_vjp(g, t, x, y, which)


def add_cot_vjp(g, ans, s, t, x, y, which=0):
    # linear in s: the transpose takes back the part add_cot_vjp spread out
    return ra.add_cot(g, x, y, which)


# ------------------------------------------------------------------ forward-mode helpers
# (rules of the ra.* helpers that templates/jvp.py calls: reverse over forward)


def tangent_like(g, ans, t, like):
    return ra.tangent_like_vjp(g, t, like)


def tangent_like_vjp(g, ans, s, t, like):
    return ra.tangent_like(g, like)


def getitem_jvp(g, ans, t, x, index):
    return ra.getitem_vjp(g, x, index)


def setitem_jvp(g, ans, t, index, tv, x):
    return ra.setitem_zero(g, index), ra.unbroadcast(rt.cot_written(g, index), tv)


def sum_tangents(g, ans, ts):
    return ra.py_sum_vjp(g, ts)


def pad_jvp(g, ans, t, pad_width, mode="constant"):
    return ra.pad_vjp(g, t, pad_width, mode)


def norm_jvp(g, ans, t, x, ord=None, axis=None, keepdims=False):
    # bilinear in (t, gradient of the norm): the x part is a Hessian-vector product
    return ra.norm_vjp(g, x, ord, axis, keepdims), ra.norm_vjp_x(t, g, x, ord, axis, keepdims)


# ------------------------------------------------------------------ the NumPy surface helpers


def index_concat_vjp(g, ans, t, which, items):
    return ra.index_concat_jvp(g, which, items)


def index_concat_jvp(g, ans, ts, which, items):
    return ra.index_concat_vjp(g, which, items)


def uplo_t(g, ans, x, UPLO="L"):
    return ra.uplo_t(g, UPLO)


# ------------------------------------------------------------------ decompositions


def svd(g, ans, a, full_matrices=True, compute_uv=True, hermitian=False):
    # real A = U diag(s) Vh, U and Vh recomputed (JAX's jvp rule, transposed):
    #   gA = U (F o (U^T gU - gU^T U) s + diag(gs) + s F o (Vh gV - gV^T V)) Vh
    #        + (I - U U^T) gU s^-1 Vh + U s^-1 (gVh - gV^T V Vh),  F_ij = 1/(s_j^2 - s_i^2)
    # (1/s read as 0 where s == 0, as JAX).  full_matrices=True, non-square: the
    # columns Q of U after the first k (rows P of Vh) move by the smallest rotation
    # keeping [U Q] orthogonal, dQ = -U dU^T Q; their cotangent lands on U
    usv = np.linalg.svd(a, full_matrices, True, hermitian)
    s = ra.getitem(usv, 1)
    uf = ra.getitem(usv, 0)
    vhf = ra.getitem(usv, 2)
    u = ra.getitem(uf, ra.svd_index(s, 0))
    q = ra.getitem(uf, ra.svd_index(s, 1))
    vh = ra.getitem(vhf, ra.svd_index(s, 2))
    p = ra.getitem(vhf, ra.svd_index(s, 3))
    parts = ra.svd_parts(g, compute_uv)
    guf = ra.cot_or_zeros(ra.getitem(parts, 0), uf)
    gs = ra.cot_or_zeros(ra.getitem(parts, 1), s)
    gvhf = ra.cot_or_zeros(ra.getitem(parts, 2), vhf)
    gq = ra.getitem(guf, ra.svd_index(s, 1))
    gp = ra.getitem(gvhf, ra.svd_index(s, 3))
    gu = ra.getitem(guf, ra.svd_index(s, 0)) - np.matmul(q, np.matmul(np.swapaxes(gq, -1, -2), u))
    gvh = ra.getitem(gvhf, ra.svd_index(s, 2)) - np.matmul(vh, np.matmul(np.swapaxes(gp, -1, -2),
                                                                          p))
    gv = np.swapaxes(gvh, -1, -2)
    e = ra.eye_last(s)
    s2 = s * s
    f = 1.0 / (e + np.expand_dims(s2, -2) - np.expand_dims(s2, -1)) - e
    utgu = np.matmul(np.swapaxes(u, -1, -2), gu)
    vtgv = np.matmul(vh, gv)
    sinv = np.where(s == 0, 0.0, 1.0 / np.where(s == 0, 1.0, s))
    # (F is infinite for equal singular values: where U and V get no cotangent the
    # product is 0, not nan -- svd(x, compute_uv=False) of the identity, as JAX)
    ku = utgu - np.swapaxes(utgu, -1, -2)
    kv = vtgv - np.swapaxes(vtgv, -1, -2)
    mid = (np.where(ku == 0, 0.0, f * ku) * np.expand_dims(s, -2)
           + np.expand_dims(gs, -2) * e
           + np.expand_dims(s, -1) * np.where(kv == 0, 0.0, f * kv))
    ga_u = np.matmul((gu - np.matmul(u, utgu)) * np.expand_dims(sinv, -2), vh)
    ga_v = np.matmul(u, np.expand_dims(sinv, -1) * (gvh - np.matmul(np.swapaxes(vtgv, -1, -2),
                                                                    vh)))
    return ra.real_only(np.matmul(u, np.matmul(mid, vh)) + ga_u + ga_v, a, "np.linalg.svd")


def svdvals(g, ans, x):
    usv = np.linalg.svd(x, False)
    return ra.real_only(
        np.matmul(ra.getitem(usv, 0) * np.expand_dims(g, -2), ra.getitem(usv, 2)),
        x, "np.linalg.svdvals")


def qr(g, ans, a, mode="reduced"):
    # rows >= columns: gA = (gQ + Q copyltu(M)) R^-T, M = R gR^T - gQ^T Q, copyltu(M)
    # the lower triangle of M mirrored (ra.qr_parts refuses the other cases)
    qrr = np.linalg.qr(ra.qr_input(a, mode))
    q = ra.getitem(qrr, 0)
    r = ra.getitem(qrr, 1)
    parts = ra.qr_parts(g, a, mode)
    gq = ra.cot_or_zeros(ra.getitem(parts, 0), q)
    gr = ra.cot_or_zeros(ra.getitem(parts, 1), r)
    m = np.matmul(r, np.swapaxes(gr, -1, -2)) - np.matmul(np.swapaxes(gq, -1, -2), q)
    b = gq + np.matmul(q, np.tril(m) + np.swapaxes(np.tril(m, -1), -1, -2))
    return ra.real_only(
        np.swapaxes(np.linalg.solve(r, np.swapaxes(b, -1, -2)), -1, -2),
        a, "np.linalg.qr")


def eig(g, ans, a):
    # real eigenvalues: gA = V^-T (diag(gw) + F o (V^T gV')) V^T, F = 1/(w_j - w_i), gV'
    # without the components along each (unit) eigenvector
    wv = ra.eig_real(ans)
    w = ra.getitem(wv, 0)
    v = ra.getitem(wv, 1)
    # (NumPy 2.5's results are complex: their imaginary parts stay zero for a real
    # matrix's simple real eigenvalues, so only the cotangents' real parts count)
    gw = np.real(ra.cot_or_zeros(ra.getitem(g, 0), w))
    gv = np.real(ra.cot_or_zeros(ra.getitem(g, 1), v))
    gvn = gv - v * np.sum(v * gv, axis=-2, keepdims=True)
    e = ra.eye_last(w)
    f = 1.0 / (e + np.expand_dims(w, -2) - np.expand_dims(w, -1)) - e
    vt = np.swapaxes(v, -1, -2)
    mid = np.expand_dims(gw, -2) * e + f * np.matmul(vt, gvn)
    return np.linalg.solve(vt, np.matmul(mid, vt))


def eigvals(g, ans, a):
    vt = np.swapaxes(ra.getitem(ra.eig_real(np.linalg.eig(a), ans), 1), -1, -2)
    return np.linalg.solve(vt, np.expand_dims(np.real(g), -1) * vt)


def lstsq(g, ans, a, b, rcond=None):
    # x = P b with P = pinv(a): gP = gx b^T (then pinv's rule), gb = P^T gx; the
    # residuals sum((b - a x)^2, axis=0) give 2 r w to b and -2 r w x^T to a (where
    # they exist, a^T r = 0); the singular values u diag(gs) v^T to a
    x = ra.getitem(ans, 0)
    gx = np.reshape(ra.cot_or_zeros(ra.getitem(g, 0), x), ra.col_shape(x, b))
    w = ra.lstsq_weight(ra.getitem(g, 1), ra.getitem(ans, 1), b)
    gs = ra.cot_or_zeros(ra.getitem(g, 3), ra.getitem(ans, 3))
    p = np.linalg.pinv(a, rcond)
    bc = np.reshape(b, ra.col_shape(b, b))
    xc = np.reshape(x, ra.col_shape(x, b))
    gp = np.matmul(gx, np.swapaxes(bc, -1, -2))
    pt = np.swapaxes(p, -1, -2)
    gt = np.swapaxes(gp, -1, -2)
    t1 = -np.matmul(pt, np.matmul(gp, pt))
    t2 = np.matmul(np.matmul(pt, p), gt)
    t2 = t2 - np.matmul(np.matmul(t2, p), a)
    t3 = np.matmul(gt, np.matmul(p, pt))
    t3 = t3 - np.matmul(a, np.matmul(p, t3))
    rw = (bc - np.matmul(a, xc)) * w * 2.0
    usv = np.linalg.svd(a, full_matrices=False)
    gsv = np.matmul(ra.getitem(usv, 0) * gs, ra.getitem(usv, 2))
    ga = t1 + t2 + t3 - np.matmul(rw, np.swapaxes(xc, -1, -2)) + gsv
    gb = np.reshape(np.matmul(pt, gx) + rw, np.shape(b))
    return (ra.real_only(ra.real_only(ga, a, "np.linalg.lstsq"), b, "np.linalg.lstsq"),
            ra.real_only(ra.real_only(gb, a, "np.linalg.lstsq"), b, "np.linalg.lstsq"))


def lstsq_weight(g, ans, t, res, b):
    return ra.lstsq_weight_t(g, res, b)


def lstsq_weight_t(g, ans, w, res, b):
    return ra.lstsq_weight(g, res, b)


def pinv(g, ans, a, rcond=None, hermitian=False, rtol=None):
    # transpose of dP = -P dA P + (I - P A) dA^T P^T P + P P^T dA^T (I - A P) (constant rank)
    pt = np.swapaxes(ans, -1, -2)
    gt = np.swapaxes(g, -1, -2)
    t1 = -np.matmul(pt, np.matmul(g, pt))
    t2 = np.matmul(np.matmul(pt, ans), gt)
    t2 = t2 - np.matmul(np.matmul(t2, ans), a)
    t3 = np.matmul(gt, np.matmul(ans, pt))
    t3 = t3 - np.matmul(a, np.matmul(ans, t3))
    return ra.real_only(t1 + t2 + t3, a, "np.linalg.pinv")


def cross(g, ans, a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    # <g, a x b> = <b x g, a> = <g x a, b>, each laid along its operand's axis
    ga = np.cross(b, g, ra.cross_axes(a, b, axisa, axisb, axisc, axis, 0),
                  ra.cross_axes(a, b, axisa, axisb, axisc, axis, 1),
                  ra.cross_axes(a, b, axisa, axisb, axisc, axis, 2))
    gb = np.cross(g, a, ra.cross_axes(a, b, axisa, axisb, axisc, axis, 3),
                  ra.cross_axes(a, b, axisa, axisb, axisc, axis, 4),
                  ra.cross_axes(a, b, axisa, axisb, axisc, axis, 5))
    return ra.unbroadcast(ga, a), ra.unbroadcast(gb, b)


def svd_parts(g, ans, t, compute_uv=True):
    return ra.svd_pack(g, compute_uv)


def svd_pack(g, ans, ts, compute_uv=True):
    return ra.svd_parts(g, compute_uv)


def qr_parts(g, ans, t, a, mode="reduced"):
    return ra.qr_pack(g, a, mode)


def qr_pack(g, ans, ts, a, mode="reduced"):
    return ra.qr_parts(g, a, mode)


def eig_real(g, ans, wv, w=None):
    return g


def real_parts(g, ans, t):
    return g


# ------------------------------------------------------------------ more of the NumPy surface


def rollaxis(g, ans, a, axis, start=0):
    return np.transpose(g, ra.inverse_perm(ra.rollaxis_perm(a, axis, start), np.ndim(a)))


def partition(g, ans, a, kth, axis=-1, kind="introselect", order=None):
    return ra.take_along_axis_vjp(g, a, np.argpartition(a, kth, axis=axis), axis)


def np_append(g, ans, arr, values, axis=None):
    cots = ra.concat_vjp(g, (arr, values), axis, "concatenate")
    return ra.getitem(cots, 0), ra.getitem(cots, 1)


def fftshift(g, ans, x, axes=None):
    return np.fft.ifftshift(g, axes)


def ifftshift(g, ans, x, axes=None):
    return np.fft.fftshift(g, axes)


# np.fft (helpers: astjax/runtime_fft.py).  ``ax``: the transformed axes,
# non-negative; the transposes run on them at the transform's lengths and fit the
# result back to the operand's (what n/s cut or padded gets zeros).


def fft(g, ans, a, n=None, axis=-1, norm=None, out=None):
    # the DFT matrix is symmetric: its transpose is the same transform
    ax = ra.fft_axes(a, n, axis)
    return ra.cast_like(ra.fft_fit(np.fft.fftn(g, None, ax, norm), a, ax), a)


def ifft(g, ans, a, n=None, axis=-1, norm=None, out=None):
    # the DFT matrix is symmetric: its transpose is the same transform
    ax = ra.fft_axes(a, n, axis)
    return ra.cast_like(ra.fft_fit(np.fft.ifftn(g, None, ax, norm), a, ax), a)


def fft2(g, ans, a, s=None, axes=(-2, -1), norm=None, out=None):
    # the DFT matrix is symmetric: its transpose is the same transform
    ax = ra.fft_axes(a, s, axes)
    return ra.cast_like(ra.fft_fit(np.fft.fftn(g, None, ax, norm), a, ax), a)


def ifft2(g, ans, a, s=None, axes=(-2, -1), norm=None, out=None):
    # the DFT matrix is symmetric: its transpose is the same transform
    ax = ra.fft_axes(a, s, axes)
    return ra.cast_like(ra.fft_fit(np.fft.ifftn(g, None, ax, norm), a, ax), a)


def fftn(g, ans, a, s=None, axes=None, norm=None, out=None):
    # the DFT matrix is symmetric: its transpose is the same transform
    ax = ra.fft_axes(a, s, axes)
    return ra.cast_like(ra.fft_fit(np.fft.fftn(g, None, ax, norm), a, ax), a)


def ifftn(g, ans, a, s=None, axes=None, norm=None, out=None):
    # the DFT matrix is symmetric: its transpose is the same transform
    ax = ra.fft_axes(a, s, axes)
    return ra.cast_like(ra.fft_fit(np.fft.ifftn(g, None, ax, norm), a, ax), a)


def rfft(g, ans, a, n=None, axis=-1, norm=None, out=None):
    # a real operand: the real part of the full transform of the half spectrum
    # (zero-padded to the transform's length)
    ax = ra.fft_axes(a, n, axis)
    full = np.fft.fftn(g, ra.fft_lengths(a, n, ax), ax, norm)
    return ra.cast_like(np.real(ra.fft_fit(full, a, ax)), a)


def rfft2(g, ans, a, s=None, axes=(-2, -1), norm=None, out=None):
    # a real operand: the real part of the full transform of the half spectrum
    # (zero-padded to the transform's length)
    ax = ra.fft_axes(a, s, axes)
    full = np.fft.fftn(g, ra.fft_lengths(a, s, ax), ax, norm)
    return ra.cast_like(np.real(ra.fft_fit(full, a, ax)), a)


def rfftn(g, ans, a, s=None, axes=None, norm=None, out=None):
    # a real operand: the real part of the full transform of the half spectrum
    # (zero-padded to the transform's length)
    ax = ra.fft_axes(a, s, axes)
    full = np.fft.fftn(g, ra.fft_lengths(a, s, ax), ax, norm)
    return ra.cast_like(np.real(ra.fft_fit(full, a, ax)), a)


def irfft(g, ans, a, n=None, axis=-1, norm=None, out=None):
    # irfft reads a Hermitian half spectrum: the conjugated real transform of g with
    # the bins counted twice weighted 2, and irfft's normalization
    ax = ra.fft_axes(a, n, axis)
    h = np.conj(np.fft.rfftn(g, None, ax))
    h = ra.irfft_scale(h, ax, ra.fft_lengths(a, n, ax, True), norm)
    return ra.cast_like(ra.fft_fit(h, a, ax), a)


def irfft2(g, ans, a, s=None, axes=(-2, -1), norm=None, out=None):
    # irfft reads a Hermitian half spectrum: the conjugated real transform of g with
    # the bins counted twice weighted 2, and irfft's normalization
    ax = ra.fft_axes(a, s, axes)
    h = np.conj(np.fft.rfftn(g, None, ax))
    h = ra.irfft_scale(h, ax, ra.fft_lengths(a, s, ax, True), norm)
    return ra.cast_like(ra.fft_fit(h, a, ax), a)


def irfftn(g, ans, a, s=None, axes=None, norm=None, out=None):
    # irfft reads a Hermitian half spectrum: the conjugated real transform of g with
    # the bins counted twice weighted 2, and irfft's normalization
    ax = ra.fft_axes(a, s, axes)
    h = np.conj(np.fft.rfftn(g, None, ax))
    h = ra.irfft_scale(h, ax, ra.fft_lengths(a, s, ax, True), norm)
    return ra.cast_like(ra.fft_fit(h, a, ax), a)


def hfft(g, ans, a, n=None, axis=-1, norm=None, out=None):
    # hfft(a) is irfft(conj(a)) with the norm's direction swapped
    ax = ra.fft_axes(a, n, axis)
    h = ra.irfft_scale(np.fft.rfftn(g, None, ax), ax, ra.fft_lengths(a, n, ax, True),
                       ra.swap_norm(norm))
    return ra.cast_like(ra.fft_fit(h, a, ax), a)


def ihfft(g, ans, a, n=None, axis=-1, norm=None, out=None):
    # ihfft(a) is conj(rfft(a)) with the norm's direction swapped
    ax = ra.fft_axes(a, n, axis)
    full = np.fft.fftn(np.conj(g), ra.fft_lengths(a, n, ax), ax, ra.swap_norm(norm))
    return ra.cast_like(np.real(ra.fft_fit(full, a, ax)), a)


def fft_fit(g, ans, t, x, axes):
    return ra.cast_like(ra.fft_fit(g, t, axes), t)


def irfft_scale(g, ans, h, axes, lengths, norm=None):
    # a real diagonal scaling: its own transpose
    return ra.cast_like(ra.irfft_scale(g, axes, lengths, norm), h)


def angle(g, ans, z, deg=False):
    # d angle = Im(dz / z): transposed, -1j / z (real z: 0, the angle is 0 or pi;
    # at 0 (the jump) nan, as jnp.angle)
    at_zero = z == 0
    per_radian = g * np.where(deg, 57.29577951308232, 1.0)
    return ra.cast_like(np.where(at_zero, np.nan, per_radian * -1j / np.where(at_zero, 1.0, z)),
                        z)


def real_if_close(g, ans, a, tol=100):
    return g


def nan_to_num(g, ans, x, copy=True, nan=0.0, posinf=None, neginf=None):
    # finite entries pass through; the others are replaced by nan, posinf or neginf
    # (complex x: refused, before its comparisons)
    xr = ra.real_only(x, x, "np.nan_to_num")
    return (np.where(np.isfinite(xr), g, 0.0),
            ra.unbroadcast(np.where(np.isnan(xr), g, 0.0), nan),
            ra.unbroadcast(np.where(np.logical_and(np.isinf(xr), xr > 0), g, 0.0), posinf),
            ra.unbroadcast(np.where(np.logical_and(np.isinf(xr), xr < 0), g, 0.0), neginf))


def divmod(g, ans, x, y):
    # (x // y, x % y): the quotient is piecewise constant, the remainder x - q y
    q = ra.getitem(ans, 0)
    gr = ra.cot_or_zeros(ra.getitem(g, 1), ra.getitem(ans, 1))
    return ra.unbroadcast(gr, x), ra.unbroadcast(-gr * q, y)


def modf(g, ans, x):
    # (fractional part, integral part): slopes 1 and 0
    return ra.cot_or_zeros(ra.getitem(g, 0), ra.getitem(ans, 0))


def np_select(g, ans, condlist, choicelist, default=0):
    return (ra.select_cot(g, condlist, choicelist, default, 0),
            ra.select_cot(g, condlist, choicelist, default, 1))


def gradient(g, ans, f, *varargs, axis=None, edge_order=1):
    return (ra.gradient_vjp(g, f, varargs, axis, edge_order),
            ra.refuse_cotangent("the derivative of np.gradient in its spacing arguments",
                                varargs))


def select_tangent(g, ans, ts, td, condlist, choicelist, default):
    return (ra.select_cot(g, condlist, choicelist, default, 0),
            ra.select_cot(g, condlist, choicelist, default, 1))


def select_cot(g, ans, t, condlist, choicelist, default, which=0):
    return ra.select_cot_t(g, condlist, choicelist, default, which)


def select_cot_t(g, ans, h, condlist, choicelist, default, which=0):
    return ra.select_cot(g, condlist, choicelist, default, which)


def gradient_vjp(g, ans, t, f, varargs, axis=None, edge_order=1):
    return ra.gradient_list(g, f, varargs, axis, edge_order)


def gradient_list(g, ans, t, f, varargs, axis=None, edge_order=1):
    return ra.gradient_vjp(g, f, varargs, axis, edge_order)


def refuse_tangents(g, ans, t, ts):
    return g


def qr_input(g, ans, a, mode="reduced"):
    return g


def ptp(g, ans, a, axis=None, out=None, keepdims=False):
    hi = np.max(a, axis=axis, keepdims=keepdims)
    lo = np.min(a, axis=axis, keepdims=keepdims)
    w = ra.extremum_weights(a, hi, axis, keepdims) - ra.extremum_weights(a, lo, axis, keepdims)
    return ra.unreduce(g, a, axis, keepdims) * w


def median(g, ans, a, axis=None, out=None, overwrite_input=False, keepdims=False):
    # the middle element (or the two middle ones, half each) of each sorted slice
    return ra.unreduce(g, a, axis, keepdims) * ra.median_weights(a, axis, keepdims)


def copysign(g, ans, x, y, out=None):
    # |x| with y's sign; the slope of |x| at 0 is +1, as in JAX's abs
    return ra.unbroadcast(np.where(x >= 0, g, -g) * np.copysign(1.0, y), x), None


def heaviside(g, ans, x, y, out=None):
    return None, ra.unbroadcast(np.where(x == 0, g, 0.0), y)


def convolve(g, ans, a, v, mode="full"):
    # the full-length cotangent (zeros outside the mode's window) correlated with the
    # other operand
    gf = ra.conv_full_cot(g, a, v, mode)
    return (np.reshape(np.convolve(gf, np.flip(v), "valid"), np.shape(a)),
            np.reshape(np.convolve(gf, np.flip(a), "valid"), np.shape(v)))


def correlate(g, ans, a, v, mode="valid"):
    # correlate(a, v) is convolve(a, flip(v)) in every mode
    # (conjugating v: conjugate-linear in v)
    gf = ra.conv_full_cot(g, a, v, mode)
    return (np.reshape(np.convolve(gf, np.conj(v), "valid"), np.shape(a)),
            np.reshape(np.conj(np.flip(np.convolve(gf, np.flip(a), "valid"))), np.shape(v)))


def polyval(g, ans, p, x):
    # y = sum_i p_i x ** k_i, k the powers n-1 .. 0; the slope's constant term has no
    # x ** -1 (the base is 1 there, as in power's rule)
    k = ra.poly_powers(p)
    xe = np.expand_dims(x, -1)
    slope = np.sum(p * k * np.power(np.where(k == 0, 1.0, xe), k - 1), axis=-1)
    return (ra.unbroadcast(np.expand_dims(g, -1) * np.power(xe, k), p),
            ra.unbroadcast(g * slope, x))


def conv_full_cot(g, ans, t, a, v, mode="full"):
    return ra.conv_full_cut(g, a, v, mode)


def conv_full_cut(g, ans, t, a, v, mode="full"):
    return ra.conv_full_cot(g, a, v, mode)


def matrix_power(g, ans, a, n):
    # sum_k (a^T)^k g (a^T)^(n-1-k): the upper right block of [[a^T, g], [0, a^T]]^n
    p = np.linalg.matrix_power(ra.power_block(np.swapaxes(a, -1, -2), g, n), n)
    return ra.getitem(p, ra.power_block_index(a))


def power_block(g, ans, x, t, n):
    # the adjoint of placing x on both diagonal blocks and t in the upper right one
    return (ra.getitem(g, ra.power_block_index(x, 0)) + ra.getitem(g, ra.power_block_index(x, 1)),
            ra.getitem(g, ra.power_block_index(x, 2)))


def einsum_multi(g, ans, plan, groups):
    return ra.einsum_multi(ra.einsum_plans_t(plan, groups), ra.group2(g, groups))


def group2(g, ans, a, b):
    return ra.getitem(g, 0), ra.getitem(g, 1)


def nanvar(g, ans, a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    d = np.conj(np.where(np.isnan(a), 0.0, a - np.nanmean(a, axis=axis, keepdims=True)))
    n = np.sum(np.logical_not(np.isnan(a)), axis=axis, keepdims=True)
    return ra.cast_like(ra.unreduce(g, a, axis, keepdims) * d * 2.0 / (n - ddof), a)


def nanstd(g, ans, a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    d = np.conj(np.where(np.isnan(a), 0.0, a - np.nanmean(a, axis=axis, keepdims=True)))
    n = np.sum(np.logical_not(np.isnan(a)), axis=axis, keepdims=True)
    return ra.cast_like(ra.unreduce(g / ans, a, axis, keepdims) * d / (n - ddof), a)


def nanprod(g, ans, a, axis=None, dtype=None, out=None, keepdims=False):
    # NaNs count as ones (exact with zeros, no division, as prod)
    a1 = np.where(np.isnan(a), 1.0, a)
    others = ra.unfold_axes(ra.prod_others_last(ra.fold_axes(a1, axis)), a1, axis)
    return np.where(np.isnan(a), 0.0, ra.unreduce(g, a, axis, keepdims) * others)


def nancumsum(g, ans, a, axis=None, dtype=None, out=None):
    ax = ra.cum_axis(axis)
    rev = np.flip(np.cumsum(np.flip(g, ax), ax), ax)
    return np.where(np.isnan(a), 0.0, ra.unbroadcast(np.reshape(rev, np.shape(a)), a))


def quantile(g, ans, a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, weights=None):
    return (ra.quantile_vjp(g, a, q, axis, keepdims, method),
            ra.refuse_value("the derivative of np.quantile in q", q))


def percentile(g, ans, a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, weights=None):
    return (ra.quantile_vjp(g, a, np.asarray(q) / 100.0, axis, keepdims, method),
            ra.refuse_value("the derivative of np.percentile in q", q))


def quantile_vjp(g, ans, t, a, q, axis=None, keepdims=False, method="linear"):
    return ra.quantile_jvp(g, a, q, axis, keepdims, method)


def quantile_jvp(g, ans, t, a, q, axis=None, keepdims=False, method="linear"):
    return ra.quantile_vjp(g, a, q, axis, keepdims, method)


def average(g, ans, a, axis=None, weights=None, returned=False, keepdims=False):
    # sum(a w) / sum(w): the cotangent of a is g w / sum(w), of w g (a - average) / sum(w)
    w = ra.average_weights(weights, a, axis, returned)
    sw = np.sum(w, axis=axis, keepdims=True)
    avg = np.sum(a * w, axis=axis, keepdims=True) / sw
    gk = ra.unreduce(g, a, axis, keepdims) / sw
    return gk * w, ra.average_weights_t(gk * (a - avg), weights, a, axis)


def average_weights(g, ans, weights, a, axis=None, returned=False):
    return ra.average_weights_t(g, weights, a, axis)


def average_weights_lin(g, ans, t, weights, a, axis=None):
    return ra.average_weights_t(g, weights, a, axis)


def average_weights_t(g, ans, t, weights, a, axis=None):
    return ra.average_weights_lin(g, weights, a, axis)


def linalg_trace(g, ans, x, offset=0, dtype=None):
    return ra.diagonal_vjp(np.expand_dims(g, -1), x, offset, -2, -1)


def linalg_diagonal(g, ans, x, offset=0):
    return ra.diagonal_vjp(g, x, offset, -2, -1)


def linalg_cross(g, ans, x1, x2, axis=-1):
    return (ra.unbroadcast(np.cross(x2, g, axis, axis, axis), x1),
            ra.unbroadcast(np.cross(g, x1, axis, axis, axis), x2))


def matrix_norm(g, ans, x, keepdims=False, ord="fro"):
    return ra.norm_vjp(g, x, ord, (-2, -1), keepdims)


def cumulative_sum(g, ans, x, axis=None, dtype=None, out=None, include_initial=False):
    # a reversed running sum of g (without its first entry when the initial 0 is there)
    ax = ra.cum_axis(axis)
    rev = np.flip(np.cumsum(np.flip(g, ax), ax), ax)
    return ra.cast_like(ra.getitem(rev, ra.cumulative_index(x, axis, include_initial)), x)


def multi_dot(g, ans, arrays, out=None):
    # one einsum chain: its cotangents are einsum_multi's (any order)
    plan = ra.multi_dot_plan(arrays)
    return ra.einsum_multi(ra.einsum_plans_t(plan, arrays), ra.group2(g, arrays))


def ediff1d(g, ans, ary, to_end=None, to_begin=None):
    # [to_begin, differences of the flattened ary, to_end]
    gd = ra.getitem(g, ra.ediff1d_index(ary, to_end, to_begin, 1))
    ga = np.reshape(ra.diff_vjp(gd, np.ravel(ary)), np.shape(ary))
    return (ga, ra.asarray_vjp(ra.getitem(g, ra.ediff1d_index(ary, to_end, to_begin, 2)), to_end),
            ra.asarray_vjp(ra.getitem(g, ra.ediff1d_index(ary, to_end, to_begin, 0)), to_begin))


def tangent_where(g, ans, t, x):
    return ra.tangent_where(g, x)


def ediff1d_lin(g, ans, t, t_end, t_begin, ary, to_end=None, to_begin=None):
    gd = ra.getitem(g, ra.ediff1d_index(ary, to_end, to_begin, 1))
    ga = np.reshape(ra.diff_vjp(gd, np.ravel(ary)), np.shape(ary))
    return (ga, ra.asarray_vjp(ra.getitem(g, ra.ediff1d_index(ary, to_end, to_begin, 2)), to_end),
            ra.asarray_vjp(ra.getitem(g, ra.ediff1d_index(ary, to_end, to_begin, 0)), to_begin))


def cov(g, ans, m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None,
        dtype=None):
    # C = Xc Xc^T s, Xc the centred rows: gX = (g + g^T) Xc s (rows of Xc sum to 0, so
    # the centring needs no term of its own)
    x = ra.cov_rows(m, rowvar)
    xc = x - np.mean(x, axis=1, keepdims=True)
    s = ra.cov_scale(x, y, bias, ddof, fweights, aweights)
    g2 = np.reshape(g, ra.reduced_shape_of(xc))
    return ra.real_only(
        ra.cov_rows_t(np.matmul(g2 + np.swapaxes(g2, -1, -2), xc) * s, m, rowvar),
        m, "np.cov")


def corrcoef(g, ans, x, y=None, rowvar=True, dtype=None):
    # R = C / (d d^T), d = sqrt(diag C): gC = g / (d d^T) - diag((rowsum + colsum of
    # g * R) / (2 d^2)), then np.cov's rule (ra.cov_scale refuses y)
    xr = ra.cov_rows(x, rowvar)
    xc = xr - np.mean(xr, axis=1, keepdims=True)
    s = ra.cov_scale(xr, y)
    c = np.matmul(xc, np.swapaxes(xc, -1, -2)) * s
    d = np.sqrt(np.diagonal(c))
    dd = np.outer(d, d)
    g2 = np.reshape(g, ra.reduced_shape_of(xc))
    gr = g2 * (c / dd)
    gc = g2 / dd - np.diag((np.sum(gr, axis=1) + np.sum(gr, axis=0)) / (2.0 * d * d))
    return ra.real_only(
        ra.cov_rows_t(np.matmul(gc + np.swapaxes(gc, -1, -2), xc) * s, x, rowvar),
        x, "np.corrcoef")


def cov_rows(g, ans, m, rowvar=True):
    return ra.cov_rows_t(g, m, rowvar)


def cov_rows_t(g, ans, t, m, rowvar=True):
    return ra.cov_rows(g, rowvar)


def interp(g, ans, x, xp, fp, left=None, right=None, period=None):
    # sum_k B_k(x) fp_k, B the hat functions (+ left/right outside [xp[0], xp[-1]])
    b = ra.interp_basis(x, xp, left, right, period)
    slope = np.sum(ra.interp_slopes(x, xp, left, right, period) * fp, axis=-1)
    return (ra.unbroadcast(g * slope, x),
            ra.refuse_value("the derivative of np.interp in xp", xp),
            ra.asarray_vjp(ra.unbroadcast(np.expand_dims(g, -1) * b, fp), fp),
            ra.unbroadcast(g * ra.interp_outside(x, xp, 0), left),
            ra.unbroadcast(g * ra.interp_outside(x, xp, 1), right))


def interp_basis(g, ans, x, xp, left=None, right=None, period=None):
    return ra.unbroadcast(np.sum(g * ra.interp_slopes(x, xp, left, right, period), axis=-1), x)


# ------------------------------------------------------------------ astjax.random
# No cotangent reaches a key; a sample's parameters get theirs by reparameterization.
from astjax import random as jr  # noqa: E402


def random_uniform(g, ans, key, shape=(), dtype=None, minval=0.0, maxval=1.0):
    # ans = minval + u * (maxval - minval) with u the same unit draw
    u = jr.uniform(key, shape, dtype)
    return ra.unbroadcast(g - g * u, minval), ra.unbroadcast(g * u, maxval)


def random_uniform_batched(g, ans, key_b, shape=(), dtype=None, minval=0.0, maxval=1.0):
    u = jr.uniform_batched(key_b, shape, dtype)
    return ra.unbroadcast(g - g * u, minval), ra.unbroadcast(g * u, maxval)


def random_permutation(g, ans, key, x, axis=0, independent=False):
    return jr.permutation_vjp(g, key, x, axis, independent)


def random_permutation_batched(g, ans, key_b, x, axis=0, independent=False):
    return jr.permutation_vjp_batched(g, key_b, x, axis, independent)


def random_permutation_vjp(g, ans, t, key, x, axis=0, independent=False):
    return jr.permutation(key, g, axis, independent)


def random_permutation_vjp_batched(g, ans, t, key_b, x, axis=0, independent=False):
    return jr.permutation_batched(key_b, g, axis, independent)


def random_truncated_normal(g, ans, key, lower, upper, shape=None, dtype=None):
    # ans = sqrt2 erfinv(erf(lower/sqrt2) + u (erf(upper/sqrt2) - erf(lower/sqrt2)))
    u = jr.unit_like(key, ans)
    g_lower = g * (1.0 - u) * np.exp((ans * ans - lower * lower) * 0.5)
    g_upper = g * u * np.exp((ans * ans - upper * upper) * 0.5)
    return ra.unbroadcast(g_lower, lower), ra.unbroadcast(g_upper, upper)


def random_truncated_normal_batched(g, ans, key_b, lower, upper, shape=None, dtype=None):
    u = jr.unit_like_batched(key_b, ans)
    g_lower = g * (1.0 - u) * np.exp((ans * ans - lower * lower) * 0.5)
    g_upper = g * u * np.exp((ans * ans - upper * upper) * 0.5)
    return ra.unbroadcast(g_lower, lower), ra.unbroadcast(g_upper, upper)

def random_multivariate_normal(g, ans, key, mean, cov, shape=None, dtype=None,
                               method="cholesky"):
    g_mean, g_cov = jr.multivariate_normal_vjp(g, key, mean, cov, shape, dtype, method)
    return g_mean, g_cov


def random_multivariate_normal_batched(g, ans, key_b, mean, cov, shape=None, dtype=None,
                                       method="cholesky"):
    g_mean, g_cov = jr.multivariate_normal_vjp_batched(g, key_b, mean, cov, shape, dtype,
                                                       method)
    return g_mean, g_cov


def random_gamma(g, ans, key, a, shape=None, dtype=None):
    # implicit reparameterization: the sample moves with a at a fixed quantile
    return ra.unbroadcast(g * jr.gamma_grad(a, ans), a)


def random_gamma_batched(g, ans, key_b, a, shape=None, dtype=None):
    return ra.unbroadcast(g * jr.gamma_grad(a, ans), a)

# ------------------------------------------------------------------ collectives
# Transposes on per-device values (JAX's check_vma=False): psum <-> psum, all_gather <->
# psum_scatter, ppermute <-> the inverse permutation, all_to_all <-> all_to_all with
# the split and concat axes swapped.  A shard_map call's rule is a shard_map of the
# per-shard pullback (astjax/sharding/shard_map.py).
from astjax.sharding import collectives as sh  # noqa: E402


def psum(g, ans, x, axis_name):
    return sh.psum_t(g, axis_name)


def pmean(g, ans, x, axis_name):
    return sh.pmean_t(g, axis_name)


def pmax(g, ans, x, axis_name):
    return sh.pextreme_t(g, x, ans, axis_name)


def pmin(g, ans, x, axis_name):
    return sh.pextreme_t(g, x, ans, axis_name)


def pvary(g, ans, x, axis_name):
    return sh.pvary(g, ())


def pcast(g, ans, x, axis_name, to):
    return sh.pvary(g, ())


def all_gather(g, ans, x, axis_name, axis=0, tiled=False, axis_index_groups=None):
    return sh.all_gather_t(g, axis_name, axis, tiled)


def psum_scatter(g, ans, x, axis_name, scatter_dimension=0, tiled=False,
                 axis_index_groups=None):
    return sh.all_gather(g, axis_name, axis=scatter_dimension, tiled=tiled)


def ppermute(g, ans, x, axis_name, perm):
    return sh.ppermute(g, axis_name, sh.ppermute_inverse(perm))


def all_to_all(g, ans, x, axis_name, split_axis, concat_axis, tiled=False,
               axis_index_groups=None):
    return sh.all_to_all(g, axis_name, concat_axis, split_axis, tiled=tiled)


def psum_t(g, ans, t, axis_name):
    return sh.psum_t(g, axis_name)


def pmean_t(g, ans, t, axis_name):
    return sh.pmean_t(g, axis_name)


def all_gather_t(g, ans, t, axis_name, axis=0, tiled=False):
    return sh.all_gather(g, axis_name, axis=axis, tiled=tiled)


def pextreme_t(g, ans, t, x, top, axis_name):
    return sh.pextreme_jvp(g, x, top, axis_name)


def pextreme_jvp(g, ans, t, x, top, axis_name):
    return sh.pextreme_t(g, x, top, axis_name)


def shard_map_call(g, ans, plan, args):
    return sh.shard_map_call(sh.vjp_plan(plan), (args, g))
