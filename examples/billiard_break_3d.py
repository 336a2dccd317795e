"""Coulomb friction in 3-D: a ball that slides, then rolls, and a billiard break.

Pool balls (radius 28.575 mm, 170 g) on a cloth with Coulomb friction mu = 0.2, isotropic
cones (`ukjax.systems.BallsOnTable`: each ball's centre and integrated angular velocity,
contacts with the table and between balls, two tangent rows per contact).

**Slide, then roll** (Routh 1905, *Dynamics of a System of Rigid Bodies*, sec. 243): a
ball launched at 2 m/s with sidespin and backspin slides with its slip shrinking along a
fixed line and rolls from t* = 2|u0|/(7 mu g) on; the run's single "stick" event lands on
t* to round-off and the rolling ball does not creep (slip ~1e-16 m/s).

**Break**: a rolling cue ball at 3 m/s into a rack of balls touching each other
(restitution 0.95 between balls, 0 on the cloth; no friction between balls). The
collisions are resolved in time order down the rack (simultaneity by physics, as in
Newton's cradle; the cue ball, still rolling forward, strikes the apex ball a second
time); each ball leaves its collision sliding, turns its slip into rolling (a stick
event), and rolls on. Every impact is a frictional impact on the cloth too: the balls'
table contacts take part in it, and each one's mode afterwards follows from its slip.

    python examples/billiard_break_3d.py [--quick] [--out DIR]
"""

import time

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import ukjax
from _common import example_args, save_figure
from references import ball_slide_then_roll
from ukjax.systems import BallsOnTable


def slip_of(ball: BallsOnTable, qd):
    """Each ball's slip speed on the cloth, (T, count)."""
    qd = np.asarray(qd).reshape(qd.shape[0], ball.count, 6)
    R = ball.radius
    slip = qd[..., :2] + R * np.stack([-qd[..., 4], qd[..., 3]], axis=-1)
    return np.linalg.norm(slip, axis=-1)


def slide_then_roll():
    ball = BallsOnTable(count=1)
    R, mu = ball.radius, ball.mu_static
    v0, w0 = np.array([2.0, 0.0, 0.0]), np.array([25.0, -40.0, 10.0])
    q0 = jnp.array([0.0, 0.0, R, 0.0, 0.0, 0.0])
    ts = jnp.linspace(0.0, 1.0, 401)
    t0 = time.perf_counter()
    sol = ukjax.simulate(ball, q0, jnp.asarray(np.concatenate([v0, w0])), ts)
    jax.block_until_ready(sol.q)
    wall = time.perf_counter() - t0
    assert sol.result == ukjax.RESULTS.successful, sol.status
    v, w, t_star = ball_slide_then_roll(R, ball.g, mu, v0, w0, 1.0)
    t_event = float(sol.events.time[0])
    err = max(
        np.abs(np.asarray(sol.qd[-1, :3]) - v).max(), np.abs(np.asarray(sol.qd[-1, 3:]) - w).max()
    )
    print(f"Slide, then roll (v0 = {v0[:2]} m/s, spin {w0} rad/s, mu = {mu}):")
    print(f"  stick event at t = {t_event:.15f} s; Routh t* = {t_star:.15f} s")
    print(f"  velocity and spin at t = 1 s vs the closed form: max error {err:.1e}")
    print(
        f"  slip while rolling: {slip_of(ball, sol.qd[-1:])[0, 0]:.1e} m/s; "
        f"wall {wall:.1f} s (incl. compile)"
    )
    assert abs(t_event - t_star) < 1e-12 and err < 1e-9
    return ball, sol, t_star


def rack(rows: int, R: float):
    """Ball centres of a triangular rack of `rows` rows, apex at x = 0.6 m, touching."""
    xy = []
    for r in range(rows):
        for j in range(r + 1):
            xy.append((0.6 + r * np.sqrt(3.0) * R, (j - r / 2) * 2 * R))
    return np.array(xy)


