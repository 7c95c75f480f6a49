"""What generated code assumed about values it read from outside the function.

Code is generated once and reused, but while it is generated the normalizer reads the
function's closure cells, its globals and attributes of modules and classes, and it
folds some of what it reads into the code: a closure's ``k = 2.0`` becomes the literal
``2.0``, a global ``act = np.tanh`` is inlined, a closure array is captured, the items
of a ``**KW`` dict become keyword arguments.  ``jax.grad`` and ``jax.vmap`` trace on
every call, so a user who rebinds such a value expects the next call to see it; code
that kept the old one would return a wrong number without an error.

So every cached piece of generated code carries a ``Guard``: the reads it was built
from and what it assumed of each.  A call whose guard no longer holds regenerates.

* A value folded or captured (closure cells, module and class attributes, functions,
  the items of a container expanded at generation) is assumed to be the same object
  (Python numbers and strings: an equal one).
* A global left to run time (the code re-reads it on every call, ``Env.live``) is
  assumed only to keep its kind: an array its shape and dtype, a number its type, a
  container its length and keys.  Rebinding a global array or learning rate between
  calls costs nothing.

Reads of astjax's own modules and of libraries (NumPy, the standard library) are not
guarded: their names do not change under a running program.
"""
from __future__ import annotations

import sys
import threading
import types
from contextlib import contextmanager

import numpy as np

_MISSING = object()
_SCALARS = (bool, int, float, complex, str, bytes, type(None), np.generic)
_LIBRARIES = frozenset({"numpy", "astjax", "scipy", "cupy", "jax", "jaxlib", "gast",
                        "beniget"}) | frozenset(getattr(sys, "stdlib_module_names", ()))
_MAX_ITEMS = 256
_MAX_DEPTH = 4

# how an assumption is checked
SAME = 0       # the same object (numbers and strings: an equal one)
FACTS = 1      # the same kind: type, and shape/dtype or length/keys/items
ITEMS = 2      # a container whose items were folded: the same items


class _Same:
    """Compares by identity inside a description (functions, captured arrays)."""
    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other):
        return type(other) is _Same and other.obj is self.obj

    def __hash__(self):
        return id(self.obj)


def _static_kind(value) -> bool:
    """A value generation resolves: functions (inlined), modules, classes."""
    return callable(value) or isinstance(value, types.ModuleType)


_PLAIN_SCALARS = frozenset({bool, int, float, complex, str, bytes, type(None)})
_CONTAINERS = frozenset({list, tuple, dict})


def describe(value, captured: bool, depth: int = 0):
    """What code may have assumed of ``value``: with ``captured``, arrays and objects
    by identity (the code holds them); else their type, shape and dtype."""
    kind = type(value)
    if kind is np.ndarray and not captured:
        return (kind, value.shape, value.dtype)
    if kind in _PLAIN_SCALARS or isinstance(value, np.generic):
        return (kind, value) if captured else (kind,)
    if kind in _CONTAINERS:
        if depth >= _MAX_DEPTH or len(value) > _MAX_ITEMS:
            return (kind, len(value), _Same(value) if captured else None)
        depth += 1
        if kind is dict:
            return (kind, tuple([(k, describe(v, captured, depth))
                                 for k, v in value.items()]))
        return (kind, tuple([describe(v, captured, depth) for v in value]))
    if captured or _static_kind(value):
        return (_Same(value),)
    shape = getattr(value, "shape", None)
    if shape is not None:
        return (kind, shape, getattr(value, "dtype", None))
    return (kind,)


def _scalar_equal(a, b) -> bool:
    return a is b or (type(a) is type(b) and a == b)


class Guard:
    """The reads one piece of generated code was built from; ``holds()`` is True while
    each still gives what the code assumed.

    ``holds`` runs on every call of the code, so it is compiled: one line of Python
    per read, the expected values bound as names.
    """
    __slots__ = ("checks", "_holds")

    def __init__(self, checks):
        # (source, mode, expected): ``source`` is ("cell", cell), ("global", dict,
        # name) or ("attr", owner, name)
        self.checks = tuple(checks)
        self._holds = None

    def holds(self) -> bool:
        if self._holds is None:
            self._holds = _compile(self.checks)
        return self._holds()


def _compile(checks):
    """A function of no arguments: True while every check passes."""
    names = {"_MISSING": _MISSING, "_equal": _scalar_equal, "_describe": describe}
    lines = ["def holds():"]
    for i, (source, mode, expected) in enumerate(checks):
        names[f"s{i}"] = source[1]
        value = f"v{i}"
        if source[0] == "cell":
            lines += ["    try:", f"        {value} = s{i}.cell_contents",
                      "    except ValueError:", "        return False"]
        else:
            names[f"k{i}"] = source[2]
            lines.append(f"    {value} = s{i}.get(k{i}, _MISSING)" if source[0] == "global"
                         else f"    {value} = getattr(s{i}, k{i}, _MISSING)")
        if mode == SAME:
            names[f"e{i}"] = expected
            test = f"{value} is not e{i}"
            if isinstance(expected, _SCALARS):
                test += f" and not _equal({value}, e{i})"
            lines += [f"    if {test}:", "        return False"]
        else:
            _emit_described(value, expected, mode == ITEMS, names, lines)
    lines.append("    return True")
    exec(compile("\n".join(lines) + "\n", "<astjax read guard>", "exec"), names)
    return names["holds"]


