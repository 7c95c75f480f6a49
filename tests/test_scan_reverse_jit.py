"""Reverse mode through ``lax.scan`` under ``jit``: the host code of both sweeps.

``jit(grad)`` of a scan runs its forward and backward sweeps as Python loops, a
kernel call and the tape's bookkeeping per step (``runtime.py``: push/pop, ``meta``,
``trip_signature``, ``cots_complete``, ``compact``; kernels built for one thread,
``kernels/runtime.py``).  These pin the numbers: ``jit(grad)`` with C kernels and
with the NumPy backend equal eager ``grad`` (to the bit where the step is ``+ - * /``
and pads, within a few ulp where it calls ``tanh``/``sin``), and float64 gradients
meet central differences, for pytree carries, several saved values per step, tuple
``xs`` and dict ``ys``, ``reverse=True``, scans of 0, 1 and a few steps (around the
compiled loop's thresholds), ``length`` without ``xs``, and nested scans.
"""
import numpy as np
import pytest

import astjax
from astjax import lax
from astjax import runtime as rt
from conftest import numerical_grad

RNG = np.random.default_rng(7)


def _check(f, w, rest, exact, fd=True):
    """jit(grad) (C, NumPy backend) against eager grad; eager against differences."""
    want = astjax.grad(f)(w, *rest)
    for backend in ("c", "numpy"):
        got = astjax.jit(astjax.grad(f), backend=backend)(w, *rest)
        assert got.dtype == want.dtype and got.shape == want.shape
        if exact:
            np.testing.assert_array_equal(got, want, err_msg=backend)
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=backend)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14, err_msg=backend)
    if fd and w.dtype == np.float64:
        np.testing.assert_allclose(want, numerical_grad(f, (w, *rest)), rtol=1e-6,
                                   atol=1e-8)
    return want


# ------------------------------------------------------------------- programs

def _pytree(w, xs, reverse=False):
    """A dict carry holding a tuple, tuple ``xs``, dict ``ys``; the step saves several
    values (tanh, sin, products) for its backward trip."""
    scale = w[6:9]

    def step(carry, x):
        h, (a, b) = carry["h"], carry["s"]
        row, t = x
        z = np.tanh(h * scale + row * a[0])
        s = np.sin(b * t) * z
        new = {"h": z * 0.9 + s, "s": (a * np.cos(t) + s[:2], b + np.sum(z * row))}
        return new, {"y": z * s, "n": np.sum(s)}

    init = {"h": w[:3], "s": (w[3:5], w[5])}
    last, ys = lax.scan(step, init, xs, reverse=reverse)
    return (np.sum(ys["y"] ** 2) + np.sum(ys["n"]) + np.sum(last["h"])
            + np.sum(last["s"][0] * last["s"][1]))


def _pytree_xs(n):
    return (RNG.standard_normal((n, 3)), RNG.standard_normal(n))


def _stencil(u, xs, reverse=False):
    """The wave's pattern (bench/scan_host.py): a padded difference of a carried 2-D
    state, scaled per step; only ``+ - * /`` and pads."""
    def step(carry, x):
        past, present = carry
        new = np.pad((present[1:, :] - present[:-1, :]) / 3.0, ((0, 1), (0, 0))) * x \
            + past
        return (present, new), new[0]
    (past, present), ys = lax.scan(step, (u, u * 0.5), xs, reverse=reverse)
    return np.sum(ys * ys) + np.sum(present * past)


def _stencil_fwd(u, xs, reverse=False):
    def step(carry, x):
        past, present = carry
        new = np.pad((present[1:, :] - present[:-1, :]) / 3.0, ((0, 1), (0, 0))) * x \
            + past
        return (present, new), new[0]
    return lax.scan(step, (u, u * 0.5), xs, reverse=reverse)


# --------------------------------------------------------------------- tests

@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("n", [1, 2, 5])
def test_pytree_carry_tuple_xs_dict_ys(n, reverse):
    w = RNG.standard_normal(9) * 0.5
    _check(lambda w, xs: _pytree(w, xs, reverse), w, (_pytree_xs(n),), exact=False)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 12])
def test_stencil_scan_jit_grad_equals_eager_to_the_bit(n, reverse):
    u = RNG.standard_normal((5, 4))
    xs = 1.0 + 0.1 * RNG.standard_normal(n)
    if n == 0:      # the loss reads the outputs of zero steps: refused, every route
        from astjax.errors import ZeroStepsError
        for g in (astjax.grad, lambda f: astjax.jit(astjax.grad(f), backend="c")):
            with pytest.raises(ZeroStepsError):
                g(lambda u, xs: _stencil(u, xs, reverse))(u, xs)
        return
    _check(lambda u, xs: _stencil(u, xs, reverse), u, (xs,), exact=True)


@pytest.mark.parametrize("n", [1, 6])
def test_stencil_scan_float32(n):
    """float32 (no differences): jit(grad) equals eager grad to the bit."""
    u = RNG.standard_normal((6, 5)).astype(np.float32)
    xs = (1.0 + 0.1 * RNG.standard_normal(n)).astype(np.float32)
    g = _check(lambda u, xs: _stencil(u, xs, False), u, (xs,), exact=True, fd=False)
    assert g.dtype == np.float32


