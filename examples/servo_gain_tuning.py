"""Robust tuning of servo-constraint gains by gradient descent over a batch of uncertain
plants (issue 15): a cart with a pendulum tracks x_d(t) = 0.5 sin(2t) with its one actuator
(the UK servo realisation of sigma = x - x_d with error dynamics
sigma'' + 2 alpha sigma' + beta^2 sigma = 0), while the pendulum mass and length are only
known to +-30 %.

The cost, averaged over 16 plants drawn from that range (vmap), weighs the tracking error,
the pendulum swing and the control effort; jax.grad goes through ukjax.simulate and the UK
realisation at every step, and optax.adam moves (log alpha, log beta). The literature tunes
such gains by serial sweeps; here one batched gradient per step does it.

    python examples/servo_gain_tuning.py [--quick] [--out DIR]
"""

import time

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import optax

import ukjax
from _common import example_args, save_figure
from ukjax.systems import CartPendulum


class CartTrack(ukjax.Servo):
    a: float = 0.5
    w: float = 2.0

    def holonomic(self, t, q):
        return jnp.array([q[0] - self.a * jnp.sin(self.w * t)])


TS = jnp.linspace(0.0, 4.0, 81)


def run(log_gains, mass, length):
    alpha, beta = jnp.exp(log_gains)
    plant = CartPendulum(mass=mass, length=length)
    ctrl = ukjax.ServoControlled(plant, CartTrack(gains=ukjax.Baumgarte(alpha, beta)))
    sol = ukjax.simulate(
        ctrl, jnp.array([0.3, 0.0]), jnp.zeros(2), TS,
        solver=diffrax.Tsit5(), stepsize_controller=diffrax.ConstantStepSize(), dt0=0.01,
    )  # fmt: skip
    tau, err = ukjax.servo_history(ctrl, sol)
    return sol, tau, err


def cost(log_gains, masses, lengths):
    def one(m, l):
        sol, tau, err = run(log_gains, m, l)
        return jnp.mean(err**2) + 0.5 * jnp.mean(sol.q[:, 1] ** 2) + 1e-3 * jnp.mean(tau**2)

    return jnp.mean(jax.vmap(one)(masses, lengths))


def main():
    args = example_args(__doc__, quick_help="8 optimisation steps instead of 40")
    steps = 8 if args.quick else 40
    key_m, key_l = jax.random.split(jax.random.PRNGKey(0))
    masses = 0.5 * jax.random.uniform(key_m, (16,), minval=0.7, maxval=1.3)
    lengths = 1.0 * jax.random.uniform(key_l, (16,), minval=0.7, maxval=1.3)
    params = jnp.log(jnp.array([0.5, 0.5]))  # a sluggish start
    opt = optax.adam(0.1)
    state = opt.init(params)
    value_and_grad = eqx.filter_jit(jax.value_and_grad(cost))
    t0 = time.perf_counter()
    losses = []
    for i in range(steps):
        loss, g = value_and_grad(params, masses, lengths)
        updates, state = opt.update(g, state)
        params = optax.apply_updates(params, updates)
        losses.append(float(loss))
        if i == 0:
            print(f"first step (compile + run): {time.perf_counter() - t0:.1f} s")
        print(f"step {i:2d}: cost {float(loss):.5f}, alpha = {float(jnp.exp(params[0])):.3f}, "
              f"beta = {float(jnp.exp(params[1])):.3f}")  # fmt: skip
    final = float(cost(params, masses, lengths))
    print(f"cost {losses[0]:.5f} -> {final:.5f} in {steps} steps "
          f"({time.perf_counter() - t0:.1f} s)")  # fmt: skip
    assert final < 0.5 * losses[0]

    fig, ax = plt.subplots(1, 3, figsize=(15, 4))
    ax[0].semilogy(losses + [final], "o-")
    ax[0].set(xlabel="adam step", ylabel="batch cost", title="robust gain tuning")
    t = np.asarray(TS)
    for lg, label in ((jnp.log(jnp.array([0.5, 0.5])), "initial gains"), (params, "tuned")):
        for m, l in zip(masses[:4], lengths[:4]):
            _, _, err = run(lg, m, l)
            ax[1].plot(t, np.asarray(err[:, 0]), "-" if label == "tuned" else ":", lw=0.8)
    ax[1].set(xlabel="t (s)", ylabel="x - x_d (m)", title="tracking error (dotted: initial)")
    sol, tau, _ = run(params, masses[0], lengths[0])
    ax[2].plot(t, np.asarray(tau[:, 0]))
    ax[2].set(xlabel="t (s)", ylabel="N", title="cart force, tuned gains, plant 0")
    save_figure(fig, args, "servo_gain_tuning.png")


if __name__ == "__main__":
    main()
