"""Functions of every shape get_function_source must find (tests/test_source.py).

Lines carrying a ``# @name`` marker are looked up by the tests, so positions are
checked against the file itself rather than against hard-coded numbers.
"""
import functools

import numpy as np

SCALE = 3.0


def module_fn(x, y=2.0, *, z=1.0):  # @module_fn
    t = np.sin(x) * y  # @module_fn.body
    return t + z


def outer(a):
    b = np.ones(3)

    def inner(x):  # @inner
        return x * a + b  # @inner.body

    return inner


def counter():
    n = 0

    def bump(step=1):
        nonlocal n
        n += step
        return n

    return bump


def never_assigned():
    def uses_late(x):
        return x + late

    fn = uses_late
    if False:
        late = 1
    return fn


def deco(fn):
    return fn


def tagging(tag):
    def apply(fn):
        fn.tag = tag
        return fn

    return apply


@deco
@tagging(
    "multi-line decorator"
)
def decorated(x):  # @decorated
    return x * SCALE  # @decorated.body


def logged(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper


@logged
def wrapped(x):  # @wrapped
    return x - 1


class Model:
    offset = 0.5
    key = lambda self, v: v + self.__hidden  # @Model.key

    def __init__(self, w):
        self.w = w
        self.__hidden = 1.0

    def predict(self, x):  # @Model.predict
        return np.tanh(self.w * x) + self.__hidden  # @Model.predict.body

    def uses_super(self):
        return super().__repr__()

    def nested_in_method(self, x):
        def helper(y):
            return y * self.__hidden + len(__class__.__name__)

        return helper(x)

    @staticmethod
    def static(x, k=4):
        return x * k

    @classmethod
    def klass(cls, x):
        return cls.offset + x

    def __call__(self, x):
        return self.predict(x)


def make_model_class():
    c = 2.0

    class Local:
        def method(self, x):
            return x * c

    return Local


f_double, f_inc = lambda x: x * 2, lambda x: x + 1  # @two_lambdas
same_a, same_b = lambda x: x, lambda x: x  # @same_lambdas
curried = lambda a: lambda b: a + b  # @curried
constant = lambda: 0
star_lambda = lambda x, *rest, k=1, **kw: x + k


def keep(*fns, **kw):
    return fns + tuple(kw.values())


nested_calls = keep(max(1, 2), keep(lambda v: -v, key=lambda w: w * 3))  # @nested_calls
spread_args = keep(
    lambda a,
    b: a + b,  # @spread_args
)


in_call_lambda = functools.partial(  # @spread
    max,
    key=lambda item: (
        item[0]
        * 2  # @spread.body
    ),
)

pair = (lambda p: p * 10,
        lambda q: q / 10)  # @second_of_pair


def gen(n):
    for i in range(n):
        yield i * 2


async def coro(x):
    return x


def many_constructs(x, items):
    total = 0
    for i, v in enumerate(items):
        if (w := v * 2) > 3:
            total += w
        elif i:
            continue
        else:
            break
    squares = [v * v for v in items if v]
    table = {k: v for k, v in zip("ab", items)}
    try:
        total /= len(items)
    except ZeroDivisionError:
        total = -1.0
    finally:
        pass
    match x:
        case 0:
            label = "zero"
        case [a, *_]:
            label = f"seq {a!r:>4}"
        case _:
            label = "other"
    global SCALE
    return total, squares, table, label, 1, 1.0, True, -0.0, (1, (2, 3)), x in {1, 2}


def unicode_fn(x):
    s = "héllo"
    return s + "é" + str(x)  # @unicode
