"""Forward mode and Jacobians with JAX's names: jvp, linearize, jacfwd, jacrev,
jacobian, hessian.

``jvp`` generates one Python function that computes the output and its tangent
(``astjax/transforms/forward.py``).  Jacobians are assembled from jvps (one per input
element, ``jacfwd``) or from vjps (one per output element, ``jacrev``, which reuses a
single forward sweep); ``hessian`` is forward over reverse: jvps of the generated
gradient code.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from astjax import api, codegen, core, device, transform_table
from astjax.binding import (bind_arguments, call_bound, fixed_arity_call, fun_name,
                            function_arguments, normalize_argnums, plain_callable)
from astjax.generation import (cached, check_callable, load_functions, normalized,
                               normalizer_factory, wrap_plain)
from astjax.core import Prim, Return, Var
from astjax.errors import ArgumentError
from astjax.holomorphic import check_inputs, check_outputs
from astjax.transforms.forward import ForwardAD
from astjax.transforms.linearize import NotSplittable
from astjax.tree_util import (tree_flatten, tree_leaves, tree_map, tree_structure,
                               tree_unflatten)


# ----------------------------------------------------------------- generation

def _build_forward(fun, nums, static_functions):
    """Generate ``jvp_f(*params, *tangents_of_params_in_nums) -> (out, out_dot)``."""
    fname = fun_name(fun)
    names, fn, result = normalized(fun, static_functions)
    loc = fn.loc
    wrt = [fn.params[i] for i in nums]
    fad = ForwardAD(fn, wrt, normalizer_factory)
    tangent_params = [fad.dot(p) for p in wrt]
    body = fad.transform([s for s in fn.body if not isinstance(s, Return)])
    out_dot = names.fresh(f"{result}_tangent")
    if result in fad.varied:
        body.append(Prim(out_dot, "instantiate", [Var(fad.dot(result)), Var(result)], loc=loc))
    else:
        body.append(Prim(out_dot, "zeros_like", [Var(result)], loc=loc))
    pair = names.fresh("out_and_tangent")
    body.append(Prim(pair, "make_tuple", [(Var(result), Var(out_dot))], loc=loc))
    body.append(Return(Var(pair), loc=loc))
    gname = names.fresh(f"jvp_{fname}")
    gfn = core.Function(gname, fn.params + tangent_params, body, loc=loc, env=fn.env)
    return load_functions([(gfn, f"jvp of {fname}: the output and its tangent, generated "
                                 "by astjax.")], fn.env, f"jvp({fname})", ["main"])


def get_forward(fun, nums, args=()):
    static = function_arguments(args)
    return cached(fun, ("jvp", tuple(nums), static),
                  lambda: _build_forward(fun, nums, dict(static)))


# ------------------------------------------------------------------------ jvp

def _check_tangents(primals, tangents):
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise ArgumentError("jvp: primals and tangents must be tuples (or lists), like JAX: "
                            "jvp(f, (x,), (v,))")
    if len(primals) != len(tangents):
        raise ArgumentError(f"jvp: {len(primals)} primals but {len(tangents)} tangents")
    for k, (p, t) in enumerate(zip(primals, tangents)):
        if tree_structure(p) != tree_structure(t):
            raise ArgumentError(f"jvp: tangent {k} has structure {tree_structure(t)}, but its "
                                f"primal has {tree_structure(p)}")
        for pl, tl in zip(tree_leaves(p), tree_leaves(t)):
            if np.shape(pl) != np.shape(tl):
                raise ArgumentError(f"jvp: tangent {k} has shape {np.shape(tl)}, but its "
                                    f"primal has shape {np.shape(pl)}")


def jvp(fun, primals, tangents, has_aux=False):
    """``(fun(*primals), J @ tangents)`` by forward-mode source transformation."""
    fun = plain_callable(fun)
    check_callable(fun, "jvp")
    _check_tangents(primals, tangents)
    fun = fixed_arity_call(fun, primals, {})      # *args: this call's arity
    values = bind_arguments(fun, tuple(primals), {}, "jvp")
    gen = get_forward(fun, tuple(range(len(primals))), values)
    gen.refresh()
    out, out_dot = gen.functions["main"](*values, *tangents)
    if has_aux:
        (value, aux), (value_dot, _) = out, out_dot
        return value, value_dot, aux
    return out, out_dot


def jvp_function(fun, nums, args):
    """The generated ``jvp_f(*args, *tangents_for_nums)`` (for jacobians and inlining)."""
    gen = get_forward(fun, tuple(nums), tuple(args))
    gen.refresh()
    return gen.functions["main"]


def _build_linearized(fun, nprimals, static_functions):
    """Generate ``f_primal(*params) -> (out, residuals)`` and
    ``f_tangent(residuals, *tangents) -> out_tangent`` (see transforms/linearize.py)."""
    from astjax.transforms.linearize import split
    fname = fun_name(fun)
    names, fn, result = normalized(fun, static_functions)
    loc = fn.loc
    # tangents for the primals given; parameters left to their defaults get none
    wrt = list(fn.params[:nprimals])
    fad = ForwardAD(fn, wrt, normalizer_factory)
    tangent_params = [fad.dot(p) for p in wrt]
    body = fad.transform([s for s in fn.body if not isinstance(s, Return)])
    primal_body, tangent_body, record, residual = split(
        body, fad.tangent_ids, fn.params, names, {result}, tangent_params)
    res = names.fresh("residuals")
    # a residual computed only in a branch (or a loop) that did not run is recorded as None
    top = {w for st in primal_body for w in core.writes(st)}
    primal_body[:0] = [core.Copy(v, core.Const(None), loc=loc) for v in residual
                       if v not in top and v not in fn.params]
    primal_body.append(Prim(res, "make_tuple", [tuple(Var(v) for v in [record] + residual)],
                            loc=loc))
    pair = names.fresh("out_and_residuals")
    primal_body.append(Prim(pair, "make_tuple", [(Var(result), Var(res))], loc=loc))
    primal_body.append(Return(Var(pair), loc=loc))
    unpack = [Prim(v, "getitem", [Var(res), core.Index((core.Const(i),))], loc=loc)
              for i, v in enumerate([record] + residual)]
    out_dot = names.fresh(f"{result}_tangent")
    if result in fad.varied:
        last = Prim(out_dot, "instantiate", [Var(fad.dot(result)), Var(result)], loc=loc)
    else:
        last = Prim(out_dot, "zeros_like", [Var(result)], loc=loc)
    tangent_body = unpack + tangent_body + [last, Return(Var(out_dot), loc=loc)]
    f1 = core.Function(names.fresh(f"{fname}_primal"), fn.params, primal_body, loc=loc,
                       env=fn.env)
    f2 = core.Function(names.fresh(f"{fname}_tangent"), [res] + tangent_params, tangent_body,
                       loc=loc, env=fn.env)
    return load_functions(
        [(f1, f"linearize({fname}), primal part: runs once, records what the tangent part "
              "needs."),
         (f2, f"linearize({fname}), tangent part: replays the record, computes tangents "
              "only.")], fn.env, f"linearize({fname})", ["primal", "tangent"])


def linearize(fun, *primals):
    """``(fun(*primals), f_jvp)``: ``f_jvp(*tangents)`` computes only tangent work.

    The primal computation runs once, here, recording the values the tangent
    statements need; each ``f_jvp`` call replays that record.
    """
    fun = plain_callable(fun)
    check_callable(fun, "linearize")
    fun = fixed_arity_call(fun, primals, {})      # *args: this call's arity
    values = bind_arguments(fun, primals, {}, "linearize")
    static = function_arguments(values)
    try:
        gen = cached(fun, ("linearize", len(primals), static),
                     lambda: _build_linearized(fun, len(primals), dict(static)))
    except NotSplittable:   # reverse-mode code (linearize of grad): jvp on every call
        main = jvp_function(fun, tuple(range(len(primals))), tuple(values))
        zeros = [tree_map(np.zeros_like, p) for p in primals]
        out, residuals = main(*values, *zeros)[0], ()
        gen = None
    if gen is not None:
        gen.refresh()
        out, residuals = gen.functions["primal"](*values)
        tangent = gen.functions["tangent"]
        plain = functools.partial(tangent, residuals)
    else:
        plain = _replay_by_jvp(main, values, len(primals))

        def tangent(_, *tangents):
            return plain(*tangents)
    structure = [tree_structure(p) for p in primals]

    def f_jvp(*tangents):
        if len(tangents) != len(primals):
            raise ArgumentError(f"f_jvp takes {len(primals)} tangents, got {len(tangents)}")
        for s, t in zip(structure, tangents):
            if tree_structure(t) != s:
                raise ArgumentError(f"f_jvp: tangent structure {tree_structure(t)} does not "
                                    f"match the primal's {s}")
        return tangent(residuals, *tangents)
    f_jvp._astjax_view = gen           # make_source(f_jvp) shows it (source_view.py)

    # what other transformations read: the generated tangent part on these residuals
    f_jvp._astjax_plain = plain
    f_jvp._astjax_generated = lambda: f_jvp._astjax_plain      # inlined where it is called
    return out, f_jvp


def _replay_by_jvp(main, values, ntangents):
    """f_jvp for code linearize cannot split (it has tapes): generated source that runs
    the jvp code ``main`` on the recorded primals, readable by other transformations."""
    tangents = [f"t{i}" for i in range(ntangents)]
    primals = [f"primal_{i}" for i in range(len(values))]
    source = (f"def f_jvp({', '.join(tangents)}):\n"
              f"    out_and_tangent = jvp_of_f({', '.join(primals + tangents)})\n"
              "    return out_and_tangent[1]\n")
    namespace = {"jvp_of_f": main, **dict(zip(primals, values))}
    return codegen.load_source(source, namespace, "linearize, replayed by jvp")["f_jvp"]


# ------------------------------------------------------------------ jacobians

def _basis(tree):
    """Yield (leaf index, flat element index, one-hot tree) over every element of ``tree``."""
    leaves, tdef = tree_flatten(tree)
    xp = device.tree_module(leaves)          # one-hot tangents where the values live
    metas = [device.shape_dtype(v) for v in leaves]
    dtypes = [dt if np.issubdtype(dt, np.inexact) else np.dtype(np.float64)
              for _, dt in metas]
    for k, (shape, _) in enumerate(metas):
        for j in range(math.prod(shape)):
            parts = [xp.zeros(sh, d) for (sh, _), d in zip(metas, dtypes)]
            parts[k].reshape(-1)[j] = 1
            yield k, j, tree_unflatten(tdef, parts)


def _jacobian_tree(out, dyn_tuple, entries, single, forward):
    """Assemble a Jacobian like JAX: the output's structure, each leaf holding the inputs'
    structure (a tuple over argnums unless argnums was an int) of out.shape + in.shape."""
    out_leaves, out_def = tree_flatten(out)
    in_leaves, in_def = tree_flatten(dyn_tuple)
    # assembled on the values' array module (a CuPy Jacobian for CuPy values)
    xp = device.tree_module([out_leaves, in_leaves, entries[0][1] if entries else ()])
    out_metas = [device.shape_dtype(v) for v in out_leaves]
    out_shapes = [sh for sh, _ in out_metas]
    in_shapes = [device.shape_dtype(v)[0] for v in in_leaves]
    blocks = [[xp.zeros(os + ins, dtype=np.result_type(odt, np.float16))
               for ins in in_shapes] for os, odt in out_metas]
    for (a, j), tree in entries:
        parts = [device.asarray_like(xp, v) for v in tree_leaves(tree)]
        if forward:   # a column: d out / d in[a].flat[j]
            idx = tuple(np.unravel_index(j, in_shapes[a])) if in_shapes[a] else ()
            for o in range(len(out_shapes)):
                blocks[o][a][(Ellipsis,) + idx] = parts[o]
        else:         # a row: d out[a].flat[j] / d in
            idx = tuple(np.unravel_index(j, out_shapes[a])) if out_shapes[a] else ()
            for k in range(len(in_shapes)):
                blocks[a][k][idx + (Ellipsis,)] = parts[k]
    per_out = [tree_unflatten(in_def, row) for row in blocks]
    if single:
        per_out = [p[0] for p in per_out]
    return tree_unflatten(out_def, per_out)


def _jacobian_of_jacobian(inner, argnums, has_aux, outer_name):
    """jacfwd/jacrev of a jacobian: second directional derivatives, forward over forward.

    ``d/dx_k J(x)[..., j]`` is the tangent (along e_k) of the tangent (along e_j) of
    ``f``: a jvp of f's generated jvp code, so no Python-level jacobian is transformed.
    """
    fun, inner_argnums, inner_aux = inner
    if has_aux or inner_aux or not isinstance(argnums, int) or argnums != inner_argnums:
        raise ArgumentError(f"{outer_name} of a jacobian supports one array argument, the "
                            "same argnums for both, and no has_aux")

    def jac2(*args):
        a = argnums if argnums >= 0 else argnums + len(args)
        on_device = device.is_device_array(args[a])
        if not isinstance(args[a], np.ndarray) and not on_device and \
                not np.isscalar(args[a]):
            raise ArgumentError(f"{outer_name} of a jacobian needs an array argument")
        xp = device.array_module(*args)          # basis and result where the values live
        x = args[a] if on_device else np.asarray(args[a])
        first = jvp_function(fixed_arity_call(fun, args, {}), (a,), args)
        second = jvp_function(first, (a,), tuple(args) + (x,))
        shape, xdt = device.shape_dtype(x)
        dtype = xdt if np.issubdtype(xdt, np.inexact) else np.float64
        basis = [e.reshape(shape) for e in xp.eye(math.prod(shape), dtype=dtype)]
        out = None
        blocks = {}
        for j, ej in enumerate(basis):
            for k, ek in enumerate(basis):
                (value, _), (_, curvature) = second(*args, ej, ek)
                out = value
                blocks[j, k] = curvature
        out_shape, out_dtype = device.shape_dtype(out if out is not None else fun(*args))
        result = xp.zeros(out_shape + shape + shape, dtype=np.result_type(dtype, out_dtype))
        for (j, k), c in blocks.items():
            idx = tuple(np.unravel_index(j, shape)) + tuple(np.unravel_index(k, shape))
            result[(Ellipsis,) + idx] = device.asarray_like(xp, c)
        return result

    return jac2


def jacfwd(fun, argnums=0, has_aux=False, holomorphic=False):
    """Jacobian by forward mode: the generated jvp vmapped over the input elements (a loop
    of jvps where vmap has no rule).  Real inputs, unless ``holomorphic`` (complex
    ones, the complex derivative): astjax/holomorphic.py."""
    fun = plain_callable(fun)
    check_callable(fun, "jacfwd")
    inner = getattr(fun, "_astjax_jacobian", None)
    if inner is not None:
        return wrap_plain(fun, _jacobian_of_jacobian(inner, argnums, has_aux, "jacfwd"),
                           "jacfwd", None)

    def jac(*args, **kwargs):
        # argnums index the parameters (as for grad), whichever way they were passed
        given = (args, kwargs)
        fixed = fixed_arity_call(fun, args, kwargs)   # *args/**kwargs: this call's arity
        args = tuple(bind_arguments(fixed, args, kwargs, "jacfwd"))
        single, nums = normalize_argnums(argnums, len(args), fun_name(fun))
        dyn_tuple = tuple(args[i] for i in nums)
        check_inputs("jacfwd", fun, tree_leaves(dyn_tuple), holomorphic)
        f = jvp_function(fixed, nums, args)
        basis = list(_basis(dyn_tuple))
        out, columns = _columns_by_vmap(f, args, basis, len(dyn_tuple), has_aux)
        if columns is None:  # vmap has no rule for something here: one jvp per element
            columns = []
            for k, j, tangent in basis:
                out, out_dot = f(*args, *tangent)
                columns.append(((k, j), out_dot[0] if has_aux else out_dot))
        if out is None:  # no input elements at all
            out = fun(*given[0], **given[1])
        value = out[0] if has_aux else out
        result = _jacobian_tree(value, dyn_tuple, columns, single, forward=True)
        return (result, out[1]) if has_aux else result

    return wrap_plain(fun, jac, "jacfwd", (fun, argnums, has_aux))


def _stack_trees(trees):
    tdef = tree_structure(trees[0])
    columns = zip(*[tree_leaves(t) for t in trees])
    return tree_unflatten(tdef, [_stack(col) for col in columns])


def _stack(col):
    """``np.stack`` on the leaves' array module (host leaves move to the device)."""
    xp = device.array_module(*col)
    if xp is np:
        return np.stack(col)
    return xp.stack([device.asarray_like(xp, v) for v in col])


