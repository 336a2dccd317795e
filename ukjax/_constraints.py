r"""Constraint matrices $A(q,\dot q,t)$ and $b(q,\dot q,t)$ by automatic differentiation.

Holonomic $\varphi(q,t) = 0$, differentiated twice:

$$\varphi_q\,\ddot q = -\big(\varphi_{tt} + 2\varphi_{qt}\dot q + \dot q^T\varphi_{qq}\dot q\big)
 = -\frac{d^2}{ds^2}\varphi(t+s,\,q+s\dot q)\Big|_{s=0}.$$

(*On Dynamics*, lecture notes 2020, eq 30 omits the mixed term $2\varphi_{qt}\dot q$; it is
included here, so moving supports such as $(x - s(t))^2 + y^2 - L^2$ are handled correctly.)

Nonholonomic $\psi(q,\dot q,t) = 0$, possibly nonlinear in $\dot q$, differentiated once:

$$\psi_{\dot q}\,\ddot q = -(\psi_t + \psi_q\dot q).$$
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from ._precision import full_precision
from ._residuals import as_rows, has_holonomic, has_nonholonomic, phi, phi_second, psi
from ._stabilization import AbstractStabilization, NoStabilization, check_stabilization
from ._structure import Structure, entries_of
from ._system import System, as_time, check_state
from ._xla import eager_jit


def _add(b, feedback):
    return b if feedback is None else b + feedback


def _holonomic_b(system: System, t, q, qd, stabilization: AbstractStabilization):
    phi0, phid0, phidd = phi_second(system, t, q, qd)
    return _add(-phidd, stabilization.holonomic_feedback(phi0, phid0))


def _nonholonomic_b(system: System, t, q, qd, stabilization: AbstractStabilization):
    one = jnp.ones((), q.dtype)
    psi0, psi_dot = jax.jvp(lambda t_, q_: psi(system, t_, q_, qd), (t, q), (one, qd))
    return _add(-psi_dot, stabilization.nonholonomic_feedback(psi0))


def _phi_of_q(system: System, t):
    return lambda x: phi(system, t, x)


def _psi_of_qd(system: System, t, q):
    return lambda v: psi(system, t, q, v)


def holonomic_rows(system: System, t, q, qd, stabilization: AbstractStabilization):
    r"""(A, b) rows of the holonomic constraints, or None; b gains the stabilisation's
    holonomic feedback (Baumgarte: $-2\alpha\dot\varphi - \beta^2\varphi$)."""
    if not has_holonomic(system, t, q):
        return None
    A = jax.jacfwd(_phi_of_q(system, t))(q)
    return A, _holonomic_b(system, t, q, qd, stabilization)


def nonholonomic_rows(system: System, t, q, qd, stabilization: AbstractStabilization):
    r"""(A, b) rows of the nonholonomic constraints, or None; b gains the stabilisation's
    nonholonomic feedback (Baumgarte: $-\alpha\psi$)."""
    if not has_nonholonomic(system, t, q, qd):
        return None
    A = jax.jacfwd(_psi_of_qd(system, t, q))(qd)
    return A, _nonholonomic_b(system, t, q, qd, stabilization)


def raw_rows(system: System, t, q, qd):
    """(A, b) rows given directly by ``acceleration_constraint``, or None."""
    out = system.acceleration_constraint(t, q, qd)
    if out is None:
        return None
    try:
        A, b = out
    except (TypeError, ValueError):
        raise ValueError(
            f"{type(system).__name__}.acceleration_constraint must return a pair (A, b)."
        ) from None
    A = jnp.asarray(A, q.dtype)
    b = jnp.asarray(b)
    if not jnp.issubdtype(b.dtype, jnp.inexact):  # constant rows: used as given, never
        b = b.astype(q.dtype)  # differentiated, so an integer b means what it says
    b = as_rows(b, "acceleration_constraint (b)", system, q.dtype)
    if A.ndim == 1:
        A = A[None, :]
    if A.shape != (b.shape[0], q.shape[0]):
        raise ValueError(
            f"{type(system).__name__}.acceleration_constraint returned A of shape {A.shape} "
            f"and b of shape {b.shape}; expected A (m, {q.shape[0]}) and b (m,)."
        )
    return A, b


def rows(system: System, t, q, qd, stabilization: AbstractStabilization = NoStabilization()):
    """`(A, b)` for already validated `t`, `q`, `qd` (see :func:`constraint_matrices`)."""
    blocks = [
        blk
        for blk in (
            holonomic_rows(system, t, q, qd, stabilization),
            nonholonomic_rows(system, t, q, qd, stabilization),
            raw_rows(system, t, q, qd),
        )
        if blk is not None
    ]
    if not blocks:
        return jnp.zeros((0, q.shape[0]), q.dtype), jnp.zeros((0,), q.dtype)
    A = jnp.concatenate([blk[0] for blk in blocks], axis=0)
    b = jnp.concatenate([blk[1] for blk in blocks], axis=0)
    return A, b


def jacobian_blocks(system: System, t, q, qd):
    """The dense constraint Jacobians (holonomic w.r.t. q, nonholonomic w.r.t. qd, raw A),
    each None when absent (for :func:`ukjax._structure.detect`)."""
    hol = jax.jacfwd(_phi_of_q(system, t))(q) if has_holonomic(system, t, q) else None
    nonhol = None
    if has_nonholonomic(system, t, q, qd):
        nonhol = jax.jacfwd(_psi_of_qd(system, t, q))(qd)
    raw = raw_rows(system, t, q, qd)
    return hol, nonhol, None if raw is None else raw[0]


def structured_rows(
    system: System, t, q, qd, stabilization: AbstractStabilization, structure: Structure
) -> tuple[jax.Array, jax.Array]:
    """The structural entries of A (in `structure.constraint_entries()` order) and b.

    Each Jacobian is one forward-mode product per column colour
    (:class:`ukjax._structure.JacobianPlan`) instead of one per coordinate."""
    values, bs = [], []
    if structure.holonomic is not None:
        values.append(structure.holonomic.jacobian(_phi_of_q(system, t), q))
        bs.append(_holonomic_b(system, t, q, qd, stabilization))
    if structure.nonholonomic is not None:
        values.append(structure.nonholonomic.jacobian(_psi_of_qd(system, t, q), qd))
        bs.append(_nonholonomic_b(system, t, q, qd, stabilization))
    if structure.raw is not None:
        out = raw_rows(system, t, q, qd)
        assert out is not None
        values.append(entries_of(out[0], structure.raw))
        bs.append(out[1])
    if not values:
        return jnp.zeros((0,), q.dtype), jnp.zeros((0,), q.dtype)
    return jnp.concatenate(values), jnp.concatenate(bs)


@full_precision
@eager_jit
def constraint_matrices(
    system: System,
    t: ArrayLike,
    q: Float[ArrayLike, " n"],
    qd: Float[ArrayLike, " n"],
    *,
    stabilization: AbstractStabilization | None = None,
) -> tuple[Float[Array, "m n"], Float[Array, " m"]]:
    r"""The stacked constraint rows $(A, b)$ of $A\ddot q = b$ at one state.

    Rows come in the order: holonomic (differentiated twice), nonholonomic
    (differentiated once), then raw `acceleration_constraint` rows. With
    `stabilization=ukjax.Baumgarte(alpha, beta)` the holonomic and nonholonomic rows of `b`
    carry the Baumgarte feedback terms (raw rows are left as given); in general, whatever
    the stabilisation's `holonomic_feedback` and `nonholonomic_feedback` return.

    **Returns:** `A` of shape (m, n) and `b` of shape (m,); m = 0 when the system has no
    constraints.

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import CartesianPendulum
        >>> A, b = ukjax.constraint_matrices(CartesianPendulum(), 0.0,
        ...     jnp.array([0.6, -0.8]), jnp.array([0.8, 0.6]))
        >>> [[round(float(v), 6) for v in row] for row in A], [round(float(v), 6) for v in b]
        ([[1.2, -1.6]], [-2.0])
        >>> # A = 2 q^T and b = -2 |qd|^2
    """
    q_, qd_ = check_state(q, qd, system)
    return rows(system, as_time(t, q_.dtype), q_, qd_, check_stabilization(stabilization))
