"""CUDA C for a typed kernel: the same IR and scalar expressions as the C renderer.

One ``Typed`` kernel becomes a CUDA module of four ``extern "C" __global__`` entry
points around one ``__device__`` element function (one statement per NumPy statement
of the group, each commented with the user's line, rendered by ``c.op_expr``: the
numerics are exactly those of the C backend and of NumPy):

* ``<name>_contig32`` / ``<name>_contig64``: every array operand is C-contiguous with
  the output's shape; a grid-stride loop over the flat index in 32-bit index math when
  every index fits, else 64-bit;
* ``<name>_vec4``: the contiguous case with every array pointer aligned and ``n`` a
  multiple of 4: each thread loads and stores 4 elements of every operand at a time
  (vector loads: one 16-byte ``ld.global.v4.f32`` for float32);
* ``<name>_strided32`` / ``<name>_strided64``: any broadcast or strided views; the
  output index is split into coordinates (``shape``) and each operand's offset is the
  dot product with its element strides (``st[k * ndim + d]``, 0 on broadcast axes).

Operands that are one element for the whole loop are passed by value (Python numbers,
NumPy scalars) or read once through a pointer (size-1 device arrays); arrays by
pointer.  ``Module.kernels`` lists each entry point's
parameters (C type, name), which is what the host runtime packs and what the CPU
emulator (``cuda_emulate.py``) builds its launchers from.
"""
from __future__ import annotations

from dataclasses import dataclass

from astjax.kernels import cexpr
from astjax.kernels.cexpr import ctype
from astjax.kernels.ir import Typed

# Types and constants NVRTC has no headers for; the CPU shim (cuda_shim.h) defines
# ASTJAX_CUDA_SHIM and takes them from <cstdint>/<cmath> instead.
PRELUDE = """\
#ifndef ASTJAX_CUDA_SHIM
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#define INT8_MIN (-128)
#define INT16_MIN (-32767 - 1)
#define INT32_MIN (-2147483647 - 1)
#define INT64_MIN (-9223372036854775807LL - 1)
#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fffffff)
/* copysign(0, b) on a double: CUDA's overloads make an int first operand ambiguous */
static __device__ __forceinline__ double copysign(int a, double b) {
    return copysign((double)a, b);
}
#endif
#ifndef ASTJAX_CUDA_PRELUDE
#define ASTJAX_CUDA_PRELUDE
typedef unsigned char npy_bool;
/* C99's quiet comparisons (false on NaN, as < and > are) */
#define isless(a, b) ((a) < (b))
#define isgreater(a, b) ((a) > (b))
#endif
"""

# threads per block the runtime launches with (a multiple of the warp size)
BLOCK = 256


@dataclass(frozen=True)
class Entry:
    name: str               # the extern "C" symbol
    params: tuple           # (C type, parameter name): "T" by value, "T *" pointer


@dataclass(frozen=True)
class Module:
    text: str
    kernels: dict           # "contig32" | "contig64" | "strided32" | "strided64" -> Entry


DEVICE = "static __device__ __forceinline__"


def _element(typed: Typed, cname: str):
    """The element function's text and the helper texts it needs."""
    helpers: set = set()
    scalar = {f"in{j}": inp.scalar for j, inp in enumerate(typed.inputs)}
    params = [f"{ctype(inp.dtype)} in{j}" for j, inp in enumerate(typed.inputs)]
    params += [f"{ctype(dt)} *__restrict__ out{j}" for j, (_, dt) in enumerate(typed.outputs)]
    body, last = [], None
    for op in typed.ops:
        comment = cexpr.comment(op.loc)
        if comment and comment != last:
            body.append(f"    {comment}")
            last = comment
        exprs, scal = [], []
        for (name, dt), lt in zip(op.args, op.loop[:-1]):
            if name == "const":
                exprs.append(cexpr.literal(dt, lt))
                scal.append(True)
            else:
                exprs.append(cexpr.cast(name, dt, lt))
                scal.append(scalar[name])
        expr = cexpr.op_expr(op, exprs, scal, helpers, typed.kernel.fastmath)
        scalar[op.target] = all(scal)
        body.append(f"    const {ctype(op.loop[-1])} {op.target} = {expr};")
    for j, (name, _) in enumerate(typed.outputs):
        body.append(f"    *out{j} = {name};")
    text = (f"{DEVICE} void {cname}_element("
            f"{', '.join(params)}) {{\n" + "\n".join(body) + "\n}\n")
    return text, cexpr.helpers_text(helpers, qualifier=DEVICE)


