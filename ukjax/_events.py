r"""The event record of a hybrid run: what happened, when, and at which contact."""

from __future__ import annotations

import enum
from typing import Any, NamedTuple, Protocol

import equinox as eqx
import jax
import jax.numpy as jnp


class EventKind(enum.IntEnum):
    """The kinds of event a hybrid run records (:attr:`EventLog.kind` holds these values).

    - `NONE`: an unused entry of the log.
    - `IMPACT`: a velocity jump at a contact (:class:`ukjax.Impact`).
    - `ENGAGE`, `RELEASE`: a contact's mode changes without a jump (also a rigid contact
      that touches down slower than :class:`ukjax.Impact`'s `persist_below`).
    - `IMPULSE`: a prescribed impulse (:class:`ukjax.Impulses`).
    - `STICK`, `SLIP`: a frictional contact sticks, or starts to slide or reverses
      (:class:`ukjax.Coulomb`).
    - `LATCH`, `UNLATCH`: a latch engages (an inelastic grasp) or releases
      (:meth:`ukjax.System.latches`).

    Example:
        >>> import ukjax
        >>> int(ukjax.EventKind.IMPACT), ukjax.EVENT_KINDS[ukjax.EventKind.IMPACT]
        (1, 'impact')
    """

    NONE = 0
    IMPACT = 1
    ENGAGE = 2
    RELEASE = 3
    IMPULSE = 4
    STICK = 5
    SLIP = 6
    LATCH = 7
    UNLATCH = 8


EVENT_KINDS = tuple(kind.name.lower() for kind in EventKind)
"""Names of the event kinds recorded in :class:`EventLog` (`kind` indexes this tuple)."""


def entry_at(mask: jax.Array, x: jax.Array) -> jax.Array:
    """The entry of `x` where the one-hot `mask` is true (0 if none): the triggering
    contact's value, recorded in the :class:`EventLog`."""
    return jnp.sum(jnp.where(mask, x, 0.0))


class EventLog(eqx.Module):
    r"""The events of a hybrid run, in time order, in fixed-size arrays.

    - `count`: number of events recorded (entries from `count` on are unused: time NaN,
      kind `NONE`).
    - `time`: (E,) event times.
    - `kind`: (E,) a :class:`ukjax.EventKind` value (an index into
      :data:`ukjax.EVENT_KINDS`): `IMPACT` (velocity jump at a contact), `ENGAGE` /
      `RELEASE` (a contact's mode changes without a jump), `IMPULSE` (a prescribed
      impulse), `STICK` / `SLIP` (a frictional contact sticks, or starts to slide or
      reverses; :class:`ukjax.Coulomb`), `LATCH` / `UNLATCH` (a latch engages or
      releases).
    - `contact`: (E,) the contact that triggered it (-1 for a prescribed impulse; the
      latch's index for `LATCH` / `UNLATCH`).
    - `speed_before`, `speed_after`: (E,) $\dot g$ of that contact just before and after
      (for `STICK` / `SLIP`: its tangential velocity $T_i\dot q$, in 3-D its norm; for
      `LATCH` / `UNLATCH`: $|\dot\varphi_j|$ of the latch's rows).
    - `normal_impulse`, `tangential_impulse`: (E,) the impulses that contact took at an
      `IMPACT` (N·s, normal > 0 pushing; tangential: the friction impulse along its tangent
      row, in 3-D its magnitude), 0 for the other kinds, NaN for an unused entry.

    E is `max_events` of :func:`ukjax.simulate`; under `vmap` every field gains a batch axis.
    """

    time: jax.Array
    kind: jax.Array
    contact: jax.Array
    speed_before: jax.Array
    speed_after: jax.Array
    count: jax.Array
    normal_impulse: jax.Array
    tangential_impulse: jax.Array

    @classmethod
    def empty(cls, size: int, dtype) -> EventLog:
        nan = jnp.full((size,), jnp.nan, dtype)
        ints = jnp.zeros((size,), jnp.int32)
        kinds = jnp.full((size,), EventKind.NONE, jnp.int32)
        return cls(nan, kinds, ints - 1, nan, nan, jnp.zeros((), jnp.int32), nan, nan)

    def record(
        self,
        time,
        kind,
        contact,
        before,
        after,
        normal: Any = 0.0,
        tangential: Any = 0.0,
        when: Any = True,
    ) -> EventLog:
        """The log with one more entry where `when` holds (dropped when the log is full).

        An entry not made is a write past the end (`mode="drop"`), not a select between
        the old and the new arrays: under `vmap` one scatter per field, not a scatter and a
        select over the whole log."""
        size = self.time.shape[0]
        i = jnp.where(when, self.count, size)
        put = lambda arr, v: arr.at[i].set(jnp.asarray(v, arr.dtype), mode="drop")
        return EventLog(
            put(self.time, time),
            put(self.kind, kind),
            put(self.contact, contact),
            put(self.speed_before, before),
            put(self.speed_after, after),
            jnp.minimum(self.count + jnp.asarray(when, jnp.int32), size),
            put(self.normal_impulse, normal),
            put(self.tangential_impulse, tangential),
        )


