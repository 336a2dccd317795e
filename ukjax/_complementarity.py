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

Sliding friction makes $D$ non-symmetric and can make it lose the P-property, and then
the least-index sequence may cycle (a box rocking onto its second edge while the first
slides: "lift the old edge" and "the old edge closes" alternate). Past the pivot bound the
method therefore tries the subsets of the candidates in turn (in the order of their bit
masks, up to `MAX_ENUMERATED` contacts: at most $2^k$ more oracle calls, in the same loop,
so the oracle is traced once) and takes the first feasible one; where none is, the
problem has no solution in its friction modes (a Painlevé-type inconsistency) and `solved`
is False. With friction the driver then decides the impact, or the forces at rest, by
maximal dissipation instead (:mod:`ukjax._dissipative_impact`, Lemke's method over the
friction pyramid: a problem that always has a solution).

Redundant contacts (four corners of a box on a floor: four rows, three independent) make
the solution's multipliers non-unique; the motion is the same, but the friction that each
contact's normal force sets is not. The first feasible set found is therefore extended,
once, by the inactive candidates at zero rate, and kept if still feasible with a load on
each of them (a contact touching at zero force stays free): the UK solve's
minimum-norm multipliers then share the load among all of them (a symmetric box stays
symmetric), instead of the pivot order picking three corners that tip the friction to one
side.

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

from ._batching import batched_like


class Complementarity(NamedTuple):
    """The solution of a contact complementarity problem."""

    active: jax.Array  # (k,) bool: the contacts with a (non-negative) multiplier
    z: jax.Array  # (k,) multipliers (0 off the active set)
    w: jax.Array  # (k,) rates less their targets (>= 0 off the active set)
    solved: jax.Array  # () bool: a feasible active set was found within the pivot bound


MAX_ENUMERATED = 12  # contacts up to which a cycling pivot sequence falls back to enumeration


class _Pass(NamedTuple):
    """The state of the pivoting loop after one oracle call."""

    active: jax.Array  # the set to evaluate next
    z: jax.Array  # multipliers and rates of the set evaluated last
    w: jax.Array
    w_tol: jax.Array  # (k,) the rates' tolerances
    pivots: jax.Array  # oracle calls so far
    done: jax.Array
    subset: jax.Array  # the last subset enumerated (a bit mask), past the pivot bound
    extending: jax.Array  # whether `active` adds the idle candidates to a feasible set
    kept: jax.Array  # that feasible set, and its multipliers and rates
    kept_z: jax.Array
    kept_w: jax.Array


def pick(flag, new: tuple, old: tuple) -> tuple:
    """`new` where `flag` holds, else `old`, entry by entry."""
    return tuple(jnp.where(flag, a, b) for a, b in zip(new, old))


def pivot_bound(k: int) -> int:
    """The number of pivots allowed for k contacts (one or two per contact that changes
    side is the usual count; the bound leaves room for several sweeps)."""
    return 4 * k + 4


