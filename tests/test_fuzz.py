"""Differential fuzzing with a fixed small budget (bench/fuzz.py runs long campaigns).

Random programs from astjax's primitive registry and the constructs it accepts
(``tests/fuzzgen.py``) are checked for jit, grad, jvp, vmap, jvp-of-grad,
vmap-of-grad and vmap-of-vjp against eager NumPy, Python loops and float64 finite
differences.
The CI budget skips the constructs whose bugs are known and open
(``fuzzgen.KNOWN_OPEN``) so that any failure here is a new class; each class the
fuzzer found has a shrunk reproducer below, as a strict xfail until it is fixed.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import fuzzgen

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench"))

BUDGET_PROGRAMS = 150
BUDGET_SECONDS = 120.0


def test_fuzz_fixed_budget():
    import fuzz
    summary = fuzz.campaign(BUDGET_PROGRAMS, seed=20261125, avoid=fuzzgen.KNOWN_OPEN,
                            time_limit=BUDGET_SECONDS, per_class=1)
    lines = []
    fuzz.report(summary, lines.append)
    print("\n" + "\n".join(lines))
    assert summary["programs"] >= 20, "the budget ran too few programs to mean anything"
    assert summary["counts"].get("checks", 0) >= 6 * 20
    failures = [f"{key}:\n{info['program'].source()}" for key, info in summary["classes"].items()
                if key[1] != "nan"]
    assert not failures, "new failure classes:\n" + "\n".join(failures)


def test_generator_is_deterministic_and_valid():
    a = fuzzgen.Generator(7).program()
    b = fuzzgen.Generator(7).program()
    assert a.source() == b.source() and np.array_equal(a.x, b.x)
    for seed in range(20):
        p = fuzzgen.Generator(seed).program()
        mod = fuzzgen.SourceModules("fuzz_valid").load(p.module())
        out = mod.prog(p.x, p.y)
        assert np.all(np.isfinite(out)) and np.isfinite(mod.loss(p.x, p.y))


def test_generator_covers_the_registry_and_constructs():
    feats = set()
    for seed in range(400):
        feats |= fuzzgen.Generator(seed).program().features
    tables = fuzzgen.primitive_tables()
    unary = {n for n, *_ in tables["unary"]}
    binary = {n for n, *_ in tables["binary"]}
    constructs = {c for c, _ in fuzzgen.CONSTRUCTS}
    assert len(unary) >= 30 and len(binary) >= 15
    assert len(unary & feats) >= 0.9 * len(unary)
    assert len(binary & feats) >= 0.9 * len(binary)
    assert len(constructs & feats) >= 0.9 * len(constructs)


def test_oracles_catch_a_wrong_gradient(tmp_path):
    """The checks are not vacuous: a deliberately wrong 'transformation' fails them."""
    p = fuzzgen.Program([fuzzgen.Stmt(["v0 = np.sin(x) * y"], "v0", "sin")], "v0",
                        np.full((2, 3), 0.3), np.full(3, 0.2))
    mod = fuzzgen.SourceModules("fuzz_oracle").load(p.module())
    x, y = p.x, p.y
    good = fuzzgen.fd_grad(mod.loss, (x, y), 0)
    fuzzgen.assert_tree_close(np.cos(x) * y * 0.7 * np.cos(np.sin(x) * y * 0.7 + 0.2),
                              good, 1e-8, 1e-8)
    with pytest.raises(fuzzgen.Mismatch):
        fuzzgen.assert_tree_close(good * 1.001, good, 1e-6, 1e-6)
    with pytest.raises(fuzzgen.Mismatch):
        fuzzgen.assert_tree_close((good,), [good], 1e-6, 1e-6)


# ----------------------------------------------------------- classes the fuzzer found

X = np.array([0.7, 0.2, 0.5])
Y = np.array([0.3, -0.4])


def _grad_vs_fd(f, args, argnum):
    import astjax
    g = astjax.grad(f, argnums=argnum)(*args)
    fuzzgen.assert_tree_close(g, fuzzgen.fd_grad(f, args, argnum), 1e-7, 1e-7, "grad")


def test_found_imul_slice():
    from programs import found
    _grad_vs_fd(found.imul_slice, (X, Y), 1)


def test_found_imul_index_under_vmap():
    import astjax
    from programs import found
    xb, yb = np.stack([X, X + 0.1]), np.stack([Y, Y * 0.5])
    g = astjax.vmap(astjax.grad(found.imul_index, argnums=1))(xb, yb)
    expected = np.stack([fuzzgen.fd_grad(found.imul_index, (a, b), 1) for a, b in zip(xb, yb)])
    fuzzgen.assert_tree_close(g, expected, 1e-7, 1e-7, "vmap(grad)")


def test_found_vmap_branch_shapes():
    """vmap of an if whose branches give a live variable different shapes per example:
    refused at the user's line (JAX's cond refuses it too), never lanes broadcast
    together (that was a silently wrong np.sum); all lanes on one path: it runs."""
    import astjax
    from astjax.errors import AstjaxError
    from programs import found
    xb = np.stack([np.full((2, 3), 0.3), np.full((2, 3), -0.2), np.full((2, 3), 0.1)])
    yb = np.stack([np.ones(3), -np.ones(3), np.full(3, 0.5)])
    with pytest.raises(AstjaxError, match="different shapes") as info:
        astjax.vmap(found.branch_shapes)(xb, yb)
    assert "found.py" in str(info.value)
    same = np.stack([np.ones(3), np.full(3, 2.0), np.full(3, 0.5)])   # one path for all
    out = astjax.vmap(found.branch_shapes)(xb, same)
    expected = np.stack([found.branch_shapes(a, b) for a, b in zip(xb, same)])
    fuzzgen.assert_tree_close(out, expected, 1e-12, 1e-12, "vmap")


def test_found_vmap_branch_fancy_index():
    import astjax
    from programs import found
    xb = np.stack([X, -X])
    out = astjax.vmap(found.branch_fancy)(xb)
    fuzzgen.assert_tree_close(out, np.stack([found.branch_fancy(a) for a in xb]), 1e-12, 1e-12,
                              "vmap")


def _module(tmp_path, text):
    return fuzzgen.SourceModules("fuzz_found").load("import numpy as np\nfrom astjax import lax\n"
                                                    "\n\n" + text)


def test_found_functions_in_list(tmp_path):
    mod = _module(tmp_path, "def f(x, y):\n    fs = [np.sin, np.cos]\n"
                            "    return np.sum(sum(g(x) for g in fs) * y)\n")
    _grad_vs_fd(mod.f, (X, np.array([0.5, 1.5, -1.0])), 0)


def test_found_sorted_dict_items(tmp_path):
    mod = _module(tmp_path, "def f(x, y):\n    d = {'p': x, 'q': y}\n    v = x * 0.0\n"
                            "    for i, (k, w) in enumerate(sorted(d.items())):\n"
                            "        v = v + np.sin(w) * (i + 1.0)\n    return np.sum(v)\n")
    _grad_vs_fd(mod.f, (X, np.array([0.5, 1.5, -1.0])), 0)


def test_found_hvp_of_loops_with_break():
    import astjax
    from programs import found
    x = np.array([[-0.310459, -0.853571, 0.480985], [0.905282, -0.528298, -0.264811]])
    y = np.array([-0.854763, 0.403493, -0.010611])
    tx, ty = np.cos(x * 1.3), np.sin(y * 0.7 + 0.2)
    got = astjax.jvp(astjax.grad(found.hvp_loops_loss, argnums=(0, 1)), (x, y), (tx, ty))[1]

    def grads(a, b):
        return (fuzzgen.fd_grad(found.hvp_loops_loss, (a, b), 0),
                fuzzgen.fd_grad(found.hvp_loops_loss, (a, b), 1))
    expected = fuzzgen.fd_directional(grads, (x, y), (tx, ty), 3e-3)
    fuzzgen.assert_tree_close(got, expected, 1e-5, 1e-5, "jvp of grad")


def test_found_hvp_of_iadd_slice(tmp_path):
    import astjax
    mod = _module(tmp_path, "def prog(x):\n    v = x * 1.0\n    v[1:] += np.sin(x)[1:]\n"
                            "    return v\n\n\ndef loss(x):\n"
                            "    return np.sum(np.sin(prog(x) * 0.7 + 0.2))\n")
    t = np.array([0.3, -1.1, 0.8])
    got = astjax.jvp(astjax.grad(mod.loss), (X,), (t,))[1]
    expected = fuzzgen.fd_directional(lambda u: fuzzgen.fd_grad(mod.loss, (u,), 0, 1e-4), (X,),
                                      (t,), 1e-3)
    fuzzgen.assert_tree_close(got, expected, 1e-5, 1e-5, "jvp of grad")


LOOP_MODES = ["grad", "vjp", "jvp(grad)", "jacfwd(grad)", "vmap(grad)"]


@pytest.mark.parametrize("mode", LOOP_MODES)
@pytest.mark.parametrize("name", [f.__name__ for f in __import__(
    "programs.loop_exits").loop_exits.ALL])
def test_loop_exits_sweep(name, mode):
    """continue/break at every depth, bodies constant, partly constant or pushing nothing,
    loop names reused (a tangent then read before any assignment on a path): reverse
    mode's tape pairing and forward-over-reverse, against finite differences."""
    import astjax
    from programs import loop_exits
    f = getattr(loop_exits, name)
    x, t = np.array([0.7, 0.2, 0.5]), np.array([0.3, -1.1, 0.8])
    g = fuzzgen.fd_grad(f, (x,), 0)
    if mode == "grad":
        fuzzgen.assert_tree_close(astjax.grad(f)(x), g, 1e-7, 1e-7, mode)
    elif mode == "vjp":
        out, pull = astjax.vjp(f, x)
        fuzzgen.assert_tree_close(out, f(x), 1e-12, 1e-12, mode)
        fuzzgen.assert_tree_close(pull(1.7)[0], 1.7 * g, 1e-7, 1e-7, mode)
    elif mode == "jvp(grad)":
        expected = fuzzgen.fd_directional(lambda u: fuzzgen.fd_grad(f, (u,), 0, 1e-4), (x,),
                                          (t,), 1e-3)
        fuzzgen.assert_tree_close(astjax.jvp(astjax.grad(f), (x,), (t,))[1], expected, 1e-5,
                                  1e-5, mode)
    elif mode == "jacfwd(grad)":
        hess = np.stack([fuzzgen.fd_directional(lambda u: fuzzgen.fd_grad(f, (u,), 0, 1e-4),
                                                (x,), (e,), 1e-3) for e in np.eye(3)])
        fuzzgen.assert_tree_close(astjax.jacfwd(astjax.grad(f))(x), hess, 1e-5, 1e-5, mode)
    else:
        xb = np.stack([x, 0.5 * x, -x])
        expected = np.stack([fuzzgen.fd_grad(f, (r,), 0) for r in xb])
        fuzzgen.assert_tree_close(astjax.vmap(astjax.grad(f))(xb), expected, 1e-7, 1e-7, mode)


