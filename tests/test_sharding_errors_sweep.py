"""Sharding errors swept through shard_map, pmap, named vmap and the transformations.

Each error -- a dimension the mesh does not divide, an unknown axis name (in specs,
in collectives), specs that do not match the pytree, a collective outside any mapped
axis, a pmap axis larger than the devices -- must be a ShardingError naming the
user's own line of this file with a caret under it and a hint, whether the sharded
function is called, jitted, differentiated (grad, jit(grad), value_and_grad, vjp,
jvp), vmapped, called from a differentiated function, or shape-evaluated.  Errors
about a collective name the collective's line (also when the code that runs is
astjax's generated code); errors about a call's arguments name the call.
"""
import inspect
import re

import numpy as np
import pytest

import astjax
from astjax import lax
from astjax.sharding import P
from astjax.sharding.errors import ShardingError


@pytest.fixture(autouse=True)
def four_devices(monkeypatch):
    monkeypatch.setenv("ASTJAX_NUM_CPU_DEVICES", "4")


def mesh():
    return astjax.make_mesh((4,), ("i",))


X, W = np.linspace(0.1, 0.9, 24).reshape(8, 3), np.linspace(-1.0, 1.0, 3)
PX = np.linspace(0.1, 0.9, 12).reshape(4, 3)


# ------------------------------------------------------------ the user's functions

def body(x, w):
    return lax.psum(np.sum(np.tanh(x * w)), "i")


def first_column(x, w):
    return x[:, 0] * w[0]


def body_unknown_axis(x, w):
    y = np.tanh(x * w)
    return lax.psum(np.sum(y), "j")                       # <- TAG psum_j


def body_gather_unknown(x, w):
    return np.sum(lax.all_gather(x * w, "k", tiled=True))  # <- TAG gather_k


def outside(x, w):
    return lax.psum(np.sum(x * w), "i")                   # <- TAG outside


def device_unknown_axis(x, w):
    return lax.pmean(np.sum(x * w), "zz")                 # <- TAG pmean_zz


def device_static(x, k, w):
    return lax.pmax(np.sum(x * w) * k, "q")               # <- TAG pmax_q


def example_unknown(x, w):
    return lax.psum(np.sum(x * w), "c")                   # <- TAG named_c


def with_static(pm):
    def call(x, w):
        return pm(x, 2, w)                                # <- TAG static_call
    return call


def inside_grad_in_shard(x, w):                 # a gradient taken inside the shard
    g = astjax.grad(lambda v: lax.psum(np.sum(np.sin(v * w)), "j"))(x)  # <- TAG inner_j
    return lax.psum(np.sum(g), "i")


# name -> (make the function, arguments, message, where: a TAG or "call")
ERRORS = {
    "indivisible": (
        lambda: astjax.shard_map(body, mesh=mesh(), in_specs=(P("i"), P()), out_specs=P()),
        (np.ones((6, 3)), W), "not divisible by 4", "call"),
    "in_specs_pytree": (
        lambda: astjax.shard_map(body, mesh=mesh(), in_specs=((P("i"), P()), P()),
                                 out_specs=P()),
        (X, W), "in_specs do not match the pytree", "call"),
    "spec_longer_than_the_rank": (
        lambda: astjax.shard_map(body, mesh=mesh(), in_specs=(P(None, None, "i"), P()),
                                 out_specs=P()),
        (X, W), "has 3 entries but the value has rank 2", "call"),
    "out_spec_longer_than_the_rank": (
        lambda: astjax.shard_map(first_column, mesh=mesh(), in_specs=(P("i"), P()),
                                 out_specs=P("i", None)),
        (X, W), "has 2 entries but the value has rank 1", "call"),
    "out_specs_pytree": (
        lambda: astjax.shard_map(body, mesh=mesh(), in_specs=(P("i"), P()),
                                 out_specs=(P(), P())),
        (X, W), "out_specs do not match the pytree", "call"),
    "unknown_axis_in_collective": (
        lambda: astjax.shard_map(body_unknown_axis, mesh=mesh(), in_specs=(P("i"), P()),
                                 out_specs=P()),
        (X, W), "unknown axis name 'j'", "psum_j"),
    "unknown_axis_in_all_gather": (
        lambda: astjax.shard_map(body_gather_unknown, mesh=mesh(), in_specs=(P("i"), P()),
                                 out_specs=P(), check_vma=False),
        (X, W), "unknown axis name 'k'", "gather_k"),
    "unknown_axis_under_grad_in_shard": (
        lambda: astjax.shard_map(inside_grad_in_shard, mesh=mesh(),
                                 in_specs=(P("i"), P()), out_specs=P(), check_vma=False),
        (X, W), "unknown axis name 'j'", "inner_j"),
    "outside_any_mapped_axis": (lambda: outside, (X, W), "outside any mapped axis",
                                "outside"),
    "pmap_unknown_axis": (
        lambda: astjax.pmap(device_unknown_axis, axis_name="d", in_axes=(0, None)),
        (PX, W), "unknown axis name 'zz'", "pmean_zz"),
    "pmap_static_unknown_axis": (
        lambda: with_static(astjax.pmap(device_static, axis_name="d",
                                        in_axes=(0, None, None),
                                        static_broadcasted_argnums=1)),
        (PX, W), "unknown axis name 'q'", "pmax_q"),
    "pmap_more_than_the_devices": (
        lambda: astjax.pmap(body, axis_name="i", in_axes=(0, None)),
        (np.ones((6, 3)), W), "mapped axis has size 6 but there are 4 devices", "call"),
    "named_vmap_unknown_axis": (
        lambda: astjax.vmap(example_unknown, in_axes=(0, None), axis_name="b"),
        (PX, W), "unknown axis name 'c'", "named_c"),
}


