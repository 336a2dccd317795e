"""Servo-constraint control (issue 15): UK controls against hand-written inverse dynamics,
closed forms of the servo error dynamics, and an under-actuated cart against a scipy
reference."""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import ukjax
from ukjax.systems import CartesianPendulum, CartPendulum, TwoLinkArm


class Track(ukjax.Servo):
    """q(t) follows q_d(t) = amp * sin(omega t + phase) (one entry per coordinate)."""

    amp: jax.Array
    omega: float = 1.5
    phase: float = 0.3

    def holonomic(self, t, q):
        return q - self.amp * jnp.sin(self.omega * t + self.phase)


def computed_torque(arm: TwoLinkArm, servo: Track, t, q, qd):
    """Hand-written inverse dynamics of the two-link arm (point masses at the link ends,
    angles from the downward vertical): tau = M(q) v + c(q, qd) + G(q), with the commanded
    acceleration v = qdd_d - 2 alpha (qd - qd_d) - beta^2 (q - q_d)."""
    m1, m2, l1, l2, g = arm.m1, arm.m2, arm.l1, arm.l2, arm.g
    c2, s2 = np.cos(q[1]), np.sin(q[1])
    M = np.array(
        [
            [
                (m1 + m2) * l1**2 + m2 * l2**2 + 2 * m2 * l1 * l2 * c2,
                m2 * l2**2 + m2 * l1 * l2 * c2,
            ],
            [m2 * l2**2 + m2 * l1 * l2 * c2, m2 * l2**2],
        ]
    )
    h = m2 * l1 * l2 * s2
    c = np.array([-h * (2 * qd[0] * qd[1] + qd[1] ** 2), h * qd[0] ** 2])
    G = np.array(
        [
            (m1 + m2) * g * l1 * np.sin(q[0]) + m2 * g * l2 * np.sin(q[0] + q[1]),
            m2 * g * l2 * np.sin(q[0] + q[1]),
        ]
    )
    amp, w, ph = np.asarray(servo.amp), servo.omega, servo.phase
    qd_d = amp * w * np.cos(w * t + ph)
    q_d = amp * np.sin(w * t + ph)
    qdd_d = -amp * w**2 * np.sin(w * t + ph)
    alpha, beta = float(servo.gains.alpha), float(servo.gains.beta)
    v = qdd_d - 2 * alpha * (qd - qd_d) - beta**2 * (q - q_d)
    return M @ v + c + G


def test_fully_actuated_tracking_controls_equal_computed_torque(rng):
    arm = TwoLinkArm(m1=1.3, m2=0.7, l1=0.9, l2=0.6)
    servo = Track(amp=jnp.array([0.5, -0.4]), gains=ukjax.Baumgarte(3.0, 4.0))
    ctrl = ukjax.ServoControlled(arm, servo)
    for _ in range(5):
        t = rng.uniform(0, 5)
        q, qd = rng.normal(size=2), rng.normal(size=2)
        tau = np.asarray(ukjax.controls(ctrl, t, jnp.asarray(q), jnp.asarray(qd)))
        ref = computed_torque(arm, servo, t, q, qd)
        np.testing.assert_allclose(tau, ref, rtol=1e-10, atol=1e-10 * np.abs(ref).max())


@pytest.mark.slow
def test_tracking_error_follows_its_closed_form():
    arm = TwoLinkArm()
    servo = Track(amp=jnp.array([0.5, -0.4]), gains=ukjax.Baumgarte(2.0, 2.0))  # (1+2t)e^-2t
    ctrl = ukjax.ServoControlled(arm, servo)
    ts = jnp.linspace(0.0, 3.0, 31)
    q0 = jnp.array([0.1, 0.2])
    sol = ukjax.simulate(ctrl, q0, jnp.zeros(2), ts)
    history = ukjax.servo_history(ctrl, sol)
    tau, err = history.tau, history.error
    e0 = np.asarray(q0 - servo.amp * jnp.sin(servo.phase))
    ed0 = -np.asarray(servo.amp) * servo.omega * np.cos(servo.phase)
    t = np.asarray(ts)[:, None]
    closed = (e0 + (ed0 + 2.0 * e0) * t) * np.exp(-2.0 * t)
    np.testing.assert_allclose(err, closed, atol=1e-9)
    assert tau.shape == (31, 2)


