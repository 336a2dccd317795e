r"""Systems with unilateral constraints or impulses: a bouncing ball, the disc-bar mechanism
of Bajodah 2003 (Ex. 5.1 and 5.2) and the four-bar linkage struck by an impulse (Ex. 6.1).

Example:
    >>> import jax.numpy as jnp, ukjax
    >>> from ukjax.systems import BouncingBall, DiscBar
    >>> float(BouncingBall().unilateral(0.0, jnp.array([0.3]))[0])
    0.3
    >>> round(float(DiscBar().unilateral(0.0, jnp.array([1.0, 1.0]))[0]), 6)
    0.439547
"""

from __future__ import annotations

import jax.numpy as jnp

from .._system import System


class BouncingBall(System):
    r"""A point mass above the floor $z = 0$: $q = [z]$, $g(q) = z \ge 0$.

    With :class:`ukjax.Impact` (restitution $e$) from rest at height $h$ the impacts are at
    $t_1 = \sqrt{2h/g}$, $t_{k+1} = t_k + 2e^kv_1/g$ ($v_1 = \sqrt{2gh}$) and the Zeno time
    is $t_1 + 2ev_1/(g(1 - e))$.
    """

    mass: float = 1.0
    g: float = 9.81

    def num_coordinates(self) -> int:
        return 1

    def kinetic_energy(self, t, q, qd):
        return 0.5 * self.mass * qd @ qd

    def potential_energy(self, t, q):
        return self.mass * self.g * q[0]

    def unilateral(self, t, q):
        return q


class DiscBar(System):
    r"""Disc-bar mechanism with a rigid obstacle, Bajodah 2003, Ex. 5.1 (§5.4-5.5) and
    Ex. 5.2 (§5.6-5.7).

    A disc (inertia $I_D$ about its fixed centre) carries at its rim ($R$) the pin of a
    uniform bar (mass $m_B$, length $L$, central inertia $I_B$); $q = (\theta_1, \theta_2)$
    are absolute angles, **gravity acts along +x** (x points down). Motor torques:
    $\tau_1$ on the disc, $\tau_2$ on the bar from a motor on the disc (generalized force
    $G\tau = (\tau_1 - \tau_2, \tau_2)$, eq 355). The bar tip may not pass below the
    obstacle at depth $h$:

    $$g(q) = h - R\cos\theta_1 - L\cos\theta_2 \ge 0$$

    (the thesis writes $\varphi = -g \le 0$, eq 356). Ex. 5.1 has $h = R + 3L/4$
    (:meth:`ex51`), Ex. 5.2 prints $h = R + L/3$ (eq 371: the thesis' two
    examples disagree, so $h$ is a field, :meth:`ex52`). The thesis gives no geometry or
    inertia; the defaults ($R = 0.5$, $L = 1$, $m_B = 1$, a uniform bar, a uniform disc of
    mass 1, $g = 9.81$) are this project's choice. The mass matrix and forces are eqs
    352-355, from the kinetic energy by autodiff.
    """

    R: float = 0.5
    L: float = 1.0
    m_bar: float = 1.0
    I_bar: float = 1.0 / 12.0
    I_disc: float = 0.125
    g: float = 9.81
    tau1: float = 0.0
    tau2: float = 0.0
    depth: float = 1.25

    @classmethod
    def ex51(cls, **kw) -> DiscBar:
        """Ex. 5.1: obstacle at $R + 3L/4$, torques $\\tau_1 = 1$, $\\tau_2 = 3$ N m."""
        R, L = kw.get("R", 0.5), kw.get("L", 1.0)
        return cls(**{"tau1": 1.0, "tau2": 3.0, "depth": R + 0.75 * L, **kw})

    @classmethod
    def ex52(cls, **kw) -> DiscBar:
        """Ex. 5.2: obstacle at $R + L/3$ (eq 371), no torques."""
        R, L = kw.get("R", 0.5), kw.get("L", 1.0)
        return cls(**{"depth": R + L / 3.0, **kw})

    def num_coordinates(self) -> int:
        return 2

    def kinetic_energy(self, t, q, qd):
        th1, th2 = q
        u1, u2 = qd
        R, h = self.R, 0.5 * self.L
        vx = -R * jnp.sin(th1) * u1 - h * jnp.sin(th2) * u2
        vy = R * jnp.cos(th1) * u1 + h * jnp.cos(th2) * u2
        return 0.5 * (self.I_disc * u1**2 + self.m_bar * (vx**2 + vy**2) + self.I_bar * u2**2)

    def potential_energy(self, t, q):
        x_centre = self.R * jnp.cos(q[0]) + 0.5 * self.L * jnp.cos(q[1])
        return -self.m_bar * self.g * x_centre

    def forces(self, t, q, qd):
        return jnp.stack([self.tau1 - self.tau2, jnp.asarray(self.tau2, q.dtype)]).astype(q.dtype)

    def unilateral(self, t, q):
        return jnp.array([self.depth - self.R * jnp.cos(q[0]) - self.L * jnp.cos(q[1])])


