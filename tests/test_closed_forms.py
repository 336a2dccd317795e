"""ukjax against closed forms printed (and re-derived) in the seeds, at random states."""

import numpy as np
import pytest

import ukjax
from ukjax.systems import CartesianPendulum, DoubleRodPendulum, DuffingOscillator


def test_cartesian_pendulum_eq_33h(rng):
    """Seed 001 eq 33h: qdd = [0, -g] + (g q2 - |qd|^2) / |q|^2 q, at arbitrary states."""
    for _ in range(10):
        m, L, g = rng.uniform(0.3, 3.0, 3)
        pend = CartesianPendulum(mass=m, length=L, g=g)
        q, qd = rng.standard_normal(2), rng.standard_normal(2)
        expected = np.array([0.0, -g]) + (g * q[1] - qd @ qd) / (q @ q) * q
        np.testing.assert_allclose(ukjax.acceleration(pend, 0.0, q, qd), expected, rtol=1e-12)
        # The rod tension F^c = m (g q2 - |qd|^2)/|q|^2 q.
        M, Q = ukjax.mass_and_force(pend, 0.0, q, qd)
        A, b = ukjax.constraint_matrices(pend, 0.0, q, qd)
        Qi, _ = ukjax.constraint_forces(M, Q, A, b)
        np.testing.assert_allclose(Qi, m * (g * q[1] - qd @ qd) / (q @ q) * q, rtol=1e-12)


def test_cartesian_pendulum_matches_minimal_coordinates(rng):
    """On the circle, eq 33h reproduces theta'' = -(g/L) sin(theta)."""
    L, g = 1.3, 9.81
    pend = CartesianPendulum(length=L, g=g)
    for _ in range(5):
        th, thd = rng.uniform(-3, 3), rng.uniform(-3, 3)
        q = L * np.array([np.sin(th), -np.cos(th)])
        qd = L * thd * np.array([np.cos(th), np.sin(th)])
        qdd = np.asarray(ukjax.acceleration(pend, 0.0, q, qd))
        thdd = -(g / L) * np.sin(th)
        expected = L * thdd * np.array([np.cos(th), np.sin(th)]) + L * thd**2 * np.array(
            [-np.sin(th), np.cos(th)]
        )
        np.testing.assert_allclose(qdd, expected, rtol=1e-11, atol=1e-12)


def test_duffing_eq_67_and_68(rng):
    """Seed 000 eqs 65-68: closed-form acceleration and constraint force; F1 + F2 = 0."""
    sys = DuffingOscillator()
    m1, m2 = sys.m1, sys.m2
    for _ in range(10):
        t = rng.uniform(0, 5)
        q, qd = rng.standard_normal(2), rng.standard_normal(2)
        M, Q = ukjax.mass_and_force(sys, t, q, qd)
        a = np.asarray(Q) / np.array([m1, m2])
        w = sys.omega
        b = (
            -sys.A0
            * np.exp(-sys.alpha * t)
            * ((w**2 - sys.alpha**2) * np.sin(w * t) + 2 * w * sys.alpha * np.cos(w * t))
        )
        A, b_auto = ukjax.constraint_matrices(sys, t, q, qd)
        np.testing.assert_allclose(A, [[1.0, -1.0]], atol=1e-15)
        np.testing.assert_allclose(b_auto, [b], rtol=1e-12, atol=1e-12)
        mu = m1 * m2 / (m1 + m2)
        expected = a + mu * np.array([1 / m1, -1 / m2]) * (b - a[0] + a[1])
        np.testing.assert_allclose(ukjax.acceleration(sys, t, q, qd), expected, rtol=1e-12)
        Fc, _ = ukjax.constraint_forces(M, Q, A, b_auto)
        np.testing.assert_allclose(Fc, mu * np.array([1, -1]) * (b - a[0] + a[1]), rtol=1e-12)
        assert abs(float(Fc[0] + Fc[1])) < 1e-12


def test_duffing_impressed_force_eq_60(rng):
    sys = DuffingOscillator()
    q, qd = rng.standard_normal(2), rng.standard_normal(2)
    K = np.array([[sys.k1, -sys.k1], [-sys.k1, sys.k1 + sys.k2]])
    Cm = np.array([[sys.c1, -sys.c1], [-sys.c1, sys.c1 + sys.c2]])
    u = q[0] - q[1]
    gnl = np.array([sys.k1_nl * u**3, sys.k2_nl * q[1] ** 3 - sys.k1_nl * u**3])
    _, Q = ukjax.mass_and_force(sys, 0.0, q, qd)
    np.testing.assert_allclose(Q, -(K @ q + Cm @ qd + gnl), rtol=1e-12)


def _eq77(L1, L2, g, q, qd):
    x, y, z = q
    al = qd @ qd
    D = L2**2 * x**2 + (L1**2 + L2**2) * y**2 - 2 * L1 * L2 * x * z + L1**2 * z**2
    return (
        np.array(
            [
                -al * L2 * (L2 * x - L1 * z) + g * L2**2 * y**2,
                -y * (al * L1**2 + al * L2**2 + g * L2**2 * x - g * L1 * L2 * z),
                al * L1 * (L2 * x - L1 * z) - g * L1 * L2 * y**2,
            ]
        )
        / D
    )


@pytest.mark.parametrize("L1,L2", [(1.0, 1.0), (0.7, 1.6), (2.0, 0.5)])
def test_double_rod_pendulum_eq_77(rng, L1, L2):
    """Seed 000 eq 77 (eq 78 for L1 = L2 = 1) at random states, on and off the curve."""
    g = 10.0
    sys = DoubleRodPendulum(L1=L1, L2=L2, g=g)
    for _ in range(10):
        q, qd = rng.standard_normal(3), rng.standard_normal(3)
        np.testing.assert_allclose(
            ukjax.acceleration(sys, 0.0, q, qd), _eq77(L1, L2, g, q, qd), rtol=1e-10, atol=1e-12
        )


def test_double_rod_pendulum_eq_78_at_seed_initial_state():
    sys = DoubleRodPendulum()
    q0, qd0 = sys.initial_state()
    # Delta = 1, alpha = 16: qdd = [-16, 0, 16] (eq 78 by hand).
    np.testing.assert_allclose(
        ukjax.acceleration(sys, 0.0, q0, qd0), [-16.0, 0.0, 16.0], atol=1e-12
    )
