r"""The one vector field of every run: the UK acceleration of a system at a state, in a mode.

A :class:`Field` maps $(t, (q, \dot q))$ to $(\dot q, \ddot q)$ through one UK solve
(:func:`ukjax._dynamics.evaluate`, with the run's `uk_solver` and kernels). In a smooth run
that is all; in a run with contacts the :class:`Mode` (which contacts are engaged, which
frictional ones slide) adds the engaged contacts' rows
$\nabla g_i\,\ddot q = \ddot g_i^\star - (\ddot g_i)_{\ddot q = 0}$ of the contact law
(:mod:`ukjax._contact`) and the friction law's forces (:mod:`ukjax._friction`). The smooth
driver (:mod:`ukjax._simulate`), the event-driven one (:mod:`ukjax._hybrid`),
:func:`ukjax.contact_forces` and :func:`ukjax.friction_forces` all evaluate it.
"""

from __future__ import annotations

import warnings

import equinox as eqx
import jax
import jax.numpy as jnp

from ._constraints import rows
from ._contact import AbstractContact, Impact
from ._dynamics import (
    Evaluation,
    UKInputs,
    evaluate,
    evaluate_rows,
    mass_and_force,
    nonideal_force,
    row_solve,
    symmetric_mass,
    system_infeasibility,
)
from ._friction import (
    AbstractFriction,
    FrictionState,
    declares_friction,
    default_friction,
    friction_state,
    multipliers,
    tangent_dim,
    unit,
)
from ._latches import acceleration_rows, latch_state
from ._latches import event_values as latch_event_values
from ._precision import full_precision
from ._residuals import as_rows, second_along_motion
from ._results import RESULTS
from ._rewrite import rewritten
from ._stabilization import AbstractStabilization, NoStabilization
from ._system import System, as_time, check_state, floatify
from ._uk import Failures
from ._uk_solvers import AbstractUKSolver, check_uk_solver
from ._wrapped import probe_failures
from ._xla import jit, traced_once


class ContactState(eqx.Module):
    """The contact quantities at one state: values, rates, Jacobian, and the part of the
    second derivative that does not depend on the acceleration."""

    g: jax.Array
    gd: jax.Array
    G: jax.Array
    gdd0: jax.Array


def gap_function(system: System, dtype):
    r"""$(t, q) \mapsto g(q, t)$, the system's unilateral constraints as a 1-D array."""
    g = rewritten(system.unilateral)
    return lambda t_, q_: as_rows(g(t_, q_), "unilateral", system, dtype)


def count_contacts(system: System, t, q) -> int | None:
    """k, the number of unilateral constraints `system` declares (None if `unilateral`
    returns None; 0 for an empty array), its gaps checked as :func:`gap_function` takes
    them (:func:`ukjax._residuals.as_rows`: a scalar g is one contact, as a scalar phi is
    one holonomic constraint; another shape is a ValueError at trace time). `t`, `q` may be
    shapes (`jax.ShapeDtypeStruct`)."""
    if jax.eval_shape(lambda t_, q_: system.unilateral(t_, q_), t, q) is None:
        return None
    return jax.eval_shape(gap_function(system, q.dtype), t, q).shape[0]


@traced_once  # the event code asks for it again and again at one state
def contact_state(system: System, t, q, qd) -> ContactState:
    if system.unilateral(t, q) is None:  # impulses only
        empty = jnp.zeros((0,), q.dtype)
        return ContactState(empty, empty, jnp.zeros((0, q.shape[0]), q.dtype), empty)
    f = gap_function(system, q.dtype)
    g, gd, gdd0 = second_along_motion(f, t, q, qd)
    G = jax.jacfwd(lambda x: f(t, x))(q)
    return ContactState(g, gd, G, gdd0)


