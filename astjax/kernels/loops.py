"""Compiled loop drivers: a loop whose body is only kernel calls runs in one C call.

A ``lax.scan`` or ``fori_loop`` whose step fused into kernels still runs as a Python
``for`` loop on the host: per step it indexes ``xs``, unpacks the carry, calls each
kernel (a plan lookup, a ctypes call), builds the new carry and appends the step's
outputs, a dozen microseconds of interpreter work per step.  When the body (after
fusion) is only that -- kernel calls, tuples, constant indexing of tuples and arrays,
``xs`` at the step, ``compact`` and the append of ``ys`` -- ``rewrite`` swaps the loop
for a call of a ``LoopDriver``, and keeps the loop as the ``else`` branch:

    scan_result = scan_0(carry, ys_steps, 0, n_steps, wavelet, dx, ...)
    if scan_result[0]:
        carry = scan_result[1]
        ys = scan_result[2]
    else:
        for i in range(0, n_steps): ...            (the loop, unchanged)
        ys = rt.tree_stack(ys_steps, False)

The driver interprets the first steps in Python, statement by statement as the loop
would (the same kernel calls, indexing and tuples), until a step calls every kernel
with the plan of the step before and the carries keep their dtypes, shapes and
strides; from then on every step is the same sequence of compiled calls, so the
remaining steps run in one call of a C function rendered from the body
(``render_c``): carries are pointers ping-ponged among preallocated result buffers (a
kernel writes into a buffer no carry holds), ``xs`` is read by pointer, and each
step's ``ys`` are copied straight into their row of the stacked output.  Whatever the
driver cannot take (``xs`` or carries that are not plain arrays, a kernel that ran
with NumPy, fewer than ``MIN_STEPS`` steps, NumPy error states that raise) leaves the
loop to Python: up front by returning ``(False, None, None)``, later by interpreting
the remaining steps.  Values are those of the loop: the C function makes the same
kernel calls on the same operands.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass, field

import numpy as np

from astjax import core, runtime as rt
from astjax.core import Const, External, Index, Prim, SliceAtom, Var
from astjax.kernels import compile as cc
from astjax.kernels.runtime import DATA_OFFSET, KernelCall, numpy_raises
from astjax.runtime_fusion import num_threads

# fewer steps than this: the Python loop (the driver's start-up is not worth it)
MIN_STEPS = 4
# steps interpreted in Python looking for two alike before the rest runs as C
MAX_WARMUP = 4
# loops and steps the C drivers ran (what tests check was compiled)
STATS = {"loops": 0, "steps": 0}


# ---------------------------------------------------------------- the step program

@dataclass
class Program:
    """A loop body as operations on named values (see ``match``).

    ``ops``, in body order: ("xs", t, xs, index, last) ``t = xs[index]`` (index: the
    loop variable, or ``last - i`` when ``last`` is given); ("reverse", t, last);
    ("item", t, tuple, k); ("view", t, array, Index) with an index fixed in the loop;
    ("kernel", t, KernelCall, operands); ("tuple", t, names); ("copy", t, name);
    ("compact", t, name); ("append", None, Var or Const(None)) of ``ys``.
    """
    loop_var: str
    ops: list
    carried: list                  # loop-carried names (their value enters each step)
    invariants: list               # names read from outside the loop
    ys_list: str | None            # the list the body appends ys to
    loc: object = None
    structure: dict = field(default_factory=dict)   # name -> "ptr" | "inv" | tuple
    symbols: dict = field(default_factory=dict)     # name -> symbolic value (resolve)
    at: list = field(default_factory=list)          # per op: its operands' symbols
    carry_start: dict = field(default_factory=dict)   # carried name -> entering symbol
    y_symbol: object = None
    carry_leaves: list = field(default_factory=list)   # (carried name, path)
    y_leaves: list = field(default_factory=list)       # symbols of ys leaves
    new_carry: list = field(default_factory=list)      # symbols of the carries after
    kernel_ops: list = field(default_factory=list)


def _range_bounds(it):
    """(start, stop) atoms of ``range(start, stop)``, or None."""
    if not (isinstance(it, Prim) and it.prim == "range" and len(it.args) == 3):
        return None
    start, stop, step = it.args
    if isinstance(stop, Const) and stop.value is None:
        start, stop = Const(0), start        # range(n)
    if not (isinstance(step, Const) and step.value in (None, 1)):
        return None
    if not all(isinstance(a, (Var, Const)) for a in (start, stop)):
        return None
    return start, stop


def match(loop: core.For, kernel_refs: dict) -> Program | None:
    """The step program of ``loop`` when its body is only kernel calls (values of
    ``kernel_refs``: the namespace names of ``KernelCall`` objects) and plumbing."""
    if loop.exit_flags or _range_bounds(loop.iter) is None:
        return None
    written = core.all_writes(loop.body) | {loop.target}
    ops, defined, carried, invariants = [], {loop.target}, [], []
    ys_list = None
    reverse = {}

    def use(atom):
        """Record a read of ``atom`` (a Const, or a Var: body value, carried,
        invariant); False for anything else."""
        if isinstance(atom, Const):
            return True
        if not isinstance(atom, Var):
            return False
        n = atom.name
        if n in defined:
            return True
        if n in written:                 # read before written: loop-carried
            if n not in carried:
                carried.append(n)
        elif n not in invariants:
            invariants.append(n)
        return True

    for s in loop.body:
        if isinstance(s, core.Comment):
            continue
        if s is None or getattr(s, "target", None) is None:
            return None
        if isinstance(s, External):
            if not (isinstance(s.func, Var) and s.func.name in kernel_refs and
                    not s.kwargs and s.method is None and all(use(a) for a in s.args)):
                return None
            ops.append(("kernel", s.target, kernel_refs[s.func.name], list(s.args)))
        elif isinstance(s, core.Copy):
            if not (isinstance(s.value, Var) and use(s.value)):
                return None
            ops.append(("copy", s.target, s.value.name))
        elif isinstance(s, Prim):
            a = s.args
            if s.prim == "tree_index" and len(a) == 2 and isinstance(a[0], Var) and \
                    a[0].name not in written and isinstance(a[1], Var) and \
                    (a[1].name == loop.target or a[1].name in reverse):
                use(a[0])
                ops.append(("xs", s.target, a[0].name, a[1].name, reverse.get(a[1].name)))
            elif s.prim == "subtract" and len(a) in (2, 3) and isinstance(a[0], Var) and \
                    a[0].name not in written and a[1] == Var(loop.target) and \
                    a[2:] in ([], [Const(None)]) and not s.kwargs:
                use(a[0])
                reverse[s.target] = a[0].name
                ops.append(("reverse", s.target, a[0].name))
            elif s.prim == "getitem" and len(a) == 2 and isinstance(a[0], Var) and \
                    a[0].name in written and isinstance(a[1], Index):
                use(a[0])
                it = a[1].items
                if len(it) == 1 and not a[1].tuple_form and isinstance(it[0], Const) and \
                        type(it[0].value) is int:
                    ops.append(("item", s.target, a[0].name, it[0].value))
                elif all(not (isinstance(x, Var) and x.name in written)
                         for x in a[1].atoms()):
                    for x in a[1].atoms():
                        use(x)
                    ops.append(("view", s.target, a[0].name, a[1]))
                else:
                    return None
            elif s.prim == "make_tuple" and len(a) == 1 and isinstance(a[0], tuple) and \
                    all(isinstance(x, Var) for x in a[0]):
                for x in a[0]:
                    use(x)
                ops.append(("tuple", s.target, [x.name for x in a[0]]))
            elif s.prim == "compact" and len(a) == 1 and isinstance(a[0], Var):
                use(a[0])
                ops.append(("compact", s.target, a[0].name))
            elif s.prim == "append" and len(a) == 2 and a[0] == Var(s.target) and \
                    ys_list is None and (isinstance(a[1], Var) or a[1] == Const(None)):
                use(a[1])
                ys_list = s.target
                ops.append(("append", None, a[1]))
                continue                  # (the list is the driver's, not a value)
            else:
                return None
        else:
            return None
        defined.add(s.target)
    if ys_list is not None:
        if ys_list in carried:
            carried.remove(ys_list)
        if ys_list in invariants or ys_list in defined:
            return None
    if loop.target in carried or not any(o[0] == "kernel" for o in ops):
        return None
    prog = Program(loop.target, ops, carried, invariants, ys_list, loc=loop.loc)
    prog.kernel_ops = [o for o in ops if o[0] == "kernel"]
    return prog if resolve(prog) else None


def resolve(prog) -> bool:
    """Each value's structure and symbol: ("carry", j) a carry leaf entering the step,
    ("xs", k), ("view", k), ("out", kernel op, result) pointers, "inv" an invariant
    operand, lists for tuples.  False when a value is not of a form the C driver
    takes (a tuple where an array must be, a kernel operand that changes per step
    without being a pointer...).  Carried values take the structure the body gives
    them (iterated to a fixed point); ``x[k]`` of an array is a view."""
    shapes = {n: "ptr" for n in prog.carried}
    original = prog.ops
    for _ in range(6):
        ops = list(original)
        sym = {n: "inv" for n in prog.invariants}
        leaves = []
        for n in prog.carried:
            start = len(leaves)
            leaves += [(n, p) for p in _paths(shapes[n])]
            sym[n] = _rebuild(shapes[n], iter(("carry", j) for j in
                                              range(start, len(leaves))))
        start = {n: sym[n] for n in prog.carried}
        counts = {"xs": 0, "view": 0}
        y_leaves, y_symbol, at = [], None, []
        for k_op, op in enumerate(ops):
            if op[0] == "item" and _is_ptr(sym.get(op[2])):
                op = ops[k_op] = ("view", op[1], op[2], Index((Const(op[3]),)))
            kind, t = op[0], op[1]
            at.append(None)
            if kind == "kernel":
                operands = [None if isinstance(a, Const) else sym.get(a.name) for a in op[3]]
                if not all(x is None or x == "inv" or _is_ptr(x) for x in operands):
                    return False
                k = prog.kernel_ops.index(op)
                n_out = len(op[2].kernel.outputs)
                sym[t] = ("out", k, 0) if n_out == 1 else [("out", k, r) for r in range(n_out)]
                at[-1] = (operands, _flatten(sym[t]))
            elif kind in ("xs", "view"):
                base = sym.get(op[2])
                if kind == "view" and not _is_ptr(base):
                    return False
                sym[t] = (kind, counts[kind])
                counts[kind] += 1
                at[-1] = (sym[t], base)
            elif kind == "reverse":
                sym[t] = "index"
            elif kind == "item":
                src = sym.get(op[2])
                if not isinstance(src, list) or not 0 <= op[3] < len(src):
                    return False
                sym[t] = src[op[3]]
            elif kind == "tuple":
                if not all(_is_tree(sym.get(x)) for x in op[2]):
                    return False
                sym[t] = [sym[x] for x in op[2]]
            elif kind in ("copy", "compact"):
                if not _is_tree(sym.get(op[2])):
                    return False
                sym[t] = sym[op[2]]
            elif kind == "append" and isinstance(op[2], Var):
                if not _is_tree(sym.get(op[2].name)):
                    return False
                y_symbol = sym[op[2].name]
                y_leaves = _flatten(y_symbol)
        new_shapes = {n: _shape_of(sym[n]) for n in prog.carried}
        if new_shapes == shapes:
            prog.ops = ops
            prog.symbols, prog.carry_leaves, prog.y_leaves = sym, leaves, y_leaves
            prog.at, prog.carry_start, prog.y_symbol = at, start, y_symbol
            prog.new_carry = [x for n in prog.carried for x in _flatten(sym[n])]
            # the carries after a step are results or carries (arrays the host can
            # hold), never views into something else
            return all(x[0] in ("out", "carry") for x in prog.new_carry)
        shapes = new_shapes
    return False


def _is_ptr(s):
    return isinstance(s, tuple) and s[0] in ("carry", "xs", "view", "out")


def _is_tree(s):
    return _is_ptr(s) or (isinstance(s, list) and all(_is_tree(x) for x in s))


def _shape_of(s):
    return "ptr" if _is_ptr(s) else [_shape_of(x) for x in s]


def _paths(shape, prefix=()):
    if shape == "ptr":
        return [prefix]
    out = []
    for k, x in enumerate(shape):
        out += _paths(x, prefix + (k,))
    return out


def _rebuild(shape, it):
    if shape == "ptr":
        return next(it)
    return [_rebuild(x, it) for x in shape]


def _flatten(s):
    if _is_ptr(s):
        return [s]
    out = []
    for x in s:
        out += _flatten(x)
    return out


# -------------------------------------------------------------- the host code rewrite

def rewrite(fn, kernel_refs: dict, name_of) -> list:
    """Swap each loop of ``fn`` that ``match`` takes for its driver (module doc);
    returns the drivers.  ``name_of(obj, hint)`` names an object in the namespace."""
    readers: dict = {}
    for s in core.walk(fn.body):
        names = list(core.reads(s))
        if isinstance(s, core.For) and isinstance(s.iter, Prim):
            names += core.atom_vars(s.iter.args)
        for n in names:
            readers.setdefault(n, set()).add(id(s))
    drivers: list = []
    _rewrite_block(fn.body, kernel_refs, name_of, readers, drivers)
    return drivers


def _rewrite_block(block, kernel_refs, name_of, readers, drivers):
    k = 0
    while k < len(block):
        s = block[k]
        for b in core.child_blocks(s):
            _rewrite_block(b, kernel_refs, name_of, readers, drivers)
        if isinstance(s, core.For) and \
                _rewrite_loop(block, k, kernel_refs, name_of, readers, drivers):
            k += 4                   # (the driver's statements)
            continue
        k += 1


def _rewrite_loop(block, k, kernel_refs, name_of, readers, drivers):
    loop = block[k]
    prog = match(loop, kernel_refs)
    if prog is None:
        return False
    stack = block[k + 1] if k + 1 < len(block) else None
    if prog.ys_list is not None:
        if not (isinstance(stack, Prim) and stack.prim == "tree_stack" and
                stack.args[0] == Var(prog.ys_list) and isinstance(stack.args[1], Const)):
            return False
    else:
        stack = None
    inside = {id(s) for s in core.walk(loop.body)} | {id(loop)}
    # the body's own values are read nowhere else (ys only by the stacking after it)
    for n in core.all_writes(loop.body) | {loop.target}:
        if n in prog.carried:
            continue
        allowed = inside | ({id(stack)} if n == prog.ys_list else set())
        if not readers.get(n, set()) <= allowed:
            return False
    start, stop = _range_bounds(loop.iter)
    reverse = bool(stack.args[1].value) if stack is not None else False
    hint = "scan" if stack is not None else "loop"
    driver = LoopDriver(prog, reverse)
    ref = name_of(driver, f"{hint}_driver")
    driver.set_name(ref)
    drivers.append(driver)
    res, ok, trips = f"{ref}_result", f"{ref}_ok", f"{ref}_trips"
    ys_arg = Var(prog.ys_list) if prog.ys_list is not None else Const(None)
    loc = loop.loc
    # (called only when the loop runs: what it reads may be defined only then)
    call = [External(res, Var(ref), [*(Var(n) for n in prog.carried), ys_arg, start, stop,
                                     *(Var(n) for n in prog.invariants)], loc=loc),
            Prim(ok, "getitem", [Var(res), Index((Const(0),))], loc=loc)]
    then = [Prim(n, "getitem", [Var(res), Index((Const(1 + j),))], loc=loc)
            for j, n in enumerate(prog.carried)]
    if stack is not None:
        then.append(Prim(stack.target, "getitem",
                         [Var(res), Index((Const(1 + len(prog.carried)),))], loc=loc))
    orelse = [loop] + ([stack] if stack is not None else [])
    block[k:k + len(orelse)] = [
        Prim(trips, "range", [start, stop, Const(None)], loc=loc),
        core.Copy(ok, Const(False), loc=loc),
        core.If(Var(trips), call, [], loc=loc),
        core.If(Var(ok), then, orelse, loc=loc)]
    return True


# ---------------------------------------------------------------------- the C driver

_C_WORDS = frozenset("""auto break case char const continue default do double else enum
extern float for goto if inline int long register restrict return short signed sizeof
static struct switch typedef union unsigned void volatile while L live ptrs row start
stop""".split())


def _cvar(name):
    name = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name)
    return name + "_" if name in _C_WORDS or name.startswith(("astjax", "carry_")) else name


C_HEADER = r"""#include <stdint.h>
#include <string.h>
typedef int (*astjax_indexed_fn)(const int64_t *P, int32_t nthreads, void **ptrs);
typedef int (*astjax_flat_fn)(int64_t n, int32_t ndim, const int64_t *shape,
                              const int64_t *st, int32_t contiguous, int32_t nthreads,
                              void **ptrs);
