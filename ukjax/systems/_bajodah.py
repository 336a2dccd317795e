r"""Particles of Bajodah 2003: on a cone surface (Ex. 2.1/4.2) and under a
rheonomic nonholonomic constraint (Ex. 2.2).

Example:
    >>> import jax.numpy as jnp, ukjax
    >>> from ukjax.systems import ConeSurfaceParticle, NonholonomicParticle
    >>> q, qd = jnp.array([1.0, 0.0, 0.5]), jnp.array([0.0, 0.4, 0.0])
    >>> ukjax.acceleration(ConeSurfaceParticle(), 0.0, q, qd).shape
    (3,)
    >>> A, b = ukjax.constraint_matrices(NonholonomicParticle(), 0.0, q, qd)
    >>> A.shape
    (1, 3)
"""

from __future__ import annotations

import jax.numpy as jnp

from .._system import System


class ConeSurfaceParticle(System):
    r"""A particle on the surface $r\phi = c$ in spherical coordinates, Bajodah 2003, Ex. 2.1.

    $q = (r, \theta, \phi)$: $\theta$ is the azimuth from the X axis, $\phi$ the angle from
    the Z axis. $T = \tfrac12 m(\dot r^2 + r^2\sin^2\phi\,\dot\theta^2 + r^2\dot\phi^2)$, so
    the velocity terms come from autodiff. The active force has constant components
    $F_r, F_\theta, F_\phi$ along the paper's frame $\mathbf i = \mathbf e_r$,
    $\mathbf j = \mathbf e_\theta$, $\mathbf k = \mathbf i\times\mathbf j = -\mathbf e_\phi$,
    giving the generalized force $[F_r,\ r\sin\phi F_\theta,\ -rF_\phi]$ (the minus sign
    from $\mathbf k = -\mathbf e_\phi$). The ideal holonomic constraint is $r\phi - c = 0$.

    Generalized speeds of the thesis: $u_1 = \dot r$, $u_2 = r\dot\theta\sin\phi$,
    $u_3 = -r\dot\phi$ (:meth:`generalized_speeds`). The paper gives no numbers; the
    defaults here ($m = 1$, $c = 0.5$, forces $(0.3, -0.2, 0.1)$) are arbitrary.
    """

    mass: float = 1.0
    c: float = 0.5
    F_r: float = 0.3
    F_theta: float = -0.2
    F_phi: float = 0.1

    def num_coordinates(self) -> int:
        return 3

    def kinetic_energy(self, t, q, qd):
        r, _, ph = q
        rd, thd, phd = qd
        return 0.5 * self.mass * (rd**2 + (r * jnp.sin(ph) * thd) ** 2 + (r * phd) ** 2)

    def forces(self, t, q, qd):
        r, _, ph = q
        return jnp.stack([self.F_r + 0.0 * r, r * jnp.sin(ph) * self.F_theta, -r * self.F_phi])

    def holonomic(self, t, q):
        return jnp.stack([q[0] * q[2] - self.c])

    @staticmethod
    def generalized_speeds(q, qd):
        r, _, ph = q
        rd, thd, phd = qd
        return jnp.stack([rd, r * thd * jnp.sin(ph), -r * phd])


class NonholonomicParticle(System):
    r"""A particle with the rheonomic nonholonomic constraint $\dot y = z\dot x + \alpha(t)$,
    Bajodah 2003, Ex. 2.2 (eqs 76-96).

    $q = (x, y, z)$, $M = mI$, constant forces $(F_x, F_y, F_z)$, and
    $\alpha(t) = \alpha_0\sin(\omega t)$ (the paper leaves $\alpha$ unspecified; this
    smooth choice is documented here). UK gives $A = [-z, 1, 0]$,
    $b = \dot z\dot x + \dot\alpha(t)$.
    """

    mass: float = 1.0
    F_x: float = 0.5
    F_y: float = -0.3
    F_z: float = 0.2
    alpha0: float = 1.0
    omega: float = 1.0

    def num_coordinates(self) -> int:
        return 3

    def mass_matrix(self, t, q):
        return self.mass * jnp.eye(3, dtype=q.dtype)

    def forces(self, t, q, qd):
        return jnp.stack([self.F_x, self.F_y, self.F_z]).astype(q.dtype) + 0.0 * q

    def alpha(self, t):
        return self.alpha0 * jnp.sin(self.omega * t)

    def nonholonomic(self, t, q, qd):
        return jnp.stack([qd[1] - q[2] * qd[0] - self.alpha(t)])
