"""Running the shards: every mesh position on a thread, or this process's under MPI.

Free of plans and transformations (NumPy, threads, the communicators, the spec
helpers), so that ``astjax gen`` copies it into a standalone module: mapping.py's
driver and a generated sharded module (``run_layout``) run the same code.
"""
from __future__ import annotations

import os
import threading

import numpy as np

from astjax.device import is_device_array
from astjax.sharding.collectives import ShardContext, entered
from astjax.sharding.comm import LocalComm, LocalWorld, MPIComm, _Groups
from astjax.sharding.errors import fail
from astjax.sharding.mesh import Device, Mesh, PartitionSpec
from astjax.sharding.specs import assemble, leaf_specs, split
from astjax.tree_util import tree_flatten, tree_map, tree_unflatten

_MPI_COMMS: dict = {}

# variables the launchers (MPICH/Hydra, Open MPI, Slurm's PMI) set in every process
LAUNCHED = ("PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS",
            "PMIX_RANK")


def groups_of(mesh):
    """Position -> its _Groups (cached)."""
    cache = {}

    def get(pos):
        g = cache.get(pos)
        if g is None:
            g = cache[pos] = _Groups(mesh.shape, pos)
        return g
    return get


def context(comm, mesh, sizes, check_vma, kind):
    """A shard's context: collectives over the manual axes ``sizes`` only."""
    auto = tuple(a for a in mesh.axis_names if a not in sizes)
    return ShardContext(comm, sizes, check_vma=check_vma, kind=kind,
                           extra={"auto": auto})


def nested_world(outer, mesh, what):
    """Inside a shard of another local run (``outer``: the calling thread's context),
    the world of this run: every enclosing thread's k-th nested run shares one
    LocalWorld of (enclosing positions x this mesh's), so a collective may name the
    enclosing axes, this mesh's, or a tuple of both (JAX's ``vmap(shard_map(...),
    axis_name=)``, a named vmap inside a shard_map or another named vmap).

    Returns (world, mesh shape of the product, first position of this thread's
    block, the axis sizes the shards see, the automatic axes).  An enclosing axis
    named like one of this mesh's is shadowed (the innermost name wins, as in JAX)."""
    oc = outer.comm
    ow = oc.world
    count = outer.extra.get("nested", 0)       # the context is this thread's own
    outer.extra["nested"] = count + 1
    sig = (what, tuple(mesh.shape.items()))
    with ow.lock:
        entry = ow.nested.get(count)
        if entry is None:
            entry = ow.nested[count] = [LocalWorld(ow.n * mesh.size, ow.timeout), ow.n, sig]
        entry[1] -= 1
        if entry[1] == 0:
            del ow.nested[count]
    if entry[2] != sig:             # the enclosing devices ran different nested maps
        from astjax.sharding.errors import ShardingError, user_location
        err = ShardingError(
            f"the devices of an enclosing map reached different nested maps at once: "
            f"{what} over {dict(sig[1])} here, {entry[2][0]} over {dict(entry[2][1])} on "
            "another", user_location(),
            "every device (every example of a named vmap) must call the same maps in the "
            "same order")
        with entry[0].lock:
            if entry[0].first_error is None:
                entry[0].first_error = err
        entry[0].abort()
        raise err
    shape = {}
    for a, n in zip(oc.names, oc.shape):
        shape[a if a not in mesh.shape else f"{a} (shadowed {count})"] = n
    for a, n in mesh.shape.items():
        shape[a] = n
    sizes = {a: n for a, n in outer.axis_sizes.items() if a not in mesh.shape}
    auto = tuple(a for a in outer.extra.get("auto", ()) if a not in mesh.shape)
    return entry[0], shape, oc.position * mesh.size, sizes, auto


