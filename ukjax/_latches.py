r"""Constraints that switch at events: latches (grasps, latches, a foot that stays planted).

A system declares, once, holonomic constraints that hold only while their *latch* is
engaged (:meth:`ukjax.System.latches`, $L$ latches of $r$ rows each, $\varphi_j(q, t) \in
\mathbb{R}^r$) and when each latch engages and releases
(:meth:`ukjax.System.latch_conditions`: two (L,) values; a latch engages when its
`engage` value crosses zero downwards while its `release` value is positive, and an
engaged latch releases when its `release` value crosses zero downwards). The
event-driven driver (:mod:`ukjax._hybrid`) treats the switches as events:

- **engage**: the velocity jumps to the UK impulsive projection (Bajodah 2003, eqs
  424-427) onto every bilateral constraint, the engaged contacts (their normal speeds
  kept), the stuck frictional contacts and the engaged latches with $\dot\varphi_j^+ = 0$:
  a perfectly inelastic grasp, momentum exchanged as the constraint needs and kinetic
  energy lost (Kelvin's theorem for an impulsive constraint);
- while engaged, the rows $\nabla\varphi_j\,\ddot q = -(\ddot\varphi_j)_{\ddot q = 0}$
  join the UK equation, so $\varphi_j$ keeps the value it had at the grasp (a grasp at an
  offset holds that offset);
- **release**: the rows leave; the velocity is continuous.

A pick-and-place is then one :func:`ukjax.simulate` call. `Solution.latched` holds the
latches' states at the saves, `Solution.events` the switches (kinds `"latch"`,
`"unlatch"`).

Example:
    >>> import jax, jax.numpy as jnp, ukjax
    >>> jax.config.update("jax_enable_x64", True)
    >>> class Catch(ukjax.System):  # a gripper (x1) catches a block (x2) at x2 - x1 = 0.1
    ...     def kinetic_energy(self, t, q, qd):
    ...         return 0.5 * qd @ qd
    ...     def latches(self, t, q):
    ...         return jnp.array([q[1] - q[0]])
    ...     def latch_conditions(self, t, q, qd):
    ...         return jnp.array([q[1] - q[0] - 0.1]), jnp.array([2.0 - t])
    >>> sol = ukjax.simulate(Catch(), jnp.array([0.0, 1.0]), jnp.array([1.0, 0.0]),
    ...                      jnp.linspace(0.0, 3.0, 4))
    >>> [ukjax.EVENT_KINDS[int(k)] for k in sol.events.kind[:2]], sol.qd[-1].tolist()
    (['latch', 'unlatch'], [0.5, 0.5])
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from ._residuals import second_along_motion
from ._system import System, overrides


class LatchState(eqx.Module):
    """The latches' rows at one state: values `phi` (L, r), rates `phid`, Jacobians `J`
    (L, r, n) and the acceleration-free part `phidd0` (L, r) of their second derivatives."""

    phi: jax.Array
    phid: jax.Array
    J: jax.Array
    phidd0: jax.Array


def _rows(system: System, t, q) -> jax.Array:
    out = jnp.asarray(system.latches(t, q), q.dtype)
    return out[:, None] if out.ndim == 1 else out


def num_latches(system: System, t, q) -> int:
    """L, the number of latches `system` declares (0 if none), checking the hooks' shapes:
    a ValueError at trace time says what to fix."""
    if not overrides(system, "latches"):
        return 0
    name = type(system).__name__
    out = jax.eval_shape(lambda t, q: system.latches(t, q), t, q)
    if out is None:
        return 0
    if len(out.shape) not in (1, 2):
        raise ValueError(
            f"{name}.latches must return (L, r) constraint rows (or (L,) for one row per "
            f"latch); got shape {out.shape}."
        )
    L = out.shape[0]
    qd = jax.ShapeDtypeStruct(q.shape, q.dtype)
    conditions = (
        jax.eval_shape(lambda t, q, v: system.latch_conditions(t, q, v), t, q, qd)
        if overrides(system, "latch_conditions")
        else None
    )
    if conditions is None or len(conditions) != 2:
        raise ValueError(
            f"{name} declares latches but no latch_conditions: define "
            "latch_conditions(self, t, q, qd) returning (engage, release), two arrays of "
            f"shape ({L},) whose downward zero crossings engage and release each latch."
        )
    for label, value in zip(("engage", "release"), conditions):
        if tuple(value.shape) not in ((L,), ()):
            raise ValueError(
                f"{name}.latch_conditions: {label} must have shape ({L},) (one value per "
                f"latch); got {tuple(value.shape)}."
            )
    return L


def latch_state(system: System, t, q, qd) -> LatchState:
    r"""$\varphi$, $\dot\varphi$, $\nabla\varphi$ and $\ddot\varphi|_{\ddot q = 0}$ of every
    latch's rows (:func:`ukjax._residuals.second_along_motion`)."""
    f = lambda t_, q_: _rows(system, t_, q_)
    phi, phid, phidd0 = second_along_motion(f, t, q, qd)
    J = jax.jacfwd(lambda x: f(t, x))(q)
    return LatchState(phi, phid, J, phidd0)


def acceleration_rows(ls: LatchState, latched) -> tuple[jax.Array, jax.Array]:
    r"""(A, b) of the engaged latches, $\nabla\varphi_j\ddot q = -(\ddot\varphi_j)_{\ddot
    q = 0}$ (zero rows for the others), flattened to (L r, n), (L r,)."""
    L, r, n = ls.J.shape
    on = jnp.repeat(latched, r)
    A = jnp.where(on[:, None], ls.J.reshape(L * r, n), 0.0)
    return A, jnp.where(on, -ls.phidd0.reshape(L * r), 0.0)


def velocity_rows(ls: LatchState, latched, qd) -> tuple[jax.Array, jax.Array]:
    r"""(R, c): the engaged latches' rows at the velocity level, $\nabla\varphi_j\dot q^+
    = -\partial_t\varphi_j$ ($\dot\varphi_j^+ = 0$), flattened; zero rows for the others."""
    L, r, n = ls.J.shape
    on = jnp.repeat(latched, r)
    J = ls.J.reshape(L * r, n)
    explicit = ls.phid.reshape(L * r) - J @ qd  # d phi / dt at fixed q
    return jnp.where(on[:, None], J, 0.0), jnp.where(on, -explicit, 0.0)


def _conditions(system: System, t, q, qd, L: int) -> tuple[jax.Array, jax.Array]:
    out = system.latch_conditions(t, q, qd)
    assert out is not None  # checked by num_latches
    engage, release = out
    engage = jnp.broadcast_to(jnp.asarray(engage, q.dtype), (L,))
    return engage, jnp.broadcast_to(jnp.asarray(release, q.dtype), (L,))


def event_values(system: System, t, q, qd, latched) -> jax.Array:
    r"""Per latch: its `release` value while engaged; otherwise its `engage` value, armed
    only while the `release` value is positive ($\max(e, -r)$: a latch never engages
    where it would release at once, e.g. a gripper that has let go passing its block)."""
    engage, release = _conditions(system, t, q, qd, latched.shape[0])
    return jnp.where(latched, release, jnp.maximum(engage, -release))


def initially_latched(system: System, t, q, qd, L: int) -> jax.Array:
    """The latches engaged at the start: those whose `engage` value is <= 0 (and whose
    `release` value is not)."""
    engage, release = _conditions(system, t, q, qd, L)
    return (engage <= 0) & (release > 0)
