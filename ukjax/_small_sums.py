r"""A system's functions with their short sums written out: :func:`written_out_sums`.

A user writes a constraint the natural way, e.g. the links of a chain as
``jnp.sum((p - prev) ** 2, axis=1) - 1.0``: a sum over an axis of two entries. Under
`jax.vmap`, and in the forward derivatives that give the constraint rows (one product per
column colour, and the second derivative along the motion), that is a reduction of an
array of shape (batch, colours, links, 2) over its last axis, which XLA:CPU (JAX 0.10)
hands to its YNNPACK reduction kernel, several times slower than the same sum written as
``x[..., 0] + x[..., 1]`` (jax-ml/jax#37465; figures in `benchmarks/RESULTS.md`, stop 65
section). A user's own
`jax.jit` can turn those kernels off everywhere with :func:`ukjax.compiler_options`; this
module removes them from the system's functions under any `jit`, the user's included.

:func:`written_out_sums` traces a function to its jaxpr and evaluates it primitive by
primitive, binding every primitive as it is except a floating-point `reduce_sum` over at
most :data:`MAX_TERMS` entries, which becomes the sum of its slices (added in index order).
Same values up to the order of the additions (a rounding of the last bit), same derivatives
(the slices and sums are differentiated as any program), same behaviour under `jit`,
`vmap` and `grad`; calls (`jax.jit` inside the function) are evaluated inline the same way,
and every other primitive, including control flow and custom derivative rules, is bound
unchanged.

Example:
    >>> import jax, jax.numpy as jnp
    >>> from ukjax._small_sums import written_out_sums
    >>> links = lambda q: jnp.sum(q.reshape(2, 2) ** 2, axis=1)
    >>> q = jnp.array([0.6, -0.8, 1.0, 0.0])
    >>> [round(float(v), 12) for v in written_out_sums(links)(q)]
    [1.0, 1.0]
    >>> "reduce_sum" in str(jax.make_jaxpr(written_out_sums(links))(q))
    False
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.extend.core as jcore
import jax.numpy as jnp


MAX_TERMS = 8
"""The largest number of entries a written-out sum adds (a product over its axes). Above
it the reduction is left to XLA (at 16 entries the slices cost more than the kernel:
`benchmarks/RESULTS.md`)."""

_CALLS = ("jit", "pjit")  # the primitive of a nested jax.jit (its name across JAX versions)


def written_out_sums(fn: Callable) -> Callable:
    """`fn` (a function of arrays returning a pytree of arrays, or None) with its short
    floating-point sums written out as additions of slices (module docstring)."""

    @functools.wraps(fn)
    def wrapped(*args):
        closed, shape = jax.make_jaxpr(fn, return_shape=True)(*args)
        flat = jax.tree_util.tree_leaves(args)
        out = _evaluate(closed.jaxpr, closed.consts, flat)
        return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(shape), out)

    return wrapped


def _evaluate(jaxpr: jcore.Jaxpr, consts, args) -> list:
    env: dict = {}

    def read(v):
        return v.val if isinstance(v, jcore.Literal) else env[v]

    for v, x in zip(jaxpr.constvars, consts):
        env[v] = x
    for v, x in zip(jaxpr.invars, args):
        env[v] = x
    for eqn in jaxpr.eqns:
        outs = _apply(eqn, [read(v) for v in eqn.invars])
        for v, x in zip(eqn.outvars, outs):
            if not isinstance(v, jcore.DropVar):
                env[v] = x
    return [read(v) for v in jaxpr.outvars]


def _apply(eqn: jcore.JaxprEqn, invals: list) -> list:
    """One equation's outputs: a short sum written out, a call evaluated inline, any other
    primitive bound as it is."""
    name = eqn.primitive.name
    if name == "reduce_sum" and _short(eqn):
        return [_sum_of_slices(invals[0], eqn.params["axes"])]
    if name in _CALLS and "jaxpr" in eqn.params:
        inner = eqn.params["jaxpr"]
        return _evaluate(inner.jaxpr, inner.consts, invals)
    bound = eqn.primitive.get_bind_params(eqn.params)  # (subfuns, params) before JAX 0.7
    subfuns, params = bound if isinstance(bound, tuple) else ((), bound)
    out = eqn.primitive.bind(*subfuns, *invals, **params)
    return list(out) if eqn.primitive.multiple_results else [out]


def _short(eqn: jcore.JaxprEqn) -> bool:
    aval = eqn.invars[0].aval
    shape, dtype = getattr(aval, "shape", None), getattr(aval, "dtype", None)
    if shape is None or dtype is None or not jnp.issubdtype(dtype, jnp.inexact):
        return False
    terms = 1
    for axis in eqn.params["axes"]:
        terms *= shape[axis]
    return 0 < terms <= MAX_TERMS


def _sum_of_slices(x, axes) -> jax.Array:
    """`x` summed over `axes`, one axis at a time (the highest first, so that the lower
    indices stay valid), as additions of its slices in index order."""
    for axis in sorted(axes, reverse=True):
        parts = [jax.lax.index_in_dim(x, i, axis, keepdims=False) for i in range(x.shape[axis])]
        x = functools.reduce(jnp.add, parts)
    return x
