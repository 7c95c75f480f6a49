"""``astjax gen`` of a shard_map'ed function: a standalone module that runs sharded.

The module holds the per-shard function's generated code (``--transform`` applies to
it: ``jit`` is the usual choice), collectives as ``sh.*`` calls, and an entry point
named after the shard_map'ed function that splits the arguments by the in_specs,
runs the per-shard code on every device of the mesh and joins the outputs by the
out_specs -- through astjax's own shard runner (astjax/sharding/execute.py), copied
with the collectives and communicators like any runtime helper.  The mesh is the one
the function was made with: on threads by default, one process per device under
``mpiexec -n <mesh size>`` (mpi4py then needed, nothing else but NumPy).
"""
from __future__ import annotations

import re

from astjax.sharding.mesh import PartitionSpec


class GenError(Exception):
    """A sharded function ``astjax gen`` cannot write (message and hint)."""

    def __init__(self, message, hint=None):
        super().__init__(message)
        self.message, self.hint = message, hint


def spec_literal(spec):
    """The literal execute.run_layout reads back: ("P", entries...) per spec."""
    if spec is None:
        return None
    if isinstance(spec, PartitionSpec):
        return ("P",) + tuple(spec)
    if isinstance(spec, dict):
        return {k: spec_literal(v) for k, v in spec.items()}
    if isinstance(spec, list):
        return [spec_literal(v) for v in spec]
    return tuple(spec_literal(v) for v in spec)


def plan_of(fun):
    """The shard_map plan behind ``fun``, or None for an ordinary function."""
    plan = getattr(fun, "_astjax_plan", None)
    if plan is None:
        return None
    if plan.kind != "shard_map":
        raise GenError(f"astjax gen writes shard_map'ed functions; this one is a "
                       f"{plan.kind}", "write it as astjax.shard_map(f, mesh=..., "
                       "in_specs=..., out_specs=...) (a pmap is a shard_map over a 1-d "
                       "mesh of a vmap)")
    if plan.nargs is None:
        raise GenError(f"the per-shard function {plan.name} takes *args",
                       "give it named parameters")
    return plan


def layout(plan) -> dict:
    """The mesh and specs of ``plan`` as a Python literal."""
    manual = getattr(plan, "manual", None)
    return {"name": plan.name, "kind": plan.kind,
            "mesh": tuple((a, int(n)) for a, n in plan.mesh.shape.items()),
            "in_specs": spec_literal(tuple(plan.in_specs) if not isinstance(
                plan.in_specs, PartitionSpec) else (plan.in_specs,) * plan.nargs),
            "out_specs": spec_literal(plan.out_specs),
            "manual": tuple(sorted(manual)) if manual is not None else None,
            "check_vma": bool(plan.check_vma)}


def per_shard_args(plan, args):
    """Example arguments of the per-shard function: the first device's blocks of the
    global example arguments (placeholders stay placeholders)."""
    if not args or any(a is None for a in args):
        return [None] * plan.nargs
    from astjax.sharding import collectives as sh
    mesh, _, _, blocks = sh.driver().first_shard(plan, tuple(args))
    del mesh
    return list(blocks)


def entry_source(name, params, per_shard, lay, description) -> str:
    """The entry point: the shard runner called with the per-shard code and layout."""
    import pprint
    args = ", ".join(params)
    tup = f"({args},)" if len(params) == 1 else f"({args})"
    text = pprint.pformat(lay, width=80, sort_dicts=False)
    body = "\n".join("    " + ("layout = " if i == 0 else "         ") + line
                     for i, line in enumerate(text.splitlines()))
    return (f"def {name}({args}):\n"
            f'    """{description}\n\n'
            f"    Runs {per_shard} once per device of the mesh below: on threads, or one\n"
            f"    process per device under mpiexec -n <mesh size> (needs mpi4py).\n"
            f'    """\n'
            f"{body}\n"
            f"    out = shx.run_layout({per_shard}, layout, {tup})\n"
            f"    return out\n")


