"""Values read from outside a function and rebound after its code was generated.

Generated code folds what it reads while it is generated: a closure's ``k = 2.0`` is
the literal ``2.0``, a global ``act = np.tanh`` is inlined, a ``**KW`` dict's items
become keyword arguments.  Before ``astjax/read_guards.py``, rebinding such a value
left the cached code computing with the old one: ``grad`` returned the old gradient
without an error (``jax.grad`` traces again and sees the new value).

Every kind of outside read is swept under every transformation: after the rebinding,
the transformed function must agree with the plain function evaluated now (central
finite differences in float64 for derivatives, a loop for vmap).  Globals the code
re-reads at run time (arrays, numbers, dicts of arrays) must not make it regenerate.
"""
import functools
import types

import numpy as np
import pytest

import astjax
from astjax import read_guards
from conftest import fd_vector_grad

X = np.array([0.4, -0.9, 1.3])
ROWS = np.array([[0.4, -0.9, 1.3], [0.2, 0.5, -0.6]])
V = np.array([0.3, -0.2, 0.7])


def fd_hessian(f, x, h=1e-4):
    return np.array([(fd_vector_grad(f, x + e) - fd_vector_grad(f, x - e)) / (2 * h)
                     for e in np.eye(x.size) * h])


# ------------------------------------------------ transformations and their oracles
# (each transformed function is made once and called before and after the rebinding)

def _on_rows(batched):
    return lambda x: batched(ROWS)


TRANSFORMS = {
    "grad": (lambda f: astjax.grad(f), lambda f: fd_vector_grad(f, X)),
    "value_and_grad": (lambda f: astjax.value_and_grad(f),
                       lambda f: (f(X), fd_vector_grad(f, X))),
    "jit": (lambda f: astjax.jit(f), lambda f: f(X)),
    "jit_numpy": (lambda f: astjax.jit(f, backend="numpy"), lambda f: f(X)),
    "jit_of_grad": (lambda f: astjax.jit(astjax.grad(f)), lambda f: fd_vector_grad(f, X)),
    "grad_of_jit": (lambda f: astjax.grad(astjax.jit(f)), lambda f: fd_vector_grad(f, X)),
    "vmap": (lambda f: _on_rows(astjax.vmap(f)),
             lambda f: np.array([f(r) for r in ROWS])),
    "vmap_of_grad": (lambda f: _on_rows(astjax.vmap(astjax.grad(f))),
                     lambda f: np.array([fd_vector_grad(f, r) for r in ROWS])),
    "jvp": (lambda f: (lambda x: astjax.jvp(f, (x,), (V,))[1]),
            lambda f: fd_vector_grad(f, X) @ V),
    "vjp": (lambda f: (lambda x: astjax.vjp(f, x)[1](1.0)[0]),
            lambda f: fd_vector_grad(f, X)),
    "linearize": (lambda f: (lambda x: astjax.linearize(f, x)[1](V)),
                  lambda f: fd_vector_grad(f, X) @ V),
    "jacfwd": (lambda f: astjax.jacfwd(f), lambda f: fd_vector_grad(f, X)),
    "jacrev": (lambda f: astjax.jacrev(f), lambda f: fd_vector_grad(f, X)),
    "hessian": (lambda f: astjax.hessian(f), lambda f: fd_hessian(f, X)),
}


# ------------------------------------------------------- the kinds of outside reads

def closure_number():
    k = 2.0

    def f(x):
        return np.sum(k * np.sin(x) ** 2)

    def rebind():
        nonlocal k
        k = -3.5
    return f, rebind


def closure_loop_count():
    n = 2

    def f(x):
        total = 0.0
        for i in range(n):
            total = total + np.sum(np.cos(x * (i + 1)))
        return total

    def rebind():
        nonlocal n
        n = 4
    return f, rebind


def closure_array():
    w = np.array([1.0, 2.0, 3.0])

    def f(x):
        return np.sum(w * np.tanh(x))

    def rebind():
        nonlocal w
        w = np.array([-1.0, 0.5, 4.0])
    return f, rebind


def closure_function():
    act = np.sin

    def f(x):
        return np.sum(act(x) * x)

    def rebind():
        nonlocal act
        act = np.tanh
    return f, rebind


def closure_list_of_functions():
    acts = [np.sin, np.cos]

    def f(x):
        total = 0.0
        for a in acts:
            total = total + np.sum(a(x))
        return total

    def rebind():
        acts[1] = np.tanh
        acts.append(np.exp)
    return f, rebind


def closure_partial():
    p = functools.partial(_scaled, k=2.0)

    def f(x):
        return p(x)

    def rebind():
        nonlocal p
        p = functools.partial(_scaled, k=0.25)
    return f, rebind


def _scaled(x, k):
    return np.sum(k * x ** 3)


ACT = np.sin


def global_function(x):
    return np.sum(ACT(x) ** 2)


def _rebind_act():
    global ACT
    ACT = np.arctan


def _helper_reading_global(x):
    return ACT(x) * 2.0


