"""Compiled C kernels for jit (astjax/kernels, ``jit(f, backend="c")``).

The oracle is NumPy: every ufunc a kernel computes, for every dtype, gives exactly
what NumPy gives (bits, dtypes, signed zeros, NaNs), except transcendental functions,
whose float results may differ by at most 2 ulp (NumPy has its own SIMD versions);
operands broadcast, strided, reversed, empty; then whole programs through
``jit(..., backend="c")`` against NumPy and the NumPy backend, random chains, and the
compiler driver's failure modes (no compiler, a compile error, a corrupt cache).
"""
from __future__ import annotations

import os
import stat
import sys
import tempfile
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import astjax
from astjax import backends
from astjax.kernels import backend as kbackend, c as c_render, compile as cc, ir
from astjax.kernels.runtime import KernelCall
from conftest import load_source_module
from programs import fusable as F
import test_fusion as TF
from test_passes import identical, outcome

pytestmark = pytest.mark.skipif(not cc.available()[0],
                                reason=f"no C compiler: {cc.available()[1]}")

DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_, np.int8, np.uint16]
TRANSCENDENTAL = {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos",
                  "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh",
                  "arccosh", "arctanh", "cbrt", "arctan2", "hypot", "power"}


@pytest.fixture(autouse=True, scope="module")
def _own_cache():
    """A kernel cache of this module's own (compiled once per test run)."""
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="astjax_ck_cache_")
    yield
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old


def values(dtype, shape, seed=0):
    """Random values with the edge cases of the dtype mixed in."""
    r = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    n = int(np.prod(shape))
    if dt.kind == "f":
        v = r.standard_normal(n) * 3
        special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 1e30, -1e-30]
    elif dt.kind == "b":
        return r.integers(0, 2, n).astype(bool).reshape(shape)
    else:
        info = np.iinfo(dt)
        v = r.integers(max(info.min, -50), min(info.max, 50), n)
        signed = info.min < 0
        special = [0, 1, -1 if signed else 2, info.min, info.max, 7, -7 if signed else 9]
    k = min(n, len(special))
    idx = r.permutation(n)[:k]
    v = v.astype(dt)
    v[idx] = np.array(special[:k]).astype(dt) if dt.kind != "f" else np.array(special[:k], dt)
    return v.reshape(shape)


