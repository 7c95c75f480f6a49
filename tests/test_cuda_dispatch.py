"""Every transformation on device arrays (astjax/device.py), tested without a GPU.

CuPy stands in as ``fakecupy`` (tests/fakecupy.py): device arrays that refuse implicit
conversion to NumPy, as CuPy's do, and a module whose functions count their calls and
refuse NumPy operands.  For every row of the transformation table, device arguments
must run the generated code with ``np`` bound to the fake module, give the values the
NumPy run gives, and return device arrays only (a Jacobian assembled on the host, a
basis made with NumPy, a cotangent seeded on the host all fail here); NumPy
arguments must not touch the fake module.
"""
from __future__ import annotations

import numpy as np
import pytest

import astjax
from astjax import device, lax
from fakecupy import FAKE, DeviceArray, dev, host


def loss(w, x, y):
    h = np.tanh(x @ w[:3] + w[3])
    r = h - y
    return np.mean(r * r) + 0.1 * np.sum(np.sin(w) ** 2)


def residuals(w, x):
    return np.tanh(x @ w[:3]) * w[3]


def predict(params, x):
    h = np.maximum(x @ params["w1"] + params["b1"], 0.0)
    return np.sum(h @ params["w2"])


def cumulative(x, steps):
    def body(carry, k):
        carry = np.cos(carry) * 0.5 + k
        return carry, np.sum(carry)
    last, ys = lax.scan(body, x, np.arange(steps, dtype=x.dtype))
    return np.sum(last) + np.sum(ys)


def looped(x):
    def body(i, c):
        return c * 0.9 + np.sin(c) * i
    return np.sum(lax.fori_loop(0, 4, body, x) ** 2)


def until(x):
    def cond(c):
        return c[1] < 3

    def body(c):
        return np.sin(c[0]) * 1.5 + 0.1, c[1] + 1
    v, _ = lax.while_loop(cond, body, (x, 0))
    return v


def branchy(x, s):
    y = lax.cond(s > 0, lambda v: np.sin(v) * s, lambda v: np.cos(v), x)
    z = lax.switch(1, [lambda v: v * 2.0, lambda v: v ** 2, lambda v: -v], y)
    return np.sum(z)


def mapped(x):
    return np.sum(lax.map(lambda row: np.tanh(row) * row, x))


def rows(x, v):
    return np.tanh(x * v).sum(axis=-1)


@astjax.custom_jvp
def softplus(x):
    return np.log1p(np.exp(x))


@softplus.defjvp
def _softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return softplus(x), t / (1.0 + np.exp(-x))


@astjax.custom_vjp
def clipped(x):
    return np.sin(x)


def _clipped_fwd(x):
    return np.sin(x), np.cos(x)


def _clipped_bwd(c, g):
    return (np.clip(g * c, -0.5, 0.5),)


clipped.defvjp(_clipped_fwd, _clipped_bwd)


def with_customs(x):
    return np.sum(softplus(x) * clipped(x))


def stage(x):
    return np.sin(np.cos(x)) * x


def checkpointed(x):
    return np.sum(astjax.checkpoint(stage)(x) ** 2)


def _host_sin(a, scale=1.0):
    assert type(a) is np.ndarray, type(a)        # callbacks get NumPy, as in JAX
    return np.sin(a) * scale


SEEN: list = []


def _record_type(v):
    SEEN.append(type(v))


def with_callback(a):
    astjax.debug.callback(_record_type, a)
    b = astjax.debug.pure_callback(_host_sin, astjax.ShapeDtypeStruct(a.shape, a.dtype),
                                   a * 2.0, vmap_method="sequential")
    return np.tanh(b) + a


def with_broadcast_callback(a):
    return astjax.debug.pure_callback(_host_sin, astjax.ShapeDtypeStruct(a.shape, a.dtype),
                                      a, vmap_method="expand_dims") * 3.0


def _data():
    r = np.random.default_rng(0)
    return r.standard_normal(4), r.standard_normal((6, 3)), r.standard_normal(6)


def _params():
    r = np.random.default_rng(1)
    return ({"w1": r.standard_normal((3, 5)), "b1": r.standard_normal(5),
             "w2": r.standard_normal((5, 2))}, r.standard_normal((4, 3)))


def _vjp(f, *args):
    out, pullback = astjax.vjp(f, *args)
    ct = out * 0.0 + 1.0          # on the arguments' device
    return out, pullback(ct)


def _linearize(f, *args):
    out, f_jvp = astjax.linearize(f, *args)
    return out, f_jvp(*[a * 0.5 + 1.0 for a in args])


def _jvp(f, *args):
    return astjax.jvp(f, args, tuple(a * 0.0 + 1.0 for a in args))


def _random(key):
    r = astjax.random
    k1, k2, k3 = r.split(key, 3)
    return (r.normal(k1, (3, 2)), r.uniform(k2, (4,)), r.fold_in(key, 3),
            r.bits(k3, (5,)), r.randint(k1, (6,), 0, 10), r.bernoulli(k2, 0.3, (7,)),
            r.exponential(k3, (3,)), r.normal(k1, (2,), np.float64),
            r.permutation(k2, 6), r.categorical(k3, np.log(np.arange(1.0, 5.0))),
            r.truncated_normal(k1, -1.0, 2.0, (5,)), r.gamma(k2, 2.0, (4,)),
            r.choice(k3, 5, (3,), replace=False),
            r.multivariate_normal(k1, np.zeros(2), np.eye(2), (3,), np.float64))


