"""``eval_shape`` of shard_map'ed and pmap'ed functions: global shapes, no arithmetic.

A shard_map call's result shapes come from one shard: the arguments' blocks (split
by ``in_specs`` exactly as a run would, on zero-stride stand-ins, so a shape that the
mesh does not divide is the same located error), the per-shard function interpreted
abstractly under a context whose communicator only knows group sizes, and each
output's block grown by ``out_specs`` (JAX's eval_shape: global ShapeDtypeStructs).
Every device holds same-shaped blocks, so one shard speaks for all; nothing is sent,
so under ``mpiexec`` every process gets the answer alone.

Collectives in the per-shard code get their shapes by running them on stand-ins
under that context (``collective``); ``axis_index`` is a device-dependent value, so
abstract: a branch on it is refused, as JAX refuses one on a traced value.
"""
from __future__ import annotations

import numpy as np

from astjax.sharding import collectives as sh
from astjax.sharding.comm import _Groups


class AbstractComm(_Groups):
    """A communicator that only knows the mesh: collectives return the right shapes
    (every member's value is taken to be this one's), exchanging nothing."""

    engine = "abstract"

    def allgather(self, x, axes):
        return [x] * self.size(axes)

    def allreduce(self, x, axes, op="sum"):
        return x * self.size(axes) if op == "sum" else x

    def reduce_scatter(self, blocks, axes):
        return blocks[0]

    def permute(self, x, axes, pairs):
        return x

    def alltoall(self, chunks, axes):
        return list(chunks)


def _standins(tree):
    from astjax.shapes import ShapeDtypeStruct, _standin
    from astjax.tree_util import tree_map
    return tree_map(lambda v: _standin(v) if isinstance(v, ShapeDtypeStruct) else v, tree)


def _structs(tree):
    from astjax.shapes import ShapeDtypeStruct, _abstract
    from astjax.tree_util import tree_map
    return tree_map(lambda v: v if isinstance(v, ShapeDtypeStruct) else _abstract(v), tree)


# on values the same on every device (concrete ones, in an abstract shard) these
# are exact: psum(1, "i") is the axis size, as in JAX
_EXACT = {"psum", "pmean", "pmax", "pmin", "all_gather", "axis_size", "pvary"}


def abstract_prim(name, args, kwargs):
    """The abstract value of an ``sh.*`` primitive met by eval_shape's interpreter."""
    from astjax.shapes import ShapeDtypeStruct, _call, _has_abstract
    from astjax import primitives as P
    if name == "shard_map_call":
        return shard_map_shapes(args[0], args[1])
    if name == "axis_index":
        sh._group(args[0], "axis_index")            # the same errors as a run
        return ShapeDtypeStruct((), np.int32)
    out = _call(P.REGISTRY[name], _standins(list(args)), _standins(kwargs))
    if name in _EXACT and not _has_abstract(list(args)):
        return out
    return _structs(out)


def shard_map_shapes(plan, args):
    """Global ShapeDtypeStructs of ``shard_map_call(plan, args)`` (args abstract)."""
    drv = sh.driver()
    standin_args = _standins(tuple(args))
    kind = plan.kind
    if kind.endswith("_vjp"):       # cotangents of the primal arguments, like them
        from astjax.shapes import _abstract_like
        return _abstract_like(_structs(tuple(args[0])))
    if kind.endswith("_jvp"):       # tangents of the primal outputs, like them
        return shard_map_shapes(plan.parent, args[0])
    mesh, in_specs, out_specs, blocks = drv.first_shard(plan, standin_args)
    sizes = drv.manual_sizes(plan, mesh)
    ctx = sh.ShardContext(AbstractComm(mesh.shape, 0), sizes, check_vma=False,
                          kind=plan.kind, extra={"auto": tuple(
                              a for a in mesh.axis_names if a not in sizes)})
    with sh.entered(ctx):
        local = per_shard_shapes(plan, blocks)
    return drv.global_shapes(plan, mesh, out_specs, local)


def per_shard_shapes(plan, blocks):
    """The per-shard function's abstract outputs on one shard's blocks."""
    from astjax.shapes import eval_shape
    abstract = [_structs(b) for b in blocks]
    shapes_of = getattr(plan, "shapes_of", None)
    if shapes_of is not None:       # pmap: the user's function on one example
        return shapes_of(abstract)
    return eval_shape(plan.fun, *abstract)
