"""np.fft under every transformation, against central finite differences.

The discrete Fourier transforms are linear; what their rules must get right is the
transpose of what ``n``/``s`` do to the operand (cut or zero-pad), of the half
spectra of the real transforms (``irfft`` counts the inner bins twice), of each
``norm``, and of axes given in any order or left to NumPy's defaults.  Every case is
checked with a linear loss that reads both parts of the result (so a cotangent that
is off by a conjugation shows) under grad, jvp, vjp, vmap, vmap(grad) and jit(grad),
at real and complex operands (JAX's convention: the gradient of a real loss with
respect to ``z = a + ib`` is ``dL/da - i dL/db``).
"""
import numpy as np
import pytest

import astjax
from astjax.errors import AstjaxError

EPS = 1e-6

# (transform, keyword arguments, operand shape, complex operand)
CASES = [
    ("fft", {}, (6,), False), ("fft", {"n": 4}, (6,), True), ("fft", {"n": 9}, (5,), False),
    ("fft", {"axis": 0, "norm": "ortho"}, (3, 5), True),
    ("ifft", {"norm": "forward"}, (5,), True), ("ifft", {"n": 8, "axis": -2}, (5, 3), False),
    ("rfft", {}, (6,), False), ("rfft", {}, (7,), False), ("rfft", {"n": 5}, (8,), False),
    ("rfft", {"n": 10, "norm": "ortho"}, (6,), False),
    ("rfft", {"axis": 0, "norm": "forward"}, (4, 3), False),
    ("irfft", {}, (5,), True), ("irfft", {"n": 7}, (5,), True), ("irfft", {"n": 12}, (4,), True),
    ("irfft", {"n": 4}, (6,), True), ("irfft", {"axis": 0, "norm": "ortho"}, (4, 3), True),
    ("irfft", {"norm": "forward"}, (4,), False),
    ("hfft", {}, (5,), True), ("hfft", {"n": 7, "norm": "ortho"}, (4,), True),
    ("hfft", {"norm": "forward", "axis": 0}, (3, 2), True),
    ("ihfft", {}, (6,), False), ("ihfft", {"n": 9}, (7,), False),
    ("ihfft", {"norm": "forward"}, (5,), False),
    ("fft2", {}, (3, 4), True), ("fft2", {"s": (5, 2)}, (3, 4), False),
    ("ifft2", {"axes": (1, 0), "norm": "ortho"}, (2, 3, 4), True),
    ("rfft2", {}, (4, 6), False), ("rfft2", {"s": (3, 5)}, (4, 6), False),
    ("irfft2", {}, (3, 4), True), ("irfft2", {"s": (3, 7)}, (3, 4), True),
    ("irfft2", {"axes": (0, 2), "norm": "forward"}, (3, 2, 4), True),
    ("fftn", {}, (2, 3, 2), True), ("fftn", {"axes": (2, 0), "s": (3, 5)}, (2, 3, 4), False),
    ("ifftn", {"axes": (0,), "norm": "forward"}, (3, 4), True),
    ("rfftn", {}, (2, 3, 4), False), ("rfftn", {"s": (4, 3), "axes": (0, 1)}, (3, 4), False),
    ("irfftn", {}, (2, 3, 3), True), ("irfftn", {"s": (2, 5), "axes": (1, 2)}, (2, 3, 4), True),
]
IDS = [f"{name}-{i}" for i, (name, *_) in enumerate(CASES)]


