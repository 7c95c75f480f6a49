"""The ``astjax`` command line: ``show``, ``gen``, ``demo`` (``astjax/cli.py``).

Most tests run ``python -m astjax ...`` in a subprocess on the user programs in
``tests/programs/cli_targets.py``.  Modules written by ``astjax gen`` are run in a
second subprocess that can import NumPy but not astjax (``python -S`` with a path
holding only the generated file and a link to NumPy), and their results are compared
with astjax's own, computed here.
"""
from __future__ import annotations

import os
import pickle
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import astjax
from astjax import cli
from astjax.standalone import (CopiedModule, StandaloneError, copy_runtime, literal_text)
from astjax.tree_util import tree_leaves, tree_structure
from programs import cli_targets as targets

REPO = Path(__file__).resolve().parent.parent
TARGETS = Path(targets.__file__).resolve()
T = str(TARGETS)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
HAS_JIT = callable(getattr(astjax, "jit", None))


def run_cli(*args, cwd=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep)
    env.pop("NO_COLOR", None)
    return subprocess.run([sys.executable, "-m", "astjax", *args], capture_output=True,
                          text=True, cwd=cwd or REPO, env=env, timeout=300)


def line_of(text: str) -> int:
    """The line number of ``text`` in cli_targets.py."""
    for i, line in enumerate(TARGETS.read_text().splitlines(), 1):
        if text in line:
            return i
    raise AssertionError(text)


def assert_clean_error(proc, *needles):
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout == ""
    for needle in needles:
        assert needle in proc.stderr, (needle, proc.stderr)


# --------------------------------------------------------------------------- --help

def test_top_level_help():
    proc = run_cli("--help")
    assert proc.returncode == 0
    for word in ("show", "gen", "demo"):
        assert word in proc.stdout


@pytest.mark.parametrize("command", ["show", "gen", "demo"])
def test_subcommand_help(command):
    proc = run_cli(command, "--help")
    assert proc.returncode == 0, proc.stderr
    assert f"astjax {command}" in proc.stdout
    if command != "demo":
        for word in ("--transform", "--args", "FILE.py:FUNC", "value_and_grad", "in_axes",
                     "f32[128,784]", "jit"):
            assert word in proc.stdout, word
        assert ("astjax.jit(...) is applied" if HAS_JIT else "no jit yet") in proc.stdout
    if command == "show":
        assert "--color" in proc.stdout
    if command == "gen":
        assert "--output" in proc.stdout and "--max-const-size" in proc.stdout


def test_console_script_if_installed():
    exe = shutil.which("astjax")
    if exe is None:
        pytest.skip("the astjax console script is not on PATH")
    proc = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "show" in proc.stdout


def test_demo_unchanged():
    proc = run_cli("demo")
    assert proc.returncode == 0, proc.stderr
    assert "def grad_loss(params, batch):" in proc.stdout
    assert "going down." in proc.stdout


# --------------------------------------------------------------------------- show

MLP_ARGS = "[(f32[4,5], f32[5]), (f32[5,3], f32[3])], (f32[6,4], f32[6,3])"


def test_show_mlp_grad():
    proc = run_cli("show", f"{T}:loss", "--transform", "grad(argnums=0)", "--args", MLP_ARGS)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    from astjax.source_view import SIMPLIFIED_NOTE
    assert out.startswith(SIMPLIFIED_NOTE + "\ndef grad_loss(params, batch):")
    assert "\x1b[" not in out                      # not a terminal: no colours
    assert f"# cli_targets.py:{line_of('def loss(params, batch):')}" in out
    assert f"# cli_targets.py:{line_of('outputs = np.dot(inputs, W) + b')}  " \
           "outputs = np.dot(inputs, W) + b" in out
    compile(out, "<show>", "exec")


def test_show_colors():
    args = (f"{T}:loop_if", "-t", "value_and_grad")
    plain = run_cli("show", *args, "--color", "never")
    color = run_cli("show", *args, "--color", "always")
    assert plain.returncode == color.returncode == 0
    assert "\x1b[" not in plain.stdout
    assert "\x1b[1;35mdef\x1b[0m" in color.stdout          # a keyword
    assert re.search(r"\x1b\[33m# cli_targets.py:\d+", color.stdout)   # a location
    assert ANSI.sub("", color.stdout) == plain.stdout
    assert "def value_and_grad_loop_if(x, n):" in plain.stdout
    assert f"# cli_targets.py:{line_of('if np.sum(y) > 0:')}" in plain.stdout


