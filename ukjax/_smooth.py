r"""The smooth driver of :func:`ukjax.simulate`: one diffrax solve over the save times.

A run without contacts, impulses or latches is one `diffrax.diffeqsolve` of the run's
:class:`ukjax._field.Field` from `ts[0]` to `ts[-1]` (:meth:`ukjax._stepping.Stepping.solve`),
saved at `ts`. Its UK checks run either at every stage (raising from inside the solve:
`throw=True`) or as a diffrax event on every accepted step, which stops the run at the
first state that fails and names it (:meth:`SmoothDriver._result`). Its derivative is
the run's adjoint: the default :class:`ukjax.ReplayAdjoint` replays the accepted steps
through
:meth:`SmoothDriver.forward`, :meth:`SmoothDriver.step` and :meth:`SmoothDriver.save`.

Example (a pendulum in Cartesian coordinates through `simulate`, which builds this
driver for it):
    >>> import jax, jax.numpy as jnp, ukjax
    >>> jax.config.update("jax_enable_x64", True)
    >>> from ukjax.systems import CartesianPendulum
    >>> sol = ukjax.simulate(CartesianPendulum(), jnp.array([1.0, 0.0]), jnp.zeros(2),
    ...                      jnp.linspace(0.0, 1.0, 3))
    >>> float(jnp.abs(jnp.sum(sol.q[-1] ** 2) - 1.0)) < 1e-12
    True
"""

from __future__ import annotations

import dataclasses

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp

from ._adjoint import replays
from ._driver import AbstractDriver, refuse_initial
from ._field import Field
from ._initial import AbstractInitialConditions, InitialCheck
from ._results import RESULTS
from ._solution import Solution
from ._stage_loop import StageLoop, unrollable
from ._stepping import Stepping


