"""Gradients taken inside a check_vma=True shard_map: JAX's numbers.

Under check_vma=True (shard_map's default) a replicated input's gradient taken inside
the per-shard function comes out summed over the devices (JAX's implicit pvary), a
psum's cotangent is not summed again, and an output invariant over an axis counts
once (astjax/sharding/vma.py).  Each case is checked against JAX 0.10.2's numbers
(tests/gen_vma_fixtures.py wrote tests/fixtures/vma_jax.json from the same functions,
tests/programs/vma.py; JAX is not needed here)
and against central finite differences of the summed-loss formulation: the global
function whose gradient the typed program computes, evaluated by forward runs only.
pmap keeps check_vma=False's local gradients, as JAX's does.
"""
import json
import re
from pathlib import Path

import numpy as np
import pytest

import astjax
from astjax import lax
from astjax.sharding import P
from astjax.sharding.errors import ShardingError
import fake_nccl
from conftest import numerical_grad
from programs.vma import (RING, cond_varying, data, every_collective, invariant_out,  # noqa: F401
                          local, loops, psum_i, psum_j, scan_invariant, varying_out)

JAX = json.loads((Path(__file__).resolve().parent / "fixtures" / "vma_jax.json")
                 .read_text())["cases"]


@pytest.fixture(autouse=True)
def four_devices(monkeypatch):
    monkeypatch.setenv("ASTJAX_NUM_CPU_DEVICES", "4")


def mesh1():
    return astjax.make_mesh((4,), ("i",))


def mesh2():
    return astjax.make_mesh((2, 2), ("i", "j"))


W, X, CT, CT2, X4, W2 = data()


def close(got, want, rtol=1e-12, atol=1e-12):
    if isinstance(want, list) and isinstance(got, (tuple, list)) and \
            len(got) == len(want) and not isinstance(got, np.ndarray):
        for g, v in zip(got, want):
            close(g, v, rtol, atol)
        return
    np.testing.assert_allclose(np.asarray(got, dtype=float), np.asarray(want, dtype=float),
                               rtol=rtol, atol=atol)


# ------------------------------------------------------------ the per-shard functions


def sm(f, i=(P(), P("i")), o=P(), mesh=None, check_vma=True):
    return astjax.shard_map(f, mesh=mesh or mesh1(), in_specs=i, out_specs=o,
                            check_vma=check_vma)


