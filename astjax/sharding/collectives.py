"""Collectives as calls into the current shard's communicator (``sh`` in generated code).

``astjax.lax.psum`` and friends are these functions.  Each runs inside a shard (a
thread or an MPI process started by ``shard_map``/``pmap``), where a context names
the mesh axes and holds the communicator; outside any mapped axis they are an error
naming the user's line.  A collective over the empty tuple of axes is the identity
of a group of one (JAX's ``psum(x, ())``), which needs no context.

Derivatives (templates/vjp.py, jvp.py, batch.py) are JAX's ``check_vma=False``
transposes, the exact transposes on per-device values: psum <-> psum, all_gather <->
psum_scatter, ppermute <-> the inverse permutation, all_to_all <-> all_to_all with
split and concat axes swapped.  A gradient taken inside a ``check_vma=True``
shard_map gets JAX's check_vma=True numbers from these same transposes, between the
two boundaries of astjax/sharding/vma.py (which also types every collective's
result: ``_typed``).
"""
from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field

import numpy as np

from astjax.device import array_module, is_device_array
from astjax.sharding.errors import fail
from astjax.tree_util import tree_map

_STATE = threading.local()


@dataclass
class ShardContext:
    """What a running shard knows: its communicator and the mesh axes' sizes."""

    comm: object
    axis_sizes: dict
    check_vma: bool = False
    transposing: int = 0
    kind: str = "shard_map"
    extra: dict = field(default_factory=dict)


def current() -> ShardContext | None:
    stack = getattr(_STATE, "stack", None)
    return stack[-1] if stack else None


@contextlib.contextmanager
def entered(ctx: ShardContext):
    stack = getattr(_STATE, "stack", None)
    if stack is None:
        stack = _STATE.stack = []
    stack.append(ctx)
    try:
        yield ctx
    finally:
        stack.pop()


@contextlib.contextmanager
def transposing():
    """The driver runs a per-shard derivative of the whole shard_map'ed function."""
    ctx = current()
    if ctx is None:
        yield
        return
    ctx.transposing += 1
    try:
        yield
    finally:
        ctx.transposing -= 1


class _Single:
    """The group of one: collectives over ``()``."""

    @staticmethod
    def size(axes):
        return 1

    @staticmethod
    def index(axes):
        return 0

    @staticmethod
    def allgather(x, axes):
        return [x]

    @staticmethod
    def allreduce(x, axes, op="sum"):
        return _arr(x).copy()

    @staticmethod
    def reduce_scatter(blocks, axes):
        return _arr(blocks[0]).copy()

    @staticmethod
    def permute(x, axes, pairs):
        return _arr(x).copy() if (0, 0) in pairs else np.zeros_like(x)

    @staticmethod
    def alltoall(chunks, axes):
        return [_arr(chunks[0]).copy()]


def _group(axis_name, what):
    """(communicator, axes tuple) for a collective over ``axis_name``."""
    axes = (axis_name,) if isinstance(axis_name, str) else axis_name
    if not isinstance(axes, (tuple, list)) or not all(isinstance(a, str) for a in axes):
        fail(f"{what}: axis_name must be a mesh axis name or a tuple of names, got "
             f"{axis_name!r}")
    axes = tuple(axes)
    if not axes:
        return _Single, axes
    ctx = current()
    if ctx is None:
        fail(f"{what}({axis_name!r}) is called outside any mapped axis",
             "call it inside a function run by astjax.shard_map, astjax.pmap or "
             "astjax.vmap(..., axis_name=...)")
    for a in axes:
        if a in ctx.extra.get("auto", ()):
            fail(f"{what}: {a!r} is an automatic axis of this shard_map (not in its "
                 f"axis_names): collectives act over its manual axes "
                 f"{tuple(ctx.axis_sizes)} only",
                 f"add {a!r} to shard_map's axis_names")
        if a not in ctx.axis_sizes and a in ctx.extra.get("hidden", ()):
            fail(f"{what}: {a!r} is an axis of a shard_map/pmap running on MPI or NCCL "
                 "devices around this vmap(..., axis_name=...): its examples (threads of "
                 "one device) reach only their own axis",
                 "apply the collective outside the named vmap, or run on local devices")
        if a not in ctx.axis_sizes:
            known = ", ".join(repr(n) for n in ctx.axis_sizes)
            fail(f"{what}: unknown axis name {a!r}; the mapped axes here are {known}",
                 "use one of the mesh's axis_names (or pmap's axis_name)")
    if len(set(axes)) != len(axes):
        fail(f"{what}: axis {axes} names an axis twice")
    return ctx.comm, axes


