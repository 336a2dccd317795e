r"""Reverse-mode gradients of a smooth run by replaying its accepted steps.

A run of an explicit Runge-Kutta method is the composition of its accepted steps,
$y_{k+1} = \Phi(y_k;\, t_k, t_{k+1}, \theta)$, $k = 0 \dots K-1$, and each save is the
method's dense output on the step that contains it,
$y(s_j) = I(y_k, \kappa_k;\, s_j)$ with $\kappa_k$ the step's stages. The step sizes come
from the controller, which diffrax keeps out of the derivative (its step-size factor is
under `stop_gradient`), so the discrete derivative of the saves with respect to the
parameters $\theta$ and the initial state is the backward recursion

$$\bar y_k = \Big(\frac{\partial \Phi}{\partial y_k}\Big)^{\!\top} \bar y_{k+1}
  + \sum_{s_j \in (t_k, t_{k+1}]} \Big(\frac{\partial I}{\partial y_k}\Big)^{\!\top} \bar y(s_j),
\qquad
\bar\theta \mathrel{+}= \Big(\frac{\partial \Phi}{\partial \theta}\Big)^{\!\top} \bar y_{k+1}
  + \dots$$

(the discrete adjoint of the Runge-Kutta scheme: W. W. Hager, *Runge-Kutta methods in
optimal control and the transformed adjoint system*, Numer. Math. 87 (2000); A. Sandu, *On
the properties of Runge-Kutta discrete adjoints*, ICCS 2006), the same derivative
diffrax's `RecursiveCheckpointAdjoint` computes. Diffrax gets it by re-running its whole
integration loop from checkpoints and transposing it (the step, the error estimate, the
controller, the save bookkeeping). :class:`ReplayAdjoint` stores the accepted states $y_k$
and times $t_k$ during the forward run (O(`max_steps` x state) memory) and transposes only
the steps: one `jax.vjp` of $\Phi$ (and of $I$ at the saves it holds) per accepted step,
in reverse order.
"""

from __future__ import annotations

import abc
from typing import Any, Protocol

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
from jax import lax

from ._batching import any_member
from ._xla import traced_once


# Steps replayed in one batch (their forward passes are independent given the stored
# states, so they run as one vmap; their transposes then run in sequence). Chosen on the
# chains of benchmarks/gradients.py (benchmarks/RESULTS.md, gradients section): larger
# batches gained little, and 16 keeps the batch's residuals small.
_CHUNK = 16

# The default adjoint replays when the stored states take at most DEFAULT_BUDGET bytes per
# trajectory (max_steps x state size x itemsize) and, for a batch whose size the caller
# knows (`ukjax.predict` and `fit` over several trajectories), BATCH_BUDGET in all;
# diffrax's checkpointed loop (under 1 MiB at 100 000 steps on the 5-link chain) otherwise.
# 64 MiB holds 100 000 (the default max_steps) states of 83 float64 numbers: a planar chain
# of 20 links replays by default (its cost against the checkpointed loop:
# benchmarks/RESULTS.md, gradients section).
DEFAULT_BUDGET = 2**26
BATCH_BUDGET = 2**28


class AbstractReplayAdjoint(diffrax.AbstractAdjoint):
    """An adjoint that differentiates a smooth run through its recorded accepted steps
    (:func:`replays` says where one applies); :meth:`solve` runs it. Where it does not
    apply (hybrid runs, implicit solvers, `max_steps=None`) it behaves as
    `diffrax.RecursiveCheckpointAdjoint()`."""

    @abc.abstractmethod
    def solve(self, run: "Replayable", y0, ts, args) -> diffrax.Solution:
        """`run.forward(y0, ts, args)`'s solution, differentiable as this adjoint says."""

    def loop(self, **kwargs):
        return diffrax.RecursiveCheckpointAdjoint().loop(**kwargs)


