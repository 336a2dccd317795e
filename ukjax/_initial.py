r"""What :func:`ukjax.simulate` does with initial conditions that may violate the
constraints: strategy objects :class:`CheckInitial` (the default), :class:`ProjectInitial`
and :class:`IgnoreInitial`.

A policy returns the state to integrate from and an :class:`InitialCheck` (a result code and
the numbers behind it); :func:`ukjax.simulate` raises it (`throw=True`) or returns it in
`Solution.result` (`throw=False`).
"""

from __future__ import annotations

import abc
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._projection import Projection, project
from ._residuals import ConstraintResiduals, default_ic_tol, residuals
from ._results import RESULTS, first_failure, message
from ._stabilization import AbstractStabilization, NoStabilization
from ._system import System
from ._xla import jit


class InitialCheck(NamedTuple):
    """The verdict on an initial state: a result code and the numbers to print with it;
    `checked` when it is known to be a success when the program is traced (the state was
    checked before, outside it), so that no run-time check is needed."""

    code: RESULTS
    values: dict[str, jax.Array]
    checked: bool = False


def _worst(res: ConstraintResiduals) -> dict[str, jax.Array]:
    return {
        "max_position_residual": jnp.max(jnp.abs(res.position), initial=0.0),
        "max_velocity_residual": jnp.max(jnp.abs(res.velocity), initial=0.0),
        "max_nonholonomic_residual": jnp.max(jnp.abs(res.nonholonomic), initial=0.0),
    }


def _tol(tol: float | None, dtype) -> float:
    return default_ic_tol(dtype) if tol is None else tol


def _nonfinite(q0, qd0, xp=jnp):
    """Whether the state holds NaN or inf; `xp=np` on concrete values (each eager
    jax.numpy operation is an XLA compilation on the first call of a process)."""
    return ~(xp.all(xp.isfinite(q0)) & xp.all(xp.isfinite(qd0)))


def _verdict(system, t0, q0, qd0, tol, failed_code) -> InitialCheck:
    """nonfinite_state for NaN/inf, else `failed_code` where a residual exceeds `tol`."""
    res = residuals(system, t0, q0, qd0)
    code = first_failure(
        (_nonfinite(q0, qd0), RESULTS.nonfinite_state), (~(res.max_abs() <= tol), failed_code)
    )
    return InitialCheck(code, _worst(res))


def _nonfinite_message(q0, qd0) -> str:
    bad = [
        f"{name}[{i}] = {v}"
        for name, x in (("q0", q0), ("qd0", qd0))
        for i, v in enumerate(np.asarray(x))
        if not np.isfinite(v)
    ]
    return (
        f"The initial state contains NaN or inf: {', '.join(bad[:6])}"
        f"{' ...' if len(bad) > 6 else ''}. Give finite q0 and qd0."
    )


class AbstractInitialConditions(eqx.Module):
    """How :func:`ukjax.simulate` treats the initial state $(q_0, \\dot q_0)$."""

    @abc.abstractmethod
    def apply(self, system: System, t0, q0, qd0) -> tuple[jax.Array, jax.Array, InitialCheck]:
        """The initial state to integrate from and the verdict on it (inside `jit`)."""

    def apply_eagerly(self, system: System, t0, q0, qd0):
        """Called outside any transformation with concrete values: raise a plain ValueError
        now if the state is unusable. Returns `(policy, q0, qd0)` for the traced part."""
        if _nonfinite(np.asarray(q0), np.asarray(qd0), xp=np):
            raise ValueError(_nonfinite_message(q0, qd0))
        return self, q0, qd0

    def default_stabilization(self) -> AbstractStabilization:
        r"""`simulate`'s stabilisation of a smooth run under this policy when none is given.

        `Projection(iterations=1, saves=False)`: one mass-metric Newton step on $q$ and one
        on $\dot q$ after every step, which removes the integration drift (a step starts
        within the local error of the manifold, so one step of quadratic convergence
        reaches round-off). Without it, drift splits the crossing of two assembly branches
        at a singular configuration into two sheets that each join half of one branch to
        half of the other, and the exact UK motion on the drifted sheet turns onto the
        wrong branch (IFToMM benchmark A02).
        """
        return Projection(iterations=1, saves=False)


class IgnoreInitial(AbstractInitialConditions):
    """Integrate the initial state as given (the UK equation preserves any violation).
    Only NaN or inf is refused.

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import CartesianPendulum
        >>> q0, qd0 = jnp.array([1.1, 0.0]), jnp.zeros(2)
        >>> ukjax.IgnoreInitial().apply(CartesianPendulum(), 0.0, q0, qd0)[0] is q0
        True
    """

    def apply(self, system, t0, q0, qd0):
        code = first_failure((_nonfinite(q0, qd0), RESULTS.nonfinite_state))
        return q0, qd0, InitialCheck(code, {})

    def apply_eagerly(self, system, t0, q0, qd0):
        super().apply_eagerly(system, t0, q0, qd0)
        return _Checked(), q0, qd0  # finite: nothing else to check

    def default_stabilization(self) -> AbstractStabilization:
        """None: the given violation is integrated as it is, so nothing is projected."""
        return NoStabilization()


