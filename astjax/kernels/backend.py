"""The ``"c"`` jit backend: fused groups as compiled C kernels, the rest NumPy.

It runs the same passes as the NumPy backend; its ``load`` swaps every
``run_fused(group, ...)`` call of the host code for a call of a ``KernelCall`` made
from the group's kernel plan (``passes/fusion.py`` records it on the block function),
and keeps the block function as that kernel's fallback; a loop whose body is then only
kernel calls becomes a call of a compiled loop driver (``kernels/loops.py``), the loop
kept as its fallback.  The generated source shown by
``make_source(jit(f, backend="c"))(*args)`` is the host Python followed by each
kernel's C text (and each loop driver's), rendered for the argument dtypes jit
specialized on (the dtypes of values made between kernels are known only when the
code runs: those kernels are shown for float64 operands).
"""
from __future__ import annotations

import numpy as np

from astjax import core
from astjax.core import External, Var
from astjax.kernels import c as c_render, compile as cc, ir, loops
from astjax.kernels.runtime import CALL_POOL_MAX_BYTES, KernelCall, _cname, c_text


# Functions whose kernel is slower than NumPy's SIMD loop (measured one thread, 65,536
# elements, both dtypes, ``bench/vmath.py``): a group calling one stays with NumPy's
# blocked run (``run_fused``), which is faster than any fusion saves.  Which ones
# depends on the loops NumPy dispatches to here.
#
# With NumPy's AVX-512 loops (the development machine): exp, log and log1p left the
# set when their vectorized versions landed (``kernels/vmath.py``, float32 computed in
# float32): a group ``f(|x * b| + 0.5) * 2`` runs as a kernel in 35 us against
# NumPy's 45 (exp), 35 against 39 (log), 34 against 41 (log1p) at 128x512 float32,
# 242 against 407 (exp) at 1000x1000.  The others have vectorized versions too (within
# 1-2 ulp, 4-25x faster than the libm kernels), but lose to NumPy's loops at the
# MLP's sizes: tanh 40 against 34 us (it wins at 1000x1000, 268 against 304), expm1
# level, and those computing float32 through float64 (sin/cos/tan with an exact
# Payne-Hanek reduction) 3-10x NumPy's float32 loops.
NUMPY_FASTER_AVX512 = frozenset({
    "tanh", "expm1", "exp2", "log2", "log10", "sin", "cos", "tan", "arcsin",
    "arccos", "arctan", "sinh", "cosh", "arcsinh", "arccosh", "arctanh", "arctan2",
    "cbrt", "logaddexp", "logaddexp2"})
# Without them (AVX2 only: an AMD EPYC, NumPy 2.4): NumPy's tanh, expm1, log10 and the
# inverse trigonometric and hyperbolic functions are 1.5-7x slower than the kernels in
# both dtypes, in two runs (float32 tanh 1.6-1.7x: the MLP's layers, 268 against 170
# us); sin, cos, tan, exp2, log2, sinh, cosh and arccosh lose in at least one dtype
# (sin/cos float32: NumPy's AVX2 loops are 3-6x faster).
NUMPY_FASTER_AVX2 = NUMPY_FASTER_AVX512 - {
    "tanh", "expm1", "log10", "arcsin", "arccos", "arctan", "arcsinh", "arctanh"}


def _numpy_has_avx512() -> bool:
    """Does NumPy run AVX-512 loops on this machine?  (Unknown -> assume it does: the
    set measured against them keeps more functions with NumPy.)"""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as have
    except ImportError:
        try:
            from numpy.core._multiarray_umath import __cpu_features__ as have
        except ImportError:
            return True
    if not have.get("AVX2"):
        return True          # not x86-64 (NEON, VSX...): not measured, keep the old set
    return bool(have.get("AVX512_SKX") or have.get("X86_V4"))


NUMPY_FASTER = NUMPY_FASTER_AVX512 if _numpy_has_avx512() else NUMPY_FASTER_AVX2


# A loop body's group calling a function NumPy runs faster (``NUMPY_FASTER``) is still
# a kernel up to this many elements, NumPy's loops past it: through NumPy a step costs
# the host ~4 us more than in a compiled loop.  ``fori_loop`` of ``sin(v) * 0.5 + v *
# 0.25``, 5000 steps, a step against the NumPy backend: float64 0.55/3.70 us at 16
# elements, 2.02/4.15 at 64, 3.98/5.86 at 128, 8.07/6.23 at 256 (our branch-free sin
# reduces exactly: 31 ns an element against NumPy's 9.5); float32 breaks even near 600.
LOOP_NUMPY_ABOVE = 128


def numpy_faster(members) -> bool:
    """Does a kernel plan's member list call a function in ``NUMPY_FASTER``?"""
    return any(isinstance(m, tuple) and m[1] in NUMPY_FASTER for m in members)