def run_threads(fun, mesh, shard_args, sizes, check_vma, kind, what, limit=None,
                engine="local", gpus=None, outer=None, hidden=()):
    """``fun(*shard_args[pos])`` for every mesh position, each on a thread with a
    LocalComm (``engine="nccl"``: an NcclComm, position p on GPU ``gpus[p]``); the
    outputs by position.  A failing shard's error is raised (the first by position);
    shards left waiting in a collective fail with a message.  ``outer``: the context
    of the local shard this run is called from (see nested_world)."""
    n = mesh.size
    outs = [None] * n
    errors, broken = [], []
    from astjax.sharding.errors import user_location
    where = user_location()             # errors raised in the shards name this line
    if outer is not None:
        lw, shape, base, outer_sizes, outer_auto = nested_world(outer, mesh, what)
        hidden = tuple(outer.extra.get("hidden", ())) + tuple(hidden)
    else:
        lw, shape, base, outer_sizes, outer_auto = LocalWorld(n), mesh.shape, 0, {}, ()
    if engine == "nccl":
        from astjax.sharding.nccl import LocalCliques, NcclComm, device_scope
        cliques = LocalCliques(mesh.shape, gpus if gpus is not None else range(n))
        xp = np
        if gpus is not None:
            import cupy as xp

    def make_comm(pos):
        if engine == "nccl":
            return NcclComm(cliques, mesh.shape, pos, xp)
        return LocalComm(lw, shape, base + pos)

    def shard(pos):
        comm = make_comm(pos)
        try:
            if engine == "nccl":
                scope = device_scope(gpus[pos] if gpus is not None else None)
            else:
                import contextlib
                scope = contextlib.nullcontext()
            ctx = context(comm, mesh, sizes, check_vma, kind)
            ctx.extra["where"] = where
            ctx.extra["hidden"] = hidden
            if outer is not None:
                ctx.axis_sizes = {**outer_sizes, **sizes}
                ctx.extra["auto"] = outer_auto + ctx.extra["auto"]
            with scope, entered(ctx):
                outs[pos] = fun(*shard_args[pos])
        except threading.BrokenBarrierError:
            broken.append(pos)        # another shard failed first (its error is reported)
            lw.abort()                # or the wait timed out: the devices diverged
        except BaseException as e:   # noqa: BLE001  (re-raised below, in the caller)
            errors.append((pos, e))
            with lw.lock:
                if lw.first_error is None:
                    lw.first_error = e
            lw.abort()

    if n == 1:
        shard(0)
    else:
        threads = [threading.Thread(target=shard, args=(p,), name=f"astjax-shard-{p}")
                   for p in range(n)]
        if limit is not None:
            limit.__enter__()
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            if limit is not None:
                limit.__exit__(None, None, None)
    if errors:
        raise sorted(errors, key=lambda e: e[0])[0][1]
    if broken and lw.first_error is not None:   # a shard of another enclosing position
        raise lw.first_error
    if broken:
        fail(f"{what}: devices {sorted(broken)} waited in a collective that the others never "
             f"reached (ASTJAX_COLLECTIVE_TIMEOUT={lw.timeout:g} s)",
             "every device must call the same collectives in the same order (a "
             "collective under a branch or loop that differs per device does not)")
    return outs


def run_mpi(fun, mesh, world, pos, mine, sizes, check_vma, kind, engine="mpi"):
    """This process runs position ``pos`` on its blocks ``mine``; returns every
    position's outputs (gathered: each process gets the global result).
    ``engine="nccl"``: the collectives through NCCL (ids broadcast over MPI)."""
    key = (id(world), tuple(mesh.shape.items()), pos)
    comm = _MPI_COMMS.get(key)
    if comm is None:      # one per mesh: its sub-communicators (Comm.Split) are reused
        comm = _MPI_COMMS[key] = MPIComm(world, mesh.shape, pos)
    checker = comm
    if engine == "nccl":
        from astjax.sharding.nccl import MPICliques, NcclComm
        found = _MPI_COMMS.get(key + ("nccl",))
        if found is None:
            import cupy
            found = _MPI_COMMS[key + ("nccl",)] = NcclComm(MPICliques(comm), mesh.shape,
                                                           pos, cupy)
        comm = found
    try:
        with entered(context(comm, mesh, sizes, check_vma, kind)):
            out = fun(*mine)
    except BaseException as e:
        announce_failure(comm, e)
        raise
    leaves_out, out_tdef = tree_flatten(out)
    leaves_out = [v.get() if hasattr(v, "get") and not isinstance(v, np.ndarray) else v
                  for v in leaves_out]                      # device -> host for MPI
    checker.check("end", (), ", ".join(f"{np.asarray(v).dtype} {np.shape(v)}"
                                       for v in leaves_out) + f" in {out_tdef}")
    order = [int(np.flatnonzero(mesh.device_ids().ravel() == r)[0])
             for r in range(world.size)]
    gathered = []
    for leaf in leaves_out:
        a = np.asarray(order="C", a=np.asarray(leaf))
        buf = np.empty((world.size,) + a.shape, a.dtype)
        world.Allgather(a, buf)
        by_pos = [None] * world.size
        for r, p in enumerate(order):
            by_pos[p] = buf[r]
        gathered.append(by_pos)
    return [tree_unflatten(out_tdef, [g[p] for g in gathered]) for p in range(world.size)]


