"""2-D acoustic wave simulation with lax.scan, and full-waveform inversion with grad.

The simulation (staggered finite differences with np.pad, a Ricker source) is
written for NumPy and stepped with ``astjax.lax.scan``.  Full-waveform inversion
(FWI) then recovers the velocity model from receiver recordings: the gradient of the
data misfit with respect to velocity comes from ``astjax.value_and_grad`` through
the whole time loop.

Run: python examples/wave.py [--nx 80 --steps 300 --iters 8 --png wave.png]
(the PNG needs matplotlib: pip install ".[examples]")
"""
from __future__ import annotations

import argparse

import numpy as np

import astjax
from astjax import lax


def ricker(t, f0, t0):
    """Ricker wavelet: the second derivative of a Gaussian, peak frequency f0."""
    a = (np.pi * f0) ** 2
    return (1.0 - 2.0 * a * (t - t0) ** 2) * np.exp(-a * (t - t0) ** 2)


def simulate(velocity, density, wavelet, source_field, receiver_row, dx, dy, dt):
    """Pressure recorded along ``receiver_row`` at every step, and the last wavefield."""
    kappa = density * velocity ** 2
    density_half_x = np.pad(0.5 * (density[1:, :] + density[:-1, :]), ((0, 1), (0, 0)),
                            mode="edge")
    density_half_y = np.pad(0.5 * (density[:, 1:] + density[:, :-1]), ((0, 0), (0, 1)),
                            mode="edge")
    injection = (dt * dt * 4.0 * np.pi) * velocity ** 2 * source_field
    zero = np.zeros_like(velocity)

    def single_step(carry, amplitude):
        pressure_past, pressure_present = carry
        dpressure_dx = np.pad((pressure_present[1:, :] - pressure_present[:-1, :]) / dx,
                              ((0, 1), (0, 0)))
        dpressure_dy = np.pad((pressure_present[:, 1:] - pressure_present[:, :-1]) / dy,
                              ((0, 0), (0, 1)))
        pressure_xx = dpressure_dx / density_half_x
        pressure_yy = dpressure_dy / density_half_y
        dpressurexx_dx = np.pad((pressure_xx[1:, :] - pressure_xx[:-1, :]) / dx,
                                ((1, 0), (0, 0)))
        dpressureyy_dy = np.pad((pressure_yy[:, 1:] - pressure_yy[:, :-1]) / dy,
                                ((0, 0), (1, 0)))
        pressure_future = (2.0 * pressure_present - pressure_past
                           + (dt * dt) * (dpressurexx_dx + dpressureyy_dy) * kappa
                           + amplitude * injection)
        return (pressure_present, pressure_future), pressure_future[receiver_row]

    (_, last), traces = lax.scan(single_step, (zero, zero), wavelet)
    return traces, last


def misfit(velocity, density, wavelet, source_field, receiver_row, dx, dy, dt, observed):
    """Half the squared difference between simulated and observed recordings."""
    traces, _ = simulate(velocity, density, wavelet, source_field, receiver_row, dx, dy, dt)
    return 0.5 * np.sum((traces - observed) ** 2)


def make_step(xp, velocity, density, source_field, receiver_row, dx, dy, dt):
    """The time step as a closure, for any NumPy-like module ``xp`` (written once).

    This is the usual way the simulation is written for JAX: a factory builds the step
    function over the model, ``lax.scan`` runs it.  Under astjax the factory, the
    module argument and the closure it returns are resolved when the code is
    generated: the step is inlined into the scan loop.
    """
    kappa = density * velocity ** 2
    density_half_x = xp.pad(0.5 * (density[1:, :] + density[:-1, :]), ((0, 1), (0, 0)),
                            mode="edge")
    density_half_y = xp.pad(0.5 * (density[:, 1:] + density[:, :-1]), ((0, 0), (0, 1)),
                            mode="edge")
    injection = (dt * dt * 4.0 * xp.pi) * velocity ** 2 * source_field

    def step(carry, amplitude):
        pressure_past, pressure_present = carry
        pressure_xx = xp.pad((pressure_present[1:, :] - pressure_present[:-1, :]) / dx,
                             ((0, 1), (0, 0))) / density_half_x
        pressure_yy = xp.pad((pressure_present[:, 1:] - pressure_present[:, :-1]) / dy,
                             ((0, 0), (0, 1))) / density_half_y
        laplacian = (xp.pad((pressure_xx[1:, :] - pressure_xx[:-1, :]) / dx, ((1, 0), (0, 0)))
                     + xp.pad((pressure_yy[:, 1:] - pressure_yy[:, :-1]) / dy, ((0, 0), (1, 0))))
        pressure_future = (2.0 * pressure_present - pressure_past
                           + (dt * dt) * laplacian * kappa + amplitude * injection)
        return (pressure_present, pressure_future), pressure_future[receiver_row]

    return step


