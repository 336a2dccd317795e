r"""The :class:`System` base class: a mechanical model whose physical parameters are fields."""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import warnings
from typing import TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import ArrayLike

from ._xla import floats_as_arrays


_T = TypeVar("_T")


class System(eqx.Module):
    r"""Base class of a mechanical system $M(q,t)\ddot q = Q(q,\dot q,t)$ with constraints.

    Subclass it, declare the physical parameters as fields (they become pytree leaves, so
    a system can be `vmap`-ed over and differentiated), and define:

    - `kinetic_energy(self, t, q, qd)` **or** `mass_matrix(self, t, q)` (one is required).
      With `kinetic_energy` $T$, the mass matrix is $\partial^2T/\partial\dot q^2$ and all
      velocity-dependent Lagrange terms
      $\partial T/\partial q - \tfrac{\partial^2T}{\partial\dot q\partial q}\dot q
      - \tfrac{\partial^2T}{\partial\dot q\partial t}$ (Coriolis, centrifugal, explicit
      time dependence) are added to $Q$ by automatic differentiation. With `mass_matrix`
      alone, the equation is $M\ddot q = Q$ exactly as written: if your $M$ depends on
      $q$, either give `kinetic_energy` or put the velocity terms in `forces`. If you give
      both, `mass_matrix` is used for $M$ (e.g. a cheaper closed form) and
      `kinetic_energy` for the velocity terms.
    - `potential_energy(self, t, q)` (optional): adds $-\partial V/\partial q$ to $Q$.
    - `forces(self, t, q, qd)` (optional): other impressed generalized forces (damping,
      actuation, gravity written as a force, ...).
    - `holonomic(self, t, q)` (optional): 1-D array $\varphi(q,t)$ of constraints
      $\varphi = 0$; differentiated twice automatically.
    - `nonholonomic(self, t, q, qd)` (optional): 1-D array $\psi(q,\dot q,t)$ of
      constraints $\psi = 0$, possibly nonlinear in $\dot q$; differentiated once.
    - `acceleration_constraint(self, t, q, qd)` (optional): raw rows `(A, b)` of
      $A\ddot q = b$, stacked after the other two.
    - `nonideal_force(self, t, q, qd)` (optional): the vector $C$ that prescribes the
      virtual work $v^TC$ of non-ideal constraints (Udwadia 2004).
    - `unilateral(self, t, q)` (optional): 1-D array $g(q, t)$ of unilateral constraints
      (a scalar for one), admissible where every $g_i \ge 0$ (contacts, obstacles, joint
      limits); how they act
      is chosen by `simulate(..., contact=ukjax.Impact(...))` (see :mod:`ukjax._contact`).
    - `friction(self, t, q)` (optional): Coulomb friction on the unilateral contacts,
      `(T, mu_static, mu_kinetic)` with `T` (k, d, n) the tangent rows of each contact
      (slip velocity $T_i\dot q$; d = 1 planar, d = 2 two orthonormal rows: an isotropic
      cone in 3-D) and the coefficients scalars or (k,) arrays (for d = 2 also (k, 2): an
      elliptic cone, one coefficient per tangent row); it acts
      while a contact is engaged, with the contact's UK force as the normal force
      (`simulate(..., friction=ukjax.Coulomb())`, see :mod:`ukjax._friction`). On a moving
      surface (a conveyor belt, a turntable) return a fourth entry, the surface's velocity
      along the rows `w(t, q)` ((k, d); (k,) planar; (d,) for one contact; or a scalar):
      the slip is then $T_i\dot q - w_i$.
    - `latches(self, t, q)` (optional): (L, r) holonomic constraint rows (or (L,)) that
      hold only while their latch is engaged (a grasp, a latch, a planted foot), and
      `latch_conditions(self, t, q, qd)` returning `(engage, release)`, (L,) values whose
      downward zero crossings engage and release each latch: an engagement is a perfectly
      inelastic impulsive projection, and the latch then keeps $\varphi_j$ at its value
      there (see :mod:`ukjax._latches`).
    - `actuators(self, t, q)` (optional): (n, k) matrix $G$ of the generalized-force
      directions of k control inputs $\tau$ (force $G\tau$); used by
      :class:`ukjax.ServoControlled`.
    - `mass_and_force(self, t, q, qd)` (optional, advanced): return $(M, Q)$ directly,
      bypassing the energies and forces above (used by wrappers such as
      :class:`ukjax.ServoControlled`).
    - `infeasibility(self, t, q, qd)` (optional): a relative residual of something the
      system must realise at each state (a servo-constraint); above the consistency
      tolerance the run fails with `ukjax.RESULTS.servo_infeasible`.

    All methods take the time `t` as a scalar array and `q`, `qd` as (n,) arrays and must be
    written with `jax.numpy`. Unused optional methods return `None`. ukjax calls these
    methods and no others: a method named as the literature names one of them
    (`generalized_force`, `holonomic_constraints`) or misspelled (`potential_enrgy`) would
    be silently unused, so ukjax warns about it (:func:`ukjax._system.misnamed_hooks`);
    a field named as one of them hides it, and ukjax refuses it with a TypeError that says
    so (:func:`ukjax._system.hidden_methods`).

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> class CartesianPendulum(ukjax.System):
        ...     mass: float = 1.0
        ...     length: float = 1.0
        ...     g: float = 9.81
        ...     def kinetic_energy(self, t, q, qd):
        ...         return 0.5 * self.mass * qd @ qd
        ...     def potential_energy(self, t, q):
        ...         return self.mass * self.g * q[1]
        ...     def holonomic(self, t, q):
        ...         return jnp.array([q @ q - self.length**2])
        >>> qdd = ukjax.acceleration(CartesianPendulum(), 0.0, jnp.array([1.0, 0.0]),
        ...                          jnp.array([0.0, 0.0]))
        >>> [round(float(v), 6) for v in qdd]   # released from horizontal: free fall
        [0.0, -9.81]
    """

    def num_coordinates(self) -> int | None:
        """The number n of generalized coordinates, or None if not declared. Declare it
        (override this method) so that a state of the wrong length is refused: JAX clamps
        out-of-bounds indices, so `q[2]` of a 2-vector would silently read `q[1]`."""
        return None

    def semidefinite_mass(self) -> bool:
        r"""Whether the mass matrix may be singular (only positive semi-definite) where the
        constraints fix the motions it leaves free, e.g. a unit quaternion with
        $T = \tfrac12\omega^TJ\omega$ and its norm constraint, or a redundant coordinate
        tied by a constraint. Return True (a static answer, not traced) and the UK solve
        completes a singular $M$ to $M + sA^TA$ (:func:`ukjax._uk.complete_mass`, Udwadia
        & Phohomsiri 2006): the same, unique motion. Off by default: the check it needs at
        every evaluation slows small single runs (measured: ``benchmarks/RESULTS.md``,
        "Singular mass matrices")."""
        return False

    def with_uk_solver(self, uk_solver) -> System:
        """This system as evaluated by a UK solve with `uk_solver` (a
        :class:`ukjax.AbstractUKSolver`): itself, unless its hooks solve a UK equation of
        their own (:class:`ukjax.ServoControlled`, the servo realisation), which then use
        the same solver. Every evaluation of a run calls it with the run's `uk_solver`."""
        return self

    def kinetic_energy(self, t, q, qd) -> ArrayLike:
        raise NotImplementedError(
            f"{type(self).__name__} defines neither kinetic_energy(self, t, q, qd) nor "
            "mass_matrix(self, t, q); define one of them."
        )

    def mass_matrix(self, t, q) -> ArrayLike:
        if not overrides(self, "kinetic_energy"):
            raise NotImplementedError(
                f"{type(self).__name__} defines neither kinetic_energy(self, t, q, qd) nor "
                "mass_matrix(self, t, q); define one of them."
            )
        T = lambda qd: self.kinetic_energy(t, q, qd)
        return jax.hessian(T)(jnp.zeros_like(q))

    def potential_energy(self, t, q) -> ArrayLike | None:
        return None

    def forces(self, t, q, qd) -> ArrayLike | None:
        return None

    def holonomic(self, t, q) -> ArrayLike | None:
        return None

    def nonholonomic(self, t, q, qd) -> ArrayLike | None:
        return None

    def acceleration_constraint(self, t, q, qd) -> tuple[ArrayLike, ArrayLike] | None:
        return None

    def nonideal_force(self, t, q, qd) -> ArrayLike | None:
        return None

    def unilateral(self, t, q) -> ArrayLike | None:
        return None

    def friction(self, t, q) -> tuple[ArrayLike, ArrayLike, ArrayLike] | None:
        return None

    def latches(self, t, q) -> ArrayLike | None:
        return None

    def latch_conditions(self, t, q, qd) -> tuple[ArrayLike, ArrayLike] | None:
        return None

    def actuators(self, t, q) -> ArrayLike | None:
        return None

    def mass_and_force(self, t, q, qd) -> tuple[ArrayLike, ArrayLike] | None:
        return None

    def infeasibility(self, t, q, qd) -> ArrayLike | None:
        return None


