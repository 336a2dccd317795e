"""Several contacts at once: impacts and persistent contacts decided jointly (a linear
complementarity problem), simultaneity by physics, the event log.

References written here: Housner's rocking block (Housner 1963, *The behavior of inverted
pendulum structures during earthquakes*, Bull. Seismol. Soc. Am. 53) on a smooth floor as a
one-degree-of-freedom minimal-coordinate model integrated by scipy (DOP853, rtol 1e-12) with
its impact events, and the textbook outcomes of Newton's cradle."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ukjax
from references import housner_ratio, housner_rough_ratio, rocking_block_reference
from ukjax._complementarity import least_index_pivoting


jax.config.update("jax_enable_x64", True)


class Block(ukjax.System):
    """A rectangular block (half-width b, half-height h) in the plane, q = (x, y, theta),
    on a smooth floor: its two bottom corners are the contacts (0: left, 1: right)."""

    mass: float = 1.0
    b: float = 0.2
    h: float = 0.6
    g: float = 9.81

    def mass_matrix(self, t, q):
        inertia = self.mass * (self.b**2 + self.h**2) / 3
        return jnp.diag(jnp.array([self.mass, self.mass, inertia]))

    def forces(self, t, q, qd):
        return jnp.array([0.0, -self.mass * self.g, 0.0])

    def unilateral(self, t, q):
        _, y, th = q
        side = jnp.array([-1.0, 1.0])
        return y + side * self.b * jnp.sin(th) - self.h * jnp.cos(th)


class RoughBlock(Block):
    """The block on a rough floor: Coulomb friction mu at both corners (tangent rows: the
    corners' horizontal velocities)."""

    mu: float = 1.0

    def friction(self, t, q):
        _, _, th = q
        side = jnp.array([-1.0, 1.0])
        lever = -side * self.b * jnp.sin(th) + self.h * jnp.cos(th)
        T = jnp.stack([jnp.ones(2), jnp.zeros(2), lever], axis=1)
        return T, self.mu, self.mu


class Disc(ukjax.System):
    """A disc (mass m, radius r, inertia I) in the plane, q = (x, y, phi), above a rough
    floor: contact g = y - r, slip velocity of the lowest point x' + r phi'."""

    mass: float = 2.0
    r: float = 0.5
    inertia: float = 0.25  # m r^2 / 2
    mu: float = 0.3
    g: float = 9.81

    def mass_matrix(self, t, q):
        return jnp.diag(jnp.array([self.mass, self.mass, self.inertia]))

    def forces(self, t, q, qd):
        return jnp.array([0.0, -self.mass * self.g, 0.0])

    def unilateral(self, t, q):
        return q[1:2] - self.r

    def friction(self, t, q):
        return jnp.array([[1.0, 0.0, self.r]]), self.mu, self.mu


class Line(ukjax.System):
    """Balls of unit mass and radius r on a frictionless line (q: their centres)."""

    n: int = 3
    r: float = 0.1

    def mass_matrix(self, t, q):
        return jnp.eye(self.n)

    def forces(self, t, q, qd):
        return jnp.zeros(self.n)

    def unilateral(self, t, q):
        return q[1:] - q[:-1] - 2 * self.r


class Cradle(ukjax.System):
    """Newton's cradle: n pendulums of length L hung at spacing d (q: their angles), bobs of
    radius r; contacts between neighbours."""

    n: int = 3
    L: float = 1.0
    d: float = 0.2
    r: float = 0.1
    g: float = 9.81

    def kinetic_energy(self, t, q, qd):
        return 0.5 * self.L**2 * jnp.sum(qd**2)

    def potential_energy(self, t, q):
        return -self.g * self.L * jnp.sum(jnp.cos(q))

    def unilateral(self, t, q):
        x = self.d * jnp.arange(self.n) + self.L * jnp.sin(q)
        y = -self.L * jnp.cos(q)
        return jnp.hypot(x[1:] - x[:-1], y[1:] - y[:-1]) - 2 * self.r


def _events(sol):
    ev = sol.events
    n = int(ev.count)
    kinds = [ukjax.EVENT_KINDS[int(k)] for k in ev.kind[:n]]
    return (
        kinds,
        np.asarray(ev.contact[:n]),
        np.asarray(ev.time[:n]),
        np.asarray(ev.speed_before[:n]),
    )


def test_least_index_pivoting_solves_a_small_lcp_exactly():
    # a 3-contact LCP with a positive definite D: compare with enumeration of all 8 sets
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3, 3))
    D = X @ X.T + 0.1 * np.eye(3)

    @jax.jit
    def lcp(D, w0):
        def oracle(S):
            Dm = jnp.where(S[:, None] & S[None, :], D, jnp.eye(3))
            z = jnp.linalg.solve(Dm, jnp.where(S, -w0, 0.0))
            return z, w0 + D @ z

        return least_index_pivoting(oracle, jnp.ones(3, bool), max_pivots=16)

    for _ in range(20):
        w0 = rng.normal(size=3)
        sol = lcp(jnp.asarray(D), jnp.asarray(w0))
        assert bool(sol.solved)
        z, w = np.asarray(sol.z), np.asarray(sol.w)
        assert np.all(z >= -1e-12) and np.all(w >= -1e-12) and abs(z @ w) < 1e-12
        found = []
        for mask in range(8):
            S = np.array([(mask >> i) & 1 for i in range(3)], bool)
            zz = np.zeros(3)
            if S.any():
                zz[S] = np.linalg.solve(D[np.ix_(S, S)], -w0[S])
            ww = w0 + D @ zz
            if np.all(zz >= -1e-12) and np.all(ww[~S] >= -1e-12):
                found.append(zz)
        assert len(found) == 1  # a P-matrix: one solution
        np.testing.assert_allclose(z, found[0], atol=1e-12)


