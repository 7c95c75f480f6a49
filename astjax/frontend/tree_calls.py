"""``astjax.tree_util`` calls inside transformed code.

A pytree's structure is not known when code is generated (the same code serves every
argument of that structure), so ``tree_leaves``/``tree_flatten``/``tree_unflatten``/
``tree_structure`` become primitives with rules in every mode (their runtime is in
``astjax/runtime_batch.py``), and ``tree_map(f, tree, *rest)`` is written out as a loop
over the leaves with ``f`` inlined::

    sq = tree_util.tree_map(lambda p: p * p, params)

becomes (core form)::

    sq_leaves = rb.tree_leaves_of(params)
    sq_def = rb.tree_structure_of(params)
    sq_mapped = []
    for sq_i in range(0, len(sq_leaves)):
        p = sq_leaves[sq_i]
        sq_out = p * p
        sq_mapped = rt.append(sq_mapped, sq_out)
    sq = rb.tree_unflatten_of(sq_def, sq_mapped)

``is_leaf`` (a function deciding the structure at run time) is refused with a hint.
The handlers join ``astjax.lax``'s in the normalizer's table of special calls.
"""
from __future__ import annotations

import gast

from astjax import primitives as P
from astjax import runtime_batch as rb
from astjax import tree_util
from astjax.core import Const, For, Index, Prim, Var
from astjax.errors import TransformError
from astjax.frontend.lax_rewrite import HANDLERS, _bind, _out


def _tree_sample(rng):
    return (({"w": rng.standard_normal((3, 4)), "b": (rng.standard_normal(4),
                                                       rng.standard_normal(()))},), {})


def _leaves_sample(rng):
    like = (rng.standard_normal((3, 4)), [rng.standard_normal(4)])
    return (([rng.standard_normal((3, 4)), rng.standard_normal(4)], like), {})


def _like_sample(rng):
    like = (rng.standard_normal((3, 4)), [rng.standard_normal(4)])
    return (((rng.standard_normal((3, 4)), [rng.standard_normal(4)]), like), {})


def _unflatten_sample(rng):
    tdef = tree_util.tree_structure({"a": 0.0, "b": (0.0, 0.0)})
    return ((tdef, [rng.standard_normal((3, 4)), rng.standard_normal(4),
                    rng.standard_normal(2)]), {})


for _name, _params, _diff, _meta, _sample, _kind in (
        ("tree_leaves_of", ("x",), ("x",), (), _tree_sample, "structural"),
        ("tree_from_leaves", ("leaves", "like"), ("leaves",), ("like",), _leaves_sample,
         "structural"),
        ("tree_leaves_like", ("t", "like"), ("t",), ("like",), _like_sample, "structural"),
        ("tree_unflatten_of", ("treedef", "leaves"), ("leaves",), (), _unflatten_sample,
         "structural"),
        ("tree_structure_of", ("x",), (), ("x",), _tree_sample, "static")):
    if _name not in P.REGISTRY:
        P.register(P.Primitive(_name, getattr(rb, _name), f"rb.{_name}", _params,
                               diff=_diff, kind=_kind, meta=_meta, sample=_sample))


def _no_is_leaf(norm, node, b, what):
    if "is_leaf" in b and not (isinstance(b["is_leaf"], gast.Constant) and
                               b["is_leaf"].value is None):
        norm.error(node, f"tree_util.{what}(..., is_leaf=...) is not supported inside a "
                         "transformed function (the structure would depend on a function "
                         "run on the values)",
                   "flatten outside the transformed function, or index the container "
                   "directly", cls=TransformError)


def handle_tree_leaves(norm, node, hint, target):
    b = _bind(norm, node, ["tree", "is_leaf"], {"is_leaf": None}, "tree_leaves")
    _no_is_leaf(norm, node, b, "tree_leaves")
    tree = norm.expr(b["tree"], hint)
    out = _out(norm, target, hint, "leaves")
    norm.emit(Prim(out, "tree_leaves_of", [tree]))
    return Var(out)


def handle_tree_structure(norm, node, hint, target):
    b = _bind(norm, node, ["tree", "is_leaf"], {"is_leaf": None}, "tree_structure")
    _no_is_leaf(norm, node, b, "tree_structure")
    tree = norm.expr(b["tree"], hint)
    out = _out(norm, target, hint, "treedef")
    norm.emit(Prim(out, "tree_structure_of", [tree]))
    return Var(out)


def handle_tree_flatten(norm, node, hint, target):
    b = _bind(norm, node, ["tree", "is_leaf"], {"is_leaf": None}, "tree_flatten")
    _no_is_leaf(norm, node, b, "tree_flatten")
    tree = norm.expr(b["tree"], hint)
    leaves, tdef = norm.tmp(hint, "leaves"), norm.tmp(hint, "treedef")
    norm.emit(Prim(leaves, "tree_leaves_of", [tree]))
    norm.emit(Prim(tdef, "tree_structure_of", [tree]))
    out = _out(norm, target, hint, "flat")
    norm.emit(Prim(out, "make_tuple", [(Var(leaves), Var(tdef))]))
    return Var(out)


