"""Public transformations with JAX's names and signatures: grad, value_and_grad, vjp.

Each call of a transformed function looks up (or builds) generated Python for the
function and the transformation; generation happens once per function object and
transformation parameters, since the generated code does not depend on shapes.
"""
from __future__ import annotations

import functools
import sys
import threading
import weakref
from dataclasses import dataclass

import numpy as np

from astjax import codegen, core
from astjax import runtime as rt
from astjax import runtime_array as ra
from astjax.core import Const, Copy, Index, Prim, Return, Var
from astjax.errors import (ArgumentError, DifferentiationError, Location, SourceError,
                           TransformError)
from astjax.frontend.names import NameGen
from astjax.frontend.normalize import Normalizer
from astjax.transforms.aliasing import private_arguments
from astjax.transforms.inplace import own_accumulations
from astjax.transforms.reverse import ReverseAD


# ------------------------------------------------------------------------- plumbing

@dataclass
class Generated:
    """Generated source and the loaded function(s) for one transformation."""

    source: str
    functions: dict
    namespace: dict
    env: object

    def refresh(self):
        """Re-read globals the code refers to (so rebinding a global is seen)."""
        self.namespace.update(self.env.current())


_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_CACHE_BY_ID: dict = {}
_LOCK = threading.RLock()


def _cache_for(fun):
    try:
        return _CACHE.setdefault(fun, {})
    except TypeError:
        return _CACHE_BY_ID.setdefault(id(fun), {})


def clear_cache():
    """Forget all generated code (tests use this)."""
    _CACHE.clear()
    _CACHE_BY_ID.clear()


def _base_namespace():
    from astjax import runtime_batch as rb
    return {"np": np, "ra": ra, "rt": rt, "rb": rb}


def _normalizer_factory(names, env):
    n = Normalizer(names)
    n.env = env
    return n


def _fun_name(fun):
    f = fun
    while isinstance(f, functools.partial):
        f = f.func
    return getattr(f, "__name__", "f").replace("<lambda>", "lambda")


def _normalize_argnums(argnums, nparams, fname):
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    if not nums:
        raise ArgumentError("argnums must name at least one argument")
    out = []
    for a in nums:
        if not isinstance(a, (int, np.integer)):
            raise ArgumentError(f"argnums must be ints, got {a!r}")
        k = a + nparams if a < 0 else a
        if not 0 <= k < nparams:
            raise ArgumentError(
                f"argnums={argnums!r} is out of range for {fname}, which takes {nparams} "
                f"positional argument(s)")
        out.append(k)
    return single, tuple(out)


def check_differentiable(value, argnum, fname):
    """JAX's rule: only floating (or complex) inputs can be differentiated."""
    from astjax.tree_util import tree_leaves
    for leaf in tree_leaves(value):
        dtype = np.result_type(leaf) if not isinstance(leaf, (bool, int, float, complex)) \
            else np.asarray(leaf).dtype
        if isinstance(leaf, bool) or not np.issubdtype(dtype, np.inexact):
            raise TypeError(
                f"grad of {fname} requires real- or complex-valued inputs (a float dtype), "
                f"but argument {argnum} has dtype {dtype.name}. Integer and boolean inputs "
                "cannot be differentiated: convert with .astype(np.float64) or leave the "
                "argument out of argnums.")


# ------------------------------------------------------------ shared generation

def normalized(fun, static_functions=None):
    """(names, core function, result variable): ``fun`` in core form, ending in
    ``return <variable>`` so transformations can name its result."""
    names = NameGen()
    fn = Normalizer(names).function(fun, static_functions=static_functions)
    private_arguments(fn)   # the mutation policy: never change the caller's arrays
    ret = fn.body[-1]
    assert isinstance(ret, Return)
    if not isinstance(ret.value, Var):
        out = names.fresh("out")
        fn.body.insert(len(fn.body) - 1, Copy(out, ret.value, loc=fn.loc))
        ret.value = Var(out)
    return names, fn, ret.value.name


def load_functions(functions, env, label, keys) -> Generated:
    """Print core functions (with docstrings) into one module, load it, register the
    per-line origins; ``keys`` names each loaded function in ``Generated.functions``."""
    origins: list = []
    texts = []
    for fn, doc in functions:
        if texts:
            origins += [None, None]
        texts.append(codegen.print_with_helpers(fn, doc, origins))
    source = "\n\n".join(texts)
    namespace = _base_namespace()
    namespace.update(env.current())
    codegen.load_source(source, namespace, label, origins)
    loaded = {key: namespace[fn.name] for key, (fn, _) in zip(keys, functions)}
    return Generated(source, loaded, namespace, env)


# ----------------------------------------------------------------- reverse mode

