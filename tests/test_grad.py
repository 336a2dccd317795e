"""Gradients against finite differences, forward and reverse, incl. redundant constraints."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import ukjax
from references import random_spd
from ukjax.systems import CartesianPendulum, DoubleRodPendulum


def _central_fd(f, x, h):
    x = np.asarray(x, float)
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (float(f(x + e)) - float(f(x - e))) / (2 * h)
    return g


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_udwadia_kalaba_grads_all_inputs(rng, rank):
    """check_grads (fwd + rev, 1st order) w.r.t. M, Q, A, b, C; rank < 3 is rank deficient.
    Perturbations keep A's rank: A = U V with U, V differentiated."""
    n, m = 4, 3
    M0 = random_spd(rng, n)
    U, V = rng.standard_normal((m, rank)), rng.standard_normal((rank, n))
    x0 = rng.standard_normal(n)
    Q, C = rng.standard_normal(n), rng.standard_normal(n)

    def f(M, U, V, Q, x, C):
        A = U @ V
        return ukjax.udwadia_kalaba(0.5 * (M + M.T), Q, A, A @ x, C)

    check_grads(
        f, (M0, U, V, Q, x0, C), order=1, modes=["fwd", "rev"], eps=1e-5, atol=1e-6, rtol=1e-6
    )


class Redundant(ukjax.System):
    """The Cartesian pendulum with its rod constraint stated twice (and once scaled)."""

    mass: float = 1.0
    length: float = 1.0
    g: float = 9.81
    copies: int = eqx.field(static=True, default=3)

    def kinetic_energy(self, t, q, qd):
        return 0.5 * self.mass * qd @ qd

    def potential_energy(self, t, q):
        return self.mass * self.g * q[1]

    def holonomic(self, t, q):
        phi = q @ q - self.length**2
        return jnp.stack([phi * (k + 1.0) for k in range(self.copies)])


@pytest.mark.slow
def test_acceleration_grads_at_duplicated_constraints(rng):
    q = jnp.array([0.6, -0.8]) * 1.1
    qd = jnp.array([0.3, 0.7])
    params = jnp.array([1.3, 0.9, 9.81])

    def accel(p, copies):
        sys = Redundant(mass=p[0], length=p[1], g=p[2], copies=copies)
        return ukjax.acceleration(sys, 0.0, q, qd)

    J1 = jax.jacrev(lambda p: accel(p, 1))(params)
    J3 = jax.jacrev(lambda p: accel(p, 3))(params)
    J3f = jax.jacfwd(lambda p: accel(p, 3))(params)
    assert np.all(np.isfinite(J3)) and np.all(np.isfinite(J3f))
    # Round-off that breaks the exact proportionality of the copies (the rows' right-hand
    # sides, 3 x b_0 rounded; XLA's fused code rounds the three rows differently) meets the
    # regularised Gram matrix, whose inverse is 1/tau^2 = 1e10 along the redundant
    # directions: an error bound of eps / tau^2 ~ 2e-6 relative, in either mode. Measured
    # with the UK solve's derivative rule (ukjax._uk_regularized): forward mode 7e-16,
    # reverse mode 2.3e-7 op by op and 7e-7 jitted (it transposes the rule, whose
    # cotangents meet the rounded rows where the tangents do not); with plain autodiff of
    # the solve it was the other way round (reverse exact, forward 7e-8 jitted).
    bound = 2e-6 * np.abs(J1).max()
    np.testing.assert_allclose(J3, J1, rtol=1e-10, atol=bound)
    np.testing.assert_allclose(J3f, J1, rtol=1e-10, atol=bound)
    # And against finite differences, state derivatives too (the rank stays 1 for any q).
    check_grads(
        lambda p, q_, qd_: ukjax.acceleration(
            Redundant(mass=p[0], length=p[1], g=p[2]), 0.0, q_, qd_
        ),
        (params, q, qd),
        order=1,
        modes=["fwd", "rev"],
        eps=1e-6,
        atol=1e-7,
        rtol=1e-7,
    )


def test_grads_with_repeated_masses_are_finite():
    """A diagonal M with equal masses: eigh/sqrtm-based M^{-1/2} has NaN derivatives there."""
    sys = DoubleRodPendulum()
    q, qd = jnp.array([0.9, 0.3, 0.1]), jnp.array([0.1, 1.0, -0.2])
    J = jax.jacrev(lambda m: ukjax.acceleration(DoubleRodPendulum(mass=m), 0.0, q, qd))(1.0)
    assert np.all(np.isfinite(J))
    np.testing.assert_allclose(J, 0.0, atol=1e-12)  # point mass, no other forces: no effect
    del sys


