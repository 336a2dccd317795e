r"""Coulomb friction on unilateral contacts: strategy objects and the frictional UK solve.

A system declares, per unilateral contact $i$ (:meth:`ukjax.System.unilateral`), the
tangential velocity rows and the coefficients with `System.friction(t, q)`, returning
`(T, mu_static, mu_kinetic)`: `T` of shape (k, d, n), so that the slip velocity of contact
$i$ is $v_i = T_i(q, t)\,\dot q \in \mathbb{R}^d$; the coefficients are scalars or (k,)
arrays. A fourth entry, `surface_velocity` ((k, d), (k,) for d = 1, or a scalar; a
function of t and q), makes the slip relative to a moving surface (a conveyor belt, a
turntable, a shaking table): $v_i = T_i\dot q - w_i(t, q)$, so that a stuck contact moves
with its surface and its rate $\dot T_i\dot q - \dot w_i$ holds the surface's acceleration.
d = 1 is planar contact (`T` may then also be (k, n), or (n,) for one contact);
d = 2 (two orthonormal tangent rows per contact) is an isotropic Coulomb cone in 3-D, or
with coefficients of shape (k, 2) (one per tangent row) an elliptic cone
(:class:`FrictionState`: the static ellipse, and the force of maximal dissipation on the
kinetic one; every rule below holds with those two in place of the circle's).

Friction acts only while a contact is **engaged** (a persistent rigid contact, or a
compliant one): its normal force $N_i$ is then the UK multiplier of the contact row, so it
varies with the motion. Each engaged contact is **stuck** or **sliding**; the mode keeps
its *heading* $h_i \in \mathbb{R}^d$ (zero when stuck; $\pm 1$ for d = 1, a unit vector
for d = 2):

- stuck: the constraint $v_i = 0$ is imposed through the UK equation at the acceleration
  level ($T_i\ddot q = -\dot T_i\dot q$); its UK constraint force $\lambda_{t,i}$ (the
  force along $T_i$) *is* the friction force, and it is admissible while
  $|\lambda_{t,i}| \le \mu_s N_i$;
  (d = 2: $|\lambda_{t,i}| \le \mu_s N_i$, the Euclidean norm: the cone);
- sliding: an impressed (non-ideal, Udwadia 2004) force $C = -\mu_k N_i T_i^Tu_i$ with
  $u_i$ the slip direction: $s_i = \pm 1$ for d = 1, $v_i/|v_i|$ for d = 2 (oriented by
  the heading, $u_i = \operatorname{sgn}(h_i\cdot v_i)\,v_i/|v_i|$, so that it stays
  continuous as the slip passes through zero along a line). The UK acceleration is affine
  in $C$ and $N$ is affine in the acceleration, so the normal forces of the sliding
  contacts solve the small linear system $(I - J)N = N_0$ with $N_0$ the normal forces
  without sliding friction and $J = \partial N/\partial\nu$ for $C = W\nu$, $W =
  [-\mu_{k,i}T_i^Tu_i]$. $\det(I - J) \le 0$ is Painlevé's paradox.

The strategies:

- :class:`Coulomb` (default): exact and event-driven. A stuck contact starts to slide
  when $\mu_s N_i - |\lambda_{t,i}|$ crosses zero, in the direction $s_i =
  -\operatorname{sgn}\lambda_{t,i}$ (opposite to the friction force that held it); a
  sliding contact's $s_iv_i$ crossing zero ends the slide: it sticks if the stuck
  friction force is admissible ($|\lambda_{t,i}| \le \mu_s N_i$), and slides back
  otherwise. At each such event the velocity is projected (UK impulsive projection,
  Bajodah 2003 ch. 6) so that $v_i = 0$ exactly: a stuck contact does not creep.
  In 3-D (d = 2) $|v_i| \to 0$ is the minimum of a norm, not a sign change: the event
  of a sliding contact is $h_i\cdot v_i - \tfrac12|v_i|$, which crosses zero when the
  slip stops (it changes sign through $v_i = 0$ along the oriented direction) or when
  the slip has turned by 60 degrees from the heading; at the latter the heading is
  renewed to $v_i/|v_i|$ (no velocity change, not logged), at the former the contact
  sticks if the static bound holds, and otherwise slides on: along the slip it has then
  if that has grown past round-off (no velocity change), else away from the holding
  force, $h_i = -\lambda_{t,i}/|\lambda_{t,i}|$ (with $v_i$ set to 0). Slip speeds
  below $\sqrt\varepsilon$ carry no direction of their own (a slip that has just
  started from $v_i = 0$): there the heading points the kinetic force, and such a
  slip's turn event waits until the slip has grown past round-off, so round-off neither
  points the force nor fires a turn; an established slip stops on time.
- :class:`VelocityTolerance`: the velocity-tolerance rule of Bajodah 2003, §5.8–5.9
  (eqs 379–386), evaluated at every state with no events: slide if $|v_i| > \delta$ or
  the friction needed to hold it exceeds $\mu_s N_i$, else impose the damped stick
  phase $\dot v_i = -a v_i$ as an acceleration constraint.
"""

from __future__ import annotations

import abc

import equinox as eqx
import jax
import jax.numpy as jnp

from ._dynamics import RowSolve
from ._events import EventKind, EventMotion, entry_at
from ._kernel_strategies import AbstractKernels
from ._linalg import row_multipliers, small_solve
from ._system import System, overrides
from ._uk import UKTerms
from ._xla import traced_once


def sgn(x) -> jax.Array:
    """The sign as int32 with sgn(0) = -1 (Bajodah 2003, eqs 382-383): a sliding direction."""
    return jnp.where(x > 0, 1, -1).astype(jnp.int32)