def announce_failure(comm, e):
    """A process whose shard failed tells the others, which are waiting in (or will
    reach) a collective's header exchange: they fail naming this error, not hang."""
    from astjax.sharding.errors import ShardingError
    if getattr(e, "_astjax_synchronized", False) or not comm.checking:
        return
    try:
        comm.check("error", (), f"{type(e).__name__}: {e}".splitlines()[0][:300])
    except ShardingError:
        pass            # the others differ from us, of course: raise our own error


def engine_for(leaves, mesh, what):
    """("nccl", GPU ids) when the arguments are CuPy arrays (position p on GPU p);
    ("nccl", None) when ASTJAX_SHARD_ENGINE=nccl asks for NCCL's logic on host arrays
    (the tests' fake cupy.cuda.nccl); else the threads' shared memory ("local")."""
    from astjax.sharding.nccl import gpu_devices, is_cupy
    if any(is_cupy(x) for x in leaves):
        gpus = gpu_devices()
        if mesh.size > len(gpus):
            fail(f"{what}: the arguments are CuPy arrays and the mesh has {mesh.size} "
                 f"devices, but {len(gpus)} GPUs are visible",
                 "one GPU per mesh position: make the mesh smaller, or run one process "
                 "per GPU under mpiexec")
        return "nccl", gpus[:mesh.size]
    if os.environ.get("ASTJAX_SHARD_ENGINE", "local") == "nccl":
        return "nccl", None
    return "local", None


def placed(per_leaf, gpus):
    """Each position's blocks on its GPU (``per_leaf[i][pos]``); as they are without."""
    if gpus is None:
        return per_leaf
    from astjax.sharding.nccl import to_device
    return [[to_device(b, gpus[pos]) for pos, b in enumerate(p)] for p in per_leaf]


def gathered(outs, gpus):
    """The positions' outputs on the current GPU, to be joined there."""
    if gpus is None:
        return outs
    import cupy
    from astjax.sharding.nccl import to_device
    here = cupy.cuda.Device().id
    return [tree_map(lambda v: to_device(v, here), o) for o in outs]


# ------------------------------------------------- how replicated leaves cross the driver

def leaf_modes(modes, tree, default):
    """One mode per leaf of ``tree`` (``modes``: a pytree prefix of strings).

    copy: a replicated input goes whole to every device; share: each copy gets its
    share (value / copies); one: of a replicated output's copies keep one (they are
    equal); mean / sum: average / add the copies.  copy <-> sum and share <-> mean
    (one ~ mean) are each other's transposes."""
    out = []

    def walk(m, t):
        if isinstance(m, str) or m is None:
            out.extend([m or default] * len(tree_flatten(t)[0]))
        elif isinstance(m, (tuple, list)) and isinstance(t, (tuple, list)) and \
                len(m) == len(t):
            for a, b in zip(m, t):
                walk(a, b)
        elif isinstance(m, dict) and isinstance(t, dict):
            for k in sorted(t, key=repr):
                walk(m.get(k), t[k])
        else:
            out.extend([default] * len(tree_flatten(t)[0]))
    walk(modes, tree)
    return out


