"""Arguments are bound like Python binds them, in every transformation (issue 10).

Defaults, keyword arguments, keyword-only parameters (with and without defaults) and
functions given as defaults, under grad, value_and_grad, vjp, jvp, linearize, jacfwd,
jacrev, jacobian, hessian, vmap (keyword arguments batched on axis 0, as in JAX), jit
and the standalone modules ``astjax gen`` writes; a bad call is an ``ArgumentError``
(a ``TypeError``) about the user's function.  Oracles: the function itself called the
same way (values), float64 central finite differences (derivatives), a Python loop
(vmap).
"""
from __future__ import annotations

import functools
import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

import astjax
from astjax.errors import ArgumentError
from programs import binding as pbind

EPS = 1e-6
RNG = np.random.default_rng(0)
X = RNG.standard_normal(3)
W = RNG.standard_normal((3, 2))

# (function, positional args, keyword args): every way of calling that Python accepts
CALLS = [
    (pbind.scaled, (X,), {}),
    (pbind.scaled, (X, 1.5), {}),
    (pbind.scaled, (X,), {"scale": 0.5}),
    (pbind.scaled, (X,), {"y": 1.5, "scale": 0.5}),
    (pbind.scaled, (), {"x": X, "scale": 0.5}),
    (pbind.needs_keyword, (X,), {"k": 1.7}),
    (pbind.vector_out, (X,), {}),
    (pbind.vector_out, (X, 0.25), {"power": 3.0}),
    (pbind.affine, (X, W), {}),
    (pbind.affine, (X, W), {"b": np.ones(2)}),
    (pbind.affine, (X, W), {"act": np.sin}),
    (pbind.affine, (X,), {"w": W, "b": np.ones(2), "act": np.cos}),
    (functools.partial(pbind.scaled, scale=0.25), (X,), {}),
    (functools.partial(pbind.affine, act=np.sin), (X, W), {"b": np.ones(2)}),
]
IDS = [f"{getattr(getattr(f, 'func', f), '__name__')}{'-partial' if hasattr(f, 'func') else ''}"
       f"-{len(a)}pos-{'-'.join(k) or 'nokw'}" for f, a, k in CALLS]
SCALAR = [c for c in CALLS if np.ndim(c[0](*c[1], **c[2])) == 0]
SCALAR_IDS = [i for i, c in zip(IDS, CALLS) if np.ndim(c[0](*c[1], **c[2])) == 0]


def _x_of(args, kwargs):
    return args[0] if args else kwargs["x"]


def _with_x(args, kwargs, x):
    """The same call with ``x`` (the first parameter) replaced."""
    if args:
        return (x,) + tuple(args[1:]), kwargs
    return args, {**kwargs, "x": x}


def _fd_jac(fun, args, kwargs):
    """d fun / d x by central differences: out.shape + x.shape."""
    x = _x_of(args, kwargs)
    cols = []
    for j in range(x.size):
        e = np.zeros_like(x)
        e.flat[j] = EPS
        a1, k1 = _with_x(args, kwargs, x + e)
        a2, k2 = _with_x(args, kwargs, x - e)
        cols.append((np.asarray(fun(*a1, **k1)) - np.asarray(fun(*a2, **k2))) / (2 * EPS))
    return np.moveaxis(np.array(cols), 0, -1).reshape(np.shape(fun(*args, **kwargs)) + x.shape)


@pytest.mark.parametrize("fun,args,kwargs", SCALAR, ids=SCALAR_IDS)
def test_reverse_mode_binds_like_python(fun, args, kwargs):
    want = _fd_jac(fun, args, kwargs)
    np.testing.assert_allclose(astjax.grad(fun)(*args, **kwargs), want, rtol=1e-6)
    value, g = astjax.value_and_grad(fun)(*args, **kwargs)
    np.testing.assert_allclose(value, fun(*args, **kwargs), rtol=1e-13)
    np.testing.assert_allclose(g, want, rtol=1e-6)
    np.testing.assert_allclose(astjax.jit(astjax.grad(fun))(*args, **kwargs), want, rtol=1e-6)
    hess = astjax.hessian(fun)(*args, **kwargs)
    want_h = _fd_jac(lambda *a, **k: astjax.grad(fun)(*a, **k), args, kwargs)
    np.testing.assert_allclose(hess, want_h, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("fun,args,kwargs", CALLS, ids=IDS)
def test_jacobians_bind_like_python(fun, args, kwargs):
    want = _fd_jac(fun, args, kwargs)
    for jac in (astjax.jacfwd, astjax.jacrev, astjax.jacobian):
        got = jac(fun)(*args, **kwargs)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9, err_msg=jac.__name__)


