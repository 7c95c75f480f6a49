"""``eval_shape``: the shapes and dtypes a function would return, without the arithmetic.

The function's core form is interpreted statement by statement.  Values that come from
the abstract arguments are ``ShapeDtypeStruct``s; everything else (shapes, lengths,
constants, captured arrays) is computed as usual.  Elementwise primitives get their
result from broadcasting the shapes and from NumPy's own type resolution on 0-d
arrays; reductions and matrix products from shape rules; views (reshape, transpose,
indexing, ...) by applying the primitive to a zero-stride stand-in, which costs
nothing.  A branch or a loop whose decision depends on array values cannot be
followed and is an error naming the line, as in JAX.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from astjax import core
from astjax import primitives as P
from astjax.core import (Assert, Const, Copy, External, For, If, Index, Prim, Raise, Return,
                         SetItem, SliceAtom, Var, While)
from astjax.errors import TransformError


@dataclass(frozen=True)
class ShapeDtypeStruct:
    """A shape and a dtype standing for an array (JAX's name)."""

    shape: tuple
    dtype: np.dtype

    def __init__(self, shape, dtype):
        object.__setattr__(self, "shape", tuple(int(d) for d in shape))
        object.__setattr__(self, "dtype", np.dtype(dtype))

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return int(np.prod(self.shape))

    def __repr__(self):
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name})"


def _standin(a: ShapeDtypeStruct):
    """A read-only zero-stride array of the right shape and dtype (no memory)."""
    return np.broadcast_to(np.zeros((), a.dtype), a.shape)


def _abstract(value) -> ShapeDtypeStruct:
    from astjax.device import shape_dtype      # (a CuPy array refuses np.asarray)
    return ShapeDtypeStruct(*shape_dtype(value))


_VIEW_KINDS = {"shape", "index", "creation", "structural", "static"}
_REDUCTIONS = {"sum", "mean", "prod", "max", "min", "var", "std", "any", "all", "nansum",
               "nanmean", "nanmax", "nanmin", "argmax", "argmin", "count_nonzero"}


