"""Fast backward trips (``astjax/transforms/fast_trips.py``) give the general path's numbers.

A loop body whose values keep their shapes gets a second adjoint built from
same-shape rules, taken on the trips whose facts the forward trip checked.  Every
test here compares, bit for bit, the gradient with fast trips against the gradient
with the general adjoint only (``fast_trips.ENABLED = False``), under eager ``grad``,
``jit`` with C kernels and ``jit`` with the NumPy backend, and against central
differences in float64; bodies that change shapes, broadcast, or pad in other modes
must take the general path and stay right.
"""
import numpy as np
import pytest

import astjax
from astjax import generation, lax
from astjax.transforms import fast_trips


def _fd(f, x, eps=1e-6):
    x = np.array(x, float)
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        out[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return out


def _routes(f, argnums=0):
    g = astjax.grad(f, argnums=argnums)
    return {"grad": g, "jit_c": astjax.jit(g), "jit_numpy": astjax.jit(g, backend="numpy")}


def _all(f, args, argnums=0):
    generation.clear_cache()
    return {k: r(*args) for k, r in _routes(f, argnums).items()}


def _general(f, args, argnums, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(fast_trips, "ENABLED", False)
        got = _all(f, args, argnums)
    generation.clear_cache()
    return got


def _check(f, args, monkeypatch, argnums=0, fd=True, fast=True):
    """Every route equals the general adjoint to the bit; float64 meets differences."""
    got = _all(f, args, argnums)
    ref = _general(f, args, argnums, monkeypatch)
    for k in got:
        np.testing.assert_array_equal(np.signbit(got[k]), np.signbit(ref[k]), err_msg=k)
        np.testing.assert_array_equal(got[k], ref[k], err_msg=k)
    src = astjax.make_source(astjax.grad(f, argnums=argnums))(*args)
    assert ("rt.trip_fits(" in src) == fast, src
    if fd:
        x = args[argnums]
        rest = list(args)

        def at(v):
            rest[argnums] = v
            return f(*rest)
        np.testing.assert_allclose(got["grad"], _fd(at, x), rtol=1e-6, atol=1e-8)
    return got


RNG = np.random.default_rng(7)


def _stencil(c, w, xs):
    """A 2-D stencil step: slices, zero pads, products with a field, a source term."""
    def step(carry, amp):
        past, now = carry
        gx = np.pad((now[1:, :] - now[:-1, :]) / 0.5, ((0, 1), (0, 0))) / w
        gy = np.pad((now[:, 1:] - now[:, :-1]) / 0.5, ((0, 0), (0, 1)))
        lap = np.pad(gx[1:, :] - gx[:-1, :], ((1, 0), (0, 0))) + np.pad(
            gy[:, 1:] - gy[:, :-1], ((0, 0), (1, 0)))
        new = 2.0 * now - past + 0.1 * lap * c + amp * w
        return (now, new), new[1]
    zero = np.zeros_like(c)
    (_, last), rows = lax.scan(step, (zero, zero + 0.01 * c), xs)
    return np.sum(rows ** 2) + np.sum(last * w)


C = 1.0 + RNG.random((5, 4))
W = 1.0 + RNG.random((5, 4))
XS = RNG.standard_normal(6)


def test_stencil_scan_fast_equals_general_and_differences(monkeypatch):
    _check(_stencil, (C, W, XS), monkeypatch, argnums=0)
    _check(_stencil, (C, W, XS), monkeypatch, argnums=1)


def test_stencil_scan_float32(monkeypatch):
    args = (C.astype(np.float32), W.astype(np.float32), XS.astype(np.float32))
    got = _check(_stencil, args, monkeypatch, fd=False)
    assert got["grad"].dtype == np.float32


def test_stencil_scan_value_and_grad_of_the_wave_example_shape(monkeypatch):
    def f(c):
        return _stencil(c, W, XS)
    _check(f, (C,), monkeypatch)


def _pads_a(w, xs):
    def step(c, x):
        p = np.pad(c * w, ((1, 2), (0, 3)))
        c = np.sin(p[1:-2, :-3] + x) * 0.9 + p[:-3, 3:] * 0.1 + c * p[3:, 2:-1]
        return c, p[2:, 1:]
    c, ys = lax.scan(step, np.ones((3, 4)), xs)
    return np.sum(ys ** 2) + np.sum(c ** 2)


def _pads_b(w, xs):
    def step(c, x):
        p = np.pad(c, ((0, 0), (2, 1))) * x
        q = np.pad(p[:, 1:] * w[:, :1], ((3, 0), (0, 0)))
        c = c + 0.5 * p[:, 2:-1] - 0.25 * q[3:, 1:-1]
        return c, q
    c, ys = lax.scan(step, np.ones((3, 4)), xs)
    return np.sum(ys ** 2) + np.sum(c ** 2)


@pytest.mark.parametrize("f", [_pads_a, _pads_b])
def test_constant_pads_of_several_widths(f, monkeypatch):
    _check(f, (1.0 + RNG.random((3, 4)), 0.5 * RNG.standard_normal(4)), monkeypatch)


@pytest.mark.parametrize("mode", ["edge", "reflect", "wrap", "symmetric"])
def test_other_pad_modes_keep_their_general_rule(mode, monkeypatch):
    def f(w, xs):
        def step(c, x):
            p = np.pad(c, ((1, 1), (2, 0)), mode=mode)
            c = (p[1:-1, 2:] * w + p[:-2, :-2] * 0.5) * x
            return c, c
        c, ys = lax.scan(step, np.ones((3, 4)), xs)
        return np.sum(ys ** 2)
    _check(f, (RNG.random((3, 4)), 0.5 + RNG.random(3)), monkeypatch)


def test_broadcasting_operand_fails_its_fact_and_runs_general(monkeypatch):
    def f(b, xs):
        def step(c, x):
            c = np.tanh(c * b + x)          # b (3, 1) broadcasts against c (3, 4)
            return c, c[:, 1:] - c[:, :-1]
        c, ys = lax.scan(step, np.ones((3, 4)), xs)
        return np.sum(ys ** 2) + np.sum(c)
    _check(f, (RNG.random((3, 1)), RNG.standard_normal(5)), monkeypatch)
    # the fact about b fails on every trip: trip_fits gives None
    from astjax import runtime as rt
    assert rt.trip_fits((("same",),), ("sig",), np.ones((3, 1)), np.ones((3, 4))) is None


def test_python_loop_whose_carry_grows_takes_the_general_trips(monkeypatch):
    def f(w):
        y = w
        for _ in range(4):
            y = np.pad(y * 1.5, ((0, 1),)) - 0.25
        return np.sum(np.sin(y))
    _check(f, (RNG.random(3),), monkeypatch)


def test_python_loop_of_fixed_shape_with_a_shape_changing_helper(monkeypatch):
    def f(w):
        y = w
        for k in range(3):
            z = np.concatenate([y, y[:1]])          # not in the facts' whitelist
            y = z[1:] * w + np.sin(y)
        return np.sum(y ** 2)
    _check(f, (RNG.random(4),), monkeypatch, fast=False)


def test_slices_with_positive_stops_and_integer_indices(monkeypatch):
    def f(w, xs):
        def step(c, x):
            a = c[0:3, :] * w[1:, :]                # stop >= 0: the general acc_at
            b = c[2] * x                            # an integer index
            c = np.concatenate([a, c[3:, :]]) + b * 0.5
            return c, a[1:, 1:] - a[:-1, :-1]
        c, ys = lax.scan(step, np.ones((4, 3)), xs)
        return np.sum(ys ** 2) + np.sum(c)
    _check(f, (RNG.random((4, 3)), RNG.standard_normal(3)), monkeypatch)


def test_mixed_dtypes_fail_the_dtype_fact(monkeypatch):
    w64 = RNG.random((3, 4))

    def f(c0, xs):
        def step(c, x):
            c = (c * w64)[:, 1:] - (c * w64)[:, :-1]    # float32 * float64
            c = np.pad(c, ((0, 0), (0, 1))).astype(np.float32) + x
            return c, c
        c, ys = lax.scan(step, c0, xs)
        return np.sum(ys ** 2)
    _check(f, (np.ones((3, 4), np.float32), np.ones(3, np.float32)), monkeypatch, fd=False)


def test_empty_slices(monkeypatch):
    def f(w, xs):
        def step(c, x):
            d = c[1:, :] - c[:-1, :]                    # (0, 3) of a (1, 3) carry
            c = c * x + np.pad(d, ((0, 1), (0, 0))) * w
            return c, c
        c, ys = lax.scan(step, np.ones((1, 3)), xs)
        return np.sum(ys ** 2)
    _check(f, (RNG.random((1, 3)), 0.5 + RNG.random(3)), monkeypatch)
    # an axis shorter than the slice's widths: padding the slice does not give it back
    from astjax import runtime as rt
    fact = (("pad", ((1, 0), (0, 0))),)
    assert rt.trip_fits(fact, "s", np.ones((0, 3)), np.ones((0, 3))) is None
    assert rt.trip_fits(fact, "s", np.ones((0, 3)), np.ones((1, 3))) == "s"


def test_second_order_through_fast_trips():
    def f(c):
        return _stencil(c, W, XS)
    v = RNG.standard_normal(C.shape)
    hvp = astjax.jvp(astjax.grad(f), (C,), (v,))[1]
    g = astjax.grad(f)
    fd = (g(C + 1e-6 * v) - g(C - 1e-6 * v)) / 2e-6
    np.testing.assert_allclose(hvp, fd, rtol=1e-5, atol=1e-7)
    gg = astjax.grad(lambda c: np.sum(astjax.grad(f)(c) * v))(C)
    np.testing.assert_allclose(gg, hvp, rtol=1e-6, atol=1e-8)


def test_vmap_of_grad_through_fast_trips():
    cs = 1.0 + RNG.random((3,) + C.shape)
    g = astjax.grad(lambda c: _stencil(c, W, XS))
    got = astjax.vmap(g)(cs)
    for k in range(3):
        np.testing.assert_allclose(got[k], g(cs[k]), rtol=1e-12, atol=1e-12)


def test_vjp_residuals_through_fast_trips():
    out, back = astjax.vjp(lambda c: _stencil(c, W, XS), C)
    g = astjax.grad(lambda c: _stencil(c, W, XS))(C)
    np.testing.assert_allclose(back(1.0)[0], g, rtol=1e-12)


def test_trip_signature():
    from astjax import runtime as rt
    a = np.zeros((2, 3), np.float32)
    assert rt.trip_signature((a, a), 3) == rt.trip_signature((a + 1, a), 3)
    assert rt.trip_signature(a) != rt.trip_signature(a.astype(np.float64))
    assert rt.trip_signature(a) != rt.trip_signature(np.zeros((3, 2), np.float32))
    assert rt.trip_signature(2) != rt.trip_signature(3)
    assert rt.trip_signature(2.0) == rt.trip_signature(3.5)
    assert rt.trip_signature(object()) is None
    # what a boolean mask selects depends on its values, not its shape
    assert rt.trip_signature(np.array([True, False])) is None
    # ... inside the carry's tuple (or list) too
    assert rt.trip_signature((a, np.array([True, False]))) is None
    assert rt.trip_signature([(a, [np.array([True])])], 3) is None
    assert not rt.same_signature(None, None)


def test_cot_or_zero_is_negative_zero():
    from astjax import runtime as rt
    z = rt.cot_or_zero(None, np.ones((2, 2), np.float32))
    assert z.dtype == np.float32 and np.all(np.signbit(z)) and not np.any(z)
    v = np.array([-0.0, 0.0, 1.0], np.float32)
    assert np.array_equal(np.signbit(rt.cot_or_zero(None, v) + v), np.signbit(v))


def test_scanned_boolean_masks_select_different_shapes(monkeypatch):
    masks = np.array([[True, True, True], [True, False, False], [True, True, True],
                      [False, True, False]])
    v = 1.0 + RNG.random(3)

    def f(w, xs):
        def step(c, m):
            a = c[m] * w[m]                  # 3 entries on some trips, 1 on others
            y = a * v                        # (1,) * (3,) broadcasts: no fast rule fits
            c = np.tanh(c + y * 0.5)
            return c, np.sum(y)
        c, ys = lax.scan(step, np.ones(3), xs)
        return np.sum(ys ** 2) + np.sum(c)
    # the masks come from the scanned inputs: their values, which decide what the
    # facts see, are not part of any signature, so no trip is fast
    _check(f, (1.0 + RNG.random(3), masks), monkeypatch, fast=False)


def test_a_carried_boolean_mask_never_matches_a_signature(monkeypatch):
    """A mask carried in the scan's tuple selects 3 entries on one trip and 1 on the
    next: the trips must not share a signature (they did while a boolean array was
    refused only at the top of the signature: the fast trip raised NumPy's
    broadcasting error)."""
    masks = np.array([[True, True, True], [True, False, False], [True, True, True],
                      [False, True, False]])
    v = 1.0 + RNG.random(3)

    def f(w, xs):
        def step(carry, m_next):
            c, m = carry
            a = c[m] * w[m]
            y = a * v
            c = np.tanh(c + y * 0.5)
            return (c, m_next), np.sum(y)
        (c, _), ys = lax.scan(step, (np.ones(3), np.ones(3, bool)), xs)
        return np.sum(ys ** 2) + np.sum(c)
    _check(f, (1.0 + RNG.random(3), masks), monkeypatch)


def test_carried_index_value_is_part_of_the_signature(monkeypatch):
    def f(w, xs):
        def step(carry, x):
            c, k = carry
            p = np.pad(c * w, ((1, 1),))
            c = np.sin(p[1:-1] * x) + c[k] * 0.1
            return (c, 2 - k), c
        (c, _), ys = lax.scan(step, (np.ones(4), 0), xs)
        return np.sum(ys ** 2)
    _check(f, (RNG.random(4), RNG.standard_normal(5)), monkeypatch)


def _rows(c, w, xs, r):
    """The receiver row of the wave example at a run-time index ``r``, and slices of
    fewer axes than the arrays have (``now[1:]`` of a 2-D carry)."""
    def step(carry, amp):
        past, now = carry
        gx = np.pad((now[1:] - now[:-1]) * 2.0, ((0, 1), (0, 0))) / w
        lap = np.pad(gx[1:] - gx[:-1], ((1, 0), (0, 0)))
        new = 2.0 * now - past + 0.1 * lap * c + amp * w
        return (now, new), new[r]
    zero = np.zeros_like(c)
    (_, last), rows = lax.scan(step, (zero, zero + 0.01 * c), xs)
    return np.sum(rows ** 2) + np.sum(last * w)


@pytest.mark.parametrize("r", [0, 2, 4, -1, -5])
def test_a_row_at_a_run_time_index_is_placed_by_the_fast_rule(r, monkeypatch):
    for argnums in (0, 1):
        _check(_rows, (C, W, XS, r), monkeypatch, argnums=argnums)
    src = astjax.make_source(astjax.grad(_rows))(C, W, XS, r)
    assert "rt.place_at(" in src


def test_slices_of_fewer_axes_take_the_fast_rule(monkeypatch):
    def f(c, xs):
        def step(p, x):
            d = p[1:] - p[:-1]                       # (4, 3) of a (5, 3) carry
            q = p * x + np.pad(d, ((1, 0), (0, 0))) * c
            new = q - 0.01 * np.pad(q[:-1], ((0, 1), (0, 0)))
            return new, new[-1]
        p, ys = lax.scan(step, np.ones((5, 3)), xs)
        return np.sum(ys ** 2) + np.sum(p)
    _check(f, (C[:, :3], 0.5 + RNG.random(4)), monkeypatch)
    assert "rt.place_at(" in astjax.make_source(astjax.grad(f))(C[:, :3], 0.5 + RNG.random(4))
    args32 = (C[:, :3].astype(np.float32), (0.5 + RNG.random(4)).astype(np.float32))
    got = _check(f, args32, monkeypatch, fd=False)
    assert got["grad"].dtype == np.float32


def test_a_row_index_out_of_range_raises_numpys_error():
    for route in _routes(_rows).values():
        with pytest.raises(IndexError):
            route(C, W, XS, 5)
    with pytest.raises(IndexError):
        _rows(C, W, XS, -6)


def test_the_fwi_misfit_fast_equals_general(monkeypatch):
    """examples/wave.py's misfit (receiver row, float32): value_and_grad with fast
    trips equals the general adjoint to the bit, under jit with C kernels and NumPy."""
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "examples", "wave.py")
    spec = importlib.util.spec_from_file_location("astjax_example_wave_ft", path)
    wave = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wave)
    _, v, problem, observed = wave.setup(12, 10, 15, np.float32)

    def run():
        generation.clear_cache()
        vg = astjax.value_and_grad(wave.misfit)
        return [route(v, observed=observed, **problem) for route in (
            vg, astjax.jit(vg), astjax.jit(vg, backend="numpy"))]
    got = run()
    with monkeypatch.context() as m:
        m.setattr(fast_trips, "ENABLED", False)
        ref = run()
    generation.clear_cache()
    for (gv, gg), (rv, rg) in zip(got, ref):
        assert gv == rv
        np.testing.assert_array_equal(gg, rg)
        np.testing.assert_array_equal(np.signbit(gg), np.signbit(rg))


