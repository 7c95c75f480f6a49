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
the others frozen.
"""
from __future__ import annotations

import functools
import types

from astjax import core
from astjax import primitives as P
from astjax.core import (Const, Copy, External, For, If, Index, Prim, Raise, Return, SetItem,
                         SliceAtom, Var, While)
from astjax.errors import TransformError

import astjax.core_prims  # noqa: F401

_STATIC = {"shape", "ndim", "size", "len", "dtype", "not_none"}


@functools.lru_cache(maxsize=None)
def _rule_modules():
    from astjax.templates import batch
    return (batch,)


@functools.lru_cache(maxsize=None)
def batch_rule(prim_name: str):
    for mod in _rule_modules():
        fn = mod.__dict__.get(prim_name)
        if isinstance(fn, types.FunctionType):
            from astjax.frontend.source import get_function_source
            return get_function_source(fn)
    return None


# parameters that never hold per-example array data (indices, axes, shapes, options)
_NOT_DATA = {"index", "indices", "axis", "axes", "axis1", "axis2", "source", "destination",
             "shape", "newshape", "keepdims", "dtype", "out", "order", "ddof", "reps",
             "repeats", "shift", "pad_width", "mode", "offset", "kind", "stable",
             "subscripts", "indices_or_sections", "n", "ord", "which", "reverse", "name",
             "keys", "fname", "copy", "casting", "subok", "optimize", "start", "stop",
             "step", "num", "endpoint", "k", "decimals"}


def _lifted_params(prim):
    """Parameters holding array data, which an unbatched operand must be lifted for."""
    return {p for p in prim.params if p.lstrip("*") not in _NOT_DATA}


class Batching:
    """Which variables are batched, and the batched version of a core function body."""

    def __init__(self, fn: core.Function, batched_params, size_var: str, normalizer_factory):
        self.fn = fn
        self.names = fn.env.names
        self.size = size_var
        self.make_normalizer = normalizer_factory
        self.batched = self._analyse(set(batched_params))
        self.undefined_ok: set[str] = set()   # merged by select: pre-set to None

    # ---------------------------------------------------------------- analysis

    def _analyse(self, batched):
        changed = True
        while changed:
            changed = False
            for s in core.walk(self.fn.body):
                new = set()
                if isinstance(s, Prim) and s.prim == "pop":
                    pass  # a restore: batched exactly when the variable's other values are
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
                    new.add(s.target)
                elif isinstance(s, If) and set(core.reads(s)) & batched:
                    new |= core.all_writes(s.body) | core.all_writes(s.orelse)
                elif isinstance(s, While) and (set(core.atom_vars([s.test])) |
                                               set(s.exit_flags)) & batched:
                    new |= core.all_writes(s.body) | core.all_writes(s.test_body)
                elif isinstance(s, For) and set(s.exit_flags) & batched:
                    new |= core.all_writes(s.body) - {s.target}
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
                self.error(s, "vmap: a for loop whose number of steps differs per example",
                           "loop to the largest length and mask, or use lax.while_loop")
            if set(s.exit_flags) & self.batched:
                return self.batched_for(s)
            return [For(s.target, s.iter, self.transform(s.body), s.exit_flags, loc=loc)]
        if isinstance(s, (Return, Raise)):
            if isinstance(s, Raise) and set(core.reads(s)) & self.batched:
                self.error(s, "vmap: raise with a per-example message is not supported")
            return [s]
        if isinstance(s, External):
            if set(core.reads(s)) & self.batched and s.target is not None:
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
        if not (set(core.reads(s)) & self.batched):
            out = [s]
            if s.target and s.target in self.batched and s.prim != "pop":
                out.append(self.broadcast(s.target, loc))
            return out
        prim = P.REGISTRY[s.prim]
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
        if s.prim == "getitem":
            args[1] = _index_for_batch(args[1])
        src = batch_rule(s.prim)
        if src is None and prim.code.startswith("rt."):
            # the runtime's container and cotangent helpers work on batch-last arrays
            return [s]
        if src is None:
            if prim.kind in ("elementwise", "compare") or s.prim == "getitem":
                return pre + [Prim(s.target, s.prim, args, s.kwargs, loc=loc)]
            self.error(s, f"vmap has no batching rule for {prim.code}()",
                       "add one to templates/batch.py")
        bindings = {pname.lstrip("*"): a for pname, a in zip(prim.params, args)}
        norm = self.make_normalizer(self.names, self.fn.env)
        stmts, results = norm.template(src, src.node, bindings, loc, hint=s.target or "out")
        for st in core.walk(stmts):
            st.loc = loc
        return pre + stmts + [Copy(s.target, results[0], loc=loc)] if s.target else pre + stmts

    def structural(self, s: Prim) -> list:
        """Containers, tapes and accumulation hold batched values as they are, but a
        container mixing batched and unbatched entries broadcasts the unbatched ones."""
        loc = s.loc
        if s.prim in ("make_tuple", "make_list", "make_dict", "append", "acc"):
            pre = []
            args = []
            for a in s.args:
                if isinstance(a, tuple):
                    a = tuple(self.batch_operand(x, pre, loc) for x in a)
                elif isinstance(a, Var) and s.prim != "make_dict":
                    a = self.batch_operand(a, pre, loc)
                args.append(a)
            return pre + [Prim(s.target, s.prim, args, s.kwargs, loc=loc)]
        out = [s]
        if s.target and s.target in self.batched and s.prim in ("pop",):
            pass
        return out

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
        if any(i is Ellipsis for i in s.index.items) or set(core.atom_vars([s.index])) & \
                self.batched:
            if set(core.atom_vars([s.index])) & self.batched:
                self.error(s, "vmap: an in-place update at a per-example index is not "
                              "supported yet", "use np.where with a mask")
        return pre + [SetItem(s.target, _index_for_batch(s.index), value, loc=loc)]

    # ------------------------------------------------------------ control flow

    def _merge_vars(self, blocks):
        out = set()
        for b in blocks:
            out |= core.all_writes(b)
        return sorted(out & self.batched)

    def batched_if(self, s: If) -> list:
        loc = s.loc
        merged = self._merge_vars([s.body, s.orelse])
        before = {w: self.names.fresh(f"{w}_before") for w in merged}
        then = {w: self.names.fresh(f"{w}_then") for w in merged}
        out = [Copy(before[w], Var(w), loc=loc) for w in merged]
        out += self.transform(s.body)
        out += [Copy(then[w], Var(w), loc=loc) for w in merged]
        out += [Copy(w, Var(before[w]), loc=loc) for w in merged]
        out += self.transform(s.orelse)
        out += [Prim(w, "select", [s.test, Var(then[w]), Var(w)], loc=loc) for w in merged]
        self.undefined_ok |= set(merged)
        return out

    def batched_while(self, s: While) -> list:
        """Run until no lane wants another step; finished lanes keep their values."""
        loc = s.loc
        merged = self._merge_vars([s.body, s.test_body])
        active = self.names.fresh("lanes_active")
        old = {w: self.names.fresh(f"{w}_old") for w in merged}
        out = [Copy(active, Const(True), loc=loc)]
        test_body = [Copy(old[w], Var(w), loc=loc) for w in merged]
        test_body += self.transform(s.test_body)
        still = self.names.fresh("lanes_continue")
        test_body.append(Prim(still, "continue_lanes", [Var(active), s.test,
                                                         tuple(Var(f) for f in s.exit_flags)],
                              loc=loc))
        test_body.append(Copy(active, Var(still), loc=loc))
        keep = self.names.fresh("any_active")
        test_body.append(Prim(keep, "any_lane", [Var(active)], loc=loc))
        body = self.transform(s.body)
        body += [Prim(w, "select", [Var(active), Var(w), Var(old[w])], loc=loc)
                 for w in merged]
        self.undefined_ok |= set(merged)
        return out + [While(test_body, Var(keep), body, [], loc=loc)]

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


def _vars_of(op):
    return set(core.atom_vars([op]))


def _index_for_batch(ix):
    """An index written for one example, as an index of the batched array."""
    if isinstance(ix, Index) and any(i is Ellipsis for i in ix.items):
        return Index(ix.items + (SliceAtom(None, None, None),), tuple_form=True)
    return ix


__all__ = ["Batching", "batch_rule"]
