r"""Mechanisms of the IFToMM Library of Computational Benchmark Problems (multibody
problems A02 "N-four-bar mechanism" and A04 "Bricard mechanism"; M. González, D. Dopico,
U. Lugrís, J. Cuadrado, *A benchmarking system for MBS simulation software: problem
standardization and performance measurement*, Multibody Syst. Dyn. 16 (2006) 179-190),
in natural (Cartesian point and unit vector) coordinates with every constraint left in.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from .._system import System


class NFourBar(System):
    r"""IFToMM benchmark A02: a chain of N parallelogram four-bars (2N + 1 rods).

    Ground pivots $A_i = (iL, 0)$, $i = 0 \dots N$; moving points $B_i$; cranks $A_iB_i$
    and couplers $B_{i-1}B_i$, every rod of length $L$ and mass $m$ (uniform). Coordinates
    $q = [x_{B_0}, y_{B_0}, \dots, x_{B_N}, y_{B_N}]$ (natural coordinates), constraints
    $|B_i - A_i|^2 = L^2$ (N + 1) and $|B_i - B_{i-1}|^2 = L^2$ (N): 2N + 1 rows on
    2N + 2 coordinates, one degree of freedom. A rod with end velocities $v_1, v_2$ has
    $T = \tfrac m6(|v_1|^2 + v_1\cdot v_2 + |v_2|^2)$ (exact for a uniform slender rod),
    and gravity $-g\hat y$ acts on its centre.

    **Singular configurations.** When the cranks are horizontal (every bar aligned with
    the ground) all rows lose their $y$ components: the Jacobian drops from rank 2N + 1
    to N + 1 and the mechanism has N + 1 instantaneous degrees of freedom, twice per
    revolution. The benchmark's motion (:meth:`initial_state`: cranks vertical, $\dot
    x_{B_0} = 1$ m/s) follows the parallelogram branch through them; on it every crank
    has the same angle $\theta$ and
    $$\Big(\tfrac{N+1}3 + N\Big)mL^2\ddot\theta = -\Big(\tfrac{N+1}2 + N\Big)mgL\cos\theta.$$

    Defaults: $N = 1$, $L = 1$ m, $m = 1$ kg, $g = 9.81$ (the benchmark's values; the
    library's problem uses N = 40 over 20 s, published comparisons use N = 1 ... 40).

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import NFourBar
        >>> chain = NFourBar(N=2)
        >>> q0, qd0 = chain.initial_state()
        >>> q0.shape, float(jnp.abs(ukjax.constraint_residuals(chain, 0.0, q0, qd0).position).max())
        ((6,), 0.0)
    """

    N: int = eqx.field(static=True, default=1)
    mass: float = 1.0
    length: float = 1.0
    g: float = 9.81

    def __check_init__(self):
        if not isinstance(self.N, int) or self.N < 1:
            raise ValueError(f"NFourBar: N must be a positive integer; got {self.N!r}.")

    def num_coordinates(self) -> int:
        return 2 * (self.N + 1)

    def _ground(self, dtype) -> jax.Array:
        i = jnp.arange(self.N + 1, dtype=dtype)
        return jnp.stack([i * self.length, jnp.zeros_like(i)], axis=1)

    def kinetic_energy(self, t, q, qd):
        v = qd.reshape(-1, 2)
        cranks = jnp.sum(v**2) / 6.0
        a, b = v[:-1], v[1:]
        couplers = jnp.sum(a**2 + a * b + b**2) / 6.0
        return self.mass * (cranks + couplers)

    def potential_energy(self, t, q):
        y = q.reshape(-1, 2)[:, 1]
        centres = jnp.sum(y) / 2.0 + jnp.sum(y[:-1] + y[1:]) / 2.0
        return self.mass * self.g * centres

    def holonomic(self, t, q):
        p = q.reshape(-1, 2)
        cranks = jnp.sum((p - self._ground(q.dtype)) ** 2, axis=1)
        couplers = jnp.sum((p[1:] - p[:-1]) ** 2, axis=1)
        return jnp.concatenate([cranks, couplers]) - self.length**2

    def initial_state(self, speed: float = 1.0) -> tuple[jax.Array, jax.Array]:
        """The benchmark's initial state: cranks vertical, every $B_i$ moving at `speed`
        along $+x$."""
        ground = self._ground(jnp.result_type(float))
        q0 = (ground + jnp.array([0.0, self.length])).ravel()
        qd0 = jnp.tile(jnp.array([speed, 0.0]), self.N + 1)
        return q0, qd0

    def crank_angles(self, q) -> jax.Array:
        """The angle of every crank from the $x$ axis, (..., N + 1)."""
        p = q.reshape(*q.shape[:-1], self.N + 1, 2)
        d = p - self._ground(q.dtype)
        return jnp.arctan2(d[..., 1], d[..., 0])


# Bricard: joint positions and axes in the benchmark's initial configuration.
_BRICARD_POINTS = ((0, 0, 0), (1, 0, 0), (1, -1, 0), (1, -1, 1), (0, -1, 1), (0, 0, 1))
_BRICARD_AXES = ((0, 1, 0), (0, 0, 1), (1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 0, 0))


class Bricard(System):
    r"""IFToMM benchmark A04: the Bricard mechanism, an overconstrained closed loop of five
    rods and six revolute joints with one degree of freedom.

    Joints $J_0 \dots J_5$ at $(0,0,0)$, $(1,0,0)$, $(1,-1,0)$, $(1,-1,1)$, $(0,-1,1)$,
    $(0,0,1)$ (times $L$) in the initial configuration, rod $k$ from $J_{k-1}$ to $J_k$;
    $J_0$ and $J_5$ are on the ground (the ground closes the loop), each joint axis is
    perpendicular to both rods it connects: $\hat y, \hat z, \hat x, \hat y, \hat z, \hat x$.
    Gravity $-g\hat y$, start at rest.

    **Natural coordinates** (24): the four moving joints $P_1 \dots P_4$ and the unit
    vectors $u_1 \dots u_4$ of their axes. Rod $k$ carries the frame $(P_k - P_{k-1}, u_a,
    u_b)$ of its two joint axes, and is rigid when $|P_k - P_{k-1}|^2 = L^2$,
    $(P_k - P_{k-1})\cdot u_a = (P_k - P_{k-1})\cdot u_b = u_a\cdot u_b = 0$; sharing a
    point and an axis vector is a revolute joint. With $|u_j|^2 = 1$: 24 constraints on 24
    coordinates, of rank 23 everywhere (Grübler's count gives no mobility; the special
    geometry gives one degree of freedom): one constraint is redundant at every
    configuration, which is what the benchmark tests.

    Each rod is a uniform prism of length $L$, mass $m$ and square section of side $s$,
    exactly: $x = P_{k-1} + c_1(P_k - P_{k-1}) + c_2u_a + c_3u_b$ with $c_1 \in [0, 1]$,
    $c_2, c_3 \in [-s/2, s/2]$ gives
    $T = \tfrac m6(|\dot P_{k-1}|^2 + \dot P_{k-1}\cdot\dot P_k + |\dot P_k|^2)
    + \tfrac{ms^2}{24}(|\dot u_a|^2 + |\dot u_b|^2)$.

    Defaults: $L = 1$ m, $m = 1$ kg, $s = 0.1$ m, $g = 9.81$ (the benchmark's values).

    Example:
        >>> import jax, jax.numpy as jnp, ukjax
        >>> from ukjax.systems import Bricard
        >>> mech = Bricard()
        >>> q0, qd0 = mech.initial_state()
        >>> A = jax.jacfwd(lambda q: mech.holonomic(0.0, q))(q0)
        >>> A.shape, int(jnp.linalg.matrix_rank(A))
        ((24, 24), 23)
    """

    mass: float = 1.0
    length: float = 1.0
    side: float = 0.1
    g: float = 9.81

    def num_coordinates(self) -> int:
        return 24

    def _frames(self, q):
        """Joint points (6, 3) and axis vectors (6, 3), the ground ones included."""
        L = self.length
        fixed_p = jnp.asarray(_BRICARD_POINTS, q.dtype) * L
        fixed_u = jnp.asarray(_BRICARD_AXES, q.dtype)
        p = jnp.concatenate([fixed_p[:1], q[:12].reshape(4, 3), fixed_p[5:]])
        u = jnp.concatenate([fixed_u[:1], q[12:].reshape(4, 3), fixed_u[5:]])
        return p, u

    def kinetic_energy(self, t, q, qd):
        v = jnp.concatenate(
            [jnp.zeros((1, 3), q.dtype), qd[:12].reshape(4, 3), jnp.zeros((1, 3), q.dtype)]
        )
        w = qd[12:].reshape(4, 3)
        a, b = v[:-1], v[1:]
        points = jnp.sum(a**2 + a * b + b**2) / 6.0
        # every moving axis vector is shared by two rods
        axes = 2.0 * jnp.sum(w**2) * self.side**2 / 24.0
        return self.mass * (points + axes)

    def potential_energy(self, t, q):
        p, _ = self._frames(q)
        y = p[:, 1]
        return self.mass * self.g * jnp.sum(y[:-1] + y[1:]) / 2.0

    def holonomic(self, t, q):
        p, u = self._frames(q)
        r = p[1:] - p[:-1]  # the five rods
        ua, ub = u[:-1], u[1:]
        rows = [
            jnp.sum(r * r, axis=1) - self.length**2,
            jnp.sum(r * ua, axis=1),
            jnp.sum(r * ub, axis=1),
            jnp.sum(ua * ub, axis=1),
            jnp.sum(u[1:5] ** 2, axis=1) - 1.0,
        ]
        return jnp.concatenate(rows)

    def initial_state(self) -> tuple[jax.Array, jax.Array]:
        """The benchmark's initial configuration, at rest."""
        dtype = jnp.result_type(float)
        p = jnp.asarray(_BRICARD_POINTS[1:5], dtype) * self.length
        u = jnp.asarray(_BRICARD_AXES[1:5], dtype)
        q0 = jnp.concatenate([p.ravel(), u.ravel()])
        return q0, jnp.zeros_like(q0)

    def joints(self, q) -> jax.Array:
        """The six joint positions (..., 6, 3); the benchmark's reference point is joint 3
        ($J_3$, initially at $(1, -1, 1)$)."""
        return jax.vmap(lambda x: self._frames(x)[0])(q.reshape(-1, 24)).reshape(
            *q.shape[:-1], 6, 3
        )
