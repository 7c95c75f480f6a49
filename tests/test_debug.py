"""astjax.debug.print / callback / breakpoint and astjax.pure_callback, as JAX documents
them: prints happen when the code runs, with the values it runs with, under jit (never
folded at compile time, merged, hoisted out of a loop or dropped), once per loop
iteration, once per example under vmap, and with the primal of a differentiated value;
pure_callback calls NumPy code with a declared result and has no derivative."""
from __future__ import annotations

import numpy as np
import pytest

import astjax
from astjax import debug, lax
from astjax.errors import AstjaxError, DifferentiationError, TransformError


def printer(x):
    y = np.sin(x)
    debug.print("y = {}", y)
    debug.print("total {t:.4f} from {}", x, t=np.sum(y))
    return np.sum(y * y)


def constant_print(x):
    debug.print("constant {}", 3)
    debug.print("constant {}", 3)
    return x * 2.0


def loop_print(x):
    for i in range(3):
        x = x * 2.0
        debug.print("step {} x={}", i, x)
    return x


def invariant_print(x, c):
    for i in range(3):
        debug.print("c={}", c)
        x = x + c
    return x


def while_print(x):
    def body(c):
        debug.print("c={}", c)
        return c + 1.0
    return lax.while_loop(lambda c: c < 3.0, body, x)


def scan_print(xs):
    def step(carry, x):
        carry = carry + x
        debug.print("carry={}", carry)
        return carry, carry * 2.0
    return lax.scan(step, 0.0, xs)


SEEN = []


def record(v, tag=None):
    SEEN.append((tag, np.array(v)))


def with_callback(x):
    debug.callback(record, x, tag="in")
    y = x * 2.0
    debug.callback(record, y, tag="out")
    return np.sum(y)


def stop_here(x):
    y = x + 1.0
    debug.breakpoint()
    return y * 3.0


def cumulative(a):
    return np.cumsum(a)


def with_pure_callback(x):
    c = astjax.pure_callback(cumulative, astjax.ShapeDtypeStruct(x.shape, x.dtype), x,
                             vmap_method="sequential")
    return np.sum(c * x)


def pure_callback_no_method(x):
    return astjax.pure_callback(cumulative, astjax.ShapeDtypeStruct(x.shape, x.dtype), x)


def pair(a, b):
    return a * b, a + b


def pure_callback_pytree(x, y):
    shape = astjax.ShapeDtypeStruct(x.shape, x.dtype)
    p, s = astjax.pure_callback(pair, (shape, shape), x, y, vmap_method="expand_dims")
    return p - s


def bad_shape(x):
    return astjax.pure_callback(cumulative, astjax.ShapeDtypeStruct((5,), x.dtype), x)


def lambda_callback(x):
    debug.callback(lambda v: None, x)
    return x


def _lines(capsys):
    return capsys.readouterr().out.splitlines()


def test_eager_print_formats_like_str_format(capsys):
    printer(np.array([0.1, 0.2]))
    assert _lines(capsys) == [f"y = {np.sin(np.array([0.1, 0.2]))}",
                              f"total {np.sum(np.sin([0.1, 0.2])):.4f} from [0.1 0.2]"]


@pytest.mark.parametrize("transform", ["jit", "grad", "value_and_grad", "jvp", "vjp",
                                       "hessian"])
def test_prints_the_primal_once_under_every_transformation(capsys, transform):
    x = np.array([0.1, 0.2])
    printer(x)
    expected = _lines(capsys)
    t = getattr(astjax, transform)
    if transform == "jvp":
        t(printer, (x,), (np.ones(2),))
    elif transform == "vjp":
        _, back = t(printer, x)
        assert _lines(capsys) == expected      # the forward pass printed
        back(1.0)                              # the backward pass does not
        expected = []
    else:
        t(printer)(x)
    got = _lines(capsys)
    if transform == "hessian":    # one primal pass per column: primal values each time
        assert got and set(got) == set(expected) and len(got) % len(expected) == 0
    else:
        assert got == expected


def test_jit_prints_at_run_time_every_call(capsys):
    f = astjax.jit(printer)
    f(np.array([0.1, 0.2]))
    f(np.array([0.3, 0.4]))
    out = _lines(capsys)
    assert len(out) == 4 and out[2] == f"y = {np.sin(np.array([0.3, 0.4]))}"
    src = astjax.make_source(astjax.jit(printer))(np.array([0.1, 0.2]))
    assert src.count("dbg.print_values(") == 2


def test_jit_neither_folds_nor_merges_nor_hoists(capsys):
    astjax.jit(constant_print)(1.0)
    assert _lines(capsys) == ["constant 3", "constant 3"]
    astjax.jit(invariant_print)(0.0, 5.0)
    assert _lines(capsys) == ["c=5.0"] * 3


