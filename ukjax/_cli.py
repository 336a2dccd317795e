"""Command line: ``ukjax demo`` runs a batched simulation of a published case and writes a plot;
``ukjax sweep`` runs a large, chunked, resumable sweep of a system from the literature."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from . import __version__
from ._dynamics import energy, kinetic_energy
from ._residuals import constraint_residuals
from ._results import RESULTS
from ._simulate import simulate
from ._sweep import sweep
from ._sweep_share import from_argument
from ._sweep_store import read_meta, sweep_status
from ._unrolled import batched_solver
from ._xla import compiler_options
from .systems import CartesianPendulum, DoubleRodPendulum, DuffingOscillator, PlanarChain


def _x64(args):

    jax.config.update("jax_enable_x64", not args.float32)


def _demo_run(args):
    """Simulate the batch twice (compile + run, then run) and return what was measured."""

    system = DoubleRodPendulum()  # Pamplona 2021, §3.4: L1 = L2 = 1, g = 10
    B = args.batch
    ts = jnp.linspace(0.0, args.t1, 301)
    yd0 = jnp.linspace(1.0, 6.0, B)  # sweep the initial speed along y (the thesis' value: 4)
    q0 = jnp.tile(jnp.array([1.0, 0.0, 0.0]), (B, 1))
    qd0 = jnp.stack([jnp.zeros(B), yd0, jnp.zeros(B)], axis=1)
    # the batch form of the default method (Dopri8 in a StageLoop, as `sweep` runs it) and
    # the checks by the failure event, each member with its own result code
    solver = batched_solver(None)
    run = jax.jit(
        jax.vmap(lambda a, b: simulate(system, a, b, ts, solver=solver, throw=False)),
        compiler_options=compiler_options(),
    )
    t0 = time.perf_counter()
    sol = jax.block_until_ready(run(q0, qd0))
    t_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    sol = jax.block_until_ready(run(q0, qd0))
    t_run = time.perf_counter() - t0
    failed = int(jnp.sum(sol.result != RESULTS.successful))
    if failed:
        raise RuntimeError(f"ukjax demo: {failed} of {B} trajectories failed.")
    res = jax.vmap(jax.vmap(lambda q, qd: constraint_residuals(system, 0.0, q, qd).max_abs()))(
        sol.q, sol.qd
    )
    E = jax.vmap(jax.vmap(lambda q, qd: energy(system, 0.0, q, qd)))(sol.q, sol.qd)
    # the energy's size: E0 itself passes through zero across the sweep of initial speeds
    # (near y'(0) = sqrt(19)), where |E - E0| / |E0| would say nothing about the solver
    T0 = jax.vmap(lambda q, qd: kinetic_energy(system, 0.0, q, qd))(q0, qd0)
    size = jnp.abs(E[:, :1]) + T0[:, None]
    return dict(
        ts=ts,
        yd0=yd0,
        sol=sol,
        res=res,
        rel_E=jnp.abs(E - E[:, :1]) / size,
        t_first=t_first,
        t_run=t_run,
    )


def _demo_summary(args, m) -> dict:

    steps = np.asarray(m["sol"].stats["num_steps"])
    q = m["sol"].q
    return {
        "batch": args.batch,
        "t1": args.t1,
        "compile_plus_first_run_s": m["t_first"],
        "run_s": m["t_run"],
        "trajectories_per_s": args.batch / m["t_run"],
        "mean_steps": float(steps.mean()),
        "max_constraint_residual": float(m["res"].max()),
        "max_relative_energy_error": float(m["rel_E"].max()),
        "max_|x+z-1|": float(jnp.max(jnp.abs(q[..., 0] + q[..., 2] - 1.0))),
    }


def _demo_plot(args, m) -> str | None:

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib import cm, colors
    except ImportError:
        return None
    B, ts, q = args.batch, m["ts"], m["sol"].q
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8), layout="constrained")
    idx = np.linspace(0, B - 1, min(B, 12)).astype(int)
    cmap = plt.get_cmap("viridis")
    yd0 = np.asarray(m["yd0"])
    norm = colors.Normalize(float(yd0.min()), float(yd0.max()))
    for i in idx:
        c = cmap(norm(float(yd0[i])))
        axes[0].plot(ts, q[i, :, 2], color=c, lw=1)
        axes[1].plot(ts, q[i, :, 1], color=c, lw=1)
    axes[0].set(xlabel="t [s]", ylabel="z [m]", title="Out-of-plane motion z(t) (Pamplona 2021)")
    axes[1].set(xlabel="t [s]", ylabel="y [m]", title="y(t) (Pamplona 2021, Fig. 8)")
    bar = fig.colorbar(cm.ScalarMappable(norm=norm, cmap=cmap), ax=axes[:2].tolist(), pad=0.02)
    bar.set_label(f"initial speed y'(0) [m/s] ({len(idx)} of {B} runs drawn)")
    floor = 1e-17
    axes[2].semilogy(
        ts,
        np.maximum(np.asarray(m["res"]).max(axis=0), floor),
        label="constraint residual (max |phi|, |phi'|)",
    )
    axes[2].semilogy(
        ts,
        np.maximum(np.asarray(m["rel_E"]).max(axis=0), floor),
        label="relative energy error |E - E0| / (|E0| + T0)",
    )
    axes[2].set(
        xlabel="t [s]",
        ylabel="worst over all runs [-]",
        title=f"Invariants, worst of all {B} runs",
        ylim=(floor, 1e-5),
    )
    axes[2].legend(loc="lower center", fontsize=8)
    axes[2].text(
        0.5,
        0.97,
        "t = 0 and the last save are step ends (projected onto the constraints);\n"
        "the saves between are interpolated (dense output): hence the lower ends",
        transform=axes[2].transAxes,
        ha="center",
        va="top",
        fontsize=7,
    )
    fig.suptitle("ukjax demo: doubly constrained pendulum, batched with jax.vmap")
    path = os.path.join(args.out, "demo.png")
    fig.savefig(path, dpi=110)
    return path


def _demo(args) -> int:
    _x64(args)

    print(
        f"ukjax {__version__} (JAX {jax.__version__}, {jax.devices()[0].platform}, "
        f"{'float32' if args.float32 else 'float64'})"
    )
    print(
        f"Doubly constrained 3-D pendulum (Pamplona 2021, §3.4), {args.batch} initial speeds "
        f"y'(0) in [1, 6], t in [0, {args.t1}]"
    )
    m = _demo_run(args)
    summary = _demo_summary(args, m)
    print(f"  compile + first run : {m['t_first']:8.2f} s")
    print(
        f"  run (compiled)      : {m['t_run']:8.3f} s  ({summary['trajectories_per_s']:,.0f} "
        f"trajectories/s, {summary['mean_steps']:.0f} adaptive steps each on average)"
    )
    print(f"  max constraint residual |phi|,|phi_dot| : {summary['max_constraint_residual']:.2e}")
    print(f"  max energy error |E-E0|/(|E0|+T0)       : {summary['max_relative_energy_error']:.2e}")
    print(f"  max |x + z - 1| (invariant of the case)  : {summary['max_|x+z-1|']:.2e}")
    os.makedirs(args.out, exist_ok=True)
    summary_path = os.path.join(args.out, "demo_summary.json")
    with open(summary_path, "w") as f:
        json.dump(summary, f, indent=2)
    path = _demo_plot(args, m)
    if path is None:
        print("  (matplotlib not installed: pip install 'ukjax[plot]' for the figure)")
    else:
        print(f"  wrote {path} and {summary_path}")
    return 0


_SWEEP_SYSTEMS = ("double_rod", "duffing", "pendulum", "chain")


def _sweep_batch(name, B, links, rng):
    """The system and a batch of consistent initial states for ``ukjax sweep``."""

    if name == "double_rod":  # Pamplona 2021, §3.4: the initial speed along y in [1, 6]
        s = DoubleRodPendulum()
        yd0 = jnp.asarray(rng.uniform(1.0, 6.0, B))
        q0 = jnp.tile(jnp.array([1.0, 0.0, 0.0]), (B, 1))
        return s, q0, jnp.stack([jnp.zeros(B), yd0, jnp.zeros(B)], axis=1)
    if name == "duffing":  # Pamplona 2021, §3.3: common position and speed of the two masses
        s = DuffingOscillator()
        x0, v0 = rng.uniform(-2.0, 2.0, B), rng.uniform(-3.0, 3.0, B)
        q0 = jnp.asarray(np.stack([x0, x0], axis=1))
        qd0 = jnp.asarray(np.stack([v0 + float(s.A0 * s.omega), v0], axis=1))
        return s, q0, qd0
    if name == "pendulum":
        s = CartesianPendulum()
        th, w = rng.uniform(-3.0, 3.0, B), rng.uniform(-2.0, 2.0, B)
        q0 = jnp.asarray(np.stack([np.sin(th), -np.cos(th)], axis=1))
        return s, q0, jnp.asarray(np.stack([w * np.cos(th), w * np.sin(th)], axis=1))
    s = PlanarChain.uniform(links, length=1.0 / links)
    th = jnp.asarray(rng.uniform(-1.5, 1.5, (B, links)))
    q0, qd0 = jax.vmap(lambda a: s.state_from_angles(a, jnp.zeros_like(a)))(th)
    return s, q0, qd0


def _sweep_status(args) -> int:
    if args.folder is None:
        raise SystemExit("ukjax sweep status: give the sweep's folder: ukjax sweep status OUT")
    try:
        status = sweep_status(args.folder)
    except (FileNotFoundError, ValueError) as e:
        print(f"ukjax sweep status: {e}", file=sys.stderr)
        return 2
    print(status)
    return 0 if status.complete else 1


def _worker_arg(text: str) -> tuple[int, int]:
    k, _, count = text.partition("/")
    try:
        worker = int(k), int(count)
        from_argument(worker)  # the checks of sweep(worker=...)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected k/P (worker k of P, 0 <= k < P), got {text!r}"
        ) from None
    return worker


def _sweep(args) -> int:
    if args.action == "status":
        return _sweep_status(args)
    if args.folder is not None:
        raise SystemExit(
            f"ukjax sweep: unexpected argument {args.folder!r} (the output folder is --out)"
        )
    _x64(args)

    rng = np.random.default_rng(args.seed)
    s, q0, qd0 = _sweep_batch(args.system, args.batch, args.links, rng)
    ts = jnp.linspace(0.0, args.t1, args.saves)
    print(
        f"ukjax {__version__} (JAX {jax.__version__}, {len(jax.local_devices())} x "
        f"{jax.devices()[0].platform}, {'float32' if args.float32 else 'float64'}): sweep of "
        f"{args.batch} trajectories of {type(s).__name__}, t in [0, {args.t1}], "
        f"{'default chunks' if args.chunk is None else f'chunks of {args.chunk}'}, into "
        f"{args.out}/"
    )
    os.makedirs(args.out, exist_ok=True)  # there from the start, for the user to look at
    t0 = time.perf_counter()
    # Ctrl-C raises KeyboardInterrupt, but one that lands in a callback (JAX's garbage
    # collection hook) is swallowed by Python: the handler also records it, and a run that
    # was interrupted ends as interrupted even if the exception was lost.
    interrupted = []

    def on_sigint(signum, frame):
        interrupted.append(signum)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        res = sweep(
            s,
            q0,
            qd0,
            ts,
            out=args.out,
            chunk_size=args.chunk,
            vector_width=args.vector_width,
            workers=args.workers,
            worker=args.worker,
            save_final_only=args.final_only,
            progress=not args.quiet,
        )
        if interrupted:
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        if os.path.exists(os.path.join(args.out, "meta.json")):
            status = sweep_status(args.out)
            done = f"{len(status.done)} of {status.n_chunks} chunks are saved in {args.out}/"
        else:
            done = "no chunk was finished yet"
        print(
            f"\nukjax sweep: interrupted; {done}. Run the same command again to resume.",
            file=sys.stderr,
        )
        return 130
    finally:
        signal.signal(signal.SIGINT, previous)
    wall = time.perf_counter() - t0
    summary = {
        "system": type(s).__name__,
        "batch": args.batch,
        "t1": args.t1,
        "chunk_size": read_meta(args.out)["chunk_size"],
        "devices": res.devices,
        "chunks_computed": res.chunks_computed,
        "chunks_resumed": res.chunks_loaded,
        "wall_s": wall,
        "failed": int((~res.ok).sum()),
        "mean_steps": float(res.num_steps.mean()),
        "jax": jax.__version__,
        "dtype": "float32" if args.float32 else "float64",
    }
    print(
        f"  {res.chunks_computed} chunks computed, {res.chunks_loaded} resumed from disk, "
        f"{wall:.2f} s wall (compile included), {summary['failed']} failed trajectories, "
        f"{summary['mean_steps']:.0f} steps per trajectory on average"
    )
    if not res.complete:  # one worker's share: the folder's summary is the whole sweep's
        print(f"  this worker's share is done; `ukjax sweep status {args.out}` lists the rest")
        return 0 if summary["failed"] == 0 else 1
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print(f"  results: ukjax.load_sweep({args.out!r}); summary in {args.out}/summary.json")
    return 0 if summary["failed"] == 0 else 1


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _at_least_two(text: str) -> int:
    value = _positive_int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"expected at least 2 save times, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive finite number, got {text}")
    return value


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="ukjax", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo", help="batched simulation of a system from the literature, summary + plot"
    )
    demo.add_argument("--batch", type=_positive_int, default=1024, help="number of trajectories")
    demo.add_argument("--t1", type=_positive_float, default=3.0, help="final time")
    demo.add_argument("--out", default="ukjax-demo", help="output folder")
    demo.add_argument("--float32", action="store_true", help="run in float32")
    demo.set_defaults(func=_demo)
    sw = sub.add_parser(
        "sweep",
        help="large chunked sweep of a system from the literature, saved to disk, resumable",
        description="Run a system from the literature over a large batch of random initial "
        "conditions, in "
        "chunks sharded over all local devices, writing each finished chunk to --out. Run "
        "the same command again to resume an interrupted sweep. `ukjax sweep status OUT` "
        "lists the done, missing and damaged chunks of a sweep folder.",
    )
    sw.add_argument(
        "action",
        nargs="?",
        choices=("run", "status"),
        default="run",
        help="run (default): compute the sweep; status: list the chunks of FOLDER",
    )
    sw.add_argument("folder", nargs="?", default=None, help="the sweep folder (for status)")
    sw.add_argument(
        "--worker",
        type=_worker_arg,
        default=None,
        help="k/P: compute only worker k's share of the chunks (i %% P == k) into --out; "
        "default: from SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT when set, else all",
    )
    sw.add_argument(
        "--system",
        choices=_SWEEP_SYSTEMS,
        default="double_rod",
        help="double_rod: Pamplona 2021 §3.4; duffing: Pamplona 2021 §3.3; pendulum: Cartesian "
        "pendulum; chain: N-link planar chain",
    )
    sw.add_argument("--batch", type=_positive_int, default=4096, help="number of trajectories")
    sw.add_argument("--t1", type=_positive_float, default=3.0, help="final time")
    sw.add_argument(
        "--saves", type=_at_least_two, default=101, help="number of save times in [0, t1]"
    )
    sw.add_argument(
        "--chunk",
        type=_positive_int,
        default=None,
        help="trajectories per chunk (default: 1024 on a CPU, 16384 per GPU; a resumed "
        "sweep keeps its folder's)",
    )
    sw.add_argument(
        "--workers",
        type=_positive_int,
        default=None,
        help="chunks run at once on threads (default: one per CPU core on the CPU, else 1)",
    )
    sw.add_argument(
        "--vector-width",
        type=_positive_int,
        default=None,
        help="trajectories advanced together per device (default: the device's "
        "whole share of a chunk at once)",
    )
    sw.add_argument("--links", type=_positive_int, default=4, help="links of --system chain")
    sw.add_argument("--seed", type=int, default=0, help="random seed of the initial conditions")
    sw.add_argument("--out", default="ukjax-sweep", help="output folder (chunks, meta, summary)")
    sw.add_argument("--final-only", action="store_true", help="save only the final states")
    sw.add_argument("--float32", action="store_true", help="run in float32")
    sw.add_argument("--quiet", action="store_true", help="no progress bar")
    sw.set_defaults(func=_sweep)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
