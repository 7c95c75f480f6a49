"""One small function per NumPy primitive the issue lists (array inputs, scalar output).

Outputs are squared before summing so that every rule sees a non-uniform cotangent.
"""
import numpy as np

# ----------------------------------------------------------------- elementwise


def exp(x):
    y = np.exp(x)
    return np.sum(y * y)


def log(x):
    y = np.log(x)
    return np.sum(y * y)


def log1p(x):
    y = np.log1p(x)
    return np.sum(y * y)


def expm1(x):
    y = np.expm1(x)
    return np.sum(y * y)


def sqrt(x):
    y = np.sqrt(x)
    return np.sum(y * y * y)


def sin(x):
    y = np.sin(x)
    return np.sum(y * y)


def cos(x):
    y = np.cos(x)
    return np.sum(y * x)


def tan(x):
    y = np.tan(x)
    return np.sum(y * y)


def arcsin(x):
    y = np.arcsin(x)
    return np.sum(y * y)


def tanh(x):
    y = np.tanh(x)
    return np.sum(y * x)


def sinh(x):
    y = np.sinh(x)
    return np.sum(y * y)


def cosh(x):
    y = np.cosh(x)
    return np.sum(y * x)


def abs_(x):
    y = np.abs(x)
    return np.sum(y * y * y)


def sign(x):
    return np.sum(np.sign(x) * x * x)


def maximum(x, y):
    z = np.maximum(x, y)
    return np.sum(z * z)


def minimum(x, y):
    z = np.minimum(x, y)
    return np.sum(z * z)


def clip(x):
    z = np.clip(x, -0.5, 0.7)
    return np.sum(z * z * x)


def clip_arrays(x, lo, hi):
    z = np.clip(x, lo, hi)
    return np.sum(z * z)


def where(x, y):
    z = np.where(x > 0, x * y, np.sin(y))
    return np.sum(z * z)


def power(x, y):
    z = np.power(x, y)
    return np.sum(z * z)


def power_int(x):
    return np.sum(np.power(x, 3))


def pow_operator(x, y):
    return np.sum(x ** y + x ** 2)


def arctan2(y, x):
    z = np.arctan2(y, x)
    return np.sum(z * z)


def square(x):
    return np.sum(np.square(x) * x)


def reciprocal(x):
    y = np.reciprocal(x)
    return np.sum(y * y)


def divide(x, y):
    return np.sum(np.divide(x, y) * x)


def negative_subtract(x, y):
    return np.sum(np.negative(x) * np.subtract(x, y) * np.multiply(x, y) + np.add(x, y))


# -------------------------------------------------------------------- reductions


def sum_axis0(x):
    y = np.sum(x, axis=0)
    return np.sum(y * y)


def sum_axis_neg_keepdims(x):
    y = np.sum(x, axis=-1, keepdims=True)
    return np.sum(y * y * x)


def sum_axis_tuple(x):
    y = np.sum(x, axis=(0, 2))
    return np.sum(y * y)


def mean(x):
    y = np.mean(x, axis=1)
    return np.sum(y * y) + np.mean(x) * np.mean(x * x)


def mean_keepdims(x):
    return np.sum((x - np.mean(x, axis=0, keepdims=True)) ** 2)


def prod(x):
    return np.prod(x) + np.sum(np.prod(x, axis=0) * 2.0)


def max_(x):
    y = np.max(x, axis=1)
    return np.sum(y * y) + np.max(x)


def min_(x):
    y = np.min(x, axis=0, keepdims=True)
    return np.sum(y * x) + np.min(x)


def var(x):
    return np.var(x) + np.sum(np.var(x, axis=0) * 3.0)


def std(x):
    return np.std(x) + np.sum(np.std(x, axis=1, keepdims=True) * x)


def cumsum(x):
    y = np.cumsum(x, axis=1)
    z = np.cumsum(x)
    return np.sum(y * y) + np.sum(z * z)


def logsumexp(x):
    m = np.max(x, axis=1, keepdims=True)
    lse = m + np.log(np.sum(np.exp(x - m), axis=1, keepdims=True))
    return np.sum(lse * lse)


# ---------------------------------------------------------------- linear algebra


def dot_mm(A, B):
    y = np.dot(A, B)
    return np.sum(y * y)


def dot_mv(A, v):
    y = np.dot(A, v)
    return np.sum(y * y)


def dot_vv(u, v):
    return np.dot(u, v) * np.dot(u, u)


def matmul(A, B):
    y = A @ B
    return np.sum(y * y) + np.sum(np.matmul(A, B))


def matmul_batched(A, B):
    y = A @ B
    return np.sum(y * y)


def matmul_vec(A, v):
    y = A @ v
    return np.sum(y * y)


def einsum_mm(A, B):
    y = np.einsum("ij,jk->ik", A, B)
    return np.sum(y * y)


