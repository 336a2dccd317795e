r"""The one evaluator of the constraint functions $\varphi$, $\dot\varphi$ and $\psi$.

Everything that needs constraint values (the constraint matrices, the initial-condition
check and projection, the diagnostics) goes through these functions, so a system's
`holonomic` and `nonholonomic` are validated and differentiated in one place.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import ArrayLike, Float

from ._precision import full_precision
from ._rewrite import rewritten
from ._system import System, as_time, check_state
from ._xla import eager_jit


def check_precision(value, name: str, system: System, dtype) -> jax.Array:
    """`value` (a system hook's output) as an array, or a ValueError when it is a floating
    type narrower than the state's (float32 under x64): its rounding would sit far above
    the integration tolerance, and the run would end in rejected steps, not in an error
    that names the hook."""
    value = jnp.asarray(value)
    if (
        jnp.issubdtype(value.dtype, jnp.floating)
        and jnp.issubdtype(dtype, jnp.floating)
        and jnp.finfo(value.dtype).bits < jnp.finfo(dtype).bits
    ):
        raise ValueError(
            f"{type(system).__name__}.{name} returned {value.dtype} values while the state "
            f"is {jnp.dtype(dtype).name}: compute it in the state's dtype (drop the "
            f"dtype={value.dtype} or .astype({value.dtype}) in it, or build arrays with "
            "dtype=q.dtype), or run the whole simulation in that precision."
        )
    return value


def as_rows(value, name: str, system: System, dtype) -> jax.Array:
    """A system's constraint output as a 1-D array of the state's dtype, or a ValueError."""
    value = check_precision(value, name, system, dtype)
    if value.ndim == 0:
        value = value[None]
    if value.ndim != 1:
        raise ValueError(
            f"{type(system).__name__}.{name} must return a 1-D array (one entry per "
            f"constraint) or a scalar (one constraint); got shape {value.shape}."
        )
    if not jnp.issubdtype(value.dtype, jnp.inexact):
        raise ValueError(
            f"{type(system).__name__}.{name} returned an array of dtype {value.dtype}; "
            "constraint functions must return floating-point values computed from q (and "
            "qd, t) with jax.numpy. An integer or boolean result has zero derivative, so the "
            "constraint would silently vanish: remove the integer cast."
        )
    return value.astype(dtype)


def has_holonomic(system: System, t, q) -> bool:
    return system.holonomic(t, q) is not None


def has_nonholonomic(system: System, t, q, qd) -> bool:
    return system.nonholonomic(t, q, qd) is not None


def phi(system: System, t, q) -> jax.Array:
    r"""$\varphi(q, t)$ of the holonomic constraints (the system must define them)."""
    return as_rows(rewritten(system.holonomic)(t, q), "holonomic", system, q.dtype)


def psi(system: System, t, q, qd) -> jax.Array:
    r"""$\psi(q, \dot q, t)$ of the nonholonomic constraints (the system must define them)."""
    value = rewritten(system.nonholonomic)(t, q, qd)
    return as_rows(value, "nonholonomic", system, q.dtype)


def _along_motion(f, t, q, qd):
    """s -> (f, d f/ds) along the straight line (t + s, q + s qd), for f(t, q)."""
    one = jnp.ones((), q.dtype)
    line = lambda s: f(t + s, q + s * qd)
    return lambda s: jax.jvp(line, (s,), (one,))


def second_along_motion(f, t, q, qd) -> tuple[jax.Array, jax.Array, jax.Array]:
    r"""$(f, \dot f, \ddot f|_{\ddot q = 0})$ of a position-level function $f(t, q)$, by
    nested `jvp` along $s \mapsto (t + s, q + s\dot q)$: the last is $f_{tt} + 2f_{qt}\dot q
    + \dot q^Tf_{qq}\dot q$, the part of $\ddot f$ that does not depend on $\ddot q$."""
    one, s0 = jnp.ones((), q.dtype), jnp.zeros((), q.dtype)
    (f0, fd0), (_, fdd) = jax.jvp(_along_motion(f, t, q, qd), (s0,), (one,))
    return f0, fd0, fdd


def phi_rate(system: System, t, q, qd) -> tuple[jax.Array, jax.Array]:
    r"""$(\varphi, \dot\varphi)$ with $\dot\varphi = \varphi_q\dot q + \varphi_t$."""
    f = lambda t_, q_: phi(system, t_, q_)
    return _along_motion(f, t, q, qd)(jnp.zeros((), q.dtype))


def phi_second(system: System, t, q, qd) -> tuple[jax.Array, jax.Array, jax.Array]:
    r"""$(\varphi, \dot\varphi, \ddot\varphi|_{\ddot q = 0})$ (:func:`second_along_motion`)."""
    return second_along_motion(lambda t_, q_: phi(system, t_, q_), t, q, qd)


def velocity_level(system: System, t, q, qd) -> jax.Array:
    r"""All velocity-level constraint values $[\dot\varphi;\ \psi]$ (empty if none)."""
    parts = []
    if has_holonomic(system, t, q):
        parts.append(phi_rate(system, t, q, qd)[1])
    if has_nonholonomic(system, t, q, qd):
        parts.append(psi(system, t, q, qd))
    return jnp.concatenate(parts) if parts else jnp.zeros((0,), q.dtype)


def default_ic_tol(dtype) -> float:
    """Absolute tolerance on constraint residuals of an initial or projected state: 1e-8
    (float64), 1e-4 (float32)."""
    return 1e-8 if jnp.finfo(dtype).bits >= 64 else 1e-4


def max_abs(*arrays) -> jax.Array:
    """Largest absolute entry over all the arrays (0 if they are all empty)."""
    return jnp.max(jnp.stack([jnp.max(jnp.abs(x), initial=0.0) for x in arrays]))


class ConstraintResiduals(NamedTuple):
    r"""Residuals of the position- and velocity-level constraints at one state.

    - `position`: $\varphi(q,t)$ of the holonomic constraints, shape (h,).
    - `velocity`: $\dot\varphi = \varphi_q\dot q + \varphi_t$, shape (h,).
    - `nonholonomic`: $\psi(q,\dot q,t)$, shape (k,).
    """

    position: jax.Array
    velocity: jax.Array
    nonholonomic: jax.Array

    def max_abs(self) -> jax.Array:
        """Largest absolute residual over all three levels (0 if there are none)."""
        return max_abs(*self)


def residuals(system: System, t, q, qd) -> ConstraintResiduals:
    """:class:`ConstraintResiduals` for already validated `t`, `q`, `qd`."""
    empty = jnp.zeros((0,), q.dtype)
    pos, vel = phi_rate(system, t, q, qd) if has_holonomic(system, t, q) else (empty, empty)
    nh = psi(system, t, q, qd) if has_nonholonomic(system, t, q, qd) else empty
    return ConstraintResiduals(pos, vel, nh)


@full_precision
@eager_jit
def constraint_residuals(
    system: System, t: ArrayLike, q: Float[ArrayLike, " n"], qd: Float[ArrayLike, " n"]
) -> ConstraintResiduals:
    r"""Position, velocity and nonholonomic constraint residuals at one state.

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import CartesianPendulum
        >>> r = ukjax.constraint_residuals(CartesianPendulum(length=1.0), 0.0,
        ...                                jnp.array([1.0, 0.1]), jnp.array([0.0, 1.0]))
        >>> round(float(r.position[0]), 6), round(float(r.velocity[0]), 6)
        (0.01, 0.2)
    """
    q_, qd_ = check_state(q, qd, system)
    return residuals(system, as_time(t, q_.dtype), q_, qd_)
