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

import jax.numpy as jnp
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
