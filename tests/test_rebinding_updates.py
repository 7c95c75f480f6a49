"""``y op= v`` where a name the function cannot see holds the same array.

The augassign pass lowers ``y op= v`` to ``y = y op v``: a new array.  NumPy's ``op=``
on an array updates it in place, so the two differ exactly when another name holding
the array is read afterwards.  Inside one function a syntactic check refuses that
(``z = y; y += v``); what it cannot see is an alias made across an inlined call: a
helper's parameter and its caller's name (``scale(y, 2.0)`` with ``v *= c`` inside), a
helper that returns its argument or a view of it (``z = ident(y)``), a loop body's
carry and the initial value read afterwards.  Those used to give the rebinding's
answer silently (jit, grad, vmap all differing from NumPy); now the generated code
checks at run time whether such a name holds the array and raises an ``AliasError``
at the user's line (``rt.refuse_rebinding_update``, pruned by the aliasing analysis and
liveness where no name can), and every program without such a name still gives
NumPy's answer.
"""
import numpy as np
import pytest

import astjax
from astjax import lax
from astjax.transforms.aliasing import AliasError

# every augmented operator on floats (those NumPy allows in place on float arrays), and
# the integer-only ones on ints
FLOAT_OPS = ["+", "-", "*", "/", "**", "%", "//"]
INT_OPS = ["&", "|", "^", "<<", ">>"]


def _make(src, name):
    """``name`` from program text registered in linecache, as a notebook cell is."""
    import linecache
    filename = f"<astjax-rebinding-{len(linecache.cache)}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    env = {"np": np, "lax": lax}
    exec(compile(src, filename, "exec"), env)
    return env[name]


# ------------------------------------------------------------ programs that are refused

def _helper_param(op):
    """A helper updating its parameter, the caller reading its own name afterwards."""
    return _make(f"""
def update(v):
    v {op}= 1.5
    return np.sum(v)


def f(x):
    y = x * 1.0 + 2.0
    s = update(y)
    return s + np.sum(y * x)
""", "f")


def _returned_argument(op):
    """A helper returning its argument: ``z`` and ``y`` are one array."""
    return _make(f"""
def ident(a):
    return a


def f(x):
    y = x * 1.0 + 2.0
    z = ident(y)
    y {op}= 1.5
    return np.sum(z * x)
""", "f")


def _returned_view(op):
    """A helper returning a view (``a.T``) of its argument."""
    return _make(f"""
def transposed(a):
    return a.T


def f(x):
    y = np.outer(x, x) + 2.0
    z = transposed(y)
    y {op}= 1.5
    return np.sum(z * y)
""", "f")


def _nested_def(op):
    """A nested def (a closure) updating the array it is given."""
    return _make(f"""
def f(x):
    def bump(v):
        v {op}= 1.5
    y = x * 1.0 + 2.0
    bump(y)
    return np.sum(y * x)
""", "f")


def _loop_carry(op):
    """A fori_loop body updating its carry while the initial value is read afterwards:
    NumPy runs the body on the caller's array itself."""
    return _make(f"""
def body(i, c):
    c {op}= 1.5
    return c


def f(x):
    y = x * 1.0 + 2.0
    out = lax.fori_loop(0, 2, body, y)
    return np.sum(out * y)
""", "f")


def _name(program):
    return {"_helper_param": "v", "_returned_argument": "y", "_returned_view": "y",
            "_nested_def": "v", "_loop_carry": "c"}[program.__name__]


REFUSED = [_helper_param, _returned_argument, _returned_view, _nested_def, _loop_carry]
FORMS = {
    "jit": lambda f: astjax.jit(f),
    "grad": lambda f: astjax.grad(f),
    "value_and_grad": lambda f: astjax.value_and_grad(f),
    "jvp": lambda f: (lambda x: astjax.jvp(f, (x,), (np.ones_like(x),))),
    "vjp": lambda f: (lambda x: astjax.vjp(f, x)[1](1.0)),
    "vmap": lambda f: (lambda x: astjax.vmap(f)(np.stack([x, x + 1.0]))),
    "jit(grad)": lambda f: astjax.jit(astjax.grad(f)),
    "grad(jit)": lambda f: astjax.grad(astjax.jit(f)),
    "vmap(grad)": lambda f: (lambda x: astjax.vmap(astjax.grad(f))(np.stack([x, x + 1.0]))),
}


