r"""Hybrid (event-driven) integration: unilateral contacts, impacts, impulses.

The motion is integrated in *segments* of smooth motion with a fixed contact mode. A
segment ends at the first downward zero crossing of a contact law's event value (located
by diffrax's root finder on the step's dense output, so events are taken in time order,
simultaneous ones together) or at a prescribed impulse. The mode change, the velocity jump
(:class:`ukjax.Impact`, :class:`ukjax.Impulses`) and the event record are then applied and
the next segment starts there. The loop has a bound (`max_events`): under `jax.vmap` every
member keeps its own event times and modes, and it is differentiable in reverse mode by
replaying its segments (:func:`ukjax._segment_adjoint.replayed_while`; the event times
carry their implicit-function derivative through the root find), in forward mode as a
plain `equinox.internal.while_loop` (`adjoint=diffrax.ForwardMode()`).

The driver evaluates one :class:`ukjax._field.Field` in the segment's mode and never asks
which laws it runs: at an event the contact law's
:meth:`~ukjax.AbstractContact.switch` (or the friction law's
:meth:`~ukjax.AbstractFriction.switch`) sets the new modes and the velocity, through the
projections the driver offers them (:class:`ukjax._events.EventMotion`).

Example (a ball dropped from 5 m, g = 10: it hits the floor at t = 1 s at 10 m/s and
leaves at 5 m/s):
    >>> import jax, jax.numpy as jnp, ukjax
    >>> jax.config.update("jax_enable_x64", True)
    >>> from ukjax.systems import BouncingBall
    >>> sol = ukjax.simulate(BouncingBall(g=10.0), jnp.array([5.0]), jnp.zeros(1),
    ...                      jnp.linspace(0.0, 1.5, 4), contact=ukjax.Impact(restitution=0.5))
    >>> ev = sol.events
    >>> ukjax.EVENT_KINDS[int(ev.kind[0])], round(float(ev.time[0]), 9)
    ('impact', 1.0)
    >>> round(float(ev.speed_before[0]), 9), round(float(ev.speed_after[0]), 9)
    (-10.0, 5.0)
"""

from __future__ import annotations

from typing import Literal

import diffrax
import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx

from ._batching import batched_like
from ._complementarity import least_index_pivoting, pick, pivot_bound
from ._constraints import rows
from ._contact import AbstractContact
from ._dissipative_impact import DissipativeImpact, dissipative_impact
from ._driver import AbstractDriver, refuse_initial
from ._dynamics import RowSolve, mass_and_force, mass_matrix, row_solve
from ._events import EventKind, EventLog, Switched, entry_at
from ._field import ContactState, Field, Mode, contact_state, gap_function
from ._friction import (
    FrictionState,
    friction_state,
    invalid_coefficients,
    is_sliding,
    multipliers,
    norm,
    sliding_from_speed,
    tangent_dim,
)
from ._impulse import Impulses, impulse_jump, velocity_rows
from ._initial import AbstractInitialConditions, InitialCheck
from ._latches import acceleration_rows, initially_latched, latch_state
from ._latches import velocity_rows as latch_velocity_rows
from ._results import RESULTS
from ._segment_adjoint import replayed_while
from ._solution import Solution
from ._stepping import Stepping
from ._wrapped import probe_failures


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
    events: jax.Array  # events so far, those not logged (kind NONE) included
    result: RESULTS
    done: jax.Array
    steps: jax.Array


class _ImpulseRows(eqx.Module):
    r"""What every impulsive jump from one state shares, whichever contacts take part:
    the bilateral velocity rows $J\dot q = c$ (the engaged latches' with them), the UK
    solve of the mass matrix there, the contact quantities and, where the system declares
    friction, the tangential state (its rate set to hold the slip: $T\Delta\dot q =
    -T\dot q^-$)."""

    J: jax.Array
    c: jax.Array
    solve: RowSolve
    cs: ContactState
    fs: FrictionState | None


