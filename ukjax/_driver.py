r"""The drivers of :func:`ukjax.simulate`: how a run gets from its initial state to its saves.

Every run takes one path (:func:`ukjax._simulate.run`): the initial-condition policy
applies, the run's *driver* integrates, and the failure (if any) is raised or returned in
the :class:`ukjax.Solution`. A driver is a strategy with one method,
:meth:`AbstractDriver.integrate`, and both drivers integrate the same
:class:`ukjax._field.Field` with the same diffrax solve (:class:`ukjax._stepping.Stepping`):

- :class:`ukjax._smooth.SmoothDriver`: one diffrax solve over `ts` (a run without contacts,
  impulses or latches), differentiable in every mode by the run's adjoint;
- :class:`ukjax._hybrid.EventDriver`: smooth segments of that solve in the contacts'
  current mode, between events located by root finding, at which the contact and friction
  laws switch the modes and set the velocity.

Example (the smooth driver of a pendulum, integrated through the one path):
    >>> import jax, jax.numpy as jnp, ukjax
    >>> jax.config.update("jax_enable_x64", True)
    >>> from ukjax.systems import CartesianPendulum
    >>> sol = ukjax.simulate(CartesianPendulum(), jnp.array([1.0, 0.0]), jnp.zeros(2),
    ...                      jnp.linspace(0.0, 1.0, 3))
    >>> sol.status, sol.events is None
    ('successful', True)
"""

from __future__ import annotations

import abc

import equinox as eqx
import jax

from ._errors import code_error_if
from ._field import Field
from ._initial import AbstractInitialConditions, InitialCheck
from ._results import RESULTS
from ._solution import Solution
from ._stepping import Stepping


class AbstractDriver(eqx.Module):
    """A way to integrate a run (module docstring): the run's vector field `field`, its
    initial-condition policy `initial` and its diffrax settings `stepping`."""

    field: eqx.AbstractVar[Field]
    initial: eqx.AbstractVar[AbstractInitialConditions]
    stepping: eqx.AbstractVar[Stepping]

    @property
    def throw(self) -> bool:
        """Whether a failure raises (else it is returned in the result code)."""
        return self.field.throw

    @abc.abstractmethod
    def integrate(self, q0, qd0, ts, initial: InitialCheck) -> Solution:
        """The run from the initial state (q0, qd0) at `ts[0]` (after the policy: `initial`
        is its verdict), saved at `ts` (NaN from a failure on), with its result code,
        statistics and, for an event-driven run, its event log and saved modes. Traced
        inside `jit`; raises only through `equinox` run-time errors
        (:func:`refuse_initial`); the caller raises the result code."""

    def refuse(self, t0, q0) -> None:
        """Plain ValueErrors, before tracing, for what this driver can judge on concrete
        inputs with `throw=True` (by default nothing)."""

    def transformation_hint(self, error: TypeError) -> str | None:
        """What to do instead, where `error` is JAX's refusal of a transformation this
        driver's run cannot take (e.g. forward mode through a reverse-only adjoint): the
        message of the TypeError `simulate` raises in its place. None (the default): JAX's
        error stands."""
        return None


def refuse_initial(throw: bool, q0, code: RESULTS, **values) -> jax.Array:
    """`q0`, with a run-time error raised (`throw=True`) when `code` is a failure: the
    initial state was refused; `values` are printed with the message."""
    if not throw:
        return q0
    return code_error_if(
        q0, code != RESULTS.successful, code, "ukjax: initial state refused", **values
    )