def _matrix_oracle(D, w0):
    k = w0.shape[0]

    def oracle(S):
        Dm = jnp.where(S[:, None] & S[None, :], D, jnp.eye(k))
        z = jnp.linalg.solve(Dm, jnp.where(S, -w0, 0.0))
        return z, w0 + D @ z

    return oracle


def test_a_cycling_pivot_sequence_falls_back_to_the_subsets_in_turn():
    # D is not a P-matrix (sliding friction makes contact problems so): from the empty
    # set, contact 1 is infeasible (w = -0.5); alone it needs z = -1; dropped, it is
    # infeasible again - the least-index sequence cycles. {0} solves it: z0 = 1, w1 = 1.
    D = jnp.array([[-0.5, -1.0], [1.5, -0.5]])
    w0 = jnp.array([0.5, -0.5])
    sol = jax.jit(lambda D, w0: least_index_pivoting(_matrix_oracle(D, w0), jnp.ones(2, bool), 8))(
        D, w0
    )
    assert bool(sol.solved)
    assert sol.active.tolist() == [True, False]
    np.testing.assert_allclose(sol.z, [1.0, 0.0], atol=1e-14)
    np.testing.assert_allclose(sol.w, [0.0, 1.0], atol=1e-14)
    # with no solution at all (w1 = -1 - z0 < 0 for every z0 >= 0): not solved
    bad = least_index_pivoting(
        _matrix_oracle(jnp.array([[1.0, 0.0], [-1.0, -1.0]]), jnp.array([0.0, -1.0])),
        jnp.ones(2, bool),
        8,
    )
    assert not bool(bad.solved)


def test_rates_at_round_off_are_judged_against_their_own_size():
    # every rate is zero but for round-off (corners touching at rest while the body slides
    # at 0.1): an inactive contact reports -1e-19, an active one a pulling -1e-19
    oracle = _matrix_oracle(jnp.eye(2), jnp.zeros(2))

    def noisy(S):
        z, w = oracle(S)
        return z - jnp.where(S, 1e-19, 0.0), w - jnp.where(S, 0.0, 1e-19)

    plain = least_index_pivoting(noisy, jnp.ones(2, bool), 8)
    assert not bool(plain.solved)  # measured against the rates alone: never consistent
    scaled = least_index_pivoting(noisy, jnp.ones(2, bool), 8, scale=jnp.full(2, 0.1))
    assert bool(scaled.solved) and not bool(jnp.any(scaled.active))


