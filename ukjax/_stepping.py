r"""How a run steps through time: the one diffrax solve of the smooth driver and of every
segment of the event-driven one.

A :class:`Stepping` holds the method, the step-size control, the first step, the adjoint
and the step bound of a run, and does what both drivers need of them: the solver that is
run (the stabilisation's wrapper and the stall guard around the user's method), the saves
at the requested times (through the stabilisation's save function), the
`diffrax.diffeqsolve` call itself, and the naming of its result code (a collapsed step
size, an explicit method that runs out of steps on a stiff problem).
"""

from __future__ import annotations

from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp

from ._field import Field
from ._results import RESULTS, promote
from ._stage_loop import StageLoop, unrollable
from ._wrapped import guard, guards, name_collapse


def _explicit(solver) -> bool:
    inner = getattr(solver, "solver", solver)
    return not isinstance(inner, diffrax.AbstractImplicitSolver)


class Lookahead(diffrax.AbstractStepSizeController):
    """An adaptive step-size controller whose steps are also bounded by `horizon(t, y,
    args)`, the longest step that cannot carry an event function over a zero and back
    unseen (diffrax looks for sign changes at the ends of steps only). The event-driven
    driver bounds its steps by each approaching free contact's linearly predicted time to
    touch, so that a ball rolling at constant speed (ever longer steps, by the error
    estimate) does not pass through another. `inner` does the rest."""

    inner: diffrax.AbstractStepSizeController
    horizon: Callable

    def wrap(self, direction):
        return Lookahead(self.inner.wrap(direction), self.horizon)

    def _bound(self, t0, t1, y, args):
        h = jax.lax.stop_gradient(self.horizon(t0, y, args))
        return jnp.minimum(t1, t0 + h.astype(jnp.result_type(t1)))

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        t_next, state = self.inner.init(terms, t0, t1, y0, dt0, args, func, error_order)
        return self._bound(t0, t_next, y0, args), state

    def adapt_step_size(self, t0, t1, y0, y1_candidate, args, y_error, error_order, state):
        keep, next_t0, next_t1, jump, state, result = self.inner.adapt_step_size(
            t0, t1, y0, y1_candidate, args, y_error, error_order, state
        )
        y = jax.tree_util.tree_map(lambda a, b: jnp.where(keep, a, b), y1_candidate, y0)
        return keep, next_t0, self._bound(next_t0, next_t1, y, args), jump, state, result


MIN_LOOPED_STAGES = 8  # explicit methods from this many stages run in a StageLoop


def _many_stages(solver: diffrax.AbstractSolver) -> bool:
    """Whether `solver` runs in a :class:`ukjax.StageLoop` (:meth:`Stepping.wrap`)."""
    return unrollable(solver) and len(solver.tableau.c) + 1 >= MIN_LOOPED_STAGES  # pyright: ignore[reportAttributeAccessIssue]


class Stepping(eqx.Module):
    """The integration settings of a run and the diffrax solve they make (module docstring).

    Example:
        >>> import jax, jax.numpy as jnp, diffrax, ukjax
        >>> jax.config.update("jax_enable_x64", True)
        >>> from ukjax._field import Field
        >>> from ukjax._stepping import Stepping
        >>> from ukjax.systems import CartesianPendulum
        >>> field = Field(CartesianPendulum(), ukjax.NoStabilization(), ukjax.Regularized(),
        ...               check=False, consistency_tol=None, throw=False)
        >>> stepping = Stepping(diffrax.Dopri8(), diffrax.PIDController(rtol=1e-10, atol=1e-10),
        ...                     None, diffrax.RecursiveCheckpointAdjoint(), 1000)
        >>> ts = jnp.linspace(0.0, 1.0, 3)
        >>> y0 = (jnp.array([1.0, 0.0]), jnp.zeros(2))
        >>> sol = stepping.solve(field, ts[0], ts[-1], y0, None,
        ...                      diffrax.SaveAt(subs=[stepping.saves(field, ts)]), None)
        >>> stepping.code(sol) == ukjax.RESULTS.successful
        Array(True, dtype=bool)
    """

    solver: diffrax.AbstractSolver
    stepsize_controller: diffrax.AbstractStepSizeController
    dt0: float | None
    adjoint: diffrax.AbstractAdjoint
    max_steps: int | None = eqx.field(static=True)

    def wrap(self, field: Field, solver: diffrax.AbstractSolver | None = None):
        """`solver` (default the run's) as it runs: an explicit Runge-Kutta method of one
        tableau and more than 7 stages (the default `Dopri8`) in a :class:`ukjax.StageLoop`
        (the same method, its stages in a loop of sums: faster in single runs and under
        `jax.vmap` alike; for shorter methods, RK4 and Dopri5, it was not in every case,
        `benchmarks/RESULTS.md`), inside the field's stabilisation wrapper and the stall
        guard (:func:`ukjax._wrapped.guard`)."""
        solver = self.solver if solver is None else solver
        solver = StageLoop(solver) if _many_stages(solver) else solver
        solver = field.stabilization.wrap_solver(solver, field.system)
        return guard(solver, self.stepsize_controller)

    def save_fn(self, field: Field):
        """The stabilisation's save function (None: the state as it is)."""
        return field.stabilization.save_fn(field.system)

    def saves(self, field: Field, ts) -> diffrax.SubSaveAt:
        """Saves at `ts` through :meth:`save_fn`."""
        fn = self.save_fn(field)
        return diffrax.SubSaveAt(ts=ts) if fn is None else diffrax.SubSaveAt(ts=ts, fn=fn)

    def solve(
        self,
        field: Field,
        t0,
        t1,
        y0,
        args,
        saveat: diffrax.SaveAt,
        event: diffrax.Event | None,
        adjoint: diffrax.AbstractAdjoint | None = None,
        progress_meter: diffrax.AbstractProgressMeter | None = None,
        horizon: Callable | None = None,
    ):
        """`diffrax.diffeqsolve` of `field` from (t0, y0) to t1 with the run's settings
        (`adjoint` overrides the run's), never raising (`throw=False`): the drivers name
        and raise the result themselves. With an adaptive controller, `horizon(t, y,
        args)` bounds every step (:class:`Lookahead`)."""
        controller = self.stepsize_controller
        if horizon is not None and guards(controller):
            controller = Lookahead(controller, horizon)
        return diffrax.diffeqsolve(
            diffrax.ODETerm(field),
            self.wrap(field),
            t0=t0,
            t1=t1,
            dt0=self.dt0,
            y0=y0,
            args=args,
            saveat=saveat,
            stepsize_controller=controller,
            adjoint=self.adjoint if adjoint is None else adjoint,
            event=event,
            max_steps=self.max_steps,
            throw=False,
            progress_meter=diffrax.NoProgressMeter() if progress_meter is None else progress_meter,
        )

    def code(self, sol) -> RESULTS:
        """The solve's result as a ukjax code: a step size collapsed to round-off named
        (:func:`ukjax._wrapped.name_collapse`), and for an explicit method a step bound
        reached with many rejected steps named stiff (else the bound itself)."""
        result = name_collapse(promote(sol.result), self.stepsize_controller)
        if not _explicit(self.solver):
            return result
        steps, rejected = sol.stats["num_steps"], sol.stats["num_rejected_steps"]
        stiff = RESULTS.where(
            rejected > 0.2 * steps, RESULTS.max_steps_stiff, RESULTS.max_steps_explicit
        )
        return RESULTS.where(result == RESULTS.max_steps_reached, stiff, result)
