"""Scalar C99 expressions shared by every renderer of the kernel IR (C, CUDA).

What one element's computation looks like in C99 syntax, independent of the loop
around it: C type names, casts, literals (NaN, inf, float32 suffixes), one NumPy
ufunc as an expression of its already-cast operands (``op_expr``), and the helper
functions some of them need (Python-sign integer ``//`` and ``%``, NumPy's float
``npy_divmod``, NumPy's ``clip``).  ``c.py`` wraps these in CPU loops; the CUDA
renderer wraps the same expressions in a grid-stride loop (its helpers get a
``__device__`` qualifier through ``helpers_text(qualifier=...)``).

Numerics follow NumPy exactly: every operand is cast to the loop type NumPy resolved
(``ir.specialize``), integer ``+ - *`` wrap (done in unsigned arithmetic, which C
defines), integer ``//`` and ``%`` have Python's signs and give 0 for a zero divisor
as NumPy does, float ``//`` and ``%`` are NumPy's ``npy_divmod``, ``maximum`` and
``minimum`` propagate NaN and pick NumPy's operand on ties (signed zeros), and a power
with a scalar exponent of 0.5 is a square root as in NumPy's loop.
"""
from __future__ import annotations

import numpy as np

from astjax.kernels import vmath
from astjax.kernels.ir import Unsupported

_CTYPES = {("b", 1): "npy_bool", ("i", 1): "int8_t", ("i", 2): "int16_t",
           ("i", 4): "int32_t", ("i", 8): "int64_t", ("u", 1): "uint8_t",
           ("u", 2): "uint16_t", ("u", 4): "uint32_t", ("u", 8): "uint64_t",
           ("f", 4): "float", ("f", 8): "double"}


def ctype(dt) -> str:
    dt = np.dtype(dt)
    try:
        return _CTYPES[(dt.kind, dt.itemsize)]
    except KeyError:
        raise Unsupported(f"dtype {dt}") from None


def _wide_unsigned(dt) -> str:
    """The unsigned type integer arithmetic of ``dt`` wraps in (never promoted to int)."""
    return "uint64_t" if dt.itemsize == 8 else "uint32_t"


def cast(expr: str, src, dst) -> str:
    src, dst = np.dtype(src), np.dtype(dst)
    if src == dst:
        return expr
    if dst.kind == "b":
        return f"(npy_bool)({expr} != 0)"
    if src.kind == "f" and dst.kind in "iu":
        raise Unsupported(f"cast {src} -> {dst}")      # never a ufunc loop's input cast
    return f"({ctype(dst)})({expr})"


def _literal(value, dt) -> str:
    dt = np.dtype(dt)
    if dt.kind == "b":
        return "1" if value else "0"
    if dt.kind == "f":
        v = float(value)
        if v != v:
            return "NAN" if dt.itemsize == 8 else "((float)NAN)"
        if v in (float("inf"), float("-inf")):
            s = "INFINITY" if v > 0 else "(-INFINITY)"
            return s if dt.itemsize == 4 else f"((double){s})"
        text = repr(v) if dt.itemsize == 8 else repr(float(np.float32(v)))
        if "e" not in text and "." not in text:
            text += ".0"
        return text + ("f" if dt.itemsize == 4 else "")
    if dt.kind == "i" and dt.itemsize == 8 and value == -(1 << 63):
        return "INT64_MIN"
    return f"(({ctype(dt)}){int(value)}{'ULL' if dt.kind == 'u' else 'LL'})"


_MATH1 = {"sqrt": "sqrt", "cbrt": "cbrt", "exp": "exp", "exp2": "exp2", "expm1": "expm1",
          "log": "log", "log2": "log2", "log10": "log10", "log1p": "log1p", "sin": "sin",
          "cos": "cos", "tan": "tan", "arcsin": "asin", "arccos": "acos",
          "arctan": "atan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh",
          "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh",
          "fabs": "fabs", "floor": "floor", "ceil": "ceil", "trunc": "trunc",
          "rint": "rint"}