def sharded_generated(gen, plan, entry_name, params, description):
    """A Generated record whose source is ``gen``'s (the per-shard code) followed by
    the sharded entry point ``entry_name``."""
    import dataclasses
    per_shard = gen.functions["main"].__name__
    if entry_name == per_shard:
        raise GenError(f"the entry point name {entry_name!r} is the per-shard function's",
                       "choose another with --name")
    source = gen.source.rstrip("\n") + "\n\n\n" + entry_source(
        entry_name, params, per_shard, layout(plan), description)

    def stub():
        pass
    stub.__name__ = entry_name
    return dataclasses.replace(gen, source=source, functions={"main": stub})


def write_sharded(cli, opts, argv, req) -> int:
    """``astjax gen FILE.py:F --transform jit`` for a shard_map'ed ``F`` (cli.cmd_gen)."""
    import os
    import shlex
    import sys
    from astjax.standalone import Entry, standalone_module
    try:
        plan = plan_of(req.fun)
    except GenError as err:
        raise cli.CliError(err.message, err.hint) from None
    other = [st.name for st in req.steps if st.name != "jit"]
    if other:
        raise cli.CliError(
            f"astjax gen writes a shard_map'ed function's per-shard code under jit, not "
            f"{other[0]}: the derivative of a shard_map is not written as a module yet",
            "take the gradient inside the per-shard function (value_and_grad, then "
            f"psum/pmean), and run astjax gen {opts.target} --transform jit")
    for st in req.steps:
        st.kwargs["backend"] = "numpy"
    params = list(plan.params)[:plan.nargs]
    inner = cli.Request(plan.fun, plan.name, req.path, req.steps,
                        per_shard_args(plan, req.args), req.notes)
    gen, applied = cli.generate(inner)
    for note in req.notes:
        print(note, file=sys.stderr)
    name = opts.name or "_".join([s.name for s in applied] + [req.fname])
    if not name.isidentifier():
        raise cli.CliError(f"--name {name!r} is not a Python name",
                           "give an identifier such as train_step")
    mesh = ", ".join(f"{a}={n}" for a, n in plan.mesh.shape.items())
    description = (f"{cli.describe(applied, req.fname)}: shard_map of {plan.name} over a "
                   f"mesh ({mesh}), from {os.path.basename(req.path)}.")
    try:
        sharded = sharded_generated(gen, plan, name, params, description)
    except GenError as err:
        raise cli.CliError(err.message, err.hint) from None
    out = opts.output
    module_name = None
    if out not in (None, "-"):
        module_name = os.path.splitext(os.path.basename(out))[0]
        directory = os.path.dirname(os.path.abspath(out))
        if not os.path.isdir(directory):
            raise cli.CliError(f"cannot write {out}: no directory {directory}",
                               "create the directory first, or choose another -o path")
    title = (f"{cli.describe(applied, req.fname)} from {os.path.basename(req.path)}: a "
             f"shard_map over the mesh ({mesh}), as standalone Python.")
    text = standalone_module(sharded, Entry(name, description=description), title=title,
                             command="astjax " + shlex.join(argv), module_name=module_name,
                             max_const_size=opts.max_const_size,
                             version=getattr(sys.modules.get("astjax"), "__version__",
                                             None))
    if out in (None, "-"):
        cli._write(text)
    else:
        with open(out, "w", encoding="utf-8") as fh:
            fh.write(text)
        print(f"wrote {out}: {name}() ({text.count(chr(10))} lines, needs NumPy; mpi4py "
              "under mpiexec)", file=sys.stderr)
    return 0


# --------------------------------------------- derivatives, pmap: the plans a module reaches
#
# Generated code that calls a shard_map'ed function reads its plan (a ShardPlan
# constant) and, for derivatives, the plans derived from it at run time
# (``sh.vjp_plan(plan)``).  A standalone module holds each such plan as an
# ``shx.Plan``: the per-shard code (jit of the plan's per-shard function, generated
# here), its layout as a literal, and the derived plans the code will ask for, found by
# reading the generated code (``attach_plans``).  ``sh.register_driver`` then makes
# the copied collectives run them with ``shx.run_layout``.

