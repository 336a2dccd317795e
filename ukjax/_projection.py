r"""Mass-metric projection onto the constraint manifold: the function, and the
stabilisation strategy that applies it after every integrator step.

The projection moves $q$ onto $\varphi(q, t) = 0$ by Newton steps of minimum $M$-norm,
$\Delta q = -M^{-1}\varphi_q^T(\varphi_qM^{-1}\varphi_q^T)^+\varphi$, then $\dot q$ onto
$\dot\varphi = 0$, $\psi = 0$ the same way (computed as $-L^{-T}(JL^{-T})^+r$ with
$M = LL^T$, no matrix square root).

Why after each step rather than at save points: projecting only the saved output would
leave the integrated state drifting (the saved values would be corrected but the motion
itself would not), and projecting inside the step keeps every step starting on the
manifold, which is what bounds the drift. The saved values are projected as well, since
dense output between steps interpolates the unprojected stages.
"""

from __future__ import annotations

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from ._adjoint import differentiated
from ._dynamics import mass_matrix
from ._errors import error_if
from ._kernel_strategies import AbstractKernels, AutoKernels
from ._kernels import DenseOps
from ._precision import full_precision
from ._residuals import (
    default_ic_tol,
    has_holonomic,
    has_nonholonomic,
    phi,
    residuals,
    velocity_level,
)
from ._results import RESULTS, message
from ._sparsity import nonzero_pattern
from ._stabilization import AbstractStabilization
from ._structure import Structure, entries_of, rows_structure, worthwhile
from ._structured_uk import structured_solve
from ._system import System, as_time, check_state
from ._uk import complete_where_singular
from ._uk_solvers import Regularized
from ._wrapped import ForwardingSolver
from ._xla import eager_jit


def _mass_metric_step(ops: DenseOps, M, J, r, semidefinite: bool = False):
    r"""Minimum-M-norm correction dx with J dx = -r: dx = -L^{-T} (J L^{-T})^+ r, the
    pseudo-inverse replaced by one Tikhonov solve with the default UK solver's $\tau$
    (:class:`ukjax.Regularized` without refinement), so that near a singular configuration
    the step does not jump to another assembly branch along a nearly dependent row: the
    gain along a row of singular value $\sigma$ is $\sigma/(\sigma^2 + \tau^2) \le
    1/(2\tau)$. Elsewhere it leaves a relative $\tau^2/\sigma^2$ of the residual (1e-10
    at $\sigma = 1$ in float64), which a Newton step on a residual of the order of the
    integrator's local error does not need to refine; the refinements of the UK solve
    would double the program that the projection adds to every step.

    It is the UK acceleration of a system with mass matrix M, no force and the
    constraint J dx = -r, so it is that solve (and its derivative rule,
    :mod:`ukjax._uk_regularized`).

    With `semidefinite` (``System.semidefinite_mass``), a singular M whose free directions
    J fixes (a quaternion's norm) gives the correction in the metric of M + s J^T J
    instead (:func:`ukjax._uk.complete_mass`); any positive definite metric gives a
    correction that satisfies the constraints to first order."""
    if semidefinite:
        M = complete_where_singular(ops.cholesky(M), M, None, J, -r)[0]
    return Regularized(refinements=0).solve(M, None, J, -r, None, ops).qdd


def has_manifold(system: System, t, q, qd) -> bool:
    """Whether the system has position- or velocity-level constraints to project onto
    (decided at trace time from the shapes)."""
    return has_holonomic(system, t, q) or velocity_level(system, t, q, qd).shape[0] > 0


def _repeat(step, iterations: int, x):
    """`iterations` applications of `step`: unrolled when few (the per-step projection),
    a loop otherwise (initial conditions)."""
    if iterations <= 3:
        for i in range(iterations):
            x = step(i, x)
        return x
    return jax.lax.fori_loop(0, iterations, step, x)


