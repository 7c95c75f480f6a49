"""Table-driven checks of the jvp templates (``templates/jvp.py``).

Every primitive with a vjp template in ``templates/vjp.py`` (the NumPy-facing part of
``astjax.primitives.REGISTRY``; the core-form primitives have their own rules) is
checked for:
- a jvp template ``def <name>(ans, <params with the registry defaults>, d<param>=None
  ...)``, one tangent parameter per ``diff`` entry, whose body is straight-line code
  over registered primitives ending in one ``return`` of one value;
- a correct Jacobian-vector product: with random float64 tangents for every
  differentiable parameter, the template's result equals the central finite
  difference ``(f(x + eps t) - f(x - eps t)) / 2 eps`` of ``impl``, and has exactly the
  shape, structure and floating dtype of ``ans``;
- agreement with the vjp template: ``<ct, jvp(t)> == <vjp(ct), t>`` for random ``ct``;
- one tangent at a time: the others absent, the result still matches finite
  differences in that one direction;
- float32 in, float32 tangents out.

Absent tangents (choice documented here): a template is not called eagerly with None.
``inline_eval`` evaluates its body the way forward mode inlines it
(``astjax/transforms/forward.py``): where a rule may receive None (kinds
"elementwise", "linalg", "reduction", "structural", "other" and every primitive
spelled ``ra.*``), an absent tangent is a symbolic zero; an operation whose tangent
operands are all zero is zero, ``a + 0`` is ``a``, ``0 - b`` is ``-b``, a primitive
spelled ``ra.*`` (the helpers, and also ``np.where``, ``np.clip``...) or a tuple display
gets None for a zero, and any other operation the scalar 0.0;
when a term was dropped the result is fitted with ``ra.tangent_like``.  Other kinds
get concrete zeros for absent tangents, as forward mode instantiates them.
"""
from __future__ import annotations

import ast
import builtins
import collections
import inspect
import textwrap

import numpy as np
import pytest
from test_rules_vjp import (BINARY, CANON, DIFF, EXTRA, IMPLICIT, RAISES, SYMMETRIC, TABLE,
                            _FORBIDDEN, _wide,
                            _pool, _resolve, axpy, bind, call_impl, call_template,
                            check_cotangent, diff_quotient, direction, to_float32, tree_map,
                            vdot_tree)

from astjax import primitives as P
from astjax import runtime_array as ra
from astjax.templates import jvp as J
from astjax.templates import vjp as V

EPS = 1e-6
RTOL = 1e-5

JVP = {n: f for n, f in vars(J).items() if inspect.isfunction(f) and f.__module__ == J.__name__}
VJP = {n: f for n, f in vars(V).items() if inspect.isfunction(f) and f.__module__ == V.__name__}
# The kinds whose rules forward mode may hand None for an absent tangent.
NONE_KINDS = {"elementwise", "linalg", "reduction", "structural", "other", "tape"}
# Tangents whose jvp raises NotImplementedError (third derivatives).
UNSUPPORTED = {"norm_vjp_x": {"x"}}
CHECKED = [n for n in DIFF if n not in UNSUPPORTED and n not in IMPLICIT]


def none_ok(prim):
    return prim.kind in NONE_KINDS or prim.code.startswith("ra.")


def tname(param):
    return "d" + param.lstrip("*")


# ---------------------------------------------------------------------------- calling


def call_jvp(prim, ans, values, tangents):
    """Call the template eagerly: primal parameters as generated code binds them (a
    variadic one spread), tangents by keyword (``tangents``: diff entry -> tangent)."""
    fn = JVP[prim.name]
    args, kwargs, seen_star = [ans], {}, False
    for p in prim.params:
        if p.startswith("*"):
            args.extend(values[p])
            seen_star = True
        elif seen_star:
            kwargs[p] = values[p]
        else:
            args.append(values[p])
    for d, t in tangents.items():
        kwargs[tname(d)] = t
    with np.errstate(divide="raise", invalid="raise", over="raise"):
        return fn(*args, **kwargs)


class _Zero:
    def __repr__(self):
        return "ZERO"


ZERO = _Zero()


