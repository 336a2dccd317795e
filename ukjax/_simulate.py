r"""Time integration of a constrained system with diffrax."""

from __future__ import annotations

from typing import Any, Literal

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._dynamics import acceleration_terms
from ._errors import error_if
from ._initial import constraint_residuals, project_initial_conditions
from ._stabilization import Baumgarte, Projection, ProjectedSolver
from ._system import System, check_state, floatify
from ._uk import UKMethod, check_terms


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
    system: System
    stabilization: Any
    method: str = eqx.field(static=True)
    check: bool = eqx.field(static=True)
    consistency_tol: float | None = eqx.field(static=True)

    def __call__(self, t, y, args):
        q, qd = y
        terms, inputs = acceleration_terms(
            self.system, t, q, qd, method=self.method, stabilization=self.stabilization
        )
        qdd = terms.qdd
        if self.check:
            qdd = check_terms(qdd, terms, inputs[2], inputs, consistency_tol=self.consistency_tol)
        return qd, qdd


def _default_tolerances(dtype):
    return (1e-12, 1e-12) if jnp.finfo(dtype).bits >= 64 else (1e-6, 1e-6)


def default_ic_tol(dtype) -> float:
    """Absolute tolerance on the initial constraint residuals: 1e-8 (float64), 1e-4 (float32)."""
    return 1e-8 if jnp.finfo(dtype).bits >= 64 else 1e-4


_IC_MESSAGE = (
    "ukjax: the initial conditions violate the constraints (max |phi|, |phi_dot|, |psi| "
    "above initial_conditions_tol). Fix q0/qd0, or pass initial_conditions='project' to "
    "simulate (or call ukjax.project_initial_conditions) to move them to the nearest "
    "consistent state in the mass metric, or initial_conditions='ignore' to integrate "
    "them as they are (the UK equation then preserves the initial violation)."
)


@eqx.filter_jit
def _ic_residual(system, t0, q0, qd0):
    return constraint_residuals(system, t0, q0, qd0)


def _is_concrete(*xs) -> bool:
    return not any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(xs))


@eqx.debug.assert_max_traces(max_traces=None)
def _simulate_impl(
    system, q0, qd0, ts, solver, stepsize_controller, dt0, adjoint, max_steps, throw,
    progress_meter, method, check, consistency_tol, initial_conditions, ic_tol, stabilization,
):
    t0 = ts[0]
    if initial_conditions == "project":
        q0, qd0 = project_initial_conditions(system, t0, q0, qd0)
    elif initial_conditions == "check":
        res = constraint_residuals(system, t0, q0, qd0)
        worst = res.max_abs()
        q0 = error_if(
            q0,
            worst > ic_tol,
            _IC_MESSAGE,
            max_position_residual=jnp.max(jnp.abs(res.position), initial=0.0),
            max_velocity_residual=jnp.max(jnp.abs(res.velocity), initial=0.0),
            max_nonholonomic_residual=jnp.max(jnp.abs(res.nonholonomic), initial=0.0),
        )
    saveat = diffrax.SaveAt(ts=ts)
    if isinstance(stabilization, Projection):
        solver = ProjectedSolver(solver, system, stabilization.iterations)
        project = lambda t, y, args: project_initial_conditions(
            system, t, y[0], y[1], iterations=stabilization.iterations
        )
        saveat = diffrax.SaveAt(ts=ts, fn=project)
        baumgarte = None
    else:
        baumgarte = stabilization
    field = _VectorField(system, baumgarte, method, check, consistency_tol)
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(field),
        solver,
        t0=t0,
        t1=ts[-1],
        dt0=dt0,
        y0=(q0, qd0),
        saveat=saveat,
        stepsize_controller=stepsize_controller,
        adjoint=adjoint,
        max_steps=max_steps,
        throw=throw,
        progress_meter=progress_meter,
    )
    q, qd = sol.ys
    return Solution(ts=sol.ts, q=q, qd=qd, result=sol.result, stats=sol.stats)


_simulate_jit = eqx.filter_jit(_simulate_impl)