def _unstack(tree, i):
    return tree_unflatten(tree_structure(tree), [
        v[i] if device.is_device_array(v) else np.asarray(v)[i] for v in tree_leaves(tree)])


def _columns_by_vmap(f, args, basis, n_tangents, has_aux):
    """All jvp columns in one call: vmap of the generated jvp code over the basis.

    Returns (output, columns), or (None, None) when vmap cannot batch the code.
    """
    from astjax.batch_api import vmap
    from astjax.errors import TransformError
    if not basis:
        return None, []
    stacked = _stack_trees([tangent for _, _, tangent in basis])
    in_axes = (None,) * len(args) + (0,) * n_tangents
    try:
        outs, dots = vmap(f, in_axes=in_axes)(*args, *stacked)
    except TransformError:
        return None, None
    if has_aux:
        dots = dots[0]
    return _unstack(outs, 0), [((k, j), _unstack(dots, i))
                               for i, (k, j, _) in enumerate(basis)]


def _rows_by_vmap(fun, args, basis, nums, has_aux):
    """All vjp rows in one call: vmap of the generated backward sweep over the basis."""
    from astjax.batch_api import vmap
    from astjax.errors import TransformError
    if not basis:
        return []
    gen = api.get_reverse(fun, "vjp", tuple(nums), has_aux, args)[0]
    _, residuals = call_bound(gen.functions["fwd"], list(args))
    stacked = _stack_trees([ct for _, _, ct in basis])
    try:
        cts = vmap(gen.functions["bwd"], in_axes=(None, 0))(residuals, stacked)
    except TransformError:
        return None
    return [((o, j), tuple(_unstack(ct, i) for ct in cts))
            for i, (o, j, _) in enumerate(basis)]


