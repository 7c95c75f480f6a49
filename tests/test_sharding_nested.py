"""Maps nested in a named vmap, and named vmaps nested in maps (issue 14).

JAX lets a ``shard_map`` (or a ``pmap``, or another named vmap) run inside
``vmap(..., axis_name="b")``, and a named vmap inside any of them; the collectives
inside may name the vmap axis, the mesh axis, or a tuple of both.  Every such
nesting over axes ``b`` (outside, 2) and ``x`` (inside, 2) is one function of the
(2, 8) array ``A``, the same as one shard_map over the 2-d mesh ("b", "x") whose
device (b, x) gets the block ``A[b, 4x:4x+4]``: that is the reference (the 2-d mesh
itself is checked against NumPy in test_sharding_matrix.py), and derivatives are
checked against its central differences.  A shard_map or pmap inside a shard_map or
pmap is refused, as in JAX.
"""
from __future__ import annotations

import numpy as np
import pytest

import astjax
from conftest import numerical_grad
from astjax import lax
from astjax.sharding import P
from astjax.sharding.errors import ShardingError

RNG = np.random.default_rng(1414)
A = RNG.standard_normal((2, 8))
T = RNG.standard_normal(A.shape)
W = RNG.standard_normal(A.shape)
C4 = np.array([1.0, -2.0, 0.5, 3.0])
SIZES = {"b": 2, "x": 2}
AXES = ["b", "x", ("b", "x"), ("x", "b")]


@pytest.fixture(autouse=True)
def _devices(monkeypatch):
    monkeypatch.setenv("ASTJAX_NUM_CPU_DEVICES", "4")


def group(ax):
    return int(np.prod([SIZES[a] for a in ((ax,) if isinstance(ax, str) else ax)]))


def ring(ax):
    g = group(ax)
    return [(k, (k + 1) % g) for k in range(g)]