def test_prints_once_per_iteration(capsys):
    astjax.jit(loop_print)(1.0)
    assert _lines(capsys) == ["step 0 x=2.0", "step 1 x=4.0", "step 2 x=8.0"]
    astjax.jit(while_print)(0.5)
    assert _lines(capsys) == ["c=0.5", "c=1.5", "c=2.5"]
    astjax.jit(scan_print)(np.array([1.0, 2.0]))
    assert _lines(capsys) == ["carry=1.0", "carry=3.0"]


def test_vmap_prints_once_per_example(capsys):
    xs = np.array([[1.0, 2.0], [3.0, 4.0]])
    for x in xs:
        printer(x)
    expected = _lines(capsys)
    astjax.vmap(printer)(xs)
    got = _lines(capsys)
    # JAX prints example by example for each print statement
    assert sorted(got) == sorted(expected) and len(got) == 4
    assert got[:2] == [f"y = {np.sin(xs[0])}", f"y = {np.sin(xs[1])}"]
    astjax.vmap(loop_print)(np.array([1.0, 10.0]))
    assert _lines(capsys) == ["step 0 x=2.0", "step 0 x=20.0", "step 1 x=4.0",
                              "step 1 x=40.0", "step 2 x=8.0", "step 2 x=80.0"]
    astjax.jit(astjax.vmap(loop_print))(np.array([1.0, 10.0]))
    assert len(_lines(capsys)) == 6


def test_vmap_with_an_unbatched_operand(capsys):
    astjax.vmap(invariant_print, in_axes=(0, None))(np.array([0.0, 1.0]), 5.0)
    assert _lines(capsys) == ["c=5.0"] * 3


def test_callback_gets_run_time_values():
    SEEN.clear()
    x = np.array([1.0, 2.0])
    astjax.jit(with_callback)(x)
    assert [t for t, _ in SEEN] == ["in", "out"]
    np.testing.assert_array_equal(SEEN[1][1], x * 2)
    SEEN.clear()
    g = astjax.grad(with_callback)(x)
    np.testing.assert_array_equal(g, [2.0, 2.0])
    assert [t for t, _ in SEEN] == ["in", "out"]      # the primal pass only
    SEEN.clear()
    astjax.vmap(with_callback)(np.array([[1.0, 2.0], [3.0, 4.0]]))
    assert [t for t, _ in SEEN] == ["in", "in", "out", "out"]
    np.testing.assert_array_equal(SEEN[1][1], [3.0, 4.0])


def test_breakpoint_stops_in_the_generated_code(monkeypatch):
    frames = []
    monkeypatch.setattr(debug, "_debugger", lambda frame: frames.append(frame))
    x = np.array([1.0, 2.0])
    np.testing.assert_array_equal(astjax.jit(stop_here)(x), (x + 1) * 3)
    frame = frames[-1]
    assert frame.f_code.co_name == "jit_stop_here"
    np.testing.assert_array_equal(frame.f_locals["y"], x + 1)   # the user's own names
    astjax.grad(lambda_free_loss)(x)
    assert frames[-1].f_code.co_name.startswith("grad_")
    stop_here(x)
    assert frames[-1].f_code.co_name == "stop_here"


def lambda_free_loss(x):
    return np.sum(stop_here(x))


def test_pure_callback():
    x = np.array([1.0, 2.0, 3.0])
    expected = np.sum(np.cumsum(x) * x)
    assert with_pure_callback(x) == expected
    assert astjax.jit(with_pure_callback)(x) == expected
    xs = np.array([[1.0, 2.0, 3.0], [0.5, 0.0, 1.0]])
    np.testing.assert_allclose(astjax.vmap(with_pure_callback)(xs),
                               [with_pure_callback(r) for r in xs])
    ys = np.array([[1.0, 0.0, 2.0], [3.0, 1.0, 1.0]])
    np.testing.assert_allclose(astjax.vmap(pure_callback_pytree, in_axes=(0, None))(xs, x),
                               [pure_callback_pytree(r, x) for r in xs])
    np.testing.assert_allclose(astjax.vmap(pure_callback_pytree)(xs, ys),
                               [pure_callback_pytree(a, b) for a, b in zip(xs, ys)])


def test_pure_callback_has_no_derivative():
    with pytest.raises(DifferentiationError) as info:
        astjax.grad(with_pure_callback)(np.array([1.0, 2.0]))
    assert "test_debug.py" in str(info.value) and "pure_callback" in str(info.value)
    with pytest.raises(DifferentiationError):
        astjax.jvp(with_pure_callback, (np.array([1.0, 2.0]),), (np.ones(2),))


def test_pure_callback_errors():
    with pytest.raises(AstjaxError, match="vmap_method"):
        astjax.vmap(pure_callback_no_method)(np.ones((2, 3)))
    with pytest.raises(AstjaxError, match="shape"):
        bad_shape(np.ones(3))
    with pytest.raises(AstjaxError, match="shape"):
        astjax.jit(bad_shape)(np.ones(3))
    with pytest.raises(TransformError, match="module level") as info:
        astjax.jit(lambda_callback)(np.ones(3))
    assert "test_debug.py" in str(info.value)
