"""Vector-Jacobian product templates, one per differentiable primitive.

Convention: ``def <primitive>(g, ans, <params...>)`` where ``g`` is the cotangent of
the result, ``ans`` the primal result and the remaining parameters are the
primitive's own (see ``Primitive.params``).  The function returns one cotangent per
entry of ``Primitive.diff``, in order (a bare expression when there is one); ``None``
means zero.  Bodies are plain NumPy so a template can be called directly in tests;
the reverse-mode transformation parses the body and inlines it with names
substituted, so keep each body to a few straight-line statements ending in a
``return``.
"""
import numpy as np

from astjax import runtime_array as ra


def add(g, ans, x, y):
    return ra.unbroadcast(g, x), ra.unbroadcast(g, y)


def tanh(g, ans, x):
    return g * (1 - ans * ans)


def sum(g, ans, x, axis=None, dtype=None, keepdims=False):
    return ra.unreduce(g, x, axis, keepdims)


def dot(g, ans, x, y):
    return ra.dot_vjp_x(g, x, y), ra.dot_vjp_y(g, x, y)
