"""The derivative rule of the regularised UK solve (ukjax._uk_regularized): forward and
reverse mode against autodiff of an independent closed-form implementation written here
(explicit inverses, no Cholesky), against central differences, at redundant rows, to second
order, under vmap and in float32."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ukjax
from ukjax._kernels import LAPACK, UNROLLED
from ukjax._uk_regularized import regularized_uk


TAU, K = 1e-5, 3


def closed_form(M, Q, A, b, C, tau=TAU, K=K):
    r"""The regularised UK solve by its closed form (module docstring of
    ukjax._uk_regularized): $W = DS(H)D$, $S = \sum_k \tau^{2k}H^{-(k+1)}$ with explicit
    inverses; returns (qdd, a, Qc_ideal, Qc_nonideal)."""
    n, m = M.shape[0], A.shape[0]
    Minv = jnp.linalg.inv(0.5 * (M + M.T))
    Q = jnp.zeros(n, M.dtype) if Q is None else Q
    a = Minv @ Q
    G = A @ Minv @ A.T
    G = 0.5 * (G + G.T)
    d = 1.0 / jnp.sqrt(jnp.diagonal(G))
    H = d[:, None] * G * d[None, :] + tau**2 * jnp.eye(m, dtype=M.dtype)
    Hinv = jnp.linalg.inv(H)
    S = sum(tau ** (2 * k) * jnp.linalg.matrix_power(Hinv, k + 1) for k in range(K + 1))
    W = d[:, None] * S * d[None, :]
    lam_e = W @ (b - A @ a)
    if C is None:
        return a + Minv @ A.T @ lam_e, a, A.T @ lam_e, jnp.zeros(n, M.dtype)
    lam_c = W @ (A @ Minv @ C)
    qdd = Minv @ (Q + C + A.T @ (lam_e - lam_c))
    return qdd, a, A.T @ lam_e, C - A.T @ lam_c


def rule(ops):
    return lambda M, Q, A, b, C: tuple(regularized_uk(ops, TAU, K, M, Q, A, b, C))[:4]


def jvp(f, args, t):
    """jax.jvp of f, compiled (eager autodiff of these small solves spends its time
    dispatching op by op)."""
    return jax.jit(lambda a, tt: jax.jvp(f, a, tt))(args, t)


def vjp(f, args, cts):
    return jax.jit(lambda a, c: jax.vjp(f, *a)[1](c))(args, cts)


def problem(rng, n, m, with_C=True, redundant=False, with_Q=True):
    X = rng.normal(size=(n, n))
    M = X @ X.T + n * np.eye(n)
    A = rng.normal(size=(m, n))
    b = rng.normal(size=m)
    if redundant:  # the last row twice the first, consistently
        A[-1], b[-1] = 2.0 * A[0], 2.0 * b[0]
    Q = rng.normal(size=n) if with_Q else None
    C = rng.normal(size=n) if with_C else None
    return [None if v is None else jnp.asarray(v) for v in (M, Q, A, b, C)]


def tangents(rng, args, redundant=False):
    t = [None if v is None else jnp.asarray(rng.normal(size=v.shape)) for v in args]
    t[0] = t[0] + t[0].T  # a symmetric dM
    if redundant:  # keep the redundancy
        t[2] = t[2].at[-1].set(2.0 * t[2][0])
        t[3] = t[3].at[-1].set(2.0 * t[3][0])
    return t


def close(x, y, rtol):
    scale = max(float(jnp.max(jnp.abs(y))), 1.0)
    assert float(jnp.max(jnp.abs(x - y))) <= rtol * scale, (x, y)


CASES = [  # kernels, n, m, non-ideal C, force Q (Q None: the projection's steps)
    (LAPACK, 10, 5, True, True),
    pytest.param(LAPACK, 4, 2, False, True, marks=pytest.mark.slow),
    pytest.param(LAPACK, 6, 6, True, True, marks=pytest.mark.slow),  # m = n: no Qc_nonideal
    pytest.param(UNROLLED, 4, 2, True, True, marks=pytest.mark.slow),
    pytest.param(UNROLLED, 6, 6, False, True, marks=pytest.mark.slow),
    (UNROLLED, 5, 3, False, False),
]


@pytest.mark.parametrize("ops,n,m,with_C,with_Q", CASES)
def test_rule_matches_the_closed_form_in_forward_and_reverse_mode(rng, ops, n, m, with_C, with_Q):
    args = problem(rng, n, m, with_C, with_Q=with_Q)
    new, ref = rule(ops), lambda *a: closed_form(*a)
    t = tangents(rng, args)
    out_new, jvp_new = jvp(new, args, t)
    out_ref, jvp_ref = jvp(ref, args, t)
    for x, y in zip(out_new, out_ref):
        close(x, y, 1e-9)
    for x, y in zip(jvp_new, jvp_ref):
        close(x, y, 1e-8)
    cts = tuple(jnp.asarray(rng.normal(size=n)) for _ in range(4))
    g_new = vjp(new, args, cts)
    g_ref = vjp(ref, args, cts)
    for x, y in zip(g_new, g_ref):
        if y is not None:
            close(x, y, 1e-8)


@pytest.mark.parametrize(
    "ops", [LAPACK, pytest.param(UNROLLED, marks=pytest.mark.slow)], ids=["lapack", "unrolled"]
)
def test_rule_at_redundant_rows_matches_the_solve_without_them_and_central_differences(rng, ops):
    """A redundant row, perturbed so that it stays redundant (what a system with a
    redundant constraint does along its motion). The regularised solve then equals the
    exact UK solve of the independent rows (its filter is 1 - (tau/sigma)^8 on the others)
    and so do their derivatives: the reference is the closed form without the redundant
    row and without regularisation. (The closed form with the row kept inverts H, of
    condition 1/tau^2, and loses 1e-5 there.) Central differences of the rule's own
    primal agree too."""
    args = problem(rng, 6, 4, with_C=True, redundant=True)
    t = tangents(rng, args, redundant=True)
    new = rule(ops)
    drop = lambda M, Q, A, b, C: closed_form(M, Q, A[:-1], b[:-1], C, tau=0.0, K=0)
    out_new, jvp_new = jvp(new, args, t)
    out_ref, jvp_ref = jvp(drop, args, t)
    h = 1e-6
    move = lambda s: [v + s * dv if v is not None else None for v, dv in zip(args, t)]
    shifted = jax.jit(lambda s: new(*move(s)))
    plus, minus = shifted(h), shifted(-h)
    for x, y, dx, dy, p, q in zip(out_new, out_ref, jvp_new, jvp_ref, plus, minus):
        close(x, y, 1e-10)
        close(dx, dy, 1e-9)
        close(dx, (p - q) / (2 * h), 1e-7)
    cts = tuple(jnp.asarray(rng.normal(size=6)) for _ in range(4))
    # reverse mode, contracted with the redundancy-preserving tangent
    inner = lambda g, tt: sum(jnp.sum(a * b) for a, b in zip(g, tt) if b is not None)
    close(inner(vjp(new, args, cts), t), inner(vjp(drop, args, cts), t), 1e-9)


@pytest.mark.slow
def test_second_derivatives_through_the_rule(rng):
    """The rule is differentiated again by autodiff (jax.hessian: forward over reverse)."""
    M, Q, A, b, C = problem(rng, 5, 3)
    w = jnp.asarray(rng.normal(size=5))

    def f(theta, solve):
        Mt = M * (1.0 + 0.1 * jnp.sin(theta[0]))
        At = A.at[0, 0].add(theta[1])
        return jnp.dot(w, solve(Mt, Q * theta[2], At, b, C)[0])

    theta = jnp.array([0.3, -0.2, 1.1])
    H_new = jax.jit(jax.hessian(lambda th: f(th, rule(LAPACK))))(theta)
    H_ref = jax.jit(jax.hessian(lambda th: f(th, closed_form)))(theta)
    close(H_new, H_ref, 1e-7)


@pytest.mark.slow
def test_udwadia_kalaba_gradients_under_vmap_equal_single_ones(rng):
    M, Q, A, b, _ = problem(rng, 4, 2, with_C=False)
    scales = jnp.linspace(0.5, 2.0, 3)

    def loss(s):
        return jnp.sum(ukjax.udwadia_kalaba(M * s, Q, A, b, check=False) ** 2)

    batched = jax.jit(jax.vmap(jax.grad(loss)))(scales)
    single = jnp.stack([jax.jit(jax.grad(loss))(s) for s in scales])
    np.testing.assert_allclose(batched, single, rtol=1e-12)
    ref = jax.vmap(jax.grad(lambda s: jnp.sum(closed_form(M * s, Q, A, b, None)[0] ** 2)))(scales)
    np.testing.assert_allclose(batched, ref, rtol=1e-8)


def test_rule_in_float32(rng):
    """float32: the default tau is 3.5e-3 there; rule and closed form agree to 1e-4."""
    args32 = [None if v is None else v.astype(jnp.float32) for v in problem(rng, 6, 3)]
    tau = ukjax.Regularized().tau(jnp.float32)
    new = lambda *a: tuple(regularized_uk(UNROLLED, tau, K, *a))[:4]
    t = [None if v is None else v.astype(jnp.float32) for v in tangents(rng, args32)]
    _, jvp_new = jvp(new, args32, t)
    _, jvp_ref = jvp(lambda *a: closed_form(*a, tau=tau), args32, t)
    for x, y in zip(jvp_new, jvp_ref):
        assert x.dtype == jnp.float32
        close(x, y, 1e-4)
