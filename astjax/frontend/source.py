"""Step 1 of the pipeline: find the source of a Python function and parse it.

Every transform starts from the user's own code, so this module answers three questions,
each with a clear ``SourceError`` when it cannot:

* *Which Python function is this?*  ``unwrap_callable`` peels ``functools.partial``,
  bound methods and ``functools.wraps`` wrappers down to a plain function.
* *Where is its source?*  ``get_function_source`` reads the file through ``linecache``
  and finds the function's node: ``def`` by its first line (decorators included, as in
  ``co_firstlineno``), ``lambda`` by line, argument names and the column ranges of its
  instructions (``co_positions``), so several lambdas on one line or a lambda in the
  middle of a multi-line call are told apart.
* *Is that source still the running code?*  The node is compiled again (inside dummy
  enclosing scopes that recreate its free variables, its class and the module's imports,
  so opcodes and name mangling come out the same) and compared with ``fn.__code__``.
  A file edited after import is refused instead of silently transforming code that is
  not running.

Why the whole file is parsed (with the C parser of ``ast``) rather than the dedented
block that ``inspect.getsource`` returns: the block finder cannot extract a lambda in the
middle of a multi-line statement, and dedenting breaks on strings or continuation lines
indented less than the ``def``.  Parsing the file gives every node its absolute position
for free; only the matched subtree is converted to gast.  Both the parsed file and the
result per code object are cached, and a cached hit only costs one ``os.stat``.

Positions in the returned gast node are absolute in the file: 1-based lines and 0-based
columns counted in *characters* (``ast`` counts UTF-8 bytes; characters are what
``astjax.errors.Location`` uses to place its caret), even for nested, indented functions.
"""
from __future__ import annotations

import __future__
import ast
import copy
import functools
import linecache
import os
import threading
import types
import dataclasses
from dataclasses import dataclass

import gast
import inspect
import numpy as np

from astjax.frontend.passes import run as desugar
from astjax.errors import Location, SourceError

__all__ = ["FunctionSource", "get_function_source", "unwrap_callable", "clear_cache"]

_HINT_FILE = "astjax transforms Python functions defined in a file"
_HINT_RELOAD = (
    "the file was edited after the module was imported, so the running code is not what "
    "the file says; reload the module (importlib.reload) or restart Python"
)

# Code flags that do not change what a function does (ignored when comparing code).
_CO_NESTED = 0x10
_CO_ITERABLE_COROUTINE = 0x100  # set after compilation by @types.coroutine
# The ``from __future__`` flags a function was compiled with; its twin gets the same.
_FUTURE_FLAGS = functools.reduce(
    lambda acc, name: acc | getattr(__future__, name).compiler_flag,
    __future__.all_feature_names,
    0,
)


@dataclass
class FunctionSource:
    """The source of one Python function, parsed, plus what resolving its names needs.

    ``node`` is shared with the cache: treat it as read-only and use ``copy_node()``
    before rewriting it.
    """

    node: gast.FunctionDef | gast.AsyncFunctionDef | gast.Lambda  # no decorators
    filename: str  # code.co_filename, as linecache and error messages name it
    name: str  # fn.__name__ ("<lambda>" for lambdas)
    qualname: str
    globals: dict  # fn.__globals__: where global names resolve
    closure: dict  # free variable -> current cell value (unassigned cells left out)
    code: types.CodeType  # fn.__code__, the cache key of every later stage
    defaults: dict  # parameter -> default value (positional and keyword-only)
    source_lines: list  # every line of the file, for error messages
    cells: dict = dataclasses.field(default_factory=dict)  # free variable -> its cell

    def copy_node(self):
        """A private deep copy of ``node`` that a pass may mutate."""
        return copy.deepcopy(self.node)

    def location(self, node=None) -> Location:
        """Where ``node`` (default: the function itself) is, for an error message."""
        node = self.node if node is None else node
        return Location(
            self.filename,
            getattr(node, "lineno", self.code.co_firstlineno),
            getattr(node, "col_offset", 0),
            getattr(node, "end_col_offset", None)
            if getattr(node, "end_lineno", None) == getattr(node, "lineno", None)
            else None,
            self.qualname,
        )


# --------------------------------------------------------------------------- unwrapping


