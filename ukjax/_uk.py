r"""The Udwadia-Kalaba equation for one state.

Given the unconstrained system $M\ddot q = Q$ ($M$ symmetric positive definite), the
constraints $A\ddot q = b$ ($A$ of shape (m, n), any rank) and the prescribed work vector
$C$ of non-ideal constraints, the constrained acceleration is (Udwadia 2004, eqs 8-12)

$$\ddot q = a + A_M^+(b - Aa) + (I - A_M^+A)M^{-1}C,\qquad a = M^{-1}Q,$$

with the $M$-weighted Moore-Penrose inverse $A_M^+ = M^{-1/2}(AM^{-1/2})^+$.

**How it is computed.** Factor $M = LL^T$ (Cholesky). Any $W$ with $W^TMW = I$ gives
$W(AW)^+ = M^{-1/2}(AM^{-1/2})^+$, so with $W = L^{-T}$ and $B = AL^{-T}$

$$\ddot q = a_C + L^{-T} B^+ (b - A a_C),\qquad a_C = M^{-1}(Q + C),$$

which is the same formula (expand it to see the two $M$-orthogonal corrections of
eq 9). No matrix square root or eigendecomposition of $M$ is formed, so gradients stay
finite when masses repeat. How $B^+e$ is evaluated is a strategy object
(:mod:`ukjax._uk_solvers`): by default :class:`ukjax.Regularized`, one Cholesky
factorisation of the row-scaled Gram matrix $BB^T + \tau^2I$ with iterative refinement,
whatever the rank of $A$ (exact on redundant constraints, continuous through singular
configurations, with its own derivative rule, :mod:`ukjax._uk_regularized`);
:class:`ukjax.CholeskyWithFallback` (Cholesky at full row rank, a rank-revealing SVD
otherwise), :class:`ukjax.SVD` and :class:`ukjax.Cholesky` on request. For small systems
(n <= 8) the Cholesky factorisations and triangular solves are unrolled scalar code that XLA
fuses across a `vmap` batch (:mod:`ukjax._kernels`); larger systems use LAPACK. Which is
faster where was measured by `benchmarks/kernels.py`.

**References.** F. E. Udwadia, R. E. Kalaba, *A new perspective on constrained motion*,
Proc. R. Soc. Lond. A 439 (1992) 407-410; F. E. Udwadia, *On constrained motion*, Appl.
Math. Comput. (2004/2005), eqs 8-12.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, ArrayLike, Float

from ._batching import any_member
from ._errors import print_each
from ._folds import largest, smallest
from ._kernels import diagonal
from ._precision import full_precision
from ._results import RESULTS, first_failure, message
from ._system import System
from ._uk_solvers import AbstractUKSolver, check_uk_solver
from ._xla import eager_jit, jit


class UKTerms(NamedTuple):
    """Every intermediate of one Udwadia-Kalaba evaluation (all for a single state)."""

    qdd: jax.Array  # constrained acceleration (n,)
    a: jax.Array  # unconstrained acceleration M^{-1} Q (n,)
    Qc_ideal: jax.Array  # M A_M^+ (b - A a) (n,)
    Qc_nonideal: jax.Array  # M (I - A_M^+ A) M^{-1} C (n,)
    residual: jax.Array  # A qdd - b (m,)
    inconsistency: jax.Array  # relative least-squares residual of the constraint solve, ()
    spd_ok: jax.Array  # whether the Cholesky factorisation of M succeeded, ()
    # relative residual the solver's own approximation may leave (see consistency checks)
    consistency_floor: float = 0.0
    # checks of M computed by a structured solve from M's structural entries (None: from M)
    relative_asymmetry: jax.Array | None = None
    min_diagonal: jax.Array | None = None


def _validate(M, Q, A, b, C) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array | None]:
    if isinstance(M, System):
        raise TypeError(
            "udwadia_kalaba, uk_terms and constraint_forces take the matrices (M, Q, A, b[, C]), "
            f"not a system; got {type(M).__name__}. For a system: ukjax.acceleration(system, t, "
            "q, qd), ukjax.diagnostics(system, solution).Qc_ideal for the constraint forces "
            "along a run, or ukjax.mass_and_force and ukjax.constraint_matrices for the matrices."
        )
    M, Q, A, b = (jnp.asarray(x) for x in (M, Q, A, b))
    if M.ndim != 2 or M.shape[0] != M.shape[1]:
        raise ValueError(f"M must be a square (n, n) mass matrix; got shape {M.shape}.")
    n = M.shape[0]
    if Q.shape != (n,):
        raise ValueError(f"Q must have shape (n,) = ({n},) to match M {M.shape}; got {Q.shape}.")
    if A.ndim != 2 or A.shape[1] != n:
        raise ValueError(
            f"A must have shape (m, n) with n = {n} columns (one per coordinate); got {A.shape}."
        )
    m = A.shape[0]
    if b.shape != (m,):
        raise ValueError(f"b must have shape (m,) = ({m},) to match A {A.shape}; got {b.shape}.")
    if C is not None:
        C = jnp.asarray(C)
        if C.shape != (n,):
            raise ValueError(f"C must have shape (n,) = ({n},) to match M; got {C.shape}.")
    dtype = jnp.result_type(*(x for x in (M, Q, A, b, C) if x is not None))
    if not jnp.issubdtype(dtype, jnp.floating):
        dtype = jnp.result_type(float)
    return (
        M.astype(dtype),
        Q.astype(dtype),
        A.astype(dtype),
        b.astype(dtype),
        None if C is None else C.astype(dtype),
    )


@full_precision
@eager_jit
def uk_terms(
    M,
    Q,
    A,
    b,
    C=None,
    *,
    uk_solver: AbstractUKSolver | None = None,
    semidefinite: bool = False,
    symmetric: bool = False,
) -> UKTerms:
    """All terms of the Udwadia-Kalaba equation, without raising on bad input.

    Use :func:`udwadia_kalaba` or :func:`constraint_forces` unless you need the
    diagnostics (``residual``, ``inconsistency``, ``spd_ok``). With ``semidefinite=True``
    a singular $M$ that the constraints complete gives the unique motion
    (:func:`complete_mass`; ``System.semidefinite_mass``). ``symmetric=True`` says that
    $M$ is symmetric by construction (the Hessian of a kinetic energy): without constraint
    rows its lower triangle is factored as it is, not averaged with $M^T$ first.

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> terms = ukjax.uk_terms(jnp.eye(2), jnp.array([0.0, -9.81]),
        ...                        jnp.array([[0.0, 1.0]]), jnp.array([0.0]))
        >>> [float(v) for v in terms.Qc_ideal], bool(terms.spd_ok)
        ([0.0, 9.81], True)
    """
    uk_solver = check_uk_solver(uk_solver)
    M, Q, A, b, C = _validate(M, Q, A, b, C)
    n, m = M.shape[0], A.shape[0]
    # the kernels for the larger of the two factorisations, M (n x n) and the constraints'
    # Gram matrix (m x m): unrolled, a 25-row Gram matrix (a box's 8 frictional corners)
    # is tens of thousands of scalar operations per solve (benchmarks/RESULTS.md, "Many
    # contact rows on few coordinates")
    ops = uk_solver.kernels.ops(max(n, m))
    # Rows factor M again inside the solver (the same factor after XLA's CSE), so only the
    # unconstrained solve takes the lower triangle of a symmetric M as it is.
    L = (ops.cholesky_of_symmetric if symmetric and m == 0 else ops.cholesky)(M)
    spd_ok = factored(L, M)
    if m == 0:
        solve_M = ops.triangular(L).solve
        a = solve_M(Q)
        zeros = jnp.zeros(n, M.dtype)
        Qc_ni = zeros if C is None else C
        qdd = a if C is None else a + solve_M(C)
        return UKTerms(qdd, a, zeros, Qc_ni, jnp.zeros(0, M.dtype), jnp.zeros((), M.dtype), spd_ok)
    if semidefinite:
        M, Q = complete_where_singular(L, M, Q, A, b)
        L = ops.cholesky(M)
        spd_ok = factored(L, M)
    # The solve factors M itself: after XLA's common-subexpression elimination that is the
    # factor `spd_ok` comes from.
    s = uk_solver.solve(M, Q, A, b, C, ops)
    residual = ops.matmul(A, s.qdd) - b
    # Relative size of the part of b - A a that lies outside the range of A.
    inconsistency = relative_residual(s.B, s.z, s.e, ops.matmul(s.B, s.z) - s.e, ops.norm)
    floor = uk_solver.consistency_floor(M.dtype)
    return UKTerms(s.qdd, s.a, s.Qc_ideal, s.Qc_nonideal, residual, inconsistency, spd_ok, floor)


def factored(L, M, relative: float | None = None) -> jax.Array:
    r"""Whether the Cholesky factor `L` of `M` is usable: finite, and no pivot below
    `relative` (default n eps) times M's largest diagonal entry (a singular M factors with
    a zero or rounding-sized pivot, and then divides by it).

    Finite on the diagonal is finite everywhere: an entry $L_{ij}$ ($i > j$) enters the
    later pivot $L_{ii}^2 = M_{ii} - \sum_{k<i} L_{ik}^2$, which a NaN or infinite entry
    makes NaN (and a failed LAPACK factorisation is NaN throughout), so the check reads
    the n pivots, not the n^2 entries (at every stage of a run, under a wide `vmap`)."""
    pivots = diagonal(L) ** 2
    eps = float(jnp.finfo(M.dtype).eps)
    relative = M.shape[0] * eps if relative is None else relative
    floor = relative * largest(jnp.abs(diagonal(M)))
    # largest(pivots) is NaN or infinite if any pivot is; smallest(...) > floor is False
    # on a NaN (folds, not reductions: :mod:`ukjax._folds`)
    return jnp.isfinite(largest(pivots)) & (smallest(pivots) > floor)


def near_singular(L, M) -> jax.Array:
    """Whether M is singular to within sqrt(eps) of its largest pivot: a mass matrix
    whose null direction is only known to round-off (a quaternion's, built from products
    of the coordinates) factors with pivots far above n eps; the completion is exact for
    any M that the constraints complete, so it is used from this wider margin on."""
    return ~factored(L, M, float(jnp.finfo(M.dtype).eps) ** 0.5)


def complete_where_singular(L, M, Q, A, b):
    """(M, Q), or :func:`complete_mass` of them where M (with Cholesky factor `L`) is
    :func:`near_singular`: a branch for the whole batch once any member needs it."""
    singular = any_member(near_singular(L, M))
    return lax.cond(singular, lambda: complete_mass(M, Q, A, b), lambda: (M, Q))


def complete_mass(M, Q, A, b) -> tuple[jax.Array, jax.Array | None]:
    r"""$(M + sA^TA,\ Q + sA^Tb)$: the same constrained motion with a mass matrix that is
    positive definite whenever $M$ is positive semi-definite and $[M; A]$ has full column
    rank (Udwadia & Phohomsiri, *Explicit equations of motion for constrained mechanical
    systems with singular mass matrices and applications to multi-body dynamics*, Proc. R.
    Soc. A 462, 2097-2117, 2006).

    Since $A\ddot q = b$, adding $sA^TA\ddot q = sA^Tb$ to $M\ddot q = Q + Q^c$ changes
    neither the accelerations nor the constraint force $Q^c = M\ddot q - Q$ (for
    virtual displacements $v$ with $Av = 0$ the added terms do no work); the scale
    $s = \overline{|M_{ii}|} / \overline{\|A_i\|^2}$ keeps the two terms alike in size.
    `Q` may be None (the metric of a projection step).

    Example:
        >>> import jax.numpy as jnp
        >>> M = jnp.array([[1.0, 1.0], [1.0, 1.0]])  # T = (qd0 + qd1)^2 / 2: singular
        >>> Mh, Qh = complete_mass(M, jnp.zeros(2), jnp.array([[1.0, -1.0]]), jnp.zeros(1))
        >>> bool(jnp.all(jnp.linalg.eigvalsh(Mh) > 0))
        True
    """
    tiny = jnp.finfo(M.dtype).tiny
    inertia = jnp.maximum(jnp.mean(jnp.abs(diagonal(M))), tiny)
    s = inertia / jnp.maximum(jnp.sum(A * A) / A.shape[0], tiny)
    return M + s * (A.T @ A), None if Q is None else Q + s * (A.T @ b)


def relative_residual(B, z, e, r, norm: Callable = jnp.linalg.norm) -> jax.Array:
    r"""$\|r\| / (\|e\| + \|B\|\,\|z\|)$ for the least-squares solution $z$ of $Bz = e$
    with residual $r = Bz - e$: how far $e$ lies outside the range of $B$, relative to the
    conditioning of the problem (the measure :func:`default_consistency_tol` bounds). `norm`:
    the 2-norm (Frobenius for $B$) to use, e.g. a kernel backend's reduction-free one."""
    scale = norm(e) + norm(B) * norm(z)
    return norm(r) / jnp.maximum(scale, jnp.finfo(r.dtype).tiny)


