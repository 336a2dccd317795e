"""Accelerator throughput at sweep-sized batches: system-steps per second of the N-link chain
a user writes (N = 8, 16) and of the 6-DoF rigid-body arm read from its URDF file, at batch
1K ... 64K, in float64 and float32, on the accelerator and on this machine's CPU in the same
run, beside MuJoCo C on the same CPU. Without an accelerator it runs on the CPU and says so.

Every point: `jax.jit(jax.vmap(simulate))` at the defaults a user gets (default UK solver,
`Projection` after every step, run-time checks, `throw=True`) except the method and the
step, which make every batch do the same work and the peer comparable: the classical RK4
(`solver=ukjax.RK4()`) at the constant dt = 1e-3 for `--steps` steps, from a batch of states
at rest, saving the final state; the time is the best of the timed calls after a warm-up
call, compile excluded (compile is timed at the smallest batch, on its own; the larger
batches compile concurrently and are not timed).

Systems:
- `chain N=8`, `chain N=16`: `UserChain` of `benchmarks/mujoco_compare.py` (point masses on
  unit links, Cartesian coordinates, an `int` field for N); MuJoCo: the same chain in hinge
  coordinates (`mujoco_compare.chain_xml`).
- `arm6`: `ukjax.from_urdf("examples/models/arm6.urdf")` (a `ukjax.RigidModel`, joint
  damping, gravity); MuJoCo: the same file.

Peer: MuJoCo's RK4 at the same dt and steps (`mujoco.rollout`, one thread per CPU core),
float64, on the CPU batch. Accuracy column: the largest joint-position difference from
MuJoCo's RK4 over the batch's first `--cpu-batches` states (both integrate the same model with the
same method and step, so float64 rows show round-off and float32 rows float32's error).

    python benchmarks/gpu.py [--batches 1024,4096,16384,65536] [--cpu-batches 1024]
                             [--steps 200] [--systems chain8,chain16,arm6] [--quick]
                             [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import jax


jax.config.update("jax_enable_x64", True)
import diffrax
import jax.numpy as jnp
import mujoco
import numpy as np
from mujoco_compare import UserChain, chain_xml
from rigid import ARM, mujoco_final

import ukjax
from _common import machine_info, out_path, write_json


DT = 1e-3


def nvidia_smi() -> str:
    try:
        return subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return f"nvidia-smi not available: {e}"


class Bench:
    """One system: the ukjax program of one trajectory, its initial data and the MuJoCo model."""

    def __init__(self, name: str, batch: int, rng):
        self.name = name
        if name.startswith("chain"):
            n = int(name[5:])
            self.system = UserChain(n)
            self.mj = mujoco.MjModel.from_xml_string(chain_xml(n, "RK4"))
            theta = 0.3 + 0.4 * rng.random((batch, n))  # absolute link angles, at rest
            self.data = np.diff(theta, axis=1, prepend=0.0)  # MuJoCo's: relative angles
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.system = ukjax.from_urdf(ARM)
            self.mj = mujoco.MjModel.from_xml_path(ARM)
            self.data = self.mj.qpos0 + 0.5 * rng.standard_normal((batch, self.mj.nq))

    def qpos0(self, batch: int) -> np.ndarray:
        """MuJoCo's joint positions of the first `batch` states."""
        return self.data[:batch]

    def one(self, steps: int):
        """qpos (MuJoCo's order) after `steps` RK4 steps from one row of `data`."""
        system = self.system
        rk4 = dict(solver=ukjax.RK4(), stepsize_controller=diffrax.ConstantStepSize(), dt0=DT)

        def final(x):
            if isinstance(system, UserChain):
                th = jnp.cumsum(x)
                q0 = jnp.stack([jnp.cumsum(jnp.sin(th)), jnp.cumsum(-jnp.cos(th))], -1).ravel()
                qd0 = jnp.zeros_like(q0)
            else:
                q0, qd0 = system.initial_state(x)
            ts = jnp.array([0.0, steps * DT], x.dtype)
            q1 = ukjax.simulate(system, q0, qd0, ts, **rk4).q[-1]
            if isinstance(system, UserChain):
                p = q1.reshape(-1, 2)
                d = jnp.diff(jnp.concatenate([jnp.zeros((1, 2), p.dtype), p]), axis=0)
                return jnp.diff(jnp.arctan2(d[:, 0], -d[:, 1]), prepend=0.0)
            return system.qpos(q1)

        return jax.jit(jax.vmap(final))


def timed_calls(compiled, x) -> float:
    """Best wall seconds of the timed calls after one warm-up call (two timed calls when
    one takes under a second)."""
    compiled(x).block_until_ready()
    best, calls = float("inf"), 0
    while calls < 2 and (calls == 0 or best < 1.0):
        t0 = time.perf_counter()
        compiled(x).block_until_ready()
        best, calls = min(best, time.perf_counter() - t0), calls + 1
    return best


