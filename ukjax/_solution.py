r"""The result of :func:`ukjax.simulate`: the saves, the result code and the record of a run.

Example (a failed run returns its code with `throw=False`, its saves NaN from the
failure on):
    >>> import jax, jax.numpy as jnp, ukjax
    >>> jax.config.update("jax_enable_x64", True)
    >>> from ukjax.systems import CartesianPendulum
    >>> sol = ukjax.simulate(CartesianPendulum(), jnp.array([1.0, 0.0]), jnp.zeros(2),
    ...                      jnp.linspace(0.0, 1.0, 3), max_steps=2, throw=False)
    >>> sol.status, bool(jnp.isnan(sol.q[-1]).all())
    ('max_steps_explicit', True)
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import numpy as np

from ._events import EventLog
from ._results import RESULTS, code_of, name_of


class Solution(eqx.Module):
    """The result of :func:`simulate`.

    - `ts`: (T,) save times.
    - `q`: (T, n) generalized coordinates at `ts`.
    - `qd`: (T, n) generalized velocities at `ts`.
    - `result`: a :class:`ukjax.RESULTS` code (`ukjax.RESULTS.successful` on success).
      With `throw=False` a failed run returns its code here; the saves from the failure on
      are NaN (those before it are kept), so no value is mistaken for data.
    - `stats`: diffrax statistics (`num_steps`, `num_accepted_steps`, ...); for a hybrid
      run, `num_steps` summed over the segments.
    - `events`: for a run with contacts or impulses, a :class:`ukjax.EventLog` (time,
      kind, contact, normal speeds before/after, count); `None` otherwise.
    - `engaged`: for a run with contacts, (T, k) booleans: which contacts were engaged
      (a persistent or compliant contact row in the UK equation) at each save.
    - `sliding`: for a run with :class:`ukjax.Coulomb` friction, (T, k) ints at each
      save: 0 stuck (or not in contact), +1 / -1 sliding along / against the contact's
      tangent row (in 3-D: 1 sliding); `None` otherwise.
    - `latched`: for a system with latches (:meth:`ukjax.System.latches`), (T, L)
      booleans: which latches were engaged at each save; `None` otherwise.

    Under `jax.vmap` every field gains a leading batch axis. :attr:`status` names the
    result (``RESULTS`` prints success as ``RESULTS<>``: diffrax's message for it is
    empty).

    Example:
        >>> import jax, jax.numpy as jnp, ukjax
        >>> from ukjax.systems import CartesianPendulum
        >>> sol = ukjax.simulate(CartesianPendulum(), jnp.array([1.0, 0.0]), jnp.zeros(2),
        ...                      jnp.linspace(0.0, 1.0, 3))
        >>> sol.status
        'successful'
    """

    ts: jax.Array
    q: jax.Array
    qd: jax.Array
    result: RESULTS
    stats: dict[str, Any]
    events: EventLog | None = None
    engaged: jax.Array | None = None
    sliding: jax.Array | None = None
    latched: jax.Array | None = None

    @property
    def status(self) -> str | np.ndarray:
        """The name of `result` (``'successful'``, ``'max_steps_reached'``,
        ``'mass_matrix_not_spd'``, ...): a str for one run, an array of names for a
        batch. Read on the host (not under `jit`)."""
        codes = np.asarray(code_of(self.result))
        names = [name_of(int(c)) for c in codes.ravel()]
        if codes.ndim == 0:
            return names[0]
        return np.array(names, dtype=object).reshape(codes.shape)
