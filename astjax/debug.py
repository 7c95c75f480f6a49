"""``astjax.debug``: printing, callbacks and breakpoints that run with run-time values.

``debug.print(fmt, *args, **kwargs)`` formats with ``str.format`` when the code runs,
also inside ``jit`` (never folded, merged, hoisted or dropped: the primitives are
effects, ``astjax/passes/analysis.py``), inside loops (once per iteration) and under
``vmap`` (once per example, as JAX does).  A differentiated value prints its primal:
derivative code never prints.  ``debug.callback(fn, *args)`` calls ``fn`` the same
way; ``debug.breakpoint()`` stops in pdb in the generated code, where the function's
own names hold their current values.  ``astjax.pure_callback`` (here too) calls a
NumPy function astjax cannot see into, with a declared result shape and dtype.

Inside transformed code the frontend turns each call into a primitive (the handlers at
the end register themselves with the normalizer's special calls).
"""
from __future__ import annotations

import builtins
import pdb
import sys

import numpy as np

from astjax import device, tree_util
from astjax.errors import ArgumentError, TransformError

__all__ = ["print", "callback", "breakpoint", "pure_callback"]


# ------------------------------------------------------------------ eager forms

def print(fmt, *args, ordered=False, **kwargs):  # noqa: A001  (JAX's name)
    """Print ``fmt.format(*args, **kwargs)`` with the values the code runs with."""
    builtins.print(str(fmt).format(*args, **kwargs))


def callback(callback, *args, ordered=False, **kwargs):
    """Call ``callback(*args, **kwargs)`` for its effect (its result is dropped)."""
    device.host_call(callback, args, kwargs)


def breakpoint(*, backend=None, filter_frames=True, num_frames=None,  # noqa: A001
               ordered=False, token=None, **kwargs):
    """Stop in pdb at the caller (inside generated code: at the generated line)."""
    _debugger(sys._getframe(1))


def _debugger(frame):
    """Start pdb in ``frame`` (tests replace this)."""
    pdb.Pdb().set_trace(frame)


def _check_result(out, result_shape_dtypes, lanes=None):
    """``out`` as arrays of the declared shapes and dtypes (with ``lanes`` leading)."""
    want, treedef = tree_util.tree_flatten(result_shape_dtypes)
    try:
        got = treedef.flatten_up_to(out) if hasattr(treedef, "flatten_up_to") else \
            tree_util.tree_flatten(out)[0]
    except Exception:
        got = None
    if got is None or len(got) != len(want):
        raise ArgumentError(f"pure_callback: the callback returned {out!r}, which does not "
                            f"match result_shape_dtypes {result_shape_dtypes!r}")
    arrays = []
    for g, w in zip(got, want):
        shape = tuple(np.shape(w)) if not hasattr(w, "shape") else tuple(w.shape)
        dtype = np.dtype(w.dtype) if hasattr(w, "dtype") else np.asarray(w).dtype
        if lanes is not None:
            shape = (lanes,) + shape
        g = np.asarray(g)
        if g.shape != shape:
            raise ArgumentError(f"pure_callback: the callback returned an array of shape "
                                f"{g.shape}, but result_shape_dtypes says {shape}")
        if g.dtype != dtype:
            if not np.can_cast(g.dtype, dtype, "same_kind"):
                raise ArgumentError(f"pure_callback: the callback returned dtype {g.dtype}, "
                                    f"but result_shape_dtypes says {dtype}")
            g = g.astype(dtype)
        arrays.append(g)
    return tree_util.tree_unflatten(treedef, arrays)


