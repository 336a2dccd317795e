"""Coulomb friction: creep of a stuck block, and throughput of stick-slip oscillators.

1. **Creep.** A block (1 kg) at rest on a plane inclined so that the load is a fraction
   r = tan(theta) / mu of the friction bound (mu = 0.6), for 10 s. Exact sticking stays put;
   soft-contact engines creep.
   - ukjax: `FrictionBlock` with `ukjax.Coulomb()` (the default), Dopri8, rtol = atol = 1e-12.
   - MuJoCo (PyPI `mujoco`): a 0.2 m cube with a free joint on a plane, gravity tilted by
     theta, friction 0.6, default contact (pyramidal cone, soft constraints), dt = 2e-3;
     with the default solver settings, and with `noslip_iterations=10` (its post-processing
     step against slip). Reported: displacement along the slope over 10 s, and the creep
     speed between t = 1 s and 10 s (after the contact has settled).
2. **Throughput.** B copies of the two blocks of Bajodah 2003, Ex. 5.3 (`TwoBlockFriction`,
   mu_s = 1, mu_k = 0.8) with drive amplitudes in [5, 15] N, t in [0, 6] s, 121 saves: each
   member has its own stick-slip sequence (10-20 events).
   - ukjax: `jit(vmap(simulate))`, Coulomb, Dopri8, rtol = atol = 1e-12; compile time apart.
   - scipy: the event-driven DOP853 reference of tests/references.py (rtol = atol = 1e-12,
     max_step = 0.01 so that a stuck phase's zero right-hand side does not step over the
     force crossing), one trajectory at a time, timed on `--scipy-batch` members.
   Agreement: the largest position difference between the two over the saves.

    python benchmarks/friction.py [--quick] [--batch 1024] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import equinox as eqx
import jax


jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpy as np

import ukjax
from _common import machine_info, out_path, time_compile_and_run, write_json
from ukjax.systems import FrictionBlock, TwoBlockFriction


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from references import two_block_friction_reference  # noqa: E402


MU, T_HOLD, RATIOS = 0.6, 10.0, (0.2, 0.5, 0.9, 0.95)


def ukjax_creep(ratio):
    theta = float(np.arctan(ratio * MU))
    block = FrictionBlock(incline=theta, mu_static=MU, mu_kinetic=MU)
    ts = jnp.linspace(0.0, T_HOLD, 11)
    sol = ukjax.simulate(block, jnp.zeros(2), jnp.zeros(2), ts)
    s = np.asarray(sol.q[:, 0])
    return abs(s[-1] - s[0]), abs(s[-1] - s[1]) / (T_HOLD - 1.0), int(sol.events.count)


def mujoco_creep(ratio, noslip):
    import mujoco

    theta = float(np.arctan(ratio * MU))
    gx, gz = 9.81 * np.sin(theta), -9.81 * np.cos(theta)
    xml = f"""<mujoco><option timestep="2e-3" gravity="{-gx} 0 {gz}"
        noslip_iterations="{noslip}"/>
      <worldbody><geom type="plane" size="5 5 0.1" friction="{MU} 0.005 0.0001"/>
        <body pos="0 0 0.1"><freejoint/>
          <geom type="box" size="0.1 0.1 0.1" mass="1" friction="{MU} 0.005 0.0001"/></body>
      </worldbody></mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    steps = int(round(T_HOLD / model.opt.timestep))
    x = np.empty(steps + 1)
    x[0] = data.qpos[0]
    for i in range(steps):
        mujoco.mj_step(model, data)
        x[i + 1] = data.qpos[0]
    one = int(round(1.0 / model.opt.timestep))
    return abs(x[-1] - x[0]), abs(x[-1] - x[one]) / (T_HOLD - 1.0), mujoco.__version__