def default_consistency_tol(dtype, floor: float = 0.0) -> float:
    r"""Relative residual above which constraints count as inconsistent.

    The residual is $\|B z - e\| / (\|e\| + \|B\|\,\|z\|)$ (with $e = b - Aa$ and
    $z = B^+e$), a measure relative to the conditioning of $B = AL^{-T}$: consistent
    constraints, however ill-conditioned or redundant, leave only round-off and what the
    UK solver's own approximation leaves (its `consistency_floor`, $10\tau$ for
    :class:`ukjax.Regularized`). The tolerance is $\max(\sqrt{\varepsilon},$ floor$)$:
    1e-4 in float64 and 3.5e-2 in float32 with the default solver. :func:`ukjax.simulate`
    raises it further to $\sqrt{\mathrm{rtol}}$ for loose integration tolerances, where
    drift off redundant constraints is larger.
    """
    return max(float(jnp.finfo(dtype).eps) ** 0.5, floor)


class Failures(NamedTuple):
    """Which checks of one UK evaluation fail, and the numbers that say by how much."""

    nonfinite: jax.Array
    not_spd: jax.Array
    inconsistent: jax.Array
    relative_asymmetry: jax.Array
    min_diagonal: jax.Array
    relative_residual: jax.Array
    tolerance: jax.Array
    infeasible: jax.Array | bool = False  # a servo-constraint the actuators cannot realise
    infeasibility: jax.Array | float = 0.0

    def code(self) -> RESULTS:
        """The result code of the first failing check (`successful` if none)."""
        return first_failure(
            (self.nonfinite, RESULTS.nonfinite_state),
            (self.not_spd, RESULTS.mass_matrix_not_spd),
            (self.inconsistent, RESULTS.inconsistent_constraints),
            (self.infeasible, RESULTS.servo_infeasible),
        )

    def any(self) -> jax.Array:
        return self.nonfinite | self.not_spd | self.inconsistent | self.infeasible


