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

from ._adjoint import default_adjoint
from ._contact import AbstractContact, Impact, check_contact
from ._driver import AbstractDriver
from ._field import Field, count_contacts
from ._friction import (
    AbstractFriction,
    check_friction,
    declares_friction,
    default_friction,
)
from ._hybrid import EventDriver
from ._impulse import Impulses
from ._initial import AbstractInitialConditions, check_initial_policy
from ._integrators import default_controller, default_solver
from ._latches import num_latches
from ._precision import full_precision
from ._probe import probe_indexing
from ._results import RESULTS
from ._smooth import SmoothDriver
from ._solution import Solution
from ._stabilization import AbstractStabilization, check_stabilization
from ._stepping import Stepping
from ._system import System, check_state, check_system, floatify
from ._uk import default_consistency_tol
from ._uk_solvers import AbstractUKSolver, check_uk_solver
from ._xla import is_concrete, jit


@jit(batched=False)
def run(driver: AbstractDriver, q0, qd0, ts) -> Solution:
    """The one path of every run, from the initial state to the :class:`Solution`: the
    initial-condition policy applies, the driver integrates (:mod:`ukjax._driver`), and a
    failure is raised (`throw=True`) or returned in `result`."""
    q0, qd0, initial = driver.initial.apply(driver.field.system, ts[0], q0, qd0)
    sol = driver.integrate(q0, qd0, ts, initial)
    if not driver.throw:
        return sol
    failed = sol.result != RESULTS.successful
    return eqx.tree_at(lambda s: s.q, sol, sol.result.error_if(sol.q, failed))


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
      A save between two steps is read from the method's dense output (diffrax's
      interpolant), about a hundred times less accurate than the steps at the default
      tolerances (a pendulum over 10 s saved 1001 times: 5e-11 from the exact motion, the
      constraint held to 1e-10, against 5e-13 and round-off at the step ends). For saves
      as accurate as the steps, make each one a step end:
      `stepsize_controller=diffrax.PIDController(rtol=1e-12, atol=1e-12, step_ts=ts)`
      (more steps where the saves are denser than the steps); `ukjax.Projection()`
      puts the saves back on the constraints.
    - `solver`: a diffrax solver; default `diffrax.Dopri8()` (8th order, adaptive). An
      explicit Runge-Kutta method of one tableau and more than 7 stages (Dopri8) runs in a
      :class:`ukjax.StageLoop`: the same method and steps, its stages in a loop of sums
      (faster, in single runs and under `jax.vmap`).
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
      (drift off redundant constraints grows with the integration tolerance). With
      `throw=True` the checks run at every right-hand-side evaluation (raising from inside
      the solve); with `throw=False` at every accepted step: the run stops at the first
      state that fails and returns its code.
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
      constraint kept, :func:`ukjax.apply_impulse`, and the engaged latches' rows with
      them); with rigid contacts, each contact's mode then follows from the new
      velocity, as at the start of a run (a body kicked off its support leaves it; one
      kicked into it impacts at once).
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
    wide batch of runs, :func:`ukjax.sweep` runs its chunks on every core (and writes out
    the stages of methods of at most 7 stages, :class:`ukjax.Unrolled`; pass that, or
    `throw=False`, to a wide `jax.vmap` yourself).

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
    check_system(system, run=True)
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
    # contacts, impulses or latches: the event-driven driver; else the smooth one
    driver = _event_driver(field, q0, ts, contact, impulses, max_events, friction, settings)
    if driver is None:
        if stabilization is None:
            default = given_initial.default_stabilization()
            field = eqx.tree_at(lambda f: f.stabilization, field, default)
        driver = _smooth_driver(field, progress_meter, settings)
    if throw and is_concrete(system, q0, ts):
        driver.refuse(t0, q0)
    try:
        return run(driver, q0, qd0, ts)
    except TypeError as error:  # a transformation the run cannot take: say what to do
        hint = driver.transformation_hint(error)
        if hint is None:
            raise
        raise TypeError(hint) from error


