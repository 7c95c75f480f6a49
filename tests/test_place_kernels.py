"""The kernel IR's ``Place``: a block placed at a basic index, fill elsewhere.

It is ``rt.place_at`` (the cotangent of ``x[index]``: a row at a run-time index, a
slice of fewer axes than ``x`` has) inside a fused expression, so a fast backward
trip's ``d_x + place(g)`` is one kernel term.  The oracle is ``rt.place_at`` itself
(NumPy): the C kernels and the CUDA kernels (NVRTC, run through the CPU shim) give
its values bit for bit, signs of zero included, for rows at non-negative and
negative run-time indices, for slices, and for fills 0.0 and -0.0; an index out of
range, a block of another shape, a fill or dtype the op does not take leave the call
to NumPy, which answers as NumPy does.
"""
from __future__ import annotations

import numpy as np
import pytest

import test_ckernels_indexed as TI
from astjax import runtime as rt
from astjax.kernels import compile as cc, ir
from astjax.kernels.runtime import KernelCall

pytestmark = [pytest.mark.skipif(not cc.available()[0],
                                 reason=f"no C compiler: {cc.available()[1]}"),
              pytest.mark.filterwarnings("ignore::RuntimeWarning")]   # (inf - inf: nan)

FLOATS = [np.float32, np.float64]


def _row_kernel(fill):
    # out = d + place(g at row r of an array shaped like x)
    return TI.kernel("place_row", ["d", "g", "x", "r"],
                     [ir.Place("p", "g", (("index", "r"),), "x", fill),
                      ir.Op("out", "add", ("d", "p"))], ["out"])


def _numpy_row(fill):
    def run(d, g, x, r):
        return d + rt.place_at(g, x, (r,), fill)
    return run


def _cases(dtype):
    d = TI.rand(dtype, (7, 5), 1)
    d[2, 1] = -0.0
    d[3, 3] = -0.0
    g = TI.rand(dtype, (5,), 2)
    g[0] = -0.0
    x = np.broadcast_to(np.zeros((), dtype), (7, 5))     # a shape stand-in (rt.meta)
    return d, g, x


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("fill", [0.0, -0.0], ids=["fill+0", "fill-0"])
@pytest.mark.parametrize("row", [0, 3, 6, -1, -7])
def test_a_row_at_a_run_time_index(dtype, fill, row):
    d, g, x = _cases(dtype)
    kc = KernelCall(_row_kernel(fill), TI.no_fallback)
    for name, dd in TI.layouts(d):
        TI.same(kc(dd, g, x, row), _numpy_row(fill)(dd, g, x, row))
    assert TI.compiled(kc)


@pytest.mark.parametrize("row", [7, -8, 100])
def test_an_index_out_of_range_is_numpys_error(row):
    d, g, x = _cases(np.float64)
    ran = []

    def block(*args):
        ran.append(True)
        return _numpy_row(0.0)(*args)
    kc = KernelCall(_row_kernel(0.0), block)
    with pytest.raises(IndexError):
        kc(d, g, x, row)
    with pytest.raises(IndexError):
        _numpy_row(0.0)(d, g, x, row)
    assert ran


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("items,index,gshape", [
    ((("slice", 1, None, None),), (slice(1, None),), (6, 5)),       # fewer axes: x[1:]
    ((("slice", None, -1, None),), (slice(None, -1),), (6, 5)),
    ((("slice", 2, 5, None), ("slice", 1, None, None)), (slice(2, 5), slice(1, None)),
     (3, 4)),
    ((("index", 2), ("slice", None, 3, None)), (2, slice(None, 3)), (3,)),
    ((("ellipsis",), ("index", -2)), (Ellipsis, -2), (7,)),
])
def test_slices_and_mixed_blocks(dtype, items, index, gshape):
    d, _, x = _cases(dtype)
    g = TI.rand(dtype, gshape, 3)
    for fill in (0.0, -0.0):
        k = TI.kernel("place_block", ["d", "g", "x"],
                      [ir.Place("p", "g", items, "x", fill),
                       ir.Op("out", "multiply", ("d", "p"))], ["out"])
        kc = KernelCall(k, TI.no_fallback)
        TI.same(kc(d, g, x), d * rt.place_at(g, x, index, fill))
        assert TI.compiled(kc)


def test_slice_bounds_given_at_run_time():
    d, _, x = _cases(np.float64)
    g = TI.rand(np.float64, (4, 5), 4)
    k = TI.kernel("place_bounds", ["d", "g", "x", "a", "b"],
                  [ir.Place("p", "g", (("slice", "a", "b", None),), "x", 0.0),
                   ir.Op("out", "subtract", ("d", "p"))], ["out"])
    kc = KernelCall(k, TI.no_fallback)
    for a, b in ((0, 4), (3, 7), (-5, -1)):
        TI.same(kc(d, g, x, a, b), d - rt.place_at(g, x, (slice(a, b),)))


def test_what_the_op_does_not_take_runs_numpy():
    d, g, x = _cases(np.float64)
    ran = []

    def block(*args):
        ran.append(True)
        return _numpy_row(0.0)(*args)
    kc = KernelCall(_row_kernel(0.0), block)
    # a block the row does not fill (NumPy broadcasts g), a dtype other than x's
    for args in ((d, g[:1], x, 2), (d, g.astype(np.float32), x, 2)):
        ran.clear()
        TI.same(kc(*args), _numpy_row(0.0)(*args))
        assert ran
    with pytest.raises(ir.Unsupported):
        ir.specialize_indexed(TI.kernel("bad_fill", ["g", "x"], [
            ir.Place("p", "g", (("index", 0),), "x", 1.0)], ["p"]),
            [ir.indexed_kind(g), ir.indexed_kind(x)])


