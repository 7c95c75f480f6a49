"""Shared helpers for the reverse-mode tests.

* ``check_grad`` compares ``astjax.grad`` with float64 central finite differences on
  pytrees of arrays and Python floats;
* ``numerical_grad`` is the finite-difference side alone;
* ``load_source_module`` writes Python text to a real file and imports it (astjax
  reads the source of the functions it transforms, so they must live in files);
* an autouse fixture clears astjax's cache of generated code around every test.

The user programs the tests transform live in ``tests/programs/`` (a package, imported
as ``programs`` because this directory is put on ``sys.path``).
"""
from __future__ import annotations

import importlib.util
import itertools
import os
import sys
from pathlib import Path

import numpy as np
import pytest

import astjax
from astjax import tree_util

try:   # CI: the same hypothesis examples on every run (no flaky red from a new draw)
    from hypothesis import settings as _hypothesis_settings
    _hypothesis_settings.register_profile("ci", derandomize=True, print_blob=True)
    import os as _os
    if _os.environ.get("CI"):
        _hypothesis_settings.load_profile("ci")
except ImportError:
    pass

# Open MPI's mpiexec refuses to start as root (containers, the GPU machines); MPICH's,
# the one the test extra installs, ignores these
for _name in ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"):
    os.environ.setdefault(_name, "1")

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))


@pytest.fixture(autouse=True)
def _clear_astjax_cache():
    astjax.clear_cache()
    yield
    astjax.clear_cache()


# --------------------------------------------------------------------- pytrees of leaves

def _is_float_leaf(x):
    if isinstance(x, bool):
        return False
    if isinstance(x, float):
        return True
    if isinstance(x, (np.ndarray, np.generic)):
        return np.issubdtype(x.dtype, np.floating)
    return False


def _perturbed(leaf, flat_index, delta):
    """A copy of ``leaf`` with ``delta`` added at ``flat_index`` (same type and dtype)."""
    if isinstance(leaf, float) and not isinstance(leaf, np.generic):
        return leaf + delta
    arr = np.array(leaf, dtype=np.float64, copy=True)
    arr.reshape(-1)[flat_index] += delta
    if isinstance(leaf, np.generic):
        return np.float64(arr)
    return arr


def numerical_grad(f, args, argnums=0, eps=1e-6):
    """Central finite differences of scalar ``f(*args)`` w.r.t. ``args[argnums]``.

    Works leaf by leaf on any pytree (lists, tuples, dicts, namedtuples, registered
    dataclasses, None leaves). Computations run in float64 (float32 leaves are
    promoted for the difference quotient). Returns a pytree shaped like the argument
    (a tuple of them when ``argnums`` is a tuple); float leaves become float64 arrays
    of the leaf's shape.
    """
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    args = list(args)
    results = []
    for k in nums:
        leaves, treedef = tree_util.tree_flatten(args[k])
        grads = []
        for li, leaf in enumerate(leaves):
            if not _is_float_leaf(leaf):
                grads.append(None)
                continue
            size = int(np.size(leaf))
            g = np.zeros(size, dtype=np.float64)
            for j in range(size):
                vals = []
                for sign in (1.0, -1.0):
                    new = list(leaves)
                    new[li] = _perturbed(leaf, j, sign * eps)
                    a = list(args)
                    a[k] = tree_util.tree_unflatten(treedef, new)
                    vals.append(float(f(*a)))
                g[j] = (vals[0] - vals[1]) / (2 * eps)
            grads.append(g.reshape(np.shape(leaf)))
        results.append(tree_util.tree_unflatten(treedef, grads))
    return results[0] if single else tuple(results)


