"""Helpers for vmapped code (imported by generated code as ``rb``).

Convention: inside vmapped code a batched array carries the batch dimension as its
LAST axis.  NumPy aligns shapes from the right, so an elementwise operation between a
batched array and an unbatched one that was given a trailing axis of size 1
(``lift``) broadcasts per example with no shape bookkeeping, and selecting per lane
(``np.where(pred, a, b)`` with ``pred`` of shape ``(B,)``) needs none either.  Axis
arguments written for one example keep their meaning when non-negative; the helpers
here translate the rest.

The batching rules (``templates/batch.py``) call the helpers below.  They see every
array operand batch-last; a trailing axis of size 1 means "the same for every
example" (a lifted operand), and a plain Python scalar is a per-example scalar shared
by all examples.  Three devices recur:

- ``_front``/``_back``: the batch axis first, so that NumPy functions that work on
  stacks of matrices (``np.linalg.*``, ``np.matmul``) or along explicit axes run on
  all examples at once (per-example axes then shift by one);
- einsum with one extra letter for the batch (``_batched_einsum``): products,
  contractions and their cotangents, where an operand that is the same for every
  example keeps no batch letter, so NumPy can still hand the work to BLAS;
- ``per_lane``: a loop over the examples, for the rare second-order helpers whose
  vectorized form would not pay for itself.
"""
from __future__ import annotations

import builtins
import operator

import numpy as np

from astjax.errors import ArgumentError


# ------------------------------------------------------------------ entering and leaving

def batch_size(sizes_by_name: dict) -> int:
    """The one batch size of all batched inputs; a clear error naming them otherwise."""
    sizes = {name: n for name, n in sizes_by_name.items() if n is not None}
    distinct = sorted(set(sizes.values()))
    if len(distinct) > 1:
        parts = ", ".join(f"{name} has {n}" for name, n in sizes.items())
        raise ArgumentError(f"vmap got inconsistent batch sizes: {parts}")
    if not distinct:
        raise ArgumentError("vmap needs at least one batched argument, or axis_size")
    return distinct[0]


def leaf_axis_size(x, axis):
    """Size of ``axis`` of every array leaf of ``x`` (they must agree)."""
    from astjax.tree_util import tree_leaves
    sizes = {np.shape(leaf)[axis] for leaf in tree_leaves(x)}
    if len(sizes) != 1:
        raise ArgumentError(f"vmap: leaves of one argument disagree on the batch size: "
                            f"{sorted(sizes)}")
    return sizes.pop()


def to_last(x, axis):
    """Move each array leaf's batch axis ``axis`` to the end."""
    from astjax.tree_util import tree_map
    return tree_map(lambda leaf: np.moveaxis(np.asarray(leaf), axis, -1), x)


def from_last_vjp(g, axis, batched):
    """Adjoint of ``from_last``: the batch axis back to the end (summed if broadcast)."""
    if g is None:
        return None
    from astjax.tree_util import tree_map
    if axis is None:
        return g
    if batched:
        return tree_map(lambda leaf: np.moveaxis(np.asarray(leaf), axis, -1), g)
    return tree_map(lambda leaf: np.sum(np.asarray(leaf), axis=axis), g)


def from_last(x, axis, size, batched):
    """Leave vmapped code: batch axis to ``axis`` (an unbatched result is broadcast)."""
    from astjax.tree_util import tree_map
    if axis is None:
        if batched:
            raise ArgumentError("vmap: out_axes=None for an output that depends on the "
                                "batched inputs")
        return x

    def move(leaf):
        leaf = np.asarray(leaf)
        if not batched:
            leaf = np.broadcast_to(leaf[..., None], leaf.shape + (size,))
        return np.moveaxis(leaf, -1, axis)
    return tree_map(move, x)


# -------------------------------------------------------------------------- operands

def _rebuild(x, items):
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*items)
    return type(x)(items)


def lift(x):
    """An unbatched operand of a batched operation: arrays (and NumPy scalars, inside
    containers too) get a trailing axis of 1.  Python scalars stay as they are (they
    broadcast, and keep NumPy's weak-scalar type promotion)."""
    if isinstance(x, np.ndarray):
        return x[..., None]
    if isinstance(x, np.generic):
        return np.asarray(x)[..., None]
    if isinstance(x, (list, tuple)):
        return _rebuild(x, [lift(v) for v in x])
    if isinstance(x, dict):
        return {k: lift(v) for k, v in x.items()}
    return x


def refuse_shared_update(x, message):
    """An update of an array inside a per-example branch while other names may share
    its memory (transforms/batch.py): refused where it runs; a list or dict passes."""
    if isinstance(x, np.ndarray):
        refuse_here(message, "update one name only (make the others copies), or select "
                    "the new value with np.where outside the branch")


def write_back(memory, new):
    """An array updated as a new value (a per-example index) written back into the
    memory other names share, which it returns; a list or dict is the new one."""
    if isinstance(memory, np.ndarray) and isinstance(new, np.ndarray) and \
            memory.shape == new.shape:
        memory[...] = new
        return memory
    return new


def broadcast_batch(x, size):
    """An unbatched value assigned to a batched variable: one copy per lane."""
    if isinstance(x, (list, tuple)):
        return _rebuild(x, [broadcast_batch(v, size) for v in x])
    if isinstance(x, dict):
        return {k: broadcast_batch(v, size) for k, v in x.items()}
    if not isinstance(x, (np.ndarray, np.generic, bool, int, float, complex)):
        return x  # None, strings, slices, functions...: the same for every example
    arr = np.asarray(x)
    return np.array(np.broadcast_to(arr[..., None], arr.shape + (size,)))


def _zeros_like_tree(x):
    """Zeros shaped and typed like ``x`` (containers recursively; other leaves kept)."""
    if isinstance(x, np.ndarray):
        return np.zeros_like(x)
    if isinstance(x, np.generic):
        return x.dtype.type(0)
    if isinstance(x, (bool, int, float, complex)):
        return type(x)(0)
    if isinstance(x, (list, tuple)):
        return _rebuild(x, [_zeros_like_tree(v) for v in x])
    if isinstance(x, dict):
        return {k: _zeros_like_tree(v) for k, v in x.items()}
    return x


def select(pred, on_true, on_false):
    """Per lane: ``on_true`` where ``pred`` (shape (B,)) holds, else ``on_false``.

    None on one side is a zero (a symbolic zero cotangent, or a variable that lane
    never defined): zeros shaped like the other side are selected there.  Lanes
    that take different sides must agree on the value's per-example shape (JAX's
    cond requires it): broadcasting them together would silently change what
    later shape-dependent code (a sum, ``len``) computes, so that is refused.
    """
    if on_true is on_false:
        return on_true
    if on_true is None or on_false is None:
        defined = on_false if on_true is None else on_true
        if isinstance(defined, (int, np.integer)):
            # an integer (a loop counter, an index) that the other lanes never defined:
            # they never read it, and indexing code needs it as the plain index it is
            # (cotangents, for which None means zero, are never integers)
            return defined
    if on_false is None:
        on_false = _zeros_like_tree(on_true)
    elif on_true is None:
        on_true = _zeros_like_tree(on_false)
    if isinstance(on_true, (list, tuple)):
        if not isinstance(on_false, (list, tuple)) or len(on_true) != len(on_false):
            return _one_side(pred, on_true, on_false)
        return _rebuild(on_true, [select(pred, a, b) for a, b in zip(on_true, on_false)])
    if isinstance(on_true, dict):
        if not isinstance(on_false, dict) or list(on_true) != list(on_false):
            return _one_side(pred, on_true, on_false)
        return {k: select(pred, on_true[k], on_false[k]) for k in on_true}
    if _example_shape(on_true) != _example_shape(on_false):
        return _one_side(pred, on_true, on_false)
    return np.where(pred, on_true, on_false)


def _example_shape(x):
    """The shape one example sees of a batch-last value (None: not an array value)."""
    if isinstance(x, np.ndarray):
        return x.shape[:-1] if x.ndim else ()
    if isinstance(x, (np.generic, bool, int, float, complex)):
        return ()
    if isinstance(x, (list, tuple, dict)):
        return type(x)
    return None


def _describe(x):
    shape = _example_shape(x)
    if isinstance(shape, tuple):
        return f"shape {shape}"
    if isinstance(x, (list, tuple, dict)):
        return f"a {type(x).__name__} of {len(x)}"
    return type(x).__name__


def _one_side(pred, on_true, on_false):
    """Values of different shapes or structures on the two sides: fine when every
    lane takes the same side (that side is the value), refused otherwise."""
    p = np.asarray(pred)
    if p.all():
        return on_true
    if not p.any():
        return on_false
    refuse_here(f"vmap: the examples of this batch take different paths here and end "
                f"with values of different shapes ({_describe(on_true)} on one path, "
                f"{_describe(on_false)} on the other); one batched array cannot hold both "
                "(JAX's cond refuses this too)",
                "give the variable the same shape on every path (e.g. start from "
                "np.zeros_like(...) instead of 0.0), or use np.where")


def refuse_here(message, hint=None):
    """Raise a refusal found while batched code runs, located at the user's line
    behind the generated line that called the runtime (when astjax is loaded; a
    standalone module gets the message alone)."""
    import sys
    from astjax import runtime_array as ra
    errors = sys.modules.get("astjax.errors")
    where = ra.user_line()
    if where is not None and errors is not None:
        raise errors.TransformError(message, where, hint)
    raise ArgumentError(message + (f"\nhint: {hint}" if hint else ""))


