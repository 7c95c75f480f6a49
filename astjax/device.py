"""Arrays on a device: ``device_put``/``device_get``, and generated code on CuPy.

Generated code names NumPy as ``np`` (its namespace: ``api._base_namespace``) and
calls astjax's runtime modules (``ra``, ``rt``, ``rb``, fused groups, ``lax``), which
name it ``np`` too.  To run the same code on another array module (CuPy: the user's
``np.*`` calls map to ``cupy`` when the inputs live on the GPU), the generated text
is loaded a second time, in a namespace where ``np`` is that module and the runtime
modules are copies of themselves executed with ``numpy`` imports resolved to it
(``runtime_for``).  One text, two bindings: nothing is rewritten.

Which binding runs is chosen per call by ``dispatching``'s wrappers: the type of
each argument is looked at, NumPy arrays and Python numbers at the cost of one set
membership test, so NumPy inputs pay nothing measurable.  Array modules are
registered by array type (``register_array_module``); CuPy registers itself the
first time one of its arrays is seen.
"""
from __future__ import annotations

import builtins
import functools
import importlib.util
import sys
import threading
import types

import numpy

from astjax import codegen

# the modules generated code calls into, re-executed per array module
RUNTIME_MODULES = ("astjax.runtime", "astjax.runtime_array", "astjax.runtime_batch",
                   "astjax.runtime_fusion", "astjax.lax", "astjax.random")
_ALIASES = {"astjax.runtime": "rt", "astjax.runtime_array": "ra",
            "astjax.runtime_batch": "rb"}

_MODULES: dict = {}          # array type -> array module (xp)
_PLAIN = frozenset({numpy.ndarray, float, int, bool, complex, type(None), str,
                    numpy.float64, numpy.float32, numpy.int64, numpy.int32, numpy.bool_})
_lock = threading.RLock()


# functions that build device arrays from shapes and Python values: always ``xp``'s
_CREATION = frozenset({
    "array", "asarray", "asanyarray", "ascontiguousarray", "asfortranarray", "zeros",
    "ones", "empty", "full", "arange", "linspace", "logspace", "geomspace", "eye",
    "identity", "tri", "indices", "fromfunction", "frombuffer", "fromiter",
    "zeros_like", "ones_like", "empty_like", "full_like", "copy"})


class ArrayModule(types.ModuleType):
    """``np`` for generated code on another array module: its names where it has
    them, NumPy's otherwise (dtypes, ``np.generic``, ``np.errstate``...).

    A function other than a ufunc or an array constructor, called with no device
    array among its arguments (``np.prod(shape)``, ``np.reshape(0.5, (1, 1))``), runs
    NumPy's, since CuPy's functions refuse tuples and Python numbers; a NumPy array it
    returns moves to the device (values in device code live there), a NumPy scalar
    stays (host metadata: a size, a dtype's limit)."""

    def __init__(self, xp):
        super().__init__(f"astjax.device[{getattr(xp, '__name__', 'xp')}]")
        self.__dict__["_xp"] = xp
        self.__dict__["_array_type"] = getattr(xp, "ndarray", None)

    def __getattr__(self, name):
        try:
            value = getattr(self._xp, name)
        except AttributeError:
            value = getattr(numpy, name)
        else:
            host = getattr(numpy, name, None)
            if name in _PRODUCTS and self._array_type is not None:
                value = _gemm_while_capturing(value, name)
            elif (callable(value) and callable(host) and name not in _CREATION
                    and not isinstance(value, type) and not isinstance(host, type)
                    and not isinstance(host, numpy.ufunc)
                    and not isinstance(value, types.ModuleType)
                    and self._array_type is not None):
                if name in _JOINS:
                    value = _join_in_chunks_while_capturing(value, name, self._xp)
                value = _host_when_no_device_operand(value, host, self._array_type,
                                                     self._xp.asarray)
        self.__dict__[name] = value
        return value


_JOINS = frozenset({"stack", "concatenate"})
_PRODUCTS = frozenset({"dot", "matmul"})


