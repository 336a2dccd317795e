"""The structured (sparse) UK solve against the dense one, and its detection.

The dense LAPACK path is the reference: the structured solve runs the same algorithm on
structural non-zeros only, so every term must agree to round-off, for diagonal and
block-diagonal mass matrices, holonomic, nonholonomic and raw rows, non-ideal forces,
redundant rows, batched parameters, gradients and float32.
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ukjax
from ukjax._dynamics import _structure, evaluate
from ukjax._structure import color_columns, multiply_adds
from ukjax._uk import default_consistency_tol
from ukjax.systems import Bricard, FourBarLinkage, NFourBar, PlanarChain, SwarmRobots


jax.config.update("jax_enable_x64", True)

STRUCTURED = ukjax.Regularized(kernels=ukjax.StructuredKernels())
DENSE = ukjax.Regularized(kernels=ukjax.LapackKernels())


class BlockChain(ukjax.System):
    """A planar chain whose bodies have configuration-dependent 2x2 mass blocks (M block
    diagonal, not diagonal), distance constraints, a nonholonomic constraint nonlinear in
    the velocities, a raw acceleration row and a non-ideal (work-doing) force."""

    masses: jax.Array
    coupling: float = 0.3
    friction: float = 0.2
    redundant: bool = eqx.field(static=True, default=False)

    def num_coordinates(self):
        return 2 * self.masses.shape[0]

    def mass_matrix(self, t, q):
        p = q.reshape(-1, 2)
        c = self.coupling * jnp.sin(p[:, 0])
        blocks = jnp.stack(
            [jnp.stack([self.masses + 0.1 * p[:, 1] ** 2, c], -1), jnp.stack([c, self.masses], -1)],
            -2,
        )
        return jax.scipy.linalg.block_diag(*blocks)

    def potential_energy(self, t, q):
        return 9.81 * jnp.sum(self.masses * q.reshape(-1, 2)[:, 1])

    def holonomic(self, t, q):
        p = q.reshape(-1, 2)
        prev = jnp.concatenate([jnp.zeros((1, 2), q.dtype), p[:-1]])
        rows = 0.5 * (jnp.sum((p - prev) ** 2, axis=1) - 1.0)
        if self.redundant:  # the last link's constraint twice, scaled
            rows = jnp.concatenate([rows, 2.0 * rows[-1:]])
        return rows

    def nonholonomic(self, t, q, qd):
        return jnp.stack([qd[-2] * qd[-1] + 0.1 * qd[-2] ** 3 - jnp.sin(t)])

    def acceleration_constraint(self, t, q, qd):
        A = jnp.zeros((1, q.shape[0]), q.dtype).at[0, 0].set(1.0).at[0, 3].set(-0.5)
        return A, jnp.array([0.1 * jnp.cos(t)])

    def nonideal_force(self, t, q, qd):
        return -self.friction * qd


def _state(n_links, seed=0):
    rng = np.random.default_rng(seed)
    chain = PlanarChain.uniform(n_links)
    th = jnp.asarray(rng.uniform(-1, 1, n_links))
    return chain.state_from_angles(th, jnp.asarray(rng.uniform(-1, 1, n_links)))


@eqx.filter_jit
def _terms(system, q, qd, solver, t=0.3):
    return evaluate(system, jnp.asarray(t, q.dtype), q, qd, ukjax.NoStabilization(), solver).terms


def _agree(system, q, qd, rtol=1e-10):
    s, d = _terms(system, q, qd, STRUCTURED), _terms(system, q, qd, DENSE)
    assert _structure(system, q, STRUCTURED) is not None, "the structured path was not taken"
    scale = 1.0 + float(jnp.max(jnp.abs(d.qdd)))
    for name in ("qdd", "a", "Qc_ideal", "Qc_nonideal", "residual"):
        x, y = getattr(s, name), getattr(d, name)
        assert x.shape == y.shape, name
        assert float(jnp.max(jnp.abs(x - y))) <= rtol * scale, (name, x, y)
    assert abs(float(s.inconsistency) - float(d.inconsistency)) < 1e-9
    return s


@pytest.mark.parametrize(
    "n_links", [pytest.param(1, marks=pytest.mark.slow), 3, pytest.param(7, marks=pytest.mark.slow)]
)
def test_chain_matches_dense(n_links):
    chain = PlanarChain.uniform(n_links, damping=0.2)
    q, qd = _state(n_links)
    s = _agree(chain, q, qd)
    A, b = ukjax.constraint_matrices(chain, 0.3, q, qd)
    np.testing.assert_allclose(A @ s.qdd, b, atol=1e-10)


class ContradictoryChain(ukjax.System):
    """A chain as a user writes it (an `int` field), plus two raw rows that ask the first
    bob for two different horizontal accelerations: inconsistent constraints."""

    links: int

    def mass_matrix(self, t, q):
        return jnp.eye(2 * self.links, dtype=q.dtype)

    def potential_energy(self, t, q):
        return 9.81 * jnp.sum(q[1::2])

    def holonomic(self, t, q):
        p = q.reshape(self.links, 2)
        prev = jnp.concatenate([jnp.zeros((1, 2), q.dtype), p[:-1]])
        return jnp.sum((p - prev) ** 2, axis=1) - 1.0

    def acceleration_constraint(self, t, q, qd):
        A = jnp.zeros((2, q.shape[0]), q.dtype).at[:, 0].set(1.0)
        return A, jnp.array([0.0, 3.0], q.dtype)


def test_inconsistent_rows_measure_as_in_the_dense_solve():
    """The structured solve's relative least-squares residual (from its Gram matrix) is the
    dense solve's, well above the tolerance, on rows that contradict each other."""
    system = ContradictoryChain(links=4)
    q, qd = _state(4, seed=2)
    s, d = _terms(system, q, qd, STRUCTURED), _terms(system, q, qd, DENSE)
    assert _structure(system, q, STRUCTURED) is not None
    assert float(d.inconsistency) > 100 * default_consistency_tol(q.dtype)
    np.testing.assert_allclose(float(s.inconsistency), float(d.inconsistency), rtol=1e-6)


