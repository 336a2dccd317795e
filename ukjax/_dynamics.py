r"""Unconstrained dynamics $(M, Q)$ of a :class:`~ukjax.System` and its constrained
acceleration."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from ._constraints import jacobian_blocks, rows, structured_rows
from ._precision import full_precision
from ._residuals import check_precision
from ._rewrite import rewritten
from ._stabilization import AbstractStabilization, NoStabilization, check_stabilization
from ._structure import Structure, detect, entries_of, worthwhile
from ._structured_uk import structured_solve
from ._system import System, as_time, check_state, floatify, overrides
from ._uk import Failures, UKTerms, check_terms, failures, uk_terms
from ._uk_solvers import AbstractUKSolver, Regularized, check_uk_solver
from ._xla import eager_jit, jit


def _vector(value, name, system, q):
    value = check_precision(value, name, system, q.dtype).astype(q.dtype)
    if value.shape != q.shape:
        raise ValueError(
            f"{type(system).__name__}.{name} must return an array of shape {q.shape} (one "
            f"entry per coordinate); got shape {value.shape}."
        )
    return value


def _model(fn):
    """One of a system's model functions (`mass_and_force`, `mass_matrix`, `forces`,
    `kinetic_energy`, `potential_energy`) with its sines and cosines computed once per
    element (:func:`ukjax._rewrite.rewritten`): XLA:CPU otherwise recomputes them in every
    fusion that reads them, e.g. a mass matrix written with cos(q_i - q_j) in the run-time
    checks' fusions, or the cosines of T under the n + 1 tangents of its Hessian
    (`benchmarks/RESULTS.md`, stop 69). Short sums stay (`sums=False`, see
    :mod:`ukjax._rewrite`)."""
    return rewritten(fn, sums=False)


def _direct(system: System, t, q, qd):
    """(M, Q) from the system's own `mass_and_force`, validated, or None."""
    direct = _model(system.mass_and_force)(t, q, qd)
    if direct is None:
        return None
    n = q.shape[0]
    M, Q = (jnp.asarray(x, q.dtype) for x in direct)
    if M.shape != (n, n) or Q.shape != (n,):
        raise ValueError(
            f"{type(system).__name__}.mass_and_force must return M ({n}, {n}) and Q "
            f"({n},); got {M.shape} and {Q.shape}."
        )
    return M, Q


def _lagrangian_mass(system: System, t, q, qd):
    r"""$M = \partial^2T/\partial\dot q^2$ (:func:`_lagrange_terms`), or the system's
    `mass_matrix` checked for its shape."""
    n = q.shape[0]
    if overrides(system, "kinetic_energy") and not overrides(system, "mass_matrix"):
        return _lagrange_terms(system, t, q, qd, n)[0]
    M = _model(system.mass_matrix)(t, q)
    M = check_precision(M, "mass_matrix", system, q.dtype).astype(q.dtype)
    if M.shape != (n, n):
        raise ValueError(
            f"The mass matrix of {type(system).__name__} must have shape ({n}, {n}); got {M.shape}."
        )
    return M


def mass_matrix(system: System, t, q, qd):
    """The mass matrix $M$ (n, n) alone, as :func:`mass_and_force` gives it (for already
    validated `t`, `q`, `qd`): what a projection or an impulse needs, without tracing
    the force terms."""
    direct = _direct(system, t, q, qd)
    return direct[0] if direct is not None else _lagrangian_mass(system, t, q, qd)


