"""The seeds' MLP, and the same model with parameters in other pytrees."""
from collections import namedtuple
from dataclasses import dataclass

import numpy as np

from astjax import tree_util


def predict(params, inputs):
    for W, b in params:
        outputs = np.dot(inputs, W) + b
        inputs = np.tanh(outputs)
    return outputs


def loss(params, batch):
    inputs, targets = batch
    preds = predict(params, inputs)
    return np.sum((preds - targets) ** 2)


def loss_xy(params, inputs, targets):
    preds = predict(params, inputs)
    return np.sum((preds - targets) ** 2)


def dict_loss(params, x):
    h = np.tanh(x @ params["w1"] + params["b1"])
    return np.sum(np.tanh(h @ params["w2"]) ** 2)


def dict_loop_loss(params, x):
    total = 0.0
    for name in params:
        total = total + np.sum(np.sin(params[name] * x))
    return total


def nested_loss(tree, x):
    (a, (b, c)), d = tree
    return np.sum(a * x) + np.sum(b * c) * d


def none_leaf_loss(params, x):
    w, nothing, b = params
    return np.sum(np.tanh(x * w + b))


Linear = namedtuple("Linear", ["w", "b"])


def namedtuple_loss(layer, x):
    return np.sum(np.tanh(np.dot(x, layer.w) + layer.b))


def namedtuple_unpack_loss(layer, x):
    w, b = layer
    return np.sum(np.tanh(np.dot(x, w) + b))


@tree_util.register_dataclass
@dataclass
class Params:
    w: np.ndarray
    b: np.ndarray


def dataclass_loss(params, x):
    return np.sum(np.tanh(np.dot(x, params.w) + params.b) ** 2)


def pytree_output(x):
    return np.sin(x), {"total": np.sum(x * x), "pair": (x[0] * 2.0, np.cos(x))}


def list_output(xs):
    return [np.tanh(x) * 3.0 for x in xs]
