"""Primitives of the core form itself (tuples, lists, flags, ranges, tape helpers).

They sit in the same registry as the NumPy primitives so that every transformation
treats generated code exactly like user code.  Their rule templates live in
``templates/vjp_core.py``.
"""
from __future__ import annotations

import builtins
import inspect

from astjax import runtime as rt
from astjax.core import Var, format_operand
from astjax.primitives import Primitive, register

CORE_RULE_MODULE = "vjp_core"

register(Primitive("make_tuple", rt.make_tuple, "rt.make_tuple", ("*items",), diff=("*items",),
                   kind="structural"))
register(Primitive("make_list", rt.make_list, "rt.make_list", ("*items",), diff=("*items",),
                   kind="structural"))
register(Primitive("make_dict", rt.make_dict, "rt.make_dict", ("keys", "*values"),
                   diff=("*values",), kind="structural"))
# ``x = append(x, item)`` is printed as ``rt.append_owned`` (the old list is dead:
# it may grow in place); read back, it is the functional append again
register(Primitive("append", rt.append, "rt.append", ("lst", "item"), diff=("lst", "item"),
                   kind="structural"), callables=(rt.append_owned,))
register(Primitive("to_list", rt.to_list, "list", ("x",), diff=("x",), kind="structural"),
         callables=(builtins.list, builtins.tuple))
register(Primitive("keys_list", rt.keys_list, "rt.keys_list", ("x",), kind="static"))
# ``c[k] op= v`` with an item of ``c`` shared by another name (frontend/passes/augassign):
# raises where the item is an array NumPy would update in place
register(Primitive("refuse_item_update", rt.refuse_item_update, "rt.refuse_item_update",
                   ("container", "item", "others", "update"), kind="effect",
                   reason="not differentiable: raises an AliasError where a list or dict item "
                          "that is an array would be updated in place"))
# ``y op= v`` lowered to ``y = y op v`` while names it cannot see may share ``y``'s array
# (a helper's parameter and its caller): raises where NumPy would update in place
register(Primitive("refuse_rebinding_update", rt.refuse_rebinding_update,
                   "rt.refuse_rebinding_update", ("value", "others", "update"), kind="effect",
                   reason="not differentiable: raises an AliasError where an array another "
                          "name holds would be updated in place"))
register(Primitive("sort_order", rt.sort_order, "rt.sort_order", ("keys", "reverse"),
                   defaults={"reverse": False}, kind="static"))
register(Primitive("as_sequence", rt.as_sequence, "rt.as_sequence", ("x",), diff=("x",),
                   kind="structural"))
register(Primitive("as_sequence_cotangent", rt.as_sequence_cotangent,
                   "rt.as_sequence_cotangent", ("g", "x"), diff=("g",), kind="other",
                   meta=("x",)))
# the in-place accumulations of generated code (astjax/transforms/inplace.py) read back
# as the plain ones: a transformation of generated code sees functional code
register(Primitive("acc", rt.acc, "rt.acc", ("a", "b"), diff=("a", "b"), kind="structural"),
         callables=(rt.acc_inplace, rt.acc_copy, rt.acc_reuse))
register(Primitive("detach", rt.detach, "rt.detach", ("x",), diff=("x",), kind="structural"))
register(Primitive("stop_gradient", rt.stop_gradient, "rt.stop_gradient", ("x",),
                   kind="structural"))
register(Primitive("range", builtins.range, "range", ("start", "stop", "step"),
                   defaults={"stop": None, "step": None}, kind="static"))
register(Primitive("not_", rt.not_, "rt.not_", ("x",), kind="compare"))
register(Primitive("no_flags", rt.no_flags, "rt.no_flags", ("*flags",), kind="compare"))
register(Primitive("any_flag", rt.any_flag, "rt.any_flag", ("*flags",), kind="compare"))
register(Primitive("format_string", rt.format_string, "rt.format_string",
                   ("template", "*values"), kind="static"))


def _params(fn):
    return tuple(("*" if p.kind is p.VAR_POSITIONAL else "") + p.name
                 for p in inspect.signature(fn).parameters.values())


# Runtime helpers that generated code calls.  Those differentiable in some argument
# have a template in templates/vjp_core.py (grad of grad differentiates them).
_META = {"acc_at": ("x",), "place_at": ("x",), "cot_or_zero": ("x",), "acc_step": ("xs",),
         "instantiate": ("x",),
         "list_cotangent": ("x",), "append_cotangents": ("lst",), "cot_at_vjp": ("g",),
         "cot_written_vjp": ("g",),
         "append_cotangents_vjp": ("like",)}
