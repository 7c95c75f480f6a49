"""The run-time integers of an indexed kernel, from its arguments' shapes and strides.

``ir.specialize_indexed`` fixes dtypes and ranks; a call's shapes, strides and slice
bounds go to the kernel as an ``int64`` array ``P`` (``TypedIndexed.params``), so one
compiled kernel serves every shape.  The values that are 0 or 1 (axes of length 1,
unit steps, unit strides) are also *baked*: the renderer writes them as literals,
which keeps inner loops contiguous and lets a length-1 axis broadcast (read at 0).
So are the slice starts, steps and indices the source writes as numbers (``p[2:]``,
``p[::2]``; not ``p[-2:]`` or ``p[::-1]``, whose starts depend on the shape): the
kernel's index forms then have literal offsets (its interior bounds and scratch rows,
``kernels/c.py``).  Baked values key the compiled variant, so one that differs in a
later call compiles another.

Whatever NumPy would refuse (shapes that do not broadcast, an index out of range, a
zero step, padding an empty axis) raises ``Unsupported``: the caller runs the group
with NumPy, which raises its own error from the user's line.
"""
from __future__ import annotations

import operator

import numpy as np

from astjax.kernels import ir
from astjax.kernels.ir import Unsupported


class Layout:
    __slots__ = ("params", "baked", "domain", "out_shapes")

    def __init__(self, params, baked, domain, out_shapes):
        self.params = params          # np.int64 array, in typed.params order
        self.baked = baked            # tuple of (name, 0 or 1), sorted
        self.domain = domain          # the shape the kernel's loops run over
        self.out_shapes = out_shapes


def _int(typed, args, spec):
    """A slice bound's value (``spec``: None, ("int", v) or ("arg", input index))."""
    if spec is None:
        return None
    if spec[0] == "int":
        return spec[1]
    v = args[spec[1]]
    if type(v) is bool or not isinstance(v, (int, np.integer)):
        raise Unsupported(f"index {v!r}")
    return operator.index(v)


def _source_known(it):
    """Names suffixes of a slice item's parameters that the source fixes, whatever
    the shapes: a step written as a positive number (or none), a start written as a
    non-negative number with such a step, an index written as a non-negative number."""
    if it[0] == "index":
        return ("at",) if it[1] is not None and it[1][0] == "int" and it[1][1] >= 0 else ()
    step = it[3]
    if step is not None and (step[0] != "int" or step[1] <= 0):
        return ()
    start = it[1]
    if start is None or (start[0] == "int" and start[1] >= 0):
        return ("start", "step")
    return ("step",)


