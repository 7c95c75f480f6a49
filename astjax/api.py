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
from dataclasses import dataclass, field

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
    # the core functions printed into ``source``, with their docstrings (make_source
    # simplifies copies of them for display: astjax/source_view.py)
    core: list = field(default_factory=list)

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


# ------------------------------------------------------------ argument binding
#
# Every transformation binds the arguments of a call like Python does (defaults,
# keywords, keyword-only parameters) with this one helper, and hands generated code
# one value per parameter of the core function, in order.  A call that does not fit
# is an ArgumentError (a TypeError) naming the user's function, not generated code.

@dataclass(frozen=True)
class Signature:
    """What binding needs to know about the Python code a callable runs."""

    fname: str
    signature: object          # inspect.Signature of the plain function underneath
    partial_args: tuple        # functools.partial / bound-method arguments, in front
    partial_kwargs: dict
    names: tuple               # the core function's parameters (user names), in order
    positional: int            # how many of ``names`` can be given positionally
    plain: bool                # positional parameters only, no defaults: args as given


_SIGNATURES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def signature_of(fun) -> Signature:
    """The parameters of ``fun`` as the generated code sees them (cached per function)."""
    try:
        found = _SIGNATURES.get(fun)
    except TypeError:
        found = None
    if found is not None:
        return found
    import inspect
    from astjax.frontend.source import unwrap_callable
    func, pargs, pkwargs = unwrap_callable(fun)
    gen = getattr(func, "_astjax_generated", None)
    if gen is not None:
        func = gen()        # a transformed function: the parameters of the code it runs
    sig = inspect.signature(func)
    params = list(sig.parameters.values())
    kinds = inspect.Parameter
    taken = {p.name for p in params[:len(pargs)]} | set(pkwargs)
    rest = [p for p in params if p.name not in taken
            and p.kind not in (kinds.VAR_POSITIONAL, kinds.VAR_KEYWORD)]
    positional = sum(p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)
                     for p in rest)
    plain = all(p.default is p.empty and p.kind != kinds.KEYWORD_ONLY for p in rest)
    found = Signature(_fun_name(fun), sig, tuple(pargs), dict(pkwargs),
                      tuple(p.name for p in rest), positional, plain)
    try:
        _SIGNATURES[fun] = found
    except TypeError:
        pass
    return found


def bind_arguments(fun, args, kwargs, what) -> list:
    """One value per parameter of ``fun``'s core function, bound like Python binds
    ``fun(*args, **kwargs)`` (defaults filled in); a bad call is an ArgumentError
    worded like Python's TypeError, about the user's function."""
    sig = signature_of(fun)
    if not kwargs and sig.plain and len(args) == len(sig.names):
        return list(args)
    clash = set(kwargs) & set(sig.partial_kwargs)
    if clash:
        raise ArgumentError(f"{what}: {sig.fname}() got keyword argument(s) "
                            f"{', '.join(map(repr, sorted(clash)))} already bound by "
                            "functools.partial")
    try:
        ba = sig.signature.bind(*sig.partial_args, *args, **sig.partial_kwargs, **kwargs)
    except TypeError as err:
        raise ArgumentError(f"{what}: {sig.fname}() {err}") from None
    ba.apply_defaults()
    return [ba.arguments[name] for name in sig.names]


def source_arguments(fun, args, kwargs, what) -> list:
    """``bind_arguments`` for ``make_source``, which may be given no arguments at all
    (only functions passed as arguments change the code)."""
    try:
        return bind_arguments(fun, args, kwargs, what)
    except ArgumentError:
        return list(args)


def keyword_passed(fun, args, kwargs) -> list:
    """For each core parameter of ``fun``: 'positional', 'keyword' or 'default' (how the
    call ``fun(*args, **kwargs)`` gave it), for vmap's axes."""
    sig = signature_of(fun)
    return ["positional" if i < len(args) else "keyword" if name in kwargs else "default"
            for i, name in enumerate(sig.names)]


def call_bound(generated_fn, values):
    """Call generated code with one value per parameter, in order (keyword-only
    parameters, which generated code keeps from the user's signature, by name)."""
    code = generated_fn.__code__
    k = code.co_kwonlyargcount
    if not k:
        return generated_fn(*values)
    n = code.co_argcount
    return generated_fn(*values[:n], **dict(zip(code.co_varnames[n:n + k], values[n:n + k])))


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
    # the same text runs on CuPy (or another array module) when the arguments do
    from astjax.device import dispatching
    loaded = dispatching(loaded, source, namespace, label, origins)
    return Generated(source, loaded, namespace, env, list(functions))


# ----------------------------------------------------------------- reverse mode

