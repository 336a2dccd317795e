"""Compile time and throughput of contact runs against the UK kernels of their event code.

A hybrid run (:mod:`ukjax._hybrid`) holds two kinds of UK solves: the vector field of the
stages of each step, and the code that runs once per step or once per event (event
values, stick-slip switches, impacts with friction, the complementarity pivots, the
initial mode). Three settings of the kernels, in the same run:

- **default**: `AutoKernels()`: unrolled kernels (n <= 8) in the stages, LAPACK in the
  event code (`max_unrolled_at_events=0`);
- **unrolled everywhere**: `AutoKernels(max_unrolled_at_events=8)`, the default before
  stop 45;
- **LAPACK everywhere**: `LapackKernels()`.

For each system: seconds to trace + lower and to compile `jax.jit(simulate)` for one
trajectory, and for a `jax.jit(jax.vmap(simulate))` batch of 256, then the batch's run
time (best of two, after the compiled first call) in trajectories per second. Float64,
`simulate`'s defaults otherwise.

    python benchmarks/contact_compile.py [--quick] [--json FILE]
"""

from __future__ import annotations

import argparse
import time

import jax


jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpy as np
import rocking

import ukjax
from _common import machine_info, out_path, write_json
from ukjax.systems import BallsOnTable, BouncingBall, TwoBlockFriction


BATCH = 256
KERNELS = {
    "default": None,
    "unrolled everywhere": ukjax.AutoKernels(max_unrolled_at_events=8),
    "LAPACK everywhere": ukjax.LapackKernels(),
}


def cases(rng):
    """(name, system, ts, q0 (B, n), qd0 (B, n)) of each contact system."""
    B = BATCH
    ball = BallsOnTable(count=1, mu_static=0.3, mu_kinetic=0.2)
    sphere_qd = np.c_[rng.uniform(-1, 1, (B, 2)), np.zeros(B), rng.uniform(-50, 50, (B, 3))]
    sphere_q = np.tile([0.0, 0.0, ball.radius, 0.0, 0.0, 0.0], (B, 1))
    angles = np.random.default_rng(0).uniform(0.05, 0.15, B)  # all rest within max_events
    block_q = np.stack([np.asarray(rocking.start(th)) for th in angles])
    two_qd = np.c_[rng.uniform(-1, 1, B), np.zeros(B), rng.uniform(-1, 1, B), np.zeros(B)]
    return [
        ("BouncingBall (n 1, k 1)", BouncingBall(), jnp.linspace(0.0, 3.0, 11),
         rng.uniform(0.5, 1.5, (B, 1)), np.zeros((B, 1))),
        ("TwoBlockFriction (n 4, k 2, planar)", TwoBlockFriction(), jnp.linspace(0.0, 5.0, 11),
         np.zeros((B, 4)), two_qd),
        ("rocking block (n 3, k 2, planar)", rocking.RoughBlock(), jnp.linspace(0.0, 2.0, 11),
         block_q, np.zeros((B, 3))),
        ("ball on a table (n 6, k 1, 3-D cone)", ball, jnp.linspace(0.0, 0.8, 9),
         sphere_q, sphere_qd),
    ]  # fmt: skip


def measure(system, ts, q0, qd0, kernels) -> dict:
    kw = {} if kernels is None else {"uk_solver": ukjax.Regularized(kernels=kernels)}
    one = lambda q, qd: ukjax.simulate(system, q, qd, ts, **kw)
    row = {}
    for label, fn, args in (
        ("single", one, (q0[0], qd0[0])),
        ("batch", jax.vmap(one), (q0, qd0)),
    ):
        jax.clear_caches()
        t0 = time.perf_counter()
        lowered = jax.jit(fn).trace(*args).lower()
        t1 = time.perf_counter()
        compiled = lowered.compile()
        t2 = time.perf_counter()
        row[f"{label}_trace_lower"], row[f"{label}_xla"] = t1 - t0, t2 - t1
        out = jax.block_until_ready(compiled(*args))
        if label == "batch":
            best = float("inf")
            for _ in range(2):
                t3 = time.perf_counter()
                out = jax.block_until_ready(compiled(*args))
                best = min(best, time.perf_counter() - t3)
            row["batch_run"] = best
            row["traj_per_s"] = q0.shape[0] / best
            row["events"] = int(out.events.count.sum())
            row["failed"] = int(np.sum(np.asarray(out.result._value) != 0))
            row["q_end"] = np.asarray(out.q[:, -1]).tolist()
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the first two systems only")
    ap.add_argument("--json", default=out_path("contact_compile.json"))
    args = ap.parse_args()
    info = machine_info()
    print(f"JAX {info['jax']} on {info['backend']} ({info['cpu_count']} CPUs), float64")
    print(f"seconds of trace+lower / XLA compile; batch of {BATCH}: run s, trajectories/s")
    head = f"{'system':<38} {'kernels':<20} | {'1: trace':>8} {'XLA':>6} | "
    print(head + f"{'B: trace':>8} {'XLA':>6} {'run':>7} {'traj/s':>7} | events")
    rows = []
    all_cases = cases(np.random.default_rng(0))
    for name, system, ts, q0, qd0 in all_cases[:2] if args.quick else all_cases:
        q0, qd0 = jnp.asarray(q0, jnp.float64), jnp.asarray(qd0, jnp.float64)
        reference = None
        for label, kernels in KERNELS.items():
            r = measure(system, ts, q0, qd0, kernels)
            q_end = np.asarray(r.pop("q_end"))
            reference = q_end if reference is None else reference
            r["max_q_difference_to_default"] = float(np.nanmax(np.abs(q_end - reference)))
            rows.append({"system": name, "kernels": label, **r})
            print(
                f"{name:<38} {label:<20} | {r['single_trace_lower']:8.1f} {r['single_xla']:6.1f}"
                f" | {r['batch_trace_lower']:8.1f} {r['batch_xla']:6.1f} {r['batch_run']:7.3f}"
                f" {r['traj_per_s']:7.0f} | {r['events']} (failed {r['failed']}, "
                f"|dq| {r['max_q_difference_to_default']:.1e})",
                flush=True,
            )
    write_json(args.json, {"machine": info, "batch": BATCH, "rows": rows})


if __name__ == "__main__":
    main()
