"""Sharding figures: the data-parallel MLP step and the sharded wave step on 1, 2 and 4
local devices (threads), or MPI processes (``--mpi`` under ``mpiexec -n N``), with the
time each step spends in collectives (device 0's, waits included); the cost of one
``lax.psum`` inside a shard_map against a bare call (local: NumPy's add; MPI: mpi4py's
``Allreduce``).

    python bench/sharding.py                       # local devices
    mpiexec -n 2 python bench/sharding.py --mpi    # MPI processes
    python bench/sharding.py --quick               # fewer repetitions (bench/run_all.py)

Under MPI it also measures the signature check every collective makes first (one
small Allreduce of a header: ``ASTJAX_COLLECTIVE_CHECK=0`` turns it off).
"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import astjax  # noqa: E402
from astjax import lax  # noqa: E402
from astjax.sharding import P  # noqa: E402
from astjax.sharding import comm as C  # noqa: E402

SPENT = {"t": 0.0}


def _timed(method):
    def wrapper(self, *args, **kwargs):
        t = time.perf_counter()
        try:
            return method(self, *args, **kwargs)
        finally:
            if self.position == 0:
                SPENT["t"] += time.perf_counter() - t
    return wrapper


for _cls in (C.LocalComm, C.MPIComm):
    for _name in ("allgather", "allreduce", "reduce_scatter", "permute", "alltoall"):
        setattr(_cls, _name, _timed(getattr(_cls, _name)))


QUICK = "--quick" in sys.argv


def best(f, reps=7):
    """(best wall time, device 0's time in collectives in that run)."""
    if QUICK:
        reps = min(reps, 2)
    f()
    found = []
    for _ in range(reps):
        SPENT["t"] = 0.0
        t = time.perf_counter()
        f()
        found.append((time.perf_counter() - t, SPENT["t"]))
    return min(found)


def figures(n):
    import data_parallel as dp
    import wave_sharded as ws
    rng = np.random.default_rng(0)
    params = dp.init((64, 256, 10), rng)
    x, y = rng.standard_normal((1024, 64)), rng.standard_normal((1024, 10))
    mesh = astjax.make_mesh((n,), ("batch",))
    step = astjax.shard_map(dp.local_step, mesh=mesh, in_specs=(P(), P("batch")),
                            out_specs=P(), check_vma=False)
    mlp = best(lambda: step(params, (x, y)))
    u, u_prev = ws.initial(1024, 1024)
    wmesh = astjax.make_mesh((n,), ("x",))

    def steps(u, u_prev, c2):
        for _ in range(10):
            u, u_prev = ws.step_block(u, u_prev, c2)
        return u, u_prev
    wave = astjax.shard_map(steps, mesh=wmesh, in_specs=(P("x"), P("x"), P()),
                            out_specs=(P("x"), P("x")))
    wv = best(lambda: wave(u, u_prev, 0.2), reps=3)
    return mlp, (wv[0] / 10, wv[1] / 10)


def psum_cost(n, size, reps=200, check=True):
    """Seconds per lax.psum of ``size`` float64 inside one shard_map call (``check``:
    with MPI's signature check before the payload)."""
    from astjax.sharding import execute
    for c in execute._MPI_COMMS.values():
        c.checking = check
    mesh = astjax.make_mesh((n,), ("batch",))

    def many(v):
        for _ in range(reps):
            v = lax.psum(v, "batch") * (1.0 / n)
        return v
    sm = astjax.shard_map(many, mesh=mesh, in_specs=P("batch"), out_specs=P("batch"))
    return best(lambda: sm(np.ones(size * n)), reps=3)[0] / reps


def line(label, mlp, wave):
    return (f"{label}: MLP step (1024x64 -> 256 -> 10, f64) {mlp[0] * 1e3:7.2f} ms, of which "
            f"{mlp[1] * 1e3:5.2f} ms in collectives | wave step (1024x1024) "
            f"{wave[0] * 1e3:6.2f} ms, {wave[1] * 1e3:5.2f} ms in collectives")


def main():
    if "--mpi" in sys.argv:
        from mpi4py import MPI
        from astjax.sharding import distributed
        distributed.initialize("mpi")
        comm = MPI.COMM_WORLD
        n = comm.Get_size()
        mlp, wave = figures(n)
        rows = []
        for size in (8, 100_000):
            g = np.ones(size)
            out = np.empty_like(g)
            reps = 200

            def bare():
                for _ in range(reps):
                    comm.Allreduce(g, out)
            t_bare = best(bare, reps=3)[0] / reps
            checked = psum_cost(n, size, reps)
            unchecked = psum_cost(n, size, reps, check=False)
            rows.append((size, t_bare, checked, unchecked))
        if comm.Get_rank() == 0:
            print(line(f"MPI x{n}", mlp, wave))
            for size, t_bare, t_ours, t_raw in rows:
                print(f"  psum of {size} f64: bare Allreduce {t_bare * 1e6:7.1f} us, "
                      f"lax.psum in shard_map {t_ours * 1e6:7.1f} us (without its "
                      f"signature check {t_raw * 1e6:7.1f} us)")
        return
    for n in ((1, 2) if QUICK else (1, 2, 4)):
        os.environ["ASTJAX_NUM_CPU_DEVICES"] = str(n)
        mlp, wave = figures(n)
        print(line(f"local x{n}", mlp, wave))
    for n in ((2,) if QUICK else (2, 4)):
        os.environ["ASTJAX_NUM_CPU_DEVICES"] = str(n)
        for size in (8, 100_000):
            a = np.ones(size)
            t = time.perf_counter()
            for _ in range(1000):
                a + a
            bare = (time.perf_counter() - t) / 1000
            print(f"  local x{n}: psum of {size} f64 {psum_cost(n, size) * 1e6:7.1f} us "
                  f"(a NumPy add of it: {bare * 1e6:.1f} us)")



if __name__ == "__main__":
    main()