def _swap_zero(v, value):
    if v is ZERO:
        return value
    if isinstance(v, tuple):
        return tuple(_swap_zero(x, value) for x in v)
    return v


class _Inline:
    """One evaluation of a template body with forward mode's zero propagation."""

    def __init__(self, env, carrying):
        self.env = env
        self.carrying = carrying
        self.dropped = False

    def run(self, fdef):
        for stmt in fdef.body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                continue
            if isinstance(stmt, ast.Return):
                return self.eval(stmt.value)[0]
            assert isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            value, live = self.eval(stmt.value)
            name = stmt.targets[0].id
            self.env[name] = value
            if live:
                self.carrying.add(name)
            else:
                self.carrying.discard(name)
        raise AssertionError("no return")

    def eval(self, node):
        """(value, carries a non-zero tangent); a zero tangent is ZERO."""
        if isinstance(node, ast.Constant):
            return node.value, False
        if isinstance(node, ast.Name):
            return self.env[node.id], node.id in self.carrying
        if isinstance(node, ast.Attribute):
            return _resolve(node), False
        if isinstance(node, ast.Tuple):
            ops = [self.eval(e) for e in node.elts]
            return self.apply("structural", lambda *v: tuple(v), ops, {})
        if isinstance(node, ast.Call):
            func = _resolve(node.func)
            prim = P.lookup_callable(func)
            # forward mode hands None to primitives spelled ra.* (np.where is ra.where)
            kind = "ra" if prim.code.startswith(("ra.", "rt.")) or prim.kind == "structural" \
                else "np"
            ops = [self.eval(a) for a in node.args]
            kw = {k.arg: self.eval(k.value) for k in node.keywords}
            return self.apply(kind, func, ops, kw)
        if isinstance(node, ast.BinOp):
            op = type(node.op).__name__
            kind = {"Add": "add", "Sub": "sub"}.get(op, "np")
            f = {"Add": lambda a, b: a + b, "Sub": lambda a, b: a - b,
                 "Mult": lambda a, b: a * b, "Div": lambda a, b: a / b,
                 "Pow": lambda a, b: a ** b, "MatMult": lambda a, b: a @ b}[op]
            return self.apply(kind, f, [self.eval(node.left), self.eval(node.right)], {})
        if isinstance(node, ast.UnaryOp):
            f = {"USub": lambda a: -a, "UAdd": lambda a: +a}[type(node.op).__name__]
            return self.apply("np", f, [self.eval(node.operand)], {})
        if isinstance(node, ast.Compare):
            assert len(node.ops) == 1
            f = {"Eq": np.equal, "Gt": np.greater, "GtE": np.greater_equal, "Lt": np.less,
                 "LtE": np.less_equal}[type(node.ops[0]).__name__]
            return self.apply("np", f, [self.eval(node.left), self.eval(node.comparators[0])],
                              {})
        raise AssertionError(f"unexpected {ast.dump(node)[:60]}")

    def apply(self, kind, func, ops, kw):
        flat = []
        for v, live in list(ops) + list(kw.values()):
            flat.extend(v if isinstance(v, tuple) and (live or any(e is ZERO for e in v)) else [v])
        zeros = any(v is ZERO for v in flat)
        live = any(c for _, c in list(ops) + list(kw.values()))
        if zeros and not live:
            return ZERO, False
        if zeros and kind in ("add", "sub"):
            (a, _), (b, _) = ops
            self.dropped = True
            if b is ZERO:
                return a, True
            return (b if kind == "add" else -b), True
        if zeros:
            value = None if kind in ("ra", "structural") else 0.0
            self.dropped |= value is not None
            ops = [(_swap_zero(v, value), c) for v, c in ops]
            kw = {k: (_swap_zero(v, value), c) for k, (v, c) in kw.items()}
        with np.errstate(divide="raise", invalid="raise", over="raise"):
            out = func(*[v for v, _ in ops], **{k: v for k, (v, _) in kw.items()})
        return out, live


def _fdef(fn):
    return ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]


