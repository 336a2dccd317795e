"""Every matrix product ukjax traces is at full precision: on GPUs XLA's default rounds float32
products to TF32 (1e-3 relative), which made a URDF arm's mass matrix asymmetric at 2e-4 on an
H200 and the run fail its checks (benchmarks/RESULTS.md, GPU section)."""

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest

import ukjax
from ukjax.systems import PlanarChain


def dot_precisions(jaxpr) -> list:
    """The `precision` parameter of every dot_general in a closed jaxpr, nested ones too."""
    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            found.append(eqn.params["precision"])
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            found.extend(dot_precisions(sub))
    return found


def highest(precision) -> bool:
    return precision is not None and all(p == jax.lax.Precision.HIGHEST for p in precision)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_simulate_traces_every_product_at_full_precision(dtype):
    chain = PlanarChain.uniform(3)
    q0, qd0 = chain.state_from_angles(jnp.array([0.3, 0.5, 0.7]), jnp.zeros(3))
    q0, qd0 = q0.astype(dtype), qd0.astype(dtype)
    ts = jnp.linspace(0.0, 0.1, 3, dtype=dtype)
    run = lambda q, v: ukjax.simulate(chain, q, v, ts).q
    precisions = dot_precisions(jax.make_jaxpr(run)(q0, qd0).jaxpr)
    # the vector field's products (one copy: the stages' loop evaluates the first stage
    # too) and the per-step projection's
    assert len(precisions) >= 3, "the traced program should hold the UK solve's products"
    assert all(highest(p) for p in precisions), precisions
    # and the user's own precision outside ukjax is left alone
    outside = dot_precisions(jax.make_jaxpr(lambda a: a @ a)(np.eye(2, dtype=dtype)).jaxpr)
    assert outside == [None]


def test_the_public_helpers_trace_at_full_precision():
    chain = PlanarChain.uniform(2)
    q0, qd0 = chain.state_from_angles(jnp.array([0.3, 0.5]), jnp.array([0.1, -0.2]))
    M, A = jnp.array([[2.0, 0.5], [0.5, 1.0]]), jnp.array([[1.0, 1.0]])
    for name, fn, args in (
        ("acceleration", lambda q, v: ukjax.acceleration(chain, 0.0, q, v), (q0, qd0)),
        ("energy", lambda q, v: ukjax.energy(chain, 0.0, q, v), (q0, qd0)),
        ("weighted_pinv", ukjax.weighted_pinv, (A, M)),
    ):
        precisions = dot_precisions(jax.make_jaxpr(fn)(*args).jaxpr)
        assert precisions and all(highest(p) for p in precisions), name
