"""Write generated code as a standalone Python module that needs only NumPy.

``astjax gen`` (``astjax/cli.py``) calls :func:`standalone_module` with the
``Generated`` record of a transformed function.  The module it returns holds, in
this order:

1. a docstring saying what it is and how it was made, ``import numpy as np``,
   ``__all__``;
2. the user's constants the code reads (numbers, strings, tuples, small arrays), as
   literals: ``WEIGHTS = np.array([...], dtype=np.float32)``;
3. the generated functions, exactly as ``astjax show`` prints them;
4. the entry point named after the transformation (``grad_loss``, or for ``vmap`` a
   small wrapper that moves the batch axes: generated batched code carries the batch
   as the last axis, see ``astjax/runtime_batch.py``);
5. the astjax runtime helpers the code calls (``rt.acc``, ``ra.unbroadcast``...),
   copied from astjax's own source: only the top-level functions that are reached
   from the generated code, with what they use in turn, each runtime module run as a
   module of its own (``rt = _module("rt", '''...''')``) so that names stay apart
   exactly as in astjax.  ``from astjax.X import y`` inside a copied helper becomes
   ``y = _X.y``, the copied ``astjax/X.py`` subset.

Nothing is imported from astjax when the module runs.
"""
from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import linecache as _linecache
import math
import symtable
import sys
import sys as _sys
import textwrap
import tokenize
import types
import types as _types
from dataclasses import dataclass, field
from io import StringIO

import numpy as np

from astjax import batch_axes as _batch_axes
from astjax import runtime_batch as rb
from astjax.errors import AstjaxError

# the module that generated code knows under each name (generation.base_namespace)
CANONICAL = {"rt": "astjax.runtime", "ra": "astjax.runtime_array", "jr": "astjax.random",
             "rb": "astjax.runtime_batch",
             # sharded modules (astjax/sharding/gen.py): collectives and the shard runner
             "sh": "astjax.sharding.collectives", "shx": "astjax.sharding.execute"}
_ALIASES = {v: k for k, v in CANONICAL.items()}

DEFAULT_MAX_CONST_SIZE = 1000
# what copied helpers may import: NumPy, and inside functions only where used, mpi4py
# (the MPI communicator, under mpiexec) and CuPy (GPU arrays, NCCL)
_OPTIONAL = ("numpy", "mpi4py", "cupy")


class StandaloneError(AstjaxError):
    """Generated code that cannot be written as a NumPy-only module (with a hint)."""

    def __init__(self, message: str, hint: str | None = None):
        self.message = message
        self.hint = hint
        super().__init__(message + (f"\nhint: {hint}" if hint else ""))


def module_alias(modname: str) -> str:
    """The name a copied astjax module has in the standalone file (``rt``, ``_tree_util``)."""
    found = _ALIASES.get(modname)
    if found:
        return found
    if modname.startswith("astjax.sharding."):      # astjax.sharding.errors: _sh_errors
        return "_sh_" + modname.rsplit(".", 1)[-1]
    return "_" + modname.rsplit(".", 1)[-1]


def _injected(modname: str) -> str:
    """The name under which copied modules see each other (``_rt``, ``_tree_util``)."""
    return "_" + module_alias(modname).lstrip("_")


# ----------------------------------------------------------------- copying the runtime

@dataclass
class _Stmt:
    node: ast.stmt
    defines: set
    uses: set
    deps: set = field(default_factory=set)           # (astjax module, name)
    rewrites: list = field(default_factory=list)     # (first line, last line, new lines)
    foreign: list = field(default_factory=list)      # modules that cannot be copied


def _loaded_names(node) -> set:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load)}


def _bound_names(node) -> set:
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in n.names)
    return out


def _scope_globals(table) -> set:
    """Names a function or class (and what it nests) reads from module scope."""
    out = {s.get_name() for s in table.get_symbols() if s.is_global() and s.is_referenced()}
    for child in table.get_children():
        out |= _scope_globals(child)
    return out


def _is_stdlib(modname: str) -> bool:
    top = modname.split(".")[0]
    return top in getattr(sys, "stdlib_module_names", ()) or top in sys.builtin_module_names


