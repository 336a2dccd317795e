"""Hybrid dynamics: unilateral contacts, impacts, impulses (issue 13).

References are independent of ukjax: closed forms (bouncing ball, particle leaving a
cylinder, the compliant contact's linear ODE), a minimal-coordinate pendulum hitting a wall
integrated by scipy with its own events, and a hand-written KKT impulse solve
(tests/references.py).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ukjax
from references import (
    ball_column_impacts,
    bouncing_ball_impacts,
    double_pendulum_limit_reference,
    kkt_impulse,
    pendulum_wall_reference,
)
from ukjax._hybrid import _segment_saves
from ukjax.systems import BallsOnTable, BouncingBall, CartesianPendulum, ImpulsiveFourBar


class CylinderParticle(ukjax.System):
    """A particle on top of a fixed cylinder of radius R (unilateral: |q| >= R)."""

    R: float = 1.0
    g: float = 9.81

    def num_coordinates(self):
        return 2

    def kinetic_energy(self, t, q, qd):
        return 0.5 * qd @ qd

    def potential_energy(self, t, q):
        return self.g * q[1]

    def unilateral(self, t, q):
        return jnp.array([jnp.sqrt(q @ q) - self.R])


class WallPendulum(CartesianPendulum):
    """A Cartesian pendulum (bilateral rod) whose bob may not pass x = wall."""

    wall: float = 0.5

    def unilateral(self, t, q):
        return jnp.array([self.wall - q[0]])


@jax.jit
def _drop(h0, e):
    ts = jnp.linspace(0.0, 5.0, 51)
    return ukjax.simulate(
        BouncingBall(),
        jnp.array([h0]),
        jnp.zeros(1),
        ts,
        contact=ukjax.Impact(restitution=e),
        throw=False,
    )


@pytest.mark.slow  # default suite's time (benchmarks/RESULTS.md, stop 84)
def test_a_touch_down_slower_than_persist_below_is_logged_as_an_engagement():
    # no gravity: the ball closes at its initial speed and rests at the floor afterwards
    ts = jnp.linspace(0.0, 0.02, 3)
    law = ukjax.Impact(restitution=0.0)
    ball = BouncingBall(g=0.0)
    run = jax.jit(lambda v: ukjax.simulate(ball, jnp.array([1e-9]), v, ts, contact=law))
    slow, fast = run(jnp.array([-1e-7])), run(jnp.array([-1e-3]))
    assert int(slow.events.count) == int(fast.events.count) == 1
    assert ukjax.EVENT_KINDS[int(slow.events.kind[0])] == "engage"
    assert ukjax.EVENT_KINDS[int(fast.events.kind[0])] == "impact"
    np.testing.assert_allclose(slow.events.time[0], 1e-2, rtol=1e-9)
    np.testing.assert_allclose(slow.events.speed_before[0], -1e-7, rtol=1e-9)
    assert float(jnp.abs(slow.q[-1]).max()) < 1e-15 and float(jnp.abs(slow.qd[-1]).max()) == 0.0


def test_bouncing_ball_impact_times_energy_and_zeno():
    h0, e, g = 1.0, 0.8, 9.81
    sol = _drop(h0, e)
    assert sol.result == ukjax.RESULTS.successful
    times, speeds, zeno = bouncing_ball_impacts(h0, e, g, 10)
    ev = sol.events
    np.testing.assert_allclose(ev.time[:10], times, rtol=0, atol=1e-11)
    np.testing.assert_allclose(-ev.speed_before[:10], speeds, rtol=1e-10)
    np.testing.assert_allclose(ev.speed_after[:10], e * speeds, rtol=1e-10)
    assert np.all(np.asarray(ev.kind[: int(ev.count)]) == ukjax.EVENT_KINDS.index("impact"))
    # Zeno: comes to rest (persistent contact) just before the Zeno time, not at max_steps;
    # truncating at rebound speeds below v_tol shortens it by at most 2 v_tol / (g (1 - e)).
    v_tol = ukjax.Impact().speed_tol(jnp.float64)
    last = float(ev.time[int(ev.count) - 1])
    assert zeno - 2 * v_tol / (g * (1 - e)) - 1e-9 < last <= zeno + 1e-9
    assert bool(sol.engaged[-1, 0])
    assert abs(float(sol.q[-1, 0])) < 1e-12 and abs(float(sol.qd[-1, 0])) < 1e-12
    # between impacts the ball is in free flight: energy after the k-th impact is e^(2k) E0
    E = 0.5 * sol.qd[:, 0] ** 2 + g * sol.q[:, 0]
    k = np.searchsorted(np.asarray(ev.time[:10]), np.asarray(sol.ts), side="right")
    early = k < 10
    np.testing.assert_allclose(E[early], g * h0 * e ** (2 * k[early]), rtol=1e-10)
    assert np.all(np.asarray(sol.q[:, 0]) > -1e-12)


@pytest.mark.slow
def test_elastic_ball_keeps_its_energy_and_batch_equals_single_runs():
    h0s = jnp.linspace(0.5, 2.0, 8)
    es = jnp.array([1.0, 0.9, 0.7, 0.5, 1.0, 0.8, 0.6, 0.3])
    batch = jax.vmap(_drop)(h0s, es)
    for i in range(8):
        single = _drop(h0s[i], es[i])
        np.testing.assert_array_equal(batch.events.count[i], single.events.count)
        np.testing.assert_allclose(batch.q[i], single.q, rtol=0, atol=1e-13)
        np.testing.assert_allclose(batch.events.time[i], single.events.time, atol=1e-13)
    elastic = batch.q[0, :, 0], batch.qd[0, :, 0]
    E = 0.5 * elastic[1] ** 2 + 9.81 * elastic[0]
    np.testing.assert_allclose(E, 9.81 * 0.5, rtol=1e-10)


def test_a_scalar_gap_is_one_contact():
    """`unilateral` returning a scalar (`q[1]`, as one writes a single contact) is one
    contact, as a scalar `holonomic` is one constraint: a ball thrown sideways, written with
    int fields and int initial values, bounces at the closed form's times and keeps its
    horizontal speed (no friction declared)."""

    class Thrown(ukjax.System):
        g: int = 10

        def kinetic_energy(self, t, q, qd):
            return 0.5 * qd @ qd

        def potential_energy(self, t, q):
            return self.g * q[1]

        def unilateral(self, t, q):
            return q[1]

    ts = jnp.linspace(0.0, 1.5, 16)
    sol = ukjax.simulate(Thrown(), [0, 1], [2, 0], ts, contact=ukjax.Impact(0.5))
    assert sol.result == ukjax.RESULTS.successful and sol.engaged.shape == (16, 1)
    times, _, _ = bouncing_ball_impacts(1.0, 0.5, 10.0, 3)
    np.testing.assert_allclose(sol.events.time[:3], times, rtol=1e-10)
    np.testing.assert_allclose(sol.q[:, 0], 2.0 * ts, rtol=1e-12)


def test_forward_mode_through_the_default_hybrid_adjoint_says_which_adjoint_to_pass():
    """The default adjoint of a run with contacts is reverse mode only (its segments
    replayed by a custom VJP): `jax.jacfwd` is refused at trace time with a TypeError that
    names the adjoints that do forward mode, not only JAX's message about custom VJPs."""
    ts = jnp.linspace(0.0, 1.0, 5)
    drop = lambda h: ukjax.simulate(
        BouncingBall(), h[None], jnp.zeros(1), ts, contact=ukjax.Impact(0.7)
    ).q[-1, 0]
    with pytest.raises(TypeError, match=r"adjoint=diffrax\.ForwardMode\(\)"):
        jax.jacfwd(drop)(1.0)


