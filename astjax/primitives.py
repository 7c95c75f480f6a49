"""The primitive table: one entry per NumPy function, operator, method or core helper.

Every transformation looks primitives up here.  An entry says how a call is bound
(parameter names and defaults), which parameters carry derivatives, how generated
code spells the call, and which rule template (``templates/vjp.py``) gives its
vector-Jacobian product.  Tests iterate ``REGISTRY``: a primitive whose rule is
missing or wrong fails the suite.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from astjax import runtime_array as ra

NO_DEFAULT = object()


@dataclass(frozen=True)
class Primitive:
    """One primitive.

    name      registry key, also the name of its rule template in templates/vjp.py
    impl      the callable the generated code runs
    code      how generated code spells the callee ("np.tanh", "ra.unbroadcast")
    params    parameter names in call order; a leading "*" marks a variadic parameter
              that collects the remaining positional arguments into a tuple
    defaults  defaults of optional parameters (anything not listed is required)
    diff      parameters that carry derivatives (the vjp template returns one
              cotangent per entry, in this order); empty: not differentiable
    kind      "elementwise" | "reduction" | "linalg" | "shape" | "index" |
              "creation" | "structural" | "static" | "compare" | "other"
    operator  the Python operator used when printing (e.g. "+"), if any
    unary     True for unary operators (e.g. "-" for negative)
    method    name of the ndarray method spelling, if any (x.sum(...), x.dot(y)); the
              receiver binds to params[0]
    method_pack  when called as a method, several positional arguments after the
              receiver are packed into one tuple for this parameter (x.reshape(3, 4)
              -> shape=(3, 4)); a single argument is passed through (x.reshape((3, 4)))
    attribute name of the ndarray attribute spelling, if any (x.T, x.shape)
    sample    builds sample arguments for table-driven tests: rng -> (args, kwargs)
    """

    name: str
    impl: Callable[..., Any]
    code: str
    params: tuple[str, ...]
    defaults: dict = field(default_factory=dict)
    diff: tuple[str, ...] = ()
    kind: str = "other"
    operator: str | None = None
    unary: bool = False
    method: str | None = None
    method_pack: str | None = None
    attribute: str | None = None
    sample: Callable[[np.random.Generator], tuple[tuple, dict]] | None = None

    @property
    def differentiable(self) -> bool:
        return bool(self.diff)


REGISTRY: dict[str, Primitive] = {}
# The Python object a user may call (np.tanh, math.exp, builtins abs...) -> primitive.
BY_CALLABLE: dict[int, Primitive] = {}
# ndarray method name -> primitive (x.sum(axis=0) -> "sum").
BY_METHOD: dict[str, Primitive] = {}
# ndarray attribute name -> primitive (x.T -> "transpose", x.shape -> "shape").
BY_ATTRIBUTE: dict[str, Primitive] = {}
# gast operator class name ("Add", "MatMult", "USub", "Lt") -> primitive.
BY_OPERATOR: dict[str, Primitive] = {}


def register(prim: Primitive, callables: tuple = (), operators: tuple = ()) -> Primitive:
    """Add a primitive; ``callables`` are user-visible objects that mean this primitive."""
    if prim.name in REGISTRY:
        raise ValueError(f"primitive {prim.name!r} registered twice")
    REGISTRY[prim.name] = prim
    for obj in (prim.impl, *callables):
        BY_CALLABLE.setdefault(id(obj), prim)
    if prim.method:
        BY_METHOD.setdefault(prim.method, prim)
    if prim.attribute:
        BY_ATTRIBUTE.setdefault(prim.attribute, prim)
    for op in operators:
        BY_OPERATOR[op] = prim
    return prim


def lookup_callable(obj) -> Primitive | None:
    return BY_CALLABLE.get(id(obj))


# ---------------------------------------------------------------------------
# Entries.  (Kept in one table on purpose: a reader finds every primitive here.)
# ---------------------------------------------------------------------------

def _u(rng, shape=(3, 4)):
    return rng.standard_normal(shape)


register(Primitive("add", np.add, "np.add", ("x", "y"), diff=("x", "y"), kind="elementwise",
                   operator="+", sample=lambda r: ((_u(r), _u(r, (4,))), {})),
         callables=(operator.add,), operators=("Add",))
register(Primitive("tanh", np.tanh, "np.tanh", ("x",), diff=("x",), kind="elementwise",
                   sample=lambda r: ((_u(r),), {})), callables=(math.tanh,))
register(Primitive("sum", np.sum, "np.sum", ("x", "axis", "dtype", "keepdims"),
                   defaults={"axis": None, "dtype": None, "keepdims": False},
                   diff=("x",), kind="reduction", method="sum",
                   sample=lambda r: ((_u(r),), {"axis": 0})))
register(Primitive("dot", np.dot, "np.dot", ("x", "y"), diff=("x", "y"), kind="linalg",
                   method="dot", sample=lambda r: ((_u(r), _u(r, (4, 2))), {})))