@pytest.mark.parametrize("scale", [None, 0.1])
def test_one_contact_is_decided_as_the_pivoting_loop_decides_it(scale):
    # one candidate is decided without a loop (both sets evaluated); the loop's choice is the
    # reference: the same contact as the first of two, the second never a candidate (a
    # diagonal D: the same arithmetic for the contact either way)
    def diagonal(d, w0):
        def oracle(S):
            z = jnp.where(S, -w0 / d, 0.0)
            return z, w0 + d * z

        return oracle

    def one(d, w0, on):
        s = None if scale is None else jnp.full(1, scale)
        oracle = diagonal(jnp.array([d]), jnp.array([w0]))
        return least_index_pivoting(oracle, jnp.array([on]), 8, scale=s)

    def loop(d, w0, on):
        s = None if scale is None else jnp.full(2, scale)
        oracle = diagonal(jnp.array([d, 1.0]), jnp.array([w0, 1.0]))
        return least_index_pivoting(oracle, jnp.array([on, False]), 8, scale=s)

    one, loop = jax.jit(one), jax.jit(loop)
    cases = 0
    # d < 0: no P-matrix (a pulling multiplier: not solved); w0 at round-off: the extension
    for d in (2.0, 1e-30, -1.0):
        for w0 in (1.0, 1e-20, 0.0, -1e-20, -1.0):
            for on in (True, False):
                a, b = one(d, w0, on), loop(d, w0, on)
                assert a.active.tolist() == b.active[:1].tolist(), (d, w0, on)
                assert bool(a.solved) == bool(b.solved), (d, w0, on)
                np.testing.assert_array_equal(a.z, b.z[:1])
                np.testing.assert_array_equal(a.w, b.w[:1])
                cases += bool(a.active[0]) + 10 * (not bool(a.solved))
    assert cases % 10 > 0 and cases >= 10  # some set {1} and some unsolved among them


@pytest.mark.slow  # default-suite time (7 s)
def test_rocking_block_transfers_its_pivot_with_housners_ratio():
    # Housner's block released tilted: the old corner lifts at each impact (it would need a
    # pulling impulse to stay), the block rocks on with theta'+/theta'- = (h^2 - 2b^2)/(h^2
    # + 4b^2); between impacts it matches the minimal-coordinate reference
    block, th0 = Block(), 0.15
    q0 = jnp.array([0.0, block.b * np.sin(th0) + block.h * np.cos(th0), th0])
    ts = jnp.linspace(0.0, 0.52, 6)
    sol = ukjax.simulate(block, q0, jnp.zeros(3), ts, contact=ukjax.Impact(0.0), max_events=60)
    assert sol.result == ukjax.RESULTS.successful
    kinds, contacts, times, before = _events(sol)
    assert kinds == ["impact"] * 5  # no release: the lifting corner is never pulled down
    assert list(contacts) == [1, 0, 1, 0, 1]  # the corners take turns
    ratio = housner_ratio(block.b, block.h)
    # at theta = 0 the impacting corner's speed is 2 b theta'
    np.testing.assert_allclose(before[1:] / before[:-1], ratio, rtol=1e-8)
    ref = rocking_block_reference(block.b, block.h, block.g, th0, 5)
    np.testing.assert_allclose(times, ref, rtol=0, atol=1e-9)


@pytest.mark.slow  # default-suite time (45 s, compile-bound); frictional impacts are in
# the default suite through the spinning disc
def test_rocking_block_on_a_rough_floor_loses_housners_fraction_per_impact():
    # the impacting corner sticks (a sticking frictional impact), the old one lifts:
    # theta'+/theta'- = 1 - (3/2) sin^2(alpha), tan(alpha) = b/h (Housner 1963); between
    # impacts the block turns about a fixed corner
    block, th0 = RoughBlock(), 0.15
    q0 = jnp.array([0.0, block.b * np.sin(th0) + block.h * np.cos(th0), th0])
    ts = jnp.linspace(0.0, 1.5, 4)
    sol = ukjax.simulate(block, q0, jnp.zeros(3), ts, contact=ukjax.Impact(0.0), max_events=20)
    assert sol.result == ukjax.RESULTS.successful
    kinds, contacts, times, before = _events(sol)
    assert kinds == ["impact"] * 3 and list(contacts) == [1, 0, 1]
    ratio = housner_rough_ratio(block.b, block.h)
    np.testing.assert_allclose(before[1:] / before[:-1], ratio, rtol=1e-8)
    ref = rocking_block_reference(block.b, block.h, block.g, th0, 3, rough=True)
    np.testing.assert_allclose(times, ref, rtol=0, atol=1e-9)
    assert np.all(np.asarray(sol.sliding)[np.asarray(sol.engaged)] == 0)  # pivots stick