class Unbatched:
    """An unbatched value pushed on a tape that also holds batched ones."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def popped(value, size):
    """A value popped from such a tape, for a batched variable (``size``: the batch
    size) or an unbatched one (None)."""
    if isinstance(value, Unbatched):
        return value.value if size is None else broadcast_batch(value.value, size)
    return value


def continue_lanes(active, test, *exit_flags):
    """Lanes still looping: active before, the test holds, and no exit flag is set."""
    out = np.logical_and(active, test)
    for f in exit_flags:
        out = np.logical_and(out, np.logical_not(f))
    return out


def all_lanes_flags(flags):
    """True once every lane has set one of its exit flags."""
    left = np.zeros((), bool)
    for f in flags:
        left = np.logical_or(left, f)
    return bool(np.all(left))


def any_lane(pred):
    return bool(np.any(pred))


def all_lanes(pred):
    return bool(np.all(pred))


# ------------------------------------------------------------------- static facts

def shape(x):
    """Per-example shape of a batched array."""
    return np.shape(x)[:-1]


def ndim(x):
    return np.ndim(x) - 1


def size(x, axis=None):
    if axis is not None:
        return np.shape(x)[:-1][axis]
    return int(np.prod(np.shape(x)[:-1]))


def length(x):
    if isinstance(x, np.ndarray):
        if x.ndim < 2:
            raise TypeError("len() of a 0-d array (inside vmap)")
        return x.shape[0]
    return len(x)


def example(x):
    """A stand-in for one example (the first lane) of a batch-last value: what the
    static facts of generated code (shapes, axes, plans) are computed from."""
    if isinstance(x, np.ndarray):
        return x[..., 0] if x.ndim else x
    if isinstance(x, (list, tuple)):
        return _rebuild(x, [example(v) for v in x])
    if isinstance(x, dict):
        return {k: example(v) for k, v in x.items()}
    return x


def refuse(what, why="its output's size differs per example"):
    """Batching rule of a primitive that cannot be batched: a clear error."""
    raise ArgumentError(f"vmap cannot batch {what}: {why}")


def contains(container, item):
    """``item in container`` under vmap: membership in a dict's keys or a list of
    Python values is the same for every example; with arrays it may not be."""
    if isinstance(item, np.ndarray) or isinstance(container, np.ndarray) or (
            isinstance(container, (list, tuple)) and any(
                isinstance(c, np.ndarray) for c in container)):
        refuse("`x in container` on arrays", "the answer may differ per example; "
               "compare with np.any(container == x)")
    return item in container


def clamp_index(index, n):
    """lax.switch's clamped branch index, per example."""
    return np.clip(np.asarray(index), 0, n - 1).astype(int)


# ------------------------------------------------------------------------- axes

def axis(axis, x):
    """A per-example axis argument as an axis of the batched array (None: all but batch)."""
    nd = np.ndim(x) - 1
    if axis is None or not nd:   # (NumPy lets a scalar take axis 0 or -1: nothing to do)
        return tuple(range(nd))
    if isinstance(axis, (tuple, list)):
        return tuple(a % nd for a in axis)
    return axis % nd


def index(ix):
    """A per-example index for a batched array: ``...`` must not reach the batch axis."""
    items = ix if isinstance(ix, tuple) else (ix,)
    if any(i is Ellipsis for i in items):
        return items + (slice(None),)
    return ix


def index_full(ix):
    """A per-example index plus a full slice for the batch axis."""
    items = ix if isinstance(ix, tuple) else (ix,)
    if any(i is Ellipsis for i in items):
        return items + (slice(None),)
    return items + (Ellipsis, slice(None))


def _nd(x):
    return np.ndim(x) - 1


def axis_all(axis, nd):
    if not nd:   # a scalar example: NumPy accepts axis 0 or -1, and there is nothing to do
        return ()
    if isinstance(axis, (tuple, list)):
        return tuple(a % nd for a in axis)
    return axis % nd


def _shifted(axis, nd):
    """Per-example axes (None: all) as axes of the batch-first array."""
    if axis is None or not nd:
        return tuple(range(1, nd + 1))
    if isinstance(axis, (tuple, list)):
        return tuple(a % nd + 1 for a in axis)
    return axis % nd + 1


# --------------------------------------------------------- batch-size bookkeeping

def _bsize(x):
    """The batch size a batch-last operand carries (1: the same for every example)."""
    if isinstance(x, np.ndarray) and x.ndim:
        return x.shape[-1]
    if isinstance(x, (list, tuple)):
        return builtins.max([_bsize(v) for v in x], default=1)
    if isinstance(x, dict):
        return builtins.max([_bsize(v) for v in x.values()], default=1)
    return 1


def _sizes(*xs):
    return builtins.max(_bsize(x) for x in xs)


def _as_batched(x):
    """A batch-last array for any operand (a Python scalar: one per-example scalar; a
    list or tuple holds batch-last items, as every operand of batched code does)."""
    if isinstance(x, np.ndarray) and x.ndim:
        return x
    if isinstance(x, (list, tuple)):
        return _asarray_tree(x)
    return np.asarray(x)[..., None]


def _expand(x, size):
    """``x`` (batch-last) with its batch axis broadcast to ``size`` (a view)."""
    x = _as_batched(x)
    if x.shape[-1] == size:
        return x
    return np.broadcast_to(x, x.shape[:-1] + (size,))


def _common_batch(arrays):
    arrays = [_as_batched(a) for a in arrays]
    size = builtins.max(a.shape[-1] for a in arrays)
    return [_expand(a, size) for a in arrays]


def _unbatch(x):
    """(value, batched): a batch-last operand as itself when it differs per example,
    else as its one example (no batch axis)."""
    if isinstance(x, (list, tuple)) and any(isinstance(v, (np.ndarray, list, tuple))
                                            for v in x):
        x = _asarray_tree(x)      # (a list of batch-last items; a shape stays a shape)
    if isinstance(x, np.ndarray) and x.ndim and x.shape[-1] != 1:
        return x, True
    if isinstance(x, np.ndarray) and x.ndim:
        return x[..., 0], False
    return np.asarray(x), False


def _front(x):
    return np.moveaxis(x, -1, 0)


def _back(x):
    return np.moveaxis(x, 0, -1)


def _front_as(x, size):
    return _front(_expand(x, size))


def _back_tree(res):
    if isinstance(res, tuple):
        return _rebuild(res, [_back(r) for r in res])
    return _back(res)


def _lift_result(out, batched):
    """A result computed without the batch axis (no operand differed per example)."""
    if batched:
        return out
    if isinstance(out, tuple):
        return _rebuild(out, [np.asarray(o)[..., None] for o in out])
    return np.asarray(out)[..., None]


def _float_dtype(x, fallback=None):
    dtype = getattr(x, "dtype", None)
    if dtype is not None and np.issubdtype(dtype, np.inexact):
        return dtype
    return fallback


def _fit_dtype(out, x):
    dtype = _float_dtype(x)
    if dtype is not None and getattr(out, "dtype", dtype) != dtype:
        out = _as_dtype(out, dtype)
    return out


def _as_dtype(out, dtype):
    """``out`` cast to ``dtype``, a complex one to a real dtype by its real part (the
    transpose of putting a real into a complex)."""
    out = np.asarray(out)
    if out.dtype.kind == "c" and np.dtype(dtype).kind != "c":
        out = out.real
    return out.astype(dtype, copy=False)


def _zeros(x, size):
    """Zeros with the per-example shape of ``x``, batch ``size``, x's float dtype."""
    x = _as_batched(x)
    return np.zeros(x.shape[:-1] + (size,), dtype=_float_dtype(x, np.float64))


# ------------------------------------------------------------------ per-example loop

def _lane(x, i):
    if isinstance(x, np.ndarray):
        if not x.ndim:
            return x
        return x[..., builtins.min(i, x.shape[-1] - 1)]
    if isinstance(x, (list, tuple)):
        return _rebuild(x, [_lane(v, i) for v in x])
    if isinstance(x, dict):
        return {k: _lane(v, i) for k, v in x.items()}
    return x


def _stack_lanes(outs):
    first = next((o for o in outs if o is not None), None)
    if first is None:
        return None
    if isinstance(first, (list, tuple)):
        cols = [[o[k] if o is not None else None for o in outs] for k in range(len(first))]
        return _rebuild(first, [_stack_lanes(c) for c in cols])
    if isinstance(first, dict):
        return {k: _stack_lanes([o.get(k) if o is not None else None for o in outs])
                for k in first}
    if isinstance(first, (str, bytes)):
        return first
    filled = [np.asarray(o) if o is not None else np.zeros_like(np.asarray(first))
              for o in outs]
    return np.stack(filled, axis=-1)


def per_lane(fn, data, *args):
    """``fn(*args)`` example by example, stacked batch-last.

    ``data``: the positions of ``args`` that hold batch-last values (containers of
    them too); the others are passed as they are.
    """
    size_ = _sizes(*(args[i] for i in data))
    outs = [fn(*[_lane(a, i) if k in data else a for k, a in enumerate(args)])
            for i in range(size_)]
    return _stack_lanes(outs)


# ---------------------------------------------------------------------- reductions

def argreduce(fn, a, axis, keepdims):
    if axis is None:
        flat_ = np.reshape(a, (-1, np.shape(a)[-1]))
        out = fn(flat_, axis=0)
        return out.reshape((1,) * _nd(a) + out.shape) if keepdims else out
    return fn(a, axis=axis_all(axis, _nd(a)), keepdims=keepdims)


def cumulative(fn, a, axis, dtype):
    if axis is None:
        return fn(np.reshape(a, (-1, np.shape(a)[-1])), axis=0, dtype=dtype)
    return fn(a, axis=axis_all(axis, _nd(a)), dtype=dtype)


def sorted_along(fn, a, axis, kind, stable):
    """np.sort / np.argsort per example (axis None sorts the flattened example)."""
    if axis is None:
        return fn(flat(a), axis=0, kind=kind, stable=stable)
    return fn(a, axis=axis_all(axis, _nd(a)), kind=kind, stable=stable)


def norm(x, ord, axis, keepdims):
    x = np.asarray(x)
    nd = _nd(x)
    if axis is None and ord is None:
        out = np.sqrt(np.sum(np.real(x * np.conj(x)), axis=tuple(range(nd))))
        return out.reshape((1,) * nd + out.shape) if keepdims else out
    if axis is None:
        axis = 0 if nd == 1 else (0, 1)
    out = np.linalg.norm(_front(x), ord=ord, axis=_shifted(axis, nd), keepdims=keepdims)
    return _back(out)


