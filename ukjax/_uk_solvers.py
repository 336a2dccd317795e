r"""How the Udwadia-Kalaba equation computes $B^+E$: strategy objects.

With $M = LL^T$ and $B = AL^{-T}$ the UK acceleration needs $B^+E$ for the small
right-hand side $E = [\,b - Aa,\ BL^{-1}C\,]$ (see :mod:`ukjax._uk`). A UK solver decides
how:

- :class:`Regularized` (the default): iterated Tikhonov regularisation of the Gram matrix,
  one Cholesky factorisation whatever the rank of $A$, continuous through singular
  configurations and exact on redundant constraints.
- :class:`CholeskyWithFallback`: Cholesky of the Gram matrix $BB^T$ when $A$ has full row
  rank, and an exact rank-revealing SVD otherwise (redundant or dependent constraints),
  chosen at run time.
- :class:`SVD`: always the rank-revealing SVD (with the Golub-Pereyra derivative of the
  pseudo-inverse, so gradients stay finite at any rank).
- :class:`Cholesky`: the Gram-matrix Cholesky only. Fastest, but wrong for redundant
  constraints (the Gram matrix is then singular).

Each takes a `kernels` field, the backend of the dense operations
(:class:`ukjax.AutoKernels`, :class:`ukjax.UnrolledKernels`, :class:`ukjax.LapackKernels`).
"""

from __future__ import annotations

import abc

import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._kernel_strategies import AbstractKernels, AutoKernels
from ._kernels import DenseOps
from ._linalg import default_regularization, full_rank_solve, pinv_solve, regularized_solve
from ._uk_formula import Solved, uk_formula
from ._uk_regularized import regularized_uk


class AbstractUKSolver(eqx.Module):
    """Base class of the strategies that compute $B^+E$ in the UK equation.

    Subclasses define the field `kernels` and :meth:`pinv`.
    """

    kernels: eqx.AbstractVar[AbstractKernels]

    @abc.abstractmethod
    def pinv(
        self, B: Float[Array, "m n"], E: Float[Array, "m k"], ops: DenseOps
    ) -> Float[Array, "n k"]:
        """$B^+E$, the minimum-norm least-squares solution of $BZ = E$."""

    def solve(self, M, Q, A, b, C, ops: DenseOps) -> Solved:
        """The UK solve of one state with m > 0 constraints (:mod:`ukjax._uk_formula`)
        with this solver's :meth:`pinv`; `Q` may be None (no force), `C` None (ideal).
        Differentiated by autodiff unless a subclass has a rule of its own."""
        return uk_formula(ops, M, Q, A, b, C, lambda B, E: (self.pinv(B, E, ops), None))[0]

    def consistency_floor(self, dtype) -> float:
        """Relative least-squares residual that this solver's own approximation may leave
        on consistent constraints (the inconsistency check never fires below it)."""
        return 0.0

    def gram_parameters(self, dtype) -> tuple[float, int] | None:
        """(tau, refinements) when this solver is the row-scaled Gram-matrix Cholesky with
        Tikhonov parameter tau and that many refinement steps, which the structured
        (sparse) solve of :mod:`ukjax._structure` can run; None otherwise (dense only)."""
        return None


class Regularized(AbstractUKSolver):
    r"""Iterated Tikhonov regularisation of the UK solve (default): smooth at every rank.

    $B^+E$ is replaced by $\hat B^T(\hat G + \tau^2I)^{-1}$ applied with `refinements`
    steps of iterative refinement, on rows scaled to unit norm (see
    :func:`ukjax._linalg.regularized_solve` for the formula). In the singular values
    $\sigma$ of the scaled $B = AL^{-T}$ the result is the pseudo-inverse filtered by
    $f(\sigma) = 1 - (\tau^2/(\sigma^2 + \tau^2))^{K+1}$ ($K$ = `refinements`):

    - constraints with $\sigma \gg \tau$ are met to a relative $(\tau/\sigma)^{2K+2}$
      (with the defaults, round-off for $\sigma > 10^{-3}$);
    - redundant constraints ($\sigma = 0$) are handled exactly: the minimum-norm solution,
      as the SVD gives it;
    - where a Jacobian loses rank along the motion (a mechanism passing a singular
      configuration: a four-bar chain with all bars aligned), the constraint that
      degenerates is released continuously as $\sigma \to 0$ instead of by a rank
      decision, and the gain on the drift residual stays below about $\sqrt{K+1}/\tau$.
      That is what lets an adaptive integrator step through the singular position on the
      branch that inertia follows, as the augmented-Lagrangian formulations of the
      multibody benchmarks do (their penalty $\alpha$ plays the part of $\tau^{-2}$).

    One Cholesky factorisation of the m x m Gram matrix and $2(K+1)$ triangular solves per
    evaluation, whatever the rank: the redundant path costs what the full-rank path costs.
    Gradients are those of this smooth map (finite at every rank).

    - `regularization`: $\tau$, relative to rows of unit norm; default
      $\max(10^{-5}, 10\sqrt{\varepsilon})$ (1e-5 in float64, 3.5e-3 in float32). The
      default was chosen on the IFToMM N-four-bar benchmark (N = 1, 2, 10, 10 s through
      10 singular positions each): 1e-5 to 1e-3 all pass; the smallest keeps the most accuracy on
      ill-conditioned regular constraints.
    - `refinements`: $K$ (default 3).
    - `kernels`: the dense backend (default :class:`AutoKernels`).

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> A = jnp.array([[1.0, 0.0], [2.0, 0.0]])   # two copies of one constraint
        >>> qdd = ukjax.udwadia_kalaba(jnp.eye(2), jnp.array([1.0, -1.0]), A, jnp.zeros(2),
        ...                            uk_solver=ukjax.Regularized())
        >>> [round(float(v), 12) for v in qdd]
        [0.0, -1.0]
    """

    regularization: float | None = eqx.field(static=True, default=None)
    refinements: int = eqx.field(static=True, default=3)
    kernels: AbstractKernels = AutoKernels()

    def __check_init__(self):
        if self.regularization is not None and not self.regularization > 0:
            raise ValueError(
                f"Regularized: regularization must be positive; got {self.regularization!r}."
            )
        if not isinstance(self.refinements, int) or self.refinements < 0:
            raise ValueError(
                f"Regularized: refinements must be an integer >= 0; got {self.refinements!r}."
            )

    def tau(self, dtype) -> float:
        """The Tikhonov parameter used for `dtype`."""
        if self.regularization is None:
            return default_regularization(dtype)
        return self.regularization

    def pinv(self, B, E, ops):
        return regularized_solve(B, E, self.tau(B.dtype), self.refinements, ops)

    def solve(self, M, Q, A, b, C, ops):
        """The same operations, with the derivative rule of :mod:`ukjax._uk_regularized`
        (a tangent written with the forward pass's Cholesky factors)."""
        return regularized_uk(ops, self.tau(M.dtype), self.refinements, M, Q, A, b, C)

    def consistency_floor(self, dtype) -> float:
        return 10.0 * self.tau(dtype)

    def gram_parameters(self, dtype) -> tuple[float, int]:
        return self.tau(dtype), self.refinements