def norm(x) -> jax.Array:
    """The Euclidean norm over the last axis, with a zero (not NaN) derivative at 0."""
    sq = jnp.sum(x * x, axis=-1)
    positive = sq > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, sq, 1.0)), 0.0)


def unit(x, fallback) -> jax.Array:
    """x / |x| over the last axis, `fallback` where x is zero; for d = 1 exactly +-1."""
    if x.shape[-1] == 1:
        return jnp.where(x > 0, 1.0, jnp.where(x < 0, -1.0, fallback)).astype(x.dtype)
    size = norm(x)
    zero = size == 0
    return jnp.where(zero[..., None], fallback, x / jnp.where(zero, 1.0, size)[..., None])


def away(force) -> jax.Array:
    """The slip heading opposite a (k, d) friction force, -force/|force| (for d = 1,
    -sgn with sgn(0) = -1)."""
    fallback = jnp.zeros_like(force).at[..., 0].set(1.0)
    return -unit(force, -fallback)


def is_sliding(heading) -> jax.Array:
    """(k,) whether each contact's (k, d) heading is non-zero (sliding)."""
    return jnp.any(heading != 0, axis=-1)


def slip_direction(fs: FrictionState, heading) -> jax.Array:
    r"""The (k, d) direction $u_i$ of the kinetic force of contacts sliding with `heading`
    (zero for stuck contacts): the heading itself for d = 1; for d = 2 the slip direction
    $v_i/|v_i|$ oriented by the heading ($\operatorname{sgn}(h_i\cdot v_i)$), the heading
    where the slip is zero: $u_i = $ unit$(\pm v_i + \sqrt\varepsilon\,h_i)$. A slip
    that has just started (the event projected $v_i$ to 0) has no direction of its own:
    its round-off (1e-30 m/s) must not point the kinetic force, so below
    $\sqrt\varepsilon$ (in the units of $v$) the heading leads; above, the bias is
    at most $\sqrt\varepsilon/|v_i|$ radians."""
    if heading.shape[-1] == 1:
        return heading
    along = jnp.where(jnp.sum(fs.vt * heading, axis=-1) >= 0, 1.0, -1.0)
    slip = fs.vt * along[:, None] + slip_floor(fs.vt.dtype) * heading
    u = fs.slip_kinetic_direction(slip, heading)
    return jnp.where(is_sliding(heading)[:, None], u, 0.0)


def slip_floor(dtype) -> float:
    r"""$\sqrt\varepsilon$: the 3-D slip speed (in the units of $v$) below which a slip's
    direction is round-off and its heading stands in for it (:func:`slip_direction`,
    :meth:`Coulomb.event_floor`, :meth:`Coulomb.switch`)."""
    return float(jnp.finfo(dtype).eps) ** 0.5


def slip_speed(fs: FrictionState) -> jax.Array:
    r"""(k,) what the event log records as a contact's tangential speed: the signed
    $T_i\dot q$ for d = 1, its norm for d = 2."""
    return fs.vt[:, 0] if fs.vt.shape[1] == 1 else norm(fs.vt)


class AbstractFriction(eqx.Module):
    """Base class of friction laws for engaged unilateral contacts (module docstring).

    A law defines :meth:`solve`, the UK acceleration with its friction at a state in a
    mode. A law whose stick and slip are modes switched by events (:class:`Coulomb`) also
    defines :meth:`event_value`, :meth:`switch`, :meth:`settle` and :meth:`recorded`; the
    defaults here are those of a law that picks its modes at every state, with no events
    (:class:`VelocityTolerance`).

    The friction mode of the k contacts is their (k, d) *heading* (`sliding`): zero for a
    stuck contact, the slip direction (+-1 for d = 1, a unit vector for d = 2) for a
    sliding one."""

    def speed_tol(self, dtype) -> float:
        """Tangential speed below which a contact that (re)engages may stick."""
        return float(jnp.finfo(dtype).eps) ** (1 / 3)

    @abc.abstractmethod
    def solve(
        self, solve: RowSolve, Q, A, b, C, fs: FrictionState, engaged, sliding
    ) -> FrictionalSolve:
        """The UK equation with the friction of the `engaged` contacts in the modes
        `sliding` ((k, d) headings, zero for stuck contacts), through the run's UK solve
        `solve` (:class:`RowSolve`); `A`, `b` hold the bilateral rows and then the k contact
        rows (:func:`frictional_solve`)."""

    def impulse(self, solve: RowSolve, A, b, fs: FrictionState, active) -> FrictionalSolve:
        r"""Coulomb friction on the impulses of an impact (the velocity jump
        $\Delta\dot q$ solves the UK equation with no force, rows `A` and right-hand sides
        `b` at the velocity level; `fs.Tdqd` holds the pre-impact slip $T\dot q^-$). Each
        `active` contact sticks ($T_i\dot q^+ = 0$) when the tangential impulse that needs
        stays within the cone, $|P_{t,i}| \le \mu_sP_{n,i}$; otherwise it slides through the
        impact with the impulse $-\mu_kP_{n,i}T_i^Tu_i$, saturated in the direction sticking
        would need ($u_i = -P_{t,i}/|P_{t,i}|$): a sticking or a sliding impact (Brach,
        *Mechanical Impact Dynamics*, 1991, ch. 4; Glocker & Pfeiffer 1996, ch. 6)."""
        n = fs.T.shape[2]
        none, zeros = jnp.zeros(n, A.dtype), jnp.zeros_like(fs.vt)
        stick = frictional_solve(solve, none, A, b, None, fs, active, zeros, zeros)
        slips = active & ~fs.admissible(stick.normal, stick.tangential)
        direction = jnp.where(slips[:, None], fs.direction_against(stick.tangential), 0.0)
        return frictional_solve(solve, none, A, b, None, fs, active, direction, zeros)

    def event_value(self, engaged, sliding, fs: FrictionState, normal, tangential) -> jax.Array:
        """Per contact: a value whose downward zero crossing switches its friction mode;
        none (shape (0,)) for a law without events."""
        return jnp.zeros((0,), fs.vt.dtype)

    def event_floor(self, engaged, sliding) -> jax.Array:
        """Per event value: how far above 0 it must start for a crossing of 0 to count (the
        segment's start value is shifted up to this); none by default."""
        return jnp.zeros((0,), sliding.dtype)

    def switch(
        self, i, engaged, sliding, motion: EventMotion
    ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]:
        """The friction event of contact `i`: (new `sliding`, velocity after it, its
        :class:`ukjax.EventKind`, tangential speed before, after). Called only for a law
        with event values; by default nothing changes."""
        nan = jnp.full((), jnp.nan, motion.qd.dtype)
        return sliding, motion.qd, jnp.asarray(EventKind.NONE), nan, nan

    def settle(self, engaged, sliding, fresh, motion: EventMotion) -> tuple[jax.Array, jax.Array]:
        """(sliding, velocity) after the contacts' modes changed (the contacts in `fresh`
        have just engaged) or at the start. By default unchanged."""
        return sliding, motion.qd

    def recorded(self, sliding: jax.Array) -> jax.Array | None:
        """What `Solution.sliding` holds: the saved modes for a law switched by events;
        None for a law that picks its modes at every state (no mode to record)."""
        return None