def _carry_only(c, w, xs):
    """The per-step rows are not used: their cotangents are None, the trip's incoming
    cotangents are never complete (the trip without the assumption runs)."""
    def step(carry, amp):
        past, now = carry
        gx = np.pad(now[1:] - now[:-1], ((0, 1), (0, 0))) / w
        new = 2.0 * now - past + 0.1 * np.pad(gx[1:] - gx[:-1], ((1, 0), (0, 0))) * c + amp
        return (now, new), new[1]
    zero = np.zeros_like(c)
    (_, last), _ = lax.scan(step, (zero, zero + 0.01 * c), xs)
    return np.sum(last * w)


def _rows_only(c, w, xs):
    """The final carry is not used: the first backward trip's carried cotangent is None
    (not complete), the later ones are."""
    def step(carry, amp):
        past, now = carry
        new = 2.0 * now - past + 0.1 * np.pad(now[1:] - now[:-1], ((1, 0), (0, 0))) * c + amp
        return (now, new), new[-2] * w[0]
    zero = np.zeros_like(c)
    _, rows = lax.scan(step, (zero, zero + 0.01 * c), xs)
    return np.sum(rows ** 2)


def _array_carry_rows(c, w, xs):
    """A carry that is one array (not a tuple) and is not used at the end: the first
    backward trip's carried cotangent is None, so that trip is not complete (the
    fuzzer's ``lax.scan(lambda c, t: (c * 0.5 + t, c * t), x[0], x)[1]`` crashed)."""
    def step(now, amp):
        new = now * 0.5 + np.pad(now[1:] - now[:-1], ((1, 0), (0, 0))) * c + amp
        return new, now * new[-2] * w[0]
    _, rows = lax.scan(step, 0.01 * c, xs)
    return np.sum(rows ** 2)


