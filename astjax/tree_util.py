"""Pytrees: nested containers of arrays, flattened to a list of leaves and a structure.

Transforms take and return pytrees (``grad`` of a function of a dict of parameters
returns a dict of gradients), so they need to take a container apart into its array
leaves and put one back together with new leaves. This module does that with JAX's
semantics and names (``jax.tree_util``), so code written for JAX reads the same here.

Nodes, that is containers whose elements are themselves pytrees:

* ``tuple``, ``list``, ``None`` (a node with no children, *not* a leaf), namedtuples
  (``collections.namedtuple`` and ``typing.NamedTuple``);
* ``dict`` and ``collections.defaultdict``, whose children are ordered by sorted key
  (so ``{'b': 1, 'a': 2}`` and ``{'a': 2, 'b': 1}`` have the same structure);
* ``collections.OrderedDict``, in insertion order (the order is part of its meaning);
* any type registered with :func:`register_pytree_node`,
  :func:`register_pytree_node_class`, :func:`register_dataclass` or
  :func:`register_static`.

Everything else (arrays, scalars, strings, unregistered objects) is a leaf.

Registrations live in :data:`default_registry`, an ordinary object rather than hidden
module state, so tests can undo them::

    with default_registry.scoped():
        register_pytree_node(MyType, flatten, unflatten)
        ...                     # MyType is a node here
    # and a leaf again here
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
from typing import Any, Callable, Iterable, Iterator

__all__ = [
    "PyTreeDef",
    "PyTreeRegistry",
    "default_registry",
    "tree_flatten",
    "tree_unflatten",
    "tree_leaves",
    "tree_structure",
    "tree_map",
    "tree_all",
    "tree_reduce",
    "tree_transpose",
    "all_leaves",
    "treedef_is_leaf",
    "treedef_children",
    "treedef_tuple",
    "register_pytree_node",
    "register_pytree_node_class",
    "register_dataclass",
    "register_static",
]


# --------------------------------------------------------------------------------------
# Node kinds


@dataclasses.dataclass(frozen=True)
class _NodeSpec:
    """How one kind of node is taken apart, rebuilt, printed and navigated.

    ``flatten(x) -> (children, node_data)``; ``unflatten(node_type, node_data,
    children) -> x``. ``node_data`` is what, besides the children, tells two nodes of
    the same type apart (dict keys, user aux data); it takes part in ``==`` and hash.
    ``show`` prints a node for ``PyTreeDef.__repr__`` and ``keys`` names its children
    in error messages (``['a']``, ``[0]``, ``.field``).
    """

    name: str
    flatten: Callable[[Any], tuple[Iterable[Any], Any]]
    unflatten: Callable[[type, Any, tuple], Any]
    show: Callable[[type, Any, list[str]], str]
    keys: Callable[[type, Any, int], list[str]]


def _seq_keys(node_type: type, data: Any, n: int) -> list[str]:
    return [f"[{i}]" for i in range(n)]


def _show_tuple(node_type: type, data: Any, children: list[str]) -> str:
    if len(children) == 1:
        return f"({children[0]},)"
    return "(" + ", ".join(children) + ")"


def _sorted_keys(d: dict) -> tuple:
    """Dict keys in sorted order, as JAX orders dict children.

    Keys that cannot be compared with each other (``{1: .., 'a': ..}``) fall back to an
    order by type name then repr: still deterministic, so equal dicts get equal
    structures.
    """
    try:
        return tuple(sorted(d))
    except TypeError:
        return tuple(sorted(d, key=lambda k: (type(k).__qualname__, repr(k))))


def _show_mapping_items(keys: Iterable, children: list[str]) -> str:
    return "{" + ", ".join(f"{k!r}: {c}" for k, c in zip(keys, children)) + "}"


def _factory_name(factory: Any) -> str:
    return getattr(factory, "__qualname__", None) or repr(factory)


_LEAF_SPEC = _NodeSpec(
    name="leaf",
    flatten=lambda x: ((), None),
    unflatten=lambda t, d, c: None,  # never called: leaves are substituted directly
    show=lambda t, d, c: "*",
    keys=lambda t, d, n: [],
)

_NONE_SPEC = _NodeSpec(
    name="None",
    flatten=lambda x: ((), None),
    unflatten=lambda t, d, c: None,
    show=lambda t, d, c: "None",
    keys=lambda t, d, n: [],
)

_TUPLE_SPEC = _NodeSpec(
    name="tuple",
    flatten=lambda x: (x, None),
    unflatten=lambda t, d, c: tuple(c),
    show=_show_tuple,
    keys=_seq_keys,
)

_LIST_SPEC = _NodeSpec(
    name="list",
    flatten=lambda x: (x, None),
    unflatten=lambda t, d, c: list(c),
    show=lambda t, d, c: "[" + ", ".join(c) + "]",
    keys=_seq_keys,
)


def _flatten_dict(x: dict) -> tuple[list, tuple]:
    keys = _sorted_keys(x)
    return [x[k] for k in keys], keys


_DICT_SPEC = _NodeSpec(
    name="dict",
    flatten=_flatten_dict,
    unflatten=lambda t, keys, c: dict(zip(keys, c)),
    show=lambda t, keys, c: _show_mapping_items(keys, c),
    keys=lambda t, keys, n: [f"[{k!r}]" for k in keys],
)

_ORDERED_DICT_SPEC = _NodeSpec(
    name="OrderedDict",
    flatten=lambda x: (list(x.values()), tuple(x)),
    unflatten=lambda t, keys, c: collections.OrderedDict(zip(keys, c)),
    show=lambda t, keys, c: f"OrderedDict({_show_mapping_items(keys, c)})",
    keys=lambda t, keys, n: [f"[{k!r}]" for k in keys],
)


def _flatten_defaultdict(x: collections.defaultdict) -> tuple[list, tuple]:
    keys = _sorted_keys(x)
    return [x[k] for k in keys], (x.default_factory, keys)


_DEFAULTDICT_SPEC = _NodeSpec(
    name="defaultdict",
    flatten=_flatten_defaultdict,
    unflatten=lambda t, d, c: collections.defaultdict(d[0], zip(d[1], c)),
    show=lambda t, d, c: (
        f"defaultdict({_factory_name(d[0])}, {_show_mapping_items(d[1], c)})"
    ),
    keys=lambda t, d, n: [f"[{k!r}]" for k in d[1]],
)

# A namedtuple's node_data is its class: Point(1, 2) and Pair(1, 2) differ in structure.
_NAMEDTUPLE_SPEC = _NodeSpec(
    name="namedtuple",
    flatten=lambda x: (x, type(x)),
    unflatten=lambda t, d, c: t(*c),
    show=lambda t, d, c: (
        f"{t.__name__}(" + ", ".join(f"{f}={v}" for f, v in zip(t._fields, c)) + ")"
    ),
    keys=lambda t, d, n: [f".{f}" for f in t._fields],
)

_BUILTIN_SPECS: dict[type, _NodeSpec] = {
    type(None): _NONE_SPEC,
    tuple: _TUPLE_SPEC,
    list: _LIST_SPEC,
    dict: _DICT_SPEC,
    collections.OrderedDict: _ORDERED_DICT_SPEC,
    collections.defaultdict: _DEFAULTDICT_SPEC,
}


def _is_namedtuple_type(t: type) -> bool:
    return issubclass(t, tuple) and hasattr(t, "_fields")


def _custom_spec(nodetype: type, flatten_func: Callable, unflatten_func: Callable) -> _NodeSpec:
    """Spec for a user node: printed like JAX, ``CustomNode(Name[aux], [children])``."""
    name = nodetype.__name__

    def show(t: type, aux: Any, children: list[str]) -> str:
        return f"CustomNode({name}[{aux!r}], [{', '.join(children)}])"

    return _NodeSpec(
        name=name,
        flatten=flatten_func,
        unflatten=lambda t, aux, c: unflatten_func(aux, c),
        show=show,
        keys=lambda t, aux, n: [f"<child {i}>" for i in range(n)],
    )


# --------------------------------------------------------------------------------------
# PyTreeDef


class _StructureMismatch(ValueError):
    """A value does not have the structure a treedef expects, at ``path``."""

    def __init__(self, path: str, detail: str):
        self.path = path
        self.detail = detail
        super().__init__(f"at {path or '<root>'}: {detail}")


def _short_repr(x: Any, limit: int = 80) -> str:
    r = repr(x)
    return r if len(r) <= limit else r[: limit - 3] + "..."


def _describe_node(spec: _NodeSpec, node_type: type, data: Any, n: int) -> str:
    if spec is _NONE_SPEC:
        return "None"
    if spec is _DICT_SPEC or spec is _ORDERED_DICT_SPEC:
        return f"{spec.name} with keys {list(data)}"
    if spec is _DEFAULTDICT_SPEC:
        return f"defaultdict with keys {list(data[1])}"
    return f"{node_type.__name__} with {n} children"


class PyTreeDef:
    """The structure of a pytree: its nodes and where the leaves go, without the leaves.

    Immutable, comparable with ``==`` and hashable (when all node data is), so it can
    be part of a cache key: two trees with equal structure get the same generated code.
    """

    __slots__ = ("_spec", "_type", "_data", "_children", "_num_leaves", "_num_nodes", "_hash")

    def __init__(self) -> None:
        raise TypeError("PyTreeDef is made by tree_flatten / tree_structure, not directly")

    @classmethod
    def _make(cls, spec: _NodeSpec, node_type: type | None, data: Any,
              children: tuple[PyTreeDef, ...]) -> PyTreeDef:
        self = object.__new__(cls)
        self._spec = spec
        self._type = node_type
        self._data = data
        self._children = children
        if spec is _LEAF_SPEC:
            self._num_leaves = 1
        else:
            self._num_leaves = sum(c._num_leaves for c in children)
        self._num_nodes = 1 + sum(c._num_nodes for c in children)
        self._hash = None
        return self

    # -- inspection ------------------------------------------------------------------

    @property
    def num_leaves(self) -> int:
        """How many leaves a tree of this structure holds."""
        return self._num_leaves

    @property
    def num_nodes(self) -> int:
        """How many nodes, counting leaves and ``None`` nodes, the tree has."""
        return self._num_nodes

    def children(self) -> list[PyTreeDef]:
        """The structures of this node's direct children (empty for a leaf)."""
        return list(self._children)

    def node_data(self) -> tuple[type, Any] | None:
        """``(node_type, node_data)`` of the root node, ``None`` for a leaf (as JAX)."""
        if self._spec is _LEAF_SPEC:
            return None
        return self._type, self._data

    # -- building and taking apart -----------------------------------------------------

    def unflatten(self, leaves: Iterable[Any]) -> Any:
        """Rebuild a tree of this structure from ``leaves``, in ``tree_leaves`` order."""
        leaves = list(leaves)
        if len(leaves) != self._num_leaves:
            few = "few" if len(leaves) < self._num_leaves else "many"
            raise ValueError(
                f"Too {few} leaves for {self!r}: expected {self._num_leaves}, "
                f"got {len(leaves)}"
            )
        return self._build(iter(leaves))

    def _build(self, leaves: Iterator[Any]) -> Any:
        if self._spec is _LEAF_SPEC:
            return next(leaves)
        children = tuple(c._build(leaves) for c in self._children)
        return self._spec.unflatten(self._type, self._data, children)

    def flatten_up_to(self, tree: Any) -> list[Any]:
        """The subtrees of ``tree`` that sit where this structure has leaves.

        This is how ``tree_map`` reads its extra arguments: their structure must have
        this one as a prefix. Raises ``ValueError`` naming the first place they differ.
        """
        out: list[Any] = []
        self._flatten_up_to(tree, "", out)
        return out

    def _flatten_up_to(self, tree: Any, path: str, out: list[Any]) -> None:
        spec = self._spec
        if spec is _LEAF_SPEC:
            out.append(tree)
            return
        n = len(self._children)
        expected = _describe_node(spec, self._type, self._data, n)
        if type(tree) is not self._type:
            raise _StructureMismatch(
                path, f"expected {expected}, got {type(tree).__name__}: {_short_repr(tree)}"
            )
        children, data = spec.flatten(tree)
        children = list(children)
        if not _data_equal(data, self._data):
            got = _describe_node(spec, type(tree), data, len(children))
            if got == expected:
                detail = f"node data differs: expected {self._data!r}, got {data!r}"
            else:
                detail = f"expected {expected}, got {got}"
            raise _StructureMismatch(path, detail)
        if len(children) != n:
            raise _StructureMismatch(
                path,
                f"expected {expected}, got {len(children)} children: {_short_repr(tree)}",
            )
        keys = spec.keys(self._type, self._data, n)
        for key, child_def, child in zip(keys, self._children, children):
            child_def._flatten_up_to(child, path + key, out)

    def compose(self, inner: PyTreeDef) -> PyTreeDef:
        """The structure of this tree with every leaf replaced by a tree of ``inner``."""
        if self._spec is _LEAF_SPEC:
            return inner
        children = tuple(c.compose(inner) for c in self._children)
        return PyTreeDef._make(self._spec, self._type, self._data, children)

    # -- value semantics ---------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PyTreeDef):
            return NotImplemented
        if self is other:
            return True
        return (
            self._type is other._type
            and self._num_nodes == other._num_nodes
            and self._num_leaves == other._num_leaves
            and _data_equal(self._data, other._data)
            and self._children == other._children
        )

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash((self._type, self._data, self._children))
        return self._hash

    def _show(self) -> str:
        return self._spec.show(self._type, self._data, [c._show() for c in self._children])

    def __repr__(self) -> str:
        return f"PyTreeDef({self._show()})"

    def __copy__(self) -> PyTreeDef:
        return self  # immutable

    def __deepcopy__(self, memo: dict) -> PyTreeDef:
        return self


