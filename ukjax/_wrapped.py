r"""Stalled runs: diffrax solvers that wrap another one (a base that forwards everything),
the guard that ends a run whose step size has collapsed, and the probe that names the
failure it collapsed onto.

Why a guard: diffrax's adaptive controllers (without `dtmin`) shrink a rejected step
without bound. A run whose every step past some time is rejected (the right-hand side is
non-finite there: a mass matrix losing definiteness, a force leaving its domain) closes in
on that time and then takes steps that no longer advance $t$ until `max_steps`, 100 000
evaluations of nothing. scipy's `solve_ivp` stops when $h < 10\,|\mathrm{nextafter}(t) -
t|$; :class:`StallGuard` does the same, returning diffrax's `dt_min_reached` for an
accepted step shorter than 10 units in the last place of $t$ (a step diffrax's own
clipping to $t_1$ never makes, see `diffrax._integrate._clip_to_end`).

Example:
    >>> import diffrax
    >>> from ukjax._wrapped import StallGuard
    >>> StallGuard(diffrax.Tsit5()).order(None)
    5
"""

from __future__ import annotations

from typing import Any

import diffrax
import equinox.internal as eqxi
import jax
import jax.numpy as jnp

from ._results import RESULTS


STALL_ULPS = 10  # scipy's rule: a step shorter than 10 ulp of t ends the run


class ForwardingSolver(diffrax.AbstractWrappedSolver):
    """A wrapped solver that behaves as `wrapped` unless a subclass overrides `step`.

    diffrax forwards `isinstance` checks (implicit? adaptive?) to `.solver`, one level
    deep; a wrapper around another wrapper therefore names the innermost solver there
    and forwards its work to `wrapped`."""

    @property
    def wrapped(self) -> diffrax.AbstractSolver:
        return self.solver

    @property
    def term_structure(self):
        return self.wrapped.term_structure

    # diffrax forwards `isinstance` checks to the wrapped solver, then reads (and
    # `eqx.tree_at`-replaces) these attributes on the wrapper: implicit solvers' root
    # finder (its tolerances come from the step-size controller) and Runge-Kutta solvers'
    # scan kind (set by the adjoint). Forwarding them keeps every solver usable.
    @property
    def root_finder(self):
        return self.wrapped.root_finder  # pyright: ignore[reportAttributeAccessIssue]

    @property
    def scan_kind(self):
        return self.wrapped.scan_kind  # pyright: ignore[reportAttributeAccessIssue]

    @property
    def interpolation_cls(self):  # pyright: ignore[reportIncompatibleVariableOverride]
        return self.wrapped.interpolation_cls

    @property
    def term_compatible_contr_kwargs(self):
        return self.wrapped.term_compatible_contr_kwargs

    def order(self, terms):
        return self.wrapped.order(terms)

    def strong_order(self, terms):
        return self.wrapped.strong_order(terms)

    def error_order(self, terms):
        return self.wrapped.error_order(terms)

    def init(self, terms, t0, t1, y0, args):
        return self.wrapped.init(terms, t0, t1, y0, args)

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        return self.wrapped.step(terms, t0, t1, y0, args, solver_state, made_jump)

    def func(self, terms, t0, y0, args):
        return self.wrapped.func(terms, t0, y0, args)


