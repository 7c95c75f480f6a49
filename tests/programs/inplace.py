"""In-place updates under grad (no .at[].set needed)."""
import numpy as np


def set_item(x):
    y = x * 1.0
    y[0] = x[1] * x[2]
    y[2] = np.sin(y[0])
    return np.sum(y * y)


def set_row(A, v):
    B = A * 2.0
    B[1] = np.tanh(v)
    B[:, 0] = v[:3] * 3.0
    return np.sum(B * B * A)


def slice_add(x):
    y = x * 2.0
    y[1:] += np.sin(x[:-1])
    y[:2] *= x[-2:]
    return np.sum(y * y)


def int_array_set(x, v):
    idx = np.array([0, 2])
    y = x * 1.0
    y[idx] = v * v
    return np.sum(np.sin(y) * x)


def mask_set(x):
    y = x * 1.0
    y[y < 0] = 0.0
    return np.sum(y * y * 0.5 + y)


def mask_set_values(x, v):
    y = np.zeros_like(x)
    mask = x > 0
    y[mask] = v[mask] * x[mask]
    return np.sum(y * y)


def fill_in_loop(x):
    y = np.zeros_like(x)
    y[0] = x[0]
    for i in range(1, len(x)):
        y[i] = y[i - 1] * 0.9 + np.sin(x[i])
    return np.sum(y * y)


def update_in_loop_2d(A):
    B = A * 1.0
    for i in range(B.shape[0]):
        for j in range(B.shape[1]):
            if j > 0:
                B[i, j] += B[i, j - 1] * 0.5
    return np.sum(np.tanh(B))


def overwrite_used_value(x):
    y = x * 1.0
    z = y * y
    y[1] = 5.0
    return np.sum(z) + np.sum(y * x)
