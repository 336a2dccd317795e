"""Seed case constraint_ab_examples (seed 000 §2.3, §3.1-3.2; seed 002 §3): the (A, b) of each
constraint in the seeds' table, derived by ukjax's autodiff and compared with the hand-derived
entries; the holonomicity test of seed 002 eq 11; and the motion of a particle under each.

    python examples/constraint_ab_examples.py [--quick] [--out DIR]
"""

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import ukjax
from _common import example_args, save_figure
from ukjax.systems import (
    ParticleOnLine,
    ParticleOnSphere,
    ParticlePfaffY,
    ParticlePfaffZ,
    ParticleXZ2Y,
    holonomicity,
)


def particle(kind):
    """The particle of one row of the table."""
    if kind == "pfaff_2y_rheonomic":
        return ParticlePfaffY(rhs=1.0)
    return {
        "line": ParticleOnLine,
        "sphere": ParticleOnSphere,
        "xz2y": ParticleXZ2Y,
        "pfaff_2y": ParticlePfaffY,
        "pfaff_2z": ParticlePfaffZ,
    }[kind]()


def hand_table(t, q, qd):
    x, y, z = q
    xd, yd, zd = qd
    # The published table (the sphere written for phi = x^2 + y^2 + z^2 - L^2: twice its row).
    return {
        "line": ([[0, 1, 0], [0, 0, 1]], [0, 0]),
        "sphere": ([[2 * x, 2 * y, 2 * z]], [-2 * (qd @ qd)]),
        "xz2y": ([[1, -(z**2), 0]], [2 * z * zd * yd]),
        "pfaff_2y": ([[1, 2 * y, 1]], [-2 * yd**2]),
        "pfaff_2y_rheonomic": ([[1, 2 * y, 1]], [-2 * yd**2]),
        "pfaff_2z": ([[1, 2 * z, 1]], [-2 * yd * zd]),
    }


def main():
    args = example_args(__doc__)
    rng = np.random.default_rng(1)
    worst = {}
    for _ in range(3 if args.quick else 50):
        t, q, qd = rng.uniform(0, 3), rng.standard_normal(3), rng.standard_normal(3)
        for kind, (A_h, b_h) in hand_table(t, q, qd).items():
            A, b = ukjax.constraint_matrices(particle(kind), t, q, qd)
            dev = max(np.abs(np.asarray(A) - A_h).max(), np.abs(np.asarray(b) - b_h).max())
            worst[kind] = max(worst.get(kind, 0.0), dev)
    print("autodiff (A, b) vs the seeds' table, largest deviation over random states:")
    for kind, dev in worst.items():
        print(f"  {kind:<20} {dev:.1e}")
    q = jnp.array([0.3, -0.4, 0.9])
    h1 = float(holonomicity(lambda q: jnp.stack([1.0, 2 * q[2], 1.0]), q))
    h2 = float(holonomicity(lambda q: jnp.stack([1.0, 2 * q[1], 1.0]), q))
    print(
        f"seed 002 eq 11: (1, 2z, 1) -> {h1:g} (nonholonomic; the seed prints 1), (1, 2y, 1) -> "
        f"{h2:g} (holonomic)"
    )

    ts = jnp.linspace(0.0, 3.0, 61 if args.quick else 301)
    runs = {
        "sphere": (jnp.array([0.0, 0.6, -0.8]), jnp.array([1.5, 0.0, 0.0])),
        "line": (jnp.zeros(3), jnp.array([0.5, 0.0, 0.0])),
        "pfaff_2y": (jnp.array([0.2, 0.5, -0.3]), jnp.array([0.4, -0.7, -0.4 + 0.7])),
        "pfaff_2z": (jnp.array([0.0, 0.0, 0.5]), jnp.array([-1.0, 1.0, 0.0])),
        "xz2y": (jnp.array([0.0, 0.0, 0.5]), jnp.array([0.25, 1.0, 0.0])),
    }
    fig = plt.figure(figsize=(15, 4.5))
    ax3 = fig.add_subplot(1, 3, 1, projection="3d")
    ax_inv, ax_res = fig.add_subplot(1, 3, 2), fig.add_subplot(1, 3, 3)
    for kind, (q0, qd0) in runs.items():
        p = particle(kind)
        sol = ukjax.simulate(p, q0, qd0, ts)
        ax3.plot(*np.asarray(sol.q).T, label=kind)
        r = jax.vmap(lambda t, q, qd: ukjax.constraint_residuals(p, t, q, qd))(ts, sol.q, sol.qd)
        res = jnp.concatenate(
            [jnp.abs(r.position), jnp.abs(r.velocity), jnp.abs(r.nonholonomic)], axis=1
        ).max(axis=1)
        ax_res.semilogy(ts, res + 1e-18, label=kind)
        print(f"  {kind:<9} 3 s under gravity: max constraint residual {float(res.max()):.1e}")
        if kind in ("pfaff_2y", "pfaff_2z"):
            surf = (
                sol.q[:, 0]
                + (sol.q[:, 1] ** 2 if kind == "pfaff_2y" else 2 * sol.q[:, 1] * sol.q[:, 2])
                + sol.q[:, 2]
            )
            ax_inv.plot(
                ts,
                surf - surf[0],
                label={"pfaff_2y": "x + y^2 + z (integrable)", "pfaff_2z": "x + 2yz + z (not)"}[
                    kind
                ],
            )
    ax3.set(title="paths under gravity (-z)", xlabel="x", ylabel="y", zlabel="z")
    ax3.legend(fontsize=7)
    ax_inv.set(title="change of the candidate integral", xlabel="t (s)")
    ax_inv.legend(fontsize=8)
    ax_res.set(title="constraint residuals", xlabel="t (s)")
    ax_res.legend(fontsize=7)
    save_figure(fig, args, "constraint_ab_examples.png")


if __name__ == "__main__":
    main()