class CartTrack(ukjax.Servo):
    """The cart follows x_d(t) = a sin(w t)."""

    a: float = 0.5
    w: float = 2.0

    def holonomic(self, t, q):
        return jnp.array([q[0] - self.a * jnp.sin(self.w * t)])


@pytest.mark.slow
def test_under_actuated_cart_matches_a_minimal_scipy_reference():
    # one input (a force on the cart) realises x(t); the pendulum then obeys
    # theta'' = -(x'' cos(theta) + g sin(theta)) / l with x'' known in closed form.
    plant = CartPendulum()
    alpha = beta = 3.0
    servo = CartTrack(gains=ukjax.Baumgarte(alpha, beta))
    ctrl = ukjax.ServoControlled(plant, servo)
    ts = np.linspace(0.0, 4.0, 41)
    x0, th0 = 0.2, 0.3
    sol = ukjax.simulate(ctrl, jnp.array([x0, th0]), jnp.zeros(2), jnp.asarray(ts))
    a, w = servo.a, servo.w
    e0, ed0 = x0, -a * w  # error and its rate at t = 0: (e0 + (ed0 + 3 e0) t) e^{-3t}
    c1 = ed0 + alpha * e0

    def x_dd(t):
        e_dd = (-2 * alpha * c1 + alpha**2 * (e0 + c1 * t)) * np.exp(-alpha * t)
        return -a * w**2 * np.sin(w * t) + e_dd

    def rhs(t, y):
        return [y[1], -(x_dd(t) * np.cos(y[0]) + plant.g * np.sin(y[0])) / plant.length]

    ref = solve_ivp(rhs, (0, 4), [th0, 0.0], method="DOP853", rtol=1e-12, atol=1e-12, t_eval=ts)
    np.testing.assert_allclose(sol.q[:, 1], ref.y[0], atol=1e-8)
    e = np.asarray(sol.q[:, 0]) - a * np.sin(w * ts)
    np.testing.assert_allclose(e, (e0 + c1 * ts) * np.exp(-alpha * ts), atol=1e-9)


class Unreachable(ukjax.Servo):
    """Asks the pendulum angle to move, which the cart force alone cannot do instantly."""

    def nonholonomic(self, t, q, qd):
        return jnp.array([qd[0], qd[1] - 1.0])


@pytest.mark.slow
def test_an_infeasible_servo_gets_a_code_and_a_clear_error():
    ctrl = ukjax.ServoControlled(CartPendulum(), Unreachable())
    ts = jnp.linspace(0.0, 1.0, 3)
    sol = ukjax.simulate(ctrl, jnp.array([0.0, 0.3]), jnp.zeros(2), ts, throw=False)
    assert sol.result == ukjax.RESULTS.servo_infeasible
    with pytest.raises(Exception, match="servo-constraints cannot be realised"):
        ukjax.simulate(ctrl, jnp.array([0.0, 0.3]), jnp.zeros(2), ts)
    with pytest.raises(ValueError, match="declares no actuators"):
        ukjax.ServoControlled(ukjax.systems.SimplePendulum(), Unreachable())
    with pytest.raises(ValueError, match="theta, or theta1"):
        ukjax.Servo.seed_gains(theta=-1.0, theta1=-2.0)


