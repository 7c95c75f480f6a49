"""Processes that diverge in their collectives (run under ``mpiexec`` by
tests/test_mpi_checks.py): every case must end in an astjax error on every process,
never in a hang.  Each process prints one line per case: ``CASE name: <error>``.
"""
import numpy as np

import astjax
from astjax import lax
from astjax.sharding import P


def mixed(x):              # device 0 gathers while the others sum
    if lax.axis_index("i") == 0:
        return lax.all_gather(x, "i", tiled=True)[:2]
    return lax.psum(x, "i")


def ragged(x):             # a shape that depends on the device
    return lax.psum(x[:1 + int(lax.axis_index("i"))], "i")[:1]


def dtypes(x):             # a dtype that depends on the device
    if lax.axis_index("i") == 0:
        x = x.astype(np.float32)
    return lax.psum(x, "i")


def skips(x):              # device 0 never reaches the psum
    if lax.axis_index("i") == 0:
        return x
    return lax.psum(x, "i")


def fails(x):              # device 1 fails before the psum
    if lax.axis_index("i") == 1:
        raise ValueError("device one gave up")
    return lax.psum(x, "i")


def outputs(x):            # the outputs differ in shape
    return x[:1 + int(lax.axis_index("i"))]


def fine(x):
    return lax.psum(x, "i")


def main(only=None):
    astjax.distributed.initialize()
    n = astjax.device_count()
    mesh = astjax.make_mesh((n,), ("i",))
    x = np.arange(4.0 * n).reshape(2 * n, 2)
    for f in (mixed, ragged, dtypes, skips, fails, outputs, fine):
        if only and f.__name__ not in only:
            continue
        sm = astjax.shard_map(f, mesh=mesh, in_specs=P("i"), out_specs=P("i"),
                              check_vma=False)
        try:
            out = sm(x)
            print(f"CASE {f.__name__}: ok {float(np.sum(out))}", flush=True)
        except Exception as e:   # noqa: BLE001  (the test reads the message)
            print(f"CASE {f.__name__}: {type(e).__name__}: " +
                  str(e).splitlines()[0], flush=True)


if __name__ == "__main__":
    import sys
    main(sys.argv[1:])
