"""Indexed C kernels split into a branch-free interior and guarded boundary strips.

``kernels/c.py`` runs each indexed kernel's loops over an interior where no pad guard
or clamp can fire (solved per call from the guards' affine index forms) and keeps the
guarded body for the strips around it.  The oracle is NumPy, bit for bit: every pad
mode and width, read through slices of any step (1, 2, 3, negative), transposes,
fixed indices into the padded region, on contiguous, strided, reversed and
transposed inputs, over shapes 0, 1, 2 (where the interior is empty or one element)
up to a few rows.  Then the structure: the interior body has no select and no clamp,
kernels without pads keep one loop nest, and the wave step's interior loop is the
one the C compiler vectorizes.
"""
from __future__ import annotations

import os
import re
import subprocess
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from astjax.kernels import c as c_render, compile as cc, ir, layout
from astjax.kernels.runtime import KernelCall

pytestmark = pytest.mark.skipif(not cc.available()[0],
                                reason=f"no C compiler: {cc.available()[1]}")


@pytest.fixture(autouse=True, scope="module")
def _own_cache():
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="astjax_ckin_cache_")
    yield
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old


def rand(dtype, shape, seed=0):
    r = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return (r.standard_normal(shape) * 3).astype(dt)
    return r.integers(-40, 40, shape).astype(dt)


def views(a):
    """``a``'s values as contiguous, strided, reversed and (2-d) Fortran-order arrays."""
    big = np.zeros((a.shape[0] * 2,) + a.shape[1:], a.dtype)
    big[::2] = a
    out = [("contiguous", a), ("strided", big[::2]), ("reversed", a[::-1].copy()[::-1])]
    if a.ndim == 2:
        out.append(("fortran", np.asfortranarray(a)))
    return out


def numpy_of(ops, result):
    """The NumPy function an IR statement list computes (the oracle)."""
    def run(**env):
        for op in ops:
            if isinstance(op, ir.Slice):
                items = []
                for it in op.items:
                    if it[0] == "slice":
                        items.append(slice(*it[1:]))
                    elif it[0] == "index":
                        items.append(it[1])
                    elif it[0] == "newaxis":
                        items.append(None)
                    else:
                        items.append(Ellipsis)
                env[op.target] = env[op.source][tuple(items)]
            elif isinstance(op, ir.Pad):
                x = env[op.source]
                widths = op.widths if len(op.widths) == x.ndim else op.widths * x.ndim
                if op.mode == "edge":
                    env[op.target] = np.pad(x, widths, mode="edge")
                else:
                    env[op.target] = np.pad(x, widths, constant_values=op.value)
            elif isinstance(op, ir.Transpose):
                env[op.target] = np.transpose(env[op.source], op.axes)
            elif isinstance(op, ir.Place):        # ``op.source`` at ``items`` of a fill
                like = env[op.like]
                out = np.full(like.shape, op.value, like.dtype)
                out[tuple(slice(*it[1:]) if it[0] == "slice" else it[1]
                          for it in op.items)] = env[op.source]
                env[op.target] = out
            else:
                args = [env[a] if isinstance(a, str) else a for a in op.args]
                env[op.target] = getattr(np, op.ufunc)(*args)
        return env[result]
    return run


def same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype,
                                                                got.shape, want.shape)
    assert np.array_equal(got, want), (got, want)


def no_fallback(*args):
    raise AssertionError("the NumPy fallback ran")


S = ("slice", None, None, None)


def sl(start=None, stop=None, step=None):
    return ("slice", start, stop, step)


