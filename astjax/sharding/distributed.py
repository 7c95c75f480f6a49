"""Many processes: MPI through mpi4py (``pip install astjax[mpi]``).

``mpiexec -n 4 python train.py`` runs one process per device; ``initialize()`` (or
the first use of devices, when the launcher's environment says we run under mpiexec)
makes ``astjax.devices()`` the MPI world, and shard_map/pmap then run each process's
own shard with MPI collectives.  Without MPI everything stays local.
"""
from __future__ import annotations

import os

from astjax.sharding.errors import fail

_WORLD = {"comm": None, "checked": False}

# variables the launchers (MPICH/Hydra, Open MPI, Slurm's PMI) set in every process
from astjax.sharding.execute import LAUNCHED as _LAUNCHED  # noqa: E402


def launched_under_mpi() -> bool:
    return any(v in os.environ for v in _LAUNCHED)


def initialize(backend: str | None = None):
    """Use MPI's world as the devices (``backend="mpi"``, or auto: MPI when launched
    under mpiexec).  Returns the number of processes."""
    if backend not in (None, "mpi", "local"):
        fail(f"distributed.initialize: unknown backend {backend!r} (use 'mpi' or 'local')")
    if backend == "local" or backend is None and not launched_under_mpi():
        _WORLD["comm"], _WORLD["checked"] = None, True
        return 1
    try:
        from mpi4py import MPI
    except ImportError:
        fail("distributed.initialize: MPI needs mpi4py",
             "pip install 'astjax[mpi]'  (mpi4py, and the mpich wheel for mpiexec)")
    _WORLD["comm"], _WORLD["checked"] = MPI.COMM_WORLD, True
    _share_cores()
    return MPI.COMM_WORLD.Get_size()


def _share_cores():
    """Processes on one machine share its cores: BLAS gets cores // local processes
    threads unless the user chose (OPENBLAS_NUM_THREADS / OMP_NUM_THREADS); N processes
    each starting a full BLAS pool would oversubscribe the cores (60x slower here)."""
    if any(v in os.environ for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                     "MKL_NUM_THREADS")):
        return
    from mpi4py import MPI
    local = MPI.COMM_WORLD.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        from astjax.sharding import blas
        blas.limit((os.cpu_count() or 1) // local.Get_size())
    finally:
        local.Free()


def world():
    """MPI's COMM_WORLD when running under MPI with more than one process, else None."""
    if not _WORLD["checked"]:
        _WORLD["checked"] = True
        if launched_under_mpi():
            try:
                initialize("mpi")
            except Exception:   # noqa: BLE001  (mpi4py absent: stay local)
                _WORLD["comm"] = None
    comm = _WORLD["comm"]
    if comm is not None and comm.Get_size() == 1:
        return None
    return comm


def process_count() -> int:
    w = world()
    return 1 if w is None else w.size


def shutdown():
    _WORLD["comm"], _WORLD["checked"] = None, True
