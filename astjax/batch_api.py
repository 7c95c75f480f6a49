"""``vmap`` with JAX's signature: batching by source transformation.

The generated function works on whole batches; ``in_axes``/``out_axes`` only decide
where the batch axis sits when entering and leaving it (inside, it is the last axis:
see ``astjax/runtime_batch.py``).
"""
from __future__ import annotations

import numpy as np

from astjax import codegen, core, tree_util
from astjax import runtime_batch as rb
from astjax import transform_table
from astjax.batch_axes import axes_per_leaf
from astjax.batch_axes import leave as leave_batch
from astjax.binding import (bind_arguments, fun_name, function_arguments, has_varargs,
                            keyword_passed, per_arity, plain_callable, signature_of)
from astjax.generation import (ASSEMBLED, cache_for, cached, check_callable, load_functions,
                               normalized, normalizer_factory, wrap)
from astjax.core import Const, Copy, Prim, Return, Var
from astjax.errors import ArgumentError
from astjax.transforms.batch import Batching
from astjax.tree_util import tree_flatten, tree_leaves, tree_unflatten


def _build(fun, batched_mask, static_functions):
    fname = fun_name(fun)
    names, fn, result = normalized(fun, static_functions)
    loc = fn.loc
    size = names.fresh("batch_size")
    batched = [p for p, b in zip(fn.params, batched_mask) if b]
    tr = Batching(fn, batched, size, normalizer_factory)
    body = tr.transform([s for s in fn.body if not isinstance(s, Return)])
    # an argument the same for every example that the code later gives per-example
    # values (``c = c + x``, ``buf[0] = x[0]``): one copy per lane from the start
    body = [Prim(p, "broadcast_batch", [Var(p), Var(size)], loc=loc)
            for p in fn.params if p in tr.batched and p not in batched] + body
    pre = [Copy(v, Const(None), loc=loc) for v in sorted(tr.undefined_ok)
           if v not in fn.params]
    body = pre + body + [Return(Var(result), loc=loc)]
    gname = names.fresh(f"vmap_{fname}")
    gfn = core.Function(gname, fn.params + [size], body, loc=loc, env=fn.env)
    gen = load_functions([(gfn, f"vmap of {fname}: batched arguments carry the batch as "
                                "their last axis.")], fn.env, f"vmap({fname})", ["main"])
    gen.out_batched = result in tr.batched
    gen.signature = signature_of(fun)     # for the wrapper of standalone modules
    gen.batched_mask = tuple(bool(b) for b in batched_mask)[:len(fn.params)] + (False,) * (
        len(fn.params) - len(batched_mask))
    return gen


def _get(fun, batched_mask, args):
    static = function_arguments(args)
    return cached(fun, ("vmap", tuple(batched_mask), static),
                  lambda: _build(fun, batched_mask, dict(static)))


def _call_axes(fun, in_axes, args, kwargs):
    """(values, one in_axes entry per parameter): the call bound like Python binds it;
    positional arguments take ``in_axes``, keyword arguments are batched on axis 0 (as
    in JAX), parameters left to their defaults are not batched."""
    values = bind_arguments(fun, args, kwargs, "vmap")
    if isinstance(in_axes, (tuple, list)):
        if len(in_axes) != len(args):
            raise ArgumentError(f"vmap: in_axes has {len(in_axes)} entries but "
                                f"{fun_name(fun)} got {len(args)} positional arguments")
        positional = list(in_axes)
    else:
        positional = [in_axes] * len(args)
    if len(values) == len(args) and not kwargs:      # every parameter given positionally
        axes = positional
    else:
        how = keyword_passed(fun, args, kwargs)
        axes = [positional[i] if h == "positional" else 0 if h == "keyword" else None
                for i, h in enumerate(how)]
    # functions given as arguments are inlined into the code: never batched
    for i, _ in function_arguments(values):
        axes[i] = None
    return values, axes


def vmap(fun, in_axes=0, out_axes=0, axis_size=None, axis_name=None):
    """Vectorize ``fun`` over a batch axis of its arguments (JAX semantics)."""
    if axis_name is not None:   # collectives over the batch: astjax/sharding/mapping.py
        from astjax.sharding.mapping import named_vmap
        return named_vmap(fun, in_axes, out_axes, axis_size, axis_name)
    out = _vmap(fun, in_axes, out_axes, axis_size)
    try:
        out._astjax_eval_shape = _abstract_vmap(fun, in_axes, out_axes, axis_size)
    except (AttributeError, TypeError):
        pass
    return out


