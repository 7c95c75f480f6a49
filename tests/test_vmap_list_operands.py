"""vmap of NumPy calls given a Python list of per-example values.

NumPy takes any array-like: ``np.atleast_1d([a, b])``, ``np.diff([x[0], y, 1.5])``,
``np.outer(row_list, row_list)``.  Under vmap such a list holds batch-last items, and
the batching rules used to read it as one unbatched array with a batch axis of its
own, so ``np.atleast_1d``, ``np.diff``, ``np.reshape``, ``np.ravel``, ``np.outer``,
``np.tile``, ``np.repeat``, ``np.roll``, ``np.take``, ``np.concatenate``, ``np.stack``,
``np.kron`` and more gave wrong shapes and numbers without an error (``np.dot``,
``np.einsum``, ``np.matmul`` crashed; ``np.negative(lst)`` printed as ``-lst`` failed
in every transformation).  A list or tuple the code makes and gives to a NumPy
function as array data is now converted with ``np.asarray`` first, as NumPy does on
entry (``frontend/core_fixups.convert_list_operands``), and a list reaching a batching rule
otherwise (a pytree argument) is stacked along the example axes
(``runtime_batch._as_batched``/``_unbatch``).

The registry sweep gives every NumPy primitive with a sample its first array operand
as a list of that array's rows, per example, and compares vmap with a loop.
"""
from __future__ import annotations

import numpy as np
import pytest

import astjax
from astjax import primitives as P

from conftest import load_source_module

B = 3


def _first_array_operand(prim, args):
    """Index of the first positional argument that is a float array of rank >= 1 bound
    to a differentiable parameter (the array data a user could spell as a list)."""
    for i, (p, v) in enumerate(zip(prim.params, args)):
        if p.startswith("*"):
            return None
        if p in prim.diff and isinstance(v, np.ndarray) and v.ndim >= 1 and \
                v.dtype.kind == "f" and 1 <= v.shape[0] <= 6:
            return i
    return None


def _candidates():
    out = []
    for name in sorted(P.REGISTRY):
        prim = P.REGISTRY[name]
        if prim.sample is None or not prim.code.startswith("np."):
            continue
        args, kwargs = prim.sample(np.random.default_rng(0))
        if _first_array_operand(prim, args) is not None:
            out.append(name)
    return out


CANDIDATES = _candidates()


def test_the_sweep_covers_the_numpy_surface():
    assert len(CANDIDATES) > 150, CANDIDATES


@pytest.mark.parametrize("name", CANDIDATES)
def test_list_operand_of_every_primitive(name, tmp_path):
    prim = P.REGISTRY[name]
    rng = np.random.default_rng(sorted(P.REGISTRY).index(name))
    args, kwargs = prim.sample(rng)
    k = _first_array_operand(prim, args)
    rows = args[k].shape[0]
    # f(data, *others): the data operand spelled as a list of its rows
    parts = [f"[{', '.join(f'data[{r}]' for r in range(rows))}]" if i == k else f"a{i}"
             for i in range(len(args))]
    parts += [f"{key}=k_{key}" for key in kwargs]
    params = ["data"] + [f"a{i}" for i in range(len(args)) if i != k] + \
        [f"k_{key}" for key in kwargs]
    source = ("import numpy as np\n\nCALLEE = None\n\n\n"
              f"def f({', '.join(params)}):\n"
              f"    return CALLEE({', '.join(parts)})\n")
    mod = load_source_module(source, tmp_path, f"list_operand_{name}")
    mod.CALLEE = prim.impl
    others = [a for i, a in enumerate(args) if i != k] + list(kwargs.values())
    batch = np.stack([args[k] * (1.0 + 0.1 * lane) + 0.05 * lane for lane in range(B)])
    try:
        expected = [mod.f(batch[lane], *others) for lane in range(B)]
    except (TypeError, AttributeError, ValueError):
        # NumPy itself takes no list here (np.rollaxis, np.hsplit...): astjax either
        # refuses too, or (having made the list an array, as NumPy does elsewhere)
        # gives NumPy's answer for the array
        _list_refused_or_as_array(mod, prim, args, k, kwargs, batch, others)
        return
    got = astjax.vmap(mod.f, in_axes=(0,) + (None,) * len(others))(batch, *others)
    got_leaves = astjax.tree_util.tree_leaves(got)
    expected_leaves = [np.stack([np.asarray(x) for x in leaves]) for leaves in zip(
        *[astjax.tree_util.tree_leaves(e) for e in expected])]
    assert len(got_leaves) == len(expected_leaves)
    for g, e in zip(got_leaves, expected_leaves):
        g = np.asarray(g)
        assert g.shape == e.shape, f"{name}: shape {g.shape}, a loop gives {e.shape}"
        if e.dtype.kind in "fc":
            np.testing.assert_allclose(g, e, rtol=1e-9, atol=1e-11, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, e)