def _build_reverse(fun, kind, argnums, has_aux, static_functions=None):
    """Generate code for grad / value_and_grad / vjp of ``fun``."""
    fname = _fun_name(fun)
    names, fn, result = normalized(fun, static_functions)
    nparams = len(fn.params)
    single, nums = _normalize_argnums(argnums, nparams, fname) if kind != "vjp" else (
        False, tuple(range(nparams)))
    wrt = [fn.params[i] for i in nums]
    loc = fn.loc
    out_name, aux_name = result, None
    if has_aux:
        out_name, aux_name = names.fresh(f"{result}_value"), names.fresh("aux")
        fn.body[-1:-1] = [
            Prim(out_name, "getitem", [Var(result), Index((Const(0),))], loc=loc),
            Prim(aux_name, "getitem", [Var(result), Index((Const(1),))], loc=loc)]
    ad = ReverseAD(fn, wrt, out_name, _normalizer_factory, residuals=(kind == "vjp"))
    seed = ad.d(out_name)
    forward, backward = ad.build(seeded={seed})
    prologue = [Prim(ad.tape, "new_tape", [], loc=loc)]
    pre_init = [Copy(v, Const(None), loc=loc) for v in sorted(ad.restore)
                if v not in fn.params]
    grads = [names.fresh(f"grad_{p}") for p in wrt]
    epilogue = [Prim(g, "instantiate", [Var(ad.d(p) if p in ad.adj_names else "None"), Var(p)],
                     loc=loc) for g, p in zip(grads, wrt)]
    for e, p in zip(epilogue, wrt):
        if p not in ad.adj_names:
            e.args[0] = Const(None)
    init = ad.initial_cotangents(backward, {ad.adj_names.get(p, "") for p in wrt}, {seed})
    grad_result = Var(grads[0]) if single else None
    if kind in ("grad", "value_and_grad"):
        body = prologue + pre_init + forward
        if kind == "grad" or True:
            body.append(Prim(out_name, "check_scalar_output", [Var(out_name), Const(fname)],
                             loc=loc))
        body.append(core.Comment("backward sweep: cotangents (d_*) of each value, in reverse"))
        body.append(Prim(seed, "ones_like", [Var(out_name)], loc=loc))
        sweep_start = len(body)
        body += init + backward + epilogue
        if grad_result is None:
            tup = names.fresh("grads")
            body.append(Prim(tup, "make_tuple", [tuple(Var(g) for g in grads)], loc=loc))
            grad_result = Var(tup)
        if kind == "grad":
            value = grad_result
            if has_aux:
                pair = names.fresh("grad_and_aux")
                body.append(Prim(pair, "make_tuple", [(grad_result, Var(aux_name))], loc=loc))
                value = Var(pair)
        else:
            first = Var(out_name)
            if has_aux:
                va = names.fresh("value_and_aux")
                body.append(Prim(va, "make_tuple", [(Var(out_name), Var(aux_name))], loc=loc))
                first = Var(va)
            pair = names.fresh("value_and_grads")
            body.append(Prim(pair, "make_tuple", [(first, grad_result)], loc=loc))
            value = pair and Var(pair)
        body.append(Return(value, loc=loc))
        own_accumulations(body, sweep_start)   # add into buffers the sweep owns
        gname = names.fresh(f"{kind}_{fname}")
        gfn = core.Function(gname, fn.params, body, loc=loc, env=fn.env,
                            defaults=fn.defaults, kwonly=fn.kwonly)
        gen = load_functions([(gfn, f"{kind} of {fname}, generated by astjax.")], fn.env,
                             f"{kind}({fname})", ["main"])
    else:  # vjp: a forward function returning residuals, and a backward function
        saved = sorted((ad.backward_reads | ad.meta_reads | set(fn.params))
                       - set(ad.adj_names.values()))
        saved = [v for v in saved if v in core.all_writes(fn.body) | set(fn.params)]
        fwd_name = names.fresh(f"{fname}_fwd")
        bwd_name = names.fresh(f"{fname}_bwd")
        res = names.fresh("residuals")
        fwd_body = prologue + pre_init + forward
        fwd_body.append(Prim(res, "make_tuple", [tuple(Var(v) for v in [ad.tape] + saved)],
                             loc=loc))
        outv = Var(out_name)
        if has_aux:
            va = names.fresh("out_and_aux")
            fwd_body.append(Prim(va, "make_tuple", [(Var(out_name), Var(aux_name))], loc=loc))
            outv = Var(va)
        pair = names.fresh("out_and_residuals")
        fwd_body.append(Prim(pair, "make_tuple", [(outv, Var(res))], loc=loc))
        fwd_body.append(Return(Var(pair), loc=loc))
        bwd_body = []
        for i, v in enumerate([ad.tape] + saved):
            bwd_body.append(Prim(v, "getitem", [Var(res), Index((Const(i),))], loc=loc))
        # the backward sweep pops the tape and restores updated arrays in place: work on
        # copies so that vjp_fn can be called again
        bwd_body.append(Prim(ad.tape, "to_list", [Var(ad.tape)], loc=loc))
        for v in sorted(ad.restore & set(saved)):
            if any(isinstance(st, core.SetItem) and st.target == v for st in core.walk(fn.body)):
                bwd_body.append(Prim(v, "copy", [Var(v)], loc=loc))
        sweep_start = len(bwd_body)
        bwd_body += init + backward + epilogue
        tup = names.fresh("cotangents")
        bwd_body.append(Prim(tup, "make_tuple", [tuple(Var(g) for g in grads)], loc=loc))
        bwd_body.append(Return(Var(tup), loc=loc))
        own_accumulations(bwd_body, sweep_start)   # add into buffers the sweep owns
        f1 = core.Function(fwd_name, fn.params, fwd_body, loc=loc, env=fn.env,
                           defaults=fn.defaults, kwonly=fn.kwonly)
        f2 = core.Function(bwd_name, [res, seed], bwd_body, loc=loc, env=fn.env)
        gen = load_functions(
            [(f1, f"forward sweep of vjp({fname}): returns the output and what the "
                  "backward sweep needs."),
             (f2, f"backward sweep of vjp({fname}): cotangent of the output -> "
                  "cotangents of the inputs.")], fn.env, f"vjp({fname})", ["fwd", "bwd"])
    return gen, single, nums


