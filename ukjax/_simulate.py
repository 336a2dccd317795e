r"""Time integration of a constrained system with diffrax."""

from __future__ import annotations

from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.core import Tracer
from jaxtyping import ArrayLike, Float

from ._dynamics import evaluate
from ._initial import AbstractInitialConditions, check_initial_policy
from ._stabilization import AbstractStabilization, check_stabilization
from ._system import System, check_state, floatify
from ._uk_solvers import AbstractUKSolver, check_uk_solver


class Solution(eqx.Module):
    """The result of :func:`simulate`.

    - `ts`: (T,) save times.
    - `q`: (T, n) generalized coordinates at `ts`.
    - `qd`: (T, n) generalized velocities at `ts`.
    - `result`: the diffrax `RESULTS` code (`diffrax.RESULTS.successful` on success).
    - `stats`: diffrax statistics (`num_steps`, `num_accepted_steps`, ...).

    Under `jax.vmap` every field gains a leading batch axis.
    """

    ts: jax.Array
    q: jax.Array
    qd: jax.Array
    result: diffrax.RESULTS
    stats: dict[str, Any]


class _VectorField(eqx.Module):
    """$(q, \\dot q) \\mapsto (\\dot q, \\ddot q)$ with the UK acceleration."""

    system: System
    stabilization: AbstractStabilization
    uk_solver: AbstractUKSolver
    check: bool = eqx.field(static=True)
    consistency_tol: float | None = eqx.field(static=True)

    def __call__(self, t, y, args):
        q, qd = y
        ev = evaluate(self.system, t, q, qd, self.stabilization, self.uk_solver)
        return qd, ev.checked_qdd(self.consistency_tol) if self.check else ev.terms.qdd


class _Integration(eqx.Module):
    """Everything `diffeqsolve` needs besides the initial state and the save times."""

    field: _VectorField
    initial: AbstractInitialConditions
    solver: diffrax.AbstractSolver
    stepsize_controller: diffrax.AbstractStepSizeController
    dt0: float | None
    adjoint: diffrax.AbstractAdjoint
    progress_meter: diffrax.AbstractProgressMeter
    max_steps: int | None = eqx.field(static=True)
    throw: bool = eqx.field(static=True)

    def __call__(self, q0, qd0, ts) -> Solution:
        system, stab = self.field.system, self.field.stabilization
        q0, qd0 = self.initial.apply(system, ts[0], q0, qd0)
        fn = stab.save_fn(system)
        saveat = diffrax.SaveAt(ts=ts) if fn is None else diffrax.SaveAt(ts=ts, fn=fn)
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(self.field),
            stab.wrap_solver(self.solver, system),
            t0=ts[0],
            t1=ts[-1],
            dt0=self.dt0,
            y0=(q0, qd0),
            saveat=saveat,
            stepsize_controller=self.stepsize_controller,
            adjoint=self.adjoint,
            max_steps=self.max_steps,
            throw=self.throw,
            progress_meter=self.progress_meter,
        )
        q, qd = sol.ys  # pyright: ignore[reportGeneralTypeIssues]
        return Solution(ts=ts, q=q, qd=qd, result=sol.result, stats=sol.stats)


@eqx.filter_jit
def _integrate(integration: _Integration, q0, qd0, ts) -> Solution:
    return integration(q0, qd0, ts)


def default_tolerances(dtype) -> tuple[float, float]:
    """(rtol, atol) of the default controller: 1e-12 in float64, 1e-6 in float32."""
    return (1e-12, 1e-12) if jnp.finfo(dtype).bits >= 64 else (1e-6, 1e-6)


def _controller(stepsize_controller, rtol, atol, dt0, dtype):
    if stepsize_controller is None:
        rtol0, atol0 = default_tolerances(dtype)
        return diffrax.PIDController(
            rtol=rtol0 if rtol is None else rtol, atol=atol0 if atol is None else atol
        )
    if rtol is not None or atol is not None:
        raise ValueError("Give either rtol/atol or stepsize_controller, not both.")
    if isinstance(stepsize_controller, diffrax.ConstantStepSize) and dt0 is None:
        raise ValueError("A ConstantStepSize controller needs a step: pass dt0=...")
    return stepsize_controller


