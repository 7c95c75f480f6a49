"""First-call latency: how long the first call of a transformed function takes.

Each figure is the median of three fresh processes (bench/common.py ``first_call``):
the in-memory caches of generated code are empty, the bytecode caches on disk warm
(as an installed package has them), one BLAS thread (see below).  For the seeds'
MLP (784-512-512-10, batch 128, float32, ``astjax/demo.py``) it prints:

  first call of grad(loss), vmap(grad(loss)) (per-example gradients), jit(loss),
  jit(grad(loss)) -- transformation included -- and of them the transformation
  alone (first call minus a second call);
  ``import astjax`` in a fresh process;
  the desugaring passes (astjax/frontend/passes) on the MLP's two functions.

The issue's goal: grad(loss) under 50 ms.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)     # this checkout's astjax, here and in the fresh processes
os.environ["PYTHONPATH"] = os.pathsep.join(
    [ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
# one BLAS thread in the fresh processes: on a small shared machine OpenBLAS threads
# spinning against other load make a 4 ms matrix product take 100 ms or more, which
# would swamp the transformation these figures are about (ASTJAX_BENCH_BLAS_THREADS)
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, os.environ.get("ASTJAX_BENCH_BLAS_THREADS", "1"))
from common import first_call, ms, report  # noqa: E402

SETUP = """
import time, numpy as np
t_import = time.perf_counter()
import astjax
from astjax.demo import init_params, loss
rng = np.random.default_rng(0)
params = init_params((784, 512, 512, 10), rng)
batch = (rng.standard_normal((128, 784)).astype(np.float32),
         rng.standard_normal((128, 10)).astype(np.float32))
"""

CASES = {
    "grad(loss)": ("astjax.grad(loss)", "(params, batch)"),
    "vmap(grad(loss)), 16 examples": (
        "astjax.vmap(astjax.grad(loss), in_axes=(None, 0))",
        "(params, (batch[0][:16, None, :], batch[1][:16, None, :]))"),
    "jit(loss)": ("astjax.jit(loss)", "(params, batch)"),
    "jit(grad(loss))": ("astjax.jit(astjax.grad(loss))", "(params, batch)"),
}


def _code(make, args):
    return SETUP + f"""
f = {make}
args = {args}
t0 = time.perf_counter(); f(*args); t1 = time.perf_counter()
f(*args); t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""


def import_seconds(runs=3):
    """``import astjax`` in a fresh process (median of ``runs``, after a warm-up)."""
    code = "import time; t = time.perf_counter(); import astjax; print(time.perf_counter() - t)"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out = []
    for _ in range(runs + 1):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True, env=env)
        out.append(float(done.stdout.split()[0]))
    out = sorted(out[1:])
    return out[len(out) // 2]


def passes_seconds(repeat=200):
    """The desugaring pipeline on the MLP's ``loss`` and ``predict``, per function, as
    ``astjax/frontend/source.py`` runs it (once per function, on a fresh parse)."""
    import copy
    from astjax.demo import loss, predict
    from astjax.frontend import passes
    from astjax.frontend.source import get_function_source
    nodes = [get_function_source(f).node for f in (loss, predict)]
    best = float("inf")
    for _ in range(5):
        fresh = [copy.deepcopy(n) for _ in range(repeat) for n in nodes]
        t0 = time.perf_counter()
        for node in fresh:
            passes.run(node, copy=False)
        best = min(best, (time.perf_counter() - t0) / len(fresh))
    return best


def main():
    rows, figures = [], {}
    for label, (make, args) in CASES.items():
        first, second = first_call(_code(make, args))
        rows.append((f"first call of {label}", ms(first),
                     "goal < 50 ms" if label == "grad(loss)" else ""))
        rows.append(("  of which transformation", ms(first - second), ""))
        figures[label] = first * 1e3
    rows.append(("import astjax (fresh process)", ms(import_seconds()), ""))
    rows.append(("desugaring passes, per function", ms(passes_seconds()), ""))
    report("first-call latency, MLP 784-512-512-10, batch 128, f32 (fresh processes)", rows)
    return {"grad_first_call_ms": figures["grad(loss)"], **{
        f"{k}_ms": v for k, v in figures.items()}}


if __name__ == "__main__":
    main()
