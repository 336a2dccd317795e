"""IFToMM benchmark A04: the Bricard mechanism, overconstrained everywhere.

Five rods (1 m, 1 kg, square section of 0.1 m) and six revolute joints close a loop that
Grübler's count says cannot move, but the special geometry gives one degree of freedom
(M. González et al., *A benchmarking system for MBS simulation software*, Multibody Syst.
Dyn. 16 (2006)). In natural coordinates (`ukjax.systems.Bricard`: four joint points and
four joint-axis unit vectors, 24 coordinates) the 24 constraints have rank 23 at every
configuration: one is redundant, and the UK equation takes it as it is. It falls from rest
under gravity for 10 s.

ukjax at its default settings (Dopri8, rtol = atol = 1e-12, the `Regularized` UK solve,
no stabilisation) against an independent reference: the same mechanism written by hand in
NumPy (tests/references.py: mass matrix, constraint Jacobian and acceleration terms) as an
index-1 DAE, q'' from a least-squares solve of the singular KKT matrix, scipy DOP853 at
rtol = atol = 1e-12. The benchmark's published data are not redistributed here; the
benchmark's reference point is joint J_3 (initially at (1, -1, 1)).

The same mechanism is also built from bodies and hinges (`examples/models/bricard.xml`,
read by `ukjax.from_mjcf`: five box rods in a chain of hinges from the ground, the sixth
hinge two MJCF `connect`s on its axis, exact constraints here where MuJoCo's are soft):
5 joint angles and 12 loop-closure rows of rank 5. Its J_3 (the origin of rod 4) follows
the natural-coordinate model's.

Printed: steps and run time of each, the largest coordinate difference, energy drift and
constraint residual, the bodies model's J_3 difference and loop closure. Figures: J_3's
coordinates, the differences from the reference, the energy drift and the residual over
time.

    python examples/bricard_mechanism.py [--quick] [--out DIR]
"""

import os
import time

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import ukjax
from _common import example_args, save_figure
from references import BricardKKT
from ukjax.systems import Bricard


MJCF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models", "bricard.xml")


def main() -> None:
    args = example_args(__doc__)
    T = 2.0 if args.quick else 10.0
    mech, ref = Bricard(), BricardKKT()
    q0, qd0 = mech.initial_state()
    ts = jnp.linspace(0.0, T, int(20 * T) + 1)

    t0 = time.perf_counter()
    sol = jax.block_until_ready(ukjax.simulate(mech, q0, qd0, ts))
    wall = time.perf_counter() - t0
    t0 = time.perf_counter()
    s = ref.solve(np.asarray(ts))
    wall_ref = time.perf_counter() - t0
    q, q_ref = np.asarray(sol.q), s.y[:24].T

    E = np.asarray(jax.vmap(lambda q, qd: ukjax.energy(mech, 0.0, q, qd))(sol.q, sol.qd))
    E_ref = np.array([ref.energy(a, b) for a, b in zip(s.y[:24].T, s.y[24:].T)])
    phi = np.max(np.abs(np.asarray(jax.vmap(lambda x: mech.holonomic(0.0, x))(sol.q))), axis=1)
    phi_ref = np.array([np.max(np.abs(ref.phi(a))) for a in q_ref])
    diff = np.max(np.abs(q - q_ref), axis=1)
    print(f"ukjax : {sol.stats['num_steps']} steps, {wall:.2f} s (first call, compile included)")
    print(f"scipy : {s.nfev} right-hand sides, {wall_ref:.2f} s")
    print(f"largest coordinate difference {diff.max():.2e}")
    print(
        f"energy drift: ukjax {np.abs(E - E[0]).max():.1e} J, reference "
        f"{np.abs(E_ref - E_ref[0]).max():.1e} J"
    )
    print(f"constraint residual: ukjax {phi.max():.1e}, reference {phi_ref.max():.1e}")
    J3 = np.asarray(mech.joints(sol.q))[:, 3]
    print("J3 at the end:", np.round(J3[-1], 6))

    # the same mechanism from bodies and hinges (MJCF), at the same defaults
    bodies = ukjax.from_mjcf(MJCF)
    b0, bd0 = bodies.initial_state()
    t0 = time.perf_counter()
    sol_b = jax.block_until_ready(ukjax.simulate(bodies, b0, bd0, ts))
    wall_b = time.perf_counter() - t0
    rod4 = bodies.body_id("rod4")
    J3b = np.asarray(jax.vmap(lambda x: bodies.body_poses(x)[0][rod4])(sol_b.q))
    closure = np.asarray(jax.vmap(lambda x: bodies.holonomic(0.0, x))(sol_b.q))
    diff_b = np.max(np.abs(J3b - J3), axis=1)
    print(
        f"bodies and hinges (MJCF, {bodies.nq} angles): {sol_b.stats['num_steps']} steps, "
        f"{wall_b:.2f} s (compile included); J3 differs from the natural-coordinate "
        f"model's by {diff_b.max():.1e} m; loop closure {np.abs(closure).max():.1e}"
    )

    tt = np.asarray(ts)
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    for i, c in enumerate("xyz"):
        axes[0, 0].plot(tt, J3[:, i], label=f"{c} ukjax")
        axes[0, 0].plot(tt, q_ref[:, 6 + i], "k--", lw=0.8)
        axes[0, 0].plot(tt[::4], J3b[::4, i], "k.", ms=3)
    axes[0, 0].set(
        xlabel="t [s]", ylabel="m", title="joint J3 (dashed: reference; dots: bodies, MJCF)"
    )
    axes[0, 0].legend(fontsize=8)
    axes[0, 1].semilogy(tt, np.maximum(diff, 1e-17), label="max |q - q_ref|")
    axes[0, 1].semilogy(tt, np.maximum(diff_b, 1e-17), label="J3: bodies - natural")
    axes[0, 1].set(xlabel="t [s]", title="differences")
    axes[0, 1].legend(fontsize=8)
    axes[1, 0].semilogy(tt, np.maximum(np.abs(E - E[0]), 1e-17), label="ukjax")
    axes[1, 0].semilogy(tt, np.maximum(np.abs(E_ref - E_ref[0]), 1e-17), label="scipy KKT")
    axes[1, 0].set(xlabel="t [s]", title="energy drift |E - E0| [J]")
    axes[1, 0].legend(fontsize=8)
    axes[1, 1].semilogy(tt, np.maximum(phi, 1e-17), label="ukjax")
    axes[1, 1].semilogy(tt, np.maximum(phi_ref, 1e-17), label="scipy KKT")
    axes[1, 1].set(xlabel="t [s]", title="constraint residual max|phi|")
    axes[1, 1].legend(fontsize=8)
    save_figure(fig, args, "bricard_mechanism.png")


if __name__ == "__main__":
    main()
