"""Why a CUDA-graph capture is refused on a real GPU: captures the MLP's jit(grad) and
FWI's jit(value_and_grad) and prints each refusal's whole traceback (the fake CuPy of
the tests cannot see what CuPy does inside its own functions)."""
from __future__ import annotations

import os
import sys
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
import astjax  # noqa: E402
from astjax.kernels import cuda_graph  # noqa: E402

_plain = cuda_graph._refusal


def _loud(e):
    print("".join(traceback.format_exception(e)), flush=True)
    return _plain(e)


def main():
    import cupy
    cuda_graph._refusal = _loud
    cuda_graph.enable(True)
    import mlp
    import wave
    rng = np.random.default_rng(0)
    sizes = (784, 512, 512, 10)
    params = mlp.init_params(sizes, rng)
    batch = mlp.make_batch(rng, 128, sizes, mlp.init_params(sizes, np.random.default_rng(1)))
    g = astjax.jit(astjax.grad(mlp.loss), backend="cuda")
    dp, db = astjax.device_put(params), astjax.device_put(batch)
    for _ in range(3):
        g(dp, db)
    print("MLP:", cuda_graph.stats(), flush=True)
    n = int(os.environ.get("N", "300"))
    _, velocity, problem, observed = wave.setup(n, n, 1000, np.float32)
    dev = {k: cupy.asarray(v) if isinstance(v, np.ndarray) else v for k, v in problem.items()}
    vg = astjax.jit(astjax.value_and_grad(wave.misfit), backend="cuda")
    v, obs = cupy.asarray(velocity), cupy.asarray(observed)
    for _ in range(3):
        vg(v, observed=obs, **dev)
    print("FWI:", cuda_graph.stats(), flush=True)


if __name__ == "__main__":
    main()
