"""simulate under every order of JAX transformations: the same values and derivatives
(to round-off) whether jit, vmap and the autodiff transformations are applied inside or
outside one another, at the defaults, on a system written as a user would write it (int
fields, its own coordinates). References: central differences, and the derivative of the
closed-form motion of a pendulum at small amplitude is not exact, so the checks compare
the transformation orders with one another and with finite differences of the forward
solve."""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ukjax


class Pendulum(ukjax.System):
    """A point mass on a rod in Cartesian coordinates (x, y), as a user writes it."""

    mass: int = 1
    length: int = 1
    g: float = 9.81

    def mass_matrix(self, t, q):
        return self.mass * jnp.eye(2)

    def potential_energy(self, t, q):
        return self.mass * self.g * q[1]

    def holonomic(self, t, q):
        return jnp.array([q @ q - self.length**2])


TS = jnp.linspace(0.0, 0.6, 4)
Q0 = jnp.array([jnp.sin(0.7), -jnp.cos(0.7)])


def loss(g):
    sol = ukjax.simulate(Pendulum(g=g), Q0, jnp.zeros(2), TS)
    return sol.q[-1, 0] + 0.5 * sol.qd[2, 1]


def central(f, x, h=1e-5):
    return (f(x + h) - f(x - h)) / (2 * h)


@pytest.mark.extended  # 100 s; CI keeps forward and reverse mode at the defaults (test_adjoint.py)
def test_first_derivatives_agree_in_every_order():
    """grad, jacrev, jacfwd and jvp, each with jit inside and outside: equal to round-off
    and to central differences of the forward solve; under vmap, to the round-off of the
    integration."""
    g = 9.81
    want = central(jax.jit(loss), g)
    orders = {
        "grad": jax.grad(loss),
        "jit(grad)": jax.jit(jax.grad(loss)),
        "grad(jit)": jax.grad(jax.jit(loss)),
        "jacfwd": jax.jacfwd(loss),
        "jacfwd(jit)": jax.jacfwd(jax.jit(loss)),
        "jit(jacfwd)": jax.jit(jax.jacfwd(loss)),
        "jvp(jit)": lambda x: jax.jvp(jax.jit(loss), (x,), (1.0,))[1],
    }
    got = {name: float(f(g)) for name, f in orders.items()}
    for name, value in got.items():
        np.testing.assert_allclose(value, got["grad"], rtol=1e-11, err_msg=name)
    # the discrete derivative against differences of adaptive runs (noise ~ tol / h)
    np.testing.assert_allclose(got["grad"], want, rtol=0, atol=1e-6)
    gs = jnp.array([9.0, 9.81])
    batched = {
        "vmap(grad)": jax.vmap(jax.grad(loss))(gs),
        "vmap(jit(jacfwd))": jax.vmap(jax.jit(jax.jacfwd(loss)))(gs),
        "jit(vmap(jvp))": jax.jit(jax.vmap(lambda x: jax.jvp(loss, (x,), (1.0,))[1]))(gs),
    }
    # A batched program fuses its operations differently, and the step-size controller's
    # error estimate (a difference of the 8th- and 7th-order solutions, ~1e-12 here) carries
    # that rounding into the step sizes; the saves between steps move with them by a share
    # of the dense output's error. So batched and single runs agree to the integration's
    # round-off (1e-11 absolute against the default tolerance of 1e-12, as the forward test
    # below; 8.5e-13 measured for vmap(grad) at g = 9), and a lane does not depend on the
    # values in the other lanes (the same batched program: equal to rounding).
    single = float(jax.grad(loss)(9.0))
    lanes = jax.vmap(jax.grad(loss))(jnp.array([9.0, 9.0]))
    for name, values in batched.items():
        np.testing.assert_allclose(values[1], got["grad"], rtol=0, atol=1e-11, err_msg=name)
        np.testing.assert_allclose(values[0], single, rtol=0, atol=1e-11, err_msg=name)
    np.testing.assert_allclose(batched["vmap(grad)"][0], lanes[1], rtol=1e-14)


@pytest.mark.slow  # default-suite time (13 s); jacfwd at the defaults: test_adjoint.py
def test_forward_mode_through_a_jit_at_the_defaults():
    """The order that used to fail (forward mode through a jit, jax.jacfwd(jax.jit(f)))
    at the defaults against central differences (the default suite; every order against
    every other: the slow tests below, and test_adjoint's reverse mode)."""
    g = 9.81
    forward = jax.jacfwd(jax.jit(loss))(g)
    np.testing.assert_allclose(forward, central(jax.jit(loss), g), rtol=0, atol=1e-6)


@pytest.mark.slow
def test_vmap_and_jit_in_either_order_give_the_same_run():
    """jit(vmap(simulate)) and vmap(jit(simulate)) compile the same run program: equal
    saves (bitwise here: the same operations), and equal to a loop of single runs to
    round-off of the integration (a batched program fuses its operations differently;
    1e-11 against the default tolerance of 1e-12, 7.8e-13 measured)."""
    gs = jnp.array([9.0, 9.81, 10.5])
    run = lambda g: ukjax.simulate(Pendulum(g=g), Q0, jnp.zeros(2), TS).q
    a = jax.jit(jax.vmap(run))(gs)
    b = jax.vmap(jax.jit(run))(gs)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    for i, g in enumerate(gs):
        np.testing.assert_allclose(a[i], run(g), rtol=0, atol=1e-11)


@pytest.mark.extended  # second derivatives in CI: test_adjoint's hessian vs the closed form
def test_second_derivatives_agree_in_every_order():
    """hessian (forward over reverse), jacrev of jacfwd, jacfwd of jacfwd and jit of
    hessian: equal to round-off and to central differences of the gradient."""
    g = 9.81
    want = central(jax.jit(jax.grad(loss)), g, h=1e-4)
    orders = {
        "hessian": jax.hessian(loss),
        "jacrev(jacfwd)": jax.jacrev(jax.jacfwd(loss)),
        "jacfwd(jacfwd)": jax.jacfwd(jax.jacfwd(loss)),
        "jit(hessian)": jax.jit(jax.hessian(loss)),
    }
    got = {name: float(f(g)) for name, f in orders.items()}
    for name, value in got.items():
        np.testing.assert_allclose(value, got["hessian"], rtol=1e-9, err_msg=name)
    np.testing.assert_allclose(got["hessian"], want, rtol=1e-5)


@pytest.mark.slow  # second derivatives: CI's slow tier (the full orders: extended)
def test_reverse_over_forward_of_a_short_run():
    """jax.jacrev of jax.jacfwd through a short fixed-step run (RK4, four steps) equals
    central differences of the first derivative. It failed in JAX's
    transpose rule of the replay's `lax.custom_linear_solve` (a constant block in the
    right-hand side of the differentiated solve) until the matrix's identity block was
    written as depending on the recorded run."""
    ts = jnp.linspace(0.0, 0.2, 3)
    rk4 = dict(solver=ukjax.RK4(), dt0=0.05, stepsize_controller=diffrax.ConstantStepSize())

    def short(g):
        sol = ukjax.simulate(Pendulum(g=g), Q0, jnp.zeros(2), ts, **rk4)
        return sol.q[-1, 0] + 0.5 * sol.qd[1, 1]

    g = 9.81
    rof = float(jax.jacrev(jax.jacfwd(short))(g))
    np.testing.assert_allclose(rof, central(jax.jit(jax.grad(short)), g, h=1e-4), rtol=1e-6)