def allclose(a, b, rtol, atol, equal_nan):
    close = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    return np.all(close, axis=tuple(range(close.ndim - 1)))


def array_equal(a1, a2, equal_nan):
    a1, a2 = _as_batched(a1), _as_batched(a2)
    size_ = _sizes(a1, a2)
    if a1.shape[:-1] != a2.shape[:-1]:
        return np.zeros(size_, dtype=bool)
    same = a1 == a2
    if equal_nan:
        same = same | (np.isnan(a1) & np.isnan(a2))
    same = np.broadcast_to(same, a1.shape[:-1] + (size_,))
    return np.all(same, axis=tuple(range(same.ndim - 1)))


def py_extreme(args, key, which):
    """Python's max/min per example: the first extreme item of the arguments (or of
    the one iterable argument)."""
    if key is not None:
        refuse(f"{which}() with a key function", "use np.argmax/np.argmin on the keys")
    items = list(args[0]) if len(args) == 1 else list(args)
    stacked = np.stack(_common_batch(items))
    pick_ = np.argmax(stacked, axis=0) if which == "max" else np.argmin(stacked, axis=0)
    return np.take_along_axis(stacked, pick_[None], axis=0)[0]


def py_float(x):
    x = _as_batched(x)
    return np.reshape(x, (x.shape[-1],)).astype(np.float64)


def py_int(x, base):
    x = _as_batched(x)
    x = np.reshape(x, (x.shape[-1],))
    return np.trunc(x).astype(np.int64) if x.dtype.kind in "fc" else x.astype(np.int64)


def py_round(number, ndigits):
    x = _as_batched(number)
    if ndigits is None:
        return np.round(x).astype(np.int64)
    return np.round(x, ndigits)


def item(a, args):
    """``a.item(*args)`` per example (Python scalars become their NumPy type)."""
    from astjax import runtime_array as ra
    a = _as_batched(a)
    ix = ra.item_index(example(a), args)
    kind = type(a.dtype.type(0).item())
    return np.asarray(a[ix]).astype(np.result_type(kind) if kind is not bool else bool)


# --------------------------------------------------------------------- products

_BATCH_LETTERS = "ZYXWVUTSRQPONMLKJIHGFEDCBAzyxwvutsrqponmlkjihgfedcba"


def _free_letter(*specs):
    used = set("".join(specs))
    return next(c for c in _BATCH_LETTERS if c not in used)


def _batched_einsum(ins, out, operands, optimize=None):
    """Per-example ``einsum(",".join(ins) + "->" + out, *operands)`` on batch-last
    operands: a batch letter on each operand that differs per example."""
    z = _free_letter(out, *ins)
    specs, ops, any_batched = [], [], False
    for spec, op in zip(ins, operands):
        value, batched = _unbatch(op)
        specs.append(spec + z if batched else spec)
        ops.append(value)
        any_batched = any_batched or batched
    full = ",".join(specs) + "->" + out + (z if any_batched else "")
    if optimize is None:
        optimize = len(ops) > 1
    res = np.einsum(full, *ops, optimize=optimize)
    return _lift_result(res, any_batched)


def _letters(n, start=0):
    return "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXY"[start:start + n]


def einsum(subscripts, operands, optimize=False):
    """Per-example einsum (subscripts None: ``operands`` is the whole argument sequence,
    in either calling form)."""
    from astjax import runtime_array as ra
    if subscripts is None:
        subscripts, operands, _ = ra.einsum_canon(operands)
    ins, out = ra._einsum_parse(subscripts, operands)
    return _batched_einsum(ins, out, operands, optimize or None)


def _dot_specs(na, nb):
    """einsum subscripts of np.dot for operands of ranks ``na``, ``nb`` (both >= 1)."""
    sa = _letters(na)
    sb = list(_letters(nb, na))
    k = builtins.max(nb - 2, 0)
    sb[k] = sa[-1]
    sb = "".join(sb)
    out = sa[:-1] + sb.replace(sa[-1], "")
    return sa, sb, out


def dot(a, b):
    """Per-example ``np.dot``."""
    na, nb = _nd(_as_batched(a)), _nd(_as_batched(b))
    if na == 0 or nb == 0:
        return a * b
    if na <= 2 and nb <= 2:
        return matmul(a, b)
    sa, sb, out = _dot_specs(na, nb)
    return _batched_einsum([sa, sb], out, [a, b])


def dot_grad(t, a, b, which):
    """Batched cotangents of ``np.dot(a, b)`` (which=0: of a, 1: of b)."""
    if t is None:
        return None
    a_, b_ = _as_batched(a), _as_batched(b)
    na, nb = _nd(a_), _nd(b_)
    if na == 0 or nb == 0:
        return unbroadcast(t * (b if which == 0 else a), a if which == 0 else b)
    sa, sb, out = _dot_specs(na, nb)
    if which == 0:
        return unbroadcast(_batched_einsum([out, sb], sa, [t, b]), a)
    return unbroadcast(_batched_einsum([sa, out], sb, [a, t]), b)


def _align_stack(x, core, target):
    """A batch-first operand with ``core`` trailing core axes: singleton stack axes
    inserted after the batch axis up to ``target`` stack axes."""
    have = x.ndim - 1 - core
    if have < target:
        x = x.reshape(x.shape[:1] + (1,) * (target - have) + x.shape[1:])
    return x


def matmul(x, y):
    """Per-example ``x @ y`` (either operand may be the same for every example)."""
    xv, xb = _unbatch(x)
    yv, yb = _unbatch(y)
    nx, ny = xv.ndim - xb, yv.ndim - yb
    if not (xb or yb):
        return np.matmul(xv, yv)[..., None]
    xf = _front(xv) if xb else xv
    yf = _front(yv) if yb else yv
    vec_x, vec_y = nx == 1, ny == 1
    if vec_x and xb:
        xf = xf[:, None, :]
    if vec_y and yb:
        yf = yf[..., None]
    stack = builtins.max(builtins.max(nx, 2) - 2, builtins.max(ny, 2) - 2)
    if xb:
        xf = _align_stack(xf, 2, stack)
    if yb:
        yf = _align_stack(yf, 2, stack)
    out = np.matmul(xf, yf)
    if vec_y and yb:
        out = out[..., 0]
    if vec_x and xb:  # the row axis x was given: last once y's column axis is gone
        out = out[..., 0] if vec_y else out[..., 0, :]
    return _back(out)


def vecdot(x, y, axis):
    """Per-example ``np.vecdot`` (operands broadcast from the right, batch last)."""
    nd = builtins.max(_nd(_as_batched(x)), _nd(_as_batched(y)))
    ax = axis % nd - nd - 1
    return np.vecdot(_as_batched(x), _as_batched(y), axis=ax)


def outer(a, b):
    return _batched_einsum(["i", "j"], "ij", [flat(a), flat(b)])


def flat(x):
    x = _as_batched(x)
    return np.reshape(x, (-1, x.shape[-1]))


def inner(a, b):
    na, nb = _nd(_as_batched(a)), _nd(_as_batched(b))
    if na == 0 or nb == 0:
        return a * b
    sa, sb = _letters(na), _letters(nb, na)
    sb = sb[:-1] + sa[-1]
    return _batched_einsum([sa, sb], sa[:-1] + sb[:-1], [a, b])


def tensordot(a, b, axes):
    from astjax import runtime_array as ra
    a_, b_ = _as_batched(a), _as_batched(b)
    na, nb = _nd(a_), _nd(b_)
    ia, ib = ra._tensordot_axes(example(a_), example(b_), axes)
    sa = list(_letters(na))
    sb = list(_letters(nb, na))
    for i, j in zip(ia, ib):
        sb[j] = sa[i]
    out = "".join(c for k, c in enumerate(sa) if k not in ia) + "".join(
        c for k, c in enumerate(sb) if k not in ib)
    return _batched_einsum(["".join(sa), "".join(sb)], out, [a_, b_])


def kron(a, b):
    a, b = _as_batched(a), _as_batched(b)
    sa, sb = a.shape[:-1], b.shape[:-1]
    nd = builtins.max(len(sa), len(sb))
    sa = (1,) * (nd - len(sa)) + sa
    sb = (1,) * (nd - len(sb)) + sb
    ai = np.reshape(a, tuple(n for s in sa for n in (s, 1)) + a.shape[-1:])
    bi = np.reshape(b, tuple(n for s in sb for n in (1, s)) + b.shape[-1:])
    prod_ = ai * bi
    return np.reshape(prod_, tuple(p * q for p, q in zip(sa, sb)) + prod_.shape[-1:])


# ------------------------------------------------------------------- linear algebra

def linalg(fn, a, **kwargs):
    """A NumPy function on (stacks of) matrices, per example."""
    av, ab = _unbatch(a)
    if not ab:
        return _lift_result(fn(av, **kwargs), False)
    return _back_tree(fn(_front(av), **kwargs))


def solve(a, b):
    av, ab = _unbatch(a)
    bv, bb = _unbatch(b)
    na, nb = av.ndim - ab, bv.ndim - bb
    if not (ab or bb):
        return np.linalg.solve(av, bv)[..., None]
    af = _front(av) if ab else av
    bf = _front(bv) if bb else bv
    vector = nb == 1
    if vector:
        bf = bf[..., None]
    stack = builtins.max(na - 2, (2 if vector else nb) - 2)
    if ab:
        af = _align_stack(af, 2, stack)
    if bb:
        bf = _align_stack(bf, 2, stack)
    out = np.linalg.solve(af, bf)
    if vector:
        out = out[..., 0]
    return _back(out)


def chol_lower(x, upper):
    return np.swapaxes(x, -2, -3) if upper else x


# --------------------------------------------------------------------------- shapes

