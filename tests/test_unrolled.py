"""ukjax.Unrolled and ukjax.StageLoop: explicit Runge-Kutta steps with the stages written
out, or in a loop of sums over a stage buffer (issue 17).

The reference for one step is the wrapped diffrax solver's own step (the same method:
equal to rounding, its dense output and first-same-as-last state included); for whole runs
the minimal-coordinate pendulum integrated by scipy DOP853, the bouncing ball's closed form
and diffrax's stage loop (same step sequence); gradients against central differences.
"""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import ukjax
from references import bouncing_ball_impacts
from ukjax._dense import PolynomialDense
from ukjax._unrolled import SWEEP_STAGES, batched_solver
from ukjax.systems import BouncingBall, CartesianPendulum, DoubleRodPendulum


ERKS = [
    diffrax.Dopri5,
    diffrax.Dopri8,
    diffrax.Tsit5,
    diffrax.Bosh3,
    diffrax.Heun,
    diffrax.Ralston,
    diffrax.Midpoint,
    ukjax.RK4,
    ukjax.KuttaMerson,
]


def _oscillator(t, y, args):
    """A damped, forced nonlinear oscillator with a pytree state (x, v)."""
    x, v = y
    return v, -args * v - jnp.sin(x) ** 3 - x + jnp.cos(3.0 * t)


def _one_step(solver, dtype, made_jump, state=None):
    term = diffrax.ODETerm(_oscillator)
    y0 = (jnp.array([0.3, -1.2], dtype), jnp.array([0.7, 0.1], dtype))
    t0, t1, args = jnp.asarray(0.2, dtype), jnp.asarray(0.35, dtype), jnp.asarray(0.4, dtype)
    if state is None:
        state = solver.init(term, t0, t1, y0, args)
    return solver.step(term, t0, t1, y0, args, state, made_jump)


def _assert_trees_close(a, b, rtol, atol):
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


FAST = (diffrax.Dopri5, diffrax.Dopri8, diffrax.Heun)  # FSAL and SSAL; 14 stages; neither
WRAPPERS = (ukjax.Unrolled, ukjax.StageLoop)


def _cases():
    for dtype in (jnp.float64, jnp.float32):
        for cls in ERKS:
            fast = cls in FAST and (dtype == jnp.float64 or cls is diffrax.Dopri5)
            marks = () if fast else (pytest.mark.slow,)
            yield pytest.param(cls, dtype, marks=marks, id=f"{cls.__name__}-{dtype.__name__}")


@pytest.mark.parametrize("wrapper", WRAPPERS, ids=lambda w: w.__name__)
@pytest.mark.parametrize("cls,dtype", list(_cases()))
def test_step_equals_the_wrapped_solvers_step(cls, dtype, wrapper):
    tol = 1e-14 if dtype == jnp.float64 else 2e-6
    for made_jump in (True, False):
        ref = _one_step(cls(), dtype, made_jump)
        out = _one_step(wrapper(cls()), dtype, made_jump)
        y1, err, dense, state, result = out
        assert result == diffrax.RESULTS.successful
        _assert_trees_close(y1, ref[0], tol, tol)
        _assert_trees_close(err, ref[1], tol, tol)
        _assert_trees_close(dense, ref[2], tol, tol)
        _assert_trees_close(state, ref[3], tol, tol)
        assert jax.tree_util.tree_structure(state) == jax.tree_util.tree_structure(ref[3])
        assert all(x.dtype == dtype for x in jax.tree_util.tree_leaves((y1, err, dense)))


@pytest.mark.parametrize("wrapper", WRAPPERS, ids=lambda w: w.__name__)
def test_first_same_as_last_state_is_used_and_refreshed(wrapper):
    """A carried f(t0, y0) is used as the first stage (a wrong one changes the step the
    way it changes diffrax's), and replaced by a fresh evaluation after a jump."""
    solver = diffrax.Dopri5()
    first, f0 = _one_step(solver, jnp.float64, True)[3]
    assert not bool(first)
    stale = (False, jax.tree_util.tree_map(lambda x: x + 1.0, f0))
    for made_jump in (False, True):
        ref = _one_step(solver, jnp.float64, made_jump, stale)
        out = _one_step(wrapper(solver), jnp.float64, made_jump, stale)
        _assert_trees_close(out[0], ref[0], 1e-14, 1e-14)
    fresh = _one_step(solver, jnp.float64, True)[0]
    moved = _one_step(wrapper(solver), jnp.float64, False, stale)[0]
    assert not np.allclose(np.asarray(moved[0]), np.asarray(fresh[0]), rtol=0, atol=1e-6)