_DERIVED = ("vjp", "jvp", "batch")


class _Node:
    """One plan the module holds: the astjax plan, its layout, the derived nodes.

    A pmap with ``static_broadcasted_argnums`` is a *family* node: no code of its own,
    one root node per static value the code calls it with (``derived`` keys
    ``("static", ((type name, value), ...))``, what ``LayoutDriver.static_plan`` looks
    up), as JAX compiles one program per static value."""

    def __init__(self, plan, root, depth, family=None):
        self.plan, self.root, self.depth = plan, root, depth
        self.derived: dict = {}
        self.gen = None          # the per-shard code (a Generated record)
        self.var = None          # its name in the module
        self.family = family     # a static value's root: the family node it belongs to
        self.is_family = False
        self.label = None        # a static value's root: the values, for its name

    def child(self, kind):
        if self.is_family:
            raise GenError(f"pmap({self.plan.name}) has static_broadcasted_argnums: "
                           f"astjax gen cannot follow which static values its {kind} code "
                           "is for", "bind the static arguments with functools.partial")
        found = self.derived.get(kind)
        if found is None:
            from astjax.sharding import collectives as sh
            make = {"vjp": sh.vjp_plan, "jvp": sh.jvp_plan, "batch": sh.batch_plan}[kind]
            found = self.derived[kind] = _Node(make(self.plan), self.root, self.depth + 1)
        return found

    def static_child(self, values):
        """The root node of the pmap for these static values (its per-device code)."""
        from astjax.sharding import collectives as sh
        key = ("static", static_key(self.plan, values))
        found = self.derived.get(key)
        if found is None:
            specialized = sh.driver().static_plan(self.plan, values)
            base = sh.driver().per_device_plan(specialized)
            found = self.derived[key] = _Node(base, None, 0, family=self)
            found.root = found
            found.label = "_".join(re.sub(r"\W", "_", repr(v)).strip("_") for v in values)
        return found


def static_key(plan, values):
    """The module's key of a static value: (type name, value) pairs, as astjax keys its
    plans by type and value (1, 1.0 and True: three programs); literals only, since the
    module writes them."""
    import ast
    key = []
    for v in values:
        try:
            same = type(ast.literal_eval(repr(v))) is type(v) and \
                ast.literal_eval(repr(v)) == v
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            same = False
        if not same:
            raise GenError(f"pmap({plan.name}): the static argument value {v!r} is not a "
                           "Python literal, so astjax gen cannot write it into the module",
                           "use ints, floats, strings, booleans, None or tuples of them, "
                           "or bind the value with functools.partial")
        key.append((type(v).__name__, v))
    return tuple(key)


def _is_plan(value):
    from astjax.sharding import collectives as sh
    return isinstance(value, sh.driver().ShardPlan)


class _Deep:
    """Stands for a call's arguments where only a root plan's static specs are read."""

    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        return self

    def __len__(self):
        return self.n


def _root_layout(plan) -> dict:
    if plan.kind == "shard_map":
        lay = layout(plan)
        sized_by = None
    else:                   # pmap, vmap(axis_name=): one axis sized by the call
        lay = {"name": plan.name, "kind": plan.kind,
               "mesh": ((plan.mesh.axis_name, None),),
               "in_specs": spec_literal(tuple(plan.in_specs)),
               "out_specs": spec_literal(plan.out_specs), "manual": None,
               "check_vma": bool(plan.check_vma)}
        sized_by = tuple(plan.mesh.mapped)
    return lay, sized_by


def node_layout(node) -> dict:
    """The layout literal of a node: its root's mesh, its own specs and modes."""
    from astjax.sharding import collectives as sh
    mapping = sh.driver()           # (the driver, above this module: not imported)
    if node.is_family:              # static values -> their plans, nothing to run itself
        return {"name": node.plan.name, "kind": node.plan.kind,
                "static_argnums": tuple(node.plan.pmapped.static)}
    root = node.root.plan
    lay, sized_by = _root_layout(root)
    p = node.plan
    if node.depth:
        args = _Deep(root.nargs)
        lay = dict(lay, name=p.name, kind=p.kind,
                   in_specs=spec_literal(mapping.plan_in_specs(p, args)),
                   out_specs=spec_literal(mapping.plan_out_specs(p, args)),
                   check_vma=bool(p.check_vma))
    lay["in_modes"], lay["out_modes"] = p.in_modes, p.out_modes
    if sized_by is not None:
        lay["sized_by"] = (node.depth, sized_by)
    if getattr(root, "local_only", False):
        lay["local_only"] = True
    return lay


