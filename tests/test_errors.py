"""Bad input gets a clear error that says what to fix; nothing silent."""

import inspect

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ukjax
import ukjax.systems
from ukjax._system import hidden_methods, misnamed_hooks
from ukjax._uk import factored
from ukjax.systems import CartesianPendulum, DoubleRodPendulum


RUNTIME = (eqx.EquinoxRuntimeError, RuntimeError)


def test_shape_errors_at_trace_time():
    M, Q, A, b = jnp.eye(3), jnp.zeros(3), jnp.ones((2, 3)), jnp.zeros(2)
    with pytest.raises(ValueError, match="M must be a square"):
        ukjax.udwadia_kalaba(jnp.ones((3, 2)), Q, A, b)
    with pytest.raises(ValueError, match="Q must have shape"):
        ukjax.udwadia_kalaba(M, jnp.zeros(2), A, b)
    with pytest.raises(ValueError, match="A must have shape"):
        ukjax.udwadia_kalaba(M, Q, jnp.ones((2, 4)), b)
    with pytest.raises(ValueError, match="b must have shape"):
        ukjax.udwadia_kalaba(M, Q, A, jnp.zeros(3))
    with pytest.raises(ValueError, match="C must have shape"):
        ukjax.udwadia_kalaba(M, Q, A, b, jnp.zeros(2))
    with pytest.raises(TypeError, match="uk_solver must be a UK solver strategy"):
        ukjax.udwadia_kalaba(M, Q, A, b, uk_solver="qr")
    # ...also when traced under jit.
    with pytest.raises(ValueError, match="A must have shape"):
        jax.jit(ukjax.udwadia_kalaba)(M, Q, jnp.ones((2, 4)), b)


def test_the_matrix_and_system_functions_given_each_others_arguments_say_so():
    # A user who calls constraint_forces like acceleration(system, t, q, qd) got JAX's
    # "dtype object is not a valid JAX array type"; the message now names the forms.
    pend, q, qd = CartesianPendulum(), jnp.array([0.0, -1.0]), jnp.zeros(2)  # hanging
    for fn in (ukjax.constraint_forces, ukjax.udwadia_kalaba, ukjax.uk_terms):
        with pytest.raises(TypeError, match=r"not a system; got CartesianPendulum.*diagnostics"):
            fn(pend, 0.0, q, qd)
    M, Q = ukjax.mass_and_force(pend, 0.0, q, qd)
    A, b = ukjax.constraint_matrices(pend, 0.0, q, qd)
    Qc, _ = ukjax.constraint_forces(M, Q, A, b)
    np.testing.assert_allclose(Qc, [0.0, 9.81], atol=1e-12)  # the rod holds the bob up
    # ...and the other way round: the functions of a system given the matrices.
    for fn in (ukjax.acceleration, ukjax.energy, ukjax.constraint_matrices, ukjax.simulate):
        with pytest.raises(TypeError, match=r"must be a ukjax.System; got an array.*udwadia_k"):
            fn(M, Q, A, b)