def overrides(system: System, name: str) -> bool:
    return getattr(type(system), name) is not getattr(System, name)


def as_time(t, dtype):
    """A scalar time of the state's floating dtype."""
    t = jnp.asarray(t)
    if t.ndim != 0:
        raise ValueError(f"t must be a scalar; got shape {t.shape}.")
    return t.astype(dtype)


def check_system(system, run: bool = False) -> None:
    """A TypeError unless `system` is a :class:`System` (an array there: the matrix form's
    arguments given to a function of a system) or if one of its fields hides a method
    ukjax calls (:func:`hidden_methods`; with `run`, those a run calls too); a warning for
    a method ukjax never calls whose name is that of one it calls, misspelled
    (:func:`misnamed_hooks`)."""
    if not isinstance(system, System):
        got = "an array" if hasattr(system, "shape") else type(system).__name__
        raise TypeError(
            f"system must be a ukjax.System; got {got}. (For the matrices M, Q, A, b of the "
            "UK equation: ukjax.udwadia_kalaba(M, Q, A, b).)"
        )
    hidden = hidden_methods(type(system), run)
    if hidden:  # every such field in one message, not the first alone
        raise TypeError(" ".join(_hidden_message(type(system).__name__, n) for n in hidden))
    for name, hook in misnamed_hooks(type(system)):
        warnings.warn(
            f"{type(system).__name__}.{name} is not a ukjax.System method, so ukjax never "
            f"calls it: did you mean {hook}{_signature(hook)}? Rename it (or, for a "
            "helper of your own, give it a name further from the System's methods).",
            stacklevel=3,
        )


