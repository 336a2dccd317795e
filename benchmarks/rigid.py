"""Rigid-body models read from MJCF/URDF: ukjax (`ukjax.from_mjcf` / `from_urdf`) against
MuJoCo C on the *same file*, same CPU, one run.

Systems (contacts off, gravity on, released from random joint angles at rest):
- `arm6`: the 6-DoF arm of `examples/models/arm6.urdf` (joint damping);
- `arm7`: a 7-DoF redundant arm (MJCF; joint axes z y z y z y z as a Franka Panda's,
  capsule links whose masses and inertias MuJoCo computes from the geoms, joint damping);
- `chain16`: a 16-link chain of hinged capsules (MJCF);
- `fourbar`: a planar four-bar whose loop is closed by an MJCF `connect` (exact in ukjax,
  MuJoCo's default soft constraint).

Rows, per system, batch B, t in [0, 1]:
- ukjax defaults: `simulate(model, q0, qd0, ts)` (Dopri8, adaptive, rtol = atol = 1e-12 in
  float64, projection after every step), `jit(vmap)`: steps/s counts its own (fewer, larger)
  steps, so compare the run time to t = 1 and the error;
- ukjax RK4: `solver=ukjax.RK4()`, constant dt = 1e-3 (1000 steps), otherwise defaults;
- ukjax sweep RK4: the same RK4 settings through `ukjax.sweep` at its defaults (the batch cut
  into chunks that run on every core, `save_final_only=True`): the throughput a user's sweep
  gets; its compile column is the first call's time less a compiled call's;
- MuJoCo RK4, dt = 1e-3, `mujoco.rollout` on 2 threads.
Accuracy: the largest joint-position error at t = 1 over the batch against MuJoCo's own RK4 at
dt = 1e-5 (exact model of the trees; for the four-bar, which MuJoCo closes softly, the
column is the loop-closure error instead). Compile time is reported apart.

    python benchmarks/rigid.py [--quick] [--batch 256] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import jax


jax.config.update("jax_enable_x64", True)
import diffrax
import jax.numpy as jnp
import mujoco
import numpy as np
from mujoco import rollout

import ukjax
from _common import best_time, machine_info, out_path, time_compile_and_run, write_json


ARM = os.path.join(os.path.dirname(__file__), "..", "examples", "models", "arm6.urdf")
DT, T1 = 1e-3, 1.0


def chain_xml(n: int) -> str:
    body = ""
    for i in reversed(range(n)):
        pos = "0 0 0" if i == 0 else "0 0 -0.2"
        body = (
            f'<body name="b{i}" pos="{pos}"><joint type="hinge" axis="0 1 0" damping="0.01"/>'
            f'<geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.02"/>{body}</body>'
        )
    options = '<option><flag contact="disable"/></option>'
    return f"<mujoco>{options}<worldbody>{body}</worldbody></mujoco>"


def arm7_xml() -> str:
    """A 7-DoF arm with alternating yaw/pitch joints (a Panda's axis pattern), 1.1 m."""
    links = [  # (offset from the previous joint, axis, link length, radius)
        ("0 0 0.1", "0 0 1", 0.2, 0.06),
        ("0 0 0.2", "0 1 0", 0.3, 0.05),
        ("0 0 0.3", "0 0 1", 0.1, 0.05),
        ("0 0 0.1", "0 1 0", 0.3, 0.04),
        ("0 0 0.3", "0 0 1", 0.1, 0.04),
        ("0 0 0.1", "0 1 0", 0.1, 0.03),
        ("0 0 0.1", "0 0 1", 0.08, 0.03),
    ]
    body = ""
    for i, (pos, axis, length, r) in reversed(list(enumerate(links))):
        body = (
            f'<body name="l{i + 1}" pos="{pos}"><joint axis="{axis}" damping="0.2"/>'
            f'<geom type="capsule" fromto="0 0 0 0 0.02 {length}" size="{r}"/>{body}</body>'
        )
    options = '<option><flag contact="disable"/></option>'
    return f"<mujoco>{options}<worldbody>{body}</worldbody></mujoco>"


def fourbar_xml() -> str:
    l1, l2, l3, d = 0.3, 1.0, 0.8, 1.0
    th1, th2, th3 = 1.0, 0.5794429379199424, 1.572223208242397  # closed at qpos0

    def link(name, x, angle, length):
        return (
            f'<body name="{name}" pos="{x} 0 0" axisangle="0 -1 0 {angle}">'
            f'<joint type="hinge" axis="0 -1 0"/>'
            f'<geom type="capsule" fromto="0 0 0 {length} 0 0" size="0.02"/>'
        )

    return (
        '<mujoco><compiler angle="radian"/><option><flag contact="disable"/></option>'
        f"<worldbody>{link('crank', 0, th1, l1)}{link('coupler', l1, th2 - th1, l2)}"
        f"</body></body>{link('rocker', d, th3, l3)}</body></worldbody>"
        f'<equality><connect body1="coupler" body2="rocker" anchor="{l2} 0 0"/></equality>'
        "</mujoco>"
    )


def mujoco_final(m, qpos0, dt, nthread=2, t1=T1):
    """(seconds, final qpos (B, nq)) of an RK4 rollout to `t1` from each qpos at rest."""
    m.opt.timestep, m.opt.integrator = dt, mujoco.mjtIntegrator.mjINT_RK4
    steps = int(round(t1 / dt))
    data = [mujoco.MjData(m) for _ in range(nthread)]
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    init = np.empty((len(qpos0), mujoco.mj_stateSize(m, spec)))
    for i, qp in enumerate(qpos0):
        mujoco.mj_resetData(m, data[0])
        data[0].qpos[:] = qp
        mujoco.mj_forward(m, data[0])
        mujoco.mj_getState(m, data[0], init[i], spec)
    state = np.empty((len(qpos0), steps, init.shape[1]))
    rollout.rollout(m, data, init[:2], nstep=steps, state=state[:2])  # warm-up
    t0 = time.perf_counter()
    rollout.rollout(m, data, init, nstep=steps, state=state)
    return time.perf_counter() - t0, state[:, -1, 1 : 1 + m.nq]


def ukjax_final(model, qpos0, **options):
    """(compile s, run s, final qpos (B, nq), stats) of a jit(vmap(simulate)) to T1."""
    ts = jnp.array([0.0, T1])

    def one(qpos):
        q0, qd0 = model.initial_state(qpos)
        sol = ukjax.simulate(model, q0, qd0, ts, throw=False, **options)
        return model.qpos(sol.q[-1]), sol.stats["num_steps"]

    t_compile, t_run, (q1, steps) = time_compile_and_run(jax.vmap(one), qpos0, repeats=2)
    return t_compile, t_run, np.asarray(q1), int(np.max(steps))


def ukjax_sweep_final(model, qpos0, **options):
    """(compile s, run s, final qpos (B, nq)) of `ukjax.sweep` to T1 at its defaults."""
    q0, qd0 = jax.vmap(model.initial_state)(qpos0)
    ts = jnp.array([0.0, T1])

    def final():
        result = ukjax.sweep(
            model, q0, qd0, ts, save_final_only=True, progress=False, throw=False, **options
        )
        return jax.vmap(model.qpos)(result.q[:, -1])

    first, _ = best_time(final, repeats=1)  # compiles
    run, q1 = best_time(final, repeats=2)
    return first - run, run, np.asarray(q1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="batch 16, the arm only")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--json", default=out_path("rigid.json"))
    args = ap.parse_args()
    batch = 16 if args.quick else args.batch
    with open(ARM) as f:
        systems = {"arm6": ("urdf", f.read())}
    if not args.quick:
        systems.update(
            arm7=("mjcf", arm7_xml()),
            chain16=("mjcf", chain_xml(16)),
            fourbar=("mjcf", fourbar_xml()),
        )
    rng = np.random.default_rng(0)
    rk4 = dict(solver=ukjax.RK4(), stepsize_controller=diffrax.ConstantStepSize(), dt0=DT)
    rows = []
    print(f"batch {batch}, t in [0, {T1}], {machine_info()['device']}, jax {jax.__version__}")
    header = f"{'system':8} {'run':22} {'compile s':>9} {'run s':>8} {'steps/s':>11} {'error':>9}"
    print(header)
    for name, (kind, text) in systems.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = (ukjax.from_urdf if kind == "urdf" else ukjax.from_mjcf)(text)
        m = mujoco.MjModel.from_xml_string(text)
        spread = 0.05 if name == "fourbar" else 0.5
        qpos0 = m.qpos0 + spread * rng.standard_normal((batch, m.nq))
        if name == "fourbar":  # only the crank is free: close the loop from there
            qpos0 = np.asarray(jax.vmap(lambda a: model.initial_state(a)[0])(jnp.asarray(qpos0)))
        _, ref = mujoco_final(m, qpos0, 1e-5) if name != "fourbar" else (None, None)

        def error(q1):
            if ref is None:
                res = jax.vmap(lambda q: model.holonomic(0.0, q))(jnp.asarray(q1))
                return float(jnp.abs(res).max())
            return float(np.abs(q1 - ref).max())

        for label, options in (("ukjax defaults", {}), ("ukjax RK4 dt=1e-3", rk4)):
            tc, tr, q1, steps = ukjax_final(model, jnp.asarray(qpos0), **options)
            rows.append(dict(system=name, run=label, compile_s=tc, run_s=tr, steps=steps,
                             steps_per_s=batch * steps / tr, error=error(q1)))  # fmt: skip
        steps = int(round(T1 / DT))
        tc, tr, q1 = ukjax_sweep_final(model, jnp.asarray(qpos0), **rk4)
        rows.append(dict(system=name, run="ukjax sweep RK4", compile_s=tc, run_s=tr,
                         steps=steps, steps_per_s=batch * steps / tr, error=error(q1)))  # fmt: skip
        tr, q1 = mujoco_final(m, qpos0, DT)
        rows.append(dict(system=name, run="MuJoCo RK4 dt=1e-3", compile_s=0.0, run_s=tr,
                         steps=steps, steps_per_s=batch * steps / tr, error=error(q1)))  # fmt: skip
        for r in rows[-4:]:
            print(
                f"{r['system']:8} {r['run']:22} {r['compile_s']:9.1f} {r['run_s']:8.3f} "
                f"{r['steps_per_s']:11.3g} {r['error']:9.1e}"
            )
    write_json(args.json, dict(machine=machine_info(), batch=batch, rows=rows))


if __name__ == "__main__":
    main()
