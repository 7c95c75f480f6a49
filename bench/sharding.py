"""Sharding figures: the data-parallel MLP step and the sharded wave step on 1, 2, 4
local devices (threads) and, with ``--mpi`` under ``mpiexec -n N``, MPI processes;
the per-collective overhead against a bare mpi4py call.

    python bench/sharding.py                       # local devices
    mpiexec -n 2 python bench/sharding.py --mpi    # MPI
"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import astjax  # noqa: E402
from astjax import lax  # noqa: E402
from astjax.sharding import P  # noqa: E402


def best(f, reps=5):
    f()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def figures(n):
    import data_parallel as dp
    import wave_sharded as ws
    rng = np.random.default_rng(0)
    params = dp.init((64, 256, 10), rng)
    x, y = rng.standard_normal((512, 64)), rng.standard_normal((512, 10))
    mesh = astjax.make_mesh((n,), ("batch",))
    step = astjax.shard_map(dp.local_step, mesh=mesh, in_specs=(P(), P("batch")),
                            out_specs=P(), check_vma=False)
    mlp = best(lambda: step(params, (x, y)))
    u, u_prev = ws.initial(512, 512)
    wmesh = astjax.make_mesh((n,), ("x",))
    wave = astjax.shard_map(ws.step_block, mesh=wmesh, in_specs=(P("x"), P("x"), P()),
                            out_specs=(P("x"), P("x")))
    wv = best(lambda: wave(u, u_prev, 0.2))
    g = np.ones(100_000)
    ps = astjax.shard_map(lambda v: lax.psum(v, "batch"), mesh=mesh, in_specs=P("batch"),
                          out_specs=P("batch"))
    coll = best(lambda: ps(np.ones(100_000 * n)))
    empty = astjax.shard_map(lambda v: v, mesh=mesh, in_specs=P("batch"),
                             out_specs=P("batch"))
    launch = best(lambda: empty(np.ones(100_000 * n)))
    return mlp, wv, coll - launch, launch, g


def main():
    if "--mpi" in sys.argv:
        from mpi4py import MPI
        from astjax.sharding import distributed
        distributed.initialize("mpi")
        comm = MPI.COMM_WORLD
        n = comm.Get_size()
        mlp, wv, coll, launch, g = figures(n)
        out = np.empty_like(g)
        bare = best(lambda: comm.Allreduce(g, out))
        from astjax.sharding.comm import MPIComm
        c = MPIComm(comm, {"batch": n}, comm.Get_rank())
        ours = best(lambda: c.allreduce(g, ("batch",)))
        if comm.Get_rank() == 0:
            print(f"MPI x{n}: MLP step {mlp * 1e3:.2f} ms, wave step {wv * 1e3:.2f} ms, "
                  f"psum of 100k f64: bare Allreduce {bare * 1e6:.0f} us, astjax "
                  f"communicator {ours * 1e6:.0f} us")
        return
    for n in (1, 2, 4):
        os.environ["ASTJAX_NUM_CPU_DEVICES"] = str(n)
        mlp, wv, coll, launch, _ = figures(n)
        print(f"local x{n}: MLP step (512x64 -> 256 -> 10) {mlp * 1e3:.2f} ms, wave step "
              f"(512x512) {wv * 1e3:.2f} ms, psum of 100k f64 per shard {coll * 1e3:.2f} ms "
              f"(on top of {launch * 1e3:.2f} ms to launch the shards)")


if __name__ == "__main__":
    main()
