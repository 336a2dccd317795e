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

from typing import Literal

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
    mass_matrix,
    nonideal_force,
    system_infeasibility,
)
from ._errors import code_error_if
from ._friction import (
    AbstractFriction,
    FrictionState,
    declares_friction,
    default_friction,
    friction_state,
    frictional_solve,
    invalid_coefficients,
    multipliers,
    pointwise_solve,
    sgn,
    sliding_from_speed,
)
from ._impulse import Impulses, impulse_jump, project_velocity, velocity_rows
from ._initial import AbstractInitialConditions
from ._residuals import as_rows, second_along_motion
from ._results import RESULTS, promote
from ._stabilization import AbstractStabilization, NoStabilization
from ._system import System, as_time, check_state, floatify
from ._uk import uk_terms
from ._uk_solvers import AbstractUKSolver, check_uk_solver
from ._wrapped import guard, name_collapse, probe_failures


EVENT_KINDS = ("none", "impact", "engage", "release", "impulse", "stick", "slip")
"""Names of the event kinds recorded in :class:`EventLog` (`kind` indexes this tuple)."""


class EventLog(eqx.Module):
    r"""The events of a hybrid run, in time order, in fixed-size arrays.

    - `count`: number of events recorded (entries from `count` on are unused: time NaN,
      kind 0).
    - `time`: (E,) event times.
    - `kind`: (E,) index into :data:`ukjax.EVENT_KINDS`: `"impact"` (velocity jump at a
      contact), `"engage"` / `"release"` (a contact's mode changes without a jump),
      `"impulse"` (a prescribed impulse), `"stick"` / `"slip"` (a frictional contact
      sticks, or starts to slide or reverses; :class:`ukjax.Coulomb`).
    - `contact`: (E,) the contact that triggered it (-1 for a prescribed impulse).
    - `speed_before`, `speed_after`: (E,) $\dot g$ of that contact just before and after
      (for `"stick"` / `"slip"`: its tangential velocity $T_i\dot q$).

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


class Mode(eqx.Module):
    """The discrete state of a hybrid run: which contacts are `engaged` (k,) and, for
    frictional contacts, the `sliding` direction (k,) int32: 0 stuck (or no friction),
    +1 / -1 sliding along / against the tangent row."""

    engaged: jax.Array
    sliding: jax.Array


class HybridEval(eqx.Module):
    """One evaluation of the hybrid right-hand side: the UK evaluation `ev`, the contact
    quantities `cs`, the number `m` of bilateral rows, and with friction the tangential
    state `fs` and the contacts' `normal` and `tangential` forces."""

    ev: Evaluation
    cs: ContactState
    m: int = eqx.field(static=True)
    fs: FrictionState | None = None
    normal: jax.Array | None = None
    tangential: jax.Array | None = None


