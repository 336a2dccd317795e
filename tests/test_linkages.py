"""FourBarLinkage (closed loop) against a hand-written Lagrange-multiplier form, and the
classical RK4 solver against a hand-coded step and its convergence order."""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ukjax
from ukjax.systems import FourBarLinkage, SimplePendulum


def _kkt_acceleration(fb, th, w):
    """Absolute-angle four-bar by multipliers, written out rod by rod."""
    l = np.array([fb.l1, fb.l2, fb.l3])
    m = np.array([fb.m1, fb.m2, fb.m3])
    M = np.diag(m * l**2 / 12.0)
    h = np.zeros(3)
    for i in range(3):  # rod i: centre velocity = sum_j c_ij e'_j w_j
        c = np.array([l[j] if j < i else (l[i] / 2 if j == i else 0.0) for j in range(3)])
        for j in range(3):
            h[j] += m[i] * c[j] * fb.g * np.cos(th[j])
            for k in range(3):
                M[j, k] += m[i] * c[j] * c[k] * np.cos(th[j] - th[k])
                h[j] += m[i] * c[j] * c[k] * np.sin(th[j] - th[k]) * w[k] ** 2
    J = np.stack([-l * np.sin(th), l * np.cos(th)])
    gamma = np.stack([l * np.cos(th), l * np.sin(th)]) @ w**2
    K = np.block([[M, J.T], [J, np.zeros((2, 2))]])
    return np.linalg.solve(K, np.concatenate([-h, gamma]))[:3]


def test_fourbar_acceleration_matches_multipliers():
    jax.config.update("jax_enable_x64", True)
    fb = FourBarLinkage(m2=1.7, l3=2.2)
    rng = np.random.default_rng(3)
    for crank in (0.3, 1.1, 2.5, -1.0):
        q, qd = fb.initial_state(crank, rng.normal())
        ref = _kkt_acceleration(fb, np.asarray(q), np.asarray(qd))
        np.testing.assert_allclose(ukjax.acceleration(fb, 0.0, q, qd), ref, rtol=1e-10, atol=1e-10)


@pytest.mark.slow  # default suite's time (benchmarks/RESULTS.md, stop 84)
def test_fourbar_motion_keeps_loop_closed_and_energy():
    jax.config.update("jax_enable_x64", True)
    fb = FourBarLinkage()
    q0, qd0 = fb.initial_state(1.0, 3.0)
    sol = ukjax.simulate(fb, q0, qd0, jnp.linspace(0.0, 2.0, 41))
    end = jax.vmap(fb.joints)(sol.q)[:, -1]
    assert np.abs(end - np.array([fb.d, 0.0])).max() < 1e-9
    E = jax.vmap(lambda q, qd: ukjax.energy(fb, 0.0, q, qd))(sol.q, sol.qd)
    assert np.abs(E - E[0]).max() < 1e-9 * abs(float(E[0]))
    assert np.ptp(np.asarray(sol.q[:, 0])) > 0.5  # it does move


def test_fourbar_refuses_a_loop_that_cannot_close():
    with pytest.raises(ValueError, match="cannot close"):
        FourBarLinkage(l2=0.5, l3=0.5).initial_state(1.0)


@pytest.mark.slow
def test_rk4_is_the_classical_method():
    jax.config.update("jax_enable_x64", True)
    p = SimplePendulum(length=1.3, g=9.81)
    f = lambda y: np.array([y[1], -(p.g / p.length) * np.sin(y[0])])
    y, h = np.array([1.0, 0.2]), 0.05
    k1 = f(y)
    k2 = f(y + h / 2 * k1)
    k3 = f(y + h / 2 * k2)
    k4 = f(y + h * k3)
    hand = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    run = lambda dt, t1: ukjax.simulate(
        p,
        jnp.array([1.0]),
        jnp.array([0.2]),
        jnp.array([0.0, t1]),
        solver=ukjax.RK4(),
        stepsize_controller=diffrax.ConstantStepSize(),
        dt0=dt,
    )
    one = run(h, h)
    np.testing.assert_allclose([one.q[-1, 0], one.qd[-1, 0]], hand, rtol=1e-14, atol=1e-15)
    ref = ukjax.simulate(p, jnp.array([1.0]), jnp.array([0.2]), jnp.array([0.0, 2.0])).q[-1, 0]
    errs = [abs(float(run(dt, 2.0).q[-1, 0] - ref)) for dt in (0.04, 0.02)]
    assert 12.0 < errs[0] / errs[1] < 20.0  # 4th order: halving dt divides the error by ~16