class _Correction(eqx.Module):
    """The minimum-M-norm Newton correction for one set of rows r(x) = 0 (positions or
    velocities): dense (:func:`_mass_metric_step`), or on the structural non-zeros of M
    and of the rows' Jacobian (:func:`ukjax._structured_uk.structured_solve`, the same
    Tikhonov solve without refinement; the Jacobian by one product per column colour).

    The Jacobian is an argument, so that a caller can keep one for several corrections
    (the chord iterations of :func:`project`); `jacobian` evaluates it."""

    kernels: AbstractKernels
    M: jax.Array
    semidefinite: bool = eqx.field(static=True)
    structure: Structure | None = eqx.field(static=True)

    def jacobian(self, rows, x) -> jax.Array:
        """The rows' Jacobian at `x`: dense, or its structural entries."""
        if self.structure is None:
            return jax.jacfwd(rows)(x)
        assert self.structure.holonomic is not None
        return self.structure.holonomic.jacobian(rows, x)

    def __call__(self, rows, x, J):
        if self.structure is None:
            # as the UK solve: the kernels for the larger of M and the rows' Gram matrix
            ops = self.kernels.ops(max(J.shape))
            return _mass_metric_step(ops, self.M, J, rows(x), self.semidefinite)
        s, dtype = self.structure, x.dtype
        tau, _ = Regularized(refinements=0).gram_parameters(dtype)
        M_values = entries_of(self.M, s.mass)
        zero = jnp.zeros_like(x)
        return structured_solve(s, M_values, zero, J, -rows(x), None, tau, 0, checked=False).qdd

    def iterate(self, rows, x, iterations: int, chord: bool):
        """`iterations` corrections of `x` towards rows(x) = 0: Newton steps (the Jacobian
        at each iterate), or with `chord` the Jacobian of the first for all (one
        Jacobian and, the solves' inputs being equal but for the residual, one
        factorisation after XLA's common-subexpression elimination). Returns the
        corrected `x` and the chord steps' Jacobian (None for Newton steps)."""
        if chord:
            J0 = self.jacobian(rows, x)
            return _repeat(lambda _, x_: x_ + self(rows, x_, J0), iterations, x), J0
        step = lambda _, x_: x_ + self(rows, x_, self.jacobian(rows, x_))
        return _repeat(step, iterations, x), None


def _structures(system: System, t, q, qd, semidefinite: bool, kernels: AbstractKernels):
    """The structures of the position and velocity corrections (each None: dense), from
    the patterns of M and of the two Jacobians (:func:`ukjax._sparsity.nonzero_pattern`)
    where `kernels` ask for structure at this size and the patterns are sparse enough to
    pay (:func:`ukjax._structure.worthwhile`)."""
    n = q.shape[0]
    if semidefinite or not kernels.structured(n):
        return None, None
    hol = has_holonomic(system, t, q)

    def blocks(t_, q_, qd_):
        M = mass_matrix(system, t_, q_, jnp.zeros_like(q_))
        Jq = jax.jacfwd(lambda x: phi(system, t_, x))(q_) if hol else None
        Jv = jax.jacfwd(lambda v: velocity_level(system, t_, q_, v))(qd_)
        return M, Jq, Jv

    state = jax.ShapeDtypeStruct((n,), q.dtype)
    try:
        M, Jq, Jv = nonzero_pattern(blocks, jax.ShapeDtypeStruct((), q.dtype), state, state)
    except Exception:  # noqa: BLE001 - the UK solve's detection says why; dense here
        return None, None
    pick = lambda J: None if J is None or J.shape[0] == 0 else rows_structure(n, M, J)
    keep = lambda s: s if s is not None and worthwhile(s, kernels) else None
    return keep(pick(Jq)), keep(pick(Jv))


def project(
    system: System,
    t,
    q,
    qd,
    iterations: int,
    kernels: AbstractKernels = AutoKernels(),
    near: bool = False,
):
    r""":func:`project_initial_conditions` for already validated `t`, `q`, `qd`, with the
    linear algebra of `kernels` (by default, as the UK solve's: unrolled for small
    systems, LAPACK above, the structured solve for large sparse ones).

    `near`: the state is within an integrator's local error of the manifold (the
    per-step projection). Then the position iterations are chord steps with the Jacobian
    where they start (after the first step the residual is the square of the local
    error, and the second, with a Jacobian off by that error, leaves its cube), and
    velocity rows affine in $\dot q$ (no nonholonomic constraint) take one step, which
    is exact but for the Tikhonov term's relative $\tau^2/\sigma^2$ of a residual of
    the order of the local error (rows nonlinear in $\dot q$ take `iterations` Newton
    steps). Its derivative is that of the projection itself (:func:`_near_jvp`), not of
    its iterations. From a state far from the manifold (initial conditions), every
    iteration is a Newton step, differentiated as such."""
    if near:
        return _near_projection(system, t, q, qd, iterations=iterations, kernels=kernels)
    return _iterated(system, t, q, qd, iterations, kernels, False)[0]


