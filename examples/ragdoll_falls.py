"""A humanoid-like ragdoll read from MJCF falls onto a rough floor: contacts and friction.

The model (`examples/models/ragdoll.xml`: a free trunk with a head, legs of two capsules
with hip and knee hinges, one-capsule arms on shoulder hinges, joint springs and damping)
is loaded with `ukjax.from_mjcf`. Every capsule end and the head are unilateral contacts
with the floor (15 rows), each with exact Coulomb stick-slip on its 3-D friction cone
(mu = 0.8, the geoms' `friction`); impacts are inelastic (`ukjax.Impact(restitution=0.0)`,
as MuJoCo's contacts are) and decided jointly over all contacts (complementarity; where
the friction modes admit no solution, the impact of maximal dissipation). It is released
tilted and moving, lands on its right shin (`shin_r`), folds, and ends lying on its
trunk, head, legs and hands (the contact raster of the figure). Checked along the run:
no contact point below the floor, the energy (kinetic + gravity + joint springs) never
rising (impacts, friction and damping only take energy).

The hybrid program of this model (15 contacts with 3-D friction on 13 coordinates) takes
about 3.5 minutes to compile on a 2-core CPU (`benchmarks/RESULTS.md`); the run itself
under a minute for the 2 s shown.

    python examples/ragdoll_falls.py [--quick] [--out DIR]
"""

import os
import time
from collections import Counter

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import ukjax
from _common import example_args, save_figure


MJCF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models", "ragdoll.xml")


def labels(model: ukjax.RigidModel) -> list[str]:
    """A name per contact row: the body and, for a capsule, which end."""
    out = []
    for c in model.contacts:
        body = model.body_names[model.geom_body[c.geom2]]
        if c.kind == "plane_capsule":
            out += [f"{body} end 1", f"{body} end 2"]
        else:
            out.append(f"{body} ({c.kind.split('_')[1]})")
    return out


def main():
    args = example_args(__doc__)
    model = ukjax.from_mjcf(MJCF)
    names = labels(model)
    print(
        f"{MJCF}: {len(model.body_names) - 1} bodies, nq = {model.nq}, nv = {model.nv}, "
        f"{len(names)} contact rows"
    )
    # MuJoCo's qpos: trunk at 1 m, tilted 0.3 rad about a horizontal axis; moving at 0.5 m/s
    axis, angle = np.array([0.6, 0.8, 0.0]), 0.3
    qpos = np.zeros(model.nq)
    qpos[:7] = [0.0, 0.0, 1.0, np.cos(angle / 2), *(np.sin(angle / 2) * axis)]
    qvel = np.zeros(model.nv)
    qvel[0] = 0.5
    q0, qd0 = model.initial_state(qpos=jnp.array(qpos), qvel=jnp.array(qvel))
    T = 0.6 if args.quick else 2.0
    ts = jnp.linspace(0.0, T, int(100 * T) + 1)
    law = ukjax.Impact(restitution=0.0)
    # a ragdoll's limbs touch down hundreds of times: more events than the default 256
    run = jax.jit(
        lambda q, qd: ukjax.simulate(model, q, qd, ts, contact=law, max_events=2048, throw=False)
    )
    t0 = time.perf_counter()
    compiled = run.lower(q0, qd0).compile()
    t1 = time.perf_counter()
    sol = compiled(q0, qd0)
    jax.block_until_ready(sol.q)
    t2 = time.perf_counter()
    print(f"compile {t1 - t0:.0f} s, run {t2 - t1:.1f} s (to t = {T} s)")
    print(f"status: {sol.status}; {int(sol.stats['num_steps'])} steps")
    if sol.status != "successful":
        raise SystemExit(f"the run failed: {sol.status}")

    n = int(sol.events.count)
    kinds = Counter(ukjax.EVENT_KINDS[int(k)] for k in sol.events.kind[:n])
    print(f"{n} events: " + ", ".join(f"{v} {k}" for k, v in kinds.most_common()))
    gaps = np.asarray(jax.vmap(lambda q: model.unilateral(0.0, q))(sol.q))
    energy = np.asarray(
        jax.vmap(lambda q, qd: model.kinetic_energy(0.0, q, qd) + model.potential_energy(0.0, q))(
            sol.q, sol.qd
        )
    )
    rise = float(np.diff(energy).max())
    print(f"lowest contact point: {gaps.min():.2e} m (never below the floor)")
    print(
        f"energy {energy[0]:.3f} J -> {energy[-1]:.3f} J; largest rise between saves "
        f"{rise:.1e} J (integration error)"
    )
    assert gaps.min() > -1e-9, "a contact point went through the floor"
    assert rise < 1e-6, "the energy rose"

    fig, ax = plt.subplots(3, 1, figsize=(9, 10), sharex=True)
    times = np.asarray(sol.ts)
    ax[0].plot(times, energy, "k")
    for t in np.asarray(sol.events.time[:n]):
        ax[0].axvline(t, color="tab:red", lw=0.3, alpha=0.4)
    ax[0].set_ylabel("energy (J)")
    ax[0].set_title(f"ragdoll on a rough floor (mu = 0.8): {n} events (red)")
    colours = plt.get_cmap("tab20")(np.arange(len(names)) % 20)
    for i, name in enumerate(names):
        ax[1].plot(times, gaps[:, i], lw=0.8, color=colours[i], label=name)
    ax[1].set_ylabel("height of contact point (m)")
    ax[1].legend(fontsize=6, ncol=3)
    state = np.where(np.asarray(sol.engaged), 1 + (np.asarray(sol.sliding) != 0), 0)
    ax[2].imshow(
        state.T,
        aspect="auto",
        interpolation="nearest",
        cmap="viridis",
        vmin=0,
        vmax=2,
        extent=(times[0], times[-1], len(names) - 0.5, -0.5),
    )
    ax[2].set_yticks(range(len(names)), names, fontsize=6)
    ax[2].set_xlabel("t (s)")
    ax[2].set_title("contacts: free (dark), stuck (green), sliding (yellow)")
    save_figure(fig, args, "ragdoll_falls.png")
    if not args.quick:
        path = model.animate(sol.q, os.path.join(args.out, "ragdoll_falls.gif"), ts=sol.ts, every=2)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
