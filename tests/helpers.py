"""Independent NumPy references and random problem generators for the tests."""

import numpy as np


def random_spd(rng, n, cond=1e3):
    """A random SPD matrix with condition number about `cond` (some eigenvalues repeat)."""
    Qm, _ = np.linalg.qr(rng.standard_normal((n, n)))
    eig = np.exp(rng.uniform(0, np.log(cond), n))
    if n >= 3:
        eig[1] = eig[0]  # a repeated eigenvalue: what breaks eigh/sqrtm gradients
    return (Qm * eig) @ Qm.T


def random_constraints(rng, m, n, rank):
    """A random (m, n) matrix of the given rank (rank <= min(m, n)), b in its range."""
    A = rng.standard_normal((m, rank)) @ rng.standard_normal((rank, n))
    b = A @ rng.standard_normal(n)
    return A, b


def sqrtm_inv_numpy(M):
    w, V = np.linalg.eigh(M)
    return (V / np.sqrt(w)) @ V.T


def uk_reference(M, Q, A, b, C=None):
    """Dense reference: qdd = a + M^{-1/2} (A M^{-1/2})^+ (b - A a) + (I - A_M^+ A) M^{-1} C."""
    Mih = sqrtm_inv_numpy(M)
    a = np.linalg.solve(M, Q)
    AMp = Mih @ np.linalg.pinv(A @ Mih, rcond=1e-10)  # A_M^+
    qdd = a + AMp @ (b - A @ a)
    if C is not None:
        qdd = qdd + (np.eye(len(Q)) - AMp @ A) @ np.linalg.solve(M, C)
    return qdd


def null_space(A, tol=1e-10):
    U, s, Vt = np.linalg.svd(A)
    rank = int(np.sum(s > tol * max(s.max(), 1e-300)))
    return Vt[rank:].T  # (n, n - rank)