@full_precision
@eager_jit
def mass_and_force(system: System, t, q, qd):
    r"""The unconstrained model: mass matrix $M$ (n, n) and generalized force $Q$ (n,).

    $Q = $ `forces` $- \partial V/\partial q$, plus, when the system defines
    `kinetic_energy`, the Lagrange terms
    $\partial T/\partial q - \frac{\partial^2 T}{\partial\dot q\,\partial q}\dot q -
    \frac{\partial^2 T}{\partial\dot q\,\partial t}$.

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import CartesianPendulum
        >>> M, Q = ukjax.mass_and_force(CartesianPendulum(mass=2.0), 0.0, jnp.array([1.0, 0.0]),
        ...                             jnp.zeros(2))
        >>> M.tolist(), [round(float(v), 4) for v in Q]
        ([[2.0, 0.0], [0.0, 2.0]], [0.0, -19.62])
    """
    q, qd = check_state(q, qd, system)
    t = as_time(t, q.dtype)
    direct = _direct(system, t, q, qd)
    if direct is not None:
        return direct
    lagrangian = overrides(system, "kinetic_energy")
    if lagrangian and not overrides(system, "mass_matrix"):
        M, Q = _lagrange_terms(system, t, q, qd, q.shape[0])
    else:
        M = _lagrangian_mass(system, t, q, qd)
        Q = _lagrange_terms(system, t, q, qd, 0)[1] if lagrangian else jnp.zeros_like(q)
    F = _model(system.forces)(t, q, qd)
    if F is not None:
        Q = Q + _vector(F, "forces", system, q)
    if system.potential_energy(t, q) is not None:
        if jax.eval_shape(system.potential_energy, t, q).shape != ():
            raise ValueError(f"{type(system).__name__}.potential_energy must return a scalar.")
        energy_ = _model(system.potential_energy)
        Q = Q - jax.grad(lambda q_: jnp.asarray(energy_(t, q_), q.dtype))(q)
    return M, Q


def _lagrange_terms(system: System, t, q, qd, k: int) -> tuple[jax.Array, jax.Array]:
    r"""The first `k` rows of $M = \partial p/\partial\dot q$ ((k, n): $M$ for k = n,
    nothing for 0) and $\partial T/\partial q - \partial_t p - (\partial p/\partial q)\dot q$,
    with the momentum $p = \partial T/\partial\dot q$: the latter from one forward
    derivative of $(\partial T/\partial q, p)$ along $(1, \dot q, 0)$ in $(t, q, \dot q)$,
    M from a batch of forward derivatives of $p$ along $e_i$ in $\dot q$ alone, with $t$
    and $q$ held (their tangents are zero by construction, not arrays of zeros that every
    one of the n tangents would carry through the derivatives of $T$ in $q$). $T$'s sines
    and cosines are shared (:func:`_model`).

    The tangent along $e_i$ is the column $Me_i$, so the stacked tangents are $M^T$, and
    that is the matrix returned, without a transposed copy: a Hessian is symmetric, $M^T
    = M$ to the rounding of its entries, and the UK solve factors it as a matrix
    symmetric by construction (:func:`symmetric_mass`; `benchmarks/RESULTS.md`, stop
    87)."""
    if jax.eval_shape(system.kinetic_energy, t, q, qd).shape != ():
        raise ValueError(f"{type(system).__name__}.kinetic_energy must return a scalar.")
    T = _model(system.kinetic_energy)
    n, dtype = q.shape[0], q.dtype
    grads = lambda t_, q_, qd_: jax.grad(T, argnums=(1, 2))(t_, q_, qd_)  # (dT/dq, p)
    along = (jnp.ones((), dtype), qd, jnp.zeros_like(qd))
    (dT_dq, _), (_, dp) = jax.jvp(grads, (t, q, qd), along)
    if k == 0:
        return jnp.zeros((0, n), dtype), dT_dq - dp
    momentum = lambda qd_: jax.grad(T, argnums=2)(t, q, qd_)
    column = lambda e: jax.jvp(momentum, (qd,), (e,))[1]
    return jax.vmap(column)(jnp.eye(k, n, dtype=dtype)), dT_dq - dp


def nonideal_force(system: System, t, q, qd):
    """The non-ideal constraint vector C (n,) of the system, or None."""
    C = system.nonideal_force(t, q, qd)
    return None if C is None else _vector(C, "nonideal_force", system, q)


