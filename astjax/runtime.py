"""The small runtime that generated code imports as ``rt``.

Cotangents use ``None`` for "zero" so that nothing is allocated for values a
derivative never reaches; containers (lists, tuples, dicts) hold cotangents of the
same structure, again with ``None`` for zero entries.  Everything here is plain
Python and NumPy, so the command-line tool can paste this module into a standalone
generated file.
"""
from __future__ import annotations

import dataclasses
import math
import sys

import numpy as np

# ----------------------------------------------------------------- cotangent algebra


def acc(a, b):
    """``a + b`` for cotangents, where None is zero and containers add entrywise."""
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, (list, tuple)):
        out = [acc(x, y) for x, y in zip(a, b)]
        return out if isinstance(a, list) else _rebuild_tuple(a, out)
    if isinstance(a, dict):
        out = dict(a)
        for k, v in b.items():
            out[k] = acc(out.get(k), v)
        return out
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return _dataclass_like(a, {f.name: acc(getattr(a, f.name), getattr(b, f.name))
                                   for f in dataclasses.fields(a)})
    return a + b


def _dataclass_like(proto, values):
    """An instance of proto's class with the given field values (no __init__ checks)."""
    out = object.__new__(type(proto))
    for k, v in values.items():
        object.__setattr__(out, k, v)
    return out


def _is_numeric(v):
    return isinstance(v, (float, complex, np.ndarray, np.generic)) or (
        isinstance(v, (list, tuple, dict)) or dataclasses.is_dataclass(v))


def attr_cotangent(g, x, name):
    """Cotangent of ``x`` for ``x.name`` (dataclass or namedtuple pytree nodes)."""
    if g is None:
        return None
    if hasattr(x, "_fields"):
        return type(x)(*[g if f == name else None for f in x._fields])
    if dataclasses.is_dataclass(x):
        return _dataclass_like(x, {f.name: g if f.name == name else (
            None if _is_numeric(getattr(x, f.name)) else getattr(x, f.name))
            for f in dataclasses.fields(x)})
    raise TypeError(f"cannot differentiate attribute {name!r} of {type(x).__name__}: "
                    "only dataclass and namedtuple fields carry derivatives")


def _rebuild_tuple(proto, items):
    if hasattr(proto, "_fields"):  # namedtuple
        return type(proto)(*items)
    return tuple(items)


def zeros_like(x):
    """A concrete zero cotangent shaped like the primal ``x`` (containers recursively)."""
    if isinstance(x, (list, tuple)):
        items = [zeros_like(v) for v in x]
        return items if isinstance(x, list) else _rebuild_tuple(x, items)
    if isinstance(x, dict):
        return {k: zeros_like(v) for k, v in x.items()}
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return _dataclass_like(x, {f.name: zeros_like(getattr(x, f.name))
                                   if _is_numeric(getattr(x, f.name)) else getattr(x, f.name)
                                   for f in dataclasses.fields(x)})
    if x is None:
        return None
    if isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic):
        return 0.0 if not isinstance(x, complex) else 0j
    arr = np.asarray(x)
    if not np.issubdtype(arr.dtype, np.inexact):
        return np.zeros(arr.shape, dtype=np.float64) if arr.ndim else np.float64(0.0)
    return np.zeros_like(arr) if arr.ndim else arr.dtype.type(0)


def instantiate(g, x):
    """Replace symbolic zeros (None) in cotangent ``g`` by concrete zeros shaped like ``x``."""
    if g is None:
        return zeros_like(x)
    if type(x) is np.ndarray and type(g) is np.ndarray:
        return g          # an array's cotangent, without the container checks below
    if isinstance(x, (list, tuple)):
        items = [instantiate(gi, xi) for gi, xi in zip(g, x)]
        return items if isinstance(x, list) else _rebuild_tuple(x, items)
    if isinstance(x, dict):
        return {k: instantiate(g.get(k), v) for k, v in x.items()}
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return _dataclass_like(x, {f.name: instantiate(getattr(g, f.name), getattr(x, f.name))
                                   if _is_numeric(getattr(x, f.name)) else getattr(x, f.name)
                                   for f in dataclasses.fields(x)})
    return g


def cot_or_zero(g, x):
    """Cotangent ``g``, or where it is None an array shaped like ``x`` holding -0.0: a
    fast backward trip adds into it, and ``-0.0 + v`` is ``v`` to the bit (sign of
    zero included), as ``acc(None, v)`` is."""
    if g is not None:
        return g
    return np.full(np.shape(x), -0.0, dtype=getattr(x, "dtype", np.float64))


_FLOAT_SCALARS = frozenset({np.float16, np.float32, np.float64, np.longdouble})


def ones_like(x):
    """The seed cotangent for a scalar output: one, in the output's own dtype."""
    if type(x) in _FLOAT_SCALARS:
        return type(x)(1)            # (what the general path gives, without asarray)
    arr = np.asarray(x)
    if arr.dtype.kind in "fc":
        return np.ones_like(arr) if arr.ndim else arr.dtype.type(1)
    return np.float64(1.0)


# ------------------------------------------------------------- structural primitives


def make_tuple(*items):
    return items


def make_list(*items):
    return list(items)


def make_dict(keys, *values):
    return dict(zip(keys, values))


