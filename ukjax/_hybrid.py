r"""Hybrid (event-driven) integration: unilateral contacts, impacts, impulses.

The motion is integrated in *segments* of smooth motion with a fixed contact mode. A
segment ends at the first downward zero crossing of a contact law's event value (located
by diffrax's root finder on the step's dense output, so events are taken in time order,
simultaneous ones together) or at a prescribed impulse. The mode change, the velocity jump
(:class:`ukjax.Impact`, :class:`ukjax.Impulses`) and the event record are then applied and
the next segment starts there. The loop is an `equinox.internal.while_loop` with a bound
(`max_events`): under `jax.vmap` every member keeps its own event times and modes, and it
is differentiable in reverse mode (the event times carry their implicit-function
derivative through the root find).
"""

from __future__ import annotations

import diffrax
import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import optimistix as optx

from ._constraints import rows
from ._contact import AbstractContact, Impact
from ._dynamics import (
    Evaluation,
    UKInputs,
    mass_and_force,
    nonideal_force,
    system_infeasibility,
)
from ._errors import code_error_if
from ._impulse import Impulses, impulse_jump, project_velocity, velocity_rows
from ._initial import AbstractInitialConditions
from ._linalg import pinv_solve
from ._residuals import as_rows, second_along_motion
from ._results import RESULTS, promote
from ._stabilization import AbstractStabilization, NoStabilization
from ._system import System, as_time, check_state
from ._uk import uk_terms
from ._uk_solvers import AbstractUKSolver, CholeskyWithFallback


EVENT_KINDS = ("none", "impact", "engage", "release", "impulse")
"""Names of the event kinds recorded in :class:`EventLog` (`kind` indexes this tuple)."""


class EventLog(eqx.Module):
    r"""The events of a hybrid run, in time order, in fixed-size arrays.

    - `count`: number of events recorded (entries from `count` on are unused: time NaN,
      kind 0).
    - `time`: (E,) event times.
    - `kind`: (E,) index into :data:`ukjax.EVENT_KINDS`: `"impact"` (velocity jump at a
      contact), `"engage"` / `"release"` (a contact's mode changes without a jump),
      `"impulse"` (a prescribed impulse).
    - `contact`: (E,) the contact that triggered it (-1 for a prescribed impulse).
    - `speed_before`, `speed_after`: (E,) $\dot g$ of that contact just before and after.

    E is `max_events` of :func:`ukjax.simulate`; under `vmap` every field gains a batch axis.
    """

    time: jax.Array
    kind: jax.Array
    contact: jax.Array
    speed_before: jax.Array
    speed_after: jax.Array
    count: jax.Array

    @classmethod
    def empty(cls, size: int, dtype) -> EventLog:
        nan = jnp.full((size,), jnp.nan, dtype)
        ints = jnp.zeros((size,), jnp.int32)
        return cls(nan, ints, ints - 1, nan, nan, jnp.zeros((), jnp.int32))

    def record(self, time, kind, contact, before, after) -> EventLog:
        i = self.count
        put = lambda arr, v: arr.at[i].set(jnp.asarray(v, arr.dtype), mode="drop")
        return EventLog(
            put(self.time, time),
            put(self.kind, kind),
            put(self.contact, contact),
            put(self.speed_before, before),
            put(self.speed_after, after),
            jnp.minimum(i + 1, self.time.shape[0]),
        )


class ContactState(eqx.Module):
    """The contact quantities at one state: values, rates, Jacobian, and the part of the
    second derivative that does not depend on the acceleration."""

    g: jax.Array
    gd: jax.Array
    G: jax.Array
    gdd0: jax.Array


def contact_state(system: System, t, q, qd) -> ContactState:
    if system.unilateral(t, q) is None:  # impulses only
        empty = jnp.zeros((0,), q.dtype)
        return ContactState(empty, empty, jnp.zeros((0, q.shape[0]), q.dtype), empty)
    f = lambda t_, q_: as_rows(system.unilateral(t_, q_), "unilateral", system, q.dtype)
    g, gd, gdd0 = second_along_motion(f, t, q, qd)
    G = jax.jacfwd(lambda x: f(t, x))(q)
    return ContactState(g, gd, G, gdd0)


