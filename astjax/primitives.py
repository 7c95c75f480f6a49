"""The primitive table: one entry per NumPy function, operator, method or core helper.

Every transformation looks primitives up here.  An entry says how a call is bound
(parameter names and defaults), which parameters carry derivatives, how generated
code spells the call, and which rule template (``templates/vjp.py``) gives its
vector-Jacobian product.  Tests iterate ``REGISTRY``: a primitive whose rule is
missing or wrong fails the suite.

Contract with the transformations:
- parameters that are not in ``diff`` have zero derivative by construction (axes,
  shapes, indices, or arrays a rule reads only for their shape or for a
  piecewise-constant mask), so an active value bound to one is simply constant;
- a primitive with ``diff=()`` whose kind is "compare", "static", "creation" or
  "index" has a constant output (zero derivative); any other non-differentiable
  primitive (``reason`` says why) must be refused when one of its inputs is
  differentiated;
- a cotangent for a variadic or sequence parameter is a list (None entries: zero).
"""
from __future__ import annotations

import builtins
import math
import operator
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from astjax import runtime_array as ra

NO_DEFAULT = object()

# Kinds whose non-differentiable primitives have constant outputs (zero derivative).
CONSTANT_KINDS = frozenset({"compare", "static", "creation", "index"})


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
              cotangent per entry, in this order); empty: not differentiable.
              Entries are spelled exactly as in ``params`` (a variadic one keeps
              its "*")
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
    meta      parameters read only for their shape, dtype or structure: reverse mode
              saves a zero-size stand-in (``rt.meta``) for them instead of the value
    sample    builds sample arguments for table-driven tests: rng -> (args, kwargs)
    reason    why a primitive is not differentiable (shown in error messages)
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
    meta: tuple[str, ...] = ()
    # parameters whose value reaches the output although no rule says how (arange's
    # start): a differentiated operand bound to one is refused, never a silent zero
    refuse: tuple[str, ...] = ()
    reason: str = ""

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

# Python's own function for each printed operator: what an operator on Python numbers
# in the user's source means (``2 ** 63`` is an exact int, ``1 / 0`` raises), where
# the primitive's NumPy implementation would wrap in int64 or give inf.  Whatever
# evaluates an operator on constants at transformation time uses these.
PYTHON_BINARY = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "@": operator.matmul,
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "==": operator.eq, "!=": operator.ne, "&": operator.and_, "|": operator.or_,
    "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
}
PYTHON_UNARY = {"-": operator.neg, "+": operator.pos, "~": operator.invert}


def small_operands(op, x, y) -> bool:
    """Whether ``x op y`` is cheap to evaluate at transformation time (not
    ``2 ** 10**9``)."""
    for v in (x, y):
        if type(v) is int and abs(v) > 2 ** 64:
            return False
    if op == "**" and type(y) is int and abs(y) > 64:
        return False
    if op == "<<" and type(y) is int and y > 64:
        return False
    if op == "*" and (isinstance(x, (str, tuple)) or isinstance(y, (str, tuple))):
        return False
    return True


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
# Sample builders (domains chosen so every rule is smooth there)
# ---------------------------------------------------------------------------

def _u(rng, shape=(3, 4)):
    return rng.standard_normal(shape)


def _pos(rng, shape=(3, 4), lo=0.5, hi=2.0):
    return rng.uniform(lo, hi, shape)


def _sym(rng, n=3):
    m = rng.standard_normal((n, n))
    return m @ m.T + n * np.eye(n)


def _with_zero(rng, shape=(3, 4)):
    x = rng.standard_normal(shape)
    x.flat[5] = 0.0
    return x


def _with_nan(rng, shape=(3, 4)):
    x = rng.standard_normal(shape)
    x.flat[[2, 7]] = np.nan
    return x


def _s(*args, **kwargs):
    """A sample that ignores the rng (for fixed arguments)."""
    return lambda r: (args, kwargs)


def _names(module, *names):
    """The attributes of ``module`` that exist (NumPy versions differ in aliases)."""
    return tuple(getattr(module, n) for n in names if hasattr(module, n))


_ND = "not differentiable: "


# ---------------------------------------------------------------------------
# Operators and elementwise arithmetic
# ---------------------------------------------------------------------------

def _binary(name, impl, sample, *, op=None, gast=(), callables=(), diff=True, kind="elementwise",
            reason=""):
    register(Primitive(name, impl, f"np.{name}", ("x", "y", "out"), {"out": None},
                       diff=("x", "y") if diff else (), kind=kind, operator=op,
                       sample=sample if diff else None, reason=reason),
             callables=callables, operators=gast)


def _unary(name, impl, sample=None, *, op=None, gast=(), callables=(), diff=True,
           kind="elementwise", method=None, reason=""):
    register(Primitive(name, impl, f"np.{name}", ("x", "out"), {"out": None},
                       diff=("x",) if diff else (), kind=kind, operator=op, unary=op is not None,
                       method=method, sample=(sample or (lambda r: ((_u(r),), {})))
                       if diff else None, reason=reason),
             callables=callables, operators=gast)


_bc = lambda r: ((_u(r), _u(r, (4,))), {})  # noqa: E731  (3, 4) with (4,)
_bcp = lambda r: ((_pos(r), _pos(r, (4,))), {})  # noqa: E731  positive operands

_binary("add", np.add, _bc, op="+", gast=("Add",), callables=(operator.add,))
_binary("subtract", np.subtract, _bc, op="-", gast=("Sub",), callables=(operator.sub,))
_binary("multiply", np.multiply, _bc, op="*", gast=("Mult",), callables=(operator.mul,))
_binary("divide", np.divide, lambda r: ((_u(r), _pos(r, (4,))), {}), op="/", gast=("Div",),
        callables=(operator.truediv, np.true_divide))
_binary("floor_divide", np.floor_divide, lambda r: ((_u(r) * 3, _pos(r, (4,))), {}), op="//",
        gast=("FloorDiv",), callables=(operator.floordiv,))
_binary("remainder", np.remainder, lambda r: ((_u(r) * 3, _pos(r, (4,))), {}), op="%",
        gast=("Mod",), callables=(operator.mod, np.mod))
_binary("fmod", np.fmod, lambda r: ((_u(r) * 3, _pos(r, (4,))), {}), callables=(math.fmod,))
_binary("power", np.power, lambda r: ((_pos(r), _u(r, (4,))), {}), op="**", gast=("Pow",),
        callables=(operator.pow, builtins.pow, math.pow))
_binary("float_power", np.float_power, lambda r: ((_pos(r), _u(r, (4,))), {}))
_binary("maximum", np.maximum, _bc)
_binary("minimum", np.minimum, _bc)
_binary("fmax", np.fmax, _bc)
_binary("fmin", np.fmin, _bc)
_binary("arctan2", np.arctan2, _bc, callables=(math.atan2,))
_binary("hypot", np.hypot, _bc)
_binary("logaddexp", np.logaddexp, _bc)
_binary("logaddexp2", np.logaddexp2, _bc)
register(Primitive("matmul", np.matmul, "np.matmul", ("x", "y", "out"), {"out": None},
                   diff=("x", "y"), kind="linalg", operator="@",
                   sample=lambda r: ((_u(r, (2, 3, 4)), _u(r, (4, 5))), {})),
         callables=(operator.matmul, *_names(np.linalg, "matmul")), operators=("MatMult",))
register(Primitive("vecdot", np.vecdot, "np.vecdot", ("x", "y", "out", "axis"),
                   {"out": None, "axis": -1}, diff=("x", "y"), kind="linalg",
                   sample=lambda r: ((_u(r, (2, 3, 4)), _u(r, (3, 4))), {})),
         callables=_names(np.linalg, "vecdot"))

_unary("negative", np.negative, op="-", gast=("USub",), callables=(operator.neg,))
_unary("positive", np.positive, op="+", gast=("UAdd",), callables=(operator.pos,))
_unary("exp", np.exp, callables=(math.exp,))
_unary("exp2", np.exp2, callables=_names(math, "exp2"))
_unary("expm1", np.expm1, callables=(math.expm1,))
_unary("log", np.log, lambda r: ((_pos(r),), {}))
_unary("log2", np.log2, lambda r: ((_pos(r),), {}), callables=(math.log2,))
_unary("log10", np.log10, lambda r: ((_pos(r),), {}), callables=(math.log10,))
_unary("log1p", np.log1p, lambda r: ((_pos(r, lo=-0.5, hi=2.0),), {}), callables=(math.log1p,))
_unary("sqrt", np.sqrt, lambda r: ((_pos(r),), {}), callables=(math.sqrt,))
_unary("cbrt", np.cbrt, lambda r: ((_pos(r) * np.sign(_u(r)),), {}),
       callables=_names(math, "cbrt"))
_unary("square", np.square)
_unary("reciprocal", np.reciprocal, lambda r: ((_pos(r) * np.sign(_u(r)),), {}))
_unary("sin", np.sin, callables=(math.sin,))
_unary("cos", np.cos, callables=(math.cos,))
_unary("tan", np.tan, lambda r: ((_pos(r, lo=-1.2, hi=1.2),), {}), callables=(math.tan,))
_unary("arcsin", np.arcsin, lambda r: ((_pos(r, lo=-0.9, hi=0.9),), {}), callables=(math.asin,))
_unary("arccos", np.arccos, lambda r: ((_pos(r, lo=-0.9, hi=0.9),), {}), callables=(math.acos,))
_unary("arctan", np.arctan, callables=(math.atan,))
_unary("sinh", np.sinh, callables=(math.sinh,))
_unary("cosh", np.cosh, callables=(math.cosh,))
_unary("tanh", np.tanh, callables=(math.tanh,))
_unary("arcsinh", np.arcsinh, callables=(math.asinh,))
_unary("arccosh", np.arccosh, lambda r: ((_pos(r, lo=1.1, hi=3.0),), {}),
       callables=(math.acosh,))
_unary("arctanh", np.arctanh, lambda r: ((_pos(r, lo=-0.9, hi=0.9),), {}),
       callables=(math.atanh,))
_unary("absolute", np.absolute, callables=(builtins.abs, operator.abs))
_unary("fabs", np.fabs, callables=(math.fabs,))
_unary("deg2rad", np.deg2rad, callables=(np.radians, math.radians))
_unary("rad2deg", np.rad2deg, callables=(np.degrees, math.degrees))
_unary("conj", np.conjugate, method="conj")
register(Primitive("sinc", np.sinc, "np.sinc", ("x",), diff=("x",), kind="elementwise",
                   sample=lambda r: ((_u(r),), {})))
# Piecewise constant: differentiable with a zero cotangent, as in JAX.
_unary("sign", np.sign)
_unary("floor", np.floor, lambda r: ((_u(r) * 3,), {}), callables=(math.floor,))
_unary("ceil", np.ceil, lambda r: ((_u(r) * 3,), {}), callables=(math.ceil,))
_unary("trunc", np.trunc, lambda r: ((_u(r) * 3,), {}), callables=(math.trunc,))
_unary("rint", np.rint, lambda r: ((_u(r) * 3,), {}))
register(Primitive("fix", np.fix, "np.fix", ("x", "out"), {"out": None}, diff=("x",),
                   kind="elementwise", sample=lambda r: ((_u(r) * 3,), {})))
register(Primitive("round", np.round, "np.round", ("a", "decimals", "out"),
                   {"decimals": 0, "out": None}, diff=("a",), kind="elementwise", method="round",
                   sample=lambda r: ((_u(r) * 3,), {"decimals": 1})), callables=(np.around,))
register(Primitive("real", np.real, "np.real", ("val",), diff=("val",), kind="elementwise",
                   attribute="real", sample=lambda r: ((_u(r),), {})))
register(Primitive("imag", np.imag, "np.imag", ("val",), diff=("val",), kind="elementwise",
                   attribute="imag", sample=lambda r: ((_u(r),), {})))
register(Primitive("clip", ra.clip, "ra.clip", ("a", "a_min", "a_max", "out", "min", "max"),
                   {"a_min": None, "a_max": None, "out": None, "min": None, "max": None},
                   diff=("a", "a_min", "a_max", "min", "max"), kind="elementwise", method="clip",
                   sample=lambda r: ((_u(r), _pos(r, (4,), -1.0, -0.2), 0.6), {})),
         callables=(np.clip,))
register(Primitive("where", ra.where, "ra.where", ("condition", "x", "y"),
                   {"x": None, "y": None}, diff=("x", "y"), kind="elementwise",
                   sample=lambda r: ((_u(r) > 0, _u(r), _u(r, (4,))), {})),
         callables=(np.where,))

