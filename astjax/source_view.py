"""``make_source``: the Python astjax generates, for every transformation.

``make_source(t)(*args)`` shows the code behind ``t(*args)``:

* ``grad``, ``value_and_grad``, ``vmap``, ``jit`` (and their compositions): the
  transformed function's generated code;
* ``jvp``, ``vjp``, ``linearize``, which take the function as their first argument:
  ``make_source(jvp)(f, primals, tangents)``, ``make_source(vjp)(f, *primals)``,
  ``make_source(linearize)(f, *primals)``;
* ``jacfwd``, ``jacrev``, ``jacobian``, ``hessian``: astjax assembles these at run
  time from generated column (jvp) or row (vjp) code, which is what is shown;
* a plain function: its core form.

By default the code is simplified for display (``astjax/passes/tidy.py``): copies
propagated, dead code removed, in-place accumulations spelled as the sums they are
and, when the arguments are real, identities that hold for their shapes and dtypes
(``x ** 1``, ``ra.unbroadcast`` of a cotangent that already fits, a matmul's 1-D
reshapes) written away; to know those, the code is run once on the arguments.  The
simplified code gives the same numbers bit for bit; ``simplify=False`` shows the
code exactly as it runs (the lines a traceback shows).
"""
from __future__ import annotations

import sys

import numpy as np

from astjax import codegen, core
from astjax import transform_table as table
from astjax.binding import fixed_arity_call, fun_name, normalize_argnums
from astjax.generation import ASSEMBLED
from astjax.core import Var
from astjax.errors import ArgumentError


def make_source(fun, simplify: bool = True):
    """``make_source(f)(*args)``: the Python source astjax generates for ``f(*args)``.

    ``f`` is a transformed function (``grad(loss)``, ``vmap(f)``, ``jit(g)``,
    ``jacfwd(f)``...), one of ``jvp``/``vjp``/``linearize`` (then the arguments are
    theirs: ``make_source(jvp)(f, primals, tangents)``), or a plain function (its core
    form).  ``simplify=False``: the code exactly as it runs.
    """
    if not callable(fun):
        raise ArgumentError(
            f"make_source expects a function, got {type(fun).__name__}; jvp, vjp and "
            "linearize return values, not a function: write make_source(jvp)(f, primals, "
            "tangents), make_source(vjp)(f, *primals) or make_source(linearize)(f, *primals)")

    def source(*args, **kwargs):
        return render(fun, args, kwargs, simplify)
    return source


# ------------------------------------------------------------------------ dispatch

def views(fun, args, kwargs):
    """``(notes, [Generated], run)`` behind ``fun(*args, **kwargs)``; ``run()`` calls the
    code once (for the facts the simplification uses), ``None`` when it cannot."""
    if table.is_transformation(fun, "jvp"):
        return _jvp_view(args, kwargs)
    if table.is_transformation(fun, "vjp"):
        return _vjp_view(args, kwargs)
    if table.is_transformation(fun, "linearize"):
        return _linearize_view(args, kwargs)
    view = getattr(fun, "_astjax_view", None)      # vjp_fn of vjp, f_jvp of linearize
    if view is not None:
        return [], [view], (lambda: fun(*args, **kwargs))
    label = getattr(fun, "_astjax", None)
    if label in ASSEMBLED and getattr(fun, "_astjax_generated", None) is None:
        return _assembled_view(fun, label, args, kwargs)
    maker = getattr(fun, "_astjax_source", None)
    if maker is not None:
        return [], [maker(*args, **kwargs)], (lambda: fun(*args, **kwargs))
    if label == "vmap" and getattr(fun, "_astjax_vmap", None) is not None:
        raise ArgumentError(
            "make_source: vmap(vmap(f)) has no code of its own: it merges the two batch "
            "axes into one and runs one vmap of f; make_source(vmap(f))(x) shows that code "
            "(x with the two batch axes merged into the first)")
    if label is not None:
        raise ArgumentError(
            f"make_source: {label}(...) here has no generated code of its own; "
            "show the code of what it is made of: make_source(grad(f)), "
                  "make_source(jvp)(f, primals, tangents)...")
    return None


def _fname(f):
    return fun_name(f)


def _jvp_view(args, kwargs):
    jvp = table.get("jvp")
    if len(args) < 3 or "has_aux" in kwargs and len(args) > 3:
        raise ArgumentError("make_source(jvp) takes jvp's arguments: "
                            "make_source(jvp)(f, primals, tangents)")
    f, primals, tangents = args[:3]
    jvp.check(primals, tangents)
    f = fixed_arity_call(f, primals, {})           # *args: this call's arity
    gen = jvp.code(f, tuple(range(len(primals))), tuple(primals))
    return [], [gen], lambda: jvp.function(f, primals, tangents, *args[3:], **kwargs)


def _ones_like_tree(tree):
    from astjax.tree_util import tree_map

    def one(v):
        a = np.asarray(v)
        dtype = a.dtype if a.dtype.kind in "fc" else np.float64
        return np.ones(a.shape, dtype) if a.ndim else dtype.type(1)
    return tree_map(one, tree)


