"""Constraint drift over long runs: none vs Baumgarte vs projection.

For the doubly constrained pendulum (Pamplona 2021, §3.4) and an N-link planar chain, integrate
with a fixed-step Tsit5 (dt = 1e-3) for up to 1e6 steps and report the constraint residual
max(|phi|, |phi_dot|) and the relative energy error against simulated time, plus the cost
of each method per step (compile time reported separately). The peer in the same run is
the unstabilised integration (the cost baseline and the drift to beat).

    python benchmarks/drift.py [--steps 1000000] [--links 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import time

import jax


jax.config.update("jax_enable_x64", True)
import diffrax
import jax.numpy as jnp
import numpy as np

import ukjax
from _common import machine_info, out_path, write_json
from ukjax.systems import DoubleRodPendulum, PlanarChain


def measure(system, q0, qd0, steps, dt, stabilization):
    T = steps * dt
    ts = jnp.linspace(0.0, T, 101)
    f = jax.jit(
        lambda a, b: ukjax.simulate(
            system,
            a,
            b,
            ts,
            solver=diffrax.Tsit5(),
            stepsize_controller=diffrax.ConstantStepSize(),
            dt0=dt,
            max_steps=steps + 10,
            stabilization=stabilization,
            initial_conditions=ukjax.IgnoreInitial(),
        )
    )
    t0 = time.perf_counter()
    compiled = f.lower(q0, qd0).compile()
    t_compile = time.perf_counter() - t0
    t0 = time.perf_counter()
    sol = jax.block_until_ready(compiled(q0, qd0))
    t_run = time.perf_counter() - t0
    d = ukjax.diagnostics(system, sol, stabilization=stabilization)
    res = np.maximum(
        np.abs(np.asarray(d.position)).max(axis=1), np.abs(np.asarray(d.velocity)).max(axis=1)
    )
    E = np.asarray(d.energy)
    scale = max(abs(E[0]), np.abs(E - np.asarray(d.energy)[0]).max(), 1.0)
    rel_E = np.abs(E - E[0]) / scale
    return {
        "compile_s": t_compile,
        "run_s": t_run,
        "us_per_step": 1e6 * t_run / steps,
        "max_residual": float(res.max()),
        "final_residual": float(res[-1]),
        "max_rel_energy_error": float(rel_E.max()),
        "residual_vs_time": {"t": np.asarray(d.ts)[::10].tolist(), "r": res[::10].tolist()},
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--dt", type=float, default=1e-3)
    ap.add_argument("--links", type=int, default=5)
    ap.add_argument("--json", default=out_path("drift.json"))
    args = ap.parse_args()
    rod = DoubleRodPendulum()
    chain = PlanarChain.uniform(args.links)
    th = jnp.linspace(0.4, 1.2, args.links)
    cases = {
        "double_rod_pendulum": (rod, *rod.initial_state()),
        f"chain_{args.links}": (chain, *chain.state_from_angles(th, jnp.zeros(args.links))),
    }
    methods = {
        "none": ukjax.NoStabilization(),
        "baumgarte(10,10)": ukjax.Baumgarte(10.0, 10.0),
        "projection": ukjax.Projection(),
    }
    results = {}
    print(
        f"{args.steps:,} fixed Tsit5 steps of dt = {args.dt:g} "
        f"(t in [0, {args.steps * args.dt:g}]), float64"
    )
    print(
        f"{'system':<22}{'method':<18}{'max resid':>11}{'final resid':>13}{'max rel dE':>12}"
        f"{'us/step':>9}{'cost':>7}{'compile s':>10}"
    )
    for cname, (system, q0, qd0) in cases.items():
        base = None
        for mname, stab in methods.items():
            r = measure(system, q0, qd0, args.steps, args.dt, stab)
            base = r["us_per_step"] if base is None else base
            r["relative_cost"] = r["us_per_step"] / base
            results[f"{cname}/{mname}"] = r
            print(
                f"{cname:<22}{mname:<18}{r['max_residual']:>11.2e}{r['final_residual']:>13.2e}"
                f"{r['max_rel_energy_error']:>12.2e}{r['us_per_step']:>9.1f}"
                f"{r['relative_cost']:>7.2f}{r['compile_s']:>10.2f}",
                flush=True,
            )
    write_json(
        args.json,
        {"machine": machine_info(), "steps": args.steps, "dt": args.dt, "results": results},
    )


if __name__ == "__main__":
    main()