def inline_eval(prim, ans, values, tangents):
    """The template's result as forward mode computes it when only the tangents in
    ``tangents`` are present (None: zero; others absent).  None: a zero tangent."""
    env = {"ans": ans}
    for p in prim.params:
        env[p.lstrip("*")] = values[p]
    carrying = set()
    for d in prim.diff:
        t = tangents.get(d)
        if not none_ok(prim) and t is None:
            t = tuple(ra._tangent_zeros(x) for x in values[d]) if d.startswith("*") \
                else ra._tangent_zeros(values[d])
        if d.startswith("*"):
            t = tuple(ZERO if ti is None else ti for ti in (t or [None] * len(values[d])))
            live = any(ti is not ZERO for ti in t)
        else:
            live = t is not None
            t = ZERO if t is None else t
        env[tname(d)] = t
        if live:
            carrying.add(tname(d))
    run = _Inline(env, carrying)
    out = run.run(_fdef(JVP[prim.name]))
    if out is ZERO:
        return None
    return ra.tangent_like(out, ans) if run.dropped else out


# ---------------------------------------------------------------------------- checks


def assert_close(jv, fd, where):
    """Tangent ``jv`` (None: zero) against finite differences ``fd``, leaf by leaf."""
    if fd is None:
        return
    if isinstance(fd, dict):
        for k in fd:
            assert_close(jv.get(k) if jv is not None else None, fd[k], f"{where}[{k!r}]")
        return
    if isinstance(fd, (list, tuple)):
        assert jv is None or len(jv) == len(fd), where
        for i, f in enumerate(fd):
            assert_close(jv[i] if jv is not None else None, f, f"{where}[{i}]")
        return
    fd = _wide(fd)
    jv = np.zeros_like(fd) if jv is None else _wide(jv)
    assert jv.shape == fd.shape, f"{where}: tangent shape {jv.shape} != {fd.shape}"
    err = float(np.max(np.abs(jv - fd), initial=0.0))
    scale = builtins.max(float(np.max(np.abs(fd), initial=0.0)),
                         float(np.max(np.abs(jv), initial=0.0)), 1e-3)
    assert err <= RTOL * scale + 1e-8, \
        f"{where}: finite differences {fd.ravel()[:6]}, rule {jv.ravel()[:6]}"


def setup(name, args, kwargs, seed, dtype=None):
    """(prim, values, ans, tangents for every diff entry) at one point."""
    prim = P.REGISTRY[name]
    rng = np.random.default_rng(seed)
    canon = CANON.get(name, lambda r: r)
    values = bind(prim, args, kwargs)
    ans = canon(call_impl(prim, values))
    tangents = {}
    for d in prim.diff:
        t = direction(values[d], rng, dtype)
        if name in SYMMETRIC:
            t = (t + np.swapaxes(t, -1, -2)) / 2
        tangents[d] = t
    return prim, values, ans, tangents


def finite_difference(prim, values, tangents):
    canon = CANON.get(prim.name, lambda r: r)
    plus = {**values, **{d: axpy(values[d], t, EPS) for d, t in tangents.items()}}
    minus = {**values, **{d: axpy(values[d], t, -EPS) for d, t in tangents.items()}}
    return diff_quotient(canon(call_impl(prim, plus)), canon(call_impl(prim, minus)), EPS)


def check_jvp(name, args, kwargs, seed=0):
    """All tangents at once (eagerly, and inlined), then one at a time (inlined)."""
    prim, values, ans, tangents = setup(name, args, kwargs, seed)
    jv = all_tangents(prim, ans, values, tangents)
    check_cotangent(jv, ans, f"{name}: tangent")
    assert_close(jv, finite_difference(prim, values, tangents), f"{name}: all tangents")
    if len(prim.diff) == 1 and not prim.diff[0].startswith("*"):
        return
    for d in prim.diff:
        parts = [None] if not d.startswith("*") else range(len(values[d]))
        for i in parts:
            t = tangents[d]
            if i is not None:
                t = tuple(ti if j == i else None for j, ti in enumerate(t))
                if all(ti is None for ti in t):
                    continue
            one = inline_eval(prim, ans, values, {d: t})
            check_cotangent(one, ans, f"{name}: tangent along {d}")
            fd = finite_difference(prim, values, {d: t})
            assert_close(one, fd, f"{name}: tangent along {d}" + ("" if i is None else f"[{i}]"))


def _has_none(t):
    return t is None or isinstance(t, tuple) and any(e is None for e in t)