def _abstract_vmap(fun, in_axes, out_axes, axis_size):
    """``eval_shape`` of the vmapped function: ``fun``'s shapes for one example (the
    batch axis taken out of each batched leaf), the batch axis put back at
    ``out_axes`` -- no code generated for the batch, nothing computed."""
    from astjax.binding import fixed_arity_call
    from astjax.shapes import ShapeDtypeStruct, eval_shape

    def shapes(*args, **kwargs):
        fixed = fixed_arity_call(plain_callable(fun), args, kwargs)
        values, per_arg = _call_axes(fixed, in_axes, args, kwargs)
        sizes, example = {}, []
        for k, (arg, axes) in enumerate(zip(values, per_arg)):
            if callable(arg) and not hasattr(arg, "shape"):
                example.append(arg)
                continue
            leaves, tdef = tree_flatten(arg)
            new = []
            for leaf, a in zip(leaves, axes_per_leaf(axes, arg, "in_axes")):
                shape = tuple(np.shape(leaf))
                dtype = leaf.dtype if hasattr(leaf, "dtype") else np.asarray(leaf).dtype
                if a is None:
                    new.append(leaf)
                    continue
                if not -len(shape) <= a < max(len(shape), 1) or not shape:
                    raise ArgumentError(f"vmap: in_axes {a} is out of range for argument "
                                        f"{k} of shape {shape}")
                a = a % len(shape)
                sizes[f"argument {k}"] = shape[a]
                new.append(ShapeDtypeStruct(shape[:a] + shape[a + 1:], dtype))
            example.append(tree_unflatten(tdef, new))
        if axis_size is not None:
            sizes["axis_size"] = axis_size
        size = rb.batch_size(sizes) if sizes else None
        if size is None:
            raise ArgumentError("vmap: no argument is batched; give axis_size")
        out = eval_shape(fixed, *example)
        leaves, tdef = tree_flatten(out)
        placed = []
        for leaf, a in zip(leaves, axes_per_leaf(out_axes, out, "out_axes")):
            if a is None:
                placed.append(leaf)
                continue
            shape = tuple(leaf.shape)
            a = a % (len(shape) + 1)
            placed.append(ShapeDtypeStruct(shape[:a] + (size,) + shape[a:], leaf.dtype))
        return tree_unflatten(tdef, placed)
    return shapes


