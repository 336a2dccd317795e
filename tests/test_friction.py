"""Coulomb friction with exact sticking (issue 14).

Independent references: closed forms (a block on an incline under a ramped force; a
mass-spring on a rough table; the damped stick phase of the velocity-tolerance rule), a
hand-written Lagrange-multiplier solve with the friction force in the normal force's
column (a sliding bar whose friction changes its normal force), and a scipy DOP853 event
reference for the two blocks of Bajodah 2003, Ex. 5.3 (tests/references.py).
"""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ukjax
from references import (
    belt_drop_reference,
    cart_pendulum_friction_reference,
    rough_table_turning_points,
    two_block_friction_reference,
)
from ukjax.systems import FrictionBlock, TwoBlockFriction


@jax.jit
def _run(block, q0, ts, qd0=jnp.zeros(2)):
    return ukjax.simulate(block, q0, qd0, ts, throw=False)


def _block(**kw):
    """A FrictionBlock whose fields are all floats (one pytree structure: one compile)."""
    base = dict(mass=1.0, g=9.81, incline=0.0, stiffness=0.0, force=0.0, force_rate=0.0)
    base.update(mu_static=0.5, mu_kinetic=0.5)
    base.update(kw)
    return FrictionBlock(**{k: float(v) for k, v in base.items()})


def _ramp_closed_form(m, g, th, ms, mk, rate, t):
    """Stuck until F = rate t reaches m g sin(th) + ms N, then m s'' = F - m g sin(th) - mk N."""
    N = m * g * np.cos(th)
    t_star = (m * g * np.sin(th) + ms * N) / rate
    d = np.maximum(t - t_star, 0.0)
    s = rate / (6 * m) * d**3 + (ms - mk) * N / m * d**2 / 2
    v = rate / (2 * m) * d**2 + (ms - mk) * N / m * d
    return t_star, s, v


@pytest.mark.slow  # moved from the default suite to keep it under 5 minutes
def test_incline_under_ramped_force_matches_closed_form():
    m, g, th, ms, mk, rate = 2.0, 9.81, 0.3, 0.5, 0.3, 4.0
    block = _block(mass=m, g=g, incline=th, mu_static=ms, mu_kinetic=mk, force_rate=rate)
    ts = jnp.linspace(0.0, 5.0, 201)
    sol = _run(block, jnp.zeros(2), ts)
    assert sol.result == ukjax.RESULTS.successful
    t_star, s, v = _ramp_closed_form(m, g, th, ms, mk, rate, np.asarray(ts))
    # exactly one event: the slip, at the static bound, up the slope
    assert int(sol.events.count) == 1
    assert ukjax.EVENT_KINDS[int(sol.events.kind[0])] == "slip"
    assert abs(float(sol.events.time[0]) - t_star) < 1e-8
    np.testing.assert_allclose(sol.q[:, 0], s, rtol=0, atol=1e-8)
    np.testing.assert_allclose(sol.qd[:, 0], v, rtol=0, atol=1e-8)
    stuck = np.asarray(ts) < t_star
    assert np.max(np.abs(np.asarray(sol.q)[stuck, 0])) < 1e-12  # no creep before the slip
    assert np.all(np.asarray(sol.sliding)[stuck, 0] == 0)
    assert np.all(np.asarray(sol.sliding)[~stuck, 0] == 1)
    assert np.max(np.abs(np.asarray(sol.q[:, 1]))) < 1e-10  # stays on the plane


@pytest.mark.slow  # moved from the default suite to keep it under 5 minutes
def test_stuck_block_does_not_creep_over_10_seconds():
    # tan(0.4) = 0.42 < mu_s = 0.6, plus a push down the slope at 60 % of the margin
    m, g, th, ms = 1.5, 9.81, 0.4, 0.6
    margin = ms * m * g * np.cos(th) - m * g * np.sin(th)
    block = _block(mass=m, g=g, incline=th, mu_static=ms, mu_kinetic=0.4, force=-0.6 * margin)
    sol = _run(block, jnp.array([0.25, 0.0]), jnp.linspace(0.0, 10.0, 201))
    assert sol.result == ukjax.RESULTS.successful
    assert int(sol.events.count) == 0
    assert np.max(np.abs(np.asarray(sol.q[:, 0]) - 0.25)) < 1e-12
    assert np.max(np.abs(np.asarray(sol.qd))) < 1e-12
    qdd, N, Ft = ukjax.friction_forces(block, 0.0, sol.q[-1], sol.qd[-1], jnp.array([True]))
    # the plane carries m g cos(th); friction holds gravity and the push along the slope
    np.testing.assert_allclose(N[0], m * g * np.cos(th), rtol=1e-12)
    np.testing.assert_allclose(Ft[0], m * g * np.sin(th) + 0.6 * margin, rtol=1e-12)


