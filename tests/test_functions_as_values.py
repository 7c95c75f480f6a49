"""Functions as values (issue 11): the higher-order Python JAX users write.

Each program below is written the way JAX's documentation and examples write it
(the autodiff cookbook, stax layers, per-example gradients, SGD with tree_map, Gram
matrices with nested vmaps, lax.switch with lambdas, factories returning step
functions, *args/**kwargs forwarding, functools.partial/reduce, modules passed as
arguments).  Every one is checked, in float64, through grad (central finite
differences), jit (eager NumPy), jvp, vmap (a Python loop), vmap of grad, grad of
vmap and jit of grad.
"""
from __future__ import annotations

import functools
import re

import numpy as np
import pytest

import astjax
from astjax import grad, jit, jvp, lax, tree_util, vmap

X = np.linspace(0.1, 1.0, 5)
BATCH = np.stack([X, X[::-1] * 0.7, np.cos(X)])
WEIGHTS = np.arange(25.0).reshape(5, 5) / 25.0


# --------------------------------------------------------------------- programs

def sgd_update(params, grads, lr=0.1):
    return tree_util.tree_map(lambda p, g: p - lr * g, params, grads)


def sgd_tree_map(x):
    params = {"w": x, "b": x[:2]}
    grads = {"w": np.sin(x), "b": x[:2] ** 2}
    new = sgd_update(params, grads)
    return np.sum(new["w"] ** 2) + np.sum(np.cos(new["b"]))


def rbf(a, b):
    return np.exp(-(a - b) ** 2)


def gram_matrix(xs):
    return vmap(lambda a: vmap(lambda b: rbf(a, b))(xs))(xs)


def gram(x):
    return np.sum(gram_matrix(x) * WEIGHTS)


def gram_local_kernel(x):
    ell = 1.0 + np.sum(x ** 2)

    def kernel(a, b):   # a local def closing over a run-time value
        return np.exp(-(a - b) ** 2 / ell)

    return np.sum(vmap(lambda a: vmap(lambda b: kernel(a, b))(x))(x) * WEIGHTS)


def switch_lambdas(x):
    branches = [lambda y: np.sin(y), lambda y: y * y, lambda y: np.cos(y) * 2.0]
    chosen = np.argmax(x) % 3          # a run-time index (batched under vmap)
    return (np.sum(lax.switch(1, branches, x)) + np.sum(lax.switch(x.shape[0] % 3, branches, x))
            + np.sum(lax.switch(chosen, [lambda y: np.sin(y), lambda y: y * y], x)))


def make_step(c):
    def step(carry, _):
        return carry * c, np.sum(carry)
    return step


def scan_make_step(x):
    step = make_step(np.sin(x))
    x = x + 1.0          # rebinding after the factory call: the closure keeps its value
    out, ys = lax.scan(step, x, None, length=3)
    return np.sum(out) + np.sum(ys)


def make_poly(xp, a):
    return xp.sin(a) * xp.exp(a * 0.5)


def make_poly_default(a, xp=np):
    return xp.tanh(a) + a


def module_argument(x):
    xp = np
    return np.sum(make_poly(np, x)) + np.sum(make_poly_default(x)) + np.sum(xp.cos(x))


ACTIVATIONS = [np.sin, np.tanh]


def functions_in_list(x):
    total = 0.0
    for act, w in zip(ACTIVATIONS, [1.0, 2.0]):
        total = total + w * np.sum(act(x))
    return total


def reduce_with(a, reduce=np.sum):
    return reduce(a * a)


def function_default(x):
    return reduce_with(x) + reduce_with(x, reduce=np.mean) + reduce_with(x, np.max)


def scaled(a, s):
    return a * s


def partial_vmap(x):
    by_two = functools.partial(scaled, s=2.0)
    by_data = functools.partial(scaled, s=np.sum(x))
    return (np.sum(vmap(functools.partial(scaled, s=2.0))(x) * x)
            + np.sum(vmap(by_data)(x)) + np.sum(by_two(x) ** 2))


def reduce_lambda(x):
    product = functools.reduce(lambda u, v: u * v, [x, np.sin(x), x + 1.0])
    total = functools.reduce(lambda u, v: u + np.cos(v), x, 0.0)
    return np.sum(product) + total


