"""Sound activity: a value computed from a differentiated value through anything
astjax has no rule for is a located error in every mode, never a silent zero.

Two sweeps:

* the registry, at the core-form level: every primitive with no rule (``diff=()``) and
  a non-constant kind, its result reaching the output directly, through a container,
  by indexing, by a copy, must be refused by reverse mode, forward mode and linearize;
  every primitive *with* a rule is accepted with a differentiated value bound to a
  parameter outside ``diff`` (zero by the registry's contract);
* user programs: every shape of call astjax does not look into (a function, a method,
  an attribute of its result, a value it may write into), its result used directly,
  unpacked, indexed, iterated or kept in a container, under grad, value_and_grad, vjp,
  jvp, linearize, jacfwd, jacrev and hessian -- and the same programs with the value
  not reaching the output (or through stop_gradient) still work.
"""
from __future__ import annotations

import re
import textwrap

import numpy as np
import pytest

import astjax
from astjax import core
from astjax import primitives as P
from astjax.core import Const, Copy, Index, Prim, Return, Var
from astjax.errors import DifferentiationError, Location, TransformError
from astjax.transforms import activity
from astjax.transforms.forward import Varied
from astjax.transforms.reverse import Activity
from conftest import load_source_module, numerical_grad

import astjax.core_prims  # noqa: F401

LOC = Location(__file__, 1)


def _no_rule():
    return sorted(n for n, p in P.REGISTRY.items()
                  if not p.diff and not activity.constant_output(p)
                  and n not in ("push", "restore_at", "new_tape"))


def _with_rule():
    return sorted(n for n, p in P.REGISTRY.items()
                  if p.diff and any(q not in p.diff for q in p.params))


def _call(prim, x):
    """``prim`` applied with ``x`` bound to each parameter (the others left constant)."""
    args = []
    for p in prim.params:
        args.append((Var(x),) if p.startswith("*") else Var(x))
    return args


def _function(body, params=("x",)):
    class _Env:
        entries: dict = {}
    fn = core.Function("f", list(params), body, loc=LOC)
    fn.env = _Env()
    return fn


USES = {
    "direct": lambda t: [Copy("out", Var(t), loc=LOC)],
    "indexed": lambda t: [Prim("out", "getitem", [Var(t), Index((Const(0),))], loc=LOC)],
    "in a tuple": lambda t: [Prim("out", "make_tuple", [(Var(t), Const(1.0))], loc=LOC)],
    "in a dict": lambda t: [Prim("d", "make_dict", [Const(("a",)), (Var(t),)], loc=LOC),
                            Prim("out", "getitem", [Var("d"), Index((Const("a"),))], loc=LOC)],
}


@pytest.mark.parametrize("use", sorted(USES))
@pytest.mark.parametrize("name", _no_rule())
def test_every_primitive_without_a_rule_is_refused_in_every_mode(name, use):
    prim = P.REGISTRY[name]
    body = [Prim("t", name, _call(prim, "x"), loc=LOC)] + USES[use]("t") + [
        Return(Var("out"), loc=LOC)]
    with pytest.raises(DifferentiationError):
        Activity(_function(list(body)), ["x"], "out")
    with pytest.raises(DifferentiationError):
        Varied(_function(list(body)), ["x"])


@pytest.mark.parametrize("name", _no_rule())
def test_a_primitive_without_a_rule_is_fine_when_its_result_is_not_used(name):
    prim = P.REGISTRY[name]
    body = [Prim("t", name, _call(prim, "x"), loc=LOC), Copy("out", Var("x"), loc=LOC),
            Return(Var("out"), loc=LOC)]
    assert "x" in Activity(_function(list(body)), ["x"], "out").active
    Varied(_function(list(body)), ["x"])


