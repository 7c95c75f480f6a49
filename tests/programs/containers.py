"""Loops over containers, functions held in containers, dicts built at run time.

Each function here is a user program the frontend must desugar without dropping a
dependence on its inputs (issue 10, classes 6 and 10): the tests check every one
under grad, jvp, vmap and jit against finite differences, loops and eager NumPy.
"""
import functools

import numpy as np

from astjax import lax



def square(t):
    return t * t


def cube(t):
    return t * t * t


FUNCS = [np.sin, square, np.tanh]
PAIRS = ((np.sin, 2.0), (np.cos, 0.5))
NAMES = ("a", "b")


# ------------------------------------------------------------------ dict views, sorted


def items_loop(d):
    acc = 0.0
    for k, v in d.items():
        acc = acc + np.sum(v * v)
    return acc


def keys_loop(d):
    acc = 0.0
    for k in d.keys():
        acc = acc + np.sum(np.sin(d[k]))
    return acc


def values_loop(d):
    acc = 0.0
    for v in d.values():
        acc = acc * 0.5 + np.sum(v ** 3)
    return acc


def dict_iter(d):
    acc = 0.0
    for k in d:
        acc = acc * 0.5 + np.sum(np.tanh(d[k]))
    return acc


def sorted_items_enumerate(d):
    acc = 0.0
    for i, (k, v) in enumerate(sorted(d.items())):
        acc = acc + (i + 1) * np.sum(v * v)
    return acc


def sorted_items(d):
    acc = 0.0
    for k, v in sorted(d.items()):
        acc = acc * 0.5 + np.sum(np.tanh(v))
    return acc


def sorted_keys(d):
    acc = 0.0
    for i, k in enumerate(sorted(d.keys())):
        acc = acc + i * np.sum(d[k] ** 2)
    return acc


def sorted_dict(d):
    acc = 0.0
    for k in sorted(d, reverse=True):
        acc = acc * 0.5 + np.sum(np.sin(d[k]))
    return acc


def sorted_items_reverse(d):
    acc = 0.0
    for i, (k, v) in enumerate(sorted(d.items(), reverse=True)):
        acc = acc + (i + 1) * np.sum(np.exp(v))
    return acc


def sorted_items_key(d):
    acc = 0.0
    for i, (k, v) in enumerate(sorted(d.items(), key=lambda kv: kv[0])):
        acc = acc + (i + 2) * np.sum(np.sin(v))
    return acc


def sorted_by_value(xs):
    ordered = sorted(xs, key=lambda a: np.sum(a))
    acc = 0.0
    for i, a in enumerate(ordered):
        acc = acc + (i + 1) * np.sum(a * a)
    return acc


def sorted_scalars(x):
    vals = sorted([x[0], x[1] * 2.0, x[2] - 1.0])
    return vals[0] * 3.0 + vals[1] * vals[2]


def sorted_values_comprehension(d):
    parts = [np.sum(v) * (i + 1) for i, v in enumerate(sorted(d.values(), key=np.sum))]
    return sum(parts)


def zip_items_with_list(d, ws):
    acc = 0.0
    for (k, v), w in zip(sorted(d.items()), ws):
        acc = acc + np.sum(v * w)
    return acc


def reversed_sorted_items(d):
    acc = 0.0
    for k, v in reversed(sorted(d.items())):
        acc = acc * 0.5 + np.sum(v)
    return acc


def enumerate_zip(xs, ys):
    acc = 0.0
    for i, (a, b) in enumerate(zip(xs, ys)):
        acc = acc + (i + 1) * np.sum(a * np.sin(b))
    return acc


def zip_enumerate(xs, ys):
    acc = 0.0
    for (i, a), b in zip(enumerate(xs), ys):
        acc = acc + (i + 1) * np.sum(a * b)
    return acc


def enumerate_reversed(xs):
    acc = 0.0
    for i, a in enumerate(reversed(xs)):
        acc = acc * 0.5 + (i + 1) * np.sum(np.tanh(a))
    return acc


def nested_items_rows(d):
    acc = 0.0
    for k, v in sorted(d.items()):
        for j, row in enumerate(v):
            acc = acc + (j + 1) * np.sum(row * row)
    return acc


def enumerate_params(params, x):
    h = x
    for i, (W, b) in enumerate(params):
        h = np.tanh(h @ W + b) * (i + 1)
    return np.sum(h)