def _is_concrete(*xs) -> bool:
    return not any(isinstance(x, Tracer) for x in jax.tree_util.tree_leaves(xs))


def _check_ts(ts, dtype) -> jax.Array:
    ts = jnp.asarray(ts)
    if ts.ndim != 1 or ts.shape[0] < 2:
        raise ValueError(f"ts must be a 1-D array of at least 2 save times; got shape {ts.shape}.")
    if _is_concrete(ts) and not bool(np.all(np.diff(np.asarray(ts)) > 0)):
        raise ValueError("ts must be strictly increasing.")
    return ts.astype(dtype)


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
    max_steps: int | None = 100_000,
    stabilization: AbstractStabilization | None = None,
    initial_conditions: AbstractInitialConditions | None = None,
    uk_solver: AbstractUKSolver | None = None,
    check: bool = True,
    consistency_tol: float | None = None,
    throw: bool = True,
    progress_meter: diffrax.AbstractProgressMeter | None = None,
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
    - `adjoint`: diffrax adjoint for gradients; default
      `diffrax.RecursiveCheckpointAdjoint()`. `diffrax.ForwardMode()` suits few
      parameters.
    - `max_steps`: bound on the number of steps (default 100 000).
    - `stabilization`: a strategy: `None` (plain UK, constraints enforced at acceleration
      level only), `ukjax.Baumgarte(alpha, beta)` (feedback on the constraint residuals,
      differentiable in the gains) or `ukjax.Projection()` (mass-metric projection after
      every step).
    - `initial_conditions`: a strategy: `ukjax.CheckInitial(tol=None)` (default: refuse
      initial conditions that violate the position/velocity-level constraints, stating the
      residuals), `ukjax.ProjectInitial()` (move them to the nearest consistent state in
      the mass metric, see :func:`ukjax.project_initial_conditions`) or
      `ukjax.IgnoreInitial()`.
    - `uk_solver`, `check`, `consistency_tol`: as in :func:`ukjax.udwadia_kalaba`, applied
      at every right-hand-side evaluation.
    - `throw`: raise if the integration fails (else inspect `solution.result`).
    - `progress_meter`: e.g. `diffrax.TqdmProgressMeter()` for a progress bar.

    **Returns:** a :class:`ukjax.Solution` with `ts`, `q` (T, n), `qd` (T, n).

    Works under `jax.jit`, `jax.vmap` (over `q0`, `qd0` or a batched system built with
    `equinox.filter_vmap`) and `jax.grad` w.r.t. the system's fields and the initial state.

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
    q0, qd0 = check_state(q0, qd0)
    ts = _check_ts(ts, q0.dtype)
    system = floatify(system)
    initial = check_initial_policy(initial_conditions)
    if _is_concrete(system, q0, qd0, ts):  # a plain ValueError that states the residuals
        initial = initial.apply_eagerly(system, ts[0], q0, qd0)
    field = _VectorField(
        system,
        floatify(check_stabilization(stabilization)),
        check_uk_solver(uk_solver),
        check,
        consistency_tol,
    )
    integration = _Integration(
        field=field,
        initial=initial,
        solver=diffrax.Dopri8() if solver is None else solver,
        stepsize_controller=_controller(stepsize_controller, rtol, atol, dt0, q0.dtype),
        dt0=dt0,
        adjoint=diffrax.RecursiveCheckpointAdjoint() if adjoint is None else adjoint,
        progress_meter=diffrax.NoProgressMeter() if progress_meter is None else progress_meter,
        max_steps=max_steps,
        throw=throw,
    )
    return _integrate(integration, q0, qd0, ts)
