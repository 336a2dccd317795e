r"""The dense operations of the Udwadia-Kalaba solve (:class:`DenseOps`): LAPACK calls,
or unrolled scalar code for small systems. Which of them a solve uses is a strategy's
choice (:mod:`ukjax._kernel_strategies`: :class:`ukjax.AutoKernels`,
:class:`ukjax.UnrolledKernels`, :class:`ukjax.LapackKernels`).

The UK right-hand side needs a Cholesky factor of $M$ (n, n) and of the Gram matrix
$BB^T$ (m, m), a few triangular solves and matrix-vector products. Two interchangeable
implementations:

- :data:`LAPACK`: `jnp.linalg.cholesky`, `jax.scipy.linalg.solve_triangular` and `@`.
  Under `vmap` on CPU each batched factorisation is one LAPACK call per matrix, which is
  the faster choice for larger n.
- :data:`UNROLLED`: the same algorithms written as straight-line scalar code (the textbook
  column Cholesky, forward and back substitution, products as chains of multiplies and adds,
  with no `reduce` op: jaxlib 0.10's CPU compiler sends batched reductions over a short
  axis to YNNPACK, which is slow for short axes). Under
  `vmap` every scalar becomes a vector over the batch, so XLA fuses the whole solve into a
  few loops over the batch with no per-matrix calls. The program grows like $n^3$, so
  :class:`ukjax.AutoKernels` uses it only for small n (:data:`UNROLL_MAX_N`, chosen by
  `benchmarks/kernels.py`: faster than LAPACK up to n = 8 and slower from n = 12, with a
  compile time that grows with n; the figures are in `benchmarks/RESULTS.md`, kernels
  section).

Both compute the same exact factorisations (no approximation); a non-SPD input gives NaN
entries in either, which the callers detect.

Example:
    >>> import jax.numpy as jnp
    >>> from ukjax._kernels import LAPACK, UNROLLED
    >>> M = jnp.array([[4.0, 2.0], [2.0, 3.0]])
    >>> [UNROLLED.triangular(UNROLLED.cholesky(M)).solve(jnp.array([2.0, 1.0])).tolist(),
    ...  LAPACK.triangular(LAPACK.cholesky(M)).solve(jnp.array([2.0, 1.0])).tolist()]
    [[0.5, 0.0], [0.5, 0.0]]
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp


UNROLL_MAX_N = 8
"""Largest number of coordinates for which :class:`ukjax.AutoKernels` uses the unrolled
kernels."""


def unpack(X: jax.Array) -> list[jax.Array]:
    """The rows of X (as X[i]) by one `lax.split`.

    Indexing X[i] row by row is the same in the forward pass, but its transpose is a
    zero array padded around each cotangent, one per index: reverse-mode derivatives of
    the unrolled kernels then cost O(n) dense arrays per scalar. The transpose of one
    split is one concatenation."""
    if X.shape[0] == 0:
        return []
    if X.shape[0] == 1:  # one row: no split to trace (n = 1 systems unpack many of these)
        return [X.reshape(X.shape[1:])]
    return [r.reshape(X.shape[1:]) for r in jax.lax.split(X, [1] * X.shape[0], axis=0)]


def diagonal(X: jax.Array) -> jax.Array:
    """The diagonal of a square matrix as one strided slice of its entries.

    `jnp.diagonal` traces a gather and a branch per platform (about 20 equations and two
    nested programs, each traced and batched again under `vmap`); the UK solves take a
    dozen diagonals per step of a hybrid run."""
    if X.ndim != 2 or X.shape[0] != X.shape[1]:
        return jnp.diagonal(X, axis1=-2, axis2=-1)
    n = X.shape[0]
    return X.reshape(-1)[:: n + 1] if n > 1 else X.reshape(n)


def _entries(X: jax.Array) -> list[list[jax.Array]]:
    """The scalars X[i, j] of a matrix as nested lists (two levels of :func:`unpack`)."""
    return [unpack(r) for r in unpack(X)]


def _cholesky_unrolled(M: jax.Array, symmetrize: bool = True) -> jax.Array:
    if M.shape == (1, 1):  # one entry: its square root (NaN where M is not positive)
        return jnp.sqrt(M)
    # Symmetrised input, as jnp.linalg.cholesky(symmetrize_input=True): same derivative
    # (dM + dM^T)/2 for non-symmetric tangents. Without: M's lower triangle as it is.
    Ms = _entries(0.5 * (M + M.T) if symmetrize else M)
    n = len(Ms)
    L: list[list[Any]] = [[None] * n for _ in range(n)]
    for j in range(n):
        s = Ms[j][j]
        for k in range(j):
            s = s - L[j][k] * L[j][k]
        d = jnp.sqrt(s)
        L[j][j] = d
        r = 1.0 / d
        for i in range(j + 1, n):
            s = Ms[i][j]
            for k in range(j):
                s = s - L[i][k] * L[j][k]
            L[i][j] = s * r
    zero = jnp.zeros((), M.dtype)
    return jnp.stack([jnp.stack([L[i][j] if j <= i else zero for j in range(n)]) for i in range(n)])


def _rows_lower(Ls: list[list[jax.Array]], Xs: list[jax.Array]) -> list[jax.Array]:
    """The rows of $L^{-1}X$ by forward substitution, from L's entries and X's rows."""
    rows: list[Any] = []
    for i in range(len(Ls)):
        s = Xs[i]
        for k in range(i):
            s = s - Ls[i][k] * rows[k]
        rows.append(s / Ls[i][i])
    return rows


def _rows_lower_t(Ls: list[list[jax.Array]], Xs: list[jax.Array]) -> list[jax.Array]:
    """The rows of $L^{-T}X$ by back substitution, from L's entries and X's rows."""
    n = len(Ls)
    rows: list[Any] = [None] * n
    for i in reversed(range(n)):
        s = Xs[i]
        for k in range(i + 1, n):
            s = s - Ls[k][i] * rows[k]
        rows[i] = s / Ls[i][i]
    return rows


class Triangular(NamedTuple):
    """The solves and products with one lower-triangular factor L that a UK solve uses
    several times (:meth:`DenseOps.triangular`): the unrolled kernels unpack L's entries
    once for all of them instead of once per solve."""

    lower: Callable  # X -> L^{-1} X
    lower_t: Callable  # X -> L^{-T} X
    solve: Callable  # X -> (L L^T)^{-1} X
    times: Callable  # X -> L X


def _triangular_unrolled(L: jax.Array) -> Triangular:
    if L.shape[0] == 0:  # nothing to solve: X has no rows either
        return Triangular(lambda X: X, lambda X: X, lambda X: X, lambda X: X)
    if L.shape[0] == 1:  # one entry l: every solve and product is elementwise
        l = L.reshape(())
        return Triangular(lambda X: X / l, lambda X: X / l, lambda X: X / (l * l), lambda X: l * X)
    Ls = _entries(L)

    def times(X):  # L's lower triangle only: its upper entries are zeros
        Xs = unpack(X)
        rows = []
        for i in range(len(Ls)):
            acc = Ls[i][0] * Xs[0]
            for k in range(1, i + 1):
                acc = acc + Ls[i][k] * Xs[k]
            rows.append(acc)
        return jnp.stack(rows)

    return Triangular(
        lambda X: jnp.stack(_rows_lower(Ls, unpack(X))),
        lambda X: jnp.stack(_rows_lower_t(Ls, unpack(X))),
        lambda X: jnp.stack(_rows_lower_t(Ls, _rows_lower(Ls, unpack(X)))),
        times,
    )


def _triangular_lapack(L: jax.Array) -> Triangular:
    lower = lambda X: jax.scipy.linalg.solve_triangular(L, X, lower=True)
    lower_t = lambda X: jax.scipy.linalg.solve_triangular(L, X, lower=True, trans=1)
    return Triangular(lower, lower_t, lambda X: lower_t(lower(X)), lambda X: L @ X)


def _sum_of_outer(cols: list[jax.Array], rows: list[jax.Array], shape, dtype) -> jax.Array:
    r"""$\sum_j c_j r_j^T$ (or $\sum_j c_j r_j$ for scalar $r_j$) as a chain of multiplies
    and adds. No `reduce` op: XLA:CPU fuses elementwise chains into one loop over a vmap
    batch, whereas jaxlib 0.10's CPU compiler hands batched reductions over a short axis
    to YNNPACK, at about 100 ns per batch member and reduction (jax-ml/jax#37465)."""
    if not cols:
        return jnp.zeros(shape, dtype)
    outer = lambda c, r: c * r if r.ndim == 0 else c.reshape(-1, 1) * r.reshape(1, -1)
    acc = outer(cols[0], rows[0])
    for c, r in zip(cols[1:], rows[1:]):
        acc = acc + outer(c, r)
    return acc


def _matmul_unrolled(A: jax.Array, X: jax.Array) -> jax.Array:
    """$AX$ for X (k,) or (k, p): a sum over the columns of A (fuses under vmap)."""
    shape = (A.shape[0],) + X.shape[1:]
    if A.shape[1] == 1:  # one column times one row: a broadcast product
        return (A * X).reshape(shape)  # (m, 1) times (1,) or (1, p)
    return _sum_of_outer(unpack(A.T), unpack(X), shape, jnp.result_type(A, X))


def norm_unrolled(X: jax.Array) -> jax.Array:
    """The 2-norm of a vector (Frobenius of a matrix) as a chain of multiply-adds."""
    if X.size == 1:
        x = X.reshape(())
        return jnp.sqrt(x * x)
    entries = unpack(X.reshape(-1))
    total = jnp.zeros((), X.dtype)
    for x in entries:
        total = total + x * x
    return jnp.sqrt(total)


def _gram_unrolled(B: jax.Array) -> jax.Array:
    """$BB^T$: a sum of outer products of the columns of B (fuses under vmap)."""
    if B.shape[1] == 1:  # one column b: b b^T
        return B * B.T
    cols = unpack(B.T)
    return _sum_of_outer(cols, cols, (B.shape[0], B.shape[0]), B.dtype)


class DenseOps(NamedTuple):
    """The dense operations the UK solve needs (all on single, unbatched operands)."""

    cholesky: Callable  # M -> lower L with M = L L^T (NaN entries when M is not SPD)
    # the same for an M symmetric by construction: its lower triangle as it is, without
    # averaging M and M^T (a copy of M and a transposed read of it at every stage)
    cholesky_of_symmetric: Callable
    matmul: Callable  # (A, X) -> A X, X of shape (k,) or (k, p)
    gram: Callable  # B -> B B^T
    norm: Callable  # X -> 2-norm of a vector, Frobenius norm of a matrix
    triangular: Callable  # L -> Triangular: the solves and products with a factor L
    # whether these operations call LAPACK: a batched program that does runs in smaller
    # chunks in `ukjax.sweep` (jaxlib 0.10 splits batched LAPACK calls over XLA's thread
    # pool; `ukjax._sweep._factors_with_lapack`). True unless known otherwise.
    calls_lapack: bool = True


LAPACK = DenseOps(
    cholesky=jnp.linalg.cholesky,
    cholesky_of_symmetric=functools.partial(jnp.linalg.cholesky, symmetrize_input=False),
    matmul=lambda A, X: A @ X,
    gram=lambda B: B @ B.T,
    norm=jnp.linalg.norm,
    triangular=_triangular_lapack,
)

UNROLLED = DenseOps(
    cholesky=_cholesky_unrolled,
    cholesky_of_symmetric=functools.partial(_cholesky_unrolled, symmetrize=False),
    matmul=_matmul_unrolled,
    gram=_gram_unrolled,
    norm=norm_unrolled,
    triangular=_triangular_unrolled,
    calls_lapack=False,
)