class _Motion:
    """The run at an event as a contact or friction law sees it
    (:class:`ukjax._events.EventMotion`): the state (t, q, qd) before the event, with the
    contact quantities `cs` there, and the driver's projections and forces. The jumps'
    shared rows (:class:`_ImpulseRows`) are formed once, at the first jump or impact, for
    all of them (the complementarity oracle's trials included)."""

    def __init__(
        self, run: EventDriver, t, q, qd, cs: ContactState, latched=None, impulse_rows=None
    ):
        self.run, self.t, self.q, self.qd, self.cs = run, t, q, qd, cs
        self.latched = latched  # the engaged latches (None: the system declares none)
        self._impulse_rows = impulse_rows

    def impulse_rows(self) -> _ImpulseRows:
        """The rows every jump from this state shares (formed on the first call)."""
        if self._impulse_rows is None:
            self._impulse_rows = self.run.impulse_rows(self.t, self.q, self.qd, self.latched)
        return self._impulse_rows

    def jump(self, rows_on, gd_target):
        r"""(velocity, normal impulses, tangential impulses) of the impulsive jump of `qd`
        with the contacts in `rows_on` given the normal speeds `gd_target` ($\dot g_i^+$),
        every bilateral constraint kept, and the friction law's impulses where the system
        declares friction."""
        return self.run.impulsive(self.qd, rows_on, gd_target, self.impulse_rows())

    def normal_speed(self, qd):
        cs = self.cs
        return cs.G @ qd + (cs.gd - cs.G @ self.qd)

    def impact(self, candidates, gd_target):
        self.impulse_rows()  # formed here, so that the trials share them with the jumps
        fixed = _stopped(self)
        target = jax.lax.stop_gradient(gd_target)
        shared = fixed.impulse_rows()  # outside the pivoting loop: each trial only solves

        def oracle(active):
            qd, impulses, _ = fixed.run.impulsive(fixed.qd, active, target, shared)
            return impulses, fixed.normal_speed(qd) - target

        k = candidates.shape[0]
        # the normal speeds' round-off: the size of the products they sum, with any
        # velocity component (the jump mixes them: a body sliding on touching corners)
        speed = jnp.max(jnp.abs(fixed.qd), initial=0.0)
        scale = jnp.sum(jnp.abs(fixed.cs.G), axis=1) * speed + jnp.abs(target)
        return least_index_pivoting(
            oracle, candidates, pivot_bound(k), scale=scale, dtype=fixed.qd.dtype
        )

    def dissipative(self, candidates, gd_target, qd, resting, needed, impulsive):
        run = self.run
        if run.field.friction is None:
            return None
        t, q, latched = self.t, self.q, self.latched
        args = (t, q, self.qd, self.cs, candidates, gd_target, qd, resting, impulsive, latched)
        shared = self.impulse_rows()  # the jumps' rows, formed outside the branch
        return _when(needed, lambda: run.dissipative(*args, shared=shared))

    def supporting(self, qd, candidates, sliding):
        fixed, field = _stopped(self), self.run.field
        qd_fixed = jax.lax.stop_gradient(qd)
        # the state's inputs outside the pivoting loop: each trial only solves
        inputs = fixed.run.field.state_inputs(fixed.t, (fixed.q, qd_fixed), fixed.latched)

        def oracle(active):
            mode = Mode(active, jnp.where(active[:, None], sliding, 0.0), fixed.latched)
            fe = fixed.run.field.evaluate_at(inputs, mode)
            cs = fe.cs
            assert cs is not None and field.contact is not None
            gdd = cs.G @ fe.ev.terms.qdd + cs.gdd0
            return fixed.run.field.forces(fe), gdd - field.contact.target_acceleration(cs.g, cs.gd)

        k = candidates.shape[0]
        lcp = least_index_pivoting(oracle, candidates, pivot_bound(k), dtype=fixed.qd.dtype)
        return lcp.active, lcp.solved

    def slip_modes(self, qd, fresh, sliding):
        friction = self.run.field.friction
        if friction is None:
            return sliding
        modes = sliding_from_speed(friction, self.friction_state(qd))
        return jnp.where(fresh[:, None], modes, sliding)

    def forces(self, qd, engaged, sliding):
        fe = self.run.field.evaluate(self.t, (self.q, qd), Mode(engaged, sliding, self.latched))
        return fe.fs, fe.normal, fe.tangential

    def slip_acceleration(self, qd, engaged, sliding):
        fe = self.run.field.evaluate(self.t, (self.q, qd), Mode(engaged, sliding, self.latched))
        assert fe.fs is not None
        fs, qdd = fe.fs, fe.ev.terms.qdd
        T = fs.T
        growth = jnp.einsum("kdn,n->kd", T, qdd) + fs.Tdqd
        # the size of the terms it sums: below sqrt(eps) of it the growth is round-off
        size = jnp.einsum("kdn,n->kd", jnp.abs(T), jnp.abs(qdd)) + jnp.abs(fs.Tdqd)
        return growth, norm(size)

    def hold(self, qd, engaged, stuck):
        G = contact_state(self.run.field.system, self.t, self.q, qd).G
        G = jnp.where(engaged[:, None], G, 0.0)
        return self.run.project(self.t, self.q, qd, G, G @ qd, stuck, self.latched)

    def friction_state(self, qd):
        return friction_state(self.run.field.system, self.t, self.q, qd, self.cs.g.shape[0])


def _when(needed, compute):
    """`compute()` where `needed` (a () bool), zeros of its shapes otherwise (one branch
    runs under `jit`; both under `vmap`)."""
    shapes = jax.eval_shape(compute)
    skip = lambda: jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
    return jax.lax.cond(needed, compute, skip)


def _stopped(motion: _Motion) -> _Motion:
    """The same motion with no derivative flowing through it: the discrete choices of a
    complementarity problem are made on its values (its jumps' rows, where formed, too)."""
    stop = lambda x: jax.lax.stop_gradient(x) if eqx.is_inexact_array(x) else x
    run, t, q, qd, cs, shared = jax.tree_util.tree_map(
        stop, (motion.run, motion.t, motion.q, motion.qd, motion.cs, motion._impulse_rows)
    )
    return _Motion(run, t, q, qd, cs, motion.latched, shared)


class _TimeBisection(optx.Bisection):
    """Bisection in time that stops on the bracket width alone: event values such as
    contact forces can change fast, so |value| < atol at the root is not a usable test."""

    def terminate(self, fn, y, args, options, state, tags):
        width = jnp.abs(state.lower - state.upper)
        return width < self.atol + self.rtol * jnp.abs(y), optx.RESULTS.successful


def _log_entry(c: _Carry, kind, index, before, after, normal, tangential, logged):
    """One entry of the event log as scalars of the log's dtypes (the same structure from
    both branches of the event code's `cond`), with whether to record it."""
    as_scalar = lambda x, dtype: jnp.asarray(x, dtype).reshape(())
    floats = (before, after, normal, tangential)
    return (
        as_scalar(kind, c.log.kind.dtype),
        as_scalar(index, c.log.contact.dtype),
        *(as_scalar(x, c.q.dtype) for x in floats),
        as_scalar(logged, bool),
    )


