"""Compiled-program hygiene: reduction-free unrolled kernels and ukjax's own XLA options."""

import inspect

import diffrax
import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest

import ukjax
import ukjax._xla as xla
from ukjax._kernels import LAPACK, UNROLLED


REDUCTIONS = {"reduce_sum", "reduce_max", "reduce_min", "dot_general", "reduce_precision"}


def primitives(fn, *args) -> set[str]:
    """Every primitive in the jaxpr of fn(*args), sub-jaxprs included; of a
    platform-dependent `cond` (jnp.diagonal has a TPU branch) only the default branch."""
    seen: set[str] = set()

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            seen.add(eqn.primitive.name)
            platforms = eqn.params.get("branches_platforms")
            if platforms is not None:
                default = [b for b, p in zip(eqn.params["branches"], platforms) if p is None]
                subs = [b.jaxpr for b in default]
            else:
                subs = jax.extend.core.jaxprs_in_params(eqn.params)
            for sub in subs:
                walk(sub)

    walk(jax.make_jaxpr(fn)(*args).jaxpr)
    return seen


@pytest.mark.parametrize("shape", [(3, 4, ()), (2, 5, (3,)), (0, 3, ()), (4, 0, (2,))])
def test_unrolled_products_are_reduction_free_and_exact(rng, shape):
    """The unrolled matmul and Gram matrix are chains of multiplies and adds (no reduce or
    dot op for XLA:CPU to hand to a slow library kernel under vmap), equal to `@`,
    including with empty dimensions."""
    m, k, tail = shape
    A = rng.standard_normal((m, k))
    X = rng.standard_normal((k,) + tail)
    batched = lambda f, *xs: jax.vmap(f)(*[jnp.stack([x, 2 * x]) for x in xs])
    for op, args in (("matmul", (A, X)), ("gram", (A,))):
        fn = getattr(UNROLLED, op)
        assert not primitives(lambda *xs, fn=fn: batched(fn, *xs), *args) & REDUCTIONS, op
        np.testing.assert_allclose(fn(*args), getattr(LAPACK, op)(*args), rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(
            batched(fn, *args)[1], getattr(LAPACK, op)(*[2 * x for x in args]), rtol=1e-13
        )


def test_regularized_unrolled_solve_is_reduction_free(rng):
    """The default UK solve's pseudo-inverse (Regularized, unrolled kernels) under vmap."""
    B = rng.standard_normal((3, 4))
    E = rng.standard_normal((3, 2))
    solver = ukjax.Regularized(kernels=ukjax.UnrolledKernels())
    fn = jax.vmap(lambda b, e: solver.pinv(b, e, UNROLLED))
    assert not primitives(fn, np.stack([B, B]), np.stack([E, E])) & REDUCTIONS
    np.testing.assert_allclose(
        fn(np.stack([B, B]), np.stack([E, E]))[0], np.linalg.pinv(B) @ E, rtol=1e-8, atol=1e-8
    )


def test_compiler_options_leave_a_user_setting_alone(monkeypatch):
    """Each call reads XLA_FLAGS afresh (ukjax keeps no module-level cache of them)."""
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_experimental_ynn_fusion_type=reduce")
    assert ukjax.compiler_options() == {}
    monkeypatch.delenv("XLA_FLAGS")
    opts = ukjax.compiler_options()
    if jax.default_backend() == "cpu":
        # jaxlib 0.10 knows the option; another version may not (then nothing is set)
        assert opts in ({"xla_cpu_experimental_ynn_fusion_type": ""}, {})
    else:
        assert opts == {}
    single = ukjax.compiler_options(batched=False)
    if jax.default_backend() == "cpu":
        assert single in ({"xla_cpu_use_fusion_emitters": False}, {})
    else:
        assert single == {}
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=true")
    assert ukjax.compiler_options(batched=False) == {}


@pytest.mark.slow  # default-suite time (7 s)
def test_simulate_at_top_level_matches_a_users_jit():
    """simulate's own program (compiled with compiler_options(batched=False) when it is
    the outermost program) and the same solve under a user's jit (compiled with JAX's
    defaults) give the same motion."""
    from ukjax.systems import DoubleRodPendulum

    system = DoubleRodPendulum()
    q0, qd0 = system.initial_state()
    ts = jnp.linspace(0.0, 1.0, 6)
    run = lambda q, qd: ukjax.simulate(system, q, qd, ts).q
    top = run(q0, qd0)
    nested = jax.jit(run)(q0, qd0)
    assert np.all(np.isfinite(top))
    np.testing.assert_allclose(top, nested, rtol=1e-10, atol=1e-12)


def test_options_are_used_only_by_the_outermost_program():
    """JAX refuses compiler options on a nested jit: a function under ukjax's `jit` runs
    the same at top level (with the options) and under a user's jit, vmap or grad (without
    them), as sweep's chunk program is used."""
    traces = []

    def f(x):
        traces.append(1)
        return jnp.sin(x) * x

    g = xla.jit(f)
    x = jnp.linspace(0.0, 1.0, 5)
    expected = np.sin(np.asarray(x)) * np.asarray(x)
    np.testing.assert_allclose(g(x), expected, rtol=1e-14)
    np.testing.assert_allclose(g(x), expected, rtol=1e-14)
    assert len(traces) == 1  # compiled once at top level, then reused
    np.testing.assert_allclose(jax.jit(g)(x), expected, rtol=1e-14)
    np.testing.assert_allclose(jax.vmap(g)(x[:, None])[:, 0], expected, rtol=1e-14)
    grad = jax.grad(lambda v: g(v).sum())(x)
    np.testing.assert_allclose(grad, np.cos(x) * x + np.sin(x), rtol=1e-13)


@pytest.mark.parametrize("sizes", [(3, 3), (1,), (5, 2, 4), (40, 40)])
def test_error_norm_is_the_rms_norm_and_reduction_free_for_small_states(rng, sizes):
    """The default controller's norm equals optimistix's RMS norm (value and derivative,
    zero derivative at zero); up to UNROLLED_NORM_MAX entries no reduction is left to
    XLA (batched reductions over a short axis go to YNNPACK on the CPU)."""
    import optimistix as optx

    from ukjax._integrators import UNROLLED_NORM_MAX, error_norm

    tree = tuple(jnp.asarray(rng.standard_normal(n)) for n in sizes)
    np.testing.assert_allclose(error_norm(tree), optx.rms_norm(tree), rtol=1e-14)
    grads = jax.grad(error_norm)(tree), jax.grad(optx.rms_norm)(tree)
    for g, h in zip(*grads):
        np.testing.assert_allclose(g, h, rtol=1e-13)
    t = tuple(jnp.asarray(rng.standard_normal(n)) for n in sizes)
    np.testing.assert_allclose(
        jax.jvp(error_norm, (tree,), (t,))[1], jax.jvp(optx.rms_norm, (tree,), (t,))[1], rtol=1e-13
    )
    zeros = tuple(jnp.zeros(n) for n in sizes)
    assert float(error_norm(zeros)) == 0.0
    assert all(bool(jnp.all(g == 0)) for g in jax.grad(error_norm)(zeros))
    batch = tuple(jnp.zeros((8, n)) for n in sizes)
    used = primitives(jax.vmap(error_norm), batch)
    if sum(sizes) <= UNROLLED_NORM_MAX:
        assert not used & REDUCTIONS, used & REDUCTIONS


def test_simulate_controls_the_error_with_the_reduction_free_norm():
    """The default controller is diffrax's PID controller with ukjax's error norm; a
    controller the user passes is used as given."""
    from ukjax._integrators import error_norm
    from ukjax._simulate import _controller

    c = _controller(None, 1e-9, 1e-10, None, jnp.float64)
    assert isinstance(c, diffrax.PIDController)
    assert c.norm is error_norm and (c.rtol, c.atol) == (1e-9, 1e-10)
    mine = diffrax.PIDController(rtol=1e-6, atol=1e-6)
    assert _controller(mine, None, None, None, jnp.float64) is mine


class _Counted(ukjax.System):
    """A pendulum in Cartesian coordinates whose mass matrix and constraint count their
    traces (a Python side effect runs once per trace, never when a compiled program runs)."""

    mass: float = 1.0
    length: float = 1.0
    links: int = 1  # an int field: static, part of the program

    def mass_matrix(self, t, q):
        _TRACES.append(t)
        return self.mass * jnp.eye(2 * self.links)

    def forces(self, t, q, qd):
        return jnp.array([0.0, -9.81 * self.mass])

    def holonomic(self, t, q):
        _TRACES.append(t)
        return jnp.array([q @ q - self.length**2])


_TRACES: list = []  # noqa: RUF012 - a test's own trace counter


@pytest.mark.parametrize(
    "fn",
    [
        ukjax.mass_and_force,
        ukjax.energy,
        ukjax.constraint_matrices,
        ukjax.project_initial_conditions,
    ],
    ids=lambda f: f.__name__,
)
def test_an_eager_call_is_one_program_compiled_once(fn):
    """Called at the prompt, a per-state function is traced once and reused for another
    time and other float parameters (each JAX operation compiled on its own before, and
    the projection traced its loops again at every call); inside a user's trace it is
    inlined (the jaxpr of the undecorated function: no nested program) and gives the same
    numbers."""
    q, qd = jnp.array([0.6, -0.8]), jnp.array([0.8, 0.6])
    _TRACES.clear()
    first = fn(_Counted(), 0.0, q, qd)
    traces = len(_TRACES)
    assert traces >= 1
    again = fn(_Counted(mass=2.0, length=1.0), 0.5, q, qd)  # new time, new mass: same program
    assert len(_TRACES) == traces
    fn(_Counted(), 1, q, qd)  # a Python int time is passed as a float array
    assert len(_TRACES) == traces
    system = _Counted(mass=2.0)
    undecorated = inspect.unwrap(fn)  # below full_precision and eager_jit
    with jax.default_matmul_precision("highest"):
        expect = jax.make_jaxpr(lambda t, q, qd: undecorated(system, t, q, qd))(0.5, q, qd)
    traced = jax.make_jaxpr(lambda t, q, qd: fn(system, t, q, qd))(0.5, q, qd)
    assert str(traced) == str(expect)
    inline = jax.jit(lambda t, q, qd: fn(system, t, q, qd))(0.5, q, qd)
    for a, b in zip(jax.tree.leaves(again), jax.tree.leaves(inline)):
        np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-15)
    assert jax.tree.structure(first) == jax.tree.structure(again)


def test_the_collector_is_paused_while_ukjax_traces_and_restored_after():
    """Python's cyclic garbage collector is off inside ukjax's jit (while it traces) and
    back as it was after: on after a call that found it on (also when the call raises),
    still off after one that found it off."""
    import gc

    seen = []
    probe = xla.jit(lambda x: seen.append(gc.isenabled()) or x + 1.0)
    was = gc.isenabled()
    try:
        gc.enable()
        assert float(probe(jnp.asarray(1.0))) == 2.0
        assert seen == [False] and gc.isenabled()
        with pytest.raises(ZeroDivisionError), xla.collector_paused():
            assert not gc.isenabled()
            _ = 1 / 0
        assert gc.isenabled()
        gc.disable()
        jax.jit(lambda x: probe(x))(jnp.asarray(2.0))  # inside a user's trace
        assert seen == [False, False] and not gc.isenabled()
        gc.enable()
        sol = ukjax.simulate(
            ukjax.systems.BouncingBall(), jnp.array([1.0]), jnp.zeros(1), jnp.linspace(0, 1, 3)
        )
        assert int(sol.events.count) >= 1 and gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