def shape_with_batch(shape, x):
    """A per-example target shape, with the batch axis appended."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    return shape + (np.shape(x)[-1],)


def reshape(a, shape, order):
    """Per-example reshape (order "F" reverses the example's axes around a C reshape)."""
    a = _as_batched(a)
    target = shape_with_batch(shape, a)
    if order not in ("F", "f") and not (order in ("A", "a") and np.isfortran(a)):
        return np.reshape(a, target)
    nd = _nd(a)
    rev = tuple(reversed(range(nd))) + (nd,)
    out = np.reshape(np.transpose(a, rev), tuple(reversed(target[:-1])) + target[-1:])
    nd_out = out.ndim - 1
    return np.transpose(out, tuple(reversed(range(nd_out))) + (nd_out,))


def permutation(axes, x):
    nd = _nd(x)
    axes = tuple(reversed(range(nd))) if axes is None else tuple(a % nd for a in axes)
    return axes + (nd,)


def new_axis(axis, x):
    """expand_dims axes for the batched array (negative ones count from the result)."""
    nd = _nd(x)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    out_nd = nd + len(axes)
    fixed = tuple(a % out_nd for a in axes)
    return fixed if isinstance(axis, (tuple, list)) else fixed[0]


def squeeze_axes(axis, x):
    nd = _nd(x)
    if axis is None:
        return tuple(i for i in range(nd) if np.shape(x)[i] == 1)
    return axis_all(axis, nd)


def atleast(k, arys):
    """np.atleast_1d/2d/3d per example (one array, or a tuple of them)."""
    out = []
    for a in arys:
        a = _as_batched(a)
        nd = _nd(a)
        if nd < k:
            if k == 3 and nd == 1:
                a = a[None, :, None]
            elif k == 3 and nd == 2:
                a = a[:, :, None]
            else:
                a = np.reshape(a, (1,) * (k - nd) + a.shape)
        out.append(a)
    return out[0] if len(out) == 1 else tuple(out)


def atleast_all(k, arrays):
    out = atleast(k, arrays)
    return [out] if len(arrays) == 1 else list(out)


def atleast_2d_all(arrays):
    return atleast_all(2, arrays)


def concatenate(arrays, axis):
    arrays = _common_batch(arrays)
    if axis is None:
        return np.concatenate([flat(a) for a in arrays], axis=0)
    return np.concatenate(arrays, axis=axis_all(axis, _nd(arrays[0])))


def stack(arrays, axis):
    arrays = _common_batch(arrays)
    nd = _nd(arrays[0]) + 1
    return np.stack(arrays, axis=axis % nd)


def hstack(arrays):
    arrays = atleast_all(1, _common_batch(arrays))
    if _nd(arrays[0]) == 1:
        return np.concatenate(arrays, axis=0)
    return np.concatenate(arrays, axis=1)


def column_stack(arrays):
    cols = []
    for a in _common_batch(arrays):
        nd = _nd(a)
        cols.append(a[:, None] if nd == 1 else np.reshape(a, (1, 1) + a.shape[-1:])
                    if nd == 0 else a)
    return np.concatenate(cols, axis=1)


def split_axis(ary, how, axis):
    """The per-example axis of np.split/hsplit/vsplit/dsplit as an axis of ``ary``."""
    nd = _nd(ary)
    if how == "hsplit":
        return 0 if nd == 1 else 1
    if how == "vsplit":
        if nd < 2:
            raise ValueError("vsplit only works on arrays of 2 or more dimensions")
        return 0
    if how == "dsplit":
        if nd < 3:
            raise ValueError("dsplit only works on arrays of 3 or more dimensions")
        return 2
    return axis % nd


def tile(A, reps):
    A = _as_batched(A)
    reps = tuple(reps) if isinstance(reps, (tuple, list)) else (reps,)
    shape_ = A.shape[:-1]
    nd = builtins.max(len(shape_), len(reps))
    A = np.reshape(A, (1,) * (nd - len(shape_)) + A.shape)
    return np.tile(A, (1,) * (nd - len(reps)) + reps + (1,))


def repeat(a, repeats, axis):
    if axis is None:
        return np.repeat(flat(a), repeats, axis=0)
    return np.repeat(a, repeats, axis=axis_all(axis, _nd(a)))


def roll(a, shift, axis):
    if axis is None:
        shape_ = np.shape(a)
        return np.reshape(np.roll(flat(a), shift, axis=0), shape_)
    return np.roll(a, shift, axis=axis_all(axis, _nd(a)))


def tri_mask(m, k, lower):
    """np.tril (lower) / np.triu per example: on the example's last two axes."""
    m = _as_batched(m)
    nd = _nd(m)
    rows = m.shape[-3] if nd >= 2 else m.shape[-2]
    cols = m.shape[-2]
    mask = np.tri(rows, cols, k, dtype=bool)
    if not lower:
        mask = ~np.tri(rows, cols, k - 1, dtype=bool)
    if nd < 2:
        m = m[None]
    return np.where(mask[..., None], m, np.zeros((), m.dtype))


def diag(v, k):
    v = _as_batched(v)
    if _nd(v) == 1:
        n = v.shape[0] + abs(k)
        out = np.zeros((n, n) + v.shape[-1:], dtype=v.dtype)
        i = np.arange(v.shape[0])
        out[i + builtins.max(-k, 0), i + builtins.max(k, 0)] = v
        return out
    return np.moveaxis(np.diagonal(v, k, 0, 1), -1, 0)


def pad_width(width, x):
    nd = _nd(x)
    from astjax import runtime_array as ra
    w = ra.pad_widths(width, nd)
    return [tuple(int(v) for v in row) for row in w] + [(0, 0)]


def take(a, indices, axis, mode):
    if axis is None:
        return np.take(flat(a), indices, axis=0, mode=mode)
    return np.take(a, indices, axis=axis_all(axis, _nd(a)), mode=mode)


def _indices_like(indices, arr, nd):
    """Indices for take_along_axis: unbatched ones (rank ``nd``) get a batch axis of 1."""
    idx = np.asarray(indices)
    return idx[..., None] if idx.ndim == nd else idx


def take_along_axis(arr, indices, axis):
    arr = _as_batched(arr)
    if axis is None:
        return np.take_along_axis(flat(arr), _indices_like(indices, arr, 1), axis=0)
    nd = _nd(arr)
    return np.take_along_axis(arr, _indices_like(indices, arr, nd), axis=axis % nd)


def searchsorted(a, v, side, sorter):
    av, ab = _unbatch(a)
    if not ab:
        return np.searchsorted(av, v, side=side, sorter=sorter)
    return per_lane(lambda a_, v_: np.searchsorted(a_, v_, side=side, sorter=sorter),
                    (0, 1), a, v)


def diff(a, n, axis, prepend, append):
    from astjax import runtime_array as ra
    a = _as_batched(a)
    return ra.diff(a, n, axis % _nd(a), prepend, append)


# ------------------------------------------------------------------------ creation

def full(shape, fill_value, dtype):
    if not (isinstance(shape, (int, np.integer)) or isinstance(shape, (tuple, list)) and all(
            isinstance(n, (int, np.integer)) for n in shape)):   # a per-example shape
        return created(lambda s, f: np.full(s, f, dtype=dtype), "np.full", shape, fill_value)
    fill = _as_batched(fill_value)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    out = np.empty(shape + fill.shape[-1:], dtype=dtype or fill.dtype)
    out[...] = fill
    return out


def full_like(a, fill_value, dtype):
    fill = _as_batched(fill_value)
    a = _as_batched(a)
    out = np.empty(np.broadcast_shapes(a.shape, fill.shape), dtype=dtype or a.dtype)
    out[...] = fill
    return out


def like(fn, a, dtype, shape):
    """np.zeros_like / np.ones_like / np.empty_like per example."""
    a = _as_batched(a)
    if shape is not None:
        return fn(a, dtype=dtype, shape=shape_with_batch(shape, a))
    return fn(a, dtype=dtype)


def _same_in_lanes(x):
    """Whether a batch-last operand (containers too) holds one value in every lane."""
    if isinstance(x, np.ndarray):
        return not x.ndim or bool(np.all(x == x[..., :1]))
    if isinstance(x, (list, tuple)):
        return all(_same_in_lanes(v) for v in x)
    if isinstance(x, dict):
        return all(_same_in_lanes(v) for v in x.values())
    return True


def created(fn, name, *args):
    """A creation function (np.zeros, np.eye, np.arange...) whose shape, size or bound
    arguments are batched: computed once and copied to every lane when the arguments
    are the same in every lane, else lane by lane; lanes whose arrays would differ in
    shape are refused (one batched array cannot hold them)."""
    size_ = _sizes(*args)
    if all(_same_in_lanes(a) for a in args):
        return broadcast_batch(fn(*[_lane(a, 0) for a in args]), size_)
    outs = [fn(*[_lane(a, i) for a in args]) for i in range(size_)]
    shapes = sorted({np.shape(o) for o in outs})
    if len(shapes) > 1:
        refuse_here(f"vmap: the shape of {name}'s result differs per example in this "
                    f"batch ({', '.join(map(str, shapes[:3]))}); one batched array cannot "
                    "hold them",
                    "make the shape the same for every example (pad to the largest and "
                    "mask with np.where)")
    return _stack_lanes(outs)


def _asarray_tree(a):
    if isinstance(a, (list, tuple)):
        return np.stack(_common_batch([_asarray_tree(v) for v in a]))
    return _as_batched(a)


def asarray(a, dtype, ndmin=0):
    out = _asarray_tree(a)
    if dtype is not None:
        out = out.astype(dtype, copy=False)
    nd = _nd(out)
    if nd < ndmin:
        out = np.reshape(out, (1,) * (ndmin - nd) + out.shape)
    return out


def array(obj, dtype, ndmin):
    if isinstance(obj, np.ndarray):
        obj = np.array(obj, dtype=dtype)
    return asarray(obj, dtype, ndmin)


def spaced(fn, start, stop, num, endpoint, dtype, axis, **kwargs):
    """np.linspace / np.logspace with per-example start and stop."""
    start, stop = _common_batch([start, stop])
    common = np.broadcast_shapes(start.shape, stop.shape)
    nd = len(common) - 1
    return fn(np.broadcast_to(start, common), np.broadcast_to(stop, common), num,
              endpoint=endpoint, dtype=dtype, axis=axis % (nd + 1), **kwargs)


def linspace(start, stop, num, endpoint, retstep, dtype, axis):
    out = spaced(np.linspace, start, stop, num, endpoint, dtype, axis, retstep=retstep)
    return out


def logspace(start, stop, num, endpoint, base, dtype, axis):
    base = _as_batched(base)
    if base.shape != (1,):
        return per_lane(lambda s, e, b: np.logspace(s, e, num, endpoint, b, dtype, axis),
                        (0, 1, 2), start, stop, base)
    return spaced(np.logspace, start, stop, num, endpoint, dtype, axis, base=base[0])


def meshgrid(xi, copy, sparse, indexing):
    xs = _common_batch([flat(x) for x in xi])
    size_ = xs[0].shape[-1]
    n = len(xs)
    lengths = [x.shape[0] for x in xs]
    order = list(range(n))
    if indexing == "xy" and n >= 2:
        order[0], order[1] = 1, 0
    full_shape = tuple(lengths[order[d]] for d in range(n)) + (size_,)
    out = []
    for k, x in enumerate(xs):
        pos = order.index(k)
        view = [1] * n
        view[pos] = lengths[k]
        arr = np.reshape(x, tuple(view) + (size_,))
        if not sparse:
            arr = np.broadcast_to(arr, full_shape)
            arr = arr.copy() if copy else arr
        out.append(arr)
    return tuple(out)


# -------------------------------------------------------- per-example indices
# An index that differs per example (a loop counter of a loop some lanes left, an
# argmax...) arrives with every array entry carrying the batch last; slices, None,
# ``...`` and Python ints are the same for every example.

def _index_items(index):
    items = list(index) if isinstance(index, tuple) else [index]
    return [_list_index(it) if isinstance(it, list) else it for it in items]


def _list_index(items):
    """A list used as an index is an integer array (NumPy's rule); its entries are
    batch-last arrays (or numbers, the same in every lane): stacked, batch last."""
    parts = [_list_index(v) if isinstance(v, list) else np.asarray(v) for v in items]
    if not parts:
        return np.zeros((0,), dtype=np.intp)
    stacked = np.stack(np.broadcast_arrays(*parts))
    # numbers only: the same in every lane, a batch axis of one
    return stacked[..., None] if all(not p.ndim for p in parts) else stacked


def uniform_index(index):
    """The index as an ordinary per-example index when it is the same in every lane
    (a loop counter), else None."""
    out = []
    for it in _index_items(index):
        if isinstance(it, np.ndarray):
            if not it.ndim or not np.all(it == it[..., :1]):
                return None
            it = it[..., 0]
            it = it.item() if it.ndim == 0 else it
        out.append(it)
    return tuple(out) if isinstance(index, tuple) else out[0]


def _gather_plan(shape_, index, size_):
    """(front index, axes to move) that gather ``x[index]`` example by example from the
    batch-first array of per-example ``shape_``: the result is (batch, advanced dims,
    other dims), moved to NumPy's per-example layout with the axes returned."""
    items = _index_items(index)
    nd = len(shape_)
    if any(it is Ellipsis for it in items):
        k = next(i for i, it in enumerate(items) if it is Ellipsis)   # (arrays: no ==)
        used = builtins.sum(1 for it in items if it is not None and it is not Ellipsis)
        items = items[:k] + [slice(None)] * (nd - used) + items[k + 1:]
    front, adv, dim, before, adv_nd = [], [], 0, 0, 0
    for p, it in enumerate(items):
        if it is None:
            front.append(None)
            before += 0 if adv else 1
            continue
        if isinstance(it, slice):
            front.append(it)
            dim += 1
            before += 0 if adv else 1
            continue
        if isinstance(it, np.ndarray) and it.dtype == bool:
            refuse("a boolean mask that differs per example")
        n = shape_[dim]
        if isinstance(it, np.ndarray):
            it = np.moveaxis(np.asarray(it), -1, 0)
            it = np.clip(np.where(it < 0, it + n, it), 0, n - 1)
            adv_nd = builtins.max(adv_nd, it.ndim - 1)
        adv.append(p)
        front.append(it)
        dim += 1
    # per-example index shapes broadcast as NumPy aligns them, from the right: a lower
    # rank one gets unit axes after its batch axis (``m[[0, 2], j]``: (2,) with ())
    front = [np.reshape(it, it.shape[:1] + (1,) * (adv_nd + 1 - it.ndim) + it.shape[1:])
             if isinstance(it, np.ndarray) and it.ndim and it.ndim - 1 < adv_nd else it
             for it in front]
    lane = np.arange(size_).reshape((size_,) + (1,) * adv_nd)
    adjacent = adv == list(range(adv[0], adv[0] + len(adv))) if adv else True
    moves = None
    if adjacent and before and adv_nd:
        src = tuple(range(1, 1 + adv_nd))
        moves = (src, tuple(a + before for a in src))
    return (lane, *front), moves


def _index_size(index):
    return builtins.max([it.shape[-1] for it in _index_items(index)
                         if isinstance(it, np.ndarray) and it.ndim] or [1])


def gather(x, index):
    """``x[index]`` example by example, for a per-example index."""
    u = uniform_index(index)
    if u is not None:
        return x[index_full(u)] if isinstance(x, np.ndarray) else x[u]
    if not isinstance(x, np.ndarray):
        refuse("indexing a list or dict at a position that differs per example")
    size_ = builtins.max(x.shape[-1], _index_size(index))
    idx, moves = _gather_plan(x.shape[:-1], index, size_)
    out = _front_as(x, size_)[idx]
    if moves is not None:
        out = np.moveaxis(out, *moves)
    return _back(out)


def _scatter_add(out, index, t):
    """``out[index] += t`` example by example (repeated positions add up), in place."""
    size_ = out.shape[-1]
    idx, moves = _gather_plan(out.shape[:-1], index, size_)
    tf = _front_as(t, size_)
    if moves is not None:
        tf = np.moveaxis(tf, moves[1], moves[0])
    np.add.at(_front(out), idx, tf)
    return out


def _assign(out, index, v):
    """``out[index] = v`` example by example, in place (``v`` broadcast per example)."""
    size_ = out.shape[-1]
    idx, moves = _gather_plan(out.shape[:-1], index, size_)
    front_out = _front(out)
    raw_nd = np.empty(front_out.shape, dtype=np.int8)[idx].ndim
    vf = _front_as(v, size_)
    vf = np.reshape(vf, vf.shape[:1] + (1,) * (raw_nd - vf.ndim) + vf.shape[1:])
    if moves is not None:
        vf = np.moveaxis(vf, moves[1], moves[0])
    front_out[idx] = vf
    return out


def _lane_mask(x, index):
    """A per-example boolean mask index (``x[mask] = v``) as a mask shaped like ``x``,
    or None for other indices."""
    if isinstance(index, tuple) and len(index) == 1:
        index = index[0]
    if not (isinstance(index, np.ndarray) and index.dtype == bool):
        return None
    extra = x.ndim - index.ndim
    return np.reshape(index, index.shape[:-1] + (1,) * extra + index.shape[-1:])


def setitem_per_example(x, index, v):
    """A copy of ``x`` with ``v`` written at a per-example ``index``."""
    from astjax import runtime_array as ra
    u = uniform_index(index)
    if u is not None:
        return setitem(x, u, v)
    if not isinstance(x, np.ndarray):
        return ra.setitem(x, gather(x, index), v)  # refuses: index differs per lane
    size_ = builtins.max(_sizes(x, v), _index_size(index))
    mask = _lane_mask(x, index)
    if mask is not None:   # x[mask] = scalar, per example
        if np.ndim(v) > 1 or (np.ndim(v) == 1 and not isinstance(v, np.ndarray)):
            refuse("x[mask] = values with a mask that differs per example",
                   "the number of values differs per example; use np.where")
        out = np.array(_expand(x, size_))
        np.copyto(out, np.broadcast_to(_as_batched(v), out.shape), where=np.broadcast_to(
            mask, out.shape))
        return out
    return _assign(np.array(_expand(x, size_)), index, v)


def restore_at_per_example(x, index, old):
    """Undo ``x[index] = v`` in place (rt.restore_at) at a per-example index."""
    from astjax import runtime as rt
    u = uniform_index(index)
    if u is not None or not isinstance(x, np.ndarray):
        return rt.restore_at(x, index_full(u) if isinstance(x, np.ndarray) else u, old)
    mask = _lane_mask(x, index)
    if mask is not None:   # ``old`` is the whole array save_at_per_example kept
        np.copyto(x, old, where=np.broadcast_to(mask, x.shape))
        return None
    _assign(x, index, old)


def save_at_per_example(x, index):
    from astjax import runtime as rt
    u = uniform_index(index)
    if u is not None:
        return rt.save_at(x, index_full(u) if isinstance(x, np.ndarray) else u)
    if isinstance(x, np.ndarray) and _lane_mask(x, index) is not None:
        return x.copy()   # what a mask selects differs in size per example: keep it all
    return gather(x, index).copy()


def setitem_jvp_per_example(t, index, tv, x):
    u = uniform_index(index)
    if u is not None:
        return setitem_jvp(t, u, tv, x)
    if t is None and tv is None:
        return None
    size_ = builtins.max(_sizes(t if t is not None else x, tv), _index_size(index))
    out = np.array(_expand(t, size_)) if t is not None else _zeros(x, size_)
    return _assign(out, index, 0.0 if tv is None else tv)


def getitem_vjp_per_example(t, x, index):
    from astjax import runtime_array as ra
    u = uniform_index(index)
    if u is not None:
        return getitem_vjp(t, x, u)
    if t is None:
        return None
    if not isinstance(x, np.ndarray):
        return ra.getitem_vjp(t, x, gather(x, index))  # refuses: index differs per lane
    size_ = builtins.max(_sizes(t, x), _index_size(index))
    return _scatter_add(_zeros(x, size_), index, t)


def acc_at_per_example(d, x, index, g):
    from astjax import runtime as rt
    u = uniform_index(index)
    if u is not None:
        return acc_at(d, x, u, g)
    return rt.acc(d, getitem_vjp_per_example(g, x, index))


def cot_at_per_example(g, index):
    from astjax import runtime as rt
    u = uniform_index(index)
    if u is not None:
        return rt.cot_at(g, index_full(u) if isinstance(g, np.ndarray) else u)
    if g is None:
        return None
    return gather(g, index)


def cot_written_per_example(g, index):
    """``rt.cot_written`` at a per-example index: each example's overwritten writes
    zero, as ``setitem_per_example`` assigned them."""
    from astjax import runtime as rt
    u = uniform_index(index)
    if u is not None:
        return rt.cot_written(g, index_full(u) if isinstance(g, np.ndarray) else u)
    if g is None:
        return None
    part = gather(g, index)
    probe = np.full(g.shape, -1, dtype=np.intp)
    order = np.arange(part.size, dtype=np.intp).reshape(part.shape)
    kept = gather(setitem_per_example(probe, index, order), index) == order
    return np.where(kept, part, np.zeros((), part.dtype))


def getitem_jvp_per_example(t, x, index):
    from astjax import runtime_array as ra
    u = uniform_index(index)
    if u is not None:
        return getitem_jvp(t, x, u)
    if t is None or not isinstance(x, np.ndarray):
        return ra.getitem_jvp(t, x, index)
    return gather(t, index)


# ---------------------------------------------------------------- indexing updates

def setitem(x, index, v):
    """``x`` with ``v`` written at ``index`` (a new array); containers as they are."""
    from astjax import runtime_array as ra
    if not isinstance(x, np.ndarray):
        return ra.setitem(x, index, v)
    out = np.array(_expand(x, _sizes(x, v)))
    out[index_full(index)] = v
    return out


def setitem_zero(t, index):
    from astjax import runtime_array as ra
    if not isinstance(t, np.ndarray):
        return ra.setitem_zero(t, index)
    out = np.array(t, copy=True)
    out[index_full(index)] = 0
    return out


def getitem_jvp(t, x, index):
    from astjax import runtime_array as ra
    if t is None or not isinstance(x, np.ndarray):
        return ra.getitem_jvp(t, x, index)
    return _as_batched(t)[index_full(index)]


def setitem_jvp(t, index, tv, x):
    from astjax import runtime_array as ra
    if t is None and tv is None:
        return None
    if isinstance(x, (dict, list)):
        return ra.setitem_jvp(t, index, tv, x)
    size_ = _sizes(t if t is not None else x, tv)
    out = np.array(_expand(t, size_)) if t is not None else _zeros(x, size_)
    out[index_full(index)] = 0 if tv is None else tv
    return out


def tangent_set(t, index, v_dot, like):
    from astjax import runtime as rt
    if isinstance(t, (dict, list)):
        return rt.tangent_set(t, index, v_dot, like)
    size_ = _sizes(t if t is not None else like, v_dot)
    out = np.array(_expand(t, size_)) if t is not None else _zeros(like, size_)
    out[index_full(index)] = 0 if v_dot is None else v_dot
    return out


def cot_at_vjp(ct, g, index):
    from astjax import runtime as rt
    if ct is None or isinstance(g, (dict, list, tuple)):
        return rt.cot_at_vjp(ct, g, index)
    size_ = _sizes(ct, g)
    g = _as_batched(g)
    out = np.zeros(g.shape[:-1] + (size_,), dtype=np.result_type(g, ct))
    np.add.at(out, index_full(index), ct)
    return out


def cot_written_vjp(ct, g, index):
    from astjax import runtime as rt
    if ct is None or isinstance(g, (dict, list, tuple)):
        return rt.cot_written_vjp(ct, g, index)
    g = _as_batched(g)
    kept = rt.last_writes(g.shape[:-1] + (_sizes(ct, g),), index_full(index))
    if kept is not None:
        ct = np.where(kept, ct, np.zeros((), np.result_type(ct)))
    return cot_at_vjp(ct, g, index)


# ---------------------------------------------- batched versions of gradient helpers

def unbroadcast(t, x):
    """Sum a batched cotangent down to the per-example shape of ``x`` (lifted)."""
    if t is None or x is None:
        return None
    if isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic):
        target = ()
    else:
        target = np.shape(x)[:-1]
    t = _as_batched(t)
    ts = t.shape
    per = ts[:-1]
    lead = len(per) - len(target)
    axes = tuple(range(lead)) + tuple(i + lead for i, n in enumerate(target)
                                      if n == 1 and per[i + lead] != 1)
    out = np.sum(t, axis=axes) if axes else t
    out = np.reshape(out, target + (ts[-1],))
    dtype = getattr(x, "dtype", None)
    if dtype is not None and np.issubdtype(dtype, np.inexact) and out.dtype != dtype:
        out = _as_dtype(out, dtype)
    return out