def _describe(obj) -> str:
    """Name what the user passed, in words, for an error message."""
    if isinstance(obj, np.ufunc):
        return f"the NumPy ufunc np.{obj.__name__}"
    if isinstance(obj, type):
        return f"the class {obj.__module__}.{obj.__qualname__}"
    builtin_types = (
        types.BuiltinFunctionType,
        types.MethodDescriptorType,
        types.WrapperDescriptorType,
        types.MethodWrapperType,
        types.ClassMethodDescriptorType,
    )
    if isinstance(obj, builtin_types):
        name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", "?")
        return f"the built-in function {name}"
    if isinstance(obj, types.FunctionType):
        return f"the function {obj.__module__}.{obj.__qualname__}"
    return f"an object of type {type(obj).__module__}.{type(obj).__qualname__} ({obj!r:.60})"


def unwrap_callable(fn):
    """Peel ``fn`` down to ``(plain_function, partial_args, partial_kwargs)``.

    Calling ``plain_function(*partial_args, *args, **{**partial_kwargs, **kwargs})``
    is the same as calling ``fn(*args, **kwargs)``: ``functools.partial`` layers are
    merged in call order, a bound method's instance becomes the first partial argument,
    wrappers made with ``functools.wraps`` are followed through ``__wrapped__`` (the
    wrapper's own code is dropped: that is what decorators such as caches or loggers
    want), and an instance with a Python ``__call__`` becomes its bound ``__call__``.
    Anything without Python code of its own raises ``SourceError``.
    """
    original = fn
    args: tuple = ()
    kwargs: dict = {}
    seen: set[int] = set()
    while True:
        if id(fn) in seen:
            raise SourceError(
                f"cannot unwrap {_describe(original)}: its __wrapped__ chain is a cycle",
                hint=_HINT_FILE + "; pass the innermost function itself",
            )
        seen.add(id(fn))
        if isinstance(fn, functools.partial):
            args = tuple(fn.args) + args
            kwargs = {**fn.keywords, **kwargs}
            fn = fn.func
            continue
        if isinstance(fn, types.MethodType):
            args = (fn.__self__,) + args
            fn = fn.__func__
            continue
        if isinstance(fn, staticmethod):
            fn = fn.__func__
            continue
        if isinstance(fn, classmethod):
            raise SourceError(
                f"cannot transform {_describe(original)}: a classmethod object has no class "
                "bound to it yet",
                hint=_HINT_FILE + "; pass it through its class (MyClass.method)",
            )
        wrapped = getattr(fn, "__wrapped__", None) if not isinstance(fn, type) else None
        if wrapped is not None and callable(wrapped):
            fn = wrapped
            continue
        if isinstance(fn, types.FunctionType):
            break
        _refuse_callable(original, fn)
        # An instance whose class defines __call__ in Python: call through it.
        args = (fn,) + args
        fn = type(fn).__call__
    if (fn.__module__ or "").split(".")[0] == "numpy":
        raise SourceError(
            f"cannot transform {_describe(original)}: it is NumPy's own code, not yours",
            hint=_HINT_FILE + "; NumPy functions are primitives inside them, so wrap the "
            "call in a function of your own, e.g. lambda x: np.sum(x)",
        )
    return fn, args, kwargs


def _refuse_callable(original, fn) -> None:
    """Raise unless ``fn`` is an instance of a class with a Python ``__call__``."""
    if isinstance(fn, np.ufunc) or (type(fn).__module__ or "").split(".")[0] == "numpy":
        raise SourceError(
            f"cannot transform {_describe(fn)}: it is compiled NumPy code with no Python "
            "source",
            hint=_HINT_FILE + "; NumPy functions are primitives inside them, so wrap the "
            "call in a function of your own, e.g. lambda x: np.tanh(x)",
        )
    if isinstance(fn, type):
        raise SourceError(
            f"cannot transform {_describe(fn)}: a class is not a function",
            hint=_HINT_FILE + "; pass a function or a method (obj.method, MyClass.__call__)",
        )
    call = getattr(type(fn), "__call__", None)
    if not isinstance(call, types.FunctionType):
        what = _describe(fn)
        why = "it has no Python source" if callable(fn) else "it is not callable"
        inner = "" if fn is original else f" (found inside {_describe(original)})"
        raise SourceError(
            f"cannot transform {what}{inner}: {why}",
            hint=_HINT_FILE + "; built-in and compiled functions have no source to read, so "
            "wrap the call in a function of your own, e.g. lambda x: len(x)",
        )


