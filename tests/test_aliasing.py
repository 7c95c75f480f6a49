"""Aliasing: ``z = y`` (or a view: a basic slice, ``.T``, ``reshape``, ``ravel``, a
list holding ``y``) then ``y[i] = v`` changes what ``z`` reads, in NumPy.

Derivatives never treat the two as separate values: every differentiating
transformation refuses such a program with a located error and the hint to copy;
a program where the other name is read only *before* the update (its value saved for
the backward sweep) is differentiated exactly; ``vmap`` and ``jit`` compute what
NumPy computes.  Checked against float64 central differences, a Python loop and eager
NumPy.
"""
from __future__ import annotations

import re
import textwrap

import numpy as np
import pytest

import astjax
from astjax.transforms.aliasing import AliasError
from conftest import load_source_module, numerical_grad

SOURCE = textwrap.dedent('''
    import numpy as np


    def same_array(x):
        y = x * 2.0
        z = y
        y[0] = 0.0                                  # @same_array
        return np.sum(z * x)


    def update_through_the_copy(x):
        y = x * 2.0
        z = y
        z[0] = x[1] * 3.0                           # @update_through_the_copy
        return np.sum(y * x)


    def slice_view(x):
        y = x * 2.0
        z = y[1:]
        y[1] = x[0] ** 2                            # @slice_view
        return np.sum(z * x[1:])


    def write_into_view(x):
        y = x * 2.0
        z = y[1:]
        z[0] = x[0] ** 2                            # @write_into_view
        return np.sum(y * x)


    def transpose_view(x):
        y = np.outer(x, x)
        z = y.T
        z[0, 1] = x[2]                              # @transpose_view
        return np.sum(y * y)


    def reshape_view(x):
        y = x * 2.0
        z = y.reshape(-1)
        z[0] = x[1] ** 3                            # @reshape_view
        return np.sum(y * x)


    def ravel_view(x):
        y = np.outer(x, x)
        z = np.ravel(y)
        y[1, 1] = 0.5                               # @ravel_view
        return np.sum(z * z)


    def held_in_a_list(x):
        y = x * 2.0
        items = [y, x]
        y[0] = x[1] * 5.0                           # @held_in_a_list
        return np.sum(items[0] * x)


    def in_a_loop(x):
        y = x * 1.0
        z = y
        total = 0.0
        for i in range(3):
            total = total + np.sum(z * x)           # read again after the update below
            y[i] = x[i] ** 2
        return total


    def view_in_a_loop(x):
        y = x * 1.0
        z = y[0:2]
        total = 0.0
        for i in range(3):
            total = total + np.sum(z * x[:2])
            y[i] = x[i] ** 2                        # @view_in_a_loop
        return total


    def fill(a, v):
        a[0] = v * 3.0


    def helper_updates_its_argument(x):
        y = x * 1.0
        fill(y, x[2])
        return np.sum(y * x)


    # the other name read only before the update (or not shared at all): fine

    def read_before_update(x):
        y = x * 2.0
        z = y
        s = np.sum(z * x)
        y[0] = 0.0
        return s + np.sum(y * y)


    def view_read_before_update(x):
        y = np.outer(x, x)
        row = y[0]
        s = np.sum(np.sin(row) * x)
        y[0, 1] = x[2] ** 2
        return s + np.sum(y * x)


    def explicit_copy(x):
        y = x * 2.0
        z = y.copy()
        y[0] = 0.0
        return np.sum(z * x) + np.sum(y)


    def alias_made_each_iteration(x):
        y = x * 1.0
        total = 0.0
        for i in range(3):
            z = y                                   # rebound before every read
            total = total + np.sum(np.sin(z) * x)
            y[i] = x[i] ** 2
        return total + np.sum(y * y)


    def rebound_first(x):
        y = x * 2.0
        z = y
        y = y * 3.0
        y[0] = 1.0
        return np.sum(z * x) + np.sum(y * x)
''')

REFUSED = ["slice_view", "write_into_view", "transpose_view", "reshape_view", "ravel_view",
           "held_in_a_list", "view_in_a_loop"]