_MATH2 = {"arctan2": "atan2", "hypot": "hypot", "copysign": "copysign",
          "fmod": "fmod"}
_COMPARE = {"greater": ">", "greater_equal": ">=", "less": "<", "less_equal": "<=",
            "equal": "==", "not_equal": "!="}
_BITWISE = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^"}
_LOGICAL = {"logical_and": "&&", "logical_or": "||", "logical_xor": "!="}
_INT_ROUNDING = frozenset({"floor", "ceil", "trunc", "rint"})   # on integers: identity

# the ufuncs a kernel can compute (what ``supported`` reports)
UFUNCS = frozenset(list(_MATH1) + list(_MATH2) + list(_COMPARE) + list(_BITWISE) +
                   list(_LOGICAL) + ["add", "subtract", "multiply", "divide",
                                     "floor_divide", "remainder", "power", "negative",
                                     "positive", "absolute", "square", "reciprocal",
                                     "sign", "maximum", "minimum", "logical_not",
                                     "invert", "isnan", "isinf", "isfinite"])
# elementwise functions that are not ufuncs
FUNCTIONS = frozenset({"where", "clip"})


def _fn(name, dt):
    return name + ("f" if np.dtype(dt).itemsize == 4 else "")


def _suffix(dt) -> str:
    dt = np.dtype(dt)
    return f"{dt.kind}{dt.itemsize * 8}"


