"""Distributed sweep benchmark: the same 64K-trajectory sweep on this process's threads
(the default), on one thread, and on a two-worker Dask ``LocalCluster`` (two processes of
one thread each), against scipy ``solve_ivp`` one trajectory at a time.

The sweep: Pamplona 2021 §3.4, the doubly constrained 3-D pendulum (n = 3, two holonomic
constraints), t in [0, 3] with 11 save times, the initial speed y'(0) over [1, 6]; ukjax
at its defaults (Dopri8, rtol = atol = 1e-12, checks on, default projection, chunks of
1024, `throw=False`), written to a folder (`out=`). The peer is scipy's DOP853 at the same
tolerance with the UK formula written out in NumPy (the seeds' MATLAB workflow) on
`--peer` trajectories, its time per trajectory extrapolated to the batch (one core).

Rows:
- `threads (default)`: ``ukjax.sweep(..., out=DIR)`` in this process; its first call
  compiles (compile = first call less the second), the run is the second call.
- `1 thread`: the same with ``workers=1``.
- `Dask 2 workers, cold cache`: ``executor=client`` on a fresh ``LocalCluster`` whose
  workers start with ``EQX_ON_ERROR=nan`` in their environment (so that JAX's persistent
  compilation cache can store the program, see ``ukjax._sweep_exec``) and an empty cache
  folder. Cluster start
  is timed apart. Compile per worker = the worker's first task less the median of its
  later tasks (each task reports its own seconds).
- `Dask 2 workers, warm cache`: the same on a second fresh cluster, the cache folder
  filled by the cold run: each worker loads the program instead of compiling it.
- `Dask 2 workers, no cache`: a fresh cluster without ``EQX_ON_ERROR=nan`` (equinox's
  default): the programs carry host callbacks and JAX does not cache them.

Every Dask result is checked bitwise against the threads' result.

    python benchmarks/cluster_sweep.py [--batch 65536] [--chunk 1024] [--peer 32] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time

import jax


jax.config.update("jax_enable_x64", True)
import numpy as np
from sweep import double_rod_rhs, run_peer

import ukjax
from _common import machine_info, out_path, write_json
from ukjax.systems import DoubleRodPendulum


class Recording:
    """An executor that remembers its futures (to read each task's report afterwards)."""

    def __init__(self, executor):
        self.executor, self.futures = executor, []

    def submit(self, fn, *args, **kwargs):
        future = self.executor.submit(fn, *args, **kwargs)
        self.futures.append(future)
        return future


def batch(B: int):
    yd0 = np.linspace(1.0, 6.0, B)
    q0 = np.tile([1.0, 0.0, 0.0], (B, 1))
    return q0, np.stack([np.zeros(B), yd0, np.zeros(B)], axis=1)


def timed_sweep(args, **kwargs):
    q0, qd0 = batch(args.batch)
    out = tempfile.mkdtemp(prefix="ukjax-bench-")
    t0 = time.perf_counter()
    res = ukjax.sweep(
        DoubleRodPendulum(),
        q0,
        qd0,
        np.linspace(0.0, 3.0, 11),
        out=out,
        chunk_size=args.chunk,
        progress=False,
        **kwargs,
    )
    wall = time.perf_counter() - t0
    shutil.rmtree(out)
    return res, wall


def compile_per_worker(reports) -> dict[str, float]:
    """Per worker process: its first task's seconds less the median of its later ones."""
    by_worker: dict[str, list[float]] = {}
    for r in reports:
        by_worker.setdefault(r.worker, []).append(r.seconds)
    return {
        w: s[0] - (statistics.median(s[1:]) if len(s) > 1 else 0.0) for w, s in by_worker.items()
    }


def on_cluster(args, reference, cache: str | None, cacheable: bool) -> dict:
    from distributed import Client, LocalCluster

    # the workers are spawned: they re-import this script (and equinox) with this
    # process's environment before the cluster's `env` is applied
    env = {"EQX_ON_ERROR": "nan"} if cacheable else {}
    os.environ.pop("EQX_ON_ERROR", None)
    os.environ.update(env)
    t0 = time.perf_counter()
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            env=env,
        ) as cluster,
        Client(cluster) as client,
    ):
        client.wait_for_workers(2)
        start = time.perf_counter() - t0
        rec = Recording(client)
        res, wall = timed_sweep(args, executor=rec, compilation_cache=cache or False)
        reports = [f.result() for f in rec.futures]
    for name in ("q", "qd", "result", "num_steps"):
        assert np.array_equal(getattr(res, name), getattr(reference, name)), name
    compiles = compile_per_worker(reports)
    return {
        "cluster_start_s": start,
        "wall_s": wall,
        "compile_per_worker_s": sorted(compiles.values()),
        "tasks_per_worker": sorted(sum(r.worker == w for r in reports) for w in compiles),
        "bitwise_equal": True,
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=65536)
    parser.add_argument("--chunk", type=int, default=1024)
    parser.add_argument("--peer", type=int, default=32)
    parser.add_argument("--json", default=out_path("cluster_sweep.json"))
    args = parser.parse_args()

    rows = {}
    first, wall1 = timed_sweep(args)
    ref, wall2 = timed_sweep(args)
    rows["threads (default)"] = {"wall_s": wall2, "compile_s": wall1 - wall2}
    _, wall = timed_sweep(args, workers=1)
    rows["1 thread (workers=1)"] = {"wall_s": wall}
    cache = tempfile.mkdtemp(prefix="ukjax-cache-")
    rows["Dask 2 workers, cold cache"] = on_cluster(args, ref, cache, True)
    rows["Dask 2 workers, warm cache"] = on_cluster(args, ref, cache, True)
    rows["Dask 2 workers, no cache"] = on_cluster(args, ref, None, False)
    shutil.rmtree(cache)

    q0, qd0 = batch(args.batch)
    ts = np.linspace(0.0, 3.0, 11)
    idx = np.linspace(0, args.batch - 1, args.peer).astype(int)
    per_traj, dev = run_peer(double_rod_rhs(), q0, qd0, ts, 1e-12, "DOP853", idx, ref.q)
    rows[f"scipy DOP853, 1 core (x{args.batch} from {args.peer})"] = {
        "wall_s": per_traj * args.batch,
        "max_dev_from_ukjax": dev,
    }

    print(
        f"\n{args.batch} trajectories of the double rod pendulum, t in [0, 3], 11 saves, "
        f"chunks of {args.chunk}, ukjax defaults (rtol = atol = 1e-12), out= a folder; "
        f"{ref.num_steps.mean():.0f} steps per trajectory on average\n"
    )
    print("| run | wall s | traj/s | compile s | cluster start s | compile per worker s |")
    print("|---|---|---|---|---|---|")
    for name, r in rows.items():
        per_worker = r.get("compile_per_worker_s")
        print(
            f"| {name} | {r['wall_s']:.2f} | {args.batch / r['wall_s']:,.0f} | "
            f"{r.get('compile_s', float('nan')):.1f} | "
            f"{r.get('cluster_start_s', float('nan')):.1f} | "
            f"{', '.join(f'{c:.1f}' for c in per_worker) if per_worker else '-'} |"
        )
    write_json(
        args.json,
        {
            "machine": machine_info(),
            "batch": args.batch,
            "chunk": args.chunk,
            "rows": rows,
            "cores": len(os.sched_getaffinity(0)),
        },
    )


if __name__ == "__main__":
    main()