def sample_mean(key, mu):
    return np.mean(mu + astjax.random.normal(key, (8,), np.float64))


w, x, y = _data()
params, px = _params()
z = np.random.default_rng(2).standard_normal(5)

# name -> (function of the arguments, arguments)
TABLE = {
    "grad": (astjax.grad(loss), (w, x, y)),
    "value_and_grad": (astjax.value_and_grad(loss, argnums=(0, 1)), (w, x, y)),
    "jvp": (lambda *a: _jvp(loss, *a), (w, x, y)),
    "vjp": (lambda *a: _vjp(residuals, *a), (w, x)),
    "linearize": (lambda *a: _linearize(residuals, *a), (w, x)),
    "jacfwd": (astjax.jacfwd(residuals, argnums=(0, 1)), (w, x)),
    "jacrev": (astjax.jacrev(residuals, argnums=(0, 1)), (w, x)),
    "jacfwd(scalar)": (astjax.jacfwd(loss), (w, x, y)),
    "jacrev(pytree)": (astjax.jacrev(predict), (params, px)),
    "hessian": (astjax.hessian(loss), (w, x, y)),
    "jacfwd(jacrev)": (astjax.jacfwd(astjax.jacrev(loss)), (w, x, y)),
    "vmap": (astjax.vmap(rows, in_axes=(0, None)), (x, w[:3])),
    "vmap(out_axes)": (astjax.vmap(lambda a: np.outer(a, a), out_axes=1), (x,)),
    "vmap(grad)": (astjax.vmap(astjax.grad(lambda wi, xi: np.sum(np.tanh(xi * wi))),
                               in_axes=(None, 0)), (w[:3], x)),
    "vmap(vmap)": (astjax.vmap(astjax.vmap(lambda a, b: np.sin(a) * b, in_axes=(0, None)),
                               in_axes=(1, None)), (x, w[:3])),
    "vmap(out_axes=None)": (astjax.vmap(lambda a, b: (np.sum(a * b), b * 2.0),
                                        in_axes=(0, None), out_axes=(0, None)), (x, w[:3])),
    "vmap(jacfwd)": (astjax.vmap(astjax.jacfwd(lambda a: np.sin(a) * a[0])), (x,)),
    "vmap(hessian)": (astjax.vmap(astjax.hessian(lambda a: np.sum(np.sin(a) * a))), (x,)),
    "jacobian": (astjax.jacobian(residuals), (w, x)),
    "grad(has_aux)": (astjax.grad(lambda a, b: (np.sum(np.tanh(a) * b), np.cos(a)),
                                  has_aux=True), (w[:3], w[1:])),
    "pure_callback": (with_callback, (z,)),
    "jit(pure_callback)": (astjax.jit(with_callback), (z,)),
    "vmap(pure_callback)": (astjax.vmap(with_callback), (x,)),
    "vmap(expand_dims)": (astjax.vmap(with_broadcast_callback), (x,)),
    "vmap(pytree in_axes)": (astjax.vmap(lambda p: np.tanh(p["a"]) * p["b"],
                                         in_axes=({"a": 0, "b": None},)),
                             ({"a": x[:3], "b": w[:3]},)),
    "jit": (astjax.jit(loss), (w, x, y)),
    "jit(grad)": (astjax.jit(astjax.grad(loss)), (w, x, y)),
    "lax.scan": (astjax.value_and_grad(cumulative), (z, 6)),
    "lax.fori_loop": (astjax.value_and_grad(looped), (z,)),
    "lax.while_loop": (astjax.jit(until), (z,)),
    "jvp(lax.while_loop)": (lambda a: _jvp(until, a), (z,)),
    "lax.cond/switch": (astjax.value_and_grad(branchy), (z, 0.7)),
    "lax.map": (astjax.value_and_grad(mapped), (x,)),
    "pytrees": (astjax.value_and_grad(predict), (params, px)),
    "custom_jvp/vjp": (astjax.value_and_grad(with_customs), (z,)),
    "jvp(custom_jvp)": (lambda a: _jvp(lambda v: np.sum(softplus(v) * v), a), (z,)),
    "checkpoint": (astjax.grad(checkpointed), (z,)),
    "random": (_random, (astjax.random.PRNGKey(7),)),
    "vmap(random)": (astjax.vmap(lambda k: astjax.random.normal(k, (3,))),
                     (astjax.random.split(astjax.random.PRNGKey(3), 4),)),
    "grad(random)": (astjax.grad(sample_mean, argnums=1),
                     (astjax.random.PRNGKey(5), np.float64(0.5) + np.zeros(8))),
}


def _leaves(tree):
    return astjax.tree_util.tree_leaves(tree)


