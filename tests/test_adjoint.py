"""ukjax.ReplayAdjoint (the default reverse mode of smooth runs): against a closed form,
against diffrax's checkpointed adjoint on the same discretisation, under vmap, and its
refusals and fallbacks."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ukjax
from ukjax._adjoint import BATCH_BUDGET, DEFAULT_BUDGET, default_adjoint, replays
from ukjax.systems import PlanarChain


class InclinedBead(ukjax.System):
    """A bead of mass m on the line y = x tan(alpha), gravity g, linear damping c."""

    mass: float = 1.0
    damping: float = 0.5
    g: float = 9.81
    alpha: float = 0.6

    def mass_matrix(self, t, q):
        return self.mass * jnp.eye(2, dtype=q.dtype)

    def forces(self, t, q, qd):
        return jnp.array([0.0, -self.mass * self.g]) - self.damping * qd

    def holonomic(self, t, q):
        return jnp.array([q[1] - q[0] * jnp.tan(self.alpha)])


def _bead_closed_form(params, ts):
    """x(t) of the bead from rest at the origin: s'' = -g sin(alpha) - (c/m) s'."""
    m, c, g, alpha = params
    k = c / m
    s = -(g * jnp.sin(alpha) / k) * (ts - (1.0 - jnp.exp(-k * ts)) / k)
    return s * jnp.cos(alpha)


def _bead_loss(params, ts, **kw):
    m, c, g, alpha = params
    bead = InclinedBead(mass=m, damping=c, g=g, alpha=alpha)
    sol = ukjax.simulate(bead, jnp.zeros(2), jnp.zeros(2), ts, **kw)
    return jnp.sum(sol.q[:, 0] * jnp.linspace(1.0, 2.0, ts.size))


@pytest.mark.parametrize(
    "derivative",
    [jax.grad, pytest.param(jax.jacfwd, marks=pytest.mark.slow)],  # default-suite time
    ids=["reverse", "forward"],
)
def test_gradient_at_the_defaults_matches_the_closed_form(derivative):
    """d/d(m, c, g, alpha) of a weighted sum of saved positions, at simulate's default
    adjoint (ReplayAdjoint in reverse mode; under jax.jacfwd ForwardMode, chosen by
    simulate), against autodiff of the closed-form motion."""
    ts = jnp.linspace(0.0, 1.5, 7)
    params = jnp.array([1.3, 0.7, 9.81, 0.6])
    kw = dict(solver=diffrax.Tsit5(), rtol=1e-11, atol=1e-11)
    got = derivative(_bead_loss)(params, ts, **kw)
    want = jax.grad(lambda p: jnp.sum(_bead_closed_form(p, ts) * jnp.linspace(1.0, 2.0, 7)))(params)
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9)


CHAIN = PlanarChain.uniform(2, damping=0.3)


def _chain(params):
    return eqx.tree_at(lambda s: (s.masses, s.damping), CHAIN, (params[:2], params[2:]))


def _rod_loss(system_params, y0, ts, adjoint, **kw):
    rod = _chain(system_params)
    q0, qd0 = y0
    sol = ukjax.simulate(rod, q0, qd0, ts, adjoint=adjoint, **kw)
    w = jnp.linspace(0.5, 1.5, sol.q.shape[1])
    return jnp.sum(sol.q @ w) + 0.1 * jnp.sum(sol.qd**2)


def _rod_state():
    q0, qd0 = CHAIN.state_from_angles(jnp.array([0.6, 1.1]), jnp.array([0.0, 0.4]))
    return jnp.array([1.0, 1.3, 0.3, 0.2]), (q0, qd0)


CASES = {
    "default (per-step projection, Tsit5)": dict(solver=diffrax.Tsit5()),
    "Projection with projected saves": dict(
        solver=diffrax.Tsit5(), stabilization=ukjax.Projection()
    ),
    "NoStabilization, FSAL Dopri5": dict(
        solver=diffrax.Dopri5(), stabilization=ukjax.NoStabilization()
    ),
    "Baumgarte, Dopri8, throw=False": dict(
        solver=diffrax.Dopri8(), stabilization=ukjax.Baumgarte(5.0, 5.0), throw=False
    ),
    "fixed step RK4, initial state differentiated": dict(
        solver=ukjax.RK4(),
        stepsize_controller=diffrax.ConstantStepSize(),
        dt0=0.01,
        initial_conditions=ukjax.IgnoreInitial(),
    ),
}


IN_CI = ("default (per-step projection, Tsit5)",)  # the others: extended (CI's 30 minutes)


def _tier(case):
    return pytest.mark.slow if case in IN_CI else pytest.mark.extended


