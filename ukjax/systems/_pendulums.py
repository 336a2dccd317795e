r"""Pendulums: minimal-coordinate, Cartesian, the doubly constrained 3-D bob, and chains.

Example:
    >>> import jax.numpy as jnp, ukjax
    >>> from ukjax.systems import CartesianPendulum, DoubleRodPendulum, PlanarChain, SimplePendulum
    >>> p = SimplePendulum(length=2.0, g=9.8)
    >>> float(ukjax.acceleration(p, 0.0, jnp.array([jnp.pi / 2]), jnp.zeros(1))[0])
    -4.9
    >>> [round(float(v), 4) for v in ukjax.acceleration(CartesianPendulum(), 0.0,
    ...                                                 jnp.array([0.0, -1.0]), jnp.zeros(2))]
    [0.0, 0.0]
    >>> rod = DoubleRodPendulum()
    >>> float(ukjax.constraint_residuals(rod, 0.0, *rod.initial_state()).max_abs())
    0.0
    >>> chain = PlanarChain.uniform(3)
    >>> q, qd = chain.state_from_angles(jnp.array([0.1, 0.2, 0.3]), jnp.array([1.0, 0.0, -1.0]))
    >>> float(ukjax.constraint_residuals(chain, 0.0, q, qd).max_abs()) < 1e-14
    True
"""

from __future__ import annotations

import jax.numpy as jnp

from .._system import System


class SimplePendulum(System):
    r"""Planar pendulum in the minimal coordinate $q = [\theta]$ (On Dynamics 2020, §3.3.2).

    $T = \tfrac12 m l^2\dot\theta^2$, $V = -mgl\cos\theta$ (angle from the downward
    vertical, datum at the hinge), so $\ddot\theta = -(g/l)\sin\theta$ (eq 15m). No
    constraints: the reference against which :class:`CartesianPendulum` is checked.
    """

    mass: float = 1.0
    length: float = 1.0
    g: float = 9.81

    def num_coordinates(self) -> int:
        return 1

    def kinetic_energy(self, t, q, qd):
        return 0.5 * self.mass * self.length**2 * qd[0] ** 2

    def potential_energy(self, t, q):
        return -self.mass * self.g * self.length * jnp.cos(q[0])


class CartesianPendulum(System):
    r"""Planar pendulum in Cartesian coordinates $q = [x, y]$, $y$ up (On Dynamics 2020, §3.6.4).

    $M = mI_2$, gravity $-mg\hat y$, holonomic constraint $\varphi = x^2 + y^2 - L^2$.
    The UK equation gives the closed form (eq 33h)
    $\ddot q = [0, -g]^T + \frac{gq_2 - |\dot q|^2}{|q|^2} q$.
    """

    mass: float = 1.0
    length: float = 1.0
    g: float = 9.81

    def num_coordinates(self) -> int:
        return 2

    def kinetic_energy(self, t, q, qd):
        return 0.5 * self.mass * qd @ qd

    def potential_energy(self, t, q):
        return self.mass * self.g * q[1]

    def holonomic(self, t, q):
        return jnp.array([q @ q - self.length**2])