@pytest.mark.slow  # default-suite time; values at redundant rows: the derivative-rule test
@pytest.mark.parametrize("redundant", [False, True])
def test_block_mass_all_row_kinds_and_nonideal_force(redundant):
    system = BlockChain(jnp.array([1.0, 2.0, 1.5, 0.7]), redundant=redundant)
    q, qd = _state(4, seed=3)
    s = _agree(system, q, qd)
    A, b = ukjax.constraint_matrices(system, 0.3, q, qd)
    # Consistent rows are met (redundant ones too); ideal forces do no virtual work on
    # the null space of A, and the non-ideal part is M (I - A_M^+ A) M^{-1} C.
    np.testing.assert_allclose(A @ s.qdd, b, atol=1e-9)
    M, Q = ukjax.mass_and_force(system, 0.3, q, qd)
    np.testing.assert_allclose(M @ s.qdd, Q + s.Qc_ideal + s.Qc_nonideal, atol=1e-9)


def test_jacobian_colouring_separates_shared_rows():
    chain = PlanarChain.uniform(6)
    q, qd = _state(6)
    A, _ = ukjax.constraint_matrices(chain, 0.0, q, qd)
    pattern = np.asarray(A) != 0
    colors, k = color_columns(pattern)
    assert k == 4  # x and y of alternating bodies: the chain's Jacobian needs 4 products
    for c in range(k):
        cols = [j for j, cj in enumerate(colors) if cj == c]
        assert np.all(pattern[:, cols].sum(axis=1) <= 1)


@pytest.mark.slow  # default-suite time (6 s)
def test_auto_kernels_choose_structure_by_size_and_work():
    auto = ukjax.Regularized()  # the default: from n = 9, where it does 10x less work
    q16, _ = _state(8)
    structure = _structure(PlanarChain.uniform(8), q16, auto)
    assert structure is not None and multiply_adds(structure) < 200  # O(n): 133
    # n = 4 to 8, where the dense solve is written out too: 2.5x less work is enough
    q8, _ = _state(4)
    assert _structure(PlanarChain.uniform(4), q8, auto) is not None  # 9x less work
    nfb = NFourBar()
    assert _structure(nfb, nfb.initial_state()[0], auto) is None  # 1.6x: kept dense
    q12, _ = _state(6)
    assert _structure(PlanarChain.uniform(6), q12, auto) is not None  # n = 12: 20x less work
    high = ukjax.Regularized(kernels=ukjax.AutoKernels(min_structured=16))
    assert _structure(PlanarChain.uniform(6), q12, high) is None  # below the size asked for
    assert _structure(nfb, nfb.initial_state()[0], STRUCTURED) is not None  # asked for
    off = ukjax.Regularized(kernels=ukjax.AutoKernels(min_structured=None))
    assert _structure(PlanarChain.uniform(8), q16, off) is None
    # A loop of redundant rows whose Gram matrix fills in: 8x less work only, kept dense.
    bricard = Bricard()
    assert _structure(bricard, bricard.initial_state()[0], auto) is None
    # A dense mass matrix and a full Jacobian (four-bar in absolute angles): nothing to gain.
    fb = FourBarLinkage()
    qf, _ = fb.initial_state(0.5, 0.0)
    assert _structure(fb, qf, STRUCTURED) is None
    # Solvers without a Gram-matrix form (SVD) keep the dense path.
    assert _structure(PlanarChain.uniform(8), q16, ukjax.SVD()) is None