_VMAP_METHODS = (None, "sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                 "legacy_vectorized")


def pure_callback(callback, result_shape_dtypes, *args, sharding=None, vmap_method=None,
                  **kwargs):
    """``callback(*args, **kwargs)`` (NumPy code astjax does not transform), checked
    against ``result_shape_dtypes`` (a pytree of ``ShapeDtypeStruct`` or arrays).

    Under ``vmap`` it runs per ``vmap_method``: ``"sequential"`` once per example,
    ``"expand_dims"`` once with the batch on a new leading axis of batched arguments
    (others get an axis of 1), ``"broadcast_all"`` once with every argument broadcast
    to the batch.  It has no derivative (define one with a custom rule)."""
    if vmap_method not in _VMAP_METHODS:
        raise ArgumentError(f"pure_callback: vmap_method must be one of {_VMAP_METHODS[1:]}, "
                            f"got {vmap_method!r}")
    out, xp = device.host_call(callback, args, kwargs)     # NumPy in, as in JAX
    return device.to_module(_check_result(out, result_shape_dtypes), xp)


# ------------------------------------------------------------------ generated code
# ``names`` lists the keywords of the last len(names) values (debug.print("{x}", x=x)).

def _split(names, values):
    k = len(values) - len(names)
    return values[:k], dict(zip(names, values[k:]))


def print_values(fmt, names, *values):
    args, kwargs = _split(names, values)
    builtins.print(str(fmt).format(*args, **kwargs))


def callback_values(fn, names, *values):
    args, kwargs = _split(names, values)
    device.host_call(fn, args, kwargs)


def breakpoint_here():
    _debugger(sys._getframe(1))


def pure_callback_values(fn, result_shape_dtypes, vmap_method, names, *values):
    args, kwargs = _split(names, values)
    out, xp = device.host_call(fn, args, kwargs)
    return device.to_module(_check_result(out, result_shape_dtypes), xp)


def _lane_count(values):
    sizes = [np.shape(v)[-1] for v in tree_util.tree_leaves(values)
             if isinstance(v, np.ndarray) and v.ndim]
    return max(sizes) if sizes else 1


def _lane(values, b):
    """Example ``b`` of batch-last values (an operand shared by all has an axis of 1)."""
    def one(v):
        if isinstance(v, np.ndarray) and v.ndim:
            return v[..., min(b, v.shape[-1] - 1)]
        return v
    return tree_util.tree_map(one, values)


def print_values_batched(fmt, names, values):
    """vmap's form: print once per example, in order (``values``: a tuple)."""
    values = device.device_get(values)          # (lanes of device arrays, on the host)
    for b in range(_lane_count(values)):
        print_values(fmt, names, *_lane(values, b))


def callback_values_batched(fn, names, values):
    values = device.device_get(values)
    for b in range(_lane_count(values)):
        callback_values(fn, names, *_lane(values, b))


def pure_callback_values_batched(fn, result_shape_dtypes, vmap_method, names, values):
    """vmap's form (batch last in, batch last out), per ``vmap_method``."""
    xp = device.tree_module(values)             # the callback runs on host values
    values = device.device_get(values) if xp is not np else values
    return device.to_module(_pure_batched(fn, result_shape_dtypes, vmap_method, names,
                                          values), xp)


def _pure_batched(fn, result_shape_dtypes, vmap_method, names, values):
    lanes = _lane_count(values)
    if vmap_method is None:
        raise TransformError("vmap of pure_callback needs vmap_method= ('sequential', "
                             "'expand_dims' or 'broadcast_all'), as in JAX")
    if vmap_method in ("sequential", "sequential_unrolled"):
        outs = [pure_callback_values(fn, result_shape_dtypes, vmap_method, names,
                                     *_lane(values, b)) for b in range(lanes)]
        return tree_util.tree_map(lambda *xs: np.stack(xs, axis=-1), *outs)

    def front(v):
        if not (isinstance(v, np.ndarray) and v.ndim):
            return v
        v = np.moveaxis(v, -1, 0)
        if vmap_method in ("broadcast_all", "legacy_vectorized"):
            v = np.broadcast_to(v, (lanes,) + v.shape[1:])
        return v
    args, kwargs = _split(names, tree_util.tree_map(front, values))
    out = _check_result(fn(*args, **kwargs), result_shape_dtypes, lanes)
    return tree_util.tree_map(lambda x: np.moveaxis(x, 0, -1), out)


# ------------------------------------------------------------------ the frontend's calls

def _callable(norm, node, what):
    """The Python function a callback argument names (module level or imported)."""
    obj = norm.static_value(node)
    if obj is None and type(node).__name__ == "Name":
        try:
            kind, *rest = norm.lookup(node.id, node)
        except Exception:
            kind, rest = None, []
        if kind == "func" and hasattr(rest[0], "obj"):
            obj = rest[0].obj
    if obj is None or not callable(obj):
        norm.error(node, f"{what}: the callback must be a function defined at module level "
                         "or imported (astjax calls it, it does not inline it)",
                   "define it with def at the top of the file", cls=TransformError)
    return obj


def _values(norm, node, hint, first):
    """Operands of the arguments after the first ``first`` and the keyword names."""
    import gast
    for a in node.args:
        if isinstance(a, gast.Starred):
            norm.error(node, "*args are not supported in debug calls here",
                       "pass the values explicitly", cls=TransformError)
    kws = [k for k in node.keywords if k.arg not in ("ordered", "vmap_method", "sharding")]
    if any(k.arg is None for k in kws):
        norm.error(node, "**kwargs are not supported in debug calls here",
                   "pass the values explicitly", cls=TransformError)
    ops = [norm.plain(norm.expr(a, hint), node) for a in node.args[first:]]
    ops += [norm.plain(norm.expr(k.value, k.arg), node) for k in kws]
    from astjax.core import Const
    return Const(tuple(k.arg for k in kws)), tuple(ops)


def _handle_print(norm, node, hint, target):
    from astjax.core import Const, Prim
    if not node.args:
        norm.error(node, "debug.print needs a format string", cls=TransformError)
    fmt = norm.plain(norm.expr(node.args[0], "fmt"), node)
    names, ops = _values(norm, node, hint or "print", 1)
    norm.emit(Prim(None, "debug_print", [fmt, names, ops], loc=norm.location(node)))
    return Const(None)


def _handle_callback(norm, node, hint, target):
    from astjax.core import Const, Prim
    if not node.args:
        norm.error(node, "debug.callback needs a function", cls=TransformError)
    fn = norm.object_operand(_callable(norm, node.args[0], "debug.callback"), "callback")
    names, ops = _values(norm, node, hint or "callback", 1)
    norm.emit(Prim(None, "debug_callback", [fn, names, ops], loc=norm.location(node)))
    return Const(None)


def _handle_breakpoint(norm, node, hint, target):
    from astjax.core import Const, Prim
    norm.emit(Prim(None, "debug_breakpoint", [], loc=norm.location(node)))
    return Const(None)


def _handle_pure_callback(norm, node, hint, target):
    from astjax.core import Const, Prim, Var
    if len(node.args) < 2:
        norm.error(node, "pure_callback(callback, result_shape_dtypes, *args) needs a "
                         "callback and result_shape_dtypes", cls=TransformError)
    fn = norm.object_operand(_callable(norm, node.args[0], "pure_callback"), "callback")
    shapes = norm.plain(norm.expr(node.args[1], "result_shape_dtypes"), node)
    method = Const(None)
    for k in node.keywords:
        if k.arg == "vmap_method":
            method = norm.plain(norm.expr(k.value, "vmap_method"), node)
            if not isinstance(method, Const) or method.value not in _VMAP_METHODS:
                norm.error(k.value, f"pure_callback: vmap_method must be a constant, one of "
                                    f"{_VMAP_METHODS[1:]}", cls=TransformError)
    names, ops = _values(norm, node, hint or "callback", 2)
    out = target if target is not None else norm.tmp(hint or "callback", "result")
    norm.emit(Prim(out, "pure_callback", [fn, shapes, method, names, ops],
                   loc=norm.location(node)))
    return Var(out)


def _register_handlers():
    from astjax.frontend.lax_rewrite import HANDLERS
    HANDLERS[id(print)] = _handle_print
    HANDLERS[id(callback)] = _handle_callback
    HANDLERS[id(breakpoint)] = _handle_breakpoint
    HANDLERS[id(pure_callback)] = _handle_pure_callback


_register_handlers()
