"""Constraints that switch at events (latches): a pick-and-place in one run.

References written here (closed forms): a gripper pushed by a constant force catches a
block (a perfectly inelastic capture: momentum conserved, kinetic energy
m1 m2 / (m1 + m2) v^2 / 2 lost), carries it at the grasp's offset, and lets it go; a block
sliding on a frictionless floor is planted (its horizontal motion latched) while the floor
contact stays engaged."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ukjax


jax.config.update("jax_enable_x64", True)


class Gripper(ukjax.System):
    """q = (x1, x2): a gripper (mass m1, pushed by `force`) and a block (m2) on a line. The
    gripper grasps the block when x2 - x1 falls to `offset` and lets it go at `release`."""

    m1: float = 2.0
    m2: float = 1.0
    force: float = 1.5
    offset: float = 0.1
    release: float = 2.0

    def mass_matrix(self, t, q):
        return jnp.diag(jnp.array([self.m1, self.m2]))

    def forces(self, t, q, qd):
        return jnp.array([self.force, 0.0])

    def latches(self, t, q):
        return jnp.array([q[1] - q[0]])

    def latch_conditions(self, t, q, qd):
        return jnp.array([q[1] - q[0] - self.offset]), jnp.array([self.release - t])


def _pick_and_place(s: Gripper, v1, T):
    """Closed form: (grasp time, velocity after the grasp, x2(T), x1(T))."""
    a = s.force / (2 * s.m1)
    gap = 1.0 - s.offset  # x2(0) = 1, x1(0) = 0
    t_g = (-v1 + np.sqrt(v1**2 + 4 * a * gap)) / (2 * a)
    v_g = v1 + s.force * t_g / s.m1
    V = s.m1 * v_g / (s.m1 + s.m2)  # momentum kept
    held = s.release - t_g
    acc = s.force / (s.m1 + s.m2)
    x2_r = 1.0 + V * held + 0.5 * acc * held**2
    v_r = V + acc * held
    x2 = x2_r + v_r * (T - s.release)
    x1 = x2_r - s.offset + v_r * (T - s.release) + 0.5 * s.force / s.m1 * (T - s.release) ** 2
    return t_g, v_g, V, x2, x1


def test_pick_and_place_is_one_run_matching_the_closed_form():
    s, v1, T = Gripper(), 1.0, 3.0
    ts = jnp.linspace(0.0, T, 31)
    sol = ukjax.simulate(s, jnp.array([0.0, 1.0]), jnp.array([v1, 0.0]), ts)
    assert sol.result == ukjax.RESULTS.successful
    t_g, v_g, V, x2, x1 = _pick_and_place(s, v1, T)
    ev = sol.events
    assert [ukjax.EVENT_KINDS[int(k)] for k in ev.kind[: int(ev.count)]] == ["latch", "unlatch"]
    assert abs(float(ev.time[0]) - t_g) < 1e-12 and abs(float(ev.time[1]) - s.release) < 1e-12
    assert abs(float(ev.speed_before[0]) - v_g) < 1e-12 and float(ev.speed_after[0]) < 1e-14
    np.testing.assert_allclose(sol.q[-1], [x1, x2], rtol=1e-12)
    held = np.asarray(sol.latched[:, 0])
    # latched between the two events as located (a save at exactly t = release = ts[20] falls
    # on whichever side of the root finder's event time, within its tolerance, the flag is)
    t_latch, t_unlatch = float(ev.time[0]), float(ev.time[1])
    np.testing.assert_array_equal(held, (np.asarray(ts) > t_latch) & (np.asarray(ts) < t_unlatch))
    gap = np.asarray(sol.q[held, 1] - sol.q[held, 0])
    assert np.abs(gap - s.offset).max() < 1e-12  # the grasp holds its offset
    # the grasp: momentum kept, kinetic energy m1 m2 / (m1 + m2) v^2 / 2 lost
    grasped = jnp.array([0.0, 1.0]), jnp.array([v1, 0.0])
    sol_g = ukjax.simulate(s, *grasped, jnp.array([0.0, t_g + 1e-9]))
    p = s.m1 * sol_g.qd[-1, 0] + s.m2 * sol_g.qd[-1, 1]
    assert abs(float(p) - (s.m1 + s.m2) * V) < 1e-6  # 1e-9 s of force after the grasp
    lost = 0.5 * s.m1 * v_g**2 - 0.5 * (s.m1 + s.m2) * V**2
    assert abs(lost - 0.5 * s.m1 * s.m2 / (s.m1 + s.m2) * v_g**2) < 1e-12


@pytest.mark.slow
def test_latched_batch_equals_loop_and_gradient_matches_finite_differences():
    s, T = Gripper(), 3.0
    ts = jnp.array([0.0, T])

    def x2_end(v1):
        sol = ukjax.simulate(s, jnp.array([0.0, 1.0]), jnp.stack([v1, jnp.zeros(())]), ts)
        return sol.q[-1, 1]

    v1s = jnp.array([0.5, 1.0, 2.0])
    batch = jax.vmap(x2_end)(v1s)
    for v1, x in zip(v1s, batch):
        assert abs(float(x) - _pick_and_place(s, float(v1), T)[3]) < 1e-11
        assert abs(float(x) - float(x2_end(v1))) < 1e-13
    grad = float(jax.grad(x2_end)(jnp.asarray(1.0)))
    h = 1e-6
    fd = (_pick_and_place(s, 1.0 + h, T)[3] - _pick_and_place(s, 1.0 - h, T)[3]) / (2 * h)
    assert abs(grad - fd) < 1e-7


class PlantedBlock(ukjax.System):
    """A block q = (x, y) on a frictionless floor (contact y >= 0) under gravity, planted
    (x latched) when it reaches x = 1 and released at t = 2."""

    mass: float = 1.5
    g: float = 9.81

    def kinetic_energy(self, t, q, qd):
        return 0.5 * self.mass * qd @ qd

    def potential_energy(self, t, q):
        return self.mass * self.g * q[1]

    def unilateral(self, t, q):
        return q[1:2]

    def latches(self, t, q):
        return q[:1]

    def latch_conditions(self, t, q, qd):
        return jnp.array([1.0 - q[0]]), jnp.array([2.0 - t])


@pytest.mark.slow  # default-suite time (6 s)
def test_a_planted_block_keeps_its_floor_contact():
    s = PlantedBlock()
    ts = jnp.linspace(0.0, 3.0, 7)
    sol = ukjax.simulate(s, jnp.zeros(2), jnp.array([2.0, 0.0]), ts)
    assert sol.result == ukjax.RESULTS.successful
    ev = sol.events
    assert [ukjax.EVENT_KINDS[int(k)] for k in ev.kind[: int(ev.count)]] == ["latch", "unlatch"]
    assert abs(float(ev.time[0]) - 0.5) < 1e-12
    np.testing.assert_allclose(sol.q[2:], np.tile([1.0, 0.0], (5, 1)), atol=1e-12)
    assert np.abs(np.asarray(sol.qd[2:])).max() < 1e-13  # stopped, and stays after release
    assert bool(jnp.all(sol.engaged))
    qdd, _, lam = ukjax.contact_forces(s, 1.0, sol.q[2], sol.qd[2], jnp.array([True]))
    assert abs(float(lam[0]) - s.mass * s.g) < 1e-12


class _NoConditions(Gripper):
    def latch_conditions(self, t, q, qd):
        return None


class _WrongShape(Gripper):
    def latch_conditions(self, t, q, qd):
        return jnp.zeros(2), jnp.zeros(1)


@pytest.mark.parametrize(
    "system, match",
    [
        (_NoConditions(), "declares latches but no latch_conditions"),
        (_WrongShape(), r"engage must have shape \(1,\)"),
    ],
)
def test_malformed_latch_declarations_raise(system, match):
    with pytest.raises(ValueError, match=match):
        ukjax.simulate(system, jnp.array([0.0, 1.0]), jnp.zeros(2), jnp.linspace(0.0, 1.0, 3))
