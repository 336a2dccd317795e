r"""A particle in polar coordinates: the projectile of seed 002 Ex. 1 and the logarithmic
spiral of seed 002 §8.1 (Zhao et al. 2018)."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp

from .._system import System


class PolarProjectile(System):
    r"""A point mass under gravity $-g\hat y$ in polar coordinates $q = [r, \theta]$.

    `metric="lagrangian"` (default): $T = \tfrac12 m(\dot r^2 + r^2\dot\theta^2)$,
    $V = mgr\sin\theta$, so $M = \mathrm{diag}(m, mr^2)$ and the centrifugal/Coriolis
    terms come from autodiff; this is the physically correct Gauss metric under
    constraints.

    `metric="seed"`: seed 002 eqs 7-9 verbatim, $M = \mathrm{diag}(m, m)$ and "given force"
    $F = [mr\dot\theta^2 - mg\sin\theta,\ (-2m\dot r\dot\theta - mg\cos\theta)/r]$. Unconstrained,
    both give the same accelerations; under constraints they differ unless the constraints
    fix $\ddot q$ completely (SEED_CASES.md §2.7 note). Singular at $r = 0$.
    """

    mass: float = 1.0
    g: float = 9.81
    metric: str = eqx.field(static=True, default="lagrangian")

    def __check_init__(self):
        if self.metric not in ("lagrangian", "seed"):
            raise ValueError(f"metric must be 'lagrangian' or 'seed'; got {self.metric!r}.")

    def mass_matrix(self, t, q):
        if self.metric == "seed":
            return self.mass * jnp.eye(2, dtype=q.dtype)
        return jnp.diag(jnp.stack([self.mass, self.mass * q[0] ** 2]).astype(q.dtype))

    def forces(self, t, q, qd):
        r, th = q
        rd, thd = qd
        m, g = self.mass, self.g
        if self.metric == "seed":
            return jnp.stack([m * r * thd**2 - m * g * jnp.sin(th),
                              (-2 * m * rd * thd - m * g * jnp.cos(th)) / r])
        # Lagrangian: Q = dT/dq - d/dt(dT/dqd)|_explicit - dV/dq
        return jnp.stack([m * r * thd**2 - m * g * jnp.sin(th),
                          -2 * m * r * rd * thd - m * g * r * jnp.cos(th)])


class LogSpiralParticle(PolarProjectile):
    r"""The unit-mass particle of seed 002 §8.1 held on $r = e^{k\theta}$ and driven along
    $\theta = \theta_0 - t$ (two holonomic constraints, eq 53; $k = 0.1$, $\theta_0 = 30$).

    $A$ is square and invertible, so $\ddot q = A^{-1}b$ whatever the metric or gravity; the
    exact motion is $\theta = \theta_0 - t$, $r = e^{k(\theta_0 - t)}$ ($= e^{3 - 0.1t}$ for
    the seed). Gravity only changes the constraint forces. The seed's metric
    (`metric="seed"`) makes the θ component of $F^C$ an angular acceleration rather than a
    torque (erratum, SEED_CASES.md §2.8); the default Lagrangian metric gives the physical
    generalized force. $g$ is not stated in the seed; 9.81 is assumed.
    """

    k: float = 0.1
    theta0: float = 30.0

    def holonomic(self, t, q):
        r, th = q
        return jnp.stack([r - jnp.exp(self.k * th), th + t - self.theta0])

    def initial_state(self):
        """The seed's consistent initial state: $r = e^{3}$, $\\theta = 30$, $\\dot r = -0.1e^3$,
        $\\dot\\theta = -1$ (for the default k, theta0)."""
        r0 = jnp.exp(self.k * self.theta0)
        return jnp.stack([r0, jnp.asarray(self.theta0)]), jnp.stack([-self.k * r0, -jnp.ones(())])

    def exact(self, t):
        """The exact solution $(r(t), \\theta(t))$."""
        th = self.theta0 - t
        return jnp.exp(self.k * th), th
