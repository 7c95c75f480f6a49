"""Forward mode: core form -> core form that also carries tangents (``x_dot``).

Every statement that computes a differentiated value is followed by the statements
of its JVP rule (``templates/jvp*.py``, inlined with the operands' names); control
flow is unchanged.  Tangents of values that do not depend on the inputs are absent:
while inlining a rule, a tangent known to be zero is ``None`` and is propagated away
(``dx * y`` with ``dx`` zero disappears, ``a + None`` is ``a``), so the generated code
only computes what can be non-zero.

Invariant kept at run time: a variable that is differentiated holds a real tangent
array whenever it holds a value; where it is assigned something that does not depend
on the inputs, its tangent becomes concrete zeros.
"""
from __future__ import annotations

from astjax import core
from astjax import primitives as P
from astjax.core import (Const, Copy, External, For, If, Prim, Return, SetItem, Var, While)
from astjax.errors import DifferentiationError
from astjax.transforms.rules import rule_template
from astjax.transforms import activity, aliasing, custom
from astjax.transforms.reverse import _diff_operands, _vars

import astjax.core_prims  # noqa: F401

# kinds whose rules take None for a zero tangent (sums of one-tangent terms)
_NONE_OK = {"elementwise", "linalg", "reduction", "structural", "other", "tape"}
# operations that add tangents: a None operand simply drops out
_ADDS = {"add", "acc"}


class _Zero:
    """Marks a tangent known to be zero while a rule is inlined (never left in code)."""

    def __repr__(self):
        return "ZERO"


ZERO = Const(_Zero())


def jvp_template_for(prim_name: str):
    """The jvp rule template of a primitive (parsed once), or None."""
    return rule_template("jvp", prim_name)


class Varied:
    """Which variables depend on the inputs (forward activity); construction checks that
    no differentiated input reaches the returned value through a call without a rule
    (``astjax/transforms/activity.py``)."""

    def __init__(self, fn: core.Function, wrt):
        stmts = list(core.walk(fn.body))
        outputs = [n for s in fn.body if isinstance(s, Return) for n in core.reads(s)]
        self.varied = activity.check_no_silent_zero(stmts, wrt, outputs, fn.env)


