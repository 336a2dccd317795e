r"""Sine and cosine computed once per element under XLA:CPU: :func:`shared_sin`,
:func:`shared_cos`.

XLA's fusion pass counts `sin` and `cos` of real numbers among the cheap element-wise
operations (as they are on a GPU) and copies them into every fusion that reads them,
including fusions that broadcast them. The derivatives ukjax takes of a user's functions
do exactly that: the mass matrix of a system written with `kinetic_energy` comes from
n + 1 forward tangents of the momentum, where every $\cos q_i$ multiplies a tangent
array of shape (tangents, n) (and (batch, tangents, n) under `jax.vmap`), and the
constraint Jacobians come from one product per column colour. XLA:CPU evaluates
`sin`/`cos` by a scalar call into libm per element, so each copy costs a call per element
of the larger array (the profile of a batched chain written in angles:
`benchmarks/RESULTS.md`, stop 69 section).

The functions here return $\sin x / ((x - x) + 1)$ and $\cos x / ((x - x) + 1)$: the
same bits as `jnp.sin`, `jnp.cos` for every $x$ (a division by exactly 1 where $x$ is
finite; NaN where it is not, as the sine itself), and a floating-point division is an
operation XLA counts as expensive and does not copy into a consumer that reuses its
elements. The sine is then computed once into an array of the shape of $x$ and read
from there. Their derivative rules use the shared versions again, so the sines and
cosines of every derivative order are shared too. :mod:`ukjax._rewrite` puts them in
place of `sin` and `cos` in the functions a system defines.

Example:
    >>> import jax, jax.numpy as jnp
    >>> from ukjax._shared_trig import shared_cos, shared_sin
    >>> x = jnp.array([0.0, 1.0, 1e6, jnp.inf])
    >>> bool(jnp.array_equal(shared_sin(x), jnp.sin(x), equal_nan=True))
    True
    >>> float(jax.grad(shared_cos)(1.0)) == float(-jnp.sin(1.0))
    True
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def _computed_once(value: jax.Array, x: jax.Array) -> jax.Array:
    """`value` divided by a one XLA cannot fold away: `(x - x) + 1` is 1 for finite x
    (floating-point `x - x` is not simplified to 0) and NaN otherwise, where `value`
    (a sine or cosine of x) is NaN already."""
    return value / ((x - x) + 1)


@jax.custom_jvp
def shared_sin(x: jax.Array) -> jax.Array:
    r"""$\sin x$, bit for bit, computed once per element under XLA:CPU (module
    docstring); derivative $\cos x$ (shared as well)."""
    return _computed_once(jnp.sin(x), x)


@jax.custom_jvp
def shared_cos(x: jax.Array) -> jax.Array:
    r"""$\cos x$, bit for bit, computed once per element under XLA:CPU (module
    docstring); derivative $-\sin x$ (shared as well)."""
    return _computed_once(jnp.cos(x), x)


@shared_sin.defjvp
def _sin_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return shared_sin(x), shared_cos(x) * dx


@shared_cos.defjvp
def _cos_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return shared_cos(x), -shared_sin(x) * dx
