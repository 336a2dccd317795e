r"""A predicate that a batch shares: whether any member of a `jax.vmap` batch holds it.

`lax.cond` on a batched predicate becomes a select that computes both branches for every
member. Where a branch is cheap to take for all members once one needs it (skipping
finished blocks of a replayed run; completing a singular mass matrix), :func:`any_member`
makes the predicate unbatched, so the cond stays a branch. Built on the public
`jax.custom_batching.custom_vmap`.

Example:
    >>> import jax, jax.numpy as jnp
    >>> jax.vmap(lambda x: any_member(x > 2.0))(jnp.arange(4.0)).tolist()
    [True, True, True, True]
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap


@custom_vmap
def any_member(x):
    """`x` (a boolean scalar); under `jax.vmap`, whether it holds for any batch member,
    unbatched."""
    return x


@any_member.def_vmap
def _any_member_vmap(axis_size, in_batched, x):
    (batched,) = in_batched
    return (jnp.any(x, axis=0) if batched else x), False


@custom_vmap
def _no(*leaves):
    """A False scalar; under `jax.vmap`, batched wherever any of `leaves` is."""
    return jnp.asarray(False)


@_no.def_vmap
def _no_vmap(axis_size, in_batched, *leaves):
    if any(in_batched):
        return jnp.zeros(axis_size, bool), True
    return jnp.asarray(False), False


def batched_like(tree, sources):
    r"""`tree` unchanged in value and derivative; under `jax.vmap`, its array leaves are
    batched wherever any array leaf of `sources` is.

    For the initial carry of a `while_loop` whose predicate is batched (every member
    stops at its own time), so that every carry is batched anyway: JAX's batching rule
    finds which carries are batched by batching the loop's body again for each one that
    a batched value reaches late (a counter that starts at 0, a flag that starts False),
    nested loops inside it included. Carries batched from the start are found at once.
    Each leaf becomes `where(no, x, x)` with `no` a False that is batched like `sources`
    (built on `jax.custom_batching.custom_vmap`); XLA folds it away.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> f = lambda x: batched_like(jnp.zeros(2), x)
        >>> jax.vmap(f)(jnp.arange(3.0)).shape
        (3, 2)
    """
    arrays = [
        jnp.isnan(x.ravel()[:1]) if jnp.issubdtype(x.dtype, jnp.inexact) else x.ravel()[:1] != 0
        for x in jax.tree_util.tree_leaves(sources)
        if isinstance(x, jax.Array | np.ndarray) and x.size
    ]
    if not arrays:
        return tree
    no = _no(*arrays)
    tie = lambda x: jnp.where(no, x, x) if isinstance(x, jax.Array) else x
    return jax.tree_util.tree_map(tie, tree)
