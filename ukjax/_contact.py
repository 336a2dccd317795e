r"""Contact laws for unilateral constraints $g(q, t) \ge 0$: strategy objects.

A system declares its unilateral constraints with `System.unilateral(t, q)` (admissible
where every $g_i \ge 0$); `simulate(..., contact=law)` picks how they act. Each contact
is in one of two *modes*: **free** (no constraint row) or **engaged** (the row
$\nabla g_i\,\ddot q = \ddot g_i^\star - (\ddot g_i)_{\ddot q = 0}$ joins the UK
equation, so $\ddot g_i = \ddot g_i^\star$). A law says

- which acceleration $\ddot g^\star$ an engaged contact imposes
  (:meth:`AbstractContact.target_acceleration`),
- which scalar per contact crosses zero downwards when the mode must change
  (:meth:`AbstractContact.event_value`; located by root finding, in time order), and
- whether the change comes with an impulse (:attr:`AbstractContact.impulsive`), and
- what happens at the event: the new modes and the velocity after it
  (:meth:`AbstractContact.switch`).

The laws (Bajodah 2003, *Acceleration Constraints in Modeling and Control of
Nonholonomic Systems*, ch. 5; sign convention $g = -\varphi$, where the thesis writes
$\varphi \le 0$ for the admissible side):

- :class:`Impact`: rigid contact with Newton restitution, an impulsive velocity jump at
  $g_i = 0$ (the UK impulsive projection, :func:`ukjax.apply_impulse`), and a
  **persistent** (engaged, $\ddot g_i = 0$) contact once the rebound speed is below
  `persist_below`, released when its UK contact force would pull. Which contacts take an
  impulse, and which stay engaged, is decided jointly for all of them (a complementarity
  problem, :mod:`ukjax._complementarity`).
- :class:`ContactDynamics`: the thesis's compliant activation (§5.4): free while
  $g \ge -\delta$, then $\ddot g + c\,\dot g + k\,g = 0$ is imposed.
- :class:`HuntCrossley`: the continuous impact law (§5.6), $m\ddot x + \lambda x^n\dot x +
  kx^n = 0$ on the penetration $x = -g > 0$, with the dissipative sign $\lambda > 0$.
"""

from __future__ import annotations

import abc
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp

from ._complementarity import pick
from ._events import EventKind, EventMotion, Switched


def _arr(x, like):
    return jnp.asarray(x, like.dtype)


class AbstractContact(eqx.Module):
    """Base class of contact laws (see the module docstring)."""

    impulsive: eqx.AbstractClassVar[bool]
    """Whether a free contact's event is an impact (velocity jump) rather than a switch."""

    uses_force: eqx.AbstractClassVar[bool]
    """Whether :meth:`event_value` needs the contact multipliers (an extra solve per step)."""

    @abc.abstractmethod
    def target_acceleration(self, g: jax.Array, gd: jax.Array) -> jax.Array:
        r"""$\ddot g^\star$ imposed on engaged contacts (per contact)."""

    @abc.abstractmethod
    def event_value(self, engaged, g, gd, force) -> jax.Array:
        """Per contact: a value whose downward zero crossing changes its mode. `force` are
        the contact multipliers (> 0 pushing), or None when `uses_force` is false."""

    def initial_mode(self, g, gd) -> jax.Array:
        """Per contact: engaged at the start? (For an impulsive law, the candidates; those
        whose force would pull are then left free.)"""
        return jnp.zeros(g.shape, bool)

    def penetrating(self, g) -> jax.Array:
        """Per contact: does `g` violate the law at the start (a refused initial state)?"""
        return jnp.zeros(g.shape, bool)

    def touch_band(self, dtype) -> float:
        r"""The gap (units of $g$) within which a free contact counts as touching: the
        event-driven driver bounds a step by the time an approaching contact takes to
        close its gap or this band, whichever is larger
        (:meth:`ukjax._hybrid.EventDriver._horizon`), so that the step carries a touching
        contact across zero by more than round-off, however slowly it closes. Default
        $\sqrt\epsilon$ (1.5e-8 in float64)."""
        return float(jnp.finfo(dtype).eps) ** 0.5

    def initial_engaged(self, engaged, sliding, motion: EventMotion) -> tuple[jax.Array, jax.Array]:
        """(the contacts engaged at the start, whether that could be decided), from the
        candidates of :meth:`initial_mode` (by default all of them)."""
        return engaged, jnp.asarray(True)

    def switch(self, trig, engaged, sliding, g, gd, motion: EventMotion) -> Switched:
        """The event of contact `trig` (a one-hot (k,) mask) at a state with contact values
        `g`, rates `gd` and modes `engaged`, `sliding`: the new modes, the velocity after
        the event, its :class:`ukjax.EventKind`, whether it could be resolved and the
        contacts' impulses (:class:`ukjax._events.Switched`). By default the triggering
        contact toggles between free and engaged and the velocity is kept (a compliant
        law)."""
        engaged = jnp.where(trig, ~engaged, engaged)
        kind = jnp.where(jnp.any(trig & engaged), EventKind.ENGAGE, EventKind.RELEASE)
        none = jnp.zeros_like(g)
        return Switched(engaged, motion.qd, kind, jnp.asarray(True), none, none)


