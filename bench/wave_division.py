"""What the wave step's divisions cost, and what an exact division by a reciprocal buys.

The compiled wave step (examples/wave.py ``simulate`` under ``astjax.jit``, 300x300
float32) divides six times per point: ``/ dx`` and ``/ dy`` twice each (run-time
scalars) and ``/ density_half_x``, ``/ density_half_y`` (loop-invariant arrays).  This
script takes the kernel C text the C backend renders for the step, rewrites its
divisions into variants, and times each on the wavefield of step ``--step`` (one
thread, CPU time of the calling thread, interleaved rounds, best round):

  division       the kernel as rendered (``a / b``: ``vdivps``)
  exact          each division by a scalar as an exact product with the reciprocal,
                 valid for every float32 ``a``: ``a`` scaled by 2^70 (so that the
                 residual and the quotient are normal even for subnormal ``a``),
                 ``q = a_s * r``, ``e = fma(q, B, -a_s)``, ``Q = fma(-e, r, q)`` with
                 ``B`` the divisor's significand and ``r = 1/B``, then ``Q`` scaled
                 back with ``q``'s sign (gcc -O1 and up rewrites
                 ``fma(-fma(q, B, -a_s), r, q)`` as ``fma(fma(-q, B, a_s), r, q)``,
                 which turns the quotient of ``-0.0`` into ``+0.0``); a subnormal
                 quotient that lands exactly on a rounding tie (double rounding) or
                 a non-finite one sends the row to the division (a max-reduction per
                 row loop).  Checked over all 2^32 ``a`` for b = 10, -3, 1e-20: every
                 unflagged result equals ``a / b`` bit for bit
  exact, fills   the same, only in the ring-row fill loops (one scalar and one array
                 division per point each)
  unguarded      ``Q = fma(fma(-q, b, a), r, q)`` with ``q = a * r``: three
                 operations, but NOT exact: for ``dx = 10`` it differs from ``a / 10``
                 for 838,861 float32 ``a`` below 2^-90 (all with subnormal quotients;
                 e.g. ``a = 0x1.ep-146``: 0x1p-149 against 0x1p-148), and the wave's
                 front decays through that range every step
  double         each float32 ``a / b`` as ``(float)((double)a / (double)b)``: exact
                 (a double quotient rounded to float32 is the float32 quotient, the
                 double rounding innocuous for division), and every float32 subnormal
                 is a normal double -- but the conversions meet the subnormals instead
                 of the divider (same time as rendered, on Intel model 207)
  no divisions   every ``/`` made ``*`` (wrong values: the bound any division trick
                 could reach)
  flushing       the kernel as rendered, run with subnormals flushed to zero (MXCSR's
                 FTZ and DAZ bits, as ``jax.jit`` runs on a CPU and as
                 ``jit(f, fastmath=True)`` kernels do: ``kernels/flush.py``); values
                 differ where NumPy's are subnormal.  On an x86 core each instruction
                 meeting a subnormal takes a microcode assist: this is what they cost
                 the exact kernel

Each variant's result is compared bit for bit with the rendered kernel's.  The
product paths are correct only for a divisor whose reciprocal passes a check (an
exhaustive one over the 2^23 significands, or Markstein's theorem when
``|RN(1/B) * B - 1| <= 2^-25``); ``dx = dy = 10`` pass both.

Run: python bench/wave_division.py [--step 500] [--rounds 9]
"""
from __future__ import annotations

import argparse
import ctypes
import importlib.util
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import astjax  # noqa: E402
from astjax.kernels import compile as cc, flush, layout  # noqa: E402


