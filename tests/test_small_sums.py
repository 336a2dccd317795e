"""Sums written out (`ukjax._rewrite`, `ukjax._small_sums`): the same values and
derivatives as the function the user wrote, under every transformation, and no short
`reduce_sum` left."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ukjax._rewrite import rewritten
from ukjax._small_sums import MAX_TERMS


def _links(q):
    """A chain's link constraints as a user writes them: a sum over an axis of two."""
    p = q.reshape(-1, 2)
    prev = jnp.concatenate([jnp.zeros((1, 2), q.dtype), p[:-1]])
    return jnp.sum((p - prev) ** 2, axis=1) - 1.0


def _mixed(q):
    """Sums over several axes at once, one too long to write out, an integer one, a
    nested jit, a custom derivative rule and control flow."""
    x = q.reshape(2, 2, 3)
    inner = jax.jit(lambda y: jnp.sum(jnp.sin(y), axis=(0, 2)))(x)  # 6 terms, nested jit
    long = jnp.sum(jnp.tile(q, 2) ** 2)  # 24 terms: left to XLA
    count = jnp.sum(jnp.arange(3))  # integers: left as they are
    smooth = jnp.sum(jax.nn.softplus(x), axis=-1).ravel()  # custom_jvp inside
    looped = jax.lax.fori_loop(0, 2, lambda i, c: c + jnp.sum(x[i], axis=0), jnp.zeros(3))
    return jnp.concatenate([inner, long[None] + count, smooth, looped])


def _reductions(fn, *args):
    text = str(jax.make_jaxpr(fn)(*args))
    return text.count("reduce_sum")


@pytest.mark.parametrize("fn, n", [(_links, 8), (_mixed, 12)])
def test_values_and_derivatives_are_the_functions_own(fn, n):
    rng = np.random.default_rng(0)
    q, v = jnp.asarray(rng.normal(size=n)), jnp.asarray(rng.normal(size=n))
    out = rewritten(fn)
    np.testing.assert_allclose(out(q), fn(q), rtol=1e-14, atol=1e-14)  # eager
    # the transformations compiled (eager, each primitive compiles on its own: slow)
    both = lambda make: (jax.jit(make(out))(q), jax.jit(make(fn))(q))
    np.testing.assert_allclose(*both(jax.jacfwd), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(*both(jax.jacrev), rtol=1e-13, atol=1e-13)
    second = lambda f: lambda q: jax.jvp(lambda x: jax.jvp(f, (x,), (v,))[1], (q,), (v,))[1]
    np.testing.assert_allclose(*both(second), rtol=1e-12, atol=1e-12)
    batch = jnp.stack([q, 2.0 * q, -q])
    np.testing.assert_allclose(jax.vmap(out)(batch), jax.vmap(fn)(batch), rtol=1e-14, atol=1e-14)
    jitted = jax.jit(out)(q)
    np.testing.assert_allclose(jitted, fn(q), rtol=1e-14, atol=1e-14)


def test_only_the_short_floating_point_sums_are_written_out():
    q = jnp.linspace(0.1, 1.2, 12)
    assert _reductions(_links, jnp.ones(8)) == 1
    assert _reductions(rewritten(_links), jnp.ones(8)) == 0
    # _mixed: the nested jit's sum, softplus's and the loop's go; the long and the integer
    # ones stay (and the loop body is bound as it is, its sum inside)
    before, after = _reductions(_mixed, q), _reductions(rewritten(_mixed), q)
    assert before >= 5 and after == 3
    assert MAX_TERMS >= 2


def test_closed_over_values_and_tracers_are_kept():
    def constraint(scale):
        return rewritten(lambda q: scale * jnp.sum(q.reshape(-1, 2) ** 2, axis=1))

    q = jnp.array([0.6, 0.8, 1.0, 0.0])
    np.testing.assert_allclose(constraint(2.0)(q), [2.0, 2.0])
    grad = jax.grad(lambda s: jnp.sum(constraint(s)(q)))(3.0)  # scale traced, closed over
    assert float(grad) == pytest.approx(2.0)
    assert rewritten(lambda q: None)(q) is None


@pytest.mark.parametrize("n, rewritten_here", [(15, False), (16, True), (65, False)])
def test_long_cumulative_sums_are_products_with_the_same_values_and_derivatives(n, rewritten_here):
    rng = np.random.default_rng(3)
    x, v, w = (jnp.asarray(rng.normal(size=(3, n))) for _ in range(3))

    def positions(x):
        forward = jnp.cumsum(jnp.cos(x) * x, axis=1)
        backward = jax.lax.cumsum(x.T, axis=0, reverse=True).T
        return forward * backward

    out = rewritten(positions, sums=False)
    assert ("cumsum" in str(jax.make_jaxpr(out)(x))) != rewritten_here
    scale = float(jnp.abs(positions(x)).max())
    close = lambda a, b, tol: np.testing.assert_allclose(a, b, rtol=tol, atol=tol * scale)
    close(out(x), positions(x), 1e-13)  # eager; the transformations compiled
    jvp = lambda f: jax.jit(lambda x: jax.jvp(f, (x,), (v,))[1])(x)
    vjp = lambda f: jax.jit(lambda x: jax.vjp(f, x)[1](w)[0])(x)
    inner = lambda f: lambda y: jax.jvp(f, (y,), (v,))[1]
    second = lambda f: jax.jit(lambda x: jax.jvp(inner(f), (x,), (w,))[1])(x)
    batch = jnp.stack([x, -x])
    vmap = lambda f: jax.jit(jax.vmap(f))(batch)
    for transformed, tol in ((jvp, 1e-12), (vjp, 1e-12), (second, 1e-11), (vmap, 1e-13)):
        close(transformed(out), transformed(positions), tol)
