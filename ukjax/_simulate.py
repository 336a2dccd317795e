r"""Time integration of a constrained system with diffrax."""

from __future__ import annotations

import dataclasses
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer
from jaxtyping import ArrayLike, Float

from ._adjoint import default_adjoint, replays
from ._contact import AbstractContact, Impact, check_contact
from ._errors import code_error_if
from ._events import EventLog
from ._field import Field
from ._friction import (
    AbstractFriction,
    check_friction,
    declares_friction,
    default_friction,
    friction_state,
    invalid_coefficients,
)
from ._hybrid import HybridIntegration
from ._impulse import Impulses
from ._initial import AbstractInitialConditions, InitialCheck, check_initial_policy
from ._integrators import default_controller, default_solver
from ._latches import num_latches
from ._precision import full_precision
from ._probe import probe_indexing
from ._results import RESULTS, code_of, name_of
from ._stabilization import AbstractStabilization, check_stabilization
from ._stage_loop import StageLoop, unrollable
from ._stepping import Stepping
from ._system import System, check_state, floatify
from ._uk import default_consistency_tol
from ._uk_solvers import AbstractUKSolver, check_uk_solver
from ._xla import is_concrete, jit


class Solution(eqx.Module):
    """The result of :func:`simulate`.

    - `ts`: (T,) save times.
    - `q`: (T, n) generalized coordinates at `ts`.
    - `qd`: (T, n) generalized velocities at `ts`.
    - `result`: a :class:`ukjax.RESULTS` code (`ukjax.RESULTS.successful` on success).
      With `throw=False` a failed run returns its code here; the saves from the failure on
      are NaN (those before it are kept), so no value is mistaken for data.
    - `stats`: diffrax statistics (`num_steps`, `num_accepted_steps`, ...); for a hybrid
      run, `num_steps` summed over the segments.
    - `events`: for a run with contacts or impulses, a :class:`ukjax.EventLog` (time,
      kind, contact, normal speeds before/after, count); `None` otherwise.
    - `engaged`: for a run with contacts, (T, k) booleans: which contacts were engaged
      (a persistent or compliant contact row in the UK equation) at each save.
    - `sliding`: for a run with :class:`ukjax.Coulomb` friction, (T, k) ints at each
      save: 0 stuck (or not in contact), +1 / -1 sliding along / against the contact's
      tangent row (in 3-D: 1 sliding); `None` otherwise.
    - `latched`: for a system with latches (:meth:`ukjax.System.latches`), (T, L)
      booleans: which latches were engaged at each save; `None` otherwise.

    Under `jax.vmap` every field gains a leading batch axis. :attr:`status` names the
    result (``RESULTS`` prints success as ``RESULTS<>``: diffrax's message for it is
    empty).

    Example:
        >>> import jax, jax.numpy as jnp, ukjax
        >>> from ukjax.systems import CartesianPendulum
        >>> sol = ukjax.simulate(CartesianPendulum(), jnp.array([1.0, 0.0]), jnp.zeros(2),
        ...                      jnp.linspace(0.0, 1.0, 3))
        >>> sol.status
        'successful'
    """

    ts: jax.Array
    q: jax.Array
    qd: jax.Array
    result: RESULTS
    stats: dict[str, Any]
    events: EventLog | None = None
    engaged: jax.Array | None = None
    sliding: jax.Array | None = None
    latched: jax.Array | None = None

    @property
    def status(self) -> str | np.ndarray:
        """The name of `result` (``'successful'``, ``'max_steps_reached'``,
        ``'mass_matrix_not_spd'``, ...): a str for one run, an array of names for a
        batch. Read on the host (not under `jit`)."""
        codes = np.asarray(code_of(self.result))
        names = [name_of(int(c)) for c in codes.ravel()]
        if codes.ndim == 0:
            return names[0]
        return np.array(names, dtype=object).reshape(codes.shape)