def _vmap(fun, in_axes, out_axes, axis_size):
    if not (in_axes is None or isinstance(in_axes, (int, tuple, list, dict))):
        raise ArgumentError(f"vmap: in_axes must be an int, None or a pytree, got {in_axes!r}")
    fun = plain_callable(fun)
    if getattr(fun, "_astjax_vmap", None) is not None:
        return _vmap_of_vmap(fun, in_axes, out_axes, axis_size)
    if getattr(fun, "_astjax", None) in ASSEMBLED and \
            getattr(fun, "_astjax_generated", None) is None:
        return _vmap_by_loop(fun, in_axes, out_axes, axis_size)
    check_callable(fun, "vmap")
    if has_varargs(fun):       # *args/**kwargs: one vmap per call arity
        return per_arity(fun, lambda fixed: vmap(fixed, in_axes, out_axes, axis_size), "vmap")

    def batched_fun(*args, **kwargs):
        args, per_arg = _call_axes(fun, in_axes, args, kwargs)
        sizes = {}
        moved = []
        mask = []
        for k, (arg, axes) in enumerate(zip(args, per_arg)):
            leaves, tdef = tree_flatten(arg)
            leaf_axes = axes_per_leaf(axes, arg, "in_axes")
            if all(a is None for a in leaf_axes):
                moved.append(arg)
                mask.append(False)
                continue
            new = []
            for leaf, a in zip(leaves, leaf_axes):
                if a is None:
                    new.append(leaf)
                    continue
                # CuPy arrays stay CuPy (np.* functions dispatch to them, np.asarray fails)
                arr = leaf if hasattr(leaf, "__array_function__") else np.asarray(leaf)
                if not -arr.ndim <= a < max(arr.ndim, 1) or arr.ndim == 0:
                    raise ArgumentError(f"vmap: in_axes {a} is out of range for argument "
                                        f"{k} of shape {arr.shape}")
                key = f"argument {k}"
                if sizes.get(key, arr.shape[a]) != arr.shape[a]:
                    raise ArgumentError(f"vmap got inconsistent batch sizes: the leaves of "
                                        f"{key} have {sizes[key]} and {arr.shape[a]}")
                sizes[key] = arr.shape[a]
                if len(set(sizes.values())) > 1:
                    rb.batch_size(sizes)
                new.append(np.moveaxis(arr, a, -1))
            mask.append(True)
            moved.append((new, tdef, leaf_axes))
        if axis_size is not None:
            sizes["axis_size"] = axis_size
        size = rb.batch_size(sizes) if sizes else None
        if size is None:
            raise ArgumentError("vmap: no argument is batched; give axis_size")
        final = []
        for item, m in zip(moved, mask):
            if not m:
                final.append(item)
                continue
            new, tdef, leaf_axes = item
            # (a device leaf is broadcast on its array module: NumPy's runtime would
            # leave it unbatched, and the code would then misread its last axis)
            here = _runtime_batch(new)
            new = [leaf if a is not None else here.broadcast_batch(leaf, size)
                   for leaf, a in zip(new, leaf_axes)]
            final.append(tree_unflatten(tdef, new))
        gen = _get(fun, mask, args)
        gen.refresh()
        out = gen.functions["main"](*final, size)
        return leave_batch(out, out_axes, size, gen.out_batched)

    def source(*args, **kwargs):
        try:
            values, axes = _call_axes(fun, in_axes, args, kwargs)
        except ArgumentError:
            values = args
            axes = in_axes if isinstance(in_axes, (tuple, list)) else [in_axes] * len(args)
        return _get(fun, _mask(axes, values), values)

    batched_fun._astjax_source = source
    out = wrap(fun, batched_fun, "vmap",
                lambda: _loop_function(fun, in_axes, out_axes, axis_size),
                source)
    out._astjax_batched = lambda: _entry_function(fun, in_axes, out_axes, axis_size)
    out._astjax_vmap = (fun, in_axes, out_axes, axis_size)
    return out


# ------------------------------------------------- vmap as code other transformations read
#
# ``grad(vmap(f))``, ``vmap`` called inside a transformed function, and ``jit(vmap(f))``
# need the vmapped function as Python source.  ``in_axes``/``out_axes`` are then known
# when the code is written, argument structures are not: an axes pytree (tuples, lists,
# dicts of ints and None) is written out as indexing into the argument and rebuilding
# it, and an int axis applies to every leaf of what stands at its place
# (``rt.tree_moveaxis``, which has rules in every mode).

_RESERVED = {"np", "rt", "rb", "f", "n", "i", "outs", "stacked", "batched", "size", "out",
             "result"}


def _check_spec(spec, what):
    """An axes pytree as astjax writes it out: ints, None, tuples, lists, dicts."""
    if spec is None or (isinstance(spec, (int, np.integer)) and not isinstance(spec, bool)):
        return
    if isinstance(spec, (tuple, list)) and not hasattr(spec, "_fields"):
        for sub in spec:
            _check_spec(sub, what)
        return
    if isinstance(spec, dict):
        for sub in spec.values():
            _check_spec(sub, what)
        return
    raise ArgumentError(f"vmap: {what} entries must be ints, None, or tuples, lists and "
                        f"dicts of them, got {spec!r}")


def _static_axes(fun, in_axes, out_axes):
    """(parameter names, one in_axes spec per parameter) for the generated forms.

    A tuple ``in_axes`` covers as many leading positional parameters as it has entries;
    otherwise ``in_axes`` covers every positional parameter without a default.  The
    parameters not covered keep their defaults (calling with them is an error).
    """
    sig = signature_of(fun)
    names = list(sig.names)
    if isinstance(in_axes, (tuple, list)):
        if len(in_axes) > sig.positional:
            raise ArgumentError(f"vmap: in_axes has {len(in_axes)} entries but "
                                f"{sig.fname} takes {sig.positional} positional arguments")
        covered = len(in_axes)
        axes = list(in_axes)
    else:
        params = sig.signature.parameters
        covered = sum(1 for nm in names[:sig.positional] if params[nm].default is
                      params[nm].empty)
        axes = [in_axes] * covered
    left = [nm for nm in names[covered:]
            if sig.signature.parameters[nm].default is sig.signature.parameters[nm].empty]
    if left:
        raise ArgumentError(f"vmap: {sig.fname}() parameter(s) {', '.join(left)} have no "
                            "in_axes entry and no default")
    for a in axes:
        _check_spec(a, "in_axes")
    _check_spec(out_axes, "out_axes")
    params = [nm if nm.isidentifier() and nm not in _RESERVED else f"a{k}"
              for k, nm in enumerate(names[:covered])]
    return params, axes


