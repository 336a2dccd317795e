r"""Bob on a massless rod of varying length, Bajodah 2003, §4.6, Ex. 4.3.

Example:
    >>> import jax.numpy as jnp, ukjax
    >>> from ukjax.systems import VaryingLengthPendulum
    >>> s = VaryingLengthPendulum()
    >>> float(ukjax.constraint_residuals(s, 0.0, *s.initial_state()).max_abs())
    0.0
"""

from __future__ import annotations

import jax.numpy as jnp

from .._system import System


class VaryingLengthPendulum(System):
    r"""A particle constrained to the parabola $y = l_0 - x^2/l_0$, gravity along $+y$.

    Bajodah 2003, §4.6 (eqs 303-326). $q = (x, y)$ with **$y$ pointing down**, $M = mI_2$,
    $V = mg(l_0 - y)$, holonomic constraint (eq 303)

    $$\varphi = y + x^2/l_0 - l_0 = 0,$$

    a parabola through $(0, l_0)$ (lowest point) and $(\pm l_0, 0)$. UK gives
    $A = [2x/l_0,\ 1]$, $b = -2\dot x^2/l_0$ and, for $l_0 = 1$, eqs 310-311. The
    drift-free minimal model (eq 326, general $l_0$):
    $(1 + 4x^2/l_0^2)\ddot x + 4x\dot x^2/l_0^2 + 2gx/l_0 = 0$.

    Published values: $l_0 = 1$ m, $m = 1$ kg, released from rest at $x = l_0$, $y = 0$. The thesis
    does not state $g$; 9.81 m/s² (which reproduces its $2\times10^{-11}$ bound) is the
    default. Erratum (found by this project): eq 317's velocity should read
    $u_1\mathbf i - 2xu_1\mathbf j$; eqs 316-326 silently use $l_0 = 1$.
    """

    l0: float = 1.0
    mass: float = 1.0
    g: float = 9.81

    def num_coordinates(self) -> int:
        return 2

    def kinetic_energy(self, t, q, qd):
        return 0.5 * self.mass * qd @ qd

    def potential_energy(self, t, q):
        return self.mass * self.g * (self.l0 - q[1])

    def holonomic(self, t, q):
        x, y = q
        return jnp.stack([y + x**2 / self.l0 - self.l0])

    def initial_state(self, x0=None):
        """Release from rest on the parabola at $x_0$ (default $l_0$, the paper's)."""
        x0 = self.l0 if x0 is None else x0
        q0 = jnp.stack([jnp.asarray(x0, float), self.l0 - jnp.asarray(x0, float) ** 2 / self.l0])
        return q0, jnp.zeros(2)
