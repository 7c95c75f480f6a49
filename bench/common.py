"""Timing helpers shared by the benchmarks: best-of-repeats wall time, interleaved
comparisons, printed tables."""
from __future__ import annotations

import gc
import importlib.util
import math
import os
import time
from typing import NamedTuple


def best_time(fn, *args, repeat=7, number=None, min_time=0.2):
    """Seconds per call: the best of ``repeat`` rounds of ``number`` calls each."""
    fn(*args)  # warm up (and trigger any one-time generation)
    if number is None:
        number = 1
        while True:
            t0 = time.perf_counter()
            for _ in range(number):
                fn(*args)
            dt = time.perf_counter() - t0
            if dt >= min_time / repeat or number >= 1 << 16:
                break
            number *= 2
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn(*args)
        best = min(best, (time.perf_counter() - t0) / number)
    return best


class Comparison(NamedTuple):
    """Best seconds per call of two functions, and ``a / b``."""

    a: float
    b: float
    ratio: float


def _run(fn, args, number):
    t0 = time.perf_counter()
    for _ in range(number):
        fn(*args)
    return time.perf_counter() - t0


def _calls_per_round(fn, args, min_round):
    """Calls that last ``min_round`` on a quiet machine.

    Sized from the fastest of three tries: sized from one try, a busy moment makes
    every round short, and the best of many short rounds of one function is
    measured in gaps of the load that the other's long rounds never fit in.
    """
    number = 1
    while True:
        dt = min(_run(fn, args, number) for _ in range(3))
        if dt >= min_round / 10 or number >= 1 << 16:
            return max(number, math.ceil(number * min_round / dt))
        number *= 2


def compare(fa, fb, *args, rounds=40, min_round=0.02):
    """Time ``fa(*args)`` against ``fb(*args)`` in alternating rounds.

    On a shared machine the load changes over seconds, so two functions timed one
    after the other can see different machines and their ratio flips around 1.0.
    Alternating rounds (each at least ``min_round`` seconds, which one goes first
    swapped every round) expose both to the same conditions; the best round of each
    is its time on the quietest machine the run saw.
    """
    fa(*args), fb(*args)  # warm up (and trigger any one-time generation)
    plan = [(0, fa, _calls_per_round(fa, args, min_round)),
            (1, fb, _calls_per_round(fb, args, min_round))]
    best = [float("inf"), float("inf")]
    enabled = gc.isenabled()
    gc.disable()  # as timeit: a collection lands in whichever round triggers it
    try:
        for r in range(rounds):
            for i, fn, number in plan if r % 2 == 0 else plan[::-1]:
                t0 = time.perf_counter()
                for _ in range(number):
                    fn(*args)
                best[i] = min(best[i], (time.perf_counter() - t0) / number)
    finally:
        if enabled:
            gc.enable()
    return Comparison(best[0], best[1], best[0] / best[1])


def report(title, rows):
    """Print ``rows`` of (label, value, note) under a title."""
    print(f"\n{title}")
    print("-" * len(title))
    width = max(len(r[0]) for r in rows)
    for label, value, note in rows:
        print(f"  {label:<{width}}  {value:>12}  {note}")


def ms(seconds):
    return f"{seconds * 1e3:.3f} ms"


def first_call(code, runs=3):
    """(first, second) call times printed by ``code``, in fresh processes: the median
    of ``runs`` runs.

    The processes may write bytecode caches (a warm-up run writes them first), as an
    installed package has them: with ``PYTHONDONTWRITEBYTECODE`` set, every import of
    a rule-template module would be compiled again and counted as transformation.
    """
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    results = []
    for _ in range(runs + 1):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True, env=env).stdout.split()
        results.append((float(out[0]), float(out[1])))
    results = sorted(results[1:])
    return results[len(results) // 2]


def load_example(name):
    """examples/<name>.py by path (``wave`` is also a standard-library module)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples",
                        f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"astjax_example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