@pytest.mark.slow  # default-suite time (8 s each)
@pytest.mark.parametrize("mu", [1.0, 0.05])
def test_oblique_frictional_impact_of_a_spinning_disc(mu):
    # a disc falls at vy = -4 with vx = 1 and backspin phi' = 6 (slip x' + r phi' = 4) onto a
    # floor with e = 0.5. Closed forms: P_n = m (1 + e) |vy|; sticking needs P_t = -m_eff v_t
    # (m_eff = 1/(1/m + r^2/I) = m/3), admissible if |P_t| <= mu P_n (mu = 1: sticks);
    # otherwise a sliding impact P_t = -mu P_n sgn(v_t) (mu = 0.05). Free flight after it:
    # x' and phi' are the post-impact values
    disc = Disc(mu=mu)
    m, r, inertia, e = disc.mass, disc.r, disc.inertia, 0.5
    vx, vy, w = 1.0, -4.0, 6.0
    y0 = disc.r + 0.2
    t_hit = (-vy - np.sqrt(vy**2 - 2 * disc.g * 0.2)) / disc.g
    sol = ukjax.simulate(
        disc,
        jnp.array([0.0, y0, 0.0]),
        jnp.array([vx, vy, w]),
        jnp.array([0.0, t_hit + 0.05]),
        contact=ukjax.Impact(e),
    )
    assert sol.result == ukjax.RESULTS.successful
    kinds, _, times, _ = _events(sol)
    assert kinds == ["impact"]
    vy_hit = vy - disc.g * float(times[0])
    Pn = m * (1 + e) * abs(vy_hit)
    vt = vx + r * w
    Pt = -vt / (1 / m + r**2 / inertia)
    if abs(Pt) > mu * Pn:
        Pt = -mu * Pn * np.sign(vt)
    else:
        assert mu == 1.0  # the sticking case
    vx_plus, w_plus = vx + Pt / m, w + r * Pt / inertia
    # the log records the impulses the contact took (normal, and friction along T)
    np.testing.assert_allclose(sol.events.normal_impulse[0], Pn, rtol=1e-10)
    np.testing.assert_allclose(sol.events.tangential_impulse[0], Pt, rtol=1e-10)
    np.testing.assert_allclose(sol.qd[-1, 0], vx_plus, rtol=1e-10)
    np.testing.assert_allclose(sol.qd[-1, 2], w_plus, rtol=1e-10)
    if mu == 1.0:
        np.testing.assert_allclose(vx_plus + r * w_plus, 0.0, atol=1e-12)  # no slip after
    # no energy gain at the impact (free flight after it: the energy is constant)
    energy = lambda q, qd: (
        0.5 * (m * (qd[0] ** 2 + qd[1] ** 2) + inertia * qd[2] ** 2) + m * disc.g * q[1]
    )
    assert float(energy(sol.q[-1], sol.qd[-1])) < float(energy(sol.q[0], sol.qd[0]))