class _Checked(IgnoreInitial):
    """An initial state that `apply_eagerly` has already checked (finite, and consistent
    where the policy asks for it): nothing is left to check in the program."""

    def apply(self, system, t0, q0, qd0):
        success: Any = RESULTS.successful
        return q0, qd0, InitialCheck(success, {}, checked=True)


class ProjectInitial(AbstractInitialConditions):
    """Move the initial state to the nearest consistent one in the mass metric
    (:func:`ukjax.project_initial_conditions`, `iterations` Newton steps), and refuse it
    (`RESULTS.projection_failed`) if the residual is still above `tol` (default as
    :class:`CheckInitial`): contradictory constraints, or a singular constraint Jacobian.

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import CartesianPendulum
        >>> q, qd, check = ukjax.ProjectInitial().apply(
        ...     CartesianPendulum(), jnp.asarray(0.0), jnp.array([1.1, 0.0]), jnp.array([0.3, 1.0]))
        >>> [round(float(v), 6) for v in q], bool(check.code == ukjax.RESULTS.successful)
        ([1.0, 0.0], True)
    """

    iterations: int = eqx.field(static=True, default=12)
    tol: float | None = eqx.field(static=True, default=None)

    def apply(self, system, t0, q0, qd0):
        tol = _tol(self.tol, q0.dtype)
        q, qd = project(system, t0, q0, qd0, self.iterations)
        check = _verdict(system, t0, q, qd, tol, RESULTS.projection_failed)
        nonfinite_input = _nonfinite(q0, qd0)
        code = RESULTS.where(nonfinite_input, RESULTS.nonfinite_state, check.code)
        return q, qd, InitialCheck(code, check.values)


@jit(batched=False)
def _residuals_jit(system, t0, q0, qd0):
    """The residuals, their largest absolute value and the worst of each level, in one
    program (as eager operations each would be compiled on its own)."""
    res = residuals(system, t0, q0, qd0)
    return res.max_abs(), _worst(res)


class CheckInitial(AbstractInitialConditions):
    """Refuse initial conditions whose constraint residuals $|\\varphi|$, $|\\dot\\varphi|$,
    $|\\psi|$ exceed `tol` (default 1e-8 in float64, 1e-4 in float32), stating them.

    Outside `jit` the refusal is a `ValueError`; inside, an `EquinoxRuntimeError`, or with
    `simulate(..., throw=False)` the code `RESULTS.initial_conditions_inconsistent`.

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import CartesianPendulum
        >>> try:
        ...     ukjax.simulate(CartesianPendulum(), jnp.array([1.1, 0.0]), jnp.zeros(2),
        ...                    jnp.linspace(0.0, 1.0, 3), initial_conditions=ukjax.CheckInitial())
        ... except ValueError as e:
        ...     print(str(e)[:60])
        The initial conditions violate the constraints at t0 = 0.0:
    """

    tol: float | None = eqx.field(static=True, default=None)

    def apply(self, system, t0, q0, qd0):
        tol = _tol(self.tol, q0.dtype)
        return q0, qd0, _verdict(system, t0, q0, qd0, tol, RESULTS.initial_conditions_inconsistent)

    def apply_eagerly(self, system, t0, q0, qd0):
        super().apply_eagerly(system, t0, q0, qd0)
        worst, per_level = _residuals_jit(system, t0, q0, qd0)
        tol = _tol(self.tol, q0.dtype)
        if not float(worst) <= tol:
            w = {k: float(v) for k, v in per_level.items()}
            fix = message(RESULTS.initial_conditions_inconsistent).split("). ", 1)[1]
            raise ValueError(
                f"The initial conditions violate the constraints at t0 = {float(t0)}: "
                f"max|phi| = {w['max_position_residual']:.3e}, "
                f"max|phi_dot| = {w['max_velocity_residual']:.3e}, "
                f"max|psi| = {w['max_nonholonomic_residual']:.3e} "
                f"(tolerance {tol:.1e}, ukjax.CheckInitial(tol=...)). {fix}"
            )
        return _Checked(), q0, qd0


def check_initial_policy(policy) -> AbstractInitialConditions:
    """`policy` (None: :class:`CheckInitial`), or a TypeError saying what to pass."""
    if policy is None:
        return CheckInitial()
    if isinstance(policy, AbstractInitialConditions):
        return policy
    hint = {"check": "CheckInitial()", "project": "ProjectInitial()", "ignore": "IgnoreInitial()"}
    extra = ""
    if isinstance(policy, str) and policy in hint:
        extra = f" (for {policy!r}, pass ukjax.{hint[policy]})"
    raise TypeError(
        "initial_conditions must be ukjax.CheckInitial(tol=None) (default), "
        f"ukjax.ProjectInitial() or ukjax.IgnoreInitial(); got {policy!r}{extra}."
    )
