r"""Constraint stabilisation: Baumgarte feedback and mass-metric projection.

The UK equation enforces constraints at the acceleration level ($A\ddot q = b$), so
integration error lets $q$ and $\dot q$ drift off $\varphi = 0$, $\dot\varphi = 0$,
$\psi = 0$ (seed 001 §3.6.1, seed 004 §4.5-4.6). Two remedies:

- :class:`Baumgarte`: replace $\ddot\varphi = 0$ by $\ddot\varphi + 2\alpha\dot\varphi +
  \beta^2\varphi = 0$ and $\dot\psi = 0$ by $\dot\psi + \alpha\psi = 0$, i.e.
  $b \leftarrow b - 2\alpha\dot\varphi - \beta^2\varphi$ (holonomic rows) and
  $b \leftarrow b - \alpha\psi$ (nonholonomic rows). Violations then decay like a damped
  oscillator. Cheap, differentiable in the gains, but it adds stiffness (large gains need
  small steps) and perturbs the energy.
- :class:`Projection`: after every integrator step, move $(q, \dot q)$ back onto the
  constraint manifold by the minimum-$M$-norm correction (Newton steps
  $\Delta q = -M^{-1}\varphi_q^T(\varphi_qM^{-1}\varphi_q^T)^+\varphi$, then the same for
  $\dot q$ on $\dot\varphi = 0$, $\psi = 0$). Residuals stay at round-off without
  changing the stiffness; costs a few Jacobians per step.

Why after each step rather than at save points: projecting only the saved output would
leave the integrated state drifting (the saved values would be corrected but the motion
itself would not), and projecting inside the step keeps every step starting on the
manifold, which is what bounds the drift. The saved values are projected as well, since
dense output between steps interpolates the unprojected stages.
"""

from __future__ import annotations

from typing import ClassVar

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from diffrax import AbstractWrappedSolver
from diffrax._solver.runge_kutta import AbstractERK, ButcherTableau

from ._system import System


class Baumgarte(eqx.Module):
    r"""Baumgarte stabilisation $\ddot\varphi + 2\alpha\dot\varphi + \beta^2\varphi = 0$,
    $\dot\psi + \alpha\psi = 0$.

    **Arguments:**

    - `alpha`: damping rate (1/s); applies to holonomic ($2\alpha\dot\varphi$) and
      nonholonomic ($\alpha\psi$) rows.
    - `beta`: natural frequency (1/s) of the holonomic correction ($\beta^2\varphi$).

    Both are pytree leaves: differentiable, and `vmap`-able over a batch of gains.
    Seed 004 writes the same law as $\ddot\varphi - \Gamma_1\dot\varphi - \Gamma_2\varphi = 0$
    with Hurwitz (negative) gains; :meth:`from_seed_gains` converts
    ($\Gamma_1 = -2\alpha$, $\Gamma_2 = -\beta^2$, and $\Gamma = -\alpha$ for
    $\dot\psi - \Gamma\psi = 0$).

    Example:
        >>> import ukjax
        >>> b = ukjax.Baumgarte.from_seed_gains(-20.0, -100.0)   # seed 004 §4.6
        >>> float(b.alpha), float(b.beta)
        (10.0, 10.0)
    """

    alpha: float | jax.Array = 0.0
    beta: float | jax.Array = 0.0

    @classmethod
    def from_seed_gains(cls, gamma1, gamma2=0.0) -> Baumgarte:
        """From seed 004's $\\ddot\\varphi - \\Gamma_1\\dot\\varphi - \\Gamma_2\\varphi = 0$."""
        gamma1, gamma2 = jnp.asarray(gamma1, float), jnp.asarray(gamma2, float)
        return cls(alpha=-gamma1 / 2, beta=jnp.sqrt(-gamma2))

    @classmethod
    def critically_damped(cls, rate) -> Baumgarte:
        """$\\alpha = \\beta = $ `rate`: violations decay like $(1 + rt)e^{-rt}$."""
        return cls(alpha=rate, beta=rate)


def baumgarte_part(stabilization) -> Baumgarte | None:
    """The stabilization if it acts on the equations of motion (Baumgarte), else None
    (a Projection leaves the integrated equation the plain UK one)."""
    return stabilization if isinstance(stabilization, Baumgarte) else None


class Projection(eqx.Module):
    r"""Project $(q, \dot q)$ onto the constraint manifold after every integrator step.

    **Arguments:**

    - `iterations`: Newton iterations per projection for positions (and for velocities
      under constraints nonlinear in $\dot q$); each step starts within the local
      truncation error of the manifold, so 2 suffice (quadratic convergence).

    Use as `simulate(..., stabilization=ukjax.Projection())`. Works with any diffrax
    solver; one extra right-hand-side evaluation per step for FSAL solvers (the first
    stage is re-evaluated at the projected state).
    """

    iterations: int = eqx.field(static=True, default=2)