@pytest.mark.parametrize("op", FLOAT_OPS)
@pytest.mark.parametrize("program", REFUSED, ids=lambda p: p.__name__.strip("_"))
@pytest.mark.parametrize("form", list(FORMS))
def test_shared_array_updated_in_place_is_refused(program, op, form):
    f = program(op)
    x = np.array([0.5, 1.25, 2.0])
    with pytest.raises(AliasError) as info:
        FORMS[form](f)(x)
    # at the user's ``op=`` line, saying which name shares the array and how to choose
    err = info.value
    line = err.location.source_line().strip()
    assert line == f"{_name(program)} {op}= 1.5"
    assert "read afterwards" in err.message and "[...]" in err.hint


@pytest.mark.parametrize("op", INT_OPS)
@pytest.mark.parametrize("form", ["jit", "vmap"])
def test_integer_operators_refused(op, form):
    f = _make(f"""
def update(v, c):
    v {op}= c


def f(x):
    y = x + 0
    update(y, 1)
    return y
""", "f")
    x = np.array([3, 4, 9])
    with pytest.raises(AliasError):
        FORMS[form](f)(x)


def test_list_extended_through_a_helper_is_refused():
    f = _make("""
def add(items, v):
    items += [v]


def f(x):
    ys = [x]
    add(ys, x * 2.0)
    return sum(np.sum(y) for y in ys)
""", "f")
    assert np.isclose(f(np.ones(3)), 9.0)   # NumPy: the caller's list grew
    with pytest.raises(AliasError):
        astjax.jit(f)(np.ones(3))
    with pytest.raises(AliasError):
        astjax.grad(f)(np.ones(3))


# ------------------------------------------------------ programs that keep their answer

ACCEPTED = {
    # the caller rebinds its name to the helper's result: no one reads the old array
    "result_rebinds": """
def step(w, d):
    w -= 0.1 * d
    return w


def f(x):
    w = x * 2.0
    w = step(w, x)
    return np.sum(w ** 2)
""",
    # numbers are never updated in place
    "numbers": """
def acc(t, d):
    t += d
    return t


def f(x):
    t = 0.0
    t = acc(t, np.sum(x))
    u = acc(t, 1.0)
    return t * u
""",
    # the helper made a new array before updating it
    "rebound_first": """
def scaled(v, c):
    v = v * 1.0
    v *= c
    return v


def f(x):
    y = x + 1.0
    z = scaled(y, 3.0)
    return np.sum(z * y)
""",
    # a copy is passed
    "copy_passed": """
def update(v, c):
    v *= c
    return np.sum(v)


def f(x):
    y = x + 1.0
    s = update(y.copy(), 3.0)
    return s * np.sum(y)
""",
    # the caller's name is not read after the update
    "not_read_after": """
def update(v, c):
    v *= c
    return np.sum(v ** 2)


def f(x):
    y = x + 1.0
    return update(y, 3.0)
""",
    # an accumulator made here, updated in a loop
    "loop_accumulator": """
def f(x):
    acc = np.zeros_like(x)
    for i in range(3):
        acc += x * i
    total = 0.0
    for v in x:
        total += v ** 2
    return np.sum(acc) + total
""",
    # a fori_loop whose initial value is not read afterwards
    "loop_carry_dead": """
def body(i, c):
    c *= 1.5
    return c


def f(x):
    y = x + 2.0
    return np.sum(lax.fori_loop(0, 2, body, y) ** 2)
""",
    # the in-place spelling: every transformation follows NumPy's update
    "explicit_in_place": """
def update(v, c):
    v[...] *= c


def f(x):
    y = x + 2.0
    update(y, 1.5)
    return np.sum(y * x)
""",
}


@pytest.mark.parametrize("name", list(ACCEPTED))
def test_unshared_updates_give_numpys_answer(name):
    f = _make(ACCEPTED[name], "f")
    x = np.array([0.5, 1.25, 2.0])
    expected = f(x.copy())
    np.testing.assert_allclose(astjax.jit(f)(x), expected, rtol=1e-12)
    batch = np.stack([x, x + 1.0])
    np.testing.assert_allclose(astjax.vmap(f)(batch),
                               [f(batch[0].copy()), f(batch[1].copy())], rtol=1e-12)
    g = astjax.grad(f)(x)
    eps = 1e-6
    fd = [(f(x + eps * e) - f(x - eps * e)) / (2 * eps) for e in np.eye(3)]
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(astjax.jit(astjax.grad(f))(x), g, rtol=1e-12)


def test_check_is_pruned_where_no_name_can_share():
    """The generated code of a plain accumulator carries no run-time check."""
    f = _make(ACCEPTED["loop_accumulator"], "f")
    source = astjax.make_source(astjax.jit(f))(np.ones(3))
    assert "refuse_rebinding_update" not in source
    g = _make(ACCEPTED["rebound_first"], "f")
    assert "refuse_rebinding_update" not in astjax.make_source(astjax.jit(g))(np.ones(3))