# Comparisons, logic and integer-only operators: boolean or integer results.
for _name, _op, _gast, _pyop in (
        ("less", "<", "Lt", operator.lt), ("less_equal", "<=", "LtE", operator.le),
        ("greater", ">", "Gt", operator.gt), ("greater_equal", ">=", "GtE", operator.ge),
        ("equal", "==", "Eq", operator.eq), ("not_equal", "!=", "NotEq", operator.ne),
        ("bitwise_and", "&", "BitAnd", operator.and_), ("bitwise_or", "|", "BitOr", operator.or_),
        ("bitwise_xor", "^", "BitXor", operator.xor),
        ("left_shift", "<<", "LShift", operator.lshift),
        ("right_shift", ">>", "RShift", operator.rshift)):
    _binary(_name, getattr(np, _name), None, op=_op, gast=(_gast,), callables=(_pyop,),
            diff=False, kind="compare", reason=_ND + "boolean or integer result")
for _name in ("logical_and", "logical_or", "logical_xor"):
    _binary(_name, getattr(np, _name), None, diff=False, kind="compare",
            reason=_ND + "boolean result")
_unary("invert", np.invert, op="~", gast=("Invert",), callables=(operator.invert,), diff=False,
       kind="compare", reason=_ND + "boolean or integer result")
_unary("logical_not", np.logical_not, diff=False, kind="compare", reason=_ND + "boolean result")
_unary("isnan", np.isnan, callables=(math.isnan,), diff=False, kind="compare",
       reason=_ND + "boolean result")
_unary("isinf", np.isinf, callables=(math.isinf,), diff=False, kind="compare",
       reason=_ND + "boolean result")
_unary("isfinite", np.isfinite, callables=(math.isfinite,), diff=False, kind="compare",
       reason=_ND + "boolean result")
_unary("signbit", np.signbit, diff=False, kind="compare", reason=_ND + "boolean result")
for _name, _params, _defaults in (
        ("isclose", ("a", "b", "rtol", "atol", "equal_nan"),
         {"rtol": 1e-05, "atol": 1e-08, "equal_nan": False}),
        ("allclose", ("a", "b", "rtol", "atol", "equal_nan"),
         {"rtol": 1e-05, "atol": 1e-08, "equal_nan": False}),
        ("array_equal", ("a1", "a2", "equal_nan"), {"equal_nan": False})):
    register(Primitive(_name, getattr(np, _name), f"np.{_name}", _params, _defaults,
                       kind="compare", reason=_ND + "boolean result"))

# ---------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------

_RED = ("a", "axis", "dtype", "out", "keepdims")
_RED_D = {"axis": None, "dtype": None, "out": None, "keepdims": False}
_MAXP = ("a", "axis", "out", "keepdims")
_MAXD = {"axis": None, "out": None, "keepdims": False}

register(Primitive("sum", np.sum, "np.sum", _RED, _RED_D, diff=("a",), kind="reduction",
                   method="sum", sample=lambda r: ((_u(r),), {"axis": 0})))
register(Primitive("mean", np.mean, "np.mean", _RED, _RED_D, diff=("a",), kind="reduction",
                   method="mean", sample=lambda r: ((_u(r),), {"axis": -1, "keepdims": True})))
register(Primitive("prod", np.prod, "np.prod", _RED, _RED_D, diff=("a",), kind="reduction",
                   method="prod", sample=lambda r: ((_with_zero(r),), {"axis": 1})))
register(Primitive("max", np.max, "np.max", _MAXP, _MAXD, diff=("a",), kind="reduction",
                   method="max", sample=lambda r: ((_u(r),), {"axis": 1, "keepdims": True})),
         callables=(np.amax,))
register(Primitive("min", np.min, "np.min", _MAXP, _MAXD, diff=("a",), kind="reduction",
                   method="min", sample=lambda r: ((_u(r),), {"axis": 0})),
         callables=(np.amin,))
register(Primitive("nanmax", np.nanmax, "np.nanmax", _MAXP, _MAXD, diff=("a",),
                   kind="reduction", sample=lambda r: ((_u(r),), {"axis": 1})))
register(Primitive("nanmin", np.nanmin, "np.nanmin", _MAXP, _MAXD, diff=("a",),
                   kind="reduction", sample=lambda r: ((_u(r),), {"axis": 1})))
register(Primitive("nansum", np.nansum, "np.nansum", _RED, _RED_D, diff=("a",),
                   kind="reduction", sample=lambda r: ((_u(r),), {"axis": 1})))
register(Primitive("nanmean", np.nanmean, "np.nanmean", _RED, _RED_D, diff=("a",),
                   kind="reduction", sample=lambda r: ((_u(r),), {"axis": 0})))
_VAR = ("a", "axis", "dtype", "out", "ddof", "keepdims")
_VARD = {"axis": None, "dtype": None, "out": None, "ddof": 0, "keepdims": False}
register(Primitive("var", np.var, "np.var", _VAR, _VARD, diff=("a",), kind="reduction",
                   method="var", sample=lambda r: ((_u(r),), {"axis": 0, "ddof": 1})))
register(Primitive("std", np.std, "np.std", _VAR, _VARD, diff=("a",), kind="reduction",
                   method="std", sample=lambda r: ((_u(r),), {"axis": 1, "keepdims": True})))
_CUM = ("a", "axis", "dtype", "out")
_CUMD = {"axis": None, "dtype": None, "out": None}
register(Primitive("cumsum", np.cumsum, "np.cumsum", _CUM, _CUMD, diff=("a",),
                   kind="reduction", method="cumsum", sample=lambda r: ((_u(r),), {"axis": 1})))
register(Primitive("cumprod", np.cumprod, "np.cumprod", _CUM, _CUMD, diff=("a",),
                   kind="reduction", method="cumprod",
                   sample=lambda r: ((_with_zero(r),), {"axis": 1})))
register(Primitive("norm", np.linalg.norm, "np.linalg.norm", ("x", "ord", "axis", "keepdims"),
                   {"ord": None, "axis": None, "keepdims": False}, diff=("x",),
                   kind="reduction", sample=lambda r: ((_u(r),), {"axis": 1})))
register(Primitive("trace", np.trace, "np.trace",
                   ("a", "offset", "axis1", "axis2", "dtype", "out"),
                   {"offset": 0, "axis1": 0, "axis2": 1, "dtype": None, "out": None},
                   diff=("a",), kind="reduction", method="trace",
                   sample=lambda r: ((_u(r, (3, 2, 4)),), {"offset": 1, "axis2": 2})))
register(Primitive("diagonal", np.diagonal, "np.diagonal", ("a", "offset", "axis1", "axis2"),
                   {"offset": 0, "axis1": 0, "axis2": 1}, diff=("a",), kind="shape",
                   method="diagonal", sample=lambda r: ((_u(r),), {"offset": 1})))
register(Primitive("diag", np.diag, "np.diag", ("v", "k"), {"k": 0}, diff=("v",),
                   kind="shape", sample=lambda r: ((_u(r, (3,)),), {"k": -1})))
for _name, _params, _defaults, _method in (
        ("any", _MAXP, _MAXD, "any"), ("all", _MAXP, _MAXD, "all"),
        ("count_nonzero", ("a", "axis", "keepdims"), {"axis": None, "keepdims": False}, None)):
    register(Primitive(_name, getattr(np, _name), f"np.{_name}", _params, _defaults,
                       kind="compare", method=_method, reason=_ND + "boolean or count result"))
for _name, _params, _defaults, _method in (
        ("argmax", ("a", "axis", "out", "keepdims"), _MAXD, "argmax"),
        ("argmin", ("a", "axis", "out", "keepdims"), _MAXD, "argmin"),
        ("argsort", ("a", "axis", "kind", "order", "stable"),
         {"axis": -1, "kind": None, "order": None, "stable": None}, "argsort"),
        ("nonzero", ("a",), {}, "nonzero"),
        ("argwhere", ("a",), {}, None),
        ("flatnonzero", ("a",), {}, None),
        ("searchsorted", ("a", "v", "side", "sorter"), {"side": "left", "sorter": None}, None)):
    register(Primitive(_name, getattr(np, _name), f"np.{_name}", _params, _defaults,
                       kind="index", method=_method, reason=_ND + "integer index result"))

# ---------------------------------------------------------------------------
# Linear algebra
# ---------------------------------------------------------------------------

register(Primitive("dot", np.dot, "np.dot", ("a", "b", "out"), {"out": None}, diff=("a", "b"),
                   kind="linalg", method="dot",
                   sample=lambda r: ((_u(r), _u(r, (4, 2))), {})))
register(Primitive("vdot", np.vdot, "np.vdot", ("a", "b"), diff=("a", "b"), kind="linalg",
                   sample=lambda r: ((_u(r), _u(r, (12,))), {})))
register(Primitive("inner", np.inner, "np.inner", ("a", "b"), diff=("a", "b"), kind="linalg",
                   sample=lambda r: ((_u(r), _u(r, (2, 5, 4))), {})))
register(Primitive("outer", np.outer, "np.outer", ("a", "b", "out"), {"out": None},
                   diff=("a", "b"), kind="linalg",
                   sample=lambda r: ((_u(r, (3,)), _u(r, (2, 2))), {})),
         callables=_names(np.linalg, "outer"))
register(Primitive("tensordot", np.tensordot, "np.tensordot", ("a", "b", "axes"), {"axes": 2},
                   diff=("a", "b"), kind="linalg",
                   sample=lambda r: ((_u(r, (3, 4, 5)), _u(r, (4, 5, 2))), {})),
         callables=_names(np.linalg, "tensordot"))
# "*operands" is the whole argument sequence: a subscripts string then arrays, or the
# interleaved (array, sublist, ...) form; rules read it through ra.einsum_canon.
register(Primitive("einsum", np.einsum, "np.einsum", ("*operands", "out", "optimize"),
                   {"out": None, "optimize": False}, diff=("*operands",), kind="linalg",
                   sample=lambda r: (("ij,jk->ik", _u(r), _u(r, (4, 2))), {})))
register(Primitive("kron", np.kron, "np.kron", ("a", "b"), diff=("a", "b"), kind="linalg",
                   sample=lambda r: ((_u(r, (2, 3)), _u(r, (3, 2))), {})))
register(Primitive("matrix_transpose", np.matrix_transpose, "np.matrix_transpose", ("x",),
                   diff=("x",), kind="shape", attribute="mT",
                   sample=lambda r: ((_u(r, (2, 3, 4)),), {})),
         callables=_names(np.linalg, "matrix_transpose"))
register(Primitive("inv", np.linalg.inv, "np.linalg.inv", ("a",), diff=("a",), kind="linalg",
                   sample=lambda r: ((_u(r, (3, 3)) + 3 * np.eye(3),), {})))
register(Primitive("det", np.linalg.det, "np.linalg.det", ("a",), diff=("a",), kind="linalg",
                   sample=lambda r: ((_u(r, (2, 3, 3)) + 2 * np.eye(3),), {})))
register(Primitive("slogdet", np.linalg.slogdet, "np.linalg.slogdet", ("a",), diff=("a",),
                   kind="linalg", sample=lambda r: ((_u(r, (3, 3)) + 2 * np.eye(3),), {})))
register(Primitive("solve", np.linalg.solve, "np.linalg.solve", ("a", "b"), diff=("a", "b"),
                   kind="linalg",
                   sample=lambda r: ((_u(r, (3, 3)) + 3 * np.eye(3), _u(r, (3,))), {})))
register(Primitive("cholesky", np.linalg.cholesky, "np.linalg.cholesky", ("a", "upper"),
                   {"upper": False}, diff=("a",), kind="linalg",
                   sample=lambda r: ((_sym(r),), {})))
register(Primitive("eigh", np.linalg.eigh, "np.linalg.eigh", ("a", "UPLO"), {"UPLO": "L"},
                   diff=("a",), kind="linalg", sample=lambda r: ((_sym(r),), {})))
register(Primitive("eigvalsh", np.linalg.eigvalsh, "np.linalg.eigvalsh", ("a", "UPLO"),
                   {"UPLO": "L"}, diff=("a",), kind="linalg", sample=lambda r: ((_sym(r),), {})))



def _real_eig(rng, n=3):
    """A matrix with real, well separated eigenvalues (S diag(1..n) S^-1)."""
    s = np.eye(n) + 0.3 * rng.standard_normal((n, n))
    return s @ np.diag(np.arange(1.0, n + 1)) @ np.linalg.inv(s)


# Decompositions returning tuples: rules in every mode (templates/*.py); the forms
# without a unique derivative are refused when the rule runs (ra.qr_parts, ra.eig_real).
register(Primitive("svd", np.linalg.svd, "np.linalg.svd",
                   ("a", "full_matrices", "compute_uv", "hermitian"),
                   {"full_matrices": True, "compute_uv": True, "hermitian": False},
                   diff=("a",), kind="linalg",
                   sample=lambda r: ((_u(r, (4, 3)),), {"full_matrices": False})))
register(Primitive("svdvals", np.linalg.svdvals, "np.linalg.svdvals", ("x",), diff=("x",),
                   kind="linalg", sample=lambda r: ((_u(r, (2, 3, 4)),), {})))
