# ruff: noqa: E501
"""Composition-matrix cases that fail today, by class (written by
``python tests/compose.py --record``; tests/test_compositions.py runs them as
strict xfails, so a fix shows up as XPASS: then delete the entry or re-record)."""

CLASSES = {
    'nested_ad': 'a derivative of a function that calls astjax.vjp or astjax.linearize (and uses the pulled-back or pushed-forward values) is a silent zero in reverse mode and refused in forward mode: the call has no rule and its result is a tuple (class 1 through a nested transformation)',
    'vmap_of_pullback': 'vmap of the function vjp returns is refused: its cotangent shape check runs on the batched cotangent',
    'vmap_of_f_jvp': "vmap of linearize's f_jvp is refused (*args parameters)",
    'batch_nested_ad': 'vmap of a function that calls vjp or linearize: no batching rule',
    'residual_unbound': 'vjp/linearize of a function with an if whose branch did not run: the residual tuple reads a variable that was never assigned (UnboundLocalError in generated code)',
    'linearize_lax_carry': "linearize of lax.fori_loop/lax.scan: NameError on the carry's tangent in generated code",
    'linearize_of_grad_loop': 'linearize (or vmap of it) of grad of a function with a loop: IndexError, pop from an empty tape',
    'stacked_in_loop': "the gradient through lax.scan's ys / lax.map inside an outer loop (or a loop that vmap/jvp/fori_loop/while_loop/scan/map make) counts only the last outer iteration",
    'grad_vmap_out_axes': 'grad through vmap with out_axes != 0 (class 8)',
    'view_inplace': 'in-place `z[i] op= v` reads z[i] as a view that the update then overwrites, so the derivative sees the new value (vmap makes the integer index a view too)',
    'tree_restack': 'jvp of jvp through lax.scan is refused: rt.tree_restack has no rule',
    'vmap_index_crash': 'vmap of cond/switch/while_loop around fancy indexing with a list: TypeError inside generated code',
    'vmap_out_axes_pytree': 'vmap with out_axes=-1 or in_axes=-1 on pytree arguments or outputs: internal AxisError/ValueError',
    'false_recursion': 'two different functions with the same name, one calling the other (wrappers from different modules), are refused as recursion',
    'ad_of_vmap_of_vmap': 'a derivative of vmap(vmap(f)) is refused: the merged batched function has *args parameters',
    'third_order': "third-order reverse mode: wrong numbers, or refused through add's cotangent rule (class 7)",
    'batch_of_vmap_entry': 'vmap of code calling a vmapped function inside lax control flow: no batching rule for rb.leaf_axis_size',
    'batch_creation': 'vmap of lax.cond around lax.scan: no batching rule for np.zeros',
    'triple_crash': 'internal errors (AttributeError, TypeError, ValueError, KeyError from generated code) in three-deep compositions of vmap with grad/value_and_grad/vjp/linearize',
    'run_time_function': "a function that calls astjax.vjp/linearize and calls (or vmaps) the function they return: refused at the user's line (a function computed at run time; issue 11 makes the frontend evaluate it when the code is generated)",
    'alias_sites': "an in-place update in a loop of generated code (vmap's loop form, lax scan/map) refused by the alias analysis: memory is named by the statement that made it, so this iteration's array and earlier ones kept in a list look alike (a located refusal, never a wrong number)",
    'other': 'unclassified failure',
}

KNOWN = {
    'grad.vjp|tuple_in': 'linearize_of_grad_loop',
    'grad_xy.vjp.jit|for_loop': 'linearize_of_grad_loop',
    'grad_xy.vmap|inplace': 'alias_sites',
    'linearize.vmap_vjp.vmap|inplace': 'alias_sites',
    'value_and_grad.vmap_vjp|for_loop': 'linearize_of_grad_loop',
    'value_and_grad.vmap_y_out1|inplace': 'alias_sites',
    'vjp.jit.value_and_grad|inplace': 'alias_sites',
    'vjp.vmap_vjp.while_loop|shapes': 'linearize_of_grad_loop',
    'vmap.vjp.cond|for_loop': 'triple_crash',
    'vmap_linearize.vmap_x|inplace': 'alias_sites',
    'vmap_neg.vjp|while_loop': 'vmap_index_crash',
    'vmap_neg.vmap_vjp.jvp|for_loop': 'vmap_index_crash',
    'vmap_neg.vmap_vjp|scan': 'vmap_index_crash',
    'vmap_vjp.map|inplace': 'alias_sites',
    'vmap_vjp.vjp|closures': 'linearize_of_grad_loop',
    'vmap_x.vmap_vjp|closures': 'vmap_index_crash',
    'vmap_y_out1.vmap_vjp|lax_calls': 'vmap_index_crash',
}
