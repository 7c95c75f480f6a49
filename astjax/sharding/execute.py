"""Running the shards: every mesh position on a thread, or this process's under MPI.

Free of plans and transformations (NumPy, threads, the communicators, the spec
helpers), so that ``astjax gen`` copies it into a standalone module: mapping.py's
driver and a generated sharded module (``run_layout``) run the same code.
"""
from __future__ import annotations

import os
import threading

import numpy as np

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


def run_threads(fun, mesh, shard_args, sizes, check_vma, kind, what, limit=None,
                engine="local", gpus=None):
    """``fun(*shard_args[pos])`` for every mesh position, each on a thread with a
    LocalComm (``engine="nccl"``: an NcclComm, position p on GPU ``gpus[p]``); the
    outputs by position.  A failing shard's error is raised (the first by position);
    shards left waiting in a collective fail with a message."""
    n = mesh.size
    outs = [None] * n
    errors, broken = [], []
    lw = LocalWorld(n)
    if engine == "nccl":
        from astjax.sharding.nccl import LocalCliques, NcclComm, device_scope
        cliques = LocalCliques(mesh.shape, gpus if gpus is not None else range(n))
        xp = np
        if gpus is not None:
            import cupy as xp

    def make_comm(pos):
        if engine == "nccl":
            return NcclComm(cliques, mesh.shape, pos, xp)
        return LocalComm(lw, mesh.shape, pos)

    def shard(pos):
        comm = make_comm(pos)
        try:
            if engine == "nccl":
                scope = device_scope(gpus[pos] if gpus is not None else None)
            else:
                import contextlib
                scope = contextlib.nullcontext()
            with scope, entered(context(comm, mesh, sizes, check_vma, kind)):
                outs[pos] = fun(*shard_args[pos])
        except threading.BrokenBarrierError:
            broken.append(pos)        # another shard failed first (its error is reported)
            lw.abort()                # or the wait timed out: the devices diverged
        except BaseException as e:   # noqa: BLE001  (re-raised below, in the caller)
            errors.append((pos, e))
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


def run_layout(fun, layout, args):
    """A generated sharded module's entry: ``fun`` (the per-shard code) on the mesh
    ``layout`` describes (``mesh``: ((axis, size), ...); ``in_specs``/``out_specs``:
    spec literals, ("P", ...) each; ``manual``: the manual axes; ``check_vma``), on
    threads, or one shard per process under ``mpiexec -n <mesh size>``."""
    names = tuple(a for a, _ in layout["mesh"])
    shape = tuple(int(n) for _, n in layout["mesh"])
    size = int(np.prod(shape, dtype=int))
    world = mpi_world()
    kind = layout.get("kind", "shard_map")
    what = f"{kind}({layout.get('name', 'f')})"
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
    per = [tree_flatten(o)[0] for o in outs]
    joined = [assemble([p[i] for p in per], s, mesh, groups, check, f"{what}: out_specs")
              for i, s in enumerate(ospecs)]
    joined = [j[()] if j.ndim == 0 and not isinstance(leaf, np.ndarray) else j
              for j, leaf in zip(joined, out_leaves)]
    if world is not None and engine == "nccl":      # the results where the arguments were
        import cupy
        joined = [cupy.asarray(j) for j in joined]
    return tree_unflatten(out_tdef, joined)