@pytest.mark.slow  # default-suite time; the same paths run in other default tests
def test_block_launched_down_a_slope_decelerates_and_sticks():
    # tan(0.2) < mu_s: kinetic friction decelerates the slide at g (mu_k cos - sin) to rest
    g, th, ms, mk, v0 = 9.81, 0.2, 0.5, 0.4, -2.0
    block = _block(g=g, incline=th, mu_static=ms, mu_kinetic=mk)
    ts = jnp.linspace(0.0, 3.0, 201)
    sol = _run(block, jnp.zeros(2), ts, jnp.array([v0, 0.0]))
    assert sol.result == ukjax.RESULTS.successful
    a = g * (mk * np.cos(th) - np.sin(th))
    t_stop = -v0 / a
    assert int(sol.events.count) == 1 and ukjax.EVENT_KINDS[int(sol.events.kind[0])] == "stick"
    assert abs(float(sol.events.time[0]) - t_stop) < 1e-9
    t = np.minimum(np.asarray(ts), t_stop)
    np.testing.assert_allclose(sol.q[:, 0], v0 * t + 0.5 * a * t**2, rtol=0, atol=1e-9)
    after = np.asarray(ts) > t_stop
    assert np.max(np.abs(np.asarray(sol.qd)[after])) == 0.0  # held exactly
    assert np.all(np.asarray(sol.sliding)[after, 0] == 0)


@pytest.mark.slow  # default-suite time (17 s)
def test_block_on_a_slope_steeper_than_the_static_bound_slides_from_rest():
    g, th, mk = 9.81, 0.6, 0.3  # tan(0.6) = 0.68 > mu_s = 0.5
    block = _block(g=g, incline=th, mu_static=0.5, mu_kinetic=mk)
    ts = jnp.linspace(0.0, 5.0, 201)
    sol = _run(block, jnp.zeros(2), ts)
    a = g * (mk * np.cos(th) - np.sin(th))
    assert int(sol.events.count) == 0 and np.all(np.asarray(sol.sliding)[:, 0] == -1)
    np.testing.assert_allclose(sol.q[:, 0], 0.5 * a * np.asarray(ts) ** 2, rtol=0, atol=1e-9)


@pytest.mark.slow  # default-suite time (16 s)
def test_mass_spring_on_rough_table_amplitude_and_rest():
    m, g, k, ms, mk, x0 = 1.0, 9.81, 100.0, 0.3, 0.2, 0.5
    block = _block(mass=m, g=g, stiffness=k, mu_static=ms, mu_kinetic=mk)
    ts = jnp.linspace(0.0, 5.0, 201)
    sol = _run(block, jnp.array([x0, 0.0]), ts)
    assert sol.result == ukjax.RESULTS.successful
    turns = rough_table_turning_points(m, g, k, ms, mk, x0, 100)
    n = int(sol.events.count)
    assert n == len(turns)  # a reversal at each turning point but the last, then a stick
    kinds = [ukjax.EVENT_KINDS[int(i)] for i in sol.events.kind[:n]]
    assert kinds == ["slip"] * (n - 1) + ["stick"]
    t_ref, x_ref = np.array(turns).T
    np.testing.assert_allclose(sol.events.time[:n], t_ref, rtol=0, atol=1e-9)
    # turning points: the amplitude falls by 2 mu_k m g / k per half cycle
    drop = np.abs(np.diff(np.abs(x_ref)))
    np.testing.assert_allclose(drop, 2 * mk * m * g / k, rtol=1e-12)
    rest = np.asarray(ts) > t_ref[-1]
    q = np.asarray(sol.q)
    np.testing.assert_allclose(q[rest, 0], x_ref[-1], rtol=0, atol=1e-8)
    assert abs(k * x_ref[-1]) <= ms * m * g
    assert np.ptp(q[rest, 0]) < 1e-12 and np.max(np.abs(np.asarray(sol.qd)[rest])) < 1e-12


