"""Augmented assignment to an item of a list or dict: ``c[k] op= v``.

The augassign pass lowers it to ``c[k] = c[k] op v``, which stores a new value in
the container.  Python runs ``c[k].__iop__(v)`` instead: for an array item NumPy
updates that array in place, so every other name holding it sees the change
(``w = params["w"]; params["w"] -= g`` changes ``w``).  The two differ exactly when
another name shares the item and is read afterwards; astjax used to give the
rebinding's numbers there (jit's value and every derivative).  Now such an update is
refused at run time with an ``AliasError`` at the user's line when the item is an
array; numbers, items nobody else holds, and updates of an array's own entries keep
working.
"""
import numpy as np
import pytest

import astjax
from astjax.transforms.aliasing import AliasError
from conftest import fd_vector_grad

X = np.array([1.0, 2.0, 3.0])


# -------------------------------------------------- another name shares the item

def dict_item_then_alias_read(x):
    params = {"w": x * 1.0}
    w = params["w"]
    params["w"] -= 0.5 * x
    return np.sum(w * x)


def list_display_holds_name(x):
    y = x * 1.0
    lst = [y]
    lst[0] += x
    return np.sum(y * x)


def comprehension_of_items(x):
    ws = [x * 1.0, x * 2.0]
    old = [w for w in ws]
    ws[1] -= 0.1 * x
    return np.sum(old[1] * x) + np.sum(ws[0])


def dict_call_holds_name(x):
    y = x * 2.0
    d = dict(a=y)
    d["a"] *= 3.0
    return np.sum(y)


def shallow_copy_of_list(x):
    ws = [x * 1.0, x * 2.0]
    snapshot = list(ws)
    ws[0] += x
    return np.sum(snapshot[0] * x)


def item_read_in_loop(x):
    params = {"w": x * 1.0}
    w = params["w"]
    total = 0.0
    for _ in range(2):
        total = total + np.sum(w * x)
        params["w"] -= 0.25 * x
    return total


SHARED = [dict_item_then_alias_read, list_display_holds_name, comprehension_of_items,
          dict_call_holds_name, shallow_copy_of_list, item_read_in_loop]

TRANSFORMS = {
    "jit": lambda f: astjax.jit(f)(X),
    "grad": lambda f: astjax.grad(f)(X),
    "jvp": lambda f: astjax.jvp(f, (X,), (np.ones(3),)),
    "vmap": lambda f: astjax.vmap(f)(np.stack([X, X])),
    "jit(grad)": lambda f: astjax.jit(astjax.grad(f))(X),
}


@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
@pytest.mark.parametrize("f", SHARED, ids=[f.__name__ for f in SHARED])
def test_shared_array_item_update_is_refused(f, transform):
    with pytest.raises(AliasError, match="shares") as info:
        TRANSFORMS[transform](f)
    message = str(info.value)
    assert "test_item_updates.py" in message and "hint:" in message
    assert "=" in message.splitlines()[2]           # the user's line, with its update


# ------------------------------------------------------------ what keeps working

def sgd_step(x):
    params = {"w": x * 1.0, "b": x[0] * 1.0}
    w = params["w"]                     # read before the update only
    loss = np.sum(w * w)
    params["w"] -= 0.1 * x
    params["b"] += 1.0                  # a number: rebinding is Python's meaning too
    return loss + np.sum(params["w"] * x) + params["b"]


def number_items(x):
    vals = [1.0, 2.0]
    first = vals[0]
    vals[0] += x[0]
    return vals[0] * first + x[1]


def unshared_list(x):
    ws = [x * 1.0, x * 2.0]
    for i in range(2):
        ws[i] *= x
    return np.sum(ws[0] + ws[1])


def array_entries(x):
    y = x * 1.0
    z = y                                # an array's own entries: updated in place
    y[0] += 5.0
    return np.sum(z * x)


def fetched_each_step(x):
    params = {"w": x * 1.0}
    total = 0.0
    for _ in range(2):
        w = params.get("w")               # rebound before it is read again
        total = total + np.sum(w * x)
        params["w"] -= 0.25 * x
    return total


def sgd_over_keys(x):
    params = {"a": x * 1.0, "b": x * 2.0}
    grads = {"a": np.cos(x), "b": x * x}
    for k in params:                      # the keys: strings, not the arrays
        params[k] -= 0.1 * grads[k]
    return np.sum(params["a"] * params["b"])


KEEP = [sgd_step, number_items, unshared_list, array_entries, fetched_each_step,
        sgd_over_keys]


@pytest.mark.parametrize("f", KEEP, ids=[f.__name__ for f in KEEP])
def test_unshared_updates_keep_numpy_meaning(f):
    np.testing.assert_allclose(astjax.jit(f)(X), f(X.copy()), rtol=1e-12)
    want = fd_vector_grad(f, X)
    np.testing.assert_allclose(astjax.grad(f)(X), want, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(astjax.vmap(astjax.grad(f))(np.stack([X, 2 * X])),
                               [want, fd_vector_grad(f, 2 * X)], rtol=1e-6, atol=1e-8)
