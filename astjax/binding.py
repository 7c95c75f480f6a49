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
    f = getattr(fun, "_astjax_varargs_of", fun)    # a fixed-arity wrapper: the user's
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


def check_plain_arrays(values, what, fname):
    """Refuse ndarray subclasses that change what operators mean (``np.matrix``: ``*``
    is a matrix product; ``np.ma.MaskedArray``: reductions skip masked entries):
    generated code and its derivatives follow ``np.ndarray``'s semantics, so they
    would compute another function than the one NumPy runs.  ``np.memmap`` and
    subclasses that only tag arrays are plain (``_own_operators``)."""
    for i, v in enumerate(values):
        bad = _subclass_leaf(v)
        if bad is not None:
            raise ArgumentError(
                f"{what}: argument {i} of {fname} holds a {type(bad).__module__}."
                f"{type(bad).__name__}, an ndarray subclass with its own meaning of "
                "operators; astjax transforms NumPy arrays: pass np.asarray(x) (for "
                "np.matrix, write its products with @)")


def _subclass_leaf(v, depth=0):
    t = type(v)
    if t is np.ndarray or t in _PLAIN_LEAVES:
        return None
    if isinstance(v, np.ndarray):
        return v if _own_operators(t) else None
    if depth < 8 and t in (list, tuple, dict):
        for item in (v.values() if t is dict else v):
            bad = _subclass_leaf(item, depth + 1)
            if bad is not None:
                return bad
    return None


_PLAIN_LEAVES = frozenset({float, int, bool, complex, str, type(None)})
# what a subclass may redefine to change the function NumPy computes
_SEMANTIC = ("__mul__", "__rmul__", "__imul__", "__pow__", "__truediv__", "__matmul__",
             "__getitem__", "__array_ufunc__", "__array_function__", "sum", "mean",
             "max", "min", "prod", "dot")
_OWN_OPERATORS: dict = {}


def _own_operators(t) -> bool:
    """Whether ndarray subclass ``t`` redefines an operator, indexing or a reduction
    (np.matrix, masked arrays); a subclass that only tags arrays, and np.memmap, do
    not count."""
    got = _OWN_OPERATORS.get(t)
    if got is None:
        got = _OWN_OPERATORS[t] = not issubclass(t, np.memmap) and (
            issubclass(t, (np.matrix, np.ma.MaskedArray)) or
            any(getattr(t, m, None) is not getattr(np.ndarray, m) for m in _SEMANTIC))
    return got


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
    check_plain_arrays(args, what, sig.fname)
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


# ------------------------------------------------- *args / **kwargs at the entry
#
# Generated code has one parameter per value.  A function with ``*args`` or
# ``**kwargs`` handed to a transformation is specialised on the call's arity, as JAX
# specialises on what it traces: a generated wrapper takes one parameter per argument
# passed (keywords keyword-only) and calls the user's function, which the frontend
# inlines with a static ``*args`` pack.  argnums and in_axes then index the
# positional arguments as passed, which is JAX's meaning.

_WRAPPERS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_WRAPPERS_BY_ID: dict = {}


def has_varargs(fun) -> bool:
    """Whether ``fun``'s Python code takes ``*args`` or ``**kwargs``."""
    import inspect
    try:
        params = signature_of(fun).signature.parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
               for p in params)


def fixed_arity(fun, nargs, keywords=()):
    """``fun`` itself, or (for a function with ``*args``/``**kwargs``) the generated
    wrapper taking ``nargs`` positional arguments and the keyword arguments named
    ``keywords``: one per (function, arity, keyword names), so its generated code is
    cached like any function's."""
    per_call = getattr(fun, "_astjax_per_arity", None)
    if per_call is not None:            # grad(f) of such a function: grad(f_2)
        return per_call(nargs, tuple(keywords))
    if not has_varargs(fun):
        return fun
    key = (int(nargs), tuple(sorted(keywords)))
    try:
        table = _WRAPPERS.setdefault(fun, {})
    except TypeError:
        table = _WRAPPERS_BY_ID.setdefault(id(fun), {})
    wrapper = table.get(key)
    if wrapper is None:
        wrapper = table[key] = _make_wrapper(fun, *key)
    return wrapper


def fixed_arity_call(fun, args, kwargs):
    """``fixed_arity`` for the call ``fun(*args, **kwargs)``."""
    return fixed_arity(fun, len(args), tuple(kwargs))


def _make_wrapper(fun, nargs, keywords):
    import inspect
    import keyword
    from astjax import codegen
    sig = signature_of(fun)
    kinds = inspect.Parameter
    params = list(sig.signature.parameters.values())
    free = [p for p in params[len(sig.partial_args):] if p.name not in sig.partial_kwargs]
    named = [p.name for p in free if p.kind in (kinds.POSITIONAL_ONLY,
                                                kinds.POSITIONAL_OR_KEYWORD)]
    star = next((p.name for p in params if p.kind == kinds.VAR_POSITIONAL), "args")
    for k in keywords:
        if not k.isidentifier() or keyword.iskeyword(k):
            raise ArgumentError(f"{sig.fname}() got keyword argument {k!r}, which is not a "
                                "Python name; a transformed function takes keywords by name")
    base = sig.fname if sig.fname.isidentifier() and not keyword.iskeyword(sig.fname) else "f"
    taken = set(keywords)
    positional = []
    for i in range(nargs):
        name = named[i] if i < len(named) else f"{star}_{i - len(named)}"
        while name in taken:
            name += "_"
        taken.add(name)
        positional.append(name)
    # the wrapper takes the user's name (its values are named after it in generated
    # code); the user's function is its global ``<name>_varargs``
    wname = base
    while wname in taken:
        wname += "_"
    callee = f"{base}_varargs"
    while callee in taken:
        callee += "_"
    header = ", ".join(positional + (["*"] + list(keywords) if keywords else []))
    call = ", ".join(positional + [f"{k}={k}" for k in keywords])
    source = (f"def {wname}({header}):\n"
              f'    """{sig.fname} called with {nargs} positional argument(s)'
              f'{" and keywords " + ", ".join(keywords) if keywords else ""}."""\n'
              f"    return {callee}({call})\n")
    namespace = {callee: fun}
    codegen.load_source(source, namespace, f"{sig.fname}/{nargs}")
    wrapper = namespace[wname]
    wrapper._astjax_varargs_of = fun
    return wrapper


def per_arity(fun, make, label):
    """The transformation ``make`` of ``fun`` (a function with ``*args``/``**kwargs``),
    made once per call arity from ``fixed_arity``: for jit and vmap, whose options
    (static_argnums, in_axes) index the positional arguments as passed."""
    from astjax.generation import wrap
    made = {}

    def for_arity(nargs, keywords):
        fixed = fixed_arity(fun, nargs, keywords)
        found = made.get(fixed)
        if found is None:
            found = made[fixed] = make(fixed)
        return found

    def transformed(*args, **kwargs):
        return for_arity(len(args), tuple(kwargs))(*args, **kwargs)

    def source(*args, **kwargs):
        return for_arity(len(args), tuple(kwargs))._astjax_source(*args, **kwargs)

    wrap(fun, transformed, label, None, source)
    transformed._astjax_per_arity = for_arity
    return transformed