class Coulomb(AbstractFriction):
    r"""Exact Coulomb friction with sticking, event-driven (module docstring).

    Static and kinetic coefficients come from `System.friction`; $\mu_s \ge \mu_k \ge 0$
    is required. Stick and slip are exact modes: while stuck the tangential velocity is
    zero to round-off (no creep, unlike regularised or soft-contact friction), and every
    switch is an event in `Solution.events` (kinds `"stick"` and `"slip"`). Planar
    contacts (d = 1) and isotropic or elliptic cones in 3-D (d = 2) alike.

    - `stick_below`: a contact that engages (or starts engaged) with tangential speed at
      most this sticks if the static bound allows (default $\epsilon^{1/3}$, 6e-6 in
      float64); faster, it slides. In 3-D it also tells a stopping slip (at most this
      speed when the event fires) from a turning one.
    - `turn`: in 3-D, the cosine of the angle by which a slip may turn from its heading
      before the heading is renewed (default 0.5: 60 degrees).
    - `onset_iterations`: in 3-D, the passes that make the heading of a slip starting
      from rest consistent (:meth:`consistent_heading`; default 8, 0: the heading against
      the holding force).

    Example:
        >>> import jax, jax.numpy as jnp, ukjax
        >>> jax.config.update("jax_enable_x64", True)
        >>> from ukjax.systems import FrictionBlock
        >>> block = FrictionBlock(mass=1.0, g=9.81, incline=0.5, mu_static=0.3, mu_kinetic=0.2)
        >>> sol = ukjax.simulate(block, jnp.zeros(2), jnp.zeros(2), jnp.linspace(0.0, 1.0, 3),
        ...                      friction=ukjax.Coulomb())
        >>> int(sol.sliding[0, 0]), int(sol.events.count)  # tan 0.5 > 0.3: slides at once
        (-1, 0)
    """

    stick_below: float | None = eqx.field(static=True, default=None)

    turn: float = eqx.field(static=True, default=0.5)

    onset_iterations: int = eqx.field(static=True, default=8)

    def __check_init__(self):
        if not 0.0 < self.turn < 1.0:
            raise ValueError(f"Coulomb: turn must be in (0, 1) (a cosine); got {self.turn}.")

    def speed_tol(self, dtype) -> float:
        eps = float(jnp.finfo(dtype).eps)
        return eps ** (1 / 3) if self.stick_below is None else self.stick_below

    def solve(self, solve: RowSolve, Q, A, b, C, fs: FrictionState, engaged, sliding):
        """Stuck contacts held at zero tangential acceleration, sliding ones with kinetic
        friction along their slip (:func:`frictional_solve`, :func:`slip_direction`)."""
        direction = slip_direction(fs, sliding)
        return frictional_solve(solve, Q, A, b, C, fs, engaged, direction, jnp.zeros_like(fs.vt))

    def event_value(self, engaged, sliding, fs: FrictionState, normal, tangential):
        r"""Per contact: $\mu_sN - |\lambda_t|$ while stuck; while sliding $s\,v$ (d = 1),
        $h\cdot v - \tfrac12|v|$ (d = 2: the slip stopped, or turned by 60 degrees;
        see :meth:`event_floor` for a slip that has just started)."""
        moving = engaged & is_sliding(sliding)
        stuck = jnp.where(engaged & ~moving, fs.cone_excess(normal, tangential), 1.0)
        along = jnp.sum(sliding * fs.vt, axis=-1)
        if fs.vt.shape[1] > 1:
            along = along - self.turn * norm(fs.vt)
        return jnp.where(moving, along, stuck)

    def event_floor(self, engaged, sliding) -> jax.Array:
        r"""A 3-D slip's event value must fall below $-(1 - \text{turn})\sqrt\varepsilon$
        (not just below 0) to fire when the segment starts with its slip below
        $\sqrt\varepsilon$ - a slip that has just started, whose direction is still
        round-off; one whose value starts above that fires at 0, on time."""
        moving = engaged & is_sliding(sliding)
        if sliding.shape[-1] == 1:
            return jnp.zeros(moving.shape, sliding.dtype)
        size = (1.0 - self.turn) * slip_floor(sliding.dtype)
        return jnp.where(moving, size, 0.0).astype(sliding.dtype)

    def switch(self, i, engaged, sliding, motion: EventMotion):
        r"""A stuck contact starts to slide (opposite to the friction force that held it);
        a sliding one whose slip reached zero sticks if the static bound holds there, and
        slides on away from the holding force otherwise; $v_i$ is then set to 0 (the UK
        impulsive projection); the other slips at round-off (below `stick_below`) are
        tried stuck with it, so a body coming to rest on several contacts stops them
        together. A 3-D slip that turned (not stopped) renews its heading;
        so does, unprojected, a slow slip (below `stick_below`) that has grown past
        round-off (:meth:`event_floor`) where the static bound fails - e.g. one that has
        just started and grows away from its heading: the
        holding force's direction need not be where the contact can slide (with
        $\mu_s = \mu_k$ the slip starts with zero acceleration), and re-projecting to
        $v_i = 0$ would stall the run at one instant. A 3-D slip that starts from rest
        then takes the consistent heading (:meth:`settle`, which follows every event)."""
        k = engaged.shape[0]
        trig = jnp.arange(k) == i
        before = motion.friction_state(motion.qd)
        was_sliding = is_sliding(sliding)
        slow = norm(before.vt) <= self.speed_tol(before.vt.dtype)
        # a slip that stops takes the other slips at round-off with it: they are tried
        # stuck jointly (a body coming to rest on several contacts stops them all at once;
        # one at a time, each sticking contact makes the others slip on, without end)
        joins = engaged & was_sliding & slow & ~trig & jnp.any(trig & was_sliding & slow)
        trial = trig | joins
        held = jnp.where(trial[:, None], 0.0, sliding)
        fs, normal, tangential = motion.forces(motion.qd, engaged, held)
        holds = fs.admissible(normal, tangential)
        new = jnp.where((~was_sliding | ~holds)[:, None], fs.heading_against(tangential), 0.0)
        turning = reversing = jnp.asarray(False)
        if fs.vt.shape[1] > 1:  # a 3-D slip that does not stick slides on along itself
            turning = jnp.any(trig & was_sliding & ~slow)
            reversing = jnp.any(trig & was_sliding & slow & ~holds & self.grown(before.vt))
            new = jnp.where(turning | reversing, unit(before.vt, sliding), new)
        changed = jnp.where(turning | reversing, trig, trial) & engaged
        sliding = jnp.where(changed[:, None], new, sliding)
        stuck = ~is_sliding(sliding)
        qd = motion.hold(motion.qd, engaged, engaged & (stuck | trig))
        qd = jnp.where(turning | reversing, motion.qd, qd)
        kind = jnp.where(jnp.any(trig & stuck), EventKind.STICK, EventKind.SLIP)
        kind = jnp.where(turning, EventKind.NONE, kind)
        after = motion.friction_state(qd)
        return sliding, qd, kind, entry_at(trig, slip_speed(fs)), entry_at(trig, slip_speed(after))

    def grown(self, vt) -> jax.Array:
        r"""(k,) whether a 3-D slip has grown past round-off: above half the speed
        $\sqrt\varepsilon(1 - \text{turn})/(1 + \text{turn})$ at which a fresh slip's
        event fires (:meth:`event_floor`). Its velocity's direction is then its heading
        (:meth:`switch`); below, the consistent one is (:meth:`settle`). One threshold
        for both: a slip between two thresholds was turned back and forth at one instant
        (`examples/ragdoll_falls.py`: a foot's slip onset took 7 turn events)."""
        least = (1.0 - self.turn) / (1.0 + self.turn) * slip_floor(vt.dtype)
        return norm(vt) > 0.5 * least

    def settle(self, engaged, sliding, fresh, motion: EventMotion):
        """A contact that has just engaged sticks if slow and admissible, else slides (along
        its velocity, or away from the holding force); a stuck contact whose holding force
        exceeds the static bound slides; stuck contacts are held at zero tangential
        velocity; a 3-D slip at round-off (one starting from rest) takes its consistent
        heading (:meth:`consistent_heading`)."""
        fs = motion.friction_state(motion.qd)
        sliding = jnp.where(fresh[:, None], sliding_from_speed(self, fs), sliding)
        sliding = jnp.where(engaged[:, None], sliding, 0.0)
        # slips at round-off (just started: by the event's switch, or here) set out along
        # their consistent heading; one trace for both (the switch's own is not needed)
        at_rest = ~self.grown(fs.vt)
        fs, normal, tangential = motion.forces(motion.qd, engaged, sliding)
        bad = engaged & ~is_sliding(sliding) & ~fs.admissible(normal, tangential)
        sliding = jnp.where(bad[:, None], fs.heading_against(tangential), sliding)
        qd = motion.hold(motion.qd, engaged, engaged & ~is_sliding(sliding))
        onset = engaged & is_sliding(sliding) & at_rest
        return self.consistent_heading(motion, qd, engaged, sliding, onset), qd

    def consistent_heading(self, motion: EventMotion, qd, engaged, sliding, onset) -> jax.Array:
        r"""3-D slips that start from rest (`onset`) take the *consistent* heading: the
        direction $u$ along which the slip then grows, $\dot v_i \parallel u_i$ with the
        kinetic force $-\mu_kN_iu_i$ (Pfeiffer & Glocker 1996, sec. 4.3), found by the
        fixed-point iteration $u \leftarrow \dot v(u)/|\dot v(u)|$ (`onset_iterations`
        passes, from the heading against the holding force). A heading off it turns on
        the time scale $|v|/|\dot v|$, which is stiff while the slip is small: the run
        would crawl at round-off steps. Unchanged for d = 1 (the sign is the direction)."""
        if sliding.shape[-1] == 1 or self.onset_iterations == 0:
            return sliding

        def renew(_, heading):
            growth, size = motion.slip_acceleration(qd, engaged, heading)
            # a slip that starts with no acceleration (mu_s = mu_k at the cone's edge)
            # keeps its heading: its growth is round-off
            clear = norm(growth) > slip_floor(growth.dtype) * size
            return jnp.where((onset & clear)[:, None], unit(growth, heading), heading)

        return jax.lax.fori_loop(0, self.onset_iterations, renew, sliding)

    def recorded(self, sliding: jax.Array) -> jax.Array:
        """(..., k) ints: for d = 1 the direction (0 stuck, +1 / -1 sliding along /
        against the tangent row), for d = 2 1 sliding, 0 stuck."""
        if sliding.shape[-1] == 1:
            return sliding[..., 0].astype(jnp.int32)
        return is_sliding(sliding).astype(jnp.int32)