vg = astjax.value_and_grad
CASES = {
    "value_and_grad": lambda: sm(lambda w, x: (lambda v, g: (lax.pmean(v, "i"), g))(
        *vg(local)(w, x)), o=(P(), P()))(W, X),
    "grad_pmean_loss": lambda: sm(lambda w, x: astjax.grad(
        lambda w: lax.pmean(local(w, x), "i"))(w))(W, X),
    "grad_psum_invariant": lambda: sm(lambda w, x: astjax.grad(
        lambda w: np.sum(lax.psum(w, "i") ** 2))(w))(W, X),
    "grad_pmean_invariant": lambda: sm(lambda w, x: astjax.grad(
        lambda w: np.sum(lax.pmean(w, "i") ** 2))(w))(W, X),
    "grad_pvary": lambda: sm(lambda w, x: astjax.grad(
        lambda w: np.sum(np.tanh(x @ lax.pcast(w, "i", to="varying")) ** 2))(w))(W, X),
    "grad_invariant_only": lambda: sm(lambda w, x: astjax.grad(
        lambda w: np.sum(np.sin(w) ** 2))(w))(W, X),
    "scan_invariant_ys": lambda: sm(lambda w, x: astjax.grad(scan_invariant)(w, x))(W, X),
    "grad_varying_input": lambda: sm(lambda w, x: astjax.grad(local, argnums=1)(w, x),
                                     o=P("i"))(W, X),
    "every_collective": lambda: sm(lambda w, x: astjax.grad(
        every_collective, argnums=(0, 1))(w, x), o=(P(), P("i")))(W, X),
    "every_collective_psum": lambda: sm(lambda w, x: astjax.grad(
        lambda w, x: lax.psum(every_collective(w, x), "i"), argnums=(0, 1))(w, x),
        o=(P(), P("i")))(W, X),
    "every_collective_value": lambda: sm(lambda w, x: lax.psum(every_collective(w, x),
                                                               "i"))(W, X),
    "vjp_varying": lambda: sm(lambda w, x, c: astjax.vjp(varying_out, w, x)[1](c),
                              i=(P(), P("i"), P("i")), o=(P(), P("i")))(W, X, CT),
    "vjp_invariant": lambda: sm(lambda w, x, c: astjax.vjp(invariant_out, w, x)[1](c),
                                i=(P(), P("i"), P()), o=(P(), P("i")))(W, X, CT2),
    "jacrev": lambda: sm(lambda w, x: astjax.jacrev(
        lambda w: lax.pmean(np.tanh(x @ w).sum(0), "i"))(w))(W, X),
    "jvp": lambda: sm(lambda w, x: astjax.jvp(lambda w: lax.psum(local(w, x), "i"), (w,),
                                              (np.ones_like(w),)))(W, X),
    "loops": lambda: sm(lambda w, x: (lambda v, g: (v[None], g))(
        *vg(loops, argnums=(0, 1))(w, x)), o=(P("i"), (P(), P("i"))))(W, X),
    "pmap": lambda: astjax.pmap(lambda w, x: astjax.grad(local)(w, x), axis_name="i",
                                in_axes=(None, 0))(W, X.reshape(4, 2, 3)),
    "pmap_psum": lambda: astjax.pmap(lambda w, x: astjax.grad(
        lambda w: lax.psum(local(w, x), "i"))(w), axis_name="i", in_axes=(None, 0))(
        W, X.reshape(4, 2, 3)),
    "mesh2_psum_i": lambda: sm(lambda w, x: astjax.grad(psum_i)(w, x),
                               i=(P(), P("i", "j")), mesh=mesh2())(W, X4),
    "mesh2_psum_j_tuple": lambda: sm(lambda w, x: astjax.grad(psum_j, argnums=(0, 1))(
        w, x), i=(P(), P(("i", "j"))), o=(P(), P(("i", "j"))), mesh=mesh2())(W, X4),
    "mesh2_split_param": lambda: sm(lambda w, x: astjax.grad(
        lambda w: np.sum(np.tanh(x @ w[0]) ** 2))(w), i=(P("j"), P("i", "j")),
        o=P("j"), mesh=mesh2())(W2, X4),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_jax_check_vma_true(name):
    close(CASES[name](), JAX[name])


def test_every_case_has_jax_numbers():
    assert set(CASES) | {"cond_varying_predicate"} == set(JAX)


# ------------------------------------------- against finite differences of the global loss

def per_device(f, i=(P(), P("i")), mesh=None):
    """The per-device scalar outputs of ``f``, stacked (forward runs only)."""
    return astjax.shard_map(lambda *a: np.reshape(f(*a), (1,)), mesh=mesh or mesh1(),
                            in_specs=i, out_specs=P(tuple((mesh or mesh1()).axis_names)),
                            check_vma=False)


def test_replicated_gradient_is_the_whole_batch_gradient():
    # varying loss: the gradient of the sum of the devices' losses = the full batch's
    value, g = CASES["value_and_grad"]()
    close(value, local(W, X) / 4, rtol=1e-13)
    close(g, numerical_grad(lambda w: local(w, X), (W,)), rtol=1e-7, atol=1e-9)
    # pmean of the (invariant) gradient afterwards changes nothing, as in JAX
    both = sm(lambda w, x: (lambda v, g: (g, lax.pmean(g, "i"), lax.psum(g, "i")))(
        *vg(local)(w, x)), o=(P(), P(), P()))(W, X)
    close(both[1], both[0], rtol=0, atol=0)
    close(both[2], 4 * both[0], rtol=1e-15)
    # a psum'd loss: its cotangent is not summed again (check_vma=False: 4x)
    close(CASES["grad_pmean_loss"](), g / 4, rtol=1e-13)
    local_only = sm(lambda w, x: astjax.grad(lambda w: lax.psum(local(w, x), "i"))(w),
                    o=P("i"), check_vma=False)(W, X)
    close(local_only.reshape(4, 3, 2).sum(0), 4 * g, rtol=1e-12)


def test_types_of_branches_loops_and_invariant_code():
    # invariant code only: the gradient is counted once, not once per device
    close(CASES["grad_invariant_only"](), np.sin(2 * W), rtol=1e-14)
    # a scan whose ys are psum'd: invariant, counted once
    close(CASES["scan_invariant_ys"](),
          numerical_grad(lambda w: per_device(scan_invariant)(w, X)[0], (W,)),
          rtol=1e-6, atol=1e-8)
    # np.where on a varying predicate: varying (JAX's select; finite differences)
    def where(w, x):
        y = lax.psum(np.sum(np.tanh(x @ w)), "i")
        return np.where(np.sum(x) > 0, y * 2.0, y * 3.0)
    per = per_device(where)
    close(sm(lambda w, x: astjax.grad(where)(w, x))(W, X),
          numerical_grad(lambda w: np.sum(per(w, X)), (W,)), rtol=1e-6, atol=1e-8)


def test_a_branch_on_a_varying_predicate_with_an_invariant_result_is_refused():
    # JAX 0.10.2 types lax.cond's result by its branches alone: invariant here although
    # devices take different branches (its gradient, JAX's fixture
    # "cond_varying_predicate", is sum_d k_d * grad_d, no global loss's): refused
    assert "cond_varying_predicate" in JAX
    with pytest.raises(ShardingError, match="condition varies") as e:
        sm(lambda w, x: astjax.grad(cond_varying)(w, x))(W, X)
    assert "test_sharding_vma.py" in str(e.value)
    # a branch on a varying predicate whose result varies anyway is typed as JAX does
    def varying_branch(w, x):
        y = np.sum(np.tanh(x @ w))
        return lax.cond(np.sum(x) > 0, lambda y: y * 2.0, lambda y: y * 3.0, y)
    per = per_device(varying_branch)
    close(sm(lambda w, x: astjax.grad(varying_branch)(w, x))(W, X),
          numerical_grad(lambda w: np.sum(per(w, X)), (W,)), rtol=1e-6, atol=1e-8)


def test_has_aux_and_argnums():
    def f(w, x):
        loss = lax.pmean(local(w, x), "i")
        return loss, (lax.psum(x, "i")[0], x[0])   # aux: invariant and varying
    (v, (a, b)), (gw, gx) = sm(lambda w, x: vg(f, argnums=(0, 1), has_aux=True)(w, x),
                               o=((P(), (P(), P("i"))), (P(), P("i"))))(W, X)
    close(v, local(W, X) / 4, rtol=1e-13)
    close(a, X.reshape(4, 2, 3).sum(0)[0], rtol=1e-13)
    close(b, X[::2].ravel(), rtol=0, atol=0)
    close(gw, numerical_grad(lambda w: local(w, X), (W,)) / 4, rtol=1e-7, atol=1e-9)
    close(gx, numerical_grad(lambda x: local(W, x), (X,)) / 4, rtol=1e-7, atol=1e-9)
    g2, aux = sm(lambda w, x: astjax.grad(f, has_aux=True)(w, x),
                 o=(P(), (P(), P("i"))))(W, X)
    close(g2, gw, rtol=0, atol=0)


def test_varying_input_gradient_is_its_rows_gradient():
    close(CASES["grad_varying_input"](), numerical_grad(lambda x: local(W, x), (X,)),
          rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("name, f", [("every_collective", every_collective),
                                     ("loops", loops)])
def test_collectives_gradient_matches_finite_differences(name, f):
    total = per_device(lambda w, x, w0, x0: f(w, x, w0, x0) if f is every_collective
                       else f(w, x), i=(P(), P("i"), P(), P("i")))

    def summed(w, x):
        return np.sum(total(w, x, W, X))
    got = CASES[name]()
    gw, gx = got if name == "every_collective" else got[1]
    close(gw, numerical_grad(summed, (W, X), argnums=0), rtol=1e-6, atol=1e-7)
    close(gx, numerical_grad(summed, (W, X), argnums=1), rtol=1e-6, atol=1e-7)
    if name == "every_collective":
        # an invariant output (psum'd) counts once: the same global loss
        iw, ix = CASES["every_collective_psum"]()
        close(iw, gw, rtol=1e-12)
        close(ix, gx, rtol=1e-12)


def test_vjp_is_the_transpose_of_the_global_map():
    full = astjax.shard_map(varying_out, mesh=mesh1(), in_specs=(P(), P("i")),
                            out_specs=P("i"), check_vma=False)
    gw, gx = CASES["vjp_varying"]()

    def pairing(w, x):
        return np.sum(full(w, x) * CT)
    close(gw, numerical_grad(pairing, (W, X), argnums=0), rtol=1e-6, atol=1e-7)
    close(gx, numerical_grad(pairing, (W, X), argnums=1), rtol=1e-6, atol=1e-7)
    # an invariant output: its cotangent once (not once per device)
    inv = astjax.shard_map(invariant_out, mesh=mesh1(), in_specs=(P(), P("i")),
                           out_specs=P(), check_vma=False)
    iw, ix = CASES["vjp_invariant"]()
    close(iw, numerical_grad(lambda w: np.sum(inv(w, X) * CT2), (W,)), rtol=1e-6,
          atol=1e-7)
    close(ix, numerical_grad(lambda x: np.sum(inv(W, x) * CT2), (X,)), rtol=1e-6,
          atol=1e-7)


def test_jacrev_inside():
    def mean_rows(w):
        return np.tanh(X @ w).sum(0) / 4
    jac = CASES["jacrev"]()
    cols = [numerical_grad(lambda w, k=k: mean_rows(w)[k], (W,)) for k in range(2)]
    close(jac, np.stack(cols), rtol=1e-6, atol=1e-8)


def test_forward_mode_is_unchanged():
    value, tangent = CASES["jvp"]()
    plain = sm(lambda w, x: astjax.jvp(lambda w: lax.psum(local(w, x), "i"), (w,),
                                       (np.ones_like(w),)), check_vma=False)(W, X)
    close((value, tangent), plain, rtol=0, atol=0)
    close(tangent, np.sum(numerical_grad(lambda w: local(w, X), (W,))), rtol=1e-7)


def test_pmap_keeps_the_local_gradient():
    per = CASES["pmap"]()
    for d in range(4):
        close(per[d], numerical_grad(lambda w: local(w, X[2 * d:2 * d + 2]), (W,)),
              rtol=1e-7, atol=1e-9)
    close(CASES["pmap_psum"](), 4 * per, rtol=1e-13)


def test_two_mesh_axes():
    # invariant over i (psum'd), varying over j: the gradient counts every row once
    g = CASES["mesh2_psum_i"]()
    close(g, numerical_grad(lambda w: local(w, X4), (W,)), rtol=1e-7, atol=1e-9)
    gw, gx = CASES["mesh2_psum_j_tuple"]()
    close(gw, g, rtol=1e-12)
    close(gx, numerical_grad(lambda x: local(W, x), (X4,)), rtol=1e-7, atol=1e-9)
    # a parameter split over j: summed over i only
    gs = CASES["mesh2_split_param"]()
    want = np.stack([numerical_grad(lambda w: local(w, X4[:, 2 * j:2 * j + 2]), (W2[j],))
                     for j in range(2)])
    close(gs, want, rtol=1e-7, atol=1e-9)


# ------------------------------------------------------------------ data-parallel MLP

def _predict(params, inputs):
    for w, b in params:
        outputs = np.dot(inputs, w) + b
        inputs = np.tanh(outputs)
    return outputs


def _loss(params, batch):
    inputs, targets = batch
    return np.mean((_predict(params, inputs) - targets) ** 2)


def _sgd(params, grads, lr=0.1):
    return [(w - lr * dw, b - lr * db) for (w, b), (dw, db) in zip(params, grads)]


@pytest.mark.parametrize("shape", [(4,), (2,), (2, 2)])
def test_data_parallel_step_equals_single_device_training(shape):
    """The JAX idiom: value_and_grad of the pmean'd loss inside the shard_map; the
    replicated parameters' gradient is the whole batch's, with no pmean of it."""
    rng = np.random.default_rng(0)
    sizes = (5, 7, 3)
    params = [(rng.standard_normal((m, n)) / np.sqrt(m), np.zeros(n))
              for m, n in zip(sizes[:-1], sizes[1:])]
    batch = (rng.standard_normal((16, 5)), rng.standard_normal((16, 3)))
    axes = ("i", "j")[:len(shape)]
    mesh = astjax.make_mesh(shape, axes)
    split = axes if len(axes) > 1 else axes[0]

    def step(params, batch):
        return astjax.value_and_grad(lambda p: lax.pmean(_loss(p, batch), axes))(params)
    sharded = astjax.shard_map(step, mesh=mesh, in_specs=(P(), P(split)), out_specs=P())
    single, multi = params, params
    for _ in range(3):
        l1, g1 = astjax.value_and_grad(_loss)(single, batch)
        l2, g2 = sharded(multi, batch)
        close(l2, l1, rtol=1e-13)
        close([list(p) for p in g2], [list(p) for p in g1], rtol=1e-12, atol=1e-14)
        single, multi = _sgd(single, g1), _sgd(multi, g2)


# ------------------------------------------------------------------ refused, loudly

def _jit_grad(w, x):
    return astjax.jit(astjax.grad(lambda w: local(w, x)))(w)


def _grad_of_grad(w, x):
    return astjax.grad(lambda w: np.sum(astjax.grad(local)(w, x) ** 2))(w)


def _vmap_grad(w, x):
    return astjax.vmap(astjax.grad(local), in_axes=(None, 0))(w, x[:, None])[0]


def _jvp_grad(w, x):
    return astjax.jvp(astjax.grad(lambda w: local(w, x)), (w,), (np.ones_like(w),))[1]


def _computed_argument(w, x):
    return astjax.grad(local)(w, x * 2.0)


def _pullback_transformed(w, x):
    _, pull = astjax.vjp(lambda w: np.tanh(x @ w), w)
    return astjax.jit(pull)(np.ones((2, 2)))[0]


@pytest.mark.parametrize("body", [_jit_grad, _grad_of_grad, _vmap_grad, _jvp_grad,
                                  _computed_argument, _pullback_transformed],
                         ids=lambda f: f.__name__)
def test_untyped_reverse_mode_is_refused_with_the_users_line(body):
    with pytest.raises(ShardingError, match="check_vma") as e:
        sm(body)(W, X)
    # the line of the call, or of the differentiated function's definition
    # (``local`` lives in tests/programs/vma.py)
    assert re.search(r'File ".*(test_sharding_vma|programs/vma)\.py", line \d+',
                     str(e.value)), str(e.value)
    # check_vma=False runs them (JAX's check_vma=False numbers)
    sm(body, o=P("i"), check_vma=False)(W, X)


def test_outside_derivative_of_a_body_taking_a_gradient_is_refused():
    inner = sm(lambda w, x: lax.pmean(np.sum(astjax.grad(local)(w, x)), "i"))
    inner(W, X)                                  # runs (typed) ...
    for outer in (astjax.grad(inner),
                  lambda w, x: astjax.jvp(inner, (w, x), (w, x))):
        with pytest.raises(ShardingError, match="check_vma"):   # ... not differentiated
            outer(W, X)
    # without a gradient inside, derivatives from outside are check_vma's either way
    plain = sm(lambda w, x: lax.psum(local(w, x), "i"))
    close(astjax.grad(plain)(W, X), numerical_grad(lambda w: local(w, X), (W,)),
          rtol=1e-7, atol=1e-9)


def test_pcast_and_pvary():
    assert lax.pvary is astjax.sharding.collectives.pvary
    out = sm(lambda w, x: lax.pcast(w, "i", to="varying")[None], o=P("i"))(W, X)
    close(out, np.stack([W] * 4), rtol=0, atol=0)
    for to in ("reduced", "sideways"):
        with pytest.raises(ShardingError, match="pcast"):
            sm(lambda w, x, to=to: lax.pcast(w, "i", to=to), o=P())(W, X)


# ------------------------------------------------------------------ on NCCL's communicator

@pytest.mark.parametrize("name", ["value_and_grad", "every_collective", "vjp_invariant",
                                  "jacrev", "mesh2_split_param"])
def test_through_nccl(name, monkeypatch):
    """The boundaries' collectives on the NCCL engine (tests/fake_nccl.py without a
    GPU): the same numbers."""
    monkeypatch.setenv("ASTJAX_SHARD_ENGINE", "nccl")
    log = fake_nccl.install(monkeypatch).LOG
    close(CASES[name](), JAX[name])
    assert any(c[0] == "allReduce" for c in log)




@pytest.mark.gpu
@pytest.mark.skipif(fake_nccl.real_gpus() < 1, reason="needs CuPy with NCCL and a GPU")
def test_real_nccl_on_cupy_arrays(monkeypatch):
    import cupy
    n = 2 if fake_nccl.real_gpus() >= 2 else 1
    monkeypatch.setenv("ASTJAX_NUM_CPU_DEVICES", str(n))
    mesh = astjax.make_mesh((n,), ("i",))

    def step(w, x):
        value, g = vg(lambda w: lax.pmean(local(w, x), "i"))(w)
        return value, g
    sharded = astjax.shard_map(step, mesh=mesh, in_specs=(P(), P("i")), out_specs=P())
    ref = sharded(W, X)
    got = sharded(cupy.asarray(W), cupy.asarray(X))
    assert isinstance(got[1], cupy.ndarray)
    close(cupy.asnumpy(got[0]), ref[0], rtol=1e-12)
    close(cupy.asnumpy(got[1]), ref[1], rtol=1e-12)
    close(ref[1], numerical_grad(lambda w: local(w, X), (W,)) / n, rtol=1e-7, atol=1e-9)


def test_gradient_in_a_named_vmap_inside_check_vma_true_is_refused():
    # the vmap's examples see the mesh axis too; their gradients are not typed: refused
    def body(w, x):
        per_row = astjax.vmap(lambda xi: astjax.grad(lambda w: np.sum(np.sin(w) * xi))(w),
                              axis_name="b")(x[:, :2])
        return lax.pmean(np.sum(per_row, 0), "i")
    with pytest.raises(ShardingError, match="check_vma"):
        sm(body)(W, X)
    out = sm(body, check_vma=False)(W, X)
    close(out, np.cos(W) * X[:, :2].reshape(4, 2, 2).sum(1).mean(0), rtol=1e-13)


def test_gradient_of_device_arrays_in_check_vma_true_stays_on_the_device(monkeypatch):
    # the typed gradient checks its scalar output without copying it to the host (a
    # CuPy array refuses the copy: the GPU run's test above failed there)
    import fakecupy
    monkeypatch.setenv("ASTJAX_NUM_CPU_DEVICES", "1")
    mesh = astjax.make_mesh((1,), ("i",))

    def step(w, x):
        return vg(lambda w: lax.pmean(local(w, x), "i"))(w)
    sharded = astjax.shard_map(step, mesh=mesh, in_specs=(P(), P("i")), out_specs=P())
    ref = sharded(W, X)
    got = sharded(fakecupy.dev(W), fakecupy.dev(X))
    assert type(got[1]) is fakecupy.DeviceArray
    close(fakecupy.host(got[0]), ref[0], rtol=1e-12)
    close(fakecupy.host(got[1]), ref[1], rtol=1e-12)
