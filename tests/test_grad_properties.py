"""Property tests: random programs, their astjax gradients against finite differences.

Hypothesis writes small NumPy programs as Python source text (straight-line code,
``if``/``else`` on data, ``for`` loops with accumulation, ``while`` loops with
data-dependent trip counts) over arrays of shape (3, 4) and (4,) and a Python float.
Each program is written to a real ``.py`` file and imported (astjax reads source),
then ``grad`` with respect to every argument is compared with central differences.

Programs are kept numerically tame: products always have one bounded factor (tanh,
sin, cos, a constant), so values grow at most linearly with program length.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import astjax
from conftest import check_grad, load_source_module

SHAPES = {"x": (3, 4), "v": (4,), "s": ()}

# unary ops: (template, shape function)
UNARY = [
    "np.tanh({a})",
    "np.sin({a})",
    "np.cos({a})",
    "np.exp(np.tanh({a}))",
    "({a} * 0.5)",
    "(-{a})",
    "({a} * np.tanh({a}))",
    "(2.0 - np.sin({a}))",
    "np.sqrt({a} * {a} + 1.0)",
]
# binary ops on broadcast-compatible operands
BINARY = [
    "({a} + {b})",
    "({a} - {b})",
    "({a} * np.tanh({b}))",
    "(np.sin({a}) * {b})",
    "(np.tanh({a}) * np.cos({b}))",
    "({a} / (1.5 + np.sin({b})))",
    "({a} * 0.7 + {b} * 1.3)",
]
# reductions: (template, input shape, output shape)
REDUCTIONS = [
    ("np.mean({a})", (3, 4), ()),
    ("np.mean({a}, axis=0)", (3, 4), (4,)),
    ("np.mean({a}, axis=1, keepdims=True)", (3, 4), (3, 1)),
    ("np.sum({a}, axis=1) * 0.25", (3, 4), (3,)),
    ("np.max({a}, axis=0)", (3, 4), (4,)),
    ("np.mean({a})", (4,), ()),
    ("np.sum({a} * {a}) * 0.1", (4,), ()),
    ("({a} @ np.tanh({a}).T)[0] * 0.3", (3, 4), (3,)),
]


def broadcast_shape(a, b):
    return tuple(np.broadcast_shapes(a, b))


def compatible(a, b):
    try:
        np.broadcast_shapes(a, b)
        return True
    except ValueError:
        return False


class ProgramBuilder:
    """Accumulates source lines and the shapes of the variables defined so far."""

    def __init__(self, draw):
        self.draw = draw
        self.lines: list[str] = []
        self.shapes = dict(SHAPES)
        self.counter = 0

    def fresh(self):
        self.counter += 1
        return f"t{self.counter}"

    def pick(self, shape=None):
        names = sorted(n for n, s in self.shapes.items() if shape is None or s == shape)
        return self.draw(st.sampled_from(names))

    def unary(self, a):
        return self.draw(st.sampled_from(UNARY)).format(a=a)

    def expression(self):
        """(source, shape) of a random expression over defined variables."""
        kind = self.draw(st.sampled_from(["unary", "binary", "binary", "reduce"]))
        if kind == "unary":
            a = self.pick()
            return self.unary(a), self.shapes[a]
        if kind == "binary":
            a = self.pick()
            others = sorted(n for n, s in self.shapes.items() if compatible(s, self.shapes[a]))
            b = self.draw(st.sampled_from(others))
            text = self.draw(st.sampled_from(BINARY)).format(a=a, b=b)
            return text, broadcast_shape(self.shapes[a], self.shapes[b])
        options = [(t, i, o) for t, i, o in REDUCTIONS
                   if any(s == i for s in self.shapes.values())]
        template, ishape, oshape = self.draw(st.sampled_from(options))
        return template.format(a=self.pick(ishape)), oshape

    def assign(self, indent="    "):
        text, shape = self.expression()
        name = self.fresh()
        self.lines.append(f"{indent}{name} = {text}")
        self.shapes[name] = shape
        return name

    def branch(self):
        cond_var = self.pick()
        threshold = self.draw(st.sampled_from([-0.5, 0.0, 0.3]))
        a = self.pick()
        shape = self.shapes[a]
        name = self.fresh()
        self.lines.append(f"    if np.sum({cond_var}) > {threshold}:")
        self.lines.append(f"        {name} = {self.unary(a)}")
        if self.draw(st.booleans()):
            self.lines.append("    else:")
            self.lines.append(f"        {name} = {self.unary(a)}")
            self.shapes[name] = shape
        else:
            # no else: the variable keeps a value from before the if
            self.lines.insert(len(self.lines) - 2, f"    {name} = {a} * 1.0")
            self.shapes[name] = shape

    def for_loop(self):
        a = self.pick()
        shape = self.shapes[a]
        acc = self.fresh()
        n = self.draw(st.integers(0, 3))
        self.lines.append(f"    {acc} = {a} * 0.5")
        self.lines.append(f"    for i in range({n}):")
        others = sorted(k for k, s in self.shapes.items()
                        if compatible(s, shape) and broadcast_shape(s, shape) == shape)
        b = self.draw(st.sampled_from(others))
        body = self.draw(st.sampled_from([
            "{acc} = np.tanh({acc}) * 0.9 + {b} * 0.5",
            "{acc} = {acc} + np.sin({b} + i)",
            "{acc} = {acc} * 0.5 + np.tanh({b}) * {acc}",
        ]))
        self.lines.append("        " + body.format(acc=acc, b=b))
        extra = self.draw(st.sampled_from(["none", "halve", "break", "continue"]))
        if extra == "halve":
            self.lines.append(f"        if np.sum({acc}) > 1.0:")
            self.lines.append(f"            {acc} = {acc} * 0.5")
        elif extra == "break":
            self.lines.append(f"        if np.max({acc}) > 0.8:")
            self.lines.append("            break")
        elif extra == "continue":
            self.lines.append(f"        if np.min({acc}) < -0.7:")
            self.lines.append("            continue")
            self.lines.append(f"        {acc} = {acc} - 0.1 * np.sin({acc})")
        self.shapes[acc] = shape

    def for_rows(self):
        acc = self.fresh()
        self.lines.append(f"    {acc} = v * 0.0")
        self.lines.append("    for row in x:")
        if self.draw(st.booleans()):
            self.lines.append(f"        {acc} = np.tanh({acc} + row * 0.5)")
        else:
            self.lines.append("        if np.sum(row) > 0.0:")
            self.lines.append(f"            {acc} = np.tanh({acc} + row * 0.5)")
            self.lines.append("        else:")
            self.lines.append(f"            {acc} = {acc} * np.cos(row)")
        self.shapes[acc] = (4,)

    def elif_chain(self):
        a = self.pick()
        c = self.pick()
        name = self.fresh()
        self.lines.append(f"    if np.mean({c}) > 0.5:")
        self.lines.append(f"        {name} = {self.unary(a)}")
        self.lines.append(f"    elif np.mean({c}) > -0.5:")
        self.lines.append(f"        {name} = {self.unary(a)}")
        self.lines.append("    else:")
        self.lines.append(f"        {name} = {self.unary(a)}")
        self.shapes[name] = self.shapes[a]

    def while_loop(self):
        a = self.pick()
        acc = self.fresh()
        self.lines.append(f"    {acc} = {a} * 2.0")
        self.lines.append(f"    while np.sum({acc} * {acc}) > 1.0:")
        self.lines.append(f"        {acc} = {acc} * 0.6")
        self.shapes[acc] = self.shapes[a]


@st.composite
def programs(draw, control=True):
    """Source text of ``def f(x, v, s)`` returning a scalar."""
    b = ProgramBuilder(draw)
    kinds = ["assign", "assign", "assign"]
    if control:
        kinds += ["branch", "elif", "for", "rows", "while"]
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(kinds))
        if kind == "assign":
            b.assign()
        elif kind == "branch":
            b.branch()
        elif kind == "elif":
            b.elif_chain()
        elif kind == "for":
            b.for_loop()
        elif kind == "rows":
            b.for_rows()
        else:
            b.while_loop()
    # the result mixes the last value with a random earlier one
    last = f"t{b.counter}"
    other = b.pick()
    body = "\n".join(b.lines)
    return (
        "import numpy as np\n\n\n"
        "def f(x, v, s):\n"
        f"{body}\n"
        f"    return np.sum(np.sin({last}) + {last} * 0.1) + np.sum(np.tanh({other}))\n"
    )


@pytest.fixture(scope="module")
def program_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("astjax_programs")


def _inputs(seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((3, 4)), rng.standard_normal(4), float(rng.uniform(-1.0, 1.0))


def _check(program_dir, source, seed):
    module = load_source_module(source, program_dir)
    args = _inputs(seed)
    try:
        v, _ = astjax.value_and_grad(module.f, argnums=(0, 1, 2))(*args)
        np.testing.assert_allclose(v, module.f(*args), rtol=1e-10)
        check_grad(module.f, args, argnums=(0, 1, 2), rtol=1e-5, atol=1e-6)
    except Exception as exc:  # show the program that failed
        raise AssertionError(f"{type(exc).__name__}: {exc}\nprogram:\n{source}") from exc


SETTINGS = settings(max_examples=150, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])


@SETTINGS
@given(source=programs(control=False), seed=st.integers(0, 2**16))
def test_straight_line_programs(program_dir, source, seed):
    _check(program_dir, source, seed)


@SETTINGS
@given(source=programs(control=True), seed=st.integers(0, 2**16))
def test_programs_with_control_flow(program_dir, source, seed):
    _check(program_dir, source, seed)


@settings(max_examples=20, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**16), n=st.integers(0, 4))
def test_loop_accumulation_matches_closed_form(program_dir, seed, n):
    """Sum over a loop of tanh(x * k): grad is sum_k k (1 - tanh(x k)^2), any trip count."""
    source = (
        "import numpy as np\n\n\n"
        "def f(x, n):\n"
        "    total = 0.0\n"
        "    for k in range(n):\n"
        "        total = total + np.sum(np.tanh(x * k))\n"
        "    return total + np.sum(x * 0.0)\n"
    )
    module = load_source_module(source, program_dir)
    x = np.random.default_rng(seed).standard_normal((3, 4))
    g = astjax.grad(module.f)(x, n)
    expected = sum(k * (1 - np.tanh(x * k) ** 2) for k in range(n)) + np.zeros_like(x)
    np.testing.assert_allclose(g, expected, rtol=1e-10, atol=1e-12)
