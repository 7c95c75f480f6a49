"""The layering of astjax/, checked on the import graph (read with ast, not imported).

Three layers: the API modules (the public transformations), the applications above
them (the package itself, the command line, the demo), and everything below, which
the API builds on.  A module below never imports an API module (not even lazily,
inside a function): the frontend finds transformations in astjax/transform_table.py
and the shared machinery lives in astjax/binding.py and astjax/generation.py.  No
module reaches into another module's API for a ``_private`` helper.
"""
from __future__ import annotations

import ast
import os

import pytest

import astjax

ROOT = os.path.dirname(os.path.abspath(astjax.__file__))
API = {"astjax.api", "astjax.batch_api", "astjax.forward_api", "astjax.jit_api",
       # public transformations built on the ones above (they call grad, jvp, vmap)
       "astjax.custom_rules", "astjax.checkpointing", "astjax.sharding.mapping",
       # the sharding package's face
       "astjax.sharding"}
ABOVE = {"astjax", "astjax.__main__", "astjax.cli", "astjax.demo"}


def _modules():
    out = {}
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if not name.endswith(".py"):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, os.path.dirname(ROOT))[:-3].replace(os.sep, ".")
            if rel.endswith(".__init__"):
                rel = rel[: -len(".__init__")]
            out[rel] = path
    return out


MODULES = _modules()


def imports_of(path, modname):
    """(imported module, name or None, line) for every import in the file, lazy ones
    included; ``from astjax import api`` counts as importing ``astjax.api``."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), path)
    package = modname if path.endswith("__init__.py") else modname.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, None, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                if sub in MODULES:
                    found.append((sub, None, node.lineno))   # a submodule
                else:
                    found.append((base, a.name, node.lineno))
    return found


def _layer(modname):
    return "api" if modname in API else "above" if modname in ABOVE else "below"


def test_the_modules_are_found():
    assert {"astjax.api", "astjax.frontend.normalize", "astjax.transform_table",
            "astjax.generation", "astjax.binding"} <= set(MODULES)
    assert sum(_layer(m) == "below" for m in MODULES) > 30


@pytest.mark.parametrize("modname", sorted(m for m in MODULES if _layer(m) == "below"))
def test_below_the_api_never_imports_it(modname):
    bad = [(target, line) for target, _, line in imports_of(MODULES[modname], modname)
           if target in API or target in ABOVE]
    assert not bad, (f"{modname} imports {bad}: modules below the API use "
                     "astjax.transform_table, astjax.binding and astjax.generation")


def private_reaches(path, modname):
    """``from astjax.api import _x`` or ``api._x`` in the file: (module, name, line)."""
    bad = [(target, name, line) for target, name, line in imports_of(path, modname)
           if target in API and name is not None and name.startswith("_")
           and not name.startswith("__") and target != modname]
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), path)
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "astjax":
            aliases.update({a.asname or a.name: f"astjax.{a.name}" for a in node.names})
        elif isinstance(node, ast.Import):
            aliases.update({a.asname or a.name: a.name for a in node.names})
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                aliases.get(node.value.id) in API and node.attr.startswith("_") and \
                not node.attr.startswith("__") and aliases.get(node.value.id) != modname:
            bad.append((aliases[node.value.id], node.attr, node.lineno))
    return bad


@pytest.mark.parametrize("modname", sorted(MODULES))
def test_no_private_helper_crosses_modules(modname):
    """A helper shared between modules is public in the module that owns it."""
    bad = private_reaches(MODULES[modname], modname)
    assert not bad, f"{modname} reaches for private API helpers: {bad}"


def test_the_checker_sees_what_it_must():
    """The checks above would catch each form of the old imports (so they can fail)."""
    import tempfile
    text = ("from astjax.api import _check_callable\n"
            "def f():\n    from astjax import forward_api\n    return forward_api._x\n"
            "import astjax.jit_api\n")
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(text)
    try:
        got = imports_of(fh.name, "astjax.frontend.fake")
        private = private_reaches(fh.name, "astjax.frontend.fake")
    finally:
        os.unlink(fh.name)
    assert {(t, n) for t, n, _ in private} == {("astjax.api", "_check_callable"),
                                               ("astjax.forward_api", "_x")}
    targets = {(t, n) for t, n, _ in got}
    assert ("astjax.api", "_check_callable") in targets
    assert ("astjax.forward_api", None) in targets
    assert ("astjax.jit_api", None) in targets


def test_every_transformation_is_registered():
    from astjax import transform_table
    for name in ("grad", "value_and_grad", "vjp", "jvp", "linearize", "jacfwd", "jacrev",
                 "jacobian", "hessian", "vmap", "jit"):
        entry = transform_table.get(name)
        assert entry.function is getattr(astjax, name)
        assert transform_table.entry_of(getattr(astjax, name)) is entry
    assert {n for n in transform_table.names() if transform_table.get(n).inline} == {
        "grad", "value_and_grad", "vmap", "jit", "checkpoint"}
    assert transform_table.entry_of(len) is None and not transform_table.inlinable(len)