def test_state_and_system_errors():
    pend = CartesianPendulum()
    ts = jnp.linspace(0, 1, 3)
    with pytest.raises(ValueError, match=r"qd \(the velocities\) must have the same shape"):
        ukjax.simulate(pend, jnp.zeros(2), jnp.zeros(3), ts)
    for args, name in (((None, jnp.zeros(2)), "q"), ((jnp.zeros(2), None), "qd")):
        with pytest.raises(ValueError, match=rf"^{name} \(the initial .*\) is None"):
            ukjax.simulate(pend, *args, ts)
    with pytest.raises(ValueError, match="q must be a 1-D array"):
        ukjax.acceleration(pend, 0.0, jnp.zeros((4, 2)), jnp.zeros((4, 2)))
    with pytest.raises(ValueError, match="ts must be a 1-D array of at least 2"):
        ukjax.simulate(pend, jnp.array([1.0, 0]), jnp.zeros(2), jnp.array([0.0]))
    for bad_ts in ([0.0, 2.0, 1.0], [1.0, 0.5], [0.0, float("nan"), 1.0]):
        with pytest.raises(ValueError, match="finite and strictly increasing"):
            ukjax.simulate(pend, jnp.array([1.0, 0]), jnp.zeros(2), jnp.array(bad_ts))
    with pytest.raises(TypeError, match="initial_conditions must be"):
        ukjax.simulate(pend, jnp.array([1.0, 0]), jnp.zeros(2), ts, initial_conditions="fix")
    with pytest.raises(TypeError, match=r"pass ukjax\.ProjectInitial\(\)"):
        ukjax.simulate(pend, jnp.array([1.0, 0]), jnp.zeros(2), ts, initial_conditions="project")
    with pytest.raises(TypeError, match="stabilization must be"):
        ukjax.simulate(pend, jnp.array([1.0, 0]), jnp.zeros(2), ts, stabilization="projection")
    for bad, msg in (
        (dict(rtol=-1e-8), "rtol must be finite and >= 0"),
        (dict(atol=float("nan")), "atol must be finite and >= 0"),
        (dict(rtol="tight"), "rtol must be a real number"),
        (dict(rtol=0.0, atol=0.0), "both 0"),
    ):
        with pytest.raises(ValueError, match=msg):
            ukjax.simulate(pend, jnp.array([1.0, 0]), jnp.zeros(2), ts, **bad)

    class NoInertia(ukjax.System):
        pass

    with pytest.raises(NotImplementedError, match="neither kinetic_energy"):
        ukjax.acceleration(NoInertia(), 0.0, jnp.zeros(2), jnp.zeros(2))

    class BadPhi(ukjax.System):
        def mass_matrix(self, t, q):
            return jnp.eye(2)

        def holonomic(self, t, q):
            return jnp.ones((2, 2))

    with pytest.raises(ValueError, match="holonomic must return a 1-D array"):
        ukjax.acceleration(BadPhi(), 0.0, jnp.zeros(2), jnp.zeros(2))

    class BadGaps(ukjax.System):
        def mass_matrix(self, t, q):
            return jnp.eye(2)

        def unilateral(self, t, q):
            return jnp.ones((2, 2))

    with pytest.raises(ValueError, match="unilateral must return a 1-D array .* or a scalar"):
        ukjax.simulate(BadGaps(), jnp.ones(2), jnp.zeros(2), ts)

    class BadMass(ukjax.System):
        def mass_matrix(self, t, q):
            return jnp.eye(3)

    with pytest.raises(ValueError, match=r"must have shape \(2, 2\)"):
        ukjax.acceleration(BadMass(), 0.0, jnp.zeros(2), jnp.zeros(2))


@pytest.mark.parametrize("jit", [False, True])
def test_non_spd_mass_matrix(jit):
    f = jax.jit(ukjax.udwadia_kalaba) if jit else ukjax.udwadia_kalaba
    A, b = jnp.array([[1.0, 0.0]]), jnp.zeros(1)
    with pytest.raises(RUNTIME, match="not symmetric positive definite"):
        jax.block_until_ready(f(jnp.diag(jnp.array([1.0, -2.0])), jnp.ones(2), A, b))
    with pytest.raises(RUNTIME, match="not symmetric positive definite"):
        jax.block_until_ready(f(jnp.array([[2.0, 1.0], [0.0, 2.0]]), jnp.ones(2), A, b))


@pytest.mark.parametrize("kernels", [ukjax.UnrolledKernels(), ukjax.LapackKernels()])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_non_finite_entry_below_the_diagonal_reaches_a_pivot(kernels, bad):
    # factored() reads the pivots only: a Cholesky factor with a non-finite entry anywhere
    # has a non-finite (or NaN) pivot after it, for the unrolled and the LAPACK kernels.
    M0 = jnp.array([[4.0, 1.0, 0.5, 0.2], [1.0, 3.0, 0.3, 0.1], [0.5, 0.3, 2.0, 0.4]])
    M0 = jnp.concatenate([M0, jnp.array([[0.2, 0.1, 0.4, 5.0]])])
    ops = kernels.ops(4)
    assert bool(factored(ops.cholesky(M0), M0))
    for i, j in [(1, 0), (2, 0), (3, 1), (3, 2)]:
        M = M0.at[i, j].set(bad).at[j, i].set(bad)
        L = ops.cholesky(M)
        assert not bool(factored(L, M)), (i, j)
        assert not bool(jnp.all(jnp.isfinite(jnp.diagonal(L)))), (i, j)