def _gemm_while_capturing(product, name):
    """``product`` (``xp.dot``/``xp.matmul``) that, inside a CUDA-graph capture,
    multiplies two matrices with the device's own GEMM call: CuPy refuses to call
    cuBLAS while a stream captures, though cuBLAS itself captures (a jitted MLP step
    would never replay).  Other operands, and calls outside a capture, are CuPy's."""
    def call(a, b, *rest, **kwargs):
        from astjax.kernels.cuda_graph import capture_matmul, capturing
        if capturing() and not rest and not kwargs:
            got = capture_matmul(a, b)
            if got is not None:
                return got
        return product(a, b, *rest, **kwargs)
    call.__name__ = name
    call.__wrapped__ = product
    return call


_JOIN_CHUNK = 8


def _join_in_chunks_while_capturing(join, name, xp):
    """``join`` (``xp.stack``/``xp.concatenate``) that, inside a CUDA-graph capture,
    joins at most 8 arrays per call.

    CuPy joins more than 8 small arrays by one kernel over a table of pointers that
    it copies from the host, and a capturing stream refuses host-to-device copies:
    a scan's stacked outputs would make every capture of a scan fail.  Up to 8
    arrays CuPy copies each into its slice of the result, which captures; chunks of
    8, then chunks of those, give the same array."""
    def call(arrays, axis=0, **kwargs):
        from astjax.kernels.cuda_graph import capturing
        if kwargs or not capturing() or not isinstance(axis, int) or \
                not isinstance(arrays, (list, tuple)) or len(arrays) <= _JOIN_CHUNK:
            return join(arrays, axis, **kwargs)
        parts = list(arrays)
        if name == "stack":
            parts = [xp.expand_dims(a, axis) for a in parts]
        while len(parts) > _JOIN_CHUNK:
            parts = [xp.concatenate(parts[i:i + _JOIN_CHUNK], axis)
                     for i in range(0, len(parts), _JOIN_CHUNK)]
        return xp.concatenate(parts, axis)
    call.__name__ = name
    call.__wrapped__ = join
    return call


def _holds(value, array_type, depth=0) -> bool:
    if isinstance(value, array_type):
        return True
    if depth < 2 and isinstance(value, (list, tuple)):
        return any(_holds(v, array_type, depth + 1) for v in value)
    return False


def _host_when_no_device_operand(device_fn, host_fn, array_type, to_device):
    """``device_fn`` when an argument holds a device array, else ``host_fn`` with an
    array result moved to the device."""
    def call(*args, **kwargs):
        for a in args:
            if _holds(a, array_type):
                return device_fn(*args, **kwargs)
        for a in kwargs.values():
            if _holds(a, array_type):
                return device_fn(*args, **kwargs)
        got = host_fn(*args, **kwargs)
        if type(got) is numpy.ndarray:
            return to_device(got)
        if type(got) is list and got and type(got[0]) is numpy.ndarray:  # np.split
            return [to_device(g) for g in got]
        return got
    call.__name__ = getattr(host_fn, "__name__", "call")
    call.__wrapped__ = device_fn
    return call


def register_array_module(array_type, xp):
    """Arguments of ``array_type`` run generated code with ``np`` bound to ``xp``."""
    with _lock:
        _MODULES[array_type] = xp


def _cupy_module(t):
    if t.__module__.split(".", 1)[0] != "cupy":
        return None
    import cupy
    register_array_module(cupy.ndarray, cupy)
    return _MODULES.get(t)


def _module_of(a):
    """The array module of the first array leaf of ``a`` (None: NumPy)."""
    t = type(a)
    if t in _PLAIN:
        return None
    xp = _MODULES.get(t)
    if xp is not None:
        return xp
    if isinstance(a, (list, tuple)):
        for x in a:
            if type(x) not in _PLAIN:
                got = _module_of(x)
                if got is not None:
                    return got
        return None
    if isinstance(a, dict):
        for x in a.values():
            if type(x) not in _PLAIN:
                got = _module_of(x)
                if got is not None:
                    return got
        return None
    return _cupy_module(t)