class Impact(AbstractContact):
    r"""Rigid contact with Newton restitution, event-driven (Bajodah 2003, ch. 6).

    At $g_i = 0$ with $\dot g_i^- < 0$ the velocity jumps to the UK impulsive projection
    (Bajodah 2003, eqs 424-427, in the UK form)

    $$\dot q^+ = \dot q^- - A_M^+\,(A\dot q^- - c^+)$$

    with the rows $A$ of every bilateral constraint (velocity level, kept) and of the
    contacts that take an impulse. Which ones do is a complementarity problem
    (:mod:`ukjax._complementarity`, solved exactly by least-index pivoting) over the
    impacting contacts and the engaged ones: impulses $P_i \ge 0$, post-impact normal
    speeds $\dot g_i^+ \ge -e\dot g_i^-$ (engaged contacts: $\ge 0$), complementary. An
    engaged contact that would need a pulling impulse lifts off: a rocking block transfers
    its pivot to the impacting corner. When $e|\dot g_i^-|$ is below `persist_below` the
    contact becomes **persistent**: $\dot g_i^+ = 0$, and the contacts at rest after the
    impact are engaged where the complementarity problem of their forces and normal
    accelerations says so (the row $\ddot g_i = 0$ joins the UK equation while the contact
    force is compressive); an engaged contact is released (an event) when its force would
    pull, the others decided again jointly. A ball bouncing to rest therefore ends its Zeno
    sequence after finitely many impacts.

    **Friction.** Where the system declares friction the impulses are frictional (sticking
    or sliding impacts, :meth:`ukjax.AbstractFriction.impulse`). Where that model has no
    solution over the contacts (Painlevé-type: the friction at a landing edge drives
    another, sliding, corner into the floor under every split), the impact of maximal
    dissipation is taken instead (:mod:`ukjax._dissipative_impact`): it always exists, and
    a slip that cannot continue through the impact stops in it.

    **Simultaneity.** A free contact joins the impact of another one only if it is within
    `simultaneity` of touching *and* closes faster than `closing` times the triggering
    contact's approach speed; otherwise its own impact follows in time order (a Newton's
    cradle passes the momentum down the line, ball by ball). With `simultaneous=True`, a
    touching contact that does not separate joins too (the simultaneous model: touching
    balls in a line share the impact).

    - `restitution`: $e \in [0, 1]$ (scalar or one per contact; differentiable).
    - `persist_below`: rebound speed below which a contact becomes persistent, in the
      units of $\dot g$ (default $\epsilon^{1/3}$: 6e-6 in float64, 5e-3 in float32, above
      the speed error that the event-time round-off leaves after many bounces).
    - `simultaneity`: the gap within which another free contact may join an impact (units
      of $g$, default $\epsilon^{1/2}$: 1.5e-8 in float64).
    - `closing`: the closing speed, relative to the triggering contact's approach speed,
      above which such a contact joins (default $\epsilon^{1/3}$, 6e-6 in float64: round-off
      velocities do not make impacts simultaneous).
    - `simultaneous`: also resolve touching contacts that do not close together with the
      impact (default False: sequential).

    Example:
        >>> import ukjax
        >>> law = ukjax.Impact(restitution=0.5)
        >>> law.impulsive, float(law.restitution)
        (True, 0.5)
    """

    restitution: float | jax.Array = 1.0
    persist_below: float | None = eqx.field(static=True, default=None)
    simultaneity: float | None = eqx.field(static=True, default=None)
    closing: float | None = eqx.field(static=True, default=None)
    simultaneous: bool = eqx.field(static=True, default=False)
    impulsive: ClassVar[bool] = True
    uses_force: ClassVar[bool] = True

    def __check_init__(self):
        e = self.restitution
        if isinstance(e, (int, float)) and not 0.0 <= e <= 1.0:
            raise ValueError(f"Impact: restitution must lie in [0, 1]; got {e}.")
        for name in ("persist_below", "simultaneity", "closing"):
            value = getattr(self, name)
            if value is not None and not value >= 0.0:
                raise ValueError(f"Impact: {name} must be >= 0; got {value}.")

    def target_acceleration(self, g, gd):
        return jnp.zeros_like(g)

    def event_value(self, engaged, g, gd, force):
        return jnp.where(engaged, force, g)

    def rebound(self, gd_minus: jax.Array) -> jax.Array:
        r"""Post-impact normal speed $\dot g^+ = -e\,\dot g^-$ (0 when persistent)."""
        e = jnp.broadcast_to(_arr(self.restitution, gd_minus), gd_minus.shape)
        return -e * gd_minus

    def speed_tol(self, dtype) -> float:
        """`persist_below`, or its default for `dtype`."""
        eps = float(jnp.finfo(dtype).eps)
        return eps ** (1 / 3) if self.persist_below is None else self.persist_below

    def gap_tol(self, dtype) -> float:
        """`simultaneity`, or its default for `dtype`."""
        eps = float(jnp.finfo(dtype).eps)
        return eps**0.5 if self.simultaneity is None else self.simultaneity

    def closing_tol(self, trig_speed: jax.Array) -> jax.Array:
        """The closing speed above which a touching contact joins an impact whose
        triggering contact approaches at `trig_speed` (`closing`, relative)."""
        eps = float(jnp.finfo(trig_speed.dtype).eps)
        ratio = eps ** (1 / 3) if self.closing is None else self.closing
        return ratio * jnp.abs(trig_speed)

    def initial_mode(self, g, gd):
        gap, speed = self.gap_tol(g.dtype), self.speed_tol(g.dtype)
        return (jnp.abs(g) <= gap) & (jnp.abs(gd) <= speed)

    def penetrating(self, g):
        return g < -self.gap_tol(g.dtype)

    def persists(self, gd_plus: jax.Array) -> jax.Array:
        return jnp.abs(gd_plus) <= self.speed_tol(gd_plus.dtype)

    def initial_engaged(self, engaged, sliding, motion: EventMotion):
        """The resting contacts that push, decided jointly (the complementarity problem of
        their forces and normal accelerations)."""
        return motion.supporting(motion.qd, engaged, sliding)

    def switch(self, trig, engaged, sliding, g, gd, motion: EventMotion):
        r"""An approaching free contact impacts, with the free contacts that touch and close
        with it (class docstring); an engaged contact whose force reached zero is released.
        The impulses are the complementarity solution over the impacting and the engaged
        contacts (with the friction law's impulses where the system declares friction:
        sticking or sliding impacts); the contacts at
        rest after it are engaged where their forces push. The event is an `impact`, or an
        `engage` where every contact in it closes slower than `persist_below` (a touch-down
        with no impulse to speak of). A free contact whose gap crosses zero by round-off
        without approaching is no event (kind `NONE`)."""
        free = ~engaged
        approach = trig & free & (gd < 0)
        hit = jnp.any(approach)
        closing = self.closing_tol(jnp.sum(jnp.where(trig, gd, 0.0)))
        touching = free & (g <= self.gap_tol(g.dtype)) & hit
        joins = touching & ((gd < -closing) | (self.simultaneous & (gd <= closing)))
        impacting = approach | joins
        gd_plus = self.rebound(gd)
        persistent = impacting & self.persists(gd_plus)
        target = jnp.where(impacting & ~persistent, gd_plus, 0.0)
        held = engaged & ~trig  # an engaged contact that triggered: its force reached zero
        lcp = motion.impact(impacting | held, target)
        qd, _, _ = motion.jump(lcp.active, target)
        rest = (impacting | held) & (target == 0.0)
        resting = rest & (lcp.w <= self.speed_tol(g.dtype))  # w: the normal speed after it
        modes = motion.slip_modes(qd, impacting, jnp.where(held[:, None], sliding, 0.0))
        after, supported = motion.supporting(qd, resting, modes)
        solved = lcp.solved & supported
        # Painleve-type: no solution with sliding impacts, or no consistent forces at rest
        # in the friction modes the slips give (a stuck contact whose hold would pull, free
        # it would sink): the impact, or the forces, of maximal dissipation decide
        impulsive = ~lcp.solved
        rescue = motion.dissipative(impacting | held, target, qd, resting, hit & ~solved, impulsive)
        if rescue is not None:
            w = jnp.where(impulsive, rescue.w, lcp.w)  # the normal speed after the impact
            resting = rest & (w <= self.speed_tol(g.dtype))
            tol = jnp.sqrt(jnp.finfo(g.dtype).eps) * jnp.max(jnp.abs(rescue.normal), initial=0.0)
            after = jnp.where(solved, after, resting & (rescue.normal > tol))
            solved = solved | rescue.solved
        # the engaged contacts are held at zero normal speed (a no-op for those in the
        # impact's active set); the bouncing ones keep their targets
        jumped = motion.jump(lcp.active | after, jnp.where(after, 0.0, target))
        qd, normal, tangential = jumped
        if rescue is not None:
            kept = (rescue.qd, rescue.normal, rescue.tangential)
            qd, normal, tangential = pick(impulsive, kept, jumped)
        # a touch-down closing slower than `persist_below` takes no impulse to speak of:
        # the contacts engage (a corner of a sliding box meeting the floor at round-off)
        gentle = jnp.all(jnp.where(impacting, -gd <= self.speed_tol(g.dtype), True))
        landed = jnp.where(gentle, EventKind.ENGAGE, EventKind.IMPACT)
        kind = jnp.where(hit, landed, jnp.where(jnp.any(trig & engaged), EventKind.RELEASE, 0))
        return Switched(after, qd, kind, solved, normal, tangential)