class Mode(eqx.Module):
    """The discrete state of a run with contacts: which contacts are `engaged` (k,) and, for
    frictional contacts, the `sliding` heading (k, d) (d tangent rows per contact): zero
    stuck (or no friction); +1 / -1 sliding along / against the tangent row for d = 1; the
    unit slip direction at the segment's start for d = 2 (:mod:`ukjax._friction`); and
    which of the system's latches are `latched` (L,) (None: a system without latches;
    :mod:`ukjax._latches`)."""

    engaged: jax.Array
    sliding: jax.Array
    latched: jax.Array | None = None


class FieldEvaluation(eqx.Module):
    """One evaluation of a :class:`Field`: the UK evaluation `ev` and, in a run with
    contacts, the contact quantities `cs`, the number `m` of bilateral rows, and with
    friction the tangential state `fs` and the contacts' `normal` and `tangential`
    forces."""

    ev: Evaluation
    cs: ContactState | None = None
    m: int = eqx.field(static=True, default=0)
    fs: FrictionState | None = None
    normal: jax.Array | None = None
    tangential: jax.Array | None = None


class StateInputs(eqx.Module):
    """What the UK equation of a run with contacts takes from one state whichever contacts
    are engaged: the system's own inputs `uk` (M, Q, the bilateral rows and the engaged
    latches', C), the contact quantities `cs`, the contact law's target normal
    accelerations `target` and, with friction, the tangential state `fs`."""

    uk: UKInputs
    cs: ContactState
    target: jax.Array
    fs: FrictionState | None = None