class ReplayAdjoint(AbstractReplayAdjoint):
    r"""Derivatives of :func:`ukjax.simulate` in every autodiff mode through the
    tangent-linear recursion of the accepted steps (the default for smooth runs with an
    explicit Runge-Kutta solver).

    The run's solution is a `jax.custom_jvp` function whose derivative rule records the
    accepted states and sweeps the recursion $\dot y_{k+1} = \partial_y\Phi\,\dot
    y_k + \partial_\theta\Phi\,\dot\theta$ over them (see :mod:`ukjax._adjoint`), in
    loops of fixed length whose blocks past the last step are skipped. Forward mode
    (`jax.jvp`, `jax.jacfwd`) evaluates it. Reverse mode (`jax.grad`, `jax.vjp`) runs
    the batched backward replay of :class:`ReverseReplayAdjoint`, given to JAX as the
    transpose of the sweep (the rule's tangent is a `lax.custom_linear_solve` whose
    transposed solve is that replay), so it costs what the reverse-only replay costs;
    second derivatives (`jax.hessian`) differentiate the rule again. So `jax.jit`,
    `jax.vmap` and every autodiff transformation compose with `simulate` in any order and
    give the same derivative: the discrete derivative of the Runge-Kutta scheme, which
    diffrax's `RecursiveCheckpointAdjoint` also computes (to round-off).

    Memory: `max_steps` x the state size, allocated when a derivative is taken.
    `simulate`'s default uses it only within 64 MiB per trajectory (else
    `diffrax.RecursiveCheckpointAdjoint()`, reverse mode only). Derivatives with respect
    to the save times `ts` need `diffrax.RecursiveCheckpointAdjoint()`.

    Example:
        >>> import jax, jax.numpy as jnp, ukjax
        >>> jax.config.update("jax_enable_x64", True)
        >>> from ukjax.systems import CartesianPendulum
        >>> ts = jnp.linspace(0.0, 0.5, 3)
        >>> def height(g):
        ...     sol = ukjax.simulate(CartesianPendulum(g=g), jnp.array([1.0, 0.0]),
        ...                          jnp.zeros(2), ts)
        ...     return sol.q[-1, 1]
        >>> slope = jax.jacfwd(jax.jit(height))(9.81)  # or jax.grad, jax.jvp, jax.hessian
        >>> h = 1e-4  # against central differences of two forward solves
        >>> central = (height(9.81 + h) - height(9.81 - h)) / (2 * h)
        >>> bool(jnp.allclose(slope, central, rtol=1e-7, atol=0.0))
        True

    (tests/test_adjoint.py compares it with diffrax's checkpointed gradients and checks
    every order of transformations.)
    """

    def solve(self, run, y0, ts, args) -> diffrax.Solution:
        return replay_solve(run, y0, ts, args)


class ReverseReplayAdjoint(AbstractReplayAdjoint):
    r"""Reverse-mode gradients of :func:`ukjax.simulate` by replaying the accepted steps
    backwards (a `jax.custom_vjp`): the forward run stores every accepted state; the
    backward pass forms the pullbacks of a block of 16 steps as one batch, then applies
    them in reverse order (see :mod:`ukjax._adjoint` for the maths). The same gradient as
    :class:`ReplayAdjoint` at a lower cost (`benchmarks/RESULTS.md`), in reverse mode
    only: `jax.jvp`, `jax.jacfwd` and `jax.hessian` raise JAX's error about custom VJPs.
    :func:`ukjax.fit` uses it.

    Example (the gradient of a pendulum's final angle with respect to its initial one):
        >>> import jax, jax.numpy as jnp, ukjax
        >>> jax.config.update("jax_enable_x64", True)
        >>> from ukjax.systems import SimplePendulum
        >>> run = lambda a: ukjax.simulate(SimplePendulum(), jnp.reshape(a, 1), jnp.zeros(1),
        ...                                jnp.array([0.0, 0.3]),
        ...                                adjoint=ukjax.ReverseReplayAdjoint()).q[-1, 0]
        >>> slope, eps = jax.grad(run)(0.2), 1e-4
        >>> bool(jnp.allclose(slope, (run(0.2 + eps) - run(0.2 - eps)) / (2 * eps), rtol=1e-7))
        True
    """

    def solve(self, run, y0, ts, args) -> diffrax.Solution:
        return reverse_replay_solve((run, y0, ts), args)


