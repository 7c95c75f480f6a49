"""Tests for astjax.tree_util: JAX's pytree semantics."""
import collections
import copy
import dataclasses
import typing

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from astjax import tree_util as tu
from astjax.tree_util import (
    all_leaves,
    register_dataclass,
    register_pytree_node,
    register_pytree_node_class,
    register_static,
    tree_all,
    tree_flatten,
    tree_leaves,
    tree_map,
    tree_reduce,
    tree_structure,
    tree_transpose,
    tree_unflatten,
    treedef_children,
    treedef_is_leaf,
    treedef_tuple,
)


@pytest.fixture(autouse=True)
def _isolated_registry():
    """Every test starts and ends with no custom registrations."""
    with tu.default_registry.scoped():
        yield


Point = collections.namedtuple("Point", ["x", "y"])


class Pair(typing.NamedTuple):
    first: typing.Any
    second: typing.Any


def strict_equal(a, b):
    """``==`` that also checks container types and dict key order."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return (list(a) == list(b) and all(strict_equal(a[k], b[k]) for k in a)
                and getattr(a, "default_factory", None) == getattr(b, "default_factory", None))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(strict_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    return a == b


def _canonical(tree):
    """The tree that unflatten returns: dicts (not OrderedDicts) in sorted key order."""
    if type(tree) is dict:
        return {k: _canonical(tree[k]) for k in sorted(tree)}
    if type(tree) is collections.defaultdict:
        return collections.defaultdict(
            tree.default_factory, {k: _canonical(tree[k]) for k in sorted(tree)})
    if type(tree) is collections.OrderedDict:
        return collections.OrderedDict((k, _canonical(v)) for k, v in tree.items())
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return type(tree)(*map(_canonical, tree))
    if isinstance(tree, (list, tuple)):
        return type(tree)(map(_canonical, tree))
    return tree


# --------------------------------------------------------------------------------------
# Built-in nodes


ROUND_TRIP_CASES = [
    1,
    "leaf string",
    None,
    (),
    [],
    {},
    (1,),
    (1, 2.5),
    [1, [2, [3, []]]],
    {"b": 1, "a": 2},
    {"x": None, "y": (None, 3)},
    Point(1, (2, 3)),
    Pair([1], {"k": 2}),
    collections.OrderedDict([("z", 1), ("a", 2)]),
    collections.defaultdict(list, {"b": [1], "a": 2}),
    collections.defaultdict(None, {"a": 1}),
    [np.zeros(3), {"w": np.ones((2, 2)), "b": None}, (Point(np.arange(2), 5),)],
]


@pytest.mark.parametrize("tree", ROUND_TRIP_CASES, ids=repr)
def test_round_trip(tree):
    leaves, treedef = tree_flatten(tree)
    rebuilt = tree_unflatten(treedef, leaves)
    assert strict_equal(rebuilt, _canonical(tree))  # dicts come back with sorted keys
    assert treedef.num_leaves == len(leaves)
    assert tree_structure(rebuilt) == treedef
    assert treedef.unflatten(leaves) is not None or tree is None


def test_leaf_order_depth_first_sorted_keys():
    tree = {"b": [1, 2], "a": (3, {"d": 4, "c": 5}), "c": Point(6, 7)}
    assert tree_leaves(tree) == [3, 5, 4, 1, 2, 6, 7]


def test_ordered_dict_keeps_insertion_order():
    od = collections.OrderedDict([("z", 1), ("a", 2)])
    assert tree_leaves(od) == [1, 2]
    other = collections.OrderedDict([("a", 2), ("z", 1)])
    assert tree_structure(od) != tree_structure(other)
    rebuilt = tree_map(lambda x: x * 10, od)
    assert type(rebuilt) is collections.OrderedDict
    assert list(rebuilt.items()) == [("z", 10), ("a", 20)]


def test_defaultdict_keeps_factory():
    dd = collections.defaultdict(list, {"b": 1, "a": 2})
    assert tree_leaves(dd) == [2, 1]
    out = tree_map(lambda x: x + 1, dd)
    assert type(out) is collections.defaultdict
    assert out.default_factory is list
    assert dict(out) == {"a": 3, "b": 2}
    assert tree_structure(dd) != tree_structure(collections.defaultdict(dict, dd))
    assert tree_structure(dd) != tree_structure(dict(dd))


def test_none_is_a_node_not_a_leaf():
    assert tree_leaves(None) == []
    assert tree_leaves([None, 1, None]) == [1]
    treedef = tree_structure(None)
    assert treedef.num_leaves == 0
    assert treedef.num_nodes == 1
    assert not treedef_is_leaf(treedef)
    assert tree_map(lambda x: x + 1, [None, 1]) == [None, 2]
    assert not all_leaves([None])
    assert tree_leaves([None, 1], is_leaf=lambda x: x is None) == [None, 1]


def test_dict_key_order_does_not_matter_and_result_is_sorted():
    a = {"b": 1, "a": 2}
    b = {"a": 2, "b": 1}
    assert tree_structure(a) == tree_structure(b)
    assert list(tree_map(lambda x: x, a)) == ["a", "b"]


def test_dict_with_mixed_key_types_is_deterministic():
    a = {1: "one", "a": "A", 2.5: "f"}
    b = {"a": "A", 2.5: "f", 1: "one"}
    la, ta = tree_flatten(a)
    lb, tb = tree_flatten(b)
    assert la == lb and ta == tb
    assert tree_unflatten(ta, la) == a


def test_namedtuples_are_nodes_and_distinct_from_tuples():
    assert tree_leaves(Point(1, 2)) == [1, 2]
    assert tree_leaves(Pair(3, 4)) == [3, 4]
    assert tree_structure(Point(1, 2)) != tree_structure((1, 2))
    assert tree_structure(Point(1, 2)) != tree_structure(Pair(1, 2))
    out = tree_map(lambda v: v * 2, Pair(1, Point(2, 3)))
    assert type(out) is Pair and type(out.second) is Point
    assert out == Pair(2, Point(4, 6))


def test_subclass_of_builtin_container_is_a_leaf():
    class MyDict(dict):
        pass

    class MyList(list):
        pass

    d = MyDict(a=1)
    assert tree_leaves([d, MyList([1, 2])]) == [d, MyList([1, 2])]


def test_arrays_are_leaves():
    x = np.arange(6.0).reshape(2, 3)
    leaves = tree_leaves({"x": x, "y": [x]})
    assert len(leaves) == 2 and leaves[0] is x


# --------------------------------------------------------------------------------------
# PyTreeDef


def test_repr_like_jax():
    assert repr(tree_structure([1, (2, 3)])) == "PyTreeDef([*, (*, *)])"
    assert repr(tree_structure(1)) == "PyTreeDef(*)"
    assert repr(tree_structure(None)) == "PyTreeDef(None)"
    assert repr(tree_structure((1,))) == "PyTreeDef((*,))"
    assert repr(tree_structure({"b": 1, "a": None})) == "PyTreeDef({'a': None, 'b': *})"
    assert repr(tree_structure(Point(1, [2]))) == "PyTreeDef(Point(x=*, y=[*]))"
    od = collections.OrderedDict(z=1, a=2)
    assert repr(tree_structure(od)) == "PyTreeDef(OrderedDict({'z': *, 'a': *}))"
    dd = collections.defaultdict(list, {"a": 1})
    assert repr(tree_structure(dd)) == "PyTreeDef(defaultdict(list, {'a': *}))"


def test_counts():
    treedef = tree_structure([1, (2, 3), None])
    assert treedef.num_leaves == 3
    assert treedef.num_nodes == 6  # list, leaf, tuple, leaf, leaf, None
    assert tree_structure(1).num_nodes == 1


def test_equality_and_hash():
    t1 = tree_structure({"a": [1, 2], "b": (3,)})
    t2 = tree_structure({"b": ("x",), "a": [np.zeros(2), None]})
    t3 = tree_structure({"a": [1, 2], "b": (3,)})
    assert t1 != t2  # None vs leaf
    assert t1 == t3 and hash(t1) == hash(t3)
    assert len({t1, t3, t2}) == 2
    assert tree_structure([1]) != tree_structure((1,))
    assert tree_structure([1]) != tree_structure([1, 2])
    assert tree_structure({"a": 1}) != tree_structure({"b": 1})
    assert t1 != "not a treedef"
    assert copy.deepcopy(t1) is t1


def test_children_and_node_data():
    treedef = tree_structure([1, (2, 3), {"a": 4}])
    children = treedef.children()
    assert children == [tree_structure(0), tree_structure((0, 0)), tree_structure({"a": 0})]
    assert treedef_children(treedef) == children
    assert tree_structure(1).children() == []
    assert tree_structure(1).node_data() is None
    assert tree_structure({"b": 1, "a": 2}).node_data() == (dict, ("a", "b"))
    assert treedef_tuple(children) == tree_structure((1, (2, 3), {"a": 4}))


def test_treedef_is_leaf():
    assert treedef_is_leaf(tree_structure(1))
    assert treedef_is_leaf(tree_structure([1], is_leaf=lambda x: isinstance(x, list)))
    assert not treedef_is_leaf(tree_structure([1]))
    assert not treedef_is_leaf(tree_structure(()))


def test_unflatten_wrong_leaf_count():
    treedef = tree_structure((1, 2))
    with pytest.raises(ValueError, match="Too few leaves.*expected 2, got 1"):
        treedef.unflatten([1])
    with pytest.raises(ValueError, match="Too many leaves.*expected 2, got 3"):
        tree_unflatten(treedef, [1, 2, 3])


def test_unflatten_accepts_any_iterable():
    treedef = tree_structure([1, (2, 3)])
    assert treedef.unflatten(iter([4, 5, 6])) == [4, (5, 6)]


def test_flatten_up_to_and_compose():
    treedef = tree_structure([0, (0, 0)])
    assert treedef.flatten_up_to([{"a": 1}, ([2], None)]) == [{"a": 1}, [2], None]
    inner = tree_structure({"a": 0, "b": 0})
    composed = treedef.compose(inner)
    assert composed == tree_structure([{"a": 1, "b": 2}, ({"a": 1, "b": 2}, {"a": 1, "b": 2})])
    assert composed.num_leaves == 6


# --------------------------------------------------------------------------------------
# Tree functions


def test_tree_map_single_and_multiple_trees():
    assert tree_map(lambda x: x * 2, [1, {"a": 2, "b": (3,)}]) == [2, {"a": 4, "b": (6,)}]
    out = tree_map(lambda a, b, c: a + b + c, (1, [2]), (10, [20]), (100, [200]))
    assert out == (111, [222])


def test_tree_map_structure_as_prefix():
    out = tree_map(lambda x, sub: (x, sub), {"a": 1, "b": 2}, {"a": [1, 2], "b": {"c": None}})
    assert out == {"a": (1, [1, 2]), "b": (2, {"c": None})}


def test_tree_map_is_leaf_applies_to_first_tree():
    tree = [(1, 2), (3, 4)]
    out = tree_map(lambda t: sum(t), tree, is_leaf=lambda x: isinstance(x, tuple))
    assert out == [3, 7]
    out = tree_map(lambda t, s: (t, s), tree, [5, 6], is_leaf=lambda x: isinstance(x, tuple))
    assert out == [((1, 2), 5), ((3, 4), 6)]


def test_is_leaf_on_root_and_dict():
    assert tree_leaves({"a": 1}, is_leaf=lambda x: isinstance(x, dict)) == [{"a": 1}]
    treedef = tree_structure({"a": 1}, is_leaf=lambda x: isinstance(x, dict))
    assert treedef_is_leaf(treedef)


@pytest.mark.parametrize(
    "tree, other, fragments",
    [
        ({"a": (1, 2)}, {"a": [1, 2]}, ["rest[0]['a']", "expected tuple", "got list"]),
        ((1, 2), (1, 2, 3), ["expected tuple with 2 children", "3 children"]),
        ({"a": 1}, {"b": 1}, ["keys ['a']", "keys ['b']"]),
        ({"a": 1}, {"a": 1, "b": 2}, ["keys ['a']", "keys ['a', 'b']"]),
        ([1, None], [1, 2], ["rest[0][1]", "expected None", "got int"]),
        (Point(1, 2), (1, 2), ["expected Point", "got tuple"]),
        (Point(1, 2), Pair(1, 2), ["expected Point", "got Pair"]),
        ([1, (2, 3)], [1, 5], ["rest[0][1]", "got int: 5"]),
    ],
)
def test_tree_map_mismatch_error_shows_both_structures(tree, other, fragments):
    with pytest.raises(ValueError) as info:
        tree_map(lambda a, b: a, tree, other)
    msg = str(info.value)
    assert repr(tree_structure(tree)) in msg
    assert repr(tree_structure(other)) in msg
    for fragment in fragments:
        assert fragment in msg


def test_tree_map_mismatch_names_the_argument():
    with pytest.raises(ValueError, match=r"rest\[1\]"):
        tree_map(lambda a, b, c: a, [1, 2], [1, 2], [1])


def test_tree_all_and_reduce():
    assert tree_all([True, {"a": 1}])
    assert not tree_all([True, {"a": 0}])
    assert tree_all([None, ()])
    assert tree_reduce(lambda a, b: a + b, [1, (2, 3), {"x": 4}]) == 10
    assert tree_reduce(lambda a, b: a + b, [1, 2], 100) == 103
    assert tree_reduce(lambda a, b: a + b, [], initializer=5) == 5
    with pytest.raises(TypeError, match="initializer"):
        tree_reduce(lambda a, b: a + b, [None])
    nested = [[1, 2], [3]]
    assert tree_reduce(lambda a, b: a + b, nested, [],
                       is_leaf=lambda x: isinstance(x, list) and x != nested) == [1, 2, 3]


def test_all_leaves():
    assert all_leaves([1, "a", np.zeros(2)])
    assert not all_leaves([1, [2]])
    assert not all_leaves([1, None])
    assert all_leaves([1, [2]], is_leaf=lambda x: isinstance(x, list) and len(x) == 1)


def test_tree_transpose():
    outer = tree_structure([0, 0, 0])
    inner = tree_structure({"a": 0, "b": 0})
    tree = [{"a": 1, "b": 2}, {"a": 3, "b": 4}, {"a": 5, "b": 6}]
    expected = {"a": [1, 3, 5], "b": [2, 4, 6]}
    assert tree_transpose(outer, inner, tree) == expected
    assert tree_transpose(outer, None, tree) == expected
    with pytest.raises(ValueError, match="expected"):
        tree_transpose(outer, inner, [{"a": 1, "b": 2}, {"a": 3}, {"a": 5, "b": 6}])


# --------------------------------------------------------------------------------------
# Custom nodes


class Box:
    """A container that is a leaf unless registered."""

    def __init__(self, value, label):
        self.value = value
        self.label = label

    def __eq__(self, other):
        return type(other) is Box and (self.value, self.label) == (other.value, other.label)


def _register_box():
    register_pytree_node(
        Box,
        lambda b: ((b.value,), b.label),
        lambda label, children: Box(children[0], label),
    )


def test_unregistered_type_is_leaf():
    b = Box(1, "l")
    assert tree_leaves([b]) == [b]


def test_register_pytree_node():
    _register_box()
    tree = [Box({"x": 1, "y": 2}, "hi"), 3]
    leaves, treedef = tree_flatten(tree)
    assert leaves == [1, 2, 3]
    assert treedef_tuple([]) != treedef
    assert tree_unflatten(treedef, leaves) == tree
    assert tree_map(lambda v: v + 1, tree) == [Box({"x": 2, "y": 3}, "hi"), 4]
    assert repr(tree_structure(Box(1, "hi"))) == "PyTreeDef(CustomNode(Box['hi'], [*]))"
    # aux data is part of the structure
    assert tree_structure(Box(1, "a")) != tree_structure(Box(1, "b"))
    assert hash(tree_structure(Box(1, "a"))) == hash(tree_structure(Box(2, "a")))
    with pytest.raises(ValueError, match="node data differs: expected 'a', got 'b'"):
        tree_map(lambda x, y: x, Box(1, "a"), Box(1, "b"))


def test_register_twice_raises():
    _register_box()
    with pytest.raises(ValueError, match="Duplicate"):
        _register_box()
    with pytest.raises(ValueError, match="built-in"):
        register_pytree_node(tuple, lambda t: (t, None), lambda a, c: tuple(c))
    with pytest.raises(TypeError, match="classes"):
        register_pytree_node("Box", lambda t: (t, None), lambda a, c: c)


def test_registry_scoped_resets_registrations():
    reg = tu.default_registry
    before = reg.registered_types()
    with reg.scoped():
        _register_box()
        assert reg.is_registered(Box)
        assert reg.registered_types() == before + [Box]
    assert not reg.is_registered(Box)
    assert reg.registered_types() == before
    assert tree_leaves(Box(1, "a"))[0].label == "a"
    _register_box()  # allowed again after the reset


def test_registry_snapshot_restore_copy_clear_unregister():
    reg = tu.default_registry
    saved = reg.snapshot()
    _register_box()
    private = reg.copy()
    reg.unregister(Box)
    assert not reg.is_registered(Box)
    assert private.is_registered(Box)
    assert private.flatten(Box(7, "p"))[0] == [7]
    with pytest.raises(ValueError, match="not a registered"):
        reg.unregister(Box)
    with pytest.raises(ValueError):
        reg.unregister(dict)
    _register_box()
    reg.clear()
    assert not reg.is_registered(Box)
    assert reg.is_registered(dict)
    reg.restore(saved)


def test_register_pytree_node_class():
    @register_pytree_node_class
    class Special:
        def __init__(self, x, y, name):
            self.x, self.y, self.name = x, y, name

        def tree_flatten(self):
            return (self.x, self.y), self.name

        @classmethod
        def tree_unflatten(cls, aux, children):
            return cls(*children, aux)

    s = Special(1, [2, 3], "n")
    leaves, treedef = tree_flatten(s)
    assert leaves == [1, 2, 3]
    out = tree_unflatten(treedef, [4, 5, 6])
    assert isinstance(out, Special)
    assert (out.x, out.y, out.name) == (4, [5, 6], "n")


def test_register_static():
    @register_static
    @dataclasses.dataclass(frozen=True)
    class Config:
        lr: float

    tree = {"cfg": Config(0.1), "w": 2}
    leaves, treedef = tree_flatten(tree)
    assert leaves == [2]
    assert tree_unflatten(treedef, [3]) == {"cfg": Config(0.1), "w": 3}
    assert tree_structure(Config(0.1)) != tree_structure(Config(0.2))


# --------------------------------------------------------------------------------------
# Dataclasses


def test_register_dataclass_plain_call_with_meta_fields():
    @dataclasses.dataclass
    class Layer:
        w: typing.Any
        b: typing.Any
        activation: str

    assert register_dataclass(Layer, data_fields=["w", "b"], meta_fields=["activation"]) is Layer
    layer = Layer(np.ones(2), np.zeros(2), "relu")
    leaves, treedef = tree_flatten(layer)
    assert len(leaves) == 2 and leaves[0] is layer.w
    out = tree_unflatten(treedef, [1, 2])
    assert isinstance(out, Layer) and (out.w, out.b, out.activation) == (1, 2, "relu")
    assert repr(treedef) == "PyTreeDef(Layer(w=*, b=*, activation='relu'))"
    assert treedef == tree_structure(Layer(5, 6, "relu"))
    assert treedef != tree_structure(Layer(5, 6, "tanh"))
    assert hash(treedef) == hash(tree_structure(Layer(5, 6, "relu")))
    with pytest.raises(ValueError) as info:
        tree_map(lambda a, b: a, Layer(1, 2, "relu"), Layer(1, 2, "tanh"))
    assert "activation='relu'" in str(info.value) and "activation='tanh'" in str(info.value)


def test_register_dataclass_decorator_all_fields_are_data():
    @register_dataclass
    @dataclasses.dataclass(frozen=True)
    class Params:
        w: typing.Any
        b: typing.Any = None

    p = Params(1, [2, 3])
    assert tree_leaves(p) == [1, 2, 3]
    out = tree_map(lambda x: x * 10, p)
    assert out == Params(10, [20, 30])  # frozen dataclass rebuilt


def test_register_dataclass_static_metadata_and_factory_form():
    @register_dataclass
    @dataclasses.dataclass
    class A:
        x: typing.Any
        n: int = dataclasses.field(default=3, metadata={"static": True})

    assert tree_leaves(A(1)) == [1]
    assert tree_structure(A(1, 3)) != tree_structure(A(1, 4))

    @register_dataclass(meta_fields=["name"])
    @dataclasses.dataclass
    class B:
        x: typing.Any
        name: str

    assert tree_leaves(B([1, 2], "b")) == [1, 2]
    assert tree_map(lambda v: -v, B(1, "b")) == B(-1, "b")


def test_register_dataclass_skips_init_and_post_init():
    calls = []

    @register_dataclass
    @dataclasses.dataclass
    class Checked:
        x: typing.Any

        def __post_init__(self):
            calls.append(self.x)
            if not isinstance(self.x, int):
                raise TypeError("x must be an int")

    c = Checked(1)
    sentinel = object()
    out = tree_map(lambda _: sentinel, c)
    assert out.x is sentinel and calls == [1]


def test_register_dataclass_non_init_fields_and_errors():
    @dataclasses.dataclass
    class C:
        x: typing.Any
        y: typing.Any = dataclasses.field(init=False, default=0)

    register_dataclass(C)
    c = C(1)
    c.y = 2
    assert tree_leaves(c) == [1, 2]

    @dataclasses.dataclass
    class D:
        x: typing.Any
        meta: typing.Any

    with pytest.raises(ValueError, match="not fields"):
        register_dataclass(D, data_fields=["x", "z"], meta_fields=["meta"])
    with pytest.raises(ValueError, match="neither data_fields nor meta_fields"):
        register_dataclass(D, data_fields=["x"], meta_fields=[])
    with pytest.raises(ValueError, match="both"):
        register_dataclass(D, data_fields=["x", "meta"], meta_fields=["meta"])

    register_dataclass(D, data_fields=["x"], meta_fields=["meta"])
    with pytest.raises(ValueError, match="Duplicate"):
        register_dataclass(D, data_fields=["x"], meta_fields=["meta"])
    with pytest.raises(TypeError, match="meta field D.meta must be hashable"):
        tree_flatten(D(1, np.zeros(2)))


def test_register_dataclass_on_plain_class():
    class Plain:
        def __init__(self, a, k):
            self.a = a
            self.k = k

    register_dataclass(Plain, data_fields=["a"], meta_fields=["k"])
    out = tree_map(lambda v: v + 1, Plain(1, "k"))
    assert (out.a, out.k) == (2, "k")

    class Other:
        pass

    with pytest.raises(TypeError, match="must be given"):
        register_dataclass(Other)


# --------------------------------------------------------------------------------------
# Property tests


def _containers(children):
    keys = st.text(min_size=1, max_size=3)
    return st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(keys, children, max_size=4),
        st.tuples(children, children).map(lambda t: Point(*t)),
        st.tuples(children, children).map(lambda t: Pair(*t)),
        st.lists(st.tuples(keys, children), max_size=3).map(collections.OrderedDict),
        st.dictionaries(keys, children, max_size=3).map(
            lambda d: collections.defaultdict(list, d)),
    )


leaves_strategy = st.one_of(
    st.none(),
    st.integers(),
    st.text(max_size=3),
    st.floats(allow_nan=False),
    st.booleans(),
)
trees = st.recursive(leaves_strategy, _containers, max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(trees)
def test_property_flatten_unflatten_round_trip(tree):
    leaves, treedef = tree_flatten(tree)
    assert len(leaves) == treedef.num_leaves
    assert not any(leaf is None for leaf in leaves)
    rebuilt = tree_unflatten(treedef, leaves)
    assert strict_equal(rebuilt, _canonical(tree))
    assert tree_structure(rebuilt) == treedef
    assert hash(tree_structure(rebuilt)) == hash(treedef)
    assert all(a is b for a, b in zip(tree_leaves(rebuilt), leaves))


@settings(max_examples=200, deadline=None)
@given(trees)
def test_property_tree_map_identity_and_multi_tree(tree):
    assert strict_equal(tree_map(lambda x: x, tree), _canonical(tree))
    pairs = tree_map(lambda a, b: (a, b), tree, tree)
    expected = tree_map(lambda a: (a, a), tree)
    assert strict_equal(pairs, expected)
    # Wrapping every leaf in a list keeps the original structure as a prefix.
    wrapped = tree_map(lambda x: [x], tree)
    assert strict_equal(tree_map(lambda a, w: w[0], tree, wrapped), _canonical(tree))