@pytest.mark.slow
def test_simulate_uses_structure_under_vmap_over_parameters():
    # The system's fields are batch tracers: the analysis takes them as any value.
    ts = jnp.linspace(0.0, 0.5, 3)
    chain = PlanarChain.uniform(3, damping=0.1)
    q0, qd0 = chain.state_from_angles(jnp.linspace(0.2, 0.8, 3), jnp.zeros(3))
    masses = jnp.array([[1.0, 1.0, 1.0], [0.5, 2.0, 3.0]])

    def run(m, solver):
        s = eqx.tree_at(lambda c: c.masses, chain, m)
        kw = dict(solver=ukjax.RK4(), stepsize_controller=diffrax.ConstantStepSize(), dt0=0.01)
        return ukjax.simulate(s, q0, qd0, ts, uk_solver=solver, **kw).q

    fast = jax.vmap(lambda m: run(m, STRUCTURED))(masses)
    np.testing.assert_allclose(fast[1], run(masses[1], DENSE), atol=1e-11)
    assert float(jnp.max(jnp.abs(fast[0] - fast[1]))) > 1e-3  # each member its own masses


@pytest.mark.slow
def test_gradients_match_dense_and_finite_differences():
    chain = PlanarChain.uniform(4, damping=0.1)
    q, qd = _state(4, seed=5)

    def f(masses, solver):
        s = eqx.tree_at(lambda c: c.masses, chain, masses)
        return jnp.sum(jnp.sin(ukjax.acceleration(s, 0.0, q, qd, uk_solver=solver)))

    m0 = jnp.array([1.0, 1.5, 0.8, 1.2])
    g = jax.grad(f)(m0, STRUCTURED)
    np.testing.assert_allclose(g, jax.grad(f)(m0, DENSE), rtol=1e-8, atol=1e-10)
    h = 1e-6
    fd = [(f(m0.at[i].add(h), DENSE) - f(m0.at[i].add(-h), DENSE)) / (2 * h) for i in range(4)]
    np.testing.assert_allclose(g, jnp.stack(fd), rtol=1e-6, atol=1e-8)


@pytest.mark.slow  # 27 s: the default suite's longest test, moved to keep it under 5 minutes
@pytest.mark.parametrize("redundant", [False, True])
def test_the_structured_derivative_rule_matches_the_dense_one(redundant):
    """Values, a forward-mode tangent and a reverse-mode cotangent (random directions) of
    every UK term with respect to the masses, the positions and the velocities (so of M,
    Q, A, b and the non-ideal force C at once) against the dense path's (its own exact
    rule, checked against closed forms in tests/test_uk_vjp.py), with all row kinds, and
    with redundant rows."""
    system = BlockChain(jnp.array([1.0, 2.0, 1.5]), redundant=redundant)
    q, qd = _state(3, seed=3)
    names = ("qdd", "a", "Qc_ideal", "Qc_nonideal", "residual")

    def f(x, solver):
        masses, q, qd = x
        s = eqx.tree_at(lambda c: c.masses, system, masses)
        terms = evaluate(s, jnp.asarray(0.3), q, qd, ukjax.NoStabilization(), solver).terms
        return jnp.concatenate([getattr(terms, k) for k in names])

    x = (system.masses, q, qd)
    rng = np.random.default_rng(1)
    dx = jax.tree_util.tree_map(lambda v: jnp.asarray(rng.standard_normal(v.shape)), x)
    assert _structure(system, q, STRUCTURED) is not None

    @jax.jit
    def derivatives(x, dx):
        out = {}
        for name, solver in (("structured", STRUCTURED), ("dense", DENSE)):
            value, tangent = jax.jvp(lambda x: f(x, solver), (x,), (dx,))
            _, pullback = jax.vjp(lambda x: f(x, solver), x)
            out[name] = (value, tangent, pullback(jnp.cos(jnp.arange(value.shape[0])))[0])
        return out

    out = derivatives(x, dx)
    for got, want in zip(
        jax.tree_util.tree_leaves(out["structured"]), jax.tree_util.tree_leaves(out["dense"])
    ):
        scale = 1.0 + float(jnp.max(jnp.abs(want)))
        assert float(jnp.max(jnp.abs(got - want))) < 1e-9 * scale