_DIFF = {"acc_at": ("d", "g"), "place_at": ("g",), "acc_step": ("d", "g"),
         "instantiate": ("g",),
         "cot_or_zero": ("g",),
         "check_scalar_output": ("value",),
         "cot_at": ("g",), "cot_written": ("g",), "cot_zero_at": ("g",),
         "seq_cotangents": ("g",),
         "dict_cotangents": ("g",), "list_cotangent": ("g",), "append_cotangents": ("g",),
         # linear second-order pieces: rules for third and higher derivatives
         "cot_at_vjp": ("ct",), "cot_written_vjp": ("ct",), "dict_from_values": ("values",),
         "save_at": ("x",),
         "append_cotangents_vjp": ("ct",), "last_cotangent": ("g",),
         "drop_last_cotangent": ("g",)}
_KIND = {"zeros_like": "creation", "ones_like": "creation", "meta": "static",
         "save_at": "tape", "restore_at": "tape", "trip_fits": "static",
         "cots_complete": "static",
         "trip_signature": "static", "same_signature": "static"}
for _name in ("zeros_like", "instantiate", "ones_like", "seq_cotangents", "dict_cotangents",
              "append_cotangents", "list_cotangent", "cot_at", "cot_written", "cot_zero_at",
              "save_at", "cot_written_vjp",
              "check_scalar_output", "meta", "restore_at", "cot_at_vjp", "dict_from_values",
              "acc_at", "place_at", "acc_step",
              "append_cotangents_vjp", "trip_fits", "cot_or_zero", "trip_signature",
              "same_signature", "last_cotangent", "drop_last_cotangent", "cots_complete"):
    register(Primitive(_name, getattr(rt, _name), f"rt.{_name}", _params(getattr(rt, _name)),
                       diff=_DIFF.get(_name, ()), kind=_KIND.get(_name, "other"),
                       meta=_META.get(_name, ())),
             callables={"acc_at": (rt.acc_at_inplace,),
                        "acc_step": (rt.acc_step_inplace,),
                        "drop_last_cotangent": (rt.drop_last_owned,)}.get(_name, ()))


def _seq(a):
    return ", ".join(format_operand(x) for x in a)


def _print_make_tuple(s):
    items = s.args[0]
    return f"({_seq(items)},)" if len(items) == 1 else f"({_seq(items)})"


def _print_make_dict(s):
    keys = s.args[0].value
    vals = s.args[1]
    return "{" + ", ".join(f"{k!r}: {format_operand(v)}" for k, v in zip(keys, vals)) + "}"


def _print_range(s):
    parts = [a for a in s.args if not (hasattr(a, "value") and a.value is None)]
    return f"range({_seq(parts)})"


def _print_no_flags(s):
    flags = s.args[0]
    if len(flags) == 1:
        return f"not {format_operand(flags[0])}"
    return f"not ({' or '.join(format_operand(f) for f in flags)})"


def _print_drop_last(s):
    g = s.args[0]
    helper = "rt.drop_last_owned" if isinstance(g, Var) and g.name == s.target else \
        "rt.drop_last_cotangent"
    return f"{helper}({format_operand(g)})"


def _print_append(s):
    lst, item = s.args[0], s.args[1]
    helper = "rt.append_owned" if isinstance(lst, Var) and lst.name == s.target else "rt.append"
    return f"{helper}({format_operand(lst)}, {format_operand(item)})"


PRINTERS = {
    "make_tuple": _print_make_tuple,
    "make_list": lambda s: f"[{_seq(s.args[0])}]",
    "make_dict": _print_make_dict,
    "range": _print_range,
    "not_": lambda s: f"not {format_operand(s.args[0])}",
    "no_flags": _print_no_flags,
    "any_flag": lambda s: " or ".join(format_operand(f) for f in s.args[0]),
    "to_list": lambda s: f"list({format_operand(s.args[0])})",
    "append": _print_append,
    "drop_last_cotangent": _print_drop_last,
}

register(Primitive("push", rt.push, "rt.push", ("tape", "value"), kind="tape"))
register(Primitive("pop", rt.pop, "rt.pop", ("tape",), diff=("tape",), kind="tape"))
register(Primitive("new_tape", rt.new_tape, "rt.new_tape", (), kind="tape"))
register(Primitive("not_none", lambda x: x is not None, "rt.not_none", ("x",), kind="compare"))
# ``item in container`` (membership in a dict's keys, a list): a fact, never a derivative
register(Primitive("contains", lambda container, item: item in container, "rt.contains",
                   ("container", "item"), kind="compare"))
register(Primitive("getattr", getattr, "getattr", ("x", "name"), diff=("x",),
                   kind="structural"))
register(Primitive("attr_cotangent", rt.attr_cotangent, "rt.attr_cotangent",
                   ("g", "x", "name"), diff=("g",), kind="other", meta=("x",)))
register(Primitive("attr_of", rt.attr_of, "rt.attr_of", ("x", "name"), diff=("x",),
                   kind="other"))
PRINTERS.update({
    "new_tape": lambda s: "[]",
    "not_none": lambda s: f"{format_operand(s.args[0])} is not None",
    "contains": lambda s: f"{format_operand(s.args[1])} in {format_operand(s.args[0])}",
    "keys_list": lambda s: f"list({format_operand(s.args[0])})",
    "getattr": lambda s: f"{format_operand(s.args[0])}.{s.args[1].value}",
})

