"""Compile time of the first call: `ukjax.simulate` at its defaults (Dopri8, rtol = atol
= 1e-12, the default UK solver and projection, run-time checks on, float64) for every seed
system and for the N-link planar chain against N, single trajectory and under
`jax.jit(jax.vmap(...))` over a batch of 1024; the same programs with LAPACK kernels forced
(`uk_solver=ukjax.Regularized(kernels=ukjax.LapackKernels())`) are the peer in the same run.

Each figure is the wall time of `jax.jit(f).trace(...)` (Python tracing), `.lower()` and
`.compile()` (XLA) after `jax.clear_caches()`, on abstract inputs (nothing is executed; the
first call's run time is milliseconds); single trajectories are compiled with
`ukjax.compiler_options(batched=False)`, as `simulate`'s own program is, batches with JAX's
defaults, as a user's `jax.jit(jax.vmap(...))` is. The single-trajectory default column is
the better of two compilations (the machine's noise, not the program's); the others are
one each. A tiny program is compiled first, so the one-off start-up of JAX's compiler in
a fresh process (about 0.3 s here) is not charged to the first system. The last column is
what a user waits for: the wall time of the first `ukjax.simulate(system, q0, qd0, ts)`
with a concrete consistent state in a fresh Python process (eager input checks, tracing,
compilation and the run), after the same warm-up: the median of three processes (min and
max in the JSON).
The persistent compilation cache is off (JAX's default).

    python benchmarks/compile_time.py [--quick] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import jax


jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpy as np

import ukjax
from _common import machine_info, out_path, write_json
from ukjax import systems as S


def seed_systems():
    """(name, system, n) for each seed system."""
    yield "SimplePendulum", S.SimplePendulum(), 1
    yield "CartesianPendulum", S.CartesianPendulum(), 2
    yield "DoubleRodPendulum", S.DoubleRodPendulum(), 3
    yield "DuffingOscillator", S.DuffingOscillator(), 2
    yield "VaryingLengthPendulum", S.VaryingLengthPendulum(), 2
    yield "SwarmRobots", S.SwarmRobots(), len(S.SwarmRobots.initial_state()[0])
    yield "PolarProjectile", S.PolarProjectile(), 2
    yield "LogSpiralParticle", S.LogSpiralParticle(), 2
    yield "ConeSurfaceParticle", S.ConeSurfaceParticle(), 3
    yield "NonholonomicParticle", S.NonholonomicParticle(), 3
    yield "ParticleOnSphere", S.ParticleOnSphere(), 3
    yield "CoulombBead", S.CoulombBead(), len(S.CoulombBead().initial_state()[0])
    yield "EllipseSpringParticle", S.EllipseSpringParticle(), 2
    yield "AppellHamelWheel", S.AppellHamelWheel(), len(S.AppellHamelWheel().initial_state()[0])
    yield "FourBarLinkage", S.FourBarLinkage(), 3


FIRST_CALLS = 3  # fresh processes per seed system; the median is reported

SOLVERS = {
    "default": None,
    "lapack": ukjax.Regularized(kernels=ukjax.LapackKernels()),
}


def compile_seconds(system, n, method, batch):
    """(trace + lower seconds, XLA compile seconds) of simulate's program at its defaults."""
    ts = jnp.linspace(0.0, 1.0, 11)
    kw = {} if SOLVERS[method] is None else {"uk_solver": SOLVERS[method]}
    one = lambda q, qd: ukjax.simulate(system, q, qd, ts, **kw).q
    fn = jax.vmap(one) if batch else one
    shape = (batch, n) if batch else (n,)
    x = jax.ShapeDtypeStruct(shape, jnp.float64)
    # One trajectory: the options simulate's own program is compiled with (ukjax._xla).
    options = {} if batch else ukjax.compiler_options(batched=False)
    jax.clear_caches()
    t0 = time.perf_counter()
    lowered = jax.jit(fn).trace(x, x).lower()
    t1 = time.perf_counter()
    lowered.compile(compiler_options=options)
    return t1 - t0, time.perf_counter() - t1


def consistent_state(system, n):
    """An initial state on the constraint manifold: the system's own (where it has one)
    or a generic one, projected (a consistent state is left as it is)."""
    if hasattr(system, "initial_state"):
        q, qd = system.initial_state()
    else:
        q = jnp.linspace(0.3, 0.7, n) if n > 1 else jnp.array([0.3])
        qd = 0.1 * jnp.ones(n)
    return ukjax.project_initial_conditions(system, 0.0, q, qd)


