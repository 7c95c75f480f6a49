"""``jit(f, fastmath=True)`` flushes subnormals to zero while its kernels run, and
only then (``kernels/flush.py``).

What is asserted: fastmath kernels give 0 where NumPy's float32 result is
subnormal (as ``jax.jit`` on a CPU does), for every kernel shape (elementwise,
indexed with slices and pads, reductions over all axes and one, a compiled time
loop) on one thread and on several; everything after them keeps NumPy's subnormals:
NumPy on the calling thread, exact kernels on the same OpenMP worker threads, the
same kernel text with fastmath off.  The rewrite of the text itself: every parallel
region and every ``return`` of an exported function gets the entry and exit, braces
in comments (the user's source lines) do not confuse it, and each rewritten kernel
compiles (the behaviour tests build them).
"""
from __future__ import annotations

import numpy as np
import pytest

import astjax
from astjax import lax
from astjax.kernels import compile as cc, flush

needs_cc = pytest.mark.skipif(not cc.available()[0], reason="no C compiler")

TINY = np.finfo(np.float32).tiny


def scaled(x, s):
    return x * s + x * (s * 0.5)


def shifted(x, s):
    return np.pad((x[1:, :] - x[:-1, :]) * s, ((0, 1), (0, 0)))


def row_sums(x, s):
    return np.sum(x * s, axis=1)


def total(x, s):
    return np.sum(x * s)


def decaying(x, s):
    def step(v, _):
        v = v * s + np.pad(v[1:] - v[:-1], (0, 1)) * 0.25
        return v, v[0]
    return lax.scan(step, x, np.zeros(40))


def _subnormal(a):
    a = np.asarray(a)
    return (a != 0) & (np.abs(a) < TINY)


def _field(n=512):
    """float32 values that ``* 2**-40`` takes into the subnormal range (and some that
    stay normal)."""
    rng = np.random.default_rng(0)
    mag = 2.0 ** rng.uniform(-110, -60, (n, n))
    return (mag * rng.choice([-1.0, 1.0], (n, n))).astype(np.float32)


def _check_flushed(got, want, terms):
    """``got`` (fastmath) holds no subnormal where ``want`` (NumPy) has them, and
    differs from ``want`` by at most the flushed parts: ``terms`` values each below
    the normal range, past a relative 1e-5."""
    got, want = np.asarray(got), np.asarray(want)
    assert _subnormal(want).any(), "the case makes no subnormal"
    assert not _subnormal(got).any()
    assert np.all(np.abs(got.astype(np.float64) - want) <=
                  1e-5 * np.abs(want) + terms * float(TINY))


def _numpy_keeps_subnormals():
    a = np.full(64, 3e-39, np.float32)
    assert np.all(_subnormal(a * np.float32(2.0)))
    assert np.all(_subnormal(a + a))


@needs_cc
@pytest.mark.parametrize("threads", ["1", "4"])
@pytest.mark.parametrize("f", [scaled, shifted, row_sums, total], ids=lambda f: f.__name__)
def test_fastmath_kernels_flush_and_leave_every_thread_as_it_was(f, threads,
                                                                 monkeypatch):
    monkeypatch.setenv("ASTJAX_NUM_THREADS", threads)
    x, s = _field(), np.float32(2.0 ** -40)
    if f is row_sums:
        x = x.reshape(-1, 4)             # (sums of 4 values: subnormal ones too)
    want = f(x, s)
    fast = astjax.jit(f, backend="c", fastmath=True)
    exact = astjax.jit(f, backend="c")
    assert flush.ENTER in astjax.make_source(fast)(x, s)      # (a kernel runs it)
    before = exact(x, s)
    if f in (row_sums, total):      # (the kernel adds float32 values in float64)
        terms = (x * s).astype(np.float64)
        want = np.float32(np.sum(terms, axis=1 if f is row_sums else None))
    _exact_as_numpy(f, before, want)
    for _ in range(2):
        got = fast(x, s)
        if f is total:
            assert not _subnormal(got)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=x.size * float(TINY))
        else:
            _check_flushed(got, want, terms=x.shape[1] if f is row_sums else 2)
        _numpy_keeps_subnormals()
        # the exact kernel, next on the same worker threads: as before, NumPy's values
        again = exact(x, s)
        np.testing.assert_array_equal(again, before)
        _exact_as_numpy(f, again, want)


def _exact_as_numpy(f, got, want):
    """The exact kernel's values: NumPy's bit for bit, or for a float32 sum the
    float64 sum of NumPy's float32 terms, rounded (within one ulp: the order),
    subnormal terms kept."""
    if f in (row_sums, total):
        np.testing.assert_allclose(got, want, rtol=1.2e-7, atol=1.5e-45)
    else:
        np.testing.assert_array_equal(got, want)


@needs_cc
def test_a_compiled_time_loop_flushes_and_the_exact_one_does_not(monkeypatch):
    monkeypatch.setenv("ASTJAX_NUM_THREADS", "2")
    x = (2.0 ** np.random.default_rng(1).uniform(-100, -60, 70_000)).astype(np.float32)
    s = np.float32(0.25)
    last, first = decaying(x, s)
    assert _subnormal(last).any()
    fast_last, fast_first = astjax.jit(decaying, backend="c", fastmath=True)(x, s)
    assert not _subnormal(fast_last).any() and not _subnormal(fast_first).any()
    assert np.count_nonzero(fast_last == 0) > np.count_nonzero(last == 0)
    _numpy_keeps_subnormals()
    exact_last, exact_first = astjax.jit(decaying, backend="c")(x, s)
    np.testing.assert_array_equal(exact_last, last)
    np.testing.assert_array_equal(exact_first, first)


