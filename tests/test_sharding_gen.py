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


def run_module(tmp, name, n=None, entry=None):
    import pickle
    runner = tmp / f"run_{name}.py"
    runner.write_text(RUNNER.format(module=f"gen_{name}", entry=entry or f"jit_{name}"))
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
        pm_static = astjax.pmap(lambda v, k: lax.psum(v, "d") * k, axis_name="d",
                                static_broadcasted_argnums=1)


        def first(x, w):
            return ring(x, w)[0]
    '''))
    # a pmap's static values are part of the module: without --args there are none
    assert cli.main(["gen", "p2.py:pm_static", "-t", "jit", "-o", "x.py"]) == 2
    err = capsys.readouterr().err
    assert "static_broadcasted_argnums (k)" in err and "--args" in err
    assert not (tmp_path / "x.py").exists()
    # a static value that is not a Python literal cannot be written into it
    assert cli.main(["gen", "p2.py:pm_static", "-t", "jit", "--args",
                     "f64[2, 3], np.float32", "-o", "x.py"]) == 2
    assert "not a Python literal" in capsys.readouterr().err


# ------------------------------------------ derivatives of shard_map'ed functions, pmap

DERIVED = textwrap.dedent('''
    import numpy as np
    import astjax
    from astjax import lax
    from astjax import random as jr
    from astjax.sharding import P

    mesh = astjax.make_mesh((2,), ("i",))
    mesh2 = astjax.make_mesh((2, 2), ("x", "y"))


    def local_loss(w, x):
        return lax.psum(np.sum(np.tanh(x @ w) ** 2), "i")


    sloss = astjax.shard_map(local_loss, mesh=mesh, in_specs=(P(), P("i")), out_specs=P())


    def loss(w, x):
        return sloss(w, x) * 0.5 + np.sum(w ** 2)


    def hvp(w, x):                 # second order: the gradient of a gradient's product
        return np.sum(astjax.grad(loss)(w, x) * np.cos(w))


    def local_grad(w, x):          # a per-shard gradient, averaged over the devices
        return lax.pmean(astjax.grad(lambda w: np.sum(np.tanh(x @ w) ** 2))(w), "i")


    sgrad = astjax.shard_map(local_grad, mesh=mesh, in_specs=(P(), P("i")), out_specs=P(),
                             check_vma=False)


    def per_device(w, x):
        return lax.psum(np.sum(np.tanh(x @ w)), "d") * x[0, 0]


    pm = astjax.pmap(per_device, axis_name="d", in_axes=(None, 0))


    def pm_loss(w, xs):
        return np.sum(pm(w, xs) ** 2)


    def noisy(w, key, x):          # dropout with a key folded per shard
        k = jr.fold_in(key, lax.axis_index("i"))
        keep = jr.bernoulli(k, 0.75, x.shape)
        return lax.psum(np.sum(np.where(keep, np.tanh(x * w) / 0.75, 0.0) ** 2), "i")


    snoisy = astjax.shard_map(noisy, mesh=mesh, in_specs=(P(), P(), P("i")), out_specs=P())


    def exchange(x, w):
        n = lax.psum(1, "i")
        right = [(k, (k + 1) % n) for k in range(n)]
        y = lax.ppermute(x, "i", right) + lax.all_gather(x, "i", tiled=True)[:x.shape[0]]
        z = lax.all_to_all(y, "i", 0, 0, tiled=True) * (1.0 + lax.axis_index("i"))
        s = lax.psum_scatter(np.concatenate([z, z]), "i", tiled=True)
        return lax.psum(np.sum(np.tanh(s * w)), "i") + lax.pmax(np.max(x), "i"), s


    ring = astjax.shard_map(exchange, mesh=mesh, in_specs=(P("i"), P()),
                            out_specs=(P(), P("i")))


    def ring_loss(x, w):
        total, s = ring(x, w)
        return total + np.sum(s ** 2)


    def grid(b):
        s = lax.psum(b, "y") * lax.pmin(b, ("y", "x"))
        return lax.all_gather(s, ("y", "x"), axis=1), lax.psum_scatter(b, "x", tiled=True)


    grid_map = astjax.shard_map(grid, mesh=mesh2, in_specs=P("x", "y"),
                                out_specs=(P("x", "y"), P("x", "y")))


    def grid_loss(b):
        g, s = grid_map(b)
        return np.sum(np.sin(g)) + np.sum(s ** 3)


    def centred(w, x):             # a named vmap inside the shard: rows are devices
        rows = astjax.vmap(lambda r: r - lax.pmean(r, "b"), axis_name="b")(x)
        return lax.psum(np.sum(np.tanh(rows * w) ** 2), "i")


    scentred = astjax.shard_map(centred, mesh=mesh, in_specs=(P(), P("i")), out_specs=P())

    # the same functions under vmap (arguments with a batch axis: derived_args)
    bsloss, bring, bpm, bgrid = sloss, ring, pm, grid_map


    def bsloss_loss(w, xs):        # the gradient of a vmap of a shard_map
        return np.sum(np.sin(astjax.vmap(sloss, in_axes=(None, 0))(w, xs)))
