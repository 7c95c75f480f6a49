"""Functions called from programs in other modules."""
import numpy as np


def softplus(x):
    return np.log1p(np.exp(x))


def square_sum(x):
    return np.sum(x * x)


def scaled(x, scale=1.0):
    return np.tanh(x) * scale
