"""``custom_jvp`` and ``custom_vjp``: functions whose derivative is given.

``checkpoint`` (``astjax/checkpointing.py``) is built on the same machinery: a custom
function whose backward rule recomputes its forward.

A decorated function called outside any transformation runs its primal.  Inside code
astjax transforms, a call of it becomes ONE core statement, ``y = rt.custom_call(rules,
*args)``, where ``rules`` (a ``Rules``) holds the user's functions with the call's static
arguments folded in.  The transformations expand that statement when they meet it
(``astjax/transforms/custom.py``), so the rules are read as source like any other code,
and a rule that calls the decorated function again gets the custom rule again one
order up:

* reverse mode runs the forward rule (``fwd``; the primal for ``custom_jvp`` and
  ``checkpoint``) and, in the backward sweep, the user's ``bwd`` — for ``custom_jvp``
  the transpose of the tangent map (a gradient of ``<g, jvp(x, t)[1]>`` in ``t``), for
  ``checkpoint`` the gradient of the primal recomputed from the saved inputs;
* forward mode inlines the jvp rule (``custom_vjp``: an error, as in JAX); with
  ``symbolic_zeros=True`` the tangent of an operand that is not differentiated reaches
  the rule as a ``SymbolicZero`` (forward mode knows which statically; reverse mode's
  transpose passes one for every operand whose cotangent is not wanted);
* vmap replaces ``rules`` by its batched version (each function vmapped), so that the
  batched primal runs and a later ``grad`` uses the batched rule.

The functions a transformation inlines are small adapters generated here, one per
rule and call layout, taking the call's operands positionally.
"""
from __future__ import annotations

import functools
import inspect
import itertools
import re

import numpy as np

from astjax import codegen
from astjax import runtime as rt
from astjax.errors import TransformError

__all__ = ["custom_jvp", "custom_vjp", "SymbolicZero"]

serial_rules = itertools.count()


# ---------------------------------------------------------------------- generated code

def define_function(fname, params, body, namespace):
    """Compile ``def fname(params): body`` with ``namespace`` as its globals."""
    fname = re.sub(r"\W", "_", fname.replace("<lambda>", "lambda"))   # lifted lambdas
    src = f"def {fname}({', '.join(params)}):\n" + "".join(f"    {ln}\n" for ln in body)
    ns = {"np": np, "rt": rt, **namespace}
    codegen.load_source(src, ns, f"custom rule {fname} {next(serial_rules)}")
    return ns[fname]


def _tree_vdot_lines(g, t, out):
    """Statements computing ``out = sum over leaves of sum(g * t)``."""
    return [f"{out} = 0.0",
            f"for g_leaf, t_leaf in zip(tree_leaves({g}), tree_leaves({t})):",
            f"    {out} = {out} + np.sum(g_leaf * t_leaf)"]


# ------------------------------------------------------------------------ symbolic zeros

class SymbolicZero(np.lib.mixins.NDArrayOperatorsMixin):
    """The tangent of an operand that is not being differentiated, as a
    ``custom_jvp(..., symbolic_zeros=True)`` rule receives it (JAX's
    ``jax.custom_derivatives.SymbolicZero``): the rule can test
    ``isinstance(t, SymbolicZero)`` and skip work; ``shape``, ``dtype`` and ``aval``
    describe the primal, ``instantiate()`` gives concrete zeros.  A rule may return one
    as its output tangent.  It is the same for every example of a vmap (it is not an
    array, so nothing batches it); arithmetic on it computes with zeros, so a rule that
    does use it gets the right numbers."""

    __array_priority__ = 1000
    # vmap: isinstance(t, SymbolicZero) is the same for every example
    astjax_same_in_every_lane = True

    def __init__(self, shape=(), dtype=np.float64):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def aval(self):
        from astjax.shapes import ShapeDtypeStruct
        return ShapeDtypeStruct(self.shape, self.dtype)

    def instantiate(self):
        """Concrete zeros of the same shape and dtype."""
        return np.zeros(self.shape, self.dtype)

    def __array__(self, dtype=None, copy=None):
        return np.zeros(self.shape, dtype or self.dtype)

    def __repr__(self):
        return f"SymbolicZero({self.dtype.name}{list(self.shape)})"

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        plain = [x.instantiate() if isinstance(x, SymbolicZero) else x for x in inputs]
        return getattr(ufunc, method)(*plain, **kwargs)