def _data_equal(a: Any, b: Any) -> bool:
    """``==`` on node data that always gives a bool, even for arrays in aux data."""
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:  # e.g. "truth value of an array is ambiguous"
        return False


_LEAF_DEF = PyTreeDef._make(_LEAF_SPEC, None, None, ())


# --------------------------------------------------------------------------------------
# Registry


def _check_type(nodetype: Any) -> None:
    if not isinstance(nodetype, type):
        raise TypeError(f"pytree node types must be classes, got {nodetype!r}")


class PyTreeRegistry:
    """Which types are pytree nodes, and how to take them apart and rebuild them.

    Built-in nodes are always present; user registrations can be listed, removed and
    restored (``scoped``, ``snapshot``/``restore``, ``clear``) so that no test leaves
    registrations behind for the next one.
    """

    def __init__(self) -> None:
        self._custom: dict[type, _NodeSpec] = {}

    # -- registering -------------------------------------------------------------------

    def register(self, nodetype: type, flatten_func: Callable, unflatten_func: Callable) -> None:
        """Make ``nodetype`` a node: see :func:`register_pytree_node`."""
        _check_type(nodetype)
        self._add(nodetype, _custom_spec(nodetype, flatten_func, unflatten_func))

    def _add(self, nodetype: type, spec: _NodeSpec) -> None:
        _check_type(nodetype)
        if nodetype in _BUILTIN_SPECS:
            raise ValueError(
                f"{nodetype.__qualname__} is a built-in pytree node and cannot be registered"
            )
        if nodetype in self._custom:
            raise ValueError(
                f"Duplicate pytree node registration for {nodetype.__module__}."
                f"{nodetype.__qualname__}"
            )
        self._custom[nodetype] = spec

    def unregister(self, nodetype: type) -> None:
        """Make ``nodetype`` a leaf again. Only user registrations can be removed."""
        try:
            del self._custom[nodetype]
        except KeyError:
            raise ValueError(f"{nodetype!r} is not a registered custom pytree node") from None

    def registered_types(self) -> list[type]:
        """The user-registered node types, in registration order."""
        return list(self._custom)

    def is_registered(self, nodetype: type) -> bool:
        """Whether values of exactly this type are nodes (built-in or registered)."""
        return self._lookup(nodetype) is not None

    # -- resetting ---------------------------------------------------------------------

    def snapshot(self) -> dict[type, Any]:
        """An opaque copy of the user registrations, for :meth:`restore`."""
        return dict(self._custom)

    def restore(self, snapshot: dict[type, Any]) -> None:
        """Put back the user registrations saved by :meth:`snapshot`."""
        self._custom = dict(snapshot)

    def clear(self) -> None:
        """Drop every user registration; built-in nodes stay."""
        self._custom = {}

    def copy(self) -> PyTreeRegistry:
        """An independent registry with the same registrations."""
        new = PyTreeRegistry()
        new._custom = dict(self._custom)
        return new

    @contextlib.contextmanager
    def scoped(self) -> Iterator[PyTreeRegistry]:
        """Undo, on exit, every registration made inside the ``with`` block."""
        saved = self.snapshot()
        try:
            yield self
        finally:
            self.restore(saved)

    # -- using -------------------------------------------------------------------------

    def _lookup(self, t: type) -> _NodeSpec | None:
        # Exact types, like JAX: a subclass of dict is a leaf unless registered itself.
        spec = _BUILTIN_SPECS.get(t)
        if spec is None:
            spec = self._custom.get(t)
        if spec is None and _is_namedtuple_type(t):
            spec = _NAMEDTUPLE_SPEC
        return spec

    def flatten(self, tree: Any,
                is_leaf: Callable[[Any], bool] | None = None) -> tuple[list[Any], PyTreeDef]:
        """``tree_flatten`` against this registry."""
        leaves: list[Any] = []
        treedef = self._flatten(tree, is_leaf, leaves)
        return leaves, treedef

    def _flatten(self, x: Any, is_leaf: Callable[[Any], bool] | None,
                 leaves: list[Any]) -> PyTreeDef:
        if is_leaf is not None and is_leaf(x):
            leaves.append(x)
            return _LEAF_DEF
        node_type = type(x)
        spec = self._lookup(node_type)
        if spec is None:
            leaves.append(x)
            return _LEAF_DEF
        children, data = spec.flatten(x)
        child_defs = tuple(self._flatten(c, is_leaf, leaves) for c in children)
        return PyTreeDef._make(spec, node_type, data, child_defs)


