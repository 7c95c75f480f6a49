"""Transformations of code calling ``pmap(f, static_broadcasted_argnums=...)`` (issue 14).

As JAX compiles one program per static value, astjax makes one plan per value: the
transformations read ``sh.shard_map_call(sh.static_plan(plan, (k,)), (v,))``, and
``static_plan`` gives (and caches) the pmap of ``f`` with ``k`` bound.  Static
values may drive Python control flow (``range(k)``, ``if mode == ...``), may come
first, and may differ between calls of one jitted function.  Checked against a
single-device NumPy loop and central finite differences in float64; differentiating
with respect to a static argument, a static value per vmap example and an unhashable
one are errors, as in JAX.
"""
from __future__ import annotations

import numpy as np
import pytest

import astjax
from conftest import numerical_grad
from astjax import lax
from astjax.errors import TransformError

N = 4
RNG = np.random.default_rng(1402)
V = RNG.standard_normal((N, 3))
T = RNG.standard_normal(V.shape)
W = RNG.standard_normal(V.shape)


@pytest.fixture(autouse=True)
def _devices(monkeypatch):
    monkeypatch.setenv("ASTJAX_NUM_CPU_DEVICES", str(N))


def step(v, k, mode):
    for _ in range(k):
        v = np.sin(v) + 0.5 * v
    if mode == "mean":
        s = lax.pmean(v ** 2, "d")
    else:
        s = lax.psum(v ** 2, "d")
    return s * v


def step_ref(vs, k, mode):
    """One device: the same program with the collective over the rows."""
    for _ in range(k):
        vs = np.sin(vs) + 0.5 * vs
    s = np.mean(vs ** 2, axis=0) if mode == "mean" else np.sum(vs ** 2, axis=0)
    return s * vs


PM = astjax.pmap(step, axis_name="d", static_broadcasted_argnums=(1, 2))


def scale_first(k, v):
    return lax.psum(np.tanh(v) * k, "d")


PM_FIRST = astjax.pmap(scale_first, axis_name="d", static_broadcasted_argnums=0)


def fd_grad(f, x):
    return numerical_grad(f, (x,))


def close(a, b, tight=False):
    np.testing.assert_allclose(a, b, rtol=1e-12 if tight else 1e-6,
                               atol=1e-12 if tight else 1e-7)


@pytest.mark.parametrize("k,mode", [(0, "sum"), (1, "mean"), (2, "sum"), (3, "mean")])
def test_every_transformation_per_static_value(k, mode):
    ref = lambda v: step_ref(v, k, mode)                          # noqa: E731
    loss = lambda v: np.sum(np.sin(PM(v, k, mode)) * W)           # noqa: E731
    g_ref = fd_grad(lambda v: np.sum(np.sin(ref(v)) * W), V)
    close(PM(V, k, mode), ref(V), tight=True)
    close(astjax.grad(loss)(V), g_ref)
    val, g = astjax.value_and_grad(loss)(V)
    close(val, np.sum(np.sin(ref(V)) * W), tight=True)
    close(g, g_ref)
    close(astjax.jit(astjax.grad(loss))(V), g_ref)
    close(astjax.jit(lambda v: PM(v, k, mode))(V), ref(V), tight=True)
    out, tan = astjax.jvp(lambda v: PM(v, k, mode), (V,), (T,))
    close(out, ref(V), tight=True)
    close(tan, (ref(V + 1e-6 * T) - ref(V - 1e-6 * T)) / 2e-6)
    vs = np.stack([V, 2 * V])
    close(astjax.vmap(lambda v: PM(v, k, mode))(vs), np.stack([ref(V), ref(2 * V)]),
          tight=True)


def test_static_values_passed_through_a_transformed_function():
    # the static values are arguments of the jitted/differentiated function: one plan
    # per value, chosen when the call runs
    f = lambda v, k, mode: np.sum(np.sin(PM(v, k, mode)) * W)     # noqa: E731
    jg = astjax.jit(astjax.grad(f))
    for k, mode in [(1, "sum"), (2, "mean"), (1, "sum")]:
        g_ref = fd_grad(lambda v: np.sum(np.sin(step_ref(v, k, mode)) * W), V)
        close(jg(V, k, mode), g_ref)
        close(astjax.grad(f)(V, k, mode), g_ref)
    plans = {tuple(v for _, v in k): p for k, p in PM._astjax_plan.pmapped.specialized.items()}
    assert {(1, "sum"), (2, "mean")} <= set(plans)
    assert plans[(1, "sum")] is not plans[(2, "mean")]


def test_equal_static_values_of_other_types_get_their_own_plan():
    # 1 == 1.0 == True, but f may tell them apart: one plan per (type, value)
    pm = astjax.pmap(flagged, axis_name="d", static_broadcasted_argnums=1)
    v = np.ones((N, 1))
    np.testing.assert_array_equal(pm(v, 1), v)
    np.testing.assert_array_equal(pm(v, True), v + 1)
    np.testing.assert_array_equal(astjax.jit(lambda v: pm(v, 1.0))(v), v + 2)
    assert len(pm._astjax_plan.pmapped.specialized) == 3


def flagged(v, k):
    if isinstance(k, bool):
        return v + 1.0
    if isinstance(k, float):
        return v + 2.0
    return v


def test_a_static_first_argument_and_second_order():
    ref = lambda v, k: np.repeat(np.sum(np.tanh(v) * k, axis=0, keepdims=True), N, 0)  # noqa
    close(PM_FIRST(2.5, V), ref(V, 2.5), tight=True)
    loss = lambda v: np.sum(np.sin(PM_FIRST(2.5, v)) * W)        # noqa: E731
    g_ref = fd_grad(lambda v: np.sum(np.sin(ref(v, 2.5)) * W), V)
    close(astjax.grad(loss)(V), g_ref)
    # d/dv of <grad, T>: the jvp of the gradient against differences of the gradient
    gg = astjax.jvp(astjax.grad(loss), (V,), (T,))[1]
    g = astjax.grad(loss)
    close(gg, (g(V + 1e-6 * T) - g(V - 1e-6 * T)) / 2e-6, tight=False)


def test_static_arguments_are_not_differentiated_or_batched():
    with pytest.raises(TransformError, match="static_broadcasted_argnums"):
        astjax.grad(lambda k: np.sum(PM_FIRST(k, V)))(2.0)
    with pytest.raises(TransformError, match="static_broadcasted_argnums"):
        astjax.jvp(lambda k: PM_FIRST(k, V), (2.0,), (1.0,))
    with pytest.raises(TransformError, match="differs per example") as e:
        astjax.vmap(lambda k, v: PM_FIRST(k, v))(np.array([1.0, 2.0]), np.stack([V, V]))
    assert "test_sharding_static.py" in str(e.value)
    with pytest.raises(TransformError, match="hashable") as e:
        astjax.jit(lambda v, k: PM_FIRST(k, v))(V, [2.0])
    assert "test_sharding_static.py" in str(e.value)


def test_eval_shape_through_the_static_plan():
    from astjax.shapes import ShapeDtypeStruct
    want = ShapeDtypeStruct(V.shape, V.dtype)
    assert astjax.eval_shape(lambda v: PM(v, 2, "sum"), V) == want
    assert astjax.eval_shape(astjax.grad(lambda v: np.sum(PM(v, 1, "mean"))), V) == want
    assert astjax.eval_shape(PM_FIRST, 2.0, V) == want