def ukjax_batch(amplitudes, ts):
    """(compile seconds, run seconds, solution) of the batch under jit(vmap)."""
    system = TwoBlockFriction(mu_static=1.0, mu_kinetic=0.8)

    def one(a):
        s = eqx.tree_at(lambda x: x.amplitude, system, a)
        return ukjax.simulate(s, jnp.zeros(4), jnp.zeros(4), ts, throw=False)

    return time_compile_and_run(jax.vmap(one), amplitudes, repeats=2)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--scipy-batch", type=int, default=16)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default=out_path("friction.json"))
    args = ap.parse_args()
    info = machine_info()
    print(f"JAX {info['jax']} ({info['cpu_count']} CPUs), float64")

    print(f"\n1. block held on an incline for {T_HOLD:g} s, mu = {MU} (load = r x bound)")
    print(f"{'engine':<36}{'r':>6}{'|dx| over 10 s (m)':>20}{'creep (m/s)':>14}")
    creep_rows, mj_version = [], None
    for r in RATIOS:
        dx, speed, events = ukjax_creep(r)
        creep_rows.append({"engine": "ukjax Coulomb", "ratio": r, "dx": dx, "creep": speed})
        print(f"{'ukjax Coulomb (exact stick)':<36}{r:>6.2f}{dx:>20.1e}{speed:>14.1e}")
        assert events == 0
        for noslip in (0, 10):
            try:
                mdx, mspeed, mj_version = mujoco_creep(r, noslip)
            except ImportError:
                print("(mujoco not installed: pip install '.[bench]')")
                break
            name = "MuJoCo default" if noslip == 0 else "MuJoCo noslip_iterations=10"
            creep_rows.append({"engine": name, "ratio": r, "dx": mdx, "creep": mspeed})
            print(f"{name:<36}{r:>6.2f}{mdx:>20.1e}{mspeed:>14.1e}")

    B = 64 if args.quick else args.batch
    nb = min(4 if args.quick else args.scipy_batch, B)
    ts_np = np.linspace(0.0, 6.0, 121)
    amplitudes = np.linspace(5.0, 15.0, B)
    print(f"\n2. {B} two-block stick-slip oscillators (Bajodah Ex. 5.3), t in [0, 6] s")
    tc, tr, sol = ukjax_batch(jnp.asarray(amplitudes), jnp.asarray(ts_np))
    ok = np.asarray(sol.result._value) == 0
    events = np.asarray(sol.events.count)
    pick = np.linspace(0, B - 1, nb).astype(int)
    t0 = time.perf_counter()
    refs = []
    for i in pick:
        p = dict(m1=0.1, m2=0.1, k1=5.0, k2=5.0, omega=1.5, mu_s=1.0, mu_k=0.8, g=9.81)
        refs.append(two_block_friction_reference(dict(p, amplitude=amplitudes[i]), ts_np)[0])
    t_scipy = (time.perf_counter() - t0) / nb
    q = np.asarray(sol.q)[pick][:, :, [0, 2]]
    dev = float(np.abs(q - np.array(refs)[:, :, :2]).max())
    rows = [
        {"engine": "ukjax jit(vmap), Coulomb", "traj_per_s": B / tr, "compile_s": tc},
        {"engine": "scipy DOP853 + events, loop", "traj_per_s": 1.0 / t_scipy, "compile_s": None},
    ]
    print(f"{'engine':<36}{'traj/s':>10}{'compile s':>11}")
    for row in rows:
        cs = "" if row["compile_s"] is None else f"{row['compile_s']:.1f}"
        print(f"{row['engine']:<36}{row['traj_per_s']:>10,.1f}{cs:>11}")
    speedup = rows[0]["traj_per_s"] / rows[1]["traj_per_s"]
    print(
        f"ukjax / scipy: {speedup:.0f}x; all {int(ok.sum())}/{B} succeeded, "
        f"{events.min()}-{events.max()} events per member; largest position difference "
        f"from scipy on {nb} members: {dev:.1e} m"
    )
    write_json(
        args.json,
        {
            "machine": info,
            "mujoco": mj_version,
            "creep": creep_rows,
            "throughput": {"batch": B, "rows": rows, "speedup": speedup, "max_dev": dev},
        },
    )


if __name__ == "__main__":
    main()
