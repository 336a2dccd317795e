r"""Diagnostics along a trajectory: constraint residuals at every level, energy and the
constraint forces, from a :class:`~ukjax.Solution` without re-deriving anything by hand."""

from __future__ import annotations

import equinox as eqx
import jax

from ._constraints import rows
from ._dynamics import energy, evaluate
from ._precision import full_precision
from ._residuals import max_abs, residuals
from ._stabilization import AbstractStabilization, check_stabilization
from ._system import System, floatify
from ._xla import jit


class Diagnostics(eqx.Module):
    r"""Per-save-time diagnostics of a trajectory (leading axis: time).

    - `ts` (T,): the save times.
    - `position` (T, h): $\varphi(q, t)$ of the holonomic constraints.
    - `velocity` (T, h): $\dot\varphi$.
    - `nonholonomic` (T, k): $\psi(q, \dot q, t)$.
    - `acceleration` (T, m): $A\ddot q - b$ of the unstabilised constraint rows (with
      Baumgarte stabilisation this is the feedback term $-2\alpha\dot\varphi -
      \beta^2\varphi$, resp. $-\alpha\psi$; without, round-off).
    - `energy` (T,): $T + V$.
    - `Qc_ideal`, `Qc_nonideal` (T, n): generalized constraint forces
      $MA_M^+(b - Aa)$ and $M(I - A_M^+A)M^{-1}C$ (including any Baumgarte feedback).
    - `qdd` (T, n): the accelerations used.
    """

    ts: jax.Array
    position: jax.Array
    velocity: jax.Array
    nonholonomic: jax.Array
    acceleration: jax.Array
    energy: jax.Array
    Qc_ideal: jax.Array
    Qc_nonideal: jax.Array
    qdd: jax.Array

    def max_residual(self) -> jax.Array:
        """Largest |phi|, |phi_dot|, |psi| over the whole trajectory."""
        return max_abs(self.position, self.velocity, self.nonholonomic)

    def energy_drift(self) -> jax.Array:
        """$E(t) - E(t_0)$."""
        return self.energy - self.energy[0]

    def plot(self, path: str | None = None, title: str | None = None):
        """One figure: residuals (log scale), energy drift and constraint forces.

        Returns the matplotlib figure; saves it to `path` when given.
        """
        import matplotlib

        if path is not None:
            matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy as np

        ts = np.asarray(self.ts)
        fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
        floor = 1e-18
        for name, arr in (
            ("|phi|", self.position),
            ("|phi_dot|", self.velocity),
            ("|psi|", self.nonholonomic),
        ):
            arr = np.asarray(arr)
            if arr.shape[-1]:
                axes[0].semilogy(ts, np.maximum(np.abs(arr).max(axis=-1), floor), label=name)
        axes[0].set(xlabel="t", title="constraint residuals (max over rows)")
        axes[0].legend()
        axes[1].plot(ts, np.asarray(self.energy_drift()))
        axes[1].set(xlabel="t", ylabel="E(t) - E(0)", title="energy drift")
        Qi = np.asarray(self.Qc_ideal)
        for k in range(Qi.shape[-1]):
            axes[2].plot(ts, Qi[:, k], label=f"Qc_ideal[{k}]")
        Qni = np.asarray(self.Qc_nonideal)
        if np.any(Qni != 0):
            for k in range(Qni.shape[-1]):
                axes[2].plot(ts, Qni[:, k], "--", label=f"Qc_nonideal[{k}]")
        axes[2].set(xlabel="t", title="generalized constraint forces")
        if Qi.shape[-1] <= 8:
            axes[2].legend(fontsize=7)
        if title:
            fig.suptitle(title)
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=110)
        return fig


@full_precision
def diagnostics(
    system: System, solution, *, stabilization: AbstractStabilization | None = None
) -> Diagnostics:
    r"""Constraint residuals, energy and constraint forces at every save time of `solution`.

    Pass the same `stabilization` as to :func:`ukjax.simulate` so that the forces and
    accelerations are the ones that were integrated (a :class:`ukjax.Projection` changes
    nothing here: its integrated equation is the plain UK one).

    Example:
        >>> import jax, jax.numpy as jnp, ukjax
        >>> jax.config.update("jax_enable_x64", True)
        >>> from ukjax.systems import CartesianPendulum
        >>> pend = CartesianPendulum()
        >>> sol = ukjax.simulate(pend, jnp.array([1.0, 0.0]), jnp.zeros(2),
        ...                      jnp.linspace(0.0, 1.0, 11))
        >>> d = ukjax.diagnostics(pend, sol)
        >>> d.position.shape, bool(d.max_residual() < 1e-9)
        ((11, 1), True)
    """
    stabilization = floatify(check_stabilization(stabilization))
    return _diagnostics(floatify(system), solution.ts, solution.q, solution.qd, stabilization)


@jit(batched=False)
def _diagnostics(system, ts, qs, qds, stabilization):
    def one(t, q, qd):
        res = residuals(system, t, q, qd)
        ev = evaluate(system, t, q, qd, stabilization)
        A, b = rows(system, t, q, qd)  # the unstabilised rows
        return (
            res.position,
            res.velocity,
            res.nonholonomic,
            A @ ev.terms.qdd - b,
            energy(system, t, q, qd),
            ev.terms.Qc_ideal,
            ev.terms.Qc_nonideal,
            ev.terms.qdd,
        )

    return Diagnostics(ts, *jax.vmap(one)(ts, qs, qds))
