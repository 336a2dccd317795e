r"""The Udwadia-Kalaba solve on structural non-zeros, with a derivative rule of its own.

The forward solve is :func:`ukjax._linalg.regularized_solve`'s algorithm run by
:mod:`ukjax._sparse` over the entries a :class:`ukjax._structure.Structure` says may be
non-zero: with $M = LL^T$, $B = AL^{-T}$, $a = M^{-1}Q$, $c = M^{-1}C$ and
$E = [\,b - Aa,\ Ac\,]$, the multipliers $\Lambda = [\lambda_e, \lambda_c] = W E$ with
$W \approx G^+$ ($G = AM^{-1}A^T$, rows scaled to unit norm, Tikhonov $\tau$ and $K$
refinements), and

$$\ddot q = M^{-1}\big(Q + C + A^T(\lambda_e - \lambda_c)\big),\qquad
  Q^c_i = A^T\lambda_e,\qquad Q^c_{ni} = C - A^T\lambda_c .$$

**Derivative rule.** Differentiating $G\Lambda = E$ and writing $dG = dA\,M^{-1}A^T +
AM^{-1}dA^T - AM^{-1}dM\,M^{-1}A^T$,

$$d\Lambda = W\,(dE - dG\,\Lambda),\qquad
  (dE - dG\Lambda)_e = db - dA\,u_e - AM^{-1}\big(dQ + dA^T\lambda_e - dM\,u_e\big),$$
$$(dE - dG\Lambda)_c = dA\,u_c + AM^{-1}\big(dC - dA^T\lambda_c - dM\,u_c\big),$$

with $u_e = a + M^{-1}A^T\lambda_e$ and $u_c = c - M^{-1}A^T\lambda_c$; then
$d\ddot q = M^{-1}(dQ + dC + dA^T\mu + A^Td\mu - dM\,\ddot q)$, $\mu = \lambda_e -
\lambda_c$, and $dQ^c$ from $d\lambda$. Every $M^{-1}$ is one pair of triangular solves with
the forward pass's factor and $W$ is the forward pass's regularised Gram solve (its factor
too), so the tangent costs about one forward solve and no factorisation is differentiated:
reverse mode transposes this linear rule instead of the scalar program of both
factorisations and every refinement step (measured on chains: `benchmarks/RESULTS.md`,
gradients section).

It is the derivative of the exact UK solution evaluated with $W$ for $G^+$: equal to the
derivative of the regularised computation up to its own approximation,
$O((\tau^2/\sigma^2)^{K+1})$ relative for the Gram matrix's non-zero eigenvalues $\sigma^2$
(1e-40 for unit rows at the float64 defaults). At redundant rows the multipliers'
null-space part $\nu$ ($A^T\nu = 0$) is not defined, but it drops out of $d\ddot q$ and
$dQ^c$ for consistent constraints, which is what the solve's checks require
(`tests/test_sparse_uk.py`: against the dense rule and central differences, redundant rows
and a non-ideal force included).

Example (two point masses $m$ in the plane, $q = (x_1, y_1, x_2, y_2)$, joined by a rod
of unit length along $x$ and separating at unit speed: $\ddot x_2 - \ddot x_1 = -1$
shared equally whatever $m$, so $\partial\ddot x_2/\partial m = 0$):

    >>> import jax, jax.numpy as jnp, numpy as np
    >>> jax.config.update("jax_enable_x64", True)
    >>> from ukjax._structure import rows_structure
    >>> from ukjax._structured_uk import structured_solve
    >>> s = rows_structure(4, np.eye(4, dtype=bool), np.array([[1, 0, 1, 0]], bool))
    >>> A, b = jnp.array([-1.0, 1.0]), jnp.array([-1.0])  # A's entries at (0, 0), (0, 2)
    >>> x2dd = lambda m: structured_solve(s, m * jnp.ones(4), jnp.zeros(4), A, b, None,
    ...                                   1e-5, 3).qdd[2]
    >>> round(float(jax.jit(x2dd)(2.0)), 12), abs(float(jax.jit(jax.grad(x2dd))(2.0))) < 1e-12
    (-0.5, True)
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

import ukjax._sparse as sp

from ._kernels import unpack
from ._structure import Structure
from ._uk import UKTerms


class _Core(NamedTuple):
    """The differentiable outputs of the solve (dense arrays)."""

    qdd: jax.Array
    a: jax.Array
    Qc_i: jax.Array
    Qc_ni: jax.Array
    inconsistency: jax.Array  # a check: zero tangent
    L_diagonal: jax.Array  # a check (finite: M positive definite): zero tangent


class _Factors(NamedTuple):
    """What the derivative rule reuses from the forward solve (sparse lists)."""

    L: sp.Rows
    Lc: sp.Rows
    A: sp.Rows
    B: sp.Rows
    gram: Any  # E -> W E (None when there are no rows)
    lam_e: sp.Vec
    lam_c: sp.Vec | None
    a: sp.Vec
    c: sp.Vec | None
    qdd: sp.Vec


def structured_solve(
    structure: Structure,
    M_values: jax.Array,
    Q: jax.Array,
    A_values: jax.Array,
    b: jax.Array,
    C: jax.Array | None,
    tau: float,
    refinements: int,
    consistency_floor: float = 0.0,
    checked: bool = True,
) -> UKTerms:
    """The UK terms from the structural entries of M (`structure.mass` order) and of A
    (`structure.constraint_entries()` order), by the Gram-matrix solve with Tikhonov
    parameter `tau` (rows scaled to unit norm) and `refinements` steps of iterative
    refinement, as :func:`ukjax._linalg.regularized_solve` (`tau = 0`, no refinement: the
    plain Gram-matrix Cholesky), differentiated by the rule of the module docstring.
    `consistency_floor`: the UK solver's (see :class:`ukjax._uk.UKTerms`). `checked`: compute
    the terms' `inconsistency` (the relative least-squares residual the checks read), from
    one copy of $e = b - Aa$ for the solve and the residual (:func:`ukjax._sparse.
    computed_once`); False for a caller that reads only the acceleration (the projection,
    whose right-hand side may be a tangent): the inconsistency is then zero.

    Everything is straight-line scalar code over structural non-zeros
    (:mod:`ukjax._sparse`). A version with gathers over index arrays for the products
    compiled faster but ran slower inside `simulate` under `vmap` (chains of N = 4 ... 32,
    RK4; `benchmarks/RESULTS.md`, MuJoCo section), so the scalar form is kept.

    Example: see the module docstring."""
    core = _solve(structure, tau, refinements, checked, M_values, Q, A_values, b, C)
    zero = jnp.zeros((), Q.dtype)
    n, m = structure.n, structure.m
    Mrows = sp.from_entries(structure.mass, unpack(M_values), n)
    asym, min_diag = _mass_checks(structure, Mrows, M_values)
    if m:
        Arows = sp.from_entries(structure.constraint_entries(), unpack(A_values), m)
        residual = sp.stack(sp.matvec(Arows, unpack(core.qdd)), zero) - b
    else:
        residual = jnp.zeros(0, Q.dtype)
    spd_ok = jnp.all(jnp.isfinite(core.L_diagonal))
    return UKTerms(
        core.qdd, core.a, core.Qc_i, core.Qc_ni, residual, core.inconsistency, spd_ok,
        consistency_floor, asym, min_diag,
    )  # fmt: skip


def _mass_checks(structure: Structure, M: sp.Rows, M_values: jax.Array):
    """(relative asymmetry, smallest diagonal entry) from M's structural entries."""
    dtype = M_values.dtype
    zero = jnp.zeros((), dtype)
    pairs = [(i, j) for i, j in structure.mass if i > j]
    if pairs:
        asym = jnp.max(jnp.stack([jnp.abs(M[i][j] - M[j].get(i, zero)) for i, j in pairs]))
        asym = asym / jnp.maximum(jnp.max(jnp.abs(M_values)), jnp.finfo(dtype).tiny)
    else:
        asym = zero
    min_diag = jnp.min(jnp.stack([M[i].get(i, zero) for i in range(structure.n)]))
    return jax.lax.stop_gradient(asym), jax.lax.stop_gradient(min_diag)