def append(lst, item):
    """Functional ``lst.append(item)``: a new list, so the old one can be restored."""
    return [*lst, item]


def _references_of(lst, item):
    return sys.getrefcount(lst)


def _owned_references():
    """How many references a list held by one local variable has inside
    ``append_owned`` (the caller's variable, the parameter, the count's own argument:
    measured, since it depends on the interpreter)."""
    lst = []
    return _references_of(lst, None)


_OWNED_REFERENCES = _owned_references()


def append_owned(lst, item):
    """``lst = append(lst, item)`` where the old list is dead after the statement
    (generated code writes it only then: ``core_prims.PRINTERS``).  A list that
    nothing but the caller's variable holds grows in place -- a scan's per-step
    outputs cost O(1) per step, not a copy of every earlier step -- one that a tape,
    a tuple or another name also holds is copied, as ``append`` does."""
    if type(lst) is list and sys.getrefcount(lst) <= _OWNED_REFERENCES:
        lst.append(item)
        return lst
    return [*lst, item]


def to_list(x):
    return list(x)


def keys_list(x):
    """The keys of a dict, in order (never differentiable)."""
    return list(x)


def sort_order(keys, reverse=False):
    """The permutation ``sorted`` applies: positions of ``keys`` in sorted order.

    Piecewise constant in the keys (like ``np.argsort``), so it carries no
    derivative; the frontend gathers the elements with it (``sorted(...)``).
    """
    try:
        return sorted(range(len(keys)), key=keys.__getitem__, reverse=reverse)
    except ValueError as e:  # arrays compared: under vmap, keys that differ per example
        raise TypeError("sorted(): the sort keys must be scalars; under vmap they must "
                        "not differ per example (sort with np.sort/np.argsort instead)") from e


def as_sequence(x):
    """What ``for v in x`` walks, made indexable: dicts give their keys, iterators a list."""
    if isinstance(x, (list, tuple, np.ndarray, range)):
        return x
    return list(x)


def as_sequence_cotangent(g, x):
    if isinstance(x, (list, tuple, np.ndarray, range)):
        return g
    return None


def seq_cotangents(g, n):
    """Cotangents of the ``n`` items packed into a tuple/list whose cotangent is ``g``."""
    if g is None:
        return [None] * n
    return list(g)


def dict_cotangents(g, keys):
    if g is None:
        return [None] * len(keys)
    return [g.get(k) for k in keys]


def append_cotangents(g, lst):
    """Cotangents of (list, item) for ``append``; ``lst`` is not read (the rule passes
    None: saving a stand-in of a list that grows every step costs quadratic time)."""
    if g is None:
        return None, None
    head = g[:-1]                     # a list's slice is a new list already
    return (head if type(head) is list else list(head)), g[-1]


def last_cotangent(g):
    """The cotangent of the item ``append`` added: the last entry of the list's."""
    return None if g is None else g[-1]


def drop_last_cotangent(g):
    """The cotangent of the list before ``append``: all entries but the last (new)."""
    if g is None:
        return None
    head = g[:-1]                     # a list's slice is a new list already
    return head if type(head) is list else list(head)


def drop_last_owned(g):
    """``g = drop_last_cotangent(g)``, the old list dead after the statement (printed
    only then: ``core_prims.PRINTERS``): a list nothing else holds loses its last
    entry in place -- a scan's backward sweep takes O(1) per step, not a copy of
    every earlier step's cotangent -- one a tape or another name holds is copied."""
    if type(g) is list and g and sys.getrefcount(g) <= _OWNED_REFERENCES:
        g.pop()
        return g
    return drop_last_cotangent(g)


def list_cotangent(g, x):
    """Cotangent of ``list(x)``: back to the type of ``x``."""
    if g is None:
        return None
    if isinstance(x, tuple):
        return _rebuild_tuple(x, list(g))
    if isinstance(x, list):
        return list(g)
    if isinstance(x, np.ndarray):
        if not len(g):
            return np.zeros_like(x)
        return np.stack([instantiate(gi, xi) for gi, xi in zip(g, x)])
    return g


def stop_gradient(x):
    """Identity whose result carries no derivative."""
    return x


def not_(x):
    return not x


def no_flags(*flags):
    return not any(flags)


def any_flag(*flags):
    return any(flags)


def format_string(template, *values):
    return template.format(*values)


class _MetaViews(dict):
    """(shape, dtype) -> a read-only zero-stride view of one zero, shared; made when
    first asked for (``_META_VIEWS[key]`` inline, no call per array).  Each array
    module's runtime has its own (``device.runtime_for``): a device's stand-ins are
    device arrays, or every kernel reading one would copy it from the host."""

    per_array_module = True

    def __missing__(self, key):
        shape, dtype = key
        view = self[key] = np.broadcast_to(np.zeros((), dtype), shape)
        return view


_META_VIEWS = _MetaViews()


