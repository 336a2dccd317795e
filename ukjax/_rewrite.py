r"""A system's functions as XLA:CPU runs them well: :func:`rewritten`.

ukjax differentiates and batches the functions a user writes (`kinetic_energy`,
`potential_energy`, `mass_and_force`, `mass_matrix`, `forces`, `holonomic`,
`nonholonomic`, `unilateral`), and patterns that are natural in those functions compile
to slow code on XLA:CPU (JAX 0.10) once derivatives and `jax.vmap` have widened them:

- short sums (`jnp.sum(d**2, axis=1)` over a link's two coordinates) go to the YNNPACK
  reduction kernel, several times slower than the sum written out, and a cumulative sum
  (`jnp.cumsum`) is a `reduce_window` of n additions per entry (:mod:`ukjax._small_sums`);
- `sin` and `cos` are copied into every fusion that reads or broadcasts them, one libm call per
  element of each copy (:mod:`ukjax._shared_trig`).

:func:`rewritten` traces a function to its jaxpr and evaluates it primitive by primitive,
binding every primitive as it is except these: a floating-point `reduce_sum` over at
most :data:`ukjax._small_sums.MAX_TERMS` entries becomes the sum of its slices (with
`sums`), a floating-point `cumsum` over :data:`ukjax._small_sums.MIN_PRODUCT` to
:data:`ukjax._small_sums.MAX_PRODUCT` entries a product with a triangular matrix of ones,
and a floating-point `sin` or `cos` becomes :func:`ukjax._shared_trig.shared_sin`
or :func:`ukjax._shared_trig.shared_cos`. Same values (the trigonometric ones bit for bit,
the sums up to the order of the additions), same derivatives, same behaviour under `jit`,
`vmap` and `grad`; calls (`jax.jit` inside the function) are evaluated inline the same
way, and every other primitive, including control flow and custom derivative rules, is
bound unchanged.

Short sums stay as they are in the energies and in `mass_and_force`, `mass_matrix`,
`forces` (`sums=False`): ukjax differentiates the energies in reverse mode, where each
written-out slice transposes to a pad (the gradient of a run was slower with them
written out: `benchmarks/RESULTS.md`, stop 65), and the model functions are evaluated
as they are, not widened by column colours.

Example:
    >>> import jax, jax.numpy as jnp
    >>> from ukjax._rewrite import rewritten
    >>> links = lambda q: jnp.sum(q.reshape(2, 2) ** 2, axis=1)
    >>> q = jnp.array([0.6, -0.8, 1.0, 0.0])
    >>> [round(float(v), 12) for v in rewritten(links)(q)]
    [1.0, 1.0]
    >>> "reduce_sum" in str(jax.make_jaxpr(rewritten(links))(q))
    False
    >>> "sin" in str(jax.make_jaxpr(rewritten(jnp.sin, sums=False))(q))  # shared_sin's call
    True
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.extend.core as jcore
import jax.numpy as jnp

from ._shared_trig import shared_cos, shared_sin
from ._small_sums import cumulative_product_form, long_cumulative, short, sum_of_slices


_CALLS = ("jit", "pjit")  # the primitive of a nested jax.jit (its name across JAX versions)


def rewritten(fn: Callable, sums: bool = True) -> Callable:
    """`fn` (a function of arrays returning a pytree of arrays, or None) with its
    floating-point `sin` and `cos` shared, its long cumulative sums as products and, with
    `sums`, its short floating-point sums written out (module docstring)."""

    @functools.wraps(fn)
    def wrapped(*args):
        closed, shape = jax.make_jaxpr(fn, return_shape=True)(*args)
        flat = jax.tree_util.tree_leaves(args)
        out = _evaluate(closed.jaxpr, closed.consts, flat, sums)
        return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(shape), out)

    return wrapped


def _evaluate(jaxpr: jcore.Jaxpr, consts, args, sums: bool) -> list:
    env: dict = {}

    def read(v):
        return v.val if isinstance(v, jcore.Literal) else env[v]

    for v, x in zip(jaxpr.constvars, consts):
        env[v] = x
    for v, x in zip(jaxpr.invars, args):
        env[v] = x
    for eqn in jaxpr.eqns:
        outs = _apply(eqn, [read(v) for v in eqn.invars], sums)
        for v, x in zip(eqn.outvars, outs):
            if not isinstance(v, jcore.DropVar):
                env[v] = x
    return [read(v) for v in jaxpr.outvars]


def _apply(eqn: jcore.JaxprEqn, invals: list, sums: bool) -> list:
    """One equation's outputs: a short sum written out, a long cumulative sum as a
    product, a sine or cosine shared, a call evaluated inline, any other primitive bound
    as it is."""
    name = eqn.primitive.name
    if sums and name == "reduce_sum" and short(eqn):
        return [sum_of_slices(invals[0], eqn.params["axes"])]
    if name == "cumsum" and long_cumulative(eqn):
        p = eqn.params
        return [cumulative_product_form(invals[0], p["axis"], p["reverse"])]
    if name in ("sin", "cos") and _floating(eqn):
        return [shared_sin(invals[0]) if name == "sin" else shared_cos(invals[0])]
    if name in _CALLS and "jaxpr" in eqn.params:
        inner = eqn.params["jaxpr"]
        return _evaluate(inner.jaxpr, inner.consts, invals, sums)
    bound = eqn.primitive.get_bind_params(eqn.params)  # (subfuns, params) before JAX 0.7
    subfuns, params = bound if isinstance(bound, tuple) else ((), bound)
    out = eqn.primitive.bind(*subfuns, *invals, **params)
    return list(out) if eqn.primitive.multiple_results else [out]


def _floating(eqn: jcore.JaxprEqn) -> bool:
    """A real floating-point operand (complex sines XLA counts as expensive already)."""
    dtype = getattr(eqn.invars[0].aval, "dtype", None)
    return dtype is not None and jnp.issubdtype(dtype, jnp.floating)