class _Integration(eqx.Module):
    """Everything `diffeqsolve` needs besides the initial state and the save times."""

    field: Field
    initial: AbstractInitialConditions
    stepping: Stepping
    progress_meter: diffrax.AbstractProgressMeter

    @property
    def throw(self) -> bool:
        return self.field.throw

    def _event(self):
        """Stops a run whose initial state was refused or whose accepted state fails a UK
        check: the failure becomes the run's result code (which `throw=True` raises after
        the solve). None where nothing is to be watched: `throw=True` (whose refused
        initial state raised before the solve) with the checks off or in the field."""
        by_event = self.field.check and not self.field.per_stage
        if self.throw and not by_event:
            return None
        refused = lambda t, y, args, **kw: args
        failed = lambda t, y, args, **kw: self.field.failures(t, y).any()
        return diffrax.Event((refused, failed) if by_event else (refused,))

    def _result(self, sol, initial: InitialCheck, span) -> RESULTS:
        result = self.stepping.code(sol)
        if sol.event_mask is None:
            return result
        t_end, y_end = sol.ts[1][-1], sol.ys[1]  # pyright: ignore[reportOptionalSubscript]
        final = jax.tree_util.tree_map(lambda x: x[-1], y_end)
        result = RESULTS.where(sol.event_mask[0], initial.code, result)
        if len(sol.event_mask) < 2:
            return result
        fired = sol.event_mask[1]
        stalled = (result != RESULTS.successful) & ~sol.event_mask[0] & ~fired
        named, failures = self.field.end_code(t_end, final, span, fired, stalled)
        result = RESULTS.where(fired | (named != RESULTS.successful), named, result)
        if self.throw:  # the numbers, printed before the error raised on the result
            result = self.field.report(failures, named != RESULTS.successful, result)
        return result

    def _saveat(self, ts, record: bool) -> diffrax.SaveAt:
        """Saves at `ts` (through the stabilisation's save function); with the run-time
        event, also the final state (it names the failure the event caught); when
        `record`, also every accepted step (for :func:`ukjax._adjoint.replay_solve`).
        Without the last two, a plain SaveAt: diffrax's BacksolveAdjoint refuses
        SaveAt(subs=...)."""
        fn = self.stepping.save_fn(self.field)
        extra = [] if self._event() is None else [diffrax.SubSaveAt(t1=True)]
        extra += [diffrax.SubSaveAt(steps=True)] if record else []
        if not extra:
            return diffrax.SaveAt(ts=ts) if fn is None else diffrax.SaveAt(ts=ts, fn=fn)
        return diffrax.SaveAt(subs=[self.stepping.saves(self.field, ts), *extra])

    def _replay_solver(self) -> diffrax.AbstractSolver:
        """The solver :meth:`step` replays: the run's method in a :class:`ukjax.StageLoop`
        where it can be (an explicit Runge-Kutta method of one tableau), the same method
        and dense output. Differentiating diffrax's own stage loop (a checkpointed while
        loop) evaluates every stage's vector field again in the backward pass, one step
        at a time, before transposing it; the StageLoop's `fori_loop` keeps the stages'
        residuals from the batched replay instead, which lowered the cost of a gradient
        relative to the forward run on every chain of `benchmarks/gradients.py`
        (`benchmarks/RESULTS.md`, gradients section; :class:`ukjax.Unrolled` gained less
        and compiled twice as long)."""
        solver = self.stepping.solver
        return self.stepping.wrap(self.field, StageLoop(solver) if unrollable(solver) else solver)

    def forward(self, y0, ts, args, record: bool):
        """The diffrax solve from `y0` at `ts[0]`, saved at `ts`; with `record`, also the
        accepted steps' end times and states (see :class:`ukjax.ReplayAdjoint`)."""
        sol = self.stepping.solve(
            self.field,
            ts[0],
            ts[-1],
            y0,
            args,
            self._saveat(ts, record),
            self._event(),
            adjoint=diffrax.RecursiveCheckpointAdjoint() if record else None,
            progress_meter=self.progress_meter,
        )
        if not record:
            return sol, None
        *ts_, steps_t = sol.ts  # pyright: ignore[reportGeneralTypeIssues]
        *ys_, steps_y = sol.ys  # pyright: ignore[reportGeneralTypeIssues]
        one = len(ts_) == 1
        sol = eqx.tree_at(
            lambda s: (s.ts, s.ys), sol, (ts_[0] if one else ts_, ys_[0] if one else ys_)
        )
        return sol, (steps_t, steps_y)

    def step(self, t0, t1, y0, args):
        """One step of the run's solver from (t0, y0) to t1, its first stage evaluated at
        y0 (`made_jump`): the new state and the step's dense output. The UK checks are
        off: this replays a step the forward run took (and checked)."""
        terms = diffrax.ODETerm(dataclasses.replace(self.field, check=False))
        solver = self._replay_solver()
        state = solver.init(terms, t0, t1, y0, args)
        y1, _, dense, _, _ = solver.step(terms, t0, t1, y0, args, state, True)
        return y1, dense

    def save(self, t0, t1, dense, t, args):
        """The value saved at t in [t0, t1] from the step's dense output."""
        y = self._replay_solver().interpolation_cls(t0=t0, t1=t1, **dense).evaluate(t)
        fn = self.stepping.save_fn(self.field)
        return y if fn is None else fn(t, y, args)

    def __call__(self, q0, qd0, ts) -> Solution:
        system = self.field.system
        q0, qd0, initial = self.initial.apply(system, ts[0], q0, qd0)
        refused = initial.code != RESULTS.successful
        if self.throw and not initial.checked:
            q0 = code_error_if(
                q0, refused, initial.code, "ukjax: initial state refused", **initial.values
            )
        stepping = self.stepping
        if replays(stepping.adjoint, stepping.solver, stepping.max_steps):
            sol = stepping.adjoint.solve(self, (q0, qd0), ts, refused)  # pyright: ignore[reportAttributeAccessIssue]
        else:
            sol = self.forward((q0, qd0), ts, refused, False)[0]
        event = self._event()
        result = self._result(sol, initial, jnp.abs(ts[-1] - ts[0]))
        if event is None:
            saved_ts, saved = sol.ts, sol.ys
        else:
            saved_ts, saved = sol.ts[0], sol.ys[0]  # pyright: ignore[reportOptionalSubscript]
        reached = jnp.isfinite(saved_ts)[:, None]  # pyright: ignore[reportArgumentType]
        q, qd = (jnp.where(reached, x, jnp.nan) for x in saved)  # pyright: ignore[reportOptionalIterable]
        if self.throw:
            q = result.error_if(q, result != RESULTS.successful)
        return Solution(ts=ts, q=q, qd=qd, result=result, stats=sol.stats)


