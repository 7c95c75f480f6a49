"""Generated code on another array module (astjax/device.py), tested without a GPU.

CuPy stands in here as ``fakecupy``: a module with NumPy's names whose functions
count their calls and return ``DeviceArray`` (a NumPy subclass standing for a GPU
array).  Arguments of that type must run the generated code of every
transformation with ``np`` (and the runtime modules' ``np``) bound to ``fakecupy``,
give the values NumPy gives, and return device arrays; NumPy arguments must not
touch it.
"""
from __future__ import annotations

import collections
import importlib.util
import types

import numpy as np
import pytest

import astjax
from astjax import device, lax


class DeviceArray(np.ndarray):
    """A GPU array's stand-in (``.get()`` copies to the host, as CuPy's does)."""

    def get(self):
        return np.asarray(self).view(np.ndarray).copy()


def _dev(x):
    if type(x) is np.ndarray:
        return x.view(DeviceArray)
    if isinstance(x, tuple):
        return tuple(_dev(v) for v in x)
    return x


class _Ufunc:
    def __init__(self, uf, calls):
        self._uf, self._calls = uf, calls

    def __call__(self, *a, **k):
        self._calls[self._uf.__name__] += 1
        return _dev(self._uf(*a, **k))

    def __getattr__(self, name):
        attr = getattr(self._uf, name)
        if not callable(attr):
            return attr

        def method(*a, **k):
            self._calls[f"{self._uf.__name__}.{name}"] += 1
            return _dev(attr(*a, **k))
        return method


class FakeCupy(types.ModuleType):
    """NumPy's names; functions count their calls and return DeviceArrays."""

    def __init__(self):
        super().__init__("fakecupy")
        self.calls = collections.Counter()
        self.ndarray = DeviceArray

    def __getattr__(self, name):
        value = getattr(np, name)
        if isinstance(value, np.ufunc):
            wrapped = _Ufunc(value, self.calls)
        elif callable(value) and not isinstance(value, type) and name != "errstate":
            def wrapped(*a, _f=value, _n=name, **k):
                self.calls[_n] += 1
                return _dev(_f(*a, **k))
        else:
            return value
        self.__dict__[name] = wrapped
        return wrapped


FAKE = FakeCupy()
device.register_array_module(DeviceArray, FAKE)


def loss(w, x, y):
    h = np.tanh(x @ w[:3] + w[3])
    r = h - y
    return np.mean(r * r) + 0.1 * np.sum(np.sin(w) ** 2)


def predict(params, x):
    h = np.maximum(x @ params["w1"] + params["b1"], 0.0)
    return np.sum(h @ params["w2"])


def cumulative(x, steps):
    def body(carry, k):
        carry = np.cos(carry) * 0.5 + k
        return carry, np.sum(carry)
    last, ys = lax.scan(body, x, np.arange(steps, dtype=x.dtype))
    return np.sum(last) + np.sum(ys)


def rows(x, v):
    return np.tanh(x * v).sum(axis=-1)


def _data():
    r = np.random.default_rng(0)
    return r.standard_normal(4), r.standard_normal((6, 3)), r.standard_normal(6)


def _same(got, want, rtol=1e-12):
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w, rtol)
        return
    if isinstance(want, dict):
        for k in want:
            _same(got[k], want[k], rtol)
        return
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=1e-14)


def _on_device(got):
    leaves = astjax.tree_util.tree_leaves(got)
    arrays = [g for g in leaves if isinstance(g, np.ndarray)]
    return arrays and all(type(g) is DeviceArray for g in arrays)


CASES = {
    "grad": lambda: astjax.grad(loss),
    "value_and_grad": lambda: astjax.value_and_grad(loss, argnums=(0, 1)),
    "jit": lambda: astjax.jit(loss),
    "jit(grad)": lambda: astjax.jit(astjax.grad(loss)),
    "vmap": lambda: astjax.vmap(rows, in_axes=(0, None)),
    "jacfwd": lambda: astjax.jacfwd(loss),
    "hessian": lambda: astjax.hessian(loss),
}


