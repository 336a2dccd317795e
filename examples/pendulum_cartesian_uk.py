"""Seed case pendulum_cartesian_uk (seed 001 §3.6.4): the pendulum in Cartesian coordinates,
held by the holonomic constraint x^2 + y^2 = L^2 through the UK equation (eq 33h), against the
minimal-coordinate pendulum integrated by scipy DOP853; rod tension against its closed form; and
the constraint drift a poor time-marching scheme produces (the seed's warning).

    python examples/pendulum_cartesian_uk.py [--quick] [--out DIR]
"""

import diffrax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
from scipy.integrate import solve_ivp

import ukjax
from _common import example_args, save_figure
from ukjax.systems import CartesianPendulum


def main():
    args = example_args(__doc__)
    m, L, g = 1.0, 1.0, 9.81
    pend = CartesianPendulum(mass=m, length=L, g=g)
    th0 = 2.0
    T = 5.0 if args.quick else 20.0
    ts = np.linspace(0.0, T, 501)
    q0 = L * jnp.array([np.sin(th0), -np.cos(th0)])
    qd0 = jnp.zeros(2)
    ref = solve_ivp(
        lambda t, y: [y[1], -(g / L) * np.sin(y[0])],
        (0, T),
        [th0, 0.0],
        method="DOP853",
        rtol=1e-12,
        atol=1e-12,
        t_eval=ts,
    ).y.T
    sol = ukjax.simulate(pend, q0, qd0, jnp.asarray(ts))
    xy_ref = L * np.stack([np.sin(ref[:, 0]), -np.cos(ref[:, 0])], axis=1)
    dev = np.abs(np.asarray(sol.q) - xy_ref).max()
    d = ukjax.diagnostics(pend, sol)
    q, qd = np.asarray(sol.q), np.asarray(sol.qd)
    tension_cf = m * (g * q[:, 1] - np.sum(qd**2, 1)) / np.sum(q**2, 1)  # F^c = tension_cf * q
    tension = np.sum(np.asarray(d.Qc_ideal) * q, 1) / np.sum(q**2, 1)
    print(
        f"Dopri8 (rtol 1e-12), {T:g} s from theta0 = {th0}: max |q - q_minimal| = {dev:.1e} m, "
        f"max |phi| = {float(np.abs(d.position).max()):.1e}, "
        f"max |tension - closed form| = {np.abs(tension - tension_cf).max():.1e} N"
    )
    fig, ax = plt.subplots(1, 3, figsize=(16, 4.3))
    ax[0].plot(ts, q[:, 0], label="x (UK)")
    ax[0].plot(ts, q[:, 1], label="y (UK)")
    ax[0].plot(ts[::10], xy_ref[::10, 0], "k.", ms=3, label="minimal coordinates")
    ax[0].plot(ts[::10], xy_ref[::10, 1], "k.", ms=3)
    ax[0].set(title="eq 33h vs theta'' = -(g/L) sin theta", xlabel="t (s)")
    ax[1].plot(ts, np.linalg.norm(np.asarray(d.Qc_ideal), axis=1), label="|F^c| (UK)")
    ax[1].plot(ts[::10], np.abs(tension_cf[::10]) * L, "k.", ms=3, label="m|g y - |v|^2| / L")
    ax[1].set(title="rod force", xlabel="t (s)", ylabel="N")
    for name, solver, dt in (
        ("Euler, dt = 1e-3", diffrax.Euler(), 1e-3),
        ("Heun, dt = 1e-2", diffrax.Heun(), 1e-2),
        ("Kutta-Merson, dt = 1e-2", ukjax.KuttaMerson(), 1e-2),
        ("Dopri8 adaptive", None, None),
    ):
        kw = (
            {}
            if solver is None
            else dict(solver=solver, dt0=dt, stepsize_controller=diffrax.ConstantStepSize())
        )
        s = ukjax.simulate(
            pend, q0, qd0, jnp.asarray(ts), stabilization=ukjax.NoStabilization(), **kw
        )
        phi = np.abs(np.sum(np.asarray(s.q) ** 2, 1) - L**2)
        print(f"  {name:<30} max |phi| = {phi.max():.1e}")
        ax[2].semilogy(ts, phi + 1e-18, label=name)
    ax[2].set(title="constraint drift |x^2 + y^2 - L^2| (no stabilisation)", xlabel="t (s)")
    for a in ax:
        a.legend(fontsize=7)
    save_figure(fig, args, "pendulum_cartesian_uk.png")


if __name__ == "__main__":
    main()