def test_show_core_form_and_vmap_grad():
    core = run_cli("show", f"{T}:loop_if")
    assert core.returncode == 0, core.stderr
    assert "core form of loop_if" in core.stdout and "for i in range(" in core.stdout
    vg = run_cli("show", f"{T}:per_example", "-t", "vmap(grad(), in_axes=(None, 0))")
    assert vg.returncode == 0, vg.stderr
    assert "def vmap_per_example(w, x, batch_size):" in vg.stdout
    assert "rb.select(" in vg.stdout                 # the batched if


def test_show_jit():
    proc = run_cli("show", f"{T}:constants", "-t", "jit(grad)")
    assert proc.returncode == 0, proc.stderr
    if HAS_JIT:
        assert "def jit_constants(x):" in proc.stdout and proc.stderr == ""
    else:           # jit(...) is a no-op until astjax has one
        assert "def grad_constants(x):" in proc.stdout
        assert "no jit yet" in proc.stderr


# ------------------------------------------------------------------------------ gen

def _numpy_only_path(tmp: Path) -> Path:
    """A directory where only NumPy can be imported from (links to the package)."""
    lib = tmp / "numpy_only"
    lib.mkdir()
    site = Path(np.__file__).resolve().parent.parent
    for name in ("numpy", "numpy.libs"):
        if (site / name).exists():
            try:
                os.symlink(site / name, lib / name)
            except OSError:
                pytest.skip("cannot make symbolic links here")
    return lib


def run_without_astjax(tmp: Path, modules: list[Path], inputs, code: str):
    """Run ``code`` where ``modules`` and NumPy can be imported but astjax cannot.

    ``code`` finds ``inputs`` (pickled) in ``inputs`` and leaves what it computes in
    ``results``, which is returned (pickled back).
    """
    run_dir = tmp / "run"
    run_dir.mkdir()
    for m in modules:
        shutil.copy(m, run_dir / m.name)
    with open(run_dir / "inputs.pkl", "wb") as fh:
        pickle.dump(inputs, fh)
    lib = _numpy_only_path(tmp)
    prelude = textwrap.dedent("""
        import pickle, sys
        try:
            import astjax
        except ImportError:
            pass
        else:
            sys.exit("astjax is importable: " + astjax.__file__)
        with open("inputs.pkl", "rb") as fh:
            inputs = pickle.load(fh)
    """)
    epilogue = "\nwith open('outputs.pkl', 'wb') as fh:\n    pickle.dump(results, fh)\n"
    env = {"PYTHONPATH": os.pathsep.join([str(run_dir), str(lib)]),
           "PATH": os.environ.get("PATH", ""), "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run([sys.executable, "-S", "-c",
                           prelude + textwrap.dedent(code) + epilogue],
                          cwd=run_dir, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    with open(run_dir / "outputs.pkl", "rb") as fh:
        return pickle.load(fh)


def assert_trees_equal(got, want):
    assert tree_structure(got) == tree_structure(want)
    for a, b in zip(tree_leaves(got), tree_leaves(want)):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape
        # same code, same NumPy; BLAS may still round float32 differently with the
        # alignment of its operands
        tol = 1e-5 if a.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


# (module, FUNC, --transform, --args or None, entry point)
GEN_CASES = [
    ("g_mlp", "loss", "grad(argnums=0)", MLP_ARGS, "grad_loss"),
    ("g_loop", "loop_if", "value_and_grad", None, "value_and_grad_loop_if"),
    ("g_consts", "constants", "jit(grad())", None,
     "jit_grad_constants" if HAS_JIT else "grad_constants"),
    ("g_static", "loop_if", "jit(value_and_grad, static_argnums=1)", "f64[3], 3",
     "jit_value_and_grad_loop_if" if HAS_JIT else "value_and_grad_loop_if"),
    ("g_captured", "captured", "grad", None, "grad_captured"),
    ("g_per_example", "per_example", "vmap(grad(argnums=0), in_axes=(None, 0))", None,
     "vmap_grad_per_example"),
    ("g_vmap", "loss_xy", "vmap(in_axes=(None, 0, 0))", None, "vmap_loss_xy"),
    ("g_apply", "apply", "grad(argnums=1)", "relu, f64[3]", "grad_apply"),
    ("g_poly", "poly", "jit", None, "jit_poly" if HAS_JIT else "poly"),
]


