"""Seed case nonideal_constraint_properties (seed 003, eqs 1-20): non-ideal constraints that do
prescribed virtual work v^T C. Part 1 checks the paper's properties at random states (A q'' = b,
both forms of Q^c_ni, virtual work, M-orthogonality, C = 0 limit, Gauss minimality). Part 2 is a
physical example the seed suggests: a bead on a circular wire with Coulomb friction
C = -mu |N| v/|v|, where N is the wire's ideal normal force. On a horizontal wire the speed has
the closed form v(t) = v0 / (1 + mu v0 t / R); on a vertical wire the bead swings and settles.

    python examples/nonideal_constraint_properties.py [--quick] [--out DIR]
"""

import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import ukjax
from _common import example_args, save_figure
from references import coulomb_bead_exact_speed
from ukjax.systems import CoulombBead


def properties(rng, n=6, m=4, rank=2):
    Qm, _ = np.linalg.qr(rng.standard_normal((n, n)))
    M = (Qm * np.exp(rng.uniform(0, np.log(1e2), n))) @ Qm.T
    A = rng.standard_normal((m, rank)) @ rng.standard_normal((rank, n))
    b = A @ rng.standard_normal(n)
    Q, C = rng.standard_normal(n), rng.standard_normal(n)
    qdd = np.asarray(ukjax.udwadia_kalaba(M, Q, A, b, C))
    Qi, Qni = (np.asarray(f) for f in ukjax.constraint_forces(M, Q, A, b, C))
    G = np.asarray(ukjax.weighted_pinv(A, M))
    P = np.eye(n) - G @ A
    a = np.linalg.solve(M, Q)
    u1, u2 = G @ (b - A @ a), P @ np.linalg.solve(M, C)
    v = P @ rng.standard_normal(n)
    ideal = np.asarray(ukjax.udwadia_kalaba(M, Q, A, b))
    gauss = lambda x: (x - a) @ M @ (x - a)
    others = [ideal + P @ rng.standard_normal(n) for _ in range(5)]
    return {
        "1. |A q'' - b|": np.abs(A @ qdd - b).max(),
        "2. |Q_ni - (I - A_M^+ A)^T C|": np.abs(Qni - P.T @ C).max(),
        "2. |Q_ni - M (I - A_M^+ A) M^-1 C|": np.abs(Qni - M @ P @ np.linalg.solve(M, C)).max(),
        "3. |A v|, v virtual": np.abs(A @ v).max(),
        "3. |v.Q^c - v.C|": abs(v @ (Qi + Qni) - v @ C),
        "4. M-orthogonality (cosine)": abs(u1 @ M @ u2) / np.sqrt((u1 @ M @ u1) * (u2 @ M @ u2)),
        "5. |q''(C) - q''(0) - (I - A_M^+ A) M^-1 C|": np.abs(qdd - ideal - u2).max(),
        "6. Gauss: min over others of G(q'') - G(ideal)  (> 0)": -min(
            gauss(o) - gauss(ideal) for o in others
        ),
    }


def main():
    args = example_args(__doc__)
    rng = np.random.default_rng(3)
    worst = {}
    for _ in range(3 if args.quick else 30):
        for k, v in properties(rng).items():
            worst[k] = max(worst.get(k, -np.inf), v)
    print("seed 003 properties at random SPD M, rank-2 A (4 x 6), random C; worst case:")
    for k, v in worst.items():
        print(f"  {k:<55} {v: .1e}" if not k.startswith("6.") else f"  {k:<55} {-v: .1e}")

    bead = CoulombBead(mass=1.0, R=1.0, mu=0.3)
    v0 = 3.0
    q0, qd0 = bead.initial_state(v0)
    ts = jnp.linspace(0.0, 10.0, 201 if args.quick else 1001)
    sol = ukjax.simulate(bead, q0, qd0, ts)
    d = ukjax.diagnostics(bead, sol)
    v = jnp.linalg.norm(sol.qd, axis=1)
    v_ex, s_ex = coulomb_bead_exact_speed(bead, ts, v0)
    arc = bead.R * np.unwrap(np.arctan2(np.asarray(sol.q[:, 1]), np.asarray(sol.q[:, 0])))
    N = jnp.linalg.norm(d.Qc_ideal, axis=1)
    power = jnp.sum(d.Qc_nonideal * sol.qd, axis=1)
    dE = d.energy - d.energy[0]
    work = np.concatenate(
        [[0.0], np.cumsum(0.5 * np.diff(np.asarray(ts)) * (power[1:] + power[:-1]))]
    )
    print(
        f"horizontal wire, mu = {bead.mu}, v0 = {v0}: max |v - v_exact| = "
        f"{float(jnp.abs(v - v_ex).max()):.1e} m/s, "
        f"max |s - s_exact| = {np.abs(arc - s_ex).max():.1e} m, max |phi| = "
        f"{float(jnp.abs(d.position).max()):.1e}, "
        f"max |v.Q_ideal| = {float(jnp.abs(jnp.sum(d.Qc_ideal * sol.qd, 1)).max()):.1e} W"
    )
    print(
        "  energy balance: max |E - E0 - integral of friction power| = "
        f"{np.abs(np.asarray(dE) - work).max():.1e} J "
        "(trapezoid rule on the saved grid)"
    )

    vert = CoulombBead(mass=1.0, R=1.0, mu=0.1, g=9.81, v_reg=1e-3)
    q0v, qd0v = vert.initial_state(6.0)
    tv = jnp.linspace(0.0, 15.0, 301 if args.quick else 1501)
    solv = ukjax.simulate(vert, q0v, qd0v, tv, max_steps=400000)
    dv = ukjax.diagnostics(vert, solv)
    ang = np.unwrap(np.arctan2(np.asarray(solv.q[:, 0]), -np.asarray(solv.q[:, 1])))
    print(
        f"vertical wire, mu = {vert.mu}: energy {float(dv.energy[0]):.2f} -> "
        f"{float(dv.energy[-1]):.2f} J, "
        f"final angle from the bottom {ang[-1]:+.3f} rad, max |phi| = "
        f"{float(jnp.abs(dv.position).max()):.1e}"
    )

    fig, ax = plt.subplots(1, 4, figsize=(20, 4.3))
    ax[0].plot(ts, v, label="|v| (UK)")
    ax[0].plot(ts[::25], v_ex[::25], "k.", ms=4, label="v0 / (1 + mu v0 t / R)")
    ax[0].set(title="horizontal wire: speed", xlabel="t (s)", ylabel="m/s")
    ax[1].plot(ts, N, label="|N| (ideal, normal)")
    ax[1].plot(ts, jnp.linalg.norm(d.Qc_nonideal, axis=1), label="|friction| (non-ideal, tangent)")
    ax[1].set(title="constraint forces", xlabel="t (s)", ylabel="N")
    ax[2].plot(ts, dE, label="E - E0")
    ax[2].plot(ts[::25], work[::25], "k.", ms=4, label="work of friction")
    ax[2].set(title="energy balance", xlabel="t (s)", ylabel="J")
    ax[3].plot(tv, ang, label="angle from the bottom")
    ax3b = ax[3].twinx()
    ax3b.plot(tv, dv.energy, "C1", label="energy")
    ax[3].set(title="vertical wire (g = 9.81, mu = 0.1)", xlabel="t (s)", ylabel="rad")
    ax3b.set_ylabel("J")
    for a in ax:
        a.legend(fontsize=7, loc="upper right")
    save_figure(fig, args, "nonideal_constraint_properties.png")


if __name__ == "__main__":
    main()
