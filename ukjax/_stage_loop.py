r"""Explicit Runge-Kutta steps whose stages run in a loop of sums: :class:`StageLoop`, for
batched runs of many-stage methods (`Dopri8`).

Stage $i$ of an $s$-stage explicit method is evaluated at

$$Y_i = y_0 + \sum_{j=0}^{s-2} a_{ij}\,k_j,\qquad k_i = h\,f(t_0 + c_i h,\ Y_i),$$

with $a_{ij} = 0$ for $j \ge i$: one trace of the vector field in a loop over $i$, the
stages $k_j$ kept in a buffer of $s$ slots, and the combination written as $s - 1$
multiply-adds of the buffer's slots by the tableau's row $i$ (a gather from a constant).
diffrax's own loop forms the same combination as a matrix product of the row with the
stacked stages; under `jax.vmap` the buffer is laid out batch first, so XLA copies (and
transposes) the whole buffer at every stage to feed that product. Sums of slots read the
buffer in place and fuse with what follows. The step is otherwise
:class:`ukjax.Unrolled`'s: $y_1 = y_0 + \sum_j b_j k_j$ (the last $Y$ for a "same stage as
last" method), the embedded error $\sum_j (b_j - \hat b_j)k_j$, the dense output
$(y_0, y_1, k)$ with the saves formed once per step (:class:`ukjax._dense.PolynomialDense`
where the weights are known), and $f(t_1, y_1)$ carried to the next step by a
first-same-as-last method. The first stage is evaluated in the same loop (its $Y_0 =
y_0$: row 0 of $a$ is zeros), skipped where a first-same-as-last method carries it: the
program holds one copy of the vector field, not a second one for the first stage (for a
constrained system at the defaults that copy was a quarter of the program XLA compiles,
`benchmarks/RESULTS.md`, stop 93).

When it pays (`benchmarks/RESULTS.md`, sweep section, where the runs of diffrax's loop,
:class:`ukjax.Unrolled` and this loop are compared): under `jax.vmap` a many-stage method
such as `Dopri8` runs faster in this loop than in diffrax's, and compiles as fast (one copy
of the vector field, where :class:`ukjax.Unrolled` compiles 14). For methods of at most 7
stages writing the stages out is as fast or faster, so
:func:`ukjax._unrolled.batched_solver` runs those as :class:`ukjax.Unrolled` and longer
methods as this.

Example (a diffrax solver like any other; :func:`ukjax.simulate` takes it as `solver=`):
    >>> import jax, jax.numpy as jnp, diffrax, ukjax
    >>> jax.config.update("jax_enable_x64", True)
    >>> decay = diffrax.ODETerm(lambda t, y, args: -args * y)
    >>> pid = diffrax.PIDController(rtol=1e-12, atol=1e-12)
    >>> sol = diffrax.diffeqsolve(decay, ukjax.StageLoop(diffrax.Dopri8()), 0.0, 2.0, 0.1,
    ...                           jnp.ones(2), args=jnp.array([1.0, 3.0]),
    ...                           saveat=diffrax.SaveAt(ts=jnp.array([0.5, 2.0])),
    ...                           stepsize_controller=pid)
    >>> bool(jnp.allclose(sol.ys[:, 1], jnp.exp(-3.0 * jnp.array([0.5, 2.0])), rtol=1e-10))
    True
"""

from __future__ import annotations

import abc

import diffrax
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from ._dense import PolynomialOutput, combine


def unrollable(solver: diffrax.AbstractSolver) -> bool:
    """Whether `solver` is an explicit Runge-Kutta method with one Butcher tableau (what
    :class:`StageLoop` and :class:`ukjax.Unrolled` can run): diffrax's `Dopri5`, `Dopri8`,
    `Tsit5`, `Bosh3`, `Heun`, `Ralston`, `Midpoint`, ukjax's `RK4` and `KuttaMerson`, or an
    `AbstractERK` of the user's."""
    tableau = getattr(solver, "tableau", None)
    return (
        isinstance(solver, diffrax.AbstractERK)
        and not isinstance(solver, diffrax.AbstractWrappedSolver)
        and isinstance(tableau, diffrax.ButcherTableau)
        and not tableau.implicit
    )


def initial_stage(tableau, terms, t0, y0, args, solver_state, made_jump):
    """$f(t_0, y_0)$. A first-same-as-last method (diffrax's init gives such a method a
    state, and only such) carries it from the last step, except on the first step and
    after a jump (for a whole batch when one member needs it, as diffrax does, so that the
    branch stays a branch under vmap); any other method evaluates it."""
    fresh, carried = carried_stage(tableau, solver_state, made_jump)
    if fresh is True:
        return terms.vf(t0, y0, args)
    return jax.lax.cond(fresh, lambda: terms.vf(t0, y0, args), lambda: carried)


def carried_stage(tableau, solver_state, made_jump):
    """(whether the first stage must be evaluated: True where that is known when tracing,
    the first stage a first-same-as-last method carries from its last step or None):
    evaluated on the first step and after a jump (always, for a caller that passes
    `made_jump=True`, as the per-step projection does), for a whole batch when one member
    needs it (see :func:`initial_stage`)."""
    if not tableau.fsal:
        return True, None
    first, carried = solver_state
    if made_jump is True:
        return True, carried
    return eqxi.unvmap_any(first | made_jump), carried


