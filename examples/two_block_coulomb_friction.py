"""Seed 004 §5.8-5.9 (Bajodah 2003, Ex. 5.3): two blocks on a rough table, stick-slip.

A spring joins the wall to block 1, another joins block 1 to block 2, and 10 sin(1.5 t) N
drives block 2 (m1 = m2 = 0.1 kg, K1 = K2 = 5 N/m, mu = 1, g = 9.81: the thesis's values).
The blocks rest on the table through unilateral contacts, so the normal forces are UK
contact forces, and friction acts on them three ways:

- exact Coulomb friction (`ukjax.Coulomb`, the default): stick and slip are modes switched
  by events, stuck blocks are held by the UK constraint v = 0 (no creep). Compared with an
  independent scipy DOP853 (rtol 1e-12) event-driven reference (tests/references.py);
- the thesis's rule (`ukjax.VelocityTolerance`, eqs 379-386): slide when |u| > delta or the
  load exceeds mu m g, else the damped stick phase u' = -a u (a = b = 2), integrated as the
  thesis does with fixed-step RK4, in the physically consistent reading (below the
  tolerance the block slides along the load) and the literal one (sgn(0) = -1, which can
  make friction push along the load; SEED_CASES erratum).

The thesis gives no tolerance (delta = 1e-3 here), time span or integrator; its figures
(Figs 38-39) have no numbers, so the script prints the quantities SEED_CASES derived:
block 1 first moves at t = 0.28-0.29 s, and the state at 20 s is about (-1.918, -4.02, 0, 0).

    python examples/two_block_coulomb_friction.py [--quick] [--out DIR]
"""

import time

import diffrax
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import ukjax
from _common import example_args, save_figure
from references import two_block_friction_reference
from ukjax.systems import TwoBlockFriction


def seed_rule(system, ts, literal, dt):
    """The thesis's velocity-tolerance rule, fixed-step RK4 (its integrator)."""
    # literal as an array: both readings share one compilation
    law = ukjax.VelocityTolerance(tolerance=1e-3, damping=2.0, literal=jnp.asarray(literal))
    return ukjax.simulate(
        system,
        jnp.zeros(4),
        jnp.zeros(4),
        ts,
        friction=law,
        solver=ukjax.RK4(),
        stepsize_controller=diffrax.ConstantStepSize(),
        dt0=dt,
        max_steps=None,
    )


def first_motion(ts, x, tol=1e-9):
    moved = np.flatnonzero(np.abs(x) > tol)
    return float(ts[moved[0]]) if moved.size else float("nan")