register(Primitive("qr", np.linalg.qr, "np.linalg.qr", ("a", "mode"), {"mode": "reduced"},
                   diff=("a",), kind="linalg", sample=lambda r: ((_u(r, (4, 3)),), {})))
register(Primitive("eig", np.linalg.eig, "np.linalg.eig", ("a",), diff=("a",), kind="linalg",
                   sample=lambda r: ((_real_eig(r),), {})))
register(Primitive("eigvals", np.linalg.eigvals, "np.linalg.eigvals", ("a",), diff=("a",),
                   kind="linalg", sample=lambda r: ((_real_eig(r),), {})))
# np.linalg.lstsq: its solution is pinv(a) @ b (rcond the same cut-off), its residuals
# sum((b - a x)^2) where they exist, its singular values those of a; rank constant
register(Primitive("lstsq", np.linalg.lstsq, "np.linalg.lstsq", ("a", "b", "rcond"),
                   {"rcond": None}, diff=("a", "b"), kind="linalg",
                   sample=lambda r: ((_u(r, (5, 3)), _u(r, (5, 2))), {})))
register(Primitive("pinv", np.linalg.pinv, "np.linalg.pinv", ("a", "rcond", "hermitian", "rtol"),
                   {"rcond": None, "hermitian": False, "rtol": None}, diff=("a",),
                   kind="linalg", sample=lambda r: ((_u(r, (3, 4)),), {})))
register(Primitive("cross", np.cross, "np.cross", ("a", "b", "axisa", "axisb", "axisc", "axis"),
                   {"axisa": -1, "axisb": -1, "axisc": -1, "axis": None}, diff=("a", "b"),
                   kind="linalg", sample=lambda r: ((_u(r, (4, 3)), _u(r, (3,))), {})))

# ---------------------------------------------------------------------------
# Shapes, joining, splitting, gathering
# ---------------------------------------------------------------------------

register(Primitive("reshape", np.reshape, "np.reshape", ("a", "shape", "order"),
                   {"order": "C"}, diff=("a",), kind="shape", method="reshape",
                   method_pack="shape", sample=lambda r: ((_u(r), (2, 6)), {"order": "F"})))
register(Primitive("ravel", np.ravel, "np.ravel", ("a", "order"), {"order": "C"}, diff=("a",),
                   kind="shape", method="ravel", sample=lambda r: ((_u(r),), {})))
register(Primitive("flatten", ra.flatten, "ra.flatten", ("a", "order"), {"order": "C"},
                   diff=("a",), kind="shape", method="flatten",
                   sample=lambda r: ((_u(r),), {"order": "F"})))
register(Primitive("transpose", np.transpose, "np.transpose", ("a", "axes"), {"axes": None},
                   diff=("a",), kind="shape", method="transpose", method_pack="axes",
                   attribute="T", sample=lambda r: ((_u(r, (2, 3, 4)), (1, -1, 0)), {})))
register(Primitive("swapaxes", np.swapaxes, "np.swapaxes", ("a", "axis1", "axis2"),
                   diff=("a",), kind="shape", method="swapaxes",
                   sample=lambda r: ((_u(r, (2, 3, 4)), 0, 2), {})))
register(Primitive("moveaxis", np.moveaxis, "np.moveaxis", ("a", "source", "destination"),
                   diff=("a",), kind="shape",
                   sample=lambda r: ((_u(r, (2, 3, 4)), (0, 1), (2, 0)), {})))
register(Primitive("expand_dims", np.expand_dims, "np.expand_dims", ("a", "axis"),
                   diff=("a",), kind="shape", sample=lambda r: ((_u(r), (0, 3)), {})))
register(Primitive("squeeze", np.squeeze, "np.squeeze", ("a", "axis"), {"axis": None},
                   diff=("a",), kind="shape", method="squeeze",
                   sample=lambda r: ((_u(r, (3, 1, 4, 1)),), {"axis": 1})))
register(Primitive("broadcast_to", np.broadcast_to, "np.broadcast_to",
                   ("array", "shape", "subok"), {"subok": False}, diff=("array",),
                   kind="shape", sample=lambda r: ((_u(r, (3, 1)), (2, 3, 4)), {})))
for _name in ("atleast_1d", "atleast_2d", "atleast_3d"):
    register(Primitive(_name, getattr(np, _name), f"np.{_name}", ("*arys",),
                       diff=("*arys",), kind="shape",
                       sample=lambda r: ((_u(r, (4,)), 1.5, _u(r, (2, 3))), {})))
register(Primitive("concatenate", np.concatenate, "np.concatenate",
                   ("arrays", "axis", "out", "dtype", "casting"),
                   {"axis": 0, "out": None, "dtype": None, "casting": "same_kind"},
                   diff=("arrays",), kind="shape",
                   sample=lambda r: (([_u(r, (3, 2)), _u(r, (3, 4))],), {"axis": -1})))
register(Primitive("stack", np.stack, "np.stack",
                   ("arrays", "axis", "out", "dtype", "casting"),
                   {"axis": 0, "out": None, "dtype": None, "casting": "same_kind"},
                   diff=("arrays",), kind="shape",
                   sample=lambda r: (([_u(r), _u(r), _u(r)],), {"axis": 1})))
for _name, _shapes, _kw in (("vstack", [(4,), (2, 4)], True), ("hstack", [(3, 2), (3, 1)], True),
                            ("dstack", [(3, 2), (3, 2, 2)], False),
                            ("column_stack", [(3,), (3, 2)], False)):
    register(Primitive(_name, getattr(np, _name), f"np.{_name}",
                       ("tup", "dtype", "casting") if _kw else ("tup",),
                       {"dtype": None, "casting": "same_kind"} if _kw else {},
                       diff=("tup",), kind="shape",
                       sample=(lambda shapes: lambda r: (([_u(r, s) for s in shapes],), {}))(
                           _shapes)))
register(Primitive("split", np.split, "np.split", ("ary", "indices_or_sections", "axis"),
                   {"axis": 0}, diff=("ary",), kind="shape",
                   sample=lambda r: ((_u(r, (6, 4)), [1, 4]), {})))
register(Primitive("array_split", np.array_split, "np.array_split",
                   ("ary", "indices_or_sections", "axis"), {"axis": 0}, diff=("ary",),
                   kind="shape", sample=lambda r: ((_u(r, (3, 7)), 3), {"axis": 1})))
for _name, _shape in (("hsplit", (4, 6)), ("vsplit", (4, 6)), ("dsplit", (2, 3, 4))):
    register(Primitive(_name, getattr(np, _name), f"np.{_name}",
                       ("ary", "indices_or_sections"), diff=("ary",), kind="shape",
                       sample=(lambda shape: lambda r: ((_u(r, shape), 2), {}))(_shape)))
register(Primitive("tile", np.tile, "np.tile", ("A", "reps"), diff=("A",), kind="shape",
                   sample=lambda r: ((_u(r, (2, 3)), (2, 1, 2)), {})))
register(Primitive("repeat", np.repeat, "np.repeat", ("a", "repeats", "axis"), {"axis": None},
                   diff=("a",), kind="shape", method="repeat",
                   sample=lambda r: ((_u(r, (2, 3)), [1, 0, 2]), {"axis": 1})))
register(Primitive("flip", np.flip, "np.flip", ("m", "axis"), {"axis": None}, diff=("m",),
                   kind="shape", sample=lambda r: ((_u(r),), {"axis": 1})))
register(Primitive("fliplr", np.fliplr, "np.fliplr", ("m",), diff=("m",), kind="shape",
                   sample=lambda r: ((_u(r),), {})))
register(Primitive("flipud", np.flipud, "np.flipud", ("m",), diff=("m",), kind="shape",
                   sample=lambda r: ((_u(r),), {})))
register(Primitive("rot90", np.rot90, "np.rot90", ("m", "k", "axes"), {"k": 1, "axes": (0, 1)},
                   diff=("m",), kind="shape", sample=lambda r: ((_u(r, (2, 3, 4)), 3, (0, 2)), {})))
register(Primitive("roll", np.roll, "np.roll", ("a", "shift", "axis"), {"axis": None},
                   diff=("a",), kind="shape", sample=lambda r: ((_u(r), (1, -3), (0, 1)), {})))
# (a differentiated constant_values / prepend / append is refused by the rules: their
# cotangents raise when reverse mode computes them, which it does only then)
register(Primitive("pad", ra.pad, "ra.pad", ("array", "pad_width", "mode", "constant_values"),
                   {"mode": "constant", "constant_values": 0},
                   diff=("array", "constant_values"), kind="shape",
                   sample=lambda r: ((_u(r), ((1, 2), (0, 3))), {"mode": "reflect"})),
         callables=(np.pad,))
register(Primitive("take", np.take, "np.take", ("a", "indices", "axis", "out", "mode"),
                   {"axis": None, "out": None, "mode": "raise"}, diff=("a",), kind="index",
                   method="take", sample=lambda r: ((_u(r), [0, 2, 2, -1]), {"axis": 1})))
register(Primitive("take_along_axis", np.take_along_axis, "np.take_along_axis",
                   ("arr", "indices", "axis"), {"axis": -1}, diff=("arr",), kind="index",
                   sample=lambda r: ((_u(r), np.array([[0, 0], [3, 1], [2, 2]])), {"axis": 1})))
register(Primitive("tril", np.tril, "np.tril", ("m", "k"), {"k": 0}, diff=("m",), kind="shape",
                   sample=lambda r: ((_u(r, (2, 3, 4)),), {"k": 1})))
register(Primitive("triu", np.triu, "np.triu", ("m", "k"), {"k": 0}, diff=("m",), kind="shape",
                   sample=lambda r: ((_u(r),), {"k": -1})))
register(Primitive("sort", np.sort, "np.sort", ("a", "axis", "kind", "order", "stable"),
                   {"axis": -1, "kind": None, "order": None, "stable": None}, diff=("a",),
                   kind="index", sample=lambda r: ((_u(r),), {"axis": 0})))
register(Primitive("diff", ra.diff, "ra.diff", ("a", "n", "axis", "prepend", "append"),
                   {"n": 1, "axis": -1, "prepend": None, "append": None},
                   diff=("a", "prepend", "append"),
                   kind="shape", sample=lambda r: ((_u(r, (3, 5)),), {"n": 2, "prepend": 2})),
         callables=(np.diff,))
register(Primitive("getitem", operator.getitem, "ra.getitem", ("x", "index"), diff=("x",),
                   kind="index",
                   sample=lambda r: ((_u(r, (5, 4)), (slice(1, 4), [0, 2, 2])), {})))
register(Primitive("setitem", ra.setitem, "ra.setitem", ("x", "index", "v"), diff=("x", "v"),
                   kind="index",
                   # (a repeated position: only its last write stays, test_repeated_writes)
                   sample=lambda r: ((_u(r, (5, 4)), (slice(1, 3), [2, 0, 2]), _u(r, (3,))),
                                     {})))
# np.add.at (and np.subtract.at, adding -v): the frontend writes
# x[...] = scatter_add(x, indices, v)
register(Primitive("scatter_add", ra.scatter_add, "ra.scatter_add", ("x", "indices", "v"),
                   diff=("x", "v"), kind="index",
                   sample=lambda r: ((_u(r, (5, 4)), ([0, 3, 0, 0], slice(1, 3)),
                                      _u(r, (4, 2))), {})))
register(Primitive("item", ra.item, "ra.item", ("a", "*args"), diff=("a",), kind="index",
                   method="item", sample=lambda r: ((_u(r), 5), {})))

# More of the NumPy surface (Autograd's and jax.numpy's lists).
if hasattr(np, "row_stack"):          # vstack's alias, removed in NumPy 2.5
    BY_CALLABLE.setdefault(id(np.row_stack), REGISTRY["vstack"])
register(Primitive("rollaxis", np.rollaxis, "np.rollaxis", ("a", "axis", "start"), {"start": 0},
                   diff=("a",), kind="shape", sample=lambda r: ((_u(r, (2, 3, 4)), 2), {})))
register(Primitive("partition", np.partition, "np.partition",
                   ("a", "kth", "axis", "kind", "order"),
                   {"axis": -1, "kind": "introselect", "order": None}, diff=("a",), kind="index",
                   sample=lambda r: ((_u(r), 2), {"axis": 1})))
register(Primitive("argpartition", np.argpartition, "np.argpartition",
                   ("a", "kth", "axis", "kind", "order"),
                   {"axis": -1, "kind": "introselect", "order": None}, kind="index",
                   method="argpartition", reason=_ND + "integer index result"))
register(Primitive("np_append", np.append, "np.append", ("arr", "values", "axis"), {"axis": None},
                   diff=("arr", "values"), kind="shape",
                   sample=lambda r: ((_u(r), _u(r, (2, 4))), {"axis": 0})))