_FIRST_CALL = """
import sys, time
t_start = time.perf_counter()
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp, numpy as np
sys.path.insert(0, {here!r})
import compile_time, ukjax
system = dict((c[0], c[1]) for c in compile_time.seed_systems())[{name!r}]
data = np.load({path!r})
q0, qd0, ts = (jnp.asarray(data[k]) for k in ("q0", "qd0", "ts"))
compile_time.warm_up()
t0 = time.perf_counter()
sol = ukjax.simulate(system, q0, qd0, ts)
jax.block_until_ready(sol.q)
print(time.perf_counter() - t0)
"""


def first_call_seconds(name, system, n):
    """Wall time of the first `ukjax.simulate(system, q0, qd0, ts)` (defaults, concrete
    consistent state) in a fresh Python process: the eager checks, tracing, compilation
    and the run, after JAX's compiler start-up (`warm_up`)."""
    q0, qd0 = consistent_state(system, n)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "state.npz")
        np.savez(path, q0=np.asarray(q0), qd0=np.asarray(qd0), ts=np.linspace(0.0, 1.0, 11))
        code = _FIRST_CALL.format(
            here=os.path.dirname(os.path.abspath(__file__)), name=name, path=path
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"first call of {name} failed:\n{out.stderr[-2000:]}")
    return float(out.stdout.strip().splitlines()[-1])


def warm_up():
    """Compile one tiny program: JAX's one-off compiler start-up in a fresh process."""
    jax.jit(lambda x: jnp.sin(x) @ x).lower(jnp.ones((3, 3))).compile()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default=out_path("compile_time.json"))
    args = ap.parse_args()
    info = machine_info()
    print(f"JAX {info['jax']} on {info['backend']} ({info['cpu_count']} CPUs), float64")
    print("simulate at its defaults; seconds of trace+lower / XLA compile / total")
    print(
        f"{'system':<24} {'n':>3} {'m':>3} | {'trace':>6} {'XLA':>6} {'default 1':>9} "
        f"{'lapack 1':>8} | {'default 1024':>12} {'lapack 1024':>11} | {'first call':>10}"
    )
    warm_up()
    cases = [(*c, True) for c in seed_systems()]
    for N in [2, 4] if args.quick else [2, 4, 8, 16, 32]:
        cases.append((f"PlanarChain N={N}", S.PlanarChain.uniform(N), 2 * N, False))
    if args.quick:
        cases = cases[:3] + cases[-2:]
    rows = []
    for name, system, n, seed in cases:
        m = int(
            ukjax.constraint_matrices(system, 0.0, jnp.ones(n) * 0.3, jnp.ones(n) * 0.1)[0].shape[0]
        )
        row = {"system": name, "n": n, "m": m, "seed_system": seed}
        for method in SOLVERS:
            for batch in (0, 1024):
                # The target column (defaults, one trajectory) is the better of two
                # compilations: this shared 2-core box adds up to ~1 s of noise to single runs.
                reps = 2 if (method, batch) == ("default", 0) else 1
                trace, xla = min(
                    (compile_seconds(system, n, method, batch) for _ in range(reps)), key=sum
                )
                key = f"{method}_{batch or 1}"
                row[key] = trace + xla
                row[key + "_trace_lower"], row[key + "_xla"] = trace, xla
        if seed:
            calls = sorted(first_call_seconds(name, system, n) for _ in range(FIRST_CALLS))
            row["first_call"] = calls[len(calls) // 2]  # the median
            row["first_call_min"], row["first_call_max"] = calls[0], calls[-1]
        rows.append(row)
        print(
            f"{name:<24} {n:>3} {m:>3} | {row['default_1_trace_lower']:6.2f} "
            f"{row['default_1_xla']:6.2f} {row['default_1']:9.2f} {row['lapack_1']:8.2f} | "
            f"{row['default_1024']:12.2f} {row['lapack_1024']:11.2f} | "
            f"{row.get('first_call', float('nan')):10.2f}",
            flush=True,
        )
    seeds = [r for r in rows if r["seed_system"]]
    met = [r["system"] for r in seeds if r["first_call"] <= 3.0]
    worst = max(seeds, key=lambda r: r["first_call"])
    print(
        f"first call <= 3 s (median of {FIRST_CALLS} processes): {len(met)} of {len(seeds)} "
        f"seed systems; slowest {worst['system']} {worst['first_call']:.2f} s; every process "
        f"<= 3 s: {sum(r['first_call_max'] <= 3.0 for r in seeds)} of {len(seeds)}"
    )
    write_json(args.json, {"machine": info, "rows": rows, "target_3s_met_by": met})


if __name__ == "__main__":
    main()