class ExplicitStages(PolynomialOutput):
    """An explicit Runge-Kutta step of `inner` whose stages a subclass takes
    (:meth:`stages`); the rest is shared: diffrax's own step for adjoint terms, the first
    stage (carried by a first-same-as-last method), $y_1$, the error estimate, the dense
    output (:class:`ukjax._dense.PolynomialOutput`) and the carried state.

    Raises ValueError when `inner` is not an explicit single-tableau Runge-Kutta method
    (implicit, IMEX, SDE or wrapped solvers, Euler), naming what to pass instead."""

    inner: diffrax.AbstractSolver

    def __check_init__(self):
        if not unrollable(self.inner):
            raise ValueError(
                f"ukjax.{type(self).__name__} runs the stages of an explicit Runge-Kutta "
                "method with one Butcher tableau (diffrax.Dopri5, Dopri8, Tsit5, Bosh3, ...); "
                f"got {type(self.inner).__name__}. Pass that solver to simulate directly."
            )

    @abc.abstractmethod
    def stages(self, tableau, terms, t0, t1, y0, args, solver_state, made_jump, control) -> tuple:
        """(last $Y$, last $f$, the stages $k_j$ as a list, the same stacked or None), the
        first stage carried by a first-same-as-last method unless `made_jump` or the
        `solver_state` says it is the first step (:func:`carried_stage`)."""
        raise NotImplementedError

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        if terms.is_vf_expensive(t0, t1, y0, args):  # adjoint terms: diffrax's own step
            return self.inner.step(terms, t0, t1, y0, args, solver_state, made_jump)
        tableau = self.inner.tableau  # pyright: ignore[reportAttributeAccessIssue]
        control = terms.contr(t0, t1)
        y, f, ks, stacked = self.stages(
            tableau, terms, t0, t1, y0, args, solver_state, made_jump, control
        )
        y1 = y if tableau.ssal else combine(y0, tableau.b_sol, ks)
        y_error = combine(None, tableau.b_error, ks)
        if stacked is None:
            stacked = jtu.tree_map(lambda *k: jnp.stack(k), *ks)
        dense = dict(y0=y0, y1=y1, k=stacked)
        state = (jnp.array(False), f) if tableau.fsal else None
        return y1, y_error, dense, state, diffrax.RESULTS.successful


def _coefficients(tableau) -> tuple[np.ndarray, np.ndarray]:
    """The full lower-triangular $a$ ($s \\times (s-1)$, row $i$ for stage $i$) and $c$."""
    s = tableau.num_stages
    a = np.zeros((s, s - 1))
    for i, row in enumerate(tableau.a_lower):
        a[i + 1, : len(row)] = np.asarray(row, dtype=np.float64)
    c = np.concatenate([[0.0], np.asarray(tableau.c, dtype=np.float64)])
    return a, c


class StageLoop(ExplicitStages):
    r"""`solver` (an explicit Runge-Kutta method of diffrax's or ukjax's) with its stages in
    a loop whose combinations are sums of the stage buffer's slots (see the module); the
    same method and dense output.

    Use it for batched runs of many-stage methods: :func:`ukjax.sweep` runs methods of
    more than 7 stages (`Dopri8`, simulate's default) so by itself; pass it to a wide
    `jax.vmap` of `simulate` yourself (`simulate` runs the solver it is given); it runs
    `Dopri8` faster than diffrax's stage loop under `vmap`, compiling as fast
    (`benchmarks/RESULTS.md`).

    Example (an implicit method is refused, as by :class:`ukjax.Unrolled`):
        >>> import diffrax, ukjax
        >>> ukjax.StageLoop(diffrax.Dopri8()).order(None)
        8
        >>> try:
        ...     ukjax.StageLoop(diffrax.Kvaerno5())
        ... except ValueError as err:
        ...     print(str(err)[:60])
        ukjax.StageLoop runs the stages of an explicit Runge-Kutta m
    """

    def stages(self, tableau, terms, t0, t1, y0, args, solver_state, made_jump, control):
        s = tableau.num_stages
        a, c = _coefficients(tableau)
        fresh, carried = carried_stage(tableau, solver_state, made_jump)
        if carried is None:  # every stage evaluated, the first one too (not carried)
            carried = jtu.tree_map(jnp.zeros_like, jax.eval_shape(terms.vf, t0, y0, args))
        k = terms.prod(carried, control)
        slots = jtu.tree_map(lambda k: jnp.zeros((s,) + k.shape, k.dtype), k)
        times = jnp.asarray(c, jnp.result_type(t0))

        def stage(i, carry):
            # the first stage in the loop too (Y_0 = y_0: its row of a is zeros), so the
            # program holds one copy of the vector field; a first-same-as-last method
            # skips it where it carries f(t_0, y_0) from its last step
            slots, f_last, _ = carry
            y = jtu.tree_map(lambda base, k: _row_sum(base, a, i, k), y0, slots)
            evaluate = lambda: terms.vf(t0 + times[i] * (t1 - t0), y, args)
            if fresh is True:
                f = evaluate()
            else:
                f = jax.lax.cond((i > 0) | fresh, evaluate, lambda: f_last)
            k = terms.prod(f, control)
            return jtu.tree_map(lambda buf, ki: buf.at[i].set(ki), slots, k), f, y

        slots, f, y = jax.lax.fori_loop(0, s, stage, (slots, carried, y0))
        return y, f, [jtu.tree_map(lambda buf: buf[j], slots) for j in range(s)], slots


def _row_sum(base, a: np.ndarray, i, slots):
    """`base + sum_j a[i, j] slots[j]`, one multiply-add per slot (static slices: the
    buffer is read where it lies, fused with the sum)."""
    row = jnp.asarray(a, slots.dtype)[i]
    out = base
    for j in range(a.shape[1]):
        out = out + (row[j] * slots[j]).astype(base.dtype)
    return out
