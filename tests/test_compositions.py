"""The composition matrix: every pair and triple of transformations, in any order.

Transformations are combinators (``tests/compose.py``): each wraps a function and its
oracle, so a chain such as ``grad.vmap_neg.scan`` (grad of vmap with in_axes=(-1, 0)
and out_axes=-1 of a function calling lax.scan around the program) is built from
three entries and checked against finite differences of a Python loop of an eager
scan.  The corpus (``tests/programs/corpus.py``) covers elementwise code, reductions,
matmul, loops, branches, while, in-place updates, pytrees in and out, lax calls,
closures, piecewise functions, linear algebra and shape manipulation.

Tiers (the matrix is generated; the tier decides how much of it runs):
- CI (default): every single transformation on every program, every ordered pair
  on one program (rotating through the corpus), and a fixed stratified sample of
  triples on one program each;
- ``ASTJAX_MATRIX=full``: every pair on every program and every triple on one program.

Cases that fail today are listed in ``tests/compose_known.py`` (regenerate it with
``python tests/compose.py --record``) by failure class, and run as strict xfails:
when a fix lands the integrator sees XPASS and deletes the entry.
"""
from __future__ import annotations

import itertools
import os
import random

import pytest

import compose
from compose_known import CLASSES, KNOWN
from programs.corpus import CORPUS

NAMES = list(compose.TRANSFORMS)
PROGRAMS = list(CORPUS)
FULL = os.environ.get("ASTJAX_MATRIX") == "full"
TRIPLE_SAMPLE = 120


def matrix(full=FULL):
    """(chain, program) pairs of the tier, in a fixed order."""
    cases = [((n,), p) for n in NAMES for p in PROGRAMS]
    for k, chain in enumerate(itertools.product(NAMES, repeat=2)):
        progs = PROGRAMS if full else [PROGRAMS[(5 * k) % len(PROGRAMS)]]
        cases += [(chain, p) for p in progs]
    triples = list(itertools.product(NAMES, repeat=3))
    if not full:
        # stratified: every transformation appears in every position about equally often
        rng = random.Random(10)
        picked = set(rng.sample(triples, TRIPLE_SAMPLE))
        for pos in range(3):
            for name in NAMES:
                if not any(t[pos] == name for t in picked):
                    t = [rng.choice(NAMES) for _ in range(3)]
                    t[pos] = name
                    picked.add(tuple(t))
        triples = sorted(picked)
    cases += [(chain, PROGRAMS[k % len(PROGRAMS)]) for k, chain in enumerate(triples)]
    return [(c, p) for c, p in cases if compose.applicable(c, *CORPUS[p])]


def case_id(chain, program):
    return ".".join(chain) + "|" + program


CASES = matrix()


def _param(chain, program):
    cid = case_id(chain, program)
    marks = ()
    if cid in KNOWN:
        marks = pytest.mark.xfail(strict=True, reason=f"issue 10: {CLASSES[KNOWN[cid]]}")
    return pytest.param(chain, program, id=cid, marks=marks)


@pytest.mark.parametrize("chain,program", [_param(c, p) for c, p in CASES])
def test_composition(chain, program):
    compose.isolate()
    case = compose.build(chain, *CORPUS[program])
    compose.check(case)


def test_matrix_size():
    """The generated matrix is as large as designed (guards against a silently empty one)."""
    singles = sum(len(c) == 1 for c, _ in CASES)
    pairs = {c for c, _ in CASES if len(c) == 2}
    triples = {c for c, _ in CASES if len(c) == 3}
    print(f"\ncomposition matrix: {len(NAMES)} transformations x {len(PROGRAMS)} programs; "
          f"{len(CASES)} cases ({singles} singles, {len(pairs)} distinct pairs, "
          f"{len(triples)} distinct triples); known failures "
          f"{sum(case_id(*c) in KNOWN for c in CASES)}")
    assert len(NAMES) >= 19 and len(PROGRAMS) >= 15
    assert singles >= 300
    assert len(pairs) >= 350          # all ordered pairs (a few are not applicable)
    assert len(triples) >= (6000 if FULL else 100)


def test_every_transformation_in_every_position():
    triples = [c for c, _ in CASES if len(c) == 3]
    for pos in range(3):
        assert {c[pos] for c in triples} == set(NAMES)


# ------------------------------------------- minimal reproducers of the classes found

import numpy as np  # noqa: E402

import astjax  # noqa: E402
from fuzzgen import assert_tree_close, fd_directional, fd_grad  # noqa: E402
from programs import found  # noqa: E402

X = np.array([0.3, -0.5, 0.2])
Y = np.array([0.4, 0.9, -0.3])


def _xfail(key, raises=None):
    return pytest.mark.xfail(strict=True, raises=raises,
                             reason=f"issue 10: {compose.FAILURE_CLASSES[key]}")


def test_found_grad_of_function_calling_vjp():
    assert_tree_close(astjax.grad(found.calls_vjp)(X, Y), fd_grad(found.calls_vjp, (X, Y), 0),
                      1e-6, 1e-6)


