"""Oracles and generated source for the composition matrix and the differential fuzzer.

Nothing here imports astjax: the oracles must be independent of the code they judge.

* pytrees of float arrays (tuples, lists, dicts) and their *specs* (the same
  containers with ``Leaf(shape)`` leaves), so wrappers can be emitted as source for
  any output structure;
* float64 finite differences with a fourth-order stencil (nested three deep, they
  still agree with exact third derivatives to about 1e-6);
* ``SourceModules``: writes Python text to a real file and imports it (astjax reads
  source, so generated programs and wrappers must live in files ``inspect`` finds);
* the random program generator of the fuzzer (``gen_program``) and its shrinker.
"""
from __future__ import annotations

import importlib.util
import itertools
import os
import sys
import tempfile
from dataclasses import dataclass, field

import numpy as np

# ----------------------------------------------------------------------------- pytrees


@dataclass(frozen=True)
class Leaf:
    """An array leaf of a spec: its shape."""

    shape: tuple


def is_leaf(x):
    return not isinstance(x, (tuple, list, dict))


def tmap(fn, *trees):
    """Map ``fn`` over the leaves of trees of identical structure (containers kept)."""
    t = trees[0]
    if isinstance(t, dict):
        return {k: tmap(fn, *(s[k] for s in trees)) for k in sorted(t, key=repr)}
    if isinstance(t, (tuple, list)):
        items = [tmap(fn, *(s[i] for s in trees)) for i in range(len(t))]
        return type(t)(items)
    return fn(*trees)


def leaves(t):
    if isinstance(t, dict):
        return [x for k in sorted(t, key=repr) for x in leaves(t[k])]
    if isinstance(t, (tuple, list)):
        return [x for v in t for x in leaves(v)]
    return [t]


def paths(t, prefix=""):
    """(index suffix such as "[0]['w']", leaf) for every leaf, in order."""
    if isinstance(t, dict):
        return [p for k in sorted(t, key=repr) for p in paths(t[k], f"{prefix}[{k!r}]")]
    if isinstance(t, (tuple, list)):
        return [p for i, v in enumerate(t) for p in paths(v, f"{prefix}[{i}]")]
    return [(prefix, t)]


def spec_of(t):
    return tmap(lambda x: Leaf(tuple(np.shape(x))), t)


def structure(t):
    """The containers of a tree with every leaf replaced by '*' (for comparisons)."""
    if isinstance(t, dict):
        return ("dict", tuple((k, structure(t[k])) for k in sorted(t, key=repr)))
    if isinstance(t, (tuple, list)):
        return (type(t).__name__, tuple(structure(v) for v in t))
    return "*"


def tree_expr(spec, root, leaf):
    """Python source building a tree like ``spec`` whose leaves are ``leaf(root + path)``."""
    if isinstance(spec, dict):
        return "{" + ", ".join(f"{k!r}: {tree_expr(v, f'{root}[{k!r}]', leaf)}"
                               for k, v in spec.items()) + "}"
    if isinstance(spec, (tuple, list)):
        items = [tree_expr(v, f"{root}[{i}]", leaf) for i, v in enumerate(spec)]
        if isinstance(spec, tuple):
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        return "[" + ", ".join(items) + "]"
    return leaf(root, spec)


def tree_add(a, b, alpha=1.0):
    return tmap(lambda u, v: np.asarray(u, np.float64) + alpha * np.asarray(v, np.float64), a, b)


def tree_scale(a, s):
    return tmap(lambda u: np.asarray(u, np.float64) * s, a)


def tree_stack(trees, axis=0):
    return tmap(lambda *xs: np.stack([np.asarray(x, np.float64) for x in xs], axis=axis), *trees)


def tree_take(t, i, axis=0):
    return tmap(lambda x: np.take(np.asarray(x), i, axis=axis), t)


# ----------------------------------------------------------------- finite differences

STEP = 1e-3


def _stencil(f, point, h):
    """Fourth-order central difference of tree-valued ``f`` along ``point(s)``."""
    fp2, fp1, fm1, fm2 = f(point(2 * h)), f(point(h)), f(point(-h)), f(point(-2 * h))
    return tmap(lambda a, b, c, d: (-np.asarray(a, np.float64) + 8 * np.asarray(b, np.float64)
                                    - 8 * np.asarray(c, np.float64)
                                    + np.asarray(d, np.float64)) / (12 * h),
                fp2, fp1, fm1, fm2)


def fd_directional(f, args, tangents, h=STEP):
    """d/ds f(*(args + s * tangents)) at s = 0 (``tangents``: None entries are zero)."""
    def point(s):
        return tuple(a if t is None else tmap(lambda u, v: np.asarray(u, np.float64) + s * v,
                                              a, t)
                     for a, t in zip(args, tangents))
    return _stencil(lambda p: f(*p), point, h)


def fd_grad(f, args, argnum, h=STEP):
    """Gradient of scalar ``f`` w.r.t. ``args[argnum]`` (a tree), element by element."""
    arg = args[argnum]
    flat = paths(arg)
    grads = []
    for li, (_, leaf) in enumerate(flat):
        leaf = np.asarray(leaf, np.float64)
        g = np.zeros(leaf.shape)
        for j in range(leaf.size):
            def point(s, li=li, j=j):
                def bump(k, x):
                    x = np.array(x, np.float64)
                    if k == li:
                        x.reshape(-1)[j] += s
                    return x
                counter = itertools.count()
                new = tmap(lambda x: bump(next(counter), x), arg)
                return args[:argnum] + (new,) + args[argnum + 1:]
            g.reshape(-1)[j] = float(_stencil(lambda p: f(*p), point, h))
        grads.append(g)
    it = iter(grads)
    return tmap(lambda _: next(it), arg)


# ------------------------------------------------------------------------- comparing


class Mismatch(AssertionError):
    """The transformed function and its oracle disagree (structure, shape or value)."""


