"""Seed 004 §8.2-8.3 (Bajodah 2003, Ex. 8.1): a rigid spacecraft whose kinetic energy is
made to decay as K' + a K = 0 by a servo-constraint that involves the controls (CAP-24).

Euler's equations as printed (eqs 529-531; SEED_CASES erratum: tau_i is added to w_i'
directly, an angular-acceleration input, which reproduces the thesis's tau3(0)):

    w1' = (I2 - I3)/I1 w2 w3 + tau1,  ...

Substituting them in K' + a K = 0 gives a constraint on the controls,
phi(w, tau) = sum_i I_i w_i tau_i + a/2 sum_i I_i w_i^2 = 0 (the gyroscopic terms do no
work; the thesis's extra bracket in eqs 535-539 is an erratum). Realisation as in the
thesis: the inputs become state, tau' is the new control, and phi is a nonholonomic
servo-constraint on the extended system, realised by ukjax.ServoControlled with
tau' = A^+ B + (I - A^+ A) y (eq 541): here the coordinates are (attitude integrals
theta_i with theta_i' = w_i, input integrals s_i with s_i' = tau_i), the actuators drive
s_i'' = tau_i', and y is the null control: y = 0 (Figs 46-51) or y = -tau (Figs 52-60).

Checks: tau3(0) = -0.3376 from phi(0) = 0 (I = (10, 6.3, 8.5), w(0) = 0.1, tau1 = tau2 =
0.1, a = 1), and K(t) = K0 e^{-a t} for both choices of y. With y = 0 the inputs chatter
(the thesis's remark) and grow as w -> 0, since A^+ = A^T / |A|^2 with A = (I_i w_i): the
step size collapses after t = 7 s (where exactly depends on max_steps) and the run stops
there with a result code (the part before is kept); y = -tau runs smoothly.

    python examples/spacecraft_kinetic_energy_decay.py [--quick] [--out DIR]
"""

import equinox as eqx
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import ukjax
from _common import example_args, save_figure


class Spacecraft(ukjax.System):
    """q = (theta_1..3, s_1..3): qd = (w, tau). M = I; Q = (Euler terms + tau, 0);
    actuators drive the input rates tau' (G = [0; I])."""

    inertia: jnp.ndarray = eqx.field(default_factory=lambda: jnp.array([10.0, 6.3, 8.5]))

    def num_coordinates(self):
        return 6

    def mass_matrix(self, t, q):
        return jnp.eye(6, dtype=q.dtype)

    def forces(self, t, q, qd):
        I1, I2, I3 = self.inertia
        w, tau = qd[:3], qd[3:]
        gyro = jnp.stack(
            [
                (I2 - I3) / I1 * w[1] * w[2],
                (I3 - I1) / I2 * w[2] * w[0],
                (I1 - I2) / I3 * w[0] * w[1],
            ]
        )
        return jnp.concatenate([gyro + tau, jnp.zeros(3, q.dtype)])

    def actuators(self, t, q):
        return jnp.concatenate([jnp.zeros((3, 3)), jnp.eye(3)]).astype(q.dtype)


class EnergyDecay(ukjax.Servo):
    """phi(w, tau) = sum I w tau + a/2 sum I w^2 = 0, i.e. K' + a K = 0."""

    inertia: jnp.ndarray
    a: float = 1.0

    def nonholonomic(self, t, q, qd):
        w, tau = qd[:3], qd[3:]
        I = self.inertia
        return jnp.atleast_1d(jnp.sum(I * w * tau) + 0.5 * self.a * jnp.sum(I * w**2))


class Damp(eqx.Module):
    """y = -tau (the thesis's second choice)."""

    def __call__(self, t, q, qd):
        return -qd[3:]


def main():
    args = example_args(__doc__, quick_help="10 s instead of 20 s")
    T = 10.0 if args.quick else 20.0
    craft = Spacecraft()
    I = craft.inertia
    w0 = jnp.full(3, 0.1)
    # tau3(0) from phi(w0, tau0) = 0 with tau1 = tau2 = 0.1
    tau3 = (-0.5 * jnp.sum(I * w0**2) - I[0] * w0[0] * 0.1 - I[1] * w0[1] * 0.1) / (I[2] * w0[2])
    print(f"tau3(0) = {float(tau3):.4f}   (Bajodah 2003: -0.3376)")
    assert abs(float(tau3) + 0.3376) < 1e-4
    q0, qd0 = jnp.zeros(6), jnp.concatenate([w0, jnp.array([0.1, 0.1, float(tau3)])])
    ts = jnp.linspace(0.0, T, int(50 * T) + 1)
    K0 = 0.5 * float(jnp.sum(I * w0**2))
    closed = K0 * np.exp(-np.asarray(ts))
    servo = EnergyDecay(I)
    runs = {}
    for name, y in (("y = 0", None), ("y = -tau", Damp())):
        ctrl = ukjax.ServoControlled(craft, servo, null_control=y)
        sol = ukjax.simulate(
            ctrl, q0, qd0, ts, rtol=1e-10, atol=1e-10, throw=False, max_steps=20_000
        )
        ok = np.isfinite(np.asarray(sol.q[:, 0]))
        if not ok.all():  # y = 0: see the module docstring
            print(f"{name:<10} stopped at t = {float(ts[ok][-1]):.2f} s: "
                  f"'{ukjax.RESULTS[sol.result][:58]}...'")  # fmt: skip
        K = 0.5 * np.sum(np.asarray(I) * np.asarray(sol.qd[:, :3]) ** 2, axis=1)
        early = np.asarray(ts) <= 5.0  # y = 0 chatters later (module docstring)
        err = float(np.abs(K - closed)[ok & (np.asarray(ts) <= 7.0)].max() / K0)
        runs[name] = (sol, K)
        print(f"{name:<10} max |K - K0 e^-t| / K0 = {err:.1e} for t <= 7 s")
        assert err < 1e-7 and ok[early].all()

    fig, ax = plt.subplots(1, 3, figsize=(15, 4))
    t = np.asarray(ts)
    for name, (sol, K) in runs.items():
        ax[0].semilogy(t, K, label=name)
        ax[1].plot(t, np.asarray(sol.qd[:, :3]), label=[f"w{i + 1}, {name}" for i in range(3)])
        ax[2].plot(t, np.asarray(sol.qd[:, 3:]), label=[f"tau{i + 1}, {name}" for i in range(3)])
    ax[0].semilogy(t, closed, "k--", label="K0 e^{-t}")
    ax[0].set(xlabel="t (s)", ylabel="K (J)", title="kinetic energy (Fig 45)")
    ax[0].legend()
    ax[1].set(xlabel="t (s)", ylabel="rad/s", title="angular velocities")
    ax[1].legend(fontsize=6)
    ax[2].set(xlabel="t (s)", ylabel="rad/s^2", title="control inputs tau")
    ax[2].legend(fontsize=6)
    save_figure(fig, args, "spacecraft_kinetic_energy_decay.png")


if __name__ == "__main__":
    main()