class SmoothDriver(AbstractDriver):
    """One diffrax solve over `ts` (module docstring)."""

    field: Field
    initial: AbstractInitialConditions
    stepping: Stepping
    progress_meter: diffrax.AbstractProgressMeter

    def _event(self):
        """Stops a run whose initial state was refused or whose accepted state fails a UK
        check: the failure becomes the run's result code (which `throw=True` raises after
        the solve). None where nothing is to be watched: `throw=True` (whose refused
        initial state raised before the solve) with the checks off or in the field."""
        by_event = self.field.check and not self.field.per_stage
        if self.throw and not by_event:
            return None
        refused = lambda t, y, args, **kw: args
        failed = lambda t, y, args, **kw: self.field.failures(t, y).any()
        return diffrax.Event((refused, failed) if by_event else (refused,))

    def _result(self, sol, initial: InitialCheck, span) -> RESULTS:
        result = self.stepping.code(sol)
        if sol.event_mask is None:
            return result
        t_end, y_end = sol.ts[1][-1], sol.ys[1]  # pyright: ignore[reportOptionalSubscript]
        final = jax.tree_util.tree_map(lambda x: x[-1], y_end)
        result = RESULTS.where(sol.event_mask[0], initial.code, result)
        if len(sol.event_mask) < 2:
            return result
        fired = sol.event_mask[1]
        stalled = (result != RESULTS.successful) & ~sol.event_mask[0] & ~fired
        named, _ = self.field.end_code(t_end, final, span, fired, stalled)
        # (throw=True checks at every stage and has no failure event: it never gets here)
        return RESULTS.where(fired | (named != RESULTS.successful), named, result)

    def _saveat(self, ts, record: bool) -> diffrax.SaveAt:
        """Saves at `ts` (through the stabilisation's save function); with the run-time
        event, also the final state (it names the failure the event caught); when
        `record`, also every accepted step (for :func:`ukjax._adjoint.replay_solve`).
        Without the last two, a plain SaveAt: diffrax's BacksolveAdjoint refuses
        SaveAt(subs=...)."""
        fn = self.stepping.save_fn(self.field)
        extra = [] if self._event() is None else [diffrax.SubSaveAt(t1=True)]
        extra += [diffrax.SubSaveAt(steps=True)] if record else []
        if not extra:
            return diffrax.SaveAt(ts=ts) if fn is None else diffrax.SaveAt(ts=ts, fn=fn)
        return diffrax.SaveAt(subs=[self.stepping.saves(self.field, ts), *extra])

    def _replay_solver(self) -> diffrax.AbstractSolver:
        """The solver :meth:`step` replays: the run's method in a :class:`ukjax.StageLoop`
        where it can be (an explicit Runge-Kutta method of one tableau), the same method
        and dense output. Differentiating diffrax's own stage loop (a checkpointed while
        loop) evaluates every stage's vector field again in the backward pass, one step
        at a time, before transposing it; the StageLoop's `fori_loop` keeps the stages'
        residuals from the batched replay instead (`benchmarks/RESULTS.md`, gradients
        section)."""
        solver = self.stepping.solver
        return self.stepping.wrap(self.field, StageLoop(solver) if unrollable(solver) else solver)

    def forward(self, y0, ts, args, record: bool):
        """The diffrax solve from `y0` at `ts[0]`, saved at `ts`; with `record`, also the
        accepted steps' end times and states (see :class:`ukjax.ReplayAdjoint`)."""
        sol = self.stepping.solve(
            self.field,
            ts[0],
            ts[-1],
            y0,
            args,
            self._saveat(ts, record),
            self._event(),
            adjoint=diffrax.RecursiveCheckpointAdjoint() if record else None,
            progress_meter=self.progress_meter,
        )
        if not record:
            return sol, None
        *ts_, steps_t = sol.ts  # pyright: ignore[reportGeneralTypeIssues]
        *ys_, steps_y = sol.ys  # pyright: ignore[reportGeneralTypeIssues]
        one = len(ts_) == 1
        sol = eqx.tree_at(
            lambda s: (s.ts, s.ys), sol, (ts_[0] if one else ts_, ys_[0] if one else ys_)
        )
        return sol, (steps_t, steps_y)

    def step(self, t0, t1, y0, args):
        """One step of the run's solver from (t0, y0) to t1, its first stage evaluated at
        y0 (`made_jump`): the new state and the step's dense output. The UK checks are
        off: this replays a step the forward run took (and checked)."""
        terms = diffrax.ODETerm(dataclasses.replace(self.field, check=False))
        solver = self._replay_solver()
        state = solver.init(terms, t0, t1, y0, args)
        y1, _, dense, _, _ = solver.step(terms, t0, t1, y0, args, state, True)
        return y1, dense

    def save(self, t0, t1, dense, t, args):
        """The value saved at t in [t0, t1] from the step's dense output."""
        y = self._replay_solver().interpolation_cls(t0=t0, t1=t1, **dense).evaluate(t)
        fn = self.stepping.save_fn(self.field)
        return y if fn is None else fn(t, y, args)

    def integrate(self, q0, qd0, ts, initial: InitialCheck) -> Solution:
        refused = initial.code != RESULTS.successful
        q0 = refuse_initial(self.throw and not initial.checked, q0, initial.code, **initial.values)
        stepping = self.stepping
        if replays(stepping.adjoint, stepping.solver, stepping.max_steps):
            sol = stepping.adjoint.solve(self, (q0, qd0), ts, refused)  # pyright: ignore[reportAttributeAccessIssue]
        else:
            sol = self.forward((q0, qd0), ts, refused, False)[0]
        result = self._result(sol, initial, jnp.abs(ts[-1] - ts[0]))
        if self._event() is None:
            saved_ts, saved = sol.ts, sol.ys
        else:
            saved_ts, saved = sol.ts[0], sol.ys[0]  # pyright: ignore[reportOptionalSubscript]
        reached = jnp.isfinite(saved_ts)[:, None]  # pyright: ignore[reportArgumentType]
        q, qd = (jnp.where(reached, x, jnp.nan) for x in saved)  # pyright: ignore[reportOptionalIterable]
        return Solution(ts=ts, q=q, qd=qd, result=result, stats=sol.stats)