class StallGuard(ForwardingSolver):
    r"""`wrapped`, but a step from $t_0$ to $t_1$ with
    $t_1 - t_0 \le 10\,\varepsilon\max(|t_0|, |t_1|)$ returns `dt_min_reached` (diffrax
    keeps a step's code only when the step is accepted, so the run ends at the first
    accepted step that did not move $t$)."""

    inner: diffrax.AbstractSolver

    @property
    def solver(self):  # pyright: ignore[reportIncompatibleVariableOverride]
        solver = self.inner
        while isinstance(solver, ForwardingSolver):
            solver = solver.solver
        return solver

    @property
    def wrapped(self) -> diffrax.AbstractSolver:
        return self.inner

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        y1, y_error, dense, state, result = self.inner.step(
            terms, t0, t1, y0, args, solver_state, made_jump
        )
        t0_, t1_ = jnp.asarray(t0), jnp.asarray(t1)
        eps = jnp.finfo(jnp.result_type(t0_, t1_, float)).eps
        small = t1_ - t0_ <= STALL_ULPS * eps * jnp.maximum(jnp.abs(t0_), jnp.abs(t1_))
        stalled = small & (result == diffrax.RESULTS.successful)
        result = diffrax.RESULTS.where(stalled, diffrax.RESULTS.dt_min_reached, result)
        return y1, y_error, dense, state, result


def guards(controller: diffrax.AbstractStepSizeController) -> bool:
    """Whether a run under `controller` is guarded against a collapsed step size: an
    adaptive controller without a `dtmin` of its own (which reports its own code)."""
    fixed = (diffrax.ConstantStepSize, diffrax.StepTo)
    return not isinstance(controller, fixed) and getattr(controller, "dtmin", None) is None


def guard(solver: diffrax.AbstractSolver, controller) -> diffrax.AbstractSolver:
    """`solver` wrapped in a :class:`StallGuard` where `controller` :func:`guards`."""
    return StallGuard(solver) if guards(controller) else solver  # pyright: ignore[reportCallIssue]


def name_collapse(result: RESULTS, controller) -> RESULTS:
    """`step_size_collapsed` for the guard's `dt_min_reached` (a `dtmin` of the user's
    keeps diffrax's code)."""
    if not guards(controller):
        return result
    return RESULTS.where(result == RESULTS.dt_min_reached, RESULTS.step_size_collapsed, result)


PROBES = 14  # states probed at the end of a failed run (s = 0 and 13 steps ahead)


def probe_failures(failures_at, qdd_at, t, y, span, when) -> tuple[Any, Any]:
    r"""The checks (:class:`ukjax._uk.Failures`) at the state (t, y) where a run ended
    and at the first failing state just ahead of it along the tangent,
    $(t + s,\ q + s\dot q,\ \dot q + s\ddot q)$ for $s$ from $4\varepsilon$ to
    $\sqrt\varepsilon$ times $\max(|t|, \text{span})$ (the state itself if none fails;
    nothing failing anywhere where no member of a batch has `when` set: the branch is
    skipped). The codes are `.code()` of each; their numbers are what a raised error
    prints.

    Why: the checks run at accepted states only (the run's failure event). A state that
    fails them ahead of the trajectory makes every stage past it non-finite, so every
    step into it is rejected and the step size collapses onto it (:class:`StallGuard`
    ends the run there); the states just ahead name the check. `failures_at(t, (q, qd))`
    gives the checks at one state, evaluated once batched over the 14 states;
    `qdd_at(t, (q, qd))` the acceleration (a NaN one, at a failing state, is taken as
    zero)."""

    def probe(_):
        qdd = qdd_at(t, y)
        qdd = jnp.where(jnp.isfinite(qdd), qdd, 0.0)
        eps = jnp.finfo(qdd.dtype).eps
        scale = jnp.maximum(jnp.abs(t), span)
        s = scale * jnp.geomspace(4 * eps, eps**0.5, PROBES - 1, dtype=qdd.dtype)
        s = jnp.concatenate([jnp.zeros(1, qdd.dtype), s])
        found = jax.vmap(lambda s: failures_at(t + s, (y[0] + s * y[1], y[1] + s * qdd)))(s)
        first = jnp.argmax(found.any())  # the nearest failing state (0 if none)
        at = lambda i: jax.tree_util.tree_map(lambda c: c[i], found)
        return at(0), at(first)

    def none(_):
        shapes = jax.eval_shape(failures_at, t, y)
        nothing = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
        return nothing, nothing

    return jax.lax.cond(eqxi.unvmap_any(when), probe, none, None)
