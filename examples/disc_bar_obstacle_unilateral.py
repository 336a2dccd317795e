"""Seed 004 §5.4-5.5 (Bajodah 2003, Ex. 5.1): the disc-bar mechanism under constant motor
torques, whose bar tip strikes a rigid obstacle below the disc.

The unilateral constraint g = h - R cos(th1) - L cos(th2) >= 0 (h = R + 3L/4) is enforced
in two ways:

- the thesis's compliant activation (ukjax.ContactDynamics, gains Delta1 = -300,
  Delta2 = -100 converted from the thesis's sign convention): free while g >= -delta, then
  g'' + 300 g' + 100 g = 0 through the UK equation, released when the contact force would
  pull while separating;
- a rigid, event-driven contact (ukjax.Impact, restitution 0.5, persistent contact).

Reproduced: the contact "spikes" in the generalized contact force at first contact
(Figs 27-30), repeated contact cycles, and the indirect effect on the disc (F^c_1 != 0
although the disc touches nothing). The thesis does not give R, L, the inertias or g
(SEED_CASES §2.17), so its first-contact time 1.49 s is not expected here; ours is printed.

    python examples/disc_bar_obstacle_unilateral.py [--quick] [--out DIR]
"""

import time

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import ukjax
from _common import example_args, save_figure
from ukjax.systems import DiscBar


def run(system, law, T):
    ts = jnp.linspace(0.0, T, int(200 * T) + 1)
    t0 = time.perf_counter()
    sol = ukjax.simulate(system, jnp.array([1.0, 1.0]), jnp.zeros(2), ts, contact=law)
    jax.block_until_ready(sol.q)
    wall = time.perf_counter() - t0
    force = jax.vmap(lambda t, q, qd, e: ukjax.contact_forces(system, t, q, qd, e, contact=law)[1])
    Fc = force(sol.ts, sol.q, sol.qd, sol.engaged)
    g = jax.vmap(lambda q: system.unilateral(0.0, q)[0])(sol.q)
    return sol, np.asarray(Fc), np.asarray(g), wall


def main():
    args = example_args(__doc__, quick_help="3 s instead of 10 s")
    T = 3.0 if args.quick else 10.0
    system = DiscBar.ex51()
    laws = {
        "ContactDynamics (thesis)": ukjax.ContactDynamics.from_seed_gains(-300.0, -100.0),
        "Impact, e = 0.5": ukjax.Impact(restitution=0.5),
    }
    runs = {name: run(system, law, T) for name, law in laws.items()}
    print(f"Disc-bar with obstacle at h = R + 3L/4, tau = (1, 3) N m, t in [0, {T:g}] s")
    print(
        f"{'law':<26}{'events':>7}{'first contact (s)':>19}{'min g (m)':>12}"
        f"{'max|F1| (N m)':>15}{'max|F2| (N m)':>15}{'wall (s)':>10}"
    )
    for name, (sol, Fc, g, wall) in runs.items():
        ev = sol.events
        print(
            f"{name:<26}{int(ev.count):>7}{float(ev.time[0]):>19.4f}{g.min():>12.2e}"
            f"{np.abs(Fc[:, 0]).max():>15.2f}{np.abs(Fc[:, 1]).max():>15.2f}{wall:>10.2f}"
        )
        assert sol.result == ukjax.RESULTS.successful
    _, Fc, _, _ = runs["ContactDynamics (thesis)"]
    assert np.abs(Fc[:, 0]).max() > 1.0  # the disc feels the contact through the pin
    sol, _, g, _ = runs["Impact, e = 0.5"]
    assert g.min() > -1e-8, g.min()  # rigid: no penetration
    ev = sol.events
    for i in range(int(ev.count)):
        print(
            f"  impact at t = {float(ev.time[i]):.6f} s: tip speed {float(ev.speed_before[i]):+.4f}"
            f" -> {float(ev.speed_after[i]):+.4f} m/s (e = 0.5)"
        )
        assert abs(float(ev.speed_after[i]) + 0.5 * float(ev.speed_before[i])) < 1e-9

    fig, ax = plt.subplots(2, 2, figsize=(12, 7), sharex=True)
    for name, (sol, Fc, g, _) in runs.items():
        ts = np.asarray(sol.ts)
        ax[0, 0].plot(ts, np.asarray(sol.q), label=[f"th1 {name}", f"th2 {name}"], lw=0.9)
        ax[0, 1].plot(ts, np.asarray(sol.qd), lw=0.9)
        ax[1, 0].plot(ts, Fc[:, 0], label=name, lw=0.9)
        ax[1, 1].plot(ts, Fc[:, 1], label=name, lw=0.9)
    ax[0, 0].set(ylabel="angle (rad)", title="angles (Figs 25-26)")
    ax[0, 0].legend(fontsize=7)
    ax[0, 1].set(ylabel="rate (rad/s)", title="angular rates")
    ax[1, 0].set(xlabel="t (s)", ylabel="F^c_1 (N m)", title="contact force on the disc")
    ax[1, 1].set(xlabel="t (s)", ylabel="F^c_2 (N m)", title="contact force on the bar")
    ax[1, 1].legend(fontsize=7)
    save_figure(fig, args, "disc_bar_obstacle_unilateral.png")


if __name__ == "__main__":
    main()