def dict_of_lists(d):
    acc = 0.0
    for k, layers in sorted(d.items()):
        for w in layers:
            acc = acc + np.sum(np.sin(w))
    return acc


def break_in_sorted(d):
    acc = 0.0
    for k, v in sorted(d.items()):
        if k == "c":
            break
        acc = acc + np.sum(v * v)
    return acc


def continue_in_enumerate(d):
    acc = 0.0
    for i, (k, v) in enumerate(d.items()):
        if i == 1:
            continue
        acc = acc + np.sum(np.cos(v))
    return acc


def list_of_items(d):
    pairs = list(d.items())
    acc = 0.0
    for k, v in pairs:
        acc = acc * 0.5 + np.sum(v)
    return acc + len(pairs)


def tuple_of_zip(xs, ys):
    pairs = tuple(zip(xs, ys))
    return sum(np.sum(a * b) for a, b in pairs)


def generator_over_values(d):
    return sum(np.sum(v * v) for v in d.values())


def comprehension_zip_sorted(d, ws):
    parts = [v * w for (k, v), w in zip(sorted(d.items()), ws)]
    return np.sum(np.concatenate(parts))


def enumerate_start_sorted(d):
    acc = 0.0
    for i, k in enumerate(sorted(d), 1):
        acc = acc + i * np.sum(d[k])
    return acc


def zip_three_reversed(xs, ys):
    acc = 0.0
    for a, b, c in zip(xs, reversed(ys), xs):
        acc = acc + np.sum(a * b * c)
    return acc


def items_of_nested_dict(params):
    acc = 0.0
    for name, layer in sorted(params.items()):
        acc = acc + np.sum(np.tanh(layer["w"]) * layer["b"])
    return acc


# ------------------------------------------------------------- functions in containers


def funcs_generator_sum(x):
    fs = [np.sin, np.cos, lambda t: t * t]
    return np.sum(sum(f(x) for f in fs))


def funcs_list_comprehension(x):
    fs = [np.sin, np.cos, square]
    return np.sum(np.stack([f(x) for f in fs]) * x)


def funcs_loop(x):
    fs = (np.sin, cube, lambda t: np.exp(t) * 0.5)
    acc = 0.0
    for f in fs:
        acc = acc + f(x)
    return np.sum(acc)


def funcs_constant_index(x):
    fs = [np.sin, np.cos, square]
    return np.sum(fs[1](x) + fs[-1](x) * fs[0](x))


def funcs_zip_params(x, ws):
    fs = [np.tanh, square, np.sin]
    acc = 0.0
    for f, w in zip(fs, ws):
        acc = acc + np.sum(f(x * w))
    return acc


def funcs_enumerate(x):
    fs = [np.sin, square]
    acc = 0.0
    for i, f in enumerate(fs):
        acc = acc + (i + 1) * f(x)
    return np.sum(acc)


def funcs_global(x):
    return np.sum(sum(f(x) for f in FUNCS))


def funcs_global_pairs(x):
    acc = 0.0
    for f, c in PAIRS:
        acc = acc + c * np.sum(f(x))
    return acc


def funcs_closures(x, a):
    def scaled(t):
        return a * t

    def shifted(t):
        return t + a

    fs = [scaled, shifted, lambda t: t * a * a]
    return np.sum(sum(f(x) for f in fs))


def funcs_range_index(x):
    fs = [np.sin, square, np.cos]
    acc = 0.0
    for i in range(len(fs)):
        acc = acc + (i + 1) * fs[i](x)
    return np.sum(acc)


def funcs_reversed(x):
    fs = [np.sin, square]
    acc = x
    for f in reversed(fs):
        acc = f(acc)
    return np.sum(acc)


def apply_all(fs, x):
    out = []
    for f in fs:
        out.append(f(x))
    return out


def funcs_passed_to_helper(x):
    ys = apply_all([np.tanh, cube], x)
    return np.sum(ys[0] * ys[1])


def funcs_break(x):
    fs = [np.sin, square, np.cos]
    acc = 0.0
    for f in fs:
        acc = acc + f(x)
        if np.sum(acc) > 100.0:
            break
    return np.sum(acc)


def funcs_composed(x):
    layers = [np.tanh, lambda t: t * 2.0, np.sin]
    h = x
    for layer in layers:
        h = layer(h)
    return np.sum(h)


def funcs_zip_two_static(x):
    fs = [np.sin, np.cos]
    cs = [2.0, 3.0]
    return np.sum(sum(c * f(x) for f, c in zip(fs, cs)))


