"""Indexed C kernels (loop fusion through slices, pads, transposes, casts, reductions).

The oracle is NumPy.  Every indexed statement of the kernel IR, alone and chained,
for float32, float64, int32, int64 and bool, on contiguous, strided, reversed and
transposed inputs, gives NumPy's values exactly (sums and means: within rounding,
the kernel accumulates floats in float64 where NumPy sums pairwise), with NumPy's
dtypes and shapes.  Then whole programs through ``jit(..., backend="c")``: the wave
simulation step and its gradient, a loss, the pass corpus and its gradients, and
random fused chains with slices, pads and reductions.
"""
from __future__ import annotations

import os
import re
import sys
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import astjax
from astjax.kernels import compile as cc, ir
from astjax.kernels.runtime import KernelCall
from conftest import load_source_module
from test_passes import PROGRAMS, identical, outcome

pytestmark = pytest.mark.skipif(not cc.available()[0],
                                reason=f"no C compiler: {cc.available()[1]}")

HERE = os.path.dirname(os.path.abspath(__file__))
_DIR = tempfile.mkdtemp(prefix="astjax_cki_src_")
DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_]


@pytest.fixture(autouse=True, scope="module")
def _own_cache():
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="astjax_cki_cache_")
    yield
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old


def rand(dtype, shape, seed=0):
    r = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        v = r.standard_normal(shape) * 3
        if v.size > 3:
            v.flat[:3] = [np.nan, -0.0, np.inf]
        return v.astype(dt)
    if dt.kind == "b":
        return r.integers(0, 2, shape).astype(bool)
    return r.integers(-40, 40, shape).astype(dt)


def layouts(a):
    """``a``'s values as a contiguous array, a strided view, a reversed view and a
    transposed copy viewed back (non-C-contiguous)."""
    big = np.zeros((a.shape[0] * 2,) + a.shape[1:] + (3,)[:0], a.dtype)
    big[::2] = a
    out = [("contiguous", a), ("strided", big[::2]), ("reversed", a[::-1].copy()[::-1])]
    if a.ndim == 2:
        out.append(("fortran", np.asfortranarray(a)))
    return out


def kernel(name, inputs, ops, outputs):
    return ir.Kernel(name, list(inputs), list(ops), list(outputs))


def compiled(kc) -> bool:
    """A compiled kernel ran (not the NumPy fallback)."""
    return any(v is not None for v in kc.specs.values())


def same(got, want, reduction=False):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype,
                                                                got.shape, want.shape)
    if reduction and got.dtype.kind == "f":
        rtol = 1e-5 if got.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)
    else:
        assert np.array_equal(got, want, equal_nan=got.dtype.kind == "f"), (got, want)
        if got.dtype.kind == "f":
            assert np.array_equal(np.signbit(got), np.signbit(want))


def no_fallback(*args):
    raise AssertionError("the NumPy fallback ran")


# ------------------------------------------------------------ one statement at a time

