r"""The XLA compiler options of ukjax's own compiled programs, and the `jit` that applies them.

jaxlib 0.10's CPU compiler hands batched reductions and small matrix products over a short
axis (an RMS error norm over the state, a Runge-Kutta stage combination, a residual norm:
length n for each of B trajectories) to YNNPACK once the batch reaches a few hundred, and
there each costs far more per trajectory than the few multiply-adds it stands for
(jax-ml/jax#37465). Under `vmap` a whole integration is made of such operations, and a
batched run is faster with the library fusions off (`benchmarks/RESULTS.md`, sweep
section). :func:`compiler_options` turns them off for the batched programs
ukjax compiles itself (`sweep`'s chunks, the command line's batch); pass it to your own
`jax.jit` around `jax.vmap(simulate)` to get the same::

    run = jax.jit(jax.vmap(sim), compiler_options=ukjax.compiler_options())

The error norm of `simulate`'s default step-size controller is written as multiply-adds
(:func:`ukjax._integrators.error_norm`), so a plain ``jax.jit(jax.vmap(simulate))`` has no
such reduction in its integration loop even without these options.

They are not used for `simulate`'s own program, a single trajectory: there no reduction is
large enough to be handed to YNNPACK, and without the library fusions XLA took longer to
compile a reverse-mode program.

That program is compiled with XLA:CPU's older loop-fusion emitters instead
(`compiler_options(batched=False)`: `{"xla_cpu_use_fusion_emitters": False}`), because its
compilation is what a user waits for at the first call: on the seed systems'
single-trajectory programs and the hybrid ones XLA compiled them in clearly less time and
the compiled runs took the same time within the machine's noise. Batched programs keep the
default emitters: there the older ones saved less compile time and ran slower, and a `fit`
step compiled longer with them, so `fit` keeps them too. The figures are in
`benchmarks/RESULTS.md` (compile-time section).

Nothing is changed when the backend is not the CPU, when this jaxlib does not know an
option, or when `XLA_FLAGS` already sets it (your setting wins).

While it traces, that `jit` also keeps Python's cyclic garbage collector paused
(:func:`collector_paused`), which shortens the trace of a large program.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import equinox as eqx
import jax
import numpy as np
from jax.core import Tracer


_LIBRARY_FUSIONS = "xla_cpu_experimental_ynn_fusion_type"
_FUSION_EMITTERS = "xla_cpu_use_fusion_emitters"
_BATCHED = ((_LIBRARY_FUSIONS, ""),)
_SINGLE = ((_FUSION_EMITTERS, False),)


def _options(wanted: tuple[tuple[str, Any], ...]) -> tuple[tuple[str, Any], ...]:
    """Those of `wanted` that this backend's XLA accepts and `XLA_FLAGS` does not set."""
    if jax.default_backend() != "cpu":
        return ()
    flags = os.environ.get("XLA_FLAGS", "")
    accepted = []
    for name, value in wanted:
        if name in flags:
            continue
        try:  # an XLA that does not know an option refuses to compile with it
            probe = jax.jit(lambda x: x + 1, compiler_options={name: value})
            probe.lower(np.float32(1.0)).compile()
        except Exception:
            continue
        accepted.append((name, value))
    return tuple(accepted)


def compiler_options(batched: bool = True) -> dict[str, Any]:
    """The XLA compiler options ukjax compiles its own programs with (see the module
    docstring). `batched=True`: those of its batched programs (`sweep`'s chunks, the command
    line's batch), `{"xla_cpu_experimental_ynn_fusion_type": ""}`; `batched=False`: those
    of `simulate`'s single-trajectory program, `{"xla_cpu_use_fusion_emitters": False}`.
    Each only on a CPU backend whose XLA knows the option and where `XLA_FLAGS` does not
    set it; `{}` otherwise.

    Example:
        >>> import jax, ukjax
        >>> opts = ukjax.compiler_options()
        >>> opts in ({}, {"xla_cpu_experimental_ynn_fusion_type": ""})
        True
        >>> double = jax.jit(lambda x: 2 * x, compiler_options=opts)
        >>> float(double(1.5))
        3.0
        >>> ukjax.compiler_options(batched=False) in ({}, {"xla_cpu_use_fusion_emitters": False})
        True
    """
    return dict(_options(_BATCHED if batched else _SINGLE))