def measure(bench: Bench, device, dtype, batches, steps, reference, report):
    """Compile (the smallest batch timed alone, the rest concurrently), then time every
    batch on `device`."""
    fn = bench.one(steps)
    inputs = {b: jax.device_put(jnp.asarray(bench.qpos0(b), dtype), device) for b in batches}
    with jax.default_device(device):
        t0 = time.perf_counter()
        first = fn.lower(inputs[batches[0]]).compile()
        t_compile = time.perf_counter() - t0
        lowered = [fn.lower(inputs[b]) for b in batches[1:]]
        with ThreadPoolExecutor(max_workers=max(len(lowered), 1)) as pool:
            compiled = [first, *pool.map(lambda low: low.compile(), lowered)]
        for i, (b, prog) in enumerate(zip(batches, compiled)):
            try:
                seconds = timed_calls(prog, inputs[b])
                q1 = np.asarray(prog(inputs[b])[: len(reference)], np.float64)
                err = float(np.max(np.abs(q1 - reference[: len(q1)])))
                report(bench.name, dtype, device, b, seconds, t_compile if i == 0 else None, err)
            except Exception as e:  # noqa: BLE001 - record out-of-memory and go on
                if "RESOURCE_EXHAUSTED" not in str(e) and "out of memory" not in str(e).lower():
                    raise
                report(bench.name, dtype, device, b, None, None, None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--systems", default="chain8,chain16,arm6")
    ap.add_argument("--batches", default="1024,4096,16384,65536", help="on the accelerator")
    ap.add_argument("--cpu-batches", default="1024", help="on the CPU, in the same run")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--dtypes", default="float64,float32")
    ap.add_argument("--quick", action="store_true", help="chain8 and arm6, batch 64, 20 steps")
    ap.add_argument("--json", default=out_path("gpu.json"))
    args = ap.parse_args()
    if args.quick:
        args.systems, args.batches, args.cpu_batches, args.steps = "chain8,arm6", "64", "64", 20
    accel = jax.default_backend() != "cpu"
    cpu = jax.devices("cpu")[0]
    info, smi = machine_info(), nvidia_smi() if accel else ""
    print(smi)
    where = f"{info['device']} and the CPU" if accel else "the CPU only: no accelerator found"
    print(
        f"JAX {info['jax']}, MuJoCo {mujoco.__version__}, {os.cpu_count()} CPU cores; running on "
        f"{where}. RK4 dt = {DT}, {args.steps} steps; system-steps/s, compile excluded"
    )
    print(
        f"{'system':<10} {'dtype':<8} {'device':<10} {'batch':>7} | {'steps/s':>13} "
        f"{'run s':>8} {'compile s':>9} | {'max |q - MuJoCo|':>16}"
    )
    rows = []

    def report(system, dtype, device, batch, seconds, compile_s, err):
        row = dict(system=system, dtype=jnp.dtype(dtype).name, device=device.platform,
                   device_kind=device.device_kind, batch=batch, run_s=seconds,
                   compile_s=compile_s, max_qpos_difference=err)  # fmt: skip
        if seconds is None:
            row["error"] = "OOM"
            line = "OOM"
        else:
            row["steps_per_s"] = batch * args.steps / seconds
            cs = "" if compile_s is None else f"{compile_s:.2f}"
            line = f"{row['steps_per_s']:13,.0f} {seconds:8.3f} {cs:>9} | {err:16.1e}"
        print(f"{system:<10} {row['dtype']:<8} {row['device']:<10} {batch:>7} | {line}", flush=True)
        rows.append(row)
        # after every point: a run stopped at a time limit keeps what it measured
        write_json(args.json, dict(machine=info, nvidia_smi=smi, steps=args.steps, rows=rows))

    batches = sorted(int(b) for b in args.batches.split(","))
    cpu_batches = sorted(int(b) for b in args.cpu_batches.split(","))
    rng = np.random.default_rng(0)
    for name in args.systems.split(","):
        bench = Bench(name, max(batches + cpu_batches), rng)
        peer_batch = cpu_batches[-1]
        seconds, reference = mujoco_final(
            bench.mj, bench.qpos0(peer_batch), DT, os.cpu_count(), t1=args.steps * DT
        )
        row = dict(system=name, dtype="float64", device="cpu", device_kind="MuJoCo RK4",
                   batch=peer_batch, run_s=seconds, steps_per_s=peer_batch * args.steps / seconds,
                   max_qpos_difference=0.0)  # fmt: skip
        rows.append(row)
        print(
            f"{name:<10} {'float64':<8} {'MuJoCo':<10} {peer_batch:>7} | "
            f"{row['steps_per_s']:13,.0f} {seconds:8.3f} {'':>9} | {'(reference)':>16}"
        )
        for dtype in (getattr(jnp, d) for d in args.dtypes.split(",")):
            if accel:
                measure(bench, jax.devices()[0], dtype, batches, args.steps, reference, report)
            measure(bench, cpu, dtype, cpu_batches, args.steps, reference, report)


if __name__ == "__main__":
    main()
