"""Accelerator throughput: system-steps per second of the N-link planar chain against the
batch size (2^0 ... 2^20) and N, in float32 and float64, with `nvidia-smi` recorded next to
the figures. Meant for the GPU machine; runs anywhere (`--quick` is a CPU smoke test).

Each point: `jit(vmap(simulate))` of `PlanarChain.uniform(N)` with the classical RK4
(`ukjax.RK4`) at dt = 1e-3 for `--steps` steps, from a batch of states released from rest,
default run-time checks on, saving only the final state. Compile time is reported
separately. The batch is capped so that the dense per-state work fits in memory
(2^26 / (4 N^2) states); a point that still runs out of memory is recorded as "OOM".

    python benchmarks/gpu.py [--links 2,4,8,16,32] [--max-log2-batch 20] [--log2-step 2]
                             [--steps 200] [--quick] [--json FILE]
"""

from __future__ import annotations

import argparse
import subprocess
import time

import jax


jax.config.update("jax_enable_x64", True)
import diffrax
import jax.numpy as jnp
import numpy as np

import ukjax
from _common import machine_info, out_path, write_json
from ukjax.systems import PlanarChain


def nvidia_smi() -> str:
    try:
        return subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return f"nvidia-smi not available: {e}"


def run_point(N, batch, dtype, steps, dt=1e-3):
    chain = PlanarChain.uniform(N)
    rng = np.random.default_rng(N)
    theta = jnp.asarray(0.3 + 0.4 * rng.random((batch, N)), dtype)
    q0, qd0 = jax.vmap(lambda a: chain.state_from_angles(a, jnp.zeros_like(a)))(theta)
    q0, qd0 = q0.astype(dtype), qd0.astype(dtype)
    ts = jnp.array([0.0, dt * steps], dtype)
    one = lambda a, b: ukjax.simulate(
        chain,
        a,
        b,
        ts,
        solver=ukjax.RK4(),
        stepsize_controller=diffrax.ConstantStepSize(),
        dt0=dt,
        max_steps=steps + 10,
        throw=False,
        initial_conditions=ukjax.CheckInitial(tol=1e-3),
    ).q[-1]
    fn = jax.jit(jax.vmap(one))
    t0 = time.perf_counter()
    compiled = fn.lower(q0, qd0).compile()
    t_compile = time.perf_counter() - t0
    compiled(q0, qd0).block_until_ready()
    best = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        out = compiled(q0, qd0).block_until_ready()
        best = min(best, time.perf_counter() - t0)
    link = jnp.linalg.norm(
        jnp.diff(
            jnp.concatenate([jnp.zeros((batch, 1, 2), dtype), out.reshape(batch, N, 2)], 1), axis=1
        ),
        axis=2,
    )
    return t_compile, best, float(jnp.max(jnp.abs(link - 1.0)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--links", default="2,4,8,16,32")
    ap.add_argument("--max-log2-batch", type=int, default=20)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--log2-step", type=int, default=2, help="batch sizes 2^0, 2^step, ...")
    ap.add_argument("--quick", action="store_true", help="N = 2, 4; batch up to 2^6; 20 steps")
    ap.add_argument("--json", default=out_path("gpu.json"))
    args = ap.parse_args()
    if args.quick:
        args.links, args.max_log2_batch, args.steps = "2,4", 6, 20
    info = machine_info()
    smi = nvidia_smi()
    print(smi)
    print(
        f"JAX {info['jax']} on {info['backend']} ({info['device']}); RK4 dt = 1e-3, "
        f"{args.steps} steps; system-steps/s (compile excluded)"
    )
    print(
        f"{'dtype':<8} {'N':>3} {'batch':>8} | {'steps/s':>14} {'run s':>8} {'compile s':>9} | "
        f"{'max |link-1|':>12}"
    )
    rows = []
    for dtype in (jnp.float32, jnp.float64):
        for N in (int(x) for x in args.links.split(",")):
            cap = min(2**args.max_log2_batch, max(2**26 // (4 * N * N), 1))
            for k in range(0, args.max_log2_batch + 1, args.log2_step):
                batch = 2**k
                if batch > cap:
                    break
                row = {"dtype": jnp.dtype(dtype).name, "N": N, "batch": batch}
                try:
                    tc, tr, err = run_point(N, batch, dtype, args.steps)
                    row.update(
                        compile_s=tc,
                        run_s=tr,
                        steps_per_s=batch * args.steps / tr,
                        max_link_error=err,
                    )
                    print(
                        f"{row['dtype']:<8} {N:>3} {batch:>8} | {row['steps_per_s']:14,.0f} "
                        f"{tr:8.3f} {tc:9.2f} | {err:12.1e}",
                        flush=True,
                    )
                except Exception as e:  # noqa: BLE001 - record OOM and go on
                    if "RESOURCE_EXHAUSTED" not in str(e) and "out of memory" not in str(e).lower():
                        raise
                    row["error"] = "OOM"
                    print(f"{row['dtype']:<8} {N:>3} {batch:>8} | OOM", flush=True)
                rows.append(row)
                # after every point: a run stopped at a time limit keeps what it measured
                write_json(
                    args.json,
                    {"machine": info, "nvidia_smi": smi, "steps": args.steps, "rows": rows},
                )


if __name__ == "__main__":
    main()
