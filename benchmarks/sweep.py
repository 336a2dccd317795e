"""Sweep benchmark: 4096 trajectories with `ukjax.sweep` and with a plain
`jax.jit(jax.vmap(ukjax.simulate))`, against scipy `solve_ivp` + NumPy `pinv` one trajectory
at a time (the seeds' MATLAB workflow), at equal method and tolerance.

Systems (Pamplona 2021):
- §3.4, the doubly constrained 3-D pendulum (n = 3, two holonomic constraints), t in [0, 3]
  with 301 save points; the batch varies the initial speed y'(0) over [1, 6].
- §3.3, the two-mass Duffing oscillator with the rheonomic constraint
  x1 - x2 = A0 exp(-alpha t) sin(omega t), t in [0, 5] with 501 save points; the batch varies
  x1(0) = x2(0) over [0.5, 1.5] and x2'(0) over [1, 3] (x1'(0) = x2'(0) + A0 omega, so
  every initial state satisfies the constraint).

Tolerances (both sides the same Dormand-Prince pair and rtol = atol):
- 1e-8: Dopri5 (diffrax) vs RK45 (scipy), the 5(4) pair;
- 1e-12: Dopri8 (diffrax) vs DOP853 (scipy), the 8(5,3) pair.
ukjax runs at its other defaults (run-time checks on, default projection). The peer
integrates a subset of the batch (the same trajectories, evenly spaced); its time per
trajectory is extrapolated to the whole batch, and every peer trajectory is compared with
ukjax's.

- `sweep`: wall time of `ukjax.sweep` (its default chunks unless `--chunk` is given: 1024 on
  the CPU, 16384 per GPU; in memory, `throw=False`) at its
  defaults: on the CPU one chunk per core at once, on threads (XLA:CPU runs a program on
  the calling thread's core, so plain vmap uses one core). Compile time = its first call
  less its best later call. The peer (scipy, one trajectory at a time) uses one core.
- `sweep 1 worker`: the same with `workers=1` (one chunk at a time: one core, as plain vmap
  and the peer).
- `vmap`: `jax.jit(jax.vmap(simulate))` over the whole batch at once (`throw=True`, as a
  user writes it), closing over the system and the save times (constants of the program)
  and returning the whole `Solution` (q, qd, result code, statistics: what `sweep` returns
  too; until stop 36 it returned q only); compile = `lower(...).compile()`, run = the
  compiled call.
- `vmap q only`: the same returning the positions only (XLA drops the velocities' saves).
- `vmap+opts`: the same with `jax.jit(..., compiler_options=ukjax.compiler_options())`,
  the XLA options `simulate` and `sweep` compile their own programs with (on this jaxlib:
  no YNNPACK library fusions, see `ukjax._xla`).
- `vmap Unrolled`: plain `jax.jit(jax.vmap(simulate))` with `solver=ukjax.Unrolled(...)`
  (the same method with its stages written out). `sweep` does this itself for methods
  of at most 7 stages (Dopri5 here: the sweep Unrolled column of the 1e-8 rows is the
  sweep column); a plain `simulate` (since stop 40 the same program however it is
  transformed) runs Dopri5 in diffrax's loop, and Dopri8 (14 stages, the 1e-12 rows) in
  `ukjax.StageLoop` (a loop of sums over the stage buffer), as `sweep` does; the
  Unrolled columns time `ukjax.Unrolled(...)` of the row's method.

Every run time (and the peer's time per trajectory) is the best of `--rounds` rounds (3):
each round runs sweep, vmap, vmap+opts and the peer once, in turn, so that all four see
the box in the same state (its speed drifts by up to 2x over minutes: the peer's time per
trajectory has ranged over 3.3x between runs on the same box). The spread of each column
over the rounds is printed and kept in the JSON.

    python benchmarks/sweep.py [--batch 4096] [--peer 32] [--tolerances 1e-8,1e-12]
                               [--rounds 3] [--quick] [--json FILE]
"""

from __future__ import annotations

import argparse
import time
from typing import NamedTuple

import jax


jax.config.update("jax_enable_x64", True)
import diffrax
import jax.numpy as jnp
import numpy as np
from scipy.integrate import solve_ivp

