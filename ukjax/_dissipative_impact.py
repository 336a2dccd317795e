r"""A frictional impact of several contacts as one complementarity problem with maximal
dissipation: the fallback where the sliding-impact model has no solution.

The event-driven driver resolves a frictional impact by pivoting on the normal impulses,
each active contact sticking through the impact where its cone allows and otherwise
sliding with the impulse $\mu_kP_n$ against the slip sticking would need
(:meth:`ukjax.AbstractFriction.impulse`). With several contacts at once that model can
have no solution (a Painlevé-type inconsistency: a box landing on its second edge while
the first slides, where the friction at the new edge drives the old one into the floor and
every split of the impulses needs a pulling one). The rigid impact still has a motion:
the one of *maximal dissipation* (Moreau 1988; Stewart & Trinkle, IJNME 39, 1996;
Anitescu & Potra, Nonlinear Dynamics 14, 1997), where the friction impulse of each contact
is the one in its cone that dissipates most at the post-impact slip, so a slip that
cannot continue through the impact stops in it (a "jam").

With the cone approximated by a pyramid of `facets` generators $g_{ij}$ (the kinetic
force per unit normal impulse along unit tangent directions $e_j$, on the cone: $\mu_k e_j$,
or on the ellipse of an elliptic cone), unknowns the normal impulses $P_n$, the generator
weights $\beta \ge 0$ and a slip speed $\lambda$ per contact, and $v^+ = v_0 +
\mathcal{M}(G^TP_n + \sum T^Tg_{ij}\beta_{ij})$ ($\mathcal M$: the mobility under every
bilateral constraint, from the run's UK solve with no force; $v_0$ the pre-impact velocity
projected onto the bilateral constraints):

$$0 \le P_n \perp G v^+ - \dot g^+_{\rm target} \ge 0,\qquad
0 \le \beta_{ij} \perp g_{ij}^T T_iv^+ + \lambda_i \ge 0,\qquad
0 \le \lambda_i \perp P_{n,i} - \textstyle\sum_j\beta_{ij} \ge 0 .$$

The matrix is copositive-plus and the problem always has a solution, found by Lemke's
method (:mod:`ukjax._lemke`). A planar contact (d = 1, two generators $\pm\mu_k$) is
exact; in 3-D the pyramid is inscribed in the cone (friction at most $1 - \cos(\pi/N)$
below the circular cone's, 7.6 % for the default N = 8, never above it: no energy gain
from friction). Sticking is bounded by $\mu_k$ (the kinetic cone), not $\mu_s$.
Cost: $k(1 + N)$ columns of the UK solve (one factorisation) to form the Delassus matrix,
and Lemke's pivots on a $k(N + 2)$-square tableau; at the failing impacts only.

Example (a unit point mass hitting a rough floor, mu = 0.5, at 1 m/s down and 1.5 m/s
along x: it keeps sliding, at 1.5 - 0.5 = 1 m/s, after the normal impulse 1):
    >>> import jax, jax.numpy as jnp
    >>> jax.config.update("jax_enable_x64", True)
    >>> from ukjax import Regularized
    >>> from ukjax._dynamics import RowSolve
    >>> from ukjax._friction import FrictionState
    >>> v = jnp.array([1.5, 0.0, -1.0]); G = jnp.array([[0.0, 0.0, 1.0]])
    >>> T = jnp.eye(3)[None, :2]  # tangent rows x, y: a 3-D cone
    >>> fs = FrictionState(T, T @ v, jnp.zeros((1, 2)), jnp.array([0.5]), jnp.array([0.5]))
    >>> out = jax.jit(dissipative_impact)(RowSolve(jnp.eye(3), Regularized()), jnp.zeros((0, 3)),
    ...     jnp.zeros(0), v, G, G @ v, fs, jnp.array([True]), jnp.zeros(1))
    >>> [round(float(x), 12) for x in out.qd], round(float(out.normal[0]), 12)
    ([1.0, 0.0, 0.0], 1.0)
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ._dynamics import RowSolve
from ._friction import FrictionState, norm
from ._lemke import lemke, solve_basis


class DissipativeImpact(NamedTuple):
    """The impact's outcome: velocity after, (k,) normal impulses, (k,) friction impulses
    (along the tangent row for d = 1, the magnitude for d = 2), (k,) the normal speeds
    after less their targets, and whether the problem was solved."""

    qd: jax.Array
    normal: jax.Array
    tangential: jax.Array
    w: jax.Array
    solved: jax.Array


def generators(fs: FrictionState, facets: int) -> jax.Array:
    """(k, N, d): the kinetic friction per unit normal impulse along N unit directions in
    each contact's tangent plane (N = 2 for d = 1): the pyramid's edges."""
    d = fs.T.shape[1]
    if d == 1:
        directions = jnp.array([[1.0], [-1.0]], fs.T.dtype)
    else:
        angle = 2.0 * jnp.pi * jnp.arange(facets, dtype=fs.T.dtype) / facets
        directions = jnp.stack([jnp.cos(angle), jnp.sin(angle)], axis=1)
    return jax.vmap(lambda e: fs.kinetic(jnp.broadcast_to(e, fs.vt.shape)), out_axes=1)(directions)


def dissipative_impact(
    solve: RowSolve,
    J,
    c,
    qd,
    G,
    gd,
    fs: FrictionState,
    candidates,
    gd_target,
    facets: int = 8,
    tangent_offset=None,
) -> DissipativeImpact:
    r"""The maximal-dissipation impact (module docstring) of the `candidates` ((k,) bool)
    with normal rows `G` (k, n), normal speeds `gd` before and targets `gd_target` after;
    the bilateral velocity rows `J`, `c` ($J\dot q^+ = c$) kept; `solve` the run's UK
    solve of the mass matrix. The contacts outside `candidates` take no impulse.

    The same problem one level up decides contacts at rest: with `qd` the acceleration
    under the bilateral rows, `gd` the normal accelerations there, `gd_target` the law's
    target accelerations and `tangent_offset` ((k, d): $\dot T\dot q$) its solution
    holds the contact forces of maximal dissipation (Glocker & Pfeiffer 1996, ch. 6)."""
    k, d, n = fs.T.shape
    gens = generators(fs, facets)  # (k, N, d)
    nf = gens.shape[1]
    tangent_rows = jnp.einsum("kjd,kdn->kjn", gens, fs.T).reshape(k * nf, n)
    W = jnp.concatenate([G, tangent_rows])  # (k + kN, n): the impulses' rows
    zero_b = jnp.zeros(J.shape[0], qd.dtype)
    mobility = jax.vmap(lambda F: solve(J, F, zero_b).qdd)(W)  # (k + kN, n)
    projected = solve(J, jnp.zeros_like(qd), c - J @ qd).qdd  # onto the bilateral rows
    D = W @ mobility.T
    # variables: P_n (k), beta (kN), lambda (k)
    E = jnp.repeat(jnp.eye(k, dtype=qd.dtype), nf, axis=0)  # (kN, k): beta_ij -> contact i
    zk = jnp.zeros((k, k), qd.dtype)
    M = jnp.block(
        [
            [D[:k, :k], D[:k, k:], zk],
            [D[k:, :k], D[k:, k:], E],
            [jnp.eye(k, dtype=qd.dtype), -E.T, zk],
        ]
    )
    normal_speed = gd + G @ projected
    slip_rate = tangent_rows @ (qd + projected)
    if tangent_offset is not None:
        slip_rate = slip_rate + jnp.einsum("kjd,kd->kj", gens, tangent_offset).reshape(k * nf)
    q = jnp.concatenate([normal_speed - gd_target, slip_rate, jnp.zeros(k, qd.dtype)])
    # contacts outside the candidates: z = 0 (a row and column of the identity, q = 1)
    used = jnp.concatenate([candidates, jnp.repeat(candidates, nf), candidates])
    both = used[:, None] & used[None, :]
    M = jnp.where(both, M, jnp.eye(M.shape[0], dtype=M.dtype))
    q = jnp.where(used, q, 1.0)
    sol = lemke(M, q)
    z, w = solve_basis(M, q, sol.basic_z)
    impulses = jnp.where(used, z, 0.0)[: k + k * nf]
    qd_after = qd + projected + mobility.T @ impulses
    normal = impulses[:k]
    beta = impulses[k:].reshape(k, nf)
    friction = jnp.einsum("kj,kjd->kd", beta, gens)
    tangential = friction[:, 0] if d == 1 else norm(friction)
    solved = sol.solved & jnp.all(jnp.isfinite(qd_after))
    return DissipativeImpact(qd_after, normal, tangential, w[:k], solved)