@pytest.mark.slow  # default-suite time (15 s)
def test_mass_spring_positions_between_events_match_the_half_cycle_solution():
    m, g, k, ms, mk, x0 = 1.0, 9.81, 100.0, 0.3, 0.2, 0.5
    block = _block(mass=m, g=g, stiffness=k, mu_static=ms, mu_kinetic=mk)
    ts = jnp.linspace(0.0, 5.0, 201)
    sol = _run(block, jnp.array([x0, 0.0]), ts)
    w, d = np.sqrt(k / m), mk * m * g / k
    turns = [(0.0, x0)] + rough_table_turning_points(m, g, k, ms, mk, x0, 100)
    t = np.asarray(ts)
    x = np.full_like(t, turns[-1][1])
    for (ta, xa), (tb, _) in zip(turns[:-1], turns[1:]):
        c = d * np.sign(xa)
        sel = (t >= ta) & (t < tb)
        x[sel] = c + (xa - c) * np.cos(w * (t[sel] - ta))
    np.testing.assert_allclose(sol.q[:, 0], x, rtol=0, atol=1e-8)


class SlidingBar(ukjax.System):
    """A uniform bar (centre x, y, angle th) whose lower end rests on a rough floor: the
    friction at the end turns the bar, so the normal force depends on the friction."""

    mass: float = 1.0
    length: float = 1.0
    g: float = 9.81
    mu: float = 0.4

    def num_coordinates(self):
        return 3

    def kinetic_energy(self, t, q, qd):
        inertia = self.mass * self.length**2 / 12
        return 0.5 * self.mass * (qd[0] ** 2 + qd[1] ** 2) + 0.5 * inertia * qd[2] ** 2

    def potential_energy(self, t, q):
        return self.mass * self.g * q[1]

    def unilateral(self, t, q):
        return jnp.array([q[1] - 0.5 * self.length * jnp.sin(q[2])])

    def friction(self, t, q):
        T = jnp.array([[[1.0, 0.0, 0.5 * self.length * jnp.sin(q[2])]]])
        return T, self.mu, self.mu


def _kkt_sliding(bar, q, qd, s):
    """Lagrange multipliers by hand: M qdd = Q + (G - mu s T)^T N, G qdd = -Gdot qd."""
    m, L, g, mu = bar.mass, bar.length, bar.g, bar.mu
    M = np.diag([m, m, m * L**2 / 12])
    Q = np.array([0.0, -m * g, 0.0])
    th, thd = q[2], qd[2]
    G = np.array([0.0, 1.0, -0.5 * L * np.cos(th)])
    gdd0 = 0.5 * L * np.sin(th) * thd**2  # d/dt (G) qd
    T = np.array([1.0, 0.0, 0.5 * L * np.sin(th)])
    D = G - mu * s * T
    K = np.block([[M, -D[:, None]], [G[None, :], np.zeros((1, 1))]])
    sol = np.linalg.solve(K, np.concatenate([Q, [-gdd0]]))
    return sol[:3], sol[3]


@pytest.mark.parametrize("s", [1, -1])
def test_sliding_friction_couples_with_the_normal_force_like_a_kkt_solve(rng, s):
    bar = SlidingBar(mass=1.3, length=0.9, mu=0.4)
    for _ in range(3):
        th = rng.uniform(0.3, 1.2)
        q = np.array([0.1, 0.5 * bar.length * np.sin(th), th])
        thd = rng.normal()
        # a velocity with the end on the floor (G qd = 0)
        qd = np.array([rng.normal(), 0.5 * bar.length * np.cos(th) * thd, thd])
        qdd, N, Ft = ukjax.friction_forces(bar, 0.0, q, qd, jnp.array([True]), jnp.array([s]))
        qdd_ref, N_ref = _kkt_sliding(bar, q, qd, s)
        np.testing.assert_allclose(qdd, qdd_ref, rtol=1e-11, atol=1e-11)
        np.testing.assert_allclose(N[0], N_ref, rtol=1e-11)
        np.testing.assert_allclose(Ft[0], -bar.mu * s * N_ref, rtol=1e-11)
        # the friction force depends on the direction: N differs between s = +1 and -1
        _, N_other = _kkt_sliding(bar, q, qd, -s)
        assert abs(N_ref - N_other) > 1e-3