@pytest.mark.slow  # default-suite time; the same paths run in other default tests
def test_bad_mass_matrix_is_reported_per_trajectory():
    chain = PlanarChain(masses=jnp.array([1.0, -1.0, 1.0]), lengths=jnp.ones(3))
    q0, qd0 = chain.state_from_angles(jnp.linspace(0.2, 0.8, 3), jnp.zeros(3))
    kw = dict(solver=ukjax.RK4(), stepsize_controller=diffrax.ConstantStepSize(), dt0=0.1)
    sol = ukjax.simulate(
        chain, q0, qd0, jnp.linspace(0, 1, 3), throw=False, uk_solver=STRUCTURED, **kw
    )
    assert sol.result == ukjax.RESULTS.mass_matrix_not_spd
    assert bool(jnp.all(jnp.isnan(sol.q[1:])))
    with pytest.raises(Exception, match="mass matrix"):
        ukjax.acceleration(chain, 0.0, q0, qd0, uk_solver=STRUCTURED)


def test_float32():
    chain = PlanarChain.uniform(5)
    q, qd = (x.astype(jnp.float32) for x in _state(5))
    s = _terms(chain, q, qd, STRUCTURED)
    d = _terms(chain, q, qd, DENSE)
    assert s.qdd.dtype == jnp.float32
    np.testing.assert_allclose(s.qdd, d.qdd, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("robots", [4, pytest.param(5, marks=pytest.mark.slow)])
def test_the_check_holds_on_a_swarm_coming_to_rest(robots):
    """Point robots under the swarm law with Baumgarte feedback come to rest, where the
    rows' right-hand side e = b - A a is a few ulps of its terms (A = I: every b is
    consistent). XLA copied e into the solve's kernel and into its inconsistency check's,
    the copies rounded differently, and the check raised at some stage of 34 of 40 random
    starts of 4 robots at the defaults (the structured solve, n = 8) and of most starts of
    5 with StructuredKernels; the dense solve passed (stop 97). Every start must run with
    throw=True and follow the dense solve's path."""
    swarm = SwarmRobots(masses=jnp.full(robots, 2.0))
    rng = np.random.default_rng(robots)
    q0 = jnp.asarray(rng.uniform(0.0, 8.0, (8, 2 * robots)))
    qd0 = jnp.asarray(rng.uniform(0.0, 0.3, (8, 2 * robots)))
    ts = jnp.linspace(0.0, 40.0, 41)
    kernels = ukjax.AutoKernels() if robots == 4 else ukjax.StructuredKernels()
    assert _structure(swarm, q0[0], ukjax.Regularized(kernels=kernels)) is not None

    def run(solver):  # one trajectory at a time: a batch's program fuses otherwise
        one = jax.jit(lambda q, qd: ukjax.simulate(
            swarm, q, qd, ts, stabilization=ukjax.Baumgarte(alpha=1.0),
            initial_conditions=ukjax.IgnoreInitial(), uk_solver=solver,
        ))  # fmt: skip
        return [one(q, qd) for q, qd in zip(q0, qd0)]

    structured = run(ukjax.Regularized(kernels=kernels))
    dense = run(ukjax.Regularized(kernels=ukjax.AutoKernels(min_structured=None)))
    for s, d in zip(structured, dense):
        beta = jnp.linalg.norm(swarm.performance_error(s.q[-1], s.qd[-1]))
        assert float(beta) < 1e-12  # at rest
        np.testing.assert_allclose(s.q, d.q, rtol=0, atol=1e-9)
