"""ukjax against MuJoCo C (PyPI `mujoco`) on the same CPU: throughput in system-steps per
second at an equal time step and number of steps, and the accuracy of each against a tight
independent reference.

Systems:
- N-link planar pendulum chain (point masses m = 1 at the ends of massless links l = 1),
  N = 2 ... 32. ukjax: the chain as a user writes it (`UserChain` below: the number of
  links an `int` field, Cartesian coordinates, n = 2N, N holonomic distance constraints).
  MuJoCo: a chain of hinge joints (minimal coordinates, no constraint), each body a point
  mass (inertia 1e-12 about its centre).
  The same chain also in MuJoCo's own coordinates as a user writes it (`AngleChain`:
  absolute angles, n = N, no constraint, the kinetic energy from the bobs' velocities, so
  M(q) and the velocity terms by automatic differentiation): row "angles"; and with its
  mass matrix written in closed form as well (`AngleChainMass`, products of the angles'
  sines and cosines; the velocity terms still from the kinetic energy): row "angles, M".
- Closed four-bar linkage (uniform rods, l = (1, 3, 2.5), ground link 3, m = 1).
  ukjax: `FourBarLinkage` (3 absolute angles, 2 loop-closure constraints). MuJoCo: an
  open chain of three hinges closed by a `connect` equality constraint between a site at
  the rocker's end and a site at the ground pivot (MuJoCo's soft constraint, default
  solref = (0.02, 1), and a stiffer (0.002, 1)).

Both run dt = 1e-3 for 1000 steps (t in [0, 1]) from a batch of initial states released
from rest (batch 1024, fewer for long chains: min(1024, 8192 / N)). ukjax at the defaults
a user gets, except the method and step that make the comparison like for like:
`solver=ukjax.RK4()` (the classical 4-stage method, as MuJoCo's RK4) at that constant step,
`jax.jit(jax.vmap(simulate))`, float64. So the default UK solver (from n = 9 the
structure of M and of the Jacobian found from the program, :mod:`ukjax._structure`), the
default `Projection` after every step and the default run-time checks (`throw=True`).
MuJoCo: `mujoco.rollout` (C++ thread pool, one `MjData` per thread, 2 threads) with its
RK4 integrator, and with its default semi-implicit Euler (1 evaluation per step).
Each engine's time is the best of 3 timed runs of the whole batch after a warm-up run
(a single timed run on the 2-core box moved by up to 1.5x between runs of the same
program); ukjax's compile is timed apart, once.

Reference: scipy `solve_ivp(DOP853, rtol = atol = 1e-12)` on hand-written minimal-coordinate
chain equations and on a hand-written Lagrange-multiplier (KKT) form of the four-bar.
Accuracy = max over the batch of the largest joint-position error at t = 1, and the largest
constraint violation (four-bar: |D' - D| at t = 1).

    python benchmarks/mujoco_compare.py [--quick] [--batch 1024] [--json FILE]
"""

from __future__ import annotations

import argparse
import time

import jax


jax.config.update("jax_enable_x64", True)
import diffrax
import jax.numpy as jnp
import mujoco
import numpy as np
from mujoco import rollout
from scipy.integrate import solve_ivp

import ukjax
from _common import best_time, machine_info, out_path, write_json
from ukjax.systems import FourBarLinkage


DT, STEPS = 1e-3, 1000
REPEATS = 3  # timed runs of each engine after its warm-up: the best is reported
G = 9.81


# ----------------------------------------------------------------------------- references
def chain_minimal_rhs(N, m=1.0, l=1.0, g=G):
    """Point-mass chain in absolute angles from the downward vertical:
    sum_j mu_ij l^2 [cos(ti - tj) tj'' + sin(ti - tj) tj'^2] + g l mu_i sin ti = 0,
    mu_ij = m * (N - max(i, j)) (the mass below the later of the two joints)."""
    idx = np.arange(N)
    mu = m * (N - np.maximum.outer(idx, idx))

    def rhs(t, s):
        th, w = s[:N], s[N:]
        d = th[:, None] - th[None, :]
        M = mu * l * l * np.cos(d)
        f = -(mu * l * l * np.sin(d)) @ (w**2) - g * l * np.diag(mu) * np.sin(th)
        return np.concatenate([w, np.linalg.solve(M, f)])

    return rhs