@pytest.mark.parametrize("batched", [False, True], ids=["single", "vmap"])
def test_the_stage_loop_traces_the_vector_field_once(batched):
    """Its first stage is evaluated in the loop too (where a first-same-as-last method
    does not carry it), so a step's program holds one copy of the vector field, not a
    second one for the first stage: for a system's UK solve, a quarter of a default
    run's program (`benchmarks/RESULTS.md`, stop 93). The step is still the method's."""
    calls = []

    def counted(t, y, args):
        calls.append(t)
        return _oscillator(t, y, args)

    term = diffrax.ODETerm(counted)
    solver = ukjax.StageLoop(diffrax.Dopri8())
    y0 = (jnp.array([0.3, -1.2]), jnp.array([0.7, 0.1]))
    t0, t1, args = jnp.asarray(0.2), jnp.asarray(0.35), jnp.asarray(0.4)

    def step(y, made_jump):
        state = solver.init(diffrax.ODETerm(_oscillator), t0, t1, y, args)
        return solver.step(term, t0, t1, y, args, state, made_jump)[0]

    if batched:
        ys = jax.tree_util.tree_map(lambda x: jnp.stack([x, 2 * x]), y0)
        fn = jax.vmap(step, in_axes=(0, None))
        jax.make_jaxpr(fn, static_argnums=1)(ys, True)
    else:
        jax.make_jaxpr(step, static_argnums=1)(y0, True)
    assert len(calls) == 1
    ref = diffrax.Dopri8().step(
        diffrax.ODETerm(_oscillator), t0, t1, y0, args,
        diffrax.Dopri8().init(diffrax.ODETerm(_oscillator), t0, t1, y0, args), True,
    )[0]  # fmt: skip
    _assert_trees_close(step(y0, True), ref, 1e-14, 1e-14)


@pytest.mark.parametrize(
    "solver",
    [
        diffrax.Kvaerno5(),
        diffrax.Euler(),
        diffrax.ImplicitEuler(),
        ukjax.Unrolled(diffrax.Dopri5()),
    ],
    ids=["Kvaerno5", "Euler", "ImplicitEuler", "Unrolled"],
)
@pytest.mark.parametrize("wrapper", WRAPPERS, ids=lambda w: w.__name__)
def test_refuses_what_it_cannot_write_out(solver, wrapper):
    message = f"ukjax.{wrapper.__name__} runs the stages of an explicit"
    with pytest.raises(ValueError, match=message):
        wrapper(solver)


def _dense(method):
    k = jnp.ones((method.tableau.num_stages, 2))
    return dict(t0=0.0, t1=0.1, y0=jnp.ones(2), y1=jnp.ones(2), k=k)


def test_batched_solver_rule():
    assert isinstance(batched_solver(diffrax.Dopri5()), ukjax.Unrolled)
    assert isinstance(batched_solver(ukjax.RK4()), ukjax.Unrolled)
    assert diffrax.Dopri8.tableau.num_stages > SWEEP_STAGES >= diffrax.Tsit5.tableau.num_stages
    for given in (None, diffrax.Dopri8()):  # None: simulate's default, Dopri8
        dopri8 = batched_solver(given)  # 14 stages: a loop of sums, its saves polynomial
        assert isinstance(dopri8, ukjax.StageLoop) and isinstance(dopri8.inner, diffrax.Dopri8)
        assert isinstance(dopri8.interpolation_cls(**_dense(diffrax.Dopri8)), PolynomialDense)
    for method, rewritten in [(diffrax.Tsit5, True), (diffrax.Dopri5, False)]:
        dense = batched_solver(method()).interpolation_cls(**_dense(method))
        assert isinstance(dense, PolynomialDense) == rewritten
    assert isinstance(batched_solver(diffrax.Kvaerno5()), diffrax.Kvaerno5)
    for given in (ukjax.Unrolled(diffrax.Dopri8()), ukjax.StageLoop(diffrax.Dopri5())):
        assert batched_solver(given) is given


def _pendulum_reference(theta0, omega0, ts, g=9.81, length=1.0):
    sol = solve_ivp(
        lambda t, s: [s[1], -g / length * np.sin(s[0])],
        (ts[0], ts[-1]),
        [theta0, omega0],
        method="DOP853",
        rtol=1e-12,
        atol=1e-12,
        t_eval=ts,
    )
    th = sol.y[0]
    return np.stack([length * np.sin(th), -length * np.cos(th)], axis=1)


