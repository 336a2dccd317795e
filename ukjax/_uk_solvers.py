r"""How the Udwadia-Kalaba equation computes $B^+E$: strategy objects.

With $M = LL^T$ and $B = AL^{-T}$ the UK acceleration needs $B^+E$ for the small
right-hand side $E = [\,b - Aa,\ BL^{-1}C\,]$ (see :mod:`ukjax._uk`). A UK solver decides
how:

- :class:`CholeskyWithFallback` (the default): Cholesky of the Gram matrix $BB^T$ when $A$
  has full row rank, and an exact rank-revealing SVD otherwise (redundant or dependent
  constraints), chosen at run time.
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

from ._kernels import AbstractKernels, AutoKernels, DenseOps
from ._linalg import full_rank_solve, pinv_solve


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


class CholeskyWithFallback(AbstractUKSolver):
    """Gram-matrix Cholesky when $A$ has full row rank, exact SVD otherwise (default).

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
        return CholeskyWithFallback()
    if not isinstance(uk_solver, AbstractUKSolver):
        raise TypeError(
            "uk_solver must be a UK solver strategy: ukjax.CholeskyWithFallback() (default), "
            f"ukjax.SVD() or ukjax.Cholesky(); got {uk_solver!r}."
        )
    return uk_solver
