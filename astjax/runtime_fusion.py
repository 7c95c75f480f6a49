"""Running a fused elementwise group: whole arrays, or row blocks on every core.

``passes/fusion.py`` turns a chain of elementwise statements into a *block function*
(the chain's statements, the group's results written through ``out=`` parameters)
and one call ``run_fused(block, deps, cost, *inputs)``.  NumPy's ufuncs release the
GIL, so for arrays large enough the group runs as cache-sized row blocks spread over
a pool of threads; below that it is exactly the unfused code, called once.

Why this is exact: every statement of a group is an elementwise ufunc, so rows
``lo:hi`` of any result depend only on rows ``lo:hi`` of the inputs that vary along
the first axis (the others broadcast along it and are passed whole).
When anything is unusual (subclasses, lists, shapes that do not broadcast, results
smaller than the group), the block function simply runs on the whole arrays.  Results
get the dtypes NumPy gives them: a one-element probe of the same block function, run
once per combination of operand dtypes.

``ASTJAX_NUM_THREADS`` sets the number of threads (with 1, the blocks run one after
the other on the calling thread: still fewer passes over memory than whole arrays).
"""
from __future__ import annotations

import functools
import math
import os
import threading

import numpy as np

# Serial work, in elements times operation weights (passes/fusion.py: a cheap
# float32 operation is about 0.07 ns per element here), below which threads cost
# more than they save: handing a block to a thread costs tens of microseconds.
MIN_WORK = 1 << 21
# Elements per block, at most.  Every ufunc call in a block gives up the GIL and takes
# it back; between threads that handoff costs microseconds to tens of microseconds,
# so blocks are large (measured on 2 cores, poly on 10^6 float32: 2^15-element blocks
# lose to plain NumPy, 2^17-2^19 gain 1.4-1.7x, one block per thread about as much).
BLOCK_ELEMENTS = 1 << 19

_DEFAULT_ERRSTATE = {"divide": "warn", "over": "warn", "under": "ignore", "invalid": "warn"}
_ndarray = np.ndarray
_SCALARS = (int, float, complex, bool, np.generic)
_pool = None
_pool_lock = threading.Lock()


# os.environ's own dict and key: ``os.environ.get`` encodes the key and decodes the
# value on every call (~1 us, per kernel call of a scan step); the raw lookup is
# ~50 ns and sees every change made through os.environ (monkeypatch.setenv included)
_ENV_DATA = getattr(os.environ, "_data", None)
try:
    _ENV_KEY = os.environ.encodekey("ASTJAX_NUM_THREADS")
except AttributeError:
    _ENV_KEY = _ENV_DATA = None
_threads_seen = [object(), 0]      # (the raw value last parsed, its thread count)


def num_threads() -> int:
    """Threads a large group runs on: ``ASTJAX_NUM_THREADS``, else the usable cores."""
    if _ENV_DATA is not None:
        raw = _ENV_DATA.get(_ENV_KEY)
        seen = _threads_seen
        if raw is seen[0] or (raw is not None and raw == seen[0]):
            return seen[1]
        env = None if raw is None else os.environ.decodevalue(raw)
    else:
        raw = env = os.environ.get("ASTJAX_NUM_THREADS")
    got = _cores()
    if env:
        try:
            got = max(1, int(env))
        except ValueError:
            pass
    if _ENV_DATA is not None:
        _threads_seen[:] = [raw, got]
    return got


