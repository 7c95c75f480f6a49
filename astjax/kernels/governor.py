"""How many threads a compiled loop's kernels use while the machine is busy.

A compiled loop (``loop_driver.py``) runs a few microseconds to milliseconds of
OpenMP kernels per step, each ending in a barrier.  On a quiet machine every team
thread has a core, and the steps run as fast as the threads allow.  When another
process keeps a core busy, the thread sharing that core runs only part of the time,
and every barrier waits for it: on 2 cores with one busy, the wave simulation's 1000
steps took 120-270 ms on two threads against 98 ms on one (57 ms on a quiet machine).
OpenMP's own remedy (``OMP_DYNAMIC``) reads the 15-minute load average, which counts
the loop's own threads; the process's CPU time cannot tell either, since other
threads' time is only counted at scheduler ticks (4 ms), longer than a chunk.

So the loop runs in chunks of steps (``CHUNK_SECONDS`` each), timed, and the thread
cap moves by probes: a chunk at half the threads, or double, whose steps are faster
by ``WIN`` or lose and go back.  A loop's first call probes half once; later, a
probe down follows chunks slower than the best seen at their cap (another process
took cores), and a probe up runs now and then at a reduced cap (that process may have
finished).  A probe that loses waits twice as long before the next one in its
direction.  What was learned is kept per loop and shapes, so later calls start at it.
On a quiet machine that is one probe per loop and shapes, and one host call per
chunk (~10 us per 2 ms of steps).

Results never depend on the cap: a compiled loop's kernels compute each output
element on one thread whatever the team size, and full reductions, whose order
depends on the team, are never part of a compiled loop.
"""
from __future__ import annotations

import time

import numpy as np

# wall time per chunk the loop aims at: long enough to time, short enough to adapt
CHUNK_SECONDS = 2e-3
# the first chunk's steps (no timing yet)
FIRST_CHUNK = 8
# a probe's cap wins when its steps take less than this fraction of the cap's before
WIN = 0.9
# a chunk this much slower than the best at its cap: the machine got busier
SLOWER = 1.3
# the best time per step at a cap may rise this much per chunk (the caches' state)
DRIFT = 1.02
# chunks before the first probe up from a reduced cap, and the longest wait
RECHECK, LONGEST = 16, 256
# a loop with fewer steps runs in one call
MIN_STEPS = 64


class _Learned:
    """What the chunks of one loop at one set of shapes showed."""

    def __init__(self, full):
        self.cap = full
        self.best = {}           # cap -> the best wall seconds per step seen at it
        self.wait = {-1: 0, 1: RECHECK}   # direction -> chunks before its next probe
        self.since = 0           # chunks since the last probe


class Governor:
    """One compiled loop's thread caps, by the shapes it ran at."""

    def __init__(self):
        self.learned = {}

    def run(self, func, start, stop, loop, nthreads, key):
        """``func(i, j, loop)`` over steps [start, stop) in chunks, with the kernels'
        thread counts (``nthreads``, an int32 array the C loop reads) capped; the
        first nonzero return, else 0.  ``key``: what sets the steps' cost (shapes)."""
        top = nthreads.copy()
        full = int(top.max()) if top.size else 1
        if full <= 1 or stop - start < MIN_STEPS:
            return func(start, stop, loop)
        got = self.learned.get(key)
        if got is None or got.cap > full:
            got = self.learned[key] = _Learned(full)
        cap = got.cap
        probe = None             # (the cap to go back to, its time per step, way)
        last = None              # the time per step of the chunk before, at this cap
        chunk, i = FIRST_CHUNK, start
        try:
            while i < stop:
                j = min(stop, i + chunk)
                np.minimum(top, cap, out=nthreads)
                wall = time.perf_counter()
                if func(i, j, loop):
                    return 1
                wall = time.perf_counter() - wall
                per_step, first, i = wall / (j - i), i == start, j
                if per_step <= 0:
                    continue
                chunk = max(1, int(CHUNK_SECONDS / per_step))
                if first:                 # (cold caches, threads starting: not timed)
                    continue
                self._seen(got, cap, per_step)
                if probe is not None:
                    back, before, way = probe
                    probe, got.since, last = None, 0, None
                    if per_step < WIN * before:
                        got.wait = {-1: 0, 1: RECHECK}
                    else:                 # lost: back, and wait longer next time
                        cap = back
                        got.wait[way] = min(LONGEST, max(2, 2 * got.wait[way]))
                    continue
                got.since += 1
                # two chunks in a row: a slow one is the machine, not a hiccup
                pair = None if last is None else min(per_step, last)
                last = per_step
                if pair is None:
                    continue
                if cap > 1 and got.since > got.wait[-1] and (
                        cap // 2 not in got.best or pair > SLOWER * got.best[cap]):
                    probe, cap = (cap, pair, -1), cap // 2
                elif cap < full and got.since >= got.wait[1]:
                    probe, cap = (cap, pair, 1), min(full, cap * 2)
            return 0
        finally:
            nthreads[:] = top
            got.cap = cap if probe is None else probe[0]

    @staticmethod
    def _seen(got, cap, per_step):
        best = got.best.get(cap)
        got.best[cap] = per_step if best is None else min(per_step, best * DRIFT)
