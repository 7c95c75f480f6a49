"""The kernels' transcendental functions (``kernels/vmath.py``) against NumPy's loops.

Per function, float32 and float64, 65,536 and 1,048,576 elements: NumPy's ufunc
(``out=`` a preallocated array) against the compiled kernel of ``np.f(x) * 1.0``
(``jit(backend="c")``, one thread, so both run on one core) and, for reference, the
same kernel calling libm's scalar function (the code before vmath).  Columns timed
in interleaved rounds, best round each (the machine is shared).

Run: python bench/vmath.py [--quick | --small]   (--quick: 65,536 only, five
functions; --small: 65,536 only)
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import astjax  # noqa: E402
from astjax.kernels import backend as kbackend, vmath  # noqa: E402

DOMAIN = {"log": (1e-3, 1e3), "log2": (1e-3, 1e3), "log10": (1e-3, 1e3),
          "log1p": (-0.9, 10), "arcsin": (-1, 1), "arccos": (-1, 1),
          "arctanh": (-0.99, 0.99), "arccosh": (1, 100)}


def _function(name, tag):
    """``np.<name>(x) * 1.0`` as a function with a source file jit can read."""
    import linecache
    fname = f"<bench-vmath-{name}-{tag}>"
    src = f"import numpy as np\n\n\ndef {name}_{tag}(x):\n    return np.{name}(x) * 1.0\n"
    linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
    ns = {}
    exec(compile(src, fname, "exec"), ns)
    return ns[f"{name}_{tag}"]


def best(fns, rounds=7, min_round=0.03):
    for f in fns.values():
        f()
    number = {}
    for n, f in fns.items():
        t0 = time.perf_counter()
        f()
        number[n] = max(1, int(min_round / max(time.perf_counter() - t0, 1e-9)))
    out = {n: float("inf") for n in fns}
    names = list(fns)
    for r in range(rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            t0 = time.perf_counter()
            for _ in range(number[n]):
                fns[n]()
            out[n] = min(out[n], (time.perf_counter() - t0) / number[n])
    return out


def main(quick=False):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    names = ["exp", "log", "tanh", "expm1", "log1p"] if quick else sorted(
        set(vmath.C_NAMES) - {"arctan2"})         # (arctan2: two operands; the tests)
    saved_faster = kbackend.NUMPY_FASTER
    kbackend.NUMPY_FASTER = frozenset()           # every function as a kernel
    sizes = [65536] if quick or "--small" in sys.argv else [65536, 1 << 20]
    print(f"{'function':9s} {'dtype':8s} {'n':>8s}  {'NumPy':>9s} {'kernel':>9s} "
          f"{'libm kernel':>11s}  NumPy/kernel")
    for name in names:
        lo, hi = DOMAIN.get(name, (-5, 5))
        for dt in (np.float32, np.float64):
            for n in sizes:
                x = np.random.default_rng(0).uniform(lo, hi, n).astype(dt)
                out = np.empty_like(x)
                uf = getattr(np, name)
                jf = astjax.jit(_function(name, f"vm{n}{dt.__name__}"), backend="c")
                saved = vmath.C_NAMES.pop(name)
                try:                            # the same kernel calling libm
                    jl = astjax.jit(_function(name, f"libm{n}{dt.__name__}"), backend="c")
                    jl(x)
                finally:
                    vmath.C_NAMES[name] = saved
                fns = {"numpy": lambda: uf(x, out=out), "kernel": lambda: jf(x),
                       "libm": lambda: jl(x)}
                t = best(fns)
                print(f"{name:9s} {np.dtype(dt).name:8s} {n:8d}  "
                      f"{t['numpy'] * 1e6:7.0f}us {t['kernel'] * 1e6:7.0f}us "
                      f"{t['libm'] * 1e6:9.0f}us  {t['numpy'] / t['kernel']:6.2f}x")
    kbackend.NUMPY_FASTER = saved_faster


if __name__ == "__main__":
    main("--quick" in sys.argv)
