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

from astjax.device import is_device_array


def _copy(x):
    """A fresh array of ``x``'s own module (a device array stays on its device)."""
    return x.copy() if is_device_array(x) else np.array(x, copy=True)


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

# the collectives' names in messages, by the op each engine is called with
_NAMES = {"sum": "psum", "max": "pmax", "min": "pmin"}
_OPS = ("sum", "max", "min", "all_gather", "psum_scatter", "ppermute", "all_to_all",
        "end", "error")


def signature(op, axes, x, extra=()) -> tuple:
    """What every member of a collective must agree on: (op, axes, shape, dtype,
    extra), cheap to build and to compare.  ``x`` is the operand (an array, the list
    of blocks/chunks of the scattering collectives, or a text for "end"/"error");
    ``extra`` anything else that must match (ppermute's pairs)."""
    if isinstance(x, str):
        return (op, tuple(axes), (), x, tuple(extra))
    if isinstance(x, list):
        first = x[0] if x else np.zeros(0)
        return (op, tuple(axes), (len(x),) + np.shape(first), _dtype(first).str,
                tuple(extra))
    return (op, tuple(axes), np.shape(x), _dtype(x).str, tuple(extra))


def _dtype(x):
    """``x``'s dtype without converting it (CuPy arrays refuse ``np.asarray``)."""
    got = getattr(x, "dtype", None)
    return got if isinstance(got, np.dtype) else np.asarray(x).dtype


def describe(sig) -> str:
    """A signature in words, for the error message."""
    op, axes, shape, dtype, extra = sig
    if op == "end":
        return f"the end of the per-shard function (outputs {dtype})"
    if op == "error":
        return f"an error: {dtype}"
    return (f"{_NAMES.get(op, op)} over {axes} of {np.dtype(dtype).name} {shape}"
            + (f" with {extra}" if extra else ""))


def header(sig) -> np.ndarray:
    """A signature as (h, -h) int64 (h: small checksums): one MAX Allreduce gives back
    (h, -h) exactly when every process sent the same."""
    import zlib
    h = np.array([zlib.crc32(repr(part).encode()) for part in sig], dtype=np.int64)
    return np.concatenate([h, -h])


def mismatch(here: str, there: dict):
    """The error of members that reached different collectives (or shapes)."""
    from astjax.sharding.errors import fail
    others = "; ".join(f"device {k}: {t}" for k, t in sorted(there.items()))
    failed = {k: t for k, t in there.items() if t.startswith("an error: ")}
    if failed and not here.startswith("an error: "):
        fail(f"another device failed while this one was at {here}: " + "; ".join(
            f"device {k}: {t[len('an error: '):]}" for k, t in sorted(failed.items())),
             "its own error is reported by that device")
    fail(f"the devices reached different collectives at once, or the same one with "
         f"different shapes or dtypes: {here} here; {others}",
         "every device must call the same collectives in the same order, on operands of "
         "one shape and dtype (a collective under a branch that differs per device, or a "
         "value-dependent shape, does not)")


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
        # runs nested in this one's threads (execute.nested_world): the k-th nested
        # call of every thread shares one world; the first error of a shard
        self.lock = threading.Lock()
        self.nested: dict = {}
        self.first_error = None

    def abort(self):
        self.barrier.abort()