def _list_refused_or_as_array(mod, prim, args, k, kwargs, batch, others):
    in_axes = (0,) + (None,) * len(others)
    try:
        got = astjax.vmap(mod.f, in_axes=in_axes)(batch, *others)
    except (TypeError, AttributeError, ValueError):
        return
    for lane in range(B):
        lane_args = list(args)
        lane_args[k] = batch[lane]
        want = prim.impl(*lane_args, **kwargs)
        got_leaves = astjax.tree_util.tree_leaves(got)
        want_leaves = astjax.tree_util.tree_leaves(want)
        assert len(got_leaves) == len(want_leaves)
        for g, w in zip(got_leaves, want_leaves):
            np.testing.assert_allclose(np.asarray(g)[lane], w, rtol=1e-9, atol=1e-11)


# the hand-picked calls that gave wrong shapes, with per-example scalars and numbers
PROGRAMS = {
    "atleast_1d": lambda l: np.atleast_1d(l),
    "atleast_2d": lambda l: np.atleast_2d(l),
    "atleast_3d": lambda l: np.atleast_3d(l),
    "diff": lambda l: np.diff(l),
    "reshape": lambda l: np.reshape(l, (-1, 1)),
    "ravel": lambda l: np.ravel(l),
    "outer": lambda l: np.outer(l, l),
    "tile": lambda l: np.tile(l, 2),
    "repeat": lambda l: np.repeat(l, 2),
    "roll": lambda l: np.roll(l, 1),
    "take": lambda l: np.take(l, [2, 0]),
    "moveaxis": lambda l: np.moveaxis(np.atleast_2d(l), 0, 1),
    "concatenate": lambda l: np.concatenate([l, l]),
    "stack": lambda l: np.stack([l, l]),
    "vstack": lambda l: np.vstack([l, l]),
    "hstack": lambda l: np.hstack([l, [2.0]]),
    "kron": lambda l: np.kron(l, [1.0, 2.0]),
    "dot": lambda l: np.dot(l, l),
    "einsum": lambda l: np.einsum("i,i->", l, l),
    "matmul": lambda l: np.matmul(l, l),
    "add": lambda l: np.add(l, l),
    "tuple": lambda l: np.cumsum(tuple(l)) * np.linalg.norm(tuple(l)),
    "nested": lambda l: np.sum(np.array([l, l[::-1]]) @ np.ones(3), axis=0),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_list_of_per_example_scalars(name):
    fn = PROGRAMS[name]

    def f(y):
        return fn([y[0], y[1] * 2.0, 1.5])

    ys = np.random.default_rng(1).normal(size=(4, 3))
    expected = np.stack([np.asarray(f(y)) for y in ys])
    got = astjax.vmap(f)(ys)
    assert np.shape(got) == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    # and the derivative of a loss through it, per example
    loss = lambda y: np.sum(np.asarray(f(y), dtype=float) ** 2)   # noqa: E731
    eps = 1e-6
    fd = np.stack([[(loss(y + eps * e) - loss(y - eps * e)) / (2 * eps) for e in np.eye(3)]
                   for y in ys])
    np.testing.assert_allclose(astjax.vmap(astjax.grad(loss))(ys), fd, rtol=1e-6, atol=1e-8)
