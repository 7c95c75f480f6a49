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
