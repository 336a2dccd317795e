"""Seed 004 §4.6 (Bajodah 2003, Ex. 4.3): constraint drift of the varying-length pendulum
and its Baumgarte stabilisation, with the seed's fixed-step Kutta-Merson integrator.

Reproduces: the unstabilised growth of phi for dt = 0.01 and 0.001 (Figs 16-17), the
energy integral (Figs 18-19), the stabilised bound |phi| < 2.0e-11 over 500 s for
Gamma = (-20, -100), dt = 0.001 (Fig 20), its energy (Fig 22), and the 1-hour dt = 0.1 run
against the minimal-coordinate model eq 326 (Fig 21).

    python examples/varying_length_pendulum_baumgarte.py [--quick] [--out DIR]
"""

import time

import diffrax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import ukjax
from _common import example_args, save_figure
from ukjax.systems import VaryingLengthPendulum


def run(p, T, dt, stabilization=ukjax.NoStabilization(), n_save=None):
    q0, qd0 = p.initial_state()
    n_save = int(round(T / dt)) + 1 if n_save is None else n_save
    sol = ukjax.simulate(
        p,
        q0,
        qd0,
        jnp.linspace(0.0, T, n_save),
        solver=ukjax.KuttaMerson(),
        stepsize_controller=diffrax.ConstantStepSize(),
        dt0=dt,
        max_steps=int(T / dt) + 10,
        stabilization=stabilization,
    )
    return sol, ukjax.diagnostics(p, sol, stabilization=stabilization)


def main():
    args = example_args(__doc__, quick_help="50 s and 6 min instead of 500 s, 1 h")
    T, T_long = (50.0, 360.0) if args.quick else (500.0, 3600.0)
    p = VaryingLengthPendulum()
    gains = ukjax.Baumgarte.from_seed_gains(-20.0, -100.0)
    t0 = time.perf_counter()
    runs = {
        "dt=0.01": run(p, T, 0.01, n_save=1001),
        "dt=0.001": run(p, T, 0.001, n_save=1001),
        "dt=0.001, Baumgarte": run(p, T, 0.001, gains),  # every step saved: the bound
    }
    print(f"Varying-length pendulum, Kutta-Merson fixed step, t in [0, {T:g}] s")
    print(f"{'run':<22}{'max|phi| (m)':>14}{'phi(T) (m)':>14}{'max|E-E0| (J)':>15}")
    for name, (sol, d) in runs.items():
        print(
            f"{name:<22}{float(jnp.max(jnp.abs(d.position))):>14.3e}"
            f"{float(d.position[-1, 0]):>14.3e}{float(jnp.max(jnp.abs(d.energy_drift()))):>15.3e}"
        )
    bound = float(jnp.max(jnp.abs(runs["dt=0.001, Baumgarte"][1].position)))
    print(
        f"seed: |phi| < 2.0e-11 with Gamma = (-20, -100), dt = 0.001 -> ukjax {bound:.2e} "
        f"({'reproduced' if bound < 2e-11 else 'NOT reproduced'})"
    )

    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    for (name, (sol, d)), ax_phi in zip(runs.items(), [axes[0, 0], axes[0, 0], axes[0, 1]]):
        ts = np.asarray(d.ts)
        stride = max(1, len(ts) // 5000)
        phi = np.asarray(d.position[::stride, 0])
        if "Baumgarte" in name:
            ax_phi.plot(ts[::stride], phi, label=name, lw=0.8)
        else:  # the two unstabilised runs differ by five orders of magnitude
            ax_phi.semilogy(ts[::stride], np.abs(phi) + 1e-18, label=name, lw=0.8)
        axes[1, 0 if "Baumgarte" not in name else 1].plot(
            ts[::stride], np.asarray(d.energy_drift()[::stride]), label=name, lw=0.8
        )
    axes[1, 0].set_yscale("symlog", linthresh=1e-10)
    axes[0, 0].set(
        title="|phi(t)|, unstabilised (seed Figs 16-17)", xlabel="t (s)", ylabel="|phi| (m)"
    )
    axes[0, 1].set(
        title="phi(t), Baumgarte Gamma=(-20,-100), dt=0.001 (Fig 20)",
        xlabel="t (s)",
        ylabel="phi (m)",
    )
    axes[1, 0].set(title="energy integral E(t)-E(0), unstabilised (Figs 18-19)", xlabel="t (s)")
    axes[1, 1].set(title="energy integral, stabilised (Fig 22)", xlabel="t (s)")
    for ax in axes.ravel():
        ax.legend(fontsize=8)
    save_figure(fig, args, "varying_length_pendulum_drift.png")

    # Fig 21: long coarse run vs the minimal model (eq 326), same integrator and step.
    sol_u, d_u = run(p, T_long, 0.1, n_save=int(T_long) + 1)
    sol_b, d_b = run(p, T_long, 0.1, gains, n_save=int(T_long) + 1)

    def eq326(t, y, args):
        x, u = y
        return jnp.stack([u, -(4 * x * u**2 + 2 * p.g * x) / (1 + 4 * x**2)])

    mini = diffrax.diffeqsolve(
        diffrax.ODETerm(eq326),
        ukjax.KuttaMerson(),
        0.0,
        T_long,
        0.1,
        jnp.array([1.0, 0.0]),
        saveat=diffrax.SaveAt(ts=sol_u.ts),
        stepsize_controller=diffrax.ConstantStepSize(),
        max_steps=int(T_long / 0.1) + 10,
    )
    y_min = 1.0 - mini.ys[:, 0] ** 2
    print(
        f"\n{T_long:g} s at dt = 0.1 (Fig 21): y(T) minimal {float(y_min[-1]):.4f}, "
        f"nonminimal {float(sol_u.q[-1, 1]):.4g}, Baumgarte {float(sol_b.q[-1, 1]):.4f}; "
        f"max|phi|: nonminimal {float(jnp.max(jnp.abs(d_u.position))):.3g}, "
        f"Baumgarte {float(jnp.max(jnp.abs(d_b.position))):.3g}"
    )
    print(
        "  unstabilised x(t) equals the minimal model's to "
        f"{float(jnp.max(jnp.abs(sol_u.q[:, 0] - mini.ys[:, 0]))):.1e} (eq 310 has no y)"
    )
    fig, ax = plt.subplots(1, 2, figsize=(12, 4))
    tail = slice(-200, None)
    ax[0].plot(sol_u.ts[tail], y_min[tail], label="minimal (eq 326)")
    ax[0].plot(sol_b.ts[tail], sol_b.q[tail, 1], "--", label="nonminimal + Baumgarte")
    ax[0].set(title=f"y(t), last 200 s of {T_long:g} s, dt = 0.1 (Fig 21)", xlabel="t (s)")
    ax[0].legend()
    ax[1].semilogy(sol_u.ts, np.abs(np.asarray(d_u.position[:, 0])) + 1e-18, label="nonminimal")
    ax[1].semilogy(sol_b.ts, np.abs(np.asarray(d_b.position[:, 0])) + 1e-18, label="+ Baumgarte")
    ax[1].set(title="|phi(t)|, dt = 0.1", xlabel="t (s)")
    ax[1].legend()
    save_figure(fig, args, "varying_length_pendulum_long_run.png")
    print(f"done in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
