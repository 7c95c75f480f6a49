"""The MLP of JAX's README trained data-parallel: each device takes a slice of the batch,
computes its gradient, and the gradients are averaged with ``pmean`` -- with
``shard_map`` and with ``pmap``.  The losses equal single-device training's.

    python examples/data_parallel.py              # local devices (threads)
    mpiexec -n 2 python examples/data_parallel.py # one MPI process per device
"""
import numpy as np

import astjax
from astjax import lax
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


def local_step(params, batch):
    """Per device: the loss and gradient of its slice, averaged over the devices."""
    value, grads = astjax.value_and_grad(loss)(params, batch)
    return lax.pmean(value, "batch"), lax.pmean(grads, "batch")


def train(steps=5, sizes=(8, 16, 4), batch_size=32, lr=0.1, log=print):
    rng = np.random.default_rng(0)
    params = init(sizes, rng)
    x = rng.standard_normal((batch_size, sizes[0]))
    y = rng.standard_normal((batch_size, sizes[-1]))
    n = astjax.device_count()
    mesh = astjax.make_mesh((n,), ("batch",))
    step = astjax.shard_map(local_step, mesh=mesh, in_specs=(P(), P("batch")),
                            out_specs=P(), check_vma=False)
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


if __name__ == "__main__":
    from astjax.sharding import distributed, process_index
    distributed.initialize()
    quiet = process_index() != 0           # under mpiexec: process 0 prints
    say = (lambda *a: None) if quiet else print
    say(f"{astjax.device_count()} devices")
    train(log=say)