class _Writer:
    """Lines of a generated function, with fresh readable names."""

    def __init__(self, used):
        self.lines: list = []
        self.used = set(used) | _RESERVED

    def fresh(self, base):
        name, k = base, 1
        while name in self.used:
            k += 1
            name = f"{base}_{k}"
        self.used.add(name)
        return name

    def emit(self, text, depth=1):
        self.lines.append("    " * depth + text)

    def split(self, expr, spec, on_leaf):
        """Walk ``spec`` over the value ``expr``: containers are indexed into parts, each
        int/None leaf goes to ``on_leaf(expr, axis)``, which returns a builder; the
        result builds the value back from the builders' expressions."""
        if isinstance(spec, (tuple, list)):
            parts = []
            for j, sub in enumerate(spec):
                part = self.fresh(f"{expr}_{j}")
                self.emit(f"{part} = {expr}[{j}]")
                parts.append(self.split(part, sub, on_leaf))
            if isinstance(spec, tuple):
                return lambda env: "(" + "".join(p(env) + ", " for p in parts) + ")"
            return lambda env: "[" + ", ".join(p(env) for p in parts) + "]"
        if isinstance(spec, dict):
            parts = []
            for key, sub in spec.items():
                part = self.fresh(f"{expr}_{key}" if str(key).isidentifier() else f"{expr}_k")
                self.emit(f"{part} = {expr}[{key!r}]")
                parts.append((key, self.split(part, sub, on_leaf)))
            return lambda env: "{" + ", ".join(f"{k!r}: {p(env)}" for k, p in parts) + "}"
        return on_leaf(expr, spec)


def _load(lines, namespace, label, name):
    codegen.load_source("\n".join(lines) + "\n", namespace, label)
    return namespace[name]


def _entry_function(fun, in_axes, out_axes, axis_size):
    """The whole vmapped function as generated Python, so that other transformations
    can read it (``jit(vmap(f))``): batch axes moved to the end, the batched code
    called, the batch axis moved to ``out_axes``."""
    params, axes = _static_axes(fun, in_axes, out_axes)
    mask = [any(a is not None for a in tree_leaves(ax, is_leaf=lambda v: v is None))
            for ax in axes]
    if not any(mask) and axis_size is None:
        raise ArgumentError("vmap: no argument is batched; give axis_size")
    key = ("vmap_entry", repr(axes), repr(out_axes), axis_size)
    cache = cache_for(fun)
    if key in cache:
        return cache[key]
    gen = _get(fun, mask + [False] * (len(signature_of(fun).names) - len(mask)), ())
    name = f"vmap_{fun_name(fun)}"
    w = _Writer(params)
    w.lines = [f"def {name}({', '.join(params)}):",
               '    """vmap entry: batch axes to the end, batched code, batch axis out."""']
    lasts, unbatched_parts = [], []

    def enter(expr, a):
        if a is None:
            unbatched_parts.append(expr)
            return lambda env: env.get(expr, expr)
        last = w.fresh(f"{expr}_last")
        w.emit(f"{last} = rb.to_last({expr}, {a})")
        lasts.append(last)
        return lambda env: last

    builders = [w.split(p, a, enter) if m else (lambda env, p=p: p)
                for p, a, m in zip(params, axes, mask)]
    if lasts:
        w.emit(f"size = rb.leaf_axis_size(({''.join(v + ', ' for v in lasts)}), -1)")
    else:
        w.emit(f"size = {int(axis_size)}")
    env = {}
    for part in unbatched_parts:       # unbatched parts of a batched argument: per lane
        env[part] = w.fresh(f"{part}_lanes")
        w.emit(f"{env[part]} = rb.broadcast_batch({part}, size)")
    # parameters in_axes does not cover keep their defaults
    sig = signature_of(fun)
    namespace = {"rb": rb, "batched": gen.functions["main"], "unbatched_lanes": _unbatched_lanes}
    defaults = []
    for nm in sig.names[len(params):]:
        defaults.append(w.fresh(f"default_{nm}"))
        namespace[defaults[-1]] = sig.signature.parameters[nm].default
    call = [b(env) for b in builders] + defaults
    w.emit(f"out = batched({', '.join(call + ['size'])})")

    def leave(expr, a):
        moved = w.fresh(f"{expr}_out")
        if a is None and gen.out_batched:   # held batched: fine if every lane agrees
            w.emit(f"{moved} = unbatched_lanes({expr}, size)")
        else:
            w.emit(f"{moved} = rb.from_last({expr}, {a!r}, size, {gen.out_batched!r})")
        return lambda env: moved

    result = w.split("out", out_axes, leave)
    w.emit(f"result = {result({})}")
    w.emit("return result")
    entry = _load(w.lines, namespace, f"vmap({fun_name(fun)})", name)
    cache[key] = entry
    return entry