def reverse_mode_guard(what):
    """Reverse mode's code read by another transformation inside a check_vma=True
    shard_map (``jit(grad(f))``, grad of grad, ``vmap``/``jvp`` of a gradient, or a
    derivative of the shard_map'ed function taken from outside whose per-shard function
    takes a gradient): refused.  Its transposes would be check_vma=False's; JAX's
    check_vma=True numbers come only from grad/value_and_grad/vjp/jacrev called in the
    per-shard function, which astjax/sharding/vma.py puts between its boundaries."""
    ctx = current()
    if ctx is not None and ctx.check_vma and not ctx.transposing:
        fail(f"{what}'s code is read by another transformation (jit, vmap, jvp, grad of "
             "it, or a derivative of the shard_map'ed function from outside) inside a "
             "shard_map with check_vma=True: astjax gives JAX's check_vma=True gradients "
             "only for grad/value_and_grad/vjp/jacrev called directly in the per-shard "
             "function, and will not return check_vma=False's here",
             "call the gradient directly (not under jit/vmap/jvp/grad), or pass "
             "check_vma=False to shard_map (JAX's check_vma=False gradients)")


# astjax/sharding/vma.py's typing of collective results, registered when it loads
# (before any check_vma=True shard runs); absent in a standalone module's copy
_TYPING: list = []


def _typed(name, x, out, axes):
    """Inside a check_vma=True shard: record the result's varying manual axes."""
    if _TYPING:
        ctx = current()
        if ctx is not None and ctx.check_vma is True:
            _TYPING[0](name, x, out, axes)
    return out


def _arr(x):
    """An array: CuPy arrays stay on their GPU (the NCCL engine's), others NumPy."""
    return x if is_device_array(x) else np.asarray(x)


def _like(x, out):
    """Python scalars stay Python scalars (``psum(1, 'i')`` is the axis size)."""
    if isinstance(x, (bool, int, float)) and not isinstance(x, np.generic):
        return type(x)(out) if np.ndim(out) == 0 else out
    return out


def _reduce(x, axis_name, op, what):
    comm, axes = _group(axis_name, what)
    out = tree_map(lambda v: _like(v, comm.allreduce(_arr(v), axes, op)), x)
    return _typed(what, x, out, axes)


def psum(x, axis_name):
    """Sum over the devices of ``axis_name`` (a name or a tuple of names)."""
    return _reduce(x, axis_name, "sum", "psum")


def pmax(x, axis_name):
    return _reduce(x, axis_name, "max", "pmax")


def pmin(x, axis_name):
    return _reduce(x, axis_name, "min", "pmin")


def pmean(x, axis_name):
    comm, axes = _group(axis_name, "pmean")
    n = comm.size(axes)

    def one(v):
        s = comm.allreduce(_arr(v), axes, "sum")
        return s / n if np.issubdtype(s.dtype, np.inexact) else s / float(n)
    return _typed("pmean", x, tree_map(one, x), axes)


def axis_index(axis_name):
    """This device's index along ``axis_name`` (tuples: linearized in the given order)."""
    comm, axes = _group(axis_name, "axis_index")
    return _typed("axis_index", None, np.int32(comm.index(axes)), axes)


def axis_size(axis_name):
    comm, axes = _group(axis_name, "axis_size")
    return int(comm.size(axes))


def _axis(ax, ndim, what, name):
    if not -ndim <= ax < ndim:
        fail(f"{what}: {name}={ax} is out of range for an operand of rank {ndim - 0}")
    return ax % ndim