# --------------------------------------------------------------------------- caches


@dataclass
class _Entry:
    """What is cached per code object: the checked node and the file state it came from."""

    node: object
    filename: str
    lines: list
    stat_path: str | None
    stamp: tuple | None


@dataclass
class _FileIndex:
    """A parsed file: the ``def`` nodes by first line and the lambdas by line."""

    lines: list
    defs: dict
    lambdas: dict
    imports: tuple  # names bound by import statements in the module scope


_MAX_ENTRIES = 4096
_MAX_FILES = 256
_entries: dict = {}
_files: dict = {}


def clear_cache() -> None:
    """Forget every parsed file and every function found so far."""
    _entries.clear()
    _files.clear()


def _file_stamp(filename: str):
    """``(path, (size, mtime))`` of the file that linecache read ``filename`` from.

    ``None`` stamp when there is no file on disk (source registered in linecache by a
    notebook or a code generator); such source is not re-checked on cache hits.
    """
    entry = linecache.cache.get(filename)
    if entry is None or len(entry) != 4 or entry[1] is None:
        return None, None
    return entry[3], (entry[0], entry[1])


def _stamp_now(path: str):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime)


def _remember(cache: dict, key, value, limit: int) -> None:
    if len(cache) >= limit:
        cache.pop(next(iter(cache)))
    cache[key] = value


# --------------------------------------------------------------------------- lookup


def get_function_source(fn) -> FunctionSource:
    """Find, parse and check the source of ``fn``; see the module docstring.

    ``fn`` may be anything ``unwrap_callable`` accepts; the result describes the plain
    function underneath (partial arguments and bound instances are not part of it).
    """
    if not isinstance(fn, types.FunctionType) or hasattr(fn, "__wrapped__"):
        fn = unwrap_callable(fn)[0]
    code = fn.__code__
    if code.co_filename.startswith("<astjax ") and code.co_name != "<lambda>":
        return plain_function_source(fn)  # generated by astjax: never edited, one def
    key = (code, code.co_filename)
    entry = _entries.get(key)
    if entry is not None and (entry.stamp is None or _stamp_now(entry.stat_path) == entry.stamp):
        return _make(fn, entry)
    entry = _find(fn)
    _remember(_entries, key, entry, _MAX_ENTRIES)
    return _make(fn, entry)


_PLAIN: dict = {}


def plain_function_source(fn) -> FunctionSource:
    """Parse only the lines of a module-level function known not to change (rule
    templates, code astjax generated): no whole-file parse, no edit check."""
    # keyed by the code object's identity: code objects compare equal by contents, and
    # two generated functions with the same text (vmap of two closures of one def)
    # differ in the globals and closure they were made with, which are per function
    hit = _PLAIN.get(id(fn.__code__))
    if hit is not None and hit.code is fn.__code__:
        return dataclasses.replace(hit, globals=fn.__globals__, closure=_cells(fn),
                                   cells=_cell_objects(fn),
                                   defaults=_defaults(fn))
    lines, first = inspect.getsourcelines(fn)
    with _PARSING:
        node = gast.parse("".join(lines)).body[0]
    for n in gast.walk(node):
        if hasattr(n, "lineno"):
            n.lineno += first - 1
            if getattr(n, "end_lineno", None) is not None:
                n.end_lineno += first - 1
    node.decorator_list = []
    code = fn.__code__
    result = FunctionSource(node, code.co_filename, fn.__name__, fn.__qualname__,
                            fn.__globals__, _cells(fn), code, _defaults(fn), list(lines),
                            _cell_objects(fn))
    _PLAIN[id(code)] = result   # the entry holds the code object: its id stays unique
    return result


def _defaults(fn) -> dict:
    code = fn.__code__
    names = code.co_varnames[:code.co_argcount]
    defaults = dict(zip(names[len(names) - len(fn.__defaults__ or ()):],
                        fn.__defaults__ or ()))
    defaults.update(fn.__kwdefaults__ or {})
    return defaults


