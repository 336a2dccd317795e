r"""What :func:`ukjax.simulate` does with initial conditions that may violate the
constraints: strategy objects :class:`CheckInitial` (the default), :class:`ProjectInitial`
and :class:`IgnoreInitial`."""

from __future__ import annotations

import abc

import equinox as eqx
import jax
import jax.numpy as jnp

from ._errors import error_if
from ._projection import project
from ._residuals import ConstraintResiduals, residuals
from ._system import System


def default_ic_tol(dtype) -> float:
    """Absolute tolerance on the initial constraint residuals: 1e-8 (float64), 1e-4 (float32)."""
    return 1e-8 if jnp.finfo(dtype).bits >= 64 else 1e-4


_FIX = (
    "Fix q0/qd0, or pass initial_conditions=ukjax.ProjectInitial() to simulate (or call "
    "ukjax.project_initial_conditions) to move them to the nearest consistent state in the "
    "mass metric, or initial_conditions=ukjax.IgnoreInitial() to integrate them as they are "
    "(the UK equation then preserves the initial violation)."
)


class AbstractInitialConditions(eqx.Module):
    """How :func:`ukjax.simulate` treats the initial state $(q_0, \\dot q_0)$."""

    @abc.abstractmethod
    def apply(self, system: System, t0, q0, qd0) -> tuple[jax.Array, jax.Array]:
        """The initial state to integrate from (inside `jit`; may raise at run time)."""

    def apply_eagerly(self, system: System, t0, q0, qd0) -> AbstractInitialConditions:
        """Called outside any transformation with concrete values: do what can be done
        now (e.g. raise a plain ValueError) and return the policy left for `apply`."""
        return self


class IgnoreInitial(AbstractInitialConditions):
    """Integrate the initial state as given (the UK equation preserves any violation).

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import CartesianPendulum
        >>> q0, qd0 = jnp.array([1.1, 0.0]), jnp.zeros(2)
        >>> ukjax.IgnoreInitial().apply(CartesianPendulum(), 0.0, q0, qd0)[0] is q0
        True
    """

    def apply(self, system, t0, q0, qd0):
        return q0, qd0


class ProjectInitial(AbstractInitialConditions):
    """Move the initial state to the nearest consistent one in the mass metric
    (:func:`ukjax.project_initial_conditions`, `iterations` Newton steps).

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import CartesianPendulum
        >>> q, qd = ukjax.ProjectInitial().apply(CartesianPendulum(), jnp.asarray(0.0),
        ...                                      jnp.array([1.1, 0.0]), jnp.array([0.3, 1.0]))
        >>> [round(float(v), 6) for v in q]
        [1.0, 0.0]
    """

    iterations: int = eqx.field(static=True, default=12)

    def apply(self, system, t0, q0, qd0):
        return project(system, t0, q0, qd0, self.iterations)


def _worst(res: ConstraintResiduals) -> dict[str, jax.Array]:
    return {
        "max_position_residual": jnp.max(jnp.abs(res.position), initial=0.0),
        "max_velocity_residual": jnp.max(jnp.abs(res.velocity), initial=0.0),
        "max_nonholonomic_residual": jnp.max(jnp.abs(res.nonholonomic), initial=0.0),
    }


@eqx.filter_jit
def _residuals_jit(system, t0, q0, qd0):
    return residuals(system, t0, q0, qd0)


class CheckInitial(AbstractInitialConditions):
    """Refuse initial conditions whose constraint residuals $|\\varphi|$, $|\\dot\\varphi|$,
    $|\\psi|$ exceed `tol` (default 1e-8 in float64, 1e-4 in float32), stating them.

    Outside `jit` the refusal is a `ValueError`; inside, an `EquinoxRuntimeError`.

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

    def _tol(self, dtype) -> float:
        return default_ic_tol(dtype) if self.tol is None else self.tol

    def apply(self, system, t0, q0, qd0):
        res = residuals(system, t0, q0, qd0)
        msg = (
            "ukjax: the initial conditions violate the constraints (max |phi|, |phi_dot|, "
            "|psi| above the tolerance of ukjax.CheckInitial). " + _FIX
        )
        q0 = error_if(q0, res.max_abs() > self._tol(q0.dtype), msg, **_worst(res))
        return q0, qd0

    def apply_eagerly(self, system, t0, q0, qd0):
        res = _residuals_jit(system, t0, q0, qd0)
        tol = self._tol(q0.dtype)
        if not float(res.max_abs()) <= tol:
            w = {k: float(v) for k, v in _worst(res).items()}
            raise ValueError(
                f"The initial conditions violate the constraints at t0 = {float(t0)}: "
                f"max|phi| = {w['max_position_residual']:.3e}, "
                f"max|phi_dot| = {w['max_velocity_residual']:.3e}, "
                f"max|psi| = {w['max_nonholonomic_residual']:.3e} "
                f"(tolerance {tol:.1e}, ukjax.CheckInitial(tol=...)). " + _FIX
            )
        return IgnoreInitial()  # checked


def check_initial_policy(policy) -> AbstractInitialConditions:
    """`policy` (None: :class:`CheckInitial`), or a TypeError saying what to pass."""
    if policy is None:
        return CheckInitial()
    if isinstance(policy, AbstractInitialConditions):
        return policy
    hint = {"check": "CheckInitial()", "project": "ProjectInitial()", "ignore": "IgnoreInitial()"}
    extra = (
        f" (for {policy!r}, pass ukjax.{hint[policy]})"
        if isinstance(policy, str) and policy in hint
        else ""
    )
    raise TypeError(
        "initial_conditions must be ukjax.CheckInitial(tol=None) (default), "
        f"ukjax.ProjectInitial() or ukjax.IgnoreInitial(); got {policy!r}{extra}."
    )
