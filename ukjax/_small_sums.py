r"""Sums as XLA:CPU runs them well, the rules :func:`ukjax._rewrite.rewritten` applies to
a system's functions: short sums written out (:func:`short`, :func:`sum_of_slices`),
cumulative sums of :data:`MIN_PRODUCT` to :data:`MAX_PRODUCT` entries as a product with a
triangular matrix (:func:`cumulative_product_form`).

A user writes a constraint the natural way, e.g. the links of a chain as
``jnp.sum((p - prev) ** 2, axis=1) - 1.0``: a sum over an axis of two entries. Under
`jax.vmap`, and in the forward derivatives that give the constraint rows (one product per
column colour, and the second derivative along the motion), that is a reduction of an
array of shape (batch, colours, links, 2) over its last axis, which XLA:CPU (JAX 0.10)
hands to its YNNPACK reduction kernel, several times slower than the same sum written as
``x[..., 0] + x[..., 1]`` (jax-ml/jax#37465; figures in `benchmarks/RESULTS.md`, stop 65
section). A user's own
`jax.jit` can turn those kernels off everywhere with :func:`ukjax.compiler_options`;
:func:`ukjax._rewrite.rewritten` removes them from the system's functions under any
`jit`, the user's included: a floating-point `reduce_sum` over at most :data:`MAX_TERMS`
entries (:func:`short`) becomes the sum of its slices added in index order
(:func:`sum_of_slices`). Same values up to the order of the additions (a rounding of the
last bit), same derivatives (the slices and sums are differentiated as any program).

`jnp.cumsum` (a chain's bob positions from its link angles) is a `reduce_window` on the
CPU, n additions per entry; under the n + 1 tangents of a Hessian mass matrix and a
`vmap` it dominated a 32-link chain's step. From :data:`MIN_PRODUCT` to
:data:`MAX_PRODUCT` entries a product with the triangular matrix of ones (n^2
multiply-adds in one dot, which XLA runs as a matrix product) is faster; below, the whole
run did not gain, and far above the product's n^2 loses (measured in
`benchmarks/RESULTS.md`, stop 69 section).

Example:
    >>> import jax.numpy as jnp
    >>> from ukjax._small_sums import sum_of_slices
    >>> x = jnp.arange(6.0).reshape(3, 2)
    >>> sum_of_slices(x, (1,)).tolist(), sum_of_slices(x, (0, 1)).tolist()
    ([1.0, 5.0, 9.0], 15.0)
    >>> from ukjax._small_sums import cumulative_product_form
    >>> cumulative_product_form(jnp.arange(1.0, 5.0), 0, reverse=False).tolist()
    [1.0, 3.0, 6.0, 10.0]
"""

from __future__ import annotations

import functools

import jax
import jax.extend.core as jcore
import jax.numpy as jnp
import numpy as np


MAX_TERMS = 8
"""The largest number of entries a written-out sum adds (a product over its axes). Above
it the reduction is left to XLA (at 16 entries the slices cost more than the kernel:
`benchmarks/RESULTS.md`)."""


MIN_PRODUCT, MAX_PRODUCT = 16, 64
"""The lengths of the cumulative sums written as a product with a triangular matrix."""


def _inexact_shape(eqn: jcore.JaxprEqn) -> tuple[int, ...] | None:
    """The shape of `eqn`'s first operand if it is a floating-point array, else None."""
    aval = eqn.invars[0].aval
    shape, dtype = getattr(aval, "shape", None), getattr(aval, "dtype", None)
    if shape is None or dtype is None or not jnp.issubdtype(dtype, jnp.inexact):
        return None
    return shape


def short(eqn: jcore.JaxprEqn) -> bool:
    """Whether `eqn` (a `reduce_sum`) adds at most :data:`MAX_TERMS` floating-point
    entries."""
    shape = _inexact_shape(eqn)
    if shape is None:
        return False
    terms = 1
    for axis in eqn.params["axes"]:
        terms *= shape[axis]
    return 0 < terms <= MAX_TERMS


def sum_of_slices(x, axes) -> jax.Array:
    """`x` summed over `axes`, one axis at a time (the highest first, so that the lower
    indices stay valid), as additions of its slices in index order."""
    for axis in sorted(axes, reverse=True):
        parts = [jax.lax.index_in_dim(x, i, axis, keepdims=False) for i in range(x.shape[axis])]
        x = functools.reduce(jnp.add, parts)
    return x


def long_cumulative(eqn: jcore.JaxprEqn) -> bool:
    """Whether `eqn` (a `cumsum`) runs over :data:`MIN_PRODUCT` to :data:`MAX_PRODUCT`
    floating-point entries."""
    shape = _inexact_shape(eqn)
    return shape is not None and MIN_PRODUCT <= shape[eqn.params["axis"]] <= MAX_PRODUCT


def cumulative_product_form(x, axis: int, reverse: bool) -> jax.Array:
    """`jnp.cumsum(x, axis)` (from the end with `reverse`) as the product of `x` with the
    triangular matrix of ones."""
    i = np.arange(x.shape[axis])
    ones = (i[:, None] >= i[None, :]) if reverse else (i[:, None] <= i[None, :])
    y = jnp.moveaxis(x, axis, -1) @ jnp.asarray(ones, x.dtype)
    return jnp.moveaxis(y, -1, axis)
