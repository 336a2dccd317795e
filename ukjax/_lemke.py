r"""Lemke's complementary pivoting method for a linear complementarity problem.

Find $z$ with

$$z \ge 0,\qquad w = Mz + q \ge 0,\qquad z^Tw = 0$$

for a dense $m\times m$ matrix $M$ (Lemke, *Bimatrix equilibrium points and mathematical
programming*, Management Science 11, 1965; Cottle, Pang & Stone, *The Linear
Complementarity Problem*, 1992, §4.4). An artificial variable $z_0$ with the covering
vector $d = \mathbf 1$ makes $w - Mz - dz_0 = q$ feasible at once; complementary pivots
then walk to a basis where $z_0$ has left. For a copositive-plus $M$ the method ends at a
solution whenever one exists and otherwise on a ray, which is reported as unsolved: the
matrices of rigid contact with a polyhedral friction cone are of that kind
(Stewart & Trinkle, *An implicit time-stepping scheme for rigid body dynamics with
inelastic collisions and Coulomb friction*, IJNME 39, 1996; Anitescu & Potra, *Formulating
dynamic multi-rigid-body contact problems with friction as solvable linear complementarity
problems*, Nonlinear Dynamics 14, 1997), so for them a solution always exists and is
found.

Ties in the ratio test (degenerate problems: redundant contacts) are broken
lexicographically on the rows of the basis inverse, which rules out cycling. Cost: at
most `max_pivots` pivots of O(m^2) each on the tableau, in a `lax.while_loop`
(runs under `jit` and `vmap`).

The pivots choose the *basis* on values with no derivative; :func:`solve_basis` then
solves the final basis's linear system with the caller's (differentiable) $M$ and $q$, so
the solution's derivative is exact away from the points where the basis changes.

Example (the minimum of $\tfrac12 z^2 - z$ over $z \ge 0$, and a second variable held
at 0 by a positive rate):
    >>> import jax, jax.numpy as jnp
    >>> M = jnp.array([[1.0, 0.0], [0.0, 1.0]]); q = jnp.array([-1.0, 2.0])
    >>> sol = jax.jit(lemke)(M, q)
    >>> [float(v) for v in sol.z], [float(v) for v in sol.w], bool(sol.solved)
    ([1.0, 0.0], [0.0, 2.0], True)
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ._batching import batched_like


class LCPSolution(NamedTuple):
    """The solution of an LCP by :func:`lemke`."""

    z: jax.Array  # (m,)
    w: jax.Array  # (m,) M z + q
    basic_z: jax.Array  # (m,) bool: the z that are basic in the final basis (the others 0)
    solved: jax.Array  # () bool: a complementary basis was reached


class _Tableau(NamedTuple):
    table: jax.Array  # (m, 2m + 2): [B^-1 | B^-1 (-M) | B^-1 (-d) | B^-1 q]
    basis: jax.Array  # (m,) the basic variable of each row: w_i = i, z_i = m + i, z_0 = 2m
    entering: jax.Array  # the variable to enter next
    pivots: jax.Array
    done: jax.Array
    solved: jax.Array


def _pivot(table, r, e):
    """Gauss-Jordan pivot of `table` on row `r`, column `e`."""
    row = table[r] / table[r, e]
    col = table[:, e].at[r].set(0.0)
    return (table - col[:, None] * row[None, :]).at[r].set(row)


def _leaving_row(table, basis, e, m, tol):
    """The ratio test on column `e`: the artificial z_0's row where it is among the
    smallest ratios (it leaves as soon as it can: the basis is then complementary), else
    lexicographic ties (on the rows of B^-1, the tableau's first m columns); (row, whether
    any row bounds the step)."""
    col = table[:, e]
    eligible = col > tol
    safe = jnp.where(eligible, col, 1.0)
    inf = jnp.asarray(jnp.inf, table.dtype)
    ratio = jnp.where(eligible, table[:, -1] / safe, inf)

    def narrow(j, keep):
        ratio = jnp.where(keep, table[:, j] / safe, inf)
        best = jnp.min(ratio)
        return keep & (ratio <= best + tol * jnp.maximum(jnp.abs(best), 1.0))

    # ties only: the columns of B^-1 are visited until one row is left
    tied = lambda c: (c[0] < m) & (jnp.sum(c[1]) > 1)
    start = batched_like((jnp.zeros((), jnp.int32), narrow(-1, eligible)), table)
    _, keep = jax.lax.while_loop(tied, lambda c: (c[0] + 1, narrow(c[0], c[1])), start)
    r = jnp.argmax(keep)
    z0_row = jnp.argmax(basis == 2 * m)
    z0_ties = eligible[z0_row] & (
        ratio[z0_row] <= ratio[r] + tol * jnp.maximum(jnp.abs(ratio[r]), 1.0)
    )
    return jnp.where(z0_ties, z0_row, r), jnp.any(eligible)


def lemke(M: jax.Array, q: jax.Array, max_pivots: int | None = None, rtol: float | None = None):
    r"""Solve the LCP $(q, M)$ (module docstring) by Lemke's method; pivots below `rtol`
    (default $\varepsilon^{3/4}$) times the largest tableau entry are not taken, and at most
    `max_pivots` (default $10m + 10$) are made. Returns an :class:`LCPSolution`; `z`, `w`
    come from the final tableau (no derivative: see :func:`solve_basis`)."""
    M, q = jax.lax.stop_gradient((M, q))
    m = q.shape[0]
    dtype = q.dtype
    bound = 10 * m + 10 if max_pivots is None else max_pivots
    eps = float(jnp.finfo(dtype).eps)
    tol_rel = eps**0.75 if rtol is None else rtol
    eye = jnp.eye(m, dtype=dtype)
    table = jnp.concatenate([eye, -M, -jnp.ones((m, 1), dtype), q[:, None]], axis=1)
    tol = tol_rel * jnp.maximum(jnp.max(jnp.abs(table)), 1.0)
    basis = jnp.arange(m)
    # z_0 enters, the most negative q leaves (lexicographically among ties)
    start = jnp.argmin(q)
    feasible = q[start] >= 0
    table0 = jnp.where(feasible, table, _pivot(table, start, 2 * m))
    first = jnp.where(feasible, 0, m + start)  # the complement of the w that left
    basis0 = jnp.where(feasible, basis, basis.at[start].set(2 * m))

    def body(c: _Tableau) -> _Tableau:
        r, bounded = _leaving_row(c.table, c.basis, c.entering, m, tol)
        leaving = c.basis[r]
        table = jnp.where(bounded, _pivot(c.table, r, c.entering), c.table)
        basis = jnp.where(bounded, c.basis.at[r].set(c.entering), c.basis)
        finished = bounded & (leaving == 2 * m)
        complement = jnp.where(leaving < m, leaving + m, leaving - m)
        pivots = c.pivots + 1
        done = finished | ~bounded | (pivots >= bound)
        return _Tableau(table, basis, complement, pivots, done, finished)

    init = _Tableau(
        table0, basis0, first, jnp.zeros((), jnp.int32), feasible, jnp.asarray(feasible)
    )
    out = jax.lax.while_loop(lambda c: ~c.done, body, batched_like(init, (M, q)))
    values = out.table[:, -1]
    is_z = (out.basis >= m) & (out.basis < 2 * m)
    index = jnp.where(is_z, out.basis - m, m)  # m: out of range, dropped
    z = jnp.zeros(m, dtype).at[index].set(values, mode="drop")
    basic_z = jnp.zeros(m, bool).at[index].set(True, mode="drop")
    z = jnp.maximum(z, 0.0)
    return LCPSolution(z, M @ z + q, basic_z, out.solved)


def solve_basis(M: jax.Array, q: jax.Array, basic_z: jax.Array) -> tuple[jax.Array, jax.Array]:
    r"""$(z, w)$ of the complementary basis `basic_z` (from :func:`lemke`): $w_i = 0$ and
    $z_i$ free where `basic_z`, $z_i = 0$ elsewhere, i.e. $M_{SS}z_S = -q_S$; solved with
    the basis matrix so that derivatives flow through `M` and `q`."""
    m = q.shape[0]
    eye = jnp.eye(m, dtype=q.dtype)
    B = jnp.where(basic_z[None, :], -M, eye)  # columns: -M_i for basic z_i, e_i for w_i
    x = jnp.linalg.solve(B, q)
    z = jnp.where(basic_z, x, 0.0)
    return z, M @ z + q
