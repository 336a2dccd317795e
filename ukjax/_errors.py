"""Runtime error checks that work inside ``jit``, ``vmap`` and ``grad``.

Checks raise an ``equinox.EquinoxRuntimeError`` (via :func:`equinox.error_if`) with a
message that says what to fix. Where a number helps (a residual, a norm), it is printed
to stderr just before the error is raised; the print runs only when the check fails.
"""

from __future__ import annotations

import sys

import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import numpy as np


def _print_values(header: str, **values):
    parts = []
    for k, v in values.items():
        v = np.asarray(v)
        if v.size == 1:
            parts.append(f"{k} = {float(v):.3e}")
        else:
            parts.append(f"{k} = {np.array2string(v, precision=3)}")
    prefix = "" if header.startswith("ukjax:") else "ukjax: "
    print(f"{prefix}{header}: " + ", ".join(parts), file=sys.stderr, flush=True)


def _worst(name: str, v):
    """The value to print: the smallest (signed) for names starting with 'smallest', else the
    largest in absolute value; over the whole batch under vmap."""
    if name.startswith("smallest"):
        return -eqxi.unvmap_max(-jnp.min(v))
    return eqxi.unvmap_max(jnp.max(jnp.abs(v)))


def error_if(x, pred, msg: str, **values):
    """Return ``x``; raise ``msg`` at run time if any element of ``pred`` is true.

    ``values`` (named arrays) are printed to stderr before the error, only when it fires, as
    their largest absolute value (or, for names starting with "smallest", their smallest
    value), over the whole batch under ``vmap``.
    """
    pred = jnp.any(pred)
    x = _print_if(pred, msg, values, x)
    return eqx.error_if(x, pred, msg)


def print_if(pred, msg: str, *, through=None, **values):
    """Print ``values`` to stderr as :func:`error_if` does, when any element of ``pred`` is
    true, without raising: for one of several checks whose error is raised by a single
    result code (``code.error_if``), which walks the Python stack once instead of once per
    check when the program is traced. Returns ``through`` (any pytree), passed through the
    printing branch: an error raised on the returned value comes after the print."""
    return _print_if(jnp.any(pred), msg.split(".")[0], values, through)


def code_error_if(x, pred, code, header: str, **values):
    """Like :func:`error_if`, with the message of a (possibly traced) result code."""
    pred = jnp.any(pred)
    x = _print_if(pred, header, values, x)
    return code.error_if(x, pred)


def _print_if(pred, header: str, values, x):
    """``x``, after printing ``values`` where ``pred``: ``x`` comes out of the branch that
    prints, so that what consumes it (an error check) runs after the print."""
    if not values:
        return x

    def _report(vals, x):
        # Scalars reduced over any vmap batch (the worst case is printed): a batched
        # callback would be unrolled once per batch element at compile time. Reduced
        # inside the branch, so only when the error fires: outside it, under a wide
        # vmap, the reductions ran at every evaluation (and XLA:CPU sends them to a
        # slow library kernel, see ukjax._xla).
        worst = {k: _worst(k, v) for k, v in vals.items()}
        jax.debug.callback(lambda v: _print_values(header, **v), worst)
        # A new value, not x itself: JAX drops a cond output that every branch passes
        # through unchanged, and with it the order of the print and the error.
        return jax.lax.optimization_barrier(x)

    values = jax.lax.stop_gradient(values)
    return jax.lax.cond(eqxi.unvmap_any(pred), _report, lambda vals, x: x, values, x)