def failures(terms: UKTerms, M, others, consistency_tol=None, infeasibility=None) -> Failures:
    r"""The checks of one UK evaluation: non-finite inputs (`M` and the `others`), a mass
    matrix that is not SPD, constraints whose right-hand side is outside the range of
    $A$, and (when the system reports one, e.g. :class:`ukjax.ServoControlled`) the
    relative residual of a realisation by actuators above the same tolerance.

    Where the asymmetry of `M` is measured here ($\max_{ij}|M_{ij} - M_{ji}| / \max_i|M_{ii}|$,
    every entry read; for a symmetric positive definite M the largest entry is on the
    diagonal, so this is $\max|M - M^T| / \max|M|$), its numerator is M's finiteness check
    too: a NaN or infinite entry makes it NaN or infinite (an infinite $M_{ij}$ gives
    $\infty - M_{ji}$, an infinite $M_{ii}$ $\infty - \infty$), a finite M a finite
    numerator unless $M_{ij} - M_{ji}$ overflows, which only entries above about 9e307 do. So M is
    read once instead of twice at every stage of a run (a 32-link chain's written M:
    `benchmarks/RESULTS.md`, stop 76), and the maxima are folds, not reductions
    (:mod:`ukjax._folds`, stop 77). Given the asymmetry (a structured solve's, or zero
    for an M symmetric by construction), M's entries are tested themselves."""
    dtype = terms.qdd.dtype
    floor = terms.consistency_floor
    tol = default_consistency_tol(dtype, floor) if consistency_tol is None else consistency_tol
    tiny = jnp.finfo(dtype).tiny
    asym, min_diagonal = terms.relative_asymmetry, terms.min_diagonal
    if asym is None:
        apart = largest(jnp.abs(M - M.T))  # NaN or infinite where an entry is
        asym = apart / jnp.maximum(largest(jnp.abs(diagonal(M))), tiny)
        finite = [jnp.isfinite(apart)]
    else:
        finite = [jnp.all(jnp.isfinite(M))]
    finite += [jnp.all(jnp.isfinite(v)) for v in others]
    nonfinite = ~jnp.all(jnp.stack(finite))
    if min_diagonal is None:
        min_diagonal = smallest(diagonal(M))
    not_spd = (asym > 1e3 * jnp.finfo(dtype).eps) | ~terms.spd_ok
    inconsistent = terms.inconsistency > tol
    ok = ~nonfinite & ~not_spd & ~inconsistent
    infeasible = False if infeasibility is None else (infeasibility > tol) & ok
    return Failures(
        nonfinite,
        not_spd & ~nonfinite,
        inconsistent & ~nonfinite & ~not_spd,
        asym,
        min_diagonal,
        terms.inconsistency,
        jnp.asarray(tol, dtype),
        infeasible,
        jnp.asarray(0.0 if infeasibility is None else infeasibility, dtype),
    )