def meta(x):
    """A stand-in for ``x`` that keeps only its shape, dtype and structure.

    Rules that need just the shape of an operand (``unbroadcast(g, x)``) read this
    instead, so reverse mode does not keep every intermediate array alive: for an
    array it is a zero-stride view of one element, for a NumPy float scalar a zero of
    its type (Python numbers stay themselves: an exponent, an axis).
    """
    t = type(x)
    if t is np.ndarray:            # (every step of a loop: the common cases first)
        return _META_VIEWS[(x.shape, x.dtype)]
    if t is tuple:
        views = _META_VIEWS
        return tuple([views[(v.shape, v.dtype)] if type(v) is np.ndarray else meta(v)
                      for v in x])
    if isinstance(x, np.ndarray):
        return _META_VIEWS[(x.shape, x.dtype)]
    if isinstance(x, list):
        return [meta(v) for v in x]
    if isinstance(x, tuple):
        return _rebuild_tuple(x, [meta(v) for v in x])
    if isinstance(x, dict):
        return {k: meta(v) for k, v in x.items()}
    if isinstance(x, np.inexact):  # (a NumPy float scalar: its type, not its value,
        return x.dtype.type(0)     # so that every step of a loop pushes the same)
    return x


_NEVER = object()


def _signature(v):
    """What decides the type, shape and dtype of whitelisted operations on ``v``;
    ``_NEVER`` for a value, or a container holding one, that no trip matches."""
    t = type(v)
    if t is np.ndarray:
        # (a boolean array may index: what it selects depends on its values)
        return _NEVER if v.dtype.kind == "b" else (v.shape, v.dtype)
    if t is tuple or t is list:
        items = tuple([(x.shape, x.dtype) if type(x) is np.ndarray and x.dtype.kind != "b"
                       else _signature(x) for x in v])
        # (a boolean array inside the carry tuple counts as one at the top)
        return _NEVER if _NEVER in items else (t, items)
    if t is int or t is bool:
        return (t, v)
    if t is float or t is complex or isinstance(v, np.generic) or v is None:
        return t                   # a Python number is weak: its type, not its value
    return _NEVER                  # anything else: no trip matches it


def trip_signature(*values):
    """The signature of a loop trip's carried inputs (``transforms/fast_trips.py``)."""
    sig = tuple([_signature(v) for v in values])
    return None if _NEVER in sig else sig


def same_signature(sig, fast_sig):
    """This trip's inputs match those of a trip that met its fast trip's facts."""
    return sig is not None and sig == fast_sig


def trip_fits(spec, sig, *values):
    """``sig`` when this loop trip's values meet the facts its fast backward trip
    assumes (``astjax/transforms/fast_trips.py``), else None.  ``spec`` holds one entry
    per fact, reading ``values`` in order: ``("same",)`` -- x, ans: arrays of one
    shape and one floating dtype; ``("pad", widths)`` -- inner, outer: arrays of one
    floating dtype, outer's shape inner's padded by ``widths``; ``("part",)`` -- part,
    whole: arrays of one floating dtype (``whole[index]`` is ``part``)."""
    k = 0
    for fact in spec:
        a, b = values[k], values[k + 1]
        k += 2
        if type(a) is not np.ndarray or type(b) is not np.ndarray or a.dtype != b.dtype \
                or a.dtype.kind not in "fc":
            return None
        if fact[0] == "same":
            if a.shape != b.shape:
                return None
            continue
        if fact[0] == "part":
            continue
        widths = fact[1]
        if len(widths) != a.ndim or b.shape != tuple(
                n + lo + hi for n, (lo, hi) in zip(a.shape, widths)):
            return None
    return sig


def cots_complete(checks, *cots):
    """Whether a loop trip's incoming cotangents are complete, as the fast trip that
    assumes it (``transforms/fast_trips.py``) needs: per cotangent, "last" -- a list
    whose last entry is an array -- or a tuple of "array"s (nested) -- a tuple or list
    of that length whose entries are arrays."""
    for check, c in zip(checks, cots):
        if check == "last":
            if not (type(c) is list and c and type(c[-1]) is np.ndarray):
                return False
        elif not _complete(c, check):
            return False
    return True


def _complete(c, check):
    if check == "array":
        return type(c) is np.ndarray
    if not isinstance(c, (tuple, list)) or len(c) != len(check):
        return False
    for x, k in zip(c, check):         # (a loop, not all() of a generator: per step)
        if k == "array":
            if type(x) is not np.ndarray:
                return False
        elif not _complete(x, k):
            return False
    return True


# ------------------------------------------------------------ in-place update rules


_MISSING = object()


def cot_at_vjp(ct, g, index):
    """Cotangent of ``g`` for ``cot_at(g, index)``: ``ct`` placed at ``index``.

    ``g`` None (a symbolic zero: ``cot_at`` gave None whatever ``ct``) has no entries
    to receive it."""
    if ct is None or g is None:
        return None
    if isinstance(g, dict):
        return {index: ct}
    if isinstance(g, (list, tuple)):
        out = [None] * len(g)
        out[index] = ct
        return out if isinstance(g, list) else _rebuild_tuple(g, out)
    out = np.zeros(np.shape(g), dtype=np.result_type(g, ct))
    np.add.at(out, index, ct)
    return out


def dict_from_values(values, keys):
    if values is None:
        return None
    return {k: v for k, v in zip(keys, values) if v is not None}


def append_cotangents_vjp(ct, like=None):
    """The list cotangent from (cotangent of the list before ``append``, of the item);
    ``like`` (the list cotangent this came from) gives the length when the first is
    None -- a short list would shift every entry."""
    if ct is None:
        return None
    head, last = ct
    if head is None:
        head = [None] * (len(like) - 1 if like is not None else 0)
    return list(head) + [last]