_UNKNOWN = object()


def _static_values(fdef, args):
    """The names of ``fdef`` whose value is known where the code reads it: assigned
    once, from a literal or a tuple of known names (the generated code's
    ``plan_tuple = (k,)``), or a parameter given an example value (``args``, by
    position) and never assigned."""
    import ast
    params = dict(zip([a.arg for a in fdef.args.args], args or ()))
    stores: dict = {}
    for n in ast.walk(fdef):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            stores[n.id] = stores.get(n.id, 0) + 1
    values = {name: v for name, v in params.items() if name not in stores}
    assigns = [n for n in ast.walk(fdef) if isinstance(n, ast.Assign) and
               len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) and
               stores.get(n.targets[0].id) == 1]
    for _ in range(3):
        for n in assigns:
            v = _value_of(n.value, values)
            if v is not _UNKNOWN:
                values[n.targets[0].id] = v
    return values


def _value_of(e, values):
    """The Python value of a literal expression over known names, or _UNKNOWN."""
    import ast
    if isinstance(e, ast.Name):
        return values.get(e.id, _UNKNOWN)
    if isinstance(e, ast.Tuple):
        items = tuple(_value_of(x, values) for x in e.elts)
        return _UNKNOWN if any(x is _UNKNOWN for x in items) else items
    if isinstance(e, (ast.Constant, ast.UnaryOp)):
        try:
            return ast.literal_eval(e)
        except ValueError:
            return _UNKNOWN
    return _UNKNOWN


def _sh_call(call, name, nargs):
    import ast
    f = call.func
    return isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and \
        f.value.id == "sh" and f.attr == name and len(call.args) == nargs


def _plan_calls(source, known, args=None, main=None):
    """The derived plans ``source`` asks for: ``sh.vjp_plan(x)`` calls, x a plan
    constant (``known``: name -> node) or a variable holding one, and the static
    values ``sh.static_plan(x, values)`` calls a pmap with (literals, or parameters of
    the function ``main`` given example values: ``args``).  Returns False when some
    call's plan cannot be followed (then every plan gets that derivative)."""
    import ast
    followed = True

    def kind_of(call):
        f = call.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and \
                f.value.id == "sh" and f.attr.endswith("_plan") and \
                f.attr[:-5] in _DERIVED and len(call.args) == 1:
            return f.attr[:-5]
        return None

    for fdef in ast.parse(source).body:
        if not isinstance(fdef, ast.FunctionDef):
            continue
        env = dict(known)
        consts = _static_values(fdef, args if fdef.name == main else None)

        def resolve(e):
            nonlocal followed
            if isinstance(e, ast.Name):
                return env.get(e.id)
            if isinstance(e, ast.Call) and _sh_call(e, "static_plan", 2):
                family = resolve(e.args[0])
                if family is None:
                    followed = False
                    return None
                values = _value_of(e.args[1], consts)
                if values is _UNKNOWN or not isinstance(values, tuple):
                    pm = family.plan.pmapped
                    raise GenError(
                        f"pmap({family.plan.name}) has static_broadcasted_argnums "
                        f"({', '.join(pm.static_names)}), and astjax gen cannot tell "
                        "which values the code calls it with: the module holds one "
                        "per-device program per static value",
                        "give the static arguments as Python literals in --args (e.g. "
                        "--args \"f64[3, 2], 4, f64[2, 8, 3]\"): the module runs for "
                        "those values; or bind them with functools.partial")
                return family.static_child(values)
            if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and \
                    isinstance(e.func.value, ast.Name) and e.func.value.id == "rb" and \
                    e.func.attr == "lift" and len(e.args) == 1:
                return resolve(e.args[0])          # vmap's unbatched operand: itself
            if isinstance(e, ast.Call) and kind_of(e):
                parent = resolve(e.args[0])
                if parent is None:
                    followed = False
                    return None
                return parent.child(kind_of(e))
            return None
        for _ in range(3):                   # assignments in loops: to a fixpoint
            for n in ast.walk(fdef):
                if isinstance(n, ast.Assign) and len(n.targets) == 1 and \
                        isinstance(n.targets[0], ast.Name):
                    found = resolve(n.value)
                    if found is not None:
                        env[n.targets[0].id] = found
                elif isinstance(n, ast.Call) and (kind_of(n) or
                                                  _sh_call(n, "static_plan", 2)):
                    resolve(n)
    return followed