def check_terms(
    x, terms: UKTerms, M, others, *, consistency_tol=None, infeasibility=None, rows=None
):
    """Return ``x``; raise (inside jit too) on a non-SPD mass matrix, non-finite values,
    inconsistent constraints or an infeasible servo. `M` and `others`: the arrays that
    went into the equation (:func:`failures`). One error check names the first failure
    (each is tested only where the earlier ones pass), with the numbers of that failure
    printed just before, and, given the constraint rows `rows` (A), the motion a failing
    M leaves undetermined
    (:func:`undetermined_motion`; not at every stage of a run, where M and the rows in the
    print's branch slow a wide vmap down: `benchmarks/RESULTS.md`)."""
    f = failures(terms, M, others, consistency_tol, infeasibility)
    motion = None if rows is None else (M, rows)
    x = report_failures(f, servo=infeasibility is not None, through=x, motion=motion)
    return f.code().error_if(x, f.any())


def report_failures(f: Failures, servo: bool, through=None, motion=None):
    """Print (to stderr, at run time) the numbers of the checks of `f` that fail: the
    smallest diagonal entry of M, its asymmetry and, given `motion = (M, A)`, the motion
    M leaves undetermined (:func:`undetermined_motion`), the relative residual of
    inconsistent constraints, and with `servo` the servo residual. One conditional for
    all of them (:func:`ukjax._errors.print_each`). Returns `through`, after the prints."""
    explain = None if motion is None else (undetermined_motion, motion)
    spd = dict(smallest_diagonal_entry_of_M=f.min_diagonal, relative_asymmetry=f.relative_asymmetry)
    reports = [
        (f.not_spd, message(RESULTS.mass_matrix_not_spd), spd, explain),
        (
            f.inconsistent,
            message(RESULTS.inconsistent_constraints),
            dict(relative_residual=f.relative_residual, tolerance=f.tolerance),
            None,
        ),
    ]
    if servo:
        residual = dict(relative_servo_residual=f.infeasibility, tolerance=f.tolerance)
        reports.append((f.infeasible, message(RESULTS.servo_infeasible), residual, None))
    return print_each(reports, through)