@pytest.mark.parametrize("f", [_carry_only, _rows_only, _array_carry_rows, _stencil,
                               _rows])
def test_complete_trips_equal_the_general_adjoint(f, monkeypatch):
    args = (C, W, XS, 3) if f is _rows else (C, W, XS)
    for argnums in (0, 1):
        _check(f, args, monkeypatch, argnums=argnums)
    assert "rt.cots_complete(" in astjax.make_source(astjax.grad(f))(*args)


def test_cots_complete():
    from astjax import runtime as rt
    a = np.ones(3)
    assert rt.cots_complete((("array", "array"), "last"), (a, a), [None, a])
    assert not rt.cots_complete((("array", "array"),), (a, None))
    assert not rt.cots_complete((("array", "array"),), None)
    assert not rt.cots_complete((("array", "array"),), (a,))
    assert not rt.cots_complete(("last",), [a, None])
    assert not rt.cots_complete(("last",), [])
    assert not rt.cots_complete(("last",), [np.float64(1.0)])
    assert rt.cots_complete(((("array",), "array"),), [(a,), a])


def _raw_source(f, args, argnums=0):
    return astjax.make_source(astjax.grad(f, argnums=argnums), simplify=False)(*args)


def test_a_carry_read_before_its_name_is_assigned_again_goes_fast(monkeypatch):
    """An RNN step: ``h * w`` reads the carry's name before ``h`` is assigned again,
    so the end of the trip no longer holds what it read; the fact reads a snapshot
    taken just before the multiply (``FastTrip.fact_name``)."""
    def f(w, xs):
        def step(h, x):
            h = (h * w + x) / (1.0 + h * h)     # (tanh would differ by an ulp in C)
            return h, h * h
        h, ys = lax.scan(step, np.zeros_like(w), xs)
        return np.sum(ys) + np.sum(h)
    args = (RNG.random(5), RNG.standard_normal((6, 5)))
    _check(f, args, monkeypatch)
    _check(f, args, monkeypatch, argnums=1)
    src = _raw_source(f, args)
    assert "_read = " in src, src