S = ("slice", None, None, None)
# (id, IR statements on input "x" (and "y"), the NumPy function, y's shape or None)
CASES = [
    ("shift-difference", [ir.Slice("a", "x", (("slice", 1, None, None), S)),
                          ir.Slice("b", "x", (("slice", None, -1, None),)),
                          ir.Op("r", "subtract", ("a", "b"))],
     lambda x: x[1:, :] - x[:-1], None),
    ("steps-and-offsets", [ir.Slice("a", "x", (("slice", 1, None, 2), ("slice", None, None, 3))),
                           ir.Op("r", "multiply", ("a", 2))],
     lambda x: x[1::2, ::3] * 2, None),
    ("reversed", [ir.Slice("a", "x", (("slice", None, None, -1),)),
                  ir.Op("r", "add", ("a", "x"))],
     lambda x: x[::-1] + x, None),
    ("integer-index", [ir.Slice("a", "x", (("index", 2),)),
                       ir.Slice("b", "x", (("index", -1),)),
                       ir.Op("r", "maximum", ("a", "b"))],
     lambda x: np.maximum(x[2], x[-1]), None),
    ("newaxis-outer", [ir.Slice("a", "x", (("index", 0), ("slice", None, None, None),
                                            ("newaxis",))),
                       ir.Slice("b", "y", (("newaxis",), ("ellipsis",))),
                       ir.Op("r", "multiply", ("a", "b"))],
     lambda x, y: x[0, :, None] * y[None, ...], (5,)),
    ("ellipsis", [ir.Slice("a", "x", (("ellipsis",), ("slice", 1, None, None))),
                  ir.Op("r", "negative", ("a",))],
     lambda x: -x[..., 1:], None),
    ("transpose", [ir.Transpose("a", "x", None), ir.Op("r", "subtract", ("a", "y"))],
     lambda x, y: x.T - y, (6,)),
    ("pad-constant", [ir.Pad("a", "x", ((1, 2), (0, 3)), "constant", 0),
                      ir.Op("r", "add", ("a", 1))],
     lambda x: np.pad(x, ((1, 2), (0, 3))) + 1, None),
    ("pad-value", [ir.Pad("r", "x", ((2, 2),), "constant", 1)],
     lambda x: np.pad(x, 2, constant_values=1), None),
    ("pad-edge", [ir.Slice("a", "x", (("slice", None, None, 2),)),
                  ir.Pad("b", "a", ((0, 2), (1, 0)), "edge"),
                  ir.Op("r", "multiply", ("b", "b"))],
     lambda x: (lambda b: b * b)(np.pad(x[::2], ((0, 2), (1, 0)), mode="edge")), None),
    ("stencil", [ir.Slice("a", "x", (("slice", 1, None, None),)),
                 ir.Slice("b", "x", (("slice", None, -1, None),)),
                 ir.Op("c", "subtract", ("a", "b")),
                 ir.Pad("d", "c", ((0, 1), (0, 0)), "constant", 0),
                 ir.Slice("e", "d", (("slice", 1, None, None),)),
                 ir.Slice("f", "d", (("slice", None, -1, None),)),
                 ir.Op("g", "subtract", ("e", "f")),
                 ir.Pad("r", "g", ((1, 0), (0, 0)), "constant", 0)],
     lambda x: (lambda d: np.pad(d[1:] - d[:-1], ((1, 0), (0, 0))))(
         np.pad(x[1:] - x[:-1], ((0, 1), (0, 0)))), None),
]


def _operands(dtype, shape, yshape, seed):
    x = rand(dtype, shape, seed)
    return [x] if yshape is None else [x, rand(dtype, yshape, seed + 1)]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_indexed_statements_match_numpy(case, dtype):
    name, ops, f, yshape = case
    args = _operands(dtype, (6, 5), yshape, 3)
    try:
        with np.errstate(all="ignore"):
            want = f(*args)
    except TypeError:        # NumPy refuses (boolean subtract): so does the kernel
        kc = KernelCall(kernel(name, ["x", "y"][:len(args)], ops, ["r"]), f)
        with pytest.raises(TypeError):
            kc(*args)
        return
    kc = KernelCall(kernel(name.replace("-", "_"), ["x", "y"][:len(args)], ops, ["r"]),
                    no_fallback)
    for label, x in layouts(args[0]):
        same(kc(x, *args[1:]), want)
    assert compiled(kc)


def test_slice_bounds_given_at_run_time():
    ops = [ir.Slice("a", "x", (("slice", 1, "n", None),)),
           ir.Slice("b", "x", (("slice", None, "m", "k"),)),
           ir.Op("r", "subtract", ("a", "b"))]
    kc = KernelCall(kernel("bounds", ["x", "n", "m", "k"], ops, ["r"]), no_fallback)
    x = rand(np.float64, (12, 3))
    for n, m, k in [(6, 5, 1), (11, 10, 1), (7, 11, 2), (3, np.int64(2), 1)]:
        same(kc(x, n, m, k), x[1:n] - x[:m:k])
    # shapes that do not broadcast: the NumPy fallback raises NumPy's error
    kc.block = lambda x, n, m, k: x[1:n] - x[:m:k]
    with pytest.raises(ValueError):
        kc(x, 6, 7, 1)


@pytest.mark.parametrize("src,to", [(np.float64, np.float32), (np.int32, np.float64),
                                    (np.bool_, np.int64), (np.float32, np.bool_),
                                    (np.int64, np.int32), (np.int32, np.int64),
                                    (np.float32, np.float64)])
def test_casts_match_numpy(src, to):
    kc = KernelCall(kernel("cast", ["x"], [ir.Slice("a", "x", (("slice", None, None, -1),)),
                                           ir.Cast("r", "a", np.dtype(to).str)], ["r"]),
                    no_fallback)
    x = rand(src, (7, 4), 5)
    if np.dtype(src) == np.int64:
        x[0, 0] = 2 ** 40 + 3        # wraps as NumPy's astype does
    same(kc(x), x[::-1].astype(to))


