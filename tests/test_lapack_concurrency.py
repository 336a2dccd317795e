"""ukjax's batched programs never run more than two of jaxlib's splitting LAPACK calls at
once, the condition under which jaxlib 0.10's batched LAPACK kernels cannot deadlock XLA's
thread pool (tests/lapack_concurrency.py). The programs are compiled, never run."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from lapack_concurrency import concurrent_lapack

import ukjax
from ukjax.systems import BallsOnTable, BouncingBall


jax.config.update("jax_enable_x64", True)

SAFE = 2  # a pool of P >= 2 threads deadlocks only with P + 1 calls blocked at once


def compiled(fn, *args) -> str:
    return jax.jit(fn).lower(*args).compile().as_text()


def factorisations(n: int, k: int, chained: bool):
    """k batched n x n Cholesky factorisations per loop step: independent, or each one
    fed by the one before."""
    mats = [jnp.asarray(np.eye(n) * (j + 2) + np.zeros((1024, n, n))) for j in range(k)]

    def body(_, acc):
        out, prev = [], 0.0
        for j, m in enumerate(mats):
            L = jnp.linalg.cholesky(m + acc[j] + prev)
            out.append(1e-3 * L)
            prev = 1e-3 * L if chained else 0.0
        return out

    return lambda: jax.lax.fori_loop(0, 5, body, [jnp.zeros_like(m) for m in mats])


def test_the_bound_counts_independent_batched_factorisations():
    """The bound sees three independent splitting calls (the program that hangs on the
    2-core box), one where they are chained, none where the batch is too cheap to split."""
    assert concurrent_lapack(compiled(factorisations(32, 3, chained=False))) == 3
    assert concurrent_lapack(compiled(factorisations(32, 2, chained=False))) == 2
    assert concurrent_lapack(compiled(factorisations(32, 3, chained=True))) == 1
    assert concurrent_lapack(compiled(factorisations(6, 3, chained=False))) == 0


def _bounce_batch():
    ball = BouncingBall()
    ts = jnp.linspace(0.0, 2.0, 201)
    heights = jnp.linspace(0.5, 2.0, 1024)
    law = ukjax.Impact(0.8)
    one = lambda h: ukjax.simulate(ball, h[None], jnp.zeros(1), ts, contact=law, throw=False).q
    return jax.vmap(one), heights


def _friction_batch():
    rng = np.random.default_rng(0)
    ball = BallsOnTable(count=1, mu_static=0.3, mu_kinetic=0.2)
    B = 1024
    slide, spin = rng.uniform(-1, 1, (B, 2)), rng.uniform(-50, 50, (B, 3))
    qd0 = jnp.asarray(np.c_[slide, np.zeros(B), spin])
    q0 = jnp.asarray(np.tile([0.0, 0.0, ball.radius, 0.0, 0.0, 0.0], (B, 1)))
    ts = jnp.linspace(0.0, 0.8, 11)
    fn = lambda q, qd: ukjax.simulate(ball, q, qd, ts, friction=ukjax.Coulomb(), throw=False)
    return jax.vmap(fn), q0, qd0


def test_a_batch_of_bouncing_balls_is_safe():
    fn, heights = _bounce_batch()
    assert concurrent_lapack(compiled(fn, heights)) <= SAFE


@pytest.mark.slow
def test_a_batch_of_balls_with_friction_is_safe():
    """The frictional batch of `benchmarks/revisions.py --cases friction`. With its event
    code's column multipliers by SVDs (`frictional_solve` before stop 89; now the event
    code's LAPACK kernels solve them without, `AbstractKernels.column_multipliers`) three
    independent batched SVDs sat in one event's code: bound 3. That revision did not hang
    in 11 processes, but with the event code's `cond` made smaller it hung in 4 of 9
    (stop 88)."""
    fn, q0, qd0 = _friction_batch()
    assert concurrent_lapack(compiled(fn, q0, qd0)) <= SAFE