class VelocityTolerance(AbstractFriction):
    r"""Bajodah 2003's stick–slip rule with a velocity tolerance and a damped stick phase
    (§5.8–5.9, eqs 379–386), generalised to UK contact forces.

    At every state, per engaged contact: with $F_i$ the friction force that would hold
    the tangential acceleration at zero (the negative of the net applied tangential
    force, $-(F_{s2} - F_{s1})$ for the thesis's block),

    - **slide** if $|v_i| > \delta$, or if $|v_i| \le \delta$ and $\mu_s N_i < |F_i|$,
      with kinetic friction $-\mu_k N_i s_i$; the direction is $s_i = \operatorname{sgn}
      v_i$ when $|v_i| > \delta$. Below the tolerance the thesis keeps $\operatorname{sgn}
      v_i$ with $\operatorname{sgn}(0) = -1$ (eqs 382–383, `literal=True`); the physically
      consistent choice (default) slides along the net applied force, $s_i =
      -\operatorname{sgn} F_i$ (a correction to Bajodah 2003, Ex. 5.3, whose rule
      can make friction push along the load). In 3-D (d = 2) the direction is
      $v_i/|v_i|$, or $-F_i/|F_i|$ below the tolerance;
    - otherwise **stick** through the acceleration constraint $\dot v_i = -a\,v_i$, whose
      UK constraint force is the friction force.

    The switches happen inside the right-hand side (no events), so the motion creeps at
    speeds up to $\delta$ and an adaptive solver meets discontinuities; use a fixed-step
    solver as the thesis does (RK4, `ukjax.RK4()`), or :class:`Coulomb` for exact sticking.

    - `tolerance` $\delta > 0$ (the thesis leaves it open; default 1e-3).
    - `damping` $a > 0$ (the thesis's $a = b = 2$).
    - `literal`: use the thesis's $\operatorname{sgn}$ below the tolerance (a Python bool,
      or a boolean array to switch readings without recompiling).

    Example:
        >>> import ukjax
        >>> law = ukjax.VelocityTolerance(tolerance=1e-3, damping=2.0)
        >>> float(law.tolerance), law.literal
        (0.001, False)
    """

    tolerance: float | jax.Array = 1e-3
    damping: float | jax.Array = 2.0
    literal: bool | jax.Array = False

    def __check_init__(self):
        for name in ("tolerance", "damping"):
            value = getattr(self, name)
            if isinstance(value, (int, float)) and not value > 0:
                raise ValueError(f"VelocityTolerance: {name} must be > 0; got {value}.")

    def solve(self, solve: RowSolve, Q, A, b, C, fs: FrictionState, engaged, sliding):
        """The modes picked at this state (`sliding` is not used: :func:`pointwise_solve`)."""
        return pointwise_solve(self, solve, Q, A, b, C, fs, engaged)

    def pointwise_modes(self, fs, hold_force, normal) -> tuple[jax.Array, jax.Array]:
        """(kinetic force directions (k, d), zero for stuck contacts; stick targets (k, d))
        at a state. `hold_force` (k, d) is the friction force that would hold each contact
        with zero tangential acceleration, `normal` the normal forces."""
        dtype = fs.vt.dtype
        slow = norm(fs.vt) <= jnp.asarray(self.tolerance, dtype)
        exceeds = ~fs.admissible(normal, hold_force)
        slide = ~slow | exceeds
        consistent = fs.direction_against(hold_force)  # along the net applied force
        if fs.vt.shape[1] == 1:
            moving = sgn(fs.vt).astype(dtype)
        else:
            moving = fs.slip_kinetic_direction(fs.vt, consistent)
        pick = (slow & ~jnp.asarray(self.literal))[:, None]
        direction = jnp.where(slide[:, None], jnp.where(pick, consistent, moving), 0.0)
        target = -jnp.asarray(self.damping, dtype) * fs.vt
        return direction, target


