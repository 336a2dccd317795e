"""Where a batched step's time goes: the compiled program's kernels, timed one by one.

XLA:CPU runs a `jax.jit(jax.vmap(simulate))` program as a sequence of kernels (fusions,
custom calls, copies) on its thread pool; under `jax.profiler` each kernel's execution is
recorded. This script runs a user-written system at the defaults (classical RK4 at
dt = 1e-3 and the batch of `mujoco_compare.py`, so that the figures sit beside MuJoCo's),
profiles one run of its compiled program and reports, per system-step:

- the wall time of the run without the profiler, and MuJoCo RK4's on the same chain and
  CPU (2 threads, `mujoco.rollout`) in the same process;
- the kernels per step and their thread time (the profiler's own overhead included, so
  compare shares, not sums, with the wall time), by the part of the program that issued
  them: the vector field (the UK evaluation of the stages), the per-step projection,
  the integrator's own loop;
- inside the vector field, by the operation or nested program the kernel's root
  belongs to (`jit(cholesky)`, a `div`, `vmap(jvp(...))` of the mass matrix from the
  kinetic energy, ...);
- the costliest kernels.

Systems (`--system`): `cartesian<N>` (`mujoco_compare.UserChain`: bobs in Cartesian
coordinates, link constraints), `angles<N>` (`AngleChain`: absolute angles, M and the
velocity terms from the kinetic energy), `mass<N>` (`AngleChainMass`: M written).

    python benchmarks/kernel_profile.py [--system cartesian4] [--steps 200] [--top 12]
                                        [--quick] [--json FILE]
"""

from __future__ import annotations

import argparse
import collections
import glob
import re
import tempfile
import time

import jax


jax.config.update("jax_enable_x64", True)
import diffrax
import jax.numpy as jnp
import mujoco_compare as mc
import numpy as np

import ukjax
from _common import machine_info, out_path, write_json


CLASSES = {"cartesian": mc.UserChain, "angles": mc.AngleChain, "mass": mc.AngleChainMass}
REGIONS = (  # (name, marker in a kernel's op_name), the first match names its region
    ("vector field", "jit(_field_call)"),
    ("per-step projection", "jit(_project_step)"),
    ("integrator loop", "diffeqsolve"),
)