class UKInputs(eqx.Module):
    """The inputs of the UK equation at one state: the state and M, Q, A, b, C."""

    t: jax.Array
    q: jax.Array
    qd: jax.Array
    M: jax.Array
    Q: jax.Array
    A: jax.Array
    b: jax.Array
    C: jax.Array | None

    def others(self) -> list[jax.Array]:
        """Every array but M (the finiteness check of :func:`ukjax._uk.failures` reads M
        apart)."""
        return [x for x in (self.q, self.qd, self.Q, self.A, self.b, self.C) if x is not None]


class Evaluation(eqx.Module):
    """A UK evaluation at one state: its `inputs`, all its `terms`, and the system's own
    `infeasibility` (None unless the system reports one, e.g. a servo realisation).
    `symmetric`: M is symmetric by construction (:func:`symmetric_mass`), so the checks
    skip its asymmetry."""

    inputs: UKInputs
    terms: UKTerms
    infeasibility: jax.Array | None = None
    symmetric: bool = eqx.field(static=True, default=False)

    def _checked_terms(self) -> UKTerms:
        """The terms as the checks read them: a mass matrix symmetric by construction has
        no asymmetry to measure (the n^2 entries of M - M^T under a wide `vmap`, at every
        stage of a run, cost as much as the rest of the checks)."""
        t = self.terms
        if not self.symmetric or t.relative_asymmetry is not None:
            return t
        return t._replace(relative_asymmetry=jnp.zeros((), self.inputs.M.dtype))

    def checked_qdd(self, consistency_tol=None, explain: bool = True) -> jax.Array:
        """The acceleration, raising at run time if an input or the solve is bad (with
        `explain`, naming the motion a failing M leaves undetermined)."""
        return check_terms(
            self.terms.qdd,
            self._checked_terms(),
            self.inputs.M,
            self.inputs.others(),
            consistency_tol=consistency_tol,
            infeasibility=self.infeasibility,
            rows=self.inputs.A if explain else None,
        )

    def field_qdd(self, check: bool, throw: bool, consistency_tol=None) -> jax.Array:
        """The acceleration a vector field returns: checked (raising from inside the solve)
        when `check` and `throw`; plain otherwise (with `throw=False` the solve's failure
        event gives the verdict, with `check=False` nobody does). Its print leaves out the
        motion a failing M leaves undetermined (its message points to
        :func:`ukjax.acceleration`, which names it)."""
        return self.checked_qdd(consistency_tol, False) if check and throw else self.terms.qdd

    def failures(self, consistency_tol=None) -> Failures:
        """The checks of this evaluation (see :func:`ukjax._uk.failures`)."""
        terms = self._checked_terms()
        return failures(
            terms, self.inputs.M, self.inputs.others(), consistency_tol, self.infeasibility
        )


def evaluate(
    system: System,
    t,
    q,
    qd,
    stabilization: AbstractStabilization = NoStabilization(),
    uk_solver: AbstractUKSolver = Regularized(),
) -> Evaluation:
    """The UK equation of `system` at one (validated) state."""
    system = system.with_uk_solver(uk_solver)
    structure = _structure(system, q, uk_solver)
    if structure is not None:
        return _evaluate_structured(system, t, q, qd, stabilization, uk_solver, structure)
    M, Q = mass_and_force(system, t, q, qd)
    A, b = rows(system, t, q, qd, stabilization)
    C = nonideal_force(system, t, q, qd)
    return evaluate_rows(system, UKInputs(t, q, qd, M, Q, A, b, C), uk_solver)


