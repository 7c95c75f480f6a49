"""Helpers of the ``np.fft`` rules (reached as ``ra.<name>``).

Every discrete Fourier transform is linear, so a tangent is transformed by the same
call and a cotangent by the transposed one (JAX's convention: the transpose under
``Re(sum(a * b))``, no conjugation of a complex-linear map).  What the transposes
need besides NumPy's own transforms:

- ``fft_axes`` / ``fft_lengths``: the axes a call transforms and the lengths it
  transforms them at (NumPy's defaults for ``n``/``s``/``axes``), as non-negative
  axes so that the batching rules can keep the batch axis out of them;
- ``fft_fit``: zero-pad or cut an array to another's lengths along those axes (what
  ``n``/``s`` do to the operand; its own transpose fits back);
- ``irfft_scale``: the weights of the Hermitian half-spectrum ``irfft`` reads (the
  zero-frequency and Nyquist bins count once, the others twice) times the
  normalization, the diagonal part of ``irfft``'s transpose.
"""
from __future__ import annotations

import math

import numpy as np
from numpy.lib.array_utils import normalize_axis_index


def fft_axes(a, s=None, axes=None):
    """The axes an np.fft call transforms, non-negative, in the call's order.

    ``axes`` an int is the ``axis`` of a one-dimensional transform; ``axes`` None is
    every axis, or the last ``len(s)`` when ``s`` is given (NumPy's rule)."""
    nd = np.ndim(a)
    if isinstance(axes, (int, np.integer)):
        return (normalize_axis_index(int(axes), nd),)
    if axes is None:
        count = nd if s is None else len(s)
        return tuple(range(nd - count, nd))
    return tuple(normalize_axis_index(int(ax), nd) for ax in axes)


def fft_lengths(a, s, axes, inverse_real=False):
    """The lengths a call transforms along ``axes`` (from ``fft_axes``): ``s`` (an int
    ``n`` for one axis) where given, else the operand's; an inverse real transform's
    last axis defaults to ``2 * (m - 1)`` for ``m`` input bins."""
    shape = np.shape(a)
    if s is None:
        given = (None,) * len(axes)
    else:
        given = (s,) if isinstance(s, (int, np.integer)) else tuple(s)
    if len(given) != len(axes):
        raise ValueError("np.fft: s and axes have different lengths")
    lengths = []
    for i, (n, ax) in enumerate(zip(given, axes)):
        if n == -1:        # the operand's length, even for an inverse real transform
            lengths.append(shape[ax])
        elif n is not None:
            lengths.append(int(n))
        elif inverse_real and i == len(axes) - 1:
            lengths.append(2 * (shape[ax] - 1))
        else:
            lengths.append(shape[ax])
    return tuple(lengths)


def fft_fit(t, x, axes):
    """``t`` zero-padded or cut to ``x``'s lengths along ``axes`` (non-negative);
    other axes keep ``t``'s (a batch axis among them)."""
    if t is None:
        return None
    t = np.asarray(t) if isinstance(t, (int, float, complex)) else t
    cut = [slice(None)] * t.ndim
    pad = [(0, 0)] * t.ndim
    for ax in axes:
        have, want = t.shape[ax], np.shape(x)[ax]
        if have > want:
            cut[ax] = slice(0, want)
        elif have < want:
            pad[ax] = (0, want - have)
    t = t[tuple(cut)]
    return np.pad(t, pad) if any(p != (0, 0) for p in pad) else t


def _norm_scale(norm, count):
    """The factor np.fft's inverse transforms apply for ``norm``."""
    if norm is None or norm == "backward":
        return 1.0 / count
    if norm == "ortho":
        return 1.0 / math.sqrt(count)
    if norm == "forward":
        return 1.0
    raise ValueError(f"np.fft: invalid norm {norm!r}")


def irfft_scale(h, axes, lengths, norm=None):
    """``h`` (a half spectrum along ``axes[-1]``) times irfft's bin weights and the
    normalization of an inverse real transform at ``lengths``: the transpose of
    ``irfftn`` is ``irfft_scale(conj(rfftn(g)))``, cut to the operand's lengths."""
    if h is None:
        return None
    last = axes[-1]
    bins = h.shape[last]
    real = np.real(h[(0,) * h.ndim]).dtype if h.size else np.float64
    weights = np.full_like(h, 2.0, dtype=real, shape=(bins,))   # (h's array module)
    weights[0] = 1.0
    if lengths[-1] % 2 == 0:
        weights[-1] = 1.0      # the Nyquist bin of an even length counts once
    weights *= _norm_scale(norm, math.prod(lengths))
    return h * weights.reshape((bins,) + (1,) * (h.ndim - 1 - last))


def swap_norm(norm):
    """The norm np.fft.hfft/ihfft hand to irfft/rfft (the two directions swapped)."""
    return {None: "forward", "backward": "forward", "forward": "backward",
            "ortho": "ortho"}[norm]