class HybridField(eqx.Module):
    r"""$(q,\dot q) \mapsto (\dot q, \ddot q)$ with the engaged contacts' rows (and their
    friction) in the UK equation; `args` is the :class:`Mode`."""

    system: System
    contact: AbstractContact
    stabilization: AbstractStabilization
    uk_solver: AbstractUKSolver
    check: bool = eqx.field(static=True)
    consistency_tol: float | None = eqx.field(static=True)
    throw: bool = eqx.field(static=True)
    friction: AbstractFriction | None = None

    @property
    def friction_events(self) -> bool:
        return self.friction is not None and self.friction.event_driven

    def evaluate(self, t, y, mode: Mode) -> HybridEval:
        system, (q, qd) = self.system, y
        M, Q = mass_and_force(system, t, q, qd)
        A, b = rows(system, t, q, qd, self.stabilization)
        cs = contact_state(system, t, q, qd)
        target = self.contact.target_acceleration(cs.g, cs.gd)
        A_c = jnp.where(mode.engaged[:, None], cs.G, 0.0)
        b_c = jnp.where(mode.engaged, target - cs.gdd0, 0.0)
        m_bilateral = A.shape[0]
        A, b = jnp.concatenate([A, A_c]), jnp.concatenate([b, b_c])
        C = nonideal_force(system, t, q, qd)
        infeasibility = system_infeasibility(system, t, q, qd)
        if self.friction is None:
            semi = system.semidefinite_mass()
            terms = uk_terms(M, Q, A, b, C, uk_solver=self.uk_solver, semidefinite=semi)
            ev = Evaluation(UKInputs(t, q, qd, M, Q, A, b, C), terms, infeasibility)
            return HybridEval(ev, cs, m_bilateral)
        fs = friction_state(system, t, q, qd, cs.g.shape[0])
        if self.friction.event_driven:
            zeros = jnp.zeros_like(cs.g)
            fr = frictional_solve(
                M, Q, A, b, C, fs, mode.engaged, mode.sliding, zeros, self.uk_solver
            )
        else:
            fr = pointwise_solve(self.friction, M, Q, A, b, C, fs, mode.engaged, self.uk_solver)
        ev = Evaluation(UKInputs(t, q, qd, M, Q, fr.A, fr.b, fr.C), fr.terms, infeasibility)
        return HybridEval(ev, cs, m_bilateral, fs, fr.normal, fr.tangential)

    def forces(self, he: HybridEval) -> jax.Array:
        r"""Contact (normal) multipliers (> 0 pushing): least-squares $A^T\lambda = Q_c$."""
        if he.normal is not None:
            return he.normal
        k, inputs = he.cs.g.shape[0], he.ev.inputs
        return multipliers(inputs.A, he.ev.terms, inputs.C)[he.m : he.m + k]

    @eqx.filter_jit  # traced once, reused by every call of the event's root find
    def event_values(self, t, y, mode: Mode) -> jax.Array:
        he = self.evaluate(t, y, mode)
        force = self.forces(he) if self.contact.uses_force or self.friction_events else None
        values = self.contact.event_value(mode.engaged, he.cs.g, he.cs.gd, force)
        if not self.friction_events:
            return values
        assert self.friction is not None and he.fs is not None
        friction = self.friction.event_value(
            mode.engaged, mode.sliding, he.fs, he.normal, he.tangential
        )
        return jnp.concatenate([values, friction])

    def __call__(self, t, y, args):
        return _field_call(self, t, y, args)

    def failed(self, t, y, mode: Mode):
        return self.evaluate(t, y, mode).ev.failures(self.consistency_tol)


def _at(mask, x):
    """The entry of `x` where the one-hot `mask` is true (0 if none)."""
    return jnp.sum(jnp.where(mask, x, 0.0))


