"""Tests of the optimization passes on the core form (astjax/passes, issue #6).

Each pass has unit tests on small hand-built core functions (what it rewrites, and
what it must leave alone: reassigned names, loops, in-place updates through
aliases).  End to end, real programs and their generated gradients are normalized,
optimized, printed, loaded and run next to the unoptimized code on random inputs:
results must be identical (same values bit for bit, dtypes and types), and so must
the updates the programs make to their arguments.  A Hypothesis property test does
the same for random straight-line, branching, looping and in-place programs.
"""
from __future__ import annotations

import copy
import itertools
import tempfile
import timeit
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import astjax
from astjax import codegen, core, passes, runtime_fusion
from astjax.generation import base_namespace as _base_namespace
from astjax.core import (Assert, Comment, Const, Copy, External, For, If, Index, Prim, Return,
                         SetItem, Var, While)
from astjax.frontend.names import NameGen
from astjax.frontend.normalize import Env, Normalizer
from astjax.passes import (algebraic, analysis, buffers, const_fold, copy_prop, cse, dce,
                           licm, optimize)
from conftest import load_source_module
from programs import control, inplace, mlp
from programs import optimizable as P

# the rewrites, without the final code-shaping passes (fusion, buffer reuse)
NO_BUFFERS = tuple(p for p in passes.DEFAULT if p not in (buffers, passes.fusion))


# ================================================================== helpers

def normalize(f):
    return Normalizer(NameGen()).function(f)


def compile_core(fn, label="passes"):
    """Print ``fn``, load it as astjax does (base namespace + env), return the function."""
    ns = _base_namespace()
    ns.update(fn.env.current() if hasattr(fn.env, "current") else fn.env)
    codegen.load_source(codegen.print_with_helpers(fn), ns, label)
    return ns[fn.name]


def make(params, body, name="f"):
    """A hand-built core function (with a real environment, for ``buffers``)."""
    names = NameGen(set(params))
    return core.Function(name, list(params), body, env=Env(names))


def P_(target, prim, *args, **kwargs):
    """A Prim with the registry's defaults for the optional parameters filled in."""
    entry = analysis.prim_entry(prim)
    args = list(args)
    for p in entry.params[len(args):]:
        if p.startswith("*"):
            args.append(())
        elif p in entry.defaults:
            args.append(Const(entry.defaults[p]))
    return Prim(target, prim, args, dict(kwargs))


def v(name):
    return Var(name)


def c(value):
    return Const(value)


def stmts(fn, kind=None):
    """Statements of ``fn`` and of the fused groups it calls."""
    bodies = [fn.body] + [h.body for h in fn.helpers]
    return [s for b in bodies for s in core.walk(b) if kind is None or isinstance(s, kind)]


def source(fn):
    return codegen.print_with_helpers(fn)


def _signs(a):
    """Sign bits of the real parts, NaNs' counted as clear."""
    re = np.real(a)
    signs = np.signbit(re)
    return signs & ~np.isnan(re) if re.dtype.kind == "f" else signs


