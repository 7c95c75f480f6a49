"""C99 for a typed kernel: one function, a contiguous loop and a strided loop.

The element computation is a ``static inline`` function (one C statement per NumPy
statement of the group, each commented with the user's line); the exported function
runs it over the output index:

* contiguous: every array operand has the output's shape and is C-contiguous, so one
  flat loop over ``n`` elements (``#pragma omp parallel for simd`` when the caller
  asks for threads);
* strided: any shapes that broadcast, any strides (in elements, 0 on broadcast axes,
  negative for reversed views): rows of the last axis, each row's start computed from
  the row number.

Indexed kernels (``render_indexed``) read through slices, pads and transposes at an
index that is affine in one loop index.  Each loop's range is split per call into an
interior, where no pad guard or clamp can fire (the guards' affine forms solved by
``astjax_narrow``), and the boundary strips around it: the interior body is
branch-free with unit-stride loads, so the compiler vectorizes it; the strips keep
the guarded body.  In a rank-2 interior, a costly value read at several shifted
rows or columns (the wave's ``pressure_xx[1:] - pressure_xx[:-1]``) is computed once
per row into per-thread ring rows instead of once per read, and so is a costly value
read at shifted indices inside such a value's own computation (nested rings, the
wave's adjoint).  The rings' rows are filled on all their columns, so the
boundary columns of an interior row read them too (only the column guards stay)
instead of recomputing every costly value per read.  All of this changes which
statements run where, never a value: every element is computed by the same
operations in the same order.

The scalar expressions (casts, literals, one ufunc each, the divmod and clip helpers)
come from ``cexpr.py``, shared with the CUDA renderer; this module is the loop
structure around them.  The compiler is run without ``-ffast-math`` and with
``-ffp-contract=off`` (``compile.py``), so ``+ - * /`` round exactly as NumPy's do.
"""
from __future__ import annotations

import re


from astjax.kernels.cexpr import (FUNCTIONS, UFUNCS, cast, comment as _comment,  # noqa: F401
                                  ctype, helpers_text, literal as _literal, op_expr,
                                  prelude)
import numpy as np
from astjax.kernels import ir
from astjax.kernels.ir import Typed


def render(typed: Typed, cname: str, openmp: bool, threads: bool = True) -> str:
    """The C text of ``typed`` as function ``cname`` (see the module docstring for its
    calling convention).  ``threads`` False: a build for calls on one thread, without
    the parallel loops (``#pragma omp simd`` stays), whose OpenMP team start costs
    ~0.8 us per call even when ``nthreads`` is 1; every element is computed by the
    same statements, so the values are the threaded build's."""
    k = typed.kernel
    helpers: set = set()
    nin, nout = len(typed.inputs), len(typed.outputs)
    scalar = {f"in{j}": inp.scalar for j, inp in enumerate(typed.inputs)}
    params = [f"{ctype(inp.dtype)} in{j}" for j, inp in enumerate(typed.inputs)]
    params += [f"{ctype(dt)} *restrict out{j}" for j, (_, dt) in enumerate(typed.outputs)]
    body = []
    lines = {}                         # value -> its statement (the scalar function's)
    last_comment = None
    for op in typed.ops:
        c = _comment(op.loc)
        if c and c != last_comment:
            body.append(f"    {c}")
            last_comment = c
        exprs, scal = [], []
        for (name, dt), lt in zip(op.args, op.loop[:-1]):
            if name == "const":
                exprs.append(_literal(dt, lt))
                scal.append(True)
            else:
                exprs.append(cast(name, dt, lt))
                scal.append(scalar[name])
        expr = op_expr(op, exprs, scal, helpers, typed.kernel.fastmath)
        scalar[op.target] = all(scal)
        lines[op.target] = f"    const {ctype(op.loop[-1])} {op.target} = {expr};"
        body.append(lines[op.target])
    # a result of scalar operands only (``np.cos(j * dt)`` of a step): written once,
    # before the loops, by its own function (``KernelCall`` gives it as a NumPy scalar)
    once = [j for j, (name, _) in enumerate(typed.outputs) if scalar[name]]
    for j, (name, _) in enumerate(typed.outputs):
        if j not in once:
            body.append(f"    *out{j} = {name};")
    elem = (f"static inline void ASTJAX_ALWAYS_INLINE {cname}_element("
            f"{', '.join(params)}) {{\n" +
            "\n".join(body) + "\n}\n")
    if once:
        scalar_params = [f"{ctype(inp.dtype)} in{j}" for j, inp in enumerate(typed.inputs)
                         if inp.scalar]
        scalar_params += [f"{ctype(typed.outputs[j][1])} *restrict out{j}" for j in once]
        elem += (f"static void {cname}_scalars({', '.join(scalar_params)}) {{\n" +
                 "\n".join(line for v, line in lines.items() if scalar[v]) + "\n" +
                 "\n".join(f"    *out{j} = {typed.outputs[j][0]};" for j in once) +
                 "\n}\n")

    # the exported loops
    decl_in = []
    for j, inp in enumerate(typed.inputs):
        T = ctype(inp.dtype)
        if inp.scalar:
            decl_in.append(f"    const {T} s{j} = *(const {T} *)ptrs[{j}];")
        else:
            decl_in.append(f"    const {T} *restrict p{j} = (const {T} *)ptrs[{j}];")
    for j, (_, dt) in enumerate(typed.outputs):
        T = ctype(dt)
        decl_in.append(f"    {T} *restrict q{j} = ({T} *)ptrs[{nin + j}];")

    def call(index_of):
        args = [f"s{j}" if inp.scalar else f"p{j}[{index_of(j)}]"
                for j, inp in enumerate(typed.inputs)]
        args += [f"q{j}" if j in once else f"&q{j}[{index_of(None)}]" for j in range(nout)]
        return f"{cname}_element({', '.join(args)});"

    if once:
        decl_in.append(f"    {cname}_scalars(" + ", ".join(
            [f"s{j}" for j, inp in enumerate(typed.inputs) if inp.scalar] +
            [f"q{j}" for j in once]) + ");")

    par = "#pragma omp parallel for simd schedule(static) num_threads(nthreads)"
    par_rows = "#pragma omp parallel for schedule(static) num_threads(nthreads)"
    simd = "#pragma omp simd"
    if not openmp:
        par = par_rows = simd = ""
    elif not threads:
        par, par_rows = simd, ""
    flat = call(lambda j: "i")
    strided = call(lambda j: "r" if j is None else f"o{j} + c * st[{j} * ndim + ndim - 1]")
    unit = call(lambda j: "r" if j is None else f"o{j} + c")   # inner strides all 1
    units = " && ".join(f"st[{j} * ndim + ndim - 1] == 1" for j, inp in
                        enumerate(typed.inputs) if not inp.scalar) or "1"
    offsets = "\n".join(f"        int64_t o{j} = 0;" for j, inp in enumerate(typed.inputs)
                        if not inp.scalar)
    steps = "\n".join(f"            o{j} += idx * st[{j} * ndim + d];"
                      for j, inp in enumerate(typed.inputs) if not inp.scalar)
    loops = f"""\
/* n elements of the output; contiguous: every array operand is C-contiguous with the
   output's shape; else st[k * ndim + d] is operand k's stride (in elements) on axis d
   of the output shape (0 where it broadcasts) */
int {cname}(int64_t n, int32_t ndim, const int64_t *restrict shape,
            const int64_t *restrict st, int32_t contiguous, int32_t nthreads,
            void **ptrs) {{
{chr(10).join(decl_in)}
    (void)shape; (void)st; (void)ndim;
    if (contiguous || ndim == 0) {{
        if (nthreads > 1) {{
            {par}
            for (int64_t i = 0; i < n; i++) {flat}
        }} else {{
            {simd}
            for (int64_t i = 0; i < n; i++) {flat}
        }}
        return 0;
    }}
    const int64_t inner = shape[ndim - 1];
    if (inner == 0) return 0;
    const int64_t rows = n / inner;
    {par_rows}
    for (int64_t row = 0; row < rows; row++) {{
{offsets}
        int64_t rest = row;
        for (int32_t d = ndim - 2; d >= 0; d--) {{
            const int64_t idx = rest % shape[d];
            rest /= shape[d];
{steps}
        }}
        const int64_t base = row * inner;
        if ({units}) {{    /* rows contiguous (a broadcast bias): no gathers */
            {simd}
            for (int64_t c = 0; c < inner; c++) {{
                const int64_t r = base + c;
                {unit}
            }}
            continue;
        }}
        {simd}
        for (int64_t c = 0; c < inner; c++) {{
            const int64_t r = base + c;
            {strided}
        }}
    }}
    return 0;
}}
"""
    if not (openmp and threads):    # one thread: the parallel branch is never taken
        loops = loops.replace("    if (nthreads > 1) {", "    if (0) {")
    pre = [prelude(), helpers_text(helpers)]
    head = f"/* astjax kernel {k.name}: {len(typed.ops)} statements of a fused group */\n"
    return head + "".join(pre) + "\n" + elem + "\n" + loops


