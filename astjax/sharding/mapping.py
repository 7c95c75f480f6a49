"""``shard_map`` and ``pmap``: run a per-shard function on every device of a mesh.

The driver splits the inputs by ``in_specs``, runs the per-shard function once per
mesh position -- on threads of this process (local devices) or, under ``mpiexec``,
each process its own position -- with a communicator for the collectives, and joins
the outputs by ``out_specs``.

For the transformations a shard_map'ed function is generated Python that makes one
call, ``sh.shard_map_call(plan, (args...))``, a primitive of the registry whose
rules are shard_maps themselves: its derivative runs the per-shard derivative under
the same mesh (vjp: the cotangents split like the outputs, replicated inputs'
cotangents summed over the devices; jvp: tangents split like the inputs), its
batching rule runs the per-shard function vmapped.  So ``grad``, ``jvp``, ``vmap``
and ``jit`` of a shard_map'ed function come from the existing transformations.
"""
from __future__ import annotations

import functools
import itertools
import sys

import numpy as np

from astjax.device import array_module
from astjax.sharding import blas
from astjax.sharding import collectives as sh
from astjax.sharding import distributed
from astjax.sharding import execute
from astjax.sharding import nccl
from astjax.sharding.errors import fail
from astjax.sharding.mesh import Mesh, PartitionSpec, devices
from astjax.sharding.execute import leaf_modes
from astjax.sharding.execute import shared as _shared
from astjax.sharding.specs import assemble, block_index, check_spec, leaf_specs, split
from astjax.tree_util import tree_flatten, tree_unflatten

_COUNTER = itertools.count()


class ShardPlan:
    """Everything the driver needs, static for the transformations: the per-shard
    function, the mesh (pmap's: sized per call), the specs (derived plans compute
    theirs from the call's arguments: ``in_specs_fn``/``out_specs_fn``), how
    replicated values cross the driver (``in_modes``/``out_modes``) and the
    replication check."""

    def __init__(self, fun, mesh, in_specs, out_specs, check_vma=True, kind="shard_map",
                 name=None):
        self.fun = fun
        self.mesh = mesh
        self.in_specs = in_specs
        self.out_specs = out_specs
        self.check_vma = check_vma
        self.kind = kind
        self.name = name or getattr(fun, "__name__", "f")
        # how replicated leaves cross the driver (see leaf_modes): user plans copy
        # inputs to every device and keep one copy of an output
        self.in_modes = "copy"
        self.out_modes = "one"
        self.nargs = None

    def __repr__(self):
        return f"<{self.kind} plan of {self.name} on {self.mesh!r}>"



_groups_of = execute.groups_of


def _mesh_of(plan, args):
    if isinstance(plan.mesh, Mesh):
        return plan.mesh
    p, a = plan, args          # pmap's mesh: sized by the original call's arguments
    while getattr(p, "parent", None) is not None:
        p, a = p.parent, a[0]
    return plan.mesh(a)


def manual_sizes(plan, mesh) -> dict:
    """The mesh axes the per-shard function sees (shard_map's ``axis_names``; the
    others stay automatic: not split, no collectives over them)."""
    p = plan
    while getattr(p, "parent", None) is not None:
        p = p.parent
    manual = getattr(p, "manual", None)
    return {a: n for a, n in mesh.shape.items() if manual is None or a in manual}


_ROLES = {"vjp": "vjp", "jvp": "jvp", "batch": "vmap"}


def describe(plan) -> str:
    """A plan as messages name it: the user's shard_map or pmap, and the
    transformation a derived plan runs it under (``shard_map(f) under vmap``)."""
    roles = []
    p = plan
    while getattr(p, "parent", None) is not None:
        roles.append(_ROLES.get(p.kind[len(p.parent.kind) + 1:], p.kind))
        p = p.parent
    base = f"{p.kind}({p.name})"
    return f"{base} under {' of '.join(roles)}" if roles else base


def _rank(x):
    return x.ndim if hasattr(x, "ndim") else np.ndim(x)


def check_batched(plan, values, specs, what):
    """A batched plan's values carry vmap's trailing batch axes (one per vmap): its
    specs, the user's, may not reach them -- checked against the rank the unbatched
    call sees, so vmap refuses what the call refuses (instead of splitting the batch
    over the devices)."""
    depth = plan.kind.split("_").count("batch") if plan.kind.endswith("_batch") else 0
    for x, s in zip(values, specs) if depth else ():
        rank = _rank(x) - depth
        if s is not None and len(s) > rank:
            fail(f"{what}: {s!r} has {len(s)} entries but the value has rank {rank}",
                 "give at most one entry per dimension of the value (trailing ones may "
                 "be left out)")


def first_shard(plan, args):
    """(mesh, in_specs, out_specs, the blocks of mesh position 0): what a run would
    give the first device (every device's blocks have the same shapes)."""
    mesh = _mesh_of(plan, args)
    what = describe(plan)
    groups = _groups_of(mesh)
    in_specs = _plan_in_specs(plan, args)
    out_specs = _plan_out_specs(plan, args)
    leaves, tdef = tree_flatten(tuple(args))
    specs = leaf_specs(tuple(in_specs), tuple(args), f"{what}: in_specs")
    check_batched(plan, leaves, specs, f"{what}: in_specs")
    blocks = [split(x, s, mesh, groups, f"{what}: in_specs")[0]
              for x, s in zip(leaves, specs)]
    return mesh, in_specs, out_specs, tree_unflatten(tdef, blocks)