def cot_at(g, index):
    """``g[index]`` of a cotangent (array, list or dict); None stays None."""
    if g is None:
        return None
    if isinstance(g, dict):
        return g.get(index)
    return g[index]


def last_writes(shape, index):
    """Which entries of ``x[index] = v`` (``x`` of ``shape``) stay written: an index
    with repeated positions (``y[[0, 0, 1]] = v``) writes one position several times,
    and only the last write is in the result; a boolean array of the selection's
    shape, or None when every entry stays.  NumPy's own assignment decides, so the
    derivative follows the write the forward computation kept."""
    items = index if type(index) is tuple else (index,)
    if all(type(i) in _BASIC_ITEMS or isinstance(i, np.integer) or
           (type(i) is np.ndarray and i.dtype == bool) for i in items):
        return None                   # (basic indices and masks name each entry once)
    if type(index) is not tuple and shape:
        rows = np.asarray(index)
        if rows.dtype.kind in "iu":   # rows of the first axis (the common case): a
            # row's entries are kept or overwritten together
            flat = rows.ravel() % shape[0] if shape[0] else rows.ravel()
            if np.unique(flat).size == flat.size:
                return None
            kept = last_writes(shape[:1], (rows,))
            return kept.reshape(kept.shape + (1,) * (len(shape) - 1))
    probe = np.full(shape, -1, dtype=np.intp)
    chosen = probe[index]
    order = np.arange(chosen.size, dtype=np.intp).reshape(chosen.shape)
    probe[index] = order
    kept = probe[index] == order
    return None if kept.all() else kept


_BASIC_ITEMS = frozenset({int, bool, slice, type(None), type(Ellipsis)})


def cot_written(g, index):
    """The cotangent of the value ``x[index] = v`` wrote, from ``g``, the cotangent
    of ``x`` after it: ``g[index]``, zero at each write a later one to the same
    position overwrote (``last_writes``); None stays None."""
    if g is None:
        return None
    if isinstance(g, dict):
        return g.get(index)
    part = g[index]
    if isinstance(g, np.ndarray):
        kept = last_writes(g.shape, index)
        if kept is not None:
            part = np.where(kept, part, np.zeros((), part.dtype))
    elif hasattr(g, "shape") and hasattr(g, "dtype"):
        _refuse_repeated_device_writes(g.shape, index)
    return part


def _refuse_repeated_device_writes(shape, index):
    """A device array (CuPy's) written through an index that repeats a position: which
    write stays is unspecified there, so no derivative can follow it -- refused."""
    items = index if type(index) is tuple else (index,)
    host = tuple(i.get() if hasattr(i, "get") and hasattr(i, "shape") else i for i in items)
    if last_writes(tuple(shape), host if type(index) is tuple else host[0]) is not None:
        from astjax.runtime_array import _refuse_derivative
        _refuse_derivative("a write through an index that repeats a position, on a device "
                           "array: which write stays is unspecified there",
                           "write each position once (np.unique), or run on NumPy arrays")


def cot_written_vjp(ct, g, index):
    """Cotangent of ``g`` for ``cot_written(g, index)`` (linear in ``g``): ``ct``
    placed at the positions whose writes stay."""
    if ct is None or g is None or not isinstance(g, np.ndarray):
        if hasattr(g, "shape") and hasattr(g, "dtype"):
            _refuse_repeated_device_writes(g.shape, index)
        return cot_at_vjp(ct, g, index)
    kept = last_writes(np.shape(g), index)
    if kept is not None:
        ct = np.where(kept, ct, np.zeros((), np.result_type(ct)))
    return cot_at_vjp(ct, g, index)


def acc_at(d, x, index, g):
    """``d + getitem_vjp(g, x, index)`` without building a zero array first.

    An array result is always a new array (a copy of ``d`` even when ``g`` is None):
    the backward sweep may add into it in place (``acc_at_inplace``).
    """
    if g is None:
        return d.copy() if type(d) is np.ndarray else d
    kind = type(x)
    if (kind is tuple or kind is list) and type(index) is int and \
            (d is None or type(d) is kind):
        # one entry of a plain tuple or list (``for W, b in params``): set it directly
        items = [None] * len(x) if d is None else list(d)
        items[index] = g if items[index] is None else acc(items[index], g)
        return tuple(items) if kind is tuple else items
    if d is None or not isinstance(d, np.ndarray) or not isinstance(x, np.ndarray):
        from astjax.runtime_array import getitem_vjp   # (here: not on the tuple path)
        return acc(d, getitem_vjp(g, x, index))
    out = np.array(d, dtype=np.result_type(d, g))
    if _is_basic_index(index):
        out[index] += g
    else:
        np.add.at(out, index, g)
    return out