# ---------------------------------------------------------------------------------
# Indexed kernels (slices, transposes, pads, casts, reductions: ir.TypedIndexed)

def _int_literal(e):
    return e.lstrip("-").isdigit()


def _add(a, b) -> str:
    """``a + b`` of two C index expressions, folded when they are literals."""
    if _int_literal(a) and _int_literal(b):
        return str(int(a) + int(b))
    if a == "0":
        return b
    if b == "0":
        return a
    return f"({a} + {b})"


def _mul(a, b) -> str:
    if _int_literal(a) and _int_literal(b):
        return str(int(a) * int(b))
    if a == "0" or b == "0":
        return "0"
    if a == "1":
        return b
    if b == "1":
        return a
    return f"({a} * {b})"


def _neg(a) -> str:
    return _mul("-1", a)


# a padded value of an edge body: ``keep ? x : pad`` as bit operations, so that gcc
# neither branches around the computation of ``x`` nor refuses to vectorize the row
_SELECTS = {"float": "astjax_select_f", "double": "astjax_select_d"}
_SELECT_TEXT = {T: f"""\
static inline {T} {name}(int keep, {T} x, {T} pad) {{
    union {{ {T} v; {U} u; }} a, b;
    a.v = x;
    b.v = pad;
    const {U} m = ({U})0 - ({U})(keep != 0);
    a.u = (a.u & m) | (b.u & ~m);
    return a.v;
}}
""" for T, name, U in (("float", "astjax_select_f", "uint32_t"),
                      ("double", "astjax_select_d", "uint64_t"))}

# narrows a loop's interior [lo, hi) to the indices i with s * i + o >= 0
_NARROW = """\
static inline void astjax_narrow(int64_t s, int64_t o, int64_t *lo, int64_t *hi) {
    if (s > 0) {
        const int64_t m = o >= 0 ? -(o / s) : (-o + s - 1) / s;
        if (m > *lo) *lo = m;
    } else if (s < 0) {
        const int64_t t = -s;
        const int64_t m = (o >= 0 ? o / t : -((-o + t - 1) / t)) + 1;
        if (m < *hi) *hi = m;
    } else if (o < 0) {
        *hi = INT64_MIN;
    }
}
"""

