r"""Constraint stabilisation strategies: the abstract base, none, and Baumgarte feedback.

The UK equation enforces constraints at the acceleration level ($A\ddot q = b$), so
integration error lets $q$ and $\dot q$ drift off $\varphi = 0$, $\dot\varphi = 0$,
$\psi = 0$ (*On Dynamics* lecture notes 2020, §3.6.1; Bajodah 2003, *Acceleration
Constraints in Modeling and Control of Nonholonomic Systems*, §4.5-4.6). A stabilisation
is a strategy object that owns both of its possible effects:

- a change of the right-hand side $b$ of the constraint rows
  (:meth:`AbstractStabilization.holonomic_feedback`,
  :meth:`~AbstractStabilization.nonholonomic_feedback`),
- a change of the integration (:meth:`~AbstractStabilization.wrap_solver`, and
  :meth:`~AbstractStabilization.save_fn` for the saved values).

:class:`NoStabilization` does neither, :class:`Baumgarte` the first, and
:class:`ukjax.Projection` (:mod:`ukjax._projection`) the second.
"""

from __future__ import annotations

from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp

from ._system import System


class AbstractStabilization(eqx.Module):
    """Base class of constraint stabilisations. Every method has a neutral default."""

    def holonomic_feedback(self, phi: jax.Array, phi_dot: jax.Array) -> jax.Array | None:
        r"""Term added to $b$ of the holonomic rows, or `None` for none."""
        return None

    def nonholonomic_feedback(self, psi: jax.Array) -> jax.Array | None:
        r"""Term added to $b$ of the nonholonomic rows, or `None` for none."""
        return None

    def wrap_solver(self, solver: diffrax.AbstractSolver, system: System) -> diffrax.AbstractSolver:
        """The diffrax solver to integrate with (default: `solver` unchanged)."""
        return solver

    def save_fn(self, system: System) -> Callable | None:
        """`fn(t, (q, qd), args)` applied to the saved states, or `None` (save as is)."""
        return None

    def check_adjoint(self, adjoint: diffrax.AbstractAdjoint) -> None:
        """Raise a ValueError if `adjoint` cannot differentiate a solve stabilised this way
        (default: every adjoint can)."""


class NoStabilization(AbstractStabilization):
    """Plain UK: constraints enforced at the acceleration level only (the default with
    `ukjax.IgnoreInitial()` and in hybrid runs; smooth runs otherwise project every step,
    see `AbstractInitialConditions.default_stabilization`).

    Example:
        >>> import ukjax
        >>> ukjax.NoStabilization().holonomic_feedback(None, None) is None
        True
    """


class Baumgarte(AbstractStabilization):
    r"""Baumgarte stabilisation $\ddot\varphi + 2\alpha\dot\varphi + \beta^2\varphi = 0$,
    $\dot\psi + \alpha\psi = 0$.

    That is $b \leftarrow b - 2\alpha\dot\varphi - \beta^2\varphi$ (holonomic rows) and
    $b \leftarrow b - \alpha\psi$ (nonholonomic rows): violations decay like a damped
    oscillator. Cheap and differentiable in the gains, but it adds stiffness (large gains
    need small steps) and perturbs the energy.

    **Arguments:**

    - `alpha`: damping rate (1/s); applies to holonomic ($2\alpha\dot\varphi$) and
      nonholonomic ($\alpha\psi$) rows.
    - `beta`: natural frequency (1/s) of the holonomic correction ($\beta^2\varphi$).

    Both are pytree leaves: differentiable, and `vmap`-able over a batch of gains.
    Bajodah (2003, §4.6) writes the same law as
    $\ddot\varphi - \Gamma_1\dot\varphi - \Gamma_2\varphi = 0$ with Hurwitz (negative)
    gains; :meth:`from_seed_gains` converts ($\Gamma_1 = -2\alpha$, $\Gamma_2 = -\beta^2$,
    and $\Gamma = -\alpha$ for $\dot\psi - \Gamma\psi = 0$).

    Example:
        >>> import ukjax
        >>> b = ukjax.Baumgarte.from_seed_gains(-20.0, -100.0)   # Bajodah 2003, §4.6
        >>> float(b.alpha), float(b.beta)
        (10.0, 10.0)
    """

    alpha: float | jax.Array = 0.0
    beta: float | jax.Array = 0.0

    @classmethod
    def from_seed_gains(cls, gamma1, gamma2=0.0) -> Baumgarte:
        r"""From Bajodah's $\ddot\varphi - \Gamma_1\dot\varphi - \Gamma_2\varphi = 0$."""
        gamma1, gamma2 = jnp.asarray(gamma1, float), jnp.asarray(gamma2, float)
        return cls(alpha=-gamma1 / 2, beta=jnp.sqrt(-gamma2))

    @classmethod
    def critically_damped(cls, rate) -> Baumgarte:
        r"""$\alpha = \beta = $ `rate`: violations decay like $(1 + rt)e^{-rt}$."""
        return cls(alpha=rate, beta=rate)

    def holonomic_feedback(self, phi, phi_dot):
        alpha = jnp.asarray(self.alpha, phi.dtype)
        beta = jnp.asarray(self.beta, phi.dtype)
        return -2.0 * alpha * phi_dot - beta**2 * phi

    def nonholonomic_feedback(self, psi):
        return -jnp.asarray(self.alpha, psi.dtype) * psi


def check_stabilization(stabilization) -> AbstractStabilization:
    """`stabilization` (None: :class:`NoStabilization`, the plain UK terms; `simulate`
    resolves `None` itself), or a TypeError saying what to pass."""
    if stabilization is None:
        return NoStabilization()
    if not isinstance(stabilization, AbstractStabilization):
        raise TypeError(
            "stabilization must be None, ukjax.Baumgarte(alpha, beta), ukjax.Projection() or "
            f"another ukjax.AbstractStabilization; got {type(stabilization).__name__}."
        )
    return stabilization
