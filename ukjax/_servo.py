r"""Servo-constraints realised by actuators: Udwadia-Kalaba control.

A *plant* is a :class:`ukjax.System` with actuators, `System.actuators(t, q)` $= G$
(n, k): the inputs $\tau$ add the generalized force $G\tau$. Its constrained acceleration
(passive constraints $A_p\ddot q = b_p$, any rank) is affine in $\tau$:

$$\ddot q(\tau) = \ddot q_0 + K\tau,\qquad K = (I - A_M^+A_p)M^{-1}G,$$

with $\ddot q_0$ the UK acceleration without input. A **servo-constraint** (a
:class:`Servo`: holonomic $\sigma(q,t) = 0$ and/or nonholonomic $\sigma(q,\dot q,t) = 0$,
with error dynamics) is a row block $A_s\ddot q = b_s$ that the *actuators* must realise,
so (Bajodah 2003, *Acceleration Constraints in Modeling and Control of Nonholonomic
Systems*, §7.2, eqs 472-483)

$$S\tau = z,\qquad S = A_sK,\quad z = b_s - A_s\ddot q_0,\qquad
\tau = S^+z + (I - S^+S)\,y,$$

$y$ from `null_control(t, q, qd)` (default 0: the minimum-norm control). With full
actuation ($G$ invertible, no passive constraints) the $y = 0$ control is the ideal,
Gauss-minimal one of §7.3: $G\tau$ equals the UK constraint force of the
servo-constraint treated as a passive ideal constraint. When $z$ is not in the range of $S$
(too few actuators, a singular configuration) the relative residual
$\|S\tau - z\| / (\|z\| + \|S\|\|\tau\|)$ is reported as the system's `infeasibility`, and
a run fails with `ukjax.RESULTS.servo_infeasible` instead of following a wrong motion.

Servo-constraints that involve the inputs themselves, $\phi(q, \dot q, \tau, t) = 0$
(Bajodah 2003, §8.2), are realised the same way by carrying the inputs as
velocities of extra coordinates (the plant's state then includes $\tau$, and the actuators
drive $\dot\tau$): see `examples/spacecraft_kinetic_energy_decay.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from ._constraints import rows
from ._dynamics import mass_and_force, nonideal_force, row_solve
from ._linalg import default_rcond, pinv_solve
from ._precision import full_precision
from ._stabilization import Baumgarte
from ._system import System, as_time, check_state, floatify, overrides
from ._uk import relative_residual
from ._uk_solvers import AbstractUKSolver, check_uk_solver
from ._xla import eager_jit, jit


class Servo(eqx.Module):
    r"""A servo-constraint: the behaviour the actuators must enforce, with its error
    dynamics. Subclass it and define `holonomic(self, t, q)` and/or
    `nonholonomic(self, t, q, qd)` (1-D arrays that must vanish; energy, Lyapunov-type and
    tracking targets are all of this kind). Fields are differentiable parameters.

    - `gains`: a :class:`ukjax.Baumgarte` for the error dynamics: holonomic rows obey
      $\ddot\sigma + 2\alpha\dot\sigma + \beta^2\sigma = 0$, nonholonomic ones
      $\dot\sigma + \alpha\sigma = 0$ (default: no feedback). :meth:`seed_gains` converts
      Bajodah's $\Theta$ convention.

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> class Hold(ukjax.Servo):          # keep coordinate 0 at 0.3
        ...     def holonomic(self, t, q):
        ...         return jnp.array([q[0] - 0.3])
        >>> servo = Hold(gains=ukjax.Servo.seed_gains(theta1=-2.0, theta2=-1.0))
        >>> float(servo.gains.alpha), float(servo.gains.beta)
        (1.0, 1.0)
    """

    gains: Baumgarte = eqx.field(default=Baumgarte(), kw_only=True)

    @staticmethod
    def seed_gains(theta=None, theta1=None, theta2=None) -> Baumgarte:
        r"""Gains from Bajodah 2003's convention: $\dot\sigma - \Theta\sigma = 0$
        (nonholonomic, `theta`) or $\ddot\sigma - \Theta_1\dot\sigma - \Theta_2\sigma = 0$
        (holonomic, `theta1`, `theta2`)."""
        if theta is not None:
            if theta1 is not None or theta2 is not None:
                raise ValueError("seed_gains: give theta, or theta1 and theta2, not both.")
            return Baumgarte(alpha=-jnp.asarray(theta, float), beta=0.0)
        return Baumgarte.from_seed_gains(0.0 if theta1 is None else theta1, theta2 or 0.0)

    def holonomic(self, t, q) -> ArrayLike | None:
        return None

    def nonholonomic(self, t, q, qd) -> ArrayLike | None:
        return None


class _ServoRows(System):
    """The servo-constraint seen as a system's constraints (to reuse the row builder)."""

    servo: Servo

    def holonomic(self, t, q):
        return self.servo.holonomic(t, q)

    def nonholonomic(self, t, q, qd):
        return self.servo.nonholonomic(t, q, qd)