# per-device functions of a (4,) block using one collective over ``ax``
CASES = {
    "psum": lambda v, ax: np.sin(lax.psum(np.sin(v), ax)) * v,
    "pmean": lambda v, ax: lax.pmean(v ** 2, ax) * v,
    "pmax": lambda v, ax: lax.pmax(np.sin(v), ax) * v,
    "pmin": lambda v, ax: lax.pmin(np.cos(v), ax) * v,
    "all_gather": lambda v, ax: np.sum(lax.all_gather(np.sin(v), ax)
                                       * C4[:group(ax), None], axis=0) * v,
    "all_gather_tiled": lambda v, ax: np.sum(
        lax.all_gather(np.sin(v), ax, tiled=True).reshape(group(ax), 4)
        * C4[:group(ax), None], axis=0) * v,
    "psum_scatter": lambda v, ax: np.repeat(lax.psum_scatter(
        np.sin(v)[:group(ax)] * v[0], ax), 4) * v,
    "psum_scatter_tiled": lambda v, ax: lax.psum_scatter(
        np.concatenate([np.sin(v) * c for c in C4[:group(ax)]]), ax, tiled=True) * v,
    "ppermute": lambda v, ax: lax.ppermute(np.sin(v), ax, ring(ax)) * v,
    "all_to_all": lambda v, ax: lax.all_to_all(
        np.sin(v).reshape(group(ax), 4 // group(ax)), ax, 0, 0).ravel() * v,
    "all_to_all_tiled": lambda v, ax: lax.all_to_all(np.sin(v), ax, 0, 0, tiled=True) * v,
    "axis_index": lambda v, ax: np.sin(v) * (1.0 + lax.axis_index(ax)),
}
NAMES = list(CASES)


def fun(name, ax):
    f = CASES[name]

    def per_device(v):
        return f(v, ax)
    return per_device


def reference(name, ax):
    """The 2-d mesh: device (b, x) runs the per-device function on A[b, 4x:4x+4]."""
    f = fun(name, ax)
    return astjax.shard_map(lambda blk: f(blk[0])[None],
                            mesh=astjax.make_mesh((2, 2), ("b", "x")),
                            in_specs=P("b", "x"), out_specs=P("b", "x"), check_vma=False)


def nestings(name, ax, check_vma=False):
    """Every nesting of a map over ``x`` in a named vmap over ``b`` (and back)."""
    f = fun(name, ax)
    x_mesh = astjax.make_mesh((2,), ("x",))
    b_mesh = astjax.make_mesh((2,), ("b",))
    sm = astjax.shard_map(f, mesh=x_mesh, in_specs=P("x"), out_specs=P("x"),
                          check_vma=check_vma)
    vx = astjax.vmap(f, axis_name="x")
    per_x = lambda row: vx(row.reshape(2, 4)).reshape(8)     # noqa: E731
    vp = astjax.vmap(astjax.pmap(f, axis_name="x"), axis_name="b")
    per_b = astjax.shard_map(lambda blk: per_x(blk[0])[None], mesh=b_mesh,
                             in_specs=P("b"), out_specs=P("b"), check_vma=check_vma)
    return {
        "vmap(shard_map)": astjax.vmap(sm, axis_name="b"),
        "vmap(pmap)": lambda a: vp(a.reshape(2, 2, 4)).reshape(2, 8),
        "vmap(vmap)": astjax.vmap(per_x, axis_name="b"),
        "pmap(vmap)": astjax.pmap(per_x, axis_name="b"),
        "shard_map(vmap)": per_b,
    }


def fd_grad(f, x):
    return numerical_grad(f, (x,))


def close(a, b, tight=False):
    np.testing.assert_allclose(a, b, rtol=1e-13 if tight else 1e-6,
                               atol=1e-13 if tight else 1e-7)


@pytest.mark.parametrize("ax", AXES, ids=str)
@pytest.mark.parametrize("name", NAMES)
def test_every_nesting_equals_the_2d_mesh(name, ax):
    ref = reference(name, ax)
    want = ref(A)
    for how, f in nestings(name, ax).items():
        try:
            close(f(A), want, tight=True)
        except AssertionError as e:
            raise AssertionError(f"{how}: {e}") from None


@pytest.mark.parametrize("ax", AXES, ids=str)
@pytest.mark.parametrize("name", NAMES)
def test_derivatives_of_vmap_of_shard_map(name, ax):
    ref = reference(name, ax)
    nested = nestings(name, ax)["vmap(shard_map)"]
    loss = lambda a: np.sum(np.sin(nested(a)) * W)          # noqa: E731
    g_ref = fd_grad(lambda a: np.sum(np.sin(ref(a)) * W), A)
    close(astjax.grad(loss)(A), g_ref)
    close(astjax.jit(astjax.grad(loss))(A), g_ref)
    t_ref = (ref(A + 1e-6 * T) - ref(A - 1e-6 * T)) / 2e-6
    close(astjax.jvp(nested, (A,), (T,))[1], t_ref)
    # an unnamed vmap outside: each example is its own nested run
    As = np.stack([A, 2 * A])
    close(astjax.vmap(nested)(As), np.stack([ref(A), ref(2 * A)]), tight=True)


@pytest.mark.parametrize("name", ["psum", "all_gather", "ppermute", "axis_index"])
def test_derivatives_of_the_other_nestings(name):
    ax = ("b", "x")
    ref = reference(name, ax)
    g_ref = fd_grad(lambda a: np.sum(np.sin(ref(a)) * W), A)
    for how, f in nestings(name, ax).items():
        try:
            close(astjax.grad(lambda a: np.sum(np.sin(f(a)) * W))(A), g_ref)
            close(astjax.jvp(f, (A,), (T,))[1], (ref(A + 1e-6 * T) - ref(A - 1e-6 * T)) / 2e-6)
        except AssertionError as e:
            raise AssertionError(f"{how}: {e}") from None


def test_check_vma_true_runs_forward_and_checks_replicated_outputs():
    ax = ("b", "x")
    for name in NAMES:
        want = reference(name, ax)(A)
        close(nestings(name, ax, check_vma=True)["vmap(shard_map)"](A), want, tight=True)
    # an output declared replicated over x that differs over x: the check names it
    sm = astjax.shard_map(lambda v: v * lax.axis_index("b"),
                          mesh=astjax.make_mesh((2,), ("x",)), in_specs=P("x"),
                          out_specs=P())
    with pytest.raises(ShardingError):
        astjax.vmap(sm, axis_name="b")(A)


def test_jax_figures():
    """The numbers JAX 0.10.2 prints for ``jit(vmap(shard_map(f), axis_name="b"))``."""
    def f(v):
        return (lax.psum(v, "x") * lax.axis_index("b") + lax.psum(v, ("b", "x"))
                + lax.psum(v, "b"))
    sm = astjax.shard_map(f, mesh=astjax.make_mesh((2,), ("x",)), in_specs=P("x"),
                          out_specs=P("x"), check_vma=False)
    a = np.arange(12.0).reshape(3, 4)
    jax_out = [[42, 51, 48, 57], [52, 63, 58, 69], [78, 91, 84, 97]]
    np.testing.assert_array_equal(astjax.vmap(sm, axis_name="b")(a), jax_out)
    np.testing.assert_array_equal(astjax.jit(astjax.vmap(sm, axis_name="b"))(a), jax_out)
    jax_grad = [[-4.04254608, 2.43547631, -3.82275459, 2.66990266],
                [-4.08635672, 4.41476327, -3.86656523, 4.64918962],
                [-7.11819926, -1.40355369, -6.89840777, -1.16912734]]
    g = astjax.grad(lambda a: np.sum(np.sin(astjax.vmap(sm, axis_name="b")(a))))(a)
    np.testing.assert_allclose(g, jax_grad, atol=1e-8)
    # a pmap and a named vmap in named vmaps, over both axes ("i" inside)
    ff = lambda v: (lax.psum(v, "b") + 10 * lax.psum(v, "i")              # noqa: E731
                    + 100 * lax.psum(v, ("b", "i")) + 1000 * lax.axis_index(("b", "i")))
    a2 = np.arange(8.0).reshape(2, 4)
    jax_out = [2864, 3866, 4868, 5870, 7024, 8026, 9028, 10030]
    for nested in (astjax.vmap(astjax.pmap(ff, axis_name="i"), axis_name="b"),
                   astjax.vmap(astjax.vmap(ff, axis_name="i"), axis_name="b"),
                   astjax.pmap(astjax.vmap(ff, axis_name="i"), axis_name="b")):
        np.testing.assert_array_equal(nested(a2).ravel(), jax_out)


def test_the_innermost_name_wins():
    # a shard_map axis named like the enclosing vmap's shadows it (as in JAX)
    sm = astjax.shard_map(lambda v: lax.psum(v, "b"), mesh=astjax.make_mesh((2,), ("b",)),
                          in_specs=P("b"), out_specs=P(), check_vma=False)
    out = astjax.vmap(sm, axis_name="b")(A)
    close(out, A[:, :4] + A[:, 4:], tight=True)


def test_a_map_inside_a_device_map_is_refused_at_the_line():
    sm = astjax.shard_map(lambda v: lax.psum(v, "x"), mesh=astjax.make_mesh((2,), ("x",)),
                          in_specs=P("x"), out_specs=P(), check_vma=False)
    inner_pmap = astjax.pmap(lambda v: lax.psum(v, "x"), axis_name="x")
    outer_mesh = astjax.make_mesh((2,), ("b",))
    pm = astjax.pmap(sm, axis_name="b")
    for run in (lambda: astjax.pmap(sm, axis_name="b")(A),
                lambda: astjax.pmap(inner_pmap, axis_name="b")(A.reshape(2, 2, 4)),
                lambda: astjax.shard_map(lambda blk: sm(blk[0])[None], mesh=outer_mesh,
                                         in_specs=P("b"), out_specs=P("b"))(A),
                lambda: astjax.grad(lambda a: np.sum(pm(a)))(A)):
        with pytest.raises(ShardingError, match="inside a (pmap|shard_map)") as e:
            run()
        assert "test_sharding_nested.py" in str(e.value), str(e.value)


def test_an_error_in_one_nested_shard_is_reported_not_a_hang():
    def f(v):
        if lax.axis_index("b") == 1:        # device-dependent Python: b=1 raises
            raise ValueError("boom in b=1")
        return lax.psum(v, ("b", "x"))
    sm = astjax.shard_map(f, mesh=astjax.make_mesh((2,), ("x",)), in_specs=P("x"),
                          out_specs=P(), check_vma=False)
    with pytest.raises(ValueError, match="boom in b=1"):
        astjax.vmap(sm, axis_name="b")(A)


MPI_PROGRAM = '''
import sys
import numpy as np
import astjax
from astjax import lax
from astjax.sharding import P
from astjax.sharding.errors import ShardingError

a = np.arange(16.0).reshape(2, 8)
sm = astjax.shard_map(lambda v: lax.psum(v, ("b", "x")) + lax.axis_index("b"),
                      mesh=astjax.make_mesh((2,), ("x",)), in_specs=P("x"),
                      out_specs=P(), check_vma=False)
nested = astjax.vmap(sm, axis_name="b")(a)             # every process: on its threads
inner = astjax.shard_map(
    lambda blk: astjax.vmap(lambda r: lax.psum(r, "b"), axis_name="b")(blk),
    mesh=astjax.make_mesh((2,), ("i",)), in_specs=P("i"), out_specs=P("i"))(a.T)
try:
    astjax.shard_map(
        lambda blk: astjax.vmap(lambda r: lax.psum(r, "i"), axis_name="b")(blk),
        mesh=astjax.make_mesh((2,), ("i",)), in_specs=P("i"), out_specs=P("i"))(a.T)
    refused = "no error"
except ShardingError as e:
    refused = str(e)
np.savez(sys.argv[1] + str(astjax.sharding.distributed.world().rank), nested=nested,
         inner=inner, refused=refused)
'''


@pytest.mark.parametrize("n", [2])
def test_nesting_under_mpiexec(n, tmp_path):
    """Under mpiexec a named vmap's nested shard_map runs on each process's threads;
    a named vmap inside an MPI shard_map reaches its own axis only (the enclosing
    axis is a clear error)."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    pytest.importorskip("mpi4py", reason="the MPI tests need mpi4py (pip install '.[test]')")
    from test_mpi import MPIEXEC
    prog = tmp_path / "nested_mpi.py"
    prog.write_text(MPI_PROGRAM)
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get(
        "PYTHONPATH", ""), OMP_NUM_THREADS="1")
    proc = subprocess.run([MPIEXEC, "-n", str(n), sys.executable, str(prog),
                           str(tmp_path / "out")], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    a = np.arange(16.0).reshape(2, 8)
    total = a[:, :4].sum(0) + a[:, 4:].sum(0)
    for r in range(n):
        got = np.load(tmp_path / f"out{r}.npz")
        np.testing.assert_array_equal(got["nested"], np.stack([total, total + 1]))
        np.testing.assert_array_equal(got["inner"], np.concatenate(
            [np.repeat(blk.sum(0, keepdims=True), 4, 0) for blk in np.split(a.T, 2)]))
        assert "running on MPI or NCCL" in str(got["refused"]), str(got["refused"])


def test_ppermute_over_both_axes_is_the_2d_mesh_one():
    # JAX 0.10.2's shard_map over the 2-d mesh ("b", "x") prints [2 3 0 1 0 0 0 0]
    # (its vmap(shard_map) gives [2 3 0 1 6 7 4 5], as if over "x" alone): the
    # definition, ranks b * 2 + x, ranks 2 and 3 outside the permutation get zeros
    sm = astjax.shard_map(lambda v: lax.ppermute(v, ("b", "x"), [(0, 1), (1, 0)]),
                          mesh=astjax.make_mesh((2,), ("x",)), in_specs=P("x"),
                          out_specs=P("x"), check_vma=False)
    out = astjax.vmap(sm, axis_name="b")(np.arange(8.0).reshape(2, 4))
    np.testing.assert_array_equal(out.ravel(), [2, 3, 0, 1, 0, 0, 0, 0])


@pytest.mark.parametrize("name", ["psum", "all_gather", "psum_scatter", "all_to_all",
                                  "axis_index"])
def test_eval_shape_of_the_nestings(name):
    from astjax.shapes import ShapeDtypeStruct
    ax = ("b", "x")
    for how, f in nestings(name, ax).items():
        out = f(A)
        assert astjax.eval_shape(f, A) == ShapeDtypeStruct(out.shape, out.dtype), how
    sm = astjax.shard_map(lambda v: lax.all_gather(v, ("b", "x")) * lax.psum(1, "b"),
                          mesh=astjax.make_mesh((2,), ("x",)), in_specs=P("x"),
                          out_specs=P("x"), check_vma=False)
    f = astjax.vmap(sm, axis_name="b")
    assert astjax.eval_shape(f, np.ones((3, 8))) == ShapeDtypeStruct((3, 12, 4), np.float64)
    with pytest.raises(ShardingError, match="inside a pmap"):
        astjax.eval_shape(astjax.pmap(sm, axis_name="b"), A)


def test_examples_that_reach_different_nested_maps_fail_clearly():
    mesh2 = astjax.make_mesh((2,), ("x",))
    one = astjax.shard_map(lambda v: lax.psum(v, "x"), mesh=mesh2, in_specs=P("x"),
                           out_specs=P(), check_vma=False)
    two = astjax.shard_map(lambda v: lax.psum(v, ("b", "x")), mesh=astjax.make_mesh(
        (4,), ("x",)), in_specs=P("x"), out_specs=P(), check_vma=False)

    def f(row):
        if lax.axis_index("b") == 0:        # device-dependent Python: two different maps
            return one(row)
        return two(row)
    with pytest.raises(ShardingError, match="different nested maps"):
        astjax.vmap(f, axis_name="b")(A)
