"""``vmap`` with JAX's signature: batching by source transformation.

The generated function works on whole batches; ``in_axes``/``out_axes`` only decide
where the batch axis sits when entering and leaving it (inside, it is the last axis:
see ``astjax/runtime_batch.py``).
"""
from __future__ import annotations

import numpy as np

from astjax import codegen, core
from astjax import runtime_batch as rb
from astjax.api import (_cache_for, cached, _check_callable, _fun_name, _normalizer_factory,
                        _wrap, function_arguments, load_functions, normalized)
from astjax.core import Const, Copy, Return, Var
from astjax.errors import ArgumentError
from astjax.transforms.batch import Batching
from astjax.tree_util import tree_flatten, tree_leaves, tree_unflatten


def _build(fun, batched_mask, static_functions):
    fname = _fun_name(fun)
    names, fn, result = normalized(fun, static_functions)
    loc = fn.loc
    size = names.fresh("batch_size")
    batched = [p for p, b in zip(fn.params, batched_mask) if b]
    tr = Batching(fn, batched, size, _normalizer_factory)
    body = tr.transform([s for s in fn.body if not isinstance(s, Return)])
    pre = [Copy(v, Const(None), loc=loc) for v in sorted(tr.undefined_ok)
           if v not in fn.params]
    body = pre + body + [Return(Var(result), loc=loc)]
    gname = names.fresh(f"vmap_{fname}")
    gfn = core.Function(gname, fn.params + [size], body, loc=loc, env=fn.env)
    gen = load_functions([(gfn, f"vmap of {fname}: batched arguments carry the batch as "
                                "their last axis.")], fn.env, f"vmap({fname})", ["main"])
    gen.out_batched = result in tr.batched
    return gen


def _get(fun, batched_mask, args):
    static = function_arguments(args)
    return cached(fun, ("vmap", tuple(batched_mask), static),
                  lambda: _build(fun, batched_mask, dict(static)))


def _axes_per_leaf(axes, tree, what):
    """``axes`` (int, None, or a pytree prefix of ``tree``) as one axis per leaf."""
    leaves, tdef = tree_flatten(tree)
    if axes is None or isinstance(axes, (int, np.integer)):
        return [axes] * len(leaves)
    axes_leaves, axes_def = tree_flatten(axes, is_leaf=lambda v: v is None)
    if axes_def == tdef:
        return list(axes_leaves)
    # a prefix: each axes leaf stands for a whole subtree of ``tree``
    out = []
    try:
        subtrees = axes_def.flatten_up_to(tree)
    except (ValueError, TypeError):
        subtrees = None
    if subtrees is None or len(subtrees) != len(axes_leaves):
        raise ArgumentError(f"vmap: {what} {axes!r} does not match the argument's structure "
                            f"{tdef}")
    for ax, sub in zip(axes_leaves, subtrees):
        out.extend([ax] * len(tree_leaves(sub)))
    return out


def vmap(fun, in_axes=0, out_axes=0, axis_size=None):
    """Vectorize ``fun`` over a batch axis of its arguments (JAX semantics)."""
    if not (in_axes is None or isinstance(in_axes, (int, tuple, list, dict))):
        raise ArgumentError(f"vmap: in_axes must be an int, None or a pytree, got {in_axes!r}")
    if getattr(fun, "_astjax_vmap", None) is not None:
        return _vmap_of_vmap(fun, in_axes, out_axes, axis_size)
    _check_callable(fun, "vmap")

    def batched_fun(*args):
        if isinstance(in_axes, (tuple, list)) and not isinstance(in_axes, dict):
            if len(in_axes) != len(args):
                raise ArgumentError(f"vmap: in_axes has {len(in_axes)} entries but "
                                    f"{_fun_name(fun)} got {len(args)} arguments")
            per_arg = list(in_axes)
        else:
            per_arg = [in_axes] * len(args)
        sizes = {}
        moved = []
        mask = []
        for k, (arg, axes) in enumerate(zip(args, per_arg)):
            leaves, tdef = tree_flatten(arg)
            leaf_axes = _axes_per_leaf(axes, arg, "in_axes")
            if all(a is None for a in leaf_axes):
                moved.append(arg)
                mask.append(False)
                continue
            new = []
            for leaf, a in zip(leaves, leaf_axes):
                if a is None:
                    new.append(leaf)
                    continue
                arr = np.asarray(leaf)
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
            new = [leaf if a is not None else rb.broadcast_batch(leaf, size)
                   for leaf, a in zip(new, leaf_axes)]
            final.append(tree_unflatten(tdef, new))
        gen = _get(fun, mask, args)
        gen.refresh()
        out = gen.functions["main"](*final, size)
        return _leave(out, out_axes, size, gen.out_batched)

    batched_fun._astjax_source = lambda *a, **k: _get(fun, _mask(in_axes, a), a)
    out = _wrap(fun, batched_fun, "vmap",
                lambda: _loop_function(fun, in_axes, out_axes, axis_size),
                batched_fun._astjax_source)
    out._astjax_batched = lambda: _entry_function(fun, in_axes, out_axes, axis_size)
    out._astjax_vmap = (fun, in_axes, out_axes, axis_size)
    return out