class _FromPrimal:
    """``SymbolicZero.from_primal_value(x)``: the zero tangent of ``x``.  A class, so
    that a rule calling it keeps it as one opaque call."""

    def __new__(cls, x):
        arr = np.asarray(x)
        return SymbolicZero(arr.shape, arr.dtype if arr.dtype.kind in "fc" else np.float64)


SymbolicZero.from_primal_value = _FromPrimal


def _zeros_tree(x):
    if isinstance(x, (list, tuple)):
        items = [_zeros_tree(v) for v in x]
        return items if isinstance(x, list) else (
            type(x)(*items) if hasattr(x, "_fields") else tuple(items))
    if isinstance(x, dict):
        return {k: _zeros_tree(v) for k, v in x.items()}
    return None if x is None else SymbolicZero.from_primal_value(x)


class symbolic_zero_like:  # noqa: N801  (called like a function)
    """A SymbolicZero per array leaf of ``x`` (containers kept).  A class, so that the
    rules that call it keep it as one opaque call instead of reading its source."""

    def __new__(cls, x):
        return _zeros_tree(x)


class lane_zero_like:  # noqa: N801
    """``symbolic_zero_like`` of one example of ``x``, batched along its last axis."""

    def __new__(cls, x):
        return SymbolicZero.from_primal_value(np.asarray(x)[..., 0])


# under vmap, the zero of one example (the batch is the trailing axis)
symbolic_zero_like.astjax_lane_form = lane_zero_like


# ---------------------------------------------------------------------------- the rules