class _Fusion:
    """The fusion pass, remembering the argument dtypes for displaying kernels."""

    RUNTIME_ONLY = True
    FINAL = True
    __name__ = "fusion"

    @staticmethod
    def run(fn, arg_dtypes=None, donated=frozenset()):
        from astjax.passes import fusion
        fn.kernel_arg_dtypes = dict(arg_dtypes or {})
        return fusion.run(fn, arg_dtypes, donated, kernels=True)


def passes():
    from astjax.passes import DEFAULT, fusion
    return tuple(_Fusion if p is fusion else p for p in DEFAULT)


def load(fn, doc, label, fastmath=False):
    """``fastmath``: the kernels are built with ``cc.FASTMATH_FLAGS`` (jit's option)."""
    from astjax import runtime_fusion
    from astjax.generation import Generated, load_functions
    run_ref = fn.env.value_ref(runtime_fusion.run_fused, "run_fused")
    in_loops = {s.args[0].name for s, looped in _walk_loops(fn.body)
                if looped and isinstance(s, External) and s.func == Var(run_ref) and
                s.args and isinstance(s.args[0], Var)}
    calls = {}
    for helper in fn.helpers:
        plan = getattr(helper, "kernel_plan", None)
        if plan is None:
            continue
        inputs, members, outputs = plan
        slower = numpy_faster(members)
        if slower and helper.name not in in_loops:
            continue
        cost = 1
        name = helper.name[:-6] if helper.name.endswith("_group") else helper.name
        kernel = ir.from_group(f"{name}_kernel", inputs, members, outputs, cost)
        kernel.fastmath = fastmath
        calls[helper.name] = KernelCall(kernel)
        if slower:      # a loop body's: small, the kernel (the loop can compile)
            calls[helper.name].numpy_above = LOOP_NUMPY_ABOVE
            calls[helper.name].numpy_faster = NUMPY_FASTER
    shown, kernel_refs = [], {}
    blas = calls_blas(fn.body)
    for s, looped in _walk_loops(fn.body):
        if isinstance(s, External) and s.func == Var(run_ref) and s.args and \
                isinstance(s.args[0], Var) and s.args[0].name in calls and \
                "reuse" not in s.kwargs:
            # (a group computing into a donated argument's memory stays with
            # run_fused, which honours the donation; kernels write fresh arrays)
            kc = calls[s.args[0].name]
            cost = s.args[2].value if isinstance(s.args[2], core.Const) else 1
            kc.kernel.cost = int(cost) if isinstance(cost, int) else 1
            if blas:
                kc.kernel.cost /= BLAS_THREADS_FACTOR
            ref = fn.env.value_ref(kc, kc.kernel.name)
            kernel_refs[ref] = kc
            s.func = Var(ref)
            s.args = list(s.args[3:])
            s.kwargs = {}
            shown.append(kc)
            if looped:       # a loop body: its results' buffers are reused (runtime.py)
                kc.use_pool()
            else:            # once a call: one buffer a result, for the next call
                kc.use_pool(1, CALL_POOL_MAX_BYTES)
    # loops whose body is only kernel calls: one C call runs their steps
    drivers = loops.rewrite(fn, kernel_refs, fn.env.value_ref)
    driven = _driven_kernels(drivers)
    for kc in calls.values():
        if kc.numpy_above is not None and id(kc) not in driven:
            kc.numpy_above = 0       # its loop stays Python: NumPy's loops, as before
    gen = load_functions([(fn, doc)], fn.env, label, ["main"])
    for block_name, kc in calls.items():
        kc.block = gen.namespace[block_name]
    texts = _display(fn, shown) + [(d.__name__, d.text) for d in drivers]
    if texts:   # each kernel's C as a Python string: the shown source stays Python
        shown_c = [f'{name}_c = r"""\n{text.rstrip()}\n"""' for name, text in texts]
        late = [(d.text, d) for d in drivers if getattr(d, "renders_on_run", False)]
        gen = Generated(gen.source + KERNELS_HEADER + "\n\n\n".join(shown_c) + "\n",
                        gen.functions, gen.namespace, gen.env, gen.core, late)
    return gen


# Matrix products and factorizations: NumPy runs them with BLAS's threads.
BLAS = frozenset({
    "dot", "dot_grad_a", "dot_grad_b", "matmul", "tensordot", "einsum", "einsum_multi",
    "inner", "vdot", "vecdot", "multi_dot", "rb_dot", "rb_matmul", "saved_dot",
    "saved_matmul", "solve", "inv", "pinv", "cholesky", "qr", "svd", "svdvals", "eig",
    "eigh", "eigvals", "eigvalsh", "det", "slogdet"})
