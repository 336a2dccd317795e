r"""Dense kernels for the Udwadia-Kalaba solve: LAPACK calls, or unrolled scalar code for
small systems.

The UK right-hand side needs a Cholesky factor of $M$ (n, n) and of the Gram matrix
$BB^T$ (m, m), a few triangular solves and matrix-vector products. Two interchangeable
implementations:

- :data:`LAPACK`: `jnp.linalg.cholesky`, `jax.scipy.linalg.solve_triangular` and `@`.
  Under `vmap` on CPU each batched factorisation is one LAPACK call per matrix, which is
  the faster choice from n of about 10-12 upwards.
- :data:`UNROLLED`: the same algorithms written as straight-line scalar code (the textbook
  column Cholesky, forward and back substitution, products as multiply-and-sum). Under
  `vmap` every scalar becomes a vector over the batch, so XLA fuses the whole solve into a
  few loops over the batch with no per-matrix calls. The program grows like $n^3$, so
  this is only used for small n (:data:`UNROLL_MAX_N`, chosen by
  `benchmarks/kernels.py` at batch 1024-16384 on the 2-core CPU: 5-8x faster than
  LAPACK at n = 2, 2-5x at n = 3-6, 1.2-1.9x at n = 8, slower from n = 12, with compile
  time growing to 3-4 s at n = 8).

Both compute the same exact factorisations (no approximation); a non-SPD input gives NaN
entries in either, which the callers detect.
"""

from __future__ import annotations

from typing import NamedTuple, Callable

import jax
import jax.numpy as jnp


UNROLL_MAX_N = 8
"""Largest number of coordinates for which `method="auto"` uses the unrolled kernels."""


def _cholesky_unrolled(M: jax.Array) -> jax.Array:
    # Symmetrised input, as jnp.linalg.cholesky(symmetrize_input=True): same derivative
    # (dM + dM^T)/2 for non-symmetric tangents.
    M = 0.5 * (M + M.T)
    n = M.shape[0]
    L = [[None] * n for _ in range(n)]
    for j in range(n):
        s = M[j, j]
        for k in range(j):
            s = s - L[j][k] * L[j][k]
        d = jnp.sqrt(s)
        L[j][j] = d
        r = 1.0 / d
        for i in range(j + 1, n):
            s = M[i, j]
            for k in range(j):
                s = s - L[i][k] * L[j][k]
            L[i][j] = s * r
    zero = jnp.zeros((), M.dtype)
    return jnp.stack([jnp.stack([L[i][j] if j <= i else zero for j in range(n)]) for i in range(n)])


def _solve_lower_unrolled(L: jax.Array, X: jax.Array) -> jax.Array:
    """$L^{-1}X$ for lower-triangular L (n, n) and X (n,) or (n, k)."""
    n = L.shape[0]
    rows = []
    for i in range(n):
        s = X[i]
        for k in range(i):
            s = s - L[i, k] * rows[k]
        rows.append(s / L[i, i])
    return jnp.stack(rows)


def _solve_lower_t_unrolled(L: jax.Array, X: jax.Array) -> jax.Array:
    """$L^{-T}X$ for lower-triangular L."""
    n = L.shape[0]
    rows = [None] * n
    for i in reversed(range(n)):
        s = X[i]
        for k in range(i + 1, n):
            s = s - L[k, i] * rows[k]
        rows[i] = s / L[i, i]
    return jnp.stack(rows)


def _matmul_unrolled(A: jax.Array, X: jax.Array) -> jax.Array:
    """$AX$ for X (k,) or (k, p) as a multiply-and-sum (fuses under vmap)."""
    if X.ndim == 1:
        return jnp.sum(A * X[None, :], axis=1)
    return jnp.sum(A[:, :, None] * X[None, :, :], axis=1)


def _gram_unrolled(B: jax.Array) -> jax.Array:
    return jnp.sum(B[:, None, :] * B[None, :, :], axis=2)


class DenseOps(NamedTuple):
    """The dense operations the UK solve needs (all on single, unbatched operands)."""

    cholesky: Callable  # M -> lower L with M = L L^T (NaN entries when M is not SPD)
    solve_lower: Callable  # (L, X) -> L^{-1} X
    solve_lower_t: Callable  # (L, X) -> L^{-T} X
    matmul: Callable  # (A, X) -> A X, X of shape (k,) or (k, p)
    gram: Callable  # B -> B B^T


LAPACK = DenseOps(
    cholesky=jnp.linalg.cholesky,
    solve_lower=lambda L, X: jax.scipy.linalg.solve_triangular(L, X, lower=True),
    solve_lower_t=lambda L, X: jax.scipy.linalg.solve_triangular(L, X, lower=True, trans=1),
    matmul=lambda A, X: A @ X,
    gram=lambda B: B @ B.T,
)

UNROLLED = DenseOps(
    cholesky=_cholesky_unrolled,
    solve_lower=_solve_lower_unrolled,
    solve_lower_t=_solve_lower_t_unrolled,
    matmul=_matmul_unrolled,
    gram=_gram_unrolled,
)