def _operand_params(typed: Typed, pointers):
    out = []
    for j, inp in enumerate(typed.inputs):
        T = ctype(inp.dtype)
        by_value = inp.scalar and j not in pointers
        out.append((T, f"s{j}") if by_value else (f"const {T} *__restrict__", f"p{j}"))
    for j, (_, dt) in enumerate(typed.outputs):
        out.append((f"{ctype(dt)} *__restrict__", f"q{j}"))
    return out


def _signature(name, params):
    return (f'extern "C" __global__ void {name}(' +
            ", ".join(f"{t} {n}" for t, n in params)
            + ")")


def _call(typed, cname, index_of, pointers):
    args = [(f"p{j}[0]" if j in pointers else f"s{j}") if inp.scalar
            else f"p{j}[{index_of(j)}]" for j, inp in enumerate(typed.inputs)]
    args += [f"&q{j}[i]" for j in range(len(typed.outputs))]
    return f"{cname}_element({', '.join(args)});"


def _grid_loop(I):
    return (f"    const {I} step = ({I})blockDim.x * ({I})gridDim.x;\n"
            f"    for ({I} i = ({I})blockIdx.x * ({I})blockDim.x + ({I})threadIdx.x; "
            f"i < n; i += step) {{\n")


def render(typed: Typed, cname: str, pointer_scalars=()) -> Module:
    """The CUDA module of ``typed``; its entry points are named ``cname_<variant>``.
    ``pointer_scalars``: inputs of one element passed as a device pointer (a size-1
    array on the device: reading it on the host would synchronize), not by value."""
    pointers = frozenset(pointer_scalars)
    element, helpers = _element(typed, cname)
    ops = _operand_params(typed, pointers)
    arrays = [j for j, inp in enumerate(typed.inputs) if not inp.scalar]
    parts, kernels = [], {}
    for bits, I in ((32, "int32_t"), (64, "int64_t")):
        name = f"{cname}_contig{bits}"
        params = (("int64_t", "n_"),) + tuple(ops)
        kernels[f"contig{bits}"] = Entry(name, params)
        parts.append(
            f"{_signature(name, params)} {{\n"
            f"    const {I} n = ({I})n_;\n" + _grid_loop(I) +
            f"        {_call(typed, cname, lambda j: 'i', pointers)}\n"
            "    }\n}\n")
        name = f"{cname}_strided{bits}"
        params = (("int64_t", "n_"), ("int32_t", "ndim"),
                  ("const int64_t *__restrict__", "shape"),
                  ("const int64_t *__restrict__", "st")) + tuple(ops)
        kernels[f"strided{bits}"] = Entry(name, params)
        offsets = "".join(f"        {I} o{j} = 0;\n" for j in arrays)
        steps = "".join(f"            o{j} += c * ({I})st[{j} * ndim + d];\n" for j in arrays)
        parts.append(
            f"{_signature(name, params)} {{\n"
            f"    const {I} n = ({I})n_;\n" + _grid_loop(I) + offsets +
            f"        {I} rest = i;\n"
            "        for (int32_t d = ndim - 1; d >= 0; d--) {\n"
            f"            const {I} extent = ({I})shape[d];\n"
            f"            const {I} c = rest % extent;\n"
            "            rest /= extent;\n" + steps +
            "        }\n"
            f"        {_call(typed, cname, lambda j: f'o{j}', pointers)}\n"
            "    }\n}\n")
    vec_types, vec_kernel, entry = _vectorized(typed, cname, ops, pointers)
    kernels["vec4"] = entry
    parts.insert(0, vec_kernel)
    head = (f"/* astjax CUDA kernel {typed.kernel.name}: {len(typed.ops)} statements of a "
            "fused group */\n")
    text = (head + PRELUDE + helpers + "\n" + vec_types + element + "\n" +
            "\n".join(parts))
    return Module(text, kernels)


