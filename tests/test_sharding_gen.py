"""``astjax gen`` of shard_map'ed functions: standalone modules that run sharded.

Each module is generated from a program file, imported in a fresh process that does
not import astjax, and run on threads and under ``mpiexec`` (2 and 4 processes); its
outputs must equal the shard_map'ed function's own, run by astjax."""
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from astjax import cli

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

PROGRAM = textwrap.dedent('''
    import numpy as np
    import astjax
    from astjax import lax
    from astjax.sharding import P


    def loss(params, batch):
        inputs, targets = batch
        for W, b in params:
            outputs = np.dot(inputs, W) + b
            inputs = np.tanh(outputs)
        return np.mean((outputs - targets) ** 2)


    def local_step(params, batch):
        value, grads = astjax.value_and_grad(loss)(params, batch)
        return lax.pmean(value, "batch"), lax.pmean(grads, "batch")


    def exchange(x, w):
        n = lax.psum(1, "i")
        right = [(k, (k + 1) % n) for k in range(n)]
        y = lax.ppermute(x, "i", right) + lax.all_gather(x, "i", tiled=True)[:x.shape[0]]
        z = lax.all_to_all(y, "i", 0, 0, tiled=True) * lax.axis_index("i")
        s = lax.psum_scatter(np.concatenate([z] * n), "i", tiled=True)
        return lax.psum(np.sum(np.tanh(s * w)), "i") + lax.pmax(np.max(x), "i"), s


    def grid(b):
        s = lax.psum(b, "y") + lax.pmin(b, ("y", "x"))
        return lax.all_gather(s, ("y", "x"), axis=1), lax.psum_scatter(b, "x", tiled=True)


    def half(a, m):
        return lax.psum(np.tanh(a @ m), "x")


    mesh = astjax.make_mesh((2,), ("batch",))
    step = astjax.shard_map(local_step, mesh=mesh, in_specs=(P(), P("batch")),
                            out_specs=P(), check_vma=False)
    ring = astjax.shard_map(exchange, mesh=astjax.make_mesh((2,), ("i",)),
                            in_specs=(P("i"), P()), out_specs=(P(), P("i")))
    mesh2 = astjax.make_mesh((2, 2), ("x", "y"))
    grid_map = astjax.shard_map(grid, mesh=mesh2, in_specs=P("x", "y"),
                                out_specs=(P("x", "y"), P("x", "y")))
    half_map = astjax.shard_map(half, mesh=mesh2, in_specs=(P("x"), P()), out_specs=P(),
                                axis_names={"x"})
''')


def example_args(name):
    rng = np.random.default_rng(7)
    if name == "step":
        params = [(rng.standard_normal((4, 5)), np.zeros(5)),
                  (rng.standard_normal((5, 3)), rng.standard_normal(3))]
        return params, (rng.standard_normal((8, 4)), rng.standard_normal((8, 3)))
    if name == "ring":
        return rng.standard_normal((8, 3)), rng.standard_normal(3)
    if name == "grid_map":
        return (rng.standard_normal((8, 6)),)
    return rng.standard_normal((4, 3)), rng.standard_normal((3, 5))


RUNNER = textwrap.dedent('''
    import pickle, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    import {module} as mod
    with open(sys.argv[2], "rb") as fh:
        args = pickle.load(fh)
    out = mod.{entry}(*args)
    assert "astjax" not in sys.modules, "the generated module imported astjax"
    rank = 0
    if len(sys.argv) > 4:
        from mpi4py import MPI
        rank = MPI.COMM_WORLD.Get_rank()
    with open(sys.argv[3] + f".{{rank}}", "wb") as fh:
        pickle.dump(out, fh)
''')


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """Program, generated modules (one per sharded function) and astjax's outputs."""
    import pickle
    tmp = tmp_path_factory.mktemp("shard_gen")
    (tmp / "prog.py").write_text(PROGRAM)
    old_env = os.environ.get("ASTJAX_NUM_CPU_DEVICES")
    old_cwd = os.getcwd()
    os.environ["ASTJAX_NUM_CPU_DEVICES"] = "4"
    os.chdir(tmp)
    try:
        for name in ("step", "ring", "grid_map", "half_map"):
            rc = cli.main(["gen", f"prog.py:{name}", "-t", "jit", "-o", f"gen_{name}.py"])
            assert rc == 0
        import importlib
        prog = importlib.import_module(cli._loaded[str(tmp / "prog.py")])
        refs = {}
        for name in ("step", "ring", "grid_map", "half_map"):
            args = example_args(name)
            refs[name] = getattr(prog, name)(*args)
            with open(tmp / f"{name}.args", "wb") as fh:
                pickle.dump(args, fh)
    finally:
        os.chdir(old_cwd)
        if old_env is None:
            os.environ.pop("ASTJAX_NUM_CPU_DEVICES", None)
        else:
            os.environ["ASTJAX_NUM_CPU_DEVICES"] = old_env
    return tmp, refs


