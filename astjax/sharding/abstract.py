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
# the shape of the (first) operand, a dtype NumPy resolves
_SAME = {"psum", "pmean", "pmax", "pmin", "pvary", "ppermute", "psum_t", "pmean_t",
         "pextreme_t", "pextreme_jvp"}
# the operand's dimension that the collective splits or joins, by parameter name
_SPLITS = {"psum_scatter": "scatter_dimension", "all_gather_t": "axis",
           "all_to_all": "split_axis"}


def abstract_prim(name, args, kwargs):
    """The abstract value of an ``sh.*`` primitive met by eval_shape's interpreter."""
    from astjax.shapes import ShapeDtypeStruct, _call, _has_abstract
    from astjax import primitives as P
    if name == "shard_map_call":
        return shard_map_shapes(args[0], args[1])
    if name == "static_plan":            # a pmap's plan for static values: concrete
        if _has_abstract(list(args[1])):
            from astjax.sharding.errors import fail
            fail(f"pmap({args[0].name}): a static_broadcasted_argnums argument is abstract "
                 "here", "pass the static value itself to eval_shape, not a "
                 "ShapeDtypeStruct")
        return sh.static_plan(args[0], args[1])
    if name == "axis_index":
        sh._group(args[0], "axis_index")            # the same errors as a run
        return ShapeDtypeStruct((), np.int32)
    prim = P.REGISTRY[name]
    if not _has_abstract(list(args)):
        out = _call(prim, list(args), kwargs)
        return out if name in _EXACT else _structs(out)
    from astjax.tree_util import tree_map
    params = dict(zip(prim.params, args))
    params.update(kwargs)
    first = prim.params[0]
    return tree_map(lambda v: _leaf(prim, name, params, first, v), params[first])


def _leaf(prim, name, params, first, v):
    """One leaf's abstract result: the real collective run on a stand-in whose
    dimensions the collective does not look at are 1 (so the same checks and dtype,
    at no cost), then the shape formula with the real sizes."""
    from astjax.shapes import ShapeDtypeStruct, _call
    if name in _SAME:
        rest = [params[p] for p in prim.params[1:]]
        small = _call(prim, [_zeros(v, keep=())] + [_zeros(a, keep=()) for a in rest],
                      {})
        shapes = [np.shape(a) for a in [v] + rest
                  if isinstance(a, (ShapeDtypeStruct, np.ndarray))]
        return ShapeDtypeStruct(np.broadcast_shapes(*shapes), np.asarray(small).dtype)
    v = _structs(v)           # a concrete leaf beside abstract ones: by its shape
    shape = list(v.shape)
    axis_param = _SPLITS.get(name)
    keep = ()
    if axis_param is not None:
        keep = (int(params.get(axis_param, prim.defaults.get(axis_param, 0))) % max(
            len(shape), 1),)
    call = dict(params)
    call[first] = _zeros(v, keep)
    small = np.asarray(_call(prim, [call[p] for p in prim.params], {}))
    comm, axes = sh._group(params["axis_name"], name)
    n = comm.size(axes)
    tiled = bool(params.get("tiled", False))
    if name == "all_gather":
        axis = int(params.get("axis", 0))
        if tiled:
            shape[axis % len(shape)] *= n
        else:
            shape.insert(axis % (len(shape) + 1), n)
    elif name in ("psum_scatter", "all_gather_t"):
        d = keep[0]
        if tiled:
            shape[d] //= n
        else:
            del shape[d]
    elif name == "all_to_all":
        s_ax, c_ax = keep[0], int(params["concat_axis"]) % len(shape)
        if tiled:
            shape[s_ax] //= n
            shape[c_ax] *= n
        else:
            del shape[s_ax]
            shape.insert(c_ax, n)
    else:
        return _structs(_call(prim, [_standins(params[p]) for p in prim.params], {}))
    return ShapeDtypeStruct(tuple(shape), small.dtype)


def _zeros(v, keep):
    """A small zero array standing for ``v``: its dimensions in ``keep`` at full size,
    the others 1 (a 0-d one for a scalar); non-array values pass through."""
    from astjax.shapes import ShapeDtypeStruct
    if isinstance(v, ShapeDtypeStruct):
        return np.zeros(tuple(d if i in keep else 1 for i, d in enumerate(v.shape)),
                        v.dtype)
    if isinstance(v, np.ndarray):
        return np.zeros(tuple(d if i in keep else 1 for i, d in enumerate(v.shape)),
                        v.dtype)
    return v


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
    shape = dict(mesh.shape)
    auto = tuple(a for a in mesh.axis_names if a not in sizes)
    outer = sh.current()
    if outer is not None:           # nested (in a named vmap...): the product mesh
        if drv._device_map(plan.kind) and drv._device_map(outer.kind):
            drv._enclosing(plan, plan.kind)             # refused, as a run refuses it
        oc = outer.comm
        shape = {**{a if a not in mesh.shape else f"{a} (shadowed)": n
                    for a, n in zip(oc.names, oc.shape)}, **shape}
        sizes = {**{a: n for a, n in outer.axis_sizes.items() if a not in mesh.shape},
                 **sizes}
        auto = tuple(a for a in outer.extra.get("auto", ()) if a not in mesh.shape) + auto
    ctx = sh.ShardContext(AbstractComm(shape, 0), sizes, check_vma=False,
                          kind=plan.kind, extra={"auto": auto})
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