class Field(eqx.Module):
    r"""$(q, \dot q) \mapsto (\dot q, \ddot q)$ with the UK acceleration (module docstring).

    `contact` is None in a smooth run (no unilateral constraints, no impulses); the
    diffrax `args` of a run with contacts is its :class:`Mode`.

    Where the run's checks happen (`check`): with `per_stage`, inside the field at every
    stage, raising from inside the solve (`throw=True`, and adjoints that refuse events,
    diffrax's `BacksolveAdjoint`; see :func:`ukjax._simulate._place_checks`); otherwise
    the smooth run's failure event checks every accepted step and stops the run at the
    first state that fails (`throw=True` then raises that code after the solve, with its
    numbers printed), and an event-driven run checks each segment's end state. The event
    costs one UK evaluation per step and compilation; the stage checks cost three
    conditionals per stage, which under a wide `vmap` cost more than the event
    (`benchmarks/RESULTS.md`)."""

    system: System
    stabilization: AbstractStabilization
    uk_solver: AbstractUKSolver
    check: bool = eqx.field(static=True)
    consistency_tol: float | None = eqx.field(static=True)
    throw: bool = eqx.field(static=True)
    per_stage: bool = eqx.field(static=True, default=False)
    contact: AbstractContact | None = None
    friction: AbstractFriction | None = None

    def evaluate(self, t, y, mode: Mode | None = None) -> FieldEvaluation:
        """The UK equation at (t, y): the system's own rows only in a smooth run, with the
        engaged contacts' rows and their friction in `mode` otherwise."""
        if self.contact is None:
            system, (q, qd) = self.system.with_uk_solver(self.uk_solver), y
            return FieldEvaluation(evaluate(system, t, q, qd, self.stabilization, self.uk_solver))
        assert mode is not None, "a run with contacts evaluates its field in a mode"
        return self.evaluate_at(self.state_inputs(t, y, mode.latched), mode)

    def state_inputs(self, t, y, latched=None) -> StateInputs:
        """What the UK equation of a run with contacts takes from the state (t, y) alone,
        whichever contacts are engaged (:class:`StateInputs`), the `latched` latches'
        rows among the bilateral ones."""
        system, (q, qd) = self.system.with_uk_solver(self.uk_solver), y
        assert self.contact is not None
        M, Q = mass_and_force(system, t, q, qd)
        A, b = rows(system, t, q, qd, self.stabilization)
        if latched is not None:  # the engaged latches' rows join the bilateral ones
            A_l, b_l = acceleration_rows(latch_state(system, t, q, qd), latched)
            A, b = jnp.concatenate([A, A_l]), jnp.concatenate([b, b_l])
        cs = contact_state(system, t, q, qd)
        target = self.contact.target_acceleration(cs.g, cs.gd)
        C = nonideal_force(system, t, q, qd)
        fs = None if self.friction is None else friction_state(system, t, q, qd, cs.g.shape[0])
        return StateInputs(UKInputs(t, q, qd, M, Q, A, b, C), cs, target, fs)

    def evaluate_at(self, inputs: StateInputs, mode: Mode) -> FieldEvaluation:
        """The UK equation in `mode` from the state's inputs (:meth:`state_inputs`, formed
        with `mode.latched`): a complementarity oracle forms them once for all its trial
        modes."""
        system = self.system.with_uk_solver(self.uk_solver)
        i, cs = inputs.uk, inputs.cs
        A_c = jnp.where(mode.engaged[:, None], cs.G, 0.0)
        b_c = jnp.where(mode.engaged, inputs.target - cs.gdd0, 0.0)
        m_bilateral = i.A.shape[0]
        A, b = jnp.concatenate([i.A, A_c]), jnp.concatenate([i.b, b_c])
        if self.friction is None:
            uk = UKInputs(i.t, i.q, i.qd, i.M, i.Q, A, b, i.C)
            return FieldEvaluation(evaluate_rows(system, uk, self.uk_solver), cs, m_bilateral)
        fs = inputs.fs
        assert fs is not None
        solve = row_solve(system, i.M, self.uk_solver)
        fr = self.friction.solve(solve, i.Q, A, b, i.C, fs, mode.engaged, mode.sliding)
        infeasibility = system_infeasibility(system, i.t, i.q, i.qd)
        uk = UKInputs(i.t, i.q, i.qd, i.M, i.Q, fr.A, fr.b, fr.C)
        ev = Evaluation(uk, fr.terms, infeasibility, symmetric_mass(system))
        return FieldEvaluation(ev, cs, m_bilateral, fs, fr.normal, fr.tangential)

    def forces(self, fe: FieldEvaluation) -> jax.Array:
        r"""Contact (normal) multipliers (> 0 pushing): least-squares $A^T\lambda = Q_c$."""
        if fe.normal is not None:
            return fe.normal
        assert fe.cs is not None
        k, inputs = fe.cs.g.shape[0], fe.ev.inputs
        lam = multipliers(inputs.A, fe.ev.terms, inputs.C, self.uk_solver.kernels)
        return lam[fe.m : fe.m + k]

    @eqx.filter_jit  # traced once, reused by every call of the event's root find
    def event_values(self, t, y, mode: Mode) -> jax.Array:
        """Per contact the contact law's event value, then the friction law's (if any),
        then per latch its engage or release value (if any)."""
        fe = self.evaluate(t, y, mode)
        assert self.contact is not None and fe.cs is not None
        force = self.forces(fe) if self.contact.uses_force or fe.normal is not None else None
        values = [self.contact.event_value(mode.engaged, fe.cs.g, fe.cs.gd, force)]
        if self.friction is not None:
            assert fe.fs is not None
            values.append(
                self.friction.event_value(
                    mode.engaged, mode.sliding, fe.fs, fe.normal, fe.tangential
                )
            )
        if mode.latched is not None:
            values.append(latch_event_values(self.system, t, y[0], y[1], mode.latched))
        return jnp.concatenate(values)

    def event_floors(self, mode: Mode, dtype) -> jax.Array:
        """Per event value (the layout of :meth:`event_values`): the level above 0 its
        segment start is shifted to (:meth:`ukjax.AbstractFriction.event_floor`)."""
        k = mode.engaged.shape[0]
        floors = [jnp.zeros(k, dtype)]
        if self.friction is not None:
            floors.append(self.friction.event_floor(mode.engaged, mode.sliding).astype(dtype))
        if mode.latched is not None:
            floors.append(jnp.zeros(mode.latched.shape[0], dtype))
        return jnp.concatenate(floors)

    def failures(self, t, y, mode: Mode | None = None) -> Failures:
        """The UK checks at the state y (in `mode`)."""
        return _failures_call(self, t, y, mode)

    def end_code(self, t, y, span, fired, stalled) -> tuple[RESULTS, Failures]:
        """The code of a smooth run that ended at (t, y), and the checks that name it: those
        there when the failure event `fired`; when the run `stalled` (ended with a
        failure that no event explains), the first failing ones just ahead (`successful`
        if none; see :func:`ukjax._wrapped.probe_failures`). In a branch taken only when
        some trajectory failed."""
        qdd_at = lambda t, y: _field_call(self, t, y, None)[1]
        here, ahead = probe_failures(self.failures, qdd_at, t, y, span, fired | stalled)
        named = jax.tree_util.tree_map(lambda a, b: jnp.where(fired, a, b), here, ahead)
        code = RESULTS.where(fired | stalled, named.code(), RESULTS.successful)
        return code, named

    def __call__(self, t, y, args):
        return _field_call(self, t, y, None if self.contact is None else args)


