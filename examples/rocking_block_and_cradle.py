"""Several contacts at once: Housner's rocking block and Newton's cradle.

**Rocking block** (Housner 1963, *The behavior of inverted pendulum structures during
earthquakes*, Bull. Seismol. Soc. Am. 53, 403): a rigid block of half-width b = 0.2 m and
half-height h = 0.6 m, q = (x, y, theta), released tilted at 0.15 rad on a smooth rigid
floor (`ukjax.Impact(0)`). Its two bottom corners are unilateral contacts. At each impact
the contacts' complementarity problem lets the old pivot lift (it would need a pulling
impulse to stay down) and the block rocks on about the other corner with
theta'+/theta'- = (h^2 - 2 b^2)/(h^2 + 4 b^2), until it comes to rest flat on both corners.

**Newton's cradle**: three pendulums (L = 1 m, bobs of radius 0.1 m hung 1e-9 m apart);
the first is released from 0.3 rad. Simultaneity is decided by physics (touching *and*
closing), so the collisions are resolved one after the other and the momentum passes down
the line: the first two bobs stop, the third swings out.

    python examples/rocking_block_and_cradle.py [--quick] [--out DIR]
"""

import time

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import ukjax
from _common import example_args, save_figure


class Block(ukjax.System):
    """Planar rigid block on a floor: q = (x, y, theta); contacts at the bottom corners."""

    mass: float = 1.0
    b: float = 0.2
    h: float = 0.6
    g: float = 9.81

    def mass_matrix(self, t, q):
        inertia = self.mass * (self.b**2 + self.h**2) / 3
        return jnp.diag(jnp.array([self.mass, self.mass, inertia]))

    def forces(self, t, q, qd):
        return jnp.array([0.0, -self.mass * self.g, 0.0])

    def unilateral(self, t, q):
        _, y, th = q
        side = jnp.array([-1.0, 1.0])
        return y + side * self.b * jnp.sin(th) - self.h * jnp.cos(th)


class Cradle(ukjax.System):
    """n pendulums of length L hung at spacing d (q: angles); bobs of radius r."""

    n: int = 3
    L: float = 1.0
    d: float = 0.2 + 1e-9
    r: float = 0.1
    g: float = 9.81

    def kinetic_energy(self, t, q, qd):
        return 0.5 * self.L**2 * jnp.sum(qd**2)

    def potential_energy(self, t, q):
        return -self.g * self.L * jnp.sum(jnp.cos(q))

    def unilateral(self, t, q):
        x = self.d * jnp.arange(self.n) + self.L * jnp.sin(q)
        y = -self.L * jnp.cos(q)
        return jnp.hypot(x[1:] - x[:-1], y[1:] - y[:-1]) - 2 * self.r


def rocking(T):
    block, th0 = Block(), 0.15
    q0 = jnp.array([0.0, block.b * np.sin(th0) + block.h * np.cos(th0), th0])
    ts = jnp.linspace(0.0, T, 1001)
    t0 = time.perf_counter()
    sol = ukjax.simulate(block, q0, jnp.zeros(3), ts, contact=ukjax.Impact(0.0), max_events=80)
    jax.block_until_ready(sol.q)
    wall = time.perf_counter() - t0
    assert sol.result == ukjax.RESULTS.successful, sol.status
    ev = sol.events
    n = int(ev.count)
    kinds = [ukjax.EVENT_KINDS[int(k)] for k in ev.kind[:n]]
    speeds = np.abs(np.asarray(ev.speed_before[:n]))
    impacts = [i for i, k in enumerate(kinds) if k == "impact"]
    ratios = speeds[impacts][1:6] / speeds[impacts][:5]
    housner = (block.h**2 - 2 * block.b**2) / (block.h**2 + 4 * block.b**2)
    print(f"Rocking block (b = {block.b} m, h = {block.h} m, theta0 = {th0} rad), smooth floor:")
    print(
        f"  {len(impacts)} impacts, at rest on both corners from t = {float(ev.time[n - 1]):.6f} s"
    )
    print(f"  theta' ratios at the first impacts: {np.array2string(ratios, precision=10)}")
    print(
        f"  Housner (h^2 - 2b^2)/(h^2 + 4b^2) = {housner:.10f}; wall {wall:.2f} s (incl. compile)"
    )
    assert np.allclose(ratios, housner, rtol=1e-8)
    assert bool(jnp.all(sol.engaged[-1]))
    return sol, np.asarray(ev.time[:n])[impacts], housner


def cradle(T):
    system = Cradle()
    ts = jnp.linspace(0.0, T, 801)
    sol = ukjax.simulate(
        system,
        jnp.array([-0.3, 0.0, 0.0]),
        jnp.zeros(3),
        ts,
        contact=ukjax.Impact(1.0),
        max_events=40,
    )
    assert sol.result == ukjax.RESULTS.successful, sol.status
    ev = sol.events
    n = int(ev.count)
    print("Newton's cradle (3 pendulums, e = 1):")
    for i in range(n):
        print(
            f"  {ukjax.EVENT_KINDS[int(ev.kind[i])]} of bobs {int(ev.contact[i]) + 1}-"
            f"{int(ev.contact[i]) + 2} at t = {float(ev.time[i]):.6f} s, closing speed "
            f"{-float(ev.speed_before[i]):.6f} m/s"
        )
    assert list(np.asarray(ev.contact[:2])) == [0, 1]  # one after the other, down the line
    return sol


def main():
    args = example_args(__doc__, quick_help="shorter runs")
    T_block, T_cradle = (0.7, 1.2) if args.quick else (1.0, 4.0)
    block_sol, impact_times, housner = rocking(T_block)
    cradle_sol = cradle(T_cradle)

    fig, ax = plt.subplots(1, 3, figsize=(15, 4.2))
    ts, th = np.asarray(block_sol.ts), np.asarray(block_sol.q[:, 2])
    ax[0].plot(ts, th, color="C0")
    ax[0].plot(impact_times, np.zeros_like(impact_times), "x", color="C3", label="impacts")
    ax[0].set(xlabel="time t (s)", ylabel="tilt theta (rad)", title="Rocking block, smooth floor")
    ax[0].legend(loc="upper right")
    speeds = np.abs(np.asarray(block_sol.events.speed_before[: len(impact_times)]))
    k = np.arange(1, len(speeds))
    deviation = np.abs(speeds[1:] / speeds[:-1] / housner - 1.0)
    ax[1].semilogy(k, np.maximum(deviation, 1e-16), "o", color="C0")
    ax[1].set(
        xlabel="impact number k",
        ylabel="|ratio_k / Housner - 1| (-)",
        title=f"theta' ratio at impact k vs Housner's {housner:.4f}",
    )
    tc = np.asarray(cradle_sol.ts)
    for i in range(3):
        ax[2].plot(tc, np.asarray(cradle_sol.q[:, i]), label=f"bob {i + 1}")
    ax[2].set(xlabel="time t (s)", ylabel="angle (rad)", title="Newton's cradle (e = 1)")
    ax[2].legend(loc="lower right")
    save_figure(fig, args, "rocking_block_and_cradle.png")


if __name__ == "__main__":
    main()