def identical(a, b):
    """Same structure, types, dtypes, shapes and bits (NaNs equal to NaNs, whatever
    their sign: IEEE 754 leaves a NaN result's sign open, and NumPy's own SIMD and
    scalar loops of ``tanh`` give NaNs of different signs for one input)."""
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(
            identical(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return type(b) is dict and a.keys() == b.keys() and all(
            identical(a[k], b[k]) for k in a)
    if type(a) is not type(b):
        return False
    if isinstance(a, (np.ndarray, np.generic)):
        return (a.dtype == b.dtype and np.shape(a) == np.shape(b)
                and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
                and np.array_equal(_signs(a), _signs(b)))
    if isinstance(a, float):
        return (a == b and np.signbit(a) == np.signbit(b)) or (a != a and b != b)
    return a == b


def outcome(f, args):
    """(result or exception type, arguments after the call): what a caller can see."""
    args = copy.deepcopy(args)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = f(*args)
        except Exception as err:   # noqa: BLE001  (the same error is expected)
            result = ("raised", type(err))
    return result, args


def assert_same_behaviour(fn, opt, args):
    expected = outcome(compile_core(fn, "plain"), args)
    actual = outcome(compile_core(opt, "optimized"), args)
    assert identical(actual[0], expected[0]), (
        f"results differ:\n{actual[0]!r}\n{expected[0]!r}\n{source(opt)}")
    assert identical(actual[1], expected[1]), f"argument updates differ\n{source(opt)}"


def check_optimized(f, args, passes_=passes.DEFAULT, arg_dtypes=None, grad=False,
                    min_size=None, monkeypatch=None):
    """Optimize ``f`` (or the generated code of its gradient) and compare behaviours."""
    target = astjax.grad(f)._astjax_generated() if grad else f
    fn = normalize(target)
    if min_size is not None:
        monkeypatch.setattr(buffers, "MIN_SIZE", min_size)
    opt = optimize(fn, passes_, arg_dtypes=arg_dtypes)
    assert_same_behaviour(fn, opt, args)
    return fn, opt


def rng_args(seed=0):
    return np.random.default_rng(seed)


# ============================================================== const_fold

class TestConstFold:
    def test_python_arithmetic_folds_with_python_types(self):
        fn = make(["x"], [P_("n", "subtract", c(2), c(1)),
                          P_("h", "divide", c(1), c(2)),
                          P_("b", "less", c(2), c(3)),
                          Return(v("x"))])
        assert const_fold.run(fn)
        copies = {s.target: s.value.value for s in stmts(fn, Copy)}
        assert copies == {"n": 1, "h": 0.5, "b": True}
        assert type(copies["n"]) is int and type(copies["b"]) is bool

    def test_numpy_results_and_arrays_are_never_folded(self):
        fn = make(["x"], [P_("r", "sqrt", c(4.0)),
                          P_("z", "zeros", c((2,))),
                          P_("l", "make_list", (c(1), c(2))),
                          Return(v("x"))])
        assert not const_fold.run(fn)
        assert len(stmts(fn, Prim)) == 3

    def test_errors_and_huge_values_stay_in_the_code(self):
        fn = make(["x"], [P_("e", "divide", c(1), c(0)),
                          P_("p", "power", c(2), c(10 ** 4)),
                          P_("s", "multiply", c("ab"), c(10 ** 6)),
                          Return(v("x"))])
        assert not const_fold.run(fn)

    def test_len_of_a_tuple_display(self):
        fn = make(["a", "b"], [P_("t", "make_tuple", (v("a"), v("b"))),
                               P_("n", "len", v("t")),
                               Return(v("n"))])
        assert const_fold.run(fn)
        assert stmts(fn, Copy)[0].value == Const(2)
        assert compile_core(fn)(1.0, np.zeros(3)) == 2

    def test_len_after_the_tuple_is_rebound_is_not_folded(self):
        fn = make(["a", "xs"], [P_("t", "make_tuple", (v("a"), v("a"))),
                                Copy("t", v("xs")),
                                P_("n", "len", v("t")),
                                Return(v("n"))])
        assert not const_fold.run(fn)
        fn2 = make(["a", "xs", "c"], [P_("t", "make_tuple", (v("a"), v("a"))),
                                      If(v("c"), [Copy("t", v("xs"))], []),
                                      P_("n", "len", v("t")),
                                      Return(v("n"))])
        assert not const_fold.run(fn2)

    def test_constant_if_keeps_the_branch_taken(self):
        fn = make(["x"], [If(c(True), [P_("y", "sin", v("x"))], [P_("y", "cos", v("x"))]),
                          If(c(0), [Copy("y", c(1.0))], []),
                          Return(v("y"))])
        assert const_fold.run(fn)
        assert [s.prim for s in stmts(fn, Prim)] == ["sin"]
        assert not stmts(fn, If)

    def test_if_on_a_folded_test(self):
        fn = make(["x"], [If(P_(None, "not_none", c(None)), [Copy("x", c(1.0))], []),
                          Return(v("x"))])
        assert const_fold.run(fn)
        assert not stmts(fn, If)

    def test_empty_constant_range_loop_goes(self):
        fn = make(["x"], [For("i", P_(None, "range", c(0), c(0), c(None)),
                              [P_("x", "sin", v("x"))]),
                          For("j", P_(None, "range", c(3), c(None), c(None)),
                              [P_("x", "cos", v("x"))]),
                          Return(v("x"))])
        assert const_fold.run(fn)
        loops = stmts(fn, For)
        assert len(loops) == 1 and loops[0].target == "j"

    def test_range_stays(self):
        fn = make(["x"], [P_("r", "range", c(0), c(3), c(None)), Return(v("r"))])
        assert not const_fold.run(fn)

    def test_program(self):
        fn, opt = check_optimized(P.folding, (np.abs(rng_args().standard_normal(3)),))
        assert not stmts(opt, If) and not stmts(opt, For)


# ============================================================== copy_prop

class TestCopyProp:
    def test_reads_the_original(self):
        fn = make(["x"], [Copy("y", v("x")), P_("z", "sin", v("y")), Return(v("z"))])
        assert copy_prop.run(fn)
        assert stmts(fn, Prim)[0].args[0] == v("x")

    def test_not_after_the_original_is_rebound(self):
        fn = make(["x"], [Copy("y", v("x")), P_("x", "sin", v("x")),
                          P_("z", "cos", v("y")), Return(v("z"))])
        assert not copy_prop.run(fn)
        assert stmts(fn, Prim)[1].args[0] == v("y")

    def test_not_after_the_copy_is_rebound_in_a_branch(self):
        fn = make(["x", "c"], [Copy("y", v("x")),
                               If(v("c"), [P_("y", "sin", v("x"))], []),
                               P_("z", "cos", v("y")), Return(v("z"))])
        copy_prop.run(fn)
        assert stmts(fn, Prim)[-1].args[0] == v("y")

    def test_loops_forget_what_they_write(self):
        body = [P_("z", "cos", v("y")), P_("x", "sin", v("z"))]
        fn = make(["x", "n"], [Copy("y", v("x")),
                               For("i", P_(None, "range", v("n"), c(None), c(None)), body),
                               Return(v("x"))])
        copy_prop.run(fn)
        assert body[0].args[0] == v("y")       # x is written in the loop

    def test_loops_keep_what_they_do_not_write(self):
        body = [P_("z", "cos", v("y")), P_("w", "sin", v("z"))]
        fn = make(["x", "n"], [Copy("y", v("x")),
                               For("i", P_(None, "range", v("n"), c(None), c(None)), body),
                               Return(v("w"))])
        assert copy_prop.run(fn)
        assert body[0].args[0] == v("x")

    def test_while_loop_test_after_test_body(self):
        fn = make(["x"], [Copy("k", c(0)),
                          While([P_("t", "less", v("k"), c(3))], v("t"),
                                [P_("k", "add", v("k"), c(1))]),
                          Return(v("k"))])
        copy_prop.run(fn)
        # k is written in the loop: the test keeps reading k
        assert stmts(fn, While)[0].test_body[0].args[0] == v("k")
        assert compile_core(fn)(0.0) == 3

    def test_constants_only_where_python_allows_them(self):
        fn = make(["x"], [Copy("t", c((1, 2))), P_("a", "getitem", v("t"), Index((c(0),))),
                          Copy("m", c(-2)), P_("p", "power", v("m"), c(2)),
                          P_("q", "add", v("m"), c(2)),
                          Copy("s", c(None)), P_("r", "range", c(1), v("s"), c(None)),
                          P_("o", "make_tuple", (v("a"), v("p"), v("q"))),
                          Return(v("o"))])
        copy_prop.run(fn)
        get, pw, add, rng_ = stmts(fn, Prim)[:4]
        assert get.args[0] == v("t")           # (1, 2)[0] would be fine, 2[0] is not
        assert pw.args[0] == v("m")            # -2 ** 2 is -4
        assert add.args[0] == c(-2)
        assert rng_.args[1] == v("s")          # range(1, None) must still raise
        assert outcome(compile_core(fn), (0.0,))[0] == ("raised", TypeError)
        fn.body = [s for s in fn.body if not (isinstance(s, Prim) and s.prim == "range")]
        assert compile_core(fn)(0.0) == (1, 4, 0)

    def test_mutable_constants_are_not_copied(self):
        fn = make(["x"], [Copy("l", c([1, 2])), SetItem("l", Index((c(0),)), c(5)),
                          Copy("m", v("l")), Return(v("m"))])
        copy_prop.run(fn)
        assert compile_core(fn)(0.0) == [5, 2]

    def test_tuple_items_forwarded(self):
        fn = make(["a", "b"], [P_("t", "make_tuple", (v("a"), v("b"))),
                               P_("u", "getitem", v("t"), Index((c(-1),))),
                               Return(v("u"))])
        assert copy_prop.run(fn)
        assert isinstance(fn.body[1], Copy) and fn.body[1].value == v("b")

    def test_tuple_items_not_forwarded_after_rebinding(self):
        fn, opt = check_optimized(P.tuple_forward_reassigned,
                                  (rng_args().standard_normal(3),))
        # a is rebound between the tuple and the read: t[0] stays t[0]
        assert any(s.prim == "getitem" for s in stmts(opt, Prim))


# ============================================================== cse

class TestCSE:
    def test_same_pure_prim_twice(self):
        fn = make(["x", "y"], [P_("a", "multiply", v("x"), v("y")),
                               P_("b", "multiply", v("x"), v("y")),
                               P_("r", "add", v("a"), v("b")), Return(v("r"))])
        assert cse.run(fn)
        assert fn.body[1] == Copy("b", v("a"))

    def test_constants_compared_with_their_type(self):
        fn = make(["x"], [P_("a", "multiply", v("x"), c(1)),
                          P_("b", "multiply", v("x"), c(1.0)),
                          P_("d", "multiply", v("x"), c(True)),
                          P_("e", "add", v("x"), c(0.0)),
                          P_("f", "add", v("x"), c(-0.0)),
                          P_("r", "make_tuple", (v("a"), v("b"), v("d"), v("e"), v("f"))),
                          Return(v("r"))])
        assert not cse.run(fn)

    def test_not_after_an_operand_is_rebound(self):
        fn = make(["x", "y"], [P_("a", "multiply", v("x"), v("y")),
                               P_("x", "sin", v("x")),
                               P_("b", "multiply", v("x"), v("y")),
                               P_("r", "add", v("a"), v("b")), Return(v("r"))])
        assert not cse.run(fn)

    def test_not_when_the_result_is_updated_in_place(self):
        fn = make(["x"], [P_("a", "multiply", v("x"), c(2.0)),
                          P_("b", "multiply", v("x"), c(2.0)),
                          SetItem("b", Index((c(0),)), c(100.0)),
                          P_("r", "make_tuple", (v("a"), v("b"))), Return(v("r"))])
        assert not cse.run(fn)

    def test_not_for_effects(self):
        fn = make(["x"], [P_("t", "new_tape"), P_("u", "new_tape"),
                          P_(None, "push", v("t"), v("x")),
                          P_("r", "make_tuple", (v("t"), v("u"))), Return(v("r"))])
        assert not cse.run(fn)
        assert compile_core(fn)(1.0) == ([1.0], [])

    def test_lists_used_as_tapes_are_not_shared(self):
        fn = make(["x"], [P_("t", "make_list", ()), P_("u", "make_list", ()),
                          P_(None, "push", v("t"), v("x")),
                          P_("r", "make_tuple", (v("t"), v("u"))), Return(v("r"))])
        assert not cse.run(fn)

    def test_views_that_are_updated_block_cse_of_their_base(self):
        fn, opt = check_optimized(P.view_mutation, (rng_args().standard_normal(3),))
        assert len([s for s in stmts(opt, Prim) if s.prim == "sum"]) == 2

    def test_inside_a_loop(self):
        body = [P_("b", "sin", v("w")), P_("c", "sin", v("x")), P_("x", "add", v("c"), v("b"))]
        fn = make(["x", "w", "n"], [P_("a", "sin", v("w")), P_("a2", "sin", v("x")),
                                    For("i", P_(None, "range", v("n"), c(None), c(None)),
                                        body),
                                    P_("r", "add", v("x"), v("a")), Return(v("r"))])
        before = passes.copy_function(fn)
        assert cse.run(fn)
        assert body[0] == Copy("b", v("a"))          # w is not written in the loop
        assert isinstance(body[1], Prim)             # x is
        x = np.array([0.5, 1.0])
        assert identical(compile_core(fn)(x, x * 2, 3), compile_core(before)(x, x * 2, 3))

    def test_programs(self):
        r = rng_args()
        fn, opt = check_optimized(P.repeated_math, (r.standard_normal(4),))
        assert len([s for s in stmts(opt, Prim) if s.prim == "sin"]) == 1
        check_optimized(P.cse_then_mutate, (r.standard_normal(3),))
        check_optimized(P.zeros_not_shared, (r.standard_normal(3),))
        check_optimized(P.branch_same_expr, (r.standard_normal(3), 1.0))


# ============================================================== dce

class TestDCE:
    def test_dead_pure_statements_go(self):
        fn = make(["x"], [P_("a", "exp", v("x")), Copy("b", v("a")),
                          P_("y", "sin", v("x")), Return(v("y"))])
        assert dce.run(fn)
        assert [type(s).__name__ for s in fn.body] == ["Prim", "Return"]

    def test_effects_stay_and_lose_a_dead_target(self):
        fn = make(["x"], [P_("t", "new_tape"), P_("p", "push", v("t"), v("x")),
                          P_("q", "pop", v("t")),
                          P_("s", "check_scalar_output", v("x"), c("f")),
                          External("e", v("x"), []),
                          Assert(c(True)),
                          Return(v("x"))])
        dce.run(fn)
        kept = [s.prim for s in stmts(fn, Prim)]
        assert kept == ["new_tape", "push", "pop", "check_scalar_output"]
        assert stmts(fn, Prim)[1].target is None and stmts(fn, External)[0].target is None
        assert stmts(fn, Assert)

    def test_out_argument_is_an_effect(self):
        fn = make(["x", "o"], [P_("a", "sin", v("x"), v("o")), Return(v("o"))])
        dce.run(fn)
        assert stmts(fn, Prim) and stmts(fn, Prim)[0].target is None

    def test_values_read_in_a_later_trip_are_live(self):
        body = [P_("y", "sin", v("s")), P_("s", "add", v("x"), c(1.0)),
                P_("dead", "cos", v("x"))]
        fn = make(["x", "n"], [Copy("s", v("x")), Copy("y", v("x")),
                               For("i", P_(None, "range", v("n"), c(None), c(None)), body),
                               Return(v("y"))])
        dce.run(fn)
        assert [s.target for s in body] == ["y", "s"]
        assert [s.target for s in fn.body[:2]] == ["s", "y"]   # y: zero trips

    def test_while_test_and_flags_are_reads(self):
        fn = make(["x"], [Copy("k", c(0)), Copy("stop", c(False)),
                          While([P_("t", "less", v("k"), c(5))], v("t"),
                                [P_("k", "add", v("k"), c(1)),
                                 P_("stop", "greater", v("k"), c(2))], exit_flags=["stop"]),
                          Return(v("k"))])
        assert not dce.run(fn)
        assert compile_core(fn)(0.0) == 3

    def test_empty_if_goes(self):
        fn = make(["x"], [If(v("x"), [Copy("a", c(1))], [Comment("nothing")]),
                          Return(v("x"))])
        dce.run(fn)
        assert stmts(fn, If)          # a comment keeps the else branch
        fn = make(["x"], [If(v("x"), [Copy("a", c(1))], []), Return(v("x"))])
        dce.run(fn)
        assert not stmts(fn, If)

    def test_mlp_gradient_gets_smaller(self):
        g = astjax.grad(mlp.loss)._astjax_generated()
        fn = normalize(g)
        opt = optimize(fn)
        before, after = analysis.count_statements(fn.body), analysis.count_statements(opt.body)
        assert after < before
        r = rng_args()
        params = [(r.standard_normal((3, 4)), r.standard_normal(4)),
                  (r.standard_normal((4, 2)), r.standard_normal(2))]
        batch = (r.standard_normal((5, 3)), r.standard_normal((5, 2)))
        assert_same_behaviour(fn, opt, (params, batch))


# ============================================================== algebraic

def _forms(dtype):
    """Arrays, NumPy scalars and 0-d arrays of ``dtype`` with awkward values."""
    vals = [0.0, -0.0, 1.5, -2.25, np.inf, -np.inf, np.nan, 1e300, -1e-310, 3.0, 255, -128]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = np.array(vals).astype(dtype)
        if np.dtype(dtype).kind == "c":
            a = a + 1j * np.array(vals[::-1]).astype(dtype)
    return [a, a.reshape(3, 4)] + list(a) + [np.asarray(x) for x in a]


NUMERIC = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint64, np.float16,
           np.float32, np.float64, np.longdouble, np.complex64, np.complex128]


class TestAlgebraic:
    @pytest.mark.parametrize("dtype", NUMERIC)
    def test_identity_table(self, dtype):
        """The rewrites hold for every non-boolean NumPy dtype, arrays and scalars."""
        rules = [(lambda x: x * x, np.square), (lambda x: x ** 2, np.square),
                 (lambda x: x ** 1, np.positive)]
        for before, after in rules:
            for x in _forms(dtype):
                with np.errstate(all="ignore"):
                    assert identical(before(x), after(x)), (dtype, x)

    def test_rejected_rewrites_really_differ(self):
        """Why ``x * 1``, ``x + 0``, ``x ** 0.5`` and booleans are left alone."""
        with np.errstate(all="ignore"):
            z = np.array([complex(np.inf, 1.0)])
            assert not identical(z * 1, z)
            assert not identical(np.array([-0.0]) + 0, np.array([-0.0]))
            assert not identical(np.float64(-0.0) ** 0.5, np.sqrt(np.float64(-0.0)))
            assert not identical(np.array([True]) * np.array([True]),
                                 np.square(np.array([True])))
            assert not identical(2.0 * 2.0, np.square(2.0))   # float vs np.float64

    def test_acc_with_none_and_stop_gradient(self):
        fn = make(["a", "b"], [P_("s", "acc", v("a"), c(None)), P_("t", "acc", c(None), v("b")),
                               P_("u", "stop_gradient", v("s")),
                               P_("r", "make_tuple", (v("u"), v("t"))), Return(v("r"))])
        assert algebraic.run(fn)
        assert fn.body[:3] == [Copy("s", v("a")), Copy("t", v("b")), Copy("u", v("s"))]

    def test_no_arithmetic_rewrite_without_dtype_facts(self):
        fn = make(["x"], [P_("a", "multiply", v("x"), v("x")), P_("b", "power", v("x"), c(2)),
                          P_("r", "add", v("a"), v("b")), Return(v("r"))])
        assert not algebraic.run(fn)
        assert compile_core(fn)(3) == 18 and type(compile_core(fn)(2.0)) is float

    def test_arithmetic_rewrites_with_argument_dtypes(self):
        body = [P_("a", "multiply", v("x"), v("x")), P_("b", "power", v("x"), c(2)),
                P_("d", "power", v("x"), c(1)), P_("e", "power", v("x"), c(2.0)),
                P_("r", "make_tuple", (v("a"), v("b"), v("d"), v("e"))), Return(v("r"))]
        fn = make(["x"], copy.deepcopy(body))
        assert algebraic.run(fn, arg_dtypes={"x": np.float32})
        assert [s.prim for s in stmts(fn, Prim)] == ["square", "square", "positive", "power",
                                                      "make_tuple"]
        x = np.linspace(-2, 2, 5, dtype=np.float32)
        assert identical(compile_core(fn)(x), compile_core(make(["x"], body))(x))
        fn_bool = make(["x"], copy.deepcopy(body))
        assert not algebraic.run(fn_bool, arg_dtypes={"x": np.bool_})

    def test_dtype_facts_flow_and_die(self):
        fn = make(["x", "n"], [P_("a", "tanh", v("x")),
                               P_("b", "multiply", v("a"), v("a")),    # float: square
                               P_("i", "zeros", c((3,)), c(np.int64)),
                               P_("j", "power", v("i"), c(2)),          # int: square
                               Copy("k", v("a")),
                               For("t", P_(None, "range", v("n"), c(None), c(None)),
                                   [P_("k2", "multiply", v("k"), v("k")),   # k rebound below
                                    Copy("k", v("n"))]),
                               P_("r", "make_tuple", (v("b"), v("j"), v("k"))), Return(v("r"))])
        algebraic.run(fn, arg_dtypes={"x": np.float64})
        prims = [s.prim for s in stmts(fn, Prim)]
        assert prims.count("square") == 2 and prims.count("multiply") == 1

    def test_programs(self):
        r = rng_args()
        x = r.standard_normal(3)
        fn, opt = check_optimized(P.squares, (x,), NO_BUFFERS, arg_dtypes={"x": np.float64})
        prims = [s.prim for s in stmts(opt, Prim)]
        # a * a and a ** 2 are both np.square(a), computed once; c ** 1 is +c
        assert prims.count("square") == 1 and "power" not in prims and "positive" in prims
        # a Python float argument: no facts, and the result stays a Python float
        fn, opt = check_optimized(control.if_elif_else, (1.5,))
        check_optimized(P.squares, (x.astype(np.float32),), arg_dtypes={"x": np.float32})


# ============================================================== licm

def _loop_fn(body, rng=None, flags=(), pre=()):
    rng = rng or P_(None, "range", v("n"), c(None), c(None))
    return make(["x", "w", "n"], [*pre, For("i", rng, body, exit_flags=list(flags)),
                                  Return(v("x"))])


class TestLICM:
    def test_invariant_hoisted_behind_the_trip_test(self):
        body = [P_("c", "tanh", v("w")), P_("x", "add", v("x"), v("c"))]
        fn = _loop_fn(body)
        before = passes.copy_function(fn)
        assert licm.run(fn)
        guard = fn.body[1]
        assert isinstance(fn.body[0], Prim) and fn.body[0].prim == "range"
        assert isinstance(guard, If) and guard.body[0].target == "c"
        assert [s.target for s in stmts(fn, For)[0].body] == ["x"]
        one = np.ones(2)
        for n in (0, 1, 3):
            assert identical(compile_core(fn)(one, one, n), compile_core(before)(one, one, n))

    def test_constant_range_needs_no_guard(self):
        body = [P_("c", "tanh", v("w")), P_("x", "add", v("x"), v("c"))]
        fn = _loop_fn(body, rng=P_(None, "range", c(2), c(None), c(None)))
        assert licm.run(fn)
        assert fn.body[0].target == "c" and not stmts(fn, If)

    def test_zero_trips_do_not_run_the_hoisted_code(self):
        fn, opt = check_optimized(P.zero_trip_invariant,
                                  (np.ones(3), np.ones((4, 2)), 0))   # x @ m would raise
        assert stmts(opt, If)
        check_optimized(P.zero_trip_invariant, (np.ones(3), np.ones((3, 2)), 2))

    def test_operand_written_in_the_loop(self):
        body = [P_("c", "tanh", v("x")), P_("x", "add", v("x"), v("c"))]
        assert not licm.run(_loop_fn(body))

    def test_target_live_on_entry(self):
        body = [P_("y", "sin", v("c")), P_("c", "tanh", v("w")), P_("x", "add", v("x"),
                                                                      v("y"))]
        assert not licm.run(_loop_fn(body, pre=[Copy("c", v("x"))]))
        fn, opt = check_optimized(P.zero_trip_live_after, (np.ones(3), np.ones(3), 0))
        assert not stmts(opt, If)

    def test_target_assigned_twice_or_conditionally(self):
        body = [P_("c", "tanh", v("w")), If(v("n"), [P_("c", "sin", v("w"))], []),
                P_("x", "add", v("x"), v("c"))]
        assert not licm.run(_loop_fn(body))
        body = [If(v("n"), [P_("c", "tanh", v("w"))], [P_("c", "sin", v("w"))]),
                P_("x", "add", v("x"), v("c"))]
        assert not licm.run(_loop_fn(body))

    def test_updated_in_place(self):
        body = [P_("c", "multiply", v("w"), c(2.0)), SetItem("c", Index((c(0),)), v("i")),
                P_("x", "add", v("x"), v("c"))]
        assert not licm.run(_loop_fn(body))
        check_optimized(P.invariant_then_mutated, (np.ones(3), 3))

    def test_effects_are_not_hoisted(self):
        body = [P_("t", "new_tape"), P_(None, "push", v("t"), v("w")),
                P_("x", "add", v("x"), c(1.0))]
        assert not licm.run(_loop_fn(body))

    def test_exit_flags_guard(self):
        body = [P_("c", "tanh", v("w")), P_("x", "add", v("x"), v("c")),
                P_("stop", "greater", v("i"), c(0))]
        fn = make(["x", "w", "n", "stop"], [
            For("i", P_(None, "range", v("n"), c(None), c(None)), body, exit_flags=["stop"]),
            Return(v("x"))])
        before = passes.copy_function(fn)
        assert licm.run(fn)
        guard = stmts(fn, If)[0]
        assert guard.body[0].prim == "no_flags"
        one = np.ones(2)
        for args in ((one, one, 3, False), (one, one, 0, False), (one, one, 3, True),
                     (one, "not a number", 3, True)):   # stop set: tanh never runs
            assert identical(outcome(compile_core(fn), args),
                             outcome(compile_core(before), args))

    def test_programs(self):
        r = rng_args()
        x, w = r.standard_normal(3), r.standard_normal(3)
        fn, opt = check_optimized(P.loop_invariant, (x, w, 3))
        loop = stmts(opt, For)[0]
        assert not any(isinstance(s, Prim) and s.prim in ("tanh", "cos") for s in loop.body)
        check_optimized(P.loop_invariant, (x, w, 0))
        check_optimized(P.loop_invariant_const_range, (x, w))
        check_optimized(P.loop_with_break, (x, w))
        check_optimized(P.nested_loops, (x, w))
        check_optimized(P.while_loop, (x, w))


# ============================================================== buffers

DTYPES_FOR_BUFFERS = [np.bool_, np.int8, np.int64, np.uint8, np.float16, np.float32,
                      np.float64, np.complex128]


class TestBuffers:
    @pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "maximum",
                                      "less", "tanh", "negative", "floor_divide"])
    def test_helper_equals_the_plain_expression(self, name, monkeypatch):
        monkeypatch.setattr(buffers, "MIN_SIZE", 0)
        entry = analysis.prim_entry(name)
        nin = entry.impl.nin
        r = rng_args()
        others = lambda d: [np.asarray(r.standard_normal(6) * 3).astype(d),  # noqa: E731
                            2, 2.5, 1j, True, np.float32(1.5), np.int8(3),
                            np.ones((2, 6), d), np.ones((1, 6), d), np.ones((), d), [1.0] * 6]
        for d, pos in itertools.product(DTYPES_FOR_BUFFERS, range(nin)):
            for other in others(d):
                for buf_dtype in (d, np.float64):
                    fresh = lambda: (r.standard_normal(6) * 3).astype(buf_dtype)  # noqa: E731
                    seed = fresh()
                    ops = [other] * nin
                    ops[pos] = seed
                    plain = outcome(lambda *a: (A_plain(entry)(*a)), ops)[0]
                    ops[pos] = seed.copy()
                    got = outcome(buffers.helper(name, pos), ops)[0]
                    assert identical(got, plain), (name, d, pos, other, buf_dtype)

    def test_helper_only_reuses_when_it_fits(self, monkeypatch):
        monkeypatch.setattr(buffers, "MIN_SIZE", 0)
        add_x = buffers.helper("add", 0)
        buf = np.ones(4)
        assert add_x(buf, 1.0) is buf
        assert add_x(np.ones(4), np.ones((2, 4))).shape == (2, 4)       # broadcasts wider
        i = np.ones(4, dtype=np.int64)
        assert add_x(i, 0.5) is not i and add_x(i, 0.5).dtype == np.float64
        view = np.ones(8)[::2]
        assert add_x(view, 1.0) is not view                              # not its memory
        assert type(add_x(np.ones(()), 1.0)) is np.float64              # 0-d: a scalar
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PendingDeprecationWarning)
            m = np.asmatrix(np.ones((2, 2)))
        assert type(add_x(m, 1.0)) is np.matrix
        monkeypatch.setattr(buffers, "MIN_SIZE", 10)
        small = np.ones(4)
        assert add_x(small, 1.0) is not small

    def test_pass_rewrites_single_use_temporaries(self):
        fn = make(["x", "y"], [P_("a", "multiply", v("x"), v("y")),
                               P_("b", "subtract", c(1.0), v("a")),
                               P_("d", "tanh", v("b")),
                               P_("e", "add", v("d"), v("d")),
                               P_("f", "multiply", v("e"), v("e")),
                               P_("r", "add", v("f"), v("e")), Return(v("r"))])
        assert buffers.run(fn)
        kinds = [type(s).__name__ for s in fn.body]
        assert kinds == ["Prim", "External", "External", "External", "Prim", "External",
                         "Return"]
        assert "subtract_into_y(1.0, a)" in source(fn)

    def test_pass_leaves_parameters_shared_and_power_alone(self):
        fn = make(["x", "y"], [P_("a", "multiply", v("x"), v("y")),
                               P_("b", "power", v("a"), c(2)),
                               P_("d", "sin", v("x")), P_("e", "cos", v("d")),
                               P_("r", "make_tuple", (v("b"), v("d"), v("e"))),
                               Return(v("r"))])
        assert not buffers.run(fn)

    def test_pass_across_blocks(self):
        fn = make(["x", "c"], [P_("a", "sin", v("x")),
                               If(v("c"), [P_("b", "cos", v("a"))], [Copy("b", v("x"))]),
                               Return(v("b"))])
        assert not buffers.run(fn)           # producer and consumer in different blocks

    def test_programs_with_large_arrays(self):
        r = rng_args()
        n = buffers.MIN_SIZE
        x, y = r.standard_normal(n), r.standard_normal(n)
        fn, opt = check_optimized(P.chain, (x, y))
        assert len(stmts(opt, External)) >= 3
        check_optimized(P.chain, (x, y), grad=True)
        check_optimized(P.chain_broadcast, (x, r.standard_normal((2, n))))
        check_optimized(P.chain_dtype, (np.arange(n), y))

    def test_speed_on_a_chain(self):
        """Printed, not asserted (timings belong to bench/): a reminder of the gain."""
        r = rng_args()
        x, y = r.standard_normal(10 ** 5), r.standard_normal(10 ** 5)
        fn = normalize(P.chain)
        plain = compile_core(fn)
        fast = compile_core(optimize(fn))
        t0 = min(timeit.repeat(lambda: plain(x, y), number=5, repeat=3))
        t1 = min(timeit.repeat(lambda: fast(x, y), number=5, repeat=3))
        print(f"chain on 1e5 float64: {t0 / 5 * 1e3:.2f} ms -> {t1 / 5 * 1e3:.2f} ms")