def assert_tree_close(actual, expected, rtol, atol, what="result"):
    if structure(actual) != structure(expected):
        raise Mismatch(f"{what}: structure {structure(actual)} != oracle's "
                       f"{structure(expected)}")
    for i, (a, e) in enumerate(zip(leaves(actual), leaves(expected))):
        a = np.asarray(a)
        e = np.asarray(e, np.float64)
        if a.shape != e.shape:
            raise Mismatch(f"{what}: leaf {i} has shape {a.shape}, oracle {e.shape}")
        if not np.all(np.isfinite(e)):
            continue
        scale = max(1.0, float(np.max(np.abs(e))) if e.size else 1.0)
        err = float(np.max(np.abs(a.astype(np.float64) - e))) if e.size else 0.0
        if not (err <= atol * scale + rtol * scale) or not np.all(np.isfinite(a)):
            raise Mismatch(f"{what}: leaf {i} differs by {err:.3g} (scale {scale:.3g})\n"
                           f"  astjax: {np.array2string(a.ravel()[:8], precision=6)}\n"
                           f"  oracle: {np.array2string(e.ravel()[:8], precision=6)}")


# ------------------------------------------------------------------ generated modules


class SourceModules:
    """Writes Python text to files in one temporary directory and imports them."""

    def __init__(self, prefix="astjax_gen"):
        self.dir = tempfile.mkdtemp(prefix=prefix + "_")
        self.prefix = prefix
        self.count = itertools.count()

    def load(self, source, globals_=None, name=None):
        name = name or f"{self.prefix}_{os.getpid()}_{next(self.count)}"
        path = os.path.join(self.dir, name + ".py")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(source)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        for k, v in (globals_ or {}).items():
            setattr(module, k, v)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        for k, v in (globals_ or {}).items():
            setattr(module, k, v)
        return module


# ------------------------------------------------------------------ program generator
#
# A program is a list of statements, each one or a few lines defining one new
# variable ``v<k>`` from earlier ones (one primitive per statement where possible, so
# that shrinking a failure to its cause is dropping statements).  Values are tracked
# concretely while generating: a candidate statement is executed on the real inputs
# and kept only if it runs, stays finite and small, so every program is valid NumPy.

MAX_SIZE = 12


@dataclass
class Stmt:
    lines: list           # source lines, relative indentation
    name: str             # the variable it defines
    feature: str          # what construct it exercises (primitive name or construct)
    fallback: str = ""    # one line defining ``name`` trivially (used when shrinking)
    constant: str = ""    # one line defining ``name`` as a constant of its shape


@dataclass
class Program:
    stmts: list
    ret: str              # the return expression
    x: np.ndarray
    y: np.ndarray
    seed: int = 0
    features: set = field(default_factory=set)

    def source(self, name="prog"):
        body = []
        for s in self.stmts:
            body += ["    " + line for line in s.lines]
        return (f"def {name}(x, y):\n" + "\n".join(body) + ("\n" if body else "")
                + f"    return {self.ret}\n")

    def module(self):
        return ("import numpy as np\nimport astjax\nfrom astjax import lax\n\n\n"
                + self.source() + "\n\n"
                "def loss(x, y):\n"
                "    out = prog(x, y)\n"
                "    return np.sum(np.sin(out * 0.7 + 0.2))\n\n\n"
                "ACT = np.sin\n"
                "SCALE = 0.7\n\n\n"
                "def loss_rebound(x, y):\n"
                "    out = prog(x, y)\n"
                "    return np.sum(ACT(out * SCALE + 0.2))\n")


def _domain(prim, rng):
    """A wrapper that keeps an argument where the primitive's sample lives."""
    lo, hi, small = np.inf, -np.inf, np.inf
    for _ in range(4):
        args, _kw = prim.sample(rng)
        for a in args[:2]:
            a = np.asarray(a, dtype=np.float64)
            lo, hi = min(lo, float(a.min())), max(hi, float(a.max()))
            small = min(small, float(np.abs(a).min()))
    return lo, hi, small


def _wrap_for(lo, hi, small):
    if lo > 1.0:
        return "({a} * {a} + 1.2)"
    if lo >= -1.5 and hi <= 1.5:
        return "(np.tanh({a}) * 0.8)"
    if lo > 0 or small >= 0.3:
        return "({a} * {a} + 0.5)"
    return "{a}"


_TABLES = {}


def primitive_tables():
    """Elementwise and reduction primitives of astjax's registry with domain wrappers."""
    if _TABLES:
        return _TABLES
    from astjax import primitives as P
    rng = np.random.default_rng(0)
    unary, binary, reductions = [], [], []
    for name, p in sorted(P.REGISTRY.items()):
        if not p.sample or not p.code.startswith("np.") or not p.differentiable:
            continue
        if p.kind == "elementwise" and p.params[:2] == ("x", "out"):
            args, _ = p.sample(rng)
            a = np.asarray(args[0], np.float64)
            unary.append((name, p.code, _wrap_for(a.min(), a.max(), np.abs(a).min())))
        elif p.kind == "elementwise" and p.params[:3] == ("x", "y", "out"):
            args, _ = p.sample(rng)
            wraps = [_wrap_for(np.min(v), np.max(v), np.min(np.abs(v))) for v in args[:2]]
            if name in ("arctan2", "hypot"):   # singular at (0, 0), as in JAX
                wraps[1] = "({a} * {a} + 0.5)"
            binary.append((name, p.code, p.operator, wraps))
        elif p.kind == "reduction" and p.params[0] in ("a", "x") and "axis" in p.params:
            reductions.append((name, p.code, "keepdims" in p.params))
    _TABLES.update(unary=unary, binary=binary, reductions=reductions)
    return _TABLES


