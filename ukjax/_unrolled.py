r"""Explicit Runge-Kutta steps with their stages written out: :class:`Unrolled`, for batched
runs.

diffrax takes the $s$ stages of a Runge-Kutta step in a loop (one trace of the vector
field, a buffer of the stage values $k_j$, and the combinations $y_0 + \sum_j a_{ij}k_j$ as
products with a row of the full tableau). :class:`Unrolled` takes the same step with the
loop written out: stage $i$ is evaluated at

$$Y_i = y_0 + \sum_{j<i,\ a_{ij}\neq 0} a_{ij}\,k_j,\qquad k_j = h\,f(t_0 + c_j h, Y_j),$$

with the tableau's non-zero coefficients as constants, $y_1 = y_0 + \sum_j b_j k_j$ (the
last stage's $Y_s$ when the method is "same stage as last"), the embedded error
$\sum_j (b_j - \hat b_j) k_j$, and the same dense output $(y_0, y_1, k)$, so diffrax's
step-size control and saving are unchanged: the same method, the same steps up to
rounding. The saves of `Dopri8` and `Tsit5` come from the same interpolating polynomial
with its coefficients formed once per step (:class:`ukjax._dense.PolynomialDense`). A
first-same-as-last method carries $f(t_1, y_1)$ to the next step and evaluates the first
stage only on the first step and after a jump, as diffrax does.

When it pays (measured on the 2-core CPU box, `benchmarks/RESULTS.md`, sweep section):
under `jax.vmap`. A batch of 1024 double-rod or Duffing trajectories ran 1.4-1.9x faster
than with diffrax's loop, 4096 of them 1.5-1.8x. The price is compilation: the program
holds one copy of the vector field per stage (`Dopri5`: 7, `Dopri8`: 14), +0.0-0.7 s for
`Dopri5` and +3-5.6 s for `Dopri8` on a batch of 1024. A single trajectory loses (up to
2.7x slower, XLA compilation up to 8x longer): a single trajectory of
:func:`ukjax.simulate` keeps diffrax's loop unless given an :class:`Unrolled` solver;
:func:`ukjax.sweep` and a forward `jax.vmap` of :func:`ukjax.simulate` write out the
stages of methods with at most :data:`SWEEP_STAGES` stages by default, and of any method
(`Dopri8` included) from :data:`UNROLL_ALL_FROM` trajectories on (:func:`batched_solver`).

Example:
    >>> import jax, jax.numpy as jnp, diffrax, ukjax
    >>> jax.config.update("jax_enable_x64", True)
    >>> from ukjax.systems import CartesianPendulum
    >>> ts = jnp.linspace(0.0, 1.0, 5)
    >>> q0, qd0 = jnp.array([1.0, 0.0]), jnp.zeros(2)
    >>> run = lambda solver: ukjax.simulate(CartesianPendulum(), q0, qd0, ts, solver=solver,
    ...                                     rtol=1e-10, atol=1e-10).q
    >>> bool(jnp.allclose(run(ukjax.Unrolled(diffrax.Dopri5())), run(diffrax.Dopri5()),
    ...                   atol=1e-12))
    True
"""

from __future__ import annotations

import diffrax
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import jax.tree_util as jtu

from ._dense import PolynomialOutput, combine, polynomial_weights
from ._integrators import default_solver


SWEEP_STAGES = 7  # batches write out the stages of methods with at most this many
# ... and of every method from this many trajectories on. Dopri8 at 1e-12, jit(vmap), run
# seconds written out / looped on the 2-core box (stop 35, best of 3; compile +2.4-3.1 s):
# double rod 1.10 / 1.79 (4096), 2.12 / 4.29 (8192), 3.83 / 10.42 (16384); Duffing 1.41 /
# 1.83, 2.37 / 3.11, 4.17 / 6.18. The looped stages slow down past 8192 (their stage
# buffer leaves the cache); from 16384 the written-out stages repay their compilation
# (double rod 11.9 vs 15.7 s in all, Duffing 10.3 vs 10.1 s).
UNROLL_ALL_FROM = 16384


def unrollable(solver: diffrax.AbstractSolver) -> bool:
    """Whether `solver` is an explicit Runge-Kutta method with one Butcher tableau (what
    :class:`Unrolled` can write out): diffrax's `Dopri5`, `Dopri8`, `Tsit5`, `Bosh3`,
    `Heun`, `Ralston`, `Midpoint`, ukjax's `RK4` and `KuttaMerson`, or an `AbstractERK` of
    the user's."""
    tableau = getattr(solver, "tableau", None)
    return (
        isinstance(solver, diffrax.AbstractERK)
        and not isinstance(solver, diffrax.AbstractWrappedSolver)
        and isinstance(tableau, diffrax.ButcherTableau)
        and not tableau.implicit
    )


