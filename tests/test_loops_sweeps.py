"""Reverse mode's sweeps as compiled loops (kernels/sweeps.py, loop_driver.SweepDriver).

``jit(grad(f), backend="c")`` of a scan runs the fast steps of the forward sweep in
one C call (the pushed results written into rows of a stacked buffer, the tape
filled as the Python loop fills it).  Every case compares, bit for bit, the result
with the compiled sweep against the same generated code with every driver declining
(the Python loop: ``MIN_STEPS`` out of reach), checks it against the NumPy backend,
and says whether the compiled sweep ran (``loops.STATS``); gradients in float64 are
checked against central finite differences.  The class: carries of several
structures (one array, tuples, nested tuples), several saved arrays, ys and no ys,
reverse scans, fori_loop, xs of several leaves, short loops, a carry whose layout
changes after the first step, float32 and float64, value_and_grad / grad / vjp.
"""
from __future__ import annotations

import tempfile

import numpy as np
import pytest

import astjax
from astjax.kernels import compile as cc, loop_driver, loops
from conftest import load_source_module
from test_passes import identical

pytestmark = pytest.mark.skipif(not cc.available()[0],
                                reason=f"no C compiler: {cc.available()[1]}")

_DIR = tempfile.mkdtemp(prefix="astjax_sweeps_")

SOURCE = '''
import numpy as np
from astjax import lax


def stencil(u, xs, target):
    def step(carry, a):
        past, present = carry
        d = np.pad(present[1:, :] - present[:-1, :], ((0, 1), (0, 0))) / 3.0
        future = 2.0 * present - past + 0.1 * d * present + a * u
        return (present, future), future[1]
    (_, last), ys = lax.scan(step, (np.zeros_like(u), np.zeros_like(u)), xs)
    return 0.5 * np.sum((ys - target) ** 2) + np.sum(last * last)


def one_carry(u, xs, target):
    def step(c, x):
        n = c * c * 0.25 + x * c
        return n, n[0]
    c, ys = lax.scan(step, u, xs)
    return np.sum(ys * target) + np.sum(c)


def nested(u, xs, target):
    def step(c, x):
        (a, b), d = c
        n = a * b * 0.5 - d / 3.0 + x
        return ((b, n), a * d * 0.5 + x), n[2]
    c, ys = lax.scan(step, ((u, u * 2.0), u + 1.0), xs)
    return np.sum(ys * target) + np.sum(c[0][1] * c[1])


def several_saved(u, xs, target):
    def step(c, x):
        a, b, d = c
        p = a * b
        q = p * d + x * a
        return (b, d, q * 0.125), (q[0], p[1])
    c, (y1, y2) = lax.scan(step, (u, u * 0.5, u + 0.25), xs)
    return np.sum(y1 * target) + np.sum(y2 * y2) + np.sum(c[2])


def no_ys(u, xs, target):
    def step(c, x):
        a, b = c
        return (b * 0.5, a * b + x), None
    c, _ = lax.scan(step, (u, u), xs)
    return np.sum(c[0] * c[1]) + np.sum(target) * 0.0


def reversed_scan(u, xs, target):
    def step(c, x):
        n = c * c * 0.5 + x
        return n, n[-1]
    c, ys = lax.scan(step, u, xs, reverse=True)
    return np.sum(ys * target) + np.sum(c)


def fori(u, xs, target):
    def body(i, c):
        return c * c * 0.25 + 1.0 / (c * c + 3.0)
    c = lax.fori_loop(0, xs.shape[0], body, u)
    return np.sum(c * target[0, :u.shape[1]])


def leaves_xs(u, xs, target):
    def step(c, x):
        n = c * x[0] + c * c * x[1]
        return n, n[0]
    c, ys = lax.scan(step, u, (xs, xs * 0.5))
    return np.sum(ys * target) + np.sum(c)


def two_scans(u, xs, target):
    def step(carry, a):
        past, present = carry
        future = 0.5 * present - 0.25 * past + 0.1 * a * present * present
        return (present, future), future[1]
    (_, last), ys = lax.scan(step, (np.zeros_like(u), u), xs)
    (_, last2), ys2 = lax.scan(step, (last, last * 0.5), xs * 0.5)
    return np.sum(ys * target) + np.sum(ys2 * ys2) + np.sum(last2)


def rnn(u, xs, target):
    def step(h, x):
        h = np.tanh(h * u + x)          # reads the carry, then assigns its name again
        return h, h * h
    h, ys = lax.scan(step, np.zeros_like(u), xs)
    return np.sum(ys[:, 0, :] * target) + np.sum(h)


def energy(u, xs, target):
    def step(c, x):
        n = c * c * 0.25 + x * c
        return n, np.sum(n * n)            # (a scalar cotangent per backward trip)
    c, ys = lax.scan(step, u, xs)
    return np.sum(ys * target[:, 0]) + np.sum(c)


def mean_ys(u, xs, target):
    def step(c, x):
        n = c * 0.5 - c * c * x
        return n, np.mean(n)               # (its cotangent: the scalar over the size)
    c, ys = lax.scan(step, u, xs)
    return np.sum(ys * ys) + np.sum(c * target[0, 0])


def rebound_sum(u, xs, target):
    def step(h, x):
        h = h * h * 0.25 + x * h           # (the carry's name assigned again)
        return h, np.sum(h * u)
    h, ys = lax.scan(step, u, xs)
    return np.sum(ys * target[:, 1]) + np.sum(h)


def changes_dtype(u, xs, target):
    def step(c, x):
        n = c * 0.5 + c * c * x
        return n, n[0]
    c, ys = lax.scan(step, u.astype(np.float32), xs)
    return np.sum(ys * target) + np.sum(c)
'''