def test_found_loop_continue():
    from programs import found
    _grad_vs_fd(found.loop_continue, (X,), 0)


def test_found_einsum_broadcast_vjp():
    import astjax
    from programs import found
    x = np.array([[0.3], [-0.2]])
    g = astjax.vjp(found.einsum_broadcast, x)[1](np.ones((2, 2)))[0]
    expected = fuzzgen.fd_grad(lambda u: float(np.sum(found.einsum_broadcast(u))), (x,), 0)
    fuzzgen.assert_tree_close(g, expected, 1e-8, 1e-8, "vjp")


_EINSUM_BASE = [("ij,kj->ik", [(2, 3), (4, 3)]), ("ij,jk->ik", [(2, 3), (3, 4)]),
                ("ij,j->i", [(2, 3), (3,)]), ("ij,ij->ij", [(2, 3), (2, 3)]),
                ("ij,ij->", [(2, 3), (2, 3)]), ("ijk,ik->ij", [(2, 3, 4), (2, 4)]),
                ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]), ("...j,kj->...k", [(2, 3), (4, 3)]),
                ("ij,kj", [(2, 3), (4, 3)]), ("ij,ik->ijk", [(2, 3), (2, 4)])]


def _einsum_size1_cases():
    """Every spec above with one axis of one operand made size 1 (NumPy broadcasts it),
    in every position NumPy accepts."""
    for spec, shapes in _EINSUM_BASE:
        for p, shape in enumerate(shapes):
            for ax in range(len(shape)):
                new = [tuple(1 if (q, a) == (p, ax) else d for a, d in enumerate(s))
                       for q, s in enumerate(shapes)]
                try:
                    np.einsum(spec, *[np.ones(s) for s in new])
                except ValueError:
                    continue
                yield spec, new


