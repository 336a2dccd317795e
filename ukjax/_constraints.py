r"""Constraint matrices $A(q,\dot q,t)$ and $b(q,\dot q,t)$ by automatic differentiation.

Holonomic $\varphi(q,t) = 0$, differentiated twice:

$$\varphi_q\,\ddot q = -\big(\varphi_{tt} + 2\varphi_{qt}\dot q + \dot q^T\varphi_{qq}\dot q\big)
 = -\frac{d^2}{ds^2}\varphi(t+s,\,q+s\dot q)\Big|_{s=0}.$$

(Seed 001 eq 30 omits the mixed term $2\varphi_{qt}\dot q$; it is included here, so moving
supports such as $(x - s(t))^2 + y^2 - L^2$ are handled correctly.)

Nonholonomic $\psi(q,\dot q,t) = 0$, possibly nonlinear in $\dot q$, differentiated once:

$$\psi_{\dot q}\,\ddot q = -(\psi_t + \psi_q\dot q).$$
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ._system import System, as_time, check_state


def _as_rows(value, name: str, system: System, dtype) -> jax.Array:
    value = jnp.asarray(value)
    if value.ndim == 0:
        value = value[None]
    if value.ndim != 1:
        raise ValueError(
            f"{type(system).__name__}.{name} must return a 1-D array (one entry per "
            f"constraint); got shape {value.shape}."
        )
    return value.astype(dtype)


def holonomic_rows(system: System, t, q, qd, stabilization=None):
    r"""(A, b) rows of the holonomic constraints, or None.

    With a :class:`~ukjax.Baumgarte` stabilization, b gains $-2\alpha\dot\varphi -
    \beta^2\varphi$."""
    if system.holonomic(t, q) is None:
        return None
    phi = lambda t_, q_: _as_rows(system.holonomic(t_, q_), "holonomic", system, q.dtype)
    A = jax.jacfwd(phi, argnums=1)(t, q)
    one = jnp.ones((), q.dtype)
    line = lambda s: phi(t + s, q + s * qd)
    first = lambda s: jax.jvp(line, (s,), (one,))  # (phi, phi_dot) along the motion
    (phi0, phid0), (_, phidd) = jax.jvp(first, (jnp.zeros((), q.dtype),), (one,))
    b = -phidd
    if _is_baumgarte(stabilization):
        alpha = jnp.asarray(stabilization.alpha, q.dtype)
        beta = jnp.asarray(stabilization.beta, q.dtype)
        b = b - 2.0 * alpha * phid0 - beta**2 * phi0
    return A, b


def nonholonomic_rows(system: System, t, q, qd, stabilization=None):
    r"""(A, b) rows of the nonholonomic constraints, or None.

    With a :class:`~ukjax.Baumgarte` stabilization, b gains $-\alpha\psi$."""
    if system.nonholonomic(t, q, qd) is None:
        return None
    psi = lambda t_, q_, qd_: _as_rows(
        system.nonholonomic(t_, q_, qd_), "nonholonomic", system, q.dtype
    )
    A = jax.jacfwd(psi, argnums=2)(t, q, qd)
    one = jnp.ones((), q.dtype)
    psi0, psi_dot = jax.jvp(lambda t_, q_: psi(t_, q_, qd), (t, q), (one, qd))
    b = -psi_dot
    if _is_baumgarte(stabilization):
        b = b - jnp.asarray(stabilization.alpha, q.dtype) * psi0
    return A, b


def _is_baumgarte(stabilization) -> bool:
    from ._stabilization import Baumgarte

    if stabilization is None:
        return False
    if isinstance(stabilization, Baumgarte):
        return True
    from ._stabilization import Projection

    if isinstance(stabilization, Projection):
        return False
    raise TypeError(
        "stabilization must be None, ukjax.Baumgarte(alpha, beta) or ukjax.Projection(); got "
        f"{type(stabilization).__name__}."
    )


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
    b = _as_rows(b, "acceleration_constraint (b)", system, q.dtype)
    if A.ndim == 1:
        A = A[None, :]
    if A.shape != (b.shape[0], q.shape[0]):
        raise ValueError(
            f"{type(system).__name__}.acceleration_constraint returned A of shape {A.shape} "
            f"and b of shape {b.shape}; expected A (m, {q.shape[0]}) and b (m,)."
        )
    return A, b


def constraint_matrices(system: System, t, q, qd, *, stabilization=None):
    r"""The stacked constraint rows $(A, b)$ of $A\ddot q = b$ at one state.

    Rows come in the order: holonomic (differentiated twice), nonholonomic
    (differentiated once), then raw `acceleration_constraint` rows. With
    `stabilization=ukjax.Baumgarte(alpha, beta)` the holonomic and nonholonomic rows of `b`
    carry the Baumgarte feedback terms (raw rows are left as given).

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
    q, qd = check_state(q, qd)
    t = as_time(t, q.dtype)
    blocks = [
        rows
        for rows in (
            holonomic_rows(system, t, q, qd, stabilization),
            nonholonomic_rows(system, t, q, qd, stabilization),
            raw_rows(system, t, q, qd),
        )
        if rows is not None
    ]
    if not blocks:
        return jnp.zeros((0, q.shape[0]), q.dtype), jnp.zeros((0,), q.dtype)
    A = jnp.concatenate([blk[0] for blk in blocks], axis=0)
    b = jnp.concatenate([blk[1] for blk in blocks], axis=0)
    return A, b
