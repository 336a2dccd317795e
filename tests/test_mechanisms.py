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
from ukjax._kernels import LAPACK
from ukjax._linalg import pinv_solve, regularized_solve
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


def test_nfour_bar_passes_singular_positions_with_projection():
    chain = NFourBar(N=2)
    q0, qd0 = chain.initial_state()
    ts = jnp.linspace(0.0, 3.0, 121)
    sol = ukjax.simulate(chain, q0, qd0, ts, stabilization=ukjax.Projection(saves=False))
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
    sol = ukjax.simulate(chain, q0, qd0, ts, stabilization=ukjax.Projection(saves=False))
    assert _singular_passes(nfour_bar_crank_angle(N, np.asarray(ts))) == 10
    assert _b0_error(chain, sol) < 1e-6


# ---- IFToMM A04: the Bricard mechanism, redundant everywhere ----------------------------


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