# Shape, index and linear-algebra statements: {a}, {b} are variables; "needs" says
# which ranks they must have.
STRUCTURAL = [
    ("transpose", "np.transpose({a})", (2,)),
    ("flip", "np.flip({a}, axis=-1)", (1, 2)),
    ("roll", "np.roll({a}, 1, axis=-1)", (1, 2)),
    ("reshape", "np.reshape({a}, (-1,))", (2,)),
    ("reshape", "{a}.reshape(3, 2)", (2,)),
    ("ravel", "np.ravel({a})", (2,)),
    ("cumsum", "np.cumsum({a}, axis=-1)", (1, 2)),
    ("sort", "np.sort({a}, axis=-1)", (1, 2)),
    ("concatenate", "np.concatenate([{a}, {b}], axis=-1)", (1, 1)),
    ("stack", "np.stack([{a}, {b}])", (1, 1)),
    # Python's repetition of a literal list/tuple: each item used n times (a product
    # rule here gave a factor n once)
    ("stack_repeat", "np.stack([{a}, {b}] * 2)", (1, 1)),
    ("concat_repeat", "np.concatenate(2 * ({a}, {b}), axis=-1)", (1, 1)),
    ("tile", "np.tile({a}, 2)", (1,)),
    ("repeat", "np.repeat({a}, 2, axis=-1)", (1,)),
    ("diff", "np.diff({a}, axis=-1)", (1, 2)),
    ("pad", "np.pad({a}, 1, constant_values=0.5)", (1,)),
    ("take", "np.take({a}, [0, 2, 1], axis=-1)", (1, 2)),
    ("getitem", "{a}[..., ::-1]", (1, 2)),
    ("getitem", "{a}[..., 1:]", (1, 2)),
    ("getitem", "{a}[[1, 0, 1]]", (1,)),
    ("where", "np.where({a} > 0.1, {a}, {b})", (1, 1)),
    ("clip", "np.clip({a}, -0.5, 0.8)", (1,)),
    ("matmul", "{a} @ np.transpose({b})", (2, 2)),
    ("matmul", "{a} @ {b}", (2, 1)),
    ("dot", "np.dot({a}, {b})", (1, 1)),
    ("outer", "np.outer({a}, {b})", (1, 1)),
    ("einsum", "np.einsum('...i,...i->...', {a}, {b})", (1, 1)),
    ("einsum", "np.einsum('ij,kj->ik', {a}, {b})", (2, 2)),
    ("tensordot", "np.tensordot({a}, {b}, axes=1)", (2, 1)),
    ("kron", "np.kron({a}, {b})", (1, 1)),
    ("tril", "np.tril({a})", (2,)),
    ("expand_dims", "np.expand_dims({a}, 0)", (1,)),
    ("squeeze", "np.squeeze({a})", (2,)),
    ("trace", "np.trace({a})", (2,)),
    ("diag", "np.diag({a})", (1,)),
    ("inv", "np.linalg.inv(np.eye(3) * 3.0 + np.outer({a}, {a}))", (1,)),
    ("solve", "np.linalg.solve(np.eye(3) * 3.0 + np.outer({a}, {a}), {b})", (1, 1)),
    ("det", "np.linalg.det(np.eye(3) * 2.0 + np.outer({a}, {b}) * 0.3)", (1, 1)),
    ("norm", "np.linalg.norm({a} + 2.0)", (1,)),
    ("atleast_2d", "np.atleast_2d({a})", (1,)),
    ("vstack", "np.vstack([{a}, {b}])", (1, 1)),
    ("hstack", "np.hstack([{a}, {b}])", (1, 1)),
    # np.fft (tests/test_fft.py): half spectra, cut and padded lengths, complex steps
    ("rfft", "np.abs(np.fft.rfft({a}, axis=-1)) ** 2", (1, 2)),
    ("fft", "np.real(np.fft.ifft(np.fft.fft({a}, n=5) * (1.0 + 0.5j), n=3))", (1,)),
    ("irfft", "np.fft.irfft(np.fft.rfft({a}) * (0.5 - 1j) + 1.0, n=4)", (1,)),
    ("fftn", "np.imag(np.fft.fftn({a}, norm='ortho')) + {a}", (2,)),
    ("hfft", "np.fft.hfft({a} * (1.0 + 2.0j), n=3, axis=0)", (2,)),
]

