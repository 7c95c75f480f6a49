"""The MLP of JAX's README trained data-parallel: each device takes a slice of the batch
-- with ``shard_map`` (JAX's default check_vma=True: the gradient of the loss averaged
over the devices, taken inside; the replicated parameters' gradients come out summed
over the devices) and with ``pmap`` (the local gradients, averaged with ``pmean``).
The losses equal single-device training's.  With
dropout (``train_dropout``), the gradient of the shard_map'ed loss is taken from
outside, each device folding its index into the step's PRNG key.

    python examples/data_parallel.py              # local devices (threads)
    mpiexec -n 2 python examples/data_parallel.py # one MPI process per device
"""
import numpy as np

import astjax
from astjax import lax
from astjax import random as jr
from astjax.sharding import P


def predict(params, inputs):
    for W, b in params:
        outputs = np.dot(inputs, W) + b
        inputs = np.tanh(outputs)
    return outputs


def loss(params, batch):
    inputs, targets = batch
    return np.mean((predict(params, inputs) - targets) ** 2)


def init(sizes, rng):
    return [(rng.standard_normal((m, n)) / np.sqrt(m), np.zeros(n))
            for m, n in zip(sizes[:-1], sizes[1:])]


def sgd(params, grads, lr):
    return [(W - lr * dW, b - lr * db) for (W, b), (dW, db) in zip(params, grads)]


def mean_loss(params, batch):
    """The loss of the whole batch: its slices' losses averaged over the devices."""
    return lax.pmean(loss(params, batch), "batch")


def sharded_step(params, batch):
    """Per device, under check_vma=True: the mean loss and its gradient; the
    parameters are the same on every device, so (as in JAX) their gradient comes
    summed over the devices: the whole batch's, with no pmean of it."""
    return astjax.value_and_grad(mean_loss)(params, batch)


def local_step(params, batch):
    """Per device (pmap, or shard_map with check_vma=False): the loss and gradient of
    its slice, averaged over the devices."""
    value, grads = astjax.value_and_grad(loss)(params, batch)
    return lax.pmean(value, "batch"), lax.pmean(grads, "batch")


def train(steps=5, sizes=(8, 16, 4), batch_size=32, lr=0.1, log=print):
    rng = np.random.default_rng(0)
    params = init(sizes, rng)
    x = rng.standard_normal((batch_size, sizes[0]))
    y = rng.standard_normal((batch_size, sizes[-1]))
    n = astjax.device_count()
    mesh = astjax.make_mesh((n,), ("batch",))
    step = astjax.shard_map(sharded_step, mesh=mesh, in_specs=(P(), P("batch")),
                            out_specs=P())
    pstep = astjax.pmap(local_step, axis_name="batch", in_axes=(None, 0))
    single, sharded, pmapped = params, params, params
    history = []
    for i in range(steps):
        l1, g1 = astjax.value_and_grad(loss)(single, (x, y))
        l2, g2 = step(sharded, (x, y))
        xb = x.reshape(n, -1, x.shape[1])
        yb = y.reshape(n, -1, y.shape[1])
        l3, g3 = pstep(pmapped, (xb, yb))
        l3, g3 = l3[0], [(dW[0], db[0]) for dW, db in g3]
        single, sharded, pmapped = sgd(single, g1, lr), sgd(sharded, g2, lr), sgd(pmapped, g3, lr)
        history.append((float(l1), float(l2), float(l3)))
        log(f"step {i}: single {l1:.10f}  shard_map {float(l2):.10f}  pmap {float(l3):.10f}")
    return history


RATE = 0.8          # the probability of keeping a hidden unit


def dropout_loss(params, key, batch):
    """One slice's loss with dropout on the hidden layers (the slice's key)."""
    inputs, targets = batch
    for i, (W, b) in enumerate(params):
        outputs = np.dot(inputs, W) + b
        keep = jr.bernoulli(jr.fold_in(key, i), RATE, outputs.shape)
        inputs = np.where(keep, np.tanh(outputs) / RATE, 0.0)
    return np.mean((outputs - targets) ** 2)


def device_loss(params, key, batch):
    """Per device: its slice's dropout loss, with its own key, averaged over devices."""
    key = jr.fold_in(key, lax.axis_index("batch"))
    return lax.pmean(dropout_loss(params, key, batch), "batch")


def train_dropout(steps=5, sizes=(8, 16, 4), batch_size=32, lr=0.1, log=print):
    """grad of the shard_map'ed dropout loss (the key carries no derivative), against
    the same keys on one device: device i's slice with fold_in(key, i)."""
    rng = np.random.default_rng(1)
    params = init(sizes, rng)
    x = rng.standard_normal((batch_size, sizes[0]))
    y = rng.standard_normal((batch_size, sizes[-1]))
    n = astjax.device_count()
    mesh = astjax.make_mesh((n,), ("batch",))
    sharded_loss = astjax.shard_map(device_loss, mesh=mesh,
                                    in_specs=(P(), P(), P("batch")), out_specs=P())

    def single_step(params, key):
        """One device: each slice's loss and gradient with its key, averaged."""
        total, grads = 0.0, None
        for i in range(n):
            rows = slice(i * batch_size // n, (i + 1) * batch_size // n)
            value, g = astjax.value_and_grad(dropout_loss)(params, jr.fold_in(key, i),
                                                           (x[rows], y[rows]))
            total += value / n
            g = [(dW / n, db / n) for dW, db in g]
            grads = g if grads is None else [(a + c, b + d) for (a, b), (c, d)
                                             in zip(grads, g)]
        return total, grads
    single, sharded = params, params
    history = []
    for i in range(steps):
        key = jr.fold_in(jr.PRNGKey(0), i)
        l1, g1 = single_step(single, key)
        l2, g2 = astjax.value_and_grad(sharded_loss)(sharded, key, (x, y))
        single, sharded = sgd(single, g1, lr), sgd(sharded, g2, lr)
        history.append((float(l1), float(l2)))
        log(f"dropout step {i}: single {l1:.10f}  shard_map {float(l2):.10f}")
    return history


if __name__ == "__main__":
    from astjax.sharding import distributed, process_index
    distributed.initialize()
    quiet = process_index() != 0           # under mpiexec: process 0 prints
    say = (lambda *a: None) if quiet else print
    say(f"{astjax.device_count()} devices")
    train(log=say)
    train_dropout(log=say)