def A_plain(entry):
    if entry.operator:
        table = analysis.UNARY_OPERATORS if entry.unary else analysis.BINARY_OPERATORS
        return table[entry.operator]
    return entry.impl


# ============================================================== optimize

class TestOptimize:
    def test_original_is_left_alone(self):
        fn = normalize(P.straight_line)
        text = source(fn)
        opt = optimize(fn)
        assert source(fn) == text and source(opt) != text

    def test_deterministic(self):
        a = source(optimize(normalize(astjax.grad(mlp.loss)._astjax_generated())))
        b = source(optimize(normalize(astjax.grad(mlp.loss)._astjax_generated())))
        assert a == b

    def test_fixpoint_is_bounded(self):
        calls = []

        def always_changes(fn):
            calls.append(1)
            return True
        optimize(normalize(P.chain), passes=[always_changes], max_rounds=3)
        assert len(calls) == 3

    def test_straight_line_program_shrinks(self):
        r = rng_args()
        fn, opt = check_optimized(P.straight_line, (r.standard_normal(3), r.standard_normal(3)))
        assert analysis.count_statements(opt.body) < analysis.count_statements(fn.body) / 2
        assert "exp" not in source(opt)


# ============================================================== end to end

def _n(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape)


# (function, arguments): every program runs plain and as generated gradient code
PROGRAMS = [
    (P.straight_line, lambda: (_n(3), _n(3, seed=1))),
    (P.folding, lambda: (np.abs(_n(3)) + 0.1,)),
    (P.repeated_math, lambda: (_n(4),)),
    (P.branch_reassign, lambda: (_n(3), 1.0)),
    (P.branch_reassign, lambda: (_n(3), -1.0)),
    (P.branch_same_expr, lambda: (_n(3), -1.0)),
    (P.loop_carried, lambda: (_n(3), 3)),
    (P.loop_carried, lambda: (_n(3), 0)),
    (P.loop_invariant, lambda: (_n(3), _n(3, seed=1), 4)),
    (P.loop_invariant, lambda: (_n(3), _n(3, seed=1), 0)),
    (P.loop_invariant_const_range, lambda: (_n(3), _n(3, seed=1))),
    (P.zero_trip_invariant, lambda: (_n(3), _n(4, 2), 0)),
    (P.zero_trip_live_after, lambda: (_n(3), _n(3, seed=1), 0)),
    (P.invariant_then_mutated, lambda: (_n(3), 3)),
    (P.loop_with_break, lambda: (_n(3), _n(3, seed=1))),
    (P.while_loop, lambda: (_n(3), _n(3, seed=1))),
    (P.nested_loops, lambda: (_n(3), _n(3, seed=1))),
    (P.cse_then_mutate, lambda: (_n(3),)),
    (P.zeros_not_shared, lambda: (_n(3),)),
    (P.view_mutation, lambda: (_n(3),)),
    (P.alias_copy_mutation, lambda: (_n(3),)),
    (P.tuple_forward_reassigned, lambda: (_n(3),)),
    (P.slice_update_loop, lambda: (_n(4),)),
    (P.chain, lambda: (_n(3), _n(3, seed=1))),
    (P.squares, lambda: (_n(3),)),
    (control.if_elif_else, lambda: (_n(3),)),
    (control.for_range, lambda: (_n(3), 3)),
    (control.for_range_start_step, lambda: (_n(3),)),
    (control.for_rows, lambda: (_n(3, 4),)),
    (control.for_list, lambda: ([_n(3), _n(3, seed=1)], _n(3, seed=2))),
    (control.for_zip, lambda: ([_n(3), _n(3, seed=1)], [_n(3, seed=2), _n(3, seed=3)])),
    (control.for_enumerate, lambda: (_n(3, 4),)),
    (control.for_reversed, lambda: (_n(3, 4),)),
    (control.while_data, lambda: (_n(4) * 3,)),
    (control.while_counter, lambda: (_n(3), 3)),
    (control.loop_break, lambda: (_n(4),)),
    (control.while_break, lambda: (_n(4),)),
    (control.loop_continue, lambda: (_n(3, 4),)),
    (control.early_return_loop, lambda: (_n(4),)),
    (control.early_return_branch, lambda: (_n(4),)),
    (control.nested_loops, lambda: (_n(2, 3),)),
    (control.nested_loop_matrix, lambda: (_n(3, 3), _n(3))),
    (control.zero_trip_loops, lambda: (_n(3), [])),
    (control.zero_trip_loops, lambda: (_n(3), [np.ones(3), np.ones(3)])),
    (control.loop_collect, lambda: (_n(3),)),
    (control.loop_in_branch, lambda: (_n(3),)),
    (control.loop_in_branch, lambda: (-np.abs(_n(3)) * 0.1,)),
    (control.branch_in_loop, lambda: (_n(3),)),
    (inplace.set_item, lambda: (_n(4),)),
    (inplace.set_row, lambda: (_n(3, 4), _n(4))),
    (inplace.slice_add, lambda: (_n(4),)),
    (inplace.int_array_set, lambda: (_n(4), _n(2))),
    (inplace.mask_set, lambda: (_n(3, 4),)),
    (inplace.mask_set_values, lambda: (_n(3, 4), _n(3, 4, seed=1))),
    (inplace.fill_in_loop, lambda: (_n(5),)),
    (inplace.update_in_loop_2d, lambda: (_n(3, 4),)),
    (inplace.overwrite_used_value, lambda: (_n(3),)),
    (mlp.loss, lambda: ([(_n(3, 4), _n(4)), (_n(4, 2), _n(2))], (_n(5, 3), _n(5, 2)))),
]