def layout(typed: ir.TypedIndexed, args) -> Layout:
    shapes = {}
    P = {}
    known = set()             # parameters the source fixes: baked whatever their value
    for k, inp in enumerate(typed.inputs):
        v = f"in{k}"
        if not inp.ndim:
            shapes[v] = ()
            continue
        a = args[k]
        shapes[v] = a.shape
        for ax, (n, st) in enumerate(zip(a.shape, a.strides)):
            q, r = divmod(st, a.itemsize)
            if r:
                raise Unsupported("strides not a multiple of the item size")
            P[f"dim_{v}_{ax}"] = n
            P[f"st_{v}_{ax}"] = q if n != 1 else 0
    for op in typed.ops:
        t = op.target
        if isinstance(op, ir.TypedOp):
            try:
                shapes[t] = np.broadcast_shapes(*[shapes[a] for a, _ in op.args
                                                  if a != "const"])
            except ValueError:
                raise Unsupported("shapes that do not broadcast") from None
        elif isinstance(op, ir.TSlice):
            src = shapes[op.source]
            out, ax = [], 0
            for it in typed.slices[t]:
                if it[0] == "newaxis":
                    out.append(1)
                    continue
                n = src[ax]
                known.update(f"{what}_{t}_{ax}" for what in _source_known(it))
                if it[0] == "index":
                    i = _int(typed, args, it[1])
                    if not -n <= i < n:
                        raise Unsupported("index out of range")
                    P[f"at_{t}_{ax}"] = i + n if i < 0 else i
                else:
                    bounds = [_int(typed, args, b) for b in it[1:]]
                    if bounds[2] == 0:
                        raise Unsupported("slice step 0")
                    start, stop, step = slice(*bounds).indices(n)
                    out.append(len(range(start, stop, step)))
                    P[f"start_{t}_{ax}"] = start
                    P[f"step_{t}_{ax}"] = step
                ax += 1
            shapes[t] = tuple(out)
        elif isinstance(op, ir.TTranspose):
            src = shapes[op.source]
            shapes[t] = tuple(src[a] for a in op.axes)
        elif isinstance(op, ir.TPlace):
            shapes[t] = _place(typed, args, op, shapes, P)
        elif isinstance(op, ir.TBroadcast):
            shapes[t] = shapes[op.like]
        elif isinstance(op, ir.TPad):
            src = shapes[op.source]
            if 0 in src:
                raise Unsupported("padding an empty array")
            shapes[t] = tuple(n + lo + hi for n, (lo, hi) in zip(src, op.widths))
        else:                                   # TCast
            shapes[t] = shapes[op.source]
    red = typed.reduce
    if red is not None:
        src = shapes[red.source]
        domain = src
        if red.keepdims:
            out = tuple(1 if a in red.axes else n for a, n in enumerate(src))
        else:
            out = tuple(n for a, n in enumerate(src) if a not in red.axes)
        shapes[red.target] = out
        out_shapes = [out]
        if not domain or 0 in domain:
            raise Unsupported("a reduction over an empty or 0-d array")
    else:
        out_shapes = [shapes[v] for v, _ in typed.outputs]
        domain = out_shapes[0]
        if any(sh != domain for sh in out_shapes):
            raise Unsupported("results of different shapes")
        if not domain:
            raise Unsupported("0-d results (NumPy gives scalars)")
    for v, sh in shapes.items():
        if not v.startswith("in"):
            for ax, n in enumerate(sh):
                P[f"dim_{v}_{ax}"] = n
    values = [P[name] for name in typed.params]
    baked = tuple((name, val) for name, val in zip(typed.params, values)
                  if val in (0, 1) or name in known)
    return Layout(np.array(values, dtype=np.int64), baked, domain, out_shapes)


def _place(typed, args, op, shapes, P):
    """The shape of a placement (its ``like`` input's); its block's row indices and
    starts go to ``P``.  An index out of range, or a source that is not the block's
    shape (NumPy would broadcast it, or raise), is left to NumPy."""
    t = op.target
    out = shapes[op.like]
    block = []
    for ax, (it, n) in enumerate(zip(typed.slices[t], out)):
        if it[0] == "index":
            i = _int(typed, args, it[1])
            if not -n <= i < n:
                raise Unsupported("index out of range")
            P[f"at_{t}_{ax}"] = i + n if i < 0 else i
        else:
            start, stop, _ = slice(_int(typed, args, it[1]), _int(typed, args, it[2])
                                   ).indices(n)
            block.append(max(0, stop - start))
            P[f"start_{t}_{ax}"] = start
    if tuple(block) != shapes[op.source]:
        raise Unsupported("a placed value of another shape than its block")
    return out


def cached(cache: dict, key, typed, args):
    """``layout(typed, args)`` memoized in ``cache`` under ``key`` (the argument kinds
    and the shape/stride key of a call); None when the kernel cannot take these
    arguments (the caller runs NumPy).  The cache is bounded: it is cleared past 256."""
    lay = cache.get(key, False)
    if lay is False:
        try:
            lay = layout(typed, args)
        except Unsupported:
            lay = None
        if len(cache) > 256:
            cache.clear()
        cache[key] = lay
    return lay
