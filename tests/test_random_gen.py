"""``astjax gen`` of functions that draw random numbers: the module it writes runs where
astjax cannot be imported (its copy of astjax.random is NumPy only) and gives the same
bits as astjax."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

import astjax
from astjax import random as jr
from programs import random_targets as targets
from test_cli import assert_trees_equal, run_cli, run_without_astjax

T = str(Path(targets.__file__).resolve())

# (module, FUNC, --transform, --args, entry point)
CASES = [
    ("r_vmap", "noisy", "vmap(in_axes=(0, None))", "u32[3,2], f32[4]", "vmap_noisy"),
    ("r_grad", "reparam_loss", "grad(argnums=(0, 1))", "f64[3], f64[3], u32[2]",
     "grad_reparam_loss"),
    ("r_dropout", "dropout", "vmap(grad(), in_axes=(None, None, 0))",
     "f64[5,2], f64[4,5], u32[3,2]", "vmap_grad_dropout"),
    ("r_jit", "many", "jit", "u32[2]", "jit_many"),
]


def test_generated_modules_draw_the_same_numbers(tmp_path):
    rng = np.random.default_rng(0)
    keys = jr.split(jr.PRNGKey(5), 3)
    mu, log_sigma = rng.standard_normal(3), rng.standard_normal(3) * 0.3
    w, x = rng.standard_normal((5, 2)), rng.standard_normal((4, 5))
    calls = {
        "r_vmap": (keys, np.linspace(0, 1, 4).astype(np.float32)),
        "r_grad": (mu, log_sigma, jr.PRNGKey(1)),
        "r_dropout": (w, x, keys),
        "r_jit": (jr.PRNGKey(9),),
    }
    want = {
        "r_vmap": astjax.vmap(targets.noisy, in_axes=(0, None))(*calls["r_vmap"]),
        "r_grad": astjax.grad(targets.reparam_loss, argnums=(0, 1))(*calls["r_grad"]),
        "r_dropout": astjax.vmap(astjax.grad(targets.dropout), in_axes=(None, None, 0))(
            *calls["r_dropout"]),
        "r_jit": astjax.jit(targets.many)(*calls["r_jit"]),
    }
    files = []
    for module, func, spec, args, entry in CASES:
        out = tmp_path / f"{module}.py"
        proc = run_cli("gen", f"{T}:{func}", "--transform", spec, "--args", args,
                       "-o", str(out))
        assert proc.returncode == 0, proc.stderr
        text = out.read_text()
        assert not re.search(r"^\s*(import|from)\s+astjax\b", text, re.M), module
        assert "jr = _module(" in text and "def threefry2x32(" in text
        files.append(out)
    entries = {m: e for m, _, _, _, e in CASES}
    code = f"""
        import importlib
        results = {{}}
        for module, entry in {entries!r}.items():
            fn = getattr(importlib.import_module(module), entry)
            results[module] = fn(*inputs[module])
    """
    got = run_without_astjax(tmp_path, files, calls, code)
    for module in entries:
        assert_trees_equal(got[module], want[module])
        for a, b in zip(astjax.tree_util.tree_leaves(got[module]),
                        astjax.tree_util.tree_leaves(want[module])):
            if np.asarray(b).dtype.kind in "iub":
                np.testing.assert_array_equal(a, b)
    # the same bits as the NumPy sampler itself, not merely as astjax's transform
    np.testing.assert_array_equal(got["r_vmap"][1], targets.noisy(keys[1], calls["r_vmap"][1]))