for _name in ("fftshift", "ifftshift"):
    register(Primitive(_name, getattr(np.fft, _name), f"np.fft.{_name}", ("x", "axes"),
                       {"axes": None}, diff=("x",), kind="shape",
                       sample=lambda r: ((_u(r, (3, 5)),), {"axes": -1})))
# np.fft's transforms: linear, their rules transform a (co)tangent with the same or the
# transposed call (helpers: astjax/runtime_fft.py).  The samples cut, pad, reorder
# axes and cover every norm; tests/test_fft.py checks more combinations end to end.
_FFT1 = ("a", "n", "axis", "norm", "out")
_FFT1D = {"n": None, "axis": -1, "norm": None, "out": None}
_FFTN = ("a", "s", "axes", "norm", "out")
_FFTND = {"s": None, "axes": None, "norm": None, "out": None}
for _name, _kwargs, _shape in (
        ("fft", {"n": 4, "norm": "ortho"}, (3, 5)),
        ("ifft", {"n": 7, "axis": 0}, (3, 5)),
        ("rfft", {"n": 5, "norm": "forward"}, (3, 6)),
        ("irfft", {"n": 8}, (3, 5)),
        ("hfft", {"axis": 0, "norm": "ortho"}, (4, 5)),
        ("ihfft", {"n": 7}, (3, 6)),
        ("fft2", {"s": (4, 3)}, (2, 3, 4)),
        ("ifft2", {"axes": (1, 0), "norm": "forward"}, (3, 4)),
        ("rfft2", {"axes": (0, 2)}, (2, 3, 4)),
        ("irfft2", {"s": (3, 5)}, (3, 4)),
        ("fftn", {"s": (3, 3), "axes": (0, 2), "norm": "ortho"}, (2, 3, 4)),
        ("ifftn", {}, (2, 3)),
        ("rfftn", {"norm": "ortho"}, (2, 3, 4)),
        ("irfftn", {"s": (2, 6), "axes": (1, 2)}, (2, 3, 4))):
    _nd = _name.endswith(("2", "n"))
    _defaults = dict(_FFTND, axes=(-2, -1)) if _name.endswith("2") else \
        _FFTND if _nd else _FFT1D
    register(Primitive(_name, getattr(np.fft, _name), f"np.fft.{_name}",
                       _FFTN if _nd else _FFT1, _defaults, diff=("a",), kind="linalg",
                       sample=lambda r, _s=_shape, _k=_kwargs: ((_u(r, _s),), dict(_k))))
for _name in ("fftfreq", "rfftfreq"):
    register(Primitive(_name, getattr(np.fft, _name), f"np.fft.{_name}", ("n", "d", "device"),
                       {"d": 1.0, "device": None}, kind="creation",
                       reason=_ND + "builds a constant array", refuse=("d",)))
# Piecewise constant for real input (0 or pi): a zero derivative, as jnp.angle.
register(Primitive("angle", np.angle, "np.angle", ("z", "deg"), {"deg": False}, diff=("z",),
                   kind="elementwise", sample=lambda r: ((_u(r),), {})))
register(Primitive("real_if_close", np.real_if_close, "np.real_if_close", ("a", "tol"),
                   {"tol": 100}, diff=("a",), kind="elementwise",
                   sample=lambda r: ((_u(r),), {})))
# nan, posinf, neginf replace non-finite entries: the derivative flows to them there.
register(Primitive("nan_to_num", np.nan_to_num, "np.nan_to_num",
                   ("x", "copy", "nan", "posinf", "neginf"),
                   {"copy": True, "nan": 0.0, "posinf": None, "neginf": None},
                   diff=("x", "nan", "posinf", "neginf"), kind="elementwise",
                   sample=lambda r: ((np.where(_u(r) > 1.0, np.nan, _u(r)),), {"nan": 0.5})))
register(Primitive("divmod", np.divmod, "np.divmod", ("x", "y"), diff=("x", "y"),
                   kind="elementwise",
                   sample=lambda r: ((_u(r) * 3, _pos(r, (4,))), {})), callables=(divmod,))
register(Primitive("modf", np.modf, "np.modf", ("x",), diff=("x",), kind="elementwise",
                   sample=lambda r: ((_u(r) * 3,), {})))
register(Primitive("np_select", np.select, "np.select", ("condlist", "choicelist", "default"),
                   {"default": 0}, diff=("choicelist", "default"), kind="elementwise",
                   sample=lambda r: (([_u(r) > 0.5, _u(r, (4,)) > 0], [_u(r), _u(r, (4,))],
                                      _u(r, (3, 1))), {})))
# np.gradient: linear in f; its spacing arguments are refused when differentiated.
register(Primitive("gradient", np.gradient, "np.gradient", ("f", "*varargs", "axis", "edge_order"),
                   {"axis": None, "edge_order": 1}, diff=("f", "*varargs"), kind="shape",
                   sample=lambda r: ((_u(r, (4, 5)),), {"edge_order": 2})))
register(Primitive("ptp", np.ptp, "np.ptp", ("a", "axis", "out", "keepdims"),
                   {"axis": None, "out": None, "keepdims": False}, diff=("a",), kind="reduction",
                   sample=lambda r: ((_u(r),), {"axis": 1})))
register(Primitive("median", np.median, "np.median",
                   ("a", "axis", "out", "overwrite_input", "keepdims"),
                   {"axis": None, "out": None, "overwrite_input": False, "keepdims": False},
                   diff=("a",), kind="reduction", sample=lambda r: ((_u(r),), {"axis": 0})))
# copysign: |x| with y's sign (JAX: slope sign(x) * copysign(1, y), 0 at x == 0; none
# in y); heaviside: 0 / x2 / 1 (slope 1 in x2 where x1 == 0).
_binary("copysign", np.copysign, _bc)
_binary("heaviside", np.heaviside, _bc)
for _name in ("convolve", "correlate"):
    register(Primitive(_name, getattr(np, _name), f"np.{_name}", ("a", "v", "mode"),
                       {"mode": "full" if _name == "convolve" else "valid"}, diff=("a", "v"),
                       kind="linalg", sample=lambda r: ((_u(r, (5,)), _u(r, (3,))),
                                                        {"mode": "same"})))
# NaN-ignoring reductions: NaN entries get a zero cotangent.
register(Primitive("nanvar", np.nanvar, "np.nanvar", _VAR, _VARD, diff=("a",), kind="reduction",
                   sample=lambda r: ((_with_nan(r),), {"axis": 1, "ddof": 1})))
register(Primitive("nanstd", np.nanstd, "np.nanstd", _VAR, _VARD, diff=("a",), kind="reduction",
                   sample=lambda r: ((_with_nan(r),), {"axis": 0, "keepdims": True})))
register(Primitive("nanprod", np.nanprod, "np.nanprod", _RED, _RED_D, diff=("a",),
                   kind="reduction", sample=lambda r: ((_with_nan(r),), {"axis": 1})))
register(Primitive("nancumsum", np.nancumsum, "np.nancumsum", _CUM, _CUMD, diff=("a",),
                   kind="reduction", sample=lambda r: ((_with_nan(r),), {"axis": 1})))
# np.quantile/np.percentile (method "linear"): interpolation weights of the two sorted
# elements; q (the level) is not differentiated: refused when it is.
_Q = ("a", "q", "axis", "out", "overwrite_input", "method", "keepdims", "weights")
_QD = {"axis": None, "out": None, "overwrite_input": False, "method": "linear",
       "keepdims": False, "weights": None}
# (samples with integer levels: a float level is a differentiated argument, refused;
# tests/test_surface.py checks float levels end to end)
register(Primitive("quantile", np.quantile, "np.quantile", _Q, _QD, diff=("a", "q"),
                   kind="reduction",
                   sample=lambda r: ((_u(r, (3, 5)), np.array([0, 1])), {"axis": 1})))
register(Primitive("percentile", np.percentile, "np.percentile", _Q, _QD, diff=("a", "q"),
                   kind="reduction", sample=lambda r: ((_u(r, (3, 5)), 30), {"axis": 0})))
register(Primitive("average", np.average, "np.average",
                   ("a", "axis", "weights", "returned", "keepdims"),
                   {"axis": None, "weights": None, "returned": False, "keepdims": False},
                   diff=("a", "weights"), kind="reduction",
                   sample=lambda r: ((_u(r),), {"axis": 1, "weights": _pos(r, (4,))})))
# NumPy 2's array-API spellings in numpy.linalg (keyword-only options; matrices and
# vectors along the last axes).
register(Primitive("linalg_trace", np.linalg.trace, "np.linalg.trace", ("x", "offset", "dtype"),
                   {"offset": 0, "dtype": None}, diff=("x",), kind="reduction",
                   sample=lambda r: ((_u(r, (2, 3, 4)),), {"offset": 1})))
register(Primitive("linalg_diagonal", np.linalg.diagonal, "np.linalg.diagonal", ("x", "offset"),
                   {"offset": 0}, diff=("x",), kind="shape",
                   sample=lambda r: ((_u(r, (2, 4, 3)),), {"offset": -1})))
register(Primitive("linalg_cross", np.linalg.cross, "np.linalg.cross", ("x1", "x2", "axis"),
                   {"axis": -1}, diff=("x1", "x2"), kind="linalg",
                   sample=lambda r: ((_u(r, (3, 2)), _u(r, (3, 1))), {"axis": 0})))
register(Primitive("matrix_norm", np.linalg.matrix_norm, "np.linalg.matrix_norm",
                   ("x", "keepdims", "ord"), {"keepdims": False, "ord": "fro"}, diff=("x",),
                   kind="reduction", sample=lambda r: ((_u(r, (2, 3, 4)),), {})))
register(Primitive("cumulative_sum", np.cumulative_sum, "np.cumulative_sum",
                   ("x", "axis", "dtype", "out", "include_initial"),
                   {"axis": None, "dtype": None, "out": None, "include_initial": False},
                   diff=("x",), kind="reduction",
                   sample=lambda r: ((_u(r),), {"axis": 1, "include_initial": True})))
register(Primitive("multi_dot", np.linalg.multi_dot, "np.linalg.multi_dot", ("arrays", "out"),
                   {"out": None}, diff=("arrays",), kind="linalg",
                   sample=lambda r: (([_u(r, (3,)), _u(r, (3, 4)), _u(r, (4, 2))],), {})))
register(Primitive("ediff1d", np.ediff1d, "np.ediff1d", ("ary", "to_end", "to_begin"),
                   {"to_end": None, "to_begin": None}, diff=("ary", "to_end", "to_begin"),
                   kind="shape",
                   sample=lambda r: ((_u(r, (2, 3)),), {"to_end": _u(r, (2,)), "to_begin": 1.5})))
# np.cov: differentiated in m; y and the weights are refused (ra.cov_scale).
register(Primitive("cov", np.cov, "np.cov",
                   ("m", "y", "rowvar", "bias", "ddof", "fweights", "aweights", "dtype"),
                   {"y": None, "rowvar": True, "bias": False, "ddof": None, "fweights": None,
                    "aweights": None, "dtype": None}, diff=("m",), kind="reduction",
                   sample=lambda r: ((_u(r, (3, 5)),), {})))
# np.corrcoef: differentiated in x (y refused, as for np.cov: ra.cov_scale)
register(Primitive("corrcoef", np.corrcoef, "np.corrcoef", ("x", "y", "rowvar", "dtype"),
                   {"y": None, "rowvar": True, "dtype": None}, diff=("x",), kind="reduction",
                   sample=lambda r: ((_u(r, (3, 5)),), {})))
# np.interp: in x (piecewise linear; at a knot the interval to its right, as JAX), fp,
# left and right; xp and period refused.
register(Primitive("interp", np.interp, "np.interp", ("x", "xp", "fp", "left", "right", "period"),
                   {"left": None, "right": None, "period": None},
                   diff=("x", "xp", "fp", "left", "right"), kind="elementwise",
                   # (integer knots: float knots are a differentiated xp, refused)
                   sample=lambda r: ((np.array([[-0.3, 0.2, 0.7], [1.1, 3.9, 4.4]]),
                                      np.array([0, 1, 3, 4]), _u(r, (4,))),
                                     {"left": -1.5, "right": _u(r, ())})))
register(Primitive("matrix_power", np.linalg.matrix_power, "np.linalg.matrix_power",
                   ("a", "n"), diff=("a",), kind="linalg",
                   sample=lambda r: ((_u(r, (2, 3, 3)) * 0.5, 3), {})))
register(Primitive("polyval", np.polyval, "np.polyval", ("p", "x"), diff=("p", "x"),
                   kind="elementwise", sample=lambda r: ((_u(r, (4,)), _u(r, (2, 3))), {})))

# ---------------------------------------------------------------------------
# Creation and conversion
# ---------------------------------------------------------------------------

