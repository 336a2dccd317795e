"""Seed case simple_pendulum_lagrange_hamilton (seed 001 §3.3.2 and §3.4.3): the pendulum in
its minimal coordinate. ukjax builds Lagrange's equation (eq 15m) from T and V by autodiff; the
reference integrates Hamilton's equations (eqs 21g-i, with the seed's p^2/(ml^2) corrected to
p/(ml^2)) written out by hand, with scipy DOP853 at rtol 1e-12.

    python examples/simple_pendulum_lagrange_hamilton.py [--quick] [--out DIR]
"""

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
from scipy.integrate import solve_ivp

import ukjax
from _common import example_args, save_figure
from references import pendulum_hamilton_rhs, pendulum_hamiltonian, pendulum_momentum
from ukjax.systems import SimplePendulum


def main():
    args = example_args(__doc__)
    pend = SimplePendulum(mass=1.0, length=1.0, g=9.81)
    ml2 = pend.mass * pend.length**2
    ts = np.linspace(0.0, 10.0, 201 if args.quick else 1001)
    fig, ax = plt.subplots(1, 3, figsize=(16, 4.3))
    worst = 0.0
    rhs = jax.jit(lambda t, y: pendulum_hamilton_rhs(pend, t, y))  # compiled once for scipy
    for th0 in (0.5, 1.5, 2.5, 3.0):
        ref = solve_ivp(
            lambda t, y: np.asarray(rhs(t, y)),
            (0, ts[-1]),
            [th0, 0.0],
            method="DOP853",
            rtol=1e-12,
            atol=1e-12,
            t_eval=ts,
        ).y.T
        sol = ukjax.simulate(pend, jnp.array([th0]), jnp.array([0.0]), jnp.asarray(ts))
        dev = max(
            np.abs(np.asarray(sol.q[:, 0]) - ref[:, 0]).max(),
            np.abs(np.asarray(pendulum_momentum(pend, sol.qd[:, 0])) - ref[:, 1]).max() / ml2,
        )
        worst = max(worst, dev)
        H = jax.vmap(lambda q, p: pendulum_hamiltonian(pend, q, p))(
            sol.q, pendulum_momentum(pend, sol.qd)
        )
        print(
            f"theta0 = {th0:3.1f}: max |theta_Lagrange - theta_Hamilton| = {dev:.1e}, "
            f"max |H - H0| = {float(jnp.abs(H - H[0]).max()):.1e}"
        )
        ax[0].plot(ts, sol.q[:, 0], label=f"theta0 = {th0}")
        ax[0].plot(ts[::20], ref[::20, 0], "k.", ms=3)
        ax[1].plot(sol.q[:, 0], pendulum_momentum(pend, sol.qd[:, 0]), label=f"theta0 = {th0}")
        ax[2].semilogy(ts, jnp.abs(H - H[0]) + 1e-18, label=f"theta0 = {th0}")
    print(f"largest deviation from the Hamilton reference: {worst:.1e} rad")
    ax[0].set(
        title="theta(t): ukjax Lagrange (lines), scipy Hamilton (dots)",
        xlabel="t (s)",
        ylabel="theta (rad)",
    )
    ax[1].set(title="phase portrait (theta, p = m l^2 theta')", xlabel="theta", ylabel="p")
    ax[2].set(title="|H - H0| (eq 21g)", xlabel="t (s)")
    for a in ax:
        a.legend(fontsize=7)
    save_figure(fig, args, "simple_pendulum_lagrange_hamilton.png")


if __name__ == "__main__":
    main()