# In code that calls BLAS a kernel takes threads only for 64x the work it otherwise
# needs (``kernels/runtime.py: MIN_PARALLEL_WORK``): BLAS's threads keep spinning on
# the cores between its calls, and a kernel's second thread then waits for a core
# (the MLP's jit(grad), 784-512-512-10 batch 128 float32, against hand-written
# backprop in the same run, load ~5: 1.136x with two-thread tanh kernels, 1.003x with
# one; the previous session, quiet: C kernels 3.36 ms, NumPy backend 3.28).  A
# 1000x1000 tanh still runs on every core.
BLAS_THREADS_FACTOR = 64


def _driven_kernels(drivers) -> set:
    """``id``s of the kernel calls the compiled loops make."""
    out = set()

    def walk(ops):
        for op in ops:
            if op[0] == "kernel":
                out.add(id(op[2]))
            elif op[0] == "if":
                walk(op[2])
                walk(op[3])
    for d in drivers:
        prog = getattr(d, "prog", None)
        walk(prog.ops if prog is not None else d.ops)
    return out


def calls_blas(stmts) -> bool:
    """Does the code call a matrix product or factorization?"""
    return any(isinstance(s, core.Prim) and s.prim in BLAS for s in core.walk(stmts))


def _walk_loops(stmts, looped=False):
    """(statement, inside a for or while loop?) of every statement."""
    for s in stmts:
        yield s, looped
        inner = looped or isinstance(s, (core.For, core.While))
        for b in core.child_blocks(s):
            yield from _walk_loops(b, inner)


# between the host Python and the kernels' C in the shown source
KERNELS_HEADER = "\n\n# ---- compiled kernels (C99, astjax/kernels) ----\n\n"


def without_kernels(source: str) -> str:
    """``source`` shown by make_source without the kernels' C text (``astjax show``
    prints it with ``--kernels``)."""
    head, sep, _ = source.partition(KERNELS_HEADER[:KERNELS_HEADER.index("(")])  # C, CUDA
    return head + ("\n# (compiled kernels not shown: astjax show --kernels shows their C)\n"
                   if sep else "")


def _display(fn, kcs):
    """Each kernel's C text for the argument types jit built the code for (values
    made on the host between kernels are shown as float64 of the arguments' largest
    rank: see the module doc)."""
    known = dict(getattr(fn, "arg_kinds", {}) or {})
    for name, dt in getattr(fn, "kernel_arg_dtypes", {}).items():
        known.setdefault(name, (np.dtype(dt), None, None))
    top = max([k[1] for k in known.values() if k[1] is not None], default=1)
    try:
        _, _, omp = cc.compiler()
    except cc.CompilerUnavailable:
        omp = ""
    out = []
    for kc in kcs:
        kinds, note = shown_kinds(kc.kernel, known, top)
        try:
            if kc.indexed:
                typed = ir.specialize_indexed(kc.kernel, tuple(kinds))
                text = c_render.render_indexed(typed, _cname(kc.kernel), bool(omp))
                ranks = [typed.values[v][1] for v, _ in typed.outputs]
            else:
                typed = ir.specialize(kc.kernel, tuple(
                    (dt, nd == 0, weak) for dt, nd, weak in kinds))
                text = c_text(typed, bool(omp))
                ranks = [max([k[1] for k in kinds], default=0)] * len(typed.outputs)
        except ir.Unsupported as e:
            out.append((_cname(kc.kernel),
                        f"/* {kc.kernel.name}: runs with NumPy for these types ({e}) */"))
            continue
        for name, (_, dt), nd in zip(kc.kernel.outputs, typed.outputs, ranks):
            known[name] = (dt, nd, None)
        out.append((_cname(kc.kernel), note + kc._flagged(text)))
    return out


def available():
    return cc.available()


def shown_kinds(kernel, known, top):
    """The (dtype, ndim, weak) kinds a kernel is shown specialized for, from what jit
    knows of its inputs (``known``); unknown ones are shown as float64 arrays of rank
    ``top`` (a broadcast scalar as a scalar), with a comment saying so (shared by the
    C and CUDA displays)."""
    kinds, guessed = [], False
    scalars = {op.source for op in kernel.ops if isinstance(op, ir.Broadcast)}
    for name in kernel.inputs:
        dt, nd, weak = known.get(name, (None, None, None))
        if dt is None or nd is None:
            dt, nd, weak, guessed = (dt or np.dtype(np.float64)), \
                0 if name in scalars else top, None, True
        kinds.append((np.dtype(dt), nd, weak))
    note = ("/* shown for float64 operands: the kernel is specialized to the "
            "operands' dtypes when it runs */\n" if guessed else "")
    return tuple(kinds), note
