"""Kernels in loop bodies: scan carries fuse, calls reuse plans and result buffers.

Three things are proved here against eager NumPy (the oracle):
* the "surely NumPy" analysis (passes/fusion.py) lets ``carry[1][1:, :]`` of a scan
  carry fuse into a kernel, and never takes a list, a Python number or a tuple item
  that is sometimes a list for an array (their ``+`` and slices are Python's);
* a call like an earlier one (same dtypes, shapes, strides, integer arguments) runs
  its plan and gives what a fresh call gives, for every layout and after the layout
  changes; ``np.errstate(divide="raise")`` still raises;
* a pooled result buffer is reused only when nothing can read it any more: results
  kept in lists, in views, in carries, in the caller's hands keep their values.
"""
from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

import astjax
from astjax.kernels import compile as cc, ir
from astjax.kernels.runtime import DATA_OFFSET, KernelCall
from conftest import load_source_module
from test_passes import identical

pytestmark = pytest.mark.skipif(not cc.available()[0],
                                reason=f"no C compiler: {cc.available()[1]}")

_DIR = tempfile.mkdtemp(prefix="astjax_ckl_src_")

SOURCE = '''
import numpy as np
from astjax import lax


def stencil_scan(u, xs):
    def step(carry, a):
        past, present = carry
        d = np.pad(present[1:, :] - present[:-1, :], ((0, 1), (0, 0)))
        e = np.pad(d[1:, :] - d[:-1, :], ((1, 0), (0, 0)))
        future = 2.0 * present - past + 0.1 * e + a * u
        return (present, future), future[1]
    (_, last), ys = lax.scan(step, (np.zeros_like(u), np.zeros_like(u)), xs)
    return ys, last


def scan_keeps_every_result(u, xs):
    def step(c, a):
        n = np.tanh(c * 0.5 + a) - c[::-1] * 0.25
        return n, n
    return lax.scan(step, u, xs)


def scan_list_carry(u, xs):
    def step(carry, a):
        lst, arr = carry
        lst2 = lst[1:] + lst[:1]
        arr2 = arr[1:] * 2.0 + arr[:-1] * a
        return (lst2, np.pad(arr2, (0, 1))), arr2[0] + lst2[0]
    return lax.scan(step, ([1.0, 2.0, 3.0], u), xs)


def scan_float_carry(u, xs):
    def step(carry, a):
        s, arr = carry
        t = s * 0.5 + a
        arr2 = np.exp(arr[1:] * t) - arr[:-1]
        return (t, np.pad(arr2, (1, 0))), arr2[0]
    return lax.scan(step, (0.5, u), xs)


def swap_list_and_array(u, n):
    t = (u, [1.0, 2.0, 3.0, 4.0])
    out = []
    for i in range(n):
        first = t[0]
        s = first[1:]
        w = s + s
        out.append(w)
        t = (t[1], t[0])
    return out


def loop_keeps_views(u, n):
    kept = []
    x = u
    for i in range(n):
        x = np.tanh(x * 0.9 + 0.1) * 1.5 - x[::-1] * 0.2
        kept.append(x[1:])
    return kept


def fori_swap(u, v, n):
    def body(i, c):
        a, b = c
        return (b, np.exp(a * 0.5) + b[::-1] * 0.25)
    return lax.fori_loop(0, n, body, (u, v))


def while_halves(u):
    def cond(c):
        return np.max(np.abs(c[1])) > 1e-3

    def body(c):
        k, x = c
        return (k + 1, np.tanh(x * 0.5) - x[::-1] * 0.1)
    return lax.while_loop(cond, body, (0, u))


def sliced_by(u, k):
    return np.exp(u[k:, :] - u[:-k, :]) * 0.5 + u[k:, :]


def divides(u, v):
    return np.exp(u) / (v * v)
'''

M = load_source_module(SOURCE, _DIR)


@pytest.fixture(autouse=True, scope="module")
def _own_cache():
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="astjax_ckl_cache_")
    yield
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old