def _example():
    spec = importlib.util.spec_from_file_location(
        "astjax_example_wave", os.path.join(HERE, "..", "examples", "wave.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def capture(w, velocity, problem):
    """(kernel C text, its symbol, the inputs and P of its first call)."""
    texts, calls = [], []
    build, cached = cc.build, layout.cached

    def spy_build(text, symbol, origin=None):
        texts.append((text, symbol))
        return build(text, symbol, origin)

    def spy_cached(store, key, typed, args):
        lay = cached(store, key, typed, args)
        if not calls:
            calls.append((list(args), np.array(lay.params, dtype=np.int64)))
        return lay
    cc.build, layout.cached = spy_build, spy_cached
    try:
        astjax.jit(w.simulate, backend="c")(velocity, **problem)
    finally:
        cc.build, layout.cached = build, cached
    text, symbol = next((t, s) for t, s in texts if "loop fusion" in t)
    return text, symbol, calls[0]


VALUE = r"(?:v|in)\d+_\d+"          # a kernel value (index arithmetic is left alone)
SCALAR_DIV = re.compile(r"\((" + VALUE + r") / (\(float\)\()?(s\d+)\)?\)")
ANY_DIV = re.compile(r"\((" + VALUE + r") / ")
# a division of a kernel value by a value or a run-time scalar (its cast included)
DIVISION = re.compile(r"\((" + VALUE + r") / ((?:\(float\)\()?(?:" + VALUE + r"|s\d+)\)?)\)")
SCALAR_DECL = re.compile(r"    const (?:double|float) s\d+ = \*\(const \w+ \*\)ptrs\[\d+\];\n")

EXACT = r"""
/* exact a / b for a loop-invariant float32 b (see bench/wave_division.py) */
#define XDIV(a, k) ({ const float as_ = (a) * xP##k; const float q_ = as_ * xR##k; \
    const float e_ = fmaf(q_, xB##k, -as_); const float Q_ = fmaf(-e_, xR##k, q_); \
    const float o_ = copysignf(Q_ * xPi##k, q_); union { float f; uint32_t u; } d_; \
    d_.f = fmaf(o_, xM##k, -Q_); \
    const uint32_t m_ = (d_.u & 0x7fffffffu) + xO##k; xbad = xbad > m_ ? xbad : m_; o_; })
"""


def _divisor_setup(names):
    """C declarations of the product path's constants for scalar divisors ``names``."""
    out = []
    for s in names:
        k = s[1:]
        out.append(f"""    const float xb{k} = (float)s{k};
    int xe{k}; frexpf(xb{k}, &xe{k}); xe{k} -= 1;
    const float xB{k} = ldexpf(fabsf(xb{k}), -xe{k}), xR{k} = 1.0f / xB{k};
    const float xP{k} = copysignf(ldexpf(1.0f, 70), xb{k});
    const float xPi{k} = ldexpf(1.0f, -(70 + xe{k})), xM{k} = ldexpf(1.0f, 70 + xe{k});
    union {{ float f; uint32_t u; }} xT{k}; xT{k}.f = ldexpf(1.0f, 70 + xe{k} - 150);
    const uint32_t xO{k} = 0x40000000u - xT{k}.u;
""")
    return "".join(out)


def _loops(text):
    """(start, end) of each ``#pragma omp simd`` loop, its pragma included."""
    spans = []
    for m in re.finditer(r"[ ]*#pragma omp simd\n", text):
        i = text.index("{", m.end())
        depth = 0
        for j in range(i, len(text)):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                spans.append((m.start(), j + 1))
                break
    return spans


def exact_variant(text, symbol, fills_only=False):
    """``text`` with its scalar divisions as exact products in the vectorized loops,
    each such loop followed by a rerun with divisions when a row needs it."""
    names = sorted({m.group(3) for m in SCALAR_DIV.finditer(text)})
    out, last = [], 0
    for start, end in _loops(text):
        loop = text[start:end]
        if fills_only and "row[j] =" not in loop:
            continue
        fast = SCALAR_DIV.sub(lambda m: f"XDIV({m.group(1)}, {m.group(3)[1:]})", loop)
        if fast == loop:
            continue
        fast = fast.replace("#pragma omp simd", "#pragma omp simd reduction(max:xbad)", 1)
        out += [text[last:start], "{ uint32_t xbad = 0;\n", fast,
                "\nif (xbad >= 0x40000000u) {\n", loop, "\n} }"]
        last = end
    out.append(text[last:])
    body = "".join(out)
    head = f"int {symbol}(const int64_t *restrict P, int32_t nthreads, void **ptrs) {{"
    body = body.replace(head, EXACT + head, 1)
    at = list(SCALAR_DECL.finditer(body))[-1].end()
    return body[:at] + _divisor_setup(names) + body[at:]


def unguarded_variant(text, symbol):
    names = sorted({m.group(3) for m in SCALAR_DIV.finditer(text)})
    head = f"int {symbol}(const int64_t *restrict P, int32_t nthreads, void **ptrs) {{"
    helper = ("static inline float udiv(float a, float b, float r) {\n"
              "    const float q = a * r;\n    return fmaf(fmaf(-q, b, a), r, q);\n}\n")
    body = SCALAR_DIV.sub(lambda m: f"udiv({m.group(1)}, ub{m.group(3)[1:]}, "
                          f"ur{m.group(3)[1:]})", text.replace(head, helper + head, 1))
    at = list(SCALAR_DECL.finditer(body))[-1].end()
    setup = "".join(f"    const float ub{s[1:]} = (float){s}, ur{s[1:]} = 1.0f / ub{s[1:]};\n"
                    for s in names)
    return body[:at] + setup + body[at:]


HARNESS = r"""
#include <time.h>
int astjax_bench_run(void *fn_, const int64_t *P, void **ptrs, int reps, double *sec) {
    int (*fn)(const int64_t *, int32_t, void **) = fn_;
    struct timespec a, b;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    for (int i = 0; i < reps; i++) fn(P, 1, ptrs);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    *sec = ((b.tv_sec - a.tv_sec) + 1e-9 * (b.tv_nsec - a.tv_nsec)) / reps;
    return 0;
}
"""


def build(text, symbol, d, name):
    cc_path, _, omp = cc.compiler()
    src, lib = os.path.join(d, name + ".c"), os.path.join(d, name + ".so")
    with open(src, "w") as f:
        f.write(text + HARNESS)
    flags = [f.replace("-std=c99", "-std=gnu99") for f in cc.flags(omp)]
    subprocess.run([cc_path, *flags, src, "-o", lib, "-lm"], check=True)
    so = ctypes.CDLL(lib)
    return so, ctypes.cast(getattr(so, symbol), ctypes.c_void_p).value


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--step", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--reps", type=int, default=200)
    args = ap.parse_args(argv)
    w = _example()
    _, velocity, problem, _ = w.setup(300, 300, 1000, np.float32)
    text, symbol, (inputs, P) = capture(w, velocity, problem)
    # the wavefield of step ``--step`` (and the one before) from the NumPy loop
    fields = []
    for n in (args.step, args.step - 1):
        short = dict(problem, wavelet=problem["wavelet"][:n])
        fields.append(w.simulate_loop(velocity, **short)[1])
    zero = [j for j, a in enumerate(inputs) if isinstance(a, np.ndarray) and a.ndim == 2
            and not a.any()]
    present_j, past_j = zero[0], zero[1]     # both carries start as zeros
    arrays = [np.ascontiguousarray(a, dtype=np.asarray(a).dtype) if isinstance(a, np.ndarray)
              else np.asarray(a) for a in inputs]
    arrays[present_j], arrays[past_j] = fields[0], fields[1]
    variants = {"division": text, "exact": exact_variant(text, symbol),
                "exact, fills": exact_variant(text, symbol, fills_only=True),
                "unguarded": unguarded_variant(text, symbol),
                "double": DIVISION.sub(lambda m: f"((float)((double)({m.group(1)}) / "
                                                 f"(double)({m.group(2)})))", text),
                "no divisions": ANY_DIV.sub(lambda m: f"({m.group(1)} * ", text),
                "flushing": flush.with_flushing(text)}
    d = tempfile.mkdtemp(prefix="astjax-wave-division-")
    built = {k: build(t, symbol, d, f"v{i}") for i, (k, t) in enumerate(variants.items())}
    run = built["division"][0].astjax_bench_run
    run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                    ctypes.POINTER(ctypes.c_double)]
    out = np.empty((300, 300), np.float32)
    ptrs = (ctypes.c_void_p * (len(arrays) + 1))(
        *[a.ctypes.data for a in arrays], out.ctypes.data)
    Pp = P.ctypes.data
    results, best = {}, {k: float("inf") for k in built}
    for k, (_, fn) in built.items():
        run(fn, Pp, ptrs, 1, ctypes.byref(ctypes.c_double()))
        results[k] = out.copy()
    sec = ctypes.c_double()
    for r in range(args.rounds):
        names = list(built)
        names = names[r % len(names):] + names[:r % len(names)]
        for k in names:
            run(built[k][1], Pp, ptrs, args.reps, ctypes.byref(sec))
            best[k] = min(best[k], sec.value)
    ref = results["division"].view(np.uint32)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"wave step kernel, 300x300 float32, wavefield of step {args.step}, one thread "
          f"(CPU time per call, best of {args.rounds} rounds), load {load:.2f}:")
    for k in built:
        diff = int(np.count_nonzero(results[k].view(np.uint32) != ref))
        same = "bit-identical" if diff == 0 else f"{diff} values differ"
        print(f"  {k:14s} {best[k] * 1e6:7.1f} us   ({best[k] / best['division']:.2f}x; "
              f"{same})")
    return best


if __name__ == "__main__":
    main()