class _ModuleText:
    """One astjax module's source, split into top-level statements with their names."""

    def __init__(self, modname: str):
        self.modname = modname
        module = importlib.import_module(modname)
        self.source = inspect.getsource(module)
        self.lines = self.source.splitlines()
        tree = ast.parse(self.source)
        self.future = any(isinstance(s, ast.ImportFrom) and s.module == "__future__"
                          for s in tree.body)
        table = symtable.symtable(self.source, getattr(module, "__file__", modname), "exec")
        scopes = {(c.get_name(), c.get_lineno()): c for c in table.get_children()}
        self.stmts: list[_Stmt] = []
        body = tree.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]                                  # the module docstring
        for node in body:
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                continue
            self.stmts.append(self._statement(node, scopes))
        self.by_name: dict[str, list[int]] = {}
        for k, st in enumerate(self.stmts):
            for name in st.defines:
                self.by_name.setdefault(name, []).append(k)

    def _statement(self, node, scopes) -> _Stmt:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            outer = list(node.decorator_list)
            if isinstance(node, ast.ClassDef):
                outer += node.bases + [k.value for k in node.keywords]
            else:
                a = node.args
                outer += list(a.defaults) + [d for d in a.kw_defaults if d is not None]
                if not self.future:
                    outer += [x.annotation for x in a.args + a.kwonlyargs + a.posonlyargs
                              if x.annotation is not None]
            uses = set().union(*(_loaded_names(x) for x in outer)) if outer else set()
            scope = scopes.get((node.name, node.lineno))
            uses |= _scope_globals(scope) if scope is not None else _loaded_names(node)
            st = _Stmt(node, {node.name}, uses)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            st = _Stmt(node, _bound_names(node), set())
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defines = set().union(*(_bound_names(t) for t in targets))
            # ``X.y = v`` reads X (the target's base is loaded), as ``v`` is
            st = _Stmt(node, defines, _loaded_names(node))
        else:
            st = _Stmt(node, _bound_names(node), _loaded_names(node))
        self._imports(st)
        return st

    def _imports(self, st: _Stmt):
        """Record astjax imports in ``st`` (and plan their rewriting), and foreign ones."""
        aliases = {}
        for n in ast.walk(st.node):
            if isinstance(n, ast.Import):
                for a in n.names:
                    if a.name.split(".")[0] == "astjax":
                        st.foreign.append(a.name)
                    elif not (a.name.split(".")[0] in _OPTIONAL or _is_stdlib(a.name)):
                        st.foreign.append(a.name)
            elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
                top = n.module.split(".")[0]
                if top != "astjax":
                    if not (top in _OPTIONAL or _is_stdlib(n.module)):
                        st.foreign.append(n.module)
                    continue
                new = []
                for a in n.names:
                    target = a.asname or a.name
                    if n.module == "astjax":
                        sub = f"astjax.{a.name}"
                        if not isinstance(getattr(importlib.import_module("astjax"), a.name,
                                                  None), types.ModuleType):
                            st.foreign.append(f"astjax.{a.name}")
                            continue
                        aliases[target] = sub
                        new.append(f"{target} = {_injected(sub)}")
                    else:
                        st.deps.add((n.module, a.name))
                        new.append(f"{target} = {_injected(n.module)}.{a.name}")
                self._plan_rewrite(st, n, new)
        if aliases:
            for n in ast.walk(st.node):
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) \
                        and n.value.id in aliases:
                    st.deps.add((aliases[n.value.id], n.attr))

    def _plan_rewrite(self, st, node, new_lines):
        first, last = node.lineno, node.end_lineno
        text = self.lines[first - 1]
        indent = text[:len(text) - len(text.lstrip())]
        rest = self.lines[last - 1][node.end_col_offset:].split("#")[0].strip()
        if node.col_offset != len(indent) or rest:
            raise StandaloneError(
                f"cannot copy {self.modname} line {first}: an astjax import must be a "
                "statement on lines of its own")
        st.rewrites.append((first, last, [indent + line for line in new_lines]))

    def text(self, k: int) -> str:
        """Statement ``k`` as source, astjax imports rewritten, decorators included."""
        st = self.stmts[k]
        node = st.node
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        lines = {i: self.lines[i - 1] for i in range(first, node.end_lineno + 1)}
        for a, b, new in st.rewrites:
            for i in range(a, b + 1):
                lines[i] = None
            lines[a] = "\n".join(new)
        return "\n".join(v for _, v in sorted(lines.items()) if v is not None)


_TEXTS: dict[str, _ModuleText] = {}


def _module_text(modname: str) -> _ModuleText:
    mt = _TEXTS.get(modname)
    if mt is None:
        mt = _TEXTS[modname] = _ModuleText(modname)
    return mt


@dataclass
class CopiedModule:
    modname: str
    alias: str
    source: str
    deps: set          # other copied modules it reads (by module name)
    names: list        # the top-level names it defines


