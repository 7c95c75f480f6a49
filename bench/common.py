"""Timing helpers shared by the benchmarks: best-of-repeats wall time, printed tables."""
from __future__ import annotations

import time


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


def report(title, rows):
    """Print ``rows`` of (label, value, note) under a title."""
    print(f"\n{title}")
    print("-" * len(title))
    width = max(len(r[0]) for r in rows)
    for label, value, note in rows:
        print(f"  {label:<{width}}  {value:>12}  {note}")


def ms(seconds):
    return f"{seconds * 1e3:.3f} ms"