class Rules:
    """A custom function as the transformations see it: callables over its operands.

    kind      "jvp" (``custom_jvp``), "vjp" (``custom_vjp``) or "remat" (``checkpoint``)
    params    a name per operand (the user's parameter names)
    diff      per operand: True when it carries a derivative (not a nondiff argument)
    primal    ``primal(*xs) -> y``
    jvp       ``jvp(*xs, *ts) -> (y, y_dot)``, ``ts`` for the diff operands only
    fwd       ``fwd(*xs) -> (y, res)`` (kind "vjp")
    bwd       ``bwd(*xs, res, g) -> tuple``: one cotangent per diff operand
    Every callable is a Python function astjax can read (generated or the user's).
    """

    def __init__(self, kind, name, params, diff, primal, jvp=None, fwd=None, bwd=None,
                 policy=None, zero_rule=None):
        self.kind, self.name, self.params, self.diff = kind, name, tuple(params), tuple(diff)
        # custom_jvp(symbolic_zeros=True): zero_rule(zeros) -> a jvp taking the tangents
        # of the diff operands whose entry in ``zeros`` is False only (the others are
        # SymbolicZero inside)
        self.zero_rule = zero_rule
        self._zero_rules: dict = {}
        self.primal, self.jvp, self._fwd, self._bwd = primal, jvp, fwd, bwd
        self.policy = policy
        self._batched: dict = {}
        self._derived: dict = {}
        self._replay = None

    def __call__(self, *xs):
        return self.primal(*xs)

    def __repr__(self):
        return f"<astjax {self.kind} rules of {self.name}>"

    def tangent_rule_for(self, zeros):
        """The tangent rule for a call whose diff operands flagged in ``zeros`` have no
        tangent: with symbolic zeros, a rule taking only the others; else None."""
        zeros = tuple(bool(z) for z in zeros)
        if self.zero_rule is None or not any(zeros):
            return None
        got = self._zero_rules.get(zeros)
        if got is None:
            got = self._zero_rules[zeros] = self.zero_rule(zeros)
        return got

    @property
    def diff_positions(self):
        return [i for i, d in enumerate(self.diff) if d]

    @property
    def fwd(self):
        """``fwd(*xs) -> (y, res)``: the user's, or a checkpoint's that saves its matrix
        products (policy ``dots_saveable``); None: the forward keeps only the inputs."""
        if self._fwd is None and self.kind == "remat" and _saves_products(self.policy):
            from astjax.checkpointing import product_versions
            self._fwd, self._replay = product_versions(self.primal, self.name)
        return self._fwd

    @property
    def bwd(self):
        """The backward rule for every diff operand (see ``bwd_for``)."""
        return self.bwd_for(tuple(self.diff_positions))[0]

    def bwd_for(self, wanted):
        """(backward rule, the operand positions its tuple of cotangents is for).

        The user's ``bwd`` gives every diff operand's cotangent; a derived one (the
        transpose of a jvp rule, a checkpoint's recompute) is generated for the
        ``wanted`` operands only, so nothing is saved or computed for the others.
        """
        if self._bwd is not None:
            return self._bwd, tuple(self.diff_positions)
        wanted = tuple(wanted)
        got = self._derived.get(wanted)
        if got is None:
            got = self._derived[wanted] = (self._derive_bwd(wanted), wanted)
        return got

    def _derive_bwd(self, wanted):
        xs = list(self.params)
        tag = "_".join(str(i) for i in wanted)
        ns = {"grad": _grad(), "tree_leaves": _tree_leaves()}
        if self.kind == "remat":
            # the gradient of <g, primal(xs)>: the forward runs again, with its tape
            # (with the products the forward saved, ``res``, read back instead of made)
            replay = self.fwd is not None
            ns["primal"] = self._replay if replay else self.primal
            args = xs + (["res"] if replay else [])
            dot = define_function(f"{self.name}_out_dot", args + ["g"],
                          [f"out = primal({', '.join(args)})"]
                          + _tree_vdot_lines("g", "out", "total") + ["return total"], ns)
            ns["out_dot"] = dot
            call = f"grad(out_dot, argnums={tuple(wanted)!r})({', '.join(args)}, g)"
            return define_function(f"{self.name}_recompute_bwd_{tag}", xs + ["res", "g"],
                           [f"return {call}"], ns)
        # kind "jvp": the tangent map t -> jvp(xs, t)[1] is linear; its transpose at g is
        # the gradient of <g, jvp(xs, t)[1]> in t (at any t: zeros)
        diff = self.diff_positions
        unperturbed = self.tangent_rule_for([i not in wanted for i in diff])
        if unperturbed is not None:    # symbolic zeros for the operands not wanted
            diff = [i for i in diff if i in wanted]
        ns["jvp"] = unperturbed or self.jvp
        ts = [f"{xs[i]}_t" for i in diff]
        dot = define_function(f"{self.name}_tangent_dot", xs + ts + ["g"],
                      [f"pair = jvp({', '.join(xs + ts)})", "t_out = pair[1]"]
                      + _tree_vdot_lines("g", "t_out", "total") + ["return total"], ns)
        ns["tangent_dot"] = dot
        argnums = tuple(len(xs) + diff.index(i) for i in wanted)
        zeros = [f"rt.zeros_like({xs[i]})" for i in diff]
        call = f"grad(tangent_dot, argnums={argnums!r})({', '.join(xs + zeros)}, g)"
        return define_function(f"{self.name}_transpose_{tag}", xs + ["res", "g"],
                               [f"return {call}"], ns)

    @functools.cached_property
    def tangent_rule(self):
        """``(*xs, *ts) -> (y, y_dot)``: the user's jvp rule, or (checkpoint) the primal's."""
        if self.kind != "remat":
            return self.jvp
        from astjax.forward_api import jvp
        xs = list(self.params)
        diff = self.diff_positions
        ts = [f"{xs[i]}_t" for i in diff]
        full = [ts[diff.index(i)] if i in diff else f"rt.zeros_like({x})"
                for i, x in enumerate(xs)]
        return define_function(f"{self.name}_jvp", xs + ts,
                       [f"return jvp(primal, {_tup(xs)}, {_tup(full)})"],
                       {"jvp": jvp, "primal": self.primal})

    def batched(self, axes):
        """These rules for operands batched along ``axes`` (-1: the last axis; None)."""
        axes = tuple(axes)
        got = self._batched.get(axes)
        if got is None:
            got = self._batched[axes] = self._make_batched(axes)
        return got

    def _make_batched(self, axes):
        from astjax.batch_api import vmap
        name = f"{self.name}_batched"
        primal = vmap(self.primal, in_axes=axes, out_axes=-1)
        tangent_axes = tuple(a for a, d in zip(axes, self.diff) if d)
        if self.kind == "jvp":
            jvp = vmap(self.jvp, in_axes=axes + tangent_axes, out_axes=-1)
            zero_rule = None
            if self.zero_rule is not None:
                def zero_rule(zeros):
                    return self._batched_zero_rule(axes, zeros)
            return Rules("jvp", name, self.params, self.diff, primal, jvp=jvp,
                         zero_rule=zero_rule)
        if self.kind == "remat":
            return Rules("remat", name, self.params, self.diff, primal, policy=self.policy)
        fwd = vmap(self.fwd, in_axes=axes, out_axes=-1)
        inner = vmap(self.bwd, in_axes=axes + (-1, -1), out_axes=-1)
        # a cotangent for an operand the same in every lane is the sum over the lanes
        xs = list(self.params)
        body = ["cts = inner(" + ", ".join(xs + ["res", "g"]) + ")"]
        outs = []
        for k, i in enumerate(self.diff_positions):
            if axes[i] is None:
                body.append(f"ct_{k} = tree_map(lane_sum, cts[{k}])")
            else:
                body.append(f"ct_{k} = cts[{k}]")
            outs.append(f"ct_{k}")
        body.append(f"return ({', '.join(outs)}{',' if len(outs) == 1 else ''})")
        ns = {"inner": inner, "tree_map": _tree_map(), "lane_sum": _lane_sum}
        bwd = define_function(f"{name}_bwd", xs + ["res", "g"], body, ns)
        return Rules("vjp", name, self.params, self.diff, primal, fwd=fwd, bwd=bwd)


    def _batched_zero_rule(self, axes, zeros):
        """The batched rule with SymbolicZero tangents: made outside the vmapped rule
        (one per example shape, the same for every lane) and passed in unbatched."""
        from astjax.api import stop_gradient
        from astjax.batch_api import vmap
        xs = list(self.params)
        diff = self.diff_positions
        ts_axes = tuple(None if z else axes[i] for i, z in zip(diff, zeros))
        inner = vmap(self.jvp, in_axes=tuple(axes) + ts_axes, out_axes=-1)
        body, ts = [], []
        for i, z in zip(diff, zeros):
            t = f"{xs[i]}_t"
            ts.append(t)
            if z:
                maker = "lane_zero_like" if axes[i] is not None else "symbolic_zero_like"
                body += [f"{xs[i]}_still = stop_gradient({xs[i]})",
                         f"{t} = {maker}({xs[i]}_still)"]
        body.append(f"return inner({', '.join(xs + ts)})")
        kept = [t for t, z in zip(ts, zeros) if not z]
        tag = "".join("z" if z else "t" for z in zeros)
        return define_function(f"{self.name}_jvp_rule_{tag}", xs + kept, body,
                               {"inner": inner, "stop_gradient": stop_gradient,
                                "lane_zero_like": lane_zero_like,
                                "symbolic_zero_like": symbolic_zero_like})