/* what the host hands the driver (kernels/loops.py: LoopDriver._run_c) */
typedef struct {
    void **inv;               /* loop-invariant kernel operands */
    char **xs;                /* scan input k at step i: xs[k] + i * xs_stride[k] */
    const int64_t *xs_stride;
    const int64_t *offset;    /* byte offset of each view in the array it indexes */
    char **carry;             /* the carries: in before step start, out after stop - 1 */
    char **pool;              /* kernel result r's buffers: pool[r * pool_size + j] */
    int64_t pool_size;
    void **fn;                /* kernel call k: its compiled function, */
    const int64_t **lead;     /* its leading arguments, its threads */
    const int32_t *nthreads;
    char **ys;                /* ys leaf k of step i: row ys_row0 + i * ys_dir of ys[k] */
    const int64_t **ys_layout;  /* per leaf: ndim, item bytes, row bytes, shape, strides */
    int64_t ys_row0, ys_dir;
} astjax_loop;

/* a result buffer no live carry holds (a pool has one more buffer than carries) */
static char *astjax_free(char **pool, int64_t n, char *const *live, int nlive) {
    for (int64_t j = 0; j < n; j++) {
        int used = 0;
        for (int k = 0; k < nlive; k++) used |= pool[j] == live[k];
        if (!used) return pool[j];
    }
    return 0;
}