class Realisation(eqx.Module):
    """The control at one state: `tau`, the servo system `S`, `z`, and the relative
    residual `infeasibility` of `S tau = z`."""

    tau: jax.Array
    S: jax.Array
    z: jax.Array
    infeasibility: jax.Array


def _actuators(plant: System, t, q) -> jax.Array:
    G = plant.actuators(t, q)
    if G is None:
        raise ValueError(
            f"{type(plant).__name__} declares no actuators: define actuators(self, t, q) "
            "returning the (n, k) matrix G of the input directions."
        )
    G = jnp.asarray(G, q.dtype)
    if G.ndim == 1:
        G = G[:, None]
    if G.ndim != 2 or G.shape[0] != q.shape[0]:
        raise ValueError(
            f"{type(plant).__name__}.actuators must return an (n, k) matrix with n = "
            f"{q.shape[0]}; got shape {G.shape}."
        )
    return G


def realise(
    plant: System, servo: Servo, null_control, uk_solver: AbstractUKSolver, t, q, qd
) -> Realisation:
    r"""The servo realisation at one (validated) state (module docstring). $\ddot q_0$ and
    the columns of $K$ (the constrained response to each actuator's force, $b = 0$) are UK
    solves of the plant with `uk_solver`, the run's."""
    M, Q = mass_and_force(plant, t, q, qd)
    A_p, b_p = rows(plant, t, q, qd)
    C = nonideal_force(plant, t, q, qd)
    G = _actuators(plant, t, q)
    uk = row_solve(plant, M, uk_solver)
    solve = lambda force, b, C: uk(A_p, force, b, C).qdd
    qdd0 = solve(Q, b_p, C)
    K = jax.vmap(lambda g: solve(g, jnp.zeros_like(b_p), None), in_axes=1, out_axes=1)(G)
    A_s, b_s = rows(_ServoRows(servo), t, q, qd, servo.gains)
    if A_s.shape[0] == 0:
        raise ValueError(f"{type(servo).__name__} defines neither holonomic nor nonholonomic.")
    S, z = A_s @ K, b_s - A_s @ qdd0
    # The actuators lose their hold on the servo where S vanishes against the scale of
    # the maps it is made of (|S| <= |A_s| |K|): a cart whose pendulum is horizontal
    # cannot move the pendulum's angle (S = 0 up to round-off). The pseudo-inverse alone
    # would invert the round-off (truncation is relative to S's own largest singular
    # value) and report a huge control as a success; here S counts as zero, so tau = 0
    # and the residual names the infeasibility.
    scale = jnp.linalg.norm(A_s) * jnp.linalg.norm(K)
    lost = jnp.linalg.norm(S) <= default_rcond(S.shape, S.dtype) * scale
    S = jnp.where(lost, 0.0, S)
    tau = jnp.where(lost, 0.0, pinv_solve(S, z[:, None])[:, 0])
    if null_control is not None:
        y = jnp.asarray(null_control(t, q, qd), q.dtype).reshape(G.shape[1])
        tau = tau + y - pinv_solve(S, (S @ y)[:, None])[:, 0]
    rel = relative_residual(S, tau, z, S @ tau - z)
    return Realisation(tau, S, z, rel)


def _may_declare_friction(plant: System) -> bool:
    """Whether the plant's `friction` hook may return friction data: decided from its
    output's shape when the plant declares its number of coordinates, else from whether
    it defines the hook at all."""
    if not overrides(plant, "friction"):
        return False
    n = plant.num_coordinates()
    if n is None:
        return True
    state = jax.ShapeDtypeStruct((n,), jnp.result_type(float))
    t = jax.ShapeDtypeStruct((), jnp.result_type(float))
    return jax.eval_shape(lambda t, q: plant.friction(t, q), t, state) is not None