register(Primitive("clamp_index", rt.clamp_index, "rt.clamp_index", ("index", "n"),
                   kind="static"))
register(Primitive("scan_length", rt.scan_length, "rt.scan_length", ("xs", "length"),
                   kind="static"))
register(Primitive("tree_index", rt.tree_index, "rt.tree_index", ("xs", "i"), diff=("xs",),
                   kind="structural"))
register(Primitive("tree_index_vjp", rt.tree_index_vjp, "rt.tree_index_vjp", ("g", "xs", "i"),
                   diff=("g",), kind="other", meta=("xs",)))
register(Primitive("tree_stack", rt.tree_stack, "rt.tree_stack", ("ys", "reverse"),
                   diff=("ys",), kind="structural"))
register(Primitive("tree_unstack_cotangent", rt.tree_unstack_cotangent,
                   "rt.tree_unstack_cotangent", ("g", "ys", "reverse"), diff=("g",),
                   kind="other", meta=("ys",)))
register(Primitive("tree_restack", rt.tree_restack, "rt.tree_restack", ("cts", "ys", "reverse"),
                   diff=("cts",), kind="other", meta=("ys",)))
register(Primitive("unstack_cotangent", rt.unstack_cotangent, "rt.unstack_cotangent",
                   ("g", "stacked", "reverse"), diff=("g",), kind="other", meta=("stacked",)))
register(Primitive("restack_cotangent", rt.restack_cotangent, "rt.restack_cotangent",
                   ("cts", "stacked", "reverse"), diff=("cts",), kind="other",
                   meta=("stacked",)))
register(Primitive("compact", rt.compact, "rt.compact", ("y",), diff=("y",), kind="structural"))
register(Primitive("tangent_set", rt.tangent_set, "rt.tangent_set",
                   ("t", "index", "v_dot", "like"), diff=("t", "v_dot"), kind="other",
                   meta=("like",)))
register(Primitive("pop_tangent", rt.pop_tangent, "rt.pop_tangent", ("tape_dot", "like"),
                   diff=("tape_dot",), kind="tape", meta=("like",)))
_PACK_DIFF = {"pack_tuple": ("items",), "pack_list": ("items",), "make_dict_from": ("values",),
              "append_tangent": ("lst_dot", "item_dot"), "list_tangent": ("x_dot",)}
for _name, _diff in _PACK_DIFF.items():
    register(Primitive(_name, getattr(rt, _name), f"rt.{_name}", _params(getattr(rt, _name)),
                       diff=_diff, kind="structural"))
register(Primitive("replay_start", rt.replay_start, "rt.replay_start", ("record",), kind="tape"))
register(Primitive("replay", rt.replay, "rt.replay", ("cursor",), kind="tape"))

# vmapped code's helpers (astjax/runtime_batch.py, imported as rb)
from astjax import runtime_batch as rb  # noqa: E402

register(Primitive("to_last", rb.to_last, "rb.to_last", ("x", "axis"), diff=("x",),
                   kind="shape"))
register(Primitive("from_last", rb.from_last, "rb.from_last", ("x", "axis", "size", "batched"),
                   diff=("x",), kind="shape"))
register(Primitive("from_last_vjp", rb.from_last_vjp, "rb.from_last_vjp",
                   ("g", "axis", "batched"), kind="other",
                   reason="higher derivatives through vmap's exit are not implemented"))
register(Primitive("leaf_axis_size", rb.leaf_axis_size, "rb.leaf_axis_size", ("x", "axis"),
                   kind="static"))
for _name, _kind in (("lift", "batch"), ("broadcast_batch", "batch"), ("select", "batch"),
                     ("continue_lanes", "batch"), ("all_lanes_flags", "batch"),
                     ("any_lane", "batch"), ("all_lanes", "batch"), ("batch_size", "batch"),
                     ("write_back", "batch"), ("refuse_shared_update", "batch")):
    register(Primitive(_name, getattr(rb, _name), f"rb.{_name}", _params(getattr(rb, _name)),
                       kind=_kind))
for _name in ("shape", "ndim", "size", "length", "axis", "index", "matmul", "dot"):
    register(Primitive(f"rb_{_name}", getattr(rb, _name), f"rb.{_name}",
                       _params(getattr(rb, _name)), kind="batch"))
# vmap's axes on pytrees, in the loop form other transformations read (batch_api.py)
register(Primitive("tree_moveaxis", rt.tree_moveaxis, "rt.tree_moveaxis",
                   ("x", "source", "destination"), diff=("x",), kind="shape",
                   sample=lambda r: ((r.standard_normal((2, 3, 4)), -1, 0), {})))
register(Primitive("leaf_axis_size_batched", rb.leaf_axis_size_batched,
                   "rb.leaf_axis_size_batched", ("x", "axis"), kind="batch"))