def _static_axes(fun, in_axes, out_axes):
    """(parameter names, one int-or-None axis per parameter) for the generated forms."""
    from astjax.frontend.source import get_function_source, unwrap_callable
    func, pargs, _ = unwrap_callable(fun)
    generated = getattr(func, "_astjax_generated", None)
    if generated is not None:      # vmap(grad(f)): the parameters of the code grad runs
        func = generated()
    node = get_function_source(func).node
    params = [a.id for a in node.args.posonlyargs + node.args.args][len(pargs):]
    axes = _per_arg(in_axes, params)
    if not all(a is None or isinstance(a, int) for a in axes) or not (
            out_axes is None or isinstance(out_axes, int)):
        raise ArgumentError("vmap inside another transformation needs int or None "
                            "in_axes (one per argument) and out_axes")
    return params, axes


def _entry_function(fun, in_axes, out_axes, axis_size):
    """The whole vmapped function as generated Python, so that other transformations
    can read it (``grad(vmap(f))``, ``jit(vmap(f))``): batch axes moved to the end,
    the batched code called, the batch axis moved to ``out_axes``.

    Needs ints or None for ``in_axes`` (per argument) and ``out_axes``.
    """
    params, axes = _static_axes(fun, in_axes, out_axes)
    mask = [a is not None for a in axes]
    if not any(mask) and axis_size is None:
        raise ArgumentError("vmap: no argument is batched; give axis_size")
    key = ("vmap_entry", tuple(axes), out_axes, axis_size)
    cache = _cache_for(fun)
    if key in cache:
        return cache[key]
    gen = _get(fun, mask, ())
    names = [f"a{i}" for i in range(len(params))]
    lines = [f"def vmap_{_fun_name(fun)}({', '.join(names)}):",
             '    """vmap entry: batch axes to the end, batched code, batch axis out."""']
    first = next((i for i, a in enumerate(axes) if a is not None), None)
    size = "size"
    if first is None:
        lines.append(f"    {size} = {int(axis_size)}")
    else:
        lines.append(f"    {size} = rb.leaf_axis_size({names[first]}, {axes[first]})")
    call = []
    for name, a in zip(names, axes):
        if a is None:
            call.append(name)
        else:
            lines.append(f"    {name}_last = rb.to_last({name}, {a})")
            call.append(f"{name}_last")
    lines.append(f"    out = batched({', '.join(call + [size])})")
    lines.append(f"    result = rb.from_last(out, {out_axes!r}, {size}, {gen.out_batched!r})")
    lines.append("    return result")
    namespace = {"rb": rb, "batched": gen.functions["main"]}
    codegen.load_source("\n".join(lines) + "\n", namespace, f"vmap({_fun_name(fun)})")
    entry = namespace[f"vmap_{_fun_name(fun)}"]
    cache[key] = entry
    return entry


def _loop_function(fun, in_axes, out_axes, axis_size):
    """vmap as a loop over examples, as generated Python other transformations can read.

    ``grad(vmap(f))`` and ``jvp`` of it differentiate this version: a ``for`` over the
    batch calling ``f`` on each example and stacking the results, which every
    transformation already handles.  (``jit(vmap(f))`` uses the batched version.)
    """
    params, axes = _static_axes(fun, in_axes, out_axes)
    key = ("vmap_loop", tuple(axes), out_axes, axis_size)
    cache = _cache_for(fun)
    if key in cache:
        return cache[key]
    names = [f"a{i}" for i in range(len(params))]
    name = f"vmap_loop_{_fun_name(fun)}"
    lines = [f"def {name}({', '.join(names)}):",
             '    """vmap as a loop over the examples (the form grad and jvp read)."""']
    first = next((i for i, a in enumerate(axes) if a is not None), None)
    if first is None:
        if axis_size is None:
            raise ArgumentError("vmap: no argument is batched; give axis_size")
        lines.append(f"    n = {int(axis_size)}")
    else:
        lines.append(f"    n = rb.leaf_axis_size({names[first]}, {axes[first]})")
    for nm, a in zip(names, axes):
        if a not in (None, 0):
            lines.append(f"    {nm} = np.moveaxis({nm}, {a}, 0)")
    lines.append("    outs = []")
    lines.append("    for i in range(n):")
    call = [f"rt.tree_index({nm}, i)" if a is not None else nm for nm, a in zip(names, axes)]
    lines.append(f"        outs.append(f({', '.join(call)}))")
    lines.append("    out = rt.tree_stack(outs, False)")
    if out_axes not in (0, None):
        lines.append(f"    out = np.moveaxis(out, 0, {out_axes})")
    lines.append("    return out")
    namespace = {"np": np, "rt": __import__("astjax.runtime", fromlist=["rt"]), "rb": rb,
                 "f": fun}
    codegen.load_source("\n".join(lines) + "\n", namespace, f"vmap({_fun_name(fun)})")
    cache[key] = namespace[name]
    return namespace[name]


