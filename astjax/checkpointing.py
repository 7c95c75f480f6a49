"""``checkpoint`` / ``remat``: reverse mode recomputes a function's forward.

A checkpointed function is a custom function (``astjax/custom_rules.py``) of kind
"remat": going forward, reverse mode runs it as one opaque call and keeps only its
inputs; its backward rule, generated, is the gradient of ``<g, f(inputs)>``, which
runs the forward again with a tape of its own.  Other transformations see ``f``.
A nested def or lambda is lambda-lifted (``lift``): what it reads from the enclosing
function becomes leading parameters, passed at the call.
"""
from __future__ import annotations

import functools

from astjax import codegen, core, transform_table
from astjax.core import Const, Prim, Return, Var
from astjax.custom_rules import Rules, CustomFunction, define_function, serial_rules
from astjax.custom_rules import normalize_call
from astjax.errors import TransformError

__all__ = ["checkpoint", "remat", "checkpoint_policies"]


class checkpoint_policies:
    """Which intermediates of a checkpointed function the forward sweep keeps.

    ``nothing_saveable`` (the default): only the inputs, everything else recomputed;
    ``everything_saveable``: everything (no checkpoint); ``dots_saveable`` (alias
    ``checkpoint_dots``) and ``dots_with_no_batch_dims_saveable``: the results of its
    matrix products (``np.dot``, ``np.matmul``, ``@``), which the backward sweep reads
    back instead of recomputing them (astjax saves every such product for both).
    """

    @staticmethod
    def nothing_saveable(*_, **__):
        return False

    @staticmethod
    def everything_saveable(*_, **__):
        return True

    @staticmethod
    def dots_saveable(*_, **__):
        return False

    @staticmethod
    def dots_with_no_batch_dims_saveable(*_, **__):
        return False

    checkpoint_dots = dots_saveable
    checkpoint_dots_with_no_batch_dims = dots_with_no_batch_dims_saveable


_PRODUCTS = ("dot", "matmul")


def _is_product(s):
    return isinstance(s, Prim) and s.prim in _PRODUCTS and s.target and not s.kwargs and (
        len(s.args) < 3 or (isinstance(s.args[2], Const) and s.args[2].value is None))


def product_versions(primal, name):
    """(record, replay) of a checkpointed function (policy ``dots_saveable``):
    ``record(*xs) -> (out, products)`` also returns the results of its matrix products
    in the order they were made; ``replay(*xs, products)`` reads them back instead of
    computing them (``rt.saved_dot``: the saved value, the product's derivative)."""
    from astjax.generation import load_functions, normalized
    names, fn, result = normalized(primal)
    saved = names.fresh("products")

    def record(stmts):
        out = []
        for s in stmts:
            for b in core.child_blocks(s):
                b[:] = record(b)
            out.append(s)
            if _is_product(s):   # (a functional append: vmap sees the list batched)
                out.append(Prim(saved, "append", [Var(saved), Var(s.target)], loc=s.loc))
        return out
    pair = names.fresh("out_and_products")
    fn.body = ([Prim(saved, "make_list", [()], loc=fn.loc)] + record(fn.body[:-1]) +
               [Prim(pair, "make_tuple", [(Var(result), Var(saved))], loc=fn.loc),
                Return(Var(pair), loc=fn.loc)])
    fn.name = f"{name}_saving_products"
    rec = load_functions([(fn, f"{name}, saving its matrix products (checkpoint)")],
                         fn.env, f"checkpoint {name} record", ["main"]).functions["main"]

    names, fn, result = normalized(primal)
    products, cursor = names.fresh("products"), names.fresh("cursor")

    def replay(stmts):
        out = []
        for s in stmts:
            for b in core.child_blocks(s):
                b[:] = replay(b)
            if _is_product(s):
                v = names.fresh(f"{s.target}_saved")
                out.append(Prim(v, "replay", [Var(cursor)], loc=s.loc))
                out.append(Prim(s.target, f"saved_{s.prim}", [Var(v), s.args[0], s.args[1]],
                                loc=s.loc))
            else:
                out.append(s)
        return out
    fn.params = fn.params + [products]
    fn.body = [Prim(cursor, "replay_start", [Var(products)], loc=fn.loc)] + replay(fn.body)
    fn.name = f"{name}_reading_products"
    rep = load_functions([(fn, f"{name}, its matrix products read back (checkpoint)")],
                         fn.env, f"checkpoint {name} replay", ["main"]).functions["main"]
    return rec, rep