def global_shapes(plan, mesh, out_specs, local):
    """One shard's abstract outputs grown to the global arrays ``out_specs`` join."""
    from astjax.shapes import ShapeDtypeStruct
    what = f"{describe(plan)}: out_specs"
    leaves, tdef = tree_flatten(local)
    specs = leaf_specs(out_specs, local, what)
    check_batched(plan, leaves, specs, what)
    out = []
    for leaf, s in zip(leaves, specs):
        shape = list(leaf.shape)
        check_spec(s, len(shape), mesh, what)
        for d in range(len(s)):
            shape[d] *= int(np.prod([mesh.shape[a] for a in s.axes_of(d)], dtype=int))
        out.append(ShapeDtypeStruct(tuple(shape), leaf.dtype))
    return tree_unflatten(tdef, out)


def run(plan: ShardPlan, args: tuple):
    """Split, run every shard, assemble (the eager meaning of a shard_map call)."""
    mesh = _mesh_of(plan, args)
    what = describe(plan)
    groups = _groups_of(mesh)
    in_specs = _plan_in_specs(plan, args)
    out_specs = _plan_out_specs(plan, args)
    leaves, tdef = tree_flatten(tuple(args))
    specs = leaf_specs(tuple(in_specs), tuple(args), f"{what}: in_specs")
    check_batched(plan, leaves, specs, f"{what}: in_specs")
    modes = leaf_modes(plan.in_modes, tuple(args), "copy")
    leaves = [_shared(x, s, mesh) if m == "share" else x
              for x, s, m in zip(leaves, specs, modes)]
    outer = _enclosing(plan, what)
    world = None if getattr(plan, "local_only", False) or outer is not None else \
        distributed.world()
    if world is not None:
        return _run_mpi(plan, mesh, leaves, tdef, specs, world, groups, what, out_specs)
    per_leaf = [split(x, s, mesh, groups, f"{what}: in_specs") for x, s in zip(leaves, specs)]
    fun, vma_mode = _typed_fun(plan, specs, mesh), _vma_mode(plan)
    enclosing = sh.current()
    if not vma_mode and enclosing is not None and enclosing.check_vma:
        vma_mode = "derived"     # a named vmap in a check_vma=True shard: not typed here
    if outer is not None:
        outs = execute.run_threads(fun, mesh, [
            tree_unflatten(tdef, [p[pos] for p in per_leaf]) for pos in range(mesh.size)],
            manual_sizes(plan, mesh), vma_mode, plan.kind, what, outer=outer)
        return _join(plan, mesh, out_specs, outs, groups, what)
    engine, gpus = _engine(leaves, mesh, what)
    per_leaf = execute.placed(per_leaf, gpus)
    shard_args = [tree_unflatten(tdef, [p[pos] for p in per_leaf]) for pos in range(mesh.size)]
    outs = execute.run_threads(fun, mesh, shard_args, manual_sizes(plan, mesh),
                               vma_mode, plan.kind, what,
                               limit=blas.limited_for(mesh.size), engine=engine, gpus=gpus,
                               hidden=_hidden_axes())
    outs = execute.gathered(outs, gpus)
    return _join(plan, mesh, out_specs, outs, groups, what)


_engine = execute.engine_for


def _vma_mode(plan):
    """The shard context's ``check_vma``: the plan's own; for a plan derived from a
    check_vma=True one (its vjp, jvp, batching), "derived": its per-device code is
    check_vma=False's, and reverse mode inlined in it is refused (collectives.py)."""
    if plan.check_vma:
        return plan.check_vma
    root = plan
    while getattr(root, "parent", None) is not None:
        root = root.parent
    return "derived" if root is not plan and root.check_vma else False


def _typed_fun(plan, specs, mesh):
    """A check_vma=True shard_map's per-shard function, recording its inputs' varying
    manual axes first (astjax/sharding/vma.py)."""
    if plan.check_vma is not True or getattr(plan, "derived", False):
        return plan.fun
    from astjax.sharding import vma
    fun, axes = plan.fun, tuple(manual_sizes(plan, mesh))

    def typed(*args):
        vma.record_inputs(sh.current(), args, specs, axes)
        return fun(*args)
    return typed


def _device_map(kind):
    """shard_map and pmap (and their derived plans) map over devices; a named vmap's
    examples are virtual devices of the thread that calls it."""
    return not kind.startswith("vmap")


def _hidden_axes():
    """The axes of an enclosing MPI/NCCL shard, which a named vmap's examples (threads
    of that shard) cannot reach: named in the error of a collective over them."""
    ctx = sh.current()
    if ctx is None:
        return ()
    return tuple(ctx.axis_sizes) + tuple(ctx.extra.get("hidden", ()))


def _root_kind(kind):
    return next(k for k in ("shard_map", "pmap", "vmap") if kind.startswith(k))


def _enclosing(plan, what):
    """The context of the local shard this run is nested in, or None (not nested, or
    nested in an MPI/NCCL shard, where a named vmap's collectives stay within it).

    As in JAX, a shard_map or pmap may not run inside a shard_map or pmap (its mesh
    would have to be the enclosing one); inside a named vmap anything may (JAX's
    ``vmap(shard_map(f, ...), axis_name="b")``), and a named vmap inside anything:
    their collectives may name the enclosing axes, their own, or a tuple of both."""
    ctx = sh.current()
    if ctx is None:
        return None
    root = plan
    while getattr(root, "parent", None) is not None:
        root = root.parent
    what = f"{root.kind}({root.name})"
    if _device_map(plan.kind) and _device_map(ctx.kind):
        fail(f"{what} is called inside a {_root_kind(ctx.kind)}: a shard_map or pmap "
             "inside a shard_map or pmap is not supported (JAX refuses it too: the inner "
             "mesh would have to be the enclosing one)",
             "use one shard_map over a mesh with both axes, or make the outer map "
             "vmap(..., axis_name=...)")
    engine = getattr(ctx.comm, "engine", None)
    if engine == "local":
        return ctx
    if _device_map(plan.kind):
        fail(f"{what} is called inside vmap(..., axis_name=...) inside a shard_map or "
             f"pmap running on {engine} devices: not supported there",
             "run it on local devices (threads), or make the named vmap a mesh axis")
    return None