SOURCE += "".join(f'''

def vjp_{name}(u, xs, target):
    def of_u(v):
        return {name}(v, xs, target)
    value, pull = astjax.vjp(of_u, u)
    return value, pull(np.ones_like(value))
''' for name in ("stencil", "one_carry", "nested", "several_saved", "no_ys",
                  "reversed_scan", "fori", "leaves_xs", "changes_dtype", "two_scans",
                  "rnn", "energy", "mean_ys", "rebound_sum"))
SOURCE = "import astjax\n" + SOURCE

M = load_source_module(SOURCE, _DIR)
VJPS = {name[4:]: getattr(M, name) for name in dir(M) if name.startswith("vjp_")}

# backward sweeps that run compiled (the others' fast trips still do array work
# outside kernels -- ``rt.place_at``, ``ra.unbroadcast``, sums of arrays (in
# rebound_sum, the cotangent of the renamed carry) -- and run as Python until their
# backward kernels take it); a carry read before its name is
# assigned again (``n = c * c``) takes the fast rules through a snapshot
# (``fast_trips.FastTrip.fact_name``)
BACKWARD = {"stencil", "no_ys", "two_scans", "one_carry", "fori", "leaves_xs",
            "reversed_scan", "changes_dtype", "rnn", "energy", "mean_ys"}

# name -> (function, whether its forward sweep runs compiled)
CASES = {
    "stencil": (M.stencil, True),
    "one_carry": (M.one_carry, True),
    "nested": (M.nested, True),
    "several_saved": (M.several_saved, True),
    "no_ys": (M.no_ys, True),
    # (its step index ``n - 1 - i`` is Python's arithmetic, ``fusion.python_ints``;
    # it fused into a kernel of numbers once, which kept the Python loop)
    "reversed_scan": (M.reversed_scan, True),
    "fori": (M.fori, True),
    "rnn": (M.rnn, True),
    "energy": (M.energy, True),
    "mean_ys": (M.mean_ys, True),
    "rebound_sum": (M.rebound_sum, True),
    "leaves_xs": (M.leaves_xs, False),      # pytree xs: the Python loop
    "changes_dtype": (M.changes_dtype, None),
    # (its first scan's kernel runs with NumPy at this size: that forward sweep stays
    # Python, and each backward sweep reads the tape whichever way it was filled)
    "two_scans": (M.two_scans, None),   # (float64: the first steps differ)
}