def _hidden_message(cls_name: str, name: str) -> str:
    sig = _signature(name)
    return (
        f"{cls_name}.{name} is a field, but ukjax calls {name}{sig} as a method of the "
        f"system, and the field hides it. Rename the field (e.g. `{name}_value`) and, if it "
        f"is what the method should give, define `def {name}{sig}: return self.{name}_value`."
    )


_RUN_ONLY = ("unilateral", "friction", "latches")
"""Methods that a run (`simulate`) calls and the functions of one state do not."""

_WHEN_USED = ("latch_conditions", "actuators")
"""Methods called only where the system uses them (latches, servo control)."""


def hidden_methods(cls: type, run: bool = False) -> list[str]:
    """The fields of the System subclass `cls` named as a System method that ukjax calls
    on every system (with `run`, also those a run calls: :data:`_RUN_ONLY`): such a field
    hides the method, and the call fails with JAX's "object is not callable".

    Example:
        >>> import jax, ukjax
        >>> from ukjax._system import hidden_methods
        >>> class Pushed(ukjax.System):
        ...     forces: jax.Array  # a constant force, meant as what forces() returns
        ...     def kinetic_energy(self, t, q, qd):
        ...         return 0.5 * qd @ qd
        >>> hidden_methods(Pushed)
        ['forces']
    """
    skip = set(_WHEN_USED) | (set() if run else set(_RUN_ONLY))
    names = set(_hooks()) - skip
    return [f.name for f in dataclasses.fields(cls) if f.name in names]


def _hooks() -> list[str]:
    """The System's public methods."""
    public = lambda name, value: inspect.isfunction(value) and not name.startswith("_")
    return [name for name, value in vars(System).items() if public(name, value)]


