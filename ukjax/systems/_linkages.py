r"""Closed kinematic loops: the planar four-bar linkage."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .._system import System


class FourBarLinkage(System):
    r"""A planar four-bar linkage of three uniform rods in a vertical plane (closed loop).

    Ground pivots $A = (0, 0)$ and $D = (d, 0)$; crank $AB$ (length $l_1$), coupler
    $BC$ ($l_2$) and rocker $CD$ ($l_3$), each a uniform rod of mass $m_i$ and moment of
    inertia $m_il_i^2/12$ about its centre. Gravity $-g\hat y$.

    Coordinates are the three absolute link angles from the $x$ axis,
    $q = [\theta_1, \theta_2, \theta_3]$, so the open chain $A \to B \to C \to D'$ has
    $D' = \sum_i l_i(\cos\theta_i, \sin\theta_i)$ and the loop closes by the two holonomic
    constraints $D' - D = 0$: one degree of freedom, no multipliers, no elimination.

    $T = \sum_i \tfrac12 m_i|\dot c_i|^2 + \tfrac12 \tfrac{m_il_i^2}{12}\dot\theta_i^2$ with
    $c_i$ the centre of rod $i$; $M(q)$ and the velocity terms of $Q$ follow from $T$ by
    automatic differentiation.

    Defaults: $l = (1, 3, 2.5)$, $d = 3$ (a Grashof crank-rocker: the crank can turn
    fully), $m = (1, 1, 1)$, $g = 9.81$.

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import FourBarLinkage
        >>> fb = FourBarLinkage()
        >>> q0, qd0 = fb.initial_state(crank_angle=1.0, crank_rate=2.0)
        >>> r = ukjax.constraint_residuals(fb, 0.0, q0, qd0)
        >>> bool(jnp.abs(r.position).max() < 1e-12), bool(jnp.abs(r.velocity).max() < 1e-12)
        (True, True)
    """

    l1: float = 1.0
    l2: float = 3.0
    l3: float = 2.5
    d: float = 3.0
    m1: float = 1.0
    m2: float = 1.0
    m3: float = 1.0
    g: float = 9.81

    def num_coordinates(self) -> int:
        return 3

    def _lengths(self, dtype):
        return jnp.stack([self.l1, self.l2, self.l3]).astype(dtype)

    def _masses(self, dtype):
        return jnp.stack([self.m1, self.m2, self.m3]).astype(dtype)

    def _links(self, q):
        """The rod vectors l_i (cos, sin) of the three links, shape (3, 2)."""
        return jnp.stack([jnp.cos(q), jnp.sin(q)], axis=1) * self._lengths(q.dtype)[:, None]

    def centres(self, q):
        """Centres of the three rods, shape (3, 2)."""
        e = self._links(q)
        return jnp.cumsum(e, axis=0) - 0.5 * e  # each rod's end minus half the rod

    def joints(self, q):
        """Points B, C and the loop end D' (which the constraints hold at D), shape (3, 2)."""
        return jnp.cumsum(self._links(q), axis=0)

    def kinetic_energy(self, t, q, qd):
        m, l = self._masses(q.dtype), self._lengths(q.dtype)
        _, v = jax.jvp(self.centres, (q,), (qd,))
        return 0.5 * jnp.sum(m * jnp.sum(v**2, axis=1)) + 0.5 * jnp.sum(m * l**2 / 12.0 * qd**2)

    def potential_energy(self, t, q):
        return self.g * self._masses(q.dtype) @ self.centres(q)[:, 1]

    def holonomic(self, t, q):
        end = self.joints(q)[-1]
        return end - jnp.stack([jnp.asarray(self.d, q.dtype), jnp.zeros((), q.dtype)])

    def initial_state(self, crank_angle=1.0, crank_rate=0.0):
        r"""A consistent state with crank angle $\theta_1$ and rate $\dot\theta_1$ (the
        branch with joint C above the line BD). Raises ValueError where the loop cannot
        close."""
        l1, l2, l3, d = (float(x) for x in (self.l1, self.l2, self.l3, self.d))
        th1 = jnp.asarray(crank_angle, float)
        B = l1 * jnp.stack([jnp.cos(th1), jnp.sin(th1)])
        D = jnp.array([d, 0.0])
        BD = D - B
        r = jnp.linalg.norm(BD)
        if not (abs(l2 - l3) <= float(r) <= l2 + l3):
            raise ValueError(
                f"FourBarLinkage.initial_state: the loop cannot close at crank angle "
                f"{float(th1)} (|BD| = {float(r):.4g} outside [{abs(l2 - l3):.4g}, {l2 + l3:.4g}])."
            )
        a = (l2**2 - l3**2 + r**2) / (2 * r)
        h = jnp.sqrt(jnp.maximum(l2**2 - a**2, 0.0))
        u = BD / r
        C = B + a * u + h * jnp.stack([-u[1], u[0]])
        th2 = jnp.arctan2(C[1] - B[1], C[0] - B[0])
        th3 = jnp.arctan2(D[1] - C[1], D[0] - C[0])
        q0 = jnp.stack([th1, th2, th3])
        # Velocities: J qd = 0 with qd_1 given, J = [l_i (-sin, cos)] (2 x 3).
        l = jnp.array([l1, l2, l3])
        J = jnp.stack([-jnp.sin(q0), jnp.cos(q0)]) * l
        rate = jnp.asarray(crank_rate, float)
        rest = jnp.linalg.solve(J[:, 1:], -J[:, 0] * rate)
        return q0, jnp.concatenate([rate[None], rest])