def array_module(*args):
    """The array module the arguments live on (``numpy`` for NumPy and Python values)."""
    for a in args:
        xp = _module_of(a)
        if xp is not None:
            return xp
    return numpy


def tree_module(tree):
    """The array module of the first device leaf of the pytree ``tree`` (else NumPy):
    what API-level helpers (Jacobian assembly, bases, stacking) build their arrays
    with, so device values are never assembled on the host."""
    xp = _module_of(tree)
    if xp is not None:
        return xp
    from astjax.tree_util import tree_leaves
    for leaf in tree_leaves(tree):
        if type(leaf) not in _PLAIN:
            xp = _module_of(leaf)
            if xp is not None:
                return xp
    return numpy


def is_device_array(a) -> bool:
    """``a`` is an array of a registered non-NumPy array module (a CuPy array)."""
    return type(a) not in _PLAIN and not isinstance(a, (list, tuple, dict)) and \
        _module_of(a) is not None


def shape_dtype(value):
    """``(shape, dtype)`` of an array leaf, read without converting it (``np.asarray``
    of a CuPy array raises: implicit conversion is refused)."""
    if is_device_array(value):
        return tuple(value.shape), numpy.dtype(value.dtype)
    arr = numpy.asarray(value)
    return arr.shape, arr.dtype


def asarray_like(xp, value):
    """``value`` as an array of ``xp`` (host values move; device values stay)."""
    if xp is numpy and is_device_array(value):
        return value
    return xp.asarray(value)


def host_call(fn, args, kwargs=None):
    """``(fn(*args, **kwargs), xp)`` with device arrays among the arguments copied to
    the host first, as JAX hands host callbacks (``debug.callback``,
    ``pure_callback``) NumPy arrays; ``xp``: the arguments' array module, to move the
    callback's results back with ``to_module``."""
    kwargs = kwargs or {}
    xp = tree_module((args, kwargs))
    if xp is not numpy:
        args, kwargs = device_get(tuple(args)), device_get(kwargs)
    return fn(*args, **kwargs), xp


def to_module(tree, xp):
    """The NumPy array leaves of ``tree`` as ``xp`` arrays (``xp`` NumPy: ``tree``)."""
    if xp is numpy:
        return tree
    from astjax.tree_util import tree_map
    return tree_map(lambda v: xp.asarray(v) if isinstance(v, (numpy.ndarray, numpy.generic))
                    else v, tree)


def on_host(f, x, dtype):
    """``f`` (a NumPy computation with no device form: a ``frompyfunc`` ufunc) of the
    array ``x`` as ``dtype``, computed on the host: a device ``x`` is copied there and
    the result back to its array module."""
    xp = tree_module(x)
    host = device_get(x) if xp is not numpy else x
    out = numpy.asarray(f(numpy.asarray(host, dtype))).astype(dtype)
    return out if xp is numpy else xp.asarray(out)


# ----------------------------------------------------------- runtime per module

_RUNTIMES: dict = {}         # id(xp) -> {module name: clone}


class _Package(types.ModuleType):
    """``astjax`` as the clones import it: the clones for the runtime modules."""

    def __init__(self, clones):
        super().__init__("astjax")
        self.__dict__["_clones"] = clones

    def __getattr__(self, name):
        clone = self._clones.get(f"astjax.{name}")
        if clone is not None:
            return clone
        return getattr(sys.modules["astjax"], name)