def default_adjoint(
    max_steps: int | None, y0, batch: int = 1, reverse_only: bool = False
) -> diffrax.AbstractAdjoint:
    """The adjoint of a smooth run when none is given: :class:`ReplayAdjoint` (or, for a
    caller that only takes reverse-mode gradients, `reverse_only`,
    :class:`ReverseReplayAdjoint`) when its recorded states fit the budgets
    (:data:`DEFAULT_BUDGET` bytes per trajectory, :data:`BATCH_BUDGET` for a `batch` the
    caller knows), else `diffrax.RecursiveCheckpointAdjoint()` (reverse mode only).
    Decided by shapes alone, so a run compiles to the same program however it is
    transformed."""
    if max_steps is None:
        return diffrax.RecursiveCheckpointAdjoint()
    stored = max_steps * sum(x.size * x.dtype.itemsize for x in jax.tree_util.tree_leaves(y0))
    if stored <= DEFAULT_BUDGET and stored * batch <= BATCH_BUDGET:
        return ReverseReplayAdjoint() if reverse_only else ReplayAdjoint()
    return diffrax.RecursiveCheckpointAdjoint()


def replays(adjoint, solver: diffrax.AbstractSolver, max_steps: int | None) -> bool:
    """Whether a run takes its gradient by :func:`replay_solve`: `adjoint` is a
    :class:`ReplayAdjoint`, the run is bounded (the stored states need `max_steps`), and a
    step of `solver` depends on its start state alone (with `made_jump`, its first stage
    re-evaluated), so that the stored run can be replayed one step at a time."""
    return (
        isinstance(adjoint, AbstractReplayAdjoint)
        and max_steps is not None
        and isinstance(solver, (diffrax.AbstractERK, diffrax.Euler))
    )


class Replayable(Protocol):
    """What a run offers :func:`replay_solve`: its forward solve, and one step of it."""

    def forward(self, y0, ts, args, record: bool) -> tuple[diffrax.Solution, Any]:
        """The diffrax solution at the saves, and (when `record`) the accepted steps'
        end times and states (max_steps long, padded with inf)."""
        ...

    def step(self, t0, t1, y0, args) -> tuple[Any, Any]:
        """One step from (t0, y0) to t1: the new state and the step's dense output."""
        ...

    def save(self, t0, t1, dense, t, args) -> Any:
        """The saved value at t in [t0, t1] from the step's dense output."""
        ...


def _is_none(x) -> bool:
    return x is None


def _pick(cond, a, b):
    return jtu.tree_map(lambda x, y: jnp.where(cond, x, y), a, b)


