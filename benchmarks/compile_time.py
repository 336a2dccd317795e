"""Compile time of the first call: `ukjax.simulate` (default Dopri8, float64) for every seed
system, and for the N-link planar chain against N, each with the default kernels
(default `ukjax.AutoKernels()`: unrolled for n <= 8, LAPACK above) and with LAPACK kernels forced
(the peer in the same run), single trajectory and vmapped over a batch of 1024.

Compile time is the wall time of `jax.jit(f).lower(...).compile()` (tracing, lowering and
XLA compilation) after `jax.clear_caches()`; nothing is executed. The persistent
compilation cache is off (JAX's default).

    python benchmarks/compile_time.py [--quick] [--json FILE]
"""

from __future__ import annotations

import argparse
import time

import jax


jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp

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
    yield "EllipseSpringParticle", S.EllipseSpringParticle(), 3
    yield "AppellHamelWheel", S.AppellHamelWheel(), len(S.AppellHamelWheel().initial_state()[0])
    yield "FourBarLinkage", S.FourBarLinkage(), 3


KERNELS = {"auto": ukjax.AutoKernels(), "lapack": ukjax.LapackKernels()}


def compile_seconds(system, n, method, batch):
    ts = jnp.linspace(0.0, 1.0, 11)
    solver = ukjax.CholeskyWithFallback(kernels=KERNELS[method])
    one = lambda q, qd: (
        ukjax.simulate(
            system,
            q,
            qd,
            ts,
            uk_solver=solver,
            initial_conditions=ukjax.IgnoreInitial(),
            throw=False,
        ).q
    )
    fn = jax.vmap(one) if batch else one
    shape = (batch, n) if batch else (n,)
    x = jax.ShapeDtypeStruct(shape, jnp.float64)
    jax.clear_caches()
    t0 = time.perf_counter()
    jax.jit(fn).lower(x, x).compile()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default=out_path("compile_time.json"))
    args = ap.parse_args()
    info = machine_info()
    print(f"JAX {info['jax']} on {info['backend']} ({info['cpu_count']} CPUs), float64, Dopri8")
    print(
        f"{'system':<24} {'n':>3} {'m':>3} | {'auto 1':>7} {'lapack 1':>8} | {'auto 1024':>9} "
        f"{'lapack 1024':>11}  (seconds)"
    )
    cases = list(seed_systems())
    for N in [2, 4] if args.quick else [2, 4, 8, 16, 32]:
        cases.append((f"PlanarChain N={N}", S.PlanarChain.uniform(N), 2 * N))
    if args.quick:
        cases = cases[:3] + cases[-2:]
    rows = []
    for name, system, n in cases:
        m = int(
            ukjax.constraint_matrices(system, 0.0, jnp.ones(n) * 0.3, jnp.ones(n) * 0.1)[0].shape[0]
        )
        row = {"system": name, "n": n, "m": m}
        for method in ("auto", "lapack"):
            for batch in (0, 1024):
                row[f"{method}_{batch or 1}"] = compile_seconds(system, n, method, batch)
        rows.append(row)
        print(
            f"{name:<24} {n:>3} {m:>3} | {row['auto_1']:7.2f} {row['lapack_1']:8.2f} | "
            f"{row['auto_1024']:9.2f} {row['lapack_1024']:11.2f}",
            flush=True,
        )
    write_json(args.json, {"machine": info, "rows": rows})


if __name__ == "__main__":
    main()