def _float32_drop(h0):
    """A float32 ball dropped from h0 (float32), restitution 0.8, saved at 13 times."""
    f32 = jnp.float32
    ts = jnp.linspace(0.0, 1.2, 13, dtype=f32)
    law = ukjax.Impact(restitution=0.8)
    return ukjax.simulate(BouncingBall(), h0[None], jnp.zeros(1, f32), ts, contact=law)


def _between_first_bounces(h0, t, e=0.8, g=9.81):
    """x(t) and dx(t)/dh0 of the ball between its 1st and 2nd impact: x = v1 s - g s^2 / 2,
    s = t - t1, t1 = sqrt(2 h0 / g), v1 = e sqrt(2 g h0)."""
    t1, v1 = np.sqrt(2 * h0 / g), e * np.sqrt(2 * g * h0)
    s = t - t1
    dt1 = 1.0 / np.sqrt(2 * g * h0)
    return v1 * s - 0.5 * g * s**2, e * np.sqrt(g / (2 * h0)) * s - (v1 - g * s) * dt1


def test_float32_hybrid_runs_with_x64_on():
    """A float32 run in a process with x64 on (as these tests run): the events are found
    and the run stays float32 and matches the closed form to float32's accuracy. diffrax's
    event root find puts the event value in a `lax.cond` beside a Python 0.0 (float64
    with x64 on): ukjax's float32 event values failed to trace there until stop 90."""
    sol = _float32_drop(jnp.asarray(1.0, jnp.float32))
    assert sol.result == ukjax.RESULTS.successful and sol.q.dtype == jnp.float32
    times, _, _ = bouncing_ball_impacts(1.0, 0.8, 9.81, 2)
    np.testing.assert_allclose(sol.events.time[:2], times, rtol=1e-4)
    x, _ = _between_first_bounces(1.0, float(sol.ts[8]))
    np.testing.assert_allclose(float(sol.q[8, 0]), x, rtol=1e-4)


@pytest.mark.slow
def test_float32_derivatives_and_friction_with_x64_on():
    """The same float32 drop with x64 on, differentiated through its impact (d x / d h0
    against the closed form), and a float32 frictional ball in 3-D: it slides, then rolls
    at 5/7 of its initial speed (Coulomb(), BallsOnTable)."""
    f32 = jnp.float32
    grad = jax.grad(lambda h: _float32_drop(h).q[8, 0])(jnp.asarray(1.0, f32))
    assert grad.dtype == f32
    _, dx = _between_first_bounces(1.0, 0.8)
    np.testing.assert_allclose(float(grad), dx, rtol=1e-3)
    ball = BallsOnTable(count=1, mu_static=0.3, mu_kinetic=0.2)
    q0 = jnp.array([0.0, 0.0, ball.radius, 0.0, 0.0, 0.0], f32)
    qd0 = jnp.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.0], f32)
    ts = jnp.linspace(0.0, 0.8, 9, dtype=f32)
    sol = ukjax.simulate(ball, q0, qd0, ts, friction=ukjax.Coulomb())
    assert sol.result == ukjax.RESULTS.successful and sol.q.dtype == f32
    np.testing.assert_allclose(sol.qd[-1, :2], [5.0 / 7.0, 0.0], atol=1e-5)