def _emit_described(value, expected, captured, names, lines):
    """Lines returning False unless ``describe(<value>, captured) == expected``: the
    same test as the comparison, written out so that it allocates nothing."""
    n = len(names)
    kind = expected[0]

    def bind(obj):
        name = f"c{len(names)}"
        names[name] = obj
        return name

    def fail_if(test):
        lines.extend([f"    if {test}:", "        return False"])

    if len(expected) == 1:
        if type(kind) is _Same:
            fail_if(f"{value} is not {bind(kind.obj)}")
        else:
            fail_if(f"type({value}) is not {bind(kind)}")
    elif kind in _CONTAINERS and len(expected) == 2:
        items = expected[1]
        fail_if(f"type({value}) is not {bind(kind)} or len({value}) != {len(items)}")
        for j, item in enumerate(items):
            inner = f"w{n}_{j}"
            if kind is dict:
                lines.append(f"    {inner} = {value}.get({bind(item[0])}, _MISSING)")
                item = item[1]
            else:
                lines.append(f"    {inner} = {value}[{j}]")
            _emit_described(inner, item, captured, names, lines)
    elif kind in _CONTAINERS:
        test = f"type({value}) is not {bind(kind)} or len({value}) != {expected[1]}"
        if expected[2] is not None:
            test += f" or {value} is not {bind(expected[2].obj)}"
        fail_if(test)
    elif len(expected) == 2:        # a number or string folded into the code
        e = bind(expected[1])
        fail_if(f"type({value}) is not {bind(kind)} or "
                f"({value} is not {e} and not _equal({value}, {e}))")
    elif kind is np.ndarray:
        fail_if(f"type({value}) is not {bind(kind)} or {value}.shape != "
                f"{bind(expected[1])} or {value}.dtype != {bind(expected[2])}")
    else:
        fail_if(f"_describe({value}, {captured}) != {bind(expected)}")


class Reads:
    """The reads of one generation, by what was read (deduplicated)."""

    def __init__(self):
        self.items: dict = {}        # key -> [source, value, captured]
        self.guards: list = []       # guards of cached code this generation reused

    def note(self, key, source, value, captured):
        item = self.items.get(key)
        if item is None:
            self.items[key] = [source, value, captured]
        elif captured:
            item[2] = True

    def capture(self, value):
        """``value`` (read already) had its items folded into the code."""
        for item in self.items.values():
            if item[1] is value:
                item[2] = True

    def guard(self) -> Guard | None:
        checks = []
        for source, value, captured in self.items.values():
            if type(value) in (list, tuple, dict):
                checks.append((source, ITEMS if captured else FACTS,
                               describe(value, captured)))
            elif captured or _static_kind(value):
                checks.append((source, SAME, value))
            else:
                checks.append((source, FACTS, describe(value, False)))
        for g in self.guards:
            checks.extend(g.checks)
        return Guard(checks) if checks else None


# --------------------------------------------------------------------- collection

_STATE = threading.local()


def _stack() -> list:
    stack = getattr(_STATE, "stack", None)
    if stack is None:
        stack = _STATE.stack = []
    return stack


@contextmanager
def collecting():
    """Collect the reads of the generation run inside; yields the ``Reads``."""
    reads = Reads()
    stack = _stack()
    stack.append(reads)
    try:
        yield reads
    finally:
        stack.pop()


def reused(guard: Guard | None):
    """Cached code reused by the generation running now: its assumptions are ours."""
    stack = _stack()
    if guard is not None and stack:
        stack[-1].guards.append(guard)


def _active():
    stack = getattr(_STATE, "stack", None)
    return stack[-1] if stack else None


def _library_globals(gdict) -> bool:
    name = gdict.get("__name__")
    return isinstance(name, str) and name.partition(".")[0] in _LIBRARIES


def note_cell(cell, value):
    """A closure cell read (its value is folded or captured)."""
    reads = _active()
    if reads is not None and cell is not None:
        reads.note(("cell", id(cell)), ("cell", cell), value, True)


def note_global(gdict, name, value):
    """A module global read (left to run time unless ``capture``d later)."""
    reads = _active()
    if reads is None or _library_globals(gdict):
        return
    reads.note(("global", id(gdict), name), ("global", gdict, name), value,
               _static_kind(value) and type(value) not in (list, tuple, dict))


def note_attribute(owner, name, value):
    """``owner.name`` read from a user's module or class (folded into the code)."""
    reads = _active()
    if reads is None:
        return
    module = owner.__name__ if isinstance(owner, types.ModuleType) else getattr(
        owner, "__module__", None)
    if isinstance(module, str) and module.partition(".")[0] in _LIBRARIES:
        return
    reads.note(("attr", id(owner), name), ("attr", owner, name), value,
               True)


def capture(value):
    """The items of ``value`` (a container read now) were folded into the code."""
    reads = _active()
    if reads is not None:
        reads.capture(value)
