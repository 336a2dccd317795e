"""The structural non-zeros of a traced program (ukjax._sparsity.nonzero_pattern) and the
structure the UK solve takes from them.

Soundness is checked against the values: at many random arguments, every entry that is
non-zero somewhere must be in the pattern (the pattern may only over-approximate). Precision
is checked on programs whose structure is known in closed form (a chain's Jacobian, a
diagonal or block-diagonal mass matrix). The systems are written as a user writes them:
`int` fields, `jnp.where` branches, `.at[]` updates, loops.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ukjax
import ukjax._structure as structure_module
from ukjax._dynamics import _structure, evaluate
from ukjax._projection import _structures, project
from ukjax._sparsity import nonzero_pattern
from ukjax.systems import AppellHamelWheelNonlinear, PlanarChain


jax.config.update("jax_enable_x64", True)

STRUCTURED = ukjax.Regularized(kernels=ukjax.StructuredKernels())
DENSE = ukjax.Regularized(kernels=ukjax.LapackKernels())
VEC = jax.ShapeDtypeStruct((5,), jnp.float64)


def _where_branches(q):
    return jnp.where(q[0] > 0.5, jnp.array([q[1], 0.0, 0.0]), jnp.array([0.0, 0.0, q[2]]))


def _scatter_and_gather(q):
    M = jnp.zeros((5, 5)).at[jnp.arange(5), jnp.arange(5)].set(1.0 + q**2)
    M = M.at[0, 4].add(q[3] * q[4])
    return M[jnp.array([0, 2, 4])][:, jnp.array([4, 0])]


def _linear_algebra(q):
    K = jnp.diag(q) + jnp.eye(5)
    return jnp.outer(q[:2], q[3:]), K @ jnp.array([1.0, 0.0, 0.0, 0.0, 2.0]), jnp.linalg.solve(K, q)


def _loops(q):
    def body(c, x):
        return c * x + q[1], c

    c, ys = jax.lax.scan(body, q[0], jnp.arange(3.0))
    w = jax.lax.fori_loop(0, 4, lambda i, v: jnp.roll(v, 1) * q[2], q * jnp.eye(5)[0])
    return c, ys, w


def _calls(q):
    relu = jax.nn.relu(q - 1.0)  # custom_jvp around a max
    cond = jax.lax.cond(q[0] > 0, lambda x: x * jnp.eye(5)[1], lambda x: jnp.zeros(5), q)
    return relu, cond, jax.jit(lambda x: jnp.cumsum(x[::-1]))(q * jnp.eye(5)[3])


def _functions_of_zero(q):
    z = q * jnp.eye(5)[2]
    return jnp.sin(z), jnp.cos(z), jnp.sqrt(jnp.abs(z)), z / (1.0 + q**2), jnp.pad(z[:3], (1, 2))


def _jacobians(q):
    chain = lambda x: jnp.sin(x[1:] - x[:-1]) * x[0]
    return jax.jacfwd(chain)(q), jax.jacrev(chain)(q), jax.hessian(lambda x: x[0] * x[1] ** 2)(q)


SLOW = pytest.mark.slow  # default-suite time (9 and 6 s of compilation)
PROGRAMS = [_where_branches, _scatter_and_gather, _linear_algebra]
PROGRAMS += [pytest.param(_loops, marks=SLOW), pytest.param(_calls, marks=SLOW)]
PROGRAMS += [_functions_of_zero, _jacobians]


@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
def test_every_entry_non_zero_somewhere_is_in_the_pattern(fn):
    patterns = jax.tree_util.tree_leaves(nonzero_pattern(fn, VEC))
    rng = np.random.default_rng(0)
    seen = [np.zeros_like(p) for p in patterns]
    for _ in range(40):
        q = jnp.asarray(rng.normal(size=5) * 2.0)
        values = jax.tree_util.tree_leaves(fn(q))
        seen = [s | (np.asarray(v) != 0) for s, v in zip(seen, values)]
    for p, s in zip(patterns, seen):
        assert p.shape == s.shape
        assert not np.any(s & ~p), f"non-zeros outside the pattern:\n{s.astype(int)}\n{p}"
    assert sum(int(s.sum()) for s in seen) > 0


def test_patterns_are_the_known_structure():
    jac, jacr, hess = nonzero_pattern(_jacobians, VEC)
    band = np.zeros((4, 5), bool)
    for i in range(4):
        band[i, [0, i, i + 1]] = True
    np.testing.assert_array_equal(jac, band)
    np.testing.assert_array_equal(jacr, band)
    want = np.zeros((5, 5), bool)
    want[[0, 1, 1], [1, 0, 1]] = True
    np.testing.assert_array_equal(hess, want)
    outer, Kv, solve = nonzero_pattern(_linear_algebra, VEC)
    assert outer.all() and solve.all()  # solve: a linear solve is taken as dense
    np.testing.assert_array_equal(Kv, [True, False, False, False, True])
    np.testing.assert_array_equal(nonzero_pattern(_where_branches, VEC), [True, False, True])
    s, c, r, d, p = nonzero_pattern(_functions_of_zero, VEC)
    np.testing.assert_array_equal(s, np.eye(5)[2] > 0)
    assert c.all()  # cos(0) = 1
    np.testing.assert_array_equal(r, s)
    np.testing.assert_array_equal(d, s)
    np.testing.assert_array_equal(p, [False, False, False, True, False, False])


def test_values_closed_over_are_constants_and_traced_ones_any_value():
    def scaled(c):
        return nonzero_pattern(lambda q: jnp.diag(q) * c, VEC)

    np.testing.assert_array_equal(
        scaled(jnp.array([1.0, 0.0, 2.0, 0.0, 1.0])), np.diag([1, 0, 1, 0, 1]) > 0
    )
    seen = []
    jax.vmap(lambda c: seen.append(scaled(c)) or c)(jnp.zeros((2, 5)))
    np.testing.assert_array_equal(seen[0], np.eye(5) > 0)  # batched: any value


class UserChain(ukjax.System):
    """A planar chain of point masses in Cartesian coordinates as a user writes it: the
    number of links an `int` field, the mass matrix built with `jnp.eye(2 * links)`."""

    links: int = 4
    mass: float = 1.0

    def mass_matrix(self, t, q):
        return self.mass * jnp.eye(2 * self.links)

    def potential_energy(self, t, q):
        return 9.81 * self.mass * jnp.sum(q[1::2])

    def holonomic(self, t, q):
        p = q.reshape(self.links, 2)
        prev = jnp.concatenate([jnp.zeros((1, 2), q.dtype), p[:-1]])
        return jnp.sum((p - prev) ** 2, axis=1) - 1.0


class Latch(UserChain):
    """UserChain with an extra mass coupling that exists only far out (q[0] > 5), written
    with `jnp.where`: a random probe of the states never sees it."""

    def mass_matrix(self, t, q):
        M = super().mass_matrix(t, q)
        return (
            M.at[0, 2]
            .set(jnp.where(q[0] > 5.0, 0.3, 0.0))
            .at[2, 0]
            .set(jnp.where(q[0] > 5.0, 0.3, 0.0))
        )


def _chain_state(links, x0=0.0):
    angles = np.linspace(0.3, 1.1, links)
    p = np.cumsum(np.stack([np.sin(angles), -np.cos(angles)], 1), axis=0) + [x0, 0.0]
    return jnp.asarray(p.ravel()), jnp.asarray(np.tile([0.2, -0.1], links))


@eqx.filter_jit
def _qdd(system, q, qd, solver):
    return evaluate(system, jnp.asarray(0.1), q, qd, ukjax.NoStabilization(), solver).terms.qdd


def test_a_user_chain_with_an_int_field_takes_the_structured_solve():
    chain = UserChain()
    q, qd = _chain_state(4)
    structure = _structure(chain, q, STRUCTURED)
    assert structure is not None
    assert len(structure.mass) == 8  # the diagonal
    assert structure.holonomic is not None and len(structure.holonomic.entries) == 2 + 3 * 4
    np.testing.assert_allclose(
        _qdd(chain, q, qd, STRUCTURED), _qdd(chain, q, qd, DENSE), atol=1e-12
    )


def test_a_branch_no_random_state_reaches_is_in_the_structure():
    latch = Latch()
    q, qd = _chain_state(4, x0=5.5)  # the coupling is on here
    structure = _structure(latch, q, STRUCTURED)
    assert structure is not None and (0, 2) in structure.mass
    fast, dense = _qdd(latch, q, qd, STRUCTURED), _qdd(latch, q, qd, DENSE)
    np.testing.assert_allclose(fast, dense, atol=1e-12)
    assert float(jnp.max(jnp.abs(dense - _qdd(UserChain(), q, qd, DENSE)))) > 1e-2


def test_the_planar_chain_structure_is_banded():
    chain = PlanarChain.uniform(5)
    q, _ = chain.state_from_angles(jnp.linspace(0.1, 0.5, 5), jnp.zeros(5))
    structure = _structure(chain, q, STRUCTURED)
    assert structure is not None
    assert structure.holonomic is not None and structure.holonomic.n_colors <= 4


def test_the_projection_uses_the_structure_and_lands_where_the_dense_one_does():
    chain = UserChain(links=8)  # n = 16: the default takes the structure (from n = 9)
    q, qd = _chain_state(8)
    rng = np.random.default_rng(3)
    q = q + 1e-3 * jnp.asarray(rng.normal(size=q.shape))  # off the manifold
    at_q, at_qd = _structures(chain, 0.0, q, qd, False, ukjax.AutoKernels())
    assert at_q is not None and at_qd is not None
    assert at_q.holonomic is not None and at_q.holonomic.n_colors <= 4  # not 16 products
    fast = jax.jit(lambda q, qd: project(chain, 0.0, q, qd, 3))(q, qd)
    dense = jax.jit(lambda q, qd: project(chain, 0.0, q, qd, 3, ukjax.LapackKernels()))(q, qd)
    np.testing.assert_allclose(fast[0], dense[0], atol=1e-12)
    np.testing.assert_allclose(fast[1], dense[1], atol=1e-12)
    assert float(jnp.max(jnp.abs(chain.holonomic(0.0, fast[0])))) < 1e-12
    velocity = jax.jvp(lambda x: chain.holonomic(0.0, x), (fast[0],), (fast[1],))[1]
    assert float(jnp.max(jnp.abs(velocity))) < 1e-12
    assert float(jnp.max(jnp.abs(q - fast[0]))) > 1e-4  # it did move


@pytest.mark.parametrize("kernels", [ukjax.AutoKernels(), ukjax.LapackKernels()])
def test_the_per_step_projection_lands_on_the_manifold_with_chord_steps(kernels):
    """The per-step projection (`near`: chord position steps with the Jacobian where they
    start, one step for velocity rows affine in qd) from a state an integrator's local
    error off the manifold: both residuals at round-off, and the state within the square
    of that error of the Newton projection's."""
    chain = UserChain(links=8)  # structured under AutoKernels, dense under LAPACK
    q, _ = _chain_state(8)
    angles, rates = np.linspace(0.3, 1.1, 8), np.linspace(1.0, -0.5, 8)
    qd = np.cumsum(rates[:, None] * np.stack([np.cos(angles), np.sin(angles)], 1), axis=0)
    rng = np.random.default_rng(5)  # off the manifold by an integrator's local error
    q = q + 1e-6 * jnp.asarray(rng.normal(size=q.shape))
    qd = jnp.asarray(qd.ravel()) + 1e-6 * jnp.asarray(rng.normal(size=q.shape))
    near = jax.jit(lambda q, qd: project(chain, 0.0, q, qd, 2, kernels, near=True))(q, qd)
    newton = jax.jit(lambda q, qd: project(chain, 0.0, q, qd, 2, kernels))(q, qd)
    assert float(jnp.max(jnp.abs(chain.holonomic(0.0, near[0])))) < 1e-14
    velocity = jax.jvp(lambda x: chain.holonomic(0.0, x), (near[0],), (near[1],))[1]
    assert float(jnp.max(jnp.abs(velocity))) < 1e-14
    np.testing.assert_allclose(near[0], newton[0], atol=1e-11)
    np.testing.assert_allclose(near[1], newton[1], atol=1e-11)
    assert float(jnp.max(jnp.abs(q - near[0]))) > 1e-7  # it did move


