r"""`ukjax._linalg.small_solve`: the written-out Gaussian elimination with partial pivoting
of the contact code's k-by-k systems, against NumPy's LAPACK solve and against the
derivative of the inverse, $d(A^{-1}b) = A^{-1}(db - dA\,x)$, written here."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ukjax._linalg import MAX_ELIMINATED, small_solve


jax.config.update("jax_enable_x64", True)


@pytest.mark.parametrize("k", range(1, MAX_ELIMINATED + 2))
def test_values_match_lapack_including_row_exchanges(k):
    rng = np.random.default_rng(k)
    solve = jax.jit(small_solve)
    for trial in range(50):
        A, b = rng.normal(size=(k, k)), rng.normal(size=k)
        if k > 1 and trial % 2:
            A[0, 0] = 0.0  # no elimination without a row exchange
        if k > 2 and trial % 3 == 0:
            A[:, 0] *= 1e-6  # the first column small: pivots decide the accuracy
        x = np.asarray(solve(jnp.asarray(A), jnp.asarray(b)))
        reference = np.linalg.solve(A, b)
        # backward stable: the error is round-off times the condition number
        bound = 50 * k * np.finfo(float).eps * np.linalg.cond(A) * np.max(np.abs(reference))
        np.testing.assert_allclose(x, reference, rtol=0, atol=bound)


def test_derivatives_are_those_of_the_inverse():
    A = jnp.array([[0.0, 2.0, 1.0], [1.0, 1.0, 0.0], [3.0, -1.0, 2.0]])  # a row exchange
    b = jnp.array([2.0, 3.0, -1.0])
    dA = jnp.array([[0.3, -0.2, 0.1], [0.0, 0.5, -0.4], [0.2, 0.1, 0.0]])
    db = jnp.array([0.1, -0.7, 0.2])
    x, dx = jax.jvp(small_solve, (A, b), (dA, db))
    x_np = np.linalg.solve(np.asarray(A), np.asarray(b))
    np.testing.assert_allclose(x, x_np, rtol=1e-14)
    expected = np.linalg.solve(np.asarray(A), np.asarray(db) - np.asarray(dA) @ x_np)
    np.testing.assert_allclose(dx, expected, rtol=1e-13)
    # reverse mode: the transpose, A^{-T} applied to the cotangent
    ct = jnp.array([1.0, -2.0, 0.5])
    gA, gb = jax.grad(lambda A, b: small_solve(A, b) @ ct, argnums=(0, 1))(A, b)
    lam = np.linalg.solve(np.asarray(A).T, np.asarray(ct))
    np.testing.assert_allclose(gb, lam, rtol=1e-13)
    np.testing.assert_allclose(gA, -np.outer(lam, x_np), rtol=1e-13, atol=1e-15)


def test_under_vmap_and_in_float32():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(64, 3, 3)) + 3 * np.eye(3)
    b = rng.normal(size=(64, 3))
    x = jax.vmap(small_solve)(jnp.asarray(A, jnp.float32), jnp.asarray(b, jnp.float32))
    assert x.dtype == jnp.float32
    np.testing.assert_allclose(x, np.linalg.solve(A, b[..., None])[..., 0], rtol=2e-5, atol=2e-5)