def _operand(shape, complex_, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    return x + 1j * rng.standard_normal(shape) if complex_ else x


def make_loss(fn, kwargs, out_shape, seed=1):
    """A linear real loss of the transform reading both parts of its result."""
    rng = np.random.default_rng(seed)
    p = rng.standard_normal(out_shape)
    q = rng.standard_normal(out_shape)

    def loss(x):
        y = fn(x, **kwargs)
        return np.sum(np.real(y) * p + np.imag(y) * q)
    return loss


def _setup(case):
    name, kwargs, shape, complex_ = case
    fn = getattr(np.fft, name)
    x = _operand(shape, complex_)
    out_shape = fn(x, **kwargs).shape
    return fn, kwargs, x, make_loss(fn, kwargs, out_shape)


def fd_gradient(loss, x):
    """Central differences in JAX's convention: dL/da - i dL/db for complex x."""
    flat = x.reshape(-1)
    grad = np.zeros(flat.shape, dtype=x.dtype)
    for i in range(flat.size):
        e = np.zeros(flat.shape)
        e[i] = EPS
        grad[i] = (loss((flat + e).reshape(x.shape))
                   - loss((flat - e).reshape(x.shape))) / (2 * EPS)
        if np.iscomplexobj(x):
            de = 1j * e
            grad[i] -= 1j * (loss((flat + de).reshape(x.shape))
                             - loss((flat - de).reshape(x.shape))) / (2 * EPS)
    return grad.reshape(x.shape)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_grad_and_jit_grad(case):
    fn, kwargs, x, loss = _setup(case)
    want = fd_gradient(loss, x)
    got = astjax.grad(loss)(x)
    assert got.dtype == x.dtype and got.shape == x.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(astjax.jit(astjax.grad(loss))(x), want, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_jvp_and_vjp_are_transposes(case):
    fn, kwargs, x, _ = _setup(case)
    rng = np.random.default_rng(3)

    def transform(a):
        return fn(a, **kwargs)

    v = _operand(x.shape, np.iscomplexobj(x), seed=4)
    y, ty = astjax.jvp(transform, (x,), (v,))
    np.testing.assert_allclose(y, fn(x, **kwargs), rtol=1e-12, atol=1e-12)
    fd = (fn(x + EPS * v, **kwargs) - fn(x - EPS * v, **kwargs)) / (2 * EPS)
    np.testing.assert_allclose(ty, fd, rtol=1e-6, atol=1e-8)
    ct = rng.standard_normal(y.shape) + (1j * rng.standard_normal(y.shape)
                                        if np.iscomplexobj(y) else 0)
    _, pullback = astjax.vjp(transform, x)
    (cx,) = pullback(ct)
    # JAX's pairing: Re(sum(ct * J v)) == Re(sum(vjp(ct) * v))
    np.testing.assert_allclose(np.real(np.sum(ct * ty)), np.real(np.sum(cx * v)),
                               rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_vmap_and_vmap_of_grad(case):
    fn, kwargs, x, loss = _setup(case)
    xs = np.stack([x, 2 * x + 0.5, -x])

    def transform(a):
        return fn(a, **kwargs)

    np.testing.assert_allclose(astjax.vmap(transform)(xs), np.stack([transform(a) for a in xs]),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(astjax.vmap(astjax.grad(loss))(xs),
                               np.stack([fd_gradient(loss, a) for a in xs]),
                               rtol=1e-6, atol=1e-8)
    # the batch on another axis than the first
    moved = np.moveaxis(xs, 0, -1)
    np.testing.assert_allclose(astjax.vmap(transform, in_axes=-1)(moved),
                               np.stack([transform(a) for a in xs]), rtol=1e-12, atol=1e-12)


def test_float32_stays_single_precision():
    x = np.random.default_rng(0).standard_normal(8).astype(np.float32)

    def loss(a):
        return np.sum(np.abs(np.fft.rfft(a)) ** 2)
    g = astjax.grad(loss)(x)
    assert g.dtype == np.float32
    # Parseval for rfft's half spectrum: d/dx sum |rfft x|^2 is (weights) 2 n x-ish;
    # compare with the float64 gradient instead
    np.testing.assert_allclose(g, astjax.grad(loss)(x.astype(np.float64)), rtol=1e-4)


# ------------------------------------------------------------------ programs

def spectral_derivative(u):
    """du/dx of a periodic signal on [0, 2 pi) by the FFT."""
    n = u.shape[-1]
    k = np.fft.rfftfreq(n, d=1.0 / n)
    return np.fft.irfft(1j * k * np.fft.rfft(u), n)


def smoothness(u):
    return np.sum(spectral_derivative(u) ** 2) / u.shape[-1]


def fft_convolution(signal, kernel):
    """Circular convolution through the spectra (real signals)."""
    n = signal.shape[-1]
    return np.fft.irfft(np.fft.rfft(signal) * np.fft.rfft(kernel, n), n)


def deconvolution_loss(signal, kernel, target):
    return np.mean((fft_convolution(signal, kernel) - target) ** 2)


def power_spectrum_loss(image, target):
    power = np.abs(np.fft.fftshift(np.fft.fft2(image))) ** 2
    return np.sum((np.log1p(power) - target) ** 2)


def phase_retrieval(field, magnitude):
    z = np.fft.ifftn(np.exp(1j * field), norm="ortho")
    return np.sum((np.abs(z) - magnitude) ** 2)


def test_spectral_derivative_is_exact_and_differentiable():
    x = np.linspace(0, 2 * np.pi, 16, endpoint=False)
    u = np.sin(3 * x)
    np.testing.assert_allclose(spectral_derivative(u), 3 * np.cos(3 * x), atol=1e-12)
    want = fd_gradient(smoothness, u + 0.1 * np.cos(x))
    np.testing.assert_allclose(astjax.grad(smoothness)(u + 0.1 * np.cos(x)), want,
                               rtol=1e-6, atol=1e-8)
    # a quadratic form: its Hessian is constant and symmetric
    h = astjax.hessian(smoothness)(u)
    np.testing.assert_allclose(h, h.T, atol=1e-12)
    e = np.eye(16)[3]
    np.testing.assert_allclose(h @ e, (astjax.grad(smoothness)(u + 1e-3 * e)
                                       - astjax.grad(smoothness)(u - 1e-3 * e)) / 2e-3,
                               rtol=1e-6, atol=1e-9)


def test_deconvolution_gradients_in_both_arguments():
    rng = np.random.default_rng(5)
    signal, kernel = rng.standard_normal(12), rng.standard_normal(5)
    target = rng.standard_normal(12)
    gs, gk = astjax.grad(deconvolution_loss, argnums=(0, 1))(signal, kernel, target)
    np.testing.assert_allclose(
        gs, fd_gradient(lambda s: deconvolution_loss(s, kernel, target), signal), rtol=1e-6)
    np.testing.assert_allclose(
        gk, fd_gradient(lambda k: deconvolution_loss(signal, k, target), kernel), rtol=1e-6)
    batch = rng.standard_normal((4, 12))
    np.testing.assert_allclose(
        astjax.vmap(astjax.grad(deconvolution_loss), in_axes=(0, None, None))(
            batch, kernel, target),
        [astjax.grad(deconvolution_loss)(b, kernel, target) for b in batch], rtol=1e-12)


def test_power_spectrum_and_phase_retrieval():
    rng = np.random.default_rng(6)
    image, target = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
    np.testing.assert_allclose(astjax.grad(power_spectrum_loss)(image, target),
                               fd_gradient(lambda a: power_spectrum_loss(a, target), image),
                               rtol=1e-5, atol=1e-7)
    field, magnitude = rng.standard_normal((3, 4)), rng.uniform(0.1, 1.0, (3, 4))
    np.testing.assert_allclose(astjax.grad(phase_retrieval)(field, magnitude),
                               fd_gradient(lambda f: phase_retrieval(f, magnitude), field),
                               rtol=1e-6, atol=1e-8)
    jac = astjax.jacfwd(astjax.grad(phase_retrieval))(field, magnitude)
    jac_rev = astjax.jacrev(astjax.grad(phase_retrieval))(field, magnitude)
    np.testing.assert_allclose(jac, jac_rev, rtol=1e-9, atol=1e-10)


def test_jit_backends_agree_with_numpy():
    rng = np.random.default_rng(7)
    signal, kernel = rng.standard_normal(64), rng.standard_normal(9)
    target = rng.standard_normal(64)
    want = deconvolution_loss(signal, kernel, target)
    for backend, (available, _) in astjax.backends().items():
        if not available or backend == "cuda":
            continue
        fast = astjax.jit(deconvolution_loss, backend=backend)
        np.testing.assert_allclose(fast(signal, kernel, target), want, rtol=1e-12)
        np.testing.assert_allclose(
            astjax.jit(astjax.grad(deconvolution_loss), backend=backend)(signal, kernel, target),
            astjax.grad(deconvolution_loss)(signal, kernel, target), rtol=1e-12)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_eval_shape(case):
    fn, kwargs, x, _ = _setup(case)
    single = x.astype(np.complex64 if np.iscomplexobj(x) else np.float32)
    want = fn(single, **kwargs)
    out = astjax.eval_shape(lambda a: fn(a, **kwargs),
                            astjax.ShapeDtypeStruct(x.shape, single.dtype))
    assert (out.shape, out.dtype) == (want.shape, want.dtype)


def frequencies_scaled(x, spacing):
    return np.sum(x * np.fft.fftfreq(x.shape[0], d=spacing))


def test_frequency_grids_are_constants_and_their_spacing_is_refused():
    x = np.arange(1.0, 5.0)
    np.testing.assert_allclose(astjax.grad(frequencies_scaled)(x, 0.5), np.fft.fftfreq(4, 0.5))
    with pytest.raises(AstjaxError, match="fftfreq"):
        astjax.grad(frequencies_scaled, argnums=1)(x, 0.5)
