"""vmap: core form -> core form operating on a batch of examples at once.

A batched array holds the batch as its LAST axis (``astjax/runtime_batch.py`` says
why).  Each statement with a batched operand uses its primitive's batching rule
(``templates/batch.py``); elementwise primitives need none — unbatched operands get a
trailing axis of 1 (``rb.lift``) and NumPy broadcasting does the rest.

Control flow on batched values becomes data flow: an ``if`` whose test differs per
example runs both branches and keeps, per lane, the values of the branch that lane
takes (``rb.select``); a ``while`` whose test differs per example runs until every
lane is done, freezing finished lanes; a ``for`` that some lanes leave early (a
batched ``break``/``return`` flag) keeps iterating while any lane is still inside,
the others frozen.  A branch no lane takes is skipped; inside code that only some
lanes run, in-place updates write a copy (the other lanes keep the old array).

Reverse-mode code needs two more things: the backward sweep of a loop whose trip count
differs per example (``for step in range(0, trips)`` popping the tape) runs as many
steps as the longest lane with each lane active in its last ``trips`` steps, and a
backward branch pops its else part first (the forward pushed both parts, in order).
An index that differs per example (a loop counter, an argmax) goes to the rule
``<primitive>_per_example_index``; a boolean mask or slice bounds that differ per
example are refused (the result's size would differ).
"""
from __future__ import annotations


import numpy as np

from astjax import core
from astjax import primitives as P
from astjax.core import (Assert, Const, Copy, External, For, If, Index, Prim, Raise, Return,
                         SetItem, SliceAtom, Var, While)
from astjax.errors import TransformError
from astjax.transforms import custom
from astjax.transforms.rules import rule_template

import astjax.core_prims  # noqa: F401

# results that are facts about ONE example (shapes, axes, plans): never batched; their
# batching rules compute the fact from one example
_STATIC = {"shape", "ndim", "size", "len", "dtype", "not_none", "eye_last",
           "tree_structure_of"} | {
    n for n, p in P.REGISTRY.items() if p.kind == "static"} - {"clamp_index", "format_string",
                                                                "meta"}


def batch_rule(prim_name: str):
    """The batching rule template of a primitive (parsed once), or None."""
    return rule_template("batch", prim_name)


# parameters that never hold per-example array data (indices, axes, shapes, options)
_NOT_DATA = {"index", "indices", "axis", "axes", "axis1", "axis2", "source", "destination",
             "shape", "newshape", "keepdims", "dtype", "out", "order", "ddof", "reps",
             "repeats", "shift", "pad_width", "mode", "offset", "kind", "stable",
             "subscripts", "indices_or_sections", "n", "ord", "which", "reverse", "name",
             "keys", "fname", "copy", "casting", "subok", "optimize", "step", "num",
             "endpoint", "k", "decimals", "i", "ndigits", "sorter", "side", "upper", "UPLO",
             "length", "template", "dimensions", "N", "M", "rtol", "atol", "equal_nan",
             "sparse", "indexing", "retstep", "how", "key"}
# structural primitives that build a new container from their operands and nothing
# else: a container of values that are the same in every lane is too
_PURE_CONTAINERS = {"make_tuple", "make_list", "make_dict", "append", "to_list",
                    "tree_index", "getattr", "as_sequence", "pack_tuple", "pack_list",
                    "make_dict_from"}
# index parameters a batching rule accepts per example (the others must be unbatched)
_BATCHED_INDEX_OK = {"take_along_axis", "take_along_axis_vjp", "clamp_index"}
# NumPy options a batching rule takes per example: (primitive, parameter) -> the rule
# in templates/batch.py (any other per-example option is refused)
_PER_EXAMPLE_OPTIONS = {("roll", "shift"): "roll_per_example_shift"}
# NumPy functions whose rules take every option lane by lane (``rb.created``: the
# shapes, sizes and bounds of creation functions)
_LANE_BY_LANE_OPTIONS = frozenset({"zeros", "ones", "empty", "eye", "identity", "tri",
                                   "indices", "full", "full_like", "arange"})
# primitives whose per-example (batched) index goes to the rule
# ``<primitive>_per_example_index`` in templates/batch.py
_PER_EXAMPLE_INDEX = {"getitem", "getitem_vjp", "getitem_jvp", "acc_at", "cot_at", "cot_written",
                      "setitem",
                      "setitem_zero", "cot_zero_at", "save_at", "restore_at", "setitem_jvp",
                      "tangent_set"}


def _where_has_values(args, kwargs) -> bool:
    """Whether an ``np.where`` call selects values (``np.where(c, x, y)``) rather than
    giving the positions where ``c`` holds (``np.where(c)``, ``np.nonzero``'s)."""
    given = [a for a in args[1:] if not (isinstance(a, Const) and a.value is None)]
    given += [v for k, v in kwargs.items() if k in ("x", "y") and
              not (isinstance(v, Const) and v.value is None)]
    return bool(given)


def _lifted_params(prim):
    """Parameters holding array data, which an unbatched operand must be lifted for."""
    return {p for p in prim.params if p.lstrip("*") not in _NOT_DATA} | set(prim.diff)