@partial(jax.custom_jvp, nondiff_argnums=(0, 1, 2, 3))
def _solve(
    structure: Structure, tau: float, K: int, checked: bool, M_values, Q, A_values, b, C
) -> _Core:
    return _primal(structure, tau, K, checked, M_values, Q, A_values, b, C)[0]


def _primal(structure: Structure, tau: float, K: int, checked: bool, M_values, Q, A_values, b, C):
    """The solve's outputs and the factors its derivative rule reuses."""
    n, m = structure.n, structure.m
    dtype = Q.dtype
    zero = jnp.zeros((), dtype)
    L = sp.cholesky(sp.from_entries(structure.mass, unpack(M_values), n))
    Lc = sp.columns(L)
    a = _solve_M(L, Lc, unpack(Q))
    c = None if C is None else _solve_M(L, Lc, unpack(C))
    L_diagonal = jnp.stack([L[i][i] for i in range(n)])
    Arows = sp.from_entries(structure.constraint_entries(), unpack(A_values), m)
    if m == 0:
        qdd = a if c is None else [_add(x, y) for x, y in zip(a, c)]
        Qc_ni = jnp.zeros(n, dtype) if C is None else C
        core = _Core(
            sp.stack(qdd, zero), sp.stack(a, zero), jnp.zeros(n, dtype), Qc_ni, zero, L_diagonal
        )
        return core, _Factors(L, Lc, Arows, [], None, [], None, a, c, qdd)
    B = sp.rows_solve_lower(L, Arows)  # A L^{-T}
    e = [_add(bi, _neg(x)) for bi, x in zip(unpack(b), sp.matvec(Arows, a))]
    if checked:  # one copy of e for the solve and its residual
        e = sp.computed_once(e)
    if C is None:
        E = e
    else:  # A M^{-1} C = B L^{-1} C
        Bc = sp.matvec(B, sp.solve_lower(L, unpack(C)))
        E = [jnp.stack([ei, zero if x is None else x]) for ei, x in zip(e, Bc)]
    gram = _GramSolve(B, n, tau, K, zero)
    Lam = gram(E)
    lam_e = Lam if c is None else [None if v is None else v[0] for v in Lam]
    lam_c = None if c is None else [None if v is None else v[1] for v in Lam]
    Qc_i = sp.matvec_t(Arows, lam_e, n)
    mu = lam_e if lam_c is None else [_add(x, _neg(y)) for x, y in zip(lam_e, lam_c)]
    # M^{-1} A^T mu = L^{-T} B^T mu: one triangular solve
    corr = sp.solve_lower_t(L, sp.matvec_t(B, mu, n), Lc)
    qdd = [_add(_add(ai, ci), x) for ai, ci, x in zip(a, c or [None] * n, corr)]
    if lam_c is None:
        Qc_ni = jnp.zeros(n, dtype)
    else:
        assert C is not None
        Qc_ni = C - sp.stack(sp.matvec_t(Arows, lam_c, n), zero)
    # the relative least-squares residual of B z = e, z = B^T lambda_e
    inconsistency = gram.inconsistency(lam_e, e, dtype) if checked else zero
    core = _Core(
        sp.stack(qdd, zero), sp.stack(a, zero), sp.stack(Qc_i, zero), Qc_ni, inconsistency,
        L_diagonal,
    )  # fmt: skip
    return core, _Factors(L, Lc, Arows, B, gram, lam_e, lam_c, a, c, qdd)


