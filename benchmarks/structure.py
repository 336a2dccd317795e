"""Where the structured UK solve pays: a user-written N-link chain at the defaults (adaptive
`Dopri8`, rtol = atol = 1e-12, the default projection after every step) with the sparsity
found from the program (the default from n = 9 coordinates,
`ukjax._kernel_strategies.STRUCTURED_MIN_N`, and from 4 to 8 where it pays against the
written-out dense solve) against the same run kept dense
(`AutoKernels(min_structured=None)` for the UK solve and for the projection), for one
trajectory and for `jax.jit(jax.vmap(simulate))` of a batch; scipy `solve_ivp(DOP853,
rtol = atol = 1e-12)` on the chain's minimal-coordinate equations (one trajectory, times
the batch) as the peer.

Every ukjax configuration runs in a fresh process: run times measured in one process
depended on the order the programs ran in (up to 2x on this 2-core box).

    python benchmarks/structure.py [--quick] [--links 4,8,16,32] [--batch 64] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np


HERE = os.path.dirname(os.path.abspath(__file__))
T1 = 1.0


def child(links: int, batch: int, structured: bool) -> dict:
    """One configuration: compile s and best-of-5 run s of the jitted run (in this process)."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from mujoco_compare import UserChain, chain_points

    import ukjax

    chain = UserChain(links=links)
    theta = np.linspace(0.3, 0.7, links)
    q0 = jnp.asarray(chain_points(theta).reshape(-1))
    qd0 = jnp.zeros_like(q0)
    ts = jnp.linspace(0.0, T1, 11)
    options = {}
    if not structured:
        dense = ukjax.AutoKernels(min_structured=None)
        options = dict(
            uk_solver=ukjax.Regularized(kernels=dense),
            stabilization=ukjax.Projection(iterations=1, saves=False, kernels=dense),
        )
    run = lambda q: ukjax.simulate(chain, q, qd0, ts, **options).q
    f = jax.jit(jax.vmap(run)) if batch > 1 else jax.jit(run)
    x = jnp.tile(q0, (batch, 1)) * (1.0 + 0.0 * jnp.arange(batch)[:, None]) if batch > 1 else q0
    t0 = time.perf_counter()
    out = f(x).block_until_ready()
    compile_s = time.perf_counter() - t0
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        f(x).block_until_ready()
        runs.append(time.perf_counter() - t0)
    return dict(
        compile_s=compile_s, run_s=min(runs), final=np.asarray(out).ravel()[-2 * links :].tolist()
    )


def scipy_seconds(links: int) -> float:
    from mujoco_compare import chain_minimal_rhs
    from scipy.integrate import solve_ivp

    rhs = chain_minimal_rhs(links)
    y0 = np.concatenate([np.linspace(0.3, 0.7, links), np.zeros(links)])
    t0 = time.perf_counter()
    out = solve_ivp(rhs, (0.0, T1), y0, method="DOP853", rtol=1e-12, atol=1e-12)
    assert out.success
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--links", default="4,8,16,32")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--quick", action="store_true", help="links 4,8; batch 16")
    ap.add_argument("--json", default=os.path.join(HERE, "out", "structure.json"))
    ap.add_argument("--child", nargs=3, type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    if args.quick:
        args.links, args.batch = "4,8", 16
    sys.path.insert(0, HERE)
    from _common import machine_info, write_json

    info = machine_info()
    print(f"user-written chain, t in [0, {T1}], defaults; {info['device']}, jax {info['jax']}")
    heads = ("N", "n", "batch", "dense run s", "struct run s", "speed-up", "dense comp s")
    heads += ("struct comp s", "scipy s", "|diff|")
    print(" ".join(f"{h:>{max(len(h), 5)}}" for h in heads))
    rows = []
    for links in (int(x) for x in args.links.split(",")):
        peer = scipy_seconds(links)
        for batch in (1, args.batch):
            got = {}
            for structured in (False, True):
                cmd = [
                    sys.executable,
                    __file__,
                    "--child",
                    str(links),
                    str(batch),
                    str(int(structured)),
                ]
                out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=HERE)
                got[structured] = json.loads(out.stdout.strip().splitlines()[-1])
            d, s = got[False], got[True]
            diff = float(np.max(np.abs(np.subtract(d["final"], s["final"]))))
            row = dict(links=links, n=2 * links, batch=batch, dense=d, structured=s)
            row.update(speedup=d["run_s"] / s["run_s"], scipy_s=peer * batch, max_diff=diff)
            rows.append(row)
            cells = (f"{links:5d}", f"{2 * links:5d}", f"{batch:5d}", f"{d['run_s']:11.4f}")
            cells += (f"{s['run_s']:12.4f}", f"{row['speedup']:8.2f}", f"{d['compile_s']:12.1f}")
            cells += (f"{s['compile_s']:13.1f}", f"{row['scipy_s']:7.3f}", f"{diff:8.1e}")
            print(" ".join(cells), flush=True)
    write_json(args.json, dict(machine=info, t1=T1, rows=rows))


if __name__ == "__main__":
    main()