VEC = 4     # elements per thread and step of the vectorized variant


def vec_alignment(dtype) -> int:
    """Bytes a pointer must be aligned to for the ``vec4`` variant's loads."""
    import numpy as np
    return min(16, VEC * np.dtype(dtype).itemsize)


def _vec_type(dt) -> str:
    return f"astjax_vec{VEC}_{dt.kind}{dt.itemsize * 8}"


def _vectorized(typed, cname, ops, pointers):
    """``<name>_vec4``: contiguous operands read and written ``VEC`` elements at a time
    (one 16-byte load for float32: ``ld.global.v4``) when every array pointer is
    aligned (``vec_alignment``) and ``n`` is a multiple of ``VEC``; 32-bit indices."""
    dts = {inp.dtype for inp in typed.inputs if not inp.scalar}
    dts |= {dt for _, dt in typed.outputs}
    types = "".join(
        f"typedef struct __align__({vec_alignment(dt)}) {{ {ctype(dt)} e[{VEC}]; }} "
        f"{_vec_type(dt)};\n" for dt in sorted(dts, key=lambda d: d.str))
    loads, args = [], []
    for j, inp in enumerate(typed.inputs):
        if inp.scalar:
            args.append(f"p{j}[0]" if j in pointers else f"s{j}")
            continue
        V = _vec_type(inp.dtype)
        loads.append(f"        const {V} a{j} = ((const {V} *)p{j})[g];\n")
        args.append(f"a{j}.e[k]")
    results = "".join(f"        {_vec_type(dt)} r{j};\n"
                      for j, (_, dt) in enumerate(typed.outputs))
    args += [f"&r{j}.e[k]" for j in range(len(typed.outputs))]
    stores = "".join(f"        (({_vec_type(dt)} *)q{j})[g] = r{j};\n"
                     for j, (_, dt) in enumerate(typed.outputs))
    name = f"{cname}_vec{VEC}"
    params = (("int64_t", "n_"),) + tuple(ops)
    text = (f"{_signature(name, params)} {{\n"
            f"    const int32_t groups = (int32_t)(n_ / {VEC});\n"
            "    const int32_t step = (int32_t)blockDim.x * (int32_t)gridDim.x;\n"
            "    for (int32_t g = (int32_t)blockIdx.x * (int32_t)blockDim.x + "
            "(int32_t)threadIdx.x; g < groups; g += step) {\n" + "".join(loads) + results +
            f"        for (int k = 0; k < {VEC}; k++)\n"
            f"            {cname}_element({', '.join(args)});\n" + stores +
            "    }\n}\n")
    return types, text, Entry(name, params)


def cuda_name(kernel) -> str:
    return "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in kernel.name)


# ------------------------------------------------------------------ reductions

_REDUCE = {"add": "sum", "maximum": "max", "minimum": "min"}