def brk(rows: int, T: float):
    racked = rack(rows, BallsOnTable().radius)
    ball = BallsOnTable(count=1 + len(racked))
    R = ball.radius
    xy = np.vstack([[0.0, 0.002], racked])  # the cue ball, slightly off the line
    q0 = np.zeros((ball.count, 6))
    q0[:, :2], q0[:, 2] = xy, R
    qd0 = np.zeros((ball.count, 6))
    qd0[0, 0], qd0[0, 4] = 3.0, 3.0 / R  # cue ball rolling at 3 m/s
    # per contact: the cloth absorbs a landing (e = 0), balls rebound with e = 0.95
    pairs = len(ball._pairs())
    restitution = jnp.concatenate([jnp.zeros(ball.count), jnp.full(pairs, 0.95)])
    ts = jnp.linspace(0.0, T, 301)
    t0 = time.perf_counter()
    sol = ukjax.simulate(
        ball,
        jnp.asarray(q0.ravel()),
        jnp.asarray(qd0.ravel()),
        ts,
        contact=ukjax.Impact(restitution),
        max_events=100,
    )
    jax.block_until_ready(sol.q)
    wall = time.perf_counter() - t0
    assert sol.result == ukjax.RESULTS.successful, sol.status
    ev = sol.events
    n = int(ev.count)
    kinds = [ukjax.EVENT_KINDS[int(k)] for k in ev.kind[:n]]
    print(
        f"Break: cue ball at 3 m/s into a rack of {len(racked)} "
        f"({n} events, wall {wall:.1f} s incl. compile)"
    )
    for i in range(n):
        c = int(ev.contact[i])
        who = (
            f"ball {c}"
            if c < ball.count
            else "balls " + "-".join(map(str, ball._pairs()[c - ball.count]))
        )
        extra = f", impulse {float(ev.normal_impulse[i]):.4f} N s" if kinds[i] == "impact" else ""
        print(f"  {kinds[i]:7s} {who:11s} at t = {float(ev.time[i]):.6f} s{extra}")
    assert kinds.count("impact") >= len(racked)  # the momentum went down the rack
    return ball, sol


def main():
    args = example_args(__doc__, quick_help="a smaller rack, shorter run")
    rows, T = (2, 0.6) if args.quick else (3, 1.5)
    one, single, t_star = slide_then_roll()
    ball, sol = brk(rows, T)

    fig, ax = plt.subplots(1, 3, figsize=(15, 4.4))
    ts = np.asarray(single.ts)
    ax[0].plot(ts, slip_of(one, single.qd)[:, 0], color="C0", label="ukjax")
    ax[0].axvline(t_star, color="C3", ls="--", label="Routh t* = 2|u0|/(7 mu g)")
    ax[0].set(xlabel="time t (s)", ylabel="slip speed (m/s)", title="Slide, then roll")
    ax[0].legend()
    q = np.asarray(sol.q).reshape(len(sol.ts), ball.count, 6)
    for i in range(ball.count):
        ax[1].plot(q[:, i, 0], q[:, i, 1], color=f"C{i}")
        circle = plt.Circle((q[0, i, 0], q[0, i, 1]), ball.radius, color=f"C{i}", fill=False)
        ax[1].add_patch(circle)
        ax[1].plot(q[-1, i, 0], q[-1, i, 1], "o", color=f"C{i}", ms=4)
    ax[1].set(xlabel="x (m)", ylabel="y (m)", title="Break, top view (circles: start)")
    ax[1].set_aspect("equal")
    slips = slip_of(ball, sol.qd)
    for i in range(ball.count):
        ax[2].plot(np.asarray(sol.ts), slips[:, i], color=f"C{i}", label=f"ball {i}")
    ax[2].set(
        xlabel="time t (s)", ylabel="slip speed on the cloth (m/s)", title="Sliding, then rolling"
    )
    ax[2].legend(fontsize=8)
    save_figure(fig, args, "billiard_break_3d.png")


if __name__ == "__main__":
    main()