import ukjax
from _common import machine_info, out_path, seed_workflow_uk, write_json
from ukjax._unrolled import batched_solver
from ukjax.systems import DoubleRodPendulum, DuffingOscillator


# tolerance -> (diffrax solver, the scipy method with the same Dormand-Prince pair)
SETTINGS = {1e-8: (diffrax.Dopri5, "RK45"), 1e-12: (diffrax.Dopri8, "DOP853")}


def double_rod_rhs(g=10.0, L1=1.0, L2=1.0):
    """Seed 000 eqs 73-76 written out by hand: M = I, Q = [g, 0, 0], A from the gradients
    of the two constraints, b = -|qd|^2 for both rows."""
    M = np.eye(3)
    Q = np.array([g, 0.0, 0.0])

    def rhs(t, s):
        q, qd = s[:3], s[3:]
        x, y, z = q
        A = np.array([[x, y, z], [x - L1, y, z - L2]])
        b = -np.full(2, qd @ qd)
        return np.concatenate([qd, seed_workflow_uk(M, Q, A, b)])

    return rhs


def duffing_rhs(p: DuffingOscillator):
    """Seed 000 eqs 57-66 written out by hand."""
    m1, m2, k1, k2, k1n, k2n, c1, c2 = (
        float(getattr(p, k)) for k in ("m1", "m2", "k1", "k2", "k1_nl", "k2_nl", "c1", "c2")
    )
    A0, om, al = float(p.A0), float(p.omega), float(p.alpha)
    M = np.diag([m1, m2])
    A = np.array([[1.0, -1.0]])

    def rhs(t, s):
        x1, x2, v1, v2 = s
        u1, u1d = x1 - x2, v1 - v2
        f1 = k1 * u1 + k1n * u1**3 + c1 * u1d
        f2 = k2 * x2 + k2n * x2**3 + c2 * v2
        Q = np.array([-f1, f1 - f2])
        # second derivative of A0 exp(-al t) sin(om t)
        e = np.exp(-al * t)
        b = np.array([A0 * e * ((al**2 - om**2) * np.sin(om * t) - 2 * al * om * np.cos(om * t))])
        return np.concatenate([s[2:], seed_workflow_uk(M, Q, A, b)])

    return rhs


def cases(B: int):
    rod = DoubleRodPendulum()
    yd0 = np.linspace(1.0, 6.0, B)
    q0 = np.tile([1.0, 0.0, 0.0], (B, 1))
    qd0 = np.stack([np.zeros(B), yd0, np.zeros(B)], axis=1)
    yield (
        "double rod pendulum (Pamplona 2021, §3.4)",
        rod,
        q0,
        qd0,
        np.linspace(0, 3, 301),
        double_rod_rhs(),
    )

    duf = DuffingOscillator()
    rng = np.random.default_rng(0)
    x0 = rng.uniform(0.5, 1.5, B)
    v2 = rng.uniform(1.0, 3.0, B)
    q0 = np.stack([x0, x0], axis=1)
    qd0 = np.stack([v2 + float(duf.A0 * duf.omega), v2], axis=1)
    yield (
        "Duffing oscillator (Pamplona 2021, §3.3)",
        duf,
        q0,
        qd0,
        np.linspace(0, 5, 501),
        duffing_rhs(duf),
    )


def run_sweep(system, q0, qd0, ts, tol, solver, chunk, workers=None):
    """(q, wall s, mean steps) of one in-memory `ukjax.sweep` (`workers=None`: its
    default, one chunk per CPU core at once)."""
    t_start = time.perf_counter()
    res = ukjax.sweep(  # solver: a factory (a class, or a lambda building an Unrolled)
        system,
        jnp.asarray(q0),
        jnp.asarray(qd0),
        jnp.asarray(ts),
        chunk_size=chunk,
        progress=False,
        solver=solver(),
        rtol=tol,
        atol=tol,
        workers=workers,
    )
    total = time.perf_counter() - t_start
    assert res.ok.all(), f"{int((~res.ok).sum())} trajectories failed"
    return res.q, total, float(np.mean(res.num_steps))


class Positions(NamedTuple):
    """A vmap's output when only the positions are kept."""

    q: jax.Array