def _loop_function(fun, in_axes, out_axes, axis_size):
    """vmap as a loop over examples, as generated Python other transformations can read.

    ``grad(vmap(f))``, ``jvp`` of it and ``vmap`` called inside a transformed function
    differentiate this version: a ``for`` over the batch calling ``f`` on each example
    and stacking the results, which every transformation already handles.
    (``jit(vmap(f))`` uses the batched version.)
    """
    params, axes = _static_axes(fun, in_axes, out_axes)
    key = ("vmap_loop", repr(axes), repr(out_axes), axis_size)
    cache = cache_for(fun)
    if key in cache:
        return cache[key]
    name = f"vmap_loop_{fun_name(fun)}"
    w = _Writer(params)
    w.lines = [f"def {name}({', '.join(params)}):",
               '    """vmap as a loop over the examples (the form grad and jvp read)."""']
    fronts = []

    def enter(expr, a):
        if a is None:
            return lambda env: expr
        front = expr
        if a != 0:
            front = w.fresh(f"{expr}_front")
            w.emit(f"{front} = rt.tree_moveaxis({expr}, {a}, 0)")
        fronts.append(front)
        return lambda env: f"rt.tree_index({front}, i)"

    builders = [w.split(p, a, enter) for p, a in zip(params, axes)]
    if fronts:
        # every batched leaf of every argument: one batch size
        w.emit(f"n = rb.leaf_axis_size(({''.join(v + ', ' for v in fronts)}), 0)")
        if axis_size is not None:
            w.emit(f"if n != {int(axis_size)}:")
            w.emit(f'raise ValueError("vmap: axis_size={int(axis_size)} but the batched '
                   'arguments have another batch size")', 2)
    elif axis_size is None:
        raise ArgumentError("vmap: no argument is batched; give axis_size")
    else:
        w.emit(f"n = {int(axis_size)}")
    w.emit("outs = []")
    w.emit("for i in range(n):")
    w.emit(f"outs.append(f({', '.join(b({}) for b in builders)}))", 2)
    w.emit("stacked = rt.tree_stack(outs, False)")

    def leave(expr, a):
        if a == 0:
            return lambda env: expr
        out = w.fresh(f"{expr}_out")
        if a is None:
            # JAX refuses an unbatched output that depends on the batch: check the lanes
            w.emit(f"{out} = rt.tree_index({expr}, 0)")
            w.emit(f"if not np.array_equal({expr}, np.broadcast_to({out}, np.shape({expr}))):")
            w.emit('raise ValueError("vmap: out_axes=None for an output that depends on '
                   'the batched inputs")', 2)
        else:
            w.emit(f"{out} = rt.tree_moveaxis({expr}, 0, {a})")
        return lambda env: out

    result = w.split("stacked", out_axes, leave)
    w.emit(f"return {result({})}")
    namespace = {"np": np, "rt": __import__("astjax.runtime", fromlist=["rt"]), "rb": rb,
                 "f": fun}
    loop = _load(w.lines, namespace, f"vmap({fun_name(fun)})", name)
    cache[key] = loop
    return loop


