r"""Unconstrained dynamics $(M, Q)$ of a :class:`~ukjax.System` and its constrained
acceleration."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from ._constraints import constraint_matrices
from ._system import System, _overrides, as_time, check_state, floatify
from ._uk import UKMethod, UKTerms, check_terms, uk_terms


def _vector(value, name, system, q):
    value = jnp.asarray(value, q.dtype)
    if value.shape != q.shape:
        raise ValueError(
            f"{type(system).__name__}.{name} must return an array of shape {q.shape} (one "
            f"entry per coordinate); got shape {value.shape}."
        )
    return value


def mass_and_force(system: System, t, q, qd):
    r"""The unconstrained model: mass matrix $M$ (n, n) and generalized force $Q$ (n,).

    $Q = $ `forces` $- \partial V/\partial q$, plus, when the system defines
    `kinetic_energy`, the Lagrange terms
    $\partial T/\partial q - \frac{\partial^2 T}{\partial\dot q\,\partial q}\dot q -
    \frac{\partial^2 T}{\partial\dot q\,\partial t}$.
    """
    q, qd = check_state(q, qd)
    t = as_time(t, q.dtype)
    n = q.shape[0]
    has_T = _overrides(system, "kinetic_energy")
    if has_T and not _overrides(system, "mass_matrix"):
        dT_dqd = lambda t_, q_, qd_: jax.grad(system.kinetic_energy, argnums=2)(t_, q_, qd_)
        M = jax.jacfwd(dT_dqd, argnums=2)(t, q, qd)
    else:
        M = jnp.asarray(system.mass_matrix(t, q), q.dtype)
    if M.shape != (n, n):
        raise ValueError(
            f"The mass matrix of {type(system).__name__} must have shape ({n}, {n}); got "
            f"{M.shape}."
        )
    Q = jnp.zeros_like(q)
    F = system.forces(t, q, qd)
    if F is not None:
        Q = Q + _vector(F, "forces", system, q)
    if system.potential_energy(t, q) is not None:
        V = lambda q_: jnp.asarray(system.potential_energy(t, q_), q.dtype)
        if jax.eval_shape(V, q).shape != ():
            raise ValueError(f"{type(system).__name__}.potential_energy must return a scalar.")
        Q = Q - jax.grad(V)(q)
    if has_T:
        T = system.kinetic_energy
        if jax.eval_shape(T, t, q, qd).shape != ():
            raise ValueError(f"{type(system).__name__}.kinetic_energy must return a scalar.")
        dT_dq = jax.grad(T, argnums=1)(t, q, qd)
        p = lambda t_, q_: jax.grad(T, argnums=2)(t_, q_, qd)  # generalized momentum
        _, p_dot_explicit = jax.jvp(p, (t, q), (jnp.ones((), q.dtype), qd))
        Q = Q + dT_dq - p_dot_explicit
    return M, Q


def nonideal_force(system: System, t, q, qd):
    """The non-ideal constraint vector C (n,) of the system, or None."""
    C = system.nonideal_force(t, q, qd)
    return None if C is None else _vector(C, "nonideal_force", system, q)


def acceleration_terms(
    system: System, t, q, qd, *, method: UKMethod = "auto", stabilization=None
) -> tuple[UKTerms, tuple]:
    """All Udwadia-Kalaba terms for the system at one state, plus the raw inputs."""
    q, qd = check_state(q, qd)
    t = as_time(t, q.dtype)
    M, Q = mass_and_force(system, t, q, qd)
    A, b = constraint_matrices(system, t, q, qd, stabilization=stabilization)
    C = nonideal_force(system, t, q, qd)
    terms = uk_terms(M, Q, A, b, C, method=method)
    inputs = (q, qd, M, Q, A, b) + (() if C is None else (C,))
    return terms, inputs


def acceleration(
    system: System,
    t,
    q,
    qd,
    *,
    method: UKMethod = "auto",
    check: bool = True,
    consistency_tol=None,
    stabilization=None,
) -> jax.Array:
    r"""The constrained acceleration $\ddot q$ of a system at one state $(t, q, \dot q)$.

    Builds $M$ and $Q$ from the system's energies and forces, $A$ and $b$ from its
    constraints (automatic differentiation), and solves the Udwadia-Kalaba equation
    (see :func:`ukjax.udwadia_kalaba` for `method`, `check` and `consistency_tol`).
    `stabilization=ukjax.Baumgarte(alpha, beta)` adds Baumgarte feedback to `b`.

    **Returns:** (n,) array. `jit`/`vmap`/`grad` compatible; batch with `jax.vmap`.

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import CartesianPendulum
        >>> pend = CartesianPendulum(mass=1.0, length=1.0, g=9.81)
        >>> qdd = ukjax.acceleration(pend, 0.0, jnp.array([0.6, -0.8]), jnp.zeros(2))
        >>> [round(float(v), 4) for v in qdd]     # seed 001 eq 33h at rest
        [-4.7088, -3.5316]
    """
    q, qd = check_state(q, qd)
    t = as_time(t, q.dtype)
    return _acceleration(
        floatify(system), t, q, qd, method, check, consistency_tol, floatify(stabilization)
    )


@eqx.filter_jit
def _acceleration(system, t, q, qd, method, check, consistency_tol, stabilization):
    terms, inputs = acceleration_terms(
        system, t, q, qd, method=method, stabilization=stabilization
    )
    if not check:
        return terms.qdd
    return check_terms(terms.qdd, terms, inputs[2], inputs, consistency_tol=consistency_tol)


def kinetic_energy(system: System, t, q, qd) -> jax.Array:
    r"""$T$ from the system's `kinetic_energy`, else $\tfrac12\dot q^TM\dot q$."""
    q, qd = check_state(q, qd)
    t = as_time(t, q.dtype)
    if _overrides(system, "kinetic_energy"):
        return jnp.asarray(system.kinetic_energy(t, q, qd), q.dtype)
    M = jnp.asarray(system.mass_matrix(t, q), q.dtype)
    return 0.5 * qd @ M @ qd


def energy(system: System, t, q, qd) -> jax.Array:
    r"""Mechanical energy $T + V$ (V = 0 when the system defines no potential).

    Conserved along the motion when the constraints are ideal and scleronomic, the system
    is time-invariant and `forces` does no work.
    """
    q, qd = check_state(q, qd)
    t = as_time(t, q.dtype)
    V = system.potential_energy(t, q)
    T = kinetic_energy(system, t, q, qd)
    return T if V is None else T + jnp.asarray(V, q.dtype)
