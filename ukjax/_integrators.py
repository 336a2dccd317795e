r"""Fixed-step Runge-Kutta methods used in the literature (Bajodah 2003) and by MuJoCo, as
diffrax solvers.

Example:
    >>> import jax, jax.numpy as jnp, diffrax, ukjax
    >>> jax.config.update("jax_enable_x64", True)
    >>> from ukjax.systems import CartesianPendulum
    >>> ts = jnp.linspace(0.0, 1.0, 3)
    >>> for solver in (ukjax.KuttaMerson(), ukjax.RK4()):
    ...     sol = ukjax.simulate(CartesianPendulum(), jnp.array([1.0, 0.0]), jnp.zeros(2), ts,
    ...                          solver=solver, stepsize_controller=diffrax.ConstantStepSize(),
    ...                          dt0=1e-3)
    ...     print(sol.q.shape)
    (3, 2)
    (3, 2)
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from diffrax import AbstractERK, ButcherTableau

from ._kernels import norm_unrolled


def default_solver() -> diffrax.AbstractSolver:
    """The solver :func:`ukjax.simulate` runs when given none (`diffrax.Dopri8()`, 8th
    order, adaptive); batches decide how to run it (:func:`ukjax._unrolled.batched_solver`)."""
    return diffrax.Dopri8()


UNROLLED_NORM_MAX = 64  # states up to this size: the error norm as multiply-adds


def error_norm(x: Any) -> jax.Array:
    r"""The RMS norm $\sqrt{\tfrac1N\sum_i x_i^2}$ over every entry of a pytree: the
    norm of the default step-size controller (:func:`default_controller`), the same value
    as diffrax's default `optimistix.rms_norm` (and, like it, a zero derivative where the
    norm is 0 or infinite).

    For at most :data:`UNROLLED_NORM_MAX` entries the sum is a chain of multiply-adds
    over the entries instead of a reduction: under `vmap` XLA:CPU (jaxlib 0.10) hands a
    batched reduction over a short axis to YNNPACK, which is slow for short axes, and in a
    plain `jax.jit(jax.vmap(simulate))` this norm was the only such reduction in the
    integration loop (the cost is measured in `benchmarks/RESULTS.md`, sweep section).

    Example:
        >>> import jax.numpy as jnp
        >>> from ukjax._integrators import error_norm
        >>> float(error_norm((jnp.array([3.0, 0.0]), jnp.array([4.0, 0.0]))))
        2.5
    """
    leaves = [jnp.ravel(leaf) for leaf in jax.tree_util.tree_leaves(x)]
    size = sum(leaf.size for leaf in leaves)
    if size == 0 or size > UNROLLED_NORM_MAX or any(jnp.iscomplexobj(v) for v in leaves):
        return optx.rms_norm(x)
    return _unrolled_rms(leaves)


@jax.custom_jvp
def _unrolled_rms(leaves: list[jax.Array]) -> jax.Array:
    flat = jnp.concatenate(leaves)
    return norm_unrolled(flat) / math.sqrt(flat.size)  # as optimistix: 2-norm / sqrt(N)


@_unrolled_rms.defjvp
def _unrolled_rms_jvp(primals, tangents):
    (leaves,), (dleaves,) = primals, tangents
    out = _unrolled_rms(leaves)
    bad = (out == 0) | jnp.isinf(out)  # zero, not NaN, derivative there (as optimistix)
    size = sum(leaf.size for leaf in leaves)
    scale = jnp.where(bad, 1.0, out) * size
    dot = sum(jnp.sum(x * dx) for x, dx in zip(leaves, dleaves))
    return out, jnp.where(bad, 0.0, dot / scale)


def default_controller(rtol: float, atol: float) -> diffrax.PIDController:
    """The step-size controller :func:`ukjax.simulate` uses when given none: diffrax's
    `PIDController` (integral control) with :func:`error_norm`."""
    return diffrax.PIDController(rtol=rtol, atol=atol, norm=error_norm)


_kutta_merson_tableau = ButcherTableau(
    a_lower=(
        np.array([1 / 3]),
        np.array([1 / 6, 1 / 6]),
        np.array([1 / 8, 0.0, 3 / 8]),
        np.array([1 / 2, 0.0, -3 / 2, 2.0]),
    ),
    b_sol=np.array([1 / 6, 0.0, 0.0, 2 / 3, 1 / 6]),
    # Merson's error estimate h/30 (2k1 - 9k3 + 8k4 - k5).
    b_error=np.array([2 / 30, 0.0, -9 / 30, 8 / 30, -1 / 30]),
    c=np.array([1 / 3, 1 / 3, 1 / 2, 1.0]),
)


class KuttaMerson(AbstractERK):
    r"""The Kutta-Merson 4th-order method with Merson's error estimate (5 stages).

    The fixed-step integrator of Bajodah (2003, *Acceleration Constraints in Modeling and
    Control of Nonholonomic Systems*, §4.6):
    $k_1 = f(y)$, $k_2 = f(y + \tfrac h3k_1)$, $k_3 = f(y + \tfrac h6(k_1 + k_2))$,
    $k_4 = f(y + \tfrac h8(k_1 + 3k_3))$, $k_5 = f(y + h(\tfrac12k_1 - \tfrac32k_3 + 2k_4))$,
    $y_{n+1} = y_n + \tfrac h6(k_1 + 4k_4 + k_5)$. Use with
    `diffrax.ConstantStepSize()` and `dt0` to reproduce the thesis' runs.
    """

    tableau: ClassVar[ButcherTableau] = _kutta_merson_tableau
    interpolation_cls: ClassVar = diffrax.ThirdOrderHermitePolynomialInterpolation.from_k

    def order(self, terms):
        del terms
        return 4


_rk4_tableau = ButcherTableau(
    a_lower=(np.array([1 / 2]), np.array([0.0, 1 / 2]), np.array([0.0, 0.0, 1.0])),
    b_sol=np.array([1 / 6, 1 / 3, 1 / 3, 1 / 6]),
    # The classical method has no embedded pair: the "error" is the difference from the
    # 2nd-order midpoint rule (k2), usable only for rough step control.
    b_error=np.array([1 / 6, 1 / 3 - 1.0, 1 / 3, 1 / 6]),
    c=np.array([1 / 2, 1 / 2, 1.0]),
)


class RK4(AbstractERK):
    r"""The classical 4th-order Runge-Kutta method (4 stages).

    $k_1 = f(y)$, $k_2 = f(y + \tfrac h2k_1)$, $k_3 = f(y + \tfrac h2k_2)$,
    $k_4 = f(y + hk_3)$, $y_{n+1} = y_n + \tfrac h6(k_1 + 2k_2 + 2k_3 + k_4)$: the same
    method as MuJoCo's `integrator="RK4"`, for comparisons at equal cost per step. Use with
    `diffrax.ConstantStepSize()` and `dt0`.
    """

    tableau: ClassVar[ButcherTableau] = _rk4_tableau
    interpolation_cls: ClassVar = diffrax.ThirdOrderHermitePolynomialInterpolation.from_k

    def order(self, terms):
        del terms
        return 4
