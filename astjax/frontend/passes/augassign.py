"""Augmented assignment: ``y op= v`` as a plain assignment the Normalizer knows.

A subscript keeps Python's (and NumPy's) meaning exactly: ``a[i] += v`` reads
``a[i]``, adds, and stores the sum back into ``a`` in place; an index that is not a
name or a constant is computed once, into a variable of its own.

>>> from astjax.frontend.passes import show, augassign
>>> print(show(augassign, '''
... def f(a, i, v):
...     a[2 * i] += v
...     return a'''))
def f(a, i, v):
    a_index = 2 * i
    a[a_index] = a[a_index] + v
    return a

A name is rebound: ``y = y + v``.  For a NumPy array ``y += v`` updates ``y``'s
memory in place, which differs from a rebinding exactly when another name shares
that memory (``z = y``, ``z = y[0]``, ``z = y.T``, ``[y]``, ``for row in y``, or ``y``
itself a view of another name).  Where the function makes such an alias before the
update, the statement is refused (by the Normalizer, at the user's line) with the two
spellings that say which meaning is wanted: ``y = y + v`` (a new value) or
``y[...] += v`` (in place, which every transformation honours).  An alias this
function cannot see (its parameter and the caller's name, ``z = ident(y)``) is
checked at run time, where the aliasing analysis after inlining says a name read
afterwards may hold the array (``core_fixups.prune_rebinding_checks``).

>>> print(show(augassign, '''
... def f(x):
...     y = x * 2.0
...     y -= 1.0
...     return y'''))
def f(x):
    y = x * 2.0
    y = y - 1.0
    return y
>>> print(show(augassign, '''
... def f(x):
...     z = x
...     x += 1.0
...     return z''')[:60])
refused: 'x += ...' updates x in place when x is a NumPy arr
"""
from __future__ import annotations

import gast

from astjax.frontend.passes import located, rewrite_statements

NAME = "augassign"
TRIGGERS = (gast.AugAssign,)    # node types without which the pass has nothing to do

_SYMBOLS = {"Add": "+", "Sub": "-", "Mult": "*", "Div": "/", "FloorDiv": "//", "Mod": "%",
            "Pow": "**", "MatMult": "@", "BitAnd": "&", "BitOr": "|", "BitXor": "^",
            "LShift": "<<", "RShift": ">>"}

# attributes and methods of an array that return a view of it (or the array itself)
_VIEW_ATTRS = {"T", "mT", "real", "imag", "flat", "base"}
_VIEW_METHODS = {"reshape", "ravel", "transpose", "swapaxes", "squeeze", "view", "diagonal",
                 "view", "__array__"}
# NumPy functions that may return their argument or a view of it
_VIEW_FUNCTIONS = {"asarray", "asanyarray", "ascontiguousarray", "asfortranarray", "reshape",
                   "ravel", "transpose", "swapaxes", "moveaxis", "rollaxis", "squeeze",
                   "expand_dims", "atleast_1d", "atleast_2d", "atleast_3d", "broadcast_to",
                   "diagonal", "real", "imag", "flip", "fliplr", "flipud", "rot90",
                   "broadcast_arrays", "split", "array_split", "hsplit", "vsplit"}
# calls that make a new container holding the same items
_SHALLOW_COPIES = {"list", "tuple", "dict", "set", "sorted", "reversed"}
# methods of a container that return one of its items (or views of them)
_ITEM_METHODS = {"get", "values", "items", "pop", "setdefault"}
# methods that store their argument in the container they are called on
_STORING_METHODS = {"append", "insert", "extend", "setdefault", "update", "add"}


def run(fn, ctx) -> bool:
    aliases = {}    # function -> its alias facts, made before any of its statements change

    def lowered(st, function):
        if id(function) not in aliases:
            aliases[id(function)] = _Aliases(function)
        if isinstance(st, gast.AugAssign):
            return _lower(st, ctx, aliases[id(function)])
        return None
    return rewrite_statements(ctx, lowered)


def _simple(e) -> bool:
    """An index part that is cheap and pure to read twice."""
    if isinstance(e, (gast.Name, gast.Constant)):
        return True
    if isinstance(e, gast.UnaryOp) and isinstance(e.operand, gast.Constant):
        return True
    if isinstance(e, gast.Attribute):
        return _simple(e.value)
    if isinstance(e, gast.Tuple):
        return all(_simple(x) for x in e.elts)
    if isinstance(e, gast.Slice):
        return all(p is None or _simple(p) for p in (e.lower, e.upper, e.step))
    return False


