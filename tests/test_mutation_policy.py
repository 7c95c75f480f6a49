"""The mutation policy, one for every transformation: no transformation ever modifies
the caller's arrays.

A function that updates an argument in place (``x[i] = v``, ``x *= c``, an array
inside a list or dict argument) works on a private copy made on entry
(``astjax/transforms/aliasing.py: private_arguments``); only
``jit(..., donate_argnums=...)`` may consume an argument.  Checked for grad,
value_and_grad, vjp (and calling its vjp function twice), jvp, linearize, jacfwd,
jacrev, vmap, jit and compositions, each against the eager NumPy function run on a
copy (values) and finite differences (derivatives).  A user function called from a
transformed one keeps Python's semantics: it updates what it is given.
"""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

import astjax
from conftest import load_source_module, numerical_grad

SOURCE = textwrap.dedent('''
    import numpy as np


    def set_item(x):
        x[0] = x[1] * 2.0
        return np.sum(x * x)


    def augmented(x):
        x *= 1.5
        x[1:] += np.sin(x[:-1])
        return np.sum(x ** 2)


    def in_a_list(params):
        w = params[0]
        w[0] = np.tanh(w[1])
        return np.sum(w * w) * 2.0


    def in_a_dict(p):
        w = p["w"]
        w[1] = w[0] ** 2
        return np.sum(w * p["b"])


    def helper_updates(a):
        a[0] = a[2] * 3.0


    def calls_a_helper(x):
        y = x * 1.0
        helper_updates(y)          # Python semantics: y changes
        return np.sum(y * x)


    def not_updated(x):
        return np.sum(np.sin(x))
''')

X = np.array([0.5, -1.0, 2.0])
V = np.array([1.0, 0.25, -0.5])


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    return load_source_module(SOURCE, tmp_path_factory.mktemp("mutation"), "mutation_programs")


def _fresh(name):
    if name == "in_a_list":
        return [X.copy(), X.copy()]
    if name == "in_a_dict":
        return {"w": X.copy(), "b": X[::-1].copy()}
    return X.copy()


def _same(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(u, w) for u, w in zip(a, b))
    return np.array_equal(a, b)


def _flat_grad(name, g):
    if name == "in_a_list":
        return g[0]
    if name == "in_a_dict":
        return g["w"]
    return g


TRANSFORMS = {
    "eager_copy_reference": None,
    "grad": lambda f, a: astjax.grad(f)(a),
    "value_and_grad": lambda f, a: astjax.value_and_grad(f)(a),
    "vjp": lambda f, a: astjax.vjp(f, a)[1](1.0),
    "vjp_called_twice": lambda f, a: [vf(1.0) for vf in [astjax.vjp(f, a)[1]] * 2][-1],
    "jvp": lambda f, a: astjax.jvp(f, (a,), (astjax.tree_util.tree_map(np.ones_like, a),)),
    "linearize": lambda f, a: astjax.linearize(f, a)[1](
        astjax.tree_util.tree_map(np.ones_like, a)),
    "jacfwd": lambda f, a: astjax.jacfwd(f)(a),
    "jacrev": lambda f, a: astjax.jacrev(f)(a),
    "jit": lambda f, a: astjax.jit(f)(a),
    "jit_twice": lambda f, a: [astjax.jit(f)(a) for _ in range(2)][-1],
    "jit_of_grad": lambda f, a: astjax.jit(astjax.grad(f))(a),
    "grad_of_jit": lambda f, a: astjax.grad(astjax.jit(f))(a),
    "jvp_of_grad": lambda f, a: astjax.jvp(astjax.grad(f), (a,), (
        astjax.tree_util.tree_map(np.ones_like, a),)),
}
UPDATING = ["set_item", "augmented", "in_a_list", "in_a_dict", "calls_a_helper"]


@pytest.mark.parametrize("transform", sorted(t for t in TRANSFORMS if TRANSFORMS[t]))
@pytest.mark.parametrize("name", UPDATING + ["not_updated"])
def test_no_transformation_changes_the_callers_arrays(programs, name, transform):
    f = getattr(programs, name)
    arg = _fresh(name)
    before = _fresh(name)
    try:
        TRANSFORMS[transform](f, arg)
    except astjax.DifferentiationError as e:
        # a refusal (an update of memory a container still reads) must leave the
        # argument untouched too; the refusal is tested in test_aliasing.py
        assert "shares its memory" in str(e)
    assert _same(arg, before), f"{transform} changed the argument of {name}"


@pytest.mark.parametrize("name", ["set_item", "augmented", "in_a_dict", "calls_a_helper"])
def test_results_are_numpys_on_a_copy(programs, name):
    f = getattr(programs, name)
    expected = f(_fresh(name))
    assert astjax.jit(f)(_fresh(name)) == pytest.approx(expected, rel=1e-12)
    g = astjax.grad(f)(_fresh(name))
    fd = numerical_grad(lambda a: f(astjax.tree_util.tree_map(np.copy, a)), (_fresh(name),))
    np.testing.assert_allclose(_flat_grad(name, g), _flat_grad(name, fd), rtol=1e-6,
                               atol=1e-8)
    tangent = astjax.jvp(f, (_fresh(name),), (astjax.tree_util.tree_map(
        lambda v: V.copy() if v.shape == V.shape else np.ones_like(v), _fresh(name)),))[1]
    if name != "in_a_dict":
        assert tangent == pytest.approx(float(_flat_grad(name, fd) @ V), rel=1e-6)


def test_vmap_does_not_change_the_batch(programs):
    xs = np.stack([X, 2 * X, -X])
    before = xs.copy()
    out = astjax.vmap(programs.set_item)(xs)
    np.testing.assert_allclose(out, [programs.set_item(x.copy()) for x in before])
    assert np.array_equal(xs, before)
    grads = astjax.vmap(astjax.grad(programs.augmented))(xs)
    assert np.array_equal(xs, before)
    for x, g in zip(before, grads):
        np.testing.assert_allclose(g, numerical_grad(lambda a: programs.augmented(a.copy()),
                                                     (x.copy(),)), rtol=1e-6, atol=1e-8)


def test_donated_argument_may_be_consumed(programs):
    """Only donation lets a function update an argument: the result is still right."""
    x = X.copy()
    out = astjax.jit(programs.set_item, donate_argnums=0)(x)
    assert out == pytest.approx(programs.set_item(X.copy()), rel=1e-12)
    y = X.copy()
    assert astjax.jit(programs.set_item)(y) == pytest.approx(out, rel=1e-12)
    assert np.array_equal(y, X)


def test_the_copy_is_made_only_for_updated_arguments(programs):
    src = astjax.make_source(astjax.jit(programs.not_updated))(X.copy())
    assert "rt.detach" not in src
    src = astjax.make_source(astjax.grad(programs.set_item))(X.copy())
    assert "x = rt.detach(x)" in src


def test_a_helper_still_updates_what_it_is_given(programs):
    """Python's semantics inside the function: the helper's update is seen."""
    x = X.copy()
    expected = programs.calls_a_helper(x.copy())
    assert astjax.jit(programs.calls_a_helper)(x) == pytest.approx(expected, rel=1e-12)
    g = astjax.grad(programs.calls_a_helper)(x)
    np.testing.assert_allclose(g, numerical_grad(programs.calls_a_helper, (X.copy(),)),
                               rtol=1e-6, atol=1e-8)