# runtime helpers that hand an operand back as a batched result: an unbatched one is
# lifted first (the unbatched tangent of a batched sequence, split into its rows by
# the loop over it, gave rows without the batch axis: wrong broadcasting)
_LIFTED_RT = frozenset({"as_sequence_cotangent", "list_tangent"})

# a pop of a tangent tape (forward code of reverse code) is a pop
_POPS = ("pop", "pop_tangent")


class Batching:
    """Which variables are batched, and the batched version of a core function body."""

    def __init__(self, fn: core.Function, batched_params, size_var: str, normalizer_factory):
        self.fn = fn
        self.names = fn.env.names
        self.size = size_var
        self.make_normalizer = normalizer_factory
        self.batched = self._analyse(set(batched_params))
        self.undefined_ok: set[str] = set()   # merged by select: pre-set to None
        self.loop_targets = {st.target for st in core.walk(fn.body) if isinstance(st, For)}
        self.pop_tapes = {st.args[0].name for st in core.walk(fn.body)
                          if isinstance(st, Prim) and st.prim in _POPS and
                          st.target in self.pop_only and isinstance(st.args[0], Var)
                          and st.args[0].name in self.lane_tapes}
        self.masks: list = []   # lanes running the code being transformed (innermost last)
        # variables live after each statement: a branch's temporaries that nothing reads
        # afterwards need no per-lane merge (their shapes may differ per lane)
        from astjax.passes.analysis import liveness
        self.live_after = liveness(fn)

    # ---------------------------------------------------------------- analysis

    def _analyse(self, batched):
        # facts about the example's shape assigned once: the same in every lane, even
        # when computed inside a branch or loop that only some lanes take
        counts: dict = {}
        for s in core.walk(self.fn.body):
            for w in core.writes(s):
                counts[w] = counts.get(w, 0) + 1
        uniform: set = set()
        grew = True
        while grew:   # and what is computed from those alone (x.shape[1], n - 1...)
            grew = False
            for s in core.walk(self.fn.body):
                if not (isinstance(s, (Prim, Copy)) and s.target and
                        counts.get(s.target) == 1 and s.target not in uniform):
                    continue
                if isinstance(s, Prim) and s.prim in _STATIC:
                    ok = True
                else:
                    # containers of such facts too (an index list, a shape tuple)
                    ok = (isinstance(s, Copy) or s.prim in _PURE_CONTAINERS or
                          P.REGISTRY[s.prim].kind not in ("tape", "batch", "structural")) \
                        and set(core.reads(s)) <= uniform
                if ok:
                    uniform.add(s.target)
                    grew = True
        # a variable only ever popped (second-order code pops saved cotangents into
        # fresh names) is batched when its tape carries batched values
        popped = {s.target for s in core.walk(self.fn.body)
                  if isinstance(s, Prim) and s.prim in _POPS and s.target}
        others = {w for s in core.walk(self.fn.body) if not (isinstance(s, Prim) and
                                                             s.prim in _POPS)
                  for w in core.writes(s)}
        self.pop_only = popped - others
        self.lane_tapes: set = set()
        sharing = _sharing_groups(self.fn)
        self.sharing_at_update = _sharing_before_updates(self.fn)
        changed = True
        while changed:
            changed = False
            for s in core.walk(self.fn.body):
                new = set()
                if isinstance(s, Prim) and s.prim == "push":
                    if _vars_of(s.args[1]) & batched and isinstance(s.args[0], Var) and \
                            s.args[0].name not in self.lane_tapes:
                        self.lane_tapes.add(s.args[0].name)
                        changed = True
                elif isinstance(s, Prim) and s.prim in _POPS:
                    # a restore: batched exactly when the variable's other values are
                    if s.target in self.pop_only and _vars_of(s.args[0]) & self.lane_tapes:
                        new.add(s.target)
                elif isinstance(s, Prim) and s.prim == "restore_at":
                    if _vars_of(s.args[0]) & batched:
                        new |= _vars_of(s.args[2])
                elif isinstance(s, Prim) and s.target and s.prim not in _STATIC:
                    if set(core.reads(s)) & batched:
                        new.add(s.target)
                elif isinstance(s, Copy) and core.atom_vars([s.value]) and \
                        set(core.atom_vars([s.value])) & batched:
                    new.add(s.target)
                elif isinstance(s, SetItem) and set(core.reads(s)) & batched:
                    # and every name that may share the updated memory (``w = z``, a
                    # view ``r = z[0]``, a helper's parameter): made batched where it
                    # is made, so that they stay one array (a per-example write into a
                    # new batched copy bound to one name left the others unchanged)
                    new |= sharing.get(s.target, {s.target})
                elif isinstance(s, If) and set(core.reads(s)) & batched:
                    new |= (core.all_writes(s.body) | core.all_writes(s.orelse)) - uniform
                elif isinstance(s, While) and (set(core.atom_vars([s.test])) |
                                               set(s.exit_flags)) & batched:
                    new |= (core.all_writes(s.body) | core.all_writes(s.test_body)) - uniform
                elif isinstance(s, For) and set(core.reads(s)) & batched:
                    new |= core.all_writes(s.body) - {s.target} - uniform
                if new - batched:
                    batched |= new
                    changed = True
        return batched

    def is_batched(self, op) -> bool:
        return isinstance(op, Var) and op.name in self.batched

    # ---------------------------------------------------------------- statements

    def transform(self, stmts) -> list:
        out: list = []
        for s in stmts:
            out.extend(self.statement(s))
        return out

    def _object(self, op):
        """The Python object an operand names (a global, cell or constant), or None."""
        env = self.fn.env
        if isinstance(op, Const):
            return op.value
        if not isinstance(op, Var) or op.name not in env.entries:
            return None
        entry = env.entries[op.name]
        if entry[0] == "global":
            return entry[1].get(entry[2])
        return entry[1].cell_contents if entry[0] == "cell" else entry[1]

    def _lane_uniform_test(self, s):
        """``isinstance(x, C)`` with a class C flagged ``astjax_same_in_every_lane``."""
        if s.method or len(s.args) != 2 or self._object(s.func) is not isinstance:
            return False
        cls = self._object(s.args[1])
        return bool(getattr(cls, "astjax_same_in_every_lane", False))

    def _lane_form(self, s):
        """The ``astjax_lane_form`` of an External's callee, as an operand, or None."""
        if s.method:
            return None
        lane = getattr(self._object(s.func), "astjax_lane_form", None)
        return None if lane is None else Var(self.fn.env.value_ref(lane,
                                                                   s.func.name + "_lane"))

    def error(self, s, message, hint=None):
        raise TransformError(message, s.loc, hint)

    def statement(self, s) -> list:
        loc = s.loc
        if isinstance(s, If):
            if self.is_batched(s.test):
                return self.batched_if(s)
            return [If(s.test, self.transform(s.body), self.transform(s.orelse), loc=loc)]
        if isinstance(s, While):
            if self.is_batched(s.test) or set(s.exit_flags) & self.batched:
                return self.batched_while(s)
            return [While(self.transform(s.test_body), s.test, self.transform(s.body),
                          s.exit_flags, loc=loc)]
        if isinstance(s, For):
            iter_reads = set(core.reads(s)) - set(s.exit_flags)
            if iter_reads & self.batched:
                if _is_replay_loop(s):
                    return self.batched_replay_for(s)
                self.error(s, "vmap: a for loop whose number of steps differs per example",
                           "loop to the largest length and mask, or use lax.while_loop")
            if set(s.exit_flags) & self.batched:
                return self.batched_for(s)
            return [For(s.target, s.iter, self.transform(s.body), s.exit_flags, loc=loc)]
        if isinstance(s, Assert) and set(core.reads(s)) & self.batched:
            return self.batched_assert(s)
        if isinstance(s, (Return, Raise)):
            if isinstance(s, Raise) and set(core.reads(s)) & self.batched:
                self.error(s, "vmap: raise with a per-example message is not supported")
            return [s]
        if isinstance(s, External):
            # isinstance(t, SymbolicZero) answers the same for every example (a
            # custom_jvp rule with symbolic_zeros=True); a callee with an
            # ``astjax_lane_form`` makes one value for all lanes from the batched ones
            same_in_every_lane = self._lane_uniform_test(s)
            lane = self._lane_form(s)
            if lane is not None and set(core.reads(s)) & self.batched:
                return [External(s.target, lane, s.args, s.kwargs, s.method, loc=loc)]
            if set(core.reads(s)) & self.batched and s.target is not None and \
                    not same_in_every_lane:
                callee = core.format_operand(s.func) + (f".{s.method}" if s.method else "")
                self.error(s, f"vmap cannot batch the call to {callee}(): astjax has no "
                              "batching rule for it", "use NumPy functions astjax knows")
            return [s]
        if isinstance(s, Copy):
            out = [s]
            if s.target in self.batched and not self.is_batched(s.value) and not (
                    isinstance(s.value, Const) and s.value.value is None):
                out.append(self.broadcast(s.target, loc))
            return out
        if isinstance(s, SetItem):
            return self.setitem(s)
        if isinstance(s, Prim):
            return self.prim(s)
        return [s]

    def batched_assert(self, s) -> list:
        """``assert test`` on a per-example value holds when it holds in every lane that
        runs this code (lanes masked off by a batched branch do not count)."""
        loc = s.loc
        if isinstance(s.msg, Var) and s.msg.name in self.batched:
            self.error(s, "vmap: an assert with a per-example message is not supported",
                       "use a message that is the same for every example")
        test = s.test
        out: list = []
        if self.masks:
            off = self.names.fresh("lanes_off")
            held = self.names.fresh("holds_or_off")
            out += [Prim(off, "logical_not", [Var(self.masks[-1]), Const(None)], loc=loc),
                    Prim(held, "logical_or", [test, Var(off), Const(None)], loc=loc)]
            test = Var(held)
        every = self.names.fresh("every_lane")
        out.append(Prim(every, "all_lanes", [test], loc=loc))
        return out + [Assert(Var(every), s.msg, loc=loc)]

    def broadcast(self, name, loc):
        return Prim(name, "broadcast_batch", [Var(name), Var(self.size)], loc=loc)

    def lift(self, op, out, loc):
        if isinstance(op, Var) and not self.is_batched(op):
            lifted = self.names.fresh(f"{op.name}_lifted")
            out.append(Prim(lifted, "lift", [op], loc=loc))
            return Var(lifted)
        return op

    def prim(self, s: Prim) -> list:
        loc = s.loc
        if s.prim in ("push",) + _POPS and isinstance(s.args[0], Var) and \
                s.args[0].name in self.pop_tapes:
            return self.tape_op(s)
        if not (set(core.reads(s)) & self.batched):
            out = [s]
            # values come back off a tape as they were pushed: a batched variable's
            # pushes were batched, so its pops are too
            if s.target and s.target in self.batched and s.prim not in (
                    "pop", "pop_tangent", "replay"):
                out.append(self.broadcast(s.target, loc))
            return out
        prim = P.REGISTRY[s.prim]
        if s.prim in custom.CUSTOM_PRIMS:
            return custom.batched(self, s)
        if s.prim == "cot_or_zero" and s.target in self.batched:
            # a fast backward trip's accumulator: the zeros that stand for None carry
            # the batch too (``x``, the primal, is often unbatched under vmap of a
            # vjp: they were unbatched, and the next add misaligned or broadcast them)
            pre = []
            args = [self.batch_operand(a, pre, loc) for a in s.args]
            return pre + [Prim(s.target, s.prim, args, s.kwargs, loc=loc)]
        if s.prim == "not_none":
            return [s]
        if s.prim in ("push", "pop", "new_tape", "make_tuple", "make_list", "make_dict",
                      "append", "to_list", "acc", "tree_index", "tree_stack", "compact",
                      "getattr", "as_sequence", "stop_gradient"):
            return self.structural(s)
        pre: list = []
        lifted = _lifted_params(prim)
        args = []
        for pname, arg in zip(prim.params, s.args):
            if pname in lifted:
                if pname.startswith("*"):
                    arg = tuple(self.lift(a, pre, loc) for a in arg)
                else:
                    arg = self.lift(arg, pre, loc)
            args.append(arg)
        rule_name = s.prim
        for pname, arg in zip(prim.params, s.args):
            if pname in ("index", "indices") and _vars_of(arg) & self.batched and \
                    s.prim not in _BATCHED_INDEX_OK:
                if s.prim in _PER_EXAMPLE_INDEX:
                    rule_name = f"{s.prim}_per_example_index"
                    continue
                what = "x[index]" if s.prim == "getitem" else \
                    "an in-place update x[index] = v" if s.prim in (
                        "setitem", "save_at", "restore_at", "cot_zero_at") else \
                    "np.add.at(x, indices, v)" if s.prim in ("scatter_add",
                                                            "scatter_tangent") else \
                    f"{prim.code}()"
                self.error(s, f"vmap: {what} with a per-example index is not supported",
                           "index with an unbatched index, or use np.take_along_axis / "
                           "np.where with a mask")
        rule_name = self.per_example_options(s, prim, rule_name)
        if rule_name != s.prim and rule_name not in _PER_EXAMPLE_OPTIONS.values():
            k = [p for p in prim.params if p in ("index", "indices")][0]
            k = prim.params.index(k)
            args[k] = self.per_example_index(s, args[k], pre)
        elif s.prim == "getitem":
            args[1] = _index_for_batch(args[1])
            item = args[1].items[0] if isinstance(args[1], Index) and \
                len(args[1].items) == 1 and not args[1].tuple_form else args[1]
            if isinstance(item, Var) and item.name not in self.loop_targets:
                # a run-time index may be a tuple holding ``...``: keep the batch axis
                fixed = self.names.fresh(f"{item.name}_batched_index")
                pre.append(Prim(fixed, "rb_index", [item], loc=loc))
                args[1] = Index((Var(fixed),))
        src = batch_rule(rule_name)
        if src is None and prim.code.startswith("rt."):
            # the runtime's container and cotangent helpers work on batch-last arrays
            # (tapes and accumulators among them: their operands are used as they are)
            if s.prim in _LIFTED_RT:
                return pre + [Prim(s.target, s.prim, args, s.kwargs, loc=loc)]
            return [s]
        if src is None:
            if s.prim == "where" and not _where_has_values(args, s.kwargs):
                self.error(s, "vmap cannot batch np.where(condition): its output's size "
                           "differs per example (the positions where it holds)",
                           "select with np.where(condition, x, y), or reduce with a mask: "
                           "np.sum(np.where(condition, x, 0.0))")
            if prim.kind in ("elementwise", "compare") or s.prim == "getitem":
                return pre + [Prim(s.target, s.prim, args, s.kwargs, loc=loc,
                                     written_as_call=s.written_as_call)]
            self.error(s, f"vmap has no batching rule for {prim.code}()",
                       "add one to templates/batch.py")
        bindings = {pname.lstrip("*"): a for pname, a in zip(prim.params, args)}
        norm = self.make_normalizer(self.names, self.fn.env)
        stmts, results = norm.template(src, src.node, bindings, loc, hint=s.target or "out")
        for st in core.walk(stmts):
            st.loc = loc
        return pre + stmts + [Copy(s.target, results[0], loc=loc)] if s.target else pre + stmts

    def per_example_options(self, s, prim, rule_name):
        """The rule for a NumPy call with per-example options, or a refusal.

        NumPy's batching rules take their options (an axis, a shift, a count, a
        ``ddof``) for one example: a per-example one would be applied to every lane as
        it stands (``np.roll(x, s)`` rolled every row by the batch's shifts) or crash.
        ``_PER_EXAMPLE_OPTIONS`` names the rules written for per-example options."""
        if not prim.code.startswith("np.") or s.prim in _LANE_BY_LANE_OPTIONS:
            return rule_name
        bound = list(zip(prim.params, s.args)) + list(s.kwargs.items())
        for pname, arg in bound:
            name = pname.lstrip("*")
            if name in _NOT_DATA and name not in ("index", "indices", "out") and \
                    _vars_of(arg) & self.batched:
                if (s.prim, name) in _PER_EXAMPLE_OPTIONS:
                    return _PER_EXAMPLE_OPTIONS[s.prim, name]
                self.error(s, f"vmap: {prim.code}() with a per-example {name} is not "
                           "supported (its batching rule takes one value for every example)",
                           f"pass the same {name} for every example (in_axes=None for it)")
        return rule_name

    def per_example_index(self, s, ix, pre):
        """An index with per-example entries, for the ``*_per_example_index`` rules: its
        array entries all carry the batch last (unbatched variables are broadcast)."""
        if not isinstance(ix, Index):
            return ix
        items = []
        for it in ix.items:
            if isinstance(it, SliceAtom) and _vars_of(it) & self.batched:
                self.error(s, "vmap: a slice whose bounds differ per example",
                           "slice with unbatched bounds and mask with np.where")
            items.append(self.batch_operand(it, pre, s.loc) if isinstance(it, Var) else it)
        return Index(tuple(items), tuple_form=ix.tuple_form)

    def structural(self, s: Prim) -> list:
        """Containers, tapes and accumulation hold batched values as they are, but a
        container mixing batched and unbatched entries broadcasts the unbatched ones."""
        loc = s.loc
        if s.prim == "tree_index" and self.is_batched(s.args[1]):
            # a step index held per lane (a loop counter inside per-example control
            # flow): each lane's own step, of the steps made batched if they are not
            pre: list = []
            xs = self.batch_operand(s.args[0], pre, loc)
            return pre + self.inline("tree_index_per_example_index",
                                     {"xs": xs, "i": s.args[1]}, s.target, loc)
        if s.prim in ("make_tuple", "make_list", "make_dict", "append", "acc"):
            pre = []
            args = []
            batched = s.target in self.batched
            for a in s.args:
                if isinstance(a, tuple):
                    a = tuple(self.batch_entry(x, pre, loc, batched) for x in a)
                elif s.prim != "make_dict":
                    a = self.batch_entry(a, pre, loc, batched)
                args.append(a)
            return pre + [Prim(s.target, s.prim, args, s.kwargs, loc=loc)]
        return [s]

    def tape_op(self, s: Prim) -> list:
        """Push or pop on a tape that is popped into fresh names (see ``_analyse``): an
        unbatched value goes on it tagged, so that each pop can tell."""
        loc = s.loc
        if s.prim == "push":
            if self.is_batched(s.args[1]):
                return [s]
            tagged = self.names.fresh("unbatched")
            return self.inline("tag_unbatched", {"value": s.args[1]}, tagged, loc) + [
                Prim(s.target, "push", [s.args[0], Var(tagged)], s.kwargs, loc=loc)]
        size = Var(self.size) if s.target in self.batched else Const(None)
        return [s] + self.inline("popped", {"value": Var(s.target), "size": size}, s.target,
                                 loc)

    def inline(self, rule, bindings, target, loc) -> list:
        """The statements of batching-rule template ``rule`` assigning ``target``."""
        src = batch_rule(rule)
        norm = self.make_normalizer(self.names, self.fn.env)
        stmts, results = norm.template(src, src.node, bindings, loc, hint=target)
        for st in core.walk(stmts):
            st.loc = loc
        return stmts + [Copy(target, results[0], loc=loc)]

    def batch_entry(self, op, out, loc, container_batched):
        """An entry of a container: a variable batched (``batch_operand``), and a number
        written in the code too when the container is batched (``ys.append(0.0)`` in a
        scan step, ``return x, 1.0``): every entry of a batched container carries the
        batch, or its stacked steps would be read as batched along the wrong axis."""
        if isinstance(op, Var):
            return self.batch_operand(op, out, loc)
        if container_batched and isinstance(op, Const) and isinstance(
                op.value, (bool, int, float, complex, np.generic)):
            b = self.names.fresh("constant_batched")
            out.append(Prim(b, "broadcast_batch", [op, Var(self.size)], loc=loc))
            self.batched.add(b)
            return Var(b)
        return op

    def batch_operand(self, op, out, loc):
        if isinstance(op, Var) and not self.is_batched(op):
            b = self.names.fresh(f"{op.name}_batched")
            out.append(Prim(b, "broadcast_batch", [op, Var(self.size)], loc=loc))
            return Var(b)
        return op

    def setitem(self, s: SetItem) -> list:
        loc = s.loc
        if s.target not in self.batched:
            return [s]
        pre: list = []
        value = s.value
        if not self.is_batched(value) and isinstance(value, Var):
            value = self.lift(value, pre, loc)
        if self.masks or set(core.atom_vars([s.index])) & self.batched:
            # lanes that skip this code keep the old array (select), and a per-example
            # index goes to its rule: update a copy
            stmts = self.prim(Prim(s.target, "setitem", [Var(s.target), s.index, s.value],
                                   loc=loc))
            sharing = self.sharing_at_update.get(id(s), {s.target})
            live = self.live_after.get(id(s))
            if live is not None:       # (a name nothing reads afterwards cannot tell)
                sharing = {n for n in sharing if n in live} | {s.target}
            if len(sharing) < 2:
                return stmts
            if self.masks:
                # (a list or dict is updated as a new container: names holding its
                # items are not concerned; an array is refused when it runs)
                others = sorted(sharing - {s.target})
                return [Prim(None, "refuse_shared_update", [
                    Var(s.target), Const(f"vmap: an in-place update of {s.target} inside "
                                         f"a branch taken per example, while "
                                         f"{', '.join(others)} may share its memory")],
                    loc=loc)] + stmts
            # ... and write it back into the array other names may share (``w = z``)
            memory = self.names.fresh(f"{s.target}_memory")
            self.batched.add(memory)
            return [Copy(memory, Var(s.target), loc=loc)] + stmts + [
                Prim(s.target, "write_back", [Var(memory), Var(s.target)], loc=loc)]
        return pre + [SetItem(s.target, _index_for_batch(s.index), value, loc=loc)]

    # ------------------------------------------------------------ control flow

    def _merge_vars(self, blocks):
        out = set()
        for b in blocks:
            out |= core.all_writes(b)
        return sorted(out & self.batched)

    def _live(self, s, stmts=()):
        """Variables live after ``s`` or on entry to ``stmts`` (None: unknown, all)."""
        after = self.live_after.get(id(s))
        if after is None:
            return None
        from astjax.passes.analysis import live_in_of
        live = set(after)
        block = set(after)
        for st in reversed(list(stmts)):
            block = live_in_of(st, block)
        return live | block

    def batched_if(self, s: If) -> list:
        loc = s.loc
        replay = self._else_first(s)
        merged = self._merge_vars([s.body, s.orelse])
        # kept per lane: what is read after the if; restored before the second branch
        # runs: what that branch reads (the first one may have written it)
        live = self._live(s, s.body if replay else s.orelse)
        after = self.live_after.get(id(s))
        if live is not None:
            merged = [w for w in merged if w in live]
        selected = [w for w in merged if after is None or w in after]
        before = {w: self.names.fresh(f"{w}_before") for w in merged}
        then = {w: self.names.fresh(f"{w}_then") for w in selected}
        out = [Copy(before[w], Var(w), loc=loc) for w in merged]
        # the lanes running each branch (within the lanes running this code)
        outer = self.masks[-1] if self.masks else None
        then_lanes, else_lanes = self.names.fresh("lanes_then"), self.names.fresh("lanes_else")
        self.batched |= {then_lanes, else_lanes}
        if outer is None:
            out.append(Copy(then_lanes, s.test, loc=loc))
        else:
            out.append(Prim(then_lanes, "logical_and", [Var(outer), s.test, Const(None)],
                            loc=loc))
        if s.orelse:
            out.append(Prim(else_lanes, "logical_not", [s.test, Const(None)], loc=loc))
            if outer is not None:
                out.append(Prim(else_lanes, "logical_and", [Var(outer), Var(else_lanes),
                                                            Const(None)], loc=loc))
        body = self.masked_block(s.body, then_lanes)
        orelse = self.masked_block(s.orelse, else_lanes)
        # A branch no lane takes is skipped (its tape pushes too, like the pops of the
        # backward sweep's matching branch, which tests the same restored value).  Both
        # branches may push: the backward sweep's branch pops the else part first.
        for lanes, block in ((then_lanes, body), (else_lanes, orelse)):
            if block:
                some = self.names.fresh("some_lanes")
                block[:] = [Prim(some, "any_lane", [Var(lanes)], loc=loc),
                            If(Var(some), list(block), [], loc=loc)]
        out += orelse if replay else body
        out += [Copy(then[w], Var(w), loc=loc) for w in selected]
        out += [Copy(w, Var(before[w]), loc=loc) for w in merged]
        out += body if replay else orelse
        out += [Prim(w, "select", [s.test, Var(w), Var(then[w])] if replay else
                     [s.test, Var(then[w]), Var(w)], loc=loc) for w in selected]
        self.undefined_ok |= set(merged)
        return out

    def batched_while(self, s: While) -> list:
        """Run until no lane wants another step; finished lanes keep their values."""
        loc = s.loc
        merged = self._merge_vars([s.body, s.test_body])
        after = self.live_after.get(id(s))
        if after is not None:
            # frozen lanes keep what is read after the loop or by its next step
            from astjax.passes.analysis import live_in_of
            live = set(after) | live_in_of(s, set(after))
            merged = [w for w in merged if w in live]
        active = self.names.fresh("lanes_active")
        old = {w: self.names.fresh(f"{w}_old") for w in merged}
        outer = self.masks[-1] if self.masks else None
        out = [Copy(active, Var(outer) if outer else Const(True), loc=loc)]
        test_body = [Copy(old[w], Var(w), loc=loc) for w in merged]
        test_body += self.masked_block(s.test_body, active)
        still = self.names.fresh("lanes_continue")
        test_body.append(Prim(still, "continue_lanes", [Var(active), s.test,
                                                         tuple(Var(f) for f in s.exit_flags)],
                              loc=loc))
        test_body.append(Copy(active, Var(still), loc=loc))
        keep = self.names.fresh("any_active")
        test_body.append(Prim(keep, "any_lane", [Var(active)], loc=loc))
        body = self.masked_block(s.body, active)
        body += [Prim(w, "select", [Var(active), Var(w), Var(old[w])], loc=loc)
                 for w in merged]
        self.undefined_ok |= set(merged)
        return out + [While(test_body, Var(keep), body, [], loc=loc)]

    def masked_block(self, stmts, lanes) -> list:
        """Transform code that only the lanes ``lanes`` (a variable) run."""
        self.masks.append(lanes)
        try:
            return self.transform(stmts)
        finally:
            self.masks.pop()

    def batched_replay_for(self, s: For) -> list:
        """The backward sweep of a loop whose trip count differs per example.

        The batched forward loop ran (and pushed) as many times as the longest lane,
        each lane active in its first ``trips`` of them; replayed in reverse, a lane
        is active in the last ``trips`` steps.
        """
        loc = s.loc
        trips = s.iter.args[1]
        longest = self.names.fresh(f"{trips.name}_longest")
        skipped = self.names.fresh("lane_skipped")
        inside = self.names.fresh("lane_inside")
        self.batched |= {skipped, inside}
        if self._active_at_end(s):
            head = [Prim(skipped, "subtract", [Var(longest), trips, Const(None)], loc=loc),
                    Prim(inside, "greater_equal", [Var(s.target), Var(skipped), Const(None)],
                         loc=loc)]
        else:
            head = [Prim(inside, "less", [Var(s.target), trips, Const(None)], loc=loc)]
        body = head + self.batched_if(If(Var(inside), s.body, [], loc=loc))
        rng = Prim(None, "range", [Const(0), Var(longest), Const(None)], loc=loc)
        return [Prim(longest, "max", [trips, Const(None), Const(None), Const(False)], loc=loc),
                For(s.target, rng, body, s.exit_flags, loc=loc)]

    def _else_first(self, s: If, seen=()) -> bool:
        """Whether the batched ``s`` runs its else part first: a branch that pops a
        tape undoes the pushes of a forward branch pair, so it runs in the reverse of
        that pair's order (which is then-first, unless it pops a tape itself: grad of
        grad)."""
        popped = _tapes(s, "pop")
        if not popped or id(s) in seen:
            return False
        # the forward branch pair this one undoes: it pushed the variables popped here
        restored = _tape_vars(s, "pop")
        best, score = None, 0
        for st in core.walk(self.fn.body):
            if isinstance(st, If) and st is not s:
                n = len(_tape_vars(st, "push") & restored)
                if n > score:
                    best, score = st, n
        if best is None:
            return True
        return not self._else_first(best, seen + (id(s),))

    def _active_at_end(self, s: For) -> bool:
        """Whether a lane runs the LAST ``trips`` steps of the backward loop ``s``.

        True when the forward loop that counted ``trips`` had each lane in its first
        steps (a while, a loop with break); the backward loop of such a backward loop
        (grad of grad) is the other way round.
        """
        counted = _counting_loop(self.fn.body, s.iter.args[1].name)
        if counted is None or counted is s or not (isinstance(counted, For) and
                                                    _is_replay_loop(counted)):
            return True
        return not self._active_at_end(counted)

    def batched_for(self, s: For) -> list:
        """Iterate while any lane has not left; lanes that left are frozen."""
        loc = s.loc
        flags = tuple(Var(f) for f in s.exit_flags)
        go = self.names.fresh("lane_inside")
        done = self.names.fresh("all_left")
        self.batched.add(go)
        inner = [Prim(go, "no_flags", [flags], loc=loc)]
        body = self.transform(inner) + self.batched_if(If(Var(go), s.body, [], loc=loc))
        body.append(Prim(done, "all_lanes_flags", [flags], loc=loc))
        return [Prim(done, "all_lanes_flags", [flags], loc=loc),
                For(s.target, s.iter, body, [done], loc=loc)]


