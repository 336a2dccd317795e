r"""Plants with actuators for servo-constraint control: a two-link arm (fully actuated) and
a cart with a pendulum (under-actuated).

Example:
    >>> import jax.numpy as jnp, ukjax
    >>> from ukjax.systems import CartPendulum, TwoLinkArm
    >>> q = jnp.zeros(2)
    >>> TwoLinkArm().actuators(0.0, q).shape, CartPendulum().actuators(0.0, q).shape
    ((2, 2), (2, 1))
"""

from __future__ import annotations

import jax.numpy as jnp

from .._system import System


class TwoLinkArm(System):
    r"""Planar two-link arm with point masses at the link ends and a motor at each joint.

    $q = (q_1, q_2)$: shoulder angle from the downward vertical and elbow angle relative to
    the first link; $T$ from the point masses (autodiff gives $M(q)$ and the Coriolis
    terms), gravity $-g\hat y$, optional viscous joint damping; actuators $G = I_2$ (joint
    torques).
    """

    m1: float = 1.0
    m2: float = 1.0
    l1: float = 1.0
    l2: float = 1.0
    g: float = 9.81
    damping: float = 0.0

    def num_coordinates(self) -> int:
        return 2

    def _points(self, q):
        p1 = self.l1 * jnp.stack([jnp.sin(q[0]), -jnp.cos(q[0])])
        p2 = p1 + self.l2 * jnp.stack([jnp.sin(q[0] + q[1]), -jnp.cos(q[0] + q[1])])
        return p1, p2

    def kinetic_energy(self, t, q, qd):
        v1 = jnp.stack([jnp.cos(q[0]), jnp.sin(q[0])]) * self.l1 * qd[0]
        a = q[0] + q[1]
        v2 = v1 + jnp.stack([jnp.cos(a), jnp.sin(a)]) * self.l2 * (qd[0] + qd[1])
        return 0.5 * (self.m1 * v1 @ v1 + self.m2 * v2 @ v2)

    def potential_energy(self, t, q):
        p1, p2 = self._points(q)
        return self.g * (self.m1 * p1[1] + self.m2 * p2[1])

    def forces(self, t, q, qd):
        return -self.damping * qd

    def actuators(self, t, q):
        return jnp.eye(2, dtype=q.dtype)


class CartPendulum(System):
    r"""A cart (mass $M_c$, position $x$) carrying a pendulum (point mass $m$ on a massless
    rod $l$, angle $\theta$ from the downward vertical): $q = (x, \theta)$. One actuator:
    a horizontal force on the cart ($G = [1, 0]^T$), so the system is under-actuated.
    """

    cart_mass: float = 1.0
    mass: float = 0.5
    length: float = 1.0
    g: float = 9.81

    def num_coordinates(self) -> int:
        return 2

    def kinetic_energy(self, t, q, qd):
        x_dot, th, th_dot = qd[0], q[1], qd[1]
        vx = x_dot + self.length * jnp.cos(th) * th_dot
        vy = self.length * jnp.sin(th) * th_dot
        return 0.5 * self.cart_mass * x_dot**2 + 0.5 * self.mass * (vx**2 + vy**2)

    def potential_energy(self, t, q):
        return -self.mass * self.g * self.length * jnp.cos(q[1])

    def actuators(self, t, q):
        return jnp.array([[1.0], [0.0]], dtype=q.dtype)