@jit(batched=False)
def _integrate(integration: _Integration, q0, qd0, ts) -> Solution:
    return integration(q0, qd0, ts)


MAX_STEPS = 100_000  # simulate's default bound on the number of steps


def default_tolerances(dtype) -> tuple[float, float]:
    """(rtol, atol) of the default controller: 1e-12 in float64, 1e-6 in float32."""
    return (1e-12, 1e-12) if jnp.finfo(dtype).bits >= 64 else (1e-6, 1e-6)


def _check_tolerances(rtol, atol) -> None:
    """ValueError unless rtol and atol are finite and >= 0, and not both 0 (values known
    at trace time only: a traced tolerance is not checked)."""
    known = {}
    for name, value in (("rtol", rtol), ("atol", atol)):
        if isinstance(value, Tracer):
            continue
        try:
            v = float(np.asarray(value))
        except (TypeError, ValueError):
            raise ValueError(f"simulate: {name} must be a real number; got {value!r}.") from None
        if not (np.isfinite(v) and v >= 0.0):
            raise ValueError(f"simulate: {name} must be finite and >= 0; got {value!r}.")
        known[name] = v
    if known.get("rtol") == 0.0 and known.get("atol") == 0.0:
        raise ValueError("simulate: rtol and atol are both 0: no step would be accepted.")


