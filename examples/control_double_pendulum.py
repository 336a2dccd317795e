"""Open-loop optimal control through the UK equation: swing a Cartesian double pendulum
from hanging at rest to the inverted position at rest, with minimum effort.

The pendulum is written in Cartesian coordinates (two bobs, two rod constraints, UK
equation). Two joint torques tau_1(t) (base) and tau_2(t) (elbow) are piecewise-linear
splines whose knot values are fields of the system, so the same ukjax.fit that identifies
parameters optimises the controls: gradients flow through diffrax and the UK solve.

    minimise  w_T (|q(T) - q_up|^2 + 0.1 |qd(T)|^2) + w_u * mean_t(tau_1^2 + tau_2^2)

    python examples/control_double_pendulum.py [--quick] [--out DIR]
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import optax

import ukjax
from _common import example_args, save_figure


class ActuatedDoublePendulum(ukjax.System):
    """Two point masses on rigid rods, y up; joint torques from spline knots."""

    knots: jnp.ndarray  # (K, 2) torque values at equally spaced times on [0, T]
    masses: jnp.ndarray = eqx.field(default_factory=lambda: jnp.array([1.0, 1.0]))
    lengths: jnp.ndarray = eqx.field(default_factory=lambda: jnp.array([1.0, 1.0]))
    T: float = 3.0
    g: float = 9.81

    def mass_matrix(self, t, q):
        return jnp.diag(jnp.repeat(self.masses, 2))

    def potential_energy(self, t, q):
        return self.g * (self.masses[0] * q[1] + self.masses[1] * q[3])

    def holonomic(self, t, q):
        r1, r2 = q[:2], q[2:]
        d = r2 - r1
        return 0.5 * jnp.stack([r1 @ r1 - self.lengths[0] ** 2, d @ d - self.lengths[1] ** 2])

    def torque(self, t):
        grid = jnp.linspace(0.0, self.T, self.knots.shape[0])
        return jnp.stack([jnp.interp(t, grid, self.knots[:, k]) for k in range(2)])

    def forces(self, t, q, qd):
        tau1, tau2 = self.torque(t)
        r1, d = q[:2], q[2:] - q[:2]
        perp = lambda v: jnp.stack([-v[1], v[0]]) / (v @ v)
        # tau1 turns link 1 about the base; tau2 turns link 2 relative to link 1 (and
        # reacts on link 1). Their power is tau1 w1 + tau2 (w2 - w1).
        return jnp.concatenate([(tau1 - tau2) * perp(r1), tau2 * perp(d)])


def main():
    args = example_args(__doc__)
    T, K = 3.0, 31
    q0 = jnp.array([0.0, -1.0, 0.0, -2.0])  # hanging
    qd0 = jnp.zeros(4)
    q_up = jnp.array([0.0, 1.0, 0.0, 2.0])
    ts = jnp.linspace(0.0, T, 151)
    sim = dict(
        solver=diffrax.Tsit5(),
        stepsize_controller=diffrax.ConstantStepSize(),
        dt0=0.01,
        initial_conditions=ukjax.IgnoreInitial(),
        adjoint=ukjax.ReverseReplayAdjoint(),  # reverse mode only: the faster replay
    )
    w_T, w_u = 10.0, 1e-3

    def loss(system):
        sol = ukjax.simulate(system, q0, qd0, ts, **sim)
        effort = jnp.mean(jax.vmap(lambda t: jnp.sum(system.torque(t) ** 2))(ts))
        terminal = jnp.sum((sol.q[-1] - q_up) ** 2) + 0.1 * jnp.sum(sol.qd[-1] ** 2)
        return w_T * terminal + w_u * effort

    key = jax.random.PRNGKey(0)
    start = ActuatedDoublePendulum(knots=0.5 * jax.random.normal(key, (K, 2)), T=T)
    res = ukjax.fit(
        start,
        loss,
        params=["knots"],
        positive=False,
        optimiser=optax.lbfgs(),
        max_steps=30 if args.quick else 150,
        progress=25,
    )
    sys_opt = res.system
    sol = ukjax.simulate(sys_opt, q0, qd0, ts, **sim)
    tau = jax.vmap(sys_opt.torque)(ts)
    err = float(jnp.linalg.norm(sol.q[-1] - q_up))
    print(
        f"L-BFGS: {res.steps} steps, objective {res.losses[0]:.3g} -> {res.loss:.3g} "
        f"(converged: {res.converged}, {res.message})"
    )
    print(
        f"final position error |q(T) - q_up| = {err:.2e} m, |qd(T)| = "
        f"{float(jnp.linalg.norm(sol.qd[-1])):.2e} m/s, effort mean(tau^2) = "
        f"{float(jnp.mean(jnp.sum(tau**2, axis=1))):.2f} N^2 m^2"
    )
    d = ukjax.diagnostics(sys_opt, sol)
    print(f"max constraint residual along the optimised motion: {float(d.max_residual()):.1e}")

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
    axes[0].semilogy(res.losses)
    axes[0].set(xlabel="L-BFGS step", title="objective")
    axes[1].plot(ts, tau[:, 0], label="tau_1 (base)")
    axes[1].plot(ts, tau[:, 1], label="tau_2 (elbow)")
    axes[1].set(xlabel="t (s)", ylabel="N m", title="optimised joint torques")
    axes[1].legend()
    for i in range(0, len(ts), 10):
        c = plt.cm.viridis(i / len(ts))
        x = [0.0, float(sol.q[i, 0]), float(sol.q[i, 2])]
        y = [0.0, float(sol.q[i, 1]), float(sol.q[i, 3])]
        axes[2].plot(x, y, "-o", color=c, ms=3, lw=1)
    axes[2].set(aspect="equal", title="swing-up (colour: time)", xlabel="x (m)", ylabel="y (m)")
    save_figure(fig, args, "control_double_pendulum.png")


if __name__ == "__main__":
    main()