def place_at(g, x, index, fill=0.0):
    """``g`` placed at the basic ``index`` of an array shaped like ``x`` (its floating
    dtype), ``fill`` elsewhere: ``getitem_vjp(g, x, index)`` when ``fill`` is 0.0.

    A fast backward trip (``transforms/fast_trips.py``) writes the cotangent of a
    row or block of ``x`` so, and ``d + place_at(g, x, index, -0.0)`` for
    ``acc_at(d, x, index, g)`` (-0.0 leaves every entry of ``d`` as it is): the
    kernels compute it inside a fused expression (``kernels/ir.py``: ``Place``)."""
    if fill == 0 and math.copysign(1.0, fill) > 0:
        return acc_at(None, x, index, g)
    from astjax.runtime_array import _float_dtype
    out = np.full(np.shape(x), fill, dtype=_float_dtype(x, np.float64))
    out[index] = g
    return out


# In-place accumulation (astjax/transforms/inplace.py proves when ``d`` is owned: an
# array the backward sweep made that nothing else refers to).  Each helper computes
# exactly what ``acc`` / ``acc_at`` compute; it only skips the new array.

_NUMBERS = (float, int, complex)


def _owned_buffer(d):
    """An array that can take a sum in place: exact ndarray, not 0-d (``d + g`` would
    give a NumPy scalar), owning its writeable memory."""
    return type(d) is np.ndarray and d.ndim > 0 and d.base is None and \
        getattr(d.flags, "writeable", True)      # CuPy's arrays are always writeable


def _sums_in_place(d, g):
    """``d += g`` equals ``d + g``: ``g`` a plain array or number broadcasting to
    ``d``'s shape, and the sum keeps ``d``'s dtype."""
    tg = type(g)
    if tg is np.ndarray:
        if g.shape != d.shape:
            try:
                if np.broadcast_shapes(d.shape, g.shape) != d.shape:
                    return False
            except ValueError:
                return False
    elif not (isinstance(g, np.generic) or (tg in _NUMBERS)):
        return False
    return _keeps_dtype(d, g)


def acc_inplace(d, g):
    """``acc(d, g)`` for an owned ``d``: adds into ``d`` when it can."""
    if g is not None and _owned_buffer(d) and _sums_in_place(d, g):
        np.add(d, g, out=d)
        return d
    return acc(d, g)


def acc_copy(d, g):
    """``acc_inplace``, but a copy of ``g`` when ``d`` is None, so that the result is
    owned for the accumulations that follow."""
    if d is None and type(g) is np.ndarray:
        return g.copy()
    return acc_inplace(d, g)


def acc_reuse(d, g):
    """``acc(d, g)`` where ``g`` is an owned temporary nothing reads again: adds ``d``
    into ``g`` (addition commutes exactly)."""
    if d is not None and _owned_buffer(g) and _sums_in_place(g, d):
        np.add(g, d, out=g)
        return g
    return acc(d, g)


def _keeps_dtype(d, g):
    """``d + g`` has ``d``'s dtype (``g`` an array, NumPy scalar or Python number)."""
    return (type(g) is np.ndarray and g.dtype is d.dtype) or \
        np.result_type(d, g) == d.dtype


def acc_at_inplace(d, x, index, g):
    """``acc_at(d, x, index, g)`` for an owned ``d``: adds ``g`` at ``index`` in place."""
    if g is not None and isinstance(x, np.ndarray) and _owned_buffer(d) and \
            (type(g) is np.ndarray or isinstance(g, np.generic) or type(g) in _NUMBERS) \
            and _keeps_dtype(d, g):
        if _is_basic_index(index):
            d[index] += g
        else:
            np.add.at(d, index, g)
        return d
    return acc_at(d, x, index, g)


def _is_basic_index(index):
    if type(index) is int:
        return True
    items = index if isinstance(index, tuple) else (index,)
    return all(isinstance(i, (int, slice, type(None), type(Ellipsis)))
               or isinstance(i, np.integer) for i in items)


def cot_zero_at(g, index):
    """A copy of cotangent ``g`` with zero (None for containers) at ``index``."""
    if g is None:
        return None
    if isinstance(g, dict):
        out = dict(g)
        out.pop(index, None)
        return out
    if isinstance(g, list):
        out = list(g)
        out[index] = None
        return out
    out = np.array(g, copy=True)
    out[index] = 0
    return out


def save_at(x, index):
    """What an in-place update ``x[index] = v`` is about to overwrite (a copy)."""
    if isinstance(x, dict):
        return x.get(index, _MISSING)
    part = x[index]
    return part.copy() if isinstance(part, np.ndarray) else part


def detach(x):
    """``x`` sharing no memory with anything: arrays copied, lists, tuples, dicts and
    dataclasses rebuilt around copies, anything else itself.

    transforms/aliasing.py uses it to break sharing with an updated array, and to
    give a function that updates an argument in place its private copy (no
    transformation changes the caller's arrays)."""
    if isinstance(x, np.ndarray):
        return x.copy()
    if isinstance(x, list):
        return [detach(v) for v in x]
    if isinstance(x, tuple):
        return _rebuild_tuple(x, [detach(v) for v in x])
    if isinstance(x, dict):
        return {k: detach(v) for k, v in x.items()}
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return _dataclass_like(x, {f.name: detach(getattr(x, f.name))
                                   for f in dataclasses.fields(x)})
    return x


def restore_at(x, index, old):
    """Undo ``x[index] = v`` with the value ``save_at`` gave (a new dict key is removed)."""
    if old is _MISSING:
        del x[index]
    else:
        x[index] = old


# ----------------------------------------------------------------------- errors


class NonScalarOutputError(TypeError):
    pass