class FrictionState(eqx.Module):
    r"""The tangential quantities of every contact at one state: rows `T` (k, d, n), slip
    velocities `vt` = T qd (k, d), the acceleration-free part `Tdqd` (k, d) of their
    rates, and the coefficients: (k,) for isotropic cones, (k, d) for elliptic ones.
    `surface` (k, d): the velocity along the rows of a moving surface that the system
    declares (then `vt` = T qd - surface and `Tdqd` includes minus its rate), else None.

    **Elliptic cones** (coefficients $\mu_{s,ij}$, $\mu_{k,ij}$ per tangent row $j$ of
    contact $i$, all positive): a force $F$ along the rows holds while
    $|F \oslash \mu_s| \le N$ (the ellipse $\sum_j (F_j/\mu_{s,j})^2 \le N^2$), and a
    slip $v$ meets the force of maximal dissipation on the kinetic ellipse,
    $F = -N\,\mu_k \odot \hat u$ with $\hat u = (\mu_k \odot v)/|\mu_k \odot v|$,
    i.e. $F_j = -N\mu_{k,j}^2v_j/\sqrt{\sum_l \mu_{k,l}^2v_l^2}$ (Goyal, Ruina and
    Papadopoulos, *Planar sliding with dry friction*, Wear 143 (1991); Pfeiffer and
    Glocker, *Multibody Dynamics with Unilateral Contacts*, 1996, sec. 4.3). With equal
    coefficients along both rows these are the isotropic formulas."""

    T: jax.Array
    vt: jax.Array
    Tdqd: jax.Array
    mu_s: jax.Array
    mu_k: jax.Array
    surface: jax.Array | None = None

    @property
    def elliptic(self) -> bool:
        """Whether the coefficients are given per tangent row, (k, d)."""
        return self.mu_k.ndim == 2

    def _per_row(self, mu) -> jax.Array:
        return mu if self.elliptic else mu[:, None]

    def kinetic(self, direction) -> jax.Array:
        r"""(k, d): the kinetic force per unit normal force is $-$ this, for kinetic
        directions $\hat u$ (unit, or zero): $\mu_k\hat u$."""
        return self._per_row(self.mu_k) * direction

    def admissible(self, normal, force) -> jax.Array:
        """(k,) whether the (k, d) `force` along the rows lies in the static cone of the
        normal forces `normal`."""
        return self.cone_excess(normal, force) >= 0

    def cone_excess(self, normal, force) -> jax.Array:
        r"""(k,) how far `force` lies inside the static cone: $\mu_sN - |F|$
        (isotropic), $N - |F\oslash\mu_s|$ (elliptic); negative outside."""
        if self.elliptic:
            return normal - norm(force / self.mu_s)
        return self.mu_s * normal - norm(force)

    def slip_kinetic_direction(self, v, fallback) -> jax.Array:
        r"""The kinetic direction $\hat u$ of slips `v` (k, d): $v/|v|$, elliptic
        $(\mu_k\odot v)/|\mu_k\odot v|$ (`fallback` where `v` is zero)."""
        if self.elliptic:
            return unit(self.mu_k * v, unit(self.mu_k * fallback, fallback))
        return unit(v, fallback)

    def direction_against(self, force) -> jax.Array:
        r"""The kinetic direction $\hat u$ whose kinetic force $-N\mu_k\hat u$ points
        along `force` (k, d) (the force sticking would need, saturated on the cone):
        $-F/|F|$, elliptic $-(F\oslash\mu_k)/|F\oslash\mu_k|$."""
        return away(force / self.mu_k if self.elliptic else force)

    def heading_against(self, force) -> jax.Array:
        r"""The slip heading (a direction of $v$) whose kinetic force points along
        `force` (the holding force a contact exceeds: it slips against it): $-F/|F|$,
        elliptic $-(F\oslash\mu_k^2)/|F\oslash\mu_k^2|$ (maximal dissipation on the
        ellipse puts the force of a slip $v$ along $-\mu_k^2\odot v$)."""
        return away(force / self.mu_k**2 if self.elliptic else force)


