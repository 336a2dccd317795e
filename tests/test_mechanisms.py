"""Redundant and singular mechanisms (issue 16): the IFToMM benchmarks A02 (N-four-bar,
singular positions) and A04 (Bricard, a redundant constraint everywhere), and the
regularised UK solve (the default) and the per-step projection that pass them."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ukjax
from references import BricardKKT, nfour_bar_crank_angle
from ukjax._kernels import LAPACK, UNROLLED
from ukjax._linalg import pinv_solve, regularized_solve, row_multipliers
from ukjax.systems import Bricard, NFourBar


def _b0_error(chain: NFourBar, sol) -> float:
    theta = nfour_bar_crank_angle(chain.N, np.asarray(sol.ts))
    b0 = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    return float(np.max(np.abs(np.asarray(sol.q)[:, :2] - b0)))


def _singular_passes(theta) -> int:
    """How many times the cranks pass the horizontal (cos(theta) = +-1)."""
    return int(np.sum(np.diff(np.floor(np.asarray(theta) / np.pi)) != 0))


# ---- the regularised solve -------------------------------------------------------------


def test_regularized_solve_is_the_pseudo_inverse_on_regular_and_redundant_rows():
    rng = np.random.default_rng(0)
    B = jnp.asarray(rng.normal(size=(4, 7)))
    B = jnp.concatenate([B, 2.0 * B[:1] - B[2:3]])  # a fifth, redundant row
    e = B @ jnp.asarray(rng.normal(size=(7, 2)))  # consistent right-hand sides
    z = regularized_solve(B, e, 1e-5, 3, LAPACK)
    np.testing.assert_allclose(z, np.linalg.pinv(np.asarray(B)) @ np.asarray(e), atol=1e-12)


def test_regularized_filter_matches_iterated_tikhonov_in_singular_values():
    # Unit-norm rows (the solve's scaling then changes nothing), two of them nearly
    # parallel so that the singular values spread over the filter's roll-off:
    # z = V diag(f(s) / s) U^T e with f(s) = 1 - (tau^2 / (s^2 + tau^2))^(K + 1).
    rng = np.random.default_rng(1)
    R = rng.normal(size=(4, 6))
    R[3] = R[2] + 3e-5 * rng.normal(size=6)
    R /= np.linalg.norm(R, axis=1, keepdims=True)
    e = rng.normal(size=(4, 1))
    U, s, Vt = np.linalg.svd(R, full_matrices=False)
    assert s[-1] < 1e-4 and s[0] > 0.5
    for tau, K in ((1e-5, 3), (1e-4, 0), (1e-3, 2)):
        f = 1.0 - (tau**2 / (s**2 + tau**2)) ** (K + 1)
        expected = Vt.T @ ((f / s)[:, None] * (U.T @ e))
        z = regularized_solve(jnp.asarray(R), jnp.asarray(e), tau, K, LAPACK)
        np.testing.assert_allclose(z, expected, rtol=1e-7, atol=1e-9)


def test_regularized_gain_is_bounded_and_continuous_through_a_rank_drop():
    # Two rows that become parallel as eps -> 0: the pseudo-inverse's gain on the
    # inconsistent residual grows like 1/eps; the regularised one stays bounded and the
    # solution is continuous in eps (no rank decision).
    def solve(eps, solver):
        B = jnp.array([[1.0, 0.0, 0.0], [1.0, eps, 0.0]])
        e = jnp.array([[0.0], [1e-10]])  # drift-sized inconsistency
        return solver(B, e)

    tik = lambda B, e: regularized_solve(B, e, 1e-5, 3, LAPACK)
    svd = lambda B, e: pinv_solve(B, e)
    epss = np.geomspace(1e-12, 1e-2, 41)
    gains_tik = np.array([float(jnp.linalg.norm(solve(x, tik))) / 1e-10 for x in epss])
    gains_svd = np.array([float(jnp.linalg.norm(solve(x, svd))) / 1e-10 for x in epss])
    assert gains_tik.max() < 2 * np.sqrt(4) / 1e-5  # below about sqrt(K + 1) / tau
    assert gains_svd.max() > 1e9  # the exact pseudo-inverse amplifies it by 1/eps
    # continuity: neighbouring eps (a factor 1.8 apart) change the gain by < a factor 4
    assert np.all(np.abs(np.diff(np.log(gains_tik))) < np.log(4.0))


@pytest.mark.parametrize("redundant", [False, True], ids=["independent", "redundant"])
@pytest.mark.parametrize("ops", [LAPACK, UNROLLED], ids=["lapack", "unrolled"])
def test_row_multipliers_ignore_a_coordinate_touched_only_by_round_off(ops, redundant):
    # A^T lam = F for contact-like rows A (m, n): coordinate 4 appears in one row with an
    # entry of round-off size (a hinge axis orthogonal to a contact normal) and F carries
    # round-off there too. The multipliers must still be the pseudo-inverse's. Scaled to
    # unit norm, that coordinate's equation of noise outweighed every other: with
    # independent rows the residual became of the size of the forces (the ragdoll
    # example's contact multipliers), with a redundant row the multipliers left the
    # minimum norm by orders of magnitude.
    rng = np.random.default_rng(3)
    m, n = 12, 7
    A = np.zeros((m, n))
    A[:4, :4] = rng.normal(size=(4, 4))
    if redundant:
        A[4] = A[0] + A[1]
    A[2, 4] = 5e-18  # the rest: free contacts' zero rows, coordinates no row touches
    F = A.T @ rng.normal(size=(m, 3))
    F[4] = [1.7e-16, -3e-17, 2.5e-19]
    expected = np.linalg.pinv(A.T) @ F
    got = np.asarray(row_multipliers(jnp.asarray(A), jnp.asarray(F), ops))
    scale = np.abs(F).max()
    np.testing.assert_allclose(got, expected, atol=1e-12 * scale)
    assert np.abs(A.T @ got - F).max() < 1e-12 * scale
    # without the floor on the coordinates' scales the same solve is far off
    unfloored = np.asarray(regularized_solve(jnp.asarray(A).T, jnp.asarray(F), 1e-5, 3, ops))
    assert np.abs(unfloored - expected).max() > scale


def test_row_multipliers_gradients_match_finite_differences_where_the_floor_holds():
    # d lam / dp with a coordinate at round-off (its scale floored) and a redundant row
    rng = np.random.default_rng(5)
    A0 = np.zeros((6, 5))
    A0[:3, :3] = rng.normal(size=(3, 3))
    A0[3] = A0[0] - A0[2]
    A0[1, 3] = 4e-18
    D = rng.normal(size=(6, 5)) * (np.abs(A0) > 1e-12)  # the rows move; zeros, round-off stay
    lam = rng.normal(size=6)

    def multipliers(p):
        A = jnp.asarray(A0) + p * jnp.asarray(D)
        return row_multipliers(A, A.T @ jnp.asarray(lam))

    g = jax.jacfwd(multipliers)(0.3)
    r = jax.jacrev(multipliers)(0.3)
    h = 1e-6
    fd = (multipliers(0.3 + h) - multipliers(0.3 - h)) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(r, g, rtol=1e-10, atol=1e-12)
    # the multipliers are the pseudo-inverse's (the floor held: coordinate 3's scale)
    A = A0 + 0.3 * D
    np.testing.assert_allclose(multipliers(0.3), np.linalg.pinv(A.T) @ (A.T @ lam), atol=1e-12)


def test_row_multipliers_keep_a_small_but_genuine_coordinate():
    # A coordinate in other units (entries 1e-7 of the largest) is an equation, not
    # noise: its multipliers stay those of the pseudo-inverse.
    rng = np.random.default_rng(4)
    A = rng.normal(size=(3, 5))
    A[:, 4] = 1e-7 * rng.normal(size=3)
    A[:, 3] = 0.0
    A[:, 2] = 1e-7 * A[:, 0] + A[:, 1]
    F = A.T @ rng.normal(size=(3, 2))
    got = np.asarray(row_multipliers(jnp.asarray(A), jnp.asarray(F)))
    np.testing.assert_allclose(got, np.linalg.pinv(A.T) @ F, rtol=1e-9, atol=1e-12)


def test_regularized_gradients_match_finite_differences_at_redundant_and_singular_rows():
    solver = ukjax.Regularized()
    M = jnp.diag(jnp.array([1.0, 2.0, 3.0]))
    Q = jnp.array([0.3, -9.81, 1.0])

    def qdd(p, eps):
        A = jnp.array([[1.0, p, 0.0], [2.0, 2.0 * p, 0.0], [0.0, 1.0, eps]])
        b = jnp.array([p, 2.0 * p, 0.5])
        return ukjax.udwadia_kalaba(M, Q, A, b, uk_solver=solver)

    for eps in (1.0, 1e-3):  # a redundant row, with a regular or nearly singular third
        g = jax.jacfwd(qdd)(0.7, eps)
        h = 1e-6
        fd = (qdd(0.7 + h, eps) - qdd(0.7 - h, eps)) / (2 * h)
        assert np.all(np.isfinite(g))
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)


def test_regularized_rejects_bad_parameters():
    with pytest.raises(ValueError, match="regularization must be positive"):
        ukjax.Regularized(regularization=0.0)
    with pytest.raises(ValueError, match="refinements"):
        ukjax.Regularized(refinements=-1)


def test_inconsistent_constraints_still_reported_with_the_default_solver():
    A = jnp.array([[1.0, 0.0], [1.0, 0.0]])
    b = jnp.array([0.0, 1.0])  # x'' = 0 and x'' = 1
    with pytest.raises(eqx.EquinoxRuntimeError, match="inconsistent constraints"):
        ukjax.udwadia_kalaba(jnp.eye(2), jnp.zeros(2), A, b)


# ---- IFToMM A02: the N-four-bar through its singular positions -------------------------


def test_nfour_bar_model_is_the_reduced_equation_on_its_branch():
    chain = NFourBar(N=3)
    theta, rate = 0.4, -1.3
    p = np.stack([np.arange(4) + np.cos(theta), np.full(4, np.sin(theta))], 1)
    q = jnp.asarray(p.ravel())
    qd = jnp.asarray(np.tile([-np.sin(theta) * rate, np.cos(theta) * rate], 4))
    qdd = ukjax.acceleration(chain, 0.0, q, qd)
    inertia, moment = 4 / 3 + 3, (4 / 2 + 3) * 9.81
    acc = -moment / inertia * np.cos(theta)
    expected = [
        -np.sin(theta) * acc - np.cos(theta) * rate**2,
        np.cos(theta) * acc - np.sin(theta) * rate**2,
    ]
    np.testing.assert_allclose(np.asarray(qdd).reshape(4, 2), np.tile(expected, (4, 1)), atol=1e-10)


def test_nfour_bar_passes_singular_positions_at_default_settings():
    chain = NFourBar(N=2)
    q0, qd0 = chain.initial_state()
    ts = jnp.linspace(0.0, 3.0, 121)
    sol = ukjax.simulate(chain, q0, qd0, ts)
    theta = nfour_bar_crank_angle(2, np.asarray(ts))
    assert _singular_passes(theta) >= 3
    assert _b0_error(chain, sol) < 1e-6  # the benchmark's high precision is 1e-3
    # every crank on the same (parallelogram) branch
    angles = np.unwrap(np.asarray(chain.crank_angles(sol.q)), axis=0)
    assert np.max(np.abs(angles - angles[:, :1])) < 1e-6
    E = jax.vmap(lambda q, qd: ukjax.energy(chain, 0.0, q, qd))(sol.q, sol.qd)
    assert float(jnp.max(jnp.abs(E - E[0]))) < 1e-7


@pytest.mark.slow
def test_nfour_bar_benchmark_ten_seconds():
    # N = 1 and 2 over 10 s: examples/n_four_bar_benchmark.py and benchmarks/mechanisms.py
    N = 10
    chain = NFourBar(N=N)
    q0, qd0 = chain.initial_state()
    ts = jnp.linspace(0.0, 10.0, 401)
    sol = ukjax.simulate(chain, q0, qd0, ts)
    assert _singular_passes(nfour_bar_crank_angle(N, np.asarray(ts))) == 10
    assert _b0_error(chain, sol) < 1e-6


# ---- IFToMM A04: the Bricard mechanism, redundant everywhere ----------------------------


@pytest.mark.slow  # default-suite time (7 s)
def test_bricard_matches_the_kkt_reference_at_tight_tolerance_without_false_errors():
    mech, ref = Bricard(), BricardKKT()
    q0, qd0 = mech.initial_state()
    ts = jnp.linspace(0.0, 2.0, 21)
    sol = ukjax.simulate(mech, q0, qd0, ts, rtol=1e-12, atol=1e-12)  # throws on a false error
    expected = ref.solve(np.asarray(ts)).y[:24].T
    np.testing.assert_allclose(np.asarray(sol.q), expected, atol=1e-7)
    E = jax.vmap(lambda q, qd: ukjax.energy(mech, 0.0, q, qd))(sol.q, sol.qd)
    assert float(jnp.max(jnp.abs(E - E[0]))) < 1e-8
    phi = jax.vmap(lambda q: mech.holonomic(0.0, q))(sol.q)
    assert float(jnp.max(jnp.abs(phi))) < 1e-9  # saves: dense output between projected steps


# ---- classic index-3 test problems (Hairer & Wanner; the Test Set for IVP solvers) ----


class AndrewsSqueezer(ukjax.System):
    """Andrews' squeezing mechanism: 7 rigid bodies, 7 angles, 6 loop-closure constraints
    (E. Hairer and G. Wanner, *Solving ODEs II*, 2nd ed., 1996, §VII.7; F. Mazzia and
    F. Iavernaro, *Test Set for IVP solvers*, problem "andrews"). Driven by a constant
    torque; M(q), the applied and velocity-dependent forces and the constraints as there."""

    def mass_matrix(self, t, q):
        b, th, ga, ph, de, om, ep = q
        m1, m2, m3, m4, m5, m6, m7 = 0.04325, 0.00365, 0.02373, 0.00706, 0.07050, 0.00706, 0.05498
        i1, i2, i3, i4 = 2.194e-6, 4.410e-7, 5.255e-6, 5.667e-7
        i5, i6, i7 = 1.169e-5, 5.667e-7, 1.912e-5
        da, rr, ra, e, ea, zt = 115e-4, 7e-3, 92e-5, 2e-2, 1421e-5, 4e-2
        sa, sb, ta, tb, u, ua, ub, zf, fa = (
            1874e-5,
            1043e-5,
            2308e-5,
            916e-5,
            4e-2,
            1228e-5,
            449e-5,
            2e-2,
            1421e-5,
        )
        M = jnp.zeros((7, 7), q.dtype)
        M = M.at[0, 0].set(m1 * ra**2 + m2 * (rr**2 - 2 * da * rr * jnp.cos(th) + da**2) + i1 + i2)
        m01 = m2 * (da**2 - da * rr * jnp.cos(th)) + i2
        M = M.at[0, 1].set(m01).at[1, 0].set(m01)
        M = M.at[1, 1].set(m2 * da**2 + i2)
        M = M.at[2, 2].set(m3 * (sa**2 + sb**2) + i3)
        M = M.at[3, 3].set(m4 * (e - ea) ** 2 + i4)
        M = M.at[3, 4].set(m4 * ((e - ea) ** 2 + zt * (e - ea) * jnp.sin(ph)) + i4)
        M = M.at[4, 3].set(M[3, 4])
        M = M.at[4, 4].set(
            m4 * (zt**2 + 2 * zt * (e - ea) * jnp.sin(ph) + (e - ea) ** 2)
            + m5 * (ta**2 + tb**2)
            + i4
            + i5
        )
        M = M.at[5, 5].set(m6 * (zf - fa) ** 2 + i6)
        M = M.at[5, 6].set(m6 * ((zf - fa) ** 2 - u * (zf - fa) * jnp.sin(om)) + i6)
        M = M.at[6, 5].set(M[5, 6])
        M = M.at[6, 6].set(
            m6 * ((zf - fa) ** 2 - 2 * u * (zf - fa) * jnp.sin(om) + u**2)
            + m7 * (ua**2 + ub**2)
            + i6
            + i7
        )
        return M

    def forces(self, t, q, qd):
        b, th, ga, ph, de, om, ep = q
        bp, thp, gap, php, dep, omp, epp = qd
        m2, m4, m6 = 0.00365, 0.00706, 0.00706
        da, rr, e, ea, zt, u, zf, fa = 115e-4, 7e-3, 2e-2, 1421e-5, 4e-2, 4e-2, 2e-2, 1421e-5
        xb, yb, xc, yc, sc, sd = -0.03635, 0.03273, 0.014, 0.072, 18e-3, 2e-2
        mom, c0, lo = 0.033, 4530.0, 0.07785
        xd = sd * jnp.cos(ga) + sc * jnp.sin(ga) + xb
        yd = sd * jnp.sin(ga) - sc * jnp.cos(ga) + yb
        lang = jnp.sqrt((xd - xc) ** 2 + (yd - yc) ** 2)
        force = -c0 * (lang - lo) / lang
        fx, fy = force * (xd - xc), force * (yd - yc)
        return jnp.stack(
            [
                mom - m2 * da * rr * thp * (thp + 2 * bp) * jnp.sin(th),
                m2 * da * rr * bp**2 * jnp.sin(th),
                fx * (sc * jnp.cos(ga) - sd * jnp.sin(ga))
                + fy * (sd * jnp.cos(ga) + sc * jnp.sin(ga)),
                m4 * zt * (e - ea) * dep**2 * jnp.cos(ph),
                -m4 * zt * (e - ea) * php * (php + 2 * dep) * jnp.cos(ph),
                -m6 * u * (zf - fa) * epp**2 * jnp.cos(om),
                m6 * u * (zf - fa) * omp * (omp + 2 * epp) * jnp.cos(om),
            ]
        )

    def holonomic(self, t, q):
        b, th, ga, ph, de, om, ep = q
        xa, ya, xb, yb = -0.06934, -0.00227, -0.03635, 0.03273
        d, e, rr, ss, zt, u, zf = 28e-3, 2e-2, 7e-3, 35e-3, 4e-2, 4e-2, 2e-2
        cx = rr * jnp.cos(b) - d * jnp.cos(b + th)
        cy = rr * jnp.sin(b) - d * jnp.sin(b + th)
        return jnp.stack(
            [
                cx - ss * jnp.sin(ga) - xb,
                cy + ss * jnp.cos(ga) - yb,
                cx - e * jnp.sin(ph + de) - zt * jnp.cos(de) - xa,
                cy + e * jnp.cos(ph + de) - zt * jnp.sin(de) - ya,
                cx - zf * jnp.cos(om + ep) - u * jnp.sin(ep) - xa,
                cy - zf * jnp.sin(om + ep) + u * jnp.cos(ep) - ya,
            ]
        )


ANDREWS_Q0 = [
    -0.0617138900142764496358948458001,
    0.0,
    0.455279819163070380255912382449,
    0.222668390165885884674473185609,
    0.487364979543842550225598953530,
    -0.222668390165885884674473185609,
    1.23054744454982119249735015568,
]
# The Test Set's reference at t = 0.03 (PSIDE at rtol = atol = 1e-14).
ANDREWS_Q_003 = [
    0.1581077119629904e2,
    -0.1575637105984298e2,
    0.4082224013073101e-1,
    -0.5347301163226948,
    0.5244099658805304,
    0.5347301163226948,
    0.1048080741042263e1,
]


@pytest.mark.slow  # default-suite time; the same paths run in other default tests
def test_andrews_squeezer_matches_the_test_set_reference():
    sys = AndrewsSqueezer()
    ts = jnp.array([0.0, 0.03])
    sol = ukjax.simulate(sys, jnp.asarray(ANDREWS_Q0), jnp.zeros(7), ts)
    np.testing.assert_allclose(np.asarray(sol.q[-1]), ANDREWS_Q_003, rtol=1e-8, atol=1e-9)


class CarAxis(ukjax.System):
    """The car axis problem (P. Rentrop, M. Roche and G. Steinebach, Numer. Math. 55
    (1989); Test Set for IVP solvers, problem "caraxis"): an axis of two wheels on
    springs, the left end constrained to a line through the origin and the right wheel's
    spring base driven along a bump, x_b = sqrt(L^2 - y_b^2), y_b = r sin(w t). Rheonomic
    holonomic constraints; eps = 1e-2 makes it mildly stiff."""

    eps: float = 1e-2
    mass: float = 10.0
    L: float = 1.0
    L0: float = 0.5
    r: float = 0.1
    w: float = 10.0
    g: float = 1.0

    def _base(self, t):
        yb = self.r * jnp.sin(self.w * t)
        return jnp.sqrt(self.L**2 - yb**2), yb

    def mass_matrix(self, t, q):
        return self.mass * self.eps**2 / 2 * jnp.eye(4, dtype=q.dtype)

    def forces(self, t, q, qd):
        xl, yl, xr, yr = q
        xb, yb = self._base(t)
        Ll = jnp.sqrt(xl**2 + yl**2)
        Lr = jnp.sqrt((xr - xb) ** 2 + (yr - yb) ** 2)
        k = self.mass * self.eps**2 / 2
        return jnp.stack(
            [
                (self.L0 - Ll) * xl / Ll,
                (self.L0 - Ll) * yl / Ll - k * self.g,
                (self.L0 - Lr) * (xr - xb) / Lr,
                (self.L0 - Lr) * (yr - yb) / Lr - k * self.g,
            ]
        )

    def holonomic(self, t, q):
        xl, yl, xr, yr = q
        xb, yb = self._base(t)
        return jnp.stack([xb * xl + yb * yl, (xl - xr) ** 2 + (yl - yr) ** 2 - self.L**2])


# The Test Set's reference at t = 3 (positions, then velocities).
CAR_AXIS_Y_3 = [
    0.4934557842755629e-1,
    0.4969894602303324,
    0.1041742524885400e1,
    0.3739110272652214,
    -0.7705836840321485e-1,
    0.7446866596327776e-2,
    0.1755681574942899e-1,
    0.7703410437794031,
]


def test_car_axis_matches_the_test_set_reference():
    sys = CarAxis()
    q0, qd0 = jnp.array([0.0, 0.5, 1.0, 0.5]), jnp.array([-0.5, 0.0, -0.5, 0.0])
    sol = ukjax.simulate(sys, q0, qd0, jnp.array([0.0, 3.0]))
    got = np.concatenate([np.asarray(sol.q[-1]), np.asarray(sol.qd[-1])])
    np.testing.assert_allclose(got, CAR_AXIS_Y_3, rtol=0, atol=1e-9)