def _same(got, want, rtol=1e-12):
    gl, wl = _leaves(host(got)), _leaves(want)
    assert len(gl) == len(wl)
    for g, w_ in zip(gl, wl):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w_), rtol=rtol, atol=1e-14)
        assert np.asarray(g).dtype == np.asarray(w_).dtype


def _all_on_device(got):
    """Every array leaf a device array (numbers may stay Python numbers)."""
    bad = [type(v).__name__ for v in _leaves(got)
           if isinstance(v, (np.ndarray, np.generic))]
    assert not bad, f"host values in a device result: {bad}"


@pytest.mark.parametrize("name", list(TABLE))
def test_every_transformation_runs_on_the_arguments_device(name):
    f, args = TABLE[name]
    want = f(*args)
    FAKE.calls.clear()
    SEEN.clear()
    got = f(*dev(args))
    assert all(t is np.ndarray for t in SEEN), SEEN      # host callbacks get NumPy
    assert sum(FAKE.calls.values()) > 0, "the code ran on the device module"
    _all_on_device(got)
    _same(got, want)
    FAKE.calls.clear()
    again = f(*args)                     # NumPy arguments never touch the device
    assert not FAKE.calls, dict(FAKE.calls)
    _same(again, want)


def test_eval_shape_of_device_arguments():
    got = astjax.eval_shape(astjax.grad(loss), *dev((w, x, y)))
    assert got.shape == w.shape and got.dtype == w.dtype
    got = astjax.eval_shape(astjax.jit(residuals), *dev((w, x)))
    assert got.shape == (6,) and got.dtype == np.float64


def test_mixed_host_and_device_arguments_move_to_the_device():
    got = astjax.grad(loss)(dev(w), x, y)          # host data beside device weights
    _all_on_device(got)
    _same(got, astjax.grad(loss)(w, x, y))
    got = astjax.jacrev(residuals)(dev(w), x)
    _all_on_device(got)
    _same(got, astjax.jacrev(residuals)(w, x))


def test_the_fake_refuses_what_cupy_refuses():
    a = dev(np.arange(3.0))
    with pytest.raises(TypeError, match="Implicit conversion"):
        np.asarray(a)
    with pytest.raises(TypeError, match="Implicit conversion"):
        np.zeros(3)[...] = a
    with pytest.raises(TypeError):
        np.ones(3) + a
    with pytest.raises(TypeError):
        FAKE.sin(np.ones(3))
    assert type(np.sin(a)) is DeviceArray                 # __array_ufunc__, as CuPy
    assert type(np.stack([a, a])) is DeviceArray          # __array_function__, as CuPy


def test_the_runtime_modules_are_rebound_not_shared():
    clones = device.runtime_for(FAKE)
    from astjax import runtime, runtime_array
    assert clones["astjax.runtime"] is not runtime
    assert clones["astjax.runtime"].np.ndarray is DeviceArray
    assert clones["astjax.runtime_array"].np.ndarray is DeviceArray
    assert runtime.np is np and runtime_array.np is np       # the originals untouched
    ns = device.rebind({"np": np, "rt": runtime, "f": runtime_array.getitem}, FAKE)
    assert ns["rt"] is clones["astjax.runtime"] and ns["np"].ndarray is DeviceArray
    assert ns["f"] is clones["astjax.runtime_array"].getitem
    assert device.array_module(1.0, np.ones(2), [dev(np.ones(2))]) is FAKE
    assert device.array_module(1.0, np.ones(2), {"a": np.ones(1)}) is np


def test_device_get_and_device_put():
    import importlib.util
    tree = {"a": dev(np.arange(3.0)), "b": (np.ones(2), 3)}
    got = device.device_get(tree)
    assert type(got["a"]) is np.ndarray and np.array_equal(got["a"], np.arange(3.0))
    assert got["b"][1] == 3 and type(got["b"][0]) is np.ndarray
    if importlib.util.find_spec("cupy") is None:
        with pytest.raises(ImportError, match=r'pip install "astjax\[cuda\]"'):
            astjax.device_put(tree)


def _primitive_cases():
    import test_grad_programs as TG
    return TG


@pytest.mark.parametrize("name", [c[0] for c in _primitive_cases().PRIMITIVE_CASES])
def test_every_primitive_rule_on_device_arrays(name):
    """The grad corpus's primitives (reverse and forward rules, indexing, scatters,
    concatenations, creation...) on device arrays: the runtime's helpers rebound."""
    import zlib
    TG = _primitive_cases()
    make = dict(TG.PRIMITIVE_CASES)[name]
    args = make(np.random.default_rng(zlib.crc32(name.encode())))
    f = getattr(TG.prims, name)
    nums = 0 if len(args) == 1 else tuple(range(len(args)))
    batched = tuple(np.stack([a, a * 0.9]) for a in args)     # two examples
    for t, at in ((astjax.value_and_grad(f, argnums=nums), args),
                  (lambda *a: astjax.jvp(f, a, tuple(v * 0.5 + 0.25 for v in a)), args),
                  (astjax.vmap(astjax.grad(lambda *a: np.sum(f(*a)), argnums=nums)),
                   batched)):
        want = t(*at)
        got = t(*dev(at))
        _all_on_device(got)
        _same(got, want, rtol=1e-11)
