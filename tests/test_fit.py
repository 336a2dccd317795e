"""ukjax.fit: parameter recovery, partial observations, batches, positivity, errors."""

import diffrax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import ukjax
from ukjax.systems import CartesianPendulum, DuffingOscillator


SIM = dict(solver=diffrax.Tsit5(), rtol=1e-10, atol=1e-10)


def _pendulum_data(batch: bool, observed=None):
    true = CartesianPendulum(mass=1.0, length=1.3, g=9.81)
    ts = jnp.linspace(0.0, 2.0, 21)
    th = jnp.array([0.5, 1.2]) if batch else jnp.array([0.9])
    q0 = 1.3 * jnp.stack([jnp.sin(th), -jnp.cos(th)], axis=-1)
    qd0 = jnp.zeros_like(q0)
    if not batch:
        q0, qd0 = q0[0], qd0[0]
    z = jnp.zeros(q0.shape[:-1] + (21, 2))
    clean = ukjax.predict(
        true,
        ukjax.TrajectoryData(ts, q0, qd0, q=z),
        initial_conditions=ukjax.IgnoreInitial(),
        **SIM,
    )
    return true, ukjax.TrajectoryData(ts, q0, qd0, q=clean["q"], observed=observed)


@pytest.mark.slow
def test_recovers_parameters_from_clean_batched_partial_data():
    """Two runs, only the x coordinate observed: g is recovered to 1e-6 from a 30 % error."""
    true, data = _pendulum_data(batch=True, observed=(0,))
    res = ukjax.fit(
        CartesianPendulum(mass=1.0, length=1.3, g=7.0), data, params=["g"], progress=False, **SIM
    )
    assert res.converged, res.message
    assert float(res.params["g"]) == pytest.approx(9.81, rel=1e-6)
    assert res.loss < 1e-12
    assert res.losses[0] > 1e3 * res.losses[-1]
    assert float(res.system.g) == float(res.params["g"])
    assert float(res.system.length) == 1.3  # fields not in params are untouched


def test_custom_loss_adam_and_unconstrained_parameter():
    """A user loss (closed form), optax.adam, and positive=False for a signed parameter."""
    target = jnp.array([1.0, -2.0])

    class Toy(ukjax.System):
        a: float = 0.0
        b: float = 0.0

        def mass_matrix(self, t, q):
            return jnp.eye(1)

    loss = lambda s: (s.a - target[0]) ** 2 + (s.b - target[1]) ** 2
    res = ukjax.fit(
        Toy(a=0.1, b=0.5),
        loss,
        params=["a", "b"],
        positive=False,
        optimiser=optax.adam(0.1),
        max_steps=2000,
        gtol=1e-6,
        progress=False,
    )
    assert res.converged
    np.testing.assert_allclose([res.params["a"], res.params["b"]], target, atol=1e-5)


def test_default_lbfgs_step_compiles_once():
    """optax's L-BFGS state turns weakly typed leaves strong in its first update; fit makes
    them strong up front, so its jitted step is traced once, not once more at step 2."""
    traces = []

    class Toy(ukjax.System):
        a: float = 0.0

        def mass_matrix(self, t, q):
            return jnp.eye(1)

    def loss(s):
        traces.append(1)  # runs when the step is traced, not when it runs
        return (s.a - 2.0) ** 2 + (s.a - 2.0) ** 4

    ukjax.fit(Toy(a=0.5), loss, params=["a"], max_steps=1, progress=False)
    once = len(traces)
    traces.clear()
    res = ukjax.fit(Toy(a=0.5), loss, params=["a"], max_steps=4, progress=False)
    assert res.steps >= 3 and len(traces) == once


@pytest.mark.slow
def test_positive_parameters_stay_positive():
    """With a log parametrisation a damping coefficient cannot cross zero even when the
    data pull it hard towards zero (true value 1e-3)."""
    true = DuffingOscillator(c1=1e-3)
    q0, qd0 = true.initial_state()
    ts = jnp.linspace(0.0, 1.0, 11)
    clean = ukjax.predict(
        true,
        ukjax.TrajectoryData(ts, q0, qd0, constraint_forces=jnp.zeros((11, 2))),
        initial_conditions=ukjax.IgnoreInitial(),
        **SIM,
    )
    data = ukjax.TrajectoryData(ts, q0, qd0, constraint_forces=clean["constraint_forces"])
    kw = dict(params=["c1"], optimiser=optax.adam(0.3), max_steps=60, progress=False, **SIM)
    res = ukjax.fit(DuffingOscillator(c1=0.5), data, **kw)
    assert float(res.params["c1"]) > 0
    assert res.losses[-1] < 1e-2 * res.losses[0]
    # The same optimiser on the raw parameter (positive=False) overshoots through zero to a
    # negative, unphysical damping: the log parametrisation is what keeps c1 positive.
    raw = ukjax.fit(DuffingOscillator(c1=0.5), data, positive=False, **kw)
    assert float(raw.params["c1"]) < 0
    assert raw.losses[-1] < 1e-2 * raw.losses[0]


def test_fields_written_as_integers_are_fitted_as_floats():
    """A user writes `g: int = 10`; fitting g starts from 10.0 and moves it off the
    integers (to the minimum at 9.81, with and without the log-parametrisation). A bool
    field still cannot be fitted."""

    class Toy(ukjax.System):
        g: int = 10
        steps: int = 3  # not fitted: stays an int
        on: bool = True

        def mass_matrix(self, t, q):
            return jnp.eye(1)

    loss = lambda s: (s.g - 9.81) ** 2 * s.steps
    for positive in (True, False):
        res = ukjax.fit(Toy(), loss, params=["g"], positive=positive, progress=False)
        assert res.converged, res.message
        np.testing.assert_allclose(float(res.system.g), 9.81, rtol=1e-8)
        assert jnp.asarray(res.system.g).dtype == jnp.float64
        assert res.system.steps == 3 and isinstance(res.system.steps, int)
    with pytest.raises(ValueError, match="'on' is not a floating-point value"):
        ukjax.fit(Toy(), lambda s: s.g * 1.0, params=["on"], progress=False)


def test_fit_argument_errors():
    _, data = _pendulum_data(batch=False)
    pend = CartesianPendulum()
    with pytest.raises(ValueError, match="has no field 'mass_'"):
        ukjax.fit(pend, data, params=["mass_"])
    with pytest.raises(ValueError, match="at least one field"):
        ukjax.fit(pend, data, params=[])
    with pytest.raises(ValueError, match="declared positive but its initial value"):
        ukjax.fit(CartesianPendulum(g=-1.0), data, params=["g"])
    with pytest.raises(ValueError, match="not among params"):
        ukjax.fit(pend, data, params=["g"], positive=["length"])
    with pytest.raises(TypeError, match="only apply when"):
        ukjax.fit(pend, lambda s: s.g**2, params=["g"], rtol=1e-8)
    with pytest.raises(ValueError, match="observes nothing"):
        ukjax.trajectory_loss(ukjax.TrajectoryData(data.ts, data.q0, data.qd0))
