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
    if n == 4:                   # a 2x2 mesh: sub-communicators per axis and tuple
        out.update(grid_programs(x))
    return out


def grid_programs(x):
    mesh = astjax.make_mesh((2, 2), ("x", "y"))

    def body(b):                 # b: (8, 3) per device of a (16, 6) array
        s = lax.psum(b, "y") + lax.pmin(b, ("y", "x"))
        g = lax.all_gather(s, ("y", "x"), axis=1)
        p = lax.ppermute(b, ("x", "y"), [(0, 3), (3, 1), (1, 2), (2, 0)])
        t = lax.psum_scatter(b, "x", tiled=True) * lax.axis_index(("x", "y"))
        a = lax.all_to_all(b, "y", 0, 1, tiled=True)
        total = np.sum(np.sin(g)) + np.sum(p * b) + np.sum(t ** 2) + np.sum(a)
        return g, p, t, a, np.reshape(total, (1, 1))
    sm = astjax.shard_map(body, mesh=mesh, in_specs=P("x", "y"),
                          out_specs=(P("x", "y"), P("x", "y"), P("x", "y"), P("x", "y"),
                                     P("x", "y")))
    xs = np.concatenate([x, x[::-1] * 0.5])[:, :3]
    xs = np.concatenate([xs, xs * 2.0], axis=1)            # (32, 6)
    g, p, t, a, _ = sm(xs)
    loss = lambda v: np.sum(sm(v)[4])                     # noqa: E731
    return {"grid_g": g, "grid_p": p, "grid_t": t, "grid_a": a,
            "grid_grad": astjax.grad(loss)(xs)}


if __name__ == "__main__":
    from astjax.sharding import distributed
    size = distributed.initialize()
    res = programs(astjax.device_count())
    if distributed.world() is None or distributed.world().rank == 0:
        np.savez(sys.argv[1], size=size, **res)