default_registry = PyTreeRegistry()
"""The registry every function in this module uses."""

_registry = default_registry  # short alias for tests


# --------------------------------------------------------------------------------------
# Tree functions


def tree_flatten(tree: Any,
                 is_leaf: Callable[[Any], bool] | None = None) -> tuple[list[Any], PyTreeDef]:
    """Split ``tree`` into its leaves (depth first, left to right) and its structure.

    ``is_leaf(x) -> True`` stops the descent at ``x``, making the whole subtree a leaf.
    """
    return default_registry.flatten(tree, is_leaf)


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable[Any]) -> Any:
    """Rebuild a tree of structure ``treedef`` from ``leaves`` (inverse of flatten)."""
    return treedef.unflatten(leaves)


def tree_leaves(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list[Any]:
    """The leaves of ``tree``, in the order ``tree_unflatten`` expects them."""
    return default_registry.flatten(tree, is_leaf)[0]


def tree_structure(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> PyTreeDef:
    """The structure of ``tree``, without its leaves."""
    return default_registry.flatten(tree, is_leaf)[1]


def _flatten_rest(treedef: PyTreeDef, tree: Any, index: int, func_name: str) -> list[Any]:
    try:
        return treedef.flatten_up_to(tree)
    except _StructureMismatch as e:
        name = f"rest[{index}]"
        raise ValueError(
            f"{func_name}: {name} must have the structure of tree, or that structure as a "
            f"prefix.\n"
            f"  tree:{' ' * (len(name) - 4)} {treedef!r}\n"
            f"  {name}: {tree_structure(tree)!r}\n"
            f"  first difference at {name}{e.path}: {e.detail}"
        ) from None


def tree_map(f: Callable[..., Any], tree: Any, *rest: Any,
             is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """Apply ``f`` leaf by leaf, returning a tree of the structure of ``tree``.

    Each tree in ``rest`` must have the structure of ``tree``, or have it as a prefix:
    then ``f`` receives the whole subtree that sits where ``tree`` has a leaf.
    ``is_leaf`` applies to ``tree`` only.
    """
    leaves, treedef = tree_flatten(tree, is_leaf)
    if not rest:
        return treedef.unflatten([f(x) for x in leaves])
    others = [_flatten_rest(treedef, r, i, "tree_map") for i, r in enumerate(rest)]
    return treedef.unflatten([f(*xs) for xs in zip(leaves, *others)])


def tree_all(tree: Any, *, is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """Whether every leaf is truthy (``True`` for a tree with no leaves)."""
    return all(tree_leaves(tree, is_leaf))


class _NoInitializer:
    def __repr__(self) -> str:
        return "<no initializer>"


_NO_INITIALIZER = _NoInitializer()


def tree_reduce(function: Callable[[Any, Any], Any], tree: Any,
                initializer: Any = _NO_INITIALIZER,
                is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """``functools.reduce(function, tree_leaves(tree)[, initializer])``."""
    leaves = tree_leaves(tree, is_leaf)
    if initializer is _NO_INITIALIZER:
        if not leaves:
            raise TypeError("tree_reduce of a tree with no leaves needs an initializer")
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def tree_transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None,
                   pytree_to_transpose: Any) -> Any:
    """Turn an outer tree of inner trees into an inner tree of outer trees.

    ``[{'a': 1, 'b': 2}, {'a': 3, 'b': 4}]`` becomes ``{'a': [1, 3], 'b': [2, 4]}``
    (per-example gradients into per-parameter stacks). ``inner_treedef=None`` takes
    the structure of the first inner tree.
    """
    if inner_treedef is None:
        subtrees = outer_treedef.flatten_up_to(pytree_to_transpose)
        if not subtrees:
            raise ValueError("tree_transpose: cannot infer inner_treedef from an empty tree")
        inner_treedef = tree_structure(subtrees[0])
    leaves, treedef = tree_flatten(pytree_to_transpose)
    expected = outer_treedef.compose(inner_treedef)
    if treedef != expected:
        raise ValueError(
            "tree_transpose: the tree does not have structure outer ∘ inner.\n"
            f"  tree:     {treedef!r}\n"
            f"  expected: {expected!r}"
        )
    n_in = inner_treedef.num_leaves
    n_out = outer_treedef.num_leaves
    columns = [outer_treedef.unflatten(leaves[i + j * n_in] for j in range(n_out))
               for i in range(n_in)]
    return inner_treedef.unflatten(columns)


def all_leaves(iterable: Iterable[Any],
               is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """Whether every element of ``iterable`` is a leaf (``None`` is not a leaf)."""
    items = list(iterable)
    if is_leaf is None:
        return all(default_registry._lookup(type(x)) is None for x in items)
    leaves = tree_leaves(items, is_leaf)
    return len(leaves) == len(items) and all(a is b for a, b in zip(leaves, items))


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    """Whether ``treedef`` is the structure of a single leaf."""
    return treedef.num_nodes == 1 and treedef.num_leaves == 1


def treedef_children(treedef: PyTreeDef) -> list[PyTreeDef]:
    """The structures of the root's children."""
    return treedef.children()


def treedef_tuple(treedefs: Iterable[PyTreeDef]) -> PyTreeDef:
    """The structure of a tuple whose elements have the given structures."""
    return PyTreeDef._make(_TUPLE_SPEC, tuple, None, tuple(treedefs))


# --------------------------------------------------------------------------------------
# Registering user types


def register_pytree_node(nodetype: type, flatten_func: Callable[[Any], tuple[Iterable, Any]],
                         unflatten_func: Callable[[Any, tuple], Any]) -> None:
    """Make ``nodetype`` a pytree node instead of a leaf.

    ``flatten_func(x) -> (children, aux_data)``: children are flattened further;
    ``aux_data`` is kept in the treedef, so it must be hashable and comparable.
    ``unflatten_func(aux_data, children) -> x`` rebuilds the value (children is a
    tuple). Registering a type twice raises ``ValueError``.
    """
    default_registry.register(nodetype, flatten_func, unflatten_func)


def register_pytree_node_class(cls: type) -> type:
    """Class decorator: use ``x.tree_flatten()`` and ``cls.tree_unflatten(aux, children)``."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


def register_static(cls: type) -> type:
    """Make ``cls`` a node with no children: its values live in the treedef, not leaves.

    For configuration objects passed through transforms; they must be hashable.
    """
    register_pytree_node(cls, lambda x: ((), x), lambda aux, children: aux)
    return cls


def _dataclass_spec(nodetype: type, data_fields: tuple[str, ...],
                    meta_fields: tuple[str, ...]) -> _NodeSpec:
    """Children are the data fields; node data is the tuple of meta field values.

    Rebuilding sets the fields directly instead of calling ``__init__``: leaves may be
    anything (sentinels, batched arrays), and ``__post_init__`` checks must not run on
    them; frozen dataclasses are rebuilt the same way.
    """
    name = nodetype.__name__

    def flatten(x: Any) -> tuple[list, tuple]:
        meta = tuple(getattr(x, f) for f in meta_fields)
        for field, value in zip(meta_fields, meta):
            try:
                hash(value)
            except TypeError:
                raise TypeError(
                    f"meta field {name}.{field} must be hashable (it is part of the "
                    f"tree structure), got {type(value).__name__}; make it a data "
                    f"field if it holds arrays"
                ) from None
        return [getattr(x, f) for f in data_fields], meta

    def unflatten(t: type, meta: tuple, children: tuple) -> Any:
        obj = t.__new__(t)
        for field, value in zip(data_fields, children):
            object.__setattr__(obj, field, value)
        for field, value in zip(meta_fields, meta):
            object.__setattr__(obj, field, value)
        return obj

    def show(t: type, meta: tuple, children: list[str]) -> str:
        parts = [f"{f}={c}" for f, c in zip(data_fields, children)]
        parts += [f"{f}={v!r}" for f, v in zip(meta_fields, meta)]
        return f"{name}({', '.join(parts)})"

    return _NodeSpec(
        name=name,
        flatten=flatten,
        unflatten=unflatten,
        show=show,
        keys=lambda t, meta, n: [f".{f}" for f in data_fields],
    )


def register_dataclass(nodetype: type | None = None,
                       data_fields: Iterable[str] | None = None,
                       meta_fields: Iterable[str] | None = None) -> Any:
    """Make a dataclass (or any class with these attributes) a pytree node.

    ``data_fields`` are children (arrays that transforms see); ``meta_fields`` are
    part of the structure (hashable configuration, like an activation name). On a
    dataclass, an omitted list means "the remaining fields": with both omitted every
    field is data, except fields declared with ``field(metadata={'static': True})``,
    which are meta (as in JAX). Works as a call, a bare decorator, or a decorator
    factory: ``@register_dataclass(meta_fields=['act'])``. Returns ``nodetype``.
    """
    if nodetype is None:
        return lambda cls: register_dataclass(cls, data_fields, meta_fields)
    if not isinstance(nodetype, type):
        raise TypeError(f"register_dataclass expects a class, got {nodetype!r}")
    data = None if data_fields is None else tuple(data_fields)
    meta = None if meta_fields is None else tuple(meta_fields)
    for given in (data, meta):
        if isinstance(given, tuple) and any(not isinstance(f, str) for f in given):
            raise TypeError(f"field names must be strings, got {list(given)!r}")
    if dataclasses.is_dataclass(nodetype):
        all_fields = [f.name for f in dataclasses.fields(nodetype)]
        if data is None and meta is None:
            static = {f.name for f in dataclasses.fields(nodetype) if f.metadata.get("static")}
            data = tuple(f for f in all_fields if f not in static)
            meta = tuple(f for f in all_fields if f in static)
        elif data is None:
            data = tuple(f for f in all_fields if f not in meta)
        elif meta is None:
            meta = tuple(f for f in all_fields if f not in data)
        unknown = [f for f in data + meta if f not in all_fields]
        if unknown:
            raise ValueError(
                f"register_dataclass({nodetype.__name__}): {unknown} are not fields "
                f"of the dataclass (fields: {all_fields})"
            )
        missing = [f for f in all_fields if f not in data + meta]
        if missing:
            raise ValueError(
                f"register_dataclass({nodetype.__name__}): fields {missing} are "
                f"neither data_fields nor meta_fields; a rebuilt value would lack them"
            )
    elif data is None and meta is None:
        raise TypeError(
            f"register_dataclass({nodetype.__name__}): not a dataclass, so "
            f"data_fields and meta_fields must be given"
        )
    else:
        data = data or ()
        meta = meta or ()
    both = sorted(set(data) & set(meta))
    if both:
        raise ValueError(
            f"register_dataclass({nodetype.__name__}): {both} are listed as both "
            f"data_fields and meta_fields"
        )
    dups = sorted({f for f in data + meta if (data + meta).count(f) > 1})
    if dups:
        raise ValueError(
            f"register_dataclass({nodetype.__name__}): fields {dups} listed twice"
        )
    default_registry._add(nodetype, _dataclass_spec(nodetype, data, meta))
    return nodetype