def _vmap_of_vmap(inner, in_axes, out_axes, axis_size):
    """``vmap(vmap(f, ...), ...)``: both batch axes merged into one for one vmap of f.

    Each leaf gets the outer batch axis first and the inner one second (an argument
    unbatched at one level is broadcast along it), the two are flattened into one
    axis of size outer*inner, ``f`` runs once vmapped over it, and the results are
    split and moved to the two ``out_axes``.
    """
    fun, in1, out1, size1 = inner._astjax_vmap

    def batched_fun(*args, **kwargs):
        _, outer_axes = _call_axes(fun, in_axes, args, kwargs)
        args, inner_axes = _call_axes(fun, in1, args, kwargs)
        plans, n_out, n_in = [], {}, {}
        for k, (arg, a2, a1) in enumerate(zip(args, outer_axes, inner_axes)):
            leaves, tdef = tree_flatten(arg)
            ax2 = axes_per_leaf(a2, arg, "in_axes")
            ax1 = axes_per_leaf(a1, arg, "in_axes")
            for leaf, b2, b1 in zip(leaves, ax2, ax1):
                shape = np.shape(leaf)
                if b2 is not None:
                    n_out[f"argument {k}"] = shape[b2]
                    shape = shape[:b2 % len(shape)] + shape[b2 % len(shape) + 1:]
                if b1 is not None:
                    n_in[f"argument {k}"] = shape[b1]
            plans.append((leaves, tdef, ax2, ax1))
        if axis_size is not None:
            n_out["axis_size"] = axis_size
        if size1 is not None:
            n_in["axis_size"] = size1
        if not n_out:
            raise ArgumentError("vmap: no argument is batched; give axis_size")
        m2, m1 = rb.batch_size(n_out), rb.batch_size(n_in)
        merged, merged_axes = [], []
        for leaves, tdef, ax2, ax1 in plans:
            if all(b2 is None and b1 is None for b2, b1 in zip(ax2, ax1)):
                merged.append(tree_unflatten(tdef, leaves))
                merged_axes.append(None)
                continue
            new, axes = [], []
            for leaf, b2, b1 in zip(leaves, ax2, ax1):
                if b2 is None and b1 is None:
                    new.append(leaf)
                    axes.append(None)
                    continue
                arr = _array(leaf)
                arr = np.moveaxis(arr, b2, 0) if b2 is not None else \
                    np.broadcast_to(arr, (m2,) + arr.shape)
                arr = np.moveaxis(arr, 1 + b1 % (arr.ndim - 1), 1) if b1 is not None else \
                    np.broadcast_to(arr[:, None], (m2, m1) + arr.shape[1:])
                new.append(np.reshape(arr, (m2 * m1,) + arr.shape[2:]))
                axes.append(0)
            merged.append(tree_unflatten(tdef, new))
            merged_axes.append(tree_unflatten(tdef, axes))
        # keyword-only parameters go by keyword (batched on axis 0) or keep their default
        npos = signature_of(fun).positional
        names = signature_of(fun).names
        kw = {nm: v for nm, v, a in zip(names[npos:], merged[npos:], merged_axes[npos:])
              if a is not None}
        out = vmap(fun, in_axes=tuple(merged_axes[:npos]))(*merged[:npos], **kw)
        leaves, tdef = tree_flatten(out)
        o1 = axes_per_leaf(out1, out, "out_axes")
        o2 = axes_per_leaf(out_axes, out, "out_axes")
        result = []
        for leaf, c1, c2 in zip(leaves, o1, o2):
            arr = np.reshape(_array(leaf), (m2, m1) + np.shape(leaf)[1:])
            arr = _place(arr, 1, c1, "inner")
            arr = _place(arr, 0, c2, "outer")
            result.append(arr)
        return tree_unflatten(tdef, result)

    # other transformations read it as a loop over the inner vmap (jit(vmap(vmap(f))))
    out = wrap(fun, batched_fun, "vmap",
               lambda: _loop_function(inner, in_axes, out_axes, axis_size), None)
    out._astjax_vmap = (inner, in_axes, out_axes, axis_size)
    return out


def _place(arr, axis, out_axis, which):
    """Move batch axis ``axis`` of ``arr`` (0: outer, 1: inner, after the outer one) to
    ``out_axis`` of its level (None: drop it, which needs equal lanes)."""
    if out_axis is None:
        first = np.take(arr, [0], axis=axis)
        if not np.array_equal(arr, np.broadcast_to(first, arr.shape), equal_nan=True):
            raise ArgumentError(f"vmap: out_axes=None for an output that depends on the "
                                f"{which} batched inputs")
        return np.squeeze(first, axis)
    return np.moveaxis(arr, axis, axis + out_axis % (arr.ndim - axis))


