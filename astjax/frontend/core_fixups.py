"""Facts of the core form fixed once after normalization, before any transformation.

Each function here takes the core function the Normalizer made (helpers inlined) and
rewrites it in place so that an invariant every transformation relies on holds:

* ``prune_item_update_checks`` / ``prune_rebinding_checks``: the run-time refusals of
  an in-place ``op=`` NumPy would apply to memory another live name holds
  (``frontend/passes/augassign.py``) are kept only where such a name may exist;
* ``convert_list_operands``: a list given to a NumPy function as array data is an
  array before the call, as NumPy makes it (so every rule sees what NumPy sees);
* ``snapshot_branch_tests``: the test of an ``if`` is a name its branches do not
  assign (reverse mode reads the test again in the backward sweep, where a value the
  branch changed would choose the wrong branch).
"""
from __future__ import annotations

import numpy as np

from astjax import core
from astjax import primitives as P
from astjax.core import Const, Copy, If, Prim, Var


def run(fn, names) -> None:
    prune_item_update_checks(fn)
    prune_rebinding_checks(fn)
    convert_list_operands(fn, names)
    snapshot_branch_tests(fn, names)


def _filter_checks(fn, prim_name, keep) -> None:
    """Drop each ``prim_name`` statement (in every block) for which ``keep(statement,
    the statements after it)`` is false; ``keep`` may rewrite the ones it keeps."""
    def walk(block):
        for s in block:
            for child in core.child_blocks(s):
                walk(child)
        block[:] = [s for i, s in enumerate(block)
                    if not (isinstance(s, Prim) and s.prim == prim_name) or keep(s, block[i + 1:])]

    walk(fn.body)


def prune_item_update_checks(fn) -> None:
    """Keep a ``c[k] op= v`` check (``rt.refuse_item_update``) only for the names that
    are read after the update before being assigned again (liveness): a name holding
    the item but rebound first (``w = params["w"]`` at the top of each step) cannot
    tell the in-place update from the new value."""
    from astjax.passes.analysis import liveness
    live = liveness(fn)

    def keep(s, rest):
        update = next((t for t in rest if isinstance(t, core.SetItem) and
                       t.target == s.args[0].name), None)
        after = live.get(id(update)) if update is not None else None
        info, others = s.args[3], s.args[2]
        if after is None or not isinstance(info, Const) or not isinstance(others, tuple):
            # (generated code read again spells them as tuples it builds: its checks
            # were pruned when it was made)
            return True
        text, sym, names = info.value
        kept = [k for k, v in enumerate(others) if isinstance(v, Var) and v.name in after]
        s.args[2] = tuple(others[k] for k in kept)
        s.args[3] = Const((text, sym, tuple(names[k] for k in kept)))
        return bool(kept)

    _filter_checks(fn, "refuse_item_update", keep)


def prune_rebinding_checks(fn) -> None:
    """Keep a ``y op= v`` check (``rt.refuse_rebinding_update``) only with the names
    that may share ``y``'s memory there (``transforms/aliasing.py``, after inlining:
    a helper's parameter and its caller's name are one array) and are read after the
    update before being assigned again; drop it where there are none."""
    if not any(isinstance(s, Prim) and s.prim == "refuse_rebinding_update"
               for s in core.walk(fn.body)):
        return
    from astjax.passes.analysis import liveness
    from astjax.transforms.aliasing import Aliasing
    aliasing = Aliasing(fn)
    live = liveness(fn)

    def keep(s, rest):
        if s.args[1] != () or not isinstance(s.args[0], Var):
            # (generated code read again spells its checks with tuples it builds: they
            # were pruned when it was made)
            return True
        name = s.args[0].name
        update = next((t for t in rest if getattr(t, "target", None) == name), s)
        after = live.get(id(update), frozenset())
        others = sorted(n for n in aliasing.sharing.get(id(s), ()) if n in after and n != name)
        text, sym, _ = s.args[2].value
        # (the line where the two came to share: the other name's, else the updated
        # name's, e.g. the call binding a helper's parameter)
        lines = tuple((n, _line_of(aliasing.defs.get(n) or aliasing.defs.get(name)))
                      for n in others)
        s.args[1] = tuple(Var(n) for n in others)
        s.args[2] = Const((text, sym, lines))
        return bool(others)

    _filter_checks(fn, "refuse_rebinding_update", keep)


