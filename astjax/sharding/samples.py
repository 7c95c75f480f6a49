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


def scaled_sine(x, k):
    """A pmap'ed function with a static argument ``k``."""
    return np.sin(x) * k


def sample_static_pmap():
    """The plan of a pmap of scaled_sine with static_broadcasted_argnums=1."""
    from astjax.sharding.collectives import driver
    return driver().pmap(scaled_sine, axis_name="i",
                         static_broadcasted_argnums=1)._astjax_plan