def jit(fun, **kwargs):
    return astjax.jit(fun, **kwargs) if HAS_JIT else fun


def test_gen_standalone_modules_match_astjax(tmp_path):
    rng = np.random.default_rng(0)
    params = [(rng.standard_normal((4, 5)).astype(np.float32),
               rng.standard_normal(5).astype(np.float32)),
              (rng.standard_normal((5, 3)).astype(np.float32),
               rng.standard_normal(3).astype(np.float32))]
    x = rng.standard_normal((6, 4)).astype(np.float32)
    y = rng.standard_normal((6, 3)).astype(np.float32)
    v = rng.standard_normal(3)
    xs = rng.standard_normal((7, 3))
    calls = {
        "g_mlp": (params, (x, y)),
        "g_loop": (v, 4),
        # big enough for jit's buffer reuse (astjax/passes/buffers.py) to take place
        "g_consts": (rng.standard_normal((3000, 2)),),
        "g_static": (v,) if HAS_JIT else (v, 3),
        "g_captured": (v,),
        "g_per_example": (v, xs),
        "g_vmap": (params, x, y),
        "g_apply": (None, v),       # the function argument was inlined: any value works
        # large enough for the fused group to run in row blocks on threads
        "g_poly": (rng.standard_normal((1000, 1100)).astype(np.float32),),
    }
    want = {
        "g_mlp": astjax.grad(targets.loss)(*calls["g_mlp"]),
        "g_loop": astjax.value_and_grad(targets.loop_if)(*calls["g_loop"]),
        "g_consts": jit(astjax.grad(targets.constants))(*calls["g_consts"]),
        "g_static": jit(astjax.value_and_grad(targets.loop_if), static_argnums=1)(v, 3),
        "g_captured": astjax.grad(targets.captured)(*calls["g_captured"]),
        "g_per_example": astjax.vmap(astjax.grad(targets.per_example),
                                     in_axes=(None, 0))(*calls["g_per_example"]),
        "g_vmap": astjax.vmap(targets.loss_xy, in_axes=(None, 0, 0))(*calls["g_vmap"]),
        "g_apply": astjax.grad(targets.apply, argnums=1)(targets.relu, v),
        "g_poly": targets.poly(*calls["g_poly"]),
    }
    files = []
    for module, func, spec, args, entry in GEN_CASES:
        out = tmp_path / f"{module}.py"
        cmd = ["gen", f"{T}:{func}", "--transform", spec, "-o", str(out)]
        if args:
            cmd += ["--args", args]
        proc = run_cli(*cmd)
        assert proc.returncode == 0, proc.stderr
        assert f"wrote {out}" in proc.stderr
        text = out.read_text()
        assert not re.search(r"^\s*(import|from)\s+astjax\b", text, re.M), module
        assert f"__all__ = [{entry!r}]" in text
        assert re.search(rf"^(def )?{entry}\b", text, re.M), (module, entry)
        assert "# cli_targets.py:" in text
        files.append(out)
    consts = (tmp_path / "g_consts.py").read_text()
    assert "SCALE = 0.5" in consts and "OFFSET = (1.0, -2.0)" in consts
    assert "WEIGHTS = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], dtype=np.float32)" \
        in consts
    assert "w = np.array([0.5, 1.0, -1.5], dtype=np.float64)" in \
        (tmp_path / "g_captured.py").read_text()
    # the runtime is copied in part: what grad of the MLP needs, not the lax helpers
    mlp = (tmp_path / "g_mlp.py").read_text()
    assert "def instantiate(" in mlp and "def tree_stack(" not in mlp
    if HAS_JIT:
        assert "def run_fused(" in (tmp_path / "g_poly.py").read_text()

    entries = {m: e for m, _, _, _, e in GEN_CASES}
    code = f"""
        import importlib
        results = {{}}
        for module, entry in {entries!r}.items():
            fn = getattr(importlib.import_module(module), entry)
            results[module] = fn(*inputs[module])
    """
    got = run_without_astjax(tmp_path, files, calls, code)
    for module in want:
        assert_trees_equal(got[module], want[module])