def simulate(
    system: System,
    q0,
    qd0,
    ts,
    *,
    solver: diffrax.AbstractSolver | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    dt0: float | None = None,
    adjoint: diffrax.AbstractAdjoint | None = None,
    max_steps: int | None = 100_000,
    stabilization: Baumgarte | Projection | None = None,
    initial_conditions: Literal["check", "project", "ignore"] = "check",
    initial_conditions_tol: float | None = None,
    method: UKMethod = "auto",
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
    - `stabilization`: `None` (default: plain UK, constraints enforced at acceleration
      level only), `ukjax.Baumgarte(alpha, beta)` (feedback on the constraint residuals,
      differentiable in the gains) or `ukjax.Projection()` (mass-metric projection after
      every step); see :mod:`ukjax._stabilization`.
    - `initial_conditions`: `"check"` (default: refuse initial conditions that violate the
      position/velocity-level constraints, printing the residuals), `"project"` (move
      them to the nearest consistent state in the mass metric, see
      :func:`ukjax.project_initial_conditions`) or `"ignore"`.
    - `initial_conditions_tol`: absolute tolerance of that check (1e-8 in float64, 1e-4 in
      float32).
    - `method`, `check`, `consistency_tol`: as in :func:`ukjax.udwadia_kalaba`, applied at
      every right-hand-side evaluation.
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
    q0, qd0 = check_state(q0, qd0)
    dtype = q0.dtype
    ts = jnp.asarray(ts)
    if ts.ndim != 1 or ts.shape[0] < 2:
        raise ValueError(f"ts must be a 1-D array of at least 2 save times; got shape {ts.shape}.")
    ts = ts.astype(dtype)
    if initial_conditions not in ("check", "project", "ignore"):
        raise ValueError(
            "initial_conditions must be 'check', 'project' or 'ignore'; got "
            f"{initial_conditions!r}."
        )
    if not isinstance(system, System):
        raise TypeError(f"system must be a ukjax.System; got {type(system).__name__}.")
    if _is_concrete(ts) and not bool(np.all(np.diff(np.asarray(ts)) > 0)):
        raise ValueError("ts must be strictly increasing.")
    system = floatify(system)
    if stabilization is not None and not isinstance(stabilization, (Baumgarte, Projection)):
        raise TypeError(
            "stabilization must be None, ukjax.Baumgarte(alpha, beta) or ukjax.Projection(); "
            f"got {type(stabilization).__name__}."
        )
    stabilization = floatify(stabilization)
    if solver is None:
        solver = diffrax.Dopri8()
    if stepsize_controller is None:
        default_rtol, default_atol = _default_tolerances(dtype)
        stepsize_controller = diffrax.PIDController(
            rtol=default_rtol if rtol is None else rtol,
            atol=default_atol if atol is None else atol,
        )
    elif rtol is not None or atol is not None:
        raise ValueError("Give either rtol/atol or stepsize_controller, not both.")
    if isinstance(stepsize_controller, diffrax.ConstantStepSize) and dt0 is None:
        raise ValueError("A ConstantStepSize controller needs a step: pass dt0=...")
    if adjoint is None:
        adjoint = diffrax.RecursiveCheckpointAdjoint()
    if progress_meter is None:
        progress_meter = diffrax.NoProgressMeter()
    ic_tol = default_ic_tol(dtype) if initial_conditions_tol is None else initial_conditions_tol

    # Outside any transformation, check the initial conditions eagerly so that the error
    # is a plain ValueError that states the residuals.
    if initial_conditions == "check" and _is_concrete(system, q0, qd0, ts):
        res = _ic_residual(system, ts[0], q0, qd0)
        worst = float(res.max_abs())
        if not worst <= ic_tol:
            raise ValueError(
                f"The initial conditions violate the constraints at t0 = {float(ts[0])}: "
                f"max|phi| = {float(jnp.max(jnp.abs(res.position), initial=0.0)):.3e}, "
                f"max|phi_dot| = {float(jnp.max(jnp.abs(res.velocity), initial=0.0)):.3e}, "
                f"max|psi| = {float(jnp.max(jnp.abs(res.nonholonomic), initial=0.0)):.3e} "
                f"(tolerance initial_conditions_tol = {ic_tol:.1e}). "
                + _IC_MESSAGE.split("). ", 1)[1]
            )
        initial_conditions = "ignore"  # already checked

    return _simulate_jit(
        system, q0, qd0, ts, solver, stepsize_controller, dt0, adjoint, max_steps, throw,
        progress_meter, method, check, consistency_tol, initial_conditions, ic_tol, stabilization,
    )