def _controller(stepsize_controller, rtol, atol, dt0, dtype):
    if stepsize_controller is None:
        rtol0, atol0 = default_tolerances(dtype)
        rtol, atol = rtol0 if rtol is None else rtol, atol0 if atol is None else atol
        _check_tolerances(rtol, atol)
        return default_controller(rtol, atol)
    if rtol is not None or atol is not None:
        raise ValueError("Give either rtol/atol or stepsize_controller, not both.")
    if isinstance(stepsize_controller, diffrax.ConstantStepSize) and dt0 is None:
        raise ValueError("A ConstantStepSize controller needs a step: pass dt0=...")
    return stepsize_controller


def _consistency_tol(tol, controller, uk_solver: AbstractUKSolver, dtype) -> float | None:
    """The consistency tolerance of a run: the given one, else the UK default raised to
    sqrt(rtol) (drift off redundant constraints grows with the integration tolerance)."""
    rtol = getattr(controller, "rtol", None)
    if tol is not None or not isinstance(rtol, (int, float)):
        return tol
    return max(default_consistency_tol(dtype, uk_solver.consistency_floor(dtype)), rtol**0.5)


_TS_MESSAGE = "ukjax: ts must be finite and strictly increasing (save times in order)."


def _check_ts(ts, dtype) -> jax.Array:
    """`ts` as a 1-D array of the state's dtype: a ValueError when its values are known
    and not finite and strictly increasing; under a trace the same check at run time
    (an `equinox.error_if` with the same message, under `vmap` for any member)."""
    ts = jnp.asarray(ts)
    if ts.ndim != 1 or ts.shape[0] < 2:
        raise ValueError(f"ts must be a 1-D array of at least 2 save times; got shape {ts.shape}.")
    if is_concrete(ts):
        values = np.asarray(ts)
        if not (np.all(np.isfinite(values)) and np.all(np.diff(values) > 0)):
            raise ValueError(_TS_MESSAGE)
        return ts.astype(dtype)
    ts = ts.astype(dtype)
    bad = ~(jnp.all(jnp.isfinite(ts)) & jnp.all(ts[1:] > ts[:-1]))
    return eqx.error_if(ts, bad, _TS_MESSAGE)