class _Interpreter:
    def __init__(self, fn: core.Function):
        self.fn = fn

    def error(self, s, message, hint=None):
        raise TransformError(f"eval_shape: {message}", s.loc, hint)

    def value(self, op, env):
        if isinstance(op, Var):
            return env[op.name]
        if isinstance(op, Const):
            return op.value
        if isinstance(op, Index):
            items = tuple(self.index_item(i, env) for i in op.items)
            return items if op.tuple_form or len(items) != 1 else items[0]
        if isinstance(op, tuple):
            return tuple(self.value(x, env) for x in op)
        return op

    def index_item(self, it, env):
        if isinstance(it, SliceAtom):
            return slice(*(self.value(p, env) if p is not None else None
                           for p in (it.lower, it.upper, it.step)))
        if it is None or it is Ellipsis:
            return it
        return self.value(it, env)

    def concrete(self, v, s, what):
        if _has_abstract(v):
            self.error(s, f"{what} depends on array values, which eval_shape does not "
                          "compute", "make it depend on shapes only, or use lax.cond")
        return v

    def run(self, stmts, env):
        for s in stmts:
            if isinstance(s, Return):
                return self.value(s.value, env)
            self.statement(s, env)
        return None

    def statement(self, s, env):
        if isinstance(s, Prim):
            result = self.prim(s, env)
            if s.target:
                env[s.target] = result
        elif isinstance(s, Copy):
            env[s.target] = self.value(s.value, env)
        elif isinstance(s, SetItem):
            target = env[s.target]
            if not isinstance(target, ShapeDtypeStruct) and not _has_abstract(
                    self.value(s.value, env)):
                target[self.value(s.index, env)] = self.value(s.value, env)
        elif isinstance(s, External):
            args = [self.value(a, env) for a in s.args]
            if any(_has_abstract(a) for a in args):
                if s.target is None:
                    return
                self.error(s, "a call astjax has no shape rule for receives an array value")
            func = self.value(s.func, env)
            callee = getattr(func, s.method) if s.method else func
            result = callee(*args, **{k: self.value(v, env) for k, v in s.kwargs.items()})
            if s.target:
                env[s.target] = result
        elif isinstance(s, If):
            test = self.concrete(self.value(s.test, env) if not isinstance(s.test, Prim)
                                 else self.prim(s.test, env), s, "this branch")
            self.run(s.body if test else s.orelse, env)
        elif isinstance(s, For):
            it = self.prim(s.iter, env) if isinstance(s.iter, Prim) else self.value(s.iter,
                                                                                     env)
            for item in self.concrete(it, s, "this loop"):
                if any(env.get(f) for f in s.exit_flags):
                    break
                env[s.target] = item
                self.run(s.body, env)
        elif isinstance(s, While):
            while True:
                self.run(s.test_body, env)
                if not self.concrete(self.value(s.test, env), s, "this loop's test"):
                    break
                if any(env.get(f) for f in s.exit_flags):
                    break
                self.run(s.body, env)
        elif isinstance(s, (Assert, Raise)):
            pass

    def prim(self, s: Prim, env):
        prim = P.REGISTRY[s.prim]
        args = [self.value(a, env) for a in s.args]
        kwargs = {k: self.value(v, env) for k, v in s.kwargs.items()}
        flat = [x for a in args for x in (a if isinstance(a, tuple) else (a,))]
        if prim.code.startswith("sh.") and prim.kind != "static":
            from astjax.sharding.abstract import abstract_prim   # collectives, shard_map
            from astjax.sharding.errors import ShardingError
            try:
                return abstract_prim(s.prim, args, kwargs)
            except ShardingError as err:
                raise _at_statement(err, s.loc) from None
        if s.prim == "not_none":
            return args[0] is not None
        if s.prim in ("acc", "acc_at"):
            parts = [a for a in (args[:2] if s.prim == "acc" else (args[0], args[1]))
                     if a is not None]
            if s.prim == "acc_at" or len(parts) == 1:
                return _to_abstract(_to_standin(parts[0])) if parts else None
            return _elementwise(P.REGISTRY["add"], parts, {})
        if s.prim in ("as_sequence", "compact", "stop_gradient", "check_scalar_output",
                      "instantiate"):
            return args[0] if args[0] is not None else _abstract_like(args[1])
        if s.prim == "tree_index" and _has_abstract(args[0]):
            # one example of a batch (vmap written as a loop, inside a function; scan)
            return _to_abstract(_call(prim, [_to_standin(args[0])] + args[1:], kwargs))
        if s.prim == "tree_stack" and _has_abstract(list(args[0])):
            return _stacked(args[0])
        if prim.kind in ("tape", "structural"):
            return _call(prim, args, kwargs)  # tapes and containers hold abstract values
        if not any(_has_abstract(a) for a in flat):
            return _call(prim, args, kwargs)
        if s.prim in ("shape", "np_shape", "ndim", "size", "len"):
            return _call(prim, [_standin(args[0]) if isinstance(args[0], ShapeDtypeStruct)
                                else args[0]] + args[1:], kwargs)
        if prim.kind in ("elementwise", "compare") and s.prim not in _REDUCTIONS:
            return _elementwise(prim, args, kwargs)
        if s.prim in _REDUCTIONS or prim.kind == "reduction":
            return _reduction(prim, args, kwargs)
        if s.prim in ("dot", "matmul"):
            return _product(s.prim, args[0], args[1])
        if s.prim in ("custom_call", "custom_apply", "custom_cotangents"):
            from astjax.transforms.custom import abstract_value   # custom rules
            return abstract_value(s.prim, args)
        if prim.code.startswith("np.fft.") and s.prim not in ("fftshift", "ifftshift"):
            return _fft_shape(prim, args, kwargs)
        like = _cotangent_of(s.prim, prim, args)
        if like is not None:
            return like
        if prim.kind in _VIEW_KINDS or prim.code.startswith("rt."):
            out = _call(prim, [_to_standin(a) for a in args], kwargs)
            return _to_abstract(out)
        self.error(s, f"no shape rule for {prim.code}()", "eval_shape covers elementwise "
                   "operations, reductions, matrix products and views")


_HALF_SPECTRUM = {"rfft", "rfft2", "rfftn", "ihfft"}      # the last axis n // 2 + 1
_REAL_RESULT = {"irfft", "irfft2", "irfftn", "hfft"}


def _fft_shape(prim, args, kwargs):
    """The result of an np.fft transform: the transformed axes at the call's lengths
    (without running a transform of that size)."""
    from astjax import runtime_fft
    bound = dict(zip(prim.params, args), **kwargs)
    a, size, axes = bound["a"], bound.get("n", bound.get("s")), bound.get("axis",
                                                                         bound.get("axes"))
    a = _to_standin(a)
    ax = runtime_fft.fft_axes(a, size, axes)
    lengths = runtime_fft.fft_lengths(a, size, ax, prim.name in _REAL_RESULT)
    shape = list(a.shape)
    for axis, n in zip(ax, lengths):
        shape[axis] = n
    if prim.name in _HALF_SPECTRUM:
        shape[ax[-1]] = lengths[-1] // 2 + 1
    tiny = np.zeros(2, a.dtype)
    dtype = (np.fft.irfft if prim.name in _REAL_RESULT else np.fft.fft)(tiny).dtype
    return ShapeDtypeStruct(tuple(shape), dtype)


