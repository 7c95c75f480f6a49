"""Compiled loop drivers (kernels/loops.py): a scan or fori_loop whose body is only
kernel calls runs its steps in one C call.

Every case compares ``jit(f, backend="c")`` with ``jit(f, backend="numpy")`` bit for
bit (structure, dtypes, shapes, signs of zeros), and says whether the C driver ran
(``loops.STATS``): carries of several structures (one array, tuples rotated and
swapped), xs of several ranks (a number per step, a row, views of it), ys of several
structures (none, a row, a tuple of a view and a whole result, a number), reverse
scans, dtypes, short and empty loops (the Python loop), what the driver leaves to
Python (pytree xs, NumPy error states that raise, a kernel that runs with NumPy),
and gradients through scans.
"""
from __future__ import annotations

import tempfile

import numpy as np
import pytest

import astjax
from astjax.kernels import compile as cc, loops
from conftest import load_source_module
from test_passes import identical

pytestmark = pytest.mark.skipif(not cc.available()[0],
                                reason=f"no C compiler: {cc.available()[1]}")

_DIR = tempfile.mkdtemp(prefix="astjax_loop_driver_")

SOURCE = '''
import numpy as np
from astjax import lax


def stencil(u, xs):
    def step(carry, a):
        past, present = carry
        d = np.pad(present[1:, :] - present[:-1, :], ((0, 1), (0, 0))) / 3.0
        e = np.pad(d[1:, :] - d[:-1, :], ((1, 0), (0, 0)))
        future = 2.0 * present - past + 0.1 * e + a * u
        return (present, future), future[1]
    (_, last), ys = lax.scan(step, (np.zeros_like(u), np.zeros_like(u)), xs)
    return ys, last


def rows_in_rows_out(u, xs):
    def step(c, x):
        n = c * 0.5 + x / 7.0
        return n, (n[0], n * 2.0 - x)
    return lax.scan(step, u, xs)


def three_rotating(u, xs):
    def step(c, x):
        a, b, d = c
        n = a * 0.25 + b - d / 3.0 + x
        return (b, d, n), n[1:]
    return lax.scan(step, (u, u * 2.0, u + 1.0), xs)


def swapped(u, v, xs):
    def step(c, x):
        a, b = c
        return (b, a * 0.5 + x), None
    return lax.scan(step, (u, v), xs)


def ys_dropped(a, u, xs):
    def step(c, x):
        c = a * c / (1.0 + c * c) + x     # (the carry's name assigned again)
        return c, None
    c, _ = lax.scan(step, u, xs)      # (the ys are dead: no stacking after the loop)
    return c * 2.0


def ys_dropped_carry_out(a, u, xs):
    def step(c, x):
        n = c * a + x * 0.5
        return n, n[0]
    c, _ = lax.scan(step, u, xs)
    return c


def index_in_kernel(y, n):
    v = np.full((2, 3), 0.5)
    for j in range(n):
        v = np.sin(v) * 0.5 + y * j          # (the step index, a kernel operand)
    return v


def index_copied(y, n):
    v = y * 1.0
    for j in range(n):
        k = j
        v = v * 0.75 + y / (k + 1.0)
    return v


def index_nested(y):
    v = y * 1.0
    for i in range(3):
        for j in range(6):
            v = v * 0.5 + y * j - i
    return v


def index_times_dt(y, dt, n):
    v = y * 0.0
    for j in range(n):
        v = v * 0.9 + y * np.cos(j * dt)     # (Python's int * float, in the kernel)
    return v


def index_fori(y, n):
    def body(j, v):
        return np.sin(v) * 0.5 + y * (j + 0.5)
    return lax.fori_loop(0, n, body, y * 1.0)


def index_fori_plain(y, n):
    def body(j, v):
        return np.sin(v) * 0.5 + y * j
    return lax.fori_loop(0, n, body, y * 1.0)


def index_from(a, lo, n):
    v = a * 0
    for j in range(lo, lo + n):
        v = v + a * j                         # (an int32 ``a``: NumPy checks j fits)
    return v


def index_reversed_rows(y, n):
    v = y * 1.0
    for j in range(n):
        v = v[::-1] * 0.5 + y * j             # (an indexed kernel reading the index)
    return v


def index_counting(x, lo, n):
    v = x * 0.0
    for j in range(lo, lo + n):
        v = v + np.minimum(x * j, 1.0)        # (counts the steps that ran)
    return v


def index_scaled(x, k):
    return np.sin(x) * k + x


def index_as_row(table, n):
    v = table[0] * 0.0
    for j in range(n):
        v = v * 0.5 + table[j]                # (the index as the kernel's row)
    return v


def index_scan_step(y, dt, xs):
    def step(c, x):
        t = x * dt
        c = c * 0.9 + (t * t) * y             # (``c * 0.9`` waits for the ``+``)
        return c, np.sum(c)
    return lax.scan(step, y * 1.0, xs)


def reversed_scan(u, xs):
    def step(c, x):
        n = c * 0.75 + x
        return n, n[-1]
    return lax.scan(step, u, xs, reverse=True)


def number_out(u, xs):
    def step(c, x):
        n = np.sqrt(c * c + x)
        return n, n[0, 0]
    return lax.scan(step, u, xs)


def fori(u, n):
    def body(i, c):
        return c * 0.5 + 1.0 / (c + 3.0)
    return lax.fori_loop(0, n, body, u)


def fori_pair(u, v, n):
    def body(i, c):
        a, b = c
        return (b / 2.0, np.abs(a) - b)
    return lax.fori_loop(0, n, body, (u, v))


def pytree_xs(u, xs):
    def step(c, x):
        n = c * 0.5 + x[0] * x[1]
        return n, n
    return lax.scan(step, u, xs)


def divides(u, xs):
    def step(c, x):
        n = (c + 1.0) / x
        return n, n
    return lax.scan(step, u, xs)


def no_xs(u, n):
    def step(c, x):
        n2 = c * 0.5 + 1.0 / (c * c + 1.0)
        return n2, n2[0]
    return lax.scan(step, u, None, length=n)


def misfit(u, xs, target):
    ys, last = stencil(u, xs)
    return 0.5 * np.sum((ys - target) ** 2) + np.sum(last * last)
'''