class _Carry(eqx.Module):
    t: jax.Array
    q: jax.Array
    qd: jax.Array
    mode: Mode
    next_impulse: jax.Array
    saved_q: jax.Array
    saved_qd: jax.Array
    saved_mode: Mode
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
    def _event(self, mode: Mode, offset):
        contact_fn = lambda t, y, args, **kw: jnp.min(
            self.field.event_values(t, y, mode) + offset, initial=1.0
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
        values0 = self.field.event_values(c.t, (c.q, c.qd), c.mode)
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
            guard(stab.wrap_solver(self.solver, system), self.stepsize_controller),
            t0=c.t,
            t1=t_end,
            dt0=self.dt0,
            y0=(c.q, c.qd),
            args=c.mode,
            saveat=saveat,
            stepsize_controller=self.stepsize_controller,
            adjoint=self.adjoint,
            event=self._event(c.mode, offset) if self.num_contacts else None,
            max_steps=self.max_steps,
            throw=False,
        )
        seg_ts, (seg_q, seg_qd) = sol.ts[0], sol.ys[0]  # pyright: ignore
        t_stop = sol.ts[1][-1]  # pyright: ignore
        q1, qd1 = (x[-1] for x in sol.ys[1])  # pyright: ignore
        span = jnp.abs(ts[-1] - ts[0])
        result = self._segment_result(sol, t_stop, (q1, qd1), c.mode, span)
        # A failed segment's saves are not trusted (they stay NaN); earlier ones are kept.
        keep = (ts >= c.t) & (ts <= t_stop) & jnp.isfinite(seg_ts) & ~c.done
        keep = keep & (result == RESULTS.successful)
        saved_q = jnp.where(keep[:, None], seg_q, c.saved_q)
        saved_qd = jnp.where(keep[:, None], seg_qd, c.saved_qd)
        saved_mode = jax.tree_util.tree_map(
            lambda now, saved: jnp.where(keep[:, None], now[None, :], saved), c.mode, c.saved_mode
        )
        contact_hit = self._contact_hit(sol)
        nxt = _Carry(
            t_stop,
            q1,
            qd1,
            c.mode,
            c.next_impulse,
            saved_q,
            saved_qd,
            saved_mode,
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

    def _segment_result(self, sol, t_stop, y_stop, mode: Mode, span) -> RESULTS:
        """The segment's code. With throw=False the UK checks run on the segment's end
        state (with throw=True they raise inside the solve), and a segment that stalled
        on a failure just ahead of it gets that failure's code
        (:func:`ukjax._wrapped.probe_failures`)."""
        result = name_collapse(promote(sol.result), self.stepsize_controller)
        result = RESULTS.where(result == RESULTS.event_occurred, RESULTS.successful, result)
        if not self.field.check or self.throw:
            return result
        code = self.field.failed(t_stop, y_stop, mode).code()
        stalled = (result != RESULTS.successful) & (code == RESULTS.successful)
        result = RESULTS.where(result == RESULTS.successful, code, result)
        failures_at = lambda t, y: self.field.failed(t, y, mode)
        qdd_at = lambda t, y: self.field(t, y, mode)[1]
        ahead = probe_failures(failures_at, qdd_at, t_stop, y_stop, span, stalled)[1].code()
        return RESULTS.where(stalled & (ahead != RESULTS.successful), ahead, result)

    # ---- mode changes and jumps --------------------------------------------------------
    def _switch(self, c: _Carry, offset, hit) -> _Carry:
        """The event at (c.t, c.q, c.qd): new modes, velocity jump, record."""
        field, k = self.field, self.num_contacts
        values = field.event_values(c.t, (c.q, c.qd), c.mode) + offset
        first = jnp.argmin(values)
        cs = contact_state(field.system, c.t, c.q, c.qd)
        engaged, qd, kind, before, after = self._normal_event(c, cs, first)
        sliding = jnp.where(engaged & c.mode.engaged, c.mode.sliding, 0)
        if field.friction_events:
            f_sliding, f_qd, f_kind, f_before, f_after = self._friction_event(c, first - k)
            on_friction = first >= k
            sliding = jnp.where(on_friction, f_sliding, sliding)
            qd = jnp.where(on_friction, f_qd, qd)
            kind = jnp.where(on_friction, f_kind, kind)
            before = jnp.where(on_friction, f_before, before)
            after = jnp.where(on_friction, f_after, after)
            engaged = jnp.where(on_friction, c.mode.engaged, engaged)
            fresh = engaged & ~c.mode.engaged
            sliding, qd = self._settle(c.t, c.q, qd, Mode(engaged, sliding), fresh)
        mode = jax.tree_util.tree_map(
            lambda new, old: jnp.where(hit, new, old), Mode(engaged, sliding), c.mode
        )
        qd = jnp.where(hit, qd, c.qd)
        log = c.log.record(c.t, kind, first % max(k, 1), before, after)
        log = jax.tree_util.tree_map(lambda a, b: jnp.where(hit, a, b), log, c.log)
        return eqx.tree_at(lambda x: (x.qd, x.mode, x.log), c, (qd, mode, log))

    def _normal_event(self, c: _Carry, cs: ContactState, first):
        """A contact law's event at contact `first`: (engaged, qd, kind, gd before, after)."""
        law, engaged0 = self.field.contact, c.mode.engaged
        trig = jnp.arange(cs.g.shape[0]) == first
        if isinstance(law, Impact):
            near = ~engaged0 & (cs.g <= law.gap_tol(cs.g.dtype)) & (cs.gd < 0)
            impacting = (trig & ~engaged0 & (cs.gd < 0)) | (near & jnp.any(trig & ~engaged0))
            released = trig & engaged0
            gd_plus = law.rebound(cs.gd)
            persistent = impacting & law.persists(gd_plus)
            engaged = (engaged0 & ~released) | persistent
            gd_target = jnp.where(impacting & ~persistent, gd_plus, 0.0)
            stuck = engaged0 & engaged & (c.mode.sliding == 0)
            qd = self._jump(c, cs, impacting | engaged, gd_target, stuck)
            sliding = jnp.where(engaged & engaged0, c.mode.sliding, 0)
            engaged = self._drop_pulling(c.t, c.q, qd, Mode(engaged, sliding))
            kind = jnp.where(jnp.any(impacting), 1, 3)
        else:
            engaged = jnp.where(trig, ~engaged0, engaged0)
            qd = c.qd
            kind = jnp.where(jnp.any(trig & engaged), 2, 3)
        after = contact_state(self.field.system, c.t, c.q, qd).gd
        return engaged, qd, kind, _at(trig, cs.gd), _at(trig, after)

    def _friction_event(self, c: _Carry, i):
        r"""Coulomb's event at contact `i`: a stuck contact starts to slide (opposite to
        the friction force that held it); a sliding one whose velocity reached zero sticks
        if the static bound holds there, and slides back otherwise. $v_i$ is set to 0."""
        field, mode = self.field, c.mode
        assert field.friction is not None
        trig = jnp.arange(mode.engaged.shape[0]) == i
        held = jnp.where(trig, 0, mode.sliding)
        he = field.evaluate(c.t, (c.q, c.qd), Mode(mode.engaged, held))
        assert he.fs is not None and he.tangential is not None and he.normal is not None
        holds = jnp.abs(he.tangential) <= he.fs.mu_s * he.normal
        was_stuck = mode.sliding == 0
        new = jnp.where(was_stuck | ~holds, -sgn(he.tangential), 0)
        sliding = jnp.where(trig & mode.engaged, new, mode.sliding).astype(jnp.int32)
        stuck = mode.engaged & ((sliding == 0) | trig)
        qd = self._hold(c.t, c.q, c.qd, mode.engaged, stuck)
        vt_after = friction_state(field.system, c.t, c.q, qd, trig.shape[0]).vt
        kind = jnp.where(jnp.any(trig & (sliding == 0)), 5, 6)
        return sliding, qd, kind, _at(trig, he.fs.vt), _at(trig, vt_after)

    def _settle(self, t, q, qd, mode: Mode, fresh):
        """Friction modes after a switch: a contact that has just engaged sticks if slow
        and admissible, else slides (along its velocity, or away from the holding force);
        a stuck contact whose holding force now exceeds the static bound slides; stuck
        contacts are then held at zero tangential velocity."""
        field = self.field
        assert field.friction is not None
        fs = friction_state(field.system, t, q, qd, mode.engaged.shape[0])
        sliding = jnp.where(fresh, sliding_from_speed(field.friction, fs), mode.sliding)
        sliding = jnp.where(mode.engaged, sliding, 0).astype(jnp.int32)
        he = field.evaluate(t, (q, qd), Mode(mode.engaged, sliding))
        assert he.tangential is not None and he.normal is not None
        stuck = mode.engaged & (sliding == 0)
        bad = stuck & (jnp.abs(he.tangential) > fs.mu_s * he.normal)
        sliding = jnp.where(bad, -sgn(he.tangential), sliding).astype(jnp.int32)
        return sliding, self._hold(t, q, qd, mode.engaged, mode.engaged & (sliding == 0))

    def _project(self, t, q, qd, G, g_target, stuck):
        r"""The velocity nearest `qd` (mass metric) with every bilateral velocity constraint
        met, the contact rows $G\dot q^+ = $ `g_target` and, for `stuck` frictional
        contacts, $T_i\dot q^+ = 0$ (zero rows are ignored)."""
        system = self.field.system
        M = mass_matrix(system, t, q, qd)
        J, r = velocity_rows(system, t, q, qd)
        rows_, targets = [J, G], [J @ qd - r, g_target]
        if self.field.friction is not None:
            fs = friction_state(system, t, q, qd, stuck.shape[0])
            rows_.append(jnp.where(stuck[:, None], fs.T, 0.0))
            targets.append(jnp.zeros(stuck.shape[0], qd.dtype))
        return project_velocity(M, qd, jnp.concatenate(rows_), jnp.concatenate(targets))

    def _jump(self, c: _Carry, cs: ContactState, rows_on, gd_target, stuck):
        r"""UK impulsive projection with the bilateral rows, the contact rows in `rows_on`
        ($\nabla g_i\dot q^+ = \nabla g_i\dot q^- + \dot g_i^+ - \dot g_i^-$) and, for
        `stuck` frictional contacts, $T_i\dot q^+ = 0$ (they stay stuck through it)."""
        G = jnp.where(rows_on[:, None], cs.G, 0.0)
        c_contact = jnp.where(rows_on, cs.G @ c.qd + gd_target - cs.gd, 0.0)
        return self._project(c.t, c.q, c.qd, G, c_contact, stuck)

    def _hold(self, t, q, qd, engaged, stuck):
        """`qd` with the tangential velocity of `stuck` contacts set to zero, the normal
        velocity of engaged contacts and every bilateral constraint kept."""
        G = jnp.where(engaged[:, None], contact_state(self.field.system, t, q, qd).G, 0.0)
        return self._project(t, q, qd, G, G @ qd, stuck)

    def _drop_pulling(self, t, q, qd, mode: Mode):
        """Engaged contacts whose force would pull at the new state are released."""
        field = self.field
        return mode.engaged & (field.forces(field.evaluate(t, (q, qd), mode)) > 0)

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
        """(mode, qd, refusal code, smallest g) at the start: the law's engaged contacts
        (rigid ones only if they push), their friction modes (stuck contacts held at zero
        tangential velocity), and whether the state or the friction data are refused."""
        field = self.field
        law, cs = field.contact, contact_state(field.system, t, q, qd)
        k = cs.g.shape[0]
        engaged = law.initial_mode(cs.g, cs.gd)
        sliding = jnp.zeros(k, jnp.int32)
        code = RESULTS.where(
            jnp.any(law.penetrating(cs.g)), RESULTS.initial_penetration, RESULTS.successful
        )
        if field.friction is not None:
            fs = friction_state(field.system, t, q, qd, k)
            sliding = sliding_from_speed(field.friction, fs)
            bad = jnp.any(invalid_coefficients(fs))
            code = RESULTS.where(bad, RESULTS.invalid_friction, code)
        if law.impulsive:  # a resting rigid contact is engaged only if it pushes
            engaged = self._drop_pulling(t, q, qd, Mode(engaged, sliding))
        if field.friction_events:
            sliding, qd = self._settle(t, q, qd, Mode(engaged, sliding), engaged)
        sliding = jnp.where(engaged, sliding, 0).astype(jnp.int32)
        return Mode(engaged, sliding), qd, code, jnp.min(cs.g, initial=jnp.inf)

    def __call__(self, q0, qd0, ts):
        system = self.field.system
        q0, qd0, initial = self.initial.apply(system, ts[0], q0, qd0)
        mode, qd0, contact_code, g_min = self.initial_mode(ts[0], q0, qd0)
        code = RESULTS.where(initial.code == RESULTS.successful, contact_code, initial.code)
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
        k = mode.engaged.shape[0]
        saved_mode = Mode(jnp.zeros((ts.shape[0], k), bool), jnp.zeros((ts.shape[0], k), jnp.int32))
        carry = _Carry(
            ts[0],
            q0,
            qd0,
            mode,
            jnp.zeros((), jnp.int32),
            nan,
            nan,
            saved_mode,
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
            # reverse mode needs the checkpointed loop, forward mode a plain one, and both
            # (diffrax's DirectAdjoint: second derivatives) a bounded one
            kind=_loop_kind(self.adjoint),
        )
        return out


def _loop_kind(adjoint: diffrax.AbstractAdjoint) -> Literal["lax", "checkpointed", "bounded"]:
    """The kind of `eqxi.while_loop` over the segments that `adjoint` can differentiate."""
    if isinstance(adjoint, diffrax.ForwardMode):
        return "lax"
    return "bounded" if isinstance(adjoint, diffrax.DirectAdjoint) else "checkpointed"


def _mode_field(system, contact, friction, uk_solver, t, q) -> HybridField:
    law = Impact() if contact is None else contact
    solver = check_uk_solver(uk_solver)
    friction = default_friction(friction, declares_friction(system, t, q))
    return HybridField(system, law, NoStabilization(), solver, False, None, False, friction)


def contact_forces(
    system: System,
    t,
    q,
    qd,
    engaged,
    contact: AbstractContact | None = None,
    *,
    sliding=None,
    friction: AbstractFriction | None = None,
    uk_solver: AbstractUKSolver | None = None,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    r"""The acceleration and contact forces of a system with contacts in a given mode.

    With the engaged contacts' rows in the UK equation (module :mod:`ukjax._contact`), and
    for a system that declares `friction`, the friction of the engaged contacts in the
    modes `sliding` ((k,) ints: 0 stuck, ±1 sliding; default all stuck) under `friction`
    (default :class:`ukjax.Coulomb`; see :func:`ukjax.friction_forces`):

    **Returns:** `(qdd, Q_contact, forces)`: the acceleration (n,), the generalized normal
    contact force $\sum_i \lambda_i\nabla g_i$ (n,) and the contact multipliers $\lambda$
    (one per contact, > 0 pushing, 0 for free contacts). Along a solution use the saved
    modes: `jax.vmap(lambda t, q, qd, e: ukjax.contact_forces(system, t, q, qd, e,
    law))(sol.ts, sol.q, sol.qd, sol.engaged)`.

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import BouncingBall
        >>> qdd, Qc, lam = ukjax.contact_forces(BouncingBall(mass=2.0, g=10.0), 0.0,
        ...     jnp.zeros(1), jnp.zeros(1), jnp.array([True]), ukjax.Impact())
        >>> float(qdd[0]), float(lam[0])      # resting on the floor: the floor carries m g
        (0.0, 20.0)
    """
    qdd, lam, _, cs = _forces_in_mode(
        system, t, q, qd, engaged, contact, sliding, friction, uk_solver
    )
    return qdd, cs.G.T @ lam, lam


def friction_forces(
    system: System,
    t,
    q,
    qd,
    engaged,
    sliding=None,
    contact: AbstractContact | None = None,
    *,
    friction: AbstractFriction | None = None,
    uk_solver: AbstractUKSolver | None = None,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    r"""The acceleration, normal and friction forces of a frictional system in a given mode.

    `engaged` (k,) booleans and `sliding` (k,) ints (0 stuck, +1/-1 sliding along/against
    the tangent row $T_i$ of `System.friction`; default all stuck) as saved in
    `Solution.engaged` and `Solution.sliding`. Stuck contacts hold $T_i\ddot q =
    -\dot T_i\dot q$ (their UK constraint force is the friction), sliding ones feel
    $-\mu_kN_is_i$ with the normal forces $N$ solved together with it (module
    :mod:`ukjax._friction`).

    **Returns:** `(qdd, normal, tangential)`: the acceleration (n,), the normal forces
    $N$ (k,) (> 0 pushing, 0 for free contacts) and the friction forces along each
    $T_i$ (k,). A stuck contact is admissible while $|F_t| \le \mu_sN$.

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import FrictionBlock
        >>> block = FrictionBlock(mass=2.0, g=10.0, incline=0.3, mu_static=0.5)
        >>> qdd, N, Ft = ukjax.friction_forces(block, 0.0, jnp.zeros(2), jnp.zeros(2),
        ...                                    jnp.array([True]))
        >>> [round(float(x), 6) for x in (N[0], Ft[0], qdd[0])]  # m g cos, m g sin, at rest
        [19.10673, 5.910404, 0.0]
    """
    qdd, normal, tangential, _ = _forces_in_mode(
        system, t, q, qd, engaged, contact, sliding, friction, uk_solver
    )
    assert tangential is not None
    return qdd, normal, tangential


def _forces_in_mode(system, t, q, qd, engaged, contact, sliding, friction, uk_solver):
    q, qd = check_state(q, qd, system)
    t = as_time(t, q.dtype)
    field = _mode_field(floatify(system), contact, friction, uk_solver, t, q)
    engaged = jnp.asarray(engaged, bool)
    if field.friction is None and sliding is not None:
        raise ValueError(f"sliding= was given but {type(system).__name__} declares no friction.")
    sliding = jnp.zeros(engaged.shape, jnp.int32) if sliding is None else sliding
    return _evaluate_mode(field, t, q, qd, Mode(engaged, jnp.asarray(sliding, jnp.int32)))


# A nested jit: a Runge-Kutta step calls the field at every stage; traced once, reused.
@eqx.filter_jit
def _field_call(field: HybridField, t, y, mode: Mode):
    ev = field.evaluate(t, y, mode).ev
    return y[1], ev.field_qdd(field.check, field.throw, field.consistency_tol)


@eqx.filter_jit
def _evaluate_mode(field: HybridField, t, q, qd, mode: Mode):
    he = field.evaluate(t, (q, qd), mode)
    return he.ev.terms.qdd, field.forces(he), he.tangential, he.cs