@pytest.mark.parametrize("name", list(CASES))
def test_transformations_run_on_the_arguments_array_module(name):
    w, x, y = _data()
    f = CASES[name]()
    args = (w, x, y) if name != "vmap" else (x, w[:3])
    want = f(*args)
    FAKE.calls.clear()
    got = f(*[_dev(a) for a in args])
    assert sum(FAKE.calls.values()) > 0, "the generated code called fakecupy"
    _same(got, want)
    if name not in ("jacfwd", "hessian"):      # these assemble their matrix on the host
        assert _on_device(got), got
    FAKE.calls.clear()
    again = f(*args)                            # NumPy arguments never touch it
    assert not FAKE.calls
    _same(again, want)


def test_vjp_and_jvp_on_device_arrays():
    w, x, y = _data()
    out, pullback = astjax.vjp(loss, _dev(w), _dev(x), _dev(y))
    want_out, want_pullback = astjax.vjp(loss, w, x, y)
    _same(out, want_out)
    _same(pullback(np.float64(1.0)), want_pullback(np.float64(1.0)))
    FAKE.calls.clear()
    got = astjax.jvp(loss, (_dev(w), x, y), (_dev(np.ones(4)), np.zeros_like(x),
                                             np.zeros_like(y)))
    assert FAKE.calls
    _same(got, astjax.jvp(loss, (w, x, y), (np.ones(4), np.zeros_like(x),
                                            np.zeros_like(y))))


def test_pytrees_of_device_arrays_and_lax_scan():
    r = np.random.default_rng(1)
    params = {"w1": r.standard_normal((3, 5)), "b1": r.standard_normal(5),
              "w2": r.standard_normal((5, 2))}
    x = r.standard_normal((4, 3))
    want = astjax.grad(predict)(params, x)
    FAKE.calls.clear()
    got = astjax.grad(predict)({k: _dev(v) for k, v in params.items()}, _dev(x))
    assert FAKE.calls["maximum"] >= 1
    _same(got, want)
    assert _on_device(got)
    z = r.standard_normal(5)
    want = astjax.grad(cumulative)(z, 6)
    FAKE.calls.clear()
    got = astjax.grad(cumulative)(_dev(z), 6)
    assert FAKE.calls["cos"] >= 6
    _same(got, want)
    assert type(got) is DeviceArray


def test_the_runtime_modules_are_rebound_not_shared():
    clones = device.runtime_for(FAKE)
    from astjax import runtime, runtime_array
    assert clones["astjax.runtime"] is not runtime
    assert clones["astjax.runtime"].np.ndarray is DeviceArray
    assert clones["astjax.runtime_array"].np.ndarray is DeviceArray
    assert runtime.np is np and runtime_array.np is np       # the originals untouched
    # functions importing their siblings at call time get the rebound ones
    ns = device.rebind({"np": np, "rt": runtime, "f": runtime_array.getitem}, FAKE)
    assert ns["rt"] is clones["astjax.runtime"] and ns["np"].ndarray is DeviceArray
    assert ns["f"] is clones["astjax.runtime_array"].getitem
    assert device.array_module(1.0, np.ones(2), [_dev(np.ones(2))]) is FAKE
    assert device.array_module(1.0, np.ones(2), {"a": np.ones(1)}) is np


def test_device_get_and_device_put():
    tree = {"a": _dev(np.arange(3.0)), "b": (np.ones(2), 3)}
    got = device.device_get(tree)
    assert type(got["a"]) is np.ndarray and np.array_equal(got["a"], np.arange(3.0))
    assert got["b"][1] == 3 and type(got["b"][0]) is np.ndarray
    if importlib.util.find_spec("cupy") is None:
        with pytest.raises(ImportError, match=r'pip install "astjax\[cuda\]"'):
            astjax.device_put(tree)
