"""The NCCL communicator (astjax/sharding/nccl.py) on the same test programs.

Without a GPU, an in-process fake of ``cupy.cuda.nccl`` (tests/fake_nccl.py: NCCL's
API on host memory, by pointer) stands in, and ``ASTJAX_SHARD_ENGINE=nccl`` makes the
driver use NCCL's communicator for NumPy arrays: every collective and transpose of
tests/test_sharding.py against its NumPy reference, tests/mpi_programs.py against
the threads' shared-memory engine, the header check on diverging devices, and the
MPI-broadcast id path (MPICliques) with a thread-based MPI stand-in.  ``gpu``-marked
tests run the real thing on CuPy arrays where CuPy and GPUs are present.
"""
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import astjax
from astjax import lax
from astjax.sharding import P
from astjax.sharding.errors import ShardingError

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import fake_nccl  # noqa: E402
import mpi_programs  # noqa: E402
import mpi_ragged  # noqa: E402
import test_sharding as TS  # noqa: E402
sys.path.remove(str(HERE))


@pytest.fixture
def nccl(monkeypatch):
    monkeypatch.setenv("ASTJAX_NUM_CPU_DEVICES", "4")
    monkeypatch.setenv("ASTJAX_SHARD_ENGINE", "nccl")
    return fake_nccl.install(monkeypatch)


def calls(kind):
    return [c for c in fake_nccl.LOG if c[0] == kind]


@pytest.mark.parametrize("f", TS.CASES, ids=lambda f: f.__name__)
def test_collective_matches_numpy_through_nccl(f, nccl):
    out = astjax.shard_map(f, mesh=TS.mesh1(), in_specs=P("i"), out_specs=P("i"))(TS.X)
    np.testing.assert_allclose(out, TS.REFS[f], rtol=1e-13, atol=1e-13)
    used = {c[0] for c in nccl.LOG}
    expect = {TS.f_psum: "allReduce", TS.f_gather: "allGather",
              TS.f_scatter: "reduceScatter", TS.f_ppermute: "send",
              TS.f_all_to_all: "recv"}.get(f)
    if expect:
        assert expect in used, used


@pytest.mark.parametrize("f", TS.CASES, ids=lambda f: f.__name__)
def test_transposes_match_finite_differences_through_nccl(f, nccl):
    TS.test_collective_transpose_matches_finite_differences(f)


def test_tuple_axes_and_grids_through_nccl(nccl):
    TS.test_tuple_axes_on_a_2d_mesh()
    TS.test_untiled_all_to_all_and_scatter_match_jax_shapes()
    TS.test_grad_replicated_parameter_sums_over_devices()
    # one communicator per group, made by initAll with the group's devices
    groups = {c[1] for c in calls("initAll")}
    assert (0, 1) in groups or (0, 2) in groups, groups


def test_the_mpi_programs_match_the_shared_memory_engine(nccl, monkeypatch):
    got = mpi_programs.programs(4)
    monkeypatch.setenv("ASTJAX_SHARD_ENGINE", "local")
    ref = mpi_programs.programs(4)
    assert set(got) == set(ref)
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-12, atol=1e-12, err_msg=k)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.uint8,
                                   np.complex128, np.bool_, np.float16])
def test_dtypes_cross_nccl_exactly(dtype, nccl):
    x = (np.arange(24).reshape(8, 3) % 5).astype(dtype)
    if dtype is np.complex128:
        x = x + 1j * x[::-1]

    def f(b):
        return lax.psum(b, "i"), lax.all_gather(b, "i", tiled=True), \
            lax.ppermute(b, "i", [(0, 1), (1, 0)])
    s, g, p = astjax.shard_map(f, mesh=TS.mesh1(), in_specs=P("i"),
                               out_specs=(P("i"), P("i"), P("i")))(x)
    blocks = np.split(x, 4)
    total = blocks[0]
    for b in blocks[1:]:
        total = total + b
    np.testing.assert_array_equal(s, np.concatenate([total] * 4))
    assert s.dtype == total.dtype and g.dtype == x.dtype
    np.testing.assert_array_equal(g, np.concatenate([x] * 4))
    np.testing.assert_array_equal(p, np.concatenate([blocks[1], blocks[0]] +
                                                    [np.zeros_like(blocks[0])] * 2))