class ProjectedSolver(AbstractWrappedSolver):
    """A diffrax solver whose every step ends with a mass-metric projection of the state."""

    solver: diffrax.AbstractSolver
    system: System
    iterations: int = eqx.field(static=True, default=2)

    @property
    def term_structure(self):
        return self.solver.term_structure

    @property
    def interpolation_cls(self):
        return self.solver.interpolation_cls

    @property
    def term_compatible_contr_kwargs(self):
        return self.solver.term_compatible_contr_kwargs

    def order(self, terms):
        return self.solver.order(terms)

    def strong_order(self, terms):
        return self.solver.strong_order(terms)

    def error_order(self, terms):
        return self.solver.error_order(terms)

    def init(self, terms, t0, t1, y0, args):
        return self.solver.init(terms, t0, t1, y0, args)

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        from ._initial import project_initial_conditions

        # made_jump=True: re-evaluate the first stage at the (projected) y0 instead of
        # reusing an FSAL value computed at the unprojected end of the previous step.
        y1, y_error, dense_info, solver_state, result = self.solver.step(
            terms, t0, t1, y0, args, solver_state, True
        )
        q1, qd1 = y1
        y1 = project_initial_conditions(self.system, t1, q1, qd1, iterations=self.iterations)
        return y1, y_error, dense_info, solver_state, result

    def func(self, terms, t0, y0, args):
        return self.solver.func(terms, t0, y0, args)


_kutta_merson_tableau = ButcherTableau(
    a_lower=(
        np.array([1 / 3]),
        np.array([1 / 6, 1 / 6]),
        np.array([1 / 8, 0.0, 3 / 8]),
        np.array([1 / 2, 0.0, -3 / 2, 2.0]),
    ),
    b_sol=np.array([1 / 6, 0.0, 0.0, 2 / 3, 1 / 6]),
    # Merson's error estimate h/30 (2k1 - 9k3 + 8k4 - k5).
    b_error=np.array([2 / 30, 0.0, -9 / 30, 8 / 30, -1 / 30]),
    c=np.array([1 / 3, 1 / 3, 1 / 2, 1.0]),
)


class KuttaMerson(AbstractERK):
    r"""The Kutta-Merson 4th-order method with Merson's error estimate (5 stages).

    The fixed-step integrator of seed 004 (Bajodah 2003, §4.6):
    $k_1 = f(y)$, $k_2 = f(y + \tfrac h3k_1)$, $k_3 = f(y + \tfrac h6(k_1 + k_2))$,
    $k_4 = f(y + \tfrac h8(k_1 + 3k_3))$, $k_5 = f(y + h(\tfrac12k_1 - \tfrac32k_3 + 2k_4))$,
    $y_{n+1} = y_n + \tfrac h6(k_1 + 4k_4 + k_5)$. Use with
    `diffrax.ConstantStepSize()` and `dt0` to reproduce the seed's runs.
    """

    tableau: ClassVar[ButcherTableau] = _kutta_merson_tableau
    interpolation_cls: ClassVar = diffrax.ThirdOrderHermitePolynomialInterpolation.from_k

    def order(self, terms):
        del terms
        return 4


_rk4_tableau = ButcherTableau(
    a_lower=(np.array([1 / 2]), np.array([0.0, 1 / 2]), np.array([0.0, 0.0, 1.0])),
    b_sol=np.array([1 / 6, 1 / 3, 1 / 3, 1 / 6]),
    # The classical method has no embedded pair: the "error" is the difference from the
    # 2nd-order midpoint rule (k2), usable only for rough step control.
    b_error=np.array([1 / 6, 1 / 3 - 1.0, 1 / 3, 1 / 6]),
    c=np.array([1 / 2, 1 / 2, 1.0]),
)


class RK4(AbstractERK):
    r"""The classical 4th-order Runge-Kutta method (4 stages).

    $k_1 = f(y)$, $k_2 = f(y + \tfrac h2k_1)$, $k_3 = f(y + \tfrac h2k_2)$,
    $k_4 = f(y + hk_3)$, $y_{n+1} = y_n + \tfrac h6(k_1 + 2k_2 + 2k_3 + k_4)$: the same
    method as MuJoCo's `integrator="RK4"`, for comparisons at equal cost per step. Use with
    `diffrax.ConstantStepSize()` and `dt0`.
    """

    tableau: ClassVar[ButcherTableau] = _rk4_tableau
    interpolation_cls: ClassVar = diffrax.ThirdOrderHermitePolynomialInterpolation.from_k

    def order(self, terms):
        del terms
        return 4
