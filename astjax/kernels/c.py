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

The scalar expressions (casts, literals, one ufunc each, the divmod and clip helpers)
come from ``cexpr.py``, shared with the CUDA renderer; this module is the loop
structure around them.  The compiler is run without ``-ffast-math`` and with
``-ffp-contract=off`` (``compile.py``), so ``+ - * /`` round exactly as NumPy's do.
"""
from __future__ import annotations


from astjax.kernels.cexpr import (FUNCTIONS, UFUNCS, cast, comment as _comment,  # noqa: F401
                                  ctype, helpers_text, literal as _literal, op_expr,
                                  prelude)
from astjax.kernels.ir import Typed


def render(typed: Typed, cname: str, openmp: bool) -> str:
    """The C text of ``typed`` as function ``cname`` (see the module docstring for its
    calling convention)."""
    k = typed.kernel
    helpers: set = set()
    nin, nout = len(typed.inputs), len(typed.outputs)
    scalar = {f"in{j}": inp.scalar for j, inp in enumerate(typed.inputs)}
    params = [f"{ctype(inp.dtype)} in{j}" for j, inp in enumerate(typed.inputs)]
    params += [f"{ctype(dt)} *restrict out{j}" for j, (_, dt) in enumerate(typed.outputs)]
    body = []
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
        expr = op_expr(op, exprs, scal, helpers)
        scalar[op.target] = all(scal)
        body.append(f"    const {ctype(op.loop[-1])} {op.target} = {expr};")
    for j, (name, _) in enumerate(typed.outputs):
        body.append(f"    *out{j} = {name};")
    elem = (f"static inline void {cname}_element({', '.join(params)}) {{\n" +
            "\n".join(body) + "\n}\n")

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
        args += [f"&q{j}[{index_of(None)}]" for j in range(nout)]
        return f"{cname}_element({', '.join(args)});"

    par = "#pragma omp parallel for simd schedule(static) num_threads(nthreads)"
    par_rows = "#pragma omp parallel for schedule(static) num_threads(nthreads)"
    simd = "#pragma omp simd"
    if not openmp:
        par = par_rows = simd = ""
    flat = call(lambda j: "i")
    strided = call(lambda j: "r" if j is None else f"o{j} + c * st[{j} * ndim + ndim - 1]")
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
        {simd}
        for (int64_t c = 0; c < inner; c++) {{
            const int64_t r = base + c;
            {strided}
        }}
    }}
    return 0;
}}
"""
    if not openmp:      # one thread: the parallel branch is never taken
        loops = loops.replace("    if (nthreads > 1) {", "    if (0) {")
    pre = [prelude(), helpers_text(helpers)]
    head = f"/* astjax kernel {k.name}: {len(typed.ops)} statements of a fused group */\n"
    return head + "".join(pre) + "\n" + elem + "\n" + loops