class RowSolve(eqx.Module):
    r"""The run's UK solve of one state's mass matrix $M$ with rows given at the call: the
    single entry through which the field, friction and servo control reach
    :func:`ukjax.uk_terms` (the run's `uk_solver` and kernels, and the completion of a
    semi-definite $M$ where the system declares one, and the factor of an $M$ symmetric
    by construction, :func:`symmetric_mass`, without averaging it with $M^T$).

    `solve(A, F, b, C=None)` is the UK equation $M\ddot q = F + Q_c$, $A\ddot q = b$
    (with the non-ideal force $C$). Linear in $(F, b, C)$ for fixed rows, so it maps with
    `jax.vmap` over columns of forces without refactoring $M$ or the Gram matrix."""

    M: jax.Array
    uk_solver: AbstractUKSolver
    semidefinite: bool = eqx.field(static=True, default=False)
    symmetric: bool = eqx.field(static=True, default=False)

    def __call__(self, A, F, b, C=None) -> UKTerms:
        solver, semi, sym = self.uk_solver, self.semidefinite, self.symmetric
        return uk_terms(self.M, F, A, b, C, uk_solver=solver, semidefinite=semi, symmetric=sym)

    def consistency_floor(self, dtype) -> float:
        """The solver's own relative residual on consistent rows."""
        return self.uk_solver.consistency_floor(dtype)


def row_solve(system: System, M, uk_solver: AbstractUKSolver) -> RowSolve:
    """The UK solve of `system`'s mass matrix `M` at one state (:class:`RowSolve`)."""
    return RowSolve(M, uk_solver, system.semidefinite_mass(), symmetric_mass(system))


def evaluate_rows(system: System, inputs: UKInputs, uk_solver: AbstractUKSolver) -> Evaluation:
    """The UK solve of given `inputs` (M, Q, A, b, C of `system` at one state, the rows
    possibly extended, e.g. by engaged contacts) with the system's own infeasibility."""
    i = inputs
    terms = row_solve(system, i.M, uk_solver)(i.A, i.Q, i.b, i.C)
    infeasibility = system_infeasibility(system, i.t, i.q, i.qd)
    return Evaluation(inputs, terms, infeasibility, symmetric_mass(system))


def symmetric_mass(system: System) -> bool:
    r"""Whether `system`'s mass matrix is symmetric by construction: the Hessian
    $\partial^2T/\partial\dot q^2$ of its `kinetic_energy` (:func:`_lagrange_terms`), not a
    matrix the system writes itself (`mass_matrix`, `mass_and_force`), which the checks
    test for symmetry. The unconstrained solve factors such an M's lower triangle as it
    is (:func:`ukjax._uk.uk_terms`, `symmetric`) instead of averaging it with $M^T$."""
    lagrangian = overrides(system, "kinetic_energy")
    return (
        lagrangian
        and not overrides(system, "mass_matrix")
        and not overrides(system, "mass_and_force")
    )


def _blocks(system: System, t, q, qd):
    return (mass_and_force(system, t, q, qd)[0], *jacobian_blocks(system, t, q, qd))


def _structure(system: System, q, uk_solver: AbstractUKSolver) -> Structure | None:
    """The structure the UK solve should use, or None for the dense path."""
    n = q.shape[0]
    if uk_solver.gram_parameters(q.dtype) is None or not uk_solver.kernels.structured(n):
        return None
    structure = detect(system, n, q.dtype, _blocks)
    kernels = uk_solver.kernels
    return structure if structure is not None and worthwhile(structure, kernels) else None


def _evaluate_structured(system, t, q, qd, stabilization, uk_solver, structure) -> Evaluation:
    M, Q = mass_and_force(system, t, q, qd)
    M_values = entries_of(M, structure.mass)
    A_values, b = structured_rows(system, t, q, qd, stabilization, structure)
    C = nonideal_force(system, t, q, qd)
    gram = uk_solver.gram_parameters(q.dtype)
    assert gram is not None
    tau, refinements = gram
    floor = uk_solver.consistency_floor(q.dtype)
    terms = structured_solve(structure, M_values, Q, A_values, b, C, tau, refinements, floor)
    # M and A as their structural entries: what the finiteness check needs.
    inputs = UKInputs(t, q, qd, M_values, Q, A_values, b, C)
    return Evaluation(inputs, terms, system_infeasibility(system, t, q, qd))


