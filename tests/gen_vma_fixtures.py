"""Record JAX's check_vma=True gradients inside shard_map (and pmap's) for
tests/test_sharding_vma.py (needs JAX 0.10; the tests do not).

Each case is a per-shard function taking a gradient inside (tests/programs/vma.py,
loaded here with JAX's ``np`` and ``lax``); the test file runs the same functions
through astjax on the same data (``data()``).

    python tests/gen_vma_fixtures.py        # -> tests/fixtures/vma_jax.json
"""
from __future__ import annotations

import json
import os
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
import numpy as np  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

jax.config.update("jax_enable_x64", True)
AUTO = jax.sharding.AxisType.Auto
MESH = jax.make_mesh((4,), ("i",), axis_types=(AUTO,))
MESH2 = jax.make_mesh((2, 2), ("i", "j"), axis_types=(AUTO, AUTO))


def _programs():
    """tests/programs/vma.py executed again with np -> jax.numpy, lax -> jax.lax."""
    import importlib.util
    path = Path(__file__).resolve().parent / "programs" / "vma.py"
    spec = importlib.util.spec_from_file_location("vma_programs_jax", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.np, module.lax = jnp, lax
    return module


V = _programs()
RING, data, local, every_collective, loops = V.RING, V.data, V.local, V.every_collective, V.loops
varying_out, invariant_out, psum_i, psum_j = V.varying_out, V.invariant_out, V.psum_i, V.psum_j
cond_varying, scan_invariant = V.cond_varying, V.scan_invariant


def sm(f, i=(P(), P("i")), o=P(), mesh=MESH):
    return jax.shard_map(f, mesh=mesh, in_specs=i, out_specs=o)


def cases():
    w, x, ct, ct2, x4, w2 = data()
    vg = jax.value_and_grad
    out = {
        "value_and_grad": sm(lambda w, x: (lambda v, g: (lax.pmean(v, "i"), g))(
            *vg(local)(w, x)), o=(P(), P()))(w, x),
        "grad_pmean_loss": sm(lambda w, x: jax.grad(
            lambda w: lax.pmean(local(w, x), "i"))(w))(w, x),
        "grad_psum_invariant": sm(lambda w, x: jax.grad(
            lambda w: jnp.sum(lax.psum(w, "i") ** 2))(w))(w, x),
        "grad_pmean_invariant": sm(lambda w, x: jax.grad(
            lambda w: jnp.sum(lax.pmean(w, "i") ** 2))(w))(w, x),
        "grad_pvary": sm(lambda w, x: jax.grad(
            lambda w: jnp.sum(jnp.tanh(x @ lax.pcast(w, "i", to="varying")) ** 2))(w))(
            w, x),
        "grad_invariant_only": sm(lambda w, x: jax.grad(lambda w: jnp.sum(jnp.sin(w) ** 2))(
            w))(w, x),
        "cond_varying_predicate": sm(lambda w, x: jax.grad(cond_varying)(w, x))(w, x),
        "scan_invariant_ys": sm(lambda w, x: jax.grad(scan_invariant)(w, x))(w, x),
        "grad_varying_input": sm(lambda w, x: jax.grad(local, argnums=1)(w, x),
                                 o=P("i"))(w, x),
        "every_collective": sm(lambda w, x: jax.grad(every_collective, argnums=(0, 1))(
            w, x), o=(P(), P("i")))(w, x),
        "every_collective_psum": sm(lambda w, x: jax.grad(
            lambda w, x: lax.psum(every_collective(w, x), "i"), argnums=(0, 1))(w, x),
            o=(P(), P("i")))(w, x),
        "every_collective_value": sm(lambda w, x: lax.psum(every_collective(w, x), "i"))(
            w, x),
        "vjp_varying": sm(lambda w, x, c: jax.vjp(varying_out, w, x)[1](c),
                          i=(P(), P("i"), P("i")), o=(P(), P("i")))(w, x, ct),
        "vjp_invariant": sm(lambda w, x, c: jax.vjp(invariant_out, w, x)[1](c),
                            i=(P(), P("i"), P()), o=(P(), P("i")))(w, x, ct2),
        "jacrev": sm(lambda w, x: jax.jacrev(
            lambda w: lax.pmean(jnp.tanh(x @ w).sum(0), "i"))(w))(w, x),
        "jvp": sm(lambda w, x: jax.jvp(lambda w: lax.psum(local(w, x), "i"), (w,),
                                       (jnp.ones_like(w),)))(w, x),
        "loops": sm(lambda w, x: (lambda v, g: (v[None], g))(
            *vg(loops, argnums=(0, 1))(w, x)), o=(P("i"), (P(), P("i"))))(w, x),
        "pmap": jax.pmap(lambda w, x: jax.grad(local)(w, x), axis_name="i",
                         in_axes=(None, 0))(w, x.reshape(4, 2, 3)),
        "pmap_psum": jax.pmap(lambda w, x: jax.grad(lambda w: lax.psum(local(w, x), "i"))(
            w), axis_name="i", in_axes=(None, 0))(w, x.reshape(4, 2, 3)),
        "mesh2_psum_i": sm(lambda w, x: jax.grad(psum_i)(w, x), i=(P(), P("i", "j")),
                           mesh=MESH2)(w, x4),
        "mesh2_psum_j_tuple": sm(lambda w, x: jax.grad(psum_j, argnums=(0, 1))(w, x),
                                 i=(P(), P(("i", "j"))), o=(P(), P(("i", "j"))),
                                 mesh=MESH2)(w, x4),
        "mesh2_split_param": sm(lambda w, x: jax.grad(
            lambda w: jnp.sum(jnp.tanh(x @ w[0]) ** 2))(w), i=(P("j"), P("i", "j")),
            o=P("j"), mesh=MESH2)(w2, x4),
    }
    return jax.tree.map(lambda a: np.asarray(a).tolist(), out)


if __name__ == "__main__":
    path = Path(__file__).resolve().parent / "fixtures" / "vma_jax.json"
    path.write_text(json.dumps({"jax": jax.__version__, "cases": cases()}, indent=1) + "\n")
    print(f"wrote {path}")
