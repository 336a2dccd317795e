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

from typing import Any, Protocol

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax

from ._tracing import autodiff_modes


# Steps replayed in one batch (their forward passes are independent given the stored
# states, so they run as one vmap; their transposes then run in sequence). Measured on the
# chains of benchmarks/gradients.py (value_and_grad / forward, best of 30 interleaved, the
# replay in a StageLoop): 5 links 8 -> 2.75x, 16 -> 2.71x, 32 -> 2.69x; 4 links 3.73x,
# 3.52x, 3.48x. 16 keeps the batch's residuals small (16 x 26 kB at 5 links).
_CHUNK = 16

# The default adjoint replays when the stored states take at most DEFAULT_BUDGET bytes per
# trajectory (max_steps x state size x itemsize) and, for a batch whose size the caller
# knows (`ukjax.predict` and `fit` over several trajectories), BATCH_BUDGET in all;
# diffrax's checkpointed loop (under 1 MiB at 100 000 steps on the 5-link chain) otherwise.
DEFAULT_BUDGET = 2**24
BATCH_BUDGET = 2**28


class ReplayAdjoint(diffrax.AbstractAdjoint):
    r"""Reverse-mode gradients of :func:`ukjax.simulate` by replaying the accepted steps
    (the default for smooth runs with an explicit Runge-Kutta solver).

    The forward run stores every accepted state; the backward pass walks them in reverse
    and transposes one Runge-Kutta step at a time (see :mod:`ukjax._adjoint` for the
    maths). The gradient is the same discrete derivative as diffrax's
    `RecursiveCheckpointAdjoint` (to round-off), at a lower cost: on the 5-link chain of
    `benchmarks/gradients.py` value_and_grad costs 2.7 times the forward solve, against
    4.6 times with diffrax's checkpointed loop in the same run (2-core CPU, float64). The
    replayed steps run in a :class:`ukjax.StageLoop` (see `_Integration._replay_solver`).

    Memory: `max_steps` x the state size, allocated when a gradient is taken (16 MB for
    a 10-coordinate system at the default `max_steps = 100 000`, against 0.2 MB for
    diffrax's checkpoints). `simulate`'s default uses it only within 16 MiB per trajectory.
    Under a wide `vmap` of gradients every member holds its own: set `max_steps` near what
    a run needs, or use `diffrax.RecursiveCheckpointAdjoint()`.

    Where it does not apply (hybrid runs with contacts or impulses, implicit solvers,
    `max_steps=None`), it behaves as `diffrax.RecursiveCheckpointAdjoint()`. Forward mode
    (`jax.jvp`, `jax.jacfwd`) needs `diffrax.ForwardMode()`, which `simulate` takes by
    itself when no adjoint is given (:func:`default_adjoint`); derivatives with respect to
    the save times `ts` need `diffrax.RecursiveCheckpointAdjoint()`.

    Example:
        >>> import jax, jax.numpy as jnp, ukjax
        >>> jax.config.update("jax_enable_x64", True)
        >>> from ukjax.systems import CartesianPendulum
        >>> ts = jnp.linspace(0.0, 0.5, 3)
        >>> def height(g):
        ...     sol = ukjax.simulate(CartesianPendulum(g=g), jnp.array([1.0, 0.0]),
        ...                          jnp.zeros(2), ts)
        ...     return sol.q[-1, 1]
        >>> slope = jax.grad(height)(9.81)  # the default adjoint: ReplayAdjoint()
        >>> h = 1e-4  # against central differences of two forward solves
        >>> central = (height(9.81 + h) - height(9.81 - h)) / (2 * h)
        >>> bool(jnp.allclose(slope, central, rtol=1e-7, atol=0.0))
        True

    (tests/test_adjoint.py compares it with diffrax's checkpointed gradients.)
    """

    def loop(self, **kwargs):
        return diffrax.RecursiveCheckpointAdjoint().loop(**kwargs)


def refusal(adjoint: diffrax.AbstractAdjoint, tree) -> str | None:
    """Why `adjoint` cannot differentiate a run whose inputs are `tree` in the modes
    they are traced by (:func:`autodiff_modes`), or None."""
    forward, reverse = autodiff_modes(tree)
    name = f"adjoint={type(adjoint).__name__}()"
    if forward and reverse and not isinstance(adjoint, diffrax.DirectAdjoint):
        return (
            f"simulate is differentiated twice (forward and reverse mode: jax.hessian, a jvp "
            f"of a gradient) but {name} cannot be: pass adjoint=diffrax.DirectAdjoint() "
            "(or leave adjoint unset: it is then chosen)."
        )
    if forward and not isinstance(adjoint, (diffrax.ForwardMode, diffrax.DirectAdjoint)):
        return (
            f"simulate is differentiated in forward mode (jax.jvp, jax.jacfwd) but {name} "
            "computes reverse-mode gradients only: pass adjoint=diffrax.ForwardMode() (or "
            "leave adjoint unset: it is then chosen), or take the derivative with jax.grad "
            "/ jax.jacrev."
        )
    return None