def run_module(tmp, name, n=None):
    import pickle
    runner = tmp / f"run_{name}.py"
    runner.write_text(RUNNER.format(module=f"gen_{name}", entry=f"jit_{name}"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env["OMP_NUM_THREADS"] = "1"
    cmd = [sys.executable, str(runner), str(tmp), str(tmp / f"{name}.args"),
           str(tmp / f"{name}.out")]
    if n is not None:
        sys.path.insert(0, str(HERE))
        try:
            from test_mpi import MPIEXEC
        finally:
            sys.path.remove(str(HERE))
        cmd = [MPIEXEC, "-n", str(n)] + cmd + ["mpi"]
    # run from an empty directory: the repository's astjax must not be importable
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300,
                          cwd=tmp)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    outs = []
    for r in range(n or 1):
        with open(str(tmp / f"{name}.out") + f".{r}", "rb") as fh:
            outs.append(pickle.load(fh))
    return outs


def assert_same(got, ref):
    from astjax.tree_util import tree_leaves
    a, b = tree_leaves(got), tree_leaves(ref)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)
        assert np.shape(x) == np.shape(y)


@pytest.mark.parametrize("name", ["step", "ring", "grid_map", "half_map"])
def test_generated_sharded_module_runs_on_threads(generated, name):
    tmp, refs = generated
    text = (tmp / f"gen_{name}.py").read_text()
    assert not re.search(r"^\s*(import astjax|from astjax)", text, re.M)
    assert "shx.run_layout(" in text and "layout = {" in text
    (out,) = run_module(tmp, name)
    assert_same(out, refs[name])


@pytest.mark.parametrize("name,n", [("step", 2), ("ring", 2), ("grid_map", 4),
                                    ("half_map", 4)])
def test_generated_sharded_module_runs_under_mpiexec(generated, name, n):
    pytest.importorskip("mpi4py", reason="the MPI tests need mpi4py")
    tmp, refs = generated
    for out in run_module(tmp, name, n):        # every process gets the global result
        assert_same(out, refs[name])


def test_generated_module_refuses_another_process_count(generated):
    pytest.importorskip("mpi4py", reason="the MPI tests need mpi4py")
    tmp, _ = generated
    with pytest.raises(AssertionError, match="generated for a mesh of 2 devices but "
                                             "mpiexec started 4"):
        run_module(tmp, "step", 4)


def test_gen_of_sharded_functions_refuses_what_it_cannot_write(tmp_path, monkeypatch,
                                                                capsys):
    monkeypatch.setenv("ASTJAX_NUM_CPU_DEVICES", "4")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p2.py").write_text(PROGRAM + textwrap.dedent('''
        pm = astjax.pmap(lambda v: lax.psum(v, "d"), axis_name="d")
    '''))
    assert cli.main(["gen", "p2.py:step", "-t", "grad", "-o", "x.py"]) == 2
    err = capsys.readouterr().err
    assert "per-shard code under jit, not grad" in err and "hint:" in err
    assert cli.main(["gen", "p2.py:pm", "-t", "jit", "-o", "x.py"]) == 2
    assert "this one is a pmap" in capsys.readouterr().err