def _rows(system: System, t, q, k: int):
    out = system.friction(t, q)
    if out is None or len(out) not in (3, 4):
        raise ValueError(
            f"{type(system).__name__}.friction must return (T, mu_static, mu_kinetic) or "
            f"(T, mu_static, mu_kinetic, surface_velocity); got {out!r}."
        )
    T, mu_s, mu_k = out[:3]
    T = jnp.asarray(T, q.dtype)
    n = q.shape[0]
    if T.ndim == 1 and k == 1:  # one contact's row, (n,)
        T = T[None, None, :]
    elif T.ndim == 2:  # one planar row per contact, (k, n)
        T = T[:, None, :]
    if T.ndim != 3 or T.shape[0] != k or T.shape[2] != n or T.shape[1] not in (1, 2):
        raise ValueError(
            f"{type(system).__name__}.friction: T must have shape ({k}, d, {n}) with d = 1 "
            "(planar contact: one tangent row per unilateral contact) or d = 2 (3-D: two "
            f"orthonormal tangent rows per contact), one column per coordinate; got "
            f"{jnp.shape(out[0])}."
        )

    d = T.shape[1]
    elliptic = d == 2 and 2 in (jnp.ndim(mu_s), jnp.ndim(mu_k))

    def coefficient(mu, name):
        mu = jnp.asarray(mu, q.dtype)
        if elliptic:  # one coefficient per tangent row
            if mu.ndim > 2 or (mu.ndim == 2 and mu.shape not in ((k, d), (1, d))):
                raise ValueError(
                    f"{type(system).__name__}.friction: {name} of an elliptic cone must "
                    f"have shape ({k}, {d}) (one coefficient per tangent row); got {mu.shape}."
                )
            return jnp.broadcast_to(mu if mu.ndim != 1 else mu[:, None], (k, d))
        if mu.ndim > 1 or (mu.ndim == 1 and mu.shape[0] not in (1, k)):
            raise ValueError(
                f"{type(system).__name__}.friction: {name} must be a scalar or have shape "
                f"({k},) (one isotropic coefficient per contact), or for 3-D contacts "
                f"({k}, 2) (an elliptic cone); got {mu.shape}."
            )
        return jnp.broadcast_to(mu, (k,))

    surface = None if len(out) == 3 else _surface_velocity(out[3], system, k, d, q.dtype)
    return T, coefficient(mu_s, "mu_static"), coefficient(mu_k, "mu_kinetic"), surface


