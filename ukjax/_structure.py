r"""Sparsity structure of a system's UK equation, found from its program (the solve
that uses it: :mod:`ukjax._structured_uk`).

**Detection.** The mass matrix $M(q, t)$ and the constraint Jacobians
$\partial\varphi/\partial q$, $\partial\psi/\partial\dot q$ (and raw rows $A$) are
traced once, when the system is traced, and their jaxpr is interpreted over masks of
possible non-zeros (:func:`ukjax._sparsity.nonzero_pattern`): an entry is structurally
zero only when it is zero for every state, so the pattern can only over-approximate the
true one, for any system the user writes (`int` and static fields, `jnp.where` branches,
parameters batched by `vmap`). Nothing is sampled and nothing is cached.

**Use.** With a pattern:

- the Jacobians are computed by colouring their columns (Curtis, Powell and Reid 1974, *On
  the estimation of sparse Jacobian matrices*): columns that share no row are seeded
  together, so a chain's Jacobian costs 4 forward-mode products instead of n;
- the UK solve runs :mod:`ukjax._sparse` over the structural non-zeros only: Cholesky of
  $M$ (diagonal for point masses), $B = AL^{-T}$, the Gram matrix $BB^T$ (tridiagonal for
  a chain) and its regularised Cholesky, O(n) for chains instead of O(n^3).

The structured solve is the same algorithm as :func:`ukjax._linalg.regularized_solve` (or
the plain Gram-matrix Cholesky), so results agree with the dense path to round-off.

Example:
    >>> import numpy as np
    >>> from ukjax._structure import color_columns
    >>> chain = np.array([[1, 1, 0, 0, 0, 0],        # a 3-link chain's Jacobian pattern
    ...                   [1, 1, 1, 1, 0, 0],
    ...                   [0, 0, 1, 1, 1, 1]], bool)
    >>> color_columns(chain)                          # 4 products instead of 6
    ((0, 1, 2, 3, 0, 1), 4)
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ._sparsity import nonzero_pattern


Pattern = tuple[tuple[int, int], ...]


class JacobianPlan(NamedTuple):
    """The structural non-zeros of an (m, n) Jacobian and a column colouring."""

    shape: tuple[int, int]
    entries: Pattern  # (row, column) in row-major order
    colors: tuple[int, ...]  # colour of each column (columns of one colour share no row)
    n_colors: int

    def jacobian(self, f, x: jax.Array) -> jax.Array:
        """The structural entries of the Jacobian of f at x, by one forward-mode product
        per colour (seeded with the sum of that colour's unit vectors)."""
        if not self.entries:
            return jnp.zeros((0,), x.dtype)
        S = np.zeros((self.n_colors, self.shape[1]))
        for j, c in enumerate(self.colors):
            S[c, j] = 1.0
        compressed = jax.vmap(lambda s: jax.jvp(f, (x,), (s,))[1])(jnp.asarray(S, x.dtype))
        r = np.array([i for i, _ in self.entries])
        c = np.array([self.colors[j] for _, j in self.entries])
        return compressed[c, r]


class Structure(NamedTuple):
    """Static sparsity of one system's UK equation (hashable; a trace-time constant)."""

    n: int
    mass: Pattern  # structural non-zeros of M
    holonomic: JacobianPlan | None
    nonholonomic: JacobianPlan | None
    raw: Pattern | None  # pattern of raw acceleration_constraint A (rows after the others)
    raw_rows: int

    @property
    def m(self) -> int:
        return (
            sum(p.shape[0] for p in (self.holonomic, self.nonholonomic) if p is not None)
            + self.raw_rows
        )

    def constraint_entries(self) -> Pattern:
        """Structural entries of the stacked A, rows in the order of :func:`rows`."""
        out: list[tuple[int, int]] = []
        offset = 0
        for plan in (self.holonomic, self.nonholonomic):
            if plan is not None:
                out.extend((i + offset, j) for i, j in plan.entries)
                offset += plan.shape[0]
        if self.raw is not None:
            out.extend((i + offset, j) for i, j in self.raw)
        return tuple(out)


def color_columns(pattern: np.ndarray) -> tuple[tuple[int, ...], int]:
    """Greedy colouring: columns of one colour have disjoint row supports."""
    m, n = pattern.shape
    colors: list[int] = []
    used_rows: list[np.ndarray] = []
    for j in range(n):
        col = pattern[:, j]
        for c, rows in enumerate(used_rows):
            if not np.any(rows & col):
                rows |= col
                colors.append(c)
                break
        else:
            used_rows.append(col.copy())
            colors.append(len(used_rows) - 1)
    return tuple(colors), max(len(used_rows), 1)


def _entries(pattern: np.ndarray) -> Pattern:
    return tuple((int(i), int(j)) for i, j in zip(*np.nonzero(pattern)))


def _plan(pattern: np.ndarray) -> JacobianPlan:
    colors, k = color_columns(pattern)
    return JacobianPlan(pattern.shape, _entries(pattern), colors, k)


def detect(system, n: int, dtype, blocks_fn) -> Structure | None:
    """The structure of `system` (n coordinates), or None (with a warning saying why) when
    its functions cannot be analysed.

    `blocks_fn(system, t, q, qd)` returns (M, A_hol or None, A_nonhol or None, A_raw or
    None) at one state (dense). The patterns are the entries that can be non-zero at some
    state (:func:`ukjax._sparsity.nonzero_pattern` on the traced program): never fewer than
    the true ones, so the structured solve is exact wherever the dense one is."""
    scalar = jax.ShapeDtypeStruct((), dtype)
    vector = jax.ShapeDtypeStruct((n,), dtype)
    try:
        M, hol, nonhol, raw = nonzero_pattern(
            lambda t, q, qd: blocks_fn(system, t, q, qd), scalar, vector, vector
        )
    except Exception as error:  # noqa: BLE001 - an unanalysable system runs dense, said why
        warnings.warn(
            f"ukjax: the sparsity of {type(system).__name__}'s mass matrix and constraint "
            f"Jacobians could not be analysed ({type(error).__name__}: {error}); the dense "
            "UK solve is used.",
            stacklevel=2,
        )
        return None
    return Structure(
        n=n,
        mass=_entries(M | M.T),
        holonomic=None if hol is None else _plan(hol),
        nonholonomic=None if nonhol is None else _plan(nonhol),
        raw=None if raw is None else _entries(raw),
        raw_rows=0 if raw is None else raw.shape[0],
    )


def rows_structure(n: int, mass: np.ndarray, rows: np.ndarray) -> Structure:
    """The structure of a solve with one block of rows (a Jacobian of pattern `rows`) and
    a mass matrix of pattern `mass` (the mass-metric projection's solve)."""
    return Structure(n, _entries(mass | mass.T), _plan(rows), None, None, 0)


def dense_multiply_adds(structure: Structure) -> float:
    """The dense factorisations' multiply-adds, $n^3/3 + mn^2 + nm^2 + m^3/3$."""
    n, m = structure.n, structure.m
    return n**3 / 3 + m * n * n + n * m * m + m**3 / 3


def worthwhile(structure: Structure, kernels) -> bool:
    """Whether `kernels` (a :class:`ukjax.AbstractKernels`) take the structured solve for
    this structure, given its multiply-adds (:func:`multiply_adds`, fill-in included), the
    dense ones (:func:`dense_multiply_adds`) and whether their dense solve of this size is
    written out (its operations, for the larger of n and m as the UK solve takes them,
    call no LAPACK)."""
    written_out = not kernels.ops(max(structure.n, structure.m)).calls_lapack
    return kernels.structure_pays(
        dense_multiply_adds(structure), multiply_adds(structure), written_out
    )


# ----------------------------------------------------------------------------- the solve
def entries_of(X: jax.Array, pattern: Pattern) -> jax.Array:
    """The entries of the matrix X at `pattern`, in its order (one gather)."""
    if not pattern:
        return jnp.zeros((0,), X.dtype)
    r, c = (np.array(ix, int) for ix in zip(*pattern))
    return X[r, c]


# ------------------------------------------------------------------- symbolic cost
def _cholesky_fill(P: np.ndarray) -> np.ndarray:
    """The lower pattern of the Cholesky factor of a symmetric pattern (with fill-in, in
    the natural order, as :func:`ukjax._sparse.cholesky` eliminates)."""
    L = np.tril(P | P.T)
    np.fill_diagonal(L, True)
    for j in range(L.shape[0]):
        rows = j + 1 + np.nonzero(L[j + 1 :, j])[0]
        if rows.size > 1:
            L[np.ix_(rows, rows)] |= np.tril(np.ones((rows.size, rows.size), bool))
    return L


def _lower_solve_fill(L: np.ndarray, X: np.ndarray) -> np.ndarray:
    """The pattern of the rows of X L^{-T} (each row's L^{-1} x)."""
    Y = X.copy()
    for i in range(L.shape[0]):
        Y[:, i] |= (Y[:, :i] & L[i, :i]).any(axis=1)
    return Y


def multiply_adds(structure: Structure) -> int:
    """The scalar multiply-adds of one structured solve (factorisations of M and of the
    Gram matrix with their fill-in, B = A L^{-T}, the Gram products), from the patterns
    alone: what the straight-line program of :func:`structured_solve` emits."""
    n, m = structure.n, structure.m
    M = np.zeros((n, n), bool)
    for i, j in structure.mass:
        M[i, j] = True
    L = _cholesky_fill(M)
    cost = int(np.sum(L.sum(axis=0) ** 2))
    if m == 0:
        return cost
    A = np.zeros((m, n), bool)
    for i, j in structure.constraint_entries():
        A[i, j] = True
    B = _lower_solve_fill(L, A)
    cost += int(B.sum()) * int(np.ceil(L.sum() / n))
    cost += int(np.sum(B.sum(axis=0) ** 2))  # B B^T: each column pairs its rows
    G = (B.astype(np.int64) @ B.T.astype(np.int64)) > 0
    return cost + int(np.sum(_cholesky_fill(G).sum(axis=0) ** 2))
