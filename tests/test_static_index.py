"""`ukjax._static_index`: static indices taken without a gather where they are a run, with
the values and derivatives of `jnp.take` and of a scatter-add."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ukjax._static_index import replace, scatter, take


jax.config.update("jax_enable_x64", True)

INDICES = [[0, 1, 2, 3, 4], [1, 2, 3], [4], [3, 1, 4], [0, 0, 2], [4, 3, 2, 1, 0]]


@pytest.mark.parametrize("index", INDICES)
@pytest.mark.parametrize("axis", [0, 1])
def test_take_is_jnp_take(index, axis):
    x = jnp.asarray(np.random.default_rng(0).standard_normal((5, 5)))
    index = np.array(index)
    np.testing.assert_array_equal(take(x, index, axis), np.take(np.asarray(x), index, axis))
    batched = jax.jit(jax.vmap(lambda y: take(y, index, axis)))(jnp.stack([x, 2 * x]))
    np.testing.assert_array_equal(batched[1], 2 * np.take(np.asarray(x), index, axis))
    grad = jax.grad(lambda y: jnp.sum(take(y, index, axis) ** 2))(x)
    expected = jax.grad(lambda y: jnp.sum(jnp.take(y, index, axis) ** 2))(x)
    np.testing.assert_allclose(grad, expected, rtol=1e-15)


def test_runs_are_slices_not_gathers():
    x = jnp.arange(6.0)
    assert take(x, np.arange(6)) is x
    run = str(jax.make_jaxpr(lambda y: take(y, np.array([2, 3, 4])))(x))
    assert "gather" not in run and "slice" in run, run
    assert "gather" in str(jax.make_jaxpr(lambda y: take(y, np.array([3, 2])))(x))


@pytest.mark.parametrize("index", [[0, 1, 2], [2, 3], [3, 0, 1]])
def test_scatter_adds_at_distinct_indices(index):
    values = jnp.array([1.5, -2.0, 3.0])[: len(index)]
    out = scatter(values, np.array(index), 4)
    expected = np.zeros(4)
    expected[index] += np.asarray(values)
    np.testing.assert_array_equal(out, expected)
    grad = jax.grad(lambda v: jnp.sum(scatter(v, np.array(index), 4) * jnp.arange(4.0)))(values)
    np.testing.assert_array_equal(grad, np.asarray(index, float))


@pytest.mark.parametrize("index", [[0, 1, 2], [1, 2], [3], [3, 0, 1], [1, 3]])
@pytest.mark.parametrize("axis", [0, 1])
def test_replace_is_at_set(index, axis):
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.standard_normal((5, 4)))
    index = np.array(index)
    shape = list(x.shape)
    shape[axis] = len(index)
    values = jnp.asarray(rng.standard_normal(shape))
    expected = np.asarray(x).copy()
    np.moveaxis(expected, axis, 0)[index] = np.moveaxis(np.asarray(values), axis, 0)
    np.testing.assert_array_equal(replace(x, index, values, axis), expected)
    batched = jax.jit(jax.vmap(lambda y, v: replace(y, index, v, axis)))(
        jnp.stack([x, 2 * x]), jnp.stack([values, 2 * values])
    )
    np.testing.assert_array_equal(batched[1], 2 * expected)
    run = str(jax.make_jaxpr(lambda y, v: replace(y, index, v, axis))(x, values))
    consecutive = np.array_equal(index, np.arange(index[0], index[0] + len(index)))
    assert ("scatter" not in run) == consecutive, run