@full_precision
def simulate(
    system: System,
    q0: Float[ArrayLike, " n"],
    qd0: Float[ArrayLike, " n"],
    ts: Float[ArrayLike, " T"],
    *,
    solver: diffrax.AbstractSolver | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    dt0: float | None = None,
    adjoint: diffrax.AbstractAdjoint | None = None,
    max_steps: int | None = MAX_STEPS,
    stabilization: AbstractStabilization | None = None,
    initial_conditions: AbstractInitialConditions | None = None,
    uk_solver: AbstractUKSolver | None = None,
    check: bool = True,
    consistency_tol: float | None = None,
    throw: bool = True,
    progress_meter: diffrax.AbstractProgressMeter | None = None,
    contact: AbstractContact | None = None,
    impulses: Impulses | None = None,
    max_events: int = 256,
    friction: AbstractFriction | None = None,
) -> Solution:
    r"""Integrate a constrained system from $(q_0, \dot q_0)$ at `ts[0]` and save at `ts`.

    The state $(q, \dot q)$ obeys $\dot q = \dot q$, $\ddot q = $
    :func:`ukjax.acceleration`; integration is by `diffrax.diffeqsolve`.

    **Arguments:**

    - `system`: a :class:`ukjax.System`.
    - `q0`, `qd0`: (n,) initial coordinates and velocities.
    - `ts`: (T,) increasing save times, T >= 2; integration runs from `ts[0]` to `ts[-1]`.
    - `solver`: a diffrax solver; default `diffrax.Dopri8()` (8th order, adaptive).
    - `rtol`, `atol`: tolerances of the default PID step-size controller; default 1e-12
      in float64 and 1e-6 in float32.
    - `stepsize_controller`: any diffrax controller (e.g. `diffrax.ConstantStepSize()`
      with `dt0`); overrides `rtol`/`atol`.
    - `dt0`: initial (or fixed) step; default chosen by the controller.
    - `adjoint`: how derivatives are taken. Default: :class:`ukjax.ReplayAdjoint`
      (the tangent-linear recursion of the accepted steps as a `jax.custom_jvp`: forward
      mode, reverse mode as its transpose and second derivatives, in any order with
      `jax.jit` and `jax.vmap`) when the recorded states fit in 64 MiB per trajectory
      (`max_steps` x state size), else `diffrax.RecursiveCheckpointAdjoint()` (reverse
      mode only). Hybrid runs (contacts, impulses) differentiate in reverse mode by
      default; forward mode there needs `adjoint=diffrax.ForwardMode()`.
      Reverse mode through it is the batched backward replay of
      :class:`ukjax.ReverseReplayAdjoint` (which alone refuses forward mode). Any diffrax
      adjoint may be given.
    - `max_steps`: bound on the number of steps (default 100 000).
    - `stabilization`: a strategy. Default (`None`): for a smooth run,
      `ukjax.Projection(iterations=1, saves=False)` (one mass-metric Newton step on $q$
      and $\dot q$ after every step: the drift stays at round-off and a mechanism passes
      its singular configurations on its branch, IFToMM benchmark A02; nothing to do for
      systems without position or velocity constraints), except with
      `initial_conditions=ukjax.IgnoreInitial()` and in hybrid runs (contacts, impulses),
      which integrate the plain UK equation. Others: `ukjax.NoStabilization()` (plain UK,
      constraints enforced at the acceleration level only), `ukjax.Baumgarte(alpha,
      beta)` (feedback on the constraint residuals, differentiable in the gains),
      `ukjax.Projection()` (two Newton steps, and the saves projected too).
    - `initial_conditions`: a strategy: `ukjax.CheckInitial(tol=None)` (default: refuse
      initial conditions that violate the position/velocity-level constraints, stating the
      residuals), `ukjax.ProjectInitial()` (move them to the nearest consistent state in
      the mass metric, see :func:`ukjax.project_initial_conditions`) or
      `ukjax.IgnoreInitial()`.
    - `uk_solver`, `check`, `consistency_tol`: as in :func:`ukjax.udwadia_kalaba`; the
      default `consistency_tol` is raised to $\sqrt{\mathrm{rtol}}$ when that is larger
      (drift off redundant constraints grows with the integration tolerance). The checks
      run at every right-hand-side evaluation of a single trajectory with `throw=True`
      (raising from inside the solve), and at every accepted step otherwise (under
      `jax.vmap`, with `throw=False`): the run stops at the first state that fails, and
      `throw=True` raises its code after the solve.
    - `throw`: raise an `equinox.EquinoxRuntimeError` whose message names the failure
      and the fix if the run fails (default); `False`: return the code in
      `solution.result` instead (a :class:`ukjax.RESULTS` item), with NaN in the saves from
      the failure on. Under `jax.vmap` each member gets its own code and the others are
      unaffected. With an adaptive controller a run whose step size collapses to the
      round-off of $t$ (every step ahead rejected) stops there, with the code of the check
      that fails just ahead, else `step_size_collapsed`.
    - `progress_meter`: e.g. `diffrax.TqdmProgressMeter()` for a progress bar (smooth
      runs only).
    - `contact`: the law of the system's unilateral constraints `System.unilateral`
      (:class:`ukjax.Impact`, :class:`ukjax.ContactDynamics`, :class:`ukjax.HuntCrossley`);
      default `ukjax.Impact()` (rigid, elastic) when the system declares any.
    - `impulses`: :class:`ukjax.Impulses` applied at given times (every bilateral
      constraint kept, :func:`ukjax.apply_impulse`).
    - `max_events`: size of the event log of a hybrid run (contacts or impulses); a run
      that needs more ends with `ukjax.RESULTS.max_events_reached`. `max_steps` then
      bounds each smooth segment between events.
    - `friction`: the law of the Coulomb friction that the system declares with
      `System.friction` on its unilateral contacts: :class:`ukjax.Coulomb` (exact
      stick-slip, event-driven; the default when the system declares friction) or
      :class:`ukjax.VelocityTolerance` (Bajodah 2003's velocity-tolerance rule).

    With contacts or impulses the run is hybrid (:mod:`ukjax._hybrid`): smooth segments
    between events located by root finding, in time order, each batch member with its own
    events under `jax.vmap`; `solution.events` records them. Saves at `ts` are
    right-continuous (a save at an impact time holds the post-impact velocity).

    **Returns:** a :class:`ukjax.Solution` with `ts`, `q` (T, n), `qd` (T, n).

    Works under `jax.jit`, `jax.vmap` (over `q0`, `qd0` or a batched system built with
    `equinox.filter_vmap`), `jax.grad`, `jax.jacfwd`, `jax.jvp` and `jax.hessian` (with
    respect to the system's fields and the initial state), composed in any order: the
    program depends on the arguments only, never on how the call is transformed. For a
    wide `jax.vmap` of runs, :func:`ukjax.sweep` (or a batch form of the solver that it
    passes itself, `solver=ukjax.StageLoop(diffrax.Dopri8())` or
    `ukjax.Unrolled(diffrax.Tsit5())`, with `throw=False`) runs faster.

    Example:
        >>> import jax, jax.numpy as jnp, ukjax
        >>> jax.config.update("jax_enable_x64", True)
        >>> from ukjax.systems import CartesianPendulum
        >>> pend = CartesianPendulum(length=1.0, g=9.81)
        >>> ts = jnp.linspace(0.0, 2.0, 5)
        >>> sol = ukjax.simulate(pend, jnp.array([1.0, 0.0]), jnp.zeros(2), ts)
        >>> sol.q.shape
        (5, 2)
        >>> float(jnp.max(jnp.abs(jnp.sum(sol.q**2, axis=1) - 1.0))) < 1e-8
        True
    """
    if not isinstance(system, System):
        raise TypeError(f"system must be a ukjax.System; got {type(system).__name__}.")
    if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
        raise ValueError(f"max_steps must be a positive integer (or None); got {max_steps!r}.")
    q0, qd0 = check_state(q0, qd0, system)
    ts = _check_ts(ts, q0.dtype)
    system = floatify(system)
    initial = given_initial = check_initial_policy(initial_conditions)
    # The first save time; from NumPy when concrete (an eager jax indexing operation is
    # an XLA compilation), as a 0-d array (traced, not static, under jit).
    t0 = np.asarray(ts)[0].reshape(()) if is_concrete(ts) else ts[0]
    if is_concrete(system, q0, qd0):
        probe_indexing(system, t0, q0, qd0)
    if throw and is_concrete(system, q0, qd0, ts):  # a plain ValueError with the residuals
        initial, q0, qd0 = initial.apply_eagerly(system, t0, q0, qd0)
    uk_solver = check_uk_solver(uk_solver)
    controller = _controller(stepsize_controller, rtol, atol, dt0, q0.dtype)
    field = Field(
        system,
        floatify(check_stabilization(stabilization)),
        uk_solver,
        check=check,
        consistency_tol=_consistency_tol(consistency_tol, controller, uk_solver, q0.dtype),
        throw=throw,
    )
    stepping = Stepping(
        solver=default_solver() if solver is None else solver,
        stepsize_controller=controller,
        dt0=dt0,
        adjoint=_adjoint(adjoint, max_steps, (q0, qd0)),
        max_steps=max_steps,
    )
    settings: dict[str, Any] = dict(initial=initial, stepping=stepping)
    hybrid = _hybrid_integration(field, q0, ts, contact, impulses, max_events, friction, settings)
    if hybrid is not None:  # contacts or impulses: the event-driven driver (ukjax._hybrid)
        if throw and is_concrete(system, q0, ts):
            _refuse_penetration(hybrid, ts[0], q0)
            _refuse_friction(hybrid, ts[0], q0)
        return _integrate_hybrid(hybrid, q0, qd0, ts)
    if stabilization is None:
        field = eqx.tree_at(lambda f: f.stabilization, field, given_initial.default_stabilization())
    field.stabilization.check_adjoint(stepping.adjoint)
    integration = _Integration(
        field=_place_checks(field, stepping.adjoint),
        progress_meter=diffrax.NoProgressMeter() if progress_meter is None else progress_meter,
        **settings,
    )
    return _integrate(integration, q0, qd0, ts)


