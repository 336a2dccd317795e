r"""Sparse straight-line linear algebra for the structured UK solve.

Matrices are lists of rows, each row a dict ``{column: scalar}`` holding only the
*structural* non-zeros (entries that a pattern says may be non-zero); vectors are lists
whose entries are scalars, small arrays of shape (k,) (several right-hand sides at once) or
``None`` for a structural zero. Every function runs at trace time and emits one scalar
operation per structural multiply-add, so the program does work only where the matrices
have entries, and fill-in is discovered as the factorisation proceeds (symbolic and
numeric factorisation in one pass). Under `vmap` each scalar becomes a vector over the
batch and XLA fuses the whole solve, as it does for the dense unrolled kernels of
:mod:`ukjax._kernels`.

For a chain of bodies (each joint couples two neighbours) with a diagonal mass matrix the
Gram matrix $A M^{-1} A^T$ is tridiagonal and everything here is O(n) (Baraff 1996,
*Linear-time dynamics using Lagrange multipliers*, SIGGRAPH; the elimination order is the
natural order of the rows, which for chains and trees listed from the root is fill-free).

Example:
    >>> import jax.numpy as jnp
    >>> from ukjax._sparse import cholesky, solve_lower
    >>> M = [{0: jnp.array(4.0)}, {1: jnp.array(9.0)}]      # diagonal: no off-diagonal work
    >>> L = cholesky(M)
    >>> [sorted(row) for row in L], [float(L[i][i]) for i in range(2)]
    ([[0], [1]], [2.0, 3.0])
    >>> y = solve_lower(L, [jnp.array(2.0), None])          # None: a structural zero
    >>> float(y[0]), y[1]
    (1.0, None)
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp


Rows = list[dict[int, Any]]
Vec = list[Any]


def from_entries(pattern: tuple[tuple[int, int], ...], values: list[Any], n_rows: int) -> Rows:
    rows: Rows = [{} for _ in range(n_rows)]
    for (i, j), v in zip(pattern, values):
        rows[i][j] = v
    return rows


def computed_once(vec: Vec) -> Vec:
    r"""The entries of `vec` (None kept), computed once for every operation that reads them.

    XLA copies a chain of cheap elementwise operations into each kernel that reads its
    result, and two copies may round differently (a multiply-add contracted into one
    fused multiply-add in one kernel and not in the other). A value computed by
    cancellation, such as the constraint right-hand side $e = b - Aa$ of a system nearly
    at rest (a few ulps of its terms), can then differ between two copies by 1e-4 of
    itself, and a check that compares one copy with a solve made from the other (the
    inconsistency $\|G\lambda - e\|$ of :mod:`ukjax._structured_uk`) fails on
    constraints that are consistent. XLA does not copy a division (it counts one
    expensive), so one division of the stacked entries by a traced one makes every
    reader see the same numbers; `jax.lax.optimization_barrier` did not (measured:
    `benchmarks/RESULTS.md`, stop 97). A non-finite first entry makes every entry NaN.

    Example:
        >>> import jax.numpy as jnp
        >>> once = computed_once([jnp.array(2.0), None, jnp.array(-1.0)])
        >>> [None if v is None else float(v) for v in once]
        [2.0, None, -1.0]
    """
    present = [v for v in vec if v is not None]
    if not present:
        return vec
    stacked = jnp.stack(present)
    once = iter(stacked / (1.0 + 0.0 * stacked[0]))  # a one that XLA cannot fold away
    return [None if v is None else next(once) for v in vec]


def stack(vec: Vec, like: jax.Array) -> jax.Array:
    """A dense array from a vector with structural zeros (``like``: an entry's zero)."""
    return jnp.stack([jnp.zeros_like(like) if v is None else v for v in vec])


def _sum(terms: list[Any]) -> Any:
    if not terms:
        return None
    s = terms[0]
    for x in terms[1:]:
        s = s + x
    return s


def total(values: list[Any], dtype) -> Any:
    """The sum of the entries given (a zero of `dtype` when there are none)."""
    s = _sum(values)
    return jnp.zeros((), dtype) if s is None else s


def _sub(x, y) -> Any:
    """x - y with None as zero."""
    if y is None:
        return x
    return -y if x is None else x - y


def cholesky(M: Rows) -> Rows:
    """Lower factor L (rows, L[i] = {j <= i}) with M = L L^T; symmetrised input, NaN
    entries when M is not positive definite (as the dense kernels)."""
    n = len(M)
    L: Rows = [{} for _ in range(n)]
    for j in range(n):
        s = _sub(_lower_entry(M, j, j), _sum([v * v for v in L[j].values()]))
        d = jnp.sqrt(s)
        r = 1.0 / d
        keys_j = set(L[j])
        for i in range(j + 1, n):
            shared = keys_j.intersection(L[i])
            m_ij = _lower_entry(M, i, j)
            if m_ij is None and not shared:
                continue
            s_ij = _sub(m_ij, _sum([L[i][k] * L[j][k] for k in sorted(shared)]))
            L[i][j] = s_ij * r
        L[j][j] = d
    return L


def _lower_entry(M: Rows, i: int, j: int) -> Any:
    """The symmetrised entry (M[i][j] + M[j][i]) / 2, i >= j (0 when both are zero)."""
    a, b = M[i].get(j), M[j].get(i)
    if i == j:
        return jnp.zeros(()) if a is None else a
    if a is None or b is None:
        return a if b is None else b
    return 0.5 * (a + b)


def columns(L: Rows) -> Rows:
    """The transpose's rows: C[j] = {i: L[i][j]}."""
    n_cols = 1 + max((j for row in L for j in row), default=-1)
    C: Rows = [{} for _ in range(max(n_cols, len(L)))]
    for i, row in enumerate(L):
        for j, v in row.items():
            C[j][i] = v
    return C


def _diagonal_inverse(L: Rows) -> list[Any] | None:
    """The reciprocals of a diagonal factor's entries (None if L is not diagonal)."""
    if not all(len(row) == 1 for row in L):
        return None
    return [1.0 / L[i][i] for i in range(len(L))]


def solve_lower(L: Rows, x: Vec) -> Vec:
    """L^{-1} x for the lower factor L."""
    y: Vec = []
    for i, row in enumerate(L):
        s = _sub(x[i], _sum([v * y[k] for k, v in row.items() if k < i and y[k] is not None]))
        y.append(None if s is None else s / row[i])
    return y


def solve_lower_t(L: Rows, x: Vec, Lcols: Rows | None = None) -> Vec:
    """L^{-T} x for the lower factor L (`Lcols`: :func:`columns` of L, if at hand)."""
    C = columns(L) if Lcols is None else Lcols
    n = len(L)
    y: Vec = [None] * n
    for i in reversed(range(n)):
        s = _sub(x[i], _sum([v * y[k] for k, v in C[i].items() if k > i and y[k] is not None]))
        y[i] = None if s is None else s / L[i][i]
    return y


def matvec(A: Rows, x: Vec) -> Vec:
    return [_sum([v * x[j] for j, v in row.items() if x[j] is not None]) for row in A]


def matvec_t(A: Rows, y: Vec, n: int) -> Vec:
    """A^T y for A with n columns."""
    out: list[list[Any]] = [[] for _ in range(n)]
    for i, row in enumerate(A):
        if y[i] is None:
            continue
        for j, v in row.items():
            out[j].append(v * y[i])
    return [_sum(t) for t in out]


def rows_solve_lower(L: Rows, A: Rows) -> Rows:
    """The rows of A L^{-T} (row i is L^{-1} applied to row i of A).

    A diagonal L (a diagonal M) scales A's columns by its n reciprocals: a division per
    entry would end a fused kernel at each under `vmap` (XLA counts a division as
    expensive). The triangular solves keep their divisions: there they are what stops
    XLA from copying chains of products into every consumer (`benchmarks/RESULTS.md`,
    stop 70, has the kernel counts and times of both)."""
    n = len(L)
    inverse = _diagonal_inverse(L)
    if inverse is not None:
        return [{j: v * inverse[j] for j, v in row.items()} for row in A]
    out: Rows = []
    for row in A:
        y = solve_lower(L, [row.get(j) for j in range(n)])
        out.append({j: v for j, v in enumerate(y) if v is not None})
    return out


def gram(B: Rows) -> Rows:
    """The lower triangle (with diagonal) of B B^T."""
    G: Rows = []
    for i, bi in enumerate(B):
        row = {}
        for r in range(i + 1):
            shared = set(bi).intersection(B[r])
            if shared:
                row[r] = _sum([bi[j] * B[r][j] for j in sorted(shared)])
        G.append(row)
    return G


def symmetric_matvec(G: Rows, x: Vec) -> Vec:
    """G x for the symmetric G given by its lower triangle (rows, as :func:`gram` returns)."""
    out: list[list[Any]] = [[] for _ in range(len(G))]
    for i, row in enumerate(G):
        for j, v in row.items():
            if x[j] is not None:
                out[i].append(v * x[j])
            if j != i and x[i] is not None:
                out[j].append(v * x[i])
    return [_sum(t) for t in out]


def size(A: Rows) -> int:
    """The number of structural entries of A."""
    return sum(len(row) for row in A)


def scale_rows(d: Vec, A: Rows) -> Rows:
    return [{j: d[i] * v for j, v in row.items()} for i, row in enumerate(A)]


def norm2(values: list[Any]) -> Any:
    """Euclidean norm of the given entries (None skipped)."""
    present = [v for v in values if v is not None]
    if not present:
        return jnp.zeros(())
    return jnp.sqrt(_sum([jnp.sum(v * v) for v in present]))