class ContactDynamics(AbstractContact):
    r"""The compliant activation of Bajodah 2003, §5.4 (eqs 327-329).

    A contact is free while $g \ge -\delta$ (penetration below the activation depth
    $\delta$). Beyond it, the acceleration constraint

    $$\ddot g + c\,\dot g + k\,g = 0$$

    is imposed through the UK equation (the contact force is its UK constraint force). It
    is released when the contact force would pull while the contact separates
    ($F < 0$ and $\dot g > 0$).

    The thesis writes $\varphi \le 0$ for the admissible side and
    $\ddot\varphi - \Delta_1\dot\varphi - \Delta_2\varphi = 0$; with $g = -\varphi$ this is
    $c = -\Delta_1$, $k = -\Delta_2$: use :meth:`from_seed_gains`.

    - `damping` $c$, `stiffness` $k$ (scalars or one per contact; differentiable).
    - `activation` $\delta \ge 0$: activation depth (default 1e-6).

    Example:
        >>> import ukjax
        >>> law = ukjax.ContactDynamics.from_seed_gains(-300.0, -100.0)  # Bajodah Ex. 5.1
        >>> float(law.damping), float(law.stiffness)
        (300.0, 100.0)
    """

    damping: float | jax.Array = 0.0
    stiffness: float | jax.Array = 0.0
    activation: float | jax.Array = 1e-6
    impulsive: ClassVar[bool] = False
    uses_force: ClassVar[bool] = True

    @classmethod
    def from_seed_gains(cls, delta1, delta2, activation=1e-6) -> ContactDynamics:
        r"""From the thesis's $\ddot\varphi - \Delta_1\dot\varphi - \Delta_2\varphi = 0$."""
        return cls(
            damping=-jnp.asarray(delta1, float),
            stiffness=-jnp.asarray(delta2, float),
            activation=activation,
        )

    def target_acceleration(self, g, gd):
        return -_arr(self.damping, g) * gd - _arr(self.stiffness, g) * g

    def event_value(self, engaged, g, gd, force):
        release = jnp.maximum(force, -gd)  # < 0 iff pulling and separating
        return jnp.where(engaged, release, g + _arr(self.activation, g))

    def initial_mode(self, g, gd):
        return g < -_arr(self.activation, g)