def all_tangents(prim, ans, values, tangents):
    """The tangent with every tangent there is: an eager call of the template, which
    must agree with the inlined evaluation; inlined only when some parameter has no
    tangent (None: an absent bound, an integer exponent...)."""
    inlined = inline_eval(prim, ans, values, tangents)
    if any(_has_none(t) for t in tangents.values()):
        return inlined
    jv = call_jvp(prim, ans, values, tangents)
    assert_close(inlined, jv, f"{prim.name}: inlined")
    return jv


def check_against_vjp(name, args, kwargs, seed=0):
    """``<ct, jvp(t)> == <vjp(ct), t>``."""
    prim, values, ans, tangents = setup(name, args, kwargs, seed)
    ct = direction(ans, np.random.default_rng(seed + 100))
    jv = all_tangents(prim, ans, values, tangents)
    cots = call_template(prim, ct, ans, values)
    lhs = vdot_tree(ct, jv)
    rhs = builtins.sum(vdot_tree(c, tangents[d]) for d, c in zip(prim.diff, cots))
    scale = builtins.max(abs(lhs), abs(rhs), 1e-3)
    single = []
    tree_map(lambda v: single.append(v.dtype == np.float32) if hasattr(v, "dtype") else None,
             values)
    tol = 1e-5 if builtins.any(single) else 1e-9  # rounding of float32 cotangents
    assert abs(lhs - rhs) <= tol * scale + 1e-10, f"{name}: <ct, jvp> {lhs!r}, <vjp, t> {rhs!r}"


# ---------------------------------------------------------------------------- the table


def test_every_vjp_rule_has_a_jvp_rule():
    assert set(VJP) == set(JVP), (sorted(set(VJP) - set(JVP)), sorted(set(JVP) - set(VJP)))
    assert len(JVP) > 190


@pytest.mark.parametrize("name", DIFF)
def test_jvp_template_signature(name):
    prim = TABLE[name]
    assert name in JVP, f"{name}: no template in templates/jvp.py"
    sig = inspect.signature(JVP[name])
    expected = ["ans"] + [p.lstrip("*") for p in prim.params] + [tname(d) for d in prim.diff]
    assert list(sig.parameters) == expected, name
    for p in prim.params:
        par = sig.parameters[p.lstrip("*")]
        if p.startswith("*"):
            assert par.kind is par.VAR_POSITIONAL, (name, p)
        elif p in prim.defaults:
            assert par.default == prim.defaults[p] or par.default is prim.defaults[p], (name, p)
        else:
            assert par.default is par.empty, (name, p)
    for d in prim.diff:
        assert sig.parameters[tname(d)].default is None, (name, d)


def test_every_jvp_template_is_a_differentiable_primitive():
    for name in JVP:
        assert name in TABLE and TABLE[name].differentiable, name


@pytest.mark.parametrize("name", sorted(JVP))
def test_jvp_template_is_straight_line_over_primitives(name):
    fdef = _fdef(JVP[name])
    ret = fdef.body[-1]
    assert isinstance(ret, ast.Return) and ret.value is not None, name
    # forward mode reads one result: a tuple output is built, not returned as a display
    assert not isinstance(ret.value, ast.Tuple), f"{name}: returns several values"
    params = {a.arg for a in fdef.args.args + fdef.args.kwonlyargs}
    if fdef.args.vararg:
        params.add(fdef.args.vararg.arg)
    local = set(params)
    for stmt in fdef.body:
        assert isinstance(stmt, (ast.Assign, ast.Return)), f"{name}: {ast.dump(stmt)[:60]}"
        for node in ast.walk(stmt):
            assert not isinstance(node, _FORBIDDEN), f"{name}: {type(node).__name__}"
            assert not isinstance(node, ast.Subscript), f"{name}: subscript (use ra.getitem)"
            if isinstance(node, ast.Call):
                obj = _resolve(node.func)
                assert obj is not None, f"{name}: calls {ast.unparse(node.func)}"
                assert P.lookup_callable(obj) is not None, \
                    f"{name}: {ast.unparse(node.func)} is not a registered primitive"
            if isinstance(node, (ast.BinOp, ast.UnaryOp)):
                assert type(node.op).__name__ in P.BY_OPERATOR, name
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                assert node.id in local | {"np", "ra", "jr", "sh"}, f"{name}: reads {node.id}"
        if isinstance(stmt, ast.Assign):
            assert len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name), name
            local.add(stmt.targets[0].id)


