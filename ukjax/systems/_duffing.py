r"""The two-mass Duffing oscillator with a rheonomic constraint (Pamplona 2021, §3.3).

Example:
    >>> import jax.numpy as jnp, ukjax
    >>> from ukjax.systems import DuffingOscillator
    >>> s = DuffingOscillator()
    >>> float(ukjax.constraint_residuals(s, 0.0, *s.initial_state()).max_abs()) < 1e-12
    True
"""

from __future__ import annotations

import jax.numpy as jnp

from .._system import System


class DuffingOscillator(System):
    r"""Two masses, two nonlinear springs and dampers, and a prescribed relative motion.

    Pamplona 2021, §3.3 (Example 3, eqs 57-70). $q = [x_1, x_2]$, $M = \mathrm{diag}(m_1, m_2)$.
    Spring/damper 1 joins mass 1 to mass 2 (extension $u_1 = x_1 - x_2$), spring/damper 2
    joins mass 2 to the wall ($u_2 = x_2$); spring force $k_iu_i + k^{nl}_iu_i^3$, damper
    force $c_i\dot u_i$. Impressed force (eq 60) $F = -(Kx + C\dot x + g^{nl})$.

    Rheonomic holonomic constraint (eq 57), enforced when `constrained` is true:
    $x_1 - x_2 = A_0 e^{-\alpha t}\sin\omega t$.

    Published values: $m = (2, 1)$, $k = (10, 12)$, $k^{nl} = (1, 2)$, $c = (0.1, 0.15)$,
    $A_0 = 1$, $\omega = 2\pi$, $\alpha = 1$; initial state $x = (1, 1)$,
    $\dot x = (2 + A_0\omega, 2)$; $t \in [0, 5]$.
    """

    m1: float = 2.0
    m2: float = 1.0
    k1: float = 10.0
    k2: float = 12.0
    k1_nl: float = 1.0
    k2_nl: float = 2.0
    c1: float = 0.1
    c2: float = 0.15
    A0: float = 1.0
    omega: float = 2.0 * jnp.pi
    alpha: float = 1.0
    constrained: bool = True

    def num_coordinates(self) -> int:
        return 2

    def mass_matrix(self, t, q):
        return jnp.diag(jnp.stack([self.m1, self.m2]).astype(q.dtype))

    def forces(self, t, q, qd):
        x1, x2 = q
        v1, v2 = qd
        u1, u1d = x1 - x2, v1 - v2
        f1 = self.k1 * u1 + self.k1_nl * u1**3 + self.c1 * u1d  # tension of element 1
        f2 = self.k2 * x2 + self.k2_nl * x2**3 + self.c2 * v2  # element 2 (to the wall)
        return jnp.stack([-f1, f1 - f2])

    def prescribed_relative_motion(self, t):
        """The target $x_1 - x_2 = A_0 e^{-\\alpha t}\\sin\\omega t$."""
        return self.A0 * jnp.exp(-self.alpha * t) * jnp.sin(self.omega * t)

    def holonomic(self, t, q):
        if not self.constrained:
            return None
        return jnp.stack([q[0] - q[1] - self.prescribed_relative_motion(t)])

    def initial_state(self):
        """The paper's initial state: $x = (1, 1)$, $\\dot x = (2 + A_0\\omega, 2)$."""
        q0 = jnp.array([1.0, 1.0])
        qd0 = jnp.stack([2.0 + self.A0 * self.omega, jnp.asarray(2.0)])
        return q0, qd0
