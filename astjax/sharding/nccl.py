"""NCCL collectives for GPU devices (``cupy.cuda.nccl``): the communicators' interface.

When a shard_map's arguments are CuPy arrays, each mesh position is a GPU and the
collectives run through NCCL: ``NcclComm`` has LocalComm's and MPIComm's five
operations (allgather, allreduce, reduce_scatter, permute, alltoall) on device
buffers, addressed by pointer, on the current stream.  Communicators are made per
group of an axes tuple (the shards that share every coordinate outside it):

- one process driving all local GPUs (threads): ``LocalCliques`` makes every group's
  communicators at once with ``NcclCommunicator.initAll(device ids)``;
- one process per GPU under ``mpiexec``: ``MPICliques`` has the group's first member
  draw a unique id (``nccl.get_unique_id``), broadcast over the group's MPI
  sub-communicator, and every member join with ``NcclCommunicator(n, id, rank)``;
  each process uses its current CuPy device (where its arrays are: pick it from the
  local rank, ``cupy.cuda.Device(rank % n_gpus).use()``).

ppermute and all_to_all are grouped sends and receives (``groupStart``/``groupEnd``).
Before each collective the members agree on its signature (op, axes, shape, dtype) by
a small MAX allReduce of a header over the whole mesh, as MPIComm does: divergent
devices get an astjax error naming every device's call, not a hang.
"""
from __future__ import annotations

import os
import threading

import numpy as np

from astjax.sharding.comm import _Groups, describe, header, mismatch, signature

# NumPy dtype -> NCCL datatype constant; complex travels as pairs of reals (sum only)
_TYPES = {"float16": "NCCL_FLOAT16", "float32": "NCCL_FLOAT32", "float64": "NCCL_FLOAT64",
          "int8": "NCCL_INT8", "uint8": "NCCL_UINT8", "int32": "NCCL_INT32",
          "uint32": "NCCL_UINT32", "int64": "NCCL_INT64", "uint64": "NCCL_UINT64"}
_COMPLEX = {"complex64": np.float32, "complex128": np.float64}
_OPS = {"sum": "NCCL_SUM", "max": "NCCL_MAX", "min": "NCCL_MIN"}
_TEXT = 256      # bytes of a signature's description exchanged on a mismatch


def nccl_module():
    """``cupy.cuda.nccl`` (tests install a fake one)."""
    try:
        from cupy.cuda import nccl
    except ImportError:
        from astjax.sharding.errors import fail
        fail("NCCL collectives need CuPy with NCCL (cupy.cuda.nccl)",
             "pip install cupy-cuda12x (its wheels include NCCL)")
    return nccl


def is_cupy(x) -> bool:
    return type(x).__module__.split(".")[0] == "cupy"


def xp_of(x):
    if is_cupy(x):
        import cupy
        return cupy
    return np


def contiguous(x):
    """``x`` C-contiguous, of its own module and shape (ascontiguousarray makes 0-d 1-d)."""
    xp = xp_of(x)
    x = xp.asarray(x)
    return x if x.flags.c_contiguous else x.copy(order="C")


def _ptr(x):
    """The buffer's address: a device pointer (CuPy), or host memory (NumPy: fakes)."""
    if is_cupy(x):
        return x.data.ptr
    return x.ctypes.data


def _stream(x):
    if is_cupy(x):
        import cupy
        return cupy.cuda.get_current_stream().ptr
    return 0


def _wire(x, op=None):
    """(contiguous buffer, element count, NCCL datatype) for ``x``."""
    nccl = nccl_module()
    x = contiguous(x)
    name = x.dtype.name
    if name in _COMPLEX:
        if op not in (None, "sum"):
            from astjax.sharding.errors import fail
            fail(f"p{op} of complex values: complex numbers are not ordered")
        flat = x.view(_COMPLEX[name])
        return x, flat.size, getattr(nccl, _TYPES[np.dtype(_COMPLEX[name]).name])
    if name == "bool":
        return x, x.size, nccl.NCCL_UINT8
    if name not in _TYPES:
        from astjax.sharding.errors import fail
        fail(f"NCCL collectives carry numbers, not {x.dtype}")
    return x, x.size, getattr(nccl, _TYPES[name])