def check_scalar_output(value, fname):
    """grad requires a real scalar output, like JAX."""
    if type(value) in _FLOAT_SCALARS:
        return value                 # a NumPy float scalar: shape (), a real dtype
    out = value
    shape = np.shape(out)
    if shape != ():
        raise NonScalarOutputError(
            f"grad requires a scalar output, but {fname} returned an array of shape {shape}; "
            "use vjp or jacrev for non-scalar outputs, or reduce the output (np.sum).")
    dtype = getattr(out, "dtype", None)    # (a device array's own: no host copy)
    if dtype is None:
        dtype = np.asarray(out).dtype
    if dtype.kind not in "f":
        raise NonScalarOutputError(
            f"grad requires a real floating-point output, but {fname} returned {dtype}.")
    return out


# ------------------------------------------------------------------------- tape


def push(tape, value):
    tape.append(value)


def pop(tape):
    return tape.pop()


def new_tape():
    return []


# ------------------------------------------------------------- lax helpers


def clamp_index(index, n):
    """lax.switch clamps its index into range, as JAX does."""
    return int(min(max(int(index), 0), n - 1))


def scan_length(xs, length):
    """Number of scan steps: the leading axis of every leaf of ``xs``, or ``length``."""
    from astjax.tree_util import tree_leaves
    leaves = tree_leaves(xs)
    sizes = {int(np.shape(leaf)[0]) if np.ndim(leaf) else -1 for leaf in leaves}
    if -1 in sizes:
        raise ValueError("scan: every leaf of xs needs a leading axis to scan over")
    if length is not None:
        sizes.add(int(length))
    if len(sizes) > 1:
        raise ValueError(f"scan: xs leaves and length disagree on the number of steps: "
                         f"{sorted(sizes)}")
    if not sizes:
        raise ValueError("scan: give xs or length")
    return sizes.pop()


def tree_index(xs, i):
    """Step ``i`` of a scan input: every leaf indexed at ``i`` (None stays None)."""
    if xs is None:
        return None
    if isinstance(xs, np.ndarray):
        return xs[i]
    from astjax.tree_util import tree_map
    return tree_map(lambda leaf: leaf[i], xs)


def tree_index_vjp(g, xs, i):
    """Cotangent of ``xs`` for ``tree_index(xs, i)``: zeros with ``g`` at step ``i``."""
    if g is None or xs is None:
        return None
    from astjax.tree_util import tree_map

    def put(leaf, gl):
        out = np.zeros_like(np.asarray(leaf, dtype=np.result_type(leaf, gl)))
        out[i] = gl
        return out
    return tree_map(put, xs, instantiate(g, tree_index(xs, i)))


def acc_step(d, xs, i, g):
    """``d + tree_index_vjp(g, xs, i)`` (a scan input's cotangent, one step's added):
    a new array (``acc_step_inplace`` adds into an owned ``d`` instead -- one step's
    work per backward step, not the size of all of ``xs``)."""
    if g is None:
        return d.copy() if type(d) is np.ndarray else d
    if d is None or type(d) is not np.ndarray or type(xs) is not np.ndarray:
        return acc(d, tree_index_vjp(g, xs, i))
    out = np.array(d, dtype=np.result_type(d, g))
    out[i] += g
    return out


def acc_step_inplace(d, xs, i, g):
    """``acc_step`` for an owned ``d``: ``d[i] += g`` in place."""
    if g is not None and type(xs) is np.ndarray and _owned_buffer(d) and \
            (type(g) is np.ndarray or isinstance(g, np.generic) or type(g) in _NUMBERS) \
            and _keeps_dtype(d, g):
        d[i] += g
        return d
    return acc_step(d, xs, i, g)


def compact(y):
    """Copy array leaves that are views into larger arrays.

    A scan output like ``field[row]`` is a view that would keep the whole per-step
    ``field`` alive until the outputs are stacked; copying the row frees it.
    """
    if type(y) is np.ndarray or isinstance(y, np.ndarray):
        base = y.base
        if base is None:
            return y
        return y.copy() if isinstance(base, np.ndarray) and base.size > y.size else y
    if isinstance(y, (list, tuple, dict)):
        from astjax.tree_util import tree_map
        return tree_map(compact, y)
    return y


class ZeroStepOutputs:
    """The stacked outputs of a loop that ran no step (``lax.scan`` or ``lax.map`` over
    zero steps, a vmap written as a loop over an empty batch).  Their structure and
    shapes come from a step, and none ran (JAX traces one), so this stands in for
    them: any use raises ``ZeroStepsError``, where a made-up array (it was
    ``np.zeros((0,))``: ``ys.sum(0)`` gave a scalar where JAX gives zeros of the
    step's shape) would be a silently wrong value.  Unused, it costs nothing."""

    __array_priority__ = 1 << 30
    __hash__ = None

    def _refuse(self, *args, **kwargs):
        from astjax.errors import ZeroStepsError
        raise ZeroStepsError(
            "the stacked outputs of a loop that ran zero steps (lax.scan or lax.map "
            "over an empty axis, or a vmap over an empty batch) are used here: their "
            "shapes come from a step, and none ran (JAX traces one; astjax does not)",
            _user_line(), "give the loop at least one step, or build the empty result "
            "yourself, e.g. np.zeros((0,) + step_shape)")

    __array__ = __array_function__ = __array_ufunc__ = _refuse
    __len__ = __iter__ = __getitem__ = __bool__ = __float__ = __int__ = _refuse
    __index__ = __neg__ = __abs__ = __eq__ = __ne__ = __lt__ = __le__ = _refuse
    __gt__ = __ge__ = _refuse

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        self._refuse()

    def __repr__(self):
        return "<astjax: stacked outputs of a loop that ran zero steps (shapes unknown)>"