def test_complex_max_is_refused(nccl):
    sm = astjax.shard_map(lambda b: lax.pmax(b, "i"), mesh=TS.mesh1(), in_specs=P("i"),
                          out_specs=P())
    with pytest.raises(ShardingError, match="not ordered"):
        sm(np.ones((4, 2), complex))


@pytest.mark.parametrize("case", ["mixed", "ragged", "dtypes"])
def test_diverging_devices_get_an_error_through_nccl(case, nccl):
    sm = astjax.shard_map(getattr(mpi_ragged, case), mesh=TS.mesh1(), in_specs=P("i"),
                          out_specs=P("i"), check_vma=False)
    with pytest.raises(ShardingError, match="different shapes or dtypes"):
        sm(np.arange(16.0).reshape(8, 2))


class _ThreadMPI:
    """What MPICliques needs of an MPIComm, for ranks that are threads: ``sub(axes)``
    giving a communicator with Get_rank, Get_size and bcast."""

    boards: dict = {}

    def __init__(self, mesh_shape, position, barrier):
        from astjax.sharding.comm import _Groups
        self.groups = _Groups(mesh_shape, position)
        self.position, self.barrier = position, barrier

    def sub(self, axes):
        members = self.groups.members(axes)
        me = members.index(self.position)
        outer = self

        class Sub:
            def Get_rank(self):
                return me

            def Get_size(self):
                return len(members)

            def bcast(self, value, root=0):
                key = (axes, members[root])
                if me == root:
                    outer.boards[key] = value
                outer.barrier.wait()
                got = outer.boards[key]
                outer.barrier.wait()
                return got
        return Sub()


def test_ids_broadcast_over_mpi_make_the_group_communicators(nccl):
    """Under mpiexec each group's first member draws the id and MPI broadcasts it."""
    from astjax.sharding.nccl import MPICliques, NcclComm
    shape = {"x": 2, "y": 2}
    barrier = threading.Barrier(4, timeout=30)
    x = TS.RNG.standard_normal((4, 2, 3))
    outs, errors = [None] * 4, []

    def rank(pos):
        try:
            comm = NcclComm(MPICliques(_ThreadMPI(shape, pos, barrier)), shape, pos)
            outs[pos] = (comm.allreduce(x[pos], ("y",)), comm.allgather(x[pos], ("x", "y")))
        except BaseException as e:   # noqa: BLE001
            errors.append(e)
            barrier.abort()
    threads = [threading.Thread(target=rank, args=(p,)) for p in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for pos in range(4):
        row = pos // 2
        np.testing.assert_allclose(outs[pos][0], x[2 * row] + x[2 * row + 1])
        np.testing.assert_allclose(np.stack(outs[pos][1]), x)
    inits = calls("init")
    # groups over "y": 2 ids (2 members each); the world ("x", "y"): 1 id (4 members)
    assert sorted({(c[1], c[2]) for c in inits}, key=str) and \
        len({c[1] for c in inits if c[2] == 2}) == 2 and \
        len({c[1] for c in inits if c[2] == 4}) == 1


def test_a_generated_modules_layout_runs_through_nccl(nccl, monkeypatch):
    """execute.run_layout (the entry of modules astjax gen writes) picks the same
    engine as the driver: NCCL's logic here, against the shared-memory engine."""
    from astjax.sharding import execute
    layout = {"name": "body", "kind": "shard_map", "mesh": (("x", 2), ("y", 2)),
              "in_specs": (("P", "x", "y"),), "out_specs": (("P", "x", "y"),) * 5,
              "manual": None, "check_vma": True}
    xs = TS.RNG.standard_normal((8, 6))
    got = execute.run_layout(_grid_body, layout, (xs,))
    assert calls("initAll")
    monkeypatch.setenv("ASTJAX_SHARD_ENGINE", "local")
    ref = execute.run_layout(_grid_body, layout, (xs,))
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-13, atol=1e-13)