def test_stencil_cotangents_of_carry_and_ys():
    """Cotangents of both outputs (the final carry's two arrays and every row)."""
    u = RNG.standard_normal((4, 4))
    xs = 1.0 + 0.1 * RNG.standard_normal(7)
    c0, c1, cy = (RNG.standard_normal((4, 4)), RNG.standard_normal((4, 4)),
                  RNG.standard_normal((7, 4)))

    def f(u, xs, c0, c1, cy):
        (past, present), ys = _stencil_fwd(u, xs, False)
        return np.sum(c0 * past) + np.sum(c1 * present) + np.sum(cy * ys)
    _check(f, u, (xs, c0, c1, cy), exact=True)


def test_length_without_xs():
    def f(w):
        def step(c, _):
            a, b = c
            return (a * b + 0.5, np.tanh(a) - b * 0.25), a * b
        (a, b), ys = lax.scan(step, (w[:2], w[2:]), None, length=6)
        return np.sum(ys) + np.sum(a * b)
    _check(lambda w: f(w), RNG.standard_normal(4) * 0.5, (), exact=False)


def test_nested_scans():
    """A scan whose step runs a scan: both sweeps of both loops."""
    inner_xs = RNG.standard_normal((3, 2))

    def f(w, xs):
        def outer(c, x):
            def inner(d, y):
                e = np.sin(d * y) + d * x
                return e, np.sum(e * e)
            d, zs = lax.scan(inner, c * 0.5, inner_xs)
            return c + d * 0.1, np.sum(zs)
        c, ys = lax.scan(outer, w, xs)
        return np.sum(ys) + np.sum(c * c)
    _check(f, RNG.standard_normal(2) * 0.5, (RNG.standard_normal(5),), exact=False)


def test_nested_stencil_scans_exact():
    def f(u, xs):
        def outer(c, x):
            (past, present), rows = _stencil_fwd(c, xs[:3] * x, False)
            return present - past * 0.5, np.sum(rows)
        c, ys = lax.scan(outer, u, xs)
        return np.sum(ys) + np.sum(c * c)
    _check(f, RNG.standard_normal((4, 3)), (1.0 + 0.1 * RNG.standard_normal(4),),
           exact=True)


def test_several_saved_values_and_a_carried_mask_under_jit():
    """A carried boolean mask (no trip shares a signature) beside saved products."""
    masks = np.array([[True, True, True], [True, False, False], [True, True, True],
                      [False, True, False], [True, True, False]])

    def f(w, xs):
        def step(carry, m_next):
            c, m = carry
            a = c[m] * w[m]
            y = a * np.tanh(a)
            c = np.tanh(c * w + np.sum(y) * 0.5)
            return (c, m_next), np.sum(y * a)
        (c, _), ys = lax.scan(step, (np.ones(3), np.ones(3, bool)), xs)
        return np.sum(ys ** 2) + np.sum(c)
    _check(f, 1.0 + RNG.random(3), (masks,), exact=False)


# ------------------------------------------------------- the runtime helpers

def test_meta_views_are_shared_and_keep_structure():
    a = np.ones((2, 3), np.float32)
    b = np.arange(4.0)
    m = rt.meta((a, (b, None, 2.5), [a[0]], {"k": b}))
    assert m[0] is rt.meta(a + 1) and m[1][0] is rt.meta(b) and m[2][0] is rt.meta(a[1])
    assert m[1][1] is None and m[1][2] == 2.5 and m[3]["k"] is m[1][0]
    assert isinstance(m[2], list) and isinstance(m[3], dict)
    for v in (m[0], m[1][0]):
        assert v.strides == (0,) * v.ndim and not v.flags.writeable and not np.any(v)
    assert m[0].shape == (2, 3) and m[0].dtype == np.float32
    fresh = rt.meta((np.zeros((3, 7, 1), np.int16),))[0]      # a view not made before
    assert fresh.shape == (3, 7, 1) and fresh.dtype == np.int16


def test_cots_complete_checks():
    a = np.ones(2)
    checks = (("array", ("array", "array")), "last")
    assert rt.cots_complete(checks, (a, (a, a)), [None, a])
    assert rt.cots_complete(checks, [a, [a, a]], [a])
    assert not rt.cots_complete(checks, (a, (a, None)), [a])
    assert not rt.cots_complete(checks, (a, (a,)), [a])
    assert not rt.cots_complete(checks, (a, a), [a])
    assert not rt.cots_complete(checks, None, [a])
    assert not rt.cots_complete(checks, (a, (a, a)), [a, None])
    assert not rt.cots_complete(checks, (a, (a, a)), [])
    assert not rt.cots_complete(checks, (a, (a, np.float64(1.0))), [a])


def test_compact_copies_only_views_of_larger_arrays():
    a = np.arange(12.0).reshape(3, 4)
    assert rt.compact(a) is a
    row = rt.compact(a[1])
    assert row.base is None and np.array_equal(row, a[1])
    whole = a.reshape(12)
    assert rt.compact(whole) is whole            # a view of all of its base
    t = rt.compact((a[0], {"k": a[2]}, 3.0))
    assert t[0].base is None and t[1]["k"].base is None and t[2] == 3.0
