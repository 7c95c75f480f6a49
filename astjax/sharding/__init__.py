"""Sharding: meshes, partition specs, shard_map, pmap, collectives, MPI.

    mesh = astjax.make_mesh((4,), ("batch",))
    step = astjax.shard_map(f, mesh=mesh, in_specs=(P(), P("batch")), out_specs=P())
"""
from astjax.sharding.mesh import (Device, Mesh, P, PartitionSpec, device_count, devices,
                                  local_devices, make_mesh, process_index)
from astjax.sharding.mapping import pmap, shard_map
from astjax.sharding import distributed


__all__ = ["Device", "Mesh", "P", "PartitionSpec", "device_count", "devices",
           "local_devices", "make_mesh", "process_index", "pmap", "shard_map",
           "distributed"]