def _place_checks(field: Field, adjoint) -> Field:
    """Where a smooth run's checks go, decided by its arguments alone (one program however
    the run is transformed; the solver runs as given, and a wide `jax.vmap` runs faster
    with the batch forms :func:`ukjax.sweep` passes itself, `ukjax.StageLoop` and
    `ukjax.Unrolled`). The field with its checks at every stage, raising from inside the solve
    (`throw=True`, and the adjoints that refuse events, `BacksolveAdjoint` and
    `ImplicitAdjoint`, which can raise but not return a code: `throw=False` is refused
    for them), or in the run's failure event, which stops the run at the first accepted
    state that fails and returns its code (`throw=False`: each `vmap` member its own)."""
    refuses = isinstance(adjoint, (diffrax.BacksolveAdjoint, diffrax.ImplicitAdjoint))
    if refuses and not field.throw:
        raise ValueError(
            f"adjoint={type(adjoint).__name__}() cannot return a failure code (diffrax's "
            "adjoint refuses the solve's events): use throw=True, or another adjoint "
            "(the default, or diffrax.RecursiveCheckpointAdjoint())."
        )
    return dataclasses.replace(field, per_stage=refuses or field.throw)


def _adjoint(adjoint, max_steps, y0) -> diffrax.AbstractAdjoint:
    """The run's adjoint: the given one, else :func:`ukjax._adjoint.default_adjoint`."""
    return default_adjoint(max_steps, y0) if adjoint is None else adjoint