class _Emitter:
    """The statements computing values at index tuples, each (value, index) once.

    A value read at several indices (``p[1:] - p[:-1]``) is recomputed at each: its
    producer's statements are emitted again for the other index (the fusion pass
    only fuses such reads when the producer is cheap)."""

    def __init__(self, typed, baked, interior=False):
        self.typed = typed
        self.baked = dict(baked)
        self.defs = {op.target: op for op in typed.ops}
        self.lines: list = []
        self.memo: dict = {}
        self.helpers: set = set()
        self.count = 0
        self.last_comment = None
        # interior: the body for indices where no pad guard or clamp can fire.  Every
        # index is then affine in one loop index: ``forms`` holds (axis or None,
        # scale, offset) of each index name, and ``constraints`` the (axis, s, o) with
        # ``s * i_axis + o >= 0`` that each dropped guard or clamp assumed
        self.interior = interior
        # an edge body (``only_axis``): only the guards and clamps of that axis are
        # assumed away; the others stay (constant along a row of the boundary)
        self.only_axis = None
        self.selects: set = set()      # C types whose select helper the body calls
        self.forms: dict = {}
        self.constraints: list = []
        # scratch rows (``_scratch_plan``): value -> its buffer number; the interior
        # reads those values from rows computed once per row of the loop
        self.reads: dict = {}          # value -> index tuples it was read at
        self.scratch: dict = {}
        self.rows_used: set = set()    # (buffer number, row offset) read
        # buffer number -> the newest ring row, which the interior loop itself
        # computes and stores (``_inline_newest``)
        self.inline_rows: dict = {}
        # ring row pointers are named for rows relative to ``i0`` (the interior) or
        # to ``r`` (a fill loop computing row ``r`` of another ring: nested rings)
        self.row_base = "row"

    def form(self, e):
        """(axis, scale, offset) of index expression ``e`` (interior bodies only)."""
        got = self.forms.get(e)
        if got is not None:
            return got
        if e[:1] == "i" and e[1:].isdigit():
            return (int(e[1:]), "1", "0")
        return (None, "0", e)          # a literal or a run-time parameter

    def assume(self, ax, s, o):
        """The interior assumes ``s * i_ax + o >= 0`` (a constant one: on axis 0)."""
        c = (0 if ax is None else ax, s, o)
        if c not in self.constraints:
            self.constraints.append(c)

    def p(self, name) -> str:
        v = self.baked.get(name)
        return name if v is None else str(v)

    def fresh(self, base):
        self.count += 1
        return f"{base}_{self.count}"

    def emit(self, line, loc=None):
        c = _comment(loc)
        if c and c != self.last_comment:
            self.lines.append(c)
            self.last_comment = c
        self.lines.append(line)

    def index(self, base, expr, form=None) -> str:
        """An index expression held in a named temporary (unless trivial); ``form``:
        its affine form, kept for the interior's constraints."""
        if expr.isidentifier() or expr.lstrip("-").isdigit():
            if form is not None and expr not in self.forms and not (
                    expr[:1] == "i" and expr[1:].isdigit()):
                self.forms[expr] = form
            return expr
        name = self.fresh(base)
        self.lines.append(f"const int64_t {name} = {expr};")
        if form is not None:
            self.forms[name] = form
        return name

    def guarded_clamp(self, i, lo, hi, d, guards) -> str:
        """The source index of a padded read along an axis of extent ``d`` padded by
        ``lo``/``hi``: ``i - lo`` clamped into the source (what edge padding reads),
        with the tests that the unclamped index is inside appended to ``guards``."""
        j = self.index("j", f"{i} - {lo}" if lo else i)
        clamp = j
        if lo:
            guards.append(f"{j} >= 0")
        if hi:
            guards.append(f"{j} < {d}")
            clamp = f"({j} >= {d} ? {d} - 1 : {j})"
        if lo:
            clamp = f"({j} < 0 ? 0 : {clamp})"
        return self.index("c", clamp)

    def value(self, v, idx) -> str:
        rank = self.typed.values[v][1]
        idx = tuple("0" if self.baked.get(f"dim_{v}_{a}") == 1 else idx[a]
                    for a in range(rank))
        key = (v, idx)
        got = self.memo.get(key)
        if got is not None:
            return got
        if self.interior and self.only_axis is None and not v.startswith("in"):
            self.reads.setdefault(v, set()).add(idx)
        f0 = self.form(idx[0]) if v in self.scratch else None
        if f0 is not None and f0[:2] == (0, "1") and _int_literal(f0[2]):
            # a ring's value at a row a constant offset from the loop's (a read at
            # any other row computes it here: the planner then drops that ring)
            k = self.scratch[v]
            a = int(f0[2])
            self.rows_used.add((k, a))
            if self.inline_rows.get(k) == a:
                # the newest row: computed here, kept in the ring for the next rows
                del self.scratch[v]
                name = self._node(self.defs[v], idx)
                self.scratch[v] = k
                self.lines.append(f"{_row_name(k, a, self.row_base)}[{idx[1]}] = {name};")
                self.memo[key] = name
                return name
            name = self.fresh(v)
            self.lines.append(f"const {ctype(self.typed.values[v][0])} {name} = "
                              f"{_row_name(k, a, self.row_base)}[{idx[1]}];")
            self.memo[key] = name
            return name
        if v.startswith("in"):
            j = int(v[2:])
            inp = self.typed.inputs[j]
            if inp.ndim == 0:
                return f"s{j}"
            terms = []
            for a, e in enumerate(idx):
                st = self.p(f"st_{v}_{a}")
                if e == "0" or st == "0":
                    continue
                terms.append(e if st == "1" else f"{e} * {st}")
            name = self.fresh(v)
            self.lines.append(f"const {ctype(inp.dtype)} {name} = "
                              f"p{j}[{' + '.join(terms) or '0'}];")
        else:
            name = self._node(self.defs[v], idx)
        self.memo[key] = name
        return name

    def _place(self, op, idx) -> str:
        """A placed block read at ``idx``: the source where ``idx`` is inside the block
        (its row index equal, its slice ranges holding it), the fill elsewhere; the
        source is read at a clamped index either way, so the read stays in range."""
        src, guards = [], []
        for a, m in enumerate(op.maps):
            i = idx[a]
            if m[0] == "fixed":
                guards.append(f"{i} == {self.p(f'at_{op.target}_{a}')}")
                continue
            start = self.p(f"start_{op.target}_{a}")
            d = self.p(f"dim_{op.source}_{m[1]}")
            if self.interior:
                ax, s, o = self.form(i)
                if self.only_axis is None or ax == self.only_axis:
                    # inside the block along this axis: assumed for the whole interior
                    # (``constraints``, as a pad's guards are), so the read is affine
                    o = _add(o, _neg(start))
                    self.assume(ax, s, o)                                  # j >= 0
                    self.assume(ax, _neg(s), _add(d, _add("-1", _neg(o))))  # j < d
                    src.append(self.index("j", i if start == "0" else f"{i} - {start}",
                                          (ax, s, o)))
                    continue
            j = self.index("j", i if start == "0" else f"{i} - {start}")
            guards += [f"{j} >= 0", f"{j} < {d}"]
            src.append(self.index("c", f"({j} < 0 ? 0 : {j} >= {d} ? {d} - 1 : {j})"))
        inner = self.value(op.source, tuple(src))
        if not guards:
            return inner
        pad = _literal(op.value, op.dtype)
        T = ctype(op.dtype)
        if self.interior and T in _SELECTS:     # (no branch: the row vectorizes)
            self.selects.add(T)
            return f"{_SELECTS[T]}({' && '.join(guards)}, {inner}, {pad})"
        return f"({' && '.join(guards)}) ? {inner} : {pad}"

    def _node(self, op, idx) -> str:
        values = self.typed.values
        if isinstance(op, ir.TypedOp):
            exprs, scal = [], []
            for (name, dt), lt in zip(op.args, op.loop[:-1]):
                if name == "const":
                    exprs.append(_literal(dt, lt))
                    scal.append(True)
                    continue
                r = values[name][1]
                exprs.append(cast(self.value(name, idx[len(idx) - r:]), dt, lt))
                scal.append(name.startswith("in") and
                            self.typed.inputs[int(name[2:])].ndim == 0)
            expr = op_expr(op, exprs, scal, self.helpers, self.typed.kernel.fastmath)
            T = ctype(op.loop[-1])
        elif isinstance(op, ir.TSlice):
            src = []
            for a, m in enumerate(op.maps):
                if m[0] == "fixed":
                    src.append(self.p(f"at_{op.target}_{a}"))
                    continue
                i = idx[m[1]]
                start, step = self.p(f"start_{op.target}_{a}"), self.p(f"step_{op.target}_{a}")
                e = i if step == "1" else ("0" if i == "0" else f"{i} * {step}")
                if start != "0":
                    e = start if e == "0" else f"{start} + {e}"
                form = None
                if self.interior:
                    ax, s, o = self.form(i)
                    form = (ax, _mul(s, step), _add(start, _mul(o, step)))
                src.append(self.index("k", e, form))
            return self.value(op.source, tuple(src))
        elif isinstance(op, ir.TTranspose):
            src = [None] * len(op.axes)
            for j, a in enumerate(op.axes):
                src[a] = idx[j]
            return self.value(op.source, tuple(src))
        elif isinstance(op, ir.TPad) and self.interior:
            # no guard, no clamp: assumed (``constraints``) for the whole interior
            # (an edge body keeps those of the other axes: ``guards``)
            src, guards = [], []
            for a, (lo, hi) in enumerate(op.widths):
                i = idx[a]
                if not lo and not hi:
                    src.append(i)
                    continue
                d = self.p(f"dim_{op.source}_{a}")
                ax, s, o = self.form(i)
                if self.only_axis is not None and ax != self.only_axis:
                    src.append(self.guarded_clamp(i, lo, hi, d, guards))
                    continue
                o = _add(o, str(-lo))
                if lo:
                    self.assume(ax, s, o)                                # j >= 0
                if hi:
                    self.assume(ax, _neg(s), _add(d, _add("-1", _neg(o))))   # j < d
                src.append(self.index("j", f"{i} - {lo}" if lo else i, (ax, s, o)))
            inner = self.value(op.source, tuple(src))
            if op.mode == "edge" or not guards:
                return inner
            T = ctype(op.dtype)
            pad = _literal(op.value, op.dtype)
            if T in _SELECTS:        # (a branch here would keep the row scalar)
                self.selects.add(T)
                expr = f"{_SELECTS[T]}({' && '.join(guards)}, {inner}, {pad})"
            else:
                expr = f"({' && '.join(guards)}) ? {inner} : {pad}"
        elif isinstance(op, ir.TPad):
            src, guards = [], []
            for a, (lo, hi) in enumerate(op.widths):
                i = idx[a]
                if not lo and not hi:
                    src.append(i)
                    continue
                d = self.p(f"dim_{op.source}_{a}")
                src.append(self.guarded_clamp(i, lo, hi, d, guards))
            inner = self.value(op.source, tuple(src))
            if op.mode == "edge" or not guards:
                return inner
            expr = f"({' && '.join(guards)}) ? {inner} : {_literal(op.value, op.dtype)}"
            T = ctype(op.dtype)
        elif isinstance(op, ir.TPlace):
            expr, T = self._place(op, idx), ctype(op.dtype)
        elif isinstance(op, ir.TBroadcast):       # (a 0-d input: the same at every index)
            expr, T = cast(self.value(op.source, ()), op.src, op.dtype), ctype(op.dtype)
        else:                                    # TCast
            expr = cast(self.value(op.source, idx), op.src, op.dtype)
            T = ctype(op.dtype)
        name = self.fresh(op.target)
        self.emit(f"const {T} {name} = {expr};", op.loc)
        return name