def _saves_products(policy):
    from astjax.checkpointing import checkpoint_policies as cp
    return policy in (cp.dots_saveable, cp.dots_with_no_batch_dims_saveable)


def _where(fn):
    """``name (file.py:line)`` of a user's rule, for error messages."""
    code = getattr(fn, "__code__", None)
    name = getattr(fn, "__name__", repr(fn))
    return f"{name} ({code.co_filename}:{code.co_firstlineno})" if code else name


def _tup(items):
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _lane_sum(x):
    return np.sum(x, axis=-1)


def _grad():
    from astjax.api import grad
    return grad


def _tree_leaves():
    from astjax.tree_util import tree_leaves
    return tree_leaves


def _tree_map():
    from astjax.tree_util import tree_map
    return tree_map


# ---------------------------------------------------------------- user-facing decorators

class CustomFunction:
    """What the three decorators share: the primal, nondiff arguments, binding a call."""

    kind = ""

    def __init__(self, fun, nondiff_argnums=()):
        if not callable(fun):
            raise TypeError(f"{type(self).__name__} expects a function, got {fun!r}")
        self.fun = fun
        self.nondiff_argnums = tuple(sorted(int(i) for i in nondiff_argnums))
        self.__name__ = getattr(fun, "__name__", "custom")
        self.__qualname__ = getattr(fun, "__qualname__", self.__name__)
        self.__doc__ = getattr(fun, "__doc__", None)
        self.__module__ = getattr(fun, "__module__", None)
        self._rules: dict = {}
        self._wrapper = None

    def __call__(self, *args, **kwargs):
        return self.fun(*args, **kwargs)

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)

    @property
    def __wrapped__(self):
        """A plain function with the primal's parameters that calls this object: what
        ``grad(f)`` reads when ``f`` itself is the custom function."""
        if self._wrapper is None:
            sig = inspect.signature(self.fun)
            params, call, ns = [], [], {"custom": self}
            for p in sig.parameters.values():
                if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                    raise TypeError(f"{self.__name__}: *args/**kwargs parameters are not "
                                    "supported by astjax's custom rules")
                if p.default is not p.empty:
                    ns[f"{p.name}_default"] = p.default
                    params.append(f"{p.name}={p.name}_default")
                else:
                    params.append(p.name)
                call.append(p.name)
            self._wrapper = define_function(self.__name__ if self.__name__.isidentifier() else "f",
                                    params, [f"return custom({', '.join(call)})"], ns)
        return self._wrapper

    def _signature_names(self):
        return [p.name for p in inspect.signature(self.fun).parameters.values()]

    def rules(self, statics):
        """The Rules of a call whose static arguments are ``statics`` ({position: obj})."""
        key = tuple((i, ("id", id(v)) if callable(v) or not isinstance(
            v, (int, float, str, bool, tuple, type(None))) else ("value", type(v), v))
            for i, v in sorted(statics.items()))
        got = self._rules.get(key)
        if got is None:
            got = self._rules[key] = (self._make_rules(dict(statics)), statics)
        return got[0]

    def _layout(self, statics):
        """(operand parameter names, call expression pieces) with statics as globals."""
        names = self._signature_names()
        operands, pieces, ns = [], [], {}
        for i, n in enumerate(names):
            if i in statics:
                ns[f"static_{n}"] = statics[i]
                pieces.append(f"static_{n}")
            else:
                operands.append(n)
                pieces.append(n)
        return names, operands, pieces, ns

    def _astjax_custom_call(self, norm, args, kwargs, node, hint, target):
        """The normalizer's hook: this call becomes ``rt.custom_call(rules, *operands)``."""
        return normalize_call(self, norm, args, kwargs, node, hint, target)

    def _make_rules(self, statics):
        raise NotImplementedError


