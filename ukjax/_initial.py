r"""Constraint residuals at position and velocity level, and consistent initial conditions."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ._constraints import _as_rows
from ._dynamics import mass_and_force
from ._linalg import weighted_pinv_solve
from ._system import System, as_time, check_state


class ConstraintResiduals(NamedTuple):
    """Residuals of the position- and velocity-level constraints at one state.

    - `position`: $\\varphi(q,t)$ of the holonomic constraints, shape (h,).
    - `velocity`: $\\dot\\varphi = \\varphi_q\\dot q + \\varphi_t$, shape (h,).
    - `nonholonomic`: $\\psi(q,\\dot q,t)$, shape (k,).
    """

    position: jax.Array
    velocity: jax.Array
    nonholonomic: jax.Array

    def max_abs(self) -> jax.Array:
        """Largest absolute residual over all three levels (0 if there are none)."""
        parts = [jnp.max(jnp.abs(x), initial=0.0) for x in self]
        return jnp.max(jnp.stack(parts))


def _phi(system, t, q):
    return _as_rows(system.holonomic(t, q), "holonomic", system, q.dtype)


def _psi(system, t, q, qd):
    return _as_rows(system.nonholonomic(t, q, qd), "nonholonomic", system, q.dtype)


def _velocity_level(system, t, q, qd):
    """All velocity-level constraint values h(qd) = [phi_q qd + phi_t; psi]."""
    parts = []
    if system.holonomic(t, q) is not None:
        one = jnp.ones((), q.dtype)
        _, phid = jax.jvp(lambda t_, q_: _phi(system, t_, q_), (t, q), (one, qd))
        parts.append(phid)
    if system.nonholonomic(t, q, qd) is not None:
        parts.append(_psi(system, t, q, qd))
    return jnp.concatenate(parts) if parts else jnp.zeros((0,), q.dtype)


def constraint_residuals(system: System, t, q, qd) -> ConstraintResiduals:
    r"""Position, velocity and nonholonomic constraint residuals at one state.

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import CartesianPendulum
        >>> r = ukjax.constraint_residuals(CartesianPendulum(length=1.0), 0.0,
        ...                                jnp.array([1.0, 0.1]), jnp.array([0.0, 1.0]))
        >>> round(float(r.position[0]), 6), round(float(r.velocity[0]), 6)
        (0.01, 0.2)
    """
    q, qd = check_state(q, qd)
    t = as_time(t, q.dtype)
    empty = jnp.zeros((0,), q.dtype)
    if system.holonomic(t, q) is not None:
        pos = _phi(system, t, q)
        one = jnp.ones((), q.dtype)
        _, vel = jax.jvp(lambda t_, q_: _phi(system, t_, q_), (t, q), (one, qd))
    else:
        pos, vel = empty, empty
    nh = _psi(system, t, q, qd) if system.nonholonomic(t, q, qd) is not None else empty
    return ConstraintResiduals(pos, vel, nh)


def _mass_metric_step(L, J, r):
    """Minimum-M-norm correction dx with J dx = -r: dx = -L^{-T} (J L^{-T})^+ r."""
    return -weighted_pinv_solve(L, J, r[:, None])[:, 0]


def project_initial_conditions(system: System, t0, q0, qd0, *, iterations: int = 12):
    r"""The consistent state nearest to $(q_0, \dot q_0)$ in the mass metric.

    First $q$ is moved onto $\varphi(q, t_0) = 0$ by Newton steps of minimum
    $M$-norm, $\Delta q = -M^{-1}\varphi_q^T(\varphi_qM^{-1}\varphi_q^T)^+\varphi$; then
    $\dot q$ onto $\dot\varphi = 0$, $\psi = 0$ the same way (one step is exact for
    constraints linear in $\dot q$). Redundant constraints are fine. Differentiable.

    **Returns:** `(q0, qd0)` projected.

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import CartesianPendulum
        >>> pend = CartesianPendulum(length=1.0)
        >>> q, qd = ukjax.project_initial_conditions(pend, 0.0, jnp.array([1.1, 0.0]),
        ...                                          jnp.array([0.3, 1.0]))
        >>> [round(float(v), 6) for v in q], [round(float(v), 6) for v in qd]
        ([1.0, 0.0], [0.0, 1.0])
    """
    q, qd = check_state(q0, qd0)
    t = as_time(t0, q.dtype)

    def chol(q_):
        M, _ = mass_and_force(system, t, q_, jnp.zeros_like(q_))
        return jnp.linalg.cholesky(M)

    if system.holonomic(t, q) is not None:

        def pos_step(_, q_):
            J = jax.jacfwd(lambda x: _phi(system, t, x))(q_)
            return q_ + _mass_metric_step(chol(q_), J, _phi(system, t, q_))

        q = jax.lax.fori_loop(0, iterations, pos_step, q)

    if _velocity_level(system, t, q, qd).shape[0] > 0:
        L = chol(q)

        def vel_step(_, qd_):
            h = lambda v: _velocity_level(system, t, q, v)
            J = jax.jacfwd(h)(qd_)
            return qd_ + _mass_metric_step(L, J, h(qd_))

        qd = jax.lax.fori_loop(0, iterations, vel_step, qd)
    return q, qd
