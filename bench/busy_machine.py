"""Compiled loops on a busy machine: the thread cap of kernels/governor.py.

The seeds' wave simulation (300x300, 1000 steps, float32, ``jit`` forward) and the
FWI gradient (``jit(value_and_grad(misfit))``) on the C backend, three ways:

  governed     the default: the loops' thread caps follow their timed chunks
  full team    every kernel on all its threads (the governor off: one C call a loop)
  one thread   ``ASTJAX_NUM_THREADS=1``

on a quiet machine, then with other processes busy on half the cores (at least one):
``spin`` processes (a Python busy loop each), then ``openmp`` processes (another job's
OpenMP kernels on every core: astjax's own poly kernel in a loop, whose idle threads
spin at their barriers as OpenMP's do).  Interleaved rounds; the best and the median
round per variant.  Timings on a shared machine vary with its other tenants.

Run: python bench/busy_machine.py [--rounds 5]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import astjax  # noqa: E402
from astjax.kernels import governor  # noqa: E402
from astjax.runtime_fusion import num_threads  # noqa: E402
from common import load_example  # noqa: E402

SPIN = "while True: pass"
OPENMP = (
    "import numpy as np\n"
    "import astjax\n\n\n"
    "def poly(x):\n"
    "    return x + x * x + x * x * x\n\n\n"
    "f = astjax.jit(poly, backend='c')\n"
    "x = np.ones((1000, 1000), np.float32)\n"
    "while True:\n"
    "    f(x)\n")


def _variants(fn):
    """name -> thunk, each setting the threads its own way around ``fn``."""
    steps = governor.MIN_STEPS

    def governed():
        return fn()

    def full_team():
        governor.MIN_STEPS = 1 << 62
        try:
            return fn()
        finally:
            governor.MIN_STEPS = steps

    def one_thread():
        os.environ["ASTJAX_NUM_THREADS"] = "1"
        try:
            return fn()
        finally:
            del os.environ["ASTJAX_NUM_THREADS"]
    return {"governed": governed, "full team": full_team, "one thread": one_thread}


def _rounds(variants, rounds):
    for f in variants.values():
        f()                                      # compile, warm the caches
    times = {n: [] for n in variants}
    names = list(variants)
    for r in range(rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            t0 = time.perf_counter()
            variants[n]()
            times[n].append(time.perf_counter() - t0)
    return times


def _hogs(kind, count, where):
    script = os.path.join(where, f"busy_{kind}.py")    # (jit reads its function's file)
    with open(script, "w") as f:
        f.write(SPIN if kind == "spin" else OPENMP)
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, ".."))
    procs = [subprocess.Popen([sys.executable, script], env=env) for _ in range(count)]
    time.sleep(2.0 if kind == "openmp" else 0.5)     # (the OpenMP job compiles first)
    return procs


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    os.environ.pop("ASTJAX_NUM_THREADS", None)
    wave = load_example("wave")
    _, velocity, problem, observed = wave.setup(300, 300, 1000, np.float32)
    forward = astjax.jit(wave.simulate, backend="c")
    gradient = astjax.jit(astjax.value_and_grad(wave.misfit), backend="c")
    work = {"wave forward": lambda: forward(velocity, **problem),
            "FWI value_and_grad": lambda: gradient(velocity, observed=observed, **problem)}
    busy = max(1, num_threads() // 2)
    print(f"{num_threads()} threads; busy: {busy} other process(es), {args.rounds} rounds")
    print("| condition | workload | governed | full team | one thread |")
    print("|---|---|---|---|---|")
    where = tempfile.mkdtemp()
    for condition in ("quiet", "spin", "openmp"):
        procs = [] if condition == "quiet" else _hogs(condition, busy, where)
        try:
            for name, fn in work.items():
                times = _rounds(_variants(fn), args.rounds)
                cells = [f"{min(t) * 1e3:.0f} / {np.median(t) * 1e3:.0f} ms"
                         for t in times.values()]
                print(f"| {condition} | {name} | " + " | ".join(cells) + " |", flush=True)
        finally:
            for p in procs:
                p.kill()
                p.wait()
    print("(cells: best / median round)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