def compile_vmap(system, q0, qd0, ts, tol, solver, options=None, q_only=False):
    """(compiled `jit(vmap(simulate))` over the batch, its inputs, compile s). It returns
    what `simulate` returns (the whole `Solution`: q, qd, result, stats), as `sweep` does,
    or with `q_only` the positions only (XLA then drops the velocities' saves)."""
    ts = jnp.asarray(ts)

    def sim(a, b):
        sol = ukjax.simulate(system, a, b, ts, solver=solver(), rtol=tol, atol=tol)
        return Positions(sol.q) if q_only else sol

    args = (jnp.asarray(q0), jnp.asarray(qd0))
    t0 = time.perf_counter()
    compiled = jax.jit(jax.vmap(sim), compiler_options=options).lower(*args).compile()
    return compiled, args, time.perf_counter() - t0


def timed(fn, *args):
    """(output, wall seconds) of one call, outputs waited for."""
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    return out, time.perf_counter() - t0


def run_peer(rhs, q0, qd0, ts, tol, method, idx, q_ukjax):
    max_dev, t0 = 0.0, time.perf_counter()
    for i in idx:
        y0 = np.concatenate([q0[i], qd0[i]])
        ref = solve_ivp(rhs, (ts[0], ts[-1]), y0, method=method, rtol=tol, atol=tol, t_eval=ts)
        assert ref.success, ref.message
        max_dev = max(max_dev, float(np.abs(ref.y[: q0.shape[1]].T - q_ukjax[i]).max()))
    return (time.perf_counter() - t0) / len(idx), max_dev


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--chunk", type=int, default=None, help="default: sweep's own default")
    ap.add_argument("--systems", default="rod,duffing", help="comma list: rod, duffing")
    ap.add_argument("--tolerances", default="1e-8,1e-12", help="comma list: 1e-8, 1e-12")
    ap.add_argument("--peer", type=int, default=32, help="trajectories the peer integrates")
    ap.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="measurement rounds: each times sweep, both vmaps and the peer once, in turn; "
        "every column reports its best round",
    )
    ap.add_argument("--quick", action="store_true", help="batch 256, 4 peer trajectories")
    ap.add_argument("--no-unrolled", action="store_true", help="skip the ukjax.Unrolled columns")
    ap.add_argument("--json", default=out_path("sweep.json"))
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error(f"--rounds must be at least 1; got {args.rounds}")
    if args.quick:
        args.batch, args.chunk, args.peer = 256, 128, 4
    info = machine_info()
    print(
        f"JAX {info['jax']} on {info['backend']} ({info['cpu_count']} CPUs), float64, "
        f"batch {args.batch}, sweep chunks of {args.chunk or 'the default size'}"
    )
    rows = []
    wanted = set(args.systems.split(","))
    tols = [float(x) for x in args.tolerances.split(",")]
    for key, (name, system, q0, qd0, ts, rhs) in zip(("rod", "duffing"), cases(args.batch)):
        if key not in wanted:
            continue
        for tol in tols:
            solver, method = SETTINGS[tol]
            opts = ukjax.compiler_options()
            vmap_c, vargs, compile_v = compile_vmap(system, q0, qd0, ts, tol, solver)
            opts_c, _, _ = compile_vmap(system, q0, qd0, ts, tol, solver, opts)
            vq_c, _, compile_vq = compile_vmap(system, q0, qd0, ts, tol, solver, q_only=True)
            unrolled = lambda: ukjax.Unrolled(solver())
            # sweep already writes out the stages of this solver (its Unrolled column is
            # the sweep column); a plain vmap does not (since stop 40 it runs the program
            # of a single run): its Unrolled column is measured
            sweep_unrolls = isinstance(batched_solver(solver()), ukjax.Unrolled)
            if args.no_unrolled:
                unr_c, compile_u = None, np.nan
            else:
                unr_c, _, compile_u = compile_vmap(system, q0, qd0, ts, tol, unrolled)
            idx = np.linspace(0, args.batch - 1, args.peer).astype(int)
            # Rounds interleave the four measurements, so that each sees the box in the
            # same state (its speed drifts by up to 2x over minutes); best round per column.
            keys = ("sweep", "sweep1", "sweep_unr", "vmap", "vmap_q", "opts", "unr", "peer")
            times = {k: [] for k in keys}
            # compile s of a sweep: its first call (compiling) less its best later call
            first_s = run_sweep(system, q0, qd0, ts, tol, solver, args.chunk)[1]
            first_su = np.nan
            if unr_c is not None and not sweep_unrolls:
                first_su = run_sweep(system, q0, qd0, ts, tol, unrolled, args.chunk)[1]
            for r in range(args.rounds):
                q_s, run, steps = run_sweep(system, q0, qd0, ts, tol, solver, args.chunk)
                times["sweep"].append(run)
                times["sweep1"].append(
                    run_sweep(system, q0, qd0, ts, tol, solver, args.chunk, workers=1)[1]
                )
                if unr_c is not None and not sweep_unrolls:
                    times["sweep_unr"].append(
                        run_sweep(system, q0, qd0, ts, tol, unrolled, args.chunk)[1]
                    )
                q_v, run = timed(vmap_c, *vargs)
                times["vmap"].append(run)
                times["vmap_q"].append(timed(vq_c, *vargs)[1])
                times["opts"].append(timed(opts_c, *vargs)[1])
                if unr_c is not None:
                    q_u, run = timed(unr_c, *vargs)
                    times["unr"].append(run)
                peer, dev = run_peer(rhs, q0, qd0, ts, tol, method, idx, q_s)
                times["peer"].append(peer)
            finite = lambda k: [x for x in times[k] if np.isfinite(x)] or [np.nan]
            best = lambda k: min(finite(k))
            run_s, run_v, run_o, peer = (best(k) for k in ("sweep", "vmap", "opts", "peer"))
            run_u, run_su, run_vq = best("unr"), best("sweep_unr"), best("vmap_q")
            run_s1 = best("sweep1")
            compile_s, compile_su = first_s - run_s, first_su - run_su
            if sweep_unrolls:  # the sweep column is the written-out one
                run_su, compile_su = run_s, compile_s
            q_v = np.asarray(q_v.q)
            peer_total = peer * args.batch
            row = {
                "system": name,
                "tol": tol,
                "ukjax_solver": solver.__name__,
                "peer_method": method,
                "batch": args.batch,
                "mean_steps": steps,
                "sweep_run_s": run_s,
                "sweep_compile_s": compile_s,
                "sweep_workers": ukjax._sweep._workers(None, jax.local_devices()),
                "sweep_one_worker_run_s": run_s1,
                "ratio_sweep_one_worker": peer * args.batch / run_s1,
                "sweep_one_worker_over_vmap_time": run_s1 / run_v,
                "vmap_run_s": run_v,
                "vmap_compile_s": compile_v,
                "vmap_options_run_s": run_o,
                "vmap_q_only_run_s": run_vq,
                "vmap_q_only_compile_s": compile_vq,
                "vmap_unrolled_run_s": run_u,
                "vmap_unrolled_compile_s": compile_u,
                "sweep_writes_out_stages": sweep_unrolls,
                "sweep_unrolled_run_s": run_su,
                "sweep_unrolled_compile_s": compile_su,
                "compiler_options": opts,
                "peer_trajectories": len(idx),
                "peer_s_per_traj": peer,
                "peer_total_s_extrapolated": peer_total,
                "ratio_sweep": peer_total / run_s,
                "ratio_vmap": peer_total / run_v,
                "ratio_vmap_options": peer_total / run_o,
                "ratio_vmap_q_only": peer_total / run_vq,
                "sweep_over_vmap_q_only_time": run_s / run_vq,
                "ratio_vmap_unrolled": peer_total / run_u,
                "ratio_sweep_unrolled": peer_total / run_su,
                "sweep_over_vmap_time": run_s / run_v,
                "max_abs_dev_q": dev,
                "rounds": args.rounds,
                "all_rounds_s": times,
                "max_abs_sweep_minus_vmap": float(np.abs(q_s - q_v).max()),
                "max_abs_unrolled_minus_vmap": (
                    float(np.abs(np.asarray(q_u.q) - q_v).max()) if unr_c is not None else None
                ),
            }
            rows.append(row)
            print(
                f"\n{name}, rtol = atol = {tol:g} ({solver.__name__} vs {method}), best of "
                f"{args.rounds} rounds"
            )
            print(
                f"  ukjax.sweep  run {run_s:7.2f} s  compile {compile_s:5.2f} s  "
                f"({steps:.0f} steps/trajectory)  {row['ratio_sweep']:,.0f}x the peer"
            )
            print(
                f"  ukjax.sweep(workers=1)  run {run_s1:7.2f} s  "
                f"{row['ratio_sweep_one_worker']:,.0f}x the peer"
            )
            print(
                f"  jit(vmap)    run {run_v:7.2f} s  compile {compile_v:5.2f} s  "
                f"{row['ratio_vmap']:,.0f}x the peer"
            )
            print(
                f"  jit(vmap) q only  run {run_vq:7.2f} s  compile {compile_vq:5.2f} s  "
                f"{row['ratio_vmap_q_only']:,.0f}x the peer"
            )
            print(
                f"  jit(vmap, compiler_options=ukjax.compiler_options())  run {run_o:7.2f} s  "
                f"{row['ratio_vmap_options']:,.0f}x the peer"
            )
            if unr_c is not None:
                print(
                    f"  jit(vmap) Unrolled  run {run_u:7.2f} s  compile {compile_u:5.2f} s  "
                    f"{row['ratio_vmap_unrolled']:,.0f}x the peer"
                )
                label = "= ukjax.sweep" if sweep_unrolls else f"compile {compile_su:5.2f} s"
                print(
                    f"  ukjax.sweep Unrolled  run {run_su:7.2f} s  {label}  "
                    f"{row['ratio_sweep_unrolled']:,.0f}x the peer"
                )
            print(
                f"  scipy+pinv   {peer * 1e3:7.1f} ms/trajectory over {len(idx)} -> "
                f"{peer_total:,.1f} s for {args.batch};  max |q - q_peer| = {dev:.1e}"
            )
            spread = lambda k: max(finite(k)) / best(k)
            print(
                "  max/min over rounds: sweep {:.2f}, sweep 1 worker {:.2f}, vmap {:.2f}, "
                "vmap q only {:.2f}, vmap+opts {:.2f}, peer {:.2f}".format(
                    *(spread(k) for k in ("sweep", "sweep1", "vmap", "vmap_q", "opts", "peer"))
                )
            )
            if unr_c is not None:
                print(f"  max/min over rounds: vmap Unrolled {spread('unr'):.2f}")
    print(
        "\n| system | rtol | ukjax / scipy | sweep run s | sweep 1 worker s | vmap run s | "
        "vmap q only run s | vmap+opts run s | vmap Unrolled run s | sweep Unrolled run s | "
        "peer s | sweep × | sweep 1 worker × | vmap × | vmap q only × | vmap+opts × | "
        "vmap Unrolled × | sweep Unrolled × |"
    )
    print("|---" * 18 + "|")
    for r in rows:
        print(
            f"| {r['system']} | {r['tol']:g} | {r['ukjax_solver']} / {r['peer_method']} | "
            f"{r['sweep_run_s']:.2f} | {r['sweep_one_worker_run_s']:.2f} | "
            f"{r['vmap_run_s']:.2f} | {r['vmap_q_only_run_s']:.2f} | "
            f"{r['vmap_options_run_s']:.2f} | "
            f"{r['vmap_unrolled_run_s']:.2f} | {r['sweep_unrolled_run_s']:.2f} | "
            f"{r['peer_total_s_extrapolated']:,.0f} | "
            f"{r['ratio_sweep']:,.0f}× | {r['ratio_sweep_one_worker']:,.0f}× | "
            f"{r['ratio_vmap']:,.0f}× | "
            f"{r['ratio_vmap_q_only']:,.0f}× | "
            f"{r['ratio_vmap_options']:,.0f}× | {r['ratio_vmap_unrolled']:,.0f}× | "
            f"{r['ratio_sweep_unrolled']:,.0f}× |"
        )
    write_json(args.json, {"machine": info, "rows": rows})


if __name__ == "__main__":
    main()
