"""Hybrid dynamics throughput and accuracy: a batch of balls dropped on a rigid floor.

Scene: B balls (mass 1, g = 9.81) released from rest at heights h in [0.5, 2] m, t in
[0, 2] s, 201 saves. Every ball has its own impact times.

- ukjax, `contact=ukjax.Impact(e)`, default solver (Dopri8, rtol = atol = 1e-12), batched
  with `jit(vmap(simulate))`: e = 0.8 (bouncing, 2-4 impacts per ball before t = 2; the
  free flight between impacts is a parabola, which the adaptive integrator follows in few
  steps) and e = 0 (plastic: one impact, then a persistent contact).
- the same system without the floor (free fall), same settings: the cost of the events.
- MuJoCo (PyPI `mujoco`, C, `rollout` on 2 threads): a sphere on a vertical slide joint
  above a plane, default soft contact (solref = (0.02, 1), critically damped, so e is about
  0), RK4 and the default Euler at dt = 1e-3 (2000 steps).

Accuracy against the closed form (tests/references.py `bouncing_ball_impacts`): error of
the impact times (ukjax, e = 0.8), the largest position error over the saves, the largest
penetration below the floor, and the resting height at t = 2 s (e = 0: the exact answer is
0; MuJoCo's soft contact rests inside the floor).

    python benchmarks/contact.py [--quick] [--batch 1024] [--json FILE]
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
from ukjax.systems import BouncingBall


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from references import bouncing_ball_impacts  # noqa: E402


G, T, SAVES, RADIUS, DT = 9.81, 2.0, 201, 0.1, 1e-3


class FreeBall(BouncingBall):
    """The same ball without the floor."""

    def unilateral(self, t, q):
        return None


def exact_height(h0, e, ts):
    """Closed-form height of a ball dropped from h0 with restitution e (free flight
    between the impacts of `bouncing_ball_impacts`)."""
    times, speeds, _ = bouncing_ball_impacts(h0, e, G, 60)
    z = np.empty_like(ts)
    for i, t in enumerate(ts):
        k = np.searchsorted(times, t, side="right")
        if k == 0:
            z[i] = h0 - 0.5 * G * t**2
        else:
            s, v = t - times[k - 1], e * speeds[k - 1]
            z[i] = max(v * s - 0.5 * G * s**2, 0.0) if e > 0 else 0.0
    return z


def ukjax_batch(system, h0, law):
    ts = jnp.linspace(0.0, T, SAVES)

    def one(h):
        kw = {} if law is None else {"contact": law}
        return ukjax.simulate(system, jnp.array([h]), jnp.zeros(1), ts, throw=False, **kw)

    fn = jax.jit(jax.vmap(one))
    t0 = time.perf_counter()
    compiled = fn.lower(h0).compile()
    t_compile = time.perf_counter() - t0
    jax.block_until_ready(compiled(h0))
    t0 = time.perf_counter()
    sol = jax.block_until_ready(compiled(h0))
    return t_compile, time.perf_counter() - t0, sol


def mujoco_batch(h0, integrator):
    import mujoco
    from mujoco import rollout

    xml = f"""<mujoco><option timestep="{DT}" integrator="{integrator}" gravity="0 0 -{G}"/>
      <worldbody><geom type="plane" size="5 5 0.1"/>
        <body pos="0 0 0"><joint type="slide" axis="0 0 1"/>
          <geom type="sphere" size="{RADIUS}" mass="1"/></body></worldbody></mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)
    data = [mujoco.MjData(model) for _ in range(2)]
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    init = np.empty((len(h0), mujoco.mj_stateSize(model, spec)))
    for i, h in enumerate(h0):
        d = data[0]
        mujoco.mj_resetData(model, d)
        d.qpos[0] = h + RADIUS  # the sphere's bottom at height h
        mujoco.mj_forward(model, d)
        mujoco.mj_getState(model, d, init[i], spec)
    steps = int(round(T / DT))
    state = np.empty((len(h0), steps, init.shape[1]))
    rollout.rollout(model, data, init[:2], nstep=steps, state=state[:2])
    t0 = time.perf_counter()
    rollout.rollout(model, data, init, nstep=steps, state=state)
    seconds = time.perf_counter() - t0
    z = state[:, :, 1] - RADIUS  # FULLPHYSICS = [time, qpos, ...]
    every = steps // (SAVES - 1)
    saved = np.concatenate([z[:, :1] * 0 + h0[:, None], z[:, every - 1 :: every]], axis=1)
    return seconds, saved, mujoco.__version__


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default=out_path("contact.json"))
    args = ap.parse_args()
    B = 64 if args.quick else args.batch
    info = machine_info()
    h0 = np.linspace(0.5, 2.0, B)
    ts = np.linspace(0.0, T, SAVES)
    refs = {e: np.array([exact_height(h, e, ts) for h in h0]) for e in (0.8, 0.0)}
    print(f"JAX {info['jax']} ({info['cpu_count']} CPUs), float64; {B} balls, t in [0, {T}] s")
    hdr = (
        f"{'engine':<34}{'traj/s':>10}{'compile s':>10}{'events/ball':>12}"
        f"{'max |z - exact|':>16}{'min z':>10}{'z(T), e=0':>11}"
    )
    print(hdr)
    rows = []

    def report(engine, seconds, compile_s, events, z, ref, rest):
        row = {
            "engine": engine,
            "batch": B,
            "seconds": seconds,
            "traj_per_s": B / seconds,
            "compile_s": compile_s,
            "events_per_ball": events,
            "max_position_error": float(np.abs(z - ref).max()),
            "min_height": float(z.min()),
            "resting_height_e0": rest,
        }
        rows.append(row)
        cs = "" if compile_s is None else f"{compile_s:.2f}"
        rs = "" if rest is None else f"{rest:.1e}"
        print(
            f"{engine:<34}{row['traj_per_s']:>10,.0f}{cs:>10}{events:>12.1f}"
            f"{row['max_position_error']:>16.1e}{row['min_height']:>10.1e}{rs:>11}"
        )
        return row

    hb = jnp.asarray(h0)
    tc, tr, sol = ukjax_batch(BouncingBall(g=G), hb, ukjax.Impact(restitution=0.8))
    assert np.all(np.asarray(sol.result._value) == 0)
    times = np.asarray(sol.events.time)
    exact_t = np.array([bouncing_ball_impacts(h, 0.8, G, times.shape[1])[0] for h in h0])
    ok = np.isfinite(times) & (exact_t <= T)
    t_err = float(np.abs(times[ok] - exact_t[ok]).max())
    uk = report(
        "ukjax Impact(e=0.8)",
        tr,
        tc,
        float(np.mean(np.asarray(sol.events.count))),
        np.asarray(sol.q[..., 0]),
        refs[0.8],
        None,
    )
    uk["max_impact_time_error"] = t_err
    tc0, tr0, sol0 = ukjax_batch(BouncingBall(g=G), hb, ukjax.Impact(restitution=0.0))
    z0 = np.asarray(sol0.q[..., 0])
    report(
        "ukjax Impact(e=0), persistent",
        tr0,
        tc0,
        float(np.mean(np.asarray(sol0.events.count))),
        z0,
        refs[0.0],
        float(np.abs(z0[:, -1]).max()),
    )
    tcf, trf, solf = ukjax_batch(FreeBall(g=G), hb, None)
    free_ref = h0[:, None] - 0.5 * G * ts[None, :] ** 2
    report("ukjax, no floor (free fall)", trf, tcf, 0.0, np.asarray(solf.q[..., 0]), free_ref, None)
    mj_version = None
    try:
        for integ in ("RK4", "Euler"):
            sec, z, mj_version = mujoco_batch(h0, integ)
            report(
                f"MuJoCo {integ} soft contact, dt=1e-3",
                sec,
                None,
                float("nan"),
                z,
                refs[0.0],
                float(np.abs(z[:, -1]).max()),
            )
    except ImportError:
        print("(mujoco not installed: pip install '.[bench]')")
    print(
        f"ukjax impact times: max error {t_err:.1e} s against the closed form; with contact "
        f"the batch costs {tr / trf:.1f}x the free-fall batch"
    )
    write_json(args.json, {"machine": info, "mujoco": mj_version, "rows": rows})


if __name__ == "__main__":
    main()
