"""The boundary columns of an interior row read the rings too (``kernels/c.py``).

A rank-2 kernel with rings (costly values read at shifted rows or columns, computed
once per row into per-thread ring rows) fills each ring row on all its columns: the
interior's span with the vectorized body, the few columns outside it with the body
that keeps the column guards.  The boundary columns of an interior row then read the
rings instead of recomputing every costly value per read (the wave's adjoint: 32
divisions per boundary point before, none now).  The oracle is NumPy, bit for bit,
over random chains of costly values, padded differences (constant and edge, widths
1 and 2, either axis), reversed axes and placed rows and blocks (what reverse mode's
indexing makes), on 1-3 threads, several shapes, strided and reversed views, float32
and float64.
"""
from __future__ import annotations

import os
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from astjax.kernels import c as c_render, compile as cc, ir, layout
from astjax.kernels.runtime import KernelCall
# (``_own_cache``: the autouse fixture, a cache directory of this module's own)
from test_ckernels_interior import (  # noqa: F401
    SCRATCHED, S, _costly, _own_cache, interior_body, numpy_of, rand, sl, views)

pytestmark = pytest.mark.skipif(not cc.available()[0],
                                reason=f"no C compiler: {cc.available()[1]}")


def same(got, want):
    """Bit for bit (the sign of zeros too)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (got, want)


def _diff(src, axis, width, lo, mode, t):
    """``np.pad(src[w:] - src[:-w] along axis, (lo, w - lo))``."""
    a = (sl(width, None), S) if axis == 0 else (S, sl(width, None))
    b = (sl(None, -width), S) if axis == 0 else (S, sl(None, -width))
    pads = [(0, 0), (0, 0)]
    pads[axis] = (lo, width - lo)
    pad = ir.Pad(t, t + "_d", tuple(pads), "edge") if mode == "edge" else \
        ir.Pad(t, t + "_d", tuple(pads), "constant", 0)
    return [ir.Slice(t + "_s1", src, a), ir.Slice(t + "_s2", src, b),
            ir.Op(t + "_d", "subtract", (t + "_s1", t + "_s2")), pad]


def _flip(src, axis, t):
    return [ir.Slice(t, src, (sl(None, None, -1), S) if axis == 0 else
                     (S, sl(None, None, -1)))]


def _placed_row(src, put, t):
    """Input row ``g`` placed at row ``put`` of zeros like ``x`` (reverse mode's
    ``x[put]``), plus ``src``: a fixed-row guard inside the rings (the wave's
    receiver row)."""
    return [ir.Place(t + "_p", "g", (("index", put), S), "x", -0.0),
            ir.Op(t, "add", (t + "_p", src))]


def _call(name, ops):
    """A kernel of ``ops`` on ``x`` (rank 2) and ``g`` (a row of ``x``'s length)."""
    f = numpy_of(ops, "r")
    return f, KernelCall(ir.Kernel(name, ["x", "g"], list(ops), ["r"]),
                         lambda x, g: f(x=x, g=g))


@st.composite
def edge_chains(draw):
    ops, names = [], ["x"]
    for k in range(draw(st.integers(2, 8))):
        src = draw(st.sampled_from(names[-3:]))
        kind = draw(st.sampled_from(["costly", "costly", "diff", "diff", "diff", "flip",
                                     "row", "add"]))
        t = f"v{k}"
        if kind == "costly":
            ops += _costly(src, t)
        elif kind == "diff":
            width = draw(st.integers(1, 2))
            ops += _diff(src, draw(st.integers(0, 1)), width,
                         draw(st.integers(0, width)),
                         draw(st.sampled_from(["constant", "edge"])), t)
        elif kind == "flip":
            ops += _flip(src, draw(st.integers(0, 1)), t)
        elif kind == "row":
            ops += _placed_row(src, draw(st.integers(0, 2)), t)
        else:
            ops.append(ir.Op(t, "add", (src, draw(st.sampled_from(names)))))
        names.append(t)
    ops.append(ir.Op("r", "add", (names[-1], draw(st.sampled_from(names)))))
    return ops


@settings(max_examples=int(os.environ.get("RING_EXAMPLES", "40")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(ops=edge_chains(), dtype=st.sampled_from([np.float32, np.float64]),
       threads=st.sampled_from(["1", "2", "3"]), seed=st.integers(0, 2 ** 16))
def test_random_chains_with_ring_edges_give_numpys_values(ops, dtype, threads, seed,
                                                          monkeypatch):
    from astjax.kernels import runtime
    monkeypatch.setenv("ASTJAX_NUM_THREADS", threads)
    monkeypatch.setattr(runtime, "MIN_PARALLEL_WORK", 1)
    f, kc = _call("edge_chain", ops)
    # (at least 3 rows and columns: NumPy cannot edge-pad the empty difference of
    # width 2 of fewer)
    for k, shape in enumerate([(3, 4), (4, 3), (5, 5), (7, 5), (23, 17), (9, 40)]):
        x0 = rand(dtype, shape, seed + k)
        g = rand(dtype, shape[1:], seed + 1000 + k)
        with np.errstate(all="ignore"):
            want = f(x=x0, g=g)
            for label, x in views(x0)[:3]:
                same(kc(x, g), want)


# chains whose boundary columns read rings: the adjoints (rings inside rings' fills),
# a placed row inside a ring (the wave's receiver row), a reversed axis
EDGED = [c for c in SCRATCHED] + [
    ("placed-row", _placed_row("x", 1, "pr") + _costly("pr", "c") +
     _diff("c", 0, 1, 0, "constant", "t") + _diff("c", 1, 1, 1, "constant", "u") +
     [ir.Op("r", "add", ("t", "u"))], 2),
    ("flipped-cols", _flip("x", 1, "f") + _costly("f", "c") +
     _diff("c", 1, 2, 1, "constant", "r"), 2),
]


def _shapes():
    return [(2, 1), (2, 5), (3, 3), (5, 2), (6, 7), (31, 29)]   # (placed-row: 2 rows)


@pytest.mark.parametrize("threads", ["1", "2", "3"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("chain", EDGED, ids=[c[0] for c in EDGED])
def test_ring_edges_give_numpys_values(chain, dtype, threads, monkeypatch):
    from astjax.kernels import runtime
    monkeypatch.setenv("ASTJAX_NUM_THREADS", threads)
    monkeypatch.setattr(runtime, "MIN_PARALLEL_WORK", 1)
    name, ops, rank = chain
    f, kc = _call(name.replace("-", "_"), ops)
    for k, shape in enumerate(_shapes()):
        x0 = rand(dtype, shape, k)
        g = rand(dtype, shape[1:], k + 100)
        with np.errstate(all="ignore"):
            want = f(x=x0, g=g)
            for label, x in views(x0):
                same(kc(x, g), want)
    texts = [v[1] for v in kc.specs.values() if v]
    ringed = [t for t in texts if "malloc(" in t]
    assert ringed and all("the column guards stay" in t for t in ringed)


def rendered(ops, dtype, shape):
    """The C text of ``ops`` on ``x`` of ``shape`` and a row ``g``."""
    x, g = rand(dtype, shape, 0), rand(dtype, shape[1:], 1)
    kinds = ((np.dtype(dtype), 2, None), (np.dtype(dtype), 1, None))
    typed = ir.specialize_indexed(ir.Kernel("shown", ["x", "g"], list(ops), ["r"]), kinds)
    return c_render.render_indexed(typed, "shown", True, layout.layout(typed, [x, g]).baked)


def _block_after(lines, marker):
    """The lines of the loop that follows the first line holding ``marker``."""
    start = next(i for i, line in enumerate(lines) if marker in line) + 1
    depth, body = 0, []
    for line in lines[start:]:
        depth += line.count("{") - line.count("}")
        body.append(line)
        if depth == 0:
            break
    return body


def _divisions(lines):
    return [line for line in lines if "/" in line.split("/*")[0]]


@pytest.mark.parametrize("chain", EDGED, ids=[c[0] for c in EDGED])
def test_boundary_columns_of_interior_rows_recompute_no_ring(chain):
    """The boundary columns of an interior row divide no more than an interior point
    (they read every ring; an inlined ring's newest row is read, not recomputed), and
    each ring's columns outside the interior's span divide as its interior fill."""
    name, ops, rank = chain
    text = rendered(ops, np.float64, (9, 8))
    lines = text.splitlines()
    cols = _block_after(lines, "the boundary columns of an interior row")
    assert cols and len(_divisions(cols)) <= len(_divisions(interior_body(text))), \
        "\n".join(cols)
    assert any("_row_" in line for line in cols)
    starts = [i for i, line in enumerate(lines) if "guards stay */" in line and
              "interior row" not in line]
    assert len(starts) >= text.count("malloc(")
    compared = 0
    for i in starts:
        edge = _block_after(lines[i:], "guards stay */")
        after = i + 1 + len(edge)
        if lines[after].strip() != "#pragma omp simd":
            continue                # an inlined ring's newest row: the interior loop's
        fill = _block_after(lines[after:], "#pragma omp simd")
        assert len(_divisions(edge)) == len(_divisions(fill)), "\n".join(edge + fill)
        compared += 1
    assert compared


def test_the_general_body_runs_only_on_boundary_rows():
    """An interior row runs no general (fully recomputing) body: its boundary columns
    sit after its interior loop, the general loop is for boundary rows (and rows whose
    interior is empty)."""
    ops = EDGED[[c[0] for c in EDGED].index("adjoint-both")][1]
    text = rendered(ops, np.float32, (30, 40))
    assert re.search(r"if \(!inside \|\| b1 <= a1\) \{\s*/\* the boundary", text)
