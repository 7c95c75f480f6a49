"""Same-shape vjp rules: ``templates/vjp.py``'s elementwise rules without ``unbroadcast``.

Reverse mode uses them in the fast adjoint of a loop body (``transforms/fast_trips.py``)
only where the forward trip checked that the operand has the shape and dtype of the
result, so ``ra.unbroadcast`` / ``ra.add_cot`` would return the cotangent unchanged:
the arithmetic is exactly the general rule's, and a chain of them fuses into kernels.
"""
import numpy as np  # noqa: F401  (templates are parsed with NumPy in scope)


def add(g, ans, x, y, out=None):
    return g, g


def subtract(g, ans, x, y, out=None):
    return g, -g


def multiply(g, ans, x, y, out=None):
    return g * y, g * x


def divide(g, ans, x, y, out=None):
    return g / y, -g * ans / y