# the other name is the very same array: NumPy's semantics are honoured (z = y is
# repeated after the update), as for a helper that updates the array it is given
HONOURED = ["same_array", "update_through_the_copy", "in_a_loop",
            "helper_updates_its_argument"]
ACCEPTED = HONOURED + ["read_before_update", "view_read_before_update", "explicit_copy",
                       "rebound_first", "alias_made_each_iteration"]

X = np.array([0.3, -0.8, 1.2])
V = np.array([1.0, -0.5, 0.25])

DERIVATIVES = {
    "grad": lambda f, x: astjax.grad(f)(x),
    "value_and_grad": lambda f, x: astjax.value_and_grad(f)(x)[1],
    "vjp": lambda f, x: astjax.vjp(f, x)[1](1.0)[0],
    "jvp": lambda f, x: astjax.jvp(f, (x,), (V,))[1],
    "linearize": lambda f, x: astjax.linearize(f, x)[1](V),
    "jacfwd": lambda f, x: astjax.jacfwd(f)(x),
    "jacrev": lambda f, x: astjax.jacrev(f)(x),
    "hessian": lambda f, x: astjax.hessian(f)(x),
    "vmap_grad": lambda f, x: astjax.vmap(astjax.grad(f))(np.stack([x, 2 * x]))[0],
    "grad_of_jit": lambda f, x: astjax.grad(astjax.jit(f))(x),
}


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    return load_source_module(SOURCE, tmp_path_factory.mktemp("aliasing"), "aliasing_programs")


def _line(module, mark):
    lines = open(module.__file__, encoding="utf-8").read().splitlines()
    return [i for i, t in enumerate(lines, 1) if t.rstrip().endswith(f"# @{mark}")][0]


def _fd_hessian(f, x, h=1e-4):
    cols = [(numerical_grad(f, (x + h * e,)) - numerical_grad(f, (x - h * e,))) / (2 * h)
            for e in np.eye(x.size)]
    return np.stack(cols, axis=-1)


@pytest.mark.parametrize("transform", sorted(DERIVATIVES))
@pytest.mark.parametrize("name", REFUSED)
def test_updates_of_shared_memory_are_refused_at_the_users_line(programs, name, transform):
    with pytest.raises(AliasError) as info:
        DERIVATIVES[transform](getattr(programs, name), X.copy())
    message = str(info.value)
    assert "aliasing_programs.py" in message, message
    assert re.search(rf"\bline {_line(programs, name)}\b", message), message
    assert "shares its memory" in message and ".copy()" in message, message


@pytest.mark.parametrize("transform", sorted(DERIVATIVES))
@pytest.mark.parametrize("name", ACCEPTED)
def test_values_read_before_an_update_differentiate_exactly(programs, name, transform):
    f = getattr(programs, name)
    got = DERIVATIVES[transform](f, X.copy())
    g = numerical_grad(f, (X.copy(),))
    if transform in ("jvp", "linearize"):
        np.testing.assert_allclose(got, g @ V, rtol=1e-6, atol=1e-8)
    elif transform == "hessian":
        np.testing.assert_allclose(got, _fd_hessian(f, X.copy()), rtol=1e-4, atol=1e-5)
    else:
        np.testing.assert_allclose(got, g, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", REFUSED + ACCEPTED)
def test_vmap_and_jit_keep_numpys_semantics(programs, name):
    f = getattr(programs, name)
    xs = np.stack([X, 2 * X, -X])
    expected = np.array([f(x.copy()) for x in xs])
    np.testing.assert_allclose(astjax.vmap(f)(xs.copy()), expected, rtol=1e-12)
    np.testing.assert_allclose(astjax.jit(f)(X.copy()), f(X.copy()), rtol=1e-12)
    np.testing.assert_allclose(astjax.jit(astjax.vmap(f))(xs.copy()), expected, rtol=1e-12)


def test_the_hint_names_the_copy_to_make(programs):
    with pytest.raises(AliasError, match=r"z = y\.copy\(\)"):
        astjax.grad(programs.slice_view)(X.copy())