def broadcast_like(t, x):
    if t is None:
        return None
    size_ = _sizes(t, x)
    x = _as_batched(x)
    t = _as_batched(t)
    dtype = _float_dtype(x, t.dtype)
    out = np.empty(x.shape[:-1] + (size_,), dtype=dtype)
    out[...] = t
    return out


def unreduce(t, x, axis, keepdims):
    if t is None:
        return None
    t = _as_batched(t)     # (a constant cotangent: one number for every example)
    nd = _nd(x)
    if axis is not None and not keepdims:
        ax = axis_all(axis, nd)
        t = np.expand_dims(t, ax)
    elif axis is None and not keepdims:
        t = np.reshape(t, (1,) * nd + (np.shape(t)[-1],))
    return broadcast_like(t, x)


def extremum_weights(a, ans, axis, keepdims):
    from astjax import runtime_array as ra
    size_ = _sizes(a, ans)
    nd = _nd(_as_batched(a))
    return _back(ra.extremum_weights(_front_as(a, size_), _front_as(ans, size_),
                                     _shifted(axis, nd), keepdims))


def fold_axes(x, axis):
    from astjax import runtime_array as ra
    x = _as_batched(x)
    return _back(ra.fold_axes(_front(x), _shifted(axis, _nd(x))))


def unfold_axes(t, x, axis):
    from astjax import runtime_array as ra
    if t is None:
        return None
    size_ = _sizes(t, x)
    x = _as_batched(x)
    return _back(ra.unfold_axes(_front_as(t, size_), _front_as(x, size_), _shifted(axis, _nd(x))))