def _mask(in_axes, args):
    if isinstance(in_axes, (tuple, list)):
        return [not all(a is None for a in tree_leaves(ax, is_leaf=lambda v: v is None))
                if ax is not None else False for ax in in_axes]
    return [in_axes is not None] * len(args)


def _vmap_by_loop(fun, in_axes, out_axes, axis_size):
    """vmap of a Jacobian or Hessian (assembled at run time from generated columns, so
    there is no one function to batch): the examples one by one, with JAX's axes."""

    def take(arg, spec, i):
        if spec is None:
            return arg
        if isinstance(spec, int):
            return tree_util.tree_map(lambda leaf: np.take(_array(leaf), i, axis=spec), arg)
        if isinstance(spec, dict):
            return type(arg)({k: take(arg[k], spec[k], i) for k in arg})
        parts = [take(a, sp, i) for a, sp in zip(arg, spec)]
        return type(arg)(*parts) if hasattr(arg, "_fields") else type(arg)(parts)

    def stack(outs, spec):
        if spec is None:
            first = outs[0]
            if not all(_same_tree(o, first) for o in outs[1:]):
                raise ArgumentError("vmap: out_axes=None for an output that depends on the "
                                    "batched inputs")
            return first
        if isinstance(spec, int):
            return tree_util.tree_map(lambda *leaves: _stacked(leaves, spec), *outs)
        if isinstance(spec, dict):
            return {k: stack([o[k] for o in outs], spec[k]) for k in outs[0]}
        parts = [stack([o[j] for o in outs], sp) for j, sp in enumerate(spec)]
        return type(outs[0])(parts)

    def batched_fun(*args, **kwargs):
        if isinstance(in_axes, (tuple, list)):
            if len(in_axes) != len(args):
                raise ArgumentError(f"vmap: in_axes has {len(in_axes)} entries but "
                                    f"{fun_name(fun)} got {len(args)} positional arguments")
            axes = list(in_axes)
        else:
            axes = [in_axes] * len(args)
        specs = axes + [0] * len(kwargs)      # keyword arguments: axis 0, as in JAX
        values = list(args) + list(kwargs.values())
        sizes = {}
        for k, (v, spec) in enumerate(zip(values, specs)):
            for leaf, a in zip(tree_leaves(v), axes_per_leaf(spec, v, "in_axes")):
                if a is not None:
                    sizes[f"argument {k}"] = np.shape(leaf)[a]
        if axis_size is not None:
            sizes["axis_size"] = axis_size
        n = rb.batch_size(sizes)
        outs = []
        for i in range(n):
            got = [take(v, spec, i) for v, spec in zip(values, specs)]
            outs.append(fun(*got[:len(args)], **dict(zip(kwargs, got[len(args):]))))
        return stack(outs, out_axes)

    out = wrap(fun, batched_fun, fun._astjax, None, None)
    # still assembled: not transformable again, and no longer the Jacobian of fun
    for attr in ("_astjax_generated", "_astjax_source", "_astjax_vmap", "_astjax_batched"):
        out.__dict__.pop(attr, None)
    out._astjax_jacobian = None
    return out


def _same_tree(a, b):
    la, ta = tree_flatten(a)
    lb, tb = tree_flatten(b)
    return ta == tb and all(np.array_equal(x, y, equal_nan=True) for x, y in zip(la, lb))


def _unbatched_lanes(x, size):
    """An out_axes=None output of batched code: every lane must hold the same value."""
    return leave_batch(x, None, size, True)


transform_table.register("vmap", vmap, inline=True)

__all__ = ["vmap"]


def _array(leaf):
    """``leaf`` as an array without leaving its device: CuPy arrays stay (``np.*``
    functions dispatch to CuPy for them; ``np.asarray`` of one raises)."""
    from astjax.device import is_device_array
    return leaf if is_device_array(leaf) else np.asarray(leaf)


def _stacked(leaves, axis):
    """``np.stack`` of the examples' leaves on their array module."""
    from astjax.device import array_module, asarray_like
    xp = array_module(*leaves)
    return xp.stack([asarray_like(xp, v) for v in leaves], axis=axis)


def _runtime_batch(leaves):
    """``runtime_batch`` for the leaves' array module (its CuPy clone for CuPy)."""
    from astjax import device
    xp = device.tree_module(leaves)
    return rb if xp is np else device.runtime_for(xp)["astjax.runtime_batch"]
