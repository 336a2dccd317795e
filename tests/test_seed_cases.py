"""Seed cases `constraint_ab_examples`, `simple_pendulum_lagrange_hamilton`,
`pendulum_cartesian_uk`, `nonideal_constraint_properties`, `appell_hamel` and
`ellipse_spring_particle` against independent references: closed forms, KKT solves,
hand-derived minimal coordinates integrated by scipy DOP853 at rtol 1e-12."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import ukjax
from references import (
    appell_hamel_reduced_rhs,
    coulomb_bead_exact_speed,
    ellipse_kane_constraint_force,
    ellipse_normal_constraint_force,
    pendulum_hamilton_rhs,
    pendulum_hamiltonian,
    pendulum_momentum,
    random_constraints,
    random_spd,
    uk_reference,
)
from ukjax.systems import (
    AppellHamelWheel,
    AppellHamelWheelNonlinear,
    CartesianPendulum,
    CoulombBead,
    EllipseSpringParticle,
    ParticleOnLine,
    ParticleOnSphere,
    ParticlePfaffY,
    ParticlePfaffZ,
    ParticleXZ2Y,
    SimplePendulum,
)


def _dop853(rhs, y0, ts):
    sol = solve_ivp(rhs, (ts[0], ts[-1]), y0, method="DOP853", rtol=1e-12, atol=1e-12, t_eval=ts)
    assert sol.success
    return sol.y.T


def _kkt(M, F, A, b):
    """Lagrange-multiplier reference: [M A^T; A 0] [qdd; lam] = [F; b] (A full row rank)."""
    n, m = M.shape[0], A.shape[0]
    K = np.block([[M, A.T], [A, np.zeros((m, m))]])
    return np.linalg.solve(K, np.concatenate([F, b]))[:n]


# --- constraint_ab_examples (seed 000 §2.3, §3.1-3.2; seed 002 §3) -------------------


def _particle(kind, **kw):
    """The constrained particle of one row of the table (Pamplona 2021; Zhao et al. 2018)."""
    cls = {
        "line": ParticleOnLine,
        "sphere": ParticleOnSphere,
        "xz2y": ParticleXZ2Y,
        "pfaff_2y": ParticlePfaffY,
        "pfaff_2y_rheonomic": ParticlePfaffY,
        "pfaff_2z": ParticlePfaffZ,
    }[kind]
    if kind == "pfaff_2y_rheonomic":
        kw["rhs"] = 1.0
    return cls(**kw)


def test_point_particle_accelerations_match_kkt(rng):
    """Hand-written A, b of the table, solved by KKT, against ukjax's autodiff + UK."""
    for _ in range(4):
        t = rng.uniform(0, 2)
        q, qd = rng.standard_normal(3), rng.standard_normal(3)
        x, y, z = q
        xd, yd, zd = qd
        mass = rng.uniform(0.5, 2.0)
        F = rng.standard_normal(3)
        hand = {
            "line": ([[0, 1, 0], [0, 0, 1]], [0, 0]),
            "sphere": ([[x, y, z]], [-(qd @ qd)]),
            "xz2y": ([[1, -(z**2), 0]], [2 * z * zd * yd]),
            "pfaff_2y": ([[1, 2 * y, 1]], [-2 * yd**2]),
            "pfaff_2y_rheonomic": ([[1, 2 * y, 1]], [-2 * yd**2]),
            "pfaff_2z": ([[1, 2 * z, 1]], [-2 * yd * zd]),
        }
        for kind, (A, b) in hand.items():
            p = _particle(kind, mass=mass, F_x=F[0], F_y=F[1], F_z=F[2])
            expected = _kkt(mass * np.eye(3), F, np.array(A, float), np.array(b, float))
            np.testing.assert_allclose(
                ukjax.acceleration(p, t, q, qd), expected, rtol=1e-11, atol=1e-12
            )