# A reduction over every axis sums this many parts of its rows, each on one thread, then
# the parts in order: its order (and bits) never depend on the number of threads.
REDUCE_PARTS = 64


def _reduce_parts(red):
    """C for a reduction: (accumulator type, initial value, combine(acc, v) statement,
    final value expression of acc and the element count)."""
    A = ctype(red.acc)
    if red.op in ("sum", "mean"):
        init = _literal(0, red.acc)
        if red.acc.kind == "f":
            def combine(acc, v):
                return f"{acc} += ({A}){v};"
        else:
            U = "uint64_t"

            def combine(acc, v):
                return f"{acc} = ({A})(({U}){acc} + ({U})({A}){v});"
        if red.op == "mean":
            def final(acc, count):
                return f"({ctype(red.dtype)})({acc} / (double)({count}))"
        else:
            def final(acc, count):
                return f"({ctype(red.dtype)}){acc}"
        return A, init, combine, final
    sym = ">" if red.op == "max" else "<"
    dt = red.acc
    if dt.kind == "f":
        init = _literal(float("-inf") if red.op == "max" else float("inf"), dt)

        def combine(acc, v):
            return f"{acc} = (({acc} {sym} {v} || isnan({acc})) ? {acc} : {v});"
    else:
        if dt.kind == "b":
            init = "0" if red.op == "max" else "1"
        else:
            info = np.iinfo(dt)
            init = _literal(info.min if red.op == "max" else info.max, dt)

        def combine(acc, v):
            return f"{acc} = ({acc} {sym} {v} ? {acc} : {v});"

    def final(acc, count):
        return acc
    return A, init, combine, final


