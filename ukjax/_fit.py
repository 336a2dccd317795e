r"""Parameter identification: fit a system's fields to observed motion with optax."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from ._adjoint import default_adjoint
from ._dynamics import evaluate
from ._initial import IgnoreInitial
from ._simulate import MAX_STEPS, simulate
from ._stabilization import check_stabilization
from ._system import System, floatify


def _tree_norm(tree):
    leaves = jax.tree_util.tree_leaves(tree)
    return jnp.sqrt(sum(jnp.sum(jnp.square(x)) for x in leaves))


class TrajectoryData(eqx.Module):
    r"""Observed motion of a system, for :func:`trajectory_loss` and :func:`fit`.

    - `ts` (T,): observation times (integration starts at `ts[0]`).
    - `q0`, `qd0` (n,): the known initial state.
    - `q` (T, n) or `None`: observed coordinates.
    - `qd` (T, n) or `None`: observed velocities.
    - `constraint_forces` (T, n) or `None`: observed generalized constraint forces
      $Q^c = Q^c_i + Q^c_{ni}$ (e.g. measured support reactions or the force of the
      actuator that realises a constraint).
    - `observed` (k,) integer indices or `None`: which coordinates of `q`/`qd`/forces are
      measured (partial observation); `None` means all.

    Several trajectories (same `ts`): give `q0`, `qd0` and each observation a leading
    batch axis, (B, n) and (B, T, n).
    """

    ts: jax.Array
    q0: jax.Array
    qd0: jax.Array
    q: jax.Array | None = None
    qd: jax.Array | None = None
    constraint_forces: jax.Array | None = None
    observed: Any = eqx.field(static=True, default=None)

    @property
    def batched(self) -> bool:
        return jnp.ndim(self.q0) == 2


def predict(system: System, data: TrajectoryData, **simulate_kwargs) -> dict[str, jax.Array]:
    """Simulate from the data's initial state(s) and return the quantities that the data
    observes: a dict with `q`, `qd` and/or `constraint_forces` (batched like the data).

    Example:
        >>> import jax, jax.numpy as jnp, ukjax
        >>> jax.config.update("jax_enable_x64", True)
        >>> from ukjax.systems import CartesianPendulum
        >>> ts = jnp.linspace(0.0, 1.0, 5)
        >>> data = ukjax.TrajectoryData(ts, jnp.array([1.0, 0.0]), jnp.zeros(2),
        ...                             q=jnp.zeros((5, 2)), constraint_forces=jnp.zeros((5, 2)))
        >>> out = ukjax.predict(CartesianPendulum(), data)
        >>> sorted(out), out["q"].shape
        (['constraint_forces', 'q'], (5, 2))
    """

    def one(q0, qd0):
        sol = simulate(system, q0, qd0, data.ts, **simulate_kwargs)
        out = {}
        if data.q is not None:
            out["q"] = sol.q
        if data.qd is not None:
            out["qd"] = sol.qd
        if data.constraint_forces is not None:
            stabilization = check_stabilization(simulate_kwargs.get("stabilization"))

            def forces(t, q, qd):
                terms = evaluate(system, t, q, qd, stabilization).terms
                return terms.Qc_ideal + terms.Qc_nonideal

            out["constraint_forces"] = jax.vmap(forces)(sol.ts, sol.q, sol.qd)
        return out

    if data.batched:
        simulate_kwargs = _with_adjoint(data, simulate_kwargs, reverse_only=False)
        return jax.vmap(one)(data.q0, data.qd0)
    return one(data.q0, data.qd0)


def _with_adjoint(data: TrajectoryData, simulate_kwargs: dict, reverse_only: bool) -> dict:
    """`simulate_kwargs` with the default adjoint for `data` when none is given: the
    stored states of every trajectory count against the budget
    (:func:`ukjax._adjoint.default_adjoint`); `reverse_only` for a caller that takes
    reverse-mode gradients alone (`fit`), which gets the faster reverse replay."""
    if "adjoint" in simulate_kwargs:
        return simulate_kwargs
    batch, n = data.q0.shape if data.batched else (1, data.q0.shape[0])
    y0 = (jax.ShapeDtypeStruct((n,), data.q0.dtype),) * 2
    max_steps = simulate_kwargs.get("max_steps", MAX_STEPS)
    adjoint = default_adjoint(max_steps, y0, batch, reverse_only=reverse_only)
    return {**simulate_kwargs, "adjoint": adjoint}


def trajectory_loss(data: TrajectoryData, *, weights: dict | None = None, **simulate_kwargs):
    r"""A loss `loss(system)`: mean squared misfit of the observed quantities.

    Each observable (q, qd, constraint forces) is divided by its root-mean-square value in
    the data, so that quantities of different units weigh alike; `weights` (a dict with
    keys `"q"`, `"qd"`, `"constraint_forces"`) rescales them. Only the coordinates in
    `data.observed` count. `simulate_kwargs` go to :func:`ukjax.simulate` (by default
    `initial_conditions=ukjax.IgnoreInitial()`: the initial state is the data's).

    Example:
        >>> import jax, jax.numpy as jnp, ukjax
        >>> jax.config.update("jax_enable_x64", True)
        >>> from ukjax.systems import CartesianPendulum
        >>> ts = jnp.linspace(0.0, 1.0, 5)
        >>> sol = ukjax.simulate(CartesianPendulum(), jnp.array([1.0, 0.0]), jnp.zeros(2), ts)
        >>> loss = ukjax.trajectory_loss(ukjax.TrajectoryData(ts, sol.q[0], sol.qd[0], q=sol.q))
        >>> float(loss(CartesianPendulum())) < 1e-20, float(loss(CartesianPendulum(g=5.0))) > 1e-3
        (True, True)
    """
    simulate_kwargs.setdefault("initial_conditions", IgnoreInitial())
    observed = {
        k: v
        for k, v in (("q", data.q), ("qd", data.qd), ("constraint_forces", data.constraint_forces))
        if v is not None
    }
    if not observed:
        raise ValueError("TrajectoryData observes nothing: give q, qd and/or constraint_forces.")
    idx = None if data.observed is None else np.asarray(data.observed)
    select = (lambda x: x) if idx is None else (lambda x: x[..., idx])
    scales = {
        k: jnp.sqrt(jnp.mean(select(v) ** 2)) + jnp.finfo(jnp.result_type(v)).tiny
        for k, v in observed.items()
    }
    weights = {} if weights is None else dict(weights)

    def loss(system):
        pred = predict(system, data, **simulate_kwargs)
        total = 0.0
        for k, v in observed.items():
            r = (select(pred[k]) - select(v)) / scales[k]
            total = total + weights.get(k, 1.0) * jnp.mean(r**2)
        return total

    return loss


class FitResult(eqx.Module):
    """The outcome of :func:`fit`.

    - `system`: the system with the fitted values.
    - `params`: dict name -> fitted value.
    - `loss`: final loss; `losses`: the loss at every step.
    - `steps`: optimiser steps taken.
    - `converged`: whether a stopping criterion (`gtol` or `ftol`) was met before
      `max_steps`; `message` says which.
    - `grad_norm`: norm of the gradient (w.r.t. the unconstrained parameters) at the end.
    """

    system: System
    params: dict
    loss: float
    losses: np.ndarray
    steps: int
    converged: bool
    message: str
    grad_norm: float

    def __repr__(self):
        vals = ", ".join(
            f"{k}={np.array2string(np.asarray(v), precision=6)}" for k, v in self.params.items()
        )
        return (
            f"FitResult({vals}; loss={self.loss:.3e}, steps={self.steps}, "
            f"converged={self.converged}: {self.message})"
        )


class _Reparametrisation(eqx.Module):
    """The fitted fields of `system` as unconstrained values u: theta = exp(u) for the
    positive ones, theta = u for the others."""

    system: System
    names: list[str] = eqx.field(static=True)
    positive: frozenset[str] = eqx.field(static=True)

    def value(self, name: str, u):
        return jnp.exp(u) if name in self.positive else u

    def initial(self) -> dict[str, jax.Array]:
        out = {}
        for n in self.names:
            theta = jnp.asarray(getattr(self.system, n))
            dtype = jnp.result_type(theta, float)
            # Strongly typed leaves: weakly typed ones would retrace after the first update.
            u = jnp.log(theta) if n in self.positive else theta
            out[n] = jnp.asarray(u, dtype) + jnp.zeros((), dtype)
        return out

    def params(self, u) -> dict[str, jax.Array]:
        return {n: self.value(n, u[n]) for n in self.names}

    def build(self, u) -> System:
        where = lambda s: [getattr(s, n) for n in self.names]
        return eqx.tree_at(where, self.system, [self.value(n, u[n]) for n in self.names])


def _reparametrisation(system, params, positive) -> _Reparametrisation:
    names = list(params)
    if not names:
        raise ValueError("params must name at least one field of the system to fit.")
    for n in names:
        if not hasattr(system, n):
            raise ValueError(f"{type(system).__name__} has no field {n!r} to fit.")
    system = _integers_as_floats(system, names)
    for n in names:
        if not eqx.is_inexact_array_like(getattr(system, n)):
            raise ValueError(f"Field {n!r} is not a floating-point value; it cannot be fitted.")
    pos = set(names) if positive is True else set() if positive is False else set(positive)
    unknown = pos - set(names)
    if unknown:
        raise ValueError(f"positive names {sorted(unknown)} are not among params {names}.")
    system = floatify(system)
    for n in pos:
        if not bool(jnp.all(jnp.asarray(getattr(system, n)) > 0)):
            raise ValueError(f"{n!r} is declared positive but its initial value is not > 0.")
    return _Reparametrisation(system, names, frozenset(pos))


def _is_integer(x) -> bool:
    if isinstance(x, bool):
        return False
    if isinstance(x, int):
        return True
    dtype = getattr(x, "dtype", None)
    return dtype is not None and jnp.issubdtype(dtype, jnp.integer)


def _integers_as_floats(system, names):
    """The fitted fields a user wrote as integers (`g: int = 10`) as floating-point
    values (JAX's default float dtype): their fitted values are not integers."""
    ints = [n for n in names if _is_integer(getattr(system, n))]
    if not ints:
        return system
    where = lambda s: [getattr(s, n) for n in ints]
    floats = [jnp.asarray(getattr(system, n), jnp.result_type(float)) for n in ints]
    return eqx.tree_at(where, system, floats)


def _strongly_typed(tree):
    """The same tree with weakly typed array leaves made strong (same dtype). An optimiser
    state whose first update turns weak leaves strong (optax's L-BFGS line-search info)
    would otherwise make the jitted step compile twice."""
    strong = lambda x: jnp.asarray(x, dtype=x.dtype) if getattr(x, "weak_type", False) else x
    return jax.tree_util.tree_map(strong, tree)


def _step_fn(objective, optimiser):
    value_and_grad = jax.value_and_grad(objective)

    @eqx.filter_jit
    def step(u, opt_state):
        value, grad = value_and_grad(u)
        updates, opt_state = optimiser.update(
            grad, opt_state, u, value=value, grad=grad, value_fn=objective
        )
        return optax.apply_updates(u, updates), opt_state, value, _tree_norm(grad)

    return step


class _Stopping(eqx.Module):
    gtol: float
    ftol: float
    patience: int = 3

    def check(self, losses: list[float], gnorm: float, small: int) -> tuple[str | None, int]:
        """(message if converged, updated count of small relative changes)."""
        if gnorm < self.gtol:
            return f"gradient norm {gnorm:.1e} < gtol", small
        if len(losses) > 1 and abs(losses[-2] - losses[-1]) <= self.ftol * max(
            abs(losses[-1]), 1e-300
        ):
            small += 1
            if small >= self.patience:
                return f"relative loss change < ftol for {self.patience} steps", small
            return None, small
        return None, 0


def _report(k, value, gnorm, params, t0):
    vals = ", ".join(
        f"{n}={np.array2string(np.asarray(v), precision=5)}" for n, v in params.items()
    )
    print(
        f"fit step {k:4d}  loss {value:.4e}  |grad| {gnorm:.2e}  {vals}  "
        f"({time.perf_counter() - t0:.1f} s)",
        file=sys.stderr,
        flush=True,
    )


def fit(
    system: System,
    loss: Callable[[System], jax.Array] | TrajectoryData,
    *,
    params: Sequence[str],
    positive: bool | Sequence[str] = True,
    optimiser: optax.GradientTransformation | None = None,
    max_steps: int = 200,
    gtol: float = 1e-9,
    ftol: float = 1e-10,
    progress: bool | int = True,
    **simulate_kwargs,
) -> FitResult:
    r"""Fit fields of `system` by minimising `loss(system)` with an optax optimiser.

    **Arguments:**

    - `system`: the model with initial guesses for the parameters.
    - `loss`: a function `system -> scalar`, or a :class:`TrajectoryData` (then
      :func:`trajectory_loss` is used, with `simulate_kwargs`).
    - `params`: names of the fields to fit (scalars or arrays); every other field is held
      fixed (this is the filter spec). A field written as an integer (`g: int = 10`) is
      fitted as a float from that value; a bool field cannot be fitted.
    - `positive`: `True` (all fitted fields are positive, the default for physical
      parameters), `False`, or the names of the positive ones. Positive fields are
      optimised as $\log\theta$, which also makes the steps relative (parameters of
      different magnitudes converge alike).
    - `optimiser`: any optax transformation; default `optax.lbfgs()` (quasi-Newton with a
      zoom line search; few steps on smooth least-squares problems). First-order ones
      such as `optax.adam(1e-2)` work too.
    - `max_steps`: bound on optimiser steps.
    - `gtol`: stop when the gradient norm (unconstrained parameters) falls below it.
    - `ftol`: stop when the relative loss decrease stays below it for 3 steps.
    - `progress`: print the loss every 10 steps (or every `progress` steps); `False` for
      silence.

    **Returns:** a :class:`FitResult`.

    Example:
        >>> import diffrax, jax, jax.numpy as jnp, ukjax
        >>> jax.config.update("jax_enable_x64", True)
        >>> from ukjax.systems import CartesianPendulum
        >>> ts = jnp.linspace(0.0, 1.0, 11)
        >>> true = CartesianPendulum(length=1.0, g=9.81)
        >>> sol = ukjax.simulate(true, jnp.array([0.6, -0.8]), jnp.zeros(2), ts)
        >>> data = ukjax.TrajectoryData(ts, sol.q[0], sol.qd[0], q=sol.q)
        >>> res = ukjax.fit(CartesianPendulum(length=1.0, g=8.0), data, params=["g"],
        ...                 progress=False, solver=diffrax.Tsit5(), rtol=1e-10, atol=1e-10)
        >>> round(float(res.params["g"]), 6), res.converged
        (9.81, True)
    """
    if isinstance(loss, TrajectoryData):
        loss_fn = trajectory_loss(loss, **_with_adjoint(loss, simulate_kwargs, reverse_only=True))
    elif simulate_kwargs:
        raise TypeError("simulate keyword arguments only apply when `loss` is TrajectoryData.")
    else:
        loss_fn = loss
    reparam = _reparametrisation(system, params, positive)
    optimiser = optax.lbfgs() if optimiser is None else optimiser
    step = _step_fn(lambda u: loss_fn(reparam.build(u)), optimiser)
    stopping = _Stopping(gtol, ftol)
    every = 10 if progress is True else int(progress)
    u = reparam.initial()
    opt_state = _strongly_typed(optimiser.init(u))
    losses: list[float] = []
    small, message, converged, gnorm = 0, f"max_steps={max_steps} reached", False, np.inf
    t0 = time.perf_counter()
    for k in range(max_steps):
        u_new, opt_state, value, gnorm = step(u, opt_state)
        value, gnorm = float(value), float(gnorm)
        if not np.isfinite(value):
            message = "loss became non-finite; try a smaller learning rate or a better start"
            break
        losses.append(value)
        if every and k % every == 0:
            _report(k, value, gnorm, reparam.params(u), t0)
        done, small = stopping.check(losses, gnorm, small)
        if done is not None:
            converged, message = True, done
            break
        u = u_new
    # `u` holds the parameters at which the last recorded loss and gradient were taken.
    return FitResult(
        reparam.build(u),
        reparam.params(u),
        losses[-1] if losses else float("nan"),
        np.asarray(losses),
        len(losses),
        converged,
        message,
        gnorm,
    )