def chain_points(theta, l=1.0):
    """Bob positions (..., N, 2) from absolute angles (..., N)."""
    return np.stack([np.cumsum(l * np.sin(theta), -1), np.cumsum(-l * np.cos(theta), -1)], -1)


def fourbar_kkt_rhs(fb: FourBarLinkage):
    """Four-bar in absolute angles by Lagrange multipliers, written out by hand:
    [M J^T; J 0] [th''; lam] = [-h; gamma]."""
    l = np.array([fb.l1, fb.l2, fb.l3], float)
    m = np.array([fb.m1, fb.m2, fb.m3], float)
    c = np.array([[l[0] / 2, 0, 0], [l[0], l[1] / 2, 0], [l[0], l[1], l[2] / 2]])  # c[i, j]
    W = np.einsum("i,ij,ik->jk", m, c, c)  # sum_i m_i c_ij c_ik
    I = m * l**2 / 12
    gy = np.einsum("i,ij->j", m, c) * fb.g

    def rhs(t, s):
        th, w = s[:3], s[3:]
        d = th[:, None] - th[None, :]
        M = W * np.cos(d) + np.diag(I)
        h = (W * np.sin(d)) @ (w**2) + gy * np.cos(th)  # sum_k W_jk sin(th_j - th_k) w_k^2 + dV
        J = np.stack([-l * np.sin(th), l * np.cos(th)])
        gamma = np.array([np.sum(l * np.cos(th) * w**2), np.sum(l * np.sin(th) * w**2)])
        K = np.block([[M, J.T], [J, np.zeros((2, 2))]])
        sol = np.linalg.solve(K, np.concatenate([-h, gamma]))
        return np.concatenate([w, sol[:3]])

    return rhs


def reference(rhs, y0):
    out = solve_ivp(rhs, (0.0, DT * STEPS), y0, method="DOP853", rtol=1e-12, atol=1e-12)
    assert out.success, out.message
    return out.y[:, -1]


# ----------------------------------------------------------------------------- MuJoCo models
def chain_xml(N, integrator):
    body = ""
    for i in reversed(range(N)):
        pos = "0 0 0" if i == 0 else "0 0 -1"
        body = (
            f'<body name="b{i}" pos="{pos}"><joint type="hinge" axis="0 -1 0"/>'
            f'<inertial pos="0 0 -1" mass="1" diaginertia="1e-12 1e-12 1e-12"/>{body}</body>'
        )
    return (
        f'<mujoco><option timestep="{DT}" integrator="{integrator}" gravity="0 0 {-G}">'
        f'<flag contact="disable"/></option><worldbody>{body}</worldbody></mujoco>'
    )


def fourbar_xml(fb, integrator, solref):
    def rod(name, length, inner=""):
        I = 1.0 * length**2 / 12
        return (
            f'<joint type="hinge" axis="0 -1 0"/>'
            f'<inertial pos="{length / 2} 0 0" mass="1" diaginertia="1e-12 {I} {I}"/>{inner}'
        )

    l1, l2, l3 = float(fb.l1), float(fb.l2), float(fb.l3)
    rocker = (
        f'<body name="rocker" pos="{l2} 0 0">{rod("r", l3)}<site name="tip" pos="{l3} 0 0"/></body>'
    )
    coupler = f'<body name="coupler" pos="{l1} 0 0">{rod("c", l2, rocker)}</body>'
    crank = f'<body name="crank">{rod("k", l1, coupler)}</body>'
    return (
        f'<mujoco><option timestep="{DT}" integrator="{integrator}" gravity="0 0 {-G}">'
        f'<flag contact="disable"/></option><worldbody><site name="D" pos="{float(fb.d)} 0 0"/>'
        f'{crank}</worldbody><equality><connect site1="tip" site2="D" solref="{solref}"/>'
        f"</equality></mujoco>"
    )


