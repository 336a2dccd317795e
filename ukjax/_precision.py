r"""Full-precision matrix products for everything ukjax traces: :func:`full_precision`.

On GPUs with tensor cores (NVIDIA Ampere and later) XLA's default precision for a float32
matrix product rounds its inputs to TF32 (10 mantissa bits): relative errors near 1e-3
instead of float32's 1e-7. In a constrained simulation that is not a small loss: a mass
matrix $M = J^TWJ$ assembled that way is asymmetric at the 1e-4 level and the UK solve's
checks rightly refuse it, and constraint drift grows by the same factor. ukjax therefore
traces its public entry points under `jax.default_matmul_precision("highest")`, which
writes ``precision=HIGHEST`` into every matrix product of the traced program (the user's
own `mass_matrix`, `forces`, constraints included) and changes nothing on CPUs or in
float64. The setting is scoped to the call being traced (JAX's context manager, not a
global flag), so the user's code around ukjax keeps the precision it chose.

Example:
    >>> import jax, jax.numpy as jnp, ukjax
    >>> jaxpr = jax.make_jaxpr(lambda M: ukjax.weighted_pinv(jnp.ones((1, 2)), M))(jnp.eye(2))
    >>> "HIGHEST" in str(jaxpr)
    True
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import jax


P = ParamSpec("P")
R = TypeVar("R")


def full_precision(fn: Callable[P, R]) -> Callable[P, R]:
    """`fn`, traced with full-precision (``HIGHEST``) matrix products.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> square = full_precision(lambda a: a @ a)
        >>> "HIGHEST" in str(jax.make_jaxpr(square)(jnp.eye(2)))
        True
    """

    @functools.wraps(fn)
    def traced_at_full_precision(*args: P.args, **kwargs: P.kwargs) -> R:
        with jax.default_matmul_precision("highest"):
            return fn(*args, **kwargs)

    return traced_at_full_precision