def _base_name(t) -> str:
    while isinstance(t, (gast.Subscript, gast.Attribute)):
        t = t.value
    return t.id if isinstance(t, gast.Name) else "value"


def _lower(st, ctx, aliases):
    t = st.target
    if isinstance(t, gast.Name):
        other = aliases.hazard(t.id, st)
        if other is not None:
            name, line = other
            sym = _SYMBOLS.get(type(st.op).__name__, "op")
            ctx.refuse(st, f"'{t.id} {sym}= ...' updates {t.id} in place when {t.id} is a "
                           f"NumPy array, and {name} shares its memory (line {line}): astjax "
                           "cannot tell which you mean",
                       f"write '{t.id} = {t.id} {sym} ...' for a new value, or "
                       f"'{t.id}[...] {sym}= ...' to update the array in place")
            return [st]
        load = gast.Name(t.id, gast.Load(), None, None)
        new = gast.Assign([gast.Name(t.id, gast.Store(), None, None)],
                          gast.BinOp(load, st.op, st.value), None)
        # names this function cannot see may share the array too (a helper's parameter
        # and its caller's name, ``z = ident(y)``): the Normalizer checks at run time
        # (``rt.refuse_rebinding_update``, kept where such a name is read afterwards)
        new.rebinding_update = (t.id, _SYMBOLS.get(type(st.op).__name__, "op"))
        return [located(new, st)]
    if isinstance(t, gast.Subscript):
        pre = []
        index = t.slice
        base = _base_name(t)

        def hoisted(e):
            if e is None or _simple(e):
                return e
            var = ctx.fresh(f"{base}_index")
            pre.append(located(gast.Assign([gast.Name(var, gast.Store(), None, None)], e,
                                           None), st))
            return gast.Name(var, gast.Load(), None, None)

        if isinstance(index, gast.Slice):
            index = gast.Slice(hoisted(index.lower), hoisted(index.upper), hoisted(index.step))
        elif isinstance(index, gast.Tuple):
            index = gast.Tuple([gast.Slice(hoisted(e.lower), hoisted(e.upper), hoisted(e.step))
                                if isinstance(e, gast.Slice) else hoisted(e)
                                for e in index.elts], gast.Load())
        else:
            index = hoisted(index)
        value = t.value
        if not _simple(value):        # a[f(i)][j] += v: read the container once
            value = hoisted(value)
        read = gast.Subscript(value, index, gast.Load())
        write = gast.Subscript(_copy(value), _copy(index), gast.Store())
        new = gast.Assign([write], gast.BinOp(read, st.op, st.value), None)
        others = aliases.item_hazards(_root(t.value), st) if isinstance(t.value, gast.Name) \
            else []
        if others:
            # a list or dict item that is an array is updated in place by NumPy (the
            # array other names may hold): the Normalizer checks at run time whether
            # one of them holds the item (``rt.refuse_item_update``)
            new.item_update_hazard = (_source(t), _SYMBOLS.get(type(st.op).__name__, "op"),
                                      tuple(others))
        return pre + [located(new, st)]
    # ``obj.attr += v``: the Normalizer refuses the assignment to an attribute
    new = gast.Assign([_store(t)], gast.BinOp(_load(t), st.op, st.value), None)
    return [located(new, st)]


def _source(e) -> str:
    import ast
    try:
        return ast.unparse(gast.gast_to_ast(_copy(e)))
    except Exception:  # noqa: BLE001  (a node gast cannot convert back: a generic name)
        return f"{_root(e) or 'value'}[...]"


def _copy(e):
    import copy
    return copy.deepcopy(e)


def _load(t):
    t = _copy(t)
    t.ctx = gast.Load()
    return t


def _store(t):
    t = _copy(t)
    t.ctx = gast.Store()
    return t


# ------------------------------------------------------------------------ aliases

