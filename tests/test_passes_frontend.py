"""The desugaring passes of astjax/frontend/passes: their doctests, the pass manager,
and the programs they rewrite, checked against eager NumPy under every transformation
(jit vs NumPy, grad vs central differences in float64, vmap vs a Python loop)."""
from __future__ import annotations

import doctest
import importlib
import inspect

import gast
import numpy as np
import pytest

import astjax
from astjax import errors
from astjax.frontend import passes
from astjax.frontend.source import get_function_source

MODULES = ["astjax.frontend.passes", "astjax.frontend.passes.augassign",
           "astjax.frontend.passes.boolops", "astjax.frontend.passes.ternary",
           "astjax.frontend.passes.loop_else", "astjax.frontend.passes.returns",
           "astjax.transform_table"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    if name != "astjax.frontend.passes":
        assert result.attempted >= 2      # each pass shows its input and output


def test_every_pass_is_in_the_pipeline_and_documented():
    passes.run(get_function_source(early_in_loop).node)      # fills the pipeline
    names = [p.NAME for p in passes.PIPELINE]
    assert names == ["augassign", "boolops", "ternary", "loop_else", "returns"]
    for p in passes.PIPELINE:
        assert p.__doc__ and ">>> " in p.__doc__, p.__name__


# ------------------------------------------------------------------ programs

def early_in_loop(x, n):
    acc = 0.0 * x
    for i in range(n):
        acc = acc + np.sin(x) * (i + 1)
        if i == 2:
            return acc * x
    return acc


def early_nested(x, n):
    total = 0.0 * x
    for i in range(n):
        for j in range(3):
            total = total + x * j
            if i + j == 3:
                return total - x
        total = total * 0.5
    return total


def early_in_branch(x, flag):
    if flag > 0:
        y = x * x
        return np.tanh(y)
    elif flag < 0:
        return -x * 2.0
    z = np.exp(x)
    return z + 1.0


def early_while(x, n):
    k = 0
    y = x
    while k < n:
        y = y * 0.9 + np.cos(y)
        k += 1
        if k >= 3:
            return y
    return y * 2.0


def early_bare(x):
    out = [x]
    if x.shape[0] > 1:
        out.append(x * 3.0)
        return out[-1]
    return out[0]


def aug_names(x, p):
    y = x * 0.5 + p
    a = x * 1.0
    a += y
    a *= x
    a -= 0.5
    a /= 1.5
    a **= 2
    b = 0.0
    b += np.sum(a)
    return b * x


def aug_subscripts(x, i):
    y = x * 2.0
    y[0] += 5.0 * x[1]
    y[1:3] *= x[:2]
    y[i + 1] -= y[i]
    y[-1] /= 3.0
    return y


def aug_index_once(x, i):
    y = np.zeros_like(x)
    order = [2, 0, 1]
    y[order[i]] += x[0]
    y[order[i] - 1] += x[1]
    return y * x


def aug_matrix(x, p):
    m = np.outer(x, x)
    m[:, 0] += x
    m[1, :] *= p
    m[..., -1] -= x[0]
    return m[0] + m[1] * m[2]


def aug_list(x, p):
    parts = [x]
    parts += [x * p]
    parts = parts + [np.sin(x)]
    return parts[0] + parts[1] * parts[2]


def aug_in_place_spelled(x, p):
    y = x * p
    z = y
    y[...] += 1.0
    return z * x


def bool_values(x, p):
    a = p - 1.0
    b = p * 0.0 + 2.0
    lo = a and b
    hi = a or b
    pick = (a > 0 and b) or a
    return x * lo + x * hi + pick * x


def ternary_values(x, n):
    y = x if n > 0 else (-x if n < 0 else 0.5 * x)
    w = np.sin(x) if n > 1 else np.cos(x)
    s = 2.0 if n else 3.0
    return y * w * s


def ternary_functions(x, n):
    act = np.sin if n > 0 else np.tanh
    return act(x) * x


def nested_def(x, p):
    def inner(v):
        if v.shape[0] > 10:
            return v
        v = v * p
        v += 1.0
        return v * v
    out = inner(x)
    out += x
    return out


def early_bare_p(x, p):
    return early_bare(x * p)


def search_for_else(x, p):
    """The first entry over p, else all of x doubled (a break in a nested loop and in
    a branch; the else of an inner loop, whose break ends the outer one)."""
    y = x * 1.0
    for i in range(3):
        for j in range(2):
            if j > 5:
                break
        if x[i] > p:
            y = y * x[i]
            break
    else:
        y = y * 2.0
    k = 0
    while k < 3:
        k = k + 1
        for j in range(2):
            if x[j] > 10 * p:
                break
        else:
            y = y + x[k - 1]
            if k > 1:
                break
    else:
        y = y * 3.0
    return y


def early_return_in_for_else(x, p):
    for i in range(3):
        if x[i] > p:
            return x * x[i]
    else:
        x = x * 0.5
    return x + p


PROGRAMS = [
    (early_in_loop, 5), (early_in_loop, 2), (early_nested, 4), (early_nested, 1),
    (early_in_branch, 1), (early_in_branch, -1), (early_in_branch, 0), (early_while, 5),
    (early_while, 2), (early_bare_p, 2.0), (aug_names, 0.25), (aug_subscripts, 1),
    (aug_index_once, 1), (aug_matrix, 2.0), (aug_list, 2.0), (aug_in_place_spelled, 1.0),
    (bool_values, 1.0), (bool_values, 3.0), (bool_values, 0.5), (ternary_values, 2),
    (ternary_values, -1), (ternary_values, 0), (ternary_functions, 1),
    (ternary_functions, 0), (nested_def, 2.0), (search_for_else, 0.5),
    (search_for_else, 2.0), (early_return_in_for_else, 0.5),
    (early_return_in_for_else, 2.0),
]

WEIGHTS = np.array([1.0, 2.0, -1.5])


def _ids(case):
    fun, p = case
    return f"{fun.__name__}-{p}"


def _x():
    return np.array([0.3, -0.7, 1.1])


def weighted(fun):
    """A scalar loss of ``fun`` (defined in this file: astjax reads its source)."""
    def loss(x, p):
        return np.sum(fun(x, p) * WEIGHTS)
    return loss


@pytest.mark.parametrize("case", PROGRAMS, ids=_ids)
def test_jit_matches_numpy(case):
    fun, p = case
    x = _x()
    want = fun(x.copy(), p)
    got = astjax.jit(fun)(x.copy(), p)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12, atol=1e-12)