def build(system: str, steps: int):
    """(compiled program, arguments, batch, links, start angles, compile seconds) of
    `system` at the defaults with RK4 at dt = 1e-3 for `steps` steps."""
    m = re.fullmatch(r"(cartesian|angles|mass)(\d+)", system)
    if m is None:
        raise ValueError(f"--system: cartesian<N>, angles<N> or mass<N>; got {system!r}")
    kind, N = m.group(1), int(m.group(2))
    B = min(1024, max(8192 // N, 2))
    theta0 = 0.3 + 0.4 * np.random.default_rng(0).random((B, N))
    model = CLASSES[kind](links=N)
    q0 = mc.chain_points(theta0).reshape(B, 2 * N) if kind == "cartesian" else theta0
    q0 = jnp.asarray(q0)
    ts = jnp.array([0.0, mc.DT * steps])
    rk4 = dict(solver=ukjax.RK4(), stepsize_controller=diffrax.ConstantStepSize(), dt0=mc.DT)
    one = lambda a, b: ukjax.simulate(model, a, b, ts, max_steps=steps + 10, **rk4).q[-1]
    t0 = time.perf_counter()
    program = jax.jit(jax.vmap(one)).lower(q0, jnp.zeros_like(q0)).compile()
    compile_s = time.perf_counter() - t0
    return program, (q0, jnp.zeros_like(q0)), B, N, theta0, compile_s


def kernel_times(program, args) -> tuple[collections.Counter, collections.Counter]:
    """(thread nanoseconds, executions) per kernel name over one profiled run."""
    with tempfile.TemporaryDirectory() as folder:
        jax.profiler.start_trace(folder)
        jax.block_until_ready(program(*args))
        jax.profiler.stop_trace()
        path = glob.glob(folder + "/**/*.xplane.pb", recursive=True)[0]
        data = jax.profiler.ProfileData.from_file(path)
    ns, calls = collections.Counter(), collections.Counter()
    skip = ("ThunkExecutor", "while", "cond", "conditional", "end:")
    for plane in data.planes:
        for line in plane.lines:
            if "XLAEigen" not in line.name:  # XLA:CPU's worker threads
                continue
            for event in line.events:
                if not event.name.startswith(skip):
                    ns[event.name] += event.duration_ns
                    calls[event.name] += 1
    return ns, calls


def op_names(program) -> dict[str, str]:
    """Each instruction of the optimised HLO and the op_name XLA kept for it."""
    names = {}
    for line in program.as_text().splitlines():
        m = re.match(r"\s*(?:ROOT )?%?([\w.\-]+) = .*?op_name=\"([^\"]*)\"", line)
        if m:
            names[m.group(1)] = m.group(2)
    return names


def region(op_name: str) -> tuple[str, str]:
    """(the part of the program, the operation inside the vector field) of an op_name."""
    for name, marker in REGIONS:
        if marker in op_name:
            if name != REGIONS[0][0]:
                return name, ""
            inner = op_name.split(marker, 1)[1].strip("/").split("/")[0]
            return name, inner or "(its own ops)"
    return "driver and checks", ""


def breakdown(ns, calls, names, steps: int, scale: float) -> dict:
    """The kernels' thread time (per system-step: `scale` = 1e-3 / batch / steps) and
    executions per step by part of the program, inside the vector field and kernel."""
    total = sum(ns.values())
    parts, inner = collections.defaultdict(lambda: [0, 0]), collections.defaultdict(lambda: [0, 0])
    for kernel, t in ns.items():
        part, op = region(names.get(kernel, ""))
        for key, table in ((part, parts), (op, inner)):
            if key:
                table[key][0] += t
                table[key][1] += calls[kernel]
    row = lambda t, n: {"kernels_per_step": n / steps, "thread_us": t * scale, "share": t / total}
    by = lambda table: sorted(table.items(), key=lambda kv: -kv[1][0])
    top = sorted(ns, key=lambda k: -ns[k])
    return {
        "parts": [{"part": k, **row(*v)} for k, v in by(parts)],
        "vector_field": [{"op": k, **row(*v)} for k, v in by(inner)],
        "kernels": [
            {"kernel": k, "part": " / ".join(filter(None, region(names.get(k, "")))),
             "us_per_execution": ns[k] / 1e3 / calls[k], **row(ns[k], calls[k])}
            for k in top
        ],
    }  # fmt: skip


def report(b: dict, top: int) -> None:
    print(f"{'part':<24}{'kernels/step':>13}{'us/step':>9}{'share':>7}")
    for r in b["parts"]:
        print(
            f"{r['part']:<24}{r['kernels_per_step']:>13.1f}{r['thread_us']:>9.2f}{r['share']:>7.1%}"
        )
    print("inside the vector field:")
    for r in b["vector_field"][:top]:
        print(f"  {r['op'][:40]:<40}{r['kernels_per_step']:>8.1f}/step{r['share']:>8.1%}")
    print("costliest kernels:")
    for r in b["kernels"][:top]:
        us = r["us_per_execution"]
        print(f"  {r['kernel'][:34]:<34}{r['share']:>7.1%}{us:>9.1f} us/run  {r['part']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--system", default="cartesian4")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--json", default=None)
    ap.add_argument("--quick", action="store_true", help="a smoke run: 2 links, 20 steps")
    args = ap.parse_args()
    if args.quick:
        args.system, args.steps = "cartesian2", 20
    program, inputs, B, N, theta0, compile_s = build(args.system, args.steps)
    jax.block_until_ready(program(*inputs))
    t0 = time.perf_counter()
    jax.block_until_ready(program(*inputs))
    wall_us = (time.perf_counter() - t0) * 1e6 / (B * args.steps)
    rel0 = np.diff(np.concatenate([np.zeros((B, 1)), theta0], 1), axis=1)
    mj_us = mc.mujoco_run(mc.chain_xml(N, "RK4"), rel0)[0] * 1e6 / (B * mc.STEPS)
    ns, calls = kernel_times(program, inputs)
    b = breakdown(ns, calls, op_names(program), args.steps, 1e-3 / (B * args.steps))
    print(f"JAX {jax.__version__} ({machine_info()['cpu_count']} CPUs); {args.system}, "
          f"batch {B}, RK4 dt = {mc.DT}, {args.steps} steps, defaults otherwise")  # fmt: skip
    print(f"wall: ukjax {wall_us:.2f} us per system-step (compile {compile_s:.1f} s), "
          f"MuJoCo RK4 {mj_us:.2f} us (2 threads): ratio {mj_us / wall_us:.2f}x")  # fmt: skip
    print(f"{len(ns)} kernels, {sum(calls.values()) / args.steps:.0f} executions per step; "
          "thread time under the profiler, per system-step:")  # fmt: skip
    report(b, args.top)
    b["kernels"] = b["kernels"][: 4 * args.top]
    write_json(args.json or out_path("kernel_profile.json"), {
        "machine": machine_info(), "system": args.system, "batch": B, "steps": args.steps,
        "settings": "RK4, dt = 1e-3, otherwise simulate's defaults; jax.jit(jax.vmap(simulate))",
        "wall_us_per_system_step": wall_us, "compile_s": compile_s,
        "mujoco_rk4_us_per_system_step": mj_us, **b,
    })  # fmt: skip


if __name__ == "__main__":
    main()