@pytest.mark.slow  # 25 s
def test_a_tall_block_dropped_on_a_very_rough_floor_never_meets_an_unsolvable_contact():
    """A tall block (half-width 0.1, half-height 0.3) dropped tilted and spinning on a floor
    with mu = 0.8: three drops where, at a corner's landing, the corner at rest had no
    consistent forces in the friction mode its slip gave it (stuck, its hold pulled; free,
    it sank: a Painleve-type inconsistency of the mode, `contact_unsolved` before). The
    contact forces of maximal dissipation decide it now; the run goes on without energy
    gain or penetration."""
    block = RoughBlock(b=0.1, h=0.3, mu=0.8)
    q0 = jnp.array(
        [[0.0, 0.3269416, -0.52971836], [0.0, 0.32590727, -0.30998914],
         [0.0, 0.34324205, -0.36331806]]
    )  # fmt: skip
    qd0 = jnp.array(
        [[0.6222996, 0.21329773, -4.23160547], [-2.54690975, 0.27096938, 0.38807049],
         [-2.19895108, -0.21923344, 3.10556397]]
    )  # fmt: skip
    ts = jnp.linspace(0.0, 1.0, 101)
    law = ukjax.Impact(restitution=0.0)
    run = lambda q, qd: ukjax.simulate(block, q, qd, ts, contact=law, throw=False)
    sol = jax.jit(jax.vmap(run))(q0, qd0)
    assert list(sol.status) == ["successful"] * 3
    q, qd = np.asarray(sol.q), np.asarray(sol.qd)
    inertia = (0.1**2 + 0.3**2) / 3
    energy = (
        0.5 * (qd[..., 0] ** 2 + qd[..., 1] ** 2 + inertia * qd[..., 2] ** 2) + 9.81 * q[..., 1]
    )
    assert np.diff(energy, axis=1).max() < 1e-9
    lowest = q[..., 1] - (0.1 * np.abs(np.sin(q[..., 2])) + 0.3 * np.cos(q[..., 2]))
    assert lowest.min() > -1e-9


@pytest.mark.slow  # default suite's time (benchmarks/RESULTS.md, stop 84)
def test_rocking_block_comes_to_rest_on_both_corners():
    block, th0 = Block(), 0.15
    q0 = jnp.array([0.0, block.b * np.sin(th0) + block.h * np.cos(th0), th0])
    ts = jnp.linspace(0.0, 1.0, 3)
    sol = ukjax.simulate(block, q0, jnp.zeros(3), ts, contact=ukjax.Impact(0.0), max_events=60)
    assert sol.result == ukjax.RESULTS.successful
    assert bool(jnp.all(sol.engaged[-1]))  # flat on the floor, both corners carry it
    np.testing.assert_allclose(sol.q[-1], [0.0, block.h, 0.0], atol=1e-9)
    np.testing.assert_allclose(sol.qd[-1], 0.0, atol=1e-9)
    kinds, contacts, _, _ = _events(sol)
    # a contact is released only after it was engaged (never a free one)
    engaged = {0}  # it starts resting on the left corner
    for kind, c in zip(kinds, contacts):
        if kind == "release":
            assert int(c) in engaged
        engaged.add(int(c))


@pytest.mark.slow  # default-suite time (7 s)
def test_resting_block_starts_on_both_corners_and_one_corner_when_tilted():
    block = Block()
    flat = jnp.array([0.0, block.h, 0.0])
    sol = ukjax.simulate(
        block, flat, jnp.zeros(3), jnp.array([0.0, 0.5]), contact=ukjax.Impact(0.0)
    )
    assert bool(jnp.all(sol.engaged[0])) and int(sol.events.count) == 0
    np.testing.assert_allclose(sol.q[-1], flat, atol=1e-12)
    qdd, _, lam = ukjax.contact_forces(block, 0.0, flat, jnp.zeros(3), jnp.array([True, True]))
    np.testing.assert_allclose(lam, [block.mass * block.g / 2] * 2, rtol=1e-12)


@pytest.mark.parametrize("gap", [0.0, 1e-12])
def test_newtons_cradle_on_a_line_passes_the_momentum_ball_by_ball(gap):
    # balls 2 and 3 touch (or nearly): ball 1 hits at v = 1, e = 1. Sequential impacts give
    # (0, 0, v); the touching contact does not close, so it does not share the first impact
    q0 = jnp.array([-1.0, 0.0, 0.2 + gap])
    qd0 = jnp.array([1.0, 0.0, 0.0])
    sol = ukjax.simulate(Line(), q0, qd0, jnp.array([0.0, 2.0]), contact=ukjax.Impact(1.0))
    assert sol.result == ukjax.RESULTS.successful
    np.testing.assert_allclose(sol.qd[-1], [0.0, 0.0, 1.0], atol=1e-12)
    kinds, contacts, times, _ = _events(sol)
    assert kinds == ["impact", "impact"] and list(contacts) == [0, 1]
    np.testing.assert_allclose(times[0], 0.8, atol=1e-12)
    np.testing.assert_allclose(sol.events.normal_impulse[:2], [1.0, 1.0], rtol=1e-12)  # m v