def _cell_objects(fn) -> dict:
    """Free variable -> its cell: what code folding a closure value must watch
    (astjax/read_guards.py)."""
    return dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))


def _cells(fn) -> dict:
    closure = {}
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            closure[name] = cell.cell_contents
        except ValueError:
            pass
    return closure


def _make(fn, entry: _Entry) -> FunctionSource:
    """Attach the per-function-object parts (closure cells, defaults) to a cached entry."""
    code = fn.__code__
    closure = {}
    if fn.__closure__:
        for name, cell in zip(code.co_freevars, fn.__closure__):
            try:
                closure[name] = cell.cell_contents
            except ValueError:  # a cell not assigned yet
                pass
    defaults = {}
    if fn.__defaults__:
        positional = code.co_varnames[: code.co_argcount]
        names = positional[len(positional) - len(fn.__defaults__):]
        defaults.update(zip(names, fn.__defaults__))
    if fn.__kwdefaults__:
        defaults.update(fn.__kwdefaults__)
    return FunctionSource(
        node=entry.node,
        filename=entry.filename,
        name=fn.__name__,
        qualname=fn.__qualname__,
        globals=fn.__globals__,
        closure=closure,
        code=code,
        defaults=defaults,
        source_lines=entry.lines,
        cells=_cell_objects(fn),
    )


def _find(fn) -> _Entry:
    """Read the file, locate the node of ``fn`` and check it against ``fn.__code__``."""
    code = fn.__code__
    filename = code.co_filename
    qualname = fn.__qualname__
    here = Location(filename, code.co_firstlineno, function=qualname)
    linecache.checkcache(filename)
    lines = linecache.getlines(filename, fn.__globals__)
    if not lines:
        where = (
            "it was typed at the interactive prompt or made by exec/eval"
            if filename.startswith("<")
            else f"the file {filename!r} cannot be read"
        )
        raise SourceError(
            f"cannot find the source of {qualname!r}: {where}",
            here,
            hint=_HINT_FILE + "; put it in a .py module (or a notebook cell) and import it",
        )
    stat_path, stamp = _file_stamp(filename)
    index = _index_file(filename, lines, code, qualname)
    if code.co_name == "<lambda>":
        candidates = index.lambdas.get(code.co_firstlineno, [])
        candidates = [c for c in candidates if _arg_names(c[0]) == _code_arg_names(code)]
        candidates = _narrow_by_positions(candidates, code)
    else:
        candidates = [
            c for c in index.defs.get(code.co_firstlineno, []) if c[0].name == code.co_name
        ]
    if not candidates:
        raise SourceError(
            f"the source of {qualname!r} has changed since it was imported: "
            f"{os.path.basename(filename)} no longer defines it at line {code.co_firstlineno}",
            here,
            hint=_HINT_RELOAD,
        )
    matching = [c for c in candidates if _same_code(c[0], c[1], code, index.imports)]
    if not matching:
        node = candidates[0][0]
        raise SourceError(
            f"the source of {qualname!r} has changed since it was imported: the code in "
            f"{os.path.basename(filename)} no longer matches the running function",
            _node_location(node, lines, filename, qualname),
            hint=_HINT_RELOAD,
        )
    if len(matching) > 1:
        raise SourceError(
            f"cannot tell which of {len(matching)} identical lambdas on line "
            f"{code.co_firstlineno} is {qualname!r}",
            _node_location(matching[0][0], lines, filename, qualname),
            hint="give the lambda a line of its own, or turn it into a def",
        )
    node = desugar(_to_gast(matching[0][0], lines), filename, qualname, copy=False)
    return _Entry(node, filename, lines, stat_path, stamp)


# CPython 3.11's ast.parse is not thread-safe (its AST recursion-depth check is per
# interpreter: "AST constructor recursion depth mismatch"); shards on threads read
# the source of the functions they transform at the same time
_PARSING = threading.Lock()