def _segment_saves(ts, t0, t1):
    r"""(shift, times): the save times a segment from `t0` to `t1` hands diffrax: `ts`
    rotated left by `shift` (the number of `ts` before `t0`), so that the saves inside
    the segment come first, in order, and the rest after them as NaN.
    diffrax interpolates a save when a step passes its time, so it never reaches a NaN (a
    comparison with NaN is false) and a segment interpolates its own saves only, not all
    of `ts`: under `jax.vmap` a member does not wait on another's discarded saves.
    `jnp.roll(saved, shift, axis=0)` puts the saves back in the order of `ts` (those
    not reached stay unsaved: not finite)."""
    shift = jnp.sum(ts < t0)
    rotated = jnp.roll(ts, -shift)
    return shift, jnp.where((rotated >= t0) & (rotated <= t1), rotated, jnp.nan)


def _offset(values, floors):
    """Per contact: a shift making the segment's initial event value strictly positive
    (the smallest normal number; at least `floors`, the laws' own start levels), so that a
    value that starts at or just below zero after an event (root-finding round-off) does
    not mask another contact's crossing in the first step. It is not compounded: the next
    event of that contact is at the same level."""
    info = jnp.finfo(values.dtype)
    return jnp.maximum(floors - values, 0.0) * (1.0 + 4.0 * info.eps) + info.tiny