def test_float_to_integer_casts_run_with_numpy():
    f = lambda x: x.astype(np.int32)   # noqa: E731
    kc = KernelCall(kernel("cast_fi", ["x"], [ir.Cast("r", "x", "<i4")], ["r"]), f)
    x = rand(np.float64, (3, 4))[1:]
    with np.errstate(all="ignore"):
        same(kc(x), f(x))
    assert not compiled(kc)


REDUCTIONS = [(op, axis, keep) for op in ("sum", "mean", "max", "min")
              for axis in (None, 0, -1, (0, 2), 1) for keep in (False, True)]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op,axis,keep", REDUCTIONS,
                         ids=[f"{o}-{a}-{'keep' if k else 'drop'}" for o, a, k in REDUCTIONS])
def test_reductions_end_a_kernel(op, axis, keep, dtype):
    x = rand(dtype, (4, 5, 6), 7)
    if np.dtype(dtype).kind == "f":
        x[np.isnan(x) | np.isinf(x)] = 1.5     # NaN handled below
    ops = [ir.Transpose("a", "x", (1, 0, 2)),
           ir.Op("b", "multiply" if dtype is not np.bool_ else "logical_not",
                 ("a", 3) if dtype is not np.bool_ else ("a",)),
           ir.Reduce("r", "b", op, axis, keep)]

    def f(x):
        b = np.transpose(x, (1, 0, 2))
        b = b * 3 if dtype is not np.bool_ else np.logical_not(b)
        return getattr(np, op)(b, axis=axis, keepdims=keep)

    kc = KernelCall(kernel(f"red_{op}", ["x"], ops, ["r"]), no_fallback)
    for label, v in layouts(x):
        got, want = kc(v), f(v)
        assert type(got) is type(want), label      # a full reduction gives a scalar
        same(got, want, reduction=op in ("sum", "mean"))
    assert compiled(kc)


@pytest.mark.parametrize("op", ["max", "min", "sum"])
def test_reductions_propagate_nan_and_inf(op):
    kc = KernelCall(kernel(f"nan_{op}", ["x"], [ir.Reduce("r", "x", op, -1)], ["r"]),
                    no_fallback)
    x = rand(np.float64, (5, 8), 2)
    x[1, 3] = np.nan
    x[2, 0] = np.inf
    x[3, 1], x[3, 4] = np.inf, -np.inf
    same(kc(x), getattr(np, op)(x, axis=-1), reduction=True)


def test_empty_and_zero_d_run_as_numpy_gives_them():
    kc = KernelCall(kernel("empty", ["x"], [ir.Slice("a", "x", (("slice", 1, None, None),)),
                                            ir.Op("r", "multiply", ("a", 2.0))], ["r"]),
                    lambda x: x[1:] * 2.0)
    for x in (np.zeros((1, 3)), np.zeros((0, 4)), np.zeros((5, 0))):
        same(kc(x), x[1:] * 2.0)
    red = KernelCall(kernel("empty_red", ["x"], [ir.Reduce("r", "x", "max", None)], ["r"]),
                     np.max)
    with pytest.raises(ValueError):          # NumPy's error: max of an empty array
        red(np.zeros((0, 3)))
    s = KernelCall(kernel("empty_sum", ["x"], [ir.Reduce("r", "x", "sum", 0)], ["r"]),
                   lambda x: np.sum(x, axis=0))
    same(s(np.zeros((0, 3), np.float32)), np.zeros(3, np.float32))
    zero_d = KernelCall(kernel("zero_d", ["x", "y"], [ir.Op("r", "add", ("x", "y"))],
                               ["r"]), np.add)
    assert identical(zero_d(np.float32(2), np.array(3.0, np.float32)), np.float32(5))


def test_a_bad_index_runs_numpy_which_raises():
    f = lambda x: x[7] + 1.0                                   # noqa: E731
    kc = KernelCall(kernel("bad_index", ["x"], [ir.Slice("a", "x", (("index", 7),)),
                                                ir.Op("r", "add", ("a", 1.0))], ["r"]), f)
    with pytest.raises(IndexError):
        kc(np.zeros((3, 2)))


# ------------------------------------------------------------------ whole programs

def _wave_module():
    sys.path.insert(0, os.path.join(HERE, "..", "examples"))
    try:
        import wave as wave_example
    finally:
        sys.path.pop(0)
    return wave_example