def loss_of(f):
    def loss(x, w):
        return np.sum(f(x, w) ** 2)                       # <- TAG loss
    return loss


# name -> transformation of the function (each lambda on one line: its own line is
# where a transformation that runs the function itself calls it)
WRAPPERS = {
    "call": lambda f: f,                                                  # <- WRAP
    "jit": lambda f: astjax.jit(f),                                       # <- WRAP
    "grad": lambda f: astjax.grad(loss_of(f)),                            # <- WRAP
    "jit_grad": lambda f: astjax.jit(astjax.grad(loss_of(f))),            # <- WRAP
    "value_and_grad": lambda f: astjax.value_and_grad(loss_of(f), argnums=(0, 1)),  # <- WRAP
    "vjp": lambda f: lambda x, w: astjax.vjp(f, x, w)[1](f(x, w)),        # <- WRAP
    "jvp": lambda f: lambda x, w: astjax.jvp(f, (x, w), (x, w)),          # <- WRAP
    "vmap": lambda f: lambda x, w: astjax.vmap(f, in_axes=(0, None))(np.stack([x, x]), w),  # <- WRAP # noqa: E501
    "grad_of_vmap_inside": lambda f: astjax.grad(lambda x, w: np.sum(astjax.vmap(f, in_axes=(0, None))(np.stack([x, x]), w))),  # <- WRAP # noqa: E501
    "eval_shape": lambda f: lambda x, w: astjax.eval_shape(f, x, w),      # <- WRAP
}


def tagged():
    """TAG name -> line number, and the lines of the wrappers, in this file."""
    lines, start = inspect.getsourcelines(inspect.getmodule(tagged))
    tags, wraps = {}, set()
    for i, text in enumerate(lines, start or 1):   # (a module starts at 0)
        m = re.search(r"# <- TAG (\w+)", text)
        if m:
            tags[m.group(1)] = i
        if "# <- WRAP" in text:
            wraps.add(i)
    return tags, wraps


def run_case(fun, args):
    return fun(*args)                                     # <- TAG call


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
@pytest.mark.parametrize("error", sorted(ERRORS))
def test_error_names_the_users_line(error, wrapper):
    make, args, message, where = ERRORS[error]
    fun = WRAPPERS[wrapper](make())
    with pytest.raises(ShardingError, match=re.escape(message)) as info:
        run_case(fun, args)
    err = info.value
    tags, wraps = tagged()
    loc = err.location
    assert loc is not None and loc.filename == __file__, str(err)
    if where == "call":
        # the call: run_case's, a transformation's own call of the function, or the
        # line of the user's function that calls it
        allowed = {tags["call"], tags["loss"], tags["static_call"]} | wraps
    else:
        allowed = {tags[where]}
    assert loc.lineno in allowed, str(err)
    text = str(err)
    assert f'File "{__file__}", line {loc.lineno}' in text
    caret = text.splitlines()[text.splitlines().index(
        next(t for t in text.splitlines() if t.startswith("  File"))) + 2]
    assert caret.strip() and set(caret.strip()) == {"^"}, text
    if where != "call":            # the caret is under the collective's call
        assert "lax." in loc.source_line()[loc.col:loc.end_col], text
    assert err.hint, text


@pytest.mark.parametrize("spec", ["in_specs", "out_specs"])
def test_unknown_axis_in_specs_names_the_shard_map_line(spec):
    specs = {"in_specs": (P("i"), P()), "out_specs": P()}
    specs[spec] = (P("nope"), P()) if spec == "in_specs" else P("nope")
    with pytest.raises(ShardingError, match="unknown axis name 'nope'") as info:
        astjax.shard_map(body, mesh=mesh(), **specs)      # <- TAG define
    err = info.value
    assert err.location.filename == __file__
    assert err.location.lineno == tagged()[0]["define"] and err.hint


def test_pmap_in_axes_of_the_wrong_length_names_the_pmap_line():
    with pytest.raises(ShardingError, match="in_axes has 3 entries for 2") as info:
        astjax.pmap(body, axis_name="i", in_axes=(0, None, None))  # <- TAG pmap_line
    assert info.value.location.lineno == tagged()[0]["pmap_line"]


def test_vmap_refuses_specs_the_call_refuses():
    # a spec longer than the value's rank must not reach vmap's batch axis: the call
    # is an error, so vmap of it is one too (it used to split the batch over the
    # devices and return numbers)
    def scaled(x):
        return x * (1.0 + lax.axis_index("i"))
    xs = np.ones((4, 8, 3))
    for ins, outs in [(P(None, None, "i"), P(None, None, "i")), (P("i"), P("i", None, None))]:
        f = astjax.shard_map(scaled, mesh=mesh(), in_specs=ins, out_specs=outs)
        with pytest.raises(ShardingError, match="entries but the value has rank 2"):
            f(xs[0])
        for fun, arg in [(astjax.vmap(f), xs), (astjax.jit(astjax.vmap(f)), xs),
                         (astjax.vmap(astjax.vmap(f)), xs[None]),
                         (lambda v: astjax.eval_shape(astjax.vmap(f), v), xs)]:
            with pytest.raises(ShardingError, match="entries but the value has rank 2"):
                fun(arg)
