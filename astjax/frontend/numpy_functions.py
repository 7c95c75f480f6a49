r"""NumPy functions transformed directly: ``grad(np.tanh)``, ``jacfwd(np.exp)``.

A ufunc or a compiled NumPy function has no Python source to read, but astjax knows
it as a primitive, with its rules.  At the entry of a transformation it is replaced by
a generated one-line Python function calling it, which every transformation reads
like a function of the user's.  Its parameters are the primitive's required ones,
then its optional ones with their literal defaults (``out`` left out).

>>> import numpy as np
>>> f = as_python_function(np.tanh)
>>> print(f._astjax_wrapper_source, end="")
def tanh(x):
    return np.tanh(x)
>>> float(f(0.5)) == float(np.tanh(0.5))
True
>>> as_python_function(len) is len   # not a NumPy function: left alone
True
"""
from __future__ import annotations

import types

import numpy as np

from astjax import codegen
from astjax import primitives as P
from astjax.frontend.scopes import _is_library

_LITERALS = (bool, int, float, str, type(None))
_WRAPPERS: dict = {}


def _needs_wrapper(fun) -> bool:
    if P.lookup_callable(fun) is None:
        return False
    numpy = isinstance(fun, np.ufunc) or (getattr(fun, "__module__", None) or "").split(
        ".")[0] == "numpy"
    return numpy and (not isinstance(fun, types.FunctionType) or _is_library(fun))


def as_python_function(fun):
    """``fun`` itself, or, for a NumPy primitive, a generated function calling it."""
    try:
        if not _needs_wrapper(fun):
            return fun
    except TypeError:
        return fun
    found = _WRAPPERS.get(id(fun))
    if found is not None and found[0] is fun:
        return found[1]
    prim = P.lookup_callable(fun)
    name = getattr(fun, "__name__", prim.name)
    if not name.isidentifier() or name in ("np", "fn"):
        name = prim.name
    params, passed = [], []
    for p in prim.params:
        if p.startswith("*") or p == "out":
            continue
        if p in prim.defaults:
            default = prim.defaults[p]
            if not isinstance(default, _LITERALS):
                continue
            params.append(f"{p}={default!r}")
            passed.append(f"{p}={p}")
        else:
            params.append(p)
            passed.append(p)
    spelled = prim.code if prim.code.startswith("np.") and _resolves(prim.code, fun) else "fn"
    source = f"def {name}({', '.join(params)}):\n    return {spelled}({', '.join(passed)})\n"
    namespace = {"np": np, "fn": fun}
    codegen.load_source(source, namespace, f"np.{name}")
    wrapper = namespace[name]
    wrapper._astjax_wrapper_source = source
    _WRAPPERS[id(fun)] = (fun, wrapper)
    return wrapper


def _resolves(code, fun) -> bool:
    obj = np
    for part in code.split(".")[1:]:
        obj = getattr(obj, part, None)
    return obj is fun