@functools.lru_cache(maxsize=None)
def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _executor(n):
    """The shared worker pool, made on first use (and again after a fork)."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool._max_workers < n - 1:
            from concurrent.futures import ThreadPoolExecutor
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool = ThreadPoolExecutor(max_workers=n - 1, thread_name_prefix="astjax-fused")
        return _pool


def _forget_pool():
    global _pool, _pool_lock
    _pool = None
    _pool_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _plan(deps, args):
    """The broadcast result shape, or None when blocking does not apply."""
    shapes = []
    for a in args:
        if type(a) is _ndarray:
            shapes.append(a.shape)
        elif not isinstance(a, _SCALARS):
            return None          # lists, subclasses, objects with __array_ufunc__
    try:
        shape = np.broadcast_shapes(*shapes)
    except ValueError:
        return None              # let NumPy raise its own error, from the user's line
    if len(shape) == 0 or shape[0] < 2:
        return None
    for used in deps:            # every result must have the group's full shape
        if np.broadcast_shapes(*(np.shape(args[i]) for i in used)) != shape:
            return None
    return shape


def _cached_plan(block, deps, args):
    """(result shape, result dtypes, which inputs are split by rows, elements per row)
    for these operand shapes and dtypes, or None; remembered on the block function."""
    key = tuple((a.shape, a.dtype) if type(a) is _ndarray else type(a) for a in args)
    plans = block.__dict__.setdefault("_astjax_plans", {})
    if key in plans:
        return plans[key]
    shape = _plan(deps, args)
    plan = None
    if shape is not None:
        rows = shape[0]
        split = tuple(type(a) is _ndarray and a.ndim == len(shape) and a.shape[0] == rows
                      for a in args)
        plan = (shape, _result_dtypes(block, len(deps) == 1, args), split,
                max(1, math.prod(shape) // rows))
    if len(plans) > 64:
        plans.clear()
    plans[key] = plan
    return plan


def _one_element(a):
    return a[(slice(0, 1),) * a.ndim] if type(a) is _ndarray else a


def _result_dtypes(block, single, args):
    """The dtypes ``block`` gives its results for these operands: they depend only on
    the operands' dtypes and types (NEP 50), so a one-element probe is run once per
    combination and remembered on the block function."""
    key = tuple(a.dtype if isinstance(a, (_ndarray, np.generic)) else type(a) for a in args)
    seen = block.__dict__.setdefault("_astjax_result_dtypes", {})
    dtypes = seen.get(key)
    if dtypes is None:
        probe = block(*[_one_element(a) for a in args])
        # a result that is a Python number (``s + s`` of two float arguments) has no
        # dtype: no buffer fits it
        dtypes = seen[key] = [getattr(r, "dtype", None)
                              for r in ((probe,) if single else probe)]
    return dtypes


def _donated(block, deps, args, reuse):
    """Output buffers: the donated inputs ``reuse`` names where they fit the result
    exactly (shape, dtype, an exact writeable array owning its memory), else None."""
    outs = [None] * len(deps)
    for k, i in reuse:
        buf = args[i]
        if type(buf) is not _ndarray or buf.base is not None or not buf.ndim or \
                not getattr(buf.flags, "writeable", True):
            continue
        if not all(type(a) is _ndarray or isinstance(a, _SCALARS) for a in args):
            continue
        try:
            shape = np.broadcast_shapes(*(np.shape(args[j]) for j in deps[k]))
        except ValueError:
            continue
        if shape == buf.shape and \
                _result_dtypes(block, len(deps) == 1, args)[k] == buf.dtype:
            outs[k] = buf
    return outs


def run_fused(block, deps, cost, *args, reuse=()):
    """``block(*args)``, computed in row blocks on several threads when that pays.

    ``deps[k]`` lists the inputs result ``k`` depends on; ``cost`` is the group's
    work per element; ``reuse`` pairs (result, input) where the input's memory was
    donated to that result.  Returns what ``block`` returns (one array, or a tuple).
    """
    size = 0
    for a in args:
        if type(a) is _ndarray and a.size > size:
            size = a.size
    donated = _donated(block, deps, args, reuse) if reuse else None
    if size * cost < MIN_WORK:
        return block(*args, *donated) if donated else block(*args)
    plan = _cached_plan(block, deps, args)
    if plan is None:
        return block(*args, *donated) if donated else block(*args)
    shape, dtypes, split, per_row = plan
    step = max(1, BLOCK_ELEMENTS // per_row)
    single = len(deps) == 1
    outs = [np.empty(shape, d) if donated is None or donated[k] is None else donated[k]
            for k, d in enumerate(dtypes)]
    rows = shape[0]
    errstate = np.geterr()

    def blocks(lo, hi):
        for b in range(lo, hi, step):
            e = min(b + step, hi)
            block(*[a[b:e] if s else a for a, s in zip(args, split)],
                  *[o[b:e] for o in outs])

    def work(lo, hi):
        if errstate == _DEFAULT_ERRSTATE:
            blocks(lo, hi)
        else:
            with np.errstate(**errstate):   # NumPy's error state is per thread
                blocks(lo, hi)

    threads = min(num_threads(), -(-rows // step))
    chunk = -(-rows // threads)
    if threads > 1:
        pool = _executor(threads)
        futures = [pool.submit(work, lo, min(lo + chunk, rows))
                   for lo in range(chunk, rows, chunk)]
        try:
            work(0, chunk)
        finally:
            for f in futures:
                f.result()
    else:
        work(0, rows)
    return outs[0] if single else tuple(outs)


def store(out, value):
    """``value`` written into ``out`` when a caller gave one (a group result computed
    as written, because ``out=`` could change what an operator means)."""
    if out is None:
        return value
    out[...] = value
    return out
