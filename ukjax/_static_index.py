r"""Indexing by indices known at trace time (NumPy arrays), without a gather where the
indices are a run.

`x[np.array([...])]` is an XLA gather whatever the indices; under `jax.vmap` a gather of
a (batch, ...) array is a kernel of its own that XLA:CPU does not fuse with its
consumers' layouts (a rigid-body model's Jacobian gathered by its joints' coordinate
order, the identity for every model read from a file, was the costliest kernel of an
arm's step and was copied into five layouts after it: `benchmarks/RESULTS.md`, stop 99).
Where the indices are consecutive, :func:`take` is a slice (the array itself where it
takes all of it), which XLA fuses into the readers; otherwise it is the gather.

Example:
    >>> import jax.numpy as jnp, numpy as np
    >>> from ukjax._static_index import take, scatter
    >>> x = jnp.arange(6.0).reshape(3, 2)
    >>> take(x, np.array([0, 1, 2])) is x, take(x, np.array([1, 2]), 0).tolist()
    (True, [[2.0, 3.0], [4.0, 5.0]])
    >>> take(x, np.array([1, 0]), 1).tolist()
    [[1.0, 0.0], [3.0, 2.0], [5.0, 4.0]]
    >>> scatter(jnp.array([1.0, 2.0]), np.array([2, 0]), 3).tolist()
    [2.0, 0.0, 1.0]
    >>> from ukjax._static_index import masked_sum
    >>> masked_sum(np.array([[True, False], [True, True]]), jnp.ones((2, 1, 3))).tolist()
    [[2.0, 2.0, 2.0], [1.0, 1.0, 1.0]]

:func:`masked_sum` is the same idea for sums under a static mask (a tree's joints or
bodies): written out over the entries the mask keeps, where a contraction with the mask as
a matrix is, under `jax.vmap`, a batched matrix product of a few entries per system.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def _run(index: np.ndarray) -> int | None:
    """The first index where `index` is consecutive (k, k + 1, ...), None otherwise."""
    index = np.asarray(index)
    if index.ndim != 1 or index.size == 0:
        return None
    start = int(index[0])
    return start if np.array_equal(index, np.arange(start, start + index.size)) else None


def take(x: jax.Array, index: np.ndarray, axis: int = 0) -> jax.Array:
    """`jnp.take(x, index, axis)` for a static 1-D `index` of non-negative entries: `x`
    itself, a slice, or a gather."""
    start = _run(index)
    if start is None:
        return jnp.take(x, np.asarray(index), axis=axis)
    if start == 0 and len(index) == x.shape[axis]:
        return x
    return jax.lax.slice_in_dim(x, start, start + len(index), axis=axis)


def scatter(values: jax.Array, index: np.ndarray, size: int) -> jax.Array:
    """A vector of `size` zeros with `values` (k,) added at the static distinct `index`
    (k,): `values` itself, padded, or a scatter."""
    start = _run(index)
    if start is None:
        return jnp.zeros(size, values.dtype).at[np.asarray(index)].add(values)
    return jnp.pad(values, (start, size - start - len(index)))


def replace(x: jax.Array, index: np.ndarray, values: jax.Array, axis: int = 0) -> jax.Array:
    """`x` with its entries at the static distinct 1-D `index` along `axis` set to `values`
    (`x.at[..., index, ...].set(values)`): slices of `x` around `values` where the indices
    are a run, the scatter otherwise."""
    start = _run(index)
    if start is None:
        where = (slice(None),) * (axis % x.ndim) + (np.asarray(index),)
        return x.at[where].set(values)
    end = start + len(index)
    before = jax.lax.slice_in_dim(x, 0, start, axis=axis)
    after = jax.lax.slice_in_dim(x, end, x.shape[axis], axis=axis)
    return jnp.concatenate([before, values, after], axis=axis)


def masked_sum(mask: np.ndarray, x: jax.Array) -> jax.Array:
    r"""$\sum_k m_{ki} x_{ki}$ (i, ...) for a static boolean `mask` (k, i) and `x` (k, i, ...)
    or (k, 1, ...), written out over the k with a true entry: elementwise additions that XLA
    fuses with the terms' producers (`benchmarks/RESULTS.md`, stop 99). Masked-out entries
    are not read (a non-finite one does not reach the sum)."""
    mask = np.asarray(mask, bool)
    shape = (mask.shape[1],) + x.shape[2:]
    column = (-1,) + (1,) * (x.ndim - 2)
    terms = [jnp.where(mask[k].reshape(column), x[k], 0.0) for k in np.flatnonzero(mask.any(1))]
    return sum(terms[1:], terms[0]) if terms else jnp.zeros(shape, x.dtype)