class ServoControlled(System):
    r"""A plant driven by its actuators so that it obeys a servo-constraint (module
    docstring): a :class:`ukjax.System` that :func:`ukjax.simulate`, `vmap` and `grad` use
    like any other.

    - `plant`: a system with `actuators(t, q)`; its passive constraints are kept.
    - `servo`: a :class:`ukjax.Servo`.
    - `null_control`: `None` (minimum-norm control) or a callable `(t, q, qd) -> y` (k,),
      e.g. an equinox module whose fields are tuned; it moves $\tau$ within the set of
      controls that realise the servo ($\tau = S^+z + (I - S^+S)y$).
    - `uk_solver`: the UK solver of the realisation ($\ddot q_0$ and $K$). A run
      (:func:`ukjax.simulate`, :func:`ukjax.acceleration`, ...) sets it to its own
      `uk_solver` (:meth:`ukjax.System.with_uk_solver`); `None` (default, and for
      :func:`ukjax.controls`): :class:`ukjax.Regularized`.

    Example:
        >>> import jax, jax.numpy as jnp, ukjax
        >>> from ukjax.systems import SimplePendulum
        >>> class Motor(SimplePendulum):           # a torque at the pivot
        ...     def actuators(self, t, q):
        ...         return jnp.ones((1, 1))
        >>> class Hold(ukjax.Servo):
        ...     def holonomic(self, t, q):
        ...         return q - 0.5                  # hold the angle at 0.5 rad
        >>> arm = ukjax.ServoControlled(Motor(), Hold(gains=ukjax.Baumgarte(2.0, 2.0)))
        >>> tau = ukjax.controls(arm, 0.0, jnp.array([0.5]), jnp.zeros(1))
        >>> bool(jnp.allclose(tau, 9.81 * jnp.sin(0.5)))  # holds the weight: m g L sin q
        True
    """

    plant: System
    servo: Servo
    null_control: Callable | None = None
    uk_solver: AbstractUKSolver | None = None

    def __check_init__(self):
        if not isinstance(self.plant, System):
            raise TypeError(f"plant must be a ukjax.System; got {type(self.plant).__name__}.")
        if not isinstance(self.servo, Servo):
            raise TypeError(f"servo must be a ukjax.Servo; got {type(self.servo).__name__}.")
        if _may_declare_friction(self.plant):
            raise ValueError(
                f"{type(self.plant).__name__} declares Coulomb friction (System.friction), "
                "which ukjax's servo control does not compensate yet: its controls would be "
                "computed for the frictionless plant and the run would not follow the "
                "servo-constraint. Model the friction as a force the servo sees (forces() "
                "or nonideal_force(), e.g. a smooth -mu N tanh(v / v0) law), or simulate "
                "the plant with friction under your own control law."
            )
        if not overrides(self.plant, "actuators"):
            raise ValueError(
                f"{type(self.plant).__name__} declares no actuators: define "
                "actuators(self, t, q) returning the (n, k) matrix G of the input directions."
            )

    def realisation(self, t, q, qd) -> Realisation:
        solver = check_uk_solver(self.uk_solver)
        return realise(self.plant, self.servo, self.null_control, solver, t, q, qd)

    def with_uk_solver(self, uk_solver) -> ServoControlled:
        """The servo realised with the run's `uk_solver` (the plant's too)."""
        plant = self.plant.with_uk_solver(uk_solver)
        return eqx.tree_at(
            lambda s: (s.plant, s.uk_solver), self, (plant, uk_solver), is_leaf=lambda x: x is None
        )

    def num_coordinates(self):
        return self.plant.num_coordinates()

    def semidefinite_mass(self):
        return self.plant.semidefinite_mass()

    def mass_and_force(self, t, q, qd):
        M, Q = mass_and_force(self.plant, t, q, qd)
        G = _actuators(self.plant, t, q)
        return M, Q + G @ self.realisation(t, q, qd).tau

    def kinetic_energy(self, t, q, qd):
        if overrides(self.plant, "kinetic_energy"):
            return self.plant.kinetic_energy(t, q, qd)
        return 0.5 * qd @ jnp.asarray(self.plant.mass_matrix(t, q)) @ qd

    def mass_matrix(self, t, q):
        return self.plant.mass_matrix(t, q)

    def potential_energy(self, t, q):
        return self.plant.potential_energy(t, q)

    def holonomic(self, t, q):
        return self.plant.holonomic(t, q)

    def nonholonomic(self, t, q, qd):
        return self.plant.nonholonomic(t, q, qd)

    def acceleration_constraint(self, t, q, qd):
        return self.plant.acceleration_constraint(t, q, qd)

    def nonideal_force(self, t, q, qd):
        return self.plant.nonideal_force(t, q, qd)

    def unilateral(self, t, q):
        return self.plant.unilateral(t, q)

    def actuators(self, t, q):
        return self.plant.actuators(t, q)

    def forces(self, t, q, qd):
        return self.plant.forces(t, q, qd)

    def friction(self, t, q):
        return self.plant.friction(t, q)  # None: plants with friction are refused above

    def latches(self, t, q):
        return self.plant.latches(t, q)

    def latch_conditions(self, t, q, qd):
        return self.plant.latch_conditions(t, q, qd)

    def infeasibility(self, t, q, qd):
        return self.realisation(t, q, qd).infeasibility