def mujoco_run(xml, qpos0, nthread=2):
    """Roll out every initial qpos (B, nq) from rest for STEPS steps; (seconds, final qpos)."""
    model = mujoco.MjModel.from_xml_string(xml)
    data = [mujoco.MjData(model) for _ in range(nthread)]
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    init = np.empty((len(qpos0), mujoco.mj_stateSize(model, spec)))
    for i, qp in enumerate(qpos0):
        d = data[0]
        mujoco.mj_resetData(model, d)
        d.qpos[:] = qp
        mujoco.mj_forward(model, d)
        mujoco.mj_getState(model, d, init[i], spec)
    state = np.empty((len(qpos0), STEPS, init.shape[1]))
    rollout.rollout(model, data, init[:2], nstep=STEPS, state=state[:2])  # warm-up
    run = lambda: rollout.rollout(model, data, init, nstep=STEPS, state=state)
    seconds, _ = best_time(run, repeats=REPEATS)
    assert np.allclose(state[:, -1, 0], STEPS * DT), "rollout did not end at t = STEPS * DT"
    return seconds, state[:, -1, 1 : 1 + model.nq]  # FULLPHYSICS = [time, qpos, qvel, ...]


# ----------------------------------------------------------------------------- ukjax runs
class UserChain(ukjax.System):
    """The N-link chain as a user writes it: bobs (x_i, y_i), unit links, g = 9.81."""

    links: int
    mass: float = 1.0

    def mass_matrix(self, t, q):
        return self.mass * jnp.eye(2 * self.links)

    def potential_energy(self, t, q):
        return G * self.mass * jnp.sum(q[1::2])

    def holonomic(self, t, q):
        p = q.reshape(self.links, 2)
        prev = jnp.concatenate([jnp.zeros((1, 2), q.dtype), p[:-1]])
        return jnp.sum((p - prev) ** 2, axis=1) - 1.0


class AngleChain(ukjax.System):
    """The same chain in MuJoCo's coordinates, as a user writes it: absolute angles from
    the downward vertical (n = N, no constraint), the kinetic energy from the bobs'
    velocities (M and the velocity terms by automatic differentiation)."""

    links: int
    mass: float = 1.0

    def kinetic_energy(self, t, q, qd):
        vx, vy = jnp.cumsum(jnp.cos(q) * qd), jnp.cumsum(jnp.sin(q) * qd)
        return 0.5 * self.mass * jnp.sum(vx**2 + vy**2)

    def potential_energy(self, t, q):
        return -G * self.mass * jnp.sum(jnp.cumsum(jnp.cos(q)))


class AngleChainMass(AngleChain):
    """`AngleChain` with its mass matrix also written in closed form, as a user who knows
    it writes it: M_ij = m (N - max(i, j)) cos(q_i - q_j) from the n sines and cosines of
    the angles (cos(q_i - q_j) = cos q_i cos q_j + sin q_i sin q_j). ukjax then takes M
    from `mass_matrix` and only the velocity terms from `kinetic_energy` (one tangent
    instead of the Hessian's N + 1)."""

    def mass_matrix(self, t, q):
        i = jnp.arange(self.links)
        weight = self.links - jnp.maximum(i[:, None], i[None, :])
        c, s = jnp.cos(q), jnp.sin(q)
        return self.mass * weight * (c[:, None] * c[None, :] + s[:, None] * s[None, :])


