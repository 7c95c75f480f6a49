"""How many threads a compiled loop's kernels use while the machine is busy.

A compiled loop (``loop_driver.py``, ``backsweep.py``) runs microseconds to
milliseconds of OpenMP kernels per step, each ending in a barrier.  When another
process keeps a core busy, the team thread sharing that core runs part of the time
and every barrier waits for it: on 2 cores with one other busy process
(``bench/busy_machine.py``), the wave simulation's 1000 steps took 120-870 ms on two
threads against 98 ms on one, 57 ms on a quiet machine.  OpenMP's remedy
(``OMP_DYNAMIC``) reads the 15-minute load average, which counts the loop's own
threads; the process's CPU time cannot tell either (other threads' time is counted
at scheduler ticks, 4 ms, longer than a chunk).

So the loop runs in timed chunks of steps (``CHUNK_SECONDS`` each) and its thread cap
moves by probes: a probe runs up to ``PROBE_CHUNKS`` short chunks at half the threads
(or double), and keeps that cap if its best chunk beats the best of the last ``RUN``
chunks by ``WIN``.  Bests of several chunks, so that a page fault or an interrupt is
not taken for the cap.  A loop's first call probes half once.  Later, a probe down
follows ``RUN`` chunks slower than the best seen at their cap (another process took
cores), and a probe up runs now and then at a reduced cap (that process may have
finished).  A probe that loses waits twice as long before the next in its direction.
What was learned is kept per loop and shapes, so later calls start from it.  On a
quiet machine this costs one probe per loop and shapes and one host call per chunk
(~10 us per 2 ms of steps).

Results never depend on the cap: a kernel computes each output element on one
thread whatever the team size, and a reduction over every axis sums a fixed number of
parts (``kernels/c.py``: ``REDUCE_PARTS``), whatever the team.
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
# chunks this much slower than the best at their cap: the machine got busier
SLOWER = 1.5
# ... so many in a row (one slow chunk is a hiccup: an interrupt, a page fault)
RUN = 3
# the best time per step at a cap may rise this much per chunk (the caches' state)
DRIFT = 1.02
# chunks before the first probe up from a reduced cap, and the longest wait
RECHECK, LONGEST = 16, 64
# chunks a probe runs (its best one counts: a page fault or an interrupt is not the cap),
# each half a chunk; one this much slower than before ends it (a busy machine's
# barriers can make a step 2-9 times slower)
PROBE_CHUNKS, LOST = 2, 1.5
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
            if len(self.learned) >= 64:     # (keys hold plan ids: plans come and go)
                self.learned.clear()
            got = self.learned[key] = _Learned(full)
        cap = got.cap
        probe = None             # (the cap to go back to, its time per step, way, times)
        recent = []              # the times per step of the last chunks at this cap
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
                    back, before, way, times = probe
                    times.append(per_step)
                    if len(times) < PROBE_CHUNKS and per_step < LOST * before:
                        chunk = max(1, chunk // 2)
                        continue
                    probe, got.since, recent = None, 0, []
                    if min(times) < WIN * before:
                        got.wait = {-1: 0, 1: RECHECK}
                    else:                 # lost: back, and wait longer next time
                        cap = back
                        got.wait[way] = min(LONGEST, max(2, 2 * got.wait[way]))
                    continue
                got.since += 1
                recent = recent[1 - RUN:] + [per_step]
                if len(recent) < RUN:
                    continue
                now = min(recent)
                if cap > 1 and got.since > got.wait[-1] and (
                        cap // 2 not in got.best or now > SLOWER * got.best[cap]):
                    probe, cap, recent = (cap, now, -1, []), cap // 2, []
                elif cap < full and got.since >= got.wait[1]:
                    probe, cap, recent = (cap, now, 1, []), min(full, cap * 2), []
                if probe is not None:
                    chunk = max(1, chunk // 2)
            return 0
        finally:
            nthreads[:] = top
            got.cap = cap if probe is None else probe[0]

    @staticmethod
    def _seen(got, cap, per_step):
        best = got.best.get(cap)
        got.best[cap] = per_step if best is None else min(per_step, best * DRIFT)