@pytest.mark.parametrize("name", _with_rule())
def test_parameters_outside_diff_are_zero_by_contract(name):
    """A differentiated value bound only to parameters outside ``diff`` is no error
    (and carries nothing): the registry's contract says those have zero derivative
    (``refuse`` parameters excepted: refused, see the next test)."""
    prim = P.REGISTRY[name]
    args = [(Const(1.0),) if p.startswith("*") and p in prim.diff
            else Const(1.0) if p in prim.diff or p in prim.refuse else
            ((Var("x"),) if p.startswith("*") else Var("x")) for p in prim.params]
    body = [Prim("t", name, args, loc=LOC), Copy("out", Var("t"), loc=LOC),
            Return(Var("out"), loc=LOC)]
    act = Activity(_function(list(body)), ["x"], "out")
    assert "t" not in act.varied


def test_the_edge_kinds_come_from_the_registry_alone():
    """DIFF exactly at ``diff`` parameters, REFUSE at ``refuse`` ones; the rest ZERO for a
    primitive with a rule.  A piecewise-constant primitive (floor, rint...) is ZERO at
    its ``diff`` parameters too: its rules give zero, known here."""
    for name, prim in P.REGISTRY.items():
        if name in ("push", "restore_at"):
            continue
        args = [(Var(f"a{i}"),) if p.startswith("*") else Var(f"a{i}")
                for i, p in enumerate(prim.params)]
        edges = activity.statement_edges(Prim("t", name, args, loc=LOC))
        for i, p in enumerate(prim.params):
            kinds = {k for s, d, k in edges if s == f"a{i}"}
            if p in prim.diff and name in activity._PIECEWISE_CONSTANT:
                assert kinds == {activity.ZERO}, (name, p)
            elif p in prim.diff:
                assert kinds == {activity.DIFF}, (name, p)
            elif p in prim.refuse:
                assert kinds == {activity.REFUSE}, (name, p)
            elif prim.diff or activity.constant_output(prim):
                assert kinds == {activity.ZERO}, (name, p)
            else:
                assert kinds == {activity.REFUSE}, (name, p)


# ------------------------------------------------------------------ user programs

PROGRAMS = textwrap.dedent('''
    import numpy as np
    import astjax


    class Pair:
        """A callable object astjax cannot look into (no function source)."""

        def __call__(self, x):
            return (np.sin(x), np.cos(x))

        def split(self, x):
            return [x * 2.0, x * 3.0]

        def scale(self, x):
            return x * 2.0


    class Result:
        def __init__(self, value):
            self.value = value


    class Box:
        def __init__(self):
            self.items = []

        def put(self, v):
            self.items.append(v)

        def get(self):
            return self.items[-1]


    pair = Pair()
    opaque = np.vectorize(lambda v: v * 2.0)
    box = Box()


    def call_direct(x):
        return np.sum(opaque(x))                                  # @call_direct


    def call_unpacked(x):
        a, b = pair(x)                                            # @call_unpacked
        return np.sum(a * b)


    def call_indexed(x):
        return np.sum(pair(x)[1])                                 # @call_indexed


    def call_iterated(x):
        total = 0.0
        for part in pair(x):                                      # @call_iterated
            total = total + np.sum(part)
        return total


    def call_in_dict(x):
        d = {"a": opaque(x), "b": x}                              # @call_in_dict
        return np.sum(d["a"] * d["b"])


    def call_via_dict_builtin(x):
        d = dict(a=x, b=2.0 * x)                                  # @call_via_dict_builtin
        return np.sum(d["a"] * d["b"])


    def method_direct(x):
        return np.sum(pair.scale(x))                              # @method_direct


    def method_unpacked(x):
        a, b = pair.split(x)                                      # @method_unpacked
        return np.sum(a) + np.sum(b)


    def array_method(x):
        return np.sum(np.asarray(x.tolist()))                     # @array_method


    def attribute_of_result(x):
        r = Result(x * 2.0)                                       # @attribute_of_result
        return np.sum(r.value)


    def stored_by_a_method(x):
        box.put(x * 2.0)                                          # @stored_by_a_method
        return np.sum(box.get())


    def copied_into(x):
        buf = np.zeros(x.shape)
        np.copyto(buf, x)                                         # @copied_into
        return np.sum(buf * buf)


    # the same calls, their results not reaching the output: nothing to refuse

    def only_length(x):
        n = len(pair(x))
        return np.sum(x * x) * n


    def only_printed(x):
        print(np.sum(x) > 1e300)
        return np.sum(np.sin(x))


    def stopped(x):
        a, b = pair(astjax.stop_gradient(x))
        return np.sum(a * x)


    def unused(x):
        a = opaque(x)
        return np.sum(np.tanh(x))
''')