def simulate_steps(velocity, density, wavelet, source_field, receiver_row, dx, dy, dt):
    """``simulate`` written with ``step = make_step(np, ...)`` and ``lax.scan(step, ...)``."""
    step = make_step(np, velocity, density, source_field, receiver_row, dx, dy, dt)
    zero = np.zeros_like(velocity)
    (_, last), traces = lax.scan(step, (zero, zero), wavelet)
    return traces, last


def misfit_steps(velocity, density, wavelet, source_field, receiver_row, dx, dy, dt,
                 observed):
    """``misfit`` through the make_step form of the simulation."""
    traces, _ = simulate_steps(velocity, density, wavelet, source_field, receiver_row,
                               dx, dy, dt)
    return 0.5 * np.sum((traces - observed) ** 2)


def simulate_loop(velocity, density, wavelet, source_field, receiver_row, dx, dy, dt):
    """The same simulation as a plain NumPy for-loop (the benchmark's reference)."""
    kappa = density * velocity ** 2
    density_half_x = np.pad(0.5 * (density[1:, :] + density[:-1, :]), ((0, 1), (0, 0)),
                            mode="edge")
    density_half_y = np.pad(0.5 * (density[:, 1:] + density[:, :-1]), ((0, 0), (0, 1)),
                            mode="edge")
    injection = (dt * dt * 4.0 * np.pi) * velocity ** 2 * source_field
    past = np.zeros_like(velocity)
    present = np.zeros_like(velocity)
    traces = np.zeros((len(wavelet), velocity.shape[1]), velocity.dtype)
    for it in range(len(wavelet)):
        pxx = np.pad((present[1:, :] - present[:-1, :]) / dx, ((0, 1), (0, 0))) / density_half_x
        pyy = np.pad((present[:, 1:] - present[:, :-1]) / dy, ((0, 0), (0, 1))) / density_half_y
        lap = (np.pad((pxx[1:, :] - pxx[:-1, :]) / dx, ((1, 0), (0, 0)))
               + np.pad((pyy[:, 1:] - pyy[:, :-1]) / dy, ((0, 0), (1, 0))))
        future = 2.0 * present - past + (dt * dt) * lap * kappa + wavelet[it] * injection
        past, present = present, future
        traces[it] = future[receiver_row]
    return traces, present


def setup(nx=80, ny=80, steps=300, dtype=np.float32):
    """A layered model with a fast circular anomaly, a smooth starting model, and data."""
    dx = dy = 10.0
    dt = 1e-3
    f0 = 15.0
    x, y = np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij")
    true_v = np.where(x > nx // 2, 2500.0, 2000.0)
    true_v = true_v + 400.0 * ((x - nx * 0.6) ** 2 + (y - ny * 0.5) ** 2 < (nx * 0.12) ** 2)
    start_v = np.full((nx, ny), 2200.0)
    density = np.full((nx, ny), 1.0)
    source_field = np.zeros((nx, ny))
    source_field[nx // 8, ny // 2] = 1.0
    wavelet = ricker(np.arange(steps) * dt, f0, 1.2 / f0)
    cast = (lambda a: np.asarray(a, dtype))
    problem = dict(density=cast(density), wavelet=cast(wavelet),
                   source_field=cast(source_field), receiver_row=nx // 8, dx=dx, dy=dy, dt=dt)
    observed, _ = simulate(cast(true_v), **problem)
    return cast(true_v), cast(start_v), problem, observed


def invert(velocity, problem, observed, iters=8, step=60.0, log=print, loss=None):
    """Gradient descent on the misfit; the update's largest entry is ``step`` m/s."""
    value_and_grad = astjax.value_and_grad(loss or misfit)
    history = []
    for it in range(iters):
        value, g = value_and_grad(velocity, observed=observed, **problem)
        history.append(float(value))
        log(f"iteration {it}: misfit {float(value):.6g}")
        velocity = velocity - (step / (np.max(np.abs(g)) + 1e-30)) * g
    return velocity, history


def save_png(path, last_wavefield, true_v, recovered_v):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(12, 4))
    for ax, img, title in zip(axes, (last_wavefield, true_v, recovered_v),
                              ("last wavefield", "true velocity", "recovered velocity")):
        im = ax.imshow(img.T, cmap="seismic" if title == "last wavefield" else "viridis")
        ax.set_title(title)
        fig.colorbar(im, ax=ax, shrink=0.8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nx", type=int, default=80)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--iters", type=int, default=8)
    parser.add_argument("--png", default="wave.png")
    parser.add_argument("--form", choices=("closure", "make_step"), default="closure",
                        help="the simulation as one function, or step = make_step(np, ...)")
    args = parser.parse_args(argv)
    true_v, velocity, problem, observed = setup(args.nx, args.nx, args.steps)
    loss = misfit_steps if args.form == "make_step" else misfit
    recovered, history = invert(velocity, problem, observed, args.iters, loss=loss)
    print(f"misfit {history[0]:.6g} -> {history[-1]:.6g}")
    try:
        _, last = simulate(true_v, **problem)
        save_png(args.png, last, true_v, recovered)
        print(f"wrote {args.png}")
    except ImportError:
        print("matplotlib is not installed: no PNG (pip install '.[examples]')")


if __name__ == "__main__":
    main()
