"""Runtime error checks that work inside ``jit``, ``vmap`` and ``grad``.

Checks raise an ``equinox.EquinoxRuntimeError`` (via :func:`equinox.error_if`) with a
message that says what to fix. Where a number helps (a residual, a norm), it is printed
to stderr just before the error is raised; the print runs only when the check fails.
"""

from __future__ import annotations

import functools
import sys

import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import numpy as np


def _print_values(header: str, values: dict, explanation: str = "") -> None:
    parts = []
    for k, v in values.items():
        v = np.asarray(v)
        if v.size == 1:
            parts.append(f"{k} = {float(v):.3e}")
        else:
            parts.append(f"{k} = {np.array2string(v, precision=3)}")
    prefix = "" if header.startswith("ukjax:") else "ukjax: "
    tail = f"; {explanation}" if explanation else ""
    print(f"{prefix}{header}: " + ", ".join(parts) + tail, file=sys.stderr, flush=True)


def _printed(statics, preds, values, arrays) -> np.ndarray:
    """The host side of the prints of one branch. Per report, `statics` holds its header and
    explanation function, `preds`, `values` and `arrays` its data, with the batch dimensions
    of any `vmap` in front (`vmap_method="broadcast_all"`; none outside a vmap). A report
    prints where its `pred` holds in some member: each value reduced over those members
    (:func:`_worst`), the explanation from the first one's `arrays`. Returns 0 per member,
    which the printed-through value is computed from (the order of the print and what
    follows)."""
    shape = np.shape(preds[0])
    for (header, explain), pred, vals, arrs in zip(statics, preds, values, arrays):
        failing = np.asarray(pred).reshape(-1)
        if not failing.any():
            continue
        members = lambda v: np.asarray(v).reshape(failing.shape[0], -1)[failing]
        worst = {k: _worst(k, members(v)) for k, v in vals.items()}
        explanation = ""
        if explain is not None:
            first = int(np.argmax(failing))
            member = lambda a: np.asarray(a).reshape(failing.shape[0], *np.shape(a)[len(shape) :])
            try:  # an explanation never stands in the way of the error it explains
                explanation = explain(*[member(a)[first] for a in arrs])
            except Exception as e:  # noqa: BLE001
                explanation = f"(no explanation: {type(e).__name__}: {e})"
        _print_values(header, worst, explanation)
    return np.zeros(shape, np.int32)


def _after(a, zero):
    """`a` unchanged, computed from `zero` (a callback's 0) so that it comes after it."""
    a = jnp.asarray(a)
    if a.dtype == jnp.bool_:
        return a | (zero != 0)
    return a + zero.astype(a.dtype)


def _worst(name: str, v: np.ndarray) -> np.ndarray:
    """The value to print: the smallest (signed) for names starting with 'smallest', else the
    largest in absolute value; over the failing members of a batch."""
    if name.startswith("smallest"):
        return np.min(v)
    return np.max(np.abs(v))


def error_if(x, pred, msg: str, **values):
    """Return ``x``; raise ``msg`` at run time if any element of ``pred`` is true.

    ``values`` (named arrays) are printed to stderr before the error, only when it fires, as
    their largest absolute value (or, for names starting with "smallest", their smallest
    value), over the failing members of a batch under ``vmap``.
    """
    pred = jnp.any(pred)
    x = _print_reports([(pred, msg, values, None)], x)
    return eqx.error_if(x, pred, msg)


def print_each(reports, through=None):
    """Print, as :func:`error_if` does and without raising, each report
    `(pred, msg, values, explain)` whose `pred` holds somewhere: for the checks of one
    evaluation whose error is raised by a single result code (``code.error_if``, which
    walks the Python stack once instead of once per check when the program is traced).
    One conditional and one host callback for all of them (they run at every stage of a
    step). Returns ``through`` (any pytree), passed through the printing branch: an error
    raised on the returned value comes after the print. `explain`: None, or
    ``(fn, arrays)``: ``fn(*arrays)`` (NumPy, on the host, the arrays of the first failing
    member of a batch) returns a sentence printed after the values."""
    reports = [(jnp.any(p), m.split(".")[0], v, e) for p, m, v, e in reports]
    return _print_reports(reports, through)


def code_error_if(x, pred, code, header: str, **values):
    """Like :func:`error_if`, with the message of a (possibly traced) result code."""
    pred = jnp.any(pred)
    x = _print_reports([(pred, header, values, None)], x)
    return code.error_if(x, pred)


def _print_reports(reports, x):
    """``x``, after printing each report ``(pred, header, values, explain)`` where its
    ``pred`` (a scalar) holds: ``x`` comes out of the branch that prints, so that what
    consumes it (an error check) runs after the print."""
    reports = [r for r in reports if r[2] or r[3] is not None]
    if not reports:
        return x
    statics = [(header, None if e is None else e[0]) for _, header, _, e in reports]
    preds = tuple(p for p, _, _, _ in reports)
    data = (preds, tuple(v for _, _, v, _ in reports))
    data += (tuple(() if e is None else tuple(e[1]) for _, _, _, e in reports),)

    def _report(data, x):
        # One callback, given the whole batch of any vmap (reduced on the host, only when
        # a check fails: a per-member callback would be unrolled once per member at
        # compile time). It returns 0, added to every leaf of x: what consumes x (the
        # error check) depends on the print and runs after it. (A jax.debug.callback has
        # no output to order by, and XLA drops an optimization barrier's unused operand:
        # the error's own callback could run first and the numbers never print.)
        zero = jax.pure_callback(
            lambda *d: _printed(statics, *d),
            jax.ShapeDtypeStruct((), jnp.int32),
            *data,
            vmap_method="broadcast_all",
        )
        return jax.tree_util.tree_map(lambda a: _after(a, zero), x)

    data = jax.lax.stop_gradient(data)
    fails = functools.reduce(jnp.logical_or, preds)
    return jax.lax.cond(eqxi.unvmap_any(fails), _report, lambda d, x: x, data, x)