def copy_runtime(requests, extra: dict | None = None) -> list[CopiedModule]:
    """The subsets of astjax modules that define ``requests`` ((module, name) pairs).

    Each subset holds the top-level statements defining a requested name and,
    transitively, what those statements read; module order follows dependencies.
    ``extra`` maps a module to source texts appended to its copy (closure factories).
    """
    extra = extra or {}
    included: dict[str, set[int]] = {m: set() for m in extra}
    deps: dict[str, set] = {}
    queue = list(requests)
    seen = set()

    def visit(modname, k):
        if k in included.setdefault(modname, set()):
            return
        included[modname].add(k)
        st = _module_text(modname).stmts[k]
        if st.foreign:
            raise StandaloneError(
                f"the astjax runtime helper defined at {modname} line {st.node.lineno} "
                f"imports {', '.join(sorted(set(st.foreign)))}, which a standalone module "
                "cannot include",
                "report this as an astjax bug: runtime helpers must need only NumPy")
        queue.extend((modname, u) for u in st.uses)
        for m2, n2 in st.deps:
            deps.setdefault(modname, set()).add(m2)
            queue.append((m2, n2))

    while True:
        while queue:
            modname, name = queue.pop()
            if (modname, name) in seen:
                continue
            seen.add((modname, name))
            mt = _module_text(modname)
            where = mt.by_name.get(name)
            if where is None:
                if (modname, name) in requests and not hasattr(builtins, name):
                    raise StandaloneError(f"{modname} has no top-level name {name!r}",
                                          "report this as an astjax bug")
                continue
            for k in where:
                visit(modname, k)
        # statements that define nothing requested but act on what is included
        # (registrations, ``x.y = ...``): keep them when they read included names
        grew = False
        for modname, ks in list(included.items()):
            mt = _module_text(modname)
            defined = set().union(*(mt.stmts[k].defines for k in ks)) if ks else set()
            for k, st in enumerate(mt.stmts):
                if k not in ks and not st.defines and st.uses & defined:
                    visit(modname, k)
                    grew = True
        if not grew and not queue:
            break
    order = _dependency_order(included, deps)
    out = []
    for modname in order:
        mt = _module_text(modname)
        parts = ["from __future__ import annotations\n"] if mt.future else []
        prev_simple = True
        for k in sorted(included[modname]):
            node = mt.stmts[k].node
            simple = isinstance(node, (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign,
                                       ast.AugAssign, ast.Expr))
            sep = "\n" if simple and prev_simple else "\n\n\n"
            if len(parts) == 1 and mt.future and not simple:   # after the __future__ line
                sep = "\n\n"
            parts.append((sep if parts else "") + mt.text(k))
            prev_simple = simple
        for text in extra.get(modname, ()):
            parts.append(("\n\n\n" if parts else "") + text.rstrip("\n"))
        names = set().union(*(mt.stmts[k].defines for k in included[modname]))
        for text in extra.get(modname, ()):
            names |= {d.name for d in ast.parse(text).body if isinstance(d, ast.FunctionDef)}
        out.append(CopiedModule(modname, module_alias(modname), "".join(parts) + "\n",
                                deps.get(modname, set()) - {modname}, sorted(names)))
    return out


def _dependency_order(included, deps) -> list[str]:
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(m):
        if state.get(m) == 2:
            return
        if state.get(m) == 1:    # a cycle: the later module is linked in afterwards
            return
        state[m] = 1
        for d in sorted(deps.get(m, ())):
            if d in included:
                visit(d)
        state[m] = 2
        order.append(m)

    for m in sorted(included):
        visit(m)
    return order


# ------------------------------------------------------------------ constants as text

class _NotLiteral(Exception):
    def __init__(self, what: str, hint: str | None = None):
        super().__init__(what)
        self.what = what
        self.hint = hint


def _dtype_text(dtype: np.dtype) -> str:
    name = dtype.name
    if hasattr(np, name) and np.dtype(getattr(np, name)) == dtype and dtype.isnative:
        return f"np.{name}"
    return f"np.dtype({dtype.str!r})"


def _scalar_text(v) -> str:
    """A Python number or bool (from ``ndarray.tolist()``) as source."""
    if isinstance(v, bool) or v is None:
        return repr(v)
    if isinstance(v, int):
        return repr(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "np.nan"
        if math.isinf(v):
            return "np.inf" if v > 0 else "-np.inf"
        return repr(v)
    if isinstance(v, complex):
        return f"complex({_scalar_text(v.real)}, {_scalar_text(v.imag)})"
    if isinstance(v, (str, bytes)):
        return repr(v)
    raise _NotLiteral(f"an element of type {type(v).__name__}")


def _array_text(arr: np.ndarray, indent: int) -> str:
    dtype = _dtype_text(arr.dtype)
    if arr.dtype.kind in "OVMm" or arr.dtype.hasobject:
        raise _NotLiteral(f"an array of dtype {arr.dtype}")
    if arr.size == 0:
        return f"np.zeros({arr.shape!r}, dtype={dtype})"
    items = arr.tolist()
    if arr.dtype.kind in "fc" and arr.dtype.itemsize < 8:
        # shortest text that gives back the same float32/float16 values
        flat = [str(x) if np.isfinite(x) else None for x in arr.reshape(-1)]
        it = iter(flat)

        def put(x):
            if isinstance(x, list):
                return [put(v) for v in x]
            s = next(it)
            return _Raw(s if s is not None else _scalar_text(x))
        items = put(items)
    body = _nested_text(items, indent + 9)
    return f"np.array({body}, dtype={dtype})"


class _Raw(str):
    """Already-written element text."""


def _nested_text(items, indent: int, width: int = 92) -> str:
    if not isinstance(items, list):
        return items if isinstance(items, _Raw) else _scalar_text(items)
    if not items or not isinstance(items[0], list):
        words = [_nested_text(v, indent) for v in items]
        one = "[" + ", ".join(words) + "]"
        if indent + len(one) <= width:
            return one
        lines, cur = [], ""
        for w in words:
            piece = (cur + ", " + w) if cur else w
            if cur and indent + 1 + len(piece) > width:
                lines.append(cur + ",")
                cur = w
            else:
                cur = piece
        lines.append(cur)
        return "[" + ("\n" + " " * (indent + 1)).join(lines) + "]"
    rows = [_nested_text(v, indent + 1) for v in items]
    one = "[" + ", ".join(rows) + "]"
    if indent + len(one) <= width and "\n" not in one:
        return one
    return "[" + (",\n" + " " * (indent + 1)).join(rows) + "]"


def _reference_text(value):
    """``(text, import line)`` for a function, type or module NumPy, math, the stdlib or
    builtins provide; None otherwise."""
    if isinstance(value, types.ModuleType):
        name = value.__name__
        if name == "numpy":
            return "np", None
        if name.startswith("numpy."):
            return "np." + name[len("numpy."):], None
        if _is_stdlib(name) and "." not in name:
            return name, f"import {name}"
        return None
    name = getattr(value, "__name__", None)
    if not isinstance(name, str):
        return None
    candidates = []
    mod = getattr(value, "__module__", None)
    qual = getattr(value, "__qualname__", name)
    if isinstance(mod, str):
        if mod.startswith("_"):                 # _operator.mul is operator.mul
            candidates.append((mod.lstrip("_"), qual))
        candidates.append((mod, qual))
    candidates += [("numpy", name), ("builtins", name), ("math", name)]
    for modname, path in candidates:
        top = modname.split(".")[0]
        if not (top == "numpy" or _is_stdlib(modname)) or "<" in path:
            continue
        try:
            obj = importlib.import_module(modname)
            for part in path.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError):
            continue
        if obj is not value:
            continue
        if modname == "builtins":
            return path, None
        if top == "numpy":
            return "np" + modname[len("numpy"):] + "." + path, None
        return f"{modname}.{path}", f"import {modname}"
    return None