def _r(*shape, seed=0, dtype=np.float64):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def equal(got, want):
    """Same structure, types and values (floats within a few ulp: transcendentals)."""
    assert type(got) is type(want), (type(got), type(want))
    if isinstance(got, (list, tuple)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            equal(g, w)
        return
    if isinstance(got, np.ndarray):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=2e-4 if got.dtype == np.float32
                                   else 1e-12, atol=1e-12)
        return
    assert got == want or np.allclose(got, want, rtol=1e-12), (got, want)


def kernel_calls(jf, *args):
    gen = jf._astjax_source(*args)
    return [v for v in gen.namespace.values() if isinstance(v, KernelCall)], gen.source


CASES = [
    ("stencil_scan", lambda: (_r(12, 9), _r(7))),
    ("scan_keeps_every_result", lambda: (_r(6, 5), _r(8))),
    ("scan_list_carry", lambda: (_r(7), _r(5))),
    ("scan_float_carry", lambda: (_r(7) * 0.1, _r(5) * 0.1)),
    ("swap_list_and_array", lambda: (_r(6), 5)),
    ("loop_keeps_views", lambda: (_r(9, 4), 6)),
    ("fori_swap", lambda: (_r(5, 3), _r(5, 3, seed=1), 7)),
    ("while_halves", lambda: (_r(6, 4),)),
]


@pytest.mark.parametrize("name,make", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_loops_through_kernels_match_numpy(name, make, dtype):
    """Every call (the first, then plans and pooled buffers) gives eager NumPy's
    values; results of earlier calls are not overwritten by later ones."""
    args = tuple(a.astype(dtype) if isinstance(a, np.ndarray) else a for a in make())
    f = getattr(M, name)
    want = f(*args)
    jf = astjax.jit(f, backend="c")
    first = jf(*args)
    equal(first, want)
    for _ in range(3):
        equal(jf(*args), want)
    equal(first, want)                  # the caller's results stayed theirs


def test_scan_carry_items_fuse_into_kernels():
    """The stencil step is two kernels reading ``present`` through the carry tuple
    (no slice of the carry left as a NumPy view between kernels)."""
    u, xs = _r(12, 9), _r(7)
    kcs, source = kernel_calls(astjax.jit(M.stencil_scan, backend="c"), u, xs)
    body = source.split("for i in", 1)[1].split("\n    ys", 1)[0]
    assert body.count("_kernel(") <= 2, body
    code = [ln for ln in body.split("def ")[0].splitlines()
            if not ln.strip().startswith("#")]
    assert not [ln for ln in code if "present[" in ln or "d[" in ln], body
    looped = [kc for kc in kcs if kc.pools is not None]
    assert looped and all(kc.block is not None for kc in looped)


def test_lists_and_numbers_in_carries_stay_python():
    """A list carried beside an array, and a tuple whose items swap between a list
    and an array, keep Python's slicing and ``+`` (concatenation)."""
    u = _r(6)
    got = astjax.jit(M.swap_list_and_array, backend="c")(u, 4)
    assert isinstance(got[1], list) and got[1] == [2.0, 3.0, 4.0] * 2
    _, source = kernel_calls(astjax.jit(M.swap_list_and_array, backend="c"), u, 4)
    assert "s + s" in source or "first_at + first_at" in source or \
        "np.add" not in source.split("def ")[1]


@pytest.mark.skipif(DATA_OFFSET is None, reason="no array-object entry points here")
def test_pooled_buffers_are_reused_only_when_dead():
    u, xs = _r(12, 9), _r(30)
    jf = astjax.jit(M.stencil_scan, backend="c")
    kcs, _ = kernel_calls(jf, u, xs)
    ys, last = jf(u, xs)
    pooled = [kc for kc in kcs if kc.pools is not None]
    assert pooled
    # 30 steps, a bounded pool: buffers went round
    assert all(len(p) <= 4 for kc in pooled for p in kc.pools)
    want = M.stencil_scan(u, xs)
    equal((ys, last), want)
    held = [jf(u, xs) for _ in range(3)]   # every call's results stay distinct
    for got in held:
        equal(got, want)
    assert len({id(g[1]) for g in held}) == 3


@pytest.mark.skipif(DATA_OFFSET is None, reason="no array-object entry points here")
def test_a_kernel_called_once_a_call_reuses_its_buffer_only_when_dead():
    """Outside loops a kernel keeps one buffer a result for the next call (a fresh one
    costs its page faults every call): results the caller still holds, or holds a
    view of, are never written by a later call; a dropped one is written again."""
    jf = astjax.jit(M.divides, backend="c")
    u, v = _r(50, 40), _r(50, 40, seed=1)
    kcs, _ = kernel_calls(jf, u, v)
    assert kcs and all(kc.pools is not None and kc.pool_depth == 1 for kc in kcs)
    first = jf(u, v)
    first = jf(u, v)                          # (planned: the pooled path)
    kept = first.copy()
    second = jf(v, u)
    assert second is not first and np.array_equal(first, kept)
    equal(second, M.divides(v, u))
    view = second[1:, ::2]
    view_kept = view.copy()
    del second
    third = jf(u + 1.0, v)
    assert np.array_equal(view, view_kept) and np.array_equal(first, kept)
    equal(third, M.divides(u + 1.0, v))
    address = third.__array_interface__["data"][0]
    del third
    fourth = jf(u, v + 2.0)
    assert fourth.__array_interface__["data"][0] == address      # dead: reused
    equal(fourth, M.divides(u, v + 2.0))


def test_plans_follow_layout_and_integer_changes():
    """Plans are keyed by dtypes, shapes, strides and integer arguments: a call with
    another layout or another slice bound is planned anew, never given a stale P."""
    jf = astjax.jit(M.sliced_by, backend="c")
    u = _r(10, 6)
    views = [u, u[::-1], u[:, ::2], np.asfortranarray(u), u[1:-1], u.astype(np.float32)]
    for k in (1, 3, 1, 2):
        for v in views + views[::-1]:
            equal(jf(v, k), M.sliced_by(v, k))


def test_errstate_raise_is_honoured_after_a_plan():
    jf = astjax.jit(M.divides, backend="c")
    u, v = _r(50, 40), _r(50, 40, seed=1)
    equal(jf(u, v), M.divides(u, v))
    equal(jf(u, v), M.divides(u, v))          # planned
    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError):
            jf(u, np.zeros_like(v))
    with np.errstate(divide="ignore"):
        equal(jf(u, np.zeros_like(v)), M.divides(u, np.zeros_like(v)))