def _final_loss(params, adjoint, controller=None, dt0=None):
    L1, L2, g, yd0 = params
    sys = DoubleRodPendulum(L1=L1, L2=L2, g=g)
    q0 = jnp.stack([L1, 0.0 * L1, 0.0 * L1])
    qd0 = jnp.stack([0.0 * yd0, yd0, 0.0 * yd0])
    kw = dict(solver=diffrax.Tsit5())
    if controller is not None:
        kw.update(stepsize_controller=controller, dt0=dt0)
    sol = ukjax.simulate(
        sys,
        q0,
        qd0,
        jnp.linspace(0.0, 1.0, 5),
        adjoint=adjoint,
        initial_conditions=ukjax.IgnoreInitial(),
        **kw,
    )
    w = jnp.array([1.0, 2.0, 3.0])
    return jnp.sum(sol.q[1:] @ w) + jnp.sum(sol.qd[-1] ** 2)


PARAMS = np.array([1.1, 0.9, 10.0, 3.0])


@pytest.mark.slow
def test_simulate_gradients_fixed_step_vs_finite_differences():
    """With a fixed step the discrete solution is smooth in the parameters: AD (reverse
    with checkpointing, forward mode) equals central differences to ~1e-8."""
    ctrl, dt0 = diffrax.ConstantStepSize(), 1e-2
    g_rev = jax.jit(
        jax.grad(lambda p: _final_loss(p, diffrax.RecursiveCheckpointAdjoint(), ctrl, dt0))
    )(jnp.asarray(PARAMS))
    g_fwd = jax.jit(jax.jacfwd(lambda p: _final_loss(p, diffrax.ForwardMode(), ctrl, dt0)))(
        jnp.asarray(PARAMS)
    )
    g_fd = _central_fd(
        lambda p: _final_loss(jnp.asarray(p), diffrax.RecursiveCheckpointAdjoint(), ctrl, dt0),
        PARAMS,
        1e-5,
    )
    np.testing.assert_allclose(g_rev, g_fd, rtol=1e-6)
    np.testing.assert_allclose(g_fwd, g_rev, rtol=1e-10)


@pytest.mark.slow
def test_simulate_gradients_adaptive_vs_finite_differences():
    g_rev = jax.jit(jax.grad(lambda p: _final_loss(p, diffrax.RecursiveCheckpointAdjoint())))(
        jnp.asarray(PARAMS)
    )
    g_fd = _central_fd(
        lambda p: _final_loss(jnp.asarray(p), diffrax.RecursiveCheckpointAdjoint()), PARAMS, 1e-4
    )
    np.testing.assert_allclose(g_rev, g_fd, rtol=1e-6)


@pytest.mark.slow
def test_simulate_gradients_finite_with_redundant_constraints():
    ts = jnp.linspace(0.0, 1.0, 5)
    q0, qd0 = jnp.array([0.0, -1.0]), jnp.array([1.5, 0.0])

    def loss(p, copies):
        sys = Redundant(mass=p[0], length=p[1], g=p[2], copies=copies)
        q0_ = q0 * p[1]
        sol = ukjax.simulate(
            sys, q0_, qd0, ts, initial_conditions=ukjax.IgnoreInitial(), solver=diffrax.Tsit5()
        )
        return jnp.sum(sol.q[:, 0]) + jnp.sum(sol.qd[-1] ** 2)

    p = jnp.array([1.3, 0.9, 9.81])
    g1 = jax.jit(jax.grad(lambda p: loss(p, 1)))(p)
    g3 = jax.jit(jax.grad(lambda p: loss(p, 3)))(p)
    assert np.all(np.isfinite(g3))
    assert np.all(np.abs(g1[1:]) > 1e-3)  # depends on length and g (not on a point mass)
    np.testing.assert_allclose(g3, g1, rtol=1e-8, atol=1e-12)
    g_fd = _central_fd(lambda x: loss(jnp.asarray(x), 3), np.asarray(p), 1e-4)
    np.testing.assert_allclose(g3, g_fd, rtol=1e-6, atol=1e-9)