def literal_text(value, budget: int, indent: int = 0, _depth: int = 0):
    """``(text, imports)`` writing ``value`` as Python source, or raise _NotLiteral.

    ``budget`` bounds the number of array elements (counted over the whole value).
    """
    imports: set = set()
    left = [budget]

    def go(v, ind, depth):
        if depth > 20:
            raise _NotLiteral("a structure nested too deeply")
        if v is None or isinstance(v, (bool, int, float, complex, str, bytes)):
            if type(v) not in (bool, int, float, complex, str, bytes, type(None)):
                raise _NotLiteral(f"an object of type {type(v).__name__}")
            return _scalar_text(v)
        if isinstance(v, np.generic):
            arr = np.asarray(v)
            if arr.dtype.kind in "OVMm":
                raise _NotLiteral(f"a NumPy scalar of dtype {arr.dtype}")
            if v.dtype.kind in "fc" and v.dtype.itemsize < 8 and np.isfinite(v):
                inner = str(v)
            else:
                inner = _scalar_text(v.item())
            return f"{_dtype_text(v.dtype)}({inner})"
        if isinstance(v, np.ndarray):
            left[0] -= v.size
            if left[0] < 0:
                raise _NotLiteral(
                    f"a {v.dtype} array of shape {v.shape} ({v.size} elements, more than "
                    f"the {budget} --max-const-size allows)",
                    "pass it to the function as an argument, or raise --max-const-size "
                    "if a literal of that size is what you want")
            return _array_text(v, ind)
        if isinstance(v, np.dtype):
            return f"np.dtype({_dtype_text(v)})"
        if type(v) in (tuple, list):
            parts = [go(x, ind + 1, depth + 1) for x in v]
            if type(v) is tuple:
                return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
            return "[" + ", ".join(parts) + "]"
        if type(v) is dict:
            parts = []
            for k, x in v.items():
                parts.append(f"{go(k, ind, depth + 1)}: {go(x, ind + 2, depth + 1)}")
            return "{" + ", ".join(parts) + "}"
        if type(v) in (range, slice):
            return f"{type(v).__name__}({v.start!r}, {v.stop!r}, {v.step!r})"
        if v is Ellipsis:
            return "..."
        ref = _reference_text(v)
        if ref is not None:
            text, imp = ref
            if imp:
                imports.add(imp)
            return text
        kind = type(v).__name__
        if inspect.isfunction(v):
            raise _NotLiteral(
                f"the function {v.__module__}.{v.__qualname__}",
                "a standalone module can call only NumPy, math and the Python standard "
                "library; pass the function as an argument, or let astjax inline it")
        raise _NotLiteral(f"an object of type {type(v).__module__}.{kind}",
                          "standalone modules hold numbers, strings, tuples, lists, dicts "
                          "and small NumPy arrays; pass the value as an argument instead")

    return go(value, indent, _depth), imports


