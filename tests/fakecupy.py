"""A CuPy stand-in for tests without a GPU: device arrays that REFUSE to become NumPy.

Real CuPy raises on implicit conversion (``np.asarray(x)``, ``numpy_array[...] = x``,
``np.zeros(...) + x``): a runtime that assembles results on the host with NumPy fails
there, or, where it converts explicitly, silently copies.  ``DeviceArray`` wraps a
NumPy array and behaves as a CuPy array does:

* ``__array__`` raises (CuPy's message); ``.get()`` is the explicit copy to the host;
* ``__array_ufunc__``/``__array_function__`` run NumPy's ufunc or function on the
  device (CuPy's dispatch), counted as ``np.<name>`` in ``FAKE.calls``; a NumPy array
  operand beside a device array raises, as CuPy refuses ``numpy.ndarray`` operands;
* indexing a device array gives device arrays (0-d for one element).

``FAKE`` (module ``fakecupy``) has NumPy's names: its functions count their calls,
refuse NumPy array operands (except the conversions), and return ``DeviceArray``.
"""
from __future__ import annotations

import collections
import operator
import types

import numpy as np

from astjax import device

MESSAGE = "Implicit conversion to a NumPy array is not allowed. Please use `.get()`"

# functions that take host arrays (conversions) or only look at metadata
_HOST_OK = frozenset({
    "asarray", "array", "asanyarray", "ascontiguousarray", "asnumpy", "result_type",
    "can_cast", "promote_types", "issubdtype", "dtype", "iinfo", "finfo", "isscalar",
    "min_scalar_type", "common_type", "shape", "ndim", "size", "broadcast_shapes",
    "isdtype", "obj2sctype", "issubsctype", "mintypecode", "get_array_module"})


CAPTURING: list = []     # non-empty while a CUDA graph is being captured (test devices)


def _no_sync(what):
    """Reading a device value on the host synchronizes: refused inside a capture, as
    CUDA refuses it (cudaErrorStreamCaptureUnsupported)."""
    if CAPTURING:
        raise RuntimeError(f"fakecupy: {what} of a device array during graph capture")


def _no_transfer_in(what):
    """Copying host data to the device inside a capture: refused, as CuPy refuses it
    ("the current stream is capturing, so H2D transfers are disallowed")."""
    if CAPTURING:
        raise RuntimeError(f"fakecupy: {what} from the host during graph capture: "
                           "the current stream is capturing, so H2D transfers are "
                           "disallowed")


def _no_blas(what):
    """CuPy refuses cuBLAS calls inside a capture (NotImplementedError)."""
    if CAPTURING:
        raise NotImplementedError(f"fakecupy: {what}: calling cuBLAS API during stream "
                                  "capture is currently unsupported")


# CuPy functions that copy host data to the device (a host operand), that join
# arrays (more than 8 small ones: one kernel over a table of pointers sent from the
# host), and that call cuBLAS
_TRANSFERS = frozenset({"asarray", "array", "asanyarray", "ascontiguousarray"})
_JOINS = frozenset({"concatenate", "stack", "vstack", "hstack", "column_stack",
                    "dstack", "row_stack"})
_BLAS = frozenset({"dot", "matmul", "tensordot", "inner", "vdot", "einsum", "kron"})


def _capture_refusals(name, args):
    """What CuPy refuses while a stream is capturing (only checked then)."""
    if name in _TRANSFERS and args and type(args[0]) is not DeviceArray:
        _no_transfer_in(f"{name}()")
    elif name in _JOINS and args and isinstance(args[0], (list, tuple)) and \
            len(args[0]) > 8:
        _no_transfer_in(f"{name}() of {len(args[0])} arrays (a pointer table)")
    elif name in _BLAS or name.startswith("linalg."):
        _no_blas(f"{name}()")


class HostConversion(TypeError):
    """A device array met NumPy where CuPy would refuse it."""


def _unwrap(x, strict):
    t = type(x)
    if t is DeviceArray:
        return x._a
    if t is np.ndarray and strict:
        raise HostConversion(f"fakecupy: a numpy.ndarray operand {x.shape} "
                             "(CuPy needs cupy arrays)")
    if t is list or t is tuple:
        return t(_unwrap(v, strict) for v in x)
    if t is dict:
        return {k: _unwrap(v, strict) for k, v in x.items()}
    return x