class custom_jvp(CustomFunction):
    """``jax.custom_jvp``: a function whose forward-mode derivative is given by a rule.

    ``@f.defjvp`` registers ``rule(primals, tangents) -> (primal_out, tangent_out)``
    (nondiff arguments come first, ``rule(*nondiff, primals, tangents)``).  Reverse mode
    transposes the rule's tangent map; higher orders differentiate the rule.
    """

    kind = "jvp"

    def __init__(self, fun, nondiff_argnums=(), symbolic_zeros=False):
        super().__init__(fun, nondiff_argnums)
        self.symbolic_zeros = bool(symbolic_zeros)
        self.jvp = None

    def defjvp(self, jvp, symbolic_zeros=None):
        """Register ``jvp(primals, tangents) -> (primal_out, tangent_out)``.

        ``symbolic_zeros=True`` (here or on the decorator): the tangent of an argument
        that is not being differentiated arrives as a ``SymbolicZero`` (so the rule can
        skip its terms), and the rule may return one for a zero output tangent."""
        if symbolic_zeros is not None:
            self.symbolic_zeros = bool(symbolic_zeros)
        self.jvp = jvp
        self._rules.clear()
        return jvp

    def defjvps(self, *jvps):
        """One rule per argument, ``jvp_i(g, ans, *primals)`` (None: no dependence);
        the output tangent is their sum (JAX's ``defjvps``)."""
        names = [n for i, n in enumerate(self._signature_names())
                 if i not in self.nondiff_argnums]
        if self.nondiff_argnums or len(jvps) != len(names):
            raise TypeError(f"{self.__name__}.defjvps takes one rule (or None) per argument "
                            f"({len(names)}), and no nondiff_argnums")
        ns = {"custom": self}
        ts = [f"{n}_dot" for n in names]
        body = [f"{_tup(names)} = primals", f"{_tup(ts)} = tangents",
                f"ans = custom({', '.join(names)})"]
        terms = []
        for k, fn in enumerate(jvps):
            if fn is not None:
                ns[f"jvp_{k}"] = fn
                terms.append(f"jvp_{k}({ts[k]}, ans, {', '.join(names)})")
        body.append(f"ans_dot = {' + '.join(terms) if terms else 'rt.zeros_like(ans)'}")
        body.append("return ans, ans_dot")
        self.defjvp(define_function(f"{self.__name__}_jvps", ["primals", "tangents"], body, ns))

    def _make_rules(self, statics):
        if self.jvp is None:
            raise TransformError(f"custom_jvp function {self.__name__} has no rule: "
                                 "call defjvp before transforming it")
        names, operands, pieces, ns = self._layout(statics)
        ns.update(fun=self.fun, rule=self.jvp)
        diff = [names.index(n) not in self.nondiff_argnums for n in operands]
        primal = define_function(f"{self.__name__}_primal", operands,
                         [f"return fun({', '.join(pieces)})"], ns)
        nd = [p for i, p in enumerate(pieces) if i in self.nondiff_argnums]
        dp = [p for i, p in enumerate(pieces) if i not in self.nondiff_argnums]
        ts = [f"{n}_t" for n, d in zip(operands, diff) if d]
        what = (f"the custom_jvp rule {_where(self.jvp)} of {self.__name__} (it must "
                "return (primal_out, tangent_out))")
        jvp = define_function(f"{self.__name__}_jvp_rule", operands + ts,
                      [f"pair = rule({', '.join(nd + [_tup(dp), _tup(ts)])})",
                       f"return rt.custom_cotangents(pair, 2, {what!r})"], ns)
        zero_rule = None
        if self.symbolic_zeros:
            diff_ops = [n for n, d in zip(operands, diff) if d]

            def zero_rule(zeros):
                """The rule with the flagged tangents made SymbolicZero inside (from a
                stop_gradient'ed primal: nothing differentiates through the zero)."""
                body = []
                for n, z in zip(diff_ops, zeros):
                    if z:
                        body += [f"{n}_still = stop_gradient({n})",
                                 f"{n}_t = symbolic_zero_like({n}_still)"]
                kept = [f"{n}_t" for n, z in zip(diff_ops, zeros) if not z]
                body += [f"pair = rule({', '.join(nd + [_tup(dp), _tup(ts)])})",
                         f"return rt.custom_cotangents(pair, 2, {what!r})"]
                tag = "".join("z" if z else "t" for z in zeros)
                from astjax.api import stop_gradient
                return define_function(f"{self.__name__}_jvp_rule_{tag}", operands + kept,
                                       body, dict(ns, stop_gradient=stop_gradient,
                                                  symbolic_zero_like=symbolic_zero_like))
        return Rules("jvp", self.__name__, operands, diff, primal, jvp=jvp,
                     zero_rule=zero_rule)