def prod_others_last(a):
    from astjax import runtime_array as ra
    return _back(ra.prod_others_last(_front(_as_batched(a))))


def getitem_vjp(t, x, index):
    """Cotangent of ``x[index]`` for batched arrays (containers fall back to ra)."""
    from astjax import runtime_array as ra
    if t is None:
        return None
    if not isinstance(x, np.ndarray):
        return ra.getitem_vjp(t, x, index)
    out = _zeros(x, _sizes(t, x))
    ix = index_full(index)
    if ra._is_basic_index(index) or ra._is_mask_index(index):
        out[ix] = t
    else:
        np.add.at(out, ix, t)
    return out


def acc_step(d, xs, i, g):
    """``d + tree_index_vjp(g, xs, i)`` on batch-last values."""
    from astjax import runtime as rt
    t = tree_index_vjp(g, xs, i)
    if t is None:
        return d
    if d is None:
        return t
    if isinstance(d, np.ndarray) and isinstance(t, np.ndarray):
        size_ = _sizes(d, t)
        return _expand(d, size_) + _expand(t, size_)
    return rt.acc(d, t)


def acc_at(d, x, index, g):
    """``d + getitem_vjp(g, x, index)`` without building a zero array first."""
    from astjax import runtime as rt
    from astjax import runtime_array as ra
    if g is None:
        return d
    if d is None or not isinstance(d, np.ndarray) or not isinstance(x, np.ndarray):
        return rt.acc(d, getitem_vjp(g, x, index))
    size_ = _sizes(d, g)
    out = np.array(_expand(d, size_), dtype=np.result_type(d, g))
    ix = index_full(index)
    if ra._is_basic_index(index):
        out[ix] += g
    else:
        np.add.at(out, ix, g)
    return out


def place_at(g, x, index, fill=0.0):
    """``rt.place_at`` of batched operands (``fill`` 0.0 or -0.0: -0.0 + g is g)."""
    import math
    from astjax import runtime_array as ra
    if fill == 0 and math.copysign(1.0, fill) > 0 or g is None or \
            not isinstance(x, np.ndarray):
        return acc_at(None, x, index, g)
    d = np.full(np.shape(x), fill, dtype=ra._float_dtype(x, np.float64))
    return acc_at(d, x, index, g)


def add_cot(t, x, y, which):
    from astjax import runtime_array as ra
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return ra.add_cot(t, x, y, which)
    return unbroadcast(t, x if which == 0 else y)


def add_cot_vjp(s, t, x, y, which):
    from astjax import runtime_array as ra
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return ra.add_cot_vjp(s, t, x, y, which)
    return broadcast_like(s, t)


def pick(x, y, which):
    return x if which == 0 else y


def diagonal_vjp(t, x, offset, axis1, axis2):
    if t is None:
        return None
    x = _as_batched(x)
    nd = _nd(x)
    z = _zeros(x, _sizes(t, x))
    zv = np.moveaxis(z, (axis1 % nd, axis2 % nd), (-3, -2))
    n = builtins.max(0, builtins.min(zv.shape[-3] + builtins.min(offset, 0),
                                     zv.shape[-2] - builtins.max(offset, 0)))
    i = np.arange(n)
    zv[..., i + builtins.max(-offset, 0), i + builtins.max(offset, 0), :] = t
    return z


