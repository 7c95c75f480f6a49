"""Indexed CUDA kernels without a GPU: slices, transposes, pads, casts, reductions.

The corpus of test_ckernels_indexed.py (every indexed statement of the kernel IR, on
contiguous, strided, reversed and transposed inputs; reductions over every axis
choice; the wave step, a loss, the pass corpus and its gradients) rendered as CUDA,
compiled by NVRTC and run on the CPU through cuda_shim.h by the CUDA host runtime
(test_cuda.py's device), against NumPy.  Reductions over every axis run as a
block-level tree reduction in shared memory plus a final pass; their float sums
differ from NumPy's pairwise sums by rounding only.
"""
from __future__ import annotations

import numpy as np
import pytest

import astjax
import test_ckernels_indexed as TI
from astjax.kernels import cuda_runtime as cr, ir
from test_cuda import DEVICE, NVRTC
from test_passes import PROGRAMS, identical, outcome

pytestmark = pytest.mark.skipif(not __import__(
    "astjax.kernels.cuda_emulate", fromlist=["x"]).available()[0], reason="no C++ compiler")


@pytest.fixture
def device():
    with cr.use_device(DEVICE):
        yield DEVICE


def _call(name, inputs, ops, outputs, block=TI.no_fallback):
    return cr.CudaKernelCall(TI.kernel(name, inputs, ops, outputs), block, DEVICE)


def _ran(kc):
    return any(v is not None for v in kc.specs.values())