@pytest.mark.slow
def test_gradient_of_a_tracking_cost_wrt_gains_and_plant_matches_finite_differences():
    ts = jnp.linspace(0.0, 2.0, 21)

    def cost(p):
        alpha, beta, mass = p
        plant = CartPendulum(mass=mass)
        ctrl = ukjax.ServoControlled(plant, CartTrack(gains=ukjax.Baumgarte(alpha, beta)))
        # fixed steps: the gradient is then exactly that of the discrete solution, which
        # central differences resolve (an adaptive controller's step choices add noise)
        sol = ukjax.simulate(ctrl, jnp.array([0.2, 0.3]), jnp.zeros(2), ts,
                             stepsize_controller=diffrax.ConstantStepSize(), dt0=0.01)  # fmt: skip
        history = ukjax.servo_history(ctrl, sol)
        tau, err = history.tau, history.error
        return jnp.mean(err**2) + 1e-3 * jnp.mean(tau**2) + jnp.mean(sol.q[:, 1] ** 2)

    p = jnp.array([2.0, 1.5, 0.5])
    g = jax.grad(cost)(p)
    f = jax.jit(cost)
    fd = jnp.stack([(f(p + d) - f(p - d)) / 2e-6 for d in 1e-6 * jnp.eye(3)])
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-8)


class UserCart(ukjax.System):
    """A cart-pendulum as a user writes it (int fields, its own coordinates): cart x, angle
    theta from the downward vertical, a horizontal force on the cart."""

    cart_mass: int = 2
    mass: int = 1
    length: int = 1
    g: float = 9.81

    def mass_matrix(self, t, q):
        c = self.mass * self.length * jnp.cos(q[1])
        return jnp.array([[self.cart_mass + self.mass, c], [c, self.mass * self.length**2]])

    def forces(self, t, q, qd):
        s = jnp.sin(q[1])
        return jnp.array(
            [self.mass * self.length * s * qd[1] ** 2, -self.mass * self.g * self.length * s]
        )

    def actuators(self, t, q):
        return jnp.array([[1.0], [0.0]], dtype=q.dtype)


class HoldAngle(ukjax.Servo):
    angle: float = 0.5 * np.pi

    def holonomic(self, t, q):
        return jnp.array([q[1] - self.angle])


@pytest.mark.slow  # default suite's time (benchmarks/RESULTS.md, stop 84)
def test_a_servo_where_the_actuators_lose_their_hold_is_infeasible():
    """Holding the pendulum horizontal with the cart force alone: at theta = pi/2 the
    cart force has no effect on theta'' (S = A_s M^-1 G is zero up to round-off), so the
    servo cannot be realised there: servo_infeasible, never a huge control reported as a
    success. Slightly below, where S is small but real, the control is the inverse
    dynamics m l theta''/cos... (finite) and the run succeeds."""
    ctrl = ukjax.ServoControlled(UserCart(), HoldAngle())
    q0 = jnp.array([0.0, 0.5 * np.pi])
    tau = ukjax.controls(ctrl, 0.0, q0, jnp.zeros(2))
    assert float(tau[0]) == 0.0
    ts = jnp.linspace(0.0, 0.2, 3)
    sol = ukjax.simulate(ctrl, q0, jnp.zeros(2), ts, throw=False)
    assert sol.result == ukjax.RESULTS.servo_infeasible
    with pytest.raises(Exception, match="servo-constraints cannot be realised"):
        ukjax.simulate(ctrl, q0, jnp.zeros(2), ts)
    # away from the singular angle the same servo is feasible and exact: the cart
    # acceleration that holds theta against gravity is x'' = -g tan(theta)
    low = ukjax.ServoControlled(UserCart(), HoldAngle(angle=0.4))
    q = jnp.array([0.0, 0.4])
    tau = ukjax.controls(low, 0.0, q, jnp.zeros(2))
    np.testing.assert_allclose(tau[0], -(2 + 1) * 9.81 * np.tan(0.4), rtol=1e-12)


class RoughBlock(ukjax.System):
    """A block on a rough table (Coulomb friction), pushed horizontally."""

    def mass_matrix(self, t, q):
        return jnp.eye(2, dtype=q.dtype)

    def forces(self, t, q, qd):
        return jnp.array([0.0, -9.81], dtype=q.dtype)

    def unilateral(self, t, q):
        return q[1:2]

    def friction(self, t, q):
        return jnp.array([[1.0, 0.0]], dtype=q.dtype), jnp.array([0.3]), jnp.array([0.3])

    def actuators(self, t, q):
        return jnp.array([[1.0], [0.0]], dtype=q.dtype)


