"""The UK solve against an independent dense NumPy reference and its defining properties."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_xla import primitives

import ukjax
from references import null_space, random_constraints, random_spd, uk_reference
from ukjax._kernels import LAPACK, UNROLLED, diagonal


SOLVERS = {
    "auto": ukjax.CholeskyWithFallback(),
    "svd": ukjax.SVD(),
    "lapack": ukjax.CholeskyWithFallback(kernels=ukjax.LapackKernels()),
    "unrolled": ukjax.CholeskyWithFallback(kernels=ukjax.UnrolledKernels()),
    "svd-unrolled": ukjax.SVD(kernels=ukjax.UnrolledKernels()),
}
METHODS = list(SOLVERS)


def eager(test):
    """Run a property test with jit disabled: each hypothesis example is a new shape, and
    op-by-op execution is much cheaper than compiling every one (the jitted path is the same
    program and is exercised by the other tests of this file)."""

    @functools.wraps(test)
    def run(*args, **kwargs):
        with jax.disable_jit():
            return test(*args, **kwargs)

    return run


def two_speeds(check, strategies, default: int, thorough: int):
    """A property test twice: `default` hypothesis examples in the default suite and
    `thorough` in the slow suite (the same check; the default suite stays short).
    `strategies(quick)`: the default suite's draw from one shape only, because every new
    shape costs about 4 s of op-by-op compilation on the 2-core box (the slow suite draws
    from all of them)."""

    def make(examples, quick):
        test = given(*strategies(quick))(eager(check))
        return settings(max_examples=examples, deadline=None)(test)

    return make(default, True), pytest.mark.slow(make(thorough, False))


@st.composite
def problems(draw, quick: bool = False):
    # A few shapes (compiled once each and shared by the tests of this file); the rank, the
    # conditioning, C and the values vary freely.
    n = draw(st.sampled_from([4] if quick else [2, 4, 6]))
    m = draw(st.sampled_from([3] if quick else [1, 3, 5]))
    rank = draw(st.integers(1, min(m, n)))
    seed = draw(st.integers(0, 2**31 - 1))
    with_C = draw(st.booleans())
    rng = np.random.default_rng(seed)
    M = random_spd(rng, n, cond=draw(st.sampled_from([1.0, 10.0, 1e4])))
    A, b = random_constraints(rng, m, n, rank)
    Q = rng.standard_normal(n)
    C = rng.standard_normal(n) if with_C else None
    return M, Q, A, b, C


def _matches_dense_reference(problem, method):
    M, Q, A, b, C = problem
    qdd = ukjax.udwadia_kalaba(M, Q, A, b, C, uk_solver=SOLVERS[method])
    ref = uk_reference(M, Q, A, b, C)
    np.testing.assert_allclose(qdd, ref, rtol=1e-7, atol=1e-7 * (1 + np.abs(ref).max()))
    # The constraints hold exactly (b is consistent by construction).
    np.testing.assert_allclose(A @ np.asarray(qdd), b, atol=1e-8 * (1 + np.abs(b).max()))


test_matches_dense_reference, test_matches_dense_reference_thorough = two_speeds(
    _matches_dense_reference, lambda quick: (problems(quick), st.sampled_from(METHODS)), 3, 8
)


@st.composite
def full_rank_problems(draw, quick: bool = False):
    n = draw(st.sampled_from([10] if quick else [3, 10]))
    m = draw(st.sampled_from([3] if quick else [1, 3]))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    M = random_spd(rng, n, cond=draw(st.sampled_from([1.0, 10.0, 1e4])))
    A, b = random_constraints(rng, m, n, m)
    C = rng.standard_normal(n) if draw(st.booleans()) else None
    return M, rng.standard_normal(n), A, b, C


def _cholesky_solver_matches_dense_reference(problem, kernels):
    """ukjax.Cholesky (no fallback) against the independent NumPy reference."""
    M, Q, A, b, C = problem
    k = ukjax.LapackKernels() if kernels == "lapack" else ukjax.UnrolledKernels()
    qdd = ukjax.udwadia_kalaba(M, Q, A, b, C, uk_solver=ukjax.Cholesky(kernels=k))
    ref = uk_reference(M, Q, A, b, C)
    np.testing.assert_allclose(qdd, ref, rtol=1e-7, atol=1e-7 * (1 + np.abs(ref).max()))


(
    test_cholesky_solver_matches_dense_reference_at_full_row_rank,
    test_cholesky_solver_matches_dense_reference_at_full_row_rank_thorough,
) = two_speeds(
    _cholesky_solver_matches_dense_reference,
    lambda quick: (full_rank_problems(quick), st.sampled_from(["lapack", "unrolled"])),
    3,
    10,
)


def _gauss_principle(problem):
    """The ideal UK acceleration minimises (qdd - a)^T M (qdd - a) over A qdd = b."""
    M, Q, A, b, _ = problem
    qdd = np.asarray(ukjax.udwadia_kalaba(M, Q, A, b))
    a = np.linalg.solve(M, Q)
    G = lambda x: (x - a) @ M @ (x - a)
    N = null_space(A)
    rng = np.random.default_rng(0)
    for _ in range(20):
        if N.shape[1] == 0:
            break
        delta = N @ rng.standard_normal(N.shape[1]) * 10 ** rng.uniform(-4, 0)
        assert G(qdd + delta) >= G(qdd) - 1e-9 * max(1.0, G(qdd))
    # First-order optimality: M (qdd - a) lies in the range of A^T (orthogonal to null(A)).
    np.testing.assert_allclose(N.T @ M @ (qdd - a), 0, atol=1e-8 * (1 + np.abs(M @ a).max()))


test_gauss_principle, test_gauss_principle_thorough = two_speeds(
    _gauss_principle, lambda quick: (problems(quick),), 3, 25
)


def _forces_virtual_work_and_m_orthogonality(problem):
    M, Q, A, b, C = problem
    if C is None:
        C = np.random.default_rng(1).standard_normal(M.shape[0])
    Qi, Qni = (np.asarray(x) for x in ukjax.constraint_forces(M, Q, A, b, C))
    qdd = np.asarray(ukjax.udwadia_kalaba(M, Q, A, b, C))
    scale = 1 + np.abs(Q).max() + np.abs(C).max() + np.abs(M @ qdd).max()
    # M qdd = Q + Qc_ideal + Qc_nonideal (Udwadia 2004 eq 8).
    np.testing.assert_allclose(M @ qdd, Q + Qi + Qni, atol=1e-8 * scale)
    N = null_space(A)
    # Ideal forces do no work under virtual displacements (A v = 0); the non-ideal part
    # does exactly the prescribed work v^T C.
    np.testing.assert_allclose(N.T @ Qi, 0, atol=1e-8 * scale)
    np.testing.assert_allclose(N.T @ (Qi + Qni), N.T @ C, atol=1e-8 * scale)
    # The two acceleration corrections are M-orthogonal.
    d_i, d_ni = np.linalg.solve(M, Qi), np.linalg.solve(M, Qni)
    assert abs(d_i @ M @ d_ni) <= 1e-8 * scale**2


(
    test_forces_virtual_work_and_m_orthogonality,
    test_forces_virtual_work_and_m_orthogonality_thorough,
) = two_speeds(_forces_virtual_work_and_m_orthogonality, lambda quick: (problems(quick),), 3, 25)


@pytest.mark.parametrize("method", METHODS)
def test_duplicated_and_scaled_rows_change_nothing(rng, method):
    n = 5
    M = random_spd(rng, n)
    Q = rng.standard_normal(n)
    A, b = random_constraints(rng, 2, n, 2)
    base = ukjax.udwadia_kalaba(M, Q, A, b, uk_solver=SOLVERS[method])
    A_dup = np.vstack([A, A[:1], 3.0 * A[1:2], np.zeros((1, n))])
    b_dup = np.concatenate([b, b[:1], 3.0 * b[1:2], [0.0]])
    dup = ukjax.udwadia_kalaba(M, Q, A_dup, b_dup, uk_solver=SOLVERS[method])
    np.testing.assert_allclose(dup, base, rtol=1e-10, atol=1e-10)


@pytest.mark.slow  # default-suite time; the same paths run in other default tests
def test_methods_agree_for_full_row_rank(rng):
    for n, m in [(2, 1), (5, 3), (12, 7)]:
        M = random_spd(rng, n)
        Q = rng.standard_normal(n)
        A, b = random_constraints(rng, m, n, m)
        kinds = [SOLVERS[k] for k in ("auto", "svd", "lapack")]
        kinds += [ukjax.Cholesky()]
        kinds += [SOLVERS["unrolled"]] if n <= 8 else []
        outs = [ukjax.udwadia_kalaba(M, Q, A, b, uk_solver=k) for k in kinds]
        for o in outs[1:]:
            np.testing.assert_allclose(o, outs[0], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(
    "rank", [pytest.param(3, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow)]
)
def test_unrolled_and_lapack_kernels_agree_in_value_and_gradient(rng, rank):
    """The fused small-n kernels are the same exact algorithm as the LAPACK ones: equal
    values and Jacobians with respect to every input, also at redundant rows (SVD branch)."""
    n = 5
    M = random_spd(rng, n)
    Q = rng.standard_normal(n)
    A, b = random_constraints(rng, 3, n, rank)
    C = rng.standard_normal(n)
    f = lambda method: jax.jacfwd(
        lambda *x: ukjax.udwadia_kalaba(*x, uk_solver=SOLVERS[method]), argnums=(0, 1, 2, 3, 4)
    )(M, Q, A, b, C)
    vals = [
        ukjax.udwadia_kalaba(M, Q, A, b, C, uk_solver=SOLVERS[k]) for k in ("unrolled", "lapack")
    ]
    np.testing.assert_allclose(vals[0], vals[1], rtol=1e-11, atol=1e-11)
    for J_u, J_l in zip(f("unrolled"), f("lapack")):
        assert np.all(np.isfinite(J_u))
        np.testing.assert_allclose(J_u, J_l, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("n", [0, 1, 3, 6])
def test_one_factor_solves_and_products_of_both_kernels_are_numpys(rng, n):
    """`DenseOps.triangular(L)`: L^-1 X, L^-T X, (L L^T)^-1 X and L X from one factor
    (the unrolled kernels unpack its entries once for all of them), for vectors and
    matrices, equal NumPy's; and their reverse-mode derivative with respect to L (the
    entries' cotangents summed over the uses) equals the LAPACK kernels' on the lower
    triangle (the upper entries of a factor are zeros that no kernel reads; the Cholesky
    rules of both kernels drop their cotangents)."""
    L = np.linalg.cholesky(random_spd(rng, n)) if n else np.zeros((0, 0))
    Li = np.linalg.inv(L) if n else L
    for X in (rng.standard_normal(n), rng.standard_normal((n, 2))):
        want = (Li @ X, Li.T @ X, Li.T @ (Li @ X), L @ X)
        for ops in (UNROLLED, LAPACK):
            t = ops.triangular(jnp.asarray(L))
            got = (t.lower(X), t.lower_t(X), t.solve(X), t.times(X))
            for g, w in zip(got, want):
                assert g.shape == w.shape
                np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    if n == 0:
        return
    X = rng.standard_normal((n, 2))
    W = rng.standard_normal((4, n, 2))

    def loss(ops):
        def f(L):
            t = ops.triangular(L)
            outs = (t.lower(X), t.lower_t(X), t.solve(X), t.times(X))
            return sum(jnp.sum(w * o) for w, o in zip(W, outs))

        return jax.jit(jax.grad(f))(jnp.asarray(L))

    lower = np.tril(np.ones((n, n), bool))
    g_unrolled, g_lapack = loss(UNROLLED), loss(LAPACK)
    assert np.abs(g_lapack[lower]).min() > 0  # every lower entry has a derivative
    np.testing.assert_allclose(g_unrolled[lower], g_lapack[lower], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("shape", [(1, 1), (1, 3), (3, 1)])
def test_the_one_entry_and_one_column_kernels_equal_lapacks(rng, shape):
    """The unrolled kernels' shortcuts for a one-coordinate system (1 x 1 factor, one
    column: a product is a broadcast, B B^T an outer product) equal the LAPACK kernels'
    values and reverse-mode derivatives, NaN where a 1 x 1 M is not positive."""
    m, k = shape
    A, X, x = (jnp.asarray(rng.standard_normal(s)) for s in ((m, 1), (1, k), (1,)))
    M = jnp.asarray([[2.5]])
    ops_of = lambda ops: (
        ops.cholesky(M),
        ops.matmul(A, X),
        ops.matmul(A, x),
        ops.gram(A),
        ops.norm(x),
        ops.norm(X),
    )
    for got, want in zip(ops_of(UNROLLED), ops_of(LAPACK)):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14)
    assert np.isnan(UNROLLED.cholesky(jnp.asarray([[-1.0]]))).all()

    def grads(ops):
        parts = lambda M, A, X: (ops.cholesky(M), ops.matmul(A, X), ops.gram(A), ops.norm(X))
        loss = lambda *args: sum(jnp.sum(jnp.sin(o)) for o in parts(*args))
        return jax.grad(loss, argnums=(0, 1, 2))(M, A, X)

    for g_u, g_l in zip(grads(UNROLLED), grads(LAPACK)):
        np.testing.assert_allclose(g_u, g_l, rtol=1e-12, atol=1e-14)


def test_one_coordinate_uk_solves_of_both_kernels_agree(rng):
    """A UK solve of one coordinate under one and under two (redundant) rows: the
    unrolled kernels' shortcuts give LAPACK's acceleration and Jacobians, and the
    reference's acceleration."""
    M = jnp.asarray([[1.7]])
    Q = jnp.asarray([-3.0])
    C = jnp.asarray([0.4])
    for A, b in ((jnp.asarray([[2.0]]), jnp.asarray([1.0])),
                 (jnp.asarray([[2.0], [4.0]]), jnp.asarray([1.0, 2.0]))):  # fmt: skip
        want = uk_reference(np.asarray(M), np.asarray(Q), np.asarray(A), np.asarray(b))
        jac = lambda k: jax.jacfwd(
            lambda *x: ukjax.udwadia_kalaba(*x, uk_solver=SOLVERS[k]), argnums=(0, 1, 2, 3)
        )(M, Q, A, b)
        for k in ("unrolled", "lapack"):
            got = ukjax.udwadia_kalaba(M, Q, A, b, uk_solver=SOLVERS[k])
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
            assert np.isfinite(ukjax.udwadia_kalaba(M, Q, A, b, C, uk_solver=SOLVERS[k])).all()
        for J_u, J_l in zip(jac("unrolled"), jac("lapack")):
            assert np.all(np.isfinite(J_u))
            np.testing.assert_allclose(J_u, J_l, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("n", [0, 1, 2, 5])
def test_diagonal_is_numpys_without_a_gather_or_a_branch(rng, n):
    """`diagonal` (one strided slice) equals NumPy's diagonal in value, its derivative is
    the identity on the diagonal, and its program holds neither the gather nor the
    per-platform branch of `jnp.diagonal`; a stack of matrices or a rectangular one is
    `jnp.diagonal`'s of the last two axes."""
    X = rng.standard_normal((n, n))
    np.testing.assert_array_equal(diagonal(jnp.asarray(X)), np.diagonal(X))
    used = primitives(diagonal, jnp.asarray(X))
    assert not used & {"gather", "cond", "platform_index"}, used
    if n:
        W = rng.standard_normal(n)
        g = jax.grad(lambda X: jnp.sum(W * diagonal(X)))(jnp.asarray(X))
        np.testing.assert_array_equal(g, np.diag(W))
    for Y in (rng.standard_normal((3, n, n)), rng.standard_normal((n + 1, n + 2))):
        np.testing.assert_array_equal(diagonal(jnp.asarray(Y)), np.diagonal(Y, axis1=-2, axis2=-1))


def test_cholesky_method_is_wrong_for_redundant_rows_but_auto_is_exact(rng):
    """The documented limitation of the fast path, and that the default falls back."""
    n = 4
    M = random_spd(rng, n)
    Q = rng.standard_normal(n)
    A, b = random_constraints(rng, 2, n, 2)
    A2, b2 = np.vstack([A, A]), np.concatenate([b, b])
    ref = uk_reference(M, Q, A2, b2)
    np.testing.assert_allclose(ukjax.udwadia_kalaba(M, Q, A2, b2), ref, rtol=1e-9, atol=1e-9)
    fast = ukjax.udwadia_kalaba(M, Q, A2, b2, uk_solver=ukjax.Cholesky(), check=False)
    assert not np.allclose(fast, ref, rtol=1e-6)


def test_no_constraints_is_unconstrained_motion(rng):
    M = random_spd(rng, 4)
    Q = rng.standard_normal(4)
    qdd = ukjax.udwadia_kalaba(M, Q, np.zeros((0, 4)), np.zeros(0))
    np.testing.assert_allclose(qdd, np.linalg.solve(M, Q), rtol=1e-12)
    C = rng.standard_normal(4)
    qdd = ukjax.udwadia_kalaba(M, Q, np.zeros((0, 4)), np.zeros(0), C)
    np.testing.assert_allclose(qdd, np.linalg.solve(M, Q + C), rtol=1e-12)


def test_identity_mass_reduces_to_plain_pseudoinverse(rng):
    """For M = m I: qdd = a + A^+ (b - A a) (seed 000 eqs 46-47)."""
    A, b = random_constraints(rng, 3, 5, 2)
    Q = rng.standard_normal(5)
    m = 2.5
    qdd = ukjax.udwadia_kalaba(m * np.eye(5), Q, A, b)
    a = Q / m
    np.testing.assert_allclose(qdd, a + np.linalg.pinv(A) @ (b - A @ a), rtol=1e-9, atol=1e-9)


def test_particle_on_a_line(rng):
    """Seed 000 eqs 19-22: y = z = 0 leaves m x'' = F_x and F^c = (0, -F_y, -F_z)."""
    m = 1.7
    F = rng.standard_normal(3)
    A = np.array([[0.0, 1, 0], [0, 0, 1]])
    qdd = ukjax.udwadia_kalaba(m * np.eye(3), F, A, np.zeros(2))
    np.testing.assert_allclose(qdd, [F[0] / m, 0, 0], atol=1e-14)
    Qi, _ = ukjax.constraint_forces(m * np.eye(3), F, A, np.zeros(2))
    np.testing.assert_allclose(Qi, [0, -F[1], -F[2]], atol=1e-14)


def test_float32_works(rng):
    with jax.enable_x64(False):
        M = random_spd(rng, 5, cond=10.0)
        Q = rng.standard_normal(5)
        A, b = random_constraints(rng, 3, 5, 2)
        qdd = ukjax.udwadia_kalaba(
            jnp.asarray(M, jnp.float32),
            jnp.asarray(Q, jnp.float32),
            jnp.asarray(A, jnp.float32),
            jnp.asarray(b, jnp.float32),
        )
        assert qdd.dtype == jnp.float32
        ref = uk_reference(M, Q, A, b)
        np.testing.assert_allclose(qdd, ref, rtol=2e-4, atol=2e-4 * (1 + np.abs(ref).max()))


def test_jit_and_vmap(rng):
    n, m, batch = 4, 2, 16
    Ms = np.stack([random_spd(rng, n) for _ in range(batch)])
    Qs = rng.standard_normal((batch, n))
    As, bs = zip(*[random_constraints(rng, m, n, 1 + i % 2) for i in range(batch)])
    As, bs = np.stack(As), np.stack(bs)
    out = jax.jit(jax.vmap(ukjax.udwadia_kalaba))(Ms, Qs, As, bs)
    for i in range(batch):
        np.testing.assert_allclose(
            out[i], uk_reference(Ms[i], Qs[i], As[i], bs[i]), rtol=1e-8, atol=1e-8
        )


def test_the_kernels_follow_the_larger_of_M_and_the_gram_matrix():
    """A few coordinates under many constraint rows (a box's eight frictional corners: 25
    rows on 7 coordinates) factor the m x m Gram matrix with LAPACK, not unrolled: unrolled
    it was tens of thousands of scalar operations per solve and minutes of compilation. The
    same coordinates under few rows keep the unrolled kernels."""
    rng = np.random.default_rng(0)
    n = 3
    M = jnp.eye(n) * 2.0
    Q = jnp.ones(n)
    for m, lapack in ((4, False), (12, True)):
        A = jnp.asarray(rng.standard_normal((m, n)))
        b = A @ jnp.ones(n)  # consistent: the rows are redundant but agree
        used = primitives(lambda A, b: ukjax.uk_terms(M, Q, A, b), A, b)
        assert ("cholesky" in used) == lapack, m
        terms = ukjax.uk_terms(M, Q, A, b)
        np.testing.assert_allclose(A @ terms.qdd, b, atol=1e-9)


@pytest.mark.parametrize(
    "kernels, svd",
    [
        (ukjax.UnrolledKernels(), True),
        (ukjax.LapackKernels(), False),
        (ukjax.AutoKernels(), True),  # six coordinates: unrolled, as in a run's stages
        (ukjax.AutoKernels().at_events(), False),  # the event code: LAPACK from n = 3
        (ukjax.StructuredKernels(), True),
    ],
)
def test_the_kernels_solve_the_column_multipliers_at_minimum_norm(kernels, svd):
    """A frictional solve's contact multipliers (the k columns of forces F in the range of
    A^T) are the minimum-norm solutions of A^T L = F whichever strategy solves them: a zero
    row takes nothing and two repeated rows share equally (numpy's pinv as the reference).
    The unrolled kernels take one SVD; LAPACK kernels, which the event code uses, no SVD
    (three batched SVDs at once can deadlock jaxlib 0.10's thread pool,
    tests/lapack_concurrency.py)."""
    rng = np.random.default_rng(3)
    row = rng.standard_normal(6)
    A = np.stack([rng.standard_normal(6), np.zeros(6), row, row])  # a zero and a repeated row
    F = A.T @ rng.standard_normal((4, 3))
    lam = jax.jit(kernels.column_multipliers)(jnp.asarray(A), jnp.asarray(F))
    np.testing.assert_allclose(lam, np.linalg.pinv(A.T) @ F, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(lam[1], 0.0, atol=1e-12)
    np.testing.assert_allclose(lam[2], lam[3], rtol=1e-9)
    used = primitives(kernels.column_multipliers, jnp.asarray(A), jnp.asarray(F))
    assert ("svd" in used) == svd


def test_the_projection_chooses_its_kernels_as_the_uk_solve_does():
    """The projection's Newton correction factors the rows' Gram matrix too: ten redundant
    copies of a pendulum's length constraint on two coordinates go to LAPACK, one stays
    unrolled; both land on the circle."""

    class Repeated(ukjax.System):
        copies: int

        def mass_matrix(self, t, q):
            return jnp.eye(2)

        def holonomic(self, t, q):
            return jnp.full(self.copies, q @ q - 1.0)

    q0, qd0 = jnp.array([1.1, 0.2]), jnp.array([0.3, 0.1])
    for copies, lapack in ((1, False), (10, True)):
        system = Repeated(copies)
        project = lambda q, v: ukjax.project_initial_conditions(system, 0.0, q, v)
        assert ("cholesky" in primitives(project, q0, qd0)) == lapack, copies
        q, qd = project(q0, qd0)
        np.testing.assert_allclose(q @ q, 1.0, atol=1e-12)
        np.testing.assert_allclose(q @ qd, 0.0, atol=1e-12)