def _is_replay_loop(s: For) -> bool:
    """The backward sweep of a loop (``for step in range(0, trips)`` popping the tape)."""
    it = s.iter
    if not (isinstance(it, Prim) and it.prim == "range" and len(it.args) >= 2):
        return False
    start, stop = it.args[0], it.args[1]
    step = it.args[2] if len(it.args) > 2 else Const(None)
    return (isinstance(start, Const) and start.value == 0 and isinstance(stop, Var)
            and isinstance(step, Const) and step.value in (None, 1)
            and any(isinstance(st, Prim) and st.prim == "pop" for st in core.walk(s.body)))


def _tapes(s: If, op: str) -> set:
    """The tapes that the branches of ``s`` push to (op="push") or pop from ("pop")."""
    return {st.args[0].name for st in core.walk(s.body + s.orelse)
            if isinstance(st, Prim) and st.prim == op and isinstance(st.args[0], Var)}


def _tape_vars(s: If, op: str) -> set:
    """(tape, variable) for each push of a variable (op="push") or pop into one ("pop")
    in the branches of ``s``."""
    out = set()
    for st in core.walk(s.body + s.orelse):
        if isinstance(st, Prim) and st.prim == op and isinstance(st.args[0], Var):
            var = st.args[1] if op == "push" else Var(st.target) if st.target else None
            if isinstance(var, Var):
                out.add((st.args[0].name, var.name))
    return out


