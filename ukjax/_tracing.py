"""How a value is traced: by which JAX transformations (autodiff modes, `vmap`), seen
through the tracers that wrap it. `simulate` picks its adjoint and its batch program by
these (:func:`ukjax._adjoint.default_adjoint`, `ukjax._simulate._for_batches`).

Example:
    >>> import jax
    >>> from ukjax._tracing import autodiff_modes, vmapped
    >>> seen = []
    >>> f = lambda x: seen.append((autodiff_modes(x), vmapped(x))) or x
    >>> _ = jax.vmap(jax.grad(f))(jax.numpy.ones(2))
    >>> seen
    [((False, True), True)]
"""

from __future__ import annotations

import jax
from jax.core import Tracer


def autodiff_modes(tree) -> tuple[bool, bool]:
    """(forward, reverse): whether the values of `tree` are traced by forward-mode
    autodiff (`jax.jvp`, `jax.jacfwd`) and by reverse mode (`jax.grad`, `jax.vjp`),
    looking through `vmap` and `jit` tracers (a tracer wraps the value of the
    transformation beneath it). Both: a second derivative (`jax.hessian`).

    Reverse mode linearises with its own tracers, or (without direct linearisation) with
    a `jvp` whose tangents are partially evaluated. Example:

        >>> import jax
        >>> from ukjax._tracing import autodiff_modes
        >>> seen = []
        >>> f = lambda x: seen.append(autodiff_modes(x)) or x
        >>> _ = jax.jacfwd(f)(1.0), jax.grad(f)(1.0), jax.hessian(f)(1.0)
        >>> seen
        [(True, False), (False, True), (True, True)]
    """
    forward = reverse = False
    for x in _tracers(tree):
        kind = type(x).__name__
        tangent = type(getattr(x, "tangent", None)).__name__
        partial = tangent in ("JaxprTracer", "LinearizeTracer")
        forward |= kind == "JVPTracer" and not partial
        reverse |= kind == "LinearizeTracer" or (kind == "JVPTracer" and partial)
    return forward, reverse


def vmapped(tree) -> bool:
    """Whether a value of `tree` is traced by `jax.vmap` (or `eqx.filter_vmap`), seen
    through `jit` and autodiff tracers. A function that `vmap` reaches through a `jit`
    (`jax.vmap(jax.jit(f))`) is traced unbatched and sees none.

        >>> import jax
        >>> from ukjax._tracing import vmapped
        >>> seen = []
        >>> f = lambda x: seen.append(vmapped(x)) or x
        >>> _ = f(1.0), jax.vmap(f)(jax.numpy.ones(2)), jax.jit(jax.vmap(f))(jax.numpy.ones(2))
        >>> seen
        [False, True, True]
    """
    return any(type(x).__name__ == "BatchTracer" for x in _tracers(tree))


def _tracers(tree):
    """Every tracer of `tree`'s values, outermost first: a nested transformation's
    tracer wraps the one beneath (JAX's tracers, looked at by their class names)."""
    for x in jax.tree_util.tree_leaves(tree):
        for _ in range(64):
            if not isinstance(x, Tracer):
                break
            yield x
            x = getattr(x, "primal", getattr(x, "val", None))
