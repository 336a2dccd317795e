"""Seed 004 §7.5 (Bajodah 2003, Ex. 7.2): the particle on the cone r phi = c driven to the
plane theta = k = 1 by one actuator, the force F_theta, through the holonomic
servo-constraint sigma = theta - k with error dynamics sigma'' + 2 sigma' + sigma = 0
(Theta1 = -2, Theta2 = -1, Servo.seed_gains).

The UK realisation (ukjax.ServoControlled) is unique here (one input, one servo row, S a
nonzero scalar), so sigma(t) = [sigma0 + (sigma0' + sigma0) t] e^{-t} exactly. SEED_CASES
errata: the printed law (eq 520) has the wrong sign of the velocity term and sin(theta)
for sin(phi); the physics here is the corrected one, checked against the closed form and
SEED_CASES' [V] values (m = 1.3, c = 0.8, phi0 = 0.9, theta0 = 0.3, u1 = 0.2, u2 = 0.4,
F_r = F_phi = 0): sigma(1) = -0.30369449, sigma(3) = -0.05359984, sigma(8) = -0.00057170.

    python examples/cone_particle_plane_tracking.py [--quick] [--out DIR]
"""

import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import ukjax
from _common import example_args, save_figure
from ukjax.systems import ConeSurfaceParticle


SEED_V = {1.0: -0.30369449, 3.0: -0.05359984, 8.0: -0.00057170}


class ActuatedCone(ConeSurfaceParticle):
    """The cone particle with F_theta as its one input (generalized direction r sin(phi)
    on theta)."""

    def actuators(self, t, q):
        return jnp.stack([0.0 * q[0], q[0] * jnp.sin(q[2]), 0.0 * q[0]])[:, None]


class PlaneTheta(ukjax.Servo):
    k: float = 1.0

    def holonomic(self, t, q):
        return jnp.array([q[1] - self.k])


def main():
    args = example_args(__doc__, quick_help="(same run: it is short)")
    plant = ActuatedCone(mass=1.3, c=0.8, F_r=0.0, F_theta=0.0, F_phi=0.0)
    servo = PlaneTheta(gains=ukjax.Servo.seed_gains(theta1=-2.0, theta2=-1.0))
    ctrl = ukjax.ServoControlled(plant, servo)
    phi0, th0, u1, u2 = 0.9, 0.3, 0.2, 0.4
    r0 = plant.c / phi0
    q0 = jnp.array([r0, th0, phi0])
    qd0 = jnp.array([u1, u2 / (r0 * np.sin(phi0)), -phi0 * u1 / r0])  # u3 = phi0 u1
    ts = jnp.linspace(0.0, 10.0, 1001)
    sol = ukjax.simulate(ctrl, q0, qd0, ts)
    history = ukjax.servo_history(ctrl, sol)
    tau, sigma = history.tau, history.error
    s0, sd0 = th0 - 1.0, float(qd0[1])
    t = np.asarray(ts)
    closed = (s0 + (sd0 + s0) * t) * np.exp(-t)
    err = float(np.abs(np.asarray(sigma[:, 0]) - closed).max())
    cone = float(np.abs(np.asarray(sol.q[:, 0] * sol.q[:, 2]) - plant.c).max())
    print(f"max |sigma - closed form| = {err:.2e}; max |r phi - c| = {cone:.2e}")
    for tv, ref in SEED_V.items():
        got = float(sigma[int(round(tv * 100)), 0])
        print(f"sigma({tv:g}) = {got:.8f}   (SEED_CASES [V]: {ref:.8f})")
        assert abs(got - ref) < 1e-8
    assert err < 1e-8 and cone < 1e-8

    fig, ax = plt.subplots(1, 3, figsize=(14, 4))
    ax[0].plot(t, np.asarray(sigma[:, 0]), label="ukjax")
    ax[0].plot(t, closed, "--", label="closed form")
    ax[0].set(xlabel="t (s)", ylabel="theta - k (rad)", title="servo error")
    ax[0].legend()
    ax[1].plot(t, np.asarray(tau[:, 0]))
    ax[1].set(xlabel="t (s)", ylabel="F_theta (N)", title="the one control input")
    x = np.asarray(sol.q[:, 0] * jnp.sin(sol.q[:, 2]) * jnp.cos(sol.q[:, 1]))
    y = np.asarray(sol.q[:, 0] * jnp.sin(sol.q[:, 2]) * jnp.sin(sol.q[:, 1]))
    ax[2].plot(x, y)
    ax[2].plot([0, 2 * np.cos(1.0)], [0, 2 * np.sin(1.0)], "k:", label="plane theta = 1")
    ax[2].set(xlabel="X", ylabel="Y", title="path, top view", aspect="equal")
    ax[2].legend()
    save_figure(fig, args, "cone_particle_plane_tracking.png")


if __name__ == "__main__":
    main()