@pytest.mark.slow  # default-suite time (6 s)
@pytest.mark.parametrize("cls", [diffrax.Dopri5, diffrax.Heun], ids=str)
def test_vmapped_pendulum_matches_minimal_coordinates(cls):
    """A batch of Cartesian pendulums (UK, one holonomic constraint) against the angle
    ODE integrated by scipy DOP853; the steps are those of the stage loop."""
    ts = np.linspace(0.0, 2.0, 21)
    th = np.array([0.3, 1.2, 2.5])
    q0 = jnp.stack([jnp.sin(th), -jnp.cos(th)], axis=1)
    qd0 = jnp.zeros((3, 2))
    tol = 1e-10 if cls is diffrax.Dopri5 else 1e-7

    def sim(a, b, solver):
        return ukjax.simulate(
            CartesianPendulum(), a, b, jnp.asarray(ts), solver=solver, rtol=tol, atol=tol
        )

    out = jax.jit(jax.vmap(lambda a, b: sim(a, b, ukjax.Unrolled(cls()))))(q0, qd0)
    assert bool(jnp.all(out.result == ukjax.RESULTS.successful))
    # One trajectory at a time: diffrax's stage loop (a batch would be written out too).
    for i in range(len(th)):
        ref = sim(q0[i], qd0[i], cls())
        assert int(out.stats["num_steps"][i]) == int(ref.stats["num_steps"])
        np.testing.assert_allclose(out.q[i], ref.q, rtol=0, atol=1e-12)
    for i, t in enumerate(th):
        np.testing.assert_allclose(out.q[i], _pendulum_reference(t, 0.0, ts), atol=200 * tol)


def _wrapped_methods():
    # CI (slow tier) writes out the default Dopri8 and Tsit5; the other tableaus are
    # extended (CI's 30-minute budget; each is a 9-13 s compile of the same test).
    in_ci = (diffrax.Dopri8, diffrax.Tsit5)
    for cls in ERKS:
        mark = pytest.mark.slow if cls in in_ci else pytest.mark.extended
        yield pytest.param(ukjax.Unrolled, cls, id=f"Unrolled-{cls.__name__}", marks=mark)
    for cls in (diffrax.Dopri8, diffrax.Dopri5, diffrax.Heun, ukjax.RK4):
        yield pytest.param(
            ukjax.StageLoop, cls, id=f"StageLoop-{cls.__name__}", marks=pytest.mark.slow
        )