class EventDriver(AbstractDriver):
    """The segment loop (module docstring)."""

    field: Field
    initial: AbstractInitialConditions
    stepping: Stepping
    impulses: Impulses | None
    max_events: int = eqx.field(static=True)
    num_contacts: int = eqx.field(static=True)
    num_latches: int = eqx.field(static=True, default=0)

    @property
    def _has_events(self) -> bool:
        """Whether the run has event values (contacts or latches), not impulses only."""
        return bool(self.num_contacts or self.num_latches)

    def at_events(self) -> EventDriver:
        """This integration with the UK kernels of the code that runs once per event or
        once per step, not once per stage: the event values, the switches, impacts,
        impulses and the initial mode (:meth:`ukjax.AbstractKernels.at_events`); the
        vector field of the stages keeps the run's own kernels."""
        kernels = self.field.uk_solver.kernels.at_events()
        return eqx.tree_at(lambda h: h.field.uk_solver.kernels, self, kernels)

    @property
    def law(self) -> AbstractContact:
        """The contact law (a run with contacts or impulses always has one)."""
        assert self.field.contact is not None
        return self.field.contact

    # ---- events -------------------------------------------------------------------------
    def _event(self, mode: Mode, offset):
        # The value in JAX's default floating dtype (float64 with x64 on): diffrax's root
        # find puts it in a `lax.cond` beside a Python 0.0, and a float32 run with x64 on
        # would otherwise fail to trace (branches of different dtypes). Exact: a float32
        # value widens without rounding, and only its sign and zero are used.
        default = jnp.result_type(float)
        contact_fn = lambda t, y, args, **kw: jnp.min(
            self.field.event_values(t, y, mode) + offset, initial=1.0
        ).astype(default)
        # Bisection: robust for the kinks of min() and of release laws (Newton is not);
        # the event time still gets its implicit-function derivative.
        tol = 100 * jnp.finfo(offset.dtype).eps
        return diffrax.Event(
            contact_fn, root_finder=_TimeBisection(rtol=tol, atol=tol, flip=True), direction=False
        )

    def _horizon(self, t, y, mode: Mode):
        r"""The longest next step (:class:`ukjax._stepping.Lookahead`): the smallest
        linearly predicted time, $\max(g_i, \beta)/(-\dot g_i)$, in which a free contact
        that approaches ($g_i > 0$, $\dot g_i < 0$) closes its gap or the law's touching
        band $\beta$ (:meth:`ukjax.AbstractContact.touch_band`), and at least what
        advances t; infinite when none approaches. A step then ends at the touch of a
        contact that is apart, or past it where the approach accelerates; a touching one
        is carried across zero by the band, never by round-off (a slow one, stepped by
        its time to touch, could sit for ever at a gap of round-off while every step
        was too short to change its coordinates: a stack of balls settling); and never
        beyond a gap that would fall to zero and rise again (a ball past another) by
        more than the band."""
        q, qd = y
        gap = gap_function(self.field.system, q.dtype)
        g, gd = jax.jvp(gap, (t, q), (jnp.ones_like(t), qd))
        approaching = ~mode.engaged & (g > 0) & (gd < 0)
        closing = jnp.maximum(g, self.law.touch_band(q.dtype))
        h = jnp.where(approaching, closing / jnp.where(approaching, -gd, 1.0), jnp.inf)
        # never below what advances t (a contact at round-off from touching crosses next)
        floor = 1e3 * jnp.finfo(q.dtype).eps * jnp.maximum(jnp.abs(t), 1.0)
        return jnp.maximum(jnp.min(h, initial=jnp.inf), floor)

    def _impulse_time(self, k, dtype):
        if self.impulses is None:
            return jnp.asarray(jnp.inf, dtype)
        times = self.impulses.times.astype(dtype)
        return jnp.where(k < times.shape[0], times[jnp.minimum(k, times.shape[0] - 1)], jnp.inf)

    # ---- one segment ----------------------------------------------------------------------
    def _segment(self, c: _Carry, ts) -> _Carry:
        t_final = ts[-1]
        t_imp = self._impulse_time(c.next_impulse, c.q.dtype)
        if self.impulses is not None:  # an impulse whose time has passed is applied at once
            t_imp = jnp.maximum(t_imp, c.t)
        t_end = jnp.where(c.done, c.t, jnp.minimum(t_final, t_imp))
        events = self.at_events()  # its kernels for all but the stages' vector field
        values0 = events.field.event_values(c.t, (c.q, c.qd), c.mode)
        offset = _offset(values0, self.field.event_floors(c.mode, values0.dtype))
        shift, seg_ts_in = _segment_saves(ts, c.t, t_end)
        saves = self.stepping.saves(self.field, seg_ts_in)
        sol = self.stepping.solve(
            self.field,
            c.t,
            t_end,
            (c.q, c.qd),
            c.mode,
            diffrax.SaveAt(subs=[saves, diffrax.SubSaveAt(t1=True)]),
            events._event(c.mode, offset) if self._has_events else None,
            horizon=self._horizon if self.num_contacts else None,
        )
        seg_ts, seg_q, seg_qd = (
            jnp.roll(x, shift, axis=0)
            for x in (sol.ts[0], *sol.ys[0])  # pyright: ignore
        )
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
            lambda now, saved: jnp.where(keep.reshape((-1,) + (1,) * now.ndim), now, saved),
            c.mode,
            c.saved_mode,
        )
        contact_hit = self._contact_hit(sol)
        nxt = eqx.tree_at(
            lambda x: (x.t, x.q, x.qd, x.saved_q, x.saved_qd, x.saved_mode, x.result, x.steps),
            c,
            (
                t_stop,
                q1,
                qd1,
                saved_q,
                saved_qd,
                saved_mode,
                RESULTS.where(c.done, c.result, result),
                c.steps + sol.stats["num_steps"],
            ),
        )
        failed = result != RESULTS.successful
        if self._has_events:
            hit = contact_hit & ~failed & ~c.done
            nxt = events._switch(nxt, offset, hit)
        impulse_now = ~contact_hit & ~failed & ~c.done & (t_stop >= t_imp)
        nxt = events._apply_impulse(nxt, impulse_now)
        unsolved = nxt.result != RESULTS.successful  # an event that could not be resolved
        failed = failed | unsolved
        finished = c.done | failed | (~contact_hit & ~impulse_now & (t_stop >= t_final))
        # One more event than the log holds: stop there (the saves so far are kept).
        event = (contact_hit | impulse_now) & ~c.done & ~failed
        full = event & (c.events >= self.max_events)
        result = RESULTS.where(full, RESULTS.max_events_reached, nxt.result)
        events = c.events + event.astype(c.events.dtype)
        return eqx.tree_at(
            lambda x: (x.result, x.done, x.events), nxt, (result, finished | full, events)
        )

    def _contact_hit(self, sol) -> jax.Array:
        return jnp.asarray(False) if sol.event_mask is None else sol.event_mask

    def _segment_result(self, sol, t_stop, y_stop, mode: Mode, span) -> RESULTS:
        """The segment's code. With throw=False the UK checks run on the segment's end
        state (with throw=True they raise inside the solve), and a segment that stalled
        on a failure just ahead of it gets that failure's code
        (:func:`ukjax._wrapped.probe_failures`)."""
        result = self.stepping.code(sol)
        result = RESULTS.where(result == RESULTS.event_occurred, RESULTS.successful, result)
        if not self.field.check or self.throw:
            return result
        code = self.field.failures(t_stop, y_stop, mode).code()
        stalled = (result != RESULTS.successful) & (code == RESULTS.successful)
        result = RESULTS.where(result == RESULTS.successful, code, result)
        failures_at = lambda t, y: self.field.failures(t, y, mode)
        qdd_at = lambda t, y: self.field(t, y, mode)[1]
        ahead = probe_failures(failures_at, qdd_at, t_stop, y_stop, span, stalled)[1].code()
        return RESULTS.where(stalled & (ahead != RESULTS.successful), ahead, result)

    # ---- mode changes and jumps --------------------------------------------------------
    def _switch(self, c: _Carry, offset, hit) -> _Carry:
        """The carry after the events of the members where `hit` holds: the event code
        runs (one `cond`, on whether any member has an event) on the state alone and
        returns the new velocity, modes and code with the log's entry; the entry is
        written outside the `cond`. A `cond` that passed the whole carry through copied
        every array of it (the saves, each field of the event log) on each segment, at
        run time and as kernels to compile (`benchmarks/RESULTS.md`, stop 88)."""
        unchanged = lambda: (c.qd, c.mode, c.result, _log_entry(c, 0, 0, 0, 0, 0, 0, False))
        switched = lambda: self._switched(c, offset, hit)
        qd, mode, result, entry = jax.lax.cond(eqxi.unvmap_any(hit), switched, unchanged)
        kind, index, before, after, normal, tangential, logged = entry
        log = c.log.record(c.t, kind, index, before, after, normal, tangential, when=logged)
        return eqx.tree_at(lambda x: (x.qd, x.mode, x.log, x.result), c, (qd, mode, log, result))

    def _switched(self, c: _Carry, offset, hit):
        """The event at (c.t, c.q, c.qd): the law whose event value crossed zero switches
        the modes and sets the velocity (a contact law, or the friction law for the rows
        after the k contacts'); the event is recorded unless the law says it was none.
        Returns (velocity, mode, code, the log's entry with whether to record it)."""
        field, k, L = self.field, self.num_contacts, self.num_latches
        first, n_values = self._trigger(c, offset), offset.shape[0]
        n_friction = n_values - k - L
        cs = contact_state(field.system, c.t, c.q, c.qd)
        motion = _Motion(self, c.t, c.q, c.qd, cs, c.mode.latched)
        trig = jnp.arange(k) == first
        if k:
            sw = self.law.switch(trig, c.mode.engaged, c.mode.sliding, cs.g, cs.gd, motion)
        else:
            zero = jnp.zeros((0,), c.q.dtype)
            none = jnp.asarray(EventKind.NONE)
            sw = Switched(c.mode.engaged, c.qd, none, jnp.asarray(True), zero, zero)
        after = contact_state(field.system, c.t, c.q, sw.qd).gd
        # (engaged, qd, kind, solved, before, after, normal, tangential) of the event
        ev = (sw.engaged, sw.qd, sw.kind, sw.solved, entry_at(trig, cs.gd), entry_at(trig, after))
        ev = ev + (entry_at(trig, sw.normal_impulse), entry_at(trig, sw.tangential_impulse))
        latched = c.mode.latched
        sliding = jnp.where((sw.engaged & c.mode.engaged)[:, None], c.mode.sliding, 0.0)
        if L:  # a latch's engage or release value crossed
            on_latch = first >= k + n_friction
            new, l_qd, l_kind, l_before, l_after = self._latch_switch(c, cs, first - k - n_friction)
            latched = new if latched is None else jnp.where(on_latch, new, latched)
            mine = (c.mode.engaged, l_qd, l_kind, True, l_before, l_after, 0.0, 0.0)
            ev = pick(on_latch, mine, ev)
        if field.friction is not None:
            if n_friction:  # the friction law's own events
                on_friction = (first >= k) & (first < k + n_friction)
                switched = field.friction.switch(first - k, c.mode.engaged, c.mode.sliding, motion)
                f_sliding, f_qd, f_kind, f_before, f_after = switched
                sliding = jnp.where(on_friction, f_sliding, sliding)
                mine = (c.mode.engaged, f_qd, f_kind, True, f_before, f_after, 0.0, 0.0)
                ev = pick(on_friction, mine, ev)
        engaged, qd, kind, solved, before, after, normal, tangential = ev
        if field.friction is not None:
            # after a contact's event (an impact: every engaged contact took its own
            # frictional impulse; an engagement or release: the load is redistributed)
            # every engaged contact's mode follows from its slip now, like a contact that
            # has just engaged: a slip near zero sticks where the static bound allows
            # (a contact engages, and impacts, only at the contact law's own events)
            fresh = engaged & (first < k)
            moved = _Motion(self, c.t, c.q, qd, cs, latched)
            sliding, qd = field.friction.settle(engaged, sliding, fresh, moved)
        mode = jax.tree_util.tree_map(
            lambda new, old: jnp.where(hit, new, old), Mode(engaged, sliding, latched), c.mode
        )
        qd = jnp.where(hit, qd, c.qd)
        index = jnp.where(first >= k + n_friction, first - k - n_friction, first % max(k, 1))
        logged = hit & (kind != EventKind.NONE)
        result = RESULTS.where(hit & ~solved, RESULTS.contact_unsolved, c.result)
        entry = _log_entry(c, kind, index, before, after, normal, tangential, logged)
        return qd, mode, result, entry

    def _latch_switch(self, c: _Carry, cs: ContactState, j):
        r"""Latch `j`'s event: an engaged latch releases (the velocity is continuous); a
        free one engages with the perfectly inelastic impulsive projection onto every
        constraint then in force (:mod:`ukjax._latches`). Returns (latched, velocity,
        kind, $|\dot\varphi_j|$ before, after)."""
        assert c.mode.latched is not None
        mine = jnp.arange(self.num_latches) == j
        engages = ~jnp.any(mine & c.mode.latched)
        latched = jnp.where(engages, c.mode.latched | mine, c.mode.latched & ~mine)
        G = jnp.where(c.mode.engaged[:, None], cs.G, 0.0)  # cs: the contacts at (c.q, c.qd)
        stuck = c.mode.engaged & ~is_sliding(c.mode.sliding)
        grasped = self.project(c.t, c.q, c.qd, G, G @ c.qd, stuck, latched)
        qd = jnp.where(engages, grasped, c.qd)
        kind = jnp.where(engages, EventKind.LATCH, EventKind.UNLATCH)
        system = self.field.system
        speed = lambda v: norm(latch_state(system, c.t, c.q, v).phid[j])
        return latched, qd, kind, speed(c.qd), speed(qd)

    def _trigger(self, c: _Carry, offset) -> jax.Array:
        r"""The index of the event value that crossed zero at (c.t, c.q, c.qd): among the
        values at zero (within what the root find's time tolerance allows at their rate)
        and falling, the lowest; a value resting at zero (a contact touching at zero speed)
        is not falling and is not taken for the one that crossed. With one event value
        (one contact, no friction or latch values) it is that one."""
        if offset.shape[0] == 1:
            return jnp.zeros((), int)
        values_at = lambda t, y: self.field.event_values(t, y, c.mode) + offset
        y = (c.q, c.qd)
        yd = self.field(c.t, y, c.mode)
        one = jnp.ones_like(c.t)
        values, rates = jax.jvp(values_at, (c.t, y), (one, yd))
        window = 1e3 * jnp.finfo(values.dtype).eps * jnp.maximum(jnp.abs(c.t), 1.0)
        crossing = (rates < 0) & (values <= -rates * window)
        lowest = jnp.argmin(jnp.where(crossing, values, jnp.inf))
        return jnp.where(jnp.any(crossing), lowest, jnp.argmin(values))

    def _velocity_rows(self, t, q, qd, latched=None):
        r"""(M, J, c, solve): the mass matrix, the bilateral velocity rows $J\dot q = c$
        (with the `latched` latches' rows, $\dot\varphi_j = 0$) and the run's UK solve of
        M (the one entry, :class:`ukjax._dynamics.RowSolve`)."""
        system = self.field.system
        M = mass_matrix(system, t, q, qd)
        J, r = velocity_rows(system, t, q, qd)
        c = J @ qd - r
        if latched is not None:
            R, target = latch_velocity_rows(latch_state(system, t, q, qd), latched, qd)
            J, c = jnp.concatenate([J, R]), jnp.concatenate([c, target])
        return M, J, c, row_solve(system, M, self.field.uk_solver)

    def project(self, t, q, qd, G, g_target, stuck, latched=None):
        r"""The velocity nearest `qd` (mass metric) with every bilateral velocity constraint
        met, the contact rows $G\dot q^+ = $ `g_target` and, for `stuck` frictional
        contacts, $T_i\dot q^+ = w_i$ (0 unless their surface moves), and the `latched`
        latches' $\dot\varphi_j^+ = 0$
        (zero rows are ignored): the UK equation for the jump $\Delta\dot q$ with no force
        (Bajodah 2003, eqs 424-427)."""
        _, J, c, solve = self._velocity_rows(t, q, qd, latched)
        rows_, targets = [J, G], [c, g_target]
        if self.field.friction is not None:
            fs = friction_state(self.field.system, t, q, qd, stuck.shape[0])
            k, d, n = fs.T.shape
            rows_.append(jnp.where(stuck[:, None, None], fs.T, 0.0).reshape(k * d, n))
            if fs.surface is None:
                targets.append(jnp.zeros(k * d, qd.dtype))
            else:  # a stuck contact moves with its surface
                targets.append(jnp.where(stuck[:, None], fs.surface, 0.0).reshape(k * d))
        R, c = jnp.concatenate(rows_), jnp.concatenate(targets)
        return qd + solve(R, jnp.zeros_like(qd), c - R @ qd).qdd

    def impulse_rows(self, t, q, qd, latched=None) -> _ImpulseRows:
        """The rows every impulsive jump from (t, q, qd) shares (:class:`_ImpulseRows`)."""
        _, J, c, solve = self._velocity_rows(t, q, qd, latched)
        cs = contact_state(self.field.system, t, q, qd)
        fs = None
        if self.field.friction is not None:
            fs = friction_state(self.field.system, t, q, qd, cs.g.shape[0])
            fs = eqx.tree_at(lambda f: f.Tdqd, fs, fs.vt)  # stick: T dqd = -T qd-
        return _ImpulseRows(J, c, solve, cs, fs)

    def impulsive(
        self, qd, active, gd_target, shared: _ImpulseRows
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        r"""(velocity after, normal impulses (k,), > 0 pushing, friction impulses (k,): along
        the tangent row for d = 1, their magnitude for d = 2) of an impact from `qd` on the
        `active` contacts with post-impact normal speeds `gd_target`: the UK equation for
        the jump with no force, the bilateral rows kept, and the friction law's impulses
        (:meth:`ukjax.AbstractFriction.impulse`) where the system declares friction; the
        engaged latches' rows are kept like the bilateral ones (`shared`: the state's
        rows, :meth:`impulse_rows`)."""
        J, c, solve, cs, k = shared.J, shared.c, shared.solve, shared.cs, active.shape[0]
        A = jnp.concatenate([J, jnp.where(active[:, None], cs.G, 0.0)])
        b = jnp.concatenate([c - J @ qd, jnp.where(active, gd_target - cs.gd, 0.0)])
        m = J.shape[0]
        if shared.fs is None:
            terms = solve(A, jnp.zeros_like(qd), b)
            normal = multipliers(A, terms, None, self.field.uk_solver.kernels)[m : m + k]
            return qd + terms.qdd, normal, jnp.zeros_like(normal)
        assert self.field.friction is not None
        fr = self.field.friction.impulse(solve, A, b, shared.fs, active)
        d = shared.fs.T.shape[1]
        tangential = fr.tangential[:, 0] if d == 1 else norm(fr.tangential)
        return qd + fr.terms.qdd, fr.normal, tangential

    def dissipative(
        self,
        t,
        q,
        qd,
        before: ContactState,
        candidates,
        gd_target,
        qd_after,
        resting,
        impulsive,
        latched=None,
        shared: _ImpulseRows | None = None,
    ) -> DissipativeImpact:
        r"""The problem of maximal dissipation
        (:func:`ukjax._dissipative_impact.dissipative_impact`), every bilateral row and the
        `latched` latches' rows kept: where `impulsive`, the impact from `qd` (with the
        contact quantities `before` there) of the
        `candidates` with post-impact normal speeds $\ge$ `gd_target`; otherwise one level
        up, the contact forces on the `resting` contacts at velocity `qd_after` (normal
        accelerations $\ge$ the law's targets, complementary to $N \ge 0$, friction in the
        pyramid with maximal dissipation of the tangential acceleration; not solved where a
        resting contact slides: its kinetic force is fixed, and Painlevé's paradox has no
        consistent force). One trace of the problem serves both (the level is chosen by
        value). `shared`: the rows of the jumps from (t, q, qd) (:meth:`impulse_rows`),
        formed here where not given."""
        field, k = self.field, candidates.shape[0]
        system = field.system
        shared = self.impulse_rows(t, q, qd, latched) if shared is None else shared
        J, c, solve = shared.J, shared.c, shared.solve
        # the resting level: the acceleration under the bilateral rows alone, at qd_after
        _, Q = mass_and_force(system, t, q, qd_after)
        A, b = rows(system, t, q, qd_after, field.stabilization)
        if latched is not None:
            A_l, b_l = acceleration_rows(latch_state(system, t, q, qd_after), latched)
            A, b = jnp.concatenate([A, A_l]), jnp.concatenate([b, b_l])
        a = solve(A, Q, b).qdd
        cs = contact_state(system, t, q, qd_after)
        fs_after = friction_state(system, t, q, qd_after, k)
        assert field.contact is not None and field.friction is not None
        pick_ = lambda x, y: jnp.where(impulsive, x, y)
        v = pick_(qd, a)
        c = pick_(c, J @ a)  # at rest: already on the rows (no projection)
        rate = pick_(before.gd, cs.G @ a + cs.gdd0)
        target = pick_(gd_target, field.contact.target_acceleration(cs.g, cs.gd))
        # the impact's slip after is T qd+ - w (w: a moving surface's velocity), the
        # resting level's slip rate T qdd + Tdqd
        moving = jnp.zeros_like(fs_after.Tdqd) if fs_after.surface is None else -fs_after.surface
        offset = pick_(moving, fs_after.Tdqd)
        chosen = pick_(candidates, resting)
        # fs_after's rows and coefficients (functions of q) serve both levels
        out = dissipative_impact(
            solve, J, c, v, before.G, rate, fs_after, chosen, target, tangent_offset=offset
        )
        # a contact at rest that slides has its kinetic force fixed: where no normal force
        # is consistent with it (Painleve's paradox), there is no solution to offer
        slipping = resting & (norm(fs_after.vt) > field.friction.speed_tol(qd.dtype))
        return out._replace(solved=out.solved & (impulsive | ~jnp.any(slipping)))

    def _apply_impulse(self, c: _Carry, now) -> _Carry:
        """The carry after the run's next impulse where `now`: the jump with every
        bilateral constraint kept (:func:`ukjax.apply_impulse`), the engaged latches'
        rows among them (a grasp takes its share of the kick), then, for a rigid contact
        law, each contact's mode from the new velocity (:meth:`_contact_modes`): a kick
        that lifts a resting body off its support frees the contact, one that drives it
        into the support leaves the contact free and closing, and the law's impact
        follows at once (the next segment's first crossing)."""
        if self.impulses is None:
            return c
        k = jnp.minimum(c.next_impulse, self.impulses.times.shape[0] - 1)
        value = self.impulses.values[k].astype(c.q.dtype)
        if c.mode.latched is None:
            qd = impulse_jump(self.field.system, c.t, c.q, c.qd, value, self.field.uk_solver)
        else:
            _, R, target, solve = self._velocity_rows(c.t, c.q, c.qd, c.mode.latched)
            qd = c.qd + solve(R, value, target - R @ c.qd).qdd
        mode, result = c.mode, c.result
        if self.num_contacts and self.law.impulsive:
            cs = contact_state(self.field.system, c.t, c.q, qd)
            mode, qd, solved = self._contact_modes(c.t, c.q, qd, cs, c.mode.latched)
            mode = jax.tree_util.tree_map(lambda a, b: jnp.where(now, a, b), mode, c.mode)
            result = RESULTS.where(now & ~solved, RESULTS.contact_unsolved, c.result)
        qd = jnp.where(now, qd, c.qd)
        log = c.log.record(c.t, EventKind.IMPULSE, -1, jnp.nan, jnp.nan, when=now)
        nxt = c.next_impulse + now.astype(c.next_impulse.dtype)
        return eqx.tree_at(
            lambda x: (x.qd, x.mode, x.result, x.log, x.next_impulse),
            c,
            (qd, mode, result, log, nxt),
        )

    def _contact_modes(self, t, q, qd, cs: ContactState, latched, sliding=None):
        """(mode, velocity, solved): the contacts' modes at a state where none is known
        (the run's start, after an impulse), as the law starts them: its candidates
        (:meth:`ukjax.AbstractContact.initial_mode`) engaged where their forces push
        (:meth:`ukjax.AbstractContact.initial_engaged`), and, with friction, the engaged
        contacts' slip modes from their tangential speeds (stuck ones held; `sliding`:
        those modes if the caller has them)."""
        field, law = self.field, self.law
        k = cs.g.shape[0]
        engaged = law.initial_mode(cs.g, cs.gd)
        if sliding is None:
            sliding = jnp.zeros((k, tangent_dim(field.system, t, q)), q.dtype)
            if field.friction is not None:
                fs = friction_state(field.system, t, q, qd, k)
                sliding = sliding_from_speed(field.friction, fs)
        motion = _Motion(self, t, q, qd, cs, latched)
        solved = jnp.asarray(True)
        if k:
            engaged, solved = law.initial_engaged(engaged, sliding, motion)
        if field.friction is not None:
            sliding, qd = field.friction.settle(engaged, sliding, engaged, motion)
        sliding = jnp.where(engaged[:, None], sliding, 0.0)
        return Mode(engaged, sliding, latched), qd, solved

    # ---- the run ------------------------------------------------------------------------------
    def initial_mode(self, t, q, qd):
        """(mode, qd, refusal code, smallest g) at the start: the law's engaged contacts
        (rigid ones only if they push), their friction modes (stuck contacts held at zero
        tangential velocity), and whether the state or the friction data are refused."""
        field = self.field
        law, cs = self.law, contact_state(field.system, t, q, qd)
        k = cs.g.shape[0]
        latched = None
        if self.num_latches:  # latches engaged at the start grasp there (inelastic)
            latched = initially_latched(field.system, t, q, qd, self.num_latches)
            none = jnp.zeros(k, bool)
            grasped = self.project(t, q, qd, cs.G * 0.0, cs.gd * 0.0, none, latched)
            qd = jnp.where(jnp.any(latched), grasped, qd)
            cs = contact_state(field.system, t, q, qd)
        sliding = jnp.zeros((k, tangent_dim(field.system, t, q)), q.dtype)
        code = RESULTS.where(
            jnp.any(law.penetrating(cs.g)), RESULTS.initial_penetration, RESULTS.successful
        )
        if field.friction is not None:
            fs = friction_state(field.system, t, q, qd, k)
            sliding = sliding_from_speed(field.friction, fs)
            bad = jnp.any(invalid_coefficients(fs))
            code = RESULTS.where(bad, RESULTS.invalid_friction, code)
        mode, qd, solved = self._contact_modes(t, q, qd, cs, latched, sliding)
        code = RESULTS.where(solved, code, RESULTS.contact_unsolved)
        return mode, qd, code, jnp.min(cs.g, initial=jnp.inf)

    def integrate(self, q0, qd0, ts, initial: InitialCheck) -> Solution:
        mode, qd0, contact_code, g_min = self.at_events().initial_mode(ts[0], q0, qd0)
        code = RESULTS.where(initial.code == RESULTS.successful, contact_code, initial.code)
        refused = code != RESULTS.successful
        q0 = refuse_initial(self.throw, q0, code, smallest_g=g_min, **initial.values)
        nan = jnp.full((ts.shape[0], q0.shape[0]), jnp.nan, q0.dtype)
        saved_mode = jax.tree_util.tree_map(
            lambda x: jnp.zeros((ts.shape[0],) + x.shape, x.dtype), mode
        )
        carry = _Carry(
            t=ts[0],
            q=q0,
            qd=qd0,
            mode=mode,
            next_impulse=jnp.zeros((), jnp.int32),
            saved_q=nan,
            saved_qd=nan,
            saved_mode=saved_mode,
            log=EventLog.empty(self.max_events, q0.dtype),
            events=jnp.zeros((), jnp.int32),
            result=code,
            done=refused,
            steps=jnp.zeros((), jnp.int32),
        )
        n_impulses = 0 if self.impulses is None else self.impulses.times.shape[0]
        carry = batched_like(carry, (self, q0, qd0, ts))  # each member ends on its own
        bound = self.max_events + n_impulses + 2
        kind = _loop_kind(self.stepping.adjoint)
        if kind == "replayed":  # reverse mode: the segments replayed (ukjax._segment_adjoint)
            c = replayed_while(_running, _segment_step, (self, ts), carry, bound, _recorded)
        else:  # forward mode: a plain loop; both (DirectAdjoint: second order): a bounded one
            c = eqxi.while_loop(
                _running, lambda c: self._segment(c, ts), carry, max_steps=bound, kind=kind
            )
        friction = self.field.friction
        return Solution(
            ts=ts,
            q=c.saved_q,
            qd=c.saved_qd,
            result=c.result,
            stats={"num_steps": c.steps, "num_events": c.log.count},
            events=c.log,
            engaged=c.saved_mode.engaged,
            sliding=None if friction is None else friction.recorded(c.saved_mode.sliding),
            latched=c.saved_mode.latched,
        )

    def transformation_hint(self, error: TypeError) -> str | None:
        """With the default adjoint the segment loop is a custom VJP (reverse mode only):
        JAX's refusal of forward mode (`jax.jvp`, `jax.jacfwd`, `jax.hessian`) becomes a
        message naming the adjoints that take it."""
        if _loop_kind(self.stepping.adjoint) != "replayed" or _FORWARD_REFUSED not in str(error):
            return None
        return (
            "ukjax: forward-mode derivatives (jax.jvp, jax.jacfwd, jax.hessian) of a run "
            "with contacts, impulses or latches need simulate(..., "
            "adjoint=diffrax.ForwardMode()) (forward mode only) or "
            "adjoint=diffrax.DirectAdjoint() (both modes, a bounded loop: slower). The "
            "default differentiates such a run in reverse mode only (jax.grad, jax.vjp, "
            "jax.jacrev), replaying its segments."
        )

    def refuse(self, t0, q0) -> None:
        """Plain ValueErrors for a rigid contact violated at t0 (the system starts inside an
        obstacle) and for invalid friction coefficients."""
        law, system = self.law, self.field.system
        if self.num_contacts:
            g = gap_function(system, q0.dtype)(t0, q0)
            bad = np.flatnonzero(np.asarray(law.penetrating(g)))
            g = np.asarray(g)
            if bad.size:
                raise ValueError(
                    f"The initial state violates unilateral constraint(s) {bad.tolist()} of "
                    f"{type(system).__name__}: g = {g[bad].tolist()} < 0 (the system starts "
                    "inside an obstacle). Move q0 to the admissible side g >= 0."
                )
        if self.field.friction is None:
            return
        fs = friction_state(system, t0, q0, jnp.zeros_like(q0), self.num_contacts)
        mu_s, mu_k = np.asarray(fs.mu_s), np.asarray(fs.mu_k)
        bad = np.flatnonzero(np.asarray(invalid_coefficients(fs)))
        if bad.size:
            raise ValueError(
                f"{type(system).__name__}.friction: contact(s) {bad.tolist()} have "
                f"mu_static = {mu_s[bad].tolist()} and mu_kinetic = {mu_k[bad].tolist()}; "
                "Coulomb friction needs 0 <= mu_kinetic <= mu_static."
            )


_FORWARD_REFUSED = "forward-mode autodiff (jvp) to a custom_vjp"  # JAX's TypeError says


def _loop_kind(adjoint: diffrax.AbstractAdjoint) -> Literal["lax", "replayed", "bounded"]:
    """The loop over the segments that `adjoint` can differentiate: a plain
    `eqxi.while_loop` (forward mode), a bounded one (forward and reverse), or, for
    reverse mode, :func:`ukjax._segment_adjoint.replayed_while`."""
    if isinstance(adjoint, diffrax.ForwardMode):
        return "lax"
    return "bounded" if isinstance(adjoint, diffrax.DirectAdjoint) else "replayed"


def _running(c: _Carry) -> jax.Array:
    return ~c.done


def _segment_step(inputs, c: _Carry) -> _Carry:
    driver, ts = inputs
    return driver._segment(c, ts)


def _recorded(c: _Carry) -> _Carry:
    """Which leaves of the carry the replay records: not the saves or the event log's
    entries (its count, yes), which the segments only write into."""
    no = lambda tree: jax.tree_util.tree_map(lambda _: False, tree)
    spec = jax.tree_util.tree_map(lambda _: True, c)
    log = eqx.tree_at(lambda log: log.count, no(c.log), True)
    return eqx.tree_at(
        lambda s: (s.saved_q, s.saved_qd, s.saved_mode, s.log),
        spec,
        (False, False, no(c.saved_mode), log),
    )
