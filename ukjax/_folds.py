r"""The largest and smallest entry of an array as a halving fold of elementwise maxima
(minima), for the checks that run at every stage of a step.

Under `jax.vmap` a `jnp.max` over one trajectory's entries is a reduction of a
(batch, k) array over its short axis, which XLA:CPU (JAX 0.10) hands to its YNNPACK
reduction kernel (jax-ml/jax#37465); a fold of $\lceil\log_2 k\rceil$ elementwise
`maximum`s of slices, $\max(x_{:h}, x_{h:2h})$, is one or two loop fusions that XLA
fuses with the producer of `x` (a written mass matrix's asymmetry check:
`benchmarks/RESULTS.md`, stop 77). A NaN anywhere gives NaN, as `jnp.max` does
(`jnp.maximum` propagates NaN); the derivative is that of the same maxima.

Example:
    >>> import jax.numpy as jnp
    >>> from ukjax._folds import largest, smallest
    >>> x = jnp.array([[3.0, -1.0, 7.0], [2.0, 5.0, 0.5]])
    >>> float(largest(x)), float(smallest(x))
    (7.0, -1.0)
    >>> bool(jnp.isnan(largest(jnp.array([1.0, jnp.nan, 2.0]))))
    True
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp


def _fold(x: jax.Array, pair: Callable) -> jax.Array:
    x = jnp.ravel(x)
    if x.shape[0] == 0:
        raise ValueError("_folds: an empty array has no largest or smallest entry.")
    while x.shape[0] > 1:
        h = x.shape[0] // 2
        folded = pair(x[:h], x[h : 2 * h])
        x = jnp.concatenate([folded, x[2 * h :]]) if x.shape[0] % 2 else folded
    return x[0]


def largest(x: jax.Array) -> jax.Array:
    """The largest entry of `x` (any shape, at least one entry), NaN if any is NaN."""
    return _fold(x, jnp.maximum)


def smallest(x: jax.Array) -> jax.Array:
    """The smallest entry of `x` (any shape, at least one entry), NaN if any is NaN."""
    return _fold(x, jnp.minimum)