def all_gather(x, axis_name, *, axis=0, tiled=False, axis_index_groups=None):
    """Every device's ``x``, stacked along a new ``axis`` (``tiled``: concatenated)."""
    if axis_index_groups is not None:
        fail("all_gather: axis_index_groups is not supported")
    comm, axes = _group(axis_name, "all_gather")

    def one(v):
        v = _arr(v)
        parts = comm.allgather(v, axes)
        if tiled:
            if v.ndim == 0:
                fail("all_gather(tiled=True) needs an operand of rank >= 1")
            return np.concatenate(parts, axis=_axis(axis, v.ndim, "all_gather", "axis"))
        return np.stack(parts, axis=_axis(axis, v.ndim + 1, "all_gather", "axis"))
    return _typed("all_gather", x, tree_map(one, x), axes)


def psum_scatter(x, axis_name, *, scatter_dimension=0, tiled=False, axis_index_groups=None):
    """The sum over ``axis_name``, of which device i keeps block i along
    ``scatter_dimension`` (untiled: that dimension's size is the axis size, and drops)."""
    if axis_index_groups is not None:
        fail("psum_scatter: axis_index_groups is not supported")
    comm, axes = _group(axis_name, "psum_scatter")
    n = comm.size(axes)

    def one(v):
        v = _arr(v)
        if v.ndim == 0:
            fail("psum_scatter needs an operand of rank >= 1")
        d = _axis(scatter_dimension, v.ndim, "psum_scatter", "scatter_dimension")
        size = v.shape[d]
        if tiled and size % n or not tiled and size != n:
            need = f"a multiple of {n}" if tiled else f"equal to {n}"
            fail(f"psum_scatter: dimension {d} of the operand has size {size}, which "
                 f"must be {need} (the size of axis {axis_name!r})")
        xp = array_module(v)
        blocks = [xp.ascontiguousarray(b) for b in xp.split(v, n, axis=d)]
        if not tiled:
            blocks = [np.squeeze(b, axis=d) for b in blocks]
        return comm.reduce_scatter(blocks, axes)
    return _typed("psum_scatter", x, tree_map(one, x), axes)


def _check_perm(perm, n):
    try:
        pairs = [(int(s), int(d)) for s, d in perm]
    except (TypeError, ValueError):
        fail(f"ppermute: perm must be a sequence of (source, destination) pairs, got "
             f"{perm!r}")
    srcs = [s for s, _ in pairs]
    dsts = [d for _, d in pairs]
    if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts):
        fail(f"ppermute: perm {perm!r} sends from or to one device twice")
    if any(not 0 <= i < n for i in srcs + dsts):
        fail(f"ppermute: perm {perm!r} names a device outside 0..{n - 1}")
    return tuple(pairs)


def ppermute(x, axis_name, perm):
    """Device ``d`` gets ``x`` of device ``s`` for each pair ``(s, d)``; others zeros."""
    comm, axes = _group(axis_name, "ppermute")
    pairs = _check_perm(perm, comm.size(axes))
    return _typed("ppermute", x, tree_map(lambda v: comm.permute(_arr(v), axes, pairs), x),
                  axes)


def ppermute_inverse(perm):
    """The permutation that undoes ``perm`` (ppermute's transpose)."""
    return tuple((int(d), int(s)) for s, d in perm)


def all_to_all(x, axis_name, split_axis, concat_axis, *, tiled=False,
               axis_index_groups=None):
    """Split ``x`` in axis-size chunks along ``split_axis``; chunk j goes to device j;
    the received chunks are joined along ``concat_axis`` in device order.  Untiled, the
    split axis (of the axis size) is removed and a new axis inserted at concat_axis."""
    if axis_index_groups is not None:
        fail("all_to_all: axis_index_groups is not supported")
    comm, axes = _group(axis_name, "all_to_all")
    n = comm.size(axes)

    def one(v):
        v = _arr(v)
        s = _axis(split_axis, v.ndim, "all_to_all", "split_axis")
        size = v.shape[s]
        if tiled and size % n or not tiled and size != n:
            need = f"a multiple of {n}" if tiled else f"equal to {n}"
            fail(f"all_to_all: split_axis {s} has size {size}, which must be {need} "
                 f"(the size of axis {axis_name!r})")
        xp = array_module(v)
        chunks = [xp.ascontiguousarray(c) for c in xp.split(v, n, axis=s)]
        got = comm.alltoall(chunks, axes)
        if tiled:
            return np.concatenate(got, axis=_axis(concat_axis, v.ndim, "all_to_all",
                                                  "concat_axis"))
        got = [np.squeeze(c, axis=s) for c in got]
        return np.stack(got, axis=_axis(concat_axis, v.ndim, "all_to_all", "concat_axis"))
    return _typed("all_to_all", x, tree_map(one, x), axes)


