"""jit: optimized generated code equals eager NumPy; JAX's static-argument rules."""
import collections
import functools
import os

import numpy as np
import pytest
from conftest import load_source_module
from programs import control, idioms, inplace, mlp

import astjax
from astjax import jit_api
from astjax.errors import DifferentiationError, SourceError
from astjax.tree_util import default_registry


def poly(x):
    return x + x * x + x * x * x


def scaled(x, n, mode="mul"):
    if mode == "mul":
        return x * n
    return x + n


@astjax.jit
def decorated(x):
    return np.tanh(x) * 2.0


@functools.partial(astjax.jit, static_argnums=1)
def repeated(x, n):
    for _ in range(n):
        x = x * 0.5 + 1.0
    return x


X = np.random.default_rng(0).standard_normal((4, 3))


@pytest.mark.parametrize("fn, args", [
    (poly, (X,)), (control.nested_loops, (X,)), (control.branch_in_loop, (X[0],)),
    (control.loop_break, (X[0],)), (inplace.set_item, (X[0].copy(),))])
def test_jit_equals_eager(fn, args):
    np.testing.assert_allclose(astjax.jit(fn)(*args), fn(*args), rtol=1e-12)


def test_decorator_and_partial_forms():
    np.testing.assert_allclose(decorated(X), np.tanh(X) * 2.0)
    np.testing.assert_allclose(repeated(X, 3), ((X * 0.5 + 1) * 0.5 + 1) * 0.5 + 1)


def test_static_arguments_key_the_cache_and_must_be_hashable():
    f = astjax.jit(scaled, static_argnums=(1,), static_argnames=("mode",))
    np.testing.assert_allclose(f(X, 2.0), X * 2.0)
    np.testing.assert_allclose(f(X, 3.0, mode="add"), X + 3.0)
    with pytest.raises(astjax.AstjaxError, match="hashable"):
        f(X, [1.0])


def test_compositions():
    rng = np.random.default_rng(1)
    params = [(rng.standard_normal((3, 4)), rng.standard_normal(4)),
              (rng.standard_normal((4, 2)), rng.standard_normal(2))]
    batch = (rng.standard_normal((5, 3)), rng.standard_normal((5, 2)))
    eager = astjax.grad(mlp.loss)(params, batch)
    for got in (astjax.jit(astjax.grad(mlp.loss))(params, batch),
                astjax.grad(astjax.jit(mlp.loss))(params, batch)):
        for (a, b), (c, d) in zip(got, eager):
            np.testing.assert_allclose(a, c, rtol=1e-12)
            np.testing.assert_allclose(b, d, rtol=1e-12)
    vf = astjax.vmap(poly)
    np.testing.assert_allclose(astjax.jit(vf)(X), poly(X), rtol=1e-12)


def test_make_source_shows_the_optimized_code():
    text = astjax.make_source(astjax.jit(poly, backend="numpy"))(X)
    assert "def jit_poly" in text
    code = [line for line in text.splitlines() if not line.strip().startswith("#")]
    squares = sum(line.count("x * x") + line.count("np.square(x)") for line in code)
    assert squares == 1  # the repeated product is computed once


def test_make_source_shows_the_optimized_code_and_its_kernel():
    text = astjax.make_source(astjax.jit(poly, backend="c"))(X)
    host, rest = text.split("\n\n\ndef ", 1)
    assert "def jit_poly" in host and "_kernel(x)" in host
    kernel = rest[rest.index("/* astjax kernel"):]
    squares = kernel.count("(in0 * in0)")
    assert squares == 1  # the repeated product is computed once, in the kernel


def test_unknown_backend_is_refused():
    with pytest.raises(astjax.AstjaxError, match="backend"):
        astjax.jit(poly, backend="tpu")


# ------------------------------------------------------------------- the code cache

def pick(tree, x):
    return x * 2.0


def relu(x):
    return np.maximum(x, 0.0)


def apply(f, x):
    return f(x) + 1.0


Pair = collections.namedtuple("Pair", "a b")


@pytest.fixture
def builds(monkeypatch):
    """The arguments of every code generation jit does (``_build`` calls)."""
    calls = []
    real = jit_api._build

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(jit_api, "_build", counting)
    return calls


def _v(*shape, dtype=np.float64):
    return np.ones(shape, dtype)