def test_the_per_step_projection_iterates_velocity_rows_nonlinear_in_qd():
    """Constraints quadratic in qd (Bajodah 2003, eqs 157-158) take the projection's
    `iterations` velocity steps: one Newton step would leave the square of the offset."""
    wheel = AppellHamelWheelNonlinear()
    q, qd = wheel.initial_state()
    qd = qd + 1e-4 * jnp.asarray(np.random.default_rng(6).normal(size=qd.shape))
    _, qd1 = jax.jit(lambda q, qd: project(wheel, 0.0, q, qd, 2, near=True))(q, qd)
    assert float(jnp.max(jnp.abs(wheel.nonholonomic(0.0, q, qd)))) > 1e-5
    assert float(jnp.max(jnp.abs(wheel.nonholonomic(0.0, q, qd1)))) < 1e-13
    _, one = jax.jit(lambda q, qd: project(wheel, 0.0, q, qd, 1, near=True))(q, qd)
    assert float(jnp.max(jnp.abs(wheel.nonholonomic(0.0, q, one)))) > 1e-11


def test_a_system_that_cannot_be_analysed_runs_dense_and_says_why(monkeypatch):
    def refuse(*args, **kwargs):
        raise NotImplementedError("no rule for this primitive")

    monkeypatch.setattr(structure_module, "nonzero_pattern", refuse)
    q, _ = _chain_state(8)
    with pytest.warns(UserWarning, match="could not be analysed.*no rule for this primitive"):
        assert _structure(UserChain(links=8), q, ukjax.Regularized()) is None