class _Corrections(eqx.Module):
    """The position and velocity corrections of one projection (either None where the
    system has no such rows), with the mass matrix where the projection starts as the
    metric of both (any SPD metric gives a projection onto the same manifold; this one
    is the mass metric to first order in the correction, and it costs one evaluation of
    M instead of one per iteration)."""

    position: _Correction | None
    velocity: _Correction | None

    @classmethod
    def at(cls, system: System, t, q, qd, kernels: AbstractKernels) -> "_Corrections":
        M = mass_matrix(system, t, q, jnp.zeros_like(q))
        semi = system.semidefinite_mass()
        at_q, at_qd = _structures(system, t, q, qd, semi, kernels)
        hol = has_holonomic(system, t, q)
        vel = velocity_level(system, t, q, qd).shape[0] > 0
        return cls(
            _Correction(kernels, M, semi, at_q) if hol else None,
            _Correction(kernels, M, semi, at_qd) if vel else None,
        )


def _iterated(system: System, t, q, qd, iterations: int, kernels, near: bool):
    """The projection's iterations (:func:`project`): the projected (q, qd), and the
    corrections with the Jacobians of their chord steps (None where Newton steps were
    taken or there are no such rows), which the per-step projection's derivative reuses.
    With `near`, velocity rows affine in qd take one step (a chord step, the Jacobian
    where it starts)."""
    correct = _Corrections.at(system, t, q, qd, kernels)
    Jq = Jv = None
    if correct.position is not None:
        q, Jq = correct.position.iterate(lambda x: phi(system, t, x), q, iterations, near)
    if correct.velocity is not None:
        one = near and not has_nonholonomic(system, t, q, qd)
        rows = lambda v: velocity_level(system, t, q, v)
        qd, Jv = correct.velocity.iterate(rows, qd, 1 if one else iterations, one)
    return (q, qd), (correct, Jq, Jv)


@eqx.filter_custom_jvp
def _near_projection(system, t, q, qd, *, iterations, kernels):
    """The per-step projection (:func:`project` with `near`), differentiated as the
    projection onto the manifold (:func:`_near_jvp`)."""
    return _iterated(system, t, q, qd, iterations, kernels, True)[0]


@_near_projection.def_jvp
def _near_jvp(primals, tangents, *, iterations, kernels):
    r"""The derivative of the mass-metric projection $P$ onto the constraint manifold at a
    state within the local error of it: the tangent $(\delta q, \delta\dot q)$ projected
    onto the linearised constraints at the projected state $(q^*, \dot q^*)$,

    $$\delta q^* = \delta q - K_q\,\delta\varphi(q^*; \delta q, \delta\theta, \delta t),
    \qquad \delta\dot q^* = \delta\dot q - K_v\,\delta r_v(q^*, \dot q^*;\ \delta q^*,
    \delta\dot q, \delta\theta, \delta t),$$

    with $K = M^{-1}J^T(JM^{-1}J^T + \tau^2 I)^{-1}$ the corrections' own gain (the
    Jacobians the primal's chord steps formed, and their factorisations), $\theta$ the
    system's parameters and $r_v$ the velocity rows. This is the derivative of the exact
    projection from a point on the manifold; the iterations' own derivative differs from
    it by terms of the order of the residual they start from (the local error), and
    costs their second derivatives of $\varphi$ and the transposes of every iteration.
    The metric's derivative (with respect to the masses) is of that order too."""
    system, t, q, qd = primals
    t_system, t_t, t_q, t_qd = tangents
    (q1, qd1), (correct, Jq, Jv) = _iterated(system, t, q, qd, iterations, kernels, True)
    diff, static = differentiated(system, t_system)
    t_diff = diff if t_system is None else t_system  # None exactly where `diff` is
    t_t = jnp.zeros_like(t) if t_t is None else t_t
    t_q = jnp.zeros_like(q) if t_q is None else t_q
    t_qd = jnp.zeros_like(qd) if t_qd is None else t_qd
    if correct.position is not None:
        rows = lambda d, t_, x: phi(eqx.combine(d, static), t_, x)
        dr = jax.jvp(rows, (diff, t, q1), (t_diff, t_t, t_q))[1]
        t_q = t_q + correct.position(lambda _: dr, q1, Jq)
    if correct.velocity is not None:
        if Jv is None:  # rows nonlinear in qd (Newton steps): the Jacobian where they start
            Jv = correct.velocity.jacobian(lambda v: velocity_level(system, t, q1, v), qd)
        rows = lambda d, t_, x, v: velocity_level(eqx.combine(d, static), t_, x, v)
        dr = jax.jvp(rows, (diff, t, q1, qd1), (t_diff, t_t, t_q, t_qd))[1]
        t_qd = t_qd + correct.velocity(lambda _: dr, qd1, Jv)
    return (q1, qd1), (t_q, t_qd)