class HybridField(eqx.Module):
    r"""$(q,\dot q) \mapsto (\dot q, \ddot q)$ with the engaged contacts' rows in the UK
    equation; `args` is the boolean mask of engaged contacts."""

    system: System
    contact: AbstractContact
    stabilization: AbstractStabilization
    uk_solver: AbstractUKSolver
    check: bool = eqx.field(static=True)
    consistency_tol: float | None = eqx.field(static=True)
    throw: bool = eqx.field(static=True)

    def evaluate(self, t, y, engaged) -> tuple[Evaluation, ContactState, int]:
        system, (q, qd) = self.system, y
        M, Q = mass_and_force(system, t, q, qd)
        A, b = rows(system, t, q, qd, self.stabilization)
        cs = contact_state(system, t, q, qd)
        target = self.contact.target_acceleration(cs.g, cs.gd)
        A_c = jnp.where(engaged[:, None], cs.G, 0.0)
        b_c = jnp.where(engaged, target - cs.gdd0, 0.0)
        m_bilateral = A.shape[0]
        A, b = jnp.concatenate([A, A_c]), jnp.concatenate([b, b_c])
        C = nonideal_force(system, t, q, qd)
        terms = uk_terms(M, Q, A, b, C, uk_solver=self.uk_solver)
        inputs = UKInputs(t, q, qd, M, Q, A, b, C)
        return Evaluation(inputs, terms, system_infeasibility(system, t, q, qd)), cs, m_bilateral

    def forces(self, ev: Evaluation, m_bilateral: int) -> jax.Array:
        """Contact multipliers (> 0 pushing): least-squares $A^T\\lambda = Q_c$."""
        lam = pinv_solve(ev.inputs.A.T, ev.terms.Qc_ideal[:, None])[:, 0]
        return lam[m_bilateral:]

    def event_values(self, t, y, engaged) -> jax.Array:
        ev, cs, m = self.evaluate(t, y, engaged)
        force = self.forces(ev, m) if self.contact.uses_force else None
        return self.contact.event_value(engaged, cs.g, cs.gd, force)

    def __call__(self, t, y, args):
        ev, _, _ = self.evaluate(t, y, args)
        raising = self.check and self.throw
        return y[1], ev.checked_qdd(self.consistency_tol) if raising else ev.terms.qdd

    def failed(self, t, y, engaged):
        ev, _, _ = self.evaluate(t, y, engaged)
        return ev.failures(self.consistency_tol)


class _Carry(eqx.Module):
    t: jax.Array
    q: jax.Array
    qd: jax.Array
    engaged: jax.Array
    next_impulse: jax.Array
    saved_q: jax.Array
    saved_qd: jax.Array
    saved_engaged: jax.Array
    log: EventLog
    result: RESULTS
    done: jax.Array
    steps: jax.Array


class _TimeBisection(optx.Bisection):
    """Bisection in time that stops on the bracket width alone: event values such as
    contact forces can change fast, so |value| < atol at the root is not a usable test."""

    def terminate(self, fn, y, args, options, state, tags):
        width = jnp.abs(state.lower - state.upper)
        return width < self.atol + self.rtol * jnp.abs(y), optx.RESULTS.successful


def _offset(values):
    """Per contact: a shift making the segment's initial event value strictly positive
    (the smallest normal number), so that a value that starts at or just below zero after
    an event (root-finding round-off) does not mask another contact's crossing in the first
    step. It is not compounded: the next event of that contact is at the same level."""
    info = jnp.finfo(values.dtype)
    return jnp.maximum(-values, 0.0) * (1.0 + 4.0 * info.eps) + info.tiny