def pvary(x, axis_name):
    """Mark a replicated value as device-varying: the identity on per-device values
    (under check_vma=True its transpose is a psum: astjax/sharding/vma.py)."""
    _, axes = _group(axis_name, "pvary")
    return _typed("pvary", x, tree_map(lambda v: _arr(v).copy(), x), axes)


def pcast(x, axis_name, to):
    """JAX 0.10's ``lax.pcast``: ``to="varying"`` is ``pvary`` (invariant -> varying);
    the reduced/unreduced states of JAX's explicit sharding are not supported."""
    if to == "varying":
        return pvary(x, axis_name)
    if to in ("reduced", "unreduced"):
        fail(f"pcast(..., to={to!r}): astjax supports to='varying' only (JAX's reduced "
             "and unreduced states belong to its explicit-sharding mode)")
    fail(f"pcast: unexpected to={to!r}; the allowed values are 'varying', 'reduced' and "
         "'unreduced'")


# ------------------------------------------------- per-device transposes (see above)

def psum_t(g, axis_name):
    """psum's transpose (a psum of the cotangents)."""
    return psum(g, axis_name)


def pmean_t(g, axis_name):
    return pmean(g, axis_name)


def all_gather_t(g, axis_name, axis=0, tiled=False):
    """all_gather's transpose: psum_scatter along the gathered axis."""
    return psum_scatter(g, axis_name, scatter_dimension=axis, tiled=tiled)


def pextreme_t(g, x, ans, axis_name):
    """pmax/pmin's transpose: the summed cotangent goes to the devices holding the
    extreme, shared equally between ties (as JAX shares ties of max)."""
    hit = (_arr(x) == _arr(ans)).astype(np.result_type(g, np.float32)
                                                    if np.ndim(g) >= 0 else float)
    count = np.maximum(psum(hit, axis_name), 1.0)   # >= 1 where x holds the extreme
    return psum(g, axis_name) * hit / count


def pextreme_jvp(dx, x, ans, axis_name):
    """pmax/pmin's tangent: the mean of the tangents of the devices holding it."""
    hit = (_arr(x) == _arr(ans)).astype(np.result_type(dx, np.float32))
    return psum(dx * hit, axis_name) / np.maximum(psum(hit, axis_name), 1.0)


# ------------------------------------------------ shard_map as a primitive (its plans)

# The driver (astjax/sharding/mapping.py) builds per-shard code with the public
# transformations, so it sits above the API; it registers itself here when imported
# (``import astjax`` imports it), and this run-time module never imports it.
_DRIVER: list = []


def register_driver(module):
    """Record the shard_map driver that runs plans and derives their transforms."""
    _DRIVER[:] = [module]


def driver():
    """The shard_map driver module (astjax.sharding.mapping)."""
    if not _DRIVER:
        raise RuntimeError("astjax.sharding's driver is not loaded (import astjax first)")
    return _DRIVER[0]


def shard_map_call(plan, args):
    """A shard_map'ed function's call: the primitive the transformations see."""
    return driver().run(plan, tuple(args))


def vjp_plan(plan):
    return driver().vjp_plan(plan)


def jvp_plan(plan):
    return driver().jvp_plan(plan)


def batch_plan(plan):
    return driver().batch_plan(plan)


def static_plan(plan, statics):
    return driver().static_plan(plan, statics)


def static_plan_batched(plan, statics):
    return driver().static_plan_batched(plan, statics)
