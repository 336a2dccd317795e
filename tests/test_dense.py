"""PolynomialDense: the dense output of Dopri8 and Tsit5 with its coefficients formed once
per step (issue 17). The reference is diffrax's own interpolation of the same step (the
same polynomial, written differently); whole batched runs are compared with diffrax's
interpolation in tests/test_simulate.py and tests/test_unrolled.py."""

import diffrax
import jax.numpy as jnp
import numpy as np
import pytest

from ukjax._dense import PolynomialDense, PolynomialOutput, polynomial_output, polynomial_weights


METHODS = [diffrax.Dopri8, diffrax.Tsit5]


def _step(rng, stages, dtype):
    """A step's dense output (a two-leaf state, as simulate's (q, qd)) with stages of very
    different sizes, and save times across it (its ends included)."""
    y0 = (jnp.asarray(rng.standard_normal(3), dtype), jnp.asarray(rng.standard_normal(3), dtype))
    scale = 10.0 ** rng.uniform(-3, 1, (stages, 1))
    k = tuple(jnp.asarray(scale * rng.standard_normal((stages, 3)), dtype) for _ in range(2))
    return dict(t0=1.5, t1=1.75, y0=y0, y1=y0, k=k)


@pytest.mark.parametrize("method", METHODS, ids=lambda m: m.__name__)
@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
def test_equals_diffrax_interpolation(rng, method, dtype):
    stages = method.tableau.num_stages
    dense = _step(rng, stages, dtype)
    ours = PolynomialDense.maker(polynomial_weights(method()))(**dense)
    theirs = method.interpolation_cls(**dense)
    eps = float(jnp.finfo(dtype).eps)
    size = sum(float(jnp.abs(x).sum()) for x in dense["k"])
    for t in [1.5, 1.5 + 1e-9, 1.56, 1.625, 1.7, 1.75]:
        for a, b in zip(ours.evaluate(t), theirs.evaluate(t)):
            assert a.dtype == dtype
            np.testing.assert_allclose(a, b, rtol=0, atol=200 * eps * (1 + size))
    # increments (diffrax's own increment of a tuple state subtracts tuples: by leaf here)
    later, earlier = theirs.evaluate(1.7), theirs.evaluate(1.56)
    for a, b, c in zip(ours.evaluate(1.56, 1.7), later, earlier):
        np.testing.assert_allclose(a, b - c, rtol=0, atol=200 * eps * (1 + size))
    # the ends: y0 exactly, and y0 + sum_s b_s k_s (the method's solution weights; diffrax's
    # Dopri8 interpolation table meets them to 1e-12 only, its published digits)
    for a, y in zip(ours.evaluate(1.5), dense["y0"]):
        np.testing.assert_array_equal(a, y)
    b_sol = np.asarray(method.tableau.b_sol)
    gap = np.abs(np.sum(polynomial_weights(method()), axis=1) - b_sol).max()
    assert gap < (1e-11 if method is diffrax.Dopri8 else 1e-13)
    for a, y, k in zip(ours.evaluate(1.75), dense["y0"], dense["k"]):
        want = np.asarray(y, np.float64) + b_sol @ np.asarray(k, np.float64)
        np.testing.assert_allclose(a, want, rtol=0, atol=(200 * eps + gap) * (1 + size))


def test_a_step_of_zero_length_gives_its_start(rng):
    dense = dict(_step(rng, 14, jnp.float64), t0=2.0, t1=2.0)
    out = PolynomialDense.maker(polynomial_weights(diffrax.Dopri8()))(**dense).evaluate(2.0)
    for a, y in zip(out, dense["y0"]):
        np.testing.assert_array_equal(a, y)


def test_only_known_methods_are_rewritten():
    assert polynomial_weights(diffrax.Dopri5()) is None  # forms its coefficients per step
    assert polynomial_weights(diffrax.Bosh3()) is None
    assert polynomial_output(diffrax.Dopri5()) is diffrax.Dopri5.interpolation_cls
    assert len(polynomial_weights(diffrax.Dopri8())) == 14
    assert len(polynomial_weights(diffrax.Tsit5())) == 7
    solver = PolynomialOutput(diffrax.Dopri8())
    assert solver.order(None) == 8 and isinstance(solver, diffrax.AbstractAdaptiveSolver)


def test_a_run_with_it_equals_diffrax_interpolation():
    """One trajectory of a pendulum (Dopri8, 41 saves, several per step) with its saves
    from PolynomialDense and from diffrax's interpolation, on the same uneven steps (the
    same stage loop, diffrax's): the saves equal to rounding. The steps are given
    (`StepTo`): two adaptive runs may take steps that differ by rounding (the two programs
    fuse differently; on an H200 the saves then differed by the tolerance, 4e-9), which
    would test the step-size controller rather than the interpolation."""
    term = diffrax.ODETerm(lambda t, y, args: jnp.array([y[1], -9.81 * jnp.sin(y[0])]))
    ts = jnp.linspace(0.0, 2.0, 41)
    steps = 2.0 * jnp.linspace(0.0, 1.0, 13) ** 1.3  # 12 steps, shorter at the start

    def run(solver):
        return diffrax.diffeqsolve(
            term,
            solver,
            0.0,
            2.0,
            None,
            jnp.array([1.0, 0.0]),
            saveat=diffrax.SaveAt(ts=ts),
            stepsize_controller=diffrax.StepTo(ts=steps),
        )

    ours, theirs = run(PolynomialOutput(diffrax.Dopri8())), run(diffrax.Dopri8())
    assert int(ours.stats["num_steps"]) == int(theirs.stats["num_steps"]) == 12
    np.testing.assert_allclose(ours.ys, theirs.ys, rtol=0, atol=1e-13)