class LocalComm(_Groups):
    """One thread's view of a LocalWorld."""

    engine = "local"

    def __init__(self, world: LocalWorld, mesh_shape: dict, position: int):
        super().__init__(mesh_shape, position)
        self.world = world
        self.round = 0

    def _exchange(self, value, axes, op, extra=()) -> list:
        w = self.world
        slots = w.slots[self.round % 2]
        self.round += 1
        sig = signature(op, axes, value, extra)
        slots[self.position] = (sig, value)
        w.barrier.wait()
        members = self.members(axes)
        got = [slots[m] for m in members]
        differ = {m: describe(g[0]) for m, g in zip(members, got) if g[0] != sig}
        if differ:
            mismatch(describe(sig), differ)
        return [v for _, v in got]

    def allgather(self, x, axes) -> list:
        return self._exchange(x, axes, "all_gather")

    def allreduce(self, x, axes, op="sum"):
        vals = self._exchange(x, axes, op)
        out = vals[0]
        for v in vals[1:]:
            out = _REDUCE[op](out, v)
        return _copy(out) if len(vals) == 1 else out

    def reduce_scatter(self, blocks: list, axes):
        """``blocks[j]`` goes to rank j; returns the sum of the blocks sent to me."""
        vals = self._exchange(blocks, axes, "psum_scatter")
        me = self.index(axes)
        out = vals[0][me]
        for v in vals[1:]:
            out = out + v[me]
        return _copy(out)

    def permute(self, x, axes, pairs):
        vals = self._exchange(x, axes, "ppermute", pairs)
        me = self.index(axes)
        for src, dst in pairs:
            if dst == me:
                return _copy(vals[src])
        return np.zeros_like(x)

    def alltoall(self, chunks: list, axes) -> list:
        vals = self._exchange(chunks, axes, "all_to_all")
        me = self.index(axes)
        return [_copy(v[me]) for v in vals]

    def barrier(self):
        self.world.barrier.wait()


class MPIComm(_Groups):
    """One MPI process's communicator (mpi4py, buffer-based calls)."""

    engine = "mpi"

    def __init__(self, comm, mesh_shape: dict, position: int):
        super().__init__(mesh_shape, position)
        self.comm = comm
        self._subs = {}
        self.checking = os.environ.get("ASTJAX_COLLECTIVE_CHECK", "1") != "0"
        self._headers = {}
        self._got = np.empty(10, np.int64)

    def check(self, op, axes, x, extra=()):
        """Agree on the collective before moving its payload: one small Allreduce of a
        header (op, axes, shape, dtype) over the world, max of (h, -h), so that members
        that diverged get an error naming every device's call instead of a hang or a
        silently mismatched buffer.  ``ASTJAX_COLLECTIVE_CHECK=0`` turns it off."""
        if not self.checking:
            return
        from mpi4py import MPI
        sig = signature(op, axes, x, extra)
        both = self._headers.get(sig)
        if both is None:
            both = self._headers[sig] = header(sig)
        out = self._got
        self.comm.Allreduce(both, out, op=MPI.MAX)
        if out.tobytes() == both.tobytes():
            return
        # they differ: every process is here, so gather the descriptions (rare path)
        text = describe(sig)
        texts = self.comm.allgather(text)
        differ = {r: t for r, t in enumerate(texts)
                  if t != text and r != self.comm.Get_rank()}
        try:
            mismatch(text, differ or {r: t for r, t in enumerate(texts)})
        except Exception as e:
            e._astjax_synchronized = True   # every process raises it: no more headers
            raise

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
        self.check("all_gather", axes, x)
        c = self.sub(axes)
        out = np.empty((c.Get_size(),) + x.shape, x.dtype)
        c.Allgather(x, out)
        return list(out)

    def allreduce(self, x, axes, op="sum"):
        from mpi4py import MPI
        x = np.asarray(order="C", a=x)
        self.check(op, axes, x)
        out = np.empty_like(x)
        self.sub(axes).Allreduce(x, out, op={"sum": MPI.SUM, "max": MPI.MAX,
                                             "min": MPI.MIN}[op])
        return out

    def reduce_scatter(self, blocks: list, axes):
        self.check("psum_scatter", axes, blocks)
        send = np.asarray(order="C", a=np.stack(blocks))
        out = np.empty_like(send[0])
        self.sub(axes).Reduce_scatter_block(send, out)
        return out

    def permute(self, x, axes, pairs):
        from mpi4py import MPI
        x = np.asarray(order="C", a=x)
        self.check("ppermute", axes, x, pairs)
        me = self.index(axes)
        dest = next((d for s, d in pairs if s == me), MPI.PROC_NULL)
        source = next((s for s, d in pairs if d == me), MPI.PROC_NULL)
        out = np.zeros_like(x)
        self.sub(axes).Sendrecv(x, dest=dest, recvbuf=out, source=source)
        return out

    def alltoall(self, chunks: list, axes) -> list:
        self.check("all_to_all", axes, chunks)
        send = np.asarray(order="C", a=np.stack(chunks))
        out = np.empty_like(send)
        self.sub(axes).Alltoall(send, out)
        return list(out)

    def barrier(self):
        self.comm.Barrier()