@pytest.mark.parametrize("dtype", TI.DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("case", TI.CASES, ids=[c[0] for c in TI.CASES])
def test_indexed_statements_match_numpy(case, dtype):
    name, ops, f, yshape = case
    args = TI._operands(dtype, (6, 5), yshape, 3)
    try:
        with np.errstate(all="ignore"):
            want = f(*args)
    except TypeError:
        kc = _call(name.replace("-", "_"), ["x", "y"][:len(args)], ops, ["r"], f)
        with pytest.raises(TypeError):
            kc(*args)
        return
    kc = _call(name.replace("-", "_"), ["x", "y"][:len(args)], ops, ["r"])
    for label, x in TI.layouts(args[0]):
        TI.same(kc(x, *args[1:]), want)
    assert _ran(kc)


@pytest.mark.parametrize("narrow", [True, False], ids=["index32", "index64"])
@pytest.mark.parametrize("case", TI.CASES, ids=[c[0] for c in TI.CASES])
def test_both_flat_index_widths(case, narrow, monkeypatch):
    """The 32-bit flat index variant (the one sizes below 2^31 launch) and the 64-bit
    one run the same element code: each over the corpus, the variant checked."""
    if not narrow:
        monkeypatch.setattr(cr, "_NARROW_LIMIT", 0)       # as if the sizes needed 64 bits
    name, ops, f, yshape = case
    args = TI._operands(np.float64, (6, 5), yshape, 3)
    try:
        with np.errstate(all="ignore"):
            want = f(*args)
    except TypeError:
        return
    kc = _call(name.replace("-", "_"), ["x", "y"][:len(args)], ops, ["r"])
    before = len(DEVICE.launched)
    for label, x in TI.layouts(args[0]):
        TI.same(kc(x, *args[1:]), want)
    names = {n for n, _, _ in DEVICE.launched[before:]}
    if any(n.endswith(("_indexed", "_indexed32")) for n in names):
        assert any(n.endswith("_indexed32") for n in names) == narrow, names
    assert _ran(kc)


def test_slice_bounds_given_at_run_time():
    ops = [ir.Slice("a", "x", (("slice", 1, "n", None),)),
           ir.Slice("b", "x", (("slice", None, "m", "k"),)),
           ir.Op("r", "subtract", ("a", "b"))]
    kc = _call("bounds", ["x", "n", "m", "k"], ops, ["r"])
    x = TI.rand(np.float64, (12, 3))
    for n, m, k in [(6, 5, 1), (11, 10, 1), (7, 11, 2), (3, np.int64(2), 1)]:
        TI.same(kc(x, n, m, k), x[1:n] - x[:m:k])


def test_repeated_calls_reuse_one_plan_per_signature():
    """A repeated call (a scan step) launches from a plan kept per signature: shapes,
    strides, dtypes, integer values (slice bounds) and scalar types; interleaved
    signatures never take each other's plans."""
    ops = [ir.Slice("a", "x", (("slice", 1, "n", None),)),
           ir.Slice("b", "x", (("slice", None, "m", "k"),)),
           ir.Op("s", "subtract", ("a", "b")),
           ir.Op("r", "multiply", ("s", "c"))]
    kc = _call("plans", ["x", "n", "m", "k", "c"], ops, ["r"])
    x = TI.rand(np.float64, (12, 3))
    y = TI.rand(np.float32, (9, 4), 2)
    cases = [(x, 6, 5, 1, 2.0), (x, 11, 10, 1, 2.0), (x[::-1], 6, 5, 1, 2.0),
             (x, 7, 11, 2, np.float64(-1.5)), (y, 6, 5, 1, 3.0), (y[:, ::2], 6, 5, 1, 3.0),
             (y, 6, 5, 1, np.float64(0.25)), (x, np.int64(6), 5, 1, 0.5)]
    for _ in range(3):
        for xx, n, m, k, c in cases:
            TI.same(kc(xx, n, m, k, c), (xx[1:n] - xx[:m:k]) * c)
    assert len(kc.plans) == len(cases)


@pytest.mark.parametrize("src,to", [(np.float64, np.float32), (np.int32, np.float64),
                                    (np.bool_, np.int64), (np.float32, np.bool_),
                                    (np.int64, np.int32)])
def test_casts_match_numpy(src, to):
    kc = _call("cast", ["x"], [ir.Slice("a", "x", (("slice", None, None, -1),)),
                               ir.Cast("r", "a", np.dtype(to).str)], ["r"])
    x = TI.rand(src, (7, 4), 5)
    if np.dtype(src) == np.int64:
        x[0, 0] = 2 ** 40 + 3
    TI.same(kc(x), x[::-1].astype(to))


# every reduction for float64 on every layout; the other dtypes over all axes and the
# last (each layout and dtype is a kernel of its own: compiling them is the cost here)
REDUCTIONS = [(op, axis, keep, np.float64) for op, axis, keep in TI.REDUCTIONS] + [
    (op, axis, keep, dt) for op, axis, keep in TI.REDUCTIONS if axis in (None, -1)
    and not keep for dt in (np.float32, np.int32, np.int64, np.bool_)]


@pytest.mark.parametrize("op,axis,keep,dtype", REDUCTIONS,
                         ids=[f"{o}-{a}-{'keep' if k else 'drop'}-{np.dtype(d).name}"
                              for o, a, k, d in REDUCTIONS])
def test_reductions_end_a_kernel(op, axis, keep, dtype):
    x = TI.rand(dtype, (4, 5, 6), 7)
    if np.dtype(dtype).kind == "f":
        x[np.isnan(x) | np.isinf(x)] = 1.5
    ops = [ir.Transpose("a", "x", (1, 0, 2)),
           ir.Op("b", "multiply" if dtype is not np.bool_ else "logical_not",
                 ("a", 3) if dtype is not np.bool_ else ("a",)),
           ir.Reduce("r", "b", op, axis, keep)]

    def f(x):
        b = np.transpose(x, (1, 0, 2))
        b = b * 3 if dtype is not np.bool_ else np.logical_not(b)
        return getattr(np, op)(b, axis=axis, keepdims=keep)

    kc = _call(f"red_{op}", ["x"], ops, ["r"])
    before = len(DEVICE.launched)
    shown = TI.layouts(x) if dtype is np.float64 else TI.layouts(x)[::2]
    for label, v in shown:
        got, want = kc(v), f(v)
        assert type(got) is type(want), label
        TI.same(got, want, reduction=op in ("sum", "mean"))
    names = {n.rsplit("_", 1)[1] for n, _, _ in DEVICE.launched[before:]}
    assert names == ({"partial", "final"} if axis is None else {"indexed"}), names


# kept-axes reductions both ways: a thread per result and a block per result (the
# block's threads striding over the reduced elements, a shared-memory tree); reduced
# extents around the emulated block (64 threads) and its multiples
ROWS = [("sum", np.float64, (3, 130), -1), ("mean", np.float64, (5, 64, 2), 1),
        ("max", np.float64, (65, 3), 0), ("min", np.float64, (2, 3, 7, 11), (1, 3)),
        ("sum", np.float32, (4, 257), 1), ("max", np.float32, (3, 63), -1),
        ("sum", np.int64, (6, 100), -1), ("min", np.int32, (129, 2), 0),
        ("max", np.bool_, (3, 70), 1), ("sum", np.bool_, (2, 65), -1),
        ("mean", np.float32, (2, 300), 1), ("sum", np.float64, (7, 1), 1),
        ("sum", np.float64, (4, 3, 90), (0, 2), False), ("max", np.int64, (70, 5), 0, False),
        ("mean", np.float64, (3, 4, 129), -1, False)]


class _Forced:
    """The test device with the kept-axes strategy fixed."""

    def __init__(self, rows):
        self.rows = rows

    def __enter__(self):
        DEVICE.reduce_rows = self.rows

    def __exit__(self, *exc):
        del DEVICE.reduce_rows


@pytest.mark.parametrize("case", ROWS, ids=[
    f"{c[0]}-{np.dtype(c[1]).name}-{'x'.join(map(str, c[2]))}-{c[3]}"
    f"{'-drop' if len(c) > 4 else ''}" for c in ROWS])
def test_kept_axes_reductions_by_thread_and_by_block(case):
    op, dtype, shape, axis = case[:4]
    keep = case[4] if len(case) > 4 else True
    x = TI.rand(dtype, shape, 3)
    if np.dtype(dtype).kind == "f":
        x[np.isnan(x) | np.isinf(x)] = 0.5
    kc = _call(f"rows_{op}", ["x"], [ir.Reduce("r", "x", op, axis, keep)], ["r"])
    for rows, entry in ((True, "rows"), (False, "indexed")):
        before = len(DEVICE.launched)
        with _Forced(rows):
            for v in (x, np.flip(x, -1), np.asfortranarray(x)):
                TI.same(kc(v), getattr(np, op)(v, axis=axis, keepdims=keep),
                        reduction=op in ("sum", "mean"))
        names = {n.rsplit("_", 1)[1] for n, _, _ in DEVICE.launched[before:]}
        assert names == {entry}, names


def test_the_strategy_follows_the_shapes():
    dev = type("D", (), {"max_blocks": 128, "block": 256})()
    assert not cr.row_blocks(dev, 10 ** 6, 8, True)          # few elements per result
    assert cr.row_blocks(dev, 10 ** 6, 4096, True)            # long rows, last axis
    assert not cr.row_blocks(dev, 10 ** 6, 4096, False)       # columns: coalesced threads
    assert cr.row_blocks(dev, 100, 4096, False)               # too few results to fill it


@pytest.mark.parametrize("op", ["max", "min", "sum"])
def test_full_reductions_propagate_nan_and_inf(op):
    kc = _call(f"nan_full_{op}", ["x"], [ir.Reduce("r", "x", op, None)], ["r"])
    for n in (1, 63, 64, 65, 1000):
        x = TI.rand(np.float64, (n,), n)
        x[x.size // 2] = np.inf
        TI.same(kc(x), getattr(np, op)(x), reduction=True)
        x[x.size // 3] = np.nan
        TI.same(kc(x), getattr(np, op)(x), reduction=True)


def test_zero_d_device_scalars_are_read_through_a_pointer(device):
    kc = _call("scalar_ptr", ["x", "s"], [ir.Slice("a", "x", (("slice", 1, None, None),)),
                                          ir.Op("r", "multiply", ("a", "s"))], ["r"])
    x = TI.rand(np.float64, (9, 4))
    TI.same(kc(x, np.array(2.5)), x[1:] * 2.5)       # a 0-d device array: a pointer
    TI.same(kc(x, np.float64(2.5)), x[1:] * 2.5)     # a NumPy scalar: by value
    texts = [m.text for m in DEVICE.modules if "scalar_ptr" in m.text]
    assert any("const double s1 = p1[0];" in t for t in texts)
    assert any("double s1," in t for t in texts)


# ------------------------------------------------------------------ whole programs

@pytest.fixture(scope="module")
def progs():
    from conftest import load_source_module
    return load_source_module(TI.STEP, TI._DIR, "cuda_indexed_progs")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_wave_step_through_the_cuda_backend(progs, dtype, device):
    r = np.random.default_rng(0)
    a = [(r.random((40, 30)) + 0.5).astype(dtype) for _ in range(5)]
    args = a + [0.1, 0.2, 0.01]
    jc = astjax.jit(progs.step, backend="cuda")
    text = astjax.make_source(jc)(*args)
    assert 1 <= len(TI._kernel_calls(text)) <= 2
    assert "ra.pad" not in text.split("\n\n\ndef ", 1)[0]
    assert "_indexed(" in text and "loop fusion" in text
    before = len(device.launched)
    assert identical(jc(*args), progs.step(*args))
    strided = [x[::-1] for x in a[:2]] + a[2:] + [0.1, 0.2, 0.01]
    assert identical(jc(*strided), progs.step(*strided))
    assert len(device.launched) > before


def test_a_loss_is_one_kernel_with_a_tree_reduction(progs, device):
    r = np.random.default_rng(1)
    pred, y = r.standard_normal((300, 7)), r.standard_normal(7)
    jc = astjax.jit(progs.loss, backend="cuda")
    text = astjax.make_source(jc)(pred, y)
    assert len(TI._kernel_calls(text)) == 1 and "__syncthreads" in text
    before = len(device.launched)
    got = jc(pred, y)
    assert type(got) is np.float64
    np.testing.assert_allclose(got, progs.loss(pred, y), rtol=1e-13)
    assert [n.rsplit("_", 1)[1] for n, _, _ in device.launched[before:]] == \
        ["partial", "final"]


def test_wave_simulation_and_its_gradient_through_the_cuda_backend(device):
    w = TI._wave_module()
    _, velocity, problem, observed = w.setup(24, 20, 30, np.float32)
    ref = astjax.jit(w.simulate, backend="numpy")(velocity, **problem)
    got = astjax.jit(w.simulate, backend="cuda")(velocity, **problem)
    assert identical(got, ref)
    vg = astjax.value_and_grad(w.misfit)
    v_ref, g_ref = astjax.jit(vg, backend="numpy")(velocity, observed=observed, **problem)
    v, g = astjax.jit(vg, backend="cuda")(velocity, observed=observed, **problem)
    assert g.dtype == g_ref.dtype == np.float32
    np.testing.assert_allclose(v, v_ref, rtol=1e-5)
    np.testing.assert_allclose(g, g_ref, rtol=1e-4, atol=1e-6 * np.abs(g_ref).max())


@pytest.mark.parametrize("grad", [False, True], ids=["plain", "grad"])
@pytest.mark.parametrize("index", range(len(PROGRAMS)),
                         ids=[f"{f.__module__.split('.')[-1]}.{f.__name__}-{i}"
                              for i, (f, _) in enumerate(PROGRAMS)])
def test_pass_corpus_through_the_cuda_backend(index, grad, device):
    f, args = PROGRAMS[index]
    if grad and f.__name__ == "view_mutation":
        return
    target = astjax.grad(f) if grad else f
    expected = outcome(astjax.jit(target, backend="numpy"), args())
    actual = outcome(astjax.jit(target, backend="cuda"), args())
    assert identical(actual[0], expected[0]) or TI._close(actual[0], expected[0]), \
        (actual[0], expected[0])
    assert identical(actual[1], expected[1])


def test_every_indexed_kernel_built_here_went_through_nvrtc():
    if not NVRTC:
        pytest.skip("no NVRTC")
    assert DEVICE.ptx == len(DEVICE.modules)


@pytest.mark.parametrize("op", ["max", "min", "sum"])
def test_block_per_result_reductions_propagate_nan_and_inf(op):
    kc = _call(f"nan_rows_{op}", ["x"], [ir.Reduce("r", "x", op, -1, True)], ["r"])
    x = TI.rand(np.float64, (5, 200), 11)
    x[~np.isfinite(x)] = 0.25
    x[1, 7] = np.inf
    x[2, 150] = np.nan
    x[3, 0] = -np.inf
    x[3, 199] = np.nan
    with _Forced(True):
        TI.same(kc(x), getattr(np, op)(x, axis=-1, keepdims=True), reduction=True)