def callee_reads_global(x):
    return np.sum(_helper_reading_global(x) * x)


PARTIAL = functools.partial(_scaled, k=1.5)


def global_partial(x):
    return PARTIAL(x) + np.sum(x)


def _rebind_partial():
    global PARTIAL
    PARTIAL = functools.partial(_scaled, k=-0.5)


CONFIG = types.ModuleType("astjax_test_config")
CONFIG.SCALE = 2.0
CONFIG.ACT = np.cos


def module_attributes(x):
    return np.sum(CONFIG.SCALE * CONFIG.ACT(x))


def _rebind_config():
    CONFIG.SCALE = 0.75
    CONFIG.ACT = np.sin


class Settings:
    scale = 3.0


def class_attribute(x):
    return np.sum(Settings.scale * x ** 2)


def _rebind_class():
    Settings.scale = -1.25


ACTS = {"first": np.sin, "second": np.cos}


def global_dict_of_functions(x):
    return np.sum(ACTS["first"](x) * ACTS["second"](x))


def _rebind_acts():
    ACTS["second"] = np.tanh


KW = {"alpha": 2.0}


def _weighted(x, alpha=1.0):
    return np.sum(alpha * x ** 2)


def global_kwargs(x):
    return _weighted(x, **KW)


def _rebind_kw():
    KW["alpha"] = 5.0


ARGS = (2.0, 1.0)


def _affine(x, a, b):
    return np.sum(np.sin(a * x + b))


def global_star_args(x):
    return _affine(x, *ARGS)


def _rebind_args():
    global ARGS
    ARGS = (-1.5, 0.25)


WN = np.array([1.0, -2.0, 0.5])


def nested_grad_global_array(x):
    inner = astjax.grad(lambda y: np.sum(np.sin(y) * WN))(x)    # lifted, then inlined
    return np.sum(inner * x ** 2)


def nested_grad_global_function(x):
    inner = astjax.grad(lambda y: np.sum(ACT(y) * y))(x)
    return np.sum(inner * x)


def checkpoint_global_array(x):
    y = astjax.checkpoint(lambda z: np.tanh(z * WN))(x)
    return np.sum(y * x)


def checkpoint_named_def_global_array(x):
    def body(z):
        return np.sin(z * WN) * z

    return np.sum(astjax.checkpoint(body)(x) ** 2)


def _rebind_wn():
    global WN
    WN = np.array([0.25, 3.0, -1.0])


_SAVED = {"WN": WN, "ACT": ACT, "PARTIAL": PARTIAL, "ARGS": ARGS, "KW": dict(KW),
          "ACTS": dict(ACTS), "SCALE": CONFIG.SCALE, "CACT": CONFIG.ACT,
          "scale": Settings.scale}


def _restore():
    global ACT, PARTIAL, ARGS, WN
    ACT, PARTIAL, ARGS, WN = _SAVED["ACT"], _SAVED["PARTIAL"], _SAVED["ARGS"], _SAVED["WN"]
    KW.clear()
    KW.update(_SAVED["KW"])
    ACTS.clear()
    ACTS.update(_SAVED["ACTS"])
    CONFIG.SCALE, CONFIG.ACT = _SAVED["SCALE"], _SAVED["CACT"]
    Settings.scale = _SAVED["scale"]


def _module_case(f, rebind):
    return lambda: (f, rebind)


CASES = {
    "closure_number": closure_number,
    "closure_loop_count": closure_loop_count,
    "closure_array": closure_array,
    "closure_function": closure_function,
    "closure_list_of_functions": closure_list_of_functions,
    "closure_partial": closure_partial,
    "global_function": _module_case(global_function, _rebind_act),
    "callee_reads_global": _module_case(callee_reads_global, _rebind_act),
    "global_partial": _module_case(global_partial, _rebind_partial),
    "module_attributes": _module_case(module_attributes, _rebind_config),
    "class_attribute": _module_case(class_attribute, _rebind_class),
    "global_dict_of_functions": _module_case(global_dict_of_functions, _rebind_acts),
    "global_kwargs": _module_case(global_kwargs, _rebind_kw),
    "global_star_args": _module_case(global_star_args, _rebind_args),
    "nested_grad_global_array": _module_case(nested_grad_global_array, _rebind_wn),
    "nested_grad_global_function": _module_case(nested_grad_global_function, _rebind_act),
    "checkpoint_global_array": _module_case(checkpoint_global_array, _rebind_wn),
    "checkpoint_named_def_global_array": _module_case(checkpoint_named_def_global_array,
                                                      _rebind_wn),
}


def _close(a, b, name):
    rtol, atol = (1e-4, 1e-5) if name == "hessian" else (1e-6, 1e-8)
    if isinstance(b, tuple):
        for u, w in zip(a, b):
            np.testing.assert_allclose(u, w, rtol=rtol, atol=atol)
    else:
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_rebound_value_is_seen_by_the_next_call(case, transform):
    make, oracle = TRANSFORMS[transform]
    f, rebind = CASES[case]()
    try:
        g = make(f)
        _close(g(X), oracle(f), transform)     # generated with the first value
        before = oracle(f)
        rebind()
        after = oracle(f)
        changed = not np.allclose(np.asarray(before[1] if isinstance(before, tuple)
                                             else before, dtype=float),
                                  np.asarray(after[1] if isinstance(after, tuple)
                                             else after, dtype=float))
        assert changed, "the rebinding must change the answer for this test to mean much"
        _close(g(X), after, transform)         # the rebinding is seen
    finally:
        _restore()