def _surface_velocity(w, system: System, k: int, d: int, dtype) -> jax.Array:
    """The moving surface's velocity along the tangent rows, (k, d), from a scalar, (k,)
    for d = 1, (d,) for one contact, or (k, d)."""
    w = jnp.asarray(w, dtype)
    if w.ndim == 1 and d == 1 and w.shape[0] in (1, k):
        w = w[:, None]
    elif w.ndim == 1 and k == 1 and w.shape[0] == d:  # one contact's velocity along its rows
        w = w[None, :]
    if w.ndim > 2 or (w.ndim == 2 and w.shape not in ((k, d), (1, d))) or w.ndim == 1:
        raise ValueError(
            f"{type(system).__name__}.friction: surface_velocity must be a scalar or have "
            f"shape ({k}, {d}) (one entry per tangent row; ({k},) for planar contacts, ({d},) "
            f"for one contact); got {w.shape}."
        )
    return jnp.broadcast_to(w, (k, d))


@traced_once  # the event code asks for it again and again at one state
def friction_state(system: System, t, q, qd, k: int) -> FrictionState:
    r"""$T$, $v = T\dot q - w$, $\dot T\dot q - \dot w$ (by a `jvp` along $(1, \dot q)$),
    $\mu_s, \mu_k$, and the surface's velocity $w$ (None where the system declares none:
    then $v = T\dot q$)."""

    def velocity(t_, q_):  # the rows once: their values ride along as the jvp's aux
        T_, mu_s_, mu_k_, w_ = _rows(system, t_, q_, k)
        v = T_ @ qd if w_ is None else T_ @ qd - w_
        return v, (T_, mu_s_, mu_k_, w_)

    one = jnp.ones((), q.dtype)
    vt, Tdqd, (T, mu_s, mu_k, w) = jax.jvp(velocity, (t, q), (one, qd), has_aux=True)
    return FrictionState(T, vt, Tdqd, mu_s, mu_k, w)


def tangent_dim(system: System, t, q) -> int:
    """d, the number of tangent rows per contact that `system.friction` declares (1 if
    it declares none)."""
    if not declares_friction(system, t, q):
        return 1
    out = jax.eval_shape(lambda t, q: system.friction(t, q), t, q)
    assert out is not None
    shape = out[0].shape
    return shape[1] if len(shape) == 3 else 1


def invalid_coefficients(fs: FrictionState) -> jax.Array:
    """Per contact: coefficients outside 0 <= mu_kinetic <= mu_static (or not finite);
    for an elliptic cone (one per tangent row), outside 0 < mu_kinetic <= mu_static along
    either row."""
    finite = jnp.isfinite(fs.mu_s) & jnp.isfinite(fs.mu_k)
    if fs.elliptic:
        return jnp.any(~finite | (fs.mu_k <= 0) | (fs.mu_s < fs.mu_k), axis=-1)
    return ~finite | (fs.mu_k < 0) | (fs.mu_s < fs.mu_k)


def sliding_from_speed(law: AbstractFriction, fs: FrictionState) -> jax.Array:
    """The mode a contact takes when it engages: stuck (heading 0) if its tangential speed
    is at most the law's `speed_tol`, else sliding along its velocity."""
    slow = norm(fs.vt) <= law.speed_tol(fs.vt.dtype)
    return jnp.where(slow[:, None], 0.0, unit(fs.vt, 0.0))


def declares_friction(system: System, t, q) -> bool:
    """Whether `system.friction` returns friction data (not None) at states shaped like
    (t, q): a wrapper that forwards the hook (`ukjax.ServoControlled`) declares what its
    inner system declares."""
    if not overrides(system, "friction"):
        return False
    return jax.eval_shape(lambda t, q: system.friction(t, q), t, q) is not None


def default_friction(friction, declared: bool) -> AbstractFriction | None:
    """`friction`, or :class:`Coulomb` for a system that declares friction, else None."""
    if friction is None and declared:
        return Coulomb()
    return friction


def check_friction(friction) -> AbstractFriction:
    """`friction`, or a TypeError that says what to pass."""
    if not isinstance(friction, AbstractFriction):
        raise TypeError(
            "friction must be a friction law: ukjax.Coulomb() or "
            f"ukjax.VelocityTolerance(tolerance=..., damping=...); got {friction!r}."
        )
    return friction


class FrictionalSolve(eqx.Module):
    """The UK equation with friction: its `terms`, the stacked rows `A`, `b`, the total
    non-ideal force `C`, the multipliers `lam` of every row, and the contacts' `normal`
    (k,) and `tangential` (k, d) forces (tangential: the friction force along the rows
    of T, stuck or sliding)."""

    terms: UKTerms
    A: jax.Array
    b: jax.Array
    C: jax.Array
    normal: jax.Array
    tangential: jax.Array