class Slide(ukjax.Servo):
    def holonomic(self, t, q):
        return jnp.array([q[0] - 0.5 * jnp.sin(2.0 * t)])


def test_servo_control_refuses_a_plant_with_coulomb_friction():
    """The controls would be computed for the frictionless plant (missing mu N = 2.9 N
    while sliding): refused with an error that names the friction, not run wrongly."""
    with pytest.raises(ValueError, match="Coulomb friction"):
        ukjax.ServoControlled(RoughBlock(), Slide())


def test_servo_controlled_forwards_every_system_hook():
    """Every hook of ukjax.System is defined by ServoControlled itself (forwarded to the
    plant, or, for mass_and_force and infeasibility, the servo's own), so no hook the
    plant defines falls back silently to System's default; the forwarded ones return
    the plant's values."""
    hooks = [
        name
        for name, value in vars(ukjax.System).items()
        if callable(value) and not name.startswith("_")
    ]
    assert len(hooks) >= 14
    missing = [h for h in hooks if h not in vars(ukjax.ServoControlled)]
    assert missing == []
    plant = UserCart()
    ctrl = ukjax.ServoControlled(plant, HoldAngle(angle=0.4))
    t, q, qd = 0.0, jnp.array([0.1, 0.4]), jnp.array([0.2, -0.1])
    args = {0: (), 2: (t, q), 3: (t, q, qd)}
    for name in hooks:
        if name in ("mass_and_force", "infeasibility", "with_uk_solver"):
            continue
        nargs = getattr(ukjax.System, name).__code__.co_argcount - 1
        got = getattr(ctrl, name)(*args[nargs])
        if name == "kinetic_energy":  # the plant defines M only: T = qd M qd / 2
            np.testing.assert_allclose(got, 0.5 * qd @ plant.mass_matrix(t, q) @ qd)
            continue
        want = getattr(plant, name)(*args[nargs])
        for w, g in zip(jax.tree_util.tree_leaves(want), jax.tree_util.tree_leaves(got)):
            np.testing.assert_array_equal(np.asarray(w), np.asarray(g))
        assert (want is None) == (got is None)


def test_the_realisation_uses_the_runs_uk_solver():
    """The servo's own UK solves (q''0 and K, with the plant's passive constraint) use the
    run's uk_solver: with uk_solver=ukjax.SVD() the program holds SVDs for them besides
    the run's own and the one of S's pseudo-inverse; the controls agree."""

    class Pushed(CartesianPendulum):  # a horizontal force on the bob
        def actuators(self, t, q):
            return jnp.array([[1.0], [0.0]])

    class HoldX(ukjax.Servo):
        def holonomic(self, t, q):
            return q[:1] - 0.6

    ctrl = ukjax.ServoControlled(Pushed(), HoldX())
    q, qd = jnp.array([0.6, -0.8]), jnp.zeros(2)
    acc = lambda solver: lambda q: ukjax.acceleration(ctrl, 0.0, q, qd, uk_solver=solver)
    svds = lambda f: str(jax.make_jaxpr(f)(q)).count("svd[")  # (shared sub-programs once)
    tau = lambda c: lambda q: c.realisation(0.0, q, qd).tau
    assert ctrl.with_uk_solver(ukjax.SVD()).uk_solver == ukjax.SVD()
    assert svds(tau(ctrl.with_uk_solver(ukjax.SVD()))) >= svds(tau(ctrl)) + 1
    assert svds(acc(ukjax.SVD())) >= svds(acc(None)) + 2  # the run's and the realisation's
    np.testing.assert_allclose(acc(ukjax.SVD())(q), acc(None)(q), rtol=0, atol=1e-12)
    np.testing.assert_allclose(acc(None)(q)[0], 0.0, atol=1e-12)  # x held: no acceleration