class _Aliases:
    """Where a function makes two names share memory, by statement order.

    Syntactic and conservative: ``z = y``, ``z = y[i]``, ``z = y.T``, ``z =
    np.reshape(y, ...)``, ``[y, ...]``, ``lst.append(y)``, ``for row in y`` make ``y``
    shared; ``y = z`` (and the forms above with ``y`` on the left) make ``y`` a view.
    Parameters are not counted: transformed functions never change the caller's
    arrays (``astjax/transforms/aliasing.py``, the mutation policy)."""

    def __init__(self, fn):
        self.order: dict = {}     # id(statement) -> position in source order
        self.loops: dict = {}     # id(statement) -> ids of the loops around it
        self.events: list = []    # (position, loops, name updated, other name, line)
        self.reads: list = []     # (position, loops, names the statement reads)
        self._walk(fn.body, ())

    def _walk(self, stmts, loops):
        for st in stmts:
            self.order[id(st)] = len(self.order)
            self.loops[id(st)] = loops
            if isinstance(st, gast.FunctionDef):
                continue
            self._record(st, loops)
            nodes = _shallow(st) if isinstance(st, (gast.For, gast.While, gast.If)) \
                else gast.walk(st)
            self.reads.append((self.order[id(st)], loops, {
                n.id for n in nodes if isinstance(n, gast.Name) and
                isinstance(n.ctx, gast.Load)}))
            inner = loops + (id(st),) if isinstance(st, (gast.For, gast.While)) else loops
            for attr in ("body", "orelse", "finalbody"):
                block = getattr(st, attr, None)
                if isinstance(block, list) and block and isinstance(block[0], gast.stmt):
                    self._walk(block, inner)

    def _add(self, st, loops, shared, other):
        self.events.append((self.order[id(st)], loops, shared, other, st.lineno))

    def _record(self, st, loops):
        targets = []
        value = None
        if isinstance(st, gast.Assign):
            targets, value = st.targets, st.value
        elif isinstance(st, gast.AnnAssign) and st.value is not None:
            targets, value = [st.target], st.value
        elif isinstance(st, gast.For):
            targets, value = [st.target], st.iter
        # the names bound (an item target ``y[i] = s`` binds into ``y`` only: its index
        # names are read, not given ``s``)
        names = {n.id for t in targets for n in _bound_nodes(t)}
        if value is not None:
            direct = _aliased_names(value) if not isinstance(st, gast.For) else \
                _aliased_names(value) | _element_names(value)
            unpacked = any(not isinstance(t, gast.Name) for t in targets)
            if unpacked:
                direct |= _element_names(value)
            for src in direct:
                for dst in names - {src}:
                    self._add(st, loops, src, dst)     # src's memory now also in dst
                    self._add(st, loops, dst, src)     # dst is a view of src
        # containers and stores: z = [y], z = {k: y}, lst.append(y)
        if value is not None and not isinstance(st, gast.For):
            for src in _held_names(value):
                for dst in names - {src}:
                    self._add(st, loops, src, dst)
        for node in _shallow(st) if isinstance(st, (gast.For, gast.While, gast.If)) \
                else gast.walk(st):
            if isinstance(node, gast.Call) and isinstance(node.func, gast.Attribute) and \
                    node.func.attr in _STORING_METHODS:
                holder = _root(node.func.value) or "a container"
                for e in node.args:
                    for src in _aliased_names(e) | _held_names(e):
                        if src != holder:
                            self._add(st, loops, src, holder)

    def item_hazards(self, name, st) -> list:
        """[(other name, line)] of the names that may hold an item of the container
        ``name`` (``w = d["w"]``, ``lst = [y]``, ``old = list(ws)``), made before ``st``
        (or in a loop around it) and read after it."""
        pos = self.order.get(id(st))
        loops = set(self.loops.get(id(st), ()))
        out = []
        for at, around, shared, other, line in self.events:
            if name not in (shared, other) or shared == other:
                continue
            alias = other if shared == name else shared
            if (at < pos or loops & set(around)) and self.read_after(alias, st) and \
                    alias not in [o for o, _ in out]:
                out.append((alias, line))
        return out

    def read_after(self, name, st) -> bool:
        """Whether ``name`` may be read after ``st`` runs (later in the source, or
        anywhere in a loop around both)."""
        pos = self.order.get(id(st))
        loops = set(self.loops.get(id(st), ()))
        return any(name in names and (at > pos or loops & set(around))
                   for at, around, names in self.reads)

    def hazard(self, name, st):
        """(other name, line) of an alias of ``name`` made before ``st``, or None."""
        pos = self.order.get(id(st))
        loops = set(self.loops.get(id(st), ()))
        for at, around, shared, other, line in self.events:
            if shared != name or other == name:
                continue
            if at < pos or loops & set(around):
                return other, line
        return None