@pytest.mark.slow
def test_bouncing_ball_in_float32_comes_to_rest():
    # float32 as a float32 user runs it, with x64 off (test_float32_hybrid_runs_with_x64_on
    # runs it with x64 on)
    law = ukjax.Impact(restitution=0.8)
    with jax.enable_x64(False):
        ts = jnp.linspace(0.0, 5.0, 11, dtype=jnp.float32)
        sol = ukjax.simulate(BouncingBall(), jnp.ones(1), jnp.zeros(1), ts, contact=law,
                             throw=False)  # fmt: skip
    assert sol.result == ukjax.RESULTS.successful and sol.q.dtype == jnp.float32
    times, _, zeno = bouncing_ball_impacts(1.0, 0.8, 9.81, 5)
    np.testing.assert_allclose(sol.events.time[:5], times, rtol=1e-4)  # 100 eps per event
    v_tol = law.speed_tol(jnp.float32)
    last = float(sol.events.time[int(sol.events.count) - 1])
    assert zeno - 2 * v_tol / (9.81 * 0.2) - 1e-4 < last <= zeno + 1e-4
    assert abs(float(sol.q[-1, 0])) < 1e-4 and float(sol.qd[-1, 0]) == 0.0


@pytest.mark.slow
def test_particle_leaves_a_cylinder_where_the_normal_force_vanishes():
    # Starting on top with speed v0, the contact is persistent (compressive) until
    # cos(theta) = (2/3)(1 + v0^2 / (2 g R)): the release event.
    v0, R, g = 0.5, 1.0, 9.81
    p = CylinderParticle(R=R, g=g)
    law = ukjax.Impact(restitution=0.0)
    ts = jnp.linspace(0.0, 1.5, 31)
    sol = ukjax.simulate(p, jnp.array([0.0, R]), jnp.array([v0, 0.0]), ts, contact=law)
    ev = sol.events
    assert int(ev.count) == 1 and int(ev.kind[0]) == ukjax.EVENT_KINDS.index("release")
    assert bool(sol.engaged[0, 0]) and not bool(sol.engaged[-1, 0])
    t_rel = float(ev.time[0])
    # the same shapes again (no new compilation), now ending at the release
    at = ukjax.simulate(
        p, jnp.array([0.0, R]), jnp.array([v0, 0.0]), jnp.linspace(0.0, t_rel, 31), contact=law
    )
    q = np.asarray(at.q[-1])
    np.testing.assert_allclose(
        q[1] / np.linalg.norm(q), (2 / 3) * (1 + v0**2 / (2 * g * R)), atol=1e-9
    )
    # while engaged the particle stays on the cylinder and the contact pushes
    on = np.asarray(sol.engaged[:, 0])
    r = np.linalg.norm(np.asarray(sol.q), axis=1)
    np.testing.assert_allclose(r[on], R, atol=1e-10)
    forces = jax.vmap(lambda t, q, qd, e: ukjax.contact_forces(p, t, q, qd, e, contact=law)[2])(
        sol.ts, sol.q, sol.qd, sol.engaged
    )
    assert np.all(np.asarray(forces)[on] > 0) and np.all(np.asarray(forces)[~on] == 0)


@pytest.mark.slow
def test_pendulum_into_a_wall_matches_minimal_coordinates_with_scipy_events():
    L, g, wall, e = 1.0, 9.81, 0.5, 0.7
    theta0 = -1.2
    ts = np.linspace(0.0, 4.0, 81)
    ref, impacts = pendulum_wall_reference(L, g, wall, e, theta0, 0.0, ts)
    p = WallPendulum(length=L, g=g, wall=wall)
    q0 = jnp.array([L * np.sin(theta0), -L * np.cos(theta0)])
    sol = ukjax.simulate(p, q0, jnp.zeros(2), jnp.asarray(ts), contact=ukjax.Impact(e))
    n = int(sol.events.count)
    assert n == len(impacts) >= 3
    np.testing.assert_allclose(sol.events.time[:n], impacts, atol=1e-9)
    theta = np.arctan2(np.asarray(sol.q[:, 0]), -np.asarray(sol.q[:, 1]))
    np.testing.assert_allclose(theta, ref[:, 0], atol=1e-8)
    omega = (
        np.asarray(sol.q[:, 0]) * np.asarray(sol.qd[:, 1])
        - np.asarray(sol.q[:, 1]) * np.asarray(sol.qd[:, 0])
    ) / L**2
    np.testing.assert_allclose(omega, ref[:, 1], atol=1e-7)
    np.testing.assert_allclose(np.sum(np.asarray(sol.q) ** 2, axis=1), L**2, atol=1e-9)


def test_apply_impulse_matches_kkt_and_the_seed_table():
    fb = ImpulsiveFourBar()
    q = fb.configuration(0.0)
    impulse = jnp.array([0.0, 1e6, 1e6])
    qd = ukjax.apply_impulse(fb, 0.0, q, jnp.zeros(3), impulse)
    J = np.asarray(ukjax.constraint_matrices(fb, 0.0, q, jnp.zeros(3))[0])
    M = np.asarray(ukjax.mass_and_force(fb, 0.0, q, jnp.zeros(3))[0])
    np.testing.assert_allclose(qd, kkt_impulse(M, J, np.zeros(3), np.asarray(impulse)), rtol=1e-10)
    # Bajodah 2003, eqs 469-471 (printed to 4-5 digits; SEED_CASES [DER] values)
    np.testing.assert_allclose(qd, [2.72496e4, -6020.71, 6846.37], rtol=2e-6)
    np.testing.assert_allclose(0.5 * qd @ M @ qd, 0.5 * impulse @ qd, rtol=1e-11)
    # from a moving state too, and with a redundant copy of a constraint
    rng = np.random.default_rng(0)
    qd0 = jnp.asarray(np.linalg.svd(J)[2][-1] * 3.0)  # a consistent velocity
    kick = jnp.asarray(rng.normal(size=3))
    after = ukjax.apply_impulse(fb, 0.0, q, qd0, kick)
    np.testing.assert_allclose(
        after, kkt_impulse(M, J, np.asarray(qd0), np.asarray(kick)), rtol=1e-10, atol=1e-12
    )

    class Redundant(ImpulsiveFourBar):
        def holonomic(self, t, q):
            phi = super().holonomic(t, q)
            return jnp.concatenate([phi, 2.0 * phi[:1]])

    again = ukjax.apply_impulse(Redundant(), 0.0, q, qd0, kick)
    np.testing.assert_allclose(again, after, rtol=1e-9, atol=1e-12)