class HybridIntegration(eqx.Module):
    """The segment loop (module docstring)."""

    field: HybridField
    initial: AbstractInitialConditions
    solver: diffrax.AbstractSolver
    stepsize_controller: diffrax.AbstractStepSizeController
    adjoint: diffrax.AbstractAdjoint
    impulses: Impulses | None
    dt0: float | None
    max_steps: int | None = eqx.field(static=True)
    max_events: int = eqx.field(static=True)
    num_contacts: int = eqx.field(static=True)

    @property
    def throw(self) -> bool:
        return self.field.throw

    # ---- events -------------------------------------------------------------------------
    def _event(self, engaged, offset):
        contact_fn = lambda t, y, args, **kw: jnp.min(
            self.field.event_values(t, y, engaged) + offset, initial=1.0
        )
        # Bisection: robust for the kinks of min() and of release laws (Newton is not);
        # the event time still gets its implicit-function derivative.
        tol = 100 * jnp.finfo(offset.dtype).eps
        return diffrax.Event(
            contact_fn, root_finder=_TimeBisection(rtol=tol, atol=tol, flip=True), direction=False
        )

    def _impulse_time(self, k, dtype):
        if self.impulses is None:
            return jnp.asarray(jnp.inf, dtype)
        times = self.impulses.times.astype(dtype)
        return jnp.where(k < times.shape[0], times[jnp.minimum(k, times.shape[0] - 1)], jnp.inf)

    # ---- one segment ----------------------------------------------------------------------
    def _segment(self, c: _Carry, ts) -> _Carry:
        t_final = ts[-1]
        t_imp = self._impulse_time(c.next_impulse, c.q.dtype)
        t_end = jnp.where(c.done, c.t, jnp.minimum(t_final, t_imp))
        values0 = self.field.event_values(c.t, (c.q, c.qd), c.engaged)
        offset = _offset(values0)
        stab, system = self.field.stabilization, self.field.system
        fn = stab.save_fn(system)
        clipped = jnp.clip(ts, c.t, t_end)
        saves = (
            diffrax.SubSaveAt(ts=clipped) if fn is None else diffrax.SubSaveAt(ts=clipped, fn=fn)
        )
        saveat = diffrax.SaveAt(subs=[saves, diffrax.SubSaveAt(t1=True)])
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(self.field),
            stab.wrap_solver(self.solver, system),
            t0=c.t,
            t1=t_end,
            dt0=self.dt0,
            y0=(c.q, c.qd),
            args=c.engaged,
            saveat=saveat,
            stepsize_controller=self.stepsize_controller,
            adjoint=self.adjoint,
            event=self._event(c.engaged, offset) if self.num_contacts else None,
            max_steps=self.max_steps,
            throw=False,
        )
        seg_ts, (seg_q, seg_qd) = sol.ts[0], sol.ys[0]  # pyright: ignore
        t_stop = sol.ts[1][-1]  # pyright: ignore
        q1, qd1 = (x[-1] for x in sol.ys[1])  # pyright: ignore
        result = self._segment_result(sol, t_stop, (q1, qd1), c.engaged)
        # A failed segment's saves are not trusted (they stay NaN); earlier ones are kept.
        keep = (ts >= c.t) & (ts <= t_stop) & jnp.isfinite(seg_ts) & ~c.done
        keep = keep & (result == RESULTS.successful)
        saved_q = jnp.where(keep[:, None], seg_q, c.saved_q)
        saved_qd = jnp.where(keep[:, None], seg_qd, c.saved_qd)
        saved_engaged = jnp.where(keep[:, None], c.engaged[None, :], c.saved_engaged)
        contact_hit = self._contact_hit(sol)
        nxt = _Carry(
            t_stop,
            q1,
            qd1,
            c.engaged,
            c.next_impulse,
            saved_q,
            saved_qd,
            saved_engaged,
            c.log,
            RESULTS.where(c.done, c.result, result),
            c.done,
            c.steps + sol.stats["num_steps"],
        )
        failed = result != RESULTS.successful
        if self.num_contacts:
            nxt = jax.lax.cond(
                eqxi.unvmap_any(contact_hit & ~failed & ~c.done),
                lambda x: self._switch(x, offset, contact_hit & ~failed & ~c.done),
                lambda x: x,
                nxt,
            )
        impulse_now = ~contact_hit & ~failed & ~c.done & (t_stop >= t_imp)
        nxt = self._apply_impulse(nxt, impulse_now)
        finished = c.done | failed | (~contact_hit & ~impulse_now & (t_stop >= t_final))
        # One more event than the log holds: stop there (the saves so far are kept).
        full = (contact_hit | impulse_now) & ~c.done & ~failed & (c.log.count >= self.max_events)
        result = RESULTS.where(full, RESULTS.max_events_reached, nxt.result)
        return eqx.tree_at(lambda x: (x.result, x.done), nxt, (result, finished | full))

    def _contact_hit(self, sol) -> jax.Array:
        return jnp.asarray(False) if sol.event_mask is None else sol.event_mask

    def _segment_result(self, sol, t_stop, y_stop, engaged) -> RESULTS:
        """The segment's code. With throw=False the UK checks run on the segment's end
        state (with throw=True they raise inside the solve)."""
        result = promote(sol.result)
        result = RESULTS.where(result == RESULTS.event_occurred, RESULTS.successful, result)
        if self.field.check and not self.throw:
            code = self.field.failed(t_stop, y_stop, engaged).code()
            result = RESULTS.where(result == RESULTS.successful, code, result)
        return result

    # ---- mode changes and jumps --------------------------------------------------------
    def _switch(self, c: _Carry, offset, hit) -> _Carry:
        """The contact event at (c.t, c.q, c.qd): new modes, velocity jump, record."""
        field, law = self.field, self.field.contact
        values = field.event_values(c.t, (c.q, c.qd), c.engaged) + offset
        first = jnp.argmin(values)
        cs = contact_state(field.system, c.t, c.q, c.qd)
        trig = jnp.arange(values.shape[0]) == first
        if isinstance(law, Impact):
            near = ~c.engaged & (cs.g <= law.gap_tol(cs.g.dtype)) & (cs.gd < 0)
            impacting = (trig & ~c.engaged & (cs.gd < 0)) | (near & jnp.any(trig & ~c.engaged))
            released = trig & c.engaged
            gd_plus = law.rebound(cs.gd)
            persistent = impacting & law.persists(gd_plus)
            engaged = (c.engaged & ~released) | persistent
            gd_target = jnp.where(impacting & ~persistent, gd_plus, 0.0)
            qd = self._jump(c, cs, impacting | engaged, gd_target)
            engaged = self._drop_pulling(c.t, c.q, qd, engaged)
            kind = jnp.where(jnp.any(impacting), 1, 3)
        else:
            engaged = jnp.where(trig, ~c.engaged, c.engaged)
            qd = c.qd
            kind = jnp.where(engaged[first], 2, 3)
        after = contact_state(field.system, c.t, c.q, qd).gd[first]
        engaged = jnp.where(hit, engaged, c.engaged)
        qd = jnp.where(hit, qd, c.qd)
        log = c.log.record(c.t, kind, first, cs.gd[first], after)
        log = jax.tree_util.tree_map(lambda a, b: jnp.where(hit, a, b), log, c.log)
        return eqx.tree_at(lambda x: (x.qd, x.engaged, x.log), c, (qd, engaged, log))

    def _jump(self, c: _Carry, cs: ContactState, rows_on, gd_target):
        r"""UK impulsive projection with the bilateral rows and the contact rows in `rows_on`
        ($\nabla g_i\dot q^+ = \nabla g_i\dot q^- + \dot g_i^+ - \dot g_i^-$)."""
        system = self.field.system
        M, _ = mass_and_force(system, c.t, c.q, c.qd)
        J, r = velocity_rows(system, c.t, c.q, c.qd)
        G = jnp.where(rows_on[:, None], cs.G, 0.0)
        c_contact = jnp.where(rows_on, cs.G @ c.qd + gd_target - cs.gd, 0.0)
        A = jnp.concatenate([J, G])
        target = jnp.concatenate([J @ c.qd - r, c_contact])
        return project_velocity(M, c.qd, A, target)

    def _drop_pulling(self, t, q, qd, engaged):
        """Engaged contacts whose force would pull at the new state are released."""
        ev, _, m = self.field.evaluate(t, (q, qd), engaged)
        return engaged & (self.field.forces(ev, m) > 0)

    def _apply_impulse(self, c: _Carry, now) -> _Carry:
        if self.impulses is None:
            return c
        k = jnp.minimum(c.next_impulse, self.impulses.times.shape[0] - 1)
        value = self.impulses.values[k].astype(c.q.dtype)
        qd = impulse_jump(self.field.system, c.t, c.q, c.qd, value)
        qd = jnp.where(now, qd, c.qd)
        log = c.log.record(c.t, 4, -1, jnp.nan, jnp.nan)
        log = jax.tree_util.tree_map(lambda a, b: jnp.where(now, a, b), log, c.log)
        nxt = c.next_impulse + now.astype(c.next_impulse.dtype)
        return eqx.tree_at(lambda x: (x.qd, x.log, x.next_impulse), c, (qd, log, nxt))

    # ---- the run ------------------------------------------------------------------------------
    def initial_mode(self, t, q, qd):
        law, cs = self.field.contact, contact_state(self.field.system, t, q, qd)
        engaged = law.initial_mode(cs.g, cs.gd)
        if law.impulsive:  # a resting rigid contact is engaged only if it pushes
            engaged = self._drop_pulling(t, q, qd, engaged)
        return engaged, jnp.any(law.penetrating(cs.g)), jnp.min(cs.g, initial=jnp.inf)

    def __call__(self, q0, qd0, ts):
        system = self.field.system
        q0, qd0, initial = self.initial.apply(system, ts[0], q0, qd0)
        engaged, penetrating, g_min = self.initial_mode(ts[0], q0, qd0)
        code = RESULTS.where(penetrating, RESULTS.initial_penetration, initial.code)
        refused = code != RESULTS.successful
        if self.throw:
            q0 = code_error_if(
                q0,
                refused,
                code,
                "ukjax: initial state refused",
                smallest_g=g_min,
                **initial.values,
            )
        nan = jnp.full((ts.shape[0], q0.shape[0]), jnp.nan, q0.dtype)
        modes = jnp.zeros((ts.shape[0], engaged.shape[0]), bool)
        carry = _Carry(
            ts[0],
            q0,
            qd0,
            engaged,
            jnp.zeros((), jnp.int32),
            nan,
            nan,
            modes,
            EventLog.empty(self.max_events, q0.dtype),
            code,
            refused,
            jnp.zeros((), jnp.int32),
        )
        n_impulses = 0 if self.impulses is None else self.impulses.times.shape[0]
        out = eqxi.while_loop(
            lambda c: ~c.done,
            lambda c: self._segment(c, ts),
            carry,
            max_steps=self.max_events + n_impulses + 2,
            # reverse mode needs the checkpointed loop; forward mode needs a plain one
            kind="lax" if isinstance(self.adjoint, diffrax.ForwardMode) else "checkpointed",
        )
        return out


