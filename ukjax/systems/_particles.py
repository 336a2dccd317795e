r"""Single particles of seeds 000, 002 and 003: the constraint table, a bead with Coulomb
friction along its wire (a non-ideal constraint), and the spring-loaded particle on an
elliptic wire (seed 004 Ex. 4.1)."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp

from .._constraints import constraint_matrices
from .._dynamics import mass_and_force
from .._system import System
from .._uk import constraint_forces


_TABLE = ("line", "sphere", "xz2y", "pfaff_2y", "pfaff_2y_rheonomic", "pfaff_2z")


class PointParticle(System):
    r"""A point mass $q = (x, y, z)$, $M = mI$, under a constant force, with one of the
    constraints of seed 000 §2.3 / §3.1-3.2 and seed 002 §3 (SEED_CASES `constraint_ab_examples`).

    ``constraint`` (static) picks the row of the table; ukjax derives $A$, $b$ by autodiff:

    ======================== ===================================== ========================
    ``constraint``           constraint                            $A$, $b$
    ======================== ===================================== ========================
    ``"line"``               $y = 0,\ z = 0$ (holonomic)            $[e_y; e_z]$, $0$
    ``"sphere"``             $x^2+y^2+z^2 = L^2$                    $2[x,y,z]$, $-2|\dot q|^2$
    ``"xz2y"``               $\dot x = z^2\dot y$ (nonholonomic)    $[1,-z^2,0]$, $2z\dot z\dot y$
    ``"pfaff_2y"``           $\dot x + 2y\dot y + \dot z = 0$       $[1,2y,1]$, $-2\dot y^2$
    ``"pfaff_2y_rheonomic"`` $\dot x + 2y\dot y + \dot z = 1$       $[1,2y,1]$, $-2\dot y^2$
    ``"pfaff_2z"``           $\dot x + 2z\dot y + \dot z = 0$       $[1,2z,1]$, $-2\dot y\dot z$
    ======================== ===================================== ========================

    (The sphere row is $\varphi$ itself, so $A$ is twice the seed's $[x\ y\ z]$ and $b$ twice
    its $-|\dot q|^2$: the same constraint.) The velocity-level Pfaffian forms are given as
    nonholonomic constraints, as the seeds state them; :func:`holonomicity` tells which
    are integrable. Erratum: seed 000 eq 35 prints $\dot x = \dot z^2\dot y$; the table
    uses $z^2$, consistent with its eqs 36-37.

    Defaults: $m = 1$, $L = 1$, force $(0.3, -0.5, -9.81)$ (the seeds give no numbers).
    """

    constraint: str = eqx.field(static=True, default="sphere")
    mass: float = 1.0
    L: float = 1.0
    F_x: float = 0.3
    F_y: float = -0.5
    F_z: float = -9.81

    def __check_init__(self):
        if self.constraint not in _TABLE:
            raise ValueError(f"PointParticle: constraint must be one of {_TABLE}; got {self.constraint!r}.")

    def mass_matrix(self, t, q):
        return self.mass * jnp.eye(3, dtype=q.dtype)

    def forces(self, t, q, qd):
        return jnp.stack([self.F_x, self.F_y, self.F_z]).astype(q.dtype) + 0.0 * q

    def holonomic(self, t, q):
        x, y, z = q
        if self.constraint == "line":
            return jnp.stack([y, z])
        if self.constraint == "sphere":
            return jnp.stack([x**2 + y**2 + z**2 - self.L**2])
        return None

    def nonholonomic(self, t, q, qd):
        x, y, z = q
        xd, yd, zd = qd
        if self.constraint == "xz2y":
            return jnp.stack([xd - z**2 * yd])
        if self.constraint == "pfaff_2y":
            return jnp.stack([xd + 2 * y * yd + zd])
        if self.constraint == "pfaff_2y_rheonomic":
            return jnp.stack([xd + 2 * y * yd + zd - 1.0])
        if self.constraint == "pfaff_2z":
            return jnp.stack([xd + 2 * z * yd + zd])
        return None


def holonomicity(coefficients, q):
    r"""Seed 002 eq 11: whether $\alpha\,dx + \beta\,dy + \gamma\,dz = 0$ is integrable.

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

    (The seed prints 1 for the first; the value is 2, and the form is nonholonomic.)
    """
    import jax

    J = jax.jacfwd(coefficients)(q)
    al, be, ga = coefficients(q)
    return al * (J[1, 2] - J[2, 1]) + be * (J[2, 0] - J[0, 2]) + ga * (J[0, 1] - J[1, 0])


class CoulombBead(System):
    r"""A bead on a circular wire $x^2 + y^2 = R^2$ with Coulomb friction: a non-ideal
    constraint in the sense of seed 003 (SEED_CASES `nonideal_constraint_properties`).

    $q = (x, y)$, $M = mI$, gravity $-g\hat y$ ($g = 0$: the wire lies in a horizontal
    plane). The wire does the prescribed virtual work $v^TC$ with

    $$C = -\mu\,|N|\,\frac{\dot q}{\sqrt{|\dot q|^2 + v_\mathrm{reg}^2}},$$

    where $N$ is the ideal (normal) constraint force that UK gives with $C = 0$. The UK
    equation adds $(I - A_M^+A)M^{-1}C$, the tangential friction, while the normal force
    keeps the bead on the wire. Power balance: $\dot E = -\mu|N||\dot q|$ (for
    $v_\mathrm{reg} = 0$).

    For $g = 0$ the motion has a closed form (:meth:`exact_speed`):
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

    def exact_speed(self, t, v0=2.0):
        """$v(t) = v_0/(1 + \\mu v_0 t/R)$ and arc length $s(t)$, valid for $g = 0$."""
        k = 1.0 + self.mu * v0 * t / self.R
        return v0 / k, self.R / self.mu * jnp.log(k)