class custom_vjp(CustomFunction):
    """``jax.custom_vjp``: a function whose reverse-mode derivative is given.

    ``f.defvjp(fwd, bwd)``: ``fwd(*args) -> (out, residuals)`` (residuals any pytree),
    ``bwd(*nondiff, residuals, g) -> tuple`` with one cotangent (or None) per other
    argument.  Forward mode (jvp, jacfwd, hessian) is an error, as in JAX.
    """

    kind = "vjp"

    def __init__(self, fun, nondiff_argnums=()):
        super().__init__(fun, nondiff_argnums)
        self.fwd = self.bwd = None

    def defvjp(self, fwd, bwd, symbolic_zeros=False):
        if symbolic_zeros:
            from astjax.generation import caller_location
            raise TransformError(
                f"{self.__name__}.defvjp(symbolic_zeros=True) is not supported by astjax",
                caller_location(2),
                "drop symbolic_zeros: the fwd rule then receives concrete values and the "
                "bwd rule returns zeros for unused inputs (custom_jvp supports "
                "symbolic_zeros=True)")
        self.fwd, self.bwd = fwd, bwd
        self._rules.clear()

    def _make_rules(self, statics):
        if self.fwd is None:
            raise TransformError(f"custom_vjp function {self.__name__} has no rule: "
                                 "call defvjp(fwd, bwd) before transforming it")
        names, operands, pieces, ns = self._layout(statics)
        ns.update(fun=self.fun, fwd_rule=self.fwd, bwd_rule=self.bwd)
        diff = [names.index(n) not in self.nondiff_argnums for n in operands]
        primal = define_function(f"{self.__name__}_primal", operands,
                         [f"return fun({', '.join(pieces)})"], ns)
        fwd = define_function(f"{self.__name__}_fwd", operands,
                      [f"return fwd_rule({', '.join(pieces)})"], ns)
        nd = [p for i, p in enumerate(pieces) if i in self.nondiff_argnums]
        ndiff = len(names) - len(self.nondiff_argnums)
        what = (f"the custom_vjp backward rule {_where(self.bwd)} of {self.__name__} (it "
                f"must return one cotangent or None per argument not in nondiff_argnums)")
        body = [f"cts = bwd_rule({', '.join(nd + ['res', 'g'])})",
                f"return rt.custom_cotangents(cts, {ndiff}, {what!r})"]
        bwd = define_function(f"{self.__name__}_bwd", operands + ["res", "g"], body, ns)
        return Rules("vjp", self.__name__, operands, diff, primal, fwd=fwd, bwd=bwd)