class HuntCrossley(AbstractContact):
    r"""The Hunt-Crossley continuous impact law of Bajodah 2003, §5.6 (eqs 367-369).

    While the penetration $x = -g$ is positive, the acceleration constraint

    $$m\ddot x + \lambda\,x^n\dot x + k\,x^n = 0$$

    is imposed through the UK equation; the contact engages when $g$ crosses 0 downwards
    and releases when it crosses 0 upwards, so velocities stay continuous. $x^n$ is taken
    as $\max(x, 0)^n$.

    The thesis prints $\lambda = n\alpha k$ with $\alpha = -5\cdot10^7$, which makes the
    damping *anti*-dissipative (a sign error in Bajodah 2003, Ex. 5.2); this class requires the
    dissipative sign $\lambda \ge 0$ (:meth:`from_alpha` takes $|\alpha|$).

    - `stiffness` $k$, `damping` $\lambda$, `exponent` $n$ (default 3/2), `mass` $m$
      (the effective mass of the law, default 1); all differentiable.

    Example:
        >>> import ukjax
        >>> law = ukjax.HuntCrossley.from_alpha(5e7, stiffness=1.0)   # Bajodah Ex. 5.2
        >>> float(law.damping)
        75000000.0
    """

    stiffness: float | jax.Array = 1.0
    damping: float | jax.Array = 0.0
    exponent: float | jax.Array = 1.5
    mass: float | jax.Array = 1.0
    impulsive: ClassVar[bool] = False
    uses_force: ClassVar[bool] = False

    def __check_init__(self):
        if isinstance(self.damping, (int, float)) and self.damping < 0:
            raise ValueError(
                "HuntCrossley: damping must be >= 0 (the dissipative sign; Bajodah's printed "
                f"alpha < 0 is a sign error); got {self.damping}."
            )

    @classmethod
    def from_alpha(cls, alpha, stiffness=1.0, exponent=1.5, mass=1.0) -> HuntCrossley:
        r"""$\lambda = n|\alpha|k$ (Bajodah 2003, eq 369, dissipative sign)."""
        damping = exponent * jnp.abs(jnp.asarray(alpha, float)) * stiffness
        return cls(stiffness=stiffness, damping=damping, exponent=exponent, mass=mass)

    def target_acceleration(self, g, gd):
        x = jnp.maximum(-g, 0.0)
        n = _arr(self.exponent, g)
        xn = jnp.where(x > 0, jnp.where(x > 0, x, 1.0) ** n, 0.0)
        k, lam, m = (_arr(v, g) for v in (self.stiffness, self.damping, self.mass))
        return (k * xn - lam * xn * gd) / m  # m x'' = -lam x^n x' - k x^n with x = -g

    def event_value(self, engaged, g, gd, force):
        return jnp.where(engaged, -g, g)

    def initial_mode(self, g, gd):
        return g < 0


def check_contact(contact) -> AbstractContact:
    """`contact`, or a TypeError that says what to pass."""
    if not isinstance(contact, AbstractContact):
        raise TypeError(
            "contact must be a contact law: ukjax.Impact(restitution=...), "
            f"ukjax.ContactDynamics(...) or ukjax.HuntCrossley(...); got {contact!r}."
        )
    return contact