class ImpulsiveFourBar(System):
    r"""Four-bar linkage of Bajodah 2003, Ex. 6.1 (§6.6), in the thesis's coordinates.

    Particle $P_1$ (mass $m_1$) at the crank tip $L_1(\cos q_1, \sin q_1)$; particle $P_2$
    (mass $m_2$) at $(q_2, q_3)$ from the rocker pivot $Q = (0, L_4)$. $M =
    \mathrm{diag}(m_1L_1^2, m_2, m_2)$ (eq 439 with $u_1 = L_1\dot q_1$). Constraints
    (eqs 440-441):

    $$q_2^2 + q_3^2 - L_3^2 = 0,\qquad L_4 + q_3 - \sqrt{L_2^2 - (q_2 - L_1\cos q_1)^2}
    - L_1\sin q_1 = 0.$$

    Gravity is irrelevant during the impulse and is left out. :meth:`configuration` gives
    the thesis's assembly ($q_2 < 0$ branch) at a crank angle.
    """

    m1: float = 1.0
    m2: float = 1.0
    L1: float = 1.0
    L2: float = 3.0
    L3: float = 2.5
    L4: float = 2.5

    def num_coordinates(self) -> int:
        return 3

    def mass_matrix(self, t, q):
        return jnp.diag(jnp.stack([self.m1 * self.L1**2, self.m2, self.m2]).astype(q.dtype))

    def holonomic(self, t, q):
        q1, q2, q3 = q
        d = q2 - self.L1 * jnp.cos(q1)
        return jnp.stack(
            [
                q2**2 + q3**2 - self.L3**2,
                self.L4 + q3 - jnp.sqrt(self.L2**2 - d**2) - self.L1 * jnp.sin(q1),
            ]
        )

    def configuration(self, q1) -> jnp.ndarray:
        r"""$(q_1, q_2, q_3)$ on the $q_2 < 0$ branch: $P_2$ at distance $L_2$ from $P_1$ and
        $L_3$ from $Q$ (circle intersection)."""
        q1 = jnp.asarray(q1, float)
        p1 = self.L1 * jnp.stack([jnp.cos(q1), jnp.sin(q1)])
        pq = jnp.array([0.0, self.L4])
        d_vec = p1 - pq
        d = jnp.linalg.norm(d_vec)
        a = (self.L3**2 - self.L2**2 + d**2) / (2 * d)
        h = jnp.sqrt(self.L3**2 - a**2)
        base = pq + a * d_vec / d
        perp = jnp.stack([-d_vec[1], d_vec[0]]) / d
        cands = jnp.stack([base + h * perp, base - h * perp]) - pq
        p2 = cands[jnp.argmin(cands[:, 0])]
        return jnp.concatenate([q1[None], p2])
