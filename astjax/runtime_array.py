"""Array helpers that rule templates call (unbroadcast, undoing reductions...).

Generated code imports this module as ``ra``.  Each helper is itself a primitive in
the registry, so code that calls it can be transformed again (higher derivatives).
"""
from __future__ import annotations

import numpy as np


def unbroadcast(g, x):
    """Sum a cotangent ``g`` down to the shape of ``x`` (undoing NumPy broadcasting)."""
    if g is None:
        return None
    shape = np.shape(x)
    gshape = np.shape(g)
    if gshape == shape:
        out = g
    else:
        lead = len(gshape) - len(shape)
        axes = tuple(range(lead)) + tuple(
            i + lead for i, n in enumerate(shape) if n == 1 and gshape[i + lead] != 1)
        out = np.sum(g, axis=axes, keepdims=False) if axes else g
        if lead == 0 and np.shape(out) != shape:
            out = np.reshape(out, shape)
        elif np.shape(out) != shape:
            out = np.reshape(out, shape)
    dtype = getattr(x, "dtype", None)
    if dtype is not None and np.issubdtype(dtype, np.inexact) and getattr(out, "dtype", dtype) != dtype:
        out = np.asarray(out).astype(dtype)
    return out