def _friction_law(system: System, friction, has_contacts: bool, t0, q0) -> AbstractFriction | None:
    name = type(system).__name__
    declares = declares_friction(system, t0, q0)
    if friction is not None and not declares:
        raise ValueError(
            f"friction= was given but {name} declares no friction: define friction(self, t, q) "
            "returning (T, mu_static, mu_kinetic) for its unilateral contacts."
        )
    if declares and not has_contacts:
        raise ValueError(
            f"{name} declares friction but no unilateral constraints: friction acts on "
            "contacts, so define unilateral(self, t, q) too (one tangent row per contact)."
        )
    law = default_friction(friction, declares)
    return None if law is None else floatify(check_friction(law))


def _hybrid_integration(
    field: Field, q0, ts, contact, impulses, max_events, friction, settings
) -> HybridIntegration | None:
    """The hybrid integration, or None when the run has neither contacts nor impulses."""
    system = field.system
    t0 = jax.ShapeDtypeStruct((), ts.dtype)  # (ts[0] on a concrete ts is an eager op)
    out = jax.eval_shape(lambda t, q: system.unilateral(t, q), t0, q0)
    if out is None and contact is not None:
        raise ValueError(
            f"contact= was given but {type(system).__name__} declares no unilateral "
            "constraints: define unilateral(self, t, q) returning g (admissible where g >= 0)."
        )
    friction_law = _friction_law(system, friction, out is not None, t0, q0)
    latches = num_latches(system, t0, q0)
    if out is None and impulses is None and not latches:
        return None
    if not isinstance(max_events, int) or max_events < 1:
        raise ValueError(f"max_events must be a positive integer; got {max_events!r}.")
    if out is not None and len(out.shape) != 1:
        raise ValueError(
            f"{type(system).__name__}.unilateral must return a 1-D array; got shape {out.shape}."
        )
    if impulses is not None:
        if not isinstance(impulses, Impulses):
            raise TypeError(f"impulses must be a ukjax.Impulses; got {impulses!r}.")
        if impulses.values.shape[1] != q0.shape[0]:
            raise ValueError(
                f"impulses.values must have shape (K, {q0.shape[0]}); got {impulses.values.shape}."
            )
    law = floatify(check_contact(Impact() if contact is None else contact))
    # the checks of a run with contacts: at every stage with throw=True, else on each
    # segment's end state (HybridIntegration._segment_result)
    hybrid_field = dataclasses.replace(field, per_stage=True, contact=law, friction=friction_law)
    return HybridIntegration(
        field=hybrid_field,
        impulses=impulses,
        max_events=max_events,
        num_contacts=0 if out is None else out.shape[0],
        num_latches=latches,
        **settings,
    )


