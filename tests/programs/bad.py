"""Programs astjax must refuse with a located error.

Each offending line ends with a ``# @name`` marker that the tests look up.
"""
import math

import numpy as np

import astjax

# a compiled function astjax has no rule for (np.vectorize has no source to read)
erf = np.vectorize(math.erf)

COUNTER = 0


class Holder:
    value = None


class Scaler:
    def __init__(self, k):
        self.k = k

    def apply(self, x):
        return x * self.k


scaler = Scaler(2.0)


def uses_try(x):
    try:  # @try
        y = np.sin(x)
    except ValueError:
        y = x
    return np.sum(y)


def uses_with(x):
    with open(__file__) as fh:  # @with
        y = x * len(fh.name)
    return np.sum(y)


def uses_yield(x):
    yield np.sum(x)  # @yield


def uses_global(x):
    global COUNTER  # @global
    COUNTER = COUNTER + 1
    return np.sum(x)


def uses_nonlocal(x):
    k = 1.0

    def bump():
        nonlocal k  # @nonlocal
        k = 2.0

    bump()
    return np.sum(x * k)


def uses_class(x):
    class Box:  # @class
        pass

    return np.sum(x)


def star_args(*xs):  # @star_args
    return np.sum(xs[0])


def kwargs_call(x):
    opts = {"axis": 0} if x.ndim > 1 else {"keepdims": True}  # keys chosen at run time
    return np.sum(np.sum(x, **opts))  # @kwargs


def assign_attribute(x):
    box = Holder()
    box.value = x  # @attr
    return np.sum(box.value)


def unknown_c_function(x):
    y = np.tanh(x)
    z = erf(y)  # @erf
    return np.sum(z)


def unknown_method(x):
    y = scaler.apply(x)  # @method
    return np.sum(y)


def unknown_numpy_function(x):
    y = np.i0(x)  # @i0
    return np.sum(np.abs(y))


def unknown_on_constant(x):
    c = erf(np.ones(3))
    return np.sum(x * c)


def erf_stopped(x):
    z = erf(astjax.stop_gradient(np.tanh(x)))
    return np.sum(x * z)


def uses_import(x):
    import math  # @import
    return np.sum(x) * math.pi


def uses_del(x):
    y = x * 2.0
    del y  # @del
    return np.sum(x)


def recursive(x, n=2):
    if n == 0:
        return np.sum(x)
    return recursive(x * 2.0, n - 1)  # @recursive
