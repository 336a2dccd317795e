r"""The Udwadia-Kalaba formulas for one state, given how $B^+E$ is computed.

With $M = LL^T$, $B = AL^{-T}$, $a = M^{-1}Q$, $e = b - Aa$ and (non-ideal constraints)
$\tilde c = L^{-1}C$, $E = [\,e,\ B\tilde c\,]$ and $[z, w] = B^+E$ (Udwadia, *On
constrained motion*, 2004, eqs 8-12):

$$\ddot q = a + L^{-T}(z + \tilde c - w),\qquad Q^c_i = Lz,\qquad Q^c_{ni} = C - Lw.$$

Every UK solver strategy (:mod:`ukjax._uk_solvers`) runs these formulas with its own
$B^+E$; :mod:`ukjax._uk_regularized` adds a derivative rule to them for the default one.

Example:
    >>> import jax.numpy as jnp
    >>> from ukjax._kernels import LAPACK
    >>> from ukjax._linalg import pinv_solve
    >>> s, _ = uk_formula(LAPACK, jnp.eye(2), jnp.array([0.0, -9.81]),
    ...                   jnp.array([[0.0, 1.0]]), jnp.array([0.0]), None,
    ...                   lambda B, E: (pinv_solve(B, E), None))
    >>> [float(v) for v in s.qdd], [float(v) for v in s.Qc_ideal]
    ([0.0, 0.0], [0.0, 9.81])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ._kernels import DenseOps, Triangular


class Solved(NamedTuple):
    """The outputs of one UK solve (single state, m > 0 constraints)."""

    qdd: jax.Array  # (n,)
    a: jax.Array  # M^{-1} Q (n,)
    Qc_ideal: jax.Array  # (n,)
    Qc_nonideal: jax.Array  # (n,)
    # For the consistency check (the regularised solve's rule gives them no derivative).
    B: jax.Array  # A L^{-T} (m, n)
    z: jax.Array  # B^+ (b - A a) (n,)
    e: jax.Array  # b - A a (m,)


class Intermediates(NamedTuple):
    """What a derivative rule may reuse from :func:`uk_formula`."""

    factor: Triangular  # the solves and products with M's Cholesky factor L
    E: jax.Array  # the right-hand sides of B Z = E (m, k)
    c_tilde: jax.Array | None  # L^{-1} C
    aux: Any  # what `pinv` returned beside Z


def uk_formula(
    ops: DenseOps, M, Q, A, b, C, pinv: Callable[[jax.Array, jax.Array], tuple[jax.Array, Any]]
) -> tuple[Solved, Intermediates]:
    """The UK solve of one state with $B^+E$ = `pinv(B, E)[0]` (module docstring). `Q`
    may be None (no force: a projection step), `C` None (ideal constraints)."""
    n = M.shape[0]
    L = ops.cholesky(M)
    tri = ops.triangular(L)  # L's entries unpacked once for the solves below
    B = tri.lower(A.T).T  # A L^{-T}, (m, n)
    if Q is None:
        a, e = jnp.zeros(n, M.dtype), b
    else:
        a = tri.solve(Q)
        e = b - ops.matmul(A, a)
    if C is None:
        c_tilde, E = None, e[:, None]
    else:
        c_tilde = tri.lower(C)  # L^{-1} C
        E = jnp.stack([e, ops.matmul(B, c_tilde)], axis=1)
    Z, aux = pinv(B, E)
    z = Z[:, 0]  # B^+ (b - A a)
    if c_tilde is None:
        Qc_ni, y = jnp.zeros(n, M.dtype), z
    else:
        assert C is not None
        w = Z[:, 1]
        Qc_ni = C - tri.times(w)  # M (I - A_M^+ A) M^{-1} C = C - L B^+ B L^{-1} C
        y = z + c_tilde - w  # B^+ e + (I - B^+ B) L^{-1} C
    Qc_i = tri.times(z)  # M A_M^+ (b - A a) = L B^+ (b - A a)
    qdd = a + tri.lower_t(y)
    return Solved(qdd, a, Qc_i, Qc_ni, B, z, e), Intermediates(tri, E, c_tilde, aux)