def default_adjoint(
    max_steps: int | None, y0, batch: int = 1, traced=None
) -> diffrax.AbstractAdjoint:
    """The adjoint for the autodiff modes that trace `traced` (the run's inputs, see
    :func:`autodiff_modes`): `diffrax.ForwardMode()` under forward mode alone,
    `diffrax.DirectAdjoint()` under both (second derivatives; its cost grows with
    `max_steps`: a pendulum's Hessian at 100 000 compiled in 22 s, with 0.6 MB of
    temporaries); in reverse mode (or none) `ReplayAdjoint()`
    when its stored states fit the budgets (:data:`DEFAULT_BUDGET` bytes per trajectory,
    :data:`BATCH_BUDGET` for a `batch` the caller knows), else
    `diffrax.RecursiveCheckpointAdjoint()`."""
    forward, reverse = autodiff_modes(traced)
    if forward:
        return diffrax.DirectAdjoint() if reverse else diffrax.ForwardMode()
    if max_steps is None:
        return diffrax.RecursiveCheckpointAdjoint()
    stored = max_steps * sum(x.size * x.dtype.itemsize for x in jax.tree_util.tree_leaves(y0))
    if stored <= DEFAULT_BUDGET and stored * batch <= BATCH_BUDGET:
        return ReplayAdjoint()
    return diffrax.RecursiveCheckpointAdjoint()


def replays(adjoint, solver: diffrax.AbstractSolver, max_steps: int | None) -> bool:
    """Whether a run takes its gradient by :func:`replay_solve`: `adjoint` is a
    :class:`ReplayAdjoint`, the run is bounded (the stored states need `max_steps`), and a
    step of `solver` depends on its start state alone (with `made_jump`, its first stage
    re-evaluated), so that the stored run can be replayed one step at a time."""
    return (
        isinstance(adjoint, ReplayAdjoint)
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


def _cotangent(g, like):
    return jax.tree_util.tree_map(
        lambda gi, x: jnp.zeros_like(x) if gi is None else gi, g, like, is_leaf=lambda x: x is None
    )


def _add(a, b):
    return jax.tree_util.tree_map(jnp.add, a, b)


@eqx.filter_custom_vjp
def replay_solve(vjp_arg, args):
    """`run.forward(y0, ts, args)` for `vjp_arg = (run, y0, ts)`, differentiated in reverse
    mode by replaying the accepted steps (see the module docstring)."""
    run, y0, ts = vjp_arg
    return run.forward(y0, ts, args, False)[0]


def _fwd(perturbed, vjp_arg, args):
    run, y0, ts = vjp_arg
    if any(jax.tree_util.tree_leaves(perturbed[2])):
        raise ValueError(
            "ukjax.ReplayAdjoint (the default adjoint of a smooth run) does not "
            "differentiate with respect to the save times ts: pass "
            "adjoint=diffrax.RecursiveCheckpointAdjoint() to simulate."
        )
    sol, steps = run.forward(y0, ts, args, True)
    return sol, steps


def _bwd(steps, g, perturbed, vjp_arg, args):
    run, y0, ts = vjp_arg
    step_ts, step_ys = steps
    # only the perturbed leaves are differentiated (the others' cotangents are not built)
    diff, static = eqx.partition(run, perturbed[0])
    g_saves, y_bar = _output_cotangents(g, ts, y0)
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
    return d_bar, y_bar, None


def _output_cotangents(g, ts, y0):
    """The cotangents of the saves at `ts` (zeros where none) and of the final state after
    the last step (saved when the run has its failure event; zeros otherwise)."""
    saves = jax.tree_util.tree_map(lambda x: jnp.zeros(ts.shape + x.shape, x.dtype), y0)
    end = jax.tree_util.tree_map(jnp.zeros_like, y0)
    if g.ys is None:
        return saves, end
    if not isinstance(g.ys, list):
        return _cotangent(g.ys, saves), end
    g_saves, g_end = g.ys  # [saves at ts, the final state]
    if g_end is not None:
        end = _cotangent(jax.tree_util.tree_map(lambda x: x[0], g_end), end)
    return _cotangent(g_saves, saves), end


replay_solve.def_fwd(_fwd)
replay_solve.def_bwd(_bwd)