def test_impulses_during_a_run_and_contact_errors():
    pend = CartesianPendulum(length=1.0, g=9.81)
    kicks = ukjax.Impulses(times=jnp.array([0.5]), values=jnp.array([[2.0, 5.0]]))
    ts = jnp.linspace(0.0, 1.0, 11)
    sol = ukjax.simulate(pend, jnp.array([0.0, -1.0]), jnp.zeros(2), ts, impulses=kicks)
    assert int(sol.events.count) == 1 and float(sol.events.time[0]) == 0.5
    np.testing.assert_allclose(sol.qd[5], [2.0, 0.0], atol=1e-12)  # radial part absorbed
    np.testing.assert_allclose(sol.qd[4], [0.0, 0.0], atol=1e-12)
    with pytest.raises(ValueError, match="declares no unilateral"):
        ukjax.simulate(pend, jnp.array([0.0, -1.0]), jnp.zeros(2), ts, contact=ukjax.Impact())
    with pytest.raises(ValueError, match="restitution"):
        ukjax.Impact(restitution=1.5)
    with pytest.raises(ValueError, match="dissipative"):
        ukjax.HuntCrossley(damping=-1.0)
    with pytest.raises(TypeError, match="contact law"):
        ukjax.simulate(BouncingBall(), jnp.ones(1), jnp.zeros(1), ts, contact="impact")


def test_impulse_times_out_of_order_or_before_the_start():
    """Known impulse times that decrease, or precede ts[0], are a ValueError naming the fix
    (before: the run integrated backwards to the early time and ended with a misleading
    max_events_reached). Traced times (under vmap) cannot be checked at trace time: an
    impulse whose time has passed is applied at once, so each member gets both kicks."""
    ball, ts = BouncingBall(), jnp.array([0.0, 0.1, 0.2])

    def run(times, **kw):
        kicks = ukjax.Impulses(times=times, values=jnp.array([[2.0], [3.0]]))
        return ukjax.simulate(ball, jnp.ones(1), jnp.zeros(1), ts, impulses=kicks, **kw)

    with pytest.raises(ValueError, match="must not decrease.*argsort"):
        run(jnp.array([0.15, 0.05]))
    with pytest.raises(ValueError, match="precedes the run's start"):
        run(jnp.array([-0.5, 0.05]))
    first = jnp.array([-0.5, 0.15, 0.02])  # before the start, out of order, in order
    sol = jax.vmap(lambda t: run(jnp.stack([t, 0.05]), throw=False))(first)
    assert bool(jnp.all(sol.result == ukjax.RESULTS.successful))
    np.testing.assert_allclose(sol.qd[:, -1, 0], 5.0 - 9.81 * 0.2, atol=1e-12)


@pytest.mark.slow
def test_initial_penetration_and_too_many_events_get_codes():
    ts = jnp.linspace(0.0, 3.0, 4)
    law = ukjax.Impact(restitution=0.9)
    sol = ukjax.simulate(
        BouncingBall(), jnp.array([-0.1]), jnp.zeros(1), ts, contact=law, throw=False, max_events=3
    )
    assert sol.result == ukjax.RESULTS.initial_penetration
    assert np.all(np.isnan(np.asarray(sol.q)))
    sol = ukjax.simulate(
        BouncingBall(), jnp.array([1.0]), jnp.zeros(1), ts, contact=law, throw=False, max_events=3
    )
    assert sol.result == ukjax.RESULTS.max_events_reached
    assert int(sol.events.count) == 3
    t3 = float(sol.events.time[2])
    saved = np.asarray(ts) <= t3
    assert np.all(np.isfinite(np.asarray(sol.q)[saved]))  # the finished part is kept
    assert np.isnan(float(sol.q[-1, 0]))  # after the 4th impact (t = 2.63 s): not computed
    with pytest.raises(ValueError, match="starts inside an obstacle"):
        ukjax.simulate(BouncingBall(), jnp.array([-0.1]), jnp.zeros(1), ts, contact=law)
    with pytest.raises(Exception, match="max_events"):
        ukjax.simulate(
            BouncingBall(), jnp.array([1.0]), jnp.zeros(1), ts, contact=law, max_events=3
        )


