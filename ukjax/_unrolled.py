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

When it pays (`benchmarks/RESULTS.md`, sweep section): under `jax.vmap`, where batches of
double-rod and Duffing trajectories ran faster than with diffrax's loop. The price is
compilation: the program holds one copy of the vector field per stage (`Dopri5`: 7,
`Dopri8`: 14). A single trajectory loses (slower, and much longer to compile): a single
trajectory of :func:`ukjax.simulate` keeps diffrax's loop unless given an
:class:`Unrolled` solver. :func:`ukjax.sweep` writes
out the stages of methods with at most
:data:`SWEEP_STAGES` stages, and run longer ones (`Dopri8`, the default) in
:class:`ukjax.StageLoop`, as fast as written out at the compilation cost of diffrax's
loop (:func:`batched_solver`).

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

from ._dense import PolynomialOutput, combine, polynomial_weights
from ._integrators import default_solver
from ._stage_loop import ExplicitStages, StageLoop, initial_stage, unrollable


SWEEP_STAGES = 7  # batches write out the stages of methods with at most this many, and
# run longer ones in a StageLoop. Dopri8 at 1e-12, jit(vmap), run s diffrax's loop /
# written out / StageLoop (2-core box, best of 3, ukjax._stage_loop): double rod 0.47 /
# 0.34 / 0.22 (1024), 1.86 / 1.13 / 1.06 (4096), - / 3.81 / 3.07 (16384); Duffing 0.42 /
# 0.44 / 0.35, 1.74 / 1.38 / 1.45, - / 4.04 / 4.31; written out compiles 1.5-3 s longer.
# Dopri5 at 1e-8, batch 1024, written out / StageLoop: double rod 0.18 / 0.19, Duffing
# 0.18 / 0.27; Tsit5 0.14 / 0.14 and 0.17 / 0.24.


def batched_solver(
    solver: diffrax.AbstractSolver | None, lapack: bool = False
) -> diffrax.AbstractSolver:
    """The solver a batch of trajectories runs (:func:`ukjax.sweep` passes it to
    :func:`ukjax.simulate`) for the `solver` it is given (`None`:
    :func:`ukjax.simulate`'s default, `Dopri8`): an :func:`unrollable` method as
    :class:`Unrolled` when it has at most :data:`SWEEP_STAGES` stages and its stages do
    not factor with LAPACK (`lapack`: the run's UK solves factor a matrix with LAPACK
    somewhere in its program, :func:`ukjax._sweep._factors_with_lapack`), as
    :class:`ukjax.StageLoop` otherwise;
    anything else as it is,
    except that a method whose dense output :mod:`ukjax._dense` knows gets it as
    :class:`ukjax._dense.PolynomialOutput`. A solver the user wrapped (`Unrolled`,
    `StageLoop`, ...) is kept.

    With the stages written out around LAPACK's factorisations the compiled batch can
    wait forever on XLA:CPU (jaxlib 0.10.2; `benchmarks/RESULTS.md`, stop 76); in a
    `StageLoop` it runs, as fast.

        >>> import diffrax
        >>> from ukjax._unrolled import batched_solver
        >>> given = (None, diffrax.Tsit5(), diffrax.Kvaerno5())
        >>> [type(batched_solver(s)).__name__ for s in given]
        ['StageLoop', 'Unrolled', 'Kvaerno5']
        >>> type(batched_solver(diffrax.Tsit5(), lapack=True)).__name__
        'StageLoop'
    """
    solver = default_solver() if solver is None else solver
    if unrollable(solver):
        stages = solver.tableau.num_stages  # pyright: ignore[reportAttributeAccessIssue]
        if stages <= SWEEP_STAGES and not lapack:
            return Unrolled(solver)  # pyright: ignore[reportCallIssue]
        return StageLoop(solver)  # pyright: ignore[reportCallIssue]
    if polynomial_weights(solver) is not None:
        return PolynomialOutput(solver)  # pyright: ignore[reportCallIssue]
    return solver


class Unrolled(ExplicitStages):
    r"""`solver` (an explicit Runge-Kutta method of diffrax's or ukjax's) with the stages
    of each step written out instead of looped over; the same method and dense output.

    Use it for batched runs of methods of few stages on small systems (:func:`ukjax.sweep`
    applies it itself to methods of at most 7 stages when M and the Gram matrix have at
    most 8 rows; pass it to a wide `jax.vmap` of `simulate` yourself): under `vmap` it
    runs faster than diffrax's stage loop (`benchmarks/RESULTS.md`, sweep section), at
    the cost of one copy of the vector field per stage in the compiled program. Methods
    of more stages run as fast, and compile faster, in :class:`ukjax.StageLoop`. A single
    trajectory is better off with `solver` itself. **Not for systems whose UK solve
    factors matrices of more than 8 rows** (LAPACK's kernels): with jaxlib 0.10.2 such
    a batch can hang on XLA:CPU (`benchmarks/RESULTS.md`, stop 76); use
    :class:`ukjax.StageLoop` there. Raises ValueError for a solver it cannot write out
    (implicit, IMEX, SDE or wrapped solvers, Euler).

    Example:
        >>> import diffrax, ukjax
        >>> ukjax.Unrolled(diffrax.Tsit5()).order(None)
        5
    """

    def stages(self, tableau, terms, t0, t1, y0, args, solver_state, made_jump, control):
        f0 = initial_stage(tableau, terms, t0, y0, args, solver_state, made_jump)
        ks = [terms.prod(f0, control)]
        f, y = f0, y0
        for a, c in zip(tableau.a_lower, tableau.c):
            y = combine(y0, a, ks)
            f = terms.vf(t0 + float(c) * (t1 - t0), y, args)
            ks.append(terms.prod(f, control))
        return y, f, ks, None