@pytest.mark.slow  # default suite's time (benchmarks/RESULTS.md, stop 84)
def test_newtons_cradle_simultaneous_model_is_an_option():
    # Impact(simultaneous=True): the touching contact shares the impact, the LCP of both:
    # P12 = 4v/3, P23 = 2v/3 -> (-v/3, 2v/3, 2v/3), momentum and energy-consistent (e = 1 on
    # the impacting contact, the touching one leaves at zero relative speed)
    q0 = jnp.array([-1.0, 0.0, 0.2])
    qd0 = jnp.array([1.0, 0.0, 0.0])
    law = ukjax.Impact(1.0, simultaneous=True)
    sol = ukjax.simulate(Line(), q0, qd0, jnp.array([0.0, 2.0]), contact=law)
    np.testing.assert_allclose(sol.qd[-1], [-1 / 3, 2 / 3, 2 / 3], atol=1e-12)
    np.testing.assert_allclose(jnp.sum(sol.qd[-1]), 1.0, atol=1e-12)


@pytest.mark.slow  # default-suite time; the line cradle covers the same logic by default
def test_newtons_cradle_of_pendulums_sends_out_the_last_ball():
    # three pendulums hung with 1e-9 gaps; the first is released from 0.3 rad. After the
    # collisions the first two hang at rest (to the round-off of the event times) and the
    # third swings out with the first's speed: (0, 0, v), not a simultaneous split
    cradle = Cradle(d=0.2 + 1e-9)
    q0 = jnp.array([-0.3, 0.0, 0.0])
    ts = jnp.array([0.0, 0.6])
    sol = ukjax.simulate(cradle, q0, jnp.zeros(3), ts, contact=ukjax.Impact(1.0))
    assert sol.result == ukjax.RESULTS.successful
    kinds, contacts, times, before = _events(sol)
    assert kinds == ["impact", "impact"] and list(contacts) == [0, 1]
    v = np.sqrt(2 * cradle.g / cradle.L * (1 - np.cos(0.3)))  # angular speed at the bottom
    # just after the second impact: bob 3 carries all of it
    t_mid = float(times[1]) + 1e-6
    mid = ukjax.simulate(
        cradle, q0, jnp.zeros(3), jnp.array([0.0, t_mid]), contact=ukjax.Impact(1.0)
    )
    # 1e-6 s after the impacts, gravity has changed the speeds by about g/L * 1e-9 * 1e-6
    np.testing.assert_allclose(mid.qd[-1], [0.0, 0.0, v], atol=1e-8)


@pytest.mark.slow  # compile-bound: two programs (vmap and the loop)
def test_batch_equals_loop_for_rocking_blocks():
    block = Block()
    th0s = jnp.array([0.1, 0.15])
    ts = jnp.linspace(0.0, 0.4, 5)

    def run(th0):
        q0 = jnp.array([0.0, block.b * jnp.sin(th0) + block.h * jnp.cos(th0), th0])
        return ukjax.simulate(
            block, q0, jnp.zeros(3), ts, contact=ukjax.Impact(0.0), max_events=30
        ).q

    batch = jax.vmap(run)(th0s)
    for i in range(2):
        np.testing.assert_allclose(batch[i], run(th0s[i]), rtol=0, atol=1e-12)


