"""The wave simulation split across devices by rows, with halo rows exchanged by
``ppermute``; the field equals the single-device simulation's.

    python examples/wave_sharded.py
    mpiexec -n 2 python examples/wave_sharded.py
"""
import numpy as np

import astjax
from astjax import lax
from astjax.sharding import P


def laplacian(u, above, below):
    """5-point Laplacian of a block of rows, with the neighbours' halo rows (zero
    beyond the domain: fixed edges)."""
    padded = np.concatenate([above[None], u, below[None]], axis=0)
    padded = np.pad(padded, ((0, 0), (1, 1)))
    return (padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2] + padded[1:-1, 2:]
            - 4.0 * padded[1:-1, 1:-1])


def step_single(u, u_prev, c2):
    zero = np.zeros(u.shape[1])
    return 2.0 * u - u_prev + c2 * laplacian(u, zero, zero), u


def step_block(u, u_prev, c2):
    n = lax.axis_size("x")
    down = [(k, k + 1) for k in range(n - 1)]        # my last row to the next block
    up = [(k + 1, k) for k in range(n - 1)]          # my first row to the previous one
    above = lax.ppermute(u[-1], "x", down)
    below = lax.ppermute(u[0], "x", up)
    return 2.0 * u - u_prev + c2 * laplacian(u, above, below), u


def initial(ny, nx):
    yy, xx = np.meshgrid(np.linspace(-1, 1, ny), np.linspace(-1, 1, nx), indexing="ij")
    u = np.exp(-40.0 * (xx ** 2 + yy ** 2))
    return u, u.copy()


def simulate(step, u, u_prev, c2, steps):
    for _ in range(steps):
        u, u_prev = step(u, u_prev, c2)
    return u


def run(ny=64, nx=64, steps=50, c2=0.2):
    u, u_prev = initial(ny, nx)
    mesh = astjax.make_mesh((astjax.device_count(),), ("x",))
    sharded = astjax.shard_map(step_block, mesh=mesh, in_specs=(P("x"), P("x"), P()),
                               out_specs=(P("x"), P("x")))
    single = simulate(step_single, u, u_prev, c2, steps)
    split = simulate(sharded, u, u_prev, c2, steps)
    return single, split


if __name__ == "__main__":
    from astjax.sharding import distributed, process_index
    distributed.initialize()
    single, split = run()
    if process_index() == 0:               # under mpiexec: process 0 prints
        print(f"{astjax.device_count()} devices: max |sharded - single| = "
              f"{np.max(np.abs(split - single)):.3e}")