def test_an_operand_assigned_again_with_another_shape_fails_its_snapshot_fact(monkeypatch):
    """``t * w2`` broadcasts the ``t`` it reads, then ``t`` is assigned a value of the
    product's shape: the fact must read the ``t`` before the product (a snapshot),
    not the one the trip ends with (which would pass it), and fail -- every trip
    takes the general adjoint, whose unbroadcast the fast rule would leave out."""
    w2 = RNG.random((3, 4))

    def f(w, xs):
        def step(c, x):
            t = c * x
            u = t * w2                      # (4,) * (3, 4): t broadcast
            t = u + 1.0                     # t: (3, 4) at the end of the trip
            c = t[1] * w + t[0]
            return c, u
        c, ys = lax.scan(step, np.ones(4), xs)
        return np.sum(ys ** 2) + np.sum(c)
    args = (0.5 + 0.5 * RNG.random(4), RNG.standard_normal(5))
    _check(f, args, monkeypatch)
    _check(f, args, monkeypatch, argnums=1)
    assert "_read = t" in _raw_source(f, args)


def test_an_operand_made_by_an_unlisted_call_leaves_its_loop_the_old_facts(monkeypatch):
    """A snapshot whose value comes from a call the facts cannot follow
    (``np.concatenate``) would take the loop's fast trip away; the loop is built
    again without snapshots and keeps the facts of values assigned once."""
    def f(w, xs):
        def step(c, x):
            a = c[0:3, :] * w[1:, :]
            c = np.concatenate([a, c[3:, :]]) * x
            return c, a * a
        c, ys = lax.scan(step, np.ones((4, 3)), xs)
        return np.sum(ys) + np.sum(c)
    args = (RNG.random((4, 3)), RNG.standard_normal(4))
    _check(f, args, monkeypatch)
    assert "_read = " not in _raw_source(f, args)