def ulps(a, b):
    """Largest distance in units of the last place (NaN equal to NaN, inf to inf)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind != "f":
        return 0 if np.array_equal(a, b) else np.inf
    both_nan = np.isnan(a) & np.isnan(b)
    if np.any(np.isnan(a) != np.isnan(b)):
        return np.inf
    u = np.uint32 if a.itemsize == 4 else np.uint64
    top = u(1) << u(8 * a.itemsize - 1)

    def key(x):      # the bit patterns as unsigned integers in the order of the values
        bits = np.ascontiguousarray(x).view(u)
        return np.where(bits & top, ~bits, bits | top)
    ka, kb = key(a), key(b)
    d = np.where(ka >= kb, ka - kb, kb - ka).astype(np.float64)
    d[both_nan] = 0
    return float(d.max()) if d.size else 0.0


def near(a, b, tol=16):
    """``identical`` except floats within ``tol`` ulp (for programs with
    transcendental functions, whose ulp differences later statements may amplify)."""
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(
            near(x, y, tol) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) and type(b) is np.ndarray and a.dtype.kind == "f":
        return a.dtype == b.dtype and a.shape == b.shape and ulps(a, b) <= tol
    return identical(a, b)


def _transcendental(f):
    import inspect
    import re
    return re.search(r"np\.(tanh|exp|sin|cos|log|arc|sinh|cosh)", inspect.getsource(f))


def numpy_of(ufunc, *args):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return getattr(np, ufunc)(*args)
        except Exception as e:      # noqa: BLE001
            return ("raised", type(e))


def _nin(uf):
    return 3 if uf in c_render.FUNCTIONS else getattr(np, uf).nin


def _group(name, ops, nin):
    """A kernel (and its NumPy block) computing every op of ``ops`` on the inputs."""
    inputs = [f"a{k}" for k in range(nin)]
    members = [(f"r{j}", uf, tuple(inputs[:_nin(uf)]), "", None)
               for j, uf in enumerate(ops)]
    kernel = ir.from_group(name, inputs, members, [f"r{j}" for j in range(len(ops))])

    def block(*args):
        got = tuple(getattr(np, uf)(*args[:_nin(uf)]) for uf in ops)
        return got if len(got) > 1 else got[0]
    return KernelCall(kernel, block)


def _supported(uf, kinds):
    k = ir.from_group("probe", ["a0", "a1", "a2"][:len(kinds)],
                      [("r", uf, ("a0", "a1", "a2")[:_nin(uf)], "", None)], ["r"])
    try:
        c_render.render(ir.specialize(k, kinds), "probe", False)
    except ir.Unsupported:
        return False
    return True


UNARY = sorted(u for u in c_render.UFUNCS if getattr(np, u).nin == 1)
BINARY = sorted(u for u in c_render.UFUNCS if getattr(np, u).nin == 2)


def _check_table(ops, args):
    kinds = tuple(ir.input_kind(a) for a in args)
    ops = [u for u in ops if _supported(u, kinds)]
    assert ops
    kc = _group(f"table_{len(args)}_{np.result_type(*args).char}", ops, len(args))
    assert kc.spec(kinds) is not None, "the combined kernel must compile"
    with np.errstate(all="ignore"):
        got = kc(*args)
    got = got if len(ops) > 1 else (got,)
    for uf, g in zip(ops, got):
        want = numpy_of(uf, *args)
        assert type(g) is type(want) and g.dtype == want.dtype and g.shape == want.shape, uf
        tol = 2 if uf in TRANSCENDENTAL and g.dtype.kind == "f" else 0
        d = ulps(g, want)
        assert d <= tol, (uf, np.dtype(g.dtype), d)
        if tol == 0 and g.dtype.kind == "f":
            assert np.array_equal(np.signbit(g), np.signbit(want)), uf
    return ops


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_unary_ufunc_matches_numpy(dtype):
    x = values(dtype, (7, 9))
    ops = _check_table(UNARY, (x,))
    if np.dtype(dtype).kind == "f":
        assert {"exp", "tanh", "sqrt", "negative", "absolute", "isnan"} <= set(ops)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_binary_ufunc_matches_numpy(dtype):
    x, y = values(dtype, (6, 11), 1), values(dtype, (6, 11), 2)
    if np.dtype(dtype).kind in "iu":     # small exponents, divisors including 0 and -1
        y = (y % 5).astype(dtype)
        if np.dtype(dtype).kind == "i":
            y[0, :3] = -1
    ops = _check_table(BINARY, (x, y))
    assert {"add", "greater", "maximum"} <= set(ops)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_where_and_clip_match_numpy(dtype):
    x, y, z = (values(dtype, (5, 7), k) for k in (7, 8, 9))
    lo, hi = np.minimum(y, z), np.maximum(y, z)
    ops = _check_table(["where", "clip"], (x, lo, hi))
    if np.dtype(dtype).kind != "b":
        assert ops == ["where", "clip"]
    cond = values(np.bool_, (5, 7), 3)
    _check_table(["where"], (cond, x, 2))
    _check_table(["where"], (cond, 1.5, x))
    if np.dtype(dtype).kind in "fiu":
        _check_table(["clip"], (x, -1, 3))
        _check_table(["clip"], (x, np.float32(-0.5), 2.5))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64],
                         ids=lambda d: np.dtype(d).name)
def test_broadcast_strided_reversed_views(dtype):
    base = values(dtype, (8, 10), 3)
    ops = ["add", "multiply", "maximum", "greater", "subtract"]
    for x, y in [(base[::-1, ::2], base[:, :5]),           # negative and step strides
                 (base.T, values(dtype, (10, 1), 4)),       # transposed, broadcast column
                 (base[:, 3], values(dtype, (10, 8), 5)[:, :1]),   # (8,) with (10, 1)
                 (np.asfortranarray(base), base[2])]:
        _check_table(ops, (x, y))


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_python_numbers_are_weak_and_numpy_scalars_strong(dtype):
    x = values(dtype, (5, 4), 6)
    _check_table(["add", "multiply", "divide", "power", "maximum", "less"], (x, 2.5))
    _check_table(["add", "multiply", "subtract", "less"], (x, 3))
    _check_table(["add", "multiply", "divide", "less"], (x, np.float64(1.5)))
    _check_table(["add", "multiply"], (True, x))


def test_empty_and_zero_d_arrays_and_numpy_errors():
    kc = _group("edge", ["add", "multiply"], 2)
    e = np.zeros((0, 3), np.float32)
    got = kc(e, np.float32(2))
    assert got[0].shape == (0, 3) and got[0].dtype == np.float32
    a0 = np.array(2.0)
    got = kc(a0, a0)               # 0-d: NumPy gives scalars; the kernel defers to it
    assert identical(got, (np.add(a0, a0), np.multiply(a0, a0)))
    with pytest.raises(ValueError):   # shapes that do not broadcast: NumPy's error
        kc(np.zeros((3, 4)), np.zeros(5))
    ints = np.arange(6, dtype=np.int8)
    with pytest.raises(OverflowError):     # a Python int that does not fit int8
        kc(ints, 1000)
    assert identical(kc(ints, 100), (ints + 100, ints * 100))


def test_power_with_a_scalar_half_is_a_square_root_as_in_numpy():
    x = np.array([-0.0, -np.inf, 4.0, 2.0, np.nan], np.float64)
    _check_table(["power"], (x, 0.5))
    _check_table(["power"], (x, np.full(5, 0.5)))
    _check_table(["power"], (x.astype(np.float32), 0.5))


# ============================================================== through jit

@pytest.mark.parametrize("index", range(len(TF.CASES)),
                         ids=[f"{f.__name__}-{i}" for i, (f, _) in enumerate(TF.CASES)])
def test_fusable_programs_through_the_c_backend(index):
    f, args = TF.CASES[index]
    a = args()
    expected = outcome(astjax.jit(f, backend="numpy"), a)   # NumPy itself, exactly
    actual = outcome(astjax.jit(f, backend="c"), a)
    same = near if _transcendental(f) else identical
    assert same(actual[0], expected[0]), (actual[0], expected[0])
    assert identical(actual[1], expected[1])
    plain = outcome(f, a)
    assert same(actual[0], plain[0])


def test_groups_really_run_as_kernels_on_threads(monkeypatch):
    x = TF._r(300, 500, dtype=np.float32)
    jf = astjax.jit(F.poly, backend="c")
    gen = jf._astjax_source(x)
    kcs = [v for v in gen.namespace.values() if isinstance(v, KernelCall)]
    assert len(kcs) == 1
    ran = []
    real = KernelCall._run
    monkeypatch.setattr(KernelCall, "_run", lambda self, *a: ran.append(a[-3]) or real(
        self, *a))
    planned = KernelCall._run_plan      # a call like an earlier one reuses its plan
    monkeypatch.setattr(KernelCall, "_run_plan", lambda self, plan, args: ran.append(
        plan[3][0][0]) or planned(self, plan, args))
    monkeypatch.setattr(kcs[0], "block", None)      # no NumPy fallback
    monkeypatch.setenv("ASTJAX_NUM_THREADS", "2")
    assert identical(jf(x), F.poly(x))
    for n in (1, 3):
        monkeypatch.setenv("ASTJAX_NUM_THREADS", str(n))
        assert identical(jf(x[::-1]), F.poly(x[::-1]))
    assert ran == [(300, 500)] * 3          # compiled code ran, no NumPy fallback


def test_gradients_and_loops_through_the_c_backend():
    def loss(w, x, y):
        h = np.tanh(x * w[0] + w[1])
        r = h * w[2] - y
        return np.mean(r * r)

    w = np.array([0.3, -0.2, 1.5])
    x, y = TF._r(50, 4), TF._r(50, 4, seed=1)
    g = astjax.jit(astjax.grad(loss), backend="c")(w, x, y)
    np.testing.assert_allclose(g, astjax.jit(astjax.grad(loss), backend="numpy")(w, x, y),
                               rtol=1e-13)
    x = TF._r(9, 2)
    assert near(astjax.jit(F.chain_in_loop, backend="c")(x, 4), F.chain_in_loop(x, 4))


def test_where_and_clip_join_the_kernel():
    def f(x, y):
        a = np.where(x > y, x * 2.0, y - 1.0)
        return np.clip(a, -0.5, 0.75) * 3.0

    x, y = TF._r(20, 6, dtype=np.float32), TF._r(6, seed=1, dtype=np.float32)
    text = astjax.make_source(astjax.jit(f, backend="c"))(x, y)
    assert "ra.where" not in text.split("def ", 2)[1]        # not in the host code
    assert "clip_f32(" in text and " ? " in text
    assert identical(astjax.jit(f, backend="c")(x, y), f(x, y))
    assert identical(astjax.jit(f, backend="c")(x[::-1], y), f(x[::-1], y))


def test_make_source_shows_the_host_code_and_each_kernel(monkeypatch):
    monkeypatch.setattr(kbackend, "NUMPY_FASTER", frozenset())   # tanh as a kernel
    text = astjax.make_source(astjax.jit(F.two_results, backend="c"))(
        TF._r(4, 3, dtype=np.float32), TF._r(3, dtype=np.float32))
    assert "two_results_kernel(" in text or "_kernel(" in text
    assert "static inline void" in text and "const float" in text
    assert "/* fusable.py:" in text           # the C says which user line it computes
    assert "tanhf(" in text                   # float32 stays float32


def test_backends_are_listed_and_compiled_c_is_the_default():
    listed = astjax.backends()
    assert listed == backends.backends()
    assert listed["numpy"] == (True, "") and listed["c"][0]
    assert backends.get(None).name == "c" and backends.get("cpu").name == "c"
    assert backends.get("c").name == "c" and backends.get("numpy").name == "numpy"
    x = TF._r(30, 4, dtype=np.float32)
    assert "static inline void" in astjax.make_source(astjax.jit(F.poly))(x)


def test_astjax_backend_chooses_the_default(monkeypatch):
    monkeypatch.setenv("ASTJAX_BACKEND", "c")
    assert backends.get(None).name == "c"
    x = TF._r(30, 4, dtype=np.float32)
    text = astjax.make_source(astjax.jit(F.poly))(x)
    assert "static inline void" in text
    assert identical(astjax.jit(F.poly)(x), F.poly(x))
    monkeypatch.setenv("ASTJAX_BACKEND", "nonesuch")
    with pytest.raises(astjax.errors.ArgumentError, match="nonesuch"):
        astjax.jit(F.poly)


def _dtypes(tree):
    if isinstance(tree, (tuple, list)):
        return [_dtypes(v) for v in tree]
    return getattr(tree, "dtype", type(tree))


def _as(tree, dtype):
    """Floating arrays of ``tree`` rounded to ``dtype`` (the precision to compare in)."""
    if isinstance(tree, (tuple, list)):
        return type(tree)(_as(v, dtype) for v in tree)
    if isinstance(tree, np.ndarray) and tree.dtype.kind == "f":
        return tree.astype(dtype)
    return tree


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(chain=TF.chains(), seed=st.integers(0, 2 ** 16),
       shapes=st.sampled_from([((5, 3), (5, 3)), ((5, 3), (3,)), ((4, 1), (1, 6)),
                               ((7,), ()), ((2, 3, 2), (3, 1))]),
       dtype=st.sampled_from([np.float64, np.float32]), view=st.booleans())
def test_random_chains_match_numpy(chain, seed, shapes, dtype, view):
    module = load_source_module(chain, TF._DIR)
    r = np.random.default_rng(seed)
    x = r.standard_normal(shapes[0]).astype(dtype)
    if view and x.ndim:
        x = np.ascontiguousarray(x[::-1])[::-1]       # a reversed view
    y = r.standard_normal(shapes[1]).astype(dtype)
    args = (x, y, float(r.standard_normal()))
    expected = outcome(module.chain, args)
    actual = outcome(astjax.jit(module.chain, backend="c"), args)
    if any(f"np.{t}" in chain for t in ("tanh", "sin", "exp", "log1p", "hypot")):
        # ulps of the inputs' precision: a float32 transcendental 1 ulp off, then added
        # to a NumPy float64 scalar (strong: the sum is float64), is off by 2^29 ulps
        # of float64
        assert _dtypes(actual[0]) == _dtypes(expected[0]), chain
        assert near(_as(actual[0], dtype), _as(expected[0], dtype), tol=64), chain
    else:
        assert identical(actual[0], expected[0]), chain


# ============================================================== the compiler driver

def test_no_compiler_makes_the_backend_unavailable_with_the_reason(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.delenv("ASTJAX_BACKEND", raising=False)     # (a run may force "c")
    from astjax.kernels import cuda_runtime
    monkeypatch.setattr(cuda_runtime, "gpu_visible", lambda: False)   # (the CPU default)
    cc.reset()
    try:
        ok, why = cc.available()
        assert not ok and "/nonexistent/cc" in why
        with pytest.raises(astjax.errors.ArgumentError, match="cannot run here"):
            astjax.jit(F.poly, backend="c")
        assert backends.backends()["c"][0] is False
        x = TF._r(5, 3)
        assert identical(astjax.jit(F.poly, backend="numpy")(x), F.poly(x))
        # the default (and "cpu") falls back to NumPy, saying why once on stderr
        backends._noticed.clear()
        err = []
        monkeypatch.setattr(sys, "stderr", type("E", (), {"write": err.append})())
        for name in (None, "cpu", None):
            jf = astjax.jit(F.poly, backend=name)
            assert "run_fused(" in astjax.make_source(jf)(x)
            assert identical(jf(x), F.poly(x))
        assert len(err) == 1 and "/nonexistent/cc" in err[0] and "numpy" in err[0]
        assert err[0].count("\n") == 1
    finally:
        monkeypatch.delenv("CC")
        cc.reset()


def test_a_corrupt_cache_entry_is_rebuilt_never_loaded():
    text = ("#include <stdint.h>\nint astjax_test_fn(int64_t n, int32_t a, void *b, void *c,"
            " int32_t d, int32_t e, void **p) { return 42; }\n")
    cc.reset()
    f = cc.build(text, "astjax_test_fn")
    assert f(0, 0, None, None, 0, 0, None) == 42
    path = os.path.join(cc.cache_dir(), cc.key(text) + ".so")
    with open(path, "r+b") as fh:          # corrupt it: flip bytes in the middle
        fh.seek(200)
        fh.write(b"\xff" * 64)
    cc.reset()
    f = cc.build(text, "astjax_test_fn")
    assert f(0, 0, None, None, 0, 0, None) == 42
    with open(path, "rb") as fh:
        assert b"\xff" * 64 not in fh.read()       # rebuilt, not the corrupt bytes
    with open(path, "wb") as fh:                   # truncated
        fh.write(b"")
    cc.reset()
    assert cc.build(text, "astjax_test_fn")(0, 0, None, None, 0, 0, None) == 42


def test_a_cache_directory_others_can_write_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    d = tmp_path / "astjax" / "kernels"
    d.mkdir(parents=True)
    os.chmod(d, 0o777)
    with pytest.raises(cc.CompilerUnavailable, match="writable by others"):
        cc.cache_dir()
    os.chmod(d, 0o700)
    assert cc.cache_dir() == str(d)
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700


def test_a_compile_error_shows_the_kernel_line_and_the_users_line():
    text = "int broken(void) {\n    /* user.py:7  y = x + 1 */\n    return nope;\n}\n"
    cc.reset()
    with pytest.raises(cc.KernelCompileError) as err:
        cc.build(text, "broken", origin=lambda n: "user.py:7  y = x + 1")
    msg = str(err.value)
    assert "kernel line 3: return nope;" in msg and "user.py:7  y = x + 1" in msg


def test_a_kernel_that_fails_to_compile_names_the_users_line(monkeypatch):
    from astjax.kernels import runtime
    real = runtime.c_text

    def broken(typed, openmp=True, threads=True):      # a renderer bug: an undeclared name
        return real(typed, openmp, threads).replace("const double v0 = ",
                                                    "const double v0 = nope + ")
    monkeypatch.setattr(runtime, "c_text", broken)
    monkeypatch.setattr(kbackend, "NUMPY_FASTER", frozenset())   # tanh as a kernel

    def g(x):
        y = np.tanh(x) * 2.0
        return y + 1.0

    with pytest.raises(cc.KernelCompileError) as err:
        astjax.jit(g, backend="c")(TF._r(4, 3))
    msg = str(err.value)
    assert "nope" in msg and "kernel line" in msg
    assert "test_ckernels.py:" in msg and "y = np.tanh(x) * 2.0" in msg


def test_without_openmp_the_kernels_are_the_same(monkeypatch):
    real = cc.compiler()
    monkeypatch.setattr(cc, "compiler", lambda: (real[0], real[1], ""))
    kc = _group("no_openmp", ["add", "multiply", "maximum", "floor_divide"], 2)
    x, y = values(np.float32, (9, 40), 1), values(np.float32, (40,), 2)
    kinds = (ir.input_kind(x), ir.input_kind(y))
    assert "#pragma omp" not in kc.spec(kinds).text
    with np.errstate(all="ignore"):
        for a in (x, x[::-1, ::3]):
            b = y if a.shape[1] == 40 else y[::3]
            assert identical(kc(a, b), tuple(getattr(np, u)(a, b) for u in
                                             ["add", "multiply", "maximum", "floor_divide"]))


def _stencil(p):
    """An indexed kernel's cases: pads and slices (interior split), a reduction kept
    along an axis and a full one."""
    lap = np.pad(p[1:, :] - p[:-1, :], ((0, 1), (0, 0))) / 3.0
    return lap * p + 1.0, np.sum(lap * lap, axis=1), np.sum(p * 2.0)


def test_one_thread_calls_run_a_build_without_parallel_loops(monkeypatch):
    """A call below the parallel threshold runs a build without OpenMP's parallel
    loops (starting a team cost ~0.8 us per call even for one thread), with the
    values of the threaded build run on one thread."""
    from astjax.kernels import runtime as kruntime
    omp = bool(cc.compiler()[2])
    x, y = values(np.float32, (9, 40), 1), values(np.float32, (40,), 2)
    p = values(np.float64, (7, 12), 3)
    ops = ["add", "multiply", "maximum", "floor_divide"]
    kc = _group("one_thread", ops, 2)
    called = []
    real_call = KernelCall.__call__
    monkeypatch.setattr(KernelCall, "__call__",
                        lambda self, *a: called.append(self) or real_call(self, *a))
    jf = astjax.jit(_stencil, backend="c")

    def run():
        with np.errstate(all="ignore"):
            got = [kc(x, y), kc(x[::-1, ::3], y[::3])]
        return got + list(jf(p))

    alone = run()
    kcs = [k for k in dict.fromkeys(called) if k is not kc]
    kinds = (ir.input_kind(x), ir.input_kind(y))
    assert list(kc.specs) == [(kinds, "one thread")]
    texts = [kc.specs[(kinds, "one thread")].text]
    assert len(kcs) == 3 and all(k.indexed for k in kcs)   # (the row sum: its own)
    for k in kcs:
        assert k.specs and all(key[-1] is False for key in k.specs)
        texts += [got[1] for got in k.specs.values()]
    for text in texts:
        assert "omp parallel" not in text
        if "reduction over" not in text:      # (a full sum's loop has no simd)
            assert ("#pragma omp simd" in text) == omp
    with np.errstate(all="ignore"):
        assert identical(alone[0], tuple(getattr(np, u)(x, y) for u in ops))
    assert identical(alone[2], _stencil(p)[0])
    # the threaded builds, on one thread: the same values
    monkeypatch.setattr(kruntime, "MIN_PARALLEL_WORK", 0)
    monkeypatch.setattr(kruntime, "num_threads", lambda: 1)
    for k in [kc] + kcs:
        k.plans.clear()
    threaded = run()
    assert kinds in kc.specs
    assert all(any(key[-1] is True for key in k.specs) for k in kcs)
    if omp:
        assert "omp parallel" in kc.specs[kinds].text
        assert all("omp parallel" in got[1] for k in kcs for key, got in k.specs.items()
                   if key[-1] is True)
    assert len(threaded) == len(alone) == 5
    for a, b in zip(threaded, alone):
        assert identical(a, b)


def test_numpy_error_state_that_raises_is_honoured():
    x = np.array([[0.0, 1.0], [2.0, 0.0], [1.0, 1.0]])
    y = TF._r(3, 2)
    jf = astjax.jit(F.divide_by, backend="c")
    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError):
            jf(x, y)
    with np.errstate(divide="ignore"):
        assert identical(jf(x, y), F.divide_by(x, y))


def test_groups_calling_libm_functions_stay_with_numpys_simd_loops(monkeypatch):
    """``np.tanh``/``np.exp`` run NumPy's SIMD loops (``backend.NUMPY_FASTER``): their
    group stays a ``run_fused`` call, with NumPy's values; ``x * x`` does not."""
    # (tanh is in the set where NumPy has AVX-512 loops, not on an AVX2-only machine)
    monkeypatch.setattr(kbackend, "NUMPY_FASTER", kbackend.NUMPY_FASTER_AVX512)
    x, b = TF._r(40, 30, dtype=np.float32), TF._r(30, dtype=np.float32)
    jf = astjax.jit(F.two_results, backend="c")
    got = jf(x, b)
    text = astjax.make_source(jf)(x, b).split(kbackend.KERNELS_HEADER)[0]
    assert "run_fused(" in text and "_kernel(" not in text
    for g, w in zip(got, F.two_results(x, b)):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    text = astjax.make_source(astjax.jit(F.poly, backend="c"))(x)
    assert "_kernel(" in text and "run_fused(" not in text.split("def ")[1]
