"""``x = append(x, item)`` grows the list in place only when nothing else holds it.

Generated code prints ``rt.append_owned`` for an append whose old list is dead after
the statement (a scan's per-step outputs: O(1) per step instead of a copy of every
earlier step); the run-time reference count decides whether the list may grow in
place.  These tests check both halves: the printing rule, and that a list also held
by another name, a tuple or a tape is copied (never a silently changed value).
"""
import numpy as np
import pytest

import astjax
from astjax import lax
from astjax import runtime as rt


def test_a_list_only_the_caller_holds_grows_in_place():
    lst = [1, 2]
    out = rt.append_owned(lst, 3)
    assert out is lst and lst == [1, 2, 3]


@pytest.mark.parametrize("holder", ["name", "tuple", "tape", "dict"])
def test_a_list_held_elsewhere_is_copied(holder):
    lst = [1, 2]
    keep = {"name": lambda: lst, "tuple": lambda: (lst,), "tape": lambda: [lst],
            "dict": lambda: {"k": lst}}[holder]()
    out = rt.append_owned(lst, 3)
    assert out is not lst and out == [1, 2, 3] and lst == [1, 2]
    assert keep is not None


def _scan_sum(x, xs):
    def step(c, a):
        c = c * 0.5 + a
        return c, c * c
    c, ys = lax.scan(step, x, xs)
    return np.sum(ys) + c


def _list_snapshots(x):
    ys = []
    firsts = []
    for i in range(4):
        ys.append(x * i)
        firsts.append(ys[0] + ys[-1])
    total = 0.0
    for v in ys + firsts:
        total = total + np.sum(np.sin(v))
    return total


def test_scan_outputs_are_appended_in_place_in_generated_code():
    xs = np.linspace(0.0, 1.0, 7)
    src = astjax.make_source(astjax.jit(_scan_sum))(0.3, xs)
    assert "rt.append_owned(ys_steps, y)" in src


@pytest.mark.parametrize("fun,args", [
    (_scan_sum, (0.3, np.linspace(0.0, 1.0, 7))),
    (_list_snapshots, (np.linspace(-1.0, 1.0, 5),)),
])
def test_values_and_gradients_with_lists_grown_in_loops(fun, args):
    expected = fun(*args)
    np.testing.assert_allclose(astjax.jit(fun)(*args), expected, rtol=1e-12)
    g = astjax.grad(fun)(*args)
    gj = astjax.jit(astjax.grad(fun))(*args)
    x = np.asarray(args[0], float)
    eps = 1e-6
    fd = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        fd[i] = (fun(x + e, *args[1:]) - fun(x - e, *args[1:])) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gj, fd, rtol=1e-6, atol=1e-8)