_EINSUM_CASES = list(_einsum_size1_cases())
_EINSUM_MODULES = fuzzgen.SourceModules("fuzz_einsum")


@pytest.mark.parametrize("form", ["string", "sublist"])
@pytest.mark.parametrize("spec,shapes", _EINSUM_CASES,
                         ids=[f"{s}-{'x'.join(map(str, sum(sh, ())))}" for s, sh in _EINSUM_CASES])
def test_einsum_size1_broadcast_sweep(spec, shapes, form):
    """np.einsum with a broadcast size-1 axis in every operand position: vjp (cotangents
    summed back to size 1), jvp, vmap, and jvp/vmap of grad through a nonlinearity."""
    import astjax
    k = len(shapes)
    names = [f"a{i}" for i in range(k)]
    if form == "string":
        call = f"np.einsum({spec!r}, {', '.join(names)})"
    else:
        ins, _, out = spec.partition("->")
        letters = {c: i for i, c in enumerate(sorted(set(spec) - set(",->.")))}

        def sub(s):
            return "[" + ", ".join("Ellipsis" if c == "." else str(letters[c])
                                   for c in s.replace("...", ".")) + "]"
        parts = [f"{n}, {sub(s)}" for n, s in zip(names, ins.split(","))]
        call = "np.einsum(" + ", ".join(parts + ([sub(out)] if "->" in spec else [])) + ")"
    args = ", ".join(names)
    mod = _EINSUM_MODULES.load(f"import numpy as np\n\n\ndef f({args}):\n    return {call}\n\n\n"
                               f"def g({args}):\n    return np.sum(np.sin(f({args})))\n")
    f, g = mod.f, mod.g
    rng = np.random.default_rng(len(_EINSUM_CASES))
    ops = tuple(rng.normal(size=s) for s in shapes)
    tans = tuple(rng.normal(size=s) for s in shapes)
    np.testing.assert_allclose(f(*ops), np.einsum(spec, *ops), 1e-12, 1e-12)
    ct = rng.normal(size=np.shape(f(*ops)))

    def loss(*a):
        return float(np.sum(f(*a) * ct))
    fuzzgen.assert_tree_close(astjax.vjp(f, *ops)[1](ct),
                              tuple(fuzzgen.fd_grad(loss, ops, i) for i in range(k)), 1e-8, 1e-8,
                              "vjp")
    fuzzgen.assert_tree_close(astjax.jvp(f, ops, tans)[1], fuzzgen.fd_directional(f, ops, tans),
                              1e-8, 1e-8, "jvp")
    batch = tuple(np.stack([o, 0.5 * o + 0.1, -o]) for o in ops)
    fuzzgen.assert_tree_close(astjax.vmap(f)(*batch),
                              np.stack([f(*[b[j] for b in batch]) for j in range(3)]),
                              1e-12, 1e-12, "vmap")
    argnums = tuple(range(k))
    want = fuzzgen.fd_directional(lambda *a: tuple(fuzzgen.fd_grad(g, a, i, 1e-4) for i in argnums),
                                  ops, tans, 1e-3)
    fuzzgen.assert_tree_close(astjax.jvp(astjax.grad(g, argnums=argnums), ops, tans)[1], want,
                              1e-5, 1e-5, "jvp(grad)")
    fuzzgen.assert_tree_close(
        astjax.vmap(astjax.grad(g, argnums=argnums))(*batch),
        tuple(np.stack([fuzzgen.fd_grad(g, tuple(b[j] for b in batch), i) for j in range(3)])
              for i in argnums), 1e-7, 1e-7, "vmap(grad)")
