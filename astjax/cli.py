"""The ``astjax`` command line: ``astjax show``, ``astjax gen``, ``astjax demo``.

    astjax show examples/mlp.py:loss --transform "grad(argnums=0)"
    astjax gen examples/mlp.py:loss --transform "value_and_grad" -o loss_grad.py
    astjax gen model.py:loss --transform "vmap(grad(), in_axes=(None, 0))" -o per_example.py

``show`` prints the Python astjax generates for a transformation of a function in a
file; ``gen`` writes it as a standalone module that needs only NumPy (see
``astjax/standalone.py``).  Problems with what was asked (a missing file or function,
a transformation spec that does not parse, a function astjax cannot transform) are
reported on stderr with exit status 2 and no traceback.
"""
from __future__ import annotations

import argparse
import ast
import difflib
import importlib.util
import inspect
import keyword
import os
import re
import shlex
import sys
import textwrap
import tokenize
import traceback
from dataclasses import dataclass, field
from io import StringIO

EXIT_USAGE = 2

TRANSFORMS = {
    # name: the parameters after ``fun``, in order
    "grad": ("argnums", "has_aux"),
    "value_and_grad": ("argnums", "has_aux"),
    "vmap": ("in_axes", "out_axes", "axis_size"),
    "jit": ("static_argnums", "static_argnames", "donate_argnums", "backend", "fastmath"),
    "jacfwd": ("argnums", "has_aux"),
    "jacrev": ("argnums", "has_aux"),
    "jacobian": ("argnums", "has_aux"),
    "hessian": ("argnums",),
    # these take the function's arguments, not a function: outermost only, show only
    "jvp": (),
    "vjp": ("has_aux",),
    "linearize": (),
}
# transformations applied to a function *and its arguments* (jvp(f, primals, tangents)):
# ``astjax show`` prints their code for all positional arguments
CALL_TRANSFORMS = ("jvp", "vjp", "linearize")
# what ``astjax gen`` can write as a standalone module
GEN_TRANSFORMS = ("grad", "value_and_grad", "vmap", "jit")

DTYPES = {
    "f16": "float16", "f32": "float32", "f64": "float64",
    "c64": "complex64", "c128": "complex128",
    "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "bool": "bool_",
}

TRANSFORM_EXAMPLE = '"vmap(grad(argnums=0), in_axes=(None, 0))"'


