r"""Single particles: the constraint table of Pamplona 2021 and Zhao et al. 2018, a bead
with Coulomb friction along its wire (a non-ideal constraint, Udwadia 2004), and the
spring-loaded particle on an elliptic wire (Bajodah 2003, Ex. 4.1).

Example:
    >>> import jax.numpy as jnp, ukjax
    >>> from ukjax.systems import (CoulombBead, EllipseSpringParticle, ParticleOnSphere,
    ...                            ParticlePfaffY, ParticlePfaffZ, ParticleXZ2Y)
    >>> q, qd = jnp.array([0.0, 0.6, -0.8]), jnp.array([1.0, 0.0, 0.0])
    >>> for s in (ParticleOnSphere(), ParticleXZ2Y(), ParticlePfaffY(rhs=1.0), ParticlePfaffZ()):
    ...     print(type(s).__name__, ukjax.constraint_matrices(s, 0.0, q, qd)[0].shape)
    ParticleOnSphere (1, 3)
    ParticleXZ2Y (1, 3)
    ParticlePfaffY (1, 3)
    ParticlePfaffZ (1, 3)
    >>> for s in (CoulombBead(), EllipseSpringParticle()):
    ...     print(float(ukjax.constraint_residuals(s, 0.0, *s.initial_state()).max_abs()) < 1e-12)
    True
    True
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .._constraints import constraint_matrices
from .._dynamics import mass_and_force
from .._system import System
from .._uk import constraint_forces


class PointParticle(System):
    r"""A free point mass $q = (x, y, z)$, $M = mI$, under a constant force: the base of the
    constraint table of Pamplona 2021 (§2.3, §3.1-3.2) and Zhao et al. 2018 (§3).

    The constrained particles are subclasses, each adding one row of the table; ukjax
    derives $A$, $b$ by autodiff:

    ========================= ================================= ===============================
    class                     constraint                        $A$, $b$
    ========================= ================================= ===============================
    :class:`ParticleOnLine`   $y = 0,\ z = 0$ (holonomic)        $[e_y; e_z]$, $0$
    :class:`ParticleOnSphere` $x^2+y^2+z^2 = L^2$                $2[x,y,z]$, $-2|\dot q|^2$
    :class:`ParticleXZ2Y`     $\dot x = z^2\dot y$ (nonholonomic) $[1,-z^2,0]$, $2z\dot z\dot y$
    :class:`ParticlePfaffY`   $\dot x + 2y\dot y + \dot z = c$   $[1,2y,1]$, $-2\dot y^2$
    :class:`ParticlePfaffZ`   $\dot x + 2z\dot y + \dot z = 0$   $[1,2z,1]$, $-2\dot y\dot z$
    ========================= ================================= ===============================

    (The sphere row is $\varphi$ itself, so $A$ is twice the papers' $[x\ y\ z]$ and $b$
    twice their $-|\dot q|^2$: the same constraint.) The velocity-level Pfaffian forms are
    given as nonholonomic constraints, as the papers state them; :func:`holonomicity` tells
    which are integrable. Erratum: Pamplona 2021, eq 35 prints $\dot x = \dot z^2\dot y$;
    the table uses $z^2$, consistent with its eqs 36-37.

    Defaults: $m = 1$, $L = 1$, force $(0.3, -0.5, -9.81)$ (the papers give no numbers).

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import ParticleOnLine
        >>> qdd = ukjax.acceleration(ParticleOnLine(), 0.0, jnp.zeros(3), jnp.zeros(3))
        >>> [float(v) for v in qdd]   # only the force along x acts
        [0.3, 0.0, 0.0]
    """

    mass: float = 1.0
    F_x: float = 0.3
    F_y: float = -0.5
    F_z: float = -9.81

    def num_coordinates(self) -> int:
        return 3

    def mass_matrix(self, t, q):
        return self.mass * jnp.eye(3, dtype=q.dtype)

    def forces(self, t, q, qd):
        return jnp.stack([self.F_x, self.F_y, self.F_z]).astype(q.dtype) + 0.0 * q


class ParticleOnLine(PointParticle):
    """:class:`PointParticle` on the x axis: $y = 0$, $z = 0$."""

    def holonomic(self, t, q):
        return jnp.stack([q[1], q[2]])


class ParticleOnSphere(PointParticle):
    r""":class:`PointParticle` on the sphere $x^2 + y^2 + z^2 = L^2$."""

    L: float = 1.0

    def holonomic(self, t, q):
        return jnp.stack([q @ q - self.L**2])


class ParticleXZ2Y(PointParticle):
    r""":class:`PointParticle` under $\dot x = z^2\dot y$ (nonholonomic)."""

    def nonholonomic(self, t, q, qd):
        return jnp.stack([qd[0] - q[2] ** 2 * qd[1]])


class ParticlePfaffY(PointParticle):
    r""":class:`PointParticle` under $\dot x + 2y\dot y + \dot z = c$ (`rhs` = c: 0 or 1 in
    the papers; integrable, i.e. holonomic in disguise)."""

    rhs: float = 0.0

    def nonholonomic(self, t, q, qd):
        return jnp.stack([qd[0] + 2 * q[1] * qd[1] + qd[2] - self.rhs])


class ParticlePfaffZ(PointParticle):
    r""":class:`PointParticle` under $\dot x + 2z\dot y + \dot z = 0$ (not integrable)."""

    def nonholonomic(self, t, q, qd):
        return jnp.stack([qd[0] + 2 * q[2] * qd[1] + qd[2]])


def holonomicity(coefficients, q):
    r"""Zhao et al. 2018, eq 11: whether $\alpha\,dx + \beta\,dy + \gamma\,dz = 0$ is integrable.

    Returns $\alpha(\beta_z - \gamma_y) + \beta(\gamma_x - \alpha_z) + \gamma(\alpha_y - \beta_x)$
    at ``q``, with the partial derivatives by autodiff; it vanishes identically for a
    holonomic (integrable) Pfaffian form.

    Example:
        >>> import jax.numpy as jnp
        >>> from ukjax.systems import holonomicity
        >>> q = jnp.array([0.3, -0.4, 0.9])
        >>> float(holonomicity(lambda q: jnp.stack([1.0, 2 * q[2], 1.0]), q))
        2.0
        >>> float(holonomicity(lambda q: jnp.stack([1.0, 2 * q[1], 1.0]), q))
        0.0

    (Zhao et al. 2018 print 1 for the first; the value is 2, and the form is nonholonomic.)
    """
    J = jax.jacfwd(coefficients)(q)
    al, be, ga = coefficients(q)
    return al * (J[1, 2] - J[2, 1]) + be * (J[2, 0] - J[0, 2]) + ga * (J[0, 1] - J[1, 0])


class CoulombBead(System):
    r"""A bead on a circular wire $x^2 + y^2 = R^2$ with Coulomb friction: a non-ideal
    constraint in the sense of Udwadia 2004 (*On constrained motion*).

    $q = (x, y)$, $M = mI$, gravity $-g\hat y$ ($g = 0$: the wire lies in a horizontal
    plane). The wire does the prescribed virtual work $v^TC$ with

    $$C = -\mu\,|N|\,\frac{\dot q}{\sqrt{|\dot q|^2 + v_\mathrm{reg}^2}},$$

    where $N$ is the ideal (normal) constraint force that UK gives with $C = 0$. The UK
    equation adds $(I - A_M^+A)M^{-1}C$, the tangential friction, while the normal force
    keeps the bead on the wire. Power balance: $\dot E = -\mu|N||\dot q|$ (for
    $v_\mathrm{reg} = 0$).

    For $g = 0$ the motion has a closed form:
    $m\dot v = -\mu m v^2/R$, so $v(t) = v_0/(1 + \mu v_0 t/R)$ and the arc length is
    $s(t) = (R/\mu)\ln(1 + \mu v_0 t/R)$.

    ``v_reg > 0`` smooths the friction law near rest (needed when $g > 0$, where the bead
    stops and reverses; Coulomb stiction is not modelled).
    """

    mass: float = 1.0
    R: float = 1.0
    mu: float = 0.3
    g: float = 0.0
    v_reg: float = 0.0

    def num_coordinates(self) -> int:
        return 2

    def mass_matrix(self, t, q):
        return self.mass * jnp.eye(2, dtype=q.dtype)

    def potential_energy(self, t, q):
        return self.mass * self.g * q[1]

    def holonomic(self, t, q):
        return jnp.stack([q @ q - self.R**2])

    def normal_force(self, t, q, qd):
        """The ideal constraint force $N$ (the wire's normal reaction) at this state."""
        M, Q = mass_and_force(self, t, q, qd)
        A, b = constraint_matrices(self, t, q, qd)
        N, _ = constraint_forces(M, Q, A, b, check=False)
        return N

    def nonideal_force(self, t, q, qd):
        N = self.normal_force(t, q, qd)
        speed = jnp.sqrt(qd @ qd + self.v_reg**2)
        return -self.mu * jnp.sqrt(N @ N) * qd / speed

    def initial_state(self, v0=2.0):
        """Bead at $(R, 0)$ moving counter-clockwise with speed ``v0``."""
        return jnp.array([1.0, 0.0]) * self.R, jnp.array([0.0, 1.0]) * v0


class EllipseSpringParticle(System):
    r"""A particle on a frictionless elliptic wire, pulled to the origin by a linear spring:
    Bajodah 2003, Ex. 4.1 (eqs 227-277), in a horizontal plane (no gravity).

    $q = (x, y)$, $M = mI$, $Q = -K(x, y)$, and the holonomic constraint
    $a_e(x - x_0)^2 + b_ey^2 = c_e$: the ellipse is centred at $(x_0, 0)$, so the spring's
    anchor O is not at its centre. UK gives $A = [2a_e\bar x,\ 2b_ey]$,
    $b = -2a_e\dot x^2 - 2b_e\dot y^2$ with $\bar x = x - x_0$.

    The thesis gives no numbers; defaults $m = 1$, $K = 1$, $a_e = 1$, $b_e = 2$,
    $c_e = 1$, $x_0 = 0.5$. The thesis' Kane form (speeds $u_1 = \dot{\bar x}$,
    $u_2 = \dot y = -\epsilon u_1$, $\epsilon = a_e\bar x/(b_ey)$) is singular where the
    particle crosses $y = 0$, twice per revolution; the UK form is not. (The tests check
    the UK constraint force against the thesis' eqs 251-253 and 269.)
    """

    mass: float = 1.0
    K: float = 1.0
    a_e: float = 1.0
    b_e: float = 2.0
    c_e: float = 1.0
    x0: float = 0.5

    def num_coordinates(self) -> int:
        return 2

    def kinetic_energy(self, t, q, qd):
        return 0.5 * self.mass * qd @ qd

    def potential_energy(self, t, q):
        return 0.5 * self.K * q @ q

    def holonomic(self, t, q):
        return jnp.stack([self.a_e * (q[0] - self.x0) ** 2 + self.b_e * q[1] ** 2 - self.c_e])

    def initial_state(self, speed=1.0):
        """At the far vertex $\\bar x = \\sqrt{c_e/a_e}$, $y = 0$, moving along $+y$ (tangent)."""
        q0 = jnp.stack([self.x0 + jnp.sqrt(self.c_e / self.a_e), jnp.asarray(0.0)])
        return q0, jnp.stack([jnp.asarray(0.0), jnp.asarray(speed)])
