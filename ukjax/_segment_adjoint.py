r"""Reverse mode through the loop over an event-driven run's segments, by replaying them.

A hybrid run (:mod:`ukjax._hybrid`) is the composition of its segments,
$c_{i+1} = S(c_i;\,\theta)$, $i = 0 \dots n-1$: $S$ integrates one smooth segment from
the carry $c_i$ (time, state, mode, saves and event log so far), locates its event by
the root find (whose time carries its implicit-function derivative) and applies the
jump. Its reverse-mode derivative is the backward recursion

$$\bar c_i = \Big(\frac{\partial S}{\partial c_i}\Big)^{\!\top} \bar c_{i+1}, \qquad
  \bar\theta \mathrel{+}= \Big(\frac{\partial S}{\partial \theta}\Big)^{\!\top} \bar c_{i+1},$$

the same derivative that differentiating the loop itself gives. :func:`replayed_while`
records each segment's starting carry during the forward loop (without the parts the
segments only write into: the saves and the event log's entries, on which no
derivative depends, so they are not stored once per segment) and, in reverse mode, runs
that recursion as one loop whose body is one `jax.vjp` of $S$ at the recorded carry.

Why not `equinox.internal.while_loop(kind="checkpointed")`, which computes the same: its
backward rule finds, by a fixed point, which carries are perturbed and which cotangents
are zero by linearising and transposing the body again on every pass, and the segment
holds diffrax's own checkpointed loops (its steps, its saves), whose rules do the same
inside each pass; those nested fixed points were most of the trace of a gradient through
a stick-slip run (`benchmarks/RESULTS.md`, stops 84-85). Here the segment is transposed
once, so only diffrax's loops inside it keep their fixed points.

Memory: the recorded carries, (bound on the segments) x (time, state, mode and
counters), allocated when a gradient is taken. Forward mode (`jax.jvp`) through the
loop is refused by JAX (a custom VJP), as it was by the checkpointed loop; a run that
needs it passes `adjoint=diffrax.ForwardMode()`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
from jax import lax

from ._batching import batched_like


class _Loop(eqx.Module):
    """The loop's Python parts: `cond(carry)`, `body(inputs, carry)`, the bound on its
    iterations, and `recorded(carry)`, a pytree of bools (like the carry) that says which
    leaves the forward loop records (the rest: leaves the body only writes into)."""

    cond: Callable = eqx.field(static=True)
    body: Callable = eqx.field(static=True)
    max_steps: int = eqx.field(static=True)
    recorded: Callable = eqx.field(static=True)


def replayed_while(
    cond: Callable, body: Callable, inputs: Any, carry: Any, max_steps: int, recorded: Callable
):
    """`while cond(carry): carry = body(inputs, carry)` (at most `max_steps` times), the
    final carry; differentiable in reverse mode with respect to the floating-point
    leaves of `inputs` and `carry` by the replay of the module docstring.

    `recorded(carry)` is a pytree of bools like `carry`: False marks a leaf that the body
    only writes into (`where(mask, new, old)`, `x.at[i].set(v)`), so that the body's
    other outputs and its derivative do not depend on its value; the replay starts each
    segment with such leaves at zero.

    Example (a loop that halves x and counts down n):
        >>> import jax, jax.numpy as jnp
        >>> body = lambda a, c: (c[0] * a, c[1] - 1)
        >>> run = lambda a, x: replayed_while(
        ...     lambda c: c[1] > 0, body, a, (x, 3), 10, lambda c: (True, True))[0]
        >>> [float(g) for g in jax.grad(run, argnums=(0, 1))(0.5, 2.0)]  # 3 a^2 x, a^3
        [1.5, 0.125]
    """
    out = _while((inputs, _as_arrays(carry)), _Loop(cond, body, max_steps, recorded))
    # a custom VJP gives its integer outputs (codes, counts, flags) instantiated zero
    # tangents, which a primitive without a derivative rule downstream (equinox's error
    # index) refuses: they carry none
    floats, rest = _floats(out)
    return eqx.combine(floats, jtu.tree_map(lax.stop_gradient, rest))


@eqx.filter_custom_vjp
def _while(vjp_arg, loop: _Loop):
    inputs, carry = vjp_arg
    return eqxi.while_loop(
        loop.cond, lambda c: loop.body(inputs, c), carry, max_steps=loop.max_steps, kind="lax"
    )


@_while.def_fwd
def _while_fwd(perturbed, vjp_arg, loop: _Loop):
    del perturbed
    inputs, carry = vjp_arg
    kept, _ = eqx.partition(carry, loop.recorded(carry))
    arrays = jtu.tree_leaves(kept)
    record = jtu.tree_map(lambda x: jnp.zeros((loop.max_steps,) + jnp.shape(x), x.dtype), kept)
    start = batched_like((jnp.zeros((), jnp.int32), record), (arrays, inputs))

    def body(state):
        i, c, record = state
        now, _ = eqx.partition(c, loop.recorded(c))
        record = jtu.tree_map(lambda r, x: r.at[i].set(x), record, now)
        return i + 1, loop.body(inputs, c), record

    i, c, record = eqxi.while_loop(
        lambda s: loop.cond(s[1]),
        body,
        (start[0], carry, start[1]),
        max_steps=loop.max_steps,
        kind="lax",
    )
    return c, (i, record)


def _as_arrays(tree):
    """`tree` with its Python and NumPy numbers (JAX's typed constants among them) as
    arrays, so that they are classified, partitioned and differentiated as arrays."""
    number = lambda x: isinstance(x, int | float) or hasattr(x, "dtype")
    return jtu.tree_map(lambda x: jnp.asarray(x) if number(x) else x, tree)


def _floats(tree):
    """`tree`'s floating-point array leaves and the rest (:func:`equinox.partition`)."""
    return eqx.partition(tree, eqx.is_inexact_array)


def _zeros_for_none(like, grad):
    """`grad` (a pytree like `like`'s floats, None for a symbolic zero) with zeros for its
    None leaves; None where `like` has no floating-point leaf."""
    return jtu.tree_map(
        lambda x, g: None if x is None else (jnp.zeros_like(x) if g is None else g),
        like,
        grad,
        is_leaf=lambda v: v is None,
    )


@_while.def_bwd
def _while_bwd(residuals, grad_obj, perturbed, vjp_arg, loop: _Loop):
    count, record = residuals
    inputs, carry = _as_arrays(vjp_arg)  # JAX passes constants as typed Python scalars
    _, written = eqx.partition(carry, loop.recorded(carry))
    blank = jtu.tree_map(jnp.zeros_like, written)
    f_inputs, s_inputs = _floats(inputs)
    c_bar = _zeros_for_none(_floats(carry)[0], grad_obj)
    inputs_bar = jtu.tree_map(jnp.zeros_like, f_inputs)

    def segment_vjp(i, c_bar):
        """The cotangents of the inputs and of segment i's start from those of its end."""
        start = eqx.combine(jtu.tree_map(lambda r: r[jnp.maximum(i, 0)], record), blank)
        f_start, s_start = _floats(start)

        def segment(f_in, f_c):
            out = loop.body(eqx.combine(f_in, s_inputs), eqx.combine(f_c, s_start))
            return _floats(out)[0]

        _, pull = jax.vjp(segment, f_inputs, f_start)
        return pull(c_bar)

    def step(state):
        i, c_bar, inputs_bar = state
        g_inputs, c_bar = segment_vjp(i, c_bar)
        inputs_bar = jtu.tree_map(jnp.add, inputs_bar, g_inputs)
        return i - 1, c_bar, inputs_bar

    _, c_bar, inputs_bar = lax.while_loop(lambda s: s[0] >= 0, step, (count - 1, c_bar, inputs_bar))
    grads = (inputs_bar, c_bar)
    return jtu.tree_map(
        lambda p, g: g if p else None, perturbed, grads, is_leaf=lambda v: v is None
    )