@pytest.mark.slow
def test_compliant_contact_follows_its_linear_law_and_hunt_crossley_dissipates():
    # ContactDynamics: once g < -delta, g'' + c g' + k g = 0 exactly (a linear ODE).
    c, k, delta = 30.0, 200.0, 1e-3
    law = ukjax.ContactDynamics(damping=c, stiffness=k, activation=delta)
    ts = jnp.linspace(0.0, 0.8, 161)
    sol = ukjax.simulate(BouncingBall(), jnp.array([0.2]), jnp.zeros(1), ts, contact=law)
    t_on = float(sol.events.time[0])
    assert ukjax.EVENT_KINDS[int(sol.events.kind[0])] == "engage"
    v_on = -np.sqrt(2 * 9.81 * (0.2 + delta))
    np.testing.assert_allclose(t_on, np.sqrt(2 * (0.2 + delta) / 9.81), atol=1e-10)
    r = np.roots([1.0, c, k])  # two real or complex roots
    on = (np.asarray(ts) > t_on) & np.asarray(sol.engaged[:, 0])
    s = np.asarray(ts)[on] - t_on
    coef = np.linalg.solve(np.array([[1, 1], r]), np.array([-delta, v_on], complex))
    g_ref = np.real(coef[0] * np.exp(r[0] * s) + coef[1] * np.exp(r[1] * s))
    np.testing.assert_allclose(np.asarray(sol.q[on, 0]), g_ref, atol=1e-9)
    # Hunt-Crossley: velocity continuous (no impact event), penetration >= 0, energy lost
    hc = ukjax.HuntCrossley(stiffness=1e4, damping=1e5, exponent=1.5)
    sol = ukjax.simulate(
        BouncingBall(), jnp.array([0.2]), jnp.zeros(1), ts, contact=hc, rtol=1e-10, atol=1e-10
    )
    kinds = [ukjax.EVENT_KINDS[int(x)] for x in sol.events.kind[: int(sol.events.count)]]
    assert kinds[:2] == ["engage", "release"]
    E = 0.5 * np.asarray(sol.qd[:, 0]) ** 2 + 9.81 * np.asarray(sol.q[:, 0])
    after = np.asarray(ts) > float(sol.events.time[1])
    assert np.all(E[after] < 9.81 * 0.2 - 1e-3)
    assert np.max(np.abs(np.diff(np.asarray(sol.qd[:, 0])))) < 1.0


@pytest.mark.slow
def test_gradients_through_two_impacts_match_finite_differences():
    ts = jnp.linspace(0.0, 1.5, 16)

    def final(params):
        h, e, g, v0 = params
        sol = ukjax.simulate(
            BouncingBall(g=g),
            jnp.array([h]),
            jnp.array([v0]),
            ts,
            contact=ukjax.Impact(restitution=e),
        )
        assert sol.events is not None
        return sol.q[-1, 0] + 0.3 * sol.qd[-1, 0] + sol.events.time[1]

    p = jnp.array([1.0, 0.8, 9.81, 0.3])
    count = ukjax.simulate(
        BouncingBall(),
        jnp.array([1.0]),
        jnp.array([0.3]),
        ts,
        contact=ukjax.Impact(restitution=0.8),
    ).events.count
    assert int(count) == 2
    grad = jax.grad(final)(p)
    assert np.all(np.isfinite(np.asarray(grad)))
    f = jax.jit(final)
    fd = [(f(p + d) - f(p - d)) / 2e-6 for d in 1e-6 * jnp.eye(4)]
    np.testing.assert_allclose(grad, jnp.stack(fd), rtol=1e-6, atol=1e-7)


@pytest.mark.slow
def test_a_batch_of_1024_drops_equals_the_loop_of_single_runs():
    """The same impacts, the same event times and the same motion. The batch is another
    compilation (Dopri8 in ukjax.StageLoop, other emitters) that rounds differently, so
    its step sequence may differ in the last steps of a trajectory (3 of these 28 take
    another number of steps): positions agree to the global error of two runs at the
    default tolerance 1e-12 (measured 0.9e-12 - 1.4e-12), not to round-off."""
    h0s = jnp.linspace(0.2, 3.0, 1024)
    es = jnp.linspace(0.3, 0.95, 1024)
    batch = jax.jit(jax.vmap(_drop))(h0s, es)
    assert np.all(np.asarray(batch.result._value) == 0)
    for i in range(0, 1024, 37):
        single = _drop(h0s[i], es[i])
        np.testing.assert_array_equal(batch.events.count[i], single.events.count)
        np.testing.assert_allclose(batch.q[i], single.q, rtol=0, atol=1e-11)
        np.testing.assert_allclose(batch.events.time[i], single.events.time, atol=1e-12)


class Dumbbell(ukjax.System):
    """Two unit point masses joined by a rigid massless rod of length 1 (q = [x1, y1, x2,
    y2]), above the floor y = 0: two contacts."""

    g: float = 9.81

    def num_coordinates(self):
        return 4

    def kinetic_energy(self, t, q, qd):
        return 0.5 * qd @ qd

    def potential_energy(self, t, q):
        return self.g * (q[1] + q[3])

    def holonomic(self, t, q):
        d = q[2:] - q[:2]
        return jnp.array([d @ d - 1.0])

    def unilateral(self, t, q):
        return jnp.array([q[1], q[3]])


