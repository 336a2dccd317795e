"""Seed 000 §3.4: a unit-mass bob held by two rigid rods (two holonomic constraints), gravity
along +x, seed initial state; Figs 8-10, and the invariants (constraints, energy, x + z = 1).

    python examples/double_rod_pendulum_3d.py [--quick] [--out DIR]
"""

import jax.numpy as jnp
import matplotlib.pyplot as plt

import ukjax
from _common import example_args, save_figure
from ukjax.systems import DoubleRodPendulum


def main():
    args = example_args(__doc__)
    s = DoubleRodPendulum()  # L1 = L2 = 1, g = 10
    q0, qd0 = s.initial_state()  # x = 1, y = z = 0, y' = 4
    ts = jnp.linspace(0.0, 3.0, 151 if args.quick else 601)
    sol = ukjax.simulate(s, q0, qd0, ts)
    d = ukjax.diagnostics(s, sol)
    x, y, z = sol.q.T
    print("Doubly constrained pendulum, seed 000 §3.4 (Dopri8, rtol = atol = 1e-12)")
    print(f"  max constraint residual |phi|, |phi_dot| : {float(d.max_residual()):.1e}")
    print(
        f"  max |E - E0|                            : {float(jnp.abs(d.energy_drift()).max()):.1e}"
    )
    print(f"  max |x + z - 1|                          : {float(jnp.abs(x + z - 1).max()):.1e}")
    print(
        f"  y range [{float(y.min()):.4f}, {float(y.max()):.4f}], z range "
        f"[{float(z.min()):.4f}, {float(z.max()):.4f}]"
    )
    fig = plt.figure(figsize=(16, 4.5))
    ax1 = fig.add_subplot(1, 3, 1)
    ax1.plot(ts, y, label="y(t)")
    ax1.plot(ts, z, "--", label="z(t)")
    ax1.set(title="Fig 8: y(t), z(t)", xlabel="t")
    ax1.legend()
    ax2 = fig.add_subplot(1, 3, 2)
    ax2.plot(y, z)
    ax2.set(title="Fig 9: y vs z", xlabel="y", ylabel="z")
    ax3 = fig.add_subplot(1, 3, 3, projection="3d")
    ax3.plot(x, y, z)
    ax3.scatter([1.0], [0.0], [0.0], color="k")
    ax3.set(title="Fig 10: 3-D path (a curve)", xlabel="x", ylabel="y", zlabel="z")
    save_figure(fig, args, "double_rod_pendulum_3d.png")


if __name__ == "__main__":
    main()
