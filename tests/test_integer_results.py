"""Integer and boolean values have a zero derivative.

A float cast to an integer dtype, a reduction accumulated in integers, a float
written into an integer array (NumPy truncates it) are piecewise constant in what
they were computed from; JAX gives them float0 tangents.  Reverse mode used to treat
``(x * 10).astype(int)`` as the identity (the gradient of ``sum(k * x)`` came out as
``k + 10 x`` instead of ``k``), and both modes let a write into an integer array or
``np.sum(..., dtype=int)`` carry a derivative.

Where the dtype is a constant the activity analysis stops the derivative
(``transforms/activity.py``); where it is known only at run time (a dtype in a
variable, the array written into) the transformations stop it there
(``activity.may_give_integers``).  The sweep covers every NumPy primitive of the
registry with a ``dtype`` parameter, with the dtype written as a constant and passed
at run time, under grad, jvp, jacrev, jit(grad) and vmap(grad); the programs check
writes into integer arrays and uses of integer values through other rules.
"""
import numpy as np
import pytest

import astjax
from astjax import primitives as P
from conftest import fd_vector_grad, load_source_module

X = np.array([0.87, 0.73, 0.39])


def _call(name, dtype_expr):
    """(source of a call of the primitive on ``x * 7.0`` with ``dtype_expr``, the globals
    it reads, x) from the registry sample; None when the sample has no array operand."""
    prim = P.REGISTRY[name]
    args, kwargs = prim.sample(np.random.default_rng(0))
    args, kwargs = list(args), dict(kwargs)
    first = prim.params.index(prim.diff[0])
    if first >= len(args):
        return None
    operand = args[first]
    if isinstance(operand, list) and operand and isinstance(operand[0], np.ndarray):
        x, expr, rest = operand[0], "[x * 7.0] + REST", operand[1:]
    elif isinstance(operand, np.ndarray):
        x, expr, rest = operand, "x * 7.0", []
    else:
        return None
    names = {"REST": rest, "KW": {k: v for k, v in kwargs.items() if k != "dtype"}}
    parts = []
    for i, a in enumerate(args):
        if i == first:
            parts.append(expr)
        elif prim.params[i] == "dtype":
            parts.append(dtype_expr)
        else:
            names[f"A{i}"] = a
            parts.append(f"A{i}")
    if "dtype" not in prim.params[:len(args)]:
        parts.append(f"dtype={dtype_expr}")
    return f"IMPL({', '.join(parts)}, **KW)", dict(names, IMPL=prim.impl), \
        np.asarray(x, dtype=np.float64)


def _dtype_cases():
    cases = []
    for name, prim in sorted(P.REGISTRY.items()):
        if "dtype" not in prim.params or not prim.diff or prim.sample is None or \
                not prim.code.startswith(("np.", "ra.")):
            continue
        call = _call(name, "np.int64")
        if call is None:
            continue
        source, names, x = call
        try:
            out = eval(source, dict(names, np=np, x=x))  # noqa: S307
        except (TypeError, ValueError):
            continue      # no integer version (np.linspace of floats, ...)
        if np.asarray(out).dtype.kind in "iub":
            cases.append(name)
    return cases


CASES = _dtype_cases()


def test_the_sweep_covers_the_dtype_parameters():
    assert {"astype", "sum", "cumsum", "array", "full_like", "mean", "prod",
            "trace"} <= set(CASES), CASES


def _module(name, tmp_path, runtime_dtype):
    call, names, x = _call(name, "dt" if runtime_dtype else "np.int64")
    source = ("import numpy as np\n"
              "def f(x, dt):\n"
              f"    k = {call}\n"
              "    return np.sum(k * 1.5) + np.sum(x * x)\n")
    module = load_source_module(source, tmp_path)
    for key, value in names.items():
        setattr(module, key, value)
    return module, x