# Nested jits: an explicit Runge-Kutta step calls the field at every stage (13 for Dopri8),
# the failure event and the probes call the checks again; each is traced once per solve.
@eqx.filter_jit
def _field_call(field: Field, t, y, mode: Mode | None):
    ev = field.evaluate(t, y, mode).ev
    return y[1], ev.field_qdd(field.check and field.per_stage, field.throw, field.consistency_tol)


@eqx.filter_jit
def _failures_call(field: Field, t, y, mode: Mode | None) -> Failures:
    return field.evaluate(t, y, mode).ev.failures(field.consistency_tol)


def _mode_field(system, contact, friction, uk_solver, t, q) -> Field:
    return Field(
        system,
        NoStabilization(),
        check_uk_solver(uk_solver),
        check=False,
        consistency_tol=None,
        throw=False,
        contact=Impact() if contact is None else contact,
        friction=default_friction(friction, declares_friction(system, t, q)),
    )


@full_precision
def contact_forces(
    system: System,
    t,
    q,
    qd,
    engaged,
    sliding=None,
    *,
    contact: AbstractContact | None = None,
    friction: AbstractFriction | None = None,
    uk_solver: AbstractUKSolver | None = None,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    r"""The acceleration and contact forces of a system with contacts in a given mode.

    The mode is `engaged` (k,) booleans and, for a frictional system, `sliding`; the laws
    are keywords: the same arguments as :func:`ukjax.friction_forces`. (A law given as the
    sixth argument, the former order, is still taken as `contact`, with a
    DeprecationWarning.)

    With the engaged contacts' rows in the UK equation (module :mod:`ukjax._contact`), and
    for a system that declares `friction`, the friction of the engaged contacts in the
    modes `sliding` ((k,) ints: 0 stuck, ±1 sliding; default all stuck) under `friction`
    (default :class:`ukjax.Coulomb`; see :func:`ukjax.friction_forces`):

    **Returns:** `(qdd, Q_contact, forces)`: the acceleration (n,), the generalized normal
    contact force $\sum_i \lambda_i\nabla g_i$ (n,) and the contact multipliers $\lambda$
    (one per contact, > 0 pushing, 0 for free contacts). Along a solution use the saved
    modes: `jax.vmap(lambda t, q, qd, e: ukjax.contact_forces(system, t, q, qd, e,
    contact=law))(sol.ts, sol.q, sol.qd, sol.engaged)`.

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import BouncingBall
        >>> qdd, Qc, lam = ukjax.contact_forces(BouncingBall(mass=2.0, g=10.0), 0.0,
        ...     jnp.zeros(1), jnp.zeros(1), jnp.array([True]), contact=ukjax.Impact())
        >>> float(qdd[0]), float(lam[0])      # resting on the floor: the floor carries m g
        (0.0, 20.0)
    """
    if isinstance(sliding, AbstractContact):  # the former order: (..., engaged, contact)
        if contact is not None:
            raise TypeError("contact_forces: two contact laws given (sixth argument and contact=).")
        warnings.warn(
            "contact_forces(system, t, q, qd, engaged, law): pass the law as contact=law; the "
            "sixth argument is now `sliding`, as in friction_forces.",
            DeprecationWarning,
            stacklevel=2,
        )
        sliding, contact = None, sliding
    qdd, lam, _, cs = _forces_in_mode(
        system, t, q, qd, engaged, contact, sliding, friction, uk_solver
    )
    return qdd, cs.G.T @ lam, lam


@full_precision
def friction_forces(
    system: System,
    t,
    q,
    qd,
    engaged,
    sliding=None,
    *,
    contact: AbstractContact | None = None,
    friction: AbstractFriction | None = None,
    uk_solver: AbstractUKSolver | None = None,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    r"""The acceleration, normal and friction forces of a frictional system in a given mode.

    `engaged` (k,) booleans and `sliding` (k,) ints (0 stuck, +1/-1 sliding along/against
    the tangent row $T_i$ of `System.friction`; default all stuck) as saved in
    `Solution.engaged` and `Solution.sliding`. Stuck contacts hold $T_i\ddot q =
    -\dot T_i\dot q$ (their UK constraint force is the friction), sliding ones feel
    $-\mu_kN_is_i$ with the normal forces $N$ solved together with it (module
    :mod:`ukjax._friction`). In 3-D (d = 2 tangent rows per contact) a sliding contact
    (`sliding` 1) slides along its slip velocity $T_i\dot q$ (less its surface's velocity
    where `System.friction` declares one); at zero slip pass its heading instead,
    `sliding` of shape (k, 2) (a zero row: stuck).

    **Returns:** `(qdd, normal, tangential)`: the acceleration (n,), the normal forces
    $N$ (k,) (> 0 pushing, 0 for free contacts) and the friction forces along each
    $T_i$ ((k,) for planar contact, (k, 2) in 3-D). A stuck contact is admissible while
    $|F_t| \le \mu_sN$.

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
    heading = _heading(field, t, q, qd, engaged, sliding)
    qdd, forces, tangential, cs = _evaluate_mode(field, t, q, qd, Mode(engaged, heading))
    if tangential is not None and tangential.shape[1] == 1:
        tangential = tangential[:, 0]
    return qdd, forces, tangential, cs


def _heading(field: Field, t, q, qd, engaged, sliding) -> jax.Array:
    """The (k, d) headings of the mode from the user's `sliding`: (k,) ints as saved in
    `Solution.sliding` (for d = 2 the slip direction is then read from the velocity), or
    (k, d) headings."""
    k = engaged.shape[0]
    d = tangent_dim(field.system, t, q)
    if sliding is None:
        return jnp.zeros((k, d), q.dtype)
    sliding = jnp.asarray(sliding, q.dtype)
    if sliding.shape == (k, d):
        return sliding
    if sliding.shape != (k,):
        raise ValueError(f"sliding must have shape ({k},) or ({k}, {d}); got {sliding.shape}.")
    if d == 1:
        return sliding[:, None]
    vt = friction_state(field.system, t, q, qd, k).vt
    return jnp.where((sliding != 0)[:, None], unit(vt, 0.0), 0.0)


@jit(batched=False)
def _evaluate_mode(field: Field, t, q, qd, mode: Mode):
    fe = field.evaluate(t, (q, qd), mode)
    assert fe.cs is not None
    return fe.ev.terms.qdd, field.forces(fe), fe.tangential, fe.cs