def test_a_mass_matrix_the_system_writes_is_checked_for_symmetry_a_hessian_is_not():
    class Skewed(ukjax.System):  # M01 = cos(q0), M10 = 1: equal at q0 = 0 only
        def mass_matrix(self, t, q):
            return jnp.array([[2.0, jnp.cos(q[0])], [1.0, 2.0]])

    class Lagrangian(ukjax.System):  # the same coupling, symmetric: T = qd^T M qd / 2
        def kinetic_energy(self, t, q, qd):
            return qd[0] ** 2 + qd[1] ** 2 + jnp.cos(q[0]) * qd[0] * qd[1]

    q, qd = jnp.array([0.7, 0.0]), jnp.array([0.3, -0.2])
    with pytest.raises(RUNTIME, match="not symmetric positive definite"):
        jax.block_until_ready(ukjax.acceleration(Skewed(), 0.0, q, qd))
    ukjax.acceleration(Skewed(), 0.0, jnp.zeros(2), qd)  # symmetric there: no error
    assert not ukjax._dynamics.symmetric_mass(Skewed())
    assert ukjax._dynamics.symmetric_mass(Lagrangian())
    ev = ukjax._dynamics.evaluate(Lagrangian(), jnp.asarray(0.0), q, qd)
    assert ev.symmetric and float(ev.failures().relative_asymmetry) == 0.0
    # the check skipped is the Hessian's round-off; the acceleration is the closed form
    c, s = np.cos(0.7), np.sin(0.7)
    M = np.array([[2.0, c], [c, 2.0]])
    # d/dt (M qd) - dT/dq = 0: M qdd = -dM/dt qd + dT/dq
    dMdt = np.array([[0.0, -s * 0.3], [-s * 0.3, 0.0]])
    dTdq = np.array([-s * 0.3 * -0.2, 0.0])
    expected = np.linalg.solve(M, -dMdt @ np.array([0.3, -0.2]) + dTdq)
    got = ukjax.acceleration(Lagrangian(), 0.0, q, qd)
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-12, atol=1e-14)


def test_non_finite_inputs():
    with pytest.raises(RUNTIME, match="non-finite value"):
        ukjax.udwadia_kalaba(jnp.eye(2), jnp.array([jnp.nan, 0.0]), jnp.ones((1, 2)), jnp.zeros(1))


def test_inconsistent_constraints_are_reported(capfd):
    A = jnp.array([[1.0, 0.0], [1.0, 0.0]])
    b = jnp.array([0.0, 1.0])  # x'' = 0 and x'' = 1
    with pytest.raises(RUNTIME, match="inconsistent constraints"):
        jax.block_until_ready(ukjax.udwadia_kalaba(jnp.eye(2), jnp.zeros(2), A, b))
    err = capfd.readouterr().err
    assert "relative_residual" in err  # the size of the inconsistency is printed
    # Without checks, the least-squares compromise is returned (documented behaviour).
    qdd = ukjax.udwadia_kalaba(jnp.eye(2), jnp.zeros(2), A, b, check=False)
    np.testing.assert_allclose(qdd, [0.5, 0.0], atol=1e-12)