def product_of(*factors):
    out = factors[0]
    for f in factors[1:]:
        out = out * f
    return out


def apply_scaled(a, scale=1.0, shift=0.0):
    return a * scale + shift


def forward_kwargs(a, **kwargs):
    return apply_scaled(a, **kwargs)


def with_eps(eps, a, b):
    return a * b + eps


def star_args_kwargs(x):
    params = (x, np.cos(x))
    star = lambda *args: args[0] * args[1]   # noqa: E731
    opts = {"scale": 3.0}
    return (np.sum(product_of(x, x, np.sin(x))) + np.sum(forward_kwargs(x, scale=2.0, shift=1.0))
            + np.sum(with_eps(0.5, *params)) + np.sum(star(x, x)) + np.sum(apply_scaled(x, **opts)))


def jvp_in_variables(x):
    primals = (x,)
    tangents = (np.ones_like(x),)
    y, t = jvp(np.sin, primals, tangents)
    y2, t2 = jvp(lambda a: a * np.exp(a), (x,), (x,))
    return np.sum(t * y) + np.sum(t2)


def dict_comprehension(x):
    d = {k: x * (i + 1) for i, k in enumerate(["u", "v"])}
    return np.sum(d["u"] * d["v"])


def make_scale(c):
    return lambda a: a * c


def closure_keeps_values(x):
    c = x * 2.0
    scale = make_scale(c)
    c = c * 10.0                       # the closure was made with the old c
    total = 0.0
    for i in range(3):
        total = total + np.sum(make_scale(x * i)(x))   # a factory called in a loop
    return np.sum(scale(x)) + np.sum(c) + total


def make_adder(c):
    return lambda a: a + c


def closure_called_directly(x):
    return np.sum(make_adder(2.0)(x) ** 2) + np.sum(make_adder(x)(x))


# mini-stax, as stax writes it: layers are (init_fun, apply_fun) pairs, apply_fun takes
# (params, inputs, **kwargs), serial forwards **kwargs through the list of layers

def Dense(out_dim):
    def init_fun(rng, input_shape):
        w = rng.standard_normal((input_shape[-1], out_dim)) * 0.3
        return input_shape[:-1] + (out_dim,), (w, np.zeros(out_dim))

    def apply_fun(params, inputs, **kwargs):
        W, b = params
        return np.dot(inputs, W) + b
    return init_fun, apply_fun


def elementwise(fun, **fun_kwargs):
    init_fun = lambda rng, input_shape: (input_shape, ())   # noqa: E731
    apply_fun = lambda params, inputs, **kwargs: fun(inputs, **fun_kwargs)  # noqa: E731
    return init_fun, apply_fun


Tanh = elementwise(np.tanh)


def serial(*layers):
    init_funs, apply_funs = zip(*layers)

    def init_fun(rng, input_shape):
        params = []
        for init in init_funs:
            input_shape, param = init(rng, input_shape)
            params.append(param)
        return input_shape, params

    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.pop("rng", None)
        for fun, param in zip(apply_funs, params):
            inputs = fun(param, inputs, rng=rng, **kwargs)
        return inputs
    return init_fun, apply_fun


init_net, predict = serial(Dense(4), Tanh, Dense(1))
_, NET_PARAMS = init_net(np.random.default_rng(0), (5,))


def stax_loss(params, inputs, targets):
    preds = predict(params, inputs)
    return np.sum((preds - targets) ** 2)


def stax_program(x):
    return stax_loss(NET_PARAMS, x, np.ones(1))


PROGRAMS = {f.__name__: f for f in [
    sgd_tree_map, gram, gram_local_kernel, switch_lambdas, scan_make_step, module_argument,
    functions_in_list, function_default, partial_vmap, reduce_lambda, star_args_kwargs,
    jvp_in_variables, dict_comprehension, closure_called_directly, stax_program,
    closure_keeps_values]}


# ---------------------------------------------------------------------- helpers

def fd_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def close(a, b, tol=1e-6):
    np.testing.assert_allclose(np.asarray(a, float), np.asarray(b, float), rtol=tol,
                               atol=tol)