def _plan_in_specs(plan, args):
    if getattr(plan, "in_specs_fn", None) is not None:
        return plan.in_specs_fn(args)
    return _specs_tuple(plan.in_specs, len(args))


def _plan_out_specs(plan, args):
    if getattr(plan, "out_specs_fn", None) is not None:
        return plan.out_specs_fn(args)
    return plan.out_specs


# a call's specs, for astjax gen's layouts (astjax/sharding/gen.py)
plan_in_specs, plan_out_specs = _plan_in_specs, _plan_out_specs


def _join(plan, mesh, out_specs, outs, groups, what):
    out_leaves, out_tdef = tree_flatten(outs[0])
    specs = leaf_specs(out_specs, outs[0], f"{what}: out_specs")
    check_batched(plan, out_leaves, specs, f"{what}: out_specs")
    modes = leaf_modes(plan.out_modes, outs[0], "one")
    per = [tree_flatten(o)[0] for o in outs]
    joined = [assemble([p[i] for p in per], s, mesh, groups, plan.check_vma,
                       f"{what}: out_specs", mode=m)
              for i, (s, m) in enumerate(zip(specs, modes))]
    joined = [j[()] if j.ndim == 0 and not isinstance(leaf, np.ndarray) else j
              for j, leaf in zip(joined, out_leaves)]
    return tree_unflatten(out_tdef, joined)


def _run_mpi(plan, mesh, leaves, tdef, specs, world, groups, what, out_specs):
    if mesh.size != world.size:
        fail(f"{what}: the mesh has {mesh.size} devices but mpiexec started "
             f"{world.size} processes", "make the mesh as large as the MPI world")
    pos = int(np.flatnonzero(mesh.device_ids().ravel() == world.rank)[0])
    mine = []
    for x, s in zip(leaves, specs):
        x = x if nccl.is_cupy(x) else np.asarray(x)
        check_spec(s, x.ndim, mesh, f"{what}: in_specs")
        for d in range(len(s)):
            n = int(np.prod([mesh.shape[a] for a in s.axes_of(d)], dtype=int))
            if x.shape[d] % n:
                fail(f"{what}: in_specs: dimension {d} of a value of shape {x.shape} has "
                     f"size {x.shape[d]}, not divisible by {n} (the mesh axes "
                     f"{s.axes_of(d)} of {s!r})")
        block = x[block_index(x.shape, s, mesh, groups(pos))]
        mine.append(nccl.contiguous(block))
    engine = "nccl" if any(nccl.is_cupy(x) for x in leaves) else "mpi"
    outs = execute.run_mpi(_typed_fun(plan, specs, mesh), mesh, world, pos,
                           tree_unflatten(tdef, mine), manual_sizes(plan, mesh),
                           _vma_mode(plan), plan.kind, engine)
    joined = _join(plan, mesh, out_specs, outs, groups, what)
    if engine == "nccl":                  # the results where the arguments were
        import cupy
        from astjax.tree_util import tree_map
        joined = tree_map(cupy.asarray, joined)
    return joined


# ------------------------------------------------------------- the user-facing object

def _specs_tuple(in_specs, nargs):
    if isinstance(in_specs, PartitionSpec) or in_specs is None:
        return tuple([in_specs] * nargs)
    return in_specs


def _wrapper_source(plan, params, name):
    import re
    fname = re.sub(r"\W", "_", f"{name}_{plan.kind}").strip("_") or "sharded"
    args = ", ".join(params)
    tup = f"({args},)" if len(params) == 1 else f"({args})"
    src = (f"def {fname}({args}):\n"
           f"    out = sh.shard_map_call({fname}_plan, {tup})\n"
           f"    return out\n")
    return fname, src


def _generated_wrapper(plan, params, name):
    """The Python the transformations read: one ``sh.shard_map_call`` of the plan."""
    fname, src = _wrapper_source(plan, params, name)
    filename = f"<astjax-{plan.kind}-{next(_COUNTER)}>"
    import linecache
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    namespace = {"sh": sh, f"{fname}_plan": plan}
    exec(compile(src, filename, "exec"), namespace)  # noqa: S102  (our own generated code)
    return namespace[fname]


class _ShardView:
    """What ``make_source`` shows for a shard_map'ed function: the call the
    transformations see, and the per-shard function's core form (collectives are
    ``sh.*`` calls into the running device's communicator)."""

    core = None

    def __init__(self, plan, params, fun):
        self.plan, self.params, self.fun = plan, params, fun

    @property
    def source(self):
        from astjax import codegen
        from astjax.frontend.names import NameGen
        from astjax.frontend.normalize import Normalizer
        p = self.plan
        mesh = p.mesh if isinstance(p.mesh, Mesh) else f"a 1-d mesh {p.mesh.axis_name!r}"
        _, wrapper = _wrapper_source(p, self.params, p.name)
        per_shard = codegen.print_function(
            Normalizer(NameGen()).function(self.fun),
            f"per-shard function of {p.kind}({p.name}): runs once per device, by astjax.")
        how = "" if p.kind == "shard_map" else \
            f"# (run vmapped over each device's slice of the {p.kind}ped axis)\n"
        manual = getattr(p, "manual", None)
        if manual is not None:
            mesh = f"{mesh!r}, manual over {tuple(sorted(manual))} only"
        return (f"# {p.kind} over {mesh!s}: in_specs {p.in_specs!r}, out_specs "
                f"{p.out_specs!r}\n# the driver splits the arguments by in_specs, runs "
                f"the per-shard function on every device\n# and joins its outputs by "
                f"out_specs; the transformations see this one call:\n{wrapper}\n"
                f"{how}{per_shard}")


