"""Where the host time of a CUDA-backend call goes: a profile of many small calls.

    python bench/gpu_overhead.py [--calls 2000] [--top 25]

Profiles (cProfile, sorted by own time) ``jit(poly, backend="cuda")`` on 1024 float32
elements and ``jit(grad(mlp.loss), backend="cuda")`` at batch 128, after warm-up, so
the per-call Python work of the host code (dispatch, plan lookup, argument packing,
allocation) shows against the kernel launches themselves.  Needs CuPy and a GPU.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))

import astjax  # noqa: E402
from astjax.kernels import cuda_runtime as cr  # noqa: E402


def profile(label, fn, calls, top):
    import cupy
    for _ in range(20):
        fn()
    cupy.cuda.get_current_stream().synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    cupy.cuda.get_current_stream().synchronize()
    per_call = (time.perf_counter() - t0) / calls
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    cupy.cuda.get_current_stream().synchronize()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    print(f"\n==== {label}: {per_call * 1e6:.1f} us per call (unprofiled) ====")
    print("\n".join(line for line in out.getvalue().splitlines()[4:] if line.strip()))


def micro(calls):
    """The pieces of one small call, each timed alone (us per call, host side)."""
    import cupy
    from programs_poly import poly
    x = cupy.asarray(np.arange(1024, dtype=np.float32))
    out = cupy.empty_like(x)
    kern = cupy.RawKernel('extern "C" __global__ void k(long long n, const float *x, '
                          'float *y) { long long i = blockIdx.x * blockDim.x + threadIdx.x;'
                          ' if (i < n) y[i] = x[i] + x[i] * x[i]; }', "k")
    jf = astjax.jit(poly, backend="cuda")
    jf(x)
    n64 = np.int64(1024)

    def timed(fn):
        fn()
        cupy.cuda.get_current_stream().synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        cupy.cuda.get_current_stream().synchronize()
        return (time.perf_counter() - t0) / calls * 1e6
    rows = [("cupy.empty(1024, float32)", timed(lambda: cupy.empty(1024, np.float32))),
            ("RawKernel launch, 3 arguments", timed(lambda: kern((4,), (256,), (n64, x, out)))),
            ("launch + cupy.empty", timed(lambda: kern((4,), (256,), (
                n64, x, cupy.empty(1024, np.float32))))),
            ("x + x * x with CuPy (2 kernels)", timed(lambda: x + x * x)),
            ("astjax jit(poly)", timed(lambda: jf(x)))]
    print("\n==== host time of the pieces of a small call (us) ====")
    for label, us in rows:
        print(f"  {label:40s} {us:8.1f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args(argv)
    if not cr.gpu_visible():
        print("bench/gpu_overhead.py: no GPU visible to CuPy; nothing measured")
        return 0
    micro(args.calls)
    import cupy
    from programs_poly import poly
    x = cupy.asarray(np.arange(1024, dtype=np.float32))
    jf = astjax.jit(poly, backend="cuda")
    profile("jit(poly), 1024 float32", lambda: jf(x), args.calls, args.top)

    import mlp
    rng = np.random.default_rng(0)
    sizes = (784, 512, 512, 10)
    params = astjax.device_put(mlp.init_params(sizes, rng))
    batch = astjax.device_put(mlp.make_batch(rng, 128, sizes,
                                             mlp.init_params(sizes, np.random.default_rng(1))))
    g = astjax.jit(astjax.grad(mlp.loss), backend="cuda")
    profile("jit(grad(mlp.loss)), batch 128", lambda: g(params, batch),
            max(args.calls // 10, 50), args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
