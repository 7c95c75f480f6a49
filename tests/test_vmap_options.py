"""vmap of NumPy calls whose options differ per example.

A batching rule of a NumPy function takes its options (an axis, a shift, a count, a
``ddof``, a number of decimals) for one example.  A per-example option used to reach
the rule as it stood: ``np.roll(x, s)`` with a batched ``s`` rolled every example by
the batch's shifts (silently wrong), ``np.tril(m, k)``, ``np.round(x, k)``,
``np.diagonal(m, k)`` and others crashed inside NumPy.  Now every option parameter
(``transforms/batch.py``'s ``_NOT_DATA``) holding a per-example value is refused at the
user's line, except where a rule is written for it (``_PER_EXAMPLE_OPTIONS``).

The sweep covers every NumPy primitive of the registry with a sample and an integer
or float option: vmap over two different values of the option must equal the loop
over examples, or be refused with a ``TransformError`` — never another number or a
crash.
"""
import numpy as np
import pytest

import astjax
from astjax import primitives as P
from astjax.errors import TransformError
from astjax.transforms.batch import _NOT_DATA, _PER_EXAMPLE_OPTIONS
from conftest import load_source_module
import test_rules_batch as B
import test_rules_vjp as T

SKIPPED_OPTIONS = {"index", "indices", "out"}   # indices: tests/test_vmap_indexing.py


def _cases():
    cases = []
    for name, prim in sorted(P.REGISTRY.items()):
        if not prim.code.startswith("np."):
            continue
        sample, _ = B._sample(name)
        if sample is None:
            continue
        args, kwargs = sample(np.random.default_rng(0))
        bound = dict(zip(prim.params, args), **kwargs)
        for pname, value in bound.items():
            if pname in _NOT_DATA and pname not in SKIPPED_OPTIONS and \
                    type(value) in (int, float):
                cases.append((name, pname))
    return cases


CASES = _cases()


def _other_value(prim, args, kwargs, pname, value):
    """A second valid value of the option (one NumPy accepts), else the same one."""
    position = prim.params.index(pname)
    for other in (value + 1, value - 1):
        other = type(value)(other)
        try:
            if position < len(args):
                prim.impl(*args[:position], other, *args[position + 1:], **kwargs)
            else:
                prim.impl(*args, **dict(kwargs, **{pname: other}))
            return other
        except Exception:  # noqa: BLE001  (an axis out of range, a count too large...)
            continue
    return value


def test_the_sweep_covers_the_options():
    assert len(CASES) >= 25, CASES
    names = {n for n, _ in CASES}
    assert {"tril", "round", "diagonal", "var"} <= names, names


@pytest.mark.parametrize("name,pname", CASES, ids=[f"{n}-{p}" for n, p in CASES])
def test_per_example_option_is_right_or_refused(name, pname, tmp_path):
    prim = P.REGISTRY[name]
    args, kwargs = B._sample(name)[0](np.random.default_rng(0))
    value = T.bind(prim, args, kwargs)[pname]
    options = np.array([value, _other_value(prim, args, kwargs, pname, value)])
    # the call as the sample makes it, with the option passed where the sample has it
    position = prim.params.index(pname)
    if position < len(args):
        call = "IMPL(*BEFORE, option, *AFTER, **KW)"
        before, after, kw = args[:position], args[position + 1:], kwargs
    else:
        call = f"IMPL(*BEFORE, **KW, {pname}=option)"
        before, after, kw = args, (), {k: v for k, v in kwargs.items() if k != pname}
    module = load_source_module(f"def f(option):\n    return {call}\n", tmp_path)
    module.IMPL, module.BEFORE, module.AFTER, module.KW = prim.impl, before, after, kw
    want = [module.f(o.item()) for o in options]
    try:
        got = astjax.vmap(module.f)(options)
    except TransformError as err:
        assert (name, pname) not in _PER_EXAMPLE_OPTIONS
        assert f"per-example {pname}" in str(err), str(err)
        assert f"return {call}" in str(err), str(err)       # the user's line
        return
    for i, w in enumerate(want):
        np.testing.assert_allclose(np.take(np.asarray(got), i, axis=0), w, rtol=1e-12)


def roll_rows(x, shift):
    return np.roll(x, shift, axis=0)


def test_roll_with_per_example_shift():
    x = np.arange(12.0).reshape(3, 4)
    shifts = np.array([1, -2, 3])
    want = np.stack([roll_rows(x[i], shifts[i]) for i in range(3)])
    np.testing.assert_array_equal(astjax.vmap(roll_rows)(x, shifts), want)
    np.testing.assert_array_equal(astjax.jit(astjax.vmap(roll_rows))(x, shifts), want)
    np.testing.assert_array_equal(astjax.vmap(roll_rows, in_axes=(None, 0))(x[0], shifts),
                                  [roll_rows(x[0], s) for s in shifts])


def lower_triangle(m, k):
    return np.tril(m, k)


def test_a_refusal_names_the_line_and_the_option():
    m = np.ones((2, 3, 3))
    with pytest.raises(TransformError, match="per-example k") as info:
        astjax.vmap(lower_triangle)(m, np.array([0, 1]))
    assert "return np.tril(m, k)" in str(info.value)
    # the same option for every example is fine
    np.testing.assert_array_equal(astjax.vmap(lower_triangle, in_axes=(0, None))(m, 1),
                                  [np.tril(a, 1) for a in m])