class EllipseSpringParticle(System):
    r"""A particle on a frictionless elliptic wire, pulled to the origin by a linear spring:
    seed 004 Ex. 4.1 (eqs 227-277), in a horizontal plane (no gravity).

    $q = (x, y)$, $M = mI$, $Q = -K(x, y)$, and the holonomic constraint
    $a_e(x - x_0)^2 + b_ey^2 = c_e$: the ellipse is centred at $(x_0, 0)$, so the spring's
    anchor O is not at its centre. UK gives $A = [2a_e\bar x,\ 2b_ey]$,
    $b = -2a_e\dot x^2 - 2b_e\dot y^2$ with $\bar x = x - x_0$.

    The seed gives no numbers; defaults $m = 1$, $K = 1$, $a_e = 1$, $b_e = 2$, $c_e = 1$,
    $x_0 = 0.5$ (SEED_CASES' suggestion). The seed's Kane form (speeds $u_1 = \dot{\bar x}$,
    $u_2 = \dot y = -\epsilon u_1$, $\epsilon = a_e\bar x/(b_ey)$) is singular where the
    particle crosses $y = 0$, twice per revolution; the UK form is not.
    :meth:`kane_constraint_force` (eqs 251-253) and :meth:`normal_constraint_force`
    (eq 269) give the seed's two expressions of the constraint force, valid for $y \ne 0$.
    """

    mass: float = 1.0
    K: float = 1.0
    a_e: float = 1.0
    b_e: float = 2.0
    c_e: float = 1.0
    x0: float = 0.5

    def kinetic_energy(self, t, q, qd):
        return 0.5 * self.mass * qd @ qd

    def potential_energy(self, t, q):
        return 0.5 * self.K * q @ q

    def holonomic(self, t, q):
        return jnp.stack([self.a_e * (q[0] - self.x0) ** 2 + self.b_e * q[1] ** 2 - self.c_e])

    def _kane_terms(self, q, qd):
        x, y = q
        u1, u2 = qd
        xb = x - self.x0
        eps = self.a_e * xb / (self.b_e * y)
        e1 = self.a_e * self.b_e * u1 * (-y * u1 + xb * u2) / (self.b_e * y) ** 2
        e2 = self.K * (x - self.a_e / self.b_e * xb)
        return eps, e1, e2, eps**2 + 1

    def kane_constraint_force(self, q, qd):
        """Seed eqs 251-253: $F^c = [(m\\epsilon e_1 - e_2)/d + Kx,\\ (me_1 + \\epsilon e_2)/d + Ky]$."""
        eps, e1, e2, d = self._kane_terms(q, qd)
        m = self.mass
        return jnp.stack([(m * eps * e1 - e2) / d + self.K * q[0], (m * e1 + eps * e2) / d + self.K * q[1]])

    def normal_constraint_force(self, q, qd):
        """Seed eq 269: $F^c = [me_1 + K(\\epsilon x + y)]\\tau/\\sqrt d$, $\\tau = (\\epsilon, 1)/\\sqrt d$."""
        eps, e1, _, d = self._kane_terms(q, qd)
        mag = (self.mass * e1 + self.K * (eps * q[0] + q[1])) / jnp.sqrt(d)
        return mag * jnp.stack([eps, jnp.ones_like(eps)]) / jnp.sqrt(d)

    def initial_state(self, speed=1.0):
        """At the far vertex $\\bar x = \\sqrt{c_e/a_e}$, $y = 0$, moving along $+y$ (tangent)."""
        q0 = jnp.stack([self.x0 + jnp.sqrt(self.c_e / self.a_e), jnp.asarray(0.0)])
        return q0, jnp.stack([jnp.asarray(0.0), jnp.asarray(speed)])
