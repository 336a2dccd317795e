"""One error model: the result codes of a simulation, extending diffrax's.

Every run-time failure has one code. `simulate(..., throw=True)` (the default) raises an
`equinox.EquinoxRuntimeError` whose message is the code's text; `throw=False` returns the
code in `Solution.result` (and a sweep keeps one per trajectory) so that a batch never aborts
for one bad member.
"""

from __future__ import annotations

from typing import Any

import diffrax
import jax
import jax.numpy as jnp


_STIFF_HINT = (
    " If the problem is stiff (stiff springs or dampers, large Baumgarte gains, fast "
    "servo-constraint dynamics), an explicit solver needs tiny steps: use an implicit one, "
    "e.g. simulate(..., solver=diffrax.Kvaerno5()). Otherwise raise max_steps, or loosen "
    "rtol/atol."
)


class RESULTS(diffrax.RESULTS):  # pyright: ignore[reportGeneralTypeIssues]
    r"""The result codes of :func:`ukjax.simulate`: diffrax's, plus the ones below.

    - `mass_matrix_not_spd`: $M$ is not symmetric, or not positive definite on the
      motions the constraints allow (a singular $M$ whose free directions the constraints
      fix runs, completed as in Udwadia & Phohomsiri 2006, when the system declares
      ``semidefinite_mass``).
    - `nonfinite_state`: NaN or inf in the state, the parameters, $M$, $Q$, $A$, $b$ or $C$.
    - `inconsistent_constraints`: $b$ is not in the range of $A$.
    - `initial_conditions_inconsistent`: the initial state violates the constraints.
    - `projection_failed`: the state could not be projected onto the constraints.
    - `max_steps_stiff`: the step limit was reached with many rejected steps (stiffness).
    - `initial_penetration`: a unilateral constraint $g_i \ge 0$ is violated at the start.
    - `max_events_reached`: a hybrid run needed more events than `max_events`.
    - `servo_infeasible`: the actuators cannot realise a servo-constraint.
    - `invalid_friction`: friction coefficients with $\mu_s < \mu_k$, $\mu_k < 0$ or NaN.
    - `contact_unsolved`: the complementarity problem of the contacts at an event (which
      contacts push, which impulses) has no solution within the pivot bound.
    - `step_size_collapsed`: an adaptive step shrank to the round-off of $t$ (every step
      ahead was rejected) and no check names a cause.

    `successful` is code 0. Compare with `==`, e.g. `sol.result == ukjax.RESULTS.successful`.

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import CartesianPendulum
        >>> sol = ukjax.simulate(CartesianPendulum(mass=-1.0), jnp.array([1.0, 0.0]),
        ...                      jnp.zeros(2), jnp.linspace(0.0, 1.0, 3), throw=False)
        >>> bool(sol.result == ukjax.RESULTS.mass_matrix_not_spd)
        True
    """

    mass_matrix_not_spd = (
        "ukjax: the mass matrix is not symmetric positive definite on the motions the "
        "constraints "
        "allow: some coordinate, or combination of coordinates, has no (or a negative) "
        "inertia and no constraint fixes it, so the accelerations are not determined. A "
        "singular M is fine where the constraints fix what it leaves free ([M; A] of full "
        "column rank: a quaternion's norm, a redundant coordinate tied by a constraint) if "
        "the system says so: define semidefinite_mass(self) returning True. "
        "Check for a zero or negative mass or inertia, a coordinate the kinetic energy does "
        "not use (a q0 longer than the system), a singular parametrisation (Euler angles "
        "at gimbal lock), or an asymmetric mass_matrix. ukjax.acceleration(system, t, q, qd) "
        "at the state names the motion left undetermined and its coordinates."
    )
    nonfinite_state = (
        "ukjax: non-finite value (NaN or inf) in the state or in the inputs of the "
        "Udwadia-Kalaba equation (M, Q, A, b or C). Check q0, qd0 and the parameters for NaN, "
        "and that the simulation has not diverged (shorten the time span or tighten rtol/atol)."
    )
    inconsistent_constraints = (
        "ukjax: inconsistent constraints: b is not in the range of A, so no acceleration "
        "satisfies A qdd = b. Check for contradictory constraints, or for a state that has "
        "drifted far off the constraint manifold of redundant constraints (stabilization="
        "ukjax.Projection() keeps it on), or raise consistency_tol."
    )
    initial_conditions_inconsistent = (
        "ukjax: the initial conditions violate the constraints (max |phi|, |phi_dot|, |psi| "
        "above the tolerance of ukjax.CheckInitial). Fix q0/qd0, or pass "
        "initial_conditions=ukjax.ProjectInitial() to move them to the nearest consistent "
        "state in the mass metric, or ukjax.IgnoreInitial() to integrate them as given."
    )
    projection_failed = (
        "ukjax: the state could not be projected onto the constraints (the residual stays "
        "above the tolerance after the Newton iterations): the constraints are contradictory "
        "(no state satisfies all of them) or their Jacobian is singular where the projection "
        "started. Check the constraints, or start closer to the constraint manifold."
    )
    max_steps_stiff = (
        "ukjax: the maximum number of solver steps was reached, with many of the steps "
        "rejected: the problem looks stiff." + _STIFF_HINT
    )
    max_steps_explicit = (
        "ukjax: the maximum number of solver steps was reached (max_steps)." + _STIFF_HINT
    )
    initial_penetration = (
        "ukjax: the initial state violates a unilateral constraint (some g_i(q0, t0) < 0: "
        "the system starts inside an obstacle). Move q0 to the admissible side g >= 0."
    )
    max_events_reached = (
        "ukjax: the hybrid run needed more events (impacts, mode changes, impulses) than "
        "max_events. Raise simulate(..., max_events=...); for a bouncing system with "
        "restitution close to 1, raise Impact(persist_below=...) so that it comes to rest in "
        "fewer impacts."
    )
    servo_infeasible = (
        "ukjax: the servo-constraints cannot be realised by the actuators (S tau = z has no "
        "solution: too few actuators for the servo, a singular configuration, or a target "
        "the actuators cannot reach, e.g. removing kinetic energy when it is already zero). "
        "Add actuators, change the servo-constraint or its gains, or stop the run before the "
        "singular state."
    )
    invalid_friction = (
        "ukjax: invalid friction coefficients: System.friction must give 0 <= mu_kinetic "
        "<= mu_static (finite). Fix the coefficients (per contact, they may differ)."
    )
    step_size_collapsed = (
        "ukjax: the step size collapsed to the round-off of t (an accepted step no longer "
        "advanced the time): every step past this time was rejected, so the vector field is "
        "non-finite or jumps just ahead. Check the model there (a force or mass matrix "
        "leaving its domain, a NaN parameter), or run with check=True to have ukjax name a "
        "failing check."
    )
    contact_unsolved = (
        "ukjax: the contacts at an event could not be resolved: the complementarity problem "
        "of their impulses (or forces) and normal speeds (or accelerations) has no solution "
        "within the pivot bound (Painleve-type inconsistency of friction, or contacts whose "
        "rows conflict with the bilateral constraints). Check the contact functions "
        "(System.unilateral) and the friction coefficients near this state."
    )