def _same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and bool(
            np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if isinstance(a, np.generic):
        return a.dtype == b.dtype and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    try:
        return a is b or bool(a == b)
    except Exception:
        return False


# ----------------------------------------------------------------- vmap entry helpers
# ``_vmap_enter`` is copied into standalone modules as it is; it reads ``rb`` and
# ``_batch_axes``, which the standalone module defines as copies of astjax's (leaving
# the batched code, ``_batch_axes.leave``, is astjax's own function, copied).

def _vmap_enter(args, in_axes, axis_size=None, batched=None):
    """Move each batched argument's batch axis (``in_axes``) last, as the batched code
    expects it; returns those arguments and the batch size.  ``batched``: which
    arguments the code was generated to take batched (others must come unbatched)."""
    if isinstance(in_axes, (tuple, list)):
        if len(in_axes) != len(args):
            raise TypeError(f"vmap: in_axes has {len(in_axes)} entries but got {len(args)} "
                            "arguments")
        per_arg = list(in_axes)
    else:
        per_arg = [in_axes] * len(args)
    sizes, moved = {}, []
    for k, (arg, axes) in enumerate(zip(args, per_arg)):
        leaves, treedef = _batch_axes.tree_flatten(arg)
        leaf_axes = _batch_axes.axes_per_leaf(axes, arg, "in_axes")
        if all(a is None for a in leaf_axes):
            moved.append((arg, None, None))
            continue
        new = []
        for leaf, a in zip(leaves, leaf_axes):
            if a is not None:
                leaf = np.asarray(leaf)
                if leaf.ndim == 0 or not -leaf.ndim <= a < leaf.ndim:
                    raise ValueError(f"vmap: in_axes {a} is out of range for argument {k} "
                                     f"of shape {leaf.shape}")
                if sizes.setdefault(f"argument {k}", leaf.shape[a]) != leaf.shape[a]:
                    raise ValueError(f"vmap got inconsistent batch sizes: the leaves of "
                                     f"argument {k} have {sizes[f'argument {k}']} and "
                                     f"{leaf.shape[a]}")
                leaf = np.moveaxis(leaf, a, -1)
            new.append(leaf)
        moved.append((new, treedef, leaf_axes))
    if axis_size is not None:
        sizes["axis_size"] = axis_size
    size = rb.batch_size(sizes)
    out = []
    for k, (arg, treedef, leaf_axes) in enumerate(moved):
        if batched is not None and treedef is not None and not batched[k]:
            raise TypeError(f"vmap: argument {k} is batched, but this module was generated "
                            "for it unbatched: generate it again with that in_axes")
        if treedef is None:
            if batched is not None and batched[k]:
                arg = rb.broadcast_batch(arg, size)   # the code holds it per lane
            out.append(arg)
        else:
            out.append(_batch_axes.tree_unflatten(treedef, [
                leaf if a is not None else rb.broadcast_batch(leaf, size)
                for leaf, a in zip(arg, leaf_axes)]))
    return out, size


def _vmap_bind(fname, params, npositional, defaults, args, kwargs, in_axes):
    """Bind a call like Python does (``defaults``: parameter -> default value); returns
    one value and one in_axes entry per parameter: positional arguments take
    ``in_axes``, keyword arguments are batched on axis 0 (as in JAX), parameters left
    to their defaults are not batched."""
    if len(args) > npositional:
        raise TypeError(f"{fname}() takes {npositional} positional arguments but "
                        f"{len(args)} were given")
    if isinstance(in_axes, (tuple, list)):
        if len(in_axes) != len(args):
            raise TypeError(f"vmap: in_axes has {len(in_axes)} entries but {fname}() got "
                            f"{len(args)} positional arguments")
        axes = list(in_axes)
    else:
        axes = [in_axes] * len(args)
    values = list(args)
    for name in params[len(args):]:
        if name in kwargs:
            values.append(kwargs[name])
            axes.append(0)
        elif name in defaults:
            values.append(defaults[name])
            axes.append(None)
        else:
            raise TypeError(f"{fname}() missing required argument: {name!r}")
    for name in kwargs:
        if name not in params:
            raise TypeError(f"{fname}() got an unexpected keyword argument {name!r}")
        if params.index(name) < len(args):
            raise TypeError(f"{fname}() got multiple values for argument {name!r}")
    return values, axes


_VMAP_HELPERS = (_vmap_bind, _vmap_enter)
_VMAP_NEEDS = {("astjax.batch_axes", "leave"), ("astjax.batch_axes", "axes_per_leaf"),
               ("astjax.batch_axes", "tree_flatten"), ("astjax.batch_axes", "tree_unflatten"),
               ("astjax.runtime_batch", "batch_size"),
               ("astjax.runtime_batch", "broadcast_batch")}


def _module(name, source, **imports):
    """Run ``source`` as a module of its own (with ``imports`` bound in it)."""
    module = _types.ModuleType(name)
    module.__dict__.update(imports)
    _sys.modules[name] = module      # dataclasses look their module up there
    filename = f"<{name}>"
    _linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), module.__dict__)
    return module


# what the copied helpers above use, under names user constants will not take
_RESERVED = {"_module", "_named", "_types", "_sys", "_linecache"} | {
    f.__name__ for f in _VMAP_HELPERS}

# ------------------------------------------------------------------------- assembling


