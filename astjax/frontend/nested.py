r"""Transformations written inside a transformed function: ``jvp(f, ...)``,
``vmap(f)(x)``, ``grad(lambda ...)(x)``, ``jit(g)``.

The transformation is applied at generation time to a Python function and the code
it runs is inlined.  A lambda or nested def that closes over run-time values of the
enclosing function is first *lifted*: turned into a real function whose captured
run-time values are trailing parameters (unbatched, not differentiated), while the
functions and modules it captures stay bound by name.
"""
from __future__ import annotations

import inspect

import gast

from astjax.errors import TransformError


class NestedTransforms:
    """Normalizer mixin: transformations applied inside the function being lowered."""

    def inline_jvp(self, node, hint, target):
        """``jvp(f, (x, ...), (t, ...))`` inside transformed code: inline f's jvp code."""
        from astjax import forward_api
        if len(node.args) != 3 or node.keywords or not all(
                isinstance(a, (gast.Tuple, gast.List)) for a in node.args[1:]):
            self.error(node, "jvp inside a transformed function needs the form "
                             "jvp(f, (x, ...), (t, ...))", cls=TransformError)
        fun = self.static_value(node.args[0])
        if fun is None or not callable(fun):
            self.error(node.args[0], "jvp needs a function defined in a file here",
                       "pass a module-level function, not a lambda", cls=TransformError)
        primals = [self.plain(self.arg_operand(e, hint), node) for e in node.args[1].elts]
        tangents = [self.plain(self.arg_operand(e, hint), node) for e in node.args[2].elts]
        if len(primals) != len(tangents):
            self.error(node, "jvp: as many tangents as primals are needed", cls=TransformError)
        generated = forward_api.jvp_function(fun, range(len(primals)), ())
        # the generated code takes every parameter, then the tangents: fill in defaults
        from astjax.api import signature_of
        sig = signature_of(fun)
        for name in sig.names[len(primals):]:
            default = sig.signature.parameters[name].default
            if default is inspect.Parameter.empty:
                self.error(node, f"jvp: {sig.fname}() missing argument {name!r}",
                           cls=TransformError)
            primals.append(self.object_operand(default, f"{name}_default"))
        return self.call_function_ref(("object", generated), primals + tangents, {}, node,
                                      hint, target)

    def static_transform(self, node):
        """``grad(f)`` written inside a function: build the transformed function now.

        Only astjax transformations applied to functions and constants qualify; the
        result is then inlined like any transformed function.
        """
        callee = self.static_value(node.func)
        from astjax import api, batch_api, jit_api
        if callee not in api.STATIC_TRANSFORMS + (batch_api.vmap, jit_api.jit):
            return None
        missing = object()

        def literal(a):
            # constants, -1, and tuples/lists/dicts of them (vmap's axes pytrees)
            if isinstance(a, gast.Constant):
                return a.value
            if isinstance(a, gast.UnaryOp) and isinstance(a.op, gast.USub) and \
                    isinstance(a.operand, gast.Constant):
                return -a.operand.value
            if isinstance(a, (gast.Tuple, gast.List, gast.Dict)):
                parts = [literal(e) for e in (a.elts if not isinstance(a, gast.Dict)
                                              else a.keys + a.values)]
                if any(p is missing for p in parts):
                    return missing
                if isinstance(a, gast.Dict):
                    return dict(zip(parts[:len(a.keys)], parts[len(a.keys):]))
                return tuple(parts) if isinstance(a, gast.Tuple) else list(parts)
            v = self.static_transform(a) if isinstance(a, gast.Call) else self.static_value(a)
            return missing if v is None else v   # (vmap(grad(f)): nested transformations)

        values = []
        for a in list(node.args) + [k.value for k in node.keywords]:
            v = literal(a)
            if v is missing:
                return None
            values.append(v)
        n = len(node.args)
        kwargs = {k.arg: v for k, v in zip(node.keywords, values[n:])}
        return callee(*values[:n], **kwargs)
