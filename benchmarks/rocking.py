"""Several contacts at once: Housner's rocking block, ukjax against MuJoCo's soft contact.

Scene (Housner 1963): a rigid block, half-width b = 0.2 m, half-height h = 0.6 m, mass 1,
released from rest tilted at theta0 on a rough floor (friction 1: the pivot corner sticks),
t in [0, T = 2] s. The reference is the minimal-coordinate model of `tests/references.py`
(`rocking_block_reference`: rotation about the fixed pivot corner, theta' scaled by
1 - (3/2) sin^2(alpha) at each impact, scipy DOP853 at rtol 1e-12 with events).

- ukjax: the block in (x, y, theta) with its two bottom corners as unilateral contacts,
  Coulomb friction, `contact=ukjax.Impact(0)` (each impact a complementarity problem: the
  old corner lifts, the new one sticks), default solver (Dopri8, rtol = atol = 1e-12);
  one trajectory and a batch (`jit(vmap(simulate))`, theta0 in [0.10, 0.20]).
- MuJoCo (PyPI `mujoco`, C, `rollout` on 2 threads): the block as a box on a plane with
  slide x, slide z and hinge y joints (planar), default soft contact (solref (0.02, 1)),
  friction 1, at dt = 1e-3 and 1e-4 with the default Euler and with RK4.

Accuracy (on 64 members spread over the batch): the largest |theta - theta_ref| over 201
saves, the error of the first three
impact times (zero crossings of theta). Costs: trajectories/s of the batch, compile time
apart, and the batch's run time per trajectory and event (an upper bound on the cost of an
event, whose complementarity problems are a part of it).

    python benchmarks/rocking.py [--quick] [--batch 256] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax


jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpy as np

import ukjax
from _common import machine_info, out_path, write_json


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from references import housner_rough_ratio, rocking_block_reference  # noqa: E402


B_HALF, H_HALF, G, T, SAVES, MU = 0.2, 0.6, 9.81, 2.0, 201, 1.0


class RoughBlock(ukjax.System):
    """The block in (x, y, theta); contacts at its bottom corners, Coulomb friction."""

    b: float = B_HALF
    h: float = H_HALF
    g: float = G

    def mass_matrix(self, t, q):
        return jnp.diag(jnp.array([1.0, 1.0, (self.b**2 + self.h**2) / 3]))

    def forces(self, t, q, qd):
        return jnp.array([0.0, -self.g, 0.0])

    def unilateral(self, t, q):
        _, y, th = q
        side = jnp.array([-1.0, 1.0])
        return y + side * self.b * jnp.sin(th) - self.h * jnp.cos(th)

    def friction(self, t, q):
        th = q[2]
        side = jnp.array([-1.0, 1.0])
        lever = -side * self.b * jnp.sin(th) + self.h * jnp.cos(th)
        return jnp.stack([jnp.ones(2), jnp.zeros(2), lever], axis=1), MU, MU


def start(th0):
    return jnp.array([0.0, B_HALF * jnp.sin(th0) + H_HALF * jnp.cos(th0), th0])


def crossings(ts, theta, count=3):
    """The first `count` zero crossings of theta(t) (linear interpolation)."""
    s = np.sign(theta)
    idx = np.nonzero(s[:-1] * s[1:] < 0)[0][:count]
    return np.array(
        [ts[i] - theta[i] * (ts[i + 1] - ts[i]) / (theta[i + 1] - theta[i]) for i in idx]
    )


def ukjax_runs(th0s, ts):
    system = RoughBlock()

    def one(th0):
        sol = ukjax.simulate(
            system,
            start(th0),
            jnp.zeros(3),
            ts,
            contact=ukjax.Impact(0.0),
            max_events=64,
            throw=False,
        )
        return sol.q[:, 2], sol.events.time, sol.events.count, sol.result._value

    fn = jax.jit(jax.vmap(one))
    t0 = time.perf_counter()
    compiled = fn.lower(th0s).compile()
    compile_s = time.perf_counter() - t0
    jax.block_until_ready(compiled(th0s))
    t0 = time.perf_counter()
    out = jax.block_until_ready(compiled(th0s))
    return compile_s, time.perf_counter() - t0, out


def mujoco_runs(th0s, dt, integrator):
    import mujoco
    from mujoco import rollout

    xml = f"""<mujoco><option timestep="{dt}" integrator="{integrator}" gravity="0 0 -{G}"/>
      <worldbody><geom type="plane" size="5 5 0.1" friction="{MU} 0.005 0.0001"/>
        <body pos="0 0 0"><joint name="x" type="slide" axis="1 0 0"/>
          <joint name="z" type="slide" axis="0 0 1"/><joint name="th" type="hinge" axis="0 -1 0"/>
          <geom type="box" size="{B_HALF} 0.1 {H_HALF}" mass="1" friction="{MU} 0.005 0.0001"/>
        </body></worldbody></mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)
    # the box's inertia about y: m (b^2 + h^2) / 3 (MuJoCo's box inertia, as ukjax's)
    data = [mujoco.MjData(model) for _ in range(2)]
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    init = np.empty((len(th0s), mujoco.mj_stateSize(model, spec)))
    for i, th0 in enumerate(np.asarray(th0s)):
        d = data[0]
        mujoco.mj_resetData(model, d)
        q = np.asarray(start(th0))
        d.qpos[:] = [q[0], q[1], q[2]]
        mujoco.mj_forward(model, d)
        mujoco.mj_getState(model, d, init[i], spec)
    steps = int(round(T / dt))
    state = np.empty((len(th0s), steps, init.shape[1]))
    rollout.rollout(model, data, init[:2], nstep=min(steps, 10), state=state[:2, : min(steps, 10)])
    t0 = time.perf_counter()
    rollout.rollout(model, data, init, nstep=steps, state=state)
    seconds = time.perf_counter() - t0
    theta = state[:, :, 3]  # FULLPHYSICS = [time, qpos (x, z, th), ...]
    every = steps // (SAVES - 1)
    saved = np.concatenate([np.asarray(th0s)[:, None], theta[:, every - 1 :: every]], axis=1)
    fine_ts = dt * np.arange(1, steps + 1)
    return seconds, saved, theta, fine_ts, mujoco.__version__


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default=out_path("rocking.json"))
    ap.add_argument(
        "--no-mujoco", action="store_true", help="ukjax only (a machine without mujoco)"
    )
    args = ap.parse_args()
    B = 16 if args.quick else args.batch
    info = machine_info()
    th0s = np.linspace(0.10, 0.20, B)
    ts = np.linspace(0.0, T, SAVES)
    # the reference on (at most) 64 members spread over the batch: errors are measured there
    idx = np.unique(np.linspace(0, B - 1, min(B, 64)).astype(int))
    refs = [
        rocking_block_reference(B_HALF, H_HALF, G, th0, 40, rough=True, ts=ts) for th0 in th0s[idx]
    ]
    ref_theta = np.array([r[1] for r in refs])
    ref_times = np.array([r[0][:3] for r in refs])
    ratio = housner_rough_ratio(B_HALF, H_HALF)
    print(
        f"JAX {info['jax']} ({jax.devices()[0].platform}, {info['cpu_count']} CPUs), float64; "
        f"{B} rocking blocks (b = {B_HALF},"
        f" h = {H_HALF}, rough floor), theta0 in [0.10, 0.20], t in [0, {T}] s; Housner "
        f"ratio {ratio:.4f}"
    )
    hdr = (
        f"{'engine':<30}{'traj/s':>10}{'compile s':>10}{'events':>8}{'max |th - ref|':>16}"
        f"{'impact t err':>14}{'us/traj/event':>15}"
    )
    print(hdr)
    rows = []

    def report(engine, seconds, compile_s, events, theta, times):
        row = {
            "engine": engine,
            "batch": B,
            "seconds": seconds,
            "traj_per_s": B / seconds,
            "compile_s": compile_s,
            "events_per_traj": events,
            "max_theta_error": float(np.nanmax(np.abs(theta[idx] - ref_theta))),
            "max_impact_time_error": float(np.nanmax(np.abs(times[idx] - ref_times))),
            "us_per_traj_event": None if not events else 1e6 * seconds / B / events,
        }
        rows.append(row)
        cs = "" if compile_s is None else f"{compile_s:.2f}"
        ev = "" if events is None else f"{events:.1f}"
        print(
            f"{engine:<30}{row['traj_per_s']:>10,.0f}{cs:>10}{ev:>8}"
            f"{row['max_theta_error']:>16.1e}{row['max_impact_time_error']:>14.1e}"
            f"{'' if not events else format(row['us_per_traj_event'], '.0f'):>15}"
        )

    compile_s, seconds, (theta, ev_t, ev_n, codes) = ukjax_runs(jnp.asarray(th0s), jnp.asarray(ts))
    assert np.all(np.asarray(codes) == 0), np.asarray(codes)
    report(
        "ukjax Impact(0) + Coulomb",
        seconds,
        compile_s,
        float(np.mean(np.asarray(ev_n))),
        np.asarray(theta),
        np.asarray(ev_t)[:, :3],
    )
    version = None
    for dt in () if args.no_mujoco else (1e-3, 1e-4):
        for integrator in ("Euler", "RK4"):
            seconds, saved, fine, fine_ts, version = mujoco_runs(th0s, dt, integrator)
            times = np.array([crossings(fine_ts, f) for f in fine])
            report(f"MuJoCo {integrator}, dt = {dt:g}", seconds, None, None, saved, times)
    payload = {
        "machine": info,
        "mujoco": version,
        "scene": {"b": B_HALF, "h": H_HALF, "mu": MU, "T": T, "saves": SAVES, "batch": B},
        "housner_ratio": ratio,
        "rows": rows,
    }
    write_json(args.json, payload)


if __name__ == "__main__":
    main()