def _safe_rename(source, old, new):
    """``old`` -> ``new`` for names only: not attributes (``x.old``) nor keywords."""
    import tokenize
    from io import StringIO
    toks = list(tokenize.generate_tokens(StringIO(source).readline))
    out = []
    depth = 0
    for i, tok in enumerate(toks):
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
        if tok.type == tokenize.NAME and tok.string == old:
            prev = toks[i - 1] if i else None
            nxt = toks[i + 1] if i + 1 < len(toks) else None
            attribute = prev is not None and prev.type == tokenize.OP and prev.string == "."
            keyword = depth > 0 and nxt is not None and nxt.type == tokenize.OP and \
                nxt.string == "=" and not (prev is not None and prev.string == "lambda")
            if not attribute and not keyword:
                tok = tok._replace(string=new)
        out.append(tok)
    return tokenize.untokenize(out)


def _per_shard_code(node):
    """jit (NumPy backend) of the node's per-shard function, on placeholder arguments."""
    from astjax import transform_table
    from astjax.generation import generated
    jit = transform_table.get("jit").function
    return generated(jit(node.plan.fun, backend="numpy"), *([None] * node.plan.nargs))


def attach_plans(gen, args=None):
    """``(gen', late lines, requests)``: ``gen`` with the per-shard code of every plan it
    reaches merged in, the lines that build the plans (after the copied runtime) and
    the runtime helpers they need.  ``gen`` itself when it reaches none.  ``args``:
    example values of the main function's arguments (``--args``), where a pmap's
    static arguments may come from."""
    import ast
    from astjax.standalone import _free_names
    roots: dict = {}               # id(root plan) -> node

    def node_for(plan):
        chain = []
        while getattr(plan, "parent", None) is not None:
            p = plan.parent
            chain.append(plan.kind[len(p.kind) + 1:])
            plan = p
        if plan.kind != "shard_map" and not hasattr(plan, "pmapped"):
            raise GenError(f"astjax gen cannot write the {plan.kind} {plan.name}")
        if plan.nargs is None:
            raise GenError(f"the per-shard function {plan.name} takes *args",
                           "give it named parameters")
        node = roots.get(id(plan))
        if node is None:
            from astjax.sharding import collectives as sh
            if getattr(getattr(plan, "pmapped", None), "static", ()):
                node = roots[id(plan)] = _Node(plan, None, 0)
                node.is_family = True
            else:
                base = plan if plan.kind == "shard_map" else \
                    sh.driver().per_device_plan(plan)
                node = roots[id(plan)] = _Node(base, None, 0)
            node.root = node
        for kind in reversed(chain):
            node = node.child(kind)
        return node

    def nodes():
        """Every node, parents first."""
        out = []

        def visit(node):
            out.append(node)
            for child in node.derived.values():
                visit(child)
        for root in roots.values():
            visit(root)
        return out

    def scan(g, args=None):
        """The plan constants ``g`` reads (name -> node), its derived plans noted."""
        names, _ = _free_names(ast.parse(g.source))
        known = {n: node_for(g.namespace[n]) for n in sorted(names)
                 if _is_plan(g.namespace.get(n))}
        main = g.functions["main"].__name__ if "main" in g.functions else None
        if known and not _plan_calls(g.source, known, args, main):
            # a plan the code computes in a way not followed: every plan it could be
            # (those of the constants it reads, to order 2; a static pmap's: those of
            # the values found) gets the derivatives it asks
            roots_read = {k.root for k in known.values()}
            for node in [n for n in nodes() if not n.is_family and
                         (n.root in roots_read or n.root.family in roots_read)]:
                for kind in _DERIVED:
                    if node.depth < 2 and f"sh.{kind}_plan(" in g.source:
                        node.child(kind)
        return known

    top = scan(gen, args)
    if not top:
        return gen, [], set()
    pieces = [(gen, top)]
    while True:                     # per-shard code may reach plans too (named vmaps)
        todo = [n for n in nodes() if n.gen is None and not n.is_family]
        if not todo:
            break
        for node in todo:
            node.gen = _per_shard_code(node)
            pieces.append((node.gen, scan(node.gen)))
    order = nodes()
    return _merged(pieces, order)