def diag_vjp(t, v, k):
    if t is None:
        return None
    if _nd(_as_batched(v)) == 1:
        return _fit_dtype(np.moveaxis(np.diagonal(t, k, 0, 1), -1, 0), v)
    return diagonal_vjp(t, v, k, 0, 1)


def tile_vjp(t, A, reps):
    if t is None:
        return None
    A = _as_batched(A)
    t = _as_batched(t)
    reps = tuple(reps) if isinstance(reps, (tuple, list)) else (reps,)
    shape_ = A.shape[:-1]
    nd = builtins.max(len(shape_), len(reps))
    s = (1,) * (nd - len(shape_)) + tuple(shape_)
    r = (1,) * (nd - len(reps)) + reps
    inter = tuple(n for pair in zip(r, s) for n in pair)
    out = np.sum(np.reshape(t, inter + t.shape[-1:]), axis=tuple(range(0, 2 * nd, 2)))
    return _fit_dtype(np.reshape(out, shape_ + t.shape[-1:]), A)


def repeat_vjp(t, a, repeats, axis):
    from astjax import runtime_array as ra
    if t is None:
        return None
    size_ = _sizes(t, a)
    a = _as_batched(a)
    nd = _nd(a)
    tf = _front_as(t, size_)
    af = _front_as(a, size_)
    if axis is None:
        af2 = np.reshape(af, (size_, -1))
        out = ra.repeat_vjp(tf, af2, repeats, 1)
        return _back(np.reshape(out, af.shape))
    return _back(ra.repeat_vjp(tf, af, repeats, axis % nd + 1))


def pad_vjp(t, array, width, mode):
    from astjax import runtime_array as ra
    if t is None:
        return None
    return ra.pad_vjp(t, _expand(array, _sizes(t, array)), pad_width(width, array), mode)


def take_vjp(t, a, indices, axis, mode):
    if t is None:
        return None
    size_ = _sizes(t, a)
    a = _as_batched(a)
    shape_ = a.shape[:-1]
    flat_ = axis is None
    ax = 0 if flat_ else operator.index(axis) % builtins.max(len(shape_), 1)
    n = int(np.prod(shape_)) if flat_ else shape_[ax]
    idx = np.asarray(indices)
    if mode == "wrap":
        idx = idx % n
    elif mode == "clip":
        idx = np.clip(idx, 0, n - 1)
    z = np.zeros(((n,) if flat_ else shape_) + (size_,), dtype=_float_dtype(a, np.float64))
    np.add.at(z, (slice(None),) * ax + (idx,), t)
    return np.reshape(z, shape_ + (size_,))


def take_along_axis_vjp(t, arr, indices, axis):
    if t is None:
        return None
    size_ = _sizes(t, arr)
    arr = _as_batched(arr)
    t = _expand(t, size_)
    shape_ = arr.shape[:-1]
    if axis is None:
        z = np.zeros((int(np.prod(shape_)), size_), dtype=_float_dtype(arr, np.float64))
        np.add.at(z, (_indices_like(indices, arr, 1), np.arange(size_)), t)
        return np.reshape(z, shape_ + (size_,))
    nd = len(shape_)
    ax = operator.index(axis) % nd
    idx = _indices_like(indices, arr, nd)
    index_ = []
    for d in range(nd + 1):
        if d == ax:
            index_.append(idx)
            continue
        view = [1] * (nd + 1)
        view[d] = t.shape[d]
        full_ = shape_ + (size_,)
        rng = np.arange(t.shape[d]) if full_[d] != 1 else np.zeros(t.shape[d], dtype=int)
        index_.append(rng.reshape(view))
    z = _zeros(arr, size_)
    np.add.at(z, tuple(index_), t)
    return z


def _prepended(extra, ax):
    if extra is None:
        return 0
    e = extra if not isinstance(extra, np.ndarray) else example(extra)
    return 1 if np.ndim(e) == 0 else np.shape(e)[ax]


def diff_vjp(t, a, n, axis, prepend, append):
    if t is None:
        return None
    a = _as_batched(a)
    t = _as_batched(t)
    ax = operator.index(axis) % _nd(a)
    for _ in range(n):
        width = [(0, 0)] * t.ndim
        width[ax] = (1, 1)
        t = -np.diff(np.pad(t, width), axis=ax)
    before = _prepended(prepend, ax)
    sl = [slice(None)] * t.ndim
    sl[ax] = slice(before, before + a.shape[ax])
    return _fit_dtype(t[tuple(sl)], a)


def diff_vjp_adj(s, a, n, axis, prepend, append):
    if s is None:
        return None
    a = _as_batched(a)
    s = _as_batched(s)
    ax = operator.index(axis) % _nd(a)
    width = [(0, 0)] * s.ndim
    width[ax] = (_prepended(prepend, ax), _prepended(append, ax))
    return np.diff(np.pad(s, width), n, axis=ax)


def concat_vjp(t, arrays, axis, how):
    from astjax import runtime_array as ra
    if isinstance(arrays, np.ndarray) and arrays.ndim > 1:
        # one array joined along its first axis (np.vstack(x)): an array cotangent
        if t is None:
            return None
        return np.stack(concat_vjp(t, list(arrays), axis, how), axis=0)
    arrays = list(arrays)
    if t is None:
        return [None] * len(arrays)
    t = _as_batched(t)
    nd_t = _nd(t)
    shapes = [ra._promoted_shape(example(_as_batched(x)), how) for x in arrays]
    if how == "stack":
        pieces = [np.take(t, i, axis=axis % nd_t) for i in range(len(arrays))]
    else:
        ax = ra._join_axis(shapes, axis, how)
        if ax is None:
            sizes = [int(np.prod(s)) for s in shapes]
            ax = 0
        else:
            ax = ax % nd_t
            sizes = [s[ax] for s in shapes]
        pieces = np.split(t, np.cumsum(sizes)[:-1], axis=ax)
    return [_fit_dtype(np.reshape(p, shape(_as_batched(x)) + p.shape[-1:]), x)
            for p, x in zip(pieces, arrays)]


def concat_cots(ts, arrays, axis, how):
    from astjax import runtime_array as ra
    if isinstance(arrays, np.ndarray) and arrays.ndim > 1:
        # one array joined along its first axis: ``ts`` is its whole (co)tangent
        ts = [None] * len(arrays) if ts is None else list(_as_batched(ts))
    arrays = list(arrays)
    ts = list(ts) if isinstance(ts, (list, tuple)) else [ts]
    pieces = []
    for ti, x in zip(ts, arrays):
        x = _as_batched(x)
        s = tuple(ra._promoted_shape(example(x), how))
        if ti is None:
            pieces.append(np.zeros(s + (1,), dtype=_float_dtype(x, np.float64)))
        else:
            ti = _as_batched(ti)
            pieces.append(np.reshape(ti, s + ti.shape[-1:]))
    pieces = _common_batch(pieces)
    nd = _nd(pieces[0])
    if how == "stack":
        return np.stack(pieces, axis=axis % (nd + 1))
    ax = ra._join_axis([p.shape[:-1] for p in pieces], axis, how)
    if ax is None:
        return np.concatenate([flat(p) for p in pieces], axis=0)
    return np.concatenate(pieces, axis=ax % nd)


def asarray_vjp(t, a):
    if t is None or a is None:
        return None
    if isinstance(a, (list, tuple)):
        t = _as_batched(t)
        while t.ndim > 2 and t.shape[0] == 1 and len(a) != 1:
            t = t[0]
        return _rebuild(a, [asarray_vjp(t[i], ai) for i, ai in enumerate(a)])
    t = _as_batched(t)
    if isinstance(a, (bool, int, float, complex)) and not isinstance(a, np.generic):
        target, dtype = (), (np.dtype(np.float64) if isinstance(a, float) else None)
    else:
        target, dtype = shape(_as_batched(a)), _float_dtype(a)
    out = np.reshape(t, target + t.shape[-1:])
    if dtype is not None and out.dtype != dtype:
        out = _as_dtype(out, dtype)
    return out


def pack_cots(ts, x):
    if isinstance(ts, (list, tuple)):
        x = _as_batched(x)
        out = _zeros(x, _sizes(ts))
        view = out
        while len(ts) != 1 and view.ndim > 2 and view.shape[0] == 1:
            view = view[0]
        for i, ti in enumerate(ts):
            if ti is not None:
                view[i] = pack_cots(ti, view[i])
        return out
    if ts is None:
        return _zeros(x, 1)
    ts = _as_batched(ts)
    return _fit_dtype(np.reshape(ts, shape(_as_batched(x)) + ts.shape[-1:]), x)


def unpack_variadic(t, xs):
    xs = list(xs)
    ts = [t] if len(xs) == 1 else list(t) if t is not None else [None] * len(xs)
    return [asarray_vjp(ti, x) for ti, x in zip(ts, xs)]


def pack_variadic(ts, t):
    if isinstance(t, (list, tuple)):
        return _rebuild(t, [pack_cots(ti, x) for ti, x in zip(ts, t)])
    return pack_cots(ts[0], t)


def py_sum_vjp(t, iterable):
    if isinstance(iterable, np.ndarray):
        return broadcast_like(t, iterable)
    return [unbroadcast(t, e) for e in iterable]


def sum_cots(ts, x):
    if isinstance(ts, np.ndarray):
        return unbroadcast(np.sum(ts, axis=0), x)
    total = None
    for ti in ts:
        if ti is not None:
            total = ti if total is None else total + ti
    return unbroadcast(total, x) if total is not None else None