def contact_forces(
    system: System,
    t,
    q,
    qd,
    engaged,
    contact: AbstractContact | None = None,
    *,
    uk_solver: AbstractUKSolver | None = None,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    r"""The acceleration and contact forces of a system with contacts in a given mode.

    With the engaged contacts' rows in the UK equation (module :mod:`ukjax._contact`):

    **Returns:** `(qdd, Q_contact, forces)`: the acceleration (n,), the generalized contact
    force $\sum_i \lambda_i\nabla g_i$ (n,) and the contact multipliers $\lambda$ (one
    per contact, > 0 pushing, 0 for free contacts). Along a solution use the saved modes:
    `jax.vmap(lambda t, q, qd, e: ukjax.contact_forces(system, t, q, qd, e, law))(sol.ts,
    sol.q, sol.qd, sol.engaged)`.

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import BouncingBall
        >>> qdd, Qc, lam = ukjax.contact_forces(BouncingBall(mass=2.0, g=10.0), 0.0,
        ...     jnp.zeros(1), jnp.zeros(1), jnp.array([True]), ukjax.Impact())
        >>> float(qdd[0]), float(lam[0])      # resting on the floor: the floor carries m g
        (0.0, 20.0)
    """
    law = Impact() if contact is None else contact
    solver = CholeskyWithFallback() if uk_solver is None else uk_solver
    field = HybridField(system, law, NoStabilization(), solver, False, None, False)
    q, qd = check_state(q, qd, system)
    t = as_time(t, q.dtype)
    ev, cs, m = field.evaluate(t, (q, qd), jnp.asarray(engaged, bool))
    lam = field.forces(ev, m)
    return ev.terms.qdd, cs.G.T @ lam, lam