def runtime_for(xp) -> dict:
    """Module name -> that runtime module executed with ``numpy`` meaning ``xp``."""
    with _lock:
        got = _RUNTIMES.get(id(xp))
        if got is not None:
            return got[1]
        np_ = ArrayModule(xp)
        clones: dict = {}
        package = _Package(clones)
        real_import = builtins.__import__

        def _import(name, globals=None, locals=None, fromlist=(), level=0):
            if level == 0:
                if name == "numpy" and not fromlist:
                    return np_
                if name in clones:
                    return clones[name] if fromlist else package
                if name == "astjax" and fromlist:
                    return package
            return real_import(name, globals, locals, fromlist, level)

        bi = dict(vars(builtins))
        bi["__import__"] = _import
        for name in RUNTIME_MODULES:
            spec = importlib.util.find_spec(name)
            clones[name] = mod = types.ModuleType(name)
            mod.__dict__.update(__builtins__=bi, __file__=spec.origin, __spec__=None,
                                __package__="astjax")
        for name in RUNTIME_MODULES:
            mod = clones[name]
            spec = importlib.util.find_spec(name)
            with open(spec.origin) as f:
                code = compile(f.read(), spec.origin, "exec")
            exec(code, mod.__dict__)
            _share_types(mod, importlib.import_module(name))
        _RUNTIMES[id(xp)] = (xp, clones)
        return clones


def _share_types(clone, original):
    """Classes (and their instances: markers, sentinels) stay the original's, so
    ``isinstance`` means the same on both sides of the dispatch; an instance whose
    class says ``per_array_module`` (a cache of arrays) stays the clone's."""
    for key, value in list(vars(clone).items()):
        orig = getattr(original, key, None)
        if orig is None or getattr(value, "per_array_module", False):
            continue
        if isinstance(value, type) and value.__module__ == clone.__name__:
            setattr(clone, key, orig)
        elif type(value).__module__ == clone.__name__ and not callable(value):
            setattr(clone, key, orig)


def rebind(namespace: dict, xp) -> dict:
    """A copy of a generated namespace for ``xp``: ``np``, the runtime modules and
    functions taken from them replaced by ``xp``'s."""
    clones = runtime_for(xp)
    np_ = clones["astjax.runtime"].np
    by_module = {name: clones[name] for name in RUNTIME_MODULES}
    originals = {id(sys.modules[name]): clones[name] for name in RUNTIME_MODULES
                 if name in sys.modules}
    out = {}
    for key, value in namespace.items():
        if value is numpy:
            value = np_
        elif isinstance(value, types.ModuleType) and id(value) in originals:
            value = originals[id(value)]
        elif callable(value) and getattr(value, "__module__", None) in by_module:
            value = getattr(by_module[value.__module__],
                            getattr(value, "__name__", ""), value)
        out[key] = value
    for mod, alias in _ALIASES.items():
        out[alias] = clones[mod]
    out["np"] = np_
    return out


def dispatch_public(namespace: dict, names, module_name: str):
    """Make the functions ``names`` of a runtime module (its globals ``namespace``) run
    on their arguments' array module: called with a CuPy array, each runs the same
    function of the module's clone for CuPy (``runtime_for``), so a library entry
    point the user calls directly (``astjax.random.normal(key_on_gpu, ...)``) computes
    on the device.  NumPy arguments pay one type test per argument.  In the clones
    themselves (``np`` is not NumPy there) nothing is wrapped."""
    if namespace.get("np") is not numpy:
        return
    for name in names:
        f = namespace.get(name)
        if callable(f) and not hasattr(f, "__astjax_dispatch__"):
            namespace[name] = _public_dispatch(f, module_name)


def _public_dispatch(f, module_name):
    name = f.__name__

    @functools.wraps(f)
    def call(*args, **kwargs):
        for a in (*args, *kwargs.values()):
            if type(a) not in _PLAIN:
                xp = _module_of(a)
                if xp is not None:
                    return getattr(runtime_for(xp)[module_name], name)(*args, **kwargs)
        return f(*args, **kwargs)
    call.__astjax_dispatch__ = True
    return call


# ---------------------------------------------------------- generated functions