class ForwardAD:
    """Adds tangent statements to a core function."""

    def __init__(self, fn: core.Function, wrt: list[str], normalizer_factory):
        self.fn = fn
        activity.updates_as_setitems(fn.body)
        if not fn.checked_updates:
            aliasing.detach(fn, aliasing.check_updates(fn))
        self.varied = Varied(fn, wrt).varied
        self.names = fn.env.names
        self.make_normalizer = normalizer_factory
        self.dots: dict[str, str] = {}
        self.tangent_ids: set[int] = set()
        self.primal_ids: set[int] = set()   # primal statements the transform itself made

    def dot(self, name: str) -> str:
        if name not in self.dots:
            self.dots[name] = self.names.fresh(f"{name}_dot")
        return self.dots[name]

    def active(self, op) -> bool:
        return isinstance(op, Var) and op.name in self.varied

    # ------------------------------------------------------------------ statements

    def transform(self, stmts) -> list:
        """The statements with tangent statements added; ``self.tangent_ids`` gets the
        ids of the added ones (linearize separates the two kinds)."""
        out: list = []
        for s in stmts:
            produced = self.statement(s)
            for st in produced:
                if st is not s and not isinstance(st, (If, For, While)) and id(
                        st) not in self.primal_ids:
                    self.tangent_ids.add(id(st))
            out.extend(produced)
        return out

    def statement(self, s) -> list:
        loc = s.loc
        if isinstance(s, If):
            return [If(s.test, self.transform(s.body), self.transform(s.orelse), loc=loc)]
        if isinstance(s, For):
            body = self.transform(s.body)
            if s.target in self.varied:
                # the loop assigns its target a count or a refused item, never a
                # differentiated value; another assignment made the name varied
                # (``i`` of a later loop, restored from a tape): its tangent is zero here
                zero = self.zero_tangent(s.target, loc)
                self.tangent_ids.add(id(zero))
                body = [zero] + body
            return [For(s.target, s.iter, body, s.exit_flags, loc=loc)]
        if isinstance(s, While):
            return [While(self.transform(s.test_body), s.test, self.transform(s.body),
                          s.exit_flags, loc=loc)]
        if isinstance(s, Return):
            return [s]
        out = [activity.emitted(s)]
        self.primal_ids.add(id(out[0]))
        if isinstance(s, Prim) and s.prim in ("push", "pop", "pop_tangent", "new_tape"):
            return out + self.tape_tangent(s)
        target = s.target if isinstance(s, (Prim, Copy, External, SetItem)) else None
        if target is None or target not in self.varied:
            return out
        if isinstance(s, Copy):
            if self.active(s.value):
                out.append(Copy(self.dot(target), Var(self.dot(s.value.name)), loc=loc))
            else:
                out.append(self.zero_tangent(target, loc))
        elif isinstance(s, SetItem):
            value_dot = (Var(self.dot(s.value.name)) if self.active(s.value)
                         else Const(None))
            out.append(Prim(self.dot(target), "tangent_set",
                            [Var(self.dot(target)), s.index, value_dot, Var(target)], loc=loc))
        elif isinstance(s, Prim) and target in core.atom_vars(s.args):
            # y = f(y, ...): the rule reads the old y, so compute the new one aside first
            new = self.names.fresh(f"{target}_new")
            aside = Prim(new, s.prim, s.args, s.kwargs, loc=loc)
            self.varied.add(new)
            tangent = self.prim_tangent(aside) + [
                Copy(self.dot(target), Var(self.dot(new)), loc=loc)]
            primal = [aside, Copy(target, Var(new), loc=loc)]
            self.primal_ids.update(id(x) for x in primal)
            out = [primal[0]] + tangent + [primal[1]]
        elif isinstance(s, Prim):
            out.extend(self.prim_tangent(s))
        else:
            out.append(self.zero_tangent(target, loc))
        if isinstance(s, (Prim, SetItem)) and activity.may_give_integers(s, self.fn.env):
            # an integer result has a zero tangent (a dtype known only at run time)
            out.append(Prim(self.dot(target), "zero_if_integer", [Var(self.dot(target)),
                                                                  Var(target)], loc=loc))
        return out

    def zero_tangent(self, target, loc):
        return Prim(self.dot(target), "zeros_like", [Var(target)], loc=loc)

    def tape_tangent(self, s: Prim) -> list:
        """A tape of differentiated values gets a parallel tape of their tangents."""
        loc = s.loc
        if s.prim == "new_tape":
            if s.target in self.varied:
                return [Prim(self.dot(s.target), "new_tape", [], loc=loc)]
            return []
        tape = s.args[0]
        if not self.active(tape):
            # a pop from a tape of constants into a name another assignment varies
            return ([self.zero_tangent(s.target, loc)]
                    if s.prim != "push" and s.target in self.varied else [])
        tape_dot = Var(self.dot(tape.name))
        if s.prim == "push":
            v = s.args[1]
            t = Var(self.dot(v.name)) if self.active(v) else Const(None)
            return [Prim(None, "push", [tape_dot, t], loc=loc)]
        return [Prim(self.dot(s.target), "pop_tangent", [tape_dot, Var(s.target)], loc=loc)]

    def prim_tangent(self, s: Prim) -> list:
        loc = s.loc
        prim = P.REGISTRY[s.prim]
        operands = _diff_operands(s)
        if not any(self.active(op) for _, op in operands):
            return [self.zero_tangent(s.target, loc)]
        if s.prim in custom.CUSTOM_PRIMS:
            return custom.tangent(self, s)
        src = jvp_template_for(s.prim)
        if src is None:
            raise DifferentiationError(f"primitive {s.prim!r} has no jvp rule", loc,
                                       "add a template to templates/jvp.py")
        none_ok = prim.kind in _NONE_OK or prim.code.startswith("ra.")
        bindings = {"ans": Var(s.target)}
        for pname, arg in zip(prim.params, s.args):
            bindings[pname.lstrip("*")] = arg
        tangent_names = set()
        for pname in prim.diff:
            arg = s.args[prim.params.index(pname)]
            items = arg if pname.startswith("*") else (arg,)
            tangents = []
            for a in items:
                if self.active(a):
                    tangent_names.add(self.dot(a.name))
                    tangents.append(Var(self.dot(a.name)))
                elif none_ok or not isinstance(a, Var):
                    tangents.append(ZERO)
                else:
                    z = self.names.fresh(f"{a.name}_zero")
                    bindings.setdefault("__zeros__", []).append(
                        Prim(z, "zeros_like", [a], loc=loc))
                    tangent_names.add(z)
                    tangents.append(Var(z))
            name = "d" + pname.lstrip("*")
            bindings[name] = tuple(tangents) if pname.startswith("*") else tangents[0]
        pre = bindings.pop("__zeros__", [])
        norm = self.make_normalizer(self.names, self.fn.env)
        stmts, results = norm.template(src, src.node, bindings, loc,
                                       hint=self.dot(s.target))
        stmts, result, dropped = propagate_zeros(stmts, results[0], tangent_names)
        for st in core.walk(stmts):
            st.loc = loc
        dot = self.dot(s.target)
        if result is None:
            return pre + stmts + [self.zero_tangent(s.target, loc)]
        if dropped and s.prim in _ADDS and s.prim != "add":
            # acc(d, g) with g's tangent zero: d may be None (zero) at run time while
            # the sum is not; the sum still gets a real tangent
            return pre + stmts + [Prim(dot, "instantiate", [result, Var(s.target)], loc=loc)]
        if dropped:
            return pre + stmts + [Prim(dot, "tangent_like", [result, Var(s.target)],
                                       loc=loc)]
        return pre + stmts + [Copy(dot, result, loc=loc)]


