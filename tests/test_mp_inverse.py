"""Seed case `mp_inverse_identities` (SEED_CASES §2.1): the Moore-Penrose and M-weighted
inverses against NumPy references and the closed forms of seeds 000, 002 and 003."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ukjax
from references import random_constraints, random_spd, sqrtm_inv_numpy


SHAPES = [(1, 4), (3, 5, 2), (4, 4, 2), (5, 3, 3), (4, 6, 1), (6, 6, 6)]


def _matrix(rng, shape):
    if len(shape) == 2:  # a single row
        return rng.standard_normal(shape)
    m, n, rank = shape
    A, _ = random_constraints(rng, m, n, rank)
    return A


def _pinv(A):
    return np.asarray(ukjax.weighted_pinv(jnp.asarray(A)))


@pytest.mark.parametrize("shape", SHAPES)
def test_penrose_conditions_and_uniqueness(rng, shape):
    A = _matrix(rng, shape)
    G = _pinv(A)
    scale = np.linalg.norm(A) * np.linalg.norm(G)
    assert np.linalg.norm(A @ G @ A - A) <= 1e-12 * scale * np.linalg.norm(A)
    assert np.linalg.norm(G @ A @ G - G) <= 1e-12 * scale * np.linalg.norm(G)
    assert np.linalg.norm(A @ G - (A @ G).T) <= 1e-12 * scale
    assert np.linalg.norm(G @ A - (G @ A).T) <= 1e-12 * scale
    # uniqueness: NumPy's independent SVD-based pinv is the same matrix
    np.testing.assert_allclose(G, np.linalg.pinv(A, rcond=1e-10), atol=1e-11 * np.abs(G).max())


def test_svd_construction_s2_eq_31(rng):
    A, _ = random_constraints(rng, 4, 6, 2)
    U, d, Vt = np.linalg.svd(A, full_matrices=False)
    r = 2  # U, V: orthonormal columns p x r and q x r (S2 eq 30, corrected)
    W_plus = Vt[:r].T @ np.diag(1 / d[:r]) @ U[:, :r].T
    np.testing.assert_allclose(_pinv(A), W_plus, atol=1e-12 * np.abs(W_plus).max())


def test_closed_forms(rng):
    A, _ = random_constraints(rng, 4, 5, 3)
    c = -2.7
    np.testing.assert_allclose(_pinv(c * A), _pinv(A) / c, rtol=1e-10, atol=1e-13)
    a = rng.standard_normal((1, 5))  # row vector: a^+ = a^T / (a a^T)
    np.testing.assert_allclose(_pinv(a), a.T / (a @ a.T), rtol=1e-12)
    bcol = rng.standard_normal((5, 1))  # column vector: b^+ = b^T / (b^T b)
    np.testing.assert_allclose(_pinv(bcol), bcol.T / (bcol.T @ bcol), rtol=1e-12)
    aa = a.T @ a  # (a^T a)^+ = a^T a / (a a^T)^2
    np.testing.assert_allclose(_pinv(aa), aa / (a @ a.T) ** 2, rtol=1e-10, atol=1e-14)
    B, C = _matrix(rng, (2, 3, 2)), _matrix(rng, (3, 2, 1))
    D = np.block([[B, np.zeros((2, 2))], [np.zeros((3, 3)), C]])
    expect = np.block([[_pinv(B), np.zeros((3, 3))], [np.zeros((2, 2)), _pinv(C)]])
    np.testing.assert_allclose(_pinv(D), expect, atol=1e-12)
    Ap = _pinv(A)
    np.testing.assert_allclose(A.T @ _pinv(A @ A.T), Ap, atol=1e-10 * np.abs(Ap).max())
    # SEED_CASES writes (A A^T)^+ A^T, which only type-checks for square A: the identity is
    # (A^T A)^+ A^T
    np.testing.assert_allclose(_pinv(A.T @ A) @ A.T, Ap, atol=1e-10 * np.abs(Ap).max())


def test_proportional_and_zero_rows(rng):
    row = rng.standard_normal(4)
    A = np.stack([row, -3.0 * row, np.zeros(4), 0.5 * row])
    G = _pinv(A)
    # zero row -> zero column, to round-off: exact zeros on XLA:CPU, 4e-18 on an H200 (its
    # reductions sum in another order)
    np.testing.assert_allclose(G[:, 2], 0.0, atol=4 * np.finfo(float).eps * np.abs(G).max())
    np.testing.assert_allclose(G[:, 1], -3.0 * G[:, 0], rtol=1e-12)
    np.testing.assert_allclose(G[:, 3], 0.5 * G[:, 0], rtol=1e-12)


def test_consistency_and_general_solution(rng):
    A, b = random_constraints(rng, 4, 6, 2)  # b in the range: consistent
    G = _pinv(A)
    np.testing.assert_allclose(A @ G @ b, b, atol=1e-12 * np.abs(b).max())  # S0 eq 14
    for _ in range(3):  # every x = A^+ b + (I - A^+ A) h solves Ax = b (S0 eq 17)
        x = G @ b + (np.eye(6) - G @ A) @ rng.standard_normal(6)
        np.testing.assert_allclose(A @ x, b, atol=1e-11 * np.abs(b).max())
    # and every solution has that form: h = x itself reproduces x
    x = np.linalg.lstsq(A, b, rcond=None)[0] + (np.eye(6) - G @ A) @ rng.standard_normal(6)
    np.testing.assert_allclose(G @ b + (np.eye(6) - G @ A) @ x, x, atol=1e-11)
    b_bad = b + rng.standard_normal(4)  # generic b is outside the rank-2 range
    assert np.linalg.norm(A @ G @ b_bad - b_bad) > 1e-3 * np.linalg.norm(b_bad)


@pytest.mark.parametrize("shape", SHAPES[1:])
def test_m_weighted_inverse(rng, shape):
    A = _matrix(rng, shape)
    m, n = A.shape
    M = random_spd(rng, n, cond=1e2)
    G = np.asarray(ukjax.weighted_pinv(jnp.asarray(A), jnp.asarray(M)))
    tol = 1e-10 * np.abs(G).max() * max(np.abs(A).max(), 1.0) ** 2
    np.testing.assert_allclose(A @ G @ A, A, atol=tol)  # 13a
    np.testing.assert_allclose(G @ A @ G, G, atol=tol * np.abs(G).max())  # 13b
    np.testing.assert_allclose(A @ G, (A @ G).T, atol=tol)  # 13c
    Minv = np.linalg.inv(M)
    np.testing.assert_allclose((G @ A).T, M @ G @ A @ Minv, atol=tol * np.linalg.cond(M))  # 13d
    # definition with the symmetric square root
    Mih = sqrtm_inv_numpy(M)
    np.testing.assert_allclose(G, Mih @ np.linalg.pinv(A @ Mih, rcond=1e-10), atol=tol)
    # eigen construction (CAP-06): A M^-1 A^T = W Lambda^2 W^T, V = A^T W Lambda^-1
    lam2, W = np.linalg.eigh(A @ Minv @ A.T)
    keep = lam2 > 1e-10 * lam2.max()
    W, lam = W[:, keep], np.sqrt(lam2[keep])
    V = A.T @ W / lam
    np.testing.assert_allclose(V.T @ Minv @ V, np.eye(len(lam)), atol=1e-10)
    np.testing.assert_allclose(G, Minv @ V @ np.diag(1 / lam) @ W.T, atol=tol)
    np.testing.assert_allclose(
        M @ (np.eye(n) - G @ A) @ Minv, np.eye(n) - V @ V.T @ Minv, atol=tol * 10
    )
    if np.linalg.matrix_rank(A) == n:
        return  # no null space: the solution is unique
    # minimum M-norm least-squares solution
    x = G @ (A @ rng.standard_normal(n))
    z = (np.eye(n) - G @ A) @ rng.standard_normal(n)  # any null-space move
    assert x @ M @ x < (x + z) @ M @ (x + z)
    np.testing.assert_allclose(x @ M @ z, 0.0, atol=1e-10 * np.sqrt((x @ M @ x) * (z @ M @ z)))


def test_identity_weight_and_bad_shapes(rng):
    A = _matrix(rng, (3, 4, 2))
    np.testing.assert_allclose(np.asarray(ukjax.weighted_pinv(A, jnp.eye(4))), _pinv(A), atol=1e-12)
    with pytest.raises(ValueError, match="must be a matrix"):
        ukjax.weighted_pinv(jnp.ones(3))
    with pytest.raises(ValueError, match=r"must be \(n, n\)"):
        ukjax.weighted_pinv(jnp.ones((2, 3)), jnp.eye(2))


def test_weighted_pinv_gradients_at_rank_deficiency(rng):
    """Finite, FD-matching derivatives with two redundant rows and a repeated eigenvalue of M."""
    left, right = rng.standard_normal((4, 2)), rng.standard_normal((2, 5))
    M = jnp.asarray(random_spd(rng, 5, cond=10.0))  # has a repeated eigenvalue
    dA = rng.standard_normal((2, 5))
    w = rng.standard_normal((5, 4))

    def f(s, sm):  # A = left @ (right + s dA) keeps rank 2 along the path
        A = jnp.asarray(left) @ (jnp.asarray(right) + s * jnp.asarray(dA))
        return jnp.sum(w * ukjax.weighted_pinv(A, M + sm * jnp.eye(5)))

    g = jax.grad(f, argnums=(0, 1))(0.0, 0.0)
    h = 1e-6
    fd = ((f(h, 0.0) - f(-h, 0.0)) / (2 * h), (f(0.0, h) - f(0.0, -h)) / (2 * h))
    for gi, fi in zip(g, fd):
        assert np.isfinite(gi)
        np.testing.assert_allclose(gi, fi, rtol=1e-6, atol=1e-8)