@full_precision
def controls(
    controlled: ServoControlled,
    t: ArrayLike,
    q: Float[ArrayLike, " n"],
    qd: Float[ArrayLike, " n"],
) -> Float[Array, " k"]:
    r"""The actuator inputs $\tau$ (k,) that realise the servo-constraint at one state.

    Batch with `jax.vmap` (e.g. over a solution's `ts`, `q`, `qd`); differentiable in the
    plant's, the servo's and the null control's parameters.

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import SimplePendulum
        >>> class Motor(SimplePendulum):
        ...     def actuators(self, t, q):
        ...         return jnp.ones((1, 1))
        >>> class Still(ukjax.Servo):
        ...     def nonholonomic(self, t, q, qd):
        ...         return qd                        # keep the angular rate at 0
        >>> arm = ukjax.ServoControlled(Motor(), Still())
        >>> [round(float(v), 6) for v in ukjax.controls(arm, 0.0, jnp.array([0.3]),
        ...                                            jnp.zeros(1))]
        [2.899053]
    """
    if not isinstance(controlled, ServoControlled):
        raise TypeError(f"controls needs a ukjax.ServoControlled; got {type(controlled).__name__}.")
    q_, qd_ = check_state(q, qd, controlled)
    return _controls(floatify(controlled), as_time(t, q_.dtype), q_, qd_)


@jit(batched=False)
def _controls(controlled, t, q, qd):
    return controlled.realisation(t, q, qd).tau


class ServoHistory(NamedTuple):
    """The controls and servo errors along a solution (from :func:`servo_history`):
    `ts` (T,), `tau` (T, k), `error` (T, m_s). Unpacks as `tau, error = ...[1:]` or by name."""

    ts: jax.Array
    tau: jax.Array
    error: jax.Array

    def plot(self, path: str | None = None):
        """Two panels: the inputs tau(t) and |servo error| (log scale). Returns the
        matplotlib figure; saves it to `path` when given (needs matplotlib)."""
        import matplotlib

        if path is not None:
            matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy as np

        ts = np.asarray(self.ts)
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        tau = np.asarray(self.tau)
        for k in range(tau.shape[-1]):
            axes[0].plot(ts, tau[:, k], label=f"tau[{k}]")
        axes[0].set(xlabel="t", title="actuator inputs")
        axes[0].legend()
        err = np.abs(np.asarray(self.error))
        for k in range(err.shape[-1]):
            axes[1].semilogy(ts, np.maximum(err[:, k], 1e-18), label=f"|sigma[{k}]|")
        axes[1].set(xlabel="t", title="servo-constraint error")
        axes[1].legend()
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=110)
        return fig


@full_precision
@eager_jit
def servo_history(controlled: ServoControlled, solution) -> ServoHistory:
    r"""Along a :class:`ukjax.Solution`: the inputs $\tau(t)$ (T, k) and the servo-constraint
    values $\sigma(t)$ (T, m_s) (holonomic values, then nonholonomic), as a
    :class:`ServoHistory` with `.plot(path)`.

    Example:
        >>> import jax, jax.numpy as jnp, ukjax
        >>> jax.config.update("jax_enable_x64", True)
        >>> from ukjax.systems import SimplePendulum
        >>> class Motor(SimplePendulum):
        ...     def actuators(self, t, q):
        ...         return jnp.ones((1, 1))
        >>> class Hold(ukjax.Servo):
        ...     def holonomic(self, t, q):
        ...         return q - 0.5
        >>> arm = ukjax.ServoControlled(Motor(), Hold(gains=ukjax.Baumgarte(2.0, 2.0)))
        >>> sol = ukjax.simulate(arm, jnp.array([0.2]), jnp.zeros(1), jnp.linspace(0, 6, 4))
        >>> history = ukjax.servo_history(arm, sol)
        >>> abs(float(history.error[-1, 0])) < 0.01     # (1 + 2t) e^{-2t} of 0.3 at t = 6
        True
    """
    servo = _ServoRows(controlled.servo)

    def one(t, q, qd):
        parts = []
        if servo.holonomic(t, q) is not None:
            parts.append(jnp.atleast_1d(jnp.asarray(servo.holonomic(t, q), q.dtype)))
        if servo.nonholonomic(t, q, qd) is not None:
            parts.append(jnp.atleast_1d(jnp.asarray(servo.nonholonomic(t, q, qd), q.dtype)))
        return controlled.realisation(t, q, qd).tau, jnp.concatenate(parts)

    tau, error = jax.vmap(one)(solution.ts, solution.q, solution.qd)
    return ServoHistory(solution.ts, tau, error)