def _wrap(x):
    t = type(x)
    if t is np.ndarray:
        return DeviceArray(x)
    if isinstance(x, np.generic):
        return DeviceArray(np.asarray(x))
    if t is list or t is tuple:
        return t(_wrap(v) for v in x)
    return x


class _Flags:
    """CuPy's flags: the three it has (no ``writeable``, ``fnc``, ``aligned``...)."""

    def __init__(self, flags):
        self.c_contiguous = flags.c_contiguous
        self.f_contiguous = flags.f_contiguous
        self.owndata = flags.owndata

    def __getitem__(self, name):
        return {"C_CONTIGUOUS": self.c_contiguous, "F_CONTIGUOUS": self.f_contiguous,
                "OWNDATA": self.owndata}[name]


# CuPy functions that build arrays from shapes and Python values; every other
# function (not a ufunc) needs a cupy array as its array operand, as CuPy's do
# (``cupy.prod((2, 3))``, ``cupy.delete((2, 3), 0)``, ``cupy.where(True, x, y)`` raise)
_CREATION = frozenset({
    "zeros", "ones", "empty", "full", "arange", "linspace", "logspace", "geomspace",
    "eye", "identity", "tri", "indices", "fromfunction", "frombuffer", "fromiter"})


def _refuse_host_operand(name, args, kwargs):
    operands = [v for v in args if not isinstance(v, str)] or list(kwargs.values())
    first = operands[0] if operands else None       # einsum's subscripts come first
    t = type(first)
    if t is DeviceArray:
        return
    if (t is list or t is tuple) and any(type(v) is DeviceArray for v in first):
        return
    raise TypeError(f"fakecupy: {name}() got a {t.__name__} where CuPy needs a "
                    "cupy.ndarray (CuPy's functions do not take Python sequences or "
                    "numbers as arrays)")


class DeviceArray:
    """A GPU array's stand-in: a NumPy array behind a wall."""

    __array_priority__ = 1000
    __hash__ = None

    def __init__(self, a):
        assert type(a) is np.ndarray, type(a)
        self._a = a

    def __array__(self, dtype=None, copy=None):
        raise HostConversion(MESSAGE)

    def __array_function__(self, func, types_, args, kwargs):
        FAKE.calls[f"np.{func.__name__}"] += 1
        return _wrap(func(*_unwrap(args, False), **_unwrap(kwargs, False)))

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if getattr(np, ufunc.__name__, None) is not ufunc:
            return NotImplemented       # CuPy knows NumPy's ufuncs, not frompyfunc's
        FAKE.calls[f"np.{ufunc.__name__}"] += 1
        if ufunc is np.matmul:
            _no_blas("matmul")
        f = ufunc if method == "__call__" else getattr(ufunc, method)
        got = f(*_unwrap(inputs, True), **_unwrap(kwargs, True))
        out = kwargs.get("out")
        if out is not None:             # CuPy returns the out array itself
            return out[0] if isinstance(out, tuple) and len(out) == 1 else out
        return _wrap(got)

    def get(self):
        _no_sync("get")
        return self._a.copy()

    def item(self, *args):
        _no_sync("item")
        return self._a.item(*args)

    # metadata
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    itemsize = property(lambda self: self._a.itemsize)
    nbytes = property(lambda self: self._a.nbytes)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: _Flags(self._a.flags))
    T = property(lambda self: DeviceArray(self._a.T))
    real = property(lambda self: _wrap(self._a.real))
    imag = property(lambda self: _wrap(self._a.imag))
    data = property(lambda self: types.SimpleNamespace(ptr=self._a.ctypes.data))

    def __getattr__(self, name):
        if name.startswith("__"):       # no __array_interface__: that would be a copy
            raise AttributeError(name)
        attr = getattr(self._a, name)
        if not callable(attr):
            return _wrap(attr)

        def method(*a, **k):
            if name == "dot":
                _no_blas("ndarray.dot")
            return _wrap(attr(*_unwrap(a, True), **_unwrap(k, True)))
        return method

    def __repr__(self):
        return f"DeviceArray({self._a!r})"

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        for row in self._a:
            yield _wrap(row)

    def __bool__(self):
        _no_sync("bool")
        return bool(self._a)

    def __float__(self):
        _no_sync("float")
        return float(self._a)

    def __int__(self):
        _no_sync("int")
        return int(self._a)

    def __complex__(self):
        _no_sync("complex")
        return complex(self._a)

    def __index__(self):
        return operator.index(self._a[()]) if self._a.ndim == 0 else operator.index(self._a)

    def __getitem__(self, key):
        if CAPTURING and any(type(k) in (np.ndarray, list)
                             for k in (key if type(key) is tuple else (key,))):
            _no_transfer_in("an index array")
        return _wrap(self._a[_unwrap(key, False)])

    def __setitem__(self, key, value):
        if type(value) is np.ndarray:
            _no_transfer_in("setitem of a numpy.ndarray")
        self._a[_unwrap(key, False)] = _unwrap(value, True)


