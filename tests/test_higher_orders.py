"""Third and fourth derivatives through every rule, orders checked against each other.

For each function: ``grad`` applied 3 and 4 times, ``jvp`` nested 3 times, and the
mixed compositions ``jvp(grad(grad))``, ``grad(jvp(grad))`` and ``hessian(grad)``
must agree with each other and with central differences of the order below (which is
itself checked against differences of the order below it, down to ``f``).  The sweep
covers every smooth elementwise primitive of the registry and programs with sums of
terms that all change (the logistic sigmoid, ``(x*x + x)**2``), in-place updates,
containers, loops and branches -- where a lost term in a nested backward sweep shows.
"""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

import astjax
from astjax import primitives as P
from conftest import load_source_module

import astjax.core_prims  # noqa: F401

PROGRAMS = {
    "sigmoid": "1.0 / (1.0 + np.exp(-x))",
    "square_of_sum": "(x * x + x) ** 2",
    "tanh": "np.tanh(x)",
    "tanh_sin": "np.tanh(x) * x + np.sin(x)",
    "softplus": "np.log1p(np.exp(x))",
    "gauss": "x * np.sin(x) * np.exp(-x * x)",
    "quotient": "(x * x + 1.0) / (x + 2.0)",
}

BODIES = {
    "inplace": """
        y = np.ones(3) * x
        y[1:] += x * x
        y *= np.sin(x)
        return np.sum(y ** 2)""",
    "setitem": """
        y = np.zeros(3)
        y[0] = x * x
        y[1] = np.sin(x)
        y[2] = y[0] * y[1]
        return np.sum(y * y)""",
    "dict": """
        d = {"a": x * x, "b": np.sin(x)}
        return d["a"] * d["b"] + d["a"]""",
    "tuple": """
        a, b = (x, np.exp(x))
        return a * b""",
    "list": """
        items = [x, x * x]
        items.append(np.tanh(x))
        return items[0] * items[1] + items[2]""",
    "loop": """
        acc = 0.0
        for i in range(3):
            acc = acc + np.sin(x * (i + 1.0)) * acc + x
        return acc""",
    "while": """
        y = x
        n = 0
        while n < 3:
            y = np.tanh(y) + x * y
            n = n + 1
        return y""",
    "branch": """
        if x > 0:
            y = x * x * x
        else:
            y = np.sin(x)
        return y * x""",
}


def _smooth_unary():
    """Smooth elementwise NumPy primitives of one differentiable operand, with a point
    inside their domain (from the registry's sample)."""
    out = {}
    rng = np.random.default_rng(0)
    for name, p in sorted(P.REGISTRY.items()):
        if p.kind != "elementwise" or not p.sample or not p.code.startswith("np."):
            continue
        if name in ("sign", "floor", "ceil", "trunc", "rint", "fix", "round", "absolute",
                    "fabs", "imag", "real", "conj", "positive", "negative"):
            continue  # piecewise constant, kinks or linear: nothing to see at order 3
        args, kwargs = p.sample(rng)
        if kwargs or len(p.diff) != 1:
            continue
        if isinstance(p.impl(*args), tuple):
            continue  # several results (modf): the registry sweep covers them
        x0 = float(np.ravel(args[0])[0])
        out[name] = (f"{p.code}(x)", x0)
    return out


UNARY = _smooth_unary()
# binary smooth primitives: a sum of the same primitive with x in each operand
BINARY = {n: f"np.{n}(x, 1.3) + np.{n}(0.9, x) + np.{n}(x, x * 0.5 + 1.0)"
          for n in ("add", "subtract", "multiply", "divide", "power", "arctan2", "hypot",
                    "logaddexp", "logaddexp2")}


def _module_source(name, body):
    return textwrap.dedent('''
        import numpy as np
        import astjax

        def f(x):
        {body}

        g1 = astjax.grad(f)

        def j1(x):
            return astjax.jvp(f, (x,), (1.0,))[1]

        def j2(x):
            return astjax.jvp(j1, (x,), (1.0,))[1]

        def j3(x):
            return astjax.jvp(j2, (x,), (1.0,))[1]

        def jvp_of_grad(x):
            return astjax.jvp(g1, (x,), (1.0,))[1]
    ''').format(body=textwrap.indent(textwrap.dedent(body).strip("\n"), "    "))


CASES = {}
for _n, _e in PROGRAMS.items():
    CASES[_n] = (f"return {_e}", 0.7)
for _n, _b in BODIES.items():
    CASES[_n] = (_b, 0.6)
for _n, (_e, _x) in UNARY.items():
    CASES[f"prim_{_n}"] = (f"return {_e}", _x)
for _n, _e in BINARY.items():
    CASES[f"prim_{_n}"] = (f"return {_e}", 0.7)


def _fd(f, x, h=1e-4):
    return (f(x + h) - f(x - h)) / (2 * h)


def _close(a, b, what):
    a, b = float(np.asarray(a)), float(np.asarray(b))
    assert abs(a - b) <= 2e-5 * (1.0 + abs(b)), f"{what}: {a!r} vs {b!r}"


@pytest.fixture(scope="module")
def tmp_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("orders")


@pytest.mark.parametrize("case", sorted(CASES))
def test_orders_agree(case, tmp_dir):
    body, x = CASES[case]
    m = load_source_module(_module_source(case, body), tmp_dir, f"orders_{case}")
    g1 = astjax.grad(m.f)
    g2 = astjax.grad(g1)
    g3 = astjax.grad(g2)
    # each order against differences of the one below
    _close(g1(x), _fd(m.f, x), "grad")
    _close(g2(x), _fd(g1, x), "grad(grad)")
    d3 = g3(x)
    _close(d3, _fd(g2, x), "grad(grad(grad))")
    # forward mode, nested and mixed, against the third reverse derivative
    _close(m.j3(x), d3, "jvp(jvp(jvp))")
    _close(astjax.jvp(g2, (x,), (1.0,))[1], d3, "jvp(grad(grad))")
    if case.startswith("prim_"):
        return   # the compositions below: on the programs (they exercise the same rules)
    f_jvp = astjax.linearize(g2, x)[1]
    _close(f_jvp(1.0), d3, "linearize(grad(grad))")
    _close(f_jvp(-2.0), -2.0 * d3, "linearize(grad(grad)), called again")
    _close(astjax.grad(m.jvp_of_grad)(x), d3, "grad(jvp(grad))")
    _close(astjax.grad(astjax.grad(m.j1))(x), d3, "grad(grad(jvp))")
    _close(astjax.hessian(g1)(x), d3, "hessian(grad)")


@pytest.mark.parametrize("case", sorted(c for c in CASES if not c.startswith("prim_")))
def test_fourth_order(case, tmp_dir):
    body, x = CASES[case]
    m = load_source_module(_module_source(case, body), tmp_dir, f"orders4_{case}")
    g3 = astjax.grad(astjax.grad(astjax.grad(m.f)))
    g4 = astjax.grad(g3)
    _close(g4(x), _fd(g3, x), "grad^4")
    _close(astjax.jvp(g3, (x,), (1.0,))[1], g4(x), "jvp(grad^3)")
