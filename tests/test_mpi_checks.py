"""Diverging devices get an astjax error, never a hang or a mismatched buffer: under
``mpiexec`` (the header exchange of MPIComm.check, 2 and 4 processes) and on local
devices (LocalComm compares the same signatures)."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import astjax
from astjax import lax
from astjax.sharding import P
from astjax.sharding.errors import ShardingError

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import mpi_ragged  # noqa: E402
sys.path.remove(str(HERE))

# case -> what every process's error must say (None: the case runs fine)
EXPECTED = {
    "mixed": "all_gather over ('i',)",
    "ragged": "psum over ('i',) of float64 (1, 2)",
    "dtypes": "float32",
    "skips": "the end of the per-shard function",
    "fails": "device one gave up",
    "outputs": "the end of the per-shard function (outputs float64 (1, 2)",
    "fine": None,
}


def run_mpi(n, *only, **env_extra):
    mpi4py = pytest.importorskip("mpi4py", reason="the MPI tests need mpi4py")
    del mpi4py
    from test_mpi import MPIEXEC
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get(
        "PYTHONPATH", ""), OMP_NUM_THREADS="1", **env_extra)
    proc = subprocess.run([MPIEXEC, "-n", str(n), sys.executable,
                           str(HERE / "mpi_ragged.py"), *only], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.mark.parametrize("n", [2, 4])
def test_diverging_processes_all_get_an_error(n):
    sys.path.insert(0, str(HERE))
    try:
        out = run_mpi(n)
    finally:
        sys.path.remove(str(HERE))
    lines = [ln for ln in out.replace("CASE ", "\nCASE ").splitlines()
             if ln.startswith("CASE ")]
    for case, needle in EXPECTED.items():
        got = [ln for ln in lines if ln.startswith(f"CASE {case}:")]
        assert len(got) == n, (case, out)         # every process finished the case
        if needle is None:
            total = float(np.sum(np.arange(4.0 * n).reshape(2 * n, 2)
                                 .reshape(n, 2, 2).sum(0))) * n
            assert all(ln.endswith(f"ok {total}") for ln in got), got
            continue
        assert all("Error" in ln for ln in got), got
        assert any(needle in ln for ln in got), (case, got)
        if case == "fails":                     # the others name the failed device
            assert sum(ln.startswith("CASE fails: ValueError") for ln in got) == 1, got
            assert sum("another device failed" in ln for ln in got) == n - 1, got


def test_the_check_can_be_turned_off():
    sys.path.insert(0, str(HERE))
    try:
        out = run_mpi(2, "fine", ASTJAX_COLLECTIVE_CHECK="0")
    finally:
        sys.path.remove(str(HERE))
    assert out.count("CASE fine: ok 56.0") == 2, out


@pytest.fixture
def four(monkeypatch):
    monkeypatch.setenv("ASTJAX_NUM_CPU_DEVICES", "4")


@pytest.mark.parametrize("case", ["mixed", "ragged", "dtypes"])
def test_local_devices_check_the_same_signatures(case, four):
    mesh = astjax.make_mesh((4,), ("i",))
    sm = astjax.shard_map(getattr(mpi_ragged, case), mesh=mesh, in_specs=P("i"),
                          out_specs=P("i"), check_vma=False)
    with pytest.raises(ShardingError, match="different shapes or dtypes") as e:
        sm(np.arange(16.0).reshape(8, 2))
    assert "mpi_ragged.py" in e.value.location.filename


def test_local_devices_refuse_a_broadcast_between_shapes(four):
    # (1, 2) and (2, 2) would broadcast in a NumPy add: a silently wrong psum
    def f(x):
        return lax.psum(x[:1 + (int(lax.axis_index("i")) > 0)], "i")[:1]
    sm = astjax.shard_map(f, mesh=astjax.make_mesh((4,), ("i",)), in_specs=P("i"),
                          out_specs=P("i"), check_vma=False)
    with pytest.raises(ShardingError, match=r"float64 \(1, 2\)"):
        sm(np.ones((8, 2)))
