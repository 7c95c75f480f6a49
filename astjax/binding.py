"""Binding a call's arguments like Python does, for every transformation.

Generated code takes one value per parameter of the user's function, in order; the
API modules and the frontend (which inlines transformed functions) bind calls with
these helpers so that defaults, keywords and ``functools.partial`` arguments mean
the same everywhere.  Nothing here knows a transformation.
"""
from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass

import numpy as np

from astjax.errors import ArgumentError


def fun_name(fun):
    f = fun
    while isinstance(f, functools.partial):
        f = f.func
    return getattr(f, "__name__", "f").replace("<lambda>", "lambda")


def normalize_argnums(argnums, nparams, fname):
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
    found = Signature(fun_name(fun), sig, tuple(pargs), dict(pkwargs),
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


def function_arguments(args) -> tuple:
    """(position, function) for arguments that are functions, e.g. an activation.

    Generated code is specialized on them (they are inlined), so they key the cache.
    """
    return tuple((i, a) for i, a in enumerate(args)
                 if callable(a) and not isinstance(a, (np.ndarray, np.generic, type)))


def plain_callable(fun):
    """The function a transformation should read for ``fun``: the functions ``vjp`` and
    ``linearize`` return stand for generated code bound to their residuals, and a NumPy
    function (``grad(np.tanh)``) for a generated function calling it."""
    from astjax.frontend.numpy_functions import as_python_function
    return as_python_function(getattr(fun, "_astjax_plain", fun))