def _index_file(filename: str, lines: list, code, qualname: str) -> _FileIndex:
    """Parse the whole file once per version of its text (``lines`` identity)."""
    cached = _files.get(filename)
    if cached is not None and cached.lines is lines:
        return cached
    try:
        with _PARSING:
            tree = ast.parse("".join(lines), filename)
    except (SyntaxError, ValueError) as exc:
        raise SourceError(
            f"cannot parse {os.path.basename(filename)} to read {qualname!r} ({exc}); "
            "the file has probably changed since it was imported",
            Location(filename, getattr(exc, "lineno", None) or code.co_firstlineno,
                     max((getattr(exc, "offset", None) or 1) - 1, 0), function=qualname),
            hint=_HINT_RELOAD,
        ) from None
    defs: dict = {}
    lambdas: dict = {}
    # Iterative walk (deep expressions must not hit the recursion limit), carrying the
    # name of the innermost enclosing class: it decides private-name mangling.
    stack = [(tree, None)]
    while stack:
        node, cls = stack.pop()
        if isinstance(node, ast.ClassDef):
            outside = node.decorator_list + node.bases + node.keywords
            stack.extend((child, cls) for child in outside)
            stack.extend((child, node.name) for child in node.body)
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([d.lineno for d in node.decorator_list] + [node.lineno])
            defs.setdefault(first, []).append((node, cls))
        elif isinstance(node, ast.Lambda):
            lambdas.setdefault(node.lineno, []).append((node, cls))
        stack.extend((child, cls) for child in ast.iter_child_nodes(node))
    for found in (*defs.values(), *lambdas.values()):
        found.sort(key=lambda c: (c[0].lineno, c[0].col_offset))
    index = _FileIndex(lines, defs, lambdas, _module_imports(tree))
    _files.pop(filename, None)
    _remember(_files, filename, index, _MAX_FILES)
    return index


def _module_imports(tree) -> tuple:
    """Names an ``import`` binds in the module scope (``if``/``try`` blocks included).

    CPython 3.11 compiles ``mod.f(x)`` differently when ``mod`` was imported at module
    level (``LOAD_ATTR`` rather than ``LOAD_METHOD``), so the recompiled twin needs them.
    """
    names = set()
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            names.update(a.asname or a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names if a.name != "*")
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stack.extend(c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt)
                         or isinstance(c, (ast.excepthandler, ast.match_case)))
    return tuple(sorted(names))


def _arg_names(node) -> tuple:
    a = node.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    names += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
    return tuple(names)


def _code_arg_names(code) -> tuple:
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)  # *args, **kwargs
    return code.co_varnames[:n]


def _narrow_by_positions(candidates: list, code) -> list:
    """Keep the innermost lambda whose body holds every instruction's source range."""
    if len(candidates) < 2:
        return candidates
    spans = [
        (line, col, end_line, end_col)
        for line, end_line, col, end_col in code.co_positions()
        if None not in (line, end_line, col, end_col) and (line, col) < (end_line, end_col)
    ]
    if not spans:  # python -X no_debug_ranges: columns unknown, compare code instead
        return candidates
    inside = []
    for node, cls in candidates:
        b = node.body
        lo, hi = (b.lineno, b.col_offset), (b.end_lineno, b.end_col_offset)
        if all(lo <= (s[0], s[1]) and (s[2], s[3]) <= hi for s in spans):
            inside.append((node, cls))
    if len(inside) > 1:  # nested lambdas: the inner body lies within the outer body
        inside.sort(key=lambda c: (c[0].body.lineno, c[0].body.col_offset))
        inside = inside[-1:]
    return inside


# --------------------------------------------------------------------------- checking


