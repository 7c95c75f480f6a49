"""An in-process stand-in for ``cupy.cuda.nccl`` (tests only): NCCL's API on host memory.

Buffers are addressed by pointer, as NCCL's are: each call reads ``count`` elements
of the datatype at the send pointer and writes at the receive pointer (NumPy arrays'
memory, through ctypes).  The ranks of a communicator are threads; a collective
completes when every rank has called it (a barrier per clique), reductions add in
rank order; ``send``/``recv`` pair through per-(source, destination) mailboxes, so a
rank that sends nothing takes no part, as in NCCL.  Calls between ``groupStart`` and
``groupEnd`` run at ``groupEnd`` (sends before receives), as NCCL's grouping allows.
Every call is logged (``LOG``) so tests can see what the communicator asked for.
"""
from __future__ import annotations

import collections
import ctypes
import itertools
import threading

import numpy as np

NCCL_INT8, NCCL_UINT8, NCCL_INT32, NCCL_UINT32 = 0, 1, 2, 3
NCCL_INT64, NCCL_UINT64, NCCL_FLOAT16, NCCL_FLOAT32, NCCL_FLOAT64 = 4, 5, 6, 7, 8
NCCL_SUM, NCCL_PROD, NCCL_MAX, NCCL_MIN = 0, 1, 2, 3

_DTYPES = {NCCL_INT8: np.int8, NCCL_UINT8: np.uint8, NCCL_INT32: np.int32,
           NCCL_UINT32: np.uint32, NCCL_INT64: np.int64, NCCL_UINT64: np.uint64,
           NCCL_FLOAT16: np.float16, NCCL_FLOAT32: np.float32, NCCL_FLOAT64: np.float64}
_REDUCE = {NCCL_SUM: np.add, NCCL_PROD: np.multiply, NCCL_MAX: np.maximum,
           NCCL_MIN: np.minimum}

LOG: list = []
_IDS = itertools.count()
_CLIQUES: dict = {}
_LOCK = threading.Lock()
_GROUP = threading.local()


def _view(ptr, count, dtype):
    """``count`` elements of NCCL ``dtype`` at address ``ptr`` (writable)."""
    dt = np.dtype(_DTYPES[dtype])
    raw = (ctypes.c_char * (count * dt.itemsize)).from_address(ptr)
    return np.frombuffer(raw, dtype=dt, count=count)


class _Clique:
    """The shared state of one communicator's ranks."""

    def __init__(self, n):
        self.n = n
        self.barrier = threading.Barrier(n, timeout=60)
        self.slots = [None] * n
        self.mail = collections.defaultdict(collections.deque)
        self.cond = threading.Condition()

    def exchange(self, rank, value):
        self.slots[rank] = value
        self.barrier.wait()
        got = list(self.slots)
        self.barrier.wait()          # everyone read before the next round writes
        return got


def get_unique_id():
    return ("fake-nccl-id", next(_IDS))


def groupStart():
    _GROUP.depth = getattr(_GROUP, "depth", 0) + 1
    if _GROUP.depth == 1:
        _GROUP.ops = []


def groupEnd():
    _GROUP.depth -= 1
    if _GROUP.depth:
        return
    ops, _GROUP.ops = _GROUP.ops, []
    for op in [o for o in ops if o[0] == "send"] + [o for o in ops if o[0] == "recv"]:
        op[1](*op[2:])