def test_a_placement_in_the_interior_of_a_stencil_kernel():
    """Read at shifted rows beside slices and pads (the interior body and its boundary
    strips, kernels/c.py): the same values as NumPy."""
    d, g, x = _cases(np.float64)
    k = TI.kernel("place_stencil", ["d", "g", "x", "r"], [
        ir.Place("p", "g", (("index", "r"),), "x", 0.0),
        ir.Op("s", "add", ("d", "p")),
        ir.Slice("a", "s", (("slice", 1, None, None), ("slice", None, None, None))),
        ir.Slice("b", "s", (("slice", None, -1, None), ("slice", None, None, None))),
        ir.Op("c", "subtract", ("a", "b")),
        ir.Pad("out", "c", ((1, 0), (0, 0)), "constant", 0.0)], ["out"])
    kc = KernelCall(k, TI.no_fallback)
    for r in (0, 4, -1):
        s = d + rt.place_at(g, x, (r,))
        TI.same(kc(d, g, x, r), np.pad(s[1:] - s[:-1], ((1, 0), (0, 0))))
    assert TI.compiled(kc)


def test_place_at_is_the_general_rules_cotangent():
    x = np.ones((4, 3), np.float32)
    g = np.array([-0.0, 2.0, np.nan], np.float32)
    from astjax.runtime_array import getitem_vjp
    got = rt.place_at(g, x, -2)
    want = getitem_vjp(g, x, -2)
    TI.same(got, want)
    d = TI.rand(np.float32, (4, 3), 5)
    d[0, 0] = -0.0
    TI.same(d + rt.place_at(g, x, -2, -0.0), rt.acc_at(d, x, -2, g))


def _cuda():
    from astjax.kernels import cuda_emulate
    if not cuda_emulate.available()[0]:
        pytest.skip("no C++ compiler for the CUDA shim")
    from astjax.kernels import cuda_runtime as cr
    from test_cuda import DEVICE
    return cr, DEVICE


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_cuda_renders_the_placement(dtype):
    """The CUDA renderer (kernels/cuda.py, through c._Emitter): NVRTC compiles it and
    the CPU shim runs it, with NumPy's values."""
    cr, device = _cuda()
    d, g, x = _cases(dtype)
    with cr.use_device(device):
        for fill in (0.0, -0.0):
            kc = cr.CudaKernelCall(_row_kernel(fill), TI.no_fallback, device)
            for row in (0, 4, -1):
                TI.same(kc(d, g, x, row), _numpy_row(fill)(d, g, x, row))
            assert any(v is not None for v in kc.specs.values())
        g2 = TI.rand(dtype, (6, 5), 3)
        k = TI.kernel("place_cuda_slice", ["d", "g", "x"],
                      [ir.Place("p", "g", (("slice", 1, None, None),), "x", -0.0),
                       ir.Op("out", "add", ("d", "p"))], ["out"])
        kc = cr.CudaKernelCall(k, TI.no_fallback, device)
        TI.same(kc(d, g2, x), d + rt.place_at(g2, x, (slice(1, None),), -0.0))


def test_the_interior_of_a_stencil_with_a_placement_is_vectorized(tmp_path):
    """In the interior the placement's slice axes are assumed inside the block
    (constraints, as a pad's guards are): its reads are affine, only the row test
    stays (a bit select), and gcc vectorizes the loop -- a clamped read had kept
    FWI's fused backward step scalar."""
    import test_ckernels_interior as TCI
    from astjax.kernels import c as c_render, layout
    d = TI.rand(np.float32, (30, 40), 1)
    g = TI.rand(np.float32, (40,), 2)
    x = np.broadcast_to(np.zeros((), np.float32), (30, 40))
    k = TI.kernel("shown", ["d", "g", "x", "r"], [
        ir.Place("p", "g", (("index", "r"),), "x", 0.0),
        ir.Op("s", "add", ("d", "p")),
        ir.Op("t", "divide", ("s", 3.0)),
        ir.Slice("a", "t", (("slice", 1, None, None), ("slice", None, None, None))),
        ir.Slice("b", "t", (("slice", None, -1, None), ("slice", None, None, None))),
        ir.Op("c", "subtract", ("a", "b")),
        ir.Pad("out", "c", ((1, 0), (0, 0)), "constant", 0.0)], ["out"])
    args = [d, g, x, 7]
    typed = ir.specialize_indexed(k, [ir.indexed_kind(a) for a in args])
    lay = layout.layout(typed, args)
    text = c_render.render_indexed(typed, "shown", True, lay.baked)
    body = TCI.interior_body(text)
    assert not any("? 0 :" in line or ">= dim_in1_0 ?" in line for line in body), body
    reported = TCI._vectorized_lines(tmp_path, text)
    lines = text.splitlines()
    first = 1 + max(i for i, line in enumerate(lines) if "i1 = a1; i1 < b1" in line)
    last = first + len(body) + 1
    assert any(first <= n <= last for n in reported), (first, last, reported)