def _same_code(node, cls: str | None, code, imports: tuple) -> bool:
    """Compile ``node`` the way the running function was compiled; compare the code.

    The node sits in a module that imports the same names, inside a dummy function whose
    parameters are the free variables (so they compile to cells, not globals) and, when
    the node was written inside a class, in a class of the same name (private names are
    mangled the same and ``super()`` gets its ``__class__`` cell).  Line tables are not
    compared.
    """
    inner = node if isinstance(node, ast.stmt) else ast.Expr(value=node)
    body = [inner]
    if cls is not None:
        body = [ast.ClassDef(name=cls, bases=[], keywords=[], body=body, decorator_list=[])]
    freevars = [v for v in code.co_freevars if not (cls is not None and v == "__class__")]
    if freevars:
        params = ast.arguments(
            posonlyargs=[], args=[ast.arg(arg=v) for v in freevars], vararg=None,
            kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[],
        )
        if cls is not None and cls not in freevars:
            # The dummy class must not turn the real class name into a local.
            body.insert(0, ast.Global(names=[cls]))
        body = [ast.FunctionDef(name="__astjax_scope__", args=params, body=body,
                                decorator_list=[], returns=None)]
    module = ast.Module(body=body, type_ignores=[])
    wrappers = _wrappers(module, node)
    for wrapper in wrappers:
        ast.copy_location(wrapper, node)
    if imports:  # never executed, only compiled: marks the names as import-bound
        module.body.insert(0, ast.Import(names=[ast.alias(name="sys", asname=n)
                                                for n in imports]))
    ast.fix_missing_locations(module)  # the dummy parameters
    try:
        compiled = compile(module, code.co_filename, "exec",
                           flags=code.co_flags & _FUTURE_FLAGS, dont_inherit=True)
    except SyntaxError:
        return False
    # Walk down through the dummy scopes by name, then look among the code objects
    # made at the node's level (a lambda used as a default sits there too).
    level = compiled
    for wrapper in wrappers:
        if isinstance(wrapper, ast.Expr):
            break
        level = next(c for c in level.co_consts
                     if isinstance(c, types.CodeType) and c.co_name == wrapper.name)
    made = [c for c in level.co_consts if isinstance(c, types.CodeType)]
    # Python >= 3.12 puts a function with type parameters inside one more scope.
    made += [c for g in made if g.co_name.startswith("<generic parameters of")
             for c in g.co_consts if isinstance(c, types.CodeType)]
    key = _code_key(code)
    return any(c.co_name == code.co_name and _code_key(c) == key for c in made)


def _wrappers(module, node) -> list:
    """The dummy nodes around ``node``, outermost first."""
    out = []
    current = module
    while True:
        child = current.body[-1]
        if child is node:
            return out
        out.append(child)
        if isinstance(child, ast.Expr):
            return out
        current = child


def _code_key(co) -> tuple:
    """What the function does, minus line numbers and flags that do not change it."""
    return (
        co.co_name,
        co.co_code,
        co.co_names,
        co.co_varnames,
        co.co_freevars,
        co.co_cellvars,
        co.co_argcount,
        co.co_posonlyargcount,
        co.co_kwonlyargcount,
        co.co_flags & ~(_CO_NESTED | _CO_ITERABLE_COROUTINE),
        tuple(_const_key(c) for c in co.co_consts),
    )


def _const_key(c):
    """Constants compared by type and repr, so ``1``, ``1.0``, ``True``, ``-0.0`` differ."""
    if isinstance(c, types.CodeType):
        return ("code", _code_key(c))
    if isinstance(c, tuple):
        return ("tuple", tuple(_const_key(x) for x in c))
    if isinstance(c, frozenset):
        return ("frozenset", tuple(sorted(repr(_const_key(x)) for x in c)))
    return (type(c).__name__, repr(c))


# --------------------------------------------------------------------------- gast output


def _to_gast(node, lines: list):
    """Convert the matched subtree to gast, drop decorators, count columns in characters."""
    gnode = gast.ast_to_gast(node)
    if isinstance(gnode, (gast.FunctionDef, gast.AsyncFunctionDef)):
        gnode.decorator_list = []
    span = lines[node.lineno - 1: node.end_lineno]
    if not all(line.isascii() for line in span):
        for sub in gast.walk(gnode):
            for line_attr, col_attr in (("lineno", "col_offset"),
                                        ("end_lineno", "end_col_offset")):
                line, col = getattr(sub, line_attr, None), getattr(sub, col_attr, None)
                if line is not None and col is not None:
                    setattr(sub, col_attr, _char_col(lines, line, col))
    return gnode


def _char_col(lines: list, lineno: int, byte_col: int) -> int:
    if not 1 <= lineno <= len(lines):
        return byte_col
    text = lines[lineno - 1]
    if text.isascii():
        return byte_col
    return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))


def _node_location(node, lines: list, filename: str, qualname: str) -> Location:
    """An error location for a stdlib ``ast`` node (byte columns turned into characters)."""
    col = _char_col(lines, node.lineno, node.col_offset)
    end = None
    if node.end_lineno == node.lineno:
        end = _char_col(lines, node.lineno, node.end_col_offset)
    return Location(filename, node.lineno, col, end, qualname)