def system_infeasibility(system: System, t, q, qd) -> jax.Array | None:
    """The system's own `infeasibility(t, q, qd)` as a scalar, or None."""
    if not overrides(system, "infeasibility"):
        return None
    return jnp.asarray(system.infeasibility(t, q, qd), q.dtype)


@full_precision
def acceleration(
    system: System,
    t: ArrayLike,
    q: Float[ArrayLike, " n"],
    qd: Float[ArrayLike, " n"],
    *,
    uk_solver: AbstractUKSolver | None = None,
    check: bool = True,
    consistency_tol: float | None = None,
    stabilization: AbstractStabilization | None = None,
) -> Float[Array, " n"]:
    r"""The constrained acceleration $\ddot q$ of a system at one state $(t, q, \dot q)$.

    Builds $M$ and $Q$ from the system's energies and forces, $A$ and $b$ from its
    constraints (automatic differentiation), and solves the Udwadia-Kalaba equation
    (see :func:`ukjax.udwadia_kalaba` for `uk_solver`, `check` and `consistency_tol`).
    `stabilization=ukjax.Baumgarte(alpha, beta)` adds Baumgarte feedback to `b`.

    **Returns:** (n,) array. `jit`/`vmap`/`grad` compatible; batch with `jax.vmap`.

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import CartesianPendulum
        >>> pend = CartesianPendulum(mass=1.0, length=1.0, g=9.81)
        >>> qdd = ukjax.acceleration(pend, 0.0, jnp.array([0.6, -0.8]), jnp.zeros(2))
        >>> [round(float(v), 4) for v in qdd]     # On Dynamics (2020) eq 33h, at rest
        [-4.7088, -3.5316]
    """
    q_, qd_ = check_state(q, qd, system)
    return _acceleration(
        floatify(system),
        as_time(t, q_.dtype),
        q_,
        qd_,
        check_uk_solver(uk_solver),
        check,
        consistency_tol,
        floatify(check_stabilization(stabilization)),
    )


@jit(batched=False)
def _acceleration(system, t, q, qd, uk_solver, check, consistency_tol, stabilization):
    ev = evaluate(system, t, q, qd, stabilization, uk_solver)
    return ev.checked_qdd(consistency_tol) if check else ev.terms.qdd


@full_precision
@eager_jit
def kinetic_energy(system: System, t, q, qd) -> jax.Array:
    r"""$T$ from the system's `kinetic_energy`, else $\tfrac12\dot q^TM\dot q$.

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import CartesianPendulum
        >>> float(ukjax.kinetic_energy(CartesianPendulum(mass=2.0), 0.0, jnp.zeros(2),
        ...                            jnp.array([1.0, 1.0])))
        2.0
    """
    q, qd = check_state(q, qd, system)
    t = as_time(t, q.dtype)
    if overrides(system, "kinetic_energy"):
        return jnp.asarray(system.kinetic_energy(t, q, qd), q.dtype)
    M = check_precision(system.mass_matrix(t, q), "mass_matrix", system, q.dtype).astype(q.dtype)
    return 0.5 * qd @ M @ qd


@full_precision
@eager_jit
def energy(system: System, t, q, qd) -> jax.Array:
    r"""Mechanical energy $T + V$ (V = 0 when the system defines no potential).

    Conserved along the motion when the constraints are ideal and scleronomic, the system
    is time-invariant and `forces` does no work.

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import CartesianPendulum
        >>> round(float(ukjax.energy(CartesianPendulum(g=10.0), 0.0, jnp.array([0.0, -1.0]),
        ...                          jnp.array([2.0, 0.0]))), 6)   # 2 - 10
        -8.0
    """
    q, qd = check_state(q, qd, system)
    t = as_time(t, q.dtype)
    V = system.potential_energy(t, q)
    T = kinetic_energy(system, t, q, qd)
    return T if V is None else T + jnp.asarray(V, q.dtype)