STEP = '''
import numpy as np


def step(pp, p, dhx, dhy, kappa, dx, dy, dt):
    dpressure_dx = np.pad((p[1:, :] - p[:-1, :]) / dx, ((0, 1), (0, 0)))
    dpressure_dy = np.pad((p[:, 1:] - p[:, :-1]) / dy, ((0, 0), (0, 1)))
    pressure_xx = dpressure_dx / dhx
    pressure_yy = dpressure_dy / dhy
    dxx = np.pad((pressure_xx[1:, :] - pressure_xx[:-1, :]) / dx, ((1, 0), (0, 0)))
    dyy = np.pad((pressure_yy[:, 1:] - pressure_yy[:, :-1]) / dy, ((0, 0), (1, 0)))
    return 2.0 * p - pp + (dt * dt) * (dxx + dyy) * kappa


def loss(pred, y):
    return np.mean((pred - y) ** 2)


def view_and_value(x):
    a = x[1:]
    b = a * 2.0
    return a, b


def long_then_shifted(x):
    t = np.tanh(np.tanh(np.tanh(np.tanh(np.tanh(x)))))
    u = np.tanh(np.tanh(np.tanh(np.tanh(np.tanh(t)))))
    return u[1:] - u[:-1]
'''


@pytest.fixture(scope="module")
def progs():
    return load_source_module(STEP, _DIR, "ckernel_progs")


def _kernel_calls(text):
    host = text.split("\n\n\ndef ", 1)[0]
    return re.findall(r"\w+_kernel\(", host)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_wave_step_is_one_or_two_kernels_and_exact(progs, dtype):
    r = np.random.default_rng(0)
    a = [(r.random((40, 30)) + 0.5).astype(dtype) for _ in range(5)]
    args = a + [0.1, 0.2, 0.01]
    jc = astjax.jit(progs.step, backend="c")
    text = astjax.make_source(jc)(*args)
    assert 1 <= len(_kernel_calls(text)) <= 2, _kernel_calls(text)
    assert "ra.pad" not in text.split("\n\n\ndef ", 1)[0]       # pads are inside kernels
    assert "loop fusion" in text
    want = progs.step(*args)
    assert identical(jc(*args), want)
    assert identical(astjax.jit(progs.step, backend="numpy")(*args), want)
    strided = [x[::-1] for x in a[:2]] + a[2:] + [0.1, 0.2, 0.01]
    assert identical(jc(*strided), progs.step(*strided))


def test_a_loss_is_one_kernel(progs):
    r = np.random.default_rng(1)
    pred, y = r.standard_normal((300, 7)), r.standard_normal(7)
    jc = astjax.jit(progs.loss, backend="c")
    text = astjax.make_source(jc)(pred, y)
    assert len(_kernel_calls(text)) == 1 and "reduction" in text
    got = jc(pred, y)
    assert type(got) is np.float64
    np.testing.assert_allclose(got, progs.loss(pred, y), rtol=1e-13)


def test_a_view_result_stays_a_view(progs):
    x = np.arange(12.0).reshape(4, 3)
    for backend in ("numpy", "c"):
        a, b = astjax.jit(progs.view_and_value, backend=backend)(x)
        assert np.shares_memory(a, x), backend
        assert identical(b, x[1:] * 2.0)


def test_an_expensive_producer_read_at_shifted_indices_is_materialized(progs, monkeypatch):
    from astjax.kernels import backend as kbackend
    monkeypatch.setattr(kbackend, "NUMPY_FASTER", frozenset())   # tanh as a kernel
    x = np.random.default_rng(2).standard_normal((50, 4))
    jc = astjax.jit(progs.long_then_shifted, backend="c")
    text = astjax.make_source(jc)(x)
    assert len(_kernel_calls(text)) == 2, text.split("\n\n\ndef ", 1)[0]
    got, want = jc(x), progs.long_then_shifted(x)
    assert got.shape == want.shape and np.allclose(got, want, rtol=1e-12, atol=1e-14)


def test_wave_simulation_and_its_gradient_through_the_c_backend():
    w = _wave_module()
    _, velocity, problem, observed = w.setup(24, 20, 30, np.float32)
    ref = astjax.jit(w.simulate, backend="numpy")(velocity, **problem)
    got = astjax.jit(w.simulate, backend="c")(velocity, **problem)
    assert identical(got, ref)
    vg = astjax.value_and_grad(w.misfit)
    v_ref, g_ref = astjax.jit(vg, backend="numpy")(velocity, observed=observed, **problem)
    v, g = astjax.jit(vg, backend="c")(velocity, observed=observed, **problem)
    assert g.dtype == g_ref.dtype == np.float32
    np.testing.assert_allclose(v, v_ref, rtol=1e-5)
    np.testing.assert_allclose(g, g_ref, rtol=1e-4, atol=1e-6 * np.abs(g_ref).max())


