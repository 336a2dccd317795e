r"""The regularised Udwadia-Kalaba solve with a derivative rule of its own.

The default UK solver (:class:`ukjax.Regularized`) computes, with $M = LL^T$,
$B = AL^{-T}$ and $E = [\,b - Aa,\ AM^{-1}C\,]$ (:mod:`ukjax._uk`),

$$Z = B^T\Lambda,\qquad \Lambda = W(G)\,E,\qquad W(G) = D\,S(H)\,D,\qquad
  S(H) = \sum_{k=0}^{K}\tau^{2k}H^{-(k+1)},$$

where $G = BB^T = AM^{-1}A^T$, $D = \mathrm{diag}(G)^{-1/2}$ scales the rows to unit norm
(zero rows dropped), $H = DGD + \tau^2 I$ and $K$ is the number of refinements
(:func:`ukjax._linalg.regularized_solve`: iterative refinement computes exactly this sum,
its $k$-th correction being $y_k = \tau^{2k}H^{-(k+1)}DE$). In these terms

$$a = M^{-1}Q,\quad Q^c_i = A^T\lambda_e,\quad Q^c_{ni} = C - A^T\lambda_c,\quad
  \ddot q = M^{-1}\big(Q + C + A^T(\lambda_e - \lambda_c)\big),$$

with $\Lambda = [\lambda_e, \lambda_c]$. Differentiating these formulas, with $P = M^{-1}A^T$,

$$dG = dA\,P + P^T dA^T - P^T dM\,P,\qquad dE = [\,db - dA\,a - P^T(dQ - dM\,a),\
  dA\,c + P^T(dC - dM\,c)\,]\quad (c = M^{-1}C),$$

$$d\Lambda = dD\,S\hat E + D\big(S\,d\hat E + dS\,\hat E\big),\qquad
  dS\,\hat E = -\sum_{p=1}^{K+1}\tau^{2(p-1)}H^{-p}\,dH \sum_{k=0}^{K+1-p} y_k,$$

($\hat E = DE$, $dH = d(DGD)$, $dD = -\tfrac12 D^3\,\mathrm{diag}(dG)$) and
$S\,d\hat E + dS\,\hat E$ is one Horner scheme of $K + 1$ solves with the Cholesky factor
of $H$ that the forward pass made. Every $M^{-1}$ in the tangent is one solve with $L$
(two columns: $da$ and $d\ddot q$). No factorisation is differentiated: reverse mode
transposes this linear rule, which costs about one forward solve, where plain autodiff
transposes both Cholesky factorisations and every triangular solve of the refinement
(measured on the chains of `benchmarks/gradients.py`: `benchmarks/RESULTS.md`, gradients
section). Values are those of the plain solve
(same operations); derivatives equal those of an independent closed form to round-off
(`tests/test_uk_vjp.py`, also at redundant rows and to second order).

Example:
    >>> import jax, jax.numpy as jnp
    >>> from ukjax._kernels import LAPACK
    >>> from ukjax._uk_regularized import regularized_uk
    >>> M, Q = 2.0 * jnp.eye(2), jnp.array([0.0, -9.81])   # masses 2m
    >>> A, b = jnp.array([[1.0, 1.0]]), jnp.array([0.0])    # x'' + y'' = 0
    >>> qdd_y = lambda m: regularized_uk(LAPACK, 1e-5, 3, m * M, Q, A, b, None).qdd[1]
    >>> # -g/4m and its derivative g/4m^2, at m = 1
    >>> round(float(jax.jit(qdd_y)(1.0)), 10), round(float(jax.jit(jax.grad(qdd_y))(1.0)), 10)
    (-2.4525, 2.4525)
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ._kernels import DenseOps, Triangular, diagonal
from ._linalg import regularized_iterates
from ._uk_formula import Solved, uk_formula


class _Primal(NamedTuple):
    """What the tangent rule reuses from the forward solve."""

    L: Triangular  # the solves with M's Cholesky factor
    H: Triangular  # the solves with the Cholesky factor of H = D G D + tau^2 I
    P: jax.Array  # M^{-1} A^T (n, m)
    G: jax.Array  # B B^T (m, m)
    d: jax.Array  # row scales (m,)
    E: jax.Array  # (m, k)
    Yc: list  # cumulative sums of the refinement corrections y_0 .. y_r (m, k)
    SE: jax.Array  # S D E (m, k): the sum of the corrections
    c: jax.Array | None  # M^{-1} C


def _solve(ops: DenseOps, tau: float, K: int, M, Q, A, b, C) -> tuple[Solved, _Primal]:
    def pinv(B, E):
        it = regularized_iterates(B, E, tau, K, ops)
        return it.Z, it

    out, inter = uk_formula(ops, M, Q, A, b, C, pinv)
    it = inter.aux
    Yc = [it.ys[0]]  # cumulative sums of the corrections
    for yk in it.ys[1:]:
        Yc.append(Yc[-1] + yk)
    tri = inter.factor
    P = tri.lower_t(out.B.T)  # M^{-1} A^T
    c = None if inter.c_tilde is None else tri.lower_t(inter.c_tilde)
    return out, _Primal(tri, it.H, P, it.G, it.d, inter.E, Yc, Yc[-1], c)


@partial(jax.custom_jvp, nondiff_argnums=(0, 1, 2))
def regularized_uk(ops: DenseOps, tau: float, K: int, M, Q, A, b, C) -> Solved:
    """The UK solve with :class:`ukjax.Regularized` (`tau`, `K` refinements) for one state:
    see the module docstring. `Q` may be None (no force), `C` None (ideal constraints)."""
    return _solve(ops, tau, K, M, Q, A, b, C)[0]


def _sym(X):
    return 0.5 * (X + X.T)


@regularized_uk.defjvp
def _regularized_uk_jvp(ops, tau, K, primals, tangents):
    M, Q, A, b, C = primals
    dM, dQ, dA, db, dC = tangents
    out, p = _solve(ops, tau, K, M, Q, A, b, C)
    dM = _sym(dM)  # the Cholesky factorisation reads the symmetric part of M
    mm = ops.matmul
    a, qdd = out.a, out.qdd
    # dG = dA P + P^T dA^T - P^T dM P, and the row scales' tangent
    dAP = mm(dA, p.P)
    dG = dAP + dAP.T - mm(p.P.T, mm(dM, p.P))
    dd = -0.5 * p.d**3 * diagonal(dG)
    dG_rows = dd[:, None] * p.G + p.d[:, None] * dG
    dGh = dG_rows * p.d[None, :] + (p.d[:, None] * p.G) * dd[None, :]  # d(D G D)
    # dE
    dQ = jnp.zeros_like(a) if Q is None else dQ
    de = db - mm(dA, a) - mm(p.P.T, dQ - mm(dM, a))
    if C is None:
        dE = de[:, None]
    else:
        dE = jnp.stack([de, mm(dA, p.c) + mm(p.P.T, dC - mm(dM, p.c))], axis=1)
    dEh = dd[:, None] * p.E + p.d[:, None] * dE
    # S dEh + dS Eh by Horner: T_p = H^{-1}(dEh - dH Yc_{K+1-p} + tau^2 T_{p+1})
    solve_H = p.H.solve
    T = solve_H(dEh - mm(dGh, p.Yc[0]))  # p = K + 1, the innermost term
    for q in range(1, K + 1):  # p = K + 1 - q
        T = solve_H(dEh - mm(dGh, p.Yc[q]) + (tau * tau) * T)
    Lam = p.d[:, None] * p.SE  # W E
    dLam = dd[:, None] * p.SE + p.d[:, None] * T
    lam_e, dlam_e = Lam[:, 0], dLam[:, 0]
    dQc_i = mm(dA.T, lam_e) + mm(A.T, dlam_e)
    if C is None:
        mu, dmu, rhs_C = lam_e, dlam_e, 0.0
        dQc_ni = jnp.zeros_like(dQc_i)
    else:
        lam_c, dlam_c = Lam[:, 1], dLam[:, 1]
        mu, dmu, rhs_C = lam_e - lam_c, dlam_e - dlam_c, dC
        dQc_ni = dC - mm(dA.T, lam_c) - mm(A.T, dlam_c)
    # da and dqdd: one solve with L for both columns
    R = jnp.stack([dQ - mm(dM, a), dQ + rhs_C + mm(dA.T, mu) + mm(A.T, dmu) - mm(dM, qdd)], axis=1)
    X = p.L.solve(R)
    zeros_m, zeros_n = jnp.zeros_like(out.e), jnp.zeros_like(out.z)
    d_out = Solved(X[:, 1], X[:, 0], dQc_i, dQc_ni, jnp.zeros_like(out.B), zeros_n, zeros_m)
    return out, d_out