# ------------------------------------------------------------------- the frontend's hook

def normalize_call(custom, norm, args, kwargs, node, hint, target):
    """Emit the core statement of a call of ``custom`` (a decorated function).

    Arguments bound to parameters are operands; a function passed for a nondiff (or
    static) parameter is folded into the rules, as are constants for ``checkpoint``'s
    ``static_argnums``.
    """
    from astjax.core import Const, Prim, Var
    from astjax.frontend.normalize import FuncArg, ObjFunc, _is_function_value
    if getattr(custom, "saves_everything", False):
        return norm.call_function_ref(("object", custom.fun), args, kwargs, node, hint, target)
    name = custom.__name__
    params = list(inspect.signature(custom.fun).parameters.values())
    if len(args) > len(params):
        norm.error(node, f"{name}() takes {len(params)} arguments but {len(args)} were given",
                   cls=TransformError)
    bound = {p.name: a for p, a in zip(params, args)}
    for k, v in kwargs.items():
        if k not in {p.name for p in params} or k in bound:
            norm.error(node, f"{name}() got an unexpected keyword argument {k!r}",
                       cls=TransformError)
        bound[k] = v
    statics, operands = {}, []
    for i, p in enumerate(params):
        if p.name in bound:
            a = bound[p.name]
        elif p.default is not p.empty:
            a = p.default
            a = FuncArg(ObjFunc(a, None)) if _is_function_value(a) else \
                norm.object_operand(a, f"{p.name}_default")
        else:
            norm.error(node, f"{name}() missing argument {p.name!r}", cls=TransformError)
        static = i in custom.nondiff_argnums
        if isinstance(a, FuncArg):
            if not static:
                norm.error(node, f"{name}(): argument {p.name!r} is a function; list its "
                                 "position in nondiff_argnums", cls=TransformError)
            if not isinstance(a.func, ObjFunc):
                norm.error(node, f"{name}(): the function passed for {p.name!r} must be one "
                                 "astjax can keep with the rules: a module-level function, "
                                 "or functools.partial of one",
                           "define it with def at module level, not as a lambda or a "
                           "nested def", cls=TransformError)
            statics[i] = a.func.obj
        elif static and custom.kind == "remat" and isinstance(a, Const):
            statics[i] = a.value
        else:
            operands.append(norm.plain(a, node))
    rules = custom.rules(statics)
    ref = Var(norm.env.value_ref(rules, name))
    out = target if target is not None else norm.tmp(hint or name, name)
    norm.emit(Prim(out, "custom_call", [ref, tuple(operands)]))
    return Var(out)
