"""Seed case nonholonomic_particle_alpha (seed 004 Ex. 2.2): a particle with the rheonomic
nonholonomic constraint y' = z x' + alpha(t), alpha = sin t. ukjax (UK) against scipy DOP853 on
the seed's Kane-form equations 94-96 written out by hand; the constraint residual; and the
unconstrained z'' = F_z / m.

    python examples/nonholonomic_particle_alpha.py [--quick] [--out DIR]
"""

import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
from scipy.integrate import solve_ivp

import ukjax
from _common import example_args, save_figure
from ukjax.systems import NonholonomicParticle


def main():
    args = example_args(__doc__)
    s = NonholonomicParticle(mass=1.0, F_x=0.5, F_y=-0.3, F_z=0.2, alpha0=1.0, omega=1.0)
    m, Fx, Fy, Fz = s.mass, s.F_x, s.F_y, s.F_z

    def kane(t, y):  # y = (x, y, z, u1 = x', u2 = z', u3 = y'): eqs 94-96
        x, yy, z, u1, u2, u3 = y
        a = m * (1 + z**2)
        alpha_dot = s.alpha0 * s.omega * np.cos(s.omega * t)
        ud1 = -m * z / a * (u1 * u2 + alpha_dot) + (Fx + Fy * z) / a
        ud3 = m / a * (u1 * u2 + alpha_dot) + z / a * (Fx + Fy * z)
        return [u1, u3, u2, ud1, Fz / m, ud3]

    q0 = jnp.array([0.0, 0.0, -1.0])
    xd0, zd0 = 0.5, 0.3
    qd0 = jnp.array([xd0, -1.0 * xd0 + 0.0, zd0])  # y' = z x' + alpha(0)
    T = 10.0
    ts = np.linspace(0.0, T, 201 if args.quick else 1001)
    sol = ukjax.simulate(s, q0, qd0, jnp.asarray(ts))
    ref = solve_ivp(
        kane,
        (0, T),
        [0.0, 0.0, -1.0, xd0, zd0, float(qd0[1])],
        method="DOP853",
        rtol=1e-12,
        atol=1e-12,
        t_eval=ts,
    ).y.T
    dev = np.abs(np.asarray(sol.q) - ref[:, :3]).max()
    psi = sol.qd[:, 1] - sol.q[:, 2] * sol.qd[:, 0] - s.alpha(jnp.asarray(ts))
    z_ex = -1.0 + zd0 * ts + Fz * ts**2 / (2 * m)
    print(
        f"{T:g} s: max |q_UK - q_Kane(eqs 94-96, scipy)| = {dev:.1e}, max |y' - z x' - alpha| = "
        f"{float(jnp.abs(psi).max()):.1e}, max |z - (z0 + z0' t + F_z t^2 / 2m)| = "
        f"{np.abs(np.asarray(sol.q[:, 2]) - z_ex).max():.1e}"
    )
    d = ukjax.diagnostics(s, sol)
    fig, ax = plt.subplots(1, 3, figsize=(16, 4.3))
    for i, lab in enumerate("xyz"):
        ax[0].plot(ts, sol.q[:, i], label=f"{lab} (UK)")
        ax[0].plot(ts[::40], ref[::40, i], "k.", ms=3)
    ax[0].set(title="coordinates: UK (lines), Kane eqs 94-96 (dots)", xlabel="t (s)")
    for i, lab in enumerate("xyz"):
        ax[1].plot(ts, d.Qc_ideal[:, i], label=f"F^c_{lab}")
    ax[1].set(title="constraint force (z component 0)", xlabel="t (s)", ylabel="N")
    ax[2].semilogy(ts, jnp.abs(psi) + 1e-18)
    ax[2].set(title="|y' - z x' - alpha(t)|", xlabel="t (s)")
    for a in ax[:2]:
        a.legend(fontsize=7)
    save_figure(fig, args, "nonholonomic_particle_alpha.png")


if __name__ == "__main__":
    main()
