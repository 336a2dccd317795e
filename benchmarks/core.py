"""Core figures: single-state UK acceleration calls/s and a vmapped simulate of 1024
doubly constrained pendulums (Pamplona 2021, §3.4, t in [0, 3]), each against a NumPy/SciPy peer
run in the same process (the seeds' MATLAB workflow: pinv + sqrtm per state, ode45-like
adaptive integration one trajectory at a time).

    python benchmarks/core.py [--batch 1024] [--peer-trajectories 16] [--json out.json]
"""

from __future__ import annotations

import argparse
import time

import jax


jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpy as np
from scipy.integrate import solve_ivp

import ukjax
from _common import machine_info, out_path, seed_workflow_uk, time_compile_and_run, write_json
from ukjax.systems import DoubleRodPendulum


def numpy_uk(q, qd, g=10.0):
    """The published MATLAB workflow for the same system (M^{-1/2} by eigendecomposition,
    then pinv; _common.seed_workflow_uk) with the double rod's M, Q, A, b written by hand."""
    x, y, z = q
    A = np.array([[x, y, z], [x - 1.0, y, z - 1.0]])
    b = -np.array([1.0, 1.0]) * (qd @ qd)
    return seed_workflow_uk(np.eye(3), np.array([g, 0.0, 0.0]), A, b)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--peer-trajectories", type=int, default=16)
    p.add_argument("--json", default=out_path("core.json"))
    args = p.parse_args()
    sys_ = DoubleRodPendulum()
    q0, qd0 = sys_.initial_state()

    # 1. single-state acceleration calls per second (jitted, one state per call)
    acc = jax.jit(lambda q, qd: ukjax.acceleration(sys_, 0.0, q, qd))
    acc(q0, qd0).block_until_ready()
    n = 5000
    t0 = time.perf_counter()
    for _ in range(n):
        acc(q0, qd0).block_until_ready()
    acc_per_s = n / (time.perf_counter() - t0)
    acc_nc = jax.jit(lambda q, qd: ukjax.acceleration(sys_, 0.0, q, qd, check=False))
    acc_nc(q0, qd0).block_until_ready()
    t0 = time.perf_counter()
    for _ in range(n):
        acc_nc(q0, qd0).block_until_ready()
    acc_nc_per_s = n / (time.perf_counter() - t0)
    qn, qdn = np.asarray(q0), np.asarray(qd0)
    t0 = time.perf_counter()
    for _ in range(n):
        numpy_uk(qn, qdn)
    np_per_s = n / (time.perf_counter() - t0)
    np.testing.assert_allclose(acc(q0, qd0), numpy_uk(qn, qdn), atol=1e-12)

    # 1b. batched acceleration throughput
    B = args.batch
    rng = np.random.default_rng(0)
    qs = jnp.asarray(rng.standard_normal((B, 3)))
    qds = jnp.asarray(rng.standard_normal((B, 3)))
    c_acc, r_acc, _ = time_compile_and_run(
        jax.vmap(lambda q, qd: ukjax.acceleration(sys_, 0.0, q, qd)), qs, qds, repeats=20
    )

    # 2. vmapped simulate, 1024 trajectories
    ts = jnp.linspace(0.0, 3.0, 301)
    yd0 = jnp.linspace(1.0, 6.0, B)
    Q0 = jnp.tile(q0, (B, 1))
    QD0 = jnp.stack([jnp.zeros(B), yd0, jnp.zeros(B)], axis=1)
    c_sim, r_sim, sol = time_compile_and_run(
        jax.vmap(lambda a, b: ukjax.simulate(sys_, a, b, ts)), Q0, QD0, repeats=2
    )

    # 2b. the peer: scipy DOP853 + numpy pinv, one trajectory at a time, same tolerance
    k = min(args.peer_trajectories, B)
    idx = np.linspace(0, B - 1, k).astype(int)
    t0 = time.perf_counter()
    max_dev = 0.0
    for i in idx:
        rhs = lambda t, s: np.concatenate([s[3:], numpy_uk(s[:3], s[3:])])
        ref = solve_ivp(
            rhs,
            (0.0, 3.0),
            np.concatenate([Q0[i], QD0[i]]),
            method="DOP853",
            rtol=1e-12,
            atol=1e-12,
            t_eval=np.asarray(ts),
        )
        max_dev = max(max_dev, float(np.abs(ref.y[:3].T - np.asarray(sol.q[i])).max()))
    peer_per_traj = (time.perf_counter() - t0) / k

    rows = [
        ("acceleration, single state (jit), calls/s", f"{acc_per_s:,.0f}"),
        ("acceleration, single state, check=False, calls/s", f"{acc_nc_per_s:,.0f}"),
        ("NumPy eigh+pinv peer, single state, calls/s", f"{np_per_s:,.0f}"),
        (f"acceleration, vmap batch {B}: compile s", f"{c_acc:.2f}"),
        (f"acceleration, vmap batch {B}: states/s", f"{B / r_acc:,.0f}"),
        (f"simulate vmap {B} x t in [0,3]: compile s", f"{c_sim:.2f}"),
        (f"simulate vmap {B} x t in [0,3]: run s", f"{r_sim:.3f}"),
        ("simulate: trajectories/s", f"{B / r_sim:,.1f}"),
        ("peer scipy DOP853+pinv: s per trajectory", f"{peer_per_traj:.3f}"),
        ("speed-up vs peer (per trajectory)", f"{peer_per_traj / (r_sim / B):,.0f}x"),
        ("max |q_ukjax - q_peer| over peer runs", f"{max_dev:.1e}"),
        ("mean adaptive steps per trajectory", f"{float(np.mean(sol.stats['num_steps'])):.0f}"),
    ]
    info = machine_info()
    print(
        f"JAX {info['jax']} on {info['backend']} ({info['cpu_count']} CPUs), float64, "
        "Dopri8 rtol=atol=1e-12"
    )
    w = max(len(r[0]) for r in rows)
    for name, val in rows:
        print(f"{name:<{w}}  {val:>12}")
    write_json(args.json, {"machine": info, "results": dict(rows)})


if __name__ == "__main__":
    main()
