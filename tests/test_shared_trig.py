"""Sines and cosines computed once per element (`ukjax._shared_trig`, put in place by
`ukjax._rewrite.rewritten`): the same bits and derivatives as `jnp.sin` and `jnp.cos`, the
same Lagrange terms as a closed form, and, in the compiled program of a batched mass
matrix, each sine and cosine evaluated once per element of the angles."""

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ukjax
from ukjax._rewrite import rewritten
from ukjax._shared_trig import shared_cos, shared_sin


G = 9.81


def _angles(dtype):
    big = 1e300 if dtype == jnp.float64 else 1e38
    special = [0.0, -0.0, 1e-30, 0.5, -2.0, 3.0e4, 1e6, 1e15, -big, np.inf, -np.inf, np.nan]
    rng = np.random.default_rng(0)
    return jnp.asarray(np.concatenate([special, rng.uniform(-40, 40, 200)]), dtype)


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
def test_the_same_bits_as_jnp_sin_and_cos(dtype):
    x = _angles(dtype)
    for shared, plain in [(shared_sin, jnp.sin), (shared_cos, jnp.cos)]:
        for wrap in (lambda f: f, jax.jit):
            got, want = np.asarray(wrap(shared)(x)), np.asarray(wrap(plain)(x))
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)  # NaN where the plain one is NaN


def test_derivatives_are_cos_and_minus_sin_to_every_order():
    x = _angles(jnp.float64)[:8]
    finite = x[jnp.isfinite(x)]
    each = lambda f: jax.vmap(f)(finite)
    np.testing.assert_array_equal(each(jax.grad(shared_sin)), jnp.cos(finite))
    np.testing.assert_array_equal(each(jax.grad(shared_cos)), -jnp.sin(finite))
    np.testing.assert_array_equal(each(jax.grad(jax.grad(shared_sin))), -jnp.sin(finite))
    third = jax.jacfwd(jax.jacrev(jax.grad(shared_cos)))
    np.testing.assert_array_equal(each(third), jnp.sin(finite))
    t = jnp.linspace(-1.0, 1.0, finite.size)
    _, tangent = jax.jvp(shared_sin, (finite,), (t,))
    np.testing.assert_array_equal(tangent, jnp.cos(finite) * t)


def _energy(q, qd):
    """A chain's kinetic energy in absolute angles, as a user writes it (nested jit too)."""
    vx = jax.jit(lambda a, b: jnp.cumsum(jnp.cos(a) * b))(q, qd)
    vy = jnp.cumsum(jnp.sin(q) * qd)
    return 0.5 * jnp.sum(vx**2 + vy**2)


def test_a_rewritten_function_keeps_its_values_and_derivatives():
    rng = np.random.default_rng(1)
    q, qd, v = (jnp.asarray(rng.normal(size=5)) for _ in range(3))
    out = rewritten(_energy, sums=False)
    top = [e.primitive.name for e in jax.make_jaxpr(out)(q, qd).jaxpr.eqns]
    assert "sin" not in top and "cos" not in top  # both behind shared_sin / shared_cos
    assert float(out(q, qd)) == pytest.approx(float(_energy(q, qd)), rel=1e-15)  # eager
    # the transformations compiled (eager, every primitive compiles on its own: slow)
    for f in (jax.grad, jax.jacfwd, jax.jacrev):
        np.testing.assert_allclose(jax.jit(f(out))(q, qd), jax.jit(f(_energy))(q, qd), rtol=1e-14)
    hess = lambda T: jax.jit(jax.jacfwd(jax.grad(T, argnums=1), argnums=1))(q, qd)
    np.testing.assert_allclose(hess(out), hess(_energy), rtol=1e-14, atol=1e-14)
    mixed = lambda T: jax.jit(
        lambda a: jax.jvp(lambda a: jax.grad(T, argnums=1)(a, qd), (a,), (v,))[1]
    )(q)
    np.testing.assert_allclose(mixed(out), mixed(_energy), rtol=1e-13, atol=1e-13)
    batch = jnp.stack([q, 2.0 * q]), jnp.stack([qd, -qd])
    np.testing.assert_allclose(jax.vmap(out)(*batch), jax.vmap(_energy)(*batch), rtol=1e-15)


class _AngleChain(ukjax.System):
    links: int
    mass: float = 1.0

    def kinetic_energy(self, t, q, qd):
        return self.mass * _energy(q, qd)

    def potential_energy(self, t, q):
        return -G * self.mass * jnp.sum(jnp.cumsum(jnp.cos(q)))