static void astjax_copy_dims(char **dst, const char *src, int64_t d, const int64_t *lay) {
    const int64_t ndim = lay[0], item = lay[1];
    if (d == ndim) {
        memcpy(*dst, src, (size_t)item);
        *dst += item;
        return;
    }
    for (int64_t k = 0; k < lay[3 + d]; k++)
        astjax_copy_dims(dst, src + k * lay[3 + ndim + d], d + 1, lay);
}

/* one step's y (any strides) into its contiguous row of the stacked output */
static void astjax_put(char *row, const char *src, const int64_t *lay) {
    int contiguous = 1;
    int64_t expect = lay[1];
    for (int64_t d = lay[0] - 1; d >= 0; d--) {
        if (lay[3 + d] != 1 && lay[3 + lay[0] + d] != expect) contiguous = 0;
        expect *= lay[3 + d];
    }
    if (contiguous) memcpy(row, src, (size_t)lay[2]);
    else astjax_copy_dims(&row, src, 0, lay);
}
"""


def render_c(prog: Program, cname: str) -> str:
    """The driver of ``prog`` as C: steps [start, stop) of the loop body."""
    names = {}                             # symbol -> its C expression
    for j in range(len(prog.carry_leaves)):
        names[("carry", j)] = f"carry_{j}"
    loc = prog.loc
    where = f"{loc.filename.rsplit('/', 1)[-1]}:{loc.lineno}" if loc else "a loop"
    i = _cvar(prog.loop_var)
    ncarry = len(prog.carry_leaves)
    out = [f"/* the loop of {where}: steps [start, stop) of its body in one call, the",
           "   kernel calls of the Python loop made on pointers */",
           f"int {cname}(int64_t start, int64_t stop, astjax_loop *L) {{"]
    emit = out.append
    for j in range(ncarry):
        emit(f"    char *carry_{j} = L->carry[{j}];")
    emit(f"    for (int64_t {i} = start; {i} < stop; {i}++) {{")
    emit(f"        char *const live[{max(ncarry, 1)}] = "
         f"{{{', '.join(f'carry_{j}' for j in range(ncarry)) or '0'}}};")
    inv = 0
    used = set()

    def fresh(name):
        c, k = _cvar(name), 2
        while c in used:
            c, k = f"{_cvar(name)}_{k}", k + 1
        used.add(c)
        return c
    for op, at in zip(prog.ops, prog.at):
        kind, t = op[0], op[1]
        if kind in ("xs", "view"):
            c = fresh(t)
            s = at[0]
            names[s] = c
            if kind == "xs":
                emit(f"        char *{c} = L->xs[{s[1]}] + {i} * L->xs_stride[{s[1]}];")
            else:
                emit(f"        char *{c} = {names[at[1]]} + L->offset[{s[1]}];")
        elif kind == "kernel":
            kc, k = op[2], prog.kernel_ops.index(op)
            outs = at[1]
            emit(f"        /* {kc.kernel.name} */")
            for r, o in enumerate(outs):
                c = fresh(t if len(outs) == 1 else f"{t}_{r}")
                names[o] = c
                pool = sum(len(x[2].kernel.outputs) for x in prog.kernel_ops[:k]) + r
                emit(f"        char *{c} = astjax_free(L->pool + {pool} * L->pool_size, "
                     f"L->pool_size, live, {ncarry});")
            operands = []
            for a, x in zip(op[3], at[0]):
                if _is_ptr(x):
                    alias = f" /* {a.name} */" if names[x] != _cvar(a.name) else ""
                    operands.append(names[x] + alias)
                else:
                    what = a.name if isinstance(a, Var) else repr(a.value)
                    operands.append(f"L->inv[{inv}] /* {what} */")
                    inv += 1
            operands += [names[o] for o in outs]
            emit(f"        {{   void *ptrs[{len(operands)}] = {{")
            emit("                " + ",\n                ".join(operands) + "};")
            if kc.indexed:
                emit(f"            if (((astjax_indexed_fn)L->fn[{k}])(L->lead[{k}], "
                     f"L->nthreads[{k}], ptrs)) return 1; }}")
            else:
                emit(f"            const int64_t *a = L->lead[{k}];")
                emit(f"            if (((astjax_flat_fn)L->fn[{k}])(a[0], (int32_t)a[1], "
                     f"(const int64_t *)(intptr_t)a[2], (const int64_t *)(intptr_t)a[3], "
                     f"(int32_t)a[4], L->nthreads[{k}], ptrs)) return 1; }}")
        elif kind == "append" and prog.y_leaves:
            emit(f"        const int64_t row = L->ys_row0 + {i} * L->ys_dir;")
            for k, leaf in enumerate(prog.y_leaves):
                emit(f"        astjax_put(L->ys[{k}] + row * L->ys_layout[{k}][2], "
                     f"{names[leaf]}, L->ys_layout[{k}]);")
    nxt = [names[x] for x in prog.new_carry]
    for j, c in enumerate(nxt):
        emit(f"        char *next_{j} = {c};")
    for j in range(len(nxt)):
        emit(f"        carry_{j} = next_{j};")
    emit("    }")
    for j in range(ncarry):
        emit(f"    L->carry[{j}] = carry_{j};")
    emit("    return 0;")
    emit("}")
    return C_HEADER + "\n" + "\n".join(out) + "\n"


# ------------------------------------------------------------------------ the driver

class _Loop(ctypes.Structure):
    """``astjax_loop`` of ``C_HEADER``."""
    _fields_ = [("inv", ctypes.c_void_p), ("xs", ctypes.c_void_p),
                ("xs_stride", ctypes.c_void_p), ("offset", ctypes.c_void_p),
                ("carry", ctypes.c_void_p), ("pool", ctypes.c_void_p),
                ("pool_size", ctypes.c_int64), ("fn", ctypes.c_void_p),
                ("lead", ctypes.c_void_p), ("nthreads", ctypes.c_void_p),
                ("ys", ctypes.c_void_p), ("ys_layout", ctypes.c_void_p),
                ("ys_row0", ctypes.c_int64), ("ys_dir", ctypes.c_int64)]


_DECLINE = (False, None, None)
_ndarray = np.ndarray


def _ptr(a) -> int:
    return a.__array_interface__["data"][0]


def _pointers(values, dtype=np.uint64):
    """(array of ``values``, its address) for the driver's tables."""
    arr = np.array(values, dtype=dtype) if values else np.zeros(1, dtype)
    return arr, _ptr(arr)