@dataclass
class Entry:
    """How the standalone module's entry point calls the generated code.

    ``kind`` is "direct" (the generated function is the entry point) or "vmap" (a
    wrapper moves batch axes in and out: ``in_axes``, ``out_axes``, ``axis_size``).
    """

    name: str
    kind: str = "direct"
    in_axes: object = 0
    out_axes: object = 0
    axis_size: object = None
    description: str = ""


def _free_names(tree: ast.Module) -> tuple[set, dict]:
    """Names the generated functions read from the module, and ``alias.attr`` reads."""
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    names = _loaded_names(tree) - defined
    attrs: dict[str, set] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) \
                and n.value.id in CANONICAL:
            attrs.setdefault(n.value.id, set()).add(n.attr)
    return names, attrs


def _quote(source: str) -> str:
    """``source`` as a string literal that keeps its lines readable."""
    for q in ("'''", '"""'):
        if q not in source and not source.endswith("\\") and not source.endswith(q[0]):
            return "r" + q + "\n" + source + q
    return repr(source)


def _origin(name, env) -> str:
    """Where a value the generated code reads comes from, in words ("" if unknown)."""
    entry = getattr(env, "entries", {}).get(name)
    if entry is None:
        return ""
    kind = entry[0]
    if kind == "global":
        gd, key = entry[1], entry[2]
        where = (gd.get("__file__") or gd.get("__name__", "")).replace("\\", "/")
        where = where.rsplit("/", 1)[-1]
        return f"{key} in {where}" if key != name else f"from {where}"
    if kind == "cell":
        return "a value the function captured (closure)"
    return "a value the function reads"


def rename(source: str, old: str, new: str) -> str:
    """``source`` with every name token ``old`` replaced by ``new`` (layout kept)."""
    out = []
    for tok in tokenize.generate_tokens(StringIO(source).readline):
        if tok.type == tokenize.NAME and tok.string == old:
            tok = tok._replace(string=new)
        out.append(tok)
    return tokenize.untokenize(out)


class _Closures:
    """Helpers astjax makes at run time (closures, e.g. the jit buffer-reuse helpers),
    rebuilt in the standalone module: the inner function's source becomes a factory in
    the copy of its module, called with its captured values written as literals."""

    def __init__(self, max_const_size):
        self.texts: dict[str, list] = {}      # module -> factory sources
        self.made: dict = {}                  # code object -> factory name
        self.max_const_size = max_const_size
        self.requests: set = set()
        self.imports: set = set()

    def add(self, name, value, modname, depth=0):
        """Source text that rebuilds ``value`` (a function of astjax module ``modname``)."""
        refuse = StandaloneError(
            f"the generated code calls {name}, an astjax helper that a standalone module "
            "cannot include", "report this as an astjax bug, with the command you ran")
        vname = getattr(value, "__name__", "")
        if getattr(importlib.import_module(modname), vname, None) is value:
            self.requests.add((modname, vname))
            return f"{module_alias(modname)}.{vname}"
        code = getattr(value, "__code__", None)
        if code is None or not inspect.isfunction(value) or depth > 8:
            raise refuse
        try:
            src = textwrap.dedent(inspect.getsource(value))
            node = ast.parse(src).body[0]
        except (OSError, TypeError, SyntaxError, IndexError):
            raise refuse from None
        if not isinstance(node, ast.FunctionDef) or node.name != code.co_name:
            raise refuse
        mt = _module_text(modname)
        factory = self.made.get(code)
        if factory is None:
            taken = set(self.made.values()) | set(mt.by_name)
            factory, n = f"_make_{code.co_name}", 1
            while factory in taken:
                n += 1
                factory = f"_make_{code.co_name}_{n}"
            text = (f"def {factory}({', '.join(code.co_freevars)}):\n"
                    f'    """Rebuilds {code.co_name}, which astjax makes at run time (a '
                    f'closure)."""\n'
                    + textwrap.indent(src.rstrip("\n"), "    ")
                    + f"\n    return {code.co_name}\n")
            self.texts.setdefault(modname, []).append(text)
            self.made[code] = factory
            self.requests |= {(modname, n) for n in code.co_names if n in mt.by_name}
        args = []
        cells = [c.cell_contents for c in (value.__closure__ or ())]
        for var, cell in zip(code.co_freevars, cells):
            cell_mod = getattr(cell, "__module__", None)
            if inspect.isfunction(cell) and isinstance(cell_mod, str) and \
                    cell_mod.split(".")[0] == "astjax":
                args.append(self.add(name, cell, cell_mod, depth + 1))
                continue
            try:
                text, imps = literal_text(cell, self.max_const_size)
            except _NotLiteral as err:
                raise StandaloneError(
                    f"the generated code calls {name}, an astjax helper holding {var}, "
                    f"which is {err.what}", err.hint) from None
            args.append(text)
            self.imports |= imps
        call = f"{module_alias(modname)}.{factory}({', '.join(args)})"
        if vname != code.co_name:
            call = f"_named({call}, {vname!r})"
        return call


def _named(fn, name):
    """``fn`` under the name astjax gave it."""
    fn.__name__ = fn.__qualname__ = name
    return fn