@pytest.mark.parametrize("blocked", [False, True], ids=["whole", "blocked"])
@pytest.mark.parametrize("grad", [False, True], ids=["plain", "grad"])
@pytest.mark.parametrize("index", range(len(PROGRAMS)),
                         ids=[f"{f.__module__.split('.')[-1]}.{f.__name__}-{i}"
                              for i, (f, _) in enumerate(PROGRAMS)])
def test_program_unchanged_by_optimization(index, grad, blocked, monkeypatch):
    f, args = PROGRAMS[index]
    if grad and f.__name__ == "view_mutation":
        # an update through a view read afterwards: grad refuses it (transforms/aliasing.py)
        with pytest.raises(astjax.DifferentiationError, match="shares its memory"):
            astjax.grad(f)(*args())
        return
    if blocked:   # fused groups in blocks of one row on three threads (large arrays' path)
        monkeypatch.setattr(runtime_fusion, "MIN_WORK", 0)
        monkeypatch.setattr(runtime_fusion, "BLOCK_ELEMENTS", 1)
        monkeypatch.setenv("ASTJAX_NUM_THREADS", "3")
    # small arrays: let buffer reuse happen anyway, to test it
    check_optimized(f, args(), grad=grad, min_size=0, monkeypatch=monkeypatch)


