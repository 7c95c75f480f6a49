"""The CUDA backend on a GPU against jax.jit on the same GPU, in one run.

    python bench/gpu.py            (needs CuPy and a GPU; JAX with CUDA for the
                                    comparisons, else those rows say so)

Prints, measured in the same run on the same device:
  device-to-device copy bandwidth of 4096² float32 (the roofline for poly)
  poly on 4096² float32: astjax jit(backend="cuda") and jax.jit, as bandwidth
                                                 (goal >= 80% of the copy's)
  wave simulation forward, 300²x1000 and 2000²x1000 float32 (goal <= jax.jit)
  FWI value_and_grad of the misfit, 300²x1000      (goal <= jax.jit)
  MLP jit(grad), 784-512-512-10, batch 128          (goal <= 1.2x jax.jit(grad))
  per-kernel launch overhead: one jitted poly on 1024 elements, a bare RawKernel
  launch, jax.jit of the same
  a wave step's kernel sequence replayed as a CUDA graph (when capture works)
Sizes can be reduced for a quick look: ``--quick``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))          # this checkout's astjax
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
from common import ms, report  # noqa: E402

import astjax  # noqa: E402
from astjax.kernels import cuda_runtime as cr  # noqa: E402


def gpu_time(fn, *args, repeat=5, number=None, sync=None):
    """Best seconds per call, the device synchronized around each round."""
    sync = sync or _sync
    fn(*args)
    sync()
    if number is None:
        number = 1
        while True:
            t0 = time.perf_counter()
            for _ in range(number):
                fn(*args)
            sync()
            if time.perf_counter() - t0 > 0.05 or number >= 1 << 14:
                break
            number *= 2
    best = float("inf")
    for _ in range(repeat):
        sync()
        t0 = time.perf_counter()
        for _ in range(number):
            out = fn(*args)
        sync(out)
        best = min(best, (time.perf_counter() - t0) / number)
    return best


def graph_time(call, repeat=5):
    """Seconds per call of ``call`` (a jit(backend="cuda") call) with CUDA-graph replay
    on: a warm-up call, the capturing call, then the best of ``repeat`` timed calls;
    and a note saying whether they replayed (``cuda_graph.stats``)."""
    from astjax.kernels import cuda_graph
    cuda_graph.enable(True)
    try:
        before = cuda_graph.stats()
        call()
        call()
        t = gpu_time(call, repeat=repeat, number=1)
        after = cuda_graph.stats()
    finally:
        cuda_graph.enable(False)
    replays = after["replays"] - before["replays"]
    if after["refused"] > before["refused"]:
        return t, f"capture refused, ran eagerly: {after['last_refusal']}"
    return t, f"{replays} replays"


def same_replayed(replayed, eager, *args, **kwargs):
    """Whether a replayed call gives the eager call's arrays, bit for bit."""
    import cupy
    from astjax.kernels import cuda_graph
    cuda_graph.enable(True)
    try:
        got = astjax.tree_util.tree_leaves(replayed(*args, **kwargs))
    finally:
        cuda_graph.enable(False)
    want = astjax.tree_util.tree_leaves(eager(*args, **kwargs))
    return all(bool(cupy.array_equal(a, b)) for a, b in zip(got, want))


def _sync(out=None):
    import cupy
    cupy.cuda.get_current_stream().synchronize()
    if out is not None:
        import jax
        for leaf in jax.tree_util.tree_leaves(out):
            if hasattr(leaf, "block_until_ready"):
                leaf.block_until_ready()


def _jax():
    try:
        import jax
        import jax.numpy as jnp
        if not any(d.platform == "gpu" for d in jax.devices()):
            return None, "JAX sees no GPU"
        jax.config.update("jax_enable_x64", False)
        return (jax, jnp), ""
    except Exception as e:        # noqa: BLE001
        return None, f"no JAX: {e}"