def _merged(pieces, order):
    """One Generated of all pieces' code (names that clash renamed), the lines that
    build the plans, and the runtime helpers those lines call."""
    import ast
    import dataclasses
    import pprint
    from astjax.standalone import CANONICAL, _free_names
    main = pieces[0][0]
    namespace = dict(main.namespace)
    sources = []
    taken = set(namespace) | set(CANONICAL)
    owner: dict = {}                 # module name -> the value (or node) it stands for
    plan_names: dict = {}            # module name -> node
    fn_name: dict = {}               # id(node) -> its per-shard function's module name
    for k, (g, known) in enumerate(pieces):
        source = g.source
        tree = ast.parse(source)
        defined = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
        free, _ = _free_names(tree)
        renamed = {}
        for name in sorted(set(defined) | (free & (set(g.namespace) | set(known)))):
            if name in CANONICAL or name == "np":
                continue
            value = known[name] if name in known else g.namespace.get(name)
            if name in owner and owner[name] is value and name not in defined:
                continue             # the same value under the same name: shared
            new = name
            if name in owner or (k and name in taken):
                i = 2
                while f"{name}_{i}" in taken:
                    i += 1
                new = f"{name}_{i}"
                source = _safe_rename(source, name, new)
                renamed[name] = new
            taken.add(new)
            owner[new] = value
            if name in known:
                plan_names[new] = value
            else:
                namespace[new] = value
        for node in order:
            if node.gen is g:
                main_name = g.functions["main"].__name__
                fn_name[id(node)] = renamed.get(main_name, main_name)
        sources.append(source.rstrip("\n"))
    for name in plan_names:
        namespace.pop(name, None)
    aliases = []
    for name, node in plan_names.items():        # the code's names for the plans
        if node.var is None:
            node.var = name
        elif name != node.var:
            aliases.append(f"{name} = {node.var}")
    for node in order:
        if node.var is None:
            label = f"{node.plan.name}_{node.label}" if node.label else node.plan.name
            base = re.sub(r"\W", "_", f"{label}_plan").strip("_")
            i, var = 1, base
            while var in taken:
                i += 1
                var = f"{base}_{i}"
            node.var = var
            taken.add(var)
    late = []
    for node in reversed(order):     # children first
        text = pprint.pformat(node_layout(node), width=80, sort_dicts=False)
        derived = ", ".join(f"{k!r}: {c.var}" for k, c in node.derived.items())
        late.append(f"{node.var} = shx.Plan(\n    {fn_name.get(id(node), 'None')},\n    "
                    + text.replace("\n", "\n    ")
                    + (f",\n    {{{derived}}})" if derived else ")"))
    late += aliases
    late.append("sh.register_driver(shx.LayoutDriver)")
    requests = {("astjax.sharding.execute", "Plan"),
                ("astjax.sharding.execute", "LayoutDriver"),
                ("astjax.sharding.collectives", "register_driver"),
                ("astjax.sharding.collectives", "shard_map_call")}
    merged = dataclasses.replace(main, source="\n\n\n".join(sources) + "\n",
                                 namespace=namespace)
    return merged, late, requests