def _counting_loop(stmts, counter, loop=None):
    """The innermost loop around ``counter = counter + 1`` (a trip count), or None."""
    for st in stmts:
        if isinstance(st, Prim) and st.target == counter and st.prim == "add" and \
                st.args[:1] == [Var(counter)]:
            return loop
        inner = st if isinstance(st, (For, While)) else loop
        for block in (getattr(st, "body", None), getattr(st, "orelse", None),
                      getattr(st, "test_body", None)):
            found = _counting_loop(block, counter, inner) if block else None
            if found is not None:
                return found
    return None


def _sharing_edge(s):
    """(name, source) when ``s`` makes ``name`` share ``source``'s memory: a copy, a
    view (basic indexing, reshapes, transposes...) or a call that may return its
    operand (``transforms/aliasing.py``); else None."""
    from astjax.transforms.aliasing import _may_view
    if isinstance(s, Copy) and isinstance(s.value, Var):
        return s.target, s.value.name
    if isinstance(s, Prim) and s.target and s.args and isinstance(s.args[0], Var):
        if P.REGISTRY[s.prim].kind == "shape" or s.prim == "getitem" or _may_view(s):
            return s.target, s.args[0].name
    return None


class _Groups:
    """Union-find of names that may share memory."""

    def __init__(self):
        self.parent: dict = {}

    def find(self, n):
        while self.parent.setdefault(n, n) != n:
            self.parent[n] = self.parent[self.parent[n]]
            n = self.parent[n]
        return n

    def join(self, a, b):
        self.parent[self.find(a)] = self.find(b)

    def members(self, n) -> set:
        root = self.find(n)
        return {m for m in list(self.parent) if self.find(m) == root}

    def all_groups(self) -> dict:
        """name -> its group, in one pass over the names."""
        groups: dict = {}
        for m in list(self.parent):
            groups.setdefault(self.find(m), set()).add(m)
        return {m: groups[self.find(m)] for m in self.parent}


