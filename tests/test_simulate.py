"""simulate against independent references; batching, jit and tracing behaviour."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import ukjax
from ukjax.systems import CartesianPendulum, DoubleRodPendulum, DuffingOscillator


def test_cartesian_pendulum_against_minimal_coordinates_dop853():
    """The UK Cartesian pendulum vs theta'' = -(g/L) sin theta by scipy DOP853 (rtol 1e-12)."""
    L, g = 1.2, 9.81
    th0, thd0 = 2.0, 0.5  # large amplitude: strongly nonlinear
    ts = np.linspace(0.0, 5.0, 51)
    ref = solve_ivp(
        lambda t, y: [y[1], -(g / L) * np.sin(y[0])],
        (0, 5),
        [th0, thd0],
        method="DOP853",
        rtol=1e-12,
        atol=1e-12,
        t_eval=ts,
    )
    pend = CartesianPendulum(length=L, g=g)
    q0 = L * jnp.array([np.sin(th0), -np.cos(th0)])
    qd0 = L * thd0 * jnp.array([np.cos(th0), np.sin(th0)])
    sol = ukjax.simulate(pend, q0, qd0, ts)
    x_ref = L * np.sin(ref.y[0])
    y_ref = -L * np.cos(ref.y[0])
    err = max(np.abs(sol.q[:, 0] - x_ref).max(), np.abs(sol.q[:, 1] - y_ref).max())
    assert err < 1e-8, err
    # Drift of the position constraint and energy stay at the integration tolerance.
    drift = np.abs(np.sum(np.asarray(sol.q) ** 2, axis=1) - L**2).max()
    assert drift < 1e-8, drift
    E = jax.vmap(lambda q, qd: ukjax.energy(pend, 0.0, q, qd))(sol.q, sol.qd)
    assert float(jnp.max(jnp.abs(E - E[0]))) < 1e-8


def test_double_rod_pendulum_invariants_and_scipy():
    """Seed 000 §3.4 with its initial state; constraints, energy and x + z = 1 preserved,
    and the trajectory agrees with eq 78 integrated by scipy DOP853 at rtol 1e-12."""
    sys = DoubleRodPendulum()
    q0, qd0 = sys.initial_state()
    ts = np.linspace(0.0, 3.0, 31)
    sol = ukjax.simulate(sys, q0, qd0, ts)

    def eq78(t, s):
        x, y, z, xd, yd, zd = s
        al = xd**2 + yd**2 + zd**2
        D = x**2 + 2 * y**2 - 2 * x * z + z**2
        g = 10.0
        return [
            xd,
            yd,
            zd,
            (-al * (x - z) + g * y**2) / D,
            -y * (2 * al + g * x - g * z) / D,
            (al * (x - z) - g * y**2) / D,
        ]

    ref = solve_ivp(
        eq78, (0, 3), np.concatenate([q0, qd0]), method="DOP853", rtol=1e-12, atol=1e-12, t_eval=ts
    )
    np.testing.assert_allclose(sol.q, ref.y[:3].T, atol=1e-7)
    res = jax.vmap(lambda q, qd: ukjax.constraint_residuals(sys, 0.0, q, qd).max_abs())(
        sol.q, sol.qd
    )
    assert float(res.max()) < 1e-8
    np.testing.assert_allclose(sol.q[:, 0] + sol.q[:, 2], 1.0, atol=1e-9)
    E = jax.vmap(lambda q, qd: ukjax.energy(sys, 0.0, q, qd))(sol.q, sol.qd)
    assert float(jnp.max(jnp.abs(E - E[0]))) < 1e-8
    # The bob leaves the plane (z moves significantly) and swings back and forth in y.
    assert float(jnp.max(sol.q[:, 2])) > 0.1
    assert float(jnp.min(sol.q[:, 1])) < -0.1 < 0.1 < float(jnp.max(sol.q[:, 1]))


def test_duffing_constrained_follows_prescribed_motion_and_scipy():
    """Seed 000 §3.3: x1 - x2 tracks A0 e^{-at} sin(wt); compare with the closed-form
    eq 67 integrated by scipy DOP853."""
    sys = DuffingOscillator()
    q0, qd0 = sys.initial_state()
    ts = np.linspace(0.0, 5.0, 501)
    sol = ukjax.simulate(sys, q0, qd0, ts)
    target = np.asarray(sys.prescribed_relative_motion(ts))
    err = np.abs(np.asarray(sol.q[:, 0] - sol.q[:, 1]) - target).max()
    assert err < 1e-9, err

    m1, m2, k1, k2, kn1, kn2, c1, c2 = 2.0, 1.0, 10.0, 12.0, 1.0, 2.0, 0.1, 0.15
    w, al, A0 = 2 * np.pi, 1.0, 1.0

    def eq67(t, s):
        x1, x2, v1, v2 = s
        u, ud = x1 - x2, v1 - v2
        f1 = k1 * u + kn1 * u**3 + c1 * ud
        f2 = k2 * x2 + kn2 * x2**3 + c2 * v2
        a1, a2 = -f1 / m1, (f1 - f2) / m2
        b = -A0 * np.exp(-al * t) * ((w**2 - al**2) * np.sin(w * t) + 2 * w * al * np.cos(w * t))
        mu = m1 * m2 / (m1 + m2)
        e = b - a1 + a2
        return [v1, v2, a1 + mu / m1 * e, a2 - mu / m2 * e]

    ref = solve_ivp(
        eq67, (0, 5), np.concatenate([q0, qd0]), method="DOP853", rtol=1e-12, atol=1e-12, t_eval=ts
    )
    np.testing.assert_allclose(sol.q, ref.y[:2].T, atol=1e-8)


@pytest.mark.slow  # default-suite time (7 s)
def test_vmap_over_initial_conditions_and_parameters_equals_loop():
    """One batch program over initial velocities and the system's parameters (the rod
    lengths enter the constraints, g the forces) against one trajectory at a time."""
    ts = jnp.linspace(0.0, 1.0, 11)
    L1 = jnp.array([1.0, 0.5, 1.0, 2.0])
    L2 = jnp.array([1.0, 1.0, 0.7, 1.5])
    g = jnp.array([10.0, 9.81, 3.0, 10.0])
    yd = jnp.array([2.0, 3.0, 4.0, 5.0])
    systems = eqx.filter_vmap(lambda a, b, c: DoubleRodPendulum(L1=a, L2=b, g=c))(L1, L2, g)
    q0 = jnp.stack([L1, jnp.zeros(4), jnp.zeros(4)], axis=1)  # on both spheres
    qd0 = jnp.stack([jnp.zeros(4), yd, jnp.zeros(4)], axis=1)
    run = eqx.filter_jit(eqx.filter_vmap(lambda s, a, b: ukjax.simulate(s, a, b, ts).q))
    batched = run(systems, q0, qd0)
    assert len({round(float(x), 3) for x in batched[:, -1, 0]}) == 4  # distinct motions
    for i in range(4):
        system = DoubleRodPendulum(L1=float(L1[i]), L2=float(L2[i]), g=float(g[i]))
        single = ukjax.simulate(system, q0[i], qd0[i], ts).q
        np.testing.assert_allclose(batched[i], single, rtol=1e-9, atol=1e-10)


def test_no_retracing_on_repeated_calls():
    """The constraint function runs only while tracing: repeated calls with new states,
    parameter values (floats become arrays) and save times must not run it again."""
    traced = []

    class Counting(CartesianPendulum):
        def holonomic(self, t, q):
            traced.append(1)
            return super().holonomic(t, q)

    ts = jnp.linspace(0.0, 0.5, 5)
    ukjax.simulate(Counting(), jnp.array([0.0, -1.0]), jnp.array([0.2, 0.0]), ts)
    after_first = len(traced)
    assert after_first > 0
    for yd in (0.5, 1.0, 1.5):
        ukjax.simulate(Counting(), jnp.array([0.0, -1.0]), jnp.array([yd, 0.0]), ts)
    ukjax.simulate(
        Counting(length=2.0, g=3.0), jnp.array([0.0, -2.0]), jnp.array([1.0, 0.0]), ts + 1.0
    )
    assert len(traced) == after_first


def test_under_jit_and_fixed_step_solver():
    sys = CartesianPendulum()
    ts = jnp.linspace(0.0, 1.0, 11)
    f = jax.jit(
        lambda q0, qd0: (
            ukjax.simulate(
                sys,
                q0,
                qd0,
                ts,
                solver=diffrax.Tsit5(),
                stepsize_controller=diffrax.ConstantStepSize(),
                dt0=1e-3,
            ).q
        )
    )
    q = f(jnp.array([1.0, 0.0]), jnp.zeros(2))
    ref = ukjax.simulate(sys, jnp.array([1.0, 0.0]), jnp.zeros(2), ts).q
    np.testing.assert_allclose(q, ref, atol=1e-9)


def test_float32_simulation():
    with jax.enable_x64(False):
        sys = DoubleRodPendulum()
        q0, qd0 = sys.initial_state()
        sol = ukjax.simulate(
            sys,
            q0.astype(jnp.float32),
            qd0.astype(jnp.float32),
            jnp.linspace(0.0, 3.0, 31, dtype=jnp.float32),
        )
        assert sol.q.dtype == jnp.float32
    sol64 = ukjax.simulate(sys, q0, qd0, jnp.linspace(0.0, 3.0, 31))
    np.testing.assert_allclose(sol.q, sol64.q, atol=1e-3)


def test_first_call_compiles_few_programs_besides_the_solve():
    """The eager checks before a solve (finite state, consistent initial conditions, the
    first save time) cost no XLA compilation of their own beyond one residual program:
    every eager jax.numpy operation would be one (tens of milliseconds each on the first
    call of a process). The state length (14: a 7-link chain) is used by no other test, so
    nothing is cached from them."""
    from ukjax.systems import PlanarChain

    chain = PlanarChain.uniform(7)
    q0, qd0 = chain.state_from_angles(jnp.linspace(0.2, 0.6, 7), jnp.zeros(7))
    compiled = []
    listener = lambda event, duration, **kw: compiled.append(event)
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        ukjax.simulate(chain, q0, qd0, jnp.linspace(0.0, 0.02, 3), solver=diffrax.Tsit5())
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    n = compiled.count("/jax/core/compile/backend_compile_duration")
    # the solve, the residual check and a few conversions of constants (8 here; 20
    # when the checks ran eager jax.numpy operations)
    assert 2 <= n <= 10, n


@pytest.mark.slow  # 17-18 s: the default suite's two longest tests (stop 101)
def test_saves_at_step_ends_are_as_accurate_as_the_steps():
    """A save between steps is read from Dopri8's dense output; with `step_ts=ts` every
    save is a step end (simulate's docstring): the saves then match the exact pendulum to
    the steps' accuracy and sit on the constraint, and the default adjoint's derivative
    through such a run equals diffrax's checkpointed loop's."""
    L, g = 1.0, 9.81
    ts = np.linspace(0.0, 10.0, 1001)
    ref = solve_ivp(
        lambda t, y: [y[1], -(g / L) * np.sin(y[0])],
        (0, 10),
        [np.pi / 2, 0.0],
        method="DOP853",
        rtol=1e-13,
        atol=1e-13,
        t_eval=ts,
    )
    controller = diffrax.PIDController(rtol=1e-12, atol=1e-12, step_ts=jnp.asarray(ts))
    pend = CartesianPendulum(length=L, g=g)
    q0, qd0 = jnp.array([L, 0.0]), jnp.zeros(2)
    sol = ukjax.simulate(pend, q0, qd0, ts, stepsize_controller=controller)
    exact = np.c_[L * np.sin(ref.y[0]), -L * np.cos(ref.y[0])]
    err = np.abs(np.asarray(sol.q) - exact).max()
    assert err < 5e-12, err
    drift = np.abs(np.sum(np.asarray(sol.q) ** 2, axis=1) - L**2).max()
    assert drift < 1e-13, drift
    assert int(sol.stats["num_steps"]) >= len(ts) - 1  # every save a step end

    short = jnp.linspace(0.0, 2.0, 21)
    every = diffrax.PIDController(rtol=1e-12, atol=1e-12, step_ts=short)

    def x_sum(length, adjoint=None):
        run = ukjax.simulate(
            CartesianPendulum(length=length, g=g), jnp.array([length, 0.0]), jnp.zeros(2),
            short, stepsize_controller=every, adjoint=adjoint,
        )  # fmt: skip
        return run.q[:, 0].sum()

    replayed = jax.grad(x_sum)(1.0)
    looped = jax.grad(lambda x: x_sum(x, diffrax.RecursiveCheckpointAdjoint()))(1.0)
    assert abs(float(replayed - looped)) < 1e-9 * abs(float(looped)), (replayed, looped)