def _constants(names, gen, max_const_size):
    """Source lines for the values the generated code reads, and what they need."""
    ns = gen.namespace
    consts, late, imports, requests = [], [], set(), set()
    closures = _Closures(max_const_size)
    for name in sorted(names):
        if name in CANONICAL or name not in ns:
            continue   # runtime modules, builtins
        value = ns[name]
        modname = getattr(value, "__module__", None)
        if isinstance(value, types.ModuleType):
            if value.__name__ in _ALIASES:
                continue
            if value.__name__.split(".")[0] == "astjax":
                raise StandaloneError(
                    f"the generated code reads the astjax module {value.__name__} as {name}",
                    "a standalone module cannot use astjax itself")
        elif callable(value) and isinstance(modname, str) and \
                modname.split(".")[0] == "astjax":
            late.append(f"{name} = {closures.add(name, value, modname)}")
            continue
        if name == getattr(value, "__name__", None) and getattr(builtins, name, None) is value:
            continue
        origin = _origin(name, gen.env)
        try:
            text, imps = literal_text(value, max_const_size, indent=len(name) + 3)
        except _NotLiteral as err:
            raise StandaloneError(
                f"cannot write {name!r}{f' ({origin})' if origin else ''} into a "
                f"standalone module: it is {err.what}",
                err.hint or "standalone modules hold numbers, strings, tuples and small "
                            "NumPy arrays; pass other values as arguments") from None
        check = {"np": np}
        try:
            for imp in imps:
                exec(imp, check)
            same = _same(eval(text, check), value)
        except Exception:
            same = False
        if not same:
            raise StandaloneError(
                f"cannot write {name!r} into a standalone module: its value does not "
                "survive being written as a literal",
                "pass it to the function as an argument instead")
        imports |= imps
        if text == name:            # np, math: the import is the definition
            continue
        line = f"{name} = {text}"
        if origin and ("\n" in line or len(line) + len(origin) + 4 > 99):
            consts.append(f"# {origin}\n{line}")
        else:
            consts.append(line + (f"  # {origin}" if origin else ""))
    return consts, late, imports | closures.imports, requests | closures.requests, closures


def _vmap_wrapper(entry: Entry, main: str, fdef: ast.FunctionDef, out_batched: bool,
                  signature=None, max_const_size=DEFAULT_MAX_CONST_SIZE,
                  batched=None) -> str:
    params = [a.arg for a in fdef.args.args][:-1]       # the last one is the batch size
    plist = ", ".join(params)
    packed = f"({plist}{',' if len(params) == 1 else ''})"
    doc = entry.description or "The batched function."
    axes = (f"    Batch axes as in JAX: in_axes={entry.in_axes!r}, out_axes={entry.out_axes!r}"
            f"{f', axis_size={entry.axis_size!r}' if entry.axis_size is not None else ''}.\n")
    tail = (f"    out = {main}(*args, size)\n"
            f"    return _batch_axes.leave(out, {entry.out_axes!r}, size, {out_batched!r})\n")
    defaults = {} if signature is None else {
        name: signature.signature.parameters[name].default for name in signature.names
        if signature.signature.parameters[name].default is not inspect.Parameter.empty}
    if signature is None or (not defaults and signature.positional == len(params)):
        return (f"def {entry.name}({plist}):\n"
                f'    """{doc}\n\n' + axes + '    """\n'
                f"    args, size = _vmap_enter({packed}, {entry.in_axes!r}, "
                f"{entry.axis_size!r})\n" + tail)
    # defaults or keyword-only parameters: bind like Python, keyword arguments batched
    # on axis 0 and defaults unbatched, as JAX does
    texts = []
    for name, value in defaults.items():
        try:
            text, _ = literal_text(value, max_const_size)
        except _NotLiteral:
            text = "None"       # a function the generated code was specialized to
        texts.append(f"{name!r}: {text}")
    shown = ", ".join(
        params[:signature.positional] + (["*"] if signature.positional < len(params) else [])
        + params[signature.positional:])
    return (f"def {entry.name}(*args, **kwargs):\n"
            f'    """{doc}\n\n' + axes +
            f"    Called as {signature.fname}({shown}) is: positional arguments batched as\n"
            f"    in_axes says, keyword arguments on axis 0, defaults not batched.\n"
            f'    """\n'
            f"    values, axes = _vmap_bind({signature.fname!r}, {params!r}, "
            f"{signature.positional}, {{{', '.join(texts)}}}, args, kwargs, "
            f"{entry.in_axes!r})\n"
            f"    args, size = _vmap_enter(values, axes, {entry.axis_size!r}, {batched!r})\n"
            + tail)