# ----------------------------------------------- values re-read at run time: no cost

W = np.array([1.0, 2.0, 3.0])
LR = 0.1
PARAMS = {"w": np.array([0.5, -0.5, 1.0]), "b": 0.25}


def reads_run_time_globals(x):
    return np.sum(np.tanh(x * W) * LR + PARAMS["w"] * x) + PARAMS["b"]


@pytest.fixture
def builds(monkeypatch):
    count = [0]
    collecting = read_guards.collecting

    def counting():
        count[0] += 1
        return collecting()
    monkeypatch.setattr(read_guards, "collecting", counting)
    return count


@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
def test_globals_read_at_run_time_do_not_regenerate(transform, builds):
    global W, LR
    make, oracle = TRANSFORMS[transform]
    saved = (W, LR, dict(PARAMS))
    try:
        g = make(reads_run_time_globals)
        g(X)
        first = builds[0]
        assert first >= 1
        for step in range(4):
            W = W * 1.5                       # a new array of the same shape
            LR = LR * 0.5                     # a new number
            PARAMS["w"] = PARAMS["w"] + 1.0   # a new item of the same shape
            PARAMS["b"] = PARAMS["b"] + 0.5
            _close(g(X), oracle(reads_run_time_globals), transform)
        assert builds[0] == first
    finally:
        W, LR = saved[0], saved[1]
        PARAMS.update(saved[2])


def test_a_global_array_of_another_shape_or_dtype_regenerates(builds):
    global W
    saved = W
    try:
        f = astjax.jit(reads_run_time_globals)
        f(X)
        first = builds[0]
        W = np.float32(2.0) * np.ones(3, dtype=np.float32)
        np.testing.assert_allclose(f(X), reads_run_time_globals(X), rtol=1e-6)
        assert builds[0] > first
    finally:
        W = saved


def test_code_is_regenerated_once_per_rebinding(builds):
    f, rebind = closure_number()
    g = astjax.grad(f)
    g(X)
    g(X)
    first = builds[0]
    rebind()
    g(X)
    g(X)
    g(X)
    assert builds[0] == first + 1


def test_make_source_shows_the_value_now_folded():
    f, rebind = closure_number()
    assert "2.0" in astjax.make_source(astjax.grad(f))(X)
    astjax.grad(f)(X)
    rebind()
    text = astjax.make_source(astjax.grad(f))(X)
    assert "3.5" in text and "2.0 *" not in text


def test_an_emptied_closure_cell_is_not_read_stale():
    def make():
        k = 2.0

        def f(x):
            return np.sum(k * x)

        def drop():
            nonlocal k
            del k
        return f, drop
    f, drop = make()
    g = astjax.grad(f)
    np.testing.assert_allclose(g(X), 2.0 * np.ones(3))
    drop()
    with pytest.raises(Exception):
        g(X)


def test_a_transformed_callee_s_rebound_closure_reaches_its_caller():
    def make():
        k = 2.0

        @astjax.jit
        def inner(x):
            return k * np.sin(x)

        def rebind():
            nonlocal k
            k = -1.0
        return inner, rebind
    inner, rebind = make()

    def outer(x):
        return np.sum(inner(x) * x)
    g = astjax.grad(outer)
    np.testing.assert_allclose(g(X), fd_vector_grad(outer, X), rtol=1e-6)
    rebind()
    np.testing.assert_allclose(g(X), fd_vector_grad(outer, X), rtol=1e-6)


def test_guards_are_checked_without_allocating_descriptions():
    """The compiled check agrees with comparing descriptions, on each kind of value."""
    values = [np.ones(3), np.ones((2, 2), dtype=np.float32), 2.0, 3, "s", None, np.sin,
              {"a": np.ones(2), "b": [1.0, np.cos]}, (1, 2.0), list(range(300)),
              np.float32(1.5), Settings]
    others = [np.ones(4), np.ones((2, 2)), 2.5, 4, "t", 0, np.cos,
              {"a": np.ones(3), "b": [1.0, np.cos]}, (1, 2.5), list(range(299)),
              np.float32(2.5), int]
    for value, other in zip(values, others):
        for captured in (False, True):
            holder = {"v": value}
            reads = read_guards.Reads()
            reads.note("v", ("global", holder, "v"), value, captured)
            guard = reads.guard()
            assert guard.holds()
            holder["v"] = other
            assert guard.holds() == (read_guards.describe(other, captured) ==
                                     read_guards.describe(value, captured)
                                     if type(value) in (list, tuple, dict) or not (
                                         captured or callable(value)) else other is value)