@pytest.mark.parametrize("index", [0, 2, 8, 24])
def test_program_unchanged_with_argument_dtypes(index, monkeypatch):
    f, args = PROGRAMS[index]
    a = args()
    fn = normalize(f)
    dtypes = {p: x.dtype for p, x in zip(fn.params, a) if type(x) is np.ndarray}
    check_optimized(f, a, arg_dtypes=dtypes, min_size=0, monkeypatch=monkeypatch)


def test_each_pass_alone_keeps_behaviour(monkeypatch):
    monkeypatch.setattr(buffers, "MIN_SIZE", 0)
    for f, args in PROGRAMS[::3]:
        for p in passes.DEFAULT:
            for grad in (False, True):
                target = astjax.grad(f)._astjax_generated() if grad else f
                fn = normalize(target)
                assert_same_behaviour(fn, optimize(fn, passes=[p]), args())


def test_mlp_gradient_statement_count_and_values():
    fn = normalize(astjax.grad(mlp.loss)._astjax_generated())
    opt = optimize(fn)
    before, after = analysis.count_statements(fn.body), analysis.count_statements(opt.body)
    print(f"MLP gradient: {before} -> {after} statements")
    assert after < before
    r = rng_args(3)
    for dtype in (np.float64, np.float32):
        params = [(r.standard_normal((6, 5)).astype(dtype), r.standard_normal(5).astype(dtype)),
                  (r.standard_normal((5, 3)).astype(dtype), r.standard_normal(3).astype(dtype))]
        batch = (r.standard_normal((4, 6)).astype(dtype), r.standard_normal((4, 3)).astype(dtype))
        assert_same_behaviour(fn, opt, (params, batch))