@full_precision
@eager_jit
def project_initial_conditions(
    system: System,
    t0: ArrayLike,
    q0: Float[ArrayLike, " n"],
    qd0: Float[ArrayLike, " n"],
    *,
    iterations: int = 12,
    tol: float | None = None,
) -> tuple[Float[Array, " n"], Float[Array, " n"]]:
    r"""The consistent state nearest to $(q_0, \dot q_0)$ in the mass metric.

    First $q$ is moved onto $\varphi(q, t_0) = 0$ by Newton steps of minimum
    $M$-norm, $\Delta q = -M^{-1}\varphi_q^T(\varphi_qM^{-1}\varphi_q^T)^+\varphi$; then
    $\dot q$ onto $\dot\varphi = 0$, $\psi = 0$ the same way (one step is exact for
    constraints linear in $\dot q$). Redundant constraints are fine. Differentiable.

    If a residual is still above `tol` afterwards (default 1e-8 in float64, 1e-4 in
    float32) the constraints cannot all be met from here (contradictory constraints, or a
    singular Jacobian): an `EquinoxRuntimeError` says so instead of returning a state that
    violates them.

    **Returns:** `(q0, qd0)` projected.

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import CartesianPendulum
        >>> pend = CartesianPendulum(length=1.0)
        >>> q, qd = ukjax.project_initial_conditions(pend, 0.0, jnp.array([1.1, 0.0]),
        ...                                          jnp.array([0.3, 1.0]))
        >>> [round(float(v), 6) for v in q], [round(float(v), 6) for v in qd]
        ([1.0, 0.0], [0.0, 1.0])
    """
    q, qd = check_state(q0, qd0, system)
    t = as_time(t0, q.dtype)
    q, qd = project(system, t, q, qd, iterations)
    tol = default_ic_tol(q.dtype) if tol is None else tol
    worst = residuals(system, t, q, qd).max_abs()
    q = error_if(
        q,
        ~(worst <= tol),
        message(RESULTS.projection_failed),
        max_residual_after_projection=worst,
        tolerance=jnp.asarray(tol, q.dtype),
    )
    return q, qd


# A nested jit: diffrax traces its step body twice, and a nested jit reuses the first trace
# of the projection (the second is a cache hit).
@eqx.filter_jit
def _project_step(system: System, t, q, qd, iterations: int, kernels: AbstractKernels):
    return project(system, t, q, qd, iterations, kernels, near=True)


class ProjectedSolver(ForwardingSolver):
    """A diffrax solver whose every step ends with a mass-metric projection of the state."""

    solver: diffrax.AbstractSolver
    system: System
    iterations: int = eqx.field(static=True, default=2)
    kernels: AbstractKernels = AutoKernels()

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        if not has_manifold(self.system, t0, y0[0], y0[1]):  # nothing to project onto
            return self.solver.step(terms, t0, t1, y0, args, solver_state, made_jump)
        # made_jump=True: re-evaluate the first stage at the (projected) y0 instead of
        # reusing an FSAL value computed at the unprojected end of the previous step.
        y1, y_error, dense_info, solver_state, result = self.solver.step(
            terms, t0, t1, y0, args, solver_state, True
        )
        y1 = _project_step(self.system, t1, y1[0], y1[1], self.iterations, self.kernels)
        return y1, y_error, dense_info, solver_state, result


