"""Friction on moving surfaces: a block dropped onto a conveyor belt, pucks on a turntable.

`System.friction(t, q)` returns `(T, mu_static, mu_kinetic, surface_velocity)`: the slip of
each contact is `T qd - w(t, q)`, relative to the surface (a belt, a turntable), so a stuck
contact moves with its surface.

- A block (m = 2 kg) dropped from 0.2 m onto a belt running at 1.5 m/s, mu = 0.4,
  `ukjax.Impact(0)`: the landing's friction impulse is mu m v_y (v_y = sqrt(2 g h)), so the
  block leaves the impact at mu v_y, then slides at mu g until it moves with the belt, at
  t_land + (u - mu v_y) / (mu g). Compared with that closed form.
- Two pucks placed at r = 1 m on a turntable spinning at 2 rad/s, moving with it: the
  cone holds one (mu = 0.5: mu g > spin^2 r = 4), which circles with the table; the other
  (mu = 0.05) slips and is thrown off, compared with scipy DOP853 of kinetic friction
  relative to the table.

    python examples/conveyor_belt.py [--quick] [--out DIR]
"""

import time

import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import ukjax
from _common import example_args, save_figure
from references import belt_drop_reference, turntable_puck_slip


G = 9.81


class ConveyorBelt(ukjax.System):
    """A block on a belt whose speed is `speed` (planar: x along the belt, y up)."""

    mu: float = 0.4
    speed: float = 1.5
    m: int = 2

    def kinetic_energy(self, t, q, qd):
        return 0.5 * self.m * qd @ qd

    def potential_energy(self, t, q):
        return self.m * G * q[1]

    def unilateral(self, t, q):
        return q[1]

    def friction(self, t, q):
        return jnp.array([[[1.0, 0.0]]]), self.mu, self.mu, self.speed


class TurntablePuck(ukjax.System):
    """A puck (unit mass, a point) on a table spinning at `spin` about the vertical axis
    through the origin: the surface moves at spin e_z x (x, y) under it."""

    mu: float = 0.5
    spin: float = 2.0

    def kinetic_energy(self, t, q, qd):
        return 0.5 * qd @ qd

    def potential_energy(self, t, q):
        return G * q[2]

    def unilateral(self, t, q):
        return q[2]

    def friction(self, t, q):
        T = jnp.array([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])
        return T, self.mu, self.mu, self.spin * jnp.array([-q[1], q[0]])


def main():
    args = example_args(__doc__)
    t1 = 0.6 if args.quick else 1.0
    ts = jnp.linspace(0.0, t1, 201)
    t0 = time.perf_counter()
    belt = ukjax.simulate(ConveyorBelt(), jnp.array([0.0, 0.2]), jnp.zeros(2), ts,
                          contact=ukjax.Impact(0.0))  # fmt: skip
    print(f"belt: {belt.status}, {time.perf_counter() - t0:.1f} s (compile and run)")
    t = np.asarray(ts)
    x_ref, t_land, t_stick = belt_drop_reference(t, 0.4, 1.5, 0.2, G)
    n = int(belt.events.count)
    kinds = [ukjax.EVENT_KINDS[k] for k in np.asarray(belt.events.kind[:n])]
    print(f"  events {kinds} at {np.asarray(belt.events.time[:n])} (closed form: landing "
          f"{t_land:.9f} s, stuck {t_stick:.9f} s)")  # fmt: skip
    print(
        f"  x against the closed form: max deviation {np.max(np.abs(belt.q[:, 0] - x_ref)):.1e} m"
    )

    t2 = 1.5 if args.quick else 3.0
    ts2 = jnp.linspace(0.0, t2, 151)
    t = np.asarray(ts2)
    pucks = {}
    for mu in (0.5, 0.05):
        t0 = time.perf_counter()
        pucks[mu] = ukjax.simulate(TurntablePuck(mu=mu), jnp.array([1.0, 0.0, 0.0]),
                                   jnp.array([0.0, 2.0, 0.0]), ts2)  # fmt: skip
        print(f"puck, mu = {mu}: {pucks[mu].status}, {time.perf_counter() - t0:.1f} s")
    held = np.stack([np.cos(2 * t), np.sin(2 * t)], axis=1)
    thrown = turntable_puck_slip(t, 0.05, spin=2.0, g=G)
    print(
        f"  held puck against the table's circle: {np.max(np.abs(pucks[0.5].q[:, :2] - held)):.1e}"
    )
    print(
        f"  thrown puck against scipy DOP853: {np.max(np.abs(pucks[0.05].q[:, :2] - thrown)):.1e} m"
    )

    fig, ax = plt.subplots(1, 3, figsize=(14, 4))
    t = np.asarray(ts)
    ax[0].plot(t, belt.q[:, 0], label="block x (ukjax)")
    ax[0].plot(t, x_ref, "k:", label="closed form")
    ax[0].plot(t, belt.q[:, 1], label="block height")
    for tk, kind in zip(np.asarray(belt.events.time[:n]), kinds):
        ax[0].axvline(tk, color="grey", lw=0.8, ls="--")
        ax[0].annotate(kind, (tk, 0.5), rotation=90, fontsize=8)
    ax[0].set(xlabel="t [s]", ylabel="[m]", title="block dropped onto a belt at 1.5 m/s")
    ax[0].legend(fontsize=8)
    ax[1].plot(t, belt.qd[:, 0], label="block speed")
    slip = np.where(t >= t_land, 1.5 - np.asarray(belt.qd[:, 0]), np.nan)  # on the belt
    ax[1].plot(t, slip, label="slip (belt - block), on the belt")
    ax[1].axhline(1.5, color="k", lw=0.8, ls=":", label="belt")
    ax[1].set(xlabel="t [s]", ylabel="[m/s]", title="picked up: slide, then carried")
    ax[1].legend(fontsize=8)
    for mu, sol in pucks.items():
        ax[2].plot(sol.q[:, 0], sol.q[:, 1], label=f"mu = {mu}")
    ax[2].plot(thrown[:, 0], thrown[:, 1], "k:", label="scipy (mu = 0.05)")
    ax[2].set(
        xlabel="x [m]", ylabel="y [m]", title="pucks on a turntable (2 rad/s)", aspect="equal"
    )
    ax[2].legend(fontsize=8)
    save_figure(fig, args, "conveyor_belt.png")


if __name__ == "__main__":
    main()