def multipliers(A, terms: UKTerms, C, kernels: AbstractKernels) -> jax.Array:
    r"""Least-squares $A^T\lambda = M\ddot q - Q - C$ (minimum norm for redundant rows).

    The force of the rows is the whole ideal part of the constraint force: `Qc_ideal`
    ($MA_M^+(b - Aa)$, $a = M^{-1}Q$) less the part $MA_M^+AM^{-1}C$ that the rows take
    from a non-ideal force $C$ (Udwadia 2004, eqs 11-12); C None: no non-ideal force.
    `kernels`: the run's, whose dense operations for A's n coordinates do the solve."""
    Qc = terms.Qc_ideal if C is None else terms.Qc_ideal + terms.Qc_nonideal - C
    return row_multipliers(A, Qc, kernels.ops(A.shape[1]))


def frictional_solve(
    solve: RowSolve, Q, A, b, C, fs: FrictionState, engaged, direction, stick_target
) -> FrictionalSolve:
    r"""The UK acceleration with the engaged contacts' friction. `A`, `b` hold the
    bilateral rows and then the k contact rows (zero rows for free contacts); an engaged
    contact whose kinetic `direction` $u_i$ ((k, d)) is zero is stuck and adds
    $T_i\ddot q = $ `stick_target` $- \dot T_i\dot q$ (d rows); the others slide with the
    force $-\mu_kN_iT_i^Tu_i$, $N$ from $(I - J)N = N_0$ (module docstring).

    Everything is affine in the force and in the sliding contacts' normal forces $\nu$
    ($C = C_0 + W\nu$), so the run's UK solve (`solve`, the one entry of
    :func:`ukjax._dynamics.row_solve`), mapped with `vmap` over the columns
    $(Q, b)$, $(C_0, 0)$ and $(W_j, 0)$ of one set of rows (one factorisation of $M$ and of
    the Gram matrix, as they do not depend on the column), gives $\ddot q$ and the row
    forces of each column; their multipliers $\lambda$ are the minimum-norm solutions of
    $A^T\lambda = Q_c$ (the run's kernels' :meth:`ukjax.AbstractKernels.column_multipliers`);
    then $N$ solves the k-by-k system.
    A non-ideal force $C$ gives the acceleration of the force $Q + C$ (Udwadia 2004,
    eq 12); its columns keep the split of the constraint force into ideal and non-ideal."""
    k, d, n = fs.T.shape
    m_normal = A.shape[0] - k
    stuck = engaged & ~is_sliding(direction)
    held = jnp.repeat(stuck, d)
    A2 = jnp.concatenate([A, jnp.where(held[:, None], fs.T.reshape(k * d, n), 0.0)])
    b2 = jnp.concatenate([b, jnp.where(held, (stick_target - fs.Tdqd).reshape(k * d), 0.0)])
    slide = (engaged & ~stuck).astype(fs.T.dtype)
    W = (-slide[:, None] * jnp.einsum("kd,kdn->kn", fs.kinetic(direction), fs.T)).T  # (n, k)
    C0 = jnp.zeros_like(Q) if C is None else C
    forces = jnp.concatenate([Q[None], C0[None], W.T])  # (2 + k, n) force columns
    rhs = jnp.zeros((2 + k, b2.shape[0]), b2.dtype).at[0].set(b2)  # b with Q's column only

    def column(F, r):
        t = solve(A2, F, r)
        return t.qdd, t.a, t.Qc_ideal, t.inconsistency, t.spd_ok

    qdd_cols, a_cols, Qc_cols, inconsistency, spd_ok = jax.vmap(column)(forces, rhs)
    lam_cols = solve.uk_solver.kernels.column_multipliers(A2, Qc_cols.T)
    N0 = lam_cols[m_normal : m_normal + k, 0] + lam_cols[m_normal : m_normal + k, 1]
    J = lam_cols[m_normal : m_normal + k, 2:]
    N = small_solve(jnp.eye(k, dtype=Q.dtype) - J, N0)
    weights = jnp.concatenate([jnp.ones(2, Q.dtype), N])  # the columns' coefficients
    qdd, lam = qdd_cols.T @ weights, lam_cols @ weights
    C2 = C0 + W @ N
    terms = UKTerms(
        qdd=qdd,
        a=a_cols[0],
        Qc_ideal=Qc_cols[0],
        Qc_nonideal=C2 + Qc_cols[1:].T @ weights[1:],
        residual=A2 @ qdd - b2,
        # the columns of C_0 and W lie in the range of the rows: only Q's can be inconsistent
        inconsistency=inconsistency[0],
        spd_ok=spd_ok[0],
        consistency_floor=solve.consistency_floor(Q.dtype),
    )
    normal = lam[m_normal : m_normal + k]
    kinetic = -normal[:, None] * fs.kinetic(direction)
    held_force = lam[m_normal + k :].reshape(k, d)
    tangential = jnp.where(stuck[:, None], held_force, jnp.where(slide[:, None] > 0, kinetic, 0.0))
    return FrictionalSolve(terms, A2, b2, C2, normal, tangential)


def pointwise_solve(
    law: VelocityTolerance, solve: RowSolve, Q, A, b, C, fs: FrictionState, engaged
) -> FrictionalSolve:
    """For a law that picks its modes at every state: a trial solve with every engaged contact held
    (zero tangential acceleration) gives the holding forces; the law picks the modes; the
    final solve uses them."""
    zeros = jnp.zeros_like(fs.vt)
    trial = frictional_solve(solve, Q, A, b, C, fs, engaged, zeros, zeros)
    direction, target = law.pointwise_modes(fs, trial.tangential, trial.normal)
    direction = jnp.where(engaged[:, None], direction, 0.0)
    return frictional_solve(solve, Q, A, b, C, fs, engaged, direction, target)
