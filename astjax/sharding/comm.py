"""Communicators: how one shard talks to the others of its mesh axis groups.

A shard's communicator knows the mesh and the shard's position in it.  A collective
over axes ``A`` (a tuple of mesh axis names) acts within the *group* of shards that
share every coordinate outside ``A``; a shard's rank in the group is its coordinate
over ``A``, linearized in the order ``A`` names the axes (JAX's ``axis_index``).

Two engines implement the same five operations (allgather, allreduce,
reduce_scatter, permute, alltoall):
- ``LocalComm``: shards are threads of one process; values are exchanged through
  shared slots (two sets, alternating) and one barrier, and reductions add the
  group's values in rank order, so every member gets bit-identical results;
- ``MPIComm``: one process per shard; sub-communicators per axis group
  (``Comm.Split``) and mpi4py's buffer (upper-case) calls on contiguous arrays,
  never pickling.
"""
from __future__ import annotations

import os
import threading

import numpy as np


class _Groups:
    """Group membership over the mesh (shared by both engines)."""

    def __init__(self, mesh_shape: dict, position: int):
        self.names = tuple(mesh_shape)
        self.shape = tuple(mesh_shape.values())
        self.position = position
        self.coords = np.unravel_index(position, self.shape) if self.shape else ()
        self._cache = {}

    def size(self, axes) -> int:
        return int(np.prod([self.shape[self.names.index(a)] for a in axes], dtype=int))

    def index(self, axes) -> int:
        idx = 0
        for a in axes:
            k = self.names.index(a)
            idx = idx * self.shape[k] + int(self.coords[k])
        return idx

    def members(self, axes) -> list:
        """Flat mesh positions of this shard's group, in group-rank order."""
        found = self._cache.get(axes)
        if found is None:
            ks = [self.names.index(a) for a in axes]
            sub = [self.shape[k] for k in ks]
            found = []
            for r in range(int(np.prod(sub, dtype=int))):
                c = list(self.coords)
                for k, v in zip(ks, np.unravel_index(r, sub) if sub else ()):
                    c[k] = int(v)
                found.append(int(np.ravel_multi_index(c, self.shape)) if self.shape else 0)
            self._cache[axes] = found
        return found


_REDUCE = {"sum": np.add, "max": np.maximum, "min": np.minimum}


class LocalWorld:
    """State shared by the threads of one local run: slots and a barrier."""

    def __init__(self, n: int, timeout: float | None = None):
        if timeout is None:
            timeout = float(os.environ.get("ASTJAX_COLLECTIVE_TIMEOUT", "600"))
        self.n, self.timeout = n, timeout
        # two sets of slots, used by alternate collectives: a device writing the next
        # round's value cannot overwrite one another device is still reading, since it
        # passed the barrier that device reaches only after reading (one barrier each)
        self.slots = ([None] * n, [None] * n)
        self.barrier = threading.Barrier(n, timeout=timeout)

    def abort(self):
        self.barrier.abort()


class LocalComm(_Groups):
    """One thread's view of a LocalWorld."""

    engine = "local"

    def __init__(self, world: LocalWorld, mesh_shape: dict, position: int):
        super().__init__(mesh_shape, position)
        self.world = world
        self.round = 0

    def _exchange(self, value, axes, op) -> list:
        w = self.world
        slots = w.slots[self.round % 2]
        self.round += 1
        slots[self.position] = (op, axes, value)
        w.barrier.wait()
        got = [slots[m] for m in self.members(axes)]
        for other_op, other_axes, _ in got:
            if (other_op, other_axes) != (op, axes):
                from astjax.sharding.errors import fail
                fail(f"the devices reached different collectives at once: {op} over "
                     f"{axes} here, {other_op} over {other_axes} on another device",
                     "every device must call the same collectives in the same order "
                     "(a collective under a branch that differs per device does not)")
        return [v for _, _, v in got]

    def allgather(self, x, axes) -> list:
        return self._exchange(x, axes, "all_gather")

    def allreduce(self, x, axes, op="sum"):
        vals = self._exchange(x, axes, op)
        out = vals[0]
        for v in vals[1:]:
            out = _REDUCE[op](out, v)
        return np.array(out, copy=True) if len(vals) == 1 else out

    def reduce_scatter(self, blocks: list, axes):
        """``blocks[j]`` goes to rank j; returns the sum of the blocks sent to me."""
        vals = self._exchange(blocks, axes, "psum_scatter")
        me = self.index(axes)
        out = vals[0][me]
        for v in vals[1:]:
            out = out + v[me]
        return np.array(out, copy=True)

    def permute(self, x, axes, pairs):
        vals = self._exchange(x, axes, "ppermute")
        me = self.index(axes)
        for src, dst in pairs:
            if dst == me:
                return np.array(vals[src], copy=True)
        return np.zeros_like(x)

    def alltoall(self, chunks: list, axes) -> list:
        vals = self._exchange(chunks, axes, "all_to_all")
        me = self.index(axes)
        return [np.array(v[me], copy=True) for v in vals]

    def barrier(self):
        self.world.barrier.wait()


class MPIComm(_Groups):
    """One MPI process's communicator (mpi4py, buffer-based calls)."""

    engine = "mpi"

    def __init__(self, comm, mesh_shape: dict, position: int):
        super().__init__(mesh_shape, position)
        self.comm = comm
        self._subs = {}

    def sub(self, axes):
        found = self._subs.get(axes)
        if found is None:
            members = self.members(axes)
            # colour: the group's first member identifies it; key: rank in the group
            found = self.comm.Split(color=min(members), key=members.index(self.position))
            self._subs[axes] = found
        return found

    def allgather(self, x, axes) -> list:
        from mpi4py import MPI  # noqa: F401
        x = np.asarray(order="C", a=x)
        c = self.sub(axes)
        out = np.empty((c.Get_size(),) + x.shape, x.dtype)
        c.Allgather(x, out)
        return list(out)

    def allreduce(self, x, axes, op="sum"):
        from mpi4py import MPI
        x = np.asarray(order="C", a=x)
        out = np.empty_like(x)
        self.sub(axes).Allreduce(x, out, op={"sum": MPI.SUM, "max": MPI.MAX,
                                             "min": MPI.MIN}[op])
        return out

    def reduce_scatter(self, blocks: list, axes):
        send = np.asarray(order="C", a=np.stack(blocks))
        out = np.empty_like(send[0])
        self.sub(axes).Reduce_scatter_block(send, out)
        return out

    def permute(self, x, axes, pairs):
        from mpi4py import MPI
        x = np.asarray(order="C", a=x)
        me = self.index(axes)
        dest = next((d for s, d in pairs if s == me), MPI.PROC_NULL)
        source = next((s for s, d in pairs if d == me), MPI.PROC_NULL)
        out = np.zeros_like(x)
        self.sub(axes).Sendrecv(x, dest=dest, recvbuf=out, source=source)
        return out

    def alltoall(self, chunks: list, axes) -> list:
        send = np.asarray(order="C", a=np.stack(chunks))
        out = np.empty_like(send)
        self.sub(axes).Alltoall(send, out)
        return list(out)

    def barrier(self):
        self.comm.Barrier()
