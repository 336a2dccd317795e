"""Lemke's method, and the frictional impact of maximal dissipation built on it (the
fallback where the sliding-impact model has no solution).

References written here: every complementary basis enumerated by NumPy (the LCP's
solutions), the closed form of a particle's oblique inelastic impact on a rough floor
(P_n = m v_n; stick if |v_t| <= mu v_n, else v_t+ = v_t - mu v_n sgn v_t; Brach,
*Mechanical Impact Dynamics*, 1991, ch. 4), and the impact conditions themselves
(impulses >= 0, post-impact normal speeds >= 0, complementarity, friction in the cone and
against the slip, kinetic energy not increased)."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ukjax import Regularized
from ukjax._dissipative_impact import dissipative_impact
from ukjax._dynamics import RowSolve
from ukjax._friction import FrictionState
from ukjax._lemke import lemke, solve_basis


jax.config.update("jax_enable_x64", True)


def enumerate_lcp(M, q, tol=1e-9):
    """Every solution of the LCP (q, M) among the complementary bases (NumPy)."""
    m = q.shape[0]
    found = []
    for S in itertools.product([False, True], repeat=m):
        S = np.array(S)
        z = np.zeros(m)
        if S.any():
            try:
                z[S] = np.linalg.solve(M[np.ix_(S, S)], -q[S])
            except np.linalg.LinAlgError:
                continue
        w = M @ z + q
        if np.all(z >= -tol) and np.all(w >= -tol):
            found.append(z)
    return found


@pytest.mark.parametrize("kind", ["positive definite", "P-matrix", "semidefinite"])
def test_lemke_finds_the_solution_that_enumeration_finds(kind):
    rng = np.random.default_rng(1)
    solve = jax.jit(lemke)
    for _ in range(15):
        m = int(rng.integers(2, 7))
        X = rng.normal(size=(m, m))
        if kind == "positive definite":
            M = X @ X.T + 0.1 * np.eye(m)
        elif kind == "P-matrix":  # positive definite symmetric part, not symmetric
            M = X @ X.T + 0.1 * np.eye(m) + (X - X.T)
        else:
            B = rng.normal(size=(m, m // 2 + 1))
            M = B @ B.T
        q = rng.normal(size=m)
        sol = solve(jnp.asarray(M), jnp.asarray(q))
        found = enumerate_lcp(M, q)
        if kind != "semidefinite":
            assert len(found) == 1  # a P-matrix: exactly one solution
        assert bool(sol.solved) == (len(found) > 0)
        if found:
            z, w = np.asarray(sol.z), np.asarray(sol.w)
            assert z.min() >= -1e-10 and w.min() >= -1e-9 and abs(z @ w) < 1e-9
            # the semidefinite case's z may differ; its w (= M z + q) is unique
            np.testing.assert_allclose(w, M @ found[0] + q, atol=1e-8)


def test_lemke_reports_an_infeasible_problem_and_runs_under_vmap():
    # w = -z - 1 < 0 for every z >= 0: no solution, a ray
    sol = jax.jit(lemke)(jnp.array([[-1.0]]), jnp.array([-1.0]))
    assert not bool(sol.solved)
    Ms = jnp.stack([2.0 * jnp.eye(2), jnp.array([[1.0, 1.0], [1.0, 2.0]])])
    qs = jnp.array([[-2.0, 1.0], [-1.0, -0.5]])
    batch = jax.jit(jax.vmap(lemke))(Ms, qs)
    np.testing.assert_allclose(batch.z, [[1.0, 0.0], [1.0, 0.0]], atol=1e-14)
    assert batch.solved.tolist() == [True, True]


def test_the_basis_solution_has_the_derivative_of_the_solution():
    # away from a change of basis, z = -M_SS^-1 q_S: compare its derivative in q and M
    # with finite differences of lemke's own z
    M = jnp.array([[2.0, 0.5, 0.0], [0.5, 1.0, 0.2], [0.0, 0.2, 3.0]])
    q = jnp.array([-1.0, 0.3, -0.7])
    basic = lemke(M, q).basic_z

    def z_of(M, q):
        return solve_basis(M, q, basic)[0]

    dz_dM, dz_dq = jax.jacfwd(z_of, argnums=(0, 1))(M, q)
    h = 1e-6
    z = jax.jit(lambda M, q: lemke(M, q).z)
    for i in range(3):
        e = jnp.zeros(3).at[i].set(h)
        fd = (z(M, q + e) - z(M, q - e)) / (2 * h)
        np.testing.assert_allclose(dz_dq[:, i], fd, atol=1e-8)
    E = jnp.zeros((3, 3)).at[0, 1].set(h)
    fd = (z(M + E, q) - z(M - E, q)) / (2 * h)
    np.testing.assert_allclose(dz_dM[:, 0, 1], fd, atol=1e-8)


def _particle_impact(v, mu, d):
    """A unit point mass at the floor (n = 3, gap z), velocity v, one contact."""
    solve = RowSolve(jnp.eye(3), Regularized())
    G = jnp.array([[0.0, 0.0, 1.0]])
    T = jnp.eye(3)[:d][None]  # (1, d, 3): the tangent rows x (and y)
    fs = FrictionState(T, (T @ v)[:, :], jnp.zeros((1, d)), jnp.array([mu]), jnp.array([mu]))
    J, c = jnp.zeros((0, 3)), jnp.zeros(0)
    return dissipative_impact(solve, J, c, v, G, G @ v, fs, jnp.array([True]), jnp.zeros(1))


@pytest.mark.parametrize("d", [1, 2])
@pytest.mark.parametrize("vt", [0.2, 1.5, -1.5])
def test_an_oblique_impact_of_a_particle_has_its_closed_form(d, vt):
    # v_n = -1, mu = 0.5: |v_t| <= 0.5 sticks, faster slides on at v_t - 0.5 sgn v_t (in 3-D
    # along a generator of the pyramid, where it is the cone)
    mu = 0.5
    v = jnp.array([vt, 0.0, -1.0])
    out = jax.jit(_particle_impact, static_argnums=2)(v, mu, d)
    assert bool(out.solved)
    expected_vt = 0.0 if abs(vt) <= mu else vt - mu * np.sign(vt)
    np.testing.assert_allclose(out.qd, [expected_vt, 0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(out.normal, [1.0], atol=1e-12)
    np.testing.assert_allclose(np.abs(out.tangential), [abs(vt - expected_vt)], atol=1e-12)


def test_an_oblique_impact_between_generators_stays_inside_the_cone():
    # a slip at 22.5 degrees, between two of the 8 generators: the friction impulse lies on
    # the inscribed pyramid (at most mu P_n, at least cos(pi/8) of it), the post-impact
    # slip is not reversed and the energy does not grow
    mu, a = 0.5, np.pi / 8
    v = jnp.array([2.0 * np.cos(a), 2.0 * np.sin(a), -1.0])
    out = jax.jit(_particle_impact, static_argnums=2)(v, mu, 2)
    assert bool(out.solved)
    np.testing.assert_allclose(out.normal, [1.0], atol=1e-12)
    assert np.cos(np.pi / 8) * mu - 1e-12 <= float(out.tangential[0]) <= mu + 1e-12
    after = np.asarray(out.qd)
    assert abs(after[2]) < 1e-12
    assert after[:2] @ np.asarray(v[:2]) > 0
    assert after @ after < float(v @ v)


@pytest.mark.slow  # 6 s of compilation: kept out of the default suite's 5 minutes
def test_two_corners_of_a_block_impact_with_the_conditions_of_maximal_dissipation():
    # a planar block (x, y, theta; half-width 0.2, half-height 0.6, m = 1) landing flat on
    # both bottom corners while sliding and turning: an impact of two contacts at once
    m, b, h, mu = 1.0, 0.2, 0.6, 0.8
    inertia = m * (b**2 + h**2) / 3
    Mm = jnp.diag(jnp.array([m, m, inertia]))
    side = jnp.array([-1.0, 1.0])
    G = jnp.stack([jnp.zeros(2), jnp.ones(2), side * b], axis=1)  # d/dt of y + s b sin th
    T = jnp.stack([jnp.ones(2), jnp.zeros(2), jnp.full(2, h)], axis=1)[:, None, :]
    solve = RowSolve(Mm, Regularized())
    impact = jax.jit(
        lambda v, gd, fs: dissipative_impact(
            solve,
            jnp.zeros((0, 3)),
            jnp.zeros(0),
            v,
            G,
            gd,
            fs,
            jnp.array([True, True]),
            jnp.zeros(2),
        )
    )
    rng = np.random.default_rng(3)
    for _ in range(10):
        v = jnp.asarray(rng.normal(size=3) * np.array([1.0, 0.3, 2.0]) - np.array([0, 1.0, 0]))
        gd = G @ v
        if float(gd.min()) >= 0:
            continue
        fs = FrictionState(T, T @ v, jnp.zeros((2, 1)), jnp.full(2, mu), jnp.full(2, mu))
        out = impact(v, gd, fs)
        assert bool(out.solved)
        Pn, Pt = np.asarray(out.normal), np.asarray(out.tangential)
        after = np.asarray(out.qd)
        gn, vt = np.asarray(G @ out.qd), np.asarray(T[:, 0] @ out.qd)
        assert Pn.min() >= -1e-12 and gn.min() >= -1e-12 and abs(Pn @ gn) < 1e-10
        assert np.all(np.abs(Pt) <= mu * Pn + 1e-12)  # in the cone
        sliding = np.abs(vt) > 1e-9  # slides: the whole cone, against the slip
        np.testing.assert_allclose(
            Pt[sliding], -mu * Pn[sliding] * np.sign(vt[sliding]), atol=1e-10
        )
        # momentum: M dv = G^T Pn + T^T Pt
        np.testing.assert_allclose(
            np.asarray(Mm) @ (after - np.asarray(v)),
            np.asarray(G).T @ Pn + np.asarray(T[:, 0]).T @ Pt,
            atol=1e-12,
        )
        assert after @ np.asarray(Mm) @ after <= float(v @ Mm @ v) + 1e-12