def _vjp_view(args, kwargs):
    if not args:
        raise ArgumentError("make_source(vjp) takes vjp's arguments: "
                            "make_source(vjp)(f, *primals)")
    f, primals = args[0], args[1:]
    has_aux = bool(kwargs.get("has_aux", False))
    vjp = table.get("vjp")
    gen = vjp.code(f, primals, has_aux)

    def run():
        got = vjp.function(f, *primals, **kwargs)
        got[1](_ones_like_tree(got[0]))
    return [], [gen], run


def _linearize_view(args, kwargs):
    linearize = table.get("linearize")
    if not args or kwargs:
        raise ArgumentError("make_source(linearize) takes linearize's arguments: "
                            "make_source(linearize)(f, *primals)")
    f, primals = args[0], args[1:]
    gen = linearize.code(f, primals)

    def run():
        _, f_jvp = linearize.function(f, *primals)
        f_jvp(*primals)
    return [], [gen], run


def _assembled_view(fun, label, args, kwargs):
    jvp = table.get("jvp")
    if kwargs:
        raise ArgumentError(f"make_source({label}(f)) takes positional arguments only")
    hess = getattr(fun, "_astjax_hessian", None)
    jac = getattr(fun, "_astjax_jacobian", None)
    def jvp_run(gen, nums):
        def run():
            tangents = [_ones_like_tree(args[i]) for i in nums]
            gen.functions["main"](*args, *tangents)
        return run

    if label == "hessian" and hess is not None:
        f, argnums = hess
        f = fixed_arity_call(f, args, {})           # *args: this call's arity
        _, nums = normalize_argnums(argnums, len(args), _fname(f))
        inner = table.get("grad").function(f, argnums)
        gen = jvp.code(inner, nums, tuple(args))
        return ([f"hessian({_fname(f)}) runs this jvp of grad({_fname(f)}) once per input "
                 "element (forward over reverse) and assembles the columns"], [gen],
                jvp_run(gen, nums))
    if jac is None:
        raise ArgumentError(
            f"make_source: this {label}(...) is assembled at run time from other "
            "generated code and has no single function to show; show its parts: "
            "make_source(jvp)(f, primals, tangents) or make_source(grad(f))")
    f, argnums, has_aux = jac
    f = fixed_arity_call(f, args, {})               # *args: this call's arity
    _, nums = normalize_argnums(argnums, len(args), _fname(f))
    if label == "jacobian":
        from astjax.tree_util import tree_leaves
        n_in = sum(np.size(v) for i in nums for v in tree_leaves(args[i]))
        try:
            out = f(*args)
            n_out = sum(np.size(v) for v in tree_leaves(out[0] if has_aux else out))
        except Exception:       # placeholder arguments (astjax show without --args)
            n_out = n_in
        label = "jacfwd" if n_in <= n_out else "jacrev"
    if label == "jacfwd":
        gen = jvp.code(f, nums, tuple(args))
        return ([f"jacfwd({_fname(f)}) runs this jvp once per input element (vmapped over "
                 "the basis) and assembles the columns"], [gen], jvp_run(gen, nums))
    _, _, run = _vjp_view((f,) + tuple(args), {"has_aux": has_aux})
    gen = table.get("vjp").code(f, args, has_aux)
    return ([f"jacrev({_fname(f)}) runs the forward sweep once and the backward sweep once "
             "per output element (vmapped over the basis), and assembles the rows"],
            [gen], run)


# ----------------------------------------------------------------------- rendering

def _astjax_internal(fun) -> bool:
    """A function of astjax's own (not the user's, not generated)."""
    import os
    code = getattr(fun, "__code__", None)
    here = os.path.dirname(os.path.abspath(__file__))
    return code is not None and os.path.abspath(code.co_filename).startswith(here + os.sep)


def render(fun, args, kwargs, simplify=True) -> str:
    got = views(fun, args, kwargs)
    if got is None:       # a plain function: its core form
        from astjax.errors import AstjaxError
        from astjax.frontend.names import NameGen
        from astjax.frontend.normalize import Normalizer
        try:
            fn = Normalizer(NameGen()).function(fun)
        except AstjaxError:
            if not _astjax_internal(fun):
                raise
            raise ArgumentError(
                f"make_source: {getattr(fun, '__name__', 'this')} is a function of astjax "
                "itself, not generated code; give make_source a transformed function "
                "(grad(f), vmap(f)...), or jvp/vjp/linearize with their arguments: "
                "make_source(jvp)(f, primals, tangents)") from None
        return codegen.print_function(fn, f"core form of {_fname(fun)}, by astjax.")
    notes, gens, run = got
    texts = []
    for gen in gens:
        if simplify and gen.core and getattr(fun, "_astjax", None) != "jit":
            texts.append(simplified(gen, run))
        else:
            after_run = getattr(gen, "source_after_run", None)   # (a Generated's)
            texts.append(after_run() if after_run else gen.source)
    head = "".join(f"# {n}\n" for n in notes)
    return head + "\n\n".join(texts)