def _refuse_penetration(hybrid: HybridIntegration, t0, q0) -> None:
    """A plain ValueError (throw=True, concrete inputs) for a rigid contact violated at t0."""
    law, system = hybrid.law, hybrid.field.system
    if not hybrid.num_contacts:
        return
    g = jnp.asarray(system.unilateral(t0, q0), q0.dtype)
    bad = np.flatnonzero(np.asarray(law.penetrating(g)))
    g = np.asarray(g)
    if bad.size:
        raise ValueError(
            f"The initial state violates unilateral constraint(s) {bad.tolist()} of "
            f"{type(system).__name__}: g = {g[bad].tolist()} < 0 (the system starts inside an "
            "obstacle). Move q0 to the admissible side g >= 0."
        )


def _refuse_friction(hybrid: HybridIntegration, t0, q0) -> None:
    """A plain ValueError (throw=True, concrete inputs) for invalid friction coefficients."""
    if hybrid.field.friction is None:
        return
    fs = friction_state(hybrid.field.system, t0, q0, jnp.zeros_like(q0), hybrid.num_contacts)
    mu_s, mu_k = np.asarray(fs.mu_s), np.asarray(fs.mu_k)
    bad = np.flatnonzero(np.asarray(invalid_coefficients(fs)))
    if bad.size:
        raise ValueError(
            f"{type(hybrid.field.system).__name__}.friction: contact(s) {bad.tolist()} have "
            f"mu_static = {mu_s[bad].tolist()} and mu_kinetic = {mu_k[bad].tolist()}; Coulomb "
            "friction needs 0 <= mu_kinetic <= mu_static."
        )


@jit(batched=False)
def _integrate_hybrid(integration: HybridIntegration, q0, qd0, ts) -> Solution:
    c = integration(q0, qd0, ts)
    q, qd, result = c.saved_q, c.saved_qd, c.result
    if integration.throw:
        q = result.error_if(q, result != RESULTS.successful)
    stats = {"num_steps": c.steps, "num_events": c.log.count}
    field = integration.field
    sliding = None if field.friction is None else field.friction.recorded(c.saved_mode.sliding)
    return Solution(
        ts=ts,
        q=q,
        qd=qd,
        result=result,
        stats=stats,
        events=c.log,
        engaged=c.saved_mode.engaged,
        sliding=sliding,
        latched=c.saved_mode.latched,
    )