# primitives that make containers: a name every assignment of which is one of them
# holds a list or tuple
_CONTAINER_MAKERS = frozenset({"make_list", "make_tuple", "append", "to_list"})
# parameters that take a sequence of arrays (each item is converted by NumPy itself)
_SEQUENCE_PARAMS = frozenset({"arrays", "tup", "condlist", "choicelist", "xs", "funclist"})
# ... and those that take a list as it is (np.array_split counts a list's items, not its
# axis: NumPy's answer differs from that of the array)
_AS_GIVEN = frozenset({"asarray", "array", "asanyarray", "array_split", "split", "hsplit",
                       "vsplit", "dsplit"})


def _numpy_function(prim) -> bool:
    impl = prim.impl
    return isinstance(impl, np.ufunc) or (
        getattr(impl, "__module__", None) or "").split(".")[0] == "numpy"


def convert_list_operands(fn, names) -> None:
    """A list or tuple given to a NumPy function as array data, as an array first.

    NumPy converts an array-like operand with ``np.asarray`` on entry; doing so in the
    code makes every rule see the array NumPy sees (a batching rule read a list of
    per-example items as one unbatched array; ``np.negative(lst)`` printed as ``-lst``
    failed).  Only calls (``np.add(a, b)``), never operators: ``a + b`` of lists
    concatenates.  A name holding a list the code cannot see being made (a pytree
    argument) is converted by the batching rules (``runtime_batch._as_batched``)."""
    made: dict = {}
    for s in core.walk(fn.body):
        target = getattr(s, "target", None)
        if target:
            made[target] = made.get(target, True) and isinstance(s, Prim) and \
                s.prim in _CONTAINER_MAKERS
    lists = {n for n, always in made.items() if always}
    if not lists:
        return
    from astjax.transforms.batch import _NOT_DATA   # (shapes, axes, options: not data)

    def converted(arg, pre, loc):
        if not (isinstance(arg, Var) and arg.name in lists):
            return arg
        out = names.fresh(f"{arg.name}_array")
        pre.append(Prim(out, "asarray", [arg, Const(None), Const(None), Const(None)], loc=loc))
        return Var(out)

    def rewrite(block):
        new = []
        for s in block:
            for child in core.child_blocks(s):
                rewrite(child)
            if isinstance(s, Prim) and s.written_as_call and s.prim not in _AS_GIVEN:
                prim = P.REGISTRY[s.prim]
                if _numpy_function(prim) and prim.kind != "structural":
                    pre: list = []
                    for i, (pname, arg) in enumerate(zip(prim.params, s.args)):
                        if pname.lstrip("*") in _SEQUENCE_PARAMS | _NOT_DATA or (
                                pname not in prim.diff and i > 0):
                            continue
                        if pname.startswith("*") and isinstance(arg, tuple):
                            s.args[i] = tuple(converted(a, pre, s.loc) for a in arg)
                        else:
                            s.args[i] = converted(arg, pre, s.loc)
                    new.extend(pre)
            new.append(s)
        block[:] = new

    rewrite(fn.body)


def _line_of(s):
    loc = getattr(s, "loc", None)
    return loc.lineno if loc is not None else None


def snapshot_branch_tests(fn, names) -> None:
    """``if t: ... t = ...``: the test read into a name of its own before the branch.

    The backward sweep of reverse mode chooses the branch again from the test's
    variable; a branch that assigns that variable (``a and b`` lowers to ``c = a; if
    c: c = b``; a user's ``if done: done = ...``) left it holding the new value there,
    and the sweep took the other branch: a misaligned tape, wrong cotangents.  A test
    whose variables no branch assigns is left as it is.  (The Normalizer's own
    ``_protect_test`` does this for ``if`` statements and expressions as it writes
    them, rule templates included; this pass holds the invariant for every ``if`` of
    the function, the ones lowered from ``and``/``or`` and chained comparisons too.)"""
    def rewrite(block):
        new = []
        for s in block:
            for child in core.child_blocks(s):
                rewrite(child)
            if isinstance(s, If):
                test_reads = set(core.reads(s))
                if test_reads & core.all_writes(s.body + s.orelse):
                    held = names.fresh("branch_taken")
                    if isinstance(s.test, Prim):
                        s.test.target = held
                        new.append(s.test)
                    else:
                        new.append(Copy(held, s.test, loc=s.loc))
                    s.test = Var(held)
            new.append(s)
        block[:] = new

    rewrite(fn.body)