@pytest.mark.slow
def test_initial_conditions_violating_constraints():
    sys = DoubleRodPendulum()
    ts = jnp.linspace(0.0, 0.5, 3)
    q0 = jnp.array([1.05, 0.0, 0.0])
    qd0 = jnp.array([0.3, 4.0, 0.0])
    with pytest.raises(
        ValueError, match=r"max\|phi\| = 5\.\d+e-02.*initial_conditions=ukjax\.ProjectInitial\(\)"
    ) as info:
        ukjax.simulate(sys, q0, qd0, ts)
    assert "max|phi_dot|" in str(info.value)
    # Inside jit the check still fires (as a runtime error) and prints the residuals.
    with pytest.raises(RUNTIME, match="initial conditions violate the constraints"):
        jax.block_until_ready(jax.jit(lambda a, b: ukjax.simulate(sys, a, b, ts).q)(q0, qd0))
    # The way out: project onto the constraint manifold in the mass metric.
    sol = ukjax.simulate(sys, q0, qd0, ts, initial_conditions=ukjax.ProjectInitial())
    res = ukjax.constraint_residuals(sys, 0.0, sol.q[0], sol.qd[0])
    assert float(res.max_abs()) < 1e-12
    # 'ignore' integrates as given: the UK equation keeps the initial violation.
    sol = ukjax.simulate(sys, q0, qd0, ts, initial_conditions=ukjax.IgnoreInitial())
    assert float(ukjax.constraint_residuals(sys, 0.0, sol.q[-1], sol.qd[-1]).max_abs()) > 1e-3


def test_project_initial_conditions_is_mass_metric_nearest(rng):
    """For the sphere |q| = L with M = m I, the nearest point is the radial projection and
    the velocity loses exactly its radial component."""
    pend = CartesianPendulum(length=2.0)
    q0 = jnp.array([1.0, 1.5])
    qd0 = jnp.array([0.4, -0.2])
    q, qd = ukjax.project_initial_conditions(pend, 0.0, q0, qd0)
    np.testing.assert_allclose(q, 2.0 * q0 / jnp.linalg.norm(q0), rtol=1e-12)
    n = q / jnp.linalg.norm(q)
    np.testing.assert_allclose(qd, qd0 - (qd0 @ n) * n, atol=1e-12)


def test_check_can_be_switched_off_and_returns_nan_not_garbage():
    qdd = ukjax.udwadia_kalaba(
        -jnp.eye(2), jnp.ones(2), jnp.ones((1, 2)), jnp.zeros(1), check=False
    )
    assert not np.all(np.isfinite(qdd))


def test_save_times_are_checked_under_jit_too():
    """Decreasing, non-monotone or NaN ts under jax.jit: the run raises with the eager
    message (with throw=False too: bad inputs are not a run's failure), never integrates
    backwards or returns NaN saves marked successful."""
    pend = CartesianPendulum()
    run = jax.jit(
        lambda ts: ukjax.simulate(pend, jnp.array([1.0, 0]), jnp.zeros(2), ts, throw=False).q
    )
    for bad_ts in ([1.0, 0.5, 0.0], [0.0, 2.0, 1.0], [0.0, float("nan"), 1.0]):
        with pytest.raises(Exception, match="finite and strictly increasing"):
            jax.block_until_ready(run(jnp.array(bad_ts)))


class Float32Constraint(ukjax.System):
    def mass_matrix(self, t, q):
        return jnp.eye(2)

    def potential_energy(self, t, q):
        return 9.81 * q[1]

    def holonomic(self, t, q):
        return jnp.array([q @ q - 1.0], dtype=jnp.float32)


def test_a_hook_in_lower_precision_than_the_state_is_named():
    """A float32 constraint under x64 would round far above the tolerance and end in
    rejected steps: refused with an error that names the hook and the dtypes."""
    with pytest.raises(ValueError, match=r"Float32Constraint\.holonomic returned float32"):
        ukjax.simulate(
            Float32Constraint(), jnp.array([1.0, 0.0]), jnp.zeros(2), jnp.linspace(0.0, 1.0, 3)
        )