def _closed_form(links, q, qd):
    """M and Q of the same chain written out: M_ij = m (N - max(i, j)) cos(q_i - q_j)."""
    i = np.arange(links)
    w = links - np.maximum(i[:, None], i[None, :])
    d = q[:, None] - q[None, :]
    M = w * np.cos(d)
    Q = -(w * np.sin(d)) @ qd**2 - G * (links - i) * np.sin(q)
    return M, Q


@pytest.mark.parametrize("dtype, tol", [(jnp.float64, 1e-12), (jnp.float32, 2e-4)])
def test_lagrange_terms_of_a_chain_in_angles_match_the_closed_form(dtype, tol):
    links = 6
    rng = np.random.default_rng(2)
    q, qd = rng.uniform(-1.0, 1.0, (3, links)), rng.normal(size=(3, links))
    terms = jax.jit(jax.vmap(lambda a, b: ukjax.mass_and_force(_AngleChain(links), 0.0, a, b)))
    M, Q = terms(jnp.asarray(q, dtype), jnp.asarray(qd, dtype))
    assert M.dtype == dtype
    for k in range(3):
        M_ref, Q_ref = _closed_form(links, q[k], qd[k])
        scale = np.abs(Q_ref).max()
        np.testing.assert_allclose(M[k], M_ref, atol=tol * links, rtol=tol)
        np.testing.assert_allclose(Q[k], Q_ref, atol=tol * scale, rtol=tol)


def _trig_evaluations(hlo: str) -> int:
    """Sines and cosines a compiled CPU program evaluates: each `sine`/`cosine` counted
    once per element of the output of the computation (fusion) that holds it, which is
    how often a loop fusion evaluates it."""
    total, elements = 0, 0
    for line in hlo.splitlines():
        head = re.match(r"^(?:ENTRY )?%\S+ \(.*\) -> (.*) \{$", line)
        if head:
            shapes = re.findall(r"\[([\d,]*)\]", head.group(1))
            elements = max(math.prod(int(d) for d in s.split(",") if d) for s in shapes)
        elif re.search(r" (?:sine|cosine)\(", line):
            total += elements
    return total


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="XLA:CPU's fusion decisions")
def test_a_batched_mass_matrix_evaluates_each_sine_once_per_angle():
    # XLA:CPU copies a plain cos(q) into each fusion that broadcasts it over the n + 1
    # tangents of the Hessian (9216 evaluations here at jaxlib 0.10.2, 12x the 768 below).
    batch, n = 64, 6
    system = _AngleChain(n)
    energy = lambda q, qd: system.kinetic_energy(0.0, q, qd)
    hessian = lambda T: jax.vmap(jax.jacfwd(jax.grad(T, argnums=1), argnums=1))
    args = jnp.zeros((batch, n)), jnp.zeros((batch, n))
    compiled = jax.jit(hessian(rewritten(energy, sums=False))).lower(*args).compile()
    assert _trig_evaluations(compiled.as_text()) <= 2 * batch * n
    terms = jax.vmap(lambda a, b: ukjax.mass_and_force(system, 0.0, a, b))
    compiled = jax.jit(terms).lower(*args).compile()  # T's and V's sines and cosines
    assert _trig_evaluations(compiled.as_text()) <= 2 * 2 * batch * n


class _ClosedFormChain(ukjax.System):
    """The same chain with M and Q written out by the user (`mass_and_force`)."""

    links: int

    def mass_and_force(self, t, q, qd):
        i = jnp.arange(self.links)
        w = self.links - jnp.maximum(i[:, None], i[None, :])
        d = q[:, None] - q[None, :]
        Q = -(w * jnp.sin(d)) @ qd**2 - G * (self.links - i) * jnp.sin(q)
        return w * jnp.cos(d), Q


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="XLA:CPU's fusion decisions")
def test_a_written_mass_matrix_is_not_recomputed_by_the_checks():
    # The checks read M (finiteness, asymmetry through a transpose); with the user's cos
    # copied into their fusions, the cosines were evaluated again for each of them.
    batch, n = 32, 6
    system = _ClosedFormChain(n)
    rng = np.random.default_rng(4)
    q, qd = jnp.asarray(rng.uniform(-1, 1, (batch, n))), jnp.asarray(rng.normal(size=(batch, n)))
    accel = jax.jit(jax.vmap(lambda a, b: ukjax.acceleration(system, 0.0, a, b)))
    assert _trig_evaluations(accel.lower(q, qd).compile().as_text()) <= batch * (2 * n * n + n)
    reference = jax.vmap(lambda a, b: ukjax.acceleration(_AngleChain(n), 0.0, a, b))(q, qd)
    np.testing.assert_allclose(accel(q, qd), reference, rtol=1e-10, atol=1e-10)