class NcclCommunicator:
    def __init__(self, ndev, commId, rank):
        with _LOCK:
            clique = _CLIQUES.get(commId)
            if clique is None:
                clique = _CLIQUES[commId] = _Clique(ndev)
        if clique.n != ndev or not 0 <= rank < ndev:
            raise ValueError(f"fake NCCL: rank {rank} of {ndev} for a clique of {clique.n}")
        self._clique, self._rank, self._device = clique, rank, rank
        LOG.append(("init", commId, ndev, rank))

    @classmethod
    def initAll(cls, devices):
        devices = list(range(devices)) if isinstance(devices, int) else list(devices)
        uid = get_unique_id()
        comms = [cls.__new__(cls) for _ in devices]
        clique = _CLIQUES[uid] = _Clique(len(devices))
        for r, (c, d) in enumerate(zip(comms, devices)):
            c._clique, c._rank, c._device = clique, r, d
        LOG.append(("initAll", tuple(devices)))
        return comms

    def rank_id(self):
        return self._rank

    def size(self):
        return self._clique.n

    def device_id(self):
        return self._device

    def allReduce(self, sendbuf, recvbuf, count, datatype, op, stream):
        LOG.append(("allReduce", self._clique.n, count, datatype, op))
        mine = _view(sendbuf, count, datatype).copy()
        got = self._clique.exchange(self._rank, mine)
        out = got[0]
        for v in got[1:]:
            out = _REDUCE[op](out, v)
        _view(recvbuf, count, datatype)[:] = out

    def allGather(self, sendbuf, recvbuf, count, datatype, stream):
        LOG.append(("allGather", self._clique.n, count, datatype))
        got = self._clique.exchange(self._rank, _view(sendbuf, count, datatype).copy())
        _view(recvbuf, count * self._clique.n, datatype)[:] = np.concatenate(got)

    def reduceScatter(self, sendbuf, recvbuf, recvcount, datatype, op, stream):
        LOG.append(("reduceScatter", self._clique.n, recvcount, datatype, op))
        n = self._clique.n
        got = self._clique.exchange(self._rank,
                                    _view(sendbuf, recvcount * n, datatype).copy())
        me = slice(self._rank * recvcount, (self._rank + 1) * recvcount)
        out = got[0][me]
        for v in got[1:]:
            out = _REDUCE[op](out, v[me])
        _view(recvbuf, recvcount, datatype)[:] = out

    def send(self, sendbuf, count, datatype, peer, stream):
        LOG.append(("send", self._clique.n, count, datatype, peer))
        data = _view(sendbuf, count, datatype).copy()
        self._later("send", self._post, peer, data)

    def recv(self, recvbuf, count, datatype, peer, stream):
        LOG.append(("recv", self._clique.n, count, datatype, peer))
        self._later("recv", self._take, peer, recvbuf, count, datatype)

    def _later(self, kind, fn, *args):
        if getattr(_GROUP, "depth", 0):
            _GROUP.ops.append((kind, fn) + args)
        else:
            fn(*args)

    def _post(self, peer, data):
        c = self._clique
        with c.cond:
            c.mail[(self._rank, peer)].append(data)
            c.cond.notify_all()

    def _take(self, peer, recvbuf, count, datatype):
        c = self._clique
        with c.cond:
            if not c.cond.wait_for(lambda: c.mail[(peer, self._rank)], timeout=60):
                raise RuntimeError("fake NCCL: recv without a matching send")
            data = c.mail[(peer, self._rank)].popleft()
        _view(recvbuf, count, datatype)[:] = data


def install(monkeypatch):
    """Make ``from cupy.cuda import nccl`` give this module (CuPy itself absent)."""
    import sys
    import types
    this = sys.modules[__name__]
    cupy = types.ModuleType("cupy")
    cuda = types.ModuleType("cupy.cuda")
    cuda.nccl = this
    cupy.cuda = cuda
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setitem(sys.modules, "cupy.cuda", cuda)
    monkeypatch.setitem(sys.modules, "cupy.cuda.nccl", this)
    LOG.clear()
    return this


def real_gpus() -> int:
    """How many GPUs real NCCL could use here (0 without CuPy's NCCL): the gpu tests'
    skip condition."""
    from astjax.sharding.nccl import gpu_devices
    try:
        from cupy.cuda import nccl  # noqa: F401
    except ImportError:
        return 0
    return len(gpu_devices())