''')

# (name, target, --transform, entry point, MPI processes or None)
DERIVED_CASES = [
    ("sloss_grad", "sloss", "grad", "grad_sloss", 2),
    ("sloss_vg", "sloss", "value_and_grad", "value_and_grad_sloss", None),
    ("loss_jit_vg", "loss", "jit(value_and_grad)", "jit_value_and_grad_loss", 2),
    ("hvp_grad", "hvp", "grad", "grad_hvp", 2),
    ("sgrad_jit", "sgrad", "jit", "jit_sgrad", 2),
    ("pm_jit", "pm", "jit", "jit_pm", 2),
    ("pm_loss_grad", "pm_loss", "grad", "grad_pm_loss", 2),
    ("pm_vg", "pm_loss", "value_and_grad", "value_and_grad_pm_loss", None),
    ("snoisy_grad", "snoisy", "grad", "grad_snoisy", 2),
    ("ring_loss_grad", "ring_loss", "grad(argnums=(0, 1))", "grad_ring_loss", 2),
    ("grid_loss_grad", "grid_loss", "grad", "grad_grid_loss", 4),
    ("scentred_grad", "scentred", "grad", "grad_scentred", 2),
    ("bsloss_vmap", "bsloss", "vmap(in_axes=(None, 0))", "vmap_bsloss", 2),
    ("bring_jit_vmap", "bring", "jit(vmap(in_axes=(0, None)))", "jit_vmap_bring", 2),
    ("bpm_vmap", "bpm", "vmap(in_axes=(None, 0))", "vmap_bpm", 2),
    ("bgrid_vmap", "bgrid", "vmap", "vmap_bgrid", 4),
    ("bsloss_loss_grad", "bsloss_loss", "grad", "grad_bsloss_loss", 2),
]


def derived_args(target):
    rng = np.random.default_rng(3)
    w, x = rng.standard_normal((3, 2)), rng.standard_normal((8, 3))
    if target in ("sloss", "loss", "hvp", "sgrad"):
        return w, x
    if target in ("pm", "pm_loss"):
        return w, rng.standard_normal((2, 4, 3))
    if target == "snoisy":
        from astjax import random as jr
        return rng.standard_normal(3), jr.PRNGKey(5), x
    if target == "ring_loss":
        return x, rng.standard_normal(3)
    if target == "grid_loss":
        return (rng.standard_normal((8, 6)),)
    if target in ("bsloss", "bsloss_loss"):
        return w, rng.standard_normal((3, 8, 3))
    if target == "bring":
        return rng.standard_normal((3, 8, 3)), rng.standard_normal(3)
    if target == "bpm":
        return w, rng.standard_normal((3, 2, 4, 3))
    if target == "bgrid":
        return (rng.standard_normal((3, 8, 6)),)
    return rng.standard_normal(3), rng.standard_normal((4, 3))


@pytest.fixture(scope="module")
def derived(tmp_path_factory):
    """Modules of derivatives of shard_map'ed and pmap'ed functions, and astjax's
    results of the same transformations in process."""
    import importlib
    import pickle
    import astjax
    tmp = tmp_path_factory.mktemp("shard_gen_derived")
    (tmp / "dprog.py").write_text(DERIVED)
    old_env = os.environ.get("ASTJAX_NUM_CPU_DEVICES")
    old_cwd = os.getcwd()
    os.environ["ASTJAX_NUM_CPU_DEVICES"] = "4"
    os.chdir(tmp)
    try:
        for name, target, transform, _, _ in DERIVED_CASES:
            rc = cli.main(["gen", f"dprog.py:{target}", "-t", transform,
                           "-o", f"gen_{name}.py"])
            assert rc == 0, name
        prog = importlib.import_module(cli._loaded[str(tmp / "dprog.py")])
        refs = {}
        for name, target, transform, _, _ in DERIVED_CASES:
            steps = cli.parse_transform(transform, target)
            fun = getattr(prog, target)
            for st in reversed(steps):
                fun = getattr(astjax, st.name)(fun, **st.kwargs)
            args = derived_args(target)
            refs[name] = fun(*args)
            with open(tmp / f"{name}.args", "wb") as fh:
                pickle.dump(args, fh)
    finally:
        os.chdir(old_cwd)
        if old_env is None:
            os.environ.pop("ASTJAX_NUM_CPU_DEVICES", None)
        else:
            os.environ["ASTJAX_NUM_CPU_DEVICES"] = old_env
    return tmp, refs


@pytest.mark.parametrize("case", DERIVED_CASES, ids=[c[0] for c in DERIVED_CASES])
def test_derivatives_and_pmap_modules_run_on_threads(derived, case):
    name, _, _, entry, _ = case
    tmp, refs = derived
    text = (tmp / f"gen_{name}.py").read_text()
    assert not re.search(r"^\s*(import astjax|from astjax)", text, re.M)
    if name == "sgrad_jit":      # a shard_map'ed function under jit: its own entry point
        assert "shx.run_layout(" in text
    else:
        assert "shx.Plan(" in text and "sh.register_driver(shx.LayoutDriver)" in text
    if "vmap" in name:                  # the batched per-shard code
        assert re.search(r"'kind': '(shard_map|pmap)_batch'", text), name
    (out,) = run_module(tmp, name, entry=entry)
    assert_same(out, refs[name])


@pytest.mark.parametrize("case", [c for c in DERIVED_CASES if c[4]],
                         ids=[c[0] for c in DERIVED_CASES if c[4]])
def test_derivatives_and_pmap_modules_run_under_mpiexec(derived, case):
    pytest.importorskip("mpi4py", reason="the MPI tests need mpi4py")
    name, _, _, entry, n = case
    tmp, refs = derived
    for out in run_module(tmp, name, n, entry=entry):
        assert_same(out, refs[name])


def test_derivative_module_holds_the_plans_it_calls(derived):
    tmp, _ = derived
    text = (tmp / "gen_hvp_grad.py").read_text()
    # the gradient of a gradient: the pullback's own pullback, and its tangent map
    assert "'kind': 'shard_map_vjp_vjp'" in text or "'kind': 'shard_map_vjp_jvp'" in text
    text = (tmp / "gen_pm_loss_grad.py").read_text()
    assert "'sized_by': (1, (None, 0))" in text      # pmap's mesh: the mapped axis's size


# ------------------------------------------ pmap with static_broadcasted_argnums

STATIC = textwrap.dedent('''
    import numpy as np
    import astjax
    from astjax import lax


    def per_device(w, k, x):
        return lax.psum(np.sum(np.tanh(x @ w)) * k, "d")


    spm = astjax.pmap(per_device, axis_name="d", in_axes=(None, None, 0),
                      static_broadcasted_argnums=1)


    def spm_loss(w, xs):           # two static values: two per-device programs
        return np.sum(spm(w, 3, xs) ** 2) + np.sum(spm(w, 0.5, xs))


    def spm_k(w, k, xs):           # the static value an argument (given by --args)
        return np.sum(spm(w, k, xs) ** 2)


    def powers(n, x, mode):        # static first and last: range(n) and a branch
        y = x
        for _ in range(n):
            y = np.sin(y) * x
        if mode == "sum":
            return lax.psum(y, "d")
        return lax.pmax(y, "d")


    spow = astjax.pmap(powers, axis_name="d", static_broadcasted_argnums=(0, 2))


    def spow_loss(x):
        return np.sum(spow(2, x, "sum") ** 2) + np.sum(spow(1, x, "max") * x)
