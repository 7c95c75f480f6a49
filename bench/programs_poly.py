"""The poly benchmark's function, in a module of its own (astjax reads its source)."""


def poly(x):
    return x + x * x + x * x * x