# ------------------------------------------------------------------------ tests

@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_grad_matches_finite_differences(name):
    f = PROGRAMS[name]
    close(grad(f)(X), fd_grad(f, X))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_jit_matches_numpy(name):
    f = PROGRAMS[name]
    close(jit(f)(X), f(X), 1e-12)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_jvp_matches_directional_difference(name):
    f = PROGRAMS[name]
    v = np.cos(3 * X)
    y, t = jvp(f, (X,), (v,))
    close(y, f(X), 1e-12)
    eps = 1e-6
    close(t, (f(X + eps * v) - f(X - eps * v)) / (2 * eps))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_vmap_matches_loop(name):
    f = PROGRAMS[name]
    close(vmap(f)(BATCH), [f(b) for b in BATCH], 1e-12)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_vmap_of_grad_and_grad_of_vmap(name):
    f = PROGRAMS[name]
    per_row = np.stack([grad(f)(b) for b in BATCH])
    close(vmap(grad(f))(BATCH), per_row, 1e-10)
    close(grad(lambda B: np.sum(vmap(f)(B)))(BATCH), per_row, 1e-10)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_jit_of_grad(name):
    f = PROGRAMS[name]
    close(jit(grad(f))(X), grad(f)(X), 1e-10)


# ----- the autodiff cookbook's first cell: NumPy functions transformed directly

def test_cookbook_grad_of_numpy_functions():
    close(grad(np.tanh)(2.0), 1 - np.tanh(2.0) ** 2, 1e-12)
    close(grad(grad(np.tanh))(2.0), -2 * np.tanh(2.0) * (1 - np.tanh(2.0) ** 2), 1e-10)
    second = lambda t: -2 * np.tanh(t) * (1 - np.tanh(t) ** 2)   # noqa: E731
    close(grad(grad(grad(np.tanh)))(2.0), (second(2.0 + 1e-6) - second(2.0 - 1e-6)) / 2e-6)
    close(astjax.jacfwd(np.exp)(X), np.diag(np.exp(X)), 1e-12)
    close(astjax.jacrev(np.exp)(X), np.diag(np.exp(X)), 1e-12)
    close(astjax.jacobian(np.exp)(X), np.diag(np.exp(X)), 1e-12)
    close(jit(np.tanh)(X), np.tanh(X), 1e-15)
    close(vmap(np.sin)(BATCH), np.sin(BATCH), 1e-15)
    close(jvp(np.exp, (X,), (X,))[1], np.exp(X) * X, 1e-12)
    close(grad(np.sum)(X), np.ones_like(X), 0)
    close(vmap(grad(np.tanh))(X), 1 - np.tanh(X) ** 2, 1e-12)


# ----- stax / MNIST: per-example gradients, SGD under jit

def _stax_batch():
    rng = np.random.default_rng(1)
    return rng.standard_normal((4, 5)), rng.standard_normal((4, 1))


def test_stax_per_example_gradients():
    inputs, targets = _stax_batch()
    per_example = vmap(grad(stax_loss), in_axes=(None, 0, 0))(NET_PARAMS, inputs, targets)
    for k in range(len(inputs)):
        one = grad(stax_loss)(NET_PARAMS, inputs[k], targets[k])
        for got, want in zip(tree_util.tree_leaves(per_example), tree_util.tree_leaves(one)):
            close(got[k], want, 1e-10)
    # against finite differences on one weight
    (W, b), _, _ = NET_PARAMS[0], NET_PARAMS[1], NET_PARAMS[2]
    eps = 1e-6

    def with_w00(v):
        W2 = W.copy()
        W2[0, 0] = v
        return stax_loss([(W2, b)] + list(NET_PARAMS[1:]), inputs[0], targets[0])

    close(per_example[0][0][0][0, 0], (with_w00(W[0, 0] + eps) - with_w00(W[0, 0] - eps))
          / (2 * eps))