def _args(dtype, steps=16, shape=(7, 5)):
    rng = np.random.default_rng(0)
    u = (0.5 * rng.standard_normal(shape)).astype(dtype)
    xs = (0.3 * rng.standard_normal(steps)).astype(dtype)
    target = rng.standard_normal((steps, shape[1])).astype(dtype)
    return u, xs, target


def _python_loops(monkeypatch):
    """Every driver declines (the loops of the generated code run in Python)."""
    monkeypatch.setattr(loop_driver, "MIN_STEPS", 10 ** 9)


def _run(f, args, monkeypatch, how="value_and_grad"):
    """(compiled result, Python-loop result, NumPy backend result, sweeps run)."""
    if how == "value_and_grad":
        t = astjax.value_and_grad(f)
    elif how == "grad":
        t = astjax.grad(f)
    elif how == "grad_xs":           # (a cotangent of xs: no fast trips, the Python loop)
        t = astjax.grad(f, argnums=(0, 1))
    else:
        t = VJPS[f.__name__]
    fc = astjax.jit(t, backend="c")
    before = dict(loops.STATS)
    got = fc(*args)
    ran = loops.STATS["sweeps"] - before["sweeps"]
    back = loops.STATS["back_sweeps"] - before["back_sweeps"]
    with monkeypatch.context() as m:
        _python_loops(m)
        before = loops.STATS["sweeps"]
        slow = fc(*args)
        assert loops.STATS["sweeps"] == before
    want = astjax.jit(t, backend="numpy")(*args)
    return got, slow, want, ran, back