class _Checkpointed(CustomFunction):
    kind = "remat"

    def __init__(self, fun, static_argnums=(), policy=None, prevent_cse=True):
        if isinstance(static_argnums, int):
            static_argnums = (static_argnums,)
        super().__init__(fun, static_argnums)
        self.static_argnums = self.nondiff_argnums
        self.policy = policy
        self.prevent_cse = prevent_cse

    @property
    def saves_everything(self):
        return self.policy is checkpoint_policies.everything_saveable

    def _make_rules(self, statics):
        names, operands, pieces, ns = self._layout(statics)
        ns.update(fun=self.fun)
        diff = [names.index(n) not in self.static_argnums for n in operands]
        primal = define_function(f"{self.__name__}_primal", operands,
                         [f"return fun({', '.join(pieces)})"], ns)
        return Rules("remat", self.__name__, operands, diff, primal, policy=self.policy)


def checkpoint(fun=None, *, prevent_cse=True, policy=None, static_argnums=()):
    """``jax.checkpoint`` / ``jax.remat``: under reverse mode, keep only the inputs of
    ``fun`` and recompute its forward in the backward sweep (less memory, more time).
    Outside reverse mode it is ``fun``.  Inside a transformed function ``fun`` may be a
    nested def or lambda: what it reads from the enclosing function is passed in."""
    if fun is None:
        return functools.partial(checkpoint, prevent_cse=prevent_cse, policy=policy,
                                 static_argnums=static_argnums)
    if isinstance(fun, _Lifted):
        if isinstance(static_argnums, int):
            static_argnums = (static_argnums,)
        n = len(fun.operands)
        inner = _Checkpointed(fun.fn, tuple(i + n for i in static_argnums), policy,
                              prevent_cse)
        return _WithLeading(inner, fun.operands)
    return _Checkpointed(fun, static_argnums, policy, prevent_cse)


class _Lifted:
    """A nested def or lambda made a module-level function (``lift``): the enclosing
    function's variables it reads are its leading parameters, ``operands`` at calls."""

    def __init__(self, fn, operands):
        self.fn, self.operands = fn, list(operands)


class _WithLeading:
    """A checkpointed lifted function: calls pass its captured operands first."""

    def __init__(self, custom, operands):
        self.custom, self.operands = custom, operands

    def __call__(self, *args, **kwargs):
        raise TypeError("a checkpoint of a nested function is called only inside the "
                        "function astjax transforms")

    def _astjax_custom_call(self, norm, args, kwargs, node, hint, target):
        return normalize_call(self.custom, norm, list(self.operands) + list(args), kwargs,
                              node, hint, target)


def lift(norm, local):
    """Lambda-lift a nested def or lambda (``LocalFunc``) into a ``_Lifted``."""
    import ast
    import gast
    from astjax.frontend.normalize import ObjFunc
    node = local.node
    args = node.args
    if args.vararg or args.kwarg:
        norm.error(node, "checkpoint of a function with *args/**kwargs", cls=TransformError)
    inside = set()
    for n in gast.walk(node):
        if isinstance(n, gast.Name) and not isinstance(n.ctx, gast.Load):
            inside.add(n.id)
        elif isinstance(n, (gast.FunctionDef, gast.Lambda)):
            if isinstance(n, gast.FunctionDef):
                inside.add(n.name)
            a = n.args
            inside.update(x.id for x in a.posonlyargs + a.args + a.kwonlyargs)
    free = []
    for n in gast.walk(node):
        if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Load) and \
                n.id not in inside and n.id not in free:
            free.append(n.id)
    saved = norm.scope
    norm.scope = local.scope
    params, operands, ns = [], [], {}
    try:
        for name in free:
            kind, *rest = norm.lookup(name, node)
            if kind == "local":
                params.append(name)
                operands.append(rest[0])
            elif kind == "object":
                ns[name] = rest[0]
            elif isinstance(rest[0], ObjFunc):
                ns[name] = rest[0].obj
            else:
                norm.error(node, f"checkpoint of a nested function that calls the nested "
                                 f"function {name!r}",
                           "define the functions it calls at module level",
                           cls=TransformError)
    finally:
        norm.scope = saved
    tree = gast.gast_to_ast(node)
    fname = getattr(node, "name", "checkpointed_lambda")
    extra = [ast.arg(arg=p) for p in params]
    if isinstance(tree, ast.Lambda):
        tree.args.args[:0] = extra
        src = f"def {fname}({ast.unparse(tree.args)}):\n    return {ast.unparse(tree.body)}\n"
    else:
        tree.decorator_list = []
        tree.args.args[:0] = extra
        src = ast.unparse(ast.fix_missing_locations(ast.Module([tree], []))) + "\n"
    namespace = dict(local.scope.fsrc.globals) if hasattr(local.scope.fsrc, "globals") else {}
    namespace.update(ns)
    label = f"checkpoint({fname}) lifted {next(serial_rules)}"
    origins = [norm.location(node)] * (src.count("\n") + 1)
    codegen.load_source(src, namespace, label, origins)
    return _Lifted(namespace[fname], operands)


remat = checkpoint

# inside transformed code, ``checkpoint(f)`` is built at generation time and inlined; a
# nested def or lambda handed to it is lifted to a module-level function first
transform_table.register("checkpoint", checkpoint, inline=True, lift=lift)