def test_sgd_step_under_jit():
    inputs, targets = _stax_batch()

    def update(params, inputs, targets):
        grads = grad(stax_loss)(params, inputs, targets)
        return tree_util.tree_map(lambda p, g: p - 0.05 * g, params, grads)

    eager = tree_util.tree_map(lambda p, g: p - 0.05 * g, NET_PARAMS,
                               grad(stax_loss)(NET_PARAMS, inputs, targets))
    got = jit(update)(NET_PARAMS, inputs, targets)
    for a, b in zip(tree_util.tree_leaves(got), tree_util.tree_leaves(eager)):
        close(a, b, 1e-12)


# ----- the seeds' wave code, with step = make_step(np, ...) and lax.scan(step, ...)

def test_wave_make_step_form():
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[1] / "examples" / "wave.py"
    spec = importlib.util.spec_from_file_location("wave_example_pe", path)
    wave = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wave)
    true_v, v, problem, observed = wave.setup(12, 12, 30, np.float64)
    want, want_last = wave.simulate_loop(true_v, **problem)
    got, got_last = wave.simulate_steps(true_v, **problem)
    close(got, want, 1e-12)
    close(jit(wave.simulate_steps)(true_v, **problem)[0], want, 1e-12)
    g = grad(wave.misfit_steps)(v, observed=observed, **problem)
    close(g, grad(wave.misfit)(v, observed=observed, **problem), 1e-12)
    eps = 1e-3
    for i, j in [(3, 4), (8, 6), (1, 1)]:
        vp, vm = v.copy(), v.copy()
        vp[i, j] += eps
        vm[i, j] -= eps
        fd = (wave.misfit_steps(vp, observed=observed, **problem)
              - wave.misfit_steps(vm, observed=observed, **problem)) / (2 * eps)
        assert abs(g[i, j] - fd) <= 1e-5 * np.abs(g).max(), (g[i, j], fd)


# ----- the rest of the list

def test_vmap_of_vjp_and_linearize_functions():
    y, pull = astjax.vjp(lambda a: np.sin(a) * 2, X)
    close(vmap(pull)(np.eye(5))[0], np.diag(2 * np.cos(X)), 1e-12)
    y, lin = astjax.linearize(lambda a: np.sin(a) * 2, X)
    close(vmap(lin)(np.eye(5)), np.diag(2 * np.cos(X)), 1e-12)


def test_grad_of_jit_of_vmap_and_of_nested_vmaps():
    f = jit(vmap(lambda a: np.sin(a) * a))
    close(grad(lambda a: np.sum(f(a)))(X), np.cos(X) * X + np.sin(X), 1e-12)
    y = np.array([0.5, -1.0, 2.0])
    g = vmap(vmap(lambda a, b: np.sin(a) * b, (0, None)), (None, 0))
    ref = np.array([[np.sin(a) * b for a in X] for b in y])
    close(g(X, y), ref, 1e-15)
    close(jit(g)(X, y), ref, 1e-15)
    close(grad(lambda a: np.sum(g(a, y)))(X), np.cos(X) * y.sum(), 1e-12)


def flatten_double(t):
    leaves, tdef = tree_util.tree_flatten(t)
    return tree_util.tree_unflatten(tdef, [leaf * 2 for leaf in leaves])


def test_tree_flatten_under_vmap():
    tree = {"a": BATCH, "b": BATCH[:, :2]}
    out = vmap(flatten_double)(tree)
    close(out["a"], 2 * BATCH, 0)
    close(out["b"], 2 * BATCH[:, :2], 0)


# ----- no trace of the meta-level in generated code

@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_generated_code_has_no_meta_level(name):
    f = PROGRAMS[name]
    for transformed in (grad(f), jit(f)):
        source = astjax.make_source(transformed)(X)
        source = re.sub(r"/\*.*?\*/", "", source, flags=re.S)   # kernels' C comments
        code = "\n".join(line.split("#")[0] for line in source.splitlines())
        for word in ("_partial_of", "StaticSeq", "FuncArg", "LocalFunc", "<lambda>",
                     "anonymous"):
            assert word not in code, (word, source)
        assert not re.search(r"\blambda\b", code), source
        assert not re.search(r"\bExternal\b", code)


# ----- what cannot be known is refused where it is written

def spread_parameter(x, params):
    return with_eps(0.5, *params)


def keys_chosen_at_run_time(x):
    opts = {"scale": 2.0} if x[0] > 0 else {"shift": 1.0}
    return np.sum(apply_scaled(x, **opts))