def test_the_report_says_whether_and_why_the_structure_is_used():
    q, _ = _chain_state(8)
    report = ukjax.structure_report(UserChain(links=8), q)
    assert report.used and (report.n, report.m) == (16, 8)
    assert report.mass_entries == 16 and report.jacobian_colors is not None
    assert report.dense_multiply_adds >= 20 * report.structured_multiply_adds
    dense = ukjax.Regularized(kernels=ukjax.LapackKernels())
    assert not ukjax.structure_report(UserChain(links=8), q, dense).used
    small = ukjax.structure_report(UserChain(links=1), q[:2])
    assert not small.used and "n = 2" in small.reason
    # below 8 coordinates and rows the dense solve is written out too: the structured one
    # is taken at 2.5x fewer multiply-adds (a 4-link chain: 9x), not at 1.6x (N-four-bar)
    four = ukjax.structure_report(UserChain(links=4), q[:8])
    assert four.used and four.dense_multiply_adds < 20 * four.structured_multiply_adds
    nfb = ukjax.systems.NFourBar()
    assert not ukjax.structure_report(nfb, nfb.initial_state()[0]).used
    with pytest.raises(ValueError, match="float vector"):
        ukjax.structure_report(UserChain(links=8), jnp.zeros((2, 8)))


KNOWN_CASES = [  # the constants a model's functions build, as jaxprs see them
    lambda i, x: (jnp.eye(5, dtype=x.dtype), jnp.eye(3, 4, k=1, dtype=jnp.int32)),
    lambda i, x: (i + 3, i - 7, i * i, -i, jnp.maximum(i, 2), jnp.minimum(i, 2)),
    lambda i, x: (x + 0.1, x - 1e-17, x * 3.3, jnp.maximum(x, -x)),
    lambda i, x: (i == 2, i < 3, i >= 1, (i > 0) & (i < 4), (i > 0) | (i < 4), ~(i > 2)),
    lambda i, x: jnp.where(i > 2, x, 2.0 * x),
    lambda i, x: (x.reshape(2, 3).T, x[1:5:2], x[None, :], jnp.broadcast_to(x, (2, 6))),
    lambda i, x: (jnp.concatenate([x, x]), jnp.split(x, [2, 3]), x.astype(jnp.float32)),
    lambda i, x: (i.astype(jnp.float64), (i > 1).astype(jnp.int32), x.astype(jnp.int32)),
]