@_solve.defjvp
def _solve_jvp(structure, tau, K, checked, primals, tangents):
    M_values, Q, A_values, b, C = primals
    dMv, dQ, dAv, db, dC = tangents
    core, f = _primal(structure, tau, K, checked, M_values, Q, A_values, b, C)
    n, m = structure.n, structure.m
    zero = jnp.zeros((), Q.dtype)
    dM = sp.from_entries(structure.mass, unpack(dMv), n)
    dA = sp.from_entries(structure.constraint_entries(), unpack(dAv), m)
    solve_M = lambda v: _solve_M(f.L, f.Lc, v)
    dMx = lambda v: _scale(0.5, _sum_vec(sp.matvec(dM, v), sp.matvec_t(dM, v, n)))
    at = lambda R, v: sp.matvec_t(R, v, n)  # R^T v
    dQ_ = unpack(dQ)
    dC_ = [None] * n if dC is None else unpack(dC)
    da = solve_M(_sum_vec(dQ_, _scale(-1.0, dMx(f.a))))
    dlam_e, dlam_c = _multiplier_tangents(f, dM, dA, dQ_, dC_, unpack(db), solve_M, dMx, n, m)
    mu, dmu = f.lam_e, dlam_e
    if f.lam_c is not None:
        assert dlam_c is not None
        mu = _sum_vec(mu, _scale(-1.0, f.lam_c))
        dmu = _sum_vec(dmu, _scale(-1.0, dlam_c))
    rhs = _sum_vec(dQ_, dC_, at(dA, mu), at(f.A, dmu), _scale(-1.0, dMx(f.qdd)))
    dqdd = solve_M(rhs)
    dQc_i = _sum_vec(at(dA, f.lam_e), at(f.A, dlam_e))
    if f.lam_c is None:
        dQc_ni = jnp.zeros(n, Q.dtype)
    else:
        forces_c = _sum_vec(at(dA, f.lam_c), at(f.A, dlam_c))
        dQc_ni = sp.stack(_sum_vec(dC_, _scale(-1.0, forces_c)), zero)
    d_core = _Core(
        sp.stack(dqdd, zero), sp.stack(da, zero), sp.stack(dQc_i, zero), dQc_ni,
        jnp.zeros_like(core.inconsistency), jnp.zeros_like(core.L_diagonal),
    )  # fmt: skip
    return core, d_core