def _at_statement(err, loc):
    """A sharding error met interpreting a statement of the user's names its line (a
    collective's own, a sharded function's call), as a run names it; the innermost
    statement's: one already placed keeps its line."""
    from astjax.sharding.errors import _user_file
    if getattr(err, "at_statement", False) or loc is None or not _user_file(loc.filename):
        return err
    placed = type(err)(err.message, loc, err.hint)
    placed.at_statement = True
    return placed


def _has_abstract(v) -> bool:
    if isinstance(v, ShapeDtypeStruct):
        return True
    if isinstance(v, (list, tuple)):
        return any(_has_abstract(x) for x in v)
    if isinstance(v, dict):
        return any(_has_abstract(x) for x in v.values())
    return False


def _abstract_like(v):
    """Zeros shaped like ``v`` (instantiate of a None cotangent), as an abstract value."""
    if isinstance(v, ShapeDtypeStruct):
        dtype = v.dtype if np.issubdtype(v.dtype, np.inexact) else np.dtype(np.float64)
        return ShapeDtypeStruct(v.shape, dtype)
    if isinstance(v, (list, tuple)):
        return type(v)(_abstract_like(x) for x in v)
    if isinstance(v, dict):
        return {k: _abstract_like(x) for k, x in v.items()}
    return _abstract(np.zeros_like(np.asarray(v, dtype=float)))


def _to_standin(v):
    if isinstance(v, ShapeDtypeStruct):
        return _standin(v)
    if isinstance(v, (list, tuple)):
        return type(v)(_to_standin(x) for x in v)
    if isinstance(v, dict):
        return {k: _to_standin(x) for k, x in v.items()}
    return v


def _to_abstract(v):
    if isinstance(v, np.ndarray):
        return ShapeDtypeStruct(v.shape, v.dtype)
    if isinstance(v, (list, tuple)):
        return type(v)(_to_abstract(x) for x in v)
    if isinstance(v, dict):
        return {k: _to_abstract(x) for k, x in v.items()}
    return v


def _stacked(ys):
    """``rt.tree_stack`` of per-step values some of which are abstract: each leaf's
    steps (of one shape) stacked along a new leading axis, NumPy's dtype of the lot."""
    from astjax.tree_util import tree_map
    ys = list(ys)

    def one(*leaves):
        shapes = {v.shape if isinstance(v, ShapeDtypeStruct) else np.shape(v)
                  for v in leaves}
        if len(shapes) != 1:
            raise ValueError(f"the steps to stack have the shapes {sorted(shapes)}")
        dtype = np.result_type(*[v.dtype if isinstance(v, ShapeDtypeStruct) else
                                 np.asarray(v).dtype for v in leaves])
        return ShapeDtypeStruct((len(leaves),) + shapes.pop(), dtype)
    return tree_map(one, ys[0], *ys[1:])


def _call(prim, args, kwargs):
    """Call a primitive's implementation the way generated code does."""
    if prim.name == "range":
        return range(*[a for a in args if a is not None])
    pos = []
    named = dict(kwargs)
    for p, a in zip(prim.params, args):
        if p.startswith("*"):
            pos.extend(a)
        elif p in prim.defaults:
            default = prim.defaults[p]
            if not (a is default or (type(a) is type(default) and a == default)):
                named[p] = a
        else:
            pos.append(a)
    with np.errstate(all="ignore"):     # (stand-in values: their numbers mean nothing)
        return prim.impl(*pos, **named)


def _elementwise(prim, args, kwargs):
    """Broadcast the shapes; let NumPy resolve the dtype on 0-d operands."""
    shapes = []
    small = []
    for a in args:
        if isinstance(a, ShapeDtypeStruct):
            shapes.append(a.shape)
            small.append(np.zeros((), a.dtype))
        elif isinstance(a, np.ndarray):
            shapes.append(a.shape)
            small.append(a.reshape(-1)[:1].reshape(()) if a.size else np.zeros((), a.dtype))
        else:
            small.append(a)
    out = _call(prim, small, kwargs)
    return ShapeDtypeStruct(np.broadcast_shapes(*shapes) if shapes else (), np.asarray(out)
                            .dtype)


