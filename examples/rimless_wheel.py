"""A rimless wheel walks down a slope to its limit cycle (McGeer 1990, *Passive dynamic
walking*, Int. J. Robot. Res. 9(2); Coleman, Chatterjee & Ruina 1997, *Motions of a
rimless spoked wheel*, Dyn. Stab. Syst. 12).

The wheel: a hub of mass m = 1 (inertia I = 0.05 about it) on n = 8 massless spokes of
length l = 1 (half the angle between spokes, alpha = pi/8), q = (x, y, theta) in the
frame of a slope of gamma = 0.08 rad (x down the slope, gravity tilted), every spoke tip a
unilateral contact with Coulomb friction 1.5 (`ukjax.Impact(0)`: plastic feet). At each
step the new foot lands: the impact's complementarity problem lets the old foot lift (it
would need a pulling impulse) and the new one stick, so angular momentum about the new
foot is kept: omega+ = rho omega-, rho = (I + m l^2 cos 2 alpha) / (I + m l^2). In stance
the wheel is an inverted pendulum that gains 2 m g l sin(alpha) sin(gamma) per step:
omega-_{k+1}^2 = rho^2 omega-_k^2 + 4 m g l sin(alpha) sin(gamma) / (I + m l^2), whose
fixed point is the limit cycle, omega-* = sqrt(4 m g l sin a sin g / ((I + m l^2)(1 - rho^2))).

    python examples/rimless_wheel.py [--quick] [--out DIR]
"""

import time

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import ukjax
from _common import example_args, save_figure


class RimlessWheel(ukjax.System):
    """Hub (x, y) and angle theta in the slope frame; spoke i at theta + 2 alpha i from
    the slope's normal. Opposite spokes (n even) share a contact: the lower tip of the
    pair, g = y - l |cos theta_i| (the kink, a horizontal pair, is far from the ground),
    so n spokes need n / 2 contacts; tangent rows: the lower tips' speeds along the
    slope."""

    n: int = 8
    mass: float = 1.0
    inertia: float = 0.05
    length: float = 1.0
    slope: float = 0.08
    g: float = 9.81
    mu: float = 1.5

    def mass_matrix(self, t, q):
        return jnp.diag(jnp.array([self.mass, self.mass, self.inertia]))

    def forces(self, t, q, qd):
        weight = self.mass * self.g
        return jnp.array([weight * jnp.sin(self.slope), -weight * jnp.cos(self.slope), 0.0])

    def _pairs(self, q):
        return q[2] + 2 * np.pi / self.n * jnp.arange(self.n // 2)

    def unilateral(self, t, q):
        return q[1] - self.length * jnp.abs(jnp.cos(self._pairs(q)))

    def friction(self, t, q):
        # the lower tip of each pair: x + l sin(theta_i) sgn(cos theta_i)
        c = jnp.cos(self._pairs(q))
        lever = self.length * jnp.abs(c)
        k = self.n // 2
        return jnp.stack([jnp.ones(k), jnp.zeros(k), lever], axis=1), self.mu, self.mu


def limit_cycle(w: RimlessWheel):
    """(rho, c, omega-*): the impact ratio, the energy term and the fixed point."""
    a, J = np.pi / w.n, w.inertia + w.mass * w.length**2
    rho = (w.inertia + w.mass * w.length**2 * np.cos(2 * a)) / J
    c = 4 * w.mass * w.g * w.length * np.sin(a) * np.sin(w.slope) / J
    return rho, c, np.sqrt(c / (1 - rho**2))


def main():
    args = example_args(__doc__, quick_help="fewer steps")
    wheel = RimlessWheel()
    a = np.pi / wheel.n
    T = 3.0 if args.quick else 20.0
    # stance on spoke 0, just landed (theta = alpha), rolling downhill at 1.3 rad/s
    q0 = jnp.array([0.0, wheel.length * np.cos(a), a])
    # the hub turns about the planted foot: velocity omega z x (hub - foot)
    qd0 = 1.3 * jnp.array([wheel.length * np.cos(a), wheel.length * np.sin(a), -1.0])
    ts = jnp.linspace(0.0, T, 2001)
    t0 = time.perf_counter()
    sol = ukjax.simulate(wheel, q0, qd0, ts, contact=ukjax.Impact(0.0), max_events=200)
    jax.block_until_ready(sol.q)
    wall = time.perf_counter() - t0
    assert sol.result == ukjax.RESULTS.successful, sol.status
    ev = sol.events
    n = int(ev.count)
    kinds = np.array([ukjax.EVENT_KINDS[int(k)] for k in ev.kind[:n]])
    impacts = np.flatnonzero(kinds == "impact")
    # the landing foot's normal speed is -2 l sin(alpha) omega- (rotation about the old foot)
    w_minus = -np.asarray(ev.speed_before)[impacts] / (2 * wheel.length * np.sin(a))
    rho, c, w_star = limit_cycle(wheel)
    residual = w_minus[1:] ** 2 - (rho**2 * w_minus[:-1] ** 2 + c)
    print(f"Rimless wheel (n = {wheel.n}, slope {wheel.slope} rad): {len(impacts)} steps in {T} s")
    print(f"  other events: {sorted(set(kinds) - {'impact'}) or 'none'}; wall {wall:.1f} s")
    print(
        "  step map omega-_(k+1)^2 = rho^2 omega-_k^2 + c: max residual "
        f"{np.abs(residual).max():.1e}"
    )
    print(
        f"  omega- at the last steps {np.array2string(w_minus[-3:], precision=8)}; "
        f"limit cycle {w_star:.8f} rad/s"
    )
    assert np.abs(residual).max() < 1e-8
    if not args.quick:
        assert abs(w_minus[-1] - w_star) < 1e-4 * w_star

    fig, ax = plt.subplots(1, 3, figsize=(15, 4.2))
    t = np.asarray(sol.ts)
    ax[0].plot(t, np.asarray(sol.qd[:, 2]), color="C0")
    ax[0].set(xlabel="time t (s)", ylabel="theta' (rad/s)", title="Angular velocity")
    ax[1].plot(np.arange(len(w_minus)), w_minus, "o-", color="C0", label="ukjax")
    ax[1].axhline(w_star, color="C3", ls="--", label="limit cycle (closed form)")
    ax[1].set(xlabel="step k", ylabel="omega- at landing (rad/s)", title="To the limit cycle")
    ax[1].legend()
    ax[2].semilogy(np.arange(1, len(w_minus)), np.maximum(np.abs(residual), 1e-17), "o", color="C0")
    ax[2].set(
        xlabel="step k",
        ylabel="|step-map residual| (rad^2/s^2)",
        title="Each step vs the closed form",
    )
    save_figure(fig, args, "rimless_wheel.png")


if __name__ == "__main__":
    main()