@pytest.mark.slow  # moved from the default suite to keep it under 5 minutes
def test_painleve_bar_is_refused_with_contact_unsolved_where_sliding_has_no_normal_force():
    """Painleve's paradox (Painleve 1895; Stewart, *Rigid-body dynamics with friction and
    impact*, SIAM Review 42, 2000, sec. 2): the bar (half-length l, inertia m l^2 / 3) not
    turning, its end sliding back (s = -1), has the normal force N = m g / D with
    D = 1 + 3 cos^2 th - 3 mu sin th cos th. With mu = 0.3 at th = 0.8 it slides with
    that force; with mu = 2, D < 0: no compressive force is consistent with sliding (N
    would pull), and the run is refused with contact_unsolved and NaN saves, not garbage."""
    th, m, g = 0.8, 1.0, 9.81
    q0 = jnp.array([0.0, np.sin(th), th])
    qd0 = jnp.array([-1.0, 0.0, 0.0])
    ts = jnp.linspace(0.0, 0.2, 5)
    for mu, paradox in ((0.3, False), (2.0, True)):
        bar = SlidingBar(mass=m, length=2.0, g=g, mu=mu)
        D = 1 + 3 * np.cos(th) ** 2 - 3 * mu * np.sin(th) * np.cos(th)
        assert (D < 0) == paradox
        _, N, _ = ukjax.friction_forces(bar, 0.0, q0, qd0, jnp.array([True]), jnp.array([-1]))
        np.testing.assert_allclose(N[0], m * g / D, rtol=1e-11)  # pulls where D < 0
        sol = ukjax.simulate(bar, q0, qd0, ts, throw=False)
        if paradox:
            assert sol.result == ukjax.RESULTS.contact_unsolved
            assert np.all(np.isnan(np.asarray(sol.q)))
            with pytest.raises(Exception, match="could not be resolved"):
                ukjax.simulate(bar, q0, qd0, ts)
        else:
            assert sol.result == ukjax.RESULTS.successful
            assert int(sol.sliding[1, 0]) == -1 and int(sol.engaged[1, 0]) == 1


def test_velocity_tolerance_literal_rule_pushes_with_the_load():
    # at rest with a net force above the static bound: the thesis's sgn(0) = -1 makes the
    # friction push along the load; the consistent rule makes it oppose the motion
    m, g, k, mu, x = 1.0, 9.81, 100.0, 0.3, -0.2  # spring force +20 N > mu m g = 2.943 N
    block = _block(mass=m, g=g, stiffness=k, mu_static=mu, mu_kinetic=mu)
    on = jnp.array([True])
    q, qd = jnp.array([x, 0.0]), jnp.zeros(2)
    law = ukjax.VelocityTolerance(tolerance=1e-3, damping=2.0)
    literal = ukjax.VelocityTolerance(tolerance=1e-3, damping=2.0, literal=True)
    a, _, Ft = ukjax.friction_forces(block, 0.0, q, qd, on, friction=law)
    a_lit, _, Ft_lit = ukjax.friction_forces(block, 0.0, q, qd, on, friction=literal)
    np.testing.assert_allclose(a[0], (-k * x - mu * m * g) / m, rtol=1e-12)
    np.testing.assert_allclose(a_lit[0], (-k * x + mu * m * g) / m, rtol=1e-12)
    np.testing.assert_allclose([Ft[0], Ft_lit[0]], [-mu * m * g, mu * m * g], rtol=1e-12)