def _bound_nodes(t):
    """The Name nodes an assignment target binds or stores into."""
    if isinstance(t, gast.Name):
        return [t]
    if isinstance(t, (gast.Tuple, gast.List)):
        return [n for e in t.elts for n in _bound_nodes(e)]
    if isinstance(t, gast.Starred):
        return _bound_nodes(t.value)
    if isinstance(t, (gast.Subscript, gast.Attribute)):
        root = t
        while isinstance(root, (gast.Subscript, gast.Attribute)):
            root = root.value
        return [root] if isinstance(root, gast.Name) else []
    return []


def _shallow(st):
    """The expressions a compound statement evaluates itself (not its body)."""
    parts = [getattr(st, "test", None), getattr(st, "iter", None)]
    return [n for p in parts if p is not None for n in gast.walk(p)]


def _root(e):
    while isinstance(e, (gast.Subscript, gast.Attribute)):
        e = e.value
    return e.id if isinstance(e, gast.Name) else None


def _aliased_names(e) -> set:
    """Names whose memory the value of ``e`` may be (or be a view of)."""
    if isinstance(e, gast.Name):
        return {e.id}
    if isinstance(e, gast.Subscript):
        return _aliased_names(e.value)
    if isinstance(e, gast.Attribute) and e.attr in _VIEW_ATTRS:
        return _aliased_names(e.value)
    if isinstance(e, gast.NamedExpr):
        return _aliased_names(e.value)
    if isinstance(e, gast.IfExp):
        return _aliased_names(e.body) | _aliased_names(e.orelse)
    if isinstance(e, gast.BoolOp):
        return set().union(*(_aliased_names(v) for v in e.values))
    if isinstance(e, gast.Call):
        f = e.func
        if isinstance(f, gast.Attribute) and f.attr in _VIEW_METHODS | _ITEM_METHODS:
            return _aliased_names(f.value)
        if isinstance(f, gast.Attribute) and f.attr in _VIEW_FUNCTIONS and e.args and \
                isinstance(f.value, gast.Name) and f.value.id in ("np", "numpy"):
            return _aliased_names(e.args[0])
    return set()


def _held_names(e) -> set:
    """Names whose items (or themselves) a new container ``e`` holds: displays
    (``[y, (z, w)]``, ``{"k": y}``), shallow copies (``list(ws)``, ``dict(d)``,
    ``d.copy()``) and comprehensions of the items (``[w for w in ws]``)."""
    if isinstance(e, (gast.List, gast.Tuple, gast.Set)):
        items = e.elts
    elif isinstance(e, gast.Dict):
        items = [v for v in e.values if v is not None]
    elif isinstance(e, gast.Call) and isinstance(e.func, gast.Name) and \
            e.func.id in _SHALLOW_COPIES:
        out = set()
        for a in e.args[:1]:
            out |= _aliased_names(a) | _element_names(a)
        for kw in e.keywords:          # dict(a=y)
            out |= _aliased_names(kw.value) | _held_names(kw.value)
        return out
    elif isinstance(e, gast.Call) and isinstance(e.func, gast.Attribute) and \
            e.func.attr == "copy" and not e.args:
        return _aliased_names(e.func.value)
    elif isinstance(e, (gast.ListComp, gast.SetComp, gast.GeneratorExp, gast.DictComp)):
        bound = {n.id for g in e.generators for n in gast.walk(g.target)
                 if isinstance(n, gast.Name)}
        elts = [e.key, e.value] if isinstance(e, gast.DictComp) else [e.elt]
        if not any(_aliased_names(x) & bound for x in elts):
            return set()
        return set().union(*(_aliased_names(g.iter) | _element_names(g.iter)
                             for g in e.generators))
    else:
        return set()
    out = set()
    for x in items:
        out |= _aliased_names(x) | _held_names(x)
    return out


def _element_names(e) -> set:
    """Names whose items a value made from ``e`` may hold (unpacking, iteration)."""
    if isinstance(e, (gast.Tuple, gast.List)):
        return set().union(*(_aliased_names(x) for x in e.elts)) if e.elts else set()
    if isinstance(e, gast.Call) and isinstance(e.func, gast.Name) and e.func.id in (
            "zip", "enumerate", "reversed", "list", "tuple", "sorted"):
        return set().union(*(_aliased_names(a) | _element_names(a) for a in e.args)) \
            if e.args else set()
    return _aliased_names(e)