# ---------------------------------------------------------------------------- jvps


@pytest.mark.parametrize("name", CHECKED)
def test_jvp_matches_finite_differences(name):
    prim = TABLE[name]
    for seed in (0, 1):
        args, kwargs = prim.sample(np.random.default_rng(seed))
        check_jvp(name, args, kwargs, seed)


@pytest.mark.parametrize("name", [n for n in CHECKED if n not in RAISES])
def test_jvp_agrees_with_vjp(name):
    prim = TABLE[name]
    args, kwargs = prim.sample(np.random.default_rng(2))
    check_against_vjp(name, args, kwargs, 2)


@pytest.mark.parametrize("name", CHECKED)
def test_float32_tangents_stay_float32(name):
    prim = TABLE[name]
    args, kwargs = prim.sample(np.random.default_rng(0))
    args, kwargs = to_float32(args), to_float32(kwargs)
    prim, values, ans, tangents = setup(name, args, kwargs, 3, None)
    check_cotangent(all_tangents(prim, ans, values, tangents), ans, f"{name} (float32)")
    for d in prim.diff:
        one = inline_eval(prim, ans, values, {d: tangents[d]})
        check_cotangent(one, ans, f"{name} (float32) along {d}")


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_unimplemented_third_derivatives_raise(name):
    prim = TABLE[name]
    args, kwargs = prim.sample(np.random.default_rng(0))
    prim, values, ans, tangents = setup(name, args, kwargs, 0)
    with pytest.raises(NotImplementedError):
        call_jvp(prim, ans, values, tangents)
    for d in prim.diff:
        if d in UNSUPPORTED[name]:
            with pytest.raises(NotImplementedError):
                inline_eval(prim, ans, values, {d: tangents[d]})
        else:
            one = inline_eval(prim, ans, values, {d: tangents[d]})
            assert_close(one, finite_difference(prim, values, {d: tangents[d]}), f"{name} {d}")


@pytest.mark.parametrize("case", range(len(EXTRA)),
                         ids=[f"{n}-{i}" for i, (n, _) in enumerate(EXTRA)])
def test_jvp_more_forms(case):
    name, sample = EXTRA[case]
    args, kwargs = sample(np.random.default_rng(case))
    check_jvp(name, args, kwargs, case)
    args, kwargs = sample(np.random.default_rng(case))
    check_against_vjp(name, args, kwargs, case)


# Forms the vjp table does not need: forward-mode helpers, containers, None entries.
Pair = collections.namedtuple("Pair", "a b")
MORE = [
    ("tangent_like", lambda r: ((np.float64(1.5), 2.0), {})),
    ("tangent_like", lambda r: (([r.standard_normal(3), None], [r.standard_normal((2, 3)), 1.0]),
                                {})),
    ("tangent_like", lambda r: ((Pair(r.standard_normal(2), 1.5), Pair(r.standard_normal(2), 0.5)),
                                {})),
    ("getitem_jvp", lambda r: (([r.standard_normal(3), None], [r.standard_normal(3), 2.0], 1), {})),
    ("getitem_jvp", lambda r: (({"w": r.standard_normal(2)}, {"w": r.standard_normal(2)}, "w"),
                               {})),
    ("setitem_jvp", lambda r: (([r.standard_normal(2), 1.0], 1, 2.5, [r.standard_normal(2), 1.0]),
                               {})),
    ("norm_jvp", lambda r: ((r.standard_normal((3, 4)), r.standard_normal((3, 4))), {})),
    ("norm_jvp", lambda r: ((r.standard_normal(5), r.standard_normal(5)), {"ord": 1})),
    ("norm_vjp", lambda r: ((r.standard_normal(()), r.standard_normal((3, 4))), {"ord": "fro"})),
    ("norm_vjp_t", lambda r: ((r.standard_normal((3, 4)), r.standard_normal((3, 4))),
                              {"axis": 0, "keepdims": True})),
    ("dot_grad_a", lambda r: ((r.standard_normal(3), r.standard_normal((3, 4)),
                               r.standard_normal(4)), {})),
    ("dot_grad_b", lambda r: ((r.standard_normal((2, 5)), r.standard_normal((2, 3)),
                               r.standard_normal((3, 5))), {})),
    ("prod_others_last", lambda r: ((r.standard_normal((2, 4)),), {})),
    ("py_max", lambda r: (([0.5, 2.0, -1.0],), {})),
    ("py_sum", lambda r: (([1.0, r.standard_normal(3)], r.standard_normal((2, 3))), {})),
    ("clip", lambda r: ((r.standard_normal((3, 4)),), {"max": r.standard_normal(4)})),
    ("slogdet", lambda r: ((r.standard_normal((2, 3, 3)) - 3 * np.eye(3),), {})),
    ("eigvalsh", lambda r: ((np.eye(3) * 4 + r.standard_normal((3, 3)),), {"UPLO": "U"})),
    ("full", lambda r: (((2, 4), r.standard_normal(4)), {})),
]