def shared(x, spec, mesh):
    """A replicated input's share: its copies (one per device holding it) add up to it."""
    named = set(spec.mesh_axes())
    n = int(np.prod([k for a, k in mesh.shape.items() if a not in named], dtype=int))
    if n <= 1:
        return x
    return (x if is_device_array(x) else np.asarray(x)) / n


# ------------------------------------------------------ a layout: what `astjax gen` writes

def mpi_world():
    """MPI's COMM_WORLD when launched by mpiexec with more than one process, else None."""
    if not any(v in os.environ for v in LAUNCHED):
        return None
    try:
        from mpi4py import MPI
    except ImportError:
        return None
    world = MPI.COMM_WORLD
    return world if world.Get_size() > 1 else None


def _spec(entry):
    """A PartitionSpec from its literal (a tuple of names, tuples and None)."""
    if entry is None or isinstance(entry, PartitionSpec):
        return entry
    if isinstance(entry, dict):
        return {k: _spec(v) for k, v in entry.items()}
    if isinstance(entry, list):
        return [_spec(v) for v in entry]
    if isinstance(entry, tuple) and entry and entry[0] == "P":
        return PartitionSpec(*entry[1:])
    return tuple(_spec(v) for v in entry)


def _layout_mesh(layout, args, what):
    """The mesh a layout names: its sizes, or for a pmap / named vmap the size of the
    mapped axis of the original call's arguments (``sized_by``: (depth, axes): the call
    is ``args[0]`` ``depth`` times in, a derivative's arguments wrapping the call's)."""
    names = tuple(a for a, _ in layout["mesh"])
    shape = [n for _, n in layout["mesh"]]
    if any(n is None for n in shape):
        depth, mapped = layout["sized_by"]
        for _ in range(depth):
            args = args[0]
        sizes = sorted({np.shape(v)[m] for a, m in zip(args, mapped) if m is not None
                        for v in tree_flatten(a)[0] if np.ndim(v) > m})
        if len(sizes) != 1:
            fail(f"{what}: the mapped axes have sizes {sizes}; they must all be the "
                 "number of devices to map over")
        shape = [sizes[0] if n is None else n for n in shape]
    return names, tuple(int(n) for n in shape)


def run_layout(fun, layout, args):
    """A generated sharded module's entry: ``fun`` (the per-shard code) on the mesh
    ``layout`` describes (``mesh``: ((axis, size), ...), a size None for a pmap's axis,
    sized by the arguments; ``in_specs``/``out_specs``: spec literals, ("P", ...) each;
    ``in_modes``/``out_modes``: how replicated leaves cross (see leaf_modes);
    ``manual``: the manual axes; ``check_vma``; ``local_only``: a named vmap's virtual
    devices), on threads, or one shard per process under ``mpiexec -n <mesh size>``."""
    kind = layout.get("kind", "shard_map")
    what = f"{kind}({layout.get('name', 'f')})"
    names, shape = _layout_mesh(layout, args, what)
    size = int(np.prod(shape, dtype=int))
    world = None if layout.get("local_only") else mpi_world()
    if world is not None and world.Get_size() != size:
        fail(f"{what}: this module was generated for a mesh of {size} devices but "
             f"mpiexec started {world.Get_size()} processes",
             f"run it with mpiexec -n {size}, or without mpiexec (threads)")
    devs = np.empty(size, dtype=object)
    devs[:] = [Device(i, "mpi" if world is not None else "cpu", i) for i in range(size)]
    mesh = Mesh(devs.reshape(shape), names)
    manual = layout.get("manual")
    sizes = {a: n for a, n in mesh.shape.items() if manual is None or a in manual}
    in_specs = _spec(layout["in_specs"])
    out_specs = _spec(layout["out_specs"])
    groups = groups_of(mesh)
    leaves, tdef = tree_flatten(tuple(args))
    specs = leaf_specs(tuple(in_specs), tuple(args), f"{what}: in_specs")
    modes = leaf_modes(layout.get("in_modes", "copy"), tuple(args), "copy")
    leaves = [shared(x, s, mesh) if m == "share" else x
              for x, s, m in zip(leaves, specs, modes)]
    per_leaf = [split(x, s, mesh, groups, f"{what}: in_specs") for x, s in zip(leaves, specs)]
    check = bool(layout.get("check_vma", True))
    if world is not None:
        from astjax.sharding.nccl import contiguous, is_cupy
        pos = world.Get_rank()
        mine = tree_unflatten(tdef, [contiguous(p[pos]) for p in per_leaf])
        engine = "nccl" if any(is_cupy(x) for x in leaves) else "mpi"
        outs = run_mpi(fun, mesh, world, pos, mine, sizes, check, kind, engine)
    else:
        engine, gpus = engine_for(leaves, mesh, what)
        per_leaf = placed(per_leaf, gpus)
        shard_args = [tree_unflatten(tdef, [p[pos] for p in per_leaf])
                      for pos in range(size)]
        outs = gathered(run_threads(fun, mesh, shard_args, sizes, check, kind, what,
                                    engine=engine, gpus=gpus), gpus)
    out_leaves, out_tdef = tree_flatten(outs[0])
    ospecs = leaf_specs(out_specs, outs[0], f"{what}: out_specs")
    omodes = leaf_modes(layout.get("out_modes", "one"), outs[0], "one")
    per = [tree_flatten(o)[0] for o in outs]
    joined = [assemble([p[i] for p in per], s, mesh, groups, check, f"{what}: out_specs",
                       mode=m)
              for i, (s, m) in enumerate(zip(ospecs, omodes))]
    joined = [j[()] if j.ndim == 0 and not isinstance(leaf, np.ndarray) else j
              for j, leaf in zip(joined, out_leaves)]
    if world is not None and engine == "nccl":      # the results where the arguments were
        import cupy
        joined = [cupy.asarray(j) for j in joined]
    return tree_unflatten(out_tdef, joined)