# (id, statements on "x", rank of x): every pad reaches the loop index through the
# slices and transposes around it, so the interior's bounds come from affine forms
# with scales 1, 2, 3, -1, -2 and offsets from pad widths and slice starts
CHAINS = [
    ("pad-constant-1d", [ir.Pad("p", "x", ((2, 3),), "constant", 0),
                         ir.Op("r", "multiply", ("p", 2))], 1),
    ("pad-value-1d", [ir.Pad("p", "x", ((1, 0),), "constant", 7),
                      ir.Op("r", "add", ("p", 1))], 1),
    ("pad-edge-1d", [ir.Pad("p", "x", ((3, 1),), "edge"),
                     ir.Op("r", "subtract", ("p", 1))], 1),
    ("pad-then-step2", [ir.Pad("p", "x", ((2, 1),), "constant", 0),
                        ir.Slice("s", "p", (sl(None, None, 2),)),
                        ir.Op("r", "add", ("s", 1))], 1),
    ("pad-then-step3-offset", [ir.Pad("p", "x", ((4, 2),), "edge"),
                               ir.Slice("s", "p", (sl(1, None, 3),)),
                               ir.Op("r", "add", ("s", 1))], 1),
    ("pad-then-reversed", [ir.Pad("p", "x", ((1, 3),), "constant", -1),
                           ir.Slice("s", "p", (sl(None, None, -1),)),
                           ir.Op("r", "add", ("s", "s"))], 1),
    ("pad-then-step-minus2", [ir.Pad("p", "x", ((2, 2),), "edge"),
                              ir.Slice("s", "p", (sl(-2, None, -2),)),
                              ir.Op("r", "negative", ("s",))], 1),
    ("reversed-then-pad", [ir.Slice("s", "x", (sl(None, None, -1),)),
                           ir.Pad("p", "s", ((1, 2),), "constant", 0),
                           ir.Op("r", "add", ("p", 1))], 1),
    ("stepped-then-pad", [ir.Slice("s", "x", (sl(1, None, 2),)),
                          ir.Pad("p", "s", ((0, 2),), "edge"),
                          ir.Op("r", "add", ("p", 1))], 1),
    ("shifted-reads-of-a-pad", [ir.Pad("p", "x", ((1, 1),), "constant", 0),
                                ir.Slice("a", "p", (sl(2, None),)),
                                ir.Slice("b", "p", (sl(None, -2),)),
                                ir.Op("r", "subtract", ("a", "b"))], 1),
    ("wave-x", [ir.Slice("a", "x", (sl(1, None), S)),
                ir.Slice("b", "x", (sl(None, -1), S)),
                ir.Op("c", "subtract", ("a", "b")),
                ir.Pad("d", "c", ((0, 1), (0, 0)), "constant", 0),
                ir.Slice("e", "d", (sl(1, None), S)),
                ir.Slice("f", "d", (sl(None, -1), S)),
                ir.Op("g", "subtract", ("e", "f")),
                ir.Pad("r", "g", ((1, 0), (0, 0)), "constant", 0)], 2),
    ("wave-y", [ir.Slice("a", "x", (S, sl(1, None))),
                ir.Slice("b", "x", (S, sl(None, -1))),
                ir.Op("c", "subtract", ("a", "b")),
                ir.Pad("d", "c", ((0, 0), (0, 1)), "constant", 0),
                ir.Slice("e", "d", (S, sl(1, None))),
                ir.Slice("f", "d", (S, sl(None, -1))),
                ir.Op("g", "subtract", ("e", "f")),
                ir.Pad("r", "g", ((0, 0), (1, 0)), "constant", 0)], 2),
    ("edge-both-axes", [ir.Pad("p", "x", ((2, 1), (1, 3)), "edge"),
                        ir.Op("r", "multiply", ("p", "p"))], 2),
    ("pad-transposed", [ir.Pad("p", "x", ((1, 0), (0, 2)), "constant", 3),
                        ir.Transpose("t", "p", None),
                        ir.Op("r", "add", ("t", 1))], 2),
    ("transposed-then-pad", [ir.Transpose("t", "x", None),
                             ir.Pad("p", "t", ((0, 1), (2, 0)), "edge"),
                             ir.Op("r", "add", ("p", 1))], 2),
    ("pad-strided-2d", [ir.Pad("p", "x", ((1, 2), (2, 1)), "constant", 0),
                        ir.Slice("s", "p", (sl(None, None, 2), sl(None, None, -3))),
                        ir.Op("r", "add", ("s", 1))], 2),
    ("fixed-row-in-the-pad", [ir.Pad("p", "x", ((1, 1), (0, 0)), "constant", 5),
                              ir.Slice("s", "p", (("index", 0), S)),
                              ir.Op("r", "add", ("s", 1))], 2),
    ("fixed-row-inside", [ir.Pad("p", "x", ((1, 1), (1, 1)), "edge"),
                          ir.Slice("s", "p", (("index", -2), S)),
                          ir.Op("r", "add", ("s", 1))], 2),
    ("pad-3d", [ir.Pad("p", "x", ((0, 1), (1, 0), (2, 2)), "constant", 0),
                ir.Slice("s", "p", (S, sl(1, None), sl(None, None, -1))),
                ir.Op("r", "add", ("s", 1))], 3),
    ("pad-pad", [ir.Pad("p", "x", ((1, 1),), "edge"),
                 ir.Pad("q", "p", ((2, 0),), "constant", 9),
                 ir.Op("r", "add", ("q", 1))], 1),
]