def _reduction(prim, args, kwargs):
    """Reduce a one-element-per-axis stand-in, then put the kept sizes back."""
    a = args[0]
    ones = np.zeros((1,) * a.ndim, a.dtype)
    out = np.asarray(_call(prim, [ones] + list(args[1:]), kwargs))
    params = dict(zip(prim.params, args))
    axis, keepdims = params.get("axis"), params.get("keepdims", False)
    if axis is None:
        kept = [] if not keepdims else [1] * a.ndim
    else:
        axes = {ax % a.ndim for ax in (axis if isinstance(axis, (tuple, list)) else (axis,))}
        kept = [1 if i in axes else d for i, d in enumerate(a.shape)
                if keepdims or i not in axes]
    if out.ndim != len(kept):     # cumulative sums and the like keep every axis
        kept = list(a.shape) if axis is not None else [a.size]
    return ShapeDtypeStruct(tuple(kept), out.dtype)


_COTANGENT_OF = {"dot_grad_a": "a", "dot_grad_b": "b"}


def _cotangent_of(name, prim, args):
    """Gradient helpers return a cotangent shaped like one of their primal operands."""
    params = dict(zip(prim.params, args))
    if name == "add_cot":
        like = params["y"] if params.get("which") else params["x"]
    elif name in _COTANGENT_OF:
        like = params[_COTANGENT_OF[name]]
    elif prim.meta and prim.code.startswith("ra."):
        like = params[prim.meta[0]]
    else:
        return None
    if isinstance(like, (list, tuple, dict)):
        return None   # a container's cotangent: the helper itself, on stand-ins
    dtype = (like.dtype if isinstance(like, ShapeDtypeStruct) else np.asarray(like).dtype)
    if not np.issubdtype(dtype, np.inexact):
        dtype = np.dtype(np.float64)
    return ShapeDtypeStruct(like.shape if isinstance(like, ShapeDtypeStruct)
                            else np.shape(like), dtype)


def _product(name, x, y):
    xs = x.shape if isinstance(x, ShapeDtypeStruct) else np.shape(x)
    ys = y.shape if isinstance(y, ShapeDtypeStruct) else np.shape(y)
    dtype = np.result_type(x.dtype if isinstance(x, ShapeDtypeStruct) else np.asarray(x),
                           y.dtype if isinstance(y, ShapeDtypeStruct) else np.asarray(y))
    if name == "dot" and len(xs) > 2 and len(ys) >= 2:
        return ShapeDtypeStruct(xs[:-1] + ys[:-2] + ys[-1:], dtype)
    xm = xs if len(xs) > 1 else (1,) + tuple(xs)
    ym = ys if len(ys) > 1 else tuple(ys) + (1,)
    if xm[-1] != ym[-2]:
        raise ValueError(f"{name}: shapes {xs} and {ys} do not align")
    batch = np.broadcast_shapes(xm[:-2], ym[:-2])
    out = tuple(batch) + (xm[-2], ym[-1])
    if len(xs) == 1:
        out = out[:-2] + out[-1:]
    if len(ys) == 1:
        out = out[:-1]
    return ShapeDtypeStruct(out, dtype)


def eval_shape(fun, *args, **kwargs):
    """Shapes and dtypes of ``fun(*args)`` as ``ShapeDtypeStruct``s, computing no arrays.

    Arguments may be arrays or ``ShapeDtypeStruct``s (pytrees of them too).
    """
    from astjax.generation import check_callable, normalized
    from astjax.tree_util import tree_map
    from astjax.binding import fixed_arity_call
    check_callable(fun, "eval_shape")
    bound = getattr(fun, "_astjax_eval_shape", None)
    if bound is not None:     # pmap with static arguments: bind them first
        return bound(*args, **kwargs)
    fun = fixed_arity_call(fun, args, kwargs)     # *args/**kwargs: this call's arity
    names, fn, result = normalized(fun)
    # Python numbers stay concrete: they are weakly typed (float32 * 2.0 is float32)
    abstract = [tree_map(lambda v: v if isinstance(v, (ShapeDtypeStruct, bool, int, float,
                                                       complex)) else _abstract(v), a)
                if not callable(a) else a for a in args]
    env = dict(fn.env.current())
    env.update(zip(fn.params, abstract))
    for k, v in kwargs.items():
        env[k] = v
    for p, d in fn.defaults.items():
        env.setdefault(p, fn.env.current().get(d.name) if isinstance(d, Var) else d)
    out = _Interpreter(fn).run(fn.body, env)
    return tree_map(lambda v: v if isinstance(v, ShapeDtypeStruct) else _abstract(v), out)


__all__ = ["eval_shape", "ShapeDtypeStruct"]