def render_indexed(typed, cname: str, openmp: bool, baked=(), threads: bool = True,
                   prefetch=((), ())) -> str:
    """The C text of an indexed kernel: ``int cname(const int64_t *P, int32_t
    nthreads, void **ptrs)``, ``P`` the values of ``typed.params`` (those in
    ``baked`` are literals here), ``ptrs`` the inputs then the results (C-contiguous,
    freshly allocated).  ``threads`` False: for calls on one thread, without the
    parallel loops (as ``render``); a reduction's order never depends on them.
    ``prefetch``: (input indices, result indices) whose memory streams from DRAM (a
    sweep's tape rows, ``_prefetch_rows``)."""
    em = _Emitter(typed, baked)
    bk = em.baked
    red = typed.reduce
    dom_value = red.source if red is not None else typed.outputs[0][0]
    rank = typed.values[dom_value][1]
    dims = [em.p(f"dim_{dom_value}_{a}") for a in range(rank)]
    idx = tuple(f"i{a}" for a in range(rank))
    nin = len(typed.inputs)
    decl = [f"    const int64_t {n} = P[{k}];" for k, n in enumerate(typed.params)
            if n not in bk]
    decl.append("    (void)P;")
    for j, inp in enumerate(typed.inputs):
        T = ctype(inp.dtype)
        if inp.ndim == 0:
            decl.append(f"    const {T} s{j} = *(const {T} *)ptrs[{j}];")
        else:
            decl.append(f"    const {T} *restrict p{j} = (const {T} *)ptrs[{j}];")
    for j, (_, dt) in enumerate(typed.outputs):
        T = ctype(dt)
        decl.append(f"    {T} *restrict q{j} = ({T} *)ptrs[{nin + j}];")
    par = ("#pragma omp parallel for schedule(static) num_threads(nthreads) "
           "if(nthreads > 1)") if openmp and threads else ""
    simd = "#pragma omp simd" if openmp else ""

    def flat(axes):
        e = "0"
        for a in axes:
            e = f"i{a}" if e == "0" else f"({e}) * {dims[a]} + i{a}"
        return e

    def loops(axes, body, depth, pragma_outer, pragma_inner):
        """Nested for loops over ``axes`` around ``body`` lines."""
        text, ind = [], "    " * depth
        for n, a in enumerate(axes):
            prag = pragma_outer if n == 0 else ""
            if n == len(axes) - 1 and pragma_inner:
                prag = pragma_inner if n else (pragma_outer or pragma_inner)
            if prag:
                text.append(ind + prag)
            text.append(f"{ind}for (int64_t i{a} = 0; i{a} < {dims[a]}; i{a}++) {{")
            ind += "    "
        text += [ind + line for line in body]
        for _ in axes:
            ind = ind[:-4]
            text.append(ind + "}")
        return text

    inside = None
    if red is None:
        results = [em.value(v, idx) for v, _ in typed.outputs]
        body = list(em.lines)
        f = flat(range(rank))
        body += [f"q{j}[{f}] = {r};" for j, r in enumerate(results)]
        inside = _Emitter(typed, baked, interior=True)
        results = [inside.value(v, idx) for v, _ in typed.outputs]
        if inside.constraints:
            em.helpers |= inside.helpers
            scratch = None
            plan, again, results_again = _plan_rings(typed, baked, idx, inside) \
                if rank == 2 else ([], None, None)
            if plan:
                em.helpers |= again.helpers
                scratch = _scratch_code(typed, baked, plan, again, em.helpers, inside, f)
                inside.lines = again.lines
                results = results_again
            interior = list(inside.lines)
            interior += [f"q{j}[{f}] = {r};" for j, r in enumerate(results)]
            edge, selects = None, set(scratch["selects"]) if scratch else set()
            if rank >= 2:
                # boundary rows: their interior columns keep only the other axes'
                # guards, so they too run vectorized along the last axis
                e = _Emitter(typed, baked, interior=True)
                e.only_axis = rank - 1
                e_results = [e.value(v, idx) for v, _ in typed.outputs]
                if all(c in inside.constraints for c in e.constraints):
                    em.helpers |= e.helpers
                    selects |= e.selects
                    edge = list(e.lines) + [f"q{j}[{f}] = {r};"
                                            for j, r in enumerate(e_results)]
            code = _split_loops(rank, dims, inside.constraints, body, interior, par, simd,
                                scratch, edge)
        else:
            outer_simd = (par.replace("parallel for", "parallel for simd") or simd) \
                if rank == 1 else par
            code = loops(list(range(rank)), body, 1, outer_simd, simd if rank > 1 else "")
    else:
        A, init, combine, final = _reduce_parts(red)
        src = em.value(red.source, idx)
        body = list(em.lines) + [combine("acc", src)]
        kept = [a for a in range(rank) if a not in red.axes]
        count = " * ".join(dims[a] for a in red.axes)
        if kept:
            inner = [f"{A} acc = {init};"] + loops(list(red.axes), body, 0, "", "") + \
                [f"q0[{flat(kept)}] = {final('acc', count)};"]
            code = loops(kept, inner, 1, par, "")
        else:
            # a fixed number of parts, whatever the team: the same bits on any
            # number of threads (a compiled loop's thread cap changes: governor.py)
            d0, P = dims[0], REDUCE_PARTS
            inner_axes = list(range(1, rank))
            per = [f"{A} acc = {init};",
                   f"for (int64_t i0 = {d0} * t / {P}; i0 < {d0} * (t + 1) / {P}; i0++) {{"]
            per += ["    " + line for line in loops(inner_axes, body, 0, "", "")]
            per += ["}", "part[t] = acc;"]
            omp = ("#pragma omp parallel for schedule(static) num_threads(nthreads) "
                   "if(nthreads > 1)") if openmp and threads else ""
            code = [f"    {A} part[{P}];"]
            if omp:
                code.append("    " + omp)
            code.append(f"    for (int32_t t = 0; t < {P}; t++) {{")
            code += ["        " + line for line in per]
            code += ["    }", f"    {A} acc = {init};",
                     f"    for (int32_t t = 0; t < {P}; t++) {{",
                     "        " + combine("acc", "part[t]"), "    }",
                     f"    q0[0] = {final('acc', count)};"]
    code = _prefetch_rows(code, typed, em, dims, prefetch) if red is None else code
    pre = [prelude(), helpers_text(em.helpers)]
    if any("astjax_prefetch_row(" in line for line in code):
        pre.append(_PREFETCH_ROW)
    if inside is not None and inside.constraints:
        pre.append(_NARROW)
        pre += [_SELECT_TEXT[T] for T in sorted(selects)]
        if "malloc(" in "\n".join(code):
            pre.insert(0, "#include <stdlib.h>\n")
    what = "reduction" if red is not None else "loop fusion"
    head = (f"/* astjax kernel {typed.kernel.name}: {len(typed.kernel.ops)} statements "
            f"({what} over the {'source' if red else 'output'} index) */\n")
    sig = (f"int {cname}(const int64_t *restrict P, int32_t nthreads, void **ptrs) {{")
    return head + "".join(pre) + "\n" + sig + "\n" + "\n".join(decl) + "\n" + \
        "\n".join(code) + "\n    (void)nthreads;\n    return 0;\n}\n"


def _prefetch_rows(code, typed, em, dims, prefetch):
    """``code`` with the next row of each streamed operand prefetched as a row starts.

    A reverse-mode sweep writes its tape in the forward trips and reads it back
    in the backward ones: hundreds of megabytes, cold by then, one row per output row.
    The hardware prefetcher follows a few streams, not the dozen a fused adjoint
    reads, so the rows the sweep names are fetched a row ahead (the FWI's backward
    step: 5-7% faster; prefetching every operand instead was 20% slower).  A
    prefetch never faults, so a row past the end is harmless."""
    ins, outs = prefetch
    rank = len(dims)
    if rank < 2 or not (ins or outs):
        return code
    row = " * ".join(dims[1:])
    lines = []
    for j in ins:
        name = f"st_in{j}_0"
        if j >= len(typed.inputs) or typed.inputs[j].ndim < 2 or name not in typed.params:
            continue
        st = em.p(name)
        if st == "0":               # (the same row every step: cached already)
            continue
        T = ctype(typed.inputs[j].dtype)
        lines.append(f"astjax_prefetch_row((const char *)(p{j} + (i0 + 1) * {st}), "
                     f"({st}) * (int64_t)sizeof({T}), 0);")
    for j in outs:
        if j >= len(typed.outputs):
            continue
        T = ctype(typed.outputs[j][1])
        lines.append(f"astjax_prefetch_row((const char *)(q{j} + (i0 + 1) * {row}), "
                     f"({row}) * (int64_t)sizeof({T}), 1);")
    if not lines:
        return code
    head = f"for (int64_t i0 = 0; i0 < {dims[0]}; i0++) {{"
    for k, line in enumerate(code):
        if line.strip() == head:
            ind = line[:len(line) - len(line.lstrip())] + "    "
            block = [f"{ind}if (i0 + 1 < {dims[0]}) {{  /* the next row of the streamed "
                     "operands */"] + [ind + "    " + x for x in lines] + [ind + "}"]
            return code[:k + 1] + block + code[k + 1:]
    return code


# (prefetch is a hint: it never faults; ``rw`` 1 for a row about to be written)
_PREFETCH_ROW = """
static inline void astjax_prefetch_row(const char *p, int64_t bytes, int rw) {
    for (int64_t k = 0; k < bytes; k += 64) {
        if (rw) __builtin_prefetch(p + k, 1, 0); else __builtin_prefetch(p + k, 0, 0);
    }
}
"""


def _row_name(k, a, base="row") -> str:
    return f"sc{k}_{base}_{'m' if a < 0 else 'p'}{abs(a)}"