@pytest.mark.parametrize("case", range(len(MORE)),
                         ids=[f"{n}-{i}" for i, (n, _) in enumerate(MORE)])
def test_jvp_helper_forms(case):
    name, sample = MORE[case]
    check_jvp(name, *sample(np.random.default_rng(case)), case)
    if name not in RAISES:
        check_against_vjp(name, *sample(np.random.default_rng(case)), case)


@pytest.mark.parametrize("shapes", [((3, 4), (4,)), ((3, 1), (1, 4)), ((3, 4), None),
                                    (None, (3, 4)), ((2, 1, 4), (3, 1))],
                         ids=["row", "outer", "py-scalar-right", "py-scalar-left", "3d"])
@pytest.mark.parametrize("name", BINARY)
def test_binary_broadcasting(name, shapes):
    """Operands drawn from the sample's own values (same domain), in broadcasting shapes."""
    prim = TABLE[name]
    rng = np.random.default_rng(7)
    (x, y), _ = prim.sample(rng)
    ops = []
    for pool, shape in zip((_pool(x), _pool(y)), shapes):
        ops.append(float(rng.choice(pool)) if shape is None else rng.choice(pool, size=shape))
    check_jvp(name, tuple(ops), {}, 3)


# ---------------------------------------------------------------------------- semantics


def _jvp(name, tangents, *args, **kwargs):
    prim = P.REGISTRY[name]
    values = bind(prim, args, kwargs)
    ans = call_impl(prim, values)
    return inline_eval(prim, ans, values, tangents)


def test_absent_tangents_drop_their_terms():
    x, y = np.array([1.0, 2.0]), np.array([3.0, 5.0])
    assert np.array_equal(_jvp("multiply", {"x": np.ones(2)}, x, y), y)
    assert np.array_equal(_jvp("subtract", {"y": np.ones(2)}, x, y), -np.ones(2))
    assert _jvp("multiply", {}, x, y) is None
    # a dropped term never changes the shape or dtype
    t = _jvp("add", {"y": np.ones(1, np.float32)}, np.ones((2, 3), np.float32),
             np.ones(1, np.float32))
    assert t.shape == (2, 3) and t.dtype == np.float32
    t = _jvp("where", {"x": np.array(2.0)}, np.array([True, False]), 1.0, y)
    assert np.array_equal(t, [2.0, 0.0])


def test_ties_share_the_tangent_like_jax():
    x, y = np.array([1.0, 2.0]), np.array([1.0, 3.0])
    t = _jvp("maximum", {"x": np.array([2.0, 2.0]), "y": np.array([4.0, 4.0])}, x, y)
    assert np.allclose(t, [3.0, 4.0])
    t = _jvp("max", {"a": np.array([[1.0, 3.0, 5.0]])}, np.array([[1.0, 2.0, 2.0]]), axis=1)
    assert np.allclose(t, [4.0])
    assert np.allclose(_jvp("absolute", {"x": np.ones(2)}, np.array([0.0, -1.0])), [1, -1])