def _multiplier_tangents(f: _Factors, dM, dA, dQ, dC, db, solve_M, dMx, n: int, m: int):
    """(d lambda_e, d lambda_c) = W (dE - dG Lambda) (module docstring); None for lambda_c
    without a non-ideal force, and both empty without rows."""
    if m == 0:
        return [], None
    at = lambda R, v: sp.matvec_t(R, v, n)
    to_gram = lambda v: sp.matvec(f.B, sp.solve_lower(f.L, v))  # A M^{-1} v
    solve_B = lambda lam: sp.solve_lower_t(f.L, at(f.B, lam), f.Lc)  # M^{-1} A^T lam
    u_e = _sum_vec(f.a, solve_B(f.lam_e))
    f_e = _sum_vec(dQ, at(dA, f.lam_e), _scale(-1.0, dMx(u_e)))
    r_e = _sum_vec(db, _scale(-1.0, sp.matvec(dA, u_e)), _scale(-1.0, to_gram(f_e)))
    if f.lam_c is None:
        return f.gram(r_e), None
    assert f.c is not None
    u_c = _sum_vec(f.c, _scale(-1.0, solve_B(f.lam_c)))
    g_c = _sum_vec(dC, _scale(-1.0, at(dA, f.lam_c)), _scale(-1.0, dMx(u_c)))
    r_c = _sum_vec(sp.matvec(dA, u_c), to_gram(g_c))
    zero = jnp.zeros_like(f.L[0][0])
    R = [jnp.stack([zero if x is None else x, zero if y is None else y]) for x, y in zip(r_e, r_c)]
    dLam = f.gram(R)
    return [v[0] for v in dLam], [v[1] for v in dLam]