def _as_function(plan, params, call, user_fun=None):
    """A Python function (what the transformations take) that runs ``call``, carrying
    ``_astjax_generated``: the one-call wrapper they read instead of its body."""
    def sharded(*args, **kwargs):
        if kwargs:
            fail(f"{plan.kind}: pass the arguments positionally (keywords are not split "
                 "by in_specs)")
        return call(*args)
    functools.update_wrapper(sharded, plan.fun)
    # update_wrapper copied plan.fun's attributes: for pmap and vmap(axis_name=) that
    # is vmap(f)'s, whose _astjax_batched/_astjax_vmap would make jit and vmap run the
    # plain batched code, with collectives over an enclosing mesh axis of that name
    for attr in [a for a in vars(sharded) if a.startswith("_astjax") or a == "__wrapped__"]:
        del sharded.__dict__[attr]
    made = {}

    def generated():
        if "fn" not in made:
            made["fn"] = _generated_wrapper(plan, params, plan.name)
        return made["fn"]
    try:                                # called as the user's function is
        import inspect
        sharded.__signature__ = inspect.signature(user_fun or plan.fun)
    except (TypeError, ValueError):
        pass
    sharded._astjax = plan.kind
    sharded._astjax_plan = plan         # astjax gen writes its per-shard code
    sharded._astjax_generated = generated
    # (every transformation of this function replaces _astjax_source with its own)
    view = _ShardView(plan, params, user_fun or plan.fun)
    sharded._astjax_source = lambda *args, **kwargs: view
    return sharded