SHAPES = {1: [(1,), (2,), (3,), (11,)],
          2: [(1, 1), (1, 5), (2, 2), (5, 1), (3, 4), (7, 9)],
          3: [(1, 2, 1), (2, 3, 4), (3, 1, 5)]}


@pytest.mark.parametrize("dtype", [np.float32, np.int64], ids=["float32", "int64"])
@pytest.mark.parametrize("chain", CHAINS, ids=[c[0] for c in CHAINS])
def test_interior_and_boundary_give_numpys_values(chain, dtype):
    name, ops, rank = chain
    f = numpy_of(ops, "r")
    fell_back = []

    def fallback(x):
        fell_back.append(x.shape)
        return f(x=x)
    kc = KernelCall(ir.Kernel(name.replace("-", "_"), ["x"], list(ops), ["r"]), fallback)
    for k, shape in enumerate(SHAPES[rank]):
        x0 = rand(dtype, shape, k)
        try:
            want = f(x=x0)
        except ValueError:       # NumPy refuses (edge-padding an empty slice): so do we
            with pytest.raises(ValueError):
                kc(x0)
            continue
        for label, x in views(x0):
            same(kc(x), want)
    assert any(v is not None for v in kc.specs.values())
    # (only a padded value that is empty goes to NumPy: never the largest shape)
    assert SHAPES[rank][-1] not in fell_back, fell_back


@pytest.mark.parametrize("shape", [(0,), (0, 3), (3, 0)])
def test_padding_an_empty_array_runs_numpy(shape):
    ops = [ir.Pad("p", "x", ((1, 2),) * len(shape), "constant", 0),
           ir.Op("r", "add", ("p", 1))]
    f = numpy_of(ops, "r")
    kc = KernelCall(ir.Kernel("pad_empty", ["x"], ops, ["r"]), lambda x: f(x=x))
    x = np.zeros(shape, np.float32)
    same(kc(x), f(x=x))


def test_a_run_time_slice_start_moves_the_interior():
    """``p[k:]`` with ``k`` an argument: the interior's bounds are solved per call."""
    ops = [ir.Pad("p", "x", ((2, 2),), "constant", 0),
           ir.Slice("s", "p", (sl("k", None),)),
           ir.Op("r", "add", ("s", 1))]
    kc = KernelCall(ir.Kernel("runtime_start", ["x", "k"], ops, ["r"]), no_fallback)
    x = rand(np.float64, (9,))
    for k in range(0, 13):
        same(kc(x, k), np.pad(x, 2)[k:] + 1)


# --------------------------------------------------------------------- the structure

def rendered(ops, kinds, args, rank_name="x"):
    k = ir.Kernel("shown", ["x"], list(ops), ["r"])
    typed = ir.specialize_indexed(k, kinds)
    lay = layout.layout(typed, args)
    return c_render.render_indexed(typed, "shown", True, lay.baked)


def interior_body(text):
    """The lines of the innermost interior loop (after its ``#pragma omp simd``)."""
    lines = text.splitlines()
    start = max(i for i, line in enumerate(lines) if "i1 = a1; i1 < b1" in line or
                "i0 = lo0; i0 < hi0" in line)
    depth, body = 0, []
    for line in lines[start:]:
        depth += line.count("{") - line.count("}")
        body.append(line)
        if depth == 0:
            break
    return body[1:-1]