def pop_then_mutate(x):
    def inner(a, **kw):
        kw.update(scale=2.0)
        return apply_scaled(a, **kw)
    return np.sum(inner(x, shift=1.0))


@pytest.mark.parametrize("fun,args,message", [
    (spread_parameter, (X, (X, X)), "length is known"),
    (keys_chosen_at_run_time, (X,), "keys are known"),
    (pop_then_mutate, (X,), "in place"),
])
def test_refusals_are_located(fun, args, message):
    with pytest.raises(astjax.TransformError) as info:
        grad(fun)(*args)
    text = str(info.value)
    assert message in text, text
    assert "test_functions_as_values.py" in text and "hint:" in text, text


def test_kwargs_pop_is_resolved_statically():
    def forward(a, **kwargs):
        rng = kwargs.pop("rng", None)
        shift = kwargs.pop("shift", 0.0) + kwargs.get("bias", 0.0)
        return apply_scaled(a, shift=shift, **kwargs), rng

    def loss(x):
        out, rng = forward(x, rng=None, scale=3.0, shift=0.5)
        return np.sum(out ** 2)

    close(grad(loss)(X), 2 * (3 * X + 0.5) * 3, 1e-12)


def test_frontend_doctests():
    import doctest

    from astjax.frontend import inline, nested, numpy_functions, scopes, static_values
    for module in (inline, nested, numpy_functions, scopes, static_values):
        result = doctest.testmod(module)
        assert result.attempted > 0, module.__name__
        assert result.failed == 0, module.__name__


def shadowed_constant(x):
    n = 3
    k = 2
    inner = vmap(lambda a: (lambda n: a * n)(2.0) + n)(x)
    return np.sum(inner) + np.sum(vmap(lambda a: np.sum(np.ones(k) * a) + sum(
        a * k for k in range(3)))(x))


def test_lifted_constants_respect_shadowing():
    for f in (jit(shadowed_constant), shadowed_constant):
        close(f(X), np.sum(X * 2.0 + 3) + np.sum(2 * X + 3 * X), 1e-12)
    close(grad(shadowed_constant)(X), np.full_like(X, 7.0), 1e-12)


# Defaults of a nested def or lambda are evaluated where it is defined, once, as Python
# does; they used to be evaluated at each call, so a variable rebound between the
# definition and the call gave its new value (a silently wrong gradient).

def _default_of_lambda(x):
    a = 2.0
    g = lambda y, a=a: y * a      # noqa: E731
    a = 5.0
    return np.sum(g(x) * a)


def _default_of_def(x):
    s = x * 1.0
    def inner(y, t=s, *, k=s[0]):
        return y * t + k
    s = s + 10.0
    return np.sum(inner(x) ** 2 + s)


def _default_function(x):
    act = np.tanh
    def inner(y, f=act):
        return f(y)
    act = np.sin
    return np.sum(inner(x) + act(x))


def _default_in_a_loop(x):
    total = 0.0
    for i in range(3):
        def term(y, k=i * 1.0):
            return y * k
        total = total + np.sum(term(x) ** 2)
    return total


def _default_in_nested_grad(x):
    a = x[0] * 1.0
    g = lambda y, a=a: np.sum(y ** 2 * a)      # noqa: E731
    a = a + 3.0
    return np.sum(astjax.grad(g)(x) * a)


@pytest.mark.parametrize("f", [_default_of_lambda, _default_of_def, _default_function,
                               _default_in_a_loop, _default_in_nested_grad],
                         ids=lambda f: f.__name__)
def test_defaults_bind_where_the_function_is_defined(f):
    from conftest import fd_vector_grad
    x = np.array([0.3, -0.5, 1.1])
    np.testing.assert_allclose(astjax.jit(f)(x), f(x), rtol=1e-12)
    np.testing.assert_allclose(astjax.grad(f)(x), fd_vector_grad(f, x), rtol=1e-6, atol=1e-8)
    rows = np.stack([x, x * 0.5])
    np.testing.assert_allclose(astjax.vmap(f)(rows), [f(r) for r in rows], rtol=1e-12)