def reduction(dtype, ufunc: str = "add") -> Module:
    """A block-level tree reduction of ``n`` elements of ``dtype`` with ``ufunc``
    (``add``, ``maximum``, ``minimum``; NaN propagates as in NumPy).

    Entry ``partial``: each block folds its grid-stride share into a register, the
    block's threads combine theirs in shared memory (halving strides between
    ``__syncthreads``), and thread 0 writes the block's value; the host launches it
    again with one block over the partial values.  Two passes and no atomics, so the
    result does not depend on scheduling (launch with a power-of-two block of at most
    ``BLOCK`` threads)."""
    import numpy as np
    from astjax.kernels.ir import TypedOp
    dt = np.dtype(dtype)
    T = ctype(dt)
    if ufunc not in _REDUCE or dt.kind not in "iuf":
        from astjax.kernels.ir import Unsupported
        raise Unsupported(f"reduction {ufunc} of {dt}")
    helpers: set = set()
    op = TypedOp("r", ufunc, (("a", dt), ("b", dt)), (dt, dt, dt))
    combine = cexpr.op_expr(op, ["a", "b"], [False, False], helpers)
    if ufunc == "add":
        identity = cexpr.literal(0, dt)
    elif dt.kind == "f":
        identity = cexpr.literal(float("-inf") if ufunc == "maximum" else float("inf"), dt)
    else:
        info = np.iinfo(dt)
        identity = cexpr.literal(int(info.min if ufunc == "maximum" else info.max), dt)
    name = f"astjax_{_REDUCE[ufunc]}_{dt.kind}{dt.itemsize * 8}"
    params = (("int64_t", "n"), (f"const {T} *__restrict__", "x"),
              (f"{T} *__restrict__", "partial"))
    text = (f"/* astjax CUDA reduction: {ufunc} of {dt} */\n" + PRELUDE +
            cexpr.helpers_text(helpers, qualifier=DEVICE) + f"""
{DEVICE} {T} {name}_combine({T} a, {T} b) {{
    return {combine};
}}

{_signature(name, params)} {{
    __shared__ {T} buf[{BLOCK}];
    const unsigned t = threadIdx.x;
    {T} acc = {identity};
    const int64_t step = (int64_t)blockDim.x * (int64_t)gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + t; i < n; i += step)
        acc = {name}_combine(acc, x[i]);
    buf[t] = acc;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {{
        if (t < s) buf[t] = {name}_combine(buf[t], buf[t + s]);
        __syncthreads();
    }}
    if (t == 0) partial[blockIdx.x] = buf[0];
}}
""")
    return Module(text, {"partial": Entry(name, params)})


# ---------------------------------------------------------------- indexed kernels

def _decompose(flat, axes, dims, ind, rest="rest", narrow=False):
    """Lines splitting ``flat`` (C order over ``axes``) into ``i<axis>`` indices
    (``narrow``: in 32-bit unsigned arithmetic, a few instructions where a 64-bit
    division is a long software sequence on the GPU; the caller knows it fits)."""
    if narrow:
        lines = [f"{ind}uint32_t {rest} = {flat};"]
        for n, a in enumerate(reversed(axes)):
            if n == len(axes) - 1:
                lines.append(f"{ind}const int64_t i{a} = (int64_t){rest};")
            else:
                lines += [f"{ind}const int64_t i{a} = (int64_t)({rest} % (uint32_t)"
                          f"{dims[a]});", f"{ind}{rest} /= (uint32_t){dims[a]};"]
        if not axes:
            lines.append(f"{ind}(void){rest};")
        return lines
    lines = [f"{ind}int64_t {rest} = {flat};"]
    for n, a in enumerate(reversed(axes)):
        if n == len(axes) - 1:
            lines.append(f"{ind}const int64_t i{a} = {rest};")
        else:
            lines += [f"{ind}const int64_t i{a} = {rest} % {dims[a]};",
                      f"{ind}{rest} /= {dims[a]};"]
    if not axes:
        lines.append(f"{ind}(void){rest};")
    return lines


GRID32 = ("    const uint32_t step = blockDim.x * gridDim.x;\n"
          "    for (uint32_t flat = blockIdx.x * blockDim.x + threadIdx.x; "
          "flat < (uint32_t)n; flat += step) {\n")


def _tree(A, combine, store, ind="    "):
    """A block's shared-memory tree over ``buf`` (``acc`` per thread): halving strides
    between barriers; thread 0 runs ``store`` on ``buf[0]``."""
    return (f"{ind}buf[t] = acc;\n{ind}__syncthreads();\n"
            f"{ind}for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {{\n"
            f"{ind}    if (t < s) {{ {combine('buf[t]', 'buf[t + s]')} }}\n"
            f"{ind}    __syncthreads();\n{ind}}}\n"
            f"{ind}if (t == 0) {store}\n")