def funcs_nested_comprehension(x):
    fs = [np.sin, square]
    gs = [np.tanh, cube]
    return np.sum(sum(f(g(x)) for f in fs for g in gs))


def funcs_dict(x):
    acts = {"sin": np.sin, "sq": square}
    return np.sum(acts["sin"](x) * acts["sq"](x))


# ----------------------------------------------------------------------- dict(...) forms


def dict_keywords(x, y):
    d = dict(a=x, b=y)
    return np.sum(d["a"] * np.sin(d["b"]))


def dict_zip_literal(x, y):
    d = dict(zip(["a", "b"], [x, y]))
    return np.sum(d["a"] * np.sin(d["b"]))


def dict_zip_global(x, y):
    d = dict(zip(NAMES, (x, y * 2.0)))
    return np.sum(d["a"] * d["b"])


def dict_comprehension(d):
    e = {k: v * v for k, v in d.items()}
    return np.sum(e["a"]) + np.sum(np.sin(e["b"]))


def dict_comprehension_zip(x, y):
    e = {k: np.tanh(v) for k, v in zip(NAMES, [x, y])}
    return np.sum(e["a"] * e["b"])


def dict_comprehension_if(d):
    e = {k: np.exp(v) for k, v in d.items() if k != "b"}
    return sum(np.sum(v) for v in e.values()) + len(e)


def dict_copy_update(d, z):
    e = dict(d, c=z)
    f = dict(e)
    return np.sum(f["a"] * f["c"]) + np.sum(e["b"])


def dict_of_pairs(x, y):
    d = dict([("a", x), ("b", y * y)])
    return np.sum(d["a"] + d["b"])


def dict_setitem_loop(xs):
    d = {}
    for i, x in enumerate(xs):
        d[i] = np.sin(x)
    return np.sum(d[0] * d[1])


# -------------------------------------------------------- generators given to builtins


def gen_sum_start(xs):
    return np.sum(sum((a * a for a in xs), np.zeros(3)))


def gen_max_min(xs):
    return max(np.sum(a) for a in xs) - 2.0 * min(np.sum(a * a) for a in xs)


def gen_any_all(xs):
    acc = 0.0
    if any(np.sum(a) > 100.0 for a in xs):
        acc = acc + 1.0
    if all(np.sum(a * a) >= 0.0 for a in xs):
        acc = acc + sum(np.sum(np.sin(a)) for a in xs)
    return acc


def stack_of_list(xs):
    return np.sum(np.stack([np.tanh(a) for a in xs]) ** 2)


def array_of_scalars(x):
    v = np.array([x[0] * x[1], np.sin(x[2]), 3.0])
    return np.sum(v * v)


def array_of_rows(x):
    m = np.array([[x[0], x[1]], [x[1] * x[2], 1.0]])
    return np.sum(m @ m)


def tuple_of_generator(xs):
    t = tuple(a * 2.0 for a in xs)
    return np.sum(t[0] * t[-1])


def list_of_generator(xs):
    t = list(np.sin(a) for a in xs)
    return np.sum(t[1]) * len(t)


def sorted_generator(xs):
    t = sorted(np.sum(a * a) for a in xs)
    return t[0] + 2.0 * t[-1]


# ------------------------------------------------- names bound to functions on paths


def bound_in_branches(x):
    if np.sum(x) > 0:
        f = np.sin
    else:
        f = square
    return np.sum(f(x))


def lambdas_in_branches(x):
    if np.sum(x) > 0.1:
        f = lambda t: t * 2.0
    else:
        f = lambda t: np.tanh(t) * 3.0
    return np.sum(f(x) * x)


def defs_in_branches(x):
    if np.sum(x) < 0.1:
        def f(t):
            return np.exp(t)
    else:
        def f(t):
            return t * t * t
    return np.sum(f(x))


def bound_in_one_branch(x):
    f = square
    if np.max(x) > 0.5:
        f = np.sin
    return np.sum(f(x))


def chosen_in_loop(x):
    y = x
    for i in range(3):
        f = np.sin if i < 1 else np.tanh
        y = f(y) * 1.5
    return np.sum(y)


def alias_and_unpack(x):
    f = np.sin
    g, h = square, f
    h, g = g, h
    return np.sum(f(x) + g(x) * h(x))


def conditional_function_call(x):
    return np.sum((np.sin if np.sum(x) > 0 else np.cos)(x))