def _index(index, env):
    """The Python index a core ``Index`` stands for."""
    def atom(a):
        if a is None:
            return None
        return env[a.name] if isinstance(a, Var) else a.value

    items = []
    for it in index.items:
        if it is None or it is Ellipsis:
            items.append(it)
        elif isinstance(it, SliceAtom):
            items.append(slice(atom(it.lower), atom(it.upper), atom(it.step)))
        else:
            items.append(atom(it))
    return items[0] if len(items) == 1 and not index.tuple_form else tuple(items)


def _basic(ix) -> bool:
    """Is ``ix`` basic indexing (a view, never a copy)?"""
    items = ix if type(ix) is tuple else (ix,)
    for it in items:
        if it is None or it is Ellipsis:
            continue
        if type(it) is slice:
            if not all(p is None or (isinstance(p, (int, np.integer)) and type(p) is not bool)
                       for p in (it.start, it.stop, it.step)):
                return False
        elif not isinstance(it, (int, np.integer)) or type(it) is bool:
            return False
    return True


def _view_of(base, ix):
    """``base[ix]`` as an array view (a 0-d view where NumPy gives a scalar)."""
    items = ix if type(ix) is tuple else (ix,)
    if Ellipsis not in items:
        items = items + (Ellipsis,)
    return base[items]