def _param_names(f, nargs=None):
    """The positional parameters of ``f`` (of the code it runs, for a transformed
    function), named as the generated wrapper will name them."""
    try:
        from astjax.binding import signature_of
        names = list(signature_of(f).names)
        if names:
            return names
    except Exception:   # noqa: BLE001  (not readable by astjax: name them a0, a1...)
        pass
    import inspect
    try:
        ps = [p for p in inspect.signature(f).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        return [p.name for p in ps]
    except (TypeError, ValueError):
        return [f"a{i}" for i in range(nargs or 1)]


def _fixed_arity(f):
    """True when ``f`` takes a fixed number of positional arguments (no ``*args``)."""
    import inspect
    try:
        from astjax.binding import signature_of
        sig = signature_of(f).signature
    except Exception:   # noqa: BLE001
        try:
            sig = inspect.signature(f)
        except (TypeError, ValueError):
            return False
    return not any(p.kind == p.VAR_POSITIONAL for p in sig.parameters.values())


def shard_map(f=None, *, mesh: Mesh | None = None, in_specs=None, out_specs=None,
              check_vma=None, check_rep=None, axis_names=None):
    """``f`` run once per device of ``mesh`` on the blocks ``in_specs`` give it; the
    per-device outputs joined by ``out_specs`` (JAX's ``shard_map``).

    ``check_vma`` (alias ``check_rep``, default True) checks at run time that an output
    ``out_specs`` declares replicated is equal on those devices, and gives gradients
    taken inside ``f`` JAX's check_vma=True meaning (a replicated input's summed over
    the devices: astjax/sharding/vma.py); with False they are the local ones."""
    if f is None:
        return functools.partial(shard_map, mesh=mesh, in_specs=in_specs,
                                 out_specs=out_specs, check_vma=check_vma,
                                 check_rep=check_rep, axis_names=axis_names)
    if not callable(f):
        fail(f"shard_map: expected a function, got {type(f).__name__}")
    if mesh is None:
        fail("shard_map needs mesh=", "mesh = astjax.make_mesh((n,), ('i',))")
    if not isinstance(mesh, Mesh):
        fail(f"shard_map: mesh must be an astjax.sharding.Mesh, got {type(mesh).__name__}")
    if in_specs is None or out_specs is None:
        fail("shard_map needs in_specs= and out_specs=")
    manual = _manual_axes(axis_names, mesh, in_specs, out_specs)
    check = True if check_vma is None and check_rep is None else bool(
        check_vma if check_vma is not None else check_rep)
    params = _param_names(f)
    specs = in_specs if isinstance(in_specs, PartitionSpec) or in_specs is None else \
        _specs_tuple(in_specs, len(params))
    plan = ShardPlan(f, mesh, specs, out_specs, check)
    plan.manual = manual
    plan.params = params
    plan.nargs = len(params) if params and _fixed_arity(f) else None
    _validate_specs(specs, mesh, "in_specs")
    _validate_specs(out_specs, mesh, "out_specs")
    return _as_function(plan, params, lambda *args: run(plan, args))


def _manual_axes(axis_names, mesh, in_specs, out_specs):
    """shard_map's ``axis_names``: the mesh axes the function is manual over (None:
    all).  The others stay automatic: specs may not split along them, so the function
    sees the whole extent there (every device along them computes the same block), and
    collectives over them are refused."""
    if axis_names is None:
        return None
    names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
    for a in names:
        if a not in mesh.axis_names:
            fail(f"shard_map: axis_names names {a!r}, which is not a mesh axis; the mesh "
                 f"axes are {mesh.axis_names}")
    manual = frozenset(names)
    if manual == set(mesh.axis_names):
        return None
    auto = tuple(a for a in mesh.axis_names if a not in manual)

    def walk(s, what):
        if isinstance(s, PartitionSpec):
            for a in s.mesh_axes():
                if a in auto:
                    fail(f"shard_map: {what} {s!r} splits along {a!r}, an automatic axis "
                         f"(axis_names={tuple(sorted(manual))})",
                         f"add {a!r} to axis_names, or leave it out of the spec")
        elif isinstance(s, (tuple, list)):
            for e in s:
                walk(e, what)
        elif isinstance(s, dict):
            for e in s.values():
                walk(e, what)
    walk(in_specs, "in_specs")
    walk(out_specs, "out_specs")
    return manual


def _validate_specs(specs, mesh, what):
    def walk(s):
        if isinstance(s, PartitionSpec):
            axes = s.mesh_axes()
            for a in axes:
                if a not in mesh.axis_names:
                    fail(f"shard_map: unknown axis name {a!r} in {what} {s!r}; the mesh "
                         f"axes are {mesh.axis_names}",
                         f"name axes of the mesh: {', '.join(map(repr, mesh.axis_names))}")
            if len(set(axes)) != len(axes):
                fail(f"shard_map: {what} {s!r} uses a mesh axis twice",
                     "split each dimension over different mesh axes (a tuple entry "
                     "splits one dimension over several)")
        elif isinstance(s, (tuple, list)):
            for e in s:
                walk(e)
        elif isinstance(s, dict):
            for e in s.values():
                walk(e)
        elif s is not None:
            fail(f"shard_map: {what} must be PartitionSpecs (P(...)) in a pytree, got "
                 f"{s!r}", "write P('axis') for a split dimension, P() for a replicated "
                 "value")
    walk(specs)


# ---------------------------------------------------------------- pmap

def pmap(fun=None, axis_name=None, *, in_axes=0, out_axes=0, static_broadcasted_argnums=(),
         devices=None, axis_size=None):
    """``fun`` mapped over the leading axis (``in_axes``) of its arguments, one slice per
    device, with collectives over ``axis_name`` (JAX's ``pmap``).  The mapped axis's
    size must equal the number of devices used."""
    if fun is None:
        return functools.partial(pmap, axis_name=axis_name, in_axes=in_axes,
                                 out_axes=out_axes,
                                 static_broadcasted_argnums=static_broadcasted_argnums,
                                 devices=devices, axis_size=axis_size)
    if not callable(fun):
        fail(f"pmap: expected a function, got {type(fun).__name__}")
    static = (static_broadcasted_argnums,) if isinstance(static_broadcasted_argnums, int) \
        else tuple(static_broadcasted_argnums)
    name = axis_name if axis_name is not None else f"_pmap{next(_COUNTER)}"
    p = Pmapped(fun, name, in_axes, out_axes, static, devices)
    mapped = _as_function(p._plan, p.dyn_names, p.__call__, fun)
    if static:
        mapped._astjax_eval_shape = functools.partial(p.eval_shape, mapped)
        made = {}

        def generated():
            if "fn" not in made:
                made["fn"] = p.static_wrapper()
            return made["fn"]
        mapped._astjax_generated = generated
    return mapped


def static_plan(plan, statics):
    """The plan of a pmap with ``static_broadcasted_argnums`` for these static values:
    one per value (cached), as JAX compiles one per value; transformations see
    ``sh.shard_map_call(sh.static_plan(plan, (k,)), (v,))``."""
    pm = plan.pmapped
    key = tuple(statics)
    try:
        hash(key)
    except TypeError:
        fail(f"pmap({plan.name}): static_broadcasted_argnums values must be hashable, got "
             f"{', '.join(type(s).__name__ for s in key)}",
             "pass a tuple instead of a list or array (JAX requires this too)")
    typed = tuple((type(v), v) for v in key)      # 1, 1.0 and True: three plans
    found = pm.specialized.get(typed)
    if found is None:
        fun = pm.bound(key)
        sub = Pmapped(fun, pm.axis_name, pm._axes_for(len(pm.dyn_names)), pm.out_axes, (),
                      pm._plan.mesh.devs)
        found = sub._plan
        found.kind, found.name = plan.kind, plan.name
        found.local_only = getattr(plan, "local_only", False)
        pm.specialized[typed] = found
    return found


def static_plan_batched(plan, statics):
    """vmap reached a pmap's static argument with a value per example: refused (JAX
    cannot hash a traced value either)."""
    fail(f"pmap({plan.name}): a static_broadcasted_argnums argument differs per example "
         "of a vmap", "static arguments must be the same Python value for the whole "
         "batch: vmap over the other arguments only")


def _moved(x, ax, to):
    xp = array_module(x)            # CuPy arrays stay on their device
    return xp.moveaxis(xp.asarray(x), ax, to)


class _PmapMesh:
    """pmap's 1-d mesh, as large as the mapped axis of the call's arguments."""

    def __init__(self, axis_name, devs):
        self.axis_name, self.devs = axis_name, devs
        self.mapped = None

    def __call__(self, args):
        mapped = self.mapped or (0,) * len(args)
        sizes = sorted({np.shape(v)[m] for a, m in zip(args, mapped) if m is not None
                        for v in tree_flatten(a)[0] if np.ndim(v) > m})
        if len(sizes) != 1:
            fail(f"pmap: the mapped axes have sizes {sizes}; they must all be the number "
                 "of devices to map over")
        n = sizes[0]
        if self.devs == "virtual":          # vmap(axis_name=): one thread per example
            from astjax.sharding.mesh import Device
            devs = [Device(i) for i in range(n)]
        else:
            devs = list(self.devs) if self.devs is not None else devices()
        if n > len(devs):
            fail(f"pmap: the mapped axis has size {n} but there are {len(devs)} devices",
                 "set ASTJAX_NUM_CPU_DEVICES, run under mpiexec -n N, or map over fewer")
        arr = np.empty(n, dtype=object)
        arr[:] = devs[:n]
        return Mesh(arr, (self.axis_name,))


class Pmapped:
    """A pmap'ed function: a shard_map over a 1-d mesh whose per-device function is
    ``vmap(fun)`` on the device's slice (a leading axis of size 1), so grad, jvp and
    vmap of it come from the same rules as shard_map's."""

    def __init__(self, fun, axis_name, in_axes, out_axes, static, devs):
        from astjax.batch_api import vmap
        self.in_axes, self.out_axes, self.static = in_axes, out_axes, static
        names = _param_names(fun)
        self.static_names = [names[i] for i in static]
        self.dyn_names = [n for i, n in enumerate(names) if i not in static]
        self._fun, self._vmap = fun, vmap
        plan = ShardPlan(fun, None, None, PartitionSpec(axis_name), check_vma=False,
                         kind="pmap", name=getattr(fun, "__name__", "f"))
        plan.mesh = _PmapMesh(axis_name, devs)
        plan.in_specs = None
        plan.nargs = len(self.dyn_names)
        self.axis_name = axis_name
        self._plan = plan
        self.specialized = {}               # static values -> their plan (static_plan)
        self._bound_funs = {}
        plan.pmapped = self                 # astjax gen writes its per-device code
        plan.shapes_of = self._shapes_of
        self._bind(self._axes_for(len(self.dyn_names)))

    def _axes_for(self, n):
        ax = self.in_axes
        if isinstance(ax, (list, tuple)):
            if len(ax) != n + len(self.static):
                fail(f"pmap: in_axes has {len(ax)} entries for {n + len(self.static)} "
                     "arguments")
            return tuple(a for i, a in enumerate(ax) if i not in self.static)
        return (ax,) * n

    def _spec(self, ax):
        return PartitionSpec(*([None] * ax), self.axis_name)

    def _bind(self, axes):
        for a in axes:
            if a is not None and (not isinstance(a, int) or a < 0):
                fail(f"{self._plan.kind}: in_axes entries must be None or non-negative "
                     f"ints here, got {a!r}", "count the mapped axis from the front")
        oax = self.out_axes
        if oax is not None and (not isinstance(oax, int) or oax < 0):
            fail(f"{self._plan.kind}: out_axes must be None or a non-negative int, got "
                 f"{oax!r}")
        fun = self._fun
        self._bound = (fun, tuple(axes), oax)
        self._plan.fun = self._vmap(fun, in_axes=axes, out_axes=oax)
        # eval_shape of the shard reads the vmapped code (its collectives are the
        # batched ones, abstract here), not vmap's per-example shortcut
        vars(self._plan.fun).pop("_astjax_eval_shape", None)
        self._plan.mesh.mapped = tuple(axes)
        self._plan.in_specs = tuple(self._spec(a) if a is not None else PartitionSpec()
                                    for a in axes)
        self._plan.out_specs = self._spec(oax) if oax is not None else PartitionSpec()

    def eval_shape(self, mapped, *args, **kwargs):
        """eval_shape of the pmap'ed function: statics bound, the rest abstract."""
        from astjax.shapes import eval_shape
        if kwargs:
            fail("pmap: pass the arguments positionally")
        statics = [args[i] for i in self.static]
        dyn = tuple(a for i, a in enumerate(args) if i not in self.static)
        plan = static_plan(self._plan, statics)
        wrapper = _generated_wrapper(plan, self.dyn_names, plan.name)
        return eval_shape(wrapper, *dyn)

    def bound(self, statics):
        """``fun`` with the static arguments bound by position (generated source, which
        the transformations read; a keyword partial would clash with a positional
        argument when a static one comes first)."""
        import linecache
        import re
        typed = tuple((type(v), v) for v in statics)
        found = self._bound_funs.get(typed)
        if found is not None:
            return found
        names = _param_names(self._fun)
        it = iter(self.dyn_names)
        call = ", ".join(f"static{self.static.index(i)}" if i in self.static else next(it)
                         for i in range(len(names)))
        fname = re.sub(r"\W", "_", f"{self._plan.name}_static").strip("_") or "static"
        src = (f"def {fname}({', '.join(self.dyn_names)}):\n"
               f"    return fun({call})\n")
        filename = f"<astjax-pmap-bound-{next(_COUNTER)}>"
        linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
        namespace = {"fun": self._fun, **{f"static{j}": v for j, v in enumerate(statics)}}
        exec(compile(src, filename, "exec"), namespace)  # noqa: S102  (our own code)
        found = self._bound_funs[typed] = namespace[fname]
        return found

    def static_wrapper(self):
        """The Python the transformations read for a pmap with static arguments: the
        plan for the static values (``static_plan``), then one call of it on the
        others."""
        import linecache
        import re
        plan = self._plan
        names = _param_names(self._fun)
        fname = re.sub(r"\W", "_", f"{plan.name}_pmap").strip("_") or "pmapped"
        statics = ", ".join(names[i] for i in self.static)
        dyn = ", ".join(self.dyn_names)
        src = (f"def {fname}({', '.join(names)}):\n"
               f"    plan = sh.static_plan({fname}_plan, ({statics},))\n"
               f"    out = sh.shard_map_call(plan, ({dyn},))\n"
               f"    return out\n")
        filename = f"<astjax-pmap-static-{next(_COUNTER)}>"
        linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
        namespace = {"sh": sh, f"{fname}_plan": plan}
        exec(compile(src, filename, "exec"), namespace)  # noqa: S102  (our own code)
        return namespace[fname]

    def _shapes_of(self, blocks):
        """eval_shape of one device's call: ``fun`` on one example (the block without
        its mapped axis of 1), the output given back its mapped axis of 1."""
        from astjax.shapes import ShapeDtypeStruct, eval_shape
        from astjax.tree_util import tree_map
        fun, axes, oax = self._bound

        def drop(a, ax):
            if ax is None:
                return a
            return tree_map(lambda v: ShapeDtypeStruct(v.shape[:ax] + v.shape[ax + 1:],
                                                       v.dtype), a)
        out = eval_shape(fun, *[drop(a, ax) for a, ax in zip(blocks, axes)])
        if oax is None:
            return out
        return tree_map(lambda v: ShapeDtypeStruct(v.shape[:oax] + (1,) + v.shape[oax:],
                                                   v.dtype), out)

    def __call__(self, *args):
        statics = [args[i] for i in self.static]
        dyn = tuple(a for i, a in enumerate(args) if i not in self.static)
        if statics:             # one plan per static value, as for the transformations
            return run(static_plan(self._plan, statics), dyn)
        return run(self._plan, dyn)


# ------------------------------------------------- the primitive and its derived plans

def shard_map_call(plan, args):
    """The primitive every shard_map'ed function is, for the transformations."""
    return run(plan, tuple(args))


_TRANSPOSED = {"copy": "sum", "share": "mean", "one": "share", "mean": "share",
               "sum": "copy"}


def _transposed(modes):
    if isinstance(modes, str):
        return _TRANSPOSED[modes]
    if isinstance(modes, dict):
        return {k: _transposed(v) for k, v in modes.items()}
    return tuple(_transposed(m) for m in modes)


def _in_specs_for(plan, nargs):
    specs = plan.in_specs
    if isinstance(specs, PartitionSpec) or specs is None:
        return tuple([specs] * nargs)
    return specs


def _derived_source(plan, kind, body):
    """A generated per-shard function (real source, so astjax transforms it again:
    derivatives of any order through a shard_map)."""
    import linecache
    import re
    k = plan.nargs
    names = [f"a{i}" for i in range(k)]
    unpack = f"    {', '.join(names)}, = args\n" if k else ""
    fname = re.sub(r"\W", "_", f"{plan.name}_{kind}")
    src = body.format(fname=fname, unpack=unpack, call=", ".join(names),
                      dnames=", ".join(f"d{i}" for i in range(k)),
                      dinst="".join(f"    d{i} = rt.instantiate(d{i}, a{i})\n"
                                    for i in range(k)),
                      dcall=", ".join(names + [f"d{i}" for i in range(k)]))
    filename = f"<astjax-{plan.kind}-{kind}-{next(_COUNTER)}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    from astjax import runtime as rt
    from astjax.api import grad
    from astjax.forward_api import jvp_function
    from astjax.tree_util import tree_leaves
    namespace = {"np": np, "rt": rt, "grad": grad, "tree_leaves": tree_leaves,
                 "fun": plan.fun}
    if kind == "jvp":
        namespace["fun_jvp"] = jvp_function(plan.fun, range(k), ())
    exec(compile(src, filename, "exec"), namespace)  # noqa: S102  (our own generated code)
    if kind == "vjp":
        # the driver's own per-device pullback (exact, whatever check_vma): reverse
        # mode inlined from it needs no guard; a gradient the user's per-shard
        # function takes, inlined into it, keeps its guard (collectives.py)
        namespace[f"{fname}_pair"]._astjax_driver = True
    return namespace[fname]


_VJP_SOURCE = """def {fname}_pair(args, g):
{unpack}    out = fun({call})
    g = rt.instantiate(g, out)
    total = 0.0
    for o, c in zip(tree_leaves(out), tree_leaves(g)):
        total = total + np.sum(o * c)
    return total


def {fname}(args, g):
    cts = grad({fname}_pair, argnums=0, allow_int=True)(args, g)
    return cts
"""

_JVP_SOURCE = """def {fname}(args, dargs):
{unpack}    dargs = rt.instantiate(dargs, args)
    {dnames}, = dargs
{dinst}    both = fun_jvp({dcall})
    return both[1]
"""


def _derived_plan(plan, kind, fun, in_specs_fn, out_specs, in_modes, out_modes, nargs):
    new = ShardPlan(fun, plan.mesh, None, out_specs, check_vma=False,
                    kind=plan.kind + "_" + kind, name=plan.name + "_" + kind)
    new.in_specs_fn = in_specs_fn
    new.in_modes, new.out_modes = in_modes, out_modes
    new.nargs = nargs
    new.derived = True
    new.parent = plan
    new.local_only = getattr(plan, "local_only", False)
    return new


def _need_nargs(plan, what):
    if plan.nargs is None:
        fail(f"{what} of {plan.kind}({plan.name}): its per-shard function takes *args, so "
             "astjax cannot write its derivative code", "give the function named "
             "parameters")


def vjp_plan(plan):
    """The shard_map of ``plan``'s pullback, per shard: cotangents split like the
    outputs (a replicated output's shared among its copies), the per-shard pullback
    (generated code: ``grad`` of <outputs, cotangents>), and cotangents of replicated
    inputs summed over their copies: the exact transposes of the driver's copies."""
    found = plan.__dict__.get("_vjp")
    if found is None:
        _need_nargs(plan, "the derivative")
        fun = _derived_source(plan, "vjp", _VJP_SOURCE)
        found = _derived_plan(
            plan, "vjp", fun,
            lambda args: (_plan_in_specs(plan, args[0]), _plan_out_specs(plan, args[0])),
            None, (plan.in_modes, _transposed(plan.out_modes)),
            _transposed(plan.in_modes), 2)
        found.out_specs_fn = lambda args: _plan_in_specs(plan, args[0])
        plan.__dict__["_vjp"] = found
    return found


def jvp_plan(plan):
    """The shard_map of ``plan``'s tangent map: tangents split like the inputs, joined
    like the outputs; per shard, generated jvp code (zero tangents instantiated)."""
    found = plan.__dict__.get("_jvp")
    if found is None:
        _need_nargs(plan, "the tangent")
        fun = _derived_source(plan, "jvp", _JVP_SOURCE)
        found = _derived_plan(
            plan, "jvp", fun,
            lambda args: (_plan_in_specs(plan, args[0]),) * 2,
            None, (plan.in_modes, plan.in_modes), plan.out_modes, 2)
        found.out_specs_fn = lambda args: _plan_out_specs(plan, args[0])
        plan.__dict__["_jvp"] = found
    return found


_BATCH_SOURCE = """def {fname}_size(args):
    size = 1
    for v in tree_leaves(args):
        if np.ndim(v):
            size = max(size, np.shape(v)[-1])
    return size


def {fname}_lanes(v, size):
    if np.ndim(v) and np.shape(v)[-1] == 1:
        return np.broadcast_to(v, np.shape(v)[:-1] + (size,))
    return v


def {fname}(args):
    size = {fname}_size(args)
    lanes = tree_map(lambda v: {fname}_lanes(v, size), args)
{unpack}    out = fun_batched({call})
    return out
"""


def batch_plan(plan):
    """The shard_map whose per-shard function is ``plan``'s vmapped over a trailing
    batch axis of every input (the batching rule's layout; an unbatched input, lifted
    to a trailing axis of 1, broadcast to the batch).  Generated source, so that
    ``astjax gen`` writes it and the transformations read it again."""
    found = plan.__dict__.get("_batch")
    if found is not None:
        return found
    import linecache
    import re
    from astjax.batch_api import vmap
    from astjax.tree_util import tree_leaves, tree_map
    k = plan.nargs
    names = [f"a{i}" for i in range(k or 0)]
    fname = re.sub(r"\W", "_", f"{plan.name}_batch")
    src = _BATCH_SOURCE.format(               # (a per-shard f(*args): called with *)
        fname=fname, call=", ".join(names) if k is not None else "*lanes",
        unpack=f"    {', '.join(names)}, = lanes\n" if k else "")
    filename = f"<astjax-{plan.kind}-batch-{next(_COUNTER)}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    namespace = {"np": np, "tree_leaves": tree_leaves, "tree_map": tree_map,
                 "fun_batched": vmap(plan.fun, in_axes=-1, out_axes=-1)}
    exec(compile(src, filename, "exec"), namespace)  # noqa: S102  (our own generated code)
    new = _derived_plan(plan, "batch", namespace[fname],
                        lambda args: (_plan_in_specs(plan, args[0]),), None,
                        (plan.in_modes,), plan.out_modes, 1)
    new.check_vma = plan.check_vma
    new.out_specs_fn = lambda args: _plan_out_specs(plan, args[0])
    plan.__dict__["_batch"] = new
    return new