@pytest.mark.parametrize("runtime_dtype", [False, True], ids=["constant", "run-time"])
@pytest.mark.parametrize("name", CASES)
def test_integer_dtype_stops_the_derivative(name, runtime_dtype, tmp_path):
    module, x = _module(name, tmp_path, runtime_dtype)
    want = 2 * x       # only sum(x * x) has a derivative
    dt = np.int64
    np.testing.assert_allclose(astjax.grad(module.f)(x, dt), want, rtol=1e-12)
    np.testing.assert_allclose(astjax.jit(astjax.grad(module.f))(x, dt), want, rtol=1e-12)
    _, tangent = astjax.jvp(lambda a: module.f(a, dt), (x,), (np.ones_like(x),))
    np.testing.assert_allclose(tangent, np.sum(want), rtol=1e-12)
    np.testing.assert_allclose(astjax.jacrev(module.f)(x, dt), want, rtol=1e-12)
    xs = np.stack([x, 0.5 * x])
    np.testing.assert_allclose(astjax.vmap(astjax.grad(module.f), in_axes=(0, None))(xs, dt),
                               2 * xs, rtol=1e-12)


# ------------------------------------------------------------------ programs

def cast_then_scale(x):
    k = (x * 10).astype(int)
    return np.sum(k * x)


def cast_then_rule(x):
    return np.sum(np.tanh((x * 10).astype(np.int32)) * x + np.sqrt(x.astype(bool) * x))


def write_into_integers(x):
    y = np.arange(3)
    y[1] = x[1] * 7
    return np.sum(y * x)


def fill_integer_array(x):
    y = np.zeros(3, dtype=int)
    y[:] = x * 10
    return np.sum(y * x) + np.sum(y)


def add_at_integers(x):
    y = np.zeros(3, dtype=np.int64)
    np.add.at(y, [0, 0, 1], x * 10)
    return np.sum(y * x)


def integer_reduction(x):
    return np.sum(x * 10, dtype=int) * x[0] + np.prod(x + 1.0, dtype=np.int32) * x[2]


def full_integers(x):
    return np.sum(np.full(3, x[0] * 10, dtype=int) * x)


def float32_write(x):
    y = np.zeros(3, dtype=np.float32)     # a float target keeps the derivative
    y[0] = x[0] * 3.0
    return np.sum(y * x)


def rounded_into_norm(x):
    # piecewise constant too: no rule runs after np.rint, so the 2-norm of its zeros
    # gets a zero tangent (as JAX's symbolic zeros), not 0 / 0
    return np.linalg.norm(np.rint(x * 0.1)) + np.linalg.norm(np.floor(x) + 1.0) * np.sum(x)


PROGRAMS = [cast_then_scale, cast_then_rule, write_into_integers, fill_integer_array,
            add_at_integers, integer_reduction, full_integers, float32_write,
            rounded_into_norm]


@pytest.mark.parametrize("f", PROGRAMS, ids=[f.__name__ for f in PROGRAMS])
def test_programs_against_finite_differences(f):
    single = f is float32_write     # (differences of float32 roundings: a wider step)
    want = fd_vector_grad(f, X, h=1e-3 if single else 1e-6)
    rtol = 1e-3 if single else 1e-6
    np.testing.assert_allclose(astjax.grad(f)(X), want, rtol=rtol, atol=1e-6)
    np.testing.assert_allclose(astjax.jit(astjax.grad(f))(X), want, rtol=rtol, atol=1e-6)
    for e in np.eye(3):
        _, tangent = astjax.jvp(f, (X,), (e,))
        np.testing.assert_allclose(tangent, want @ e, rtol=rtol, atol=1e-6)
    np.testing.assert_allclose(astjax.jacfwd(f)(X), want, rtol=rtol, atol=1e-6)
    hvp = astjax.jvp(astjax.grad(f), (X,), (np.ones(3),))[1]
    assert np.all(np.isfinite(hvp)), hvp
    xs = np.stack([X, X * 0.9])
    np.testing.assert_allclose(astjax.vmap(astjax.grad(f))(xs),
                               [fd_vector_grad(f, r, h=1e-3 if single else 1e-6) for r in xs],
                               rtol=rtol, atol=1e-6)
