"""Pseudo-inverse solves with gradients that stay finite at rank-deficient matrices.

The Udwadia-Kalaba equation needs $z = B^+ e$ for a constraint matrix $B$ that may be
rank deficient (redundant constraints). Differentiating through an SVD is unsafe where
singular values repeat (for instance two zero singular values from two redundant rows),
so :func:`pinv_solve` carries its own JVP: the classical derivative of the Moore-Penrose
inverse (Golub & Pereyra 1973),

$$ d(B^+) = -B^+\\,dB\\,B^+ + B^+B^{+T} dB^T (I - BB^+) + (I - B^+B)\\,dB^T B^{+T}B^+, $$

applied to vectors with the *primal* factorisation only. The rule is linear in the
tangents, so JAX transposes it for reverse mode. It is exact wherever the rank of $B$ is
locally constant, which is the case along any motion of a system whose redundant
constraints stay redundant.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ._kernels import LAPACK, DenseOps, Triangular, diagonal
from ._precision import full_precision
from ._xla import eager_jit


def default_rcond(shape: tuple[int, ...], dtype) -> float:
    """Relative singular-value cutoff of the rank decision: 10 max(m, n) eps."""
    return 10.0 * max(shape) * float(jnp.finfo(dtype).eps)


def _factor(B: jax.Array, rcond: float | None):
    """Thin SVD of ``B`` with singular values below ``rcond * s_max`` treated as zero."""
    U, s, Vt = jnp.linalg.svd(B, full_matrices=False)
    rcond = default_rcond(B.shape, B.dtype) if rcond is None else rcond
    keep = s > rcond * s[0]
    s_safe = jnp.where(keep, s, 1.0)
    s_inv = jnp.where(keep, 1.0 / s_safe, 0.0)
    return U, s_inv, Vt, keep.astype(B.dtype)


def _apply_pinv(f, e):  # B^+ e        e: (m, k) -> (n, k)
    U, s_inv, Vt, _ = f
    return Vt.T @ (s_inv[:, None] * (U.T @ e))


def _apply_pinv_t(f, x):  # B^{+T} x   x: (n, k) -> (m, k)
    U, s_inv, Vt, _ = f
    return U @ (s_inv[:, None] * (Vt @ x))


def _null_projection(f, x):  # (I - B^+ B) x
    _, _, Vt, keep = f
    return x - Vt.T @ (keep[:, None] * (Vt @ x))


@partial(jax.custom_jvp, nondiff_argnums=(2,))
def pinv_solve(B: jax.Array, e: jax.Array, rcond: float | None = None) -> jax.Array:
    """Minimum-norm least-squares solution $B^+ e$ for ``B`` (m, n) and ``e`` (m, k).

    Singular values below ``rcond`` times the largest count as zero (default
    :func:`default_rcond`). Exact for rank-deficient ``B``; forward- and reverse-mode
    derivatives are finite wherever the rank is locally constant (module docstring).
    """
    return _apply_pinv(_factor(B, rcond), e)


@pinv_solve.defjvp
def _pinv_solve_jvp(rcond, primals, tangents):
    B, e = primals
    dB, de = tangents
    f = _factor(B, rcond)
    z = _apply_pinv(f, e)
    r = e - B @ z  # (I - B B^+) e, the least-squares residual
    dz = (
        _apply_pinv(f, de - dB @ z)
        + _apply_pinv(f, _apply_pinv_t(f, dB.T @ r))
        + _null_projection(f, dB.T @ _apply_pinv_t(f, z))
    )
    return z, dz


def full_rank_solve(B: jax.Array, e: jax.Array, ops: DenseOps = LAPACK):
    """$B^T (B B^T)^{-1} e$ by a Cholesky factorisation of the Gram matrix $BB^T$.

    Returns ``(z, ok)`` where ``ok`` says whether ``B`` was numerically of full row rank
    (the Cholesky pivots stayed above ``eps**0.25`` relative to the largest). When ``ok`` is
    false the Gram matrix is replaced by the identity so that values and gradients of this
    branch stay finite (the caller must then use a rank-revealing solve instead). ``ops``
    picks the LAPACK or the unrolled small-n kernels (:mod:`ukjax._dense`).
    """
    m = B.shape[0]
    G = ops.gram(B)
    Lg = ops.cholesky(jax.lax.stop_gradient(G))
    d = diagonal(Lg)
    eps = jnp.finfo(B.dtype).eps
    ok = jnp.all(jnp.isfinite(Lg)) & (jnp.min(d) > eps**0.25 * jnp.max(d))
    G_safe = jnp.where(ok, G, jnp.eye(m, dtype=B.dtype))
    Lg = ops.cholesky(G_safe)
    lam = ops.triangular(Lg).solve(e)
    return ops.matmul(B.T, lam), ok


def row_multipliers(
    A: jax.Array, F: jax.Array, ops: DenseOps = LAPACK, refinements: int = 3
) -> jax.Array:
    r"""The minimum-norm multipliers $\Lambda$ of forces $F$ ((n,) or (n, k)) that lie in the
    range of $A^T$ (the constraint forces of the rows of A (m, n), as the UK equation
    makes them): $A^T\Lambda = F$, by :func:`regularized_solve` of $A^T\Lambda = F$ (the
    same filter as the UK solve's, smooth at every rank; `refinements` = K) with the
    dense operations `ops` (the caller's kernels for n coordinates: the Gram matrix is
    n x n).

    $\Lambda = A\,Y$ lies in the range of A, so a redundant row takes no more than its
    minimum-norm share (a zero row's multiplier is exactly 0, repeated rows share
    equally), and the pseudo-inverse solution holds to a relative $(\tau/\sigma)^{2(K+1)}$
    on the singular values $\sigma \gg \tau$ of the scaled $A^T$. Unlike
    :func:`pinv_solve` (an SVD, a per-member LAPACK call under `jax.vmap`) it runs on
    the same kernels as the UK solve.

    The equations here are A's n coordinates, and a coordinate that the rows touch only
    by round-off (a hinge whose axis is orthogonal to a contact's normal gives entries of
    1e-18 where the largest are 1) must not be scaled to unit norm with the rest: its
    equation is noise, and scaled up by 1e17 it outweighs every other (the rigid-body
    ragdoll's contact multipliers came out with residuals of half the forces). So the
    scales stop at $\tau$ times the largest coordinate's norm (`floor` of
    :func:`regularized_iterates`): such an equation keeps a singular value far below
    $\tau$, which the filter removes, while a coordinate down to about $\tau^2$ of the
    largest is still solved to the pseudo-inverse.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> A = jnp.array([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 2.0, 2.0], [0.0, 2.0, 2.0]])
        >>> F = A.T @ jnp.array([3.0, 5.0, -1.0, -1.0])   # a zero row, a repeated row
        >>> [round(float(x), 12) for x in jax.jit(row_multipliers)(A, F)]
        [3.0, 0.0, -1.0, -1.0]
    """
    vector = F.ndim == 1
    F = F[:, None] if vector else F
    tau = default_regularization(A.dtype)
    lam = regularized_iterates(A.T, F, tau, refinements, ops, floor=tau).Z
    return lam[:, 0] if vector else lam


def default_regularization(dtype) -> float:
    r"""Default Tikhonov parameter $\tau$ of :func:`regularized_solve`: $\max(10^{-5},
    10\sqrt{\varepsilon})$, i.e. 1e-5 in float64 and 3.5e-3 in float32 (relative to rows
    of unit norm)."""
    return max(1e-5, 10.0 * float(jnp.finfo(dtype).eps) ** 0.5)


def regularized_solve(
    B: jax.Array, E: jax.Array, tau: float, refinements: int, ops: DenseOps = LAPACK
) -> jax.Array:
    r"""$B^+E$ by iterated Tikhonov regularisation: smooth in $B$ at every rank.

    Rows are first scaled to unit norm ($D = \mathrm{diag}(BB^T)^{-1/2}$, $\hat B = DB$,
    $\hat E = DE$; zero rows are dropped), which leaves the solution of a consistent
    system unchanged. With one Cholesky factorisation of $\hat G + \tau^2 I$,
    $\hat G = \hat B\hat B^T$,

    $$Z_0 = \hat B^T(\hat G + \tau^2 I)^{-1}\hat E,\qquad
      Z_{k+1} = Z_k + \hat B^T(\hat G + \tau^2 I)^{-1}(\hat E - \hat BZ_k),$$

    $k < K$ = `refinements`. In terms of the singular triplets $(\sigma, u, v)$ of
    $\hat B$, $Z_K = \sum f(\sigma)\sigma^{-1}v\,u^T\hat E$ with the filter
    $f(\sigma) = 1 - (\tau^2/(\sigma^2 + \tau^2))^{K+1}$: the pseudo-inverse to a relative
    $(\tau/\sigma)^{2(K+1)}$ where $\sigma \gg \tau$, exactly zero on redundant rows
    ($\sigma = 0$, the minimum-norm solution), and in between a continuous roll-off in
    place of a rank decision, so that the gain $f(\sigma)/\sigma$ on a residual that drift
    puts along a nearly dependent row stays below about $\sqrt{K+1}/\tau$. It is the
    iteration of the augmented-Lagrangian formulations of multibody dynamics (Bayo and
    Ledesma 1996) applied to the UK equation's small Gram matrix, and it costs what the
    full-rank Cholesky path costs whatever the rank. Derivatives are those of this smooth
    map (plain autodiff through one Cholesky factor and triangular solves).
    """
    return regularized_iterates(B, E, tau, refinements, ops).Z


class Iterates(NamedTuple):
    """The regularised solve and what its derivative rule reuses
    (:mod:`ukjax._uk_regularized`)."""

    Z: jax.Array  # the solution (n, k)
    ys: list  # the corrections y_k = tau^(2k) H^-(k+1) D E, k = 0..K (m, k each)
    G: jax.Array  # B B^T (m, m), unscaled
    d: jax.Array  # the row scales diag(G)^(-1/2), 0 on zero rows (m,)
    H: Triangular  # the solves with the Cholesky factor of H = D G D + tau^2 I


def regularized_iterates(
    B: jax.Array,
    E: jax.Array,
    tau: float,
    refinements: int,
    ops: DenseOps = LAPACK,
    floor: float = 0.0,
) -> Iterates:
    """:func:`regularized_solve` with its intermediates. `floor` > 0: a row is scaled
    as if its norm were at least `floor` times the largest row norm (rows at round-off
    are not raised to unit norm; :func:`row_multipliers`); 0, the default: every
    non-zero row to unit norm (the UK solve, whose derivative rule,
    :mod:`ukjax._uk_regularized`, assumes it)."""
    G = ops.gram(B)
    diag = diagonal(G)
    positive = diag > 0
    if floor > 0.0:
        diag = jnp.maximum(diag, (floor * floor) * jnp.max(diag))
    d = jnp.where(positive, jax.lax.rsqrt(jnp.where(positive, diag, 1.0)), 0.0)
    Bh = d[:, None] * B
    Eh = d[:, None] * E
    Gh = d[:, None] * G * d[None, :]
    m = B.shape[0]
    Lg = ops.cholesky(Gh + (tau * tau) * jnp.eye(m, dtype=B.dtype))
    H = ops.triangular(Lg)
    solve = H.solve
    y = solve(Eh)
    ys = [y]
    Z = ops.matmul(Bh.T, y)
    for _ in range(refinements):
        y = solve(Eh - ops.matmul(Bh, Z))
        ys.append(y)
        Z = Z + ops.matmul(Bh.T, y)
    return Iterates(Z, ys, G, d, H)


def weighted_pinv_solve(L: jax.Array, A: jax.Array, E: jax.Array) -> jax.Array:
    """$A_M^+E = L^{-T}(AL^{-T})^+E$ for the Cholesky factor ``L`` of $M = LL^T$, any rank
    of ``A`` (m, n), and ``E`` (m, k). The minimum-$M$-norm solution of $AX = E$."""
    B = jax.scipy.linalg.solve_triangular(L, A.T, lower=True).T  # A L^{-T}
    return jax.scipy.linalg.solve_triangular(L.T, pinv_solve(B, E), lower=False)


@full_precision
@eager_jit
def weighted_pinv(A: jax.Array, M: jax.Array | None = None) -> jax.Array:
    r"""The $M$-weighted Moore-Penrose inverse $A_M^+ = M^{-1/2}(AM^{-1/2})^+$ (Udwadia 2004).

    It is the unique $G$ (n, m) with (Udwadia, *On constrained motion*, 2004, eqs 13a-d)

    $$AGA = A,\quad GAG = G,\quad (AG)^T = AG,\quad (MGA)^T = MGA,$$

    and the operator behind the Udwadia-Kalaba equation:
    $\ddot q = a + A_M^+(b - Aa) + (I - A_M^+A)M^{-1}C$. With $M = I$ (or ``M=None``) it
    is the ordinary pseudo-inverse $A^+$.

    It is computed without a matrix square root: with $M = LL^T$ (Cholesky) and
    $B = AL^{-T}$, $A_M^+ = L^{-T}B^+$. That matrix satisfies the four conditions above,
    so by uniqueness it equals $M^{-1/2}(AM^{-1/2})^+$ for the symmetric root. $B^+$
    comes from an SVD with a Golub-Pereyra derivative (:func:`pinv_solve`), so gradients
    are finite for rank-deficient $A$ and for $M$ with repeated eigenvalues.

    Args:
        A: (m, n) constraint matrix, any rank.
        M: (n, n) symmetric positive definite weight, or ``None`` for the identity.

    Returns:
        The (n, m) array $A_M^+$.

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> A = jnp.array([[1.0, 2.0], [2.0, 4.0]])          # rank 1
        >>> M = jnp.diag(jnp.array([1.0, 4.0]))
        >>> G = ukjax.weighted_pinv(A, M)
        >>> bool(jnp.allclose(A @ G @ A, A)), bool(jnp.allclose(M @ G @ A, (M @ G @ A).T))
        (True, True)
    """
    A = jnp.asarray(A)
    if A.ndim != 2:
        raise ValueError(f"weighted_pinv: A must be a matrix (m, n); got shape {A.shape}.")
    m, n = A.shape
    eye = jnp.eye(m, dtype=A.dtype)
    if M is None:
        return pinv_solve(A, eye)
    M = jnp.asarray(M, dtype=A.dtype)
    if M.shape != (n, n):
        raise ValueError(
            f"weighted_pinv: M must be (n, n) = ({n}, {n}) to match A of shape {A.shape}; "
            f"got {M.shape}."
        )
    return weighted_pinv_solve(jnp.linalg.cholesky(M), A, eye)


MAX_ELIMINATED = 4  # square systems up to this size are solved by written-out elimination


def small_solve(A: jax.Array, b: jax.Array) -> jax.Array:
    r"""$x = A^{-1}b$ for a square `A` (k, k) and `b` (k,): for k up to `MAX_ELIMINATED`
    by Gaussian elimination with partial pivoting written out in elementwise operations
    (the algorithm of LAPACK's `getrf`/`getrs`), else `jnp.linalg.solve`. The contact
    code solves k-by-k systems (k contacts) in every frictional UK solve; on the CPU
    `jnp.linalg.solve` is two library calls and a loop over the pivots, which under
    `jax.vmap` each compile on their own. Differentiable like any elementwise program
    (the pivot choice is piecewise constant); a singular `A` gives non-finite values, as
    the library solve does.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> jax.config.update("jax_enable_x64", True)
        >>> from ukjax._linalg import small_solve
        >>> A = jnp.array([[0.0, 2.0], [1.0, 1.0]])  # needs a row exchange
        >>> jax.jit(small_solve)(A, jnp.array([2.0, 3.0])).tolist()
        [2.0, 1.0]
    """
    k = A.shape[0]
    if k > MAX_ELIMINATED:
        return jnp.linalg.solve(A, b)
    rows = jnp.arange(k)
    U = jnp.concatenate([A, b[:, None]], axis=1)  # the augmented matrix, reduced in place
    for j in range(k):
        size = jnp.where(rows >= j, jnp.abs(U[:, j]), -1.0)
        p = rows == jnp.argmax(size)  # the pivot row (one-hot)
        pivot_row = jnp.sum(jnp.where(p[:, None], U, 0.0), axis=0)
        # exchange rows j and the pivot's
        U = jnp.where((rows == j)[:, None], pivot_row, jnp.where(p[:, None], U[j], U))
        factor = jnp.where(rows > j, U[:, j] / U[j, j], 0.0)
        U = U - factor[:, None] * U[j]
    x = jnp.zeros(k, U.dtype)  # back substitution
    for j in reversed(range(k)):
        x = x.at[j].set((U[j, k] - U[j, :k] @ x) / U[j, j])
    return x