class Projection(AbstractStabilization):
    r"""Project $(q, \dot q)$ onto the constraint manifold after every integrator step.

    Residuals stay at round-off without changing the stiffness; costs a few Jacobians per
    step. The integrated equation is the plain UK one (no change to $b$).

    **Arguments:**

    - `iterations`: iterations per projection for positions (and for velocities under
      constraints nonlinear in $\dot q$); each step starts within the local truncation
      error of the manifold, so 2 suffice. The position iterations are chord steps with
      the constraint Jacobian where the step ends (one Jacobian and one factorisation for
      both: the first leaves the square of the local error, the second its cube), and
      velocity rows affine in $\dot q$ take one step (:func:`project`).
    - `saves`: also project the saved values (default `True`). The saves are interpolated
      between projected steps, so without it their residuals are of the order of the
      integration tolerance rather than round-off. `Projection(saves=False)` projects the
      motion only and saves the integrator's dense output (cheaper when there are many
      saves).
    - `kernels`: the linear algebra of the corrections (default :class:`ukjax.AutoKernels`,
      as the UK solve's: unrolled for small systems, LAPACK above, and from
      :data:`ukjax._kernel_strategies.STRUCTURED_MIN_N` coordinates (and from 4 where it pays
      against the written-out dense solve) the structural non-zeros of M
      and of the constraint Jacobians, found from the system's program, where they are
      sparse: the Jacobian by one product per column colour instead of one per
      coordinate). `ukjax.LapackKernels()` keeps it dense.

    Use as `simulate(..., stabilization=ukjax.Projection())`. Works with any diffrax
    solver; one extra right-hand-side evaluation per step for FSAL solvers (the first
    stage is re-evaluated at the projected state). Derivatives through it are the
    projection's own (the state's tangent projected onto the linearised constraints with
    the corrections' factors), not those of its iterations (:func:`project`).

    Example:
        >>> import jax, jax.numpy as jnp, ukjax
        >>> jax.config.update("jax_enable_x64", True)
        >>> from ukjax.systems import CartesianPendulum
        >>> sol = ukjax.simulate(CartesianPendulum(), jnp.array([1.0, 0.0]), jnp.zeros(2),
        ...                      jnp.linspace(0.0, 1.0, 3), stabilization=ukjax.Projection())
        >>> bool(jnp.max(jnp.abs(jnp.sum(sol.q**2, axis=1) - 1.0)) < 1e-13)
        True
    """

    iterations: int = eqx.field(static=True, default=2)
    saves: bool = eqx.field(static=True, default=True)
    kernels: AbstractKernels = AutoKernels()

    def wrap_solver(self, solver, system):
        return ProjectedSolver(solver, system, self.iterations, self.kernels)

    def save_fn(self, system):
        if not self.saves:
            return None
        return lambda t, y, args: project(
            system, t, y[0], y[1], self.iterations, self.kernels, near=True
        )

    def check_adjoint(self, adjoint):
        """The continuous adjoint (`BacksolveAdjoint`) integrates an adjoint ODE backwards
        with the same solver, and a per-step projection is not part of any ODE."""
        if isinstance(adjoint, diffrax.BacksolveAdjoint):
            raise ValueError(
                "adjoint=diffrax.BacksolveAdjoint() cannot be combined with a per-step "
                f"projection (stabilization={self!r}; ukjax.Projection is the default under "
                "CheckInitial and ProjectInitial): the continuous adjoint solves an ODE "
                "backwards, and the projection is not one. Pass stabilization="
                "ukjax.NoStabilization() or ukjax.Baumgarte(...) with it, or keep the "
                "default adjoint (diffrax.RecursiveCheckpointAdjoint(), exact gradients of "
                "the projected solve)."
            )