def jacrev(fun, argnums=0, has_aux=False, holomorphic=False):
    """Jacobian by reverse mode: one forward sweep, then the backward sweep vmapped over
    the output elements (a loop of backward sweeps where vmap has no rule).  Real
    outputs, unless ``holomorphic`` (complex inputs and outputs, the complex
    derivative): astjax/holomorphic.py."""
    fun = plain_callable(fun)
    check_callable(fun, "jacrev")
    inner = getattr(fun, "_astjax_jacobian", None)
    if inner is not None:
        return wrap_plain(fun, _jacobian_of_jacobian(inner, argnums, has_aux, "jacrev"),
                           "jacrev", None)

    def jac(*args, **kwargs):
        fixed = fixed_arity_call(fun, args, kwargs)   # *args/**kwargs: this call's arity
        args = tuple(bind_arguments(fixed, args, kwargs, "jacrev"))
        single, nums = normalize_argnums(argnums, len(args), fun_name(fun))
        if has_aux:
            out, vjp_fn, aux = api.vjp_bound(fixed, args, nums, has_aux=True)
        else:
            out, vjp_fn = api.vjp_bound(fixed, args, nums)
        dyn_tuple = tuple(args[i] for i in nums)
        check_outputs("jacrev", fun, out, holomorphic)
        if holomorphic:
            check_inputs("jacrev", fun, tree_leaves(dyn_tuple), holomorphic)
        basis = list(_basis(out))
        # (a pullback typed for a check_vma=True shard_map runs as it is, row by row)
        rows = None if getattr(vjp_fn, "_astjax_typed", False) else \
            _rows_by_vmap(fixed, args, basis, nums, has_aux)
        if rows is None:  # vmap has no rule for something here: one vjp per element
            rows = []
            for o, j, ct in basis:
                rows.append(((o, j), tuple(vjp_fn(ct))))
        result = _jacobian_tree(out, dyn_tuple, rows, single, forward=False)
        return (result, aux) if has_aux else result

    return wrap_plain(fun, jac, "jacrev", (fun, argnums, has_aux))


