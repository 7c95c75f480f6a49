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
TRIPLE_SAMPLE = 160


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
        triples = sorted(rng.sample(triples, TRIPLE_SAMPLE))
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
          f"{len(triples)} distinct triples); known failures {sum(case_id(*c) in KNOWN for c in CASES)}")
    assert len(NAMES) >= 19 and len(PROGRAMS) >= 15
    assert singles >= 300
    assert len(pairs) >= 350          # all ordered pairs (a few are not applicable)
    assert len(triples) >= (6000 if FULL else 150)


def test_every_transformation_in_every_position():
    triples = [c for c, _ in CASES if len(c) == 3]
    for pos in range(3):
        assert {c[pos] for c in triples} == set(NAMES)
