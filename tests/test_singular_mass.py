"""Singular (positive semi-definite) mass matrices: where the constraints fix what M leaves
free ([M; A] of full column rank) the motion is unique (Udwadia & Phohomsiri 2006) and
ukjax gives it for systems that declare `semidefinite_mass`; where they do not, or the
system does not declare it, a result code, never inf, NaN or success.

References written here: the closed form of a coupled pair whose kinetic energy depends on
the sum of the velocities only, and Euler's rigid-body equations (scipy DOP853) for a
torque-free body in unit-quaternion coordinates with T = 1/2 w^T J w and no fictitious
inertia for the quaternion's norm."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import ukjax


class SumCoupled(ukjax.System):
    """T = 1/2 (qd0^2 + qd1^2) + c qd0 qd1: singular at c = 1 (only qd0 + qd1 has inertia);
    forces f; `tied` adds the constraint q0 = q1, which fixes the free combination."""

    c: float = 1.0
    f0: float = 1.0
    f1: float = 3.0
    tied: bool = eqx.field(static=True, default=True)

    def semidefinite_mass(self):
        return True

    def mass_matrix(self, t, q):
        return jnp.array([[1.0, self.c], [self.c, 1.0]], dtype=q.dtype)

    def forces(self, t, q, qd):
        return jnp.array([self.f0, self.f1], dtype=q.dtype)

    def holonomic(self, t, q):
        return jnp.array([q[0] - q[1]]) if self.tied else None


def test_a_singular_pair_tied_by_a_constraint_moves_as_its_reduced_equation():
    """With q0 = q1 = x: T = (1 + c) xd^2, so xdd = (f0 + f1) / (2 (1 + c))."""
    s = SumCoupled()
    q0, qd0 = jnp.array([0.2, 0.2]), jnp.array([0.5, 0.5])
    qdd = ukjax.acceleration(s, 0.0, q0, qd0)
    np.testing.assert_allclose(qdd, [1.0, 1.0], rtol=1e-13)
    ts = jnp.linspace(0.0, 2.0, 5)
    sol = ukjax.simulate(s, q0, qd0, ts)
    x = 0.2 + 0.5 * ts + 0.5 * ts**2
    np.testing.assert_allclose(sol.q, np.stack([x, x], axis=1), rtol=0, atol=1e-11)
    assert sol.result == ukjax.RESULTS.successful
    # the constraint force is M qdd - Q (the completion does not change it)
    M, Q = s.mass_matrix(0.0, q0), s.forces(0.0, q0, qd0)
    terms = ukjax.uk_terms(M, Q, jnp.array([[1.0, -1.0]]), jnp.zeros(1), semidefinite=True)
    np.testing.assert_allclose(terms.qdd, qdd, rtol=1e-13)
    np.testing.assert_allclose(terms.Qc_ideal, M @ qdd - Q, atol=1e-13)
    assert bool(terms.spd_ok)
    assert not bool(ukjax.uk_terms(M, Q, jnp.array([[1.0, -1.0]]), jnp.zeros(1)).spd_ok)


def test_a_batch_with_singular_and_regular_members_is_right_for_each():
    c = jnp.array([0.0, 0.5, 1.0])
    q0, qd0 = jnp.zeros(2), jnp.zeros(2)
    qdd = jax.vmap(lambda c_: ukjax.acceleration(SumCoupled(c=c_), 0.0, q0, qd0))(c)
    np.testing.assert_allclose(qdd[:, 0], 4.0 / (2.0 * (1.0 + c)), rtol=1e-13)
    np.testing.assert_allclose(qdd[:, 0], qdd[:, 1], rtol=1e-13)


@pytest.mark.slow  # moved from the default suite to keep it under 5 minutes
def test_gradients_through_the_completed_mass_matrix_match_differences():
    ts = jnp.linspace(0.0, 1.0, 3)

    def final_x(f1):
        return ukjax.simulate(SumCoupled(f1=f1), jnp.zeros(2), jnp.zeros(2), ts).q[-1, 0]

    g = jax.grad(final_x)(3.0)
    h = 1e-5
    fd = (final_x(3.0 + h) - final_x(3.0 - h)) / (2 * h)
    np.testing.assert_allclose(g, 0.5 / 4.0, rtol=1e-8)  # x(1) = (f0 + f1) / 8
    np.testing.assert_allclose(g, fd, rtol=1e-6)


def test_inertia_the_constraints_do_not_supply_is_a_result_code_not_inf(capfd):
    """Untied, the combination qd0 - qd1 has no inertia and nothing fixes it: the error
    names that motion and its coordinates."""
    s = SumCoupled(tied=False)
    with pytest.raises(Exception, match="no constraint fixes"):
        ukjax.acceleration(s, 0.0, jnp.zeros(2), jnp.zeros(2))
    printed = capfd.readouterr().err
    assert "undetermined motion: dq = [1, -1] (coordinates 0, 1)" in printed
    assert "semidefinite_mass" not in printed.split("undetermined motion")[1]
    sol = ukjax.simulate(s, jnp.zeros(2), jnp.zeros(2), jnp.linspace(0, 1, 3), throw=False)
    assert sol.result == ukjax.RESULTS.mass_matrix_not_spd

    class Undeclared(SumCoupled):  # determined, but the system does not say M may be singular
        def semidefinite_mass(self):
            return False

    with pytest.raises(Exception, match="semidefinite_mass"):
        ukjax.acceleration(Undeclared(), 0.0, jnp.zeros(2), jnp.zeros(2))
    printed = capfd.readouterr().err.split("undetermined motion")[1]
    assert "dq = [1, -1] (coordinates 0, 1)" in printed and "the constraints fix it" in printed

    class Extra(ukjax.System):  # a q0 longer than the system uses: q[1] has no inertia
        def kinetic_energy(self, t, q, qd):
            return 0.5 * qd[0] ** 2

    sol = ukjax.simulate(Extra(), jnp.zeros(2), jnp.ones(2), jnp.linspace(0, 1, 3), throw=False)
    assert sol.result == ukjax.RESULTS.mass_matrix_not_spd
    with pytest.raises(Exception, match="no constraint fixes"):
        ukjax.acceleration(Extra(), 0.0, jnp.zeros(2), jnp.ones(2))
    assert "dq = [0, 1] (coordinates 1)" in capfd.readouterr().err


def test_under_vmap_the_error_names_the_motion_of_the_failing_member(capfd):
    """A batch of one regular (c = 0.5) and one singular (c = -1: qd0 + qd1 has no
    inertia) member: the printed direction is the failing member's."""
    accel = lambda c: ukjax.acceleration(
        SumCoupled(c=c, tied=False), 0.0, jnp.zeros(2), jnp.zeros(2)
    )
    with pytest.raises(Exception, match="no constraint fixes"):
        jax.block_until_ready(jax.vmap(accel)(jnp.array([0.5, -1.0])))
    printed = capfd.readouterr().err
    assert "undetermined motion: dq = [1, 1] (coordinates 0, 1)" in printed
    assert "the constraints fix it" not in printed