def function_arguments(args) -> tuple:
    """(position, function) for arguments that are functions, e.g. an activation.

    Generated code is specialized on them (they are inlined), so they key the cache.
    """
    return tuple((i, a) for i, a in enumerate(args)
                 if callable(a) and not isinstance(a, (np.ndarray, np.generic, type)))


def cached(fun, key, build):
    """The generated code of ``fun`` under ``key``, built once (thread-safe)."""
    cache = _cache_for(fun)
    entry = cache.get(key)
    if entry is None:
        with _LOCK:
            entry = cache.get(key)
            if entry is None:
                entry = build()
                cache[key] = entry
    return entry


def _get_reverse(fun, kind, argnums, has_aux, args=()):
    static = function_arguments(args)
    key = (kind, argnums if isinstance(argnums, int) else tuple(argnums), bool(has_aux), static)
    return cached(fun, key, lambda: _build_reverse(fun, kind, argnums, has_aux, dict(static)))


def _wrap(fun, transformed, label, generated, source):
    """Give the transformed function the user's name and docstring.

    ``__wrapped__`` is removed on purpose: a transformed function called inside
    another transformed function must be inlined as its generated code, not as the
    original.  ``_astjax_generated()`` returns that generated Python function.
    """
    try:
        functools.update_wrapper(transformed, fun)
    except (AttributeError, TypeError):
        pass
    transformed.__dict__.pop("__wrapped__", None)
    transformed._astjax = label
    transformed._astjax_generated = generated
    transformed._astjax_source = source
    return transformed


def grad(fun, argnums=0, has_aux=False):
    """Gradient of a scalar-valued ``fun`` with respect to argument(s) ``argnums``."""
    _check_callable(fun, "grad")

    def grad_fun(*args, **kwargs):
        gen, single, nums = _get_reverse(fun, "grad", argnums, has_aux, args)
        _check_args(fun, args, nums)
        gen.refresh()
        return gen.functions["main"](*args, **kwargs)

    return _wrap(fun, grad_fun, "grad",
                 lambda: _get_reverse(fun, "grad", argnums, has_aux)[0].functions["main"],
                 lambda *a, **k: _get_reverse(fun, "grad", argnums, has_aux, a)[0])


def value_and_grad(fun, argnums=0, has_aux=False):
    """``(fun(*args), grad(fun)(*args))`` computed together."""
    _check_callable(fun, "value_and_grad")

    def value_and_grad_fun(*args, **kwargs):
        gen, single, nums = _get_reverse(fun, "value_and_grad", argnums, has_aux, args)
        _check_args(fun, args, nums)
        gen.refresh()
        return gen.functions["main"](*args, **kwargs)

    return _wrap(fun, value_and_grad_fun, "value_and_grad", lambda: _get_reverse(
        fun, "value_and_grad", argnums, has_aux)[0].functions["main"],
        lambda *a, **k: _get_reverse(fun, "value_and_grad", argnums, has_aux, a)[0])


