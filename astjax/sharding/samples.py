"""Small per-shard functions for the registry's table-driven tests (samples)."""
import numpy as np


def local_sine(x, w):
    """A per-shard function (sin(x) * w + w): differentiable in both arguments."""
    return np.sin(x) * w + w


def sample_plan():
    """A shard_map plan on a mesh of one local device (needs no threads)."""
    from astjax.sharding.mesh import Device, Mesh, P
    from astjax.sharding.collectives import driver
    ShardPlan = driver().ShardPlan
    mesh = Mesh(np.array([Device(0)], dtype=object), ("i",))
    plan = ShardPlan(local_sine, mesh, (P("i"), P()), P("i"), check_vma=True)
    plan.nargs = 2
    return plan