@pytest.mark.skipif(DATA_OFFSET is None, reason="no array-object entry points here")
def test_a_weakly_referenced_result_is_not_reused():
    import weakref
    kc = KernelCall.__new__(KernelCall)
    pool = []
    a = kc._buffer(pool, (3, 4), np.dtype(np.float64))
    a[...] = 7.0
    ref = weakref.ref(a)
    del a
    b = kc._buffer(pool, (3, 4), np.dtype(np.float64))
    assert b is not ref() and np.all(ref() == 7.0)
    c_id = id(b)
    del b
    assert id(kc._buffer(pool, (3, 4), np.dtype(np.float64))) == c_id   # dead: reused


# ------------------------------------------------ the analysis, statement by statement

def _analysis_cases():
    from astjax.core import Const, Copy, For, Index, Prim, SetItem, SliceAtom, Var
    sl = Index((SliceAtom(Const(1), None, None),))
    at0, at1 = Index((Const(0),)), Index((Const(1),))

    def tup(t, *items):
        return Prim(t, "make_tuple", [[Var(i) for i in items]])
    rng = Prim(None, "range", [Const(3)])
    return [
        # name, params given as arrays, body, expected known names, expected unknown
        ("carry items of a loop", ["x"], [
            Prim("z", "np_zeros_like", [Var("x")]),
            tup("c", "z", "z"),
            For("i", rng, [
                Prim("p", "getitem", [Var("c"), at1]),
                Prim("q", "getitem", [Var("p"), sl]),
                Prim("f", "multiply", [Const(2.0), Var("p")]),
                tup("c2", "p", "f"),
                Copy("c", Var("c2"))])],
         {"z", "p", "q", "f"}, set()),
        ("a list in the carry", ["x"], [
            Prim("lst", "make_list", [[Const(1.0)]]),
            tup("c", "x", "lst"),
            For("i", rng, [
                Prim("p", "getitem", [Var("c"), at1]),
                Prim("q", "getitem", [Var("p"), sl]),
                Prim("a", "getitem", [Var("c"), at0]),
                tup("c2", "a", "p"),
                Copy("c", Var("c2"))])],
         {"a"}, {"p", "q", "lst"}),
        ("items that swap between a list and an array", ["x"], [
            Prim("lst", "make_list", [[Const(1.0)]]),
            tup("t", "x", "lst"),
            For("i", rng, [
                Prim("a", "getitem", [Var("t"), at0]),
                Prim("b", "getitem", [Var("t"), at1]),
                Prim("s", "getitem", [Var("a"), sl]),
                tup("t2", "b", "a"),
                Copy("t", Var("t2"))])],
         set(), {"a", "b", "s"}),
        ("a parameter not given as an array", [], [
            Prim("y", "getitem", [Var("x"), sl]),
            Prim("z", "add", [Var("y"), Var("y")])],
         set(), {"y", "z"}),
        ("an operator needs one NumPy operand", ["x"], [
            Prim("y", "add", [Var("u"), Var("u")]),
            Prim("z", "add", [Var("u"), Var("x")]),
            Prim("w", "tanh", [Var("u")])],
         {"z", "w"}, {"y"}),
        ("an integer index of an array may be any object", ["x"], [
            Prim("e", "getitem", [Var("x"), at0]),
            Prim("r", "getitem", [Var("x"), sl])],
         {"r"}, {"e"}),
        ("a global updated in place only", ["x"], [
            SetItem("g", at0, Var("x")),
            Prim("s", "getitem", [Var("g"), sl])],
         set(), {"g", "s"}),
        ("astjax's zeros_like of an unknown value", ["x"], [
            Prim("a", "zeros_like", [Var("u")]),
            Prim("b", "zeros_like", [Var("x")])],
         {"b"}, {"a"}),
    ]