def undetermined_motion(M: np.ndarray, A: np.ndarray) -> str:
    r"""(NumPy, for an error message) The motion a failing mass matrix leaves
    undetermined: among the velocities $v$ the constraint rows allow ($Av = 0$), the one of
    least kinetic energy, the eigenvector of $N^T M N$'s smallest eigenvalue ($N$ an
    orthonormal basis of the null space of $A$), named by its coordinates. Where that
    energy is positive, $M$ alone is singular or indefinite but the constraints fix it:
    the direction of $M$'s own smallest eigenvalue, with the hint `semidefinite_mass`
    (Udwadia & Phohomsiri 2006).

    Example:
        >>> import numpy as np
        >>> text = undetermined_motion(np.ones((2, 2)), np.zeros((0, 2)))  # T = (qd0 + qd1)^2 / 2
        >>> text.split(", kinetic")[0]
        'undetermined motion: dq = [1, -1] (coordinates 0, 1)'
    """
    M = np.diag(M) if M.ndim == 1 else M  # a diagonal M given as its diagonal
    n = M.shape[0]
    if M.shape != (n, n) or A.ndim != 2 or A.shape[1] != n:  # another structured form
        return ""
    M = 0.5 * (M + M.T)
    if not (np.all(np.isfinite(M)) and np.all(np.isfinite(A))):
        return ""
    N = np.eye(n)
    if A.shape[0]:
        _, s, Vt = np.linalg.svd(A)
        rank = int(np.sum(s > n * np.finfo(A.dtype).eps * max(s.max(), 1.0)))
        N = Vt[rank:].T
    if N.shape[1] == 0:
        return ""
    w, V = np.linalg.eigh(N.T @ M @ N)
    scale = np.finfo(M.dtype).eps ** 0.5 * max(np.abs(np.diagonal(M)).max(), np.finfo(M.dtype).tiny)
    fixed = w[0] > scale
    if fixed:  # the constraints fix it: M's own direction
        w, V, N = *np.linalg.eigh(M), np.eye(n)
    v = N @ V[:, 0]
    v = v / v[np.argmax(np.abs(v))]
    v = np.where(np.abs(v) > 1e-6, v, 0.0)
    dq = ", ".join(f"{x:.3g}" for x in v)
    which = ", ".join(str(i) for i in np.flatnonzero(v))
    text = (
        f"undetermined motion: dq = [{dq}] (coordinates {which}), "
        f"kinetic energy 2T/|dq|^2 = {w[0]:.3e} along it"
    )
    if fixed:
        text += " (the constraints fix it: define semidefinite_mass(self) returning True)"
    return text