def batched_solver(
    solver: diffrax.AbstractSolver | None, batch: int = 1
) -> diffrax.AbstractSolver | None:
    """The solver a batch of `batch` trajectories runs (:func:`ukjax.sweep`, a forward
    `jax.vmap` of :func:`ukjax.simulate`) for the `solver` it is given (`None`:
    :func:`ukjax.simulate`'s default, `Dopri8`): :class:`Unrolled` around an
    :func:`unrollable` method of at most :data:`SWEEP_STAGES` stages (where the
    written-out stages cost a few tenths of a second of compilation), or of any number of
    stages from :data:`UNROLL_ALL_FROM` trajectories on; anything else as it is, except
    that a method whose dense output :mod:`ukjax._dense` knows (`Dopri8`) gets it as
    :class:`ukjax._dense.PolynomialOutput`."""
    if solver is None:
        if batch < UNROLL_ALL_FROM:
            return None  # simulate wraps its default itself
        solver = default_solver()
    if unrollable(solver):
        stages = solver.tableau.num_stages  # pyright: ignore[reportAttributeAccessIssue]
        if stages <= SWEEP_STAGES or batch >= UNROLL_ALL_FROM:
            return Unrolled(solver)  # pyright: ignore[reportCallIssue]
    if polynomial_weights(solver) is not None:
        return PolynomialOutput(solver)  # pyright: ignore[reportCallIssue]
    return solver


class Unrolled(PolynomialOutput):
    r"""`solver` (an explicit Runge-Kutta method of diffrax's or ukjax's) with the stages
    of each step written out instead of looped over; the same method and dense output.

    Use it for batched runs (a forward `jax.vmap` of :func:`ukjax.simulate` and
    :func:`ukjax.sweep` apply it themselves to methods of at most 7 stages, and to any
    from 16384 trajectories on, so pass it for Dopri8 in smaller batches that repeat, or
    where `vmap` reaches `simulate` through a `jit`): a batch of 1024 ran 1.4-1.9x
    faster than with diffrax's stage loop on the 2-core box, at the cost of one copy of the
    vector field per stage in the compiled program. A single trajectory is better off
    with `solver` itself.

    Raises ValueError when `solver` is not an explicit single-tableau Runge-Kutta method
    (implicit, IMEX, SDE or wrapped solvers, Euler), naming what to pass instead.

    Example:
        >>> import diffrax, ukjax
        >>> ukjax.Unrolled(diffrax.Tsit5()).order(None)
        5
    """

    inner: diffrax.AbstractSolver

    def __check_init__(self):
        if not unrollable(self.inner):
            raise ValueError(
                "ukjax.Unrolled writes out the stages of an explicit Runge-Kutta method with "
                f"one Butcher tableau (diffrax.Dopri5, Dopri8, Tsit5, Bosh3, ...); got "
                f"{type(self.inner).__name__}. Pass that solver to simulate directly."
            )

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        if terms.is_vf_expensive(t0, t1, y0, args):  # adjoint terms: diffrax's own step
            return self.inner.step(terms, t0, t1, y0, args, solver_state, made_jump)
        tableau = self.inner.tableau  # pyright: ignore[reportAttributeAccessIssue]
        control = terms.contr(t0, t1)
        if tableau.fsal:  # (diffrax's init gives such a method a state, and only such)
            f0 = _first_stage(terms, t0, y0, args, solver_state, made_jump)
        else:
            f0 = terms.vf(t0, y0, args)
        ks = [terms.prod(f0, control)]
        f, y = f0, y0
        for a, c in zip(tableau.a_lower, tableau.c):
            y = combine(y0, a, ks)
            f = terms.vf(t0 + float(c) * (t1 - t0), y, args)
            ks.append(terms.prod(f, control))
        y1 = y if tableau.ssal else combine(y0, tableau.b_sol, ks)
        y_error = combine(None, tableau.b_error, ks)
        dense = dict(y0=y0, y1=y1, k=jtu.tree_map(lambda *k: jnp.stack(k), *ks))
        state = (jnp.array(False), f) if tableau.fsal else None
        return y1, y_error, dense, state, diffrax.RESULTS.successful


def _first_stage(terms, t0, y0, args, solver_state, made_jump):
    """$f(t_0, y_0)$ of a first-same-as-last method: carried from the last step, except on
    the first step and after a jump (for a whole batch when one member needs it, as diffrax
    does, so that the branch stays a branch under vmap)."""
    first, f0 = solver_state
    fresh = eqxi.unvmap_any(first | made_jump)
    return jax.lax.cond(fresh, lambda: terms.vf(t0, y0, args), lambda: f0)
