"""The adjoint of ``x = append(x, item)`` shrinks ``d_x`` in place (``rt.drop_last_owned``).

A scan's backward sweep took its step's output cotangent off the list of all of them
by copying the rest (``g[:-1]``) at every step: quadratic in the number of steps.
Now ``d_x = drop_last(d_x)`` names the same variable on both sides, so the printed
code pops the list when nothing else holds it, and copies it when a tape, a tuple or
another name does.  Values are checked against central differences.
"""
import numpy as np

import astjax
from astjax import lax
from astjax import runtime as rt


def _scan(w, xs):
    def step(c, x):
        c = np.sin(c * w + x)
        return c, c * x
    c, ys = lax.scan(step, 0.1, xs)
    return np.sum(ys ** 2) + c


def _list_loop(w):
    out = []
    v = w
    for k in range(5):
        v = np.tanh(v * 1.3 + k)
        out.append(v * w)
    return sum(o * (j + 1) for j, o in enumerate(out))


def _fd(f, x, eps=1e-6):
    return (f(x + eps) - f(x - eps)) / (2 * eps)


XS = np.random.default_rng(4).standard_normal(50)


def test_scan_gradient_through_the_step_cotangents():
    for g in (astjax.grad(_scan), astjax.jit(astjax.grad(_scan)),
              astjax.jit(astjax.grad(_scan), backend="numpy")):
        np.testing.assert_allclose(g(0.7, XS), _fd(lambda w: _scan(w, XS), 0.7),
                                   rtol=1e-6)


def test_python_list_appends_in_a_loop():
    for g in (astjax.grad(_list_loop), astjax.jit(astjax.grad(_list_loop))):
        np.testing.assert_allclose(g(0.3), _fd(_list_loop, 0.3), rtol=1e-6)


def test_second_order_through_the_step_cotangents():
    def h(w):
        return astjax.grad(_scan)(w, XS)
    np.testing.assert_allclose(astjax.grad(h)(0.7), _fd(h, 0.7), rtol=1e-5)
    np.testing.assert_allclose(astjax.jvp(h, (0.7,), (1.0,))[1], _fd(h, 0.7), rtol=1e-5)


def test_vmap_of_the_scan_gradient():
    ws = np.array([0.2, 0.7, 1.1])
    got = astjax.vmap(astjax.grad(_scan), in_axes=(0, None))(ws, XS)
    want = [astjax.grad(_scan)(w, XS) for w in ws]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_generated_code_drops_the_last_entry_in_place():
    src = astjax.make_source(astjax.jit(astjax.grad(_scan)))(0.7, XS)
    assert "d_ys_steps = rt.drop_last_owned(d_ys_steps)" in src
    assert "rt.append_cotangents(d_ys_steps" not in src


def test_drop_last_owned_pops_only_a_list_nothing_else_holds():
    g = [1.0, 2.0, 3.0]
    g = rt.drop_last_owned(g)
    assert g == [1.0, 2.0]
    held = [1.0, 2.0, 3.0]
    other = held
    got = rt.drop_last_owned(held)
    assert got == [1.0, 2.0] and other == [1.0, 2.0, 3.0] and got is not other
    t = (1.0, 2.0)
    assert rt.drop_last_owned(t) == [1.0]
    assert rt.drop_last_owned(None) is None
    assert rt.last_cotangent(None) is None and rt.last_cotangent([1, 2]) == 2
