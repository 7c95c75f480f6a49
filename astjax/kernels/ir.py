"""The kernel IR: a fused group as scalar statements on the output index.

A ``Kernel`` is what the fusion plan (``passes/fusion.py``) groups, said without
NumPy: named inputs, a list of statements and the names of the results.  Every value
is an expression of an index (XLA's loop fusion): a renderer emits a loop over the
output index and, for each result, the statements that compute it there.  The IR
holds no C: renderers (``kernels/c.py``; ``kernels/cuda.py`` of the CUDA backend)
share the scalar expressions of ``kernels/cexpr.py`` and add their loop structure.

Statements (``Kernel.ops``), each making the value ``target``:

* ``Op(target, ufunc, args)``: a NumPy ufunc (or ``where``/``clip``) applied
  elementwise; operands broadcast as in NumPy (an operand of lower rank is aligned to
  the trailing axes; an axis of length 1 is read at index 0).
* ``Slice(target, source, items)``: basic indexing ``source[items]``; items are
  ``("slice", start, stop, step)``, ``("index", i)``, ``("newaxis",)`` or
  ``("ellipsis",)``; a bound is an int, None, or the name of a scalar kernel input
  (``p[1:nx]``).  Read at index ``i`` it reads ``source`` at ``start + i * step``.
* ``Transpose(target, source, axes)``: ``np.transpose`` (axes None: reversed).
* ``Pad(target, source, widths, mode, value)``: ``np.pad`` with ``mode`` "constant"
  (``value`` outside: a guarded read) or "edge" (the index clamped); ``widths`` one
  (before, after) pair per axis.
* ``Place(target, source, items, like, value)``: ``source`` placed at the basic
  index ``items`` of an array shaped like the input ``like`` (``rt.place_at``, the
  cotangent of ``like[items]``), ``value`` elsewhere; items are ``("index", i)`` (a
  row at a run-time index: ``i`` may be negative) and unit-step slices, as in
  ``Slice``.  Read at index ``i`` it tests whether ``i`` is inside the block.
* ``Broadcast(target, source, like)``: the 0-d input ``source`` at every index of an
  array shaped like the input ``like``, in ``like``'s floating dtype (``ra.unreduce``
  of a reduction over every axis: a loss's cotangent, read by the kernel that uses it
  instead of an array filled first).
* ``Cast(target, source, dtype)``: ``astype`` (never float to integer: C leaves
  out-of-range conversions undefined, NumPy does not).
* ``Reduce(target, source, op, axis, keepdims)``: ``np.sum``/``mean``/``max``/``min``
  over all axes (None), one axis or a tuple; only as a kernel's single result (a
  reduction ends its group).

A kernel with only ``Op`` statements is *elementwise* (``is_elementwise``): the
renderers keep their flat / strided loops for it.  Any other kernel is *indexed*:
``specialize_indexed`` types it for argument dtypes and ranks, and lists the run-time
integers its loops need (``TypedIndexed.params``: ``dim_<value>_<axis>``,
``st_<input>_<axis>`` strides in elements, ``start_/step_/at_<value>_<axis>`` of a
slice), which ``kernels/layout.py`` computes from the arguments' shapes per call.
A renderer reads those from an ``int64`` array ``P`` in that order, except those in
the ``baked`` mapping it is given (values 0 or 1 known when it is compiled: unit
axes, unit steps and strides), which it writes as literals.

Types are not part of a ``Kernel``: they come from the arguments of a call.
``specialize`` resolves them with NumPy's own type resolution (``ufunc.resolve_dtypes``:
NEP 50 promotion, Python scalars weak), so a ``Typed`` kernel computes every
statement in the loop type NumPy would pick and stores the dtype NumPy would give.
Anything NumPy would treat differently from a plain per-element loop (loops mixing
input types, float16, complex, integer powers with a run-time exponent...) raises
``Unsupported``, and the caller runs the group with NumPy instead.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


class Unsupported(Exception):
    """This kernel, for these argument types, has no compiled form: run NumPy."""


@dataclass(frozen=True)
class Op:
    target: str              # the value this statement makes (may be reassigned)
    ufunc: str               # NumPy ufunc name (np.<ufunc>)
    args: tuple              # operand names (str) or Python numbers
    operator: str = ""       # "**" when written as an operator (NumPy's fast paths)
    loc: object = None       # the user's line (errors.Location), for comments and errors


@dataclass
class Kernel:
    name: str
    inputs: list             # names, in the order the kernel is called with
    ops: list                # Op, in order
    outputs: list            # names of the results, in order
    cost: int = 1            # work per element (passes/fusion.py weights)
    typed: dict = field(default_factory=dict)   # specialization key -> Typed
    # jit(..., fastmath=True): rendered and built with value-changing rewrites
    # (cexpr.op_expr; compile.FASTMATH_FLAGS, cuda_nvrtc.FASTMATH_OPTIONS)
    fastmath: bool = False



@dataclass(frozen=True)
class Slice:
    target: str
    source: str
    items: tuple             # ("slice", start, stop, step) | ("index", i) | ("newaxis",)
    loc: object = None       # | ("ellipsis",); bounds: int, None or a scalar input name


@dataclass(frozen=True)
class Transpose:
    target: str
    source: str
    axes: tuple | None       # None: reversed (``x.T``)
    loc: object = None


@dataclass(frozen=True)
class Pad:
    target: str
    source: str
    widths: tuple            # (before, after) per axis, or one pair for every axis
    mode: str                # "constant" or "edge"
    value: object = 0        # the constant (mode "constant")
    loc: object = None


@dataclass(frozen=True)
class Place:
    target: str
    source: str
    items: tuple             # ("index", i) | ("slice", start, stop, step) | ("ellipsis",)
    like: str                # the input whose shape (and floating dtype) the result has
    value: float = 0.0       # what the entries outside the block hold (0.0 or -0.0)
    loc: object = None


@dataclass(frozen=True)
class Broadcast:
    target: str
    source: str              # a 0-d input
    like: str                # the input whose shape and floating dtype the result has
    loc: object = None


@dataclass(frozen=True)
class Cast:
    target: str
    source: str
    dtype: str               # np.dtype(...).str of the result
    loc: object = None


@dataclass(frozen=True)
class Reduce:
    target: str
    source: str
    op: str                  # "sum", "mean", "max", "min"
    axis: object = None      # None, an int or a tuple of ints
    keepdims: bool = False
    loc: object = None


INDEXED = (Slice, Transpose, Pad, Place, Broadcast, Cast, Reduce)
REDUCTIONS = frozenset({"sum", "mean", "max", "min"})


def is_elementwise(kernel) -> bool:
    """Only ``Op`` statements: the flat / strided loops of ``specialize`` apply."""
    return all(isinstance(op, Op) for op in kernel.ops)

# dtypes a kernel computes in (NumPy's fixed-size integer, bool and float types)
SUPPORTED = frozenset("? b h i l q B H I L Q f d".split())


@dataclass(frozen=True)
class Input:
    name: str
    dtype: np.dtype          # what the kernel reads (a Python number: int64/float64/bool)
    scalar: bool             # one element for the whole loop (read once)
    weak: type | None = None     # int or float: a Python number, NumPy's weak scalar


@dataclass(frozen=True)
class TypedOp:
    target: str              # C-level value name (unique: one per statement)
    ufunc: str
    args: tuple              # (value name, dtype) or ("const", Python number)
    loop: tuple              # loop dtypes: inputs..., output
    operator: str = ""
    loc: object = None


@dataclass
class Typed:
    kernel: Kernel
    inputs: list             # Input
    ops: list                # TypedOp
    outputs: list            # (value name, dtype)
    int_checks: list         # (input index, dtype): Python ints that must fit that dtype
    out_weak: tuple = ()     # per result: float for a Python float (Python's arithmetic
                             # of numbers), else None (a NumPy value)

    @property
    def out_dtypes(self):
        return [d for _, d in self.outputs]


def _weak(value):
    """The descriptor ``resolve_dtypes`` takes for a Python number (bool is the
    lowest kind, so it acts as NumPy's bool)."""
    t = type(value)
    if t is bool:
        return np.dtype(bool)
    if t in (int, float):
        return t
    raise Unsupported(f"a {t.__name__} operand")


# elementwise functions that are not ``np`` attributes of the same name
_LOOPS = {"clip": np._core.umath.clip}


def _sample(desc):
    """A value ``np.result_type`` promotes as NumPy promotes ``desc`` (a Python type
    stands for a weak Python number)."""
    return {int: 0, float: 0.0}.get(desc, desc)


def input_kind(value):
    """(dtype, scalar?, weak type) of a call argument, or Unsupported."""
    t = type(value)
    if t is np.ndarray or isinstance(value, np.generic):
        dt = value.dtype
        if dt.char not in SUPPORTED or not dt.isnative:
            raise Unsupported(f"dtype {dt}")
        return dt, value.size == 1, None
    if t is bool:
        return np.dtype(bool), True, None
    if t is int:
        _require_int64(value)
        return np.dtype(np.int64), True, int
    if t is float:
        return np.dtype(np.float64), True, float
    raise Unsupported(f"a {t.__name__} argument")


INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1


def fits_int64(*values) -> bool:
    """Whether Python ints go to a kernel as int64s (the C type of every Python int
    operand and loop counter): one past that range is NumPy's to take
    (``float_array * 2**70`` is a float64 product; an int64 array's raises), and a
    loop bound past it would wrap the counter."""
    return all(INT64_MIN <= v <= INT64_MAX for v in values)


def _require_int64(value):
    if not fits_int64(value):
        raise Unsupported("a Python int outside int64")


def specialize(kernel: Kernel, kinds) -> Typed:
    """``kernel`` typed for arguments of these kinds (``input_kind`` of each)."""
    inputs = [Input(n, dt, sc, weak) for n, (dt, sc, weak) in zip(kernel.inputs, kinds)]
    current = {}             # source name -> (value name, dtype, descriptor)
    for k, inp in enumerate(inputs):
        desc = inp.weak if inp.weak is not None else inp.dtype
        current[inp.name] = (f"in{k}", inp.dtype, desc)
    int_checks = set()
    ops = []
    for j, op in enumerate(kernel.ops):
        if not isinstance(op, Op):
            raise Unsupported("an indexed statement: use specialize_indexed")
        ops.append(_typed_op(op, f"v{j}", current, int_checks))
    outputs = [(current[n][0], current[n][1]) for n in kernel.outputs]
    weak = tuple(current[n][2] if isinstance(current[n][2], type) else None
                 for n in kernel.outputs)
    return Typed(kernel, inputs, ops, outputs, sorted(int_checks, key=lambda c: c[0]),
                 weak)



def _typed_op(op, target, current, int_checks):
    """``op`` in the loop types NumPy resolves for its operands; records its value in
    ``current`` (source name -> (value name, dtype, descriptor))."""
    uf = _LOOPS.get(op.ufunc) or getattr(np, op.ufunc, None)
    if not isinstance(uf, np.ufunc) and op.ufunc != "where" or \
            len(op.args) != (3 if op.ufunc == "where" else uf.nin):
        raise Unsupported(f"np.{op.ufunc}")
    descs, args = [], []
    for a in op.args:
        if isinstance(a, str):
            if a not in current:
                raise Unsupported(f"operand {a!r} not defined in the group")
            vname, dt, desc = current[a]
            descs.append(desc)
            args.append((vname, dt))
        else:
            descs.append(_weak(a))
            args.append(("const", a))
    if op.operator and all(isinstance(d, type) for d in descs):
        # Python's own arithmetic (``s + s`` of two Python floats, ``j * dt`` of an
        # int and a float, the int rounded to a float first as C's cast does): a
        # Python float, weak for what follows; integers alone (unbounded), division
        # (ZeroDivisionError) and the rest stay with the block, which runs them as
        # Python does
        if op.ufunc in ("add", "subtract", "multiply", "negative") and \
                float in descs and all(d in (int, float) for d in descs):
            f64 = np.dtype(np.float64)
            current[op.target] = (target, f64, float)
            return TypedOp(target, op.ufunc, tuple(args), (f64,) * (len(args) + 1),
                           op.operator, op.loc)
        raise Unsupported(f"Python's {op.operator} on Python numbers")
    try:
        if op.ufunc == "where":     # the branches' common type; a boolean condition
            out = np.result_type(*[_sample(d) for d in descs[1:]])
            loop = (np.dtype(bool), out, out, out)
        else:
            loop = uf.resolve_dtypes(tuple(descs) + (None,))
    except (TypeError, ValueError, OverflowError) as e:
        raise Unsupported(f"np.{op.ufunc} on {descs}: {e}") from None
    if any(d.char not in SUPPORTED for d in loop):
        raise Unsupported(f"np.{op.ufunc} loop {loop}")
    if len({d for d in loop[:-1][1 if op.ufunc == "where" else 0:]}) > 1:
        raise Unsupported(f"np.{op.ufunc} loop mixes input types {loop}")
    for (vname, dt), desc, lt in zip(args, descs, loop):
        if desc is int and vname != "const" and lt.kind in "iub":
            int_checks.add((int(vname[2:]), lt))
        if vname == "const" and isinstance(dt, int) and not isinstance(dt, bool) \
                and lt.kind in "iu":
            info = np.iinfo(lt)
            if not info.min <= dt <= info.max:
                raise Unsupported(f"{dt} does not fit {lt}")
    current[op.target] = (target, loop[-1], loop[-1])
    return TypedOp(target, op.ufunc, tuple(args), tuple(loop), op.operator, op.loc)

def from_group(name, inputs, members, outputs, cost=1):
    """A ``Kernel`` from the fusion pass's record of a group (``fusion._group``):
    members are (target, ufunc name, operands, operator, location) or, for indexing,
    padding, casting and reducing statements, the IR statement itself."""
    ops = [m if isinstance(m, INDEXED) else Op(m[0], m[1], tuple(m[2]), m[3] or "", m[4])
           for m in members]
    return Kernel(name, list(inputs), ops, list(outputs), cost)


def output_deps(kernel: Kernel) -> list:
    """For each result, the indices of the inputs it depends on (its shape is their
    broadcast shape, which may be smaller than the loop's)."""
    deps = {n: {k} for k, n in enumerate(kernel.inputs)}
    for op in kernel.ops:
        d = set()
        for a in op.args:
            if isinstance(a, str):
                d |= deps.get(a, set())
        deps[op.target] = d
    return [tuple(sorted(deps.get(n, ()))) for n in kernel.outputs]


# ---------------------------------------------------------------------------------
# Indexed kernels: typed for dtypes and ranks; shapes come per call (kernels/layout.py)

@dataclass(frozen=True)
class IInput:
    name: str
    dtype: np.dtype
    ndim: int                # 0: read once (a Python number, a NumPy scalar, a 0-d array)
    weak: type | None = None


@dataclass(frozen=True)
class TSlice:
    target: str
    source: str
    maps: tuple              # per source axis: ("range", target axis) or ("fixed",)
    loc: object = None       # params start_/step_<target>_<axis>, at_<target>_<axis>


@dataclass(frozen=True)
class TTranspose:
    target: str
    source: str
    axes: tuple              # target axis j reads source axis axes[j]
    loc: object = None


@dataclass(frozen=True)
class TPad:
    target: str
    source: str
    widths: tuple            # (before, after) per axis
    mode: str
    value: object
    dtype: np.dtype
    loc: object = None


@dataclass(frozen=True)
class TPlace:
    target: str
    source: str
    like: str                # the input whose shape the result has
    maps: tuple              # per result axis: ("range", source axis) or ("fixed",)
    value: float
    dtype: np.dtype
    loc: object = None       # params start_<target>_<axis>, at_<target>_<axis>


@dataclass(frozen=True)
class TBroadcast:
    target: str
    source: str              # a 0-d input, read once
    like: str                # the input whose shape the result has
    src: np.dtype
    dtype: np.dtype
    loc: object = None


@dataclass(frozen=True)
class TCast:
    target: str
    source: str
    src: np.dtype
    dtype: np.dtype
    loc: object = None


@dataclass(frozen=True)
class TReduce:
    target: str
    source: str
    op: str
    axes: tuple              # reduced axes of the source, sorted
    keepdims: bool
    src: np.dtype
    acc: np.dtype            # what the accumulator holds (float64 for float sums)
    dtype: np.dtype          # the result's dtype (NumPy's)
    loc: object = None


@dataclass
class TypedIndexed:
    kernel: Kernel
    inputs: list             # IInput
    values: dict             # value name -> (dtype, rank)
    ops: list                # TypedOp, TSlice, TTranspose, TPad, TPlace, TBroadcast,
                             # TCast (in order)
    outputs: list            # (value name, dtype)
    reduce: TReduce | None   # the kernel's single result when it reduces
    params: list             # run-time integers, in the order of the array P
    slices: dict             # slice target -> items normalized (for layout.py)
    int_checks: list         # (input index, dtype) as in Typed

    @property
    def out_dtypes(self):
        return [d for _, d in self.outputs]


def indexed_kind(value):
    """(dtype, ndim, weak type) of a call argument of an indexed kernel."""
    t = type(value)
    if t is np.ndarray or isinstance(value, np.generic):
        dt = value.dtype
        if dt.char not in SUPPORTED or not dt.isnative:
            raise Unsupported(f"dtype {dt}")
        return dt, value.ndim, None
    if t is bool:
        return np.dtype(bool), 0, None
    if t is int:
        _require_int64(value)
        return np.dtype(np.int64), 0, int
    if t is float:
        return np.dtype(np.float64), 0, float
    raise Unsupported(f"a {t.__name__} argument")


def _reduce_dtypes(op, dt):
    """(accumulator, result) dtypes of ``np.<op>`` over an array of ``dt``."""
    one = np.zeros((1,), dt)
    out = getattr(one, op)().dtype
    if out.char not in SUPPORTED:
        raise Unsupported(f"np.{op} of {dt} gives {out}")
    if op in ("max", "min"):
        return out, out
    if op == "mean" or out.kind == "f":
        return np.dtype(np.float64), out
    return out, out


def specialize_indexed(kernel: Kernel, kinds) -> TypedIndexed:
    """``kernel`` typed for arguments of these kinds (``indexed_kind`` of each)."""
    inputs = [IInput(n, dt, nd, weak) for n, (dt, nd, weak) in zip(kernel.inputs, kinds)]
    current = {}
    values = {}
    params = []
    for k, inp in enumerate(inputs):
        v = f"in{k}"
        current[inp.name] = (v, inp.dtype, inp.weak if inp.weak is not None else inp.dtype)
        values[v] = (inp.dtype, inp.ndim)
        params += [f"dim_{v}_{a}" for a in range(inp.ndim)]
        params += [f"st_{v}_{a}" for a in range(inp.ndim)]
    int_checks: set = set()
    ops, slices, reduce = [], {}, None

    def source(name):
        if name not in current:
            raise Unsupported(f"operand {name!r} not defined in the group")
        vname, dt, _ = current[name]
        return vname, dt, values[vname][1]

    for j, op in enumerate(kernel.ops):
        target = f"v{j}"
        if reduce is not None:
            raise Unsupported("a statement after a reduction")
        if isinstance(op, Op):
            typed = _typed_op(op, target, current, int_checks)
            rank = max([values[a][1] for a, _ in typed.args if a != "const"], default=0)
            values[target] = (typed.loop[-1], rank)
            ops.append(typed)
        elif isinstance(op, Slice):
            src, dt, rank = source(op.source)
            items, maps, out_rank = _normalize_items(op.items, rank, kernel.inputs, inputs,
                                                     target)
            slices[target] = items
            values[target] = (dt, out_rank)
            for a, m in enumerate(maps):
                params += ([f"start_{target}_{a}", f"step_{target}_{a}"]
                           if m[0] == "range" else [f"at_{target}_{a}"])
            ops.append(TSlice(target, src, tuple(maps), op.loc))
            current[op.target] = (target, dt, dt)
        elif isinstance(op, Transpose):
            src, dt, rank = source(op.source)
            axes = tuple(range(rank))[::-1] if op.axes is None else tuple(
                a + rank if a < 0 else a for a in op.axes)
            if sorted(axes) != list(range(rank)):
                raise Unsupported(f"transpose axes {op.axes} for rank {rank}")
            values[target] = (dt, rank)
            ops.append(TTranspose(target, src, axes, op.loc))
            current[op.target] = (target, dt, dt)
        elif isinstance(op, Pad):
            src, dt, rank = source(op.source)
            widths = tuple(op.widths)
            if len(widths) == 1 and rank != 1:
                widths = widths * rank
            if len(widths) != rank or any(len(w) != 2 or min(w) < 0 for w in widths):
                raise Unsupported(f"pad widths {op.widths} for rank {rank}")
            if op.mode not in ("constant", "edge"):
                raise Unsupported(f"np.pad mode {op.mode!r}")
            value = op.value
            if op.mode == "constant":
                if type(value) not in (int, float, bool) or \
                        np.array(value).astype(dt) != value:
                    raise Unsupported(f"pad value {value!r} for {dt}")
            values[target] = (dt, rank)
            ops.append(TPad(target, src, widths, op.mode, value, dt, op.loc))
            current[op.target] = (target, dt, dt)
        elif isinstance(op, Place):
            src, dt, rank = source(op.source)
            like, like_dt, like_rank = source(op.like)
            if not (like.startswith("in") and src.startswith("in")):
                raise Unsupported("a placement of or like a computed value")
            if dt.kind != "f" or like_dt != dt:
                raise Unsupported(f"placing {dt} into the shape of a {like_dt} array")
            if type(op.value) is not float or op.value != 0:
                raise Unsupported(f"placement fill {op.value!r}")
            if any(it[0] not in ("index", "slice", "ellipsis") for it in op.items):
                raise Unsupported(f"placement at {op.items}")
            items, maps, out_rank = _normalize_items(op.items, like_rank, kernel.inputs,
                                                     inputs, target)
            if out_rank != rank or any(it[0] == "slice" and it[3] not in (None, ("int", 1))
                                       for it in items):
                raise Unsupported(f"placement of rank {rank} at {op.items}")
            slices[target] = items
            out_maps, src_axis = [], 0
            for a, m in enumerate(maps):
                if m[0] == "fixed":
                    out_maps.append(("fixed",))
                    params.append(f"at_{target}_{a}")
                else:
                    out_maps.append(("range", src_axis))
                    src_axis += 1
                    params.append(f"start_{target}_{a}")
            values[target] = (dt, like_rank)
            ops.append(TPlace(target, src, like, tuple(out_maps), op.value, dt, op.loc))
            current[op.target] = (target, dt, dt)
        elif isinstance(op, Broadcast):
            src, dt, rank = source(op.source)
            like, like_dt, like_rank = source(op.like)
            if not (like.startswith("in") and src.startswith("in")) or rank != 0:
                raise Unsupported("a broadcast of or like a computed value, or of an array")
            if like_dt.kind != "f" or like_dt.char not in SUPPORTED or dt.kind not in "fiub":
                raise Unsupported(f"broadcasting {dt} like a {like_dt} array")
            values[target] = (like_dt, like_rank)
            ops.append(TBroadcast(target, src, like, dt, like_dt, op.loc))
            current[op.target] = (target, like_dt, like_dt)
        elif isinstance(op, Cast):
            src, dt, rank = source(op.source)
            to = np.dtype(op.dtype)
            if to.char not in SUPPORTED:
                raise Unsupported(f"astype {to}")
            if dt.kind == "f" and to.kind in "iu":
                raise Unsupported(f"astype {dt} -> {to}")
            values[target] = (to, rank)
            ops.append(TCast(target, src, dt, to, op.loc))
            current[op.target] = (target, to, to)
        elif isinstance(op, Reduce):
            src, dt, rank = source(op.source)
            if op.op not in REDUCTIONS:
                raise Unsupported(f"np.{op.op}")
            axis = op.axis
            axes = tuple(range(rank)) if axis is None else (
                (axis,) if isinstance(axis, int) else tuple(axis))
            axes = tuple(sorted(a + rank if a < 0 else a for a in axes))
            if len(set(axes)) != len(axes) or any(not 0 <= a < rank for a in axes):
                raise Unsupported(f"axis {axis} for rank {rank}")
            if not axes:
                raise Unsupported("a reduction over no axis")
            acc, out = _reduce_dtypes(op.op, dt)
            reduce = TReduce(target, src, op.op, axes, bool(op.keepdims), dt, acc, out,
                             op.loc)
            values[target] = (out, rank if op.keepdims else rank - len(axes))
            current[op.target] = (target, out, out)
        else:
            raise Unsupported(f"statement {op!r}")
    for vname, (_, rank) in values.items():
        if not vname.startswith("in"):
            params += [f"dim_{vname}_{a}" for a in range(rank)]
    outputs = [(current[n][0], current[n][1]) for n in kernel.outputs]
    if reduce is not None and (len(outputs) != 1 or outputs[0][0] != reduce.target):
        raise Unsupported("a reduction must be the kernel's only result")
    if reduce is None and len({values[v][1] for v, _ in outputs}) != 1:
        raise Unsupported("results of different ranks")
    return TypedIndexed(kernel, inputs, values, ops, outputs, reduce, params, slices,
                        sorted(int_checks, key=lambda c: c[0]))


def _normalize_items(items, rank, names, inputs, target):
    """(items with the ellipsis expanded and bounds as ("int", v) / ("arg", input
    index) / None, per source axis ("range", target axis) or ("fixed",), the rank of
    the result)."""
    def bound(b):
        if b is None:
            return None
        if isinstance(b, str):
            if b not in names:
                raise Unsupported(f"index {b!r} is not a kernel input")
            k = names.index(b)
            inp = inputs[k]
            if inp.ndim != 0 or inp.dtype.kind not in "iu" or inp.weak is float:
                raise Unsupported(f"index {b!r} is not an integer")
            return ("arg", k)
        if type(b) is not int:
            raise Unsupported(f"index {b!r}")
        return ("int", b)

    consumed = sum(1 for it in items if it[0] in ("slice", "index"))
    if sum(1 for it in items if it[0] == "ellipsis") > 1 or consumed > rank:
        raise Unsupported(f"too many indices for rank {rank}")
    full = []
    for it in items:
        if it[0] == "ellipsis":
            full += [("slice", None, None, None)] * (rank - consumed)
            consumed = rank
        else:
            full.append(it)
    full += [("slice", None, None, None)] * (rank - consumed)
    out, maps, o = [], [], 0
    for it in full:
        if it[0] == "slice":
            out.append(("slice", bound(it[1]), bound(it[2]), bound(it[3])))
            maps.append(("range", o))
            o += 1
        elif it[0] == "index":
            out.append(("index", bound(it[1])))
            maps.append(("fixed",))
        elif it[0] == "newaxis":
            out.append(("newaxis",))
            o += 1
        else:
            raise Unsupported(f"index item {it!r}")
    return tuple(out), maps, o