@pytest.mark.parametrize("chain", [c for c in CHAINS if c[2] <= 2 and
                                   "fixed" not in c[0]], ids=lambda c: c[0])
def test_the_interior_body_has_no_select_and_no_clamp(chain):
    name, ops, rank = chain
    x = rand(np.float32, (7, 9)[:rank])
    text = rendered(ops, ((np.dtype(np.float32), rank, None),), [x])
    assert "astjax_narrow(" in text
    body = interior_body(text)
    assert body and not any("?" in line for line in body), "\n".join(body)
    assert any(line.strip().startswith("q0[") for line in body)


def test_a_kernel_without_pads_keeps_one_loop_nest():
    ops = [ir.Slice("a", "x", (sl(1, None), S)), ir.Slice("b", "x", (sl(None, -1), S)),
           ir.Op("r", "subtract", ("a", "b"))]
    x = rand(np.float32, (7, 9))
    text = rendered(ops, ((np.dtype(np.float32), 2, None),), [x])
    assert "astjax_narrow" not in text and "inside" not in text
    assert text.count("for (int64_t i1") == 1


def _vectorized_lines(tmp_path, text):
    """Line numbers of ``text`` (a kernel's C) where gcc reports a loop vectorized;
    skips where the compiler is not gcc (``-fopt-info-vec`` is gcc's)."""
    path, version, omp = cc.compiler()
    if "gcc" not in version.lower() and "free software foundation" not in version.lower():
        pytest.skip("-fopt-info-vec is gcc's")
    src = tmp_path / "k.c"
    src.write_text(text)
    r = subprocess.run([path, *cc.flags(omp), "-fopt-info-vec-optimized", str(src),
                        "-o", str(tmp_path / "k.so")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return [int(n) for n in re.findall(r"k\.c:(\d+):\d+: optimized: loop vectorized",
                                       r.stderr)]


def test_the_wave_step_interior_loop_is_vectorized(tmp_path):
    """gcc reports the interior loop of the wave stencil vectorized (the guarded
    loops around it are not: they carry the clamps)."""
    ops = CHAINS[[c[0] for c in CHAINS].index("wave-x")][1]
    x = rand(np.float32, (30, 40))
    text = rendered(ops, ((np.dtype(np.float32), 2, None),), [x])
    reported = _vectorized_lines(tmp_path, text)
    lines = text.splitlines()
    first = 1 + next(i for i, line in enumerate(lines) if "i1 = a1; i1 < b1" in line)
    last = first + len(interior_body(text)) + 1
    assert any(first <= n <= last for n in reported), (first, last, reported)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_interior_columns_of_boundary_rows_are_vectorized(tmp_path, dtype):
    """A boundary row's interior columns run a body with only the row's guards, as
    bit selects after the row's own clamps (no control flow): gcc vectorizes it."""
    ops = CHAINS[[c[0] for c in CHAINS].index("wave-x")][1]
    x = rand(dtype, (30, 40))
    text = rendered(ops, ((np.dtype(dtype), 2, None),), [x])
    assert "a boundary row" in text
    reported = _vectorized_lines(tmp_path, text)
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if "a boundary row" in line)
    first = 1 + next(i for i in range(head, len(lines)) if "i1 = a1; i1 < b1" in lines[i])
    last = first + next(k for k, line in enumerate(lines[first:]) if line.strip() == "}")
    assert any(first <= n <= last for n in reported), (first, last, reported)


# ------------------------------------------------------- scratch rows (ring buffers)

def _costly(src, tgt):
    """``tgt = (src / 3) / (src + 7)``: costly enough to be computed once per row."""
    return [ir.Op(tgt + "_a", "divide", (src, 3)),
            ir.Op(tgt + "_b", "add", (src, 7)),
            ir.Op(tgt, "divide", (tgt + "_a", tgt + "_b"))]


def _padded_diff(src, axis, lo, hi, tgt):
    """``np.pad(src[1:] - src[:-1] along axis, widths)`` (the wave's difference)."""
    a = (sl(1, None), S) if axis == 0 else (S, sl(1, None))
    b = (sl(None, -1), S) if axis == 0 else (S, sl(None, -1))
    widths = ((lo, hi), (0, 0)) if axis == 0 else ((0, 0), (lo, hi))
    return [ir.Slice(tgt + "_s1", src, a), ir.Slice(tgt + "_s2", src, b),
            ir.Op(tgt + "_d", "subtract", (tgt + "_s1", tgt + "_s2")),
            ir.Pad(tgt, tgt + "_d", widths, "constant", 0)]


# a costly value read at rows i0 + a, columns i1 + b for runs of offsets
SCRATCHED = [
    ("rows-2", _costly("x", "c") + _padded_diff("c", 0, 1, 0, "r"), 2),
    ("cols-2", _costly("x", "c") + _padded_diff("c", 1, 0, 1, "r"), 2),
    ("wave-like", _padded_diff("x", 0, 0, 1, "px") + _costly("px", "cx") +
     _padded_diff("cx", 0, 1, 0, "dx") + _padded_diff("x", 1, 0, 1, "py") +
     _costly("py", "cy") + _padded_diff("cy", 1, 1, 0, "dy") +
     [ir.Op("r", "add", ("dx", "dy"))], 2),
    ("rows-3-cols-3", _costly("x", "c") + [
        ir.Pad("p", "c", ((1, 1), (1, 1)), "edge"),
        ir.Slice("u", "p", (sl(2, None), sl(None, -2))),
        ir.Slice("m", "p", (sl(1, -1), sl(1, -1))),
        ir.Slice("d", "p", (sl(None, -2), sl(2, None))),
        ir.Op("um", "add", ("u", "m")), ir.Op("r", "subtract", ("um", "d"))], 2),
    ("rows-3", _costly("x", "c") + [
        ir.Slice("u", "c", (sl(2, None), S)),
        ir.Slice("m", "c", (sl(1, -1), S)),
        ir.Slice("d", "c", (sl(None, -2), S)),
        ir.Op("um", "add", ("u", "m")), ir.Op("s", "subtract", ("um", "d")),
        ir.Pad("r", "s", ((1, 1), (0, 0)), "constant", 0)], 2),
    # c read at rows i0 - 1, i0 by the body and at i0 + 1 inside e, read at two rows
    # and two columns: both rings keep their fill loops
    ("nested", _costly("x", "c") + _padded_diff("c", 0, 0, 1, "t") + _costly("t", "e") +
     _padded_diff("e", 0, 1, 0, "ex") + _padded_diff("e", 1, 1, 0, "ey") +
     _padded_diff("c", 0, 1, 0, "u") +
     [ir.Op("exy", "add", ("ex", "ey")), ir.Op("r", "add", ("exy", "u"))], 2),
    # the wave's adjoint, per axis: the body reads u at two columns (rows), and u's
    # own fill reads c at two columns (rows): both are rings, c's filled first
    ("adjoint-cols", _costly("x", "c") + _padded_diff("c", 1, 0, 1, "t") +
     _costly("t", "u") + _padded_diff("u", 1, 1, 0, "r"), 2),
    ("adjoint-rows", _costly("x", "c") + _padded_diff("c", 0, 0, 1, "t") +
     _costly("t", "u") + _padded_diff("u", 0, 1, 0, "r"), 2),
    ("adjoint-both", _costly("x", "c") + _padded_diff("c", 0, 0, 1, "t") +
     _padded_diff("c", 1, 0, 1, "s") + _costly("t", "u") + _costly("s", "w") +
     _padded_diff("u", 0, 1, 0, "du") + _padded_diff("w", 1, 1, 0, "dw") +
     [ir.Op("r", "add", ("du", "dw"))], 2),
]


def _scratch_shapes():
    return [(1, 1), (1, 4), (2, 2), (3, 3), (4, 1), (5, 7), (40, 33)]


@pytest.mark.parametrize("threads", ["1", "2", "3"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("chain", SCRATCHED, ids=[c[0] for c in SCRATCHED])
def test_scratch_rows_give_numpys_values(chain, dtype, threads, monkeypatch):
    """Every thread's run of rows starts its ring afresh (2, 3 threads split the rows);
    tiny shapes leave the interior empty or one row."""
    from astjax.kernels import runtime
    monkeypatch.setenv("ASTJAX_NUM_THREADS", threads)
    monkeypatch.setattr(runtime, "MIN_PARALLEL_WORK", 1)
    name, ops, rank = chain
    f = numpy_of(ops, "r")
    kc = KernelCall(ir.Kernel(name.replace("-", "_"), ["x"], list(ops), ["r"]),
                    lambda x: f(x=x))
    for k, shape in enumerate(_scratch_shapes()):
        x0 = rand(dtype, shape, k)
        with np.errstate(all="ignore"):
            want = f(x=x0)
            for label, x in views(x0):
                same(kc(x), want)
    texts = [v[1] for v in kc.specs.values() if v]
    assert texts and any("sc0_row" in t or "sc0_at" in t for t in texts)


# rings whose newest row the interior loop computes itself (read at column offset 0
# only); the others are filled by loops of their own
INLINED = {"rows-2": 1, "cols-2": 0, "wave-like": 1, "rows-3-cols-3": 0, "rows-3": 1,
           "nested": 0, "adjoint-cols": 0, "adjoint-rows": 1, "adjoint-both": 1}
# costly values (two divisions each) a point of each chain needs
COSTLY = {"rows-2": 1, "cols-2": 1, "wave-like": 2, "rows-3-cols-3": 1, "rows-3": 1,
          "nested": 2, "adjoint-cols": 2, "adjoint-rows": 2, "adjoint-both": 3}


@pytest.mark.parametrize("chain", SCRATCHED, ids=[c[0] for c in SCRATCHED])
def test_scratched_values_are_computed_once_per_row(chain):
    """The interior body reads the costly value from ring rows, or computes its newest
    row once and stores it there for the next rows: one computation (two divisions)
    per value and point, never one per read."""
    name, ops, rank = chain
    x = rand(np.float64, (9, 8))
    text = rendered(ops, ((np.dtype(np.float64), 2, None),), [x])
    body = interior_body(text)
    divisions = [line for line in body if "/" in line.split("/*")[0]]
    stored = [line for line in body if re.match(r"sc\d+_row_p\d+\[\w+\] = ", line.strip())]
    assert len(stored) == INLINED[name], "\n".join(body)
    assert len(divisions) == (2 if stored else 0), "\n".join(body)
    assert any("_row_" in line for line in body)
    # every ring is read by the interior or by another ring's fill (none filled for
    # nothing)
    for k in range(text.count("malloc(")):
        assert any(f"sc{k}_row" in line for line in body) or f"sc{k}_at_" in text


@pytest.mark.parametrize("chain", SCRATCHED, ids=[c[0] for c in SCRATCHED])
def test_each_costly_value_is_computed_once_per_point(chain):
    """On a row after a thread's first, the fill loops (each ring's newest row) and
    the interior loop together divide twice per costly value and point: a value read
    at several offsets inside another ring's fill is a ring too (nested rings), not
    recomputed per read."""
    name, ops, rank = chain
    x = rand(np.float64, (9, 8))
    text = rendered(ops, ((np.dtype(np.float64), 2, None),), [x])
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "if (b1 > a1) {" in line)
    steady, skip = [], 0
    for line in lines[start:]:
        if "prev = i0;" in line:
            break
        if not skip and ("in the loop below" in line or "guards stay" in line):
            skip = 1             # a fill loop that a later row skips: its newest row
            continue             # is computed by the interior loop; and the loops
            #                      over the few columns outside the interior's
        if skip:
            skip += line.count("{") - line.count("}")
            if line.strip() == "}" and skip == 1:
                skip = 0
            continue
        steady.append(line)
    divisions = [line for line in steady if "/" in line.split("/*")[0]]
    assert len(divisions) == 2 * COSTLY[name], "\n".join(steady)
    # a ring another ring's fill reads is filled before it
    for k in range(text.count("malloc(")):
        first_read = next((i for i, line in enumerate(lines) if f"sc{k}_at_" in line
                           and "= sc" not in line), None)
        if first_read is not None:
            fill = next(i for i, line in enumerate(lines) if f"*restrict row = sc{k} " in line)
            assert fill < first_read


@st.composite
def ring_chains(draw):
    """Random compositions of costly values and padded differences along either axis
    (constant or edge pads, either side), each reading any earlier value: rings
    inside rings' fills, several consumers, rows and columns mixed."""
    ops, names = [], ["x"]
    for k in range(draw(st.integers(2, 8))):
        src = draw(st.sampled_from(names[-3:]))       # (mostly chains: nesting)
        kind = draw(st.sampled_from(["costly", "costly", "diff", "diff", "diff", "add"]))
        t = f"v{k}"
        if kind == "costly":
            ops += _costly(src, t)
        elif kind == "diff":
            axis, lo = draw(st.integers(0, 1)), draw(st.integers(0, 1))
            diff = _padded_diff(src, axis, lo, 1 - lo, t)
            if draw(st.booleans()):
                widths = diff[-1].widths
                diff[-1] = ir.Pad(t, t + "_d", widths, "edge")
            ops += diff
        else:
            ops.append(ir.Op(t, "add", (src, draw(st.sampled_from(names)))))
        names.append(t)
    ops.append(ir.Op("r", "add", (names[-1], draw(st.sampled_from(names)))))
    return ops


@settings(max_examples=int(os.environ.get("RING_EXAMPLES", "30")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(ops=ring_chains(), dtype=st.sampled_from([np.float32, np.float64]),
       threads=st.sampled_from(["1", "2", "3"]), seed=st.integers(0, 2 ** 16))
def test_random_ring_chains_give_numpys_values(ops, dtype, threads, seed, monkeypatch):
    """Whatever rings the planner makes (nested or not, inlined or filled), every
    element is NumPy's, on every thread split and shape, views included."""
    from astjax.kernels import runtime
    monkeypatch.setenv("ASTJAX_NUM_THREADS", threads)
    monkeypatch.setattr(runtime, "MIN_PARALLEL_WORK", 1)
    f = numpy_of(ops, "r")
    kc = KernelCall(ir.Kernel("ring_chain", ["x"], list(ops), ["r"]), lambda x: f(x=x))
    for k, shape in enumerate([(2, 3), (3, 2), (6, 5), (23, 17)]):
        x0 = rand(dtype, shape, seed + k)
        with np.errstate(all="ignore"):
            want = f(x=x0)
            for label, x in views(x0)[:2]:
                same(kc(x), want)


def test_an_interior_loop_that_stores_its_ring_row_is_vectorized(tmp_path):
    """The interior loop that computes a ring's newest row and stores it (the wave's
    ``pressure_xx``) is still vectorized by gcc, and the fill loop before it leaves
    that row alone (it fills the older rows a thread's first row needs)."""
    ops = SCRATCHED[[c[0] for c in SCRATCHED].index("rows-3")][1]
    x = rand(np.float32, (30, 40))
    text = rendered(ops, ((np.dtype(np.float32), 2, None),), [x])
    body = interior_body(text)
    assert any(re.match(r"sc0_row_p1\[i1\] = ", line.strip()) for line in body)
    assert "a <= 0; a++)" in text and "a <= 1; a++)" not in text
    reported = _vectorized_lines(tmp_path, text)
    lines = text.splitlines()
    first = 1 + max(i for i, line in enumerate(lines) if "i1 = a1; i1 < b1" in line)
    last = first + len(body) + 1
    assert any(first <= n <= last for n in reported), (first, last, reported)


def test_a_cheap_value_is_recomputed_not_stored():
    ops = _padded_diff("x", 0, 0, 1, "px") + _padded_diff("px", 0, 1, 0, "r")
    x = rand(np.float32, (9, 8))
    text = rendered(ops, ((np.dtype(np.float32), 2, None),), [x])
    assert "malloc" not in text