def _invariant_added(x, y):
    h = x * 1.0
    for _ in range(4):
        h = np.tanh(h * y) + x          # (x's cotangent starts None in the backward)
    return h


def _index_read(x, y):
    return lax.fori_loop(0, 4, lambda i, h: np.tanh(h * y + 0.1 * i) + x, x * 1.0)


@pytest.mark.parametrize("f", [_invariant_added, _index_read])
@pytest.mark.parametrize("n, lanes", [(3, 2), (2, 2), (3, 3), (1, 4)])
def test_vmap_of_a_vjp_through_fast_trips_matches_a_loop(f, n, lanes):
    """Under vmap of a vjp only the cotangents carry the batch: a fast trip's
    accumulator made from None (``rt.cot_or_zero`` of the unbatched primal) must
    carry it too.  It did not, and the next add raised (3 elements, 2 lanes) or
    broadcast an unbatched -0.0 against the lanes.  A loop that reads its index
    (``fori_loop``'s ``i``) takes fast trips too (``FastTrip.int_target``)."""
    x, y = np.linspace(0.1, 0.5, n), np.linspace(0.3, 0.9, n)
    out, pull = astjax.vjp(f, x, y)
    cts = np.stack([np.cos(out) * (k + 1.0) for k in range(lanes)])
    got = astjax.vmap(pull)(cts)
    for k in range(lanes):
        want = pull(cts[k])
        for j in range(2):
            np.testing.assert_allclose(got[j][k], want[j], rtol=1e-14, atol=1e-15)
    eps = 1e-6
    for j, arg in enumerate((x, y)):            # (and the vjp itself: differences)
        for i in range(n):
            e = np.zeros(n)
            e[i] = eps
            args_p, args_m = [x, y], [x, y]
            args_p[j], args_m[j] = arg + e, arg - e
            fd = np.sum(cts[0] * (f(*args_p) - f(*args_m))) / (2 * eps)
            assert np.isclose(got[j][0][i], fd, rtol=1e-6, atol=1e-9)