class Plan:
    """A shard_map call as a generated module holds it: the per-shard code, its
    layout, and the plans of its derivatives written with it (``derived``: "vjp",
    "jvp" -> Plan), which the module's ``sh.vjp_plan(plan)`` calls look up."""

    def __init__(self, fun, layout, derived=None):
        self.fun, self.layout, self.derived = fun, layout, dict(derived or {})

    def __repr__(self):
        return f"<{self.layout.get('kind', 'shard_map')} plan of {self.layout.get('name')}>"


class LayoutDriver:
    """The shard_map driver of a generated module (``sh.register_driver`` takes it):
    runs Plans by their layouts; their derivatives' plans were written with them."""

    @staticmethod
    def run(plan, args):
        return run_layout(plan.fun, plan.layout, args)

    @staticmethod
    def _derived(plan, kind):
        found = plan.derived.get(kind)
        if found is None:
            fail(f"this module has no {kind} code for {plan!r}: astjax gen wrote the "
                 "derivatives its generated code calls, and this call needs another",
                 "report this as an astjax bug, with the command you ran")
        return found

    @staticmethod
    def vjp_plan(plan):
        return LayoutDriver._derived(plan, "vjp")

    @staticmethod
    def jvp_plan(plan):
        return LayoutDriver._derived(plan, "jvp")

    @staticmethod
    def batch_plan(plan):
        return LayoutDriver._derived(plan, "batch")

    @staticmethod
    def static_plan(plan, statics):
        """A pmap's plan for these static values: one was written per value the
        generated code calls it with (keyed by type and value, as astjax keys them)."""
        key = ("static", tuple((type(v).__name__, v) for v in statics))
        try:
            found = plan.derived.get(key)
        except TypeError:
            fail(f"{plan!r}: static_broadcasted_argnums values must be hashable, got "
                 f"{', '.join(type(v).__name__ for v in statics)}",
                 "pass a tuple instead of a list or array")
        if found is None:
            known = [tuple(v for _, v in k[1]) for k in plan.derived if k[0] == "static"]
            fail(f"{plan!r}: this module was generated for the static argument values "
                 f"{', '.join(map(repr, known))}, not {tuple(statics)!r}",
                 "generate a module for these values (astjax gen ... --args with them "
                 "as Python literals): one program per static value, as in JAX")
        return found