def _smooth_driver(field: Field, progress_meter, settings) -> SmoothDriver:
    """The smooth driver, its checks placed by :func:`_place_checks`."""
    field.stabilization.check_adjoint(settings["stepping"].adjoint)
    return SmoothDriver(
        field=_place_checks(field, settings["stepping"].adjoint),
        progress_meter=diffrax.NoProgressMeter() if progress_meter is None else progress_meter,
        **settings,
    )


def _check_impulse_times(impulses: Impulses, ts) -> None:
    """Impulse times known now (not traced) must not decrease and must not precede the
    run's start `ts[0]` (when the save times are known too); one after the end is never
    applied. Traced times are taken as they come: one whose time has passed is applied
    at once."""
    known = lambda x: isinstance(x, (np.ndarray, np.generic, jax.Array)) and is_concrete(x)
    if not known(impulses.times):
        return
    times = np.asarray(impulses.times, float)
    if np.any(np.diff(times) < 0):
        raise ValueError(
            f"Impulses: times must not decrease; got {times.tolist()}. Sort them with their "
            "values: order = np.argsort(times, kind='stable'); "
            "Impulses(times[order], values[order])."
        )
    start = float(np.asarray(ts)[0]) if known(ts) else None
    if times.size and start is not None and times[0] < start:
        raise ValueError(
            f"Impulses: time {times[0]} precedes the run's start ts[0] = {start}; an "
            "impulse must fall within [ts[0], ts[-1]] (one at ts[0] is applied at the start)."
        )


def _place_checks(field: Field, adjoint) -> Field:
    """Where a smooth run's checks go, decided by its arguments alone (one program however
    the run is transformed). The field with its checks at every stage, raising from inside
    the solve (`throw=True`, and the adjoints that refuse events, `BacksolveAdjoint` and
    `ImplicitAdjoint`, which can raise but not return a code: `throw=False` is refused
    for them), or in the run's failure event, which stops the run at the first accepted
    state that fails and returns its code (`throw=False`: each `vmap` member its own;
    cheaper, `benchmarks/RESULTS.md`, StageLoop section)."""
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


def _event_driver(
    field: Field, q0, ts, contact, impulses, max_events, friction, settings
) -> EventDriver | None:
    """The event-driven driver, or None when the run has no contacts, impulses or latches."""
    system = field.system
    t0 = jax.ShapeDtypeStruct((), ts.dtype)  # (ts[0] on a concrete ts is an eager op)
    k = count_contacts(system, t0, q0)
    if k is None and contact is not None:
        raise ValueError(
            f"contact= was given but {type(system).__name__} declares no unilateral "
            "constraints: define unilateral(self, t, q) returning g (admissible where g >= 0)."
        )
    friction_law = _friction_law(system, friction, k is not None, t0, q0)
    latches = num_latches(system, t0, q0)
    if k is None and impulses is None and not latches:
        return None
    if not isinstance(max_events, int) or max_events < 1:
        raise ValueError(f"max_events must be a positive integer; got {max_events!r}.")
    if impulses is not None:
        if not isinstance(impulses, Impulses):
            raise TypeError(f"impulses must be a ukjax.Impulses; got {impulses!r}.")
        if impulses.values.shape[1] != q0.shape[0]:
            raise ValueError(
                f"impulses.values must have shape (K, {q0.shape[0]}); got {impulses.values.shape}."
            )
        _check_impulse_times(impulses, ts)
    law = floatify(check_contact(Impact() if contact is None else contact))
    # the checks of a run with contacts: at every stage with throw=True, else on each
    # segment's end state (EventDriver._segment_result)
    hybrid_field = dataclasses.replace(field, per_stage=True, contact=law, friction=friction_law)
    return EventDriver(
        field=hybrid_field,
        impulses=impulses,
        max_events=max_events,
        num_contacts=k or 0,
        num_latches=latches,
        **settings,
    )
