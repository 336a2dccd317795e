"""Seed case ellipse_spring_particle (seed 004 Ex. 4.1, Figs 11-14): a particle on a rigid
elliptic wire, pulled to the (off-centre) origin by a spring. UK against the minimal-coordinate
equation on the ellipse's parameter (scipy DOP853); the UK constraint force against the seed's
two Kane-form expressions (eqs 251-253 and 269, singular at y = 0, which the UK form is not);
energy; and constraint drift without stabilisation (fixed-step Kutta-Merson) vs Baumgarte.

    python examples/ellipse_spring_particle.py [--quick] [--out DIR]
"""

import diffrax
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
from scipy.integrate import solve_ivp

import ukjax
from _common import example_args, save_figure
from references import ellipse_kane_constraint_force, ellipse_normal_constraint_force
from ukjax.systems import EllipseSpringParticle


def main():
    args = example_args(__doc__)
    s = EllipseSpringParticle()  # m = K = 1, a_e = 1, b_e = 2, c_e = 1, x0 = 0.5
    al, be = np.sqrt(s.c_e / s.a_e), np.sqrt(s.c_e / s.b_e)
    speed = 1.2
    q0, qd0 = s.initial_state(speed)
    T = 20.0
    ts = np.linspace(0.0, T, 401 if args.quick else 2001)

    def minimal(t, y):  # x = x0 + al cos u, y = be sin u
        u, w = y
        g = al**2 * np.sin(u) ** 2 + be**2 * np.cos(u) ** 2
        dg = 2 * np.sin(u) * np.cos(u) * (al**2 - be**2)
        dV = s.K * (-(s.x0 + al * np.cos(u)) * al * np.sin(u) + be**2 * np.sin(u) * np.cos(u))
        return [w, (-dV / s.mass - 0.5 * dg * w**2) / g]

    ref = solve_ivp(
        minimal, (0, T), [0.0, speed / be], method="DOP853", rtol=1e-12, atol=1e-12, t_eval=ts
    ).y.T
    xy_ref = np.stack([s.x0 + al * np.cos(ref[:, 0]), be * np.sin(ref[:, 0])], 1)
    sol = ukjax.simulate(s, q0, qd0, jnp.asarray(ts))
    d = ukjax.diagnostics(s, sol)
    dev = np.abs(np.asarray(sol.q) - xy_ref).max()
    Fc = np.asarray(d.Qc_ideal)
    ok = np.abs(np.asarray(sol.q[:, 1])) > 1e-2  # the Kane forms are singular at y = 0
    F251 = np.asarray(
        jax.vmap(lambda q, qd: ellipse_kane_constraint_force(s, q, qd))(sol.q, sol.qd)
    )
    F269 = np.asarray(
        jax.vmap(lambda q, qd: ellipse_normal_constraint_force(s, q, qd))(sol.q, sol.qd)
    )
    rel = lambda F: np.abs(F[ok] - Fc[ok]).max() / np.abs(Fc).max()
    print(
        f"{T:g} s, Dopri8: max |q - q_minimal| = {dev:.1e} m, max |E - E0| = "
        f"{float(jnp.abs(d.energy - d.energy[0]).max()):.1e} J, max |phi| = "
        f"{float(jnp.abs(d.position).max()):.1e}"
    )
    print(
        f"  F^c (UK) vs eqs 251-253: {rel(F251):.1e}, vs eq 269: {rel(F269):.1e} (relative, at |y| "
        "> 0.01; "
        f"{int((~ok).sum())} of {len(ts)} samples near y = 0 skipped: the Kane form divides by y)"
    )
    t_long = np.linspace(0.0, 200.0 if args.quick else 1000.0, 2001)
    drift = {}
    for name, kw in (
        (
            "Kutta-Merson dt = 0.02",
            dict(
                solver=ukjax.KuttaMerson(),
                dt0=0.02,
                stepsize_controller=diffrax.ConstantStepSize(),
                stabilization=ukjax.NoStabilization(),
            ),
        ),
        (
            "+ Baumgarte (critically damped, w = 10)",
            dict(
                solver=ukjax.KuttaMerson(),
                dt0=0.02,
                stepsize_controller=diffrax.ConstantStepSize(),
                stabilization=ukjax.Baumgarte.critically_damped(10.0),
            ),
        ),
    ):
        sl = ukjax.simulate(s, q0, qd0, jnp.asarray(t_long), max_steps=200000, **kw)
        drift[name] = np.abs(np.asarray(ukjax.diagnostics(s, sl).position[:, 0]))
        print(
            f"  {name:<42} {t_long[-1]:g} s: max |phi| = {drift[name].max():.1e}, final "
            f"{drift[name][-1]:.1e}"
        )
    fig, ax = plt.subplots(1, 4, figsize=(21, 4.4))
    ax[0].plot(sol.q[:, 0], sol.q[:, 1])
    ax[0].plot([0], [0], "ro", label="spring anchor O")
    ax[0].plot([s.x0], [0], "k+", label="ellipse centre")
    ax[0].set(title="Fig 11: path on the wire", xlabel="x", ylabel="y", aspect="equal")
    ax[1].plot(ts, sol.q[:, 0], label="x")
    ax[1].plot(ts, sol.q[:, 1], label="y")
    ax[1].plot(ts, sol.qd[:, 0], label="x'")
    ax[1].plot(ts, sol.qd[:, 1], label="y'")
    ax[1].plot(ts[::40], xy_ref[::40, 0], "k.", ms=3, label="minimal coords")
    ax[1].plot(ts[::40], xy_ref[::40, 1], "k.", ms=3)
    ax[1].set(title="Figs 12-13: coordinates and speeds", xlabel="t (s)")
    F251m = np.where(ok[:, None], F251, np.nan)
    F269m = np.where(ok[:, None], F269, np.nan)
    ax[2].plot(ts, Fc[:, 0], label="F^c_x (UK)")
    ax[2].plot(ts, Fc[:, 1], label="F^c_y (UK)")
    ax[2].plot(ts[::15], F251m[::15, 0], "k.", ms=3, label="eqs 251-253")
    ax[2].plot(ts[::15], F251m[::15, 1], "k.", ms=3)
    ax[2].plot(ts[::23], F269m[::23, 0], "rx", ms=3, label="eq 269")
    ax[2].plot(ts[::23], F269m[::23, 1], "rx", ms=3)
    ax[2].set(title="Fig 14: constraint force, three ways", xlabel="t (s)", ylabel="N")
    for name, v in drift.items():
        ax[3].semilogy(t_long, v + 1e-18, label=name)
    ax[3].set(title="constraint drift |phi|", xlabel="t (s)")
    for a in ax:
        a.legend(fontsize=7)
    save_figure(fig, args, "ellipse_spring_particle.png")


if __name__ == "__main__":
    main()
