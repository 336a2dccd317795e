"""A 6-DoF arm read from a URDF file tracks a circle with its tool tip, by servo-constraints.

The arm (`examples/models/arm6.urdf`: yaw, shoulder, elbow and three wrist joints, joint
damping, gravity) is loaded with `ukjax.from_urdf`; a motor on every joint
(`RigidModel.with_motors`) gives the actuators. The servo-constraint (Bajodah 2003; Zhao
et al. 2018) asks the tool tip to follow a horizontal circle and the three wrist joints to
hold their angles: six rows for six motors, with error dynamics
sigma'' + 2 alpha sigma' + beta^2 sigma = 0, so the tip, started off the path, converges
to it. `ukjax.ServoControlled` computes the joint torques that realise it at every state;
`ukjax.servo_history` gives them along the run.

    python examples/robot_arm_servo.py [--quick] [--out DIR]
"""

import os

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import ukjax
from _common import example_args, save_figure


URDF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models", "arm6.urdf")
CENTRE, RADIUS, PERIOD = jnp.array([0.45, 0.0, 0.45]), 0.15, 2.0


def circle(t):
    phase = 2 * jnp.pi * t / PERIOD
    return CENTRE + RADIUS * jnp.stack([jnp.cos(phase), jnp.sin(phase), jnp.zeros_like(t)])


class TipOnCircle(ukjax.Servo):
    """Tool tip on the circle at time t; wrist joints held at their angles."""

    arm: ukjax.RigidModel
    wrist: jnp.ndarray  # held angles of wrist_roll, wrist_pitch, wrist_yaw

    def tip(self, q):
        tool = self.arm.body_id("tool")
        return self.arm.points(q, [tool], jnp.array([[0.0, 0.0, 0.1]]))[0]

    def holonomic(self, t, q):
        return jnp.concatenate([self.tip(q) - circle(t), q[3:] - self.wrist])


def main():
    args = example_args(__doc__)
    arm = ukjax.from_urdf(URDF).with_motors()
    print(f"{URDF}: {arm.nq} joints, {len(arm.actuated)} motors, bodies {arm.body_names}")
    qpos = jnp.array([0.0, 0.7, 1.2, 0.0, 0.9, 0.0])  # the tip near the circle's start
    servo = TipOnCircle(
        arm, qpos[3:], gains=ukjax.Baumgarte(alpha=8.0, beta=8.0)
    )  # critically damped
    plant = ukjax.ServoControlled(arm, servo)
    q0, qd0 = arm.initial_state(qpos)
    T = 1.0 if args.quick else 2 * PERIOD
    ts = jnp.linspace(0.0, T, 201)
    sol = jax.jit(lambda q, qd: ukjax.simulate(plant, q, qd, ts))(q0, qd0)
    tips = jax.vmap(servo.tip)(sol.q)
    target = jax.vmap(circle)(ts)
    error = jnp.linalg.norm(tips - target, axis=1)
    torques = ukjax.servo_history(plant, sol).tau
    print(f"tip error: {float(error[0]):.3f} m at t = 0, {float(error[-1]):.2e} m at t = {T:g} s")
    print(f"largest joint torque: {float(jnp.abs(torques).max()):.1f} N m")

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    axes[0].plot(target[:, 0], target[:, 1], "k--", label="target circle")
    axes[0].plot(tips[:, 0], tips[:, 1], label="tool tip")
    axes[0].set(xlabel="x [m]", ylabel="y [m]", title="Tool tip, seen from above", aspect="equal")
    axes[0].legend()
    axes[1].semilogy(ts, np.maximum(np.asarray(error), 1e-16))
    axes[1].set(xlabel="t [s]", ylabel="|tip - target| [m]", title="Tracking error")
    names = [j.name for j in arm.joints]
    for k in range(torques.shape[1]):
        axes[2].plot(ts, torques[:, k], label=names[k])
    axes[2].set(xlabel="t [s]", ylabel="torque [N m]", title="Motor torques")
    axes[2].legend(fontsize=8)
    save_figure(fig, args, "robot_arm_servo.png")
    # the error dynamics are linear: sigma(t) = (sigma0 + (sigma0' + beta sigma0) t) e^{-beta t}
    beta = 8.0
    sigma0 = tips[0] - target[0]
    sigma0_rate = -jax.jacfwd(circle)(ts[0])  # the arm starts at rest
    theory = (sigma0 + (sigma0_rate + beta * sigma0) * ts[:, None]) * jnp.exp(-beta * ts)[:, None]
    deviation = float(jnp.abs(tips - target - theory).max())
    print(f"tip error against the closed form of the error dynamics: {deviation:.1e} m")
    assert deviation < 1e-6, "the tip did not follow the servo-constraint's error dynamics"


if __name__ == "__main__":
    main()
