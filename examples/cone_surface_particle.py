"""Seed case cone_surface_particle (seed 004 Ex. 2.1 and Ex. 4.2): a particle on the surface
r phi = c (spherical coordinates) under constant forces. ukjax (UK, Lagrangian metric from T)
against scipy DOP853 on the seed's Kane-form equations 73-75 written out by hand, and the UK
constraint force against eqs 281-283.

    python examples/cone_surface_particle.py [--quick] [--out DIR]
"""

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
from scipy.integrate import solve_ivp

import ukjax
from _common import example_args, save_figure
from ukjax.systems import ConeSurfaceParticle


def kane_rhs(s):
    """Seed eqs 73-75 for (u1, u2, u3) plus the kinematics r' = u1, theta' = u2/(r sin phi),
    phi' = -u3/r."""
    m, Fr, Ft, Fp = s.mass, s.F_r, s.F_theta, s.F_phi

    def rhs(t, y):
        r, th, ph, u1, u2, u3 = y
        a = m**2 * (1 + ph**2)
        common = u2**2 + u3**2 - ph * u2**2 / np.tan(ph)
        ud1 = m / a * (Fr + ph * Fp) + m**2 / (a * r) * common
        ud2 = Ft / m - (u1 * u2 - u2 * u3 / np.tan(ph)) / r
        ud3 = m * ph / a * (Fr + ph * Fp) + m**2 * ph / (a * r) * common - u1 * u3 / r
        return [u1, u2 / (r * np.sin(ph)), -u3 / r, ud1, ud2, ud3]

    return rhs


def main():
    args = example_args(__doc__)
    s = ConeSurfaceParticle(mass=1.0, c=0.5, F_r=0.3, F_theta=-0.2, F_phi=0.1)
    ph0 = 0.6
    r0 = s.c / ph0
    rd0, thd0 = 0.2, 1.5
    q0 = jnp.array([r0, 0.0, ph0])
    qd0 = jnp.array([rd0, thd0, -ph0 * rd0 / r0])  # d(r phi)/dt = 0
    T = 4.0
    ts = np.linspace(0.0, T, 201 if args.quick else 801)
    sol = ukjax.simulate(s, q0, qd0, jnp.asarray(ts))
    u0 = np.asarray(s.generalized_speeds(q0, qd0))
    ref = solve_ivp(
        kane_rhs(s),
        (0, T),
        np.r_[np.asarray(q0), u0],
        method="DOP853",
        rtol=1e-12,
        atol=1e-12,
        t_eval=ts,
    ).y.T
    dev = np.abs(np.asarray(sol.q) - ref[:, :3]).max()
    d = ukjax.diagnostics(s, sol)
    q = np.asarray(sol.q)
    r, ph = q[:, 0], q[:, 2]
    Qc = np.asarray(d.Qc_ideal)
    Fc = np.stack(
        [Qc[:, 0], Qc[:, 1] / (r * np.sin(ph)), -Qc[:, 2] / r], axis=1
    )  # seed frame i, j, k
    u = np.asarray(jax.vmap(s.generalized_speeds)(sol.q, sol.qd))
    u2, u3 = u[:, 1], u[:, 2]
    m, a = s.mass, s.mass**2 * (1 + ph**2)
    V2 = u2**2 + u3**2
    tan = np.tan(ph)
    Fc1 = (
        (m**2 - a) / a * s.F_r
        + m**2 * ph / a * s.F_phi
        - m**3 * ph / (a * r) * u2**2 / tan
        + (m**3 - a * m) * V2 / (a * r)
    )
    Fc3 = (
        m**2 * ph / a * s.F_r
        + (m**2 * ph**2 - a) / a * s.F_phi
        + m**3 * ph / (a * r) * (V2 - ph * u2**2 / tan)
        + m * u2**2 / (r * tan)
    )
    fdev = np.abs(Fc - np.stack([Fc1, 0 * Fc1, Fc3], 1)).max()
    print(
        f"{T:g} s: max |q_UK - q_Kane(eqs 73-75, scipy)| = {dev:.1e}, max |F^c_UK - eqs 281-283| = "
        f"{fdev:.1e} N, "
        f"max |r phi - c| = {float(jnp.abs(d.position).max()):.1e}, F^c_2 = 0 to "
        f"{np.abs(Fc[:, 1]).max():.1e}"
    )
    fig = plt.figure(figsize=(16, 4.5))
    ax3 = fig.add_subplot(1, 3, 1, projection="3d")
    X = r * np.sin(ph) * np.cos(q[:, 1])
    Y = r * np.sin(ph) * np.sin(q[:, 1])
    Z = r * np.cos(ph)
    ax3.plot(X, Y, Z)
    ax3.set(title="path on the surface r phi = c", xlabel="X", ylabel="Y", zlabel="Z")
    ax = fig.add_subplot(1, 3, 2)
    for i, lab in enumerate(("r", "theta", "phi")):
        ax.plot(ts, q[:, i], label=f"{lab} (UK)")
        ax.plot(ts[::25], ref[::25, i], "k.", ms=3)
    ax.set(title="coordinates: UK (lines), Kane eqs 73-75 (dots)", xlabel="t (s)")
    ax.legend(fontsize=7)
    ax = fig.add_subplot(1, 3, 3)
    ax.plot(ts, Fc[:, 0], label="F^c_i (UK)")
    ax.plot(ts, Fc[:, 2], label="F^c_k (UK)")
    ax.plot(ts[::25], Fc1[::25], "k.", ms=3, label="eqs 281, 283")
    ax.plot(ts[::25], Fc3[::25], "k.", ms=3)
    ax.set(title="constraint force (Fig. of Ex. 4.2)", xlabel="t (s)", ylabel="N")
    ax.legend(fontsize=7)
    save_figure(fig, args, "cone_surface_particle.png")


if __name__ == "__main__":
    main()
