"""Compiled loop drivers: a loop whose body is only kernel calls runs in one C call.

A ``lax.scan`` or ``fori_loop`` whose step fused into kernels still runs as a Python
``for`` loop on the host: per step it indexes ``xs``, unpacks the carry, calls each
kernel (a plan lookup, a ctypes call), builds the new carry and appends the step's
outputs, a dozen microseconds of interpreter work per step.  When the body (after
fusion) is only that -- kernel calls, tuples, constant indexing of tuples and arrays,
``xs`` at the step, ``compact`` and the append of ``ys`` -- ``rewrite`` swaps the loop
for a call of a ``LoopDriver``, and keeps the loop as the ``else`` branch:

    scan_driver_trips = range(0, n_steps)
    scan_driver_ok = False
    if scan_driver_trips:                 (what the loop reads may exist only then)
        scan_driver_result = scan_driver(carry, ys_steps, 0, n_steps, wavelet, dx, ...)
        scan_driver_ok = scan_driver_result[0]
    if scan_driver_ok:
        carry = scan_driver_result[1]
        ys = scan_driver_result[2]
    else:
        for i in range(0, n_steps): ...            (the loop, unchanged)
        ys = rt.tree_stack(ys_steps, False)

The driver interprets the first steps in Python, statement by statement as the loop
would (the same kernel calls, indexing and tuples), until a step calls every kernel
with the plan of the step before and the carries keep their dtypes, shapes and
strides; from then on every step is the same sequence of compiled calls, so the
remaining steps run in one call of a C function rendered from the body
(``render_c``; ``kernels/loop_driver.py`` runs it): carries are pointers ping-ponged
among preallocated result buffers (a kernel writes into a buffer no carry holds),
``xs`` is read by pointer, and each step's ``ys`` are copied straight into their row
of the stacked output.  Whatever the driver cannot take (``xs`` or carries that are
not plain arrays, a kernel that ran with NumPy, fewer than ``MIN_STEPS`` steps, NumPy
error states that raise) leaves the loop to Python: up front by returning
``(False, ...)``, later by interpreting the remaining steps.  Values are those of the
loop: the C function makes the same kernel calls on the same operands.

Reverse mode's sweeps of a scan (a forward sweep that also pushes onto the tape, a
backward sweep that pops it) are matched with the same step programs
(``match_body`` with the tape) and rewritten by ``kernels/sweeps.py``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from astjax import core
from astjax.core import Const, External, Index, Prim, Var

# fewer steps than this: the Python loop (the driver's start-up is not worth it)
MIN_STEPS = 4
# steps interpreted in Python looking for two alike before the rest runs as C
MAX_WARMUP = 4
# loops and steps the C drivers ran (what tests check was compiled)
STATS = {"loops": 0, "steps": 0, "sweeps": 0, "sweep_steps": 0, "back_sweeps": 0,
         "back_steps": 0}


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
    ys_dead: bool = False          # nothing reads the list after the loop: no ys kept
    structure: dict = field(default_factory=dict)   # name -> "ptr" | "inv" | tuple
    symbols: dict = field(default_factory=dict)     # name -> symbolic value (resolve)
    at: list = field(default_factory=list)          # per op: its operands' symbols
    carry_start: dict = field(default_factory=dict)   # carried name -> entering symbol
    y_symbol: object = None
    carry_leaves: list = field(default_factory=list)   # (carried name, path)
    y_leaves: list = field(default_factory=list)       # symbols of ys leaves
    new_carry: list = field(default_factory=list)      # symbols of the carries after
    kernel_ops: list = field(default_factory=list)
    saved: list = field(default_factory=list)          # ("out", k, r) the step pushes


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
    return match_body(loop.body, loop.target, written, kernel_refs, loc=loop.loc)


# elementwise primitives of loop invariants a sweep's step computes again each step
# (``dt * dt``): the driver takes their value, computed just before it is called
HOISTABLE_KINDS = frozenset({"elementwise"})


def match_body(body, loop_var, written, kernel_refs, *, tape=None, hoisted=None,
               loc=None) -> Program | None:
    """``match`` of a loop body: ``written`` the names the whole loop writes.

    With ``tape`` (the name of reverse mode's tape: a forward sweep's fast step,
    ``kernels/sweeps.py``) the body may also push onto the tape, take ``rt.meta`` of
    a value ("static": the same every step once shapes stop changing) and compute
    elementwise primitives of invariants (their targets go to ``hoisted``, which the
    caller computes before the driver runs and passes as invariants)."""
    ops, defined, carried, invariants = [], {loop_var}, [], []
    ys_list = None
    reverse = {}
    hoist = hoisted if hoisted is not None else []

    def use(atom):
        """Record a read of ``atom`` (a Const, or a Var: body value, carried,
        invariant); False for anything else."""
        if isinstance(atom, Const):
            return True
        if not isinstance(atom, Var):
            return False
        n = atom.name
        if n in hoist_names:
            if n not in invariants:
                invariants.append(n)
            return True
        if n in defined:
            return True
        if n in written:                 # read before written: loop-carried
            if n not in carried:
                carried.append(n)
        elif n not in invariants:
            invariants.append(n)
        return True

    hoist_names = set()
    for s in body:
        if isinstance(s, core.Comment):
            continue
        if tape is not None and isinstance(s, Prim) and s.prim == "push" and \
                s.target is None and len(s.args) == 2 and s.args[0] == Var(tape) and \
                not s.kwargs and use(s.args[1]):
            ops.append(("push", None, s.args[1]))
            continue
        if tape is not None and _hoistable(s, written, hoist_names):
            hoist.append(s)
            hoist_names.add(s.target)
            continue
        if s is None or getattr(s, "target", None) is None or s.target in hoist_names:
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
                    (a[1].name == loop_var or a[1].name in reverse):
                use(a[0])
                ops.append(("xs", s.target, a[0].name, a[1].name, reverse.get(a[1].name)))
            elif s.prim == "subtract" and len(a) in (2, 3) and isinstance(a[0], Var) and \
                    (a[0].name not in written or a[0].name in hoist_names) and \
                    a[1] == Var(loop_var) and \
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
            elif tape is not None and s.prim == "make_tuple" and len(a) == 1 and \
                    isinstance(a[0], tuple) and \
                    all(isinstance(x, Var) or x == Const(None) for x in a[0]):
                # (``(carry, None)``: a step without ys; only ``rt.meta`` may read it)
                for x in a[0]:
                    use(x)
                ops.append(("opaque", s.target, list(a[0])))
            elif s.prim == "compact" and len(a) == 1 and isinstance(a[0], Var):
                use(a[0])
                ops.append(("compact", s.target, a[0].name))
            elif tape is not None and s.prim == "meta" and len(a) == 1 and \
                    isinstance(a[0], Var) and not s.kwargs:
                use(a[0])
                ops.append(("meta", s.target, a[0].name))
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
    if loop_var in carried or not any(o[0] == "kernel" for o in ops):
        return None
    if tape is not None and (tape in carried or tape in defined):
        return None
    prog = Program(loop_var, ops, carried, invariants, ys_list, loc=loc)
    prog.kernel_ops = [o for o in ops if o[0] == "kernel"]
    return prog if resolve(prog) else None


def _hoistable(s, written, hoist_names) -> bool:
    """An elementwise primitive of constants and loop invariants (``HOISTABLE_KINDS``)."""
    from astjax.primitives import REGISTRY
    if not (isinstance(s, Prim) and s.target is not None and not s.kwargs):
        return False
    p = REGISTRY.get(s.prim)
    if p is None or p.kind not in HOISTABLE_KINDS:
        return False
    for a in s.args:
        if isinstance(a, Var):
            if a.name in written and a.name not in hoist_names:
                return False
        elif not isinstance(a, Const):
            return False
    return True


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
        # the step index: a kernel operand reads it per step (the C loop passes its
        # own counter by pointer), a sweep pushes it, a copy is it; a view or a tuple
        # of it leaves the loop to Python.  (It once had no symbol, and a kernel operand
        # without one read as a constant: every step took the first step's index.)
        sym[prog.loop_var] = "index"
        leaves = []
        for n in prog.carried:
            if shapes[n] == "static":
                sym[n] = "static"
                continue
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
                # (None: a constant; a name without a symbol is never taken for one)
                operands = [None if isinstance(a, Const) else sym.get(a.name, "unknown")
                            for a in op[3]]
                if not all(x is None or x in ("inv", "static", "index") or _is_ptr(x)
                           for x in operands):
                    return False
                k = _position(prog.kernel_ops, op)
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
                sym[t] = "reversed index"      # (only ``xs`` at the step reads it)
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
                if kind == "copy" and sym.get(op[2]) in ("static", "index"):
                    sym[t] = sym[op[2]]
                    continue
                if not _is_tree(sym.get(op[2])):
                    return False
                sym[t] = sym[op[2]]
            elif kind == "meta":
                if op[2] not in sym:
                    return False
                sym[t] = "static"
            elif kind == "opaque":
                sym[t] = "opaque"
            elif kind == "push":
                x = op[2]
                at[-1] = None if isinstance(x, Const) else sym.get(x.name, "bad")
            elif kind == "append" and isinstance(op[2], Var):
                if not _is_tree(sym.get(op[2].name)):
                    return False
                y_symbol = sym[op[2].name]
                y_leaves = _flatten(y_symbol)
        new_shapes = {n: _shape_of(sym[n]) for n in prog.carried}
        if any(_has_bad(x) for x in new_shapes.values()):
            return False
        if new_shapes == shapes:
            prog.ops = ops
            prog.symbols, prog.carry_leaves, prog.y_leaves = sym, leaves, y_leaves
            prog.at, prog.carry_start, prog.y_symbol = at, start, y_symbol
            prog.new_carry = [x for n in prog.carried if sym[n] != "static"
                              for x in _flatten(sym[n])]
            # kernel results a step pushes, or the next step pushes as its carry: they
            # go to rows of a stacked buffer (the tape keeps them)
            prog.saved = []
            for op, a in zip(ops, at):
                if op[0] != "push":
                    continue
                if _is_ptr(a) and a[0] == "carry":
                    a = _carry_origin(prog.new_carry, a[1])
                    if a is None:
                        return False
                if not (a is None or a in ("inv", "static", "index") or
                        (_is_ptr(a) and a[0] in ("out", "xs"))):
                    return False
                if _is_ptr(a) and a[0] == "out" and a not in prog.saved:
                    prog.saved.append(a)
            # the carries after a step are results or carries (arrays the host can
            # hold), never views into something else
            return all(x[0] in ("out", "carry") for x in prog.new_carry)
        shapes = new_shapes
    return False


def _position(items, x):
    """Index of the object ``x`` itself in ``items`` (not of an equal one)."""
    return next(k for k, y in enumerate(items) if y is x)


def _is_ptr(s):
    return isinstance(s, tuple) and s[0] in ("carry", "xs", "view", "out")


def _is_tree(s):
    return _is_ptr(s) or (isinstance(s, list) and all(_is_tree(x) for x in s))


def _shape_of(s):
    if s == "static":
        return "static"
    if s is None or isinstance(s, str):
        return "bad"
    return "ptr" if _is_ptr(s) else [_shape_of(x) for x in s]


def _carry_origin(new_carry, j):
    """The kernel result that carry ``j`` entering a step is: made by the step before,
    or passed along from another carry (``(b, n)`` from ``(a, b)``) made earlier;
    None when it never is one (carries only swapped)."""
    for _ in range(len(new_carry)):
        x = new_carry[j]
        if x[0] == "out":
            return x
        j = x[1]
    return None


def _has_bad(shape):
    return shape == "bad" or (isinstance(shape, list) and any(_has_bad(x) for x in shape))


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
    readers = readers_of(fn)
    drivers: list = []
    _rewrite_block(fn.body, kernel_refs, name_of, readers, drivers)
    from astjax.kernels import sweeps       # (reverse mode's forward sweeps)
    return drivers + sweeps.rewrite(fn, kernel_refs, name_of)


def readers_of(fn) -> dict:
    """Name -> ids of the statements of ``fn`` that read it (a loop: its range too)."""
    readers: dict = {}
    for s in core.walk(fn.body):
        names = list(core.reads(s))
        if isinstance(s, core.For) and isinstance(s.iter, Prim):
            names += core.atom_vars(s.iter.args)
        for n in names:
            readers.setdefault(n, set()).add(id(s))
    return readers


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
    inside = {id(s) for s in core.walk(loop.body)} | {id(loop)}
    if prog.ys_list is not None and not (
            isinstance(stack, Prim) and stack.prim == "tree_stack" and
            stack.args[0] == Var(prog.ys_list) and isinstance(stack.args[1], Const)):
        if not readers.get(prog.ys_list, set()) <= inside:
            return False
        # (``c, _ = lax.scan(...)``: the list is dead, its ys are neither copied
        # into stacked rows nor checked)
        stack, prog.ys_dead, prog.y_leaves = None, True, []
    elif prog.ys_list is None:
        stack = None
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
    from astjax.kernels.loop_driver import LoopDriver
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
    char **saved;             /* a pushed result of step i: saved[k] + (i - saved_from) */
    const int64_t *saved_bytes;   /* * saved_bytes[k] (a row of a stacked buffer) */
    int64_t saved_from;       /* (the loop runs in several calls: governor.py) */
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
    if any(at and "index" in at[0] for op, at in zip(prog.ops, prog.at)
           if op[0] == "kernel"):
        # (a kernel reads the index as a Python int: an int64 through a pointer)
        emit(f"        int64_t astjax_index = {i};")
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
            kc, k = op[2], _position(prog.kernel_ops, op)
            outs = at[1]
            emit(f"        /* {kc.kernel.name} */")
            for r, o in enumerate(outs):
                c = fresh(t if len(outs) == 1 else f"{t}_{r}")
                names[o] = c
                if o in prog.saved:         # (pushed: its own row, never reused)
                    sv = prog.saved.index(o)
                    emit(f"        char *{c} = L->saved[{sv}] + ({i} - L->saved_from) * "
                         f"L->saved_bytes[{sv}];")
                    continue
                pool = sum(len(x[2].kernel.outputs) for x in prog.kernel_ops[:k]) + r
                emit(f"        char *{c} = astjax_free(L->pool + {pool} * L->pool_size, "
                     f"L->pool_size, live, {ncarry});")
            operands = []
            for a, x in zip(op[3], at[0]):
                if _is_ptr(x):
                    alias = f" /* {a.name} */" if names[x] != _cvar(a.name) else ""
                    operands.append(names[x] + alias)
                elif x == "index":
                    operands.append(f"&astjax_index /* {a.name} */")
                else:
                    what = a.name if isinstance(a, Var) else repr(a.value)
                    operands.append(f"L->inv[{inv}] /* {what} */")
                    inv += 1
            operands += [names[o] for o in outs]
            emit(f"        {{   void *ptrs[{len(operands)}] = {{")
            emit("                " + ",\n                ".join(operands) + "};")
            emit_kernel_call(emit, k, kc.indexed)
        elif kind == "append" and prog.y_leaves:
            emit(f"        const int64_t row = L->ys_row0 + {i} * L->ys_dir;")
            for k, leaf in enumerate(prog.y_leaves):
                emit(f"        astjax_put(L->ys[{k}] + row * L->ys_layout[{k}][2], "
                     f"{names[leaf]}, L->ys_layout[{k}]);")
    emit_step_end(emit, [names[x] for x in prog.new_carry], ncarry)
    return C_HEADER + "\n" + "\n".join(out) + "\n"


def emit_kernel_call(emit, k, indexed):
    """The C that calls step kernel ``k`` of a driver's table on ``ptrs`` (its operands
    and results), leaving the function with 1 when the kernel fails."""
    if indexed:
        emit(f"            if (((astjax_indexed_fn)L->fn[{k}])(L->lead[{k}], "
             f"L->nthreads[{k}], ptrs)) return 1; }}")
    else:
        emit(f"            const int64_t *a = L->lead[{k}];")
        emit(f"            if (((astjax_flat_fn)L->fn[{k}])(a[0], (int32_t)a[1], "
             f"(const int64_t *)(intptr_t)a[2], (const int64_t *)(intptr_t)a[3], "
             f"(int32_t)a[4], L->nthreads[{k}], ptrs)) return 1; }}")


def emit_step_end(emit, nxt, ncarry):
    """The C that ends a driver's step (the carries become ``nxt``, all at once) and its
    function (the carries left for the host)."""
    for j, c in enumerate(nxt):
        emit(f"        char *next_{j} = {c};")
    for j in range(len(nxt)):
        emit(f"        carry_{j} = next_{j};")
    emit("    }")
    for j in range(ncarry):
        emit(f"    L->carry[{j}] = carry_{j};")
    emit("    return 0;")
    emit("}")