for _op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and",
            "or", "xor", "lshift", "rshift"):
    for _form in ("__{}__", "__r{}__", "__i{}__"):
        setattr(ZeroStepOutputs, _form.format(_op), ZeroStepOutputs._refuse)


def _user_line():
    """The user's line running now: behind the innermost generated line on the stack
    (``codegen.origin``), else the innermost frame of the user's own code (outside
    astjax and NumPy); None when neither is found (a standalone module)."""
    import linecache
    import os
    codegen, errors = sys.modules.get("astjax.codegen"), sys.modules.get("astjax.errors")
    if codegen is None or errors is None:
        return None
    ours = os.path.dirname(os.path.abspath(codegen.__file__))
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        where = codegen.origin(name, frame.f_lineno)
        if where is not None:
            return where
        if not name.startswith(("<", ours)) and f"{os.sep}numpy{os.sep}" not in name:
            text = linecache.getline(name, frame.f_lineno)
            start = len(text) - len(text.lstrip())
            return errors.Location(name, frame.f_lineno, start, len(text.rstrip()) or None,
                                   frame.f_code.co_name)
        frame = frame.f_back
    return None


def tree_stack(ys, reverse):
    """Stack per-step scan outputs along a new leading axis (restoring order if reversed)."""
    from astjax.tree_util import tree_map
    ys = list(ys)
    if reverse:
        ys.reverse()
    if not ys:
        return ZeroStepOutputs()
    if isinstance(ys[0], (np.ndarray, np.generic, float, int)):
        return np.stack(ys)
    return tree_map(lambda *leaves: np.stack([np.asarray(v) for v in leaves]), ys[0], *ys[1:])


def tree_unstack_cotangent(g, ys, reverse):
    """Cotangents of the per-step outputs from the cotangent of their stack."""
    return _unstack(g, len(ys), reverse)


def _unstack(g, n, reverse):
    """Step ``i``'s part of the stacked cotangent ``g`` for each of ``n`` steps."""
    if g is None:
        return [None] * n
    if type(g) is np.ndarray and g.ndim and len(g) == n:   # one stacked array: its rows
        out = list(g)
    else:
        from astjax.tree_util import tree_map
        out = [tree_map(lambda leaf: leaf[i], g) for i in range(n)]
    if reverse:
        out.reverse()
    return out


def tree_restack(cts, ys, reverse):
    """Stack per-step cotangents (None for zero) back into one stacked cotangent."""
    cts = [instantiate(c, y) for c, y in zip(cts, ys)]
    return tree_stack(cts, reverse)


def _steps_of(stacked):
    """The number of steps in a ``tree_stack`` result, None when it has no leaves."""
    from astjax.tree_util import tree_leaves
    leaves = tree_leaves(stacked)
    return int(np.shape(leaves[0])[0]) if leaves else None


def unstack_cotangent(g, stacked, reverse):
    """Per-step cotangents from the cotangent ``g`` of ``stacked = tree_stack(ys)``.

    The step count comes from ``stacked`` (read for its shape only), not from the list
    ``ys``: a scan grows that list every step, and a shape stand-in of it, rebuilt
    after each append, would cost time quadratic in the number of steps.  A stack with
    no leaves has no derivative: None.
    """
    n = _steps_of(stacked)
    if n is None:
        return None
    return _unstack(g, n, reverse)


def restack_cotangent(cts, stacked, reverse):
    """Inverse of ``unstack_cotangent``: per-step cotangents (None for zero) stacked."""
    if cts is None:
        return None
    n = _steps_of(stacked)
    return tree_restack(cts, [tree_index(stacked, i) for i in range(n or 0)], reverse)


def attr_of(x, name):
    """``x.name`` of a cotangent object, None staying None."""
    return None if x is None else getattr(x, name)


# --------------------------------------------------------------- forward mode


def refuse_item_update(container, item, others, update):
    """``container[k] op= v`` while other names may hold the item (``update``: the
    update's text, its operator and those names with their lines).  For an array item
    NumPy's ``op=`` changes that array in place, so every name holding it sees the
    change, which the lowering ``container[k] = container[k] op v`` does not: raise
    then (an ``AliasError`` at the user's line).  Numbers (0-d arrays are taken for
    numbers: under vmap a number is one), names holding something else (a dict's
    keys), and updates of an array's own entries are what the lowering says."""
    if not isinstance(container, (list, dict)) or np.ndim(item) == 0 or not (
            isinstance(item, np.ndarray) or type(item).__module__.split(".")[0] == "cupy"):
        return
    text, sym, names = update
    for value, (name, line) in zip(others, names):
        if _holds(value, item):
            from astjax import runtime_array as ra
            from astjax.transforms.aliasing import AliasError
            raise AliasError(
                f'"{text} {sym}= ..." updates the array {text} holds in place (NumPy\'s '
                f"{sym}= on an array), and {name} shares that array (line {line}): astjax "
                "cannot tell which you mean", ra.user_line(),
                f'write "{text} = {text} {sym} ..." to store a new array ({name} keeps the '
                "old one), or make the copy you mean explicit with .copy()")