M = load_source_module(SOURCE, _DIR)


def _rng(seed=0):
    return np.random.default_rng(seed)


def _check(f, *args, compiled=True):
    """jit(f) with C kernels equals the NumPy backend; the driver ran C or not."""
    want = _zero_steps_named(astjax.jit(f, backend="numpy")(*args))
    before = dict(loops.STATS)
    got = _zero_steps_named(astjax.jit(f, backend="c")(*args))
    assert identical(got, want), (got, want)
    ran = loops.STATS["loops"] > before["loops"]
    assert ran == compiled, (f.__name__, loops.STATS, before)
    return got


def _zero_steps_named(out):
    """The outputs of a scan that ran no step (a stand-in refusing any use:
    ``rt.ZeroStepOutputs``) as a name, so the rest compares."""
    from astjax.runtime import ZeroStepOutputs
    from astjax.tree_util import tree_map
    return tree_map(lambda v: "zero steps" if isinstance(v, ZeroStepOutputs) else v, out)


def _driver_source(f, *args):
    return astjax.make_source(astjax.jit(f, backend="c"))(*args)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_stencil_scan_runs_in_c(dtype):
    u = _rng().standard_normal((12, 9)).astype(dtype)
    xs = _rng(1).standard_normal(20).astype(dtype)
    _check(M.stencil, u, xs)
    text = _driver_source(M.stencil, u, xs)
    assert "scan_driver(carry, ys_steps, 0, n_steps" in text
    assert "int scan_driver(int64_t start, int64_t stop, astjax_loop *L)" in text