def op_expr(op, a, scalar_args, helpers, fastmath=False) -> str:
    """The C expression of one statement; ``a``: operand expressions already cast to
    the loop's input type; ``scalar_args``: which operands are the same for every
    element (NumPy's loops special-case a scalar exponent); ``fastmath``: the kernel's
    ``jit(..., fastmath=True)`` (a division by such an operand is a product with its
    reciprocal, which the compiler computes once: C compilers keep a lone division
    even when allowed to rewrite it)."""
    uf, loop = op.ufunc, op.loop
    t = loop[0]
    k = t.kind
    T = ctype(t)
    if uf in ("add", "subtract", "multiply"):
        sym = {"add": "+", "subtract": "-", "multiply": "*"}[uf]
        if k == "b":
            if uf == "subtract":
                raise Unsupported("boolean subtract")
            return f"({a[0]} {'|' if uf == 'add' else '&'} {a[1]})"
        if k in "iu":
            U = _wide_unsigned(t)
            return f"({T})(({U}){a[0]} {sym} ({U}){a[1]})"
        return f"({a[0]} {sym} {a[1]})"
    if uf == "divide":
        if k != "f":
            raise Unsupported("integer true division loop")
        if fastmath and scalar_args[1] and not scalar_args[0]:
            return f"({a[0]} * (({T})1 / {a[1]}))"
        return f"({a[0]} / {a[1]})"
    if uf in ("floor_divide", "remainder"):
        helpers.add(("divmod", t.str))
        fname = ("floordiv_" if uf == "floor_divide" else "mod_") + _suffix(t)
        if k == "b":
            raise Unsupported(f"boolean {uf}")
        return f"{fname}({a[0]}, {a[1]})"
    if uf == "power":
        if k != "f":
            raise Unsupported("integer power")   # negative exponents raise in NumPy
        p = f"{_fn('pow', t)}({a[0]}, {a[1]})"
        if scalar_args[1]:   # NumPy's loop: a scalar exponent of 0.5 is a square root
            return f"({a[1]} == {_literal(0.5, t)} ? {_fn('sqrt', t)}({a[0]}) : {p})"
        return p
    if uf in ("negative", "positive"):
        if k == "b":
            raise Unsupported(f"boolean {uf}")
        if uf == "positive":
            return a[0]
        if k in "iu":
            return f"({T})(-({_wide_unsigned(t)}){a[0]})"
        return f"(-{a[0]})"
    if uf == "absolute":
        if k == "b" or k == "u":
            return a[0]
        if k == "i":
            return f"({a[0]} < 0 ? ({T})(-({_wide_unsigned(t)}){a[0]}) : {a[0]})"
        return f"{_fn('fabs', t)}({a[0]})"
    if uf == "square":
        if k == "b":
            return a[0]
        if k in "iu":
            U = _wide_unsigned(t)
            return f"({T})(({U}){a[0]} * ({U}){a[0]})"
        return f"({a[0]} * {a[0]})"
    if uf == "reciprocal":
        if k != "f":
            raise Unsupported("integer reciprocal")
        return f"({_literal(1, t)} / {a[0]})"
    if uf == "sign":
        if k == "b":
            raise Unsupported("boolean sign")
        if k == "f":
            return (f"({a[0]} > 0 ? {_literal(1, t)} : ({a[0]} < 0 ? {_literal(-1, t)} : "
                    f"({a[0]} == 0 ? {_literal(0, t)} : {a[0]})))")
        return f"({T})(({a[0]} > 0) - ({a[0]} < 0))"
    if uf in ("maximum", "minimum"):
        sym = ">" if uf == "maximum" else "<"
        if k == "f":   # NaN propagates; on ties NumPy gives the second operand
            return f"(({a[0]} {sym} {a[1]} || isnan({a[0]})) ? {a[0]} : {a[1]})"
        return f"({a[0]} {sym} {a[1]} ? {a[0]} : {a[1]})"
    if uf == "where":
        return f"({a[0]} ? {a[1]} : {a[2]})"
    if uf == "clip":
        if k == "b":
            raise Unsupported("boolean clip")
        helpers.add(("clip", t.str))
        return f"clip_{_suffix(t)}({a[0]}, {a[1]}, {a[2]})"
    if uf in _COMPARE:
        return f"(npy_bool)({a[0]} {_COMPARE[uf]} {a[1]})"
    if uf in _LOGICAL:
        return f"(npy_bool)(({a[0]} != 0) {_LOGICAL[uf]} ({a[1]} != 0))"
    if uf == "logical_not":
        return f"(npy_bool)({a[0]} == 0)"
    if uf in _BITWISE:
        if k == "f":
            raise Unsupported(f"float {uf}")
        return f"({T})({a[0]} {_BITWISE[uf]} {a[1]})"
    if uf == "invert":
        if k == "b":
            return f"(npy_bool)!{a[0]}"
        if k == "f":
            raise Unsupported("float invert")
        return f"({T})(~{a[0]})"
    if uf in ("isnan", "isinf", "isfinite"):
        if k != "f":
            return "(npy_bool)1" if uf == "isfinite" else "(npy_bool)0"
        return f"(npy_bool)({uf}({a[0]}) != 0)"
    if uf in _MATH1 or uf in _MATH2:
        if k != "f":
            if uf in _INT_ROUNDING:
                return a[0]
            raise Unsupported(f"np.{uf} integer loop")
        operands = ", ".join(a[:2 if uf in _MATH2 else 1])
        vm = vmath.function(uf, t.itemsize)   # vectorizable (kernels/vmath.py)
        if vm is not None:
            helpers.add(("vmath", vm))
            return f"{vm}({operands})"
        return f"{_fn(_MATH1.get(uf) or _MATH2[uf], t)}({operands})"
    raise Unsupported(f"np.{uf}")


_PRELUDE = """\
#include <stdint.h>
#include <math.h>
typedef unsigned char npy_bool;
/* the element function inlines into its loops whatever its size, or they do not
   vectorize (a kernel calling sin is past gcc's inlining limit) */
#if defined(__GNUC__)
#define ASTJAX_ALWAYS_INLINE __attribute__((always_inline))
#else
#define ASTJAX_ALWAYS_INLINE
#endif
"""