for _name, _params, _defaults in (
        ("zeros", ("shape", "dtype", "order"), {"dtype": None, "order": "C"}),
        ("ones", ("shape", "dtype", "order"), {"dtype": None, "order": "C"}),
        ("empty", ("shape", "dtype", "order"), {"dtype": None, "order": "C"}),
        ("np_zeros_like", ("a", "dtype", "order", "subok", "shape"),
         {"dtype": None, "order": "K", "subok": True, "shape": None}),
        ("np_ones_like", ("a", "dtype", "order", "subok", "shape"),
         {"dtype": None, "order": "K", "subok": True, "shape": None}),
        ("empty_like", ("prototype", "dtype", "order", "subok", "shape"),
         {"dtype": None, "order": "K", "subok": True, "shape": None}),
        ("arange", ("start", "stop", "step", "dtype"), {"stop": None, "step": 1, "dtype": None}),
        ("eye", ("N", "M", "k", "dtype", "order"),
         {"M": None, "k": 0, "dtype": float, "order": "C"}),
        ("identity", ("n", "dtype"), {"dtype": None}),
        ("tri", ("N", "M", "k", "dtype"), {"M": None, "k": 0, "dtype": float}),
        ("indices", ("dimensions", "dtype", "sparse"), {"dtype": int, "sparse": False})):
    _np_name = _name[3:] if _name.startswith("np_") else _name
    register(Primitive(_name, getattr(np, _np_name), f"np.{_np_name}", _params, _defaults,
                       kind="creation", reason=_ND + "builds a constant array",
                       refuse={"arange": ("start", "step")}.get(_name, ())))
# Differentiable in every coordinate vector: output k is input k along one axis.
register(Primitive("meshgrid", np.meshgrid, "np.meshgrid", ("*xi", "copy", "sparse", "indexing"),
                   {"copy": True, "sparse": False, "indexing": "xy"}, diff=("*xi",),
                   kind="shape",
                   sample=lambda r: ((_u(r, (3,)), _u(r, (2,)), _u(r, (4,))), {})))
# Differentiable in their endpoints (and the base): sample k of linspace is
# start * (1 - w_k) + stop * w_k, with w_k = k / (num - 1) (k / num without endpoint).
register(Primitive("linspace", np.linspace, "np.linspace",
                   ("start", "stop", "num", "endpoint", "retstep", "dtype", "axis"),
                   {"num": 50, "endpoint": True, "retstep": False, "dtype": None, "axis": 0},
                   diff=("start", "stop"), kind="creation",
                   sample=lambda r: ((_u(r, (2,)), 1.5), {"num": 5, "axis": -1})))
register(Primitive("logspace", np.logspace, "np.logspace",
                   ("start", "stop", "num", "endpoint", "base", "dtype", "axis"),
                   {"num": 50, "endpoint": True, "base": 10.0, "dtype": None, "axis": 0},
                   diff=("start", "stop", "base"), kind="creation",
                   sample=lambda r: ((_u(r, (2,)) * 0.5, 0.7), {"num": 4, "base": 3.0})))
register(Primitive("full", np.full, "np.full", ("shape", "fill_value", "dtype", "order"),
                   {"dtype": None, "order": "C"}, diff=("fill_value",), kind="creation",
                   sample=lambda r: (((3, 4), 1.5), {})))
register(Primitive("full_like", np.full_like, "np.full_like",
                   ("a", "fill_value", "dtype", "order", "subok", "shape"),
                   {"dtype": None, "order": "K", "subok": True, "shape": None},
                   diff=("fill_value",), kind="creation",
                   sample=lambda r: ((_u(r), _u(r, (4,))), {})))
register(Primitive("array", np.array, "np.array",
                   ("object", "dtype", "copy", "order", "subok", "ndmin"),
                   {"dtype": None, "copy": True, "order": "K", "subok": False, "ndmin": 0},
                   diff=("object",), kind="creation",
                   sample=lambda r: (([_u(r, (3,)), _u(r, (3,))],), {"ndmin": 3})))
register(Primitive("asarray", np.asarray, "np.asarray", ("a", "dtype", "order", "copy"),
                   {"dtype": None, "order": None, "copy": None}, diff=("a",), kind="creation",
                   sample=lambda r: (([[0.5, _u(r, ())], [1.5, -2.0]],), {})),
         callables=(np.asanyarray, np.ascontiguousarray, np.asfortranarray))
register(Primitive("copy", np.copy, "np.copy", ("a", "order", "subok"),
                   {"order": "K", "subok": False}, diff=("a",), kind="creation", method="copy",
                   sample=lambda r: ((_u(r),), {})))
register(Primitive("astype", ra.astype, "ra.astype",
                   ("x", "dtype", "order", "casting", "subok", "copy"),
                   {"order": "K", "casting": "unsafe", "subok": True, "copy": True},
                   diff=("x",), kind="creation", method="astype",
                   sample=lambda r: ((_u(r), "float64"), {})),
         callables=_names(np, "astype"))
register(Primitive("py_float", ra.py_float, "ra.py_float", ("x",), diff=("x",),
                   kind="creation", sample=lambda r: ((_u(r, ()),), {})))
register(Primitive("py_int", ra.py_int, "ra.py_int", ("x", "base"), {"base": 10},
                   kind="creation", reason=_ND + "integer result"))
register(Primitive("py_round", ra.py_round, "ra.py_round", ("number", "ndigits"),
                   {"ndigits": None}, diff=("number",), kind="elementwise",
                   sample=lambda r: ((1.2345,), {"ndigits": 2})))

# np.r_[...] / np.c_[...]: the frontend writes ra.index_concat("r" or "c", *items).
register(Primitive("index_concat", ra.index_concat, "ra.index_concat", ("which", "*items"),
                   diff=("*items",), kind="shape",
                   sample=lambda r: (("r", _u(r, (3,)), 1.5, _u(r, (2,))), {})))

# ---------------------------------------------------------------------------
# Static facts
# ---------------------------------------------------------------------------

register(Primitive("shape", np.shape, "np.shape", ("a",), kind="static", attribute="shape",
                   reason=_ND + "a static shape"))
# np.shape(x) as a call (x.shape is the attribute spelling above): templates call it on
# operands that may be Python scalars, where generated code must not write ``x.shape``.
register(Primitive("np_shape", np.shape, "np.shape", ("a",), kind="static",
                   reason=_ND + "a static shape"))
BY_CALLABLE[id(np.shape)] = REGISTRY["np_shape"]
register(Primitive("ndim", np.ndim, "np.ndim", ("a",), kind="static", attribute="ndim",
                   reason=_ND + "a static rank"))
register(Primitive("size", np.size, "np.size", ("a", "axis"), {"axis": None}, kind="static",
                   attribute="size", reason=_ND + "a static size"))
register(Primitive("dtype", ra.dtype_of, "ra.dtype_of", ("x",), kind="static",
                   attribute="dtype", reason=_ND + "a static dtype"))
register(Primitive("len", ra.py_len, "ra.py_len", ("obj",), kind="static",
                   reason=_ND + "a static length"))

# ---------------------------------------------------------------------------
# Python builtins on scalars and sequences
# ---------------------------------------------------------------------------

register(Primitive("py_sum", ra.py_sum, "ra.py_sum", ("iterable", "start"), {"start": 0},
                   diff=("iterable", "start"), kind="reduction",
                   sample=lambda r: (([_u(r, (3,)), 2.0, _u(r, (2, 3))], _u(r, (3,))), {})))
register(Primitive("py_max", ra.py_max, "ra.py_max", ("*args", "key"), {"key": None},
                   diff=("*args",), kind="reduction", sample=lambda r: ((0.3, 1.2, -0.5), {})))
register(Primitive("py_min", ra.py_min, "ra.py_min", ("*args", "key"), {"key": None},
                   diff=("*args",), kind="reduction",
                   sample=lambda r: (([0.3, 1.2, -0.5],), {})))
register(Primitive("math_log", ra.math_log, "ra.math_log", ("x", "base"), {"base": None},
                   diff=("x", "base"), kind="elementwise",
                   sample=lambda r: ((_pos(r), 3.0), {})),
         callables=(math.log,))

# ---------------------------------------------------------------------------
# Runtime helpers that rule templates call (astjax/runtime_array.py)
# ---------------------------------------------------------------------------


def _einsum_multi_sample(rng):
    """np.einsum's cotangent plan: second-order terms with identity and ones factors."""
    ops = ("iij,jk->ik", _u(rng, (3, 3, 4)), _u(rng, (4, 2)))
    plan = ra.einsum_plan(ops)
    return (ra.einsum_plans_t(plan, ops), (_u(rng, (3, 2)), ops)), {}



def _helper(name, params, defaults=None, diff=(), kind="other", sample=None, reason="",
            meta=()):
    register(Primitive(name, getattr(ra, name), f"ra.{name}", params, defaults or {}, diff=diff,
                       kind=kind, sample=sample, reason=reason, meta=meta))


_helper("real_only", ("value", "x", "what"), diff=("value",),
        sample=lambda r: ((_u(r), _u(r, (2, 2)), "np.linalg.cholesky"), {}), meta=("x",))
_helper("unbroadcast", ("t", "x"), diff=("t",),
        sample=lambda r: ((_u(r, (2, 3, 4)), _u(r, (3, 1))), {}), meta=("x",))
_helper("broadcast_like", ("t", "x"), diff=("t",),
        sample=lambda r: ((_u(r, (3, 1)), _u(r, (2, 3, 4))), {}), meta=("x",))
_helper("unreduce", ("t", "x", "axis", "keepdims"), {"axis": None, "keepdims": False},
        diff=("t",), sample=lambda r: ((_u(r, (3,)), _u(r, (3, 4)), 1, False), {}), meta=("x",))
_helper("clip_part", ("t", "a", "a_min", "a_max", "min", "max", "which"),
        {"a_min": None, "a_max": None, "min": None, "max": None, "which": 0}, diff=("t",),
        sample=lambda r: ((_u(r), _u(r), -0.5, _u(r, (4,)) + 0.5), {"which": 1}))
_helper("fold_axes", ("x", "axis"), {"axis": None}, diff=("x",),
        sample=lambda r: ((_u(r, (2, 3, 4)), (0, 2)), {}))
_helper("unfold_axes", ("t", "x", "axis"), {"axis": None}, diff=("t",),
        sample=lambda r: ((_u(r, (3, 8)), _u(r, (2, 3, 4)), (0, 2)), {}))
_helper("prod_others_last", ("a",), diff=("a",), sample=lambda r: ((_with_zero(r),), {}))
_helper("diagonal_vjp", ("t", "x", "offset", "axis1", "axis2"),
        {"offset": 0, "axis1": 0, "axis2": 1}, diff=("t",),
        sample=lambda r: ((_u(r, (4, 2)), _u(r, (3, 4, 5))), {"offset": -1, "axis2": 2}))
_helper("diag_vjp", ("t", "v", "k"), {"k": 0}, diff=("t",),
        sample=lambda r: ((_u(r, (4, 4)), _u(r, (3,)), 1), {}))
_helper("tile_vjp", ("t", "A", "reps"), diff=("t",),
        sample=lambda r: ((_u(r, (2, 2, 6)), _u(r, (2, 3)), (2, 1, 2)), {}))
_helper("repeat_vjp", ("t", "a", "repeats", "axis"), {"axis": None}, diff=("t",),
        sample=lambda r: ((_u(r, (12,)), _u(r, (2, 3)), 2), {}))
_helper("pad_vjp", ("t", "array", "pad_width", "mode"), {"mode": "constant"}, diff=("t",),
        sample=lambda r: ((_u(r, (5, 6)), _u(r, (3, 4)), 1), {"mode": "wrap"}), meta=("array",))
_helper("take_vjp", ("t", "a", "indices", "axis", "mode"), {"axis": None, "mode": "raise"},
        diff=("t",), sample=lambda r: ((_u(r, (3,)), _u(r), [1, 1, 7]), {}), meta=("a",))
_helper("take_along_axis_vjp", ("t", "arr", "indices", "axis"), {"axis": -1}, diff=("t",),
        sample=lambda r: ((_u(r, (2, 4)), _u(r), np.array([[0, 1, 2, 0], [2, 2, 1, 0]]), 0),
                          {}))
_helper("diff_vjp", ("t", "a", "n", "axis", "prepend", "append"),
        {"n": 1, "axis": -1, "prepend": None, "append": None}, diff=("t",),
        sample=lambda r: ((_u(r, (3, 4)), _u(r, (3, 4))), {"append": 1.0}))
_helper("diff_vjp_adj", ("s", "a", "n", "axis", "prepend", "append"),
        {"n": 1, "axis": -1, "prepend": None, "append": None}, diff=("s",),
        sample=lambda r: ((_u(r, (3, 4)), _u(r, (3, 4))), {"append": 1.0}))
_helper("concat_vjp", ("t", "arrays", "axis", "how"), {"axis": 0, "how": "concatenate"},
        diff=("t",), sample=lambda r: ((_u(r, (3, 6)), [_u(r, (3, 2)), _u(r, (3, 4))], 1), {}))
