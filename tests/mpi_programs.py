"""The same sharded programs run under ``mpiexec`` (tests/test_mpi.py) and locally.

``python tests/mpi_programs.py OUT`` runs every program; rank 0 writes the results to
OUT (an .npz), so the test compares MPI's results with the local communicator's.
"""
import sys

import numpy as np

import astjax
from astjax import lax
from astjax.sharding import P


def programs(n):
    mesh = astjax.make_mesh((n,), ("i",))
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4 * n, 3))
    w = rng.standard_normal(3)
    right = [(k, (k + 1) % n) for k in range(n)]

    def body(w, x):
        y = lax.ppermute(x, "i", right) + lax.all_gather(x, "i", tiled=True)[:x.shape[0]]
        z = lax.all_to_all(y, "i", 0, 0, tiled=True) * lax.axis_index("i")
        s = lax.psum_scatter(np.concatenate([z] * n), "i", tiled=True)
        return lax.psum(np.sum(np.tanh(s * w)), "i") + lax.pmax(np.max(x), "i"), s
    sm = astjax.shard_map(body, mesh=mesh, in_specs=(P(), P("i")), out_specs=(P(), P("i")))
    loss = lambda w, x: sm(w, x)[0]             # noqa: E731
    out = {"value": sm(w, x)[0], "field": sm(w, x)[1]}
    gw, gx = astjax.grad(loss, argnums=(0, 1))(w, x)
    out["grad_w"], out["grad_x"] = gw, gx
    pm = astjax.pmap(lambda v: lax.pmean(v, "d") * v, axis_name="d")
    out["pmap"] = pm(x[:n])
    return out


if __name__ == "__main__":
    from astjax.sharding import distributed
    size = distributed.initialize()
    res = programs(astjax.device_count())
    if distributed.world() is None or distributed.world().rank == 0:
        np.savez(sys.argv[1], size=size, **res)