@pytest.mark.slow  # default-suite time (7 s)
def test_solution_status_names_the_result_for_one_run_and_a_batch():
    """RESULTS prints success as RESULTS<> (diffrax's empty message): `status` names it."""
    run = lambda m: ukjax.simulate(
        CartesianPendulum(mass=m), jnp.array([1.0, 0.0]), jnp.zeros(2),
        jnp.linspace(0.0, 0.5, 3), throw=False,
    )  # fmt: skip
    assert run(1.0).status == "successful"
    batch = jax.vmap(run)(jnp.array([1.0, -1.0]))
    assert list(batch.status) == ["successful", "mass_matrix_not_spd"]


class _DampedPendulum(ukjax.System):
    """A pendulum in its angle, with a damping torque `c * qd` written under a name ukjax
    does not call (`generalized_force`, the literature's): silently undamped before."""

    damping: float = 0.5

    def kinetic_energy(self, t, q, qd):
        return 0.5 * qd @ qd

    def potential_energy(self, t, q):
        return -9.81 * jnp.cos(q[0])

    def generalized_force(self, t, q, qd):
        return -self.damping * qd

    def link_lengths(self):  # a helper of the user's own: not a misnamed method
        return jnp.ones(1)


class _Misspelled(CartesianPendulum):
    def potential_enegy(self, t, q):  # a typo of potential_energy
        return 0.0 * q[0]

    def holonomic_constraints(self, t, q):  # an alias of holonomic
        return q @ q - 1.0


def test_a_method_that_ukjax_never_calls_but_names_a_system_method_is_reported():
    q, qd = jnp.array([0.3]), jnp.zeros(1)
    with pytest.warns(UserWarning, match=r"_DampedPendulum.generalized_force is not a ukjax"):
        ukjax.acceleration(_DampedPendulum(), 0.0, q, qd)
    with pytest.warns(UserWarning, match=r"did you mean forces\(self, t, q, qd\)"):
        M, Q = ukjax.mass_and_force(_DampedPendulum(), 0.0, q, qd)
    assert float(Q[0]) == pytest.approx(-9.81 * np.sin(0.3))  # undamped: the method unused
    names = dict(misnamed_hooks(_Misspelled))
    assert names == {"potential_enegy": "potential_energy", "holonomic_constraints": "holonomic"}
    # the System's own methods, helpers with other names and ukjax's systems: nothing
    assert misnamed_hooks(CartesianPendulum) == []
    for _, cls in inspect.getmembers(ukjax.systems, inspect.isclass):
        if issubclass(cls, ukjax.System):
            assert misnamed_hooks(cls) == [], cls


class _Pushed(ukjax.System):
    """A constant force written as a field named like the method that gives forces."""

    forces: jax.Array

    def kinetic_energy(self, t, q, qd):
        return 0.5 * qd @ qd


class _Rough(ukjax.System):
    """A coefficient named like the contact method `friction`: harmless to the functions of
    one state (they never call it), fatal to a run (which does)."""

    friction: float = 0.3

    def kinetic_energy(self, t, q, qd):
        return 0.5 * qd @ qd


def test_a_field_that_hides_a_method_ukjax_calls_is_named_before_jax_fails_on_it():
    # JAX's own message was "the first argument must be callable" or "'DynamicJaxprTracer'
    # object is not callable", naming neither the field nor the method.
    q, qd = jnp.array([0.3]), jnp.zeros(1)
    with pytest.raises(TypeError, match=r"_Pushed.forces is a field, but ukjax calls forces"):
        ukjax.acceleration(_Pushed(jnp.ones(1)), 0.0, q, qd)
    with pytest.raises(TypeError, match=r"return self.forces_value"):
        ukjax.simulate(_Pushed(jnp.ones(1)), q, qd, jnp.array([0.0, 0.1]))
    assert float(ukjax.acceleration(_Rough(), 0.0, q, qd)[0]) == 0.0
    with pytest.raises(TypeError, match=r"_Rough.friction is a field, but ukjax calls friction"):
        ukjax.simulate(_Rough(), q, qd, jnp.array([0.0, 0.1]))
    for _, cls in inspect.getmembers(ukjax.systems, inspect.isclass):
        if issubclass(cls, ukjax.System):
            assert hidden_methods(cls, run=True) == [], cls