@pytest.mark.parametrize("case", [pytest.param(c, marks=_tier(c)) for c in CASES])
def test_replay_equals_the_checkpointed_gradient(case):
    """The same discrete derivative as diffrax's RecursiveCheckpointAdjoint: parameters and
    (with IgnoreInitial) the initial state, saves inside steps and at step ends; for the
    all-mode replay (its reverse mode is the transpose of its tangent sweep) and the
    reverse-only one, against one checkpointed reference."""
    kw = dict(CASES[case])
    if "stepsize_controller" not in kw:
        kw.update(rtol=1e-9, atol=1e-9)
    params, y0 = _rod_state()
    ts = jnp.linspace(0.0, 0.8, 9)
    argnums = (0, 1) if "initial_conditions" in kw else 0
    grad = lambda adj: jax.jit(jax.grad(lambda p, y: _rod_loss(p, y, ts, adj, **kw), argnums))(
        params, y0
    )
    checkpointed = jax.tree_util.tree_leaves(grad(diffrax.RecursiveCheckpointAdjoint()))
    for replay in (ukjax.ReplayAdjoint, ukjax.ReverseReplayAdjoint):
        replayed = jax.tree_util.tree_leaves(grad(replay()))
        for a, b in zip(replayed, checkpointed):
            assert np.all(np.isfinite(a)), replay.__name__
            scale = 1e-9 * float(jnp.max(jnp.abs(b)))
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=scale, err_msg=replay.__name__)