_COSTLY = frozenset({"divide", "true_divide", "floor_divide", "remainder", "fmod",
                     "power", "float_power", "sqrt", "cbrt", "exp", "exp2", "expm1",
                     "log", "log2", "log10", "log1p", "sin", "cos", "tan", "arcsin",
                     "arccos", "arctan", "sinh", "cosh", "tanh", "arctan2", "hypot"})
# work (additions = 1, divisions and the like = 4) from which a value read at several
# shifted indices of the interior is computed once per row into scratch rows
SCRATCH_MIN_COST = 6


def _cost(typed, v, seen=None) -> int:
    """Work per element of value ``v`` when recomputed (its statements back to the
    inputs)."""
    if v.startswith("in"):
        return 0
    op = next(o for o in typed.ops if o.target == v)
    if isinstance(op, ir.TypedOp):
        own = 4 if op.ufunc in _COSTLY else 1
        return own + sum(_cost(typed, a) for a, _ in op.args if a != "const")
    return _cost(typed, op.source)


def _offsets(em, reads):
    """(row, column) offsets of ``reads`` (index tuples of a rank-2 value) when each
    is ``(i0 + a, i1 + b)`` with integer ``a``, ``b`` in ``em``'s index forms, else
    None."""
    offs = set()
    for idx in reads:
        if len(idx) != 2:             # (a value of another rank: ``dt * dt``, rank 0)
            return None
        f0, f1 = em.form(idx[0]), em.form(idx[1])
        if f0[:2] != (0, "1") or f1[:2] != (1, "1") or not (
                _int_literal(f0[2]) and _int_literal(f1[2])):
            return None
        offs.add((int(f0[2]), int(f1[2])))
    return offs


def _scratch_plan(typed, em):
    """Values of a rank-2 loop that the interior body (``em``, already emitted) reads
    at several indices ``(i0 + a, i1 + b)`` with constant offsets, and that cost enough
    to recompute: their names, in statement order."""
    return [v for v, reads in em.reads.items()
            if typed.values[v][1] == 2 and len(reads) >= 2 and
            _cost(typed, v) >= SCRATCH_MIN_COST and _offsets(em, reads)]


# rounds of ``_plan_rings`` looking for a stable set of rings
PLAN_ROUNDS = 8


def _ring_reads(typed, baked, idx, planned):
    """What reads what when ``planned`` values are read from rings: {consumer: {value:
    offsets}}, consumer None the interior body, else a planned value's fill body (the
    value at ``(r, j)``, the other planned values read from rings); offsets relative
    to the consumer's own index (None where a read is not at constant offsets)."""
    scratch = {v: k for k, v in enumerate(planned)}
    inner = _Emitter(typed, baked, interior=True)
    inner.scratch = dict(scratch)
    for v, _ in typed.outputs:
        inner.value(v, idx)
    reads = {None: {v: _offsets(inner, r) for v, r in inner.reads.items()}}
    for v in planned:
        sub = _fill_emitter(typed, baked, v, scratch)
        sub.value(v, ("r", "j"))
        reads[v] = {w: _offsets(sub, r) for w, r in sub.reads.items() if w != v}
    return reads


def _fill_emitter(typed, baked, v, scratch):
    """An emitter computing ``v`` at ``(r, j)`` (row ``r`` of its ring) that reads the
    other values of ``scratch`` from their rings (rows named relative to ``r``)."""
    sub = _Emitter(typed, baked, interior=True)    # (its constraints: the caller's)
    sub.count = 1000 * (scratch[v] + 1)
    sub.forms["r"] = (0, "1", "0")
    sub.forms["j"] = (1, "1", "0")
    sub.scratch = {w: k for w, k in scratch.items() if w != v}
    sub.row_base = "at"
    return sub


def _plan_rings(typed, baked, idx, inside):
    """The rings of a rank-2 interior: (plan, the interior emitter reading them, its
    results).  ``plan``: (value, a min, a max, b min, b max) in statement order, each
    value computed once per row into a ring of rows ``i0 + a min .. i0 + a max``,
    columns ``i1 + b min .. i1 + b max`` of the interior, instead of once per read.

    A value is stored when it costs enough and is read at two or more (consumer,
    offset) pairs, a consumer being the interior body or the fill loop of another
    ring: so nested reads are computed once too (the wave's adjoint reads
    ``g / dy`` at columns ``j`` and ``j + 1`` inside the value it reads at ``j`` and
    ``j - 1``: 8 divisions per point instead of 3 for that axis).  A ring's rows and
    columns span its reads: the interior's and those of its consumers' fills over
    their own spans.  Every such index lies between indices the fully inlined
    interior reads (``inside``), so the interior's constraints cover them: the pad
    guards are affine in the offsets."""
    planned = _scratch_plan(typed, inside)
    order = {op.target: n for n, op in enumerate(typed.ops)}
    for _ in range(PLAN_ROUNDS):
        if not planned:
            return [], None, None
        reads = _ring_reads(typed, baked, idx, planned)
        count: dict = {}
        bad = set()
        for consumer, got in reads.items():
            for w, offs in got.items():
                if offs is None:
                    bad.add(w)
                else:
                    count[w] = count.get(w, 0) + len(offs)
        keep = [w for w in count if w not in bad and typed.values[w][1] == 2 and
                count[w] >= 2 and _cost(typed, w) >= SCRATCH_MIN_COST]
        keep.sort(key=order.__getitem__)
        if keep == planned:
            break
        planned = keep
    else:
        return [], None, None
    # spans: consumers before the values they read (statement order, backwards)
    span = {}
    for w in sorted(planned, key=order.__getitem__, reverse=True):
        rows, cols = set(), set()
        for a, b in reads[None].get(w) or ():
            rows.add(a)
            cols.add(b)
        for v in planned:
            offs = reads[v].get(w)
            if offs and v in span:
                amin, amax, bmin, bmax = span[v]
                rows |= {amin + min(a for a, _ in offs), amax + max(a for a, _ in offs)}
                cols |= {bmin + min(b for _, b in offs), bmax + max(b for _, b in offs)}
        span[w] = (min(rows), max(rows), min(cols), max(cols))
    plan = [(v,) + span[v] for v in planned]
    fill_read = {w for v in planned for w in reads[v]}
    inline = {k: a for k, a in _inline_newest(plan).items() if plan[k][0] not in fill_read}
    while True:
        again = _Emitter(typed, baked, interior=True)
        again.scratch = {v: k for k, (v, *_) in enumerate(plan)}
        again.inline_rows = inline
        results = [again.value(v, idx) for v, _ in typed.outputs]
        # a newest row no interior statement reads is left to its fill
        kept = {k: a for k, a in inline.items() if (k, a) in again.rows_used}
        if kept == inline:
            return plan, again, results
        inline = kept