@pytest.mark.slow
def test_simultaneous_and_near_simultaneous_impacts():
    law = ukjax.Impact(restitution=0.5)
    ts = jnp.linspace(0.0, 0.5, 11)

    def drop(tilt):
        q0 = jnp.array([0.0, 1.0, jnp.cos(tilt), 1.0 + jnp.sin(tilt)])
        return ukjax.simulate(Dumbbell(), q0, jnp.zeros(4), ts, contact=law, throw=False)

    both = drop(0.0)  # flat: both ends land at once and bounce together, no rotation
    ev = both.events
    t_hit = np.sqrt(2.0 / 9.81)
    assert int(ev.count) == 1 and abs(float(ev.time[0]) - t_hit) < 1e-10
    after = np.asarray(ts) > t_hit
    v_hit = 9.81 * t_hit
    qd = np.asarray(both.qd)[after]
    np.testing.assert_allclose(qd[:, 1], qd[:, 3], atol=1e-9)  # same vertical speed: no spin
    np.testing.assert_allclose(qd[:, [0, 2]], 0.0, atol=1e-9)
    t_after = np.asarray(ts)[after] - t_hit
    np.testing.assert_allclose(both.qd[after][:, 1], 0.5 * v_hit - 9.81 * t_after, atol=1e-9)
    # slightly tilted: the lower end first, then the other, in time order, no penetration
    tilted = drop(1e-3)
    ev = tilted.events
    n = int(ev.count)
    times = np.asarray(ev.time[:n])
    assert n >= 2 and np.all(np.diff(times) > 0)
    assert int(ev.contact[0]) == 0 and int(ev.contact[1]) == 1
    assert float(jnp.min(tilted.q[:, [1, 3]])) > -1e-12
    d = tilted.q[:, 2:] - tilted.q[:, :2]
    np.testing.assert_allclose(jnp.sum(d**2, axis=1), 1.0, atol=1e-9)


def test_contact_forces_and_friction_forces_take_the_same_arguments():
    import inspect

    names = lambda f: list(inspect.signature(f).parameters)
    assert names(ukjax.contact_forces) == names(ukjax.friction_forces)
    ball = BouncingBall(mass=2.0, g=10.0)
    args = (ball, 0.0, jnp.zeros(1), jnp.zeros(1), jnp.array([True]))
    new = ukjax.contact_forces(*args, contact=ukjax.Impact())
    assert float(new[2][0]) == pytest.approx(20.0)  # the floor carries m g
    with pytest.warns(DeprecationWarning, match="contact=law"):
        old = ukjax.contact_forces(*args, ukjax.Impact())  # the former order
    np.testing.assert_array_equal(np.asarray(new[2]), np.asarray(old[2]))
    with pytest.raises(TypeError, match="two contact laws"):
        ukjax.contact_forces(*args, ukjax.Impact(), contact=ukjax.Impact())


class _PastADisc(ukjax.System):
    """A unit mass in the plane, no forces, and a fixed disc of radius 0.1 at (5, 0): the
    gap |q - c| - 0.1 falls to zero and, past the disc, would rise again."""

    def kinetic_energy(self, t, q, qd):
        return 0.5 * qd @ qd

    def unilateral(self, t, q):
        return jnp.array([jnp.hypot(q[0] - 5.0, q[1]) - 0.1])


@pytest.mark.slow  # default-suite time (7 s)
def test_a_contact_approached_at_constant_speed_is_not_stepped_over():
    """At constant speed the error estimate lets the steps grow without bound, and one
    could carry the gap below zero and back unseen (diffrax checks step ends): the steps
    are bounded by the predicted time to touch, so the particle hits the disc at 4.9 s."""
    ts = jnp.linspace(0.0, 10.0, 3)
    sol = ukjax.simulate(
        _PastADisc(), jnp.zeros(2), jnp.array([1.0, 0.0]), ts, contact=ukjax.Impact(1.0)
    )
    assert int(sol.events.count) == 1
    assert abs(float(sol.events.time[0]) - 4.9) < 1e-12
    np.testing.assert_allclose(sol.qd[-1], [-1.0, 0.0], atol=1e-12)  # bounced straight back
    np.testing.assert_allclose(sol.q[-1], [-0.2, 0.0], atol=1e-11)


def test_a_segment_hands_diffrax_its_own_saves_only():
    """The saves of a segment from t0 to t1: those in [t0, t1] first and in order, the rest
    NaN (diffrax never reaches them: a segment that starts late does not interpolate the
    saves before it); rolling the result back by `shift` restores the order of `ts`."""
    ts = jnp.linspace(0.0, 2.0, 11)
    for t0, t1 in [(0.0, 2.0), (0.55, 1.2), (0.6, 0.6), (1.7, 2.0), (0.0, 0.05)]:
        shift, seg = _segment_saves(ts, jnp.asarray(t0), jnp.asarray(t1))
        inside = (ts >= t0) & (ts <= t1)
        n = int(np.sum(inside))
        seg = np.asarray(seg)
        np.testing.assert_array_equal(seg[:n], np.asarray(ts)[np.asarray(inside)])
        assert np.all(np.isnan(seg[n:]))
        back = np.asarray(jnp.roll(jnp.asarray(seg), shift))
        np.testing.assert_array_equal(np.isnan(back), ~np.asarray(inside))


def test_the_event_log_records_an_entry_only_where_asked_and_drops_past_its_end():
    """`EventLog.record(..., when=)`: an entry not made leaves every field and the count
    as they were (a write past the end, not a select), also under vmap with a different
    `when` per member; a full log keeps its entries and its count at its size."""
    from ukjax._events import EventKind, EventLog

    log = EventLog.empty(2, jnp.float64)
    same = log.record(0.5, EventKind.IMPACT, 0, -1.0, 0.8, 2.0, 0.0, when=False)
    for a, b in zip(jax.tree.leaves(same), jax.tree.leaves(log)):
        np.testing.assert_array_equal(a, b)
    one = log.record(0.5, EventKind.IMPACT, 0, -1.0, 0.8, 2.0, 0.0, when=True)
    assert int(one.count) == 1 and float(one.time[0]) == 0.5 and np.isnan(one.time[1])
    assert int(one.kind[0]) == EventKind.IMPACT and float(one.normal_impulse[0]) == 2.0
    full = one.record(0.7, EventKind.SLIP, 1, 0.1, 0.2).record(0.9, EventKind.STICK, 1, 0.0, 0.0)
    assert int(full.count) == 2 and list(np.asarray(full.time)) == [0.5, 0.7]
    rec = lambda w: one.record(0.6, EventKind.RELEASE, 0, 0.0, 0.0, when=w)
    batch = jax.vmap(rec)(jnp.array([True, False]))
    assert list(np.asarray(batch.count)) == [2, 1]
    assert float(batch.time[0, 1]) == 0.6 and np.isnan(batch.time[1, 1])
    assert int(batch.kind[1, 1]) == EventKind.NONE