class DoubleRodPendulum(System):
    r"""Unit-mass bob held by two rigid rods: Pamplona 2021, §3.4 (Example 4, eqs 71-78).

    $q = [x, y, z]$, $M = mI_3$, gravity along $+x$ ($a = [g, 0, 0]^T$ for $m = 1$).
    Constraints, in the paper's prose version (eqs 71-72 swap the lengths; see
    an erratum found by this project — both readings coincide for $L_1 = L_2$):

    $$x^2 + y^2 + z^2 = L_1^2,\qquad (x - L_1)^2 + y^2 + (z - L_2)^2 = L_2^2.$$

    Published values: $L_1 = L_2 = 1$, $g = 10$, $m = 1$; initial state $q_0 = [L_1, 0, 0]$,
    $\dot q_0 = [0, 4, 0]$, $t \in [0, 3]$. The motion is a curve on which $x + z \equiv 1$
    for $L_1 = L_2 = 1$.
    """

    L1: float = 1.0
    L2: float = 1.0
    g: float = 10.0
    mass: float = 1.0

    def num_coordinates(self) -> int:
        return 3

    def kinetic_energy(self, t, q, qd):
        return 0.5 * self.mass * qd @ qd

    def potential_energy(self, t, q):
        return -self.mass * self.g * q[0]

    def holonomic(self, t, q):
        x, y, z = q
        return 0.5 * jnp.array(
            [
                x**2 + y**2 + z**2 - self.L1**2,
                (x - self.L1) ** 2 + y**2 + (z - self.L2) ** 2 - self.L2**2,
            ]
        )

    def initial_state(self, yd0=4.0):
        """The paper's initial state $q_0 = [L_1, 0, 0]$, $\\dot q_0 = [0, \\dot y_0, 0]$."""
        q0 = jnp.array([1.0, 0.0, 0.0]) * self.L1
        qd0 = jnp.array([0.0, 1.0, 0.0]) * yd0
        return q0, qd0


class PlanarChain(System):
    r"""An N-link planar pendulum chain in Cartesian coordinates (point masses).

    $q = [x_1, y_1, \dots, x_N, y_N]$ (positions of the bobs, $y$ up), $M = \mathrm{diag}(m_i)$,
    gravity $-g\hat y$, and $N$ holonomic distance constraints
    $|p_1|^2 = l_1^2$, $|p_i - p_{i-1}|^2 = l_i^2$. Optional viscous joint damping
    $c_i$ acting on the relative velocity of each link's ends.

    `masses`, `lengths` and `damping` are arrays of shape (N,); the number of links is
    their length.
    """

    masses: jnp.ndarray
    lengths: jnp.ndarray
    damping: jnp.ndarray | None = None
    g: float = 9.81

    def num_coordinates(self) -> int:
        return 2 * self.n_links

    @classmethod
    def uniform(cls, n_links: int, mass=1.0, length=1.0, damping=None, g=9.81):
        """A chain of `n_links` equal links."""
        ones = jnp.ones(n_links)
        d = None if damping is None else damping * ones
        return cls(masses=mass * ones, lengths=length * ones, damping=d, g=g)

    @property
    def n_links(self) -> int:
        return self.masses.shape[0]

    def mass_matrix(self, t, q):
        return jnp.diag(jnp.repeat(jnp.asarray(self.masses, q.dtype), 2))

    def forces(self, t, q, qd):
        if self.damping is None:
            return None
        v = qd.reshape(-1, 2)
        rel = v - jnp.concatenate([jnp.zeros((1, 2), q.dtype), v[:-1]], axis=0)
        f = -jnp.asarray(self.damping, q.dtype)[:, None] * rel  # force on bob i from link i
        F_link = f - jnp.concatenate([f[1:], jnp.zeros((1, 2), q.dtype)], axis=0)
        return F_link.reshape(-1)

    def holonomic(self, t, q):
        p = q.reshape(-1, 2)
        prev = jnp.concatenate([jnp.zeros((1, 2), q.dtype), p[:-1]], axis=0)
        d = p - prev
        return 0.5 * (jnp.sum(d**2, axis=1) - jnp.asarray(self.lengths, q.dtype) ** 2)

    def potential_energy(self, t, q):
        return self.g * jnp.asarray(self.masses, q.dtype) @ q.reshape(-1, 2)[:, 1]

    def state_from_angles(self, theta, theta_dot):
        """Cartesian state from link angles (from the downward vertical) and rates."""
        l = jnp.asarray(self.lengths)
        dx, dy = l * jnp.sin(theta), -l * jnp.cos(theta)
        dvx, dvy = l * jnp.cos(theta) * theta_dot, l * jnp.sin(theta) * theta_dot
        q = jnp.stack([jnp.cumsum(dx), jnp.cumsum(dy)], axis=1).reshape(-1)
        qd = jnp.stack([jnp.cumsum(dvx), jnp.cumsum(dvy)], axis=1).reshape(-1)
        return q, qd
