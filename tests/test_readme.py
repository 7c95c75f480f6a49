"""The README's examples run as pasted, and what it tells a newcomer stays true.

Python blocks preceded by ``<!-- runs as a test: tests/test_readme.py -->`` are saved
under the file name their first comment gives (``# example.py``) and run in a fresh
interpreter, as a reader would run them.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
MARK = "<!-- runs as a test: tests/test_readme.py -->"


def _blocks():
    """``(marked, code)`` for every ```python block, in order."""
    out = []
    for m in re.finditer(r"^```python\n(.*?)^```", README, re.S | re.M):
        before = README[:m.start()].rstrip().splitlines()
        out.append((bool(before) and before[-1].strip() == MARK, m.group(1)))
    return out


RUNNABLE = [code for marked, code in _blocks() if marked]


def test_the_first_example_is_runnable():
    blocks = _blocks()
    assert blocks and blocks[0][0], "the README's first python block must run as pasted"
    assert len(RUNNABLE) >= 2


@pytest.mark.parametrize("code", RUNNABLE, ids=lambda c: c.split("\n", 1)[0])
def test_readme_block_runs(code, tmp_path):
    first = code.split("\n", 1)[0]
    m = re.match(r"#\s*(\w+\.py)", first)
    assert m, f"a runnable block starts with '# name.py': {first!r}"
    path = tmp_path / m.group(1)
    path.write_text(code, encoding="utf-8")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep)
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip(), "an example shows something"
    # what the comments in the block promise is what it prints
    for promised in re.findall(r"print\(.*\)\s+#\s*(\[.*\])\s*$", code, re.M):
        assert promised in proc.stdout, (promised, proc.stdout[:500])
    assert "def " in proc.stdout            # make_source printed generated code


def test_quick_start_makes_a_virtual_environment():
    quick = README[README.index("## Quick start"):README.index("## What works")]
    bash = re.findall(r"^```bash\n(.*?)^```", quick, re.S | re.M)
    assert bash and "python3 -m venv .venv" in bash[0] and ". .venv/bin/activate" in bash[0]
    assert "pip install . && python -m astjax demo" in bash[0]
    assert len(bash[0].strip().splitlines()) == 2


def test_no_jargon_a_newcomer_cannot_decode():
    from astjax import cli, demo
    texts = [README, Path(demo.__file__).read_text(encoding="utf-8"),
             cli.make_parser().format_help()]
    texts += [p.read_text(encoding="utf-8") for p in sorted((REPO / "examples").glob("*.py"))]
    for text in texts:
        assert "seeds'" not in text
    assert "784-512-512-10" in README and "JAX's README" in README


def _block_after(text):
    i = README.index(text)
    m = re.compile(r"^```python\n(.*?)^```", re.S | re.M).search(README, i)
    return m.group(1)


def test_how_it_works_shows_what_astjax_prints(tmp_path):
    """The core form and the gradient excerpt of "How it works" are today's output for
    the first example (``...`` stands for lines left out)."""
    (tmp_path / "example.py").write_text(RUNNABLE[0], encoding="utf-8")
    driver = ("import io, contextlib, json, astjax\n"
              "with contextlib.redirect_stdout(io.StringIO()):\n"
              "    import example\n"
              "print(json.dumps([astjax.make_source(example.loss)(),\n"
              "                  astjax.make_source(astjax.grad(example.loss))(\n"
              "                      example.params, example.batch)]))\n")
    (tmp_path / "driver.py").write_text(driver, encoding="utf-8")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep)
    proc = subprocess.run([sys.executable, "driver.py"], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    import json
    core, grad = json.loads(proc.stdout)
    assert _block_after("**3. Normalize**") == core
    lines = grad.splitlines()
    at = 0
    for line in _block_after("An excerpt of `make_source(grad(loss))").splitlines():
        if line.strip() == "...":
            continue
        assert line in lines[at:], (line, grad)
        at = lines.index(line, at) + 1