class BallColumn(ukjax.System):
    """`balls` equal balls of radius r stacked on a line above a floor, as a user writes
    them: centres q upward, contact 0 the floor, contact i the gap between balls i - 1, i."""

    balls: int = 4
    r: float = 0.1
    g: float = 9.81

    def kinetic_energy(self, t, q, qd):
        return 0.5 * qd @ qd

    def potential_energy(self, t, q):
        return self.g * jnp.sum(q)

    def unilateral(self, t, q):
        return jnp.concatenate([q[:1] - self.r, q[1:] - q[:-1] - 2 * self.r])


def test_a_column_of_balls_settles_on_the_floor():
    """Four balls dropped in a column (e = 0.5): their binary impacts match an exact
    event-by-event reference, and they come to rest stacked. From a start with the bottom
    ball on the floor, a run used to stall in one segment (max_steps): an upper contact
    closing slowly sat at a gap of round-off, bounded by steps too short to change the
    coordinates; the step bound now carries a touching contact across its band."""
    column, law = BallColumn(), ukjax.Impact(0.5)
    ts = jnp.linspace(0.0, 3.0, 31)
    stack = 0.1 + 0.2 * np.arange(4)

    def run(q0):
        return ukjax.simulate(column, q0, jnp.zeros(4), ts, contact=law, max_events=1024)

    free = run(jnp.array([0.3, 0.62, 0.95, 1.3]))  # every contact open at the start
    ev = free.events
    ref = ball_column_impacts([0.3, 0.62, 0.95, 1.3], np.zeros(4), 0.1, 0.5, 9.81, 40)
    np.testing.assert_array_equal(np.asarray(ev.contact[:40]), [j for _, j in ref])
    np.testing.assert_allclose(np.asarray(ev.time[:40]), [t for t, _ in ref], rtol=0, atol=1e-11)
    np.testing.assert_array_equal(np.asarray(ev.kind[:40]), int(ukjax.EventKind.IMPACT))
    resting = run(jnp.asarray(0.1 + 0.25 * np.arange(4) + 0.05 * np.arange(4) ** 1.5))
    for sol in (free, resting):
        assert sol.result == ukjax.RESULTS.successful
        # at rest, stacked: a contact touching within the law's simultaneity band
        # (sqrt(eps)) when another impacts joins that impact and engages where it is
        band = law.gap_tol(jnp.float64)
        np.testing.assert_allclose(np.asarray(sol.q[-1]), stack, rtol=0, atol=band)
        np.testing.assert_allclose(np.asarray(sol.qd[-1]), 0.0, atol=1e-12)
        gaps = jax.vmap(lambda q: column.unilateral(0.0, q))(sol.q)
        assert float(jnp.min(gaps)) > -1e-12
        energy = jax.vmap(lambda q, qd: ukjax.energy(column, 0.0, q, qd))(sol.q, sol.qd)
        assert np.all(np.diff(np.asarray(energy)) < 1e-9)  # impacts only dissipate


class RoughPlane(ukjax.System):
    """A point mass on a rough horizontal floor (x, y), friction declared (Coulomb)."""

    g: float = 9.81
    mu: float = 0.4

    def kinetic_energy(self, t, q, qd):
        return 0.5 * qd @ qd

    def potential_energy(self, t, q):
        return self.g * q[1]

    def unilateral(self, t, q):
        return q[1]

    def friction(self, t, q):
        return jnp.array([[[1.0, 0.0]]]), self.mu, self.mu


class Magnet(ukjax.System):
    """A point mass (x, y) under gravity that a magnet at y = 1 catches for good: a latch
    whose row keeps y once engaged (engage when y reaches 1, never released)."""

    g: float = 9.81

    def kinetic_energy(self, t, q, qd):
        return 0.5 * qd @ qd

    def potential_energy(self, t, q):
        return self.g * q[1]

    def latches(self, t, q):
        return jnp.array([q[1] - 1.0])

    def latch_conditions(self, t, q, qd):
        return jnp.array([1.0 - q[1]]), jnp.array([1.0])


def test_an_impulse_on_a_latched_body_keeps_the_latch():
    """A ball caught by the magnet at y = 1 and then kicked by (1, -2): the engaged latch
    takes the kick's vertical part (its row is a bilateral constraint while engaged), the
    ball slides along y = 1 at x' + 1. Before, the kick ignored the latch: the ball left
    y = 1 at -2 m/s, still latched, and fell at constant speed."""
    kick = ukjax.Impulses(times=jnp.array([0.5]), values=jnp.array([[1.0, -2.0]]))
    ts = jnp.array([0.0, 0.5, 0.6, 1.0])
    sol = ukjax.simulate(Magnet(), jnp.zeros(2), jnp.array([0.5, 6.0]), ts, impulses=kick)
    np.testing.assert_allclose(sol.q[1:, 1], 1.0, atol=1e-12)
    np.testing.assert_allclose(sol.qd[2:], [[1.5, 0.0], [1.5, 0.0]], atol=1e-12)
    np.testing.assert_allclose(
        sol.q[2:, 0], 0.5 * 0.5 + 1.5 * (np.asarray(ts[2:]) - 0.5), atol=1e-12
    )
    assert bool(sol.latched[-1, 0])


