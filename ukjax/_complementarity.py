r"""Which contacts push: the linear complementarity problem of rigid contact.

At an impact, and whenever persistent contacts may change, the contacts that take part are
decided *jointly* (Glocker & Pfeiffer, *Multibody Dynamics with Unilateral Contacts*, 1996,
ch. 6; Moreau 1988): for the candidate contacts, find multipliers $z$ (impulses at the
velocity level, normal forces at the acceleration level) and the resulting normal rates
$w$ (post-impact normal speeds less their Newton targets $-e\dot g^-$, or normal
accelerations less their targets) with

$$z \ge 0,\qquad w \ge 0,\qquad z_iw_i = 0 .$$

Both levels are affine, $w = w_0 + Dz$, with the Delassus matrix $D = GA_M^+\ldots$ of the
contacts under every bilateral constraint: symmetric positive semi-definite, so the
solution exists and the velocities (accelerations) it gives are unique.

**Method: Murty's least-index principal pivoting** (Murty, *Note on a Bard-type scheme for
solving the complementarity problem*, Opsearch 11, 1974; Cottle, Pang & Stone, *The Linear
Complementarity Problem*, 1992, §4.2). A guess of the active set $S$ (contacts that push)
fixes the problem's solution: $w_i = 0$ on $S$, $z_i = 0$ off it. Where that solution is
infeasible ($z_i < 0$ on $S$, or $w_i < 0$ off it), the least such index changes sides, and
so on. For a positive definite $D$ this ends at the solution after finitely many pivots
(in practice one or two per contact that changes). $D$ is never formed: each guess is
evaluated by the run's own UK equation or impulsive projection with the rows of $S$
(an *oracle*), so $D$ may be singular (redundant contacts: the UK solve's minimum-norm
multipliers split the load) and friction and bilateral constraints enter as they do in the
motion. Cost: one UK solve (or projection) per pivot, at events only.

The discrete choice carries no derivative (it is made on values with `stop_gradient`); the
motion that follows is the differentiable UK solve or projection with the chosen rows, so
gradients are exact away from mode boundaries.

Example (two contacts of a unit mass: both rows see the same coordinate; only one impulse
is needed, the other contact then separates on its own):
    >>> import jax.numpy as jnp
    >>> D = jnp.array([[1.0, 1.0], [1.0, 2.0]]); w0 = jnp.array([-1.0, -0.5])
    >>> def oracle(S):   # z on S solves D_SS z = -w0_S; w = w0 + D z
    ...     Dm = jnp.where(S[:, None] & S[None, :], D, jnp.eye(2))
    ...     z = jnp.linalg.solve(Dm, jnp.where(S, -w0, 0.0))
    ...     return z, w0 + D @ z
    >>> sol = least_index_pivoting(oracle, jnp.array([True, True]), max_pivots=8)
    >>> sol.active.tolist(), [float(v) for v in sol.z], bool(sol.solved)
    ([True, False], [1.0, 0.0], True)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp


class Complementarity(NamedTuple):
    """The solution of a contact complementarity problem."""

    active: jax.Array  # (k,) bool: the contacts with a (non-negative) multiplier
    z: jax.Array  # (k,) multipliers (0 off the active set)
    w: jax.Array  # (k,) rates less their targets (>= 0 off the active set)
    solved: jax.Array  # () bool: a feasible active set was found within the pivot bound


def pivot_bound(k: int) -> int:
    """The number of pivots allowed for k contacts (one or two per contact that changes
    side is the usual count; the bound leaves room for several sweeps)."""
    return 4 * k + 4


def least_index_pivoting(
    oracle: Callable[[jax.Array], tuple[jax.Array, jax.Array]],
    candidates: jax.Array,
    max_pivots: int,
    rtol: float | None = None,
) -> Complementarity:
    r"""Murty's least-index method (module docstring) over the `candidates` ((k,) bool;
    the others stay inactive and unchecked). `oracle(S)` gives $(z, w)$ for the active set
    `S`. Infeasibility is judged with the relative tolerance `rtol` (default
    $\sqrt\varepsilon$) of the largest $|w|$ with nothing active and of the current
    largest $|z|$. Runs inside `jit` and `vmap` (a `lax.while_loop`)."""
    k = candidates.shape[0]
    if k == 0:
        z, w = oracle(candidates)
        return Complementarity(candidates, z, w, jnp.asarray(True))
    # One trace of the oracle: each pass evaluates the current guess, then pivots on it.
    zeros = jnp.zeros(k, bool)
    z_like, w_like = jax.eval_shape(oracle, zeros)
    dtype = w_like.dtype
    tol = float(jnp.finfo(dtype).eps) ** 0.5 if rtol is None else rtol
    tiny = jnp.finfo(dtype).tiny

    def infeasible(active, z, w, w_tol):
        z_tol = tol * jnp.maximum(jnp.max(jnp.abs(z), initial=0.0), tiny)
        return candidates & jnp.where(active, z < -z_tol, w < -w_tol)

    def body(c):
        active, _, _, w_tol, pivots, _ = c
        z, w = oracle(active)
        # the scale of the rates: their size with nothing active (the first pass)
        scale = jnp.max(jnp.where(candidates, jnp.abs(w), 0.0), initial=0.0)
        w_tol = jnp.where(pivots == 0, tol * jnp.maximum(scale, tiny), w_tol)
        bad = infeasible(active, z, w, w_tol)
        done = ~jnp.any(bad) | (pivots > max_pivots)
        flip = (jnp.arange(k) == jnp.argmax(bad)) & ~done  # the least infeasible index
        return active ^ flip, z, w, w_tol, pivots + 1, done

    zero = jnp.zeros((), dtype)
    start = (
        zeros,
        jnp.zeros(z_like.shape, z_like.dtype),
        jnp.zeros(w_like.shape, dtype),
        zero,
        jnp.zeros((), jnp.int32),
        jnp.asarray(False),
    )
    active, z, w, w_tol, _, _ = jax.lax.while_loop(lambda c: ~c[5], body, start)
    solved = ~jnp.any(infeasible(active, z, w, w_tol))
    return Complementarity(active, jnp.where(active, z, 0.0), w, solved)