def refuse_rebinding_update(value, others, update):
    """``y op= v`` lowered to ``y = y op v`` while ``others`` (names read afterwards that
    the aliasing analysis says may share ``y``'s memory: a helper's caller, ``z =
    ident(y)``) may hold the array.  NumPy's ``op=`` on an array changes it in place,
    so those names would see the change the new value does not give them: raise then
    (an ``AliasError`` at the user's line).  Numbers (0-d arrays are taken for numbers,
    as a number is one under vmap) and names holding other memory are what the
    lowering says; ``+=`` on a list (``|=`` on a dict or set) is in place too."""
    if not isinstance(value, (list, dict, set)) and (np.ndim(value) == 0 or not (
            isinstance(value, np.ndarray) or type(value).__module__.split(".")[0] == "cupy")):
        return
    text, sym, names = update
    for other, (name, line) in zip(others, names):
        if _holds(other, value):
            from astjax import runtime_array as ra
            from astjax.transforms.aliasing import AliasError
            where = f"line {line}" if line else "where it was bound"
            raise AliasError(
                f'"{text} {sym}= ..." updates the array {text} in place (NumPy\'s {sym}= on '
                f"an array), and {name}, read afterwards, shares that array ({where}): "
                "astjax cannot tell which you mean", ra.user_line(),
                f'write "{text} = {text} {sym} ..." for a new array ({name} keeps the old '
                f'one), or "{text}[...] {sym}= ..." to update it in place, which every '
                "transformation follows")


def _holds(value, item, depth=0) -> bool:
    """Whether ``value`` is ``item``, shares its memory, or holds it (a list, tuple or
    dict of them, a few levels deep)."""
    if value is item:
        return True
    if isinstance(value, (list, tuple)) and depth < 4:
        return any(_holds(v, item, depth + 1) for v in value)
    if isinstance(value, dict) and depth < 4:
        return any(_holds(v, item, depth + 1) for v in value.values())
    if isinstance(value, np.ndarray) and isinstance(item, np.ndarray):
        return np.shares_memory(value, item)
    return False


def tangent_set(t, index, v_dot, like):
    """Tangent of ``y`` after ``y[index] = v``: a copy of ``t`` with ``v_dot`` there."""
    if isinstance(t, dict):
        out = dict(t)
        out[index] = v_dot
        return out
    if isinstance(t, list):
        out = list(t)
        out[index] = v_dot
        return out
    out = np.array(t if t is not None else zeros_like(like), copy=True)
    out[index] = 0 if v_dot is None else v_dot
    return out


def pop_tangent(tape_dot, like):
    """The tangent pushed with a value; zeros when that value carried none."""
    t = tape_dot.pop()
    if t is None and isinstance(like, (np.ndarray, np.floating, float)):
        return zeros_like(like)
    return t


def pack_tuple(items):
    return None if items is None else tuple(items)


def pack_list(items):
    return None if items is None else list(items)


def make_dict_from(keys, values):
    return None if values is None else dict(zip(keys, values))


def append_tangent(lst_dot, item_dot, lst):
    """Tangent of ``append(lst, item)``."""
    head = list(lst_dot) if lst_dot is not None else [None] * len(lst)
    return head + [item_dot]


def list_tangent(x_dot, x):
    if x_dot is None:
        return None
    return list(x_dot)


def replay_start(record):
    """Values recorded by a linearized primal run, handed back in order."""
    return iter(record)


def replay(cursor):
    return next(cursor)


def tree_moveaxis(x, source, destination):
    """``np.moveaxis`` on every array leaf of ``x`` (vmap's axes on a pytree; None stays)."""
    if x is None:
        return None
    if isinstance(x, np.ndarray):
        return np.moveaxis(x, source, destination)
    from astjax.tree_util import tree_map
    return tree_map(lambda leaf: np.moveaxis(np.asarray(leaf), source, destination), x)


# ------------------------------------------- custom rules (astjax/custom_rules.py)

def custom_call(rules, *args):
    """A call of a custom_jvp / custom_vjp / checkpoint function: its primal."""
    return rules.primal(*args)


def custom_apply(rules, res, value, *args):
    """Reverse mode's stand-in for a custom call: ``value``, with ``rules``' backward."""
    return value


def custom_cotangents(cts, n, what):
    """The result of a user's rule checked: a tuple (or list) of ``n`` entries."""
    if not isinstance(cts, (tuple, list)) or len(cts) != n:
        got = f"a {type(cts).__name__} of {len(cts)}" if isinstance(cts, (tuple, list)) \
            else f"a {type(cts).__name__}"
        raise TypeError(f"{what} returned {got}, not a tuple of {n}")
    return cts


def saved_dot(value, a, b):
    """``np.dot(a, b)`` computed earlier (checkpoint's dots policies): its saved value."""
    return value


def saved_matmul(value, x, y):
    """``x @ y`` computed earlier (checkpoint's dots policies): its saved value."""
    return value