# Constructs around primitives (the Python astjax accepts).  Templates get {v} (the
# new variable), {a}, {b}, {u} (a unary primitive call on {a}) and {c} (a constant).
CONSTRUCTS = [
    ("for", ["{v} = {a} * 1.0", "for i in range(2):", "    {v} = np.tanh({v} * 0.5 + {b}) + {c}"]),
    ("for_index", [
        "{v} = {a} * 0.0",
        "for i in range(3):",
        "    {v} = {v} + np.sin({a} * (i + 1.0))",
    ]),
    ("if", ["if np.sum({a}) > {c}:", "    {v} = {u}", "else:", "    {v} = {a} * np.mean({b})"]),
    ("if_shapes", ["if np.sum({a}) > {c}:", "    {v} = {u}", "else:", "    {v} = {a} * {b}"]),
    ("if_no_else", ["{v} = {a} * 2.0", "if np.max({b}) > {c}:", "    {v} = {u} + {v}"]),
    ("ifexp", ["{v} = {u} if np.mean({b}) > {c} else {a} * 0.5"]),
    ("while", ["{v} = {a} * 1.0", "n = 0", "while n < 3 and np.sum({v} * {v}) < 20.0:",
               "    {v} = {v} * 1.3 + 0.1", "    n = n + 1"]),
    ("setitem", ["{v} = {a} * 1.0", "{v}[0] = {b_scalar}"]),
    ("setitem_slice", ["{v} = {a} * 1.0", "{v}[1:] = {u}[:-1]"]),
    ("iadd_slice", ["{v} = {a} * 1.0", "{v}[1:] += {u}[1:]"]),
    ("imul_slice", ["{v} = {a} * 1.0", "{v}[1:] *= {u}[1:]"]),
    ("imul_index", ["{v} = {a} * 1.0", "{v}[0] *= {b_scalar}"]),
    # writes through an index that repeats a position: the last write stays, the
    # derivative of the others is zero (rt.cot_written); -1 is 0 on a length-1 axis
    ("setitem_repeated", ["{v} = {a} * 1.0", "{v}[[0, -1, 0]] = {u}[[-1, 0, 0]] * 2.0"]),
    ("iadd_repeated", ["{v} = {a} * 1.0", "{v}[[0, 0, -1]] += np.sin({u}[[-1, 0, 0]])"]),
    # np.add.at adds at every position named, repeated ones included (scatter_add)
    ("add_at", ["{v} = {a} * 1.0", "np.add.at({v}, [0, -1, 0], {u}[[-1, 0, 0]] * 2.0)"]),
    ("subtract_at", ["{v} = {a} * 1.0", "np.subtract.at({v}, [-1, -1], np.cos({u}[[0, -1]]))"]),
    ("isub", ["{v} = {a} * 1.0", "{v} -= {u}"]),
    # a default is evaluated where the def or lambda is (then the name is rebound)
    ("lambda_default", ["k = {a} * 1.0", "g = lambda y, k=k: y * k + {u}", "k = k + 1.5",
                        "{v} = g({b_like_a}) * k"]),
    # complex intermediates of a real result (JAX's convention: tests/test_complex_rules)
    # integer values are piecewise constant (tests/test_integer_results.py)
    ("int_cast", ["k = ({a} * 3.0).astype(int)", "{v} = k * {a} + np.tanh(k * 0.1) + {u}"]),
    ("int_write", ["w = np.zeros({a}.shape, dtype=np.int64)", "w[...] = {a} * 4.0",
                   "{v} = w * {a} + {u}"]),
    # an array written into itself (tests/test_self_writes.py)
    ("self_write", ["{v} = {u} * 1.0", "{v}[::-1] = {v}", "{v}[...] = {v} * {a}"]),
    # a helper's op= on its parameter updates the caller's array in place: fine where the
    # caller rebinds its name to the result, or the helper made a new array first, or it
    # is a number (tests/test_rebinding_updates.py)
    ("helper_inplace", ["def {v}_step(w, d):", "    w -= 0.25 * d", "    w *= 1.5",
                        "    return w", "{v} = {a} * 1.0", "{v} = {v}_step({v}, {u})"]),
    ("helper_rebound", ["def {v}_sc(p, s):", "    p = p * s", "    p += 1.0", "    return p",
                        "{v} = {v}_sc({a}, {b}) * {a}"]),
    ("helper_number", ["def {v}_acc(t, d):", "    t += d", "    return t",
                       "{v}_t = {v}_acc(0.5, np.sum({a}))", "{v} = {v}_acc({v}_t, {u}) * {v}_t"]),
    # an if-test its branch reassigns: ``a and b`` true then false (reverse mode read
    # the test again: tests/test_branch_tests_reassigned.py)
    ("if_and", ["{v} = {a} * 1.0", "k = 1", "if {a}.shape[-1] > 0 and k > 1:",
                "    {v} = {v} * 2.0", "{v} = {v} * {u}"]),
    # negative constant bases (printed bare, ``-1 ** k`` was ``-(1 ** k)``)
    ("neg_pow", ["{v} = (-1.5) ** 2 * {a} + (-2.0) ** np.arange({a}.shape[-1]) * {u}"]),
    # NaN-skipping reductions with NaN data (forward rules: tests/test_nan_skipping_tangents)
    # (NaN entries made by np.where: a NaN factor of a differentiated value gives NaN
    # cotangents by the chain rule, in JAX too, where differences are finite)
    ("nan_skip", ["w = np.where({a} > 0.3, np.nan, {a} * 2.0)",
                  "{v} = np.nanmax(w, axis=-1, keepdims=True) * {u} + np.fmax(w, 0.1)"]),
    # reductions with where= and initial= (tests/test_masked_reductions.py)
    ("masked_reduce", ["{v} = np.sum({u} * {a}, where={a} > {c}) + np.max({a}, initial=0.5)"
                       " + np.mean({a}, axis=-1, keepdims=True, where={a} < 5.0)"]),
    # a list of values given to NumPy (tests/test_vmap_list_operands.py)
    ("list_operand", ["{v} = {a} * np.sum(np.diff(np.atleast_1d([np.sum({a}), np.max({u}),"
                      " 1.5])))"]),
    ("complex_abs", ["z = {a} * (0.8 - 0.6j) + 1j * {b_like_a}", "{v} = np.abs(z) ** 2 + {a}"]),
    ("complex_conj", ["z = {u} + 1j * {a}", "{v} = np.real(np.conj(z) * z * (0.5 + 1j))"]),
    ("complex_imag", ["z = np.exp(1j * {a}) * ({u} + 0.5j)",
                      "{v} = np.imag(z) + np.angle(z + 2.0)"]),
    ("complex_sign", ["z = {a} + 1j * np.cos({u})", "{v} = np.real(np.sign(z) * (1.0 - 0.5j))"]),
    ("tuple", ["t = ({a}, {b})", "{v} = t[0] * t[1] + t[0]"]),
    ("swap", ["p, q = {a}, {b}", "p, q = q, p * 2.0", "{v} = p + q"]),
    ("dict", ["d = {{'p': {a}, 'q': {b}}}", "{v} = d['p'] - np.sin(d['q'])"]),
    ("list_append", ["acc = []", "for k in range(2):", "    acc.append({a} * (k + 1.0))",
                     "{v} = acc[0] + acc[1] * {b}"]),
    ("genexpr", ["{v} = sum(np.sin({a} * k) for k in (1.0, 2.0)) + {b}"]),
    ("listcomp", ["{v} = np.stack([{a} * k for k in range(2)])"]),
    ("closure", ["s = np.sum({b})", "def h(u):", "    return np.tanh(u * s)", "{v} = h({a})"]),
    ("lambda", ["h = lambda u: {u_of_u}", "{v} = h({a}) + h({b})"]),
    ("helper_default", [
        "def h(u, scale=2.0):",
        "    return u * scale",
        "{v} = h({a}) + h({b}, 0.5)",
    ]),
    ("lax_fori", ["{v} = lax.fori_loop(0, 2, lambda i, c: c * 0.5 + np.sin({b}), {a})"]),
    ("lax_cond", [
        "{v} = lax.cond(np.sum({a}) > {c}, lambda u: u * 2.0, lambda u: np.sin(u), {a})",
    ]),
    ("lax_while", [
        "{v} = lax.while_loop(lambda c: np.sum(c * c) < 20.0, lambda c: c * 1.5 + 0.1, {a})",
    ]),
    ("lax_scan", ["{v} = lax.scan(lambda c, t: (c * 0.5 + t, c * t), {a_row}, {a2})[1]"]),
    ("lax_map", ["{v} = lax.map(lambda r: np.sin(r) * 2.0, {a2})"]),
    # zero steps: the carry is the initial one under every transformation (the outputs
    # of zero steps refuse any use: tests/test_scan_zero_steps.py)
    ("lax_scan_empty", [
        "{v} = lax.scan(lambda c, t: (np.sin(c) * 0.5 + t, c * t), {a_row}, {a2}[:0])[0]"
        " + np.cos({a_row})",
    ]),
    ("loop_setitem", ["{v} = np.zeros({a}.shape)", "for i in range({a}.shape[-1]):",
                      "    {v}[..., i] = np.sin({a}[..., i]) * np.sum({b})"]),
    ("loop_break", ["{v} = {a} * 1.0", "for i in range(4):", "    if np.sum({v}) > {c} + 2.0:",
                    "        break", "    {v} = {v} * 1.2 + 0.3"]),
    ("loop_continue", ["{v} = {a} * 0.0", "for i in range(3):", "    if i == 1:",
                       "        continue", "    {v} = {v} + np.cos({a} * i)"]),
    ("for_rows", ["{v} = {a}[0] * 0.0", "for row in {a}:", "    {v} = {v} + np.tanh(row)"]),
    ("for_enumerate", ["{v} = {a}[0] * 0.0", "for i, row in enumerate({a}):",
                       "    {v} = {v} + row * (i + 1.0)"]),
    ("for_zip", ["{v} = {a}[0] * 0.0", "for p, q in zip({a}, {b}):", "    {v} = {v} + p * q"]),
    ("nested_loops", ["{v} = {a} * 1.0", "for i in range(2):", "    for j in range(2):",
                      "        {v} = np.sin({v}) * 0.5 + {b} * j"]),
    # an inner loop whose temporaries change shape per trip (the MLP's layers), read
    # after it by an outer loop: the backward sweep must see the last trip's shapes
    ("nested_layers", [
        "{v} = {a} * 0.0",
        "for i in range(2):",
        "    {v}_h = {a} * (i + 1.0)",
        "    for {v}_m in (np.ones(({a}.shape[-1], 2)) * 0.3, np.ones((2, {a}.shape[-1])) * 0.2):",
        "        {v}_t = np.dot({v}_h, {v}_m) + {c}",
        "        {v}_h = np.tanh({v}_t)",
        "    {v} = {v} + np.sin({v}_t - {b})",
    ]),
    ("iadd", ["{v} = {a} * 1.0", "{v} += {b}", "{v} *= {u}"]),
    ("methods", ["{v} = {a}.sum(axis=-1, keepdims=True) * {a}.mean() + {a}.T.T"]),
    ("builtin_max", ["{v} = {a} * max(np.sum({b}), 0.3) + min(np.mean({a}), -0.2)"]),
    ("where_cond", ["{v} = np.where({a} > {c}, np.sin({a}), {b} * {a})"]),
    ("lax_switch", [
        "{v} = lax.switch(np.where(np.sum({a}) > {c}, 1, 0), "
        "[lambda u: u * 2.0, lambda u: np.cos(u)], {a})",
    ]),
    # a step that reads its carry, then assigns the name again (an RNN): the fast
    # backward trip's facts read snapshots (transforms/fast_trips.py)
    ("lax_scan_rnn", [
        "def {v}_step(c, t):",
        "    c = np.tanh(c * np.cos({a_row}) + t)",
        "    return c, c * c",
        "{v} = lax.scan({v}_step, {a_row} * 0.5, {a2})[1]",
    ]),
    # a temporary broadcast by a product, then assigned a value of the product's
    # shape: its fact must read it before the product, and fail
    ("lax_scan_rebroadcast", [
        "def {v}_step(c, t):",
        "    u = c * t",
        "    w = u * np.ones((2, 1))",
        "    u = w * 0.5 + 1.0",
        "    c = np.sin(u[1]) * 0.5 + c",
        "    return c, w",
        "{v} = lax.scan({v}_step, {a_row}, {a2})[0]",
    ]),
    # a scalar per step (an energy): its cotangent is spread inside the backward
    # trip's kernel (kernels/ir.py Broadcast), the trip's ys cotangent a NumPy scalar
    ("lax_scan_energy", [
        "def {v}_step(c, t):",
        "    n = np.sin(c * 0.9 + t) * 0.5",
        "    return n, np.sum(n * n) + np.mean(n * t)",
        "{v} = lax.scan({v}_step, {a_row}, {a2})[1]",
    ]),
    # ys dropped (``return c, None``): the list is dead after the loop
    ("lax_scan_no_ys", [
        "def {v}_step(c, t):",
        "    c = c * 0.5 + np.cos(t) * c",
        "    return c, None",
        "{v}, _ = lax.scan({v}_step, {a_row}, {a2})",
    ]),
    # the step index read by the step's kernels (passed per step to the compiled
    # loops), and numbers of it reverse mode keeps: ``i + 0.5`` (a Python float) and
    # ``np.cos(i * 0.3)`` (a NumPy float64), results of numbers only of the kernels
    ("lax_fori_index", [
        "{v} = lax.fori_loop(0, 6, lambda i, c: np.sin(c) * 0.5 + {b} * (i + 0.5), {a})",
    ]),
    ("for_index_cos", ["{v} = {a} * 1.0", "for i in range(6):",
                       "    {v} = {v} * 0.9 + {b} * np.cos(i * 0.3)"]),
    # a step index that leaves int64 within the loop (the C loop's counter is an
    # int64: such a loop stays Python; it had run no step, silently)
    ("for_index_int64_edge", ["{v} = {a} * 1.0", "for i in range(2 ** 63 - 3, 2 ** 63 + 3):",
                              "    {v} = {v} * 0.5 + np.tanh({b} * i * 1e-19)"]),
    # a number of the step's xs first, the carry's product after it: one kernel
    ("lax_scan_scalar_xs", [
        "def {v}_step(c, t):",
        "    s = t * 0.5",
        "    c = c * 0.9 + np.sin(s) * c",
        "    return c, np.sum(c)",
        "{v} = lax.scan({v}_step, {a_row}, {a2}[:, 0])[0]",
    ]),
    ("lax_scan_tuple", [
        "{v} = lax.scan(lambda c, t: ((c[0] + t, c[1] * 0.9), c[0] * t), "
        "({a_row}, {a_row}), {a2})[0][1]",
    ]),
    ("helper_chain", ["def h1(u):", "    return np.sin(u) * 2.0", "def h2(u, w):",
                      "    return h1(u) * w + h1(w)", "{v} = h2({a}, {b})"]),
    ("nested_vmap", [
        "def hv(u):",
        "    return np.sum(np.sin(u) * u)",
        "{v} = astjax.vmap(hv)({a2})",
    ]),
    ("dict_items", ["d = {{'p': {a}, 'q': {b}}}", "{v} = {a} * 0.0",
                    "for i, (k, w) in enumerate(sorted(d.items())):",
                    "    {v} = {v} + w * (i + 1.0)"]),
    ("funcs_in_list", ["fs = [np.sin, np.cos]", "{v} = sum(f({a}) for f in fs)"]),
    ("nested_grad", [
        "def hs(u):",
        "    return np.sum(np.sin(u) * u)",
        "{v} = astjax.grad(hs)({a})",
    ]),
    ("nested_jvp", [
        "def hj(u):",
        "    return np.sin(u) * u",
        "{v} = astjax.jvp(hj, ({a},), ({b_like_a},))[1]",
    ]),
]

