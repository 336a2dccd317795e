r"""Impulsive motion under bilateral constraints: the UK impulsive projection.

An impulse $\hat{\mathcal I}$ (generalized, N·s) applied to a system with velocity-level
constraints $J(q,t)\dot q = c$ (the holonomic rows $\dot\varphi = \varphi_q\dot q +
\varphi_t = 0$ and the nonholonomic rows $\psi = 0$, linear in $\dot q$ across the
impulse) changes the velocity to (Bajodah 2003, *Acceleration Constraints in Modeling and
Control of Nonholonomic Systems*, ch. 6, eqs 424-427, in the UK form)

$$w = \dot q^- + M^{-1}\hat{\mathcal I},\qquad \dot q^+ = w - A_M^+(Jw - c),$$

with $A_M^+ = M^{-1/2}(JM^{-1/2})^+$ (:func:`ukjax.weighted_pinv`): the post-impact
velocity closest to $w$ in the kinetic-energy metric that satisfies every constraint
(Gauss's principle at the impulse level). Redundant rows are allowed. Contacts add rows
$\nabla g_i\dot q^+ = \dot g_i^+ - \partial_t g_i$ (:class:`ukjax.Impact`).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from ._dynamics import mass_matrix, row_solve
from ._precision import full_precision
from ._residuals import velocity_level
from ._system import System, as_time, check_state, floatify
from ._uk_solvers import Regularized
from ._xla import jit


def velocity_rows(system: System, t, q, qd) -> tuple[jax.Array, jax.Array]:
    r"""$(J, r)$: the Jacobian of the velocity-level constraints $[\dot\varphi; \psi]$ with
    respect to $\dot q$, and their values at `qd` (zero on the constraints)."""
    f = lambda v: velocity_level(system, t, q, v)
    return jax.jacfwd(f)(qd), f(qd)


def impulse_jump(system: System, t, q, qd, impulse, uk_solver=None) -> jax.Array:
    """$\\dot q^+$ for validated inputs (see :func:`apply_impulse`): the UK equation for the
    jump $\\Delta\\dot q$ with the force `impulse` and the rows $J\\Delta\\dot q = c - J\\dot q^-$
    (the run's `uk_solver`; default :class:`ukjax.Regularized`)."""
    M = mass_matrix(system, t, q, qd)
    J, r = velocity_rows(system, t, q, qd)
    solve = row_solve(system, M, Regularized() if uk_solver is None else uk_solver)
    return qd + solve(J, impulse, -r).qdd


@full_precision
def apply_impulse(
    system: System,
    t: ArrayLike,
    q: Float[ArrayLike, " n"],
    qd: Float[ArrayLike, " n"],
    impulse: Float[ArrayLike, " n"],
) -> Float[Array, " n"]:
    r"""The velocity $\dot q^+$ just after a generalized impulse, all bilateral constraints
    kept (module docstring; Bajodah 2003, eqs 424-427).

    The constraints' own impulsive reaction is ideal (no work in the constrained
    directions); the kinetic-energy change is $\tfrac12(\dot q^+ + \dot q^-)^T\hat{\mathcal
    I}$ (so $\tfrac12\hat{\mathcal I}^T\dot q^+$ from rest). Redundant constraints are
    allowed; differentiable in every argument and in the system's parameters.

    **Arguments:** `system`, time `t`, coordinates `q` (n,), pre-impulse velocity `qd`
    (n,) and the generalized impulse (n,) (the impulse of the applied forces projected
    on the coordinates, N·s).

    **Returns:** (n,) post-impulse velocity.

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import CartesianPendulum
        >>> pend = CartesianPendulum(mass=2.0, length=1.0)
        >>> # hang at (0, -1), strike horizontally with 1 N s and vertically with 5 N s:
        >>> qd = ukjax.apply_impulse(pend, 0.0, jnp.array([0.0, -1.0]), jnp.zeros(2),
        ...                          jnp.array([1.0, 5.0]))
        >>> [round(float(v), 12) for v in qd]   # the rod absorbs the radial part
        [0.5, 0.0]
    """
    q_, qd_ = check_state(q, qd, system)
    impulse = jnp.asarray(impulse, q_.dtype)
    if impulse.shape != q_.shape:
        raise ValueError(
            f"apply_impulse: the impulse must have one entry per coordinate, shape {q_.shape}; "
            f"got {impulse.shape}."
        )
    return _apply(floatify(system), as_time(t, q_.dtype), q_, qd_, impulse)


@jit(batched=False)
def _apply(system, t, q, qd, impulse):
    return impulse_jump(system, t, q, qd, impulse)


class Impulses(eqx.Module):
    r"""Generalized impulses applied at given times during :func:`ukjax.simulate`.

    - `times`: (K,) non-decreasing times within the run's `[ts[0], ts[-1]]` (impulses at one
      time apply in order; :func:`ukjax.simulate` refuses known times that decrease or
      precede `ts[0]`; traced ones whose time has passed apply at once; one after
      `ts[-1]` never applies).
    - `values`: (K, n) generalized impulses (N·s); each is applied with
      :func:`ukjax.apply_impulse` (every bilateral constraint kept).

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> kicks = ukjax.Impulses(times=jnp.array([0.5]), values=jnp.array([[1.0, 0.0]]))
        >>> kicks.values.shape
        (1, 2)
    """

    times: jax.Array
    values: jax.Array

    def __init__(self, times, values):
        times, values = jnp.asarray(times), jnp.asarray(values)
        if times.ndim != 1 or values.ndim != 2 or values.shape[0] != times.shape[0]:
            raise ValueError(
                "Impulses: times must have shape (K,) and values (K, n); got "
                f"{times.shape} and {values.shape}."
            )
        self.times, self.values = times, values
