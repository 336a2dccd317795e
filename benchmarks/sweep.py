"""Sweep benchmark: 4096 trajectories with `ukjax.sweep` against scipy `solve_ivp` + NumPy
`pinv` one trajectory at a time (the seeds' MATLAB workflow), at equal tolerance.

Systems (Pamplona 2021):
- §3.4, the doubly constrained 3-D pendulum (n = 3, two holonomic constraints), t in [0, 3]
  with 301 save points; the batch varies the initial speed y'(0) over [1, 6].
- §3.3, the two-mass Duffing oscillator with the rheonomic constraint
  x1 - x2 = A0 exp(-alpha t) sin(omega t), t in [0, 5] with 501 save points; the batch varies
  x1(0) = x2(0) over [0.5, 1.5] and x2'(0) over [1, 3] (x1'(0) = x2'(0) + A0 omega, so
  every initial state satisfies the constraint).

Both integrators run an explicit 8th-order Dormand-Prince pair with rtol = atol = 1e-12
(ukjax: diffrax Dopri8; peer: scipy DOP853). The peer integrates a subset of the batch (the
same trajectories, evenly spaced) and its time per trajectory is extrapolated to the whole
batch; every peer trajectory is compared with ukjax's.

ukjax's time is the wall time of `ukjax.sweep` (chunks of 1024, in memory). The first
chunk includes compilation; compile time is reported as the first chunk's time minus the
mean of the others, and run time as the rest.

    python benchmarks/sweep.py [--batch 4096] [--peer 32] [--quick] [--json FILE]
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
from _common import machine_info, out_path, seed_workflow_uk, write_json
from ukjax.systems import DoubleRodPendulum, DuffingOscillator


RTOL = ATOL = 1e-12


def double_rod_rhs(g=10.0, L1=1.0, L2=1.0):
    """Seed 000 eqs 73-76 written out by hand: M = I, Q = [g, 0, 0], A from the gradients
    of the two constraints, b = -|qd|^2 for both rows."""
    M = np.eye(3)
    Q = np.array([g, 0.0, 0.0])

    def rhs(t, s):
        q, qd = s[:3], s[3:]
        x, y, z = q
        A = np.array([[x, y, z], [x - L1, y, z - L2]])
        b = -np.full(2, qd @ qd)
        return np.concatenate([qd, seed_workflow_uk(M, Q, A, b)])

    return rhs


def duffing_rhs(p: DuffingOscillator):
    """Seed 000 eqs 57-66 written out by hand."""
    m1, m2, k1, k2, k1n, k2n, c1, c2 = (
        float(getattr(p, k)) for k in ("m1", "m2", "k1", "k2", "k1_nl", "k2_nl", "c1", "c2")
    )
    A0, om, al = float(p.A0), float(p.omega), float(p.alpha)
    M = np.diag([m1, m2])
    A = np.array([[1.0, -1.0]])

    def rhs(t, s):
        x1, x2, v1, v2 = s
        u1, u1d = x1 - x2, v1 - v2
        f1 = k1 * u1 + k1n * u1**3 + c1 * u1d
        f2 = k2 * x2 + k2n * x2**3 + c2 * v2
        Q = np.array([-f1, f1 - f2])
        # second derivative of A0 exp(-al t) sin(om t)
        e = np.exp(-al * t)
        b = np.array([A0 * e * ((al**2 - om**2) * np.sin(om * t) - 2 * al * om * np.cos(om * t))])
        return np.concatenate([s[2:], seed_workflow_uk(M, Q, A, b)])

    return rhs


def cases(B: int):
    rod = DoubleRodPendulum()
    yd0 = np.linspace(1.0, 6.0, B)
    q0 = np.tile([1.0, 0.0, 0.0], (B, 1))
    qd0 = np.stack([np.zeros(B), yd0, np.zeros(B)], axis=1)
    yield (
        "double rod pendulum (Pamplona 2021, §3.4)",
        rod,
        q0,
        qd0,
        np.linspace(0, 3, 301),
        double_rod_rhs(),
    )

    duf = DuffingOscillator()
    rng = np.random.default_rng(0)
    x0 = rng.uniform(0.5, 1.5, B)
    v2 = rng.uniform(1.0, 3.0, B)
    q0 = np.stack([x0, x0], axis=1)
    qd0 = np.stack([v2 + float(duf.A0 * duf.omega), v2], axis=1)
    yield (
        "Duffing oscillator (Pamplona 2021, §3.3)",
        duf,
        q0,
        qd0,
        np.linspace(0, 5, 501),
        duffing_rhs(duf),
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--chunk", type=int, default=1024)
    ap.add_argument(
        "--vector-width",
        type=int,
        default=None,
        help="ukjax.sweep vector_width (default: the whole share of a chunk at once)",
    )
    ap.add_argument("--systems", default="rod,duffing", help="comma list: rod, duffing")
    ap.add_argument("--peer", type=int, default=32, help="trajectories the peer integrates")
    ap.add_argument("--quick", action="store_true", help="batch 256, 4 peer trajectories")
    ap.add_argument("--json", default=out_path("sweep.json"))
    args = ap.parse_args()
    if args.quick:
        args.batch, args.chunk, args.peer = 256, 128, 4
    info = machine_info()
    print(
        f"JAX {info['jax']} on {info['backend']} ({info['cpu_count']} CPUs), float64, "
        f"rtol = atol = {RTOL:g}, batch {args.batch}, chunks of {args.chunk}"
    )
    rows = []
    width = args.vector_width
    wanted = set(args.systems.split(","))
    for key, (name, system, q0, qd0, ts, rhs) in zip(("rod", "duffing"), cases(args.batch)):
        if key not in wanted:
            continue
        stamps = []
        t_start = time.perf_counter()
        res = ukjax.sweep(
            system,
            jnp.asarray(q0),
            jnp.asarray(qd0),
            jnp.asarray(ts),
            chunk_size=args.chunk,
            vector_width=width,
            progress=False,
            rtol=RTOL,
            atol=ATOL,
            on_chunk=lambda i, n: stamps.append(time.perf_counter()),
        )
        total = time.perf_counter() - t_start
        chunk_times = np.diff([t_start] + stamps)
        steady = chunk_times[1:].mean() if len(chunk_times) > 1 else np.nan
        compile_s = chunk_times[0] - steady if len(chunk_times) > 1 else np.nan
        run_s = total - compile_s
        assert res.ok.all(), f"{name}: {int((~res.ok).sum())} trajectories failed"

        idx = np.linspace(0, args.batch - 1, args.peer).astype(int)
        max_dev = 0.0
        t0 = time.perf_counter()
        for i in idx:
            ref = solve_ivp(
                rhs,
                (ts[0], ts[-1]),
                np.concatenate([q0[i], qd0[i]]),
                method="DOP853",
                rtol=RTOL,
                atol=ATOL,
                t_eval=ts,
            )
            assert ref.success, ref.message
            max_dev = max(max_dev, float(np.abs(ref.y[: q0.shape[1]].T - res.q[i]).max()))
        peer_per_traj = (time.perf_counter() - t0) / len(idx)
        peer_total = peer_per_traj * args.batch
        row = {
            "system": name,
            "batch": args.batch,
            "vector_width": str(width),
            "ukjax_total_s": total,
            "ukjax_compile_s": compile_s,
            "ukjax_run_s": run_s,
            "ukjax_traj_per_s": args.batch / run_s,
            "ukjax_mean_steps": float(np.mean(res.num_steps)),
            "peer_trajectories": len(idx),
            "peer_s_per_traj": peer_per_traj,
            "peer_total_s_extrapolated": peer_total,
            "ratio_run": peer_total / run_s,
            "ratio_including_compile": peer_total / total,
            "max_abs_dev_q": max_dev,
        }
        rows.append(row)
        print(f"\n{name}")
        print(
            f"  ukjax.sweep      total {total:8.2f} s = compile {compile_s:5.2f} s + run "
            f"{run_s:7.2f} s"
            f"  ({row['ukjax_traj_per_s']:,.0f} traj/s, {row['ukjax_mean_steps']:.0f} steps each)"
        )
        print(
            f"  scipy+pinv peer  {peer_per_traj * 1e3:8.1f} ms/traj over {len(idx)} trajectories"
            f" -> {peer_total:,.0f} s for {args.batch}"
        )
        print(
            f"  ratio            {row['ratio_run']:,.0f}x (run)   "
            f"{row['ratio_including_compile']:,.0f}x"
            f" (including compile)   max |q - q_peer| = {max_dev:.1e}"
        )
    write_json(args.json, {"machine": info, "rtol": RTOL, "atol": ATOL, "rows": rows})


if __name__ == "__main__":
    main()
