"""Automatic (A, b) and Lagrange terms against hand derivations."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ukjax
from references import turntable_ball_centre
from ukjax._dynamics import mass_matrix


class Particle(ukjax.System):
    """A unit point mass in 3-D with pluggable constraints (seed 000 §2.3 / seed 002 §3)."""

    kind: str = "sphere"
    L: float = 1.3

    def kinetic_energy(self, t, q, qd):
        return 0.5 * qd @ qd

    def holonomic(self, t, q):
        x, y, z = q
        if self.kind == "sphere":
            return jnp.array([x**2 + y**2 + z**2 - self.L**2])
        if self.kind == "line":
            return jnp.array([y, z])
        if self.kind == "rheonomic":  # x + y^2 + z - t = 0 (seed 000 eq 55)
            return jnp.array([x + y**2 + z - t])
        if self.kind == "moving_pivot":  # (x - s(t))^2 + y^2 - L^2, s = sin(2t)
            return jnp.array([(x - jnp.sin(2 * t)) ** 2 + y**2 - self.L**2])
        return None

    def nonholonomic(self, t, q, qd):
        x, y, z = q
        xd, yd, zd = qd
        if self.kind == "xz2y":  # xdot = z^2 ydot (seed 000 eq 35, corrected)
            return jnp.array([xd - z**2 * yd])
        if self.kind == "pfaff_2z":  # xdot + 2 z ydot + zdot = 0 (seed 002 eq 16)
            return jnp.array([xd + 2 * z * yd + zd])
        if self.kind == "nonlinear":  # xdot^2 + ydot^2 - (1 + t) zdot^2 = 0
            return jnp.array([xd**2 + yd**2 - (1 + t) * zd**2])
        return None


def _ab(kind, t, q, qd):
    A, b = ukjax.constraint_matrices(Particle(kind=kind), t, q, qd)
    return np.asarray(A), np.asarray(b)


def test_table_of_seed_000_and_002(rng):
    for _ in range(5):
        t = rng.uniform(0, 3)
        q, qd = rng.standard_normal(3), rng.standard_normal(3)
        x, y, z = q
        xd, yd, zd = qd
        A, b = _ab("sphere", t, q, qd)  # 2 x [x y z], b = -2 |qd|^2
        np.testing.assert_allclose(A, 2 * q[None], rtol=1e-13)
        np.testing.assert_allclose(b, [-2 * qd @ qd], rtol=1e-13)
        A, b = _ab("line", t, q, qd)
        np.testing.assert_allclose(A, [[0, 1, 0], [0, 0, 1]], atol=0)
        np.testing.assert_allclose(b, [0, 0], atol=0)
        A, b = _ab("xz2y", t, q, qd)  # [1, -z^2, 0], b = 2 z zdot ydot
        np.testing.assert_allclose(A, [[1, -(z**2), 0]], rtol=1e-13)
        np.testing.assert_allclose(b, [2 * z * zd * yd], rtol=1e-13)
        A, b = _ab("rheonomic", t, q, qd)  # [1, 2y, 1], b = -2 ydot^2
        np.testing.assert_allclose(A, [[1, 2 * y, 1]], rtol=1e-13)
        np.testing.assert_allclose(b, [-2 * yd**2], rtol=1e-13)
        A, b = _ab("pfaff_2z", t, q, qd)  # [1, 2z, 1], b = -2 ydot zdot
        np.testing.assert_allclose(A, [[1, 2 * z, 1]], rtol=1e-13)
        np.testing.assert_allclose(b, [-2 * yd * zd], rtol=1e-13)


def test_mixed_time_derivative_of_moving_pivot(rng):
    """phi = (x - s)^2 + y^2 - L^2 with s = sin 2t. Hand derivation of phi'' = 0:
    2(x - s) x'' + 2 y y'' = -[2 (x' - s')^2 + 2 y'^2 - 2 (x - s) s'']
    (the terms seed 001 eq 30 drops are exactly those with s' and s'')."""
    for _ in range(5):
        t = rng.uniform(0, 3)
        q, qd = rng.standard_normal(3), rng.standard_normal(3)
        x, y, _ = q
        xd, yd, _ = qd
        s, sd, sdd = np.sin(2 * t), 2 * np.cos(2 * t), -4 * np.sin(2 * t)
        A, b = _ab("moving_pivot", t, q, qd)
        np.testing.assert_allclose(A, [[2 * (x - s), 2 * y, 0]], rtol=1e-13)
        expected = -(2 * (xd - sd) ** 2 + 2 * yd**2 - 2 * (x - s) * sdd)
        np.testing.assert_allclose(b, [expected], rtol=1e-12)


def test_nonlinear_nonholonomic(rng):
    """psi = xd^2 + yd^2 - (1 + t) zd^2: A = [2xd, 2yd, -2(1+t)zd], b = zd^2."""
    t = 0.7
    q, qd = rng.standard_normal(3), rng.standard_normal(3)
    A, b = _ab("nonlinear", t, q, qd)
    np.testing.assert_allclose(A, [[2 * qd[0], 2 * qd[1], -2 * (1 + t) * qd[2]]], rtol=1e-13)
    np.testing.assert_allclose(b, [qd[2] ** 2], rtol=1e-13)


def test_holonomicity_test_cap_26():
    """Seed 002 eq 11 for (1, 2z, 1) equals 2 (the seed prints 1); for (1, 2y, 1) it is 0."""
    from ukjax.systems import holonomicity

    q = jnp.array([0.3, -0.4, 0.9])
    assert float(holonomicity(lambda q: jnp.array([1.0, 2 * q[2], 1.0]), q)) == pytest.approx(2.0)
    assert float(holonomicity(lambda q: jnp.array([1.0, 2 * q[1], 1.0]), q)) == pytest.approx(0.0)


def test_stacking_order_and_raw_rows(rng):
    class Mixed(ukjax.System):
        def mass_matrix(self, t, q):
            return jnp.eye(3)

        def holonomic(self, t, q):
            return q[0] - 1.0  # a scalar is accepted as one row

        def nonholonomic(self, t, q, qd):
            return jnp.array([qd[1] - q[2] * qd[0]])

        def acceleration_constraint(self, t, q, qd):
            return jnp.array([[0.0, 0.0, 1.0]]), jnp.array([0.5])

    q, qd = rng.standard_normal(3), rng.standard_normal(3)
    A, b = ukjax.constraint_matrices(Mixed(), 0.0, q, qd)
    np.testing.assert_allclose(A, [[1, 0, 0], [-q[2], 1, 0], [0, 0, 1]], atol=1e-15)
    np.testing.assert_allclose(b, [0, qd[2] * qd[0], 0.5], atol=1e-15)


def test_constant_raw_rows_may_be_written_with_integers():
    """`acceleration_constraint` rows are used as given (never differentiated), so a
    user's `jnp.array([[1, 1]])`, `jnp.array([1])` means x'' + y'' = 1: with m = 2 and no
    force the minimum-M-norm acceleration is (1/2, 1/2), x = y = t^2/4. (An integer
    holonomic constraint is still refused: it would have zero derivative,
    tests/test_error_model.py.)"""

    class Raw(ukjax.System):
        m: int = 2

        def kinetic_energy(self, t, q, qd):
            return 0.5 * self.m * qd @ qd

        def acceleration_constraint(self, t, q, qd):
            return jnp.array([[1, 1]]), jnp.array([1])

    A, b = ukjax.constraint_matrices(Raw(), 0.0, jnp.zeros(2), jnp.zeros(2))
    assert A.dtype == b.dtype == jnp.float64
    ts = jnp.array([0.0, 1.0, 2.0])
    sol = ukjax.simulate(Raw(), [0, 0], [0, 0], ts)
    np.testing.assert_allclose(sol.q, 0.25 * np.asarray(ts)[:, None] ** 2 * np.ones(2), atol=1e-12)


class PolarParticle(ukjax.System):
    """T = m/2 (rd^2 + r^2 thd^2 + h(t) thd) with an explicit time dependence."""

    m: float = 1.4

    def kinetic_energy(self, t, q, qd):
        r, _ = q
        rd, thd = qd
        return 0.5 * self.m * (rd**2 + r**2 * thd**2) + jnp.sin(t) * r * thd


def test_lagrange_terms_from_kinetic_energy(rng):
    """Coriolis/centrifugal and explicit-time terms derived by hand:
    p_r = m rd, p_th = m r^2 thd + sin(t) r
    Q_r = dT/dr - d/dt(p_r)|explicit = m r thd^2 + sin(t) thd
    Q_th = 0 - [2 m r rd thd + sin(t) rd + cos(t) r]."""
    sys = PolarParticle()
    for _ in range(5):
        t = rng.uniform(0, 3)
        q, qd = rng.uniform(0.5, 2, 2), rng.standard_normal(2)
        r, _ = q
        rd, thd = qd
        M, Q = ukjax.mass_and_force(sys, t, q, qd)
        np.testing.assert_allclose(M, np.diag([sys.m, sys.m * r**2]), rtol=1e-13)
        expected = [
            sys.m * r * thd**2 + np.sin(t) * thd,
            -(2 * sys.m * r * rd * thd + np.sin(t) * rd + np.cos(t) * r),
        ]
        np.testing.assert_allclose(Q, expected, rtol=1e-12)
        # a closed-form mass_matrix beside kinetic_energy: M from it, Q still from T
        M2, Q2 = ukjax.mass_and_force(ClosedFormMass(), t, q, qd)
        np.testing.assert_allclose(M2, 2.0 * M, rtol=1e-13)
        np.testing.assert_allclose(Q2, expected, rtol=1e-12)
        np.testing.assert_allclose(mass_matrix(sys, t, jnp.asarray(q), jnp.asarray(qd)), M)


class ClosedFormMass(PolarParticle):
    """PolarParticle with a (deliberately different) closed-form mass matrix, which wins."""

    def mass_matrix(self, t, q):
        return 2.0 * jnp.diag(jnp.array([self.m, self.m * q[0] ** 2]))


class TurntableBall(ukjax.System):
    """A user's uniform ball rolling without slipping on a turntable spinning at `spin`
    about the vertical through the origin: (x, y) of its centre and three angles whose
    rates are its angular velocity (valid for a sphere: isotropic inertia, no potential);
    the contact point moves with the table, v + w x (-r e_z) = spin e_z x (x, y, 0), two
    nonholonomic constraints that depend on the position."""

    m: int = 2
    r: float = 0.1
    spin: float = 3.0

    def kinetic_energy(self, t, q, qd):
        inertia = 0.4 * self.m * self.r**2
        return 0.5 * self.m * (qd[0] ** 2 + qd[1] ** 2) + 0.5 * inertia * (qd[2:] @ qd[2:])

    def nonholonomic(self, t, q, qd):
        x, y = q[0], q[1]
        return jnp.array(
            [qd[0] - self.r * qd[3] + self.spin * y, qd[1] + self.r * qd[2] - self.spin * x]
        )


def _turntable_run(spin, x0=jnp.array([1.0, 0.0]), v0=jnp.array([0.0, 0.5])):
    ball = TurntableBall(spin=spin)
    w = jnp.array([spin * x0[0] - v0[1], v0[0] + spin * x0[1]]) / ball.r  # rolling at t0
    q0 = jnp.array([x0[0], x0[1], 0.0, 0.0, 0.0])
    qd0 = jnp.concatenate([v0, w, jnp.array([0.7])])
    return ukjax.simulate(ball, q0, qd0, jnp.linspace(0.0, 10.0, 101))


def test_a_ball_on_a_turntable_circles_at_two_sevenths_of_its_spin():
    sol, ts = _turntable_run(3.0), jnp.linspace(0.0, 10.0, 101)
    want = turntable_ball_centre(3.0, jnp.array([1.0, 0.0]), jnp.array([0.0, 0.5]), ts)
    np.testing.assert_allclose(sol.q[:, :2], want, atol=1e-9)
    np.testing.assert_allclose(sol.qd[:, 4], 0.7, rtol=1e-12)  # no torque about the vertical


@pytest.mark.slow  # a reverse-mode compile
def test_the_turntable_balls_position_differentiates_as_its_closed_form():
    got = jax.jacrev(lambda s: _turntable_run(s).q[-1, :2])(3.0)
    x0, v0 = jnp.array([1.0, 0.0]), jnp.array([0.0, 0.5])
    want = jax.jacrev(lambda s: turntable_ball_centre(s, x0, v0, 10.0))(3.0)
    np.testing.assert_allclose(got, want, rtol=1e-7)