def main():
    args = example_args(__doc__)
    t1, dt = (4.0, 1e-3) if args.quick else (20.0, 5e-4)
    ts_np = np.linspace(0.0, t1, int(t1 * 100) + 1)
    ts = jnp.asarray(ts_np)
    system = TwoBlockFriction()

    start = time.perf_counter()
    exact = jax.block_until_ready(
        ukjax.simulate(system, jnp.zeros(4), jnp.zeros(4), ts, max_events=1024)
    )
    t_exact = time.perf_counter() - start
    p = dict(m1=0.1, m2=0.1, k1=5.0, k2=5.0, amplitude=10.0, omega=1.5, mu_s=1.0, mu_k=1.0)
    ref, ref_events = two_block_friction_reference(dict(p, g=9.81), ts_np)
    n = int(exact.events.count)
    x, u = np.asarray(exact.q)[:, [0, 2]], np.asarray(exact.qd)[:, [0, 2]]
    dev_x, dev_u = np.abs(x - ref[:, :2]).max(), np.abs(u - ref[:, 2:]).max()
    dev_t = np.abs(np.asarray(exact.events.time[:n]) - [e[0] for e in ref_events]).max()
    print(f"exact Coulomb: {n} stick/slip events in {t1:g} s ({t_exact:.1f} s incl. compile)")
    print(f"  vs scipy event reference ({len(ref_events)} events): event times {dev_t:.1e} s,")
    print(f"  positions {dev_x:.1e} m, velocities {dev_u:.1e} m/s")
    stuck = (np.asarray(exact.sliding) == 0) & np.asarray(exact.engaged)
    creep = np.abs(np.where(stuck, np.asarray(exact.qd)[:, [0, 2]], 0.0)).max()
    print(f"  largest velocity of a stuck block at the saves: {creep:.1e} m/s")

    runs = {}
    for literal in (False, True):
        start = time.perf_counter()
        runs[literal] = jax.block_until_ready(seed_rule(system, ts, literal, dt))
        took = time.perf_counter() - start
        name = "literal" if literal else "consistent"
        sx = np.asarray(runs[literal].q)[:, [0, 2]]
        print(
            f"thesis's rule ({name}, RK4 h = {dt:g}, {took:.1f} s): max |x - exact| = "
            f"{np.abs(sx - x).max():.3e} m"
        )
    lit, con = (np.asarray(runs[v].q)[:, [0, 2]] for v in (True, False))
    print(f"literal vs consistent reading: max |dx| = {np.abs(lit - con).max():.3e} m")

    print(
        f"block 1 first moves at t = {first_motion(ts_np, x[:, 0]):.3f} s exact, "
        f"{first_motion(ts_np, con[:, 0]):.3f} s with the rule (SEED_CASES: 0.28-0.29 s)"
    )
    print(f"state at t = {t1:g} s: x = {x[-1].round(4)}, u = {u[-1].round(6)}")
    if not args.quick:
        print("  SEED_CASES (thesis's rule, RK4 h = 1e-4): (-1.918, -4.02), u about 0")
        print(f"  ranges: x1 [{x[:, 0].min():.2f}, {x[:, 0].max():.2f}] (seed [-2.00, 2.70]), ")
        print(f"          x2 [{x[:, 1].min():.2f}, {x[:, 1].max():.2f}] (seed [-4.03, 5.23])")

    fig, ax = plt.subplots(3, 2, figsize=(12, 10), sharex=True)
    for j in range(2):
        ax[0, j].plot(ts_np, x[:, j], label="exact Coulomb (ukjax)")
        ax[0, j].plot(ts_np, con[:, j], "--", label="thesis's rule, consistent")
        ax[0, j].plot(ts_np, lit[:, j], ":", label="thesis's rule, literal sgn(0) = -1")
        ax[0, j].set(ylabel=f"x{j + 1} (m)", title=f"block {j + 1}: displacement")
        ax[1, j].plot(ts_np, u[:, j], label="exact")
        ax[1, j].plot(ts_np, np.asarray(runs[False].qd)[:, 2 * j], "--", label="rule")
        ax[1, j].set(ylabel=f"u{j + 1} (m/s)", title=f"block {j + 1}: velocity")
        ax[2, j].semilogy(ts_np, np.abs(x[:, j] - ref[:, j]) + 1e-17, label="exact vs scipy")
        ax[2, j].semilogy(ts_np, np.abs(con[:, j] - x[:, j]) + 1e-17, label="rule vs exact")
        ax[2, j].semilogy(ts_np, np.abs(lit[:, j] - x[:, j]) + 1e-17, ":", label="literal vs exact")
        ax[2, j].set(xlabel="t (s)", ylabel="|difference| (m)", title="deviations")
        for i in range(n):
            if int(exact.events.contact[i]) == j:
                ax[1, j].axvline(float(exact.events.time[i]), color="0.85", lw=0.6, zorder=0)
    ax[0, 0].legend(fontsize=8)
    ax[1, 0].legend(fontsize=8)
    ax[2, 0].legend(fontsize=8)
    save_figure(fig, args, "two_block_coulomb_friction.png")
    assert dev_x < 1e-7 and dev_u < 1e-6 and dev_t < 1e-7, (dev_x, dev_u, dev_t)
    assert creep < 1e-10, creep
    assert 0.25 < first_motion(ts_np, x[:, 0]) < 0.3


if __name__ == "__main__":
    main()
