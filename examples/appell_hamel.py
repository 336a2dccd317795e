"""Seed case appell_hamel (seed 004 Ex. 3.1 and §3.7, Figs 3-10): the Appell-Hamel mechanism
with the linear (LC) and the nonlinear (NC) nonholonomic constraint sets. Both UK runs are
compared with the minimal form derived by hand with Kane's method (scipy DOP853, rtol 1e-12);
Fig 10's energy comparison is repeated with a fixed-step Kutta-Merson integrator, where the two
formulations drift differently.

    python examples/appell_hamel.py [--quick] [--out DIR]
"""

import diffrax
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
from scipy.integrate import solve_ivp

import ukjax
from _common import example_args, save_figure
from references import appell_hamel_reduced_rhs
from ukjax.systems import AppellHamelWheel, AppellHamelWheelNonlinear


FORMS = {"linear": AppellHamelWheel, "nonlinear": AppellHamelWheelNonlinear}


def main():
    args = example_args(__doc__)
    T = 10.0  # the weight reaches the floor (z = 0) near t = 11.6 s
    ts = np.linspace(0.0, T, 201 if args.quick else 1001)
    lin = AppellHamelWheel()
    q0, qd0 = lin.initial_state()
    rhs = jax.jit(lambda t, y: appell_hamel_reduced_rhs(lin, t, y))  # compiled once for scipy
    ref = solve_ivp(
        lambda t, y: np.asarray(rhs(t, y)),
        (0, T),
        np.r_[q0, qd0[:2]],
        method="DOP853",
        rtol=1e-12,
        atol=1e-12,
        t_eval=ts,
    ).y.T
    sols, energies = {}, {}
    for form in ("linear", "nonlinear"):
        s = FORMS[form]()
        sol = ukjax.simulate(s, q0, qd0, jnp.asarray(ts))
        d = ukjax.diagnostics(s, sol)
        sols[form], energies[form] = sol, d.energy
        dev = max(
            np.abs(np.asarray(sol.q) - ref[:, :5]).max(),
            np.abs(np.asarray(sol.qd[:, :2]) - ref[:, 5:]).max(),
        )
        print(
            f"{form:<9} (Dopri8, rtol 1e-12): max deviation from Kane reference {dev:.1e}, "
            f"max |E - E0| = {float(jnp.abs(d.energy - d.energy[0]).max()):.1e} J, "
            f"max |psi| = {float(jnp.abs(d.nonholonomic).max()):.1e}, max |phi| = "
            f"{float(jnp.abs(d.position).max()):.1e}"
        )
    print(
        "LC vs NC: max |q_LC - q_NC| = "
        f"{float(jnp.abs(sols['linear'].q - sols['nonlinear'].q).max()):.1e}; "
        f"theta(T) = {float(sols['linear'].q[-1, 0]):.4f} rad, theta'(T) = "
        f"{float(sols['linear'].qd[-1, 0]):.1e} rad/s "
        f"(settles), phi'(T) = {float(sols['linear'].qd[-1, 1]):.2f} rad/s"
    )
    dt = 0.05
    fixed = {}
    for form in ("linear", "nonlinear"):
        s = FORMS[form]()
        sol = ukjax.simulate(
            s,
            q0,
            qd0,
            jnp.asarray(ts),
            solver=ukjax.KuttaMerson(),
            dt0=dt,
            stepsize_controller=diffrax.ConstantStepSize(),
            stabilization=ukjax.NoStabilization(),  # the formulations' own drift (Fig 10)
        )
        fixed[form] = ukjax.diagnostics(s, sol)
        print(
            f"{form:<9} (Kutta-Merson, dt = {dt}): max |E - E0| = "
            f"{float(jnp.abs(fixed[form].energy - fixed[form].energy[0]).max()):.1e} J, "
            f"max |psi| = {float(jnp.abs(fixed[form].nonholonomic).max()):.1e}"
        )
    sol = sols["linear"]
    q, qd = np.asarray(sol.q), np.asarray(sol.qd)
    fig, ax = plt.subplots(2, 4, figsize=(20, 8.5))
    panels = [
        (ts, q[:, 0], "Fig 3: theta(t)", "t (s)", "rad"),
        (ts, q[:, 1], "Fig 4: phi(t)", "t (s)", "rad"),
        (ts, qd[:, 0], "Fig 5: theta'(t)", "t (s)", "rad/s"),
        (ts, qd[:, 1], "Fig 6: phi'(t)", "t (s)", "rad/s"),
        (q[:, 1], qd[:, 0], "Fig 7: theta' vs phi", "phi (rad)", "rad/s"),
        (q[:, 2], q[:, 3], "Fig 8: y vs x (the weight P)", "x (m)", "y (m)"),
        (ts, q[:, 4], "Fig 9: z(t)", "t (s)", "m"),
    ]
    for a, (x, y, title, xl, yl) in zip(ax.flat, panels):
        a.plot(x, y, label="UK, LC")
        a.set(title=title, xlabel=xl, ylabel=yl)
    nc = np.asarray(sols["nonlinear"].q)
    ax[0, 0].plot(ts[::40], nc[::40, 0], "k.", ms=4, label="UK, NC")
    ax[0, 1].plot(ts[::40], ref[::40, 1], "rx", ms=4, label="Kane reference")
    ax[0, 0].legend(fontsize=7)
    ax[0, 1].legend(fontsize=7)
    a = ax[1, 3]
    for form, style in (("linear", "-"), ("nonlinear", "--")):
        a.semilogy(
            ts, jnp.abs(energies[form] - energies[form][0]) + 1e-18, style, label=f"{form}, Dopri8"
        )
        a.semilogy(
            ts,
            jnp.abs(fixed[form].energy - fixed[form].energy[0]) + 1e-18,
            style,
            label=f"{form}, Kutta-Merson dt={dt}",
        )
    a.set(title="Fig 10: energy deviation, LC vs NC", xlabel="t (s)", ylabel="|E - E0| (J)")
    a.legend(fontsize=7)
    save_figure(fig, args, "appell_hamel.png")


if __name__ == "__main__":
    main()