class SVD(AbstractUKSolver):
    """Always the rank-revealing SVD: exact at any rank of $A$.

    - `rcond`: singular values below `rcond` times the largest count as zero (default
      10 max(m, n) eps).
    - `kernels`: the dense backend of the other operations (default :class:`AutoKernels`).

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> A = jnp.array([[1.0, 0.0], [2.0, 0.0]])   # two copies of one constraint
        >>> b = jnp.array([0.0, 0.0])
        >>> qdd = ukjax.udwadia_kalaba(jnp.eye(2), jnp.array([1.0, -1.0]), A, b,
        ...                            uk_solver=ukjax.SVD())
        >>> [round(float(v), 12) for v in qdd]
        [0.0, -1.0]
    """

    rcond: float | None = eqx.field(static=True, default=None)
    kernels: AbstractKernels = AutoKernels()

    def pinv(self, B, E, ops):
        return pinv_solve(B, E, self.rcond)


class Cholesky(AbstractUKSolver):
    """Cholesky of the Gram matrix $BB^T$ only: for constraints of full row rank.

    Redundant constraints make the Gram matrix singular; the result is then not the UK
    acceleration (use :class:`CholeskyWithFallback`).

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> [float(v) for v in ukjax.udwadia_kalaba(jnp.eye(2), jnp.array([1.0, -1.0]),
        ...     jnp.array([[1.0, 0.0]]), jnp.array([0.0]), uk_solver=ukjax.Cholesky())]
        [0.0, -1.0]
    """

    kernels: AbstractKernels = AutoKernels()

    def pinv(self, B, E, ops):
        return full_rank_solve(B, E, ops)[0]

    def gram_parameters(self, dtype) -> tuple[float, int]:
        return 0.0, 0


class CholeskyWithFallback(AbstractUKSolver):
    """Gram-matrix Cholesky when $A$ has full row rank, exact SVD otherwise.

    The choice is made at run time. Under `vmap` the predicate is reduced over the batch
    so that `lax.cond` stays a real branch: the whole batch takes the fast path when every
    member has full row rank, and the exact SVD path otherwise.

    - `rcond`: the SVD path's rank cutoff (see :class:`SVD`).
    - `kernels`: the dense backend (default :class:`AutoKernels`).

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> A = jnp.array([[1.0, 0.0], [2.0, 0.0]])
        >>> qdd = ukjax.udwadia_kalaba(jnp.eye(2), jnp.array([1.0, -1.0]), A, jnp.zeros(2),
        ...                            uk_solver=ukjax.CholeskyWithFallback())
        >>> [round(float(v), 12) for v in qdd]
        [0.0, -1.0]
    """

    rcond: float | None = eqx.field(static=True, default=None)
    kernels: AbstractKernels = AutoKernels()

    def pinv(self, B, E, ops):
        z_fast, ok = full_rank_solve(B, E, ops)
        # A member with non-finite inputs fails anyway (and is reported): it must not push
        # the rest of a batch onto the slower path (nor change their results).
        ok = ok | ~(jnp.all(jnp.isfinite(B)) & jnp.all(jnp.isfinite(E)))
        return jax.lax.cond(
            eqxi.unvmap_all(ok), lambda: z_fast, lambda: pinv_solve(B, E, self.rcond)
        )


def check_uk_solver(uk_solver) -> AbstractUKSolver:
    """`uk_solver`, or a TypeError that says what to pass."""
    if uk_solver is None:
        return Regularized()
    if not isinstance(uk_solver, AbstractUKSolver):
        raise TypeError(
            "uk_solver must be a UK solver strategy: ukjax.Regularized() (default), "
            "ukjax.CholeskyWithFallback(), ukjax.SVD() or ukjax.Cholesky(); "
            f"got {uk_solver!r}."
        )
    return uk_solver
