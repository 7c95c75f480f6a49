"""jit with compiled C kernels (``backend="c"``) against the NumPy backend.

Prints, measured in the same run (each ratio from interleaved rounds, common.compare):
  poly(x) = x + x*x + x*x*x on 1000x1000 float32:
    plain NumPy / jit(backend="c")                      (goal >= 5)
    jit (NumPy backend) / jit(backend="c")
    jit(backend="c") / jax.jit                          (goal <= 0.5; when jax imports)
  first call of jit(poly, backend="c") in a fresh process, warm and cold disk cache
                                                         (goal < 50 ms warm)
"""
from __future__ import annotations

import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import compare, first_call, ms, report  # noqa: E402

import astjax  # noqa: E402


def poly(x):
    return x + x * x + x * x * x


FIRST_CALL = """
import time, numpy as np
import astjax
def poly(x):
    return x + x * x + x * x * x
x = np.random.default_rng(0).standard_normal((1000, 1000)).astype(np.float32)
f = astjax.jit(poly, backend="c")
t0 = time.perf_counter(); f(x); t1 = time.perf_counter()
f(x); t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""


def _first_call(cold):
    """First and second call in a fresh process; ``cold``: an empty kernel cache for
    every run (each compiles), else the user's cache, filled by a warm-up run."""
    d = tempfile.mkdtemp(prefix="astjax-bench-")
    script = os.path.join(d, "first_call.py")     # jit reads the function's source
    with open(script, "w") as f:
        f.write(FIRST_CALL)
    code = f"import runpy; runpy.run_path({script!r})"
    if cold:
        code = ("import os, tempfile; os.environ['XDG_CACHE_HOME'] = "
                "tempfile.mkdtemp(prefix='astjax-cold-')\n" + code)
    return first_call(code)


def main():
    ok, why = astjax.backends()["c"]
    if not ok:
        print(f"\njit backend 'c' is not available here: {why}")
        return {}
    x = np.random.default_rng(0).standard_normal((1000, 1000)).astype(np.float32)
    jc = astjax.jit(poly, backend="c")
    jn = astjax.jit(poly)
    assert np.array_equal(jc(x), poly(x))
    t_np, t_c, np_ratio = compare(poly, jc, x)
    t_jn, t_c2, jn_ratio = compare(jn, jc, x)
    rows = [("poly: plain NumPy", ms(t_np), "1000x1000 f32"),
            ("poly: jit, NumPy backend", ms(t_jn), ""),
            ("poly: jit, backend='c'", ms(min(t_c, t_c2)), ""),
            ("poly: NumPy / jit c", f"{np_ratio:.2f}x", "goal >= 5"),
            ("poly: jit numpy / jit c", f"{jn_ratio:.2f}x", "")]
    out = {"poly_numpy_over_c": np_ratio, "poly_jitnumpy_over_c": jn_ratio}
    try:
        import jax
        jax.config.update("jax_platforms", "cpu")
        jpoly = jax.jit(poly)
        xj = jax.numpy.asarray(x)

        def jax_poly(v):
            return jpoly(v).block_until_ready()
        t_c3, t_jax, jax_ratio = compare(lambda: jc(x), lambda: jax_poly(xj))
        rows += [("poly: jax.jit", ms(t_jax), f"jax {jax.__version__}, CPU"),
                 ("poly: jit c / jax.jit", f"{jax_ratio:.2f}x", "goal <= 0.5")]
        out["poly_c_over_jax"] = jax_ratio
    except ImportError:
        rows.append(("poly: jax.jit", "-", "jax not importable"))
    warm, _ = _first_call(cold=False)
    cold, _ = _first_call(cold=True)
    rows += [("first call, warm disk cache", ms(warm), "goal < 50 ms (fresh process)"),
             ("first call, cold disk cache", ms(cold), "compiles the kernel")]
    report("jit with compiled C kernels (backend='c')", rows)
    out.update(first_call_warm_ms=warm * 1e3, first_call_cold_ms=cold * 1e3)
    return out


if __name__ == "__main__":
    main()