KERNEL = """\
/* astjax kernel k: 2 statements */
#include <stdint.h>
static inline float k_element(float a) { return a * 2.0f; }
int k_helper_count(void);
int k(int64_t n, int32_t nthreads, float *restrict q, const float *restrict p) {
    /* user.py:3  d = {"a": x}  (a brace in a comment: not code) */
    if (n == 0) return 0;
    if (nthreads > 1) {
        #pragma omp parallel for simd schedule(static) num_threads(nthreads)
        for (int64_t i = 0; i < n; i++) q[i] = k_element(p[i]);
    } else {
        for (int64_t i = 0; i < n; i++) { q[i] = k_element(p[i]); }
    }
    #pragma omp parallel num_threads(nthreads) if(nthreads > 1)
    {
        #pragma omp for schedule(static)
        for (int64_t i = 0; i < n; i++) {
            if (q[i] > 1.0f) { q[i] = 1.0f; }   /* } */
        }
    }
    #pragma omp parallel for schedule(static) num_threads(nthreads) if(nthreads > 1)
    for (int32_t t = 0; t < 4; t++) {
        q[t] += 0.0f;
    }
    return 0;
}
"""


def test_the_rewrite_brackets_every_region_and_return():
    out = flush.with_flushing(KERNEL)
    body = out[len(flush.PRELUDE):]
    assert body.count(flush.ENTER) == 4          # the function and its 3 regions
    # each region: the caller's state while it starts (its new threads inherit it),
    # each thread's own exit; and the 2 returns
    assert body.count(flush.LEAVE) == 3 * 2 + 2
    assert body.count(flush.RESUME) == 3
    assert "#pragma omp parallel for" not in body
    assert body.count("#pragma omp parallel num_threads(nthreads)") == 3
    assert "#pragma omp for simd schedule(static)" in body
    assert "#pragma omp for schedule(static)" in body
    # each region: entry, loop, exit, in that order, in one block
    for part in body.split("#pragma omp parallel ")[1:]:
        enter, leave = part.index(flush.ENTER), part.index(flush.LEAVE)
        assert enter < part.index("for (") < leave < part.index(flush.RESUME)
    for part in body.split("#pragma omp parallel ")[:-1]:
        assert part.rstrip().endswith("{ " + flush.LEAVE)
    # the helper and the declaration are left alone; comments unchanged
    assert "static inline float k_element(float a) { return a * 2.0f; }" in body
    assert "int k_helper_count(void);" in body
    assert '/* user.py:3  d = {"a": x}  (a brace in a comment: not code) */' in body
    assert "{ ASTJAX_FLUSH_LEAVE return 0; }" in body
    assert body.count("{") - body.count("}") == KERNEL.count("{") - KERNEL.count("}")


@needs_cc
def test_the_rewritten_sample_compiles_and_runs_with_openmp():
    import ctypes
    text = flush.with_flushing(KERNEL)
    func = cc.build(text, "k")
    func.argtypes = [ctypes.c_int64, ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p]
    func.restype = ctypes.c_int
    p = np.array([0.25, 3e-39, 0.75, -2.0, 5.0, 0.1], np.float32)
    q = np.empty_like(p)
    assert func(p.size, 2, q.ctypes.data, p.ctypes.data) == 0
    # 3e-39 reads as 0 (DAZ) on x86; 2 * 3e-39 is normal, so FTZ alone keeps it
    np.testing.assert_array_equal(q[[0, 2, 3, 4, 5]],
                                  np.minimum(p[[0, 2, 3, 4, 5]] * 2, 1.0))
    _numpy_keeps_subnormals()


FRESH = """
import numpy as np, astjax, test_fastmath_flush as T
x, s = T._field(), np.float32(2.0 ** -40)
want = T.scaled(x, s)
fast = astjax.jit(T.scaled, backend="c", fastmath=True)
exact = astjax.jit(T.scaled, backend="c")
fast(x, s)                     # the process's first OpenMP team: made inside it
got = exact(x, s)
bad = np.nonzero(got != want)[0]
print("mismatched rows", bad.size, sorted(set((bad // 128).tolist())))
"""


@needs_cc
def test_threads_made_inside_a_fastmath_kernel_do_not_keep_flushing():
    """OpenMP makes its worker threads at the process's first parallel region, and a
    new thread inherits its creator's MXCSR: when that region belonged to a fastmath
    kernel, the workers were born flushing, and their exit restored that, so every
    exact kernel after it flushed its rows on them (37% of this case's values).  The
    calling thread now starts each region in its caller's state.  (A fresh
    process: here the team already exists.)"""
    import os
    import subprocess
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    path = os.pathsep.join(p for p in (here, root, os.environ.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, "-c", FRESH], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": path, "ASTJAX_NUM_THREADS": "4"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "mismatched rows 0 []" in proc.stdout, proc.stdout
