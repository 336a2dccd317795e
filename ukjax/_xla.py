r"""The XLA compiler options of ukjax's own compiled programs, and the `jit` that applies them.

jaxlib 0.10's CPU compiler hands batched reductions and small matrix products over a short
axis (an RMS error norm over the state, a Runge-Kutta stage combination, a residual norm:
length n for each of B trajectories) to YNNPACK once the batch reaches a few hundred, and
there each costs about 100 ns per trajectory instead of a few (jax-ml/jax#37465). Under
`vmap` a whole integration is made of such operations: on the 2-core CPU a batch of 4096
double-rod pendulums (Dopri8, rtol = atol = 1e-12) took 4.9 s with them and 3.9 s with
the library fusions off. :func:`compiler_options` turns them off for the batched programs
ukjax compiles itself (`sweep`'s chunks, the command line's batch); pass it to your own
`jax.jit` around `jax.vmap(simulate)` to get the same::

    run = jax.jit(jax.vmap(sim), compiler_options=ukjax.compiler_options())

They are not used for `simulate` or `fit`, whose own programs are single trajectories or
small batches: there no reduction is large enough to be handed to YNNPACK, and without the
library fusions XLA took 10-25 % longer to compile a reverse-mode program (double rod, Tsit5:
9.1-11.0 s vs 8.1-9.0 s in two runs each).

Nothing is changed when the backend is not the CPU, when this jaxlib does not know the
option, or when `XLA_FLAGS` already sets it (your setting wins).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import numpy as np


_LIBRARY_FUSIONS = "xla_cpu_experimental_ynn_fusion_type"


@functools.cache
def _options() -> tuple[tuple[str, str], ...]:
    if _LIBRARY_FUSIONS in os.environ.get("XLA_FLAGS", ""):
        return ()
    if jax.default_backend() != "cpu":
        return ()
    options = {_LIBRARY_FUSIONS: ""}
    try:  # an XLA that does not know the option refuses to compile with it
        jax.jit(lambda x: x + 1, compiler_options=options).lower(np.float32(1.0)).compile()
    except Exception:
        return ()
    return tuple(options.items())


def compiler_options() -> dict[str, Any]:
    """The XLA compiler options ukjax compiles its batched programs with (see the module
    docstring): `{"xla_cpu_experimental_ynn_fusion_type": ""}` on a CPU backend whose XLA
    knows that option and where `XLA_FLAGS` does not set it; `{}` otherwise.

    Example:
        >>> import jax, ukjax
        >>> opts = ukjax.compiler_options()
        >>> opts in ({}, {"xla_cpu_experimental_ynn_fusion_type": ""})
        True
        >>> double = jax.jit(lambda x: 2 * x, compiler_options=opts)
        >>> float(double(1.5))
        3.0
    """
    return dict(_options())


class _Jit:
    """`eqx.filter_jit(fn)`, compiled with :func:`compiler_options` when it is the
    outermost program. JAX accepts compiler options only there; under another trace (a
    user's `jax.jit`, `vmap`, `grad`) the plain jit is used and the outer program's
    options apply. Created at the first call (the options depend on the backend, which
    must not be initialised at import)."""

    def __init__(self, fn: Callable):
        functools.update_wrapper(self, fn)
        self._fn = fn
        self._jitted: dict[bool, Callable] = {}

    def __call__(self, *args, **kwargs):
        top = _top_level()
        if top not in self._jitted:
            self._jitted[top] = _filter_jit(self._fn, compiler_options() if top else {})
        return self._jitted[top](*args, **kwargs)


def _top_level() -> bool:
    """Whether no JAX trace is active (jax's own test, private; False if it moved)."""
    try:
        from jax._src.core import trace_state_clean
    except ImportError:
        return False
    return trace_state_clean()


def _filter_jit(fn: Callable, options: dict[str, Any]) -> Callable:
    if not options:
        return eqx.filter_jit(fn)
    try:
        return eqx.filter_jit(fn, compiler_options=options)  # pyright: ignore[reportCallIssue]
    except TypeError:  # an equinox whose filter_jit takes no jax.jit keywords
        return eqx.filter_jit(fn)


def jit(fn: Callable) -> Callable:
    """`eqx.filter_jit` for ukjax's batched outermost programs, compiled with
    :func:`compiler_options`. Nested inside another jit it is inlined like any jit (the
    options of the outermost program apply)."""
    return _Jit(fn)