class NcclComm(_Groups):
    """One GPU's communicator: NCCL calls on the group communicators ``cliques``
    gives it (``cliques.comm(axes, position)``)."""

    engine = "nccl"

    def __init__(self, cliques, mesh_shape: dict, position: int, xp=np):
        super().__init__(mesh_shape, position)
        self.cliques = cliques
        self.xp = xp
        self.checking = os.environ.get("ASTJAX_COLLECTIVE_CHECK", "1") != "0"
        self._headers = {}

    def _comm(self, axes):
        return self.cliques.comm(tuple(axes), self.position)

    def check(self, op, axes, x, extra=()):
        """Agree on the collective first (see the module doc)."""
        if not self.checking:
            return
        nccl = nccl_module()
        sig = signature(op, axes, x, extra)
        both = self._headers.get(sig)
        if both is None:
            both = self._headers[sig] = header(sig)
        xp = self.xp
        send = xp.asarray(both)
        got = xp.empty_like(send)
        world = self._comm(self.names)
        world.allReduce(_ptr(send), _ptr(got), send.size, nccl.NCCL_INT64, nccl.NCCL_MAX,
                        _stream(send))
        host = got.get() if is_cupy(got) else got
        if host.tobytes() == both.tobytes():
            return
        text = describe(sig)
        mine = np.zeros(_TEXT, np.uint8)
        raw = text.encode()[:_TEXT]
        mine[:len(raw)] = np.frombuffer(raw, np.uint8)
        mine = xp.asarray(mine)
        n = world.size()
        texts = xp.empty((n, _TEXT), np.uint8)
        world.allGather(_ptr(mine), _ptr(texts), _TEXT, nccl.NCCL_UINT8, _stream(mine))
        texts = texts.get() if is_cupy(texts) else texts
        decoded = [bytes(t).rstrip(b"\0").decode(errors="replace") for t in texts]
        me = self.index(self.names)
        differ = {k: t for k, t in enumerate(decoded) if t != text and k != me}
        mismatch(text, differ or dict(enumerate(decoded)))

    def allreduce(self, x, axes, op="sum"):
        nccl = nccl_module()
        self.check(op, axes, x)
        x, count, dtype = _wire(x, op)
        out = xp_of(x).empty_like(x)
        nop = getattr(nccl, _OPS[op if x.dtype != bool else "max"])
        self._comm(axes).allReduce(_ptr(x), _ptr(out), count, dtype, nop, _stream(x))
        return out

    def allgather(self, x, axes) -> list:
        self.check("all_gather", axes, x)
        x, count, dtype = _wire(x)
        c = self._comm(axes)
        out = xp_of(x).empty((c.size(),) + x.shape, x.dtype)
        c.allGather(_ptr(x), _ptr(out), count, dtype, _stream(x))
        return list(out)

    def reduce_scatter(self, blocks: list, axes):
        nccl = nccl_module()
        self.check("psum_scatter", axes, blocks)
        xp = xp_of(blocks[0])
        send, _, dtype = _wire(xp.stack(blocks), "sum")
        out = xp.empty_like(send[0])
        count = out.size * (2 if out.dtype.name in _COMPLEX else 1)
        nop = nccl.NCCL_MAX if out.dtype == bool else nccl.NCCL_SUM
        self._comm(axes).reduceScatter(_ptr(send), _ptr(out), count, dtype, nop,
                                       _stream(send))
        return out

    def permute(self, x, axes, pairs):
        nccl = nccl_module()
        self.check("ppermute", axes, x, pairs)
        x, count, dtype = _wire(x)
        me = self.index(axes)
        dest = next((d for s, d in pairs if s == me), None)
        source = next((s for s, d in pairs if d == me), None)
        out = xp_of(x).zeros_like(x)
        c = self._comm(axes)
        nccl.groupStart()
        try:
            if dest is not None:
                c.send(_ptr(x), count, dtype, dest, _stream(x))
            if source is not None:
                c.recv(_ptr(out), count, dtype, source, _stream(x))
        finally:
            nccl.groupEnd()
        return out

    def alltoall(self, chunks: list, axes) -> list:
        nccl = nccl_module()
        self.check("all_to_all", axes, chunks)
        xp = xp_of(chunks[0])
        send, _, dtype = _wire(xp.stack(chunks))
        out = xp.empty_like(send)
        count = send[0].size * (2 if send.dtype.name in _COMPLEX else 1)
        c = self._comm(axes)
        nccl.groupStart()
        try:
            for j in range(len(chunks)):
                c.send(_ptr(send[j]), count, dtype, j, _stream(send))
                c.recv(_ptr(out[j]), count, dtype, j, _stream(send))
        finally:
            nccl.groupEnd()
        return list(out)

    def barrier(self):
        self.allreduce(np.zeros(1, np.int32) if self.xp is np else
                       self.xp.zeros(1, np.int32), self.names)


