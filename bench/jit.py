"""jit on the CPU (NumPy backend).

Prints, measured in the same run (each ratio from interleaved rounds, common.compare):
  poly(x) = x + x*x + x*x*x on 1000x1000 float32: plain NumPy / jit(poly)   (goal >= 1.5)
  jit(grad(loss)) of the seeds' MLP / hand-written backprop                (goal <= 1.0)
  first call of jit(grad(loss)) in a fresh process                          (goal < 50 ms)
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import compare, first_call, ms, report  # noqa: E402
from mlp_grad import hand_backprop  # noqa: E402

import astjax  # noqa: E402
from astjax.demo import init_params, loss  # noqa: E402


def poly(x):
    return x + x * x + x * x * x


FIRST_CALL = """
import time, numpy as np
from astjax.demo import init_params, loss
import astjax
rng = np.random.default_rng(0)
params = init_params((784, 512, 512, 10), rng)
batch = (rng.standard_normal((128, 784)).astype(np.float32),
         rng.standard_normal((128, 10)).astype(np.float32))
g = astjax.jit(astjax.grad(loss))
t0 = time.perf_counter(); g(params, batch); t1 = time.perf_counter()
g(params, batch); t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""


def main():
    x = np.random.default_rng(0).standard_normal((1000, 1000)).astype(np.float32)
    jpoly = astjax.jit(poly)
    np.testing.assert_allclose(jpoly(x), poly(x), rtol=1e-6)
    t_np, t_jit, poly_ratio = compare(poly, jpoly, x)

    rng = np.random.default_rng(0)
    params = init_params((784, 512, 512, 10), rng)
    batch = (rng.standard_normal((128, 784)).astype(np.float32),
             rng.standard_normal((128, 10)).astype(np.float32))
    jgrad = astjax.jit(astjax.grad(loss))
    for (a, b), (c, d) in zip(jgrad(params, batch), hand_backprop(params, batch)):
        np.testing.assert_allclose(a, c, rtol=2e-3, atol=1e-3)
        np.testing.assert_allclose(b, d, rtol=2e-3, atol=1e-3)
    t_jg, t_hand, grad_ratio = compare(jgrad, hand_backprop, params, batch)
    first, steady = first_call(FIRST_CALL)
    report("jit on the CPU", [
        ("poly: plain NumPy", ms(t_np), "1000x1000 f32"),
        ("poly: jit(poly)", ms(t_jit), ""),
        ("poly: NumPy / jit", f"{poly_ratio:.2f}x", "goal >= 1.5"),
        ("MLP: jit(grad(loss))", ms(t_jg), ""),
        ("MLP: hand-written backprop", ms(t_hand), ""),
        ("MLP: jit(grad) / hand", f"{grad_ratio:.2f}x", "goal <= 1.0"),
        ("MLP: first call of jit(grad(loss))", ms(first), "goal < 50 ms"),
        ("  of which transformation", ms(first - steady), "first minus second call"),
    ])
    return {"poly_speedup": poly_ratio, "jit_grad_over_hand": grad_ratio,
            "first_call_ms": first * 1e3}


if __name__ == "__main__":
    main()