@pytest.mark.parametrize("fn", KNOWN_CASES)
def test_known_values_from_numpy_are_those_xla_computes(fn):
    """The constants the analysis evaluates with NumPy instead of compiling each primitive
    (`ukjax._sparsity._numpy_known`) equal, value and dtype, what binding the primitive
    gives; a primitive NumPy would compute otherwise (float to integer) is left to XLA."""
    from jax.extend.core import Literal

    from ukjax._sparsity import Known, _numpy_known

    i = np.arange(6, dtype=np.int64) - 1
    x = np.array([0.5, -1.25, 3.0, 1e-300, -0.0, 7.5])
    closed = jax.make_jaxpr(fn)(i, x)
    env = dict(zip(closed.jaxpr.invars, (i, x)))
    env.update(zip(closed.jaxpr.constvars, closed.consts))
    read = lambda v: v.val if isinstance(v, Literal) else env[v]
    evaluated = 0
    for eqn in closed.jaxpr.eqns:
        ins = [np.asarray(read(v)) for v in eqn.invars]
        with jax.ensure_compile_time_eval():
            out = eqn.primitive.bind(*ins, **eqn.params)
        outs = [np.asarray(o) for o in (out if eqn.primitive.multiple_results else [out])]
        fast = _numpy_known(eqn, [Known(v) for v in ins])
        if fast is not None:
            evaluated += 1
            for a, b in zip(fast, outs):
                assert a.value.dtype == b.dtype and a.value.shape == b.shape, eqn
                np.testing.assert_array_equal(a.value, b, err_msg=str(eqn))
        env.update(zip(eqn.outvars, outs))
    assert evaluated > 0