@pytest.mark.slow
def test_velocity_tolerance_damped_stick_phase_closed_form():
    # below the tolerance with the spring force inside the static bound: u' = -a u
    m, g, k, mu, x0, u0, a = 1.0, 9.81, 10.0, 0.5, 0.1, 5e-4, 3.0
    block = _block(mass=m, g=g, stiffness=k, mu_static=mu, mu_kinetic=mu)
    ts = jnp.linspace(0.0, 2.0, 21)
    law = ukjax.VelocityTolerance(tolerance=1e-3, damping=a)
    fixed = dict(solver=ukjax.RK4(), stepsize_controller=diffrax.ConstantStepSize(), dt0=1e-3)
    sol = ukjax.simulate(
        block, jnp.array([x0, 0.0]), jnp.array([u0, 0.0]), ts, friction=law, **fixed
    )
    t = np.asarray(ts)
    np.testing.assert_allclose(sol.qd[:, 0], u0 * np.exp(-a * t), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(sol.q[:, 0], x0 + u0 * (1 - np.exp(-a * t)) / a, atol=1e-12)


@pytest.mark.slow
def test_two_blocks_match_the_scipy_event_reference():
    p = dict(m1=0.1, m2=0.1, k1=5.0, k2=5.0, amplitude=10.0, omega=1.5, mu_s=1.0, mu_k=0.8)
    p["g"] = 9.81
    ts = np.linspace(0.0, 6.0, 121)
    ref, events = two_block_friction_reference(p, ts)
    system = TwoBlockFriction(mu_static=1.0, mu_kinetic=0.8)
    sol = ukjax.simulate(system, jnp.zeros(4), jnp.zeros(4), jnp.asarray(ts))
    n = int(sol.events.count)
    assert n == len(events) and n > 8
    np.testing.assert_allclose(sol.events.time[:n], [e[0] for e in events], rtol=0, atol=1e-8)
    assert [int(c) for c in sol.events.contact[:n]] == [e[1] for e in events]
    kinds = [ukjax.EVENT_KINDS[int(i)] for i in sol.events.kind[:n]]
    assert kinds == [e[2] for e in events]
    np.testing.assert_allclose(sol.q[:, [0, 2]], ref[:, :2], rtol=0, atol=1e-8)
    np.testing.assert_allclose(sol.qd[:, [0, 2]], ref[:, 2:], rtol=0, atol=1e-7)
    # the normal forces are the contact forces m_i g
    _, N, _ = ukjax.friction_forces(
        system, ts[-1], sol.q[-1], sol.qd[-1], sol.engaged[-1], sol.sliding[-1]
    )
    np.testing.assert_allclose(N, [0.1 * 9.81, 0.1 * 9.81], rtol=1e-12)


@pytest.mark.slow  # default-suite time (23 s)
def test_invalid_friction_is_refused():
    block = _block(mu_static=0.2, mu_kinetic=0.3)
    ts = jnp.linspace(0.0, 1.0, 201)  # the shapes of the other tests: no new compilation
    with pytest.raises(ValueError, match="mu_kinetic <= mu_static"):
        ukjax.simulate(block, jnp.zeros(2), jnp.zeros(2), ts)
    sol = _run(block, jnp.zeros(2), ts)  # traced: a result code, NaN saves
    assert sol.result == ukjax.RESULTS.invalid_friction
    assert np.all(np.isnan(np.asarray(sol.q)))
    with pytest.raises(TypeError, match="ukjax.Coulomb"):
        ukjax.simulate(_block(), jnp.zeros(2), jnp.zeros(2), ts, friction="coulomb")  # pyright: ignore
    with pytest.raises(ValueError, match="declares no friction"):
        ukjax.simulate(
            ukjax.systems.BouncingBall(), jnp.ones(1), jnp.zeros(1), ts, friction=ukjax.Coulomb()
        )


class _NoContacts(FrictionBlock):
    def unilateral(self, t, q):
        return None


class _ThreeRows(FrictionBlock):
    def friction(self, t, q):
        return jnp.zeros((1, 3, 2)), 0.5, 0.5


class _WrongRows(FrictionBlock):
    def friction(self, t, q):
        return jnp.zeros((2, 1, 2)), 0.5, 0.5


@pytest.mark.parametrize(
    "system, match",
    [
        (_NoContacts(), "declares friction but no unilateral"),
        (_ThreeRows(), r"d = 2 \(3-D: two orthonormal tangent rows"),
        (_WrongRows(), r"T must have shape \(1, d, 2\)"),
    ],
)
def test_malformed_friction_declarations_raise(system, match):
    with pytest.raises(ValueError, match=match):
        ukjax.simulate(system, jnp.zeros(2), jnp.zeros(2), jnp.linspace(0.0, 1.0, 3))


class CartesianSlope(ukjax.System):
    """A point mass in plain Cartesian coordinates on a surface tilted by `theta`."""

    theta: float = 0.6
    g: float = 9.81

    def kinetic_energy(self, t, q, qd):
        return 0.5 * qd @ qd

    def potential_energy(self, t, q):
        return self.g * q[1]

    def unilateral(self, t, q):
        return jnp.array([-q[0] * jnp.sin(self.theta) + q[1] * jnp.cos(self.theta)])

    def friction(self, t, q):
        return jnp.array([[jnp.cos(self.theta), jnp.sin(self.theta)]]), 0.5, 0.3


@pytest.mark.slow
def test_cartesian_block_with_tangent_rows_as_k_by_n():
    # T given as (k, n); the slope is steeper than the static bound: slides from rest
    ts = jnp.linspace(0.0, 3.0, 31)
    sol = ukjax.simulate(CartesianSlope(), jnp.zeros(2), jnp.zeros(2), ts)
    th, g = 0.6, 9.81
    s = np.asarray(sol.q) @ np.array([np.cos(th), np.sin(th)])
    a = g * (0.3 * np.cos(th) - np.sin(th))
    np.testing.assert_allclose(s, 0.5 * a * np.asarray(ts) ** 2, rtol=0, atol=1e-9)
    normal = np.asarray(sol.q) @ np.array([-np.sin(th), np.cos(th)])
    assert np.max(np.abs(normal)) < 1e-10


@pytest.mark.extended  # 53 s; CI keeps batch = loop with friction (test_friction_3d.py,
# test_complementarity.py)
def test_batch_members_have_their_own_mode_sequences():
    block = _block(stiffness=100.0, mu_static=0.3, mu_kinetic=0.2)
    ts = jnp.linspace(0.0, 5.0, 101)
    x0 = jnp.linspace(0.05, 0.6, 8)
    batch = jax.vmap(lambda x: _run(block, jnp.stack([x, 0.0]), ts))(x0)
    counts = np.asarray(batch.events.count)
    assert len(set(counts.tolist())) > 2  # different numbers of reversals
    for i in (0, 3, 7):
        single = _run(block, jnp.array([float(x0[i]), 0.0]), ts)
        assert int(single.events.count) == counts[i]
        # equal to the integration tolerance (batched and single linear algebra round
        # differently, so the adaptive steps differ at the 1e-12 level)
        np.testing.assert_allclose(batch.q[i], single.q, rtol=0, atol=1e-10)
        np.testing.assert_allclose(batch.events.time[i], single.events.time, atol=1e-10)
        np.testing.assert_array_equal(batch.sliding[i], single.sliding)


def _final_position(p, x0, T):
    """s(T) of a FrictionBlock with (mu_s, mu_k, mass, force rate, stiffness, incline) = p."""
    block = FrictionBlock(
        mass=p[2], incline=p[5], stiffness=p[4], force_rate=p[3], mu_static=p[0], mu_kinetic=p[1]
    )
    ts = jnp.stack([jnp.zeros_like(T), T])
    return ukjax.simulate(block, jnp.stack([x0, 0.0]), jnp.zeros(2), ts).q[-1, 0]


@pytest.mark.slow
def test_gradients_through_stick_slip_match_closed_form_and_finite_differences():
    # one program for values and gradients (the differences read its values): compiling a
    # forward program of its own as well cost another 16 s of CI's slow tier
    value_and_grad = jax.jit(jax.value_and_grad(_final_position))
    final = lambda *args: value_and_grad(*args)[0]
    grad = lambda *args: value_and_grad(*args)[1]

    def fd(p, x0, T, i, h):
        e = h * np.eye(6)[i]
        return (float(final(p + e, x0, T)) - float(final(p - e, x0, T))) / (2 * h)

    # 1. the ramp: through the stick -> slip event; closed-form derivative of s(T)
    p = jnp.array([0.5, 0.3, 2.0, 4.0, 0.0, 0.3])
    x0, T = jnp.asarray(0.0), jnp.asarray(4.5)
    g = np.asarray(grad(p, x0, T))
    closed = lambda v: _ramp_closed_form(v[2], 9.81, v[5], v[0], v[1], v[3], np.array([4.5]))[1][0]
    steps = 1e-6 * np.eye(6)
    exact = np.array(
        [(closed(np.asarray(p) + e) - closed(np.asarray(p) - e)) / 2e-6 for e in steps]
    )
    np.testing.assert_allclose(g[[0, 1, 2, 3, 5]], exact[[0, 1, 2, 3, 5]], rtol=1e-6)
    for i in (0, 1):
        np.testing.assert_allclose(g[i], fd(p, x0, T, i, 1e-5), rtol=1e-5)
    # 2. the rough table: x(T) after four reversals, w.r.t. mu_k and the stiffness
    p = jnp.array([0.3, 0.2, 1.0, 0.0, 100.0, 0.0])
    x0, T = jnp.asarray(0.5), jnp.asarray(1.1)
    g = np.asarray(grad(p, x0, T))
    for i, h in ((1, 1e-6), (4, 1e-4)):
        np.testing.assert_allclose(g[i], fd(p, x0, T, i, h), rtol=1e-5)


@pytest.mark.slow
def test_rough_table_in_float32():
    with jax.enable_x64(False):
        block = FrictionBlock(stiffness=100.0, mu_static=0.3, mu_kinetic=0.2)
        ts = jnp.linspace(0.0, 5.0, 101, dtype=jnp.float32)
        sol = ukjax.simulate(block, jnp.array([0.5, 0.0], jnp.float32), jnp.zeros(2), ts)
        assert sol.q.dtype == jnp.float32 and sol.result == ukjax.RESULTS.successful
    turns = rough_table_turning_points(1.0, 9.81, 100.0, 0.3, 0.2, 0.5, 100)
    n = int(sol.events.count)
    assert n == len(turns)
    np.testing.assert_allclose(sol.events.time[:n], [t for t, _ in turns], atol=1e-4)
    np.testing.assert_allclose(sol.q[-1, 0], turns[-1][1], atol=1e-4)


class CartPendulum(ukjax.System):
    """A user's cart on a rough floor with a pendulum hung from it: (x, y, theta), int
    masses, the floor a unilateral contact y >= 0 with Coulomb friction along x."""

    mu: float
    cart: int = 1
    bob: int = 1
    g: float = 9.81

    def kinetic_energy(self, t, q, qd):
        _, _, th = q
        xd, yd, thd = qd
        bob_v = (xd + jnp.cos(th) * thd) ** 2 + (yd + jnp.sin(th) * thd) ** 2
        return 0.5 * self.cart * (xd**2 + yd**2) + 0.5 * self.bob * bob_v

    def potential_energy(self, t, q):
        return self.cart * self.g * q[1] + self.bob * self.g * (q[1] - jnp.cos(q[2]))

    def unilateral(self, t, q):
        return q[1]

    def friction(self, t, q):
        return jnp.array([[[1.0, 0.0, 0.0]]]), self.mu, self.mu


@pytest.mark.slow  # a frictional program's compile
@pytest.mark.parametrize(
    "mu, theta0",
    [(0.3, 1.2), (0.6, 1.5), (0.1, 1.0)],  # stick-slip cycles; the last reverses, never sticks
)
def test_a_swinging_pendulum_drags_its_cart_in_stick_slip_on_a_rough_floor(mu, theta0):
    """The normal force changes with the swing, and the friction bound with it: the
    stick and slip events and the motion against a minimal-coordinate reference with the
    normal and friction forces as unknowns (tests/references.py)."""
    t_end = 3.0
    segments, events = cart_pendulum_friction_reference(mu, theta0, t_end)
    ts = jnp.linspace(0.0, t_end, 31)
    sol = ukjax.simulate(CartPendulum(mu=mu), jnp.array([0.0, 0.0, theta0]), jnp.zeros(3), ts)
    n = int(sol.events.count)
    assert n == len(events) and n >= 3
    np.testing.assert_allclose(sol.events.time[:n], events, atol=1e-9)
    reference = np.array([next(s(t)[:2] for a, b, s in segments if a <= t <= b) for t in ts])
    np.testing.assert_allclose(sol.q[:, [0, 2]], reference, atol=1e-9)
    np.testing.assert_allclose(sol.q[:, 1], 0.0, atol=1e-12)  # the cart stays on the floor


class ConveyorBelt(ukjax.System):
    """A user's block on a conveyor belt whose speed is `speed` + `accel` t: the floor a
    unilateral contact, friction relative to the belt (the fourth entry of `friction`)."""

    mu: float = 0.4
    speed: float = 1.5
    accel: float = 0.0
    m: int = 2
    g: float = 9.81

    def kinetic_energy(self, t, q, qd):
        return 0.5 * self.m * qd @ qd

    def potential_energy(self, t, q):
        return self.m * self.g * q[1]

    def unilateral(self, t, q):
        return q[1]

    def friction(self, t, q):
        return jnp.array([[[1.0, 0.0]]]), self.mu, self.mu, self.speed + self.accel * t


@pytest.mark.slow  # a frictional program's compile (9 s): the default suite's 5 minutes
@pytest.mark.parametrize(
    "accel, v0",
    [(0.0, 0.0), (2.0, 1.5), (6.0, 1.5)],  # picked up by the belt; carried; left behind
)
def test_a_conveyor_belt_drags_a_block_up_to_its_speed_then_carries_it(accel, v0):
    """Closed forms: from rest on a belt at u the block slides at mu g until it moves with
    the belt (a stick event at u / (mu g)); on a belt that accelerates at a <= mu g it stays
    stuck; at a > mu g it slips at once and falls behind, accelerating at mu g."""
    belt, mu_g = ConveyorBelt(accel=accel), 0.4 * 9.81
    ts = jnp.linspace(0.0, 1.0, 11)
    sol = ukjax.simulate(belt, jnp.zeros(2), jnp.array([v0, 0.0]), ts)
    t = np.asarray(ts)
    if v0 == 0.0:
        want, _, t_stick = belt_drop_reference(t, 0.4, 1.5, height=0.0)  # set down at rest
        assert int(sol.events.count) == 1 and int(sol.events.kind[0]) == ukjax.EventKind.STICK
        np.testing.assert_allclose(sol.events.time[0], t_stick, rtol=1e-12)
    else:
        assert int(sol.events.count) == 0
        want = v0 * t + 0.5 * min(accel, mu_g) * t**2
    np.testing.assert_allclose(sol.q[:, 0], want, atol=1e-12)
    np.testing.assert_allclose(sol.q[:, 1], 0.0, atol=1e-14)


@pytest.mark.slow  # a frictional impact program's compile
def test_a_block_dropped_on_a_moving_belt_takes_the_coulomb_impulse_then_slides_to_its_speed():
    """Dropped from rest at 0.2 m (Impact(0)): the landing's tangential impulse is mu
    times the normal one, m v_y, so the block leaves the impact at mu v_y (below the
    belt's speed), then slides at mu g until it moves with the belt."""
    g, mu, u, h = 9.81, 0.4, 1.5, 0.2
    ts = jnp.linspace(0.0, 1.0, 101)
    want, t_land, t_stick = belt_drop_reference(np.asarray(ts), mu, u, h, g)
    sol = ukjax.simulate(
        ConveyorBelt(), jnp.array([0.0, h]), jnp.zeros(2), ts, contact=ukjax.Impact(0.0)
    )
    kinds = [ukjax.EVENT_KINDS[k] for k in np.asarray(sol.events.kind[: int(sol.events.count)])]
    assert kinds == ["impact", "stick"]
    np.testing.assert_allclose(sol.events.time[:2], [t_land, t_stick], rtol=1e-10)
    v_y = np.sqrt(2 * g * h)
    np.testing.assert_allclose(sol.events.tangential_impulse[0], mu * 2 * v_y, rtol=1e-10)
    np.testing.assert_allclose(sol.q[:, 0], want, atol=1e-10)


@pytest.mark.slow  # a reverse-mode frictional compile
def test_the_distance_a_belt_carries_a_block_differentiates_through_the_stick():
    """x(1) = u - u^2 / (2 mu g) for a block picked up by a belt at speed u (stuck at
    u / (mu g) < 1 s): d x / d u = 1 - u / (mu g), through the stick event."""
    ts = jnp.linspace(0.0, 1.0, 11)
    x1 = lambda u: ukjax.simulate(ConveyorBelt(speed=u), jnp.zeros(2), jnp.zeros(2), ts).q[-1, 0]
    np.testing.assert_allclose(jax.grad(x1)(1.5), 1.0 - 1.5 / (0.4 * 9.81), rtol=1e-10)


def test_a_surface_velocity_of_the_wrong_shape_is_refused():
    class Wrong(ConveyorBelt):
        def friction(self, t, q):
            return jnp.array([[[1.0, 0.0]]]), self.mu, self.mu, jnp.zeros((1, 2))

    with pytest.raises(
        ValueError, match=r"surface_velocity must be a scalar or have shape \(1, 1\)"
    ):
        ukjax.simulate(Wrong(), jnp.zeros(2), jnp.zeros(2), jnp.linspace(0.0, 1.0, 3))

    # One 3-D contact's velocity may be given as a (2,) vector, or as (1, 2): a puck moving
    # at 1 m/s on a surface moving at 2 m/s slips backwards and is dragged forwards.
    class Puck(ukjax.System):
        w: tuple

        def kinetic_energy(self, t, q, qd):
            return 0.5 * qd @ qd

        def potential_energy(self, t, q):
            return 9.81 * q[2]

        def unilateral(self, t, q):
            return q[2]

        def friction(self, t, q):
            T = jnp.array([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])
            return T, 0.5, 0.5, jnp.array(self.w)

    q, qd = jnp.zeros(3), jnp.array([1.0, 0.0, 0.0])
    engaged, sliding = jnp.array([True]), jnp.array([1])
    for w in ((2.0, 0.0), ((2.0, 0.0),)):
        _, normal, tangential = ukjax.friction_forces(Puck(w=w), 0.0, q, qd, engaged, sliding)
        np.testing.assert_allclose(normal, [9.81], rtol=1e-12)
        np.testing.assert_allclose(tangential, [[0.5 * 9.81, 0.0]], rtol=1e-12)