def _norm_axes(x, ord, axis):
    """(per-example axes of the norm, the grad of each norm w.r.t. x), batch-last."""
    from astjax import runtime_array as ra
    x = _as_batched(x)
    nd = _nd(x)
    if axis is None and ord is None:
        axes = tuple(range(nd))
        nrm = np.sqrt(np.sum(np.real(x * np.conj(x)), axis=axes, keepdims=True))
        return axes, np.conj(x) / nrm      # (complex x: the transpose of Re(conj(x) dx))
    if axis is None:
        axis = 0 if nd == 1 else (0, 1)
    axes = axis_all(axis, nd)
    axes = axes if isinstance(axes, tuple) else (axes,)
    return axes, _back(ra._norm_grad(_front(x), ord, _shifted(axis, nd)))


def norm_vjp(t, x, ord, axis, keepdims):
    if t is None:
        return None
    axes, grad = _norm_axes(x, ord, axis)
    return _fit_dtype(unreduce(t, x, axes, keepdims) * grad, x)


def norm_jvp(t, x, ord, axis, keepdims):
    if t is None:
        return None
    axes, grad = _norm_axes(x, ord, axis)
    out = np.sum(_as_batched(t) * grad, axis=axes, keepdims=keepdims)
    return _fit_dtype(np.real(out), np.real(x))   # a norm is real, as its tangent


def norm_vjp_t(s, x, ord, axis, keepdims):
    if s is None:
        return None
    from astjax import runtime_array as ra
    ra._refuse_complex(x, "np.linalg.norm to second order")
    axes, grad = _norm_axes(x, ord, axis)
    return np.sum(_as_batched(s) * grad, axis=axes, keepdims=keepdims)


def tangent_like(t, like):
    """ra.tangent_like per example: ``t`` fitted to the shape and dtype of ``like``."""
    if t is None or like is None:
        return None
    if isinstance(like, dict):
        return {k: tangent_like(t.get(k) if isinstance(t, dict) else t, v)
                for k, v in like.items()}
    if isinstance(like, (list, tuple)):
        items = list(t) if isinstance(t, (list, tuple)) else [t] * len(like)
        return _rebuild(like, [tangent_like(ti, li) for ti, li in zip(items, like)])
    if isinstance(like, str):
        return None
    if not isinstance(like, np.generic) and isinstance(like, (bool, int, float)):
        if isinstance(like, float) and not isinstance(like, bool):
            return unbroadcast(t, like)
        return 0.0
    like = _as_batched(like)
    size_ = _sizes(t, like)
    if not np.issubdtype(like.dtype, np.inexact):
        return np.zeros(like.shape[:-1] + (size_,), dtype=np.float64)
    out = np.empty(like.shape[:-1] + (size_,), dtype=like.dtype)
    out[...] = t
    return out


def _step_index(i):
    """A scan/map step index that batched code may hold per lane: the plain index when
    every lane agrees (None: the lanes differ)."""
    if isinstance(i, np.ndarray) and i.ndim:
        if not _same_in_lanes(i):
            return None
        return i[..., 0].item() if i.ndim == 1 else i[..., 0]
    return i


def tree_index(xs, i):
    """``rt.tree_index`` with a per-lane step index: every leaf's step, lane by lane."""
    from astjax import runtime as rt
    step = _step_index(i)
    if step is not None:
        return rt.tree_index(xs, step)
    return per_lane(rt.tree_index, (0, 1), xs, i)


def tree_index_vjp(g, xs, i):
    from astjax import runtime as rt
    from astjax.tree_util import tree_map
    if g is None or xs is None:
        return None
    step = _step_index(i)
    if step is None:
        return per_lane(rt.tree_index_vjp, (0, 1, 2), g, xs, i)
    i = step

    def put(leaf, gl):
        size_ = _sizes(leaf, gl)
        leaf = _as_batched(leaf)
        out = np.zeros(leaf.shape[:-1] + (size_,), dtype=np.result_type(leaf, gl))
        out[i] = gl
        return out
    return tree_map(put, xs, rt.instantiate(g, rt.tree_index(xs, i)))


def tree_restack(cts, ys, reverse):
    from astjax import runtime as rt
    from astjax.tree_util import tree_map
    cts = [rt.instantiate(c, y) for c, y in zip(cts, ys)]
    if reverse:
        cts.reverse()
    if not cts:
        return np.zeros((0,))
    return tree_map(lambda *leaves: np.stack(_common_batch(leaves)), cts[0], *cts[1:])


def restack_cotangent(cts, stacked, reverse):
    """``rt.restack_cotangent`` when some steps' cotangents carry the batch (last) axis."""
    from astjax import runtime as rt
    if cts is None:
        return None
    n = rt._steps_of(stacked) or 0
    return tree_restack(cts, [rt.tree_index(stacked, i) for i in range(n)], reverse)


def list_cotangent(g, x):
    from astjax import runtime as rt
    if g is None or not isinstance(x, np.ndarray):
        return rt.list_cotangent(g, x)
    if not len(g):
        return np.zeros_like(x)
    return np.stack(_common_batch([rt.instantiate(gi, xi) for gi, xi in zip(g, x)]))


def no_flags(flags):
    out = np.zeros((), bool)
    for f in flags:
        out = np.logical_or(out, f)
    return np.logical_not(out)


def any_flags(flags):
    out = np.zeros((), bool)
    for f in flags:
        out = np.logical_or(out, f)
    return out


def check_scalar_output(value, fname):
    """grad's scalar-output check, per example."""
    from astjax.runtime import check_scalar_output as check
    check(np.asarray(value)[..., 0] if np.ndim(value) else value, fname)
    return value


def tree_moveaxis(x, source, destination):
    """``rt.tree_moveaxis`` on batch-last leaves: per-example axes, the batch stays last."""
    from astjax.tree_util import tree_map

    def move(leaf):
        leaf = np.asarray(leaf)
        nd = leaf.ndim - 1
        return np.moveaxis(leaf, source % nd, destination % nd)
    return None if x is None else tree_map(move, x)


def leaf_axis_size_batched(x, axis):
    """``leaf_axis_size`` of a per-example axis, on batch-last leaves."""
    from astjax.tree_util import tree_leaves
    sizes = {np.shape(leaf)[axis if axis >= 0 else axis - 1] for leaf in tree_leaves(x)}
    if len(sizes) != 1:
        raise ArgumentError(f"vmap: leaves of one argument disagree on the batch size: "
                            f"{sorted(sizes)}")
    return sizes.pop()


def einsum_multi(plan, groups):
    """Per-example sums of einsums (runtime_array.einsum_multi): one more letter, the
    batch, on every batched operand and on the result."""
    from astjax import runtime_array as ra
    tree, skel = plan
    flat = []
    ra._flatten_like(groups, skel, flat)

    def run(t):
        if isinstance(t, list):
            return [run(c) for c in t]
        if t is None:
            return None
        total = None
        for spec, idx, consts, _ in t:
            ops = [flat[i] for i in idx]
            if any(ra._zero_tangent(o) for o in ops):
                continue
            ins, out = spec.split("->")
            ins = ins.split(",")
            z = next(c for c in ra._EINSUM_LETTERS if c not in spec)
            new_ins, new_ops, batched = [], [], False
            for s_, o in zip(ins, ops):
                o = _as_batched(o)
                if o.shape[-1] == 1:
                    new_ins.append(s_)
                    new_ops.append(o[..., 0])
                else:
                    new_ins.append(s_ + z)
                    new_ops.append(o)
                    batched = True
            new_ins += ins[len(ops):]
            dt = np.result_type(*new_ops)
            if consts and dt.kind == "f":
                consts = [c.astype(dt, copy=False) for c in consts]
            val = np.einsum(",".join(new_ins) + "->" + out + (z if batched else ""),
                            *new_ops, *consts, optimize="greedy")
            val = val if batched else val[..., None]
            total = val if total is None else total + val
        if total is None:
            spec, _, _, (sizes, dtype) = t[0]
            total = np.zeros(tuple(sizes[c] for c in spec.split("->")[1]) + (1,), dtype=dtype)
        return total

    return run(tree)


# ------------------------------------------------ pytrees in transformed code (issue 10)
# astjax.tree_util calls written inside a transformed function become these primitives
# (astjax/frontend/tree_calls.py); they are not batch-specific, and work on batch-last
# leaves unchanged.  None is a zero tangent or cotangent, as everywhere in the runtime:
# where a tree of leaves is expected, None stands for a tree of None leaves.

def tree_leaves_of(x):
    """``tree_util.tree_leaves(x)``."""
    from astjax.tree_util import tree_leaves
    return tree_leaves(x)


def tree_structure_of(x):
    """``tree_util.tree_structure(x)``."""
    from astjax.tree_util import tree_structure
    return tree_structure(x)


def tree_unflatten_of(treedef, leaves):
    """``tree_util.tree_unflatten(treedef, leaves)`` (None leaves: None)."""
    if leaves is None:
        return None
    return treedef.unflatten(list(leaves))


def tree_from_leaves(leaves, like):
    """A tree with the structure of ``like`` (a tree or a treedef) holding ``leaves``."""
    if leaves is None:
        return None
    return _treedef(like).unflatten(list(leaves))


def tree_leaves_like(t, like):
    """The leaves of ``t`` in the order of the leaves of ``like`` (a tree or a treedef);
    a None ``t``, or a None where ``like`` has a subtree, gives None leaves."""
    if t is None:
        return None
    out: list = []
    _leaves_like(t, _treedef(like), out)
    return out


def _treedef(like):
    from astjax.tree_util import PyTreeDef, tree_structure
    return like if isinstance(like, PyTreeDef) else tree_structure(like)


def _leaves_like(t, tdef, out):
    from astjax.tree_util import tree_flatten
    if t is None:
        out.extend([None] * tdef.num_leaves)
        return
    children = tdef.children()
    if not children and tdef.num_leaves == 1:
        out.append(t)
        return
    parts, _ = tree_flatten(t, is_leaf=lambda v: v is not t)
    if len(parts) != len(children):
        raise ValueError(f"tree_map: a tree does not have the structure {tdef}")
    for part, sub in zip(parts, children):
        _leaves_like(part, sub, out)