# statements traced at most while make_source watches the code run once; past it the
# run is stopped (facts from part of a run would not hold for all of it)
LINE_BUDGET = 200_000


class _OverBudget(Exception):
    pass


def observe(gen, run, statements):
    """What each statement of ``gen``'s code computed while ``run()`` called it (the
    facts of ``astjax/passes/tidy.py``); ``statements``: line -> core statement of the
    copies being simplified.  None when the code cannot run (placeholder arguments, an
    error): then nothing is specialized."""
    from astjax.passes.tidy import Observed
    if run is None or not gen.functions or not statements:
        return None
    files = {getattr(f, "__code__", None) and f.__code__.co_filename
             for f in gen.functions.values()}
    facts = Observed()
    last: dict = {}          # frame -> the line that ran last in it
    missing = object()
    budget = [LINE_BUDGET]

    def local(frame, event, arg):
        if event not in ("line", "return"):
            return local
        budget[0] -= 1
        if budget[0] < 0:        # a long run: stop it, specialize nothing
            raise _OverBudget
        values = frame.f_locals
        prev = statements.get(last.get(frame))
        if prev is not None and prev.target:      # it just ran: its result
            facts.record_result(prev, values.get(prev.target, missing))
        if event == "return":
            last.pop(frame, None)
            return local
        line = frame.f_lineno
        last[frame] = line
        facts.lines.add(line)
        s = statements.get(line)
        if s is not None:                          # about to run: its operands
            for k, a in list(enumerate(s.args)) + list(s.kwargs.items()):
                if isinstance(a, Var):
                    facts.record_operand(s, k, values.get(a.name, missing))
        return local

    def tracer(frame, event, arg):
        if frame.f_code.co_filename in files:
            return local
        return None

    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        run()
    except Exception:
        return None
    finally:
        sys.settrace(old)
    return facts


SIMPLIFIED_NOTE = "# simplified for these argument shapes and dtypes (simplify=False: as it runs)"


def _statement_lines(gen, copies) -> dict | None:
    """``id(statement) -> line`` of the copies in ``gen.source`` (None if the copies do not
    print exactly as ``gen.source``: then nothing is specialized)."""
    where: dict = {}
    texts, offset = [], 0
    for fn, (_, doc) in zip(copies, gen.core):
        lines: dict = {}
        text = codegen.print_with_helpers_lines(fn, doc, lines)
        where.update({k: v + offset for k, v in lines.items()})
        texts.append(text)
        offset += text.count("\n") + 2
    return where if "\n\n".join(texts) == gen.source else None


def _user_locations(fn):
    """Statements placed in generated code (vmap of grad reads grad's code) point at the
    user's line behind it, or at nothing: never into generated text."""
    for s in core.walk(fn.body):
        loc = s.loc
        if loc is not None and str(loc.filename).startswith("<astjax"):
            s.loc = codegen.origin(loc.filename, loc.lineno)


def simplified(gen, run) -> str:
    """``gen``'s functions simplified for display (``astjax/passes/tidy.py``).

    Identities that hold for the arguments are used only in statements seen running:
    a branch not taken keeps its code as it is.
    """
    from astjax.passes import copy_function
    from astjax.passes.tidy import tidy
    copies = [copy_function(fn) for fn, _ in gen.core]
    lines = _statement_lines(gen, copies)
    statements = {}
    if lines is not None:
        by_id = {id(s): s for fn in copies for s in core.walk(fn.body)}
        statements = {line: by_id[k] for k, line in lines.items()
                      if isinstance(by_id.get(k), core.Prim)}
    facts = observe(gen, run, statements)
    if facts is not None:
        from astjax import runtime_batch
        from astjax.passes.tidy import PURE_BATCH_HELPERS
        facts.pure_calls = frozenset(
            n for n in PURE_BATCH_HELPERS
            if gen.namespace.get(n) is getattr(runtime_batch, n, None) is not None)
    texts = []
    any_used = False
    for fn, (_, doc) in zip(copies, gen.core):
        new, used = tidy(fn, facts, copy=False)
        _user_locations(new)
        any_used |= used
        texts.append(codegen.print_with_helpers(new, doc))
    text = "\n\n".join(texts)
    if any_used:
        text = SIMPLIFIED_NOTE + "\n" + text
    return text


def simplified_functions(gen, run):
    """Load ``gen``'s simplified code next to it: ``{key: function}`` (for tests that
    check the simplified code computes exactly what the generated code computes)."""
    text = simplified(gen, run)
    namespace = dict(gen.namespace)
    codegen.load_source(text, namespace, "simplified")
    return {key: namespace[f.__name__] for key, f in gen.functions.items()}


__all__ = ["make_source", "render", "views", "simplified", "simplified_functions"]
