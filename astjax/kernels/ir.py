"""The kernel IR: a fused group as scalar statements on the output index.

A ``Kernel`` is what the fusion plan (``passes/fusion.py``) groups, said without
NumPy: named inputs, a list of ``Op`` statements (a ufunc name applied to earlier
values or numbers) and the names of the results.  Every value is an expression of the
output index: inputs are read through their broadcast strides, so one index names one
element of every operand.  Renderers (``kernels/c.py``; the CUDA backend later) emit a
loop over that index around the statements.

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
        return np.dtype(np.int64), True, int
    if t is float:
        return np.dtype(np.float64), True, float
    raise Unsupported(f"a {t.__name__} argument")


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
        target = f"v{j}"
        ops.append(TypedOp(target, op.ufunc, tuple(args), tuple(loop), op.operator,
                           op.loc))
        current[op.target] = (target, loop[-1], loop[-1])
    outputs = [(current[n][0], current[n][1]) for n in kernel.outputs]
    return Typed(kernel, inputs, ops, outputs, sorted(int_checks, key=lambda c: c[0]))


def from_group(name, inputs, members, outputs, cost=1):
    """A ``Kernel`` from the fusion pass's record of a group (``fusion._group``):
    members are (target, ufunc name, operands, operator, location)."""
    ops = [Op(t, uf, tuple(args), operator or "", loc)
           for t, uf, args, operator, loc in members]
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