def _inline_newest(plan) -> dict:
    """Buffer number -> newest row offset, for the rings of several rows read at
    column offset 0 only: the interior loop computes that row's value itself (it
    reads it at its own column) and stores it for the next rows, so the value's work
    overlaps the loop's memory traffic instead of running in a fill loop of its own
    (the wave step: 5% less single-thread time).  A value read at other columns of
    the newest row needs its neighbours first: it keeps its fill loop, and so does a
    value another ring's fill reads (``_plan_rings`` leaves those out)."""
    return {k: amax for k, (v, amin, amax, bmin, bmax) in enumerate(plan)
            if bmin == bmax == 0 and amax > amin}


def _scratch_fill(typed, baked, k, plan, helpers, inline=False, edge=None):
    """C filling buffer ``k``'s ring rows of ``plan[k]``'s value for loop row ``i0``:
    all of them on the first interior row of a thread's run, else the newest one
    (``inline``: the interior loop computes the newest one, so all but it, or none).
    Values of other rings it reads come from their rows (filled before it).  ``edge``
    (lines, value, the loop's columns): the body for the row's columns outside the
    interior's span, where the column guards stay: then each row is filled on all its
    columns when the loop has boundary columns (which read them), the newest row of
    an inlined ring too (its interior columns are the interior loop's)."""
    v, amin, amax, bmin, bmax = plan[k]
    sub = _fill_emitter(typed, baked, v, {p[0]: n for n, p in enumerate(plan)})
    val = sub.value(v, ("r", "j"))
    helpers |= sub.helpers
    R = amax - amin + 1
    W = f"W{k}"
    j0 = "lo1" if bmin == 0 else f"lo1 + {bmin}" if bmin > 0 else f"lo1 - {-bmin}"
    j1 = "hi1" if bmax == 0 else f"hi1 + {bmax}" if bmax > 0 else f"hi1 - {-bmax}"
    T = ctype(typed.values[v][0])
    last = amax - 1 if inline else amax

    def row_pointers():
        out = [f"    {T} *restrict row = sc{k} + (r % {R}) * {W};"]
        for n, a in sorted(sub.rows_used):       # rows of the rings this one reads
            Rn = plan[n][2] - plan[n][1] + 1
            Tn = ctype(typed.values[plan[n][0]][0])
            out.append(f"    const {Tn} *restrict {_row_name(n, a, 'at')} = "
                       f"sc{n} + ((r + {a}) % {Rn}) * W{n};")
        return out

    def edge_columns():
        if edge is None:
            return []
        e_lines, e_val, n = edge
        return [f"    const int64_t ja = {j0} < 0 ? 0 : {j0} > {W} ? {W} : {j0};",
                f"    const int64_t jb = {j1} < ja ? ja : {j1} > {W} ? {W} : {j1};",
                "    /* the columns outside the interior's span (read by the boundary "
                "columns only): their guards stay */",
                f"    for (int64_t j = a1 > 0 || b1 < {n} ? (ja > 0 ? 0 : jb) : {W}; "
                f"j < {W}; j = j + 1 == ja ? jb : j + 1) {{"] + \
            ["        " + line for line in e_lines] + [f"        row[j] = {e_val};", "    }"]

    lines = [f"/* rows i0 + {amin} .. i0 + {last} of a value read at shifted indices, "
             "computed once" + (f" (row i0 + {amax}: in the loop below)" if inline else "")
             + " */",
             f"for (int64_t a = i0 == prev + 1 ? {amax} : {amin}; a <= {last}; a++) {{",
             "    const int64_t r = i0 + a;"]
    lines += row_pointers() + edge_columns()
    lines += ["    #pragma omp simd",
              f"    for (int64_t j = {j0}; j < {j1}; j++) {{"]
    lines += ["        " + line for line in sub.lines]
    lines += [f"        row[j] = {val};", "    }", "}"]
    if inline and edge is not None:
        lines += [f"/* row i0 + {amax} outside the interior's columns (those: in the loop "
                  "below) */", "{", f"    const int64_t r = i0 + {amax};"]
        lines += row_pointers() + edge_columns() + ["}"]
    return lines


def _ring_edges(typed, baked, plan, em, inside, idx):
    """Bodies for the columns outside the interior's of a row with rings, reading the
    rings instead of recomputing what they hold (a boundary column of the wave's
    adjoint divided 32 times where an interior point divides 6): (the output body and
    results, {ring: (fill body, value)}, helpers, selects), or None.  Only the column
    guards stay (``only_axis`` 0: the row is an interior one), and only when every
    row guard each body assumes is one the interior assumes too (``inside``'s for the
    output body, the interior fill's for a fill body) and it reads ring rows the
    interior reads (those are filled): then each ring is filled on all its columns,
    any of which a column guard may clamp a read to."""
    scratch = {p[0]: n for n, p in enumerate(plan)}
    helpers, selects = set(), set()
    fills = {}
    for k, (v, *_) in enumerate(plan):
        ref = _fill_emitter(typed, baked, v, scratch)
        ref.value(v, ("r", "j"))
        sub = _fill_emitter(typed, baked, v, scratch)
        sub.only_axis = 0
        val = sub.value(v, ("r", "j"))
        if not (set(sub.constraints) <= set(ref.constraints) and
                sub.rows_used <= ref.rows_used):
            return None
        fills[k] = (sub.lines, val)
        helpers |= sub.helpers
        selects |= sub.selects
    e = _Emitter(typed, baked, interior=True)
    e.only_axis = 0
    e.scratch = dict(scratch)
    results = [e.value(v, idx) for v, _ in typed.outputs]
    if not (set(e.constraints) <= set(inside.constraints) and
            e.rows_used <= em.rows_used):
        return None
    return e.lines, results, fills, helpers | e.helpers, selects | e.selects


def _scratch_code(typed, baked, plan, em, helpers, inside, flat):
    """The allocation, per-row fill (rings read by others' fills first), row pointers
    and release of ``plan``'s rings, and the body of the boundary columns of an
    interior row when they read the rings too (``_ring_edges``; else None)."""
    alloc, fill, rows, free = [], [], [], []
    oks = []
    edges = _ring_edges(typed, baked, plan, em, inside, ("i0", "i1"))
    n = em.p(f"dim_{typed.outputs[0][0]}_1")         # the loop's columns
    columns, selects = None, set()
    if edges is not None:
        lines, results, fills, more, selects = edges
        helpers |= more
        columns = list(lines) + [f"q{j}[{flat}] = {r};" for j, r in enumerate(results)]
    for k, (v, amin, amax, bmin, bmax) in enumerate(plan):
        T = ctype(typed.values[v][0])
        R = amax - amin + 1
        W = em.p(f"dim_{v}_1")
        alloc.append(f"const int64_t W{k} = {W};")
        alloc.append(f"{T} *sc{k} = ({T} *)malloc(sizeof({T}) * (size_t)({R} * W{k} + 1));")
        oks.append(f"sc{k} != NULL")
        fill += _scratch_fill(typed, baked, k, plan, helpers, inline=k in em.inline_rows,
                              edge=None if edges is None else fills[k] + (n,))
        free.append(f"free(sc{k});")
    for k, a in sorted(em.rows_used):
        R = plan[k][2] - plan[k][1] + 1
        T = ctype(typed.values[plan[k][0]][0])
        const = "" if em.inline_rows.get(k) == a else "const "     # (written there)
        rows.append(f"{const}{T} *restrict {_row_name(k, a)} = "
                    f"sc{k} + ((i0 + {a}) % {R}) * W{k};")
    alloc.append(f"const int scratch_ok = {' && '.join(oks)};")
    return {"alloc": alloc, "fill": fill, "rows": rows, "free": free,
            "columns": columns, "selects": selects}