def is_concrete(*trees) -> bool:
    """Whether no leaf of `trees` is a JAX tracer (the values are known now)."""
    return not any(isinstance(x, Tracer) for x in jax.tree_util.tree_leaves(trees))


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for one call of ukjax's `jit` (its trace
    and, at a first call with concrete values, XLA's compile and the dispatch), and back
    as it was after (a caller that turned it off keeps it off).

    A trace allocates millions of short-lived Python objects (tracers, equations, pytree
    nodes), which set off the collector's full passes over every object the process
    holds - JAX's, diffrax's and the user's modules among them - again and again (the
    share of a hybrid batch's trace they took: `benchmarks/RESULTS.md`, stop 86). What
    the trace leaves in reference cycles is collected at the next pass after it.
    Threads (`sweep`'s workers) may overlap: the collector is back on once the call that
    found it on returns.

    Example:
        >>> import gc
        >>> with collector_paused():
        ...     print(gc.isenabled())
        False
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


class _Jit:
    """`eqx.filter_jit(fn)`, compiled with :func:`compiler_options` when it is the
    outermost program. JAX accepts compiler options only there: under another trace (a
    user's `jax.jit`, `vmap`, `grad`, seen through the arguments' tracers or, for a jit
    that closes over concrete values, through JAX's refusal) the plain jit is used and
    the outer program's options apply. The tuned jit is created at the first outermost
    call (the options depend on the backend, which must not be initialised at import),
    under a lock so that threads (sweep's workers) share one compilation."""

    def __init__(self, fn: Callable, batched: bool):
        functools.update_wrapper(self, fn)
        self._fn = fn
        self._batched = batched
        self._plain = eqx.filter_jit(fn)
        self._tuned: Callable | None = None
        self._lock = threading.Lock()

    def __call__(self, *args, **kwargs):
        with collector_paused():
            return self._call(*args, **kwargs)

    def _call(self, *args, **kwargs):
        if not is_concrete(args, kwargs):
            return self._plain(*args, **kwargs)
        with self._lock:
            if self._tuned is None:
                self._tuned = _filter_jit(self._fn, compiler_options(self._batched))
        try:
            return self._tuned(*args, **kwargs)
        except ValueError as e:
            if "top-level" not in str(e):
                raise
            return self._plain(*args, **kwargs)  # inside a trace that closes over values


class _Eager(_Jit):
    """`fn` inline in the caller's trace, and one compiled program when called with
    concrete values (see :func:`eager_jit`)."""

    def __call__(self, *args, **kwargs):
        if not is_concrete(args, kwargs):
            return self._fn(*args, **kwargs)
        return super().__call__(*(_traced_numbers(a) for a in args), **kwargs)


def traced_once(fn: Callable) -> Callable:
    """`fn` traced once per program for the same argument shapes and static values: inside
    a trace (`jax.jit`, `vmap`, `grad`, ukjax's own programs) each later call reuses the
    first call's trace (an `eqx.filter_jit` function, which XLA inlines, so the compiled
    program is the same); with concrete arguments it runs as written. For the quantities
    that the event code of a hybrid run evaluates again and again at one state (a rigid
    model's contact and friction rows: `benchmarks/RESULTS.md`, stop 74).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> calls = []
        >>> square = traced_once(lambda x: calls.append(1) or x * x)
        >>> float(jax.jit(lambda x: square(x) + square(x + 1.0))(2.0)), len(calls)
        (13.0, 1)
    """
    jitted = eqx.filter_jit(fn)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        return fn(*args, **kwargs) if is_concrete(args, kwargs) else jitted(*args, **kwargs)

    return call


def floats_as_arrays(tree):
    """The Python floats of `tree` (a system's float fields, say) as arrays, so that they
    are traced, not static: a new value is no new program. Ints stay static."""
    return jax.tree_util.tree_map(
        lambda x: jax.numpy.asarray(x) if isinstance(x, float) else x, tree
    )


def _traced_numbers(arg):
    """A positional argument with its Python floats as arrays (:func:`floats_as_arrays`,
    as `simulate` treats a system); a Python int passed as the argument itself (a time
    `t = 0`) as a float array; ints inside it (a field giving a number of links) stay
    static."""
    if isinstance(arg, int) and not isinstance(arg, bool):
        return jax.numpy.asarray(float(arg))
    return floats_as_arrays(arg)


def eager_jit(fn: Callable) -> Callable:
    """`fn` for a call at the prompt: with concrete arguments it runs as one program
    compiled with `compiler_options(batched=False)` and reused for the same shapes (the
    Python floats of the positional arguments, a system's float fields among them, and a
    time `t` given as a Python number are passed as float arrays, so a new value is no
    new program; ints inside an argument stay static); inside a trace (`jax.jit`,
    `vmap`, `grad`, ukjax's own programs) it is inlined as if undecorated, so traced
    programs are unchanged. Without it each JAX operation of an eager call is compiled on
    its own: seconds at the first call and a dispatch per operation after it (the
    projection's loops were traced and compiled again at every call).

    Example:
        >>> import jax.numpy as jnp
        >>> double = eager_jit(lambda x, t: 2 * x + t)
        >>> double(jnp.ones(2), 1.0).tolist()
        [3.0, 3.0]
    """
    return _Eager(fn, batched=False)


def _filter_jit(fn: Callable, options: dict[str, Any]) -> Callable:
    if not options:
        return eqx.filter_jit(fn)
    try:
        return eqx.filter_jit(fn, compiler_options=options)  # pyright: ignore[reportCallIssue]
    except TypeError:  # an equinox whose filter_jit takes no jax.jit keywords
        return eqx.filter_jit(fn)


def jit(fn: Callable | None = None, *, batched: bool = True) -> Callable:
    """`eqx.filter_jit` for ukjax's outermost programs, compiled with
    `compiler_options(batched)`. Nested inside another jit it is inlined like any jit (the
    options of the outermost program apply). Usable as `@jit` or `@jit(batched=False)`."""
    if fn is None:
        return functools.partial(jit, batched=batched)
    return _Jit(fn, batched)