@full_precision
def udwadia_kalaba(
    M: Float[ArrayLike, "n n"],
    Q: Float[ArrayLike, " n"],
    A: Float[ArrayLike, "m n"],
    b: Float[ArrayLike, " m"],
    C: Float[ArrayLike, " n"] | None = None,
    *,
    uk_solver: AbstractUKSolver | None = None,
    check: bool = True,
    consistency_tol: float | None = None,
) -> Float[Array, " n"]:
    r"""Constrained acceleration $\ddot q$ from the Udwadia-Kalaba equation.

    $$\ddot q = a + M^{-1/2}(AM^{-1/2})^+(b - Aa) + (I - A_M^+A)M^{-1}C,\qquad a = M^{-1}Q$$

    (Udwadia and Kalaba 1992; Udwadia, *On constrained motion*, 2004, eqs 8-12).

    **Arguments:**

    - `M`: (n, n) symmetric positive-definite mass matrix.
    - `Q`: (n,) impressed generalized force.
    - `A`: (m, n) constraint matrix of $A\ddot q = b$; any rank (redundant rows are fine);
      m may be 0.
    - `b`: (m,) right-hand side.
    - `C`: (n,) prescribed work vector of non-ideal constraints, or `None` (ideal).
    - `uk_solver`: how $B^+E$ is computed, a strategy object:
      :class:`ukjax.Regularized` (default: iterated Tikhonov regularisation of the Gram
      matrix, one Cholesky factorisation at any rank, continuous through singular
      configurations), :class:`ukjax.CholeskyWithFallback` (Cholesky of $AM^{-1}A^T$ when
      $A$ has full row rank, else an SVD), :class:`ukjax.SVD` (always rank-revealing) or
      :class:`ukjax.Cholesky` (full row rank only: wrong for redundant constraints). Each
      takes `kernels=` (:class:`ukjax.AutoKernels` by default: unrolled code for n <= 8,
      LAPACK above).
    - `check`: raise on a non-SPD `M`, non-finite inputs or inconsistent constraints.
    - `consistency_tol`: relative least-squares residual
      $\|Bz - e\|/(\|e\| + \|B\|\|z\|)$ above which the constraints are reported as
      inconsistent (default :func:`ukjax._uk.default_consistency_tol`:
      $\max(\sqrt{\varepsilon}, 10\tau)$, 1e-4 in float64 with the default solver).

    **Returns:** the (n,) acceleration. Works under `jit`, `vmap`, `grad` and `jvp`.

    **Raises:** `ValueError` at trace time on wrong shapes; `equinox.EquinoxRuntimeError`
    at run time when a check fails.

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> M = jnp.eye(2); Q = jnp.array([0.0, -9.81])       # unit mass, gravity along -y
        >>> A = jnp.array([[1.0, 0.0]]); b = jnp.array([0.0])  # x'' = 0
        >>> [round(float(v), 6) for v in ukjax.udwadia_kalaba(M, Q, A, b)]
        [0.0, -9.81]
    """
    args = _validate(M, Q, A, b, C)
    return _udwadia_kalaba(*args, check_uk_solver(uk_solver), check, consistency_tol)


