"""The seeds' MLP under ``jit(grad)`` with compiled kernels (issue 12's MLP row).

What makes it fast must not change its numbers: tanh layers as vmath kernels
(``kernels/backend.py: NUMPY_FASTER`` chosen by the loops NumPy runs here), and
kernels in code that calls BLAS keeping to one thread unless the work is large
(``BLAS_THREADS_FACTOR``).  The gradient is checked against eager ``grad`` (NumPy's
own tanh) and against float64 central finite differences.
"""
from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_tree_close, numerical_grad

import astjax
from astjax.demo import init_params, loss
from astjax.kernels import backend as kbackend

pytestmark = pytest.mark.skipif(not kbackend.available()[0], reason="no C compiler")


@pytest.fixture
def tanh_as_kernel(monkeypatch):
    """tanh compiled whatever this machine's NumPy has (on AVX-512 NumPy keeps it)."""
    monkeypatch.setattr(kbackend, "NUMPY_FASTER", kbackend.NUMPY_FASTER - {"tanh"})


def _problem(sizes, batch, dtype, seed=0):
    rng = np.random.default_rng(seed)
    params = init_params(sizes, rng, dtype)
    data = (rng.standard_normal((batch, sizes[0])).astype(dtype),
            rng.standard_normal((batch, sizes[-1])).astype(dtype))
    return params, data


def test_numpy_faster_follows_the_loops_numpy_runs_here():
    want = (kbackend.NUMPY_FASTER_AVX512 if kbackend._numpy_has_avx512()
            else kbackend.NUMPY_FASTER_AVX2)
    assert kbackend.NUMPY_FASTER == want


def test_mlp_jit_grad_runs_tanh_kernels_and_equals_eager(tanh_as_kernel):
    params, data = _problem((784, 512, 512, 10), 128, np.float32)
    jg = astjax.jit(astjax.grad(loss), backend="c")
    got, want = jg(params, data), astjax.grad(loss)(params, data)
    text = astjax.make_source(jg)(params, data)
    assert "vm_tanh" in text and "run_fused(" not in text.split("def ")[1]
    for (gw, gb), (ww, wb) in zip(got, want):
        assert gw.dtype == gb.dtype == np.float32
        # kernel tanh and NumPy's differ by an ulp or two: the gradients by as little
        np.testing.assert_allclose(gw, ww, rtol=1e-4, atol=1e-5 * np.abs(ww).max())
        np.testing.assert_allclose(gb, wb, rtol=1e-4, atol=1e-5 * np.abs(wb).max())
    again = jg(params, data)        # second call: plans and pooled buffers reused
    for (a, b), (c, d) in zip(got, again):
        assert np.array_equal(a, c) and np.array_equal(b, d)


def test_mlp_jit_grad_float64_matches_finite_differences(tanh_as_kernel):
    params, data = _problem((5, 4, 4, 3), 6, np.float64, seed=1)
    jg = astjax.jit(astjax.grad(loss), backend="c")
    got = jg(params, data)
    assert "vm_tanh(" in astjax.make_source(jg)(params, data)
    assert_tree_close(got, numerical_grad(loss, (params, data)), rtol=1e-6, atol=1e-8)
    assert_tree_close(got, astjax.grad(loss)(params, data), rtol=1e-12, atol=1e-13)


def _kernel_costs(f, *args):
    jf = astjax.jit(f, backend="c")
    jf(*args)
    gen = jf._astjax_source(*args)
    return [v.kernel.cost for k, v in gen.namespace.items() if k.endswith("_kernel")]


def layer(x, W, b):
    return np.tanh(np.dot(x, W) + b)


def bias_tanh(x, b):
    return np.tanh(x + b)


def test_kernels_in_code_calling_blas_need_more_work_for_threads(tanh_as_kernel):
    rng = np.random.default_rng(0)
    x, W = rng.standard_normal((8, 6)), rng.standard_normal((6, 5))
    b = rng.standard_normal(5)
    [with_blas] = _kernel_costs(layer, x, W, b)
    [without] = _kernel_costs(bias_tanh, x @ W, b)
    assert without >= 1
    assert with_blas == without / kbackend.BLAS_THREADS_FACTOR
    assert kbackend.calls_blas(astjax.jit(layer)._astjax_source(x, W, b).core[0][0].body)


def test_large_elementwise_work_in_blas_code_still_uses_threads(tanh_as_kernel, monkeypatch):
    """1000x1000 after a product: past the raised threshold (the results are the
    same on any number of threads: every element is computed alike)."""
    from astjax.kernels import runtime as kruntime
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1000, 8)).astype(np.float32)
    W = rng.standard_normal((8, 1000)).astype(np.float32)
    b = rng.standard_normal(1000).astype(np.float32)
    [cost] = _kernel_costs(layer, x, W, b)
    assert 1000 * 1000 * cost >= kruntime.MIN_PARALLEL_WORK
    assert 128 * 512 * cost < kruntime.MIN_PARALLEL_WORK     # the MLP's layers: one
    monkeypatch.setenv("ASTJAX_NUM_THREADS", "2")
    two = astjax.jit(layer, backend="c")(x, W, b)
    monkeypatch.setenv("ASTJAX_NUM_THREADS", "1")
    one = astjax.jit(layer, backend="c")(x, W, b)
    assert np.array_equal(one, two)