NAMES = (
    "successful",
    "max_steps_reached",
    "singular",
    "breakdown",
    "stagnation",
    "conlim",
    "nonfinite_input",
    "nonlinear_max_steps_reached",
    "nonlinear_divergence",
    "nonfinite",
    "dt_min_reached",
    "event_occurred",
    "max_steps_rejected",
    "internal_error",
    "mass_matrix_not_spd",
    "nonfinite_state",
    "inconsistent_constraints",
    "initial_conditions_inconsistent",
    "projection_failed",
    "max_steps_stiff",
    "max_steps_explicit",
    "initial_penetration",
    "max_events_reached",
    "servo_infeasible",
    "invalid_friction",
    "step_size_collapsed",
    "contact_unsolved",
)
"""The result codes by integer value (0 = successful), as stored by :func:`ukjax.sweep`."""


def name_of(code: int) -> str:
    """The name of an integer result code (:data:`NAMES`), ``"code N"`` for an unknown one."""
    return NAMES[code] if 0 <= code < len(NAMES) else f"code {code}"


def code_of(result) -> jax.Array:
    """The integer code (index in :data:`NAMES`) of a result; -1 for an unknown one."""
    result = promote(result)
    code = jnp.asarray(-1, jnp.int32)
    for i, name in enumerate(NAMES):
        item = getattr(RESULTS, name, None)
        if item is not None:
            code = jnp.where(result == item, i, code)
    return code


def message(item: RESULTS) -> str:
    """The text of a (static) result code."""
    return RESULTS[item]


def promote(result) -> RESULTS:
    """A diffrax result as a :class:`RESULTS` item (a RESULTS item unchanged)."""
    try:
        return RESULTS.promote(result)
    except ValueError:  # already a RESULTS item
        return result


def first_failure(*pairs) -> RESULTS:
    """The code of the first `(failed, code)` pair whose flag is true, else `successful`."""
    out: Any = RESULTS.successful
    for failed, code in reversed(pairs):
        out = RESULTS.where(jnp.asarray(failed), code, out)
    return out
