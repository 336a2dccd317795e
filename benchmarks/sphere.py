"""A ball that slides, then rolls (3-D friction cone): ukjax against MuJoCo's soft contact.

Scene (Routh 1905, *Dynamics of a System of Rigid Bodies*, sec. 243): a homogeneous ball,
radius 0.1 m, mass 1, on a horizontal plane with friction mu = 0.3, launched at
v0 in [0.5, 2] m/s along x with spins w0_y in [-30, 10] rad/s (backspin to topspin) and a
sideways spin w0_x = 5 rad/s, t in [0, T = 1] s, 101 saves. The reference is the closed
form (`tests/references.py`, `ball_slide_then_roll`): the slip shrinks along a fixed line,
the ball sticks at t* = 2|u0|/(7 mu g) and rolls on.

- ukjax: `ukjax.systems.BallsOnTable(count=1)` (centre and integrated angular velocity, a
  unilateral table contact with two tangent rows: an isotropic cone), default `Coulomb`
  friction and `Impact()`, default solver (Dopri8, rtol = atol = 1e-12); a batch
  (`jit(vmap(simulate))`).
- MuJoCo (PyPI `mujoco`, C, `rollout` on 2 threads): a sphere with a free joint on a plane,
  condim 3 (sliding friction, no rolling resistance), default soft contact
  (solref (0.02, 1)), at dt = 1e-3 and 1e-4 with the default Euler and with RK4, with its
  default pyramidal friction cone and (Euler) with the elliptic one.

Accuracy: the largest |x - x_ref| of the centre over the saves and the largest error of
the centre velocity at T (rolling by then), on every member; ukjax's stick-event time vs
t*. Costs: trajectories/s, compile time apart.

    python benchmarks/sphere.py [--quick] [--batch 256] [--json FILE]
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
from ukjax.systems import BallsOnTable


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from references import ball_slide_then_roll  # noqa: E402


R, MASS, G, MU, T, SAVES = 0.1, 1.0, 9.81, 0.3, 1.0, 101


def launches(B):
    v0 = np.zeros((B, 3))
    w0 = np.zeros((B, 3))
    v0[:, 0] = np.linspace(0.5, 2.0, B)
    w0[:, 1] = np.linspace(-30.0, 10.0, B)[::-1]
    w0[:, 0] = 5.0
    return v0, w0


def reference(v0, w0, ts):
    """Centre positions (B, S, 3), velocities at T (B, 3), t* (B,)."""
    pos, vel, t_star = [], [], []
    for v, w in zip(v0, w0):
        _, _, ts_ = ball_slide_then_roll(R, G, MU, v, w, 0.0)
        x = [np.zeros(3)]
        for a, b in zip(ts[:-1], ts[1:]):  # exact: piecewise-linear velocity, integrate it
            va, _, _ = ball_slide_then_roll(R, G, MU, v, w, a)
            vb, _, _ = ball_slide_then_roll(R, G, MU, v, w, b)
            mid = min(max(ts_, a), b)
            vm, _, _ = ball_slide_then_roll(R, G, MU, v, w, mid)
            x.append(x[-1] + 0.5 * (va + vm) * (mid - a) + 0.5 * (vm + vb) * (b - mid))
        pos.append(np.array(x))
        vel.append(ball_slide_then_roll(R, G, MU, v, w, ts[-1])[0])
        t_star.append(ts_)
    return np.array(pos), np.array(vel), np.array(t_star)


def ukjax_runs(v0, w0, ts):
    ball = BallsOnTable(count=1, radius=R, mass=MASS, g=G, mu_static=MU, mu_kinetic=MU)
    q0 = jnp.array([0.0, 0.0, R, 0.0, 0.0, 0.0])

    def one(v, w):
        sol = ukjax.simulate(ball, q0, jnp.concatenate([v, w]), ts, throw=False)
        centre = sol.q[:, :3] - jnp.array([0.0, 0.0, R])
        return centre, sol.qd[-1, :3], sol.events.time[0], sol.result._value

    fn = jax.jit(jax.vmap(one))
    t0 = time.perf_counter()
    compiled = fn.lower(v0, w0).compile()
    compile_s = time.perf_counter() - t0
    jax.block_until_ready(compiled(v0, w0))
    t0 = time.perf_counter()
    out = jax.block_until_ready(compiled(v0, w0))
    return compile_s, time.perf_counter() - t0, out


def mujoco_runs(v0, w0, dt, integrator, cone="pyramidal"):
    import mujoco
    from mujoco import rollout

    xml = f"""<mujoco><option timestep="{dt}" integrator="{integrator}" gravity="0 0 -{G}"
      cone="{cone}"/>
      <worldbody><geom type="plane" size="50 50 0.1" condim="3" friction="{MU} 0 0"/>
        <body pos="0 0 {R}"><freejoint/>
          <geom type="sphere" size="{R}" mass="{MASS}" condim="3" friction="{MU} 0 0"/>
        </body></worldbody></mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)
    data = [mujoco.MjData(model) for _ in range(2)]
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    init = np.empty((len(v0), mujoco.mj_stateSize(model, spec)))
    for i in range(len(v0)):
        d = data[0]
        mujoco.mj_resetData(model, d)
        d.qvel[:3], d.qvel[3:] = v0[i], w0[i]  # identity orientation: local = world
        mujoco.mj_forward(model, d)
        mujoco.mj_getState(model, d, init[i], spec)
    steps = int(round(T / dt))
    state = np.empty((len(v0), steps, init.shape[1]))
    rollout.rollout(model, data, init[:2], nstep=min(steps, 10), state=state[:2, : min(steps, 10)])
    t0 = time.perf_counter()
    rollout.rollout(model, data, init, nstep=steps, state=state)
    seconds = time.perf_counter() - t0
    # FULLPHYSICS = [time, qpos (x, y, z, quat), qvel (v, w), ...]
    every = steps // (SAVES - 1)
    pos = state[:, every - 1 :: every, 1:4] - np.array([0.0, 0.0, R])
    pos = np.concatenate([np.zeros((len(v0), 1, 3)), pos], axis=1)
    vel = state[:, -1, 8:11]
    return seconds, pos, vel, mujoco.__version__


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default=out_path("sphere.json"))
    ap.add_argument("--no-mujoco", action="store_true", help="ukjax only")
    args = ap.parse_args()
    B = 16 if args.quick else args.batch
    info = machine_info()
    v0, w0 = launches(B)
    ts = np.linspace(0.0, T, SAVES)
    ref_pos, ref_vel, t_star = reference(v0, w0, ts)
    print(
        f"JAX {info['jax']} ({jax.devices()[0].platform}, {info['cpu_count']} CPUs), float64; "
        f"{B} balls (R = {R} m, mu = {MU}) launched sliding with spin, t in [0, {T}] s"
    )
    print(
        f"{'engine':<34}{'traj/s':>10}{'compile s':>10}{'max |x - ref|':>15}"
        f"{'|v(T) - ref|':>14}{'stick t err':>13}"
    )
    rows = []

    def report(engine, seconds, compile_s, pos, vel, t_err):
        row = {
            "engine": engine,
            "batch": B,
            "seconds": seconds,
            "traj_per_s": B / seconds,
            "compile_s": compile_s,
            "max_position_error": float(np.max(np.abs(pos - ref_pos))),
            "max_final_velocity_error": float(np.max(np.abs(vel - ref_vel))),
            "max_stick_time_error": t_err,
        }
        rows.append(row)
        cs = "" if compile_s is None else f"{compile_s:.2f}"
        te = "" if t_err is None else f"{t_err:.1e}"
        print(
            f"{engine:<34}{row['traj_per_s']:>10,.0f}{cs:>10}{row['max_position_error']:>15.1e}"
            f"{row['max_final_velocity_error']:>14.1e}{te:>13}"
        )

    compile_s, seconds, (pos, vel, t_ev, codes) = ukjax_runs(
        jnp.asarray(v0), jnp.asarray(w0), jnp.asarray(ts)
    )
    assert np.all(np.asarray(codes) == 0), np.asarray(codes)
    t_err = float(np.max(np.abs(np.asarray(t_ev) - t_star)))
    report("ukjax Coulomb (defaults)", seconds, compile_s, np.asarray(pos), np.asarray(vel), t_err)
    version = None
    for dt in () if args.no_mujoco else (1e-3, 1e-4):
        for integrator in ("Euler", "RK4"):
            seconds, pos, vel, version = mujoco_runs(v0, w0, dt, integrator)
            report(f"MuJoCo {integrator}, dt = {dt:g}", seconds, None, pos, vel, None)
        seconds, pos, vel, version = mujoco_runs(v0, w0, dt, "Euler", "elliptic")
        report(f"MuJoCo Euler elliptic, dt = {dt:g}", seconds, None, pos, vel, None)
    payload = {
        "machine": info,
        "mujoco": version,
        "scene": {"R": R, "mass": MASS, "mu": MU, "T": T, "saves": SAVES, "batch": B},
        "rows": rows,
    }
    write_json(args.json, payload)


if __name__ == "__main__":
    main()