def assert_tree_close(actual, expected, rtol=1e-5, atol=1e-7, check_structure=True,
                      what="gradient"):
    """Leaves of ``actual`` match ``expected`` (a finite-difference tree) in value and shape."""
    a_leaves, a_def = tree_util.tree_flatten(actual)
    e_leaves, e_def = tree_util.tree_flatten(expected)
    if check_structure:
        assert a_def == e_def, f"{what} has structure {a_def}, expected {e_def}"
    assert len(a_leaves) == len(e_leaves), (a_def, e_def)
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        if e is None:
            continue
        assert a is not None, f"{what} leaf {i} is None"
        assert np.shape(a) == np.shape(e), (
            f"{what} leaf {i} has shape {np.shape(a)}, expected {np.shape(e)}")
        np.testing.assert_allclose(np.asarray(a, dtype=np.float64), e, rtol=rtol, atol=atol,
                                   err_msg=f"{what} leaf {i}")


def check_grad(f, args, argnums=0, eps=1e-6, rtol=1e-5, atol=1e-7):
    """``astjax.grad(f, argnums)(*args)`` against central finite differences.

    Checks tree structure, leaf shapes, floating dtypes (float64 stays float64) and
    values; returns the astjax gradient.
    """
    g = astjax.grad(f, argnums=argnums)(*args)
    expected = numerical_grad(f, args, argnums, eps)
    single = isinstance(argnums, int)
    if not single:
        assert isinstance(g, tuple) and len(g) == len(argnums), (
            f"grad with argnums={argnums} must return a tuple of {len(argnums)}, got {g!r}")
    nums = (argnums,) if single else tuple(argnums)
    gs = (g,) if single else g
    es = (expected,) if single else expected
    for k, gk, ek in zip(nums, gs, es):
        assert_tree_close(gk, ek, rtol=rtol, atol=atol, what=f"gradient of argument {k}")
        for leaf, prim in zip(tree_util.tree_leaves(gk), tree_util.tree_leaves(args[k])):
            if isinstance(prim, np.ndarray) and prim.dtype == np.float64:
                assert np.asarray(leaf).dtype == np.float64, (
                    f"gradient of a float64 array has dtype {np.asarray(leaf).dtype}")
    return g


def fd_vector_grad(f, x, h=1e-6):
    """Central differences of scalar ``f`` at the 1-D float64 ``x``."""
    return np.array([(f(x + e) - f(x - e)) / (2 * h) for e in np.eye(x.size) * h])


def check_derivatives(f, x, batch=(), rtol=1e-6, atol=1e-8, hessian=True):
    """Every way to take the derivative of scalar ``f`` at the vector ``x`` against
    central finite differences: grad, jit(grad), jvp along each axis, vmap(grad) over
    the rows of ``batch`` (and vmap of ``f`` against a loop), hessian (differences of
    differences, looser)."""
    want = fd_vector_grad(f, x)
    np.testing.assert_allclose(astjax.grad(f)(x), want, rtol=rtol, atol=atol)
    np.testing.assert_allclose(astjax.jit(astjax.grad(f))(x), want, rtol=rtol, atol=atol)
    np.testing.assert_allclose([astjax.jvp(f, (x,), (e,))[1] for e in np.eye(x.size)], want,
                               rtol=rtol, atol=atol)
    if len(batch):
        xs = np.asarray(batch)
        np.testing.assert_allclose(astjax.vmap(f)(xs), [f(b) for b in xs], rtol=1e-10)
        np.testing.assert_allclose(astjax.vmap(astjax.grad(f))(xs),
                                   [fd_vector_grad(f, b) for b in xs], rtol=rtol, atol=atol)
    if hessian:
        want2 = np.array([(fd_vector_grad(f, x + e) - fd_vector_grad(f, x - e)) / 2e-4
                          for e in np.eye(x.size) * 1e-4])
        np.testing.assert_allclose(astjax.hessian(f)(x), want2, rtol=1e-4, atol=1e-4)


def load_source_module(source: str, directory: Path, name: str | None = None):
    """Write ``source`` to ``directory/name.py`` and import it as a fresh module."""
    name = name or f"astjax_generated_{next(_counter)}"
    path = Path(directory) / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_counter = itertools.count()


@pytest.fixture
def rng():
    return np.random.default_rng(0)