# ============================================================== property test

_PROPERTY_DIR = tempfile.mkdtemp(prefix="astjax_passes_")
ARRAYS = ["x", "y", "a0", "a1", "a2"]
SCALARS = ["s", "t0", "t1"]
FUNCS = ["np.sin", "np.tanh", "np.cos", "np.abs", "np.square"]


class _Gen:
    """Random programs over arrays of shape (4,) and float scalars, as source lines."""

    def __init__(self, draw):
        self.draw = draw
        self.lines: list[str] = []
        self.loops = 0

    def pick(self, seq):
        return self.draw(st.sampled_from(seq))

    def operand(self):
        kind = self.draw(st.integers(0, 5))
        if kind == 0:
            return self.pick(["0.5", "2.0", "1", "0", "-1.5", "1.0"])
        if kind == 1:
            return self.pick(SCALARS)
        return self.pick(ARRAYS)

    def array_stmt(self, ind):
        a = self.pick(ARRAYS)
        b, d = self.pick(ARRAYS), self.operand()
        kind = self.draw(st.integers(0, 12))
        e = {0: f"{b} + {d}", 1: f"{b} - {d}", 2: f"{b} * {d}", 3: f"{self.pick(FUNCS)}({b})",
             4: f"{b}", 5: f"{b} * {b}", 6: f"{b} ** 2", 7: f"{b} ** 1", 8: f"{b}[::-1]",
             9: f"{b} * 1.0", 10: f"np.tanh({b}) * {d}", 11: f"({b}, {d})[0] * 1.0",
             12: f"{d} - np.sin({b})"}[kind]
        if kind == 8 or kind == 4:
            self.lines.append(f"{ind}{a} = {e}")          # an alias or a view
        else:
            self.lines.append(f"{ind}{a} = {e}")

    def scalar_stmt(self, ind):
        s = self.pick(SCALARS)
        kind = self.draw(st.integers(0, 4))
        e = {0: f"float(np.sum({self.pick(ARRAYS)}))", 1: f"{self.pick(SCALARS)} * 0.5 + 1",
             2: "2 - 1", 3: f"len(({self.pick(ARRAYS)}, {self.pick(SCALARS)})) * 0.25",
             4: f"np.tanh({self.pick(SCALARS)})"}[kind]
        self.lines.append(f"{ind}{s} = {e}")

    def setitem_stmt(self, ind):
        a = self.pick(ARRAYS)
        kind = self.draw(st.integers(0, 2))
        if kind == 0:
            self.lines.append(f"{ind}{a}[{self.draw(st.integers(0, 3))}] = {self.pick(SCALARS)}")
        elif kind == 1:
            self.lines.append(f"{ind}{a}[1:3] = {self.pick(ARRAYS)}[0:2] * 0.5")
        else:
            self.lines.append(f"{ind}{a}[0] += {self.pick(SCALARS)}")

    def block(self, ind, depth, n):
        for _ in range(n):
            kind = self.draw(st.integers(0, 9 if depth < 2 else 6))
            if kind <= 3:
                self.array_stmt(ind)
            elif kind <= 5:
                self.scalar_stmt(ind)
            elif kind == 6:
                self.setitem_stmt(ind)
            elif kind == 7:
                self.lines.append(f"{ind}if np.sum({self.pick(ARRAYS)}) > {self.pick(SCALARS)}:")
                self.block(ind + "    ", depth + 1, self.draw(st.integers(1, 3)))
                if self.draw(st.booleans()):
                    self.lines.append(f"{ind}else:")
                    self.block(ind + "    ", depth + 1, self.draw(st.integers(1, 3)))
            elif kind == 8:
                trips = self.pick(["0", "1", "3", "n"])
                self.loops += 1
                self.lines.append(f"{ind}for i{self.loops} in range({trips}):")
                self.block(ind + "    ", depth + 1, self.draw(st.integers(1, 4)))
            else:
                self.loops += 1
                k = f"k{self.loops}"
                self.lines.append(f"{ind}{k} = 0")
                self.lines.append(f"{ind}while {k} < {self.pick(['0', '2', 'n'])}:")
                self.block(ind + "    ", depth + 1, self.draw(st.integers(1, 3)))
                self.lines.append(f"{ind}    {k} = {k} + 1")

    def program(self):
        head = ["import numpy as np", "", "", "def prog(x, y, s, n):",
                "    a0 = x * 1.0", "    a1 = y", "    a2 = np.zeros(4)",
                "    t0 = 2 - 1", "    t1 = s"]
        self.block("    ", 0, self.draw(st.integers(1, 8)))
        out = self.draw(st.lists(st.sampled_from(ARRAYS + SCALARS), min_size=1, max_size=4,
                                 unique=True))
        loss = ["", "", "def loss(x, y, s, n):", "    r = prog(x, y, s, n)",
                "    return np.sum(r[0]) + np.sum(r[-1]) * 0.5"]
        return "\n".join(head + self.lines + [f"    return ({', '.join(out)},)"] + loss + [""])


@st.composite
def programs(draw):
    return _Gen(draw).program()


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=programs(), seed=st.integers(0, 2 ** 16), n=st.integers(0, 3),
       grad=st.booleans())
def test_random_programs_keep_their_behaviour(text, seed, n, grad):
    module = load_source_module(text, _PROPERTY_DIR)
    r = np.random.default_rng(seed)
    args = (r.standard_normal(4), r.standard_normal(4), float(r.standard_normal()), n)
    fn = normalize(module.prog)
    saved = buffers.MIN_SIZE
    buffers.MIN_SIZE = 0
    try:
        for arg_dtypes in (None, {"x": np.float64, "y": np.float64}):
            opt = optimize(fn, arg_dtypes=arg_dtypes)
            assert_same_behaviour(fn, opt, args)
    finally:
        buffers.MIN_SIZE = saved
    if grad:
        try:
            gfn = normalize(astjax.grad(module.loss)._astjax_generated())
        except Exception:   # noqa: BLE001  (programs grad refuses are not this test's concern)
            return
        assert_same_behaviour(gfn, optimize(gfn), args)
