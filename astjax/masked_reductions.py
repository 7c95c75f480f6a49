"""NumPy's reductions with ``where=`` and ``initial=``, in plain NumPy astjax inlines.

``np.sum(a, where=m)`` reduces only the entries ``m`` selects; ``initial=`` starts the
reduction from a value (NumPy casts it to the result's dtype).  Rather than a second
set of rules for every reduction, the Normalizer inlines these definitions in place
of such a call (``REPLACEMENTS``), as ``jax.numpy`` defines its reductions over
``lax``: the masked entries are replaced by the reduction's identity with
``np.where``, so every transformation differentiates, batches and compiles them with
the rules it already has, and a masked entry gets a zero derivative.  The mask
broadcasts to ``a``'s shape and never the other way (NumPy's rule: a wider mask is an
error, not a wider sum).
"""
from __future__ import annotations

import numpy as np


def _mask(a, where):
    return np.broadcast_to(where, np.shape(a))


def sum_where(a, axis=None, dtype=None, out=None, keepdims=False, initial=None,
              where=True):
    total = np.sum(np.where(_mask(a, where), a, 0), axis=axis, dtype=dtype,
                   keepdims=keepdims)
    if initial is not None:
        total = total + np.asarray(initial, dtype=total.dtype)
    return total


def prod_where(a, axis=None, dtype=None, out=None, keepdims=False, initial=None,
               where=True):
    total = np.prod(np.where(_mask(a, where), a, 1), axis=axis, dtype=dtype,
                    keepdims=keepdims)
    if initial is not None:
        total = total * np.asarray(initial, dtype=total.dtype)
    return total


def max_where(a, axis=None, out=None, keepdims=False, initial=None, where=True):
    # (initial is given: the Normalizer refuses where= without it, as NumPy does)
    bound = np.asarray(initial, dtype=np.asarray(a).dtype)
    top = np.max(np.where(_mask(a, where), a, bound), axis=axis, keepdims=keepdims)
    return np.maximum(top, bound)


def min_where(a, axis=None, out=None, keepdims=False, initial=None, where=True):
    bound = np.asarray(initial, dtype=np.asarray(a).dtype)
    low = np.min(np.where(_mask(a, where), a, bound), axis=axis, keepdims=keepdims)
    return np.minimum(low, bound)


def _count(a, where, axis, keepdims, like):
    """How many entries each result reduces, in the dtype of ``like`` (a float32 mean
    stays float32; an integer one divides integers, giving float64 as NumPy does)."""
    count = np.sum(_mask(a, where), axis=axis, keepdims=keepdims)
    return np.asarray(count, dtype=like.dtype)


def mean_where(a, axis=None, dtype=None, out=None, keepdims=False, where=True):
    total = np.sum(np.where(_mask(a, where), a, 0), axis=axis, dtype=dtype,
                   keepdims=keepdims)
    return total / _count(a, where, axis, keepdims, total)


def var_where(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=True):
    mask = _mask(a, where)
    centre = mean_where(a, axis=axis, dtype=dtype, keepdims=True, where=mask)
    dev = np.where(mask, a - centre, 0)
    total = np.sum(np.real(dev * np.conj(dev)), axis=axis, dtype=dtype, keepdims=keepdims)
    count = np.maximum(np.sum(mask, axis=axis, keepdims=keepdims) - ddof, 0)
    return total / np.asarray(count, dtype=total.dtype)


def std_where(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=True):
    return np.sqrt(var_where(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims,
                             where=where))


def any_where(a, axis=None, out=None, keepdims=False, where=True):
    return np.any(np.logical_and(_mask(a, where), a), axis=axis, keepdims=keepdims)


def all_where(a, axis=None, out=None, keepdims=False, where=True):
    return np.all(np.logical_or(np.logical_not(_mask(a, where)), a), axis=axis,
                  keepdims=keepdims)


# primitive -> its definition with where= and initial= (the parameters NumPy has)
REPLACEMENTS = {"sum": sum_where, "prod": prod_where, "max": max_where, "min": min_where,
                "mean": mean_where, "var": var_where, "std": std_where, "any": any_where,
                "all": all_where}
NEEDS_INITIAL = ("max", "min")   # no identity: a mask needs a starting value


def replacement(prim, kwargs):
    """The definition to inline for a call of ``prim`` with these keywords, or None."""
    if prim.name in REPLACEMENTS and ("where" in kwargs or "initial" in kwargs):
        return REPLACEMENTS[prim.name]
    return None