def propagate_zeros(stmts, result, tangents):
    """Remove work on tangents known to be zero (None) in an inlined rule.

    ``tangents``: names of the tangent operands the rule received.  Every statement
    of a JVP rule is linear in the tangents it reads, so one whose tangent operands
    are all zero computes zero; in a sum the zero terms drop out.  Returns
    (statements, result operand or None, whether a term was dropped).
    """
    zero: set[str] = set()
    carrying = set(tangents)
    dropped = False
    out = []

    def is_zero(op):
        return op == ZERO or (isinstance(op, Var) and op.name in zero)

    if isinstance(result, Const) and result.value is None:
        result = ZERO  # a rule returning None: the tangent is zero (floor, sign...)

    for st in stmts:
        if isinstance(st, Copy):
            if is_zero(st.value):
                zero.add(st.target)
            else:
                if _vars([st.value]) & carrying:
                    carrying.add(st.target)
                out.append(st)
            continue
        if not isinstance(st, Prim) or st.target is None:
            out.append(st)
            continue
        flat = []
        for a in st.args:
            flat.extend(a if isinstance(a, tuple) else [a])
        flat.extend(st.kwargs.values())
        zeros = [a for a in flat if is_zero(a)]
        live = [a for a in flat if isinstance(a, Var) and a.name in carrying]
        if not zeros:
            if live:
                carrying.add(st.target)
            out.append(st)
            continue
        if not live:
            zero.add(st.target)  # linear in tangents that are all zero
            continue
        carrying.add(st.target)
        prim = P.REGISTRY[st.prim]
        if st.prim in _ADDS or (prim.operator == "+" and not prim.unary):
            out.append(Copy(st.target, live[0], loc=st.loc))
            dropped = True
        elif prim.operator == "-" and not prim.unary:
            if is_zero(st.args[1]):
                out.append(Copy(st.target, st.args[0], loc=st.loc))
            else:
                neg = P.BY_OPERATOR["USub"]
                out.append(Prim(st.target, neg.name, [st.args[1]] + [Const(None)] * (
                    len(neg.params) - 1), loc=st.loc))
            dropped = True
        elif prim.kind == "structural" or prim.code.startswith(("rt.", "ra.")):
            out.append(_replace_zero(st, is_zero, Const(None)))  # these accept None
        else:
            out.append(_replace_zero(st, is_zero, Const(0.0)))
            dropped = True
    if (isinstance(result, Var) and result.name in zero) or result == ZERO:
        return out, None, dropped
    return out, result, dropped


def _replace_zero(st, is_zero, value):
    def fix(a):
        if isinstance(a, tuple):
            return tuple(fix(x) for x in a)
        return value if is_zero(a) else a
    return Prim(st.target, st.prim, [fix(a) for a in st.args],
                {k: fix(v) for k, v in st.kwargs.items()}, loc=st.loc,
                written_as_call=st.written_as_call)