_PMAP_SHARD_SOURCE = """def {fname}({params}):
{squeeze}    out = fun({call})
{expand}    return out
"""


def per_device_plan(plan):
    """A pmap (or named vmap) plan whose per-device function is ``fun`` on the device's
    example, written out: the mapped axis (of size 1 on a device) dropped from the
    arguments and put back on the outputs, instead of ``vmap(fun)`` over it.  The
    same numbers; generated source that ``astjax gen`` writes without vmap's layout,
    and whose derivatives (``vjp_plan``...) are derived from it."""
    found = plan.__dict__.get("_per_device")
    if found is not None:
        return found
    import linecache
    import re
    from astjax.tree_util import tree_map
    pm = plan.pmapped
    if pm.static:
        fail(f"{plan.kind}({plan.name}) has static_broadcasted_argnums: astjax gen does "
             "not write it", "bind the static arguments with functools.partial first")
    fun, axes, oax = pm._bound
    names = [f"a{i}" for i in range(len(axes))]
    squeeze = "".join(
        f"    b{i} = tree_map(lambda v: np.squeeze(v, axis={ax}), a{i})\n"
        if ax is not None else f"    b{i} = a{i}\n" for i, ax in enumerate(axes))
    expand = (f"    out = tree_map(lambda v: np.expand_dims(v, {oax}), out)\n"
              if oax is not None else "")
    fname = re.sub(r"\W", "_", f"{plan.name}_per_device").strip("_")
    src = _PMAP_SHARD_SOURCE.format(fname=fname, params=", ".join(names), squeeze=squeeze,
                                    call=", ".join(f"b{i}" for i in range(len(axes))),
                                    expand=expand)
    filename = f"<astjax-{plan.kind}-device-{next(_COUNTER)}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    namespace = {"np": np, "tree_map": tree_map, "fun": fun}
    exec(compile(src, filename, "exec"), namespace)  # noqa: S102  (our own generated code)
    found = ShardPlan(namespace[fname], plan.mesh, plan.in_specs, plan.out_specs,
                      check_vma=plan.check_vma, kind=plan.kind, name=plan.name)
    found.nargs = len(axes)
    found.local_only = getattr(plan, "local_only", False)
    found.pmapped = pm
    plan.__dict__["_per_device"] = found
    return found


def named_vmap(fun, in_axes=0, out_axes=0, axis_size=None, axis_name=None):
    """``vmap(fun, axis_name=...)``: collectives over ``axis_name`` act over the batch.

    Each example runs as a virtual device of this process (a thread, whatever the
    device count), so every collective has its exact meaning; grad, jvp and vmap of
    it come from the shard_map rules.  Simple, exact, and meant for modest batches:
    a batch of B runs B threads."""
    if axis_size is not None:
        fail("vmap: axis_size with axis_name is not supported")
    p = Pmapped(fun, axis_name, in_axes, out_axes, (), "virtual")
    p._plan.kind = "vmap"
    p._plan.local_only = True
    return _as_function(p._plan, p.dyn_names, p.__call__, fun)


# built at generation time when written inside a transformed function (frontend/nested.py)
shard_map._astjax_static_constructor = "function"
pmap._astjax_static_constructor = "function"

sh.register_driver(sys.modules[__name__])