def _divmod_helpers(dtstr) -> str:
    dt = np.dtype(dtstr)
    T, s = ctype(dt), _suffix(dt)
    if dt.kind == "i":
        lo = {1: "INT8_MIN", 2: "INT16_MIN", 4: "INT32_MIN", 8: "INT64_MIN"}[dt.itemsize]
        return f"""\
/* Python's floor division and remainder; a zero divisor gives 0, as in NumPy */
static inline {T} floordiv_{s}({T} a, {T} b) {{
    if (b == 0) return 0;
    if (b == -1) return a == {lo} ? a : ({T})-a;
    {T} q = a / b;
    if (a % b != 0 && ((a < 0) != (b < 0))) q -= 1;
    return q;
}}
static inline {T} mod_{s}({T} a, {T} b) {{
    if (b == 0 || b == -1) return 0;
    {T} r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}}
"""
    if dt.kind == "u":
        return f"""\
static inline {T} floordiv_{s}({T} a, {T} b) {{ return b == 0 ? 0 : a / b; }}
static inline {T} mod_{s}({T} a, {T} b) {{ return b == 0 ? 0 : a % b; }}
"""
    f = "f" if dt.itemsize == 4 else ""
    return f"""\
/* NumPy's npy_divmod: Python's signs, the quotient snapped to an integer */
static inline {T} divmod_{s}({T} a, {T} b, {T} *modulus) {{
    {T} mod = fmod{f}(a, b);
    if (!b) {{ *modulus = mod; return a / b; }}
    {T} div = (a - mod) / b;
    if (mod) {{
        if (isless(b, 0) != isless(mod, 0)) {{ mod += b; div -= 1; }}
    }} else {{
        mod = copysign{f}(0, b);
    }}
    {T} floordiv;
    if (div) {{
        floordiv = floor{f}(div);
        if (isgreater(div - floordiv, 0.5{f})) floordiv += 1;
    }} else {{
        floordiv = copysign{f}(0, a / b);
    }}
    *modulus = mod;
    return floordiv;
}}
static inline {T} floordiv_{s}({T} a, {T} b) {{
    {T} mod;
    return b ? divmod_{s}(a, b, &mod) : a / b;
}}
static inline {T} mod_{s}({T} a, {T} b) {{
    {T} mod;
    if (!b) return fmod{f}(a, b);
    divmod_{s}(a, b, &mod);
    return mod;
}}
"""


def _clip_helper(dtstr) -> str:
    dt = np.dtype(dtstr)
    T, s = ctype(dt), _suffix(dt)
    if dt.kind == "f":
        return f"""\
/* NumPy's clip: min(max(a, lo), hi), a NaN anywhere propagates */
static inline {T} clip_{s}({T} a, {T} lo, {T} hi) {{
    const {T} m = (isnan(a) || a > lo) ? a : lo;
    return (isnan(m) || m < hi) ? m : hi;
}}
"""
    return f"""\
static inline {T} clip_{s}({T} a, {T} lo, {T} hi) {{
    const {T} m = a > lo ? a : lo;
    return m < hi ? m : hi;
}}
"""


def _comment(loc) -> str:
    if loc is None:
        return ""
    text = loc.source_line().strip().replace("*/", "* /")
    name = str(loc.filename).rsplit("/", 1)[-1]
    return f"/* {name}:{loc.lineno}  {text} */"


def prelude() -> str:
    """Includes and typedefs every kernel's text starts with."""
    return _PRELUDE


def helpers_text(helpers, qualifier: str = "static inline") -> str:
    """The helper functions ``op_expr`` asked for (its ``helpers`` set), each declared
    with ``qualifier`` (the CUDA renderer passes ``__device__ static inline``)."""
    out = []
    for kind, dtstr in sorted(h for h in helpers if h[0] != "vmath"):
        text = _divmod_helpers(dtstr) if kind == "divmod" else _clip_helper(dtstr)
        out.append(text.replace("static inline", qualifier))
    vm = sorted(name for kind, name in helpers if kind == "vmath")
    if vm and qualifier == "static inline":
        out.append(vmath.needed(vm))
    elif vm:    # CUDA: the device's own math functions
        out.append(vmath.forwarders(vm, qualifier))
    return "".join(out)


def literal(value, dt) -> str:
    """``value`` as a C literal of dtype ``dt`` (NaN, inf, float32 suffixes)."""
    return _literal(value, dt)


def comment(loc) -> str:
    """``/* file:line  source */`` for a statement's user location ('' for none)."""
    return _comment(loc)