class _Sweep(eqx.Module):
    """The tangent-linear recursion of a recorded run (module docstring): the tangents
    of the accepted states, and of the saves, for tangents `t_diff` of the run's
    differentiated leaves `diff` and `t_y0` of the initial state.

    The steps run in fixed-length loops (blocks of blocks of :data:`_CHUNK` steps), each
    block a `lax.cond` that is skipped once it lies past the run's last step (for a batch:
    past every member's), so that reverse mode transposes them; each step's primal is
    rematerialised (`jax.checkpoint`), so the transposed sweep keeps only the recorded
    states."""

    diff: Any
    static: Any
    y0: Any
    ts: jax.Array
    args: Any
    step_ts: jax.Array
    step_ys: Any
    count: jax.Array  # the number of steps taken
    save_steps: jax.Array  # the step each save is interpolated on (the first ending at/after it)

    def _start(self, k):
        """(t, y) at the start of step k, and whether step k was taken. A step not taken
        (k past the last) reads as a zero-length step at the initial state, so that
        every value the transposed sweep computes stays finite."""
        taken = k < self.count
        prev = jnp.clip(k - 1, 0, self.step_ts.shape[0] - 1)
        first = (k == 0) | ~taken
        ta = jnp.where(first, self.ts[0], self.step_ts[prev])
        ya = _pick(first, self.y0, jtu.tree_map(lambda x: x[prev], self.step_ys))
        tb = jnp.where(taken, self.step_ts[jnp.minimum(k, self.step_ts.shape[0] - 1)], ta)
        return taken, ta, tb, ya

    def _one(self, carry, x, t_diff, stack: bool):
        """Step k of the sweep (`x` = (k, its start time, end time and start state)):
        the tangent of its end state from that of its start (`jax.jvp` of the step,
        rematerialised in reverse mode from the start state), and the start tangent kept
        for the saves interpolated on it."""
        dy, at_saves = carry
        k, ta, tb, ya = x
        taken = k < self.count
        here = (self.save_steps == k)[:, None]
        at_saves = jtu.tree_map(lambda s, d: jnp.where(here, d, s), at_saves, dy)
        step = lambda d, y: eqx.combine(d, self.static).step(ta, tb, y, self.args)[0]
        remat = jax.checkpoint(step)  # pyright: ignore[reportPrivateImportUsage]
        _, dy1 = jax.jvp(remat, (self.diff, ya), (t_diff, dy))
        dy1 = _pick(taken, dy1, dy)
        row = _pick(taken, dy1, jtu.tree_map(jnp.zeros_like, dy1)) if stack else None
        return (dy1, at_saves), row

    def _steps(self, shape: tuple[int, int, int]):
        """(k, start time, end time, start state) of every step (:meth:`_start`), padded
        to outer x middle x inner rows and laid out in those blocks."""
        k = jnp.arange(shape[0] * shape[1] * shape[2])
        _, ta, tb, ya = jax.vmap(self._start)(k)
        block = lambda x: x.reshape(shape + x.shape[1:])
        return jtu.tree_map(block, (k, ta, tb, ya))

    def run(self, t_diff, t_y0, stack: bool):
        """The sweep: (the tangent after the last step, the tangent at the start of each
        save's step, and with `stack` the tangents of the recorded states). The steps'
        data are the loops' inputs (not read from the record inside them), so that
        reverse mode keeps them as they are instead of a copy per block."""
        size = self.step_ts.shape[0]
        inner = min(_CHUNK, size)
        middle = min(_CHUNK, -(-size // inner))
        outer = -(-size // (inner * middle))
        at_saves = jtu.tree_map(lambda x: jnp.zeros(self.ts.shape + x.shape, x.dtype), t_y0)
        like = t_y0 if stack else None

        def steps(c, xs):  # `inner` steps
            return lax.scan(lambda c, x: self._one(c, x, t_diff, stack), c, xs)

        def chunks(c, xs):  # `middle` chunks of steps
            return lax.scan(self._skipping(steps, (inner,), like), c, xs)

        body = self._skipping(chunks, (middle, inner), like)
        xs = self._steps((outer, middle, inner))
        (dy, at_saves), stacked = lax.scan(body, (t_y0, at_saves), xs)
        if stack:
            stacked = jtu.tree_map(lambda x: x.reshape((-1,) + x.shape[3:])[:size], stacked)
        return dy, at_saves, stacked

    def _skipping(self, run, shape: tuple[int, ...], like):
        """`run(carry, xs)` (a block of steps, stacking `shape` rows like `like`),
        skipped once its first step is past the last step taken."""

        def skip(c, xs):
            return c, jtu.tree_map(lambda x: jnp.zeros(shape + x.shape, x.dtype), like)

        def body(c, xs):
            first = jnp.ravel(xs[0])[0]
            return lax.cond(any_member(first < self.count), run, skip, c, xs)

        return body

    def saves(self, t_diff, at_saves):
        """The tangents of the saves at `ts` from the tangents at the start of their steps
        (`at_saves`): save j is the dense output of its step, re-run from the step's
        start state (zeros where the run did not reach it)."""

        def one(k, t, dya):
            taken, ta, tb, ya = self._start(k)
            tb = jnp.where(taken, tb, ta + 1.0)  # a step not taken: keep h > 0
            t = jnp.where(taken, t, ta)

            def save(d, y):
                run = eqx.combine(d, self.static)
                _, dense = run.step(ta, tb, y, self.args)
                return run.save(ta, tb, dense, t, self.args)

            remat = jax.checkpoint(save)  # pyright: ignore[reportPrivateImportUsage]
            _, dsave = jax.jvp(remat, (self.diff, ya), (t_diff, dya))
            return jtu.tree_map(lambda x: jnp.where(taken, x, jnp.zeros_like(x)), dsave)

        return jax.vmap(one)(self.save_steps, self.ts, at_saves)


def differentiated(run, t_run):
    """`run` split into its leaves that carry a tangent and the rest."""
    has = jtu.tree_map(lambda t: t is not None, t_run, is_leaf=_is_none)
    return eqx.partition(run, has)


def _refuse_ts(perturbed: bool, name: str) -> None:
    """A ValueError when the save times `ts` are differentiated (`perturbed`): neither
    replay differentiates with respect to them."""
    if perturbed:
        raise ValueError(
            f"ukjax.{name} does not differentiate with respect to the save times ts: "
            "pass adjoint=diffrax.RecursiveCheckpointAdjoint() to simulate."
        )


def _sweep(primals, tangents, steps):
    """The sweep of a recorded run, and the tangents of its inputs with zeros for
    symbolic zeros."""
    run, y0, ts, args = primals
    t_run, t_y0, t_ts, _ = tangents
    _refuse_ts(t_ts is not None, "ReplayAdjoint (the default adjoint of a smooth run)")
    diff, static = differentiated(run, t_run)
    t_diff = t_run  # None exactly where `diff` is: the tangents of `diff`
    step_ts, step_ys = steps
    count = jnp.sum(jnp.isfinite(step_ts))
    save_steps = jnp.searchsorted(step_ts, ts, side="left")
    sweep = _Sweep(diff, static, y0, ts, args, step_ts, step_ys, count, save_steps)
    t_y0 = _cotangent(t_y0, y0)  # symbolic zeros (None) as zero arrays
    return sweep, t_diff, t_y0


def _ys_tangent(sweep: _Sweep, t_diff, t_y0, like, stack: bool):
    """The tangent of a solution's `ys` (structured as `like`: the saves, and with the
    failure event the final state) from the sweep; with `stack`, also the tangents of the
    recorded states."""
    final, at_saves, stacked = sweep.run(t_diff, t_y0, stack)
    t_saves = sweep.saves(t_diff, at_saves)
    if isinstance(like, list):  # [saves at ts, the final state]
        return [t_saves, jtu.tree_map(lambda x: x[None], final)], stacked
    return t_saves, stacked


# The linear map's system matrix and its solve both run the sweep (`_LinearTangent`), and JAX
# transposes the matrix at trace time: one trace of the sweep, called twice.
_ys_tangent_once = traced_once(_ys_tangent)


def _with_ys(sol, t_ys):
    """A tangent of the diffrax solution `sol`: `t_ys` for its `ys`, None (zero) for
    everything else."""
    blank = jtu.tree_map(lambda _: None, sol)
    return eqx.tree_at(lambda s: s.ys, blank, t_ys, is_leaf=_is_none)


@eqx.filter_custom_jvp
def replay_solve(run, y0, ts, args):
    """`run.forward(y0, ts, args)`'s diffrax solution, differentiated by the tangent
    sweep over its recorded steps (module docstring) in every autodiff mode."""
    return run.forward(y0, ts, args, False)[0]


@replay_solve.def_jvp
def _replay_jvp(primals, tangents):
    sol, steps = recorded_solve(*primals)
    sweep, t_diff, _ = _sweep(primals, tangents, steps)
    inputs = (t_diff, tangents[1])  # the tangents given (None: symbolic zero)
    t_ys = _LinearTangent(sweep, sol.ys).apply(inputs) if jtu.tree_leaves(inputs) else None
    return sol, _with_ys(sol, t_ys)


class _LinearTangent(eqx.Module):
    r"""The saves' tangent $L\,\dot u$ of a recorded run as a linear map of the input
    tangents $\dot u$ (of the differentiated leaves and of $y_0$) whose transpose is
    given: forward mode evaluates the tangent sweep (:class:`_Sweep`), reverse mode the
    batched backward replay of :class:`ReverseReplayAdjoint` (:func:`_transposed_sweep`)
    instead of JAX's transpose of the sweep, which rematerialises and transposes one step
    at a time.

    JAX's public way to give a linear map its own transpose is
    `lax.custom_linear_solve`; $L$ is not square, so it is the solve of the square
    system $\begin{pmatrix} I & 0 \\ -L & I \end{pmatrix} x = b$ in the space of
    (input tangent, output tangent), whose solution is $x = (b_u,\, b_y + L b_u)$ and
    whose transposed solution is $(c_u + L^T c_y,\, c_y)$. With $b = (\dot u, 0)$
    its second block is $L\dot u$. Derivatives of the rule itself (second order) come
    from the system's matrix, which is written with the sweep, so they stay exact."""

    sweep: _Sweep
    like: Any  # the saves (the tangent's structure)

    def forward(self, inputs):
        t_diff, t_y0 = inputs
        t_y0 = _cotangent(t_y0, self.sweep.y0)  # symbolic zeros (None) as zero arrays
        return _ys_tangent_once(self.sweep, t_diff, t_y0, self.like, False)[0]

    def transpose(self, c_ys, inputs):
        sweep = self.sweep
        g_saves, y_end = _ys_cotangents(c_ys, sweep.ts, sweep.y0)
        steps = (sweep.step_ts, sweep.step_ys)
        d_bar, y_bar = _transposed_sweep(
            sweep.diff, sweep.static, sweep.y0, sweep.ts, sweep.args, steps, g_saves, y_end
        )
        keep = lambda t, y: None if t is None else y  # only the tangents given
        return d_bar, jtu.tree_map(keep, inputs[1], y_bar, is_leaf=_is_none)

    def _nil(self):
        """Zero, as a function of every float leaf of the recorded run (a select that
        never takes them: no 0 * inf)."""
        leaves = [x for x in jtu.tree_leaves(self.sweep) if eqx.is_inexact_array(x)]
        picks = [
            jnp.where(False, jnp.ravel(x)[0], 0).astype(leaves[0].dtype) for x in leaves if x.size
        ]
        return sum(picks, jnp.zeros((), leaves[0].dtype))

    def apply(self, inputs):
        r"""$L\,\dot u$ for the input tangents `inputs` (no leaf None in them all)."""
        # the second block of b: zeros, written as a linear function of the inputs so that
        # reverse mode sees every block of b as a tangent
        zero = 0.0 * jnp.ravel(jtu.tree_leaves(inputs)[0])[0]
        b = (inputs, jtu.tree_map(lambda x: jnp.zeros_like(x) + zero.astype(x.dtype), self.like))
        add = lambda a, c: jtu.tree_map(jnp.add, a, c)
        sub = lambda a, c: jtu.tree_map(jnp.subtract, a, c)
        # the first block of the matrix, I, written as depending on the recorded run: under
        # a derivative of this tangent (reverse over forward) JAX differentiates the matrix
        # with respect to the run, and transposes the solve only if every block of that
        # right-hand side is a tangent (a constant zero block fails its transpose rule)
        nil = self._nil()
        matvec = lambda x: (
            jtu.tree_map(lambda v: v + nil.astype(v.dtype), x[0]),
            sub(x[1], self.forward(x[0])),
        )
        solve = lambda _, b: (b[0], add(b[1], self.forward(b[0])))
        transpose = lambda _, c: (add(c[0], self.transpose(c[1], inputs)), c[1])
        return lax.custom_linear_solve(matvec, b, solve, transpose)[1]


@eqx.filter_custom_jvp
def recorded_solve(run, y0, ts, args):
    """`run.forward(y0, ts, args, record=True)`: the solution and the accepted steps'
    end times and states. Its own derivative rule (the sweep, which also gives the
    recorded states' tangents) makes derivatives of derivatives (`jax.hessian`, a `jvp`
    of a gradient) go through the sweep again rather than through diffrax's loop."""
    return run.forward(y0, ts, args, True)


@recorded_solve.def_jvp
def _recorded_jvp(primals, tangents):
    sol, steps = recorded_solve(*primals)
    sweep, t_diff, t_y0 = _sweep(primals, tangents, steps)
    t_ys, t_states = _ys_tangent(sweep, t_diff, t_y0, sol.ys, True)
    t_sol = _with_ys(sol, t_ys)
    return (sol, steps), (t_sol, (None, t_states))


# ReverseReplayAdjoint: the replay as a custom VJP


def _cotangent(g, like):
    return jax.tree_util.tree_map(
        lambda gi, x: jnp.zeros_like(x) if gi is None else gi, g, like, is_leaf=lambda x: x is None
    )


def _add(a, b):
    return jax.tree_util.tree_map(jnp.add, a, b)


@eqx.filter_custom_vjp
def reverse_replay_solve(vjp_arg, args):
    """`run.forward(y0, ts, args)` for `vjp_arg = (run, y0, ts)`, differentiated in reverse
    mode by replaying the accepted steps (see the module docstring)."""
    run, y0, ts = vjp_arg
    return run.forward(y0, ts, args, False)[0]


def _fwd(perturbed, vjp_arg, args):
    run, y0, ts = vjp_arg
    _refuse_ts(any(jax.tree_util.tree_leaves(perturbed[2])), "ReverseReplayAdjoint")
    sol, steps = run.forward(y0, ts, args, True)
    return sol, steps


def _bwd(steps, g, perturbed, vjp_arg, args):
    run, y0, ts = vjp_arg
    # only the perturbed leaves are differentiated (the others' cotangents are not built)
    diff, static = eqx.partition(run, perturbed[0])
    g_saves, y_bar = _ys_cotangents(g.ys, ts, y0)
    d_bar, y_bar = _transposed_sweep(diff, static, y0, ts, args, steps, g_saves, y_bar)
    return d_bar, y_bar, None


def _transposed_sweep(diff, static, y0, ts, args, steps, g_saves, y_bar):
    """The backward replay (module docstring): the cotangents of the differentiated
    leaves `diff` and of `y0` for cotangents `g_saves` of the saves and `y_bar` of the
    state after the last recorded step. The pullbacks of a block of :data:`_CHUNK` steps
    are formed as one batch, then applied in reverse order."""
    step_ts, step_ys = steps
    count = jnp.sum(jnp.isfinite(step_ts))
    # save j is interpolated on the first step that ends at or after it
    save_step = jnp.searchsorted(step_ts, ts, side="left")
    t_start = ts[0]
    width = min(_CHUNK, step_ts.shape[0])

    def linearize(k):
        """Step k (clamped to 0 below) replayed: its dense output and its pullback."""
        k = jnp.maximum(k, 0)
        prev = jnp.maximum(k - 1, 0)
        ta = jnp.where(k == 0, t_start, step_ts[prev])
        ya = jax.tree_util.tree_map(lambda a, b: jnp.where(k == 0, a, b[prev]), y0, step_ys)
        tb = step_ts[k]
        step = lambda d, y: eqx.combine(d, static).step(ta, tb, y, args)
        (_, dense), pullback = jax.vjp(step, diff, ya)
        return ta, tb, dense, pullback

    def chunk(carry):
        top, y_bar, d_bar, j = carry
        ks = top - jnp.arange(width)  # this chunk's steps, latest first
        # the steps' forward passes, independent given the stored states: one batch
        ta_, tb_, dense_, pullback_ = jax.vmap(linearize)(ks)

        def one(i, c):
            y_bar, d_bar, j = c
            k = ks[i]
            take = lambda x: x[i]
            ta, tb = ta_[i], tb_[i]
            dense = jax.tree_util.tree_map(take, dense_)
            pullback = jax.tree_util.tree_map(take, pullback_)

            def has_save(c):
                return (c[0] >= 0) & (save_step[jnp.maximum(c[0], 0)] == k)

            def add_save(c):
                jj, dd, dense_bar = c
                save = lambda d, de: eqx.combine(d, static).save(ta, tb, de, ts[jj], args)
                _, save_vjp = jax.vjp(save, diff, dense)
                gj = jax.tree_util.tree_map(lambda x: x[jj], g_saves)
                d_j, dense_j = save_vjp(gj)
                return jj - 1, _add(dd, d_j), _add(dense_bar, dense_j)

            zeros = jax.tree_util.tree_map(jnp.zeros_like, (diff, dense))
            j, d_saves, dense_bar = lax.while_loop(has_save, add_save, (j, *zeros))
            d_step, y_new = pullback((y_bar, dense_bar))
            d_new = _add(d_bar, _add(d_step, d_saves))
            return y_new, d_new, j

        # the last chunk transposes only the steps it holds (those below 0 are padding)
        stop = jnp.minimum(width, top + 1)
        y_bar, d_bar, j = lax.fori_loop(0, stop, one, (y_bar, d_bar, j))
        return top - width, y_bar, d_bar, j

    d_bar = jax.tree_util.tree_map(jnp.zeros_like, diff)
    last_save = jnp.sum(save_step < count) - 1  # saves past the last step were not reached
    init = (count - 1, y_bar, d_bar, last_save)
    _, y_bar, d_bar, _ = lax.while_loop(lambda c: c[0] >= 0, chunk, init)
    return d_bar, y_bar


def _ys_cotangents(g_ys, ts, y0):
    """From the cotangent `g_ys` of the solution's `ys` (None: zero): the cotangents of
    the saves at `ts` (zeros where none) and of the final state after the last step (saved
    when the run has its failure event; zeros otherwise)."""
    saves = jax.tree_util.tree_map(lambda x: jnp.zeros(ts.shape + x.shape, x.dtype), y0)
    end = jax.tree_util.tree_map(jnp.zeros_like, y0)
    if g_ys is None:
        return saves, end
    if not isinstance(g_ys, list):
        return _cotangent(g_ys, saves), end
    g_saves, g_end = g_ys  # [saves at ts, the final state]
    if g_end is not None:
        end = _cotangent(jax.tree_util.tree_map(lambda x: x[0], g_end), end)
    return _cotangent(g_saves, saves), end


reverse_replay_solve.def_fwd(_fwd)
reverse_replay_solve.def_bwd(_bwd)