def test_a_new_shape_of_the_same_rank_reuses_the_code(builds):
    f = astjax.jit(poly)
    for shape in [(3,), (5,), (1,), (7,)]:
        x = np.arange(np.prod(shape), dtype=float).reshape(shape)
        np.testing.assert_allclose(f(x), poly(x))
    g = astjax.jit(pick)
    for n in (2, 3, 4):
        tree = [(_v(n, n + 1), _v(n + 1)), (_v(n + 1, 1), _v(1))]
        np.testing.assert_allclose(g(tree, X), X * 2.0)
    assert len(builds) == 2


@pytest.mark.parametrize("a, b", [
    (_v(3), _v(3, dtype=np.float32)),                      # dtype
    (_v(3), _v(3, 1)),                                     # rank
    (_v(3), _v()),                                         # rank 0
    ([_v(2), _v(2)], [_v(2), _v(2), _v(2)]),               # length
    ((_v(2), (_v(2),)), ((_v(2), _v(2)),)),                # nesting
    ({"a": _v(2)}, {"b": _v(2)}),                          # dict keys
    ([_v(2), _v(2)], (_v(2), _v(2))),                      # list vs tuple
    (1.0, 1),                                              # Python float vs int leaf
    (True, 1),                                             # bool vs int
    (np.float32(1.0), 1.0),                                # NumPy vs Python scalar
    ((_v(2), None), (_v(2), 0.0)),                         # None vs a leaf
    (Pair(_v(2), _v(2)), (_v(2), _v(2))),                  # namedtuple vs tuple
    ({1: _v(2), "a": _v(2)}, {2: _v(2), "a": _v(2)}),      # unsortable keys
], ids=["dtype", "rank", "rank0", "length", "nesting", "keys", "list-tuple",
        "float-int", "bool-int", "np-scalar", "none", "namedtuple", "mixed-keys"])
def test_the_cache_tells_signatures_apart(builds, a, b):
    f = astjax.jit(pick)
    for tree in (a, b, a, b):
        np.testing.assert_allclose(f(tree, X), X * 2.0)
    assert len(builds) == 2
    # the code was built for the argument it was first called with
    assert builds[0][3][0] is a and builds[1][3][0] is b


@pytest.mark.parametrize("a, b", [
    ({"a": _v(2), "b": _v(3)}, {"b": _v(5), "a": _v(1)}),  # dict order does not matter
    (Pair(_v(2), 1.0), Pair(_v(4), 2.0)),                  # general path: namedtuple
    ({1: _v(2), "a": 1.0}, {1: _v(3), "a": 3.0}),          # general path: mixed keys
], ids=["dict-order", "namedtuple", "mixed-keys"])
def test_equal_signatures_share_the_code(builds, a, b):
    f = astjax.jit(pick)
    for tree in (a, b, a):
        np.testing.assert_allclose(f(tree, X), X * 2.0)
    assert len(builds) == 1


def test_static_values_key_the_cache(builds):
    f = astjax.jit(scaled, static_argnums=(-1,), static_argnames="mode")
    np.testing.assert_allclose(f(X, 2.0), X * 2.0)
    np.testing.assert_allclose(f(X, 2.0), X * 2.0)
    np.testing.assert_allclose(f(X, 3.0), X * 3.0)
    np.testing.assert_allclose(f(X, 3.0, mode="add"), X + 3.0)
    np.testing.assert_allclose(f(X, 3.0, mode="add"), X + 3.0)
    np.testing.assert_allclose(f(X, 3.0, mode="mul"), X * 3.0)
    assert [b[1] for b in builds] == [{"n": 2.0}, {"n": 3.0}, {"n": 3.0, "mode": "add"},
                                      {"n": 3.0, "mode": "mul"}]
    with pytest.raises(astjax.AstjaxError, match="out of range"):
        astjax.jit(scaled, static_argnums=3)(X, 2.0)


def test_functions_passed_as_arguments_key_the_cache(builds):
    f = astjax.jit(apply)
    np.testing.assert_allclose(f(relu, X), np.maximum(X, 0) + 1)
    np.testing.assert_allclose(f(np.tanh, X), np.tanh(X) + 1)
    np.testing.assert_allclose(f(relu, X), np.maximum(X, 0) + 1)
    assert len(builds) == 2


def test_a_registered_leaf_type_is_flattened_as_registered(builds):
    """Python floats made pytree nodes (value in the node data): the value keys the code."""
    f = astjax.jit(pick)
    with default_registry.scoped():
        default_registry.register(float, lambda v: ((), v), lambda aux, children: aux)
        for tree in ([X, 1.0], [X, 2.0], [X, 1.0]):
            f(tree, X)
        assert len(builds) == 2
    f([X, 3.0], X)  # a leaf again: the signature of neither earlier call
    f([X, 4.0], X)
    assert len(builds) == 3