def test_found_grad_of_function_calling_linearize():
    assert_tree_close(astjax.grad(found.calls_linearize)(X, Y),
                      fd_grad(found.calls_linearize, (X, Y), 0), 1e-6, 1e-6)


def test_found_jvp_of_function_calling_vjp():
    t = np.cos(X)
    _, out = astjax.jvp(found.calls_vjp_unary, (X,), (t,))
    assert_tree_close(out, fd_directional(found.calls_vjp_unary, (X,), (t,)), 1e-6, 1e-6)


def test_found_vjp_of_if_not_taken():
    x = np.abs(X) + 0.1
    out, pull = astjax.vjp(found.if_else_not_taken, x, Y)
    ct = np.cos(out)
    expected = (ct * np.cos(x) * Y, ct * np.sin(x))
    assert_tree_close(pull(ct), expected, 1e-12, 1e-12)


def test_found_linearize_of_if_not_taken():
    out, f_jvp = astjax.linearize(found.if_not_taken, X, Y)
    assert_tree_close(f_jvp(np.ones(3), np.ones(3)), X + Y, 1e-12, 1e-12)


def test_found_linearize_of_fori_loop():
    t = np.cos(X)
    out, f_jvp = astjax.linearize(found.fori, X)
    assert_tree_close(f_jvp(t), fd_directional(found.fori, (X,), (t,)), 1e-7, 1e-7)


def test_found_linearize_of_grad_with_loop():
    t = np.cos(X)
    _, f_jvp = astjax.linearize(astjax.grad(found.loop_loss), X)
    expected = fd_directional(lambda u: fd_grad(found.loop_loss, (u,), 0), (X,), (t,), 3e-3)
    assert_tree_close(f_jvp(t), expected, 1e-5, 1e-5)


def test_found_grad_of_map_in_loop():
    assert_tree_close(astjax.grad(found.map_in_loop)(X), fd_grad(found.map_in_loop, (X,), 0),
                      1e-7, 1e-7)


def test_found_grad_of_scan_ys_in_loop():
    assert_tree_close(astjax.grad(found.scan_ys_in_loop)(X),
                      fd_grad(found.scan_ys_in_loop, (X,), 0), 1e-7, 1e-7)


def test_found_jvp_of_jvp_through_scan():
    _, out = astjax.jvp(found.jvp_of_scan, (X,), (np.cos(X),))
    assert_tree_close(out, fd_directional(found.jvp_of_scan, (X,), (np.cos(X),)), 1e-6, 1e-6)


def test_found_vmap_of_vjp_function():
    out = found.plain(X)
    expected = np.stack([fd_grad(lambda u, c=c: float(np.sum(found.plain(u) * c)), (X,), 0)
                         for c in (np.cos(out), np.sin(out))])
    assert_tree_close(found.vjp_rows(X)[0], expected, 1e-7, 1e-7)


def test_found_vmap_of_linearize_function():
    expected = np.stack([fd_directional(found.plain, (X,), (t,)) for t in (np.cos(X), np.sin(X))])
    assert_tree_close(found.linearize_rows(X), expected, 1e-7, 1e-7)


def test_found_vmap_of_function_calling_vjp():
    xb = np.stack([X, X * 0.5])
    expected = np.stack([found.calls_vjp_unary(a) for a in xb])
    assert_tree_close(astjax.vmap(found.calls_vjp_unary)(xb), expected, 1e-12, 1e-12)


def test_found_grad_of_vmap_of_vmap():
    xb = np.stack([np.stack([X, X * 0.5]), np.stack([-X, X + 1.0])])
    assert_tree_close(astjax.grad(found.sum_vmap_vmap)(xb),
                      fd_grad(found.sum_vmap_vmap, (xb,), 0), 1e-7, 1e-7)


def test_found_same_name_is_not_recursion():
    """grad of lax.cond whose branch is another module's ``cond_wrapper`` (wrapping a
    cond of its own): two functions with one name, refused as "recursive call"."""
    compose.isolate()
    compose.check(compose.build(("grad", "cond", "cond"), *CORPUS["reductions"]))


def test_stale_generated_source():
    """Two compositions in a row: the second computes with the first's program."""
    first = compose.build(("jvp", "vmap_x", "value_and_grad"), *CORPUS["elementwise"])
    compose.check(first)
    astjax.clear_cache()
    second = compose.build(("linearize", "vmap_x", "value_and_grad"), *CORPUS["reductions"])
    compose.check(second)


def test_found_grad_of_map_in_cond():
    assert_tree_close(astjax.grad(found.map_in_cond)(X), fd_grad(found.map_in_cond, (X,), 0),
                      1e-7, 1e-7)


def test_found_grad_through_jit_of_vmap():
    xb = np.random.default_rng(0).uniform(-1, 1, (2, 6))
    loss = compose.MODULES.load(
        "import numpy as np\n\ndef loss(x):\n    return np.sum(np.sin(inner(x)))\n",
        {"inner": astjax.jit(astjax.vmap(found.reshape_concat))}).loss
    assert_tree_close(astjax.grad(loss)(xb), fd_grad(loss, (xb,), 0), 1e-7, 1e-7)
