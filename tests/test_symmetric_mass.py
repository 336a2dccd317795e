"""A mass matrix symmetric by construction (the Hessian of a `kinetic_energy`): the
unconstrained UK solve factors its lower triangle as it is, without averaging M with its
transpose, and the Hessian is returned without a transposed copy (`benchmarks/RESULTS.md`,
stop 87). Same accelerations and derivatives as the closed-form mass matrix."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_xla import primitives

import ukjax
from ukjax._dynamics import mass_and_force, symmetric_mass
from ukjax._uk import uk_terms


G = 9.81


class AngleChain(ukjax.System):
    """A user's chain of unit links and point masses in absolute angles, by its energies:
    the bobs' velocities are the partial sums of the links' (a lower-triangular matrix of
    ones), and a torque acts on the first link (so the motion depends on the mass)."""

    links: int
    mass: float = 1.0
    torque: float = 2.0

    def _sums(self, x):
        return jnp.tril(jnp.ones((self.links, self.links), x.dtype)) @ x

    def kinetic_energy(self, t, q, qd):
        vx, vy = self._sums(jnp.cos(q) * qd), self._sums(jnp.sin(q) * qd)
        return 0.5 * self.mass * (vx @ vx + vy @ vy)

    def potential_energy(self, t, q):
        return -G * self.mass * jnp.sum(self._sums(jnp.cos(q)))

    def forces(self, t, q, qd):
        return jnp.zeros_like(q).at[0].set(self.torque)


class AngleChainMass(AngleChain):
    """The same chain with its mass matrix written: M_ij = m (N - max(i, j)) cos(q_i - q_j)."""

    def mass_matrix(self, t, q):
        k = np.arange(self.links)
        behind = self.links - np.maximum.outer(k, k)  # the bobs beyond both links
        return self.mass * behind * jnp.cos(q[:, None] - q[None, :])


def _spd(rng, n):
    X = rng.normal(size=(n, n))
    return jnp.asarray(X @ X.T + n * np.eye(n))


@pytest.mark.parametrize("n", [3, 12])  # unrolled kernels, LAPACK's
def test_a_symmetric_mass_matrix_is_factored_without_its_transpose(rng, n):
    M, Q = _spd(rng, n), jnp.asarray(rng.normal(size=n))
    A, b = jnp.zeros((0, n)), jnp.zeros(0)
    qdd = lambda M, symmetric: uk_terms(M, Q, A, b, symmetric=symmetric).qdd
    assert "transpose" in primitives(lambda M: qdd(M, False), M)
    assert "transpose" not in primitives(lambda M: qdd(M, True), M)
    # an exactly symmetric M: (M + M^T) / 2 is M, so both give the same bits
    np.testing.assert_array_equal(qdd(M, True), qdd(M, False))
    # what is factored is the lower triangle: the upper one is not read
    skew = M + jnp.triu(jnp.asarray(rng.normal(size=(n, n))), 1)
    np.testing.assert_allclose(qdd(skew, True), jnp.linalg.solve(M, Q), rtol=1e-12, atol=1e-12)
    assert float(jnp.max(jnp.abs(qdd(skew, False) - qdd(M, False)))) > 1e-6


def test_with_constraint_rows_a_symmetric_mass_matrix_is_averaged_as_before(rng):
    n = 10
    M, Q = _spd(rng, n), jnp.asarray(rng.normal(size=n))
    A, b = jnp.asarray(rng.normal(size=(3, n))), jnp.asarray(rng.normal(size=3))
    skew = M + 1e-3 * jnp.triu(jnp.asarray(rng.normal(size=(n, n))), 1)
    one = lambda symmetric: uk_terms(skew, Q, A, b, symmetric=symmetric).qdd
    np.testing.assert_array_equal(one(True), one(False))


@pytest.mark.parametrize("links", [3, 12])
def test_the_hessian_mass_matrix_gives_the_closed_form_motion(rng, links):
    """The chain by its kinetic energy (symmetric by construction) against the same chain
    with its mass matrix written (averaged with its transpose, as any written M): M, the
    accelerations, and their derivatives with respect to the state and a parameter."""
    T, W = AngleChain(links=links, mass=1.5), AngleChainMass(links=links, mass=1.5)
    assert symmetric_mass(T) and not symmetric_mass(W)
    q, qd = jnp.asarray(rng.uniform(-1, 1, links)), jnp.asarray(rng.uniform(-1, 1, links))
    M_T, Q_T = mass_and_force(T, 0.0, q, qd)
    M_W, Q_W = mass_and_force(W, 0.0, q, qd)
    np.testing.assert_allclose(M_T, M_W, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(Q_T, Q_W, rtol=1e-12, atol=1e-12)
    acc = lambda s, q, qd: ukjax.acceleration(s, 0.0, q, qd)
    np.testing.assert_allclose(acc(T, q, qd), acc(W, q, qd), rtol=1e-11, atol=1e-11)
    batch = jnp.asarray(rng.uniform(-1, 1, (5, links)))
    np.testing.assert_allclose(
        jax.jit(jax.vmap(lambda q: acc(T, q, qd)))(batch),
        jax.vmap(lambda q: acc(W, q, qd))(batch),
        rtol=1e-11,
        atol=1e-11,
    )
    # derivatives through the factor of the lower triangle, against central differences
    J = jax.jacfwd(lambda q: acc(T, q, qd))(q)
    np.testing.assert_allclose(J, jax.jacrev(lambda q: acc(T, q, qd))(q), rtol=1e-10, atol=1e-10)
    h = 1e-6
    fd = jnp.stack(
        [(acc(T, q + h * e, qd) - acc(T, q - h * e, qd)) / (2 * h) for e in jnp.eye(links)], 1
    )
    np.testing.assert_allclose(J, fd, rtol=1e-6, atol=1e-6)
    dm = jax.grad(lambda m: jnp.sum(acc(AngleChain(links=links, mass=m), q, qd) ** 2))(1.5)
    fdm = (
        jnp.sum(acc(AngleChain(links=links, mass=1.5 + h), q, qd) ** 2)
        - jnp.sum(acc(AngleChain(links=links, mass=1.5 - h), q, qd) ** 2)
    ) / (2 * h)
    np.testing.assert_allclose(dm, fdm, rtol=1e-6, atol=1e-8)