_helper("concat_cots", ("ts", "arrays", "axis", "how"), {"axis": 0, "how": "concatenate"},
        diff=("ts",),
        sample=lambda r: (([_u(r, (4,)), None], [_u(r, (4,)), _u(r, (2, 4))], 0, "vstack"), {}))
_helper("unpack_variadic", ("t", "xs"), diff=("t",),
        sample=lambda r: (((_u(r, (1, 3)), _u(r, (2, 2))), (_u(r, (3,)), _u(r, (2, 2)))), {}))
_helper("pack_variadic", ("ts", "t"), diff=("ts",),
        sample=lambda r: (([_u(r, (3,)), None], (_u(r, (1, 3)), _u(r, (2, 2)))), {}))
_helper("scatter_tangent", ("t", "indices", "tv", "like"), diff=("t", "tv"),
        sample=lambda r: ((_u(r, (5, 4)), ([1, 1, 4], 2), _u(r, (3,)), _u(r, (5, 4))), {}),
        meta=("like",))
_helper("lstsq_weight", ("t", "res", "b"), diff=("t",), meta=("res", "b"),
        sample=lambda r: ((_u(r, (2,)), _u(r, (2,)), _u(r, (5, 2))), {}))
_helper("lstsq_weight_t", ("w", "res", "b"), diff=("w",), meta=("res", "b"),
        sample=lambda r: ((_u(r, (2,)), _u(r, (2,)), _u(r, (5, 2))), {}))
_helper("meshgrid_cots", ("t", "xi", "sparse", "indexing"), {"sparse": False, "indexing": "xy"},
        diff=("t",), sample=lambda r: (((_u(r, (3, 2)), None), (_u(r, (2,)), _u(r, (3,)))),
                                       {}))
_helper("meshgrid_of", ("ts", "xi", "sparse", "indexing"), {"sparse": False, "indexing": "xy"},
        diff=("ts",), sample=lambda r: (([None, _u(r, (3,)), _u(r, (2,))],
                                         (_u(r, (4,)), _u(r, (3,)), _u(r, (2,))), True, "ij"),
                                        {}))
_helper("asarray_vjp", ("t", "a"), diff=("t",),
        sample=lambda r: ((_u(r, (1, 2, 3)), [_u(r, (3,)), [1.0, 2.0, 3.0]]), {}))
_helper("pack_cots", ("ts", "x"), diff=("ts",),
        sample=lambda r: (([_u(r, (3,)), None, [0.5, 1.5, 2.5]], _u(r, (1, 3, 3))), {}))
_helper("cast_like", ("t", "x"), diff=("t",),
        sample=lambda r: ((_u(r), _u(r)), {}), meta=("x",))
for _name in ("zero_if_integer", "none_if_integer"):
    _helper(_name, ("t", "x"), diff=("t",), sample=lambda r: ((_u(r), _u(r)), {}),
            meta=("x",))
_helper("chol_lower", ("x", "upper"), {"upper": False}, diff=("x",),
        sample=lambda r: ((_u(r, (2, 3, 3)), True), {}))
_helper("getitem_vjp", ("t", "x", "index"), diff=("t",),
        sample=lambda r: ((_u(r, (3, 2)), _u(r, (5, 4)), (np.array([0, 2, 0]), slice(1, 3))),
                          {}), meta=("x",))
_helper("setitem_zero", ("t", "index"), diff=("t",),
        sample=lambda r: ((_u(r, (5, 4)), (slice(None), [0, 2, 2])), {}))
_helper("cot_or_zeros", ("t", "like"), diff=("t",), sample=lambda r: ((_u(r), _u(r)), {}),
        meta=("like",))
_helper("py_sum_vjp", ("t", "iterable"), diff=("t",),
        sample=lambda r: ((_u(r, (2, 3)), [_u(r, (3,)), 1.0, _u(r, (2, 3))]), {}))
_helper("sum_cots", ("ts", "x"), diff=("ts",),
        sample=lambda r: (([_u(r, (3,)), None, _u(r, (2, 3))], _u(r, (2, 3))), {}))
def _max_sample(first):
    def sample(rng):
        chosen = 1.0 + rng.uniform()
        return (first(rng), chosen, ([0.5, chosen, -2.0],)), {}
    return sample


_helper("py_max_vjp", ("t", "chosen", "args"), diff=("t",),
        sample=_max_sample(lambda r: float(r.standard_normal())))
_helper("py_max_pick", ("ts", "chosen", "args"), diff=("ts",),
        sample=_max_sample(lambda r: [[None, float(r.standard_normal()), None]]))
_helper("norm_vjp", ("t", "x", "ord", "axis", "keepdims"),
        {"ord": None, "axis": None, "keepdims": False}, diff=("t", "x"),
        sample=lambda r: ((_u(r, (3,)), _u(r)), {"axis": 1}))
# Second-order pieces: their own rules raise NotImplementedError for the parts a
# third derivative would need (loud, never a silent zero).
_helper("norm_vjp_t", ("s", "x", "ord", "axis", "keepdims"),
        {"ord": None, "axis": None, "keepdims": False}, diff=("s", "x"),
        sample=lambda r: ((_u(r), _u(r)), {}))
_helper("norm_vjp_x", ("s", "t", "x", "ord", "axis", "keepdims"),
        {"ord": None, "axis": None, "keepdims": False}, diff=("s", "t", "x"),
        sample=lambda r: ((_u(r), _u(r, (3,)), _u(r)), {"axis": 1}))
_helper("log_or_one", ("base",), diff=("base",), sample=lambda r: ((3.0,), {}))
_helper("or_one", ("base",), diff=("base",), sample=lambda r: ((3.0,), {}))
_helper("unsupported", ("what",), reason=_ND + "raises NotImplementedError")
# Masks (piecewise constant) and static facts about shapes and axes.
_helper("extremum_weights", ("a", "ans", "axis", "keepdims"), {"axis": None, "keepdims": False},
        kind="compare", reason=_ND + "a piecewise-constant mask")
_helper("max_weight", ("x", "y", "like"), {"like": None}, kind="compare",
        reason=_ND + "a piecewise-constant mask")
for _name in ("fmax_weight", "fmin_weight"):
    _helper(_name, ("x", "y", "like"), {"like": None}, kind="compare",
            reason=_ND + "a piecewise-constant mask")
_helper("eye_last", ("x",), kind="creation", reason=_ND + "builds a constant array")
for _name, _params, _defaults in (
        ("reduced_size", ("x", "axis"), {"axis": None}),
        ("cum_axis", ("axis",), {}),
        ("tensordot_plan", ("a", "b", "axes", "which"), {"axes": 2, "which": 0}),
        ("dot_axes", ("a", "b"), {}),
        ("inner_axes", ("a", "b"), {}),
        ("matmul_shape", ("x", "y", "which"), {"which": 0}),
        ("kron_plan", ("a", "b", "which"), {"which": 0}),
        ("inverse_perm", ("axes", "ndim"), {}),
        ("neg_shift", ("shift",), {}),
        ("col_shape", ("x", "b"), {}),
        ("item_index", ("a", "args"), {})):
    _helper(_name, _params, _defaults, kind="static", reason=_ND + "a static fact about shapes")

# Extra spellings of registered primitives.
# x.conj() / x.conjugate(): the method returns x itself for a real array (np.conj
# makes a new one), which the aliasing analysis must know (transforms/aliasing.py)
register(Primitive("conj_method", ra.conj_method, "ra.conj_method", ("x",), diff=("x",),
                   kind="elementwise", sample=lambda r: ((_u(r),), {})))
BY_METHOD["conj"] = BY_METHOD["conjugate"] = REGISTRY["conj_method"]

_helper("dot_grad_a", ("t", "a", "b"), diff=("t", "b"),
        sample=lambda r: ((_u(r, (3, 2)), _u(r, (3, 4)), _u(r, (4, 2))), {}))
_helper("dot_grad_b", ("t", "a", "b"), diff=("t", "a"),
        sample=lambda r: ((_u(r, (3, 2)), _u(r, (3, 4)), _u(r, (4, 2))), {}))
_helper("add_cot", ("t", "x", "y", "which"), {"which": 0}, diff=("t",),
        sample=lambda r: ((_u(r, (3, 4)), _u(r, (3, 4)), _u(r, (4,))), {"which": 1}),
        meta=("x", "y"))
_helper("add_cot_vjp", ("s", "t", "x", "y", "which"), {"which": 0}, diff=("s",),
        sample=lambda r: ((_u(r, (4,)), _u(r, (3, 4)), _u(r, (3, 4)), _u(r, (4,))),
                          {"which": 1}), meta=("t", "x", "y"))

# Forward-mode helpers (templates/jvp.py); their own rules make forward code
# differentiable again.  The second-order pieces at the end are not differentiable:
# a third derivative through them is refused, never a silent zero.
_helper("tangent_like", ("t", "like"), diff=("t",),
        sample=lambda r: ((_u(r, (4,)), _u(r)), {}), meta=("like",))
_helper("tangent_like_vjp", ("s", "t", "like"), diff=("s",),
        sample=lambda r: ((_u(r), _u(r, (4,)), _u(r)), {}), meta=("t", "like"))
_helper("getitem_jvp", ("t", "x", "index"), diff=("t",),
        sample=lambda r: ((_u(r, (5, 4)), _u(r, (5, 4)), (slice(1, 4), [0, 2, 2])), {}),
        meta=("x",))
_helper("setitem_jvp", ("t", "index", "tv", "x"), diff=("t", "tv"),
        sample=lambda r: ((_u(r, (5, 4)), (slice(1, 3), [2, 0, 2]), _u(r, (3,)), _u(r, (5, 4))),
                          {}),
        meta=("x",))
_helper("sum_tangents", ("ts",), diff=("ts",),
        sample=lambda r: (([_u(r, (3,)), None, _u(r, (2, 3))],), {}))
_helper("pad_jvp", ("t", "pad_width", "mode"), {"mode": "constant"}, diff=("t",),
        sample=lambda r: ((_u(r), ((1, 2), (0, 3)), "reflect"), {}))
_helper("norm_jvp", ("t", "x", "ord", "axis", "keepdims"),
        {"ord": None, "axis": None, "keepdims": False}, diff=("t", "x"),
        sample=lambda r: ((_u(r), _u(r)), {"axis": 1}))
_helper("norm_hvp", ("s", "t", "x", "ord", "axis", "keepdims"),
        {"ord": None, "axis": None, "keepdims": False},
        reason="third derivatives of np.linalg.norm are not implemented")
_helper("unsupported_jvp", ("what", "*tangents"), reason=_ND + "raises NotImplementedError")

# The NumPy surface: helpers of np.r_/np.c_, linspace, eigh.
_helper("index_concat_vjp", ("t", "which", "items"), diff=("t",),
        sample=lambda r: ((_u(r, (4, 3)), "c", [_u(r, (4,)), _u(r, (4, 2))]), {}))
_helper("index_concat_jvp", ("ts", "which", "items"), diff=("ts",),
        sample=lambda r: (([None, _u(r, (2, 3)), None, _u(r, (1, 3))],
                           "r", ["0,2", _u(r, (2, 3)), np.arange(3), _u(r, (1, 3))]), {}))
_helper("linspace_weights", ("ans", "num", "endpoint", "retstep", "axis"),
        {"endpoint": True, "retstep": False, "axis": 0}, kind="creation",
        reason=_ND + "builds a constant array")
_helper("uplo_t", ("x", "UPLO"), {"UPLO": "L"}, diff=("x",),
        sample=lambda r: ((_u(r, (2, 3, 3)), "U"), {}))
_helper("svd_parts", ("t", "compute_uv"), {"compute_uv": True}, diff=("t",),
        sample=lambda r: (((_u(r, (3, 3)), None, _u(r, (3, 2))), True), {}))
_helper("svd_pack", ("ts", "compute_uv"), {"compute_uv": True}, diff=("ts",),
        sample=lambda r: (((None, _u(r, (3,)), None), False), {}))
_helper("qr_parts", ("t", "a", "mode"), {"mode": "reduced"}, diff=("t",),
        sample=lambda r: ((_u(r, (3, 2)), _u(r, (3, 2)), "r"), {}), meta=("a",))
_helper("qr_pack", ("ts", "a", "mode"), {"mode": "reduced"}, diff=("ts",),
        sample=lambda r: (((_u(r, (3, 2)), None), _u(r, (3, 2))), {}), meta=("a",))
_helper("eig_real", ("wv", "w"), {"w": None}, diff=("wv",),
        sample=lambda r: (((_u(r, (3,)), _u(r, (3, 3))),), {}))
_helper("real_parts", ("t",), diff=("t",),
        sample=lambda r: (((_u(r, (3,)), _u(r, (3, 3))),), {}))
