"""Realistic small models: RNN, softmax cross-entropy, layer norm, a wave simulation."""
import numpy as np


def data_trip_count(x):
    n = int(np.sum(x > 0))
    y = x
    for i in range(n):
        y = np.sin(y) + x
    return np.sum(y)


def accumulate_same_slot(x):
    y = np.zeros(2)
    for i in range(len(x)):
        y[i % 2] += x[i] * x[i]
    return np.sum(y * y)


def swap_in_while(x, y):
    k = 0
    while k < 3:
        x, y = y, x * 0.5 + np.sin(y)
        k += 1
    return np.sum(x * y)


def rnn(W, xs, h0):
    h = h0
    hs = []
    for x in xs:
        h = np.tanh(W @ h + x)
        hs.append(h)
    return np.sum(np.stack(hs) ** 2)


def softmax_xent(logits, labels):
    z = logits - np.max(logits, axis=1, keepdims=True)
    logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.mean(np.sum(logp * labels, axis=1))


def layer_norm(x, g, b):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return np.sum(((x - mu) / np.sqrt(var + 1e-5) * g + b) ** 2)


def wave(c, u0, steps):
    u_prev = u0
    u = u0
    for t in range(steps):
        lap = np.zeros_like(u)
        lap[1:-1] = u[2:] - 2 * u[1:-1] + u[:-2]
        u_next = 2 * u - u_prev + c * c * lap * 0.1
        u_prev, u = u, u_next
    return np.sum(u * u)