def test_every_step_after_the_first_runs_in_c():
    u = _rng().standard_normal((6, 5)).astype(np.float32)
    xs = _rng(1).standard_normal(50).astype(np.float32)
    before = loops.STATS["steps"]
    _check(M.stencil, u, xs)
    assert loops.STATS["steps"] - before == 49


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_rows_in_and_a_tuple_of_a_view_and_a_result_out(dtype):
    u = (_rng().standard_normal((4, 7)) * 8).astype(dtype)
    xs = (_rng(1).standard_normal((9, 4, 7)) * 8).astype(dtype)
    _check(M.rows_in_rows_out, u, xs)


def test_three_carries_rotate():
    u = _rng().standard_normal((5, 3))
    xs = _rng(1).standard_normal((11, 5, 3))
    _check(M.three_rotating, u, xs)


def test_carries_swap_and_ys_none():
    u, v = _rng().standard_normal((2, 8)), _rng(1).standard_normal((2, 8))
    xs = _rng(2).standard_normal((7, 2, 8))
    got = _check(M.swapped, u, v, xs)
    assert got[1] is None


@pytest.mark.parametrize("a", [0.75, np.float64(0.75), np.array(0.75)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_scan_whose_ys_are_dropped(a, dtype):
    # (``return c, None`` / ``c, _ = lax.scan``: the list of ys is dead after the loop,
    # so no stacking follows it; the loop ran in Python before)
    u = _rng().standard_normal(40).astype(dtype)
    xs = (0.3 * _rng(1).standard_normal((30, 40))).astype(dtype)
    for f in (M.ys_dropped, M.ys_dropped_carry_out):
        before = loops.STATS["steps"]
        _check(f, a, u, xs)
        # (a float64 ``a`` makes a float32 carry float64 after the first step: one
        # more step before two alike)
        assert loops.STATS["steps"] - before >= 28
    text = _driver_source(M.ys_dropped, a, u, xs)
    assert "loop_driver(carry, ys_steps, 0, n_steps" in text
    # (dropped ys that are not None: the C loop copies no row of them)
    text = _driver_source(M.ys_dropped_carry_out, a, u, xs)
    assert "int loop_driver(" in text and "astjax_put(L->ys" not in text


@pytest.mark.parametrize("n", [2, 5, 6, 12])
def test_the_step_index_as_a_kernel_operand_is_each_steps_own(n, monkeypatch):
    """The class of a silent wrong result: a loop whose kernels read the step index
    (``y * j``) ran in C with the first interpreted step's index in every step (the
    index had no symbol, so it read as a constant).  Each step must use its own: the
    C driver passes its counter per step (``loops.resolve``, ``render_c``); jit
    equals the NumPy backend, and at every step count the drivers would take
    (``MIN_STEPS`` 1)."""
    from astjax.kernels import loop_driver
    y = _rng().standard_normal(3)
    for lowest in (loop_driver.MIN_STEPS, 1):
        monkeypatch.setattr(loop_driver, "MIN_STEPS", lowest)
        for f in (M.index_in_kernel, M.index_copied):
            got = astjax.jit(f, backend="c")(y, n)
            assert identical(got, astjax.jit(f, backend="numpy")(y, n))
            np.testing.assert_allclose(got, f(y, n), rtol=1e-13, atol=1e-13)
        got = astjax.jit(M.index_nested, backend="c")(y)
        assert identical(got, astjax.jit(M.index_nested, backend="numpy")(y))
        g = astjax.grad(lambda y: np.sum(M.index_in_kernel(y, n) ** 2))
        assert identical(astjax.jit(g, backend="c")(y), astjax.jit(g, backend="numpy")(y))
        eps, d = 1e-6, _rng(2).standard_normal(3)
        fd = (np.sum(M.index_in_kernel(y + eps * d, n) ** 2) -
              np.sum(M.index_in_kernel(y - eps * d, n) ** 2)) / (2 * eps)
        assert np.isclose(np.sum(astjax.jit(g, backend="c")(y) * d), fd, rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_loops_reading_the_step_index_run_in_c(dtype):
    """The index goes to the kernels as an int64 per step: forward loops, a
    fori_loop, Python's ``j * dt`` inside the kernel, and a scan whose step fuses
    around a scalar of the step (a member that waits for the one reading it)."""
    y = _rng().standard_normal(7).astype(dtype)
    n = 40
    for f, args in ((M.index_in_kernel, (y[:3].astype(np.float64), n)),
                    (M.index_copied, (y, n)), (M.index_times_dt, (y, 0.05, n)),
                    (M.index_fori, (y, n)),
                    (M.index_scan_step, (y, 0.1, np.linspace(-1.0, 1.0, n)))):
        before = loops.STATS["steps"]
        got = _check(f, *args)
        assert loops.STATS["steps"] - before >= n - 3, f.__name__
        want = f(*args)
        for a, b in zip(np.atleast_1d(got) if f is not M.index_scan_step else got,
                        np.atleast_1d(want) if f is not M.index_scan_step else want):
            np.testing.assert_allclose(a, b, rtol=1e-5 if dtype == np.float32 else 1e-12,
                                       atol=1e-5 if dtype == np.float32 else 1e-12)
    text = _driver_source(M.index_times_dt, y, 0.05, n)
    assert "int64_t astjax_index = j;" in text and "&astjax_index /* j */" in text


def test_an_index_that_stops_fitting_the_dtype_runs_python_and_raises():
    """``int32_array * j`` raises OverflowError in NumPy once j leaves int32: the C
    loop must not run those steps (each value's check, ``takes_any_int``)."""
    a = np.arange(5, dtype=np.int32)
    lo = 2 ** 31 - 8
    want = M.index_from(a, lo, 6)                 # (every j fits)
    got = _check(M.index_from, a, lo, 6)
    assert identical(got, want)
    with pytest.raises(OverflowError):
        M.index_from(a, lo, 12)
    before = loops.STATS["loops"]
    with pytest.raises(OverflowError):
        astjax.jit(M.index_from, backend="c")(a, lo, 12)
    assert loops.STATS["loops"] == before


def test_a_python_loop_passing_the_index_reuses_one_plan(monkeypatch):
    """A loop the C driver does not take (here: told to take none) calls its
    kernels from Python with a new int each step: the call plan made for the first
    value serves every value (``KernelCall.int_plans``: ~45 us per step when each
    value made its own), with each value's range check still made (int32 ``a * j``
    past int32 raises as NumPy does) and the values each step's own."""
    from astjax.kernels import loop_driver, runtime
    monkeypatch.setattr(loop_driver, "MIN_STEPS", 10 ** 9)
    kept = []
    keep = runtime.KernelCall._keep_plan
    monkeypatch.setattr(runtime.KernelCall, "_keep_plan",
                        lambda self, *a: (kept.append(self.__name__), keep(self, *a)))
    y = _rng().standard_normal((4, 3))
    n = 30
    for f in (M.index_in_kernel, M.index_reversed_rows):
        args = (y[0] if f is M.index_in_kernel else y, n)
        del kept[:]
        got = _check(f, *args, compiled=False)
        assert identical(got, f(*args))
        assert 0 < len(kept) <= 4, (f.__name__, kept)     # not one per step
    a = np.arange(5, dtype=np.int32)
    lo = 2 ** 31 - 40
    assert identical(_check(M.index_from, a, lo, 40, compiled=False), M.index_from(a, lo, 40))
    with pytest.raises(OverflowError):
        astjax.jit(M.index_from, backend="c")(a, lo, 41)


@pytest.mark.parametrize("lo", [2 ** 63 - 30, 2 ** 63 - 41, 2 ** 63 - 40, 2 ** 64 - 5,
                                -2 ** 63 - 3, -2 ** 63])
def test_a_loop_whose_index_passes_int64_runs_every_step(lo):
    """The class of a silent wrong result: a loop over ``range(lo, lo + n)`` whose
    bounds leave int64 ran in C with its int64 counter wrapped, so the C loop ran no
    step (``counting`` gave 1 where NumPy gives 40).  Bounds past int64 keep the loop
    in Python (``loop_driver._int``, ``takes_any_int``); values, gradients and the
    steps compiled where every index fits."""
    x = np.ones(3)
    n = 40
    before = loops.STATS["steps"]
    got = astjax.jit(M.index_counting, backend="c")(x, lo, n)
    assert identical(got, M.index_counting(x, lo, n))
    fits = -2 ** 63 <= lo and lo + n <= 2 ** 63 - 1
    assert (loops.STATS["steps"] - before > 0) == fits
    loss = lambda x: np.sum(M.index_counting(x, lo, n) * 0.5)      # noqa: E731
    g = astjax.jit(astjax.grad(loss), backend="c")(x * 1e-30)
    np.testing.assert_array_equal(g, astjax.grad(loss)(x * 1e-30))


def test_a_python_int_past_int64_goes_to_numpy():
    """A Python int goes to a kernel as an int64; NumPy takes a larger one with a
    float array (``x * 2**70``: a float64 product) and raises for an int64 array.
    The kernel leaves such a value to NumPy, through a new call and through a plan
    made for a smaller int (``int_plans``): it raised OverflowError for the float
    array before."""
    x = _rng().standard_normal(50)
    f = astjax.jit(M.index_scaled, backend="c")
    for k in (3, 2 ** 70, 5, -2 ** 70, 2 ** 63, 2 ** 63 - 1, -2 ** 63, -2 ** 63 - 1):
        assert identical(f(x, k), M.index_scaled(x, k)), k
    ai = np.arange(5)
    with pytest.raises(OverflowError):
        M.index_from(ai, 2 ** 70, 6)
    with pytest.raises(OverflowError):
        astjax.jit(M.index_from, backend="c")(ai, 2 ** 70, 6)
    y = _rng().standard_normal(3)
    assert identical(_check(M.index_from, y, 2 ** 70, 6, compiled=False),
                     M.index_from(y, 2 ** 70, 6))


def test_the_step_index_as_a_kernels_row_stays_with_python():
    """``table[j]`` in a kernel: the index shapes the kernel's plan (a slice bound),
    so the C loop cannot pass it per step; the values are the loop's."""
    table = _rng().standard_normal((12, 5))
    got = _check(M.index_as_row, table, 12, compiled=False)
    np.testing.assert_allclose(got, M.index_as_row(table, 12), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("f, dtype", [
    ("index_in_kernel", np.float64), ("index_fori_plain", np.float32),
    ("index_fori_plain", np.float64), ("index_fori", np.float32),
    ("index_fori", np.float64), ("index_times_dt", np.float64)])
def test_gradients_through_the_step_index_sweep_in_c(f, dtype):
    """Reverse mode of a loop reading its index: the forward sweep pushes the index
    (``SweepDriver``) and what the step makes of it (``j + 0.5``, a Python float;
    ``np.cos(j * dt)``, a NumPy float64: results of numbers only, out of the step's
    kernel); the backward sweep reads the index restored per trip
    (``BackSweepDriver``: the index carried from the trip before) and those numbers
    popped.  Both run in C; the gradient equals the NumPy backend's (types, dtypes
    and bits: a float32 ``y`` keeps float32 cotangents; cos within an ulp) and
    central differences.  (A float32 ``index_in_kernel`` or ``index_times_dt`` is
    float64 after a step: NumPy's promotion, not a fast trip.)"""
    fn = getattr(M, f)
    n = 30
    extra = (0.07, n) if f == "index_times_dt" else (n,)
    y = _rng().standard_normal((2, 3) if f == "index_in_kernel" else 6).astype(dtype)

    def loss(y):
        return np.sum(fn(y, *extra) ** 2)
    g = astjax.grad(loss)
    before = dict(loops.STATS)
    got = astjax.jit(g, backend="c")(y)
    assert loops.STATS["sweep_steps"] - before["sweep_steps"] >= n - 3
    assert loops.STATS["back_steps"] - before["back_steps"] >= n - 4
    want = astjax.jit(g, backend="numpy")(y)
    if f == "index_times_dt":
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    else:
        assert identical(got, want)
    assert got.dtype == dtype
    if dtype == np.float64:
        eps = 1e-6
        for d in _rng(5).standard_normal((3,) + y.shape):
            fd = (loss(y + eps * d) - loss(y - eps * d)) / (2 * eps)
            assert np.isclose(np.sum(got * d), fd, rtol=1e-6, atol=1e-9), (f, fd)


def _index_9(y):
    return M.index_in_kernel(y, 9)


def _index_loss(y):
    return np.sum(_index_9(y) ** 2)


def _index_jvp(y, t):
    return astjax.jvp(_index_9, (y,), (t,))[1]


def test_the_step_index_in_every_composition_order_under_jit():
    """The same class through vmap, jvp, hessian and vmap of grad, each under jit (C
    backend), against the same transformation run eagerly.  (Their generated loops
    did not reach the C driver before the fix either; this holds them to the eager
    values once they do.)"""
    y, ys = _rng().standard_normal(3), _rng(1).standard_normal((4, 3))
    t = _rng(2).standard_normal(3)
    jit = lambda f: astjax.jit(f, backend="c")          # noqa: E731
    pairs = [(jit(astjax.vmap(_index_9))(ys), astjax.vmap(_index_9)(ys)),
             (jit(_index_jvp)(y, t), _index_jvp(y, t)),
             (jit(astjax.hessian(_index_loss))(y), astjax.hessian(_index_loss)(y)),
             (jit(astjax.vmap(astjax.grad(_index_loss)))(ys),
              astjax.vmap(astjax.grad(_index_loss))(ys))]
    for got, want in pairs:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_a_reverse_scan():
    u = _rng().standard_normal(6)
    xs = _rng(1).standard_normal((10, 6))
    _check(M.reversed_scan, u, xs)


def test_a_number_per_step_out():
    u = np.abs(_rng().standard_normal((3, 3))).astype(np.float32)
    xs = np.abs(_rng(1).standard_normal((8, 3, 3))).astype(np.float32)
    got = _check(M.number_out, u, xs)
    assert got[1].shape == (8,) and got[1].dtype == np.float32


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 40])
def test_fori_loops_short_and_long(n):
    u = _rng().standard_normal((4, 4))
    _check(M.fori, u, n, compiled=n >= loops.MIN_STEPS)
    v = _rng(1).standard_normal((4, 4))
    _check(M.fori_pair, u, v, n, compiled=n >= loops.MIN_STEPS)


@pytest.mark.parametrize("steps", [0, 1, 3, 4])
def test_short_scans_run_as_python(steps):
    u = _rng().standard_normal((5, 4))
    xs = _rng(1).standard_normal(steps)
    _check(M.stencil, u, xs, compiled=steps >= loops.MIN_STEPS)


def test_strided_operands_and_a_first_step_of_another_layout():
    u = _rng().standard_normal((9, 6)).T            # a transposed carry for step 0
    xs = _rng(1).standard_normal((24, 6, 9))[::2, :, ::-1]   # strided, reversed rows
    _check(M.rows_in_rows_out, np.ascontiguousarray(u), xs)
    _check(M.rows_in_rows_out, u, xs)


def test_a_carry_that_changes_dtype_after_the_first_step():
    u = np.arange(12, dtype=np.int32).reshape(3, 4)
    xs = _rng(1).standard_normal((6, 3, 4))
    _check(M.rows_in_rows_out, u, xs)


@pytest.mark.parametrize("n", [0, 2, 9])
def test_a_scan_without_xs(n):
    u = _rng().standard_normal((4, 3)).astype(np.float32)
    _check(M.no_xs, u, n, compiled=n >= loops.MIN_STEPS)


def test_pytree_xs_stay_with_python():
    u = _rng().standard_normal(5)
    xs = (_rng(1).standard_normal((6, 5)), _rng(2).standard_normal((6, 5)))
    _check(M.pytree_xs, u, xs, compiled=False)


def test_an_error_state_that_raises_runs_python_and_raises():
    u = _rng().standard_normal((3, 3))
    xs = np.ones((6, 3, 3))
    xs[4, 1, 1] = 0.0
    _check(M.divides, u, xs)                   # inf where NumPy gives inf
    with np.errstate(divide="raise"):
        for backend in ("numpy", "c"):
            with pytest.raises(FloatingPointError):
                astjax.jit(M.divides, backend=backend)(u, xs)


def test_the_same_code_again_with_other_shapes():
    jc, jn = astjax.jit(M.stencil, backend="c"), astjax.jit(M.stencil, backend="numpy")
    for shape, steps in [((5, 4), 6), ((7, 3), 9), ((5, 4), 6), ((2, 2), 5)]:
        u = _rng(steps).standard_normal(shape)
        xs = _rng(1).standard_normal(steps)
        assert identical(jc(u, xs), jn(u, xs))


def test_results_do_not_share_buffers_across_calls():
    jc = astjax.jit(M.fori_pair, backend="c")
    u, v = _rng().standard_normal((3, 3)), _rng(1).standard_normal((3, 3))
    first = jc(u, v, 9)
    kept = tuple(a.copy() for a in first)
    second = jc(v, u, 9)
    assert identical(first, kept)
    assert not np.shares_memory(first[0], second[0])
    assert not np.shares_memory(first[1], second[1])


def test_vmap_of_a_scan_under_jit():
    u = _rng().standard_normal((3, 6, 5))
    xs = _rng(1).standard_normal((3, 8))
    f = astjax.vmap(M.stencil)
    want = astjax.jit(f, backend="numpy")(u, xs)
    got = astjax.jit(f, backend="c")(u, xs)
    assert identical(got, want)
    assert identical(got, tuple(np.stack(z) for z in zip(*[M.stencil(a, b) for a, b in
                                                           zip(u, xs)])))


def test_gradient_of_a_scan_under_jit():
    u = _rng().standard_normal((6, 5))
    xs = _rng(1).standard_normal(12)
    target = _rng(2).standard_normal((12, 5))
    g = astjax.grad(M.misfit, argnums=(0, 1))
    want = astjax.jit(g, backend="numpy")(u, xs, target)
    got = astjax.jit(g, backend="c")(u, xs, target)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    # and against central finite differences in float64
    eps = 1e-6
    d = _rng(3).standard_normal(u.shape)
    fd = (M.misfit(u + eps * d, xs, target) - M.misfit(u - eps * d, xs, target)) / (2 * eps)
    assert np.isclose(np.sum(got[0] * d), fd, rtol=1e-6, atol=1e-8)


def test_the_wave_simulation_is_one_compiled_loop():
    from test_ckernels_indexed import _wave_module
    w = _wave_module()
    _, velocity, problem, _ = w.setup(24, 20, 30, np.float32)
    before = loops.STATS["steps"]
    want = astjax.jit(w.simulate, backend="numpy")(velocity, **problem)
    got = astjax.jit(w.simulate, backend="c")(velocity, **problem)
    assert identical(got, want)
    assert loops.STATS["steps"] - before == 29


@pytest.mark.parametrize("threads", ["1", "2", "3"])
def test_large_steps_run_on_threads_inside_the_driver(threads, monkeypatch):
    """Steps large enough for OpenMP threads (``MIN_PARALLEL_WORK``): each compiled
    call splits its rows among the threads, the values stay NumPy's."""
    monkeypatch.setenv("ASTJAX_NUM_THREADS", threads)
    u = _rng().standard_normal((260, 270)).astype(np.float32)
    xs = _rng(1).standard_normal(7).astype(np.float32)
    _check(M.stencil, u, xs)
