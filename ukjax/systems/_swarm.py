r"""Five planar robots under a first-order swarm law, Zhao et al. 2018, §8.2.

Example:
    >>> import jax.numpy as jnp, ukjax
    >>> from ukjax.systems import SwarmRobots
    >>> q0, qd0 = SwarmRobots.initial_state()
    >>> q0.shape
    (10,)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .._system import System


TABLE_1_POSITIONS = ((0.0, 0.0), (2.0, 9.0), (5.0, 8.0), (6.0, 4.0), (5.0, 0.0))
TABLE_1_VELOCITIES = ((0.1, 0.1), (0.2, 0.2), (0.3, 0.3), (0.3, 0.3), (0.3, 0.3))


class SwarmRobots(System):
    r"""N point robots in the plane with the velocity-level swarm constraint (eq 61).

    $q = [x_1, y_1, \dots, x_N, y_N]$, $M_i = m_iI_2$, no impressed forces. Each robot obeys
    the nonholonomic (first-order) constraint

    $$\psi_i = \dot q^i + \sum_{j\ne i}\nabla_{q^i}G_{ij} = 0,\qquad
    \nabla_{q^i}G_{ij} = (q^i - q^j)\Big(1 - \frac{a}{\lVert q^i - q^j\rVert}\Big),$$

    from $G_{ij} = -a\lVert q^i - q^j\rVert + \tfrac12\lVert q^i - q^j\rVert^2 + 50$
    (eq 62, $a = 0.5$): attraction when far apart, repulsion when closer than $a$. The
    performance error of eq 65 is $\beta = \psi$ (:meth:`performance_error`).

    Published values: $m_i = 2$ kg, initial state of Table 1 (:meth:`initial_state`).
    **Erratum** (found by this project): Table 1's velocities violate eq 61
    ($\lVert\beta(0)\rVert = 46.29$), and the plain UK equation keeps $\beta$ constant
    ($\dot\beta = 0$ is what it enforces). The decay to $\lVert\beta\rVert < 0.01$ reported
    in the paper needs stabilisation: `ukjax.Baumgarte(alpha=gamma)`, i.e.
    $\dot\beta + \gamma\beta = 0$.
    """

    masses: jax.Array
    a: float = 0.5

    def num_coordinates(self) -> int:
        return 2 * self.masses.shape[0]

    def __init__(self, masses=None, a=0.5):
        self.masses = jnp.full(5, 2.0) if masses is None else jnp.asarray(masses)
        self.a = a

    def mass_matrix(self, t, q):
        return jnp.diag(jnp.repeat(jnp.asarray(self.masses, q.dtype), 2))

    def swarm_velocity(self, q):
        r"""$-\sum_{j\ne i}\nabla_{q^i}G_{ij}$ for every robot, flattened (2N,)."""
        p = q.reshape(-1, 2)
        diff = p[:, None, :] - p[None, :, :]  # (N, N, 2): q_i - q_j
        n = p.shape[0]
        eye = jnp.eye(n, dtype=bool)
        d2 = jnp.sum(diff**2, axis=-1)
        d = jnp.sqrt(jnp.where(eye, 1.0, d2))  # safe on the diagonal (and its gradient)
        w = jnp.where(eye, 0.0, 1.0 - self.a / d)
        return -jnp.sum(diff * w[..., None], axis=1).reshape(-1)

    def nonholonomic(self, t, q, qd):
        return qd - self.swarm_velocity(q)

    def performance_error(self, q, qd):
        r"""$\beta = \dot q + \sum_j\nabla G$ (eq 65), flattened (2N,)."""
        return qd - self.swarm_velocity(q)

    @staticmethod
    def initial_state():
        """Table 1 of Zhao et al. 2018 (positions in m, velocities in m/s)."""
        return (
            jnp.asarray(TABLE_1_POSITIONS).reshape(-1),
            jnp.asarray(TABLE_1_VELOCITIES).reshape(-1),
        )