class LoopDriver:
    """Runs a matched loop (``match``): a few steps interpreted, the rest in C."""

    def __init__(self, prog: Program, reverse: bool):
        self.prog = prog
        self.reverse = reverse
        self.__name__ = "loop_driver"
        self.text = None
        self.func = None

    def set_name(self, name):
        self.__name__ = name
        self.text = render_c(self.prog, _cvar(name))

    def __repr__(self):
        return f"<astjax compiled loop {self.__name__}>"

    # -- the Python side: exactly the statements of the loop ------------------------

    def _step(self, env, i, ys_vals, calls, made):
        """Step ``i`` as the loop runs it; ``calls`` gets each kernel's operands,
        ``made`` each statement's value."""
        prog = self.prog
        env[prog.loop_var] = i
        for op in prog.ops:
            kind = op[0]
            if kind == "kernel":
                args = [env[a.name] if isinstance(a, Var) else a.value for a in op[3]]
                env[op[1]] = op[2](*args)
                calls.append(args)
            elif kind == "xs":
                env[op[1]] = rt.tree_index(env[op[2]], env[op[3]])
            elif kind == "reverse":
                env[op[1]] = env[op[2]] - i
            elif kind == "item":
                env[op[1]] = env[op[2]][op[3]]
            elif kind == "view":
                env[op[1]] = env[op[2]][_index(op[3], env)]
            elif kind == "tuple":
                env[op[1]] = tuple([env[x] for x in op[2]])
            elif kind == "copy":
                env[op[1]] = env[op[2]]
            elif kind == "compact":
                env[op[1]] = rt.compact(env[op[2]])
            else:                                      # append
                ys_vals.append(env[op[2].name] if isinstance(op[2], Var) else None)
            made.append(env.get(op[1]))

    def _carry_leaves(self, env):
        """The carries' leaves as arrays, in ``carry_leaves`` order, or None."""
        out = []
        for name, path in self.prog.carry_leaves:
            v = env[name]
            for k in path:
                if type(v) is not tuple or k >= len(v):
                    return None
                v = v[k]
            if type(v) is not _ndarray:
                return None
            out.append(v)
        for name in self.prog.carried:      # tuples exactly as the body builds them
            if not _same_shape(env[name], self.prog.carry_start[name]):
                return None
        return out

    def __call__(self, *args):
        prog = self.prog
        nc = len(prog.carried)
        start, stop = _int(args[nc + 1]), _int(args[nc + 2])
        if DATA_OFFSET is None or start is None or stop is None or stop - start < MIN_STEPS:
            return _DECLINE
        ys_steps = args[nc]
        if prog.ys_list is not None and not (type(ys_steps) is list and not ys_steps):
            return _DECLINE
        env = dict(zip(prog.invariants, args[nc + 3:]))
        env.update(zip(prog.carried, args[:nc]))
        xs_info = self._xs_info(env, start, stop)
        if xs_info is None:
            return _DECLINE      # xs that are not plain arrays, or indexed out of range
        ys_vals: list = []
        i = start
        while i < stop:
            before = self._carry_leaves(env)
            calls: list = []
            made: list = []
            self._step(env, i, ys_vals, calls, made)
            i += 1
            if i - start > MAX_WARMUP or i >= stop or before is None:
                continue
            after = self._carry_leaves(env)
            if after is None or [_sig(a) for a in after] != [_sig(b) for b in before]:
                continue
            done = self._run_c(env, i, start, stop, before, after, calls, made, xs_info,
                               ys_vals)
            if done is not None:
                return done
        carry = [env[n] for n in prog.carried]
        ys = rt.tree_stack(ys_vals, self.reverse) if prog.ys_list is not None else None
        return (True, *carry, ys)

    def _xs_info(self, env, start, stop):
        """Per xs op: (array, index of step 0, index step), or None."""
        info = []
        for op in self.prog.ops:
            if op[0] != "xs":
                continue
            xs = env[op[2]]
            if type(xs) is not _ndarray or xs.ndim == 0:
                return None
            if op[4] is None:
                first, step = 0, 1
            else:
                last = env[op[4]]
                if type(last) is not int:
                    return None
                first, step = last, -1
            lo, hi = sorted((first + step * start, first + step * (stop - 1)))
            if lo < 0 or hi >= xs.shape[0]:
                return None
            info.append((xs, first, step))
        return info

    # -- the C side ------------------------------------------------------------------

    def _run_c(self, env, i, start, stop, before, after, calls, made, xs_info, ys_vals):
        """Steps [i, stop) in one C call when the step just interpreted (``calls``:
        its kernels' operands) can be repeated as compiled calls; the result of the
        loop, or None (then the caller goes on interpreting)."""
        prog = self.prog
        if numpy_raises():
            return None
        keep = []
        # values of the step just run, by symbol (for views, ys and operand kinds)
        values = {("carry", j): before[j] for j in range(len(before))}
        for op, at, res in zip(prog.ops, prog.at, made):
            if op[0] in ("xs", "view"):
                values[at[0]] = res
            elif op[0] == "kernel":
                outs = at[1]
                got = [res] if len(outs) == 1 else (list(res) if type(res) is tuple else [])
                if len(got) != len(outs):
                    return None
                values.update(zip(outs, got))
        # views: their byte offsets in the arrays they index
        offsets = []
        for op, at in zip(prog.ops, prog.at):
            if op[0] != "view":
                continue
            base = values.get(at[1])
            ix = _index(op[3], env)
            if type(base) is not _ndarray or not _basic(ix):
                return None
            view = _view_of(base, ix)
            offsets.append(_ptr(view) - _ptr(base))
            values[at[0]] = view
        fns, leads, threads, inv, pools_of = [], [], [], [], []
        kernel_at = [at for op, at in zip(prog.ops, prog.at) if op[0] == "kernel"]
        for op, at, args in zip(prog.kernel_ops, kernel_at, calls):
            kc: KernelCall = op[2]
            key = kc._key(args) if kc.plans is not None else None
            plan = kc.plans.get(key) if key is not None else None
            if plan is None or plan[7] is None or plan[5]:
                return None          # ran with NumPy, or a full reduction (a scalar)
            keep.append(plan)        # (its layout holds the P array the C call reads)
            conv = dict(plan[2])
            for j, (x, value) in enumerate(zip(at[0], args)):
                ptr_operand = _is_ptr(x)
                if type(value) is _ndarray:
                    if j in conv:
                        return None
                    if not ptr_operand:
                        inv.append(_ptr(value))
                        keep.append(value)
                elif j not in conv:
                    return None
                elif ptr_operand:    # an xs step or a view that NumPy gives as a scalar
                    if not isinstance(value, np.generic) or value.dtype != conv[j]:
                        return None
                else:
                    box = np.array(value, dtype=conv[j])
                    keep.append(box)
                    inv.append(_ptr(box))
            fn = ctypes.cast(plan[7], ctypes.c_void_p).value
            fns.append(fn)
            if kc.indexed:
                leads.append(plan[1][0])
            else:
                lead = np.array(plan[1], dtype=np.int64)
                keep.append(lead)
                leads.append(_ptr(lead))
            threads.append(num_threads() if plan[4] else 1)
            pools_of.append(plan[3])
        # ys: the stacked outputs, with the rows of the steps already run
        n = stop - start
        ys_arrays, layouts = [], []
        if prog.ys_list is not None and prog.y_leaves:
            for k, leaf in enumerate(prog.y_leaves):
                src = values.get(leaf)
                if isinstance(src, np.generic):
                    src = np.asarray(src)
                if type(src) is not _ndarray:
                    return None
                ys_arrays.append(np.empty((n,) + src.shape, src.dtype))
                lay = np.array([src.ndim, src.itemsize, src.nbytes, *src.shape,
                                *src.strides], dtype=np.int64)
                keep.append(lay)
                layouts.append(_ptr(lay))
            for p, y in enumerate(ys_vals):
                ls = _leaves_as(y, prog.y_symbol)
                if ls is None:
                    return None
                for arr, leaf in zip(ys_arrays, ls):
                    leaf = np.asarray(leaf)
                    if leaf.shape != arr.shape[1:] or leaf.dtype != arr.dtype:
                        return None
                    arr[n - 1 - p if self.reverse else p] = leaf
        elif prog.ys_list is not None and ys_vals and any(y is not None for y in ys_vals):
            return None
        if self.func is None:
            func = cc.build(self.text, _cvar(self.__name__))
            func.argtypes = (ctypes.c_int64, ctypes.c_int64, ctypes.POINTER(_Loop))
            func.restype = ctypes.c_int
            self.func = func
        # result buffers: one more per result than there are carries
        pool_size = len(prog.carry_leaves) + 1
        pool = []
        for results in pools_of:
            for shape, dt in results:
                for _ in range(pool_size):
                    pool.append(np.empty(shape, dt))
        carries = list(after)
        tables = {
            "inv": _pointers(inv),
            "xs": _pointers([_ptr(xs) + first * xs.strides[0] for xs, first, _ in xs_info]),
            "xs_stride": _pointers([step * xs.strides[0] for xs, _, step in xs_info],
                                   np.int64),
            "offset": _pointers(offsets, np.int64),
            "carry": _pointers([_ptr(c) for c in carries]),
            "pool": _pointers([_ptr(b) for b in pool]),
            "fn": _pointers(fns), "lead": _pointers(leads),
            "ys": _pointers([_ptr(a) for a in ys_arrays]),
            "ys_layout": _pointers(layouts)}
        nthreads = np.array(threads or [1], dtype=np.int32)
        loop = _Loop(inv=tables["inv"][1], xs=tables["xs"][1],
                     xs_stride=tables["xs_stride"][1], offset=tables["offset"][1],
                     carry=tables["carry"][1], pool=tables["pool"][1], pool_size=pool_size,
                     fn=tables["fn"][1], lead=tables["lead"][1], nthreads=_ptr(nthreads),
                     ys=tables["ys"][1], ys_layout=tables["ys_layout"][1],
                     ys_row0=(n - 1 + start) if self.reverse else -start,
                     ys_dir=-1 if self.reverse else 1)
        if self.func(i, stop, ctypes.byref(loop)):
            raise RuntimeError(f"astjax: the compiled loop {self.__name__} failed")
        STATS["loops"] += 1
        STATS["steps"] += stop - i
        # the carries after the last step, as arrays
        by_ptr = {_ptr(b): b for b in pool}
        by_ptr.update({_ptr(c): c for c in carries})
        out_ptrs = tables["carry"][0]
        leaves = iter([by_ptr[int(p)] for p in out_ptrs[:len(carries)]])
        carry = [_as_value(prog.carry_start[n], leaves) for n in prog.carried]
        if prog.ys_list is None:
            ys = None
        elif not prog.y_leaves:
            ys = rt.tree_stack([None] * n, self.reverse)
        else:
            ys = _as_value(prog.y_symbol, iter(ys_arrays))
        return (True, *carry, ys)


def _int(v):
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
        return int(v)
    return None


def _sig(a):
    return (a.dtype, a.shape, a.strides)


def _same_shape(value, s):
    if _is_ptr(s):
        return True
    return type(value) is tuple and len(value) == len(s) and all(
        _same_shape(v, x) for v, x in zip(value, s))


def _leaves_as(value, s):
    """The leaves of ``value`` laid out as symbol tree ``s``, or None."""
    if _is_ptr(s):
        return [value]
    if type(value) is not tuple or len(value) != len(s):
        return None
    out = []
    for v, x in zip(value, s):
        got = _leaves_as(v, x)
        if got is None:
            return None
        out += got
    return out


def _as_value(s, leaves):
    """The Python value of symbol tree ``s`` with its leaves from ``leaves``."""
    if _is_ptr(s):
        return next(leaves)
    return tuple(_as_value(x, leaves) for x in s)

