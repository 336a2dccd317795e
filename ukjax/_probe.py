"""A one-time check that a system's functions do not index the state past its end.

JAX clamps out-of-bounds indices (`q[2]` of a 2-vector reads `q[1]`), so a state shorter
than the system expects would be simulated silently wrong. A system that declares
`num_coordinates()` is checked by shape; for the others, :func:`probe_indexing` runs their
functions once, with `jax.experimental.checkify` index checks, the first time a state
length is used with the system's type.
"""

from __future__ import annotations

import equinox as eqx
from jax.experimental import checkify

from ._system import System, overrides


_METHODS = (
    "kinetic_energy",
    "mass_matrix",
    "potential_energy",
    "forces",
    "holonomic",
    "nonholonomic",
    "acceleration_constraint",
    "nonideal_force",
)


def _raw_calls(system: System, t, q, qd):
    """Every method the system defines, called once (no derivatives)."""
    out = []
    for name in _METHODS:
        if not overrides(system, name):
            continue
        fn = getattr(system, name)
        takes_qd = name not in ("mass_matrix", "potential_energy", "holonomic")
        out.append(fn(t, q, qd) if takes_qd else fn(t, q))
    return out


@eqx.filter_jit
def _checked(system, t, q, qd):
    err, _ = checkify.checkify(
        lambda t_, q_, qd_: _raw_calls(system, t_, q_, qd_), errors=checkify.index_checks
    )(t, q, qd)
    return err


def probe_indexing(system: System, t, q, qd) -> None:
    """Raise a ValueError if the system's functions index `q` or `qd` out of bounds."""
    if system.num_coordinates() is not None:
        return
    problem = _checked(system, t, q, qd).get()
    if problem:
        raise ValueError(
            f"{type(system).__name__} indexes the state past its end with q of shape "
            f"{q.shape} ({problem.strip()}). Give q0 and qd0 of the length the system "
            "expects; declaring num_coordinates() on the system makes this a shape check."
        )
