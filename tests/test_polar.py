"""Zhao et al. 2018, Ex. 1 (projectile in polar coordinates) and §8.1 (logarithmic spiral)."""

import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import ukjax
from references import log_spiral_exact
from ukjax.systems import LagrangianMetric, LogSpiralParticle, PolarProjectile, UnitMetric


METRICS = {"lagrangian": LagrangianMetric(), "seed": UnitMetric()}


@pytest.mark.parametrize("metric", ["lagrangian", "seed"])
def test_polar_projectile_reproduces_the_cartesian_parabola(metric):
    """Unconstrained: both metrics give eqs 7-8 and the motion is x = x0 + vx t,
    y = y0 + vy t - g t^2 / 2 (independent closed form)."""
    g = 9.81
    p = PolarProjectile(metric=METRICS[metric], g=g)
    x0, y0, vx, vy = 3.0, 1.0, -0.4, 2.0
    r0, th0 = np.hypot(x0, y0), np.arctan2(y0, x0)
    rd0 = (x0 * vx + y0 * vy) / r0
    thd0 = (x0 * vy - y0 * vx) / r0**2
    ts = np.linspace(0.0, 0.5, 11)
    sol = ukjax.simulate(p, jnp.array([r0, th0]), jnp.array([rd0, thd0]), ts)
    x = sol.q[:, 0] * jnp.cos(sol.q[:, 1])
    y = sol.q[:, 0] * jnp.sin(sol.q[:, 1])
    np.testing.assert_allclose(x, x0 + vx * ts, atol=1e-9)
    np.testing.assert_allclose(y, y0 + vy * ts - 0.5 * g * ts**2, atol=1e-9)


def test_polar_projectile_eqs_7_8(rng):
    for _ in range(5):
        q = np.array([rng.uniform(0.5, 3), rng.uniform(-3, 3)])
        qd = rng.standard_normal(2)
        r, th = q
        rd, thd = qd
        expected = [r * thd**2 - 9.81 * np.sin(th), (-2 * rd * thd - 9.81 * np.cos(th)) / r]
        for metric in ("lagrangian", "seed"):
            qdd = ukjax.acceleration(PolarProjectile(metric=METRICS[metric]), 0.0, q, qd)
            np.testing.assert_allclose(qdd, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("metric", ["lagrangian", "seed"])
def test_log_spiral_exact_solution(metric):
    """r = e^{3 - 0.1 t}, theta = 30 - t exactly (A is square: qdd = A^{-1} b)."""
    s = LogSpiralParticle(metric=METRICS[metric])
    q0, qd0 = s.initial_state()
    ts = jnp.linspace(0.0, 25.0, 51)
    sol = ukjax.simulate(s, q0, qd0, ts)
    np.testing.assert_allclose(sol.q[:, 0], jnp.exp(3.0 - 0.1 * ts), rtol=1e-10)
    np.testing.assert_allclose(sol.q[:, 1], 30.0 - ts, atol=1e-10)
    r_ex, th_ex = log_spiral_exact(s, ts)
    np.testing.assert_allclose(sol.q[:, 0], r_ex, rtol=1e-10)
    # The error measures of eqs 58-59 stay at round-off.
    eps1 = jnp.hypot(sol.q[:, 0] - jnp.exp(0.1 * sol.q[:, 1]), sol.q[:, 1] + ts - 30)
    eps2 = jnp.hypot(
        sol.qd[:, 0] - 0.1 * jnp.exp(0.1 * sol.q[:, 1]) * sol.qd[:, 1], sol.qd[:, 1] + 1
    )
    assert float(eps1.max()) < 1e-9 and float(eps2.max()) < 1e-9


def test_log_spiral_constraint_forces_by_metric(rng):
    """The accelerations agree across metrics; the forces differ by the metric: with M = I
    the theta 'force' is an angular acceleration, with M = diag(1, r^2) it is a torque r^2
    times larger (erratum of seed 002 §8.1). Checked against a KKT solve."""
    for _ in range(3):
        th = rng.uniform(0, 30)
        thd = rng.standard_normal()
        q = jnp.array([np.exp(0.1 * th), th])
        qd = jnp.array([0.1 * np.exp(0.1 * th) * thd, thd])
        out = {}
        for metric in ("lagrangian", "seed"):
            s = LogSpiralParticle(metric=METRICS[metric])
            M, Q = ukjax.mass_and_force(s, 0.0, q, qd)
            A, b = ukjax.constraint_matrices(s, 0.0, q, qd)
            # Independent reference: the KKT system [M -A^T; A 0][qdd; lam] = [Q; b].
            K = np.block([[np.asarray(M), -np.asarray(A).T], [np.asarray(A), np.zeros((2, 2))]])
            sol = np.linalg.solve(K, np.concatenate([Q, b]))
            Qi, _ = ukjax.constraint_forces(M, Q, A, b)
            np.testing.assert_allclose(Qi, np.asarray(A).T @ sol[2:], rtol=1e-10, atol=1e-10)
            out[metric] = (ukjax.acceleration(s, 0.0, q, qd), Qi)
        np.testing.assert_allclose(out["lagrangian"][0], out["seed"][0], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(
            out["lagrangian"][1][1], q[0] ** 2 * out["seed"][1][1], rtol=1e-10
        )


@pytest.mark.slow  # also examples/projectile_polar.py
def test_metric_matters_on_a_spiral_wire():
    """A bead on r = R + k theta (one constraint, two coordinates): the Lagrangian metric
    matches the minimal-coordinate equation (k^2 + r^2) theta'' + r k theta'^2 =
    -g (k sin theta + r cos theta); the seed's M = I does not (SEED_CASES §2.7 note)."""
    import equinox as eqx

    class OnSpiral(PolarProjectile):
        R: float = eqx.field(default=2.0)
        k: float = eqx.field(default=0.3)

        def holonomic(self, t, q):
            return jnp.stack([q[0] - self.R - self.k * q[1]])

    g, R, k = 9.81, 2.0, 0.3

    def bead(t, y):
        r = R + k * y[0]
        return [
            y[1],
            (-g * (k * np.sin(y[0]) + r * np.cos(y[0])) - r * k * y[1] ** 2) / (k**2 + r**2),
        ]

    ts = np.linspace(0.0, 2.0, 21)
    ref = solve_ivp(
        bead, (0, 2.0), [0.3, 1.0], method="DOP853", rtol=1e-12, atol=1e-12, t_eval=ts
    ).y[0]
    q0, qd0 = jnp.array([R + k * 0.3, 0.3]), jnp.array([k, 1.0])
    lag = ukjax.simulate(OnSpiral(metric=LagrangianMetric(), g=g), q0, qd0, jnp.asarray(ts)).q[:, 1]
    seed = ukjax.simulate(OnSpiral(metric=UnitMetric(), g=g), q0, qd0, jnp.asarray(ts)).q[:, 1]
    np.testing.assert_allclose(lag, ref, atol=1e-9)
    assert float(jnp.max(jnp.abs(seed - ref))) > 0.1
