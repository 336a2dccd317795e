r"""The Appell-Hamel mechanism (seed 004 Ex. 3.1 and §3.7), with linear and nonlinear
nonholonomic constraints."""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp

from .._system import System


class AppellHamelWheel(System):
    r"""Appell-Hamel: a rolling wheel winds up a thread that lowers a weight (seed 004 §3.6-3.7).

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
    $\dot y_o = \dot y - \rho\dot\theta\cos\theta$. Two equivalent constraint sets
    (``formulation``, static):

    - ``"linear"`` (eqs 206-208): $a\dot\phi\cos\theta - \dot x_o = 0$,
      $a\dot\phi\sin\theta - \dot y_o = 0$;
    - ``"nonlinear"`` (eqs 157-158): $\dot x_o^2 + \dot y_o^2 - a^2\dot\phi^2 = 0$ and
      $\dot x\sin\theta - \dot y\cos\theta + \rho\dot\theta = 0$ (singular where
      $\dot\phi = 0$);

    both with the holonomic thread constraint $z + b\phi - z_0 = 0$ (eq 159). All are ideal
    and scleronomic, so the energy $T + mgz$ is conserved.

    Seed values: $a = 1$, $b = 0.5$, $\rho = 5$, $m = 1$, $M = 5$, $z_0 = 30$ (SI). The
    seed gives neither $I$ nor $g$: $I = 1$ (the only value for which the seed's eqs
    205/215/216, which drop $I$, are right) and $g = 9.81$. Corrected errata: eq 210's
    $A_2[2,5]$ is $-b$, so a falling weight *accelerates* the wheel (eq 216 as corrected
    in SEED_CASES).

    :meth:`reduced_rhs` gives the independent minimal form (Kane's method with speeds
    $\dot\theta$, $\dot\phi$; derivation in its docstring), used as the reference.
    """

    formulation: str = eqx.field(static=True, default="linear")
    a: float = 1.0
    b: float = 0.5
    rho: float = 5.0
    m: float = 1.0
    M: float = 5.0
    I: float = 1.0  # noqa: E741
    g: float = 9.81
    z0: float = 30.0

    def __check_init__(self):
        if self.formulation not in ("linear", "nonlinear"):
            raise ValueError(
                f"AppellHamelWheel: formulation must be 'linear' or 'nonlinear'; got {self.formulation!r}."
            )

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

    def nonholonomic(self, t, q, qd):
        th = q[0]
        thd, phd, xd, yd, _ = qd
        s, c = jnp.sin(th), jnp.cos(th)
        xo = xd + self.rho * thd * s
        yo = yd - self.rho * thd * c
        if self.formulation == "linear":
            return jnp.stack([self.a * phd * c - xo, self.a * phd * s - yo])
        return jnp.stack([xo**2 + yo**2 - (self.a * phd) ** 2, xd * s - yd * c + self.rho * thd])

    def initial_state(self):
        """The seed's IC: $\\dot\\theta = \\dot\\phi = 1$, $\\dot x = 1$, $\\dot y = 5$,
        $\\dot z = -0.5$, $z = 30$, other coordinates 0 (consistent with both formulations)."""
        q0 = jnp.array([0.0, 0.0, 0.0, 0.0, 30.0])
        qd0 = jnp.array([1.0, 1.0, 1.0, 5.0, -0.5])
        return q0, qd0

    def reduced_rhs(self, t, y):
        r"""Minimal-coordinate equations, derived by hand with Kane's method (not by UK).

        State $y = (\theta, \phi, x, y, z, \dot\theta, \dot\phi)$. With the constraints,
        P moves with $(a\dot\phi\cos\theta - \rho\dot\theta\sin\theta,\
        a\dot\phi\sin\theta + \rho\dot\theta\cos\theta,\ -b\dot\phi)$ and the wheel centre
        with $a\dot\phi(\cos\theta, \sin\theta, 0)$. Kane's equations for the speeds
        $\dot\theta$, $\dot\phi$ give

        $$(I + m\rho^2)\ddot\theta = -m\rho a\dot\theta\dot\phi,\qquad
        (I + (M + m)a^2 + mb^2)\ddot\phi = m a\rho\dot\theta^2 + mgb.$$
        """
        th, _, _, _, _, thd, phd = y
        a, b, rho, m = self.a, self.b, self.rho, self.m
        thdd = -m * rho * a * thd * phd / (self.I + m * rho**2)
        phdd = (m * a * rho * thd**2 + m * self.g * b) / (self.I + (self.M + m) * a**2 + m * b**2)
        xd = a * phd * jnp.cos(th) - rho * thd * jnp.sin(th)
        yd = a * phd * jnp.sin(th) + rho * thd * jnp.cos(th)
        return jnp.stack([thd, phd, xd, yd, -b * phd, thdd, phdd])
