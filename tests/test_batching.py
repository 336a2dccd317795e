"""`ukjax._batching`: predicates a batch shares, carries batched like their sources."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ukjax._batching import any_member, batched_like


jax.config.update("jax_enable_x64", True)


def test_batched_like_batches_the_tree_where_a_source_is_batched():
    tree = (jnp.zeros(2), jnp.int32(3), jnp.asarray(True))
    f = lambda x, y: batched_like(tree, (x, y))
    z, i, b = jax.vmap(f, in_axes=(0, None))(jnp.arange(3.0), 1.0)
    assert z.shape == (3, 2) and i.shape == (3,) and b.shape == (3,)
    assert np.all(np.asarray(z) == 0.0) and np.all(np.asarray(i) == 3) and np.all(np.asarray(b))
    # no batched source: the tree stays unbatched (out_axes=None would fail otherwise)
    z1, i1, b1 = jax.vmap(f, in_axes=(None, None), out_axes=None, axis_size=3)(2.0, 1.0)
    assert z1.shape == (2,) and int(i1) == 3 and bool(b1)
    # outside vmap it is the identity, NaN sources included
    out = f(jnp.nan, 1.0)
    assert all(np.array_equal(np.asarray(a), np.asarray(e)) for a, e in zip(out, tree))


def test_batched_like_keeps_values_and_derivatives():
    f = lambda x: jnp.sum(batched_like(jnp.array([x**2, 3.0 * x]), x))
    np.testing.assert_allclose(jax.grad(f)(2.0), 7.0)
    np.testing.assert_allclose(jax.jvp(f, (2.0,), (1.0,))[1], 7.0)
    np.testing.assert_allclose(jax.vmap(jax.grad(f))(jnp.array([1.0, 2.0])), [5.0, 7.0])


@pytest.mark.parametrize("tie", [False, True])
def test_a_loop_with_tied_carries_runs_each_member_to_its_own_end(tie):
    def count(n):
        start = (jnp.int32(0), jnp.float64(1.0))
        start = batched_like(start, n) if tie else start
        return jax.lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, 2.0 * c[1]), start)

    k, v = jax.jit(jax.vmap(count))(jnp.array([0, 3, 5]))
    assert k.tolist() == [0, 3, 5] and v.tolist() == [1.0, 8.0, 32.0]


def test_any_member_is_shared_by_the_batch():
    out = jax.vmap(lambda x: any_member(x > 2.0))(jnp.arange(4.0))
    assert out.tolist() == [True] * 4
    out = jax.vmap(lambda x: any_member(x > 5.0))(jnp.arange(4.0))
    assert out.tolist() == [False] * 4