for _name, _params, _defaults in (
        ("svd_index", ("s", "which"), {}),
        ("cross_axes", ("a", "b", "axisa", "axisb", "axisc", "axis", "which"),
         {"axisa": -1, "axisb": -1, "axisc": -1, "axis": None, "which": 0})):
    _helper(_name, _params, _defaults, kind="static", reason=_ND + "a static fact about shapes")
_helper("select_tangent", ("ts", "td", "condlist", "choicelist", "default"), diff=("ts", "td"),
        sample=lambda r: (([_u(r), None], _u(r, (3, 1)), [_u(r) > 0.5, _u(r, (4,)) > 0],
                           [_u(r), _u(r, (4,))], _u(r, (3, 1))), {}))
_helper("select_cot", ("t", "condlist", "choicelist", "default", "which"), {"which": 0},
        diff=("t",), sample=lambda r: ((_u(r), [_u(r) > 0.5, _u(r, (4,)) > 0],
                                        [_u(r), _u(r, (4,))], _u(r, (3, 1)), 0), {}))
_helper("select_cot_t", ("h", "condlist", "choicelist", "default", "which"), {"which": 0},
        diff=("h",), sample=lambda r: (([_u(r), _u(r, (4,))], [_u(r) > 0.5, _u(r, (4,)) > 0],
                                        [_u(r), _u(r, (4,))], _u(r, (3, 1)), 0), {}))
_helper("gradient_vjp", ("t", "f", "varargs", "axis", "edge_order"),
        {"axis": None, "edge_order": 1}, diff=("t",),
        sample=lambda r: (([_u(r, (4, 5)), _u(r, (4, 5))], _u(r, (4, 5)),
                           (2.0, np.array([0.0, 0.5, 1.5, 1.7, 3.0]))), {"edge_order": 2}),
        meta=("f",))
_helper("gradient_list", ("t", "f", "varargs", "axis", "edge_order"),
        {"axis": None, "edge_order": 1}, diff=("t",),
        sample=lambda r: ((_u(r, (4, 5)), _u(r, (4, 5)), (0.5,)), {"axis": 1}), meta=("f",))
_helper("refuse_cotangent", ("what", "xs"), kind="other",
        reason=_ND + "raises UnsupportedDerivativeError for a differentiated argument")
_helper("rollaxis_perm", ("a", "axis", "start"), {"start": 0}, kind="static",
        reason=_ND + "a static fact about shapes")
_helper("refuse_tangents", ("t", "ts"), diff=("t",),
        sample=lambda r: ((_u(r), [None, None]), {}))
_helper("qr_input", ("a", "mode"), {"mode": "reduced"}, diff=("a",),
        sample=lambda r: ((_u(r, (4, 3)),), {}))
_helper("conv_full_cot", ("t", "a", "v", "mode"), {"mode": "full"}, diff=("t",),
        sample=lambda r: ((_u(r, (4,)), _u(r, (4,)), _u(r, (3,)), "same"), {}), meta=("a", "v"))
_helper("conv_full_cut", ("t", "a", "v", "mode"), {"mode": "full"}, diff=("t",),
        sample=lambda r: ((_u(r, (6,)), _u(r, (4,)), _u(r, (3,)), "valid"), {}),
        meta=("a", "v"))
_helper("fft_fit", ("t", "x", "axes"), diff=("t",), meta=("x",),
        sample=lambda r: ((_u(r, (3, 5)), _u(r, (4, 3)), (0, 1)), {}))
_helper("irfft_scale", ("h", "axes", "lengths", "norm"), {"norm": None}, diff=("h",),
        sample=lambda r: ((_u(r, (3, 4)), (1,), (3, 6), "ortho"), {}))
for _name in ("fft_axes", "fft_lengths", "swap_norm"):
    _helper(_name, {"fft_axes": ("a", "s", "axes"),
                    "fft_lengths": ("a", "s", "axes", "inverse_real"),
                    "swap_norm": ("norm",)}[_name],
            {"fft_axes": {"s": None, "axes": None},
             "fft_lengths": {"inverse_real": False}, "swap_norm": {}}[_name],
            kind="static", reason=_ND + "a static fact about shapes")
_helper("median_weights", ("a", "axis", "keepdims"), {"axis": None, "keepdims": False},
        kind="compare", reason=_ND + "a piecewise-constant mask")
_helper("poly_powers", ("p",), kind="creation", reason=_ND + "builds a constant array")
_helper("power_block", ("x", "t", "n"), diff=("x", "t"),
        sample=lambda r: ((_u(r, (3, 3)), _u(r, (3, 3)), 2), {}))
_helper("power_block_index", ("x", "which"), {"which": 2}, kind="static",
        reason=_ND + "a static fact about shapes")
_helper("einsum_multi", ("plan", "groups"), diff=("groups",), kind="linalg",
        sample=lambda r: _einsum_multi_sample(r))
for _name, _params in (("einsum_plan", ("operands",)), ("einsum_plans_t", ("plan", "groups")),
                       ("einsum_plans_j", ("plan", "groups"))):
    _helper(_name, _params, {"groups": None} if "groups" in _params else {}, kind="static",
            reason=_ND + "a static plan of einsums")
_helper("group2", ("a", "b"), diff=("a", "b"), kind="structural",
        sample=lambda r: ((_u(r), [_u(r, (2,)), None]), {}))
_helper("quantile_vjp", ("t", "a", "q", "axis", "keepdims", "method"),
        {"axis": None, "keepdims": False, "method": "linear"}, diff=("t",),
        sample=lambda r: ((_u(r, (2, 3)), _u(r, (3, 5)), np.array([0.2, 0.7]), 1), {}))
_helper("quantile_jvp", ("t", "a", "q", "axis", "keepdims", "method"),
        {"axis": None, "keepdims": False, "method": "linear"}, diff=("t",),
        sample=lambda r: ((_u(r, (3, 5)), _u(r, (3, 5)), 0.4), {"keepdims": True}))
_helper("refuse_value", ("what", "x"), kind="other",
        reason=_ND + "raises UnsupportedDerivativeError for a differentiated argument")
_helper("refuse_tangent", ("t", "what"), kind="other",
        reason=_ND + "raises UnsupportedDerivativeError for a non-zero tangent")
_helper("average_weights", ("weights", "a", "axis", "returned"),
        {"axis": None, "returned": False}, diff=("weights",),
        sample=lambda r: ((_pos(r, (4,)), _u(r), 1), {}), meta=("a",))
_helper("average_weights_lin", ("t", "weights", "a", "axis"), {"axis": None}, diff=("t",),
        sample=lambda r: ((_u(r, (4,)), _pos(r, (4,)), _u(r), 1), {}), meta=("a",))
_helper("average_weights_t", ("t", "weights", "a", "axis"), {"axis": None}, diff=("t",),
        sample=lambda r: ((_u(r), _pos(r, (3, 1)), _u(r)), {}), meta=("a",))
_helper("cumulative_index", ("x", "axis", "include_initial"),
        {"axis": None, "include_initial": False}, kind="static",
        reason=_ND + "a static fact about shapes")
_helper("multi_dot_plan", ("arrays",), kind="static", reason=_ND + "a static plan of einsums")
_helper("ediff1d_index", ("ary", "to_end", "to_begin", "which"),
        {"to_end": None, "to_begin": None, "which": 0}, kind="static",
        reason=_ND + "a static fact about shapes")
_helper("tangent_where", ("t", "x"), diff=("t",), sample=lambda r: ((_u(r, (3,)), _u(r, (3,))), {}))
_helper("ediff1d_lin", ("t", "t_end", "t_begin", "ary", "to_end", "to_begin"),
        {"to_end": None, "to_begin": None}, diff=("t", "t_end", "t_begin"),
        sample=lambda r: ((_u(r, (4,)), None, _u(r, (2,)), _u(r, (4,)), None, _u(r, (2,))), {}))
_helper("cov_rows", ("m", "rowvar"), {"rowvar": True}, diff=("m",),
        sample=lambda r: ((_u(r, (5, 3)), False), {}))
_helper("cov_rows_t", ("t", "m", "rowvar"), {"rowvar": True}, diff=("t",),
        sample=lambda r: ((_u(r, (3, 5)), _u(r, (5, 3)), False), {}), meta=("m",))
_helper("cov_scale", ("x", "y", "bias", "ddof", "fweights", "aweights"),
        {"y": None, "bias": False, "ddof": None, "fweights": None, "aweights": None},
        kind="static", reason=_ND + "a static fact about shapes")
_helper("reduced_shape_of", ("xc",), kind="static", reason=_ND + "a static fact about shapes")
_helper("interp_basis", ("x", "xp", "left", "right", "period"),
        {"left": None, "right": None, "period": None}, diff=("x",),
        sample=lambda r: ((np.array([0.2, 0.7, 1.9]), np.array([0.0, 0.5, 1.5, 2.0])), {}))
_helper("interp_slopes", ("x", "xp", "left", "right", "period"),
        {"left": None, "right": None, "period": None}, kind="compare",
        reason=_ND + "a piecewise-constant mask")
_helper("interp_outside", ("x", "xp", "which"), {"which": 0}, kind="compare",
        reason=_ND + "a piecewise-constant mask")

# ---------------------------------------------------------------------------
# astjax.random: explicit-key samplers (generated code spells them ``jr.*``).  No
# derivative flows into a key (integer data); a sample's own parameters differentiate
# where JAX's do by reparameterization (uniform's minval/maxval, permutation's x);
# samplers whose parameters would need a rule astjax does not have (gamma's a,
# truncated_normal's bounds, choice's a and p, multivariate_normal's mean and cov) are
# refused when one of them is differentiated.  The ``*_batched`` forms are vmap's: the
# batch rides on the trailing axes of the key and of every array operand.
# ---------------------------------------------------------------------------

from astjax import random as _jr  # noqa: E402

_NR = _ND + "a random sample; differentiate a reparameterized form instead " \
    "(e.g. mean + np.linalg.cholesky(cov) @ normal(key, shape))"


def _rkey(r):
    return r.integers(0, 2**32, 2, dtype=np.uint64).astype(np.uint32)


def _spd3(r):
    m = r.standard_normal((3, 3))
    return m @ m.T + 3 * np.eye(3)


# samples of the differentiable samplers (key first; float64 for finite differences)
_RANDOM_SAMPLES = {
    "uniform": lambda r: ((_rkey(r), (3, 4), "float64", _u(r, (4,)), _u(r, (3, 1)) + 4.0),
                          {}),
    "permutation": lambda r: ((_rkey(r), _u(r, (4, 3))), {"axis": 1}),
    "permutation_vjp": lambda r: ((_u(r, (4, 3)), _rkey(r), _u(r, (4, 3))),
                                  {"axis": 0, "independent": True}),
    "truncated_normal": lambda r: ((_rkey(r), r.uniform(-2.0, -0.2, (3,)), 1.5),
                                   {"dtype": "float64"}),
    # the batched forms: two keys (2, 2), operands with a trailing batch axis
    "truncated_normal_batched": lambda r: ((np.stack([_rkey(r), _rkey(r)], -1),
                                            r.uniform(-2.0, -0.2, (3, 2)), 1.5),
                                           {"dtype": "float64"}),
    "uniform_batched": lambda r: ((np.stack([_rkey(r), _rkey(r)], -1), (3, 4), "float64",
                                   _u(r, (4, 1)), _u(r, (3, 1, 2)) + 4.0), {}),
    "permutation_batched": lambda r: ((np.stack([_rkey(r), _rkey(r)], -1),
                                       _u(r, (4, 3, 2))), {"axis": 1}),
    "permutation_vjp_batched": lambda r: ((_u(r, (4, 3, 2)), np.stack([_rkey(r), _rkey(r)],
                                                                      -1), _u(r, (4, 3, 2))),
                                          {"axis": 0}),
    "gamma": lambda r: ((_rkey(r), r.uniform(0.3, 4.0, (3,))), {"dtype": "float64"}),
    "gamma_batched": lambda r: ((np.stack([_rkey(r), _rkey(r)], -1),
                                 r.uniform(0.3, 4.0, (3, 2))), {"dtype": "float64"}),
    "multivariate_normal": lambda r: ((_rkey(r), _u(r, (3,)), _spd3(r)),
                                      {"shape": (2,), "dtype": "float64"}),
    "multivariate_normal_batched": lambda r: ((np.stack([_rkey(r), _rkey(r)], -1),
                                               _u(r, (3, 2)), np.stack([_spd3(r), _spd3(r)],
                                                                       -1)),
                                              {"dtype": "float64"}),
}


def _random(name, params, defaults=None, diff=(), kind="creation", reason="",
            callables=()):
    register(Primitive(f"random_{name}", getattr(_jr, name), f"jr.{name}", params,
                       defaults or {}, diff=diff, kind=kind, sample=_RANDOM_SAMPLES.get(name),
                       reason=reason or (_ND + "a random sample of integers or booleans")),
             callables=callables)


