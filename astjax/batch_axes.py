"""Where vmap's batch axis sits on entering and leaving batched code.

Batched code holds the batch as the last axis of every batched value
(``astjax/runtime_batch.py``); ``in_axes``/``out_axes`` are pytree prefixes that say
where it sits outside.  These helpers are shared by ``vmap`` and by the standalone
modules ``astjax export`` writes (which copy them), so they need only NumPy and the
tree utilities.
"""
from __future__ import annotations

import numpy as np

from astjax.errors import ArgumentError
from astjax.tree_util import tree_flatten, tree_leaves, tree_unflatten


def axes_per_leaf(axes, tree, what):
    """``axes`` (int, None, or a pytree prefix of ``tree``) as one axis per leaf."""
    leaves, tdef = tree_flatten(tree)
    if axes is None or isinstance(axes, (int, np.integer)):
        return [axes] * len(leaves)
    axes_leaves, axes_def = tree_flatten(axes, is_leaf=lambda v: v is None)
    if axes_def == tdef:
        return list(axes_leaves)
    # a prefix: each axes leaf stands for a whole subtree of ``tree``
    out = []
    try:
        subtrees = axes_def.flatten_up_to(tree)
    except (ValueError, TypeError):
        subtrees = None
    if subtrees is None or len(subtrees) != len(axes_leaves):
        raise ArgumentError(f"vmap: {what} {axes!r} does not match the argument's structure "
                            f"{tdef}")
    for ax, sub in zip(axes_leaves, subtrees):
        out.extend([ax] * len(tree_leaves(sub)))
    return out


def leave(out, out_axes, size, batched):
    leaves, tdef = tree_flatten(out)
    axes = axes_per_leaf(out_axes, out, "out_axes")
    result = []
    for leaf, a in zip(leaves, axes):
        if a is None:
            if batched:
                # the batched code holds every output batched; one whose lanes all
                # agree does not depend on the batched inputs
                arr = leaf if hasattr(leaf, "__array_function__") else np.asarray(leaf)
                if not (arr.ndim and arr.shape[-1] in (1, size) and np.array_equal(
                        arr, np.broadcast_to(arr[..., :1], arr.shape), equal_nan=True)):
                    raise ArgumentError("vmap: out_axes=None for an output that depends "
                                        "on the batched inputs")
                leaf = arr[..., 0]
            result.append(leaf)
            continue
        arr = leaf if hasattr(leaf, "__array_function__") else np.asarray(leaf)
        if not batched:
            arr = np.broadcast_to(arr[..., None], arr.shape + (size,))
        elif arr.ndim == 0 or arr.shape[-1] != size:  # a lane-independent value
            arr = np.broadcast_to(arr, arr.shape[:-1] + (size,)) if arr.ndim and \
                arr.shape[-1] == 1 else np.broadcast_to(arr[..., None], arr.shape + (size,))
        result.append(np.moveaxis(arr, -1, a if a >= 0 else arr.ndim + a))
    return tree_unflatten(tdef, result)
