"""JAX's dtype rules for derivatives that meet complex numbers, and ``holomorphic=True``.

Derivatives of complex values follow JAX's convention (a cotangent is the transpose of
the tangent map under ``Re(sum(a * b))``; tests/test_complex_rules.py).  In it, some
questions have no one answer: the Jacobian of a function of complex inputs by forward
mode, or of complex outputs by reverse mode, depends on whether the function is
holomorphic.  JAX refuses to guess, and so does astjax:

* ``grad`` needs a real output; complex inputs get ``dL/da - i dL/db``;
* ``jacfwd`` needs real inputs, ``jacrev`` real outputs;
* ``holomorphic=True`` (grad, value_and_grad, jacfwd, jacrev, hessian) asks for the
  complex derivative ``f'(z)``: the inputs must be complex (and the outputs, for grad
  and jacrev).
"""
from __future__ import annotations

import numpy as np

from astjax.binding import fun_name, normalize_argnums
from astjax.errors import ArgumentError
from astjax.tree_util import tree_leaves


def _dtype(x):
    return getattr(x, "dtype", None) or np.result_type(x)


def _is_complex(x) -> bool:
    return np.issubdtype(_dtype(x), np.complexfloating)


def check_inputs(what, fun, leaves, holomorphic, needs_real=True):
    """The differentiated inputs ``leaves`` suit ``what`` (JAX's messages)."""
    for x in leaves:
        if holomorphic and not _is_complex(x):
            raise ArgumentError(
                f"{what} of {fun_name(fun)} with holomorphic=True requires inputs with "
                f"complex dtype, but got {np.dtype(_dtype(x)).name}")
        if not holomorphic and needs_real and _is_complex(x):
            raise ArgumentError(
                f"{what} of {fun_name(fun)} requires real-valued inputs (input dtype that "
                f"is a sub-dtype of np.floating), but got {np.dtype(_dtype(x)).name}; for "
                "holomorphic differentiation, pass holomorphic=True")


def check_outputs(what, fun, out, holomorphic):
    """The outputs of ``fun`` suit ``what`` (JAX's messages)."""
    for y in tree_leaves(out):
        if holomorphic and not _is_complex(y):
            raise ArgumentError(
                f"{what} of {fun_name(fun)} with holomorphic=True requires outputs with "
                f"complex dtype, but got {np.dtype(_dtype(y)).name}")
        if not holomorphic and _is_complex(y):
            raise ArgumentError(
                f"{what} of {fun_name(fun)} requires real-valued outputs (output dtype "
                f"that is a sub-dtype of np.floating), but got {np.dtype(_dtype(y)).name}; "
                "for holomorphic differentiation, pass holomorphic=True; for a "
                "non-holomorphic function with complex outputs, use vjp directly")


def gradient(fun, argnums, has_aux, with_value, vjp):
    """``grad``/``value_and_grad`` with ``holomorphic=True``: ``f'(z)``, the pullback
    (by ``vjp``) of a cotangent 1 (the transpose of multiplication by ``f'(z)``)."""
    what = "value_and_grad" if with_value else "grad"

    def holomorphic_gradient(*args):
        single, nums = normalize_argnums(argnums, len(args), fun_name(fun))
        check_inputs(what, fun, [leaf for i in nums for leaf in tree_leaves(args[i])], True)
        if has_aux:
            out, pull, aux = vjp(fun, *args, has_aux=True)
        else:
            out, pull = vjp(fun, *args)
        if np.ndim(out) != 0:
            raise ArgumentError(f"{what} of {fun_name(fun)} requires a scalar output, "
                                f"got shape {np.shape(out)}")
        check_outputs(what, fun, out, True)
        cots = pull(np.ones_like(out))
        g = cots[nums[0]] if single else tuple(cots[i] for i in nums)
        value = (out, aux) if has_aux else out
        if with_value:
            return value, g
        return (g, aux) if has_aux else g
    return holomorphic_gradient