# Constructs the CI budget avoids: a per-example if whose branches give different
# shapes is refused under vmap (as JAX refuses it), which the oracle cannot tell from a
# failure; bench/fuzz.py uses everything.
KNOWN_OPEN = frozenset({"if_shapes"})


class Generator:
    """Random programs ``prog(x, y)`` from the registry and the constructs above."""

    def __init__(self, seed, avoid=frozenset(), n_stmts=(3, 10), structural=True,
                 constructs=True):
        self.rng = np.random.default_rng(seed)
        self.seed = seed
        self.avoid = set(avoid)
        self.n_stmts = n_stmts
        self.tables = primitive_tables()
        self.structural = [s for s in STRUCTURAL if s[0] not in self.avoid] if structural else []
        self.constructs = [c for c in CONSTRUCTS if c[0] not in self.avoid] if constructs else []

    # values ---------------------------------------------------------------------
    def _choice(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def _vars(self, env, rank=None):
        names = [k for k, v in env.items() if isinstance(v, np.ndarray) and v.dtype == np.float64
                 and (rank is None or v.ndim == rank) and not k.startswith("_")]
        return names

    def _exec(self, lines, env):
        ns = dict(env)
        import astjax
        from astjax import lax
        ns.update(np=np, lax=lax, astjax=astjax)
        with np.errstate(all="raise"):
            exec(compile("\n".join(lines) + "\n", "<fuzz>", "exec"), ns)
        return ns

    def _unary(self, a):
        name, code, wrap = self._choice(self.tables["unary"])
        return name, f"{code}({wrap.format(a=a)})"

    def _binary(self, a, b):
        name, code, op, wraps = self._choice(self.tables["binary"])
        wa, wb = wraps[0].format(a=a), wraps[1].format(a=b)
        if op and self.rng.random() < 0.5:
            return name, f"{wa} {op} {wb}"
        return name, f"{code}({wa}, {wb})"

    def _candidate(self, env, v):
        """(feature, lines) for a new statement defining ``v``."""
        kind = self.rng.random()
        names = self._vars(env)
        a = self._choice(names)
        b = self._choice(names)
        if kind < 0.3:
            feat, expr = self._unary(a)
            return feat, [f"{v} = {expr}"]
        if kind < 0.55:
            feat, expr = self._binary(a, b)
            return feat, [f"{v} = {expr}"]
        if kind < 0.65:
            name, code, keep = self._choice(self.tables["reductions"])
            nd = env[a].ndim
            axis = int(self.rng.integers(-1, nd)) if nd else -1
            args = f"{a}" if nd == 0 or axis == -1 and self.rng.random() < 0.3 else \
                f"{a}, axis={axis}"
            if keep and nd and self.rng.random() < 0.4:
                args += ", keepdims=True"
            if name in ("prod", "cumprod"):
                args = args.replace(a, f"np.tanh({a}) + 1.5", 1)
            return name, [f"{v} = {code}({args})"]
        if kind < 0.8 and self.structural:
            feat, tmpl, needs = self._choice(self.structural)
            pick = [self._choice(self._vars(env, r) or [None]) for r in needs]
            if None in pick:
                return None
            fmt = dict(zip("ab", pick))
            return feat, [f"{v} = " + tmpl.format(**fmt)]
        if not self.constructs:
            return None
        feat, tmpl = self._choice(self.constructs)
        _, u = self._unary(a)
        _, uu = self._unary("u")
        mat = [n for n in self._vars(env, 2) if env[n].shape[0] >= 1]
        if "{a_row}" in "".join(tmpl) or "{a2}" in "".join(tmpl):
            if not mat:
                return None
            a2 = self._choice(mat)
            a_row = f"{a2}[0]"
        else:
            a2 = a_row = a
        fmt = dict(v=v, a=a, b=b, u=u, u_of_u=uu, c=f"{float(self.rng.uniform(-0.5, 0.5)):.3f}",
                   b_scalar=f"np.sum({b}) * 0.5", b_like_a=f"np.cos({a})", a2=a2, a_row=a_row)
        return feat, [line.format(**fmt) for line in tmpl]

    def program(self):
        x = self.rng.uniform(-1.0, 1.0, (2, 3))
        y = self.rng.uniform(-1.0, 1.0, (3,))
        env = {"x": x, "y": y}
        stmts, features = [], set()
        n = int(self.rng.integers(*self.n_stmts))
        tries = 0
        while len(stmts) < n and tries < 20 * n:
            tries += 1
            v = f"v{len(stmts)}"
            cand = self._candidate(env, v)
            if cand is None:
                continue
            feat, lines = cand
            try:
                ns = self._exec(lines, env)
            except Exception:  # noqa: BLE001  (rejection sampling)
                continue
            val = ns.get(v)
            if not isinstance(val, np.ndarray) or val.dtype != np.float64 or val.ndim > 2 \
                    or val.size > MAX_SIZE or val.size == 0 or not np.all(np.isfinite(val)) \
                    or np.max(np.abs(val)) > 50.0:
                continue
            same = self._choice([k for k in self._vars(env) if env[k].shape == val.shape]
                                or [None])
            fallback = f"{v} = {same} * 1.0" if same else f"{v} = np.full({val.shape}, 0.5)"
            env = {k: w for k, w in ns.items() if k in env or k == v}
            stmts.append(Stmt(lines, v, feat, fallback, f"{v} = np.full({val.shape}, 0.5)"))
            features.add(feat)
        last = stmts[-1].name if stmts else "x"
        other = self._choice([s.name for s in stmts[:-1]] or ["y"])
        ret = f"{last} + np.sum({other}) * 0.5"
        return Program(stmts, ret, x, y, self.seed, features)


# ------------------------------------------------------------------------- checking

CHECKS = ("jit", "grad", "jvp", "vmap", "hvp", "vmap_grad", "jit_grad", "jit_fastmath",
          "jit_threads", "vmap_vjp", "rebind")


@dataclass(frozen=True)
class Failure:
    check: str
    kind: str        # "wrong" (silent wrong number), "crash" (internal error), "refused"
    message: str     # first line, identifiers normalized

    @property
    def key(self):
        return (self.check, self.kind, self.message)


class Inconclusive(Exception):
    """Finite differences disagree with themselves (a kink or a branch threshold nearby),
    or the oracle itself raised (a perturbed or batched input crossed into a branch the
    program cannot run: NumPy raises there, and astjax rightly does too)."""


def _oracle(fn, *args):
    """``fn(*args)``, the reference a check compares with; Inconclusive if it raises."""
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001
        raise Inconclusive(f"the oracle raised {type(e).__name__}: {e}") from e


def _normalize(msg):
    import re
    line = msg.strip().splitlines()[0] if msg.strip() else ""
    line = re.sub(r"'[^']*'", "'_'", line)
    line = re.sub(r"\b[a-z_]*v\d+\w*", "_", line)
    line = re.sub(r"\d+(\.\d+)?(e-?\d+)?", "N", line)
    line = re.sub(r"\(.*?\)", "()", line)
    return line[:120]


def _fd_stable(fn):
    """``fn(h)`` at two step sizes; Inconclusive when they disagree."""
    a = _oracle(fn, STEP)
    b = _oracle(fn, STEP / 3)
    for u, w in zip(leaves(a), leaves(b)):
        u, w = np.asarray(u), np.asarray(w)
        scale = max(1.0, float(np.max(np.abs(w))) if w.size else 1.0)
        if w.size and float(np.max(np.abs(u - w))) > 1e-6 * scale:
            raise Inconclusive()
    return b


def _batched_args(x, y, in_axes):
    """Three examples; contractions toward the inside keep every one in the domain."""
    xb = np.stack([x, x * 0.8 + 0.1, x * 0.9 - 0.05], axis=in_axes[0])
    yb = y if in_axes[1] is None else np.stack([y, y * 0.85 - 0.05, y * 0.7 + 0.1],
                                               axis=in_axes[1])
    return xb, yb


def _finite(tree):
    if not all(np.all(np.isfinite(np.asarray(v))) for v in leaves(tree)):
        raise Inconclusive()
    return tree


def _slices(xb, yb, in_axes):
    for b in range(3):
        yield (np.take(xb, b, axis=in_axes[0]),
               yb if in_axes[1] is None else np.take(yb, b, axis=in_axes[1]))


def run_check(check, mod, x, y, rng_seed=0):
    """Compare one transformation of ``mod.prog``/``mod.loss`` with its oracle."""
    import astjax
    prog, loss = mod.prog, mod.loss
    tx, ty = np.cos(x * 1.3), np.sin(y * 0.7 + 0.2)
    if check == "jit":
        assert_tree_close(astjax.jit(prog)(x, y), prog(x, y), 1e-9, 1e-9, "jit")
    elif check == "grad":
        g = astjax.grad(loss, argnums=(0, 1))(x, y)
        e = _fd_stable(lambda h: (fd_grad(loss, (x, y), 0, h), fd_grad(loss, (x, y), 1, h)))
        assert_tree_close(g, e, 1e-6, 1e-6, "grad")
    elif check == "jit_grad":      # compiled kernels, sweeps and backward drivers
        g = astjax.jit(astjax.grad(loss, argnums=(0, 1)))(x, y)
        e = _fd_stable(lambda h: (fd_grad(loss, (x, y), 0, h), fd_grad(loss, (x, y), 1, h)))
        assert_tree_close(g, e, 1e-6, 1e-6, "jit of grad")
    elif check == "jit_fastmath":  # value-changing rewrites: close, dtypes unchanged
        got, want = astjax.jit(prog, fastmath=True)(x, y), prog(x, y)
        assert_tree_close(got, want, 1e-9, 1e-9, "jit fastmath")
        for i, (a, e) in enumerate(zip(leaves(got), leaves(want))):
            if np.asarray(a).dtype != np.asarray(e).dtype:
                raise Mismatch(f"jit fastmath: leaf {i} is {np.asarray(a).dtype}, "
                               f"oracle {np.asarray(e).dtype}")
    elif check == "jit_threads":   # every kernel on its OpenMP path, however small,
        # compiled loops however few their steps, in 1-step calls
        from astjax.kernels import backsweep, governor, loop_driver, runtime
        saved = (runtime.MIN_PARALLEL_WORK, governor.MIN_STEPS, governor.FIRST_CHUNK,
                 governor.CHUNK_SECONDS, loop_driver.MIN_STEPS, backsweep.MIN_STEPS)
        runtime.MIN_PARALLEL_WORK, governor.MIN_STEPS = 1, 1
        governor.FIRST_CHUNK, governor.CHUNK_SECONDS = 1, 0.0
        loop_driver.MIN_STEPS = backsweep.MIN_STEPS = 1
        try:
            got = astjax.jit(prog)(x, y)
            g = astjax.jit(astjax.grad(loss, argnums=(0, 1)))(x, y)
        finally:
            (runtime.MIN_PARALLEL_WORK, governor.MIN_STEPS, governor.FIRST_CHUNK,
             governor.CHUNK_SECONDS, loop_driver.MIN_STEPS, backsweep.MIN_STEPS) = saved
        assert_tree_close(got, prog(x, y), 1e-9, 1e-9, "jit on threads")
        e = _fd_stable(lambda h: (fd_grad(loss, (x, y), 0, h), fd_grad(loss, (x, y), 1, h)))
        assert_tree_close(g, e, 1e-6, 1e-6, "jit of grad on threads")
    elif check == "jvp":
        out, t = astjax.jvp(prog, (x, y), (tx, ty))
        e = _fd_stable(lambda h: fd_directional(prog, (x, y), (tx, ty), h))
        assert_tree_close(out, prog(x, y), 1e-9, 1e-9, "jvp primal")
        assert_tree_close(t, e, 1e-6, 1e-6, "jvp tangent")
    elif check == "vmap":
        axes = [(0, 0), (0, None), (1, None), (-1, 0)][rng_seed % 4]
        xb, yb = _batched_args(x, y, axes)
        e = _finite(_oracle(lambda: np.stack([prog(a, b)
                                              for a, b in _slices(xb, yb, axes)])))
        out = astjax.vmap(prog, in_axes=axes)(xb, yb)
        assert_tree_close(out, e, 1e-9, 1e-9, f"vmap in_axes={axes}")
    elif check == "hvp":
        g = astjax.jvp(astjax.grad(loss, argnums=(0, 1)), (x, y), (tx, ty))[1]

        def grads(a, b, h):
            return fd_grad(loss, (a, b), 0, h), fd_grad(loss, (a, b), 1, h)
        e = _fd_stable(lambda h: fd_directional(lambda a, b: grads(a, b, h), (x, y), (tx, ty),
                                                h * 3))
        assert_tree_close(g, e, 1e-5, 1e-5, "jvp of grad")
    elif check == "vmap_vjp":      # the cotangents batched, the primals not (the
        # accumulators a fast backward trip starts from None must carry the batch)
        out, pull = astjax.vjp(prog, x, y)
        if any(np.asarray(o).dtype.kind != "f" for o in leaves(out)):
            raise Inconclusive("a result that is not floating")
        cts = [tmap(lambda o, k=k: np.cos(o * (k + 1.0)).astype(np.asarray(o).dtype), out)
               for k in range(3)]
        e = _finite(_oracle(lambda: tree_stack([pull(c) for c in cts])))
        got = astjax.vmap(pull)(tmap(lambda *cs: np.stack(cs), *cts))
        assert_tree_close(got, e, 1e-9, 1e-9, "vmap of vjp")
    elif check == "rebind":        # a global function and number rebound between calls:
        # the code folded the function, re-reads the number (astjax/read_guards.py)
        # (the NumPy backend: regenerating compiled kernels costs the fuzzer's budget)
        f = mod.loss_rebound
        made = [astjax.grad(f, argnums=(0, 1)), astjax.jit(f, backend="numpy")]
        for rebound in (False, True):
            if rebound:
                mod.ACT, mod.SCALE = np.cos, 1.3
            e = _fd_stable(lambda h: (fd_grad(f, (x, y), 0, h), fd_grad(f, (x, y), 1, h)))
            assert_tree_close(made[0](x, y), e, 1e-6, 1e-6, f"grad (rebound={rebound})")
            assert_tree_close(made[1](x, y), f(x, y), 1e-9, 1e-9, f"jit (rebound={rebound})")
    elif check == "vmap_grad":
        xb, yb = _batched_args(x, y, (0, 0))
        e = _finite(_fd_stable(lambda h: np.stack([fd_grad(loss, (a, b), 0, h)
                                                   for a, b in _slices(xb, yb, (0, 0))])))
        g = astjax.vmap(astjax.grad(loss))(xb, yb)
        assert_tree_close(g, e, 1e-6, 1e-6, "vmap of grad")
    else:
        raise ValueError(check)


def check_program(program, modules, checks=CHECKS):
    """Failures of ``program`` per check (None: passed; "inconclusive"; a Failure)."""
    import astjax
    from astjax.errors import AstjaxError
    mod = modules.load(program.module())
    try:
        with np.errstate(all="ignore"):
            mod.prog(program.x, program.y)
            float(mod.loss(program.x, program.y))
    except Exception:  # noqa: BLE001  (an invalid program is not astjax's failure)
        return None
    results = {}
    for k, check in enumerate(checks):
        try:
            with np.errstate(all="ignore"):
                run_check(check, mod, program.x, program.y, program.seed + k)
            results[check] = None
        except Inconclusive:
            results[check] = "inconclusive"
        except Mismatch as exc:
            # NaN where the finite differences are finite: a singular point (std of one
            # element, norm of zero...), where JAX gives NaN too; reported apart.
            kind = "nan" if "differs by nan" in str(exc) else "wrong"
            results[check] = Failure(check, kind, _normalize(str(exc).split(":")[0]))
        except AstjaxError as exc:
            results[check] = Failure(check, "refused", _normalize(f"{type(exc).__name__}: {exc}"))
        except Exception as exc:  # noqa: BLE001
            results[check] = Failure(check, "crash", _normalize(f"{type(exc).__name__}: {exc}"))
        finally:
            astjax.clear_cache()
    return results


def _uses(name, text):
    import re
    return re.search(rf"\b{name}\b", text) is not None


def shrink(program, failure, modules, budget=60):
    """The smallest program (dropping statements, simplifying the return) that still
    fails ``failure.check`` the same way."""
    def fails(p):
        r = check_program(p, modules, (failure.check,))
        return r is not None and isinstance(r[failure.check], Failure) and \
            r[failure.check].key == failure.key

    best = program
    tries = 0
    changed = True
    while changed and tries < budget:
        changed = False
        # simplify the return to its first variable
        if " + " in best.ret:
            first, second = best.ret.split(" + ", 1)
            for ret in (first, second.replace(" * 0.5", "").replace("np.sum(", "")[:-1]):
                cand = Program(best.stmts, ret, best.x, best.y, best.seed)
                tries += 1
                if fails(cand):
                    best, changed = cand, True
                    break
        for i in reversed(range(len(best.stmts))):
            if tries >= budget:
                break
            s = best.stmts[i]
            later = "\n".join(line for t in best.stmts[i + 1:] for line in t.lines) + best.ret
            if not _uses(s.name, later):
                options = [[]]
            elif s.feature != "fallback":
                options = [[Stmt([line], s.name, "fallback", s.fallback, s.constant)]
                           for line in (s.constant, s.fallback) if line]
            else:
                continue
            for opt in options:
                cand = Program(best.stmts[:i] + opt + best.stmts[i + 1:], best.ret, best.x,
                               best.y, best.seed)
                tries += 1
                if fails(cand):
                    best, changed = cand, True
                    break
    best.features = {s.feature for s in best.stmts if s.feature != "fallback"}
    return best


def reproducer(program, failure):
    """A standalone script that shows the failure."""
    head = (f"# astjax fuzz reproducer: {failure.check} -> {failure.kind}: {failure.message}\n"
            f"# constructs: {', '.join(sorted(program.features)) or '(none)'}; "
            f"seed {program.seed}\n")
    args = (f"\n\nif __name__ == '__main__':\n"
            f"    x = np.array({np.round(program.x, 6).tolist()!r})\n"
            f"    y = np.array({np.round(program.y, 6).tolist()!r})\n"
            f"    # check {failure.check!r}: see tests/fuzzgen.py run_check\n"
            f"    import sys\n"
            f"    sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
            f"    import fuzzgen\n"
            f"    fuzzgen.run_check({failure.check!r}, sys.modules[__name__], x, y, "
            f"{program.seed})\n")
    return head + program.module() + args
