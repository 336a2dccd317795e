"""The per-stage checks' maxima as folds (`ukjax._folds`): the same values and derivatives
as the reductions they replace, and no reduction of M's entries left in the checks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_xla import primitives

from ukjax._folds import largest, smallest
from ukjax._uk import factored, failures, uk_terms


@pytest.mark.parametrize("shape", [(1,), (2,), (3,), (7,), (32,), (5, 3), (32, 32), (3, 4, 5)])
def test_folds_equal_the_reductions_with_their_derivatives(rng, shape):
    x = jnp.asarray(rng.normal(size=shape))
    assert float(largest(x)) == float(jnp.max(x))
    assert float(smallest(x)) == float(jnp.min(x))
    # distinct entries: one maximum, so the derivative is the indicator of its position
    np.testing.assert_array_equal(jax.grad(largest)(x), jax.grad(jnp.max)(x))
    np.testing.assert_array_equal(jax.grad(smallest)(x), jax.grad(jnp.min)(x))
    batched = jnp.asarray(rng.normal(size=(4, *shape)))
    np.testing.assert_array_equal(
        jax.vmap(largest)(batched), jnp.max(batched, axis=tuple(range(1, batched.ndim)))
    )


@pytest.mark.parametrize("where", [0, 4, 6])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_non_finite_entry_reaches_the_fold(where, bad):
    x = jnp.arange(7.0).at[where].set(bad)
    if np.isnan(bad):
        assert np.isnan(largest(x)) and np.isnan(smallest(x))
    else:
        assert float(largest(x)) == float(jnp.max(x)) and float(smallest(x)) == float(jnp.min(x))
    with pytest.raises(ValueError, match="empty"):
        largest(jnp.zeros(0))


def test_the_checks_of_a_written_mass_matrix_have_no_reductions_of_its_entries(rng):
    X = rng.normal(size=(12, 12))
    M = jnp.asarray(X @ X.T + 12 * np.eye(12))
    Q, A, b = jnp.ones(12), jnp.zeros((0, 12)), jnp.zeros(0)

    def checks(M):
        terms = uk_terms(M, Q, A, b)
        f = failures(terms, M, (Q,))
        return f.any(), f.relative_asymmetry, factored(jnp.linalg.cholesky(M), M)

    names = primitives(checks, M)
    assert not names & {"reduce_max", "reduce_min", "argmax", "argmin"}, names
    # the values: a symmetric M passes, an asymmetric one is measured against its diagonal
    failed, asym, ok = jax.jit(checks)(M)
    assert not bool(failed) and float(asym) == 0.0 and bool(ok)
    skew = M.at[0, 5].add(1e-6)
    _, asym, _ = jax.jit(checks)(skew)
    np.testing.assert_allclose(float(asym), 1e-6 / float(jnp.max(jnp.diagonal(M))), rtol=1e-9)
    # a NaN or an infinity anywhere in M is a non-finite input, not an asymmetry
    for bad in (np.nan, np.inf):
        f = failures(uk_terms(M.at[3, 9].set(bad), Q, A, b), M.at[3, 9].set(bad), (Q,))
        assert bool(f.nonfinite) and not bool(f.not_spd)