def einsum_trace(A):
    return np.einsum("ii->", A) * np.einsum("ij,ij->", A, A)


def einsum_batched(A, B):
    y = np.einsum("bij,bjk->bik", A, B)
    return np.sum(y * y)


def outer(u, v):
    y = np.outer(u, v)
    return np.sum(y * y)


def norm(x):
    return np.linalg.norm(x) + np.sum(np.linalg.norm(x, axis=1) * 2.0)


def norm_vector(v):
    return np.linalg.norm(v) * np.linalg.norm(v * 2.0)


# ------------------------------------------------------------- shapes and indexing


def reshape(x):
    y = np.reshape(x, (4, 3))
    return np.sum(y * y * np.arange(3.0))


def transpose(x):
    y = np.transpose(x)
    return np.sum(y * y * np.arange(3.0))


def transpose_axes(x):
    y = np.transpose(x, (1, 2, 0))
    return np.sum(y * y * np.arange(2.0))


def dot_T(x):
    y = x.T
    return np.sum(y * y * np.arange(3.0))


def swapaxes(x):
    y = np.swapaxes(x, 0, 2)
    return np.sum(y * y * np.arange(2.0))


def expand_dims(x):
    y = np.expand_dims(x, 1)
    return np.sum(y * y * np.ones((3, 2, 4)) * np.arange(2.0)[:, None])


def squeeze(x):
    y = np.squeeze(x)
    return np.sum(y * y * np.arange(4.0))


def concatenate(x, y):
    z = np.concatenate([x, y], axis=0)
    w = np.concatenate((x, x * 2.0), axis=1)
    return np.sum(z * z * np.arange(4.0)) + np.sum(w * w)


def stack(x, y):
    z = np.stack([x, y])
    w = np.stack([x, y * y], axis=1)
    return np.sum(z * z * np.arange(4.0)) + np.sum(w * w * np.arange(4.0))


def split(x):
    a, b, c = np.split(x, 3, axis=1)
    return np.sum(a * b) + np.sum(c * c * c)


def pad(x):
    y = np.pad(x, ((1, 0), (2, 1)))
    return np.sum(y * y * np.arange(7.0))


def take(x):
    y = np.take(x, np.array([0, 2, 2]), axis=1)
    z = np.take(x, np.array([1, 5]))
    return np.sum(y * y) + np.sum(z * 3.0)


def basic_indexing(x):
    a = x[1:, ::2]
    b = x[0]
    c = x[:, None, 1]
    d = x[..., -1]
    e = x[-1, 2]
    return np.sum(a * a) + np.sum(b * b * b) + np.sum(c * 2.0) + np.sum(d * d) + e * e


def int_array_indexing(x):
    rows = x[np.array([0, 2, 2])]
    picks = x[np.array([0, 1]), np.array([3, 3])]
    return np.sum(rows * rows) + np.sum(picks * picks)


def list_indexing(x):
    rows = x[[1, 1, 0]]
    return np.sum(rows * rows)


def bool_mask_indexing(x):
    pos = x[x > 0]
    return np.sum(pos * pos) + np.sum(x[np.array([True, False, True])] * 2.0)


# ------------------------------------------------------------------------ creation


def creation(x):
    a = np.zeros_like(x) + x
    b = np.ones_like(x) * x
    c = np.zeros(x.shape) + x * x
    d = np.ones((3, 4)) * np.arange(4) * x
    e = np.eye(3) @ x
    f = np.full_like(x, 2.0) * x
    return np.sum(a * b) + np.sum(c) + np.sum(d * e) + np.sum(f * x)


def astype(x):
    y = x.astype(np.float64)
    z = np.asarray(x) * 2.0
    w = np.array(x) + 1.0
    return np.sum(y * y) + np.sum(z * w)


# ------------------------------------------------------------------------ methods


def methods(x, y):
    a = x.sum(axis=0)
    b = x.dot(y)
    c = x.reshape(4, 3)
    d = x.reshape((2, 6))
    e = x.T
    f = x.transpose()
    return (np.sum(a * a) + np.sum(b * b) + np.sum(c * c * np.arange(3.0)) + np.sum(d * d)
            + np.sum(e * np.arange(3.0)) + np.sum(f * f))


def methods_reductions(x):
    return (x.mean() + x.max(axis=1).sum() + x.min() + x.prod() + x.std() + x.var(axis=0).sum()
            + np.sum(x.cumsum(axis=0) ** 2))


def methods_shapes(x):
    a = x.flatten()
    b = x.ravel()
    c = x[None].squeeze(0)
    d = x.clip(-0.5, 0.5)
    e = x.copy()
    f = x.swapaxes(0, 1)
    return (np.sum(a * b * np.arange(12.0)) + np.sum(c * c) + np.sum(d * x) + np.sum(e * e * e)
            + np.sum(f * f * np.arange(3.0)))
