r"""Systems with Coulomb friction on unilateral contacts: a block on a rough incline (or
table), with an optional spring and a ramped force, and the two blocks of Bajodah 2003,
Ex. 5.3.

Example:
    >>> import jax.numpy as jnp
    >>> from ukjax.systems import FrictionBlock
    >>> T, mu_s, mu_k = FrictionBlock(mu_static=0.6, mu_kinetic=0.4).friction(0.0, jnp.zeros(2))
    >>> T.shape, float(mu_s), float(mu_k)
    ((1, 1, 2), 0.6, 0.4)
"""

from __future__ import annotations

import jax.numpy as jnp

from .._system import System


class FrictionBlock(System):
    r"""A block on a rough plane inclined at `incline` (rad): $q = (s, h)$, $s$ along the
    slope (positive up the slope), $h$ the height above the plane ($g(q) = h \ge 0$).

    Gravity $V = mg(s\sin\theta + h\cos\theta)$, a spring to $s = 0$ of `stiffness` $k$
    ($\tfrac12ks^2$), and a force $F(t) = F_0 + \dot F t$ along $+s$ (`force`,
    `force_rate`). Coulomb friction along $s$ with $\mu_s$, $\mu_k$ (`mu_static`,
    `mu_kinetic`; `mu_kinetic=None` means equal to `mu_static`).

    Closed forms (tests): resting, $N = mg\cos\theta$; stuck while $|F - mg\sin\theta - ks|
    \le \mu_sN$; sliding, $m\ddot s = F - mg\sin\theta - ks \mp \mu_kN$.
    """

    mass: float = 1.0
    g: float = 9.81
    incline: float = 0.0
    stiffness: float = 0.0
    force: float = 0.0
    force_rate: float = 0.0
    mu_static: float = 0.5
    mu_kinetic: float | None = None

    def num_coordinates(self) -> int:
        return 2

    def kinetic_energy(self, t, q, qd):
        return 0.5 * self.mass * qd @ qd

    def potential_energy(self, t, q):
        s, h = q
        gravity = self.mass * self.g * (s * jnp.sin(self.incline) + h * jnp.cos(self.incline))
        return gravity + 0.5 * self.stiffness * s**2

    def forces(self, t, q, qd):
        return jnp.stack([self.force + self.force_rate * t, jnp.zeros_like(t)])

    def unilateral(self, t, q):
        return q[1:2]

    def friction(self, t, q):
        mu_k = self.mu_static if self.mu_kinetic is None else self.mu_kinetic
        return jnp.array([[[1.0, 0.0]]], dtype=q.dtype), self.mu_static, mu_k


class TwoBlockFriction(System):
    r"""Two blocks on a rough table, Bajodah 2003, Ex. 5.3 (§5.9, eqs 375–386).

    A spring $K_1$ joins the wall to block 1, a spring $K_2$ joins block 1 to block 2, and
    a harmonic force $A\sin\omega t$ drives block 2. $q = (x_1, h_1, x_2, h_2)$: the
    displacements from the unstretched positions and the heights above the table
    (unilateral $h_i \ge 0$), so the normal forces are the contact forces (here $m_ig$).
    Friction along $x_i$ with $\mu$ (the thesis has equal static and kinetic coefficients;
    `mu_kinetic` may differ). The defaults are the thesis's values: $A = 10$ N, $\omega =
    1.5$ rad/s, $m_1 = m_2 = 0.1$ kg, $K_1 = K_2 = 5$ N/m, $\mu = 1$, $g = 9.81$.
    """

    m1: float = 0.1
    m2: float = 0.1
    k1: float = 5.0
    k2: float = 5.0
    amplitude: float = 10.0
    omega: float = 1.5
    mu_static: float = 1.0
    mu_kinetic: float | None = None
    g: float = 9.81

    def num_coordinates(self) -> int:
        return 4

    def kinetic_energy(self, t, q, qd):
        m = jnp.stack([self.m1, self.m1, self.m2, self.m2])
        return 0.5 * jnp.sum(m * qd**2)

    def potential_energy(self, t, q):
        x1, h1, x2, h2 = q
        springs = 0.5 * self.k1 * x1**2 + 0.5 * self.k2 * (x2 - x1) ** 2
        return springs + self.g * (self.m1 * h1 + self.m2 * h2)

    def forces(self, t, q, qd):
        zero = jnp.zeros_like(t)
        return jnp.stack([zero, zero, self.amplitude * jnp.sin(self.omega * t), zero])

    def unilateral(self, t, q):
        return jnp.stack([q[1], q[3]])

    def friction(self, t, q):
        mu_k = self.mu_static if self.mu_kinetic is None else self.mu_kinetic
        T = jnp.array([[[1.0, 0.0, 0.0, 0.0]], [[0.0, 0.0, 1.0, 0.0]]], dtype=q.dtype)
        return T, self.mu_static, mu_k