def _G(q):
    """w_body = 2 G(q) qd for a unit quaternion q = (w, x, y, z)."""
    w, x, y, z = q
    return jnp.array([[-x, w, z, -y], [-y, -z, w, x], [-z, y, -x, w]])


class QuaternionBody(ukjax.System):
    """A torque-free rigid body in unit-quaternion coordinates: T = 1/2 w^T J w with
    w = 2 G(q) qd (M = 4 G^T J G, rank 3) and the norm constraint q.q = 1: no fictitious
    inertia for the norm direction."""

    J1: float = 1.0
    J2: float = 2.0
    J3: float = 3.0

    def semidefinite_mass(self):
        return True

    def kinetic_energy(self, t, q, qd):
        w = 2.0 * _G(q) @ qd
        return 0.5 * (self.J1 * w[0] ** 2 + self.J2 * w[1] ** 2 + self.J3 * w[2] ** 2)

    def holonomic(self, t, q):
        return jnp.array([q @ q - 1.0])


def test_a_quaternion_body_needs_no_fictitious_inertia_and_follows_euler_equations():
    J = np.array([1.0, 2.0, 3.0])
    w0 = np.array([0.3, 1.0, 0.2])  # near the unstable middle axis: a tumbling motion
    q0 = jnp.array([1.0, 0.0, 0.0, 0.0])
    qd0 = 0.5 * _G(q0).T @ jnp.asarray(w0)
    ts = jnp.linspace(0.0, 4.0, 9)
    sol = ukjax.simulate(QuaternionBody(), q0, qd0, ts)
    w = jax.vmap(lambda q, qd: 2.0 * _G(q) @ qd)(sol.q, sol.qd)

    def euler(t, w_):
        return [(J[1] - J[2]) * w_[1] * w_[2] / J[0], (J[2] - J[0]) * w_[2] * w_[0] / J[1],
                (J[0] - J[1]) * w_[0] * w_[1] / J[2]]  # fmt: skip

    ref = solve_ivp(euler, (0.0, 4.0), w0, method="DOP853", rtol=1e-12, atol=1e-12, t_eval=ts)
    np.testing.assert_allclose(w, ref.y.T, rtol=0, atol=1e-8)
    np.testing.assert_allclose(jnp.sum(sol.q**2, axis=1), 1.0, atol=1e-10)
    energy = 0.5 * jnp.sum(J * w**2, axis=1)
    np.testing.assert_allclose(energy, energy[0], rtol=1e-9)