def _per_arg(in_axes, args):
    if isinstance(in_axes, (tuple, list)):
        if len(in_axes) != len(args):
            raise ArgumentError(f"vmap: in_axes has {len(in_axes)} entries but the function "
                                f"got {len(args)} arguments")
        return list(in_axes)
    return [in_axes] * len(args)


def _vmap_of_vmap(inner, in_axes, out_axes, axis_size):
    """``vmap(vmap(f, ...), ...)``: both batch axes merged into one for one vmap of f.

    Each leaf gets the outer batch axis first and the inner one second (an argument
    unbatched at one level is broadcast along it), the two are flattened into one
    axis of size outer*inner, ``f`` runs once vmapped over it, and the results are
    split and moved to the two ``out_axes``.
    """
    fun, in1, out1, size1 = inner._astjax_vmap

    def batched_fun(*args):
        outer_axes = _per_arg(in_axes, args)
        inner_axes = _per_arg(in1, args)
        plans, n_out, n_in = [], {}, {}
        for k, (arg, a2, a1) in enumerate(zip(args, outer_axes, inner_axes)):
            leaves, tdef = tree_flatten(arg)
            ax2 = _axes_per_leaf(a2, arg, "in_axes")
            ax1 = _axes_per_leaf(a1, arg, "in_axes")
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
                arr = np.asarray(leaf)
                arr = np.moveaxis(arr, b2, 0) if b2 is not None else \
                    np.broadcast_to(arr, (m2,) + arr.shape)
                arr = np.moveaxis(arr, 1 + b1 % (arr.ndim - 1), 1) if b1 is not None else \
                    np.broadcast_to(arr[:, None], (m2, m1) + arr.shape[1:])
                new.append(np.reshape(arr, (m2 * m1,) + arr.shape[2:]))
                axes.append(0)
            merged.append(tree_unflatten(tdef, new))
            merged_axes.append(tree_unflatten(tdef, axes))
        out = vmap(fun, in_axes=tuple(merged_axes))(*merged)
        leaves, tdef = tree_flatten(out)
        o1 = _axes_per_leaf(out1, out, "out_axes")
        o2 = _axes_per_leaf(out_axes, out, "out_axes")
        result = []
        for leaf, c1, c2 in zip(leaves, o1, o2):
            arr = np.reshape(np.asarray(leaf), (m2, m1) + np.shape(leaf)[1:])
            arr = _place(arr, 1, c1, "inner")
            arr = _place(arr, 0, c2, "outer")
            result.append(arr)
        return tree_unflatten(tdef, result)

    out = _wrap(fun, batched_fun, "vmap", None, None)
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


def _leave(out, out_axes, size, batched):
    leaves, tdef = tree_flatten(out)
    axes = _axes_per_leaf(out_axes, out, "out_axes")
    result = []
    for leaf, a in zip(leaves, axes):
        if a is None:
            if batched:
                # the batched code holds every output batched; one whose lanes all
                # agree does not depend on the batched inputs
                arr = np.asarray(leaf)
                if not (arr.ndim and arr.shape[-1] in (1, size) and np.array_equal(
                        arr, np.broadcast_to(arr[..., :1], arr.shape), equal_nan=True)):
                    raise ArgumentError("vmap: out_axes=None for an output that depends "
                                        "on the batched inputs")
                leaf = arr[..., 0]
            result.append(leaf)
            continue
        arr = np.asarray(leaf)
        if not batched:
            arr = np.broadcast_to(arr[..., None], arr.shape + (size,))
        elif arr.ndim == 0 or arr.shape[-1] != size:  # a lane-independent value
            arr = np.broadcast_to(arr, arr.shape[:-1] + (size,)) if arr.ndim and \
                arr.shape[-1] == 1 else np.broadcast_to(arr[..., None], arr.shape + (size,))
        result.append(np.moveaxis(arr, -1, a if a >= 0 else arr.ndim + a))
    return tree_unflatten(tdef, result)


__all__ = ["vmap"]