def least_index_pivoting(
    oracle: Callable[[jax.Array], tuple[jax.Array, jax.Array]],
    candidates: jax.Array,
    max_pivots: int,
    rtol: float | None = None,
    scale: jax.Array | None = None,
    dtype=None,
) -> Complementarity:
    r"""Murty's least-index method (module docstring) over the `candidates` ((k,) bool;
    the others stay inactive and unchecked). `oracle(S)` gives $(z, w)$ for the active set
    `S`. Infeasibility is judged with the relative tolerance `rtol` (default
    $\sqrt\varepsilon$) of the largest $|w|$ with nothing active and of the current
    largest $|z|$, and of `scale` ((k,), optional): the size of the terms that each $w_i$
    sums, so that a rate that is zero to within its round-off is not taken for a negative
    one where every rate is near zero (contacts touching at rest while the body slides).
    Runs inside `jit` and `vmap` (a `lax.while_loop`)."""
    k = candidates.shape[0]
    if k == 0:
        z, w = oracle(candidates)
        return Complementarity(candidates, z, w, jnp.asarray(True))
    # One trace of the oracle: each pass evaluates the current guess, then pivots on it.
    zeros = jnp.zeros(k, bool)
    if dtype is None:
        dtype = jax.eval_shape(oracle, zeros)[1].dtype
    tol = float(jnp.finfo(dtype).eps) ** 0.5 if rtol is None else rtol
    tiny = jnp.finfo(dtype).tiny
    floor = tiny if scale is None else jnp.maximum(jnp.where(candidates, scale, 0.0), tiny)

    def infeasible(active, z, w, w_tol):
        z_tol = tol * jnp.maximum(jnp.max(jnp.abs(z), initial=0.0), tiny)
        return candidates & jnp.where(active, z < -z_tol, w < -w_tol)

    if k == 1:
        return _single(oracle, candidates, tol, floor, infeasible)
    bits = 2 ** jnp.arange(k, dtype=jnp.int32)
    enumerable = k <= MAX_ENUMERATED
    # the candidates as a bit mask (subsets are enumerated as the integers below it)
    mask = jnp.sum(jnp.where(candidates, bits, 0), dtype=jnp.int32)

    def body(c: _Pass) -> _Pass:
        z, w = oracle(c.active)
        # the scale of the rates: their size with nothing active (the first pass)
        size = jnp.max(jnp.where(candidates, jnp.abs(w), 0.0), initial=0.0)
        w_tol = jnp.where(c.pivots == 0, tol * jnp.maximum(size, floor), c.w_tol)
        bad = infeasible(c.active, z, w, w_tol)
        feasible = ~jnp.any(bad)
        # past the pivot bound (a cycle: the problem's matrix is not a P-matrix, as
        # sliding friction makes it), the next subset of the candidates in turn
        enumerating = c.pivots >= max_pivots
        # a feasible set, once: add the inactive candidates at zero rate (redundant
        # contacts: the minimum-norm multipliers then share the load, e.g. the four
        # corners of a box on a floor, where three of them would tip it to one side)
        idle = candidates & ~c.active & (w <= w_tol)
        extend = feasible & ~c.extending & jnp.any(idle)
        # an extension is kept if every contact it adds carries load; else back to the
        # set it extended (a contact touching at zero force stays free: balls touching
        # in a line do not share an impact)
        z_tol = tol * jnp.maximum(jnp.max(jnp.abs(z), initial=0.0), tiny)
        loaded = jnp.all(jnp.where(c.active & ~c.kept, z > z_tol, True))
        back = c.extending & ~(feasible & loaded)
        active = jnp.where(back, c.kept, c.active)
        z, w = pick(back, (c.kept_z, c.kept_w), (z, w))
        following = (c.subset - mask) & mask  # the next subset of `mask` (0: none left)
        exhausted = enumerating & ((following == 0) | (not enumerable))
        done = c.extending | (feasible & ~extend) | exhausted
        flip = (jnp.arange(k) == jnp.argmax(bad)) & ~done  # the least infeasible index
        listed = (following & bits) != 0
        pivoted = jnp.where(enumerating, listed, active ^ flip)
        after = jnp.where(done, active, jnp.where(extend, active | idle, pivoted))
        return _Pass(
            active=after,
            z=z,
            w=w,
            w_tol=w_tol,
            pivots=c.pivots + 1,
            done=done,
            subset=jnp.where(enumerating & ~done & ~extend, following, c.subset),
            extending=extend,
            kept=jnp.where(extend, active, c.kept),
            kept_z=jnp.where(extend, z, c.kept_z),
            kept_w=jnp.where(extend, w, c.kept_w),
        )

    z0 = w0 = jnp.zeros(k, dtype)
    start = _Pass(
        active=zeros,
        z=z0,
        w=w0,
        w_tol=jnp.zeros(k, dtype),
        pivots=jnp.zeros((), jnp.int32),
        done=jnp.asarray(False),
        subset=jnp.zeros((), jnp.int32),
        extending=jnp.asarray(False),
        kept=zeros,
        kept_z=z0,
        kept_w=w0,
    )
    out = jax.lax.while_loop(lambda c: ~c.done, body, batched_like(start, (candidates, scale)))
    active, z, w = out.active, out.z, out.w
    solved = ~jnp.any(infeasible(active, z, w, out.w_tol))
    return Complementarity(active, jnp.where(active, z, 0.0), w, solved)


def _single(oracle, candidates, tol, floor, infeasible) -> Complementarity:
    r"""The pivoting of :func:`least_index_pivoting` for one contact, written out: with
    one candidate it evaluates at most the two sets $\{\}$ and $\{1\}$, so both are
    evaluated at once (the oracle under `jax.vmap` over the two sets: one trace) and the
    set is chosen by value, without a loop (under `jax.vmap` the loop compiled more
    slowly: the 1024-ball batch's compile, ``benchmarks/RESULTS.md``). The same choice as
    the loop's: $\{1\}$ where the rate with nothing active is negative beyond its
    tolerance (`solved` then says whether its multiplier is non-negative), or zero to
    within it and the contact then carries load (the extension); else $\{\}$.
    `infeasible` is the loop's own test, which judges the chosen set's `solved`."""
    sets = jnp.stack([jnp.zeros_like(candidates), candidates])
    (z0, z1), (w0, w1) = jax.vmap(oracle)(sets)  # one trace of the oracle for both
    tiny = jnp.finfo(w0.dtype).tiny
    w_tol = tol * jnp.maximum(jnp.max(jnp.where(candidates, jnp.abs(w0), 0.0)), floor)
    z_tol = tol * jnp.maximum(jnp.max(jnp.abs(z1)), tiny)
    sinks = w0 < -w_tol
    loaded = (w0 <= w_tol) & (z1 > z_tol)
    active = candidates & (sinks | loaded)
    z, w = jnp.where(active, z1, z0), jnp.where(active, w1, w0)
    solved = ~jnp.any(infeasible(active, z, w, w_tol))
    return Complementarity(active, jnp.where(active, z, 0.0), w, solved)