# ----------------------------------------------------- map, filter, partial, getattr


def map_over_rows(x):
    return np.sum(np.stack(list(map(np.sin, x))))


def map_two_sequences(xs, ys):
    return sum(np.sum(v) for v in map(lambda a, b: a * np.tanh(b), xs, ys))


def filter_positive(xs):
    kept = list(filter(lambda a: np.sum(a) > 0, xs))
    return sum(np.sum(a * a) for a in kept) + len(kept)


def for_over_map(xs):
    acc = 0.0
    for i, v in enumerate(map(square, xs)):
        acc = acc + (i + 1) * np.sum(v)
    return acc


def partial_made_inside(x, y):
    times_x = functools.partial(np.multiply, x)
    return np.sum(times_x(y) * np.sin(x))


def partial_of_lambda(x, a):
    g = functools.partial(lambda t, s: np.tanh(t * s), s=a)
    return np.sum(g(x) + functools.partial(square)(x))


def getattr_of_module(x):
    f = getattr(np, "sin")
    return np.sum(f(x) * getattr(np, "cos")(x))


# --------------------------------------------------------- lax with function values


def lax_switch_on_list(x, i):
    from_list = [np.sin, square, lambda t: np.tanh(t) * 2.0]
    return np.sum(lax.switch(i, from_list, x))


def lax_cond_on_elements(x):
    fs = (np.sin, np.cos)
    return np.sum(lax.cond(np.sum(x) > 0, fs[0], fs[1], x))


def lax_fori_with_partial(x, a):
    body = functools.partial(lambda i, c, s: c * s + np.sin(c), s=a)
    return np.sum(lax.fori_loop(0, 3, body, x))


# ------------------------------------------------------------ dict and list methods


def dict_get(d):
    return np.sum(d.get("a") * d.get("z", 2.0) + np.sin(d.get("b", 0.0)))


def dict_update(d, x):
    e = {}
    e.update(d)
    e.update(c=x * x)
    return np.sum(e["a"] * e["c"] + e["b"])


def list_extend(xs, ys):
    zs = []
    zs.extend(xs)
    zs.extend(np.tanh(y) for y in ys)
    return sum(np.sum(z * z) * (i + 1) for i, z in enumerate(zs))


def items_as_value(d):
    pairs = d.items()
    acc = 0.0
    for k, v in pairs:
        acc = acc * 0.5 + np.sum(v * v)
    return acc + np.sum(list(d.values())[0])


def membership_in_dict(d):
    acc = np.sum(d["a"])
    if "b" in d:
        acc = acc + np.sum(d["b"] ** 2)
    if "z" not in d:
        acc = acc * 2.0
    return acc


def membership_in_array(x, v):
    if v in x:
        return np.sum(x * 2.0)
    return np.sum(np.sin(x))


def global_function_list_as_value(x):
    fs = FUNCS
    n = len(fs)
    return np.sum(fs[0](x)) * n + np.sum(x) * len(FUNCS)


def list_pop_insert(xs):
    ys = list(xs)
    last = ys.pop()
    ys.insert(1, last * 2.0)
    return sum(np.sum(y) * (i + 1) for i, y in enumerate(ys)) + len(ys)


def dict_pop_setdefault(d, x):
    e = dict(d)
    a = e.pop("a", 0.0)
    z = e.pop("z", x)
    b = e.setdefault("b", 1.0)
    c = e.setdefault("c", x * x)
    return np.sum(a * b + z * c) + len(e)


# ------------------------------------------------- sorting and reversing in place


def list_sort_in_place(x):
    ys = [x[0], x[1] * 2.0, x[2] - 1.0]
    ys.sort()
    return ys[0] * 3.0 + ys[2]


def list_sort_key_in_place(xs):
    ys = list(xs)
    ys.sort(key=lambda a: np.sum(a), reverse=True)
    return np.sum(ys[0] * 2.0 + ys[-1])


def array_sort_in_place(x):
    y = x * 1.5
    y.sort()
    return y[0] * 3.0 + y[-1]


def list_reverse_in_place(xs, w):
    ys = list(xs)
    ys.reverse()
    return np.sum(ys[0] * w)


def funcs_return_continue(x):
    fs = [np.sin, square, np.tanh, np.cos]
    acc = 0.0
    for i, f in enumerate(fs):
        if i == 1:
            continue
        acc = acc + f(x)
        if np.sum(acc) > 2.5:
            return np.sum(acc * x)
    return np.sum(acc)