''')

# (name, target, --transform, --args or None, entry point, the arguments run, MPI
# processes: pmap's mesh is the mapped axis, so the arguments decide 2 or 4)
STATIC_CASES = [
    ("spm_loss_grad", "spm_loss", "grad", None, "grad_spm_loss", "w2", 2),
    ("spm_loss_vg", "spm_loss", "value_and_grad", None, "value_and_grad_spm_loss", "w4", 4),
    ("spm_loss_jit_grad", "spm_loss", "jit(grad)", None, "jit_grad_spm_loss", "w2", 2),
    ("spm_jit", "spm", "jit", "f64[3, 2], 3, f64[2, 4, 3]", "jit_spm", "wk2", 2),
    ("spm_vmap", "spm", "vmap(in_axes=(None, None, 0))", "f64[3, 2], 3, f64[3, 2, 4, 3]",
     "vmap_spm", "wkb", 2),
    ("spm_k_vg", "spm_k", "value_and_grad", "f64[3, 2], 3, f64[4, 4, 3]",
     "value_and_grad_spm_k", "wk4", 4),
    ("spow_loss_grad", "spow_loss", "grad", None, "grad_spow_loss", "x4", 4),
    ("spow_jit", "spow", "jit", "2, f64[2, 3], 'sum'", "jit_spow", "nx2", 2),
    ("spow_loss_vmap", "spow_loss", "vmap", None, "vmap_spow_loss", "bx4", 4),
]


def static_args(kind):
    rng = np.random.default_rng(11)
    w = rng.standard_normal((3, 2))
    return {"w2": (w, rng.standard_normal((2, 4, 3))),
            "w4": (w, rng.standard_normal((4, 4, 3))),
            "wk2": (w, 3, rng.standard_normal((2, 4, 3))),
            "wkb": (w, 3, rng.standard_normal((3, 2, 4, 3))),
            "wk4": (w, 3, rng.standard_normal((4, 4, 3))),
            "x4": (rng.standard_normal((4, 3)),),
            "nx2": (2, rng.standard_normal((2, 3)), "sum"),
            "bx4": (rng.standard_normal((2, 4, 3)),)}[kind]


@pytest.fixture(scope="module")
def static_generated(tmp_path_factory):
    """Modules of transformations of static-argument pmaps (one per-device program
    per static value), and astjax's results of the same transformations."""
    import importlib
    import pickle
    import astjax
    tmp = tmp_path_factory.mktemp("shard_gen_static")
    (tmp / "sprog.py").write_text(STATIC)
    old_env = os.environ.get("ASTJAX_NUM_CPU_DEVICES")
    old_cwd = os.getcwd()
    os.environ["ASTJAX_NUM_CPU_DEVICES"] = "4"
    os.chdir(tmp)
    try:
        for name, target, transform, spec, _, _, _ in STATIC_CASES:
            argv = ["gen", f"sprog.py:{target}", "-t", transform, "-o", f"gen_{name}.py"]
            rc = cli.main(argv + (["--args", spec] if spec else []))
            assert rc == 0, name
        prog = importlib.import_module(cli._loaded[str(tmp / "sprog.py")])
        refs = {}
        for name, target, transform, _, _, kind, _ in STATIC_CASES:
            fun = getattr(prog, target)
            for st in reversed(cli.parse_transform(transform, target)):
                fun = getattr(astjax, st.name)(fun, **st.kwargs)
            args = static_args(kind)
            refs[name] = fun(*args)
            with open(tmp / f"{name}.args", "wb") as fh:
                pickle.dump(args, fh)
    finally:
        os.chdir(old_cwd)
        if old_env is None:
            os.environ.pop("ASTJAX_NUM_CPU_DEVICES", None)
        else:
            os.environ["ASTJAX_NUM_CPU_DEVICES"] = old_env
    return tmp, refs


@pytest.mark.parametrize("case", STATIC_CASES, ids=[c[0] for c in STATIC_CASES])
def test_static_pmap_modules_run_on_threads(static_generated, case):
    name, _, _, _, entry, _, _ = case
    tmp, refs = static_generated
    text = (tmp / f"gen_{name}.py").read_text()
    assert not re.search(r"^\s*(import astjax|from astjax)", text, re.M)
    assert "'static_argnums': (" in text and "sh.static_plan(" in text
    (out,) = run_module(tmp, name, entry=entry)
    assert_same(out, refs[name])


@pytest.mark.parametrize("case", STATIC_CASES, ids=[c[0] for c in STATIC_CASES])
def test_static_pmap_modules_run_under_mpiexec(static_generated, case):
    pytest.importorskip("mpi4py", reason="the MPI tests need mpi4py")
    name, _, _, _, entry, _, n = case
    tmp, refs = static_generated
    for out in run_module(tmp, name, n, entry=entry):
        assert_same(out, refs[name])


def test_static_pmap_module_holds_one_program_per_value(static_generated):
    tmp, _ = static_generated
    text = (tmp / "gen_spm_loss_grad.py").read_text()
    # 3 and 0.5: two per-device programs, keyed by type and value, each with its pullback
    assert "('static', (('int', 3),)): per_device_3_plan" in text
    assert "('static', (('float', 0.5),)): per_device_0_5_plan" in text
    assert text.count("'kind': 'pmap_vjp'") == 2
    text = (tmp / "gen_spow_loss_grad.py").read_text()
    assert "('static', (('int', 2), ('str', 'sum'))): powers_2_sum_plan" in text
    assert "('static', (('int', 1), ('str', 'max'))): powers_1_max_plan" in text


def test_static_pmap_module_refuses_another_static_value(static_generated):
    import pickle
    tmp, _ = static_generated
    w, _, xs = static_args("wk2")
    with open(tmp / "spm_jit.args", "rb") as fh:
        saved = fh.read()
    try:
        with open(tmp / "spm_jit.args", "wb") as fh:
            pickle.dump((w, 4, xs), fh)          # generated for k=3
        with pytest.raises(AssertionError, match=r"generated for the static argument "
                                                 r"values \(3,\), not \(4,\)"):
            run_module(tmp, "spm_jit", entry="jit_spm")
        with open(tmp / "spm_jit.args", "wb") as fh:
            pickle.dump((w, 3.0, xs), fh)        # 3.0 is another program than 3
        with pytest.raises(AssertionError, match=r"not \(3.0,\)"):
            run_module(tmp, "spm_jit", entry="jit_spm")
    finally:
        with open(tmp / "spm_jit.args", "wb") as fh:
            fh.write(saved)