@pytest.mark.parametrize("wrapper,cls", list(_wrapped_methods()))
def test_constrained_run_equals_the_stage_loop(wrapper, cls):
    """The double rod pendulum (two holonomic constraints, projection, checks). At fixed
    steps the two runs differ by rounding only; adaptive, they take the same number of
    accepted steps, whose sizes differ by rounding, so the solutions differ by up to the
    local error the controller allows (rtol = atol = 1e-9), not by rounding."""
    q0, qd0 = jnp.array([1.0, 0.0, 0.0]), jnp.array([0.0, 2.0, 0.0])
    ts = jnp.linspace(0.0, 1.0, 11)

    def run(solver, **kw):
        return ukjax.simulate(DoubleRodPendulum(), q0, qd0, ts, solver=solver, **kw)

    fixed = dict(stepsize_controller=diffrax.ConstantStepSize(), dt0=1e-2)
    out, ref = run(wrapper(cls()), **fixed), run(cls(), **fixed)
    assert out.result == ukjax.RESULTS.successful
    np.testing.assert_allclose(out.q, ref.q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(out.qd, ref.qd, rtol=0, atol=1e-12)
    if cls is ukjax.RK4:  # no usable error estimate
        return
    out, ref = run(wrapper(cls()), rtol=1e-9, atol=1e-9), run(cls(), rtol=1e-9, atol=1e-9)
    assert out.result == ukjax.RESULTS.successful
    assert int(out.stats["num_steps"]) == int(ref.stats["num_steps"])
    np.testing.assert_allclose(out.q, ref.q, rtol=0, atol=1e-9)


@pytest.mark.slow
def test_bouncing_ball_impacts_with_written_out_stages():
    """Hybrid segments run the wrapper too: impact times and speeds of the closed form."""
    h0, e, g = 1.0, 0.8, 9.81
    sol = ukjax.simulate(
        BouncingBall(),
        jnp.array([h0]),
        jnp.zeros(1),
        jnp.linspace(0.0, 3.0, 31),
        solver=ukjax.Unrolled(diffrax.Dopri5()),
        rtol=1e-12,
        atol=1e-12,
        contact=ukjax.Impact(restitution=e),
        throw=False,
    )
    times, speeds, _ = bouncing_ball_impacts(h0, e, g, 5)
    np.testing.assert_allclose(sol.events.time[:5], times, rtol=0, atol=1e-10)
    np.testing.assert_allclose(-sol.events.speed_before[:5], speeds, rtol=1e-9)


@pytest.mark.slow
def test_sweep_writes_out_dopri5_and_matches_plain_runs():
    th = jnp.linspace(0.2, 2.8, 6)
    q0 = jnp.stack([jnp.sin(th), -jnp.cos(th)], axis=1)
    qd0 = jnp.zeros((6, 2))
    ts = jnp.linspace(0.0, 1.0, 6)
    kw = dict(solver=diffrax.Dopri5(), rtol=1e-10, atol=1e-10)
    res = ukjax.sweep(CartesianPendulum(), q0, qd0, ts, chunk_size=3, progress=False, **kw)
    assert res.ok.all()
    for i in (0, 5):
        sol = ukjax.simulate(CartesianPendulum(), q0[i], qd0[i], ts, **kw)
        np.testing.assert_allclose(res.q[i], sol.q, rtol=0, atol=1e-11)


def _pendulum_loss(length, solver, ts, tol, adjoint=None):
    """Sum of squared heights of a pendulum of the given length released at 1 rad."""
    q0 = jnp.array([length * jnp.sin(1.0), -length * jnp.cos(1.0)])
    kw = {} if adjoint is None else {"adjoint": adjoint}
    sol = ukjax.simulate(
        CartesianPendulum(length=length),
        q0,
        jnp.zeros(2),
        ts,
        solver=solver,
        rtol=tol,
        atol=tol,
        **kw,
    )
    return jnp.sum(sol.q[:, 1] ** 2)


@pytest.mark.slow
def test_gradient_through_written_out_stages_matches_finite_differences():
    """Reverse mode (the default ReplayAdjoint replays the wrapper's steps) against
    central differences and against the stage loop's gradient."""
    ts = jnp.linspace(0.0, 1.0, 6)
    loss = lambda length, solver: _pendulum_loss(length, solver, ts, 1e-11)
    L, h = 1.3, 1e-5
    g = jax.grad(loss)(L, ukjax.Unrolled(diffrax.Dopri5()))
    g_loop = jax.grad(loss)(L, diffrax.Dopri5())
    fd = (loss(L + h, diffrax.Dopri5()) - loss(L - h, diffrax.Dopri5())) / (2 * h)
    np.testing.assert_allclose(g, g_loop, rtol=1e-9)
    np.testing.assert_allclose(g, fd, rtol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize(
    "adjoint", [diffrax.RecursiveCheckpointAdjoint(), diffrax.ForwardMode()], ids=type
)
def test_diffrax_adjoints_differentiate_written_out_stages(adjoint):
    """diffrax's own adjoints (which set the wrapped solver's scan kind) work through the
    wrapper and give the stage loop's derivative."""
    ts = jnp.linspace(0.0, 1.0, 5)
    loss = lambda length, solver: _pendulum_loss(length, solver, ts, 1e-10, adjoint)
    d = jax.jacfwd if isinstance(adjoint, diffrax.ForwardMode) else jax.grad
    g = d(loss)(1.3, ukjax.Unrolled(diffrax.Dopri5()))
    np.testing.assert_allclose(g, d(loss)(1.3, diffrax.Dopri5()), rtol=1e-9)


@pytest.mark.slow
def test_a_batch_runs_the_same_program_as_one_trajectory():
    """A vmap of runs at simulate's default (Dopri8) is the program of one trajectory
    (diffrax's stage loop), batched: the same steps as the single runs and their values
    to rounding; StageLoop(Dopri8()) and the written-out Unrolled(Dopri8()), the batch
    forms sweep passes, take the same method and agree to rounding."""
    ts = jnp.linspace(0.0, 1.3, 7)
    q0 = jnp.array([[1.0, 0.0], [0.0, -1.0], [0.6, -0.8]])
    qd0 = jnp.array([[0.0, 1.0], [2.0, 0.0], [0.8, 0.6]])
    sim = lambda a, b, **kw: ukjax.simulate(CartesianPendulum(), a, b, ts, **kw)
    batch = lambda **kw: jax.jit(jax.vmap(lambda a, b: sim(a, b, **kw)))(q0, qd0)
    # other stage arithmetic: the adaptive steps may differ at round-off, so the two agree
    # to the global error of runs at tolerance 1e-12 (1.8e-11 measured)
    default, looped = batch(), batch(solver=ukjax.StageLoop(diffrax.Dopri8()))
    np.testing.assert_allclose(default.q, looped.q, rtol=0, atol=1e-10)
    unrolled = batch(solver=ukjax.Unrolled(diffrax.Dopri8()))
    np.testing.assert_allclose(default.q, unrolled.q, rtol=0, atol=1e-10)
    for i in range(len(q0)):
        one = sim(q0[i], qd0[i])
        assert int(default.stats["num_steps"][i]) == int(one.stats["num_steps"])
        np.testing.assert_allclose(default.q[i], one.q, rtol=0, atol=1e-11)
        np.testing.assert_allclose(default.qd[i], one.qd, rtol=0, atol=1e-10)