def _split_loops(rank, dims, constraints, general, interior, par, simd, scratch=None,
                 edge=None):
    """Loops over the output index that run the branch-free ``interior`` body where
    every pad guard and clamp is known to pass (``constraints``, solved per call into
    ``lo<a>``/``hi<a>`` per axis), and the ``general`` body elsewhere: the boundary
    strips.  The innermost interior loop is unit-stride and select-free, so the C
    compiler vectorizes it; the results are the same either way, element by element.
    ``edge`` (rank 2 and up): the body for the interior columns of a boundary row,
    where only the guards of the other axes can fire (constant along the row): it
    vectorizes too, instead of the general body running element by element."""
    code = ["    /* the interior: no pad guard or clamp fires there (branch-free, "
            "vectorized) */"]
    for a in range(rank):
        code.append(f"    int64_t lo{a} = 0, hi{a} = {dims[a]};")
    for ax, s, o in constraints:
        code.append(f"    astjax_narrow({s}, {o}, &lo{ax}, &hi{ax});")
    for a in range(rank):
        code.append(f"    if (lo{a} > {dims[a]}) lo{a} = {dims[a]};")
        code.append(f"    if (hi{a} < lo{a}) hi{a} = lo{a};")
    last = rank - 1
    n = dims[last]
    ind = "    "
    if rank == 1:
        code.append(f"{ind}for (int64_t i0 = 0; i0 < lo0; i0++) {{")
        code += [ind + "    " + line for line in general]
        code.append(ind + "}")
        if par or simd:
            code.append(ind + (par.replace("parallel for", "parallel for simd") or simd))
        code.append(f"{ind}for (int64_t i0 = lo0; i0 < hi0; i0++) {{")
        code += [ind + "    " + line for line in interior]
        code.append(ind + "}")
        code.append(f"{ind}for (int64_t i0 = hi0; i0 < {n}; i0++) {{")
        code += [ind + "    " + line for line in general]
        code.append(ind + "}")
        return code
    if scratch:                # rank 2: per-thread ring rows, filled row by row
        if par:
            code.append(ind + par.replace("parallel for schedule(static) ", "parallel "))
        code.append(ind + "{")
        ind += "    "
        code += [ind + line for line in scratch["alloc"]]
        code.append(ind + "int64_t prev = -2;       /* the last row filled */")
        if par:
            code.append(ind + "#pragma omp for schedule(static)")
    for a in range(last):
        if a == 0 and par and not scratch:
            code.append(ind + par)
        code.append(f"{ind}for (int64_t i{a} = 0; i{a} < {dims[a]}; i{a}++) {{")
        ind += "    "
    inner = " && ".join(f"i{a} >= lo{a} && i{a} < hi{a}" for a in range(last))
    if scratch:
        inner = "scratch_ok && " + inner
    code.append(f"{ind}const int inside = {inner};")
    if edge is not None:
        code.append(f"{ind}const int64_t a{last} = lo{last};")
        code.append(f"{ind}const int64_t b{last} = hi{last};")
    else:
        code.append(f"{ind}const int64_t a{last} = inside ? lo{last} : {n};")
        code.append(f"{ind}const int64_t b{last} = inside ? hi{last} : {n};")
    i = f"i{last}"
    columns = scratch["columns"] if scratch else None
    boundary = [f"/* the boundary: [0, a{last}) and [b{last}, {n}) */",
                f"for (int64_t {i} = a{last} > 0 ? 0 : b{last}; {i} < {n}; "
                f"{i} = {i} + 1 == a{last} ? b{last} : {i} + 1) {{"]
    if columns:
        # an interior row's boundary columns read the rings, after its interior loop
        code.append(f"{ind}if (!inside || b{last} <= a{last}) {{")
        code += [ind + "    " + line for line in boundary]
        code += [ind + "        " + line for line in general]
        code.append(ind + "    }")
        code.append(ind + "}")
    else:
        code += [ind + line for line in boundary]
        code += [ind + "    " + line for line in general]
        code.append(ind + "}")
    if edge is not None:
        code.append(f"{ind}if (!inside) {{")
        code.append(f"{ind}    /* a boundary row: its interior columns, vectorized (the "
                    "row's own indices first) */")
        row_part, col_part = _row_invariant(edge, i)
        code += [ind + "    " + line for line in row_part]
        if simd:
            code.append(ind + "    " + simd)
        code.append(f"{ind}    for (int64_t {i} = a{last}; {i} < b{last}; {i}++) {{")
        code += [ind + "        " + line for line in col_part]
        code.append(ind + "    }")
        if scratch:
            code.append(ind + "    prev = -2;")
        code.append(ind + "    continue;")
        code.append(ind + "}")
    if scratch:
        code.append(f"{ind}if (b{last} > a{last}) {{")
        ind += "    "
        code += [ind + line for line in scratch["fill"]]
        code += [ind + line for line in scratch["rows"]]
    if simd:
        code.append(ind + simd)
    code.append(f"{ind}for (int64_t {i} = a{last}; {i} < b{last}; {i}++) {{")
    code += [ind + "    " + line for line in interior]
    code.append(ind + "}")
    if columns:
        code.append(f"{ind}/* the boundary columns of an interior row: the rings' values "
                    "read, the column guards stay */")
        code.append(boundary[1])
        code[-1] = ind + code[-1]
        code += [ind + "    " + line for line in columns]
        code.append(ind + "}")
    if scratch:
        code.append(ind + "prev = i0;")
        ind = ind[:-4]
        code.append(ind + "} else {")
        code.append(ind + "    prev = -2;")
        code.append(ind + "}")
    for _ in range(last):
        ind = ind[:-4]
        code.append(ind + "}")
    if scratch:
        code += [ind + line for line in scratch["free"]]
        ind = ind[:-4]
        code.append(ind + "}")
    return code


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _row_invariant(lines, i):
    """(index statements of ``lines`` that do not depend on loop index ``i``, the
    rest): the former computed once before the loop, so that the loop body has no
    control flow (clamps of the row index) and vectorizes."""
    local = {m.group(1) for line in lines
             if (m := re.match(r"const \w+ (\w+) = ", line))}
    row, rest, hoisted = [], [], set()
    for line in lines:
        m = re.match(r"const int64_t (\w+) = (.*);$", line)
        if m:
            names = set(_IDENT.findall(m.group(2)))
            if i not in names and names & local <= hoisted:
                row.append(line)
                hoisted.add(m.group(1))
                continue
        rest.append(line)
    return row, rest