class Switched(NamedTuple):
    """What a contact law's :meth:`~ukjax.AbstractContact.switch` returns."""

    engaged: jax.Array  # (k,) the contacts engaged after the event
    qd: jax.Array  # (n,) the velocity after it
    kind: jax.Array  # () its EventKind (NONE: no event, not recorded)
    solved: jax.Array  # () whether the event could be resolved
    normal_impulse: jax.Array  # (k,) each contact's normal impulse (0 without a jump)
    tangential_impulse: jax.Array  # (k,) each contact's friction impulse


class EventMotion(Protocol):
    """The run at an event as a contact or friction law sees it when it switches modes
    (:meth:`ukjax.AbstractContact.switch`, :meth:`ukjax.AbstractFriction.switch`): the
    velocity `qd` just before the event, and the projections and forces at the event's
    configuration that a law may ask for. The hybrid driver provides it."""

    @property
    def qd(self) -> jax.Array:
        """The velocity just before the event."""
        ...

    def jump(self, rows_on: jax.Array, gd_target: jax.Array) -> tuple:
        r"""(velocity after, normal impulses (k,), tangential impulses (k,)): the impulsive
        jump of `qd`, every bilateral velocity constraint kept, the contacts in `rows_on`
        given the normal speeds `gd_target` ($\dot g_i^+$), with the friction law's
        impulses (sticking or sliding impacts) where the system declares friction."""
        ...

    def impact(self, candidates: jax.Array, gd_target: jax.Array) -> Any:
        r"""The :class:`ukjax._complementarity.Complementarity` of an impact: the normal
        impulses $P \ge 0$ on the `candidates` (`z`) with post-impact normal speeds
        $\dot g^+ \ge$ `gd_target` (`w` = $\dot g^+ -$ `gd_target`), complementary; the
        rows that take one are its `active` set (then :meth:`jump`)."""
        ...

    def dissipative(
        self,
        candidates: jax.Array,
        gd_target: jax.Array,
        qd: jax.Array,
        resting: jax.Array,
        needed: jax.Array,
        impulsive: jax.Array,
    ) -> Any:
        r"""Where `needed` (a () bool), the problem of maximal dissipation
        (:class:`ukjax._dissipative_impact.DissipativeImpact`): where `impulsive`, the
        impact of the `candidates` with normal speeds after $\ge$ `gd_target` (velocity
        after, impulses, speeds less the targets, solved) - the fallback where
        :meth:`impact` finds no solution; otherwise the contact forces (`normal`) on the
        `resting` contacts at velocity `qd` - the fallback where :meth:`supporting` finds
        none. None where the system declares no friction."""
        ...

    def supporting(
        self, qd: jax.Array, candidates: jax.Array, sliding: jax.Array
    ) -> tuple[jax.Array, jax.Array]:
        """(the `candidates` engaged, whether the problem was solved): the complementarity
        problem of the contact forces (>= 0) and the normal accelerations less the law's
        targets (>= 0) at velocity `qd`, the engaged contacts in the friction modes
        `sliding`."""
        ...

    def slip_modes(self, qd: jax.Array, fresh: jax.Array, sliding: jax.Array) -> jax.Array:
        """`sliding` with the friction modes of the `fresh` contacts (just engaging) set
        from their slip at velocity `qd` by the friction law (stuck if slow, else sliding
        along the slip); `sliding` unchanged where the system declares no friction."""
        ...

    def normal_speed(self, qd: jax.Array) -> jax.Array:
        r"""$\dot g$ of every contact at velocity `qd` (the event's configuration)."""
        ...

    def forces(self, qd: jax.Array, engaged: jax.Array, sliding: jax.Array) -> tuple:
        """(friction state, normal forces, tangential forces) at velocity `qd` in the
        mode (`engaged`, `sliding`)."""
        ...

    def slip_acceleration(self, qd: jax.Array, engaged: jax.Array, sliding: jax.Array) -> tuple:
        r"""((k, d) the contacts' tangential accelerations $T\ddot q + \dot T\dot q$ at
        velocity `qd` in the mode (`engaged`, `sliding`), (k,) the size of the terms each
        sums: its round-off scale)."""
        ...

    def hold(self, qd: jax.Array, engaged: jax.Array, stuck: jax.Array) -> jax.Array:
        """`qd` with the `stuck` contacts' tangential velocity set to zero, the engaged
        contacts' normal velocity and every bilateral constraint kept."""
        ...

    def friction_state(self, qd: jax.Array) -> Any:
        """The contacts' tangential quantities at velocity `qd`."""
        ...