def handle_tree_unflatten(norm, node, hint, target):
    b = _bind(norm, node, ["treedef", "leaves"], {}, "tree_unflatten")
    tdef = norm.expr(b["treedef"], "treedef")
    leaves = norm.expr(b["leaves"], hint)
    out = _out(norm, target, hint, "tree")
    norm.emit(Prim(out, "tree_unflatten_of", [tdef, leaves]))
    return Var(out)


def handle_tree_map(norm, node, hint, target):
    if any(isinstance(a, gast.Starred) for a in node.args) or any(
            k.arg is None for k in node.keywords):
        norm.error(node, "tree_util.tree_map: *args/**kwargs are not supported here",
                   "pass the trees explicitly", cls=TransformError)
    for kw in node.keywords:
        if kw.arg != "is_leaf":
            norm.error(node, f"tree_util.tree_map got an unexpected keyword argument "
                             f"{kw.arg!r}", cls=TransformError)
        _no_is_leaf(norm, node, {"is_leaf": kw.value}, "tree_map")
    if len(node.args) < 2:
        norm.error(node, "tree_util.tree_map(f, tree, *rest) needs a function and a tree",
                   cls=TransformError)
    f_ref = norm.function_ref(node.args[0])
    trees = [norm.expr(a, hint) for a in node.args[1:]]
    leaves = norm.tmp(hint, "leaves")
    norm.emit(Prim(leaves, "tree_leaves_of", [trees[0]]))
    tdef = norm.tmp(hint, "treedef")
    norm.emit(Prim(tdef, "tree_structure_of", [trees[0]]))
    # the other trees have the first one's structure (as a prefix): their leaves in
    # the first one's order
    others = []
    for t in trees[1:]:
        o = norm.tmp(hint, "leaves")
        norm.emit(Prim(o, "tree_leaves_like", [t, trees[0]]))
        others.append(o)
    n = norm.tmp(hint, "n_leaves")
    norm.emit(Prim(n, "len", [Var(leaves)]))
    mapped = norm.tmp(hint, "mapped")
    norm.emit(Prim(mapped, "make_list", [()]))
    i = norm.fresh("leaf_i")
    body: list = []
    with norm.emitting(body):
        items = []
        for src in [leaves] + others:
            item = norm.fresh("leaf")
            norm.emit(Prim(item, "getitem", [Var(src), Index((Var(i),))]))
            items.append(Var(item))
        y = norm.tmp(hint, "leaf_out")
        norm.call_function_ref(f_ref, items, {}, node, y, y)
        norm.emit(Prim(mapped, "append", [Var(mapped), Var(y)]))
    norm.emit(For(i, Prim(None, "range", [Const(0), Var(n), Const(None)]), body))
    out = _out(norm, target, hint, "tree")
    norm.emit(Prim(out, "tree_unflatten_of", [Var(tdef), Var(mapped)]))
    return Var(out)


def handle_tree_reduce(norm, node, hint, target):
    b = _bind(norm, node, ["function", "tree", "initializer", "is_leaf"],
              {"initializer": None, "is_leaf": None}, "tree_reduce")
    _no_is_leaf(norm, node, b, "tree_reduce")
    f_ref = norm.function_ref(b["function"])
    tree = norm.expr(b["tree"], hint)
    leaves = norm.tmp(hint, "leaves")
    norm.emit(Prim(leaves, "tree_leaves_of", [tree]))
    n = norm.tmp(hint, "n_leaves")
    norm.emit(Prim(n, "len", [Var(leaves)]))
    total = _out(norm, target, hint, "reduced")
    first = Const(0)
    if "initializer" in b:
        norm.expr(b["initializer"], total, target=total)
    else:   # the first leaf starts the fold (an empty tree is an error, as in JAX)
        norm.emit(Prim(total, "getitem", [Var(leaves), Index((Const(0),))]))
        first = Const(1)
    i = norm.fresh("leaf_i")
    body: list = []
    with norm.emitting(body):
        item = norm.fresh("leaf")
        norm.emit(Prim(item, "getitem", [Var(leaves), Index((Var(i),))]))
        norm.call_function_ref(f_ref, [Var(total), Var(item)], {}, node, total, total)
    norm.emit(For(i, Prim(None, "range", [first, Var(n), Const(None)]), body))
    return Var(total)


HANDLERS.update({
    id(tree_util.tree_reduce): handle_tree_reduce,
    id(tree_util.tree_leaves): handle_tree_leaves,
    id(tree_util.tree_structure): handle_tree_structure,
    id(tree_util.tree_flatten): handle_tree_flatten,
    id(tree_util.tree_unflatten): handle_tree_unflatten,
    id(tree_util.tree_map): handle_tree_map,
})

__all__ = ["HANDLERS"]