def vjp(fun, *primals, has_aux=False):
    """``(fun(*primals), vjp_fn)``; ``vjp_fn(cotangent)`` returns one cotangent per primal."""
    _check_callable(fun, "vjp")
    gen, _, nums = _get_reverse(fun, "vjp", 0, has_aux, primals)
    gen.refresh()
    out, residuals = gen.functions["fwd"](*primals)
    bwd = gen.functions["bwd"]
    primal_out = out[0] if has_aux else out

    def vjp_fn(cotangent):
        _check_cotangent(primal_out, cotangent)
        return bwd(residuals, cotangent)

    if has_aux:
        return out[0], vjp_fn, out[1]
    return out, vjp_fn


def _check_cotangent(out, ct):
    from astjax.tree_util import tree_leaves, tree_structure
    if tree_structure(out) != tree_structure(ct):
        raise ArgumentError(
            f"vjp: the cotangent must have the structure of the output, "
            f"{tree_structure(out)}, but got {tree_structure(ct)}")
    for o, c in zip(tree_leaves(out), tree_leaves(ct)):
        if np.shape(o) != np.shape(c):
            raise ArgumentError(
                f"vjp: cotangent shape {np.shape(c)} does not match output shape {np.shape(o)}")


def _check_callable(fun, what):
    """Refuse, at the user's line, a callable astjax cannot read (np.sin, len, exec'd code)."""
    if not callable(fun):
        raise TypeError(f"{what} expects a callable, got {type(fun).__name__}")
    from astjax.frontend.source import get_function_source, unwrap_callable
    try:
        func, _, _ = unwrap_callable(fun)
        if getattr(func, "_astjax_generated", None) is not None:
            return
        label = getattr(func, "_astjax", None)
        if label in ASSEMBLED and not (
                what == "jit" or (what in ("jacfwd", "jacrev", "jacobian")
                                  and getattr(func, "_astjax_jacobian", None) is not None)):
            raise DifferentiationError(
                f"{what}() of {label}(...): astjax assembles a {label} at run time from "
                "the generated code of its columns, so there is no one function to "
                f"transform", _caller_location(),
                "for higher derivatives nest grad and jvp (jvp of grad of grad), or take "
                "jacfwd/jacrev of grad(f); jit(hessian(f)) runs as it is")
        get_function_source(func)
    except SourceError as err:
        where = _caller_location()
        if err.location is not None and err.location.source_line():
            where = err.location
        raise SourceError(f"{what}(): {err.message}", where, err.hint) from None


# transformations whose result is assembled at run time (a Jacobian's columns from
# generated jvp or vjp code): no single generated function stands for them
ASSEMBLED = ("jacfwd", "jacrev", "jacobian", "hessian")


def _caller_location():
    """The user's line that called the transformation (two frames up from the check)."""
    frame = sys._getframe(3)
    where = Location(frame.f_code.co_filename, frame.f_lineno, 0, None,
                     frame.f_code.co_name)
    text = where.source_line()
    if text:
        start = len(text) - len(text.lstrip())
        where = Location(where.filename, where.lineno, start, len(text.rstrip()),
                         where.function)
    return where


def _check_args(fun, args, nums):
    fname = _fun_name(fun)
    for k in nums:
        if k < len(args):
            check_differentiable(args[k], k, fname)


def stop_gradient(x):
    """Identity whose result carries no derivative (like ``jax.lax.stop_gradient``)."""
    return rt.stop_gradient(x)


stop_gradient = rt.stop_gradient  # noqa: F811  (the same object the normalizer knows)


def generated(fun, *args, **kwargs) -> Generated:
    """The Generated record (source, loaded functions, namespace, env) behind a
    transformed function, for ``args`` like those it will be called with."""
    maker = getattr(fun, "_astjax_source", None)
    if maker is None:
        raise ArgumentError(f"{_fun_name(fun)} is not an astjax-transformed function")
    return maker(*args, **kwargs)


def make_source(fun):
    """``make_source(f)(*args)`` returns the Python source astjax generates for ``f``.

    ``f`` is a transformed function (``grad(loss)``...); for a plain function the
    normalized core form is shown.
    """
    def source(*args, **kwargs):
        maker = getattr(fun, "_astjax_source", None)
        if maker is not None:
            return maker(*args, **kwargs).source
        names = NameGen()
        fn = Normalizer(names).function(fun)
        return codegen.print_function(fn, f"core form of {_fun_name(fun)}, by astjax.")
    return source


# transformations that may be applied inside transformed code (grad(f)(x) in a body)
STATIC_TRANSFORMS = (grad, value_and_grad)

__all__ = ["grad", "value_and_grad", "vjp", "stop_gradient", "make_source", "clear_cache",
           "TransformError"]
