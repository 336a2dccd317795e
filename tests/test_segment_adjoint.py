"""The replayed loop over a hybrid run's segments (ukjax._segment_adjoint): its reverse-mode
derivative against the same loop unrolled in Python and differentiated by JAX, with
members that stop after different numbers of iterations under vmap. (Through whole
hybrid runs: tests/test_hybrid.py, test_friction.py, test_latches.py, against finite
differences and closed forms.)"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ukjax._segment_adjoint import replayed_while


jax.config.update("jax_enable_x64", True)

SAVES = 6


def _body(a, c):
    """One 'segment': x <- a sin(x) + x^2 / 4, written into the saves at index i (the
    saves and the log are only written into), a counter of the iterations left."""
    x, left, i, saves, log = c
    x = a[0] * jnp.sin(x) + 0.25 * x**2 + a[1]
    saves = saves.at[i].set(x * a[1])
    log = jnp.where(i == 1, x**3, log)
    return x, left - 1, i + 1, saves, log


def _start(x0, n):
    return (x0, n, jnp.asarray(0), jnp.full(SAVES, jnp.nan), jnp.asarray(jnp.nan))


def _loss(out):
    x, _, _, saves, log = out
    return x**2 + jnp.sum(jnp.nan_to_num(saves) * jnp.arange(1.0, SAVES + 1)) + 0.5 * log


RECORDED = lambda c: (True, True, True, False, False)  # the saves and the log: written only


def _replayed(a, x0, n, recorded=RECORDED):
    c = replayed_while(lambda c: c[1] > 0, _body, a, _start(x0, n), SAVES, recorded)
    return _loss(c)


def _unrolled_carry(a, x0, n: int):
    """The reference: the loop unrolled in Python (JAX differentiates it directly)."""
    c = _start(x0, jnp.asarray(n))
    for _ in range(n):
        c = _body(a, c)
    return c


def _unrolled(a, x0, n: int):
    return _loss(_unrolled_carry(a, x0, n))


@pytest.mark.parametrize("n", [0, 1, 3, 6])
def test_gradient_equals_the_unrolled_loop(n):
    a, x0 = jnp.array([0.7, 0.3]), 0.4
    got = jax.jit(jax.grad(_replayed, argnums=(0, 1)))(a, x0, n)
    want = jax.grad(_unrolled, argnums=(0, 1))(a, x0, n)
    np.testing.assert_allclose(_replayed(a, x0, n), _unrolled(a, x0, n), rtol=1e-14)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
    if n >= 2:  # the derivative reads x's recorded values: a loop told not to record it fails
        drop_x = lambda c: (False, True, True, False, False)
        wrong = jax.grad(_replayed, argnums=(0, 1))(a, x0, n, drop_x)
        assert not np.allclose(wrong[0], want[0], rtol=1e-6)


def test_vmapped_gradient_has_each_members_own_iterations():
    a = jnp.array([[0.7, 0.3], [0.5, -0.2], [0.9, 0.1]])
    x0 = jnp.array([0.4, -0.3, 1.1])
    n = jnp.array([2, 5, 0])
    got = jax.jit(jax.vmap(jax.grad(_replayed, argnums=(0, 1))))(a, x0, n)
    for j in range(3):
        want = jax.grad(_unrolled, argnums=(0, 1))(a[j], x0[j], int(n[j]))
        np.testing.assert_allclose(got[0][j], want[0], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(got[1][j], want[1], rtol=1e-12, atol=1e-14)
    # and the batch of losses (the loop without a derivative) equals each member's
    values = jax.vmap(_replayed)(a, x0, n)
    want = [_unrolled(a[j], x0[j], int(n[j])) for j in range(3)]
    np.testing.assert_allclose(values, want, rtol=1e-14)


def test_integer_outputs_carry_no_tangent():
    """The loop's integer outputs are constants to autodiff: a run's failure code read
    from them by equinox's branched error (whose index has no derivative rule)
    differentiates; with JAX's instantiated tangents for them it raised
    NotImplementedError."""

    def f(a):
        x, left, i, saves, log = replayed_while(
            lambda c: c[1] > 0, _body, a, _start(0.4, 3), SAVES, RECORDED
        )
        return eqx.branched_error_if(x, i > 100, i, ["none", "one", "two", "three"])

    a = jnp.array([0.7, 0.3])
    want = jax.grad(lambda a: _unrolled_carry(a, 0.4, 3)[0])(a)
    np.testing.assert_allclose(jax.grad(f)(a), want, rtol=1e-12)
