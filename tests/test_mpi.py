"""The MPI communicator runs the same programs as the local one, with 2 and 4
processes (``mpiexec`` from the mpich wheel; CI installs mpi4py and mpich through the
``test`` extra)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def mpiexec():
    found = Path(sys.executable).parent / "mpiexec"
    if found.exists():
        return str(found)
    import sysconfig
    found = Path(sysconfig.get_path("scripts")) / "mpiexec"
    return str(found) if found.exists() else shutil.which("mpiexec")


pytest.importorskip("mpi4py", reason="the MPI tests need mpi4py (pip install '.[test]')")
MPIEXEC = mpiexec()


@pytest.mark.parametrize("n", [2, 4])
def test_mpi_matches_local_devices(n, tmp_path, monkeypatch):
    assert MPIEXEC, "mpiexec not found: pip install mpich"
    out = tmp_path / "mpi.npz"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get(
        "PYTHONPATH", ""), OMP_NUM_THREADS="1")
    proc = subprocess.run([MPIEXEC, "-n", str(n), sys.executable,
                           str(HERE / "mpi_programs.py"), str(out)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = np.load(out)
    assert int(got["size"]) == n
    monkeypatch.setenv("ASTJAX_NUM_CPU_DEVICES", str(n))
    sys.path.insert(0, str(HERE))
    try:
        import mpi_programs
    finally:
        sys.path.remove(str(HERE))
    local = mpi_programs.programs(n)
    for k, v in local.items():
        np.testing.assert_allclose(got[k], v, rtol=1e-12, atol=1e-12, err_msg=k)


@pytest.mark.parametrize("n", [2, 4])
def test_examples_under_mpiexec(n):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get(
        "PYTHONPATH", ""), OMP_NUM_THREADS="1")
    for name in ("wave_sharded", "data_parallel"):
        proc = subprocess.run([MPIEXEC, "-n", str(n), sys.executable,
                               str(ROOT / "examples" / f"{name}.py")],
                              env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        lines = proc.stdout.splitlines()
        assert f"{n} devices" in proc.stdout, proc.stdout
        if name == "wave_sharded":
            diffs = [float(ln.rsplit("=", 1)[1]) for ln in lines if "max |" in ln]
            assert len(diffs) == 1 and diffs[0] < 1e-12, proc.stdout   # process 0 prints
        else:
            steps = [ln for ln in lines if ln.startswith("step ")]
            assert len(steps) == 5, proc.stdout
            for ln in steps:
                values = [float(w) for w in ln.split()[3::2]]
                assert max(values) - min(values) < 1e-9, ln
