"""Seed 004 §7.2-7.4 (Bajodah 2003, Ex. 7.1): the disc-bar mechanism (no obstacle) whose two
motors drive its total energy to E_f = 1 along E' = Theta (E - E_f), Theta = -1: the
nonholonomic servo-constraint sigma = E - E_f with Servo.seed_gains(theta=-1).

Reproduced: E - E_f = (E0 - E_f) e^{Theta t} for every choice of the null-space input y
("all choices yield the same servo-constraint dynamics", Fig 41), here y = 0 (the
minimum-norm torques) and y = 0.3 (sin t, cos t); the torques vanish at steady state
(Figs 42-44). SEED_CASES errata applied: the kinetic energy's cross term is
+L R u1 u2 cos(th1 - th2) (consistent with the mass matrix), and z = -X - (E - E_f).
The thesis gives no geometry: R = L = m_B = 1, I_D = 0.5, I_B = 1/12, g = 9.81 (SEED_CASES'
sample). Energy *removal* from E0 > E_f drives the kinetic energy to zero in finite time,
where the servo-constraint degenerates (SEED_CASES feasibility finding): that run ends with
a failure code instead of an exploding torque, and from rest (K = 0) the servo is refused
as ukjax.RESULTS.servo_infeasible.

    python examples/disc_bar_energy_servo.py [--quick] [--out DIR]
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import ukjax
from _common import example_args, save_figure
from ukjax.systems import DiscBar


class MotorDiscBar(DiscBar):
    """Disc-bar with the thesis's two motors: G = [[1, -1], [0, 1]] (eq 355)."""

    def actuators(self, t, q):
        return jnp.array([[1.0, -1.0], [0.0, 1.0]], dtype=q.dtype)

    def unilateral(self, t, q):
        return None  # no obstacle in Ex. 7.1


def seed_energy(p: DiscBar, q, qd):
    """E = T + m_B g [R (1 - cos th1) + L/2 (1 - cos th2)] (zero at rest, hanging)."""
    V = p.m_bar * p.g * (p.R * (1 - jnp.cos(q[0])) + 0.5 * p.L * (1 - jnp.cos(q[1])))
    return p.kinetic_energy(0.0, q, qd) + V


class EnergyServo(ukjax.Servo):
    plant: DiscBar
    E_f: float = 1.0

    def nonholonomic(self, t, q, qd):
        return jnp.atleast_1d(seed_energy(self.plant, q, qd) - self.E_f)


class Wiggle(eqx.Module):  # the null-space input y(t), a module with tunable fields
    amplitude: float = 0.3

    def __call__(self, t, q, qd):
        return self.amplitude * jnp.stack([jnp.sin(t), jnp.cos(t)])


def main():
    args = example_args(__doc__, quick_help="5 s instead of 10 s")
    T = 5.0 if args.quick else 10.0
    plant = MotorDiscBar(R=1.0, L=1.0, m_bar=1.0, I_bar=1 / 12, I_disc=0.5, g=9.81)
    servo = EnergyServo(plant, gains=ukjax.Servo.seed_gains(theta=-1.0))
    ts = jnp.linspace(0.0, T, int(50 * T) + 1)
    q0, qd0 = jnp.array([0.1, 0.1]), jnp.array([0.5, 0.5])
    E0 = float(seed_energy(plant, q0, qd0))
    closed = 1.0 + (E0 - 1.0) * np.exp(-np.asarray(ts))
    runs = {}
    for name, y in (("y = 0", None), ("y = 0.3 (sin t, cos t)", Wiggle())):
        ctrl = ukjax.ServoControlled(plant, servo, null_control=y)
        sol = ukjax.simulate(ctrl, q0, qd0, ts)
        tau = ukjax.servo_history(ctrl, sol).tau
        E = np.asarray(jax.vmap(lambda q, qd: seed_energy(plant, q, qd))(sol.q, sol.qd))
        runs[name] = (sol, np.asarray(tau), E)
        err = float(np.abs(E - closed).max())
        print(f"{name:<24} E0 = {E0:.4f}, E(T) = {E[-1]:.6f}, max |E - closed form| = "
              f"{err:.1e}, tau(T) = {np.asarray(tau[-1])}")  # fmt: skip
        assert err < 1e-8
    tau0 = runs["y = 0"][1]
    ratio = np.abs(tau0[-1]).max() / np.abs(tau0).max()
    print(f"y = 0: |tau(T)| / max |tau| = {ratio:.1e} (the torques vanish as E -> E_f)")
    assert ratio < 2 * np.exp(-T)

    # Energy removal: the braking torque drives the kinetic energy to zero in finite time,
    # where the servo row (Qu)^T vanishes. Approaching it the torque grows without bound and
    # the step size collapses (a failure code, not a wrong motion); at K = 0 itself the servo
    # is infeasible (S = 0) and says so.
    ctrl = ukjax.ServoControlled(plant, servo)
    bad = ukjax.simulate(ctrl, jnp.zeros(2), jnp.array([1.5, 0.0]), ts, throw=False,
                         max_steps=4000)  # fmt: skip
    last = int(np.sum(np.isfinite(np.asarray(bad.q[:, 0])))) - 1
    print(f"energy removal from E0 = {float(seed_energy(plant, jnp.zeros(2), bad.qd[0])):.3f}: "
          f"stopped after t = {float(ts[last]):.2f} s with "
          f"'{ukjax.RESULTS[bad.result][:60]}...'")  # fmt: skip
    assert bad.result != ukjax.RESULTS.successful
    rest = ukjax.simulate(ctrl, jnp.array([1.0, 1.0]), jnp.zeros(2), ts, throw=False)
    print(f"from rest at theta = (1, 1) (K = 0, E0 > E_f): '{ukjax.RESULTS[rest.result][:60]}...'")
    assert rest.result == ukjax.RESULTS.servo_infeasible

    fig, ax = plt.subplots(1, 3, figsize=(15, 4))
    t = np.asarray(ts)
    for name, (sol, tau, E) in runs.items():
        ax[0].plot(t, E, label=name)
        ax[1].plot(t, np.asarray(sol.qd), label=[f"u1, {name}", f"u2, {name}"])
        ax[2].plot(t, tau, label=[f"tau1, {name}", f"tau2, {name}"])
    ax[0].plot(t, closed, "k--", label="(E0 - Ef) e^{-t} + Ef")
    ax[0].set(xlabel="t (s)", ylabel="E (J)", title="servo-constraint dynamics (Fig 41)")
    ax[0].legend(fontsize=7)
    ax[1].set(xlabel="t (s)", ylabel="rad/s", title="speeds (Fig 43)")
    ax[1].legend(fontsize=6)
    ax[2].set(xlabel="t (s)", ylabel="N m", title="torques: zero at steady state (Fig 44)")
    ax[2].legend(fontsize=6)
    save_figure(fig, args, "disc_bar_energy_servo.png")


if __name__ == "__main__":
    main()