@pytest.mark.parametrize("fun,args,kwargs", [c for c in CALLS if not c[2]],
                         ids=[i for i, c in zip(IDS, CALLS) if not c[2]])
def test_primal_only_transformations_fill_defaults(fun, args, kwargs):
    """vjp, jvp and linearize take primals positionally (as in JAX): the parameters not
    given keep their defaults, and vjp returns one cotangent per primal given."""
    out = fun(*args)
    ct = np.ones_like(np.asarray(out))
    value, vjp_fn = astjax.vjp(fun, *args)
    np.testing.assert_allclose(value, out, rtol=1e-13)
    cts = vjp_fn(ct if np.ndim(out) else 1.0)
    assert len(cts) == len(args)
    jac = _fd_jac(fun, args, {})
    np.testing.assert_allclose(cts[0], np.tensordot(ct, jac, np.ndim(out)), rtol=1e-6,
                               atol=1e-9)
    v = np.random.default_rng(1).standard_normal(args[0].shape)
    tangents = (v,) + tuple(np.zeros_like(a) for a in args[1:])
    value, t = astjax.jvp(fun, args, tangents)
    np.testing.assert_allclose(value, out, rtol=1e-13)
    np.testing.assert_allclose(t, jac @ v, rtol=1e-6, atol=1e-9)
    value, f_jvp = astjax.linearize(fun, *args)
    np.testing.assert_allclose(value, out, rtol=1e-13)
    np.testing.assert_allclose(f_jvp(*tangents), jac @ v, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("fun,args,kwargs", CALLS, ids=IDS)
def test_jit_binds_like_python(fun, args, kwargs):
    np.testing.assert_allclose(astjax.jit(fun)(*args, **kwargs), fun(*args, **kwargs),
                               rtol=1e-13)


# ------------------------------------------------------------------------------ vmap

def test_vmap_batches_keyword_arguments_on_axis_0():
    xs = RNG.standard_normal((4, 3))
    scales = RNG.standard_normal(4)
    got = astjax.vmap(pbind.scaled)(xs, scale=scales)
    want = np.array([pbind.scaled(x, scale=s) for x, s in zip(xs, scales)])
    np.testing.assert_allclose(got, want, rtol=1e-13)
    # an unbatched keyword argument is an error, as in JAX (axis 0 of a scalar)
    with pytest.raises(ArgumentError):
        astjax.vmap(pbind.scaled)(xs, scale=2.0)
    # defaults are not batched; in_axes covers the positional arguments only
    got = astjax.vmap(pbind.scaled, in_axes=(0, None))(xs, 1.5)
    np.testing.assert_allclose(got, [pbind.scaled(x, 1.5) for x in xs], rtol=1e-13)
    got = astjax.vmap(pbind.scaled, in_axes=(1,))(xs.T, y=np.arange(4.0))
    np.testing.assert_allclose(got, [pbind.scaled(x, y=k) for k, x in enumerate(xs)],
                               rtol=1e-13)
    ws = RNG.standard_normal((4, 3, 2))
    got = astjax.vmap(pbind.affine, in_axes=(None, 0))(X, ws, b=np.ones((4, 2)),
                                                        act=np.sin)
    np.testing.assert_allclose(got, [pbind.affine(X, w, b=np.ones(2), act=np.sin)
                                     for w in ws], rtol=1e-13)


def test_vmap_of_grad_and_vmap_of_vmap_with_keywords():
    xs = RNG.standard_normal((4, 3))
    ks = RNG.standard_normal(4)
    got = astjax.vmap(astjax.grad(pbind.needs_keyword))(xs, k=ks)
    np.testing.assert_allclose(got, [-np.sin(x) * k for x, k in zip(xs, ks)], rtol=1e-13)
    xss = RNG.standard_normal((2, 4, 3))
    kss = RNG.standard_normal((2, 4))
    got = astjax.vmap(astjax.vmap(pbind.needs_keyword))(xss, k=kss)
    want = [[pbind.needs_keyword(x, k=k) for x, k in zip(xr, kr)] for xr, kr in zip(xss, kss)]
    np.testing.assert_allclose(got, want, rtol=1e-13)
    g = astjax.grad(lambda xs: np.sum(astjax.vmap(pbind.scaled)(xs)))(xs)
    np.testing.assert_allclose(g, 6.0 * np.cos(xs), rtol=1e-13)


def test_pytree_parameters_with_keyword_only_options():
    params = (RNG.standard_normal((3, 2)), RNG.standard_normal(2))
    xb = RNG.standard_normal((5, 3))
    g = astjax.grad(pbind.with_params)(params, xb, l2=0.1)
    eps = 1e-6
    for leaf in range(2):
        p = params[leaf]
        for idx in np.ndindex(p.shape):
            plus = [q.copy() for q in params]
            minus = [q.copy() for q in params]
            plus[leaf][idx] += eps
            minus[leaf][idx] -= eps
            fd = (pbind.with_params(tuple(plus), xb, l2=0.1) -
                  pbind.with_params(tuple(minus), xb, l2=0.1)) / (2 * eps)
            np.testing.assert_allclose(g[leaf][idx], fd, rtol=1e-6)
    per_example = astjax.vmap(astjax.grad(pbind.with_params), in_axes=(None, 0))
    per = per_example(params, xb, l2=np.full(5, 0.1))
    for i in range(5):
        one = astjax.grad(pbind.with_params)(params, xb[i:i + 1][0], l2=0.1)
        np.testing.assert_allclose(per[0][i], one[0], rtol=1e-12)


# ------------------------------------------------------------------------- bad calls

TRANSFORMS = {
    "grad": lambda f: astjax.grad(f),
    "value_and_grad": lambda f: astjax.value_and_grad(f),
    "jacfwd": lambda f: astjax.jacfwd(f),
    "jacrev": lambda f: astjax.jacrev(f),
    "jacobian": lambda f: astjax.jacobian(f),
    "hessian": lambda f: astjax.hessian(f),
    "vmap": lambda f: astjax.vmap(f),
    "vjp": lambda f: (lambda *a, **k: astjax.vjp(f, *a, **k)),
    "jvp": lambda f: (lambda *a: astjax.jvp(f, a, a)),
    "linearize": lambda f: (lambda *a: astjax.linearize(f, *a)),
}
BAD = {
    "missing": ((), {}, "missing a required argument: 'x'"),
    "too many": ((X, 1.0, 2.0), {}, "too many positional arguments"),
    "unexpected": ((X,), {"z": 1.0}, "unexpected keyword argument 'z'"),
    "twice": ((X,), {"x": X}, "multiple values for argument 'x'"),
    # (Python 3.12 says "a required keyword-only argument", 3.11 "a required argument")
    "keyword-only missing": ((X,), {}, "missing a required"),
}


# vjp, jvp and linearize take primals positionally: no keyword cases for them
BAD_CALLS = [(name, bad) for name in sorted(TRANSFORMS) for bad in sorted(BAD)
             if not (name in ("jvp", "linearize", "vjp") and (BAD[bad][1] or bad == "missing"))]


@pytest.mark.parametrize("name,bad", BAD_CALLS)
def test_a_bad_call_names_the_users_function(name, bad):
    args, kwargs, message = BAD[bad]
    fun = pbind.needs_keyword if bad == "keyword-only missing" else pbind.scaled
    call = TRANSFORMS[name](fun)
    with pytest.raises(ArgumentError) as info:
        call(*args, **kwargs)
    text = str(info.value)
    assert isinstance(info.value, TypeError)
    assert f"{fun.__name__}()" in text and message in text, text
    assert "vmap_" not in text and "grad_" not in text and "jvp_" not in text


def test_vjp_keyword_arguments_are_refused_like_jax():
    with pytest.raises(TypeError):
        astjax.vjp(pbind.scaled, X, scale=2.0)


# ------------------------------------------------------------- standalone modules

def _gen(tmp_path, spec, target):
    out = tmp_path / "gen_mod.py"
    src = tmp_path / "user_mod.py"
    src.write_text(open(pbind.__file__).read())
    path = os.pathsep.join(p for p in (_root(), os.environ.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, "-m", "astjax", "gen", f"{src}:{target}", "-t",
                           spec, "-o", str(out)], capture_output=True, text=True,
                          cwd=str(tmp_path.parent), env={**os.environ, "PYTHONPATH": path})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    spec_ = importlib.util.spec_from_file_location(f"gen_mod_{abs(hash(spec))}", out)
    mod = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(mod)
    return getattr(mod, mod.__all__[0])


def _root():
    return os.path.dirname(os.path.dirname(astjax.__file__))


def test_generated_modules_bind_like_python(tmp_path):
    g = _gen(tmp_path, "grad()", "scaled")
    for args, kwargs in [((X,), {}), ((X, 1.5), {}), ((X,), {"scale": 0.5})]:
        np.testing.assert_allclose(g(*args, **kwargs),
                                   _fd_jac(pbind.scaled, args, kwargs), rtol=1e-6)
    with pytest.raises(TypeError):
        g(X, z=1.0)
    v = _gen(tmp_path, "vmap()", "scaled")
    xs = RNG.standard_normal((4, 3))
    np.testing.assert_allclose(v(xs), [pbind.scaled(x) for x in xs], rtol=1e-13)
    with pytest.raises(TypeError, match=r"scaled\(\) got an unexpected keyword"):
        v(xs, z=1.0)
    with pytest.raises(TypeError, match="generated for it unbatched"):
        v(xs, scale=np.arange(4.0))       # batched, but the module was made without it
    vg = _gen(tmp_path, "vmap(grad(), in_axes=(0, None))", "scaled")
    np.testing.assert_allclose(vg(xs, 1.5), [astjax.grad(pbind.scaled)(x, 1.5) for x in xs],
                               rtol=1e-13)
    with pytest.raises(TypeError, match="in_axes has 2 entries"):
        vg(xs)
    with pytest.raises(TypeError, match=r"scaled\(\) missing required argument: 'x'"):
        v()


# ------------------------------------------ transformations called inside transformed code

@pytest.mark.parametrize("name", ["jvp_inside", "grad_inside", "vmap_inside",
                                  "vmap_inside_with_axes"])
def test_transformations_inside_transformed_code_fill_defaults(name):
    f = getattr(pbind, name)
    x = RNG.standard_normal((4, 3)) if "vmap" in name else X
    args = (x.T.copy(), 0.7) if name == "vmap_inside_with_axes" else (x,)
    want = _fd_jac(f, args, {})
    np.testing.assert_allclose(astjax.grad(f)(*args), want, rtol=1e-6, atol=1e-9)
    _, t = astjax.jvp(f, args, (np.ones_like(args[0]),) + tuple(0.0 * np.asarray(a)
                                                               for a in args[1:]))
    np.testing.assert_allclose(t, np.sum(want), rtol=1e-6)


# ndarray subclasses that change what operators mean (np.matrix's * is a matrix
# product, a masked array's sum skips masked entries) used to get derivatives of the
# ndarray function instead: refused by every transformation; np.memmap is plain.

def _cube_sum(x):
    return np.sum(x * x * x) + np.sum(np.sin(x))


def _pair_sum(p):
    return np.sum(p[0] * p[1])


_SUBCLASS_CALLS = {
    "grad": lambda f, x: astjax.grad(f)(x),
    "value_and_grad": lambda f, x: astjax.value_and_grad(f)(x),
    "jit": lambda f, x: astjax.jit(f)(x),
    "jit_numpy": lambda f, x: astjax.jit(f, backend="numpy")(x),
    "vmap": lambda f, x: astjax.vmap(f)(x),
    "jvp": lambda f, x: astjax.jvp(f, (x,), (x,)),
    "vjp": lambda f, x: astjax.vjp(f, x),
    "linearize": lambda f, x: astjax.linearize(f, x),
    "jacfwd": lambda f, x: astjax.jacfwd(f)(x),
    "jacrev": lambda f, x: astjax.jacrev(f)(x),
    "hessian": lambda f, x: astjax.hessian(f)(x),
}


@pytest.mark.parametrize("how", sorted(_SUBCLASS_CALLS))
@pytest.mark.parametrize("kind", ["matrix", "masked", "matrix_in_tuple"])
def test_array_subclasses_with_their_own_operators_are_refused(kind, how):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        m = np.matrix([[0.4, -0.9], [1.3, 0.7]])
    f, x = _cube_sum, m
    if kind == "masked":
        x = np.ma.masked_array([[0.4, -0.9], [1.3, 0.7]], mask=[[0, 1], [0, 0]])
    elif kind == "matrix_in_tuple":
        f, x = _pair_sum, (np.ones((2, 2)), m)
    with pytest.raises(ArgumentError, match="ndarray subclass"):
        _SUBCLASS_CALLS[how](f, x)


class _Tagged(np.ndarray):
    """A subclass that only tags its arrays: NumPy computes the same function."""


def test_a_memmap_and_a_tagging_subclass_are_plain_arrays(tmp_path):
    x = np.memmap(tmp_path / "x.dat", dtype=np.float64, mode="w+", shape=(3,))
    x[:] = [0.4, -0.9, 1.3]
    for v in (x, np.array([0.4, -0.9, 1.3]).view(_Tagged)):
        np.testing.assert_allclose(astjax.grad(_cube_sum)(v), 3 * v ** 2 + np.cos(v))
        np.testing.assert_allclose(astjax.jit(_cube_sum)(v), _cube_sum(np.asarray(v)))