@pytest.mark.parametrize("grad", [False, True], ids=["plain", "grad"])
@pytest.mark.parametrize("index", range(len(PROGRAMS)),
                         ids=[f"{f.__module__.split('.')[-1]}.{f.__name__}-{i}"
                              for i, (f, _) in enumerate(PROGRAMS)])
def test_pass_corpus_through_the_c_backend(index, grad):
    f, args = PROGRAMS[index]
    if grad and f.__name__ == "view_mutation":
        return                      # grad refuses it (test_passes checks the error)
    target = astjax.grad(f) if grad else f
    a = args()
    expected = outcome(astjax.jit(target, backend="numpy"), args())
    actual = outcome(astjax.jit(target, backend="c"), a)
    assert identical(actual[0], expected[0]) or _close(actual[0], expected[0]), \
        (actual[0], expected[0])
    assert identical(actual[1], expected[1])


def _close(a, b):
    """Equal up to float rounding (sums accumulate in another order in kernels)."""
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(
            _close(x, y) for x, y in zip(a, b))
    if isinstance(a, (np.ndarray, np.generic, float)):
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and np.allclose(
            a, b, rtol=1e-12, atol=1e-13, equal_nan=True)
    return identical(a, b)


# -------------------------------------------- random chains with slices and pads

_STEPS = [
    "np.pad({a}[1:, :] - {a}[:-1, :], ((0, 1), (0, 0)))",
    "np.pad({a}[:, 1:], ((0, 0), (1, 0)), mode=\"edge\")",
    "{a}[::-1] * {b}",
    "{a}.T + {b}",
    "np.where({a} > {b}, {a}, 0.5 * {b})",
    "np.clip({a}, -1.0, 1.5) - {b}",
    "np.pad({a}[::2, 1:-1], ((0, {h}), (1, 1)), constant_values=0.25)",
    "np.maximum({a}, {b}[:, ::-1])",
    "({a} * {b}).astype(np.float32)",
]
_ENDS = ["", "np.sum({a})", "np.mean({a}, axis=0)", "np.max({a}, axis=-1, keepdims=True)",
         "np.min({a}, axis=1)", "np.sum({a}, axis=(0, 1), keepdims=True)"]


@st.composite
def stencil_chains(draw, n=6):
    names = ["x", "y"]
    lines = []
    for k in range(draw(st.integers(1, 5))):
        a, b = draw(st.sampled_from(names)), draw(st.sampled_from(names))
        e = draw(st.sampled_from(_STEPS)).format(a=a, b=b, h=n // 2)
        lines.append(f"    t{k} = {e}")
        names.append(f"t{k}")
    end = draw(st.sampled_from(_ENDS))
    last = names[-1]
    result = end.format(a=last) if end else last
    return "\n".join(["import numpy as np", "", "", "def chain(x, y):"] + lines +
                     [f"    return {result}", ""])


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(text=stencil_chains(), seed=st.integers(0, 2 ** 16),
       dtype=st.sampled_from([np.float64, np.float32]), view=st.booleans())
def test_random_chains_with_slices_pads_and_reductions(text, seed, dtype, view):
    module = load_source_module(text, _DIR)
    r = np.random.default_rng(seed)
    x = r.standard_normal((6, 6)).astype(dtype)
    y = r.standard_normal((6, 6)).astype(dtype)
    if view:
        x = np.ascontiguousarray(x.T).T[::-1]
    with np.errstate(all="ignore"):
        want = module.chain(x, y)
        got = astjax.jit(module.chain, backend="c")(x, y)
    if "sum" in text.splitlines()[-1] or "mean" in text.splitlines()[-1]:
        same(got, want, reduction=True)
    else:
        assert type(got) is type(want)
        same(got, want)


def test_astjax_show_prints_kernels_with_a_flag(progs):
    from test_cli import run_cli
    target = f"{progs.__file__}:loss"
    plain = run_cli("show", target, "-t", "jit", "--args", "f64[30, 4], f64[4]",
                    "--color", "never")
    assert plain.returncode == 0, plain.stderr
    assert "loss_kernel(" in plain.stdout and "#include" not in plain.stdout
    assert "astjax show --kernels" in plain.stdout
    shown = run_cli("show", target, "-t", "jit", "--args", "f64[30, 4], f64[4]",
                    "--color", "never", "--kernels")
    assert shown.returncode == 0, shown.stderr
    assert "loss_kernel(" in shown.stdout and "#include <math.h>" in shown.stdout
    assert "const double" in shown.stdout and "reduction" in shown.stdout