class LocalCliques:
    """The group communicators of one process driving a GPU per mesh position
    (``devices[pos]``): each axes tuple's groups made at once with initAll."""

    def __init__(self, mesh_shape: dict, devices):
        self.mesh_shape = dict(mesh_shape)
        self.devices = list(devices)
        self._lock = threading.Lock()
        self._made: dict = {}

    def comm(self, axes, position):
        found = self._made.get(axes)
        if found is None:
            with self._lock:
                found = self._made.get(axes)
                if found is None:
                    found = self._made[axes] = self._make(axes)
        return found[position]

    def _make(self, axes):
        nccl = nccl_module()
        by_pos = {}
        for pos in range(len(self.devices)):
            if pos in by_pos:
                continue
            members = _Groups(self.mesh_shape, pos).members(axes)
            comms = nccl.NcclCommunicator.initAll([self.devices[m] for m in members])
            for m, c in zip(members, comms):
                by_pos[m] = c
        return by_pos


class MPICliques:
    """The group communicators of one process per GPU under mpiexec: each group's
    first member draws the NCCL id, the MPI sub-communicator broadcasts it."""

    def __init__(self, mpi_comm):
        self.mpi = mpi_comm          # an MPIComm (its sub-communicators per axes)
        self._made: dict = {}

    def comm(self, axes, position):
        found = self._made.get(axes)
        if found is None:
            nccl = nccl_module()
            sub = self.mpi.sub(axes)
            uid = nccl.get_unique_id() if sub.Get_rank() == 0 else None
            uid = sub.bcast(uid, root=0)
            found = self._made[axes] = nccl.NcclCommunicator(sub.Get_size(), uid,
                                                             sub.Get_rank())
        return found


def gpu_devices() -> list:
    """The ids of the visible GPUs (none without CuPy)."""
    try:
        import cupy
        return list(range(cupy.cuda.runtime.getDeviceCount()))
    except Exception:   # noqa: BLE001  (no CuPy, no driver)
        return []


def device_scope(dev):
    """The context that makes GPU ``dev`` current (nothing for host arrays)."""
    import contextlib
    if dev is None:
        return contextlib.nullcontext()
    import cupy
    return cupy.cuda.Device(dev)


def to_device(x, dev):
    """``x`` (a CuPy or NumPy array) as a CuPy array on GPU ``dev`` (a peer copy)."""
    import cupy
    if not is_cupy(x):
        with cupy.cuda.Device(dev):
            return cupy.asarray(np.asarray(x))
    if x.device.id == dev:
        return x
    with x.device:
        src = contiguous(x)
        x.device.synchronize()          # its stream's work done before the copy
    with cupy.cuda.Device(dev):
        out = cupy.empty(src.shape, src.dtype)
        out.data.copy_from_device(src.data, src.nbytes)
    return out