class CliError(Exception):
    """A problem with the command line: a message, optional detail lines and a hint."""

    def __init__(self, message: str, hint: str | None = None, detail: list | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.detail = detail or []


def _caret_error(what: str, spec: str, message: str, col: int, end: int | None,
                 hint: str) -> CliError:
    col = max(0, min(col, len(spec)))
    width = max(1, (end if end is not None else col + 1) - col)
    return CliError(f"bad {what}: {message}", hint,
                    ["    " + spec, "    " + " " * col + "^" * width])


def _has_jit() -> bool:
    import astjax
    return callable(getattr(astjax, "jit", None))


# --------------------------------------------------------------------- transform specs

@dataclass
class Step:
    """One transformation of a spec, e.g. ``grad`` with ``{"argnums": 0}``."""

    name: str
    kwargs: dict = field(default_factory=dict)


def parse_transform(spec: str, func_name: str | None = None) -> list[Step]:
    """Parse ``"vmap(grad(argnums=0), in_axes=(None, 0))"`` into steps, outermost first.

    The innermost call may be empty (``grad()``), a bare name (``grad``), or name the
    function (``grad(loss)``): either way it applies to the function being transformed.
    """
    text = " ".join(spec.split("\n")).strip()
    hint = (f"the transformations are {', '.join(TRANSFORMS)}, nested like "
            f"{TRANSFORM_EXAMPLE}; keyword values are Python literals")

    def fail(message, node=None, col=0, end=None):
        if node is not None:
            col, end = node.col_offset, getattr(node, "end_col_offset", None)
        return _caret_error("--transform", text, message, col, end, hint)

    if not text:
        raise fail("the spec is empty")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as err:
        col = (err.offset or 1) - 1
        raise fail(f"this is not a Python expression ({err.msg})", col=col) from None
    node = tree.body
    steps: list[Step] = []
    while True:
        if isinstance(node, ast.Name) and node.id in TRANSFORMS:
            steps.append(Step(node.id))
            break
        if isinstance(node, ast.Name):
            if steps and (node.id == func_name or node.id in ("f", "fun", "FUNC")):
                break
            close = difflib.get_close_matches(node.id, list(TRANSFORMS), 1)
            raise fail(f"unknown transformation {node.id!r}"
                       + (f" (did you mean {close[0]!r}?)" if close else ""), node)
        if not isinstance(node, ast.Call):
            raise fail("expected a transformation such as grad(...) or vmap(...)", node)
        if not isinstance(node.func, ast.Name) or node.func.id not in TRANSFORMS:
            name = ast.get_source_segment(text, node.func) or "?"
            close = difflib.get_close_matches(name, list(TRANSFORMS), 1)
            raise fail(f"unknown transformation {name!r}"
                       + (f" (did you mean {close[0]!r}?)" if close else ""), node.func)
        name = node.func.id
        params = TRANSFORMS[name]
        args = list(node.args)
        inner = None
        if args and isinstance(args[0], (ast.Name, ast.Call)):
            inner = args.pop(0)
        kwargs: dict = {}
        for a in args:
            if isinstance(a, ast.Starred):
                raise fail("*arguments are not supported", a)
        if len(args) > len(params):
            raise fail(f"{name} takes at most {len(params)} parameters after the function "
                       f"({', '.join(params)})", args[len(params)])
        for p, a in zip(params, args):
            kwargs[p] = _literal(a, p, fail)
        for kw in node.keywords:
            if kw.arg is None:
                raise fail("**keywords are not supported", kw.value)
            if kw.arg not in params:
                close = difflib.get_close_matches(kw.arg, params, 1)
                raise fail(f"{name} has no parameter {kw.arg!r}"
                           + (f" (did you mean {close[0]!r}?)" if close else
                              f"; it takes {', '.join(params)}"), kw)
            if kw.arg in kwargs:
                raise fail(f"{kw.arg} is given twice", kw)
            kwargs[kw.arg] = _literal(kw.value, kw.arg, fail)
        steps.append(Step(name, kwargs))
        if inner is None:
            break
        node = inner
    for k, st in enumerate(steps[1:], 1):
        if st.name in CALL_TRANSFORMS:
            raise fail(f"{st.name} takes the function's arguments and returns values, not a "
                       f"function, so it can only be the outermost transformation "
                       f"(e.g. \"{st.name}(grad)\")")
    return steps


def _literal(node, what, fail):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        raise fail(f"the value of {what} must be a Python literal (a number, a tuple, None...)",
                   node) from None


def describe(steps: list[Step], fname: str) -> str:
    """The Python call a spec stands for: ``vmap(grad(loss, argnums=0), in_axes=(None, 0))``."""
    text = fname
    for step in reversed(steps):
        kw = "".join(f", {k}={v!r}" for k, v in step.kwargs.items())
        text = f"{step.name}({text}{kw})"
    return text


# -------------------------------------------------------------------------- --args

def parse_args_spec(spec: str, namespace: dict, path: str) -> list:
    """Example arguments from ``"f32[128,784], (f32[784,512], f32[512])"``: zeros of the
    given dtypes and shapes; tuples, lists and dicts make pytrees; Python literals stand
    for themselves; a name (``relu``, ``np.tanh``) is looked up in the user's module."""
    import numpy as np
    raw = " ".join(spec.split("\n")).strip()
    hint = ("write one spec per argument, separated by commas: a dtype and shape like "
            "f32[128,784] or f64[] (dtypes: " + ", ".join(DTYPES) + "), ( ... ) or "
            "[ ... ] for tuples and lists, a Python literal, or the name of a function "
            f"defined in {os.path.basename(path)}")
    # ``f64[]`` is not Python: make it ``f64[()]``, remembering where text was added
    inserted: list[int] = []

    def widen(m):
        inserted.append(m.start() + 1 + 2 * len(inserted))
        return "[()]"
    text = re.sub(r"(?<=[A-Za-z0-9_])\[\s*\]", widen, raw)
    prefix = "_args("

    def original(col):
        col -= len(prefix)
        return col - 2 * sum(1 for p in inserted if p < col)

    def fail(message, node=None, col=0):
        end = None
        if node is not None:
            col, end = original(node.col_offset), original(node.end_col_offset)
        return _caret_error("--args", raw, message, col, end, hint)

    try:
        tree = ast.parse(prefix + text + ")", mode="eval")
    except SyntaxError as err:
        col = original((err.offset or 1) - 1)
        try:        # the text alone usually places the caret better
            ast.parse(text, mode="eval")
        except SyntaxError as err2:
            err, col = err2, original(len(prefix) + (err2.offset or 1) - 1)
        raise fail(f"this is not a list of argument specs ({err.msg})", col=col) from None
    call = tree.body
    if call.keywords:
        raise fail("keyword arguments are not supported; give the arguments in order",
                   call.keywords[0].value)

    def dims(node):
        items = node.elts if isinstance(node, ast.Tuple) else [node]
        out = []
        for d in items:
            if not (isinstance(d, ast.Constant) and type(d.value) is int and d.value >= 0):
                raise fail("a dimension must be a non-negative integer", d)
            out.append(d.value)
        return tuple(out)

    def resolve(node):
        if isinstance(node, ast.Name):
            if node.id in namespace:
                return namespace[node.id]
            raise fail(f"unknown name {node.id!r}: not a dtype ({', '.join(DTYPES)}) and not "
                       f"defined in {os.path.basename(path)}", node)
        base = resolve(node.value)
        try:
            return getattr(base, node.attr)
        except AttributeError:
            raise fail(f"{ast.unparse(node.value)} has no attribute {node.attr!r}",
                       node) from None

    def value(node):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
                and node.value.id in DTYPES:
            return np.zeros(dims(node.slice), dtype=getattr(np, DTYPES[node.value.id]))
        if isinstance(node, ast.Subscript):
            name = ast.unparse(node.value)
            close = difflib.get_close_matches(name, list(DTYPES), 1)
            raise fail(f"unknown dtype {name!r}"
                       + (f" (did you mean {close[0]!r}?)" if close else ""), node.value)
        if isinstance(node, ast.Name) and node.id in DTYPES:
            return np.zeros((), dtype=getattr(np, DTYPES[node.id]))
        if isinstance(node, ast.Tuple):
            return tuple(value(e) for e in node.elts)
        if isinstance(node, ast.List):
            return [value(e) for e in node.elts]
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise fail("**mappings are not supported", node)
            return {_literal(k, "a dict key", fail): value(v)
                    for k, v in zip(node.keys, node.values)}
        if isinstance(node, (ast.Name, ast.Attribute)):
            return resolve(node)
        if isinstance(node, (ast.Constant, ast.UnaryOp)):
            return _literal(node, "an argument", fail)
        raise fail("expected a dtype and shape (f32[3, 4]), a tuple or list of them, a "
                   "Python literal or a name", node)

    out = []
    for a in call.args:
        if isinstance(a, ast.Starred):
            raise fail("*arguments are not supported", a)
        out.append(value(a))
    return out


# ----------------------------------------------------------------------- the target

def load_target(target: str):
    """``(module, function, path, name)`` for ``FILE.py:FUNC``."""
    path, sep, name = target.rpartition(":")
    if not sep or not path or not name:
        raise CliError(f"expected FILE.py:FUNC, got {target!r}",
                       "name a Python file and a function in it, e.g. examples/mlp.py:loss")
    if not os.path.exists(path):
        raise CliError(f"no such file: {path}",
                       "give the path of a Python file, relative to the current directory "
                       f"({os.getcwd()}) or absolute")
    if os.path.isdir(path):
        raise CliError(f"{path} is a directory, not a Python file",
                       "name a .py file inside it, e.g. "
                       f"{os.path.join(path, 'model.py')}:{name}")
    path = os.path.abspath(path)
    module = _import_file(path)
    obj = module
    for part in name.split("."):
        if not part.isidentifier():
            raise CliError(f"{name!r} is not a function name",
                           "write FILE.py:FUNC with FUNC a Python name (or a dotted path)")
        if not hasattr(obj, part):
            found = _functions_in(module, path)
            close = difflib.get_close_matches(name, found, 1)
            listing = ", ".join(found) if found else "(none)"
            raise CliError(
                f"{os.path.basename(path)} has no function {name!r}"
                + (f" (did you mean {close[0]!r}?)" if close else ""),
                f"the functions defined in {os.path.basename(path)} are: {listing}")
        obj = getattr(obj, part)
    if not callable(obj) or isinstance(obj, type):
        raise CliError(f"{name} in {os.path.basename(path)} is "
                       f"{'a class' if isinstance(obj, type) else 'a ' + type(obj).__name__}"
                       ", not a function",
                       f"the functions defined there are: "
                       f"{', '.join(_functions_in(module, path)) or '(none)'}")
    return module, obj, path, name


def _functions_in(module, path) -> list:
    found = []
    for key, v in vars(module).items():
        code = getattr(v, "__code__", None)
        if inspect.isfunction(v) and code is not None and \
                os.path.abspath(code.co_filename) == path:
            found.append((code.co_firstlineno, key))
    return [k for _, k in sorted(found)]


_loaded: dict = {}   # path -> module name, of the files imported here


def _import_file(path: str):
    stem = os.path.splitext(os.path.basename(path))[0]
    modname = stem if stem.isidentifier() and stem not in sys.modules else \
        "_astjax_cli_" + re.sub(r"\W", "_", stem)
    directory = os.path.dirname(path)
    if directory not in sys.path:
        sys.path.insert(0, directory)      # like ``python FILE.py``: siblings import
    spec = importlib.util.spec_from_file_location(modname, path)
    if spec is None or spec.loader is None:
        raise CliError(f"cannot import {path}", "name a Python source file (.py)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module
    _loaded[path] = modname
    try:
        spec.loader.exec_module(module)
    except SyntaxError as err:
        sys.modules.pop(modname, None)
        lines = [f'  File "{err.filename}", line {err.lineno}']
        if err.text:
            lines += ["    " + err.text.rstrip(), "    " + " " * ((err.offset or 1) - 1) + "^"]
        raise CliError(f"{os.path.basename(path)} has a syntax error: {err.msg}",
                       "fix the file and run again", lines) from None
    except BaseException as err:
        sys.modules.pop(modname, None)
        if isinstance(err, KeyboardInterrupt):
            raise
        frames = traceback.extract_tb(err.__traceback__)
        user = [f for f in frames if os.path.abspath(f.filename) == path] or frames[-1:]
        first = frames.index(user[0]) if user else 0
        detail = traceback.format_list(frames[first:])
        raise CliError(f"importing {os.path.basename(path)} raised "
                       f"{type(err).__name__}: {err}",
                       "astjax imports the file to find the function; it must import "
                       "without errors", [line.rstrip("\n") for line in detail]) from None
    return module


# ------------------------------------------------------------------ transforming

@dataclass
class Request:
    fun: object
    fname: str
    path: str
    steps: list
    args: list
    notes: list


def _example_args(fun, args_spec, module, path):
    if args_spec is not None:
        args = parse_args_spec(args_spec, vars(module), path)
        try:
            sig = inspect.signature(fun)
        except (TypeError, ValueError):
            return args
        try:
            sig.bind(*args)
        except TypeError as err:
            name = getattr(fun, "__name__", "the function")
            raise CliError(f"--args gives {len(args)} argument(s) for {name}{sig}: {err}",
                           "give one spec per positional argument of the function") from None
        return args
    # without --args: placeholders, one per positional parameter (what vmap needs to
    # know); generated code does not depend on the values
    try:
        params = inspect.signature(fun).parameters.values()
    except (TypeError, ValueError):
        return []
    return [None for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            and p.default is p.empty]


def build(req: Request):
    """``(transformed function or None, applied steps)``; jit is skipped without astjax.jit."""
    import astjax
    f = req.fun
    applied = []
    for step in reversed(req.steps):
        if step.name in CALL_TRANSFORMS:     # outermost: see generate()
            applied.append(step)
            continue
        if step.name == "jit" and not _has_jit():
            req.notes.append("note: this astjax has no jit yet; jit(...) is left out")
            continue
        try:
            f = getattr(astjax, step.name)(f, **step.kwargs)
        except TypeError as err:
            if isinstance(err, astjax.AstjaxError):
                raise
            raise CliError(f"{step.name}: {err}", f"check the keywords of {step.name} in "
                                                  "--transform") from None
        applied.append(step)
    applied.reverse()
    return (f if applied else None), applied


def generate(req: Request):
    """The ``Generated`` record for the request, and the transformation steps applied."""
    from astjax.binding import function_arguments
    from astjax.generation import generated
    from astjax.errors import AstjaxError
    transformed, applied = build(req)
    if applied and applied[0].name in CALL_TRANSFORMS:
        from astjax.source_view import views
        import astjax
        base = transformed if transformed is not None else req.fun
        call_args = _call_args(applied[0], base, req.args)
        _, gens, _ = views(getattr(astjax, applied[0].name), call_args, applied[0].kwargs)
        return gens[0], applied
    if transformed is None:
        return _core_form(req.fun, req.fname, dict(function_arguments(req.args))), applied
    try:
        return generated(transformed, *req.args), applied
    except AstjaxError as err:
        inner = [s.name for s in applied[1:]]
        notes = []
        if "vmap" in inner:
            notes.append("note: astjax generates code for vmap only as the outermost "
                         "transformation: vmap(grad(f)) has generated code, while "
                         "grad(vmap(f)), vmap(vmap(f)) and jit(vmap(f)) do not")
        if "jit" in inner:
            notes.append("note: jit is meant to be the outermost transformation, e.g. "
                         "jit(grad(f))")
        if not notes:
            raise
        raise CliError(str(err), None, notes) from None


def _call_args(step: Step, fun, args):
    """The arguments of jvp / vjp / linearize for ``fun`` at example arguments ``args``
    (every positional argument is differentiated; tangents are like the primals)."""
    if step.name == "jvp":
        return (fun, tuple(args), tuple(args))
    return (fun, *args)


def rendered(req: Request, raw: bool = False) -> str:
    """What ``astjax show`` prints: the generated code, simplified for display (see
    ``astjax/source_view.py``) unless ``raw``; placeholder arguments (no --args) give
    the simplifications that hold for every argument."""
    from astjax.source_view import render
    import astjax
    transformed, applied = build(req)
    if not applied:
        return generate(req)[0].source
    if applied[0].name in CALL_TRANSFORMS:
        base = transformed if transformed is not None else req.fun
        return render(getattr(astjax, applied[0].name), _call_args(applied[0], base, req.args),
                      dict(applied[0].kwargs), not raw)
    from astjax.errors import AstjaxError
    try:
        return render(transformed, tuple(req.args), {}, not raw)
    except AstjaxError:
        generate(req)                   # the same error, with notes where they help
        raise


def _core_form(fun, fname, static):
    """The core form of an untransformed function, as a Generated record."""
    from astjax import codegen
    from astjax.generation import Generated, base_namespace
    from astjax.frontend.names import NameGen
    from astjax.frontend.normalize import Normalizer
    fn = Normalizer(NameGen()).function(fun, static_functions=static)
    origins: list = []
    source = codegen.print_function(fn, f"core form of {fname}, by astjax.", origins)
    namespace = base_namespace()
    namespace.update(fn.env.current())
    codegen.load_source(source, namespace, f"core({fname})", origins)
    return Generated(source, {"main": namespace[fn.name]}, namespace, fn.env)


def _request(opts) -> Request:
    module, fun, path, name = load_target(opts.target)
    fname = name.rsplit(".", 1)[-1]
    steps = parse_transform(opts.transform, fname) if opts.transform is not None else []
    static = [k for st in steps if st.name == "jit" for k in ("static_argnums",
                                                              "static_argnames")
              if st.kwargs.get(k) not in (None, (), [])]
    if static and opts.args is None and _has_jit():
        raise CliError(f"jit({static[0]}=...) builds the values of static arguments into "
                       "the code, so they must be given",
                       'describe the arguments with --args, the static ones as Python '
                       'literals, e.g. --args "f64[3], 4"')
    args = _example_args(fun, opts.args, module, path)
    return Request(fun, fname, path, steps, args, [])


# ------------------------------------------------------------------------ highlighting

_STYLE = {"keyword": "1;35", "string": "32", "number": "36", "comment": "90",
          "location": "33", "defname": "1;34", "module": "34"}
_MODULES = {"np", "rt", "ra", "rb", "math"}
_LOCATION = re.compile(r"#\s*[^\s:]+\.py:\d+")


def highlight(source: str) -> str:
    """``source`` with ANSI colours for keywords, strings, numbers, comments (``tokenize``)."""
    lines = source.splitlines(keepends=True)
    try:
        tokens = list(tokenize.generate_tokens(StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return source

    def between(a, b):
        (r1, c1), (r2, c2) = a, b
        if r1 > len(lines):
            return ""
        if r1 == r2:
            return lines[r1 - 1][c1:c2]
        parts = [lines[r1 - 1][c1:]] + lines[r1:r2 - 1]
        if r2 <= len(lines):
            parts.append(lines[r2 - 1][:c2])
        return "".join(parts)

    out = []
    pos = (1, 0)
    prev = None
    for tok in tokens:
        if tok.type == tokenize.ENDMARKER:
            break
        out.append(between(pos, tok.start))
        text = between(tok.start, tok.end)
        style = None
        if tok.type == tokenize.COMMENT:
            style = "location" if _LOCATION.match(tok.string) else "comment"
        elif tok.type == tokenize.STRING:
            style = "string"
        elif tok.type == tokenize.NUMBER:
            style = "number"
        elif tok.type == tokenize.NAME:
            if prev is not None and prev.type == tokenize.NAME and prev.string in ("def",
                                                                                   "class"):
                style = "defname"
            elif keyword.iskeyword(tok.string):
                style = "keyword"
            elif tok.string in _MODULES:
                style = "module"
        if style and text:
            code = _STYLE[style]
            text = "\n".join(f"\x1b[{code}m{part}\x1b[0m" if part else part
                             for part in text.split("\n"))
        out.append(text)
        pos = tok.end
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                            tokenize.COMMENT):
            prev = tok
    out.append(between(pos, (len(lines) + 1, 0)))
    return "".join(out)


def _use_color(choice: str, stream) -> bool:
    if choice == "always":
        return True
    if choice == "never":
        return False
    return bool(getattr(stream, "isatty", lambda: False)()) and \
        "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


# -------------------------------------------------------------------------- commands

def _write(text: str):
    """Write to stdout; a reader that stops early (``| head``) is not an error."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def cmd_show(opts) -> int:
    req = _request(opts)
    text = rendered(req, opts.raw)
    if not getattr(opts, "kernels", False):     # jit's compiled kernels: --kernels
        from astjax.kernels.backend import without_kernels
        text = without_kernels(text)
    for note in req.notes:
        print(note, file=sys.stderr)
    if _use_color(opts.color, sys.stdout):
        text = highlight(text)
    _write(text)
    return 0


def _entry_for(req: Request, applied, name: str | None):
    from astjax.standalone import Entry
    default = "_".join([s.name for s in applied] + [req.fname])
    entry_name = name or default
    if not entry_name.isidentifier() or keyword.iskeyword(entry_name):
        raise CliError(f"--name {entry_name!r} is not a Python name",
                       "give an identifier such as grad_loss")
    description = (f"{describe(applied, req.fname)} for {req.fname} in "
                   f"{os.path.basename(req.path)}." if applied else
                   f"{req.fname} from {os.path.basename(req.path)} in astjax's core form.")
    if applied and applied[0].name == "vmap":     # the wrapper moves the batch axes
        kw = applied[0].kwargs
        return Entry(entry_name, "vmap", kw.get("in_axes", 0), kw.get("out_axes", 0),
                     kw.get("axis_size"), description)
    return Entry(entry_name, description=description)


def cmd_gen(opts, argv) -> int:
    import astjax
    from astjax.standalone import standalone_module
    req = _request(opts)
    plan = getattr(req.fun, "_astjax_plan", None)
    if plan is not None and plan.kind == "shard_map" and \
            all(st.name == "jit" for st in req.steps):   # a shard_map'ed function, jitted
        from astjax.sharding.gen import write_sharded
        return write_sharded(sys.modules[__name__], opts, argv, req)
    other = [st.name for st in req.steps if st.name not in GEN_TRANSFORMS]
    if other:
        raise CliError(f"astjax gen writes standalone modules for {', '.join(GEN_TRANSFORMS)}"
                       f", not {other[0]}",
                       f"astjax show prints the code of {other[0]}: astjax show "
                       f"{opts.target} --transform {shlex.quote(opts.transform)}")
    # the module is NumPy: jit's host code from the NumPy backend, whatever the default;
    # with backend="cuda" the kernels' CUDA text goes with it (cuda_runtime.kernel_text)
    kernels = None
    if any(st.kwargs.get("backend") in ("cuda", "gpu") for st in req.steps):
        kernels = getattr(generate(req)[0], "kernel_text", None)
    for st in req.steps:
        if st.name == "jit":
            st.kwargs["backend"] = "numpy"
    gen, applied = generate(req)
    # shard_map / pmap calls in the code: their per-shard code and plans go with it
    from astjax.sharding.gen import GenError, attach_plans
    try:
        gen, plan_lines, plan_needs = attach_plans(
            gen, req.args if opts.args is not None else None)
    except GenError as err:
        raise CliError(err.message, err.hint) from None
    for note in req.notes:
        print(note, file=sys.stderr)
    entry = _entry_for(req, applied, opts.name)
    out = opts.output
    module_name = None
    if out not in (None, "-"):
        module_name = os.path.splitext(os.path.basename(out))[0]
        directory = os.path.dirname(os.path.abspath(out))
        if not os.path.isdir(directory):
            raise CliError(f"cannot write {out}: no directory {directory}",
                           "create the directory first, or choose another -o path")
    command = "astjax " + shlex.join(argv)
    title = (f"{describe(applied, req.fname)} from {os.path.basename(req.path)}, "
             "as standalone Python." if applied else
             f"{req.fname} from {os.path.basename(req.path)}, as standalone Python.")
    text = standalone_module(gen, entry, title=title, command=command,
                             module_name=module_name, max_const_size=opts.max_const_size,
                             version=getattr(astjax, "__version__", None), late=plan_lines,
                             requests=plan_needs)
    if kernels:
        from astjax.kernels.cuda_runtime import kernels_appendix
        text += kernels_appendix(kernels, out)
    if out in (None, "-"):
        _write(text)
    else:
        with open(out, "w", encoding="utf-8") as fh:
            fh.write(text)
        needs = "NumPy; mpi4py under mpiexec" if plan_lines else "only NumPy"
        print(f"wrote {out}: {entry.name}() ({text.count(chr(10))} lines, needs {needs})",
              file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------- parser

_TRANSFORM_HELP = """\
transformation spec (--transform):
  nested calls of grad, value_and_grad, vmap, jit, jacfwd, jacrev, jacobian and
  hessian, with keyword arguments that are Python literals; the innermost call, empty
  or a bare name, applies to FUNC.  jvp, vjp and linearize, which take FUNC's
  arguments rather than a function, may be the outermost (astjax show only):
    "grad"                                   astjax.grad(FUNC)
    "grad(argnums=(0, 1))"                   astjax.grad(FUNC, argnums=(0, 1))
    "value_and_grad(has_aux=True)"           astjax.value_and_grad(FUNC, has_aux=True)
    "vmap(grad(argnums=0), in_axes=(None, 0))"
                                             astjax.vmap(astjax.grad(FUNC, argnums=0),
                                                         in_axes=(None, 0))
    "jvp"                                    astjax.jvp(FUNC, args, tangents)
    "jvp(grad)"                              a Hessian-vector product
  keywords: grad, value_and_grad, jacfwd, jacrev, jacobian: argnums, has_aux;
  hessian: argnums; vmap: in_axes, out_axes, axis_size; vjp: has_aux;
  jit: static_argnums, static_argnames, donate_argnums, backend, fastmath.
  astjax gen writes modules for grad, value_and_grad, vmap and jit.
{jit}

argument specs (--args), optional:
  example arguments, one per positional parameter of FUNC, when generation needs them
  (which arguments vmap batches; functions passed as arguments, which are inlined):
    "f32[128,784], (f32[784,512], f32[512])"   a float32 array and a tuple of two
    "f64[], i64[3], [f64[2], f64[2]], relu"     a scalar, ints, a list, a function
{dtypes}
"""


def _jit_help() -> str:
    try:
        has = _has_jit()
    except Exception:       # help must print even if astjax cannot be imported
        has = False
    return ("astjax.jit(...) is applied: optimized code; give --args when static_argnums "
            "are used (their values are built into the code)." if has else
            "this astjax has no jit yet: jit(...) is accepted and left out (a no-op).")


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="astjax",
        description="JAX-style transformations of NumPy code by source rewriting",
        epilog="examples:\n"
               '  astjax show model.py:loss --transform "grad(argnums=0)"\n'
               '  astjax gen model.py:loss --transform "vmap(grad(), in_axes=(None, 0))" '
               "-o per_example.py\n"
               "  astjax demo\n\nrun 'astjax COMMAND --help' for a command's options",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    from astjax import __version__
    parser.add_argument("--version", action="version", version=f"astjax {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    dtypes = (f"dtypes: {', '.join(DTYPES)}; ( ... ) and [ ... ] make tuples and lists, "
              "{'k': f64[3]} dicts; Python literals stand for themselves; other names are "
              "looked up in FILE.")
    spec_help = _TRANSFORM_HELP.format(
        jit=textwrap.fill("jit: " + _jit_help(), 88, initial_indent="  ",
                          subsequent_indent="  "),
        dtypes=textwrap.fill(dtypes, 88, initial_indent="  ", subsequent_indent="  "))

    def common(p, transform_required):
        p.add_argument("target", metavar="FILE.py:FUNC",
                       help="the function to transform: a Python file and a function in it")
        p.add_argument("-t", "--transform", metavar="SPEC", required=transform_required,
                       help="the transformation, e.g. " + TRANSFORM_EXAMPLE
                            + ("" if transform_required else
                               " (without it: the function's core form)"))
        p.add_argument("-a", "--args", metavar="SPECS",
                       help='example arguments, e.g. "f32[128,784], (f32[784,512], f32[512])"')

    show = sub.add_parser(
        "show", help="print the Python source astjax generates for a transformation",
        description="Print the Python source astjax generates for a transformation of "
                    "FUNC, syntax-highlighted on a terminal. Comments like "
                    "'# model.py:12' point at the line of FILE each statement comes from.",
        epilog=spec_help + '\nexample:\n  astjax show model.py:loss --transform "grad"\n',
        formatter_class=argparse.RawDescriptionHelpFormatter)
    common(show, False)
    show.add_argument("--raw", action="store_true",
                      help="the code exactly as it runs (the lines a traceback shows), "
                           "without the simplifications made for reading")
    show.add_argument("--kernels", action="store_true",
                      help="with jit: also the C text of each compiled kernel")
    show.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                      help="ANSI colours: auto (when stdout is a terminal; NO_COLOR turns "
                           "them off), always or never")

    gen = sub.add_parser(
        "gen", help="write a standalone module (NumPy only) with the generated code",
        description="Write the code astjax generates for a transformation of FUNC as a "
                    "standalone Python module that imports only NumPy: the generated "
                    "functions, an entry point named after the transformation "
                    "(grad_loss, vmap_grad_loss...), the constants of FILE the code "
                    "reads, written as literals, and the astjax runtime helpers it calls.",
        epilog=spec_help + "\nexample:\n"
               '  astjax gen model.py:loss --transform "value_and_grad" -o loss_grad.py\n'
               "  python -c 'from loss_grad import value_and_grad_loss'\n",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    common(gen, True)
    gen.add_argument("-o", "--output", metavar="OUT.py",
                     help="the module to write (default: standard output)")
    gen.add_argument("--name", metavar="NAME",
                     help="the entry point's name (default: the transformations and "
                          "FUNC, e.g. vmap_grad_loss)")
    from astjax.standalone import DEFAULT_MAX_CONST_SIZE
    gen.add_argument("--max-const-size", type=int, default=DEFAULT_MAX_CONST_SIZE,
                     metavar="N",
                     help="the most array elements a constant may have to be written as a "
                          f"literal (default {DEFAULT_MAX_CONST_SIZE})")

    sub.add_parser("demo", help="a tanh MLP classifier in plain NumPy (784-512-512-10, as in "
                                "JAX's README): its generated gradient and a few training "
                                "steps")
    return parser


def _called_parameters(target: str) -> list:
    """The target function's positional parameters, and those its body calls."""
    try:
        path, _, name = target.rpartition(":")
        module = sys.modules.get(_loaded.get(os.path.abspath(path), ""))
        fun = module
        for part in name.split("."):
            fun = getattr(fun, part)
        tree = ast.parse(inspect.cleandoc("\n" + inspect.getsource(fun)))
    except Exception:
        return [], []
    fdef = tree.body[0] if tree.body else None
    if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return [], []
    params = [a.arg for a in fdef.args.posonlyargs + fdef.args.args]
    called = {n.func.id for n in ast.walk(fdef) if isinstance(n, ast.Call)
              and isinstance(n.func, ast.Name) and n.func.id in params}
    return params, sorted(called)


def _report(message: str, hint: str | None = None, detail=()) -> int:
    lines = [f"astjax: error: {message}", *detail]
    if hint:
        lines.append(f"hint: {hint}")
    print("\n".join(lines), file=sys.stderr)
    return EXIT_USAGE


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        from astjax.demo import main as demo
        try:
            return demo()
        except BrokenPipeError:          # ``astjax demo | head``
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
    from astjax.errors import AstjaxError
    try:
        if args.command == "show":
            return cmd_show(args)
        if args.command == "gen":
            return cmd_gen(args, argv)
    except CliError as err:
        return _report(err.message, err.hint, err.detail)
    except AstjaxError as err:
        note = None
        params, called = _called_parameters(args.target) if args.args is None else ([], [])
        if called:
            example = ", ".join("np.tanh" if p in called else "f64[3]" for p in params)
            note = (f"note: {', '.join(called)} is called in the function, and without "
                    "--args astjax takes every argument for an array; if it is a function, "
                    "name one (from the file, or np.tanh...) in its place with --args, "
                    f'e.g. --args "{example}"')
        return _report(str(err), None, [note] if note else ())
    parser.error(f"unknown command {args.command}")
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