def _grid_body(b):
    return (lax.psum(b, "y") + lax.pmin(b, ("y", "x")),
            lax.all_gather(b, ("y", "x"), axis=1)[:, 0],
            lax.ppermute(b, ("x", "y"), [(0, 3), (3, 1), (1, 2), (2, 0)]),
            lax.psum_scatter(np.concatenate([b, b]), "x", tiled=True),
            lax.all_to_all(np.concatenate([b, b]), "y", 0, 0, tiled=True)[:b.shape[0]])


# ------------------------------------------------------------------- real GPUs (gpu)



@pytest.mark.gpu
@pytest.mark.skipif(fake_nccl.real_gpus() < 1, reason="needs CuPy with NCCL and a GPU")
def test_real_nccl_on_cupy_arrays(monkeypatch):
    import cupy
    n = 2 if fake_nccl.real_gpus() >= 2 else 1
    monkeypatch.setenv("ASTJAX_NUM_CPU_DEVICES", str(n))
    mesh = astjax.make_mesh((n,), ("i",))
    x = np.arange(12.0 * n).reshape(4 * n, 3)

    def f(b):
        right = [(k, (k + 1) % n) for k in range(n)]
        return (lax.psum(b, "i"), lax.all_gather(b, "i", tiled=True),
                lax.ppermute(b, "i", right), lax.psum_scatter(np.concatenate([b] * n), "i",
                                                              tiled=True))
    specs = (P("i"),) * 4
    ref = astjax.shard_map(f, mesh=mesh, in_specs=P("i"), out_specs=specs)(x)
    got = astjax.shard_map(f, mesh=mesh, in_specs=P("i"), out_specs=specs)(cupy.asarray(x))
    for g, r in zip(got, ref):
        assert isinstance(g, cupy.ndarray)
        np.testing.assert_allclose(cupy.asnumpy(g), r, rtol=1e-12)


@pytest.mark.gpu
@pytest.mark.skipif(fake_nccl.real_gpus() < 1, reason="needs CuPy with NCCL and a GPU")
def test_real_nccl_gradients_pmap_and_every_collective(monkeypatch):
    """grad of a shard_map'ed loss, pmap, all_to_all and pmax on CuPy arrays: the
    values of the same program on NumPy arrays (the shared-memory engine)."""
    import cupy
    n = 2 if fake_nccl.real_gpus() >= 2 else 1
    monkeypatch.setenv("ASTJAX_NUM_CPU_DEVICES", str(n))
    mesh = astjax.make_mesh((n,), ("i",))
    rng = np.random.default_rng(0)
    w = rng.standard_normal(3)
    x = rng.standard_normal((4 * n, 3))

    def loss(w, b):
        h = np.tanh(b @ w)
        return lax.psum(np.sum(h * h), "i") + lax.pmax(np.max(h), "i")
    sm = astjax.shard_map(loss, mesh=mesh, in_specs=(P(), P("i")), out_specs=P(),
                          check_vma=False)
    ref = astjax.value_and_grad(sm)(w, x)
    got = astjax.value_and_grad(sm)(cupy.asarray(w), cupy.asarray(x))
    np.testing.assert_allclose(float(got[0]), ref[0], rtol=1e-12)
    assert isinstance(got[1], cupy.ndarray)
    np.testing.assert_allclose(cupy.asnumpy(got[1]), ref[1], rtol=1e-12)

    def mix(b):
        return lax.all_to_all(b, "i", 0, 0, tiled=True), lax.pmean(b, "i")
    specs = (P("i"), P("i"))
    want = astjax.shard_map(mix, mesh=mesh, in_specs=P("i"), out_specs=specs)(x)
    have = astjax.shard_map(mix, mesh=mesh, in_specs=P("i"), out_specs=specs)(
        cupy.asarray(x))
    for h, r in zip(have, want):
        np.testing.assert_allclose(cupy.asnumpy(h), r, rtol=1e-12)

    pm = astjax.pmap(lambda b: lax.psum(b * 2.0, "i"), axis_name="i")
    xs = rng.standard_normal((n, 5))
    np.testing.assert_allclose(cupy.asnumpy(pm(cupy.asarray(xs))), pm(xs), rtol=1e-12)
