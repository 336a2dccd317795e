r"""The Appell-Hamel mechanism (Bajodah 2003, Ex. 3.1 and §3.7), with linear and nonlinear
nonholonomic constraints."""

from __future__ import annotations

import jax.numpy as jnp

from .._system import System


class AppellHamelWheel(System):
    r"""Appell-Hamel: a rolling wheel winds up a thread that lowers a weight (Bajodah 2003,
    §3.6-3.7).

    A massless frame slides on the $x$-$y$ plane carrying two pulleys a distance $\rho$
    apart. A thread over them holds the weight P (mass $m$) on the frame's vertical bar
    and winds on a drum of radius $b$ fixed to the wheel W (radius $a$, mass $M$, equal
    moments of inertia $I$), which rolls without slipping with its plane vertical, at
    angle $\theta$ to the $x$ axis; $\phi$ is its rolling angle. $q = (\theta, \phi, x, y, z)$
    with $(x, y, z)$ the position of P and gravity $-g\hat z$:

    $$T = \tfrac I2(\dot\theta^2 + \dot\phi^2) + \tfrac M2[(\dot x + \rho\dot\theta\sin\theta)^2
    + (\dot y - \rho\dot\theta\cos\theta)^2] + \tfrac m2(\dot x^2 + \dot y^2 + \dot z^2),
    \qquad V = mgz.$$

    The wheel centre moves with $\dot x_o = \dot x + \rho\dot\theta\sin\theta$,
    $\dot y_o = \dot y - \rho\dot\theta\cos\theta$. This class imposes the linear
    rolling constraints (eqs 206-208) $a\dot\phi\cos\theta - \dot x_o = 0$,
    $a\dot\phi\sin\theta - \dot y_o = 0$; :class:`AppellHamelWheelNonlinear` the
    equivalent nonlinear set (eqs 157-158),
    both with the holonomic thread constraint $z + b\phi - z_0 = 0$ (eq 159). All are ideal
    and scleronomic, so the energy $T + mgz$ is conserved.

    Published values: $a = 1$, $b = 0.5$, $\rho = 5$, $m = 1$, $M = 5$, $z_0 = 30$ (SI). The
    thesis gives neither $I$ nor $g$: $I = 1$ (the only value for which the paper's eqs
    205/215/216, which drop $I$, are right) and $g = 9.81$. Corrected errata: eq 210's
    $A_2[2,5]$ is $-b$, so a falling weight *accelerates* the wheel (eq 216 as corrected
    by this project).

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import AppellHamelWheel
        >>> s = AppellHamelWheel()
        >>> q0, qd0 = s.initial_state()
        >>> float(ukjax.constraint_residuals(s, 0.0, q0, qd0).max_abs())
        0.0
    """

    a: float = 1.0
    b: float = 0.5
    rho: float = 5.0
    m: float = 1.0
    M: float = 5.0
    I: float = 1.0  # noqa: E741
    g: float = 9.81
    z0: float = 30.0

    def num_coordinates(self) -> int:
        return 5

    def kinetic_energy(self, t, q, qd):
        th = q[0]
        thd, phd, xd, yd, zd = qd
        xo = xd + self.rho * thd * jnp.sin(th)
        yo = yd - self.rho * thd * jnp.cos(th)
        return (
            0.5 * self.I * (thd**2 + phd**2)
            + 0.5 * self.M * (xo**2 + yo**2)
            + 0.5 * self.m * (xd**2 + yd**2 + zd**2)
        )

    def potential_energy(self, t, q):
        return self.m * self.g * q[4]

    def holonomic(self, t, q):
        return jnp.stack([q[4] + self.b * q[1] - self.z0])

    def centre_velocity(self, q, qd):
        r"""$(\dot x_o, \dot y_o)$ of the wheel centre."""
        th = q[0]
        thd, _, xd, yd, _ = qd
        return xd + self.rho * thd * jnp.sin(th), yd - self.rho * thd * jnp.cos(th)

    def nonholonomic(self, t, q, qd):
        th, phd = q[0], qd[1]
        xo, yo = self.centre_velocity(q, qd)
        return jnp.stack([self.a * phd * jnp.cos(th) - xo, self.a * phd * jnp.sin(th) - yo])

    def initial_state(self):
        """The paper's IC: $\\dot\\theta = \\dot\\phi = 1$, $\\dot x = 1$, $\\dot y = 5$,
        $\\dot z = -0.5$, $z = 30$, other coordinates 0 (consistent with both formulations)."""
        q0 = jnp.array([0.0, 0.0, 0.0, 0.0, 30.0])
        qd0 = jnp.array([1.0, 1.0, 1.0, 5.0, -0.5])
        return q0, qd0


class AppellHamelWheelNonlinear(AppellHamelWheel):
    r"""The Appell-Hamel mechanism with the nonlinear nonholonomic constraints of
    Bajodah 2003, eqs 157-158: $\dot x_o^2 + \dot y_o^2 - a^2\dot\phi^2 = 0$ and
    $\dot x\sin\theta - \dot y\cos\theta + \rho\dot\theta = 0$ (singular where
    $\dot\phi = 0$). Same motion as :class:`AppellHamelWheel` from consistent initial
    conditions; everything else as there.

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import AppellHamelWheelNonlinear
        >>> s = AppellHamelWheelNonlinear()
        >>> A, b = ukjax.constraint_matrices(s, 0.0, *s.initial_state())
        >>> A.shape
        (3, 5)
    """

    def nonholonomic(self, t, q, qd):
        th = q[0]
        thd, phd, xd, yd, _ = qd
        xo, yo = self.centre_velocity(q, qd)
        return jnp.stack(
            [
                xo**2 + yo**2 - (self.a * phd) ** 2,
                xd * jnp.sin(th) - yd * jnp.cos(th) + self.rho * thd,
            ]
        )