def test_particle_on_a_line_closed_form():
    """Seed 000 eqs 19-22: x = F_x t^2 / (2m), y = z = 0, F^c = (0, -F_y, -F_z)."""
    p = ParticleOnLine(mass=2.0, F_x=0.6, F_y=-1.0, F_z=3.0)
    ts = jnp.linspace(0.0, 2.0, 11)
    sol = ukjax.simulate(p, jnp.zeros(3), jnp.zeros(3), ts)
    np.testing.assert_allclose(sol.q[:, 0], 0.6 * ts**2 / 4.0, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(sol.q[:, 1:], 0.0, atol=1e-15)
    d = ukjax.diagnostics(p, sol)
    np.testing.assert_allclose(d.Qc_ideal, np.tile([0.0, 1.0, -3.0], (11, 1)), atol=1e-13)


@pytest.mark.parametrize("kind, drift", [("pfaff_2y", 0.0), ("pfaff_2y_rheonomic", 1.0)])
def test_integrable_pfaffian_stays_on_its_surface(kind, drift):
    """xd + 2y yd + zd = 0 (or 1) integrates to x + y^2 + z - drift t = const
    (Pamplona 2021, eqs 53-56)."""
    p = _particle(kind)
    q0 = jnp.array([0.2, 0.5, -0.3])
    qd0 = jnp.array([0.4, -0.7, drift - 0.4 - 2 * 0.5 * -0.7])
    ts = jnp.linspace(0.0, 3.0, 31)
    sol = ukjax.simulate(p, q0, qd0, ts)
    surface = sol.q[:, 0] + sol.q[:, 1] ** 2 + sol.q[:, 2] - drift * ts
    np.testing.assert_allclose(surface, surface[0], atol=1e-10)


def test_nonintegrable_pfaffian_leaves_every_such_surface():
    """xd + 2z yd + zd = 0 is nonholonomic (eq 11 gives 2): x + 2zy + z is not conserved."""
    p = ParticlePfaffZ()
    q0, qd0 = jnp.array([0.0, 0.0, 0.5]), jnp.array([-1.0, 1.0, 0.0])
    sol = ukjax.simulate(p, q0, qd0, jnp.linspace(0.0, 2.0, 21))
    psi = sol.qd[:, 0] + 2 * sol.q[:, 2] * sol.qd[:, 1] + sol.qd[:, 2]
    speed = float(jnp.max(jnp.linalg.norm(sol.qd, axis=1)))  # ~20: gravity pulls along z
    np.testing.assert_allclose(psi, 0.0, atol=1e-10 * speed)  # unstabilised drift at rtol 1e-12
    candidate = sol.q[:, 0] + 2 * sol.q[:, 2] * sol.q[:, 1] + sol.q[:, 2]
    assert float(jnp.ptp(candidate)) > 0.1


# --- simple_pendulum_lagrange_hamilton and pendulum_cartesian_uk (seed 001) ----------


@pytest.mark.slow  # also examples/simple_pendulum_lagrange_hamilton.py
def test_lagrange_cartesian_and_hamilton_pendulums_agree():
    """ukjax's autodiff Lagrangian (theta) and Cartesian UK pendulums against scipy on the
    hand-written Hamilton equations (eqs 21h-i, corrected)."""
    m, L, g = 0.7, 1.3, 9.81
    th0, thd0 = 2.0, 0.5  # a large swing
    ts = np.linspace(0.0, 5.0, 51)
    pend = SimplePendulum(mass=m, length=L, g=g)
    rhs = jax.jit(lambda t, y: pendulum_hamilton_rhs(pend, t, y))
    ref = _dop853(
        lambda t, y: np.asarray(rhs(t, y)),
        [th0, m * L**2 * thd0],
        ts,
    )
    lag = ukjax.simulate(pend, jnp.array([th0]), jnp.array([thd0]), jnp.asarray(ts))
    np.testing.assert_allclose(lag.q[:, 0], ref[:, 0], atol=1e-9)
    np.testing.assert_allclose(pendulum_momentum(pend, lag.qd)[:, 0], ref[:, 1], atol=1e-9)
    cart = CartesianPendulum(mass=m, length=L, g=g)
    q0 = L * jnp.array([np.sin(th0), -np.cos(th0)])
    qd0 = L * thd0 * jnp.array([np.cos(th0), np.sin(th0)])
    sol = ukjax.simulate(cart, q0, qd0, jnp.asarray(ts))
    th = np.arctan2(np.asarray(sol.q[:, 0]), -np.asarray(sol.q[:, 1]))
    np.testing.assert_allclose(np.unwrap(th), ref[:, 0], atol=1e-9)
    H = jax.vmap(lambda q, p: pendulum_hamiltonian(pend, q, p))(ref[:, :1], ref[:, 1:])
    E = jax.vmap(lambda q, qd: ukjax.energy(cart, 0.0, q, qd))(sol.q, sol.qd)
    np.testing.assert_allclose(E, H[0], atol=1e-10)  # same datum: V = m g y
    np.testing.assert_allclose(H, H[0], atol=1e-10)


def test_cartesian_pendulum_drifts_with_a_poor_integrator():
    """Seed 001: 'if we choose a poor time-marching scheme, we will see constraint drift'."""
    import diffrax

    cart = CartesianPendulum()
    q0, qd0 = jnp.array([1.0, 0.0]), jnp.array([0.0, 0.0])
    ts = jnp.linspace(0.0, 10.0, 101)
    drift = {}
    for name, solver, dt in (("euler", diffrax.Euler(), 1e-3), ("dopri8", diffrax.Dopri8(), None)):
        kw = (
            dict(solver=solver, dt0=dt, stepsize_controller=diffrax.ConstantStepSize())
            if dt
            else {}
        )
        sol = ukjax.simulate(cart, q0, qd0, ts, stabilization=ukjax.NoStabilization(), **kw)
        drift[name] = float(jnp.max(jnp.abs(jnp.sum(sol.q**2, axis=1) - 1.0)))
    assert drift["euler"] > 1e-2 > 1e-9 > drift["dopri8"]


# --- nonideal_constraint_properties (seed 003) ----------------------------------------


def test_nonideal_properties_at_random_rank_deficient_constraints(rng):
    n, m = 6, 4
    for _ in range(3):
        M = random_spd(rng, n, cond=1e2)
        A, b = random_constraints(rng, m, n, rank=2)
        Q, C = rng.standard_normal(n), rng.standard_normal(n)
        qdd = np.asarray(ukjax.udwadia_kalaba(M, Q, A, b, C))
        np.testing.assert_allclose(
            qdd, uk_reference(M, Q, A, b, C), rtol=1e-9, atol=1e-10
        )  # eqs 8-10
        np.testing.assert_allclose(A @ qdd, b, atol=1e-10 * np.abs(b).max())  # 1
        Qi, Qni = (np.asarray(f) for f in ukjax.constraint_forces(M, Q, A, b, C))
        G = np.asarray(ukjax.weighted_pinv(A, M))
        P = np.eye(n) - G @ A
        np.testing.assert_allclose(Qni, P.T @ C, atol=1e-10)  # 2: both forms of eq 12
        np.testing.assert_allclose(Qni, M @ P @ np.linalg.solve(M, C), atol=1e-10)
        np.testing.assert_allclose(Qi + Qni, M @ qdd - Q, atol=1e-9)
        v = P @ rng.standard_normal(n)  # 3: virtual displacement
        np.testing.assert_allclose(A @ v, 0.0, atol=1e-10)
        np.testing.assert_allclose(v @ (Qi + Qni), v @ C, atol=1e-10)
        a = np.linalg.solve(M, Q)  # 4: M-orthogonality of the two corrections
        u1, u2 = G @ (b - A @ a), P @ np.linalg.solve(M, C)
        assert abs(u1 @ M @ u2) < 1e-10 * np.sqrt((u1 @ M @ u1) * (u2 @ M @ u2))
        ideal = np.asarray(ukjax.udwadia_kalaba(M, Q, A, b))  # 5: C = 0 is the ideal UK
        np.testing.assert_allclose(qdd - ideal, u2, atol=1e-10)
        gauss = lambda x: (x - a) @ M @ (x - a)  # 6: Gauss minimality
        for _ in range(3):
            other = ideal + P @ rng.standard_normal(n)
            assert gauss(other) > gauss(ideal)


def test_coulomb_bead_closed_form_and_power_balance():
    """Horizontal wire: v(t) = v0 / (1 + mu v0 t / R), s(t) = (R/mu) ln(1 + mu v0 t/R),
    and dE/dt = -mu |N| |v| along the motion."""
    bead = CoulombBead(mass=1.5, R=0.8, mu=0.4)
    v0 = 2.0
    q0, qd0 = bead.initial_state(v0)
    ts = jnp.linspace(0.0, 6.0, 61)
    sol = ukjax.simulate(bead, q0, qd0, ts)
    v_ex, s_ex = coulomb_bead_exact_speed(bead, ts, v0)
    np.testing.assert_allclose(jnp.linalg.norm(sol.qd, axis=1), v_ex, rtol=1e-10)
    angle = np.unwrap(np.arctan2(np.asarray(sol.q[:, 1]), np.asarray(sol.q[:, 0])))
    np.testing.assert_allclose(bead.R * angle, s_ex, atol=1e-10)
    d = ukjax.diagnostics(bead, sol)
    v = jnp.linalg.norm(sol.qd, axis=1)
    N = jnp.linalg.norm(d.Qc_ideal, axis=1)
    np.testing.assert_allclose(N, bead.mass * v_ex**2 / bead.R, rtol=1e-10)  # normal force
    np.testing.assert_allclose(
        jnp.sum(d.Qc_nonideal * sol.qd, axis=1), -bead.mu * N * v, rtol=1e-10
    )
    power_scale = float(jnp.max(N * v))  # ideal power vanishes up to the solver's error
    np.testing.assert_allclose(jnp.sum(d.Qc_ideal * sol.qd, axis=1), 0.0, atol=1e-10 * power_scale)
    E = jax.vmap(lambda q, qd: ukjax.energy(bead, 0.0, q, qd))(sol.q, sol.qd)
    np.testing.assert_allclose(E, 0.5 * bead.mass * v_ex**2, rtol=1e-10)


# --- ellipse_spring_particle (seed 004 Ex. 4.1) --------------------------------------


def _ellipse_states(rng, s, k):
    al, be = np.sqrt(s.c_e / s.a_e), np.sqrt(s.c_e / s.b_e)
    for _ in range(k):
        th = rng.uniform(0.2, 2.9) * rng.choice([-1, 1])  # away from y = 0 (Kane singular)
        w = rng.standard_normal()
        q = np.array([s.x0 + al * np.cos(th), be * np.sin(th)])
        qd = w * np.array([-al * np.sin(th), be * np.cos(th)])
        yield q, qd


def test_ellipse_constraint_force_equals_seed_formulas(rng):
    """UK F^c equals eqs 251-253 and eq 269, and is normal to the ellipse."""
    for _ in range(3):
        s = EllipseSpringParticle(
            mass=rng.uniform(0.5, 2),
            K=rng.uniform(0.5, 2),
            a_e=rng.uniform(0.5, 2),
            b_e=rng.uniform(0.5, 2),
            c_e=rng.uniform(0.5, 2),
            x0=rng.uniform(-1, 1),
        )
        for q, qd in _ellipse_states(rng, s, 4):
            M, Q = ukjax.mass_and_force(s, 0.0, q, qd)
            A, b = ukjax.constraint_matrices(s, 0.0, q, qd)
            Fc, _ = ukjax.constraint_forces(M, Q, A, b)
            np.testing.assert_allclose(
                Fc, ellipse_kane_constraint_force(s, q, qd), rtol=1e-10, atol=1e-12
            )
            np.testing.assert_allclose(
                Fc, ellipse_normal_constraint_force(s, q, qd), rtol=1e-10, atol=1e-12
            )
            grad = np.array([2 * s.a_e * (q[0] - s.x0), 2 * s.b_e * q[1]])
            assert abs(Fc[0] * grad[1] - Fc[1] * grad[0]) < 1e-10 * np.linalg.norm(
                Fc
            ) * np.linalg.norm(grad)


def test_ellipse_trajectory_matches_minimal_coordinates():
    """Parametrise x = x0 + al cos s, y = be sin s: g(s) s'' + g'(s) s'^2 / 2 = -V'(s)/m."""
    s = EllipseSpringParticle()
    al, be, m, K, x0 = np.sqrt(s.c_e / s.a_e), np.sqrt(s.c_e / s.b_e), s.mass, s.K, s.x0

    def rhs(t, y):
        th, w = y
        g = al**2 * np.sin(th) ** 2 + be**2 * np.cos(th) ** 2
        dg = 2 * np.sin(th) * np.cos(th) * (al**2 - be**2)
        dV = K * (-(x0 + al * np.cos(th)) * al * np.sin(th) + be**2 * np.sin(th) * np.cos(th))
        return [w, (-dV / m - 0.5 * dg * w**2) / g]

    speed = 1.2
    q0, qd0 = s.initial_state(speed)
    ts = np.linspace(0.0, 20.0, 201)
    ref = _dop853(rhs, [0.0, speed / be], ts)
    sol = ukjax.simulate(s, q0, qd0, jnp.asarray(ts))
    expected = np.stack([x0 + al * np.cos(ref[:, 0]), be * np.sin(ref[:, 0])], axis=1)
    np.testing.assert_allclose(sol.q, expected, atol=1e-9)
    E = jax.vmap(lambda q, qd: ukjax.energy(s, 0.0, q, qd))(sol.q, sol.qd)
    np.testing.assert_allclose(E, E[0], atol=1e-10)


# --- appell_hamel (seed 004 Ex. 3.1 and §3.7) -----------------------------------------


APPELL_HAMEL = {"linear": AppellHamelWheel, "nonlinear": AppellHamelWheelNonlinear}


@pytest.fixture(scope="module")
def appell_hamel_runs():
    ts = np.linspace(0.0, 10.0, 101)
    runs = {}
    for form in ("linear", "nonlinear"):
        s = APPELL_HAMEL[form]()
        q0, qd0 = s.initial_state()
        runs[form] = (s, ukjax.simulate(s, q0, qd0, jnp.asarray(ts)))
    s = runs["linear"][0]
    q0, qd0 = s.initial_state()
    rhs = jax.jit(lambda t, y: appell_hamel_reduced_rhs(s, t, y))  # compiled once, not eager
    ref = _dop853(
        lambda t, y: np.asarray(rhs(t, y)),
        np.r_[q0, qd0[:2]],
        ts,
    )
    return ts, runs, ref


def test_appell_hamel_linear_and_nonlinear_agree_with_kane(appell_hamel_runs):
    ts, runs, ref = appell_hamel_runs
    for form, (s, sol) in runs.items():
        np.testing.assert_allclose(sol.q, ref[:, :5], atol=5e-10, err_msg=form)
        np.testing.assert_allclose(sol.qd[:, :2], ref[:, 5:], atol=5e-10, err_msg=form)
    np.testing.assert_allclose(runs["linear"][1].q, runs["nonlinear"][1].q, atol=5e-10)


def test_appell_hamel_invariants(appell_hamel_runs):
    ts, runs, _ = appell_hamel_runs
    for form, (s, sol) in runs.items():
        E = jax.vmap(lambda q, qd: ukjax.energy(s, 0.0, q, qd))(sol.q, sol.qd)
        np.testing.assert_allclose(E, E[0], atol=1e-8 * abs(float(E[0])), err_msg=form)
        for other in ("linear", "nonlinear"):  # each run satisfies both constraint sets
            other_sys = APPELL_HAMEL[other]()
            r = jax.vmap(lambda t, q, qd: ukjax.constraint_residuals(other_sys, t, q, qd))(
                jnp.asarray(ts), sol.q, sol.qd
            )
            assert float(jnp.max(jnp.abs(r.velocity))) < 1e-9
            assert float(jnp.max(jnp.abs(r.nonholonomic))) < 1e-8  # speeds ~10: psi_1 is quadratic
            assert float(jnp.max(jnp.abs(r.position))) < 1e-9
    thd = runs["linear"][1].qd[:, 0]  # theta settles: its rate decays as the wheel spins up
    assert abs(float(thd[-1])) < 1e-2 * abs(float(thd[0]))
    assert float(runs["linear"][1].qd[-1, 1]) > 5.0


def test_appell_hamel_weight_accelerates_the_wheel():
    """Erratum eq 216: the falling weight accelerates the wheel (phi'' > 0 from rest in theta)."""
    s = AppellHamelWheel()
    q = jnp.array([0.3, 0.0, 0.0, 0.0, 30.0])
    qd = jnp.array([0.0, 0.0, 0.0, 0.0, 0.0])
    qdd = ukjax.acceleration(s, 0.0, q, qd)
    J = s.I + (s.M + s.m) * s.a**2 + s.m * s.b**2
    np.testing.assert_allclose(qdd[1], s.m * s.g * s.b / J, rtol=1e-12)