@pytest.mark.slow
def test_gradients_of_batched_sweep():
    """grad of a loss over a vmapped batch equals the sum of single gradients."""
    ts = jnp.linspace(0.0, 0.5, 3)
    q0 = jnp.array([1.0, 0.0])
    qd0s = jnp.array([[0.0, 0.5], [0.0, 1.0]])

    def loss_single(L, qd0):
        return jnp.sum(
            ukjax.simulate(
                CartesianPendulum(length=L),
                q0 * L,
                qd0,
                ts,
                initial_conditions=ukjax.IgnoreInitial(),
            ).q[-1]
        )

    batched = jax.jit(jax.grad(lambda L: jnp.sum(jax.vmap(lambda v: loss_single(L, v))(qd0s))))(1.0)
    grad_single = jax.jit(jax.grad(loss_single))
    singles = sum(grad_single(1.0, v) for v in qd0s)
    np.testing.assert_allclose(batched, singles, rtol=1e-10)


class ActuatedPendulum(ukjax.System):
    """Cartesian pendulum driven by a piecewise-linear torque with knots as a field."""

    knots: jnp.ndarray
    length: float = 1.0
    g: float = 9.81

    def kinetic_energy(self, t, q, qd):
        return 0.5 * qd @ qd

    def potential_energy(self, t, q):
        return self.g * q[1]

    def holonomic(self, t, q):
        return jnp.array([q @ q - self.length**2])

    def forces(self, t, q, qd):
        tau = jnp.interp(t, jnp.linspace(0.0, 1.0, self.knots.shape[0]), self.knots)
        return tau * jnp.stack([-q[1], q[0]]) / (q @ q)


@pytest.mark.slow
def test_gradients_wrt_control_inputs_and_initial_state():
    """d loss / d (torque knots, initial velocity) against central differences."""
    ts = jnp.linspace(0.0, 1.0, 3)
    kw = dict(
        solver=diffrax.Tsit5(),
        stepsize_controller=diffrax.ConstantStepSize(),
        dt0=0.01,
        initial_conditions=ukjax.IgnoreInitial(),
    )

    def loss(x):
        knots, v0 = x[:4], x[4]
        sol = ukjax.simulate(
            ActuatedPendulum(knots=knots), jnp.array([0.0, -1.0]), jnp.array([v0, 0.0]), ts, **kw
        )
        return jnp.sum(sol.q[-1] * jnp.array([1.0, 3.0])) + jnp.sum(sol.qd[-1] ** 2)

    x0 = jnp.array([0.5, -1.0, 2.0, 0.3, 0.7])
    g = jax.jit(jax.grad(loss))(x0)
    g_fd = _central_fd(jax.jit(loss), np.asarray(x0), 1e-5)
    assert np.all(np.abs(g) > 1e-3)
    np.testing.assert_allclose(g, g_fd, rtol=1e-6)


def _pendulum_loss(adjoint, stabilization):
    def loss(theta):
        pend = CartesianPendulum(mass=theta[0], length=1.0, g=theta[1])
        sol = ukjax.simulate(
            pend,
            jnp.array([1.0, 0.0]),
            jnp.array([0.0, 0.5]),
            jnp.linspace(0.0, 1.0, 5),
            solver=diffrax.Tsit5(),
            rtol=1e-10,
            atol=1e-10,
            adjoint=adjoint,
            stabilization=stabilization,
        )
        return jnp.sum(sol.q[1:, 1] * jnp.arange(1.0, 5.0)) + jnp.sum(sol.qd[-1] ** 2)

    return loss


@pytest.mark.slow
def test_backsolve_adjoint_agrees_and_refuses_the_projection():
    """diffrax's continuous adjoint runs through simulate (whose saves are a plain SaveAt
    when no failure event is needed: diffrax refuses SaveAt(subs=...) with it) and agrees
    with the discrete reverse-mode gradient to the solve's tolerance; g matters and the
    mass does not (a point mass under gravity alone). With the per-step projection it is a
    ValueError saying what to pass instead."""
    theta = jnp.array([1.3, 9.81])
    none = ukjax.NoStabilization()
    g_back = jax.grad(_pendulum_loss(diffrax.BacksolveAdjoint(), none))(theta)
    g_disc = jax.grad(_pendulum_loss(diffrax.RecursiveCheckpointAdjoint(), none))(theta)
    assert abs(float(g_disc[1])) > 1e-2
    np.testing.assert_allclose(g_disc[0], 0.0, atol=1e-10)  # the motion is mass-independent
    np.testing.assert_allclose(g_back, g_disc, rtol=1e-6, atol=1e-8)
    with pytest.raises(ValueError, match="NoStabilization"):
        jax.grad(_pendulum_loss(diffrax.BacksolveAdjoint(), ukjax.Projection()))(theta)
    with pytest.raises(ValueError, match="BacksolveAdjoint"):  # the default projection too
        jax.grad(_pendulum_loss(diffrax.BacksolveAdjoint(), None))(theta)