def _fd(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


@pytest.mark.parametrize("case", PROGRAMS, ids=_ids)
def test_grad_matches_finite_differences(case):
    fun, p = case
    x = _x()
    loss = weighted(fun)
    got = astjax.grad(loss)(x, p)
    np.testing.assert_allclose(got, _fd(lambda v: loss(v, p), x), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("case", [c for c in PROGRAMS if c[0] not in (
    early_bare_p, aug_list, ternary_functions)], ids=_ids)
def test_vmap_matches_a_loop(case):
    fun, p = case
    xs = np.array([[0.3, -0.7, 1.1], [0.9, 0.2, -0.4], [-1.2, 0.5, 0.8]])
    mapped = astjax.vmap(fun, in_axes=(0, None))(xs, p)
    loop = np.stack([np.asarray(fun(v.copy(), p)) for v in xs])
    np.testing.assert_allclose(np.asarray(mapped), loop, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------- aliased updates

def alias_copy(x):
    y = x * 1.0
    z = y
    y += 1.0
    return z * x


def alias_view(x):
    y = x * 1.0
    row = y[1:]
    y *= 2.0
    return row * x[1:]


def alias_of_other(x):
    y = x * 1.0
    z = y.T
    z -= 1.0
    return y


def alias_container(x):
    y = x * 1.0
    pair = [y, x]
    y += 1.0
    return pair[0]


def alias_append(x):
    y = x * 1.0
    keep = []
    keep.append(y)
    y += 1.0
    return keep[0]


def alias_loop(x):
    y = x * 1.0
    rows = []
    for k in range(2):
        y += 1.0
        rows.append(y)
    return rows[0]


def alias_iteration(x):
    m = np.outer(x, x)
    for row in m:
        row += 1.0
    return m


ALIASED = [alias_copy, alias_view, alias_of_other, alias_container, alias_append,
           alias_loop, alias_iteration]


@pytest.mark.parametrize("fun", ALIASED, ids=lambda f: f.__name__)
@pytest.mark.parametrize("transform", ["jit", "grad", "vmap"])
def test_an_aliased_rebinding_is_refused_at_its_line(fun, transform):
    """``y += v`` where NumPy would update memory another name shares: never the
    rebinding's different numbers, a located error that names both spellings."""
    x = _x()
    t = {"jit": astjax.jit, "vmap": astjax.vmap,
         "grad": lambda f: astjax.grad(lambda v: np.sum(f(v)))}[transform]
    with pytest.raises(errors.AstjaxError) as info:
        t(fun)(x if transform != "vmap" else np.stack([x, x]))
    err = info.value
    src = inspect.getsource(fun).splitlines()
    line = next(k for k, text in enumerate(src) if "= 1.0" in text or "*= 2.0" in text
                or "-= 1.0" in text)
    assert err.location is not None
    assert err.location.lineno == fun.__code__.co_firstlineno + line
    assert "in place" in str(err) and "[...]" in str(err)


def test_the_in_place_spelling_keeps_numpy_semantics():
    x = _x()
    want = aug_in_place_spelled(x.copy(), 1.0)
    assert not np.allclose(want, x * x)           # z sees the update, as in NumPy
    np.testing.assert_allclose(astjax.jit(aug_in_place_spelled)(x.copy(), 1.0), want)


def no_alias_after_rebinding(x):
    y = x * 1.0
    y = np.sin(y)
    z = y * 2.0
    y += z
    return y


def test_unaliased_updates_are_not_refused():
    x = _x()
    np.testing.assert_allclose(astjax.jit(no_alias_after_rebinding)(x),
                               no_alias_after_rebinding(x))


# ------------------------------------------------------------ the pass manager

def test_the_manager_records_what_ran_and_leaves_its_input_alone():
    node = get_function_source(early_in_loop).node
    assert passes.applied(node) == ("returns",)
    raw = gast.parse(inspect.getsource(aug_names)).body[0]
    before = gast.dump(raw)
    out = passes.run(raw, "f.py")
    assert gast.dump(raw) == before and out is not raw
    assert passes.applied(out) == ("augassign",)
    assert passes.applied(get_function_source(ternary_values).node) == ("ternary",)
    assert passes.applied(get_function_source(bool_values).node) == ("boolops",)
    assert passes.applied(passes.run(gast.parse("def f(x):\n    return x\n").body[0])) == ()


@pytest.mark.parametrize("fun", [early_nested, early_while, aug_subscripts, aug_index_once,
                                 bool_values, ternary_values, nested_def],
                         ids=lambda f: f.__name__)
def test_new_nodes_keep_the_users_lines(fun):
    node = get_function_source(fun).node
    first = fun.__code__.co_firstlineno
    last = first + len(inspect.getsource(fun).splitlines()) - 1
    for n in gast.walk(node):
        if isinstance(n, (gast.stmt, gast.expr)):
            assert n.lineno is not None and first <= n.lineno <= last, gast.dump(n)
            assert n.col_offset is not None


def test_generated_code_points_at_the_users_lines():
    x = _x()
    text = astjax.make_source(astjax.grad(weighted(early_in_loop)), simplify=False)(x, 5)
    here = inspect.getsourcefile(early_in_loop).rsplit("/", 1)[-1]
    first = early_in_loop.__code__.co_firstlineno
    for k, line in enumerate(inspect.getsource(early_in_loop).splitlines()[1:], start=1):
        if line.strip():
            assert f"{here}:{first + k}" in text, line


def refused_after_return(x, n):
    if n > 0:
        return x
    with open("f") as fh:
        fh.read()
    return x


def test_an_error_inside_lowered_code_points_at_the_users_line():
    with pytest.raises(errors.AstjaxError) as info:
        astjax.jit(refused_after_return)(_x(), 0)
    assert info.value.location.lineno == refused_after_return.__code__.co_firstlineno + 3