@pytest.mark.parametrize("case", _analysis_cases(), ids=lambda c: c[0])
def test_surely_numpy_analysis(case):
    from astjax.passes.fusion import _NumpyValues
    from test_passes import make
    _, given, body, known, unknown = case
    params = ["x", "u"] if "u" in str(body) else ["x"]
    fn = make(params, body)
    values = _NumpyValues(fn, {p: np.dtype(np.float64) for p in given})
    assert {n for n in known | unknown if n in values} == known


WEAK = '''
import numpy as np


def doubled_then_added(x, y, s):
    x = s + s
    x = x + y
    return x


def halved_then_added(y, s, t):
    u = s / t
    return u + y


def int_times_float(y, j, s):
    t = j * s                  # (Python's: j rounded to a float, then the product)
    u = s - j
    return t * y + u
'''
W = load_source_module(WEAK, _DIR)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_python_arithmetic_in_a_group_stays_weakly_typed(dtype):
    """``s + s`` of Python floats is a Python float: float32 + it stays float32 (a
    kernel computing it as a float64 value made the result float64), and Python's
    ``s / 0.0`` still raises ZeroDivisionError."""
    y = _r(5, 3, dtype=dtype)
    for _ in range(2):
        got = astjax.jit(W.doubled_then_added, backend="c")(y, y, 0.75)
        want = W.doubled_then_added(y, y, 0.75)
        assert got.dtype == want.dtype
        assert np.array_equal(got, want)
    jf = astjax.jit(W.halved_then_added, backend="c")
    equal(jf(y, 3.0, 2.0), W.halved_then_added(y, 3.0, 2.0))
    with pytest.raises(ZeroDivisionError):
        jf(y, 3.0, 0.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_python_int_and_float_arithmetic_in_a_kernel(dtype):
    """``j * s`` of a Python int and a Python float (a loop index times a step): the
    kernel rounds the int to a double as Python does (to nearest, ties to even: 2^53
    + 1 becomes 2^53) and the result stays a weak Python float (float32 stays
    float32).  The same kernel through the CUDA renderer: NVRTC and the CPU shim."""
    y = _r(5, 3, dtype=dtype)
    jf = astjax.jit(W.int_times_float, backend="c")
    for j, sv in ((7, 0.25), (-3, 1e-3), (2 ** 53 + 1, 0.5), (2 ** 62 + 1, -1.5), (0, -0.0)):
        got, want = jf(y, j, sv), W.int_times_float(y, j, sv)
        assert got.dtype == want.dtype
        assert identical(got, want), (j, sv)
    source = astjax.make_source(jf)(y, 7, 0.25)
    assert "int_times_float" in source and "(double)" in source.split("_kernel_c = ")[1]
    from astjax.kernels import cuda_emulate
    if not cuda_emulate.available()[0]:
        return
    from astjax.kernels import cuda_runtime as cr
    from test_cuda import DEVICE
    kernel = ir.Kernel("int_float", ["y", "j", "s"],
                       [ir.Op("t", "multiply", ("j", "s"), "*"),
                        ir.Op("u", "subtract", ("s", "j"), "-"),
                        ir.Op("p", "multiply", ("t", "y")),
                        ir.Op("r", "add", ("p", "u"))], ["r"])
    with cr.use_device(DEVICE):
        kc = cr.CudaKernelCall(kernel, W.int_times_float, DEVICE)
        for j, sv in ((7, 0.25), (2 ** 53 + 1, 0.5)):
            got = kc(y, j, sv)
            got = got.get() if hasattr(got, "get") else got
            assert identical(np.asarray(got), W.int_times_float(y, j, sv))
        assert any(v is not None for v in kc.specs.values())


def _numbers_and_array(x, j, s, h):
    t = j * s                     # a Python float (weak)
    c = np.cos(t)                 # a NumPy float64
    g = h * 2.0                   # the dtype of the NumPy scalar ``h``
    return x * c + g, c, t, g


def test_results_of_numbers_only_come_out_of_the_kernel_as_the_block_gives_them():
    """A group whose results include values of numbers only (``np.cos(j * dt)`` of a
    loop step, which reverse mode keeps): the kernel computes them once, before its
    loops (``c.render``), and gives them as the block does: a Python float from
    Python's arithmetic, a NumPy scalar of NumPy's dtype from a ufunc.  It used to
    hand the whole call to NumPy.  The same through a kept plan; an empty loop still
    runs the block."""
    kernel = ir.Kernel("numbers", ["x", "j", "s", "h"],
                       [ir.Op("t", "multiply", ("j", "s"), "*"),
                        ir.Op("c", "cos", ("t",)),
                        ir.Op("g", "multiply", ("h", 2.0), "*"),
                        ir.Op("p", "multiply", ("x", "c")),
                        ir.Op("r", "add", ("p", "g"))], ["r", "c", "t", "g"])
    ran = []

    def block(*args):
        ran.append(args)
        return _numbers_and_array(*args)
    kc = KernelCall(kernel, block)
    kc.use_pool()
    for dtype in (np.float32, np.float64):
        x = _r(6, 5, dtype=dtype)
        for h in (np.float32(1.25), np.float64(-0.5), 0.75):
            for j, sv in ((3, 0.1), (-7, 2.5), (2 ** 53 + 1, 1e-9)):
                for _ in range(2):           # (the second call: the kept plan)
                    got, want = kc(x, j, sv, h), _numbers_and_array(x, j, sv, h)
                    assert type(got[2]) is float and type(got[1]) is np.float64
                    r, c, t, g = got
                    assert identical((c, t, g), want[1:]), (got[1:], want[1:])
                    np.testing.assert_allclose(r, want[0], rtol=4e-7, atol=1e-6)
                    assert r.dtype == want[0].dtype
    assert not ran and any(v is not None for v in kc.specs.values())
    # (an operand of one element with a shape: its result is an array, the numbers'
    # are numbers; an empty loop: the block)
    one = (np.full((1,), 0.5), 3, 0.1, np.full((1, 1), 2.0))
    got = kc(*one)
    assert identical(got[1:], _numbers_and_array(*one)[1:]) and got[0].shape == (1, 1)
    assert not ran
    assert identical(kc(np.zeros((0, 5)), 3, 0.1, 0.5),
                     _numbers_and_array(np.zeros((0, 5)), 3, 0.1, 0.5))
    assert len(ran) == 1


def test_plans_pass_argument_sequences_to_c_on_cpython():
    """On CPython with a GIL the plan path is on: kernels read their array objects
    from the argument tuple -- or list, when numbers were boxed into arrays -- and the
    result list.  Both give NumPy's values call after call through a kept plan."""
    import sys
    from astjax.kernels import runtime
    if sys.implementation.name != "cpython" or \
            not getattr(sys, "_is_gil_enabled", lambda: True)():
        pytest.skip("plans need CPython with a GIL")
    assert runtime.ITEM_OFFSETS is not None and runtime.DATA_OFFSET is not None
    a, b = _r(40, 33, seed=1), _r(40, 33, seed=2)
    arrays = KernelCall(ir.Kernel("seq_mul", ["a", "b"], [ir.Op("r", "multiply", ("a", "b"))],
                                  ["r"]), lambda a, b: a * b)
    scaled = KernelCall(ir.Kernel("seq_scale", ["a", "s"],
                                  [ir.Op("r", "multiply", ("a", "s"))], ["r"]),
                        lambda a, s: a * s)
    for k in range(3):
        assert np.array_equal(arrays(a, b), a * b)          # the tuple
        assert np.array_equal(scaled(a, 2.5 + k), a * (2.5 + k))   # a list (boxed)
        assert np.array_equal(arrays(b, a[::-1]), b * a[::-1])     # another layout
    assert len(arrays.plans) == 2 and len(scaled.plans) == 1


_SIN_SOURCE = '''
import numpy as np
from astjax import lax


def sin_fori(x):
    return lax.fori_loop(0, 40, lambda i, v: np.sin(v) * 0.5 + v * 0.25, x)


def sin_of_step(x):
    return lax.fori_loop(0, 40, lambda i, v: v * 0.5 + np.sin(i * 0.1) * x, x)


def sin_while(x):
    def body(c):
        v, i = c
        return np.sin(v) * 0.5 + v * 0.25, i + 1
    return lax.while_loop(lambda c: c[1] < 40, body, (x, 0))[0]
'''
_SIN = load_source_module(_SIN_SOURCE, _DIR, "astjax_ckl_sin")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [7, 64, 128, 129, 3000])
def test_a_function_numpy_runs_faster_compiles_in_a_small_loop(n, dtype):
    """``sin`` stays with NumPy's loops (``backend.NUMPY_FASTER``), except in a loop
    the driver compiles while the state is small (``LOOP_NUMPY_ABOVE``): a step
    through NumPy costs more host time than the kernel's slower sin.  Past it, and in
    a loop that stays Python (``while_loop``), the group runs as NumPy, bit for bit."""
    from astjax.kernels import backend, loops
    x = np.linspace(-3.0, 3.0, n).astype(dtype)
    want = astjax.jit(_SIN.sin_fori, backend="numpy")(x)
    before = loops.STATS["loops"]
    got = astjax.jit(_SIN.sin_fori, backend="c")(x)
    compiled = loops.STATS["loops"] > before
    assert compiled == (n <= backend.LOOP_NUMPY_ABOVE), (n, compiled)
    assert got.dtype == dtype
    if compiled:        # (our sin: within 2 ulp a step, 40 steps of a contraction)
        np.testing.assert_allclose(got, want, rtol=4 * np.finfo(dtype).eps, atol=0)
    else:
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(astjax.jit(_SIN.sin_while, backend="c")(x),
                                  astjax.jit(_SIN.sin_while, backend="numpy")(x))
    # ``sin`` of numbers only (the step's ``np.sin(i * 0.1)``): one call a step
    # whatever the state's size, so the kernel, and the compiled loop, at every size
    before = loops.STATS["loops"]
    got = astjax.jit(_SIN.sin_of_step, backend="c")(x)
    assert loops.STATS["loops"] > before, n
    want = _SIN.sin_of_step(x)         # (float64: NumPy's sin of a Python float)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14)
