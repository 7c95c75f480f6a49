"""Matching partition specs to pytrees, splitting arrays into shards and back."""
from __future__ import annotations

import math

import numpy as np

from astjax.device import array_module, is_device_array
from astjax.sharding.errors import fail
from astjax.sharding.mesh import PartitionSpec
from astjax.tree_util import tree_flatten


def _is_spec(s):
    return s is None or isinstance(s, PartitionSpec)


def leaf_specs(specs, tree, what):
    """One PartitionSpec per leaf of ``tree``: ``specs`` is a pytree prefix of it (a
    single spec covers a whole subtree, as in JAX)."""
    out = []

    def walk(s, t, path):
        if t is None:           # no leaves (a zero tangent or cotangent)
            return
        if _is_spec(s):
            leaves, _ = tree_flatten(t)
            out.extend([s if s is not None else PartitionSpec()] * len(leaves))
            return
        if isinstance(s, (tuple, list)) and isinstance(t, (tuple, list)) and \
                len(s) == len(t):
            for i, (a, b) in enumerate(zip(s, t)):
                walk(a, b, f"{path}[{i}]")
            return
        if isinstance(s, dict) and isinstance(t, dict) and set(s) == set(t):
            for k in sorted(s, key=repr):
                walk(s[k], t[k], f"{path}[{k!r}]")
            return
        shape = type(t).__name__ + (f" of {len(t)}" if hasattr(t, "__len__") else "")
        fail(f"{what} do not match the pytree: at {path or 'the top'} the spec is "
             f"{s!r} but the value is a {shape}",
             "give one PartitionSpec per argument (or per leaf), in the same structure")
    walk(specs, tree, "")
    return out


def check_spec(spec, ndim, mesh, what):
    axes = spec.mesh_axes()
    for a in axes:
        if a not in mesh.axis_names:
            fail(f"{what}: unknown axis name {a!r} in {spec!r}; the mesh axes are "
                 f"{mesh.axis_names}", "name axes of the mesh: "
                 f"{', '.join(map(repr, mesh.axis_names))}")
    if len(set(axes)) != len(axes):
        fail(f"{what}: {spec!r} uses a mesh axis twice",
             "split each dimension over different mesh axes")
    if len(spec) > ndim:
        fail(f"{what}: {spec!r} has {len(spec)} entries but the value has rank {ndim}",
             "give at most one entry per dimension of the value (trailing ones may be "
             "left out)")


def _array(x):
    """``x`` as an array of its own module: CuPy arrays stay on their device."""
    return x if is_device_array(x) else np.asarray(x)


def _dim_factor(spec, d, mesh):
    return math.prod(mesh.shape[a] for a in spec.axes_of(d))


def split(x, spec, mesh, comm_of, what):
    """The shard of ``x`` for each mesh position (a list in flat mesh order)."""
    x = _array(x)
    check_spec(spec, x.ndim, mesh, what)
    for d in range(len(spec)):
        n = _dim_factor(spec, d, mesh)
        if x.shape[d] % n:
            fail(f"{what}: dimension {d} of a value of shape {x.shape} has size "
                 f"{x.shape[d]}, not divisible by {n} (the mesh axes {spec.axes_of(d)} "
                 f"of {spec!r})", "pad the array or choose a mesh that divides it")
    shards = []
    for pos in range(mesh.size):
        shards.append(x[block_index(x.shape, spec, mesh, comm_of(pos))])
    return shards


def block_index(shape, spec, mesh, groups, local=False):
    """The slices of the block a mesh position holds (``local``: shape is a shard's)."""
    idx = []
    for d in range(len(spec)):
        axes = spec.axes_of(d)
        if not axes:
            idx.append(slice(None))
            continue
        n = _dim_factor(spec, d, mesh)
        size = shape[d] if local else shape[d] // n
        k = groups.index(axes)
        idx.append(slice(k * size, (k + 1) * size))
    return tuple(idx)


def assemble(parts, spec, mesh, groups_of, check, what, mode="one"):
    """The global array from one output per mesh position (flat order); copies of a
    replicated block: keep one (``check``: they must be equal), or their mean or sum."""
    first = _array(parts[0])
    xp = array_module(first)
    check_spec(spec, first.ndim, mesh, what)
    shape = list(first.shape)
    for d in range(len(spec)):
        shape[d] *= _dim_factor(spec, d, mesh)
    out = xp.empty(shape, first.dtype)
    done, counts, index = {}, {}, {}
    for pos, part in enumerate(parts):
        part = _array(part)
        if part.shape != first.shape:
            fail(f"{what}: the shards' outputs differ in shape ({first.shape} and "
                 f"{part.shape})")
        idx = block_index(part.shape, spec, mesh, groups_of(pos), local=True)
        key = tuple((s.start, s.stop) for s in idx)
        if key in done:
            if mode in ("sum", "mean"):
                done[key] = done[key] + part
                counts[key] += 1
                continue
            if check and not xp.array_equal(done[key], part, equal_nan=True):
                unnamed = [a for a in mesh.axis_names if a not in spec.mesh_axes()]
                fail(f"{what}: {spec!r} says the output is replicated over "
                     f"{tuple(unnamed)}, but the devices computed different values",
                     "psum/pmean/all_gather it over those axes, or name them in out_specs"
                     " (check_vma=False skips this check and keeps the first device's)")
            continue
        done[key] = part
        counts[key] = 1
        index[key] = idx
    for key, value in done.items():
        out[index[key]] = value / counts[key] if mode == "mean" else value
    return out