@pytest.mark.extended  # 90 s, compile-bound (reverse mode through the event loop); CI keeps
# gradients through impacts (test_hybrid.py, test_adjoint.py) and stick-slip (test_friction.py)
def test_gradient_through_a_pivot_transfer_matches_finite_differences():
    # d theta(t)/d b just after the first impact, with the LCP choosing the new pivot
    th0, t1 = 0.15, 0.25

    def theta(b):
        block = Block(b=b)
        q0 = jnp.array([0.0, b * jnp.sin(th0) + block.h * jnp.cos(th0), th0])
        sol = ukjax.simulate(
            block, q0, jnp.zeros(3), jnp.array([0.0, t1]), contact=ukjax.Impact(0.0)
        )
        return sol.q[-1, 2]

    g = float(jax.grad(theta)(0.2))
    eps = 1e-6
    fd = (float(theta(0.2 + eps)) - float(theta(0.2 - eps))) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-5)


@pytest.mark.slow  # default-suite time (8 s each)
@pytest.mark.parametrize("backspin", [0.0, 20.0])
def test_sphere_launched_sliding_rolls_at_five_sevenths(backspin):
    # a solid sphere (I = 2/5 m r^2) on a rough floor, launched at v0 with spin w0 (backspin
    # > 0: the contact point moves forward at v0 + r w0). Kinetic friction decelerates the
    # centre at mu g and spins the sphere at (5/2) mu g / r until the slip is zero at
    # t* = 2 (v0 + r w0) / (7 mu g); then it rolls at (5 v0 - 2 r w0) / 7 with zero slip
    # (5 v0 / 7 without spin; backwards with enough backspin: it comes back)
    m, r, mu, v0 = 2.0, 0.5, 0.3, 3.0
    sphere = Disc(mass=m, r=r, inertia=0.4 * m * r**2, mu=mu)
    qd0 = jnp.array([v0, 0.0, backspin])
    ts = jnp.linspace(0.0, 3.0, 7)
    sol = ukjax.simulate(sphere, jnp.array([0.0, r, 0.0]), qd0, ts, contact=ukjax.Impact(0.0))
    assert sol.result == ukjax.RESULTS.successful
    kinds, _, times, _ = _events(sol)
    t_star = 2 * (v0 + r * backspin) / (7 * mu * sphere.g)
    assert kinds == ["stick"]
    np.testing.assert_allclose(times[0], t_star, rtol=1e-10)
    v_roll = (5 * v0 - 2 * r * backspin) / 7
    after = np.asarray(ts) > t_star
    np.testing.assert_allclose(np.asarray(sol.qd)[after, 0], v_roll, rtol=1e-10)
    slip = np.asarray(sol.qd)[after, 0] + r * np.asarray(sol.qd)[after, 2]
    assert np.max(np.abs(slip)) < 1e-12  # rolls: no creep
    before = np.asarray(ts) < t_star
    np.testing.assert_allclose(
        np.asarray(sol.qd)[before, 0], v0 - mu * sphere.g * np.asarray(ts)[before], rtol=1e-10
    )
    if backspin:
        assert v_roll < 0  # it comes back


@pytest.mark.slow  # two more compilations (float32)
def test_float32_rocking_block_and_cradle():
    # float32 (rtol 1e-6 by default): Housner's ratio to 1e-3, the cradle's outcome to 1e-6
    with jax.enable_x64(False):
        block, th0 = Block(), 0.15
        q0 = jnp.array([0.0, block.b * np.sin(th0) + block.h * np.cos(th0), th0], jnp.float32)
        sol = ukjax.simulate(
            block,
            q0,
            jnp.zeros(3, jnp.float32),
            jnp.linspace(0.0, 0.52, 6),
            contact=ukjax.Impact(0.0),
            max_events=60,
        )
        assert sol.q.dtype == jnp.float32 and sol.result == ukjax.RESULTS.successful
        kinds, contacts, _, before = _events(sol)
        assert kinds == ["impact"] * 5 and list(contacts) == [1, 0, 1, 0, 1]
        ratio = housner_ratio(block.b, block.h)
        np.testing.assert_allclose(before[1:] / before[:-1], ratio, rtol=1e-3)
        line = ukjax.simulate(
            Line(),
            jnp.array([-1.0, 0.0, 0.2], jnp.float32),
            jnp.array([1.0, 0.0, 0.0], jnp.float32),
            jnp.array([0.0, 2.0], jnp.float32),
            contact=ukjax.Impact(1.0),
        )
        np.testing.assert_allclose(line.qd[-1], [0.0, 0.0, 1.0], atol=1e-6)