def test_rounding_has_zero_tangent():
    for name in ("floor", "ceil", "round", "rint", "trunc", "floor_divide", "fix",
                 "py_round"):
        prim = P.REGISTRY[name]
        args, kwargs = prim.sample(np.random.default_rng(0))
        prim, values, ans, tangents = setup(name, args, kwargs, 0)
        assert call_jvp(prim, ans, values, tangents) is None, name
    # np.sign has a derivative for complex input (z / |z|): on the reals it is exactly 0
    prim, values, ans, tangents = setup("sign", (np.array([-2.0, -0.0, 0.0, 3.0]),), {}, 0)
    t = call_jvp(prim, ans, values, tangents)
    assert t.dtype == ans.dtype and np.all(t == 0), t


def test_container_tangents():
    a = np.arange(3.0)
    # an entry without a tangent reads as zeros of the entry's shape
    t = ra.getitem_jvp([np.ones(3), None], [a, a], 1)
    assert np.array_equal(t, np.zeros(3))
    t = ra.getitem_jvp([None, np.ones(2)], [1.0, a[:2], 2.0], slice(0, 2))
    assert t[0] == 0.0 and np.array_equal(t[1], [1.0, 1.0])
    t = ra.setitem_jvp(None, 0, np.ones(3), [a, 1.0])
    assert t[1] is None and np.array_equal(t[0], np.ones(3))
    t = ra.setitem_jvp(None, 1, None, a)
    assert t is None
    t = ra.setitem_jvp(np.ones(3), 1, None, a)
    assert np.array_equal(t, [1.0, 0.0, 1.0])
    assert ra.sum_tangents([None, np.ones(2), np.ones(2)]).tolist() == [2.0, 2.0]
    assert ra.sum_tangents([None]) == 0.0
    split = _jvp("split", {"ary": np.arange(4.0)}, np.zeros(4), 2)
    assert isinstance(split, list) and np.array_equal(split[1], [2.0, 3.0])
    res = _jvp("eigh", {"a": np.eye(2)}, np.diag([1.0, 2.0]))
    assert type(res).__name__ == "EighResult" and np.allclose(res.eigenvalues, [1.0, 1.0])


def test_tangent_like():
    assert ra.tangent_like(None, np.ones(2)) is None
    t = ra.tangent_like(np.float64(2.0), np.ones((2, 2), np.float32))
    assert t.shape == (2, 2) and t.dtype == np.float32 and np.all(t == 2.0)
    x = np.ones(3)
    assert ra.tangent_like(x, np.zeros(3)) is x
    assert ra.tangent_like(np.array(1.5), 2.0) == 1.5
    zero = ra.tangent_like(np.ones(3), np.arange(3))
    assert zero.dtype == np.float64 and not zero.any()
    assert ra.tangent_like(np.ones(()), 3) == 0.0
    pair = ra.tangent_like([np.ones(1), None], Pair(np.zeros(2), 1.0))
    assert isinstance(pair, Pair) and pair.b is None and np.array_equal(pair.a, [1.0, 1.0])
    assert ra.tangent_like({"w": 1.0}, {"w": np.zeros(2)})["w"].tolist() == [1.0, 1.0]
    assert np.isscalar(ra.tangent_like(np.ones(()), np.float32(1.0)))


def test_unsupported_jvp_is_none_without_tangents():
    assert ra.unsupported_jvp("x", None, (None, None)) is None
    with pytest.raises(NotImplementedError, match="third derivatives"):
        ra.unsupported_jvp("third derivatives", None, (None, np.ones(2)))


def test_pad_jvp_refuses_nonlinear_modes():
    with pytest.raises(NotImplementedError):
        ra.pad_jvp(np.ones(3), 1, "maximum")
    assert np.array_equal(ra.pad_jvp(np.ones(2), 1), [0.0, 1.0, 1.0, 0.0])


def test_third_order_helpers_are_refused():
    for name in ("norm_hvp", "unsupported_jvp"):
        prim = P.REGISTRY[name]
        assert not prim.differentiable and prim.reason and prim.kind not in P.CONSTANT_KINDS


def test_tree_map_imported_helper_still_maps_floats():
    # the finite differences above rely on these helpers from test_rules_vjp
    assert tree_map(lambda v: v * 2, [1.0, 2, np.ones(1)])[1] is None