def _sharing_groups(fn) -> dict:
    """name -> the names that may share its memory anywhere in ``fn`` (flow-insensitive,
    transitive)."""
    groups = _Groups()
    for s in core.walk(fn.body):
        edge = _sharing_edge(s)
        if edge is not None:
            groups.join(*edge)
    return groups.all_groups()


def _sharing_before_updates(fn) -> dict:
    """id(SetItem) -> the names that may share its target's memory when it runs: made
    by statements before it, or anywhere in a loop around it (a later iteration)."""
    out: dict = {}

    def walk(stmts, groups, loop_edges):
        for s in stmts:
            if isinstance(s, SetItem):
                g = _Groups()
                g.parent = dict(groups.parent)
                for edge in loop_edges:
                    g.join(*edge)
                out[id(s)] = g.members(s.target)
            edge = _sharing_edge(s)
            if edge is not None:
                groups.join(*edge)
            for block in core.child_blocks(s):
                inner = loop_edges
                if isinstance(s, (For, While)):
                    inner = loop_edges + [e for st in core.walk(block)
                                          if (e := _sharing_edge(st)) is not None]
                walk(block, groups, inner)

    walk(fn.body, _Groups(), [])
    return out


def _vars_of(op):
    return set(core.atom_vars([op]))


def _index_for_batch(ix):
    """An index written for one example, as an index of the batched array."""
    if isinstance(ix, Index) and any(i is Ellipsis for i in ix.items):
        return Index(ix.items + (SliceAtom(None, None, None),), tuple_form=True)
    return ix


__all__ = ["Batching", "batch_rule"]