@pytest.mark.parametrize("how", ["value_and_grad", "grad", "vjp", "grad_xs"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_sweeps_equal_the_python_loop(name, dtype, how, monkeypatch):
    f, compiled = CASES[name]
    args = _args(dtype)
    got, slow, want, ran, back = _run(f, args, monkeypatch, how)
    assert identical(got, slow), (got, slow)
    if compiled is not None and how != "grad_xs":
        assert (ran > 0) == compiled, (name, ran)
    if how != "grad_xs" and name in BACKWARD:
        assert back > 0, (name, back)
    tol = 1e-4 if dtype == np.float32 else 1e-11
    for a, b in zip(_leaves(got), _leaves(want)):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def _leaves(x):
    from astjax.tree_util import tree_leaves
    return [np.asarray(v) for v in tree_leaves(x)]


@pytest.mark.parametrize("name", sorted(set(CASES) - {"changes_dtype"}))
def test_gradients_match_central_differences(name, monkeypatch):
    f, _ = CASES[name]
    u, xs, target = _args(np.float64)
    got = _run(f, (u, xs, target), monkeypatch, "grad_xs")[0]
    got_u = _run(f, (u, xs, target), monkeypatch, "grad")[0]
    assert np.allclose(got_u, got[0], rtol=1e-12, atol=1e-12)
    rng = np.random.default_rng(5)
    eps = 1e-6
    for k, x in enumerate((u, xs)):
        d = rng.standard_normal(x.shape)
        plus = [u, xs, target]
        minus = [u, xs, target]
        plus[k] = x + eps * d
        minus[k] = x - eps * d
        fd = (f(*plus) - f(*minus)) / (2 * eps)
        assert np.isclose(np.sum(got[k] * d), fd, rtol=1e-6, atol=1e-8), (name, k)


@pytest.mark.parametrize("steps", [1, 2, 3, 4, 5, 6, 7, 8])
def test_short_scans(steps, monkeypatch):
    args = _args(np.float64, steps=steps)
    got, slow, want, ran, back = _run(M.stencil, args, monkeypatch)
    assert identical(got, slow)
    # step 0 is the general trip, step 1 the interpreted fast one, the rest C
    assert (ran > 0) == (steps - 2 >= loops.MIN_STEPS)
    # backward: the last forward trip runs first (its accumulators start as None: it
    # is a warm-up), the next one interpreted, the first forward trip last (general)
    assert (back > 0) == (steps - 3 >= loops.MIN_STEPS)


def test_the_same_code_with_other_shapes_and_again(monkeypatch):
    for shape, steps in [((7, 5), 16), ((3, 4), 9), ((7, 5), 16)]:
        args = _args(np.float32, steps=steps, shape=shape)
        got, slow, _, ran, back = _run(M.stencil, args, monkeypatch)
        assert identical(got, slow) and ran and back


def test_the_source_shows_the_sweep_driver():
    args = _args(np.float64)
    text = astjax.make_source(astjax.jit(astjax.grad(M.stencil), backend="c"))(*args)
    assert "sweep_driver(sweep_driver_memo, i, n_steps, trips, tape, ys_steps" in text
    assert "int sweep_driver(int64_t start, int64_t stop, astjax_loop *L)" in text
    assert "L->saved[0] + (i - L->saved_from) * L->saved_bytes[0]" in text
    # the backward sweep's C, rendered from the trip it traces: make_source runs the
    # code once (on copies) to show it
    assert ("int back_sweep_driver(int64_t trips, int64_t first, int64_t last, "
            "astjax_back *L)") in text
    assert "typedef struct {" in text.split("back_sweep_driver_c = ")[1]
    assert "no call has run one in C yet" not in text


def test_the_source_run_leaves_the_arguments_alone():
    """make_source runs the code to show the backward sweep's C: on copies, so even a
    donated argument keeps its values (and the placeholder says when nothing ran)."""
    u, xs, target = _args(np.float64)
    keep = [a.copy() for a in (u, xs, target)]
    f = astjax.jit(astjax.value_and_grad(M.stencil), backend="c", donate_argnums=(0, 2))
    text = astjax.make_source(f)(u, xs, target)
    assert "int back_sweep_driver(int64_t trips" in text
    for a, b in zip((u, xs, target), keep):
        assert identical(a, b)
    # too few steps for a compiled trip: the placeholder stays, and says why
    short = _args(np.float64, steps=2)
    text = astjax.make_source(astjax.jit(astjax.grad(M.stencil), backend="c"))(*short)
    assert "no call has run one in C yet" in text


def test_fwi_gradient_equals_the_python_loop(monkeypatch):
    """The wave benchmark's misfit (small): compiled sweep, same bits."""
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
    import wave
    _, velocity, problem, observed = wave.setup(24, 20, 30, np.float32)
    vg = astjax.jit(astjax.value_and_grad(wave.misfit), backend="c")
    before = dict(loops.STATS)
    got = vg(velocity, observed=observed, **problem)
    assert loops.STATS["sweeps"] > before["sweeps"]
    assert loops.STATS["back_sweeps"] > before["back_sweeps"]
    assert loops.STATS["back_steps"] - before["back_steps"] >= 30 - 3
    with monkeypatch.context() as m:
        _python_loops(m)
        slow = vg(velocity, observed=observed, **problem)
    assert identical(got, slow)


def test_the_sweeps_fetch_the_tape_rows_a_row_ahead(monkeypatch):
    """The forward sweep's kernel writing the tape, and the backward one reading it,
    are builds that prefetch those rows (``c._prefetch_rows``); the gradient is the
    same bits as the builds without."""
    import os
    import re
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
    import wave
    from astjax.kernels import c as c_render
    _, velocity, problem, observed = wave.setup(24, 20, 30, np.float32)
    built = []
    build = cc.build
    monkeypatch.setattr(cc, "build", lambda text, symbol, origin=None: (
        built.append(text), build(text, symbol, origin))[1])
    got = astjax.jit(astjax.value_and_grad(wave.misfit), backend="c")(
        velocity, observed=observed, **problem)
    calls = [re.findall(r"astjax_prefetch_row\(\(const char \*\)\((\w+) .*, (\d)\);", t)
             for t in built]
    written = {q for found in calls for q, rw in found if rw == "1"}
    read = {p for found in calls for p, rw in found if rw == "0"}
    assert written and all(q.startswith("q") for q in written)      # the tape's row
    assert read and all(p.startswith("p") for p in read)            # popped rows
    monkeypatch.setattr(c_render, "_prefetch_rows", lambda code, *a: code)
    astjax.clear_cache()
    plain = astjax.jit(astjax.value_and_grad(wave.misfit), backend="c")(
        velocity, observed=observed, **problem)
    assert identical(got, plain)


def test_results_of_one_call_survive_the_next(monkeypatch):
    """The sweeps reuse their buffers across calls only once nothing refers to them."""
    g = astjax.jit(astjax.value_and_grad(M.stencil), backend="c")
    first_args = _args(np.float64)
    first = g(*first_args)
    kept = (first[0].copy(), first[1].copy())
    other = _args(np.float64)
    other = (other[0] * 0.5, other[1] + 0.25, other[2])
    second = g(*other)
    assert identical(first, kept)
    assert not np.array_equal(first[1], second[1])
    with monkeypatch.context() as m:
        _python_loops(m)
        want = g(*other)
    assert identical(second, want)
    assert identical(g(*first_args), kept)


def test_numpy_error_states_that_raise_leave_the_sweeps_to_python(monkeypatch):
    args = _args(np.float64)
    g = astjax.jit(astjax.grad(M.stencil), backend="c")
    want = g(*args)
    before = dict(loops.STATS)
    with np.errstate(all="raise"):
        got = g(*args)
    assert identical(got, want)
    assert loops.STATS["sweeps"] == before["sweeps"]
    assert loops.STATS["back_sweeps"] == before["back_sweeps"]


@pytest.mark.parametrize("keep", [0, 1 << 30])
def test_buffers_kept_between_calls_stay_within_the_budget(keep, monkeypatch):
    """What compiled loops keep for later calls (the tape's stacked buffer, result
    pools) never exceeds ``ASTJAX_KEEP_BYTES`` for all loops together; with nothing
    kept, every call makes fresh buffers and the results are the same."""
    import gc
    monkeypatch.setattr(loop_driver, "KEEP_BYTES", keep)
    gc.collect()
    already = sum(loop_driver._KEPT.values())
    if keep and already:
        monkeypatch.setattr(loop_driver, "KEEP_BYTES", keep + already)
    g = astjax.jit(astjax.value_and_grad(M.stencil), backend="c")
    args = _args(np.float64)
    first = g(*args)
    again = g(*args)
    assert identical(first, again)
    with monkeypatch.context() as m:
        _python_loops(m)
        assert identical(g(*args), first)
    kept = sum(loop_driver._KEPT.values())
    assert kept <= loop_driver.KEEP_BYTES
    assert (kept > already) == (keep > 0)


def test_a_bad_keep_bytes_setting_is_a_clear_error(monkeypatch):
    from astjax.errors import ArgumentError
    monkeypatch.setenv("ASTJAX_KEEP_BYTES", "1GB")
    with pytest.raises(ArgumentError, match="ASTJAX_KEEP_BYTES='1GB'"):
        loop_driver._keep_bytes()
    monkeypatch.setenv("ASTJAX_KEEP_BYTES", "0")
    assert loop_driver._keep_bytes() == 0
    monkeypatch.delenv("ASTJAX_KEEP_BYTES")
    assert loop_driver._keep_bytes() == 1 << 30