def _signature(hook: str) -> str:
    """A System method's arguments, for a message: `(self, t, q, qd)`."""
    return str(inspect.signature(getattr(System, hook))).split(" ->")[0]


_ALIASES = (
    ("force", "forces"),
    ("generalized_force", "forces"),
    ("generalized_forces", "forces"),
    ("applied_force", "forces"),
    ("applied_forces", "forces"),
    ("external_force", "forces"),
    ("external_forces", "forces"),
    ("potential", "potential_energy"),
    ("kinetic", "kinetic_energy"),
    ("lagrangian", "kinetic_energy"),
    ("inertia_matrix", "mass_matrix"),
    ("constraint", "holonomic"),
    ("constraints", "holonomic"),
    ("holonomic_constraint", "holonomic"),
    ("holonomic_constraints", "holonomic"),
    ("nonholonomic_constraint", "nonholonomic"),
    ("nonholonomic_constraints", "nonholonomic"),
    ("unilateral_constraint", "unilateral"),
    ("unilateral_constraints", "unilateral"),
    ("nonideal_forces", "nonideal_force"),
)
"""Names users give the System's methods (from the literature's vocabulary)."""


def misnamed_hooks(cls: type) -> list[tuple[str, str]]:
    """(name, the System method meant) for each public method of `cls`, a System subclass,
    that the System does not define and whose name is a known alias of one of its methods
    (`generalized_force` for `forces`) or that method's name misspelled (a close match:
    `kinetic_enery`). ukjax calls only the System's own methods, so such a method is
    silently unused: a damping force written as `generalized_force` leaves the system
    undamped.

    Example:
        >>> import ukjax
        >>> from ukjax._system import misnamed_hooks
        >>> class Damped(ukjax.System):
        ...     def kinetic_energy(self, t, q, qd):
        ...         return 0.5 * qd @ qd
        ...     def generalized_force(self, t, q, qd):
        ...         return -qd
        ...     def positions(self, q):  # a helper of the user's own
        ...         return q
        >>> misnamed_hooks(Damped)
        [('generalized_force', 'forces')]
    """
    found, hooks, aliases = [], _hooks(), dict(_ALIASES)
    for klass in cls.__mro__:
        if klass is System or not issubclass(klass, System):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") or not inspect.isfunction(value) or hasattr(System, name):
                continue
            close = difflib.get_close_matches(name, hooks, n=1, cutoff=0.85)
            hook = aliases.get(name.lower()) or (close[0] if close else None)
            if hook is not None:
                found.append((name, hook))
    return found


def check_state(q, qd, system: System | None = None):
    """Validate (n,) state arrays at trace time and give them a common floating dtype; with
    `system`, check that it is a :class:`System` and n against the number of coordinates it
    declares."""
    if system is not None:
        check_system(system)
    for name, x, what in (("q", q, "coordinates"), ("qd", qd, "velocities")):
        if x is None:
            raise ValueError(
                f"{name} (the initial {what}) is None: give it as a 1-D array of length n "
                "(e.g. jnp.zeros(n) for a start at rest)."
            )
    q, qd = jnp.asarray(q), jnp.asarray(qd)
    if q.ndim != 1:
        raise ValueError(
            f"q must be a 1-D array of generalized coordinates; got shape {q.shape}. "
            "For a batch, use jax.vmap."
        )
    if qd.shape != q.shape:
        raise ValueError(
            f"qd (the velocities) must have the same shape as q {q.shape}; got {qd.shape}."
        )
    n = None if system is None else system.num_coordinates()
    if n is not None and q.shape[0] != n:
        raise ValueError(
            f"{type(system).__name__} has {n} generalized coordinates, but q has shape "
            f"{q.shape}: give q0 and qd0 of shape ({n},)."
        )
    dtype = jnp.result_type(q, qd)
    if not jnp.issubdtype(dtype, jnp.floating):
        dtype = jnp.result_type(float)
    return q.astype(dtype), qd.astype(dtype)


def floatify(system: _T) -> _T:
    """Turn Python float fields into arrays, so that they are traced (not static) and
    changing a parameter value does not trigger recompilation."""
    return floats_as_arrays(system)