def test_gen_to_stdout_compiles():
    proc = run_cli("gen", f"{T}:loss", "-t", "value_and_grad", "--args", MLP_ARGS)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith('"""value_and_grad(loss) from cli_targets.py')
    assert "__all__ = ['value_and_grad_loss']" in proc.stdout
    compile(proc.stdout, "<gen>", "exec")


def test_gen_name_option(tmp_path):
    out = tmp_path / "named.py"
    proc = run_cli("gen", f"{T}:per_example", "-t", "vmap(in_axes=(None, 0))",
                   "--name", "batched", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "__all__ = ['batched']" in text and "def batched(w, x):" in text


# --------------------------------------------------------------------------- errors

ERROR_CASES = {
    "missing file": (["show", "no/such/file.py:loss", "-t", "grad"],
                     ["no such file: no/such/file.py", "hint:"]),
    "no function part": (["show", T, "-t", "grad"], ["expected FILE.py:FUNC", "hint:"]),
    "function not found": (["show", f"{T}:lossy", "-t", "grad"],
                           ["has no function 'lossy'", "did you mean 'loss'",
                            "predict, loss, loss_xy, loop_if"]),
    "not a function": (["show", f"{T}:SCALE", "-t", "grad"],
                       ["SCALE in cli_targets.py is a float, not a function"]),
    "unknown transform": (["show", f"{T}:loss", "-t", "vmap(gard(), in_axes=0)"],
                          ["bad --transform: unknown transformation 'gard'",
                           "    vmap(gard(), in_axes=0)\n         ^^^^\n", "hint:"]),
    "transform syntax": (["show", f"{T}:loss", "-t", "grad(argnums=0"],
                         ["bad --transform: this is not a Python expression",
                          "    grad(argnums=0\n", "^"]),
    "transform keyword": (["show", f"{T}:loss", "-t", "grad(argnum=0)"],
                          ["grad has no parameter 'argnum'", "did you mean 'argnums'",
                           "    grad(argnum=0)\n         ^^^^^^^^\n"]),
    "transform value": (["show", f"{T}:loss", "-t", "grad(argnums=n)"],
                        ["the value of argnums must be a Python literal",
                         "    grad(argnums=n)\n                 ^\n"]),
    "args dtype": (["show", f"{T}:loss", "-t", "grad", "--args", "f32[3], q32[]"],
                   ["bad --args: unknown dtype 'q32'", "    f32[3], q32[]\n            ^^^\n"]),
    "args syntax": (["show", f"{T}:loss", "-t", "grad", "--args", "f32[3], (f32[2]"],
                    ["bad --args: this is not a list of argument specs",
                     "    f32[3], (f32[2]\n            ^\n"]),
    "args dimension": (["show", f"{T}:loss", "-t", "grad", "--args", "f32[3, x], f32[]"],
                       ["a dimension must be a non-negative integer",
                        "    f32[3, x], f32[]\n           ^\n"]),
    "args count": (["show", f"{T}:loss", "-t", "grad", "--args", "f32[3]"],
                   ["--args gives 1 argument(s) for loss(params, batch)"]),
    "args unknown name": (["show", f"{T}:apply", "-t", "grad", "--args", "relux, f64[3]"],
                          ["unknown name 'relux'"]),
    "astjax TransformError": (["show", f"{T}:apply", "-t", "grad(argnums=1)"],
                              ["cannot differentiate through fn()",
                               f"cli_targets.py\", line {line_of('return np.sum(fn(x) * x)')}",
                               '--args "np.tanh, f64[3]"']),
    "astjax argument error": (["show", f"{T}:loss", "-t", "grad(argnums=3)"],
                              ["argnums=3 is out of range for loss"]),
    "large constant": (["gen", f"{T}:uses_big", "-t", "grad"],
                       ["cannot write 'BIG' (from cli_targets.py)", "(200, 200)",
                        "hint: pass it to the function as an argument, or raise "
                        "--max-const-size"]),
    "small max-const-size": (["gen", f"{T}:constants", "-t", "grad", "--max-const-size", "5"],
                             ["cannot write 'WEIGHTS'", "6 elements"]),
    "output directory": (["gen", f"{T}:loss", "-t", "grad", "-o", "/no/such/dir/out.py"],
                         ["cannot write /no/such/dir/out.py"]),
}

if HAS_JIT:
    ERROR_CASES["jit static arguments without --args"] = (
        ["show", f"{T}:loop_if", "-t", "jit(grad, static_argnums=1)"],
        ["builds the values of static arguments into the code", "--args"])


@pytest.mark.parametrize("case", list(ERROR_CASES))
def test_errors_are_clear(case):
    args, needles = ERROR_CASES[case]
    assert_clean_error(run_cli(*args), *needles)


def test_vmap_inside_another_transformation_is_shown():
    """vmap inside jit: show prints the optimized batched code."""
    proc = run_cli("show", f"{T}:per_example", "-t", "jit(vmap(in_axes=(None, 0)))")
    assert proc.returncode == 0, proc.stderr
    assert "def jit_" in proc.stdout and "rb.from_last" in proc.stdout


def test_gen_requires_a_transform():
    proc = run_cli("gen", f"{T}:loss")
    assert proc.returncode == 2
    assert "--transform" in proc.stderr


def test_import_error_in_user_file(tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("import numpy as np\n\nX = 1 / 0\n\ndef f(x):\n    return x\n")
    assert_clean_error(run_cli("show", f"{bad}:f", "-t", "grad"),
                       "importing broken.py raised ZeroDivisionError", "line 3")


# ----------------------------------------------------------- in-process unit tests

def test_parse_transform():
    steps = cli.parse_transform("vmap(grad(argnums=0), in_axes=(None, 0))", "loss")
    assert [(s.name, s.kwargs) for s in steps] == [("vmap", {"in_axes": (None, 0)}),
                                                  ("grad", {"argnums": 0})]
    assert cli.describe(steps, "loss") == "vmap(grad(loss, argnums=0), in_axes=(None, 0))"
    assert [s.name for s in cli.parse_transform("grad", "f")] == ["grad"]
    steps = cli.parse_transform("jit(value_and_grad(loss, 1, True))", "loss")
    assert [(s.name, s.kwargs) for s in steps] == [
        ("jit", {}), ("value_and_grad", {"argnums": 1, "has_aux": True})]
    with pytest.raises(cli.CliError, match="unknown transformation 'hesian'.*'hessian'"):
        cli.parse_transform("hesian", "f")
    assert [s.name for s in cli.parse_transform("jvp(grad)", "f")] == ["jvp", "grad"]
    with pytest.raises(cli.CliError, match="jvp takes the function's arguments"):
        cli.parse_transform("grad(jvp)", "f")


def test_parse_args_spec():
    out = cli.parse_args_spec("f32[128,784], (f32[784,512], f32[]), [i64[3]], "
                              "{'w': f64[2]}, 3, None, relu, np.tanh",
                              vars(targets), T)
    assert out[0].shape == (128, 784) and out[0].dtype == np.float32
    assert out[1][0].shape == (784, 512) and out[1][1].shape == ()
    assert isinstance(out[2], list) and out[2][0].dtype == np.int64
    assert out[3]["w"].dtype == np.float64
    assert out[4:6] == [3, None]
    assert out[6] is targets.relu and out[7] is np.tanh
    assert not np.any(out[0])


def test_highlight_keeps_text():
    src = TARGETS.read_text()
    colored = cli.highlight(src)
    assert ANSI.sub("", colored) == src
    assert "\x1b[32m" in colored and "\x1b[1;34mpredict\x1b[0m" in colored


@pytest.mark.parametrize("value", [
    0.5, -3, True, None, "text", (1.0, (2, "a")), [1, 2.5], {"a": 1, "b": (2.0,)},
    np.float32(0.1), np.int64(7), np.array(2.5),
    np.array([[0.1, np.nan], [np.inf, -np.inf]], dtype=np.float32),
    np.array([1 + 2j, 3 - 4j]), np.array([True, False]), np.arange(6, dtype=np.int16),
    np.zeros((0, 3)), np.linspace(0, 1, 7), np.float64, np.tanh,
])
def test_literal_text_round_trips(value):
    text, imports = literal_text(value, 1000)
    ns = {"np": np}
    for imp in imports:
        exec(imp, ns)
    back = eval(text, ns)
    if isinstance(value, np.ndarray):
        assert back.dtype == value.dtype and back.shape == value.shape
        np.testing.assert_array_equal(back, value)
    elif isinstance(value, np.generic):
        assert type(back) is type(value) and back == value
    else:
        assert back == value or back is value


def test_literal_text_refuses():
    from astjax.standalone import _NotLiteral
    with pytest.raises(_NotLiteral, match="1000"):
        literal_text(np.zeros(1001), 1000)
    with pytest.raises(_NotLiteral, match="object of type"):
        literal_text(object(), 1000)


def test_copy_runtime_takes_only_what_is_used():
    mods = copy_runtime({("astjax.runtime", "acc")})
    assert [m.alias for m in mods] == ["rt"]
    (rt,) = mods
    assert isinstance(rt, CopiedModule)
    assert {"acc", "_rebuild_tuple", "_dataclass_like"} <= set(rt.names)
    assert "tree_stack" not in rt.names and "push" not in rt.names
    ns: dict = {}
    exec(rt.source, ns)
    assert ns["acc"]((1.0, None), (2.0, 3.0)) == (3.0, 3.0)
    # helpers that import other astjax modules get them copied too, imports rewritten
    mods = {m.alias: m for m in copy_runtime({("astjax.runtime", "tree_index")})}
    assert "_tree_util" in mods and "from astjax" not in mods["rt"].source
    assert "tree_map = _tree_util.tree_map" in mods["rt"].source
    with pytest.raises(StandaloneError, match="no top-level name"):
        copy_runtime({("astjax.runtime", "no_such_helper")})


# ------------------------------------------- every transformation, --raw, --version

@pytest.mark.parametrize("spec, expect", [
    ("jvp", "def jvp_per_example("), ("jvp(grad)", "def jvp_per_example("),
    ("vjp", "def per_example_bwd("), ("linearize", "def per_example_tangent"),
    ("jacfwd", "runs this jvp"), ("jacrev", "def per_example_bwd("),
    ("jacobian", "def "), ("hessian", "jvp of grad(per_example)"),
    ("value_and_grad", "def value_and_grad_per_example("),
    ("vmap(grad)", "def vmap_per_example(")])
def test_show_every_transformation(spec, expect):
    for extra in ((), ("--args", "f64[3], f64[3]")):
        proc = run_cli("show", f"{T}:per_example", "-t", spec, *extra)
        assert proc.returncode == 0, (spec, proc.stderr)
        assert expect in proc.stdout, proc.stdout
        compile(proc.stdout, "<show>", "exec")


def test_show_raw_is_the_code_that_runs():
    import astjax
    raw = run_cli("show", f"{T}:per_example", "-t", "grad", "--args", "f64[3], f64[3]",
                  "--raw")
    assert raw.returncode == 0, raw.stderr
    assert raw.stdout == astjax.make_source(astjax.grad(targets.per_example),
                                            simplify=False)(np.zeros(3), np.zeros(3))


def test_gen_refuses_what_it_cannot_write():
    assert_clean_error(run_cli("gen", f"{T}:loop_if", "-t", "jvp"),
                       "astjax gen writes standalone modules for grad", "astjax show")


@pytest.mark.parametrize("argv", [["--version"], ["-m", "astjax", "--version"]])
def test_version(argv):
    import astjax
    if argv[0] == "-m":
        proc = subprocess.run([sys.executable, *argv], capture_output=True, text=True,
                              cwd=REPO, timeout=120)
    else:
        proc = run_cli(*argv)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"astjax {astjax.__version__}"


def test_help_says_what_the_demo_is():
    proc = run_cli("--help")
    assert "seeds" not in proc.stdout
    assert "784-512-512-10" in proc.stdout and "MLP" in proc.stdout