def ukjax_run(system, q0, qd0):
    """Fixed-step classical RK4, dt = DT, STEPS steps, batched, otherwise the defaults;
    (compile s, run s, final q)."""
    ts = jnp.array([0.0, DT * STEPS])
    rk4 = dict(solver=ukjax.RK4(), stepsize_controller=diffrax.ConstantStepSize(), dt0=DT)
    one = lambda a, b: ukjax.simulate(system, a, b, ts, max_steps=STEPS + 10, **rk4).q[-1]
    fn = jax.jit(jax.vmap(one))
    t0 = time.perf_counter()
    compiled = fn.lower(q0, qd0).compile()
    t_compile = time.perf_counter() - t0
    compiled(q0, qd0).block_until_ready()
    seconds, q1 = best_time(compiled, q0, qd0, repeats=REPEATS)
    return t_compile, seconds, np.asarray(q1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--links", default="2,4,8,16,32")
    ap.add_argument("--refs", type=int, default=8, help="reference trajectories per system")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default=out_path("mujoco.json"))
    args = ap.parse_args()
    if args.quick:
        args.batch, args.links, args.refs = 64, "2,4", 2
    B_max = args.batch
    info = machine_info()
    print(
        f"JAX {info['jax']} ({info['cpu_count']} CPUs), MuJoCo {mujoco.__version__}; dt = {DT}, "
        f"{STEPS} steps, batch up to {B_max}; throughput in system-steps/s (compile excluded)"
    )
    hdr = (
        f"{'system':<22} {'engine':<32} {'steps/s':>12} {'compile s':>9} "
        f"{'max pos err':>11} {'max constr':>10}"
    )
    print(hdr)
    rows = []
    rng = np.random.default_rng(0)

    def report(system, engine, seconds, compile_s, pos_err, constr):
        row = {
            "system": system,
            "engine": engine,
            "batch": B,
            "steps_per_s": B * STEPS / seconds,
            "seconds": seconds,
            "compile_s": compile_s,
            "max_position_error": pos_err,
            "max_constraint_violation": constr,
        }
        rows.append(row)
        cs = "" if compile_s is None else f"{compile_s:.2f}"
        print(
            f"{system:<22} {engine:<32} {row['steps_per_s']:12,.0f} {cs:>9} {pos_err:11.1e} "
            f"{constr:10.1e}",
            flush=True,
        )
        return row

    for N in (int(x) for x in args.links.split(",")):
        name = f"chain N={N}"
        B = min(B_max, max(8192 // N, 2))
        ref_idx = np.linspace(0, B - 1, args.refs).astype(int)
        theta0 = 0.3 + 0.4 * rng.random((B, N))  # released from rest
        refs = np.array(
            [
                reference(chain_minimal_rhs(N), np.concatenate([theta0[i], np.zeros(N)]))
                for i in ref_idx
            ]
        )
        ref_pts = chain_points(refs[:, :N])
        chain = UserChain(links=N)
        q0 = jnp.asarray(chain_points(theta0).reshape(B, 2 * N))
        tc, tr, q1 = ukjax_run(chain, q0, jnp.zeros_like(q0))
        pts = q1.reshape(B, N, 2)
        link = np.linalg.norm(
            np.diff(np.concatenate([np.zeros((B, 1, 2)), pts], 1), axis=1), axis=2
        )
        uk = report(
            name,
            "ukjax RK4 (defaults)",
            tr,
            tc,
            float(np.abs(pts[ref_idx] - ref_pts).max()),
            float(np.abs(link - 1).max()),
        )
        th0 = jnp.asarray(theta0)
        ours = [uk]
        for model, variant in ((AngleChain, "angles"), (AngleChainMass, "angles, M")):
            tc, tr, th1 = ukjax_run(model(links=N), th0, jnp.zeros_like(th0))
            err = float(np.abs(chain_points(th1)[ref_idx] - ref_pts).max())
            ours.append(report(name, f"ukjax RK4 (defaults), {variant}", tr, tc, err, 0.0))
        for integ, label in (("RK4", "MuJoCo RK4"), ("Euler", "MuJoCo Euler")):
            rel0 = np.diff(np.concatenate([np.zeros((B, 1)), theta0], 1), axis=1)  # relative angles
            sec, qpos = mujoco_run(chain_xml(N, integ), rel0)
            mj_pts = chain_points(np.cumsum(qpos, axis=1))
            r = report(name, label, sec, None, float(np.abs(mj_pts[ref_idx] - ref_pts).max()), 0.0)
            if integ == "RK4":
                for row in ours:
                    row["throughput_ratio_vs_mujoco_rk4"] = row["steps_per_s"] / r["steps_per_s"]

    fb = FourBarLinkage()
    name = "four-bar (closed loop)"
    B = B_max
    ref_idx = np.linspace(0, B - 1, args.refs).astype(int)
    crank = 0.5 + 1.0 * rng.random(B)
    states = [fb.initial_state(float(c), 0.0) for c in crank]
    q0 = jnp.stack([s[0] for s in states])
    qd0 = jnp.stack([s[1] for s in states])
    refs = np.array(
        [reference(fourbar_kkt_rhs(fb), np.concatenate([q0[i], qd0[i]])) for i in ref_idx]
    )
    tc, tr, q1 = ukjax_run(fb, q0, qd0)
    joints = lambda th: np.stack(
        [
            np.cumsum(np.array([fb.l1, fb.l2, fb.l3]) * np.cos(th), -1),
            np.cumsum(np.array([fb.l1, fb.l2, fb.l3]) * np.sin(th), -1),
        ],
        -1,
    )
    ref_j = joints(refs[:, :3])
    close = lambda j: float(np.abs(j[:, -1] - np.array([fb.d, 0.0])).max())
    uk = report(
        name,
        "ukjax RK4 (defaults)",
        tr,
        tc,
        float(np.abs(joints(q1)[ref_idx] - ref_j).max()),
        close(joints(q1)),
    )
    rel0 = np.stack([q0[:, 0], q0[:, 1] - q0[:, 0], q0[:, 2] - q0[:, 1]], axis=1)
    for integ, solref, label in (
        ("RK4", "0.02 1", "MuJoCo RK4, solref 0.02"),
        ("RK4", "0.002 1", "MuJoCo RK4, solref 0.002"),
        ("Euler", "0.02 1", "MuJoCo Euler, solref 0.02"),
    ):
        sec, qpos = mujoco_run(fourbar_xml(fb, integ, solref), np.asarray(rel0))
        j = joints(np.cumsum(qpos, axis=1))
        r = report(name, label, sec, None, float(np.abs(j[ref_idx] - ref_j).max()), close(j))
        if label == "MuJoCo RK4, solref 0.02":
            uk["throughput_ratio_vs_mujoco_rk4"] = uk["steps_per_s"] / r["steps_per_s"]
    print(
        "\nukjax / MuJoCo RK4 throughput:",
        ", ".join(
            f"{r['system']}{_variant(r['engine'])}: {r['throughput_ratio_vs_mujoco_rk4']:.2f}x"
            for r in rows
            if "throughput_ratio_vs_mujoco_rk4" in r
        ),
    )
    slope = scaling(rows)
    write_json(
        args.json,
        {
            "machine": info,
            "mujoco": mujoco.__version__,
            "dt": DT,
            "steps": STEPS,
            "timed_runs_best_of": REPEATS,
            "rows": rows,
            "loglog_slope_time_per_step_vs_N": slope,
        },
    )


def _variant(engine: str) -> str:
    """The chain variant a ukjax row measures, for the summary line."""
    variant = engine.partition("(defaults), ")[2]  # "" for the Cartesian chain
    return {"angles": " (angles)", "angles, M": " (angles, closed-form M)"}.get(variant, "")


def scaling(rows) -> dict:
    """Log-log slope of the time per system-step against N (chains, N >= 4) for each
    engine, printed, and plotted next to the JSON when matplotlib is available."""
    engines = sorted({r["engine"] for r in rows if r["system"].startswith("chain")})
    slopes, curves = {}, {}
    for eng in engines:
        pts = [
            (int(r["system"].split("=")[1]), 1.0 / r["steps_per_s"])
            for r in rows
            if r["engine"] == eng and r["system"].startswith("chain")
        ]
        curves[eng] = sorted(pts)
        big = [(n, t) for n, t in pts if n >= 4]
        if len(big) >= 2:
            x, y = np.log([n for n, _ in big]), np.log([t for _, t in big])
            slopes[eng] = float(np.polyfit(x, y, 1)[0])
    print("log-log slope of time per step vs N (N >= 4):", slopes)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return slopes
    fig, ax = plt.subplots(figsize=(5, 3.6))
    for eng, pts in curves.items():
        ax.loglog([n for n, _ in pts], [t * 1e6 for _, t in pts], "o-", label=eng)
    ax.set_xlabel("links N")
    ax.set_ylabel("µs per system-step (batched)")
    ax.set_title("N-link chain, RK4, dt = 1e-3")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_path("mujoco_chain_scaling.png"), dpi=120)
    return slopes


if __name__ == "__main__":
    main()
