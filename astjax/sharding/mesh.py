"""Devices, meshes and partition specs (JAX's names and semantics).

A device here is a CPU "device" of the local runtime (one thread each, N from
``ASTJAX_NUM_CPU_DEVICES``, default the core count) or, under ``mpiexec``, one MPI
process.  A ``Mesh`` arranges devices in a named n-d grid; a ``PartitionSpec`` says,
per array dimension, which mesh axes (or none) split it.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from astjax.sharding.errors import fail


@dataclass(frozen=True)
class Device:
    """One device: ``platform`` "cpu" (a thread) or "mpi" (a process)."""

    id: int
    platform: str = "cpu"
    process_index: int = 0

    def __repr__(self):
        return f"{self.platform.upper()}Device(id={self.id})"


def _local_count() -> int:
    env = os.environ.get("ASTJAX_NUM_CPU_DEVICES")
    if env:
        try:
            n = int(env)
        except ValueError:
            n = 0
        if n < 1:
            fail(f"ASTJAX_NUM_CPU_DEVICES must be a positive integer, got {env!r}")
        return n
    return os.cpu_count() or 1


def devices() -> list[Device]:
    """All devices: MPI processes once ``distributed.initialize()`` found MPI, else the
    local CPU devices."""
    from astjax.sharding import distributed
    world = distributed.world()
    if world is not None:
        return [Device(i, "mpi", i) for i in range(world.size)]
    return [Device(i) for i in range(_local_count())]


def device_count() -> int:
    return len(devices())


def local_devices() -> list[Device]:
    from astjax.sharding import distributed
    world = distributed.world()
    if world is not None:
        return [Device(world.rank, "mpi", world.rank)]
    return devices()


def process_index() -> int:
    from astjax.sharding import distributed
    world = distributed.world()
    return 0 if world is None else world.rank


class PartitionSpec(tuple):
    """Per array dimension: a mesh axis name, a tuple of names, or None (not split).

    Dimensions past the spec's length are not split; ``P()`` is fully replicated."""

    def __new__(cls, *parts):
        for p in parts:
            ok = p is None or isinstance(p, str) or (
                isinstance(p, tuple) and all(isinstance(a, str) for a in p))
            if not ok:
                fail(f"PartitionSpec entries are axis names, tuples of names or None, "
                     f"got {p!r}")
        return super().__new__(cls, parts)

    def __repr__(self):
        return "P(" + ", ".join(repr(p) for p in self) + ")"

    def axes_of(self, dim) -> tuple:
        """The mesh axes that split dimension ``dim`` (() when it is not split)."""
        if dim >= len(self) or self[dim] is None:
            return ()
        p = self[dim]
        return (p,) if isinstance(p, str) else tuple(p)

    def mesh_axes(self) -> tuple:
        return tuple(a for d in range(len(self)) for a in self.axes_of(d))


P = PartitionSpec


class Mesh:
    """An n-d array of devices with one name per axis."""

    def __init__(self, devices, axis_names):
        devs = np.asarray(devices, dtype=object)
        if isinstance(axis_names, str):
            axis_names = (axis_names,)
        axis_names = tuple(axis_names)
        if devs.ndim != len(axis_names):
            fail(f"Mesh: {devs.ndim}-d devices but {len(axis_names)} axis names "
                 f"{axis_names}")
        if len(set(axis_names)) != len(axis_names):
            fail(f"Mesh: axis names must differ, got {axis_names}")
        ids = [d.id for d in devs.flat]
        if len(set(ids)) != len(ids):
            fail("Mesh: a device appears twice")
        self.devices = devs
        self.axis_names = axis_names

    @property
    def shape(self) -> dict:
        return dict(zip(self.axis_names, self.devices.shape))

    @property
    def size(self) -> int:
        return int(self.devices.size)

    def device_ids(self):
        return np.vectorize(lambda d: d.id, otypes=[int])(self.devices)

    def __repr__(self):
        return f"Mesh({self.shape!r})"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def make_mesh(axis_shapes, axis_names, *, devices=None) -> Mesh:
    """A mesh of ``prod(axis_shapes)`` devices (JAX's ``make_mesh``)."""
    if isinstance(axis_shapes, int):
        axis_shapes = (axis_shapes,)
    axis_shapes = tuple(int(s) for s in axis_shapes)
    devs = list(devices) if devices is not None else globals()["devices"]()
    need = math.prod(axis_shapes)
    if need > len(devs):
        fail(f"make_mesh: the mesh {axis_shapes} needs {need} devices, there are "
             f"{len(devs)}", "set ASTJAX_NUM_CPU_DEVICES (local devices) or run under "
             "mpiexec -n N")
    if need < len(devs) and devices is None:
        devs = devs[:need]
    arr = np.empty(len(devs), dtype=object)
    arr[:] = devs[:need]
    return Mesh(arr.reshape(axis_shapes), axis_names)


# built at generation time when written inside a transformed function (frontend/nested.py)
PartitionSpec._astjax_static_constructor = "value"
make_mesh._astjax_static_constructor = "value"
