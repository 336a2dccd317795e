"""Robust tuning of servo-constraint gains by gradient descent over a batch of uncertain
plants (issue 15): a cart with a pendulum tracks x_d(t) = 0.5 sin(2t) with its one actuator
(the UK servo realisation of sigma = x - x_d with error dynamics
sigma'' + 2 alpha sigma' + beta^2 sigma = 0), while the pendulum mass and length are only
known to +-30 %.

The cost, averaged over 8 plants drawn from that range (vmap), weighs the tracking error,
the pendulum swing and the control effort; jax.grad goes through ukjax.simulate and the UK
realisation at every step, and optax.lbfgs moves (log alpha, log beta) until the gradient
vanishes. (The servo makes the cart's error dynamics exact for every plant; the plants
differ in how much the pendulum swings and how much force it takes.) The literature tunes
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


TS = jnp.linspace(0.0, 3.0, 61)


def run(log_gains, mass, length):
    alpha, beta = jnp.exp(log_gains)
    plant = CartPendulum(mass=mass, length=length)
    ctrl = ukjax.ServoControlled(plant, CartTrack(gains=ukjax.Baumgarte(alpha, beta)))
    sol = ukjax.simulate(
        ctrl,
        jnp.array([0.3, 0.0]),
        jnp.zeros(2),
        TS,
        solver=diffrax.Tsit5(),
        stepsize_controller=diffrax.ConstantStepSize(),
        dt0=0.02,
        adjoint=ukjax.ReverseReplayAdjoint(),  # reverse mode only: the faster replay
    )
    history = ukjax.servo_history(ctrl, sol)
    tau, err = history.tau, history.error
    return sol, tau, err


def cost(log_gains, masses, lengths):
    def one(m, l):
        sol, tau, err = run(log_gains, m, l)
        return jnp.mean(err**2) + 0.5 * jnp.mean(sol.q[:, 1] ** 2) + 1e-3 * jnp.mean(tau**2)

    return jnp.mean(jax.vmap(one)(masses, lengths))


def main():
    args = example_args(__doc__, quick_help="3 optimisation steps instead of up to 30")
    steps = 3 if args.quick else 30
    key_m, key_l = jax.random.split(jax.random.PRNGKey(0))
    masses = 0.5 * jax.random.uniform(key_m, (8,), minval=0.7, maxval=1.3)
    lengths = 1.0 * jax.random.uniform(key_l, (8,), minval=0.7, maxval=1.3)
    params = jnp.log(jnp.array([0.5, 0.5]))  # a sluggish start
    objective = lambda p: cost(p, masses, lengths)
    value_and_grad = optax.value_and_grad_from_state(objective)
    opt = optax.lbfgs()

    @eqx.filter_jit  # one compilation: the step with its line search
    def step(params, state):
        loss, g = value_and_grad(params, state=state)
        updates, state = opt.update(g, state, params, value=loss, grad=g, value_fn=objective)
        return optax.apply_updates(params, updates), state, loss, g

    # optax's first L-BFGS update turns the weakly typed leaves of its line-search info
    # strong; making them strong now keeps it at one compilation (else a second at step 2).
    state = jax.tree_util.tree_map(lambda x: jnp.asarray(x, x.dtype), opt.init(params))
    t0 = time.perf_counter()
    losses, grad_norm = [], float("inf")
    for i in range(steps):
        params, state, loss, g = step(params, state)
        losses.append(float(loss))
        grad_norm = float(jnp.linalg.norm(g))
        if i == 0:
            print(f"first step (compile + run): {time.perf_counter() - t0:.1f} s")
        print(
            f"step {i:2d}: cost {float(loss):.6f}, |grad| {grad_norm:.1e}, alpha = "
            f"{float(jnp.exp(params[0])):.4f}, beta = {float(jnp.exp(params[1])):.4f}"
        )
        if grad_norm < 1e-6:
            break
    final = float(eqx.filter_jit(objective)(params))
    print(
        f"cost {losses[0]:.5f} -> {final:.6f} in {len(losses)} L-BFGS steps "
        f"({time.perf_counter() - t0:.1f} s), final |grad| {grad_norm:.1e}"
    )
    assert final < 0.6 * losses[0]

    fig, ax = plt.subplots(1, 3, figsize=(15, 4))
    ax[0].semilogy(losses + [final], "o-")
    ax[0].set(xlabel="L-BFGS step", ylabel="batch cost", title="robust gain tuning")
    t = np.asarray(TS)
    for lg, label in ((jnp.log(jnp.array([0.5, 0.5])), "initial gains"), (params, "tuned")):
        for m, l in zip(masses[:3], lengths[:3]):
            _, _, err = run(lg, m, l)
            ax[1].plot(t, np.asarray(err[:, 0]), "-" if label == "tuned" else ":", lw=0.8)
    ax[1].set(xlabel="t (s)", ylabel="x - x_d (m)", title="tracking error (dotted: initial)")
    sol, tau, _ = run(params, masses[0], lengths[0])
    ax[2].plot(t, np.asarray(tau[:, 0]))
    ax[2].set(xlabel="t (s)", ylabel="N", title="cart force, tuned gains, plant 0")
    save_figure(fig, args, "servo_gain_tuning.png")


if __name__ == "__main__":
    main()