def standalone_module(gen, entry: Entry, *, title: str, command: str | None = None,
                      module_name: str | None = None,
                      max_const_size: int = DEFAULT_MAX_CONST_SIZE,
                      version: str | None = None, late=(), requests=()) -> str:
    """The text of a module that runs ``gen``'s code with NumPy alone (see module doc).

    ``late``: lines run at the end (after the copied runtime), ``requests``: the
    runtime helpers they call, as (module, name) (sharded modules' plans)."""
    extra_late, extra_requests = list(late), set(requests)
    source = gen.source
    tree = ast.parse(source)
    defined = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    main = gen.functions["main"].__name__
    if main not in defined:
        raise StandaloneError(f"the generated entry function {main!r} is not in the source")
    names, attrs = _free_names(tree)
    consts, late, imports, requests, closures = _constants(names, gen, max_const_size)
    requests |= {(CANONICAL[a], attr) for a, ats in attrs.items() for attr in ats}
    requests |= extra_requests
    taken = (set(names) | set(defined)) - {main}
    own = _RESERVED | {"_tree_util", "_errors", "_batch_axes"}
    clash = sorted(set(names) & set(gen.namespace) & own)
    if clash:
        raise StandaloneError(f"the generated code reads {', '.join(clash)}, a name the "
                              "standalone module needs for itself",
                              "rename that variable in your module")
    if entry.name in taken or entry.name in CANONICAL or entry.name == "np":
        raise StandaloneError(f"the entry point name {entry.name!r} is already used by the "
                              "generated code", "choose another with --name")
    if entry.kind == "vmap":
        requests |= _VMAP_NEEDS
        if entry.name == main:      # vmap(f): the wrapper takes the generated name
            main = f"{main}_batch_last"
            while main in taken:
                main += "_"
            source = rename(source, entry.name, main)
            tree = ast.parse(source)
    copied = copy_runtime(requests, closures.texts) if requests or closures.texts else []
    imports.add("import numpy as np")
    if copied:
        imports |= {"import linecache as _linecache", "import sys as _sys",
                    "import types as _types"}

    out = []
    made_by = "Generated by astjax" + (f" {version}" if version else "")
    doc = [*textwrap.wrap(title, 88), "", made_by + (" with" if command else ".")]
    if command:
        doc += ["", "    " + command]
    doc += ["", "It needs only NumPy: the astjax runtime helpers the code calls are copied "
            "at the", "end of this file. Entry point:", "",
            f"    from {module_name or 'this_module'} import {entry.name}"]
    out.append('"""' + "\n".join(doc).replace('"""', "'''").replace("\\", "/") + '\n"""')
    numpy_first = sorted(imports, key=lambda i: (i == "import numpy as np", i))
    out.append("\n".join(i for i in numpy_first if i != "import numpy as np")
               + "\n\nimport numpy as np" if len(imports) > 1 else "import numpy as np")
    out.append(f"__all__ = [{entry.name!r}]")
    if consts:
        out.append("# values the generated code reads, from the user's module\n"
                   + "\n".join(consts))
    body = source.rstrip("\n")
    if entry.kind == "direct":
        if entry.name != main:
            body += f"\n\n\n{entry.name} = {main}"
    else:
        fdef = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == main)
        body += "\n\n\n" + _vmap_wrapper(entry, main, fdef,
                                          bool(getattr(gen, "out_batched", True)),
                                          getattr(gen, "signature", None), max_const_size,
                                          getattr(gen, "batched_mask", None))
        body += "\n\n" + "\n\n\n".join(inspect.getsource(f).rstrip()
                                        for f in _VMAP_HELPERS)
    out.append("# " + "-" * 86 + "\n# the generated code\n\n\n" + body)
    if copied:
        described = ", ".join(f"astjax/{c.modname.split('.', 1)[1]}.py as {c.alias}"
                              for c in copied)
        lines = ["# " + "-" * 86,
                 *("# " + w for w in textwrap.wrap(
                     "astjax runtime helpers the code above calls, copied from astjax's "
                     "source (only what it uses): " + described + ". Each runs as a module "
                     "of its own, as in astjax.", 86)),
                 "", "", inspect.getsource(_module).rstrip(), ""]
        made, links = set(), []
        for c in copied:
            injected = []
            for d in sorted(c.deps):
                if d in made:
                    injected.append(f"{_injected(d)}={module_alias(d)}")
                else:
                    links.append(f"{c.alias}.{_injected(d)} = {module_alias(d)}")
            kw = (", " + ", ".join(injected)) if injected else ""
            lines += ["", f"{c.alias} = _module(__name__ + {('.' + c.alias.lstrip('_'))!r}, "
                          f"{_quote(c.source)}{kw})"]
            made.add(c.modname)
        if links:
            lines += [""] + links
        out.append("\n".join(lines))
    if late:
        named = any("_named(" in line for line in late)
        out.append("# runtime helpers the generated code reads under names of their own\n"
                   + (inspect.getsource(_named) + "\n\n" if named else "")
                   + "\n".join(late))
    if extra_late:
        out.append("# the shard_map calls the code makes: per-shard code, layout and the plans\n"
                   "# of their derivatives, run by the copied shard runner\n"
                   + "\n".join(extra_late))
    text = "\n\n\n".join(out) + "\n"
    compile(text, module_name or "<standalone>", "exec")      # it must at least compile
    return text


__all__ = ["standalone_module", "Entry", "StandaloneError", "copy_runtime", "literal_text",
           "DEFAULT_MAX_CONST_SIZE"]
