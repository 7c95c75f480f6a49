"""Container and function-value programs astjax must refuse with a located error.

Each offending line ends with a ``# @name`` marker the tests look up.
"""
import numpy as np


def square(t):
    return t * t


def loop_rebinds_called_function(x):
    f = np.sin
    y = x
    for i in range(3):
        y = f(y)  # @rebound
        f = np.cos
    return np.sum(y)


def function_or_value(x, c):
    f = np.sin
    if c > 0:
        f = 2.0
    return np.sum(f(x))  # @mixed


def list_of_functions_as_value(x):
    fs = [np.sin, square]
    return np.sum(x) + len(str(fs))  # @as_value


def list_of_functions_called(x):
    fs = [np.sin, square]
    return np.sum(fs(x))  # @called


def index_out_of_range(x):
    fs = [np.sin, square]
    return np.sum(fs[2](x))  # @out_of_range


def missing_key(x):
    acts = {"sin": np.sin, "sq": square}
    return np.sum(acts["cos"](x))  # @missing_key


def run_time_index_of_mixed(x, i):
    pairs = [np.sin, 2.0]
    return np.sum(pairs[i](x))  # @mixed_index


def sorted_bad_keyword(xs):
    return np.sum(sorted(xs, cmp=None)[0])  # @sorted_keyword


def dict_double_star(d):
    e = dict(**d)  # @double_star
    return np.sum(e["a"])


def zip_as_value(xs, ys):
    z = zip(xs, ys)  # @zip_value
    return sum(np.sum(a * b) for a, b in z)


def map_of_run_time_value(xs):
    fs = []
    fs.append(np.sin)
    return np.sum(np.stack(list(map(fs[0], xs))))  # @map_value


def unpack_mismatch(xs, ys):
    acc = 0.0
    for a, b, c in zip(xs, ys):  # @unpack
        acc = acc + np.sum(a * b * c)
    return acc


def functions_appended_at_run_time(x):
    fs = []
    fs.append(np.sin)
    fs.append(square)
    return np.sum(sum(f(x) for f in fs))  # @appended


def function_from_data(x, table):
    g = table[0]
    return np.sum(g(x))  # @from_data


def list_clear(xs):
    ys = list(xs)
    ys.clear()  # @clear
    return len(ys) + np.sum(xs[0])


def array_fill(x):
    y = x * 2.0
    y.fill(1.0)  # @fill
    return np.sum(y * x)


def numpy_shuffle(x):
    y = x * 2.0
    np.random.shuffle(y)  # @shuffle
    return np.sum(y * x)


def numpy_copyto(x):
    y = np.zeros(3)
    np.copyto(y, x)  # @copyto
    return np.sum(y * x)