def test_clear_cache_empties_the_code_a_jitted_function_holds(builds):
    """jit's fast path reads the function's own dict of code: clear_cache empties it
    in place, so the next call builds again."""
    f = astjax.jit(scaled, static_argnums=(1,))
    f(X, 2.0)
    f(X, 2.0)
    assert len(builds) == 1
    astjax.clear_cache()
    np.testing.assert_allclose(f(X, 2.0), X * 2.0)
    assert len(builds) == 2


def test_rebinding_a_global_is_seen(monkeypatch):
    x = np.array([1.0, -2.0, 0.5])
    f = astjax.jit(idioms.uses_globals)
    np.testing.assert_allclose(f(x), idioms.uses_globals(x))
    monkeypatch.setattr(idioms, "SCALE", 5.0)
    monkeypatch.setattr(idioms, "W_GLOBAL", np.ones((4, 3)))
    np.testing.assert_allclose(f(x), 5.0 * np.sum(x * x) + 4 * np.sum(x))


def test_each_build_checks_the_source_against_the_running_code(tmp_path):
    """Code built once stays the running code's; a new build reads the file again."""
    module = load_source_module("def f(x):\n    return x + 1.0\n", tmp_path)
    f = astjax.jit(module.f)
    np.testing.assert_allclose(f(X), X + 1.0)
    path = tmp_path / (module.__name__ + ".py")
    st = path.stat()
    path.write_text("def f(x):\n    return x + 2.0\n")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
    np.testing.assert_allclose(f(X), X + 1.0)  # what Python runs
    with pytest.raises(SourceError, match="changed since it was imported"):
        f(X.astype(np.float32))


def tanh_energy(x):
    y = np.tanh(x) * 2.0 + x * x     # elementwise chains: fused groups, buffer reuse
    return np.sum(y * y)


def test_transformations_of_jit_read_code_without_runtime_dispatch(monkeypatch):
    """jvp/grad/vmap of a jitted function transform its optimized code, not the fused
    groups and buffer-reuse helpers that only the running code calls."""
    from astjax.kernels import backend as kbackend
    monkeypatch.setattr(kbackend, "NUMPY_FASTER", frozenset())   # tanh as a kernel
    x = np.random.default_rng(3).standard_normal((6, 3))
    t = np.ones_like(x)
    for backend, call in [("numpy", "run_fused("), ("c", "_kernel(")]:
        jf = astjax.jit(tanh_energy, backend=backend)
        assert call in astjax.make_source(jf)(x)
        _transformations_read_the_code(jf, x, t)


def _transformations_read_the_code(jf, x, t):
    want = astjax.jvp(tanh_energy, (x,), (t,))
    got = astjax.jvp(jf, (x,), (t,))
    np.testing.assert_allclose(got[0], want[0], rtol=1e-14)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-14)
    np.testing.assert_allclose(astjax.grad(jf)(x), astjax.grad(tanh_energy)(x), rtol=1e-14)
    np.testing.assert_allclose(astjax.vmap(jf)(x), [tanh_energy(r) for r in x], rtol=1e-14)


def test_jit_of_vmap_of_grad_and_of_jacobians():
    x = np.random.default_rng(4).standard_normal((5, 3))
    per_row = np.stack([astjax.grad(tanh_energy)(r) for r in x])
    np.testing.assert_allclose(astjax.jit(astjax.vmap(astjax.grad(tanh_energy)))(x),
                               per_row, rtol=1e-12)
    h = astjax.hessian(tanh_energy)(x[0])
    np.testing.assert_allclose(astjax.jit(astjax.hessian(tanh_energy))(x[0]), h, rtol=1e-12)
    jh = astjax.jit(astjax.jacfwd(astjax.grad(tanh_energy)))
    np.testing.assert_allclose(jh(x[0]), h, rtol=1e-10)
    with pytest.raises(DifferentiationError, match=r"jacfwd\(\) of hessian") as err:
        astjax.jacfwd(astjax.jit(astjax.hessian(tanh_energy)))
    assert "test_jit.py" in str(err.value) and "hint:" in str(err.value)


def chain(x, y):
    z = np.tanh(x) * y
    return z + x


def add_only(x, y):
    return x + y


def read_later(x):
    z = x * 2.0 + 1.0
    return z, np.sum(x)