REFUSED = ["call_direct", "call_unpacked", "call_indexed", "call_iterated", "call_in_dict",
           "method_direct", "method_unpacked", "array_method",
           "attribute_of_result", "stored_by_a_method", "copied_into"]
ACCEPTED = {"only_length": lambda x: 2 * np.sum(x * x),
            "call_via_dict_builtin": lambda x: np.sum(x * (2.0 * x)),  # the frontend's dict()
            "only_printed": lambda x: np.sum(np.sin(x)),
            "stopped": lambda x: np.sum(np.sin(X) * x),   # the stopped part held fixed
            "unused": lambda x: np.sum(np.tanh(x))}

X = np.array([[0.3, -0.7], [1.1, 0.4]])
V = np.array([[1.0, 0.5], [-0.25, 2.0]])

TRANSFORMS = {
    "grad": lambda f: astjax.grad(f)(X),
    "value_and_grad": lambda f: astjax.value_and_grad(f)(X),
    "vjp": lambda f: astjax.vjp(f, X)[1](1.0),
    "jvp": lambda f: astjax.jvp(f, (X,), (V,)),
    "linearize": lambda f: astjax.linearize(f, X)[1](V),
    "jacfwd": lambda f: astjax.jacfwd(f)(X),
    "jacrev": lambda f: astjax.jacrev(f)(X),
    "hessian": lambda f: astjax.hessian(f)(X),
}


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    return load_source_module(PROGRAMS, tmp_path_factory.mktemp("activity"),
                              "activity_programs")


def _marker_line(module, mark):
    lines = open(module.__file__, encoding="utf-8").read().splitlines()
    return [i for i, t in enumerate(lines, 1) if t.rstrip().endswith(f"# @{mark}")][0]


@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
@pytest.mark.parametrize("name", REFUSED)
def test_calls_without_a_rule_are_refused_at_the_users_line(programs, name, transform):
    # (a call made only for its effect, np.copyto, is refused earlier by the frontend)
    with pytest.raises((DifferentiationError, TransformError)) as info:
        TRANSFORMS[transform](getattr(programs, name))
    message = str(info.value)
    assert "activity_programs.py" in message, message
    assert re.search(rf"\bline {_marker_line(programs, name)}\b", message), message
    assert "^" in message and "hint:" in message, message


@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_calls_whose_results_do_not_reach_the_output_are_fine(programs, name, transform,
                                                             capsys):
    f = getattr(programs, name)
    result = TRANSFORMS[transform](f)
    expected = numerical_grad(ACCEPTED[name], (X,))
    if transform == "grad":
        np.testing.assert_allclose(result, expected, rtol=1e-6, atol=1e-8)
    elif transform == "value_and_grad":
        np.testing.assert_allclose(result[1], expected, rtol=1e-6, atol=1e-8)
    elif transform in ("vjp", "jacrev", "jacfwd"):
        got = result[0] if transform == "vjp" else result
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-8)
    elif transform in ("jvp", "linearize"):
        tangent = result[1] if transform == "jvp" else result
        np.testing.assert_allclose(tangent, np.sum(expected * V), rtol=1e-6, atol=1e-8)
    else:
        columns = []
        for k in range(X.size):
            e = np.zeros(X.size)
            e[k] = 1e-4
            e = e.reshape(X.shape)
            columns.append((numerical_grad(ACCEPTED[name], (X + e,))
                            - numerical_grad(ACCEPTED[name], (X - e,))) / 2e-4)
        h = np.stack(columns, axis=-1).reshape(X.shape + X.shape)
        np.testing.assert_allclose(result, h, rtol=1e-4, atol=1e-4)