@pytest.mark.slow  # 17-18 s: the default suite's two longest tests (stop 101)
def test_an_impulse_on_a_resting_body_sets_its_contact_modes():
    """A kick at t = 0.5 to a ball resting on the floor: upward, it leaves the floor and flies
    under gravity; downward, it is driven into the floor, which answers with the law's
    impact (rebound e v); sideways on a rough floor, it slides and stops after v^2/(2 mu g).
    Before, the contact stayed engaged through the kick: the ball flew at constant speed,
    went through the floor, and slid without friction."""
    from ukjax import EventKind

    g, e, tk = 9.81, 0.5, 0.5
    ts = jnp.array([0.0, 0.5, 0.6, 0.75, 1.5])  # the slide stops at 1.01
    s = np.asarray(ts) - tk

    def kicked(value, system=BouncingBall(g=g), n=1, **kw):
        kick = ukjax.Impulses(times=jnp.array([tk]), values=jnp.asarray([value]))
        return ukjax.simulate(system, jnp.zeros(n), jnp.zeros(n), ts, impulses=kick, **kw)

    up = kicked([3.0], contact=ukjax.Impact(e))
    np.testing.assert_allclose(up.q[2:4, 0], 3.0 * s[2:4] - 0.5 * g * s[2:4] ** 2, atol=1e-12)
    assert [int(k) for k in up.events.kind[:2]] == [int(EventKind.IMPULSE), int(EventKind.IMPACT)]
    assert abs(float(up.events.time[1]) - (tk + 2 * 3.0 / g)) < 1e-12  # it lands again
    down = kicked([-3.0], contact=ukjax.Impact(e))
    np.testing.assert_allclose(down.q[2:4, 0], e * 3.0 * s[2:4] - 0.5 * g * s[2:4] ** 2, atol=1e-9)
    assert int(down.events.kind[1]) == int(EventKind.IMPACT)
    assert float(jnp.min(down.q[:, 0])) > -1e-12
    slide = kicked([2.0, 0.0], RoughPlane(g=g), 2)
    v, a = 2.0, 0.4 * g  # sliding decelerates at mu g until it sticks at v / (mu g)
    np.testing.assert_allclose(slide.q[2, 0], v * 0.1 - 0.5 * a * 0.01, atol=1e-12)
    np.testing.assert_allclose(slide.q[4, 0], v * v / (2 * a), atol=1e-12)
    np.testing.assert_allclose(slide.q[:, 1], 0.0, atol=1e-12)
    assert int(EventKind.STICK) in [int(k) for k in slide.events.kind[: int(slide.events.count)]]


class LimitedDoublePendulum(ukjax.System):
    """A user's double pendulum in absolute angles from the downward vertical (int masses,
    unit lengths) whose elbow stops at b - a = limit: a joint limit as one unilateral
    constraint."""

    limit: float
    m1: int = 1
    m2: int = 1
    g: float = 9.81

    def kinetic_energy(self, t, q, qd):
        (a, b), (ad, bd) = q, qd
        x2d = jnp.cos(a) * ad + jnp.cos(b) * bd
        y2d = jnp.sin(a) * ad + jnp.sin(b) * bd
        return 0.5 * self.m1 * ad**2 + 0.5 * self.m2 * (x2d**2 + y2d**2)

    def potential_energy(self, t, q):
        return -(self.m1 + self.m2) * self.g * jnp.cos(q[0]) - self.m2 * self.g * jnp.cos(q[1])

    def unilateral(self, t, q):
        return self.limit - (q[1] - q[0])


@pytest.mark.parametrize(
    "limit, z0",
    [
        (0.3, (-1.2, -0.9, 0.0, 0.0)),  # starts at the limit, pulled off it; two impacts, locks
        (0.3, (1.2, 1.5, 0.0, 0.0)),  # starts locked, released, two impacts
        (0.5, (0.0, 0.0, 2.0, 4.0)),  # an impact that parts at once, then one that locks
        (0.2, (0.5, 0.2, 0.0, 4.0)),  # two parting impacts, a lock, a release
    ],
)
def test_a_joint_limit_locks_and_releases_the_elbow_as_its_multiplier_says(limit, z0):
    """Plastic impacts (Impact(0)) at a double pendulum's elbow limit: after each the limit
    holds while its force pushes and releases where the force would pull; against a
    Lagrange-multiplier reference with scipy's events (tests/references.py)."""
    t_end = 3.0
    segments, events = double_pendulum_limit_reference(limit, 9.81, z0, t_end)
    ts = jnp.linspace(0.0, t_end, 61)
    sol = ukjax.simulate(
        LimitedDoublePendulum(limit=limit), jnp.array(z0[:2]), jnp.array(z0[2:]), ts,
        contact=ukjax.Impact(0.0),
    )  # fmt: skip
    n = int(sol.events.count)
    kinds = [ukjax.EVENT_KINDS[k] for k in np.asarray(sol.events.kind[:n])]
    assert kinds == [{"impact": "impact", "release": "release"}[k] for _, k in events]
    np.testing.assert_allclose(sol.events.time[:n], [t for t, _ in events], atol=1e-9)
    reference = np.array([next(s(t)[:2] for a, b, s in segments if a <= t <= b) for t in ts])
    np.testing.assert_allclose(sol.q, reference, atol=1e-9)
    assert float(jnp.min(limit - (sol.q[:, 1] - sol.q[:, 0]))) > -1e-12