@jit(batched=False)
def _udwadia_kalaba(M, Q, A, b, C, uk_solver, check, consistency_tol):
    terms = uk_terms(M, Q, A, b, C, uk_solver=uk_solver)
    if not check:
        return terms.qdd
    others = [Q, A, b] + ([] if C is None else [C])
    return check_terms(terms.qdd, terms, M, others, consistency_tol=consistency_tol, rows=A)


@full_precision
def constraint_forces(
    M: Float[ArrayLike, "n n"],
    Q: Float[ArrayLike, " n"],
    A: Float[ArrayLike, "m n"],
    b: Float[ArrayLike, " m"],
    C: Float[ArrayLike, " n"] | None = None,
    *,
    uk_solver: AbstractUKSolver | None = None,
    check: bool = True,
) -> tuple[Float[Array, " n"], Float[Array, " n"]]:
    r"""Ideal and non-ideal generalized constraint forces (Udwadia 2004, eqs 11-12).

    $$Q^c_i = MA_M^+(b - Aa),\qquad Q^c_{ni} = M(I - A_M^+A)M^{-1}C,$$

    so that $M\ddot q = Q + Q^c_i + Q^c_{ni}$. Arguments as :func:`udwadia_kalaba`.

    **Returns:** `(Qc_ideal, Qc_nonideal)`, each of shape (n,); `Qc_nonideal` is zero when
    `C` is `None`.

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> Qi, Qni = ukjax.constraint_forces(jnp.eye(2), jnp.array([0.0, -9.81]),
        ...                                   jnp.array([[0.0, 1.0]]), jnp.array([0.0]))
        >>> [round(float(v), 6) for v in Qi]   # the support pushes up with m g
        [0.0, 9.81]
    """
    args = _validate(M, Q, A, b, C)
    return _constraint_forces(*args, check_uk_solver(uk_solver), check)


@jit(batched=False)
def _constraint_forces(M, Q, A, b, C, uk_solver, check):
    terms = uk_terms(M, Q, A, b, C, uk_solver=uk_solver)
    if check:
        others = [Q, A, b] + ([] if C is None else [C])
        return check_terms((terms.Qc_ideal, terms.Qc_nonideal), terms, M, others, rows=A)
    return terms.Qc_ideal, terms.Qc_nonideal
