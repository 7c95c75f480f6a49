"""Transformations as combinators over (function under test, oracle, arguments).

A ``Case`` is a function astjax transformed, an oracle computing the same thing with
NumPy alone (finite differences for derivatives, Python loops for vmap, the eager
function for jit and lax), the arguments, the output's spec and the derivative order
so far.  Each transformation in ``TRANSFORMS`` maps a Case to a Case (or None where it
does not apply), so every chain of them is a test: the matrix is generated, not
written.  Wrappers that need source (a scalarized loss for ``grad``, the cotangent
``vjp`` pulls back, a lax call around the function) are emitted as Python text into
files, exactly as a user would write them, with the inner function a module global.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import numpy as np

import astjax
from fuzzgen import (Leaf, SourceModules, fd_directional, fd_grad, leaves, paths, spec_of,
                     tmap, tree_expr, tree_stack, tree_take)

MODULES = SourceModules("astjax_compose")
HEADER = "import numpy as np\nimport astjax\nfrom astjax import lax\n\n"

DERIVATIVES = {"grad", "value_and_grad", "grad_xy", "vjp", "vmap_vjp", "jvp", "linearize",
               "vmap_linearize"}


@dataclass(frozen=True)
class Case:
    fn: object          # what astjax built
    oracle: object      # NumPy-only reference with the same signature
    args: tuple         # (x, y)
    spec: object        # output structure with Leaf(shape) leaves
    order: int = 0      # derivative transformations applied so far
    chain: tuple = ()   # transformation names, outermost first

    def tolerance(self):
        return {0: 1e-9, 1: 1e-6, 2: 1e-5}.get(self.order, 2e-4)


def _emit(body, inner, **extra):
    return MODULES.load(HEADER + body, {"inner": inner, **extra})


def _leaf_weights(spec):
    return [(0.5 + 0.25 * k, 0.1 * k) for k in range(len(leaves(spec)))]


def _scalarized(case):
    """(astjax-readable, oracle) versions of sum_k sum(sin(a_k * out_k + b_k))."""
    terms = [f"np.sum(np.sin(out{p} * {a} + {b}))"
             for (p, _), (a, b) in zip(paths(case.spec), _leaf_weights(case.spec))]
    mod = _emit("def scalarized(x, y):\n    out = inner(x, y)\n"
                f"    return {' + '.join(terms)}\n", case.fn)
    weights = _leaf_weights(case.spec)

    def oracle(x, y):
        outs = leaves(case.oracle(x, y))
        return float(sum(np.sum(np.sin(np.asarray(o, np.float64) * a + b))
                         for o, (a, b) in zip(outs, weights)))
    return mod.scalarized, oracle


def _cos(root, leaf):
    return f"np.cos({root})"


def _sin(root, leaf):
    return f"np.sin({root})"


def _next(case, name, fn, oracle, args=None, spec=None, derivative=False):
    return Case(fn, oracle, case.args if args is None else args,
                case.spec if spec is None else spec, case.order + int(derivative),
                (name,) + case.chain)


# ------------------------------------------------------------------ derivative transforms

def t_grad(case):
    s_fn, s_orc = _scalarized(case)
    return _next(case, "grad", astjax.grad(s_fn),
                 lambda x, y: fd_grad(s_orc, (x, y), 0), spec=spec_of(case.args[0]),
                 derivative=True)


def t_value_and_grad(case):
    s_fn, s_orc = _scalarized(case)
    return _next(case, "value_and_grad", astjax.value_and_grad(s_fn),
                 lambda x, y: (s_orc(x, y), fd_grad(s_orc, (x, y), 0)),
                 spec=(Leaf(()), spec_of(case.args[0])), derivative=True)


def t_grad_xy(case):
    s_fn, s_orc = _scalarized(case)
    return _next(case, "grad_xy", astjax.grad(s_fn, argnums=(0, 1)),
                 lambda x, y: (fd_grad(s_orc, (x, y), 0), fd_grad(s_orc, (x, y), 1)),
                 spec=(spec_of(case.args[0]), spec_of(case.args[1])), derivative=True)


def _pullback_oracle(orc, x, y, ct):
    def inner_product(a, b):
        return float(sum(np.sum(np.asarray(o, np.float64) * c)
                         for o, c in zip(leaves(orc(a, b)), leaves(ct))))
    return fd_grad(inner_product, (x, y), 0), fd_grad(inner_product, (x, y), 1)


def t_vjp(case):
    ct = tree_expr(case.spec, "out", _cos)
    mod = _emit("def vjp_wrapper(x, y):\n    out, pull = astjax.vjp(inner, x, y)\n"
                f"    return pull({ct})\n", case.fn)

    def oracle(x, y):
        return _pullback_oracle(case.oracle, x, y, tmap(np.cos, case.oracle(x, y)))
    return _next(case, "vjp", mod.vjp_wrapper, oracle,
                 spec=(spec_of(case.args[0]), spec_of(case.args[1])), derivative=True)


def t_vmap_vjp(case):
    cts = tree_expr(case.spec, "out", lambda r, leaf: f"np.stack([np.cos({r}), np.sin({r})])")
    mod = _emit("def vmap_vjp_wrapper(x, y):\n    out, pull = astjax.vjp(inner, x, y)\n"
                f"    return astjax.vmap(pull)({cts})\n", case.fn)

    def oracle(x, y):
        out = case.oracle(x, y)
        rows = [_pullback_oracle(case.oracle, x, y, tmap(fn, out)) for fn in (np.cos, np.sin)]
        return tree_stack(rows)
    spec = tmap(lambda leaf: Leaf((2,) + leaf.shape),
                (spec_of(case.args[0]), spec_of(case.args[1])))
    return _next(case, "vmap_vjp", mod.vmap_vjp_wrapper, oracle, spec=spec, derivative=True)


def _tangents(x, y, flip=False):
    f, g = (np.sin, np.cos) if flip else (np.cos, np.sin)
    return tmap(lambda a: f(np.asarray(a, np.float64)), x), tmap(
        lambda a: g(np.asarray(a, np.float64)), y)


def t_jvp(case):
    tx, ty = tree_expr(case.args[0], "x", _cos), tree_expr(case.args[1], "y", _sin)
    mod = _emit(f"def jvp_wrapper(x, y):\n    return astjax.jvp(inner, (x, y), ({tx}, {ty}))\n",
                case.fn)

    def oracle(x, y):
        return case.oracle(x, y), fd_directional(case.oracle, (x, y), _tangents(x, y))
    return _next(case, "jvp", mod.jvp_wrapper, oracle, spec=(case.spec, case.spec),
                 derivative=True)


def t_linearize(case):
    tx, ty = tree_expr(case.args[0], "x", _cos), tree_expr(case.args[1], "y", _sin)
    mod = _emit("def linearize_wrapper(x, y):\n    out, f_jvp = astjax.linearize(inner, x, y)\n"
                f"    return out, f_jvp({tx}, {ty})\n", case.fn)

    def oracle(x, y):
        return case.oracle(x, y), fd_directional(case.oracle, (x, y), _tangents(x, y))
    return _next(case, "linearize", mod.linearize_wrapper, oracle, spec=(case.spec, case.spec),
                 derivative=True)


def t_vmap_linearize(case):
    tx = tree_expr(case.args[0], "x", lambda r, _: f"np.stack([np.cos({r}), np.sin({r})])")
    ty = tree_expr(case.args[1], "y", lambda r, _: f"np.stack([np.sin({r}), np.cos({r})])")
    mod = _emit("def vmap_linearize_wrapper(x, y):\n"
                "    out, f_jvp = astjax.linearize(inner, x, y)\n"
                f"    return astjax.vmap(f_jvp)({tx}, {ty})\n", case.fn)

    def oracle(x, y):
        return tree_stack([fd_directional(case.oracle, (x, y), _tangents(x, y, flip))
                           for flip in (False, True)])
    spec = tmap(lambda leaf: Leaf((2,) + leaf.shape), case.spec)
    return _next(case, "vmap_linearize", mod.vmap_linearize_wrapper, oracle, spec=spec,
                 derivative=True)


# --------------------------------------------------------------------------- vmap, jit

BATCH = 3


def _batched(arg, axis):
    variants = [tmap(lambda a, c=c, d=d: np.asarray(a, np.float64) * c + d, arg)
                for c, d in ((1.0, 0.0), (0.8, 0.1), (0.9, -0.05))]
    return tree_stack(variants, axis=axis)


def _insert_axis(spec, axis):
    def leaf(lf):
        shape = list(lf.shape)
        pos = axis if axis >= 0 else len(shape) + 1 + axis
        shape.insert(pos, BATCH)
        return Leaf(tuple(shape))
    return tmap(leaf, spec)


def make_vmap(name, in_axes, out_axes):
    def t_vmap(case):
        axes = in_axes if isinstance(in_axes, tuple) else (in_axes, in_axes)
        if out_axes not in (0, -1, None) and any(len(lf.shape) < out_axes
                                                 for lf in leaves(case.spec)):
            return None
        args = tuple(a if ax is None else _batched(a, ax) for a, ax in zip(case.args, axes))

        def oracle(x, y):
            outs = [case.oracle(*(a if ax is None else tree_take(a, b, ax)
                                  for a, ax in zip((x, y), axes))) for b in range(BATCH)]
            return tree_stack(outs, axis=out_axes)
        return _next(case, name, astjax.vmap(case.fn, in_axes=in_axes, out_axes=out_axes),
                     oracle, args=args, spec=_insert_axis(case.spec, out_axes))
    t_vmap.__name__ = f"t_{name}"
    return t_vmap


def t_jit(case):
    return _next(case, "jit", astjax.jit(case.fn), case.oracle)


# --------------------------------------------------------------------------- lax calls

def _first_leaf(arg):
    return paths(arg)[0][0]


def _threshold(case):
    """A branch threshold the first batch sits well above (pred True at the point)."""
    s = float(np.sum(leaves(case.args[0])[0]))
    return round(s - 0.5 * (abs(s) + 1.0), 6)


def t_cond(case):
    p, thr = _first_leaf(case.args[0]), _threshold(case)
    half = tree_expr(case.args[0], "a", lambda r, _: f"{r} * 0.5")
    mod = _emit("def half(a, b):\n"
                f"    return inner({half}, b)\n\n"
                "def cond_wrapper(x, y):\n"
                f"    return lax.cond(np.sum(x{p}) > {thr}, inner, half, x, y)\n", case.fn)

    def oracle(x, y):
        if np.sum(leaves(x)[0]) > thr:
            return case.oracle(x, y)
        return case.oracle(tmap(lambda a: np.asarray(a) * 0.5, x), y)
    return _next(case, "cond", mod.cond_wrapper, oracle)


def t_switch(case):
    p, thr = _first_leaf(case.args[0]), _threshold(case)
    scaled = {k: tree_expr(case.args[0], "a", lambda r, _, k=k: f"{r} * {k}")
              for k in (0.5, 0.25)}
    mod = _emit("def half(a, b):\n"
                f"    return inner({scaled[0.5]}, b)\n\n"
                "def quarter(a, b):\n"
                f"    return inner({scaled[0.25]}, b)\n\n"
                "def switch_wrapper(x, y):\n"
                f"    index = np.where(np.sum(x{p}) > {thr}, 2, 1)\n"
                "    return lax.switch(index, [half, quarter, inner], x, y)\n", case.fn)

    def oracle(x, y):
        if np.sum(leaves(x)[0]) > thr:
            return case.oracle(x, y)
        return case.oracle(tmap(lambda a: np.asarray(a) * 0.25, x), y)
    return _next(case, "switch", mod.switch_wrapper, oracle)


def _zeros(spec):
    return tree_expr(spec, "", lambda r, leaf: f"np.zeros({leaf.shape!r})")


def t_fori_loop(case):
    update = tree_expr(case.spec, "", lambda r, _: f"c{r} * 0.5 + o{r} * (i + 1.0)")
    mod = _emit("def fori_wrapper(x, y):\n"
                "    def body(i, c):\n"
                "        o = inner(x, y)\n"
                f"        return {update}\n"
                f"    return lax.fori_loop(0, 2, body, {_zeros(case.spec)})\n", case.fn)

    def oracle(x, y):
        c = tmap(lambda lf: np.zeros(lf.shape), case.spec)
        for i in range(2):
            o = case.oracle(x, y)
            c = tmap(lambda a, b: a * 0.5 + np.asarray(b, np.float64) * (i + 1.0), c, o)
        return c
    return _next(case, "fori_loop", mod.fori_wrapper, oracle)


def t_while_loop(case):
    update = tree_expr(case.spec, "", lambda r, _: f"c[1]{r} * 0.5 + o{r}")
    mod = _emit("def while_wrapper(x, y):\n"
                "    def cond(c):\n"
                "        return c[0] < 2\n"
                "    def body(c):\n"
                "        o = inner(x, y)\n"
                f"        return c[0] + 1, {update}\n"
                f"    return lax.while_loop(cond, body, (0, {_zeros(case.spec)}))[1]\n",
                case.fn)

    def oracle(x, y):
        c = tmap(lambda lf: np.zeros(lf.shape), case.spec)
        for _ in range(2):
            o = case.oracle(x, y)
            c = tmap(lambda a, b: a * 0.5 + np.asarray(b, np.float64), c, o)
        return c
    return _next(case, "while_loop", mod.while_wrapper, oracle)


def t_scan(case):
    xt = tree_expr(case.args[0], "x", lambda r, _: f"{r} * t")
    carry = tree_expr(case.spec, "", lambda r, _: f"c{r} + o{r}")
    mod = _emit("def scan_wrapper(x, y):\n"
                "    def step(c, t):\n"
                f"        o = inner({xt}, y)\n"
                f"        return {carry}, o\n"
                f"    return lax.scan(step, {_zeros(case.spec)}, np.array([1.0, 0.5]))\n",
                case.fn)

    def oracle(x, y):
        c = tmap(lambda lf: np.zeros(lf.shape), case.spec)
        ys = []
        for t in (1.0, 0.5):
            o = case.oracle(tmap(lambda a: np.asarray(a, np.float64) * t, x), y)
            c = tmap(lambda a, b: a + np.asarray(b, np.float64), c, o)
            ys.append(o)
        return c, tree_stack(ys)
    spec = (case.spec, tmap(lambda lf: Leaf((2,) + lf.shape), case.spec))
    return _next(case, "scan", mod.scan_wrapper, oracle, spec=spec)


def t_map(case):
    mod = _emit("def map_wrapper(x, y):\n"
                "    return lax.map(lambda xi: inner(xi, y), x)\n", case.fn)
    args = (_batched(case.args[0], 0), case.args[1])

    def oracle(x, y):
        return tree_stack([case.oracle(tree_take(x, b), y) for b in range(BATCH)])
    return _next(case, "map", mod.map_wrapper, oracle, args=args,
                 spec=_insert_axis(case.spec, 0))


TRANSFORMS = {
    "grad": t_grad,
    "value_and_grad": t_value_and_grad,
    "grad_xy": t_grad_xy,
    "vjp": t_vjp,
    "vmap_vjp": t_vmap_vjp,
    "jvp": t_jvp,
    "linearize": t_linearize,
    "vmap_linearize": t_vmap_linearize,
    "vmap": make_vmap("vmap", 0, 0),
    "vmap_x": make_vmap("vmap_x", (0, None), 0),
    "vmap_neg": make_vmap("vmap_neg", (-1, 0), -1),
    "vmap_y_out1": make_vmap("vmap_y_out1", (None, 0), 1),
    "jit": t_jit,
    "cond": t_cond,
    "switch": t_switch,
    "fori_loop": t_fori_loop,
    "while_loop": t_while_loop,
    "scan": t_scan,
    "map": t_map,
}


def base_case(program, make_args, seed=0):
    args = make_args(np.random.default_rng(seed))
    return Case(program, program, args, spec_of(program(*args)))


def build(chain, program, make_args, seed=0):
    """The Case for ``chain`` (outermost first) applied to ``program``; None: n/a."""
    case = base_case(program, make_args, seed)
    for name in reversed(chain):
        case = TRANSFORMS[name](case)
        if case is None:
            return None
    return case


def applicable(chain, program, make_args):
    """Whether every step applies (decided from specs alone, without astjax)."""
    case = base_case(program, make_args)
    for name in reversed(chain):
        if name.startswith("vmap_y_out1"):
            if any(len(lf.shape) < 1 for lf in leaves(case.spec)):
                return False
        # specs only: reuse the transformations with a dummy function
        case = _spec_step(case, name)
    return True


def _spec_step(case, name):
    """The spec and arguments a transformation produces (no astjax, no oracle)."""
    x, y = case.args
    if name == "grad":
        spec = spec_of(x)
    elif name == "value_and_grad":
        spec = (Leaf(()), spec_of(x))
    elif name in ("grad_xy", "vjp"):
        spec = (spec_of(x), spec_of(y))
    elif name == "vmap_vjp":
        spec = tmap(lambda lf: Leaf((2,) + lf.shape), (spec_of(x), spec_of(y)))
    elif name in ("jvp", "linearize"):
        spec = (case.spec, case.spec)
    elif name == "vmap_linearize":
        spec = tmap(lambda lf: Leaf((2,) + lf.shape), case.spec)
    elif name.startswith("vmap") or name == "map":
        in_axes, out_axes = {"vmap": ((0, 0), 0), "vmap_x": ((0, None), 0),
                             "vmap_neg": ((-1, 0), -1), "vmap_y_out1": ((None, 0), 1),
                             "map": ((0, None), 0)}[name]
        args = tuple(a if ax is None else _batched(a, ax) for a, ax in zip(case.args, in_axes))
        return replace(case, args=args, spec=_insert_axis(case.spec, out_axes))
    elif name == "scan":
        spec = (case.spec, tmap(lambda lf: Leaf((2,) + lf.shape), case.spec))
    else:
        spec = case.spec
    return replace(case, spec=spec)


def check(case):
    """Run the case: astjax's result against the oracle's (raises Mismatch on a difference)."""
    from fuzzgen import assert_tree_close
    expected = case.oracle(*case.args)
    actual = case.fn(*case.args)
    tol = case.tolerance()
    assert_tree_close(actual, expected, rtol=tol, atol=tol, what=".".join(case.chain))


def chains(names, length):
    return [c for c in itertools.product(names, repeat=length)]


# ------------------------------------------------------------------ recording failures

FAILURE_CLASSES = {
    "nested_ad": "a derivative of a function that calls astjax.vjp or astjax.linearize "
                 "(and uses the pulled-back or pushed-forward values) is a silent zero in "
                 "reverse mode and refused in forward mode: the call has no rule and its "
                 "result is a tuple (class 1 through a nested transformation)",
    "vmap_of_pullback": "vmap of the function vjp returns is refused: its cotangent shape "
                        "check runs on the batched cotangent",
    "vmap_of_f_jvp": "vmap of linearize's f_jvp is refused (*args parameters)",
    "batch_nested_ad": "vmap of a function that calls vjp or linearize: no batching rule",
    "residual_unbound": "vjp/linearize of a function with an if whose branch did not run: "
                        "the residual tuple reads a variable that was never assigned "
                        "(UnboundLocalError in generated code)",
    "linearize_lax_carry": "linearize of lax.fori_loop/lax.scan: NameError on the carry's "
                           "tangent in generated code",
    "linearize_of_grad_loop": "linearize (or vmap of it) of grad of a function with a loop: "
                              "IndexError, pop from an empty tape",
    "stacked_in_loop": "the gradient through lax.scan's ys / lax.map inside an outer loop "
                       "(or a loop that vmap/jvp/fori_loop/while_loop/scan/map make) counts "
                       "only the last outer iteration",
    "grad_vmap_out_axes": "grad through vmap with out_axes != 0 (class 8)",
    "view_inplace": "in-place `z[i] op= v` reads z[i] as a view that the update then "
                    "overwrites, so the derivative sees the new value (vmap makes the "
                    "integer index a view too)",
    "tree_restack": "jvp of jvp through lax.scan is refused: rt.tree_restack has no rule",
    "vmap_index_crash": "vmap of cond/switch/while_loop around fancy indexing with a list: "
                        "TypeError inside generated code",
    "vmap_out_axes_pytree": "vmap with out_axes=-1 or in_axes=-1 on pytree arguments or "
                            "outputs: internal AxisError/ValueError",
    "false_recursion": "two different functions with the same name, one calling the other "
                       "(wrappers from different modules), are refused as recursion",
    "ad_of_vmap_of_vmap": "a derivative of vmap(vmap(f)) is refused: the merged batched "
                          "function has *args parameters",
    "third_order": "third-order reverse mode: wrong numbers, or refused through add's "
                   "cotangent rule (class 7)",
    "batch_of_vmap_entry": "vmap of code calling a vmapped function inside lax control flow: "
                           "no batching rule for rb.leaf_axis_size",
    "batch_creation": "vmap of lax.cond around lax.scan: no batching rule for np.zeros",
    "triple_crash": "internal errors (AttributeError, TypeError, ValueError, KeyError from "
                    "generated code) in three-deep compositions of vmap with "
                    "grad/value_and_grad/vjp/linearize",
    "run_time_function": "a function that calls astjax.vjp/linearize and calls (or vmaps) the "
                         "function they return: refused at the user's line (a function "
                         "computed at run time; issue 11 makes the frontend evaluate it "
                         "when the code is generated)",
    "alias_sites": "an in-place update in a loop of generated code (vmap's loop form, lax "
                   "scan/map) refused by the alias analysis: memory is named by the "
                   "statement that made it, so this iteration's array and earlier ones "
                   "kept in a list look alike (a located refusal, never a wrong number)",
    "other": "unclassified failure",
}


def classify(chain, program, exc):
    msg = f"{type(exc).__name__}: {exc}"
    ders = [i for i, n in enumerate(chain) if n in DERIVATIVES]
    if "holds a value computed at run time" in msg or "callee is a value computed at " \
            "run time" in msg:
        return "run_time_function"
    if "shares its memory and is read afterwards" in msg:
        return "alias_sites"
    if "cotangent shape" in msg:
        return "vmap_of_pullback"
    if "f_jvp: *args" in msg or "out_vmap()" in msg or "vmap_linearize_wrapper_vmap" in msg:
        return "vmap_of_f_jvp"
    if "cannot batch the call to vjp()" in msg or "cannot batch the call to linearize()" in msg:
        return "batch_nested_ad"
    if "UnboundLocalError" in msg:
        return "residual_unbound"
    if "NameError" in msg and "_dot" in msg:
        return "linearize_lax_carry"
    if "pop from empty list" in msg:
        return "linearize_of_grad_loop"
    if "tree_restack" in msg:
        return "tree_restack"
    if "only integer scalar arrays" in msg:
        return "vmap_index_crash"
    if "AxisError" in msg or "inhomogeneous" in msg:
        return "vmap_out_axes_pytree"
    if "recursive call to" in msg:
        return "false_recursion"
    if "*args/**kwargs parameters are not supported" in msg:
        return "ad_of_vmap_of_vmap"
    if "add_cot_vjp" in msg:
        return "third_order"
    if "leaf_axis_size" in msg:
        return "batch_of_vmap_entry"
    if "no batching rule for np.zeros" in msg:
        return "batch_creation"
    if "cannot differentiate through vjp()" in msg or \
            "cannot differentiate through linearize()" in msg:
        return "nested_ad"
    if isinstance(exc, AssertionError):
        if len(ders) == 3 and program == "tuple_in":
            return "third_order"
        for i, n in enumerate(chain):
            if n in ("vjp", "linearize") and any(d < i for d in ders):
                return "nested_ad"
        if program == "scan":
            return "stacked_in_loop"
        loops = ("fori_loop", "while_loop", "scan", "map", "vmap", "vmap_x", "vmap_neg",
                 "vmap_y_out1")
        for i, n in enumerate(chain):
            if n in ("scan", "map", "vmap", "vmap_x") and any(m in loops for m in chain[:i]):
                return "stacked_in_loop"
        for i, n in enumerate(chain):
            if n in ("vmap_neg", "vmap_y_out1") and any(d < i for d in ders):
                return "grad_vmap_out_axes"
        if program == "inplace":
            return "view_inplace"
    if isinstance(exc, (AttributeError, TypeError, ValueError, KeyError)) and len(chain) == 3:
        return "triple_crash"
    return "other"


def isolate():
    """Make a case independent of the ones before it.

    astjax's cache of generated functions' parsed source (``source._PLAIN``) is keyed by
    code object and outlives ``clear_cache``; it hands an earlier function's globals to
    a later one (``test_stale_generated_source`` shows the wrong numbers), so cases
    would depend on their order.  The matrix tests compositions; that bug has its own
    test.
    """
    from astjax.frontend import source
    getattr(source, "_PLAIN", {}).clear()


def run_case(chain, program, make_args):
    """None if the case passes, else the exception."""
    isolate()
    try:
        check(build(chain, program, make_args))
    except Exception as exc:  # noqa: BLE001  (every failure is recorded)
        return exc
    finally:
        astjax.clear_cache()
    return None


def record(full=False, path=None):
    """Run the matrix and write tests/compose_known.py: failing case id -> class."""
    import os
    import sys
    import time
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import test_compositions as tc
    from programs.corpus import CORPUS
    cases = tc.matrix(full)
    known, counts, t0 = {}, {}, time.time()
    for chain, prog in cases:
        exc = run_case(chain, *CORPUS[prog])
        if exc is not None:
            key = classify(chain, prog, exc)
            known[tc.case_id(chain, prog)] = key
            counts[key] = counts.get(key, 0) + 1
            if key == "other":
                print("unclassified:", tc.case_id(chain, prog), str(exc).splitlines()[0][:200])
    print(f"{len(cases)} cases, {len(known)} failing, {time.time() - t0:.0f} s")
    for k, v in sorted(counts.items(), key=lambda kv: -kv[1]):
        print(f"  {v:5d}  {k}")
    path = path or os.path.join(os.path.dirname(os.path.abspath(__file__)), "compose_known.py")
    lines = ["# ruff: noqa: E501",
             '"""Composition-matrix cases that fail today, by class (written by',
             '``python tests/compose.py --record``; tests/test_compositions.py runs them as',
             'strict xfails, so a fix shows up as XPASS: then delete the entry or re-record)."""',
             "", "CLASSES = {"]
    lines += [f"    {k!r}: {v!r}," for k, v in FAILURE_CLASSES.items()]
    lines += ["}", "", "KNOWN = {"]
    lines += [f"    {cid!r}: {key!r}," for cid, key in sorted(known.items())]
    lines += ["}", ""]
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines))


if __name__ == "__main__":
    import sys
    if "--record" in sys.argv:
        record(full="--full" in sys.argv)