def read_in_loop(x, n):
    y = x * 1.0
    for _ in range(n):
        y = y * x + 0.5
    return y


def scale_by(n, x):
    return np.exp(x) * n + x


@pytest.mark.parametrize("blocked", [False, True], ids=["whole", "blocked"])
def test_donated_arguments_lend_their_memory(blocked, monkeypatch):
    from astjax import runtime_fusion
    if blocked:
        monkeypatch.setattr(runtime_fusion, "MIN_WORK", 0)
        monkeypatch.setattr(runtime_fusion, "BLOCK_ELEMENTS", 3)
        monkeypatch.setenv("ASTJAX_NUM_THREADS", "2")
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((2, 200, 100))
    for f, args, reused in [(poly, (x,), 0), (chain, (x, y), 0), (add_only, (x, y), 0)]:
        want = f(*args)
        mine = [a.copy() for a in args]
        got = astjax.jit(f, donate_argnums=0)(*mine)
        np.testing.assert_array_equal(got, want)
        assert got is mine[reused], f.__name__            # computed in the donated memory
        kept = [a.copy() for a in args]
        assert astjax.jit(f)(*kept) is not kept[0]         # no donation: no reuse
        np.testing.assert_array_equal(kept[0], args[0])
    # static arguments shift the positions: donate_argnums counts all of them
    mine = x.copy()
    got = astjax.jit(scale_by, static_argnums=0, donate_argnums=1)(3, mine)
    np.testing.assert_array_equal(got, scale_by(3, x))
    assert got is mine


def test_donation_is_refused_where_it_could_change_a_value():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((300, 100))
    # the same array passed twice: the donated one is copied first
    mine = x.copy()
    got = astjax.jit(chain, donate_argnums=0)(mine, mine)
    np.testing.assert_array_equal(got, chain(x, x))
    np.testing.assert_array_equal(mine, x)
    # read again after the group, or in a loop: not reused
    for f, args in [(read_later, (x,)), (read_in_loop, (x, 3))]:
        mine = x.copy()
        got = astjax.jit(f, donate_argnums=0, static_argnums=(1,) if len(args) > 1 else ())(
            mine, *args[1:])
        want = f(*args)
        for g, w in zip(got if isinstance(got, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,)):
            np.testing.assert_array_equal(g, w)
    # a read-only array or a view: computed elsewhere
    ro = x.copy()
    ro.flags.writeable = False
    got = astjax.jit(poly, donate_argnums=0)(ro)
    np.testing.assert_array_equal(got, poly(x))
    view = x.copy()[::2]
    got = astjax.jit(poly, donate_argnums=0)(view)
    np.testing.assert_array_equal(got, poly(x[::2]))
    assert got is not view


def test_a_backend_plugs_in_and_sees_the_fusion_plan(monkeypatch):
    from astjax import backends
    seen = []
    numpy_backend = backends.get("numpy")

    def load(fn, doc, label):
        seen.append([h.name for h in fn.helpers])       # one block function per group
        return numpy_backend.load(fn, doc, label)

    monkeypatch.setattr(backends, "_REGISTRY", dict(backends._REGISTRY))
    backends.register(backends.Backend("recording", (), numpy_backend.passes, load,
                                       lambda: (True, "")))
    backends.register(backends.Backend("absent", (), numpy_backend.passes, load,
                                       lambda: (False, "no such device")))
    x = np.random.default_rng(7).standard_normal((4, 3))
    np.testing.assert_array_equal(astjax.jit(poly, backend="recording")(x), poly(x))
    assert seen == [["poly_group"]]
    with pytest.raises(astjax.AstjaxError, match="cannot run here: no such device"):
        astjax.jit(poly, backend="absent")
    with pytest.raises(astjax.AstjaxError, match="these are: .*numpy"):
        astjax.jit(poly, backend="tpu")
    # a load without the fastmath option: jit(fastmath=True) says so
    with pytest.raises(astjax.AstjaxError, match="'recording' has no fastmath option"):
        astjax.jit(poly, backend="recording", fastmath=True)(x)


def test_donate_argnums_out_of_range_or_static_is_refused():
    x = np.ones((3, 2))
    with pytest.raises(astjax.AstjaxError, match="donate_argnums 3 is out of range"):
        astjax.jit(poly, donate_argnums=3)(x)
    with pytest.raises(astjax.AstjaxError, match="both static and donated"):
        astjax.jit(scale_by, static_argnums=0, donate_argnums=0)(2, x)