_RANDOM = (
    ("key", ("seed",), {}, (), "creation", ""),
    ("key_data", ("keys",), {}, (), "creation", ""),
    ("wrap_key_data", ("key_bits_array",), {}, (), "creation", ""),
    ("split", ("key", "num"), {"num": 2}, (), "creation", ""),
    ("fold_in", ("key", "data"), {}, (), "creation", ""),
    ("bits", ("key", "shape", "dtype"), {"shape": (), "dtype": None}, (), "creation", ""),
    ("uniform", ("key", "shape", "dtype", "minval", "maxval"),
     {"shape": (), "dtype": None, "minval": 0.0, "maxval": 1.0}, ("minval", "maxval"),
     "other", ""),
    ("normal", ("key", "shape", "dtype"), {"shape": (), "dtype": None}, (), "creation", ""),
    ("exponential", ("key", "shape", "dtype"), {"shape": (), "dtype": None}, (), "creation",
     ""),
    ("bernoulli", ("key", "p", "shape", "mode"), {"p": 0.5, "shape": None, "mode": "low"},
     (), "compare", ""),
    ("categorical", ("key", "logits", "axis", "shape", "replace", "mode"),
     {"axis": -1, "shape": None, "replace": True, "mode": None}, (), "index", ""),
    ("randint", ("key", "shape", "minval", "maxval", "dtype"), {"dtype": None}, (), "index",
     ""),
    ("permutation", ("key", "x", "axis", "independent"), {"axis": 0, "independent": False},
     ("x",), "other", ""),
    ("choice", ("key", "a", "shape", "replace", "p", "axis", "mode"),
     {"shape": (), "replace": True, "p": None, "axis": 0, "mode": None}, (), "other", _NR),
    ("truncated_normal", ("key", "lower", "upper", "shape", "dtype"),
     {"shape": None, "dtype": None}, ("lower", "upper"), "other", ""),
    ("unit_like", ("key", "like"), {}, (), "creation", ""),
    ("gamma", ("key", "a", "shape", "dtype"), {"shape": None, "dtype": None}, ("a",), "other",
     ""),
    ("multivariate_normal", ("key", "mean", "cov", "shape", "dtype", "method"),
     {"shape": None, "dtype": None, "method": "cholesky"}, ("mean", "cov"), "other", ""),
)
for _name, _params, _defaults, _diff, _kind, _reason in _RANDOM:
    _random(_name, _params, _defaults, _diff, _kind, _reason,
            callables=(_jr.PRNGKey,) if _name == "key" else ())
    if _name in ("key_data", "wrap_key_data"):
        continue
    # the batched form: the key becomes "key_b" (an operand vmap lifts like any array)
    _bparams = tuple("key_b" if p == "key" else p for p in _params)
    register(Primitive(f"random_{_name}_batched", getattr(_jr, f"{_name}_batched"),
                       f"jr.{_name}_batched", _bparams, dict(_defaults), diff=_diff,
                       # unit_like's result is constant (it reads only a shape)
                       kind="creation" if _name == "unit_like" else "batch",
                       sample=_RANDOM_SAMPLES.get(f"{_name}_batched"),
                       reason=_reason or (_ND + "a random sample")))
# gamma's implicit-reparameterization derivative (JAX's random_gamma_grad)
register(Primitive("random_gamma_grad", _jr.gamma_grad, "jr.gamma_grad", ("a", "sample"),
                   kind="elementwise", reason=_ND + "gamma's derivative in its shape "
                   "(no second derivative)"))
# multivariate_normal's derivative (through its Cholesky factor)
_MVN = {"shape": None, "dtype": None, "method": "cholesky"}
for _name, _params in (
        ("multivariate_normal_vjp", ("g", "key", "mean", "cov", "shape", "dtype", "method")),
        ("multivariate_normal_jvp", ("key", "mean", "cov", "dmean", "dcov", "shape", "dtype",
                                     "method"))):
    register(Primitive(f"random_{_name}", getattr(_jr, _name), f"jr.{_name}", _params,
                       dict(_MVN), kind="other",
                       reason=_ND + "multivariate_normal's derivative (no second one)"))
    _bparams = tuple("key_b" if p == "key" else p for p in _params)
    register(Primitive(f"random_{_name}_batched", getattr(_jr, f"{_name}_batched"),
                       f"jr.{_name}_batched", _bparams, dict(_MVN), kind="batch",
                       reason=_ND + "multivariate_normal's derivative (no second one)"))
_random("permutation_vjp", ("t", "key", "x", "axis", "independent"),
        {"axis": 0, "independent": False}, diff=("t",), kind="other")
register(Primitive("random_permutation_vjp_batched", _jr.permutation_vjp_batched,
                   "jr.permutation_vjp_batched", ("t", "key_b", "x", "axis", "independent"),
                   {"axis": 0, "independent": False}, diff=("t",), kind="batch",
                   sample=_RANDOM_SAMPLES["permutation_vjp_batched"]))

# ---------------------------------------------------------------------------
# astjax.debug: effects (kind "effect": never folded, merged, hoisted or dropped by the
# passes).  They have no result a derivative could follow: a differentiated value
# prints (or reaches the callback) as its primal, and derivative code never runs them.
# pure_callback has a result and, as in JAX, no derivative.
# ---------------------------------------------------------------------------

from astjax import debug as _dbg  # noqa: E402

_DEBUG = (
    ("debug_print", "print_values", ("fmt", "names", "*values")),
    ("debug_callback", "callback_values", ("callback", "names", "*values")),
    ("debug_breakpoint", "breakpoint_here", ("num_frames",)),
)
for _name, _impl, _params in _DEBUG:
    register(Primitive(_name, getattr(_dbg, _impl), f"dbg.{_impl}", _params,
                       {"num_frames": None} if _name == "debug_breakpoint" else {},
                       kind="effect", reason=_ND + "a debugging effect (it has no result)"))
    if _name != "debug_breakpoint":
        register(Primitive(f"{_name}_batched", getattr(_dbg, f"{_impl}_batched"),
                           f"dbg.{_impl}_batched", _params[:-1] + ("values",), kind="effect",
                           reason=_ND + "a debugging effect (it has no result)"))
_PURE_CB = ("callback", "result_shape_dtypes", "vmap_method", "names", "*values")
_PURE_CB_WHY = _ND + "pure_callback runs code astjax cannot see into (as in JAX, it has " \
    "no derivative: give the function a rule with custom_jvp/custom_vjp)"
register(Primitive("pure_callback", _dbg.pure_callback_values, "dbg.pure_callback_values",
                   _PURE_CB, kind="other", reason=_PURE_CB_WHY))
register(Primitive("pure_callback_batched", _dbg.pure_callback_values_batched,
                   "dbg.pure_callback_values_batched", _PURE_CB[:-1] + ("values",), kind="other",
                   reason=_PURE_CB_WHY))


# ---------------------------------------------------------------------------
# Collectives and shard_map calls (astjax/sharding): spelled ``sh.*`` in generated
# code.  Samples use the empty tuple of axes (a group of one, JAX's psum(x, ())), so
# the table-driven tests run them without a mesh; tests/test_sharding*.py check them
# on real meshes against NumPy references.
# ---------------------------------------------------------------------------
from astjax.sharding import collectives as _sh  # noqa: E402


def _coll(name, params, defaults=None, diff=(), kind="other", sample=None, reason="",
          meta=(), refuse=()):
    register(Primitive(name, getattr(_sh, name), f"sh.{name}", params, defaults or {},
                       diff=diff, kind=kind, sample=sample, reason=reason, meta=meta,
                       refuse=refuse))


def _plan_sample(r):
    from astjax.sharding.samples import sample_plan
    return sample_plan()


for _name in ("psum", "pmean", "pmax", "pmin", "pvary"):
    _coll(_name, ("x", "axis_name"), diff=("x",), sample=lambda r: ((_u(r), ()), {}))
# JAX 0.10's lax.pcast(x, axes, to="varying"): pvary; the other states are refused
_coll("pcast", ("x", "axis_name", "to"), diff=("x",),
      sample=lambda r: ((_u(r), ()), {"to": "varying"}))
_coll("all_gather", ("x", "axis_name", "axis", "tiled", "axis_index_groups"),
      {"axis": 0, "tiled": False, "axis_index_groups": None}, diff=("x",),
      sample=lambda r: ((_u(r), ()), {"axis": 1}))
_coll("psum_scatter", ("x", "axis_name", "scatter_dimension", "tiled", "axis_index_groups"),
      {"scatter_dimension": 0, "tiled": False, "axis_index_groups": None}, diff=("x",),
      sample=lambda r: ((_u(r, (3, 1)), ()), {"scatter_dimension": 1}))
_coll("ppermute", ("x", "axis_name", "perm"), diff=("x",),
      sample=lambda r: ((_u(r), (), ((0, 0),)), {}))
_coll("all_to_all", ("x", "axis_name", "split_axis", "concat_axis", "tiled",
                     "axis_index_groups"), {"tiled": False, "axis_index_groups": None},
      diff=("x",), sample=lambda r: ((_u(r, (1, 4)), (), 0, 1), {}))
# reverse mode's code read by another transformation (frontend/nested.py): refused at
# run time inside a check_vma=True shard_map, a no-op elsewhere
_coll("reverse_mode_guard", ("what",), kind="effect",
      reason=_ND + "a check that raises inside a check_vma=True shard_map (no result)")
# kind "other", not "static": a device's index or the mesh size is known only while the
# shard runs, never folded into a constant by jit (the same code runs on other meshes)
for _name in ("axis_index", "axis_size"):
    _coll(_name, ("axis_name",), kind="other", reason=_ND + "a device's index or count",
          sample=lambda r: (((),), {}))
_coll("ppermute_inverse", ("perm",), kind="static", reason=_ND + "a static permutation",
      sample=lambda r: ((((0, 0),),), {}))
for _name in ("psum_t", "pmean_t"):
    _coll(_name, ("t", "axis_name"), diff=("t",), sample=lambda r: ((_u(r), ()), {}))
_coll("all_gather_t", ("t", "axis_name", "axis", "tiled"), {"axis": 0, "tiled": False},
      diff=("t",), sample=lambda r: ((_u(r, (3, 1, 4)), (), 1), {}))
for _name in ("pextreme_t", "pextreme_jvp"):
    _coll(_name, ("t", "x", "top", "axis_name"), diff=("t",),
          sample=lambda r: ((_u(r), _u(r), _u(r), ()), {}))
# a plan computed from a differentiated value (a pmap's static argument): refused
_coll("shard_map_call", ("plan", "args"), diff=("args",), refuse=("plan",),
      sample=lambda r: ((_plan_sample(r), (_u(r, (3, 4)), _u(r, (4,)))), {}))
for _name in ("vjp_plan", "jvp_plan", "batch_plan"):
    _coll(_name, ("plan",), kind="static", reason=_ND + "a static shard_map plan",
          sample=lambda r: ((_plan_sample(r),), {}))
# a pmap's plan for its static_broadcasted_argnums values: "other", so that a static
# value under grad/jvp is refused (as JAX refuses a traced one) and vmap of one per
# example too (templates/batch.py)
_coll("static_plan", ("plan", "statics"), kind="other",
      reason="a static_broadcasted_argnums argument of a pmap has no derivative (JAX "
             "cannot trace one either): pass it as an ordinary argument to differentiate",
      sample=lambda r: ((_static_plan_sample(r), (2.0,)), {}))


def _static_plan_sample(r):
    from astjax.sharding.samples import sample_static_pmap
    return sample_static_pmap()


# ------------------------------------------------------------------------------------
# Custom rules (astjax/custom_rules.py, expanded by astjax/transforms/custom.py): a call
# of a custom_jvp / custom_vjp / checkpoint function, reverse mode's stand-in for one,
# and the check of a custom backward rule's result.
from astjax import runtime as _rt  # noqa: E402

register(Primitive("custom_call", _rt.custom_call, "rt.custom_call", ("rules", "*args"),
                   diff=("*args",), kind="other"))
register(Primitive("custom_apply", _rt.custom_apply, "rt.custom_apply",
                   ("rules", "res", "value", "*args"), diff=("*args",), kind="other"))
register(Primitive("custom_cotangents", _rt.custom_cotangents, "rt.custom_cotangents",
                   ("cts", "n", "what"), diff=("cts",), kind="structural"))
# a matrix product a checkpointed function's forward saved (policy dots_saveable): the
# saved value, with the product's derivative in its operands
register(Primitive("saved_dot", _rt.saved_dot, "rt.saved_dot", ("value", "a", "b"),
                   diff=("a", "b"), kind="linalg"))
register(Primitive("saved_matmul", _rt.saved_matmul, "rt.saved_matmul", ("value", "x", "y"),
                   diff=("x", "y"), kind="linalg"))