def jacobian(fun, argnums=0, has_aux=False):
    """jacfwd or jacrev, whichever needs fewer sweeps for the shapes at hand."""
    fun = plain_callable(fun)
    check_callable(fun, "jacobian")

    def jac(*args, **kwargs):
        values = bind_arguments(fixed_arity_call(fun, args, kwargs), args, kwargs, "jacobian")
        single, nums = normalize_argnums(argnums, len(values), fun_name(fun))
        n_in = sum(np.size(v) for i in nums for v in tree_leaves(values[i]))
        out = fun(*args, **kwargs)
        n_out = sum(np.size(v) for v in tree_leaves(out[0] if has_aux else out))
        pick = jacfwd if n_in <= n_out else jacrev
        return pick(fun, argnums, has_aux)(*args, **kwargs)

    return wrap_plain(fun, jac, "jacobian", (fun, argnums, has_aux))


def hessian(fun, argnums=0, has_aux=False, holomorphic=False):
    """Forward over reverse: jvps of the generated gradient code, one per input element."""
    fun = plain_callable(fun)
    check_callable(fun, "hessian")
    if has_aux or holomorphic:       # JAX's jacfwd(jacrev(...))
        return wrap_plain(fun, jacfwd(jacrev(fun, argnums, has_aux, holomorphic), argnums,
                                      has_aux, holomorphic), "hessian", None)
    out = wrap_plain(fun, jacfwd(api.grad(fun, argnums), argnums), "hessian", None)
    out._astjax_hessian = (fun, argnums)     # what make_source shows (source_view.py)
    return out


def linearized_code(fun, primals):
    """The Generated primal and tangent parts of ``linearize(fun, *primals)``."""
    fun = fixed_arity_call(fun, primals, {})
    static = function_arguments(bind_arguments(fun, primals, {}, "linearize"))
    return cached(fun, ("linearize", len(primals), static),
                  lambda: _build_linearized(fun, len(primals), dict(static)))


# jvp's code is (fun, argnums, args) -> Generated ``jvp_f(*params, *tangents)``
transform_table.register("jvp", jvp, code=get_forward, check=_check_tangents)
transform_table.register("linearize", linearize, code=linearized_code)
for _name, _function in (("jacfwd", jacfwd), ("jacrev", jacrev), ("jacobian", jacobian),
                         ("hessian", hessian)):
    transform_table.register(_name, _function)

__all__ = ["jvp", "linearize", "jacfwd", "jacrev", "jacobian", "hessian"]