def render_indexed(typed, cname: str, baked=(), pointer_scalars=()) -> Module:
    """CUDA for an indexed kernel (``ir.TypedIndexed``: slices, transposes, pads, casts,
    a reduction ending the group).  The element computation is the C renderer's
    (``c._Emitter``: reads through the IR's index maps, guarded pad reads); around it:

    * no reduction: ``<name>_indexed``, a grid-stride loop over the flat output index,
      split into coordinates with the run-time dims;
    * a reduction keeping some axes: ``<name>_indexed``, one thread per result
      element looping over the reduced axes (few reduced elements, or many results
      whose threads read neighbouring addresses), and ``<name>_rows``, one block per
      result element: its threads stride over the reduced elements and combine in a
      shared-memory tree (a large reduced extent: ``cuda_runtime`` picks);
    * a reduction over every axis: ``<name>_partial``, a grid-stride share per thread
      combined by a block-level tree reduction in shared memory (one value per block),
      then ``<name>_final``, one block combining the blocks' values.

    Run-time integers come in ``P`` (``typed.params`` order; those in ``baked`` are
    literals); 0-d inputs by value, or through a pointer for ``pointer_scalars``."""
    from astjax.kernels import c as c_render
    pointers = frozenset(pointer_scalars)
    em = c_render._Emitter(typed, baked)
    red = typed.reduce
    dom = red.source if red is not None else typed.outputs[0][0]
    rank = typed.values[dom][1]
    dims = [em.p(f"dim_{dom}_{a}") for a in range(rank)]
    idx = tuple(f"i{a}" for a in range(rank))
    ops = []
    for j, inp in enumerate(typed.inputs):
        T = ctype(inp.dtype)
        if inp.ndim == 0 and j not in pointers:
            ops.append((T, f"s{j}"))
        else:
            ops.append((f"const {T} *__restrict__", f"p{j}"))
    for j, (_, dt) in enumerate(typed.outputs):
        ops.append((f"{ctype(dt)} *__restrict__", f"q{j}"))
    decl = [f"    const int64_t {n} = P[{k}];" for k, n in enumerate(typed.params)
            if n not in em.baked]
    decl += [f"    const {ctype(inp.dtype)} s{j} = p{j}[0];"
             for j, inp in enumerate(typed.inputs) if inp.ndim == 0 and j in pointers]
    decl.append("    (void)P;")
    head_params = (("int64_t", "n"), ("const int64_t *__restrict__", "P"))
    grid = ("    const int64_t step = (int64_t)blockDim.x * (int64_t)gridDim.x;\n"
            "    for (int64_t flat = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; "
            "flat < n; flat += step) {\n")
    parts, kernels = [], {}
    if red is None:
        results = [em.value(v, idx) for v, _ in typed.outputs]
        body = _decompose("flat", list(range(rank)), dims, "        ")
        body += ["        " + line for line in em.lines]
        body += [f"        q{j}[flat] = {r};" for j, r in enumerate(results)]
        name = f"{cname}_indexed"
        params = head_params + tuple(ops)
        kernels["indexed"] = Entry(name, params)
        parts.append(f"{_signature(name, params)} {{\n" + "\n".join(decl) + "\n" + grid +
                     "\n".join(body) + "\n    }\n}\n")
        # the same with 32-bit flat index math (cuda_runtime picks it when n and the
        # grid's last stride fit in 31 bits); reads still index in 64 bits
        body32 = _decompose("flat", list(range(rank)), dims, "        ", narrow=True)
        body32 += body[len(_decompose("flat", list(range(rank)), dims, "        ")):]
        name = f"{cname}_indexed32"
        kernels["indexed32"] = Entry(name, params)
        parts.append(f"{_signature(name, params)} {{\n" + "\n".join(decl) + "\n" +
                     GRID32 + "\n".join(body32) + "\n    }\n}\n")
    else:
        A, init, combine, final = c_render._reduce_parts(red)
        src = em.value(red.source, idx)
        kept = [a for a in range(rank) if a not in red.axes]
        count = " * ".join(dims[a] for a in red.axes)
        if kept:
            body = _decompose("flat", kept, dims, "        ")
            body.append(f"        {A} acc = {init};")
            ind = "        "
            for a in red.axes:
                body.append(f"{ind}for (int64_t i{a} = 0; i{a} < {dims[a]}; i{a}++) {{")
                ind += "    "
            body += [ind + line for line in em.lines] + [ind + combine("acc", src)]
            for _ in red.axes:
                ind = ind[:-4]
                body.append(ind + "}")
            body.append(f"        q0[flat] = {final('acc', count)};")
            name = f"{cname}_indexed"
            params = head_params + tuple(ops)
            kernels["indexed"] = Entry(name, params)
            parts.append(f"{_signature(name, params)} {{\n" + "\n".join(decl) + "\n" +
                         grid + "\n".join(body) + "\n    }\n}\n")
            # one block per result element (n: the number of results)
            body = _decompose("flat", kept, dims, "        ")
            body.append(f"        {A} acc = {init};")
            body.append("        for (int64_t r = t; r < reduced; r += blockDim.x) {")
            body += _decompose("r", list(red.axes), dims, "            ", "rrest")
            body += ["            " + line for line in em.lines]
            body += ["            " + combine("acc", src), "        }"]
            name = f"{cname}_rows"
            kernels["rows"] = Entry(name, params)
            parts.append(
                f"{_signature(name, params)} {{\n" + "\n".join(decl) + "\n" +
                f"    __shared__ {A} buf[{BLOCK}];\n    const unsigned t = threadIdx.x;\n"
                f"    const int64_t reduced = {count};\n"
                "    for (int64_t flat = blockIdx.x; flat < n; flat += gridDim.x) {\n" +
                "\n".join(body) + "\n" +
                _tree(A, combine, f"q0[flat] = {final('buf[0]', count)};", "        ") +
                "        __syncthreads();     /* buf is the next result's */\n"
                "    }\n}\n")
        else:
            def tree(store):
                return _tree(A, combine, store)
            body = _decompose("flat", list(range(rank)), dims, "        ")
            body += ["        " + line for line in em.lines] + ["        " + combine("acc", src)]
            name = f"{cname}_partial"
            params = head_params + tuple(ops[:-1]) + ((f"{A} *__restrict__", "part"),)
            kernels["partial"] = Entry(name, params)
            parts.append(f"{_signature(name, params)} {{\n" + "\n".join(decl) + "\n" +
                         f"    __shared__ {A} buf[{BLOCK}];\n    const unsigned t = "
                         f"threadIdx.x;\n    {A} acc = {init};\n" + grid +
                         "\n".join(body) + "\n    }\n" +
                         tree("part[blockIdx.x] = buf[0];") + "}\n")
            name = f"{cname}_final"
            params = (("int64_t", "nparts"), ("const int64_t *__restrict__", "P"),
                      (f"const {A} *__restrict__", "part"), ops[-1])
            kernels["final"] = Entry(name, params)
            pdecl = [line for line in decl if " = P[" in line or "(void)P" in line]
            parts.append(f"{_signature(name, params)} {{\n" + "\n".join(pdecl) + "\n" +
                         f"    __shared__ {A} buf[{BLOCK}];\n    const unsigned t = "
                         f"threadIdx.x;\n    {A} acc = {init};\n"
                         "    for (int64_t k = t; k < nparts; k += blockDim.x) "
                         f"{{ {combine('acc', 'part[k]')} }}\n" +
                         tree(f"q0[0] = {final('buf[0]', count)};") + "}\n")
    what = "reduction" if red is not None else "loop fusion"
    head = (f"/* astjax CUDA kernel {typed.kernel.name}: {len(typed.kernel.ops)} "
            f"statements ({what} over the {'source' if red else 'output'} index) */\n")
    text = (head + PRELUDE + cexpr.helpers_text(em.helpers, qualifier=DEVICE) + "\n" +
            "\n".join(parts))
    return Module(text, kernels)
