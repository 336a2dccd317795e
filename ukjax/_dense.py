r"""Dense output of explicit Runge-Kutta steps with the polynomial's coefficients formed once
per step: :class:`PolynomialDense`, for batched runs.

A method's continuous extension is a polynomial in the step fraction
$\theta = (t - t_0)/h$ whose weights multiply the stages $k_s = h\,f(\cdot)$:

$$y(t_0 + \theta h) = y_0 + \sum_s b_s(\theta)\,k_s
  = y_0 + \sum_{p=1}^{d} \theta^p\,W_p,\qquad W_p = \sum_s c_{sp}\,k_s,$$

with $b_s(\theta) = \sum_p c_{sp}\theta^p$. diffrax evaluates the left form at every save
time: the $b_s(\theta)$, then a product with the stacked stages. Under `jax.vmap` that is
a batched matrix product over a short axis (and a transposed copy of the stages) at every
save, inside the loop over the saves of a step, a sizeable share of a batched run with
many saves (`benchmarks/RESULTS.md`, sweep section). :class:`PolynomialDense` is the right
form: the $W_p$ are formed once per step, as
sums with the weights as constants, and each save is $d$ multiply-adds (Horner), fused with
what follows. The same polynomial: values agree with diffrax's to rounding.

Batched runs of the double rod and the Duffing oscillator ran faster with it for every
method measured (`benchmarks/RESULTS.md`, sweep section). A forward
`vmap` of :func:`ukjax.simulate` and :func:`ukjax.sweep` use it (through
:class:`ukjax.StageLoop` or :class:`ukjax.Unrolled`, or as :class:`PolynomialOutput` for
a method they run as it is); a single trajectory keeps diffrax's interpolation (no
batched product to save, and its first call is compile-bound).

Known weights (:func:`polynomial_weights`): diffrax's `Dopri8` (Bogacki-Shampine's
interpolant, taken from diffrax's own table) and `Tsit5` (Tsitouras 2011, "Runge-Kutta
pairs of order 5(4) satisfying only the first column simplifying assumption", Comput.
Math. Appl. 62, eq. of the continuous extension; the factored form diffrax writes,
expanded here). Other methods keep diffrax's interpolation: `Dopri5`'s and the Hermite
interpolations already form their coefficients once per step.

Example:
    >>> import diffrax, jax.numpy as jnp
    >>> from ukjax._dense import PolynomialDense, polynomial_weights
    >>> make = PolynomialDense.maker(polynomial_weights(diffrax.Tsit5()))
    >>> k = jnp.arange(7.0)[:, None] * jnp.ones((7, 2))
    >>> ours = make(t0=0.0, t1=0.5, y0=jnp.ones(2), y1=None, k=k)
    >>> theirs = diffrax.Tsit5.interpolation_cls(t0=0.0, t1=0.5, y0=jnp.ones(2), y1=None, k=k)
    >>> bool(jnp.allclose(ours.evaluate(0.2), theirs.evaluate(0.2), rtol=1e-6))
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import diffrax
import equinox as eqx
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
from numpy.polynomial import polynomial as P

from ._wrapped import ForwardingSolver


Weights = tuple[tuple[float, ...], ...]  # (stages, degree): c_sp, p = 1..d


def _tsit5() -> np.ndarray:
    """Tsit5's $b_s(\theta)$ (diffrax's `_Tsit5Interpolation`, factored) as monomials."""
    t = np.array([0.0, 1.0])
    quad = lambda p, q: np.array([q, p, 1.0])  # theta^2 + p theta + q
    lin = lambda r: np.array([-r, 1.0])  # theta - r
    t2 = np.array([0.0, 0.0, 1.0])
    rows = [
        -1.0530884977290216
        * P.polymul(
            P.polymul(t, lin(1.3299890189751412)), quad(-1.4364028541716351, 0.7139816917074209)
        ),
        0.1017 * P.polymul(t2, quad(-2.1966568338249754, 1.2949852507374631)),
        2.490627285651252793 * P.polymul(t2, quad(-2.38535645472061657, 1.57803468208092486)),
        -16.54810288924490272
        * P.polymul(P.polymul(lin(1.21712927295533244), lin(0.61620406037800089)), t2),
        47.37952196281928122
        * P.polymul(P.polymul(lin(1.203071208372362603), lin(0.658047292653547382)), t2),
        -34.87065786149660974 * P.polymul(P.polymul(lin(1.2), lin(0.666666666666666667)), t2),
        2.5 * P.polymul(P.polymul(lin(1.0), lin(0.6)), t2),
    ]
    out = np.zeros((7, 5))
    for s, row in enumerate(rows):
        out[s, : row.size] = row
    return out[:, 1:]  # no constant term: b_s(0) = 0


def _dopri8() -> np.ndarray:
    r"""Dopri8's $b_s(\theta) = \theta\,\mathrm{polyval}(E_s, \theta)$ (diffrax's table
    $E$, highest power first) as monomials $\theta^1 \dots \theta^6$."""
    table = np.asarray(diffrax.Dopri8.interpolation_cls.eval_coeffs, dtype=np.float64)
    return table[:, ::-1]


def _known() -> dict[Any, Weights]:
    as_tuple = lambda a: tuple(tuple(float(c) for c in row) for row in a)
    return {
        diffrax.Dopri8.interpolation_cls: as_tuple(_dopri8()),
        diffrax.Tsit5.interpolation_cls: as_tuple(_tsit5()),
    }


def polynomial_weights(solver: diffrax.AbstractSolver) -> Weights | None:
    """The monomial weights $c_{sp}$ of `solver`'s dense output (a row per stage, the
    columns $\\theta^1 \\dots \\theta^d$), or None when ukjax does not know them (the
    solver's own interpolation is then used)."""
    return _known().get(getattr(solver, "interpolation_cls", None))


def combine(base, coefficients: Sequence[float], ks: list):
    """`base + sum_j c_j ks[j]` over the non-zero `c_j` (`base` None: the sum alone), leaf
    by leaf; the coefficients are compile-time constants (a Runge-Kutta stage
    combination, :class:`ukjax.Unrolled`; a power's coefficient, :class:`PolynomialDense`)."""
    used = [(float(c), k) for c, k in zip(coefficients, ks) if float(c) != 0.0]
    if base is None:
        base = jtu.tree_map(jnp.zeros_like, ks[0])

    def leaf(out, *terms):
        for (c, _), k in zip(used, terms):
            out = out + c * k
        return out

    return jtu.tree_map(leaf, base, *[k for _, k in used])


class PolynomialDense(diffrax.AbstractLocalInterpolation):
    r"""$y(t) = y_0 + \sum_{p=1}^{d}\theta^p W_p$ on the step $[t_0, t_1]$,
    $\theta = (t - t_0)/(t_1 - t_0)$ (0 on a step of length zero, as diffrax's
    `linear_rescale`); `coeffs` holds $(W_1, \dots, W_d)$, each shaped as $y$."""

    t0: Any
    t1: Any
    y0: Any
    coeffs: tuple

    @staticmethod
    def maker(weights: Weights) -> _Maker:
        """What a solver's `interpolation_cls` returns: called with diffrax's dense output
        `(t0, t1, y0, y1, k)`, it forms the $W_p$ (the stages' sums with `weights`)."""
        return _Maker(weights)

    def evaluate(self, t0, t1=None, left: bool = True):
        del left
        if t1 is not None:
            return jtu.tree_map(jnp.subtract, self.evaluate(t1), self.evaluate(t0))
        same = self.t0 == self.t1
        theta = jnp.where(same, 0.0, t0 - self.t0) / jnp.where(same, 1.0, self.t1 - self.t0)
        acc = self.coeffs[-1]
        for w in reversed(self.coeffs[:-1]):  # Horner
            acc = jtu.tree_map(lambda a, wp: wp + theta * a, acc, w)
        return jtu.tree_map(lambda y, a: y + (theta * a).astype(y.dtype), self.y0, acc)


class _Maker(eqx.Module):
    weights: Weights = eqx.field(static=True)

    def __call__(self, *, t0, t1, y0, y1, k) -> PolynomialDense:
        del y1  # the extension is y0 plus the stages' sums (as diffrax's own)
        stages = [jtu.tree_map(lambda x: x[s], k) for s in range(len(self.weights))]
        columns = zip(*self.weights)  # a power's coefficients over the stages
        coeffs = tuple(combine(None, column, stages) for column in columns)
        return PolynomialDense(t0=t0, t1=t1, y0=y0, coeffs=coeffs)


def polynomial_output(solver: diffrax.AbstractSolver):
    """`solver.interpolation_cls` with known weights (:func:`polynomial_weights`) replaced by
    :class:`PolynomialDense`'s maker; the solver's own otherwise."""
    weights = polynomial_weights(solver)
    return solver.interpolation_cls if weights is None else PolynomialDense.maker(weights)


class PolynomialOutput(ForwardingSolver):
    """`inner` (a solver whose weights :func:`polynomial_weights` knows) with its dense
    output as :class:`PolynomialDense`: the same steps, the saves formed once per step.
    The base of :class:`ukjax.StageLoop` and :class:`ukjax.Unrolled`.

    Example:
        >>> import diffrax
        >>> from ukjax._dense import PolynomialOutput
        >>> PolynomialOutput(diffrax.Dopri8()).order(None)
        8
    """

    inner: diffrax.AbstractSolver

    @property
    def solver(self):  # pyright: ignore[reportIncompatibleVariableOverride]
        return self.inner

    @property
    def interpolation_cls(self):  # pyright: ignore[reportIncompatibleVariableOverride]
        return polynomial_output(self.inner)