class _GramSolve:
    """$E \\mapsto W E$: the row-scaled, regularised Gram-matrix solve with iterative
    refinement of :func:`ukjax._linalg.regularized_solve` on structural non-zeros, its
    factorisation made once (a trace-time object, not a pytree)."""

    def __init__(self, B: sp.Rows, n: int, tau: float, refinements: int, zero):
        self.G = G = sp.gram(B)  # lower triangle of B B^T
        d = []
        for i in range(len(B)):
            g = G[i].get(i)
            if g is None:
                d.append(zero)
            else:
                pos = g > 0
                d.append(jnp.where(pos, jax.lax.rsqrt(jnp.where(pos, g, 1.0)), 0.0))
        Gs: sp.Rows = [{r: d[i] * v * d[r] for r, v in row.items()} for i, row in enumerate(G)]
        Gh: sp.Rows = [dict(row) for row in Gs]
        for i in range(len(B)):
            Gh[i][i] = Gh[i].get(i, zero) + tau * tau
        Bh = sp.scale_rows(d, B)
        # the refinement's products with DGD: through its own entries where they are
        # fewer than two passes over B's (chains and trees: a band of G against B twice)
        if 2 * sp.size(Gs) - len(Gs) <= 2 * sp.size(Bh):
            self._gram_times = lambda Y: sp.symmetric_matvec(Gs, Y)
        else:
            self._gram_times = lambda Y: sp.matvec(Bh, sp.matvec_t(Bh, Y, n))
        self.Lg = sp.cholesky(Gh)
        self.Lgc = sp.columns(self.Lg)
        self.d, self.refinements = d, refinements

    def _solve_H(self, R: sp.Vec) -> sp.Vec:
        return sp.solve_lower_t(self.Lg, sp.solve_lower(self.Lg, R), self.Lgc)

    def __call__(self, E: sp.Vec) -> sp.Vec:
        """The multipliers $\\Lambda = D\\,Y$, $Y = \\sum_k H^{-1}R_k$ (the refinement's
        corrections, $R_0 = DE$, $R_{k+1} = DE - \\hat G\\,Y_k$)."""
        Eh = [di * ei for di, ei in zip(self.d, E)]
        Y = self._solve_H(Eh)
        for _ in range(self.refinements):
            R = [_add(ei, _neg(x)) for ei, x in zip(Eh, self._gram_times(Y))]
            Y = [_add(y, dy) for y, dy in zip(Y, self._solve_H(R))]
        return [None if y is None else di * y for di, y in zip(self.d, Y)]

    def inconsistency(self, lam: sp.Vec, e: sp.Vec, dtype) -> jax.Array:
        r"""The relative least-squares residual $\|Bz - e\| / (\|e\| + \|B\|\,\|z\|)$
        of $z = B^T\lambda$ (:func:`ukjax._uk.relative_residual`), from the Gram matrix
        $G = BB^T$: $Bz = G\lambda$, $\|z\|^2 = \lambda\cdot G\lambda$ and
        $\|B\|_F^2 = \operatorname{tr} G$ (no product with $B$ or $B^T$)."""
        G_lam = sp.symmetric_matvec(self.G, lam)
        r = [_add(x, _neg(ei)) for x, ei in zip(G_lam, e)]
        quad = [x * y for x, y in zip(lam, G_lam) if x is not None and y is not None]
        z_norm = jnp.sqrt(jnp.maximum(sp.total(quad, dtype), 0.0))
        B_norm = jnp.sqrt(sp.total([row[i] for i, row in enumerate(self.G) if i in row], dtype))
        scale = sp.norm2(e) + B_norm * z_norm
        return sp.norm2(r) / jnp.maximum(scale, jnp.finfo(dtype).tiny)


def _solve_M(L: sp.Rows, Lc: sp.Rows, v: sp.Vec) -> sp.Vec:
    """$M^{-1}v$ with the sparse factor $M = LL^T$ (`Lc`: its columns)."""
    return sp.solve_lower_t(L, sp.solve_lower(L, v), Lc)


def _add(x, y) -> Any:
    if x is None:
        return y
    return x if y is None else x + y


def _neg(x) -> Any:
    return None if x is None else -x


def _scale(s: float, v: sp.Vec) -> sp.Vec:
    return [None if x is None else s * x for x in v]


def _sum_vec(*vs: sp.Vec) -> sp.Vec:
    """The entrywise sum of vectors with structural zeros (None)."""
    out = list(vs[0])
    for v in vs[1:]:
        out = [_add(x, y) for x, y in zip(out, v)]
    return out