@pytest.mark.slow
def test_replay_under_vmap_matches_each_member():
    """A batch of gradients (vmap over the initial angle) equals the members one by one."""
    params, _ = _rod_state()
    ts = jnp.linspace(0.0, 0.5, 5)
    kw = dict(solver=diffrax.Tsit5(), rtol=1e-9, atol=1e-9)

    def member(angle):
        y0 = CHAIN.state_from_angles(jnp.array([angle, 1.1]), jnp.zeros(2))
        return jax.grad(_rod_loss)(params, y0, ts, None, **kw)

    angles = jnp.array([0.3, 0.6, 1.2])
    batch = jax.jit(jax.vmap(member))(angles)
    for i, a in enumerate(angles):
        np.testing.assert_allclose(batch[i], member(a), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("replay", [ukjax.ReplayAdjoint, ukjax.ReverseReplayAdjoint])
def test_replay_refuses_derivatives_wrt_save_times(replay):
    params, y0 = _rod_state()

    def loss(t_end):
        ts = jnp.linspace(0.0, 1.0, 4) * t_end
        return _rod_loss(params, y0, ts, replay(), solver=diffrax.Tsit5())

    with pytest.raises(ValueError, match="RecursiveCheckpointAdjoint"):
        jax.grad(loss)(0.5)


def test_replay_applies_to_explicit_steppers_only():
    """Explicit Runge-Kutta steps (and Euler) depend on their start state alone and are
    replayed; an implicit solver's root finder takes the controller's tolerances inside
    diffeqsolve, so ReplayAdjoint leaves it to diffrax's checkpointed loop (its `loop`)."""
    replay = ukjax.ReplayAdjoint()
    for solver in (diffrax.Tsit5(), diffrax.Dopri8(), diffrax.Euler(), ukjax.RK4()):
        assert replays(replay, solver, 100)
    assert not replays(replay, diffrax.Kvaerno5(), 100)
    assert not replays(replay, diffrax.ImplicitEuler(), 100)
    assert not replays(replay, diffrax.Tsit5(), None)  # nothing bounds the stored states
    assert not replays(diffrax.RecursiveCheckpointAdjoint(), diffrax.Tsit5(), 100)


def test_default_adjoint_keeps_memory_bounded():
    """Replay by default when the stored states fit the budget, diffrax's checkpoints
    otherwise (and with max_steps=None)."""
    y0 = (jnp.zeros(10), jnp.zeros(10))  # 160 bytes a state in float64
    fits = DEFAULT_BUDGET // 160
    assert isinstance(default_adjoint(fits, y0), ukjax.ReplayAdjoint)
    assert type(default_adjoint(fits + 1, y0)) is diffrax.RecursiveCheckpointAdjoint
    assert type(default_adjoint(None, y0)) is diffrax.RecursiveCheckpointAdjoint
    # a batch the caller knows (ukjax.predict / fit over B trajectories): the total counts
    small = 1000  # 160 kB a trajectory
    most = BATCH_BUDGET // (small * 160)
    assert isinstance(default_adjoint(small, y0, most), ukjax.ReplayAdjoint)
    assert type(default_adjoint(small, y0, most + 1)) is diffrax.RecursiveCheckpointAdjoint
    # a caller that takes reverse-mode gradients only (fit) gets the faster reverse replay
    fast = default_adjoint(small, y0, reverse_only=True)
    assert isinstance(fast, ukjax.ReverseReplayAdjoint)


@pytest.mark.slow
def test_replay_gradient_of_a_failed_run_is_not_silently_finite():
    """throw=False and a run cut short by max_steps: the saves past the failure are NaN,
    and so is a loss of them (no finite garbage gradient)."""
    params, y0 = _rod_state()
    ts = jnp.linspace(0.0, 2.0, 5)

    def loss(p):
        sol = ukjax.simulate(_chain(p), *y0, ts, solver=diffrax.Tsit5(), throw=False, max_steps=5)
        return jnp.sum(sol.q), sol.result

    (value, result), _ = jax.value_and_grad(loss, has_aux=True)(params)
    assert result != ukjax.RESULTS.successful
    assert not np.isfinite(float(value))
    assert eqx.is_array(value)


@pytest.mark.slow
def test_forward_mode_under_vmap_equals_reverse_mode():
    """jax.jvp under vmap (two directions at once) and jax.jacfwd equal jax.jacrev of the
    same run at the defaults."""
    ts = jnp.linspace(0.0, 1.5, 7)
    params = jnp.array([1.3, 0.7, 9.81, 0.6])
    kw = dict(solver=diffrax.Tsit5(), rtol=1e-11, atol=1e-11)
    forward = jax.jacfwd(_bead_loss)(params, ts, **kw)
    reverse = jax.jacrev(_bead_loss)(params, ts, **kw)
    np.testing.assert_allclose(forward, reverse, rtol=1e-9, atol=1e-12)
    directions = jnp.eye(4)[:2]
    loss = lambda p: _bead_loss(p, ts, **kw)
    tangents = jax.vmap(lambda v: jax.jvp(loss, (params,), (v,))[1])(directions)
    np.testing.assert_allclose(tangents, forward[:2], rtol=1e-10, atol=1e-12)


@pytest.mark.slow  # default-suite time (7 s)
def test_the_reverse_only_replay_refuses_forward_mode():
    """ReverseReplayAdjoint is a custom VJP: forward mode raises JAX's error (the default
    ReplayAdjoint and diffrax.ForwardMode() take it)."""
    ts = jnp.linspace(0.0, 0.5, 3)
    params = jnp.array([1.3, 0.7, 9.81, 0.6])
    with pytest.raises(TypeError, match="custom_vjp"):
        jax.jacfwd(_bead_loss)(params, ts, adjoint=ukjax.ReverseReplayAdjoint())
    got = jax.jacfwd(_bead_loss)(params, ts, adjoint=diffrax.ForwardMode())
    assert np.all(np.isfinite(got))


@pytest.mark.extended  # 54 s of CI's 30 minutes; reverse mode through impacts stays in CI
def test_forward_mode_through_impacts():  # (test_hybrid.py, two impacts against differences)
    """jax.jacfwd of a hybrid run (a ball bouncing with restitution 0.8, through its first
    impact) with diffrax.ForwardMode() (a hybrid run's default segment loop is reverse
    mode only) equals jax.grad at the defaults and a central difference."""
    from ukjax.systems import BouncingBall

    ts = jnp.linspace(0.0, 1.2, 9)

    def height(g, adjoint=None):
        ball = BouncingBall(g=g)
        sol = ukjax.simulate(
            ball, jnp.array([1.0]), jnp.zeros(1), ts, contact=ukjax.Impact(0.8), adjoint=adjoint
        )
        return sol.q[-1, 0]

    forward = jax.jacfwd(lambda g: height(g, diffrax.ForwardMode()))(9.81)
    reverse = jax.grad(height)(9.81)
    h = 1e-5
    central = (height(9.81 + h) - height(9.81 - h)) / (2 * h)
    np.testing.assert_allclose(forward, reverse, rtol=1e-10)
    np.testing.assert_allclose(forward, central, rtol=1e-6)


@pytest.mark.extended  # 66 s: CI's 30-minute budget (second derivatives are the extended tier's)
def test_hessian_without_an_adjoint_given_matches_the_closed_form():
    """jax.hessian of simulate with no adjoint given (ReplayAdjoint, whose rule is
    differentiated again) equals the Hessian of the closed-form motion with respect to
    (m, c, g, alpha), and is symmetric; so does jax.jacfwd of jax.jacfwd.

    With the Cholesky UK solve: under an adaptive controller at this tolerance, diffrax's
    DirectAdjoint differentiates the default Regularized solve's run up to 5e-6 off in
    reverse mode (the README states the limit and its likely cause); the first-order
    tests check the default solve."""
    ts = jnp.linspace(0.0, 1.0, 5)
    params = jnp.array([1.3, 0.7, 9.81, 0.6])
    kw = dict(solver=diffrax.Tsit5(), rtol=1e-11, atol=1e-11, max_steps=2048)
    got = jax.hessian(_bead_loss)(params, ts, uk_solver=ukjax.Cholesky(), **kw)
    weights = jnp.linspace(1.0, 2.0, ts.size)
    want = jax.hessian(lambda p: jnp.sum(_bead_closed_form(p, ts) * weights))(params)
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(got, got.T, rtol=0.0, atol=1e-12)
    # forward over forward (ForwardMode twice) with the default Regularized solve
    twice = jax.jacfwd(jax.jacfwd(_bead_loss))(params, ts, **kw)
    np.testing.assert_allclose(twice, want, rtol=1e-7, atol=1e-9)
