r"""A particle in polar coordinates: the projectile of Zhao et al. 2018 (Ex. 1) and their
logarithmic spiral (§8.1), with the metric as a strategy object.

Example:
    >>> import jax.numpy as jnp, ukjax
    >>> from ukjax.systems import LagrangianMetric, UnitMetric
    >>> q = jnp.array([2.0, 0.0])
    >>> LagrangianMetric().mass_matrix(1.0, q).tolist(), UnitMetric().mass_matrix(1.0, q).tolist()
    ([[1.0, 0.0], [0.0, 4.0]], [[1.0, 0.0], [0.0, 1.0]])
"""

from __future__ import annotations

import abc

import equinox as eqx
import jax
import jax.numpy as jnp

from .._system import System


class AbstractPolarMetric(eqx.Module):
    """How a particle in polar coordinates $q = (r, \\theta)$ weighs accelerations: its mass
    matrix and the matching generalized force (gravity $-g\\hat y$)."""

    @abc.abstractmethod
    def mass_matrix(self, m, q) -> jax.Array:
        """(2, 2) mass matrix."""

    @abc.abstractmethod
    def forces(self, m, g, q, qd) -> jax.Array:
        """(2,) generalized force, velocity terms included."""


class LagrangianMetric(AbstractPolarMetric):
    r"""$T = \tfrac12 m(\dot r^2 + r^2\dot\theta^2)$, $V = mgr\sin\theta$: $M = \mathrm{diag}(m,
    mr^2)$, $Q = [mr\dot\theta^2 - mg\sin\theta,\ -2mr\dot r\dot\theta - mgr\cos\theta]$. The
    physically correct Gauss metric under constraints (the default)."""

    def mass_matrix(self, m, q):
        return jnp.diag(jnp.stack([m, m * q[0] ** 2]).astype(q.dtype))

    def forces(self, m, g, q, qd):
        r, th = q
        rd, thd = qd
        return jnp.stack(
            [m * r * thd**2 - m * g * jnp.sin(th), -2 * m * r * rd * thd - m * g * r * jnp.cos(th)]
        )


class UnitMetric(AbstractPolarMetric):
    r"""Zhao et al. 2018, eqs 7-9 verbatim: $M = \mathrm{diag}(m, m)$ and the "given force"
    $F = [mr\dot\theta^2 - mg\sin\theta,\ (-2m\dot r\dot\theta - mg\cos\theta)/r]$.

    Unconstrained it gives the same accelerations as :class:`LagrangianMetric`; under
    constraints the two differ unless the constraints fix $\ddot q$ completely."""

    def mass_matrix(self, m, q):
        return m * jnp.eye(2, dtype=q.dtype)

    def forces(self, m, g, q, qd):
        r, th = q
        rd, thd = qd
        return jnp.stack(
            [m * r * thd**2 - m * g * jnp.sin(th), (-2 * m * rd * thd - m * g * jnp.cos(th)) / r]
        )


class PolarProjectile(System):
    r"""A point mass under gravity $-g\hat y$ in polar coordinates $q = [r, \theta]$
    (Zhao et al. 2018, Ex. 1). Singular at $r = 0$.

    `metric`: :class:`LagrangianMetric` (default) or :class:`UnitMetric` (the paper's
    eqs 7-9).

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import PolarProjectile, UnitMetric
        >>> q, qd = jnp.array([2.0, 0.5]), jnp.array([0.3, 0.4])
        >>> a = ukjax.acceleration(PolarProjectile(), 0.0, q, qd)
        >>> b = ukjax.acceleration(PolarProjectile(metric=UnitMetric()), 0.0, q, qd)
        >>> bool(jnp.allclose(a, b))   # unconstrained: the metric does not matter
        True
    """

    mass: float = 1.0
    g: float = 9.81
    metric: AbstractPolarMetric = LagrangianMetric()

    def num_coordinates(self) -> int:
        return 2

    def mass_matrix(self, t, q):
        return self.metric.mass_matrix(self.mass, q)

    def forces(self, t, q, qd):
        return self.metric.forces(self.mass, self.g, q, qd)


class LogSpiralParticle(PolarProjectile):
    r"""The unit-mass particle of Zhao et al. 2018, §8.1, held on $r = e^{k\theta}$ and
    driven along $\theta = \theta_0 - t$ (two holonomic constraints, eq 53; $k = 0.1$,
    $\theta_0 = 30$).

    $A$ is square and invertible, so $\ddot q = A^{-1}b$ whatever the metric or gravity; the
    exact motion is $\theta = \theta_0 - t$, $r = e^{k(\theta_0 - t)}$ ($= e^{3 - 0.1t}$ for
    the paper's values). Gravity only changes the constraint forces. The paper's metric
    (`metric=UnitMetric()`) makes the θ component of $F^C$ an angular acceleration rather
    than a torque (an erratum); the default Lagrangian metric gives the physical
    generalized force. $g$ is not stated in the paper; 9.81 is assumed.

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import LogSpiralParticle
        >>> s = LogSpiralParticle()
        >>> float(ukjax.constraint_residuals(s, 0.0, *s.initial_state()).max_abs()) < 1e-12
        True
    """

    k: float = 0.1
    theta0: float = 30.0

    def holonomic(self, t, q):
        r, th = q
        return jnp.stack([r - jnp.exp(self.k * th), th + t - self.theta0])

    def initial_state(self):
        """The paper's consistent initial state: $r = e^{3}$, $\\theta = 30$,
        $\\dot r = -0.1e^3$, $\\dot\\theta = -1$ (for the default k, theta0)."""
        r0 = jnp.exp(self.k * self.theta0)
        return jnp.stack([r0, jnp.asarray(self.theta0)]), jnp.stack([-self.k * r0, -jnp.ones(())])