def _example_on(module_name, jnp, jlax):
    """An example module executed again with np -> jax.numpy, lax -> jax.lax."""
    import importlib.util
    path = os.path.join(HERE, "..", "examples", f"{module_name}.py")
    spec = importlib.util.spec_from_file_location(f"{module_name}_jax", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.np, mod.lax = jnp, jlax
    return mod


def copy_bandwidth(x):
    import cupy
    y = cupy.empty_like(x)
    t = gpu_time(lambda: cupy.copyto(y, x))
    return 2 * x.nbytes / t


def bench_poly(jx, n=4096):
    import cupy
    from programs_poly import poly
    x = cupy.asarray(np.random.default_rng(0).standard_normal((n, n)).astype(np.float32))
    bw = copy_bandwidth(x)
    jf = astjax.jit(poly, backend="cuda")
    t = gpu_time(jf, x)
    rows = [("copy bandwidth (device to device)", f"{bw / 1e9:.0f} GB/s", ""),
            ("poly astjax cuda", ms(t),
             f"{2 * x.nbytes / t / 1e9:.0f} GB/s = {2 * x.nbytes / t / bw:.0%} of copy "
             "(goal >= 80%)")]
    if jx:
        jax, jnp = jx
        xj = jnp.asarray(x.get())
        tj = gpu_time(jax.jit(poly), xj)
        rows.append(("poly jax.jit", ms(tj), f"{2 * x.nbytes / tj / 1e9:.0f} GB/s"))
    report(f"poly on {n}x{n} float32", rows)


def bench_wave(jx, sizes, steps):
    import cupy
    import wave as wave_example
    for n in sizes:
        _, velocity, problem, observed = wave_example.setup(n, n, steps, np.float32)
        dev = {k: cupy.asarray(v) if isinstance(v, np.ndarray) else v
               for k, v in problem.items()}
        v = cupy.asarray(velocity)
        fwd = astjax.jit(wave_example.simulate, backend="cuda")
        t = gpu_time(lambda: fwd(v, **dev), repeat=3, number=1)
        rows = [("forward astjax cuda", ms(t), "")]
        fwd_g = astjax.jit(wave_example.simulate, backend="cuda")
        tg_, note = graph_time(lambda: fwd_g(v, **dev))
        rows.append(("forward, ASTJAX_CUDA_GRAPHS=1", ms(tg_),
                     f"{note}; same result: {same_replayed(fwd_g, fwd, v, **dev)}"))
        fwd_f = astjax.jit(wave_example.simulate, backend="cuda", fastmath=True)
        tf = gpu_time(lambda: fwd_f(v, **dev), repeat=3, number=1)
        rows.append(("forward, fastmath=True", ms(tf), "within a few ulp, not bit-identical"))
        if jx:
            jax, jnp = jx
            jw = _example_on("wave", jnp, jax.lax)
            jprob = {k: jnp.asarray(val) if isinstance(val, np.ndarray) else val
                     for k, val in problem.items()}
            static = ("receiver_row", "dx", "dy", "dt")
            jf = jax.jit(jw.simulate, static_argnames=static)
            tj = gpu_time(lambda: jf(jnp.asarray(velocity), **jprob), repeat=3, number=1)
            rows += [("forward jax.jit", ms(tj), ""),
                     ("astjax / jax", f"{t / tj:.2f}x", "goal <= 1.0"),
                     ("astjax graphs / jax", f"{tg_ / tj:.2f}x", "goal <= 1.0"),
                     ("astjax fastmath / jax", f"{tf / tj:.2f}x", "")]
        if n <= 512:
            obs = cupy.asarray(observed)
            vg = astjax.jit(astjax.value_and_grad(wave_example.misfit), backend="cuda")
            tg = gpu_time(lambda: vg(v, observed=obs, **dev), repeat=3, number=1)
            rows.append(("FWI value_and_grad astjax cuda", ms(tg), ""))
            vgg = astjax.jit(astjax.value_and_grad(wave_example.misfit), backend="cuda")
            tgg, note = graph_time(lambda: vgg(v, observed=obs, **dev))
            same = same_replayed(vgg, vg, v, observed=obs, **dev)
            rows.append(("FWI value_and_grad, ASTJAX_CUDA_GRAPHS=1", ms(tgg),
                         f"{note}; same result: {same}"))
            if jx:
                jvg = jax.jit(jax.value_and_grad(jw.misfit), static_argnames=static)
                tjg = gpu_time(lambda: jvg(jnp.asarray(velocity),
                                           observed=jnp.asarray(observed), **jprob),
                               repeat=3, number=1)
                rows += [("FWI value_and_grad jax.jit", ms(tjg), ""),
                         ("astjax / jax (FWI)", f"{tg / tjg:.2f}x", "goal <= 1.0"),
                         ("astjax graphs / jax (FWI)", f"{tgg / tjg:.2f}x", "goal <= 1.0")]
        report(f"wave {n}x{n}, {steps} steps, float32", rows)


def bench_mlp(jx):
    import cupy
    import mlp
    rng = np.random.default_rng(0)
    sizes = (784, 512, 512, 10)
    params = mlp.init_params(sizes, rng)
    teacher = mlp.init_params(sizes, np.random.default_rng(1))
    batch = mlp.make_batch(rng, 128, sizes, teacher)
    dparams, dbatch = astjax.device_put(params), astjax.device_put(batch)
    g = astjax.jit(astjax.grad(mlp.loss), backend="cuda")
    t = gpu_time(g, dparams, dbatch)
    rows = [("jit(grad) astjax cuda", ms(t), "")]
    gg = astjax.jit(astjax.grad(mlp.loss), backend="cuda")
    tgraph, note = graph_time(lambda: gg(dparams, dbatch))
    from astjax.kernels import cuda_graph
    cuda_graph.enable(True)
    try:
        same = all(bool(cupy.allclose(a, b, rtol=1e-6)) for a, b in zip(
            astjax.tree_util.tree_leaves(gg(dparams, dbatch)),
            astjax.tree_util.tree_leaves(g(dparams, dbatch))))
    finally:
        cuda_graph.enable(False)
    rows.append(("the same, ASTJAX_CUDA_GRAPHS=1", ms(tgraph),
                 f"same result: {same}; {note}"))
    del cupy
    if jx:
        jax, jnp = jx
        jm = _example_on("mlp", jnp, jax.lax)
        jg = jax.jit(jax.grad(jm.loss))
        jp = jax.tree_util.tree_map(jnp.asarray, params)
        jb = jax.tree_util.tree_map(jnp.asarray, batch)
        tj = gpu_time(jg, jp, jb)
        rows += [("jax.jit(grad)", ms(tj), ""),
                 ("astjax / jax", f"{t / tj:.2f}x", "goal <= 1.2")]
    report("MLP 784-512-512-10, batch 128, float32", rows)


def bench_launch(jx):
    import cupy
    from programs_poly import poly
    x = cupy.asarray(np.arange(1024, dtype=np.float32))
    jf = astjax.jit(poly, backend="cuda")
    t = gpu_time(jf, x)
    kern = cupy.RawKernel('extern "C" __global__ void nop(float *x) {}', "nop")
    tk = gpu_time(lambda: kern((1,), (32,), (x,)))
    rows = [("jit(poly) astjax cuda, 1024 elements", f"{t * 1e6:.1f} us",
             "host code + one launch"),
            ("bare RawKernel launch", f"{tk * 1e6:.1f} us", "")]
    if jx:
        jax, jnp = jx
        xj = jnp.asarray(x.get())
        tj = gpu_time(jax.jit(poly), xj)
        rows.append(("jax.jit(poly), 1024 elements", f"{tj * 1e6:.1f} us", ""))
    report("per-kernel launch overhead", rows)


def bench_graph():
    """One wave step's kernels captured in a CUDA graph and replayed."""
    import cupy
    from programs_poly import poly
    x = cupy.asarray(np.random.default_rng(0).standard_normal((300, 300)).astype(
        np.float32))
    jf = astjax.jit(poly, backend="cuda")

    def chain(v):
        for _ in range(10):
            v = jf(v) * np.float32(1e-3)
        return v
    t = gpu_time(chain, x)
    rows = [("10 jitted steps, launched", ms(t), "")]
    try:
        stream = cupy.cuda.Stream(non_blocking=True)
        with stream:
            chain(x)                       # allocate outside the capture
            stream.begin_capture()
            chain(x)
            graph = stream.end_capture()
        tg = gpu_time(lambda: graph.launch(stream), sync=lambda *a: stream.synchronize())
        rows += [("the same replayed as a CUDA graph", ms(tg), ""),
                 ("graph / launched", f"{tg / t:.2f}x", "")]
    except Exception as e:              # noqa: BLE001
        rows.append(("CUDA graph capture", "failed", f"{type(e).__name__}: {e}"[:80]))
    report("CUDA graph replay of a step's kernel sequence", rows)


def bench_step_graph(steps=200):
    """lax.scan of a jitted step: eager launches against astjax's StepGraph replay."""
    import cupy
    from astjax import lax
    from astjax.kernels import cuda_graph

    def step(h, x):
        h = np.tanh(h * np.float32(0.9) + x)
        return h, np.sum(h * h)
    jstep = astjax.jit(step, backend="cuda")
    r = np.random.default_rng(0)
    xs = cupy.asarray(r.standard_normal((steps, 4096)).astype(np.float32))
    h0 = cupy.asarray(r.standard_normal(4096).astype(np.float32))

    def run():
        return lax.scan(jstep, h0, xs)
    t = gpu_time(run, repeat=3, number=1)
    cuda_graph.enable(True)
    try:
        g = gpu_time(run, repeat=3, number=1)
        same = bool(cupy.allclose(run()[0], lax.scan(step, h0, xs)[0], rtol=1e-5))
    finally:
        cuda_graph.enable(False)
    report(f"lax.scan of a jitted step, {steps} steps of 4096 float32", [
        ("launched step by step", ms(t / steps), "per step"),
        ("replayed from one CUDA graph (ASTJAX_CUDA_GRAPHS)", ms(g / steps),
         f"per step, {t / g:.2f}x, same result: {same}")])


def bench_reductions():
    """Kept-axes reductions: a block per result against a thread per result."""
    import cupy
    from astjax.kernels import ir
    dev = cr.current_device()
    rows = []
    for shape, axis in (((512, 65536), 1), ((65536, 512), 1), ((4096, 4096), 0),
                        ((64, 1 << 20), 1)):
        x = cupy.asarray(np.random.default_rng(0).standard_normal(shape).astype(np.float32))
        kernel = ir.Kernel(f"bench_red_{shape[0]}_{axis}", ["x"],
                           [ir.Reduce("r", "x", "sum", axis, True)], ["r"])
        times = {}
        for label, forced in (("block", True), ("thread", False), ("chosen", None)):
            call = cr.CudaKernelCall(kernel, None, dev)
            if forced is not None:
                dev.reduce_rows = forced
            try:
                times[label] = gpu_time(call, x)
            finally:
                if forced is not None:
                    del dev.reduce_rows
        gbs = x.nbytes / times["chosen"] / 1e9
        rows.append((f"sum{shape} axis {axis}", ms(times["chosen"]),
                     f"{gbs:.0f} GB/s; block {ms(times['block'])}, thread "
                     f"{ms(times['thread'])}"))
    report("kept-axes reductions (chosen strategy)", rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes")
    ap.add_argument("--only", default="", help="comma-separated: poly,wave,wave300,mlp,"
                    "launch,graph,step_graph,reductions (default: all)")
    args = ap.parse_args(argv)
    if not cr.gpu_visible():
        print("bench/gpu.py: no GPU visible to CuPy (pip install \"astjax[cuda]\" on a "
              "machine with an NVIDIA GPU); nothing measured")
        return 0
    import cupy
    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    print(f"device: {props['name'].decode()}, CuPy {cupy.__version__}")
    jx, why = _jax()
    if jx is None:
        print(f"(no jax.jit comparisons: {why})")
    quick = args.quick
    benches = [
        lambda: bench_poly(jx, 1024 if quick else 4096),
        lambda: bench_wave(jx, (64,) if quick else (300, 2000), 100 if quick else 1000),
        lambda: bench_wave(jx, (64,) if quick else (300,), 100 if quick else 1000),
        lambda: bench_mlp(jx), lambda: bench_launch(jx),
        bench_graph, bench_step_graph, bench_reductions]
    names = ["poly", "wave", "wave300", "mlp", "launch", "graph", "step_graph",
             "reductions"]
    only = [n for n in args.only.split(",") if n] or [n for n in names if n != "wave300"]
    for name, bench in zip(names, benches):
        if name not in only:
            continue
        try:
            bench()
        except Exception:               # noqa: BLE001  (one row failing keeps the rest)
            import traceback
            lines = traceback.format_exc().strip().splitlines()
            print(f"bench {name}: failed:\n  " + "\n  ".join(lines[-8:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
