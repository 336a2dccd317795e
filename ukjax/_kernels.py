r"""Kernel backends of the Udwadia-Kalaba solve: LAPACK calls, or unrolled scalar code for
small systems, as strategy objects (:class:`AutoKernels`, :class:`UnrolledKernels`,
:class:`LapackKernels`).

The UK right-hand side needs a Cholesky factor of $M$ (n, n) and of the Gram matrix
$BB^T$ (m, m), a few triangular solves and matrix-vector products. Two interchangeable
implementations:

- :class:`LapackKernels`: `jnp.linalg.cholesky`, `jax.scipy.linalg.solve_triangular` and `@`.
  Under `vmap` on CPU each batched factorisation is one LAPACK call per matrix, which is
  the faster choice for larger n.
- :class:`UnrolledKernels`: the same algorithms written as straight-line scalar code (the textbook
  column Cholesky, forward and back substitution, products as chains of multiplies and adds,
  with no `reduce` op: jaxlib 0.10's CPU compiler sends batched reductions over a short
  axis to YNNPACK, which is slow for short axes). Under
  `vmap` every scalar becomes a vector over the batch, so XLA fuses the whole solve into a
  few loops over the batch with no per-matrix calls. The program grows like $n^3$, so
  :class:`AutoKernels` uses it only for small n (`max_unrolled`, chosen by
  `benchmarks/kernels.py`: faster than LAPACK up to n = 8 and slower from n = 12, with a
  compile time that grows with n; the figures are in `benchmarks/RESULTS.md`, kernels
  section).

Both compute the same exact factorisations (no approximation); a non-SPD input gives NaN
entries in either, which the callers detect.

A third way, for large sparse systems, works on structural non-zeros only
(:mod:`ukjax._structure`): :class:`AutoKernels` takes it from :data:`STRUCTURED_MIN_N`
coordinates where it is :data:`WORTHWHILE_RATIO` times less work, :class:`StructuredKernels`
whenever it is less work.
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp


UNROLL_MAX_N = 8
"""Largest number of coordinates for which :class:`AutoKernels` uses the unrolled kernels."""

STRUCTURED_MIN_N = 16
"""Smallest number of coordinates for which :class:`AutoKernels` finds the sparsity of M and
of the constraint Jacobians from the system's program (:mod:`ukjax._structure`) and, where
it is sparse enough, solves on the structural non-zeros. Chosen by `benchmarks/structure.py`
on a user-written chain (figures in `benchmarks/RESULTS.md`, structure section): faster
batched from this size, slower for a single trajectory.
`AutoKernels(min_structured=None)` or :class:`LapackKernels` turn it off."""


WORTHWHILE_RATIO = 20.0
"""How many times fewer multiply-adds than the dense solve the structured one must do for
:class:`AutoKernels` to use it: a chain of n = 16 (35x fewer) takes it, the Bricard
mechanism (24 redundant rows closing a loop, whose Gram matrix fills in: 8x fewer) does
not; their timings are in `benchmarks/RESULTS.md` (structure section)."""


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
)


class AbstractKernels(eqx.Module):
    """The kernel backend of a UK solve: which dense operations to use for n coordinates.

    Subclass it and implement :meth:`ops`; every UK solver strategy
    (:class:`ukjax.CholeskyWithFallback`, :class:`ukjax.SVD`, :class:`ukjax.Cholesky`) has
    a `kernels` field that takes one.
    """

    @abc.abstractmethod
    def ops(self, n: int) -> DenseOps:
        """The :class:`DenseOps` for a system of `n` coordinates (decided at trace time)."""

    def structured(self, n: int) -> bool:
        """Whether a system of `n` coordinates should have the sparsity of its mass matrix
        and constraint Jacobians detected and used (:mod:`ukjax._structure`); the dense
        :meth:`ops` remain the fallback when it has none worth using."""
        return False

    def structure_pays(self, dense: float, structured: float) -> bool:
        """Whether the structured solve is used for a system whose dense factorisations
        cost `dense` multiply-adds and whose structured solve `structured` (both counted
        from the patterns, :func:`ukjax._structure.multiply_adds`)."""
        return False

    def at_events(self) -> AbstractKernels:
        """The kernels of the code of a hybrid run (:mod:`ukjax._hybrid`) that runs once
        per step or once per event, not once per stage of a step: the event values (the
        contact forces of the stick-slip events), the mode switches, impacts and the
        complementarity pivots. It holds many UK solves that run seldom next to the
        stages: the same kernels unless a subclass says otherwise."""
        return self


class LapackKernels(AbstractKernels):
    """LAPACK factorisations and triangular solves (`jnp.linalg`, `jax.scipy.linalg`).

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> solver = ukjax.CholeskyWithFallback(kernels=ukjax.LapackKernels())
        >>> [float(v) for v in ukjax.udwadia_kalaba(jnp.eye(2), jnp.array([0.0, -1.0]),
        ...     jnp.array([[0.0, 1.0]]), jnp.array([0.0]), uk_solver=solver)]
        [0.0, 0.0]
    """

    def ops(self, n: int) -> DenseOps:
        return LAPACK


class UnrolledKernels(AbstractKernels):
    """Straight-line scalar code that XLA fuses across a `vmap` batch (any n; the program
    grows like n^3, so prefer :class:`AutoKernels` unless n is small).

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> solver = ukjax.CholeskyWithFallback(kernels=ukjax.UnrolledKernels())
        >>> [float(v) for v in ukjax.udwadia_kalaba(jnp.eye(2), jnp.array([0.0, -1.0]),
        ...     jnp.array([[0.0, 1.0]]), jnp.array([0.0]), uk_solver=solver)]
        [0.0, 0.0]
    """

    def ops(self, n: int) -> DenseOps:
        return UNROLLED


class AutoKernels(AbstractKernels):
    """Unrolled kernels for n <= `max_unrolled` (the UK solve passes the larger of the
    number of coordinates and of constraint rows: it factors both M and the m x m Gram
    matrix), LAPACK above (the default);
    from `min_structured` coordinates (default :data:`STRUCTURED_MIN_N`, None: never) the
    UK solve and the projection work on the structural non-zeros of M and of the constraint
    Jacobians, found from the system's program (:mod:`ukjax._structure`), when that is at
    least :data:`WORTHWHILE_RATIO` times fewer multiply-adds than the dense solve.

    The threshold 8 was measured by `benchmarks/kernels.py` on a 2-core CPU. The code
    that a hybrid run executes once per step or per event (:meth:`at_events`: event values,
    switches, impacts, pivots) uses unrolled kernels only up to `max_unrolled_at_events`
    coordinates (default 2, LAPACK above): it holds a dozen UK solves whose unrolled
    copies doubled the compile time of contact runs from n = 3 on, while the stages of
    the steps keep the unrolled kernels (`benchmarks/RESULTS.md`, contact compile section).

    Example:
        >>> import ukjax
        >>> ukjax.AutoKernels().ops(4) is ukjax.UnrolledKernels().ops(4)
        True
        >>> ukjax.AutoKernels(max_unrolled=2).ops(4) is ukjax.LapackKernels().ops(4)
        True
        >>> ukjax.AutoKernels().at_events().ops(4) is ukjax.LapackKernels().ops(4)
        True
        >>> off = ukjax.AutoKernels(min_structured=None)
        >>> ukjax.AutoKernels().structured(16), off.structured(64)
        (True, False)
    """

    max_unrolled: int = eqx.field(static=True, default=UNROLL_MAX_N)
    min_structured: int | None = eqx.field(static=True, default=STRUCTURED_MIN_N)
    max_unrolled_at_events: int = eqx.field(static=True, default=2)

    def ops(self, n: int) -> DenseOps:
        return UNROLLED if n <= self.max_unrolled else LAPACK

    def structured(self, n: int) -> bool:
        return self.min_structured is not None and n >= self.min_structured

    def structure_pays(self, dense: float, structured: float) -> bool:
        return dense >= WORTHWHILE_RATIO * max(structured, 1.0)

    def at_events(self) -> AutoKernels:
        return AutoKernels(
            max_unrolled=self.max_unrolled_at_events,
            min_structured=self.min_structured,
            max_unrolled_at_events=self.max_unrolled_at_events,
        )


class StructuredKernels(AbstractKernels):
    """Find the sparsity of M and of the constraint Jacobians and work only on their
    structural non-zeros, at any n, whenever that is fewer multiply-adds than the dense
    solve (:mod:`ukjax._structure`); dense kernels as :class:`AutoKernels` otherwise.

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import PlanarChain
        >>> chain = PlanarChain.uniform(3)
        >>> q, qd = chain.state_from_angles(jnp.array([0.1, 0.2, 0.3]), jnp.zeros(3))
        >>> solver = ukjax.Regularized(kernels=ukjax.StructuredKernels())
        >>> fast = ukjax.acceleration(chain, 0.0, q, qd, uk_solver=solver)
        >>> dense = ukjax.acceleration(chain, 0.0, q, qd,
        ...     uk_solver=ukjax.Regularized(kernels=ukjax.LapackKernels()))
        >>> bool(jnp.allclose(fast, dense, rtol=1e-10, atol=1e-10))
        True
    """

    max_unrolled: int = eqx.field(static=True, default=UNROLL_MAX_N)

    def ops(self, n: int) -> DenseOps:
        return AutoKernels(max_unrolled=self.max_unrolled).ops(n)

    def structured(self, n: int) -> bool:
        return True

    def structure_pays(self, dense: float, structured: float) -> bool:
        return structured < dense
