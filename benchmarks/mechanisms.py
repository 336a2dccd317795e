"""Redundant and singular mechanisms: the IFToMM benchmarks A02 (N-four-bar) and A04
(Bricard), ukjax against scipy with a NumPy least-squares KKT solve.

1. **One trajectory, 10 s, equal tolerance** (rtol = atol = `--tol`, default 1e-10):
   - ukjax: `simulate` at its defaults otherwise (Dopri8, `Regularized` UK solve, the
     default per-step projection `Projection(iterations=1, saves=False)`); compile time
     apart from run time.
   - scipy: `solve_ivp(method="DOP853")` on the index-1 DAE, q'' from
     `numpy.linalg.lstsq` of the KKT matrix [[M, J^T], [J, 0]] (rcond 1e-10; the Jacobian
     and acceleration terms hand-written in tests/references.py), no projection.
   Error: N-four-bar, largest |B_0 - B_0^ref| over 401 saves against the reduced
   one-degree-of-freedom equation (scipy, 1e-13); Bricard, largest coordinate difference
   from the KKT peer at rtol = atol = 1e-12 (the benchmark's published data are not
   redistributable; this is our own reference).
2. **Batched**: B trajectories (four-bar N = 2 with initial speeds in [0.5, 1.5] m/s;
   Bricard with g in [5, 15] m/s^2) by `jit(vmap(simulate))` against scipy one trajectory
   at a time (timed on `--scipy-batch` members, per trajectory).
3. **Redundant vs full-rank cost per step** on the Bricard mechanism: Dopri8 with a fixed
   step (1e-2 s, 200 steps, so every variant does the same work): the 24 constraints
   (one redundant) with the default `Regularized` solve, the same with the previous
   default `CholeskyWithFallback` (SVD on rank-deficient rows), and 23 independent rows
   (one redundant row removed) with the full-rank `Cholesky` path.

    python benchmarks/mechanisms.py [--quick] [--batch 64] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import diffrax
import equinox as eqx
import jax


jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp
import numpy as np
from scipy.integrate import solve_ivp

import ukjax
from _common import machine_info, out_path, time_compile_and_run, write_json
from ukjax.systems import Bricard, NFourBar


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from references import BricardKKT, NFourBarKKT, nfour_bar_crank_angle  # noqa: E402


class BricardIndependentRows(Bricard):
    """The Bricard mechanism with one redundant row removed (23 independent rows)."""

    drop: int = eqx.field(static=True, default=0)

    def holonomic(self, t, q):
        rows = super().holonomic(t, q)
        return jnp.concatenate([rows[: self.drop], rows[self.drop + 1 :]])


def _redundant_row(mech: Bricard) -> int:
    q0, _ = mech.initial_state()
    A = np.asarray(jax.jacfwd(lambda q: mech.holonomic(0.0, q))(q0))
    for i in range(A.shape[0]):
        if np.linalg.matrix_rank(np.delete(A, i, axis=0)) == np.linalg.matrix_rank(A):
            return i
    raise RuntimeError("no redundant row")


def _scipy(rhs, y0, ts, tol):
    t0 = time.perf_counter()
    s = solve_ivp(rhs, (ts[0], ts[-1]), y0, method="DOP853", rtol=tol, atol=tol, t_eval=ts)
    return time.perf_counter() - t0, s


def single(tol: float, T: float) -> list[dict]:
    rows = []
    ts = np.linspace(0.0, T, 401)
    for N in (1, 2, 10):
        chain = NFourBar(N=N)
        q0, qd0 = chain.initial_state()
        fn = lambda q0, qd0: ukjax.simulate(chain, q0, qd0, jnp.asarray(ts), rtol=tol, atol=tol)
        t_c, t_run, sol = time_compile_and_run(fn, q0, qd0, repeats=2)
        theta = nfour_bar_crank_angle(N, ts)
        ref = np.stack([np.cos(theta), np.sin(theta)], 1)
        err = float(np.max(np.abs(np.asarray(sol.q)[:, :2] - ref)))
        peer = NFourBarKKT(N)
        t_s, s = _scipy(peer.rhs, np.concatenate(peer.initial_state()), ts, tol)
        err_s = float(np.max(np.abs(s.y[:2].T - ref))) if s.status == 0 else float("nan")
        rows.append(
            dict(
                mechanism=f"N-four-bar N={N}",
                compile_s=t_c,
                ukjax_s=t_run,
                steps=int(sol.stats["num_steps"]),
                ukjax_error=err,
                scipy_s=t_s,
                scipy_nfev=int(s.nfev),
                scipy_status=int(s.status),
                scipy_error=err_s,
                speedup=t_s / t_run,
            )
        )
    mech, peer = Bricard(), BricardKKT()
    q0, qd0 = mech.initial_state()
    fn = lambda q0, qd0: ukjax.simulate(mech, q0, qd0, jnp.asarray(ts), rtol=tol, atol=tol)
    t_c, t_run, sol = time_compile_and_run(fn, q0, qd0, repeats=2)
    t_s, s = _scipy(peer.rhs, np.concatenate(peer.initial_state()), ts, tol)
    _, ref = _scipy(peer.rhs, np.concatenate(peer.initial_state()), ts, 1e-12)
    E = jax.vmap(lambda q, qd: ukjax.energy(mech, 0.0, q, qd))(sol.q, sol.qd)
    rows.append(
        dict(
            mechanism="Bricard",
            compile_s=t_c,
            ukjax_s=t_run,
            steps=int(sol.stats["num_steps"]),
            ukjax_error=float(np.max(np.abs(np.asarray(sol.q) - ref.y[:24].T))),
            ukjax_energy_drift=float(jnp.max(jnp.abs(E - E[0]))),
            scipy_s=t_s,
            scipy_nfev=int(s.nfev),
            scipy_status=int(s.status),
            scipy_error=float(np.max(np.abs(s.y[:24] - ref.y[:24]))),
            speedup=t_s / t_run,
        )
    )
    return rows


def _batched_row(name, fn, args, scipy_runs, batch: int) -> dict:
    """Time `jit(vmap(fn))(*args)` (compile apart) against scipy runs (per trajectory)."""
    t_c, t_run, _ = time_compile_and_run(jax.vmap(fn), *args, repeats=1)
    t_s = sum(_scipy(*run)[0] for run in scipy_runs) / len(scipy_runs)
    return dict(
        mechanism=name,
        batch=batch,
        compile_s=t_c,
        ukjax_s=t_run,
        ukjax_per_traj_s=t_run / batch,
        scipy_per_traj_s=t_s,
        speedup=t_s / (t_run / batch),
    )


def batched(tol: float, T: float, batch: int, scipy_batch: int) -> list[dict]:
    ts = np.linspace(0.0, T, 101)
    chain, peer = NFourBar(N=2), NFourBarKKT(2)
    speeds = np.linspace(0.5, 1.5, batch)
    q0s, qd0s = jax.vmap(lambda v: chain.initial_state(v))(jnp.asarray(speeds))
    four_bar = _batched_row(
        "N-four-bar N=2",
        lambda q0, qd0: ukjax.simulate(chain, q0, qd0, jnp.asarray(ts), rtol=tol, atol=tol).q,
        (q0s, qd0s),
        [(peer.rhs, np.concatenate(peer.initial_state(v)), ts, tol) for v in speeds[:scipy_batch]],
        batch,
    )
    gs = np.linspace(5.0, 15.0, batch)
    mech = Bricard()
    q0, qd0 = mech.initial_state()
    peers = [BricardKKT(g=float(g)) for g in gs[:scipy_batch]]
    bricard = _batched_row(
        "Bricard",
        lambda g: (
            ukjax.simulate(
                eqx.tree_at(lambda s: s.g, mech, g), q0, qd0, jnp.asarray(ts), rtol=tol, atol=tol
            ).q
        ),
        (jnp.asarray(gs),),
        [(p.rhs, np.concatenate(p.initial_state()), ts, tol) for p in peers],
        batch,
    )
    return [four_bar, bricard]


def per_step() -> list[dict]:
    mech = Bricard()
    q0, qd0 = mech.initial_state()
    drop = _redundant_row(mech)
    ts = jnp.linspace(0.0, 2.0, 3)
    variants = [
        ("24 rows (1 redundant), Regularized (default)", mech, ukjax.Regularized()),
        ("24 rows (1 redundant), CholeskyWithFallback (SVD)", mech, ukjax.CholeskyWithFallback()),
        (
            "23 independent rows, Cholesky (full-rank path)",
            BricardIndependentRows(drop=drop),
            ukjax.Cholesky(),
        ),
        (
            "23 independent rows, Regularized",
            BricardIndependentRows(drop=drop),
            ukjax.Regularized(),
        ),
    ]
    rows = []
    for name, system, solver in variants:
        fn = lambda q0, qd0: ukjax.simulate(
            system,
            q0,
            qd0,
            ts,
            uk_solver=solver,
            stepsize_controller=diffrax.ConstantStepSize(),
            dt0=1e-2,
            stabilization=ukjax.NoStabilization(),
            throw=False,  # timing only: the unstabilised SVD variant may diverge
        )
        t_c, t_run, sol = time_compile_and_run(fn, q0, qd0, repeats=3)
        steps = int(sol.stats["num_steps"])
        rows.append(
            dict(
                variant=name,
                steps=steps,
                compile_s=t_c,
                us_per_step=1e6 * t_run / steps,
                finished=bool(sol.result == ukjax.RESULTS.successful),
            )
        )
    base = rows[2]["us_per_step"]
    for r in rows:
        r["vs_full_rank"] = r["us_per_step"] / base
    return rows


def _table(rows, cols):
    print(" | ".join(cols))
    for r in rows:
        print(" | ".join(f"{r[c]:.3g}" if isinstance(r[c], float) else str(r[c]) for c in cols))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="2 s horizon, batch 8")
    p.add_argument("--tol", type=float, default=1e-10)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--scipy-batch", type=int, default=4)
    p.add_argument("--json", default=out_path("mechanisms.json"))
    a = p.parse_args()
    T, batch = (2.0, 8) if a.quick else (10.0, a.batch)
    print("== one trajectory ==")
    s = single(a.tol, T)
    _table(
        s,
        [
            "mechanism",
            "compile_s",
            "ukjax_s",
            "steps",
            "ukjax_error",
            "scipy_s",
            "scipy_nfev",
            "scipy_status",
            "scipy_error",
            "speedup",
        ],
    )
    print(f"== batched ({batch} trajectories) ==")
    b = batched(a.tol, T, batch, min(a.scipy_batch, batch))
    _table(
        b,
        [
            "mechanism",
            "batch",
            "compile_s",
            "ukjax_s",
            "ukjax_per_traj_s",
            "scipy_per_traj_s",
            "speedup",
        ],
    )
    print("== cost per step, Bricard (Dopri8, dt = 1e-2, 200 steps) ==")
    c = per_step()
    _table(c, ["variant", "steps", "finished", "compile_s", "us_per_step", "vs_full_rank"])
    write_json(
        a.json,
        dict(machine=machine_info(), tol=a.tol, horizon_s=T, single=s, batched=b, per_step=c),
    )


if __name__ == "__main__":
    main()