def _binary(name):
    op = getattr(operator, name)

    def forward(self, other):
        if name == "matmul":
            _no_blas("@")
        return _wrap(op(self._a, _unwrap(other, True)))

    def reflected(self, other):
        if name == "matmul":
            _no_blas("@")
        return _wrap(op(_unwrap(other, True), self._a))

    def inplace(self, other):
        getattr(operator, f"i{name.rstrip('_')}")(self._a, _unwrap(other, True))
        return self
    return forward, reflected, inplace


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and_",
              "or_", "xor", "lshift", "rshift"):
    _f, _r, _i = _binary(_name)
    _n = _name.rstrip("_")
    setattr(DeviceArray, f"__{_n}__", _f)
    setattr(DeviceArray, f"__r{_n}__", _r)
    setattr(DeviceArray, f"__i{_n}__", _i)
for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(DeviceArray, f"__{_name}__", _binary(_name)[0])
for _name in ("neg", "pos", "abs", "invert"):
    setattr(DeviceArray, f"__{_name}__",
            (lambda op: lambda self: _wrap(op(self._a)))(getattr(operator, _name)))
DeviceArray.__divmod__ = lambda self, o: _wrap(divmod(self._a, _unwrap(o, True)))


def _function(f, name, calls, prefix=""):
    strict = name not in _HOST_OK
    needs_array = strict and name not in _CREATION

    def wrapped(*a, **k):
        calls[prefix + name] += 1
        if CAPTURING:
            _capture_refusals(prefix + name, a)
        if needs_array:
            _refuse_host_operand(prefix + name, a, k)
        return _wrap(f(*_unwrap(a, strict), **_unwrap(k, strict)))
    wrapped.__name__ = name
    return wrapped


class _Ufunc:
    def __init__(self, uf, calls):
        self._uf, self._calls = uf, calls
        self.__name__ = uf.__name__

    def __call__(self, *a, **k):
        self._calls[self._uf.__name__] += 1
        return _wrap(self._uf(*_unwrap(a, True), **_unwrap(k, True)))

    def __getattr__(self, name):
        attr = getattr(self._uf, name)
        if not callable(attr):
            return attr
        return _function(attr, name, self._calls, f"{self._uf.__name__}.")


class _Namespace(types.ModuleType):
    """NumPy's (or a NumPy submodule's) names on the device."""

    def __init__(self, name, source, calls, prefix=""):
        super().__init__(name)
        self._source, self._prefix = source, prefix
        self.calls = calls

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(self._source, name)
        if isinstance(value, np.ufunc):
            wrapped = _Ufunc(value, self.calls)
        elif isinstance(value, types.ModuleType) and name in ("linalg", "fft"):
            wrapped = _Namespace(f"fakecupy.{name}", value, self.calls, f"{name}.")
        elif callable(value) and not isinstance(value, type) and name != "errstate":
            wrapped = _function(value, name, self.calls, self._prefix)
        else:
            return value
        self.__dict__[name] = wrapped
        return wrapped


class FakeCupy(_Namespace):
    def __init__(self):
        super().__init__("fakecupy", np, collections.Counter())
        self.ndarray = DeviceArray

    def asnumpy(self, x):
        return x.get() if type(x) is DeviceArray else np.asarray(x)

    def get_array_module(self, *args):
        return self if any(type(a) is DeviceArray for a in args) else np


FAKE = FakeCupy()
device.register_array_module(DeviceArray, FAKE)


def dev(x):
    """``x`` (a pytree of NumPy arrays) on the fake device."""
    t = type(x)
    if t is np.ndarray:
        return DeviceArray(x.copy())
    if t is tuple or t is list:
        return t(dev(v) for v in x)
    if t is dict:
        return {k: dev(v) for k, v in x.items()}
    return x


def host(x):
    """``x`` back on the host (device arrays copied out explicitly)."""
    t = type(x)
    if t is DeviceArray:
        return x.get()
    if t is tuple or t is list:
        return t(host(v) for v in x)
    if t is dict:
        return {k: host(v) for k, v in x.items()}
    return x