class _Bindings:
    """One generated text, loaded once per array module it is called on."""

    def __init__(self, source, namespace, label, origins):
        self.source, self.namespace, self.label, self.origins = (source, namespace,
                                                                 label, origins)
        self.loaded: dict = {}

    def functions(self, xp):
        got = self.loaded.get(id(xp))
        if got is None:
            with _lock:
                ns = rebind(self.namespace, xp)
                codegen.load_source(self.source, ns,
                                    f"{self.label} on {getattr(xp, '__name__', 'xp')}",
                                    self.origins)
                # compiled C kernels (jit's CPU backend) cannot read device memory:
                # their groups run as the block functions, loaded on ``xp`` here
                for key, value in list(ns.items()):
                    block = getattr(value, "block", None)
                    if type(value).__name__ == "KernelCall" and \
                            getattr(block, "__name__", None) in ns:
                        ns[key] = ns[block.__name__]
                got = self.loaded[id(xp)] = ns
        return got


def dispatching(loaded: dict, source, namespace, label, origins) -> dict:
    """``loaded`` (key -> generated function) with each function running on the array
    module of its arguments."""
    bindings = _Bindings(source, namespace, label, origins)
    return {key: _dispatcher(f, bindings) for key, f in loaded.items()}


def _dispatcher(f, bindings):
    return _Dispatch(f, bindings)


class _Dispatch:
    """A generated function that runs on its arguments' array module.  It carries
    the function's own ``__code__``, defaults and names, which callers read (binding
    keyword-only parameters, origins of lines): only the call differs."""

    def __init__(self, f, bindings):
        self.__wrapped__ = f
        self.__astjax_host__ = f
        # transformations reading this function (vmap of linearize's tangent...) inline
        # the generated function itself, as they do for transformed functions
        self._astjax_generated = lambda: f
        self._bindings = bindings
        for attr in ("__name__", "__qualname__", "__doc__", "__module__", "__code__",
                     "__defaults__", "__kwdefaults__", "__globals__", "__annotations__"):
            setattr(self, attr, getattr(f, attr))

    def __call__(self, *args, **kwargs):
        for a in args:
            if type(a) not in _PLAIN:
                xp = _module_of(a)
                if xp is not None:
                    args = [_moved(v, xp) for v in args]
                    kwargs = {k: _moved(v, xp) for k, v in kwargs.items()}
                    return self._bindings.functions(xp)[self.__name__](*args, **kwargs)
        return self.__wrapped__(*args, **kwargs)

    def __repr__(self):
        return repr(self.__wrapped__)


# ------------------------------------------------------------------ moving data

def _moved(value, xp):
    """NumPy arrays in ``value`` (a pytree of plain containers) as ``xp`` arrays: the
    code runs on one array module, so host arrays mixed with device arrays (basis
    tangents made by the API layer, constants) move to the device, as in JAX."""
    t = type(value)
    if t is numpy.ndarray:
        return xp.asarray(value)
    if t is list or t is tuple:
        return t(_moved(v, xp) for v in value)
    if t is dict:
        return {k: _moved(v, xp) for k, v in value.items()}
    return value


def _cupy():
    try:
        import cupy
    except ImportError:
        raise ImportError('the CUDA backend needs CuPy: pip install "astjax[cuda]" '
                          "(the cupy-cuda13x wheel)") from None
    register_array_module(cupy.ndarray, cupy)
    return cupy


def device_put(tree, device=None):
    """Every array leaf of ``tree`` on the GPU (CuPy arrays), as ``jax.device_put``;
    ``device``: a CuPy device id or ``cupy.cuda.Device``."""
    from astjax.tree_util import tree_map
    cupy = _cupy()

    def put(x):
        if isinstance(x, (numpy.ndarray, numpy.generic)) or type(x) is cupy.ndarray:
            return cupy.asarray(x)
        return x
    if device is None:
        return tree_map(put, tree)
    with cupy.cuda.Device(device if isinstance(device, int) else device.id):
        return tree_map(put, tree)


def device_get(tree):
    """Every device array leaf of ``tree`` as a NumPy array (others unchanged)."""
    from astjax.tree_util import tree_map

    def get(x):
        if type(x) in _PLAIN:
            return x
        if _module_of(x) is not None and hasattr(x, "get"):
            return x.get()
        return x
    return tree_map(get, tree)