def _build_reverse(fun, kind, argnums, has_aux, static_functions=None):
    """Generate code for grad / value_and_grad / vjp of ``fun``."""
    fname = _fun_name(fun)
    names, fn, result = normalized(fun, static_functions)
    nparams = len(fn.params)
    single, nums = _normalize_argnums(argnums, nparams, fname) if kind != "vjp" else (
        False, tuple(argnums) if isinstance(argnums, tuple) else tuple(range(nparams)))
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
        # a residual assigned only in a branch that did not run (or a loop that ran no
        # step) is still packed: it starts as None, which the backward never reads
        surely = {w for st in forward if not isinstance(st, (core.If, core.For, core.While))
                  for w in core.writes(st)} | set(fn.params)
        pre_init += [Copy(v, Const(None), loc=loc) for v in saved
                     if v not in surely and v not in ad.restore]
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
    fun = plain_callable(fun)
    _check_callable(fun, "grad")

    def grad_fun(*args, **kwargs):
        values = bind_arguments(fun, args, kwargs, "grad")
        gen, single, nums = _get_reverse(fun, "grad", argnums, has_aux, values)
        _check_args(fun, values, nums)
        gen.refresh()
        return call_bound(gen.functions["main"], values)

    return _wrap(fun, grad_fun, "grad",
                 lambda: _get_reverse(fun, "grad", argnums, has_aux)[0].functions["main"],
                 lambda *a, **k: _get_reverse(fun, "grad", argnums, has_aux, source_arguments(
                     fun, a, k, "grad"))[0])


def value_and_grad(fun, argnums=0, has_aux=False):
    """``(fun(*args), grad(fun)(*args))`` computed together."""
    fun = plain_callable(fun)
    _check_callable(fun, "value_and_grad")

    def value_and_grad_fun(*args, **kwargs):
        values = bind_arguments(fun, args, kwargs, "value_and_grad")
        gen, single, nums = _get_reverse(fun, "value_and_grad", argnums, has_aux, values)
        _check_args(fun, values, nums)
        gen.refresh()
        return call_bound(gen.functions["main"], values)

    return _wrap(fun, value_and_grad_fun, "value_and_grad", lambda: _get_reverse(
        fun, "value_and_grad", argnums, has_aux)[0].functions["main"],
        lambda *a, **k: _get_reverse(fun, "value_and_grad", argnums, has_aux, source_arguments(
            fun, a, k, "value_and_grad"))[0])


def vjp(fun, *primals, has_aux=False):
    """``(fun(*primals), vjp_fn)``; ``vjp_fn(cotangent)`` returns one cotangent per primal."""
    fun = plain_callable(fun)
    _check_callable(fun, "vjp")
    values = bind_arguments(fun, primals, {}, "vjp")
    # cotangents for the primals given; parameters left to their defaults get none
    return vjp_bound(fun, values, tuple(range(len(primals))), has_aux)


def vjp_bound(fun, values, nums, has_aux=False):
    """vjp for arguments bound already (one value per parameter): ``vjp_fn`` returns
    one cotangent per parameter position in ``nums``."""
    gen, _, nums = _get_reverse(fun, "vjp", tuple(nums), has_aux, values)
    gen.refresh()
    out, residuals = call_bound(gen.functions["fwd"], values)
    bwd = gen.functions["bwd"]
    primal_out = out[0] if has_aux else out

    def vjp_fn(cotangent):
        _check_cotangent(primal_out, cotangent)
        return bwd(residuals, cotangent)
    vjp_fn._astjax_view = gen          # make_source(vjp_fn) shows it (source_view.py)

    # what other transformations read: the generated backward sweep on these residuals
    vjp_fn._astjax_plain = functools.partial(bwd, residuals)
    vjp_fn._astjax_generated = lambda: vjp_fn._astjax_plain    # inlined where it is called

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


def plain_callable(fun):
    """The function a transformation should read for ``fun``: the functions ``vjp`` and
    ``linearize`` return stand for generated code bound to their residuals."""
    return getattr(fun, "_astjax_plain", fun)


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


def make_source(fun, simplify=True):
    """``make_source(f)(*args)`` returns the Python source astjax generates for ``f``
    (every transformation, and ``make_source(jvp)(f, primals, tangents)``): see
    ``astjax/source_view.py``."""
    from astjax.source_view import make_source as view
    return view(fun, simplify)


# transformations that may be applied inside transformed code (grad(f)(x) in a body)
STATIC_TRANSFORMS = (grad, value_and_grad)

__all__ = ["grad", "value_and_grad", "vjp", "stop_gradient", "make_source", "clear_cache",
           "TransformError"]
